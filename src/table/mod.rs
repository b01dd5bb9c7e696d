//! Tables: where the tables of a schema live and how one write becomes one Delta commit.
//!
//! A write carries the parts (one topic's rows each) that one or several topics have for
//! one table, and replaces this batch's rows of those topics in one commit
//! ([`files::BatchRows`]: its batch id and landing paths and `_topic IN (…)`, evaluated
//! on the rows themselves, never pasted into SQL), so a rerun
//! converges to the same rows and two topics feeding one child table never erase each
//! other. New columns are added in the same commit (schema merge); where the table
//! already has a column, its type wins when the new values can be cast losslessly
//! ([`fit`]), otherwise the part fails with an error naming the column.
//!
//! - this module: [`Storage`] (a schema's address, write settings and the run's opened
//!   tables, which each job borrows), a run's [`RunMode`], table properties, parquet
//!   writer properties;
//! - [`open`]: [`Opener`], opening tables: loaded, from their log alone for an append,
//!   ahead of their writes, or kept from the run's last commit to them;
//! - [`commit`]: [`Committer`], the commit strategies, cheapest first: an append to a
//!   table opened from its log alone, a direct commit of new files, a whole-file replace,
//!   and a rewrite of the files that mix the batch's rows with others when nothing
//!   cheaper applies;
//! - [`rewrite`]: [`Rewriter`], replacing (or deleting) a batch's rows in files that
//!   hold others too, and schema merges;
//! - [`datafiles`]: the data files a commit adds and its commit properties;
//! - [`partitioned`]: the staging table's append;
//! - [`scan`]: a table's rows read back (`_run_control`, the staging table);
//! - [`files`]: which files and rows of a table belong to a batch;
//! - [`fit`]: a batch fitted to its table's schema (what does not fit rescued), several
//!   topics' rows widened into one, a batch cast to the table's types;
//! - [`stats`]: what a commit did, read back from the table;
//! - [`upkeep`]: after a commit, missing table properties and auto compaction
//!   (bin-packing and Z-order, [`upkeep::optimize`]).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::logstore::object_store::DynObjectStore;
use deltalake::{DeltaTable, DeltaTableBuilder};
pub use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use url::Url;

use crate::error::{Error, Result};
use crate::naming::{self, CORRUPT_TABLE, LANDING_PATH, RUN_CONTROL_TABLE, TableName};

mod change_data;
mod commit;
mod compact;
mod constraints;
mod datafiles;
mod deletion;
mod entry;
mod exact_stats;
mod files;
pub(crate) mod fit;
mod mapping;
mod open;
mod partitioned;
mod planned;
mod put;
mod rewrite;
mod row_ids;
pub(crate) mod scan;
mod shape;
mod stats;
mod strict;
pub(crate) mod upkeep;
pub(crate) mod writable;

pub(crate) use commit::Committer;
use open::BATCH_TXN_PROPERTY;
#[cfg(test)]
use open::Unopened;
pub(crate) use open::{AbortOnDrop, BatchTables, Opener};
pub(crate) use partitioned::append_partitioned;
pub(crate) use rewrite::Rewriter;
pub(crate) use stats::WrittenTable;

/// Where the tables of one schema live, and how to reach them.
#[derive(Clone, Debug)]
pub(crate) struct Storage {
    /// `<catalog>/<schema>/`, as a directory URL (ends with `/`).
    pub(crate) schema_url: Url,
    /// The object store rooted at `/` of the URL's scheme, when the caller supplied one
    /// (tests and benches wrap the local file system to inject latency or faults).
    pub(crate) root_store: Option<Arc<DynObjectStore>>,
    /// Target size of written data files (optimize write).
    pub(crate) target_file_size: u64,
    /// Parquet compression of the data files.
    pub(crate) compression: Compression,
    /// Auto compaction's small-file trigger; `None` when auto compaction is off.
    pub(crate) auto_compact_at: Option<u64>,
    /// Object store options (credentials, endpoints) for deltalake's log stores.
    pub(crate) options: crate::store::location::StorageOptions,
    /// Time the run's table tasks spent in each kind of work ([`TaskClock`]).
    pub(crate) clock: Arc<TaskClock>,
    /// The run's tables opened ahead of their writes or kept from them ([`Opener`]).
    pub(crate) opened: open::Opened,
}

