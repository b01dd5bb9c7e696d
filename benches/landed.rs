//! Landed files in every form bronze reads, against plain JSON Lines:
//!
//! - `read/<form>`: staging (read, decode, cut into records, parse) of the field-dense
//!   daily batch (200 files) laid out as plain lines, gzip, zstd, bzip2, lz4 frames,
//!   snappy frames, zlib, one JSON array per file and pretty-printed envelopes one after
//!   another; throughput in the plain text's bytes, so the forms compare directly.
//! - `big_array` (with `BRONZE_BENCH_BIG=1`): one 1 GB file holding one JSON array of
//!   envelopes, loaded end to end under `--memory-budget 256MiB`; prints each run's peak
//!   resident memory (`VmHWM`, reset before each run), which stays near the budget
//!   because the file is staged piece by piece, never held whole.
//!
//! `cargo bench --bench landed`; figures in BENCHMARKS.md.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bronze::EnvelopeConfig;
use bronze::testdata::{GenSpec, Profile, generate};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// The dense daily batch (200 files) and its plain bytes.
fn daily(root: &Path) -> (PathBuf, u64) {
    let spec = GenSpec {
        files: 200,
        profile: Profile::Dense,
        ..Default::default()
    };
    let s = generate(root, "daily", &spec).unwrap();
    (s.dir, s.bytes)
}

/// `plain`'s files written again into `root/batch_id=<form>`, each through `write`
/// (file text → bytes) and named `<stem><ext>`.
fn relaid(
    plain: &Path,
    root: &Path,
    form: &str,
    ext: &str,
    write: &dyn Fn(&[u8]) -> Vec<u8>,
) -> PathBuf {
    let dir = root.join(format!("batch_id={form}"));
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(plain).unwrap() {
        let path = e.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read(&path).unwrap();
        std::fs::write(dir.join(format!("{stem}{ext}")), write(&text)).unwrap();
    }
    dir
}

fn encoded(mut w: impl std::io::Write, text: &[u8]) {
    w.write_all(text).unwrap();
    w.flush().unwrap();
}

/// The lines of `text` as one JSON array, an element per line.
fn as_array(text: &[u8]) -> Vec<u8> {
    let mut out = b"[\n".to_vec();
    let lines: Vec<&[u8]> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for (i, l) in lines.iter().enumerate() {
        out.extend_from_slice(l);
        out.extend_from_slice(if i + 1 < lines.len() { b",\n" } else { b"\n" });
    }
    out.extend_from_slice(b"]\n");
    out
}

/// Each line of `text` pretty-printed (a line that is not JSON kept as it is).
fn as_stream(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() * 2);
    for l in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match serde_json::from_slice::<serde_json::Value>(l) {
            Ok(v) => serde_json::to_writer_pretty(&mut out, &v).unwrap(),
            Err(_) => out.extend_from_slice(l),
        }
        out.push(b'\n');
    }
    out
}

type Form = (&'static str, &'static str, fn(&[u8]) -> Vec<u8>);

const FORMS: [Form; 9] = [
    ("lines", ".jsonl", |t| t.to_vec()),
    ("gzip", ".jsonl.gz", |t| {
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoded(&mut w, t);
        w.finish().unwrap()
    }),
    ("zstd", ".jsonl.zst", |t| {
        zstd::stream::encode_all(t, 3).unwrap()
    }),
    ("bzip2", ".jsonl.bz2", |t| {
        let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        encoded(&mut w, t);
        w.finish().unwrap()
    }),
    ("lz4", ".jsonl.lz4", |t| {
        let mut w = lz4_flex::frame::FrameEncoder::new(Vec::new());
        encoded(&mut w, t);
        w.finish().unwrap()
    }),
    ("snappy", ".jsonl.sz", |t| {
        let mut w = snap::write::FrameEncoder::new(Vec::new());
        encoded(&mut w, t);
        w.into_inner().map_err(|e| e.to_string()).unwrap()
    }),
    ("zlib", ".jsonl.zz", |t| {
        let mut w = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoded(&mut w, t);
        w.finish().unwrap()
    }),
    ("array", ".json", as_array),
    ("stream", ".json", as_stream),
];

fn read(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let (plain, bytes) = daily(root.path());
    let env = EnvelopeConfig::default();
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    let mut messages = None;
    for (form, ext, write) in FORMS {
        let dir = relaid(&plain, root.path(), form, ext, &write);
        let files = bronze::discover::discover(&dir, None).unwrap().files;
        // Every form stages the same messages.
        let staged = bronze::stage::stage(&files, &env).unwrap().messages();
        assert_eq!(*messages.get_or_insert(staged), staged, "{form}");
        group.bench_function(form, |b| {
            b.iter(|| bronze::stage::stage(&files, &env).unwrap())
        });
    }
    group.finish();
}

/// Peak resident memory since the last reset, from `/proc/self/status`.
fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

/// A 1 GB file of one JSON array of dense envelopes (the daily batch's lines repeated
/// with fresh ids).
fn big_array(root: &Path) -> (PathBuf, u64) {
    let (plain, _) = daily(root);
    let lines: Vec<Vec<u8>> = std::fs::read_dir(&plain)
        .unwrap()
        .flat_map(|e| {
            std::fs::read(e.unwrap().path())
                .unwrap()
                .split(|b| *b == b'\n')
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.starts_with(b"{\"topic\"") && l.ends_with(b"}"))
        .collect();
    let dir = root.join("big/src/ent/batch_id=big");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("all.json");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    out.write_all(b"[\n").unwrap();
    let mut written = 2u64;
    let mut n = 0u64;
    while written < 1_000_000_000 {
        for l in &lines {
            // A fresh id per element: `"message_id":"…"` replaced.
            let text = String::from_utf8_lossy(l);
            let at = text.find("\"message_id\":\"").map(|i| i + 14).unwrap_or(0);
            let end = text[at..].find('"').map_or(at, |j| at + j);
            let element = format!("{}{n}{}", &text[..at], &text[end..]);
            n += 1;
            if n > 1 {
                out.write_all(b",\n").unwrap();
            }
            out.write_all(element.as_bytes()).unwrap();
            written += element.len() as u64 + 2;
        }
    }
    out.write_all(b"\n]\n").unwrap();
    out.flush().unwrap();
    (dir, written)
}

fn big(c: &mut Criterion) {
    if std::env::var_os("BRONZE_BENCH_BIG").is_none() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (dir, bytes) = big_array(root.path());
    let mut group = c.benchmark_group("big_array");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(60));
    group.bench_function("1GB_budget_256MiB", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let lake = tempfile::tempdir().unwrap();
                // Resets VmHWM (Linux): each run's peak is its own.
                std::fs::write("/proc/self/clear_refs", "5").unwrap();
                let started = Instant::now();
                let ingest = bronze::Ingest::builder(lake.path())
                    .with_memory_budget(256 << 20)
                    .build()
                    .unwrap();
                let report = ingest.run(&dir).unwrap();
                total += started.elapsed();
                assert_eq!(report.corrupt_lines, 0);
                println!(
                    "big_array: {} messages, staging {:?}, {:.1} s, peak RSS {} MB",
                    report.messages,
                    report.staging,
                    started.elapsed().as_secs_f64(),
                    peak_rss_mb()
                );
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, read, big);
criterion_main!(benches);
