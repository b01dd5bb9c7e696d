//! The `bronze` command line.

mod alloc;
mod cli;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

use cli::{Cli, Command};

/// jemalloc, not glibc's malloc: measured faster on the historical batch at a lower peak
/// RSS (BENCHMARKS.md, "From Python"), with one arena per CPU (see [`JEMALLOC_CONF`]).
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when it initialises (before `main`): one arena per CPU the
/// thread runs on, instead of four per CPU by thread. Threads that free what others
/// allocated (staging, fan-out, tokio's writers) then share the freed pages, which cuts
/// peak RSS. Its extents and metadata in transparent huge pages where the system offers
/// them (`madvise` mode): a short-lived process touches every page of its heap fresh,
/// and a 200-file batch spent ~15 % of its CPU in page faults; with huge pages it takes
/// 12 % less CPU, the historical batch 3 % less, at 10-40 MB more peak RSS. On a system
/// whose huge pages are `always`, the setting makes no difference beyond noise
/// (BENCHMARKS.md, "Huge pages on `madvise` and `always` systems"), so it is not made
/// to depend on the system's mode.
/// `_RJEM_MALLOC_CONF` still overrides it per run.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[allow(unsafe_code)]
// SAFETY: jemalloc declares this symbol weak and reads it once, as a NUL-terminated
// option string that lives for the whole program.
#[unsafe(export_name = "_rjem_malloc_conf")]
static JEMALLOC_CONF: Option<&'static u8> =
    Some(&b"percpu_arena:percpu,thp:always,metadata_thp:always\0"[0]);

/// deltalake aborts the multipart upload of a data file whose upload failed; when the
/// failure came at completion, `object_store`'s `BufWriter::abort` panics ("Already shut
/// down", documented) and deltalake catches that panic (`catch_unwind` in its
/// `upload_parquet_file`) and returns the upload error, which the run reports. The
/// default hook would still print the caught panic with a backtrace, so this hook logs
/// that one panic at debug level and leaves every other panic to the default hook.
fn quiet_caught_abort_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let caught_abort = info.location().is_some_and(|l| {
            l.file().contains("object_store") && l.file().ends_with("src/buffered.rs")
        }) && info.payload().downcast_ref::<&str>()
            == Some(&"Already shut down");
        if caught_abort {
            tracing::debug!(
                "object_store's BufWriter::abort after a failed upload (caught by deltalake)"
            );
        } else {
            default(info);
        }
    }));
}

/// Colour in log lines only for a person at a terminal: stderr is one, and `NO_COLOR`
/// (<https://no-color.org>) is unset or empty.
fn colour_logs() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `print!`, but a closed stdout (`bronze status | head -1`, a `--watch` whose reader
/// went away) ends the process quietly with 141 (128 + SIGPIPE, what a shell reports of a
/// tool its pipe's reader left) instead of Rust's panic. What is printed is already
/// committed, its lease released.
macro_rules! out {
    ($($arg:tt)*) => { write_out(format_args!($($arg)*)) };
}

/// [`out!`] with a newline.
macro_rules! outln {
    ($($arg:tt)*) => { write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(2);
    }
}

fn main() -> ExitCode {
    alloc::tune_allocator();
    let cli = Cli::parse();
    init_logs(cli.verbose, cli.log_format);
    quiet_caught_abort_panic();
    match cli.command {
        Command::Ingest(args) => ingest(&args),
        Command::Status(args) => status(&args),
        Command::Clean(args) => clean(&args),
        Command::Report(args) => report(&args),
        Command::Completions(args) => completions(&args.shell),
        Command::Health(args) => health(&args),
        Command::History(args) => history(&args),
        Command::Register(args) => register(&args),
        Command::Optimize(args) => optimize(&args),
        Command::Vacuum(args) => vacuum(&args),
        Command::Maintain(args) => maintain_all(&args),
        Command::Checkpoint(args) => checkpoint(&args),
    }
}

/// Logs to stderr, as text or JSON, at the level `-v` given `verbose` times sets.
fn init_logs(verbose: u8, format: cli::LogFormat) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // The Delta kernel logs an ERROR each time it looks for a table that does not exist
    // yet in an object store (every new table of a first load), and deltalake one for each
    // commit conflict, which bronze plans again: not errors of the run, whose real
    // failures come back as errors and are printed.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "bronze={level},buoyant_kernel::snapshot::builder=off,deltalake_core::kernel::transaction=off,error"
        ))
    });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        cli::LogFormat::Json => logs.json().init(),
        cli::LogFormat::Text => logs.with_ansi(colour_logs()).init(),
    }
}

