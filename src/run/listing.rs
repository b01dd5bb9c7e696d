//! The listing of a landing zone: its `batch_id=` folders (in full, or only those after
//! what each entity's ledger says was listed), each with its latest run, and the loaded
//! batches whose folder changed after their load.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use super::context::Context;
use super::ledger::{Ledgers, RunState};
use super::manifest;
use super::manifest::LandingChange;
use crate::batch::{landing_path_of, now_micros, validate_batch_id};
use crate::error::{Error, Result};
use crate::store::location::Location;
use crate::table::Storage;
use deltalake::logstore::object_store::path::Path as StorePath;

/// A batch folder of a landing zone.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingBatch {
    /// The folder (a path, or an object store URL).
    pub folder: PathBuf,
    /// `<source>/<entity>`: the two folders above `batch_id=<id>`.
    pub landing_path: String,
    /// The id of `batch_id=<id>`.
    pub batch_id: String,
    /// For a loaded batch whose folder changed after its load: how (it is loaded again
    /// as a rerun, with `late_files = "reload"`).
    #[serde(default)]
    pub late: Option<LandingChange>,
}

/// The listing work of a backlog, with the settings and stores of `ctx`.
pub(super) struct Listing<'a> {
    ctx: &'a Context,
}

impl<'a> Listing<'a> {
    /// Lists with `ctx`'s settings and stores.
    pub(super) fn new(ctx: &'a Context) -> Self {
        Listing { ctx }
    }

    /// The batch folders under `root` and the latest run of each, from the entities'
    /// ledgers and the `_run_control` commits since ([`super::ledger`]); the ledgers are
    /// brought up to date as a side effect. In an object store an entity with a ledger is
    /// listed from its last loaded batch on, and in full every
    /// [`IngestConfig::full_listing_every`](crate::IngestConfig::full_listing_every);
    /// its folders up to there are the ones its ledger has loaded, and those of its
    /// failed batches that are still there.
    pub(super) fn backlog_view(&self, root: &std::path::Path) -> Result<BacklogView> {
        let storage = self.ctx.storage()?;
        let (store, schema_dir) = self.ctx.schema_folder(&storage)?;
        let mut ledgers = self
            .ctx
            .runtime()
            .block_on(Ledgers::open(store, &schema_dir))?;
        let Listed {
            mut folders,
            after,
            in_full,
        } = self.list_backlog(root, &mut ledgers)?;
        let mut entities: Vec<String> = ledgers.by_path.keys().cloned().collect();
        // Folders come grouped by entity: one look per group.
        let mut last: Option<&str> = None;
        for b in &folders {
            if last != Some(b.landing_path.as_str()) {
                last = Some(&b.landing_path);
                entities.push(b.landing_path.clone());
            }
        }
        entities.sort();
        entities.dedup();
        if entities.is_empty() {
            let folders = folders.into_iter().map(|b| (b, None)).collect();
            return Ok(BacklogView {
                folders,
                ledgers,
                late: Vec::new(),
            });
        }
        let through_before: HashMap<String, String> = ledgers
            .by_path
            .iter()
            .filter_map(|(lp, (l, _))| Some((lp.clone(), l.listed_through.clone()?)))
            .collect();
        self.ctx
            .runtime()
            .block_on(ledgers.bring_up_to_date(&storage, &entities))?;
        for (lp, dir) in &after {
            folders.extend(self.folders_listed_before(&ledgers, lp, dir, &folders)?);
        }
        // Grouped by entity (a stable sort: the listing's groups are runs it merges).
        folders.sort_by(|a, b| a.landing_path.cmp(&b.landing_path));
        let folders = with_latest_runs(&ledgers, folders);
        advance_listings(&mut ledgers, &folders, &through_before, &in_full);
        let late = self.changed_since_load(&storage, &folders, &mut ledgers)?;
        self.ctx.runtime().block_on(ledgers.save());
        Ok(BacklogView {
            folders,
            ledgers,
            late,
        })
    }

