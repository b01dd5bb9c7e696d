//! Discover: batch folders → the batch key and the sorted list of their data files.
//!
//! Takes one or more landing folders of one batch and an optional batch id; gives back
//! a [`Discovery`]: the [`BatchKey`] (batch id and each folder's landing path, validated
//! before any I/O), the data files sorted by folder then name, and what was skipped.
//! Only those folders are listed (no recursion, no symlinks followed); glob patterns
//! are expanded by [`expand_folders`] before.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};

/// Longest batch id accepted.
pub const MAX_BATCH_ID_LEN: usize = 128;

/// Checks a batch id against the allow-list `[A-Za-z0-9_-]{1,128}`.
///
/// The id ends up in folder names and predicates, so anything else (quotes, `..`,
/// `%`, whitespace) is refused rather than escaped.
pub fn validate_batch_id(id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("it is empty")
    } else if id.len() > MAX_BATCH_ID_LEN {
        Some("it is too long")
    } else if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        Some("it has a character outside the allow-list")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidBatchId {
            id: id.chars().take(MAX_BATCH_ID_LEN + 8).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Longest part of a landing path accepted.
pub const MAX_LANDING_PART_LEN: usize = 128;

/// Checks a landing path (`<source>/<entity>`): one or more parts separated by `/`, each
/// 1 to 128 characters of `A-Z a-z 0-9 _ - .`, none `.` or `..`.
///
/// It ends up in lease file names, `txn` application ids and every row's
/// `_landing_path`, so anything else (quotes, spaces, `%`, non-ASCII) is refused rather
/// than escaped.
pub fn validate_landing_path(path: &str) -> Result<()> {
    let refuse = |reason: &'static str| {
        Err(Error::InvalidLandingPath {
            path: path.chars().take(4 * MAX_LANDING_PART_LEN).collect(),
            reason,
        })
    };
    if path.is_empty() {
        return refuse("it is empty");
    }
    if path.split('/').count() > 4 {
        return refuse("it has more than 4 parts");
    }
    for part in path.split('/') {
        if part.is_empty() {
            return refuse("it has an empty part");
        }
        if part.len() > MAX_LANDING_PART_LEN {
            return refuse("a part is too long");
        }
        if part == "." || part == ".." {
            return refuse("a part is `.` or `..`");
        }
        if !part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        {
            return refuse("a part has a character outside the allow-list");
        }
    }
    Ok(())
}

/// What a run loads and a rerun replaces: one batch id and the landing paths of its
/// folders (sorted, distinct). Two folders that share a batch id but sit in different
/// places of the landing zone (`kafka-eu/market/batch_id=X`, `kafka-us/market/batch_id=X`)
/// are different batches; rows carry their folder's landing path in `_landing_path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BatchKey {
    /// The batch id (`batch_id=<id>` of the folder name, or `--batch-id`).
    pub batch_id: String,
    /// The landing path of each folder (`<source>/<entity>`), sorted.
    pub landing_paths: Vec<String>,
    /// Each folder's path suffix ([`legacy_suffix`]): how rows written before landing
    /// paths (a null `_landing_path`) are told to be this batch's, by `_source_file`.
    #[serde(skip)]
    pub legacy_suffixes: Vec<String>,
}

impl BatchKey {
    /// A key of one folder, both parts validated.
    pub fn new(batch_id: &str, landing_path: &str) -> Result<BatchKey> {
        Self::of_folders(batch_id, vec![landing_path.to_string()])
    }

