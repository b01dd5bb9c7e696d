//! The flatten stage alone, for profiling: generates a daily batch (200 files, dense
//! profile unless `--profile padded`), stages it, then flattens every topic `--iters`
//! times (default 1) as `benches/stages.rs` does, and prints the batch's leaves and
//! output rows with the time per leaf and per row.
//!
//! ```text
//! cargo run --release --example flatten_only -- --iters 20
//! valgrind --tool=callgrind --toggle-collect='flatten_only::flatten_pass' \
//!     target/release/examples/flatten_only      # instructions of the flatten alone
//! ```

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use arrow::array::RecordBatch;
use bronze::FlattenConfig;
use bronze::flatten::{Lineage, TableName, flatten_compact, plain};
use bronze::testdata::{GenSpec, Profile, generate};

type Tables = BTreeMap<TableName, Vec<(String, Vec<RecordBatch>)>>;

/// Every topic flattened (lineage as dictionaries, then made plain), as the stage bench.
#[inline(never)]
fn flatten_pass(staging: &bronze::stage::Staging) -> Tables {
    let lineage = Lineage::new("bench", 0);
    let cfg = FlattenConfig::default();
    let mut tables: Tables = BTreeMap::new();
    for (topic, batch) in &staging.topics {
        let plan = flatten_compact(topic, batch, &lineage, &cfg).expect("flattens");
        for (table, b) in plan.tables {
            let b = plain(b).expect("plain");
            tables
                .entry(table)
                .or_default()
                .push((topic.clone(), vec![b]));
        }
    }
    tables
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = GenSpec {
        files: 200,
        profile: Profile::Dense,
        ..Default::default()
    };
    let mut iters = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or("a flag without its value")?;
        match flag.as_str() {
            "--iters" => iters = value.parse()?,
            "--files" => spec.files = value.parse()?,
            "--profile" => spec.profile = value.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let dir = tempfile::tempdir()?;
    let s = generate(dir.path(), "bench", &spec)?;
    let found = bronze::discover::discover(&s.dir, None)?;
    let staging = bronze::stage::stage(&found.files, &bronze::EnvelopeConfig::default())?;
    let counts = bronze::bench::counts(&flatten_pass(&staging));
    let started = Instant::now();
    for _ in 0..iters {
        black_box(flatten_pass(black_box(&staging)));
    }
    let ns = started.elapsed().as_nanos() as f64 / iters as f64;
    println!(
        "{} landed bytes, {} leaves, {} output rows; flatten {:.2} ms = {:.1} ns per leaf, {:.1} ns per row ({iters} iterations)",
        s.bytes,
        counts.leaves,
        counts.rows,
        ns / 1e6,
        ns / counts.leaves as f64,
        ns / counts.rows as f64
    );
    Ok(())
}
