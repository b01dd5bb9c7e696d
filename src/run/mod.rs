//! Runs: [`Ingest`] owns what every run shares ([`context`]: the settings, pools,
//! runtime and lock map) and hands each job to the file that does it.
//!
//! A batch ([`Ingest::run_folders`]) is one run of [`load`], which builds a [`state::Run`]
//! and reads as the pipeline: discover ([`discovery`]) → lease and prior runs
//! ([`leases`], [`prior`]) → stage, parse once ([`staging`]) → the tables ([`tables`]:
//! topics fanned out on the fan-out pool by [`fanout`], each topic's task in [`topic`]
//! flattens, then [`write`] commits each table under its lock), `_corrupt_records`
//! ([`corrupt`]) beside them → `_run_control` ([`record`], written once, after the
//! parallel phase) → manifests ([`manifest`]) → [`BatchReport`]. A landing zone is a
//! [`backlog`], watched by [`status`] and cleaned by [`clean`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::IngestConfig;
use crate::error::Result;
use crate::locks::TableLocks;
use crate::maintenance::Maintenance;
use crate::report::BatchReport;

mod backlog;
mod builder;
mod clean;
mod context;
mod corrupt;
mod counters;
mod discovery;
mod fanout;
mod gather;
mod hints;
mod leases;
mod ledger;
mod listing;
mod load;
mod manifest;
pub mod metrics;
mod prior;
mod record;
mod register;
mod staging;
mod state;
mod status;
mod tables;
mod topic;
mod write;

use backlog::Backlog;
pub use backlog::{BacklogOutcome, BatchStatus, PendingOptions};
pub use builder::IngestBuilder;
pub use clean::{
    CLEAN_ROW, CleanAction, CleanOptions, CleanOutcome, CleanStatus, MIN_DELETE_RETENTION,
};
use context::Context;
pub use listing::PendingBatch;
pub use manifest::{Cleaned, LandingChange, Manifest, ManifestFile};
use prior::IfLoaded;
pub use status::{Changed, EntityStatus, Failure, InProgress};

/// Default cap on topics processed at once with an object store
/// ([`IngestConfig::object_store`]), where each commit waits on the network: 32 in flight
/// overlap those waits (BENCHMARKS.md, "End to end on storage with 20 ms per request").
pub const DEFAULT_MAX_PARALLEL: usize = 32;

/// Memory a topic in flight over the memory budget takes per byte of its landing data
/// (staged slice, flattened rows, writer buffers), for sizing waves and slices.
pub const MEMORY_PER_LANDING_BYTE: u64 = 4;

/// Memory a batch staged in memory takes per byte of landing data at its peak, for the
/// budget check: landing text, Arrow staging, flattened rows waiting for their commit
/// and the tables being written. Measured, the process included: 2.0-2.5x on generated
/// batches of 343-805 MB, 2.9x on 474 MB of real records (short lines, many rows), 3.7x
/// on an 80 MB one (the process's ~60 MB weighs more there); admitted at 3x, each stays
/// under the budget's bound of 1.25 times plus the idle process (BENCHMARKS.md).
pub const IN_MEMORY_PER_LANDING_BYTE: u64 = 3;

pub use crate::naming::RUN_CONTROL_TABLE;

/// Where a run is; passed to the progress callback.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Progress {
    /// The batch folder was listed.
    Discovered {
        /// Data files found.
        files: usize,
        /// Bytes on disk.
        bytes: u64,
    },
    /// One more file was parsed.
    FileStaged {
        /// Files parsed so far.
        done: usize,
        /// Files in the batch.
        total: usize,
    },
    /// One more (topic, table) write finished.
    TableWritten {
        /// The table.
        table: String,
        /// The topic.
        topic: String,
        /// Writes finished so far (an estimate until all topics are flattened).
        done: usize,
        /// Topics in the batch.
        topics: usize,
    },
}

/// A progress callback; called from worker threads, so it must be cheap and thread-safe.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// A configured loader. Build one with [`Ingest::builder`], then call [`Ingest::run`] per
/// batch folder. Cheap to reuse across batches: it keeps its pools and runtime.
pub struct Ingest {
    ctx: Context,
}

/// When a run has just freed much memory: the moments a process-wide allocator hook
/// ([`IngestBuilder::with_memory_release`]) may hand free pages back to the OS. The
/// library itself never calls the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryRelease {
    /// A batch was staged in memory: the files' text is freed, and flattening will soon
    /// need as much again.
    AfterStaging,
    /// An over-budget batch is staged (its chunks and ids freed, its topics' slices
    /// next), or its staging chunks shrank (its ids take more of the budget): the
    /// pages freed are not needed again soon. Never between alike chunks, waves or
    /// slices, which reuse each other's freed memory.
    BetweenPhases,
}

