//! The `bronze` command line.

mod cli;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("bronze={level},warn")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Ingest(args) => ingest(&args),
    }
}

fn ingest(args: &cli::IngestArgs) -> ExitCode {
    let result = args
        .to_config()
        .and_then(bronze::Ingest::from_config)
        .and_then(|ingest| ingest.run(&args.batch_dir));
    match result {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("error: cannot print the report as JSON: {e}"),
                }
            } else {
                print!("{}", report.to_text());
            }
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("error: {}", bronze::error_chain(&e));
            ExitCode::from(2)
        }
    }
}
