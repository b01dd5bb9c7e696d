//! `bronze clean`: the landing files of batches loaded successfully, whose folder still
//! matches the manifest of their load, moved to an archive or deleted once the load is
//! older than a retention, as Auto Loader's `cleanSource` does: listings and storage
//! stop growing with the landing zone's age.
//!
//! Each batch is cleaned under its lease (no run of it loads at the same time), checked
//! against its manifest again once the lease is held; its manifest then says where the
//! files went, `_run_control` gets a `(clean)` row in the run that loaded it, and a later
//! run of the batch
//! says why it cannot read the folder (or where the archive is).

use std::path::PathBuf;
use std::sync::Arc;

use deltalake::logstore::object_store::{
    DynObjectStore, ObjectStoreExt as _, path::Path as StorePath,
};
use serde::Serialize;

use super::context::Context;
use super::listing::{BacklogView, Listing, PendingBatch};
use super::manifest::{Cleaned, Manifest};
use super::{leases, manifest, prior};
use crate::batch::{BatchKey, now_micros};
use crate::error::{Error, Result};
use crate::store::location::Location;

pub use crate::run_control::CLEAN_ROW;

/// The shortest retention `--delete` takes: a week, as Delta's VACUUM defaults to.
pub const MIN_DELETE_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// What `bronze clean` does with a batch's landing files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanAction {
    /// Moves them under this folder or object store URL, as
    /// `<dest>/<source>/<entity>/batch_id=<id>/<file>`.
    MoveTo(String),
    /// Deletes them.
    Delete,
}

/// How [`Ingest::clean`](super::Ingest::clean) cleans a landing zone.
#[derive(Clone, Debug)]
pub struct CleanOptions {
    /// Batches whose load started at least this long ago.
    pub older_than: std::time::Duration,
    /// Move or delete.
    pub action: CleanAction,
    /// Say what would be cleaned; touch nothing.
    pub dry_run: bool,
}

/// What became of one loaded batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanStatus {
    /// Its files were moved or deleted.
    Cleaned,
    /// `--dry-run`: it would be cleaned.
    WouldClean,
    /// Old enough but not cleaned (the reason says why: changed since its load, no
    /// manifest, its lease is held, or a run of it ended unrecorded).
    Kept,
    /// Cleaning it failed part way (the reason names the file): its manifest is not
    /// marked, and a later `clean` takes it up again.
    Failed,
}

/// One batch's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct CleanOutcome {
    /// The batch.
    pub batch: PendingBatch,
    /// What became of it.
    pub status: CleanStatus,
    /// Files moved or deleted (or that would be).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Where they went.
    pub moved_to: Option<String>,
    /// Why it was kept or failed.
    pub reason: Option<String>,
}

/// A file of a batch folder: its name, size and modification time or ETag.
struct Entry {
    name: String,
    bytes: u64,
    modified: Option<i64>,
    etag: Option<String>,
}

impl Entry {
    /// The copy step's markers, cleaned with the data files: `_SUCCESS` and its
    /// manifests (`manifest.json`, `manifest.jsonl`).
    fn is_marker(&self) -> bool {
        let lower = self.name.to_ascii_lowercase();
        matches!(
            lower.as_str(),
            "_success" | "manifest.json" | "manifest.jsonl"
        )
    }

    /// The file the load read, unchanged: its name, size and time or ETag as the
    /// manifest has them.
    fn loaded_in(&self, manifest: &Manifest) -> bool {
        manifest.files.iter().any(|f| {
            f.name == self.name
                && f.bytes == self.bytes
                && (f.modified.is_none() || f.modified == self.modified)
                && (f.etag.is_none() || f.etag == self.etag)
        })
    }
}

/// Why a batch is not cleaned after all, found under its lease.
enum NotNow {
    Kept(String),
    Failed(Error),
}

/// A folder, local or in an object store.
enum Place {
    Local(PathBuf),
    Store(Arc<DynObjectStore>, StorePath, String),
}