    /// The loaded batches of `folders` whose folder differs from its manifest, among
    /// those a round compares ([`super::manifest::to_check`]): per entity, its latest
    /// few batches and those found changed before every round, and all of them once per
    /// [`crate::IngestConfig::full_listing_every`] (when the entity's ledger says its last
    /// full check is that old). A no-op `--pending` over 10,000 loaded batches makes the
    /// same few checks as over ten (BENCHMARKS.md).
    fn changed_since_load(
        &self,
        storage: &Storage,
        folders: &[(PendingBatch, Option<RunState>)],
        ledgers: &mut Ledgers,
    ) -> Result<Vec<PendingBatch>> {
        let now = now_micros();
        let every =
            i64::try_from(self.ctx.config.full_listing_every.as_micros()).unwrap_or(i64::MAX);
        let mut late = Vec::new();
        for entity in folders.chunk_by(|a, b| a.0.landing_path == b.0.landing_path) {
            let lp = entity[0].0.landing_path.as_str();
            let last_full = ledgers.get(lp).map(|l| l.late_check_micros);
            let full = super::manifest::full_check_due(now, every, last_full);
            let loaded: Vec<&str> = entity
                .iter()
                .filter(|(_, run)| run.is_some_and(|r| r.ok))
                .map(|(b, _)| b.batch_id.as_str())
                .collect();
            let known: HashSet<String> = ledgers
                .get(lp)
                .map(|l| l.changed.iter().cloned().collect())
                .unwrap_or_default();
            let mut checked: HashSet<&str> = super::manifest::to_check(loaded, full)
                .into_iter()
                .collect();
            checked.extend(known.iter().map(String::as_str));
            let mut still: Vec<String> = Vec::new();
            let loaded_here = entity.iter().filter(|(b, run)| {
                run.is_some_and(|r| r.ok) && checked.contains(b.batch_id.as_str())
            });
            for (batch, _) in loaded_here {
                match self.compare(storage, batch) {
                    Compared::Changed(changed) => {
                        still.push(batch.batch_id.clone());
                        late.push(changed);
                    }
                    Compared::Same => {}
                    // The batch is compared again next round.
                    Compared::Unreadable if known.contains(&batch.batch_id) => {
                        still.push(batch.batch_id.clone())
                    }
                    Compared::Unreadable => {}
                }
            }
            if let Some(ledger) = ledgers.get_mut(lp) {
                still.sort();
                ledger.changed = still;
            }
            if full && let Some(ledger) = ledgers.get_mut(lp) {
                ledger.late_check_micros = now;
            }
        }
        Ok(late)
    }

    /// Compares the folder of the loaded `batch` with its manifest. One folder or manifest
    /// that cannot be read does not stop the round: it is logged.
    fn compare(&self, storage: &Storage, batch: &PendingBatch) -> Compared {
        let change = manifest::landing_change(
            self.ctx,
            storage,
            &batch.folder,
            &batch.landing_path,
            &batch.batch_id,
        );
        match change {
            Ok(Some(change)) if !change.is_empty() => {
                tracing::warn!(
                    landing_path = %batch.landing_path,
                    batch_id = %batch.batch_id,
                    "the folder of a loaded batch changed after its load: {}",
                    change.describe()
                );
                Compared::Changed(PendingBatch {
                    late: Some(change),
                    ..batch.clone()
                })
            }
            Ok(_) => Compared::Same,
            Err(e) => {
                tracing::warn!(
                    landing_path = %batch.landing_path,
                    batch_id = %batch.batch_id,
                    "could not compare the folder of a loaded batch with its manifest: {}",
                    self.ctx.config.storage_options.mask(&crate::error::chain(&e))
                );
                Compared::Unreadable
            }
        }
    }

