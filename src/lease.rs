//! Batch leases: at most one run loads a given batch folder into a schema at a time.
//!
//! Two runs of one batch at once would each replace the batch's rows table by table;
//! where their commits interleave (an over-budget topic committed in slices, say) the
//! tables could end with rows of both. So a run first creates, for each folder of its
//! batch, `<schema>/_bronze_leases/<source>+<entity>+<batch_id>.json` ([`lease_file`])
//! with a create-if-absent put (atomic on a local disk and on S3, ADLS and GCS), and
//! deletes it when it ends with its outcome recorded in `_run_control`. A second run
//! finds the file and stops with [`Error::BatchLeased`], naming the holder.
//!
//! A run that ends after writing rows of the batch to its tables but before
//! `_run_control` recorded them (an error, or the `_run_control` write failed) leaves
//! the lease released ([`Holder::released_micros`]) instead: the
//! next run of the batch takes it over at once and, like a run taking over a dead run's
//! lease, replaces the batch's rows in every table, since the tables may hold rows of
//! it that no `_run_control` row tells of. That is what lets appends skip the tables'
//! per-batch `txn`s ([`crate::table::Opener::open_unloaded`]).
//!
//! While it runs, a heartbeat thread renews the lease every quarter of the TTL with a
//! conditional update (`If-Match` on S3 and Azure, the object generation on GCS), so a
//! run slower than the TTL keeps it. A lease left by a run that died (SIGKILL, lost node)
//! is taken over when its holder is provably gone: same host and no process with that pid
//! and start time, or not renewed within the TTL. The takeover is a compare-and-swap on
//! the version of the lease that was read, never delete-then-create: of two runs taking
//! over one dead lease, one wins and the other finds a live lease. A local file system
//! has no conditional update: there the takeover first creates a claim file named after
//! the stale lease's content (create-if-absent: one winner), and the heartbeat rewrites
//! the lease after reading back that it still holds it. A run whose lease was taken over
//! (its heartbeat could not reach the store for a whole TTL) stops before its next commit
//! with [`Error::LeaseLost`] and leaves the lease to the new holder.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use deltalake::logstore::object_store::{
    self, DynObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutResult, UpdateVersion,
    path::Path as StorePath,
};
use parking_lot::Mutex;

use crate::error::{Error, Result};

pub use crate::naming::LEASE_DIR;

/// The lease file of one folder of a batch: `<source>+<entity>+<batch id>.json` (`+` is
/// outside both allow-lists, so names cannot collide); a name over 200 bytes is cut to
/// the batch id and a hash of the landing path.
pub fn lease_file(landing_path: &str, batch_id: &str) -> String {
    let stem = format!("{}+{batch_id}", landing_path.replace('/', "+"));
    if stem.len() <= 200 {
        format!("{stem}.json")
    } else {
        let hash = crate::naming::stable_id(&[landing_path.as_bytes()]);
        format!("{batch_id}+{}.json", &hash[..16])
    }
}

pub use crate::error::Holder;

impl Holder {
    fn me(run_id: &str, now_micros: i64) -> Holder {
        let pid = std::process::id();
        Holder {
            run_id: run_id.to_string(),
            host: host_name(),
            pid,
            pid_start: process_start(pid),
            since_micros: now_micros,
            renewed_micros: None,
            released_micros: None,
        }
    }

    /// Whether the holder is provably gone: it released the lease unrecorded, or did
    /// not renew it within `ttl`, or is no longer running on this host.
    fn is_stale(&self, now_micros: i64, ttl: Duration) -> bool {
        if self.released_micros.is_some() {
            return true;
        }
        let last = self.renewed_micros.unwrap_or(self.since_micros);
        let age = now_micros.saturating_sub(last);
        if age > i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX) {
            return true;
        }
        // On this host: gone when no process has that pid and start time (without
        // `/proc` neither is known and only the TTL tells).
        self.host == host_name() && process_start(self.pid) != self.pid_start
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// Start time of process `pid` in clock ticks since boot, `None` when there is no such
/// live process (or no `/proc`). A zombie (state `Z`: exited, not yet reaped by its
/// parent, as a killed Spark Python worker can be for a moment when its task's retry
/// starts) or a dying process (`X`) counts as gone.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 3 is the state and field 22 the start time; the command name (field 2) is in
    // parentheses and may hold spaces.
    let mut after = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(after.next(), Some("Z" | "X" | "x")) {
        return None;
    }
    after.nth(18)?.parse().ok()
}

