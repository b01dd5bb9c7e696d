//! Landing files fetched concurrently from an object store before they are parsed
//! (a local disk reads them as it parses).

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::source::discover;

/// Landing files fetched at once from an object store.
pub const PREFETCH_CONCURRENCY: usize = 32;

/// Landing files' raw bytes by path.
pub(crate) type Fetched = std::collections::HashMap<PathBuf, Vec<u8>>;

/// Landing files fetched from an object store, each taken out once by the file's reader.
pub(crate) struct Prefetched(pub(crate) parking_lot::Mutex<Fetched>);

impl Prefetched {
    pub(crate) fn take(&self, file: &discover::SourceFile) -> Option<Vec<u8>> {
        self.0.lock().remove(&file.path)
    }
}

/// A fetch of the batch's landing files started at discovery ([`Ingest::start_prefetch`]);
/// aborted when dropped unjoined (the run stopped before staging, or resumed).
pub(crate) struct EarlyFetch(pub(crate) Option<tokio::task::JoinHandle<Result<Fetched>>>);

impl EarlyFetch {
    pub(crate) async fn join(mut self) -> Result<Prefetched> {
        let Some(handle) = self.0.take() else {
            unreachable!("joined once")
        };
        match handle.await {
            Ok(fetched) => Ok(Prefetched(parking_lot::Mutex::new(fetched?))),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Runtime {
                what: "landing fetch",
                source: Box::new(e),
            }),
        }
    }
}

impl Drop for EarlyFetch {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// The raw bytes of `files` from `store`, up to [`PREFETCH_CONCURRENCY`] requests at once.
pub(crate) async fn fetch_all(
    store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    files: Vec<discover::SourceFile>,
) -> Result<Fetched> {
    use futures::{StreamExt as _, TryStreamExt as _};
    futures::stream::iter(files.into_iter().map(|f| {
        let store = Arc::clone(&store);
        async move {
            let bytes = crate::source::read::fetch_raw(&f, store.as_ref()).await?;
            Ok::<_, Error>((f.path, bytes))
        }
    }))
    .buffer_unordered(PREFETCH_CONCURRENCY)
    .try_collect()
    .await
}
