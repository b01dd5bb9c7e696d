//! The batch lease of a run ([`crate::lease`]), and whether an earlier run of the batch
//! ended before `_run_control` recorded it.

use super::context::Context;
use crate::batch::BatchKey;
use crate::error::Result;
use crate::lease::{Lease, LeaseFolder};
use crate::table::Storage;

/// The batch lease when [`crate::IngestConfig::batch_lease`] is on (held until dropped), with
/// a warning for each lease of a dead run taken over.
pub(super) fn take_lease(
    ctx: &Context,
    storage: &Storage,
    key: &BatchKey,
    run_id: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<Lease>> {
    if !ctx.config.batch_lease {
        return Ok(Vec::new());
    }
    let leases = lease(ctx, storage, key, run_id)?;
    for h in leases.iter().filter_map(|l| l.took_over.as_ref()) {
        warnings.push(format!(
            "took over the lease of run {} (host {}, pid {}), which is gone; its partial writes are replaced by this run",
            h.run_id, h.host, h.pid
        ));
    }
    Ok(leases)
}

/// Takes the batch's lease, one file per folder (in landing path order; those taken
/// are released when one is held), under the schema folder, through the run's store.
pub(super) fn lease(
    ctx: &Context,
    storage: &Storage,
    key: &BatchKey,
    run_id: &str,
) -> Result<Vec<Lease>> {
    let (store, dir) = ctx.schema_folder(storage)?;
    let shown = format!(
        "{}/{}",
        ctx.catalog.shown().trim_end_matches('/'),
        ctx.config.schema
    );
    let at = LeaseFolder {
        store: &store,
        schema_dir: &dir,
        shown: &shown,
    };
    key.landing_paths
        .iter()
        .map(|landing_path| {
            Lease::acquire(
                &at,
                landing_path,
                &key.batch_id,
                run_id,
                ctx.config.lease_ttl,
                ctx.runtime(),
            )
        })
        .collect()
}

/// Whether a run of the batch ended before `_run_control` recorded it, so that its
/// tables may hold rows of it no record tells of: this run took over the lease that
/// run left ([`Lease`]); without leases, a lease file of the batch is there (left by
/// a run that held one), or else only the tables' `txn`s tell
/// ([`crate::table::Txns::InTables`]).
pub(super) fn unrecorded_run(
    ctx: &Context,
    storage: &Storage,
    key: &BatchKey,
    leases: &[Lease],
) -> bool {
    if ctx.config.batch_lease {
        return leases.iter().any(|l| l.took_over.is_some());
    }
    let Ok((store, dir)) = ctx.schema_folder(storage) else {
        return true;
    };
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    key.landing_paths.iter().any(|landing_path| {
        let path = dir
            .clone()
            .join(crate::lease::LEASE_DIR)
            .join(crate::lease::lease_file(landing_path, &key.batch_id).as_str());
        !matches!(
            ctx.runtime().block_on(store.head(&path)),
            Err(deltalake::logstore::object_store::Error::NotFound { .. })
        )
    })
}
