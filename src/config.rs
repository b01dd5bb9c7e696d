//! Settings of a run: where tables go and how envelopes are read.
//!
//! [`IngestConfig`] is plain data with documented defaults; [`IngestConfig::validate`]
//! refuses contradictory or unusable settings before any I/O.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::location::{Location, StorageOptions};

/// Names of the envelope fields of every line.
///
/// Real feeds vary: the topic may live in `type`, `_path` or `event_type`; the id may be
/// missing; the payload may be missing, in which case every non-envelope field of the
/// line is the payload. Every other top-level field of a line that has a payload becomes
/// a metadata column named `_meta__<field>`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnvelopeConfig {
    /// Top-level field holding the topic. Default `topic`.
    pub topic_field: String,
    /// Top-level field holding the message id, used for dedup and as the row `_id`.
    /// Default `message_id`. `None`: no dedup; `_id` is derived from file and line.
    pub id_field: Option<String>,
    /// Top-level field holding the payload. Default `payload`. `None`, or a line without
    /// that field: every non-envelope field is the payload and there is no metadata.
    pub payload_field: Option<String>,
    /// Top-level fields whose values together form the dedup key, instead of the id
    /// (`["source", "seq"]`). `None`: the id field. A line missing one of them is never
    /// a duplicate.
    pub dedup_fields: Option<Vec<String>>,
}

impl Default for EnvelopeConfig {
    fn default() -> Self {
        EnvelopeConfig {
            topic_field: "topic".into(),
            id_field: Some("message_id".into()),
            payload_field: Some("payload".into()),
            dedup_fields: None,
        }
    }
}

/// How leaf values get their column types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TypesMode {
    /// Per batch and column: all booleans → boolean, all integers → int64, integers and
    /// floats → float64, all strings → string, any other mix (or numbers beyond
    /// int64/float64) → a JSON-text string column (default).
    #[default]
    Infer,
    /// Every leaf lands as text (numbers as their literal, objects kept as JSON text): the
    /// all-string bronze some teams prefer.
    Strings,
}

/// What happens to a field that has no column in an existing table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evolution {
    /// Add the column in the same commit (default).
    #[default]
    Add,
    /// Keep the schema; the new field's values go to `_rescued_data`.
    Rescue,
    /// Fail the topic's write to that table with an error naming the new fields.
    Fail,
}

/// How child tables (rows of nested arrays) are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChildNaming {
    /// By the array's path in the payload, shared by every topic with an array at that
    /// path (`currentprice`) (default).
    #[default]
    Path,
    /// Qualified by the topic (`quote__currentprice`).
    Topic,
}

/// Flattening settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlattenConfig {
    /// Nesting depth to which objects are flattened; deeper sub-trees are kept as JSON
    /// text. Default 16.
    pub max_depth: usize,
    /// How column types are chosen. Default [`TypesMode::Infer`].
    pub types: TypesMode,
    /// Evolution mode for topics without their own. Default [`Evolution::Add`].
    pub evolution: Evolution,
    /// Per-topic evolution modes.
    pub topic_evolution: std::collections::BTreeMap<String, Evolution>,
    /// How child tables are named. Default [`ChildNaming::Path`].
    pub child_naming: ChildNaming,
    /// Explicit child table names by array path (`quotes[].currentprice` →
    /// `currentprice`); a leading `payload.` is ignored.
    pub child_tables: std::collections::BTreeMap<String, String>,
}

impl Default for FlattenConfig {
    fn default() -> Self {
        FlattenConfig {
            max_depth: 16,
            types: TypesMode::Infer,
            evolution: Evolution::Add,
            topic_evolution: Default::default(),
            child_naming: ChildNaming::Path,
            child_tables: Default::default(),
        }
    }
}

impl FlattenConfig {
    /// The evolution mode of `topic`.
    pub fn evolution_for(&self, topic: &str) -> Evolution {
        self.topic_evolution
            .get(topic)
            .copied()
            .unwrap_or(self.evolution)
    }

    /// The explicit child table for an array path, if configured.
    pub(crate) fn mapped_child(&self, origin: &str) -> Option<&str> {
        self.child_tables
            .iter()
            .find(|(k, _)| k.strip_prefix("payload.").unwrap_or(k) == origin)
            .map(|(_, v)| v.as_str())
    }
}

