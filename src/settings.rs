//! Every setting of a run, under one name.
//!
//! `bronze.toml`, the CLI's flags and Python's keyword arguments all become a
//! [`Settings`]: the file as TOML, Python's arguments as JSON with the file's keys, the
//! flags by name. Layers override each other key by key ([`Settings::over`]: flags over
//! the file, keyword arguments over a `config=`), and [`Settings::resolve`] turns the
//! result into the [`IngestConfig`] of a run, with one validation. A value a layer cannot
//! take is refused with one text whichever layer gave it (`"soon" is not a duration;
//! write e.g. 10m, 90s or 2h`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::column_types::{ColumnType, DetectType};
use crate::config::{ChildNaming, CommitPer, Evolution, IngestConfig, LockPolicy, TypesMode};
use crate::error::{Error, Result};
use crate::store::location::{Location, StorageOptions};

/// The settings of a run as `bronze.toml` spells them; an unset key keeps the default
/// (or the value of the layer below). Unknown keys are an error naming them: a typo must
/// not silently do nothing.
///
/// Every setting of [`IngestConfig`] has a key but [`IngestConfig::object_store`]: a store
/// built in code (to wrap one, or inject latency in a bench) is not text a file could
/// hold, so it is set with [`crate::IngestBuilder::with_object_store`] only.
///
/// ```toml
/// catalog = "./lakehouse"        # or s3://…, abfss://…, gs://…
/// schema = "bronze"
/// max_parallel = 8              # topics at once (default: 2 per core locally, 32 in a store)
/// threads = 4                   # parsing threads (default: every core)
/// memory_budget = "2GiB"        # default: a quarter of the machine's memory
/// persist_staging = false       # keep the staging table even when the batch fits in memory
/// resume = true                 # resume from a complete staging table of an earlier run
/// lease_ttl = "10m"             # a batch lease not renewed within it is taken over
/// full_listing_every = "24h"    # object stores: list every entity in full this often
/// single_writer = false         # true only for a store without put-if-absent
/// target_file_size = "128MiB"  # data files a write aims at
/// compression = "snappy"        # or "lz4_raw", "zstd", "zstd(3)", "gzip", "uncompressed"
/// auto_compact = true           # compact a table's small files after a commit
/// auto_compact_min_files = 50   # small files (under half the target) that trigger it
/// batch_lease = true            # false only when runs are coordinated elsewhere
/// lock_policy = "per_table"     # or "global", "none" (to compare)
/// commit_per = "table"          # or "topic": a commit per topic and table (to compare)
/// format = "auto"               # or "lines", "array", "stream": how files hold records
/// late_files = "reload"         # or "report", "fail": a loaded batch's folder changed
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
/// detect_types = ["timestamp", "date"] # string columns of timestamps or dates typed
///
/// [flatten.child_tables]
/// "payload.quotes[].currentprice" = "currentprice"
///
/// [flatten.column_types]       # payload pointer = type, for every topic
/// "/amount" = "decimal(18,2)"
/// "/currentprice/*/ts" = "timestamp"
///
/// [topics."market.quote"]
/// evolution = "fail"
///
/// [topics."market.event"]
/// payload = "variant"          # the whole payload in one VARIANT column
///
/// [topics."market.quote".column_types]
/// "/placed_at" = "timestamp"
///
/// [metrics]
/// push_url = "http://pushgateway:9091" # each batch run's metrics (--metrics-push)
///
/// [metastore]                  # the catalog tables are registered in
/// kind = "glue"
/// region = "eu-west-1"
/// endpoint = "http://127.0.0.1:5000" # an endpoint serving Glue's API
/// database = "bronze_{entity}"
/// timeout = "30s"
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Root of the lakehouse: a folder or an object store URL ([`IngestConfig::catalog`]).
    pub catalog: Option<String>,
    /// Object store options (`KEY = "value"`); a value may be `${ENV_VAR}`
    /// ([`IngestConfig::storage_options`]). Python's `storage_options=`.
    #[serde(alias = "storage_options")]
    pub storage: StorageOptions,
    /// Schema holding the bronze tables ([`IngestConfig::schema`]).
    pub schema: Option<String>,
    /// Batch id instead of the folder's ([`IngestConfig::batch_id`]).
    pub batch_id: Option<String>,
    /// Landing path instead of the folders' ([`IngestConfig::landing_path`]).
    pub landing_path: Option<String>,
    /// Topics processed at once ([`IngestConfig::max_parallel`]).
    pub max_parallel: Option<usize>,
    /// Threads of the run's pool ([`IngestConfig::threads`]).
    pub threads: Option<usize>,
    /// Memory a run may use, bytes or a size (`512MB`) ([`IngestConfig::memory_budget`]).
    pub memory_budget: Option<Size>,
    /// Persist the staging table ([`IngestConfig::persist_staging`]).
    pub persist_staging: Option<bool>,
    /// Resume from a complete staging table ([`IngestConfig::resume`]).
    pub resume: Option<bool>,
    /// How long a batch lease stays valid without renewal, seconds or a duration (`10m`)
    /// ([`IngestConfig::lease_ttl`]).
    pub lease_ttl: Option<Duration>,
    /// How often a backlog in an object store lists each entity's folders in full
    /// ([`IngestConfig::full_listing_every`]).
    pub full_listing_every: Option<Duration>,
    /// One process at a time writes this catalog ([`IngestConfig::single_writer`]).
    pub single_writer: Option<bool>,
    /// Target size of the data files a write produces, bytes or a size (`128MiB`)
    /// ([`IngestConfig::target_file_size`]).
    pub target_file_size: Option<Size>,
    /// Parquet compression of the data files ([`Codec`], [`IngestConfig::compression`]).
    pub compression: Option<Codec>,
    /// Compact a table's small files after a commit ([`IngestConfig::auto_compact`]).
    pub auto_compact: Option<bool>,
    /// Small files that trigger auto compaction ([`IngestConfig::auto_compact_min_files`]).
    pub auto_compact_min_files: Option<u64>,
    /// Take the batch lease ([`IngestConfig::batch_lease`]).
    pub batch_lease: Option<bool>,
    /// How writes to one table are serialized ([`IngestConfig::lock_policy`]).
    pub lock_policy: Option<LockPolicy>,
    /// How a batch's rows are grouped into commits ([`IngestConfig::commit_per`]).
    pub commit_per: Option<CommitPer>,
    /// How a landing file's records are laid out ([`crate::EnvelopeConfig::format`]).
    pub format: Option<crate::Format>,
    /// What a backlog does with a batch whose folder changed after its load
    /// ([`IngestConfig::late_files`]).
    pub late_files: Option<crate::LateFiles>,
    /// `[envelope]`: the envelope's field names.
    pub envelope: EnvelopeSettings,
    /// `[flatten]`: how payloads become columns and child tables.
    pub flatten: FlattenSettings,
    /// `[topics."<topic>"]`: settings of one topic.
    pub topics: BTreeMap<String, TopicSettings>,
    /// `[metrics]`: where each batch run's metrics go.
    pub metrics: MetricsSettings,
    /// `[metastore]`: the catalog the tables are registered in.
    pub metastore: MetastoreSettings,
}

