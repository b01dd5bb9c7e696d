//! Settings of a run: where tables go and how envelopes are read.
//!
//! [`IngestConfig`] is plain data with documented defaults, what [`crate::Settings`]
//! resolve to; [`IngestConfig::validate`] refuses contradictory or unusable settings
//! before any I/O.

use std::path::PathBuf;

pub use crate::column_types::{ColumnType, DetectType};
use crate::error::{Error, Result};
use crate::store::location::{Location, StorageOptions};

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
    /// How a file's records are laid out: JSON Lines, one array, or values over several
    /// lines; `auto` (default) decides per file ([`crate::Format`]).
    pub format: crate::source::records::Format,
}

impl Default for EnvelopeConfig {
    fn default() -> Self {
        EnvelopeConfig {
            topic_field: "topic".into(),
            id_field: Some("message_id".into()),
            payload_field: Some("payload".into()),
            dedup_fields: None,
            format: crate::source::records::Format::Auto,
        }
    }
}

/// How leaf values get their column types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Which catalog tables are registered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetastoreKind {
    /// AWS Glue's Data Catalog.
    Glue,
    /// A Hive Metastore, over Thrift (`uri` `thrift://host:9083`).
    Hive,
    /// Unity Catalog's REST API (`uri` `https://host`, `database` `catalog.schema`).
    Unity,
}

/// The catalog the tables are registered in, and how it is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetastoreConfig {
    /// The catalog.
    pub kind: MetastoreKind,
    /// Glue's region.
    pub region: Option<String>,
    /// An endpoint serving the catalog's API instead of its own.
    pub endpoint: Option<String>,
    /// Where the catalog is: the Hive Metastore's `thrift://host:port`, Unity Catalog's
    /// URL.
    pub uri: Option<String>,
    /// The environment variable holding Unity Catalog's bearer token (the token itself is
    /// never a setting, so never shown). Default `DATABRICKS_TOKEN`.
    pub token_env: Option<String>,
    /// The database the tables go in: a template over `{source}` and `{entity}`
    /// (`bronze_{entity}`). Default: the schema's name.
    pub database: Option<String>,
    /// Each request given up after this long. Default 30 s.
    pub timeout: std::time::Duration,
    /// Whether bronze's own tables (`_run_control`, `_corrupt_records`) are registered
    /// too. Default: no.
    pub own_tables: bool,
}

impl MetastoreConfig {
    /// Refuses a catalog without what reaching it needs, or a database template naming
    /// anything but `{source}` and `{entity}`.
    fn check(&self) -> Result<()> {
        let refuse = |reason: String| {
            Err(Error::Config {
                name: "metastore",
                reason,
            })
        };
        if self.kind == MetastoreKind::Glue && self.region.as_deref().is_none_or(str::is_empty) {
            return refuse(
                "Glue needs its region: `region` of [metastore] (--metastore-region eu-west-1)"
                    .into(),
            );
        }
        if self.kind == MetastoreKind::Hive
            && !self
                .uri
                .as_deref()
                .is_some_and(|u| u.starts_with("thrift://"))
        {
            return refuse(format!(
                "a Hive Metastore needs its thrift:// uri: `uri` of [metastore] (--metastore-uri thrift://127.0.0.1:9083), not {:?}",
                self.uri.as_deref().unwrap_or_default()
            ));
        }
        if self.kind == MetastoreKind::Unity {
            if !self
                .uri
                .as_deref()
                .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://"))
            {
                return refuse(format!(
                    "Unity Catalog needs its URL: `uri` of [metastore] (--metastore-uri https://host), not {:?}",
                    self.uri.as_deref().unwrap_or_default()
                ));
            }
            if !self.database.as_deref().is_some_and(|d| d.contains('.')) {
                return refuse(
                    "Unity Catalog's database is `catalog.schema`: `database` of [metastore] (--metastore-database 'main.bronze_{entity}')"
                        .into(),
                );
            }
        }
        if let Some(t) = &self.database {
            let rest = t.replace("{source}", "").replace("{entity}", "");
            if rest.contains(['{', '}']) || rest.is_empty() && t.is_empty() {
                return refuse(format!(
                    "database {t:?}: a name, or a template over {{source}} and {{entity}} only (bronze_{{entity}})"
                ));
            }
        }
        Ok(())
    }
}

