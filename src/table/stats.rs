//! What a commit did, read back from the table: the version, files, bytes and rows it
//! added (the validate step checks the rows against the plan).

use deltalake::{DeltaTable, DeltaTableError};

use super::Committed;
use crate::error::{Error, Result};
use crate::naming::TableName;

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
    pub(super) fn current(table: DeltaTable) -> Self {
        WrittenTable {
            table,
            pending: Pending::default(),
        }
    }
}

/// Reads what the table's latest commit added from its log entry.
pub(super) async fn committed(table: &TableName, t: &DeltaTable) -> Result<Committed> {
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
