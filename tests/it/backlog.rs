//! A landing zone as a backlog (`bronze ingest --pending`): every batch not loaded
//! successfully is loaded, oldest first per entity; a failed batch is pending again and
//! holds its entity's later batches back; worker processes started together load each
//! batch once.

use std::path::{Path, PathBuf};

use bronze::BatchStatus;

use crate::util::*;

/// `landing/<source>/<entity>/batch_id=<id>` copies of the fixture batch for every
/// entity and id; the landing root.
fn landing_zone(root: &Path, entities: &[&str], ids: &[&str]) -> PathBuf {
    let landing = root.join("landing");
    for entity in entities {
        for id in ids {
            bronze::testdata::copy_tree(
                &batch_dir(BATCH1),
                &landing.join(entity).join(format!("batch_id={id}")),
            )
            .unwrap();
        }
    }
    landing
}

fn names(outcomes: &[bronze::BacklogOutcome]) -> Vec<(String, String, BatchStatus)> {
    outcomes
        .iter()
        .map(|o| {
            (
                o.batch.landing_path.clone(),
                o.batch.batch_id.clone(),
                o.status,
            )
        })
        .collect()
}

/// Table rows equal `batches` copies of the fixture batch's.
fn assert_copies(lake: &TempLake, batches: u64) {
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, batches * rows, "{table}");
    }
}

#[test]
fn pending_loads_every_unloaded_batch_oldest_first_and_then_none() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s1/e1", "s1/e2", "s2/e1"], &["d2", "d1"]);
    let lake = TempLake::new();
    // One batch loaded before, on its own.
    let ingest = lake.ingest().build().unwrap();
    ingest.run(landing.join("s1/e2/batch_id=d1")).unwrap();
    let pending = ingest.pending(&landing).unwrap();
    let listed: Vec<(String, String)> = pending
        .iter()
        .map(|b| (b.landing_path.clone(), b.batch_id.clone()))
        .collect();
    let pair = |lp: &str, id: &str| (lp.to_string(), id.to_string());
    assert_eq!(
        listed,
        [
            pair("s1/e1", "d1"),
            pair("s2/e1", "d1"),
            pair("s1/e1", "d2"),
            pair("s1/e2", "d2"),
            pair("s2/e1", "d2"),
        ]
    );
    let outcomes = ingest
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    assert!(
        outcomes.iter().all(|o| o.status == BatchStatus::Loaded),
        "{:?}",
        names(&outcomes)
    );
    assert_eq!(outcomes.len(), 5);
    assert_copies(&lake, 6);
    assert!(ingest.pending(&landing).unwrap().is_empty());
    assert!(
        ingest
            .run_pending(&landing, &bronze::PendingOptions::default())
            .unwrap()
            .is_empty()
    );
    // Only the entity under a narrower root.
    std::fs::create_dir_all(landing.join("s2/e1/batch_id=d3")).unwrap();
    bronze::testdata::copy_tree(&batch_dir(BATCH1), &landing.join("s2/e1/batch_id=d3")).unwrap();
    let narrow = ingest.pending(landing.join("s1")).unwrap();
    assert!(narrow.is_empty(), "{narrow:?}");
    assert_eq!(ingest.pending(landing.join("s2/e1")).unwrap().len(), 1);
}

#[test]
fn a_failed_batch_is_pending_again_and_holds_its_entitys_later_batches_back() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2"]);
    // `s/a`'s first batch has a file that cannot be read (simulated).
    std::fs::write(
        landing.join("s/a/batch_id=d1/part-unreadable.jsonl"),
        b"{\"topic\":\"t\",\"message_id\":\"m\"}\n",
    )
    .unwrap();
    let lake = TempLake::new();
    let failing = lake
        .ingest()
        .with_failpoint("unreadable_file")
        .build()
        .unwrap();
    let outcomes = failing
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    let pair = |lp: &str, id: &str, s| (lp.to_string(), id.to_string(), s);
    assert_eq!(
        names(&outcomes),
        [
            pair("s/a", "d1", BatchStatus::Failed),
            pair("s/b", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Waiting),
            pair("s/b", "d2", BatchStatus::Loaded),
        ]
    );
    assert!(
        outcomes[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("unreadable"),
        "{:?}",
        outcomes[0].reason
    );
    assert!(
        outcomes[2].reason.as_deref().unwrap_or("").contains("d1"),
        "{:?}",
        outcomes[2].reason
    );
    // Once the file can be read, the next invocation loads what is left, in order.
    let outcomes = lake
        .ingest()
        .build()
        .unwrap()
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    assert_eq!(
        names(&outcomes),
        [
            pair("s/a", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Loaded),
        ]
    );
}

