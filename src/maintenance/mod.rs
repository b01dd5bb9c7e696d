//! Keeping tables healthy: health and history reports, OPTIMIZE (bin-pack or Z-order),
//! VACUUM, checkpoints, and the auto compaction and table properties applied by ingest.
//!
//! [`Maintenance`] works over a [`Catalog`] (an [`Ingest`](crate::Ingest)'s, or one of
//! its own): every operation takes the table's lock from the catalog's
//! [`TableLocks`](crate::TableLocks) map, the same as loads, so maintenance and loads of
//! one process never race on a table. The operations that change a table are builders
//! ([`Maintenance::optimize_table`], [`Maintenance::vacuum_table`]) as delta-rs's are,
//! with [`Maintenance::optimize`] as a one-call shorthand.
//! Compaction commits with `dataChange = false`, so concurrent appends by other writers
//! do not conflict with it.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::DeltaTable;
use deltalake::logstore::object_store::ObjectStoreExt as _;
use deltalake::operations::vacuum::{Clock, VacuumMode};
use futures::TryStreamExt as _;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::naming::TableName;
use crate::table::Storage;

mod html;
mod maintain;
mod overview;
pub use crate::table::upkeep::{OptimizeReport, default_table_properties, small_file_threshold};
use crate::table::upkeep::{live_files, optimize};
pub use maintain::{Maintain, MaintainReport, MaintainedTable};
pub use overview::{BatchRun, FAILURES_SHOWN, FailedWrite, Overview, Stages};

/// A table is flagged when it has more files than this...
pub const FLAG_MIN_FILES: u64 = 50;
/// ...and an average file size under this (25 MB).
pub const FLAG_MAX_AVG_BYTES: u64 = 25 * 1000 * 1000;
/// The newest commits `health` searches for the last OPTIMIZE.
pub const HEALTH_HISTORY: usize = 50;
/// VACUUM retention under which `--force` is needed (7 days, Delta's default).
pub const MIN_RETENTION_HOURS: u64 = 168;

/// One table's health.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct TableHealth {
    /// Table name.
    pub table: String,
    /// Current version.
    pub version: u64,
    /// Live data files.
    pub files: u64,
    /// Bytes of the live data files.
    pub bytes: u64,
    /// Average live file size.
    pub avg_file_bytes: u64,
    /// Live files under the small-file threshold (half the target size).
    pub small_files: u64,
    /// Commits since the last checkpoint (all of them when there is none).
    pub versions_since_checkpoint: u64,
    /// Commits since the last OPTIMIZE; `None` when none of the newest
    /// [`HEALTH_HISTORY`] commits is one (never optimized, or not lately: `health` reads
    /// that many commits, not a history that grows by one a batch).
    pub versions_since_optimize: Option<u64>,
    /// Unreferenced files a VACUUM with the default 7-day retention would delete.
    pub vacuum_files: u64,
    /// Their bytes.
    pub vacuum_bytes: u64,
    /// Live files by size against the target file size `T`: under T/64, T/16, T/4,
    /// T/2, T, and T or more ([`SIZE_BUCKETS`]).
    pub file_sizes: [u64; 6],
    /// More than 50 files averaging under 25 MB.
    pub flagged: bool,
    /// What to run, worst problem first (`optimize`, `vacuum`, `checkpoint`), or `none`.
    pub action: String,
}

impl TableHealth {
    /// [`Self::versions_since_optimize`] as `health` prints it: a count, `never`, or
    /// `50+` when the table has more commits than `health` read.
    pub fn since_optimize(&self) -> String {
        match self.versions_since_optimize {
            Some(v) => v.to_string(),
            None if self.version < HEALTH_HISTORY as u64 => "never".to_string(),
            None => format!("{HEALTH_HISTORY}+"),
        }
    }
}

/// The upper bounds of [`TableHealth::file_sizes`]' first five buckets, as fractions of
/// the target file size; the sixth holds files of the target size or more.
pub const SIZE_BUCKETS: [f64; 5] = [1.0 / 64.0, 1.0 / 16.0, 1.0 / 4.0, 1.0 / 2.0, 1.0];

/// The bucket of [`TableHealth::file_sizes`] a file of `bytes` falls in, for `target`.
fn size_bucket(bytes: u64, target: u64) -> usize {
    let share = bytes as f64 / target.max(1) as f64;
    SIZE_BUCKETS
        .iter()
        .position(|upper| share < *upper)
        .unwrap_or(SIZE_BUCKETS.len())
}

