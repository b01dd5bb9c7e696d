//! Object stores that wrap the local file system to force interleavings (no sleeps).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bronze::testdata::{Hook, Hooked};
use deltalake::logstore::object_store::{
    self, DynObjectStore, GetOptions, GetResult, MultipartUpload, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, Result, local::LocalFileSystem, path::Path,
};

/// The local file system with `hook` on its puts and gets.
fn local<H: Hook>(hook: H) -> Arc<Hooked<H>> {
    Hooked::new(Arc::new(LocalFileSystem::new()), hook)
}

fn is_commit(loc: &str) -> bool {
    loc.contains("_delta_log/") && loc.ends_with(".json")
}

/// Holds the first `parties` commit attempts (`_delta_log/<n>.json` puts) under paths
/// containing `filter` until all of them have arrived, so that writers that loaded the
/// same snapshot commit against each other. Later commits (retries) pass straight on.
pub type BarrierStore = Hooked<Barrier>;

/// [`BarrierStore`]'s hook.
#[derive(Debug)]
pub struct Barrier {
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

impl Barrier {
    pub fn store(filter: &str, parties: usize) -> Arc<BarrierStore> {
        Self::with(filter, parties, None)
    }

    /// Like [`Barrier::store`] for two parties, the commit containing `marker` winning.
    pub fn ordered(filter: &str, marker: &str) -> Arc<BarrierStore> {
        Self::with(filter, 2, Some(marker.to_string()))
    }

    fn with(filter: &str, parties: usize, first: Option<String>) -> Arc<BarrierStore> {
        local(Barrier {
            filter: filter.to_string(),
            barrier: tokio::sync::Barrier::new(parties),
            armed: AtomicUsize::new(parties),
            first,
            first_done: tokio::sync::Semaphore::new(0),
            commits: AtomicUsize::new(0),
        })
    }
}

impl fmt::Display for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BarrierStore({})", self.filter)
    }
}

#[async_trait::async_trait]
impl Hook for Barrier {
    async fn put(
        &self,
        inner: &DynObjectStore,
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
                        let result = inner.put_opts(location, payload, opts).await;
                        self.first_done.add_permits(1);
                        return result;
                    }
                    let _permit = self.first_done.acquire().await;
                }
            }
        }
        inner.put_opts(location, payload, opts).await
    }
}

/// Holds the puts to paths containing `held` until a request to a path containing
/// `awaited` has succeeded, or until `patience` has passed (then the held put goes on,
/// and [`Gate::released`] stays false): shows whether one request can complete while
/// another is still in flight.
pub type GateStore = Hooked<Gate>;

/// [`GateStore`]'s hook.
#[derive(Debug)]
pub struct Gate {
    held: String,
    awaited: String,
    patience: std::time::Duration,
    done: tokio::sync::Semaphore,
    /// Whether a held put went on because the awaited request had succeeded.
    pub released: AtomicBool,
}

impl Gate {
    pub fn store(held: &str, awaited: &str, patience: std::time::Duration) -> Arc<GateStore> {
        local(Gate {
            held: held.to_string(),
            awaited: awaited.to_string(),
            patience,
            done: tokio::sync::Semaphore::new(0),
            released: AtomicBool::new(false),
        })
    }
}

impl Gate {
    /// Counts a request that succeeded.
    fn finished<T>(&self, location: &Path, result: &Result<T>) {
        if result.is_ok() && location.as_ref().contains(&self.awaited) {
            self.done.add_permits(1);
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GateStore({} after {})", self.held, self.awaited)
    }
}

#[async_trait::async_trait]
impl Hook for Gate {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if location.as_ref().contains(&self.held) {
            let waited = tokio::time::timeout(self.patience, self.done.acquire()).await;
            if let Ok(Ok(permit)) = waited {
                // Leave the permit for the next held put.
                drop(permit);
                self.released.store(true, Ordering::SeqCst);
            }
        }
        let result = inner.put_opts(location, payload, opts).await;
        self.finished(location, &result);
        result
    }
    async fn get(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        options: GetOptions,
    ) -> Result<GetResult> {
        let result = inner.get_opts(location, options).await;
        self.finished(location, &result);
        result
    }
}

