//! Staging: in memory, persisted, chunked under a memory budget, resumed after a crash,
//! dropped at the end, never shared between batches.

use crate::util::*;

#[test]
fn persisted_and_chunked_staging_give_the_same_tables_as_memory() {
    let mem = TempLake::new();
    let r = mem
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(r.staging, bronze::StagingMode::Memory);

    let persisted = TempLake::new();
    let r = persisted
        .ingest()
        .with_persist_staging(true)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(r.staging, bronze::StagingMode::Persisted);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_same_tables(&mem, &persisted);
    assert!(staging_dirs(&persisted).is_empty(), "staging dropped");

    // A 4 KiB budget: each file is its own chunk, dedup still spans the whole batch.
    let chunked = TempLake::new();
    let r = chunked
        .ingest()
        .with_memory_budget(4 << 10)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(r.staging, bronze::StagingMode::Persisted);
    assert_accounted(&chunked, &r);
    // The batch's message ids alone take more than half of 4 KiB: the run says so, and
    // names a budget they fit.
    let ids = r
        .warnings
        .iter()
        .find(|w| w.contains("kept to drop duplicates"))
        .unwrap_or_else(|| panic!("no warning on the ids: {:?}", r.warnings));
    assert!(ids.contains("of the 4KiB memory budget"), "{ids}");
    assert!(ids.contains(&format!("{} messages", r.messages)), "{ids}");
    assert!(ids.contains("give it --memory-budget "), "{ids}");
    assert!(
        r.tables["quote"].version > Some(0),
        "a 4 KiB budget commits a topic in several slices: {:?}",
        r.tables["quote"]
    );
    let exp = expected(BATCH1);
    assert_eq!(r.duplicates, exp["duplicates"].as_u64().unwrap());
    assert_eq!(r.corrupt_lines, exp["corrupt_lines"].as_u64().unwrap());
    assert_same_tables(&mem, &chunked);
    assert!(staging_dirs(&chunked).is_empty());
    // Over budget, a topic is committed in slices (the first replaces, the others
    // append): a rerun still replaces the batch's rows exactly.
    chunked
        .ingest()
        .with_memory_budget(4 << 10)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_same_tables(&mem, &chunked);
}

#[test]
fn a_crash_after_staging_resumes_from_the_staging_table() {
    let lake = TempLake::new();
    let err = lake
        .ingest()
        .with_persist_staging(true)
        .with_failpoint("after_staging")
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap_err();
    assert!(matches!(err, bronze::Error::Failpoint { .. }), "{err}");
    let dirs = staging_dirs(&lake);
    assert!(
        dirs.len() == 1 && dirs[0].starts_with(&format!("_tmp_raw_load_{BATCH1}_")),
        "{dirs:?}"
    );

    // The rerun must not need the landing files: give it a copy (the same landing path,
    // so the same batch), then empty the copy.
    let landing = tempfile::tempdir().unwrap();
    let copy = landing
        .path()
        .join(format!("market/events/batch_id={BATCH1}"));
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(batch_dir(BATCH1)).unwrap() {
        let e = e.unwrap();
        std::fs::write(copy.join(e.file_name()), b"").unwrap();
    }
    let report = lake.ingest().build().unwrap().run(&copy).unwrap();
    assert_eq!(report.staging, bronze::StagingMode::Resumed);
    let exp = expected(BATCH1);
    assert_eq!(report.duplicates, exp["duplicates"].as_u64().unwrap());
    assert_eq!(report.corrupt_lines, exp["corrupt_lines"].as_u64().unwrap());
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, rows, "{table}");
    }
    assert!(
        staging_dirs(&lake).is_empty(),
        "staging dropped after the resumed run"
    );
}

#[test]
fn an_incomplete_staging_table_is_cleared_and_restaged() {
    let lake = TempLake::new();
    let err = lake
        .ingest()
        .with_memory_budget(4 << 10)
        .with_failpoint("after_staging_chunk")
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap_err();
    assert!(matches!(err, bronze::Error::Failpoint { .. }), "{err}");
    assert_eq!(
        staging_dirs(&lake).len(),
        1,
        "a partial staging table is left behind"
    );
    let report = lake
        .ingest()
        .with_memory_budget(4 << 10)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(
        report.staging,
        bronze::StagingMode::Persisted,
        "incomplete staging is never resumed"
    );
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, rows, "{table}");
    }
    assert!(staging_dirs(&lake).is_empty());
}

#[test]
fn two_batches_at_once_use_their_own_staging_tables() {
    let lake = TempLake::new();
    let ingest = lake.ingest().with_persist_staging(true).build().unwrap();
    let barrier = std::sync::Barrier::new(2);
    let reports: Vec<bronze::BatchReport> = std::thread::scope(|s| {
        let handles: Vec<_> = [BATCH1, BATCH2]
            .into_iter()
            .map(|b| {
                let (ingest, barrier) = (&ingest, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    ingest.run(batch_dir(b)).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &reports {
        assert_eq!(r.staging, bronze::StagingMode::Persisted);
        assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
    }
    assert_both_fixture_batches_landed(&lake);
    assert!(staging_dirs(&lake).is_empty());
}

#[test]
fn a_batch_is_staged_in_memory_when_three_times_its_landing_size_fits_the_budget() {
    let run = |budget: u64| {
        let lake = TempLake::new();
        let r = lake
            .ingest()
            .with_memory_budget(budget)
            .build()
            .unwrap()
            .run(batch_dir(BATCH1))
            .unwrap();
        assert_accounted(&lake, &r);
        (r.staging, r.bytes_read)
    };
    // The fixture's files are not compressed: the bytes read are their landing size.
    let (_, landing) = run(u64::MAX);
    let fits = landing * bronze::IN_MEMORY_PER_LANDING_BYTE;
    assert_eq!(run(fits).0, bronze::StagingMode::Memory);
    assert_eq!(run(fits - 1).0, bronze::StagingMode::Persisted);
}
