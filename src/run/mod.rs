//! A run: [`Ingest`] owns the pools, the runtime and the lock map, and runs the stages
//! in order ([`Ingest::run_folders`] reads as the pipeline).
//!
//! discover (`crate::source`) → lease → stage, parse once ([`staging`]) → fan out topics
//! on the fan-out pool ([`fanout`]; each topic's task in [`topic`]: flatten, then write
//! each table under its lock), `_corrupt_records` beside them → validate
//! (`crate::validate`) → `_run_control` ([`record`], written once, after the parallel
//! phase) → [`BatchReport`]. Only this module knows the order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::batch::{BatchKey, now_micros};
use deltalake::logstore::object_store::DynObjectStore;

use crate::catalog::Catalog;
use crate::config::IngestConfig;
use crate::error::{Error, Result};
use crate::flatten::Lineage;
use crate::lease::Lease;
use crate::locks::TableLocks;
use crate::maintenance::Maintenance;
use crate::naming::TableName;
use crate::report::{BatchReport, MAX_LISTED_CORRUPT, Stage, TableOutcome};
use crate::run_control::{Invariant, TableWrite, invariant_row};
use crate::source::discover;
use crate::stage::spill::StagingTable;
use crate::store::location::Location;
use crate::table::{RunMode, Seen, Storage, Txns};
use crate::validate::{check_invariant, outcomes};

mod backlog;
mod builder;
mod clean;
mod fanout;
mod gather;
mod hints;
mod ledger;
mod manifest;
pub mod metrics;
mod record;
mod staging;
mod status;
mod topic;

pub use backlog::{BacklogOutcome, BatchStatus, PendingBatch, PendingOptions};
pub use builder::IngestBuilder;
pub use clean::{
    CLEAN_ROW, CleanAction, CleanOptions, CleanOutcome, CleanStatus, MIN_DELETE_RETENTION,
};
pub use manifest::{Cleaned, LandingChange, Manifest, ManifestFile};
use staging::StagedBatch;
pub use status::{Changed, EntityStatus, Failure, InProgress};

/// Default cap on topics processed at once with an object store
/// ([`IngestConfig::object_store`]), where each commit waits on the network: 32 in flight
/// overlap those waits (BENCHMARKS.md, "End to end on storage with 20 ms per request").
pub const DEFAULT_MAX_PARALLEL: usize = 32;

/// Default topics in flight per core on a local catalog, where a commit is CPU and
/// file-system work: more only add context switches and memory (dense historical batch
/// on 2 cores: 4 in flight as fast as 8 with 15 % less peak memory; 32 in flight were
/// slower than 8; BENCHMARKS.md).
const LOCAL_PARALLEL_PER_CORE: usize = 2;

/// Topics processed at once unless `max_parallel` says: [`DEFAULT_MAX_PARALLEL`] on an
/// object store, [`LOCAL_PARALLEL_PER_CORE`] per parse thread (at most
/// [`DEFAULT_MAX_PARALLEL`]) on a local catalog.
fn default_max_parallel(config: &IngestConfig, threads: usize) -> usize {
    if config.object_store.is_some() || config.catalog.local().is_none() {
        DEFAULT_MAX_PARALLEL
    } else {
        (LOCAL_PARALLEL_PER_CORE * threads).clamp(2, DEFAULT_MAX_PARALLEL)
    }
}

/// Memory a topic in flight over the memory budget takes per byte of its landing data
/// (staged slice, flattened rows, writer buffers), for sizing waves and slices.
pub const MEMORY_PER_LANDING_BYTE: u64 = 4;

/// Memory a batch staged in memory takes per byte of landing data at its peak, for the
/// budget check: landing text, Arrow staging, flattened rows waiting for their commit
/// and the tables being written. Measured, the process included: 2.0-2.5x on generated
/// batches of 343-805 MB, 2.9x on 474 MB of real records (short lines, many rows), 3.7x
/// on an 80 MB one (the process's ~60 MB weighs more there); admitted at 3x, each stays
/// under the budget's bound of 1.25 times plus the idle process (BENCHMARKS.md).
pub const IN_MEMORY_PER_LANDING_BYTE: u64 = 3;

pub use crate::naming::RUN_CONTROL_TABLE;

/// Where a run is; passed to the progress callback.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Progress {
    /// The batch folder was listed.
    Discovered {
        /// Data files found.
        files: usize,
        /// Bytes on disk.
        bytes: u64,
    },
    /// One more file was parsed.
    FileStaged {
        /// Files parsed so far.
        done: usize,
        /// Files in the batch.
        total: usize,
    },
    /// One more (topic, table) write finished.
    TableWritten {
        /// The table.
        table: String,
        /// The topic.
        topic: String,
        /// Writes finished so far (an estimate until all topics are flattened).
        done: usize,
        /// Topics in the batch.
        topics: usize,
    },
}

/// A progress callback; called from worker threads, so it must be cheap and thread-safe.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A configured loader. Build one with [`Ingest::builder`], then call [`Ingest::run`] per
/// batch folder. Cheap to reuse across batches: it keeps its pools and runtime.
pub struct Ingest {
    config: IngestConfig,
    parse_pool: rayon::ThreadPool,
    fanout_pool: rayon::ThreadPool,
    catalog: Catalog,
    /// Stores of landing buckets and containers, by `scheme://authority`.
    landing_stores: dashmap::DashMap<String, Arc<DynObjectStore>>,
    progress: Option<ProgressFn>,
    release: Option<MemoryReleaseFn>,
}

