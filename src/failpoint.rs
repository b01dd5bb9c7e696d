//! Named crash points for the crash tests; compiled in only with the `failpoints`
//! feature, which releases never enable.
//!
//! `BRONZE_FAILPOINT=<name>` (or `IngestBuilder::with_failpoint`) arms one point. With
//! `BRONZE_FAILPOINT_ACTION=kill` the process sends itself SIGKILL there (no destructor
//! runs, nothing is flushed: what an OOM kill or a lost node leaves behind); otherwise the
//! run stops with [`crate::Error::Failpoint`]; with `pause` it waits for a line on stdin
//! and goes on. [`POINTS`] lists them in run order; [`SIMULATED`] lists the faults a
//! run can be made to meet instead of a crash.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use deltalake::logstore::object_store::{
    DynObjectStore, MultipartUpload, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    Result, path::Path,
};

use crate::testdata::{Hook, Hooked};

/// Every named point, in the order a run passes them. `after_staging_chunk` is passed
/// only when the staging table is persisted; `before_commit` and `between_tables` only
/// support the kill action (they sit inside the parallel write phase).
pub const POINTS: &[&str] = &[
    "before_staging",
    "after_staging_chunk",
    "after_staging",
    "before_commit",
    "between_tables",
    "before_run_control",
    "before_drop_staging",
];

/// Points in table upkeep rather than in a batch run, each killing the process (with
/// `BRONZE_FAILPOINT_ACTION=kill`): `run_control_compaction` at the commit of
/// `_run_control`'s compaction (its compacted files written, the commit not made),
/// `log_cleanup` once `maintain`'s clean-up of expired log entries has deleted the first
/// of a table (the others still there; loads clean up no log entry).
pub const UPKEEP_POINTS: &[&str] = &["run_control_compaction", "log_cleanup"];

/// `store_jitter` is neither: every put and get of the run's catalog store waits 0-4 ms,
/// drawn from `BRONZE_FAILPOINT_SEED` (default 0), so concurrent workers interleave
/// differently per seed (the backlog tests run their scenario under several seeds).
pub const JITTER: &str = "store_jitter";

/// Faults simulated rather than crashes: `grow_file` (the copy step appends to a landing
/// file named `*growing*` after discovery), `unreadable_file` (a file named `*unreadable*` cannot be read:
/// permissions cannot stop root, which CI runs as), `lose_a_row` (a bug that drops the
/// last flattened row of a topic's table, for the row accounting's test).
pub const SIMULATED: &[&str] = &["grow_file", "unreadable_file", "lose_a_row"];

/// The armed read fault `point` of [`SIMULATED`], before `file` is read.
pub(crate) fn before_read(
    point: &str,
    file: &crate::source::discover::SourceFile,
) -> crate::Result<()> {
    use crate::Error;
    match point {
        "grow_file" if file.name.contains("growing") => {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&file.path)
                .map_err(|e| Error::io(&file.path, e))?;
            f.write_all(b"{\"topic\":\"late\",\"message_id\":\"late\"}\n")
                .map_err(|e| Error::io(&file.path, e))
        }
        "unreadable_file" if file.name.contains("unreadable") => Err(Error::io(
            &file.path,
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        )),
        _ => Ok(()),
    }
}

/// `lose_a_row`: the last batch of a topic's own table loses its last row.
pub(crate) fn lose_a_row(batches: Option<&mut Vec<arrow::array::RecordBatch>>) {
    if let Some(last) = batches.and_then(|b| b.last_mut())
        && last.num_rows() > 0
    {
        *last = last.slice(0, last.num_rows() - 1);
    }
}

/// Whether an armed point kills the process rather than returning an error.
pub(crate) fn kill_action() -> bool {
    std::env::var("BRONZE_FAILPOINT_ACTION").is_ok_and(|a| a == "kill")
}

/// Whether an armed point pauses the run until a line arrives on stdin (so a test can
/// start a second run while the first holds its lease, with no sleep).
pub(crate) fn pause_action() -> bool {
    std::env::var("BRONZE_FAILPOINT_ACTION").is_ok_and(|a| a == "pause")
}

/// Says the point is reached on stderr, then waits for a line (or EOF) on stdin.
pub(crate) fn pause(name: &str) {
    eprintln!("bronze: failpoint `{name}` reached: paused until a line on stdin");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// Sends SIGKILL to this process (through `kill(1)`: no unsafe code) and never returns.
pub(crate) fn kill_self(name: &str) -> ! {
    eprintln!("bronze: failpoint `{name}` reached: killing the process (SIGKILL)");
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    // Only reached if `kill` could not run: still die without unwinding.
    std::process::abort()
}

/// Wraps the store of a run armed with `before_commit`: the first commit of a data
/// table (a `_delta_log/<n>.json` put after at least one data file was written) kills
/// the process, leaving written but uncommitted Parquet files behind.
#[derive(Debug)]
pub(crate) struct BeforeCommitStore {
    wrote_data: AtomicBool,
}

impl BeforeCommitStore {
    pub(crate) fn wrap(inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Hooked::new(
            inner,
            BeforeCommitStore {
                wrote_data: AtomicBool::new(false),
            },
        )
    }

    fn is_data_table(loc: &str) -> bool {
        !loc.contains(crate::naming::STAGING_PREFIX)
            && !loc.contains(&format!("/{}/", crate::RUN_CONTROL_TABLE))
    }
}

impl fmt::Display for BeforeCommitStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BeforeCommitStore")
    }
}

