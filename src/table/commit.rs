//! Commit strategies for one table: a plain append, a direct commit of new files, a
//! whole-file replace, and the rewrite of files that mix the batch's rows with others
//! (and of schema changes, [`super::rewrite`]) when nothing cheaper applies.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use super::datafiles::write_data_files;
use super::entry::{CommitNotes, commit_on};
use super::files::{BatchFiles, BatchRows, Folders, batch_files, same_schema, whole_removes};
use super::fit;
use super::open::{Opener, Unloaded, Unopened};
use super::planned::Duties;
use super::put::put_commit;
use super::rewrite::Rewrite;
use super::shape::{StatsColumns, plain_type};
use super::stats::{Pending, WrittenTable};
use super::{
    Committed, Part, PartOutcome, RunMode, Storage, Txns, Work, Write, Written, arrow_schema,
};
use crate::batch::BatchKey;
use crate::error::{Error, Result};
use crate::naming::{self, TableName};

/// Commits a batch's rows to the tables of a [`Storage`], each write in one commit, by
/// the cheapest strategy that applies.
#[derive(Clone, Copy)]
pub(crate) struct Committer<'a> {
    storage: &'a Storage,
    /// The run's mode: where its `txn`s go, and how its tables open.
    run: RunMode,
}

impl<'a> Committer<'a> {
    pub(super) fn new(storage: &'a Storage, run: RunMode) -> Self {
        Committer { storage, run }
    }