/// How writes to the same table are serialized. Only [`LockPolicy::PerTable`] is meant
/// for production; the others exist so benches and tests can compare.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockPolicy {
    /// One lock per target table: only writes to the same table wait (default).
    #[default]
    PerTable,
    /// One lock for all tables: every write waits for every other.
    Global,
    /// No lock: concurrent commits to one table rely on Delta's conflict checks alone.
    None,
}

/// How a batch's rows are grouped into Delta commits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommitPer {
    /// One commit per table per batch (default): topics are flattened in parallel, then
    /// every table is written once with all of its topics' rows (one file when small),
    /// tables in parallel.
    #[default]
    Table,
    /// One commit per (topic, table), as a notebook looping over topics does: parallel topic tasks
    /// write their own tables, serialized per table by the lock map. More commits and
    /// files; kept to compare, and to exercise the locks.
    Topic,
}

/// Everything a run needs; the CLI builds one from its flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IngestConfig {
    /// Root of the lakehouse: a local folder or an object store URL (`s3://…`,
    /// `abfss://…`, `gs://…`; [`Location::parse`]). Default `./lakehouse`.
    pub catalog: Location,
    /// Options for the object stores of the catalog and the landing folders
    /// (credentials, endpoints, regions), over the standard environment variables.
    pub storage_options: StorageOptions,
    /// Schema (folder under the catalog) holding the bronze tables. Default `bronze`.
    pub schema: String,
    /// Batch id to use instead of the one in the folder name `batch_id=<id>`.
    pub batch_id: Option<String>,
    /// Landing path (`<source>/<entity>`) of the batch folder, instead of the names of
    /// the two folders above it; one folder runs only.
    pub landing_path: Option<String>,
    /// Envelope field names.
    pub envelope: EnvelopeConfig,
    /// Topics processed at once; `Some(1)` is sequential. Default: 4 per thread (at most
    /// 32) on a local catalog, 32 with an [`Self::object_store`].
    pub max_parallel: Option<usize>,
    /// Threads of the pool the library owns. Default: the machine's available parallelism.
    pub threads: Option<usize>,
    /// How payloads become columns and child tables.
    pub flatten: FlattenConfig,
    /// How writes to the same table are serialized. Default [`LockPolicy::PerTable`].
    pub lock_policy: LockPolicy,
    /// How rows are grouped into commits. Default [`CommitPer::Table`].
    pub commit_per: CommitPer,
    /// Target size of the data files a write produces (optimize write). Default 128 MiB.
    pub target_file_size: u64,
    /// Parquet compression of the data files. Default snappy (the fastest to write and
    /// read of those measured; BENCHMARKS.md).
    pub compression: parquet::basic::Compression,
    /// Compact a table after a commit when it has `auto_compact_min_files` files under
    /// half the target size, unless the table sets `delta.autoOptimize.autoCompact=false`.
    /// Default `true`.
    pub auto_compact: bool,
    /// Small files that trigger auto compaction. Default 50 (Databricks' `minNumFiles`).
    pub auto_compact_min_files: u64,
    /// Persist the staging table `_tmp_raw_load_<batch_id>_<hash>` even when the batch fits in
    /// memory (so a crashed run can resume from it). Default `false`.
    pub persist_staging: bool,
    /// Memory a run may use beyond the process's own (code, runtime, pools). A batch that
    /// would need more in memory (about three times its landing size) is staged in chunks
    /// of an eighth of the budget that spill to the staging table, and its topics are
    /// read back as streams and committed in slices that fit the budget. The message ids
    /// kept to drop duplicates (~35-45 bytes per message) shrink the chunks, down to a
    /// sixteenth of the budget; a batch whose ids take more than half the budget runs
    /// over it, with a warning naming the budget it needs. Default: a quarter of the
    /// machine's memory (2 GiB when it cannot be read).
    pub memory_budget: u64,
    /// Resume from a complete staging table left by an earlier run of the same batch
    /// instead of re-reading the landing files. Default `true`.
    pub resume: bool,
    /// Take the batch lease (`<schema>/_bronze_leases/<source>+<entity>+<batch_id>.json`
    /// per folder) so that two runs
    /// of one batch never load it at once. Default `true`; turn it off only when the
    /// runs are coordinated elsewhere (an orchestrator that never starts a batch twice).
    pub batch_lease: bool,
    /// Declares that one process at a time writes this catalog. Needed on an S3-compatible
    /// store without put-if-absent (conditional put disabled, or ignored by the store),
    /// which `bronze` otherwise refuses: Delta commits then go through deltalake's
    /// copy-then-delete rename (`AWS_S3_ALLOW_UNSAFE_RENAME`) and the batch lease is a
    /// plain check-then-write, so two writers at once could overwrite each other's
    /// commits and lose data. Default `false` (`--single-writer`, `single_writer` in
    /// `bronze.toml`; `AWS_S3_ALLOW_UNSAFE_RENAME=true` in the storage options says the
    /// same).
    pub single_writer: bool,
    /// How long a lease stays valid without renewal. A run renews its lease every quarter
    /// of it (a heartbeat), so a run may take any time; a lease not renewed within it
    /// (its holder was killed, its host lost) is taken over by the next run of the
    /// batch. Default 10 minutes (`lease_ttl` in `bronze.toml`, `--lease-ttl`).
    pub lease_ttl: std::time::Duration,
    /// How often a backlog in an object store lists each entity's folders in full. In
    /// between, `ingest --pending` and `status` list only the folders after the entity's
    /// last loaded batch (a constant number of requests however many were loaded before),
    /// so a folder that lands late with an older batch id is found at the next full
    /// listing. Local landing zones are always listed in full. Default 24 hours.
    pub full_listing_every: std::time::Duration,
    /// Bench baseline: every topic task re-reads the landing files, as a notebook that
    /// reads the batch once per topic does (`testing` feature only).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub reread_per_topic: bool,
    /// Simulated crash point (tests only).
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub failpoint: Option<String>,
    /// Object store rooted at `/` of the catalog's file system, used for every table
    /// instead of the default one. Default `None` (the local file system). Tests and
    /// benches wrap the local store to inject latency or faults.
    pub object_store: Option<std::sync::Arc<deltalake::logstore::object_store::DynObjectStore>>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            catalog: Location::Local(PathBuf::from("lakehouse")),
            storage_options: StorageOptions::default(),
            schema: "bronze".into(),
            batch_id: None,
            landing_path: None,
            envelope: EnvelopeConfig::default(),
            max_parallel: None,
            threads: None,
            flatten: FlattenConfig::default(),
            lock_policy: LockPolicy::PerTable,
            commit_per: CommitPer::Table,
            target_file_size: 128 << 20,
            compression: parquet::basic::Compression::SNAPPY,
            auto_compact: true,
            auto_compact_min_files: 50,
            object_store: None,
            persist_staging: false,
            memory_budget: default_memory_budget(),
            resume: true,
            batch_lease: true,
            lease_ttl: std::time::Duration::from_secs(600),
            full_listing_every: std::time::Duration::from_secs(24 * 3600),
            single_writer: false,
            #[cfg(feature = "testing")]
            reread_per_topic: false,
            #[cfg(feature = "failpoints")]
            failpoint: None,
        }
    }
}