/// [`Ingest::clean`](super::Ingest::clean)'s work.
pub(super) fn clean(
    ctx: &Context,
    root: impl AsRef<std::path::Path>,
    options: &CleanOptions,
) -> Result<Vec<CleanOutcome>> {
    let root = root.as_ref();
    check_options(root, options)?;
    let BacklogView { folders, .. } = Listing::new(ctx).backlog_view(root)?;
    let storage = ctx.storage()?;
    let now = now_micros();
    let older = i64::try_from(options.older_than.as_micros()).unwrap_or(i64::MAX);
    let mut outcomes = Vec::new();
    for (batch, run) in folders {
        if !run.is_some_and(|r| r.ok) {
            continue;
        }
        let manifest =
            manifest::read_manifest(ctx, &storage, &batch.landing_path, &batch.batch_id)?;
        let Some(manifest) = manifest else {
            outcomes.push(kept(
                batch,
                "no manifest: loaded by a release that wrote none; load it again to clean it later",
            ));
            continue;
        };
        if now.saturating_sub(manifest.loaded_micros) < older {
            continue;
        }
        // Cleaned before: taken up again only when its files are still there (a clean
        // that failed part way).
        if manifest.cleaned.is_some() && !has_loaded_files(ctx, &batch, &manifest) {
            continue;
        }
        outcomes.push(clean_one(ctx, &storage, batch, options));
    }
    Ok(outcomes)
}

/// Whether the folder of `batch` still holds a file its load read.
fn has_loaded_files(ctx: &Context, batch: &PendingBatch, manifest: &Manifest) -> bool {
    place(ctx, &batch.folder.to_string_lossy())
        .and_then(|p| entries(ctx, &p))
        .is_ok_and(|entries| entries.iter().any(|e| e.loaded_in(manifest)))
}

/// Cleans one batch under its lease: its manifest and latest run read again once the
/// lease is held, the files its load read (and the copy step's markers) moved or
/// deleted, anything else left in the folder.
fn clean_one(
    ctx: &Context,
    storage: &crate::table::Storage,
    batch: PendingBatch,
    options: &CleanOptions,
) -> CleanOutcome {
    let key = match BatchKey::of_folders(&batch.batch_id, vec![batch.landing_path.clone()]) {
        Ok(key) => key,
        Err(e) => return failed(batch, &e),
    };
    let started = now_micros();
    let run_id = format!("{}-{started}", key.slug());
    let leases = if options.dry_run {
        Vec::new()
    } else {
        match leases::take_lease(ctx, storage, &key, &run_id, &mut Vec::new()) {
            Ok(leases) => leases,
            Err(e @ Error::BatchLeased { .. }) => {
                return kept(batch, &format!("{e}: a run of it is loading it now"));
            }
            Err(e) => return failed(batch, &e),
        }
    };
    // A run of the batch that ended without recording its writes: its rerun needs
    // these files. The lease stays as it was found (not marked recorded).
    if leases.iter().any(|l| l.took_over.is_some()) {
        return kept(
            batch,
            "a run of it ended without recording its writes: `bronze ingest` it again before cleaning it",
        );
    }
    let held = Held {
        ctx,
        storage,
        key: &key,
        started,
    };
    let outcome = held.clean(batch, options);
    leases.iter().for_each(crate::lease::Lease::recorded);
    outcome
}

/// One batch's clean once its lease is held.
struct Held<'a> {
    ctx: &'a Context,
    storage: &'a crate::table::Storage,
    key: &'a BatchKey,
    /// When the clean started, for its `_run_control` row.
    started: i64,
}

/// What a clean takes out of a batch's folder.
struct Plan {
    /// The folder.
    source: Place,
    /// The files the load read, and the copy step's markers.
    entries: Vec<Entry>,
    /// Where they go; `None`: deleted.
    moved_to: Option<String>,
    /// Why files stay: other files in the folder, which the load did not read.
    reason: Option<String>,
    /// No file is left in the folder.
    emptied: bool,
}

impl Plan {
    /// The batch's outcome of this plan.
    fn outcome(self, batch: PendingBatch, status: CleanStatus) -> CleanOutcome {
        CleanOutcome {
            batch,
            status,
            files: self.entries.len(),
            bytes: self.entries.iter().map(|e| e.bytes).sum(),
            moved_to: self.moved_to,
            reason: self.reason,
        }
    }
}

