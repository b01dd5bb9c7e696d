//! Parse stage: landed bytes → staged messages, simd-json (ours) vs a serde_json baseline.

use std::hint::black_box;

use bronze::EnvelopeConfig;
use bronze::stage::stage_file_bytes;
use bronze::testdata::{GenSpec, generate};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const LINES: usize = 5_000; // ~4 MB of ~815-byte lines

fn input() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let spec = GenSpec {
        files: 1,
        lines_per_file: LINES,
        ..Default::default()
    };
    let s = generate(dir.path(), "bench", &spec).unwrap();
    std::fs::read(s.dir.join("part-00000.jsonl")).unwrap()
}

/// What a user could script: one `serde_json::Value` per line, then pick the envelope.
fn serde_baseline(bytes: &[u8]) -> usize {
    let mut n = 0;
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line)
            && v.get("topic").and_then(|t| t.as_str()).is_some()
        {
            n += v.get("payload").map(|p| p.to_string().len()).unwrap_or(0);
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let bytes = input();
    let env = EnvelopeConfig::default();
    let mut g = c.benchmark_group("stage");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function(BenchmarkId::new("simd_json_tape", LINES), |b| {
        b.iter(|| {
            stage_file_bytes(black_box(&bytes), "f", &env)
                .messages
                .len()
        })
    });
    g.bench_function(BenchmarkId::new("serde_json_value", LINES), |b| {
        b.iter(|| serde_baseline(black_box(&bytes)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
