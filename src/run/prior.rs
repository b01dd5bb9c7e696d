//! What the catalog holds of a batch's earlier runs, read once its lease is held: the
//! run's mode ([`RunMode`]), and the tables opened ahead while the batch is parsed.

use std::collections::HashSet;

use super::context::Context;
use super::leases;
use super::ledger::latest_runs;
use crate::batch::BatchKey;
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::naming::{RUN_CONTROL_TABLE, TableName};
use crate::run_control::{RunRow, run_control_rows};
use crate::table::{RunMode, Seen, Storage, Txns};

/// What a run does with a batch whose latest run loaded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IfLoaded {
    /// Load it again.
    Reload,
    /// Stop with [`Error::AlreadyLoaded`] (the workers of one backlog).
    Stop,
}

/// Reads what the catalog holds of the batch's earlier runs, which decides the run's
/// mode, and starts pre-opening its tables ([`preopen`]; the guard
/// returned stops it); with [`IfLoaded::Stop`], [`Error::AlreadyLoaded`] when the
/// batch's latest run loaded it.
pub(super) fn prior_runs(
    ctx: &Context,
    storage: &Storage,
    key: &BatchKey,
    leases: &[Lease],
    landed: tokio::sync::watch::Receiver<bool>,
    if_loaded: IfLoaded,
) -> Result<(RunMode, crate::table::AbortOnDrop)> {
    let unrecorded = leases::unrecorded_run(ctx, storage, key, leases);
    // Whether the batch was loaded before: its `txn` is in `_run_control`, so it has
    // rows in its tables.
    let seen = ctx.runtime().block_on(
        storage
            .opener()
            .batch_seen(&TableName::system(RUN_CONTROL_TABLE), key),
    );
    let mode = run_mode(
        ctx,
        if seen || unrecorded {
            Seen::Before
        } else {
            Seen::Never
        },
    );
    let preopen = preopen(ctx, storage, key, mode, landed);
    // A backlog's worker: a batch never seen cannot have been loaded meanwhile; one
    // seen is checked against its runs in `_run_control` (unless a run of it ended
    // unrecorded: this run rewrites what that one left).
    if if_loaded == IfLoaded::Stop && seen && !unrecorded && loaded(ctx, storage, key)? {
        return Err(Error::AlreadyLoaded {
            batch: key.to_string(),
        });
    }
    Ok((mode, preopen))
}

/// The run's mode: appends skip the file list only for a batch neither seen nor left
/// by an unrecorded run (its tables hold no row of it, [`Seen::Never`]), and the tables
/// record the batch's `txn` unless the batch lease tells instead ([`Txns`]).
fn run_mode(ctx: &Context, seen: Seen) -> RunMode {
    RunMode {
        seen,
        txns: if ctx.config.batch_lease {
            Txns::RunControl
        } else {
            Txns::InTables
        },
    }
}

/// Opens the catalog's tables while the batch is parsed
/// ([`crate::table::Opener::preopen`]), until the returned guard drops.
fn preopen(
    ctx: &Context,
    storage: &Storage,
    key: &BatchKey,
    mode: RunMode,
    landed: tokio::sync::watch::Receiver<bool>,
) -> crate::table::AbortOnDrop {
    let guard = crate::table::AbortOnDrop(storage.opened.ahead.clone());
    ctx.runtime().spawn(storage.opener().preopen(
        mode,
        key.clone(),
        landed,
        storage.opened.ahead.offering(),
    ));
    guard
}

/// Whether the latest run of `key` loaded it successfully (every folder of it).
pub(super) fn loaded(ctx: &Context, storage: &Storage, key: &BatchKey) -> Result<bool> {
    let rows = run_control_rows(storage, Some(&key.batch_id));
    let loaded = loaded_from(ctx.runtime().block_on(rows)?);
    Ok(key
        .landing_paths
        .iter()
        .all(|lp| loaded.contains(&(lp.clone(), key.batch_id.clone()))))
}

/// The batches whose latest run has no failed row, per landing path of that run.
fn loaded_from(rows: Vec<RunRow>) -> HashSet<(String, String)> {
    latest_runs(rows)
        .into_iter()
        .filter_map(|(k, run)| run.ok.then_some(k))
        .collect()
}
