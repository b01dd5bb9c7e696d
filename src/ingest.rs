//! `Ingest`: owns the pools, the runtime and the lock map, and runs the stages in order.
//!
//! discover → stage (parse once) → `_corrupt_records` → fan out topics on the fan-out
//! pool (flatten, then write each table under its lock) → `_run_control` (written once,
//! after the parallel phase) → [`BatchReport`]. Only this module knows the order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::array::{
    ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use rayon::prelude::*;
use url::Url;

use crate::batch::BatchKey;
use crate::clock::now_micros;
use crate::config::{CommitPer, IngestConfig, LockPolicy};
use crate::error::{Error, Result};
use crate::flatten::{self, Lineage};
use crate::lease::Lease;
use crate::locks::TableLocks;
use crate::naming::{self, TableName};
use crate::report::{BatchReport, MAX_LISTED_CORRUPT, RunControlRow, StagingMode, TableOutcome};
use crate::source::discover;
use crate::stage::spill::{StagingSummary, StagingTable};
use crate::stage::{self, CorruptLine};
use crate::validate::{
    Invariant, TableWrite, check_invariant, invariant_row, outcomes, run_control_batch,
};
use crate::write::{self, Committed, Storage};

/// Default cap on topics processed at once with an object store
/// ([`IngestConfig::object_store`]), where each commit waits on the network: 32 in flight
/// overlap those waits (BENCHMARKS.md, storage with latency).
pub const DEFAULT_MAX_PARALLEL: usize = 32;

/// Default topics in flight per core on a local catalog, where a commit is CPU and
/// file-system work: more only add context switches and memory (historical batch on
/// 2 cores: 8 in flight 2.3-2.4 s, 32 in flight 2.7-3.5 s; BENCHMARKS.md).
const LOCAL_PARALLEL_PER_CORE: usize = 4;

/// Topics processed at once unless `max_parallel` says: [`DEFAULT_MAX_PARALLEL`] on an
/// object store, [`LOCAL_PARALLEL_PER_CORE`] per parse thread (at most
/// [`DEFAULT_MAX_PARALLEL`]) on a local catalog.
fn default_max_parallel(config: &IngestConfig, threads: usize) -> usize {
    if config.object_store.is_some() {
        DEFAULT_MAX_PARALLEL
    } else {
        (LOCAL_PARALLEL_PER_CORE * threads).clamp(2, DEFAULT_MAX_PARALLEL)
    }
}

/// Memory a batch staged in memory takes per byte of landing data, for the budget check.
pub const MEMORY_PER_LANDING_BYTE: u64 = 4;

/// Landing files fetched at once from an object store.
pub const PREFETCH_CONCURRENCY: usize = 32;

/// Landing files' raw bytes by path.
type Fetched = std::collections::HashMap<PathBuf, Vec<u8>>;

/// Landing files fetched from an object store, each taken out once by the file's reader.
struct Prefetched(parking_lot::Mutex<Fetched>);

impl Prefetched {
    fn take(&self, file: &discover::SourceFile) -> Option<Vec<u8>> {
        self.0.lock().remove(&file.path)
    }
}

/// A fetch of the batch's landing files started at discovery ([`Ingest::start_prefetch`]);
/// aborted when dropped unjoined (the run stopped before staging, or resumed).
struct EarlyFetch(Option<tokio::task::JoinHandle<Result<Fetched>>>);

impl EarlyFetch {
    async fn join(mut self) -> Result<Prefetched> {
        let Some(handle) = self.0.take() else {
            unreachable!("joined once")
        };
        match handle.await {
            Ok(fetched) => Ok(Prefetched(parking_lot::Mutex::new(fetched?))),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Runtime {
                what: "landing fetch",
                source: Box::new(e),
            }),
        }
    }
}

impl Drop for EarlyFetch {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// The raw bytes of `files` from `store`, up to [`PREFETCH_CONCURRENCY`] requests at once.
async fn fetch_all(
    store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    files: Vec<discover::SourceFile>,
) -> Result<Fetched> {
    use futures::{StreamExt as _, TryStreamExt as _};
    futures::stream::iter(files.into_iter().map(|f| {
        let store = Arc::clone(&store);
        async move {
            let bytes = crate::source::read::fetch_raw(&f, store.as_ref()).await?;
            Ok::<_, Error>((f.path, bytes))
        }
    }))
    .buffer_unordered(PREFETCH_CONCURRENCY)
    .try_collect()
    .await
}

pub use crate::schema::RUN_CONTROL_TABLE;

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
    runtime: tokio::runtime::Runtime,
    locks: Arc<TableLocks>,
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
    /// A staging chunk spilled, or a wave of over-budget topics committed: that memory
    /// is not needed again soon.
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

/// Builds an [`Ingest`]; every setting has a default (see [`IngestConfig`]).
#[derive(Clone)]
pub struct IngestBuilder {
    config: IngestConfig,
    progress: Option<ProgressFn>,
    release: Option<MemoryReleaseFn>,
}

impl std::fmt::Debug for IngestBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl IngestBuilder {
    /// Schema folder under the catalog. Default `bronze`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.config.schema = schema.into();
        self
    }
    /// Use this batch id instead of the folder's `batch_id=<id>`.
    pub fn with_batch_id(mut self, id: impl Into<String>) -> Self {
        self.config.batch_id = Some(id.into());
        self
    }
    /// Use this landing path (`<source>/<entity>`) for the batch folder instead of the
    /// names of the two folders above it (one folder runs only).
    pub fn with_landing_path(mut self, path: impl Into<String>) -> Self {
        self.config.landing_path = Some(path.into());
        self
    }
    /// Envelope field holding the topic. Default `topic`.
    pub fn with_topic_field(mut self, field: impl Into<String>) -> Self {
        self.config.envelope.topic_field = field.into();
        self
    }
    /// Envelope field holding the message id; `None` disables dedup. Default `message_id`.
    pub fn with_id_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.id_field = field;
        self
    }
    /// Envelope field holding the payload; `None`: all non-envelope fields. Default `payload`.
    pub fn with_payload_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.payload_field = field;
        self
    }
    /// Topics processed at once. Default `min(32, topics)`; 1 is sequential.
    pub fn with_max_parallel(mut self, n: usize) -> Self {
        self.config.max_parallel = Some(n);
        self
    }
    /// Threads used to parse files. Default: available parallelism.
    pub fn with_threads(mut self, n: usize) -> Self {
        self.config.threads = Some(n);
        self
    }
    /// Depth beyond which sub-trees are kept as JSON text. Default 16.
    pub fn with_max_depth(mut self, depth: usize) -> Self {
        self.config.flatten.max_depth = depth;
        self
    }
    /// All flattening settings at once (types, evolution, child naming, depth).
    pub fn with_flatten(mut self, flatten: crate::config::FlattenConfig) -> Self {
        self.config.flatten = flatten;
        self
    }
    /// What a field with no column in an existing table does, for every topic without
    /// its own mode. Default [`crate::Evolution::Add`].
    pub fn with_evolution(mut self, evolution: crate::config::Evolution) -> Self {
        self.config.flatten.evolution = evolution;
        self
    }
    /// The evolution mode of one topic.
    pub fn with_topic_evolution(
        mut self,
        topic: impl Into<String>,
        evolution: crate::config::Evolution,
    ) -> Self {
        self.config
            .flatten
            .topic_evolution
            .insert(topic.into(), evolution);
        self
    }
    /// How leaf values are typed. Default [`crate::TypesMode::Infer`].
    pub fn with_types(mut self, types: crate::config::TypesMode) -> Self {
        self.config.flatten.types = types;
        self
    }
    /// Top-level fields forming the dedup key instead of the id.
    pub fn with_dedup_fields(mut self, fields: Option<Vec<String>>) -> Self {
        self.config.envelope.dedup_fields = fields;
        self
    }
    /// How writes to one table are serialized. Default [`LockPolicy::PerTable`].
    pub fn with_lock_policy(mut self, policy: LockPolicy) -> Self {
        self.config.lock_policy = policy;
        self
    }
    /// Object store rooted at `/` used for every table (see [`IngestConfig::object_store`]).
    pub fn with_object_store(
        mut self,
        store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    ) -> Self {
        self.config.object_store = Some(store);
        self
    }
    /// Auto compaction after commits (default on) and its small-file trigger (default 50).
    pub fn with_auto_compact(mut self, on: bool, min_files: u64) -> Self {
        self.config.auto_compact = on;
        self.config.auto_compact_min_files = min_files;
        self
    }
    /// Target size of written files (default 128 MiB).
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.config.target_file_size = bytes;
        self
    }
    /// How rows are grouped into commits. Default [`CommitPer::Table`].
    pub fn with_commit_per(mut self, per: CommitPer) -> Self {
        self.config.commit_per = per;
        self
    }
    /// Bench baseline: each topic task re-reads and re-parses the landing files.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn with_reread_per_topic(mut self, reread: bool) -> Self {
        self.config.reread_per_topic = reread;
        self
    }
    /// Persist staging as `_tmp_raw_load_<batch_id>` even when it fits in memory.
    pub fn with_persist_staging(mut self, persist: bool) -> Self {
        self.config.persist_staging = persist;
        self
    }
    /// Bytes of landing data staged in memory at once; more spills to the staging table.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.config.memory_budget = bytes;
        self
    }
    /// Take the batch lease (default on; see [`IngestConfig::batch_lease`]).
    pub fn with_batch_lease(mut self, on: bool) -> Self {
        self.config.batch_lease = on;
        self
    }
    /// Resume from a complete staging table of an earlier run. Default `true`.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.config.resume = resume;
        self
    }
    /// Simulated crash at the named point (tests only).
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub fn with_failpoint(mut self, name: &str) -> Self {
        self.config.failpoint = Some(name.to_string());
        self
    }
    /// Called as files are parsed and tables written (from worker threads).
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }
    /// Called when a run has just freed much memory ([`MemoryRelease`]), to hand it back
    /// to the OS with process-wide allocator calls (`malloc_trim`, a jemalloc purge): the
    /// `bronze` binary does; without it, freed memory stays with the allocator.
    pub fn with_memory_release(
        mut self,
        f: impl Fn(MemoryRelease) + Send + Sync + 'static,
    ) -> Self {
        self.release = Some(Arc::new(f));
        self
    }
    /// All settings at once (the CLI builds an [`IngestConfig`] from its flags).
    pub fn config_mut(&mut self) -> &mut IngestConfig {
        &mut self.config
    }
    /// Validates the settings and starts the pools and runtime.
    pub fn build(self) -> Result<Ingest> {
        let mut ingest = Ingest::from_config(self.config)?;
        ingest.progress = self.progress;
        ingest.release = self.release;
        Ok(ingest)
    }
}

