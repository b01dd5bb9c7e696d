//! Commit strategies for one table: a plain append, a direct commit of new files, a
//! whole-file replace, and the rewrite of files that mix the batch's rows with others
//! (and of schema changes, [`super::rewrite`]) when nothing cheaper applies.

use std::num::NonZeroU64;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use super::entry::{CommitNotes, commit_on, put_commit, with_batch_txns};
use super::files::TOPICS_TAG;
use super::files::{
    BatchFiles, BatchRows, Folders, batch_files, same_schema, topics_of, whole_removes,
};
use super::rewrite::Rewrite;
use super::shape::{StatsColumns, plain_type};
use super::stats::{Pending, WrittenTable};
use super::strict::READ_VERSION;
use super::unloaded::Unopened;
use super::{
    Committed, Part, PartOutcome, Storage, Work, Write, Written, arrow_schema, writer_properties,
};
use crate::batch::BatchKey;
use crate::error::{Error, Result};
use crate::flatten::fit;
use crate::naming::TableName;

impl Storage {
    /// [`Storage::open_or_new_unless`], with the table's schema when it exists and
    /// how its rows tell their folder ([`Folders::SourceFile`] when it does not exist).
    async fn open_for_write(
        &self,
        table: &TableName,
        unopened: Unopened,
    ) -> Result<(DeltaTable, Option<DeltaTable>, Option<SchemaRef>, Folders)> {
        let (handle, existing) = self.open_or_new_unless(table, unopened).await?;
        let schema = existing
            .as_ref()
            .map(|t| arrow_schema(table, t))
            .transpose()?;
        let folders = schema.as_deref().map_or(Folders::SourceFile, Folders::of);
        Ok((handle, existing, schema, folders))
    }

    /// Replaces the rows of `key` with `batch` (creating the table when needed) in
    /// one commit; a plain append when no file can hold rows of the batch. Creates and
    /// appends take the direct paths ([`Storage::open_unloaded`] first, then
    /// [`Storage::write_direct`]), a replace [`Storage::rewrite`].
    pub(crate) async fn replace(
        &self,
        table: &TableName,
        batch: RecordBatch,
        key: &BatchKey,
    ) -> Result<Committed> {
        let unopened = match self.open_unloaded(table, key, Write::Replace).await {
            Ok(u) => {
                let fitted = [fit::cast_to_table(table, batch.clone(), &u.schema)?];
                if let Some(c) = self.append_unloaded(table, &u, &fitted, key).await? {
                    return Ok(c);
                }
                Unopened::Other
            }
            Err(why) => why,
        };
        let (handle, existing, schema, folders) = self.open_for_write(table, unopened).await?;
        let batch = match &schema {
            Some(schema) => fit::cast_to_table(table, batch, schema)?,
            None => batch,
        };
        let may_hold = existing
            .as_ref()
            .is_some_and(|t| batch_files(t, key, folders).may_hold());
        // A new table, or one without rows of this batch: the direct create or append.
        let existing = if may_hold {
            existing
        } else {
            let batches = std::slice::from_ref(&batch);
            match self
                .write_direct(table, &handle, existing, Write::Append, batches, Some(key))
                .await?
            {
                Direct::Done(c, _) => return Ok(c),
                Direct::NotApplicable(existing) => existing,
            }
        };
        let rows = may_hold.then(|| BatchRows::of(key, folders));
        let (c, _) = self
            .write_rewrite(table, &handle, existing, &[batch], rows, key)
            .await?;
        Ok(c)
    }