/// Health of every table of a schema, worst first.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct HealthReport {
    /// Tables, flagged ones first, then by small files.
    pub tables: Vec<TableHealth>,
}

impl HealthReport {
    /// A human-readable table.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let w = self
            .tables
            .iter()
            .map(|t| t.table.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            s,
            "{:<w$}  {:>7}  {:>6}  {:>12}  {:>10}  {:>5}  {:>6}  {:>7}  {:>10}  flag  action",
            "table",
            "version",
            "files",
            "bytes",
            "avg bytes",
            "small",
            "ckpt+",
            "optim+",
            "vacuumable"
        );
        for t in &self.tables {
            let optim = t.since_optimize();
            let _ = writeln!(
                s,
                "{:<w$}  {:>7}  {:>6}  {:>12}  {:>10}  {:>5}  {:>6}  {:>7}  {:>10}  {:<4}  {}",
                t.table,
                t.version,
                t.files,
                t.bytes,
                t.avg_file_bytes,
                t.small_files,
                t.versions_since_checkpoint,
                optim,
                t.vacuum_bytes,
                if t.flagged { "!" } else { "" },
                t.action
            );
        }
        s
    }
}

/// One commit of a table's history.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// Version.
    pub version: u64,
    /// Commit time, milliseconds since the epoch.
    pub timestamp_millis: Option<i64>,
    /// Operation (`WRITE`, `OPTIMIZE`, `VACUUM START`, ...).
    pub operation: Option<String>,
    /// Operation parameters (predicate, mode, ...).
    pub parameters: HashMap<String, serde_json::Value>,
    /// Operation metrics (files and rows added/removed, ...), as the writer recorded them.
    pub metrics: serde_json::Value,
    /// Commit time in ISO 8601, UTC (`2026-12-01T22:10:03.123Z`).
    pub timestamp: Option<String>,
    /// What the commit did, in words: `append`, `replace` (rows matching `predicate`
    /// replaced), `overwrite`, `delete`, `optimize`, `create table`, `vacuum start`…
    pub action: String,
    /// The rows it replaced or deleted, for a replace or a delete.
    pub predicate: Option<String>,
    /// Rows added, when the writer recorded them.
    pub rows_added: Option<u64>,
    /// Rows removed (replaced or deleted), when the writer recorded them.
    pub rows_removed: Option<u64>,
    /// Data files added.
    pub files_added: Option<u64>,
    /// Data files removed.
    pub files_removed: Option<u64>,
    /// How long the operation took, when the writer recorded it.
    pub duration_ms: Option<u64>,
}