    /// The batch folders under `root`, each entity in an object store whose ledger says
    /// how far it was listed (and not longer ago than the full listing interval) listed
    /// from there on; the ledgers read on the way are in `ledgers`.
    fn list_backlog(&self, root: &std::path::Path, ledgers: &mut Ledgers) -> Result<Listed> {
        let rt = self.ctx.runtime();
        let now = now_micros();
        let every =
            i64::try_from(self.ctx.config.full_listing_every.as_micros()).unwrap_or(i64::MAX);
        let mut after: BTreeMap<String, String> = BTreeMap::new();
        let mut in_full: HashSet<String> = HashSet::new();
        let folders = self.batch_folders_with(root, |dir| {
            let Ok(Location::Url(url)) = Location::parse(dir) else {
                return None;
            };
            if !crate::store::location::lists_from_offset(&url, &self.ctx.config.storage_options) {
                return None;
            }
            let lp = landing_path_of(&PathBuf::from(format!("{dir}/batch_id=x"))).ok()?;
            let offset = rt
                .block_on(ledgers.load(&lp))
                .filter(|l| now.saturating_sub(l.full_listing_micros) < every)
                .and_then(|l| l.listed_through.clone());
            match offset {
                Some(offset) => {
                    after.insert(lp, dir.to_string());
                    Some(offset)
                }
                None => {
                    in_full.insert(lp);
                    None
                }
            }
        })?;
        Ok(Listed {
            folders,
            after,
            in_full,
        })
    }

    /// The folders of `lp` (under `dir`) up to where its ledger says it was listed, not
    /// listed this time: the batches it loaded, and those of its batches whose latest run
    /// failed that are still there (one listing of a key each).
    fn folders_listed_before(
        &self,
        ledgers: &Ledgers,
        lp: &str,
        dir: &str,
        listed: &[PendingBatch],
    ) -> Result<Vec<PendingBatch>> {
        let Some(ledger) = ledgers.get(lp) else {
            return Ok(Vec::new());
        };
        let Some(through) = &ledger.listed_through else {
            return Ok(Vec::new());
        };
        let seen: HashSet<&String> = listed
            .iter()
            .filter(|b| b.landing_path == lp)
            .map(|b| &b.batch_id)
            .collect();
        let mut out = Vec::new();
        for id in ledger.ids_through(through).filter(|id| !seen.contains(id)) {
            let folder = format!("{dir}/batch_id={id}");
            if ledger.is_loaded(id) || self.has_files(&folder)? {
                out.push(PendingBatch {
                    folder: PathBuf::from(folder),
                    landing_path: lp.to_string(),
                    batch_id: id.clone(),
                    late: None,
                });
            }
        }
        Ok(out)
    }

    /// Whether the object store folder `folder` holds any file (one listing request).
    fn has_files(&self, folder: &str) -> Result<bool> {
        use futures::StreamExt as _;
        let Location::Url(url) = Location::parse(folder)? else {
            return Ok(PathBuf::from(folder).is_dir());
        };
        let store = self.ctx.store_of(&url)?;
        let prefix = object_path(&url, folder)?;
        let mut listing = store.list(Some(&prefix));
        match self.ctx.runtime().block_on(listing.next()) {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(Error::Store {
                location: self.ctx.config.storage_options.mask(folder),
                reason: e.to_string(),
            }),
        }
    }

