//! Manifests: what each batch folder held when a run loaded it, file by file (name, size,
//! modification time or ETag, lines, rows, corrupt lines), written once the run is
//! recorded in `_run_control`. A backlog compares a loaded batch's folder with its
//! manifest to find files that landed late, changed or were removed after the load
//! ([`LandingChange`]); `bronze clean` cleans only folders that still match theirs.
//!
//! Files: `<schema>/_bronze_manifests/<source>+<entity>/<batch id>.json`, one per folder
//! of a batch (the ledger's name for the landing path, [`super::ledger::ledger_file`]).

use deltalake::logstore::object_store::{ObjectStoreExt as _, PutPayload, path::Path as StorePath};
use serde::{Deserialize, Serialize};

use std::collections::HashMap;
use std::path::Path;

use super::context::Context;
use super::discovery;
use super::state::Run;
use crate::error::{Error, Result};
use crate::source::discover::{Discovery, SourceFile};
use crate::stage::FileStats;
use crate::table::{Seen, Storage};

/// The folder of the manifests under a schema.
pub(crate) const MANIFEST_DIR: &str = "_bronze_manifests";

/// The manifest format this release writes; another is read as no manifest.
const FORMAT: u32 = 1;

/// What one batch folder held when a run loaded it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    format: u32,
    /// The batch id.
    pub batch_id: String,
    /// `<source>/<entity>`.
    pub landing_path: String,
    /// The folder read (a path, or an object store URL).
    pub folder: String,
    /// The run that loaded it.
    pub run_id: String,
    /// When that run started, microseconds since the epoch.
    pub loaded_micros: i64,
    /// Its data files, by name.
    pub files: Vec<ManifestFile>,
    /// Set once `bronze clean` moved or deleted the folder's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaned: Option<Cleaned>,
}

/// One data file of a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Its name in the folder.
    pub name: String,
    /// Its size in bytes, as landed (compressed when it is).
    pub bytes: u64,
    /// Its modification time, microseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<i64>,
    /// Its ETag in an object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// Non-blank lines (records) read from it; `None` for a run resumed from its staging
    /// table, which does not read the files again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// Messages staged from it (duplicates dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// Its corrupt lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<u64>,
}

/// How `bronze clean` cleaned a batch's landing folder; kept by the manifests of later
/// loads of the batch (from its archive).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleaned {
    /// When, microseconds since the epoch.
    pub at_micros: i64,
    /// Where the files went (`None`: deleted).
    pub moved_to: Option<String>,
    /// The folder cleaned.
    #[serde(default)]
    pub folder: String,
}

/// How a loaded batch folder differs from its manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandingChange {
    /// Data files there now that the load did not read (landed late).
    pub added: Vec<String>,
    /// Data files whose size, modification time or ETag changed since the load.
    pub changed: Vec<String>,
    /// Data files the load read that are gone.
    pub removed: Vec<String>,
}

impl LandingChange {
    /// No difference.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }

    /// Files were added or changed: a rerun reads rows the load did not.
    pub fn has_new_data(&self) -> bool {
        !self.added.is_empty() || !self.changed.is_empty()
    }

    /// A rerun loses nothing and reads what is new: files were added or changed and none
    /// removed (a rerun replaces the batch's rows with what its folder holds now, so the
    /// rows of a removed file would go).
    pub fn reloads(&self) -> bool {
        self.has_new_data() && self.removed.is_empty()
    }

