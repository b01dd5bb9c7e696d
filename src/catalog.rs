//! [`Catalog`]: a catalog's schema as every operation on its tables reaches it, shared by
//! loads ([`crate::Ingest`]) and maintenance ([`crate::maintenance::Maintenance`]).

use std::path::PathBuf;
use std::sync::Arc;

use deltalake::logstore::object_store::DynObjectStore;
use url::Url;

use crate::config::IngestConfig;
use crate::error::{Error, Result};
use crate::locks::TableLocks;
use crate::table::{Compression, Storage};

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
    root: PathBuf,
    schema: String,
    object_store: Option<Arc<DynObjectStore>>,
    target_file_size: u64,
    compression: Compression,
    auto_compact_at: Option<u64>,
    locks: Arc<TableLocks>,
    runtime: Arc<tokio::runtime::Runtime>,
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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.clamp(2, 8))
            .thread_name("bronze-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime {
                what: "tokio runtime",
                source: Box::new(e),
            })?;
        Ok(Catalog {
            root: config.catalog.clone(),
            schema: config.schema.clone(),
            object_store: config.object_store.clone(),
            target_file_size: config.target_file_size,
            compression: config.compression,
            auto_compact_at: config.auto_compact.then_some(config.auto_compact_min_files),
            locks: Arc::new(TableLocks::new(config.lock_policy)),
            runtime: Arc::new(runtime),
        })
    }

    /// `<catalog>/<schema>`, absolute (the catalog folder is created if missing).
    pub fn schema_dir(&self) -> Result<PathBuf> {
        let catalog = &self.root;
        std::fs::create_dir_all(catalog).map_err(|e| Error::io(catalog, e))?;
        let catalog = catalog.canonicalize().map_err(|e| Error::io(catalog, e))?;
        Ok(catalog.join(&self.schema))
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

    pub(crate) fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    /// The schema's address and write settings, with the object store the catalog was
    /// given (or `store` in its place).
    pub(crate) fn storage_with(&self, store: Option<Arc<DynObjectStore>>) -> Result<Storage> {
        let dir = self.schema_dir()?;
        let schema_url = Url::from_directory_path(&dir).map_err(|()| Error::Config {
            name: "catalog",
            reason: format!("{} is not an absolute path", dir.display()),
        })?;
        Ok(Storage {
            schema_url,
            root_store: store.or_else(|| self.object_store.clone()),
            target_file_size: self.target_file_size,
            compression: self.compression,
            auto_compact_at: self.auto_compact_at,
            unloaded_appends: true,
        })
    }

    /// The schema's address and write settings.
    pub(crate) fn storage(&self) -> Result<Storage> {
        self.storage_with(None)
    }
}
