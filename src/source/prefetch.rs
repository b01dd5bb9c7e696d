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
/// Filled as the files arrive ([`fetch_into`]), a reader waiting for its file meanwhile.
pub(crate) struct Prefetched {
    state: parking_lot::Mutex<Arrived>,
    arrived: parking_lot::Condvar,
}

/// The files in so far, whether more can come, and whether the fetch failed.
#[derive(Default)]
struct Arrived {
    files: Fetched,
    done: bool,
    failed: bool,
}

impl Prefetched {
    /// None yet: [`fetch_into`] fills it.
    fn filling() -> Self {
        Prefetched {
            state: parking_lot::Mutex::new(Arrived::default()),
            arrived: parking_lot::Condvar::new(),
        }
    }

    fn put(&self, path: PathBuf, bytes: Vec<u8>) {
        self.state.lock().files.insert(path, bytes);
        self.arrived.notify_all();
    }

    fn finish(&self, failed: bool) {
        let mut state = self.state.lock();
        state.done = true;
        state.failed |= failed;
        drop(state);
        self.arrived.notify_all();
    }

    /// The bytes of `file`, waiting for them while the fetch runs. `Ok(None)` when the
    /// fetch ended without them (it was stopped: the reader reads the file itself);
    /// `Err` when it failed (its error is the run's: see [`EarlyFetch::join`]), so that
    /// the readers stop at once rather than each trying a failing store again.
    pub(crate) fn take(&self, file: &discover::SourceFile) -> Result<Option<Vec<u8>>> {
        let mut state = self.state.lock();
        loop {
            if let Some(bytes) = state.files.remove(&file.path) {
                return Ok(Some(bytes));
            }
            if state.failed {
                return Err(Error::Internal {
                    what: "the landing fetch failed".to_string(),
                });
            }
            if state.done {
                return Ok(None);
            }
            self.arrived.wait(&mut state);
        }
    }
}

/// A fetch of the batch's landing files started at discovery (the run's staging step
/// starts it), its files handed to the parse as they arrive; aborted when dropped (the run stopped
/// before staging, or resumed), which ends the waits of its readers.
pub(crate) struct EarlyFetch {
    pub(crate) files: Arc<Prefetched>,
    pub(crate) task: tokio::task::JoinHandle<Result<()>>,
}

impl EarlyFetch {
    /// Starts fetching `files` from `store` on `runtime`; `then` runs once every file is
    /// in (or the fetch failed).
    pub(crate) fn start(
        runtime: &tokio::runtime::Runtime,
        store: Arc<deltalake::logstore::object_store::DynObjectStore>,
        files: Vec<discover::SourceFile>,
        then: impl FnOnce() + Send + 'static,
    ) -> Self {
        let into = Arc::new(Prefetched::filling());
        // The guard is made here, not in the task: a task aborted before it first ran
        // drops it too.
        let finish = Finish {
            into: Arc::clone(&into),
            failed: false,
        };
        let fetch = fetch_into(store, files, finish);
        let task = runtime.spawn(async move {
            let fetched = fetch.await;
            then();
            fetched
        });
        EarlyFetch { files: into, task }
    }

    /// After the parse: the fetch's error (naming the file), which is the run's; a panic
    /// is resumed.
    pub(crate) async fn join(mut self) -> Result<()> {
        match (&mut self.task).await {
            Ok(fetched) => fetched,
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
        self.task.abort();
    }
}

/// Tells a [`Prefetched`]'s readers no more files come, whether the fetch ended, failed
/// (`failed` set) or its task was dropped (aborted).
struct Finish {
    into: Arc<Prefetched>,
    failed: bool,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.into.finish(self.failed);
    }
}