impl HistoryEntry {
    /// `entries` as a table with a header row, newest first; times in UTC, or in the
    /// machine's time zone with `local`.
    pub fn to_text(entries: &[HistoryEntry], local: bool) -> String {
        use std::fmt::Write as _;
        let time = |e: &HistoryEntry| {
            let t = e
                .timestamp_millis
                .and_then(chrono::DateTime::from_timestamp_millis);
            match (t, local) {
                (None, _) => "-".to_string(),
                (Some(t), false) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                (Some(t), true) => t
                    .with_timezone(&chrono::Local)
                    .format("%Y-%m-%dT%H:%M:%S%.3f%:z")
                    .to_string(),
            }
        };
        let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let w = entries
            .iter()
            .map(|e| e.action.len())
            .max()
            .unwrap_or(0)
            .max("operation".len());
        let tw = if local { 29 } else { 24 };
        let zone = if local { "time (local)" } else { "time (UTC)" };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:>7}  {:<tw$}  {:<w$}  {:>8}  {:>8}  {:>7}  {:>7}  {:>9}  predicate",
            "version", zone, "operation", "rows +", "rows -", "files +", "files -", "duration"
        );
        for e in entries {
            let duration = e
                .duration_ms
                .map_or("-".to_string(), |ms| format!("{ms} ms"));
            let line = format!(
                "{:>7}  {:<tw$}  {:<w$}  {:>8}  {:>8}  {:>7}  {:>7}  {:>9}  {}",
                e.version,
                time(e),
                e.action,
                n(e.rows_added),
                n(e.rows_removed),
                n(e.files_added),
                n(e.files_removed),
                duration,
                e.predicate.as_deref().unwrap_or("")
            );
            let _ = writeln!(s, "{}", line.trim_end());
        }
        s
    }

    /// An entry from a commit's `commitInfo` (the metric names of deltalake's writes,
    /// deletes and OPTIMIZE, of bronze's direct commits and of Spark's).
    fn new(
        version: u64,
        timestamp_millis: Option<i64>,
        operation: Option<String>,
        parameters: HashMap<String, serde_json::Value>,
        metrics: serde_json::Value,
    ) -> HistoryEntry {
        let metric = |names: &[&str]| {
            names.iter().find_map(|n| match &metrics[*n] {
                serde_json::Value::Number(v) => v.as_u64(),
                serde_json::Value::String(v) => v.parse().ok(),
                _ => None,
            })
        };
        let parameter = |name: &str| match parameters.get(name) {
            Some(serde_json::Value::String(v)) => Some(v.clone()),
            Some(serde_json::Value::Null) | None => None,
            Some(v) => Some(v.to_string()),
        };
        // OPTIMIZE records its partition filters as `predicate` (`[]`: none).
        let predicate = parameter("predicate").filter(|p| !p.is_empty() && p != "[]");
        let op = operation.as_deref().unwrap_or("-");
        let action = match (op, parameter("mode").as_deref(), &predicate) {
            ("WRITE", Some("Overwrite"), Some(_)) => "replace".to_string(),
            ("WRITE", Some("Overwrite"), None) => "overwrite".to_string(),
            ("WRITE", _, _) => "append".to_string(),
            _ => op.to_lowercase(),
        };
        let timestamp = timestamp_millis
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        HistoryEntry {
            version,
            timestamp_millis,
            operation,
            timestamp,
            action,
            predicate,
            rows_added: metric(&["num_added_rows", "numOutputRows"]),
            rows_removed: metric(&["num_removed_rows", "num_deleted_rows", "numDeletedRows"]),
            files_added: metric(&["num_added_files", "numFilesAdded", "numAddedFiles"]),
            files_removed: metric(&["num_removed_files", "numFilesRemoved", "numRemovedFiles"]),
            duration_ms: metric(&["execution_time_ms", "executionTimeMs"]),
            parameters,
            metrics,
        }
    }
}

/// What a VACUUM did (or would do, in a dry run).
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct VacuumReport {
    /// Table.
    pub table: String,
    /// True for a dry run: nothing was deleted.
    pub dry_run: bool,
    /// Files deleted (or that would be).
    pub files: Vec<String>,
    /// Their bytes, where known.
    pub bytes: u64,
}

/// The version a checkpoint was written at (`bronze checkpoint --json`).
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// Table.
    pub table: String,
    /// The version checkpointed.
    pub version: u64,
}

impl CheckpointReport {
    /// `table` checkpointed at `version`.
    pub fn new(table: impl Into<String>, version: u64) -> Self {
        CheckpointReport {
            table: table.into(),
            version,
        }
    }
}

/// A fixed clock for VACUUM (tests move time forward instead of waiting).
#[derive(Debug)]
struct FixedClock(i64);

impl Clock for FixedClock {
    fn current_timestamp_millis(&self) -> i64 {
        self.0
    }
}

/// What a catalog registers a table from ([`Maintenance::table_for_catalog`]).
#[derive(Clone, Debug)]
pub struct TableForCatalog {
    /// Its folder, as engines open it (no trailing `/`).
    pub location: String,
    /// Its current Delta schema, the log's JSON.
    pub schema: serde_json::Value,
    /// Its protocol's reader and writer features.
    pub features: Vec<String>,
    /// Its version.
    pub version: u64,
}

/// Maintenance operations on the tables of a catalog's schema.
#[derive(Debug)]
pub struct Maintenance<'a> {
    catalog: &'a Catalog,
}

impl<'a> Maintenance<'a> {
    /// Maintenance on `catalog`'s tables, under its table locks.
    pub fn new(catalog: &'a Catalog) -> Self {
        Maintenance { catalog }
    }

