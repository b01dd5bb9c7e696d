//! A log store that refuses a commit removing a file another writer removed meanwhile.
//!
//! deltalake 1.1's conflict checker ignores removes with `dataChange = false` (what
//! OPTIMIZE and compaction write) when it checks a retried commit: two compactions of the
//! same files both commit, and a replace of a batch that a compaction rewrote meanwhile
//! removes files already gone while the compacted file keeps the batch's rows. Either
//! way rows are duplicated. Delta's protocol (and Spark's checker) treats a file removed
//! twice as a conflict whatever its `dataChange`; [`StrictCommits`] restores that rule for
//! every commit bronze makes, below deltalake's retry loop.

use std::sync::Arc;

use bytes::Bytes;
use deltalake::DeltaResult;
use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
use deltalake::logstore::object_store::ObjectStore;
use deltalake::logstore::{CommitOrBytes, LogStore, LogStoreConfig, LogStoreRef};
use url::Url;
use uuid::Uuid;

/// The commit metadata key (Delta's `commitInfo.readVersion`) under which bronze records
/// the version a commit that removes files was planned on.
pub(crate) const READ_VERSION: &str = "readVersion";

/// Wraps a table's log store: a commit entry that removes files and records its read
/// version is written as version `v` only when no commit between its read version and
/// `v` removed one of the same files; otherwise it fails with
/// [`CommitConflictError::ConcurrentDeleteDelete`] (nothing written), which bronze's
/// writes plan again ([`super::is_replannable_conflict`]) and a maintenance run reports.
/// Everything else is the wrapped store's.
#[derive(Debug)]
pub(crate) struct StrictCommits {
    inner: LogStoreRef,
}

impl StrictCommits {
    pub(crate) fn wrap(inner: LogStoreRef) -> LogStoreRef {
        Arc::new(StrictCommits { inner })
    }

    /// The entry's bytes (read back when deltalake staged it as a temporary file).
    async fn entry_bytes(
        &self,
        entry: &CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<Bytes, TransactionError> {
        match entry {
            CommitOrBytes::LogBytes(bytes) => Ok(bytes.clone()),
            CommitOrBytes::TmpCommit(path) => Ok(self
                .inner
                .object_store(Some(operation_id))
                .get_opts(path, Default::default())
                .await?
                .bytes()
                .await?),
        }
    }

    /// Refuses the entry when a commit in `(read version, version)` removed a file it
    /// removes.
    async fn check(
        &self,
        version: u64,
        entry: &CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        if let CommitOrBytes::LogBytes(bytes) = entry
            && memchr::memmem::find(bytes, b"\"remove\"").is_none()
        {
            return Ok(());
        }
        let bytes = self.entry_bytes(entry, operation_id).await?;
        let ours = Actions::of(&bytes);
        let Some(read) = ours.read_version else {
            return Ok(());
        };
        if ours.removes.is_empty() {
            return Ok(());
        }
        for v in read + 1..version {
            let winning = self.inner.read_commit_entry(v).await.map_err(|e| {
                TransactionError::LogStoreError {
                    msg: format!("reading commit {v} to check it against this one"),
                    source: Box::new(e),
                }
            })?;
            let Some(winning) = winning else {
                continue;
            };
            let theirs = Actions::of(&winning);
            if let Some(path) = theirs.removes.iter().find(|p| ours.removes.contains(*p)) {
                tracing::info!(version, winning = v, file = %path, "a file this commit removes was removed by another commit meanwhile (a compaction or a replace): refused as a conflict");
                return Err(TransactionError::CommitConflict(
                    CommitConflictError::ConcurrentDeleteDelete,
                ));
            }
        }
        Ok(())
    }
}

/// What [`StrictCommits`] reads of a commit entry: the paths it removes and its
/// recorded read version.
#[derive(Default)]
struct Actions {
    removes: std::collections::HashSet<String>,
    read_version: Option<u64>,
}

impl Actions {
    /// Parses a commit entry (one JSON action per line); lines that are not JSON objects
    /// of a known action are skipped.
    fn of(bytes: &[u8]) -> Actions {
        let mut actions = Actions::default();
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(path) = action["remove"]["path"].as_str() {
                actions.removes.insert(path.to_string());
            } else if let Some(v) = action["commitInfo"][READ_VERSION].as_u64() {
                actions.read_version = Some(v);
            }
        }
        actions
    }
}

#[async_trait::async_trait]
impl LogStore for StrictCommits {
    fn name(&self) -> String {
        // deltalake picks how to stage a commit by this name: the wrapped store's.
        self.inner.name()
    }

    async fn refresh(&self) -> DeltaResult<()> {
        self.inner.refresh().await
    }

    async fn read_commit_entry(&self, version: u64) -> DeltaResult<Option<Bytes>> {
        self.inner.read_commit_entry(version).await
    }

    async fn write_commit_entry(
        &self,
        version: u64,
        entry: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.check(version, &entry, operation_id).await?;
        self.inner
            .write_commit_entry(version, entry, operation_id)
            .await
    }

    async fn abort_commit_entry(
        &self,
        version: u64,
        entry: CommitOrBytes,
        operation_id: Uuid,
    ) -> Result<(), TransactionError> {
        self.inner
            .abort_commit_entry(version, entry, operation_id)
            .await
    }

    async fn get_latest_version(&self, start_version: u64) -> DeltaResult<u64> {
        self.inner.get_latest_version(start_version).await
    }

    fn object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.object_store(operation_id)
    }

    fn root_object_store(&self, operation_id: Option<Uuid>) -> Arc<dyn ObjectStore> {
        self.inner.root_object_store(operation_id)
    }

    fn engine(&self, operation_id: Option<Uuid>) -> Arc<dyn buoyant_kernel::Engine> {
        self.inner.engine(operation_id)
    }

    fn root_url(&self) -> &Url {
        self.inner.root_url()
    }

    fn transaction_url(&self, operation_id: Option<Uuid>) -> DeltaResult<Url> {
        self.inner.transaction_url(operation_id)
    }

    fn config(&self) -> &LogStoreConfig {
        self.inner.config()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_removes_and_read_version_of_an_entry() {
        let entry = br#"{"commitInfo":{"operation":"OPTIMIZE","readVersion":7}}
{"remove":{"path":"part-1.parquet","dataChange":false}}
{"add":{"path":"part-3.parquet","dataChange":false}}
{"remove":{"path":"part-2.parquet","dataChange":false}}
not json"#;
        let a = Actions::of(entry);
        assert_eq!(a.read_version, Some(7));
        let mut removes: Vec<_> = a.removes.into_iter().collect();
        removes.sort();
        assert_eq!(removes, ["part-1.parquet", "part-2.parquet"]);
        assert_eq!(Actions::of(b"{\"add\":{}}").read_version, None);
    }
}
