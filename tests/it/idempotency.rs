//! Reruns replace a batch's rows; a second batch adds rows without touching the first.

use crate::util::*;

#[test]
fn rerunning_a_batch_leaves_identical_tables() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    ingest.run(batch_dir(BATCH1)).unwrap();
    let tables = lake.tables();
    let first: Vec<String> = tables.iter().map(|t| lake.dump(t)).collect();
    let report = ingest.run(batch_dir(BATCH1)).unwrap();
    assert_accounted(&lake, &report);
    assert_eq!(lake.tables(), tables);
    for (t, before) in tables.iter().zip(&first) {
        assert_eq!(&lake.dump(t), before, "table {t} changed on rerun");
    }
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, rows, "{table}");
        // Every write of the rerun committed a new version on top of the first run's.
        assert!(report.tables[&table].version.unwrap() >= 1, "{table}");
    }
}

#[test]
fn a_second_batch_adds_rows_without_touching_the_first() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    ingest.run(batch_dir(BATCH1)).unwrap();
    let first: Vec<(String, String)> = lake
        .tables()
        .iter()
        .map(|t| (t.clone(), lake.dump(t)))
        .collect();
    let report = ingest.run(batch_dir(BATCH2)).unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    let want1 = expected_tables(BATCH1);
    let want2 = expected_tables(BATCH2);
    for table in lake.tables() {
        let w1 = want1.get(&table).copied().unwrap_or(0) as i64;
        let w2 = want2.get(&table).copied().unwrap_or(0) as i64;
        let rows = lake.rows(&table);
        let n1 = rows.eq("_batch_id", BATCH1).len() as i64;
        let n2 = rows.eq("_batch_id", BATCH2).len() as i64;
        assert_eq!((n1, n2), (w1, w2), "{table}");
    }
    // Tables the second batch does not feed are byte-for-byte what they were.
    for (table, before) in first {
        if !want2.contains_key(&table) && table != "_corrupt_records" {
            assert_eq!(lake.dump(&table), before, "{table}");
        }
    }
    // Rerunning the first batch after the second keeps the second's rows.
    ingest.run(batch_dir(BATCH1)).unwrap();
    for (table, rows) in &want2 {
        let n = lake.rows(table).eq("_batch_id", BATCH2).len();
        assert_eq!(n as u64, *rows, "{table}");
    }
}

#[test]
fn sequential_and_parallel_runs_give_identical_tables() {
    let seq = TempLake::new();
    seq.ingest()
        .with_max_parallel(1)
        .with_threads(1)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    let par = TempLake::new();
    par.ingest()
        .with_max_parallel(8)
        .with_threads(4)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(seq.tables(), par.tables());
    for t in seq.tables() {
        assert_eq!(seq.dump(&t), par.dump(&t), "{t}");
    }
}

/// Only `_run_control` records a `txn` per batch; the topic tables' sets never grow. A
/// run that dies after writing the second batch's topic tables but before
/// `_run_control` recorded it leaves its lease released, and that lease, not a `txn`,
/// tells the next run the tables hold rows of the batch: it replaces them, and the
/// catalog ends as a clean load of both batches.
#[test]
fn a_run_that_ends_before_recording_leaves_its_lease_and_its_rerun_replaces_the_rows() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    ingest.run(batch_dir(BATCH1)).unwrap();
    let failing = lake
        .ingest()
        .with_failpoint("before_run_control")
        .build()
        .unwrap();
    let err = failing.run(batch_dir(BATCH2)).unwrap_err();
    assert!(
        bronze::error_chain(&err).contains("before_run_control"),
        "{err}"
    );
    let (table, rows) = expected_tables(BATCH2).into_iter().next().unwrap();
    assert_eq!(lake.rows(&table).eq("_batch_id", BATCH2).len() as u64, rows);
    let app_id = |batch: &str| format!("bronze/market/events/{batch}");
    for t in lake.tables() {
        for batch in [BATCH1, BATCH2] {
            assert_eq!(txn_version(&lake, &t, &app_id(batch)), None, "{t}: {batch}");
        }
    }
    assert!(txn_version(&lake, "_run_control", &app_id(BATCH1)).is_some());
    assert_eq!(txn_version(&lake, "_run_control", &app_id(BATCH2)), None);
    // Left released: `status` shows the batch pending, not in progress.
    let left = leases(&lake);
    assert_eq!(left.len(), 1, "{left:?}");
    let lease = lake
        .schema_dir()
        .join(bronze::lease::LEASE_DIR)
        .join(&left[0]);
    let holder: bronze::lease::Holder =
        serde_json::from_slice(&std::fs::read(lease).unwrap()).unwrap();
    assert!(holder.released_micros.is_some(), "{holder:?}");
    let status = ingest.status(repo().join("fixtures/landing")).unwrap();
    let events = status
        .iter()
        .find(|e| e.landing_path == "market/events")
        .unwrap();
    assert!(events.in_progress.is_empty(), "{events:?}");
    assert!(events.pending >= 1, "{events:?}");

    let report = ingest.run(batch_dir(BATCH2)).unwrap();
    assert_accounted(&lake, &report);
    assert_took_over_a_lease(&report);
    assert!(leases(&lake).is_empty());
    assert_readable_without_duplicates(&lake, "rerun after a run that ended unrecorded");
    let reference = TempLake::new();
    let clean = reference.ingest().build().unwrap();
    clean.run(batch_dir(BATCH1)).unwrap();
    clean.run(batch_dir(BATCH2)).unwrap();
    assert!(snapshot(&lake) == snapshot(&reference), "as a clean load");
}
