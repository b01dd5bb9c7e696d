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
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("bronze={level},error")));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Ingest(args) => ingest(&args),
    }
}

fn ingest(args: &cli::IngestArgs) -> ExitCode {
    let bar = progress_bar(args.json);
    let result = args
        .to_config()
        .and_then(|config| {
            let mut builder = bronze::Ingest::builder(&config.catalog);
            *builder.config_mut() = config;
            if let Some(bar) = bar.clone() {
                builder = builder.with_progress(move |p| show(&bar, p));
            }
            builder.build()
        })
        .and_then(|ingest| ingest.run(&args.batch_dir));
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
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

/// A progress bar on stderr when it is a terminal (never in `--json` mode or in CI logs).
fn progress_bar(json: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0);
    let style = indicatif::ProgressStyle::with_template(
        "{spinner} {msg:<18} [{bar:30}] {pos}/{len} {elapsed}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    Some(bar)
}

fn show(bar: &indicatif::ProgressBar, p: &bronze::Progress) {
    match p {
        bronze::Progress::Discovered { files, .. } => {
            bar.set_message("parsing files");
            bar.set_length(*files as u64);
            bar.set_position(0);
        }
        bronze::Progress::FileStaged { done, .. } => bar.set_position(*done as u64),
        bronze::Progress::TableWritten { done, topics, .. } => {
            if *done == 1 {
                bar.set_message("writing tables");
                bar.set_length(*topics as u64);
            }
            bar.set_length(bar.length().unwrap_or(0).max(*done as u64));
            bar.set_position(*done as u64);
        }
        _ => {}
    }
}