/// A folder whose name cannot be a batch (`batch_id=bad id`) is skipped with a warning,
/// not a reason to stop the backlog; `--pending` refuses the flags that name one batch.
#[test]
fn a_folder_that_cannot_be_a_batch_is_skipped_and_single_batch_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1"]);
    std::fs::create_dir_all(landing.join("s/a/batch_id=bad id")).unwrap();
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let pending = ingest.pending(&landing).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].batch_id, "d1");
    for flag in [["--landing-path", "s/a"], ["--batch-id", "d9"]] {
        let out = bronze_cli()
            .args(["ingest", "--pending", "--catalog"])
            .arg(lake.catalog())
            .args(flag)
            .arg(&landing)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}

/// With `require_success`, a folder without `_SUCCESS` is not ready and holds its
/// entity's later batches back; once the marker is there, both load in order.
#[test]
fn with_require_success_a_folder_without_its_marker_waits() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2"]);
    std::fs::remove_file(landing.join("s/a/batch_id=d1/_SUCCESS")).unwrap();
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let options = bronze::PendingOptions::default().with_require_success(true);
    let pair = |lp: &str, id: &str, s| (lp.to_string(), id.to_string(), s);
    assert_eq!(
        names(&ingest.run_pending(&landing, &options).unwrap()),
        [
            pair("s/a", "d1", BatchStatus::NotReady),
            pair("s/b", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Waiting),
            pair("s/b", "d2", BatchStatus::Loaded),
        ]
    );
    std::fs::write(landing.join("s/a/batch_id=d1/_SUCCESS"), b"").unwrap();
    assert_eq!(
        names(&ingest.run_pending(&landing, &options).unwrap()),
        [
            pair("s/a", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Loaded),
        ]
    );
}

#[test]
fn at_most_max_batches_run_in_one_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1", "d2", "d3"]);
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let first = ingest
        .run_pending(
            &landing,
            &bronze::PendingOptions::default().with_max_batches(Some(2)),
        )
        .unwrap();
    assert_eq!(first.len(), 2);
    let rest = ingest
        .run_pending(
            &landing,
            &bronze::PendingOptions::default().with_max_batches(Some(2)),
        )
        .unwrap();
    assert_eq!(
        names(&rest),
        [("s/a".into(), "d3".into(), BatchStatus::Loaded)]
    );
}

/// Batches a `--pending --json` run reports loaded.
fn loaded_in(stdout: &[u8]) -> usize {
    let outcomes: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    outcomes
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["status"] == "loaded")
        .count()
}

/// Three `bronze ingest --pending` processes started together on 2 entities × 4
/// batches, then one more to sweep up what waited: each batch loaded by exactly one
/// successful run, the tables hold each batch once.
#[test]
fn worker_processes_on_one_backlog_load_each_batch_once() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2", "d3", "d4"]);
    let lake = TempLake::new();
    let worker = || {
        let mut c = bronze_cli();
        c.args(["ingest", "--pending", "--json", "--catalog"])
            .arg(lake.catalog())
            .arg(&landing)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().unwrap()
    };
    let workers: Vec<_> = (0..3).map(|_| worker()).collect();
    let mut loaded = 0;
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        loaded += loaded_in(&out.stdout);
    }
    let sweep = bronze_cli()
        .args(["ingest", "--pending", "--json", "--catalog"])
        .arg(lake.catalog())
        .arg(&landing)
        .output()
        .unwrap();
    loaded += loaded_in(&sweep.stdout);
    assert_eq!(loaded, 8, "each batch loaded once");
    assert_eq!(
        lake.rows("_run_control")
            .eq("table", "(batch)")
            .eq("status", "ok")
            .len(),
        8,
        "one successful run per batch"
    );
    assert_copies(&lake, 8);
    assert!(leases(&lake).is_empty());
}

