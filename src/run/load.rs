//! A run of one batch, start to end: [`load`] reads as the pipeline, each step's output
//! named, each step a function of its own file.
//!
//! discover ([`super::discovery`]) → lease and prior runs ([`super::leases`],
//! [`super::prior`]) → stage, parse once ([`super::staging`]) → the tables
//! ([`super::tables`]: topics fanned out, each flattened and committed) → record
//! (`_run_control`, [`super::record`]) → manifests ([`super::manifest`]) → the report.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::context::Context;
use super::counters::RunCounters;
use super::prior::IfLoaded;
use super::record::Recorded;
use super::staging::StagedBatch;
use super::state::Run;
use super::{
    discovery, hints, leases, manifest, metrics, prior, record, register, staging, tables,
};
use crate::batch::now_micros;
use crate::error::Result;
use crate::flatten::Lineage;
use crate::report::{BatchReport, MAX_LISTED_CORRUPT, Stage};
use crate::source::discover;
use crate::source::prefetch::EarlyFetch;
use crate::stage::spill::StagingTable;
use crate::table::AbortOnDrop;
use crate::table::Seen;

/// Loads `batch_dirs` as one batch ([`load`]) with the store client's retries counted,
/// then pushes the run's metrics ([`metrics::push_run_metrics`]).
pub(super) fn run_folders(
    ctx: &Context,
    batch_dirs: &[impl AsRef<Path>],
    if_loaded: IfLoaded,
) -> Result<BatchReport> {
    let mut result = ctx
        .catalog
        .retry_counter()
        .counting(|| load(ctx, batch_dirs, if_loaded));
    metrics::push_run_metrics(ctx, batch_dirs, &mut result);
    result
}

/// One run of one batch, step by step.
fn load(
    ctx: &Context,
    batch_dirs: &[impl AsRef<Path>],
    if_loaded: IfLoaded,
) -> Result<BatchReport> {
    let started = Instant::now();
    let started_micros = now_micros();
    let mut counters = RunCounters::start(&ctx.catalog);
    // 1. Discover: the batch key and its files, validated before any I/O.
    let found = discovery::discover(ctx, batch_dirs)
        .map_err(|e| manifest::cleaned_instead(ctx, batch_dirs, e))?;
    counters.mark(Stage::Discover, &ctx.catalog);
    // 2. The batch lease, then what the catalog already holds of the batch.
    let Started {
        run,
        early_fetch,
        preopen: _preopen,
        mut warnings,
    } = start(ctx, &found, started_micros, if_loaded)?;
    counters.mark(Stage::Lease, &ctx.catalog);
    // 3. Read + stage: every line parsed once, deduplicated, grouped by topic.
    ctx.failpoint("before_staging")?;
    let staging_table = StagingTable::new(&run.storage, run.key());
    let (mut staged, mut writes) =
        staging::stage_batch(&run, &found.files, &staging_table, early_fetch)?;
    ctx.failpoint("after_staging")?;
    warnings.append(&mut staged.warnings);
    counters.mark(Stage::Staging, &ctx.catalog);
    // 4-6. Fan out: flatten, fit and write every topic; `_corrupt_records` beside.
    run.still_held()?;
    let in_memory = staged.memory.is_some();
    let seen = hints::HintsSeen::default();
    writes.extend(tables::write_tables(
        &run,
        &mut staged,
        &staging_table,
        &seen,
        &found,
    )?);
    warnings.extend(seen.warnings(&ctx.config.flatten, &staged.summary.topics));
    let databases = register::to_register(ctx, &writes, &found.key); // recorded until registered
    ctx.failpoint("before_run_control")?;
    counters.mark(Stage::Tables, &ctx.catalog);
    run.still_held()?; // 7. Run control, written once; then the catalog hears of new tables.
    let recorded = record::record_run(&run, writes, &staged, counters.retries(&ctx.catalog));
    counters.mark(Stage::RunControl, &ctx.catalog);
    ctx.failpoint("before_drop_staging")?;
    if !in_memory {
        staging::finish_staging(ctx, &staging_table, recorded.failed(), &mut warnings);
    }
    if !recorded.failed() {
        warnings.extend(manifest::write_manifests(&run, &found, &staged.files));
    }
    let unregistered = register::register_new(ctx, &databases);
    let warnings = log_warnings(ctx, warnings);
    let mut report = batch_report(found, staged, recorded, warnings, unregistered, started);
    counters.finish(&ctx.catalog, &mut report);
    report.task_seconds = run.storage.clock.seconds();
    Ok(report)
}

