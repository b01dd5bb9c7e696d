//! Where a landing zone's backlog stands, per entity ([`Ingest::status`](super::Ingest::status), `bronze
//! status`): batches loaded, pending, failed and in progress (lease holder and age), the
//! oldest batch not loaded, and the last failure's reason; the same as Prometheus metrics.
//! Reads the batch folders, `_run_control` and the lease files; takes no lease.

use std::collections::{BTreeMap, HashMap};

use deltalake::logstore::object_store::ObjectStoreExt as _;

use super::context::Context;
use super::ledger::RunState;
use super::listing::{Listing, PendingBatch};
use crate::batch::now_micros;
use crate::error::{Error, Result};
use crate::lease::{Holder, LEASE_DIR, lease_file};

/// One entity (`<source>/<entity>`) of a landing zone.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct EntityStatus {
    /// `<source>/<entity>`.
    pub landing_path: String,
    /// Batches whose latest run loaded them (no failed row in `_run_control`).
    pub loaded: usize,
    /// Batches never loaded and not being loaded now.
    pub pending: usize,
    /// Batches whose latest run failed (a table, or the row accounting), not being
    /// loaded now: pending again.
    pub failed: usize,
    /// Batches a run holds the lease of right now.
    pub in_progress: Vec<InProgress>,
    /// The oldest batch id not loaded (pending, failed or in progress): where this
    /// entity's backlog stands, since its batches load in batch id order.
    pub oldest_pending: Option<String>,
    /// The most recent failed run of a batch not loaded since.
    pub last_failure: Option<Failure>,
    /// When the latest run that loaded one of its batches started, microseconds since
    /// the epoch (UTC).
    #[serde(default)]
    pub last_loaded_micros: Option<i64>,
    /// Loaded batches whose folder changed after their load (among those checked: the
    /// entity's three latest, and all of them once per `full_listing_every`).
    #[serde(default)]
    pub changed: Vec<Changed>,
    /// Tables runs of this entity created or widened that the catalog of `[metastore]`
    /// has not taken yet: the next run with `[metastore]`, or `bronze register`,
    /// registers them.
    #[serde(default)]
    pub unregistered: Vec<crate::metastore::pending::Unregistered>,
}

/// A loaded batch whose folder changed after its load.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Changed {
    /// The batch id.
    pub batch_id: String,
    /// How its folder differs from its manifest.
    pub change: crate::LandingChange,
}

/// A batch whose lease is held.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct InProgress {
    /// The batch id.
    pub batch_id: String,
    /// The holder's run id.
    pub run_id: String,
    /// The holder's host.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// Seconds since the lease was taken.
    pub age_seconds: f64,
    /// Seconds since the holder last renewed it (`None`: not renewed yet).
    pub renewed_seconds_ago: Option<f64>,
    /// Not renewed within the lease TTL: its run is likely dead, and the next run of
    /// the batch takes the lease over.
    pub stale: bool,
}

/// A failed run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failure {
    /// The batch id.
    pub batch_id: String,
    /// Its first failed row's error (or the row accounting's check).
    pub reason: String,
}

/// [`Ingest::status`](super::Ingest::status)'s work.
pub(super) fn status(
    ctx: &Context,
    root: impl AsRef<std::path::Path>,
) -> Result<Vec<EntityStatus>> {
    Ok(status_and_oldest(ctx, root.as_ref())?.0)
}

/// [`Ingest::backlog_metrics`](super::Ingest::backlog_metrics)'s work.
pub(super) fn backlog_metrics(ctx: &Context, root: impl AsRef<std::path::Path>) -> Result<String> {
    let (entities, oldest) = status_and_oldest(ctx, root.as_ref())?;
    let now = now_micros();
    let mut ages = BTreeMap::new();
    for (landing_path, folder) in oldest {
        if let Some(landed) = Listing::new(ctx).landed_micros(&folder)? {
            ages.insert(landing_path, (now - landed).max(0) as f64 / 1e6);
        }
    }
    Ok(crate::run::metrics::backlog_metrics(&entities, &ages))
}

