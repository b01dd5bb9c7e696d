//! `_run_control`: one row per (topic, table) write, written once per run.

use crate::util::*;

#[test]
fn run_control_rows_account_for_every_write() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let report = ingest.run(batch_dir(BATCH1)).unwrap();
    let want = expected_tables(BATCH1);
    let rc = lake.rows("_run_control");
    assert_eq!(report.run_control.len(), rc.len());
    for (table, rows) in &want {
        let written: i64 = rc
            .eq("table", table)
            .eq("status", "ok")
            .iter()
            .filter_map(|r| r.int("rows_written"))
            .sum();
        assert_eq!(written as u64, *rows, "{table}");
    }
    // One row per topic for the shared child table, all three in one commit (one file).
    let currentprice = rc.eq("table", "currentprice");
    assert_eq!(currentprice.len(), 3);
    assert_eq!(currentprice.distinct("version"), 1);
    assert_eq!(
        currentprice
            .iter()
            .filter_map(|r| r.int("files_added"))
            .max(),
        Some(1)
    );
    // Topic tables: every staged message became a row.
    assert_eq!(
        rc.filter(|r| {
            let same = |a: &str, b: &str| match (r.get(a), r.get(b)) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            };
            same("topic", "table") == Some(true) && same("rows_in", "rows_written") == Some(false)
        })
        .len(),
        0
    );
    assert_eq!(
        rc.filter(|r| {
            let below_one = |c: &str| r.int(c).is_some_and(|n| n < 1);
            r.get("table").is_some_and(|t| t != "(batch)")
                && (r.get("status").is_some_and(|s| s != "ok")
                    || below_one("files_added")
                    || below_one("bytes_added"))
        })
        .len(),
        0
    );
    // Optimize write: 20 landing files, one data file per table.
    assert_eq!(
        rc.filter(|r| {
            r.int("files_added").is_some_and(|n| n != 1)
                && r.get("table").is_some_and(|t| t != "(batch)")
        })
        .len(),
        0
    );
    assert_eq!(
        rc.filter(|r| r.get("checks").is_some_and(|c| !c.ends_with("ok")))
            .len(),
        0
    );
    // A rerun appends its own rows under a new run id; the first run's stay.
    ingest.run(batch_dir(BATCH1)).unwrap();
    let rc = lake.rows("_run_control");
    assert_eq!(rc.distinct("run_id"), 2);
    assert_eq!(rc.len(), 2 * report.run_control.len());
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
        lake.rows("_run_control")
            .eq("table", "(batch)")
            .values("status"),
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
        lake.rows("_run_control")
            .eq("table", "(batch)")
            .values("status"),
        ["failed"]
    );
}