/// When a run has just freed much memory: the moments a process-wide allocator hook
/// ([`IngestBuilder::with_memory_release`]) may hand free pages back to the OS. The
/// library itself never calls the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryRelease {
    /// A batch was staged in memory: the files' text is freed, and flattening will soon
    /// need as much again.
    AfterStaging,
    /// An over-budget batch is staged (its chunks and ids freed, its topics' slices
    /// next), or its staging chunks shrank (its ids take more of the budget): the
    /// pages freed are not needed again soon. Never between alike chunks, waves or
    /// slices, which reuse each other's freed memory.
    BetweenPhases,
}

/// A hook called at each [`MemoryRelease`] point, from the run's threads.
pub type MemoryReleaseFn = Arc<dyn Fn(MemoryRelease) + Send + Sync>;

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

pub use crate::run_control::INVARIANT_ROW;

fn pool(
    threads: usize,
    name: &'static str,
    retries: &crate::store::retries::RetryCounter,
) -> Result<rayon::ThreadPool> {
    let retries = retries.clone();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("bronze-{name}-{i}"))
        .start_handler(move |_| retries.install_on_this_thread())
        .build()
        .map_err(|e| Error::Runtime {
            what: "thread pool",
            source: Box::new(e),
        })
}

impl Ingest {
    /// An `Ingest` from a full configuration.
    pub fn from_config(config: IngestConfig) -> Result<Ingest> {
        config.validate()?;
        let threads = config
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        let catalog = Catalog::new(&config, threads)?;
        let parse_pool = pool(threads, "parse", catalog.retry_counter())?;
        // Topic tasks spend most of their time waiting on commits, so they get their own
        // pool of `max_parallel` threads rather than the parse pool's (one per core).
        let parallel = config
            .max_parallel
            .unwrap_or_else(|| default_max_parallel(&config, threads));
        let fanout_pool = pool(parallel, "topic", catalog.retry_counter())?;
        Ok(Ingest {
            config,
            parse_pool,
            fanout_pool,
            catalog,
            landing_stores: dashmap::DashMap::new(),
            progress: None,
            release: None,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// The catalog this `Ingest` loads into (its tables' address, lock map and runtime).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The lock map shared by every run of this `Ingest` (maintenance takes the same locks).
    pub fn locks(&self) -> &Arc<TableLocks> {
        self.catalog.locks()
    }

    /// `<catalog>/<schema>`, absolute (the catalog folder is created if missing).
    pub fn schema_dir(&self) -> Result<PathBuf> {
        self.catalog.schema_dir()
    }

    /// Maintenance on this catalog's tables, under the same table locks as its loads.
    pub fn maintenance(&self) -> Maintenance<'_> {
        Maintenance::new(&self.catalog)
    }

    fn fanout_threads(&self) -> usize {
        self.fanout_pool.current_num_threads()
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Runtime {
        self.catalog.runtime()
    }

    /// The catalog's storage (wrapped by the `before_commit` crash point or the
    /// `store_jitter` failpoint when armed, on a catalog reached through one store rooted
    /// at `/`: a local folder or an injected store; a catalog at an object store URL opens
    /// its stores per table, and runs unwrapped).
    pub(crate) fn storage(&self) -> Result<Storage> {
        #[cfg(feature = "failpoints")]
        {
            type Wrap = fn(
                Arc<deltalake::logstore::object_store::DynObjectStore>,
            ) -> Arc<deltalake::logstore::object_store::DynObjectStore>;
            let wrap: Option<Wrap> =
                if self.failpoint_hit("before_commit") && crate::failpoint::kill_action() {
                    Some(crate::failpoint::BeforeCommitStore::wrap)
                } else if self.failpoint_hit(crate::failpoint::JITTER) {
                    Some(crate::failpoint::JitterStore::wrap)
                } else {
                    crate::failpoint::upkeep_wrap(|p| self.failpoint_hit(p))
                };
            let root = match (&self.config.object_store, self.config.catalog.local()) {
                (Some(store), _) => Some(Arc::clone(store)),
                (None, Some(_)) => Some(Arc::new(crate::store::local::LocalLog::new())
                    as Arc<deltalake::logstore::object_store::DynObjectStore>),
                (None, None) => None,
            };
            if let (Some(wrap), Some(root)) = (wrap, root) {
                return self.catalog.storage_with(Some(wrap(root)));
            }
        }
        self.catalog.storage()
    }

    /// Takes the batch's lease, one file per folder (in landing path order; those taken
    /// are released when one is held), under the schema folder, through the run's store.
    fn lease(&self, storage: &Storage, key: &BatchKey, run_id: &str) -> Result<Vec<Lease>> {
        let (store, dir) = self.schema_folder(storage)?;
        let shown = format!(
            "{}/{}",
            self.catalog.shown().trim_end_matches('/'),
            self.config.schema
        );
        key.landing_paths
            .iter()
            .map(|landing_path| {
                Lease::acquire(
                    Arc::clone(&store),
                    &dir,
                    &shown,
                    (landing_path, &key.batch_id),
                    run_id,
                    self.config.lease_ttl,
                    self.runtime(),
                )
            })
            .collect()
    }

    /// The store holding the schema folder (the local file system for a local catalog)
    /// and the folder's path in it: where the leases live.
    fn schema_folder(
        &self,
        storage: &Storage,
    ) -> Result<(
        Arc<DynObjectStore>,
        deltalake::logstore::object_store::path::Path,
    )> {
        let store = storage.root_store.clone().unwrap_or_else(|| {
            Arc::new(deltalake::logstore::object_store::local::LocalFileSystem::new())
        });
        let dir =
            deltalake::logstore::object_store::path::Path::from_url_path(storage.schema_url.path())
                .map_err(|e| Error::Config {
                    name: "catalog",
                    reason: format!("cannot address {}: {e}", self.catalog.shown()),
                })?;
        Ok((store, dir))
    }

    fn release_memory(&self, when: MemoryRelease) {
        if let Some(f) = &self.release {
            f(when);
        }
    }

    fn report_progress(&self, p: Progress) {
        if let Some(f) = &self.progress {
            f(&p);
        }
    }

    /// Loads one landed batch folder. Lines that are not messages go to
    /// `_corrupt_records`; a table whose write fails is reported (exit code 2) and the
    /// others are still written. Returns `Err` only for run-level failures: a bad batch
    /// id, a missing folder or no data files, an unreadable file.
    pub fn run(&self, batch_dir: impl AsRef<Path>) -> Result<BatchReport> {
        self.run_folders(&[batch_dir.as_ref().to_path_buf()])
    }

    /// Loads several landed folders of one batch id as one batch (one staging, one
    /// dedup across them, one commit per table, one lease): the folders' files are read
    /// in landing path order, then by name, so the first of equal message ids wins in
    /// that order. Each row keeps its folder's `_landing_path`; a rerun of the same
    /// folders replaces exactly their rows. Folders with different batch ids are an
    /// error ([`Error::MixedBatchIds`]).
    pub fn run_folders(&self, batch_dirs: &[impl AsRef<Path>]) -> Result<BatchReport> {
        let mut result = self
            .catalog
            .retry_counter()
            .counting(|| self.load(batch_dirs, IfLoaded::Reload));
        self.push_metrics(batch_dirs, &mut result);
        result
    }

    /// [`Ingest::run_folders`], unless the batch's latest run, read once its lease is
    /// held, loaded it ([`Error::AlreadyLoaded`]): for workers of one backlog.
    fn run_folders_unless_loaded(&self, batch_dirs: &[impl AsRef<Path>]) -> Result<BatchReport> {
        let mut result = self
            .catalog
            .retry_counter()
            .counting(|| self.load(batch_dirs, IfLoaded::Stop));
        self.push_metrics(batch_dirs, &mut result);
        result
    }

    /// With [`IngestConfig::metrics_push`]: the run's metrics to the gateway (the whole
    /// group replaced), or `bronze_batch_success 0` alone for a run that failed before its
    /// report. Not for a batch another run holds or loaded: that run pushes. A gateway
    /// that cannot take them costs a warning, on the report when there is one.
    fn push_metrics(&self, batch_dirs: &[impl AsRef<Path>], result: &mut Result<BatchReport>) {
        use self::metrics::Replace;
        let Some(url) = &self.config.metrics_push else {
            return;
        };
        let (landing_path, body, replace) = match result {
            Ok(report) => (
                metrics::landing_path_of(report),
                metrics::batch_metrics(report, std::time::SystemTime::now()),
                Replace::Group,
            ),
            Err(Error::AlreadyLoaded { .. } | Error::BatchLeased { .. }) => return,
            Err(_) => {
                let Some((landing_path, batch_id)) = self.folder_identity(batch_dirs) else {
                    return;
                };
                let body = metrics::failed_run_metrics(&landing_path, &batch_id);
                (landing_path, body, Replace::Metrics)
            }
        };
        let pushed = self.runtime().block_on(metrics::push(
            url,
            ("landing_path", &landing_path),
            body,
            replace,
        ));
        if let Err(warning) = pushed {
            tracing::warn!("{warning}");
            if let Ok(report) = result {
                report.warnings.push(warning);
            }
        }
    }

    /// [`Error::BatchCleaned`] instead of `e` when the folder that has no data files (or
    /// is gone) belongs to a batch `bronze clean` cleaned, which its manifest says.
    fn cleaned_instead(&self, batch_dirs: &[impl AsRef<Path>], e: Error) -> Error {
        let gone = match &e {
            Error::NoDataFiles { .. } => true,
            Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        };
        let cleaned = (|| {
            let (landing_path, batch_id) = self.folder_identity(batch_dirs)?;
            let storage = self.storage().ok()?;
            let manifest = self
                .read_manifest(&storage, &landing_path, &batch_id)
                .ok()??;
            let cleaned = manifest.cleaned?;
            let batch = format!("{landing_path}/batch_id={batch_id}");
            let how = match cleaned.moved_to {
                Some(to) => format!(
                    "moved its landing files to {to}; its rows stay in the tables: load it again from there with `bronze ingest {to}`"
                ),
                None => "deleted its landing files; its rows stay in the tables".to_string(),
            };
            Some(Error::BatchCleaned { batch, how })
        })();
        match cleaned {
            Some(cleaned) if gone => cleaned,
            _ => e,
        }
    }

    /// [`Error::BatchCleaned`] for a batch `bronze clean` cleaned whose cleaned folder
    /// holds files again: a rerun from there would replace all its rows with those files'
    /// alone. A run from the archive (another folder) goes ahead.
    fn refuse_cleaned_folder(&self, storage: &Storage, found: &discover::Discovery) -> Result<()> {
        for folder in &found.folders {
            let Some(manifest) =
                self.read_manifest(storage, &folder.landing_path, &found.batch_id)?
            else {
                continue;
            };
            let Some(cleaned) = &manifest.cleaned else {
                continue;
            };
            if cleaned.folder != folder.path.to_string_lossy() {
                continue;
            }
            let batch = format!("{}/batch_id={}", folder.landing_path, found.batch_id);
            let archive = match &cleaned.moved_to {
                Some(to) => format!(
                    "its earlier files are in {to}: copy the new ones there and load it with `bronze ingest {to}`"
                ),
                None => "its earlier files were deleted".to_string(),
            };
            return Err(Error::BatchCleaned {
                batch,
                how: format!(
                    "cleaned its folder, which holds files that landed after: a rerun from it would replace every row of the batch with theirs alone; {archive}, or load them as a batch of their own (`--batch-id`)"
                ),
            });
        }
        Ok(())
    }

    /// The landing path and batch id a failed run's folders name (the settings' when
    /// given), for its metrics; `None` when the folders name none.
    fn folder_identity(&self, batch_dirs: &[impl AsRef<Path>]) -> Option<(String, String)> {
        let dir = batch_dirs.first()?.as_ref();
        let name = dir.file_name()?.to_str()?;
        let batch_id = match &self.config.batch_id {
            Some(id) => id.clone(),
            None => name.strip_prefix("batch_id=")?.to_string(),
        };
        let landing_path = match &self.config.landing_path {
            Some(p) => p.clone(),
            None => {
                let entity = dir.parent()?;
                let source = entity.parent()?;
                format!(
                    "{}/{}",
                    source.file_name()?.to_str()?,
                    entity.file_name()?.to_str()?
                )
            }
        };
        Some((landing_path, batch_id))
    }

    /// [`Ingest::run_folders`], with the store client's retries counted.
    fn load(&self, batch_dirs: &[impl AsRef<Path>], if_loaded: IfLoaded) -> Result<BatchReport> {
        let started = Instant::now();
        let started_micros = now_micros();
        let mut counters = RunCounters::start(&self.catalog);
        // 1. Discover: the batch key and its files, validated before any I/O.
        let found = self
            .discover(batch_dirs)
            .map_err(|e| self.cleaned_instead(batch_dirs, e))?;
        counters.mark(Stage::Discover, &self.catalog);
        self.catalog.check_put_if_absent()?;
        let storage = self.storage()?;
        let lineage = Lineage::of(&found.key, &found.folders, started_micros);
        let (fetched, landed) = tokio::sync::watch::channel(false);
        let early_fetch = self.start_prefetch(&found.files, fetched);
        // 2. The batch lease, then what the catalog already holds of the batch.
        // The batch's slug (its id and a hash of its landing paths): runs of one batch id
        // from two folders started in the same microsecond stay apart in `_run_control`.
        let run_id = format!("{}-{}", found.key.slug(), started_micros);
        let mut warnings = found.warnings.clone();
        let leases = self.take_lease(&storage, &found.key, &run_id, &mut warnings)?;
        let still_held = || leases.iter().try_for_each(Lease::check);
        let (mode, _preopen) = self.prior_runs(&storage, &found.key, &leases, landed, if_loaded)?;
        if mode.seen == crate::table::Seen::Before {
            self.refuse_cleaned_folder(&storage, &found)?;
        }
        // The run's tables, and the mode its writes to them follow.
        let run_tables = (&storage, mode);
        counters.mark(Stage::Lease, &self.catalog);
        // 3. Read + stage: every line parsed once, deduplicated, grouped by topic.
        self.failpoint("before_staging")?;
        let staging_table = StagingTable::new(&storage, &found.key);
        let (mut staged, mut writes) = self.stage_batch(
            &found.files,
            run_tables,
            &staging_table,
            &lineage,
            early_fetch,
        )?;
        self.failpoint("after_staging")?;
        warnings.append(&mut staged.warnings);
        counters.mark(Stage::Staging, &self.catalog);
        // 4-6. Fan out: flatten, fit and write every topic; `_corrupt_records` beside.
        still_held()?;
        let in_memory = staged.memory.is_some();
        let seen = hints::HintsSeen::default();
        let staging = (&staging_table, &lineage, &seen);
        writes.extend(self.write_tables(run_tables, &mut staged, staging, &found, &leases)?);
        warnings.extend(seen.warnings(&self.config.flatten, &staged.summary.topics));
        self.failpoint("before_run_control")?;
        counters.mark(Stage::Tables, &self.catalog);
        still_held()?;
        // 7. Run control: one row per write, the row accounting, written once.
        let retries = counters.retries(&self.catalog);
        let run = (&*run_id, &found.key, (started_micros, retries));
        let recorded = self.record_run(run_tables, writes, &staged, run, &leases);
        counters.mark(Stage::RunControl, &self.catalog);
        self.failpoint("before_drop_staging")?;
        if !in_memory {
            self.finish_staging(&staging_table, recorded.failed(), &mut warnings);
        }
        if !recorded.failed() {
            let seen = mode.seen == crate::table::Seen::Before;
            let run = (run_id.as_str(), started_micros, seen);
            warnings.extend(self.write_manifests(&storage, (&found, &staged.files), run));
        }
        let warnings = self.log_warnings(warnings);
        // 8. The report.
        let mut report = batch_report(found, staged, recorded, warnings, started);
        counters.finish(&self.catalog, &mut report);
        report.task_seconds = storage.clock.seconds();
        Ok(report)
    }

    /// Masks the run's warnings' secrets and logs each.
    fn log_warnings(&self, mut warnings: Vec<String>) -> Vec<String> {
        for w in &mut warnings {
            *w = self.config.storage_options.mask(w);
            tracing::warn!("{w}");
        }
        warnings
    }

    /// Reads what the catalog holds of the batch's earlier runs, which decides the run's
    /// mode, and starts pre-opening its tables ([`Ingest::seen_then_preopen`]; the guard
    /// returned stops it); with [`IfLoaded::Stop`], [`Error::AlreadyLoaded`] when the
    /// batch's latest run loaded it.
    fn prior_runs(
        &self,
        storage: &Storage,
        key: &BatchKey,
        leases: &[Lease],
        landed: tokio::sync::watch::Receiver<bool>,
        if_loaded: IfLoaded,
    ) -> Result<(RunMode, crate::table::AbortOnDrop)> {
        let unrecorded = self.unrecorded_run(storage, key, leases);
        let (seen, mode, preopen) = self.seen_then_preopen(storage, key, unrecorded, landed);
        // A backlog's worker: a batch never seen cannot have been loaded meanwhile; one
        // seen is checked against its runs in `_run_control` (unless a run of it ended
        // unrecorded: this run rewrites what that one left).
        if if_loaded == IfLoaded::Stop && seen && !unrecorded && self.loaded(storage, key)? {
            return Err(Error::AlreadyLoaded {
                batch: key.to_string(),
            });
        }
        Ok((mode, preopen))
    }

    /// The run's outcome per table, its `_run_control` rows (one per write and the row
    /// accounting's), appended to `_run_control` once, and that accounting; the leases
    /// are told once the rows are recorded.
    fn record_run(
        &self,
        (storage, mode): (&Storage, RunMode),
        writes: Vec<TableWrite>,
        staged: &StagedBatch,
        (run_id, key, started): (&str, &BatchKey, (i64, u64)),
        leases: &[Lease],
    ) -> Recorded {
        let (mut tables, mut run_control) =
            outcomes(writes, run_id, key, &self.config.storage_options);
        let invariant = check_invariant(&staged.summary, &staged.files, &run_control);
        if !invariant.ok {
            tracing::error!(check = %invariant.text, "row accounting does not add up");
        }
        let (started_micros, store_retries) = started;
        run_control.push(invariant_row(
            &invariant,
            &staged.summary,
            run_id,
            key,
            started_micros,
            store_retries,
        ));
        // Run with `_run_control`'s lock held, on the versions its upkeep is due.
        let upkeep = |table: &TableName, c, written| {
            self.after_commit(storage, table, c, written);
        };
        let appended = crate::run_control::append_rows(
            &self.catalog,
            storage,
            mode,
            &run_control,
            key,
            upkeep,
        );
        match appended {
            Ok(()) => leases.iter().for_each(Lease::recorded),
            // `_run_control`'s outcome says why its rows are not recorded.
            Err(e) => {
                let error = self.config.storage_options.mask(&crate::error::chain(&e));
                let outcome = TableOutcome {
                    error: Some(error),
                    ..Default::default()
                };
                tables.insert(RUN_CONTROL_TABLE.to_string(), outcome);
            }
        }
        Recorded {
            tables,
            run_control,
            invariant,
        }
    }

    /// Writes every topic of the staged batch ([`Ingest::process_topics`]), once every
    /// table it may write is one bronze writes; else none ([`Ingest::refused`]). A column
    /// type hint for a topic that is nowhere is an error before any write
    /// ([`hints::check_topics`]); the hints the flattened tables match go to `seen`.
    fn write_tables(
        &self,
        (storage, mode): (&Storage, RunMode),
        staged: &mut StagedBatch,
        (staging_table, lineage, seen): (&StagingTable, &Lineage, &hints::HintsSeen),
        found: &discover::Discovery,
        leases: &[Lease],
    ) -> Result<Vec<TableWrite>> {
        tracing::info!(
            mode = staged.mode.as_str(),
            lines = staged.summary.lines,
            corrupt = staged.summary.corrupt_lines,
            duplicates = staged.summary.duplicates,
            topics = staged.summary.topics.len(),
            "staged"
        );
        hints::check_topics(&self.config.flatten, &staged.summary.topics, || {
            self.runtime().block_on(storage.schema_tables())
        })?;
        if let Some(refused) = self.refused(storage, &staged.summary, (&found.key, mode)) {
            return Ok(refused);
        }
        leases.iter().for_each(Lease::writing);
        self.process_topics(
            (storage, mode),
            staged,
            (staging_table, seen),
            lineage,
            found,
        )
    }

    /// The batch's writes when a table it may write is one bronze will not write
    /// ([`crate::table::Opener::refusals`]): each topic's fails with one error naming every such
    /// table, what is in the way and the fix, and nothing is written.
    fn refused(
        &self,
        storage: &Storage,
        summary: &crate::stage::spill::StagingSummary,
        key_mode: (&BatchKey, RunMode),
    ) -> Option<Vec<TableWrite>> {
        let topics: Vec<TableName> = summary
            .topics
            .iter()
            .map(|(t, _)| TableName::for_topic(t))
            .collect();
        let hinted = hints::HintTargets::of(&self.config.flatten, &summary.topics);
        // A topic named like a child table would mix its rows with the child rows there.
        let conflict = |table: &TableName, look: &crate::table::writable::Look| {
            if look.child && topics.contains(table) {
                return Some(crate::table::writable::Refusal {
                    feature: "child rows (`_parent_id`: it is the child table of arrays named like the topic)".into(),
                    fix: "a table is a topic's or a child table, never both: load the topic into another schema, or map those arrays to another child table (`--child-table '<array path>=<name>'`) and move the child rows there".into(),
                });
            }
            hinted.conflict(table, look)
        };
        let hinted_tables = hinted.tables();
        let batch = crate::table::BatchTables {
            topics: &topics,
            hinted: &hinted_tables,
            corrupt: summary.corrupt_lines > 0,
        };
        let (key, mode) = key_mode;
        let refused = self
            .runtime()
            .block_on(storage.opener().refusals(batch, key, mode, &conflict));
        if refused.is_empty() {
            return None;
        }
        let tables = refused
            .iter()
            .map(|(t, r)| format!("`{t}` has {}: {}", r.feature, r.fix))
            .collect::<Vec<_>>()
            .join("; ");
        tracing::error!(%tables, "the batch's tables refused before any write");
        let now = now_micros();
        let error = Arc::new(Error::Refused { tables });
        Some(
            summary
                .topics
                .iter()
                .map(|(topic, n)| TableWrite {
                    table: TableName::for_topic(topic),
                    topic: topic.clone(),
                    rows_in: *n,
                    rows_planned: 0,
                    started_micros: now,
                    ended_micros: now,
                    result: Err(Error::Shared(Arc::clone(&error))),
                    added: Vec::new(),
                    rescued: 0,
                })
                .collect(),
        )
    }

    /// Whether a run of the batch ended before `_run_control` recorded it, so that its
    /// tables may hold rows of it no record tells of: this run took over the lease that
    /// run left ([`Lease`]); without leases, a lease file of the batch is there (left by
    /// a run that held one), or else only the tables' `txn`s tell
    /// ([`Txns::InTables`]).
    fn unrecorded_run(&self, storage: &Storage, key: &BatchKey, leases: &[Lease]) -> bool {
        if self.config.batch_lease {
            return leases.iter().any(|l| l.took_over.is_some());
        }
        let Ok((store, dir)) = self.schema_folder(storage) else {
            return true;
        };
        use deltalake::logstore::object_store::ObjectStoreExt as _;
        key.landing_paths.iter().any(|landing_path| {
            let path = dir
                .clone()
                .join(crate::lease::LEASE_DIR)
                .join(crate::lease::lease_file(landing_path, &key.batch_id).as_str());
            !matches!(
                self.runtime().block_on(store.head(&path)),
                Err(deltalake::logstore::object_store::Error::NotFound { .. })
            )
        })
    }

    /// Whether the batch was loaded before (its `txn` is in `_run_control`: it has rows
    /// in its tables), and the run's mode: appends skip the file list only for a batch
    /// neither seen nor `unrecorded` (its tables hold no row of it, [`Seen::Never`]), and
    /// the tables record the batch's `txn` unless the batch lease tells instead
    /// ([`Txns`]). Then the catalog's tables opened while the batch is parsed
    /// ([`crate::table::Opener::preopen`], stopped when the returned guard drops).
    fn seen_then_preopen(
        &self,
        storage: &Storage,
        key: &BatchKey,
        unrecorded: bool,
        landed: tokio::sync::watch::Receiver<bool>,
    ) -> (bool, RunMode, crate::table::AbortOnDrop) {
        let seen = self.runtime().block_on(
            storage
                .opener()
                .batch_seen(&TableName::system(RUN_CONTROL_TABLE), key),
        );
        let mode = RunMode {
            seen: if seen || unrecorded {
                Seen::Before
            } else {
                Seen::Never
            },
            txns: if self.config.batch_lease {
                Txns::RunControl
            } else {
                Txns::InTables
            },
        };
        let guard = crate::table::AbortOnDrop(storage.opened.ahead.clone());
        self.runtime().spawn(storage.opener().preopen(
            mode,
            key.clone(),
            landed,
            storage.opened.ahead.offering(),
        ));
        (seen, mode, guard)
    }

    /// Discovers the batch folders (see [`discover::discover_folders`]) and says so.
    fn discover(&self, batch_dirs: &[impl AsRef<Path>]) -> Result<discover::Discovery> {
        let found = self.list_folders(batch_dirs)?;
        tracing::info!(batch = %found.key, files = found.files.len(), skipped = found.skipped.len(), "discovered");
        self.report_progress(Progress::Discovered {
            files: found.files.len(),
            bytes: found.files.iter().map(|f| f.bytes).sum(),
        });
        Ok(found)
    }

    /// The batch key and data files of `batch_dirs`, local or in an object store.
    pub(super) fn list_folders(
        &self,
        batch_dirs: &[impl AsRef<Path>],
    ) -> Result<discover::Discovery> {
        let dirs: Vec<std::path::PathBuf> = batch_dirs
            .iter()
            .map(|d| d.as_ref().to_path_buf())
            .collect();
        let (batch_id, landing_path) = (
            self.config.batch_id.as_deref(),
            self.config.landing_path.as_deref(),
        );
        let remote = dirs.iter().any(|d| d.to_string_lossy().contains("://"));
        let found = if remote {
            discover::discover_folders_with(
                &dirs,
                batch_id,
                landing_path,
                &mut |dir, i, listed| {
                    let Location::Url(url) = Location::parse(&dir.to_string_lossy())? else {
                        return Err(Error::Config {
                            name: "batch folder",
                            reason: format!(
                                "{} is local while other folders of the batch are in an object store: load them separately",
                                dir.display()
                            ),
                        });
                    };
                    let store = self.store_of(&url)?;
                    self.runtime().block_on(discover::list_store_folder(
                        store.as_ref(),
                        &url,
                        i,
                        listed,
                    ))?;
                    Ok(dir.to_path_buf())
                },
            )?
        } else {
            discover::discover_folders(&dirs, batch_id, landing_path)?
        };
        Ok(found)
    }

    /// The batch lease when [`IngestConfig::batch_lease`] is on (held until dropped), with
    /// a warning for each lease of a dead run taken over.
    fn take_lease(
        &self,
        storage: &Storage,
        key: &BatchKey,
        run_id: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Lease>> {
        if !self.config.batch_lease {
            return Ok(Vec::new());
        }
        let leases = self.lease(storage, key, run_id)?;
        for h in leases.iter().filter_map(|l| l.took_over.as_ref()) {
            warnings.push(format!(
                "took over the lease of run {} (host {}, pid {}), which is gone; its partial writes are replaced by this run",
                h.run_id, h.host, h.pid
            ));
        }
        Ok(leases)
    }

    /// The armed simulated read fault of `file` ([`crate::failpoint::SIMULATED`], tests
    /// only), whether it is read now or was fetched ahead.
    fn simulated_read_faults(&self, _file: &discover::SourceFile) -> Result<()> {
        #[cfg(feature = "failpoints")]
        for point in crate::failpoint::SIMULATED {
            if self.failpoint_hit(point) {
                crate::failpoint::before_read(point, _file)?;
            }
        }
        Ok(())
    }

    /// Reads a landing file, through the configured object store when there is one.
    fn read_landing_file(
        &self,
        file: &discover::SourceFile,
    ) -> Result<crate::source::read::Decoded> {
        self.simulated_read_faults(file)?;
        match self.landing_store(std::slice::from_ref(file))? {
            Some(store) => {
                crate::source::read::read_file_from_store(file, store.as_ref(), self.runtime())
            }
            None => crate::source::read::read_file(file),
        }
    }

    /// The object store landing `files` are read from: the injected one
    /// ([`IngestConfig::object_store`]), the store of their bucket or container, or `None`
    /// on the local file system.
    pub(super) fn landing_store(
        &self,
        files: &[discover::SourceFile],
    ) -> Result<Option<Arc<DynObjectStore>>> {
        if self.config.object_store.is_some() {
            return Ok(self.catalog.object_store().cloned());
        }
        match files.first().map(|f| f.name.as_str()) {
            Some(name) if name.contains("://") => match Location::parse(name)? {
                Location::Url(url) => self.store_of(&url).map(Some),
                Location::Local(_) => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// The store of `url`'s bucket or container, built once per `Ingest` and kept.
    fn store_of(&self, url: &url::Url) -> Result<Arc<DynObjectStore>> {
        let key = format!("{}://{}", url.scheme(), url.authority());
        if let Some(store) = self.landing_stores.get(&key) {
            return Ok(Arc::clone(&store));
        }
        let store = self.catalog.meter(crate::store::location::store_for(
            url,
            &self.config.storage_options,
        )?);
        self.landing_stores.insert(key, Arc::clone(&store));
        Ok(store)
    }

    /// Whether the named failpoint is armed (`failpoints` feature only).
    #[cfg(feature = "failpoints")]
    fn failpoint_hit(&self, name: &str) -> bool {
        self.config.failpoint.as_deref() == Some(name)
            || std::env::var("BRONZE_FAILPOINT").ok().as_deref() == Some(name)
    }

    /// Simulated crash at a named point (tests only, `failpoints` feature).
    fn failpoint(&self, name: &'static str) -> Result<()> {
        #[cfg(feature = "failpoints")]
        {
            if self.failpoint_hit(name) {
                if crate::failpoint::kill_action() {
                    crate::failpoint::kill_self(name);
                }
                if crate::failpoint::pause_action() {
                    crate::failpoint::pause(name);
                    return Ok(());
                }
                return Err(Error::Failpoint { name });
            }
        }
        let _ = name;
        Ok(())
    }
}

/// What a run counts on its catalog: the store client's retries, commits planned
/// again, and object store calls per stage.
struct RunCounters {
    retries: u64,
    replans: u64,
    calls: u64,
    by_stage: BTreeMap<Stage, u64>,
    /// When the last stage ended, and each stage's wall time.
    mark: Instant,
    seconds: BTreeMap<Stage, f64>,
}

impl RunCounters {
    fn start(catalog: &Catalog) -> RunCounters {
        catalog.new_run();
        RunCounters {
            retries: catalog.store_retries(),
            replans: catalog.commit_replans(),
            calls: catalog.store_calls(),
            by_stage: BTreeMap::new(),
            mark: Instant::now(),
            seconds: BTreeMap::new(),
        }
    }

    /// The calls and the time since the last mark are `stage`'s.
    fn mark(&mut self, stage: Stage, catalog: &Catalog) {
        let now = catalog.store_calls();
        self.by_stage.insert(stage, now.saturating_sub(self.calls));
        self.calls = now;
        let at = Instant::now();
        self.seconds.insert(stage, (at - self.mark).as_secs_f64());
        self.mark = at;
    }

    /// Retries since the start.
    fn retries(&self, catalog: &Catalog) -> u64 {
        catalog.store_retries().saturating_sub(self.retries)
    }

    /// Fills the report's counters (the calls since the last mark are `cleanup`'s).
    fn finish(mut self, catalog: &Catalog, report: &mut BatchReport) {
        self.mark(Stage::Cleanup, catalog);
        report.store_retries = self.retries(catalog);
        report.commit_replans = catalog.commit_replans().saturating_sub(self.replans);
        report.store_calls = by_name(self.by_stage);
        report.stage_seconds = by_name(self.seconds);
    }
}

/// `per_stage` keyed by the stages' names, as reports carry them.
fn by_name<V>(per_stage: BTreeMap<Stage, V>) -> BTreeMap<String, V> {
    per_stage
        .into_iter()
        .map(|(stage, v)| (stage.as_str().to_string(), v))
        .collect()
}

/// What a run does with a batch whose latest run loaded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IfLoaded {
    /// Load it again.
    Reload,
    /// Stop with [`Error::AlreadyLoaded`] (the workers of one backlog).
    Stop,
}

/// What a run recorded: its outcome per table, its `_run_control` rows and its row
/// accounting.
struct Recorded {
    tables: BTreeMap<String, crate::report::TableOutcome>,
    run_control: Vec<crate::run_control::RunControlRow>,
    invariant: Invariant,
}

impl Recorded {
    /// Whether a table failed or the rows do not add up.
    fn failed(&self) -> bool {
        self.tables.values().any(|t| t.error.is_some()) || !self.invariant.ok
    }
}

/// The report of a run from what it found, staged and recorded, and its warnings (the
/// caller adds the counters).
fn batch_report(
    found: discover::Discovery,
    staged: StagedBatch,
    recorded: Recorded,
    warnings: Vec<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn topic_threads(b: IngestBuilder) -> usize {
        b.build().unwrap().fanout_threads()
    }

    #[test]
    fn topics_in_flight_default_to_two_per_core_locally_and_32_on_an_object_store() {
        let dir = tempfile::tempdir().unwrap();
        let local = |threads| topic_threads(Ingest::builder(dir.path()).with_threads(threads));
        assert_eq!(local(1), 2);
        assert_eq!(local(2), 4);
        assert_eq!(local(8), 16);
        assert_eq!(local(32), DEFAULT_MAX_PARALLEL);
        let store: Arc<deltalake::logstore::object_store::DynObjectStore> =
            Arc::new(deltalake::logstore::object_store::memory::InMemory::new());
        let remote = Ingest::builder(dir.path())
            .with_threads(2)
            .with_object_store(store);
        assert_eq!(topic_threads(remote), DEFAULT_MAX_PARALLEL);
        let capped = Ingest::builder(dir.path())
            .with_threads(2)
            .with_max_parallel(3);
        assert_eq!(topic_threads(capped), 3);
    }

    /// A commit that loses to another process's conflicting commit is planned again (as
    /// `_corrupt_records`' replace and `_run_control`'s append now are, beside the topic
    /// tables'), counted; any other error ends it at once.
    #[test]
    fn a_write_that_loses_a_commit_conflict_is_planned_again_and_counted() {
        use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
        let dir = tempfile::tempdir().unwrap();
        let ingest = Ingest::builder(dir.path()).build().unwrap();
        let table = TableName::system(crate::naming::CORRUPT_TABLE);
        let conflict = || {
            Error::delta(
                table.as_str(),
                "write",
                deltalake::DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(CommitConflictError::ConcurrentAppend),
                },
            )
        };
        let mut calls = 0;
        let written = ingest.catalog().replanned(&table, || {
            calls += 1;
            if calls < 3 {
                Err(conflict())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(written.unwrap(), 3);
        assert_eq!(ingest.catalog().commit_replans(), 2);
        let mut calls = 0;
        let failed: Result<()> = ingest.catalog().replanned(&table, || {
            calls += 1;
            Err(Error::Internal {
                what: "not a conflict".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(calls, 1);
    }
}
