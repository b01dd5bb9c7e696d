//! Command-line flags (clap) and their conversion into library settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use bronze::{IngestConfig, Result};

/// Load landed batches of multi-topic JSON Lines files into Delta Lake bronze tables.
///
/// Every line of a batch is one message envelope (topic, message id, metadata, payload).
/// Each topic becomes a Delta table under <CATALOG>/<SCHEMA>/, nested arrays become
/// child tables shared across topics, unparseable lines are kept in `_corrupt_records`,
/// and rerunning a batch replaces its rows instead of duplicating them.
#[derive(Debug, Parser)]
#[command(name = "bronze", version, propagate_version = true)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); logs go to stderr.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one batch folder (`.../batch_id=<id>/`) into bronze tables.
    ///
    /// Reads `*.jsonl`, `*.json` and `*.jsonl.gz` files of the folder (manifests,
    /// `_SUCCESS` and hidden files are skipped), parses every line once, drops duplicate
    /// message ids (first wins), and replaces this batch's rows in every table it writes.
    ///
    /// Exit code: 0 clean, 1 finished but some lines were corrupt (see `_corrupt_records`),
    /// 2 failed (a table could not be written, or the batch could not be read).
    ///
    /// Example: bronze ingest landing/market/events/batch_id=2026-04-05_001 --catalog ./lakehouse
    Ingest(IngestArgs),
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The batch folder, normally named `batch_id=<id>`.
    pub batch_dir: PathBuf,
    /// Root folder of the lakehouse; created if missing.
    #[arg(long, default_value = "./lakehouse")]
    pub catalog: PathBuf,
    /// Schema (sub-folder of the catalog) holding the tables.
    #[arg(long, default_value = "bronze")]
    pub schema: String,
    /// Batch id to use instead of the folder's `batch_id=<id>` ([A-Za-z0-9_-], up to 128).
    #[arg(long)]
    pub batch_id: Option<String>,
    /// Envelope field holding the topic (e.g. `type`, `_path`, `event_type`).
    #[arg(long, default_value = "topic")]
    pub topic_field: String,
    /// Envelope field holding the message id; '' for none (no dedup, ids from file and line).
    #[arg(long, default_value = "message_id")]
    pub id_field: String,
    /// Envelope field holding the payload; '' for none (every non-envelope field is payload).
    #[arg(long, default_value = "payload")]
    pub payload_field: String,
    /// Topics processed at once (default min(32, topics); 1 = sequential).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Threads used to parse files (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Nesting depth beyond which sub-trees are kept as JSON text.
    #[arg(long, default_value_t = 16)]
    pub max_depth: usize,
    /// Persist the staging table `_tmp_raw_load_<batch_id>` even when the batch fits in
    /// memory, so a crashed run can resume from it. Dropped when the batch ends.
    #[arg(long)]
    pub persist_staging: bool,
    /// Landing bytes staged in memory at once (e.g. 512MB, 2GiB); a larger batch is staged
    /// in chunks that spill to the staging table. Default: a quarter of the machine's memory.
    #[arg(long, value_parser = parse_budget)]
    pub memory_budget: Option<u64>,
    /// Re-read the landing files even if a complete staging table of an earlier run of this
    /// batch exists (by default the run resumes from it).
    #[arg(long)]
    pub no_resume: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

impl IngestArgs {
    /// The library settings these flags describe (validated by the library).
    pub fn to_config(&self) -> Result<IngestConfig> {
        let mut c = IngestConfig::default();
        c.catalog = self.catalog.clone();
        c.schema = self.schema.clone();
        c.batch_id = self.batch_id.clone();
        c.envelope.topic_field = self.topic_field.clone();
        c.envelope.id_field = non_empty(&self.id_field);
        c.envelope.payload_field = non_empty(&self.payload_field);
        c.max_parallel = self.max_parallel;
        c.threads = self.threads;
        c.max_depth = self.max_depth;
        c.persist_staging = self.persist_staging;
        if let Some(b) = self.memory_budget {
            c.memory_budget = b;
        }
        c.resume = !self.no_resume;
        c.validate()?;
        Ok(c)
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn parse_budget(s: &str) -> std::result::Result<u64, String> {
    bronze::parse_size(s).ok_or_else(|| format!("{s:?} is not a size; write e.g. 512MB or 2GiB"))
}
