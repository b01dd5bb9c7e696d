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