    /// When the newest file of the batch folder `folder` landed (its modification time),
    /// microseconds since the epoch; `None` for an empty folder. One listing in an object
    /// store.
    pub(super) fn landed_micros(&self, folder: &str) -> Result<Option<i64>> {
        use futures::StreamExt as _;
        let micros = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64)
        };
        let Location::Url(url) = Location::parse(folder)? else {
            let read = |e: std::io::Error| Error::Io {
                path: PathBuf::from(folder),
                source: e,
            };
            let mut newest = None;
            for entry in std::fs::read_dir(folder).map_err(read)? {
                let modified = entry.and_then(|e| e.metadata()?.modified()).map_err(read)?;
                newest = newest.max(Some(micros(modified)));
            }
            return Ok(newest);
        };
        let store = self.ctx.store_of(&url)?;
        let prefix = object_path(&url, folder)?;
        let listed: Vec<_> = self
            .ctx
            .runtime()
            .block_on(store.list(Some(&prefix)).collect::<Vec<_>>());
        let mut newest = None;
        for object in listed {
            let object = object.map_err(|e| Error::Store {
                location: self.ctx.config.storage_options.mask(folder),
                reason: e.to_string(),
            })?;
            newest = newest.max(Some(object.last_modified.timestamp_micros()));
        }
        Ok(newest)
    }

    /// Every `batch_id=<id>` folder at most three levels under `root`; a folder for
    /// which `offset` gives a batch id is listed from there on ([`Self::batch_folders_after`]),
    /// for its batch folders alone.
    fn batch_folders_with(
        &self,
        root: &std::path::Path,
        mut offset: impl FnMut(&str) -> Option<String>,
    ) -> Result<Vec<PendingBatch>> {
        let text = root.to_string_lossy().trim_end_matches('/').to_string();
        let mut found = Vec::new();
        let mut level = vec![text.clone()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for dir in level {
                let children = match offset(&dir) {
                    Some(after) => self.batch_folders_after(&dir, &after)?,
                    None => self.subfolders(&dir)?,
                };
                // The landing path of `dir`'s batch folders: the same for each of them.
                let mut dir_landing_path: Option<String> = None;
                for child in children {
                    // `dir/<name>`, as both listings give it.
                    let name = child.get(dir.len() + 1..).unwrap_or_default();
                    match name.strip_prefix("batch_id=") {
                        Some(id) => {
                            let folder = PathBuf::from(&child);
                            // A folder whose name cannot be a batch must not hold the
                            // rest of the landing zone back: said, and left alone.
                            let landing_path =
                                validate_batch_id(id).and_then(|()| match &dir_landing_path {
                                    Some(known) => Ok(known.clone()),
                                    None => landing_path_of(&folder),
                                });
                            match landing_path {
                                Ok(landing_path) => {
                                    dir_landing_path.get_or_insert_with(|| landing_path.clone());
                                    found.push(PendingBatch {
                                        landing_path,
                                        batch_id: id.to_string(),
                                        folder,
                                        late: None,
                                    })
                                }
                                Err(e) => tracing::warn!(
                                    folder = %child,
                                    "not a batch folder, skipped: {}",
                                    crate::error::chain(&e)
                                ),
                            }
                        }
                        None if !name.starts_with(['.', '_']) => next.push(child),
                        None => {}
                    }
                }
            }
            level = next;
        }
        Ok(found)
    }

    /// The `batch_id=<id>` folders of `dir` (an object store URL) whose id sorts after
    /// `after`, as `dir/<name>`, in a number of requests that does not grow with the
    /// folders before: a listing from `batch_id=<after>-` on until `after`'s own files
    /// (ids that extend `after` with `-` sort before them), then one from past `after`'s
    /// files, started again past each new folder's files (object_store's
    /// `list_with_offset`: S3's and GCS's `start-after`, Azure's `startFrom`).
    fn batch_folders_after(&self, dir: &str, after: &str) -> Result<Vec<String>> {
        let Location::Url(url) = Location::parse(dir)? else {
            return self.subfolders(dir);
        };
        let skip = Skipper {
            ctx: self.ctx,
            store: self.ctx.store_of(&url)?,
            prefix: StorePath::from_url_path(url.path()).map_err(|e| Error::Config {
                name: "landing root",
                reason: format!("{dir}: {e}"),
            })?,
            dir,
        };
        let own = format!("batch_id={after}");
        let mut names = skip.extending(&own)?;
        skip.after(&own, &mut names)?;
        Ok(names.into_iter().map(|n| format!("{dir}/{n}")).collect())
    }

    /// The sub-folders of `dir` (a path or an object store URL), as `dir/<name>`.
    fn subfolders(&self, dir: &str) -> Result<Vec<String>> {
        match Location::parse(dir)? {
            Location::Local(path) => {
                let entries = std::fs::read_dir(&path).map_err(|e| Error::io(&path, e))?;
                let mut out = Vec::new();
                for e in entries {
                    let e = e.map_err(|e| Error::io(&path, e))?;
                    if e.file_type()
                        .map_err(|err| Error::io(e.path(), err))?
                        .is_dir()
                    {
                        let name = e.file_name();
                        // A folder name that is not UTF-8 is no landing path (those are
                        // ASCII): passed over, said, never the end of the listing.
                        let Some(name) = name.to_str() else {
                            tracing::warn!(folder = %e.path().display(), "skipped a landing folder whose name is not UTF-8: rename it");
                            continue;
                        };
                        let mut child = String::with_capacity(dir.len() + 1 + name.len());
                        child.push_str(dir);
                        child.push('/');
                        child.push_str(name);
                        out.push(child);
                    }
                }
                Ok(out)
            }
            Location::Url(url) => {
                let store = self.ctx.store_of(&url)?;
                let prefix =
                    deltalake::logstore::object_store::path::Path::from_url_path(url.path())
                        .map_err(|e| Error::Config {
                            name: "landing root",
                            reason: format!("{dir}: {e}"),
                        })?;
                let listed = self
                    .ctx
                    .runtime()
                    .block_on(store.list_with_delimiter(Some(&prefix)))
                    .map_err(|e| Error::Store {
                        location: self.ctx.config.storage_options.mask(dir),
                        reason: e.to_string(),
                    })?;
                Ok(listed
                    .common_prefixes
                    .iter()
                    .filter_map(|p| p.filename().map(|n| format!("{dir}/{n}")))
                    .collect())
            }
        }
    }
}

