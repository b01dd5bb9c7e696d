//! Settings of a run: where tables go and how envelopes are read.
//!
//! [`IngestConfig`] is plain data with documented defaults; [`IngestConfig::validate`]
//! refuses contradictory or unusable settings before any I/O.

use std::path::PathBuf;

use crate::error::{Error, Result};

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
}

impl Default for EnvelopeConfig {
    fn default() -> Self {
        EnvelopeConfig {
            topic_field: "topic".into(),
            id_field: Some("message_id".into()),
            payload_field: Some("payload".into()),
        }
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
    /// One commit per (topic, table), as the seed's notebook did: parallel topic tasks
    /// write their own tables, serialized per table by the lock map. More commits and
    /// files; kept to compare, and to exercise the locks.
    Topic,
}

/// Everything a run needs; the CLI builds one from its flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IngestConfig {
    /// Root folder of the lakehouse. Default `./lakehouse`.
    pub catalog: PathBuf,
    /// Schema (folder under the catalog) holding the bronze tables. Default `bronze`.
    pub schema: String,
    /// Batch id to use instead of the one in the folder name `batch_id=<id>`.
    pub batch_id: Option<String>,
    /// Envelope field names.
    pub envelope: EnvelopeConfig,
    /// Topics processed at once. Default `min(32, topics)`; `Some(1)` is sequential.
    pub max_parallel: Option<usize>,
    /// Threads of the pool the library owns. Default: the machine's available parallelism.
    pub threads: Option<usize>,
    /// Nesting depth below which objects are flattened; deeper sub-trees are kept as JSON
    /// text. Default 16.
    pub max_depth: usize,
    /// How writes to the same table are serialized. Default [`LockPolicy::PerTable`].
    pub lock_policy: LockPolicy,
    /// How rows are grouped into commits. Default [`CommitPer::Table`].
    pub commit_per: CommitPer,
    /// Target size of the data files a write produces (optimize write). Default 128 MiB.
    pub target_file_size: u64,
    /// Compact a table after a commit when it has `auto_compact_min_files` files under
    /// half the target size, unless the table sets `delta.autoOptimize.autoCompact=false`.
    /// Default `true`.
    pub auto_compact: bool,
    /// Small files that trigger auto compaction. Default 50 (Databricks' `minNumFiles`).
    pub auto_compact_min_files: u64,
    /// Persist the staging table `_tmp_raw_load_<batch_id>` even when the batch fits in
    /// memory (so a crashed run can resume from it). Default `false`.
    pub persist_staging: bool,
    /// Memory staging may use. A batch that would need more in memory (about four times
    /// its landing size) is staged in chunks of a quarter of the budget that spill to the
    /// staging table, and its topics are processed in waves that fit the budget. Default:
    /// a quarter of the machine's memory (2 GiB when it cannot be read).
    pub memory_budget: u64,
    /// Resume from a complete staging table left by an earlier run of the same batch
    /// instead of re-reading the landing files. Default `true`.
    pub resume: bool,
    /// Bench baseline: every topic task re-reads the landing files (the seed's ~5 h
    /// notebook). Never set it in production.
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
            catalog: PathBuf::from("lakehouse"),
            schema: "bronze".into(),
            batch_id: None,
            envelope: EnvelopeConfig::default(),
            max_parallel: None,
            threads: None,
            max_depth: 16,
            lock_policy: LockPolicy::PerTable,
            commit_per: CommitPer::Table,
            target_file_size: 128 << 20,
            auto_compact: true,
            auto_compact_min_files: 50,
            object_store: None,
            persist_staging: false,
            memory_budget: default_memory_budget(),
            resume: true,
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

/// Longest field name accepted for the envelope settings.
const MAX_FIELD_LEN: usize = 256;

impl IngestConfig {
    /// Refuses settings that cannot work, naming the setting and the fix.
    pub fn validate(&self) -> Result<()> {
        crate::naming::validate_schema_name(&self.schema)?;
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
        if !(1..=64).contains(&self.max_depth) {
            return Err(Error::Config {
                name: "max-depth",
                reason: format!("{} is outside 1..=64", self.max_depth),
            });
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
