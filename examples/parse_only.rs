//! The parse-only baseline for `scripts/bench_cli.sh`: reads every data file of a batch
//! folder and runs each line through simd-json on a pool of `--threads` threads (default
//! 2), keeping nothing: once through its tape (validation only), once into a DOM of
//! borrowed values (buffers reused), once with the default API (`to_owned_value` on a
//! copy of each line: what a script calling simd-json per line does); then bronze's own
//! strict reader validating each line (UTF-8 + `json::validate`, nothing materialised),
//! for comparison with simd-json's tape. No loader can do less work per byte than the
//! first two, so a load's MB/s is reported as a ratio of each, measured in the same run.
//!
//!   cargo run --release --example parse_only -- <batch_dir> [--threads N]

use std::time::Instant;

use bronze::bench::{
    ParseScratch, bronze_validate_only, simd_json_dom_only, simd_json_owned_dom,
    simd_json_parse_only,
};
use rayon::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .ok_or("usage: parse_only <batch_dir> [--threads N]")?;
    let threads = match (args.next().as_deref(), args.next()) {
        (Some("--threads"), Some(n)) => n.parse()?,
        _ => 2,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let found = bronze::discover::discover(dir.as_ref(), None)?;
    type Parser = fn(&[u8], &mut ParseScratch) -> usize;
    let parsers: [(&str, Parser); 4] = [
        ("simd-json tape (validate only)", simd_json_parse_only),
        ("simd-json DOM (borrowed values)", simd_json_dom_only),
        ("simd-json owned (default API)", simd_json_owned_dom),
        (
            "bronze::json strict reader (validate only)",
            bronze_validate_only,
        ),
    ];
    for (what, parse) in parsers {
        let started = Instant::now();
        let (bytes, lines) = pool.install(|| {
            found
                .files
                .par_iter()
                .map_init(ParseScratch::default, |scratch, f| {
                    let bytes = bronze::read::read_file(f)
                        .expect("readable landing file")
                        .bytes;
                    (bytes.len(), parse(&bytes, scratch))
                })
                .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        });
        let secs = started.elapsed().as_secs_f64();
        println!(
            "parse-only, {what}: {} files, {bytes} bytes, {lines} lines in {secs:.3} s = {:.0} MB/s ({threads} threads)",
            found.files.len(),
            bytes as f64 / 1e6 / secs
        );
    }
    Ok(())
}
