//! Write: one table's rows for one (batch, topic) → a Delta commit.
//!
//! A write replaces this batch's rows for its topic (`_batch_id = X AND _topic = T`,
//! built as a typed DataFusion expression, never pasted into SQL) in one commit, so a
//! rerun converges to the same rows and two topics feeding one child table never erase
//! each other. New columns are added in the same commit (schema merge). Where the table
//! already has a column, its type wins when the new values can be cast losslessly
//! (integers to float, anything to string); otherwise the table's write fails with an
//! error naming the column.
//!
//! When the table does not exist yet, or holds no row of this batch, the write is a plain
//! append: no replace-where planning, no scan.

use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::datafusion::prelude::{Expr, col, lit};
use deltalake::logstore::object_store::DynObjectStore;
use deltalake::operations::write::SchemaMode;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
pub use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use url::Url;

use crate::error::{Error, Result};
use crate::naming::TableName;

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
}

/// Lineage and key columns: unique per row (`_id`, `_parent_id`, `_root_id`, `_line`,
/// `_idx`), where a dictionary only costs a hash per value before parquet falls back to
/// plain encoding.
const NO_DICTIONARY: [&str; 5] = ["_id", "_parent_id", "_root_id", "_line", "_idx"];

/// Columns readers filter on (replace-where, `history`, a user's `WHERE _batch_id =`):
/// the only ones that get parquet statistics beyond the file level.
const FILTERED: [&str; 4] = ["_batch_id", "_topic", "_loaded_at", "_id"];

/// Parquet properties of bronze data files (measured in `benches/stages.rs`, figures in
/// BENCHMARKS.md): no dictionary for per-row keys, file-level (chunk) statistics for
/// every column (Delta's data skipping reads those), page-level only for the columns
/// readers filter on.
pub fn writer_properties(compression: Compression) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_created_by(concat!("bronze ", env!("CARGO_PKG_VERSION")).to_string())
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::Chunk);
    for c in NO_DICTIONARY {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), false);
    }
    for c in FILTERED {
        b = b.set_column_statistics_enabled(ColumnPath::from(c), EnabledStatistics::Page);
    }
    b.build()
}