/// Time a run's table tasks spent in each kind of work, summed over the tasks (they run
/// in parallel, so the sums can exceed the run's wall time): the report's
/// `task_seconds`.
#[derive(Debug, Default)]
pub(crate) struct TaskClock {
    flatten: std::sync::atomic::AtomicU64,
    open: std::sync::atomic::AtomicU64,
    write_files: std::sync::atomic::AtomicU64,
    commit: std::sync::atomic::AtomicU64,
    builder: std::sync::atomic::AtomicU64,
}

/// The kinds of work [`TaskClock`] times.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    /// Payloads into topic and child table rows (Arrow).
    Flatten,
    /// Reading a table's log to write to it.
    Open,
    /// Encoding Parquet data files and uploading them.
    WriteFiles,
    /// Putting the commit into the log (and, when another writer committed meanwhile,
    /// the conflict check).
    Commit,
    /// Reading back the data files a replace rewrites because they mix the batch's rows
    /// with others ([`rewrite`]); the report's name for it is `builder`.
    Builder,
}

impl TaskClock {
    fn counter(&self, work: Work) -> &std::sync::atomic::AtomicU64 {
        match work {
            Work::Flatten => &self.flatten,
            Work::Open => &self.open,
            Work::WriteFiles => &self.write_files,
            Work::Commit => &self.commit,
            Work::Builder => &self.builder,
        }
    }

    /// Adds the time since `started` to `work`.
    pub(crate) fn add(&self, work: Work, started: std::time::Instant) {
        let nanos = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.counter(work)
            .fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
    }

    /// `work`'s time, from a future's start to its end.
    pub(crate) async fn time<T>(&self, work: Work, f: impl std::future::Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let out = f.await;
        self.add(work, started);
        out
    }

    /// Awaits `commit` (an [`entry::commit_on`]) as [`Work::Commit`] and puts the version it
    /// made in `c`.
    pub(crate) async fn commit<W, E>(
        &self,
        c: &mut Committed,
        commit: impl std::future::Future<Output = std::result::Result<(u64, W), E>>,
    ) -> std::result::Result<W, E> {
        let (version, written) = self.time(Work::Commit, commit).await?;
        c.version = version;
        Ok(written)
    }

    /// Seconds per kind of work, by the report's names.
    pub(crate) fn seconds(&self) -> std::collections::BTreeMap<String, f64> {
        [
            ("flatten", Work::Flatten),
            ("open", Work::Open),
            ("write_files", Work::WriteFiles),
            ("commit", Work::Commit),
            ("builder", Work::Builder),
        ]
        .into_iter()
        .map(|(name, work)| {
            let nanos = self
                .counter(work)
                .load(std::sync::atomic::Ordering::Relaxed);
            (name.to_string(), nanos as f64 / 1e9)
        })
        .collect()
    }
}

/// Lineage and key columns of (nearly) one value per row (`_id`, `_parent_id`, `_root_id`,
/// `_line`), where a dictionary only costs a hash per value before parquet falls back to
/// plain encoding. `_idx` keeps its dictionary: a few small indexes repeat on every row
/// (85 % fewer bytes than plain on a dense historical batch, BENCHMARKS.md).
const NO_DICTIONARY: [&str; 4] = [naming::ID, naming::PARENT_ID, naming::ROOT_ID, naming::LINE];

/// Columns whose statistics no reader uses (joined or read, never filtered on): no
/// parquet statistics at all, which saves a comparison per value and leaves the bytes
/// as they were.
const NO_STATISTICS: [&str; 3] = [naming::PARENT_ID, naming::IDX, naming::LINE];

/// Columns readers filter on (a replace's file choice, `history`, a user's `WHERE _batch_id =`,
/// a child row's `_id`, which starts with its message id): the only ones that get parquet
/// statistics beyond the file level.
const FILTERED: [&str; 4] = [
    naming::BATCH_ID,
    naming::TOPIC,
    naming::LOADED_AT,
    naming::ID,
];

/// A column chunk's dictionary is dropped for plain encoding once it passes this size
/// (parquet's default: 1 MiB). A 16,000-row topic's column of mostly distinct values
/// then stops hashing every value into a dictionary a few thousand rows in; columns
/// with few distinct values stay far below it (BENCHMARKS.md, "Per stage").
pub const DICTIONARY_PAGE_LIMIT: usize = 64 << 10;

