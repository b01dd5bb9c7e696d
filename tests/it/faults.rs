//! Storage faults through a fault-injecting object store ([`FaultStore`]): the disk
//! full on the Nth write, an I/O error on the Nth read, a commit that lands but reports
//! an error. Each: a clear error, nothing half-visible, and a plain rerun converges to
//! the tables of a clean run. Slow storage: `conflicts::ingest_through_an_object_store_
//! with_latency_gives_the_same_tables`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::stores::{Fault, FaultStore, Faults, Op};
use crate::util::*;

/// A run of BATCH1 through `store`: the error text it reports (run error, failed tables
/// and warnings), empty when it reported none.
fn run_through(lake: &TempLake, store: Arc<FaultStore>, over_budget: bool) -> String {
    let mut b = lake.ingest().with_object_store(store);
    if over_budget {
        b = b.with_memory_budget(64 << 10);
    }
    match b.build().unwrap().run(batch_dir(BATCH1)) {
        Err(e) => bronze::error_chain(&e),
        Ok(r) => {
            let mut text: Vec<String> = r
                .failed_tables()
                .filter_map(|(_, t)| t.error.clone())
                .collect();
            text.extend(r.warnings.iter().cloned());
            text.join("\n")
        }
    }
}

/// Loads BATCH2, then BATCH1 unless `append` (the state faults strike: a rerun of
/// BATCH1, or with `append` its first load, appended to the tables BATCH2 created).
fn loaded(append: bool) -> TempLake {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    ingest.run(batch_dir(BATCH2)).unwrap();
    if !append {
        ingest.run(batch_dir(BATCH1)).unwrap();
    }
    lake
}

/// How the struck run starts: BATCH1 rerun, or appended to BATCH2's tables.
#[derive(Clone, Copy, Debug)]
enum Start {
    Rerun,
    Append,
}

/// Requests of kind `op` a clean run of BATCH1 makes from `start`.
fn count(op: Op, over_budget: bool, start: Start) -> usize {
    let lake = loaded(matches!(start, Start::Append));
    let store = Faults::store(op, Fault::IoError, 0);
    let errors = run_through(&lake, Arc::clone(&store), over_budget);
    assert!(errors.is_empty(), "{errors}");
    store.seen.load(Ordering::SeqCst)
}

/// Strikes each picked request of a run of BATCH1 from `from` in turn with `fault`,
/// checks that the failure says `says` (or the run recovered and its tables are
/// complete), that the tables stay readable without duplicates, and that a plain rerun
/// gives the clean tables back. Returns the faults injected.
fn strike_each(
    (op, fault): (Op, Fault),
    picks: &[usize],
    over_budget: bool,
    says: &[&str],
    from: Start,
) -> usize {
    let start = loaded(matches!(from, Start::Append));
    let reference = snapshot(&loaded(false));
    let mut fired = 0;
    for &pick in picks {
        // deltalake's log replay may skip a duplicate read of a commit it already holds
        // (`_run_control`'s version 0, about one run in ten under load), so a run can
        // make one request fewer than the counted run: a pick past the end of this run
        // strikes its last request instead, in a fresh copy.
        let mut n = pick;
        let (lake, store, errors) = loop {
            let lake = TempLake::new();
            copy_tree(start.catalog(), lake.catalog());
            let store = Faults::store(op, fault, n);
            let errors = run_through(&lake, Arc::clone(&store), over_budget);
            let seen = store.seen.load(Ordering::SeqCst);
            if store.fired.load(Ordering::SeqCst) {
                break (lake, store, errors);
            }
            assert!(
                seen < n && n - seen <= 2 && errors.is_empty(),
                "{fault:?} on {op:?} #{n}: not reached in a run of {seen} ({errors})"
            );
            n = seen;
        };
        let context = format!(
            "{fault:?} on {op:?} #{n} of a {from:?} ({})",
            store.picked.lock().unwrap()
        );
        fired += 1;
        // A failed request is never silent unless it was recovered from (a missing
        // `_last_checkpoint` makes deltalake list the log): either the run is complete
        // as it stands, or the fault is the run's error, a failed table, or a warning
        // (maintenance after a commit), and the text says what failed.
        if errors.is_empty() {
            assert!(
                snapshot(&lake) == reference,
                "{context}: lost rows without a word"
            );
        } else {
            assert!(
                says.iter().any(|s| errors.contains(s)),
                "{context}: the fault is not reported: {errors:?}"
            );
        }
        assert_readable_without_duplicates(&lake, &context);
        assert_no_live_lease(&lake, &context);
        let report = lake
            .ingest()
            .build()
            .unwrap()
            .run(batch_dir(BATCH1))
            .unwrap();
        assert_accounted(&lake, &report);
        assert!(
            snapshot(&lake) == reference,
            "{context}: the rerun did not converge"
        );
        assert!(staging_dirs(&lake).is_empty(), "{context}: staging left");
        assert!(leases(&lake).is_empty(), "{context}: lease left");
    }
    // For RELIABILITY.md's figures (`cargo test faults -- --nocapture`).
    eprintln!(
        "{fault:?} on {op:?} of a {from:?}: {fired} faults struck, over budget: {over_budget}, each rerun converged"
    );
    fired
}