/// What a run has once its lease is held and its prior runs are read.
struct Started<'a> {
    run: Run<'a>,
    /// The batch's files, fetched from an object store while the lease was taken.
    early_fetch: Option<EarlyFetch>,
    /// Stops opening the catalog's tables ahead when dropped.
    preopen: AbortOnDrop,
    /// The warnings so far (discovery's, leases taken over).
    warnings: Vec<String>,
}

/// The run of the batch `found`: its storage, lineage, lease and mode (what the catalog
/// holds of the batch's earlier runs). A batch `bronze clean` cleaned whose folder holds
/// files again is refused ([`manifest::refuse_cleaned_folder`]).
fn start<'a>(
    ctx: &'a Context,
    found: &discover::Discovery,
    started_micros: i64,
    if_loaded: IfLoaded,
) -> Result<Started<'a>> {
    ctx.catalog.check_put_if_absent()?;
    let storage = ctx.storage()?;
    let lineage = Lineage::of(&found.key, &found.folders, started_micros);
    let (fetched, landed) = tokio::sync::watch::channel(false);
    let early_fetch = staging::Stager::new(ctx).start_prefetch(&found.files, fetched);
    // The batch's slug (its id and a hash of its landing paths): runs of one batch id
    // from two folders started in the same microsecond stay apart in `_run_control`.
    let run_id = format!("{}-{}", found.key.slug(), started_micros);
    let mut warnings = found.warnings.clone();
    let leases = leases::take_lease(ctx, &storage, &found.key, &run_id, &mut warnings)?;
    let (mode, preopen) = prior::prior_runs(ctx, &storage, &found.key, &leases, landed, if_loaded)?;
    if mode.seen == Seen::Before {
        manifest::refuse_cleaned_folder(ctx, &storage, found)?;
    }
    let run = Run {
        ctx,
        storage,
        mode,
        lineage,
        leases,
        run_id,
        started_micros,
    };
    Ok(Started {
        run,
        early_fetch,
        preopen,
        warnings,
    })
}

/// Masks the run's warnings' secrets and logs each.
pub(super) fn log_warnings(ctx: &Context, mut warnings: Vec<String>) -> Vec<String> {
    for w in &mut warnings {
        *w = ctx.config.storage_options.mask(w);
        tracing::warn!("{w}");
    }
    warnings
}

/// The report of a run from what it found, staged and recorded, its warnings and the
/// tables the catalog did not take (the caller adds the counters).
fn batch_report(
    found: discover::Discovery,
    staged: StagedBatch,
    recorded: Recorded,
    warnings: Vec<String>,
    unregistered: Vec<String>,
    started: Instant,
) -> BatchReport {
    let summary = staged.summary;
    let Recorded {
        tables,
        run_control,
        invariant,
    } = recorded;
    BatchReport {
        batch: found.key.to_string(),
        folders: found.folders,
        batch_id: found.batch_id,
        files_read: summary.files_read,
        files_skipped: found.skipped.len(),
        skipped_files: found
            .skipped
            .iter()
            .map(|p| {
                let name = p.file_name().unwrap_or(p.as_os_str());
                crate::source::discover::lineage_name(std::path::Path::new(name))
            })
            .collect(),
        bytes_read: summary.bytes_read,
        lines: summary.lines,
        messages: summary.topics.iter().map(|(_, n)| n).sum(),
        corrupt_lines: summary.corrupt_lines,
        duplicates: summary.duplicates,
        topics: summary.topics.len(),
        tables,
        corrupt: {
            let mut listed = staged.corrupt;
            listed.truncate(MAX_LISTED_CORRUPT);
            listed
        },
        files: staged.files,
        run_control,
        staging: staged.mode,
        invariant_ok: invariant.ok,
        invariant: invariant.text,
        warnings,
        unregistered,
        store_retries: 0,
        commit_replans: 0,
        store_calls: BTreeMap::new(),
        stage_seconds: BTreeMap::new(),
        task_seconds: BTreeMap::new(),
        peak_rss_bytes: peak_rss(),
        elapsed: started.elapsed(),
    }
}

/// Peak resident set size of this process (`VmHWM` of `/proc/self/status`), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