/// `bronze health`: the tables that need work, worst first.
fn health(args: &cli::HealthArgs) -> ExitCode {
    maintain(&args.location, |m| {
        let report = m.health()?;
        Ok((
            serde_json::to_value(&report).unwrap_or_default(),
            report.to_text(),
        ))
    })
}

/// `bronze history`: a table's commits.
fn history(args: &cli::HistoryArgs) -> ExitCode {
    maintain(&args.location, |m| {
        let entries = m.history(&args.table, args.limit)?;
        let text = bronze::maintenance::HistoryEntry::to_text(&entries, args.local);
        Ok((serde_json::to_value(&entries).unwrap_or_default(), text))
    })
}

/// `bronze register`: one line per table (created, updated, unchanged, kept, or why not);
/// exit 2 when a table could not be registered (the others still were).
fn register(args: &cli::RegisterArgs) -> ExitCode {
    let mut failed = false;
    let more = bronze::Settings {
        metastore: args.metastore.settings(),
        ..Default::default()
    };
    let result = args.location.config_with(more).and_then(|config| {
        let metastore = config.metastore.clone().ok_or_else(|| bronze::Error::Config {
            name: "metastore",
            reason: "no catalog to register in: --metastore hive --metastore-uri thrift://host:9083 (or glue, unity), or [metastore] in bronze.toml".into(),
        })?;
        let ingest = bronze::Ingest::from_config(config)?;
        let done = bronze::metastore::register_all(&ingest.maintenance(), &metastore)?;
        failed = done.iter().any(|r| r.result.is_err());
        let lines: Vec<String> = done
            .iter()
            .map(|r| match &r.result {
                Ok(did) => format!("{}.{}: {}", r.database, r.table, format!("{did:?}").to_lowercase()),
                Err(e) => format!("{}.{}: not registered: {e}", r.database, r.table),
            })
            .collect();
        Ok((serde_json::to_value(&done).unwrap_or_default(), lines.join("\n")))
    });
    let code = print_output(&args.location, result);
    if failed { ExitCode::from(2) } else { code }
}

/// `bronze optimize`: one line per table optimized.
fn optimize(args: &cli::OptimizeArgs) -> ExitCode {
    maintain(&args.location, |m| {
        each_table(m, &args.tables, StagingTables::Skip, |t| {
            let r = m.optimize(t, args.target_size, &args.zorder)?;
            let mut line = format!(
                "{}: {} -> {} files (version {})",
                r.table, r.files_before, r.files_after, r.version
            );
            if let Some(columns) = &r.clustered_by {
                line.push_str(&format!(
                    "; liquid-clustered by {}: its unclustered files compacted, nothing \
                     clustered (OPTIMIZE in the engine that clusters it)",
                    columns.join(", ")
                ));
            }
            Ok((serde_json::to_value(&r).unwrap_or_default(), line))
        })
    })
}

/// `bronze vacuum`: per table, the files deleted (or that would be).
fn vacuum(args: &cli::VacuumArgs) -> ExitCode {
    maintain(&args.location, |m| {
        each_table(m, &args.tables, StagingTables::Include, |t| {
            let mut vacuum = m
                .vacuum_table(t)
                .with_dry_run(args.dry_run)
                .with_force(args.force);
            if let Some(hours) = args.retain {
                vacuum = vacuum.with_retention_hours(hours);
            }
            let r = vacuum.execute()?;
            let verb = if r.dry_run { "would delete" } else { "deleted" };
            let mut line = format!("{}: {verb} {} files", r.table, r.files.len());
            for f in &r.files {
                line.push_str(&format!("\n  {f}"));
            }
            Ok((serde_json::to_value(&r).unwrap_or_default(), line))
        })
    })
}

