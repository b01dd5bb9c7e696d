//! Table health: optimize write, auto compaction, table properties, checkpoints,
//! OPTIMIZE, VACUUM, health and history.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use bronze::testdata::{GenSpec, generate};

use crate::util::*;

/// `n` small daily batches of 3 topics (`quote_00`, `trade_01`, `orderbook_02`).
fn small_batches(root: &std::path::Path, n: usize) -> Vec<(PathBuf, u64)> {
    (0..n)
        .map(|i| {
            let spec = GenSpec {
                files: 2,
                lines_per_file: 6,
                topics: 3,
                duplicates_per_mille: 0,
                corrupt_per_10k: 0,
                seed: i as u64 + 1,
                ..Default::default()
            };
            let s = generate(root, &format!("d{i:03}"), &spec).unwrap();
            (s.dir, s.lines)
        })
        .collect()
}

/// A lake that loaded `n` small batches with auto compaction off (a small file per batch
/// and table), and its ingest.
fn loaded_without_compaction(n: usize) -> (TempLake, bronze::Ingest) {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(false, 50).build().unwrap();
    for (dir, _) in small_batches(landing.path(), n) {
        ingest.run(&dir).unwrap();
    }
    (lake, ingest)
}

fn files_of(lake: &TempLake, table: &str) -> u64 {
    let m = lake.ingest().build().unwrap();
    let h = m.maintenance().health().unwrap();
    h.tables.iter().find(|t| t.table == table).unwrap().files
}

#[test]
fn health_flags_many_small_files_and_optimize_fixes_them() {
    let landing = tempfile::tempdir().unwrap();
    let batches = small_batches(landing.path(), 55);
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(false, 50).build().unwrap();
    for (dir, _) in &batches {
        let r = ingest.run(dir).unwrap();
        assert_eq!(r.exit_code(), 0, "{}", r.to_text());
    }
    let health = ingest.maintenance().health().unwrap();
    let quote = health
        .tables
        .iter()
        .find(|t| t.table == "quote_00")
        .unwrap();
    let with_quote = lake.rows("quote_00").distinct("_batch_id") as u64;
    assert!(with_quote > 50);
    assert_eq!(quote.files, with_quote, "one file per batch: no compaction");
    assert!(
        quote.flagged && quote.action.contains("optimize"),
        "{quote:?}"
    );
    assert!(
        health.tables[0].flagged,
        "worst first:\n{}",
        health.to_text()
    );
    for w in health.tables.windows(2) {
        let key = |t: &bronze::maintenance::TableHealth| (t.flagged, t.small_files);
        assert!(
            key(&w[0]) >= key(&w[1]),
            "ranked worst first:\n{}",
            health.to_text()
        );
    }
    assert_eq!(quote.versions_since_optimize, None);
    // Checkpoints every 10 commits keep the log short.
    assert!(quote.versions_since_checkpoint < 10, "{quote:?}");
    // deltalake checkpoints after every 10th commit: versions 9, 19, 29, ...
    let ckpt = format!("{:020}.checkpoint", (quote.version + 1) / 10 * 10 - 1);
    let log = std::fs::read_dir(lake.schema_dir().join("quote_00/_delta_log")).unwrap();
    let names: Vec<String> = log
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with(&ckpt)),
        "{ckpt} not in {names:?}"
    );

    let avg_before = quote.avg_file_bytes;
    let before: Vec<String> = lake.tables().iter().map(|t| lake.dump(t)).collect();
    for t in ingest.maintenance().tables().unwrap() {
        let r = ingest.maintenance().optimize(&t, None, &[]).unwrap();
        assert!(r.files_after <= r.files_before);
    }
    let after: Vec<String> = lake.tables().iter().map(|t| lake.dump(t)).collect();
    assert_eq!(before, after, "OPTIMIZE keeps every row");
    let health = ingest.maintenance().health().unwrap();
    let quote = health
        .tables
        .iter()
        .find(|t| t.table == "quote_00")
        .unwrap();
    assert_eq!(quote.files, 1);
    assert!(
        !quote.flagged && quote.avg_file_bytes > avg_before,
        "{quote:?}, average file size before: {avg_before}"
    );
    assert_eq!(quote.versions_since_optimize, Some(0));
    let history = ingest.maintenance().history("quote_00", Some(3)).unwrap();
    assert_eq!(history[0].operation.as_deref(), Some("OPTIMIZE"));
    assert_eq!(history[0].version, quote.version);
}

