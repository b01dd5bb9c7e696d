//! End to end into Delta tables on a generated daily batch (200 files, ~8 MB, 36 topics):
//! sequential vs parallel topics, per-table vs global lock, staged once vs re-reading the
//! landing files per topic (the seed's baseline), beside a parse-only baseline over the
//! same bytes; then the same on a store with 20 ms injected per request, where commits
//! dominate. Set `BRONZE_BENCH_LARGE=1` to add 2,000 files on the slow store (staged once
//! vs re-read per topic), `BRONZE_BENCH_HISTORICAL=1` the 8,533-file historical batch.
//!
//! `ingest_next_day_latency_20ms`: the fifth daily batch into a catalog holding four
//! (a fresh copy per iteration), on the slow store: appends that open the tables from
//! their log alone (tables bronze created) vs the loaded path (the same tables with
//! `delta.setTransactionRetentionDuration` set, which rules the unloaded open out).

use std::sync::Arc;
use std::time::Duration;

use bronze::LockPolicy;
use bronze::testdata::LatencyStore;
use bronze::testdata::{GenSpec, GenSummary, generate};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use deltalake::logstore::object_store::local::LocalFileSystem;

const DAILY_FILES: usize = 200; // ~8 MB
const HISTORICAL_FILES: usize = 8_533; // ~348 MB
const LATENCY: Duration = Duration::from_millis(20); // per object-store request
const IN_FLIGHT: usize = 32; // requests at once, per process

fn batch(files: usize) -> (tempfile::TempDir, GenSummary) {
    let landing = tempfile::tempdir().unwrap();
    // 40 topics, as in the seed's historical load.
    let spec = GenSpec {
        files,
        topics: 40,
        ..Default::default()
    };
    let s = generate(landing.path(), &format!("b{files}"), &spec).unwrap();
    (landing, s)
}

/// 20 ms per request, at most 32 requests in flight (a client's connection pool).
fn latency_store() -> Arc<LatencyStore<LocalFileSystem>> {
    Arc::new(LatencyStore::new(LocalFileSystem::new(), LATENCY).with_max_in_flight(IN_FLIGHT))
}

struct Variant {
    name: &'static str,
    parallel: usize,
    policy: LockPolicy,
    reread: bool,
}

const fn v(name: &'static str, parallel: usize, policy: LockPolicy, reread: bool) -> Variant {
    Variant {
        name,
        parallel,
        policy,
        reread,
    }
}

fn run_group(
    c: &mut Criterion,
    group: &str,
    files: usize,
    variants: &[Variant],
    latency: bool,
    samples: usize,
) {
    let (_landing, batch) = batch(files);
    let mut g = c.benchmark_group(group);
    g.sample_size(samples);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Bytes(batch.bytes));

    // Parse-only baseline: simd-json over the same bytes on the same two threads.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let found = bronze::discover::discover(&batch.dir, None).unwrap();
    g.bench_function(BenchmarkId::new("parse_only", files), |b| {
        b.iter(|| {
            pool.install(|| bronze::stage::stage(&found.files, &bronze::EnvelopeConfig::default()))
                .unwrap()
                .duplicates
        })
    });

    for var in variants {
        // One catalog per variant; every iteration reruns the same batch (idempotent).
        let lake = tempfile::tempdir().unwrap();
        let mut builder = bronze::Ingest::builder(lake.path())
            .with_max_parallel(var.parallel)
            .with_lock_policy(var.policy)
            .with_reread_per_topic(var.reread);
        if latency {
            builder = builder.with_object_store(latency_store());
        }
        let ingest = builder.build().unwrap();
        g.bench_function(BenchmarkId::new(var.name, files), |b| {
            b.iter(|| {
                let r = ingest.run(&batch.dir).unwrap();
                assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
                r.messages
            })
        });
    }
    g.finish();
}