impl Held<'_> {
    /// Cleans `batch` ([`clean_one`]): its manifest read again, then its files moved or
    /// deleted unless `options` say it is a dry run.
    fn clean(&self, batch: PendingBatch, options: &CleanOptions) -> CleanOutcome {
        let manifest = match recheck(self.ctx, self.storage, &batch, self.key) {
            Ok(m) => m,
            Err(NotNow::Kept(why)) => return kept(batch, &why),
            Err(NotNow::Failed(e)) => return failed(batch, &e),
        };
        let plan = match self.plan(&batch, &manifest, options) {
            Ok(plan) => plan,
            Err(e) => return failed(batch, &e),
        };
        if options.dry_run {
            return plan.outcome(batch, CleanStatus::WouldClean);
        }
        match self.apply(&plan, manifest) {
            Ok(()) => plan.outcome(batch, CleanStatus::Cleaned),
            Err(e) => failed(batch, &e),
        }
    }

    /// What cleaning `batch` takes out of its folder, and where it goes.
    fn plan(
        &self,
        batch: &PendingBatch,
        manifest: &Manifest,
        options: &CleanOptions,
    ) -> Result<Plan> {
        let source = place(self.ctx, &batch.folder.to_string_lossy())?;
        let (entries, left): (Vec<Entry>, Vec<Entry>) = entries(self.ctx, &source)?
            .into_iter()
            .partition(|e| e.loaded_in(manifest) || e.is_marker());
        let moved_to = match (&manifest.cleaned, &options.action) {
            (Some(c), _) => c.moved_to.clone(),
            (None, CleanAction::MoveTo(dest)) => Some(format!(
                "{}/{}/batch_id={}",
                dest.trim_end_matches('/'),
                batch.landing_path,
                batch.batch_id
            )),
            (None, CleanAction::Delete) => None,
        };
        let reason = (!left.is_empty()).then(|| {
            let names: Vec<&str> = left.iter().take(3).map(|e| e.name.as_str()).collect();
            format!(
                "{} other files left in the folder, which its load did not read ({})",
                left.len(),
                names.join(", ")
            )
        });
        Ok(Plan {
            source,
            entries,
            moved_to,
            reason,
            emptied: left.is_empty(),
        })
    }

    /// Moves or deletes the plan's files, the manifest marked first, then records the
    /// clean in `_run_control`.
    fn apply(&self, plan: &Plan, mut manifest: Manifest) -> Result<()> {
        if let Some(to) = &plan.moved_to {
            let target = place(self.ctx, to)?;
            for e in &plan.entries {
                copy(self.ctx, &plan.source, &target, e)?;
            }
        }
        // Marked before anything is removed: a clean that stops part way is taken up
        // again by the next one, and a run of the folder says where the files went.
        if manifest.cleaned.is_none() {
            manifest.cleaned = Some(Cleaned {
                at_micros: now_micros(),
                moved_to: plan.moved_to.clone(),
                folder: manifest.folder.clone(),
            });
            manifest::save_manifest(self.ctx, self.storage, &manifest)?;
        }
        for e in &plan.entries {
            remove(self.ctx, &plan.source, e)?;
        }
        if let (Place::Local(dir), true) = (&plan.source, plan.emptied) {
            // Empty now; a folder left behind would be listed as a batch with no files.
            let _ = std::fs::remove_dir(dir);
        }
        self.record(&manifest.run_id, plan)
    }

    /// The clean's `_run_control` row, under the run id of the load it cleaned after.
    fn record(&self, run_id: &str, plan: &Plan) -> Result<()> {
        let files = plan.entries.len();
        let bytes: u64 = plan.entries.iter().map(|e| e.bytes).sum();
        let what = match &plan.moved_to {
            Some(to) => format!("moved {files} landing files ({bytes} bytes) to {to}"),
            None => format!("deleted {files} landing files ({bytes} bytes)"),
        };
        let row = crate::RunControlRow {
            run_id: run_id.to_string(),
            batch_id: self.key.batch_id.clone(),
            landing_paths: self.key.landing_paths.clone(),
            table: CLEAN_ROW.to_string(),
            rows_in: files as u64,
            bytes_added: 0,
            started_at_micros: self.started,
            ended_at_micros: now_micros(),
            checks: what,
            ..Default::default()
        };
        crate::run_control::append_rows(
            &self.ctx.catalog,
            self.storage,
            crate::table::RunMode::default(),
            &[row],
            self.key,
            |_, _, _| {},
        )
    }
}