/// Up to `k` picks spread evenly over `1..=total`, always with the first and the last.
fn spread(total: usize, k: usize) -> Vec<usize> {
    assert!(total > 0);
    let mut picks: Vec<usize> = (0..k)
        .map(|i| 1 + i * (total - 1) / (k - 1).max(1))
        .collect();
    picks.dedup();
    picks
}

#[test]
fn disk_full_on_any_write_is_reported_and_the_rerun_converges() {
    let writes = count(Op::Write, false, Start::Rerun);
    assert!(writes > 10, "{writes} writes");
    let picks: Vec<usize> = (1..=writes).collect();
    let fired = strike_each(
        (Op::Write, Fault::DiskFull),
        &picks,
        false,
        &["No space left"],
        Start::Rerun,
    );
    assert_eq!(fired, writes);
}

/// The first load of a batch into tables holding another: appends opened from the log
/// alone (data file, then the next version put if absent).
#[test]
fn faults_on_appends_into_existing_tables_are_reported_and_the_rerun_converges() {
    let writes = count(Op::Write, false, Start::Append);
    assert!(writes > 10, "{writes} writes");
    strike_each(
        (Op::Write, Fault::DiskFull),
        &spread(writes, 24),
        false,
        &["No space left"],
        Start::Append,
    );
    let commits = count(Op::Commit, false, Start::Append);
    strike_each(
        (Op::Commit, Fault::LandsButFails),
        &(1..=commits).collect::<Vec<_>>(),
        false,
        &["injected", "conflict", "Conflict", "version"],
        Start::Append,
    );
}

#[test]
fn disk_full_over_the_memory_budget_is_reported_and_the_rerun_converges() {
    let writes = count(Op::Write, true, Start::Rerun);
    let picks = spread(writes, 24);
    strike_each(
        (Op::Write, Fault::DiskFull),
        &picks,
        true,
        &["No space left"],
        Start::Rerun,
    );
}

#[test]
fn an_io_error_on_a_read_is_reported_and_the_rerun_converges() {
    let reads = count(Op::Read, false, Start::Rerun);
    assert!(reads > 10, "{reads} reads");
    let picks = spread(reads, 24);
    strike_each(
        (Op::Read, Fault::IoError),
        &picks,
        false,
        &["Input/output error"],
        Start::Rerun,
    );
}

/// A first load appended to existing tables (the direct put-if-absent commit) whose
/// commit lands but comes back "already exists" (a retried conditional put): the commit
/// is recognised as its own, not appended a second time. Every commit of the run, each
/// in turn: the tables hold each batch once, and the run reports no error.
#[test]
fn a_commit_that_lands_but_comes_back_as_taken_is_not_appended_twice() {
    let commits = count(Op::Commit, false, Start::Append);
    assert!(commits > 3, "{commits} commits");
    for pick in 1..=commits {
        let lake = loaded(true);
        let store = Faults::store(Op::Commit, Fault::LandsButTaken, pick);
        let errors = run_through(&lake, Arc::clone(&store), false);
        assert!(store.fired.load(Ordering::SeqCst), "commit {pick} struck");
        assert!(errors.is_empty(), "commit {pick}: {errors}");
        assert_both_fixture_batches_landed(&lake);
    }
}

#[test]
fn a_commit_that_lands_but_reports_an_error_is_not_duplicated() {
    for over_budget in [false, true] {
        let commits = count(Op::Commit, over_budget, Start::Rerun);
        let picks: Vec<usize> = (1..=commits).collect();
        strike_each(
            (Op::Commit, Fault::LandsButFails),
            &picks,
            over_budget,
            &["injected", "conflict", "Conflict", "version"],
            Start::Rerun,
        );
    }
}