#[test]
fn auto_compaction_bounds_files_and_old_batches_still_replace_exactly() {
    let landing = tempfile::tempdir().unwrap();
    let batches = small_batches(landing.path(), 60);
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(true, 10).build().unwrap();
    let mut compactions = 0;
    for (dir, _) in &batches {
        let r = ingest.run(dir).unwrap();
        assert_eq!(r.exit_code(), 0, "{}", r.to_text());
        compactions += r
            .run_control
            .iter()
            .filter(|c| c.checks.contains("auto_compacted"))
            .count();
    }
    assert!(compactions > 0);
    for t in [
        "quote_00",
        "trade_01",
        "orderbook_02",
        "levels",
        "currentprice",
    ] {
        assert!(
            files_of(&lake, t) <= 10,
            "{t}: {} files",
            files_of(&lake, t)
        );
    }
    let total = |lake: &TempLake| lake.count("quote_00");
    let per_batch = |lake: &TempLake| lake.rows("quote_00").eq("_batch_id", "d003").len();
    let (t0, b0) = (total(&lake), per_batch(&lake));
    assert!(b0 > 0);
    // Rerun an old batch whose rows now sit in compacted files with other batches' rows.
    ingest.run(&batches[3].0).unwrap();
    assert_eq!((total(&lake), per_batch(&lake)), (t0, b0));
    let messages: u64 = batches.iter().map(|(_, lines)| lines).sum();
    let topic_rows = lake.count("quote_00") + lake.count("trade_01") + lake.count("orderbook_02");
    assert_eq!(topic_rows as u64, messages);
}

#[test]
fn table_properties_are_set_kept_and_honoured() {
    let landing = tempfile::tempdir().unwrap();
    let batches = small_batches(landing.path(), 8);
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(true, 3).build().unwrap();
    ingest.run(&batches[0].0).unwrap();
    let props = table_config(&lake, "quote_00");
    assert_eq!(
        props
            .get("delta.autoOptimize.autoCompact")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        props.get("delta.checkpointInterval").map(String::as_str),
        Some("10")
    );
    assert_eq!(
        props.get("delta.targetFileSize").map(String::as_str),
        Some("134217728")
    );
    // A latency-sensitive table turns auto compaction off; runs keep that setting.
    set_property(&lake, "trade_01", "delta.autoOptimize.autoCompact", "false");
    for (dir, _) in &batches[1..] {
        ingest.run(dir).unwrap();
    }
    assert_eq!(
        table_config(&lake, "trade_01")
            .get("delta.autoOptimize.autoCompact")
            .map(String::as_str),
        Some("false")
    );
    let with_trade = lake.rows("trade_01").distinct("_batch_id") as u64;
    assert!(with_trade > 3);
    assert_eq!(files_of(&lake, "trade_01"), with_trade, "not compacted");
    assert!(files_of(&lake, "quote_00") <= 3, "compacted");
}

fn table_config(lake: &TempLake, table: &str) -> std::collections::HashMap<String, String> {
    lake.with_table(table, None, async |t| {
        t.snapshot().unwrap().metadata().configuration().clone()
    })
}