#[test]
fn status_counts_loaded_pending_failed_and_in_progress_batches_per_entity() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2", "d3"]);
    let lake = TempLake::new();
    let folder = |e: &str, id: &str| landing.join(e).join(format!("batch_id={id}"));
    lake.ingest()
        .build()
        .unwrap()
        .run(folder("s/a", "d1"))
        .unwrap();
    // s/b's d1 runs to the end but its row accounting fails (a row lost, simulated).
    let lossy = lake.ingest().with_failpoint("lose_a_row").build().unwrap();
    let report = lossy.run(folder("s/b", "d1")).unwrap();
    assert!(!report.invariant_ok);
    // A live run holds s/a's d2; s/b's d3 has a lease its run stopped renewing an hour ago.
    let leases = lake.schema_dir().join(bronze::lease::LEASE_DIR);
    std::fs::create_dir_all(&leases).unwrap();
    let now = chrono::Utc::now().timestamp_micros();
    let holder = |run_id: &str, at: i64| bronze::lease::Holder {
        run_id: run_id.to_string(),
        host: "worker-7".to_string(),
        pid: 4242,
        pid_start: None,
        since_micros: at,
        renewed_micros: Some(at),
        released_micros: None,
    };
    for (landing_path, id, h) in [
        ("s/a", "d2", holder("d2-live", now - 5_000_000)),
        ("s/b", "d3", holder("d3-dead", now - 3_600_000_000)),
    ] {
        let file = leases.join(bronze::lease::lease_file(landing_path, id));
        std::fs::write(file, serde_json::to_vec(&h).unwrap()).unwrap();
    }

    let status = lake.ingest().build().unwrap().status(&landing).unwrap();
    let a = &status[0];
    assert_eq!(a.landing_path, "s/a");
    assert_eq!((a.loaded, a.pending, a.failed), (1, 1, 0));
    assert_eq!(a.oldest_pending.as_deref(), Some("d2"));
    assert_eq!(a.in_progress.len(), 1);
    let live = &a.in_progress[0];
    assert_eq!(
        (
            live.batch_id.as_str(),
            live.run_id.as_str(),
            live.host.as_str(),
            live.pid
        ),
        ("d2", "d2-live", "worker-7", 4242)
    );
    assert!(!live.stale && live.age_seconds >= 5.0, "{live:?}");
    assert!(a.last_failure.is_none());
    let b = &status[1];
    assert_eq!(b.landing_path, "s/b");
    assert_eq!((b.loaded, b.pending, b.failed), (0, 1, 1));
    assert_eq!(b.oldest_pending.as_deref(), Some("d1"));
    assert!(b.in_progress[0].stale, "{:?}", b.in_progress);
    let failure = b.last_failure.as_ref().expect("s/b's failure");
    assert_eq!(failure.batch_id, "d1");
    assert!(failure.reason.contains("(batch)"), "{}", failure.reason);
    assert_eq!(status.len(), 2);

    // The command: the same as JSON, and a table that names the stale lease.
    let cli = |json: bool| {
        let mut c = bronze_cli();
        c.arg("status")
            .arg(&landing)
            .arg("--catalog")
            .arg(lake.catalog());
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json: serde_json::Value = serde_json::from_str(&cli(true)).unwrap();
    assert_eq!(json[1]["failed"], 1);
    assert_eq!(json[0]["in_progress"][0]["run_id"], "d2-live");
    let text = cli(false);
    assert!(
        text.contains("s/b/batch_id=d3: loading by run d3-dead"),
        "{text}"
    );
    assert!(text.contains("likely dead"), "{text}");
    assert!(
        text.contains("s/b/batch_id=d1: last run failed: (batch)"),
        "{text}"
    );
}

