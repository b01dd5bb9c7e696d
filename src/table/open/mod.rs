//! Opening a schema's tables ([`Opener`]): loaded with their file list, from their log
//! alone for an append ([`unloaded`]), ahead of their writes while the batch is parsed
//! ([`preopen`]), and kept loaded from one of a run's commits to a table for its next
//! write ([`Opener::keep_warm`]).

use std::collections::HashMap;
use std::sync::Arc;

use deltalake::{DeltaTable, DeltaTableError};

use super::{RunMode, Storage, Work, Write};
#[cfg(doc)]
use super::{Seen, Txns};
use crate::batch::BatchKey;
use crate::error::{Error, Result};
use crate::naming::TableName;

mod preopen;
mod unloaded;

pub(crate) use preopen::{AbortOnDrop, BatchTables, Preopened};
use preopen::{Ahead, Open};
pub(crate) use unloaded::BATCH_TXN_PROPERTY;
pub(super) use unloaded::{Unloaded, Unopened};

/// The tables a run opened ahead of their writes or kept from them, shared by the run's
/// clones of its [`Storage`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Opened {
    /// Opened ahead of their first write ([`Opener::preopen`]).
    pub(crate) ahead: Preopened,
    /// Tables this run will write again, as loaded at their last commit
    /// ([`Opener::keep_warm`]).
    warm: Arc<parking_lot::Mutex<HashMap<TableName, DeltaTable>>>,
}

/// Opens the tables of a [`Storage`]: through the run's [`Opened`] tables first, else
/// by reading their log.
#[derive(Clone, Copy)]
pub(crate) struct Opener<'a> {
    storage: &'a Storage,
}

impl<'a> Opener<'a> {
    pub(super) fn new(storage: &'a Storage) -> Self {
        Opener { storage }
    }
}