/// [`Ingest::push_backlog_metrics`](super::Ingest::push_backlog_metrics)'s work.
pub(super) fn push_backlog_metrics(
    ctx: &Context,
    root: impl AsRef<std::path::Path>,
) -> Result<Option<String>> {
    let Some(url) = &ctx.config.metrics_push else {
        return Ok(None);
    };
    let root = root.as_ref();
    let body = backlog_metrics(ctx, root)?;
    let shown = root.to_string_lossy();
    let pushed = super::metrics::push(
        url,
        "backlog",
        shown.as_ref(),
        body,
        super::metrics::Replace::Group,
    );
    Ok(ctx.runtime().block_on(pushed).err())
}

/// Counts a batch in its entity's status `e`: in progress (`held`), else loaded, failed
/// or pending by its latest `run`.
fn count(e: &mut EntityStatus, held: Option<InProgress>, run: Option<RunState>) {
    if let Some(r) = run.filter(|r| r.ok) {
        e.last_loaded_micros = e.last_loaded_micros.max(Some(r.started));
    }
    match (held, run) {
        (Some(p), _) => e.in_progress.push(p),
        (None, Some(r)) if r.ok => e.loaded += 1,
        (None, Some(_)) => e.failed += 1,
        (None, None) => e.pending += 1,
    }
}

/// The batch in progress that `h` holds the lease of, `now`, with leases that live `ttl`.
fn in_progress(batch_id: &str, h: &Holder, now: i64, ttl: i64) -> InProgress {
    let renewed = h.renewed_micros.unwrap_or(h.since_micros);
    InProgress {
        batch_id: batch_id.to_string(),
        run_id: h.run_id.clone(),
        host: h.host.clone(),
        pid: h.pid,
        age_seconds: (now - h.since_micros).max(0) as f64 / 1e6,
        renewed_seconds_ago: h.renewed_micros.map(|r| (now - r).max(0) as f64 / 1e6),
        stale: now - renewed > ttl,
    }
}

/// The entities' statuses, each with its loaded batches whose folder changed (`late`).
fn with_changed(
    mut entities: BTreeMap<String, (EntityStatus, i64)>,
    late: Vec<PendingBatch>,
) -> Vec<EntityStatus> {
    for batch in late {
        if let (Some((e, _)), Some(change)) = (entities.get_mut(&batch.landing_path), batch.late) {
            e.changed.push(Changed {
                batch_id: batch.batch_id,
                change,
            });
        }
    }
    entities.into_values().map(|(e, _)| e).collect()
}

/// The statuses, and the folder of each entity's oldest batch not loaded.
fn status_and_oldest(
    ctx: &Context,
    root: &std::path::Path,
) -> Result<(Vec<EntityStatus>, BTreeMap<String, String>)> {
    let super::listing::BacklogView {
        folders,
        ledgers,
        late,
    } = Listing::new(ctx).backlog_view(root)?;
    let mut oldest: BTreeMap<String, String> = BTreeMap::new();
    let storage = ctx.storage()?;
    let leases = held_leases(ctx, &storage)?;
    let ttl = ctx.config.lease_ttl.as_micros() as i64;
    let now = now_micros();
    let mut entities: BTreeMap<String, (EntityStatus, i64)> = BTreeMap::new();
    for (
        PendingBatch {
            landing_path,
            batch_id,
            folder,
            ..
        },
        run,
    ) in folders
    {
        let (e, failed_at) = entities.entry(landing_path.clone()).or_insert_with(|| {
            let e = EntityStatus {
                landing_path: landing_path.clone(),
                ..Default::default()
            };
            (e, i64::MIN)
        });
        let loaded = run.is_some_and(|r| r.ok);
        // A lease left released by a run that ended unrecorded: nothing runs.
        // (No lease file named when none is held: most of a long history.)
        let held = (!leases.is_empty())
            .then(|| leases.get(&lease_file(&landing_path, &batch_id)))
            .flatten()
            .filter(|h| h.released_micros.is_none());
        count(e, held.map(|h| in_progress(&batch_id, h, now, ttl)), run);
        if let Some(r) = run.filter(|r| !r.ok && r.started > *failed_at) {
            *failed_at = r.started;
            let error = ledgers.latest_run(&landing_path, &batch_id);
            e.last_failure = Some(Failure {
                batch_id: batch_id.clone(),
                reason: error
                    .and_then(|r| r.error)
                    .unwrap_or_else(|| "failed".into()),
            });
        }
        if !loaded && e.oldest_pending.as_ref().is_none_or(|o| batch_id < *o) {
            e.oldest_pending = Some(batch_id);
            oldest.insert(landing_path, folder.to_string_lossy().into_owned());
        }
    }
    let mut entities = with_changed(entities, late);
    with_unregistered(ctx, &storage, &mut entities)?;
    Ok((entities, oldest))
}