    /// The catalog's storage (wrapped by an armed upkeep crash point,
    /// [`crate::failpoint::UPKEEP_POINTS`], on a local catalog).
    fn storage(&self) -> Result<Storage> {
        #[cfg(feature = "failpoints")]
        if self.catalog.location().local().is_some() {
            let armed = std::env::var("BRONZE_FAILPOINT").unwrap_or_default();
            if let Some(wrap) = crate::failpoint::upkeep_wrap(|p| p == armed) {
                let root = crate::store::local::LocalLog::new();
                return self.catalog.storage_with(Some(wrap(Arc::new(root))));
            }
        }
        self.catalog.storage()
    }

    /// The catalog's schema (its folder under the root).
    pub fn schema(&self) -> &str {
        self.catalog.schema()
    }

    /// The object store of the schema's folder, and that folder's path in it.
    pub(crate) fn schema_folder(
        &self,
    ) -> Result<(
        Arc<deltalake::logstore::object_store::DynObjectStore>,
        deltalake::logstore::object_store::path::Path,
    )> {
        self.storage()?.schema_folder()
    }

    /// The catalog's object store option `key` (a credential, perhaps: never to print).
    pub fn storage_option(&self, key: &str) -> Option<String> {
        self.catalog.storage_options().get(key).map(str::to_string)
    }