/// The batch's manifest, read again under its lease (a run or another clean may have
/// come in between), when its latest run still loaded it and its folder still holds
/// what that run read (or it is a clean taken up again).
fn recheck(
    ctx: &Context,
    storage: &crate::table::Storage,
    batch: &PendingBatch,
    key: &BatchKey,
) -> std::result::Result<Manifest, NotNow> {
    let manifest = match manifest::read_manifest(ctx, storage, &batch.landing_path, &batch.batch_id)
    {
        Ok(Some(m)) => m,
        Ok(None) => return Err(NotNow::Kept("its manifest is gone".into())),
        Err(e) => return Err(NotNow::Failed(e)),
    };
    match prior::loaded(ctx, storage, key) {
        Ok(true) => {}
        Ok(false) => {
            let why = "its latest run did not load it: it is pending again";
            return Err(NotNow::Kept(why.into()));
        }
        Err(e) => return Err(NotNow::Failed(e)),
    }
    if manifest.cleaned.is_some() {
        return Ok(manifest);
    }
    match manifest::landing_change(
        ctx,
        storage,
        &batch.folder,
        &batch.landing_path,
        &batch.batch_id,
    ) {
        Ok(Some(change)) if !change.is_empty() => Err(NotNow::Kept(format!(
            "its folder changed after its load ({}): `ingest --pending` loads it again first",
            change.describe()
        ))),
        Ok(_) => Ok(manifest),
        Err(e) => Err(NotNow::Failed(e)),
    }
}

/// The folder at `location`, local or in its object store.
fn place(ctx: &Context, location: &str) -> Result<Place> {
    match Location::parse(location)? {
        Location::Local(path) => Ok(Place::Local(path)),
        Location::Url(url) => {
            let store = ctx.store_of(&url)?;
            let path = StorePath::from_url_path(url.path()).map_err(|e| Error::Config {
                name: "clean",
                reason: format!("cannot address {location}: {e}"),
            })?;
            Ok(Place::Store(store, path, location.to_string()))
        }
    }
}

/// Every file of a folder (data files, markers, manifests; not sub-folders).
fn entries(ctx: &Context, place: &Place) -> Result<Vec<Entry>> {
    match place {
        Place::Local(dir) => {
            let mut out = Vec::new();
            for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
                let e = e.map_err(|e| Error::io(dir, e))?;
                let meta = e.metadata().map_err(|err| Error::io(e.path(), err))?;
                if meta.is_file() {
                    let modified = meta.modified().ok().map(crate::batch::micros_since_epoch);
                    out.push(Entry {
                        name: e.file_name().to_string_lossy().into_owned(),
                        bytes: meta.len(),
                        modified,
                        etag: None,
                    });
                }
            }
            Ok(out)
        }
        Place::Store(store, dir, shown) => {
            let listed = ctx
                .runtime()
                .block_on(store.list_with_delimiter(Some(dir)))
                .map_err(|e| store_error(ctx, shown, &e))?;
            Ok(listed
                .objects
                .into_iter()
                .filter_map(|o| {
                    let name = o.location.filename()?.to_string();
                    Some(Entry {
                        name,
                        bytes: o.size,
                        modified: Some(o.last_modified.timestamp_micros()),
                        etag: o.e_tag,
                    })
                })
                .collect())
        }
    }
}

/// Copies `entry` of `from` into `to` (a local rename when both are on one disk).
fn copy(ctx: &Context, from: &Place, to: &Place, entry: &Entry) -> Result<()> {
    let bytes = match from {
        Place::Local(dir) => {
            let path = dir.join(&entry.name);
            if let Place::Local(target) = to {
                std::fs::create_dir_all(target).map_err(|e| Error::io(target, e))?;
                if std::fs::rename(&path, target.join(&entry.name)).is_ok() {
                    return Ok(());
                }
            }
            std::fs::read(&path).map_err(|e| Error::io(&path, e))?
        }
        Place::Store(store, dir, shown) => {
            let path = dir.clone().join(entry.name.as_str());
            ctx.runtime()
                .block_on(async { store.get(&path).await?.bytes().await })
                .map_err(|e| store_error(ctx, shown, &e))?
                .to_vec()
        }
    };
    match to {
        Place::Local(target) => {
            std::fs::create_dir_all(target).map_err(|e| Error::io(target, e))?;
            let path = target.join(&entry.name);
            std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))
        }
        Place::Store(store, dir, shown) => {
            let path = dir.clone().join(entry.name.as_str());
            ctx.runtime()
                .block_on(store.put(&path, bytes.into()))
                .map(|_| ())
                .map_err(|e| store_error(ctx, shown, &e))
        }
    }
}