    /// A key of several folders of one batch id, every part validated; the landing paths
    /// are sorted and must be distinct.
    pub fn of_folders(batch_id: &str, mut landing_paths: Vec<String>) -> Result<BatchKey> {
        validate_batch_id(batch_id)?;
        for p in &landing_paths {
            validate_landing_path(p)?;
        }
        if landing_paths.is_empty() {
            return Err(Error::Config {
                name: "batch folder",
                reason: "no batch folder given".into(),
            });
        }
        landing_paths.sort();
        if let Some(w) = landing_paths.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config {
                name: "batch folder",
                reason: format!(
                    "two folders of batch {batch_id} have the same landing path `{}`: give each folder once (folders of one batch must sit in different `<source>/<entity>` places)",
                    w[0]
                ),
            });
        }
        Ok(BatchKey {
            batch_id: batch_id.to_string(),
            landing_paths,
            legacy_suffixes: Vec::new(),
        })
    }

    /// The `txn` application ids of this batch's writes, one per folder:
    /// `bronze/<landing path>/<batch id>` (a key without landing paths, as benches build
    /// them: [`BatchKey::legacy_app_id`]).
    pub fn app_ids(&self) -> Vec<String> {
        if self.landing_paths.is_empty() {
            return vec![self.legacy_app_id()];
        }
        self.landing_paths
            .iter()
            .map(|p| format!("bronze/{p}/{}", self.batch_id))
            .collect()
    }

    /// The `txn` application id the releases before landing paths recorded for this batch
    /// id (`bronze/<batch id>`): a table holding it may hold rows of the batch with a
    /// null `_landing_path`.
    pub fn legacy_app_id(&self) -> String {
        format!("bronze/{}", self.batch_id)
    }

    /// A short name for the staging table and the run id: the batch id, then a hash of
    /// the landing paths (8 hex characters).
    pub fn slug(&self) -> String {
        let parts: Vec<&[u8]> = self.landing_paths.iter().map(|p| p.as_bytes()).collect();
        let hash = crate::naming::stable_id(&parts);
        format!("{}_{}", self.batch_id, &hash[..8])
    }
}

impl std::fmt::Display for BatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.landing_paths.as_slice() {
            [one] => write!(f, "{one}/batch_id={}", self.batch_id),
            many => write!(f, "{{{}}}/batch_id={}", many.join(","), self.batch_id),
        }
    }
}

/// The landing path of a batch folder, from its path alone (no I/O): the names of the
/// two folders above `batch_id=<id>` (`landing/kafka-eu/market/batch_id=X` →
/// `kafka-eu/market`); for a folder named otherwise (its id given with `--batch-id`),
/// its parent's name and its own. Relative paths are taken from the current directory,
/// `..` resolved by name.
pub fn landing_path_of(dir: &Path) -> Result<String> {
    let absolute = std::path::absolute(dir).map_err(|e| Error::io(dir, e))?;
    let mut names: Vec<String> = Vec::new();
    for c in absolute.components() {
        match c {
            Component::Normal(n) => names.push(n.to_string_lossy().into_owned()),
            Component::ParentDir => {
                names.pop();
            }
            _ => {}
        }
    }
    if names.last().is_some_and(|n| n.starts_with("batch_id=")) {
        names.pop();
    }
    let start = names.len().saturating_sub(2);
    let path = names[start..].join("/");
    if path.is_empty() {
        return Err(Error::InvalidLandingPath {
            path: dir.display().to_string(),
            reason: "the folder has no parent folders to name its place in the landing zone",
        });
    }
    validate_landing_path(&path)?;
    Ok(path)
}

/// The end of a batch folder's path that told its rows apart before landing paths: the
/// folder and the two above it when it is named `batch_id=<id>`
/// (`kafka-eu/market/batch_id=X`), else the folder and its parent. A row of an older
/// release (null `_landing_path`) is this folder's when its `_source_file` holds
/// `/<suffix>/`; matching the end, not the whole path, survives a landing zone mounted
/// elsewhere since.
pub fn legacy_suffix(folder: &Path) -> String {
    let names: Vec<String> = folder
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    let named = names.last().is_some_and(|n| n.starts_with("batch_id="));
    let keep = if named { 3 } else { 2 };
    names[names.len().saturating_sub(keep)..].join("/")
}

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

/// How a data file is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`*.jsonl.gz`, `*.json.gz`).
    Gzip,
}