/// What a topic's payload becomes in its table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadMode {
    /// Columns, and child tables for its arrays (default).
    #[default]
    Flatten,
    /// One `payload` column of type `variant` holding it whole; no child tables.
    Variant,
}

/// How child tables (rows of nested arrays) are named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Per-topic payload modes; a topic not named is flattened ([`PayloadMode::Flatten`]).
    pub topic_payload: std::collections::BTreeMap<String, PayloadMode>,
    /// How child tables are named. Default [`ChildNaming::Path`].
    pub child_naming: ChildNaming,
    /// Explicit child table names by array path (`quotes[].currentprice` →
    /// `currentprice`); a leading `payload.` is ignored.
    pub child_tables: std::collections::BTreeMap<String, String>,
    /// Column types by payload pointer (`/amount` → `decimal(18,2)`), for every topic
    /// ([`crate::column_types`]).
    pub column_types: std::collections::BTreeMap<String, ColumnType>,
    /// Column types by payload pointer for one topic, over [`Self::column_types`].
    pub topic_column_types:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, ColumnType>>,
    /// A new string column whose every value in the batch is of one of these types gets
    /// that type (a timestamp before a date); a column a table has keeps its type.
    /// Default none.
    pub detect_types: Vec<DetectType>,
}

impl Default for FlattenConfig {
    fn default() -> Self {
        FlattenConfig {
            max_depth: 16,
            types: TypesMode::Infer,
            evolution: Evolution::Add,
            topic_evolution: Default::default(),
            topic_payload: Default::default(),
            child_naming: ChildNaming::Path,
            child_tables: Default::default(),
            column_types: Default::default(),
            topic_column_types: Default::default(),
            detect_types: Vec::new(),
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

    /// The payload mode of `topic`.
    pub fn payload_for(&self, topic: &str) -> PayloadMode {
        self.topic_payload.get(topic).copied().unwrap_or_default()
    }

    /// The type hinted for the value at `pointer` (`*` for an array's elements) in
    /// `topic`'s payloads: `variant` for the whole payload (`""`) of a topic whose payload
    /// mode is [`PayloadMode::Variant`], else the topic's own hint, else the one for every
    /// topic.
    pub fn column_type(&self, topic: &str, pointer: &str) -> Option<ColumnType> {
        if pointer.is_empty() && self.payload_for(topic) == PayloadMode::Variant {
            return Some(ColumnType::Variant);
        }
        self.topic_column_types
            .get(topic)
            .and_then(|h| h.get(pointer))
            .or_else(|| self.column_types.get(pointer))
            .copied()
    }

    /// Every hint as given (`[TOPIC:]POINTER`), with its topic and pointer.
    pub fn hints(&self) -> impl Iterator<Item = (String, Option<&str>, &str)> {
        let all = self
            .column_types
            .keys()
            .map(|p| (p.clone(), None, p.as_str()));
        let topics = self.topic_column_types.iter().flat_map(|(t, h)| {
            h.keys()
                .map(move |p| (format!("{t}:{p}"), Some(t.as_str()), p.as_str()))
        });
        all.chain(topics)
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
/// for production; the others exist so benches and tests can compare. `bronze.toml`'s
/// `lock_policy = "per_table" | "global" | "none"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockPolicy {
    /// One lock per target table: only writes to the same table wait (default).
    #[default]
    PerTable,
    /// One lock for all tables: every write waits for every other.
    Global,
    /// No lock: concurrent commits to one table rely on Delta's conflict checks alone.
    None,
}

/// How a batch's rows are grouped into Delta commits. `bronze.toml`'s
/// `commit_per = "table" | "topic"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// What `ingest --pending` does with a loaded batch whose folder changed after its load
/// (files added, changed or removed; [`crate::LandingChange`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LateFiles {
    /// Load it again as a rerun (its rows replaced by what its folder holds now), the
    /// report saying why (default). A folder whose files were only removed is reported,
    /// never reloaded: a rerun would drop the rows of the removed files.
    #[default]
    Reload,
    /// Report it (the backlog's outcome, `status`, the metrics) and leave it as loaded.
    Report,
    /// Report it as a failed batch: `--pending` exits with code 2.
    Fail,
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
    /// Topics processed at once; `Some(1)` is sequential. Default: 2 per parse thread (2
    /// to 32) on a local catalog, 32 on an object store or with an [`Self::object_store`].
    pub max_parallel: Option<usize>,
    /// Threads of the pool the library owns. Default: the machine's available parallelism.
    pub threads: Option<usize>,
    /// How payloads become columns and child tables.
    pub flatten: FlattenConfig,
    /// How writes to the same table are serialized. Default [`LockPolicy::PerTable`].
    pub lock_policy: LockPolicy,
    /// How rows are grouped into commits. Default [`CommitPer::Table`].
    pub commit_per: CommitPer,
    /// What a backlog does with a loaded batch whose folder changed after its load.
    /// Default [`LateFiles::Reload`].
    pub late_files: LateFiles,
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
    /// A Prometheus Pushgateway (`http://host:9091`) each batch run pushes its metrics to
    /// (job `bronze`, grouped by landing path; [`crate::metrics`]). A gateway that is down
    /// or slow costs a warning and at most [`crate::run::metrics::PUSH_TIMEOUT`], never the
    /// batch. Default none.
    pub metrics_push: Option<String>,
    /// The catalog the tables are registered in (`[metastore]`). Default none.
    pub metastore: Option<MetastoreConfig>,
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
            late_files: LateFiles::Reload,
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
            metrics_push: None,
            metastore: None,
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

/// Longest field name accepted for the envelope settings.
const MAX_FIELD_LEN: usize = 256;

impl IngestConfig {
    /// Refuses settings that cannot work, naming the setting and the fix.
    pub fn validate(&self) -> Result<()> {
        crate::naming::validate_schema_name(&self.schema)?;
        self.check_catalog()?;
        self.check_envelope()?;
        self.check_limits()?;
        self.check_outputs()?;
        if let Some(m) = &self.metastore {
            m.check()?;
        }
        self.check_column_types()
    }

    /// Refuses a column type hint built in code that a hint's text could not name: a
    /// pointer that is not one, or a decimal's precision or scale out of range.
    fn check_column_types(&self) -> Result<()> {
        let flatten = &self.flatten;
        let all = flatten.column_types.iter().map(|(p, t)| (p.clone(), p, t));
        let own = flatten
            .topic_column_types
            .iter()
            .flat_map(|(topic, hints)| {
                hints
                    .iter()
                    .map(move |(p, t)| (format!("{topic}:{p}"), p, t))
            });
        for (key, pointer, ty) in all.chain(own) {
            let why = match crate::column_types::check_pointer(pointer) {
                Err(e) => e,
                Ok(()) if !ty.is_valid() => {
                    "a decimal's precision is 1 to 38 and its scale 0 to the precision".into()
                }
                Ok(()) => continue,
            };
            return Err(Error::Config {
                name: "column_types",
                reason: format!("`{key}={ty}`: {why}"),
            });
        }
        // A topic whose payload is kept whole has no column a hint of it could type.
        for (topic, hints) in &flatten.topic_column_types {
            if let Some((pointer, ty)) = hints.iter().next()
                && flatten.payload_for(topic) == PayloadMode::Variant
            {
                return Err(Error::Config {
                    name: "column_types",
                    reason: format!(
                        "`{topic}:{pointer}={ty}`: topic `{topic}`'s payload is kept whole (payload mode `variant`), so no hint of it applies; drop the hint or set the topic's payload mode to `flatten`"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses a catalog URL that did not parse, given as a path, saying why.
    fn check_catalog(&self) -> Result<()> {
        if let Location::Local(path) = &self.catalog
            && let Some(text) = path.to_str().filter(|t| t.contains("://"))
        {
            // A URL that did not parse, given as a path: say why it did not.
            Location::parse(text)?;
        }
        Ok(())
    }

    /// Refuses an envelope field that is empty or too long, or one field in two roles.
    fn check_envelope(&self) -> Result<()> {
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
        self.check_dedup_fields()
    }

    /// Refuses an empty or overlong dedup field, and one listed twice: a key names each
    /// field once (a field twice would add nothing to it, and could make a key of a line
    /// of over 2 GiB longer than the 4 GiB a staged text may hold).
    fn check_dedup_fields(&self) -> Result<()> {
        let fields = self.envelope.dedup_fields.as_deref().unwrap_or_default();
        for (i, field) in fields.iter().enumerate() {
            check_field("dedup-fields", Some(field))?;
            if fields[..i].contains(field) {
                return Err(Error::Config {
                    name: "dedup-fields",
                    reason: format!("lists `{field}` twice; list each field once"),
                });
            }
        }
        Ok(())
    }

    /// Refuses no threads, no topics in parallel, a memory budget or a target file size
    /// under 1 KiB, an auto compaction trigger of no files and a flattening depth outside
    /// 1..=64.
    fn check_limits(&self) -> Result<()> {
        if self.max_parallel == Some(0) {
            return Err(Error::Config {
                name: "max_parallel",
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
                name: "memory_budget",
                reason: format!("{} bytes is below the 1 KiB minimum", self.memory_budget),
            });
        }
        if self.target_file_size < 1 << 10 {
            return Err(Error::Config {
                name: "target_file_size",
                reason: format!(
                    "{} bytes is below the 1 KiB minimum; write e.g. 128MiB",
                    self.target_file_size
                ),
            });
        }
        if self.auto_compact_min_files == 0 {
            return Err(Error::Config {
                name: "auto_compact_min_files",
                reason: "must be at least 1".into(),
            });
        }
        if !(1..=64).contains(&self.flatten.max_depth) {
            return Err(Error::Config {
                name: "max_depth",
                reason: format!("{} is outside 1..=64", self.flatten.max_depth),
            });
        }
        Ok(())
    }

    /// Refuses a metrics gateway that is not an HTTP URL and a child table mapping
    /// without a path or a table name.
    fn check_outputs(&self) -> Result<()> {
        if let Some(url) = &self.metrics_push
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(Error::Config {
                name: "metrics_push",
                reason: format!("{url:?} is not a gateway URL; write e.g. http://pushgateway:9091"),
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
    fn defaults_are_valid() {
        IngestConfig::default().validate().unwrap();
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
    fn refuses_a_dedup_field_listed_twice() {
        let mut c = IngestConfig::default();
        c.envelope.dedup_fields = Some(vec!["source".into(), "seq".into()]);
        c.validate().unwrap();
        c.envelope.dedup_fields = Some(vec!["source".into(), "seq".into(), "source".into()]);
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("dedup-fields") && err.contains("`source` twice"),
            "{err}"
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

    #[test]
    fn a_column_type_built_in_code_is_checked_as_its_text_would_be() {
        for (pointer, ty, says) in [
            (
                "/a",
                ColumnType::Decimal(40, 2),
                "`t:/a=decimal(40,2)`: a decimal's precision",
            ),
            (
                "/a",
                ColumnType::Decimal(0, 0),
                "a decimal's precision is 1 to 38",
            ),
            (
                "/a",
                ColumnType::Decimal(5, -1),
                "its scale 0 to the precision",
            ),
            (
                "/a",
                ColumnType::Decimal(5, 6),
                "its scale 0 to the precision",
            ),
            ("a", ColumnType::Int64, "\"a\" is not a JSON pointer"),
        ] {
            let mut c = IngestConfig::default();
            c.flatten
                .topic_column_types
                .entry("t".into())
                .or_default()
                .insert(pointer.into(), ty);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
            assert!(err.contains(&format!("`t:{pointer}=")), "{err}");
        }
        let mut c = IngestConfig::default();
        c.flatten
            .column_types
            .insert("/a".into(), ColumnType::Decimal(38, 38));
        c.validate().unwrap();
    }
}