    /// Runs `f` to its end on the catalog's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.catalog.runtime().block_on(f)
    }

    /// Names of the Delta tables of the schema (system tables included), sorted: folders
    /// whose `_delta_log` holds a commit. (A run killed while a table's version 0 was
    /// being put can leave `_delta_log/` with only the object store's staging file: no
    /// table yet for any reader; the rerun creates it.)
    pub fn tables(&self) -> Result<Vec<String>> {
        if self.catalog.location().local().is_none() {
            return self.block_on(self.store_tables());
        }
        let dir = self.catalog.schema_dir()?;
        let mut names = Vec::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
            Err(e) => return Err(Error::io(dir, e)),
        };
        for e in entries {
            let e = e.map_err(|e| Error::io(&dir, e))?;
            if has_commit(&e.path().join("_delta_log")) {
                names.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// [`Self::tables`] of a catalog in an object store: the schema's folders whose
    /// `_delta_log/` holds a commit.
    async fn store_tables(&self) -> Result<Vec<String>> {
        let Some((store, dir)) = self.catalog.schema_store()? else {
            return Ok(Vec::new());
        };
        let failed = |e: deltalake::logstore::object_store::Error| Error::Store {
            location: self.catalog.shown(),
            reason: format!("could not list the tables: {e}"),
        };
        let listed = store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(failed)?;
        let mut names = Vec::new();
        for folder in listed.common_prefixes {
            let Some(name) = folder.filename().map(str::to_string) else {
                continue;
            };
            let log = folder.clone().join("_delta_log");
            let entries = store
                .list_with_delimiter(Some(&log))
                .await
                .map_err(failed)?;
            if entries
                .objects
                .iter()
                .any(|o| o.location.filename().is_some_and(is_commit_file))
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn open(&self, storage: &Storage, table: &str) -> Result<(TableName, DeltaTable)> {
        let name = TableName::existing(table)?;
        let t = self
            .block_on(storage.opener().open(&name))?
            .ok_or_else(|| Error::NoSuchTable {
                table: table.to_string(),
            })?;
        Ok((name, t))
    }

    /// `table`'s folder, as engines open it, its current Delta schema (the log's JSON),
    /// its protocol's reader and writer features and its version, for a catalog to
    /// register it.
    pub fn table_for_catalog(&self, table: &str) -> Result<TableForCatalog> {
        let storage = self.storage()?;
        let (name, t) = self.open(&storage, table)?;
        let snapshot = t.snapshot().map_err(|e| Error::delta(table, "open", e))?;
        let schema = serde_json::to_value(snapshot.schema().as_ref()).unwrap_or_default();
        let protocol = snapshot.protocol();
        let features = (protocol.reader_features().into_iter().flatten())
            .chain(protocol.writer_features().into_iter().flatten())
            .map(|f| f.to_string())
            .collect();
        let location = storage.table_url(&name)?.to_string();
        Ok(TableForCatalog {
            location: location.trim_end_matches('/').to_string(),
            schema,
            features,
            version: snapshot.version(),
        })
    }

    /// Files, sizes, log length and what VACUUM could free, for every table, worst first.
    pub fn health(&self) -> Result<HealthReport> {
        let storage = self.storage()?;
        let small = small_file_threshold(self.catalog.target_file_size());
        let mut tables = Vec::new();
        for name in self.tables()? {
            let (_, t) = self.open(&storage, &name)?;
            let target = self.catalog.target_file_size();
            tables.push(self.block_on(table_health(&name, &t, small, target))?);
        }
        tables.sort_by(|a, b| {
            b.flagged
                .cmp(&a.flagged)
                .then(b.small_files.cmp(&a.small_files))
                .then(a.table.cmp(&b.table))
        });
        Ok(HealthReport { tables })
    }

    /// The table's commits, newest first (`limit` of them when given).
    pub fn history(&self, table: &str, limit: Option<usize>) -> Result<Vec<HistoryEntry>> {
        let storage = self.storage()?;
        let (_, t) = self.open(&storage, table)?;
        self.block_on(history(table, &t, limit))
    }

    /// OPTIMIZE of `table`: bin-packs small files toward the catalog's target file size
    /// (or [`Optimize::with_target_size`]), or Z-orders by [`Optimize::with_zorder`]
    /// columns. Runs on [`Optimize::execute`], under the table's lock.
    pub fn optimize_table(&self, table: &str) -> Optimize<'_> {
        Optimize {
            maintenance: self,
            table: table.to_string(),
            target_size: None,
            zorder: Vec::new(),
        }
    }

    /// [`Self::optimize_table`] in one call (`target_size`: `None` for the catalog's).
    pub fn optimize(
        &self,
        table: &str,
        target_size: Option<u64>,
        zorder: &[String],
    ) -> Result<OptimizeReport> {
        let mut op = self.optimize_table(table).with_zorder(zorder.to_vec());
        if let Some(size) = target_size {
            op = op.with_target_size(size);
        }
        op.execute()
    }

    /// VACUUM of `table`: deletes unreferenced files older than the retention (default
    /// the table's own, [`table_retention_hours`]). Runs on [`Vacuum::execute`], under
    /// the table's lock.
    pub fn vacuum_table(&self, table: &str) -> Vacuum<'_> {
        Vacuum {
            maintenance: self,
            table: table.to_string(),
            retention_hours: None,
            dry_run: false,
            force: false,
            now_millis: None,
        }
    }

    /// Opens `table` under its lock (the snapshot is the latest: taken after the lock)
    /// and runs `f` on it.
    fn locked<T, F: std::future::Future<Output = Result<T>>>(
        &self,
        table: &str,
        f: impl FnOnce(DeltaTable) -> F,
    ) -> Result<T> {
        self.catalog.check_put_if_absent()?;
        let storage = self.storage()?;
        let (name, _) = self.open(&storage, table)?;
        let _guard = self.catalog.locks().lock(&name);
        let (_, t) = self.open(&storage, table)?;
        self.block_on(f(t))
    }

    /// Writes a checkpoint at the current version. Returns the version.
    pub fn checkpoint(&self, table: &str) -> Result<u64> {
        self.locked(table, |t| async move {
            deltalake::checkpoints::create_checkpoint(&t, None)
                .await
                .map_err(|e| Error::delta(table, "checkpoint", e))?;
            Ok(t.version().unwrap_or_default())
        })
    }
}

/// An OPTIMIZE of one table ([`Maintenance::optimize_table`]).
#[derive(Debug)]
#[must_use = "an operation does nothing until `execute` is called"]
pub struct Optimize<'a> {
    maintenance: &'a Maintenance<'a>,
    table: String,
    target_size: Option<u64>,
    zorder: Vec<String>,
}

impl Optimize<'_> {
    /// Bin-packs toward `bytes` per file instead of the catalog's target file size.
    pub fn with_target_size(mut self, bytes: u64) -> Self {
        self.target_size = Some(bytes);
        self
    }

    /// Z-orders by these columns instead of bin-packing (none: bin-pack).
    pub fn with_zorder(mut self, columns: Vec<String>) -> Self {
        self.zorder = columns;
        self
    }

    /// Runs the OPTIMIZE under the table's lock.
    pub fn execute(self) -> Result<OptimizeReport> {
        let catalog = self.maintenance.catalog;
        let target = self.target_size.unwrap_or(catalog.target_file_size());
        let (table, zorder) = (&self.table, &self.zorder);
        self.maintenance.locked(table, |t| {
            optimize(table, t, target, zorder, catalog.compression())
        })
    }
}