/// A quarter of the machine's memory, from `/proc/meminfo`; 2 GiB when unknown.
pub fn default_memory_budget() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
    });
    total_kib.map_or(2 << 30, |kib| kib * 1024 / 4)
}

/// Parses a size like `512MB`, `2GiB`, `64k` or `1000` (bytes).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    (num >= 0.0 && num.is_finite()).then_some((num * mult as f64) as u64)
}

/// Parses a duration like `10m`, `90s`, `2h`, `1d` or `500ms` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let secs = |k: u64| n.checked_mul(k).map(std::time::Duration::from_secs);
    match unit.trim() {
        "ms" => Some(std::time::Duration::from_millis(n)),
        "" | "s" => secs(1),
        "m" | "min" => secs(60),
        "h" => secs(3600),
        "d" => secs(86_400),
        _ => None,
    }
}

/// The file `bronze.toml`: every setting that describes a feed rather than one run.
/// Unknown keys are an error naming them (a typo must not silently do nothing).
///
/// ```toml
/// catalog = "./lakehouse"        # or s3://…, abfss://…, gs://…
/// schema = "bronze"
/// lease_ttl = "10m"             # a batch lease not renewed within it is taken over
/// full_listing_every = "24h"    # object stores: list every entity in full this often
/// single_writer = false         # true only for a store without put-if-absent
///
/// [storage]                     # object store options; `${VAR}` from the environment
/// AWS_REGION = "eu-west-1"
/// AZURE_STORAGE_ACCOUNT_KEY = "${AZURE_KEY}"
///
/// [envelope]
/// topic_field = "topic"
/// id_field = "message_id"      # "" for none
/// payload_field = "payload"    # "" for none
/// dedup_fields = ["message_id"] # top-level fields forming the dedup key
///
/// [flatten]
/// max_depth = 16
/// types = "infer"              # or "strings"
/// evolution = "add"            # or "rescue", "fail"
/// child_naming = "path"        # or "topic"
///
/// [flatten.child_tables]
/// "payload.quotes[].currentprice" = "currentprice"
///
/// [topics."market.quote"]
/// evolution = "fail"
/// ```
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Root of the lakehouse: a folder or an object store URL.
    pub catalog: Option<String>,
    /// Object store options (`KEY = "value"`); a value may be `${ENV_VAR}`.
    pub storage: Option<std::collections::BTreeMap<String, String>>,
    /// Schema holding the bronze tables.
    pub schema: Option<String>,
    /// How long a batch lease stays valid without renewal (`10m`, `90s`, `2h`).
    pub lease_ttl: Option<String>,
    /// How often a backlog in an object store lists each entity's folders in full
    /// (`24h`, `1h`, `0s`).
    pub full_listing_every: Option<String>,
    /// One process at a time writes this catalog (see [`IngestConfig::single_writer`]).
    pub single_writer: Option<bool>,
    /// Envelope field names.
    #[serde(default)]
    pub envelope: EnvelopeFile,
    /// Flattening settings.
    #[serde(default)]
    pub flatten: FlattenFile,
    /// Per-topic settings.
    #[serde(default)]
    pub topics: std::collections::BTreeMap<String, TopicFile>,
}

