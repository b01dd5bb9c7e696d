//! Discover: a batch folder → the sorted list of its data files.
//!
//! Takes the batch folder and an optional batch id; gives back a [`Discovery`]: the batch
//! id (validated before any I/O), the data files sorted by name, and what was skipped.
//! Only that one folder is listed (no recursion, no symlinks followed, no globbing of
//! siblings).

use std::path::{Path, PathBuf};

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
}

/// What discovery found in a batch folder.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// The validated batch id.
    pub batch_id: String,
    /// Data files, sorted by file name.
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
    let batch_id = match batch_id {
        Some(id) => id,
        None => batch_id_from_dir(dir).ok_or_else(|| Error::MissingBatchId {
            path: dir.to_path_buf(),
        })?,
    };
    validate_batch_id(batch_id)?;
    let dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
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
    if files.is_empty() {
        return Err(Error::NoDataFiles {
            path: dir,
            skipped: skipped.len(),
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort();
    Ok(Discovery {
        batch_id: batch_id.to_string(),
        files,
        skipped,
        warnings,
    })
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