/// `[metastore]` of [`Settings`] ([`crate::config::MetastoreConfig`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetastoreSettings {
    /// `glue`, `hive` or `unity`.
    pub kind: Option<crate::config::MetastoreKind>,
    /// Glue's region.
    pub region: Option<String>,
    /// An endpoint serving the catalog's API.
    pub endpoint: Option<String>,
    /// The Hive Metastore's `thrift://host:port`, Unity Catalog's URL.
    pub uri: Option<String>,
    /// The environment variable holding Unity Catalog's token.
    pub token_env: Option<String>,
    /// The database, a template over `{source}` and `{entity}`.
    pub database: Option<String>,
    /// Each request given up after this long.
    pub timeout: Option<Duration>,
    /// Whether bronze's own tables are registered too.
    pub own_tables: Option<bool>,
}

impl MetastoreSettings {
    /// Sets `[metastore]` on `c`; a key given without `kind` is refused.
    fn apply(self, c: &mut IngestConfig) -> Result<()> {
        let Some(kind) = self.kind else {
            return match self == MetastoreSettings::default() {
                true => Ok(()),
                false => Err(Error::Config {
                    name: "metastore",
                    reason: "[metastore] without `kind` (glue, hive, unity): say which catalog"
                        .into(),
                }),
            };
        };
        c.metastore = Some(crate::config::MetastoreConfig {
            kind,
            region: self.region,
            endpoint: self.endpoint,
            uri: self.uri,
            token_env: self.token_env,
            database: self.database,
            timeout: self
                .timeout
                .map_or(std::time::Duration::from_secs(30), |d| d.0),
            own_tables: self.own_tables.unwrap_or(false),
        });
        Ok(())
    }
}

/// `[metrics]` of [`Settings`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// The Pushgateway each batch run pushes to ([`IngestConfig::metrics_push`]).
    pub push_url: Option<String>,
}

/// `[envelope]` of [`Settings`] ([`crate::EnvelopeConfig`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvelopeSettings {
    /// See [`crate::EnvelopeConfig::topic_field`].
    pub topic_field: Option<String>,
    /// See [`crate::EnvelopeConfig::id_field`]; `""` for none.
    pub id_field: Option<String>,
    /// See [`crate::EnvelopeConfig::payload_field`]; `""` for none.
    pub payload_field: Option<String>,
    /// See [`crate::EnvelopeConfig::dedup_fields`].
    pub dedup_fields: Option<Vec<String>>,
}

