//! What every run of an [`Ingest`](super::Ingest) shares: its settings, thread pools,
//! catalog (tables, locks, runtime), landing stores and callbacks, and the services the
//! steps of a run call on them (the runtime, the catalog's storage, landing files read,
//! progress told, failpoints).

use std::sync::Arc;

use deltalake::logstore::object_store::DynObjectStore;

use super::{DEFAULT_MAX_PARALLEL, MemoryRelease, MemoryReleaseFn, Progress, ProgressFn};
use crate::catalog::Catalog;
use crate::config::IngestConfig;
use crate::error::{Error, Result};
use crate::locks::TableLocks;
use crate::source::discover;
use crate::store::location::Location;
use crate::table::Storage;

/// Default topics in flight per core on a local catalog, where a commit is CPU and
/// file-system work: more only add context switches and memory (dense historical batch
/// on 2 cores: 4 in flight as fast as 8 with 15 % less peak memory; 32 in flight were
/// slower than 8; BENCHMARKS.md).
const LOCAL_PARALLEL_PER_CORE: usize = 2;

/// Topics processed at once unless `max_parallel` says: [`DEFAULT_MAX_PARALLEL`] on an
/// object store, [`LOCAL_PARALLEL_PER_CORE`] per parse thread (at most
/// [`DEFAULT_MAX_PARALLEL`]) on a local catalog.
fn default_max_parallel(config: &IngestConfig, threads: usize) -> usize {
    if config.object_store.is_some() || config.catalog.local().is_none() {
        DEFAULT_MAX_PARALLEL
    } else {
        (LOCAL_PARALLEL_PER_CORE * threads).clamp(2, DEFAULT_MAX_PARALLEL)
    }
}

/// A pool of `threads` named `bronze-<name>-<i>`, counting its threads' store retries.
pub(super) fn pool(
    threads: usize,
    name: &'static str,
    retries: &crate::store::retries::RetryCounter,
) -> Result<rayon::ThreadPool> {
    let retries = retries.clone();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("bronze-{name}-{i}"))
        .start_handler(move |_| retries.install_on_this_thread())
        .build()
        .map_err(|e| Error::Runtime {
            what: "thread pool",
            source: Box::new(e),
        })
}

/// The shared part of every run: built once per [`Ingest`](super::Ingest), borrowed
/// by each run's steps.
pub(super) struct Context {
    pub(super) config: IngestConfig,
    pub(super) parse_pool: rayon::ThreadPool,
    pub(super) fanout_pool: rayon::ThreadPool,
    pub(super) catalog: Catalog,
    /// Stores of landing buckets and containers, by `scheme://authority`.
    landing_stores: dashmap::DashMap<String, Arc<DynObjectStore>>,
    pub(super) progress: Option<ProgressFn>,
    pub(super) release: Option<MemoryReleaseFn>,
}

impl Context {
    /// The pools, catalog and runtime of `config`, validated.
    pub(super) fn new(config: IngestConfig) -> Result<Context> {
        config.validate()?;
        let threads = config
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        let catalog = Catalog::new(&config, threads)?;
        let parse_pool = pool(threads, "parse", catalog.retry_counter())?;
        // Topic tasks spend most of their time waiting on commits, so they get their own
        // pool of `max_parallel` threads rather than the parse pool's (one per core).
        let parallel = config
            .max_parallel
            .unwrap_or_else(|| default_max_parallel(&config, threads));
        let fanout_pool = pool(parallel, "topic", catalog.retry_counter())?;
        Ok(Context {
            config,
            parse_pool,
            fanout_pool,
            catalog,
            landing_stores: dashmap::DashMap::new(),
            progress: None,
            release: None,
        })
    }

    /// Topics in flight at once on the fan-out pool.
    pub(super) fn fanout_threads(&self) -> usize {
        self.fanout_pool.current_num_threads()
    }

    /// The catalog's runtime, which every store call of a run blocks on.
    pub(super) fn runtime(&self) -> &tokio::runtime::Runtime {
        self.catalog.runtime()
    }

    /// The lock map shared by every run of this `Ingest` (maintenance takes the same locks).
    pub(super) fn locks(&self) -> &Arc<TableLocks> {
        self.catalog.locks()
    }

