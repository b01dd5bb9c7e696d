//! Table and column names: the only place that builds them.
//!
//! Every name written to storage is `[a-z0-9_]`, at most [`MAX_NAME_LEN`] bytes, so it is
//! portable across Spark, Fabric, Databricks, Polars and DuckDB and can never leave the
//! schema folder. Names starting with `_` are reserved for system tables and columns;
//! a payload that produces one is prefixed, never merged into a system column.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::error::{Error, Result};

/// Longest table or column name we write.
pub const MAX_NAME_LEN: usize = 128;

/// Separator between the parts of a flattened path (`quote__bid`).
pub const PATH_SEP: &str = "__";

/// The column holding a row's id.
pub const ID: &str = "_id";

/// The column of a child table's rows holding the `_id` of the row their array is in:
/// only child tables have it.
pub const PARENT_ID: &str = "_parent_id";

/// The column of a child table's rows holding the `_id` of the topic-table row they
/// descend from.
pub const ROOT_ID: &str = "_root_id";

/// The column of a child table's rows holding their position in their array.
pub const IDX: &str = "_idx";

/// The column holding a row's batch id.
pub const BATCH_ID: &str = "_batch_id";

/// The column holding the landing path (`<source>/<entity>`) of a row's batch folder.
pub const LANDING_PATH: &str = "_landing_path";

/// The column holding a row's topic.
pub const TOPIC: &str = "_topic";

/// The column holding the file a row's line was read from.
pub const SOURCE_FILE: &str = "_source_file";

/// The column holding the 1-based number of a row's line in its file.
pub const LINE: &str = "_line";

/// The column holding when the run that wrote a row loaded it.
pub const LOADED_AT: &str = "_loaded_at";

/// The column holding values that did not fit their column.
pub const RESCUED: &str = "_rescued_data";

/// The column of `_corrupt_records` holding a corrupt line as text.
pub const CORRUPT_RECORD: &str = "_corrupt_record";

/// System columns: payload fields can never take these names.
pub const SYSTEM_COLUMNS: &[&str] = &[
    ID,
    PARENT_ID,
    ROOT_ID,
    IDX,
    BATCH_ID,
    LANDING_PATH,
    TOPIC,
    SOURCE_FILE,
    LINE,
    LOADED_AT,
    RESCUED,
    CORRUPT_RECORD,
];

/// The column of `_corrupt_records` holding a corrupt line's bytes as read.
pub const CORRUPT_BYTES: &str = "_corrupt_bytes";

/// The column of `_corrupt_records` saying why a line could not be read as a message.
pub const REASON: &str = "_reason";

/// The staging column holding a message's metadata (the envelope's other members) as JSON
/// text.
pub const META: &str = "_meta";

/// The staging column holding a message's payload as JSON text.
pub const PAYLOAD: &str = "_payload";

/// The column of a topic's table holding the whole payload, as a `variant`, when the
/// topic's payload mode is [`crate::PayloadMode::Variant`].
pub const VARIANT_PAYLOAD: &str = "payload";

/// The column of a persisted staging table that partitions it by topic.
pub const TOPIC_HASH: &str = "_topic_hash";

/// Prefix of the per-batch staging tables.
pub const STAGING_PREFIX: &str = "_tmp_raw_load_";

/// Whether `name` is one of bronze's own tables (`_run_control`, `_corrupt_records`):
/// a topic's or child table's name never starts with `_`.
pub fn is_own_table(name: &str) -> bool {
    name.starts_with('_')
}

/// Whether `name` is a load's staging table (`_tmp_raw_load_<batch>`).
pub fn is_staging_table(name: &str) -> bool {
    name.starts_with(STAGING_PREFIX)
}

/// Table holding lines that could not be read as messages.
pub const CORRUPT_TABLE: &str = "_corrupt_records";

/// Name of the run-control table.
pub const RUN_CONTROL_TABLE: &str = "_run_control";

/// Folder of the lease files, under the schema folder.
pub const LEASE_DIR: &str = "_bronze_leases";

/// Folder of the backlog's ledgers (what each entity has loaded), under the schema folder.
pub const LEDGER_DIR: &str = "_bronze_ledger";

/// A sanitised table name, safe as one path segment.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct TableName(String);

impl TableName {
    /// The name as written to storage.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The table of one topic: the sanitised topic, prefixed with `t_` when it would start
    /// with `_` (reserved) or be empty.
    pub fn for_topic(topic: &str) -> TableName {
        TableName(user_name(&sanitize(topic), "t_"))
    }

    /// A child table named by the path of its array inside the payload, shared by every
    /// topic that has an array at that path (`currentprice`, `lines__taxes`).
    pub fn for_child(path: &[String]) -> TableName {
        let joined = path
            .iter()
            .map(|p| sanitize(p))
            .collect::<Vec<_>>()
            .join(PATH_SEP);
        TableName(user_name(&sanitize(&joined), "c_"))
    }

