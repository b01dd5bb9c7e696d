//! End to end into local Delta tables: sequential vs parallel topics, per-table vs
//! global lock, on a generated daily batch (200 files, 36 topics).

use bronze::LockPolicy;
use bronze::testdata::{GenSpec, generate};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const FILES: usize = 200; // a daily batch, ~8 MB

fn bench(c: &mut Criterion) {
    let landing = tempfile::tempdir().unwrap();
    let spec = GenSpec {
        files: FILES,
        ..Default::default()
    };
    let batch = generate(landing.path(), "daily", &spec).unwrap();
    let mut g = c.benchmark_group("ingest_daily");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(batch.bytes));
    for (name, parallel, policy) in [
        ("sequential", 1, LockPolicy::PerTable),
        ("parallel_2_per_table", 2, LockPolicy::PerTable),
        ("parallel_8_per_table", 8, LockPolicy::PerTable),
        ("parallel_32_per_table", 32, LockPolicy::PerTable),
        ("parallel_8_global_lock", 8, LockPolicy::Global),
    ] {
        // One catalog per variant; every iteration reruns the same batch (idempotent).
        let lake = tempfile::tempdir().unwrap();
        let ingest = bronze::Ingest::builder(lake.path())
            .with_max_parallel(parallel)
            .with_lock_policy(policy)
            .build()
            .unwrap();
        g.bench_function(BenchmarkId::new(name, FILES), |b| {
            b.iter(|| ingest.run(&batch.dir).unwrap().messages)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