/// `bronze checkpoint`: one line per table checkpointed.
fn checkpoint(args: &cli::CheckpointArgs) -> ExitCode {
    maintain(&args.location, |m| {
        each_table(m, &args.tables, StagingTables::Include, |t| {
            let v = m.checkpoint(t)?;
            Ok((
                serde_json::to_value(bronze::maintenance::CheckpointReport::new(t, v))
                    .unwrap_or_default(),
                format!("{t}: checkpoint at version {v}"),
            ))
        })
    })
}

type Output = (serde_json::Value, String);

/// Runs a maintenance command and prints its JSON or text; exit 2 on error.
fn maintain(
    location: &cli::Location,
    f: impl FnOnce(&bronze::maintenance::Maintenance<'_>) -> bronze::Result<Output>,
) -> ExitCode {
    let result = location
        .ingest()
        .and_then(|ingest| f(&ingest.maintenance()));
    print_output(location, result)
}

/// `bronze maintain`: prints what it did; exit 2 when a table's step failed (the
/// other tables were still visited).
fn maintain_all(args: &cli::MaintainArgs) -> ExitCode {
    let mut failed = false;
    let code = maintain(&args.location, |m| {
        let mut maintain = m
            .maintain()
            .with_max_duration(args.max_duration)
            .with_max_tables(args.max_tables)
            .with_force(args.force);
        if let Some(hours) = args.retain {
            maintain = maintain.with_retention_hours(hours);
        }
        let report = maintain.execute()?;
        failed = report.failed();
        Ok((
            serde_json::to_value(&report).unwrap_or_default(),
            report.to_text(),
        ))
    });
    if failed { ExitCode::from(2) } else { code }
}

/// `bronze report`: the overview as a page written to `--html`, or as `--json`.
fn report(args: &cli::ReportArgs) -> ExitCode {
    let settings = bronze::Settings {
        lease_ttl: args.lease_ttl,
        ..Default::default()
    };
    let result = args.location.config_with(settings).and_then(|c| {
        let ingest = bronze::Ingest::from_config(c)?;
        let mut overview = ingest.maintenance().overview()?;
        if let Some(root) = &args.landing {
            overview.landing = ingest.status(root)?;
        }
        let mut text = String::new();
        if let Some(path) = &args.html {
            std::fs::write(path, overview.to_html()).map_err(|e| bronze::Error::Config {
                name: "html",
                reason: format!("cannot write {}: {e}", path.display()),
            })?;
            text = format!(
                "{}: {} batch runs, {} tables, {} failures\n",
                path.display(),
                overview.batches.len(),
                overview.health.tables.len(),
                overview.failures.len()
            );
        }
        Ok((serde_json::to_value(&overview).unwrap_or_default(), text))
    });
    print_output(&args.location, result)
}

/// `bronze completions SHELL`: completions for a shell, or the man page, on stdout.
fn completions(shell: &str) -> ExitCode {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    let mut out = std::io::stdout().lock();
    let written = match shell {
        "man" => clap_mangen::Man::new(command).render(&mut out),
        shell => {
            let shell: clap_complete::Shell = shell.parse().unwrap_or(clap_complete::Shell::Bash);
            clap_complete::generate(shell, &mut command, "bronze", &mut out);
            Ok(())
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `bronze status`: the backlog under the root, per entity.
fn status(args: &cli::StatusArgs) -> ExitCode {
    let settings = bronze::Settings {
        lease_ttl: args.lease_ttl,
        full_listing_every: args.full_listing_every,
        ..Default::default()
    };
    let result = args.location.config_with(settings).and_then(|c| {
        let ingest = bronze::Ingest::from_config(c)?;
        if args.metrics {
            return Ok((serde_json::Value::Null, ingest.backlog_metrics(&args.root)?));
        }
        let entities = ingest.status(&args.root)?;
        Ok((
            serde_json::to_value(&entities).unwrap_or_default(),
            bronze::EntityStatus::to_text(&entities),
        ))
    });
    print_output(&args.location, result)
}

/// `bronze clean ROOT`: one line per batch cleaned, kept or failed, then a count; exit 2
/// when one failed.
fn clean(args: &cli::CleanArgs) -> ExitCode {
    let action = match &args.move_to {
        Some(dest) => bronze::CleanAction::MoveTo(dest.clone()),
        None => bronze::CleanAction::Delete,
    };
    let options = bronze::CleanOptions {
        older_than: args.older_than,
        action,
        dry_run: args.dry_run,
    };
    let result = args
        .location
        .config_with(bronze::Settings::default())
        .and_then(|c| {
            let ingest = bronze::Ingest::from_config(c)?;
            ingest.clean(&args.root, &options)
        });
    let failed = result
        .as_ref()
        .is_ok_and(|o| o.iter().any(|o| o.status == bronze::CleanStatus::Failed));
    let result = result.map(|outcomes| {
        let mut text = String::new();
        for o in &outcomes {
            let status = serde_json::to_value(o.status).unwrap_or_default();
            text.push_str(&format!(
                "{:<12} {}/batch_id={}",
                status.as_str().unwrap_or("?"),
                o.batch.landing_path,
                o.batch.batch_id
            ));
            if o.files > 0 {
                text.push_str(&format!("  {} files, {} bytes", o.files, o.bytes));
            }
            if let Some(to) = &o.moved_to {
                text.push_str(&format!(" -> {to}"));
            }
            if let Some(why) = &o.reason {
                text.push_str(&format!("  ({why})"));
            }
            text.push('\n');
        }
        let count = |s: bronze::CleanStatus| outcomes.iter().filter(|o| o.status == s).count();
        text.push_str(&format!(
            "{} cleaned, {} would be cleaned (--dry-run), {} kept, {} failed\n",
            count(bronze::CleanStatus::Cleaned),
            count(bronze::CleanStatus::WouldClean),
            count(bronze::CleanStatus::Kept),
            count(bronze::CleanStatus::Failed),
        ));
        (serde_json::to_value(&outcomes).unwrap_or_default(), text)
    });
    let code = print_output(&args.location, result);
    if failed { ExitCode::from(2) } else { code }
}

/// Prints a command's output as text or `--json` (option values masked), or its error
/// (exit 2).
fn print_output(location: &cli::Location, result: bronze::Result<Output>) -> ExitCode {
    let options = location.options();
    match result {
        Ok((json, text)) => {
            if location.json {
                let json = serde_json::to_string_pretty(&json).unwrap_or_default();
                outln!("{}", options.mask(&json));
            } else {
                out!("{}", options.mask(&text));
                if !text.ends_with('\n') {
                    outln!("");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", options.mask(&bronze::error_chain(&e)));
            ExitCode::from(2)
        }
    }
}

/// What `--all` does with the staging tables of loads (in flight, or left by a killed run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StagingTables {
    /// Passes over them, saying so.
    Skip,
    /// Takes them as any other table.
    Include,
}

/// Applies `f` to the named table or to every table (`--all`), `staging` saying what
/// `--all` does with the staging tables of loads.
fn each_table(
    m: &bronze::maintenance::Maintenance<'_>,
    tables: &cli::Tables,
    staging: StagingTables,
    f: impl Fn(&str) -> bronze::Result<Output>,
) -> bronze::Result<Output> {
    let names = match &tables.table {
        Some(t) => vec![t.clone()],
        None => m.tables()?,
    };
    let mut json = Vec::new();
    let mut text = String::new();
    for name in names {
        if staging == StagingTables::Skip
            && tables.table.is_none()
            && bronze::is_staging_table(&name)
        {
            json.push(serde_json::json!({ "table": name, "skipped": "staging table" }));
            text.push_str(&format!(
                "{name}: skipped, the staging table of a load in flight or of a killed run \
                 (the batch's next run reads and drops it)\n"
            ));
            continue;
        }
        let (j, t) = f(&name)?;
        json.push(j);
        text.push_str(&t);
        text.push('\n');
    }
    Ok((serde_json::Value::Array(json), text))
}

fn ingest(args: &cli::IngestArgs) -> ExitCode {
    if args.pending {
        return ingest_pending(args);
    }
    let bar = progress_bar(args.json);
    let mut options = bronze::StorageOptions::default();
    let result = args
        .to_config()
        .and_then(|config| {
            options = config.storage_options.clone();
            let mut builder =
                bronze::Ingest::builder(config.catalog.clone()).with_memory_release(alloc::release);
            *builder.config_mut() = config;
            if let Some(bar) = bar.clone() {
                builder = builder.with_progress(move |p| show(&bar, p));
            }
            builder.build()
        })
        .and_then(|ingest| {
            let dirs = bronze::expand_folders(&args.batch_dirs)?;
            ingest.run_folders(&dirs)
        });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(s) => outln!("{}", options.mask(&s)),
                    Err(e) => eprintln!("error: cannot print the report as JSON: {e}"),
                }
            } else {
                out!("{}", options.mask(&report.to_text()));
            }
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("error: {}", options.mask(&bronze::error_chain(&e)));
            match e {
                bronze::Error::BatchLeased { .. } | bronze::Error::LeaseLost { .. } => {
                    ExitCode::from(3)
                }
                _ => ExitCode::from(2),
            }
        }
    }
}

/// `bronze ingest --pending ROOT`: the backlog under ROOT, batch by batch; one line per
/// batch (or a JSON array; with `--watch`, one JSON object per line), exit 2 when a batch
/// failed, 1 when one had corrupt lines. With `--watch`, round after round until Ctrl-C.
fn ingest_pending(args: &cli::IngestArgs) -> ExitCode {
    let (options, setup) = pending_ingest(args);
    let (ingest, root) = match setup {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {}", options.mask(&bronze::error_chain(&e)));
            return ExitCode::from(2);
        }
    };
    let interrupt = args.watch.then(stop_on_ctrl_c);
    if args.watch {
        eprintln!(
            "watching {} every {:?}; Ctrl-C stops once the batch in flight is committed",
            root.display(),
            args.interval
        );
    }
    let stop = interrupt.as_ref().map(|(flag, _)| Arc::clone(flag));
    let pending = pending_options(args, stop);
    let mut worst = 0;
    loop {
        match ingest.run_pending(&root, &pending) {
            Ok(outcomes) => {
                print_outcomes(args, &options, &outcomes);
                worst = worst.max(exit_code_of(&outcomes));
            }
            Err(e) => {
                eprintln!("error: {}", options.mask(&bronze::error_chain(&e)));
                worst = 2;
                if interrupt.is_none() {
                    break;
                }
            }
        }
        let Some((flag, interrupted)) = &interrupt else {
            break;
        };
        push_backlog_metrics(&ingest, &root, &options);
        // Until the next round, or Ctrl-C.
        let waited = interrupted.recv_timeout(args.interval);
        if flag.load(Ordering::Relaxed)
            || !matches!(waited, Err(std::sync::mpsc::RecvTimeoutError::Timeout))
        {
            break;
        }
    }
    ExitCode::from(worst)
}

