//! Tables not registered yet: one file per table,
//! `<schema>/_bronze_unregistered/<database>+<table>.json`, written by a run for each
//! table it creates or widens before it commits the run's record (so a run killed before
//! it registers them leaves them recorded), rewritten with the reason when registering
//! fails, and deleted once the table is registered at that version or a later one. The
//! next run into the database registers them (beside its own), `bronze register` too,
//! and `bronze status` lists them under their entity.

use std::sync::Arc;

use deltalake::logstore::object_store::{
    DynObjectStore, ObjectStoreExt as _, PutPayload, path::Path as StorePath,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The folder of the records, under the schema.
pub const UNREGISTERED_DIR: &str = "_bronze_unregistered";

/// A table a catalog did not take.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unregistered {
    /// The catalog's database it belongs in.
    pub database: String,
    /// The table.
    pub table: String,
    /// The landing path (`<source>/<entity>`) of the run that created or widened it.
    pub landing_path: String,
    /// Why the catalog did not take it, the last time it was tried.
    pub reason: String,
    /// When it was first not registered, microseconds since the epoch (UTC).
    pub since_micros: i64,
    /// The table version that is not registered: a registration of an older one (by a
    /// run that read the table before this version was committed) leaves the record.
    #[serde(default)]
    pub version: u64,
}

/// The records of one schema.
pub struct Pending {
    store: Arc<DynObjectStore>,
    dir: StorePath,
}

impl Pending {
    /// The records under `schema_dir` of `store`.
    pub fn new(store: Arc<DynObjectStore>, schema_dir: &StorePath) -> Pending {
        Pending {
            store,
            dir: schema_dir.clone().join(UNREGISTERED_DIR),
        }
    }

    fn path(&self, database: &str, table: &str) -> StorePath {
        self.dir
            .clone()
            .join(format!("{database}+{table}.json").as_str())
    }

    /// Every record, sorted by database and table; one that cannot be read is skipped
    /// (it is written again the next time its table fails).
    pub async fn list(&self) -> Result<Vec<Unregistered>> {
        use futures::TryStreamExt as _;
        let listed: Vec<_> = match self.store.list(Some(&self.dir)).try_collect().await {
            Ok(listed) => listed,
            Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(self.error(&self.dir, "list", e)),
        };
        let mut out = Vec::new();
        for o in listed {
            let got = async { self.store.get(&o.location).await?.bytes().await };
            if let Ok(bytes) = got.await
                && let Ok(u) = serde_json::from_slice::<Unregistered>(&bytes)
            {
                out.push(u);
            }
        }
        out.sort_by(|a, b| (&a.database, &a.table).cmp(&(&b.database, &b.table)));
        Ok(out)
    }

    /// Records `u` (a table already recorded keeps its first `since_micros` and the
    /// later of the two versions).
    pub async fn record(&self, mut u: Unregistered, earlier: Option<&Unregistered>) -> Result<()> {
        if let Some(e) = earlier {
            u.since_micros = e.since_micros;
            u.version = u.version.max(e.version);
        }
        let path = self.path(&u.database, &u.table);
        let body = serde_json::to_vec_pretty(&u).map_err(|e| Error::Internal {
            what: format!("a record of an unregistered table does not serialize: {e}"),
        })?;
        self.store
            .put(&path, PutPayload::from(body))
            .await
            .map(|_| ())
            .map_err(|e| self.error(&path, "write", e))
    }

    /// Deletes the record of `database.table` once `version` of the table is registered,
    /// unless the record is of a later version (committed while this one was being
    /// registered).
    pub async fn clear(&self, database: &str, table: &str, version: u64) -> Result<()> {
        let path = self.path(database, table);
        let got = async { self.store.get(&path).await?.bytes().await };
        match got.await {
            Ok(bytes) => match serde_json::from_slice::<Unregistered>(&bytes) {
                Ok(u) if u.version > version => return Ok(()),
                _ => {}
            },
            Err(deltalake::logstore::object_store::Error::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(self.error(&path, "read", e)),
        }
        match self.store.delete(&path).await {
            Ok(()) | Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(&path, "delete", e)),
        }
    }

    fn error(&self, path: &StorePath, what: &str, e: impl std::fmt::Display) -> Error {
        Error::Store {
            location: format!("{path}"),
            reason: format!(
                "could not {what} the record of tables not registered in the catalog: {e}"
            ),
        }
    }
}