    /// Writes the parts several topics have for one table in one commit: each part is
    /// fitted to the table's schema (as it will be after the parts before it, see
    /// [`super::shape::conform`]) with its topic's evolution mode, then the rows of this batch
    /// for the topics that fit are replaced. A part that is refused (evolution `fail`)
    /// leaves its topic's earlier rows alone and gets its error back in its outcome.
    /// [`Write::Append`] appends instead (the later slices of an over-budget topic).
    pub(crate) async fn replace_parts(
        &self,
        table: &TableName,
        parts: Vec<Part>,
        key: &BatchKey,
        write: Write,
    ) -> Result<(Written, Option<WrittenTable>)> {
        let t0 = std::time::Instant::now();
        let unopened = match self
            .replace_parts_unloaded(table, &parts, key, write)
            .await?
        {
            Ok(written) => return Ok((written, None)),
            Err(why) => why,
        };
        let (handle, existing, schema, folders) = self.open_for_write(table, unopened).await?;
        let fitted = fit_parts(table, &parts, schema);
        if fitted.batches.is_empty() {
            return Ok(((Committed::default(), fitted.outcomes), None));
        }
        let batches = fit::widen(table, &fitted.batches)?;
        let files = match &existing {
            Some(t) if write == Write::Replace => batch_files(t, key, folders),
            _ => BatchFiles::None,
        };
        let write = files.write();
        let t1 = std::time::Instant::now();
        let topics = (&fitted.topics[..], folders);
        let existing = match self
            .whole_files(table, existing, files, &batches, key, topics)
            .await?
        {
            Ok((c, written)) => {
                debug_committed(table, (t0, t1), "whole files");
                return Ok(((c, fitted.outcomes), Some(written)));
            }
            Err(existing) => existing,
        };
        let existing = match self
            .write_direct(table, &handle, existing, write, &batches, Some(key))
            .await?
        {
            Direct::Done(c, written) => {
                debug_committed(table, (t0, t1), "direct");
                return Ok(((c, fitted.outcomes), written));
            }
            Direct::NotApplicable(existing) => existing,
        };
        // A plain append (schemas merged) for a later slice of a topic whose first slice
        // already replaced its rows, or a table without rows of this batch.
        let rows =
            (write == Write::Replace).then(|| BatchRows::of_topics(key, &fitted.topics, folders));
        let t1 = std::time::Instant::now();
        let (c, written) = self
            .write_rewrite(table, &handle, existing, &batches, rows, key)
            .await?;
        debug_rewritten(table, (t0, t1));
        Ok(((c, fitted.outcomes), written))
    }

    /// [`Storage::replace_whole_files`] of `existing` when `files` are
    /// [`BatchFiles::Whole`] and that applies; else `Err` with `existing` back.
    async fn whole_files(
        &self,
        table: &TableName,
        existing: Option<DeltaTable>,
        files: BatchFiles,
        batches: &[RecordBatch],
        key: &BatchKey,
        topics_folders: (&[String], Folders),
    ) -> Result<std::result::Result<(Committed, WrittenTable), Option<DeltaTable>>> {
        match (existing, files) {
            (Some(t), BatchFiles::Whole(whole)) => match self
                .replace_whole_files(table, &t, batches, key, topics_folders, whole)
                .await?
            {
                Some(done) => Ok(Ok(done)),
                None => Ok(Err(Some(t))),
            },
            (existing, _) => Ok(Err(existing)),
        }
    }

    /// [`Storage::replace_parts`] on a table opened from its log alone
    /// ([`Storage::open_unloaded`]): the parts fitted and appended in one commit. `Err`
    /// with why not when the loaded way must take the table (not openable so, or its
    /// version was taken meanwhile).
    pub(super) async fn replace_parts_unloaded(
        &self,
        table: &TableName,
        parts: &[Part],
        key: &BatchKey,
        write: Write,
    ) -> Result<std::result::Result<Written, Unopened>> {
        let t0 = std::time::Instant::now();
        let u = match self.open_unloaded(table, key, write).await {
            Ok(u) => u,
            Err(why) => return Ok(Err(why)),
        };
        let fitted = fit_parts(table, parts, Some(Arc::clone(&u.schema)));
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

    /// The path for what the direct ones do not take (schema changes, types outside the
    /// flattener's, replaces of files that mix batches or topics): on an existing table
    /// [`Storage::rewrite`] replaces the `rows` given (or appends, schemas merged); a new
    /// table is created first ([`Storage::create_empty`]) and then written to.
    pub(super) async fn write_rewrite(
        &self,
        table: &TableName,
        handle: &DeltaTable,
        existing: Option<DeltaTable>,
        batches: &[RecordBatch],
        rows: Option<BatchRows<'_>>,
        key: &BatchKey,
    ) -> Result<(Committed, Option<WrittenTable>)> {
        let t = match existing {
            Some(t) => t,
            None => self.create_empty(table, handle, batches).await?,
        };
        let what = Rewrite {
            rows,
            key: Some(key),
        };
        let (c, written) = self.rewrite(table, &t, batches, what).await?;
        Ok((c, Some(written)))
    }

    /// Creates the table with the schema of `batches` and no rows, through deltalake's
    /// create (which sets the protocol features their column types need), with the table
    /// properties; the table as it is then (another writer's, if it created it first).
    pub(super) async fn create_empty(
        &self,
        table: &TableName,
        handle: &DeltaTable,
        batches: &[RecordBatch],
    ) -> Result<DeltaTable> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
        let delta = |e| Error::delta(table.as_str(), "create", e);
        self.ensure_local_dir(table)?;
        let Some(first) = batches.first() else {
            return Err(delta(DeltaTableError::Generic("nothing to write".into())));
        };
        let schema = super::shape::merged_schema(&first.schema(), batches);
        let kernel: deltalake::kernel::StructType = schema
            .as_ref()
            .try_into_kernel()
            .map_err(|e| Error::arrow(table.as_str(), e))?;
        let created = handle
            .create()
            .with_columns(kernel.fields().cloned())
            .with_configuration(self.table_properties(false))
            .with_save_mode(SaveMode::Ignore)
            .await
            .map_err(delta)?;
        drop(created);
        self.open(table)
            .await?
            .ok_or_else(|| delta(DeltaTableError::NotInitialized))
    }