/// `[flatten]` of [`Settings`] ([`crate::FlattenConfig`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlattenSettings {
    /// See [`crate::FlattenConfig::max_depth`].
    pub max_depth: Option<usize>,
    /// See [`crate::FlattenConfig::types`].
    pub types: Option<TypesMode>,
    /// See [`crate::FlattenConfig::evolution`].
    pub evolution: Option<Evolution>,
    /// See [`crate::FlattenConfig::child_naming`].
    pub child_naming: Option<ChildNaming>,
    /// See [`crate::FlattenConfig::child_tables`].
    pub child_tables: BTreeMap<String, String>,
    /// Column types by payload pointer (`"/amount" = "decimal(18,2)"`), a key
    /// `"<topic>:<pointer>"` for one topic ([`crate::FlattenConfig::column_types`]).
    pub column_types: BTreeMap<String, ColumnType>,
    /// See [`crate::FlattenConfig::detect_types`].
    pub detect_types: Option<Vec<DetectType>>,
}

/// `[topics."<topic>"]` of [`Settings`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicSettings {
    /// This topic's evolution mode ([`crate::FlattenConfig::topic_evolution`]).
    pub evolution: Option<Evolution>,
    /// This topic's payload mode: `flatten` or `variant`
    /// ([`crate::FlattenConfig::topic_payload`]).
    pub payload: Option<crate::config::PayloadMode>,
    /// This topic's column types by payload pointer
    /// ([`crate::FlattenConfig::topic_column_types`]).
    pub column_types: BTreeMap<String, ColumnType>,
}

impl Settings {
    /// Reads `bronze.toml` (or another settings file); errors name the file, the line and
    /// the key.
    pub fn load(path: &Path) -> Result<Settings> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config {
            name: "config",
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::from_toml(&text).map_err(|e| match e {
            Error::Config { reason, .. } => Error::Config {
                name: "config",
                reason: format!("{}: {reason}", path.display()),
            },
            other => other,
        })
    }

    /// Parses the text of a settings file, with `${VAR}` in `[storage]` values replaced by
    /// the environment's values ([`Settings::with_env`]).
    pub fn from_toml(text: &str) -> Result<Settings> {
        let settings: Settings = toml::from_str(text).map_err(|e| Error::Config {
            name: "config",
            reason: e.to_string().trim_end().replace('\n', " "),
        })?;
        settings.with_env()
    }

    /// These settings with every `${VAR}` of a `[storage]` value replaced by the
    /// environment's value, as a settings file (or Python's `config=` dict) means them;
    /// fails naming a variable that is not set.
    pub fn with_env(mut self) -> Result<Settings> {
        for value in self.storage.values_mut() {
            *value = expand_env(value)?;
        }
        Ok(self)
    }

