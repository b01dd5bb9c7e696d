//! Read time of a table before and after OPTIMIZE, and files a filter on `symbol` must
//! read after a bin-pack vs after a Z-order by `symbol` (printed once, before timing).

use std::hint::black_box;
use std::time::Duration;

use bronze::testdata::{GenSpec, generate};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

const BATCHES: usize = 60; // 60 daily loads, no compaction: 60 small files per table
const TABLE: &str = "quote_00";

fn lake(optimized: Option<&[String]>, target: u64) -> tempfile::TempDir {
    let landing = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let ingest = bronze::Ingest::builder(lake.path())
        .with_auto_compact(false, 50)
        .build()
        .unwrap();
    for i in 0..BATCHES {
        let spec = GenSpec {
            files: 4,
            lines_per_file: 50,
            topics: 3,
            seed: i as u64 + 1,
            ..Default::default()
        };
        let b = generate(landing.path(), &format!("d{i:03}"), &spec).unwrap();
        ingest.run(&b.dir).unwrap();
    }
    if let Some(zorder) = optimized {
        ingest
            .maintenance()
            .optimize(TABLE, Some(target), zorder)
            .unwrap();
    }
    lake
}

fn table_url(lake: &tempfile::TempDir) -> url::Url {
    url::Url::from_directory_path(lake.path().join("bronze").join(TABLE)).unwrap()
}

/// (files in the table, files whose statistics can hold `symbol = 'ASML'`).
fn files_for_filter(rt: &tokio::runtime::Runtime, lake: &tempfile::TempDir) -> (usize, usize) {
    rt.block_on(async {
        let t = deltalake::open_table(table_url(lake)).await.unwrap();
        let snapshot = t.snapshot().unwrap();
        let mut total = 0;
        let mut hit = 0;
        for f in snapshot.log_data().iter() {
            total += 1;
            let stats: serde_json::Value =
                serde_json::from_str(&f.stats().unwrap_or_default()).unwrap_or_default();
            let min = stats["minValues"]["symbol"].as_str().unwrap_or("");
            let max = stats["maxValues"]["symbol"]
                .as_str()
                .unwrap_or("\u{10ffff}");
            if min <= "ASML" && "ASML" <= max {
                hit += 1;
            }
        }
        (total, hit)
    })
}

/// `count(*), avg(bid) WHERE symbol = 'ASML'` as a Delta reader runs it: the kernel's
/// scan skips the files whose statistics rule the symbol out, then the rows are filtered.
fn query(rt: &tokio::runtime::Runtime, lake: &tempfile::TempDir) -> (usize, f64) {
    use arrow::array::{Array as _, AsArray as _};
    use buoyant_kernel::expressions::{Expression, Predicate};
    let engine = rt.block_on(async {
        let t = deltalake::open_table(table_url(lake)).await.unwrap();
        t.log_store().engine(None)
    });
    let snapshot = buoyant_kernel::Snapshot::builder_for(table_url(lake))
        .build(engine.as_ref())
        .unwrap();
    let symbol = Predicate::eq(Expression::column(["symbol"]), Expression::literal("ASML"));
    let scan = snapshot
        .scan_builder()
        .with_predicate(std::sync::Arc::new(symbol))
        .build()
        .unwrap();
    let (mut n, mut sum) = (0usize, 0f64);
    for data in scan.execute(engine).unwrap() {
        let data = buoyant_kernel::engine::arrow_data::ArrowEngineData::try_from_engine_data(
            data.unwrap(),
        )
        .unwrap();
        let b = data.record_batch();
        let symbols = b.column_by_name("symbol").unwrap().as_string::<i32>();
        let bid = arrow::compute::cast(
            b.column_by_name("bid").unwrap(),
            &arrow::datatypes::DataType::Float64,
        )
        .unwrap();
        let bid = bid.as_primitive::<arrow::datatypes::Float64Type>();
        for i in 0..b.num_rows() {
            if symbols.is_valid(i) && symbols.value(i) == "ASML" {
                n += 1;
                if bid.is_valid(i) {
                    sum += bid.value(i);
                }
            }
        }
    }
    (n, sum / n.max(1) as f64)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let small = lake(None, 0);
    let packed = lake(Some(&[]), 128 << 20);
    // Small target files so that Z-order leaves several files to skip between.
    let binpacked_small = lake(Some(&[]), 16 << 10);
    let zordered = lake(Some(&["symbol".to_string()]), 16 << 10);
    for (name, l) in [
        ("before_optimize", &small),
        ("after_optimize", &packed),
        ("binpack_16k", &binpacked_small),
        ("zorder_symbol_16k", &zordered),
    ] {
        let (total, hit) = files_for_filter(&rt, l);
        eprintln!(
            "{name}: {total} files, {hit} can hold symbol = 'ASML' ({} skipped)",
            total - hit
        );
    }
    let mut g = c.benchmark_group("read_quote_table");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));
    for (name, l) in [
        ("before_optimize", &small),
        ("after_optimize", &packed),
        ("zorder_symbol_16k", &zordered),
    ] {
        g.bench_function(BenchmarkId::new(name, BATCHES), |b| {
            b.iter(|| black_box(query(&rt, l)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