#[test]
fn zorder_rewrites_every_file_in_the_order_of_its_columns_and_keeps_every_row() {
    let (lake, ingest) = loaded_without_compaction(6);
    let m = ingest.maintenance();
    let before = lake.dump("quote_00");
    let files = files_of(&lake, "quote_00");
    assert!(files >= 3, "{files}");
    // One column: the rows come out sorted by it.
    let one = m.optimize("quote_00", None, &["symbol".into()]).unwrap();
    assert_eq!(
        (one.files_before, one.files_removed, one.files_after),
        (files, files, 1)
    );
    assert_eq!(lake.dump("quote_00"), before, "Z-order changed the rows");
    let symbols = lake.rows("quote_00").values("symbol");
    let mut sorted = symbols.clone();
    sorted.sort();
    assert_eq!(symbols, sorted);
    // Two columns, one file already: every file is still rewritten (in one commit).
    let two = m
        .optimize("quote_00", None, &["symbol".into(), "_line".into()])
        .unwrap();
    assert_eq!(
        (two.files_removed, two.files_after, two.version),
        (1, 1, one.version + 1)
    );
    assert_eq!(lake.dump("quote_00"), before);
    // A column the table does not have: refused by name, nothing committed.
    let err = m.optimize("quote_00", None, &["nope".into()]).unwrap_err();
    let why = bronze::error_chain(&err);
    assert!(why.contains("Z-order column `nope`"), "{why}");
    assert_eq!(
        m.history("quote_00", Some(1)).unwrap()[0].version,
        two.version
    );
}

#[test]
fn vacuum_removes_only_old_unreferenced_files_and_refuses_short_retention() {
    let (lake, ingest) = loaded_without_compaction(4);
    let m = ingest.maintenance();
    let opt = m.optimize("quote_00", None, &[]).unwrap();
    let with_quote = lake.rows("quote_00").distinct("_batch_id") as u64;
    assert!(with_quote >= 2);
    assert_eq!((opt.files_before, opt.files_after), (with_quote, 1));
    let before = lake.dump("quote_00");

    let err = m
        .vacuum_table("quote_00")
        .with_retention_hours(1)
        .execute()
        .unwrap_err();
    assert!(err.to_string().contains("--force"), "{err}");
    // The replaced files are minutes old: within the default 7 days, nothing goes.
    assert!(
        m.vacuum_table("quote_00")
            .with_dry_run(true)
            .execute()
            .unwrap()
            .files
            .is_empty()
    );
    // Eight days later they are past the retention; the live file is never listed.
    let later = chrono::Utc::now().timestamp_millis() + 8 * 24 * 3600 * 1000;
    let dry = m
        .vacuum_table("quote_00")
        .with_dry_run(true)
        .with_clock(later)
        .execute()
        .unwrap();
    assert_eq!(dry.files.len() as u64, with_quote, "{:?}", dry.files);
    assert!(dry.bytes > 0);
    let done = m
        .vacuum_table("quote_00")
        .with_clock(later)
        .execute()
        .unwrap();
    assert_eq!(done.files.len() as u64, with_quote);
    assert_eq!(lake.dump("quote_00"), before, "every row still readable");
    let parquet = std::fs::read_dir(lake.schema_dir().join("quote_00"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".parquet")
        })
        .count();
    assert_eq!(parquet, 1);
}