/// One data file of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Full path, as read.
    pub path: PathBuf,
    /// The value of `_source_file` for its rows: the path as a string.
    pub name: String,
    /// Size on disk.
    pub bytes: u64,
    /// Encoding.
    pub compression: Compression,
    /// Index of its folder in [`Discovery::folders`].
    pub folder: usize,
}

/// One landing folder of a batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Folder {
    /// The folder, as listed (canonical).
    pub path: PathBuf,
    /// Its place in the landing zone (`<source>/<entity>`), `_landing_path` of its rows.
    pub landing_path: String,
    /// Data files read from it.
    pub files: usize,
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

/// The batch id carried by a folder named `batch_id=<id>`.
pub fn batch_id_from_dir(dir: &Path) -> Option<&str> {
    dir.file_name()?.to_str()?.strip_prefix("batch_id=")
}

/// Lists the batch folder. The batch id is `batch_id` when given, else taken from the
/// folder name, and validated before the folder is touched.
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
        let place = match landing_path {
            Some(p) if dirs.len() == 1 => {
                validate_landing_path(p)?;
                p.to_string()
            }
            Some(_) => {
                return Err(Error::Config {
                    name: "landing-path",
                    reason: "--landing-path names the place of one folder; with several folders each takes its own from its path".into(),
                });
            }
            None => landing_path_of(dir)?,
        };
        placed.push((place, dir));
    }
    let Some((_, batch_id)) = first else {
        return Err(Error::Config {
            name: "batch folder",
            reason: "no batch folder given".into(),
        });
    };
    let key = BatchKey::of_folders(batch_id, placed.iter().map(|(p, _)| p.clone()).collect())?;
    placed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut folders = Vec::with_capacity(placed.len());
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let mut key = key;
    for (index, (landing_path, dir)) in placed.into_iter().enumerate() {
        let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
        key.legacy_suffixes.push(legacy_suffix(&dir));
        let before = files.len();
        list_folder(&dir, index, &mut files, &mut skipped, &mut warnings)?;
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
fn list_folder(
    dir: &Path,
    folder: usize,
    files: &mut Vec<SourceFile>,
    all_skipped: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let start = files.len();
    let mut skipped = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        // `file_type` does not follow symlinks: a symlink or FIFO is skipped, not read.
        let file_type = entry.file_type().map_err(|e| Error::io(&path, e))?;
        let name = entry.file_name();
        let compression = name.to_str().and_then(data_file_compression);
        match compression {
            Some(compression) if file_type.is_file() => {
                let bytes = entry.metadata().map_err(|e| Error::io(&path, e))?.len();
                files.push(SourceFile {
                    name: path.to_string_lossy().into_owned(),
                    path,
                    bytes,
                    compression,
                    folder,
                });
            }
            Some(_) => {
                // Named like a data file but not a regular file: say so, since the user
                // may expect its lines to be loaded.
                let kind = if file_type.is_symlink() {
                    "a symbolic link (links are not followed: copy the file into the batch folder)"
                } else if file_type.is_dir() {
                    "a folder (sub-folders are not read)"
                } else {
                    "not a regular file (FIFO, socket or device: never read, it could block)"
                };
                warnings.push(format!("skipped {}: {kind}", path.display()));
                skipped.push(path);
            }
            None => skipped.push(path),
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

/// `Some(compression)` for a data file name, `None` for anything to skip.
fn data_file_compression(name: &str) -> Option<Compression> {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with(['.', '_']) || lower.starts_with("manifest") {
        return None;
    }
    if lower.ends_with(".jsonl") || lower.ends_with(".json") {
        Some(Compression::None)
    } else if lower.ends_with(".jsonl.gz") || lower.ends_with(".json.gz") {
        Some(Compression::Gzip)
    } else {
        None
    }
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
        for skip in [
            "_SUCCESS",
            ".hidden.jsonl",
            "manifest.json",
            "notes.txt",
            "_manifest.jsonl",
        ] {
            assert_eq!(data_file_compression(skip), None, "{skip}");
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