/// How often a lease is renewed: a quarter of its TTL, between 20 ms and 5 minutes.
fn heartbeat_interval(ttl: Duration) -> Duration {
    (ttl / 4).clamp(Duration::from_millis(20), Duration::from_secs(300))
}

/// The version a put left, for the next conditional update (`None` when the store
/// reports neither an ETag nor a version).
fn version_of(put: PutResult) -> Option<UpdateVersion> {
    (put.e_tag.is_some() || put.version.is_some()).then_some(UpdateVersion {
        e_tag: put.e_tag,
        version: put.version,
    })
}

/// Puts `probe` twice with create-if-absent, then deletes it: `None` when the second put
/// is refused as it must be, else why the store cannot be trusted with concurrent
/// writers (for [`Error::Store`]); an error when the store could not be reached.
pub(crate) async fn put_if_absent_refusal(
    store: &DynObjectStore,
    probe: &StorePath,
) -> object_store::Result<Option<String>> {
    const FIX: &str = "Delta commits and the batch lease need it, or two writers could overwrite each other's commits and lose data. Use conditional writes (AWS S3, MinIO and Cloudflare R2 have them; leave the `conditional_put` storage option at its default, `etag`), or, if only one process ever writes this catalog, declare it with --single-writer (`single_writer = true` in bronze.toml)";
    // Two different contents: a refused put of the very bytes the object holds counts as
    // its own landed put (`Metered`), which would hide a refusal.
    let create = |content: &'static [u8]| {
        store.put_opts(
            probe,
            object_store::PutPayload::from_static(content),
            PutOptions::from(PutMode::Create),
        )
    };
    let verdict = match create(b"probe 1").await {
        Err(object_store::Error::NotImplemented { .. }) => Some(format!(
            "this store cannot put-if-absent (conditional put is disabled). {FIX}"
        )),
        Err(e) => return Err(e),
        Ok(_) => match create(b"probe 2").await {
            Err(object_store::Error::AlreadyExists { .. }) => None,
            Ok(_) => Some(format!(
                "this store ignores put-if-absent (a second `If-None-Match: *` put of one object succeeded). {FIX}"
            )),
            Err(e) => {
                let _ = store.delete(probe).await;
                return Err(e);
            }
        },
    };
    let _ = store.delete(probe).await;
    Ok(verdict)
}

/// One lease file and what this run knows of it; shared with the heartbeat thread.
struct Held {
    store: Arc<DynObjectStore>,
    path: StorePath,
    shown: String,
    runtime: tokio::runtime::Handle,
    ttl: Duration,
    me: Mutex<Holder>,
    /// The version of our last write, for the conditional renewal; `None` on a store
    /// without conditional update (renewed by read-back and rewrite).
    version: Mutex<Option<UpdateVersion>>,
    /// Why the lease is no longer ours, once another run took it over.
    lost: Mutex<Option<String>>,
}

impl Held {
    /// The claim of a takeover of the lease while it holds `bytes`:
    /// `<lease>.claim-<hash of bytes>`.
    fn claim_of(&self, bytes: &[u8]) -> StorePath {
        let hash = crate::naming::stable_id(&[bytes]);
        StorePath::from(format!("{}.claim-{}", self.path, &hash[..16]))
    }

