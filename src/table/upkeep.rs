//! Table upkeep after a commit, under the table's lock: default table properties added
//! where missing, and auto compaction once small files pile up: the small files by size
//! tiers ([`super::compact::Plan::Tiered`]), so a compaction rewrites the new files and the
//! few earlier merges of their size, not the whole table. The `optimize` command
//! bin-packs every small file.

use std::collections::HashMap;

use deltalake::DeltaTable;

pub(crate) use super::compact::optimize;
pub use super::compact::small_file_threshold;
use super::compact::{Plan, rewrite};
use super::stats::Pending;
use super::{Storage, WrittenTable};
use crate::error::{Error, Result};
use crate::naming::TableName;

/// Table properties every bronze table carries (set at create, added on every run when
/// missing; a value the user set, e.g. `autoCompact=false`, is kept).
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

/// After a commit, under the table's lock: adds the default table properties the table
/// lacks (created by an older version, or by another tool), then compacts when at least
/// `compact_at` files are small, unless the table turned `autoCompact` off.
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
    let mut stale = !pending.is_empty();
    let config = t
        .snapshot()
        .map_err(|e| Error::delta(table.as_str(), "read", e))?
        .metadata()
        .configuration()
        .clone();
    let missing = missing_properties(&config, target);
    if !missing.is_empty() {
        if stale {
            load_latest(&mut t, table).await?;
            stale = false;
        }
        t = t
            .set_tbl_properties()
            .with_properties(missing)
            .with_commit_properties(super::commit_properties())
            .with_raise_if_not_exists(false)
            .await
            .map_err(|e| Error::delta(table.as_str(), "set properties of", e))?;
    }
    let Some(min_files) = compact_at else {
        return Ok(None);
    };
    if config
        .get("delta.autoOptimize.autoCompact")
        .map(String::as_str)
        == Some("false")
    {
        return Ok(None);
    }
    if small_files(&t, table, &pending, target)? < min_files {
        return Ok(None);
    }
    if stale {
        load_latest(&mut t, table).await?;
    }
    rewrite(table.as_str(), t, target, Plan::Tiered, storage.compression)
        .await
        .map(Some)
}

/// The default table properties ([`default_table_properties`]) `config` lacks.
fn missing_properties(config: &HashMap<String, String>, target: u64) -> HashMap<String, String> {
    default_table_properties(target)
        .into_iter()
        .filter(|(k, _)| !config.contains_key(*k))
        .map(|(k, v)| (k.to_string(), v))
        .collect()
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