/// A landing zone as listed for a backlog.
struct Listed {
    folders: Vec<PendingBatch>,
    /// Entities listed from their last loaded batch on: landing path -> folder.
    after: BTreeMap<String, String>,
    /// Entities of an object store listed in full.
    in_full: HashSet<String>,
}

/// `folders` (grouped by landing path) each with its batch's latest run.
fn with_latest_runs(
    ledgers: &Ledgers,
    folders: Vec<PendingBatch>,
) -> Vec<(PendingBatch, Option<RunState>)> {
    let mut runs = Vec::with_capacity(folders.len());
    for entity in folders.chunk_by(|a, b| a.landing_path == b.landing_path) {
        match ledgers.get(&entity[0].landing_path) {
            Some(ledger) => {
                let index = ledger.run_index();
                runs.extend(
                    entity
                        .iter()
                        .map(|b| index.get(b.batch_id.as_str()).copied()),
                );
            }
            None => runs.extend(entity.iter().map(|_| None)),
        }
    }
    folders.into_iter().zip(runs).collect()
}

/// Per entity: how far its folders (grouped by landing path, with their latest runs) are
/// now listed and loaded (every folder up to there loaded), and when it was listed in
/// full. A folder below where it was listed before that has no run landed late: it is
/// said.
fn advance_listings(
    ledgers: &mut Ledgers,
    folders: &[(PendingBatch, Option<RunState>)],
    through_before: &HashMap<String, String>,
    in_full: &HashSet<String>,
) {
    let now = now_micros();
    for entity in folders.chunk_by(|a, b| a.0.landing_path == b.0.landing_path) {
        let lp = entity[0].0.landing_path.as_str();
        let Some(ledger) = ledgers.get_mut(lp) else {
            continue;
        };
        if let Some(before) = through_before.get(lp) {
            let mut late: Vec<&str> = entity
                .iter()
                .filter(|(b, run)| run.is_none() && b.batch_id <= *before)
                .map(|(b, _)| b.batch_id.as_str())
                .collect();
            late.sort_unstable();
            for id in late {
                tracing::warn!(
                    landing_path = lp,
                    batch_id = id,
                    "late batch folder: its id sorts before {before}, a batch the entity loaded already; it is pending and loads before the entity's newer batches"
                );
            }
        }
        // The greatest id below the first one not loaded: every id up to it is loaded.
        let first_not_loaded = entity
            .iter()
            .filter(|(_, run)| !run.is_some_and(|r| r.ok))
            .map(|(b, _)| b.batch_id.as_str())
            .min();
        ledger.listed_through = entity
            .iter()
            .map(|(b, _)| b.batch_id.as_str())
            .filter(|id| first_not_loaded.is_none_or(|first| *id < first))
            .max()
            .map(str::to_string);
        if in_full.contains(lp) {
            ledger.full_listing_micros = now;
        }
    }
}