    /// Creates the table with `batches` in one commit (version 0): protocol, metadata with
    /// the table properties, and the data files written by delta-rs's file writer with
    /// the statistics a new table's configuration asks for, without loading the table it
    /// just wrote. Batches of different schemas are written in their merged schema.
    ///
    /// [`Created::NotApplicable`] when a column has a type outside [`plain_type`]'s
    /// (another could need a protocol feature, e.g. `timestampNtz`): the caller creates
    /// the table through deltalake first ([`Storage::create_empty`]).
    pub(super) async fn create_with_files(
        &self,
        handle: &DeltaTable,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> std::result::Result<Created, DeltaTableError> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
        use deltalake::kernel::{Action, Protocol, StructType, new_metadata};

        let Some(first) = batches.first() else {
            return Ok(Created::NotApplicable);
        };
        let schema = super::shape::merged_schema(&first.schema(), batches);
        if !schema.fields().iter().all(|f| plain_type(f.data_type())) {
            return Ok(Created::NotApplicable);
        }
        let conformed: Vec<RecordBatch> = batches
            .iter()
            .map(|b| super::shape::conform(b, &schema))
            .collect::<std::result::Result<_, _>>()?;
        let batches = conformed.as_slice();
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
        // kernel's default number of leading columns (32).
        let stats = StatsColumns::new_table();
        let log_store = handle.log_store();
        let (adds, c, properties) = self
            .write_data_files(&log_store, schema, batches, stats, CommitNotes::of(key))
            .await?;
        let mut actions = vec![Action::Protocol(protocol), Action::Metadata(metadata)];
        actions.extend(adds.into_iter().map(Action::Add));
        // Version 0 only: `put` if absent. Left to delta-rs, a create that finds version 0
        // taken retries as a commit on top, whose metadata would replace the other
        // writer's schema; here the rows go through the existing-table path instead.
        let put = put_commit(&log_store, 0, properties, actions);
        Ok(if self.clock.time(Work::Commit, put).await? {
            Created::Committed(c)
        } else {
            Created::Raced
        })
    }

    /// The direct paths, nothing read back: a new table is created with
    /// `batches` ([`Self::create_with_files`]); an existing one gets them appended for a
    /// [`Write::Append`] when they have the table's schema ([`Self::append_files`]).
    /// Otherwise [`Direct::NotApplicable`] hands back the table for
    /// [`Storage::write_rewrite`] (loaded anew when another writer created it meanwhile).
    pub(super) async fn write_direct(
        &self,
        table: &TableName,
        handle: &DeltaTable,
        existing: Option<DeltaTable>,
        write: Write,
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
        if write == Write::Replace || same_schema(table, &t, batches)?.is_none() {
            return Ok(Direct::NotApplicable(Some(t)));
        }
        let (c, written) = self
            .append_files(&t, batches, key)
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        Ok(Direct::Done(c, Some(written)))
    }