/// One topic's rows for a table, and how new fields of it are handled.
pub(crate) struct Part {
    pub(crate) topic: String,
    /// The rows, one batch per staged slice.
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) evolution: crate::config::Evolution,
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
            .map_err(|e| Error::delta(table.as_str(), "open", e))?;
        Ok(match &self.root_store {
            Some(store) => b.with_storage_backend(Arc::clone(store), url),
            None => b,
        })
    }

    /// The table, loaded; `Ok(None)` when there is no Delta table there yet.
    pub(crate) async fn open(&self, table: &TableName) -> Result<Option<DeltaTable>> {
        Ok(self.open_or_new(table).await?.1)
    }

    /// `(unloaded handle, loaded table if it exists)`.
    async fn open_or_new(&self, table: &TableName) -> Result<(DeltaTable, Option<DeltaTable>)> {
        // Local catalogs: a folder without `_delta_log` is no table yet (deltalake reports
        // a missing local path as an error, not as `NotATable`).
        let local_log = self.local_dir(table).map(|d| d.join("_delta_log"));
        if let Some(log) = &local_log
            && !log.is_dir()
        {
            let t = self
                .builder(table)?
                .build()
                .map_err(|e| Error::delta(table.as_str(), "open", e))?;
            return Ok((t, None));
        }
        let mut t = self
            .builder(table)?
            .build()
            .map_err(|e| Error::delta(table.as_str(), "open", e))?;
        match t.load().await {
            Ok(()) => Ok((t.clone(), Some(t))),
            Err(DeltaTableError::NotATable(_)) => Ok((t, None)),
            Err(e) => Err(Error::delta(table.as_str(), "open", e)),
        }
    }

    /// Replaces the rows of `batch_id` with `batch` (creating the table when needed) in
    /// one commit; a plain append when no file can hold rows of the batch.
    pub(crate) async fn replace(
        &self,
        table: &TableName,
        batch: RecordBatch,
        batch_id: &str,
    ) -> Result<Committed> {
        let (handle, existing) = self.open_or_new(table).await?;
        let write = match existing {
            Some(t) => {
                let schema = t
                    .snapshot()
                    .map_err(|e| Error::delta(table.as_str(), "read schema of", e))?
                    .snapshot()
                    .arrow_schema();
                let batch = conform(table, batch, &schema)?;
                if may_hold_batch(&t, batch_id) {
                    t.write(vec![batch])
                        .with_save_mode(SaveMode::Overwrite)
                        .with_replace_where(batch_predicate(batch_id))
                } else {
                    t.write(vec![batch]).with_save_mode(SaveMode::Append)
                }
                .with_schema_mode(SchemaMode::Merge)
            }
            // A new table holds no rows to replace: create it with a plain append.
            None => {
                self.ensure_local_dir(table)?;
                handle
                    .write(vec![batch])
                    .with_save_mode(SaveMode::Append)
                    .with_configuration(self.table_properties())
            }
        };
        let written = write
            .with_target_file_size(NonZeroU64::new(self.target_file_size))
            .with_writer_properties(writer_properties(self.compression))
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        committed(table, &written).await
    }

    /// Writes the parts several topics have for one table in one commit: each part is
    /// fitted to the table's schema (as it will be after the parts before it, see
    /// [`crate::conform`]) with its topic's evolution mode, then the rows of this batch
    /// for the topics that fit are replaced. A part that is refused (evolution `fail`)
    /// leaves its topic's earlier rows alone and gets its error back in its outcome.
    /// `replace = false` appends instead (the later slices of an over-budget topic).
    pub(crate) async fn replace_parts(
        &self,
        table: &TableName,
        parts: Vec<Part>,
        batch_id: &str,
        replace: bool,
    ) -> Result<(Written, DeltaTable)> {
        let t0 = std::time::Instant::now();
        let (handle, existing) = self.open_or_new(table).await?;
        let mut schema: Option<SchemaRef> = match &existing {
            Some(t) => Some(
                t.snapshot()
                    .map_err(|e| Error::delta(table.as_str(), "read schema of", e))?
                    .snapshot()
                    .arrow_schema(),
            ),
            None => None,
        };
        let table_schema = schema.clone();
        let mut outcomes = Vec::with_capacity(parts.len());
        let mut batches = Vec::with_capacity(parts.len());
        let mut topics = Vec::with_capacity(parts.len());
        for part in parts {
            // A table created by this commit takes every part's columns.
            let evolution = if existing.is_some() {
                part.evolution
            } else {
                crate::config::Evolution::Add
            };
            // Each slice is fitted to the schema the slices before it leave; a refused
            // slice refuses the whole part (the topic's rows go in whole or not at all).
            let mut fitted = Vec::with_capacity(part.batches.len());
            let mut outcome = PartOutcome {
                rows: 0,
                added: Vec::new(),
                rescued: 0,
                error: None,
            };
            let mut part_schema = schema.clone();
            for batch in part.batches {
                match crate::conform::conform(table, batch, part_schema.as_deref(), evolution) {
                    Ok(c) => {
                        part_schema = Some(crate::conform::merged_schema(
                            part_schema.as_deref(),
                            &c.batch,
                        ));
                        outcome.rows += c.batch.num_rows() as u64;
                        outcome.rescued += c.rescued;
                        for a in c.added {
                            if !outcome.added.contains(&a) {
                                outcome.added.push(a);
                            }
                        }
                        fitted.push(c.batch);
                    }
                    Err(e) => {
                        outcome.error = Some(e);
                        break;
                    }
                }
            }
            if outcome.error.is_none() {
                schema = part_schema;
                if !topics.contains(&part.topic) {
                    topics.push(part.topic);
                }
                batches.extend(fitted);
            } else {
                outcome.rows = 0;
                outcome.added.clear();
                outcome.rescued = 0;
            }
            outcomes.push(outcome);
        }
        if batches.is_empty() {
            return Ok(((Committed::default(), outcomes), handle));
        }
        let batches = merge_batches(table, &batches)?;
        let plain_append = !(replace
            && existing
                .as_ref()
                .is_some_and(|t| may_hold_batch(t, batch_id)));
        if let (Some(t), Some(table_schema)) = (&existing, &table_schema)
            && plain_append
            && batches
                .iter()
                .all(|b| b.schema().fields() == table_schema.fields())
        {
            let t1 = std::time::Instant::now();
            let (c, written) = self
                .append_files(t, &batches)
                .await
                .map_err(|e| Error::delta(table.as_str(), "write", e))?;
            tracing::debug!(
                table = %table,
                open_and_fit_us = (t1 - t0).as_micros() as u64,
                append_files_us = t1.elapsed().as_micros() as u64,
                "committed"
            );
            return Ok(((c, outcomes), written));
        }
        let write = match existing {
            // A table none of whose files can hold this batch (the first load of a batch,
            // every day): a plain append, no replace-where planning or scan.
            Some(t) if !plain_append => t
                .write(batches)
                .with_save_mode(SaveMode::Overwrite)
                .with_replace_where(batch_topics_predicate(batch_id, &topics))
                .with_schema_mode(SchemaMode::Merge),
            // A later slice of a topic whose first slice already replaced its rows, or a
            // table without rows of this batch.
            Some(t) => t
                .write(batches)
                .with_save_mode(SaveMode::Append)
                .with_schema_mode(SchemaMode::Merge),
            None => {
                self.ensure_local_dir(table)?;
                handle
                    .write(batches)
                    .with_save_mode(SaveMode::Append)
                    .with_configuration(self.table_properties())
            }
        };
        let t1 = std::time::Instant::now();
        let written = write
            .with_target_file_size(NonZeroU64::new(self.target_file_size))
            .with_writer_properties(writer_properties(self.compression))
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        let t2 = std::time::Instant::now();
        let c = committed(table, &written).await?;
        tracing::debug!(
            table = %table,
            open_and_fit_us = (t1 - t0).as_micros() as u64,
            write_and_commit_us = (t2 - t1).as_micros() as u64,
            read_back_us = t2.elapsed().as_micros() as u64,
            "committed"
        );
        Ok(((c, outcomes), written))
    }

    /// A plain append of rows in the table's own schema: data files written with
    /// delta-rs's file writer (same writer properties, same statistics) and committed on
    /// the table's snapshot, without the DataFusion session and plan a `WriteBuilder`
    /// sets up, which were most of a small commit's cost (BENCHMARKS.md).
    async fn append_files(
        &self,
        t: &DeltaTable,
        batches: &[RecordBatch],
    ) -> std::result::Result<(Committed, DeltaTable), DeltaTableError> {
        use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
        use deltalake::kernel::Action;
        use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
        use deltalake::operations::write::configs::WriterStatsConfig;
        use deltalake::protocol::DeltaOperation;

        let snapshot = t.snapshot()?;
        let stats = WriterStatsConfig::from_config(snapshot.snapshot().table_configuration());
        let Some(first) = batches.first() else {
            return Err(DeltaTableError::Generic("nothing to append".into()));
        };
        let log_store = t.log_store();
        let config = WriterConfig::new(
            first.schema(),
            Vec::new(),
            Some(writer_properties(self.compression)),
            NonZeroU64::new(self.target_file_size),
            None,
            stats.num_indexed_cols,
            stats.stats_columns,
        );
        let mut writer = DeltaWriter::new(log_store.object_store(None), config);
        for b in batches {
            writer.write(b).await?;
        }
        let adds = writer.close().await?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let mut c = Committed {
            files_added: adds.len() as u64,
            bytes_added: adds.iter().map(|a| a.size.max(0) as u64).sum(),
            rows_added: rows,
            ..Default::default()
        };
        let metrics = serde_json::json!({
            "num_added_rows": rows,
            "num_added_files": adds.len(),
        });
        let commit = CommitBuilder::from(
            CommitProperties::default().with_metadata([("operationMetrics".to_string(), metrics)]),
        )
        .with_actions(adds.into_iter().map(Action::Add).collect())
        .build(
            Some(snapshot),
            log_store,
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        )
        .await?;
        c.version = commit.version() as u64;
        // The commit's own post-commit snapshot: no second replay of the log.
        let mut written = t.clone();
        written.state = Some(commit.snapshot);
        Ok((c, written))
    }

    /// Appends `batch` (creating the table when needed).
    pub(crate) async fn append(&self, table: &TableName, batch: RecordBatch) -> Result<Committed> {
        let (handle, existing) = self.open_or_new(table).await?;
        let write = match existing {
            Some(t) => t.write(vec![batch]).with_schema_mode(SchemaMode::Merge),
            None => {
                self.ensure_local_dir(table)?;
                handle
                    .write(vec![batch])
                    .with_configuration(self.table_properties())
            }
        };
        let written = write
            .with_save_mode(SaveMode::Append)
            .with_writer_properties(writer_properties(self.compression))
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        committed(table, &written).await
    }

    /// Properties set on every table at creation.
    fn table_properties(&self) -> Vec<(String, Option<String>)> {
        crate::maintenance::default_table_properties(self.target_file_size)
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v)))
            .collect()
    }

    /// A handle to write a table: loaded when it exists, else unloaded (the write creates
    /// it). Local catalogs get the table folder created.
    pub(crate) async fn create_handle(&self, table: &TableName) -> Result<DeltaTable> {
        let (handle, existing) = self.open_or_new(table).await?;
        match existing {
            Some(t) => Ok(t),
            None => {
                self.ensure_local_dir(table)?;
                Ok(handle)
            }
        }
    }

    /// The object store rooted at the table's folder.
    pub(crate) fn table_store(
        &self,
        table: &TableName,
    ) -> Result<deltalake::logstore::ObjectStoreRef> {
        let t = self
            .builder(table)?
            .build()
            .map_err(|e| Error::delta(table.as_str(), "open", e))?;
        Ok(t.log_store().object_store(None))
    }

    /// Deletes the rows matching `predicate`, if the table exists. Returns the version.
    pub(crate) async fn delete(&self, table: &TableName, predicate: Expr) -> Result<Option<u64>> {
        let Some(t) = self.open(table).await? else {
            return Ok(None);
        };
        let (t, _metrics) = t
            .delete()
            .with_predicate(predicate)
            .await
            .map_err(|e| Error::delta(table.as_str(), "delete", e))?;
        Ok(t.version())
    }

    /// The table's folder when the catalog is on the local file system.
    pub(crate) fn local_dir(&self, table: &TableName) -> Option<std::path::PathBuf> {
        if self.schema_url.scheme() != "file" {
            return None;
        }
        self.table_url(table).ok()?.to_file_path().ok()
    }

    /// Local catalogs: create the table folder (object stores need no folders).
    fn ensure_local_dir(&self, table: &TableName) -> Result<()> {
        if let Some(dir) = self.local_dir(table) {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(dir, e))?;
        }
        Ok(())
    }
}