/// `[envelope]` of `bronze.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeFile {
    /// See [`EnvelopeConfig::topic_field`].
    pub topic_field: Option<String>,
    /// See [`EnvelopeConfig::id_field`]; `""` for none.
    pub id_field: Option<String>,
    /// See [`EnvelopeConfig::payload_field`]; `""` for none.
    pub payload_field: Option<String>,
    /// See [`EnvelopeConfig::dedup_fields`].
    pub dedup_fields: Option<Vec<String>>,
}

/// `[flatten]` of `bronze.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlattenFile {
    /// See [`FlattenConfig::max_depth`].
    pub max_depth: Option<usize>,
    /// See [`FlattenConfig::types`].
    pub types: Option<TypesMode>,
    /// See [`FlattenConfig::evolution`].
    pub evolution: Option<Evolution>,
    /// See [`FlattenConfig::child_naming`].
    pub child_naming: Option<ChildNaming>,
    /// See [`FlattenConfig::child_tables`].
    #[serde(default)]
    pub child_tables: std::collections::BTreeMap<String, String>,
}

/// `[topics."<topic>"]` of `bronze.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicFile {
    /// This topic's evolution mode.
    pub evolution: Option<Evolution>,
}

impl ConfigFile {
    /// Reads and parses a config file; errors name the file, the line and the key.
    pub fn load(path: &std::path::Path) -> Result<ConfigFile> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            name: "config",
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::parse(&text).map_err(|e| match e {
            Error::Config { reason, .. } => Error::Config {
                name: "config",
                reason: format!("{}: {reason}", path.display()),
            },
            other => other,
        })
    }

    /// Parses the text of a config file.
    pub fn parse(text: &str) -> Result<ConfigFile> {
        toml::from_str(text).map_err(|e| Error::Config {
            name: "config",
            reason: e.to_string().trim_end().replace('\n', " "),
        })
    }

    /// Applies the file's settings over `c` (flags are applied after, and win). Fails on
    /// a catalog that is not a location or a `${VAR}` that is not set.
    pub fn apply(self, c: &mut IngestConfig) -> Result<()> {
        let non_empty = |s: String| (!s.is_empty()).then_some(s);
        if let Some(v) = self.catalog {
            c.catalog = Location::parse(&v)?;
        }
        for (key, value) in self.storage.unwrap_or_default() {
            c.storage_options.insert(key, expand_env(&value)?);
        }
        if let Some(v) = self.schema {
            c.schema = v;
        }
        if let Some(v) = self.single_writer {
            c.single_writer = v;
        }
        if let Some(v) = self.lease_ttl {
            c.lease_ttl = parse_duration(&v).ok_or_else(|| Error::Config {
                name: "lease_ttl",
                reason: format!("{v:?} is not a duration; write e.g. 10m, 90s or 2h"),
            })?;
        }
        if let Some(v) = self.full_listing_every {
            c.full_listing_every = parse_duration(&v).ok_or_else(|| Error::Config {
                name: "full_listing_every",
                reason: format!("{v:?} is not a duration; write e.g. 24h, 1h or 0s"),
            })?;
        }
        let e = self.envelope;
        if let Some(v) = e.topic_field {
            c.envelope.topic_field = v;
        }
        if let Some(v) = e.id_field {
            c.envelope.id_field = non_empty(v);
        }
        if let Some(v) = e.payload_field {
            c.envelope.payload_field = non_empty(v);
        }
        if let Some(v) = e.dedup_fields {
            c.envelope.dedup_fields = Some(v);
        }
        let f = self.flatten;
        if let Some(v) = f.max_depth {
            c.flatten.max_depth = v;
        }
        if let Some(v) = f.types {
            c.flatten.types = v;
        }
        if let Some(v) = f.evolution {
            c.flatten.evolution = v;
        }
        if let Some(v) = f.child_naming {
            c.flatten.child_naming = v;
        }
        c.flatten.child_tables.extend(f.child_tables);
        for (topic, t) in self.topics {
            if let Some(v) = t.evolution {
                c.flatten.topic_evolution.insert(topic, v);
            }
        }
        Ok(())
    }
}