    /// The replace of `key`'s rows of `topics` without reading a file, for a table whose
    /// files holding the batch hold only it and topics they name ([`BatchFiles::Whole`]):
    /// those files go whole and the new files are added, in one commit recording the
    /// rows' predicate ([`BatchRows::sql`]). `Ok(None)` (nothing written) when a file of
    /// the batch holds a topic written now beside one that is not (its other rows must
    /// stay) or the rows need a schema change: the caller's [`Storage::write_rewrite`]
    /// handles those.
    pub(super) async fn replace_whole_files(
        &self,
        table: &TableName,
        t: &DeltaTable,
        batches: &[RecordBatch],
        key: &BatchKey,
        (topics, folders): (&[String], Folders),
        whole: Vec<super::files::WholeFile>,
    ) -> Result<Option<(Committed, WrittenTable)>> {
        use deltalake::kernel::Action;
        use deltalake::protocol::DeltaOperation;

        let delta = |e| Error::delta(table.as_str(), "write", e);
        let Some((removes, removed_rows)) = whole_removes(whole, topics) else {
            return Ok(None);
        };
        let Some(schema) = same_schema(table, t, batches)? else {
            return Ok(None);
        };
        let snapshot = t.snapshot().map_err(delta)?;
        let predicate = BatchRows::of_topics(key, topics, folders).sql();
        let stats = StatsColumns::of(snapshot);
        let log_store = t.log_store();
        let notes = CommitNotes {
            key: Some(key),
            read_version: Some(snapshot.version()),
            removed: Some((removes.len() as u64, removed_rows)),
            rewritten_rows: 0,
        };
        let (adds, mut c, properties) = self
            .write_data_files(&log_store, schema, batches, stats, notes)
            .await
            .map_err(delta)?;
        let pending = Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: removes.iter().map(|r| r.path.clone()).collect(),
        };
        let mut actions: Vec<Action> = removes.into_iter().map(Action::Remove).collect();
        actions.extend(adds.into_iter().map(Action::Add));
        let commit = commit_on(
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
        );
        let (version, written) = self.clock.time(Work::Commit, commit).await.map_err(delta)?;
        c.version = version;
        Ok(Some((c, written)))
    }

    /// Writes `batches` as data files of the table behind `log_store` (our writer
    /// properties, `stats` for the statistics); returns their add actions, what they add,
    /// and commit properties that record the writer's own row count and, for rows of
    /// `key`, the batch's `txn` when [`Storage::batch_txns`] ([`BATCH_TXN_PROPERTY`]).
    pub(super) async fn write_data_files(
        &self,
        log_store: &deltalake::logstore::LogStoreRef,
        schema: SchemaRef,
        batches: &[RecordBatch],
        stats: StatsColumns,
        notes: CommitNotes<'_>,
    ) -> std::result::Result<
        (
            Vec<deltalake::kernel::Add>,
            Committed,
            deltalake::kernel::transaction::CommitProperties,
        ),
        DeltaTableError,
    > {
        use deltalake::datafile::writer::{DeltaWriter, WriterConfig};

        let started = std::time::Instant::now();
        let config = WriterConfig::new(
            schema,
            Vec::new(),
            Some(writer_properties(self.compression)),
            NonZeroU64::new(self.target_file_size),
            None,
            stats.num_indexed,
            stats.columns,
        );
        let mut writer = DeltaWriter::new(log_store.object_store(None), config);
        for b in batches {
            writer.write(b).await?;
        }
        let adds = with_topics_tag(writer.close().await?, batches)?;
        // Rows of removed files written again are not the writer's new rows.
        let rows: u64 =
            batches.iter().map(|b| b.num_rows() as u64).sum::<u64>() - notes.rewritten_rows;
        let c = Committed {
            files_added: adds.len() as u64,
            bytes_added: adds.iter().map(|a| a.size.max(0) as u64).sum(),
            rows_added: rows,
            ..Default::default()
        };
        let metrics = write_metrics(rows, adds.len(), started, notes);
        let properties = self.write_properties(metrics, notes);
        self.clock.add(Work::WriteFiles, started);
        Ok((adds, c, properties))
    }

    /// Commit properties with `metrics` (`operationMetrics`), the read version `notes`
    /// give, and the batch's `txn` when [`Storage::batch_txns`].
    fn write_properties(
        &self,
        metrics: serde_json::Value,
        notes: CommitNotes<'_>,
    ) -> deltalake::kernel::transaction::CommitProperties {
        let mut metadata = vec![("operationMetrics".to_string(), metrics)];
        if let Some(v) = notes.read_version {
            metadata.push((READ_VERSION.to_string(), serde_json::json!(v)));
        }
        let mut properties = super::commit_properties().with_metadata(metadata);
        if let Some(key) = notes.key.filter(|_| self.batch_txns) {
            properties = with_batch_txns(properties, key);
        }
        properties
    }

    /// A plain append of rows in the table's own schema: data files written with
    /// delta-rs's file writer (same writer properties, same statistics) and committed on
    /// the table's snapshot, nothing read back
    /// sets up, which were most of a small commit's cost (BENCHMARKS.md).
    pub(super) async fn append_files(
        &self,
        t: &DeltaTable,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> std::result::Result<(Committed, WrittenTable), DeltaTableError> {
        use deltalake::kernel::Action;
        use deltalake::protocol::DeltaOperation;

        let snapshot = t.snapshot()?;
        let stats = StatsColumns::of(snapshot);
        let Some(first) = batches.first() else {
            return Err(DeltaTableError::Generic("nothing to append".into()));
        };
        let log_store = t.log_store();
        let (adds, mut c, properties) = self
            .write_data_files(
                &log_store,
                first.schema(),
                batches,
                stats,
                CommitNotes::of(key),
            )
            .await?;
        let pending = Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: Vec::new(),
        };
        let commit = commit_on(
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
        );
        let (version, written) = self.clock.time(Work::Commit, commit).await?;
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
        // Opened from its log alone when it can be (no `txn` check: nothing is replaced).
        let unopened = match self.open_unloaded(table, key, Write::Append).await {
            Ok(u) => {
                let batches = std::slice::from_ref(&batch);
                if let Some(c) = self.append_unloaded(table, &u, batches, key).await? {
                    return Ok(c);
                }
                Unopened::Other
            }
            Err(why) => why,
        };
        let (handle, existing) = self.open_or_new_unless(table, unopened).await?;
        let batches = std::slice::from_ref(&batch);
        let existing = match self
            .write_direct(table, &handle, existing, Write::Append, batches, Some(key))
            .await?
        {
            Direct::Done(c, _) => return Ok(c),
            Direct::NotApplicable(existing) => existing,
        };
        let (c, _) = self
            .write_rewrite(table, &handle, existing, batches, None, key)
            .await?;
        Ok(c)
    }

    /// Deletes the rows of `key` ([`BatchRows::of`]), if the table exists. Returns the
    /// version (unchanged when no file held them).
    pub(crate) async fn delete_batch(
        &self,
        table: &TableName,
        key: &BatchKey,
    ) -> Result<Option<u64>> {
        let Some(t) = self.open(table).await? else {
            return Ok(None);
        };
        let rows = BatchRows::of(key, Folders::of(arrow_schema(table, &t)?.as_ref()));
        let what = Rewrite {
            rows: Some(rows),
            key: None,
        };
        let (c, _) = self.rewrite(table, &t, &[], what).await?;
        Ok(Some(c.version))
    }
}

