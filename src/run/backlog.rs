//! A landing zone as a backlog: the `batch_id=` folders under a root that the catalog
//! has not loaded successfully yet ([`Ingest::pending`](super::Ingest::pending)), loaded oldest first per
//! entity ([`Ingest::run_pending`](super::Ingest::run_pending)). Any number of processes may work through one
//! backlog: each batch is taken by one of them through its lease, and a batch found
//! loaded once its lease is held is skipped, so a batch is loaded once however the
//! workers interleave.

use std::collections::{BTreeMap, HashMap};

use super::context::Context;
use super::listing::{BacklogView, Listing, PendingBatch, object_path};
use super::load;
use super::manifest::LandingChange;
use super::prior::IfLoaded;
use crate::error::{Error, Result};
use crate::report::BatchReport;
use crate::store::location::Location;

/// What became of a pending batch in [`Ingest::run_pending`](super::Ingest::run_pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BatchStatus {
    /// Loaded (its report's exit code is 0 or 1).
    Loaded,
    /// The run failed (a table could not be written, a file could not be read): the
    /// batch stays pending, and the entity's later batches wait for it.
    Failed,
    /// Another worker holds its lease: the entity's later batches wait this round.
    Busy,
    /// Another worker loaded it after this one listed the backlog.
    AlreadyLoaded,
    /// An earlier batch of the same entity failed, is busy, or is still being copied:
    /// not loaded this round, so an entity's batches commit in batch id order.
    Waiting,
    /// Its files changed while it was read (the copy step is still writing): skipped
    /// this round, nothing of it loaded.
    Changing,
    /// No `_SUCCESS` marker yet, with [`PendingOptions::require_success`]: the copy step
    /// has not finished it.
    NotReady,
    /// Loaded before, and its folder changed since (files added, changed or removed):
    /// left as loaded and reported, with `late_files = "report"` (or when files were only
    /// removed).
    Changed,
}

/// How [`Ingest::run_pending`](super::Ingest::run_pending) works through a backlog.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PendingOptions {
    /// Run at most this many batches.
    pub max_batches: Option<usize>,
    /// Load only folders holding a `_SUCCESS` marker (the copy step's "done").
    pub require_success: bool,
    /// Start no batch once the batches run so far read this many bytes of landing files
    /// (the batch that crosses it is finished, never cut).
    pub max_bytes: Option<u64>,
    /// Start no batch once this is set (an interrupted `--watch`): the batch running
    /// then is finished.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Batches loaded at once, each entity's still in order (default 1). Each batch in
    /// flight has its own pools and its own memory budget.
    pub max_in_flight: usize,
    /// An entity's batches load in any order: a failed, busy or not yet ready batch
    /// holds none of its entity's others back, and batches in flight may be of one
    /// entity (a backfill spread over every worker). An entity's schema then evolves in
    /// the order its batches commit, not in batch id order.
    pub unordered: bool,
}

impl PendingOptions {
    /// At most `n` batches.
    pub fn with_max_batches(mut self, n: Option<usize>) -> Self {
        self.max_batches = n;
        self
    }

    /// Only folders holding `_SUCCESS`.
    pub fn with_require_success(mut self, on: bool) -> Self {
        self.require_success = on;
        self
    }

    /// No batch started once `flag` is set.
    pub fn with_stop(
        mut self,
        flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Self {
        self.stop = flag;
        self
    }

    /// No batch started once `bytes` of landing files were read.
    pub fn with_max_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// At most `n` batches at once (of different entities).
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// An entity's batches in any order ([`PendingOptions::unordered`]).
    pub fn with_unordered(mut self, on: bool) -> Self {
        self.unordered = on;
        self
    }
}

/// What the batches of one backlog run have used of its bounds, shared by the batches in
/// flight.
#[derive(Default)]
struct Spent {
    runs: std::sync::atomic::AtomicUsize,
    bytes: std::sync::atomic::AtomicU64,
}

/// One pending batch's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BacklogOutcome {
    /// The batch.
    pub batch: PendingBatch,
    /// What happened.
    pub status: BatchStatus,
    /// Why, when it was not loaded.
    pub reason: Option<String>,
    /// The run's report, when it ran to the end.
    pub report: Option<BatchReport>,
}