/// Holds the first `parties` puts to paths [`Meet::store`]'s `held` selects until all
/// of them have arrived (a rendezvous), or until `patience` has passed (then each goes
/// on, and [`Meet::met`] stays false): shows that that many requests were in flight at
/// once, with no timing window.
pub type MeetStore = Hooked<Meet>;

/// [`MeetStore`]'s hook.
#[derive(Debug)]
pub struct Meet {
    held: fn(&str) -> bool,
    parties: usize,
    armed: AtomicUsize,
    patience: std::time::Duration,
    waiting: std::sync::Mutex<usize>,
    go: tokio::sync::Semaphore,
    /// Whether the held puts all arrived while each was still held.
    pub met: AtomicBool,
}

impl Meet {
    pub fn store(
        held: fn(&str) -> bool,
        parties: usize,
        patience: std::time::Duration,
    ) -> Arc<MeetStore> {
        local(Meet {
            held,
            parties,
            armed: AtomicUsize::new(parties),
            patience,
            waiting: std::sync::Mutex::new(0),
            go: tokio::sync::Semaphore::new(0),
            met: AtomicBool::new(false),
        })
    }

    /// Waits until `parties` held puts are waiting (the last one releases the others).
    async fn meet(&self) {
        let last = {
            let mut waiting = self.waiting.lock().unwrap();
            *waiting += 1;
            *waiting == self.parties
        };
        if last {
            self.met.store(true, Ordering::SeqCst);
            self.go.add_permits(self.parties - 1);
            return;
        }
        match tokio::time::timeout(self.patience, self.go.acquire()).await {
            Ok(Ok(permit)) => permit.forget(),
            _ => *self.waiting.lock().unwrap() -= 1,
        }
    }
}

impl fmt::Display for Meet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MeetStore({} parties)", self.parties)
    }
}

#[async_trait::async_trait]
impl Hook for Meet {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if (self.held)(location.as_ref())
            && self
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            self.meet().await;
        }
        inner.put_opts(location, payload, opts).await
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
    /// Written, then reported as already existing: a conditional put whose response was
    /// lost, retried by the store client and refused (S3 answers 412).
    LandsButTaken,
}

/// The local file system, failing the `fail_at`-th request of kind `op` (1-based; 0 =
/// never, to count them) with `fault`.
pub type FaultStore = Hooked<Faults>;

/// [`FaultStore`]'s hook.
#[derive(Debug)]
pub struct Faults {
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

impl Faults {
    pub fn store(op: Op, fault: Fault, fail_at: usize) -> Arc<FaultStore> {
        local(Faults {
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
            Fault::LandsButFails | Fault::LandsButTaken => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connection reset after the request was sent (injected)",
            ),
        };
        if self.fault == Fault::LandsButTaken {
            return object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "precondition failed on the retried put (injected)".into(),
            };
        }
        object_store::Error::Generic {
            store: "FaultStore",
            source: format!("{location}: {source}").into(),
        }
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "FaultStore({:?} #{} {:?})",
            self.op, self.fail_at, self.fault
        )
    }
}

#[async_trait::async_trait]
impl Hook for Faults {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let commit = is_commit(location.as_ref());
        let picked = self.pick(Op::Write, location) || (commit && self.pick(Op::Commit, location));
        if picked {
            if matches!(self.fault, Fault::LandsButFails | Fault::LandsButTaken) {
                inner.put_opts(location, payload, opts).await?;
            }
            return Err(self.error(location));
        }
        inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.pick(Op::Write, location)
            && !matches!(self.fault, Fault::LandsButFails | Fault::LandsButTaken)
        {
            return Err(self.error(location));
        }
        inner.put_multipart_opts(location, opts).await
    }
    async fn get(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        options: GetOptions,
    ) -> Result<GetResult> {
        if self.pick(Op::Read, location) {
            return Err(self.error(location));
        }
        inner.get_opts(location, options).await
    }
}