/// The storage options of `args` (for masking what is printed), and the loader of
/// `--pending` with its one landing root.
fn pending_ingest(
    args: &cli::IngestArgs,
) -> (
    bronze::StorageOptions,
    bronze::Result<(bronze::Ingest, std::path::PathBuf)>,
) {
    let mut options = bronze::StorageOptions::default();
    let setup = args.to_config().and_then(|config| {
        options = config.storage_options.clone();
        let root = match args.batch_dirs.as_slice() {
            [root] => root.clone(),
            _ => {
                return Err(bronze::Error::Config {
                    name: "pending",
                    reason: "give one landing root with --pending".into(),
                });
            }
        };
        let mut builder =
            bronze::Ingest::builder(config.catalog.clone()).with_memory_release(alloc::release);
        *builder.config_mut() = config;
        Ok((builder.build()?, root))
    });
    (options, setup)
}

/// The backlog options of `--pending`, stopped by `stop` when set.
fn pending_options(
    args: &cli::IngestArgs,
    stop: Option<Arc<AtomicBool>>,
) -> bronze::PendingOptions {
    bronze::PendingOptions::default()
        .with_max_batches(args.max_batches)
        .with_max_bytes(args.max_bytes)
        .with_require_success(args.require_success)
        .with_max_in_flight(usize::from(args.max_batches_in_flight))
        .with_unordered(args.unordered)
        .with_stop(stop)
}