    fn opener(&self) -> Opener<'a> {
        self.storage.opener()
    }

    /// `key` when this run's writes record the batch's `txn` in the tables they write
    /// ([`Txns::InTables`]).
    pub(super) fn txn<'k>(&self, key: Option<&'k BatchKey>) -> Option<&'k BatchKey> {
        key.filter(|_| self.run.txns == Txns::InTables)
    }

    /// [`Opener::open_or_new_unless`], with the table's schema when it exists and
    /// how its rows tell their folder ([`Folders::SourceFile`] when it does not exist).
    async fn open_for_write(
        &self,
        table: &TableName,
        unopened: Unopened,
    ) -> Result<(DeltaTable, Option<DeltaTable>, Option<SchemaRef>, Folders)> {
        let (handle, existing) = self.opener().open_or_new_unless(table, unopened).await?;
        let schema = existing
            .as_ref()
            .map(|t| arrow_schema(table, t))
            .transpose()?;
        let folders = schema.as_deref().map_or(Folders::SourceFile, Folders::of);
        Ok((handle, existing, schema, folders))
    }

    /// Replaces the rows of `key` with `batch` (creating the table when needed) in
    /// one commit; a plain append when no file can hold rows of the batch. Creates and
    /// appends take the direct paths ([`Opener::open_unloaded`] first, then
    /// [`Committer::write_direct`]), a replace [`Rewriter::rewrite`].
    pub(crate) async fn replace(
        &self,
        table: &TableName,
        batch: RecordBatch,
        key: &BatchKey,
    ) -> Result<Committed> {
        let unopened = match self
            .opener()
            .open_unloaded(table, key, Write::Replace, self.run)
            .await
        {
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

    /// [`Committer::replace_whole_files`] of `existing` when `files` are
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

    /// [`Committer::replace_parts`] on a table opened from its log alone
    /// ([`Opener::open_unloaded`]): the parts fitted and appended in one commit. `Err`
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
        let u = match self
            .opener()
            .open_unloaded(table, key, write, self.run)
            .await
        {
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
    /// [`Rewriter::rewrite`] replaces the `rows` given (or appends, schemas merged); a new
    /// table is created first ([`Committer::create_empty`]) and then written to.
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
            txn: self.txn(Some(key)),
        };
        let (c, written) = self
            .storage
            .rewriter()
            .rewrite(table, &t, batches, what)
            .await?;
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
        self.storage.ensure_local_dir(table)?;
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
            .with_configuration(self.storage.table_properties(false))
            .with_save_mode(SaveMode::Ignore)
            .await
            .map_err(delta)?;
        drop(created);
        self.opener()
            .open(table)
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
    /// the table through deltalake first ([`Committer::create_empty`]).
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
            .storage
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
        let (adds, c, properties) = write_data_files(
            self.storage,
            &log_store,
            schema,
            batches,
            (stats, None),
            CommitNotes::of(self.txn(key)),
        )
        .await?;
        let mut actions = vec![Action::Protocol(protocol), Action::Metadata(metadata)];
        actions.extend(adds.into_iter().map(Action::Add));
        // Version 0 only: `put` if absent. Left to delta-rs, a create that finds version 0
        // taken retries as a commit on top, whose metadata would replace the other
        // writer's schema; here the rows go through the existing-table path instead.
        let put = put_commit(&log_store, 0, properties, actions);
        Ok(if self.storage.clock.time(Work::Commit, put).await? {
            Created::Committed(c)
        } else {
            Created::Raced
        })
    }

    /// The direct paths, nothing read back: a new table is created with
    /// `batches` ([`Self::create_with_files`]); an existing one gets them appended for a
    /// [`Write::Append`] when they have the table's schema ([`Self::append_files`]).
    /// Otherwise [`Direct::NotApplicable`] hands back the table for
    /// [`Committer::write_rewrite`] (loaded anew when another writer created it meanwhile).
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
            self.storage.ensure_local_dir(table)?;
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
                    Ok(Direct::NotApplicable(self.opener().open(table).await?))
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
    /// stay) or the rows need a schema change: the caller's [`Committer::write_rewrite`]
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
        let duties = Duties::read(t, snapshot).await.map_err(delta)?;
        duties.check_rows(batches).map_err(delta)?;
        let stats = duties.stats_columns(StatsColumns::of(snapshot), &schema);
        let log_store = t.log_store();
        let notes = CommitNotes {
            txn: self.txn(Some(key)),
            read_version: Some(snapshot.version()),
            removed: Some((removes.len() as u64, removed_rows)),
            rewritten_rows: 0,
            blind_append: false,
        };
        let stats = (stats, duties.mapping.as_ref());
        let (adds, mut c, properties) =
            write_data_files(self.storage, &log_store, schema, batches, stats, notes)
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
            (snapshot, &duties),
            properties,
            (actions, false),
            DeltaOperation::Write {
                mode: SaveMode::Overwrite,
                partition_by: None,
                predicate: Some(predicate),
            },
            pending,
        );
        let written = self
            .storage
            .clock
            .commit(&mut c, commit)
            .await
            .map_err(delta)?;
        Ok(Some((c, written)))
    }

    /// A plain append of rows in the table's own schema: data files written with
    /// delta-rs's file writer (same writer properties, same statistics) and committed on
    /// the table's snapshot: nothing is read back, and none of delta-rs's write-operation
    /// planning is set up (most of a small commit's cost).
    pub(super) async fn append_files(
        &self,
        t: &DeltaTable,
        batches: &[RecordBatch],
        key: Option<&BatchKey>,
    ) -> std::result::Result<(Committed, WrittenTable), DeltaTableError> {
        use deltalake::kernel::Action;
        use deltalake::protocol::DeltaOperation;

        let snapshot = t.snapshot()?;
        let Some(first) = batches.first() else {
            return Err(DeltaTableError::Generic("nothing to append".into()));
        };
        let duties = Duties::read(t, snapshot).await?;
        duties.check_rows(batches)?;
        let stats = duties.stats_columns(StatsColumns::of(snapshot), &first.schema());
        let log_store = t.log_store();
        let (adds, mut c, properties) = write_data_files(
            self.storage,
            &log_store,
            first.schema(),
            batches,
            (stats, duties.mapping.as_ref()),
            CommitNotes::of(self.txn(key)),
        )
        .await?;
        let pending = Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: Vec::new(),
        };
        let commit = commit_on(
            t,
            (snapshot, &duties),
            properties,
            (adds.into_iter().map(Action::Add).collect(), false),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
            pending,
        );
        let written = self.storage.clock.commit(&mut c, commit).await?;
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
        let unopened = match self
            .opener()
            .open_unloaded(table, key, Write::Append, self.run)
            .await
        {
            Ok(u) => {
                let batches = std::slice::from_ref(&batch);
                if let Some(c) = self.append_unloaded(table, &u, batches, key).await? {
                    return Ok(c);
                }
                Unopened::Other
            }
            Err(why) => why,
        };
        let (handle, existing) = self.opener().open_or_new_unless(table, unopened).await?;
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

    /// Appends `batches` to an [`Opener::open_unloaded`] table in one commit at the
    /// version after the one it was opened at, put only if absent. `Ok(None)`, nothing
    /// committed, when the batches' schema is not the table's (the loaded path merges
    /// them) or another writer took that version (the data files written stay
    /// unreferenced until a VACUUM): the caller goes the loaded way.
    pub(super) async fn append_unloaded(
        &self,
        table: &TableName,
        u: &Unloaded,
        batches: &[RecordBatch],
        key: &BatchKey,
    ) -> Result<Option<Committed>> {
        if !batches
            .iter()
            .all(|b| b.schema().fields() == u.schema.fields())
        {
            return Ok(None);
        }
        let appended = self.put_unloaded(u, batches, key).await;
        let c = appended.map_err(|e| Error::delta(table.as_str(), "write", e))?;
        if c.is_none() {
            tracing::info!(table = %table, "another writer committed meanwhile; writing to the table as it is now");
        }
        Ok(c)
    }

    /// [`Committer::append_unloaded`]'s data files and commit.
    async fn put_unloaded(
        &self,
        u: &Unloaded,
        batches: &[RecordBatch],
        key: &BatchKey,
    ) -> std::result::Result<Option<Committed>, DeltaTableError> {
        use deltalake::kernel::Action;

        // Default statistics columns: `open_unloaded` took only such tables.
        let stats = super::shape::StatsColumns::new_table();
        let (adds, mut c, properties) = write_data_files(
            self.storage,
            &u.log_store,
            Arc::clone(&u.schema),
            batches,
            (stats, None),
            CommitNotes::of(self.txn(Some(key))),
        )
        .await?;
        let actions = adds.into_iter().map(Action::Add).collect();
        let version = u.version + 1;
        let put = put_commit(&u.log_store, version, properties, actions);
        if !self.storage.clock.time(Work::Commit, put).await? {
            return Ok(None);
        }
        c.version = version;
        Ok(Some(c))
    }
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

/// What [`Committer::write_direct`] did.
pub(super) enum Direct {
    /// Committed; the table for the maintenance after it, if it needs any.
    Done(Committed, Option<WrittenTable>),
    /// Not a case for the direct paths: nothing written; the table as it is, if any.
    NotApplicable(Option<DeltaTable>),
}

/// What [`Committer::create_with_files`] did.
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
/// The error of a part whose rows are not of the kind of the table `schema` (when it
/// exists): child rows (they have `_parent_id`) for a topic's table, or a topic's rows
/// for a child table.
fn kind_mismatch(table: &TableName, part: &Part, schema: Option<&Schema>) -> Option<Error> {
    let schema = schema?;
    let rows_child = part
        .batches
        .first()?
        .schema()
        .column_with_name(naming::PARENT_ID)
        .is_some();
    let table_child = schema.column_with_name(naming::PARENT_ID).is_some();
    (rows_child != table_child).then(|| Error::TableKind {
        table: table.to_string(),
        topic: part.topic.as_str().into(),
        child_table: table_child,
    })
}

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
        if let Some(e) = kind_mismatch(table, part, schema.as_deref()) {
            outcome.error = Some(e);
        }
        for batch in part.batches.iter().filter(|_| outcome.error.is_none()) {
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