/// Day 5 into days 1-4, through the slow store; `loaded` forces the loaded path.
fn next_day(c: &mut Criterion) {
    let landing = tempfile::tempdir().unwrap();
    let day = |d: u64| {
        let spec = GenSpec {
            seed: 100 + d,
            ..Default::default()
        };
        generate(landing.path(), &format!("day_{d}"), &spec).unwrap()
    };
    let template = tempfile::tempdir().unwrap();
    let local = bronze::Ingest::builder(template.path()).build().unwrap();
    for d in 1..=4 {
        let r = local.run(day(d).dir).unwrap();
        assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
    }
    let loaded = tempfile::tempdir().unwrap();
    bronze::testdata::copy_tree(template.path(), loaded.path()).unwrap();
    expire_txns(&loaded.path().join("bronze"));
    let day5 = day(5);

    let mut g = c.benchmark_group("ingest_next_day_latency_20ms");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Bytes(day5.bytes));
    for (name, from, parallel) in [
        ("unloaded_sequential", template.path(), 1),
        ("unloaded_parallel_32", template.path(), 32),
        ("loaded_sequential", loaded.path(), 1),
        ("loaded_parallel_32", loaded.path(), 32),
    ] {
        g.bench_function(BenchmarkId::new(name, DAILY_FILES), |b| {
            b.iter_batched(
                || {
                    let lake = tempfile::tempdir().unwrap();
                    bronze::testdata::copy_tree(from, lake.path()).unwrap();
                    let ingest = bronze::Ingest::builder(lake.path())
                        .with_max_parallel(parallel)
                        .with_object_store(latency_store())
                        .build()
                        .unwrap();
                    (lake, ingest)
                },
                |(lake, ingest)| {
                    let r = ingest.run(&day5.dir).unwrap();
                    assert!(r.failed_tables().next().is_none(), "{}", r.to_text());
                    (lake, ingest, r.messages)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// Sets `delta.setTransactionRetentionDuration` on every table under `schema`.
fn expire_txns(schema: &std::path::Path) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for e in std::fs::read_dir(schema).unwrap() {
        let path = e.unwrap().path();
        if !path.join("_delta_log").is_dir() {
            continue;
        }
        let url = url::Url::from_directory_path(&path).unwrap();
        rt.block_on(async {
            let t = deltalake::open_table(url).await.unwrap();
            t.set_tbl_properties()
                .with_properties(
                    [(
                        "delta.setTransactionRetentionDuration".to_string(),
                        "interval 30 days".to_string(),
                    )]
                    .into(),
                )
                .await
                .unwrap();
        });
    }
}

fn bench(c: &mut Criterion) {
    let local = [
        v("sequential", 1, LockPolicy::PerTable, false),
        v("parallel_2", 2, LockPolicy::PerTable, false),
        v("parallel_8", 8, LockPolicy::PerTable, false),
        v("parallel_32", 32, LockPolicy::PerTable, false),
        v("parallel_8_global_lock", 8, LockPolicy::Global, false),
        v("parallel_8_reread_per_topic", 8, LockPolicy::PerTable, true),
    ];
    run_group(c, "ingest_daily_local", DAILY_FILES, &local, false, 10);
    let remote = [
        v("sequential", 1, LockPolicy::PerTable, false),
        v("parallel_8", 8, LockPolicy::PerTable, false),
        v("parallel_32", 32, LockPolicy::PerTable, false),
        v("parallel_32_global_lock", 32, LockPolicy::Global, false),
        v(
            "parallel_32_reread_per_topic",
            32,
            LockPolicy::PerTable,
            true,
        ),
    ];
    run_group(
        c,
        "ingest_daily_latency_20ms",
        DAILY_FILES,
        &remote,
        true,
        10,
    );
    if std::env::var_os("BRONZE_BENCH_LARGE").is_some() {
        // Where re-reading per topic really hurts: 2,000 files on the slow store.
        let large = [
            v("parallel_32", 32, LockPolicy::PerTable, false),
            v(
                "parallel_32_reread_per_topic",
                32,
                LockPolicy::PerTable,
                true,
            ),
        ];
        run_group(c, "ingest_2000_latency_20ms", 2_000, &large, true, 10);
    }
    if std::env::var_os("BRONZE_BENCH_HISTORICAL").is_some() {
        let hist = [
            v("sequential", 1, LockPolicy::PerTable, false),
            v("parallel_8", 8, LockPolicy::PerTable, false),
            v("parallel_32", 32, LockPolicy::PerTable, false),
        ];
        run_group(
            c,
            "ingest_historical_local",
            HISTORICAL_FILES,
            &hist,
            false,
            10,
        );
    }
}

criterion_group!(benches, bench, next_day);
criterion_main!(benches);