/// What a write committed, and what became of each part.
pub(crate) type Written = (Committed, Vec<PartOutcome>);

/// Whether some data file of `t` may hold rows of `batch_id`: a file whose `_batch_id`
/// statistics are missing, or possibly truncated (32 bytes or more), or whose min..max
/// range holds the id.
fn may_hold_batch(t: &DeltaTable, batch_id: &str) -> bool {
    let Ok(snapshot) = t.snapshot() else {
        return true;
    };
    snapshot.log_data().iter().any(|f| {
        let Some(stats) = f.stats() else {
            return true;
        };
        let Ok(stats) = serde_json::from_str::<serde_json::Value>(&stats) else {
            return true;
        };
        let bound = |which: &str| {
            stats
                .get(which)
                .and_then(|v| v.get("_batch_id"))
                .and_then(|v| v.as_str())
                .filter(|v| v.len() < 32)
                .map(str::to_string)
        };
        match (bound("minValues"), bound("maxValues")) {
            (Some(min), Some(max)) => min.as_str() <= batch_id && batch_id <= max.as_str(),
            _ => true,
        }
    })
}

/// Reads what the table's latest commit added from its log entry.
async fn committed(table: &TableName, t: &DeltaTable) -> Result<Committed> {
    let version = t
        .version()
        .ok_or_else(|| Error::delta(table.as_str(), "write", DeltaTableError::NotInitialized))?;
    let mut c = Committed {
        version,
        ..Default::default()
    };
    let entry = t
        .log_store()
        .read_commit_entry(version)
        .await
        .map_err(|e| Error::delta(table.as_str(), "read commit of", e))?;
    // The writer's own count of the rows it was given: a replace-where that rewrites a
    // file holding other topics' rows (after a compaction mixed them) adds those rows
    // again, so the files' statistics overcount.
    let mut source_rows = None;
    for line in entry.as_deref().unwrap_or_default().split(|&b| b == b'\n') {
        let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(n) = action
            .pointer("/commitInfo/operationMetrics/num_added_rows")
            .and_then(|n| n.as_u64())
        {
            source_rows = Some(n);
        }
        if let Some(add) = action.get("add") {
            c.files_added += 1;
            c.bytes_added += add.get("size").and_then(|s| s.as_u64()).unwrap_or(0);
            let stats = add.get("stats").and_then(|s| s.as_str()).unwrap_or("{}");
            if let Ok(stats) = serde_json::from_str::<serde_json::Value>(stats) {
                c.rows_added += stats
                    .get("numRecords")
                    .and_then(|n| n.as_u64())
                    .unwrap_or(0);
            }
        }
    }
    if let Some(n) = source_rows {
        c.rows_added = n;
    }
    Ok(c)
}

