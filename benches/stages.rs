//! One bench per stage of a load, each over the same generated daily batch (200 files,
//! ~8 MB, 36 topics) and each with `Throughput::Bytes` of that batch's landed bytes, so
//! the stages' MB/s add up and a regression in one shows in review:
//!
//! - `parse`: one file's lines through simd-json alone (the parse-only baseline), through
//!   bronze's strict reader validating only, through bronze's staging parse, and through
//!   `serde_json::Value` (what a user could script);
//! - `flatten`: every staged topic → topic and child tables (Arrow, in memory); and one
//!   topic of 16,000 rows, the size of a historical batch's topics;
//! - `encode`: the flattened tables → parquet bytes, with bronze's writer properties per
//!   compression, beside delta-rs' defaults;
//! - `commit`: the flattened tables → Delta tables in a local folder, one commit each;
//! - `dense`: parse, flatten, fit and encode again over a field-dense daily batch
//!   (`Profile::Dense`), and flatten + fit with type detection off and on. Its throughput
//!   is in leaves (non-null values written into data columns, `bronze::bench::counts`), so
//!   criterion's `elem/s` gives each stage's time per leaf; the batch's leaves and output
//!   rows are printed first, for the time per row.
//!
//! `cargo bench --bench stages`; figures in BENCHMARKS.md.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use arrow::array::RecordBatch;
use bronze::bench::{self as stages, Compression, ParseScratch, writer_properties};
use bronze::flatten::{Lineage, TableName, flatten_compact, plain};
use bronze::testdata::{GenSpec, Profile, generate};
use bronze::{DetectType, EnvelopeConfig, FlattenConfig, Ingest, PayloadMode};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use parquet::arrow::ArrowWriter;
use parquet::basic::ZstdLevel;
use parquet::file::properties::WriterProperties;

const FILES: usize = 200;
/// Files of the one-topic batch of the `flatten` group (50 lines each).
const BIG_TOPIC_FILES: usize = 320;

/// Table → (topic, batches), as a load hands them to the writer.
type Tables = BTreeMap<TableName, Vec<(String, Vec<RecordBatch>)>>;

struct Batch {
    _dir: tempfile::TempDir,
    bytes: u64,
    one_file: Vec<u8>,
    staging: bronze::stage::Staging,
}

fn batch() -> Batch {
    batch_of(&GenSpec {
        files: FILES,
        ..Default::default()
    })
}

fn batch_of(spec: &GenSpec) -> Batch {
    let dir = tempfile::tempdir().unwrap();
    let s = generate(dir.path(), "bench", spec).unwrap();
    let found = bronze::discover::discover(&s.dir, None).unwrap();
    let staging = bronze::stage::stage(&found.files, &EnvelopeConfig::default()).unwrap();
    // All files concatenated: the parse group's input, one buffer.
    let one_file = found
        .files
        .iter()
        .flat_map(|f| std::fs::read(&f.path).unwrap())
        .collect();
    Batch {
        _dir: dir,
        bytes: s.bytes,
        one_file,
        staging,
    }
}

fn lineage() -> Lineage {
    Lineage::new("bench", 0)
}

fn flatten_all(staging: &bronze::stage::Staging) -> Tables {
    flatten_tables(staging, true, &FlattenConfig::default())
}

/// Every topic flattened as the loader does (lineage as dictionaries), with the table's
/// plain string columns made as at write time when `plain_strings`.
fn flatten_tables(
    staging: &bronze::stage::Staging,
    plain_strings: bool,
    cfg: &FlattenConfig,
) -> Tables {
    let mut tables: Tables = BTreeMap::new();
    for (topic, batch) in &staging.topics {
        for (table, b) in flatten_compact(topic, batch, &lineage(), cfg)
            .unwrap()
            .tables
        {
            let b = if plain_strings { plain(b).unwrap() } else { b };
            tables
                .entry(table)
                .or_default()
                .push((topic.clone(), vec![b]));
        }
    }
    tables
}

/// Every table's rows as one parquet file each, in memory; returns the bytes written.
fn encode(tables: &Tables, props: &WriterProperties) -> usize {
    let mut total = 0;
    for parts in tables.values() {
        let first = &parts[0].1[0];
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, first.schema(), Some(props.clone())).unwrap();
        for (_, batches) in parts {
            for b in batches {
                // Parts of a shared table differ in columns; the writer takes one schema,
                // so only the first part's schema goes through (the same for every
                // variant, which is what the comparison needs).
                if b.schema() == first.schema() {
                    w.write(b).unwrap();
                }
            }
        }
        w.close().unwrap();
        total += out.len();
    }
    total
}

