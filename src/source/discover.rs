//! Discover: batch folders → the batch key and the sorted list of their data files.
//!
//! Takes one or more landing folders of one batch and an optional batch id; gives back
//! a [`Discovery`]: the [`BatchKey`] (batch id and each folder's landing path, validated
//! before any I/O), the data files sorted by folder then name, and what was skipped.
//! Only those folders are listed (no recursion, no symlinks followed); glob patterns
//! are expanded by [`expand_folders`] before.

use std::path::{Path, PathBuf};

pub use crate::batch::{
    BatchKey, Folder, batch_id_from_dir, landing_path_of, legacy_suffix, validate_batch_id,
    validate_landing_path,
};
#[cfg(any(test, feature = "testing"))]
pub use crate::batch::{MAX_BATCH_ID_LEN, MAX_LANDING_PART_LEN};
use crate::error::{Error, Result};

/// Expands glob patterns (`*`, `?`, `[...]`) among batch folder arguments, as a shell
/// would for `'landing/*/*/batch_id=X'`: matching folders, sorted; a pattern matching no
/// folder is an error. Arguments without a pattern character are kept as they are.
pub fn expand_folders(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for arg in args {
        let text = arg.to_string_lossy();
        if !text.contains(['*', '?', '[']) {
            out.push(arg.clone());
            continue;
        }
        let bad = |reason: String| Error::Config {
            name: "batch folder",
            reason,
        };
        let paths = glob::glob(&text).map_err(|e| bad(format!("bad pattern {text:?}: {e}")))?;
        let mut matched: Vec<PathBuf> = Vec::new();
        for p in paths {
            let p = p.map_err(|e| Error::io(e.path(), std::io::Error::other(e.to_string())))?;
            if p.is_dir() {
                matched.push(p);
            }
        }
        if matched.is_empty() {
            return Err(bad(format!(
                "no folder matches {text:?}; check the pattern (quote it so the shell leaves it to bronze, or let the shell expand it)"
            )));
        }
        matched.sort();
        out.extend(matched);
    }
    Ok(out)
}

pub use crate::source::codec::Compression;

/// One data file of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Full path, as read.
    pub path: PathBuf,
    /// The value of `_source_file` for its rows: the path as a string (a name that is not
    /// UTF-8 escaped, [`lineage_name`]).
    pub name: String,
    /// Size on disk.
    pub bytes: u64,
    /// Encoding.
    pub compression: Compression,
    /// Index of its folder in [`Discovery::folders`].
    pub folder: usize,
    /// When it was last modified, microseconds since the epoch (what a manifest compares).
    pub modified: Option<i64>,
    /// Its ETag in an object store (what a manifest compares).
    pub etag: Option<String>,
}

impl SourceFile {
    /// What the ids of its messages without one are derived from: `name`, or the path's
    /// own bytes when they are not UTF-8 (an escaped name could equal another file's).
    pub fn id_key(&self) -> &[u8] {
        match self.path.to_str() {
            None => self.path.as_os_str().as_encoded_bytes(),
            Some(_) => self.name.as_bytes(),
        }
    }
}

/// What discovery found in a batch folder.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// The validated batch id.
    pub batch_id: String,
    /// The batch id and its folders' landing paths: what the run loads and replaces.
    pub key: BatchKey,
    /// The folders, in the order their files are read (sorted by landing path).
    pub folders: Vec<Folder>,
    /// Data files, sorted by folder, then file name.
    pub files: Vec<SourceFile>,
    /// Entries skipped: manifests, `_SUCCESS`, hidden files, sub-folders, symlinks,
    /// other extensions.
    pub skipped: Vec<PathBuf>,
    /// Skipped entries named like data files (symlinks, FIFOs, folders), one line each.
    pub warnings: Vec<String>,
}

/// Lists the batch folder. The batch id is `batch_id` when given, else taken from the
/// folder name, and validated before the folder is touched.
#[cfg(any(test, feature = "testing"))]
pub fn discover(dir: &Path, batch_id: Option<&str>) -> Result<Discovery> {
    discover_folders(&[dir.to_path_buf()], batch_id, None)
}