/// A landing zone as a backlog, with the settings, pools and stores of the
/// [`Ingest`](super::Ingest) it belongs to.
pub(super) struct Backlog<'a> {
    ctx: &'a Context,
}

impl<'a> Backlog<'a> {
    /// The backlog work of `ctx`'s runs.
    pub(super) fn new(ctx: &'a Context) -> Self {
        Backlog { ctx }
    }

    /// [`Ingest::pending`](super::Ingest::pending)'s work.
    pub(super) fn pending(&self, root: impl AsRef<std::path::Path>) -> Result<Vec<PendingBatch>> {
        Ok(self.pending_and_changed(root.as_ref())?.0)
    }

    /// [`Ingest::pending`](super::Ingest::pending), and the loaded batches whose folder changed that are not
    /// pending again (the policy is not `reload`, or files were only removed).
    fn pending_and_changed(
        &self,
        root: &std::path::Path,
    ) -> Result<(Vec<PendingBatch>, Vec<PendingBatch>)> {
        let BacklogView { folders, late, .. } = Listing::new(self.ctx).backlog_view(root)?;
        let mut found: Vec<PendingBatch> = folders
            .into_iter()
            .filter(|(_, run)| !run.is_some_and(|r| r.ok))
            .map(|(b, _)| b)
            .collect();
        let reload = self.ctx.config.late_files == crate::config::LateFiles::Reload;
        let (again, changed): (Vec<PendingBatch>, Vec<PendingBatch>) = late
            .into_iter()
            .partition(|b| reload && b.late.as_ref().is_some_and(LandingChange::reloads));
        found.extend(again);
        found.sort_by(|a, b| (&a.batch_id, &a.landing_path).cmp(&(&b.batch_id, &b.landing_path)));
        Ok((found, changed))
    }

    /// [`Ingest::run_pending`](super::Ingest::run_pending)'s work.
    pub(super) fn run_pending(
        &self,
        root: impl AsRef<std::path::Path>,
        options: &PendingOptions,
    ) -> Result<Vec<BacklogOutcome>> {
        let (pending, changed) = self.pending_and_changed(root.as_ref())?;
        let mut outcomes = if options.max_in_flight <= 1 {
            self.run_batches(pending, options)?
        } else {
            self.run_in_flight(pending, options)?
        };
        outcomes.extend(changed.into_iter().map(|batch| self.changed_outcome(batch)));
        Ok(outcomes)
    }

    /// The outcome of a loaded batch whose folder changed and that is not loaded again:
    /// reported ([`BatchStatus::Changed`]), or failed with `late_files = "fail"`.
    fn changed_outcome(&self, batch: PendingBatch) -> BacklogOutcome {
        let how = batch
            .late
            .as_ref()
            .map(LandingChange::describe)
            .unwrap_or_default();
        let removed = batch.late.as_ref().is_some_and(|c| !c.removed.is_empty());
        let (status, reason) = match self.ctx.config.late_files {
            _ if removed => (
                BatchStatus::Changed,
                format!(
                    "files were removed from its folder after its load: {how}; its rows are kept and it is not loaded again (a rerun would drop the removed files' rows; put them back, or load the new files as a batch of their own)"
                ),
            ),
            crate::config::LateFiles::Fail => (
                BatchStatus::Failed,
                format!(
                    "its folder changed after its load: {how} (late_files = \"fail\"; load it again with `bronze ingest {}`, or set late_files = \"reload\")",
                    batch.folder.display()
                ),
            ),
            _ => (
                BatchStatus::Changed,
                format!(
                    "its folder changed after its load: {how}; not loaded again (late_files = \"report\"): `bronze ingest {}` loads it again",
                    batch.folder.display()
                ),
            ),
        };
        BacklogOutcome {
            batch,
            status,
            reason: Some(reason),
            report: None,
        }
    }

