//! `Ingest`: owns the pools, the runtime and the lock map, and runs the stages in order.
//!
//! discover → stage (parse once) → fan out topics on a rayon pool (flatten, then write
//! each table under its lock) → `_corrupt_records` → [`BatchReport`]. Only this module
//! knows the order of the stages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use deltalake::arrow::array::{
    ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use rayon::prelude::*;

use crate::config::{IngestConfig, LockPolicy};
use crate::discover;
use crate::error::{Error, Result};
use crate::flatten::{self, Lineage};
use crate::locks::TableLocks;
use crate::naming::{self, TableName};
use crate::report::{BatchReport, MAX_LISTED_CORRUPT, TableOutcome};
use crate::stage::{self, CorruptLine};
use crate::write;

/// One topic's write to one table: `(rows, version)` or why it failed.
struct TableWrite {
    table: TableName,
    topic: String,
    result: Result<(u64, u64)>,
}

/// Default cap on topics processed at once.
pub const DEFAULT_MAX_PARALLEL: usize = 32;

/// A configured loader. Build one with [`Ingest::builder`], then call [`Ingest::run`] per
/// batch folder. Cheap to reuse across batches: it keeps its thread pool and runtime.
pub struct Ingest {
    config: IngestConfig,
    pool: rayon::ThreadPool,
    runtime: tokio::runtime::Runtime,
    locks: Arc<TableLocks>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Ingest`]; every setting has a default (see [`IngestConfig`]).
#[derive(Debug, Clone)]
pub struct IngestBuilder {
    config: IngestConfig,
}

impl IngestBuilder {
    /// Schema folder under the catalog. Default `bronze`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.config.schema = schema.into();
        self
    }
    /// Use this batch id instead of the folder's `batch_id=<id>`.
    pub fn with_batch_id(mut self, id: impl Into<String>) -> Self {
        self.config.batch_id = Some(id.into());
        self
    }
    /// Envelope field holding the topic. Default `topic`.
    pub fn with_topic_field(mut self, field: impl Into<String>) -> Self {
        self.config.envelope.topic_field = field.into();
        self
    }
    /// Envelope field holding the message id; `None` disables dedup. Default `message_id`.
    pub fn with_id_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.id_field = field;
        self
    }
    /// Envelope field holding the payload; `None`: all non-envelope fields. Default `payload`.
    pub fn with_payload_field(mut self, field: Option<String>) -> Self {
        self.config.envelope.payload_field = field;
        self
    }
    /// Topics processed at once. Default `min(32, topics)`; 1 is sequential.
    pub fn with_max_parallel(mut self, n: usize) -> Self {
        self.config.max_parallel = Some(n);
        self
    }
    /// Threads used to parse files. Default: available parallelism.
    pub fn with_threads(mut self, n: usize) -> Self {
        self.config.threads = Some(n);
        self
    }
    /// Depth beyond which sub-trees are kept as JSON text. Default 16.
    pub fn with_max_depth(mut self, depth: usize) -> Self {
        self.config.max_depth = depth;
        self
    }
    /// How writes to one table are serialized. Default [`LockPolicy::PerTable`].
    pub fn with_lock_policy(mut self, policy: LockPolicy) -> Self {
        self.config.lock_policy = policy;
        self
    }
    /// Validates the settings and starts the pool and runtime.
    pub fn build(self) -> Result<Ingest> {
        Ingest::from_config(self.config)
    }
}

impl Ingest {
    /// A builder writing under `catalog` (created if missing).
    pub fn builder(catalog: impl Into<PathBuf>) -> IngestBuilder {
        IngestBuilder {
            config: IngestConfig {
                catalog: catalog.into(),
                ..IngestConfig::default()
            },
        }
    }

    /// An `Ingest` from a full configuration.
    pub fn from_config(config: IngestConfig) -> Result<Ingest> {
        config.validate()?;
        let threads = config
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("bronze-parse-{i}"))
            .build()
            .map_err(|e| Error::Runtime {
                what: "thread pool",
                source: Box::new(e),
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.clamp(1, 4))
            .thread_name("bronze-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime {
                what: "tokio runtime",
                source: Box::new(e),
            })?;
        let locks = Arc::new(TableLocks::new(config.lock_policy));
        Ok(Ingest {
            config,
            pool,
            runtime,
            locks,
        })
    }

    /// The settings in use.
    pub fn config(&self) -> &IngestConfig {
        &self.config
    }

    /// `<catalog>/<schema>`, absolute.
    pub fn schema_dir(&self) -> Result<PathBuf> {
        let catalog = &self.config.catalog;
        std::fs::create_dir_all(catalog).map_err(|e| Error::io(catalog, e))?;
        let catalog = catalog.canonicalize().map_err(|e| Error::io(catalog, e))?;
        Ok(catalog.join(&self.config.schema))
    }

    /// Loads one landed batch folder. Lines that are not messages go to
    /// `_corrupt_records`; a table whose write fails is reported (and sets exit code 2),
    /// the others are still written. Returns `Err` only for run-level failures: a bad
    /// batch id, a missing folder or no data files, an unreadable file.
    pub fn run(&self, batch_dir: impl AsRef<Path>) -> Result<BatchReport> {
        let started = Instant::now();
        let batch_dir = batch_dir.as_ref();
        let found = discover::discover(batch_dir, self.config.batch_id.as_deref())?;
        let schema_dir = self.schema_dir()?;
        tracing::info!(batch_id = %found.batch_id, files = found.files.len(), skipped = found.skipped.len(), "discovered");

        let staging = self
            .pool
            .install(|| stage::stage(&found.files, &self.config.envelope))?;
        tracing::info!(
            lines = staging.lines(),
            messages = staging.messages(),
            corrupt = staging.corrupt.len(),
            duplicates = staging.duplicates,
            topics = staging.topics.len(),
            "staged"
        );

        let lineage = Lineage {
            batch_id: found.batch_id.clone(),
            loaded_at_micros: now_micros(),
        };
        let max_parallel = self
            .config
            .max_parallel
            .unwrap_or(DEFAULT_MAX_PARALLEL)
            .min(staging.topics.len())
            .max(1);
        // The fan-out pool is sized to `max_parallel`: topic tasks spend most of their
        // time waiting on commits, so they get their own threads rather than the parse pool's.
        let fanout = rayon::ThreadPoolBuilder::new()
            .num_threads(max_parallel)
            .thread_name(|i| format!("bronze-topic-{i}"))
            .build()
            .map_err(|e| Error::Runtime {
                what: "thread pool",
                source: Box::new(e),
            })?;
        let topics: Vec<(&String, &RecordBatch)> = staging.topics.iter().collect();
        let results: Vec<Vec<TableWrite>> = fanout.install(|| {
            topics
                .par_iter()
                .with_max_len(1)
                .map(|(topic, batch)| self.handle_topic(&schema_dir, topic, batch, &lineage))
                .collect()
        });

        let mut tables: BTreeMap<String, TableOutcome> = BTreeMap::new();
        for TableWrite {
            table,
            topic,
            result,
        } in results.into_iter().flatten()
        {
            let t = tables.entry(table.to_string()).or_default();
            t.topics.push(topic);
            match result {
                Ok((rows, version)) => {
                    t.rows_written += rows;
                    t.version = Some(t.version.map_or(version, |v| v.max(version)));
                }
                Err(e) => {
                    tracing::error!(table = %table, error = %crate::error::chain(&e), "table failed");
                    t.error = Some(crate::error::chain(&e));
                }
            }
        }

        let corrupt_table = TableName::system(naming::CORRUPT_TABLE);
        let corrupt_outcome =
            self.write_corrupt(&schema_dir, &corrupt_table, &staging.corrupt, &lineage);
        match corrupt_outcome {
            Ok(Some((rows, version))) => {
                tables.insert(
                    corrupt_table.to_string(),
                    TableOutcome {
                        rows_written: rows,
                        topics: Vec::new(),
                        version: Some(version),
                        error: None,
                    },
                );
            }
            Ok(None) => {}
            Err(e) => {
                tables.insert(
                    corrupt_table.to_string(),
                    TableOutcome {
                        error: Some(crate::error::chain(&e)),
                        ..Default::default()
                    },
                );
            }
        }

        let report = BatchReport {
            batch_id: found.batch_id,
            files_read: found.files.len(),
            files_skipped: found.skipped.len(),
            bytes_read: staging.files.iter().map(|f| f.bytes).sum(),
            lines: staging.lines(),
            messages: staging.messages(),
            corrupt_lines: staging.corrupt.len() as u64,
            duplicates: staging.duplicates,
            topics: staging.topics.len(),
            tables,
            corrupt: staging
                .corrupt
                .iter()
                .take(MAX_LISTED_CORRUPT)
                .cloned()
                .collect(),
            files: staging.files,
            elapsed: started.elapsed(),
        };
        Ok(report)
    }

    /// Flattens one topic and writes each of its tables under that table's lock.
    fn handle_topic(
        &self,
        schema_dir: &Path,
        topic: &str,
        staged: &RecordBatch,
        lineage: &Lineage,
    ) -> Vec<TableWrite> {
        let plan = match flatten::flatten(topic, staged, lineage, self.config.max_depth) {
            Ok(plan) => plan,
            Err(e) => {
                return vec![TableWrite {
                    table: TableName::for_topic(topic),
                    topic: topic.to_string(),
                    result: Err(e),
                }];
            }
        };
        plan.tables
            .into_iter()
            .map(|(table, batch)| {
                let rows = batch.num_rows() as u64;
                let dir = write::table_dir(schema_dir, &table);
                let predicate = write::batch_topic_predicate(&lineage.batch_id, topic);
                let result = {
                    let _guard = self.locks.lock(&table);
                    self.runtime
                        .block_on(write::replace(&dir, &table, batch, predicate))
                };
                TableWrite {
                    table,
                    topic: topic.to_string(),
                    result: result.map(|v| (rows, v)),
                }
            })
            .collect()
    }

    /// Replaces this batch's rows in `_corrupt_records` (deleting them when the batch now
    /// has none). `Ok(None)` when there was nothing to do.
    fn write_corrupt(
        &self,
        schema_dir: &Path,
        table: &TableName,
        corrupt: &[CorruptLine],
        lineage: &Lineage,
    ) -> Result<Option<(u64, u64)>> {
        let dir = write::table_dir(schema_dir, table);
        let _guard = self.locks.lock(table);
        if corrupt.is_empty() {
            let version = self.runtime.block_on(write::delete(
                &dir,
                table,
                write::batch_predicate(&lineage.batch_id),
            ))?;
            return Ok(version.map(|v| (0, v)));
        }
        let batch = corrupt_batch(corrupt, lineage).map_err(|e| Error::arrow(table.as_str(), e))?;
        let version = self.runtime.block_on(write::replace(
            &dir,
            table,
            batch,
            write::batch_predicate(&lineage.batch_id),
        ))?;
        Ok(Some((corrupt.len() as u64, version)))
    }
}

fn corrupt_batch(
    corrupt: &[CorruptLine],
    lineage: &Lineage,
) -> std::result::Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    let n = corrupt.len();
    let schema = Schema::new(vec![
        Field::new("_batch_id", DataType::Utf8, false),
        Field::new("_source_file", DataType::Utf8, false),
        Field::new("_line", DataType::Int64, false),
        Field::new("_corrupt_record", DataType::Utf8, false),
        Field::new("_corrupt_bytes", DataType::Binary, false),
        Field::new("_reason", DataType::Utf8, false),
        Field::new("_loaded_at", flatten::timestamp_type(), false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![lineage.batch_id.as_str(); n])),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.source_file.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(
            corrupt.iter().map(|c| c.line as i64),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| String::from_utf8_lossy(&c.raw)),
        )),
        Arc::new(BinaryArray::from_iter_values(
            corrupt.iter().map(|c| c.raw.as_slice()),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.reason.as_str()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(vec![lineage.loaded_at_micros; n]).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
}

fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}