/// Benches [`encode`] of `tables` with `props` as `encode/<name>/<files>`, first printing
/// the parquet bytes it writes for the `landed` bytes.
fn bench_encode(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    (name, files): (&str, usize),
    tables: &Tables,
    props: &WriterProperties,
    landed: u64,
) {
    eprintln!(
        "encode/{name}: {} bytes of parquet for {landed} landed bytes",
        encode(tables, props)
    );
    g.bench_function(BenchmarkId::new(name, files), |bench| {
        bench.iter(|| encode(black_box(tables), props))
    });
}

fn bench(c: &mut Criterion) {
    let b = batch();
    let tables = flatten_all(&b.staging);

    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Bytes(b.one_file.len() as u64));
    g.bench_function(BenchmarkId::new("simd_json_only", FILES), |bench| {
        let mut scratch = ParseScratch::default();
        bench.iter(|| stages::simd_json_parse_only(black_box(&b.one_file), &mut scratch))
    });
    g.bench_function(
        BenchmarkId::new("bronze_json_validate_only", FILES),
        |bench| {
            let mut scratch = ParseScratch::default();
            bench.iter(|| stages::bronze_validate_only(black_box(&b.one_file), &mut scratch))
        },
    );
    g.bench_function(BenchmarkId::new("bronze_stage", FILES), |bench| {
        let env = EnvelopeConfig::default();
        bench.iter(|| {
            bronze::stage::stage_file_bytes(black_box(&b.one_file), "f", &env)
                .messages
                .len()
        })
    });
    g.bench_function(BenchmarkId::new("serde_json_value", FILES), |bench| {
        bench.iter(|| {
            b.one_file
                .split(|&c| c == b'\n')
                .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
                .count()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("flatten");
    g.throughput(Throughput::Bytes(b.bytes));
    g.bench_function(BenchmarkId::new("all_topics", FILES), |bench| {
        bench.iter(|| flatten_all(black_box(&b.staging)).len())
    });
    // One topic's 16,000 rows (~13 MB) in one flatten, as each topic of the historical
    // batch is: its staged text no longer fits in the cache when the arrays are built.
    let big = batch_of(&GenSpec {
        files: BIG_TOPIC_FILES,
        topics: 1,
        ..Default::default()
    });
    g.throughput(Throughput::Bytes(big.bytes));
    g.bench_function(BenchmarkId::new("one_topic", BIG_TOPIC_FILES), |bench| {
        bench.iter(|| flatten_all(black_box(&big.staging)).len())
    });
    g.finish();
    let big_tables = flatten_all(&big.staging);

    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Bytes(b.bytes));
    let variants: Vec<(&str, WriterProperties)> = vec![
        ("bronze_snappy", writer_properties(Compression::SNAPPY)),
        ("bronze_lz4_raw", writer_properties(Compression::LZ4_RAW)),
        (
            "bronze_zstd1",
            writer_properties(Compression::ZSTD(ZstdLevel::try_new(1).unwrap())),
        ),
        (
            "bronze_zstd3",
            writer_properties(Compression::ZSTD(ZstdLevel::try_new(3).unwrap())),
        ),
        (
            "bronze_uncompressed",
            writer_properties(Compression::UNCOMPRESSED),
        ),
        (
            "delta_rs_default_snappy",
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .build(),
        ),
    ];
    for (name, props) in &variants {
        bench_encode(&mut g, (name, FILES), &tables, props, b.bytes);
    }
    // One historical-sized topic (16,000 rows): where the dictionary limit matters.
    g.throughput(Throughput::Bytes(big.bytes));
    let big_variants = [
        ("one_topic_bronze", writer_properties(Compression::SNAPPY)),
        (
            "one_topic_dictionary_1mib",
            writer_properties(Compression::SNAPPY)
                .into_builder()
                .set_dictionary_page_size_limit(1 << 20)
                .build(),
        ),
    ];
    for (name, props) in &big_variants {
        bench_encode(
            &mut g,
            (name, BIG_TOPIC_FILES),
            &big_tables,
            props,
            big.bytes,
        );
    }
    g.finish();

    let mut g = c.benchmark_group("commit");
    g.throughput(Throughput::Bytes(b.bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    let catalog = tempfile::tempdir().unwrap();
    let ingest = Ingest::builder(catalog.path()).build().unwrap();
    g.bench_function(
        BenchmarkId::new("tables_into_new_delta_tables", FILES),
        |bench| {
            bench.iter_batched(
                || stages::clear(&ingest).unwrap(),
                |()| stages::commit(&ingest, "bench", &tables).unwrap(),
                criterion::BatchSize::PerIteration,
            )
        },
    );
    g.finish();
}

/// The same stages over a field-dense daily batch (`Profile::Dense`: ~31 leaves per
/// message, mostly short non-ASCII strings, no padding), where a byte costs more to
/// parse, flatten and encode than in the padded profile: `dense/parse_*`,
/// `dense/flatten_all_topics`, `dense/fit_detect_off`, `dense/encode_bronze_snappy`, each
/// with its throughput in leaves.
fn bench_dense(c: &mut Criterion) {
    let b = batch_of(&GenSpec {
        files: FILES,
        profile: Profile::Dense,
        ..Default::default()
    });
    let tables = flatten_all(&b.staging);
    let counts = stages::counts(&tables);
    let messages: usize = b
        .staging
        .topics
        .values()
        .flatten()
        .map(|s| s.num_rows())
        .sum();
    eprintln!(
        "dense: {} landed bytes, {messages} messages, {} leaves, {} output rows in {} tables",
        b.bytes,
        counts.leaves,
        counts.rows,
        tables.len()
    );
    let mut g = c.benchmark_group("dense");
    g.throughput(Throughput::Elements(counts.leaves));
    g.bench_function(BenchmarkId::new("parse_simd_json_only", FILES), |bench| {
        let mut scratch = ParseScratch::default();
        bench.iter(|| stages::simd_json_parse_only(black_box(&b.one_file), &mut scratch))
    });
    g.bench_function(BenchmarkId::new("parse_bronze_stage", FILES), |bench| {
        let env = EnvelopeConfig::default();
        bench.iter(|| {
            bronze::stage::stage_file_bytes(black_box(&b.one_file), "f", &env)
                .messages
                .len()
        })
    });
    g.bench_function(BenchmarkId::new("flatten_all_topics", FILES), |bench| {
        bench.iter(|| flatten_all(black_box(&b.staging)).len())
    });
    // Flatten, then fit as a first load's new tables, with type detection off and on
    // (`--detect-types timestamp,date`: the batch's `…Z` timestamp strings become
    // timestamps): the difference is what detection costs.
    let mut detecting = FlattenConfig::default();
    detecting.detect_types = vec![DetectType::Timestamp, DetectType::Date];
    for (name, cfg) in [
        ("flatten_fit_detect_off", FlattenConfig::default()),
        ("flatten_fit_detect_on", detecting),
    ] {
        g.bench_function(BenchmarkId::new(name, FILES), |bench| {
            bench.iter(|| {
                let tables = flatten_tables(black_box(&b.staging), true, &cfg);
                stages::fit_new_tables(&tables).unwrap()
            })
        });
    }
    // Fit alone: the flattened tables as a first load's new tables, detection off.
    g.bench_function(BenchmarkId::new("fit_detect_off", FILES), |bench| {
        bench.iter(|| stages::fit_new_tables(black_box(&tables)).unwrap())
    });
    let props = writer_properties(Compression::SNAPPY);
    bench_encode(
        &mut g,
        ("encode_bronze_snappy", FILES),
        &tables,
        &props,
        b.bytes,
    );
    // Every topic's payloads kept whole (`payload = "variant"` for each topic): flatten
    // and fit, then encode, beside flattening's (`flatten_fit_detect_off`,
    // `encode_bronze_snappy`).
    let mut whole = FlattenConfig::default();
    whole.topic_payload = b
        .staging
        .topics
        .keys()
        .map(|t| (t.clone(), PayloadMode::Variant))
        .collect();
    g.bench_function(
        BenchmarkId::new("variant_payload_flatten_fit", FILES),
        |bench| {
            bench.iter(|| {
                let tables = flatten_tables(black_box(&b.staging), true, &whole);
                stages::fit_new_tables(&tables).unwrap()
            })
        },
    );
    bench_encode(
        &mut g,
        ("variant_payload_encode_snappy", FILES),
        &flatten_tables(&b.staging, true, &whole),
        &props,
        b.bytes,
    );
    // The same rows with the lineage left as dictionaries (what the loader would write
    // if the Parquet writer took them as they are, without `plain`).
    bench_encode(
        &mut g,
        ("encode_lineage_dictionaries", FILES),
        &flatten_tables(&b.staging, false, &FlattenConfig::default()),
        &props,
        b.bytes,
    );
    g.finish();
}

criterion_group!(benches, bench, bench_dense);
criterion_main!(benches);