/// `_batch_id = batch AND _topic IN (topics)`: the rows this batch's topics wrote to a
/// table; rows of a topic that failed to flatten are left alone.
pub(crate) fn batch_topics_predicate(batch_id: &str, topics: &[String]) -> Expr {
    let list = topics.iter().map(|t| lit(t.clone())).collect();
    col("_batch_id")
        .eq(lit(batch_id.to_string()))
        .and(col("_topic").in_list(list, false))
}

/// Concatenates batches of one table from several topics into one, over the union of
/// their columns (in order of first appearance). A column that one topic typed
/// differently widens: int64 and float64 to float64, anything else to string.
pub(crate) fn merge_batches(
    table: &TableName,
    batches: &[RecordBatch],
) -> Result<Vec<RecordBatch>> {
    if let [one] = batches {
        return Ok(vec![one.clone()]);
    }
    let mut fields: Vec<Field> = Vec::new();
    for b in batches {
        for f in b.schema().fields() {
            match fields.iter_mut().find(|x| x.name() == f.name()) {
                None => fields.push(f.as_ref().clone()),
                Some(x) if x.data_type() != f.data_type() => {
                    let widened = match (x.data_type(), f.data_type()) {
                        (DataType::Int64, DataType::Float64)
                        | (DataType::Float64, DataType::Int64) => DataType::Float64,
                        _ => DataType::Utf8,
                    };
                    *x = Field::new(x.name(), widened, true);
                }
                Some(x) => {
                    if f.is_nullable() && !x.is_nullable() {
                        *x = x.clone().with_nullable(true);
                    }
                }
            }
        }
    }
    // A column missing from some topic is null there.
    for f in fields.iter_mut() {
        if batches
            .iter()
            .any(|b| b.schema().field_with_name(f.name()).is_err())
        {
            *f = f.clone().with_nullable(true);
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let mut conformed = Vec::with_capacity(batches.len());
    for b in batches {
        let columns = schema
            .fields()
            .iter()
            .map(|f| match b.column_by_name(f.name()) {
                Some(c) if c.data_type() == f.data_type() => Ok(Arc::clone(c)),
                Some(c) => cast(c, f.data_type()),
                None => Ok(arrow::array::new_null_array(f.data_type(), b.num_rows())),
            })
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()
            .map_err(|e| Error::arrow(table.as_str(), e))?;
        conformed.push(
            RecordBatch::try_new(Arc::clone(&schema), columns)
                .map_err(|e| Error::arrow(table.as_str(), e))?,
        );
    }
    Ok(conformed)
}

/// `_batch_id = batch`.
pub(crate) fn batch_predicate(batch_id: &str) -> Expr {
    col("_batch_id").eq(lit(batch_id.to_string()))
}

/// Casts the batch's columns to the table's types where that keeps every value.
fn conform(table: &TableName, batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        match target.field_with_name(field.name()) {
            Ok(t) if t.data_type() != field.data_type() => {
                let lossless = matches!(
                    (field.data_type(), t.data_type()),
                    (_, DataType::Utf8) | (DataType::Int64, DataType::Float64)
                ) || matches!(t.data_type(), DataType::Timestamp(..));
                if !lossless {
                    return Err(Error::delta(
                        table.as_str(),
                        "write",
                        DeltaTableError::Generic(format!(
                            "column `{}` is {} in the table but this batch has {} values that do not fit it",
                            field.name(),
                            t.data_type(),
                            field.data_type()
                        )),
                    ));
                }
                let cast_array =
                    cast(array, t.data_type()).map_err(|e| Error::arrow(table.as_str(), e))?;
                fields.push(Field::new(field.name(), t.data_type().clone(), true));
                columns.push(cast_array);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(Arc::clone(array));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::arrow(table.as_str(), e))
}
