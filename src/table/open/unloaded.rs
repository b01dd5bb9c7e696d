//! Tables opened from their log alone for an append: protocol, metadata and the `txn`
//! actions of the batches, no file list.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::Opener;
use crate::batch::BatchKey;
use crate::naming::TableName;
use crate::table::writable::{self, Look};
use crate::table::{RunMode, Txns, Work, Write};

/// Table property bronze sets on the tables it creates for batches: only bronze writes
/// rows of batches there, each such commit with a Delta `txn` action for the batch
/// ([`BatchKey::app_ids`]) when the run records them there ([`Txns::InTables`]). So a
/// batch that `_run_control` has not seen, no run of which left its lease, and whose
/// `txn` is not in the log has no row in the table, which an append can tell from the
/// log's protocol, metadata and `txn` actions alone, without the file list
/// ([`Opener::open_unloaded`]).
pub const BATCH_TXN_PROPERTY: &str = "bronze.batchTransactions";

/// Whether the snapshot's log holds a `txn` of `key`: of one of its folders, or of its
/// batch id alone (written before landing paths, [`BatchKey::legacy_app_id`]).
fn txn_seen(
    app_ids: &[String],
    snapshot: &buoyant_kernel::SnapshotRef,
    engine: &dyn buoyant_kernel::Engine,
) -> Option<bool> {
    for app_id in app_ids {
        if snapshot.get_app_id_version(app_id, engine).ok()?.is_some() {
            return Some(true);
        }
    }
    Some(false)
}

/// The `txn` application ids that tell a table may hold rows of `key`.
fn seen_ids(key: &BatchKey) -> Vec<String> {
    let mut ids = key.app_ids();
    ids.push(key.legacy_app_id());
    ids
}

impl Opener<'_> {
    /// [`Opener::open_unloaded`], reading the log now.
    pub(super) async fn open_unloaded_now(
        &self,
        table: &TableName,
        key: &BatchKey,
        write: Write,
        run: RunMode,
    ) -> std::result::Result<Unloaded, Unopened> {
        self.open_unloaded_looked(table, key, write, run).await.0
    }

    /// [`Opener::open_unloaded_now`], and what the table's protocol and metadata allow
    /// ([`writable::look`]; `None` when its log could not be read). A table bronze
    /// will not write is never opened this way.
    pub(super) async fn open_unloaded_looked(
        &self,
        table: &TableName,
        key: &BatchKey,
        write: Write,
        run: RunMode,
    ) -> (std::result::Result<Unloaded, Unopened>, Option<Look>) {
        let app_ids = seen_ids(key);
        let compact_at = self.storage.auto_compact_at;
        let removes = run.seen.removes();
        let opened = self.kernel_snapshot(table, move |snapshot, engine| {
            let look = writable::look(snapshot.table_configuration(), removes);
            let plain = look.refusal.is_none()
                && plain_append(snapshot, engine, compact_at, run.txns, write, &app_ids);
            Some((plain.then(|| Arc::clone(snapshot)), look))
        });
        match self.storage.clock.time(Work::Open, opened).await {
            Ok(((Some(snapshot), look), log_store)) => (unloaded(&snapshot, log_store), Some(look)),
            Ok(((None, look), _)) => (Err(Unopened::Other), Some(look)),
            Err(unopened) => (Err(unopened), None),
        }
    }

    /// Whether `table`'s log holds a `txn` of `key` (a write of its rows committed
    /// there): `false` when the table does not exist, `true` when its log cannot be read
    /// (the batch may have been seen: its rows are looked for, never assumed absent).
    pub(crate) async fn batch_seen(&self, table: &TableName, key: &BatchKey) -> bool {
        let app_ids = seen_ids(key);
        let seen = self
            .kernel_snapshot(table, move |snapshot, engine| {
                txn_seen(&app_ids, snapshot, engine)
            })
            .await;
        match seen {
            Ok((seen, _)) => seen,
            Err(Unopened::Absent) => false,
            Err(Unopened::Other) => true,
        }
    }

    /// `look` at the table's latest kernel snapshot (protocol, metadata and the log's
    /// file names read; no file list), with its log store. [`Unopened::Absent`] when the
    /// log holds no commit, [`Unopened::Other`] when it cannot be read or `look` says no.
    async fn kernel_snapshot<R: Send + 'static>(
        &self,
        table: &TableName,
        look: impl FnOnce(&buoyant_kernel::SnapshotRef, &dyn buoyant_kernel::Engine) -> Option<R>
        + Send
        + 'static,
    ) -> std::result::Result<(R, deltalake::logstore::LogStoreRef), Unopened> {
        if self.storage.local_log_missing(table) {
            return Err(Unopened::Absent);
        }
        // The table's URL ends with `/`, as the kernel needs to join paths under it.
        let root = self.storage.table_url(table).map_err(|_| Unopened::Other)?;
        let log_store = self
            .storage
            .handle(table)
            .map_err(|_| Unopened::Other)?
            .log_store();
        let engine = log_store.engine(None);
        let name = table.clone();
        // On a blocking thread, as delta-rs runs the kernel: its engine blocks on the
        // runtime for object store reads.
        let seen = tokio::task::spawn_blocking(move || {
            let snapshot = match buoyant_kernel::Snapshot::builder_for(root).build(engine.as_ref())
            {
                Ok(snapshot) => snapshot,
                // What delta-rs reports as "not a table" (`kernel::Snapshot::try_new`).
                Err(e) if e.to_string().contains("No files in log segment") => {
                    return Err(Unopened::Absent);
                }
                Err(e) => {
                    tracing::debug!(table = %name, error = %e, "no kernel snapshot");
                    return Err(Unopened::Other);
                }
            };
            look(&snapshot, engine.as_ref()).ok_or(Unopened::Other)
        })
        .await
        .map_err(|_| Unopened::Other)??;
        Ok((seen, log_store))
    }
}