/// The `bronze status` example of docs/backlog.md, run as written (the catalog a temporary
/// folder) after loading the first fixture batch, prints the table the page shows.
#[test]
fn readme_status_example_prints_what_readme_shows() {
    let section = doc_section("## A landing zone, not a batch", "bronze status ");
    let command = section
        .lines()
        .find(|l| l.starts_with("bronze status "))
        .expect("a status command");
    let shown = section
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the status table");
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let args: Vec<String> = command
        .trim_start_matches("bronze ")
        .split_whitespace()
        .map(|a| match a {
            "./lakehouse" => lake.catalog().display().to_string(),
            other => other.to_string(),
        })
        .collect();
    let out = bronze_cli()
        .current_dir(repo())
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), shown);
}

#[test]
fn max_bytes_starts_no_batch_past_the_bound_and_never_cuts_one() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1", "d2", "d3"]);
    let batch_bytes: u64 = std::fs::read_dir(batch_dir(BATCH1))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let lake = TempLake::new();
    let pending = |max_bytes: u64| {
        let out = bronze_cli()
            .args(["ingest", "--json", "--pending"])
            .arg(&landing)
            .arg("--catalog")
            .arg(lake.catalog())
            .args(["--max-bytes", &max_bytes.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.code().unwrap_or(9) < 2,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let outcomes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        outcomes
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["batch"]["batch_id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // One and a half batches' worth: the second batch crosses it and is finished.
    assert_eq!(pending(batch_bytes * 3 / 2), ["d1", "d2"]);
    // One byte: one batch.
    assert_eq!(pending(1), ["d3"]);
    assert_copies(&lake, 3);
    // A size it cannot read is refused.
    let out = bronze_cli()
        .args(["ingest", "--pending"])
        .arg(&landing)
        .args(["--max-bytes", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a size"));
}

/// Lines of a child's output, read as they come.
fn lines_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    seen: &mut Vec<String>,
    wanted: impl Fn(&str) -> bool,
) {
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = wanted(&line);
        seen.push(line);
        if done {
            return;
        }
    }
    panic!("the output ended before the line wanted: {seen:#?}");
}

#[test]
fn watch_loads_a_batch_landed_after_it_started_skips_a_growing_one_and_stops_on_ctrl_c() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1"]);
    // s/b's batch has a file the copy step is still writing (it grows while read,
    // simulated by the `grow_file` failpoint on `*growing*` files), every round.
    std::fs::write(
        landing.join("s/b/batch_id=d1/part-growing.jsonl"),
        b"{\"topic\":\"quote\",\"message_id\":\"g1\",\"payload\":{\"px\":1}}\n",
    )
    .unwrap();
    let lake = TempLake::new();
    let mut child = bronze_cli()
        .args(["ingest", "--pending"])
        .arg(&landing)
        .arg("--catalog")
        .arg(lake.catalog())
        .args(["--watch", "--interval", "200ms"])
        .env("BRONZE_FAILPOINT", "grow_file")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    lines_until(&mut lines, &mut seen, |l| l.contains(" pending: "));
    let first_round = seen.join("\n");
    assert!(first_round.contains("s/a/batch_id=d1"), "{first_round}");
    assert!(
        seen.iter()
            .any(|l| l.starts_with("changing") && l.contains("s/b/batch_id=d1")),
        "{first_round}"
    );
    // A batch lands (renamed into place, as a copy step's last move) while it watches.
    let staging = landing.join("s/a/.landing-d2");
    bronze::testdata::copy_tree(&batch_dir(BATCH1), &staging).unwrap();
    std::fs::rename(&staging, landing.join("s/a/batch_id=d2")).unwrap();
    lines_until(&mut lines, &mut seen, |l| {
        l.starts_with("loaded") && l.contains("s/a/batch_id=d2")
    });
    // Ctrl-C: it exits once the round is over (exit 1: the fixture has corrupt lines).
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stopping once the batch in flight is committed"),
        "{stderr}"
    );
    // s/a's two batches once each; nothing of the growing folder.
    let loaded: Vec<&String> = seen.iter().filter(|l| l.starts_with("loaded")).collect();
    assert_eq!(loaded.len(), 2, "{seen:#?}");
    assert_copies(&lake, 2);
}

/// (landing path, batch id, started µs, ended µs) of each successful run, from
/// `_run_control`.
fn runs(lake: &TempLake) -> Vec<(String, String, i64, i64)> {
    lake.rows("_run_control")
        .eq("table", "(batch)")
        .eq("status", "ok")
        .iter()
        .map(|r| {
            (
                r.get("landing_paths").unwrap(),
                r.get("_batch_id").unwrap(),
                r.micros("started_at").unwrap(),
                r.micros("ended_at").unwrap(),
            )
        })
        .collect()
}

/// `--max-batches-in-flight 2` on 2 entities × 3 batches: the entities' batches load at
/// the same time (runs of different entities overlap), each entity's in batch id order
/// (each run starts after the previous one of its entity ended); every batch once. With
/// `--max-batches 3` too, 3 batches run between the two in flight, not 3 each.
#[test]
fn batches_in_flight_overlap_across_entities_keep_order_within_one_and_share_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2", "d3"]);
    let in_flight = |lake: &TempLake, extra: &[&str]| {
        bronze_cli()
            .args([
                "ingest",
                "--pending",
                "--json",
                "--max-batches-in-flight",
                "2",
            ])
            .args(extra)
            .arg("--catalog")
            .arg(lake.catalog())
            .arg(&landing)
            .output()
            .unwrap()
    };
    let lake = TempLake::new();
    let out = in_flight(&lake, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(loaded_in(&out.stdout), 6);
    assert_copies(&lake, 6);
    let runs = runs(&lake);
    assert_eq!(runs.len(), 6);
    for entity in ["s/a", "s/b"] {
        let mut own: Vec<_> = runs.iter().filter(|r| r.0 == entity).collect();
        own.sort_by_key(|r| r.2);
        let ids: Vec<&str> = own.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(ids, ["d1", "d2", "d3"], "{entity} in batch id order");
        assert!(
            own.windows(2).all(|w| w[1].2 >= w[0].3),
            "{entity}: one at a time"
        );
    }
    let overlap = runs.iter().any(|a| {
        runs.iter()
            .any(|b| a.0 == "s/a" && b.0 == "s/b" && a.2 < b.3 && b.2 < a.3)
    });
    assert!(overlap, "runs of the two entities overlapped: {runs:?}");

    let bounded = TempLake::new();
    let out = in_flight(&bounded, &["--max-batches", "3"]);
    assert_eq!(
        loaded_in(&out.stdout),
        3,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_copies(&bounded, 3);
}

/// Each entity's ledger (`<schema>/_bronze_ledger/`) holds the latest run of its batches;
/// the backlog reads it and the `_run_control` commits since. A ledger lost or garbled is
/// rebuilt from `_run_control`; a rerun of an old batch that fails makes it pending again;
/// a folder that lands late with an older batch id is pending at once (local landing zones
/// are listed in full) and loads before the entity's newer batches.
#[test]
fn the_ledger_is_rebuilt_when_lost_and_follows_failed_reruns_and_late_folders() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d2", "d3"]);
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let all = bronze::PendingOptions::default();
    let outcomes = ingest.run_pending(&landing, &all).unwrap();
    assert_eq!(outcomes.len(), 2, "{:?}", names(&outcomes));
    let ledger = lake.schema_dir().join("_bronze_ledger/s+a.json");
    assert!(ingest.pending(&landing).unwrap().is_empty());
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(written["landing_path"], "s/a");
    assert_eq!(written["listed_through"], "d3");
    // Every batch id in order with its run's start; no failed one.
    assert_eq!(written["batches"]["ids"], "d2 d3");
    let started = written["batches"]["started"].as_str().unwrap();
    assert_eq!(started.split(' ').count(), 2);
    assert!(written["batches"].get("failed").is_none());
    // Garbled, then lost: rebuilt, and nothing is pending.
    std::fs::write(&ledger, b"{\"format\": 2, \"landing").unwrap();
    assert!(ingest.pending(&landing).unwrap().is_empty());
    let rebuilt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ledger).unwrap()).unwrap();
    assert_eq!(rebuilt["batches"], written["batches"]);
    std::fs::remove_file(&ledger).unwrap();
    assert!(ingest.pending(&landing).unwrap().is_empty());
    assert!(ledger.is_file());
    // A rerun of the older batch that fails (its row accounting does not add up): the
    // ledger, read before, follows `_run_control`.
    let lossy = lake.ingest().with_failpoint("lose_a_row").build().unwrap();
    let report = lossy.run(landing.join("s/a/batch_id=d2")).unwrap();
    assert_eq!(report.exit_code(), 2);
    let pending: Vec<String> = ingest
        .pending(&landing)
        .unwrap()
        .into_iter()
        .map(|b| b.batch_id)
        .collect();
    assert_eq!(pending, ["d2"]);
    // A folder with an older id lands late: pending at once, loaded first.
    bronze::testdata::copy_tree(&batch_dir(BATCH1), &landing.join("s/a/batch_id=d1")).unwrap();
    let outcomes = ingest.run_pending(&landing, &all).unwrap();
    let pair = |id: &str| ("s/a".to_string(), id.to_string(), BatchStatus::Loaded);
    assert_eq!(names(&outcomes), [pair("d1"), pair("d2")]);
    assert!(ingest.pending(&landing).unwrap().is_empty());
    let status = ingest.status(&landing).unwrap();
    assert_eq!(
        (status[0].loaded, status[0].pending, status[0].failed),
        (3, 0, 0)
    );
    assert_copies(&lake, 3);
}

