//! A small ingestion binary linking the library: loads every batch folder given on the
//! command line into one catalog, printing progress and a one-line summary per batch.
//!
//! ```text
//! cargo run --release --example ingest_batch -- ./lakehouse fixtures/landing/market/events/batch_id=*
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(catalog) = args.next() else {
        eprintln!("usage: ingest_batch <catalog> <batch_dir>...");
        return ExitCode::from(2);
    };
    let tables = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&tables);
    let ingest = match bronze::Ingest::builder(&catalog)
        .with_progress(move |p| {
            if let bronze::Progress::TableWritten { table, topic, .. } = p {
                let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
                eprintln!("  [{n}] {topic} -> {table}");
            }
        })
        .build()
    {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {}", bronze::error_chain(&e));
            return ExitCode::from(2);
        }
    };
    let mut worst = 0;
    for dir in args {
        match ingest.run(&dir) {
            Ok(report) => {
                println!(
                    "{}: {} messages, {} corrupt, {} duplicates, {} tables, {:.2}s",
                    report.batch_id,
                    report.messages,
                    report.corrupt_lines,
                    report.duplicates,
                    report.tables.len(),
                    report.elapsed.as_secs_f64()
                );
                worst = worst.max(report.exit_code());
            }
            Err(e) => {
                eprintln!("error: {dir}: {}", bronze::error_chain(&e));
                worst = 2;
            }
        }
    }
    println!("{} table writes in all", tables.load(Ordering::Relaxed));
    ExitCode::from(worst)
}