/// The batch folders under a landing root and the latest run of each batch.
pub(super) struct BacklogView {
    /// Grouped by landing path, each with its batch's latest run (`None`: no run).
    pub(super) folders: Vec<(PendingBatch, Option<RunState>)>,
    /// The entities' ledgers, up to date: the latest run of each batch.
    pub(super) ledgers: Ledgers,
    /// The loaded batches whose folder changed after their load, among those checked
    /// ([`Listing::changed_since_load`]), each with [`PendingBatch::late`] set.
    pub(super) late: Vec<PendingBatch>,
}

/// The object store path of `url` (`shown` names it in the error).
pub(super) fn object_path(
    url: &url::Url,
    shown: &str,
) -> Result<deltalake::logstore::object_store::path::Path> {
    deltalake::logstore::object_store::path::Path::from_url_path(url.path()).map_err(|e| {
        Error::Config {
            name: "landing root",
            reason: format!("{shown}: {e}"),
        }
    })
}

/// What comparing a loaded batch's folder with its manifest found.
enum Compared {
    /// Files were added, changed or removed since the load: the batch, with how.
    Changed(PendingBatch),
    /// The folder is as loaded, or has no manifest.
    Same,
    /// The folder or its manifest could not be read.
    Unreadable,
}

/// A listing of the folders under `prefix` (the landing folder `dir`) in key order that
/// skips each folder's files with one request per folder.
struct Skipper<'a> {
    ctx: &'a Context,
    store: std::sync::Arc<deltalake::logstore::object_store::DynObjectStore>,
    prefix: StorePath,
    dir: &'a str,
}

/// The first segment under a listing's prefix of a listed key.
struct Child {
    name: String,
    /// More segments follow: the key is in a folder named `name`.
    nested: bool,
}

impl Skipper<'_> {
    fn failed(&self, e: deltalake::logstore::object_store::Error) -> Error {
        Error::Store {
            location: self.ctx.config.storage_options.mask(self.dir),
            reason: e.to_string(),
        }
    }

    /// The first segment under the prefix of `location`.
    fn child(&self, location: &StorePath) -> Option<Child> {
        let mut parts = location.prefix_match(&self.prefix)?;
        let name = parts.next()?.as_ref().to_string();
        Some(Child {
            name,
            nested: parts.next().is_some(),
        })
    }

    /// The key past the files of folder `name` (U+10FFFF sorts after every name).
    fn past(&self, name: &str) -> Result<StorePath> {
        StorePath::parse(format!("{}/{name}/\u{10FFFF}", self.prefix)).map_err(|e| Error::Config {
            name: "landing root",
            reason: format!("{}: {e}", self.dir),
        })
    }

    /// The folders whose ids extend `own`'s with `-`: the keys between
    /// `batch_id=<after>-` and `own`'s files.
    fn extending(&self, own: &str) -> Result<Vec<String>> {
        use futures::StreamExt as _;
        let mut names: Vec<String> = Vec::new();
        let dashed = self.prefix.clone().join(format!("{own}-").as_str());
        let mut listing = self.store.list_with_offset(Some(&self.prefix), &dashed);
        while let Some(meta) = self.ctx.runtime().block_on(listing.next()) {
            let meta = meta.map_err(|e| self.failed(e))?;
            match self.child(&meta.location) {
                Some(c) if c.nested && c.name.starts_with(&format!("{own}-")) => {
                    if names.last() != Some(&c.name) {
                        names.push(c.name);
                    }
                }
                _ => break,
            }
        }
        Ok(names)
    }

    /// Adds to `names` the `batch_id=` folders past `own`'s files, one request per folder.
    fn after(&self, own: &str, names: &mut Vec<String>) -> Result<()> {
        use futures::StreamExt as _;
        let mut from = self.past(own)?;
        loop {
            let mut listing = self.store.list_with_offset(Some(&self.prefix), &from);
            let Some(meta) = self.ctx.runtime().block_on(listing.next()) else {
                return Ok(());
            };
            let meta = meta.map_err(|e| self.failed(e))?;
            let Some(c) = self.child(&meta.location) else {
                return Ok(());
            };
            if c.nested {
                from = self.past(&c.name)?;
                if c.name.starts_with("batch_id=") {
                    names.push(c.name);
                }
            } else {
                from = meta.location.clone();
            }
        }
    }
}