/// Lists the folders of one batch: the batch id is `batch_id` when given, else each
/// folder's `batch_id=<id>` (all the same, or an error naming two that differ); each
/// folder's landing path is `landing_path` when given (one folder only), else
/// [`landing_path_of`]. Everything is validated before any folder is touched. Files are
/// ordered by folder (landing paths sorted), then by name: the order in which the first
/// of several equal message ids wins.
pub fn discover_folders(
    dirs: &[PathBuf],
    batch_id: Option<&str>,
    landing_path: Option<&str>,
) -> Result<Discovery> {
    discover_folders_with(dirs, batch_id, landing_path, &mut |dir, index, listed| {
        let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
        list_folder(&dir, index, listed)?;
        Ok(dir)
    })
}

/// What listing a folder adds to: data files, skipped entries, warnings.
pub(crate) struct Listed<'a> {
    pub(crate) files: &'a mut Vec<SourceFile>,
    pub(crate) skipped: &'a mut Vec<PathBuf>,
    pub(crate) warnings: &'a mut Vec<String>,
}

/// [`discover_folders`] with each folder listed by `list(folder, index, listed)`, which
/// returns the folder's path as recorded (canonical, for a local folder).
pub(crate) fn discover_folders_with(
    dirs: &[PathBuf],
    batch_id: Option<&str>,
    landing_path: Option<&str>,
    list: &mut dyn FnMut(&Path, usize, Listed<'_>) -> Result<PathBuf>,
) -> Result<Discovery> {
    let (batch_id, mut placed) = place_folders(dirs, batch_id, landing_path)?;
    let key = BatchKey::of_folders(batch_id, placed.iter().map(|(p, _)| p.clone()).collect())?;
    placed.sort_by(|a, b| a.0.cmp(&b.0));
    list_placed(key, placed, list)
}

/// Refuses a batch folder `dir` whose name gives the batch id `id` but which is a link to
/// (or, on a case-insensitive disk, another spelling of) a folder of another name: the
/// same files would load as two batches. A local folder only; one that does not exist
/// is left to its listing.
fn refuse_linked_id(dir: &Path, id: &str) -> Result<()> {
    if dir.to_string_lossy().contains("://") {
        return Ok(());
    }
    let Ok(real) = dir.canonicalize() else {
        return Ok(());
    };
    match batch_id_from_dir(&real) {
        Some(real_id) if real_id == id => Ok(()),
        _ => Err(Error::Config {
            name: "batch folder",
            reason: format!(
                "{} is a link to {}: its batch id would be `{id}` by the name given, not by \
                 the folder read; load {} itself (or give `--batch-id`)",
                dir.display(),
                real.display(),
                real.display()
            ),
        }),
    }
}

/// The batch id of `dirs` and each folder's landing path, validated, in the order given:
/// the one batch id (`batch_id`, else each folder's, all the same) and each folder's
/// place ([`folder_place`]).
fn place_folders<'a>(
    dirs: &'a [PathBuf],
    batch_id: Option<&'a str>,
    landing_path: Option<&str>,
) -> Result<(&'a str, Vec<(String, &'a Path)>)> {
    let mut first: Option<(&Path, &str)> = None;
    let mut placed: Vec<(String, &Path)> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let id = match batch_id {
            Some(id) => id,
            None => batch_id_from_dir(dir).ok_or_else(|| Error::MissingBatchId {
                path: dir.to_path_buf(),
            })?,
        };
        validate_batch_id(id)?;
        if batch_id.is_none() {
            refuse_linked_id(dir, id)?;
        }
        match first {
            None => first = Some((dir, id)),
            Some((first_dir, first_id)) if first_id != id => {
                return Err(Error::MixedBatchIds {
                    first: Box::new((first_dir.to_path_buf(), first_id.to_string())),
                    other: Box::new((dir.to_path_buf(), id.to_string())),
                });
            }
            Some(_) => {}
        }
        placed.push((folder_place(dir, dirs.len(), landing_path)?, dir));
    }
    let Some((_, batch_id)) = first else {
        return Err(Error::Config {
            name: "batch folder",
            reason: "no batch folder given".into(),
        });
    };
    Ok((batch_id, placed))
}