impl Storage {
    /// Appends `batches` to `table`, partitioned by the `partition` column, in one commit
    /// put as the next version (created at version 0, without table properties, when
    /// missing). For a table one run writes alone (its staging table): a version taken
    /// meanwhile is an error.
    pub(crate) async fn append_partitioned(
        &self,
        table: &TableName,
        batches: &[RecordBatch],
        partition: &str,
        properties: parquet::file::properties::WriterProperties,
    ) -> Result<()> {
        use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
        use deltalake::kernel::Action;

        let delta = |e: DeltaTableError| Error::delta(table.as_str(), "write", e);
        let Some(first) = batches.first() else {
            return Ok(());
        };
        let handle = self.create_handle(table).await?;
        let version = handle.version().map_or(0, |v| v + 1);
        let log_store = handle.log_store();
        let schema = first.schema();
        let stats = StatsColumns::new_table();
        let config = WriterConfig::new(
            Arc::clone(&schema),
            vec![partition.to_string()],
            Some(properties),
            None,
            None,
            stats.num_indexed,
            stats.columns,
        );
        let mut writer = DeltaWriter::new(log_store.object_store(None), config);
        for b in batches {
            writer.write(b).await.map_err(delta)?;
        }
        let adds = writer.close().await.map_err(delta)?;
        let mut actions = Vec::with_capacity(adds.len() + 2);
        if version == 0 {
            actions.extend(create_actions(table, &schema, partition)?);
        }
        actions.extend(adds.into_iter().map(Action::Add));
        let properties = super::commit_properties();
        if put_commit(&log_store, version, properties, actions)
            .await
            .map_err(delta)?
        {
            Ok(())
        } else {
            Err(delta(DeltaTableError::Generic(format!(
                "version {version} was written by another process meanwhile"
            ))))
        }
    }
}

/// `adds` tagged with the topics of `batches` ([`TOPICS_TAG`]) when they name any.
fn with_topics_tag(
    mut adds: Vec<deltalake::kernel::Add>,
    batches: &[RecordBatch],
) -> std::result::Result<Vec<deltalake::kernel::Add>, DeltaTableError> {
    if let Some(topics) = topics_of(batches).filter(|t| !t.is_empty()) {
        let tag = serde_json::to_string(&topics)?;
        for a in &mut adds {
            a.tags = Some(std::collections::HashMap::from([(
                TOPICS_TAG.to_string(),
                Some(tag.clone()),
            )]));
        }
    }
    Ok(adds)
}