    /// The catalog's storage (wrapped by the `before_commit` crash point or the
    /// `store_jitter` failpoint when armed, on a catalog reached through one store rooted
    /// at `/`: a local folder or an injected store; a catalog at an object store URL opens
    /// its stores per table, and runs unwrapped).
    pub(super) fn storage(&self) -> Result<Storage> {
        #[cfg(feature = "failpoints")]
        {
            type Wrap = fn(
                Arc<deltalake::logstore::object_store::DynObjectStore>,
            ) -> Arc<deltalake::logstore::object_store::DynObjectStore>;
            let wrap: Option<Wrap> =
                if self.failpoint_hit("before_commit") && crate::failpoint::kill_action() {
                    Some(crate::failpoint::BeforeCommitStore::wrap)
                } else if self.failpoint_hit(crate::failpoint::JITTER) {
                    Some(crate::failpoint::JitterStore::wrap)
                } else {
                    crate::failpoint::upkeep_wrap(|p| self.failpoint_hit(p))
                };
            let root = match (&self.config.object_store, self.config.catalog.local()) {
                (Some(store), _) => Some(Arc::clone(store)),
                (None, Some(_)) => Some(Arc::new(crate::store::local::LocalLog::new())
                    as Arc<deltalake::logstore::object_store::DynObjectStore>),
                (None, None) => None,
            };
            if let (Some(wrap), Some(root)) = (wrap, root) {
                return self.catalog.storage_with(Some(wrap(root)));
            }
        }
        self.catalog.storage()
    }

    /// The store holding the schema folder (the local file system for a local catalog)
    /// and the folder's path in it: where the leases live.
    pub(super) fn schema_folder(
        &self,
        storage: &Storage,
    ) -> Result<(
        Arc<DynObjectStore>,
        deltalake::logstore::object_store::path::Path,
    )> {
        storage.schema_folder()
    }

    pub(super) fn release_memory(&self, when: MemoryRelease) {
        if let Some(f) = &self.release {
            f(when);
        }
    }

    pub(super) fn report_progress(&self, p: Progress) {
        if let Some(f) = &self.progress {
            f(&p);
        }
    }

    /// The armed simulated read fault of `file` ([`crate::failpoint::SIMULATED`], tests
    /// only), whether it is read now or was fetched ahead.
    pub(super) fn simulated_read_faults(&self, _file: &discover::SourceFile) -> Result<()> {
        #[cfg(feature = "failpoints")]
        for point in crate::failpoint::SIMULATED {
            if self.failpoint_hit(point) {
                crate::failpoint::before_read(point, _file)?;
            }
        }
        Ok(())
    }

    /// Reads a landing file, through the configured object store when there is one.
    pub(super) fn read_landing_file(
        &self,
        file: &discover::SourceFile,
    ) -> Result<crate::source::read::Decoded> {
        self.simulated_read_faults(file)?;
        match self.landing_store(std::slice::from_ref(file))? {
            Some(store) => {
                crate::source::read::read_file_from_store(file, store.as_ref(), self.runtime())
            }
            None => crate::source::read::read_file(file),
        }
    }

    /// The object store landing `files` are read from: the injected one
    /// ([`IngestConfig::object_store`]), the store of their bucket or container, or `None`
    /// on the local file system.
    pub(super) fn landing_store(
        &self,
        files: &[discover::SourceFile],
    ) -> Result<Option<Arc<DynObjectStore>>> {
        if self.config.object_store.is_some() {
            return Ok(self.catalog.object_store().cloned());
        }
        match files.first().map(|f| f.name.as_str()) {
            Some(name) if name.contains("://") => match Location::parse(name)? {
                Location::Url(url) => self.store_of(&url).map(Some),
                Location::Local(_) => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// The store of `url`'s bucket or container, built once per `Ingest` and kept.
    pub(super) fn store_of(&self, url: &url::Url) -> Result<Arc<DynObjectStore>> {
        let key = format!("{}://{}", url.scheme(), url.authority());
        if let Some(store) = self.landing_stores.get(&key) {
            return Ok(Arc::clone(&store));
        }
        let store = self.catalog.meter(crate::store::location::store_for(
            url,
            &self.config.storage_options,
        )?);
        self.landing_stores.insert(key, Arc::clone(&store));
        Ok(store)
    }

    /// Whether the named failpoint is armed (`failpoints` feature only).
    #[cfg(feature = "failpoints")]
    pub(super) fn failpoint_hit(&self, name: &str) -> bool {
        self.config.failpoint.as_deref() == Some(name)
            || std::env::var("BRONZE_FAILPOINT").ok().as_deref() == Some(name)
    }

    /// Simulated crash at a named point (tests only, `failpoints` feature).
    pub(super) fn failpoint(&self, name: &'static str) -> Result<()> {
        #[cfg(feature = "failpoints")]
        {
            if self.failpoint_hit(name) {
                if crate::failpoint::kill_action() {
                    crate::failpoint::kill_self(name);
                }
                if crate::failpoint::pause_action() {
                    crate::failpoint::pause(name);
                    return Ok(());
                }
                return Err(Error::Failpoint { name });
            }
        }
        let _ = name;
        Ok(())
    }
}
