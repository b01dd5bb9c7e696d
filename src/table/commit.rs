//! Commit strategies for one table: a plain append, a direct commit of new files, a
//! whole-file replace, and the rewrite of files that mix the batch's rows with others
//! (and of schema changes, [`super::rewrite`]) when nothing cheaper applies.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};

use super::datafiles::{FileLayout, write_data_files};
use super::entry::{CommitNotes, commit_on};
use super::files::{
    BatchFiles, BatchRows, Folders, WholeFile, batch_files, same_schema, whole_removes,
};
use super::fit;
use super::open::{Opener, Unloaded, Unopened};
use super::planned::{Duties, LogEntry, PlannedOn};
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
    ) -> Result<OpenedForWrite> {
        let (handle, existing) = self.opener().open_or_new_unless(table, unopened).await?;
        let schema = existing
            .as_ref()
            .map(|t| arrow_schema(table, t))
            .transpose()?;
        let folders = schema.as_deref().map_or(Folders::SourceFile, Folders::of);
        Ok(OpenedForWrite {
            handle,
            existing,
            schema,
            folders,
        })
    }

    /// Replaces the rows of `key` with `batch` (creating the table when needed) in
    /// one commit; a plain append when no file can hold rows of the batch. Creates and
    /// appends take the direct paths ([`Opener::open_unloaded`] first, then
    /// [`WriteJob::direct`]), a replace [`WriteJob::rewrite`].
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
        let opened = self.open_for_write(table, unopened).await?;
        let batch = match &opened.schema {
            Some(schema) => fit::cast_to_table(table, batch, schema)?,
            None => batch,
        };
        let files = match &opened.existing {
            Some(t) => batch_files(t, key, opened.folders),
            None => BatchFiles::None,
        };
        // A new table, or one without rows of this batch: the direct create or append.
        let rows = files.may_hold().then(|| BatchRows::of(key, opened.folders));
        let job = WriteJob {
            committer: *self,
            table,
            handle: &opened.handle,
            batches: std::slice::from_ref(&batch),
            key,
            files,
            rows,
        };
        let done = job.commit(&DIRECT_OR_REWRITE, opened.existing).await?;
        Ok(done.committed)
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
        let started = std::time::Instant::now();
        let unopened = match self
            .replace_parts_unloaded(table, &parts, key, write)
            .await?
        {
            Ok(written) => return Ok((written, None)),
            Err(why) => why,
        };
        let opened = self.open_for_write(table, unopened).await?;
        let fitted = fit_parts(table, &parts, opened.schema);
        if fitted.batches.is_empty() {
            return Ok(((Committed::default(), fitted.outcomes), None));
        }
        let batches = fit::widen(table, &fitted.batches)?;
        let files = match &opened.existing {
            Some(t) if write == Write::Replace => batch_files(t, key, opened.folders),
            _ => BatchFiles::None,
        };
        // A plain append (schemas merged) for a later slice of a topic whose first slice
        // already replaced its rows, or a table without rows of this batch.
        let rows = files
            .may_hold()
            .then(|| BatchRows::of_topics(key, &fitted.topics, opened.folders));
        let job = WriteJob {
            committer: *self,
            table,
            handle: &opened.handle,
            batches: &batches,
            key,
            files,
            rows,
        };
        let done = job.commit(&Strategy::ALL, opened.existing).await?;
        done.debug_log(table, started);
        Ok(((done.committed, fitted.outcomes), done.written))
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

    /// Creates the table with the schema of `batches` and no rows, through deltalake's
    /// create (which sets the protocol features their column types need; with a variant
    /// column, over [`new_table_protocol`]'s), with the table properties; the table as
    /// it is then (another writer's, if it created it first).
    pub(super) async fn create_empty(
        &self,
        table: &TableName,
        handle: &DeltaTable,
        batches: &[RecordBatch],
    ) -> Result<DeltaTable> {
        let delta = |e| Error::delta(table.as_str(), "create", e);
        self.storage.ensure_local_dir(table)?;
        let Some(first) = batches.first() else {
            return Err(delta(DeltaTableError::Generic("nothing to write".into())));
        };
        let schema = super::shape::merged_schema(&first.schema(), batches);
        let kernel = super::shape::kernel_schema(schema.as_ref())
            .map_err(|e| Error::arrow(table.as_str(), e))?;
        // A variant column: the protocol bronze's own create writes (Spark's features
        // listed beside `variantType`); deltalake adds what other columns need.
        let variants = schema
            .fields()
            .iter()
            .any(|f| crate::column_types::is_variant(f.data_type()));
        let protocol = match variants {
            true => Some(deltalake::kernel::Action::Protocol(
                new_table_protocol(true).map_err(|e| delta(e.into()))?,
            )),
            false => None,
        };
        let created = handle
            .create()
            .with_columns(kernel.fields().cloned())
            .with_actions(protocol)
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
        use deltalake::kernel::{Action, new_metadata};

        let Some(first) = batches.first() else {
            return Ok(Created::NotApplicable);
        };
        let schema = super::shape::merged_schema(&first.schema(), batches);
        let variant =
            |f: &arrow::datatypes::FieldRef| crate::column_types::is_variant(f.data_type());
        if !schema
            .fields()
            .iter()
            .all(|f| plain_type(f.data_type()) || variant(f))
        {
            return Ok(Created::NotApplicable);
        }
        let variants = schema.fields().iter().any(variant);
        let conformed: Vec<RecordBatch> = batches
            .iter()
            .map(|b| super::shape::conform(b, &schema))
            .collect::<std::result::Result<_, _>>()?;
        let batches = conformed.as_slice();
        let kernel_schema = super::shape::kernel_schema(schema.as_ref())?;
        let configuration: Vec<(String, String)> = self
            .storage
            .table_properties(key.is_some())
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect();
        let metadata = new_metadata(&kernel_schema, Vec::<String>::new(), configuration)?;
        let protocol = new_table_protocol(variants)?;
        // A new table's configuration sets no data-skipping property: statistics for the
        // kernel's default number of leading columns (32).
        let layout = FileLayout::new_table(schema);
        let log_store = handle.log_store();
        let notes = CommitNotes::of(self.txn(key));
        let (adds, c, properties) =
            write_data_files(self.storage, &log_store, layout, batches, notes).await?;
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
        let layout = FileLayout {
            stats: duties.stats_columns(StatsColumns::of(snapshot), &first.schema()),
            schema: first.schema(),
            mapping: duties.mapping.as_ref(),
        };
        let log_store = t.log_store();
        let notes = CommitNotes::of(self.txn(key));
        let (adds, mut c, properties) =
            write_data_files(self.storage, &log_store, layout, batches, notes).await?;
        let pending = Pending::of(&adds, &[]);
        let entry = LogEntry {
            properties,
            actions: adds.into_iter().map(Action::Add).collect(),
            copies: false,
            operation: DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        };
        let at = PlannedOn {
            t,
            snapshot,
            duties: &duties,
        };
        let commit = commit_on(at, entry, pending);
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
        let job = WriteJob {
            committer: *self,
            table,
            handle: &handle,
            batches: std::slice::from_ref(&batch),
            key,
            files: BatchFiles::None,
            rows: None,
        };
        let done = job.commit(&DIRECT_OR_REWRITE, existing).await?;
        Ok(done.committed)
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
        let layout = FileLayout::new_table(Arc::clone(&u.schema));
        let notes = CommitNotes::of(self.txn(Some(key)));
        let (adds, mut c, properties) =
            write_data_files(self.storage, &u.log_store, layout, batches, notes).await?;
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

/// What [`Committer::open_for_write`] opened: the table's handle, the table when it
/// exists, its schema, and how its rows tell their folder.
struct OpenedForWrite {
    handle: DeltaTable,
    existing: Option<DeltaTable>,
    schema: Option<SchemaRef>,
    folders: Folders,
}

/// A commit strategy: each one commits a [`WriteJob`] on the table as it is, or
/// hands the table back when it does not apply ([`Tried`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Strategy {
    /// [`WriteJob::whole_files`]: the batch's files removed whole, the rows added.
    WholeFiles,
    /// [`WriteJob::direct`]: a create or an append, nothing read back.
    Direct,
    /// [`WriteJob::rewrite`]: the files that mix the batch's rows with others
    /// rewritten; applies always.
    Rewrite,
}