    /// The claim files of this lease in its folder (`<lease>.claim-<hash>`).
    async fn claims_left(&self) -> object_store::Result<Vec<StorePath>> {
        use futures::TryStreamExt as _;
        let Some(name) = self.path.filename().map(|n| format!("{n}.claim-")) else {
            return Ok(Vec::new());
        };
        let dir: StorePath = self.path.parts().take(self.path.parts().count() - 1).collect();
        let listed: Vec<_> = self.store.list(Some(&dir)).try_collect().await?;
        Ok(listed
            .into_iter()
            .map(|o| o.location)
            .filter(|l| l.filename().is_some_and(|f| f.starts_with(&name)))
            .collect())
    }

    fn body(&self) -> object_store::PutPayload {
        serde_json::to_vec(&*self.me.lock())
            .expect("a lease holder serializes")
            .into()
    }

    /// Renews the lease; `false` once it is lost (the heartbeat then stops).
    fn renew(&self) -> bool {
        self.me.lock().renewed_micros = Some(crate::batch::now_micros());
        let body = self.body();
        let version = self.version.lock().clone();
        let conditional = version.is_some();
        let put = match version {
            Some(v) => self.runtime.block_on(self.store.put_opts(
                &self.path,
                body,
                PutOptions::from(PutMode::Update(v)),
            )),
            None => self.rewrite_if_mine(body),
        };
        match put {
            Ok(r) => {
                if conditional {
                    *self.version.lock() = version_of(r);
                }
                true
            }
            Err(object_store::Error::NotImplemented { .. }) => {
                // No conditional update on this store: renew by read-back from now on.
                *self.version.lock() = None;
                self.renew()
            }
            Err(e @ (object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. })) => {
                let why = format!(
                    "it was taken over or removed by another run after this run could not renew it within its TTL of {:?} ({e})",
                    self.ttl
                );
                tracing::error!(lease = %self.shown, "{why}");
                *self.lost.lock() = Some(why);
                false
            }
            Err(e) => {
                // The store is unreachable for now: try again at the next beat, while the
                // TTL leaves time.
                tracing::warn!(lease = %self.shown, error = %e, "could not renew the batch lease; retrying");
                true
            }
        }
    }

    /// Renewal on a store without conditional update: rewrites the lease only if it
    /// still names this run.
    fn rewrite_if_mine(&self, body: object_store::PutPayload) -> object_store::Result<PutResult> {
        let run_id = self.me.lock().run_id.clone();
        self.runtime.block_on(async {
            let held = self.store.get(&self.path).await?.bytes().await?;
            match serde_json::from_slice::<Holder>(&held) {
                Ok(h) if h.run_id == run_id => self.store.put(&self.path, body).await,
                _ => Err(object_store::Error::Precondition {
                    path: self.path.to_string(),
                    source: "the lease names another run".into(),
                }),
            }
        })
    }
}

/// A held lease, renewed by a heartbeat thread. On drop, unless another run took it
/// over: deleted while no write is unrecorded ([`Lease::writing`], [`Lease::recorded`]),
/// else left released ([`Holder::released_micros`]), so the next run of the batch knows
/// the tables may hold rows of it that `_run_control` does not tell of.
pub(crate) struct Lease {
    held: Arc<Held>,
    /// Whether the tables may hold rows of the batch that `_run_control` does not tell
    /// of: from [`Lease::writing`] (or the takeover of a run that left them) until
    /// [`Lease::recorded`].
    unrecorded: std::sync::atomic::AtomicBool,
    /// The claim file of a takeover on a store without conditional update.
    claim: Option<StorePath>,
    heartbeat: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    /// A lease of a dead run this one took over.
    pub(crate) took_over: Option<Holder>,
}

/// What one look at the lease found.
enum Found {
    /// None there: created, at this version.
    Created(Option<UpdateVersion>),
    /// Held by a live run.
    Live(Box<Holder>),
    /// Taken over from a dead run (or an unreadable lease).
    TakenOver {
        from: Option<Holder>,
        version: Option<UpdateVersion>,
        claim: Option<StorePath>,
    },
    /// Gone or changed since it was read: look again.
    Changed,
}