/// A `[storage]` value with `${VAR}` references replaced by the environment's values.
fn expand_env(value: &str) -> Result<String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start + 2..].find('}') else {
            return Err(Error::Config {
                name: "storage",
                reason: "a `${` without its `}`".into(),
            });
        };
        let var = &rest[start + 2..start + 2 + len];
        let v = std::env::var(var).map_err(|_| Error::Config {
            name: "storage",
            reason: format!("the environment variable `{var}` it refers to is not set"),
        })?;
        out.push_str(&v);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Longest field name accepted for the envelope settings.
const MAX_FIELD_LEN: usize = 256;

impl IngestConfig {
    /// Refuses settings that cannot work, naming the setting and the fix.
    pub fn validate(&self) -> Result<()> {
        crate::naming::validate_schema_name(&self.schema)?;
        if let Location::Local(path) = &self.catalog
            && let Some(text) = path.to_str().filter(|t| t.contains("://"))
        {
            // A URL that did not parse, given as a path: say why it did not.
            Location::parse(text)?;
        }
        check_field("topic-field", Some(&self.envelope.topic_field))?;
        check_field("id-field", self.envelope.id_field.as_ref())?;
        check_field("payload-field", self.envelope.payload_field.as_ref())?;
        let env = &self.envelope;
        let names = [
            Some(&env.topic_field),
            env.id_field.as_ref(),
            env.payload_field.as_ref(),
        ];
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                if let (Some(a), Some(b)) = (a, b)
                    && a == b
                {
                    return Err(Error::Config {
                        name: "envelope",
                        reason: format!("field `{a}` is used for two envelope roles"),
                    });
                }
            }
        }
        if self.max_parallel == Some(0) {
            return Err(Error::Config {
                name: "max-parallel",
                reason: "must be at least 1".into(),
            });
        }
        if self.threads == Some(0) {
            return Err(Error::Config {
                name: "threads",
                reason: "must be at least 1".into(),
            });
        }
        if self.memory_budget < 1 << 10 {
            return Err(Error::Config {
                name: "memory-budget",
                reason: format!("{} bytes is below the 1 KiB minimum", self.memory_budget),
            });
        }
        if !(1..=64).contains(&self.flatten.max_depth) {
            return Err(Error::Config {
                name: "max-depth",
                reason: format!("{} is outside 1..=64", self.flatten.max_depth),
            });
        }
        for (path, table) in &self.flatten.child_tables {
            if path.is_empty() || crate::naming::sanitize(table).is_empty() {
                return Err(Error::Config {
                    name: "child_tables",
                    reason: format!("mapping {path:?} -> {table:?} needs a path and a table name"),
                });
            }
        }
        Ok(())
    }
}

