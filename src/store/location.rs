//! Where a catalog or a landing folder lives: a local path, or an object store URL, and
//! the options that reach the store (credentials, endpoints), never shown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::logstore::object_store::DynObjectStore;
use url::Url;

use crate::error::{Error, Result};

/// URL schemes a location may have, with the store each one reaches.
pub const SCHEMES: &[(&str, &str)] = &[
    ("s3", "Amazon S3 (and S3-compatible stores)"),
    ("s3a", "Amazon S3 (and S3-compatible stores)"),
    ("abfss", "ADLS Gen2 / OneLake"),
    ("abfs", "ADLS Gen2 / OneLake"),
    ("az", "Azure Blob Storage / ADLS Gen2"),
    ("azure", "Azure Blob Storage / ADLS Gen2"),
    ("gs", "Google Cloud Storage"),
    ("file", "the local file system"),
];

/// A catalog or landing folder: a local path, or a URL of an object store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A folder on the local file system.
    Local(PathBuf),
    /// A folder in an object store (`s3://bucket/prefix`, `abfss://container@account…/…`,
    /// `gs://bucket/prefix`).
    Url(Url),
}

impl Location {
    /// A location from a command-line argument or a config value: `<scheme>://…` for an
    /// object store (see [`SCHEMES`]; `file://` is a local path), anything else a local
    /// path. A malformed URL or an unknown scheme is an error naming the supported ones.
    pub fn parse(text: &str) -> Result<Location> {
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(Location::Local(PathBuf::from(text)));
        };
        let bad = |reason: String| Error::Config {
            name: "location",
            reason: format!("{text:?}: {reason}"),
        };
        let scheme = scheme.to_ascii_lowercase();
        if !SCHEMES.iter().any(|(s, _)| *s == scheme) {
            return Err(bad(format!(
                "unknown scheme `{scheme}://`; use one of {} or a local path",
                SCHEMES
                    .iter()
                    .map(|(s, _)| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let url = Url::parse(text).map_err(|e| bad(format!("not a valid URL ({e})")))?;
        if url.scheme() == "file" {
            return url
                .to_file_path()
                .map(Location::Local)
                .map_err(|()| bad("not a local absolute path".into()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad(format!(
                "no bucket or container: write `{scheme}://<bucket>/<path>`"
            )));
        }
        if url.password().is_some() {
            return Err(bad(
                "a location holds no password: pass credentials with --storage-option or the environment".into(),
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "a location has no query or fragment (`?…`, `#…`): pass credentials with --storage-option".into(),
            ));
        }
        Ok(Location::Url(url))
    }

    /// The local path, for a local location.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Url(_) => None,
        }
    }

    /// This location as a directory URL (ending in `/`); a local folder is created if
    /// missing and made absolute.
    ///
    /// A location whose path holds a `%` (as a local path, or once a URL's escapes are
    /// decoded) is refused: the Delta libraries turn such a table path into an object
    /// path and back with one decoding too many (`cat%41` opens `catA`), so a rerun would
    /// read another folder's tables.
    pub(crate) fn dir_url(&self) -> Result<Url> {
        match self {
            Location::Url(u) => {
                if decodes_to_percent(u.path()) {
                    return Err(percent_refused(u.as_str()));
                }
                Ok(dir_url(u))
            }
            Location::Local(p) => {
                if p.as_os_str().as_encoded_bytes().contains(&b'%') {
                    return Err(percent_refused(&p.display().to_string()));
                }
                std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
                let abs = p.canonicalize().map_err(|e| Error::io(p, e))?;
                if abs.as_os_str().as_encoded_bytes().contains(&b'%') {
                    return Err(percent_refused(&abs.display().to_string()));
                }
                Url::from_directory_path(&abs).map_err(|()| Error::Config {
                    name: "location",
                    reason: format!("{} is not an absolute path", abs.display()),
                })
            }
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Url(u) => write!(f, "{u}"),
        }
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Self {
        Location::Local(p)
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Self {
        Location::Local(p.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Self {
        Location::Local(p.clone())
    }
}

impl From<&str> for Location {
    /// [`Location::parse`] when it parses; otherwise a local path, which
    /// [`IngestConfig::validate`](crate::IngestConfig::validate) refuses when it looks like
    /// a URL (`scheme://`), with the reason.
    fn from(text: &str) -> Self {
        Location::parse(text).unwrap_or_else(|_| Location::Local(PathBuf::from(text)))
    }
}

impl From<&String> for Location {
    /// As `From<&str>`.
    fn from(text: &String) -> Self {
        Location::from(text.as_str())
    }
}

impl From<String> for Location {
    /// As `From<&str>`.
    fn from(text: String) -> Self {
        Location::from(text.as_str())
    }
}

impl From<Url> for Location {
    fn from(u: Url) -> Self {
        Location::Url(u)
    }
}

/// Whether the URL path `path` holds a `%` once decoded: an escaped one (`%25`) or one
/// that starts no escape.
fn decodes_to_percent(path: &str) -> bool {
    let b = path.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                && !b[i + 1..i + 3].eq_ignore_ascii_case(b"25"))
    })
}

/// The refusal of a location whose path holds a `%` ([`Location::dir_url`]).
fn percent_refused(shown: &str) -> Error {
    Error::Config {
        name: "location",
        reason: format!(
            "{shown:?} holds a `%`, which the Delta libraries would decode a second time \
             (`%41` read as `A`) and so open another folder's tables; nothing was read or \
             written. Rename the folder, or reach it through a link whose path has no `%`"
        ),
    }
}

/// `u` ending in `/`.
fn dir_url(u: &Url) -> Url {
    let mut u = u.clone();
    if !u.path().ends_with('/') {
        let path = format!("{}/", u.path());
        u.set_path(&path);
    }
    u
}

/// Options passed to object stores (credentials, endpoints, regions) as
/// `KEY=VALUE` pairs, with the names `object_store` and deltalake take
/// (`AWS_ENDPOINT_URL`, `AZURE_STORAGE_ACCOUNT_KEY`, `GOOGLE_SERVICE_ACCOUNT`, …). Their
/// values are never shown: `Debug` lists the keys only.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct StorageOptions(BTreeMap<String, String>);

impl std::fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl StorageOptions {
    /// Sets `key` to `value` (a later value of the same key wins).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }

    /// `KEY=VALUE` (the `--storage-option` form).
    pub fn insert_pair(&mut self, pair: &str) -> Result<()> {
        let (k, v) = pair.split_once('=').ok_or_else(|| Error::Config {
            name: "storage-option",
            reason: format!(
                "`{}` is not KEY=VALUE",
                pair.split('=').next().unwrap_or_default()
            ),
        })?;
        if k.trim().is_empty() {
            return Err(Error::Config {
                name: "storage-option",
                reason: "an option needs a key: KEY=VALUE".into(),
            });
        }
        self.insert(k.trim(), v);
        Ok(())
    }

    /// The value of `key` (compared without case; object_store and deltalake accept
    /// `AWS_REGION` and `aws_region` alike), from the options only (not the environment).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    /// Every option of `other` set here too (`other`'s value wins).
    pub(crate) fn extend(&mut self, other: StorageOptions) {
        self.0.extend(other.0);
    }

    /// The values, to rewrite in place.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut String> {
        self.0.values_mut()
    }

    /// Whether no option is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The options, for the store's builder.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    /// Every value long enough to be a secret, to be masked out of any text shown.
    fn secrets(&self) -> impl Iterator<Item = &str> {
        self.0.values().map(String::as_str).filter(|v| v.len() >= 8)
    }

    /// `text` with every option value that could be a secret (8 characters or more)
    /// replaced by `***`: for anything shown that a store may have echoed.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in self.secrets() {
            out = out.replace(secret, "***");
        }
        out
    }
}

/// Whether a listing of `url`'s store from an offset costs less than a full one and comes
/// in key order: not in S3 Express One Zone (`aws_s3_express`, or a `--x-s3` bucket),
/// whose listing has no `StartAfter` (object_store lists it whole, unsorted).
pub(crate) fn lists_from_offset(url: &Url, options: &StorageOptions) -> bool {
    if !matches!(url.scheme(), "s3" | "s3a") {
        return true;
    }
    let on = |v: &str| v.trim().eq_ignore_ascii_case("true");
    let express = options
        .get("aws_s3_express")
        .or(options.get("s3_express"))
        .is_some_and(on)
        || std::env::var("AWS_S3_EXPRESS").is_ok_and(|v| on(&v))
        || url.host_str().is_some_and(|b| b.ends_with("--x-s3"));
    !express
}

/// The object store of `url`'s bucket or container (rooted at its top, so paths are the
/// URL's path), built by deltalake's registered factory for the scheme with `options`
/// (standard environment variables fill what the options leave out).
pub(crate) fn store_for(url: &Url, options: &StorageOptions) -> Result<Arc<DynObjectStore>> {
    let mut root = url.clone();
    root.set_path("/");
    let scheme = url.scheme().to_string();
    deltalake::logstore::store_for(&root, options.pairs()).map_err(|e| Error::Store {
        location: redacted(url, options),
        reason: store_hint(&scheme, &e.to_string()),
    })
}

/// `url` as it may be shown: a password and anything an option holds masked.
pub(crate) fn redacted(url: &Url, options: &StorageOptions) -> String {
    let mut u = url.clone();
    // The user part of an `abfss://container@account…` URL is its container, shown;
    // a password (refused by `Location::parse`, but any URL may come here) is not.
    if u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
    options.mask(u.as_str())
}

/// An error from building a store, with what to do about it.
fn store_hint(scheme: &str, error: &str) -> String {
    let hint = match scheme {
        "s3" | "s3a" => {
            "set AWS_REGION and credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, or an instance role); for an S3-compatible store also AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http://)"
        }
        "abfss" | "abfs" | "az" | "azure" => {
            "set AZURE_STORAGE_ACCOUNT_NAME and a credential (AZURE_STORAGE_ACCOUNT_KEY, a SAS token, or AZURE_CLIENT_ID/AZURE_CLIENT_SECRET/AZURE_TENANT_ID)"
        }
        "gs" => "set GOOGLE_APPLICATION_CREDENTIALS (or GOOGLE_SERVICE_ACCOUNT_KEY)",
        _ => "check the location",
    };
    format!("{error}; {hint}, as environment variables or --storage-option KEY=VALUE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls_parse_and_bad_ones_say_why() {
        assert_eq!(
            Location::parse("./lake").unwrap(),
            Location::Local(PathBuf::from("./lake"))
        );
        assert_eq!(
            Location::parse("file:///tmp/lake").unwrap(),
            Location::Local(PathBuf::from("/tmp/lake"))
        );
        for ok in [
            "s3://bucket/lake",
            "s3a://bucket/lake",
            "abfss://ws@onelake.dfs.fabric.microsoft.com/lh.Lakehouse/Tables",
            "abfs://c@acct.dfs.core.windows.net/p",
            "az://container/p",
            "azure://container/p",
            "gs://bucket/p",
        ] {
            assert!(
                matches!(Location::parse(ok).unwrap(), Location::Url(_)),
                "{ok}"
            );
        }
        let err = |t: &str| crate::error::chain(&Location::parse(t).unwrap_err());
        assert!(
            err("ftp://h/p").contains("unknown scheme `ftp://`"),
            "{}",
            err("ftp://h/p")
        );
        assert!(err("ftp://h/p").contains("s3://"));
        assert!(
            err("s3:///lake").contains("no bucket"),
            "{}",
            err("s3:///lake")
        );
        assert!(err("s3://b/p?sig=x").contains("--storage-option"));
        assert!(err("s3://key:secret@b/p").contains("no password"));
        assert!(err("abfss://[x/p").contains("not a valid URL"));
    }

    #[test]
    fn option_values_never_show() {
        let mut o = StorageOptions::default();
        o.insert_pair("AWS_SECRET_ACCESS_KEY=very-secret-value")
            .unwrap();
        o.insert_pair("AWS_REGION=us-east-1").unwrap();
        assert!(o.insert_pair("novalue").is_err());
        assert!(o.insert_pair("=x").is_err());
        let shown = format!("{o:?}");
        assert!(shown.contains("AWS_SECRET_ACCESS_KEY"));
        assert!(!shown.contains("very-secret-value"), "{shown}");
        assert_eq!(o.mask("denied for very-secret-value"), "denied for ***");
        let url = Url::parse("s3://user:pw@bucket/p").unwrap();
        assert!(!redacted(&url, &o).contains("pw"));
    }
}