/// A VACUUM of one table ([`Maintenance::vacuum_table`]).
#[derive(Debug)]
#[must_use = "an operation does nothing until `execute` is called"]
pub struct Vacuum<'a> {
    maintenance: &'a Maintenance<'a>,
    table: String,
    retention_hours: Option<u64>,
    dry_run: bool,
    force: bool,
    now_millis: Option<i64>,
}

impl Vacuum<'_> {
    /// Keeps unreferenced files younger than `hours` (default the table's own retention,
    /// [`table_retention_hours`]). Under that retention is refused unless
    /// [`Self::with_force`]: readers time-travelling or still reading an older version
    /// would lose their files.
    pub fn with_retention_hours(mut self, hours: u64) -> Self {
        self.retention_hours = Some(hours);
        self
    }

    /// Lists what would be deleted without deleting it.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Allows a retention under the table's own and under [`MIN_RETENTION_HOURS`].
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Runs as if the time were `now_millis` (ms since the Unix epoch) instead of the
    /// system clock: tests move time forward instead of waiting.
    pub fn with_clock(mut self, now_millis: i64) -> Self {
        self.now_millis = Some(now_millis);
        self
    }

    /// Runs the VACUUM under the table's lock.
    pub fn execute(self) -> Result<VacuumReport> {
        if let Some(hours) = self.retention_hours {
            check_retention(hours, self.force)?;
        }
        let (table, dry_run, now) = (&self.table, self.dry_run, self.now_millis);
        let (asked, force) = (self.retention_hours, self.force);
        self.maintenance.locked(table, |t| async move {
            let hours = retention_for(table, &t, asked, force)?;
            vacuum(table, t, hours, dry_run, now).await
        })
    }
}

/// A VACUUM retention under [`MIN_RETENTION_HOURS`] is refused unless forced.
pub(crate) fn check_retention(hours: u64, force: bool) -> Result<()> {
    if hours < MIN_RETENTION_HOURS && !force {
        return Err(Error::Config {
            name: "retain",
            reason: format!(
                "{hours}h is under the {MIN_RETENTION_HOURS}h minimum: readers of older versions would lose their files; pass --force if no reader or writer needs them"
            ),
        });
    }
    Ok(())
}

/// The hours a VACUUM of `t` keeps removed files for, as Spark's VACUUM does: the
/// table's own `delta.deletedFileRetentionDuration` ([`table_retention_hours`]) unless
/// `asked`; a shorter one than the table's is refused unless `force`.
pub(crate) fn retention_for(
    name: &str,
    t: &DeltaTable,
    asked: Option<u64>,
    force: bool,
) -> Result<u64> {
    let table = table_retention_hours(name, t)?;
    let hours = asked.unwrap_or(table);
    if hours < table && !force {
        return Err(Error::Config {
            name: "retain",
            reason: format!(
                "{hours}h is under the {table}h table `{name}` keeps removed files for \
                 (its delta.deletedFileRetentionDuration): readers of its older versions \
                 would lose their files; leave --retain out to use the table's, or pass \
                 --force if no reader needs them"
            ),
        });
    }
    Ok(hours)
}

/// The hours the table `t` keeps removed files for: its
/// `delta.deletedFileRetentionDuration` (Delta's default, a week, when unset), never
/// under [`MIN_RETENTION_HOURS`].
pub fn table_retention_hours(name: &str, t: &DeltaTable) -> Result<u64> {
    use deltalake::table::config::TablePropertiesExt as _;
    let snapshot = t.snapshot().map_err(|e| Error::delta(name, "vacuum", e))?;
    let duration = snapshot
        .snapshot()
        .table_configuration()
        .table_properties()
        .deleted_file_retention_duration();
    Ok(duration.as_secs().div_ceil(3600).max(MIN_RETENTION_HOURS))
}

