//! The ledger: per entity (landing path), the latest run of each of its batches as
//! `_run_control` records them up to one version of that table, and how far the
//! entity's folders were listed. A backlog (`ingest --pending`, `status`) reads the
//! ledgers of its entities and the `_run_control` commits made since, never the whole
//! table, and in an object store lists an entity's folders from its last loaded batch
//! on: its cost stays the same however many batches were loaded before.
//!
//! Nothing depends on a ledger being current. Each one is `_run_control` folded up to
//! the version it names, so any process may write one at any time (a plain put: of two
//! written at once either is right) and a reader folds in the commits made after it. A
//! ledger that is missing, unreadable, of another format, or older than the log kept
//! (`delta.logRetentionDuration`) is rebuilt from one full read of `_run_control`.
//!
//! Files: `<schema>/_bronze_ledger/<source>+<entity>.json` ([`ledger_file`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use deltalake::logstore::object_store::{
    DynObjectStore, ObjectStoreExt as _, PutPayload, path::Path as StorePath,
};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::naming::TableName;
use crate::naming::{LEDGER_DIR, RUN_CONTROL_TABLE};
use crate::run_control::{RunRow, rows_of, run_control_rows};
use crate::table::Storage;

/// The ledger format this release reads and writes; another is rebuilt.
const FORMAT: u32 = 2;

/// More `_run_control` commits than this since a ledger: one full read costs less.
const MAX_REPLAY: u64 = 500;

/// The ledger file of an entity: `<source>+<entity>.json` (a name over 200 bytes is cut
/// to a hash of the landing path).
pub(crate) fn ledger_file(landing_path: &str) -> String {
    let stem = landing_path.replace('/', "+");
    if stem.len() <= 200 {
        format!("{stem}.json")
    } else {
        let hash = crate::naming::stable_id(&[landing_path.as_bytes()]);
        format!("{}.json", &hash[..32])
    }
}

/// One entity's ledger.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Ledger {
    format: u32,
    /// `<source>/<entity>`.
    pub(super) landing_path: String,
    /// The `_run_control` version folded in; `None` when that table did not exist.
    run_control_version: Option<u64>,
    /// The latest run of each batch id.
    /// Shared by the ledger as read and as changed until a run is folded in.
    #[serde(
        serialize_with = "stored_runs::serialize",
        deserialize_with = "stored_runs::deserialize"
    )]
    batches: Arc<BTreeMap<String, Entry>>,
    /// Every folder of the entity with a batch id up to this one was listed, and its
    /// latest run loaded it: a listing in an object store starts after it.
    pub(super) listed_through: Option<String>,
    /// When the entity's folders in an object store were last listed in full,
    /// microseconds since the Unix epoch (0: never).
    pub(super) full_listing_micros: i64,
    /// When every loaded batch of the entity was last compared with its manifest,
    /// microseconds since the Unix epoch (0: never).
    #[serde(default)]
    pub(super) late_check_micros: i64,
    /// Loaded batches whose folder differed from their manifest when last compared: each
    /// round compares them again until they match (loaded again, or put back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) changed: Vec<String>,
}

/// A ledger's runs as stored: the batch ids in order, separated by spaces (a batch id
/// has none), the start of each, and the error of each whose latest run failed. Read
/// in one pass and built in bulk: a JSON value per batch cost more to read than the
/// rest of a no-op `--pending`.
#[derive(Serialize, Deserialize)]
struct StoredRuns {
    ids: String,
    /// Microseconds since the Unix epoch, in the order of `ids`, separated by spaces.
    started: String,
    /// The batches whose latest run failed, with its first failed row's `<table>: <error>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    failed: BTreeMap<String, Option<String>>,
}

mod stored_runs {
    use std::fmt::Write as _;

    use super::{Arc, BTreeMap, Entry, StoredRuns, words};
    use serde::{Deserialize as _, Deserializer, Serialize as _, Serializer};

