//! Write: one table's rows for one (batch, topic) → a Delta commit.
//!
//! A write replaces this batch's rows for its topic (`batch_topics_predicate`: its batch id and landing paths, `_topic = T`,
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

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
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

mod unloaded;
pub(crate) mod upkeep;
use unloaded::BATCH_TXN_PROPERTY;
use unloaded::{Unopened, with_batch_txns};

use crate::batch::BatchKey;
use crate::flatten::LANDING_PATH;
use crate::flatten::fit;

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
    /// Whether appends try [`Storage::open_unloaded`] (off for a batch loaded before,
    /// whose tables hold its `txn`).
    pub(crate) unloaded_appends: bool,
}

/// Lineage and key columns: unique per row (`_id`, `_parent_id`, `_root_id`, `_line`,
/// `_idx`), where a dictionary only costs a hash per value before parquet falls back to
/// plain encoding.
const NO_DICTIONARY: [&str; 5] = ["_id", "_parent_id", "_root_id", "_line", "_idx"];

/// Columns readers filter on (replace-where, `history`, a user's `WHERE _batch_id =`):
/// the only ones that get parquet statistics beyond the file level.
const FILTERED: [&str; 4] = ["_batch_id", "_topic", "_loaded_at", "_id"];

/// A column chunk's dictionary is dropped for plain encoding once it passes this size
/// (parquet's default: 1 MiB). A 16,000-row topic's column of mostly distinct values
/// then stops hashing every value into a dictionary a few thousand rows in; columns
/// with few distinct values stay far below it (BENCHMARKS.md, session 10).
pub const DICTIONARY_PAGE_LIMIT: usize = 64 << 10;