/// Whether an append to `snapshot`'s table may commit from its log alone: nothing about
/// the table asks more of a writer than data files with statistics, the next commit is
/// due no checkpoint or auto compaction check, and (for a replacing write) no rows of the
/// batch (`app_ids`) are there. `compact_at`, `txns` and `write` as
/// [`Opener::open_unloaded_looked`] has them.
fn plain_append(
    snapshot: &buoyant_kernel::SnapshotRef,
    engine: &dyn buoyant_kernel::Engine,
    compact_at: Option<u64>,
    txns: Txns,
    write: Write,
    app_ids: &[String],
) -> bool {
    use buoyant_kernel::table_features::TableFeature;
    use deltalake::table::config::TablePropertiesExt as _;

    let props = snapshot.table_properties();
    let interval = props.checkpoint_interval().get();
    let every = compact_at.map_or(interval, |n| n.clamp(1, interval));
    // Rows of `key` in a table only bronze writes batches to are told (needed only to
    // replace) by `_run_control` and the batch's lease, or, when writes record `txn`s, by
    // its `txn` in the log while none expires.
    let told = props
        .unknown_properties
        .get(BATCH_TXN_PROPERTY)
        .map(String::as_str)
        == Some("true")
        && (txns == Txns::RunControl || props.set_transaction_retention_duration.is_none());
    let plain = (told || write == Write::Append)
        && props
            .column_mapping_mode
            .is_none_or(|m| m == buoyant_kernel::table_features::ColumnMappingMode::None)
        // Row ids and clustering statistics: the loaded path's commit (`planned`).
        && !snapshot.table_configuration().is_feature_supported(&TableFeature::RowTracking)
        && !snapshot.table_configuration().is_feature_supported(&TableFeature::ClusteredTable)
        && props.enable_in_commit_timestamps != Some(true)
        // CHECK constraints: checked on the loaded path's rows (`Duties::check_rows`).
        && !props
            .unknown_properties
            .keys()
            .any(|k| k.starts_with("delta.constraints."))
        && props.data_skipping_num_indexed_cols.is_none()
        && props.data_skipping_stats_columns.is_none()
        // The commit after this one is due the post-commit work (the checkpoint check of
        // delta-rs's post-commit hook, as in `Committer::append_files`).
        && !(snapshot.version() + 2).is_multiple_of(every);
    if !plain {
        return false;
    }
    let committer = Box::new(buoyant_kernel::committer::FileSystemCommitter::new());
    if Arc::clone(snapshot).transaction(committer, engine).is_err() {
        return false;
    }
    write == Write::Append || txn_seen(app_ids, snapshot, engine) == Some(false)
}

/// The [`Unloaded`] table of `snapshot`; [`Unopened::Other`] when a column carries
/// metadata a writer must act on ([`writer_metadata`]).
fn unloaded(
    snapshot: &buoyant_kernel::SnapshotRef,
    log_store: deltalake::logstore::LogStoreRef,
) -> std::result::Result<Unloaded, Unopened> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;

    let schema: Schema = snapshot
        .schema()
        .as_ref()
        .try_into_arrow()
        .map_err(|_| Unopened::Other)?;
    if schema.fields().iter().any(|f| writer_metadata(f)) {
        return Err(Unopened::Other);
    }
    Ok(Unloaded {
        version: snapshot.version(),
        log_store,
        schema: Arc::new(schema),
    })
}

/// Why [`Opener::open_unloaded`] did not open a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::table) enum Unopened {
    /// Its log holds no commit: no table yet.
    Absent,
    /// It cannot be read that way, or must not be written that way (the loaded path
    /// decides).
    Other,
}

/// A table opened without its file list ([`Opener::open_unloaded`]).
pub(in crate::table) struct Unloaded {
    /// The version it was opened at.
    pub(in crate::table) version: u64,
    pub(in crate::table) log_store: deltalake::logstore::LogStoreRef,
    /// Its schema, as Arrow.
    pub(in crate::table) schema: SchemaRef,
}

/// Whether a field (or one nested in it) carries metadata a writer must act on: Delta's
/// invariants, generated or identity columns (`delta.*` keys other than comments).
fn writer_metadata(field: &Field) -> bool {
    let own = field
        .metadata()
        .keys()
        .any(|k| k.starts_with("delta.") && k != "delta.comment");
    own || match field.data_type() {
        DataType::Struct(fields) => fields.iter().any(|f| writer_metadata(f)),
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => writer_metadata(f),
        _ => false,
    }
}