impl Strategy {
    /// Every strategy, cheapest first.
    const ALL: [Strategy; 3] = [Strategy::WholeFiles, Strategy::Direct, Strategy::Rewrite];

    /// Its name in the debug log.
    fn name(self) -> &'static str {
        match self {
            Strategy::WholeFiles => "whole files",
            Strategy::Direct => "direct",
            Strategy::Rewrite => "rewrite",
        }
    }
}

/// The strategies of a write of one topic's rows ([`Committer::replace`],
/// [`Committer::append`]): whole files are not tried, only `replace_parts` removes them.
const DIRECT_OR_REWRITE: [Strategy; 2] = [Strategy::Direct, Strategy::Rewrite];

/// What a commit strategy did.
pub(super) enum Tried {
    /// Committed; the table for the maintenance after it, if it needs any.
    Done(Committed, Option<WrittenTable>),
    /// Not a case for the strategy: nothing written; the table as it is, if any.
    NotApplicable(Option<DeltaTable>),
}

/// A commit by [`WriteJob::commit`]: what it committed, by which strategy, and when
/// that strategy's turn came (for the debug log of its timing).
pub(super) struct CommittedBy {
    pub(super) committed: Committed,
    pub(super) written: Option<WrittenTable>,
    pub(super) strategy: Strategy,
    pub(super) ready: std::time::Instant,
}