/// Lineage columns with one value per landing file (`_source_file`) or folder
/// (`_landing_path`), repeated by every row read from it. Their dictionary holds one
/// path per file, so a table fed by a batch's 8,533 files passes
/// [`DICTIONARY_PAGE_LIMIT`], and the plain fallback would write (and compress) the
/// whole path on every row: 210 MB of a dense historical batch's 590 MB before
/// compression (BENCHMARKS.md). They keep their dictionary up to [`PER_FILE_LIMIT`].
const PER_FILE: [&str; 2] = [naming::SOURCE_FILE, LANDING_PATH];

/// Values a column's encoder takes at a time (parquet's default: 1,024): fewer calls and
/// page-size checks per value, the same bytes; −4-5 % CPU on the dense historical batch
/// (BENCHMARKS.md, "Per stage"). 32,768 saved no more and held more memory.
const WRITE_BATCH: usize = 8192;

/// The dictionary limit of the [`PER_FILE`] columns: 256k paths of 128 bytes.
const PER_FILE_LIMIT: usize = 32 << 20;

/// Parquet properties of bronze data files (measured in `benches/stages.rs`, figures in
/// BENCHMARKS.md): no dictionary for per-row keys and a [`DICTIONARY_PAGE_LIMIT`] for
/// the others, file-level (chunk) statistics for every column (Delta's data skipping
/// reads those) but the few never filtered on, page-level only for the columns readers
/// filter on; encoders fed [`WRITE_BATCH`] values at a time.
pub fn writer_properties(compression: Compression) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_created_by(concat!("bronze ", env!("CARGO_PKG_VERSION")).to_string())
        .set_compression(compression)
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_LIMIT)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_write_batch_size(WRITE_BATCH);
    for c in NO_DICTIONARY {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), false);
    }
    for c in FILTERED {
        b = b.set_column_statistics_enabled(ColumnPath::from(c), EnabledStatistics::Page);
    }
    for c in NO_STATISTICS {
        b = b.set_column_statistics_enabled(ColumnPath::from(c), EnabledStatistics::None);
    }
    for c in PER_FILE {
        b = b.set_column_dictionary_page_size_limit(ColumnPath::from(c), PER_FILE_LIMIT);
    }
    b.build()
}

/// One topic's rows for a table, and how new fields of it are handled.
#[derive(Clone)]
pub(crate) struct Part {
    pub(crate) topic: String,
    /// The rows, one batch per staged slice.
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) evolution: crate::config::Evolution,
}

/// What a write of a batch's rows does with the rows of that batch a table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// Replaces them: the table may hold rows of the batch, which are looked for.
    Replace,
    /// Appends beside them (a later slice of a topic whose first slice replaced its
    /// rows, or a table only ever appended to): nothing is looked for.
    Append,
}

/// What a run found of earlier runs of its batch, before writing: whether its tables
/// may hold rows of the batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No earlier run of the batch is known: none is recorded in `_run_control` and none
    /// left its lease behind. Appends and replaces open a table from its log alone
    /// ([`Opener::open_unloaded`]) when its `txn`s or the run's lease tell it holds no
    /// row of the batch.
    #[default]
    Never,
    /// An earlier run loaded the batch, or wrote rows of it without recording them in
    /// `_run_control`: a replace loads the table with its file list to find them.
    Before,
}

/// Where a run's writes of a batch's rows record the batch's `txn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Txns {
    /// In every table they write ([`BATCH_TXN_PROPERTY`]); [`Opener::open_unloaded`]
    /// then trusts a table without one to hold no rows of the batch only while its
    /// `txn`s never expire.
    #[default]
    InTables,
    /// In `_run_control` only: loads that hold the batch lease. A run that ends without
    /// recording its rows in `_run_control` leaves its lease behind, which tells the
    /// next run instead (each table's set of `txn`s would grow by one per batch
    /// forever).
    RunControl,
}

/// What a run decided about its batch before writing, which its opens and commits
/// follow ([`Committer`], [`Opener::open_unloaded`]). The default is a first run that
/// records the batch's `txn` in every table it writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunMode {
    pub(crate) seen: Seen,
    pub(crate) txns: Txns,
}

/// The properties every commit of bronze starts from: delta-rs's clean-up of expired log
/// entries after a checkpoint is off. It lists the whole log and reads each entry's
/// modification time, a cost that grows with the table's history (after a backfill of
/// 1,000 batches it doubled a daily load's time); `bronze maintain` removes the expired
/// entries instead ([`crate::maintenance::Maintenance::maintain`]).
pub(crate) fn commit_properties() -> deltalake::kernel::transaction::CommitProperties {
    deltalake::kernel::transaction::CommitProperties::default()
        .with_cleanup_expired_logs(Some(false))
}