/// Where a schema's leases live: the schema folder, in a store.
pub(crate) struct LeaseFolder<'a> {
    /// The store holding the schema folder.
    pub(crate) store: &'a Arc<DynObjectStore>,
    /// The schema folder's path in `store`.
    pub(crate) schema_dir: &'a StorePath,
    /// The schema folder as messages show it.
    pub(crate) shown: &'a str,
}

impl Lease {
    /// Takes the lease of one folder of a batch (its `landing_path` and `batch_id`) under
    /// the schema `at`, or says who holds it.
    pub(crate) fn acquire(
        at: &LeaseFolder<'_>,
        landing_path: &str,
        batch_id: &str,
        run_id: &str,
        ttl: Duration,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Lease> {
        let file = lease_file(landing_path, batch_id);
        let path = at.schema_dir.clone().join(LEASE_DIR).join(file.as_str());
        let now = crate::batch::now_micros();
        let held = Arc::new(Held {
            store: Arc::clone(at.store),
            path,
            shown: format!("{}/{LEASE_DIR}/{file}", at.shown),
            runtime: runtime.handle().clone(),
            ttl,
            me: Mutex::new(Holder::me(run_id, now)),
            version: Mutex::new(None),
            lost: Mutex::new(None),
        });
        let batch_id = format!("{landing_path}/batch_id={batch_id}");
        let io = |e: object_store::Error| Error::Lease {
            path: held.shown.clone(),
            source: Box::new(e),
        };
        // A few looks: the lease may change between a failed create and the read.
        for _ in 0..4 {
            let (took_over, version, claim) = match create_or_take_over(&held, now).map_err(io)? {
                Found::Created(version) => (None, version, None),
                Found::Live(holder) => {
                    return Err(Error::BatchLeased {
                        batch_id,
                        holder,
                        path: held.shown.clone(),
                    });
                }
                Found::Changed => continue,
                Found::TakenOver {
                    from,
                    version,
                    claim,
                } => (from, version, claim),
            };
            *held.version.lock() = version;
            return Ok(Lease::start(held, took_over, claim));
        }
        Err(Error::BatchLeased {
            batch_id,
            holder: Box::new(Holder::me("(another run that just took it)", now)),
            path: held.shown.clone(),
        })
    }

    /// Starts the heartbeat of a lease just taken.
    fn start(held: Arc<Held>, took_over: Option<Holder>, claim: Option<StorePath>) -> Lease {
        let (stop, beats) = mpsc::channel::<()>();
        let beating = Arc::clone(&held);
        let interval = heartbeat_interval(held.ttl);
        // The caller's logging (and retry counting) on the heartbeat's thread too.
        let dispatch = tracing::dispatcher::get_default(tracing::Dispatch::clone);
        let thread = std::thread::Builder::new()
            .name("bronze-lease".into())
            .spawn(move || {
                let _logging = tracing::dispatcher::set_default(&dispatch);
                // Beats until the run drops its lease (the sender goes) or loses it.
                while let Err(mpsc::RecvTimeoutError::Timeout) = beats.recv_timeout(interval) {
                    if !beating.renew() {
                        return;
                    }
                }
            });
        let heartbeat = match thread {
            Ok(t) => Some((stop, t)),
            Err(e) => {
                tracing::warn!(lease = %held.shown, error = %e, "no heartbeat thread: the lease is not renewed");
                None
            }
        };
        Lease {
            held,
            unrecorded: took_over.is_some().into(),
            claim,
            heartbeat,
            took_over,
        }
    }

    /// Says the run is about to write rows of the batch to its tables: dropped before
    /// [`Lease::recorded`], the lease is left released.
    pub(crate) fn writing(&self) {
        self.unrecorded
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Says `_run_control` records the run's writes: dropped, the lease is deleted.
    pub(crate) fn recorded(&self) {
        self.unrecorded
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Fails with [`Error::LeaseLost`] once another run has taken the lease over.
    pub(crate) fn check(&self) -> Result<()> {
        match self.held.lost.lock().clone() {
            None => Ok(()),
            Some(reason) => Err(Error::LeaseLost {
                path: self.held.shown.clone(),
                reason,
            }),
        }
    }
}

/// Creates the lease if there is none; else reads it and takes it over if its holder is
/// gone ([`take_over`]).
fn create_or_take_over(held: &Held, now: i64) -> object_store::Result<Found> {
    let put = held.runtime.block_on(held.store.put_opts(
        &held.path,
        held.body(),
        PutOptions::from(PutMode::Create),
    ));
    match put {
        Ok(r) => Ok(Found::Created(version_of(r))),
        Err(object_store::Error::AlreadyExists { .. }) => take_over(held, now),
        Err(e) => Err(e),
    }
}

/// Reads an existing lease and takes it over if its holder is gone: by a conditional
/// update on the version read, or, on a store without one, through a create-if-absent
/// claim named after the stale content.
fn take_over(held: &Held, now: i64) -> object_store::Result<Found> {
    let (bytes, version) = match read_lease(held) {
        Ok(read) => read,
        // Released between our put and our read.
        Err(object_store::Error::NotFound { .. }) => return Ok(Found::Changed),
        Err(e) => return Err(e),
    };
    let holder = serde_json::from_slice::<Holder>(&bytes).ok();
    if let Some(h) = holder.as_ref().filter(|h| !h.is_stale(now, held.ttl)) {
        return Ok(Found::Live(Box::new(h.clone())));
    }
    // Stale, or unreadable (a torn write of a killed run).
    tracing::warn!(lease = %held.shown, holder = ?holder, "taking over the lease of a run that is gone");
    let swap = held.runtime.block_on(held.store.put_opts(
        &held.path,
        held.body(),
        PutOptions::from(PutMode::Update(version)),
    ));
    match swap {
        Ok(r) => Ok(Found::TakenOver {
            from: holder,
            version: version_of(r),
            claim: None,
        }),
        // Renewed, taken over or released since we read it.
        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
            Ok(Found::Changed)
        }
        Err(object_store::Error::NotImplemented { .. }) => claim_stale(held, &bytes, holder),
        Err(e) => Err(e),
    }
}

/// The lease's content and the version it was read at.
fn read_lease(held: &Held) -> object_store::Result<(bytes::Bytes, UpdateVersion)> {
    held.runtime.block_on(async {
        let got = held.store.get(&held.path).await?;
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        Ok::<_, object_store::Error>((got.bytes().await?, version))
    })
}

/// Takes over the stale lease whose content is `bytes` on a store without conditional
/// update: creates a claim file named after that content (create-if-absent: one
/// winner), then rewrites the lease.
fn claim_stale(held: &Held, bytes: &[u8], holder: Option<Holder>) -> object_store::Result<Found> {
    let claim = held.claim_of(bytes);
    let put = held.runtime.block_on(held.store.put_opts(
        &claim,
        held.body(),
        PutOptions::from(PutMode::Create),
    ));
    match put {
        Ok(_) => {
            held.runtime
                .block_on(held.store.put(&held.path, held.body()))?;
            Ok(Found::TakenOver {
                from: holder,
                version: None,
                claim: Some(claim),
            })
        }
        // Another run claimed this stale lease first.
        Err(object_store::Error::AlreadyExists { .. }) => Ok(Found::Changed),
        Err(e) => Err(e),
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.heartbeat.take() {
            drop(stop);
            let _ = thread.join();
        }
        if self.held.lost.lock().is_some() {
            // Another run holds it now.
            return;
        }
        // Claims of earlier takeovers whose runs died before their release, swept while
        // the lease is still ours and live (no takeover of the contents they name can be
        // in flight), sparing our own claim and one on what the lease holds now. Only a
        // takeover through a claim (a store without conditional update) finds any: on
        // the other stores no listing is spent.
        if let Some(own) = self.claim.clone() {
            let held = Arc::clone(&self.held);
            let current = held.claim_of(&serde_json::to_vec(&*held.me.lock()).unwrap_or_default());
            let swept = self.held.runtime.block_on(async move {
                for left in held.claims_left().await? {
                    if left == own || left == current {
                        continue;
                    }
                    match held.store.delete(&left).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok::<_, object_store::Error>(())
            });
            if let Err(e) = swept {
                tracing::warn!(lease = %self.held.shown, error = %e, "could not remove the claims of dead runs");
            }
        }
        let unrecorded = self.unrecorded.load(std::sync::atomic::Ordering::Relaxed);
        if unrecorded {
            // Kept, released: the tables may hold rows `_run_control` does not tell of.
            self.held.me.lock().released_micros = Some(crate::batch::now_micros());
            if !self.held.renew() || self.held.lost.lock().is_some() {
                return;
            }
        }
        let held = Arc::clone(&self.held);
        let claim = self.claim.take();
        // Dropped on a pool or caller thread, never inside the runtime.
        let released = self.held.runtime.block_on(async move {
            if !unrecorded {
                held.store.delete(&held.path).await?;
            }
            if let Some(claim) = claim {
                held.store.delete(&claim).await?;
            }
            Ok::<_, object_store::Error>(())
        });
        if let Err(e) = released {
            tracing::warn!(lease = %self.held.shown, error = %e, "could not release the batch lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_start_is_read_and_a_missing_pid_has_none() {
        assert!(process_start(std::process::id()).is_some());
        // pid_max is at most 2^22 on Linux.
        assert_eq!(process_start(u32::MAX - 1), None);
    }

    #[test]
    fn an_exited_process_not_yet_reaped_counts_as_gone() {
        // A child that exits stays a zombie until it is waited for.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after = stat[stat.rfind(')').unwrap() + 1..].to_string();
            after.split_whitespace().next().unwrap().to_string()
        };
        while state() != "Z" {
            assert!(std::time::Instant::now() < deadline, "the child never exited");
            std::thread::yield_now();
        }
        assert_eq!(process_start(pid), None);
        child.wait().unwrap();
    }

    #[test]
    fn a_live_holder_is_not_stale_a_dead_or_old_one_is() {
        let now = crate::batch::now_micros();
        let ttl = Duration::from_secs(3600);
        // A live process of this host (pid 1 runs as long as the machine).
        let live = Holder {
            run_id: "r".into(),
            host: host_name(),
            pid: 1,
            pid_start: process_start(1),
            since_micros: now,
            renewed_micros: None,
            released_micros: None,
        };
        assert!(!live.is_stale(now, ttl));
        let reused_pid = Holder {
            pid_start: process_start(1).map(|s| s + 1),
            ..live.clone()
        };
        assert!(reused_pid.is_stale(now, ttl));
        let dead = Holder {
            pid: u32::MAX - 1,
            ..live.clone()
        };
        assert!(dead.is_stale(now, ttl));
        let elsewhere = Holder {
            host: "another-host".into(),
            pid: u32::MAX - 1,
            ..live.clone()
        };
        assert!(
            !elsewhere.is_stale(now, ttl),
            "another host: only the TTL tells"
        );
        let old = Holder {
            since_micros: now - 2 * 3_600_000_000,
            ..elsewhere
        };
        assert!(old.is_stale(now, ttl));
        let released = Holder {
            released_micros: Some(now),
            ..live
        };
        assert!(released.is_stale(now, ttl), "released: the run is over");
    }

    use deltalake::logstore::object_store::{local::LocalFileSystem, memory::InMemory};

    const BATCH: (&str, &str) = ("market/events", "b1");

    fn lease_path() -> StorePath {
        StorePath::from("lake/bronze")
            .join(LEASE_DIR)
            .join(lease_file(BATCH.0, BATCH.1).as_str())
    }

    fn acquire(
        store: &Arc<DynObjectStore>,
        run_id: &str,
        ttl: Duration,
        rt: &tokio::runtime::Runtime,
    ) -> Result<Lease> {
        let at = LeaseFolder {
            store,
            schema_dir: &StorePath::from("lake/bronze"),
            shown: "lake/bronze",
        };
        Lease::acquire(&at, BATCH.0, BATCH.1, run_id, ttl, rt)
    }

    fn read_holder(store: &DynObjectStore, rt: &tokio::runtime::Runtime) -> Holder {
        let bytes = rt
            .block_on(async { store.get(&lease_path()).await?.bytes().await })
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Waits (up to 20 s) until `done` holds.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A lease of a run on another host, last renewed long ago.
    fn stale_lease(store: &DynObjectStore, rt: &tokio::runtime::Runtime) {
        let old = Holder {
            run_id: "lost-run".into(),
            host: "lost-host".into(),
            pid: 1,
            pid_start: Some(1),
            since_micros: 0,
            renewed_micros: Some(1),
            released_micros: None,
        };
        rt.block_on(store.put(&lease_path(), serde_json::to_vec(&old).unwrap().into()))
            .unwrap();
    }

    fn stores() -> Vec<(&'static str, Arc<DynObjectStore>, Option<tempfile::TempDir>)> {
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<DynObjectStore> =
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        vec![
            // Conditional update (as S3, Azure, GCS).
            ("memory", Arc::new(InMemory::new()), None),
            // No conditional update: the claim file.
            ("local", local, Some(dir)),
        ]
    }

    #[test]
    fn of_many_runs_taking_over_one_dead_lease_exactly_one_wins() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        for (name, store, _dir) in stores() {
            for round in 0..5 {
                stale_lease(store.as_ref(), &rt);
                let barrier = std::sync::Barrier::new(6);
                let outcomes: Vec<Result<Lease>> = std::thread::scope(|s| {
                    let runs: Vec<_> = (0..6)
                        .map(|i| {
                            let (store, rt, barrier) = (&store, &rt, &barrier);
                            s.spawn(move || {
                                barrier.wait();
                                acquire(store, &format!("run-{i}"), Duration::from_secs(60), rt)
                            })
                        })
                        .collect();
                    runs.into_iter().map(|r| r.join().unwrap()).collect()
                });
                let winners: Vec<&Lease> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
                assert_eq!(winners.len(), 1, "{name}, round {round}: one winner");
                assert_eq!(
                    winners[0].took_over.as_ref().map(|h| h.run_id.as_str()),
                    Some("lost-run"),
                    "{name}"
                );
                let winner = read_holder(store.as_ref(), &rt).run_id;
                for o in &outcomes {
                    if let Err(e) = o {
                        assert!(
                            matches!(e, Error::BatchLeased { holder, .. } if holder.run_id == winner
                                || holder.run_id.starts_with("(another run")),
                            "{name}: {e}"
                        );
                    }
                }
                // Recorded (as after the run's `_run_control` write): deleted.
                winners[0].recorded();
                drop(outcomes);
                // Released, claim files too: nothing left in the lease folder.
                let left = rt.block_on(async {
                    use futures::TryStreamExt as _;
                    store
                        .list(Some(&StorePath::from("lake/bronze").join(LEASE_DIR)))
                        .try_collect::<Vec<_>>()
                        .await
                });
                assert_eq!(left.unwrap().len(), 0, "{name}: all released");
            }
        }
    }

    #[test]
    fn a_lease_dropped_unrecorded_is_left_released_and_taken_over_at_once() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let hour = Duration::from_secs(3600);
        for (name, store, _dir) in stores() {
            let first = acquire(&store, "failed-run", hour, &rt).unwrap();
            first.writing();
            drop(first);
            let left = read_holder(store.as_ref(), &rt);
            assert_eq!(left.run_id, "failed-run", "{name}");
            assert!(left.released_micros.is_some(), "{name}: {left:?}");
            // Within the TTL, on the same host and in a live process: taken over, and
            // the new run is told whose rows it replaces.
            let second = acquire(&store, "rerun", hour, &rt).unwrap();
            assert_eq!(
                second.took_over.as_ref().map(|h| h.run_id.as_str()),
                Some("failed-run"),
                "{name}"
            );
            assert_eq!(read_holder(store.as_ref(), &rt).released_micros, None);
            // It has to rewrite what the first run left: failed before it could, the
            // lease is left released again.
            drop(second);
            assert!(read_holder(store.as_ref(), &rt).released_micros.is_some());
            let third = acquire(&store, "rerun", hour, &rt).unwrap();
            third.recorded();
            drop(third);
            let gone = rt.block_on(store.head(&lease_path()));
            assert!(
                matches!(gone, Err(object_store::Error::NotFound { .. })),
                "{name}: a recorded run deletes its lease: {gone:?}"
            );
        }
    }

    #[test]
    fn a_held_lease_is_renewed_and_a_taken_over_one_is_lost_and_left_alone() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        for (name, store, _dir) in stores() {
            // Renewed every 20 ms.
            let lease = acquire(&store, "slow-run", Duration::from_millis(80), &rt).unwrap();
            until("renewed twice", || {
                read_holder(store.as_ref(), &rt)
                    .renewed_micros
                    .is_some_and(|r| r > read_holder(store.as_ref(), &rt).since_micros + 40_000)
            });
            // Older than its TTL, yet renewed: another run finds it live.
            assert!(
                matches!(
                    acquire(&store, "second-run", Duration::from_millis(80), &rt),
                    Err(Error::BatchLeased { .. })
                ),
                "{name}"
            );
            lease.check().unwrap();
            // Another run takes it over (as after a stall longer than the TTL).
            let other = Holder {
                run_id: "other-run".into(),
                ..read_holder(store.as_ref(), &rt)
            };
            rt.block_on(store.put(&lease_path(), serde_json::to_vec(&other).unwrap().into()))
                .unwrap();
            until("lost", || lease.check().is_err());
            assert!(
                matches!(lease.check(), Err(Error::LeaseLost { .. })),
                "{name}"
            );
            drop(lease);
            assert_eq!(
                read_holder(store.as_ref(), &rt).run_id,
                "other-run",
                "{name}: the new holder's lease stays"
            );
            rt.block_on(store.delete(&lease_path())).unwrap();
        }
    }

    /// A store that ignores put-if-absent (as some S3-compatible stores do).
    #[derive(Debug)]
    struct IgnoresCreate;

    impl std::fmt::Display for IgnoresCreate {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("IgnoresCreate")
        }
    }

    #[async_trait::async_trait]
    impl crate::testdata::Hook for IgnoresCreate {
        async fn put(
            &self,
            inner: &DynObjectStore,
            location: &StorePath,
            payload: object_store::PutPayload,
            _opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            inner.put(location, payload).await
        }
    }

    #[test]
    fn the_put_if_absent_probe_tells_a_store_that_ignores_it_and_leaves_nothing() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let probe = StorePath::from("lake/bronze/_bronze_leases/.probe");
        let good: Arc<DynObjectStore> = Arc::new(InMemory::new());
        assert_eq!(
            rt.block_on(put_if_absent_refusal(good.as_ref(), &probe))
                .unwrap(),
            None
        );
        let bad = crate::testdata::Hooked::new(Arc::new(InMemory::new()), IgnoresCreate);
        let why = rt
            .block_on(put_if_absent_refusal(bad.as_ref(), &probe))
            .unwrap()
            .expect("refused");
        assert!(
            why.contains("ignores put-if-absent") && why.contains("--single-writer"),
            "{why}"
        );
        for store in [good, bad as Arc<DynObjectStore>] {
            assert!(rt.block_on(store.head(&probe)).is_err(), "probe deleted");
        }
    }
}