#[async_trait::async_trait]
impl Hook for BeforeCommitStore {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let loc = location.as_ref();
        if Self::is_data_table(loc) {
            if loc.ends_with(".parquet") {
                self.wrote_data.store(true, Ordering::SeqCst);
            } else if loc.contains("/_delta_log/")
                && loc.ends_with(".json")
                && self.wrote_data.load(Ordering::SeqCst)
            {
                kill_self("before_commit");
            }
        }
        inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if Self::is_data_table(location.as_ref()) && location.as_ref().ends_with(".parquet") {
            self.wrote_data.store(true, Ordering::SeqCst);
        }
        inner.put_multipart_opts(location, opts).await
    }
}

/// Wraps the store of a run armed with `run_control_compaction`: a commit of
/// `_run_control` after data files were written to it since its previous commit of the
/// run (the compaction that follows the run's own append) kills the process.
#[derive(Debug)]
pub(crate) struct CompactionCommitStore {
    commits: std::sync::atomic::AtomicU64,
    wrote_data: AtomicBool,
}

impl CompactionCommitStore {
    pub(crate) fn wrap(inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Hooked::new(
            inner,
            CompactionCommitStore {
                commits: std::sync::atomic::AtomicU64::new(0),
                wrote_data: AtomicBool::new(false),
            },
        )
    }

    fn in_run_control(loc: &str) -> bool {
        loc.contains(&format!("/{}/", crate::RUN_CONTROL_TABLE))
    }

    fn wrote(&self, loc: &str) {
        if Self::in_run_control(loc) && loc.ends_with(".parquet") && !loc.contains("/_delta_log/") {
            self.wrote_data.store(true, Ordering::SeqCst);
        }
    }
}

impl fmt::Display for CompactionCommitStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CompactionCommitStore")
    }
}

#[async_trait::async_trait]
impl Hook for CompactionCommitStore {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let loc = location.as_ref();
        self.wrote(loc);
        if Self::in_run_control(loc) && loc.contains("/_delta_log/") && loc.ends_with(".json") {
            if self.commits.load(Ordering::SeqCst) > 0 && self.wrote_data.load(Ordering::SeqCst) {
                kill_self("run_control_compaction");
            }
            self.commits.fetch_add(1, Ordering::SeqCst);
            self.wrote_data.store(false, Ordering::SeqCst);
        }
        inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wrote(location.as_ref());
        inner.put_multipart_opts(location, opts).await
    }
}

/// Wraps the store of a `maintain` armed with `log_cleanup`: the clean-up of
/// expired log entries deletes one at a time, and the process is killed once the first
/// (`_delta_log/<n>.json`) is deleted.
#[derive(Debug)]
pub(crate) struct LogCleanupStore;

impl LogCleanupStore {
    pub(crate) fn wrap(inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Hooked::new(inner, LogCleanupStore)
    }
}

impl fmt::Display for LogCleanupStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LogCleanupStore")
    }
}

#[async_trait::async_trait]
impl Hook for LogCleanupStore {
    fn delete_stream(
        &self,
        inner: Arc<DynObjectStore>,
        locations: futures::stream::BoxStream<'static, Result<Path>>,
    ) -> futures::stream::BoxStream<'static, Result<Path>> {
        use futures::StreamExt as _;
        // One delete at a time: the first log entry is gone when the second kills.
        let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
        locations
            .then(move |location| {
                let (inner, seen) = (Arc::clone(&inner), Arc::clone(&seen));
                async move {
                    let location = location?;
                    let log = location.as_ref().contains("/_delta_log/")
                        && location.as_ref().ends_with(".json");
                    if log && seen.fetch_add(1, Ordering::SeqCst) == 1 {
                        kill_self("log_cleanup");
                    }
                    let one = futures::stream::iter([Ok(location.clone())]).boxed();
                    match inner.delete_stream(one).next().await {
                        Some(deleted) => deleted,
                        None => Ok(location),
                    }
                }
            })
            .boxed()
    }
}

/// The store wrapper of an armed upkeep point ([`UPKEEP_POINTS`]) with the kill action.
pub(crate) fn upkeep_wrap(
    armed: impl Fn(&str) -> bool,
) -> Option<fn(Arc<DynObjectStore>) -> Arc<DynObjectStore>> {
    if !kill_action() {
        return None;
    }
    if armed("run_control_compaction") {
        Some(CompactionCommitStore::wrap)
    } else if armed("log_cleanup") {
        Some(LogCleanupStore::wrap)
    } else {
        None
    }
}

/// The `store_jitter` hook: a seeded pseudo-random wait before each put and get.
#[derive(Debug)]
pub(crate) struct JitterStore {
    seed: u64,
    requests: std::sync::atomic::AtomicU64,
}

impl JitterStore {
    pub(crate) fn wrap(inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        let seed = std::env::var("BRONZE_FAILPOINT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Hooked::new(
            inner,
            JitterStore {
                seed,
                requests: std::sync::atomic::AtomicU64::new(0),
            },
        )
    }

    /// The next wait: splitmix64 of the seed and the request's number, in microseconds.
    async fn wait(&self) {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let mut z = self
            .seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        tokio::time::sleep(std::time::Duration::from_micros(z % 4_000)).await;
    }
}

impl fmt::Display for JitterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JitterStore(seed {})", self.seed)
    }
}

#[async_trait::async_trait]
impl Hook for JitterStore {
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.wait().await;
        inner.put_opts(location, payload, opts).await
    }
    async fn get(
        &self,
        inner: &DynObjectStore,
        location: &Path,
        options: deltalake::logstore::object_store::GetOptions,
    ) -> Result<deltalake::logstore::object_store::GetResult> {
        self.wait().await;
        inner.get_opts(location, options).await
    }
}