/// The tables not registered in the catalog, each under the entity whose run created or
/// widened it.
fn with_unregistered(
    ctx: &Context,
    storage: &crate::table::Storage,
    entities: &mut [EntityStatus],
) -> Result<()> {
    let (store, schema_dir) = storage.schema_folder()?;
    let pending = crate::metastore::pending::Pending::new(store, &schema_dir);
    for u in ctx.runtime().block_on(pending.list())? {
        if let Some(e) = entities
            .iter_mut()
            .find(|e| e.landing_path == u.landing_path)
        {
            e.unregistered.push(u);
        }
    }
    Ok(())
}

/// The lease files of the catalog's schema and their holders, by file name.
fn held_leases(ctx: &Context, storage: &crate::table::Storage) -> Result<HashMap<String, Holder>> {
    let (store, schema_dir) = ctx.schema_folder(storage)?;
    let dir = schema_dir.join(LEASE_DIR);
    let unreadable = |e: &dyn std::fmt::Display| Error::Store {
        location: ctx.catalog.shown(),
        reason: format!("could not read the batch leases: {e}"),
    };
    let rt = ctx.runtime();
    let listed = match rt.block_on(store.list_with_delimiter(Some(&dir))) {
        Ok(listed) => listed.objects,
        Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(unreadable(&e)),
    };
    let mut leases = HashMap::new();
    for o in listed {
        let Some(name) = o.location.filename().map(str::to_string) else {
            continue;
        };
        // Released between the listing and the read: not in progress any more.
        let Ok(got) = rt.block_on(async { store.get(&o.location).await?.bytes().await }) else {
            continue;
        };
        // Claim files of a takeover on a local disk are not leases.
        if let Ok(holder) = serde_json::from_slice::<Holder>(&got) {
            leases.insert(name, holder);
        }
    }
    Ok(leases)
}

impl EntityStatus {
    /// The entities as a table, then one line per batch in progress and per failure.
    pub fn to_text(entities: &[EntityStatus]) -> String {
        use std::fmt::Write as _;
        let width = entities
            .iter()
            .map(|e| e.landing_path.len())
            .max()
            .unwrap_or(0)
            .max("entity".len());
        let mut s = format!(
            "{:<width$}  {:>7}  {:>7}  {:>7}  {:>11}  oldest pending\n",
            "entity", "loaded", "pending", "failed", "in progress"
        );
        for e in entities {
            let _ = writeln!(
                s,
                "{:<width$}  {:>7}  {:>7}  {:>7}  {:>11}  {}",
                e.landing_path,
                e.loaded,
                e.pending,
                e.failed,
                e.in_progress.len(),
                e.oldest_pending.as_deref().unwrap_or("-")
            );
        }
        for e in entities {
            e.notes(&mut s);
        }
        s
    }

    /// The lines of its batches in progress, its last failure and its changed batches.
    fn notes(&self, s: &mut String) {
        use std::fmt::Write as _;
        let e = self;
        for p in &e.in_progress {
            let _ = writeln!(
                s,
                "{}/batch_id={}: loading by run {} ({} pid {}) for {:.0} s{}",
                e.landing_path,
                p.batch_id,
                p.run_id,
                p.host,
                p.pid,
                p.age_seconds,
                if p.stale {
                    ", not renewed within the lease TTL: its run is likely dead; the next run of the batch takes it over"
                } else {
                    ""
                }
            );
        }
        if let Some(f) = &e.last_failure {
            let _ = writeln!(
                s,
                "{}/batch_id={}: last run failed: {}",
                e.landing_path, f.batch_id, f.reason
            );
        }
        for u in &e.unregistered {
            let _ = writeln!(
                s,
                "{}: table {}.{} not registered in the catalog: {} (the next run with [metastore], or `bronze register`, registers it)",
                e.landing_path, u.database, u.table, u.reason
            );
        }
        for c in &e.changed {
            let _ = writeln!(
                s,
                "{}/batch_id={}: changed after its load: {}",
                e.landing_path,
                c.batch_id,
                c.change.describe()
            );
        }
    }
}