/// Fetches `files` from `store` into `finish`'s [`Prefetched`] in their order (up to
/// [`PREFETCH_CONCURRENCY`] requests at once), each handed over as it arrives; stops at
/// the first error.
async fn fetch_into(
    store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    files: Vec<discover::SourceFile>,
    mut finish: Finish,
) -> Result<()> {
    use futures::StreamExt as _;
    let mut arriving = futures::stream::iter(files.into_iter().map(|f| {
        let store = Arc::clone(&store);
        async move {
            let bytes = crate::source::read::fetch_raw(&f, store.as_ref()).await?;
            Ok::<_, Error>((f.path, bytes))
        }
    }))
    .buffered(PREFETCH_CONCURRENCY);
    while let Some(file) = arriving.next().await {
        match file {
            Ok((path, bytes)) => finish.into.put(path, bytes),
            Err(e) => {
                finish.failed = true;
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The raw bytes of `files` from `store`, every one fetched before this returns (up to
/// [`PREFETCH_CONCURRENCY`] requests at once); the first error stops it.
pub(crate) async fn fetch_all(
    store: Arc<deltalake::logstore::object_store::DynObjectStore>,
    files: Vec<discover::SourceFile>,
) -> Result<Arc<Prefetched>> {
    let into = Arc::new(Prefetched::filling());
    let finish = Finish {
        into: Arc::clone(&into),
        failed: false,
    };
    fetch_into(store, files, finish).await?;
    Ok(into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::{ObjectStoreExt as _, memory::InMemory};
    use discover::{Compression, SourceFile};

    fn file(name: &str) -> SourceFile {
        SourceFile {
            path: PathBuf::from(format!("/landing/batch_id=b1/{name}")),
            name: name.to_string(),
            bytes: 0,
            compression: Compression::None,
            folder: 0,
            modified: None,
            etag: None,
        }
    }

    fn store_with(names: &[&str]) -> Arc<deltalake::logstore::object_store::DynObjectStore> {
        let store = InMemory::new();
        let rt = tokio::runtime::Runtime::new().unwrap();
        for n in names {
            let at = deltalake::Path::from(format!("landing/batch_id=b1/{n}"));
            rt.block_on(store.put(&at, n.as_bytes().to_vec().into()))
                .unwrap();
        }
        Arc::new(store)
    }

    #[test]
    fn a_reader_waits_for_its_file_and_takes_it_once() {
        let files = Prefetched::filling();
        std::thread::scope(|s| {
            let reader = s.spawn(|| files.take(&file("a.jsonl")));
            files.put(file("a.jsonl").path, b"a".to_vec());
            assert_eq!(reader.join().unwrap().unwrap(), Some(b"a".to_vec()));
        });
        // Taken once; the fetch over, a file it did not bring is read by its reader.
        files.finish(false);
        assert_eq!(files.take(&file("a.jsonl")).unwrap(), None);
    }

    #[test]
    fn files_arrive_for_the_parse_and_a_failed_fetch_stops_every_reader_with_its_error() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        // Every file there.
        let names = ["a.jsonl", "b.jsonl", "c.jsonl"];
        let listed: Vec<_> = names.iter().map(|n| file(n)).collect();
        let fetch = EarlyFetch::start(&rt, store_with(&names), listed.clone(), || {});
        for f in &listed {
            assert_eq!(
                fetch.files.take(f).unwrap(),
                Some(f.name.as_bytes().to_vec())
            );
        }
        rt.block_on(fetch.join()).unwrap();
        // `b.jsonl` gone from the store: the readers waiting for it and after it stop
        // with an error at once, and the run's error names the file.
        let fetch = EarlyFetch::start(&rt, store_with(&["a.jsonl"]), listed.clone(), || {});
        assert!(fetch.files.take(&listed[2]).is_err());
        assert!(fetch.files.take(&listed[1]).is_err());
        let e = rt.block_on(fetch.join()).unwrap_err();
        assert!(e.to_string().contains("b.jsonl"), "{e}");
    }

    #[test]
    fn a_fetch_stopped_before_the_parse_releases_its_readers() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        // A store that takes 30 s per request: the file would come, but late.
        let slow = Arc::new(crate::testdata::LatencyStore::new(
            InMemory::new(),
            std::time::Duration::from_secs(30),
        ));
        let fetch = EarlyFetch::start(&rt, slow, vec![file("a.jsonl")], || {});
        let files = Arc::clone(&fetch.files);
        // The run stops (its fetch dropped): a reader gets `None` (it reads the file
        // itself) at once, not the file 30 s later.
        drop(fetch);
        assert_eq!(files.take(&file("a.jsonl")).unwrap(), None);
    }
}