    /// Parses settings given as JSON with the file's keys (Python's keyword arguments, a
    /// `config=` dict); errors name the key (`flatten.max_depth`).
    pub fn from_json(value: serde_json::Value) -> Result<Settings> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            // An unknown key is refused before it is a path segment: the path is the root.
            let key = match e.path().to_string() {
                root if root == "." => "settings".to_string(),
                key => key,
            };
            Error::Setting {
                key,
                reason: e.into_inner().to_string(),
            }
        })
    }

    /// These settings over `base`: every key set here wins, every key unset here keeps
    /// `base`'s value (tables such as `[storage]` merge key by key).
    pub fn over(self, base: Settings) -> Settings {
        let mut merged = to_json(&base);
        merge(&mut merged, to_json(&self));
        serde_json::from_value(merged).expect("two valid settings merge into valid settings")
    }

    /// The keys these settings leave as [`Settings::default`] has them, as dotted paths
    /// (`flatten.max_depth`; a table with no entry, such as `storage`, by its name): what
    /// a layer does not set. Empty when every setting is given.
    #[doc(hidden)]
    pub fn unset_keys(&self) -> Vec<String> {
        let mut unset = Vec::new();
        unset_leaves(
            &to_json(self),
            &to_json(&Settings::default()),
            "",
            &mut unset,
        );
        unset
    }

    /// The run's configuration: the defaults with these settings applied, validated.
    /// Fails on a catalog that is not a location or a value out of range
    /// ([`IngestConfig::validate`]).
    pub fn resolve(self) -> Result<IngestConfig> {
        let mut c = IngestConfig::default();
        self.apply(&mut c)?;
        c.validate()?;
        Ok(c)
    }

    /// Sets every key these settings give on `c`.
    fn apply(self, c: &mut IngestConfig) -> Result<()> {
        if let Some(v) = self.catalog {
            c.catalog = Location::parse(&v)?;
        }
        c.storage_options.extend(self.storage);
        set(&mut c.schema, self.schema);
        c.batch_id = self.batch_id.or(c.batch_id.take());
        c.landing_path = self.landing_path.or(c.landing_path.take());
        c.max_parallel = self.max_parallel.or(c.max_parallel);
        c.threads = self.threads.or(c.threads);
        set(&mut c.memory_budget, self.memory_budget.map(|s| s.0));
        set(&mut c.persist_staging, self.persist_staging);
        set(&mut c.resume, self.resume);
        set(&mut c.lease_ttl, self.lease_ttl.map(|d| d.0));
        set(
            &mut c.full_listing_every,
            self.full_listing_every.map(|d| d.0),
        );
        set(&mut c.single_writer, self.single_writer);
        set(&mut c.target_file_size, self.target_file_size.map(|s| s.0));
        set(&mut c.compression, self.compression.map(Codec::compression));
        set(&mut c.auto_compact, self.auto_compact);
        set(&mut c.auto_compact_min_files, self.auto_compact_min_files);
        set(&mut c.batch_lease, self.batch_lease);
        set(&mut c.lock_policy, self.lock_policy);
        set(&mut c.commit_per, self.commit_per);
        set(&mut c.envelope.format, self.format);
        set(&mut c.late_files, self.late_files);
        self.envelope.apply(&mut c.envelope);
        self.flatten.apply(&mut c.flatten)?;
        c.metrics_push = self.metrics.push_url.or(c.metrics_push.take());
        self.metastore.apply(c)?;
        for (topic, t) in self.topics {
            t.apply(topic, &mut c.flatten)?;
        }
        Ok(())
    }
}

impl EnvelopeSettings {
    /// Sets every key of `[envelope]` these settings give on `c`; an empty id or payload
    /// field unsets it.
    fn apply(self, c: &mut crate::config::EnvelopeConfig) {
        let non_empty = |s: String| (!s.is_empty()).then_some(s);
        set(&mut c.topic_field, self.topic_field);
        if let Some(v) = self.id_field {
            c.id_field = non_empty(v);
        }
        if let Some(v) = self.payload_field {
            c.payload_field = non_empty(v);
        }
        c.dedup_fields = self.dedup_fields.or(c.dedup_fields.take());
    }
}

impl FlattenSettings {
    /// Sets every key of `[flatten]` these settings give on `c`.
    fn apply(self, c: &mut crate::config::FlattenConfig) -> Result<()> {
        set(&mut c.max_depth, self.max_depth);
        set(&mut c.types, self.types);
        set(&mut c.evolution, self.evolution);
        set(&mut c.child_naming, self.child_naming);
        c.child_tables.extend(self.child_tables);
        set(&mut c.detect_types, self.detect_types);
        for (key, ty) in self.column_types {
            let (topic, pointer) = crate::column_types::split_key(&key);
            let topic = topic.map(str::to_string);
            hint(c, topic, pointer, ty)?;
        }
        Ok(())
    }
}

impl TopicSettings {
    /// Sets every key of `[topics."<topic>"]` these settings give on `c`.
    fn apply(self, topic: String, c: &mut crate::config::FlattenConfig) -> Result<()> {
        if let Some(v) = self.evolution {
            c.topic_evolution.insert(topic.clone(), v);
        }
        if let Some(v) = self.payload {
            c.topic_payload.insert(topic.clone(), v);
        }
        for (pointer, ty) in self.column_types {
            hint(c, Some(topic.clone()), &pointer, ty)?;
        }
        Ok(())
    }
}