impl CommittedBy {
    /// Logs at debug level how long the commit of `table` took to open and fit (from
    /// `started` until its strategy's turn) and to commit.
    fn debug_log(&self, table: &TableName, started: std::time::Instant) {
        let open_and_fit_us = (self.ready - started).as_micros() as u64;
        let us = self.ready.elapsed().as_micros() as u64;
        match self.strategy {
            Strategy::Rewrite => {
                tracing::debug!(table = %table, open_and_fit_us, rewrite_us = us, "committed")
            }
            strategy => tracing::debug!(
                table = %table,
                open_and_fit_us,
                commit_us = us,
                strategy = strategy.name(),
                "committed"
            ),
        }
    }
}

/// One write of a batch's rows to one table, what every commit strategy takes: the
/// table and its handle, the rows (in the table's schema as fitted), the batch, the
/// files of the table that may hold its rows, and which of its rows the write replaces.
pub(super) struct WriteJob<'w> {
    pub(super) committer: Committer<'w>,
    pub(super) table: &'w TableName,
    pub(super) handle: &'w DeltaTable,
    pub(super) batches: &'w [RecordBatch],
    pub(super) key: &'w BatchKey,
    /// The table's files that may hold rows of the batch.
    pub(super) files: BatchFiles,
    /// The rows of the batch the write replaces; `None`: it appends.
    pub(super) rows: Option<BatchRows<'w>>,
}

