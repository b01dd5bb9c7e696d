//! Table upkeep after a commit, under the table's lock: auto compaction once small files
//! pile up: the small files by size
//! tiers ([`super::compact::Plan::Tiered`]), so a compaction rewrites the new files and the
//! few earlier merges of their size, not the whole table. The `optimize` command
//! bin-packs every small file.

use deltalake::DeltaTable;

pub(crate) use super::compact::optimize;
pub use super::compact::small_file_threshold;
use super::compact::{Plan, rewrite};
use super::stats::Pending;
use super::{Storage, WrittenTable};
use crate::error::{Error, Result};
use crate::naming::TableName;

/// Table properties every table bronze creates carries, set at create only: a table
/// another engine created keeps its own (Databricks honours these, so they would change
/// how it writes that table), and a value a user set or unset later is kept.
pub fn default_table_properties(target_file_size: u64) -> Vec<(&'static str, String)> {
    vec![
        ("delta.autoOptimize.optimizeWrite", "true".into()),
        ("delta.autoOptimize.autoCompact", "true".into()),
        ("delta.targetFileSize", target_file_size.to_string()),
        // Spark's default: the log stays short, readers replay at most 10 JSON commits.
        ("delta.checkpointInterval", "10".into()),
    ]
}

pub use super::compact::OptimizeReport;

/// Live files and their sizes.
pub(crate) fn live_files(t: &DeltaTable, table: &str) -> Result<Vec<(String, u64)>> {
    let snapshot = t.snapshot().map_err(|e| Error::delta(table, "read", e))?;
    Ok(snapshot
        .log_data()
        .iter()
        .map(|f| (f.path().into_owned(), f.size().max(0) as u64))
        .collect())
}

/// After a commit, under the table's lock: compacts when at least `compact_at` files are
/// small, unless the table turned `autoCompact` off. The table's properties are left as
/// they are.
pub(crate) async fn after_commit(
    storage: &Storage,
    table: &TableName,
    written: WrittenTable,
    target: u64,
    compact_at: Option<u64>,
) -> Result<Option<OptimizeReport>> {
    // The table as the write left it (the lock is held: nobody committed since), so no
    // second load of its log; its state may predate the commit, whose files are then in
    // `pending`, and is brought up to date only before a commit of its own.
    let WrittenTable {
        table: mut t,
        pending,
    } = written;
    let Some(min_files) = compact_at else {
        return Ok(None);
    };
    let auto_compact = t
        .snapshot()
        .map_err(|e| Error::delta(table.as_str(), "read", e))?
        .metadata()
        .configuration()
        .get("delta.autoOptimize.autoCompact")
        .cloned();
    if auto_compact.as_deref() == Some("false") {
        return Ok(None);
    }
    if small_files(&t, table, &pending, target)? < min_files {
        return Ok(None);
    }
    if !pending.is_empty() {
        load_latest(&mut t, table).await?;
    }
    rewrite(table.as_str(), t, target, Plan::Tiered, storage.compression)
        .await
        .map(Some)
}

/// Brings `t`'s state up to the table's latest version.
async fn load_latest(t: &mut DeltaTable, table: &TableName) -> Result<()> {
    t.update_state()
        .await
        .map_err(|e| Error::delta(table.as_str(), "load", e))
}

/// How many files of `t` are small for `target` once the commit's `pending` files are
/// counted in.
fn small_files(t: &DeltaTable, table: &TableName, pending: &Pending, target: u64) -> Result<u64> {
    let small = small_file_threshold(target);
    Ok(live_files(t, table.as_str())?
        .iter()
        .filter(|(path, _)| !pending.removes.contains(path))
        .map(|(_, s)| *s)
        .chain(pending.adds.iter().copied())
        .filter(|s| *s < small)
        .count() as u64)
}
