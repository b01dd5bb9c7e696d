//! Log entries: a commit put at the version after the one it was planned on, only if
//! absent (a taken version means another writer came first), and what a direct commit
//! records beside its rows.

use deltalake::{DeltaTable, DeltaTableError};

use super::planned::{LogEntry, PlannedOn};
use super::put::put_entry;
use super::stats::{Pending, WrittenTable};
use crate::batch::BatchKey;

/// `properties` with the `txn` actions of a write of `key`'s rows, one per folder
/// ([`BatchKey::app_ids`]): their version is the write's time in milliseconds, so it
/// grows with every rerun.
pub(super) fn with_batch_txns(
    mut properties: deltalake::kernel::transaction::CommitProperties,
    key: &BatchKey,
) -> deltalake::kernel::transaction::CommitProperties {
    let now = chrono::Utc::now().timestamp_millis();
    for app_id in key.app_ids() {
        properties = properties.with_application_transaction(
            deltalake::kernel::Transaction::new_with_last_update(app_id, now, Some(now)),
        );
    }
    properties
}

/// Commits `entry` on `at`'s snapshot. delta-rs's post-commit step replays the log
/// to the new version (one more listing and read of the log, and the files listed again
/// when next asked for), then writes a checkpoint when one is due (expired log entries
/// are left to `bronze maintain`: [`super::commit_properties`]). Only a commit that is
/// due a checkpoint needs it; otherwise the
/// state from before the commit serves the maintenance, with `pending` alongside. On an
/// object store that is 2-3 requests less on each table's write.
///
/// A table deltalake's commit refuses (`duties.planned`) takes
/// [`super::planned::commit_planned`] instead, and a checkpoint written here when due.
pub(super) async fn commit_on(
    at: PlannedOn<'_>,
    entry: LogEntry,
    pending: Pending,
) -> std::result::Result<(u64, WrittenTable), DeltaTableError> {
    use deltalake::kernel::transaction::TableReference as _;
    use deltalake::table::config::TablePropertiesExt as _;
    let PlannedOn {
        t,
        snapshot,
        duties,
    } = at;
    // What delta-rs's post-commit step checks (its default when unset).
    let checkpoint_interval = snapshot.config().checkpoint_interval().get();
    super::planned::refuse_unwritable(snapshot, &entry.actions)?;
    let checkpoints = Checkpoints {
        interval: checkpoint_interval,
    };
    if duties.planned {
        return planned_on(at, entry, pending, checkpoints).await;
    }
    // The version after the snapshot's, put only if absent: taken, another writer
    // committed since the snapshot, and delta-rs's own commit (which lists the log first,
    // one more round trip on every commit) checks for conflicts and retries.
    let next = snapshot.version() + 1;
    if !checkpoints.at(next) {
        if put_next(t, snapshot, &entry).await? {
            let written = WrittenTable {
                table: t.clone(),
                pending,
            };
            return Ok((next, written));
        }
        tracing::debug!(
            version = next,
            "version taken by another writer; committing with a conflict check"
        );
    }
    commit_checked(at, entry, pending, checkpoints).await
}

/// Every how many versions a table writes a checkpoint.
#[derive(Clone, Copy)]
struct Checkpoints {
    interval: u64,
}

impl Checkpoints {
    /// Whether a commit at `version` writes a checkpoint.
    fn at(self, version: u64) -> bool {
        (version + 1).is_multiple_of(self.interval)
    }
}

/// [`commit_on`] through delta-rs's commit, which checks for conflicts with the commits
/// since the snapshot and retries; the table loaded anew when a checkpoint is due.
async fn commit_checked(
    at: PlannedOn<'_>,
    entry: LogEntry,
    pending: Pending,
    checkpoints: Checkpoints,
) -> std::result::Result<(u64, WrittenTable), DeltaTableError> {
    use deltalake::kernel::transaction::CommitBuilder;
    let PlannedOn { t, snapshot, .. } = at;
    let post = CommitBuilder::from(entry.properties)
        .with_actions(entry.actions)
        .build(Some(snapshot), t.log_store(), entry.operation)
        .into_prepared_commit_future()
        .await?
        .await?;
    let version = post.version as u64;
    if checkpoints.at(version) {
        let finalized = post.await?;
        let mut written = t.clone();
        written.state = Some(finalized.snapshot);
        return Ok((version, WrittenTable::current(written)));
    }
    let written = WrittenTable {
        table: t.clone(),
        pending,
    };
    Ok((version, written))
}