impl WriteJob<'_> {
    /// Commits by the first of `strategies` that applies to `existing` (the table, if
    /// it exists); they end with [`Strategy::Rewrite`], which applies always.
    pub(super) async fn commit(
        &self,
        strategies: &[Strategy],
        mut existing: Option<DeltaTable>,
    ) -> Result<CommittedBy> {
        let cheaper_ready = std::time::Instant::now();
        for &strategy in strategies {
            let ready = match strategy {
                Strategy::Rewrite => std::time::Instant::now(),
                _ => cheaper_ready,
            };
            existing = match self.by(strategy, existing).await? {
                Tried::Done(committed, written) => {
                    return Ok(CommittedBy {
                        committed,
                        written,
                        strategy,
                        ready,
                    });
                }
                Tried::NotApplicable(existing) => existing,
            };
        }
        Err(Error::delta(
            self.table.as_str(),
            "write",
            DeltaTableError::Generic("no commit strategy applies".into()),
        ))
    }

    /// The write committed by `strategy`.
    async fn by(&self, strategy: Strategy, existing: Option<DeltaTable>) -> Result<Tried> {
        match strategy {
            Strategy::WholeFiles => self.whole_files(existing).await,
            Strategy::Direct => self.direct(existing).await,
            Strategy::Rewrite => self.rewrite(existing).await,
        }
    }

    /// What the write does with the batch's rows the table holds.
    fn write(&self) -> Write {
        match self.rows {
            Some(_) => Write::Replace,
            None => Write::Append,
        }
    }

    /// [`WriteJob::replace_whole_files`] of `existing` when its files holding the
    /// batch's rows are [`BatchFiles::Whole`] and that applies.
    pub(super) async fn whole_files(&self, existing: Option<DeltaTable>) -> Result<Tried> {
        match (existing, &self.files) {
            (Some(t), BatchFiles::Whole(whole)) => match self.replace_whole_files(&t, whole).await?
            {
                Some((c, written)) => Ok(Tried::Done(c, Some(written))),
                None => Ok(Tried::NotApplicable(Some(t))),
            },
            (existing, _) => Ok(Tried::NotApplicable(existing)),
        }
    }

    /// The direct paths, nothing read back: a new table is created with the rows
    /// ([`Committer::create_with_files`]); an existing one gets them appended for a
    /// [`Write::Append`] when they have the table's schema ([`Committer::append_files`]).
    /// Otherwise [`Tried::NotApplicable`] hands back the table for
    /// [`WriteJob::rewrite`] (loaded anew when another writer created it meanwhile).
    pub(super) async fn direct(&self, existing: Option<DeltaTable>) -> Result<Tried> {
        let (table, batches, key) = (self.table, self.batches, Some(self.key));
        let Some(t) = existing else {
            self.committer.storage.ensure_local_dir(table)?;
            let created = self
                .committer
                .create_with_files(self.handle, batches, key)
                .await
                .map_err(|e| Error::delta(table.as_str(), "write", e))?;
            return match created {
                // A table with one commit has nothing to maintain: no state loaded.
                Created::Committed(c) => Ok(Tried::Done(c, None)),
                // Another writer created it meanwhile: the rows go to it as it is now
                // (schemas merged). The files written for the lost create stay
                // unreferenced until a VACUUM.
                Created::Raced => {
                    tracing::info!(table = %table, "table created by another writer meanwhile; appending to it");
                    Ok(Tried::NotApplicable(
                        self.committer.opener().open(table).await?,
                    ))
                }
                Created::NotApplicable => Ok(Tried::NotApplicable(None)),
            };
        };
        if self.write() == Write::Replace || same_schema(table, &t, batches)?.is_none() {
            return Ok(Tried::NotApplicable(Some(t)));
        }
        let (c, written) = self
            .committer
            .append_files(&t, batches, key)
            .await
            .map_err(|e| Error::delta(table.as_str(), "write", e))?;
        Ok(Tried::Done(c, Some(written)))
    }

    /// The path for what the direct ones do not take (schema changes, types outside the
    /// flattener's, replaces of files that mix batches or topics): on an existing table
    /// [`Rewriter::rewrite`] replaces the rows of the batch the write replaces (or
    /// appends, schemas merged); a new table is created first
    /// ([`Committer::create_empty`]) and then written to. Applies always.
    pub(super) async fn rewrite(&self, existing: Option<DeltaTable>) -> Result<Tried> {
        let t = match existing {
            Some(t) => t,
            None => {
                self.committer
                    .create_empty(self.table, self.handle, self.batches)
                    .await?
            }
        };
        let what = Rewrite {
            rows: self.rows,
            txn: self.committer.txn(Some(self.key)),
        };
        let (c, written) = self
            .committer
            .storage
            .rewriter()
            .rewrite(self.table, &t, self.batches, what)
            .await?;
        Ok(Tried::Done(c, Some(written)))
    }

    /// The replace of the batch's rows of its topics without reading a file, for a
    /// table whose files holding the batch hold only it and topics they name
    /// ([`BatchFiles::Whole`]): those files go whole and the new files are added, in one
    /// commit recording the rows' predicate ([`BatchRows::sql`]). `Ok(None)` (nothing
    /// written) when a file of the batch holds a topic written now beside one that is
    /// not (its other rows must stay) or the rows need a schema change: the caller's
    /// [`WriteJob::rewrite`] handles those.
    async fn replace_whole_files(
        &self,
        t: &DeltaTable,
        whole: &[WholeFile],
    ) -> Result<Option<(Committed, WrittenTable)>> {
        let delta = |e| Error::delta(self.table.as_str(), "write", e);
        let Some(rows) = self.rows else {
            return Ok(None);
        };
        let Some((removes, removed_rows)) = rows.topics().and_then(|t| whole_removes(whole, t))
        else {
            return Ok(None);
        };
        let Some(schema) = same_schema(self.table, t, self.batches)? else {
            return Ok(None);
        };
        let snapshot = t.snapshot().map_err(delta)?;
        let duties = Duties::read(t, snapshot).await.map_err(delta)?;
        duties.check_rows(self.batches).map_err(delta)?;
        let layout = FileLayout {
            stats: duties.stats_columns(StatsColumns::of(snapshot), &schema),
            schema,
            mapping: duties.mapping.as_ref(),
        };
        let notes = CommitNotes {
            txn: self.committer.txn(Some(self.key)),
            read_version: Some(snapshot.version()),
            removed: Some((removes.len() as u64, removed_rows)),
            rewritten_rows: 0,
            blind_append: false,
        };
        let storage = self.committer.storage;
        let (adds, mut c, properties) =
            write_data_files(storage, &t.log_store(), layout, self.batches, notes)
                .await
                .map_err(delta)?;
        let pending = Pending::of(&adds, &removes);
        let entry = overwrite(properties, removes, adds, rows.sql());
        let at = PlannedOn {
            t,
            snapshot,
            duties: &duties,
        };
        let commit = commit_on(at, entry, pending);
        let written = storage.clock.commit(&mut c, commit).await.map_err(delta)?;
        Ok(Some((c, written)))
    }
}