/// A folder's landing path: `landing_path` when given (one folder of `folders` only),
/// else [`landing_path_of`].
fn folder_place(dir: &Path, folders: usize, landing_path: Option<&str>) -> Result<String> {
    match landing_path {
        Some(p) if folders == 1 => {
            validate_landing_path(p)?;
            Ok(p.to_string())
        }
        Some(_) => Err(Error::Config {
            name: "landing_path",
            reason: "--landing-path names the place of one folder; with several folders each takes its own from its path".into(),
        }),
        None => landing_path_of(dir),
    }
}

/// Lists the `placed` folders of the batch `key` in turn with `list`, each folder's path
/// as recorded adding its legacy suffix to the key.
fn list_placed(
    mut key: BatchKey,
    placed: Vec<(String, &Path)>,
    list: &mut dyn FnMut(&Path, usize, Listed<'_>) -> Result<PathBuf>,
) -> Result<Discovery> {
    let mut folders = Vec::with_capacity(placed.len());
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    for (index, (landing_path, dir)) in placed.into_iter().enumerate() {
        let before = files.len();
        let listed = Listed {
            files: &mut files,
            skipped: &mut skipped,
            warnings: &mut warnings,
        };
        let dir = list(dir, index, listed)?;
        key.legacy_suffixes.push(legacy_suffix(&dir));
        folders.push(Folder {
            path: dir,
            landing_path,
            files: files.len() - before,
        });
    }
    Ok(Discovery {
        batch_id: key.batch_id.clone(),
        key,
        folders,
        files,
        skipped,
        warnings,
    })
}

/// Lists one batch folder into `files` (sorted by name) and `skipped`; no data file is
/// [`Error::NoDataFiles`].
fn list_folder(dir: &Path, folder: usize, listed: Listed<'_>) -> Result<()> {
    let Listed {
        files,
        skipped: all_skipped,
        warnings,
    } = listed;
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let start = files.len();
    let mut skipped = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        // `file_type` does not follow symlinks: a symlink or FIFO is skipped, not read.
        let file_type = entry.file_type().map_err(|e| Error::io(&path, e))?;
        // A name that is not UTF-8 is classified by its readable part (the extension is
        // ASCII) and kept whole in the lineage ([`lineage_name`]).
        let name = entry.file_name().to_string_lossy().into_owned();
        match data_file_compression(&name) {
            Some(compression) if file_type.is_file() => {
                files.push(local_data_file(&entry, path, compression, folder)?);
            }
            Some(_) => {
                // Named like a data file but not a regular file: say so, since the user
                // may expect its lines to be loaded.
                let kind = not_regular(file_type);
                warnings.push(format!("skipped {}: {kind}", path.display()));
                skipped.push(path);
            }
            None => {
                if let Some(why) = skipped_like_data(&name) {
                    warnings.push(format!("skipped {}: {why}", path.display()));
                }
                skipped.push(path);
            }
        }
    }
    if files.len() == start {
        return Err(Error::NoDataFiles {
            path: dir.to_path_buf(),
            skipped: skipped.len(),
        });
    }
    files[start..].sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort();
    all_skipped.extend(skipped);
    Ok(())
}

/// The data file `entry` (at `path`) of the batch's folder number `folder`.
fn local_data_file(
    entry: &std::fs::DirEntry,
    path: PathBuf,
    compression: Compression,
    folder: usize,
) -> Result<SourceFile> {
    let metadata = entry.metadata().map_err(|e| Error::io(&path, e))?;
    Ok(SourceFile {
        name: lineage_name(&path),
        path,
        bytes: metadata.len(),
        compression,
        folder,
        modified: metadata
            .modified()
            .ok()
            .map(crate::batch::micros_since_epoch),
        etag: None,
    })
}