/// [`commit_on`] of a table deltalake's commit refuses: [`super::planned::commit_planned`],
/// then a checkpoint when one is due.
async fn planned_on(
    at: PlannedOn<'_>,
    entry: LogEntry,
    pending: Pending,
    checkpoints: Checkpoints,
) -> std::result::Result<(u64, WrittenTable), DeltaTableError> {
    let version = super::planned::commit_planned(at, entry).await?;
    if checkpoints.at(version) {
        return Ok((version, checkpointed(at.t, version, pending).await));
    }
    let written = WrittenTable {
        table: at.t.clone(),
        pending,
    };
    Ok((version, written))
}

/// `t` loaded at `version` with a checkpoint written there (one is due); on failure, the
/// table as it was with what the commit changed `pending` (a checkpoint only speeds up
/// reads: the next due one is written).
async fn checkpointed(t: &DeltaTable, version: u64, pending: Pending) -> WrittenTable {
    let mut written = t.clone();
    let done = async {
        written.load_version(version).await?;
        deltalake::checkpoints::create_checkpoint(&written, None).await
    };
    match done.await {
        Ok(()) => WrittenTable::current(written),
        Err(e) => {
            tracing::warn!(version, error = %e, "checkpoint not written");
            WrittenTable {
                table: t.clone(),
                pending,
            }
        }
    }
}

/// Puts `entry` as the version after `snapshot`'s, only if absent:
/// `Ok(false)` (nothing committed) when another writer took it.
async fn put_next(
    t: &DeltaTable,
    snapshot: &deltalake::table::state::DeltaTableState,
    entry: &LogEntry,
) -> std::result::Result<bool, DeltaTableError> {
    use deltalake::kernel::transaction::CommitBuilder;
    let operation_id = uuid::Uuid::new_v4();
    let prepared = CommitBuilder::from(entry.properties.clone())
        .with_actions(entry.actions.clone())
        .with_operation_id(operation_id)
        .build(Some(snapshot), t.log_store(), entry.operation.clone())
        .into_prepared_commit_future()
        .await?;
    put_entry(
        &t.log_store(),
        snapshot.version() + 1,
        prepared.commit_or_bytes(),
        operation_id,
    )
    .await
}

/// What a direct commit records beside the rows and files it adds
/// ([`super::datafiles::write_data_files`]).
#[derive(Clone, Copy, Default)]
pub(super) struct CommitNotes<'a> {
    /// The batch whose `txn` it records (`None`: no `txn`), when its rows are the
    /// batch's and the run records `txn`s in the tables it writes
    /// ([`super::BATCH_TXN_PROPERTY`]).
    pub(super) txn: Option<&'a BatchKey>,
    /// The version it was planned on, for a commit that removes files
    /// ([`super::strict::StrictCommits`]).
    pub(super) read_version: Option<u64>,
    /// Files and rows it removes.
    pub(super) removed: Option<(u64, u64)>,
    /// Rows of removed files among the rows it writes (a rewrite keeps them).
    pub(super) rewritten_rows: u64,
    /// Whether it only adds files and read nothing to plan them (`isBlindAppend` in its
    /// `commitInfo`, as Spark's appends record: Spark's conflict check under
    /// WriteSerializable lets a concurrent UPDATE, DELETE or MERGE commit over it).
    pub(super) blind_append: bool,
}

impl<'a> CommitNotes<'a> {
    /// An append: a commit that records the `txn` of `txn` (if any), removes nothing and
    /// read no file to plan its own.
    pub(super) fn of(txn: Option<&'a BatchKey>) -> Self {
        CommitNotes {
            txn,
            blind_append: true,
            ..Default::default()
        }
    }
}
