//! Concurrent writers to one Delta table: the conflicts `deltalake` reports without the
//! per-table lock (interleaving forced with a barrier in the object store, no sleeps),
//! and none with it; a child table committed while a topic table's commit is still in
//! flight; landing files fetched from an object store while the run takes its lease.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bronze::{CommitPer, LockPolicy};

use crate::stores::{Barrier, BarrierStore, Gate};
use crate::util::*;

/// A batch where two topics each carry a `currentprice` array (and optionally a new
/// column in one of them).
fn two_topic_batch(root: &std::path::Path, id: &str, extra_column: bool) -> PathBuf {
    let dir = root.join(format!("batch_id={id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let extra = if extra_column {
        r#","venue":"XAMS""#
    } else {
        ""
    };
    let text = format!(
        "{{\"topic\":\"quote\",\"message_id\":\"{id}-q\",\"payload\":{{\"currentprice\":[{{\"px\":1.5{extra}}}]}}}}\n\
         {{\"topic\":\"trade\",\"message_id\":\"{id}-t\",\"payload\":{{\"currentprice\":[{{\"px\":2.5}}]}}}}\n"
    );
    std::fs::write(dir.join("part-0.jsonl"), text).unwrap();
    dir
}

/// Per-topic commits (the seed's design), so that topics of one run race on a table.
/// These tests race commits beneath the batch lease (two runs of one batch would
/// otherwise stop at the lease, see `concurrency.rs`), so it is off here.
fn ingest(lake: &TempLake, store: Arc<BarrierStore>, policy: LockPolicy) -> bronze::Ingest {
    lake.ingest()
        .with_batch_lease(false)
        .with_commit_per(CommitPer::Topic)
        .with_lock_policy(policy)
        .with_max_parallel(2)
        .with_object_store(store)
        .build()
        .unwrap()
}

fn assert_no_errors(report: &bronze::BatchReport, table: &str) {
    assert!(errors(report, table).is_empty(), "{}", report.to_text());
}

fn errors(report: &bronze::BatchReport, table: &str) -> Vec<String> {
    report
        .run_control
        .iter()
        .filter(|r| r.table == table)
        .filter_map(|r| r.error.clone())
        .collect()
}

#[test]
fn without_locks_two_topics_racing_to_create_a_child_table() {
    // Same schema: both commit version 0 at once; the loser gets "version exists", and
    // bronze sends its rows through the existing-table path (an append as version 1,
    // its files written again). Nothing is lost.
    let landing = tempfile::tempdir().unwrap();
    let dir = two_topic_batch(landing.path(), "c1", false);
    let lake = TempLake::new();
    let store = Barrier::store("/currentprice/", 2);
    let report = ingest(&lake, Arc::clone(&store), LockPolicy::None)
        .run(&dir)
        .unwrap();
    assert_no_errors(&report, "currentprice");
    assert_eq!(
        store.commits.load(Ordering::SeqCst),
        3,
        "two racing creates and one retry"
    );
    assert_eq!(lake.count("currentprice"), 2);

    // Different schemas (`quote` rows have a `venue` column). Left to deltalake, the
    // lost create would be retried on top as is, and its metadata action would become the
    // table's schema: when it was `trade`'s, `venue` disappeared from the table although
    // a data file held it. bronze appends the loser's rows with a schema merge instead,
    // so whichever wins, `venue` stays.
    let dir = two_topic_batch(landing.path(), "c2", true);
    let lake = TempLake::new();
    let store = Barrier::store("/currentprice/", 2);
    let report = ingest(&lake, Arc::clone(&store), LockPolicy::None)
        .run(&dir)
        .unwrap();
    assert_no_errors(&report, "currentprice");
    assert_eq!(store.commits.load(Ordering::SeqCst), 3);
    assert_eq!(lake.count("currentprice"), 2);
    assert_eq!(
        lake.rows("currentprice").eq("venue", "XAMS").len(),
        1,
        "column kept whichever create won"
    );

    // The same race under the per-table lock: no conflict, no retry.
    let lake = TempLake::new();
    let store = Barrier::store("/currentprice/", 1);
    let report = ingest(&lake, Arc::clone(&store), LockPolicy::PerTable)
        .run(&dir)
        .unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    assert_eq!(
        store.commits.load(Ordering::SeqCst),
        2,
        "one commit per topic"
    );
    assert_eq!(lake.count("currentprice"), 2);
    assert_eq!(
        lake.rows("currentprice").eq("venue", "XAMS").len(),
        1,
        "column kept"
    );
}

#[test]
fn without_locks_a_schema_change_racing_a_loaded_append_is_planned_again() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    // First load creates the table (no race: nothing armed for it).
    let first = two_topic_batch(landing.path(), "c1", false);
    let warm = Barrier::store("/never/", 1);
    let r = ingest(&lake, warm, LockPolicy::PerTable)
        .run(&first)
        .unwrap();
    assert_eq!(r.exit_code(), 0);
    // `txn`s that expire: appends to the table go the loaded path (delta-rs's commit on
    // the loaded snapshot), not the unloaded one.
    set_property(
        &lake,
        "currentprice",
        "delta.setTransactionRetentionDuration",
        "interval 30 days",
    );
    // Second batch: `quote` adds a column while `trade` appends to the same table; the
    // schema change commits first, the append loses with `MetadataChanged` (deltalake
    // does not retry past a metadata change), and bronze plans it again on the new
    // schema: both land. (The other order, append first, is absorbed by deltalake's own
    // retry: the schema change is re-checked and lands next.)
    let second = two_topic_batch(landing.path(), "c2", true);
    let store = Barrier::ordered("/currentprice/", "venue");
    let report = ingest(&lake, Arc::clone(&store), LockPolicy::None)
        .run(&second)
        .unwrap();
    assert_no_errors(&report, "currentprice");
    assert_eq!(report.commit_replans, 1, "{}", report.to_text());
    assert_eq!(lake.rows("currentprice").eq("_batch_id", "c2").len(), 2);
    assert_eq!(
        lake.rows("currentprice").eq("venue", "XAMS").len(),
        1,
        "the schema change kept"
    );
}