    /// `1 added (b.jsonl), 1 removed (a.jsonl)`, naming at most three files of each.
    pub fn describe(&self) -> String {
        let part = |what: &str, names: &[String]| {
            (!names.is_empty()).then(|| {
                let shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
                let more = if names.len() > 3 { ", …" } else { "" };
                format!("{} {what} ({}{more})", names.len(), shown.join(", "))
            })
        };
        [
            part("added", &self.added),
            part("changed", &self.changed),
            part("removed", &self.removed),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// The name of a data file in its folder (the last part of its path).
fn file_name(file: &SourceFile) -> String {
    file.name
        .rsplit('/')
        .next()
        .unwrap_or(file.name.as_str())
        .to_string()
}

impl Manifest {
    /// How `now` (the folder's data files as listed now) differs from this manifest.
    pub fn compare(&self, now: &[SourceFile]) -> LandingChange {
        let mut change = LandingChange::default();
        let then: std::collections::HashMap<&str, &ManifestFile> =
            self.files.iter().map(|f| (f.name.as_str(), f)).collect();
        let mut seen = std::collections::HashSet::new();
        for file in now {
            let name = file_name(file);
            match then.get(name.as_str()) {
                None => change.added.push(name.clone()),
                Some(was) => {
                    let same = was.bytes == file.bytes
                        && (was.etag.is_none() || was.etag == file.etag)
                        && (was.modified.is_none() || was.modified == file.modified);
                    if !same {
                        change.changed.push(name.clone());
                    }
                }
            }
            seen.insert(name);
        }
        change.removed = self
            .files
            .iter()
            .filter(|f| !seen.contains(&f.name))
            .map(|f| f.name.clone())
            .collect();
        change
    }
}

/// Whether a round at `now` compares every loaded batch of an entity with its manifest:
/// its last full check (`None`: never) is at least `every` old.
pub(crate) fn full_check_due(now: i64, every: i64, last_full: Option<i64>) -> bool {
    last_full.is_none_or(|last| now.saturating_sub(last) >= every)
}

/// The loaded batches of an entity a round compares with their manifest outside a full
/// check: its latest few by batch id (a copy step's retries land in its newest folders).
pub(crate) const RECENT_CHECKED: usize = 3;

/// Which of an entity's loaded batches (`loaded`, their ids) a round compares with their
/// manifest: all of them in a full check, else the [`RECENT_CHECKED`] greatest ids. A
/// round's cost thus stays the same however many batches the entity loaded before.
pub(crate) fn to_check(mut loaded: Vec<&str>, full: bool) -> Vec<&str> {
    if !full {
        loaded.sort_unstable_by(|a, b| b.cmp(a));
        loaded.truncate(RECENT_CHECKED);
    }
    loaded
}

/// The manifest file of `batch_id` of `landing_path` under the schema folder.
pub(crate) fn manifest_path(
    schema_dir: &StorePath,
    landing_path: &str,
    batch_id: &str,
) -> StorePath {
    let entity = super::ledger::ledger_file(landing_path);
    let entity = entity.strip_suffix(".json").unwrap_or(&entity);
    schema_dir
        .clone()
        .join(MANIFEST_DIR)
        .join(entity)
        .join(format!("{batch_id}.json").as_str())
}

/// Writes a manifest for each folder of the batch `found` that `run` loaded, from what
/// discovery listed and staging counted (`stats`, by `_source_file`). A manifest that
/// cannot be written costs a warning: the batch is loaded, and without its manifest a
/// late file is not noticed.
///
/// A rerun (a batch seen before) keeps what an earlier manifest says of a clean: a batch
/// loaded again from its archive still has a cleaned landing folder.
pub(super) fn write_manifests(run: &Run, found: &Discovery, stats: &[FileStats]) -> Option<String> {
    let by_name: HashMap<&str, &FileStats> = stats.iter().map(|s| (s.file.as_str(), s)).collect();
    let written = (|| -> Result<()> {
        let (store, schema_dir) = run.ctx.schema_folder(&run.storage)?;
        for (index, folder) in found.folders.iter().enumerate() {
            let cleaned = match run.mode.seen {
                Seen::Before => {
                    read_manifest(run.ctx, &run.storage, &folder.landing_path, &found.batch_id)?
                        .and_then(|m| m.cleaned)
                }
                Seen::Never => None,
            };
            let manifest = Manifest {
                format: FORMAT,
                batch_id: found.batch_id.clone(),
                landing_path: folder.landing_path.clone(),
                folder: folder.path.to_string_lossy().into_owned(),
                run_id: run.run_id.clone(),
                loaded_micros: run.started_micros,
                files: folder_files(found, index, &by_name),
                cleaned,
            };
            let path = manifest_path(&schema_dir, &folder.landing_path, &found.batch_id);
            run.runtime()
                .block_on(put_manifest(store.as_ref(), &path, &manifest))?;
        }
        Ok(())
    })();
    written.err().map(|e| {
        format!(
            "the batch's manifest could not be written ({}): a file landing in its folder later will not be noticed",
            crate::error::chain(&e)
        )
    })
}

/// The manifest's entries of the files of `found`'s folder number `index`.
fn folder_files(
    found: &Discovery,
    index: usize,
    by_name: &HashMap<&str, &FileStats>,
) -> Vec<ManifestFile> {
    found
        .files
        .iter()
        .filter(|f| f.folder == index)
        .map(|f| {
            let s = by_name.get(f.name.as_str());
            ManifestFile {
                name: file_name(f),
                bytes: f.bytes,
                modified: f.modified,
                etag: f.etag.clone(),
                lines: s.map(|s| s.lines),
                messages: s.map(|s| s.messages),
                corrupt: s.map(|s| s.corrupt),
            }
        })
        .collect()
}

/// The manifest of `batch_id` of `landing_path`, when there is one this release reads.
pub(super) fn read_manifest(
    ctx: &Context,
    storage: &Storage,
    landing_path: &str,
    batch_id: &str,
) -> Result<Option<Manifest>> {
    let (store, schema_dir) = ctx.schema_folder(storage)?;
    let path = manifest_path(&schema_dir, landing_path, batch_id);
    let got = ctx
        .runtime()
        .block_on(async { store.get(&path).await?.bytes().await });
    match got {
        Ok(bytes) => Ok(serde_json::from_slice::<Manifest>(&bytes)
            .ok()
            .filter(|m| m.format == FORMAT)),
        Err(deltalake::logstore::object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(Error::Store {
            location: format!("{path}"),
            reason: format!("could not read the batch's manifest: {e}"),
        }),
    }
}

/// Writes `manifest` back (after `bronze clean` marked it).
pub(super) fn save_manifest(ctx: &Context, storage: &Storage, manifest: &Manifest) -> Result<()> {
    let (store, schema_dir) = ctx.schema_folder(storage)?;
    let path = manifest_path(&schema_dir, &manifest.landing_path, &manifest.batch_id);
    ctx.runtime()
        .block_on(put_manifest(store.as_ref(), &path, manifest))
}

/// How the loaded batch folder `folder` (its manifest's) differs from its manifest
/// now; `None` when it has no manifest (loaded by a release before manifests), or was
/// cleaned and nothing landed in it since.
pub(super) fn landing_change(
    ctx: &Context,
    storage: &Storage,
    folder: &std::path::Path,
    landing_path: &str,
    batch_id: &str,
) -> Result<Option<LandingChange>> {
    let Some(manifest) = read_manifest(ctx, storage, landing_path, batch_id)? else {
        return Ok(None);
    };
    let now = match discovery::list_folders(ctx, &[folder]) {
        Ok(found) => found.files,
        Err(Error::NoDataFiles { .. }) => Vec::new(),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    // A cleaned folder is empty, and so is the landing folder of a batch loaded again
    // from its archive: nothing to say. Files there now landed after the clean (the
    // load's files count as removed, so the batch is reported, never reloaded).
    let shown = folder.to_string_lossy();
    let cleaned_here = manifest.cleaned.as_ref().is_some_and(|c| c.folder == shown);
    if (cleaned_here || manifest.folder != shown) && now.is_empty() {
        return Ok(None);
    }
    Ok(Some(manifest.compare(&now)))
}

/// [`Error::BatchCleaned`] instead of `e` when the folder that has no data files (or
/// is gone) belongs to a batch `bronze clean` cleaned, which its manifest says.
pub(super) fn cleaned_instead(ctx: &Context, batch_dirs: &[impl AsRef<Path>], e: Error) -> Error {
    let gone = match &e {
        Error::NoDataFiles { .. } => true,
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    };
    let cleaned = (|| {
        let (landing_path, batch_id) = discovery::folder_identity(ctx, batch_dirs)?;
        let storage = ctx.storage().ok()?;
        let manifest = read_manifest(ctx, &storage, &landing_path, &batch_id).ok()??;
        let cleaned = manifest.cleaned?;
        let batch = format!("{landing_path}/batch_id={batch_id}");
        let how = match cleaned.moved_to {
            Some(to) => format!(
                "moved its landing files to {to}; its rows stay in the tables: load it again from there with `bronze ingest {to}`"
            ),
            None => "deleted its landing files; its rows stay in the tables".to_string(),
        };
        Some(Error::BatchCleaned { batch, how })
    })();
    match cleaned {
        Some(cleaned) if gone => cleaned,
        _ => e,
    }
}

/// [`Error::BatchCleaned`] for a batch `bronze clean` cleaned whose cleaned folder
/// holds files again: a rerun from there would replace all its rows with those files'
/// alone. A run from the archive (another folder) goes ahead.
pub(super) fn refuse_cleaned_folder(
    ctx: &Context,
    storage: &Storage,
    found: &Discovery,
) -> Result<()> {
    for folder in &found.folders {
        let Some(manifest) = read_manifest(ctx, storage, &folder.landing_path, &found.batch_id)?
        else {
            continue;
        };
        let Some(cleaned) = &manifest.cleaned else {
            continue;
        };
        if cleaned.folder != folder.path.to_string_lossy() {
            continue;
        }
        let batch = format!("{}/batch_id={}", folder.landing_path, found.batch_id);
        let archive = match &cleaned.moved_to {
            Some(to) => format!(
                "its earlier files are in {to}: copy the new ones there and load it with `bronze ingest {to}`"
            ),
            None => "its earlier files were deleted".to_string(),
        };
        return Err(Error::BatchCleaned {
            batch,
            how: format!(
                "cleaned its folder, which holds files that landed after: a rerun from it would replace every row of the batch with theirs alone; {archive}, or load them as a batch of their own (`--batch-id`)"
            ),
        });
    }
    Ok(())
}

async fn put_manifest(
    store: &deltalake::logstore::object_store::DynObjectStore,
    path: &StorePath,
    manifest: &Manifest,
) -> Result<()> {
    let body = serde_json::to_vec_pretty(manifest).map_err(|e| Error::Internal {
        what: format!("a manifest does not serialize: {e}"),
    })?;
    store
        .put(path, PutPayload::from(body))
        .await
        .map(|_| ())
        .map_err(|e| Error::Store {
            location: format!("{path}"),
            reason: format!("could not write the batch's manifest: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: u64, modified: i64) -> SourceFile {
        SourceFile {
            path: format!("/l/s/e/batch_id=1/{name}").into(),
            name: format!("/l/s/e/batch_id=1/{name}"),
            bytes,
            compression: crate::source::codec::Compression::None,
            folder: 0,
            modified: Some(modified),
            etag: None,
        }
    }

    #[test]
    fn a_round_checks_the_latest_batches_and_all_of_them_once_per_interval() {
        let hour = 3_600_000_000;
        let now = 100 * hour;
        // A full check an hour ago, every 24 hours: not due; the three latest ids are
        // checked, whatever the history.
        assert!(!full_check_due(now, 24 * hour, Some(now - hour)));
        let ids: Vec<String> = (0..10_000).map(|i| format!("d{i:05}")).collect();
        let loaded: Vec<&str> = ids.iter().map(String::as_str).collect();
        assert_eq!(
            to_check(loaded.clone(), false),
            ["d09999", "d09998", "d09997"]
        );
        assert_eq!(to_check(vec!["b", "a"], false), ["b", "a"]);
        // Due after 24 hours (or never made): then every batch is checked.
        assert!(full_check_due(now, 24 * hour, Some(now - 24 * hour)));
        assert!(full_check_due(now, 24 * hour, None));
        assert_eq!(to_check(loaded, true).len(), 10_000);
    }

    #[test]
    fn a_folder_compared_with_its_manifest_names_what_was_added_changed_and_removed() {
        let m = Manifest {
            format: FORMAT,
            batch_id: "1".into(),
            landing_path: "s/e".into(),
            folder: "/l/s/e/batch_id=1".into(),
            run_id: "r".into(),
            loaded_micros: 5,
            files: ["a.jsonl", "b.jsonl", "c.jsonl"]
                .iter()
                .map(|n| ManifestFile {
                    name: n.to_string(),
                    bytes: 10,
                    modified: Some(1),
                    etag: None,
                    lines: Some(1),
                    messages: Some(1),
                    corrupt: Some(0),
                })
                .collect(),
            cleaned: None,
        };
        let same = [
            file("a.jsonl", 10, 1),
            file("b.jsonl", 10, 1),
            file("c.jsonl", 10, 1),
        ];
        assert!(m.compare(&same).is_empty());
        let now = [
            file("a.jsonl", 10, 1),
            file("b.jsonl", 10, 2),
            file("d.jsonl", 3, 9),
        ];
        let change = m.compare(&now);
        assert_eq!(change.added, ["d.jsonl"]);
        assert_eq!(change.changed, ["b.jsonl"]);
        assert_eq!(change.removed, ["c.jsonl"]);
        assert!(change.has_new_data());
        assert_eq!(
            change.describe(),
            "1 added (d.jsonl), 1 changed (b.jsonl), 1 removed (c.jsonl)"
        );
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Manifest>(&text).unwrap(), m);
    }
}