    /// [`Ingest::run_batches`](super::Ingest::run_batches) on up to `options.max_in_flight` groups of entities at once,
    /// each group by its own loader (own pools, runtime and counters, so each report counts
    /// its own run; tables shared with the other groups as with another process: a
    /// conflicting commit is planned again). Outcomes in the backlog's order.
    fn run_in_flight(
        &self,
        pending: Vec<PendingBatch>,
        options: &PendingOptions,
    ) -> Result<Vec<BacklogOutcome>> {
        let order: HashMap<(String, String), usize> = pending
            .iter()
            .enumerate()
            .map(|(i, b)| ((b.landing_path.clone(), b.batch_id.clone()), i))
            .collect();
        let groups = deal(pending, options);
        let results = self.run_groups(groups, options);
        let mut outcomes = Vec::new();
        for r in results {
            outcomes.extend(r?);
        }
        outcomes.sort_by_key(|o| {
            order
                .get(&(o.batch.landing_path.clone(), o.batch.batch_id.clone()))
                .copied()
        });
        Ok(outcomes)
    }

    /// Runs each non-empty group on a thread of its own, by a loader of its own, its
    /// batches in batch id order.
    fn run_groups(
        &self,
        groups: Vec<Vec<PendingBatch>>,
        options: &PendingOptions,
    ) -> Vec<Result<Vec<BacklogOutcome>>> {
        let spent = Spent::default();
        std::thread::scope(|s| {
            let handles: Vec<_> = groups
                .into_iter()
                .filter(|g| !g.is_empty())
                .map(|mut group| {
                    let spent = &spent;
                    s.spawn(move || {
                        group.sort_by(|a, b| {
                            (&a.batch_id, &a.landing_path).cmp(&(&b.batch_id, &b.landing_path))
                        });
                        let mut ctx = Context::new(self.ctx.config.clone())?;
                        ctx.progress = self.ctx.progress.clone();
                        ctx.release = self.ctx.release.clone();
                        Backlog::new(&ctx).run_batches_within(group, options, spent)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Internal {
                            what: "a thread loading batches of the backlog panicked".into(),
                        })
                    })
                })
                .collect()
        })
    }

    /// [`Ingest::run_batches`](super::Ingest::run_batches)'s work.
    pub(super) fn run_batches(
        &self,
        batches: Vec<PendingBatch>,
        options: &PendingOptions,
    ) -> Result<Vec<BacklogOutcome>> {
        self.run_batches_within(batches, options, &Spent::default())
    }

    /// [`Ingest::run_batches`](super::Ingest::run_batches) counting its runs and bytes into `spent`, which batches in
    /// flight beside it share.
    fn run_batches_within(
        &self,
        batches: Vec<PendingBatch>,
        options: &PendingOptions,
        spent: &Spent,
    ) -> Result<Vec<BacklogOutcome>> {
        use std::sync::atomic::Ordering::SeqCst;
        let max_batches = options.max_batches;
        let mut held_up: HashMap<String, String> = HashMap::new();
        let mut outcomes = Vec::new();
        for batch in batches {
            if let Some(first) = held_up
                .get(&batch.landing_path)
                .filter(|_| !options.unordered)
            {
                outcomes.push(BacklogOutcome {
                    reason: Some(format!("waits for batch {first} of {}", batch.landing_path)),
                    batch,
                    status: BatchStatus::Waiting,
                    report: None,
                });
                continue;
            }
            if options.require_success && !self.has_success_marker(&batch)? {
                held_up.insert(batch.landing_path.clone(), batch.batch_id.clone());
                outcomes.push(BacklogOutcome {
                    reason: Some("no _SUCCESS marker yet".into()),
                    batch,
                    status: BatchStatus::NotReady,
                    report: None,
                });
                continue;
            }
            if bounds_reached(options, spent) {
                break;
            }
            // Counted before the run: batches in flight beside this one never start more
            // than `max_batches` between them.
            let runs = spent.runs.fetch_add(1, SeqCst);
            if max_batches.is_some_and(|m| runs >= m) {
                break;
            }
            let outcome = self.run_pending_one(batch);
            let read = outcome.report.as_ref().map_or(0, |r| r.bytes_read);
            spent.bytes.fetch_add(read, SeqCst);
            if !matches!(
                outcome.status,
                BatchStatus::Loaded | BatchStatus::AlreadyLoaded
            ) {
                held_up.insert(
                    outcome.batch.landing_path.clone(),
                    outcome.batch.batch_id.clone(),
                );
            }
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    fn run_pending_one(&self, batch: PendingBatch) -> BacklogOutcome {
        let folders = std::slice::from_ref(&batch.folder);
        // A loaded batch whose folder changed is loaded again, as a rerun.
        let again = batch.late.as_ref().map(|late| {
            format!(
                "loaded again: its folder changed after its load: {}",
                late.describe()
            )
        });
        let run = match &again {
            Some(why) => {
                load::run_folders(self.ctx, folders, IfLoaded::Reload).map(|mut report| {
                    report.warnings.push(why.clone());
                    report
                })
            }
            None => load::run_folders(self.ctx, folders, IfLoaded::Stop),
        };
        let (status, reason, report) = match run {
            Ok(report) if report.exit_code() < 2 => (BatchStatus::Loaded, again, Some(report)),
            Ok(report) => {
                let why = report
                    .failed_tables()
                    .map(|(t, o)| format!("{t}: {}", o.error.as_deref().unwrap_or("failed")))
                    .next()
                    .unwrap_or_else(|| report.invariant.clone());
                (BatchStatus::Failed, Some(why), Some(report))
            }
            Err(e) => {
                let status = match &e {
                    Error::BatchLeased { .. } | Error::LeaseLost { .. } => BatchStatus::Busy,
                    Error::AlreadyLoaded { .. } => BatchStatus::AlreadyLoaded,
                    Error::FileChanged { .. } => BatchStatus::Changing,
                    _ => BatchStatus::Failed,
                };
                let why = self
                    .ctx
                    .config
                    .storage_options
                    .mask(&crate::error::chain(&e));
                (status, Some(why), None)
            }
        };
        BacklogOutcome {
            batch,
            status,
            reason,
            report,
        }
    }

    /// Whether the batch's folder holds a `_SUCCESS` marker.
    fn has_success_marker(&self, batch: &PendingBatch) -> Result<bool> {
        let marker = format!("{}/_SUCCESS", batch.folder.to_string_lossy());
        match Location::parse(&marker)? {
            Location::Local(path) => Ok(path.is_file()),
            Location::Url(url) => {
                use deltalake::logstore::object_store::ObjectStoreExt as _;
                let store = self.ctx.store_of(&url)?;
                let path = object_path(&url, &marker)?;
                match self.ctx.runtime().block_on(store.head(&path)) {
                    Ok(_) => Ok(true),
                    Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Ok(false),
                    Err(e) => Err(Error::Store {
                        location: self.ctx.config.storage_options.mask(&marker),
                        reason: e.to_string(),
                    }),
                }
            }
        }
    }
}

/// `pending` dealt into `options.max_in_flight` groups of about equal length: an entity's
/// batches stay in one group (each batch is a unit of its own when `unordered`), the
/// largest units first, each to the group with the fewest batches.
fn deal(pending: Vec<PendingBatch>, options: &PendingOptions) -> Vec<Vec<PendingBatch>> {
    let mut groups: Vec<Vec<PendingBatch>> = vec![Vec::new(); options.max_in_flight];
    let mut by_entity: BTreeMap<String, Vec<PendingBatch>> = BTreeMap::new();
    for (i, b) in pending.into_iter().enumerate() {
        // Unordered: every batch a unit of its own, dealt round the groups.
        let unit = if options.unordered {
            format!("{i:020}")
        } else {
            b.landing_path.clone()
        };
        by_entity.entry(unit).or_default().push(b);
    }
    let mut sized: Vec<Vec<PendingBatch>> = by_entity.into_values().collect();
    sized.sort_by(|a, b| {
        b.len()
            .cmp(&a.len())
            .then(a[0].landing_path.cmp(&b[0].landing_path))
    });
    for entity in sized {
        if let Some(least) = groups.iter_mut().min_by_key(|g| g.len()) {
            least.extend(entity);
        }
    }
    groups
}

/// Whether no batch starts any more: `options.stop` is set, or the batches run read
/// `options.max_bytes`.
fn bounds_reached(options: &PendingOptions, spent: &Spent) -> bool {
    let stopped = options
        .stop
        .as_ref()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed));
    stopped
        || options
            .max_bytes
            .is_some_and(|m| spent.bytes.load(std::sync::atomic::Ordering::SeqCst) >= m)
}
