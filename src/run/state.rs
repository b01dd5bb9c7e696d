//! [`Run`]: one run of one batch as a value. The load step builds it once the batch's
//! lease is held and its prior runs are read; every later step borrows it.

use super::context::Context;
use crate::batch::BatchKey;
use crate::error::Result;
use crate::flatten::Lineage;
use crate::lease::Lease;
use crate::table::{RunMode, Storage};

/// One run of one batch: what its steps share once its lease is held.
pub(super) struct Run<'a> {
    /// The `Ingest`'s settings, pools, catalog and runtime.
    pub(super) ctx: &'a Context,
    /// The catalog's tables, as this run reaches them.
    pub(super) storage: Storage,
    /// Whether the batch was seen before, and where its `txn` is recorded; every write
    /// of the run follows it.
    pub(super) mode: RunMode,
    /// The batch key, and what each row of the batch carries.
    pub(super) lineage: Lineage,
    /// The batch's leases (none without [`crate::IngestConfig::batch_lease`]), held
    /// until the run is dropped.
    pub(super) leases: Vec<Lease>,
    /// `<batch slug>-<start micros>`: the run's id in `_run_control`.
    pub(super) run_id: String,
    /// When the run started, in microseconds since the epoch.
    pub(super) started_micros: i64,
}

impl Run<'_> {
    /// The batch.
    pub(super) fn key(&self) -> &BatchKey {
        &self.lineage.key
    }

    /// The catalog's runtime.
    pub(super) fn runtime(&self) -> &tokio::runtime::Runtime {
        self.ctx.runtime()
    }

    /// An error when another run took one of the batch's leases over.
    pub(super) fn still_held(&self) -> Result<()> {
        self.leases.iter().try_for_each(Lease::check)
    }
}