/// Whether `e` is a commit that lost to another writer's commit in a way that planning
/// it again on the table's new version resolves, which deltalake does not retry itself:
/// the schema changed (`MetadataChanged`: the write was planned against the old one);
/// files were added that the replace's predicate might match (`ConcurrentAppend`:
/// another batch's rows, since the batch lease keeps a batch to one run); files the
/// replace read or removes were removed (`ConcurrentDeleteRead`/`ConcurrentDeleteDelete`:
/// OPTIMIZE compacted them). A replace planned again deletes the batch's rows where they
/// are now, so nothing is lost or kept twice. A conflict on the batch's own `txn`, or a
/// protocol change, is not retried.
pub(crate) fn is_replannable_conflict(e: &crate::Error) -> bool {
    use deltalake::kernel::transaction::{CommitConflictError as C, TransactionError};
    matches!(e, crate::Error::Delta { source, .. } if matches!(
        **source,
        deltalake::DeltaTableError::Transaction {
            source: TransactionError::CommitConflict(
                C::MetadataChanged
                    | C::ConcurrentAppend
                    | C::ConcurrentDeleteRead
                    | C::ConcurrentDeleteDelete
            )
        }
    ))
}

/// What became of a [`Part`].
#[derive(Debug)]
pub(crate) struct PartOutcome {
    /// Rows of the part in the commit.
    pub(crate) rows: u64,
    /// Columns it added to the table.
    pub(crate) added: Vec<String>,
    /// Values it moved to `_rescued_data`.
    pub(crate) rescued: u64,
    /// Why it was refused.
    pub(crate) error: Option<Error>,
}

/// What one commit added, read back from its log entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Committed {
    pub(crate) version: u64,
    pub(crate) files_added: u64,
    pub(crate) bytes_added: u64,
    /// Rows the commit added: the writer's `num_added_rows` metric, else the sum of
    /// `numRecords` of the added files' statistics.
    pub(crate) rows_added: u64,
    /// Files before and after an auto compaction that followed the commit.
    pub(crate) compacted: Option<(u64, u64)>,
}