impl Opener<'_> {
    /// The table, loaded; `Ok(None)` when there is no Delta table there yet.
    pub(crate) async fn open(&self, table: &TableName) -> Result<Option<DeltaTable>> {
        Ok(self.open_or_new(table).await?.1)
    }

    /// `(unloaded handle, loaded table if it exists)`; a table [`Opener::preopen`]
    /// loaded ahead is taken from there.
    pub(in crate::table) async fn open_or_new(
        &self,
        table: &TableName,
    ) -> Result<(DeltaTable, Option<DeltaTable>)> {
        if let Some(Ahead::Loaded(opened)) =
            self.storage.opened.ahead.take(table, Open::Loaded).await
        {
            return opened;
        }
        if let Some(opened) = self.open_warm(table).await {
            return Ok(opened);
        }
        self.open_or_new_now(table).await
    }

    /// Keeps `t`, as loaded for or after a commit of this run, for the run's next write
    /// to the table: that write reads only the log entries added since
    /// ([`Opener::open_or_new`]) rather than the whole log again. Over the memory budget
    /// every topic commits to the child tables it shares with the others, and each
    /// commit read the whole log of a table whose versions grew with the topics.
    pub(crate) fn keep_warm(&self, table: &TableName, t: &DeltaTable) {
        if t.version().is_some() {
            self.storage
                .opened
                .warm
                .lock()
                .insert(table.clone(), t.clone());
        }
    }

    /// Whether [`Opener::keep_warm`] holds `table`.
    pub(in crate::table) fn is_warm(&self, table: &TableName) -> bool {
        self.storage.opened.warm.lock().contains_key(table)
    }

    /// The table [`Opener::keep_warm`] holds, brought up to date with the commits made
    /// since (by this run or any other writer); `None` when there is none or it cannot
    /// be brought up to date (then the log is read again).
    async fn open_warm(&self, table: &TableName) -> Option<(DeltaTable, Option<DeltaTable>)> {
        let mut t = self.storage.opened.warm.lock().remove(table)?;
        match self
            .storage
            .clock
            .time(Work::Open, t.update_incremental(None))
            .await
        {
            Ok(()) => Some((t.clone(), Some(t))),
            Err(e) => {
                tracing::debug!(table = %table, error = %e, "kept table not brought up to date; reading its log again");
                None
            }
        }
    }

    /// [`Opener::open_or_new`], reading the log now.
    pub(in crate::table) async fn open_or_new_now(
        &self,
        table: &TableName,
    ) -> Result<(DeltaTable, Option<DeltaTable>)> {
        self.storage
            .clock
            .time(Work::Open, self.load_now(table))
            .await
    }

    /// [`Opener::open_or_new_now`]'s work.
    async fn load_now(&self, table: &TableName) -> Result<(DeltaTable, Option<DeltaTable>)> {
        let mut t = self.storage.handle(table)?;
        if self.storage.local_log_missing(table) {
            return Ok((t, None));
        }
        match t.load().await {
            Ok(()) => Ok((t.clone(), Some(t))),
            Err(DeltaTableError::NotATable(_)) => Ok((t, None)),
            Err(e) => Err(Error::delta(table.as_str(), "open", e)),
        }
    }

    /// [`Opener::open_or_new`], without a second look at a log found empty
    /// ([`Unopened::Absent`]: no table yet, the caller creates it).
    pub(in crate::table) async fn open_or_new_unless(
        &self,
        table: &TableName,
        unopened: Unopened,
    ) -> Result<(DeltaTable, Option<DeltaTable>)> {
        if unopened != Unopened::Absent {
            return self.open_or_new(table).await;
        }
        Ok((self.storage.handle(table)?, None))
    }

    /// A handle to write a table: loaded when it exists, else unloaded (the write creates
    /// it). Local catalogs get the table folder created.
    pub(crate) async fn create_handle(&self, table: &TableName) -> Result<DeltaTable> {
        let (handle, existing) = self.open_or_new(table).await?;
        match existing {
            Some(t) => Ok(t),
            None => {
                self.storage.ensure_local_dir(table)?;
                Ok(handle)
            }
        }
    }

    /// Opens `table` for an append of `key`'s rows without listing its files (only the
    /// log's protocol, metadata and `txn` actions are read: less than half the CPU of a
    /// full load, BENCHMARKS.md), when that is safe:
    ///
    /// - the table holds no rows of `key` (not checked for [`Write::Append`]: the rows
    ///   are appended anyway): bronze created it with [`BATCH_TXN_PROPERTY`], the run
    ///   found no record of the batch in `_run_control` and no lease a run of it left
    ///   ([`Seen::Never`] in `run`), and the log has no `txn` of it; when writes record
    ///   the `txn`s in the tables ([`Txns::InTables`]), only while none expires, so that
    ///   the log holds one of every batch with rows in the table;
    /// - the kernel may write to the table, and nothing about it asks more of a writer
    ///   than data files with statistics: no column mapping, row tracking, in-commit
    ///   timestamps, constraints, invariants or generated columns, default statistics
    ///   columns;
    /// - the next commit is due no checkpoint and no auto compaction check (those commits
    ///   take the loaded path, which runs them).
    ///
    /// Otherwise why not: the loaded path takes the table (and reports what is wrong),
    /// or creates it when [`Unopened::Absent`].
    ///
    /// A table [`Opener::preopen`] opened ahead is taken from there.
    pub(in crate::table) async fn open_unloaded(
        &self,
        table: &TableName,
        key: &BatchKey,
        write: Write,
        run: RunMode,
    ) -> std::result::Result<Unloaded, Unopened> {
        // A batch seen before has its `txn` in its tables: a replacing write would find
        // it there. An append of more rows needs no `txn` check.
        if run.seen.open_for(write) == Open::Loaded {
            return Err(Unopened::Other);
        }
        // Kept loaded from this run's last commit to it: reading its new log entries
        // costs less than the whole log this way reads.
        if self.is_warm(table) {
            return Err(Unopened::Other);
        }
        if let Some(Ahead::Unloaded(opened, _)) =
            self.storage.opened.ahead.take(table, Open::Unloaded).await
        {
            return opened;
        }
        self.open_unloaded_now(table, key, write, run).await
    }
}