    /// The staging table of a batch, `_tmp_raw_load_<slug>`: the slug is the batch id
    /// (validated against `[A-Za-z0-9_-]` before it gets here) and a hash of its folders'
    /// landing paths ([`crate::batch::BatchKey::slug`]).
    pub(crate) fn staging(slug: &str) -> TableName {
        TableName(format!("{STAGING_PREFIX}{slug}"))
    }

    /// The name of an existing table as a user typed it (`bronze optimize quote`):
    /// one path segment of `[A-Za-z0-9_-]`, so it can never leave the schema folder.
    pub fn existing(name: &str) -> Result<TableName> {
        let ok = !name.is_empty()
            && name.len() <= 2 * MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(TableName(name.to_string()))
        } else {
            Err(Error::NoSuchTable {
                table: name.chars().take(2 * MAX_NAME_LEN).collect(),
            })
        }
    }

    /// A system table (`_corrupt_records`, `_run_control`).
    pub(crate) fn system(name: &'static str) -> TableName {
        TableName(name.to_string())
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Lower-cases and maps every byte outside `[a-z0-9_]` to `_`; names longer than
/// [`MAX_NAME_LEN`] are cut and suffixed with a hash of the whole, so two long names that
/// share a prefix stay apart.
pub fn sanitize(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.len() > MAX_NAME_LEN {
        let suffix = format!("_{}", &stable_id(&[raw.as_bytes()])[..12]);
        out = format!("{}{suffix}", cut(&out, MAX_NAME_LEN - suffix.len()));
    }
    out
}

/// `name` prefixed with `prefix` when it is empty or starts with `_` (reserved). A
/// prefixed name over [`MAX_NAME_LEN`] is cut and suffixed with a hash of the whole, as
/// [`sanitize`] does, so two long names that differ only at the end stay apart.
fn user_name(name: &str, prefix: &str) -> String {
    if !name.is_empty() && !name.starts_with('_') {
        return name.to_string();
    }
    let s = format!("{prefix}{name}");
    if s.len() <= MAX_NAME_LEN {
        return s;
    }
    let suffix = format!("_{}", &stable_id(&[s.as_bytes()])[..12]);
    format!("{}{suffix}", cut(&s, MAX_NAME_LEN - suffix.len()))
}

/// The longest start of `s` of at most `len` bytes that ends on a character boundary.
fn cut(s: &str, len: usize) -> &str {
    let mut end = len.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Refuses a schema name that is not a plain folder name.
pub(crate) fn validate_schema_name(schema: &str) -> Result<()> {
    let ok = !schema.is_empty()
        && schema.len() <= MAX_NAME_LEN
        && !schema.starts_with(['.', '_', ' '])
        && !schema.ends_with(' ')
        && schema
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b' ');
    if ok {
        Ok(())
    } else {
        Err(Error::Config {
            name: "schema",
            reason: format!(
                "{schema:?} is not 1 to {MAX_NAME_LEN} characters of A-Z, a-z, 0-9, `_`, `-` and inner spaces (not starting with `_` or `.`)"
            ),
        })
    }
}

/// Assigns column names to flattened paths within one table, deterministically: the first
/// path to claim a name gets it, later different paths that sanitise to the same name get
/// `_2`, `_3`, ... System column names are taken from the start.
#[derive(Debug)]
pub(crate) struct ColumnNamer {
    by_path: HashMap<String, usize>,
    taken: HashSet<String>,
    names: Vec<(String, String)>,
}

impl ColumnNamer {
    pub(crate) fn new() -> Self {
        ColumnNamer {
            by_path: HashMap::new(),
            taken: SYSTEM_COLUMNS.iter().map(|s| s.to_string()).collect(),
            names: Vec::new(),
        }
    }

    /// The column index for `path` (the original keys joined by `.`, used as the
    /// collision key and kept as the column's original name).
    pub(crate) fn column(&mut self, path: &str, proposed: &str) -> usize {
        if let Some(&i) = self.by_path.get(path) {
            return i;
        }
        let base = if proposed.is_empty() {
            "_".to_string()
        } else {
            proposed.to_string()
        };
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            // The suffix stays within the longest name: the base is cut to make room.
            let suffix = format!("_{n}");
            name = format!("{}{suffix}", cut(&base, MAX_NAME_LEN - suffix.len()));
            n += 1;
        }
        self.taken.insert(name.clone());
        let i = self.names.len();
        self.names.push((name, path.to_string()));
        self.by_path.insert(path.to_string(), i);
        i
    }

    /// `(column name, original path)` in order of first appearance.
    pub(crate) fn into_names(self) -> Vec<(String, String)> {
        self.names
    }
}