    pub(super) fn serialize<S: Serializer>(
        batches: &Arc<BTreeMap<String, Entry>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut stored = StoredRuns {
            ids: String::with_capacity(batches.len() * 12),
            started: String::with_capacity(batches.len() * 17),
            failed: BTreeMap::new(),
        };
        for (i, (id, e)) in batches.iter().enumerate() {
            if id.is_empty() || id.contains(' ') {
                return Err(serde::ser::Error::custom(format!(
                    "batch id {id:?} cannot be stored in a ledger"
                )));
            }
            if i > 0 {
                stored.ids.push(' ');
                stored.started.push(' ');
            }
            stored.ids.push_str(id);
            let _ = write!(stored.started, "{}", e.started);
            if !e.ok {
                stored.failed.insert(id.clone(), e.error.clone());
            }
        }
        stored.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<BTreeMap<String, Entry>>, D::Error> {
        use serde::de::Error as _;
        let StoredRuns {
            ids,
            started,
            mut failed,
        } = StoredRuns::deserialize(d)?;
        if ids.is_empty() && started.is_empty() {
            return Ok(Arc::default());
        }
        let (mut ids, mut started) = (words(&ids), words(&started));
        let mut entries = Vec::new();
        loop {
            let (id, started) = match (ids.next(), started.next()) {
                (None, None) => break,
                (Some(id), Some(started)) if !id.is_empty() => (id, started),
                _ => return Err(D::Error::custom("a start for each batch id")),
            };
            let started = started.parse().map_err(D::Error::custom)?;
            let error = failed.remove(id);
            let entry = Entry {
                started,
                ok: error.is_none(),
                error: error.flatten(),
            };
            entries.push((id.to_string(), entry));
        }
        // Sorted input is checked in one pass; the last of equal ids wins.
        Ok(Arc::new(BTreeMap::from_iter(entries)))
    }
}

/// The parts of `text` between single spaces (a byte loop: `str::split` costs a ledger's
/// read twice over).
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.bytes().position(|b| b == b' ') {
            Some(i) => {
                rest = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// The latest run of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    /// Its start, microseconds since the Unix epoch.
    started: i64,
    /// No failed row.
    ok: bool,
    /// Its first failed row's `<table>: <error>`.
    error: Option<String>,
}

/// Whether a batch's latest run loaded it, and when it started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RunState {
    /// Its start, microseconds since the Unix epoch.
    pub(super) started: i64,
    /// No failed row.
    pub(super) ok: bool,
}

impl Ledger {
    fn new(landing_path: &str, run_control_version: Option<u64>) -> Ledger {
        Ledger {
            format: FORMAT,
            landing_path: landing_path.to_string(),
            run_control_version,
            ..Default::default()
        }
    }

    /// Folds one run of this entity in: it is the batch's latest when it started no
    /// earlier than the one recorded (the rule of [`latest_runs`]).
    fn fold(&mut self, run: &Run) {
        let newer = self
            .batches
            .get(&run.batch_id)
            .is_none_or(|e| run.started >= e.started);
        if newer {
            Arc::make_mut(&mut self.batches).insert(
                run.batch_id.clone(),
                Entry {
                    started: run.started,
                    ok: run.ok,
                    error: run.error.clone(),
                },
            );
        }
    }

    /// Whether the latest run of `batch_id` loaded it.
    pub(super) fn is_loaded(&self, batch_id: &str) -> bool {
        self.batches.get(batch_id).is_some_and(|e| e.ok)
    }

    /// Whether `batch_id` has any run.
    #[cfg(test)]
    fn has_run(&self, batch_id: &str) -> bool {
        self.batches.contains_key(batch_id)
    }

    /// The latest run of every batch, to look up by id (a hash look-up costs a fraction
    /// of a walk down the ordered map).
    pub(super) fn run_index(&self) -> HashMap<&str, RunState, ahash::RandomState> {
        self.batches
            .iter()
            .map(|(id, e)| {
                let run = RunState {
                    started: e.started,
                    ok: e.ok,
                };
                (id.as_str(), run)
            })
            .collect()
    }

