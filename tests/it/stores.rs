//! Object stores that wrap the local file system to force interleavings (no sleeps).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use deltalake::logstore::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, local::LocalFileSystem,
    path::Path,
};
use futures::stream::BoxStream;

/// Holds the first `parties` commit attempts (`_delta_log/<n>.json` puts) under paths
/// containing `filter` until all of them have arrived, so that writers that loaded the
/// same snapshot commit against each other. Later commits (retries) pass straight on.
#[derive(Debug)]
pub struct BarrierStore {
    inner: LocalFileSystem,
    filter: String,
    barrier: tokio::sync::Barrier,
    armed: AtomicUsize,
    /// When set, of the held commits the one whose bytes contain this marker is written
    /// first, the others after it: the interleaving is then fully determined.
    first: Option<String>,
    first_done: tokio::sync::Semaphore,
    /// Commit attempts seen under `filter`.
    pub commits: AtomicUsize,
}

impl BarrierStore {
    pub fn new(filter: &str, parties: usize) -> Arc<Self> {
        Arc::new(BarrierStore {
            inner: LocalFileSystem::new(),
            filter: filter.to_string(),
            barrier: tokio::sync::Barrier::new(parties),
            armed: AtomicUsize::new(parties),
            first: None,
            first_done: tokio::sync::Semaphore::new(0),
            commits: AtomicUsize::new(0),
        })
    }

    /// Like [`BarrierStore::new`] for two parties, the commit containing `marker` winning.
    pub fn ordered(filter: &str, marker: &str) -> Arc<Self> {
        Arc::new(BarrierStore {
            inner: LocalFileSystem::new(),
            filter: filter.to_string(),
            barrier: tokio::sync::Barrier::new(2),
            armed: AtomicUsize::new(2),
            first: Some(marker.to_string()),
            first_done: tokio::sync::Semaphore::new(0),
            commits: AtomicUsize::new(0),
        })
    }
}

impl fmt::Display for BarrierStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BarrierStore({})", self.filter)
    }
}

#[async_trait::async_trait]
impl ObjectStore for BarrierStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let loc = location.as_ref();
        if loc.contains(&self.filter) && is_commit(loc) {
            self.commits.fetch_add(1, Ordering::SeqCst);
            let armed = self
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if armed {
                self.barrier.wait().await;
                if let Some(marker) = &self.first {
                    let m = marker.as_bytes();
                    let is_first = payload
                        .iter()
                        .any(|chunk| chunk.windows(m.len()).any(|w| w == m));
                    if is_first {
                        let result = self.inner.put_opts(location, payload, opts).await;
                        self.first_done.add_permits(1);
                        return result;
                    }
                    let _permit = self.first_done.acquire().await;
                }
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Holds the commits (`_delta_log/<n>.json` puts) under paths containing `held` until a
/// commit under `awaited` has been written, or until `patience` has passed (then the
/// held commit goes on, and [`GateStore::released`] stays false): shows whether one
/// table's commit can land while another's is still in flight.
#[derive(Debug)]
pub struct GateStore {
    inner: LocalFileSystem,
    held: String,
    awaited: String,
    patience: std::time::Duration,
    landed: tokio::sync::Semaphore,
    /// Whether a held commit went on because the awaited one landed.
    pub released: AtomicBool,
}

impl GateStore {
    pub fn new(held: &str, awaited: &str, patience: std::time::Duration) -> Arc<Self> {
        Arc::new(GateStore {
            inner: LocalFileSystem::new(),
            held: held.to_string(),
            awaited: awaited.to_string(),
            patience,
            landed: tokio::sync::Semaphore::new(0),
            released: AtomicBool::new(false),
        })
    }
}

impl fmt::Display for GateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GateStore({} after {})", self.held, self.awaited)
    }
}

fn is_commit(loc: &str) -> bool {
    loc.contains("_delta_log/") && loc.ends_with(".json")
}

#[async_trait::async_trait]
impl ObjectStore for GateStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let loc = location.as_ref();
        if is_commit(loc) && loc.contains(&self.held) {
            let waited = tokio::time::timeout(self.patience, self.landed.acquire()).await;
            if let Ok(Ok(permit)) = waited {
                // Leave the permit for the next held commit.
                drop(permit);
                self.released.store(true, Ordering::SeqCst);
            }
        }
        let result = self.inner.put_opts(location, payload, opts).await;
        if result.is_ok() && is_commit(loc) && loc.contains(&self.awaited) {
            self.landed.add_permits(1);
        }
        result
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Which requests a [`FaultStore`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Puts and multipart uploads (data files, commits, checkpoints, leases).
    Write,
    /// Commits only: puts of `_delta_log/<n>.json`.
    Commit,
    /// Gets (log replay, data reads, landing files).
    Read,
}

/// What a [`FaultStore`] does to the request it picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Refused with ENOSPC, nothing written.
    DiskFull,
    /// Refused with EIO, nothing written or read.
    IoError,
    /// Written, then reported as failed (a timeout after the write reached storage).
    LandsButFails,
}

/// The local file system, failing the `fail_at`-th request of kind `op` (1-based; 0 =
/// never, to count them) with `fault`.
#[derive(Debug)]
pub struct FaultStore {
    inner: LocalFileSystem,
    op: Op,
    fault: Fault,
    fail_at: usize,
    /// Requests of kind `op` seen.
    pub seen: AtomicUsize,
    /// Whether the fault was injected.
    pub fired: AtomicBool,
    /// The path of the request it was injected into.
    pub picked: std::sync::Mutex<String>,
}

impl FaultStore {
    pub fn new(op: Op, fault: Fault, fail_at: usize) -> Arc<Self> {
        Arc::new(FaultStore {
            inner: LocalFileSystem::new(),
            op,
            fault,
            fail_at,
            seen: AtomicUsize::new(0),
            fired: AtomicBool::new(false),
            picked: Default::default(),
        })
    }

    /// Counts a request of kind `op`; true when it is the one to fail.
    fn pick(&self, op: Op, location: &Path) -> bool {
        if op != self.op {
            return false;
        }
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        let hit = n == self.fail_at;
        if hit {
            self.fired.store(true, Ordering::SeqCst);
            *self.picked.lock().unwrap() = location.to_string();
        }
        hit
    }

    fn error(&self, location: &Path) -> object_store::Error {
        let source = match self.fault {
            Fault::DiskFull => std::io::Error::from_raw_os_error(28),
            Fault::IoError => std::io::Error::from_raw_os_error(5),
            Fault::LandsButFails => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connection reset after the request was sent (injected)",
            ),
        };
        object_store::Error::Generic {
            store: "FaultStore",
            source: format!("{location}: {source}").into(),
        }
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FaultStore({:?} #{} {:?})",
            self.op, self.fail_at, self.fault
        )
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let loc = location.as_ref();
        let commit = loc.contains("_delta_log/") && loc.ends_with(".json");
        let picked = self.pick(Op::Write, location) || (commit && self.pick(Op::Commit, location));
        if picked {
            if self.fault == Fault::LandsButFails {
                self.inner.put_opts(location, payload, opts).await?;
            }
            return Err(self.error(location));
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.pick(Op::Write, location) && self.fault != Fault::LandsButFails {
            return Err(self.error(location));
        }
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if self.pick(Op::Read, location) {
            return Err(self.error(location));
        }
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[allow(dead_code)]
fn _assert_object_store_in_scope(_: &dyn object_store::ObjectStore) {}