/// Pushes the backlog's metrics after a watch round; a failed push is a warning.
fn push_backlog_metrics(
    ingest: &bronze::Ingest,
    root: &std::path::Path,
    options: &bronze::StorageOptions,
) {
    match ingest.push_backlog_metrics(root) {
        Ok(None) => {}
        Ok(Some(warning)) => eprintln!("warning: {}", options.mask(&warning)),
        Err(e) => eprintln!(
            "warning: backlog metrics not pushed: {}",
            options.mask(&bronze::error_chain(&e))
        ),
    }
}

/// A flag set, and a message sent, at the first Ctrl-C (the watch loop then starts no
/// batch and exits once the one in flight is committed); the second exits at once (130).
fn stop_on_ctrl_c() -> (Arc<AtomicBool>, std::sync::mpsc::Receiver<()>) {
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let set = Arc::clone(&flag);
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            // Registered before the watch starts: a Ctrl-C from then on is ours.
            let Ok(mut interrupts) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            else {
                return;
            };
            let _ = ready_tx.send(());
            if interrupts.recv().await.is_none() {
                return;
            }
            set.store(true, Ordering::Relaxed);
            let _ = tx.send(());
            eprintln!(
                "stopping once the batch in flight is committed; Ctrl-C again to stop now (the next run resumes or repairs it)"
            );
            if interrupts.recv().await.is_some() {
                std::process::exit(130);
            }
        });
    });
    // Err: no handler (the default Ctrl-C then ends the process, as without --watch).
    let _ = ready.recv();
    (flag, rx)
}

