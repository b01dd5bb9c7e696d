//! Tables opened while the batch is fetched and parsed, so that a table's log reads
//! (checkpoint hint, listing, commits: three round trips on an object store) are off its
//! write's critical path.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use deltalake::DeltaTable;

use super::Opener;
use super::unloaded::{Unloaded, Unopened};
use crate::batch::BatchKey;
use crate::error::Result;
use crate::naming::{CORRUPT_TABLE, RUN_CONTROL_TABLE, TableName};
use crate::table::writable::{Look, Refusal, Removes, look};
use crate::table::{RunMode, Seen, Write};

/// A schema with more tables than this is not pre-opened ([`Opener::preopen`]): each
/// table costs 3 + (commits since its last checkpoint) GET requests, wasted on those the
/// batch does not write (a schema shared by many entities).
const MAX_PREOPEN: usize = 256;

/// A table opened ahead of its first write.
pub(super) enum Ahead {
    /// For an append from its log alone ([`Opener::open_unloaded`]), with what its
    /// protocol and metadata allow (`None`: its log could not be read).
    Unloaded(std::result::Result<Unloaded, Unopened>, Option<Look>),
    /// Loaded with its file list, for a replace of a batch seen before
    /// ([`Opener::open_or_new`]).
    Loaded(Result<(DeltaTable, Option<DeltaTable>)>),
}

/// How a write opens a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Open {
    /// From its log alone ([`Opener::open_unloaded`]).
    Unloaded,
    /// Loaded with its file list ([`Opener::open_or_new`]).
    Loaded,
}

/// A pre-open under way: how it opens the table, and its task.
struct Opening {
    open: Open,
    task: tokio::task::JoinHandle<Ahead>,
}

/// The tables [`Opener::preopen`] opened ahead of their writes, shared by a run's
/// clones of its [`crate::table::Storage`]. `None`: the table's pre-open was taken, or its write came
/// first (no pre-open starts after that).
#[derive(Clone, Default)]
pub(crate) struct Preopened {
    tables: Arc<parking_lot::Mutex<HashMap<TableName, Option<Opening>>>>,
    /// Told once the run's [`Opener::preopen`] has offered every table it will (its
    /// sender dropped), when one was started.
    offering: Arc<parking_lot::Mutex<Option<tokio::sync::watch::Receiver<()>>>>,
}

impl Preopened {
    /// A sender for the run's [`Opener::preopen`] to hold while it offers tables:
    /// [`Preopened::offered`] waits until it is dropped.
    pub(crate) fn offering(&self) -> tokio::sync::watch::Sender<()> {
        let (offering, offered) = tokio::sync::watch::channel(());
        *self.offering.lock() = Some(offered);
        offering
    }

    /// Waits until the pre-open (if one was started) has offered every table it will, so
    /// that whether a table's pre-open ran does not depend on timing.
    async fn offered(&self) {
        let offered = self.offering.lock().clone();
        if let Some(mut offered) = offered {
            // Err once the sender is dropped: every offer made.
            while offered.changed().await.is_ok() {}
        }
    }

    /// Starts `start` for `table` unless the table was opened or taken already.
    fn offer(
        &self,
        table: TableName,
        open: Open,
        start: impl FnOnce() -> tokio::task::JoinHandle<Ahead>,
    ) {
        if let Entry::Vacant(v) = self.tables.lock().entry(table) {
            v.insert(Some(Opening {
                open,
                task: start(),
            }));
        }
    }

    /// The pre-open of `table` that opens it the `open` way, awaited, if one was
    /// started and not taken. A table asked for first is claimed: no pre-open starts for
    /// it afterwards (it would read a version the write is about to pass).
    pub(super) async fn take(&self, table: &TableName, open: Open) -> Option<Ahead> {
        let task = {
            let mut tables = self.tables.lock();
            match tables.entry(table.clone()) {
                Entry::Vacant(v) => {
                    v.insert(None);
                    None
                }
                Entry::Occupied(mut o) => match o.get() {
                    Some(opening) if opening.open == open => o.get_mut().take(),
                    _ => None,
                },
            }
        };
        // A pre-open that panicked or was aborted: the write opens the table itself.
        task?.task.await.ok()
    }

    /// Leaves `ahead`, opened the `open` way for `table`'s first write, for that write to
    /// take, in place of any pre-open of the table.
    pub(super) fn put(&self, table: TableName, open: Open, ahead: Ahead) {
        let opening = Opening {
            open,
            task: tokio::spawn(async move { ahead }),
        };
        if let Some(Some(replaced)) = self.tables.lock().insert(table, Some(opening)) {
            replaced.task.abort();
        }
    }