/// A stable 128-bit FNV-1a hash of the parts, as 32 hex characters. Stable across Rust
/// versions and platforms (unlike `DefaultHasher`), so derived names and ids survive
/// upgrades.
pub fn stable_id(parts: &[&[u8]]) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for part in parts {
        for &b in *part {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
        // Separator so that ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(PRIME);
    }
    format!("{h:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_collide_at_the_longest_length_stay_within_it_and_apart() {
        let mut namer = ColumnNamer::new();
        let upper = sanitize(&"A".repeat(128));
        let lower = sanitize(&"a".repeat(128));
        assert_eq!(upper, lower);
        let a = namer.column(&"A".repeat(128), &upper);
        let b = namer.column(&"a".repeat(128), &lower);
        let names = namer.into_names();
        assert_ne!(names[a].0, names[b].0);
        assert!(names.iter().all(|(n, _)| n.len() <= MAX_NAME_LEN), "{names:?}");
        // Topics prefixed because they start with `_`, differing only at the end.
        let x = TableName::for_topic(&format!("_{}x", "a".repeat(127)));
        let y = TableName::for_topic(&format!("_{}y", "a".repeat(127)));
        assert_ne!(x, y);
        assert!(x.as_str().len() <= MAX_NAME_LEN && y.as_str().len() <= MAX_NAME_LEN);
    }

    #[test]
    fn topic_names_stay_inside_the_schema_folder() {
        for hostile in [
            "../../x",
            "/etc/passwd",
            "a\\b",
            ".",
            "..",
            "_delta_log",
            "_corrupt_records",
            "",
        ] {
            let t = TableName::for_topic(hostile);
            assert!(!t.as_str().starts_with('_'), "{hostile:?} -> {t}");
            assert!(
                t.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
            assert!(!t.as_str().is_empty());
        }
        assert_eq!(TableName::for_topic("../../x").as_str(), "t_______x");
    }

    #[test]
    fn names_are_lowercase_and_bounded() {
        assert_eq!(
            TableName::for_topic("Market.Quote-V2").as_str(),
            "market_quote_v2"
        );
        let long = "x".repeat(5000);
        let a = sanitize(&long);
        let b = sanitize(&format!("{long}y"));
        assert_eq!(a.len(), MAX_NAME_LEN);
        assert_ne!(a, b);
    }

    #[test]
    fn deep_paths_stay_bounded() {
        let parts: Vec<String> = (0..40).map(|i| format!("level{i}")).collect();
        let t = TableName::for_child(&parts);
        assert!(t.as_str().len() <= MAX_NAME_LEN, "{t}");
        let mut other = parts.clone();
        other[39] = "different".into();
        assert_ne!(t, TableName::for_child(&other));
    }

    #[test]
    fn child_names_join_path_parts() {
        let p = vec!["lines".to_string(), "Taxes".to_string()];
        assert_eq!(TableName::for_child(&p).as_str(), "lines__taxes");
        assert_eq!(
            TableName::for_child(&["currentprice".into()]).as_str(),
            "currentprice"
        );
    }

    #[test]
    fn column_collisions_resolve_deterministically() {
        let mut n = ColumnNamer::new();
        assert_eq!(n.column("a.b", "a__b"), 0);
        assert_eq!(n.column("a__b", "a__b"), 1);
        assert_eq!(n.column("a.b", "a__b"), 0);
        assert_eq!(n.column("_batch_id", "_batch_id"), 2);
        let names = n.into_names();
        assert_eq!(names[0].0, "a__b");
        assert_eq!(names[1].0, "a__b_2");
        assert_eq!(names[2].0, "_batch_id_2");
    }

    #[test]
    fn stable_id_is_stable() {
        assert_eq!(stable_id(&[b"a"]), stable_id(&[b"a"]));
        assert_ne!(stable_id(&[b"ab", b"c"]), stable_id(&[b"a", b"bc"]));
        assert_eq!(stable_id(&[]).len(), 32);
        // Pinned: ids of messages without one and names derived by earlier versions
        // must come out the same.
        assert_eq!(stable_id(&[]), "6c62272e07bb014262b821756295c58d");
        assert_eq!(
            stable_id(&[b"root", b"tbl", b"items", &7u64.to_le_bytes()]),
            "89b77344b9fd29305d9fb92ca4d04e20"
        );
    }

    #[test]
    fn schema_names_are_checked() {
        assert!(validate_schema_name("bronze").is_ok());
        assert!(validate_schema_name("my bronze-raw").is_ok());
        for bad in ["", "..", "a/b", "_x", " a", "a ", "a\tb"] {
            assert!(validate_schema_name(bad).is_err(), "{bad:?}");
        }
    }
}