#[test]
fn without_locks_a_schema_change_racing_an_unloaded_append_is_absorbed() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let first = two_topic_batch(landing.path(), "c1", false);
    let r = ingest(&lake, Barrier::store("/never/", 1), LockPolicy::PerTable)
        .run(&first)
        .unwrap();
    assert_eq!(r.exit_code(), 0);
    // The same race on a table bronze created: `trade`'s append, opened unloaded at
    // version 1, finds version 2 taken by the schema change, commits nothing there, and
    // goes the loaded path on top of it: its rows land with `venue` null.
    let second = two_topic_batch(landing.path(), "c2", true);
    let store = Barrier::ordered("/currentprice/", "venue");
    let report = ingest(&lake, Arc::clone(&store), LockPolicy::None)
        .run(&second)
        .unwrap();
    assert_no_errors(&report, "currentprice");
    assert_eq!(
        store.commits.load(Ordering::SeqCst),
        3,
        "the schema change, the lost unloaded append, its loaded retry"
    );
    assert_eq!(lake.rows("currentprice").eq("_batch_id", "c2").len(), 2);
    assert_eq!(lake.rows("currentprice").eq("venue", "XAMS").len(), 1);
    assert_eq!(lake.count("currentprice"), 4);
}

#[test]
fn without_locks_overlapping_replaces_of_one_batch_leave_one_copy() {
    let landing = tempfile::tempdir().unwrap();
    let dir = two_topic_batch(landing.path(), "c1", false);
    let lake = TempLake::new();
    ingest(&lake, Barrier::store("/never/", 1), LockPolicy::PerTable)
        .run(&dir)
        .unwrap();
    // Two runs of the same batch at once (two processes, in effect: separate lock maps),
    // both replacing `_batch_id = c1 AND _topic = quote` in the `quote` table. The loser's
    // commit conflicts (it read files the winner removed); deltalake does not retry it,
    // and bronze plans it again on the new version: it re-reads where the batch's rows
    // are now (the winner's) and replaces them. Never a blind retry: one copy.
    let store = Barrier::store("/quote/", 2);
    let a = ingest(&lake, Arc::clone(&store), LockPolicy::None);
    let b = ingest(&lake, Arc::clone(&store), LockPolicy::None);
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| a.run(&dir).unwrap());
        let hb = s.spawn(|| b.run(&dir).unwrap());
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(
        ra.commit_replans + rb.commit_replans >= 1,
        "the race was met and planned again:\n{}\n{}",
        ra.to_text(),
        rb.to_text()
    );
    let mut errs = errors(&ra, "quote");
    errs.extend(errors(&rb, "quote"));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(lake.count("quote"), 1, "one copy");
    assert_eq!(
        lake.rows("currentprice").eq("_topic", "quote").len(),
        1,
        "one copy"
    );
}

#[test]
fn disjoint_blind_appends_do_not_conflict() {
    // `_run_control` is append-only: two runs of different batches append to it at the
    // same moment; Delta's conflict check lets disjoint blind appends through (deltalake
    // retries the loser at the next version on its own).
    let landing = tempfile::tempdir().unwrap();
    let d1 = two_topic_batch(landing.path(), "c1", false);
    let d2 = two_topic_batch(landing.path(), "c2", false);
    let lake = TempLake::new();
    ingest(&lake, Barrier::store("/never/", 1), LockPolicy::PerTable)
        .run(&d1)
        .unwrap();
    let store = Barrier::store("/_run_control/", 2);
    let a = ingest(&lake, Arc::clone(&store), LockPolicy::None);
    let b = ingest(&lake, Arc::clone(&store), LockPolicy::None);
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| a.run(&d1).unwrap());
        let hb = s.spawn(|| b.run(&d2).unwrap());
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(
        !ra.tables.contains_key(bronze::RUN_CONTROL_TABLE),
        "{}",
        ra.to_text()
    );
    assert!(
        !rb.tables.contains_key(bronze::RUN_CONTROL_TABLE),
        "{}",
        rb.to_text()
    );
    assert!(
        store.commits.load(Ordering::SeqCst) >= 3,
        "the loser retried"
    );
    let rows = lake.count("_run_control");
    assert_eq!(
        rows,
        3 * (4 + 1),
        "three runs, four writes and the row accounting each"
    );
}