fn check_field(name: &'static str, value: Option<&String>) -> Result<()> {
    match value {
        Some(v) if v.is_empty() => Err(Error::Config {
            name,
            reason: "is empty; omit the field instead".into(),
        }),
        Some(v) if v.len() > MAX_FIELD_LEN => Err(Error::Config {
            name,
            reason: format!("is longer than {MAX_FIELD_LEN} bytes"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_values_take_environment_variables_and_an_unset_one_is_named() {
        let home = std::env::var("HOME").expect("HOME is set");
        let f = ConfigFile::parse(
            "catalog = \"s3://lake/lakehouse\"\n[storage]\nAWS_REGION = \"eu-west-1\"\nAWS_PROFILE = \"p-${HOME}-q\"\n",
        )
        .unwrap();
        let mut c = IngestConfig::default();
        f.apply(&mut c).unwrap();
        assert!(matches!(c.catalog, Location::Url(_)));
        let mut want = StorageOptions::default();
        want.insert("AWS_REGION", "eu-west-1");
        want.insert("AWS_PROFILE", format!("p-{home}-q"));
        assert_eq!(c.storage_options, want);
        let f =
            ConfigFile::parse("[storage]\nKEY = \"${BRONZE_TEST_SURELY_UNSET_7F3A}\"\n").unwrap();
        let err = crate::error::chain(&f.apply(&mut IngestConfig::default()).unwrap_err());
        assert!(err.contains("BRONZE_TEST_SURELY_UNSET_7F3A"), "{err}");
        let f = ConfigFile::parse("catalog = \"ftp://x/y\"\n").unwrap();
        assert!(f.apply(&mut IngestConfig::default()).is_err());
    }

    #[test]
    fn defaults_are_valid() {
        IngestConfig::default().validate().unwrap();
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512MB"), Some(512 << 20));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1.5k"), Some(1536));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size(""), None);
        assert!(default_memory_budget() >= 1 << 20);
    }

    #[test]
    fn config_file_sets_everything_and_names_unknown_keys() {
        let f = ConfigFile::parse(
            r#"
schema = "raw"
[envelope]
topic_field = "type"
id_field = ""
dedup_fields = ["source", "seq"]
[flatten]
max_depth = 4
types = "strings"
evolution = "rescue"
child_naming = "topic"
[flatten.child_tables]
"payload.quotes[].currentprice" = "currentprice"
[topics."market.quote"]
evolution = "fail"
"#,
        )
        .unwrap();
        let mut c = IngestConfig::default();
        f.apply(&mut c).unwrap();
        c.validate().unwrap();
        assert_eq!(c.schema, "raw");
        assert_eq!(c.envelope.topic_field, "type");
        assert_eq!(c.envelope.id_field, None);
        assert_eq!(
            c.envelope.dedup_fields,
            Some(vec!["source".to_string(), "seq".to_string()])
        );
        assert_eq!(c.flatten.max_depth, 4);
        assert_eq!(c.flatten.types, TypesMode::Strings);
        assert_eq!(c.flatten.evolution_for("other"), Evolution::Rescue);
        assert_eq!(c.flatten.evolution_for("market.quote"), Evolution::Fail);
        assert_eq!(c.flatten.child_naming, ChildNaming::Topic);
        assert_eq!(
            c.flatten.mapped_child("quotes[].currentprice"),
            Some("currentprice")
        );
        for (bad, key) in [
            ("shema = \"x\"", "shema"),
            ("[flatten]\nevolutoin = \"add\"", "evolutoin"),
            ("[topics.q]\ntypes = \"strings\"", "types"),
            ("[flatten]\nevolution = \"sometimes\"", "sometimes"),
        ] {
            let err = ConfigFile::parse(bad).unwrap_err().to_string();
            assert!(err.contains(key), "{bad:?}: {err}");
        }
    }

    #[test]
    fn refuses_same_field_twice() {
        let mut c = IngestConfig::default();
        c.envelope.id_field = Some("topic".into());
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("two envelope roles")
        );
    }

    #[test]
    fn refuses_zero_parallel_and_bad_schema() {
        let c = IngestConfig {
            max_parallel: Some(0),
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let c = IngestConfig {
            schema: "../etc".into(),
            ..Default::default()
        };
        assert!(c.validate().is_err());
    }
}
