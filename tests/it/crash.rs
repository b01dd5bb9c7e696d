//! The CLI killed with SIGKILL at every named failpoint, then rerun: every table stays
//! readable, no row is duplicated at any point, and after the rerun the tables equal a
//! clean run's, staging and the batch lease are gone, and every line is accounted for.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;

use bronze::failpoint::POINTS;

use crate::util::*;

/// How a run stages the batch: its flags, and whether it passes `after_staging_chunk`.
type Mode = (&'static str, &'static [&'static str], bool);

const MEMORY: Mode = ("memory", &[], false);
const PERSISTED: Mode = ("persisted", &["--persist-staging"], true);
/// Over budget: chunks spill to the staging table and most topics of the fixture batch
/// are committed in two slices (the first replaces, the second appends).
const OVER_BUDGET: Mode = ("over-budget", &["--memory-budget", "64KiB"], true);

fn run(
    lake: &TempLake,
    batch: &str,
    flags: &[&str],
    failpoint: Option<&str>,
) -> std::process::Output {
    let mut c = bronze_cli();
    c.arg("ingest")
        .arg(batch_dir(batch))
        .arg("--catalog")
        .arg(lake.catalog())
        .arg("--json")
        .args(flags);
    if let Some(point) = failpoint {
        c.env("BRONZE_FAILPOINT", point)
            .env("BRONZE_FAILPOINT_ACTION", "kill");
    }
    c.output().unwrap()
}

/// A clean run of `batch` (it must succeed), its report.
fn load(lake: &TempLake, batch: &str, flags: &[&str]) -> bronze::BatchReport {
    let out = run(lake, batch, flags, None);
    let report: bronze::BatchReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    // 0, or 1 for a batch with corrupt lines: never a failed table.
    assert!(report.exit_code() < 2, "{}", report.to_text());
    assert_eq!(out.status.code(), Some(i32::from(report.exit_code())));
    report
}

fn kill_then_rerun(
    reference: &BTreeMap<String, String>,
    start: Option<&Path>,
    mode: Mode,
    point: &str,
) -> bool {
    let (name, flags, chunked) = mode;
    let context = format!(
        "{name}, killed at {point}, {}",
        match start {
            Some(dir) if dir.ends_with(APPEND_START) => "appending to another batch's tables",
            Some(_) => "during a rerun",
            None => "on the first load",
        }
    );
    let lake = TempLake::new();
    if let Some(start) = start {
        copy_tree(start, lake.catalog());
    }
    let out = run(&lake, BATCH1, flags, Some(point));
    let killed = out.status.signal() == Some(9);
    if !killed {
        // Only a point this mode never passes lets the run finish.
        assert!(
            point == "after_staging_chunk" && !chunked,
            "{context}: not killed: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return false;
    }
    assert_readable_without_duplicates(&lake, &context);

    let report = load(&lake, BATCH1, flags);
    assert_accounted(&lake, &report);
    assert_readable_without_duplicates(&lake, &context);
    assert!(
        snapshot(&lake) == *reference,
        "{context}: tables differ from a clean run's"
    );
    assert!(staging_dirs(&lake).is_empty(), "{context}: staging left");
    assert!(leases(&lake).is_empty(), "{context}: lease left");
    if start.is_some() {
        // The other batch was never touched.
        for (table, rows) in expected_tables(BATCH2) {
            let n = lake.rows(&table).eq("_batch_id", BATCH2).len();
            assert_eq!(n as u64, rows, "{context}: {BATCH2} {table}");
        }
    }
    true
}

/// The folder name of the catalog holding only BATCH2 (BATCH1's first load appends to
/// its tables, opened from their log alone).
const APPEND_START: &str = "append_start";

/// Kills a run of `mode` at every point during a rerun and, with `first_load`, also
/// on a first load into an empty catalog and on a first load appended to the tables of
/// another batch, and checks each repair.
fn every_point(mode: Mode, first_load: bool) {
    let (_, flags, chunked) = mode;
    // What clean runs leave: the first batch alone, and both batches.
    let first_reference = TempLake::new();
    load(&first_reference, BATCH1, &[]);
    let first_reference = snapshot(&first_reference);
    let reference = TempLake::new();
    load(&reference, BATCH2, &[]);
    load(&reference, BATCH1, &[]);
    let reference = snapshot(&reference);
    // The state a rerun starts from: both batches loaded by clean runs of this mode.
    let loaded = TempLake::new();
    load(&loaded, BATCH2, flags);
    load(&loaded, BATCH1, flags);
    let holder = tempfile::tempdir().unwrap();
    let append_start = holder.path().join(APPEND_START);
    {
        let other = TempLake::new();
        load(&other, BATCH2, flags);
        copy_tree(other.catalog(), &append_start);
    }
    let mut kills = 0;
    for point in POINTS {
        if first_load {
            kills += usize::from(kill_then_rerun(&first_reference, None, mode, point));
            kills += usize::from(kill_then_rerun(
                &reference,
                Some(&append_start),
                mode,
                point,
            ));
        }
        kills += usize::from(kill_then_rerun(
            &reference,
            Some(loaded.catalog()),
            mode,
            point,
        ));
    }
    let passed = if chunked {
        POINTS.len()
    } else {
        POINTS.len() - 1
    };
    let starts = if first_load { 3 } else { 1 };
    assert_eq!(
        kills,
        passed * starts,
        "killed at every point the mode passes"
    );
    // For RELIABILITY.md's figures (`cargo test crash -- --nocapture`).
    eprintln!("{}: {kills} kills, each rerun repaired the tables", mode.0);
}

#[test]
fn killed_at_any_point_with_staging_in_memory_a_rerun_repairs_the_tables() {
    every_point(MEMORY, true);
}

#[test]
fn killed_at_any_point_with_persisted_staging_a_rerun_repairs_the_tables() {
    every_point(PERSISTED, false);
}

#[test]
fn killed_at_any_point_over_the_memory_budget_a_rerun_repairs_the_tables() {
    every_point(OVER_BUDGET, false);
}

/// `_run_control`'s health row: (version, live files).
fn run_control_state(lake: &TempLake) -> (u64, u64) {
    let h = lake
        .ingest()
        .build()
        .unwrap()
        .maintenance()
        .health()
        .unwrap();
    h.tables
        .iter()
        .find(|t| t.table == "_run_control")
        .map_or((0, 0), |t| (t.version, t.files))
}

/// Parquet files in a table's folder, referenced or not.
fn parquet_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
        .count()
}

/// Rows of `_run_control` that repeat a (run, topic, table).
fn run_control_repeats(lake: &TempLake) -> i64 {
    let rows = lake.rows("_run_control");
    let keys: std::collections::BTreeSet<String> = rows
        .iter()
        .map(|r| {
            let f = |c: &str| r.get(c).unwrap_or_default();
            format!("{}/{}/{}", f("run_id"), f("topic"), f("table"))
        })
        .collect();
    (rows.len() - keys.len()) as i64
}

/// `_run_control`'s compaction (50 small files, one per run) killed at its commit, its
/// compacted file written: every table reads, no run is recorded twice, the orphan file
/// is no part of the table; the next run records itself and the one after compacts.
#[test]
fn a_run_control_compaction_killed_at_its_commit_loses_and_duplicates_nothing() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    // Runs until `_run_control`'s next commit is one its upkeep follows (every 10
    // versions) with 50 small files to compact.
    for _ in 0..100 {
        let (version, files) = run_control_state(&lake);
        if (version + 1).is_multiple_of(10) && files >= 50 {
            break;
        }
        assert!(ingest.run(batch_dir(BATCH2)).unwrap().exit_code() < 2);
    }
    let (version, files) = run_control_state(&lake);
    assert!(files >= 50, "{version} {files}");
    let runs_before = lake.rows("_run_control").distinct("run_id");
    let dir = lake.schema_dir().join("_run_control");
    let out = bronze_cli()
        .arg("ingest")
        .arg(batch_dir(BATCH1))
        .arg("--catalog")
        .arg(lake.catalog())
        .env("BRONZE_FAILPOINT", "run_control_compaction")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "killed at the compaction's commit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The run's own append committed; the compaction did not.
    assert_eq!(run_control_state(&lake), (version + 1, files + 1));
    assert!(
        parquet_files(&dir) > (files + 1) as usize,
        "the compacted file was written"
    );
    assert_readable_without_duplicates(&lake, "compaction killed");
    assert_eq!(run_control_repeats(&lake), 0);
    assert_eq!(
        lake.rows("_run_control").distinct("run_id"),
        runs_before + 1
    );
    // The batch's data tables were committed before `_run_control` was written: a rerun
    // finds nothing to change and records itself; upkeep comes again 10 versions on.
    let report = load(&lake, BATCH1, &[]);
    assert_accounted(&lake, &report);
    for _ in 0..10 {
        if run_control_state(&lake).1 < 10 {
            break;
        }
        load(&lake, BATCH2, &[]);
    }
    assert!(run_control_state(&lake).1 < 10, "compacted later");
    assert_eq!(run_control_repeats(&lake), 0);
    assert_readable_without_duplicates(&lake, "after the compaction");
}

/// A load leaves expired log entries alone (its cost must not grow with the log);
/// `maintain`'s clean-up of them killed after it deleted the table's first entry: the
/// table reads the same, a rerun replaces the batch's rows, and the next `maintain`
/// finishes the clean-up.
#[test]
fn a_log_cleanup_killed_half_way_leaves_the_table_readable_and_the_next_maintain_finishes_it() {
    let lake = TempLake::new();
    load(&lake, BATCH1, &[]);
    // Every entry before a checkpoint expires at once (set before a checkpoint exists,
    // so this commit cleans nothing up itself).
    set_property(
        &lake,
        "trade",
        "delta.logRetentionDuration",
        "interval 0 seconds",
    );
    for _ in 0..7 {
        load(&lake, BATCH1, &[]); // versions 2..8 of `trade`
    }
    let before = snapshot(&lake);
    let logs = lake.schema_dir().join("trade/_delta_log");
    let commits = || {
        std::fs::read_dir(&logs)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.ends_with(".json") && !n.starts_with('_')
            })
            .count()
    };
    assert_eq!(commits(), 9);
    // Version 9 is checkpointed (interval 10); the load cleans nothing up.
    load(&lake, BATCH1, &[]);
    assert_eq!(commits(), 10, "a load removes no log entry");
    let out = bronze_cli()
        .args(["maintain", "--json", "--catalog"])
        .arg(lake.catalog())
        .env("BRONZE_FAILPOINT", "log_cleanup")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "killed in the clean-up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(commits(), 9, "one entry deleted, 9 still there");
    assert_readable_without_duplicates(&lake, "clean-up killed");
    let report = load(&lake, BATCH1, &[]);
    assert_accounted(&lake, &report);
    assert_eq!(snapshot(&lake), before);
    let out = on_catalog(&lake, &["maintain", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let trade = done["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == "trade")
        .unwrap();
    assert_eq!(trade["logs_removed"], 8, "{done}");
    assert_eq!(commits(), 2, "versions 9 and 10 left");
    assert_eq!(snapshot(&lake), before);
    assert_readable_without_duplicates(&lake, "after maintain");
}