#[test]
fn vacuum_and_maintain_keep_removed_files_for_the_tables_own_retention() {
    let (lake, ingest) = loaded_without_compaction(4);
    let m = ingest.maintenance();
    m.optimize("quote_00", None, &[]).unwrap();
    set_property(
        &lake,
        "quote_00",
        "delta.deletedFileRetentionDuration",
        "interval 30 days",
    );
    let removed = lake.rows("quote_00").distinct("_batch_id");
    let days = |d: i64| chrono::Utc::now().timestamp_millis() + d * 24 * 3600 * 1000;
    let dry = |now: i64| {
        m.vacuum_table("quote_00")
            .with_dry_run(true)
            .with_clock(now)
            .execute()
            .unwrap()
            .files
            .len()
    };
    // Ten days on, within the table's 30 days: nothing goes, as Spark's VACUUM keeps it.
    assert_eq!(dry(days(10)), 0);
    let maintained = m.maintain().with_clock(days(10)).execute().unwrap();
    let quote = maintained
        .tables
        .iter()
        .find(|t| t.table == "quote_00")
        .unwrap();
    assert_eq!(quote.error, None);
    assert_eq!(quote.vacuum.as_ref().map(|v| v.files.len()), Some(0));
    // A shorter retention than the table's is refused by name, unless forced.
    let err = m
        .vacuum_table("quote_00")
        .with_retention_hours(200)
        .with_dry_run(true)
        .execute()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("delta.deletedFileRetentionDuration") && err.contains("720h"),
        "{err}"
    );
    let forced = m
        .vacuum_table("quote_00")
        .with_retention_hours(200)
        .with_force(true)
        .with_dry_run(true)
        .with_clock(days(10))
        .execute()
        .unwrap();
    assert_eq!(forced.files.len(), removed);
    // Past the 30 days they go.
    assert_eq!(dry(days(31)), removed);
}

#[test]
fn concurrent_ingest_optimize_and_vacuum_lose_nothing() {
    // VACUUM runs as if a month had passed with no retention (forced): every file no
    // snapshot references goes at once, including the data files of a write that has
    // not committed yet, were it not for the table locks maintenance shares with writes.
    let month_later = chrono::Utc::now().timestamp_millis() + 30 * 24 * 3_600_000;
    let landing = tempfile::tempdir().unwrap();
    let batches = small_batches(landing.path(), 12);
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(false, 50).build().unwrap();
    let done = AtomicBool::new(false);
    let optimized = std::thread::scope(|s| {
        let optimizer = s.spawn(|| {
            let mut runs = 0;
            while !done.load(Ordering::SeqCst) {
                for t in ingest.maintenance().tables().unwrap() {
                    ingest.maintenance().optimize(&t, None, &[]).unwrap();
                    ingest
                        .maintenance()
                        .vacuum_table(&t)
                        .with_retention_hours(0)
                        .with_force(true)
                        .with_clock(month_later)
                        .execute()
                        .unwrap();
                }
                runs += 1;
            }
            runs
        });
        for (dir, _) in &batches {
            let r = ingest.run(dir).unwrap();
            assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
        }
        done.store(true, Ordering::SeqCst);
        optimizer.join().unwrap()
    });
    assert!(optimized > 0);
    let messages: u64 = batches.iter().map(|(_, lines)| lines).sum();
    let topic_rows = lake.count("quote_00") + lake.count("trade_01") + lake.count("orderbook_02");
    assert_eq!(topic_rows as u64, messages);
    for t in ["quote_00", "trade_01", "orderbook_02"] {
        assert_eq!(
            lake.rows(t).distinct("_id"),
            lake.count(t),
            "no duplicates in {t}"
        );
    }
}