/// Sets the hint `pointer` → `ty` (of `topic`, or of every topic); refuses a pointer that
/// is not one, naming the hint.
fn hint(
    c: &mut crate::config::FlattenConfig,
    topic: Option<String>,
    pointer: &str,
    ty: ColumnType,
) -> Result<()> {
    let key = topic
        .as_deref()
        .map_or(pointer.to_string(), |t| format!("{t}:{pointer}"));
    let named = |reason: String| Error::Config {
        name: "column_types",
        reason: format!("`{key}={ty}`: {reason}"),
    };
    crate::column_types::check_pointer(pointer).map_err(named)?;
    let hints = match topic {
        Some(t) if t.is_empty() => return Err(named("the topic before `:` is empty".into())),
        Some(t) => c.topic_column_types.entry(t).or_default(),
        None => &mut c.column_types,
    };
    hints.insert(pointer.to_string(), ty);
    Ok(())
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn to_json(settings: &Settings) -> serde_json::Value {
    serde_json::to_value(settings).expect("settings are plain data")
}

/// The paths under `path` where `value` is `default`'s value (a missing key is null),
/// an empty table counting as one leaf.
fn unset_leaves(
    value: &serde_json::Value,
    default: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (value, default) {
        (Value::Object(v), Value::Object(d)) if !v.is_empty() => {
            for (key, v) in v {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                unset_leaves(v, d.get(key).unwrap_or(&Value::Null), &path, out);
            }
        }
        (v, d) if v == d => out.push(path.to_string()),
        _ => {}
    }
}

/// `over` merged into `base`: objects key by key, a null (an unset key) keeps `base`'s.
fn merge(base: &mut serde_json::Value, over: serde_json::Value) {
    use serde_json::Value;
    match (base, over) {
        (_, Value::Null) => {}
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o,
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

/// A duration setting: a number of seconds, or text such as `10m`, `90s`, `2h`, `1d`,
/// `500ms` ([`parse_duration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// `secs` seconds; refused, with the one text for a bad number of seconds, when
    /// negative or not finite.
    pub fn from_secs_f64(secs: f64) -> std::result::Result<Duration, String> {
        std::time::Duration::try_from_secs_f64(secs)
            .map(Duration)
            .map_err(|_| format!("{secs} seconds is not a duration; give seconds >= 0 or e.g. 10m"))
    }
}

impl std::str::FromStr for Duration {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        parse_duration(s)
            .map(Duration)
            .ok_or_else(|| format!("{s:?} is not a duration; write e.g. 10m, 90s or 2h"))
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_f64(self.0.as_secs_f64())
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Duration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration (seconds, or text such as 10m, 90s or 2h)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Duration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Duration, E> {
                Ok(Duration(std::time::Duration::from_secs(v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Duration, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => self.visit_f64(v as f64),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Duration, E> {
                Duration::from_secs_f64(v).map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A size setting: a number of bytes, or text such as `512MB`, `2GiB`, `64k`
/// ([`parse_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl std::str::FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        parse_size(s)
            .map(Size)
            .ok_or_else(|| format!("{s:?} is not a size; write e.g. 512MB or 2GiB"))
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Size;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a size (bytes, or text such as 512MB or 2GiB)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Size, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Size, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => self.visit_str(&v.to_string()),
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The Parquet compression of the data files a run writes: `snappy` (the default),
/// `lz4_raw`, `zstd` (level 1) or `zstd(N)` (N from 1 to 22), `gzip` (level 6) or
/// `uncompressed`. Snappy is the fastest to write and read of those measured, zstd(1)
/// makes files about 40 % smaller for twice the encode time, and older Spark and Hive
/// readers lack LZ4_RAW (BENCHMARKS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codec(parquet::basic::Compression);

impl Codec {
    /// The compression data files are written with ([`IngestConfig::compression`]).
    pub fn compression(self) -> parquet::basic::Compression {
        self.0
    }
}

impl std::str::FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        use parquet::basic::{Compression as C, GzipLevel, ZstdLevel};
        let bad = |why: &str| {
            format!(
                "{s:?} is not a compression{why}; write snappy, lz4_raw, zstd, zstd(3), gzip or uncompressed"
            )
        };
        let codec = match s.trim().to_ascii_lowercase().as_str() {
            "snappy" => C::SNAPPY,
            "lz4_raw" => C::LZ4_RAW,
            "zstd" => C::ZSTD(ZstdLevel::default()),
            "gzip" => C::GZIP(GzipLevel::default()),
            "uncompressed" => C::UNCOMPRESSED,
            other => {
                let level = other
                    .strip_prefix("zstd(")
                    .and_then(|l| l.strip_suffix(')'))
                    .ok_or_else(|| bad(""))?;
                let level = level
                    .trim()
                    .parse()
                    .ok()
                    .and_then(|l| ZstdLevel::try_new(l).ok())
                    .ok_or_else(|| bad(" (the zstd level is 1 to 22)"))?;
                C::ZSTD(level)
            }
        };
        Ok(Codec(codec))
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use parquet::basic::Compression as C;
        match self.0 {
            C::SNAPPY => f.write_str("snappy"),
            C::LZ4_RAW => f.write_str("lz4_raw"),
            C::ZSTD(level) => write!(f, "zstd({})", level.compression_level()),
            C::GZIP(_) => f.write_str("gzip"),
            C::UNCOMPRESSED => f.write_str("uncompressed"),
            other => write!(f, "{other}"),
        }
    }
}

impl Serialize for Codec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Codec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Codec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a compression (snappy, lz4_raw, zstd, zstd(3), gzip or uncompressed)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Codec, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(Visit)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::default_memory_budget;

    #[test]
    fn storage_values_take_environment_variables_and_an_unset_one_is_named() {
        let home = std::env::var("HOME").expect("HOME is set");
        let c = Settings::from_toml(
            "catalog = \"s3://lake/lakehouse\"\n[storage]\nAWS_REGION = \"eu-west-1\"\nAWS_PROFILE = \"p-${HOME}-q\"\n",
        )
        .unwrap()
        .resolve()
        .unwrap();
        assert!(matches!(c.catalog, Location::Url(_)));
        let mut want = StorageOptions::default();
        want.insert("AWS_REGION", "eu-west-1");
        want.insert("AWS_PROFILE", format!("p-{home}-q"));
        assert_eq!(c.storage_options, want);
        let err = Settings::from_toml("[storage]\nKEY = \"${BRONZE_TEST_SURELY_UNSET_7F3A}\"\n")
            .unwrap_err();
        let err = crate::error::chain(&err);
        assert!(err.contains("BRONZE_TEST_SURELY_UNSET_7F3A"), "{err}");
        let f = Settings::from_toml("catalog = \"ftp://x/y\"\n").unwrap();
        assert!(f.resolve().is_err());
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("512MB"), Some(512 << 20));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("1.5k"), Some(1536));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size(""), None);
        assert!(default_memory_budget() >= 1 << 20);
        assert_eq!(
            parse_duration("500ms"),
            Some(std::time::Duration::from_millis(500))
        );
        assert_eq!(
            parse_duration("2h"),
            Some(std::time::Duration::from_secs(7200))
        );
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn a_settings_file_sets_everything_and_names_unknown_keys() {
        let c = Settings::from_toml(
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
        .unwrap()
        .resolve()
        .unwrap();
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
            (
                "lease_ttl = \"soon\"",
                "is not a duration; write e.g. 10m, 90s or 2h",
            ),
            (
                "memory_budget = \"lots\"",
                "is not a size; write e.g. 512MB or 2GiB",
            ),
            (
                "target_file_size = \"big\"",
                "is not a size; write e.g. 512MB or 2GiB",
            ),
            (
                "compression = \"brotli\"",
                "\"brotli\" is not a compression; write snappy, lz4_raw, zstd, zstd(3), gzip or uncompressed",
            ),
            (
                "lock_policy = \"per_topic\"",
                "`per_table`, `global`, `none`",
            ),
            ("commit_per = \"batch\"", "expected `table` or `topic`"),
            ("auto_compact = \"yes\"", "auto_compact"),
        ] {
            let err = Settings::from_toml(bad).unwrap_err().to_string();
            assert!(err.contains(key), "{bad:?}: {err}");
        }
    }

    /// The `bronze.toml` of docs/settings.md holds every key, and this module's example too.
    #[test]
    fn the_documented_files_parse_and_set_every_key() {
        let page = include_str!("../docs/settings.md");
        let section = &page[page.find("# Settings: `bronze.toml`").unwrap()..];
        let block = section.split("```toml\n").nth(1).unwrap();
        let block = block.split("```").next().unwrap();
        let page: Settings = toml::from_str(block).unwrap();
        let module = include_str!("settings.rs");
        let doc: String = module[module.find("/// ```toml").unwrap() + 11..]
            .lines()
            .take_while(|l| !l.contains("/// ```"))
            .map(|l| {
                l.trim_start()
                    .trim_start_matches("///")
                    .trim_start_matches(' ')
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let doc: Settings = toml::from_str(&doc).unwrap();
        for settings in [page, doc] {
            let set = to_json(&settings);
            let unset: Vec<_> = set
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| v.is_null())
                .map(|(k, _)| k.clone())
                .collect();
            // The batch's identity is per run, never a feed's setting.
            assert_eq!(unset, ["batch_id", "landing_path"]);
        }
    }

    #[test]
    fn json_settings_name_the_key_and_say_the_files_text() {
        let err = Settings::from_json(serde_json::json!({"flatten": {"max_depth": "deep"}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`flatten.max_depth`"), "{err}");
        let err = Settings::from_json(serde_json::json!({"lease_ttl": "soon"}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "invalid setting `lease_ttl`: \"soon\" is not a duration; write e.g. 10m, 90s or 2h"
        );
        let err = Settings::from_json(serde_json::json!({"no_such_setting": 1}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `no_such_setting`"), "{err}");
    }

    #[test]
    fn a_layer_over_another_wins_key_by_key() {
        let file = Settings::from_toml(
            "schema = \"raw\"\nthreads = 2\n[storage]\nA = \"1\"\nB = \"2\"\n[envelope]\ntopic_field = \"type\"\n",
        )
        .unwrap();
        let flags = Settings::from_json(serde_json::json!({
            "threads": 3, "storage": {"B": "3"}, "envelope": {"id_field": "id"}
        }))
        .unwrap();
        let c = flags.over(file).resolve().unwrap();
        assert_eq!(c.schema, "raw");
        assert_eq!(c.threads, Some(3));
        assert_eq!(c.envelope.topic_field, "type");
        assert_eq!(c.envelope.id_field.as_deref(), Some("id"));
        let mut want = StorageOptions::default();
        want.insert("A", "1");
        want.insert("B", "3");
        assert_eq!(c.storage_options, want);
    }

    #[test]
    fn a_metastore_without_what_reaching_it_needs_is_refused_naming_the_fix() {
        for (toml, says) in [
            ("[metastore]\nregion = \"r\"", "without `kind`"),
            ("[metastore]\nkind = \"glue\"", "Glue needs its region"),
            (
                "[metastore]\nkind = \"glue\"\nregion = \"r\"\ndatabase = \"b_{topic}\"",
                "{source} and {entity} only",
            ),
            ("[metastore]\nkind = \"hive\"", "needs its thrift:// uri"),
            (
                "[metastore]\nkind = \"hive\"\nuri = \"http://h:9083\"",
                "needs its thrift:// uri",
            ),
            (
                "[metastore]\nkind = \"unity\"\ndatabase = \"main.b\"",
                "Unity Catalog needs its URL",
            ),
            (
                "[metastore]\nkind = \"unity\"\nuri = \"https://uc\"\ndatabase = \"bronze\"",
                "`catalog.schema`",
            ),
        ] {
            let err = Settings::from_toml(toml)
                .and_then(Settings::resolve)
                .expect_err(toml)
                .to_string();
            assert!(err.contains(says), "{toml}: {err}");
        }
        let ok = Settings::from_toml("[metastore]\nkind = \"glue\"\nregion = \"r\"")
            .and_then(Settings::resolve)
            .unwrap();
        let m = ok.metastore.unwrap();
        assert_eq!((m.region.as_deref(), m.timeout.as_secs()), (Some("r"), 30));
    }

    #[test]
    fn unset_keys_name_what_a_layer_leaves_unset() {
        let s = Settings::from_toml(
            "schema = \"raw\"\n[storage]\nA = \"1\"\n[flatten]\nmax_depth = 4\n",
        )
        .unwrap();
        let unset = s.unset_keys();
        for set in ["schema", "storage", "storage.A", "flatten.max_depth"] {
            assert!(!unset.iter().any(|k| k == set), "{set}: {unset:?}");
        }
        for left in ["catalog", "flatten.types", "flatten.child_tables", "topics"] {
            assert!(unset.iter().any(|k| k == left), "{left}: {unset:?}");
        }
        assert_eq!(Settings::default().unset_keys().len(), 43);
    }

    #[test]
    fn a_bad_column_type_hint_is_refused_naming_it_in_every_layer() {
        let file = Settings::from_toml("[flatten.column_types]\n\"/a\" = \"decimal(40,2)\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            file.contains("\"decimal(40,2)\": the precision is 1 to 38"),
            "{file}"
        );
        let python = Settings::from_json(serde_json::json!({
            "flatten": {"column_types": {"/a": "datetime"}}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            python.starts_with(
                "invalid setting `flatten.column_types./a`: unknown type \"datetime\""
            ),
            "{python}"
        );
        for (toml, says) in [
            (
                "[flatten.column_types]\n\"a\" = \"int64\"\n",
                "invalid setting `column_types`: `a=int64`: \"a\" is not a JSON pointer",
            ),
            (
                "[topics.t.column_types]\n\"/a~\" = \"int64\"\n",
                "invalid setting `column_types`: `t:/a~=int64`: \"/a~\" is not a JSON pointer",
            ),
        ] {
            let err = Settings::from_toml(toml)
                .unwrap()
                .resolve()
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(says), "{err}");
        }
        let c =
            Settings::from_toml("[flatten.column_types]\n\"t:/a\" = \"date\"\n\"/b\" = \"json\"\n")
                .unwrap()
                .resolve()
                .unwrap();
        assert_eq!(
            c.flatten.column_type("t", "/a"),
            Some(crate::column_types::ColumnType::Date)
        );
        assert_eq!(c.flatten.column_type("u", "/a"), None);
        assert_eq!(
            c.flatten.column_type("u", "/b"),
            Some(crate::column_types::ColumnType::Json)
        );
    }

    #[test]
    fn a_bad_number_has_the_text_of_a_bad_text() {
        for (json, text) in [
            (
                serde_json::json!({"lease_ttl": -1}),
                "-1 seconds is not a duration",
            ),
            (
                serde_json::json!({"lease_ttl": -0.5}),
                "-0.5 seconds is not a duration",
            ),
            (
                serde_json::json!({"memory_budget": -1}),
                "\"-1\" is not a size; write e.g. 512MB or 2GiB",
            ),
        ] {
            let err = Settings::from_json(json).unwrap_err().to_string();
            assert!(err.contains(text), "{err}");
        }
        assert_eq!(
            Duration::from_secs_f64(-1.0).unwrap_err(),
            "-1 seconds is not a duration; give seconds >= 0 or e.g. 10m"
        );
    }

    #[test]
    fn write_settings_parse_round_trip_and_are_checked() {
        use parquet::basic::{Compression as C, GzipLevel, ZstdLevel};
        for (text, codec) in [
            ("snappy", C::SNAPPY),
            ("lz4_raw", C::LZ4_RAW),
            ("zstd", C::ZSTD(ZstdLevel::default())),
            ("ZSTD(3)", C::ZSTD(ZstdLevel::try_new(3).unwrap())),
            ("zstd(22)", C::ZSTD(ZstdLevel::try_new(22).unwrap())),
            ("gzip", C::GZIP(GzipLevel::default())),
            ("uncompressed", C::UNCOMPRESSED),
        ] {
            let parsed: Codec = text.parse().unwrap();
            assert_eq!(parsed.compression(), codec, "{text}");
            assert_eq!(parsed.to_string().parse::<Codec>(), Ok(parsed), "{text}");
        }
        for bad in ["zstd(0)", "zstd(23)", "zstd(x)", "zstd(3", "lz4", ""] {
            let err = bad.parse::<Codec>().unwrap_err();
            assert!(
                err.starts_with(&format!("{bad:?} is not a compression")),
                "{err}"
            );
        }
        assert!(
            "zstd(23)"
                .parse::<Codec>()
                .unwrap_err()
                .contains("the zstd level is 1 to 22")
        );
        let s = Settings::from_toml(
            "target_file_size = \"64MiB\"\ncompression = \"zstd(3)\"\nauto_compact = false\n\
             auto_compact_min_files = 10\nbatch_lease = false\nlock_policy = \"global\"\n\
             commit_per = \"topic\"\n",
        )
        .unwrap();
        assert_eq!(Settings::from_json(to_json(&s)).unwrap(), s);
        let c = s.resolve().unwrap();
        assert_eq!(c.target_file_size, 64 << 20);
        assert_eq!(c.compression, C::ZSTD(ZstdLevel::try_new(3).unwrap()));
        assert!(!c.auto_compact);
        assert_eq!(c.auto_compact_min_files, 10);
        assert!(!c.batch_lease);
        assert_eq!(c.lock_policy, LockPolicy::Global);
        assert_eq!(c.commit_per, CommitPer::Topic);
        // Unset, they keep the defaults.
        let d = Settings::default().resolve().unwrap();
        let default = IngestConfig::default();
        assert_eq!(
            (d.target_file_size, d.compression, d.auto_compact),
            (128 << 20, C::SNAPPY, true)
        );
        assert_eq!(
            (d.auto_compact_min_files, d.batch_lease),
            (default.auto_compact_min_files, default.batch_lease)
        );
        assert_eq!(
            (d.lock_policy, d.commit_per),
            (LockPolicy::PerTable, CommitPer::Table)
        );
        for (json, says) in [
            (
                serde_json::json!({"target_file_size": 10}),
                "invalid setting `target_file_size`: 10 bytes is below the 1 KiB minimum",
            ),
            (
                serde_json::json!({"auto_compact_min_files": 0}),
                "invalid setting `auto_compact_min_files`: must be at least 1",
            ),
        ] {
            let err = Settings::from_json(json)
                .unwrap()
                .resolve()
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(says), "{err}");
        }
        let err = Settings::from_json(serde_json::json!({"compression": "zstd(30)"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid setting `compression`: \"zstd(30)\" is not a compression"),
            "{err}"
        );
    }

    #[test]
    fn durations_and_sizes_take_numbers_or_text_and_round_trip() {
        let s = Settings::from_json(serde_json::json!({
            "lease_ttl": 0.5, "full_listing_every": "1h", "memory_budget": "1KiB"
        }))
        .unwrap();
        let back = Settings::from_json(to_json(&s)).unwrap();
        assert_eq!(back, s);
        let c = s.resolve().unwrap();
        assert_eq!(c.lease_ttl, std::time::Duration::from_millis(500));
        assert_eq!(c.full_listing_every, std::time::Duration::from_secs(3600));
        assert_eq!(c.memory_budget, 1024);
        assert!(Settings::from_json(serde_json::json!({"lease_ttl": -1})).is_err());
    }
}