/// Parquet properties of bronze data files (measured in `benches/stages.rs`, figures in
/// BENCHMARKS.md): no dictionary for per-row keys and a [`DICTIONARY_PAGE_LIMIT`] for
/// the others, file-level (chunk) statistics for every column (Delta's data skipping
/// reads those), page-level only for the columns readers filter on.
pub fn writer_properties(compression: Compression) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_created_by(concat!("bronze ", env!("CARGO_PKG_VERSION")).to_string())
        .set_compression(compression)
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_LIMIT)
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

    /// The table's handle, not loaded.
    fn handle(&self, table: &TableName) -> Result<DeltaTable> {
        self.builder(table)?
            .build()
            .map_err(|e| Error::delta(table.as_str(), "open", e))
    }

    /// Local catalogs: whether the table's folder has no `_delta_log`, i.e. no table yet
    /// (deltalake reports a missing local path as an error, not as `NotATable`).
    fn local_log_missing(&self, table: &TableName) -> bool {
        self.local_dir(table)
            .is_some_and(|d| !d.join("_delta_log").is_dir())
    }

    /// `(unloaded handle, loaded table if it exists)`.
    async fn open_or_new(&self, table: &TableName) -> Result<(DeltaTable, Option<DeltaTable>)> {
        let mut t = self.handle(table)?;
        if self.local_log_missing(table) {
            return Ok((t, None));
        }
        match t.load().await {
            Ok(()) => Ok((t.clone(), Some(t))),
            Err(DeltaTableError::NotATable(_)) => Ok((t, None)),
            Err(e) => Err(Error::delta(table.as_str(), "open", e)),
        }
    }

    /// [`Storage::open_or_new`], without a second look at a log found empty
    /// ([`Unopened::Absent`]: no table yet, the caller creates it).
    async fn open_or_new_unless(
        &self,
        table: &TableName,
        unopened: Unopened,
    ) -> Result<(DeltaTable, Option<DeltaTable>)> {
        if unopened != Unopened::Absent {
            return self.open_or_new(table).await;
        }
        Ok((self.handle(table)?, None))
    }

    /// Replaces the rows of `key` with `batch` (creating the table when needed) in
    /// one commit; a plain append when no file can hold rows of the batch. Creates and
    /// appends take the direct paths ([`Storage::open_unloaded`] first, then
    /// [`Storage::write_direct`]), a replace the `WriteBuilder`'s replace-where.
    pub(crate) async fn replace(
        &self,
        table: &TableName,
        batch: RecordBatch,
        key: &BatchKey,
    ) -> Result<Committed> {
        let unopened = match self.open_unloaded(table, key, true).await {
            Ok(u) => {
                let fitted = [fit::cast_to_table(table, batch.clone(), &u.schema)?];
                if let Some(c) = self.append_unloaded(table, &u, &fitted, key).await? {
                    return Ok(c);
                }
                Unopened::Other
            }
            Err(why) => why,
        };
        let (handle, existing) = self.open_or_new_unless(table, unopened).await?;
        let schema = existing
            .as_ref()
            .map(|t| arrow_schema(table, t))
            .transpose()?;
        let keyed = schema.as_deref().is_some_and(keyed);
        let batch = match &schema {
            Some(schema) => fit::cast_to_table(table, batch, schema)?,
            None => batch,
        };
        let may_hold = existing
            .as_ref()
            .is_some_and(|t| batch_files(t, key, keyed).may_hold());
        // A new table, or one without rows of this batch: the direct create or append.
        let existing = if may_hold {
            existing
        } else {
            let batches = std::slice::from_ref(&batch);
            match self
                .write_direct(table, &handle, existing, true, batches, Some(key))
                .await?
            {
                Direct::Done(c, _) => return Ok(c),
                Direct::NotApplicable(existing) => existing,
            }
        };
        let replace_where = existing
            .as_ref()
            .filter(|_| may_hold)
            .map(|_| batch_predicate(key, keyed));
        let written = self
            .write_with_builder(table, handle, existing, vec![batch], replace_where, key)
            .await?;
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
        key: &BatchKey,
        replace: bool,
    ) -> Result<(Written, Option<WrittenTable>)> {
        let t0 = std::time::Instant::now();
        let unopened = match self
            .replace_parts_unloaded(table, &parts, key, replace)
            .await?
        {
            Ok(written) => return Ok((written, None)),
            Err(why) => why,
        };
        let (handle, existing) = self.open_or_new_unless(table, unopened).await?;
        let schema = existing
            .as_ref()
            .map(|t| arrow_schema(table, t))
            .transpose()?;
        let keyed = schema.as_deref().is_some_and(keyed);
        let Fitted {
            batches,
            topics,
            outcomes,
        } = fit_parts(table, &parts, schema, existing.is_some());
        if batches.is_empty() {
            return Ok(((Committed::default(), outcomes), None));
        }
        let batches = fit::widen(table, &batches)?;
        let files = match &existing {
            Some(t) if replace => batch_files(t, key, keyed),
            _ => BatchFiles::None,
        };
        let plain_append = !files.may_hold();
        let t1 = std::time::Instant::now();
        let existing = match (existing, files) {
            // A file of this batch holding a topic written now beside one that is not
            // cannot go whole: the replace-where keeps the other topic's rows.
            (Some(t), BatchFiles::Whole(whole)) => match whole_removes(whole, &topics) {
                None => Some(t),
                Some(removes) => match self
                    .replace_whole_files(
                        table,
                        &t,
                        &batches,
                        key,
                        batch_topics_predicate(key, &topics, keyed),
                        removes,
                    )
                    .await?
                {
                    Some((c, written)) => {
                        tracing::debug!(
                            table = %table,
                            open_and_fit_us = (t1 - t0).as_micros() as u64,
                            replace_whole_files_us = t1.elapsed().as_micros() as u64,
                            "committed"
                        );
                        return Ok(((c, outcomes), Some(written)));
                    }
                    None => Some(t),
                },
            },
            (existing, _) => existing,
        };
        let existing = match self
            .write_direct(table, &handle, existing, plain_append, &batches, Some(key))
            .await?
        {
            Direct::Done(c, written) => {
                tracing::debug!(
                    table = %table,
                    open_and_fit_us = (t1 - t0).as_micros() as u64,
                    direct_us = t1.elapsed().as_micros() as u64,
                    "committed"
                );
                return Ok(((c, outcomes), written));
            }
            Direct::NotApplicable(existing) => existing,
        };
        // A plain append (schemas merged) for a later slice of a topic whose first slice
        // already replaced its rows, or a table without rows of this batch.
        let replace_where = existing
            .as_ref()
            .filter(|_| !plain_append)
            .map(|_| batch_topics_predicate(key, &topics, keyed));
        let t1 = std::time::Instant::now();
        let written = self
            .write_with_builder(table, handle, existing, batches, replace_where, key)
            .await?;
        let t2 = std::time::Instant::now();
        let c = committed(table, &written).await?;
        tracing::debug!(
            table = %table,
            open_and_fit_us = (t1 - t0).as_micros() as u64,
            write_and_commit_us = (t2 - t1).as_micros() as u64,
            read_back_us = t2.elapsed().as_micros() as u64,
            "committed"
        );
        Ok(((c, outcomes), Some(WrittenTable::current(written))))
    }

    /// [`Storage::replace_parts`] on a table opened from its log alone
    /// ([`Storage::open_unloaded`]): the parts fitted and appended in one commit. `Err`
    /// with why not when the loaded way must take the table (not openable so, or its
    /// version was taken meanwhile).
    async fn replace_parts_unloaded(
        &self,
        table: &TableName,
        parts: &[Part],
        key: &BatchKey,
        replace: bool,
    ) -> Result<std::result::Result<Written, Unopened>> {
        let t0 = std::time::Instant::now();
        let u = match self.open_unloaded(table, key, replace).await {
            Ok(u) => u,
            Err(why) => return Ok(Err(why)),
        };
        let fitted = fit_parts(table, parts, Some(Arc::clone(&u.schema)), true);
        if fitted.batches.is_empty() {
            return Ok(Ok((Committed::default(), fitted.outcomes)));
        }
        let batches = fit::widen(table, &fitted.batches)?;
        let t1 = std::time::Instant::now();
        match self.append_unloaded(table, &u, &batches, key).await? {
            Some(c) => {
                tracing::debug!(
                    table = %table,
                    open_and_fit_us = (t1 - t0).as_micros() as u64,
                    append_unloaded_us = t1.elapsed().as_micros() as u64,
                    "committed"
                );
                Ok(Ok((c, fitted.outcomes)))
            }
            None => Ok(Err(Unopened::Other)),
        }
    }

    /// The `WriteBuilder` path, for what the direct ones do not take (schema changes,
    /// types outside the flattener's, replaces of files that mix batches or topics): the
    /// rows matching `replace_where` are replaced, or without it `batches` are appended
    /// (schemas merged); a new table is created with the table properties.
    async fn write_with_builder(
        &self,
        table: &TableName,
        handle: DeltaTable,
        existing: Option<DeltaTable>,
        batches: Vec<RecordBatch>,
        replace_where: Option<Expr>,
        key: &BatchKey,
    ) -> Result<DeltaTable> {
        let write = match (existing, replace_where) {
            (Some(t), Some(predicate)) => t
                .write(batches)
                .with_save_mode(SaveMode::Overwrite)
                .with_replace_where(predicate)
                .with_schema_mode(SchemaMode::Merge),
            (Some(t), None) => t
                .write(batches)
                .with_save_mode(SaveMode::Append)
                .with_schema_mode(SchemaMode::Merge),
            (None, _) => handle
                .write(batches)
                .with_save_mode(SaveMode::Append)
                // Without `BATCH_TXN_PROPERTY`: the builder refuses keys it does not know.
                // Such a table takes the loaded path.
                .with_configuration(self.table_properties(false)),
        };
        let properties = with_batch_txns(
            deltalake::kernel::transaction::CommitProperties::default(),
            key,
        );
        write
            .with_commit_properties(properties)
            .with_target_file_size(NonZeroU64::new(self.target_file_size))
            .with_writer_properties(writer_properties(self.compression))
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))
    }

    /// Creates the table with `batches` in one commit (version 0): protocol, metadata with
    /// the table properties, and the data files written by delta-rs's file writer with
    /// the statistics a new table's configuration asks for — what a `WriteBuilder` commits
    /// for a new table, without its DataFusion plan and without loading the table it just
    /// wrote (together ~3/4 of a small new table's cost; BENCHMARKS.md).
    ///
    /// [`Created::NotApplicable`] when the caller should use the `WriteBuilder`: the
    /// batches differ in schema, or a column has a type outside the flattener's own and
    /// `_corrupt_records`' binary (another could need a protocol feature, e.g.
    /// `timestampNtz`).
    async fn create_with_files(
        &self,
        handle: &DeltaTable,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> std::result::Result<Created, DeltaTableError> {
        use arrow::datatypes::TimeUnit;
        use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
        use deltalake::kernel::{Action, Protocol, StructType, new_metadata};
        use deltalake::operations::write::configs::WriterStatsConfig;

        let Some(first) = batches.first() else {
            return Ok(Created::NotApplicable);
        };
        let schema = first.schema();
        let plain = |t: &DataType| {
            matches!(
                t,
                DataType::Utf8
                    | DataType::Binary
                    | DataType::Int64
                    | DataType::Float64
                    | DataType::Boolean
                    | DataType::Timestamp(TimeUnit::Microsecond, Some(_))
            )
        };
        if batches.iter().any(|b| b.schema() != schema)
            || !schema.fields().iter().all(|f| plain(f.data_type()))
        {
            return Ok(Created::NotApplicable);
        }
        let kernel_schema: StructType = schema.as_ref().try_into_kernel()?;
        let configuration: Vec<(String, String)> = self
            .table_properties(key.is_some())
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let metadata = new_metadata(&kernel_schema, Vec::<String>::new(), configuration)?;
        // Reader 1 / writer 2: what delta-rs gives a table with these properties and
        // column types (no table feature applies).
        let protocol: Protocol = serde_json::from_value(serde_json::json!({
            "minReaderVersion": 1,
            "minWriterVersion": 2,
        }))?;
        // A new table's configuration sets no data-skipping property: statistics for the
        // kernel's default number of leading columns (32), as `WriterStatsConfig::from_config`
        // gives such a table.
        let stats = WriterStatsConfig::new(Default::default(), None);
        let log_store = handle.log_store();
        let (adds, c, properties) = self
            .write_data_files(&log_store, schema, batches, stats, key)
            .await?;
        let mut actions = vec![Action::Protocol(protocol), Action::Metadata(metadata)];
        actions.extend(adds.into_iter().map(Action::Add));
        // Version 0 only: `put` if absent. Left to delta-rs, a create that finds version 0
        // taken retries as a commit on top, whose metadata would replace the other
        // writer's schema; here the rows go through the existing-table path instead.
        Ok(if put_commit(&log_store, 0, properties, actions).await? {
            Created::Committed(c)
        } else {
            Created::Raced
        })
    }

    /// The direct paths, without a DataFusion plan: a new table is created with
    /// `batches` ([`Self::create_with_files`]); an existing one gets them appended when
    /// `append` allows it and they have the table's schema ([`Self::append_files`]).
    /// Otherwise [`Direct::NotApplicable`] hands back the table for a `WriteBuilder`
    /// (loaded anew when another writer created it meanwhile).
    async fn write_direct(
        &self,
        table: &TableName,
        handle: &DeltaTable,
        existing: Option<DeltaTable>,
        append: bool,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> Result<Direct> {
        let Some(t) = existing else {
            self.ensure_local_dir(table)?;
            let created = self
                .create_with_files(handle, batches, key)
                .await
                .map_err(|e| Error::delta(table.as_str(), "write", e))?;
            return match created {
                // A table with one commit has nothing to maintain: no state loaded.
                Created::Committed(c) => Ok(Direct::Done(c, None)),
                // Another writer created it meanwhile: the rows go to it as it is now
                // (schemas merged). The files written for the lost create stay
                // unreferenced until a VACUUM.
                Created::Raced => {
                    tracing::info!(table = %table, "table created by another writer meanwhile; appending to it");
                    Ok(Direct::NotApplicable(self.open(table).await?))
                }
                Created::NotApplicable => Ok(Direct::NotApplicable(None)),
            };
        };
        if !append || same_schema(table, &t, batches)?.is_none() {
            return Ok(Direct::NotApplicable(Some(t)));
        }
        let (c, written) = self
            .append_files(&t, batches, key)
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        Ok(Direct::Done(c, Some(written)))
    }

    /// The replace of `key`'s rows matching `predicate` (its topics') without a DataFusion
    /// plan, for a table
    /// whose files holding the batch hold only it and one topic each
    /// ([`BatchFiles::Whole`]): `removes` (those of `topics`) go whole and the new files
    /// are added, in one commit recording the same predicate as the replace-where.
    /// `Ok(None)` (nothing written) when the rows need a schema change: the caller's
    /// `WriteBuilder` replace-where handles it.
    async fn replace_whole_files(
        &self,
        table: &TableName,
        t: &DeltaTable,
        batches: &[RecordBatch],
        key: &BatchKey,
        predicate: Expr,
        removes: Vec<deltalake::kernel::Remove>,
    ) -> Result<Option<(Committed, WrittenTable)>> {
        use deltalake::kernel::Action;
        use deltalake::operations::write::configs::WriterStatsConfig;
        use deltalake::protocol::DeltaOperation;

        let delta = |e| Error::delta(table.as_str(), "write", e);
        let Some(schema) = same_schema(table, t, batches)? else {
            return Ok(None);
        };
        let snapshot = t.snapshot().map_err(delta)?;
        let predicate =
            deltalake::delta_datafusion::expr::fmt_expr_to_sql(&predicate).map_err(delta)?;
        let stats = WriterStatsConfig::from_config(snapshot.snapshot().table_configuration());
        let log_store = t.log_store();
        let (adds, mut c, properties) = self
            .write_data_files(&log_store, schema, batches, stats, Some(key))
            .await
            .map_err(delta)?;
        let pending = Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: removes.iter().map(|r| r.path.clone()).collect(),
        };
        let mut actions: Vec<Action> = removes.into_iter().map(Action::Remove).collect();
        actions.extend(adds.into_iter().map(Action::Add));
        let (version, written) = commit_on(
            t,
            snapshot,
            properties,
            actions,
            DeltaOperation::Write {
                mode: SaveMode::Overwrite,
                partition_by: None,
                predicate: Some(predicate),
            },
            pending,
        )
        .await
        .map_err(delta)?;
        c.version = version;
        Ok(Some((c, written)))
    }

    /// Writes `batches` as data files of the table behind `log_store` (our writer
    /// properties, `stats` for the statistics); returns their add actions, what they add,
    /// and commit properties that record the writer's own row count and, for rows of
    /// `key`, the batch's `txn` ([`BATCH_TXN_PROPERTY`]).
    async fn write_data_files(
        &self,
        log_store: &deltalake::logstore::LogStoreRef,
        schema: SchemaRef,
        batches: &[RecordBatch],
        stats: deltalake::operations::write::configs::WriterStatsConfig,
        key: Option<&BatchKey>,
    ) -> std::result::Result<
        (
            Vec<deltalake::kernel::Add>,
            Committed,
            deltalake::kernel::transaction::CommitProperties,
        ),
        DeltaTableError,
    > {
        use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
        use deltalake::kernel::transaction::CommitProperties;

        let config = WriterConfig::new(
            schema,
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
        let mut adds = writer.close().await?;
        if let Some(topics) = topics_of(batches).filter(|t| !t.is_empty()) {
            let tag = serde_json::to_string(&topics)?;
            for a in &mut adds {
                a.tags = Some(std::collections::HashMap::from([(
                    TOPICS_TAG.to_string(),
                    Some(tag.clone()),
                )]));
            }
        }
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let c = Committed {
            files_added: adds.len() as u64,
            bytes_added: adds.iter().map(|a| a.size.max(0) as u64).sum(),
            rows_added: rows,
            ..Default::default()
        };
        let metrics = serde_json::json!({
            "num_added_rows": rows,
            "num_added_files": adds.len(),
        });
        let mut properties =
            CommitProperties::default().with_metadata([("operationMetrics".to_string(), metrics)]);
        if let Some(key) = key {
            properties = with_batch_txns(properties, key);
        }
        Ok((adds, c, properties))
    }

    /// A plain append of rows in the table's own schema: data files written with
    /// delta-rs's file writer (same writer properties, same statistics) and committed on
    /// the table's snapshot, without the DataFusion session and plan a `WriteBuilder`
    /// sets up, which were most of a small commit's cost (BENCHMARKS.md).
    async fn append_files(
        &self,
        t: &DeltaTable,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> std::result::Result<(Committed, WrittenTable), DeltaTableError> {
        use deltalake::kernel::Action;
        use deltalake::operations::write::configs::WriterStatsConfig;
        use deltalake::protocol::DeltaOperation;

        let snapshot = t.snapshot()?;
        let stats = WriterStatsConfig::from_config(snapshot.snapshot().table_configuration());
        let Some(first) = batches.first() else {
            return Err(DeltaTableError::Generic("nothing to append".into()));
        };
        let log_store = t.log_store();
        let (adds, mut c, properties) = self
            .write_data_files(&log_store, first.schema(), batches, stats, key)
            .await?;
        let pending = Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: Vec::new(),
        };
        let (version, written) = commit_on(
            t,
            snapshot,
            properties,
            adds.into_iter().map(Action::Add).collect(),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
            pending,
        )
        .await?;
        c.version = version;
        Ok((c, written))
    }

    /// Appends `batch`, rows of `key` (creating the table when needed).
    pub(crate) async fn append(
        &self,
        table: &TableName,
        batch: RecordBatch,
        key: &BatchKey,
    ) -> Result<Committed> {
        let (handle, existing) = self.open_or_new(table).await?;
        let batches = std::slice::from_ref(&batch);
        let existing = match self
            .write_direct(table, &handle, existing, true, batches, Some(key))
            .await?
        {
            Direct::Done(c, _) => return Ok(c),
            Direct::NotApplicable(existing) => existing,
        };
        let write = match existing {
            Some(t) => t.write(vec![batch]).with_schema_mode(SchemaMode::Merge),
            None => {
                self.ensure_local_dir(table)?;
                handle
                    .write(vec![batch])
                    .with_configuration(self.table_properties(false))
            }
        };
        let properties = with_batch_txns(
            deltalake::kernel::transaction::CommitProperties::default(),
            key,
        );
        let written = write
            .with_save_mode(SaveMode::Append)
            .with_commit_properties(properties)
            .with_writer_properties(writer_properties(self.compression))
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        committed(table, &written).await
    }

    /// Properties set on every table at creation; with `batch_txns`, on a table created
    /// by a write of a batch's rows, [`BATCH_TXN_PROPERTY`] too.
    fn table_properties(&self, batch_txns: bool) -> Vec<(String, Option<String>)> {
        let mut props: Vec<_> = upkeep::default_table_properties(self.target_file_size)
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v)))
            .collect();
        if batch_txns {
            props.push((BATCH_TXN_PROPERTY.to_string(), Some("true".to_string())));
        }
        props
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
        Ok(self.handle(table)?.log_store().object_store(None))
    }

    /// Deletes the rows of `key` ([`batch_predicate`]), if the table exists. Returns the
    /// version.
    pub(crate) async fn delete_batch(
        &self,
        table: &TableName,
        key: &BatchKey,
    ) -> Result<Option<u64>> {
        let Some(t) = self.open(table).await? else {
            return Ok(None);
        };
        let predicate = batch_predicate(key, keyed(arrow_schema(table, &t)?.as_ref()));
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

/// A table a commit went to, for the maintenance after it: its state, and what the
/// commit changed that the state does not show yet (appends and whole-file replaces keep
/// the state from before their commit rather than replaying the log again; see
/// [`commit_on`]).
pub(crate) struct WrittenTable {
    pub(crate) table: DeltaTable,
    pub(crate) pending: Pending,
}

/// Files a commit added and removed that a [`WrittenTable`]'s state does not list yet.
#[derive(Default)]
pub(crate) struct Pending {
    /// Sizes of the added files.
    pub(crate) adds: Vec<u64>,
    /// Paths of the removed files, as the log records them.
    pub(crate) removes: Vec<String>,
}

impl Pending {
    pub(crate) fn is_empty(&self) -> bool {
        self.adds.is_empty() && self.removes.is_empty()
    }
}

impl WrittenTable {
    fn current(table: DeltaTable) -> Self {
        WrittenTable {
            table,
            pending: Pending::default(),
        }
    }
}

/// Commits `actions` on `snapshot` (`t`'s). delta-rs's post-commit step replays the log
/// to the new version (one more listing and read of the log, and the files listed again
/// when next asked for), then writes a checkpoint when one is due and cleans up expired
/// log files (one more listing). Only a commit that is due a checkpoint needs it
/// (expired logs are cleaned then too, as Spark does at checkpoints); otherwise the
/// state from before the commit serves the maintenance, with `pending` alongside. On an
/// object store that is 2-3 requests less on each table's write.
async fn commit_on(
    t: &DeltaTable,
    snapshot: &deltalake::table::state::DeltaTableState,
    properties: deltalake::kernel::transaction::CommitProperties,
    actions: Vec<deltalake::kernel::Action>,
    operation: deltalake::protocol::DeltaOperation,
    pending: Pending,
) -> std::result::Result<(u64, WrittenTable), DeltaTableError> {
    use deltalake::kernel::transaction::CommitBuilder;
    let checkpoint_interval = {
        use deltalake::kernel::transaction::TableReference as _;
        use deltalake::table::config::TablePropertiesExt as _;
        // What delta-rs's post-commit step checks (its default when unset).
        snapshot.config().checkpoint_interval().get()
    };
    let post = CommitBuilder::from(properties)
        .with_actions(actions)
        .build(Some(snapshot), t.log_store(), operation)
        .into_prepared_commit_future()
        .await?
        .await?;
    let version = post.version as u64;
    if (post.version + 1).is_multiple_of(checkpoint_interval) {
        let finalized = post.await?;
        let mut written = t.clone();
        written.state = Some(finalized.snapshot);
        return Ok((version, WrittenTable::current(written)));
    }
    Ok((
        version,
        WrittenTable {
            table: t.clone(),
            pending,
        },
    ))
}

/// Commits `actions` as `version` of the table behind `log_store`, put only if absent:
/// `Ok(false)` (nothing committed) when another writer took that version. A commit
/// without a snapshot: no conflict check, since nothing can have been committed between
/// the version the caller read and this one.
pub(crate) async fn put_commit(
    log_store: &deltalake::logstore::LogStoreRef,
    version: u64,
    properties: deltalake::kernel::transaction::CommitProperties,
    actions: Vec<deltalake::kernel::Action>,
) -> std::result::Result<bool, DeltaTableError> {
    use deltalake::kernel::transaction::{CommitBuilder, TransactionError};
    use deltalake::protocol::DeltaOperation;

    let operation_id = uuid::Uuid::new_v4();
    let prepared = CommitBuilder::from(properties)
        .with_actions(actions)
        .with_operation_id(operation_id)
        .build(
            None,
            log_store.clone(),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        )
        .into_prepared_commit_future()
        .await?;
    let entry = prepared.commit_or_bytes().clone();
    match log_store
        .write_commit_entry(version, entry.clone(), operation_id)
        .await
    {
        Ok(()) => Ok(true),
        Err(TransactionError::VersionAlreadyExists(_)) => {
            log_store
                .abort_commit_entry(version, entry, operation_id)
                .await?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// What [`Storage::write_direct`] did.
enum Direct {
    /// Committed; the table for the maintenance after it, if it needs any.
    Done(Committed, Option<WrittenTable>),
    /// Not a case for the direct paths: nothing written; the table as it is, if any.
    NotApplicable(Option<DeltaTable>),
}

/// What [`Storage::create_with_files`] did.
enum Created {
    /// The table was created at version 0 with the rows.
    Committed(Committed),
    /// Version 0 was taken by another writer; nothing was committed.
    Raced,
    /// Not a case for it; nothing was written.
    NotApplicable,
}

/// What a write committed, and what became of each part.
pub(crate) type Written = (Committed, Vec<PartOutcome>);

/// How the data files of a table hold rows of one batch, by their statistics.
enum BatchFiles {
    /// No file can hold rows of the batch: a plain append.
    None,
    /// Every file holding rows of the batch holds only them (`_batch_id` statistics with
    /// min = max), of topics it names: one (`_topic` statistics with min = max) or those
    /// of its [`TOPICS_TAG`]. Those files, with their topics.
    Whole(Vec<(Vec<String>, deltalake::kernel::Remove)>),
    /// Some file may hold them beside other rows, or its statistics (missing, or possibly
    /// truncated at 32 bytes) cannot tell.
    Mixed,
}

impl BatchFiles {
    fn may_hold(&self) -> bool {
        !matches!(self, BatchFiles::None)
    }
}

/// [`BatchFiles`] of `t` for `key`: one pass over its files' statistics. A file holds
/// rows of the batch when its `_batch_id` range holds the id and its `_landing_path`
/// range one of the batch's; a file of the same batch id from other folders only is not
/// the batch's. A file that may hold rows from before landing paths (null, or a table
/// not `keyed`: without the column) is [`BatchFiles::Mixed`].
fn batch_files(t: &DeltaTable, key: &BatchKey, keyed: bool) -> BatchFiles {
    let Ok(snapshot) = t.snapshot() else {
        return BatchFiles::Mixed;
    };
    let batch_id = key.batch_id.as_str();
    let ours = |path: &str| key.landing_paths.iter().any(|p| p == path);
    let mut whole = Vec::new();
    for f in snapshot.log_data().iter() {
        let Some(stats) = f
            .stats()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        else {
            return BatchFiles::Mixed;
        };
        let bounds = |column: &str| {
            let bound = |which: &str| {
                stats
                    .get(which)?
                    .get(column)?
                    .as_str()
                    .filter(|v| v.len() < 32)
                    .map(str::to_string)
            };
            Some((bound("minValues")?, bound("maxValues")?))
        };
        let Some((min, max)) = bounds("_batch_id") else {
            return BatchFiles::Mixed;
        };
        if !(min.as_str() <= batch_id && batch_id <= max.as_str()) {
            continue;
        }
        if min != max {
            return BatchFiles::Mixed;
        }
        if !key.landing_paths.is_empty() {
            // Rows written before landing paths (null, or no column yet) are told apart
            // by `_source_file` only: the replace-where decides.
            if !keyed {
                return BatchFiles::Mixed;
            }
            let nulls = stats
                .get("nullCount")
                .and_then(|n| n.get(LANDING_PATH))
                .and_then(serde_json::Value::as_u64);
            if nulls != Some(0) {
                return BatchFiles::Mixed;
            }
            match bounds(LANDING_PATH) {
                Some((first, last)) if first == last && ours(&first) => {}
                // Another folder's rows of the same batch id: not the batch's.
                Some((first, last))
                    if !key
                        .landing_paths
                        .iter()
                        .any(|p| first.as_str() <= p.as_str() && p.as_str() <= last.as_str()) =>
                {
                    continue;
                }
                _ => return BatchFiles::Mixed,
            }
        }
        let topics = match bounds("_topic") {
            Some((topic, last)) if topic == last => vec![topic],
            _ => match tagged_topics(&f) {
                Some(topics) => topics,
                None => return BatchFiles::Mixed,
            },
        };
        whole.push((topics, f.remove_action(true)));
    }
    if whole.is_empty() {
        BatchFiles::None
    } else {
        BatchFiles::Whole(whole)
    }
}

/// Parts fitted to a table's schema ([`fit_parts`]).
struct Fitted {
    /// The rows of the parts that fit, slice by slice.
    batches: Vec<RecordBatch>,
    /// Their topics.
    topics: Vec<String>,
    /// What became of each part, in order.
    outcomes: Vec<PartOutcome>,
}

/// Fits each part to the table's `schema` as the parts before it leave it, with its
/// topic's evolution mode ([`crate::conform`]); a table created by this commit
/// (`exists = false`) takes every part's columns. A refused slice refuses its whole part
/// (a topic's rows go in whole or not at all), which leaves the schema as it was.
fn fit_parts(
    table: &TableName,
    parts: &[Part],
    mut schema: Option<SchemaRef>,
    exists: bool,
) -> Fitted {
    let mut fitted = Fitted {
        batches: Vec::with_capacity(parts.len()),
        topics: Vec::with_capacity(parts.len()),
        outcomes: Vec::with_capacity(parts.len()),
    };
    for part in parts {
        let evolution = if exists {
            part.evolution
        } else {
            crate::config::Evolution::Add
        };
        let mut batches = Vec::with_capacity(part.batches.len());
        let mut outcome = PartOutcome {
            rows: 0,
            added: Vec::new(),
            rescued: 0,
            error: None,
        };
        let mut part_schema = schema.clone();
        for batch in &part.batches {
            match fit::to_table(table, batch.clone(), part_schema.as_deref(), evolution) {
                Ok(c) => {
                    part_schema = Some(fit::merged_schema(part_schema.as_deref(), &c.batch));
                    outcome.rows += c.batch.num_rows() as u64;
                    outcome.rescued += c.rescued;
                    for a in c.added {
                        if !outcome.added.contains(&a) {
                            outcome.added.push(a);
                        }
                    }
                    batches.push(c.batch);
                }
                Err(e) => {
                    outcome.error = Some(e);
                    break;
                }
            }
        }
        if outcome.error.is_none() {
            schema = part_schema;
            if !fitted.topics.contains(&part.topic) {
                fitted.topics.push(part.topic.clone());
            }
            fitted.batches.extend(batches);
        } else {
            outcome.rows = 0;
            outcome.added.clear();
            outcome.rescued = 0;
        }
        fitted.outcomes.push(outcome);
    }
    fitted
}

/// The `tags` key of an add action that lists the topics of the rows in its file (a JSON
/// array; those of the whole commit, so possibly more than the file holds).
pub const TOPICS_TAG: &str = "bronze.topics";

/// The distinct `_topic` values of `batches`, in order; `None` when a batch has no
/// `_topic` column of strings or a null in it.
fn topics_of(batches: &[RecordBatch]) -> Option<Vec<String>> {
    let mut topics: Vec<String> = Vec::new();
    for b in batches {
        let column = b.column_by_name("_topic")?;
        let values = column
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()?;
        if arrow::array::Array::null_count(values) > 0 {
            return None;
        }
        for v in values.iter().flatten() {
            // Rows come topic by topic: compare with the last one first.
            if topics.last().is_some_and(|t| t == v) || topics.iter().any(|t| t == v) {
                continue;
            }
            topics.push(v.to_string());
        }
    }
    Some(topics)
}

/// The topics a file's [`TOPICS_TAG`] names.
fn tagged_topics(f: &deltalake::kernel::LogicalFileView) -> Option<Vec<String>> {
    // The file view exposes `tags` only through the (deprecated) add action.
    #[allow(deprecated)]
    let add = f.add_action();
    let tag = add.tags?.remove(TOPICS_TAG)??;
    serde_json::from_str(&tag).ok()
}

/// The removes of `whole`'s files whose topics are all among `topics` (files of other
/// topics stay); `None` when a file holds one of `topics` beside a topic not among them.
fn whole_removes(
    whole: Vec<(Vec<String>, deltalake::kernel::Remove)>,
    topics: &[String],
) -> Option<Vec<deltalake::kernel::Remove>> {
    let mut removes = Vec::new();
    for (file_topics, remove) in whole {
        let ours = file_topics.iter().filter(|t| topics.contains(t)).count();
        if ours == file_topics.len() {
            removes.push(remove);
        } else if ours > 0 {
            return None;
        }
    }
    Some(removes)
}

/// The table's schema, when every one of `batches` has it exactly (the direct paths
/// write the files in it).
fn same_schema(
    table: &TableName,
    t: &DeltaTable,
    batches: &[RecordBatch],
) -> Result<Option<SchemaRef>> {
    let schema = arrow_schema(table, t)?;
    let same = batches
        .iter()
        .all(|b| b.schema().fields() == schema.fields());
    Ok(same.then_some(schema))
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

/// `<batch> AND _topic IN (topics)` ([`batch_predicate`]): the rows this batch's folders'
/// topics wrote to a table; rows of a topic that failed to flatten are left alone, and
/// so are rows of other folders with the same batch id.
pub(crate) fn batch_topics_predicate(key: &BatchKey, topics: &[String], keyed: bool) -> Expr {
    let list = topics.iter().map(|t| lit(t.clone())).collect();
    batch_predicate(key, keyed).and(col("_topic").in_list(list, false))
}

/// The rows of a batch: `_batch_id = X AND (_landing_path IN (<its folders>) OR
/// (_landing_path IS NULL AND <legacy>))`, where `<legacy>` matches rows written before
/// landing paths (when the batch id was the whole key) by their `_source_file`:
/// `_source_file LIKE '%/<suffix>/%'` for each folder's [`BatchKey::legacy_suffixes`]. In
/// a table without the column (not `keyed`), `_batch_id = X AND <legacy>`. A key without
/// landing paths (benches) is `_batch_id = X`.
pub(crate) fn batch_predicate(key: &BatchKey, keyed: bool) -> Expr {
    let id = col("_batch_id").eq(lit(key.batch_id.clone()));
    if key.landing_paths.is_empty() {
        return id;
    }
    let legacy = key
        .legacy_suffixes
        .iter()
        .map(|s| col("_source_file").like(lit(format!("%/{}/%", like_escape(s)))))
        .reduce(Expr::or)
        .unwrap_or(lit(false));
    if !keyed {
        return id.and(legacy);
    }
    let paths = key.landing_paths.iter().map(|p| lit(p.clone())).collect();
    id.and(
        col(LANDING_PATH)
            .in_list(paths, false)
            .or(col(LANDING_PATH).is_null().and(legacy)),
    )
}

/// `text` with LIKE's wildcards (`%`, `_`) and escape (`\`) escaped.
fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A table's schema as Arrow.
fn arrow_schema(table: &TableName, t: &DeltaTable) -> Result<SchemaRef> {
    Ok(t.snapshot()
        .map_err(|e| Error::delta(table.as_str(), "read schema of", e))?
        .snapshot()
        .arrow_schema())
}

/// Whether a table's schema has the `_landing_path` column (rows keyed by folder).
fn keyed(schema: &arrow::datatypes::Schema) -> bool {
    schema.field_with_name(LANDING_PATH).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};

    /// A key without landing paths: rows and predicates by batch id alone.
    fn k(id: &str) -> BatchKey {
        BatchKey::of_id(id)
    }

    fn storage(dir: &std::path::Path) -> Storage {
        Storage {
            schema_url: Url::from_directory_path(dir).unwrap(),
            root_store: None,
            target_file_size: 128 << 20,
            compression: Compression::SNAPPY,
            auto_compact_at: None,
            unloaded_appends: true,
        }
    }

    fn part(topic: &str, rows: i64) -> Part {
        part_of(topic, rows, "b1")
    }

    /// `rows` rows of `topic` in batch `batch_id`.
    fn part_of(topic: &str, rows: i64, batch_id: &str) -> Part {
        let ids: Vec<String> = (0..rows).map(|i| format!("{topic}-{i}")).collect();
        // Lineage never null, payload columns nullable: as the flattener makes them.
        let batch = RecordBatch::try_from_iter_with_nullable(vec![
            (
                "_batch_id",
                Arc::new(StringArray::from(vec![batch_id; rows as usize])) as ArrayRef,
                false,
            ),
            (
                "_topic",
                Arc::new(StringArray::from(vec![topic; rows as usize])) as ArrayRef,
                false,
            ),
            ("_id", Arc::new(StringArray::from(ids)) as ArrayRef, false),
            (
                "seq",
                Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
                true,
            ),
        ])
        .unwrap();
        Part {
            topic: topic.to_string(),
            batches: vec![batch],
            evolution: crate::config::Evolution::Add,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_new_table_is_created_in_one_commit_like_a_write_builder_would() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::for_topic("quote");
        let ((c, outcomes), written) = s
            .replace_parts(&name, vec![part("quote", 5)], &k("b1"), true)
            .await
            .unwrap();
        // Created at version 0; nothing to maintain, so no table state was loaded.
        assert_eq!((c.version, c.files_added, c.rows_added), (0, 1, 5));
        assert_eq!(outcomes[0].rows, 5);
        assert!(written.is_none());

        let t = s.open(&name).await.unwrap().expect("a Delta table");
        let snapshot = t.snapshot().unwrap();
        let protocol = snapshot.protocol();
        assert_eq!(
            (protocol.min_reader_version(), protocol.min_writer_version()),
            (1, 2)
        );
        let config = snapshot.metadata().configuration().clone();
        for (k, v) in upkeep::default_table_properties(128 << 20) {
            assert_eq!(config.get(k), Some(&v), "{k}");
        }
        assert_eq!(
            config.get(BATCH_TXN_PROPERTY).map(String::as_str),
            Some("true")
        );
        let files: Vec<_> = snapshot.log_data().iter().collect();
        assert_eq!(files.len(), 1);
        let stats: serde_json::Value =
            serde_json::from_str(&files[0].stats().expect("file statistics")).unwrap();
        assert_eq!(stats["numRecords"], 5);
        assert_eq!(stats["minValues"]["_id"], "quote-0");
        assert_eq!(stats["maxValues"]["seq"], 4);

        // Each commit of a batch's rows records the batch.
        let txn = |version| {
            commit_actions(dir.path(), "quote", version)
                .into_iter()
                .filter_map(|a| a.get("txn").cloned())
                .collect::<Vec<_>>()
        };
        assert_eq!(txn(0).len(), 1);
        assert_eq!(txn(0)[0]["appId"], "bronze/b1");

        // The next batch's rows go in as an append on the unloaded table (its log has
        // no `txn` of b2): not due a checkpoint, so nothing to maintain.
        let ((c, _), written) = s
            .replace_parts(&name, vec![part_of("quote", 3, "b2")], &k("b2"), true)
            .await
            .unwrap();
        assert_eq!((c.version, c.rows_added), (1, 3));
        assert!(written.is_none());
        assert_eq!(txn(1)[0]["appId"], "bronze/b2");
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!((t.version(), live_rows(&t)), (Some(1), 8));

        // A rerun of b2 finds its `txn`: the loaded path replaces its rows.
        let ((c, _), _) = s
            .replace_parts(&name, vec![part_of("quote", 2, "b2")], &k("b2"), true)
            .await
            .unwrap();
        assert_eq!((c.version, c.rows_added), (2, 2));
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 5 + 2);
        assert!(s.batch_seen(&name, &k("b2")).await);
        assert!(!s.batch_seen(&name, &k("b3")).await);
        assert!(!s.batch_seen(&TableName::for_topic("none"), &k("b2")).await);
    }

    /// `_corrupt_records` keeps each line's bytes in a binary column: its table is created
    /// by the direct commit too (the `WriteBuilder` would set up a DataFusion session and
    /// record its own metrics, e.g. `execution_time_ms`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_table_with_a_binary_column_is_created_in_one_direct_commit() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::system("_bytes");
        let batch = RecordBatch::try_from_iter_with_nullable(vec![
            (
                "_batch_id",
                Arc::new(StringArray::from(vec!["b1"; 2])) as ArrayRef,
                false,
            ),
            (
                "_corrupt_bytes",
                Arc::new(arrow::array::BinaryArray::from_iter_values([
                    b"{\"a\":".as_slice(),
                    b"\xff\xfe",
                ])) as ArrayRef,
                false,
            ),
        ])
        .unwrap();
        let c = s.replace(&name, batch, &k("b1")).await.unwrap();
        assert_eq!((c.version, c.files_added, c.rows_added), (0, 1, 2));
        let actions = commit_actions(dir.path(), "_bytes", 0);
        let info = actions
            .iter()
            .find_map(|a| a.get("commitInfo"))
            .expect("commitInfo");
        let metrics: Vec<&String> = info["operationMetrics"]
            .as_object()
            .expect("operationMetrics")
            .keys()
            .collect();
        assert_eq!(metrics, ["num_added_files", "num_added_rows"], "{info}");
        let protocol = actions.iter().find_map(|a| a.get("protocol")).unwrap();
        assert_eq!(
            (&protocol["minReaderVersion"], &protocol["minWriterVersion"]),
            (&serde_json::json!(1), &serde_json::json!(2))
        );
        let t = s.open(&name).await.unwrap().expect("a Delta table");
        assert_eq!(live_rows(&t), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_skip_the_log_replay_until_a_checkpoint_is_due() {
        for unloaded in [true, false] {
            appends_until_a_checkpoint(unloaded).await;
        }
    }

    /// Ten batches appended to one table, with or without [`Storage::open_unloaded`].
    async fn appends_until_a_checkpoint(unloaded: bool) {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage {
            unloaded_appends: unloaded,
            ..storage(dir.path())
        };
        let name = TableName::for_topic("quote");
        let log = dir.path().join("quote/_delta_log");
        // Ids that sort after every earlier one: each load is a plain append.
        for day in 1..=10u64 {
            let mut p = part("quote", 4);
            let id = format!("b{day:02}");
            let ids = StringArray::from(vec![id.as_str(); 4]);
            let b = &p.batches[0];
            p.batches[0] = RecordBatch::try_new(
                b.schema(),
                vec![
                    Arc::new(ids),
                    b.column(1).clone(),
                    b.column(2).clone(),
                    b.column(3).clone(),
                ],
            )
            .unwrap();
            let ((c, _), written) = s
                .replace_parts(&name, vec![p], &k(&id), true)
                .await
                .unwrap();
            let version = day - 1;
            assert_eq!(c.version, version);
            let checkpoint = log.join(format!("{version:020}.checkpoint.parquet"));
            match version {
                0 => assert!(written.is_none(), "created: nothing to maintain"),
                // Version 9 is due a checkpoint (interval 10): written, and the state is
                // the new version's.
                9 => assert_checkpointed(written, 9, &checkpoint),
                // Opened unloaded: nothing loaded, nothing to maintain.
                _ if unloaded => {
                    assert!(written.is_none());
                    assert!(!checkpoint.exists());
                }
                // Otherwise the state from before the commit, the new file beside it.
                _ => {
                    let w = written.unwrap();
                    assert_eq!(w.table.version(), Some(version - 1));
                    assert_eq!(w.pending.adds.len(), 1);
                    assert!(w.pending.adds[0] > 0);
                    assert!(w.pending.removes.is_empty());
                    assert!(!checkpoint.exists());
                }
            }
        }
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!(t.version(), Some(9));
        assert_eq!(t.snapshot().unwrap().log_data().iter().count(), 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reruns_replacing_whole_files_skip_the_log_replay_until_a_checkpoint_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::for_topic("quote");
        let log = dir.path().join("quote/_delta_log");
        let live = |t: &DeltaTable| -> Vec<String> {
            t.snapshot()
                .unwrap()
                .log_data()
                .iter()
                .map(|f| f.path().into_owned())
                .collect()
        };
        // The same batch loaded ten times: a create, then nine replaces of its one file.
        let mut before: Vec<String> = Vec::new();
        for version in 0..10u64 {
            let ((c, _), written) = s
                .replace_parts(&name, vec![part("quote", 4)], &k("b1"), true)
                .await
                .unwrap();
            assert_eq!(c.version, version);
            let checkpoint = log.join(format!("{version:020}.checkpoint.parquet"));
            match version {
                0 => assert!(written.is_none(), "created: nothing to maintain"),
                // Due a checkpoint (interval 10): written, the state the new version's.
                9 => assert_checkpointed(written, 9, &checkpoint),
                // The state from before the commit, with the file it replaced and the
                // new one's size beside it.
                _ => {
                    let w = written.unwrap();
                    assert_eq!(w.table.version(), Some(version - 1));
                    assert_eq!(live(&w.table), before);
                    assert_eq!(w.pending.removes, before);
                    assert_eq!(w.pending.adds.len(), 1);
                    assert!(!checkpoint.exists());
                }
            }
            let t = s.open(&name).await.unwrap().unwrap();
            assert_eq!(live_rows(&t), 4);
            before = live(&t);
            assert_eq!(before.len(), 1);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn auto_compaction_after_a_replace_does_not_count_the_files_it_removed() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::for_topic("quote");
        for id in ["b1", "b2", "b3"] {
            s.replace_parts(&name, vec![part_of("quote", 4, id)], &k(id), true)
                .await
                .unwrap();
        }
        let rerun = |id: &'static str| {
            let s = s.clone();
            let name = name.clone();
            async move {
                let (_, written) = s
                    .replace_parts(&name, vec![part_of("quote", 4, id)], &k(id), true)
                    .await
                    .unwrap();
                written.unwrap()
            }
        };
        // Three small files before and after the rerun of b2 (one removed, one added):
        // under a trigger of four, no compaction.
        let w = rerun("b2").await;
        assert_eq!(w.pending.removes.len(), 1);
        let compacted = upkeep::after_commit(&s, &name, w, 128 << 20, Some(4))
            .await
            .unwrap();
        assert!(compacted.is_none(), "{compacted:?}");
        // The same after a rerun of b3, were the removed file counted: four, compacted.
        let mut w = rerun("b3").await;
        w.pending.removes.clear();
        let compacted = upkeep::after_commit(&s, &name, w, 128 << 20, Some(4))
            .await
            .unwrap()
            .expect("compacted");
        assert_eq!(compacted.files_after, 1);
    }

    /// A commit due a checkpoint: the checkpoint written, the state the new version's.
    fn assert_checkpointed(
        written: Option<WrittenTable>,
        version: u64,
        checkpoint: &std::path::Path,
    ) {
        let w = written.unwrap();
        assert!(w.pending.is_empty());
        assert_eq!(w.table.version(), Some(version));
        assert!(checkpoint.is_file(), "{}", checkpoint.display());
    }

    fn live_rows(t: &DeltaTable) -> i64 {
        t.snapshot()
            .unwrap()
            .log_data()
            .iter()
            .map(|f| {
                let stats: serde_json::Value = serde_json::from_str(&f.stats().unwrap()).unwrap();
                stats["numRecords"].as_i64().unwrap()
            })
            .sum()
    }

    /// The actions of commit `version` of `table`, as JSON values.
    fn commit_actions(dir: &std::path::Path, table: &str, version: u64) -> Vec<serde_json::Value> {
        let log = dir
            .join(table)
            .join(format!("_delta_log/{version:020}.json"));
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Loads `first` as batch `b1`, then reruns `b1` with `rerun`; what the rerun committed.
    async fn load_then_rerun(
        s: &Storage,
        table: &TableName,
        first: Vec<Part>,
        rerun: Part,
    ) -> Committed {
        s.replace_parts(table, first, &k("b1"), true).await.unwrap();
        let ((c, _), _) = s
            .replace_parts(table, vec![rerun], &k("b1"), true)
            .await
            .unwrap();
        c
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rerun_drops_whole_files_of_its_batch_and_topic_or_plans_when_files_mix() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        // A topic's own table: its files hold one batch and one topic.
        let quote = TableName::for_topic("quote");
        let c = load_then_rerun(&s, &quote, vec![part("quote", 5)], part("quote", 3)).await;
        assert_eq!((c.version, c.rows_added), (1, 3));
        let actions = commit_actions(dir.path(), "quote", 1);
        let count = |kind: &str| actions.iter().filter(|a| a.get(kind).is_some()).count();
        assert_eq!((count("remove"), count("add")), (1, 1));
        let info = &actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
        assert_eq!(info["operationParameters"]["mode"], "Overwrite");
        let predicate = info["operationParameters"]["predicate"].as_str().unwrap();
        assert!(
            predicate.contains("_batch_id") && predicate.contains("quote"),
            "{predicate}"
        );
        let t = s.open(&quote).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 3);

        // A shared table whose file mixes two topics: replacing one topic's rows goes
        // through the replace-where, which keeps the other topic's rows.
        let shared = TableName::for_topic("shared");
        let both = vec![part("quote", 5), part("trade", 4)];
        let c = load_then_rerun(&s, &shared, both, part("quote", 2)).await;
        assert_eq!(c.version, 1);
        let t = s.open(&shared).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 4 + 2);
        let actions = commit_actions(dir.path(), "shared", 1);
        let info = actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
        assert_eq!(info["operation"], "WRITE");
        assert!(
            info["operationMetrics"].get("execution_time_ms").is_some(),
            "the DataFusion write records its execution time: {info}"
        );

        // A file of two topics rerun with both (as a child table's rerun is): its
        // `bronze.topics` tag names them, so it goes whole, without a plan.
        let both = || vec![part("quote", 5), part("trade", 4)];
        let fresh = TableName::for_topic("fresh");
        s.replace_parts(&fresh, both(), &k("b1"), true)
            .await
            .unwrap();
        let tags: Vec<_> = commit_actions(dir.path(), "fresh", 0)
            .iter()
            .filter_map(|a| a["add"]["tags"][TOPICS_TAG].as_str().map(str::to_string))
            .collect();
        assert_eq!(tags, vec![r#"["quote","trade"]"#.to_string()]);
        let ((c, _), _) = s
            .replace_parts(
                &fresh,
                vec![part("quote", 2), part("trade", 3)],
                &k("b1"),
                true,
            )
            .await
            .unwrap();
        assert_eq!((c.version, c.rows_added), (1, 5));
        let actions = commit_actions(dir.path(), "fresh", 1);
        let count = |kind: &str| actions.iter().filter(|a| a.get(kind).is_some()).count();
        assert_eq!((count("remove"), count("add")), (1, 1));
        let info = actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
        assert_eq!(info["operationParameters"]["mode"], "Overwrite");
        assert!(info["operationMetrics"].get("execution_time_ms").is_none());
        let t = s.open(&fresh).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 5);
        // A topic beside them in the file that this write does not replace: planned.
        let ((c, _), _) = s
            .replace_parts(&fresh, vec![part("quote", 1)], &k("b1"), true)
            .await
            .unwrap();
        assert_eq!(c.version, 2);
        let t = s.open(&fresh).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 3 + 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_table_another_writer_created_first_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::for_topic("quote");
        // Two writers both saw no table; the first creates it.
        let (handle, existing) = s.open_or_new(&name).await.unwrap();
        assert!(existing.is_none());
        s.ensure_local_dir(&name).unwrap();
        let first = s
            .create_with_files(&handle, &part("quote", 5).batches, Some(&k("b1")))
            .await;
        assert!(matches!(
            first,
            Ok(Created::Committed(Committed { version: 0, .. }))
        ));
        // The second finds version 0 taken and commits nothing (its rows then go through
        // the existing-table path); the first writer's schema and rows stay.
        let mut other = part("other", 3).batches;
        other[0] = other[0].project(&[0, 1, 2]).unwrap();
        let second = s.create_with_files(&handle, &other, Some(&k("b2"))).await;
        assert!(matches!(second, Ok(Created::Raced)), "{:?}", second.err());
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!(t.version(), Some(0));
        let snapshot = t.snapshot().unwrap();
        let schema = snapshot.snapshot().arrow_schema();
        assert!(schema.field_with_name("seq").is_ok());
        assert_eq!(snapshot.log_data().iter().count(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unloaded_append_whose_version_was_taken_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        let name = TableName::for_topic("quote");
        s.replace_parts(&name, vec![part("quote", 5)], &k("b1"), true)
            .await
            .unwrap();
        let u = s
            .open_unloaded(&name, &k("b2"), true)
            .await
            .expect("unloaded");
        assert_eq!(u.version, 0);
        // Another writer commits version 1 meanwhile.
        s.replace_parts(&name, vec![part("quote", 4)], &k("b3"), true)
            .await
            .unwrap();
        let appended = s
            .append_unloaded(&name, &u, &part("quote", 3).batches, &k("b2"))
            .await
            .unwrap();
        assert!(appended.is_none());
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!((t.version(), live_rows(&t)), (Some(1), 5 + 4));
        assert!(!s.batch_seen(&name, &k("b2")).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_tables_that_record_every_batch_are_opened_unloaded() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage(dir.path());
        // Created by another writer (or an older bronze): rows of b1, no `txn`, no
        // property. Never opened unloaded, and b1's rows are replaced, not duplicated.
        let name = TableName::for_topic("quote");
        s.create_handle(&name)
            .await
            .unwrap()
            .write(part("quote", 5).batches)
            .with_save_mode(SaveMode::Append)
            .await
            .unwrap();
        assert!(s.open_unloaded(&name, &k("b1"), true).await.is_err());
        s.replace_parts(&name, vec![part("quote", 2)], &k("b1"), true)
            .await
            .unwrap();
        let t = s.open(&name).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 2);

        // Bronze's own table, until `txn`s may expire.
        let trade = TableName::for_topic("trade");
        s.replace_parts(&trade, vec![part("trade", 5)], &k("b1"), true)
            .await
            .unwrap();
        assert!(s.open_unloaded(&trade, &k("b2"), true).await.is_ok());
        // Its own batch: only for a plain append (a later slice of it).
        assert!(s.open_unloaded(&trade, &k("b1"), true).await.is_err());
        assert!(s.open_unloaded(&trade, &k("b1"), false).await.is_ok());
        let t = s.open(&trade).await.unwrap().unwrap();
        t.set_tbl_properties()
            .with_properties(std::collections::HashMap::from([(
                "delta.setTransactionRetentionDuration".to_string(),
                "interval 7 days".to_string(),
            )]))
            .await
            .unwrap();
        assert_eq!(
            s.open_unloaded(&trade, &k("b2"), true).await.err(),
            Some(Unopened::Other)
        );
        // No table yet: a folder without a log, or a log without a commit (a create that
        // was killed). The caller creates it without looking again.
        let none = TableName::for_topic("none");
        assert_eq!(
            s.open_unloaded(&none, &k("b2"), true).await.err(),
            Some(Unopened::Absent)
        );
        std::fs::create_dir_all(dir.path().join("none/_delta_log")).unwrap();
        assert_eq!(
            s.open_unloaded(&none, &k("b2"), true).await.err(),
            Some(Unopened::Absent)
        );
        s.replace_parts(&none, vec![part("quote", 2)], &k("b2"), true)
            .await
            .unwrap();
        let t = s.open(&none).await.unwrap().unwrap();
        assert_eq!((t.version(), live_rows(&t)), (Some(0), 2));
        // Off for the run.
        let off = Storage {
            unloaded_appends: false,
            ..storage(dir.path())
        };
        let shared = TableName::for_topic("shared");
        off.replace_parts(&shared, vec![part("quote", 1)], &k("b1"), true)
            .await
            .unwrap();
        assert!(off.open_unloaded(&shared, &k("b2"), true).await.is_err());
        assert!(s.open_unloaded(&shared, &k("b2"), true).await.is_ok());
    }
}