/// `--unordered`: one entity's batches load two at once (`--max-batches-in-flight 2`),
/// and its failed first batch holds none of the later ones back; every batch once. Two
/// of the batches that load meet with their leases taken (the store holds each first
/// lease put until the other's arrives): both in flight at once, with no timing window.
#[test]
fn unordered_loads_one_entitys_batches_at_once_and_a_failure_holds_none_back() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1", "d2", "d3", "d4"]);
    std::fs::write(
        landing.join("s/a/batch_id=d1/part-unreadable.jsonl"),
        b"{\"topic\":\"t\",\"message_id\":\"m\"}\n",
    )
    .unwrap();
    let lake = TempLake::new();
    // The lease files of d2, d3 and d4 (`s+a+<batch>.json`), not the failing d1's.
    let meet = crate::stores::Meet::store(
        |p| p.contains("_bronze_leases/") && !p.contains("+d1."),
        2,
        std::time::Duration::from_secs(120),
    );
    let failing = lake
        .ingest()
        .with_object_store(meet.clone())
        .with_failpoint("unreadable_file")
        .build()
        .unwrap();
    let unordered = bronze::PendingOptions::default()
        .with_unordered(true)
        .with_max_in_flight(2);
    let outcomes = failing.run_pending(&landing, &unordered).unwrap();
    let pair = |id: &str, s| ("s/a".to_string(), id.to_string(), s);
    assert_eq!(
        names(&outcomes),
        [
            pair("d1", BatchStatus::Failed),
            pair("d2", BatchStatus::Loaded),
            pair("d3", BatchStatus::Loaded),
            pair("d4", BatchStatus::Loaded),
        ]
    );
    assert!(
        meet.met.load(std::sync::atomic::Ordering::SeqCst),
        "two batches of one entity in flight at once"
    );
    // The ordered default holds the entity behind the failed batch: nothing else left.
    let outcomes = failing
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    assert_eq!(names(&outcomes), [pair("d1", BatchStatus::Failed)]);
    assert_copies(&lake, 3);
    std::fs::remove_file(landing.join("s/a/batch_id=d1/part-unreadable.jsonl")).unwrap();
    let outcomes = lake
        .ingest()
        .build()
        .unwrap()
        .run_pending(&landing, &unordered)
        .unwrap();
    assert_eq!(names(&outcomes), [pair("d1", BatchStatus::Loaded)]);
    assert_copies(&lake, 4);
}