/// The `operationMetrics` of a write of `rows` new rows in `files` files begun at
/// `started`, with what `notes` say it removes and writes again.
fn write_metrics(
    rows: u64,
    files: usize,
    started: std::time::Instant,
    notes: CommitNotes<'_>,
) -> serde_json::Value {
    // The metric names of deltalake's own writes, so `history` reads both alike.
    let mut metrics = serde_json::json!({
        "num_added_rows": rows,
        "num_added_files": files,
        "execution_time_ms": started.elapsed().as_millis() as u64,
    });
    if let Some((files, rows)) = notes.removed {
        metrics["num_removed_files"] = files.into();
        metrics["num_removed_rows"] = rows.into();
    }
    if notes.rewritten_rows > 0 {
        // delta-rs's name (DELETE, MERGE) for rows of removed files written again.
        metrics["num_copied_rows"] = notes.rewritten_rows.into();
    }
    metrics
}

/// Logs at debug level a commit of `table` by `strategy`: how long it took to open and
/// fit (`started` to `fitted`) and to commit (`fitted` to now).
fn debug_committed(
    table: &TableName,
    (started, fitted): (std::time::Instant, std::time::Instant),
    strategy: &'static str,
) {
    tracing::debug!(
        table = %table,
        open_and_fit_us = (fitted - started).as_micros() as u64,
        commit_us = fitted.elapsed().as_micros() as u64,
        strategy,
        "committed"
    )
}

/// Logs at debug level a commit of `table` by a rewrite: how long it took up to the
/// rewrite (`started` to `ready`) and to rewrite (`ready` to now).
fn debug_rewritten(table: &TableName, (started, ready): (std::time::Instant, std::time::Instant)) {
    tracing::debug!(
        table = %table,
        open_and_fit_us = (ready - started).as_micros() as u64,
        rewrite_us = ready.elapsed().as_micros() as u64,
        "committed"
    );
}

/// The protocol and metadata actions that create `table` with `schema`, partitioned by
/// the `partition` column, without table properties.
fn create_actions(
    table: &TableName,
    schema: &SchemaRef,
    partition: &str,
) -> Result<[deltalake::kernel::Action; 2]> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
    use deltalake::kernel::{Action, Protocol, StructType, new_metadata};

    let delta = |e: DeltaTableError| Error::delta(table.as_str(), "write", e);
    let kernel: StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| Error::arrow(table.as_str(), e))?;
    let metadata = new_metadata(&kernel, [partition], Vec::<(String, String)>::new())
        .map_err(|e| delta(e.into()))?;
    let protocol: Protocol = serde_json::from_value(serde_json::json!({
        "minReaderVersion": 1,
        "minWriterVersion": 2,
    }))
    .map_err(|e| delta(e.into()))?;
    Ok([Action::Protocol(protocol), Action::Metadata(metadata)])
}

/// What [`Storage::write_direct`] did.
pub(super) enum Direct {
    /// Committed; the table for the maintenance after it, if it needs any.
    Done(Committed, Option<WrittenTable>),
    /// Not a case for the direct paths: nothing written; the table as it is, if any.
    NotApplicable(Option<DeltaTable>),
}

/// What [`Storage::create_with_files`] did.
pub(super) enum Created {
    /// The table was created at version 0 with the rows.
    Committed(Committed),
    /// Version 0 was taken by another writer; nothing was committed.
    Raced,
    /// Not a case for it; nothing was written.
    NotApplicable,
}

/// Parts fitted to a table's schema ([`fit_parts`]).
pub(super) struct Fitted {
    /// The rows of the parts that fit, slice by slice.
    batches: Vec<RecordBatch>,
    /// Their topics.
    topics: Vec<String>,
    /// What became of each part, in order.
    outcomes: Vec<PartOutcome>,
}

/// Fits each part to the table's `schema` as the parts before it leave it, with its
/// topic's evolution mode ([`super::shape::conform`]); a table created by this commit
/// (`schema` is `None`) takes every part's columns. A refused slice refuses its whole
/// part (a topic's rows go in whole or not at all), which leaves the schema as it was.
pub(super) fn fit_parts(
    table: &TableName,
    parts: &[Part],
    mut schema: Option<SchemaRef>,
) -> Fitted {
    let exists = schema.is_some();
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