/// One round's outcomes: one line per batch and a summary (with `--watch`, nothing for a
/// round without pending batches), or JSON.
fn print_outcomes(
    args: &cli::IngestArgs,
    options: &bronze::StorageOptions,
    outcomes: &[bronze::BacklogOutcome],
) {
    if args.json {
        let text = if args.watch {
            outcomes
                .iter()
                .filter_map(|o| serde_json::to_string(o).ok())
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            serde_json::to_string_pretty(&outcomes).unwrap_or_default()
        };
        if !text.is_empty() {
            outln!("{}", options.mask(&text));
        }
        return;
    }
    if args.watch && outcomes.is_empty() {
        return;
    }
    for o in outcomes {
        outln!("{}", options.mask(&outcome_line(o)));
    }
    print_summary(outcomes);
}

/// One batch's outcome: its status, its folder, and its counts or the reason.
fn outcome_line(o: &bronze::BacklogOutcome) -> String {
    let status = serde_json::to_value(o.status).unwrap_or_default();
    let mut line = format!(
        "{:<15} {}/batch_id={}",
        status.as_str().unwrap_or("?"),
        o.batch.landing_path,
        o.batch.batch_id
    );
    if let Some(r) = &o.report {
        line.push_str(&format!(
            "  {} messages, {} corrupt, {:.2}s",
            r.messages,
            r.corrupt_lines,
            r.elapsed.as_secs_f64()
        ));
    }
    if let Some(why) = &o.reason {
        line.push_str(&format!("  ({why})"));
    }
    line
}

/// A round's batches counted by status.
fn print_summary(outcomes: &[bronze::BacklogOutcome]) {
    let count = |s: bronze::BatchStatus| outcomes.iter().filter(|o| o.status == s).count();
    outln!(
        "{} pending: {} loaded, {} failed, {} busy, {} waiting, {} changing, {} not ready, {} already loaded",
        outcomes.len(),
        count(bronze::BatchStatus::Loaded),
        count(bronze::BatchStatus::Failed),
        count(bronze::BatchStatus::Busy),
        count(bronze::BatchStatus::Waiting),
        count(bronze::BatchStatus::Changing),
        count(bronze::BatchStatus::NotReady),
        count(bronze::BatchStatus::AlreadyLoaded),
    );
    let changed = count(bronze::BatchStatus::Changed);
    if changed > 0 {
        outln!(
            "{changed} loaded batches changed after their load and were not loaded again (see above)"
        );
    }
}

/// 2 when a batch failed, else the worst report's exit code.
fn exit_code_of(outcomes: &[bronze::BacklogOutcome]) -> u8 {
    outcomes
        .iter()
        .map(|o| match (o.status, &o.report) {
            (bronze::BatchStatus::Failed, _) => 2,
            (_, Some(r)) => r.exit_code(),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
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
                // Position first: a frame between the two would show the files' count
                // over the topics' ("20/8").
                bar.set_position(0);
                bar.set_message("writing tables");
                bar.set_length(*topics as u64);
            }
            bar.set_length(bar.length().unwrap_or(0).max(*done as u64));
            bar.set_position(*done as u64);
        }
        _ => {}
    }
}