/// The health of table `t` (named `name`): files under `small` bytes count as small,
/// file sizes are bucketed around the `target` size.
async fn table_health(name: &str, t: &DeltaTable, small: u64, target: u64) -> Result<TableHealth> {
    let version = t.version().unwrap_or_default();
    let files = live_files(t, name)?;
    let mut file_sizes = [0u64; 6];
    for (_, size) in &files {
        file_sizes[size_bucket(*size, target)] += 1;
    }
    let bytes: u64 = files.iter().map(|(_, s)| s).sum();
    let n = files.len() as u64;
    let small_files = files.iter().filter(|(_, s)| *s < small).count() as u64;
    let last_checkpoint = last_checkpoint_version(t).await;
    let versions_since_checkpoint = match last_checkpoint {
        Some(c) => version.saturating_sub(c),
        None => version + 1,
    };
    let hist = history(name, t, Some(HEALTH_HISTORY)).await?;
    let versions_since_optimize = hist
        .iter()
        .find(|h| h.operation.as_deref() == Some("OPTIMIZE"))
        .map(|h| version.saturating_sub(h.version));
    let retention = table_retention_hours(name, t)?;
    let vac = vacuum(name, t.clone(), retention, true, None).await?;
    let avg = bytes.checked_div(n).unwrap_or(0);
    let flagged = n > FLAG_MIN_FILES && avg < FLAG_MAX_AVG_BYTES;
    let mut actions = Vec::new();
    if flagged || small_files > FLAG_MIN_FILES {
        actions.push("optimize");
    }
    if !vac.files.is_empty() {
        actions.push("vacuum");
    }
    if versions_since_checkpoint > 10 {
        actions.push("checkpoint");
    }
    Ok(TableHealth {
        table: name.to_string(),
        version,
        files: n,
        bytes,
        avg_file_bytes: avg,
        small_files,
        versions_since_checkpoint,
        versions_since_optimize,
        vacuum_files: vac.files.len() as u64,
        vacuum_bytes: vac.bytes,
        file_sizes,
        flagged,
        action: if actions.is_empty() {
            "none".into()
        } else {
            actions.join(", ")
        },
    })
}

/// Whether a local `_delta_log` folder holds a commit or a checkpoint.
fn has_commit(log: &std::path::Path) -> bool {
    std::fs::read_dir(log).is_ok_and(|mut entries| {
        entries.any(|e| e.is_ok_and(|e| is_commit_file(&e.file_name().to_string_lossy())))
    })
}

/// Whether a `_delta_log` entry is a commit or a checkpoint.
fn is_commit_file(name: &str) -> bool {
    name.ends_with(".json") || name.ends_with(".checkpoint.parquet")
}

/// The version in `_delta_log/_last_checkpoint`, if any.
async fn last_checkpoint_version(t: &DeltaTable) -> Option<u64> {
    let store = t.log_store().object_store(None);
    let got = store
        .get(&deltalake::Path::from("_delta_log/_last_checkpoint"))
        .await
        .ok()?;
    let bytes = got.bytes().await.ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("version")?.as_u64()
}

async fn history(name: &str, t: &DeltaTable, limit: Option<usize>) -> Result<Vec<HistoryEntry>> {
    let latest = t.version().unwrap_or_default();
    let infos: Vec<_> = t
        .history(limit)
        .try_collect()
        .await
        .map_err(|e| Error::delta(name, "read history of", e))?;
    // Newest first; commit infos carry their read version, not their own.
    Ok(infos
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let metrics = c
                .info
                .get("operationMetrics")
                .cloned()
                .unwrap_or(serde_json::Value::Null);
            HistoryEntry::new(
                latest.saturating_sub(i as u64),
                c.timestamp,
                c.operation,
                c.operation_parameters.unwrap_or_default(),
                metrics,
            )
        })
        .collect())
}

/// Whether a VACUUM of `t` deletes its files itself, without deltalake's two commits
/// that record it in the history: deltalake's protocol check refuses tables with
/// features only bronze's own commits write (row tracking, domain metadata). A table
/// bronze does not write is refused: the protocol asks a VACUUM to honour the table's
/// writer features (`vacuumProtocolCheck`), and another format's files may sit beside
/// Delta's (Iceberg's `metadata/`). Bronze's own staging tables are partitioned, and
/// vacuumed as any other.
fn vacuum_without_commits(name: &str, t: &DeltaTable) -> Result<bool> {
    use crate::table::writable::{Removes, refusal};
    let snapshot = t.snapshot().map_err(|e| Error::delta(name, "vacuum", e))?;
    let config = snapshot.snapshot().table_configuration();
    let refused = refusal(config, Removes::Nothing)
        .filter(|_| !name.starts_with(crate::naming::STAGING_PREFIX));
    if let Some(r) = refused {
        return Err(Error::delta(
            name,
            "vacuum",
            deltalake::DeltaTableError::Generic(format!(
                "the table has {}: {}; nothing was deleted",
                r.feature, r.fix
            )),
        ));
    }
    Ok(deltalake::kernel::transaction::PROTOCOL
        .can_write_to(snapshot)
        .is_err())
}

