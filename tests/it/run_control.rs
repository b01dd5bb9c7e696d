//! `_run_control`: one row per (topic, table) write, written once per run.

use crate::util::*;

#[test]
fn run_control_rows_account_for_every_write() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let report = ingest.run(batch_dir(BATCH1)).unwrap();
    let want = expected_tables(BATCH1);
    assert_eq!(
        report.run_control.len(),
        lake.count("SELECT count(*) FROM _run_control") as usize
    );
    for (table, rows) in &want {
        let written = lake.count(&format!(
            "SELECT CAST(sum(rows_written) AS BIGINT) FROM _run_control WHERE \"table\" = '{table}' AND status = 'ok'"
        ));
        assert_eq!(written as u64, *rows, "{table}");
    }
    // One row per topic for the shared child table, all three in one commit (one file).
    assert_eq!(
        lake.count("SELECT count(*) FROM _run_control WHERE \"table\" = 'currentprice'"),
        3
    );
    assert_eq!(
        lake.count(
            "SELECT count(DISTINCT version) FROM _run_control WHERE \"table\" = 'currentprice'"
        ),
        1
    );
    assert_eq!(
        lake.count("SELECT max(files_added) FROM _run_control WHERE \"table\" = 'currentprice'"),
        1
    );
    // Topic tables: every staged message became a row.
    assert_eq!(
        lake.count(
            "SELECT count(*) FROM _run_control WHERE topic = \"table\" AND rows_in <> rows_written"
        ),
        0
    );
    assert_eq!(lake.count("SELECT count(*) FROM _run_control WHERE \"table\" <> '(batch)' AND (status <> 'ok' OR files_added < 1 OR bytes_added < 1)"), 0);
    // Optimize write: 20 landing files, one data file per table.
    assert_eq!(
        lake.count(
            "SELECT count(*) FROM _run_control WHERE files_added <> 1 AND \"table\" <> '(batch)'"
        ),
        0
    );
    assert_eq!(
        lake.count("SELECT count(*) FROM _run_control WHERE checks NOT LIKE '%ok'"),
        0
    );
    // A rerun appends its own rows under a new run id; the first run's stay.
    ingest.run(batch_dir(BATCH1)).unwrap();
    assert_eq!(
        lake.count("SELECT count(DISTINCT run_id) FROM _run_control"),
        2
    );
    assert_eq!(
        lake.count("SELECT count(*) FROM _run_control") as usize,
        2 * report.run_control.len()
    );
}

#[test]
fn the_library_checks_that_every_line_is_accounted_for() {
    let lake = TempLake::new();
    let report = lake
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert!(report.invariant_ok, "{}", report.invariant);
    let exp = expected(BATCH1);
    let want = format!(
        "lines({}) = messages({}) + corrupt({}) + duplicates({})",
        exp["lines"], exp["messages"], exp["corrupt_lines"], exp["duplicates"]
    );
    assert!(report.invariant.starts_with(&want), "{}", report.invariant);
    assert_eq!(
        lake.strings("SELECT status FROM _run_control WHERE \"table\" = '(batch)'"),
        ["ok"]
    );

    // A (simulated) bug that loses one row per topic table is caught by the library.
    let lake = TempLake::new();
    let report = lake
        .ingest()
        .with_failpoint("lose_a_row")
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert!(!report.invariant_ok);
    assert_eq!(report.exit_code(), 2);
    assert!(
        report.invariant.contains("topic \"quote\"") && report.invariant.contains("FAILED"),
        "{}",
        report.invariant
    );
    assert_eq!(
        lake.strings("SELECT status FROM _run_control WHERE \"table\" = '(batch)'"),
        ["failed"]
    );
}