impl Storage {
    /// Opens the tables ([`Opener`]).
    pub(crate) fn opener(&self) -> Opener<'_> {
        Opener::new(self)
    }

    /// Commits a `run`'s writes to the tables ([`Committer`]).
    pub(crate) fn committer(&self, run: RunMode) -> Committer<'_> {
        Committer::new(self, run)
    }

    /// Replaces rows in files that hold others too ([`Rewriter`]).
    pub(crate) fn rewriter(&self) -> Rewriter<'_> {
        Rewriter::new(self)
    }

    /// The object store of the schema's folder, and that folder's path in it (a local
    /// catalog: the local file system and its absolute path).
    pub(crate) fn schema_folder(
        &self,
    ) -> Result<(
        Arc<deltalake::logstore::object_store::DynObjectStore>,
        deltalake::logstore::object_store::path::Path,
    )> {
        let store = self.root_store.clone().unwrap_or_else(|| {
            Arc::new(deltalake::logstore::object_store::local::LocalFileSystem::new())
        });
        let dir =
            deltalake::logstore::object_store::path::Path::from_url_path(self.schema_url.path())
                .map_err(|e| Error::Config {
                    name: "catalog",
                    reason: format!("cannot address {}: {e}", self.schema_url),
                })?;
        Ok((store, dir))
    }

    pub(crate) fn table_url(&self, table: &TableName) -> Result<Url> {
        self.schema_url
            .join(&format!("{}/", table.as_str()))
            .map_err(|e| Error::Config {
                name: "catalog",
                reason: format!(
                    "cannot address table `{table}` under {}: {e}",
                    self.schema_url
                ),
            })
    }

    fn builder(&self, table: &TableName) -> Result<DeltaTableBuilder> {
        let url = self.table_url(table)?;
        let b = DeltaTableBuilder::from_url(url.clone())
            .map_err(|e| Error::delta(table.as_str(), "open", e))?
            .with_storage_options(
                self.options
                    .pairs()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
        Ok(match &self.root_store {
            Some(store) => b.with_storage_backend(Arc::clone(store), url),
            // A local table lists its log by name ([`crate::store::local`]).
            None if url.scheme() == "file" => {
                b.with_storage_backend(Arc::new(crate::store::local::LocalLog::new()), url)
            }
            None => b,
        })
    }

    /// The table's log store, nothing read: for reading its commits one by one.
    pub(crate) fn log_store(&self, table: &TableName) -> Result<deltalake::logstore::LogStoreRef> {
        Ok(self.handle(table)?.log_store())
    }

    /// The table's handle, not loaded; its commits go through [`strict::StrictCommits`].
    pub(super) fn handle(&self, table: &TableName) -> Result<DeltaTable> {
        let t = self
            .builder(table)?
            .build()
            .map_err(|e| Error::delta(table.as_str(), "open", e))?;
        Ok(DeltaTable::new(strict::StrictCommits::wrap(t.log_store())))
    }

    /// Local catalogs: whether the table's folder has no `_delta_log`, i.e. no table yet
    /// (deltalake reports a missing local path as an error, not as `NotATable`).
    pub(super) fn local_log_missing(&self, table: &TableName) -> bool {
        self.local_dir(table)
            .is_some_and(|d| !d.join("_delta_log").is_dir())
    }

    /// Properties set on every table at creation; with `batch_txns`, on a table created
    /// by a write of a batch's rows, [`BATCH_TXN_PROPERTY`] too.
    pub(super) fn table_properties(&self, batch_txns: bool) -> Vec<(String, Option<String>)> {
        let mut props: Vec<_> = upkeep::default_table_properties(self.target_file_size)
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v)))
            .collect();
        if batch_txns {
            props.push((BATCH_TXN_PROPERTY.to_string(), Some("true".to_string())));
        }
        props
    }

    /// The object store rooted at the table's folder.
    pub(crate) fn table_store(
        &self,
        table: &TableName,
    ) -> Result<deltalake::logstore::ObjectStoreRef> {
        Ok(self.handle(table)?.log_store().object_store(None))
    }

    /// The table's folder when the catalog is on the local file system.
    pub(crate) fn local_dir(&self, table: &TableName) -> Option<std::path::PathBuf> {
        if self.schema_url.scheme() != "file" {
            return None;
        }
        self.table_url(table).ok()?.to_file_path().ok()
    }

    /// The tables of the schema folder a run may write: its data tables and bronze's
    /// system tables (`_corrupt_records`, `_run_control`), from one listing.
    pub(crate) async fn schema_tables(&self) -> Result<Vec<TableName>> {
        let names: Vec<String> = match &self.root_store {
            Some(store) => {
                let failed = |reason: String| crate::error::Error::Store {
                    location: self.schema_url.to_string(),
                    reason,
                };
                let dir = deltalake::Path::from_url_path(self.schema_url.path())
                    .map_err(|e| failed(e.to_string()))?;
                let listed = store
                    .list_with_delimiter(Some(&dir))
                    .await
                    .map_err(|e| failed(format!("cannot list the schema folder: {e}")))?;
                listed
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(str::to_string))
                    .collect()
            }
            None => {
                let dir = self.schema_url.to_file_path().unwrap_or_default();
                match std::fs::read_dir(&dir) {
                    Ok(entries) => entries
                        .filter_map(|e| e.ok())
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .filter_map(|e| e.file_name().into_string().ok())
                        .collect(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                    Err(e) => return Err(crate::error::Error::io(&dir, e)),
                }
            }
        };
        Ok(names
            .iter()
            .filter_map(|name| {
                // Of the folders bronze keeps (`_`), only its system tables are written.
                if name == RUN_CONTROL_TABLE {
                    Some(TableName::system(RUN_CONTROL_TABLE))
                } else if name == CORRUPT_TABLE {
                    Some(TableName::system(CORRUPT_TABLE))
                } else if name.starts_with('_') {
                    None
                } else {
                    TableName::existing(name).ok()
                }
            })
            .collect())
    }

    /// Local catalogs: create the table folder (object stores need no folders).
    pub(super) fn ensure_local_dir(&self, table: &TableName) -> Result<()> {
        if let Some(dir) = self.local_dir(table) {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }
}

/// What a write committed, and what became of each part.
pub(crate) type Written = (Committed, Vec<PartOutcome>);

/// A table's schema as Arrow.
fn arrow_schema(table: &TableName, t: &DeltaTable) -> Result<SchemaRef> {
    Ok(t.snapshot()
        .map_err(|e| Error::delta(table.as_str(), "read schema of", e))?
        .snapshot()
        .arrow_schema())
}

#[cfg(test)]
mod tests;