    /// Takes how far `stored` was listed when that still holds: every batch it had
    /// loaded up to there is loaded here too. Otherwise (rows removed, a rerun failed)
    /// the entity is listed in full next.
    fn keep_listing_of(&mut self, stored: &Ledger) {
        let Some(through) = &stored.listed_through else {
            return;
        };
        let holds = stored
            .ids_through(through)
            .filter(|id| stored.is_loaded(id))
            .all(|id| self.is_loaded(id));
        if holds {
            self.listed_through = Some(through.clone());
            self.full_listing_micros = stored.full_listing_micros;
        }
    }

    /// The batch ids with a run, up to and including `through`.
    pub(super) fn ids_through<'a>(&'a self, through: &'a str) -> impl Iterator<Item = &'a String> {
        self.batches
            .range::<str, _>((
                std::ops::Bound::Unbounded,
                std::ops::Bound::Included(through),
            ))
            .map(|(id, _)| id)
    }
}

/// The ledgers of a schema: where they live and what a round read and changed.
pub(super) struct Ledgers {
    store: Arc<DynObjectStore>,
    dir: StorePath,
    /// The ledger files there, read once per round.
    present: std::collections::HashSet<String>,
    /// The ledgers read or made by one backlog call, by landing path, each with the
    /// ledger as stored (`None`: new).
    pub(super) by_path: BTreeMap<String, (Ledger, Option<Ledger>)>,
}

impl Ledgers {
    /// The ledger files under `<schema>/_bronze_ledger/` (one listing).
    pub(super) async fn open(store: Arc<DynObjectStore>, schema_dir: &StorePath) -> Result<Self> {
        use futures::TryStreamExt as _;
        let dir = schema_dir.clone().join(LEDGER_DIR);
        let listed: Vec<_> = match store.list(Some(&dir)).try_collect().await {
            Ok(listed) => listed,
            Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Vec::new(),
            Err(e) => {
                return Err(Error::Store {
                    location: format!("{dir}"),
                    reason: format!("could not list the backlog's ledgers: {e}"),
                });
            }
        };
        let present = listed
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        Ok(Ledgers {
            store,
            dir,
            present,
            by_path: BTreeMap::new(),
        })
    }

    /// The ledger of `landing_path` as stored, read once per round; `None` when there is
    /// none, or it cannot be read or is of another format (it is rebuilt).
    pub(super) async fn load(&mut self, landing_path: &str) -> Option<&Ledger> {
        if !self.by_path.contains_key(landing_path) {
            let name = ledger_file(landing_path);
            if !self.present.contains(&name) {
                return None;
            }
            let path = self.dir.clone().join(name.as_str());
            let got = async { self.store.get(&path).await?.bytes().await };
            let read = match got.await {
                Ok(bytes) => serde_json::from_slice::<Ledger>(&bytes)
                    .ok()
                    .filter(|l| l.format == FORMAT && l.landing_path == landing_path),
                Err(e) => {
                    tracing::debug!(ledger = %path, error = %e, "ledger not read; rebuilt");
                    None
                }
            };
            let read = read?;
            self.by_path
                .insert(landing_path.to_string(), (read.clone(), Some(read)));
        }
        self.by_path.get(landing_path).map(|(l, _)| l)
    }

    /// The ledger of `landing_path` as this backlog call has it.
    pub(super) fn get(&self, landing_path: &str) -> Option<&Ledger> {
        self.by_path.get(landing_path).map(|(l, _)| l)
    }

    /// The latest run of `batch_id` of the entity `landing_path`.
    pub(super) fn latest_run(&self, landing_path: &str, batch_id: &str) -> Option<LatestRun> {
        let e = self.get(landing_path)?.batches.get(batch_id)?;
        Some(LatestRun {
            started: e.started,
            ok: e.ok,
            error: e.error.clone(),
        })
    }