/// Deletes `files` (paths in the table's store) that a dry run listed; one already gone
/// is no error.
async fn delete_listed(
    name: &str,
    store: &deltalake::logstore::ObjectStoreRef,
    files: &[String],
) -> Result<()> {
    use futures::StreamExt as _;
    let paths: Vec<_> = files
        .iter()
        .map(|f| Ok(deltalake::Path::from(f.as_str())))
        .collect();
    let mut deleted = store.delete_stream(futures::stream::iter(paths).boxed());
    while let Some(done) = deleted.next().await {
        match done {
            Ok(_) | Err(deltalake::ObjectStoreError::NotFound { .. }) => {}
            Err(e) => return Err(Error::delta(name, "vacuum", e.into())),
        }
    }
    Ok(())
}

async fn vacuum(
    name: &str,
    t: DeltaTable,
    hours: u64,
    dry_run: bool,
    now_millis: Option<i64>,
) -> Result<VacuumReport> {
    let store = t.log_store().object_store(None);
    let uncommitted = !dry_run && vacuum_without_commits(name, &t)?;
    // Full mode: also removes files no commit ever referenced (a write that crashed after
    // its Parquet files were uploaded), once they are older than the retention.
    let mut builder = t
        .vacuum()
        .with_mode(VacuumMode::Full)
        .with_retention_period(chrono::Duration::hours(hours as i64))
        .with_enforce_retention_duration(false)
        .with_dry_run(dry_run);
    if let Some(now) = now_millis {
        builder = builder.with_clock(Arc::new(FixedClock(now)));
    }
    // There the files a dry run lists are deleted below.
    if uncommitted {
        builder = builder.with_dry_run(true);
    }
    // Sizes are read before deletion (a dry run keeps the files anyway).
    let (_, metrics) = builder.await.map_err(|e| Error::delta(name, "vacuum", e))?;
    if uncommitted {
        delete_listed(name, &store, &metrics.files_deleted).await?;
    }
    let mut bytes = 0;
    if dry_run {
        for f in &metrics.files_deleted {
            if let Ok(meta) = store.head(&deltalake::Path::from(f.as_str())).await {
                bytes += meta.size;
            }
        }
    }
    Ok(VacuumReport {
        table: name.to_string(),
        dry_run,
        files: metrics.files_deleted,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_whose_log_holds_no_commit_is_no_table() {
        let dir = tempfile::tempdir().unwrap();
        let ingest = crate::Ingest::builder(dir.path()).build().unwrap();
        let schema = ingest.schema_dir().unwrap();
        let log = |t: &str| schema.join(t).join("_delta_log");
        for t in ["a", "b", "c", "d"] {
            std::fs::create_dir_all(log(t)).unwrap();
        }
        std::fs::write(log("a").join("00000000000000000000.json"), "{}").unwrap();
        // A create killed inside its put: only the object store's staging file.
        std::fs::write(log("b").join("00000000000000000000.json#1"), "{}").unwrap();
        std::fs::write(log("d").join("00000000000000000010.checkpoint.parquet"), "").unwrap();
        assert_eq!(ingest.maintenance().tables().unwrap(), ["a", "d"]);
    }

    #[test]
    fn health_says_never_only_of_a_table_whose_every_commit_it_read() {
        let at = |version, since| TableHealth {
            version,
            versions_since_optimize: since,
            ..Default::default()
        };
        assert_eq!(at(10, None).since_optimize(), "never");
        assert_eq!(at(49, None).since_optimize(), "never");
        assert_eq!(at(50, None).since_optimize(), "50+");
        assert_eq!(at(10_000, Some(3)).since_optimize(), "3");
    }

    #[test]
    fn small_files_are_under_half_the_target() {
        assert_eq!(small_file_threshold(128 << 20), 64 << 20);
        let props = default_table_properties(128 << 20);
        assert!(
            props
                .iter()
                .any(|(k, v)| *k == "delta.checkpointInterval" && v == "10")
        );
    }
}