    /// Whether a pre-open of `table` was started and not taken.
    #[cfg(test)]
    pub(in crate::table) fn waiting(&self, table: &TableName) -> bool {
        self.tables.lock().get(table).is_some_and(Option::is_some)
    }

    /// Stops the pre-opens no write took (the run is over), and starts no more.
    pub(crate) fn abort(&self) {
        let mut tables = self.tables.lock();
        for opening in tables.values_mut().filter_map(Option::take) {
            opening.task.abort();
        }
    }
}

impl std::fmt::Debug for Preopened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preopened")
            .field("tables", &self.tables.lock().len())
            .finish()
    }
}

/// Aborts a run's untaken pre-opens when dropped ([`Preopened::abort`]).
pub(crate) struct AbortOnDrop(pub(crate) Preopened);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The tables a batch writes by name, which [`Opener::refusals`] checks beside the
/// schema's others.
#[derive(Clone, Copy)]
pub(crate) struct BatchTables<'a> {
    /// Its topics' tables.
    pub(crate) topics: &'a [TableName],
    /// The tables a column type hint types a column of.
    pub(crate) hinted: &'a [TableName],
    /// Whether it writes `_corrupt_records` (it has corrupt lines).
    pub(crate) corrupt: bool,
}

impl Opener<'_> {
    /// Opens every table of the schema ahead of its write of `key`'s rows, in the
    /// background, from a listing of the schema's folder, once `landed` says the landing
    /// files are in (or its sender is gone): the batch's own requests go first, since its
    /// tables wait for its parse; the log reads then overlap the parse. For a batch never
    /// seen ([`Seen::Never`] in `run`), from the log alone
    /// ([`Opener::open_unloaded`]; a table that turns out to hold the batch's `txn` goes
    /// the loaded way, its commits already read by the run's commit-file cache); for a
    /// batch seen before, loaded with its file list. `_run_control` is always appended
    /// to, from its log alone.
    ///
    /// Each table's first write takes its result; a table written before its pre-open
    /// started is opened by the write, as without. `_offering` is held until every offer
    /// is made ([`Preopened::offering`]). A version another writer commits in
    /// between is found by the commit's put-if-absent, which then goes the checked way.
    /// Only for catalogs in an object store (a local log is read in microseconds) whose
    /// schema holds at most [`MAX_PREOPEN`] tables.
    pub(crate) fn preopen(
        &self,
        run: RunMode,
        key: BatchKey,
        landed: tokio::sync::watch::Receiver<bool>,
        offering: tokio::sync::watch::Sender<()>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let storage = self.storage.clone();
        async move {
            let opener = storage.opener();
            opener.preopen_tables(run, key, landed, offering).await;
        }
    }

    /// [`Opener::preopen`]'s work.
    async fn preopen_tables(
        &self,
        run: RunMode,
        key: BatchKey,
        mut landed: tokio::sync::watch::Receiver<bool>,
        _offering: tokio::sync::watch::Sender<()>,
    ) {
        if self.storage.root_store.is_none() {
            return;
        }
        let tables = match self.storage.schema_tables().await {
            Ok(tables) => tables,
            Err(e) => {
                tracing::debug!(error = %e, "no pre-open: the schema folder cannot be listed");
                return;
            }
        };
        if tables.len() > MAX_PREOPEN {
            tracing::debug!(
                tables = tables.len(),
                "no pre-open: more tables than a batch is likely to write"
            );
            return;
        }
        // Err: no landing fetch (a local landing folder), or it stopped.
        let _ = landed.wait_for(|done| *done).await;
        for table in tables {
            let write = first_write(&table);
            let open = run.seen.open_for(write);
            let (storage, key, name) = (self.storage.clone(), key.clone(), table.clone());
            self.storage.opened.ahead.offer(table, open, move || {
                tokio::spawn(async move {
                    let opener = storage.opener();
                    match open {
                        Open::Loaded => Ahead::Loaded(opener.open_or_new_now(&name).await),
                        Open::Unloaded => {
                            let (opened, look) =
                                opener.open_unloaded_looked(&name, &key, write, run).await;
                            Ahead::Unloaded(opened, look)
                        }
                    }
                })
            });
        }
    }

    /// The tables of the schema a `batch` may write that bronze will not write, each
    /// with why ([`refusal`]): its topic tables, the child tables (any topic may have
    /// their array), `_corrupt_records` when it has corrupt lines, and
    /// `_run_control`. Each table's log is read once (its protocol and metadata, or the
    /// whole table for a batch seen before), by its pre-open if one started
    /// ([`Opener::preopen`]), and the result is left for its write, so a table costs no
    /// more reads than without the check. A schema of more than
    /// [`MAX_PREOPEN`] tables has only its topic and system tables and the tables
    /// hints type a column of checked here (the others at their commit).
    pub(crate) async fn refusals(
        &self,
        batch: BatchTables<'_>,
        key: &BatchKey,
        run: RunMode,
        conflict: &(dyn Fn(&TableName, &Look) -> Option<Refusal> + Sync),
    ) -> Vec<(TableName, Refusal)> {
        use futures::StreamExt as _;

        let BatchTables {
            topics,
            hinted,
            corrupt,
        } = batch;
        self.storage.opened.ahead.offered().await;
        let mut tables = self.storage.schema_tables().await.unwrap_or_default();
        if tables.len() > MAX_PREOPEN {
            tables.clear();
        }
        for t in topics.iter().chain(hinted).cloned().chain([
            TableName::system(CORRUPT_TABLE),
            TableName::system(RUN_CONTROL_TABLE),
        ]) {
            if !tables.contains(&t) {
                tables.push(t);
            }
        }
        let named = |t: &TableName| {
            topics.contains(t) || t.as_str() == RUN_CONTROL_TABLE || t.as_str() == CORRUPT_TABLE
        };
        let looks: Vec<(TableName, Option<Look>)> = futures::stream::iter(tables)
            .map(|table| async move {
                let look = self.look_ahead(&table, key, run, named(&table)).await;
                (table, look)
            })
            .buffer_unordered(8)
            .collect()
            .await;
        let mut refused: Vec<(TableName, Refusal)> = looks
            .into_iter()
            .filter_map(|(table, look)| {
                let look = look?;
                // `_corrupt_records` takes the batch's corrupt lines, and on a rerun loses
                // its earlier ones even when it has none now.
                let corrupt_written = corrupt || run.seen == super::super::Seen::Before;
                let written = topics.contains(&table)
                    || table.as_str() == RUN_CONTROL_TABLE
                    || (table.as_str() == CORRUPT_TABLE && corrupt_written)
                    || look.child;
                let refusal = look.refusal.clone().filter(|_| written);
                Some((table.clone(), refusal.or_else(|| conflict(&table, &look))?))
            })
            .collect();
        refused.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        refused
    }

    /// Says what `table`'s protocol and metadata allow; `None` when it does not exist or
    /// cannot be read (its write then says why). Its pre-open is taken if one started,
    /// else a table the batch `writes` by name is opened as its first write will open it
    /// (from its log alone, or loaded for a batch seen before), any other (a child table,
    /// or another topic's) from its log alone; what was opened the way the write opens
    /// it is left for the write.
    async fn look_ahead(
        &self,
        table: &TableName,
        key: &BatchKey,
        run: RunMode,
        writes: bool,
    ) -> Option<Look> {
        let write = first_write(table);
        // How the table's write (and its pre-open) opens it.
        let open = run.seen.open_for(write);
        let (ahead, kept) = match self.storage.opened.ahead.take(table, open).await {
            Some(ahead) => (ahead, true),
            None if open == Open::Loaded && writes => {
                (Ahead::Loaded(self.open_or_new_now(table).await), true)
            }
            None => {
                let (opened, look) = self.open_unloaded_looked(table, key, write, run).await;
                (Ahead::Unloaded(opened, look), open == Open::Unloaded)
            }
        };
        let look = match &ahead {
            Ahead::Unloaded(_, look) => look.clone(),
            Ahead::Loaded(Ok((t, _))) => t
                .snapshot()
                .ok()
                .map(|s| look(s.snapshot().table_configuration(), run.seen.removes())),
            Ahead::Loaded(Err(_)) => None,
        };
        if kept {
            self.storage.opened.ahead.put(table.clone(), open, ahead);
        }
        look
    }
}

impl Seen {
    /// How a `write` opens a table: loaded for a replace when the table may hold rows of
    /// the batch ([`Seen::Before`]), else from its log alone.
    pub(super) fn open_for(self, write: Write) -> Open {
        if write == Write::Replace && self == Seen::Before {
            Open::Loaded
        } else {
            Open::Unloaded
        }
    }

    /// Whether the run's writes may remove files: a rerun of a batch that may have rows
    /// in its tables ([`Seen::Before`]) replaces them.
    pub(super) fn removes(self) -> Removes {
        match self {
            Seen::Never => Removes::Nothing,
            Seen::Before => Removes::Files,
        }
    }
}

/// What a run's first write to `table` does with the batch's rows there:
/// `_run_control` is only appended to, the other tables replace them.
fn first_write(table: &TableName) -> Write {
    if table.as_str() == RUN_CONTROL_TABLE {
        Write::Append
    } else {
        Write::Replace
    }
}
