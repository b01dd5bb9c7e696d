//! [`Catalog`]: a catalog's schema as every operation on its tables reaches it, shared by
//! loads ([`crate::Ingest`]) and maintenance ([`crate::maintenance::Maintenance`]).

use std::path::PathBuf;
use std::sync::Arc;

use deltalake::logstore::object_store::path::Path as StorePath;

use deltalake::logstore::object_store::DynObjectStore;

use crate::config::IngestConfig;
use crate::error::{Error, Result};
use crate::locks::TableLocks;
use crate::naming::TableName;
use crate::store::location::{Location, StorageOptions, store_for};
use crate::store::metered::CallCounter;
use crate::store::retries::RetryCounter;
use crate::store::single_writer::SingleWriter;
use crate::table::{Compression, Storage};

/// deltalake's S3 option by which its users accept the risks of a store without
/// put-if-absent; `bronze` reads it as a declared single writer.
const UNSAFE_RENAME: &str = "AWS_S3_ALLOW_UNSAFE_RENAME";

fn is_s3(location: &Location) -> bool {
    matches!(location, Location::Url(u) if matches!(u.scheme(), "s3" | "s3a"))
}

/// A catalog's schema as every operation on its tables reaches it: where the tables live
/// (a local folder, or an injected object store), how data files are written (target
/// size, compression, auto compaction), the lock map that serializes writes to one table
/// within this process, and the runtime that drives storage I/O. Cheap to clone (the
/// clones share the locks and the runtime): an [`Ingest`](crate::Ingest) owns one, and
/// [`Maintenance::new`](crate::maintenance::Maintenance::new) works over the same one
/// ([`Ingest::maintenance`](crate::Ingest::maintenance)), so loads and maintenance of
/// one process never race on a table.
#[derive(Clone)]
pub struct Catalog {
    root: Location,
    schema: String,
    /// The store of the catalog's bucket or container (rooted at its top): the one
    /// injected by the caller, or built from the location and `options` on first use.
    object_store: Option<Arc<DynObjectStore>>,
    options: StorageOptions,
    target_file_size: u64,
    compression: Compression,
    auto_compact_at: Option<u64>,
    locks: Arc<TableLocks>,
    runtime: Arc<tokio::runtime::Runtime>,
    /// One process at a time writes this catalog ([`IngestConfig::single_writer`]).
    single_writer: bool,
    /// Calls made to the catalog's store and the landing stores of its runs.
    calls: CallCounter,
    /// Retries the object store client made on this catalog's runtime.
    retries: RetryCounter,
    /// Commits planned again after another writer's conflicting commit.
    replans: Arc<std::sync::atomic::AtomicU64>,
    /// Why the store cannot put-if-absent (`Some`), or that it can (`None`), once probed.
    put_if_absent: Arc<std::sync::OnceLock<Option<String>>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("root", &self.root)
            .field("schema", &self.schema)
            .field("object_store", &self.object_store.is_some())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// The catalog `config` names, with its own lock map and an I/O runtime of `threads`
    /// worker threads (2 to 8).
    pub fn new(config: &IngestConfig, threads: usize) -> Result<Catalog> {
        let retries = RetryCounter::default();
        let on_start = retries.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.clamp(2, 8))
            .thread_name("bronze-io")
            .on_thread_start(move || on_start.install_on_this_thread())
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime {
                what: "tokio runtime",
                source: Box::new(e),
            })?;
        let options = config.storage_options.clone();
        let calls = CallCounter::default();
        let single_writer = config.single_writer
            || options
                .get(UNSAFE_RENAME)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(Catalog {
            object_store: match (&config.object_store, &config.catalog) {
                (Some(store), _) => Some(Arc::clone(store)),
                (None, Location::Url(url)) if single_writer => {
                    Some(SingleWriter::wrap(store_for(url, &options)?))
                }
                (None, Location::Url(url)) => Some(store_for(url, &options)?),
                (None, Location::Local(_)) => None,
            }
            .map(|store| calls.meter(store)),
            calls,
            root: config.catalog.clone(),
            schema: config.schema.clone(),
            options,
            target_file_size: config.target_file_size,
            compression: config.compression,
            auto_compact_at: config.auto_compact.then_some(config.auto_compact_min_files),
            locks: Arc::new(TableLocks::new(config.lock_policy)),
            runtime: Arc::new(runtime),
            single_writer,
            put_if_absent: Arc::default(),
            retries,
            replans: Arc::default(),
        })
    }

    /// Checks, once per catalog, that an S3 catalog's store refuses a second create of
    /// one object: Delta commits and the batch lease rely on put-if-absent, and an
    /// S3-compatible store without it (conditional put disabled, or `If-None-Match`
    /// ignored) would let two writers overwrite each other's commits. Refused with
    /// [`Error::Store`] unless the catalog is declared single-writer. ADLS, GCS and
    /// local disks always have it (not probed).
    pub(crate) fn check_put_if_absent(&self) -> Result<()> {
        if self.single_writer || !is_s3(&self.root) {
            return Ok(());
        }
        let Some((store, dir)) = self.schema_store()? else {
            return Ok(());
        };
        if self.put_if_absent.get().is_none() {
            let probe = dir
                .clone()
                .join(crate::naming::LEASE_DIR)
                .join(format!(".put-if-absent-probe-{}", uuid::Uuid::new_v4()).as_str());
            match self
                .runtime
                .block_on(crate::lease::put_if_absent_refusal(store.as_ref(), &probe))
            {
                Ok(verdict) => {
                    let _ = self.put_if_absent.set(verdict);
                }
                // Unreachable, no bucket, no credentials: the run's first real request
                // says so, with its hint.
                Err(_) => return Ok(()),
            }
        }
        match self.put_if_absent.get() {
            Some(Some(reason)) => Err(Error::Store {
                location: self.shown(),
                reason: reason.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Its object store options (credentials among them).
    pub(crate) fn storage_options(&self) -> &StorageOptions {
        &self.options
    }

    /// The schema (folder under the catalog) its tables are in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Where the catalog is.
    pub fn location(&self) -> &Location {
        &self.root
    }

    /// `<catalog>/<schema>` of a local catalog, absolute (the catalog folder is created if
    /// missing); an error naming the URL for a catalog in an object store.
    pub fn schema_dir(&self) -> Result<PathBuf> {
        match &self.root {
            Location::Local(_) => Ok(self
                .root
                .dir_url()?
                .to_file_path()
                .map_err(|()| Error::Internal {
                    what: "a local catalog without a file path".into(),
                })?
                .join(&self.schema)),
            Location::Url(_) => Err(Error::Config {
                name: "catalog",
                reason: format!("{} is in an object store, not a local folder", self.shown()),
            }),
        }
    }

    /// `<catalog>/<schema>/` as a directory URL (a local catalog folder is created if
    /// missing).
    pub fn schema_url(&self) -> Result<url::Url> {
        let root = self.root.dir_url()?;
        root.join(&format!("{}/", self.schema))
            .map_err(|e| Error::Config {
                name: "schema",
                reason: format!(
                    "cannot address `{}` under {}: {e}",
                    self.schema,
                    self.shown()
                ),
            })
    }

    /// The catalog's location as it may be shown (secrets masked).
    pub fn shown(&self) -> String {
        match &self.root {
            Location::Local(p) => p.display().to_string(),
            Location::Url(u) => crate::store::location::redacted(u, &self.options),
        }
    }

    /// The store of the catalog's bucket or container and the schema's folder in it;
    /// `None` for a local catalog without an injected store.
    pub(crate) fn schema_store(&self) -> Result<Option<(Arc<DynObjectStore>, StorePath)>> {
        let Some(store) = &self.object_store else {
            return Ok(None);
        };
        let url = self.schema_url()?;
        let dir = StorePath::from_url_path(url.path()).map_err(|e| Error::Config {
            name: "catalog",
            reason: format!("cannot address {}: {e}", self.shown()),
        })?;
        Ok(Some((Arc::clone(store), dir)))
    }

    /// The lock map every write and maintenance operation on this catalog takes.
    pub fn locks(&self) -> &Arc<TableLocks> {
        &self.locks
    }

    /// Target size of written data files (optimize write, OPTIMIZE's default).
    pub fn target_file_size(&self) -> u64 {
        self.target_file_size
    }

    /// Parquet compression of written data files.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Requests the object store client retried so far (transient errors: 5xx, 429,
    /// timeouts, dropped connections), on this catalog and the landing stores its runs
    /// read.
    pub fn store_retries(&self) -> u64 {
        self.retries.get()
    }

    /// Calls made so far to object stores (the catalog's and its runs' landing zones;
    /// none for a local catalog and local landing folders): one call is one request,
    /// except a multipart upload (one for all its parts) and the client's retries.
    pub fn store_calls(&self) -> u64 {
        self.calls.get()
    }

    /// A run starts: commit files read by earlier runs are read afresh.
    pub(crate) fn new_run(&self) {
        self.calls.new_run();
    }

    /// `store`, its calls counted with the catalog's.
    pub(crate) fn meter(&self, store: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        self.calls.meter(store)
    }

    /// The catalog's object store (metered), when it has one.
    pub(crate) fn object_store(&self) -> Option<&Arc<DynObjectStore>> {
        self.object_store.as_ref()
    }

    /// Commits planned again so far because another writer changed the table's schema
    /// (its metadata) while they were in flight.
    pub fn commit_replans(&self) -> u64 {
        self.replans.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count_replan(&self) {
        self.replans
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Runs `write` (one commit to `table`, planned on the table as it is) until it does
    /// not lose to another process's conflicting commit: when another process changed
    /// the table's schema, or added or compacted files the commit's plan depended on,
    /// while it was in flight, it is planned again on the new version (its files of the
    /// failed attempt are left unreferenced, for VACUUM), after a jittered pause, up to
    /// [`MAX_REPLANS`] times ([`crate::table::is_replannable_conflict`]).
    pub(crate) fn replanned<T>(
        &self,
        table: &TableName,
        mut write: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        let mut replans = 0;
        loop {
            match write() {
                Err(e) if replans < MAX_REPLANS && crate::table::is_replannable_conflict(&e) => {
                    replans += 1;
                    self.count_replan();
                    tracing::info!(table = %table, attempt = replans, conflict = %crate::error::chain(&e), "another writer committed to the table meanwhile; planning the commit again");
                    std::thread::sleep(jittered(replans));
                }
                other => return other,
            }
        }
    }

    /// The counter of the store client's retries (installed on the runtime's threads).
    pub(crate) fn retry_counter(&self) -> &RetryCounter {
        &self.retries
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    /// The schema's address and write settings, with the object store the catalog was
    /// given (or `store` in its place).
    pub(crate) fn storage_with(&self, store: Option<Arc<DynObjectStore>>) -> Result<Storage> {
        Ok(Storage {
            schema_url: self.schema_url()?,
            root_store: store.or_else(|| self.object_store.clone()),
            options: self.options.clone(),
            target_file_size: self.target_file_size,
            compression: self.compression,
            auto_compact_at: self.auto_compact_at,
            clock: Default::default(),
            opened: Default::default(),
        })
    }

    /// The schema's address and write settings.
    pub(crate) fn storage(&self) -> Result<Storage> {
        self.storage_with(None)
    }
}

/// Times a commit that lost to another writer's conflicting commit is planned again
/// (with the pauses of [`jittered`], at most ~13 s in all).
pub(crate) const MAX_REPLANS: u32 = 8;

/// The pause before re-plan `n`: 50 ms doubling per attempt, with full jitter (so
/// writers that lost together do not collide again).
fn jittered(n: u32) -> std::time::Duration {
    use std::hash::{BuildHasher as _, Hasher as _};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let cap_ms = 50u64 << n.min(6);
    std::time::Duration::from_millis(random % cap_ms + 1)
}
