//! What a batch is: a batch id and the landing paths of its folders ([`BatchKey`]), the
//! checks every part of it passes before any I/O, and the clock its runs are stamped with
//! ([`now_micros`]).

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
pub use crate::error::{MAX_BATCH_ID_LEN, MAX_LANDING_PART_LEN};

/// Now, in microseconds since the Unix epoch (UTC): the time runs, writes, leases and
/// reports are stamped with.
pub(crate) fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// `t` in microseconds since the Unix epoch (0 before it).
pub(crate) fn micros_since_epoch(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

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
    #[cfg(any(test, feature = "testing"))]
    pub fn new(batch_id: &str, landing_path: &str) -> Result<BatchKey> {
        Self::of_folders(batch_id, vec![landing_path.to_string()])
    }

    /// A key of a batch id alone, without landing paths (rows with a null
    /// `_landing_path`, replaced by batch id: benches and unit tests build these).
    #[cfg(any(test, feature = "testing"))]
    pub fn of_id(batch_id: impl Into<String>) -> BatchKey {
        BatchKey {
            batch_id: batch_id.into(),
            landing_paths: Vec::new(),
            legacy_suffixes: Vec::new(),
        }
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
    // Links resolved: a folder reached through a symbolic link (`ent_alias` → `ent`) is
    // the same batch as by its real path (the listing reads the real path too). A folder
    // that does not exist is named as typed (its listing fails).
    let absolute = match dir.canonicalize() {
        Ok(real) => real,
        Err(_) => std::path::absolute(dir).map_err(|e| Error::io(dir, e))?,
    };
    let mut names = folder_names(&absolute);
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

/// The folder names of `path`, `..` resolved by name.
fn folder_names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => names.push(n.to_string_lossy().into_owned()),
            Component::ParentDir => {
                names.pop();
            }
            _ => {}
        }
    }
    names
}

/// The end of a batch folder's path that told its rows apart before landing paths: the
/// folder and the two above it when it is named `batch_id=<id>`
/// (`kafka-eu/market/batch_id=X`), else the folder and its parent. A row of an older
/// release (null `_landing_path`) is this folder's when its `_source_file` holds
/// `/<suffix>/`; matching the end, not the whole path, survives a landing zone mounted
/// elsewhere since.
pub fn legacy_suffix(folder: &Path) -> String {
    let names = folder_names(folder);
    let named = names.last().is_some_and(|n| n.starts_with("batch_id="));
    let keep = if named { 3 } else { 2 };
    names[names.len().saturating_sub(keep)..].join("/")
}

/// The batch id carried by a folder named `batch_id=<id>`.
pub fn batch_id_from_dir(dir: &Path) -> Option<&str> {
    dir.file_name()?.to_str()?.strip_prefix("batch_id=")
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
