//! Where a run's time goes on a store with 20 ms per request: the bench's next-day and
//! rerun scenarios (`benches/ingest.rs`) run once each through a traced
//! `LatencyStore`, printing every request's timing and a summary of the critical path.
//!
//! ```text
//! cargo run --release --example latency_trace -- [next_day|rerun|historical] [--requests] [--times N]
//! ```
//!
//! `historical`: the 8,533-file batch on a local disk and on the latency-injected store.
//! `next_day`: the fifth daily batch (200 files, 36 topics) into a catalog holding four;
//! `rerun`: the fourth batch again. `--requests` prints one line per request
//! (asked, started, done in ms since the store was made; op; path).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bronze::testdata::{GenSpec, LatencyStore, TracedRequest, generate};
use deltalake::logstore::object_store::local::LocalFileSystem;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rerun = args.iter().any(|a| a == "rerun");
    let requests = args.iter().any(|a| a == "--requests");
    if args.iter().any(|a| a == "historical") {
        return historical();
    }

    let landing = tempfile::tempdir().unwrap();
    let day = |d: u64| {
        let spec = GenSpec {
            seed: 100 + d,
            ..Default::default()
        };
        generate(landing.path(), &format!("day_{d}"), &spec).unwrap()
    };
    let lake = tempfile::tempdir().unwrap();
    let local = bronze::Ingest::builder(lake.path()).build().unwrap();
    for d in 1..=4 {
        local.run(day(d).dir).unwrap();
    }
    let batch = if rerun { day(4) } else { day(5) };

    let store = Arc::new(
        LatencyStore::new(LocalFileSystem::new(), Duration::from_millis(20))
            .with_max_in_flight(32)
            .with_trace(),
    );
    let ingest = bronze::Ingest::builder(lake.path())
        .with_max_parallel(32)
        .with_object_store(store.clone())
        .build()
        .unwrap();
    // `--times N`: the same batch N times (the bench's daily rerun group reruns it on
    // one catalog), each run's wall time printed, the last one traced.
    let times: usize = args
        .iter()
        .position(|a| a == "--times")
        .and_then(|i| args.get(i + 1))
        .map_or(1, |n| n.parse().expect("--times N"));
    let mut wall = Duration::ZERO;
    let mut skip = 0;
    for i in 0..times {
        skip = store.trace().len();
        let t = Instant::now();
        let report = ingest.run(&batch.dir).unwrap();
        wall = t.elapsed();
        assert!(
            report.failed_tables().next().is_none(),
            "{}",
            report.to_text()
        );
        if times > 1 {
            println!("run {i}: {:.0} ms", wall.as_secs_f64() * 1e3);
        }
    }

    let trace = store.trace().split_off(skip);
    if requests {
        for r in &trace {
            println!(
                "{:8.1} {:8.1} {:8.1} {:14} {}",
                r.asked_ms, r.started_ms, r.done_ms, r.op, r.path
            );
        }
    }
    summary(&trace, wall);
}

/// The historical batch (8,533 files, 40 topics) into an empty catalog on a local disk,
/// then into another through the latency-injected store: both wall times.
fn historical() {
    let landing = tempfile::tempdir().unwrap();
    let spec = GenSpec {
        files: 8_533,
        topics: 40,
        ..Default::default()
    };
    let batch = generate(landing.path(), "historical", &spec).unwrap();
    let run = |store: Option<Arc<LatencyStore<LocalFileSystem>>>| {
        let lake = tempfile::tempdir().unwrap();
        let mut b = bronze::Ingest::builder(lake.path());
        if let Some(store) = store {
            b = b.with_object_store(store);
        }
        let t = Instant::now();
        let report = b.build().unwrap().run(&batch.dir).unwrap();
        assert!(
            report.failed_tables().next().is_none(),
            "{}",
            report.to_text()
        );
        t.elapsed().as_secs_f64()
    };
    let local = run(None);
    let store = Arc::new(
        LatencyStore::new(LocalFileSystem::new(), Duration::from_millis(20))
            .with_max_in_flight(32)
            .with_trace(),
    );
    let slow = run(Some(Arc::clone(&store)));
    summary(&store.trace(), Duration::from_secs_f64(slow));
    println!(
        "historical ({} files, {} lines): local {local:.2} s, 20 ms store {slow:.2} s ({:.1}x)",
        spec.files,
        batch.lines,
        slow / local
    );
}

/// Requests per kind of object, with the span each kind covers.
fn summary(trace: &[TracedRequest], wall: Duration) {
    let mut kinds: BTreeMap<String, (usize, f64, f64, f64)> = BTreeMap::new();
    for r in trace {
        let e = kinds
            .entry(format!("{} {}", r.op, kind(&r.path)))
            .or_insert((0, f64::MAX, 0.0, 0.0));
        e.0 += 1;
        e.1 = e.1.min(r.asked_ms);
        e.2 = e.2.max(r.done_ms);
        e.3 += r.started_ms - r.asked_ms;
    }
    println!(
        "wall {:.0} ms, {} requests",
        wall.as_secs_f64() * 1e3,
        trace.len()
    );
    println!(
        "{:>5} {:>8} {:>8} {:>10}  request",
        "n", "first", "last", "queued"
    );
    for (k, (n, first, last, queued)) in kinds {
        println!("{n:>5} {first:>8.0} {last:>8.0} {queued:>10.0}  {k}");
    }
}

/// What an object is: landing file, lease, staging, a table's log or data, run control.
fn kind(path: &str) -> &'static str {
    if path.contains("_run_control") {
        if path.contains("_delta_log") {
            "run_control log"
        } else {
            "run_control data"
        }
    } else if path.contains("_tmp_raw_load") {
        "staging"
    } else if path.contains("lease") || path.contains(".bronze") {
        "lease"
    } else if path.ends_with(".jsonl") || path.contains("batch_id=") {
        "landing"
    } else if path.contains("_last_checkpoint") {
        "table _last_checkpoint"
    } else if path.contains("_delta_log") {
        "table log"
    } else if path.ends_with(".parquet") {
        "table data"
    } else {
        "other"
    }
}
