//! Log entries put at one version, only if absent: a taken version means another writer
//! came first, and nothing is written.

use deltalake::DeltaTableError;
use deltalake::protocol::SaveMode;

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
    let append = deltalake::protocol::DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    };
    let info = serde_json::Map::new();
    put_operation(log_store, version, properties, actions, append, &info).await
}

/// [`put_commit`] of an operation other than an append, with `info` set in its
/// `commitInfo` beside what deltalake writes there (its keys win).
pub(super) async fn put_operation(
    log_store: &deltalake::logstore::LogStoreRef,
    version: u64,
    properties: deltalake::kernel::transaction::CommitProperties,
    actions: Vec<deltalake::kernel::Action>,
    operation: deltalake::protocol::DeltaOperation,
    info: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<bool, DeltaTableError> {
    use deltalake::kernel::transaction::CommitBuilder;

    let operation_id = uuid::Uuid::new_v4();
    let prepared = CommitBuilder::from(properties)
        .with_actions(actions)
        .with_operation_id(operation_id)
        .build(None, log_store.clone(), operation)
        .into_prepared_commit_future()
        .await?;
    let entry = with_info(prepared.commit_or_bytes(), info)?;
    put_entry(log_store, version, &entry, operation_id).await
}

/// `entry` with `info`'s keys set in its `commitInfo` action.
fn with_info(
    entry: &deltalake::logstore::CommitOrBytes,
    info: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<deltalake::logstore::CommitOrBytes, DeltaTableError> {
    use deltalake::logstore::CommitOrBytes;
    let CommitOrBytes::LogBytes(bytes) = entry else {
        return Ok(entry.clone());
    };
    if info.is_empty() {
        return Ok(entry.clone());
    }
    let mut lines = Vec::new();
    for line in bytes.split(|b| *b == b'\n') {
        let mut action: serde_json::Value = serde_json::from_slice(line)?;
        if let Some(commit) = action
            .get_mut("commitInfo")
            .and_then(serde_json::Value::as_object_mut)
        {
            commit.extend(info.clone());
        }
        lines.push(serde_json::to_string(&action)?);
    }
    Ok(CommitOrBytes::LogBytes(lines.join("\n").into()))
}

/// Writes a prepared commit `entry` as `version`, put only if absent: `Ok(false)`
/// (nothing committed, its temporary file removed) when that version is taken.
pub(super) async fn put_entry(
    log_store: &deltalake::logstore::LogStoreRef,
    version: u64,
    entry: &deltalake::logstore::CommitOrBytes,
    operation_id: uuid::Uuid,
) -> std::result::Result<bool, DeltaTableError> {
    use deltalake::kernel::transaction::TransactionError;
    match log_store
        .write_commit_entry(version, entry.clone(), operation_id)
        .await
    {
        Ok(()) => Ok(true),
        Err(TransactionError::VersionAlreadyExists(_)) => {
            // The version may be this very entry: a conditional put that landed, whose
            // response was lost, is retried by the store client and then refused as
            // existing. Appending again would duplicate the batch's rows.
            if let deltalake::logstore::CommitOrBytes::LogBytes(bytes) = entry
                && log_store.read_commit_entry(version).await?.as_ref() == Some(bytes)
            {
                tracing::info!(
                    version,
                    "the commit landed although the store reported it as taken (a retried put)"
                );
                return Ok(true);
            }
            log_store
                .abort_commit_entry(version, entry.clone(), operation_id)
                .await?;
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