#[test]
fn per_table_locks_give_sequential_results_without_conflicts() {
    let seq = TempLake::new();
    seq.ingest()
        .with_max_parallel(1)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    for _ in 0..3 {
        let par = TempLake::new();
        let r = par
            .ingest()
            .with_commit_per(CommitPer::Topic)
            .with_max_parallel(16)
            .with_threads(8)
            .with_lock_policy(LockPolicy::PerTable)
            .build()
            .unwrap()
            .run(batch_dir(BATCH1))
            .unwrap();
        assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
        for t in seq.tables() {
            assert_eq!(seq.dump(&t), par.dump(&t), "{t}");
        }
    }
}

#[test]
fn different_batches_into_the_same_tables_at_once_both_land() {
    let lake = TempLake::new();
    let a = lake.ingest().build().unwrap();
    let b = lake.ingest().build().unwrap(); // its own lock map, like another process
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| a.run(batch_dir(BATCH1)).unwrap());
        let hb = s.spawn(|| b.run(batch_dir(BATCH2)).unwrap());
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(ra.failed_tables().next().is_none(), "{}", ra.to_text());
    assert!(rb.failed_tables().next().is_none(), "{}", rb.to_text());
    assert_both_fixture_batches_landed(&lake);
}

/// `batch` loaded into a new catalog on the local file system, without an object store.
fn loaded_locally(batch: &str) -> TempLake {
    let lake = TempLake::new();
    lake.ingest()
        .build()
        .unwrap()
        .run(batch_dir(batch))
        .unwrap();
    lake
}

#[test]
fn ingest_through_an_object_store_with_latency_gives_the_same_tables() {
    use bronze::testdata::LatencyStore;
    use deltalake::logstore::object_store::local::LocalFileSystem;
    let slow = TempLake::new();
    let store = Arc::new(LatencyStore::new(
        LocalFileSystem::new(),
        std::time::Duration::from_millis(1),
    ));
    let r = slow
        .ingest()
        .with_object_store(store)
        .with_persist_staging(true)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(r.staging, bronze::StagingMode::Persisted);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_same_tables(&loaded_locally(BATCH1), &slow);
}

#[test]
fn a_child_table_commits_while_a_topic_table_commit_is_still_in_flight() {
    // `news` has its own table only; `quote` and `trade` both feed `currentprice`. The
    // store holds `news`'s commit until `currentprice`'s has landed: the child table must
    // not wait for every topic table (it starts once the last topic is flattened). Were it
    // written only after all topic tables, the hold would end by its timeout instead.
    let landing = tempfile::tempdir().unwrap();
    let dir = two_topic_batch(landing.path(), "g1", false);
    let mut text = std::fs::read_to_string(dir.join("part-0.jsonl")).unwrap();
    text.push_str(r#"{"topic":"news","message_id":"g1-n","payload":{"headline":"h"}}"#);
    text.push('\n');
    std::fs::write(dir.join("part-0.jsonl"), text).unwrap();
    let lake = TempLake::new();
    let store = Gate::store(
        "/news/_delta_log/",
        "/currentprice/_delta_log/0",
        std::time::Duration::from_secs(30),
    );
    let report = lake
        .ingest()
        .with_max_parallel(4)
        .with_object_store(Arc::clone(&store) as _)
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert!(report.is_clean(), "{}", report.to_text());
    assert!(
        store.released.load(Ordering::SeqCst),
        "news's commit waited out its timeout: currentprice was not written meanwhile"
    );
    assert_eq!(lake.count("currentprice"), 2);
    assert_eq!(lake.count("news"), 1);
    assert_eq!(lake.count("quote"), 1);
}

#[test]
fn landing_files_are_fetched_from_an_object_store_while_the_run_takes_its_lease() {
    // The store holds the lease's put until a landing file has been read: the fetch must
    // start at discovery, not after the lease and the catalog checks. Were it started
    // after them, the hold would end by its timeout instead.
    let lake = TempLake::new();
    let store = Gate::store(
        "/_bronze_leases/",
        "/batch_id=",
        std::time::Duration::from_secs(30),
    );
    let r = lake
        .ingest()
        .with_object_store(Arc::clone(&store) as _)
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();
    assert_eq!(r.staging, bronze::StagingMode::Memory);
    assert!(
        store.released.load(Ordering::SeqCst),
        "the lease's put waited out its timeout: no landing file was read meanwhile"
    );
    assert_same_tables(&loaded_locally(BATCH1), &lake);
}