#[test]
fn maintenance_commands_on_the_cli() {
    let lake = TempLake::new();
    let bronze = crate::util::bronze_cli;
    let ok = bronze()
        .args(["ingest", "--catalog"])
        .arg(lake.catalog())
        .arg(batch_dir(BATCH2))
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
    let run = |args: &[&str]| {
        let out = on_catalog(&lake, args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, _) = run(&["health", "--json"]);
    assert_eq!(code, Some(0));
    let health: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        health["tables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["table"] == "quote")
    );
    let (code, out, _) = run(&["history", "quote", "--limit", "1", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (code, out, _) = run(&["optimize", "--all"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("quote:"));
    let (code, _, err) = run(&["vacuum", "--all", "--retain", "1h"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--force"), "{err}");
    let (code, out, _) = run(&["vacuum", "quote", "--dry-run"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("would delete 0 files"), "{out}");
    let (code, out, _) = run(&["checkpoint", "--all"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("quote: checkpoint at version"), "{out}");
    let (code, _, err) = run(&["optimize", "../etc"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no table"), "{err}");
    assert_eq!(
        lake.count("quote"),
        expected_tables(BATCH2)["quote"] as usize
    );
}

#[test]
fn two_hundred_landing_files_give_one_file_per_table() {
    let landing = tempfile::tempdir().unwrap();
    let spec = GenSpec {
        files: 200,
        lines_per_file: 2,
        topics: 6,
        ..Default::default()
    };
    let b = generate(landing.path(), "daily", &spec).unwrap();
    let lake = TempLake::new();
    let r = lake.ingest().build().unwrap().run(&b.dir).unwrap();
    assert_eq!(r.files_read, 200);
    assert!(r.tables.len() >= 8, "{}", r.to_text());
    for row in r
        .run_control
        .iter()
        .filter(|r| r.table != bronze::INVARIANT_ROW)
    {
        assert_eq!(row.files_added, 1, "{row:?}");
    }
    for t in lake.tables() {
        assert_eq!(files_of(&lake, &t), 1, "{t}");
    }
}

/// `history`'s text on a table with an append (two batches), a replace (a rerun) and an
/// OPTIMIZE, against `tests/golden/history_quote.txt`; times and durations, which differ
/// per run, are checked for their shape and then masked. `BRONZE_BLESS=1` rewrites the
/// golden file.
#[test]
fn history_shows_an_append_a_replace_and_an_optimize_as_people_read_them() {
    let lake = TempLake::new();
    let run = |args: &[&str]| {
        let out = on_catalog(&lake, args);
        // 1: the first batch's corrupt lines.
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{args:?}: {out:?}"
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for batch in [BATCH1, BATCH2, BATCH2] {
        run(&["ingest", batch_dir(batch).to_str().unwrap()]);
    }
    run(&["optimize", "quote"]);
    let text = run(&["history", "quote"]);
    let time = |t: &str| {
        t.len() == "2026-12-01T22:10:03.123Z".len()
            && t.ends_with('Z')
            && chrono::DateTime::parse_from_rfc3339(t).is_ok()
    };
    let masked: String = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            if i == 0 {
                return format!("{line}\n");
            }
            // version, time, operation, rows +, rows -, files +, files -, duration.
            let cols: Vec<&str> = line.split_whitespace().collect();
            assert!(time(cols[1]), "a UTC ISO 8601 time: {line}");
            let mut line = line.replacen(cols[1], "<time>                  ", 1);
            if let Some(at) = line
                .find(" ms  ")
                .or(line.strip_suffix(" ms").map(str::len))
            {
                let start = line[..at].rfind(' ').unwrap() + 1;
                assert!(line[start..at].parse::<u64>().is_ok(), "{line}");
                // The column is 9 wide, right-aligned: masked whatever the digits.
                line.replace_range(at + 3 - 9..at + 3, &format!("{:>9}", "# ms"));
            }
            format!("{line}\n")
        })
        .collect();
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/history_quote.txt");
    if std::env::var_os("BRONZE_BLESS").is_some() {
        std::fs::write(&golden, &masked).unwrap();
    }
    assert_eq!(
        masked,
        std::fs::read_to_string(&golden).unwrap(),
        "\n{text}"
    );
    // `--json` keeps machine values: epoch milliseconds named as such, numbers as numbers.
    let json: serde_json::Value =
        serde_json::from_str(&run(&["history", "quote", "--json"])).unwrap();
    let newest = &json[0];
    assert_eq!(newest["action"], "optimize");
    assert!(newest["timestamp_millis"].as_i64().unwrap() > 1_700_000_000_000);
    let replace = &json[1];
    assert_eq!(replace["action"], "replace");
    assert_eq!(replace["rows_removed"], replace["rows_added"]);
    assert_scalar_metrics(&lake.schema_dir().join("quote"));
}

/// Every `operationMetrics` value in the log of the table at `dir` is a scalar: Spark
/// reads the metrics as a map of strings (its history, change feed and stream sources),
/// and fails on a nested object.
fn assert_scalar_metrics(dir: &std::path::Path) {
    let mut commits = 0;
    for entry in std::fs::read_dir(dir.join("_delta_log")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            let Some(metrics) = action["commitInfo"].get("operationMetrics") else {
                continue;
            };
            commits += 1;
            for (key, value) in metrics.as_object().unwrap() {
                assert!(
                    !value.is_object() && !value.is_array(),
                    "{}: operationMetrics.{key} is {value}",
                    path.display()
                );
            }
        }
    }
    assert!(commits >= 4, "{commits} commits with metrics");
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                bytes_under(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

/// A simulated year: 365 daily batches, `bronze maintain` after every 7th with the clock
/// a day further per batch (its VACUUM and log retention count from there), then the
/// first batch and the last rerun. Every row is there once; each table's log keeps a
/// few entries past its latest checkpoint, `_run_control` a few files, the catalog's
/// bytes stay within 2x of what its live files and latest checkpoints hold, and `health`
/// has nothing left to do.
#[test]
fn a_simulated_year_of_daily_batches_with_weekly_maintain_stays_small_and_exact() {
    const DAY_MS: i64 = 86_400_000;
    let landing = tempfile::tempdir().unwrap();
    let root = landing.path().join("feed/daily");
    let batches: Vec<(PathBuf, u64)> = (0..365)
        .map(|i| {
            let spec = GenSpec {
                files: 1,
                lines_per_file: 6,
                topics: 3,
                duplicates_per_mille: 0,
                corrupt_per_10k: 0,
                seed: i as u64 + 1,
                ..Default::default()
            };
            let s = generate(&root, &format!("d{i:03}"), &spec).unwrap();
            (s.dir, s.lines)
        })
        .collect();
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let day0 = chrono::Utc::now().timestamp_millis();
    let maintain = |day: i64| {
        let report = ingest
            .maintenance()
            .maintain()
            .with_clock(day0 + day * DAY_MS)
            .execute()
            .unwrap();
        assert!(!report.failed(), "day {day}: {}", report.to_text());
        report
    };
    let mut vacuumed = 0;
    let mut logs_removed = 0;
    for (i, (dir, _)) in batches.iter().enumerate() {
        let r = ingest.run(dir).unwrap();
        assert_eq!(r.exit_code(), 0, "{}", r.to_text());
        if (i + 1) % 7 == 0 {
            let report = maintain(i as i64 + 1);
            vacuumed += report
                .tables
                .iter()
                .filter_map(|t| t.vacuum.as_ref())
                .map(|v| v.files.len())
                .sum::<usize>();
            logs_removed += report.tables.iter().map(|t| t.logs_removed).sum::<usize>();
        }
    }
    assert!(
        vacuumed > 0 && logs_removed > 0,
        "{vacuumed} {logs_removed}"
    );
    // The first batch and the last, rerun: replaced, never duplicated.
    for (dir, _) in [&batches[0], &batches[364]] {
        let r = ingest.run(dir).unwrap();
        assert_eq!(r.exit_code(), 0, "{}", r.to_text());
    }
    assert_readable_without_duplicates(&lake, "after a year");
    // Only `_run_control` records the batches' `txn`s: the data tables' sets stay empty.
    let first = "bronze/feed/daily/d000";
    for t in ["quote_00", "trade_01", "orderbook_02", "_corrupt_records"] {
        if lake.schema_dir().join(t).is_dir() {
            assert_eq!(txn_version(&lake, t, first), None, "{t}");
        }
    }
    assert!(txn_version(&lake, "_run_control", first).is_some());
    let lines: u64 = batches.iter().map(|(_, l)| l).sum();
    let rows: usize = ["quote_00", "trade_01", "orderbook_02"]
        .iter()
        .map(|t| lake.count(t))
        .sum();
    assert_eq!(rows as u64, lines);
    maintain(372);
    let health = ingest.maintenance().health().unwrap();
    for t in &health.tables {
        assert_eq!(t.action, "none", "{t:?}");
        let log = lake.schema_dir().join(&t.table).join("_delta_log");
        let commits = std::fs::read_dir(&log)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".json")
            })
            .count();
        assert!(commits <= 12, "{}: {commits} commits in the log", t.table);
    }
    let rc = health
        .tables
        .iter()
        .find(|t| t.table == "_run_control")
        .unwrap();
    assert!(rc.files <= 50, "{rc:?}");
    let live: u64 = health.tables.iter().map(|t| t.bytes).sum();
    let checkpoints: u64 = health
        .tables
        .iter()
        .map(|t| {
            std::fs::read_dir(lake.schema_dir().join(&t.table).join("_delta_log"))
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
                .map(|e| e.metadata().unwrap().len())
                .sum::<u64>()
        })
        .sum();
    let on_disk = bytes_under(&lake.schema_dir());
    assert!(
        on_disk <= 2 * (live + checkpoints),
        "{on_disk} bytes on disk for {live} live and {checkpoints} of checkpoints"
    );
}

/// `bronze maintain` does what `health` recommends: within `--max-tables 1` it visits the
/// worst table alone and lists the others as not reached; two processes at once both
/// finish and lose nothing; then `health` has nothing to do and every row is as before.
#[test]
fn maintain_does_what_health_recommends_within_its_bounds_and_two_at_once_lose_nothing() {
    let landing = tempfile::tempdir().unwrap();
    let batches = small_batches(landing.path(), 55);
    let lake = TempLake::new();
    let ingest = lake.ingest().with_auto_compact(false, 50).build().unwrap();
    for (dir, _) in &batches {
        assert_eq!(ingest.run(dir).unwrap().exit_code(), 0);
    }
    let before = snapshot(&lake);
    let health = ingest.maintenance().health().unwrap();
    let worst = health.tables[0].table.clone();
    assert!(
        health.tables[0].action.contains("optimize"),
        "{:?}",
        health.tables[0]
    );
    let json = |out: std::process::Output| -> serde_json::Value {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let one = json(on_catalog(
        &lake,
        &["maintain", "--json", "--max-tables", "1"],
    ));
    assert_eq!(one["tables"].as_array().unwrap().len(), 1, "{one}");
    assert_eq!(one["tables"][0]["table"], worst.as_str());
    assert!(
        one["tables"][0]["optimize"]["files_removed"]
            .as_u64()
            .unwrap()
            > 50,
        "{one}"
    );
    assert_eq!(
        one["not_reached"].as_array().unwrap().len(),
        health.tables.len() - 1,
        "{one}"
    );
    // Two at once: each step under the table's lock, a lost race reported, never a loss.
    let spawn = || {
        crate::util::bronze_cli()
            .args(["maintain", "--catalog"])
            .arg(lake.catalog())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // A step that lost to the other process's commit is reported (exit 2); the next
        // run does it.
        assert!(
            out.status.code().is_some_and(|c| c < 3),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("tables visited"), "{text}");
    }
    json(on_catalog(&lake, &["maintain", "--json"]));
    let after = ingest.maintenance().health().unwrap();
    for t in &after.tables {
        assert_eq!(t.action, "none", "{t:?}");
    }
    assert_eq!(snapshot(&lake), before);
    assert_readable_without_duplicates(&lake, "after maintain");
    // A table that cannot be opened is reported (exit 2); every other one is visited.
    let broken = lake.schema_dir().join("zz_broken/_delta_log");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("00000000000000000000.json"), b"not a commit\n").unwrap();
    let out = on_catalog(&lake, &["maintain", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let visited = report["tables"].as_array().unwrap();
    assert_eq!(visited.len(), after.tables.len() + 1, "{report}");
    let failed: Vec<&serde_json::Value> =
        visited.iter().filter(|t| !t["error"].is_null()).collect();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0]["table"], "zz_broken", "{report}");
}
