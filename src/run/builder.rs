//! [`IngestBuilder`]: an [`Ingest`] from a catalog and options.

use std::sync::Arc;

use super::{Ingest, MemoryRelease, MemoryReleaseFn, Progress, ProgressFn};
use crate::config::{CommitPer, IngestConfig, LockPolicy};
use crate::error::Result;
use crate::store::location::Location;

/// Builds an [`Ingest`]; every setting has a default (see [`IngestConfig`]).
#[derive(Clone)]
pub struct IngestBuilder {
    config: IngestConfig,
    progress: Option<ProgressFn>,
    release: Option<MemoryReleaseFn>,
}

impl std::fmt::Debug for IngestBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl IngestBuilder {
    /// Every setting at its default, writing under `catalog`.
    pub(super) fn new(catalog: Location) -> IngestBuilder {
        IngestBuilder {
            config: IngestConfig {
                catalog,
                ..IngestConfig::default()
            },
            progress: None,
            release: None,
        }
    }

    /// Schema folder under the catalog. Default `bronze`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.config.schema = schema.into();
        self
    }
    /// Use this batch id instead of the folder's `batch_id=<id>`.
    pub fn with_batch_id(mut self, id: impl Into<String>) -> Self {
        self.config.batch_id = Some(id.into());
        self
    }
    /// Use this landing path (`<source>/<entity>`) for the batch folder instead of the
    /// names of the two folders above it (one folder runs only).
    pub fn with_landing_path(mut self, path: impl Into<String>) -> Self {
        self.config.landing_path = Some(path.into());
        self
    }
    /// Envelope field holding the topic. Default `topic`.
    pub fn with_topic_field(mut self, field: impl Into<String>) -> Self {
        self.config.envelope.topic_field = field.into();
        self
    }
    /// Envelope field holding the message id; `None` disables dedup. Default `message_id`.
    pub fn with_id_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.id_field = field;
        self
    }
    /// Envelope field holding the payload; `None`: all non-envelope fields. Default `payload`.
    pub fn with_payload_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.payload_field = field;
        self
    }
    /// Topics processed at once. Default `min(32, topics)`; 1 is sequential.
    pub fn with_max_parallel(mut self, n: usize) -> Self {
        self.config.max_parallel = Some(n);
        self
    }
    /// Threads used to parse files. Default: available parallelism.
    pub fn with_threads(mut self, n: usize) -> Self {
        self.config.threads = Some(n);
        self
    }
    /// Depth beyond which sub-trees are kept as JSON text. Default 16.
    pub fn with_max_depth(mut self, depth: usize) -> Self {
        self.config.flatten.max_depth = depth;
        self
    }
    /// All flattening settings at once (types, evolution, child naming, depth).
    pub fn with_flatten(mut self, flatten: crate::config::FlattenConfig) -> Self {
        self.config.flatten = flatten;
        self
    }
    /// What a field with no column in an existing table does, for every topic without
    /// its own mode. Default [`crate::Evolution::Add`].
    pub fn with_evolution(mut self, evolution: crate::config::Evolution) -> Self {
        self.config.flatten.evolution = evolution;
        self
    }
    /// The evolution mode of one topic.
    pub fn with_topic_evolution(
        mut self,
        topic: impl Into<String>,
        evolution: crate::config::Evolution,
    ) -> Self {
        self.config
            .flatten
            .topic_evolution
            .insert(topic.into(), evolution);
        self
    }
    /// How leaf values are typed. Default [`crate::TypesMode::Infer`].
    pub fn with_types(mut self, types: crate::config::TypesMode) -> Self {
        self.config.flatten.types = types;
        self
    }
    /// Top-level fields forming the dedup key instead of the id.
    pub fn with_dedup_fields(mut self, fields: Option<Vec<String>>) -> Self {
        self.config.envelope.dedup_fields = fields;
        self
    }
    /// How writes to one table are serialized. Default [`LockPolicy::PerTable`].
    pub fn with_lock_policy(mut self, policy: LockPolicy) -> Self {
        self.config.lock_policy = policy;
        self
    }
    /// Object store rooted at `/` used for every table (see [`IngestConfig::object_store`]).
    pub fn with_object_store(
        mut self,
        store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    ) -> Self {
        self.config.object_store = Some(store);
        self
    }
    /// Auto compaction after commits (default on) and its small-file trigger (default 50).
    pub fn with_auto_compact(mut self, on: bool, min_files: u64) -> Self {
        self.config.auto_compact = on;
        self.config.auto_compact_min_files = min_files;
        self
    }
    /// Target size of written files (default 128 MiB).
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.config.target_file_size = bytes;
        self
    }
    /// How rows are grouped into commits. Default [`CommitPer::Table`].
    pub fn with_commit_per(mut self, per: CommitPer) -> Self {
        self.config.commit_per = per;
        self
    }
    /// Bench baseline: each topic task re-reads and re-parses the landing files.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn with_reread_per_topic(mut self, reread: bool) -> Self {
        self.config.reread_per_topic = reread;
        self
    }
    /// Persist staging as `_tmp_raw_load_<batch_id>` even when it fits in memory.
    pub fn with_persist_staging(mut self, persist: bool) -> Self {
        self.config.persist_staging = persist;
        self
    }
    /// Bytes of landing data staged in memory at once; more spills to the staging table.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.config.memory_budget = bytes;
        self
    }
    /// Take the batch lease (default on; see [`IngestConfig::batch_lease`]).
    pub fn with_batch_lease(mut self, on: bool) -> Self {
        self.config.batch_lease = on;
        self
    }
    /// How often a backlog in an object store lists each entity's folders in full
    /// ([`IngestConfig::full_listing_every`]). Default 24 hours.
    pub fn with_full_listing_every(mut self, every: std::time::Duration) -> Self {
        self.config.full_listing_every = every;
        self
    }
    /// Resume from a complete staging table of an earlier run. Default `true`.
    pub fn with_resume(mut self, resume: bool) -> Self {
        self.config.resume = resume;
        self
    }
    /// Simulated crash at the named point (tests only).
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub fn with_failpoint(mut self, name: &str) -> Self {
        self.config.failpoint = Some(name.to_string());
        self
    }
    /// Called as files are parsed and tables written (from worker threads).
    pub fn with_progress(mut self, f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }
    /// Called when a run has just freed much memory ([`MemoryRelease`]), to hand it back
    /// to the OS with process-wide allocator calls (`malloc_trim`, a jemalloc purge): the
    /// `bronze` binary does; without it, freed memory stays with the allocator.
    pub fn with_memory_release(
        mut self,
        f: impl Fn(MemoryRelease) + Send + Sync + 'static,
    ) -> Self {
        self.release = Some(Arc::new(f));
        self
    }
    /// All settings at once (the CLI builds an [`IngestConfig`] from its flags).
    pub fn config_mut(&mut self) -> &mut IngestConfig {
        &mut self.config
    }
    /// Validates the settings and starts the pools and runtime.
    pub fn build(self) -> Result<Ingest> {
        let mut ingest = Ingest::from_config(self.config)?;
        ingest.ctx.progress = self.progress;
        ingest.ctx.release = self.release;
        Ok(ingest)
    }
}