/// How many of `topics` map to each topic table (names that sanitise alike share one).
fn topics_per_table(topics: &[(String, u64)]) -> BTreeMap<TableName, usize> {
    let mut counts: BTreeMap<TableName, usize> = BTreeMap::new();
    for (topic, _) in topics {
        *counts.entry(TableName::for_topic(topic)).or_default() += 1;
    }
    counts
}

/// How the topics of a batch fan out ([`Ingest::waves`]).
struct Waves {
    /// Over the memory budget: topics stream from the staging table in waves.
    bounded: bool,
    /// One commit per (topic, table) rather than one per table.
    per_topic: bool,
    /// Topics in flight at once.
    wave: usize,
    /// Staged bytes a topic in flight flattens and commits at once.
    slice_bytes: u64,
    /// The pool of an over-budget batch's waves (`None`: the fan-out pool).
    pool: Option<rayon::ThreadPool>,
}

/// The staged batch, wherever it lives.
struct StagedBatch {
    mode: StagingMode,
    summary: StagingSummary,
    /// Topic → staged rows, when staged in memory.
    memory: Option<BTreeMap<String, Vec<RecordBatch>>>,
    files: Vec<crate::stage::FileStats>,
    corrupt: Vec<CorruptLine>,
}

/// Topics processed at once when a batch is over the memory budget: a topic in flight
/// holds its staged rows and their flattened tables (about four times its landing
/// bytes); at least one, at most the fan-out pool's threads.
fn wave_size(summary: &StagingSummary, budget: u64, threads: usize) -> usize {
    let bytes_per_message = summary.bytes_read / summary.lines.max(1);
    let largest = summary.topics.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let per_topic = (largest * bytes_per_message * 4).max(1);
    ((budget / per_topic) as usize).clamp(1, threads.max(1))
}

/// Bytes a landing file takes once read: gzip counts four times its size (JSON
/// compresses about that much).
fn landing_size(f: &discover::SourceFile) -> u64 {
    match f.compression {
        discover::Compression::Gzip => f.bytes.saturating_mul(4),
        discover::Compression::None => f.bytes,
    }
}

/// Splits files into chunks of at most `budget` bytes of landing data (at least one
/// file each). Gzip files count four times their size: JSON compresses about that much.
fn chunk_files(files: &[discover::SourceFile], budget: u64) -> Vec<&[discover::SourceFile]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        let size = landing_size(f);
        if i > start && bytes + size > budget {
            chunks.push(&files[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < files.len() {
        chunks.push(&files[start..]);
    }
    chunks
}

/// A counting semaphore: at most `n` holders of a [`Slot`] at once.
struct Slots {
    free: parking_lot::Mutex<usize>,
    freed: parking_lot::Condvar,
}

/// One of [`Slots`], given back on drop.
struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(n: usize) -> Self {
        Slots {
            free: parking_lot::Mutex::new(n.max(1)),
            freed: parking_lot::Condvar::new(),
        }
    }

    /// Waits for a free slot.
    fn take(&self) -> Slot<'_> {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
    }
}

/// One topic's rows for one table: `(topic, staged messages, rows)`.
type TopicPart = (String, u64, Vec<RecordBatch>);

/// A topic's flattened rows: table → batches (one per staged slice).
type SlicedPlan = BTreeMap<TableName, Vec<RecordBatch>>;

/// Tables in name order, each with its topics' parts.
type GatheredTables = Vec<(TableName, Vec<TopicPart>)>;

/// The tables several topics may feed, gathered while topics are flattened
/// ([`Ingest::flatten_then_write`]).
struct Gathered {
    /// Topics not flattened yet.
    remaining: usize,
    /// Topic tables written as soon as their topic was flattened.
    early: usize,
    /// Table → its topics' parts with the topic's index, in the order they were flattened.
    by_table: BTreeMap<TableName, Vec<(usize, TopicPart)>>,
}

impl Gathered {
    /// Adds the tables of the topic at `index` (of the batch's topics) and counts it done
    /// (`early`: its own table is written on its own). For the last topic: the gathered
    /// tables in name order, each table's parts in topic order (the order its schema
    /// evolves in, whatever order the topics were flattened in), and the number of early
    /// tables.
    fn done(
        &mut self,
        index: usize,
        (topic, rows_in): (&str, u64),
        plan: SlicedPlan,
        early: bool,
    ) -> Option<(GatheredTables, usize)> {
        for (table, batches) in plan {
            self.by_table
                .entry(table)
                .or_default()
                .push((index, (topic.to_string(), rows_in, batches)));
        }
        self.early += usize::from(early);
        self.remaining -= 1;
        if self.remaining > 0 {
            return None;
        }
        let tables = std::mem::take(&mut self.by_table)
            .into_iter()
            .map(|(table, mut parts)| {
                parts.sort_by_key(|(index, _)| *index);
                (table, parts.into_iter().map(|(_, part)| part).collect())
            })
            .collect();
        Some((tables, self.early))
    }
}