    pub(super) fn get_mut(&mut self, landing_path: &str) -> Option<&mut Ledger> {
        self.by_path.get_mut(landing_path).map(|(l, _)| l)
    }

    /// Brings the ledgers of `landing_paths` up to `_run_control`'s latest version: the
    /// commits since the oldest of them folded in, or one full read when a ledger is
    /// missing, too old for the log kept, or `_run_control` changed otherwise than by
    /// appends.
    pub(super) async fn bring_up_to_date(
        &mut self,
        storage: &Storage,
        landing_paths: &[String],
    ) -> Result<()> {
        for lp in landing_paths {
            self.load(lp).await;
        }
        let all_read = landing_paths.iter().all(|lp| self.by_path.contains_key(lp));
        if all_read {
            // Over every ledger read, not only these: the replay advances them all.
            let oldest = self
                .by_path
                .values()
                .map(|(l, _)| l.run_control_version)
                .min()
                .flatten();
            if self.replay(storage, oldest).await? {
                return Ok(());
            }
        }
        self.rebuild(storage, landing_paths).await
    }

    /// Folds the `_run_control` commits after `from` (every commit when `None`) into the
    /// ledgers read; `false` when they cannot be replayed that way (a full read is due).
    async fn replay(&mut self, storage: &Storage, from: Option<u64>) -> Result<bool> {
        let rc = TableName::system(RUN_CONTROL_TABLE);
        let log_store = storage.log_store(&rc)?;
        if storage.schema_url.scheme() == "file"
            && let Some(from) = from
            && no_commit_after(&log_store, from).await
        {
            return Ok(true);
        }
        let latest = match log_store.get_latest_version(from.unwrap_or(0)).await {
            Ok(v) => v,
            // No `_run_control` yet, and none when the ledgers were written.
            Err(_) if from.is_none() && !self.exists(storage, &rc).await? => return Ok(true),
            // The commit the ledgers stopped at is gone (log clean-up): rebuilt.
            Err(e) => {
                tracing::debug!(error = %e, "ledgers older than _run_control's log; rebuilt");
                return Ok(false);
            }
        };
        let first = from.map_or(0, |v| v + 1);
        if latest + 1 < first {
            return Ok(false);
        }
        if latest + 1 - first > MAX_REPLAY {
            return Ok(false);
        }
        for version in first..=latest {
            let Some(rows) = commit_rows(storage, &log_store, version).await? else {
                return Ok(false);
            };
            let runs = runs_of(rows);
            for (ledger, _) in self.by_path.values_mut() {
                if ledger.run_control_version.is_some_and(|v| v >= version) {
                    continue;
                }
                let lp = ledger.landing_path.clone();
                for run in runs.iter().filter(|r| r.is_of(&lp)) {
                    ledger.fold(run);
                }
            }
        }
        for (ledger, _) in self.by_path.values_mut() {
            ledger.run_control_version = Some(latest);
        }
        Ok(true)
    }

    /// Whether `_run_control` has a log (a store that cannot say is an error).
    async fn exists(&self, storage: &Storage, rc: &TableName) -> Result<bool> {
        Ok(storage.opener().open(rc).await?.is_some())
    }