/// Removes `entry` from `place` (gone already: renamed away).
fn remove(ctx: &Context, place: &Place, entry: &Entry) -> Result<()> {
    match place {
        Place::Local(dir) => {
            let path = dir.join(&entry.name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, e)),
                _ => Ok(()),
            }
        }
        Place::Store(store, dir, shown) => {
            let path = dir.clone().join(entry.name.as_str());
            match ctx.runtime().block_on(store.delete(&path)) {
                Ok(()) | Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(store_error(ctx, shown, &e)),
            }
        }
    }
}

fn store_error(ctx: &Context, shown: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Store {
        location: ctx.config.storage_options.mask(shown),
        reason: e.to_string(),
    }
}

/// Refuses a retention `--delete` does not take, and an archive under the landing root
/// (its files would be listed as batches again).
fn check_options(root: &std::path::Path, options: &CleanOptions) -> Result<()> {
    match &options.action {
        CleanAction::Delete if options.older_than < MIN_DELETE_RETENTION => Err(Error::Config {
            name: "clean",
            reason: format!(
                "--delete needs --older-than 7d or more ({:?} given): deleted landing files cannot be read again; move them with --move-to to keep them",
                options.older_than
            ),
        }),
        CleanAction::MoveTo(dest) => {
            let norm = |s: &str| {
                let s = s.trim_end_matches('/');
                match Location::parse(s) {
                    Ok(Location::Local(p)) => std::path::absolute(&p)
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| s.to_string()),
                    _ => s.to_string(),
                }
            };
            let (root, dest) = (norm(&root.to_string_lossy()), norm(dest));
            if dest == root || dest.starts_with(&format!("{root}/")) {
                return Err(Error::Config {
                    name: "clean",
                    reason: format!(
                        "--move-to {dest} is under the landing root {root}: its files would be listed as batches again; archive them elsewhere"
                    ),
                });
            }
            Ok(())
        }
        CleanAction::Delete => Ok(()),
    }
}

fn kept(batch: PendingBatch, why: &str) -> CleanOutcome {
    CleanOutcome {
        batch,
        status: CleanStatus::Kept,
        files: 0,
        bytes: 0,
        moved_to: None,
        reason: Some(why.to_string()),
    }
}

fn failed(batch: PendingBatch, e: &Error) -> CleanOutcome {
    CleanOutcome {
        batch,
        status: CleanStatus::Failed,
        files: 0,
        bytes: 0,
        moved_to: None,
        reason: Some(crate::error::chain(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_needs_a_week_and_an_archive_must_be_outside_the_landing_root() {
        let day = std::time::Duration::from_secs(24 * 3600);
        let options = |older_than, action| CleanOptions {
            older_than,
            action,
            dry_run: false,
        };
        let root = std::path::Path::new("/data/landing");
        assert!(check_options(root, &options(6 * day, CleanAction::Delete)).is_err());
        check_options(root, &options(7 * day, CleanAction::Delete)).unwrap();
        for under in ["/data/landing/archive", "/data/landing", "/data/landing/"] {
            let err = check_options(root, &options(day, CleanAction::MoveTo(under.into())))
                .unwrap_err()
                .to_string();
            assert!(err.contains("under the landing root"), "{under}: {err}");
        }
        check_options(
            root,
            &options(day, CleanAction::MoveTo("/data/landing-archive".into())),
        )
        .unwrap();
        let s3 = std::path::Path::new("s3://b/landing");
        assert!(
            check_options(
                s3,
                &options(day, CleanAction::MoveTo("s3://b/landing/old".into()))
            )
            .is_err()
        );
        check_options(
            s3,
            &options(day, CleanAction::MoveTo("s3://b/archive".into())),
        )
        .unwrap();
    }
}