/// Staged rows flattened in one pass: a topic staged in memory comes as one batch per
/// group of files, flattened together; read back from the staging table it comes in
/// slices of a few thousand rows, flattened a few at a time.
const FLATTEN_ROWS: usize = 16_384;

fn rows_of(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

/// One [`TableWrite`] per part of a shared commit: `meta` is `(topic, rows in, rows
/// planned)` per part, in the order the parts were given.
fn part_writes(
    table: &TableName,
    meta: Vec<(String, u64, u64)>,
    result: Result<(Committed, Vec<write::PartOutcome>)>,
    started_micros: i64,
    ended_micros: i64,
) -> Vec<TableWrite> {
    let write = |topic: String, rows_in, rows_planned, result, added, rescued| TableWrite {
        table: table.clone(),
        topic,
        rows_in,
        rows_planned,
        started_micros,
        ended_micros,
        result,
        added,
        rescued,
    };
    match result {
        Err(e) => {
            // The only part keeps the error; several share it.
            let (mut only, shared) = if meta.len() == 1 {
                (Some(e), None)
            } else {
                (None, Some(Arc::new(e)))
            };
            meta.into_iter()
                .map(|(topic, rows_in, planned)| {
                    let err = match (only.take(), &shared) {
                        (Some(e), _) => e,
                        (None, Some(s)) => Error::Shared(Arc::clone(s)),
                        (None, None) => Error::Internal {
                            what: "a failed write without its error".into(),
                        },
                    };
                    write(topic, rows_in, planned, Err(err), Vec::new(), 0)
                })
                .collect()
        }
        Ok((c, outcomes)) => {
            let total: u64 = outcomes.iter().map(|o| o.rows).sum();
            meta.into_iter()
                .zip(outcomes)
                .map(|((topic, rows_in, planned), o)| match o.error {
                    Some(e) => write(topic, rows_in, planned, Err(e), Vec::new(), 0),
                    None => {
                        // The commit's statistics count all parts; a part's share is its
                        // own rows when the total matches.
                        let rows_added = if c.rows_added == total {
                            o.rows
                        } else {
                            c.rows_added
                        };
                        write(
                            topic,
                            rows_in,
                            planned,
                            Ok(Committed { rows_added, ..c }),
                            o.added,
                            o.rescued,
                        )
                    }
                })
                .collect()
        }
    }
}

pub use crate::schema::INVARIANT_ROW;

fn pool(threads: usize, name: &'static str) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("bronze-{name}-{i}"))
        .build()
        .map_err(|e| Error::Runtime {
            what: "thread pool",
            source: Box::new(e),
        })
}

impl Ingest {
    /// A builder writing under `catalog` (created if missing).
    pub fn builder(catalog: impl Into<PathBuf>) -> IngestBuilder {
        IngestBuilder {
            config: IngestConfig {
                catalog: catalog.into(),
                ..IngestConfig::default()
            },
            progress: None,
            release: None,
        }
    }

    /// An `Ingest` from a full configuration.
    pub fn from_config(config: IngestConfig) -> Result<Ingest> {
        config.validate()?;
        let threads = config
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        let parse_pool = pool(threads, "parse")?;
        // Topic tasks spend most of their time waiting on commits, so they get their own
        // pool of `max_parallel` threads rather than the parse pool's (one per core).
        let parallel = config
            .max_parallel
            .unwrap_or_else(|| default_max_parallel(&config, threads));
        let fanout_pool = pool(parallel, "topic")?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.clamp(2, 8))
            .thread_name("bronze-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime {
                what: "tokio runtime",
                source: Box::new(e),
            })?;
        let locks = Arc::new(TableLocks::new(config.lock_policy));
        Ok(Ingest {
            config,
            parse_pool,
            fanout_pool,
            runtime,
            locks,
            progress: None,
            release: None,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// The lock map shared by every run of this `Ingest` (maintenance takes the same locks).
    pub fn locks(&self) -> &Arc<TableLocks> {
        &self.locks
    }

    /// `<catalog>/<schema>`, absolute (the catalog folder is created if missing).
    pub fn schema_dir(&self) -> Result<PathBuf> {
        let catalog = &self.config.catalog;
        std::fs::create_dir_all(catalog).map_err(|e| Error::io(catalog, e))?;
        let catalog = catalog.canonicalize().map_err(|e| Error::io(catalog, e))?;
        Ok(catalog.join(&self.config.schema))
    }

    fn fanout_threads(&self) -> usize {
        self.fanout_pool.current_num_threads()
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    pub(crate) fn storage(&self) -> Result<Storage> {
        let dir = self.schema_dir()?;
        let schema_url = Url::from_directory_path(&dir).map_err(|()| Error::Config {
            name: "catalog",
            reason: format!("{} is not an absolute path", dir.display()),
        })?;
        #[allow(unused_mut)]
        let mut root_store = self.config.object_store.clone();
        #[cfg(feature = "failpoints")]
        if self.failpoint_hit("before_commit") && crate::failpoint::kill_action() {
            let inner = root_store.unwrap_or_else(|| {
                Arc::new(deltalake::logstore::object_store::local::LocalFileSystem::new())
            });
            root_store = Some(crate::failpoint::BeforeCommitStore::wrap(inner));
        }
        Ok(Storage {
            schema_url,
            root_store,
            target_file_size: self.config.target_file_size,
            compression: self.config.compression,
            auto_compact_at: self
                .config
                .auto_compact
                .then_some(self.config.auto_compact_min_files),
            unloaded_appends: true,
        })
    }

    /// Takes the batch's lease, one file per folder (in landing path order; those taken
    /// are released when one is held), under the schema folder, through the run's store.
    fn lease(&self, storage: &Storage, key: &BatchKey, run_id: &str) -> Result<Vec<Lease>> {
        let store = storage.root_store.clone().unwrap_or_else(|| {
            Arc::new(deltalake::logstore::object_store::local::LocalFileSystem::new())
        });
        let dir =
            deltalake::logstore::object_store::path::Path::from_url_path(storage.schema_url.path())
                .map_err(|e| Error::Config {
                    name: "catalog",
                    reason: format!("cannot address {}: {e}", storage.schema_url),
                })?;
        let shown = storage
            .schema_url
            .as_str()
            .trim_end_matches('/')
            .to_string();
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
                    &self.runtime,
                )
            })
            .collect()
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
        let started = Instant::now();
        let started_micros = now_micros();
        // 1. Discover: the batch key and its files, validated before any I/O.
        let found = self.discover(batch_dirs)?;
        let mut storage = self.storage()?;
        let lineage = Lineage::of(&found.key, &found.folders, started_micros);
        let early_fetch = self.start_prefetch(&found.files);
        // 2. The batch lease, then what the catalog already holds of the batch.
        let run_id = format!("{}-{}", found.batch_id, started_micros);
        let mut warnings = found.warnings.clone();
        let _lease = self.take_lease(&storage, &found.key, &run_id, &mut warnings)?;
        // A batch loaded before (its `txn` is in `_run_control`) has rows in its tables:
        // their appends would find its `txn` there and take the loaded path anyway.
        storage.unloaded_appends = !self
            .runtime
            .block_on(storage.batch_seen(&TableName::system(RUN_CONTROL_TABLE), &found.key));
        // 3. Read + stage: every line parsed once, deduplicated, grouped by topic.
        self.failpoint("before_staging")?;
        let staging_table = StagingTable::new(&storage, &found.key);
        let mut writes: Vec<TableWrite> = Vec::new();
        let mut staged = self.stage_batch(
            &found.files,
            &storage,
            &staging_table,
            &lineage,
            &mut writes,
            early_fetch,
        )?;
        self.failpoint("after_staging")?;
        tracing::info!(
            mode = staged.mode.as_str(),
            lines = staged.summary.lines,
            corrupt = staged.summary.corrupt_lines,
            duplicates = staged.summary.duplicates,
            topics = staged.summary.topics.len(),
            "staged"
        );
        // 4-6. Fan out: flatten, fit and write every topic; `_corrupt_records` beside.
        let in_memory = staged.memory.is_some();
        writes.extend(self.process_topics(
            &storage,
            &mut staged,
            &staging_table,
            &lineage,
            &found,
        )?);
        self.failpoint("before_run_control")?;
        // 7. Run control: one row per write, the row accounting, written once.
        let (mut tables, mut run_control) = outcomes(writes, &run_id, &found.key);
        let invariant = check_invariant(&staged.summary, &staged.files, &run_control);
        if !invariant.ok {
            tracing::error!(check = %invariant.text, "row accounting does not add up");
        }
        run_control.push(invariant_row(
            &invariant,
            &staged.summary,
            &run_id,
            &found.key,
            started_micros,
        ));
        if let Some(e) = self.write_run_control(&storage, &run_control, &found.key) {
            tables.insert(
                RUN_CONTROL_TABLE.to_string(),
                TableOutcome {
                    error: Some(crate::error::chain(&e)),
                    ..Default::default()
                },
            );
        }
        self.failpoint("before_drop_staging")?;
        let failed = tables.values().any(|t| t.error.is_some()) || !invariant.ok;
        if !in_memory {
            self.finish_staging(&staging_table, failed, &mut warnings);
        }
        for w in &warnings {
            tracing::warn!("{w}");
        }

        // 8. The report.
        let mut report = batch_report(found, staged, invariant, started);
        report.tables = tables;
        report.run_control = run_control;
        report.warnings = warnings;
        Ok(report)
    }

    /// Discovers the batch folders (see [`discover::discover_folders`]) and says so.
    fn discover(&self, batch_dirs: &[impl AsRef<Path>]) -> Result<discover::Discovery> {
        let dirs: Vec<std::path::PathBuf> = batch_dirs
            .iter()
            .map(|d| d.as_ref().to_path_buf())
            .collect();
        let found = discover::discover_folders(
            &dirs,
            self.config.batch_id.as_deref(),
            self.config.landing_path.as_deref(),
        )?;
        tracing::info!(batch = %found.key, files = found.files.len(), skipped = found.skipped.len(), "discovered");
        self.report_progress(Progress::Discovered {
            files: found.files.len(),
            bytes: found.files.iter().map(|f| f.bytes).sum(),
        });
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

    /// Flattens and writes every staged topic (and `_corrupt_records`, when staged in
    /// memory) and returns the writes: in memory, every topic flattened then one commit
    /// per table; over budget, topic by topic in waves that fit the memory budget.
    fn process_topics(
        &self,
        storage: &Storage,
        staged: &mut StagedBatch,
        staging_table: &StagingTable<'_>,
        lineage: &Lineage,
        #[cfg_attr(not(feature = "testing"), allow(unused_variables))] found: &discover::Discovery,
    ) -> Result<Vec<TableWrite>> {
        let written = AtomicUsize::new(0);
        let topic_count = staged.summary.topics.len();
        let in_memory = staged.memory.is_some();
        let memory = staged.memory.take().map(parking_lot::Mutex::new);
        // A topic's staged rows: one batch per group of files when staged in memory,
        // DataFusion's batches (slices of a few thousand rows) when read back from the
        // staging table.
        let topic_input = |topic: &str| -> Result<Vec<RecordBatch>> {
            #[cfg(feature = "testing")]
            if self.config.reread_per_topic {
                // The benches' baseline: every topic re-reads and re-parses the batch.
                return self.reread_topic(&found.files, topic);
            }
            // Each topic's staged rows are taken out once, so they are freed as soon as
            // the topic is flattened.
            match &memory {
                Some(m) => m.lock().remove(topic).ok_or_else(|| Error::Internal {
                    what: format!("topic {topic:?} missing from staging"),
                }),
                None => self.runtime.block_on(staging_table.read_topic(topic)),
            }
        };
        let Waves {
            bounded,
            per_topic,
            wave,
            slice_bytes,
            pool: wave_pool,
        } = self.waves(&staged.summary, in_memory)?;
        let topic_pool = wave_pool.as_ref().unwrap_or(&self.fanout_pool);
        let fan_out = || -> Vec<Vec<TableWrite>> {
            if per_topic {
                let mut results = Vec::with_capacity(topic_count);
                for topics in staged.summary.topics.chunks(wave) {
                    results.extend(topic_pool.install(|| {
                        topics
                            .par_iter()
                            .with_max_len(1)
                            .map(|(topic, _)| {
                                if bounded && !self.reread_per_topic() {
                                    self.handle_topic_streamed(
                                        storage,
                                        topic,
                                        staging_table,
                                        lineage,
                                        &written,
                                        topic_count,
                                        slice_bytes,
                                    )
                                } else {
                                    self.handle_topic(
                                        storage,
                                        topic,
                                        topic_input(topic),
                                        lineage,
                                        &written,
                                        topic_count,
                                    )
                                }
                            })
                            .collect::<Vec<_>>()
                    }));
                    if bounded {
                        self.release_memory(MemoryRelease::BetweenPhases);
                    }
                }
                results
            } else {
                self.flatten_then_write(
                    storage,
                    &staged.summary.topics,
                    &topic_input,
                    lineage,
                    &written,
                )
            }
        };
        // Staged in memory, `_corrupt_records` is written while the topics fan out (one
        // more table, not a step before them); persisted staging wrote it already.
        let (corrupt_write, results) = std::thread::scope(|s| {
            let corrupt = (staged.mode == StagingMode::Memory)
                .then(|| s.spawn(|| self.write_corrupt(storage, &staged.corrupt, lineage)));
            let results = fan_out();
            let corrupt =
                corrupt.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            (corrupt.flatten(), results)
        });
        let mut writes: Vec<TableWrite> = corrupt_write.into_iter().collect();
        writes.extend(results.into_iter().flatten());
        Ok(writes)
    }

    /// How the topics of a staged batch fan out. A batch staged in memory fits the
    /// budget: flatten every topic, then one commit per table. A persisted (over-budget)
    /// batch is processed topic by topic, in waves sized so that the topics in flight fit
    /// the memory budget.
    fn waves(&self, summary: &StagingSummary, in_memory: bool) -> Result<Waves> {
        let bounded = !in_memory && !self.config.persist_staging;
        let wave = if bounded {
            wave_size(summary, self.config.memory_budget, self.fanout_threads())
        } else {
            summary.topics.len().max(1)
        };
        Ok(Waves {
            bounded,
            per_topic: self.config.commit_per == CommitPer::Topic || bounded,
            wave,
            // Staged bytes a topic in flight flattens and commits at once: a topic larger
            // than that is written in several commits (the first replaces, the others
            // append).
            slice_bytes: (self.config.memory_budget / (MEMORY_PER_LANDING_BYTE * wave as u64))
                .max(1),
            // Over budget, the waves run on a pool of `wave` threads: every thread that
            // allocates keeps its own allocator arena, and 32 of them tripled peak RSS.
            pool: if bounded {
                Some(pool(wave, "wave")?)
            } else {
                None
            },
        })
    }

    /// Appends the run's rows to `_run_control` (once, after the parallel phase); the
    /// error when it could not.
    fn write_run_control(
        &self,
        storage: &Storage,
        rows: &[RunControlRow],
        key: &BatchKey,
    ) -> Option<Error> {
        let rc_table = TableName::system(RUN_CONTROL_TABLE);
        match run_control_batch(rows) {
            Ok(batch) => {
                let _guard = self.locks.lock(&rc_table);
                self.runtime
                    .block_on(storage.append(&rc_table, batch, key))
                    .err()
            }
            Err(e) => Some(Error::arrow(RUN_CONTROL_TABLE, e)),
        }
    }

    /// Drops a persisted staging table once every table is in; keeps it when a table
    /// failed, so the rerun resumes from it instead of re-reading the landing files.
    fn finish_staging(
        &self,
        staging_table: &StagingTable<'_>,
        failed: bool,
        warnings: &mut Vec<String>,
    ) {
        if failed {
            warnings.push(format!(
                    "staging table `{}` kept: a table failed, a rerun resumes from it (pass --no-resume to re-read the landing files)",
                    staging_table.name()
                ));
        } else if let Err(e) = self.runtime.block_on(staging_table.drop_table()) {
            warnings.push(format!(
                "could not drop staging table `{}`: {}",
                staging_table.name(),
                crate::error::chain(&e)
            ));
        }
    }

    /// Stages the batch in memory, in chunks spilled to the staging table, or resumes
    /// from a complete staging table. A persisted staging table is complete only once
    /// `_corrupt_records` is written (pushed to `writes`: a resumed run does not see the
    /// corrupt lines); staged in memory, the corrupt lines come back whole and are
    /// written while the topics fan out.
    fn stage_batch(
        &self,
        files: &[discover::SourceFile],
        storage: &Storage,
        staging_table: &StagingTable<'_>,
        lineage: &Lineage,
        writes: &mut Vec<TableWrite>,
        mut early: Option<EarlyFetch>,
    ) -> Result<StagedBatch> {
        if let Some(resumed) = self.resume(staging_table)? {
            return Ok(resumed);
        }
        // A leftover that is not complete (a run killed or failed while staging, maybe
        // before its first commit: data files without a log) is cleared first, whether
        // this run stages in memory or not. One listing when there is none.
        self.runtime.block_on(staging_table.drop_table())?;
        let staged_files = AtomicUsize::new(0);
        let total_files = files.len();
        let on_file = || {
            let done = staged_files.fetch_add(1, Ordering::Relaxed) + 1;
            self.report_progress(Progress::FileStaged {
                done,
                total: total_files,
            });
        };
        // A chunk in flight holds its raw bytes, the parsed messages, their Arrow staging
        // and the staging write's buffers (four to five times its size, plus allocator
        // slack): an eighth of the budget per chunk.
        let over_budget = self.over_budget(files);
        let chunks = if over_budget {
            chunk_files(files, self.config.memory_budget / 8)
        } else {
            vec![files]
        };
        let persist = self.config.persist_staging || over_budget;
        let mut seen = crate::stage::IdSet::default();
        let mut summary = StagingSummary::default();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut corrupt = Vec::new();
        let mut file_stats = Vec::new();
        let mut memory = None;
        for chunk in chunks {
            let staging = self.stage_chunk(chunk, early.take(), &on_file, &mut seen)?;
            summary.files_read += chunk.len();
            summary.bytes_read += staging.files.iter().map(|f| f.bytes).sum::<u64>();
            summary.lines += staging.lines();
            summary.duplicates += staging.duplicates;
            for (topic, batch) in &staging.topics {
                *counts.entry(topic.clone()).or_default() +=
                    batch.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
            corrupt.extend(staging.corrupt);
            file_stats.extend(staging.files);
            if persist {
                self.runtime.block_on(
                    staging_table.append(
                        staging
                            .topics
                            .iter()
                            .flat_map(|(t, batches)| batches.iter().map(move |b| (t, b))),
                    ),
                )?;
                drop(staging.topics);
                self.release_memory(MemoryRelease::BetweenPhases);
                self.failpoint("after_staging_chunk")?;
            } else {
                memory = Some(staging.topics);
                // The files' text is freed group by group while staging builds. glibc's
                // malloc (a library user's default) keeps those pages unless trimmed;
                // jemalloc's arenas hand them to flattening, which needs as much again
                // (purging them cost 40k page faults, 2 % of the CPU; BENCHMARKS.md).
                self.release_memory(MemoryRelease::AfterStaging);
            }
        }
        summary.corrupt_lines = corrupt.len() as u64;
        summary.topics = counts.into_iter().collect();
        if persist {
            writes.extend(self.write_corrupt(storage, &corrupt, lineage));
            self.runtime
                .block_on(staging_table.mark_complete(&summary))?;
        }
        Ok(StagedBatch {
            mode: if persist {
                StagingMode::Persisted
            } else {
                StagingMode::Memory
            },
            summary,
            memory,
            files: file_stats,
            corrupt,
        })
    }

    /// The batch as a complete staging table of an earlier run left it, when resuming is
    /// on and there is one.
    fn resume(&self, staging_table: &StagingTable<'_>) -> Result<Option<StagedBatch>> {
        if !self.config.resume {
            return Ok(None);
        }
        let Some(summary) = self.runtime.block_on(staging_table.complete())? else {
            return Ok(None);
        };
        tracing::info!(table = %staging_table.name(), "resuming from a complete staging table");
        Ok(Some(StagedBatch {
            mode: StagingMode::Resumed,
            summary,
            memory: None,
            files: Vec::new(),
            corrupt: Vec::new(),
        }))
    }

    /// Reads and stages one chunk of files on the parse pool (`seen` carries the message
    /// ids across chunks). From object storage the chunk's files are fetched
    /// concurrently first (on a store with ~20 ms per request, two parse threads fetching
    /// one file at a time would wait far longer than they parse); a batch in one chunk
    /// may have started fetching at discovery (`early`).
    fn stage_chunk(
        &self,
        chunk: &[discover::SourceFile],
        early: Option<EarlyFetch>,
        on_file: &(dyn Fn() + Sync),
        seen: &mut crate::stage::IdSet,
    ) -> Result<stage::Staging> {
        let prefetched = match early {
            Some(fetch) => Some(self.runtime.block_on(fetch.join())?),
            None => self.prefetch(chunk)?,
        };
        let reader = |f: &discover::SourceFile| match prefetched.as_ref().and_then(|p| p.take(f)) {
            Some(bytes) => crate::source::read::decode_bytes(f, bytes),
            None => self.read_landing_file(f),
        };
        self.parse_pool.install(|| {
            stage::stage_with_progress(chunk, &self.config.envelope, on_file, seen, &reader)
        })
    }

    /// With an object store configured, the raw bytes of `files`, fetched with up to
    /// [`PREFETCH_CONCURRENCY`] requests in flight; `None` for the local file system.
    fn prefetch(&self, files: &[discover::SourceFile]) -> Result<Option<Prefetched>> {
        let Some(store) = &self.config.object_store else {
            return Ok(None);
        };
        let fetched = self
            .runtime
            .block_on(fetch_all(Arc::clone(store), files.to_vec()))?;
        Ok(Some(Prefetched(parking_lot::Mutex::new(fetched))))
    }

    /// From an object store, a batch staged in memory (one chunk) starts fetching its
    /// files as soon as it is discovered, while the run takes its lease and checks the
    /// catalog (several round trips that would otherwise come first).
    fn start_prefetch(&self, files: &[discover::SourceFile]) -> Option<EarlyFetch> {
        let store = self.config.object_store.as_ref()?;
        if self.over_budget(files) || (self.config.resume && self.config.persist_staging) {
            return None;
        }
        let fetch = fetch_all(Arc::clone(store), files.to_vec());
        Some(EarlyFetch(Some(self.runtime.spawn(fetch))))
    }

    /// Whether staging `files` in memory would pass the memory budget (then they are
    /// staged chunk by chunk into a staging table).
    fn over_budget(&self, files: &[discover::SourceFile]) -> bool {
        // Staged in memory, a batch takes about four times its landing size (raw bytes,
        // parsed messages, Arrow staging, flattened tables): measured 566 MB of RSS for
        // a 79 MB batch (BENCHMARKS.md).
        let landing_bytes: u64 = files.iter().map(landing_size).sum();
        landing_bytes.saturating_mul(MEMORY_PER_LANDING_BYTE) > self.config.memory_budget
    }

    /// Whether each topic re-reads the landing files (the benches' baseline).
    fn reread_per_topic(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.config.reread_per_topic;
        #[cfg(not(feature = "testing"))]
        false
    }

    /// Re-stages the whole batch and keeps one topic (the baseline the benches compare
    /// staging-once against; never used otherwise).
    #[cfg(feature = "testing")]
    fn reread_topic(
        &self,
        files: &[discover::SourceFile],
        topic: &str,
    ) -> Result<Vec<RecordBatch>> {
        // Same concurrent fetch as the staged path, so the comparison is only about
        // reading once vs once per topic.
        let prefetched = self.prefetch(files)?;
        let reader = |f: &discover::SourceFile| match prefetched.as_ref().and_then(|p| p.take(f)) {
            Some(bytes) => crate::source::read::decode_bytes(f, bytes),
            None => self.read_landing_file(f),
        };
        let mut staging = stage::stage_with_progress(
            files,
            &self.config.envelope,
            &|| {},
            &mut stage::IdSet::default(),
            &reader,
        )?;
        staging.topics.remove(topic).ok_or_else(|| Error::Internal {
            what: format!("topic {topic:?} missing on re-read"),
        })
    }

    /// Reads a landing file, through the configured object store when there is one.
    fn read_landing_file(&self, file: &discover::SourceFile) -> Result<Vec<u8>> {
        // Crash-test hooks: the copy step appends to a file after discovery; a file the
        // process may not read (permissions cannot stop root, which CI runs as).
        if self.failpoint_hit("grow_file") {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&file.path)
                .map_err(|e| Error::io(&file.path, e))?;
            f.write_all(b"{\"topic\":\"late\",\"message_id\":\"late\"}\n")
                .map_err(|e| Error::io(&file.path, e))?;
        }
        if self.failpoint_hit("unreadable_file") && file.name.contains("unreadable") {
            return Err(Error::io(
                &file.path,
                std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            ));
        }
        match &self.config.object_store {
            Some(store) => {
                crate::source::read::read_file_from_store(file, store.as_ref(), &self.runtime)
            }
            None => crate::source::read::read_file(file),
        }
    }

    /// Whether the named failpoint is armed (always `false` without the `failpoints`
    /// feature).
    fn failpoint_hit(&self, name: &str) -> bool {
        #[cfg(feature = "failpoints")]
        {
            self.config.failpoint.as_deref() == Some(name)
                || std::env::var("BRONZE_FAILPOINT").ok().as_deref() == Some(name)
        }
        #[cfg(not(feature = "failpoints"))]
        {
            let _ = name;
            false
        }
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

    /// Flattens a topic's staged batches a run of consecutive batches at a time, up to
    /// [`FLATTEN_ROWS`] rows per run (so only one run's values are in flight), collecting
    /// each table's batches.
    fn flatten_slices(
        &self,
        topic: &str,
        batches: &[RecordBatch],
        lineage: &Lineage,
    ) -> Result<SlicedPlan> {
        let mut out: SlicedPlan = BTreeMap::new();
        let mut rest = batches;
        while !rest.is_empty() {
            let mut rows = 0;
            let run = rest
                .iter()
                .take_while(|b| {
                    let first = rows == 0;
                    rows += b.num_rows();
                    first || rows <= FLATTEN_ROWS
                })
                .count();
            let (now, later) = rest.split_at(run);
            rest = later;
            for (table, batch) in
                flatten::flatten(topic, now, lineage, &self.config.flatten)?.tables
            {
                out.entry(table).or_default().push(batch);
            }
        }
        // Simulated bug for the accounting check's test: the topic's table loses a row.
        if self.failpoint_hit("lose_a_row")
            && let Some(last) = out
                .get_mut(&TableName::for_topic(topic))
                .and_then(|b| b.last_mut())
            && last.num_rows() > 0
        {
            *last = last.slice(0, last.num_rows() - 1);
        }
        Ok(out)
    }

    /// Flattens every topic in parallel and commits its own table as soon as it is
    /// flattened (while other topics flatten). The tables several topics may feed (child
    /// tables) are gathered until the last topic is flattened; that topic's task then
    /// writes each of them once (all its topics' rows, one commit), tables in parallel,
    /// each under its lock, while the other tasks' topic tables still commit: on storage
    /// with latency, the child tables' commits overlap the topic tables' instead of
    /// waiting for the last of them.
    ///
    /// A topic table that another topic of the batch also maps to (topics that sanitise
    /// alike) is gathered too, so that it also gets one commit.
    fn flatten_then_write(
        &self,
        storage: &Storage,
        topics: &[(String, u64)],
        topic_input: &(dyn Fn(&str) -> Result<Vec<RecordBatch>> + Sync),
        lineage: &Lineage,
        written: &AtomicUsize,
    ) -> Vec<Vec<TableWrite>> {
        let started = now_micros();
        // Flattening is CPU work: as many topics at once as parse threads, so that each
        // topic's staged rows are freed before most others start (the pool's other
        // threads still overlap commits waiting on storage).
        let flatten_slots = Slots::new(self.parse_pool.current_num_threads());
        let shared_topic_tables = topics_per_table(topics);
        let gathered = parking_lot::Mutex::new(Gathered {
            remaining: topics.len(),
            early: 0,
            by_table: BTreeMap::new(),
        });
        // Per topic in topic order: its own table's write (or its flattening error), and,
        // from the topic flattened last, the gathered tables' writes in table order.
        let per_topic: Vec<(Vec<TableWrite>, Vec<Vec<TableWrite>>)> =
            self.fanout_pool.install(|| {
                topics
                    .par_iter()
                    .with_max_len(1)
                    .enumerate()
                    .map(|(index, (topic, rows_in))| {
                        let plan = {
                            let _slot = flatten_slots.take();
                            topic_input(topic)
                                .and_then(|batches| self.flatten_slices(topic, &batches, lineage))
                        };
                        let own = TableName::for_topic(topic);
                        let (own_batches, failed, plan) = match plan {
                            Ok(mut plan) => {
                                let own_batches = (shared_topic_tables.get(&own) == Some(&1))
                                    .then(|| plan.remove(&own))
                                    .flatten();
                                (own_batches, None, plan)
                            }
                            Err(e) => {
                                let failed = TableWrite::failed(topic, *rows_in, started, e);
                                (None, Some(failed), BTreeMap::new())
                            }
                        };
                        let last = gathered.lock().done(
                            index,
                            (topic, *rows_in),
                            plan,
                            own_batches.is_some(),
                        );
                        let write_own = || match (own_batches, failed) {
                            (Some(batches), _) => self.write_topic_table(
                                storage,
                                &own,
                                topic,
                                (*rows_in, batches),
                                lineage,
                                (written, topics.len()),
                            ),
                            (None, failed) => failed.into_iter().collect(),
                        };
                        match last {
                            None => (write_own(), Vec::new()),
                            Some((tables, early)) => {
                                tracing::info!(
                                    ms = (now_micros() - started) / 1000,
                                    topics = topics.len(),
                                    gathered_tables = tables.len(),
                                    "every topic flattened"
                                );
                                let total = early + tables.len();
                                rayon::join(write_own, || {
                                    self.write_gathered(storage, tables, lineage, written, total)
                                })
                            }
                        }
                    })
                    .collect()
            });
        tracing::info!(
            ms = (now_micros() - started) / 1000,
            tables = written.load(Ordering::Relaxed),
            "written"
        );
        let mut out: Vec<Vec<TableWrite>> = Vec::new();
        let mut gathered_writes = Vec::new();
        for (own, tables) in per_topic {
            if !own.is_empty() {
                out.push(own);
            }
            gathered_writes.extend(tables);
        }
        out.extend(gathered_writes);
        out
    }

    /// Writes each gathered table once, in parallel, under its lock: all its topics' parts
    /// in one commit. `total` is the number of tables the run writes, for the progress.
    fn write_gathered(
        &self,
        storage: &Storage,
        tables: GatheredTables,
        lineage: &Lineage,
        written: &AtomicUsize,
        total: usize,
    ) -> Vec<Vec<TableWrite>> {
        tables
            .into_par_iter()
            .with_max_len(1)
            .map(|(table, parts)| {
                let started_micros = now_micros();
                let topic_names: Vec<String> = parts.iter().map(|(t, _, _)| t.clone()).collect();
                let meta: Vec<(String, u64, u64)> = parts
                    .iter()
                    .map(|(t, rows_in, b)| (t.clone(), *rows_in, rows_of(b)))
                    .collect();
                let parts: Vec<write::Part> = parts
                    .into_iter()
                    .map(|(topic, _, batches)| write::Part {
                        evolution: self.config.flatten.evolution_for(&topic),
                        topic,
                        batches,
                    })
                    .collect();
                let result = self.write_parts(storage, &table, parts, lineage, true);
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                self.report_progress(Progress::TableWritten {
                    table: table.to_string(),
                    topic: topic_names.join(","),
                    done,
                    topics: total,
                });
                part_writes(&table, meta, result, started_micros, now_micros())
            })
            .collect()
    }

    /// Commits one topic's rows for `table` under the table's lock (replacing the
    /// batch's rows of the topic, or appending a later slice), then runs
    /// [`Self::after_write`].
    fn write_topic(
        &self,
        storage: &Storage,
        table: &TableName,
        topic: &str,
        batches: Vec<RecordBatch>,
        lineage: &Lineage,
        replace: bool,
    ) -> Result<(Committed, Vec<write::PartOutcome>)> {
        let parts = vec![write::Part {
            topic: topic.to_string(),
            batches,
            evolution: self.config.flatten.evolution_for(topic),
        }];
        self.write_parts(storage, table, parts, lineage, replace)
    }

    /// Commits `parts` to `table` in one commit under the table's lock (replacing the
    /// batch's rows of their topics, or appending), then runs [`Self::after_write`].
    fn write_parts(
        &self,
        storage: &Storage,
        table: &TableName,
        parts: Vec<write::Part>,
        lineage: &Lineage,
        replace: bool,
    ) -> Result<(Committed, Vec<write::PartOutcome>)> {
        let _guard = self.locks.lock(table);
        self.runtime
            .block_on(storage.replace_parts(table, parts, &lineage.key, replace))
            .map(|((c, outcomes), t)| (self.after_write(storage, table, c, t), outcomes))
    }

    /// [`Self::after_commit`] when the write committed something to a table that had
    /// commits before (`written` is `None` when every part was refused and nothing was
    /// written, when the commit created the table, or when it appended to a table opened
    /// unloaded, whose next maintenance comes with a later commit: nothing to maintain).
    fn after_write(
        &self,
        storage: &Storage,
        table: &TableName,
        c: Committed,
        written: Option<write::WrittenTable>,
    ) -> Committed {
        if c == Committed::default() {
            return c;
        }
        let c = match written {
            Some(t) => self.after_commit(storage, table, c, t),
            None => c,
        };
        #[cfg(feature = "failpoints")]
        if self.failpoint_hit("between_tables") && crate::failpoint::kill_action() {
            crate::failpoint::kill_self("between_tables");
        }
        c
    }

    /// Called with the table's lock held after a commit: adds missing table properties
    /// and compacts when small files piled up. Failures here are warnings in the log,
    /// never a failed load: the rows are committed.
    fn after_commit(
        &self,
        storage: &Storage,
        table: &TableName,
        mut c: Committed,
        written: write::WrittenTable,
    ) -> Committed {
        let cfg = &self.config;
        let compact_at = cfg.auto_compact.then_some(cfg.auto_compact_min_files);
        let started = Instant::now();
        let outcome = self.runtime.block_on(crate::write::upkeep::after_commit(
            storage,
            table,
            written,
            cfg.target_file_size,
            compact_at,
        ));
        tracing::debug!(table = %table, us = started.elapsed().as_micros() as u64, "after commit");
        match outcome {
            Ok(Some(report)) => {
                tracing::info!(table = %table, before = report.files_before, after = report.files_after, "auto compacted");
                c.compacted = Some((report.files_before, report.files_after));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(table = %table, error = %crate::error::chain(&e), "table maintenance after commit failed")
            }
        }
        c
    }

    /// Flattens one topic and writes each of its tables under that table's lock.
    fn handle_topic(
        &self,
        storage: &Storage,
        topic: &str,
        staged: Result<Vec<RecordBatch>>,
        lineage: &Lineage,
        written: &AtomicUsize,
        topics: usize,
    ) -> Vec<TableWrite> {
        let started = now_micros();
        let rows_in = staged.as_ref().map_or(0, |b| rows_of(b));
        let plan = match staged.and_then(|batches| self.flatten_slices(topic, &batches, lineage)) {
            Ok(plan) => plan,
            Err(e) => {
                return vec![TableWrite::failed(topic, rows_in, started, e)];
            }
        };
        plan.into_iter()
            .flat_map(|(table, batches)| {
                self.write_topic_table(
                    storage,
                    &table,
                    topic,
                    (rows_in, batches),
                    lineage,
                    (written, topics),
                )
            })
            .collect()
    }

    /// Replaces one topic's rows of `table` (`rows` = staged messages in, flattened
    /// batches), reports progress (`progress` = writes done so far, total) and returns
    /// the write for run control.
    fn write_topic_table(
        &self,
        storage: &Storage,
        table: &TableName,
        topic: &str,
        (rows_in, batches): (u64, Vec<RecordBatch>),
        lineage: &Lineage,
        (written, topics): (&AtomicUsize, usize),
    ) -> Vec<TableWrite> {
        let started_micros = now_micros();
        let meta = vec![(topic.to_string(), rows_in, rows_of(&batches))];
        let result = self.write_topic(storage, table, topic, batches, lineage, true);
        let done = written.fetch_add(1, Ordering::Relaxed) + 1;
        self.report_progress(Progress::TableWritten {
            table: table.to_string(),
            topic: topic.to_string(),
            done,
            topics,
        });
        part_writes(table, meta, result, started_micros, now_micros())
    }

    /// [`Self::handle_topic`] for an over-budget batch: the topic is read from the staging
    /// table as a stream and flattened and committed `slice_bytes` of staged rows at a
    /// time, so memory holds one slice, never the whole topic. Each table's first commit
    /// replaces this batch's rows of the topic; later ones append. A crash in between
    /// leaves part of the topic, which the rerun's replace clears.
    #[allow(clippy::too_many_arguments)]
    fn handle_topic_streamed(
        &self,
        storage: &Storage,
        topic: &str,
        staging_table: &StagingTable<'_>,
        lineage: &Lineage,
        written: &AtomicUsize,
        topics: usize,
        slice_bytes: u64,
    ) -> Vec<TableWrite> {
        use futures::StreamExt as _;
        let started = now_micros();
        let fail = |e: Error| vec![TableWrite::failed(topic, 0, started, e)];
        let mut stream = match self.runtime.block_on(staging_table.topic_stream(topic)) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        // Per table: the aggregate of its commits.
        let mut done: BTreeMap<TableName, TableWrite> = BTreeMap::new();
        let mut rows_in = 0u64;
        let mut exhausted = false;
        while !exhausted {
            let mut slice = Vec::new();
            let mut bytes = 0u64;
            while bytes < slice_bytes {
                match self.runtime.block_on(stream.next()) {
                    Some(Ok(b)) => {
                        bytes += b.get_array_memory_size() as u64;
                        rows_in += b.num_rows() as u64;
                        slice.push(b);
                    }
                    Some(Err(e)) => return fail(e),
                    None => {
                        exhausted = true;
                        break;
                    }
                }
            }
            if slice.is_empty() {
                break;
            }
            let plan = match self.flatten_slices(topic, &slice, lineage) {
                Ok(p) => p,
                Err(e) => return fail(e),
            };
            drop(slice);
            for (table, batches) in plan {
                let replace = !done.contains_key(&table);
                if done.get(&table).is_some_and(|w| w.result.is_err()) {
                    continue;
                }
                let started_micros = now_micros();
                let meta = vec![(topic.to_string(), 0, rows_of(&batches))];
                let result = self.write_topic(storage, &table, topic, batches, lineage, replace);
                for w in part_writes(&table, meta, result, started_micros, now_micros()) {
                    match done.get_mut(&table) {
                        None => {
                            done.insert(table.clone(), w);
                        }
                        Some(acc) => acc.absorb(w),
                    }
                }
            }
            self.release_memory(MemoryRelease::BetweenPhases);
        }
        done.into_values()
            .map(|mut w| {
                w.rows_in = rows_in;
                let n = written.fetch_add(1, Ordering::Relaxed) + 1;
                self.report_progress(Progress::TableWritten {
                    table: w.table.to_string(),
                    topic: topic.to_string(),
                    done: n,
                    topics,
                });
                w
            })
            .collect()
    }

    /// Replaces this batch's rows in `_corrupt_records`; when the batch now has none,
    /// deletes its old ones. `None` when there was nothing to do (no lines, no table).
    fn write_corrupt(
        &self,
        storage: &Storage,
        corrupt: &[CorruptLine],
        lineage: &Lineage,
    ) -> Option<TableWrite> {
        let table = TableName::system(naming::CORRUPT_TABLE);
        let started_micros = now_micros();
        let rows = corrupt.len() as u64;
        let key = &lineage.key;
        let result = {
            let _guard = self.locks.lock(&table);
            if corrupt.is_empty() {
                match self.runtime.block_on(storage.delete_batch(&table, key)) {
                    Ok(None) => return None,
                    Ok(Some(version)) => Ok(Committed {
                        version,
                        ..Default::default()
                    }),
                    Err(e) => Err(e),
                }
            } else {
                corrupt_batch(corrupt, lineage)
                    .map_err(|e| Error::arrow(table.as_str(), e))
                    .and_then(|batch| self.runtime.block_on(storage.replace(&table, batch, key)))
            }
        };
        Some(TableWrite {
            table,
            topic: String::new(),
            rows_in: rows,
            rows_planned: rows,
            started_micros,
            ended_micros: now_micros(),
            result,
            added: Vec::new(),
            rescued: 0,
        })
    }
}

/// The report of a run from what it found and staged and its row accounting (the
/// caller adds tables, run control rows and warnings).
fn batch_report(
    found: discover::Discovery,
    staged: StagedBatch,
    invariant: Invariant,
    started: Instant,
) -> BatchReport {
    let summary = staged.summary;
    BatchReport {
        batch: found.key.to_string(),
        folders: found.folders,
        batch_id: found.batch_id,
        files_read: summary.files_read,
        files_skipped: found.skipped.len(),
        bytes_read: summary.bytes_read,
        lines: summary.lines,
        messages: summary.topics.iter().map(|(_, n)| n).sum(),
        corrupt_lines: summary.corrupt_lines,
        duplicates: summary.duplicates,
        topics: summary.topics.len(),
        tables: BTreeMap::new(),
        corrupt: {
            let mut listed = staged.corrupt;
            listed.truncate(MAX_LISTED_CORRUPT);
            listed
        },
        files: staged.files,
        run_control: Vec::new(),
        staging: staged.mode,
        invariant_ok: invariant.ok,
        invariant: invariant.text,
        warnings: Vec::new(),
        peak_rss_bytes: crate::mem::peak_rss(),
        elapsed: started.elapsed(),
    }
}

fn corrupt_batch(
    corrupt: &[CorruptLine],
    lineage: &Lineage,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let n = corrupt.len();
    let schema = Schema::new(vec![
        Field::new("_batch_id", DataType::Utf8, false),
        Field::new(flatten::LANDING_PATH, DataType::Utf8, true),
        Field::new("_source_file", DataType::Utf8, false),
        Field::new("_line", DataType::Int64, false),
        Field::new("_corrupt_record", DataType::Utf8, false),
        Field::new("_corrupt_bytes", DataType::Binary, false),
        Field::new("_reason", DataType::Utf8, false),
        Field::new("_loaded_at", flatten::timestamp_type(), false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![lineage.key.batch_id.as_str(); n])),
        Arc::new(StringArray::from_iter(
            corrupt
                .iter()
                .map(|c| lineage.landing_path_of(&c.source_file)),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.source_file.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(
            corrupt.iter().map(|c| c.line as i64),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| String::from_utf8_lossy(&c.raw)),
        )),
        Arc::new(BinaryArray::from_iter_values(
            corrupt.iter().map(|c| c.raw.as_slice()),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.reason.as_str()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(vec![lineage.loaded_at_micros; n]).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic_threads(b: IngestBuilder) -> usize {
        b.build().unwrap().fanout_threads()
    }

    #[test]
    fn gathered_tables_come_with_the_last_topic_their_parts_in_topic_order() {
        let batch = |rows: i64| {
            let a = arrow::array::Int64Array::from_iter_values(0..rows);
            RecordBatch::try_from_iter([("x", Arc::new(a) as arrow::array::ArrayRef)]).unwrap()
        };
        let child = TableName::for_topic("currentprice");
        let plan = |rows| SlicedPlan::from([(child.clone(), vec![batch(rows)])]);
        let mut g = Gathered {
            remaining: 3,
            early: 0,
            by_table: BTreeMap::new(),
        };
        // Flattened in the order 2, 0, 1; topic 1 feeds no gathered table.
        assert!(g.done(2, ("trade", 3), plan(3), true).is_none());
        assert!(g.done(0, ("news", 1), plan(1), false).is_none());
        let (tables, early) = g.done(1, ("quote", 2), SlicedPlan::new(), true).unwrap();
        assert_eq!(early, 2);
        assert_eq!(tables.len(), 1);
        let (table, parts) = &tables[0];
        assert_eq!(table, &child);
        let parts: Vec<(&str, u64, usize)> = parts
            .iter()
            .map(|(t, rows_in, b)| (t.as_str(), *rows_in, b[0].num_rows()))
            .collect();
        assert_eq!(parts, [("news", 1, 1), ("trade", 3, 3)]);
        assert!(g.by_table.is_empty());
    }

    #[test]
    fn topics_in_flight_default_to_four_per_core_locally_and_32_on_an_object_store() {
        let dir = tempfile::tempdir().unwrap();
        let local = |threads| topic_threads(Ingest::builder(dir.path()).with_threads(threads));
        assert_eq!(local(1), 4);
        assert_eq!(local(2), 8);
        assert_eq!(local(16), DEFAULT_MAX_PARALLEL);
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
}