    /// Ledgers for `landing_paths` (and the others this call read), from one full read
    /// of `_run_control`.
    async fn rebuild(&mut self, storage: &Storage, landing_paths: &[String]) -> Result<()> {
        let rc = TableName::system(RUN_CONTROL_TABLE);
        // The version before the read: commits the read sees beyond it are folded in
        // again by the next replay, which changes nothing (a run folds in once).
        let version = match storage.opener().open(&rc).await? {
            Some(t) => t.version(),
            None => None,
        };
        let rows = run_control_rows(storage, None).await?;
        let runs = runs_of(rows);
        let mut fresh: BTreeMap<String, Ledger> = landing_paths
            .iter()
            .chain(self.by_path.keys())
            .map(|lp| (lp.clone(), Ledger::new(lp, version)))
            .collect();
        for run in &runs {
            for lp in &run.landing_paths {
                if let Some(ledger) = fresh.get_mut(lp) {
                    ledger.fold(run);
                }
            }
        }
        for (lp, mut ledger) in fresh {
            let stored = self.by_path.remove(&lp).and_then(|(_, stored)| stored);
            if let Some(s) = &stored {
                ledger.keep_listing_of(s);
            }
            self.by_path.insert(lp, (ledger, stored));
        }
        Ok(())
    }

    /// Writes the ledgers this backlog call changed (a warning when one cannot be
    /// written: the next call reads `_run_control` a little further back).
    pub(super) async fn save(&self) {
        for (lp, (ledger, stored)) in &self.by_path {
            if stored.as_ref() == Some(ledger) {
                continue;
            }
            let path = self.dir.clone().join(ledger_file(lp).as_str());
            let written = match serde_json::to_vec(ledger) {
                Ok(bytes) => self
                    .store
                    .put(&path, PutPayload::from(bytes))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = written {
                tracing::warn!(ledger = %path, error = %e, "the backlog's ledger could not be written");
            }
        }
    }
}

/// Whether `version` is the latest commit of a local log: it is there and the next is
/// not (a clean-up removes the oldest commits first). Two look-ups by name, where
/// listing a local log from a version on reads every name in its folder.
async fn no_commit_after(log_store: &deltalake::logstore::LogStoreRef, version: u64) -> bool {
    let store = log_store.object_store(None);
    let commit = |v: u64| StorePath::from(format!("_delta_log/{v:020}.json"));
    // `None`: the store could not say.
    let exists = |v: u64| {
        let path = commit(v);
        let store = Arc::clone(&store);
        async move {
            match store.head(&path).await {
                Ok(_) => Some(true),
                Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Some(false),
                Err(_) => None,
            }
        }
    };
    exists(version + 1).await == Some(false) && exists(version).await == Some(true)
}

/// The `_run_control` rows added by commit `version` (rows of files added with
/// `dataChange`); `None` when the commit is gone or removed rows (a full read is due).
async fn commit_rows(
    storage: &Storage,
    log_store: &deltalake::logstore::LogStoreRef,
    version: u64,
) -> Result<Option<Vec<RunRow>>> {
    let rc = RUN_CONTROL_TABLE;
    let err = |e: &dyn std::fmt::Display| Error::Store {
        location: format!("{}/{rc}", storage.schema_url),
        reason: format!("could not read _run_control's commit {version}: {e}"),
    };
    let Some(bytes) = log_store
        .read_commit_entry(version as _)
        .await
        .map_err(|e| err(&e))?
    else {
        return Ok(None);
    };
    let mut files = Vec::new();
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let action: serde_json::Value = serde_json::from_slice(line).map_err(|e| err(&e))?;
        let data_change = |a: &serde_json::Value| a.get("dataChange").and_then(|d| d.as_bool());
        if let Some(add) = action.get("add") {
            if data_change(add) != Some(false) {
                match add.get("path").and_then(|p| p.as_str()) {
                    Some(p) => files.push(p.to_string()),
                    None => return Ok(None),
                }
            }
        } else if let Some(remove) = action.get("remove")
            && data_change(remove) != Some(false)
        {
            return Ok(None);
        }
    }
    let store = log_store.object_store(None);
    let mut rows = Vec::new();
    for file in files {
        let path = StorePath::from_url_path(&file).map_err(|e| err(&e))?;
        let bytes = match store.get(&path).await {
            Ok(got) => got.bytes().await.map_err(|e| err(&e))?,
            // Compacted and vacuumed since: a full read has its rows.
            Err(deltalake::logstore::object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(err(&e)),
        };
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .and_then(|b| b.build())
            .map_err(|e| err(&e))?;
        let batches: Vec<_> = reader
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| err(&e))?;
        rows.extend(rows_of(&batches)?);
    }
    Ok(Some(rows))
}

/// The latest run of a batch folder in `_run_control`.
pub(super) struct LatestRun {
    /// Its start (the suffix of its run id), microseconds since the Unix epoch.
    pub(super) started: i64,
    /// No failed row.
    pub(super) ok: bool,
    /// Its first failed row's `<table>: <error>`.
    pub(super) error: Option<String>,
}

/// One run of a batch, from its `_run_control` rows.
pub(super) struct Run {
    pub(super) batch_id: String,
    /// The folders it loaded.
    pub(super) landing_paths: Vec<String>,
    /// Its start (the suffix of its run id), microseconds since the Unix epoch.
    pub(super) started: i64,
    /// No failed row.
    pub(super) ok: bool,
    /// Its first failed row's `<table>: <error>`.
    pub(super) error: Option<String>,
}

impl Run {
    /// Whether it loaded a folder of `landing_path`.
    pub(super) fn is_of(&self, landing_path: &str) -> bool {
        self.landing_paths.iter().any(|lp| lp == landing_path)
    }
}

/// The runs `rows` are of, in run id order.
pub(super) fn runs_of(rows: Vec<RunRow>) -> Vec<Run> {
    // run id -> (batch id, landing paths, every row ok, first error)
    type Rows = (String, Option<String>, bool, Option<String>);
    let mut runs: BTreeMap<String, Rows> = BTreeMap::new();
    for r in rows {
        let e = runs
            .entry(r.run_id)
            .or_insert((r.batch_id, r.landing_paths, true, None));
        e.2 &= r.ok;
        if e.3.is_none() {
            e.3 = r.error;
        }
    }
    runs.into_iter()
        .map(|(run_id, (batch_id, paths, ok, error))| Run {
            started: run_id
                .rsplit_once('-')
                .and_then(|(_, t)| t.parse::<i64>().ok())
                .unwrap_or(0),
            landing_paths: paths
                .iter()
                .flat_map(|p| p.split(','))
                .map(str::to_string)
                .collect(),
            batch_id,
            ok,
            error,
        })
        .collect()
}

/// The latest run (by its start, the suffix of its run id) of every `(landing path,
/// batch id)` in `rows`.
pub(super) fn latest_runs(rows: Vec<RunRow>) -> HashMap<(String, String), LatestRun> {
    let mut latest: HashMap<(String, String), LatestRun> = HashMap::new();
    for run in runs_of(rows) {
        for lp in &run.landing_paths {
            let key = (lp.clone(), run.batch_id.clone());
            let newer = latest.get(&key).is_none_or(|l| run.started >= l.started);
            if newer {
                let (started, ok, error) = (run.started, run.ok, run.error.clone());
                latest.insert(key, LatestRun { started, ok, error });
            }
        }
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, started: i64, ok: bool) -> Run {
        Run {
            batch_id: id.into(),
            landing_paths: vec!["s/e".into()],
            started,
            ok,
            error: (!ok).then(|| "t: failed".to_string()),
        }
    }

    #[test]
    fn the_latest_run_of_a_batch_wins_whatever_order_runs_fold_in() {
        let runs = [
            run("b1", 10, false),
            run("b1", 20, true),
            run("b2", 5, true),
        ];
        let mut forward = Ledger::new("s/e", Some(1));
        runs.iter().for_each(|r| forward.fold(r));
        let mut backward = Ledger::new("s/e", Some(1));
        runs.iter().rev().for_each(|r| backward.fold(r));
        // Folding a run twice changes nothing.
        runs.iter().for_each(|r| backward.fold(r));
        assert_eq!(forward, backward);
        assert!(forward.is_loaded("b1") && forward.is_loaded("b2"));
        let mut failed_again = forward.clone();
        failed_again.fold(&run("b1", 30, false));
        assert!(!failed_again.is_loaded("b1") && failed_again.has_run("b1"));
    }

    #[test]
    fn a_rebuilt_ledger_keeps_how_far_it_was_listed_only_while_that_holds() {
        let mut stored = Ledger::new("s/e", Some(1));
        for r in [run("b1", 1, true), run("b2", 2, true), run("b3", 3, true)] {
            stored.fold(&r);
        }
        stored.listed_through = Some("b2".into());
        stored.full_listing_micros = 7;
        let read = |runs: &[Run]| {
            let mut l = Ledger::new("s/e", Some(2));
            runs.iter().for_each(|r| l.fold(r));
            l.keep_listing_of(&stored);
            (l.listed_through, l.full_listing_micros)
        };
        // Everything loaded up to b2 still is (b3 past it may have failed since).
        let same = [run("b1", 1, true), run("b2", 2, true), run("b3", 4, false)];
        assert_eq!(read(&same), (Some("b2".into()), 7));
        // b1's rows removed, or its rerun failed: listed in full next.
        assert_eq!(read(&[run("b2", 2, true)]), (None, 0));
        let failed = [run("b1", 5, false), run("b2", 2, true)];
        assert_eq!(read(&failed), (None, 0));
    }

    #[test]
    fn a_ledger_reads_back_as_written_failures_and_all() {
        let mut ledger = Ledger::new("s/e", Some(4));
        for r in [run("b2", 2, true), run("b1", 1, false), run("b3", 3, true)] {
            ledger.fold(&r);
        }
        ledger.listed_through = Some("b0".into());
        let text = serde_json::to_string(&ledger).unwrap();
        let stored: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(stored["batches"]["ids"], "b1 b2 b3");
        assert_eq!(stored["batches"]["started"], "1 2 3");
        assert_eq!(
            stored["batches"]["failed"],
            serde_json::json!({"b1": "t: failed"})
        );
        let read: Ledger = serde_json::from_str(&text).unwrap();
        assert_eq!(read, ledger);
        assert!(!read.is_loaded("b1") && read.has_run("b1") && read.is_loaded("b3"));
        let empty = Ledger::new("s/e", None);
        let text_of_empty = serde_json::to_string(&empty).unwrap();
        assert_eq!(
            serde_json::from_str::<Ledger>(&text_of_empty).unwrap(),
            empty
        );
        // Ids without their starts: not a ledger (it is rebuilt).
        let short = text.replace("\"1 2 3\"", "\"1 2\"");
        assert!(serde_json::from_str::<Ledger>(&short).is_err());
    }

    #[test]
    fn the_run_index_has_every_batchs_latest_run_and_a_fold_leaves_the_read_ledger_as_read() {
        let mut ledger = Ledger::new("s/e", Some(1));
        for (i, id) in ["b02", "b04", "b06"].iter().enumerate() {
            ledger.fold(&run(id, i as i64, i != 2));
        }
        let index = ledger.run_index();
        assert_eq!(index.len(), 3);
        assert_eq!(
            index["b06"],
            RunState {
                started: 2,
                ok: false
            }
        );
        assert_eq!(
            index["b02"],
            RunState {
                started: 0,
                ok: true
            }
        );
        let read = ledger.clone();
        ledger.fold(&run("b06", 9, true));
        assert_ne!(read, ledger);
        assert!(!read.is_loaded("b06") && ledger.is_loaded("b06"));
    }

    #[test]
    fn ledger_files_are_named_after_the_landing_path_and_stay_short() {
        assert_eq!(ledger_file("market/events"), "market+events.json");
        let long = format!("{}/{}", "s".repeat(150), "e".repeat(150));
        let name = ledger_file(&long);
        assert!(name.len() < 64, "{name}");
        assert_ne!(name, ledger_file(&format!("{long}x")));
    }
}
