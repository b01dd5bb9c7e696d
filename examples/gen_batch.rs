//! Writes a deterministic landed batch of any size, for benches and load tests.
//!
//! ```text
//! cargo run --release --example gen_batch -- --files 200 --out /tmp/landing            # daily
//! cargo run --release --example gen_batch -- --files 8533 --out /tmp/landing --batch-id hist
//! cargo run --release --example gen_batch -- --files 200 --profile dense --out /tmp/landing
//! ```
//! Flags: --files N (200), --lines-per-file N (50), --topics N (36), --seed N (42),
//! --batch-id ID (gen_<files>), --out DIR (./landing), --gzip, --profile padded|dense
//! (padded: a dozen ASCII leaves padded with free text; dense: ~27 leaves, mostly short
//! non-ASCII strings, no padding).

use std::path::PathBuf;
use std::process::ExitCode;

use bronze::testdata::{GenSpec, generate};

fn main() -> ExitCode {
    let mut spec = GenSpec::default();
    let mut out = PathBuf::from("landing");
    let mut batch_id = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        let parsed = match flag.as_str() {
            "--files" => value().parse().map(|v| spec.files = v).is_ok(),
            "--lines-per-file" => value().parse().map(|v| spec.lines_per_file = v).is_ok(),
            "--topics" => value().parse().map(|v| spec.topics = v).is_ok(),
            "--seed" => value().parse().map(|v| spec.seed = v).is_ok(),
            "--profile" => value().parse().map(|v| spec.profile = v).is_ok(),
            "--batch-id" => {
                batch_id = Some(value());
                true
            }
            "--out" => {
                out = PathBuf::from(value());
                true
            }
            "--gzip" => {
                spec.gzip = true;
                true
            }
            _ => false,
        };
        if !parsed {
            eprintln!(
                "error: bad flag or value `{flag}`; see the doc comment of examples/gen_batch.rs"
            );
            return ExitCode::from(2);
        }
    }
    let batch_id = batch_id.unwrap_or_else(|| format!("gen_{}", spec.files));
    match generate(&out, &batch_id, &spec) {
        Ok(s) => {
            println!(
                "{}: {} lines, {} bytes, {} duplicates, {} corrupt",
                s.dir.display(),
                s.lines,
                s.bytes,
                s.duplicates,
                s.corrupt
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write the batch under {}: {e}", out.display());
            ExitCode::from(2)
        }
    }
}