/// What an entry named like a data file is when it is not a regular file.
fn not_regular(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_symlink() {
        "a symbolic link (links are not followed: copy the file into the batch folder)"
    } else if file_type.is_dir() {
        "a folder (sub-folders are not read)"
    } else {
        "not a regular file (FIFO, socket or device: never read, it could block)"
    }
}

/// Lists one batch folder of an object store (`url`, through `store` rooted at its
/// bucket or container) into `listed`, as [`list_folder`] does a local one: data files
/// by name, everything else skipped; objects in sub-folders are not read.
pub(crate) async fn list_store_folder(
    store: &deltalake::logstore::object_store::DynObjectStore,
    url: &url::Url,
    folder: usize,
    listed: Listed<'_>,
) -> Result<()> {
    use deltalake::logstore::object_store::path::Path as StorePath;
    let shown = PathBuf::from(url.as_str());
    let prefix = StorePath::from_url_path(url.path()).map_err(|e| Error::Config {
        name: "batch folder",
        reason: format!("cannot address {url}: {e}"),
    })?;
    let found = store
        .list_with_delimiter(Some(&prefix))
        .await
        .map_err(|e| Error::io(&shown, std::io::Error::other(e)))?;
    let start = listed.files.len();
    let mut skipped = Vec::new();
    let root = format!("{}://{}", url.scheme(), url.authority());
    for object in found.objects {
        let name = object.location.filename().unwrap_or_default();
        let full = format!("{root}/{}", object.location);
        match data_file_compression(name) {
            None if skipped_like_data(name).is_some() => {
                let why = skipped_like_data(name).unwrap_or_default();
                listed.warnings.push(format!("skipped {full}: {why}"));
                skipped.push(PathBuf::from(full));
            }
            Some(compression) => listed.files.push(SourceFile {
                path: PathBuf::from(format!("/{}", object.location)),
                name: full,
                bytes: object.size,
                compression,
                folder,
                modified: Some(object.last_modified.timestamp_micros()),
                etag: object.e_tag.clone(),
            }),
            None => skipped.push(PathBuf::from(full)),
        }
    }
    for sub in found.common_prefixes {
        skipped.push(PathBuf::from(format!("{root}/{sub}/")));
    }
    if listed.files.len() == start {
        return Err(Error::NoDataFiles {
            path: shown,
            skipped: skipped.len(),
        });
    }
    listed.files[start..].sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort();
    listed.skipped.extend(skipped);
    Ok(())
}

/// `Some(compression)` for a data file name, `None` for anything to skip: hidden and
/// `_`-prefixed names (`_SUCCESS`, `.crc` files), the copy step's manifests
/// (`manifest.json`, `manifest.jsonl`: those names exactly), other extensions. Data is
/// `*.jsonl`, `*.ndjson` or `*.json`, plain or compressed ([`Compression::of_name`]).
fn data_file_compression(name: &str) -> Option<Compression> {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with(['.', '_']) || is_manifest(&lower) {
        return None;
    }
    let (stem, compression) = Compression::of_name(&lower);
    [".jsonl", ".ndjson", ".json"]
        .iter()
        .any(|ext| stem.ends_with(ext))
        .then_some(compression)
}

/// A manifest of the copy step (`manifest.json`, `manifest.jsonl`), given lower-cased.
fn is_manifest(lower: &str) -> bool {
    matches!(lower, "manifest.json" | "manifest.jsonl")
}

/// Why a skipped entry named `name` is worth a warning: it looks like data (a JSON
/// extension with a compression or suffix bronze does not read, a hidden JSON file), so
/// the user may expect its lines loaded. `None` for the rest (`_SUCCESS`, `notes.txt`,
/// the manifests: every skipped name is in the report's list).
fn skipped_like_data(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if is_manifest(&lower) {
        // Named in the report's list of skipped files, as every skipped file is.
        None
    } else if lower.starts_with(['.', '_']) {
        (lower.contains(".json") || lower.contains(".ndjson"))
            .then_some("hidden (a name starting with `.` or `_` is never read)")
    } else if lower.contains(".json") || lower.contains(".ndjson") {
        Some(
            "not a data file name: bronze reads `*.jsonl`, `*.ndjson`, `*.json`, plain or \
             compressed (`.gz`, `.zst`, `.bz2`, `.lz4`, `.sz`, `.zz`, `.deflate`)",
        )
    } else {
        None
    }
}