/// The log entry of a write that removes the files of `removes` whole and adds those of
/// `adds`: an overwrite of the rows `predicate` selects.
fn overwrite(
    properties: deltalake::kernel::transaction::CommitProperties,
    removes: Vec<deltalake::kernel::Remove>,
    adds: Vec<deltalake::kernel::Add>,
    predicate: String,
) -> LogEntry {
    use deltalake::kernel::Action;
    let mut actions: Vec<Action> = removes.into_iter().map(Action::Remove).collect();
    actions.extend(adds.into_iter().map(Action::Add));
    LogEntry {
        properties,
        actions,
        copies: false,
        operation: deltalake::protocol::DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: None,
            predicate: Some(predicate),
        },
    }
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

/// The error of a part whose payload layout is not its existing table's: whole payloads
/// (a `payload` column of type `variant` for the payload's root: the topic's payload mode
/// is `variant`) for a table that has no such column (its payloads were flattened), or
/// flattened rows for a table that has one.
fn layout_mismatch(table: &TableName, part: &Part, schema: Option<&Schema>) -> Option<Error> {
    let schema = schema?;
    let rows = part.batches.first()?.schema();
    // The root's path is recorded as `""`; a table written before paths were recorded has
    // none, and only a whole payload is named `payload` there.
    let whole = |s: &Schema| {
        s.field_with_name(naming::VARIANT_PAYLOAD).is_ok_and(|f| {
            crate::column_types::is_variant(f.data_type())
                && f.metadata()
                    .get(crate::flatten::PATH_META)
                    .is_none_or(String::is_empty)
        })
    };
    let child_rows = rows.column_with_name(naming::PARENT_ID).is_some();
    let (rows_whole, table_whole) = (whole(&rows), whole(schema));
    (rows_whole != table_whole && !child_rows).then(|| Error::PayloadLayout {
        table: table.to_string(),
        topic: part.topic.as_str().into(),
        to_variant: rows_whole,
    })
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
        let FittedPart {
            mut outcome,
            batches,
            schema: part_schema,
        } = fit_part(table, part, schema.clone(), evolution);
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

/// One part fitted by [`fit_part`].
struct FittedPart {
    /// What became of it (its error, if refused: then `batches` and `schema` are
    /// partial).
    outcome: PartOutcome,
    /// Its rows, slice by slice.
    batches: Vec<RecordBatch>,
    /// The table's schema after it.
    schema: Option<SchemaRef>,
}

/// Fits `part`'s slices to the table's `schema` (`None`: a new table) one after the
/// other, each against the schema the ones before it leave, with `evolution`; the first
/// slice refused stops it.
fn fit_part(
    table: &TableName,
    part: &Part,
    schema: Option<SchemaRef>,
    evolution: crate::config::Evolution,
) -> FittedPart {
    let mut outcome = PartOutcome {
        rows: 0,
        added: Vec::new(),
        rescued: 0,
        error: kind_mismatch(table, part, schema.as_deref())
            .or_else(|| layout_mismatch(table, part, schema.as_deref())),
    };
    let mut batches = Vec::with_capacity(part.batches.len());
    let mut schema = schema;
    for batch in part.batches.iter().filter(|_| outcome.error.is_none()) {
        match fit::to_table(table, batch.clone(), schema.as_deref(), evolution) {
            Ok(c) => {
                schema = Some(fit::merged_schema(schema.as_deref(), &c.batch));
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
    FittedPart {
        outcome,
        batches,
        schema,
    }
}

/// The protocol of a new table bronze creates. Reader 1 / writer 2: what delta-rs gives a
/// table with bronze's properties and column types (no table feature applies). A
/// variant column needs `variantType`, so table features: writer 2's own (`appendOnly`,
/// `invariants`: the lineage columns are NOT NULL) are then listed beside it, as Spark
/// lists them (it refuses a table whose NOT NULL columns lack `invariants`).
fn new_table_protocol(
    variants: bool,
) -> std::result::Result<deltalake::kernel::Protocol, serde_json::Error> {
    serde_json::from_value(match variants {
        false => serde_json::json!({
            "minReaderVersion": 1,
            "minWriterVersion": 2,
        }),
        true => serde_json::json!({
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["variantType"],
            "writerFeatures": ["appendOnly", "invariants", "variantType"],
        }),
    })
}