/// A hook called at each [`MemoryRelease`] point, from the run's threads.
pub type MemoryReleaseFn = Arc<dyn Fn(MemoryRelease) + Send + Sync>;

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("config", &self.ctx.config)
            .finish_non_exhaustive()
    }
}

pub use crate::run_control::INVARIANT_ROW;

impl Ingest {
    /// A builder writing under `catalog`: a local folder (created if missing) or an
    /// object store URL ([`Location::parse`](crate::store::location::Location::parse)).
    pub fn builder(catalog: impl Into<crate::store::location::Location>) -> IngestBuilder {
        IngestBuilder::new(catalog.into())
    }

    /// An `Ingest` from a full configuration.
    pub fn from_config(config: IngestConfig) -> Result<Ingest> {
        Ok(Ingest {
            ctx: Context::new(config)?,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &IngestConfig {
        &self.ctx.config
    }

    /// The catalog this `Ingest` loads into (its tables' address, lock map and runtime).
    pub fn catalog(&self) -> &Catalog {
        &self.ctx.catalog
    }

    /// The lock map shared by every run of this `Ingest` (maintenance takes the same locks).
    pub fn locks(&self) -> &Arc<TableLocks> {
        self.ctx.locks()
    }

    /// `<catalog>/<schema>`, absolute (the catalog folder is created if missing).
    pub fn schema_dir(&self) -> Result<PathBuf> {
        self.ctx.catalog.schema_dir()
    }

    /// The catalog's storage as a run sees it (failpoints armed included).
    #[cfg(feature = "testing")]
    pub(crate) fn storage(&self) -> Result<crate::table::Storage> {
        self.ctx.storage()
    }

    /// Maintenance on this catalog's tables, under the same table locks as its loads.
    pub fn maintenance(&self) -> Maintenance<'_> {
        Maintenance::new(&self.ctx.catalog)
    }

    /// Loads one landed batch folder. Lines that are not messages go to
    /// `_corrupt_records`; a table whose write fails is reported (exit code 2) and the
    /// others are still written. Returns `Err` only for run-level failures: a bad batch
    /// id, a missing folder or no data files, an unreadable file.
    pub fn run(&self, batch_dir: impl AsRef<Path>) -> Result<BatchReport> {
        self.run_folders(&[batch_dir.as_ref().to_path_buf()])
    }

    /// Loads several landed folders of one batch id as one batch (one staging, one
    /// dedup across them, one commit per table, one lease): the folders' files are read
    /// in landing path order, then by name, so the first of equal message ids wins in
    /// that order. Each row keeps its folder's `_landing_path`; a rerun of the same
    /// folders replaces exactly their rows. Folders with different batch ids are an
    /// error ([`Error::MixedBatchIds`](crate::Error::MixedBatchIds)).
    pub fn run_folders(&self, batch_dirs: &[impl AsRef<Path>]) -> Result<BatchReport> {
        load::run_folders(&self.ctx, batch_dirs, IfLoaded::Reload)
    }

    /// The `batch_id=<id>` folders under `root` (`landing/`, `landing/<source>/` or
    /// `landing/<source>/<entity>/`, local or in an object store) that the catalog has
    /// not loaded successfully (a batch whose last run failed is pending again), sorted
    /// by batch id, then landing path.
    ///
    /// A loaded batch whose folder changed after its load (a file landed late or
    /// changed; [`crate::IngestConfig::late_files`] `reload`, the default) is pending
    /// again, with [`PendingBatch::late`] saying how it changed.
    pub fn pending(&self, root: impl AsRef<Path>) -> Result<Vec<PendingBatch>> {
        Backlog::new(&self.ctx).pending(root)
    }

    /// Loads the pending batches under `root` ([`Ingest::pending`]), oldest batch id
    /// first, at most `options.max_batches` runs, none started once
    /// `options.max_bytes` of landing files were read. Within an entity (landing path)
    /// batches load in batch id order: once one fails, is busy with another worker, is
    /// still being copied or (with `require_success`) has no `_SUCCESS` yet, the
    /// entity's later batches wait (status [`BatchStatus::Waiting`]) until a later
    /// invocation.
    pub fn run_pending(
        &self,
        root: impl AsRef<Path>,
        options: &PendingOptions,
    ) -> Result<Vec<BacklogOutcome>> {
        Backlog::new(&self.ctx).run_pending(root, options)
    }

    /// Loads `batches` (as [`Ingest::pending`] lists them: one worker's share of a
    /// backlog, such as a Spark task's) in the order given, with [`Ingest::run_pending`]'s
    /// rules: within an entity, a batch that fails, is busy or is not ready holds the
    /// entity's later batches back ([`BatchStatus::Waiting`]); a batch another worker
    /// loaded meanwhile is [`BatchStatus::AlreadyLoaded`], not loaded twice.
    pub fn run_batches(
        &self,
        batches: Vec<PendingBatch>,
        options: &PendingOptions,
    ) -> Result<Vec<BacklogOutcome>> {
        Backlog::new(&self.ctx).run_batches(batches, options)
    }

    /// Where the backlog under `root` stands (the folders [`Ingest::pending`] lists),
    /// one row per entity, in landing path order.
    pub fn status(&self, root: impl AsRef<Path>) -> Result<Vec<EntityStatus>> {
        status::status(&self.ctx, root)
    }

    /// [`Ingest::status`] as Prometheus metrics (`bronze status --metrics`): per entity,
    /// the batches pending, failed and in progress, the age of its oldest batch not loaded
    /// (since its folder's newest file landed: one listing of that folder), and when a
    /// batch last loaded.
    pub fn backlog_metrics(&self, root: impl AsRef<Path>) -> Result<String> {
        status::backlog_metrics(&self.ctx, root)
    }

    /// With [`crate::IngestConfig::metrics_push`]: [`Ingest::backlog_metrics`] of `root`
    /// pushed to the gateway (job `bronze`, group `backlog=<root>`, replaced), as
    /// `ingest --pending --watch` does after each round. `Ok(Some(warning))` when the
    /// gateway could not take them.
    pub fn push_backlog_metrics(&self, root: impl AsRef<Path>) -> Result<Option<String>> {
        status::push_backlog_metrics(&self.ctx, root)
    }

    /// Cleans the landing files of the batches under `root` loaded successfully at least
    /// `options.older_than` ago whose folder still matches their manifest
    /// ([`CleanOptions`]); batches not loaded, loaded more recently, or already cleaned
    /// are left alone and not listed.
    pub fn clean(
        &self,
        root: impl AsRef<Path>,
        options: &CleanOptions,
    ) -> Result<Vec<CleanOutcome>> {
        clean::clean(&self.ctx, root, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::naming::TableName;

    fn topic_threads(b: IngestBuilder) -> usize {
        b.build().unwrap().ctx.fanout_threads()
    }

    #[test]
    fn topics_in_flight_default_to_two_per_core_locally_and_32_on_an_object_store() {
        let dir = tempfile::tempdir().unwrap();
        let local = |threads| topic_threads(Ingest::builder(dir.path()).with_threads(threads));
        assert_eq!(local(1), 2);
        assert_eq!(local(2), 4);
        assert_eq!(local(8), 16);
        assert_eq!(local(32), DEFAULT_MAX_PARALLEL);
        let store: Arc<deltalake::logstore::object_store::DynObjectStore> =
            Arc::new(deltalake::logstore::object_store::memory::InMemory::new());
        let remote = Ingest::builder(dir.path())
            .with_threads(2)
            .with_object_store(store);
        assert_eq!(topic_threads(remote), DEFAULT_MAX_PARALLEL);
        let capped = Ingest::builder(dir.path())
            .with_threads(2)
            .with_max_parallel(3);
        assert_eq!(topic_threads(capped), 3);
    }

    /// A commit that loses to another process's conflicting commit is planned again (as
    /// `_corrupt_records`' replace and `_run_control`'s append now are, beside the topic
    /// tables'), counted; any other error ends it at once.
    #[test]
    fn a_write_that_loses_a_commit_conflict_is_planned_again_and_counted() {
        use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
        let dir = tempfile::tempdir().unwrap();
        let ingest = Ingest::builder(dir.path()).build().unwrap();
        let table = TableName::system(crate::naming::CORRUPT_TABLE);
        let conflict = || {
            Error::delta(
                table.as_str(),
                "write",
                deltalake::DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(CommitConflictError::ConcurrentAppend),
                },
            )
        };
        let mut calls = 0;
        let written = ingest.catalog().replanned(&table, || {
            calls += 1;
            if calls < 3 {
                Err(conflict())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(written.unwrap(), 3);
        assert_eq!(ingest.catalog().commit_replans(), 2);
        let mut calls = 0;
        let failed: Result<()> = ingest.catalog().replanned(&table, || {
            calls += 1;
            Err(Error::Internal {
                what: "not a conflict".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(calls, 1);
    }
}