/// The file's name as its rows' `_source_file` holds it: the path as is when it is
/// UTF-8; otherwise each byte that is not UTF-8 written `\xNN` (and a `\` as `\\`),
/// so no name is lost. (A UTF-8 name may spell the same text; the ids of messages
/// without one come from the path's own bytes, [`SourceFile::id_key`].)
pub(crate) fn lineage_name(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.to_string();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_batch_ids_are_refused() {
        let long = "a".repeat(300);
        for bad in [
            "x' OR '1'='1",
            "../a",
            "",
            long.as_str(),
            "a b",
            "50%",
            "a.b",
            "é",
            "a\n",
        ] {
            assert!(validate_batch_id(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["2026-04-05_001", "A", "x_y-z9"] {
            validate_batch_id(good).unwrap();
        }
    }

    #[test]
    fn the_landing_path_is_the_two_folders_above_the_batch_folder() {
        let of = |p: &str| landing_path_of(Path::new(p));
        assert_eq!(
            of("/l/kafka-eu/market/batch_id=X").unwrap(),
            "kafka-eu/market"
        );
        assert_eq!(
            of("/l/kafka-eu/market/batch_id=X/").unwrap(),
            "kafka-eu/market"
        );
        assert_eq!(of("/l/a/../src/ent/batch_id=X").unwrap(), "src/ent");
        // A folder not named `batch_id=` (its id given): its parent and itself.
        assert_eq!(of("/l/feed/2026-01-01").unwrap(), "feed/2026-01-01");
        assert_eq!(of("/src.v2/batch_id=1").unwrap(), "src.v2");
        assert!(matches!(
            of("/batch_id=1"),
            Err(Error::InvalidLandingPath { .. })
        ));
        assert!(matches!(
            of("/l/my source/ent/batch_id=1"),
            Err(Error::InvalidLandingPath { .. })
        ));
        assert_eq!(
            legacy_suffix(Path::new("/l/kafka-eu/market/batch_id=X")),
            "kafka-eu/market/batch_id=X"
        );
        assert_eq!(legacy_suffix(Path::new("/l/feed/day1")), "feed/day1");
    }

    #[test]
    fn a_batch_key_names_its_folders_once_each_in_order() {
        let key = BatchKey::of_folders("X", vec!["b/y".into(), "a/z".into()]).unwrap();
        assert_eq!(key.landing_paths, ["a/z", "b/y"]);
        assert_eq!(key.app_ids(), ["bronze/a/z/X", "bronze/b/y/X"]);
        assert_eq!(key.legacy_app_id(), "bronze/X");
        assert_eq!(key.to_string(), "{a/z,b/y}/batch_id=X");
        assert_eq!(
            BatchKey::new("X", "a/z").unwrap().to_string(),
            "a/z/batch_id=X"
        );
        let other = BatchKey::of_folders("X", vec!["a/z".into(), "b/y".into()]).unwrap();
        assert_eq!(
            key.slug(),
            other.slug(),
            "the same folders, the same staging table"
        );
        assert_ne!(key.slug(), BatchKey::new("X", "a/z").unwrap().slug());
        assert!(BatchKey::of_folders("X", vec!["a/z".into(), "a/z".into()]).is_err());
        assert!(BatchKey::new("X'", "a/z").is_err());
    }

    #[test]
    fn several_folders_are_read_in_landing_path_order_and_must_share_an_id() {
        let root = tempfile::tempdir().unwrap();
        let mk = |p: &str| {
            let d = root.path().join(p);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("p.jsonl"), b"{}").unwrap();
            d
        };
        let us = mk("us/m/batch_id=1");
        let eu = mk("eu/m/batch_id=1");
        let found = discover_folders(&[us.clone(), eu.clone()], None, None).unwrap();
        assert_eq!(found.key.landing_paths, ["eu/m", "us/m"]);
        let folders: Vec<&str> = found
            .folders
            .iter()
            .map(|f| f.landing_path.as_str())
            .collect();
        assert_eq!(folders, ["eu/m", "us/m"]);
        assert_eq!(found.files[0].folder, 0);
        assert!(found.files[0].name.contains("/eu/m/"));
        let other = mk("eu/m/batch_id=2");
        assert!(matches!(
            discover_folders(&[eu.clone(), other], None, None),
            Err(Error::MixedBatchIds { .. })
        ));
        assert!(discover_folders(&[eu.clone(), eu.clone()], None, None).is_err());
        assert!(discover_folders(&[eu, us], None, Some("x/y")).is_err());
        let pattern = root.path().join("*/m/batch_id=1");
        let expanded = expand_folders(&[pattern]).unwrap();
        assert_eq!(expanded.len(), 2);
        assert!(expand_folders(&[root.path().join("nope*/batch_id=1")]).is_err());
    }

    #[test]
    fn batch_id_comes_from_the_folder_name() {
        assert_eq!(batch_id_from_dir(Path::new("a/batch_id=42")), Some("42"));
        assert_eq!(batch_id_from_dir(Path::new("a/42")), None);
    }

    #[test]
    fn file_kinds() {
        assert_eq!(
            data_file_compression("part-1.jsonl"),
            Some(Compression::None)
        );
        assert_eq!(data_file_compression("p.JSON"), Some(Compression::None));
        assert_eq!(data_file_compression("p.jsonl.gz"), Some(Compression::Gzip));
        assert_eq!(data_file_compression("p.ndjson"), Some(Compression::None));
        assert_eq!(
            data_file_compression("p.jsonl.GZIP"),
            Some(Compression::Gzip)
        );
        assert_eq!(
            data_file_compression("p.ndjson.gz"),
            Some(Compression::Gzip)
        );
        // A data file that merely starts with `manifest` is data.
        for data in [
            "manifest-2026.jsonl",
            "manifests_orders.jsonl",
            "manifest.jsonl.gz",
        ] {
            assert!(data_file_compression(data).is_some(), "{data}");
        }
        for skip in [
            "_SUCCESS",
            ".hidden.jsonl",
            "manifest.json",
            "MANIFEST.JSONL",
            "notes.txt",
            "_manifest.jsonl",
            "p.jsonl.xz",
        ] {
            assert_eq!(data_file_compression(skip), None, "{skip}");
        }
        assert_eq!(
            data_file_compression("p.jsonl.zst"),
            Some(Compression::Zstd)
        );
        assert_eq!(
            data_file_compression("p.json.BZ2"),
            Some(Compression::Bzip2)
        );
        for named in ["p.jsonl.xz", "p.json.bak", ".p.jsonl", "_m.json"] {
            assert!(skipped_like_data(named).is_some(), "{named}");
        }
        for quiet in ["_SUCCESS", "notes.txt", ".DS_Store", "manifest.json"] {
            assert_eq!(skipped_like_data(quiet), None, "{quiet}");
        }
    }

    #[test]
    fn empty_folder_is_a_clear_error_and_bad_id_needs_no_io() {
        let dir = tempfile::tempdir().unwrap();
        let batch = dir.path().join("batch_id=b1");
        std::fs::create_dir(&batch).unwrap();
        std::fs::write(batch.join("_SUCCESS"), b"").unwrap();
        let err = discover(&batch, None).unwrap_err();
        assert!(
            matches!(err, Error::NoDataFiles { skipped: 1, .. }),
            "{err}"
        );
        // The folder does not exist, but the id is refused first.
        let err = discover(Path::new("/nonexistent/batch_id=a'b"), None).unwrap_err();
        assert!(matches!(err, Error::InvalidBatchId { .. }), "{err}");
    }
}
