//! Command-line flags (clap) and their conversion into library settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use bronze::{IngestConfig, Result, Settings};

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
    /// Log line format: `text` (coloured only when stderr is a terminal and `NO_COLOR`
    /// is unset) or `json` (one object per line, for schedulers that ingest structured
    /// logs).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

// Parsed once per process: the size of the largest variant (`ingest`'s flags) costs
// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load a batch folder (`landing/<source>/<entity>/batch_id=<id>/`) into bronze tables.
    ///
    /// Reads `*.jsonl`, `*.json` and `*.jsonl.gz` files of the folder (manifests,
    /// `_SUCCESS` and hidden files are skipped), parses every line once, drops duplicate
    /// message ids (first wins), and replaces this batch's rows in every table it writes.
    ///
    /// A batch is its folder, not its id: `<source>/<entity>` (the two folders above
    /// `batch_id=<id>`) is stamped on every row as `_landing_path`, so folders of other
    /// sources or entities that share the batch id keep their rows. Several folders of
    /// one batch id load as one batch.
    ///
    /// Exit code: 0 clean, 1 finished but some lines were corrupt (see `_corrupt_records`),
    /// 2 failed (a table could not be written, or the batch could not be read), 3 another
    /// run is loading the same batch right now (its lease is in
    /// <CATALOG>/<SCHEMA>/_bronze_leases/; retry later). A failed or killed run is
    /// repaired by running the same command again.
    ///
    /// Example: bronze ingest landing/market/events/batch_id=2026-04-05_001 --catalog ./lakehouse
    ///
    /// Example: bronze ingest 'landing/*/*/batch_id=2026-04-05_001' --catalog ./lakehouse
    Ingest(IngestArgs),
    /// Rank the tables that need work: files, bytes, small files, log length since the
    /// last checkpoint and OPTIMIZE, bytes VACUUM could free; tables with more than 50
    /// files averaging under 25 MB are flagged, worst first, with the action to run.
    Health(HealthArgs),
    /// Show a table's commits: version, time, operation, parameters and metrics.
    History(HistoryArgs),
    /// Register every table of the lakehouse in a catalog (a Hive Metastore, AWS Glue or
    /// Unity Catalog: `--metastore`) as an external Delta table at its folder, with its
    /// columns: created when missing, its columns updated when the table's schema changed,
    /// left alone when current; a name registered at another location is refused, naming
    /// both. With a database template (`bronze_{entity}`), the tables runs could not
    /// register, each in its database. Glue's credentials: the
    /// `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` storage options, else AWS's provider
    /// chain; Unity Catalog's token: the variable `--metastore-token-env` names.
    Register(RegisterArgs),
    /// Bin-pack a table's small files toward the target size (or Z-order by columns).
    ///
    /// Example: bronze optimize --all            bronze optimize trade --zorder symbol
    Optimize(OptimizeArgs),
    /// Delete files no version within the retention references (default: the table's
    /// own `delta.deletedFileRetentionDuration`, 168h when unset, as Spark's VACUUM).
    ///
    /// A retention under the table's, or under 168h, is refused unless --force: readers
    /// of older versions and running writers would lose their files. --dry-run lists
    /// what would go.
    Vacuum(VacuumArgs),
    /// Write a checkpoint so readers replay fewer log files.
    Checkpoint(CheckpointArgs),
    /// Do what `health` recommends, for every table: OPTIMIZE where small files piled
    /// up, VACUUM past each table's retention (its `delta.deletedFileRetentionDuration`,
    /// at least 168h; shorter only with --force), a checkpoint
    /// once 10 commits followed the last, and log entries past the table's
    /// `delta.logRetentionDuration` (30 days by default) removed. Worst tables first,
    /// within --max-duration / --max-tables; safe beside running loads (each step takes
    /// the table's lock and commits with the same conflict checks). Run it daily, after
    /// the loads, as Databricks' predictive optimization does for managed tables.
    ///
    /// Example: bronze maintain --catalog ./lakehouse --max-duration 30m
    Maintain(MaintainArgs),
    /// Where a landing zone's backlog stands, per entity (`<source>/<entity>`).
    ///
    /// Counts the `batch_id=` folders under ROOT (as `bronze ingest --pending ROOT` lists
    /// them) that are loaded (their latest run in `_run_control` has no failed row),
    /// pending (never loaded), failed (the latest run failed: pending again) and in
    /// progress (a run holds the batch's lease: its run id, host, pid and age; a lease
    /// not renewed within the lease TTL is flagged, its run likely dead), the oldest
    /// batch id not loaded, and the last failure's reason. Reads only.
    ///
    /// Example: bronze status landing/ --catalog ./lakehouse
    ///
    /// Example: bronze status s3://bucket/landing/market --catalog s3://bucket/lake --json
    Status(StatusArgs),
    /// Moves or deletes the landing files of loaded batches after a retention.
    ///
    /// A batch under ROOT is cleaned when its latest run loaded it, that run started at
    /// least --older-than ago, and its folder still holds exactly what the run read (its
    /// manifest: a file added or changed since keeps it, for `ingest --pending` to load it
    /// again first). Its files move to `<DEST>/<source>/<entity>/batch_id=<id>/`
    /// (--move-to, a folder or an object store URL outside ROOT) or are deleted (--delete,
    /// --older-than 7d at least). Each batch is cleaned under its lease; its manifest and a
    /// `(clean)` row in `_run_control` record it, and a later `bronze ingest` of its folder
    /// says where its files went. Listings and storage of the landing zone then stop
    /// growing with its age, as Auto Loader's `cleanSource` does.
    ///
    /// Example: bronze clean landing/ --older-than 30d --move-to /archive/landing --dry-run
    ///
    /// Example: bronze clean s3://bucket/landing --older-than 90d --delete --catalog s3://bucket/lake
    Clean(CleanArgs),
    /// A one-file HTML report of the lakehouse: batches over time, tables, failures.
    ///
    /// Reads `_run_control` and every table's log (nothing is written to the catalog)
    /// and writes one self-contained page (inline SVG charts and styles: nothing fetched
    /// when it is opened, offline or attached to a ticket): per batch run, rows loaded,
    /// corrupt lines and duplicates, and wall time by stage; per table, files by size
    /// against the target file size, small files, versions since the last checkpoint and
    /// OPTIMIZE, with `bronze health`'s flags; the latest failures with their reasons;
    /// with `--landing ROOT`, the landing zone's backlog as `bronze status` shows it.
    /// `--json` prints the same data instead.
    ///
    /// Example: bronze report --html lakehouse.html --catalog ./lakehouse
    ///
    /// Example: bronze report --html report.html --landing s3://bucket/landing --catalog s3://bucket/lake
    Report(ReportArgs),
    /// Shell completions or the man page, generated from these definitions.
    ///
    /// Example: bronze completions bash > ~/.local/share/bash-completion/completions/bronze
    ///
    /// Example: bronze completions man > ~/.local/share/man/man1/bronze.1
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Write the page to this file (required unless `--json`).
    #[arg(long, value_name = "FILE", required_unless_present = "json")]
    pub html: Option<std::path::PathBuf>,
    /// Also show this landing zone's backlog (`landing/`, `landing/<source>/`…, a folder
    /// or an object store URL).
    #[arg(long, value_name = "ROOT")]
    pub landing: Option<String>,
    /// A batch lease not renewed for this long counts as stale (with `--landing`)
    /// [default: `lease_ttl` in bronze.toml, else 10m].
    #[arg(long, value_parser = str::parse::<bronze::Duration>, value_name = "DURATION")]
    pub lease_ttl: Option<bronze::Duration>,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// `bash`, `zsh`, `fish`, `powershell`, `elvish`, or `man` for the man page (roff).
    #[arg(value_parser = ["bash", "zsh", "fish", "powershell", "elvish", "man"])]
    pub shell: String,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("action").required(true).args(["move_to", "delete"]))]
pub struct CleanArgs {
    /// The landing zone: `landing/`, `landing/<source>/` or `landing/<source>/<entity>/`,
    /// a folder or an object store URL.
    pub root: String,
    /// Clean batches whose load started at least this long ago (`30d`, `72h`).
    #[arg(long, value_parser = parse_ttl, value_name = "DURATION")]
    pub older_than: std::time::Duration,
    /// Move the files under this folder or object store URL (outside ROOT), keeping
    /// `<source>/<entity>/batch_id=<id>/`.
    #[arg(long, value_name = "DEST")]
    pub move_to: Option<String>,
    /// Delete the files (with --older-than 7d or more).
    #[arg(long)]
    pub delete: bool,
    /// List what would be cleaned; touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The landing zone: `landing/`, `landing/<source>/` or `landing/<source>/<entity>/`,
    /// a folder or an object store URL.
    pub root: String,
    /// A batch lease not renewed for this long is reported stale (as `bronze ingest
    /// --lease-ttl`; `10m`, `90s`, `2h`) [default: `lease_ttl` in bronze.toml, else 10m].
    #[arg(long, value_parser = str::parse::<bronze::Duration>, value_name = "DURATION")]
    pub lease_ttl: Option<bronze::Duration>,
    /// In an object store, list each entity's folders in full when the last full listing
    /// is this old (as `bronze ingest --full-listing-every`); in between only the folders
    /// after its last loaded batch are listed [default: `full_listing_every` in
    /// bronze.toml, else 24h].
    #[arg(long, value_parser = str::parse::<bronze::Duration>, value_name = "DURATION")]
    pub full_listing_every: Option<bronze::Duration>,
    /// Print the backlog as Prometheus metrics (the text exposition format, for the
    /// node_exporter textfile collector or a scrape): per `landing_path`, batches
    /// pending, failed and in progress, the age of the oldest batch not loaded (since
    /// its folder's newest file landed) and when a batch last loaded.
    ///
    /// Example: bronze status landing/ --metrics > /var/lib/node_exporter/bronze.prom
    #[arg(long, conflicts_with = "json")]
    pub metrics: bool,
    #[command(flatten)]
    pub location: Location,
}

/// Where the tables are; shared by the maintenance commands.
#[derive(Debug, Args)]
pub struct Location {
    /// Root of the lakehouse: a folder, or an object store URL (s3://bucket/lake,
    /// abfss://container@account.dfs.core.windows.net/lake, gs://bucket/lake)
    /// [default: `catalog` in bronze.toml, else ./lakehouse].
    #[arg(long)]
    pub catalog: Option<String>,
    /// Object store option KEY=VALUE (credentials, endpoint, region), repeatable; over the
    /// standard environment variables (AWS_*, AZURE_STORAGE_*, GOOGLE_*) and the settings
    /// file's [storage] section. Never shown.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<String>,
    /// Schema (sub-folder of the catalog) holding the tables [default: `schema` in
    /// bronze.toml, else bronze].
    #[arg(long)]
    pub schema: Option<String>,
    /// Only one process ever writes this catalog: needed on an S3-compatible store
    /// without put-if-absent (refused otherwise); two writers at once could then lose
    /// commits.
    #[arg(long)]
    pub single_writer: bool,
    /// Settings file (TOML) with the catalog, schema, storage options and lease settings
    /// (the keys `bronze ingest --config` reads). Default: `./bronze.toml` when it exists.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl Location {
    /// The settings these flags give (a layer over the settings file's).
    fn settings(&self) -> Result<Settings> {
        Ok(Settings {
            catalog: self.catalog.clone(),
            storage: storage_options(&self.storage_options)?,
            schema: self.schema.clone(),
            single_writer: self.single_writer.then_some(true),
            ..Settings::default()
        })
    }

    /// The configuration of this catalog and schema: `more` over these flags over the
    /// settings file.
    pub fn config_with(&self, more: Settings) -> Result<IngestConfig> {
        more.over(self.settings()?)
            .over(settings_file(self.config.as_deref())?)
            .resolve()
    }

    /// The configuration of this catalog and schema.
    pub fn config(&self) -> Result<IngestConfig> {
        self.config_with(Settings::default())
    }

    /// The storage options (to mask their values out of what is printed).
    pub fn options(&self) -> bronze::StorageOptions {
        self.config().map(|c| c.storage_options).unwrap_or_default()
    }

    /// An `Ingest` for maintenance on this catalog and schema.
    pub fn ingest(&self) -> Result<bronze::Ingest> {
        bronze::Ingest::from_config(self.config()?)
    }
}

/// The settings file: `--config FILE`, else `./bronze.toml` when it exists, else none.
fn settings_file(path: Option<&std::path::Path>) -> Result<Settings> {
    let default_file = std::path::Path::new("bronze.toml");
    match path {
        Some(path) => Settings::load(path),
        None if default_file.is_file() => Settings::load(default_file),
        None => Ok(Settings::default()),
    }
}

/// `--storage-option KEY=VALUE`s.
fn storage_options(pairs: &[String]) -> Result<bronze::StorageOptions> {
    let mut options = bronze::StorageOptions::default();
    for pair in pairs {
        options.insert_pair(pair)?;
    }
    Ok(options)
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    pub metastore: MetastoreArgs,
    #[command(flatten)]
    pub location: Location,
}

/// The catalog tables are registered in (`[metastore]` of bronze.toml).
#[derive(Debug, Args)]
pub struct MetastoreArgs {
    /// The catalog tables are registered in: `glue`, `hive` or `unity` (`[metastore]
    /// kind`).
    #[arg(long, value_parser = parse_enum::<bronze::MetastoreKind>)]
    pub metastore: Option<bronze::MetastoreKind>,
    /// Glue's region (`[metastore] region`).
    #[arg(long)]
    pub metastore_region: Option<String>,
    /// An endpoint serving the catalog's API instead of its own (`[metastore] endpoint`).
    #[arg(long)]
    pub metastore_endpoint: Option<String>,
    /// Where the catalog is: the Hive Metastore's `thrift://host:9083`, Unity Catalog's
    /// `https://host` (`[metastore] uri`).
    #[arg(long)]
    pub metastore_uri: Option<String>,
    /// The environment variable holding Unity Catalog's bearer token (`[metastore]
    /// token_env`) [default: DATABRICKS_TOKEN].
    #[arg(long)]
    pub metastore_token_env: Option<String>,
    /// The catalog database the tables go in, a template over `{source}` and `{entity}`
    /// (`bronze_{entity}`; `[metastore] database`) [default: the schema's name].
    #[arg(long)]
    pub metastore_database: Option<String>,
    /// Each request to the catalog given up after this long (`[metastore] timeout`)
    /// [default: 30s].
    #[arg(long, value_parser = parse_ttl)]
    pub metastore_timeout: Option<std::time::Duration>,
    /// Registers bronze's own tables (`_run_control`, `_corrupt_records`) too
    /// (`[metastore] own_tables`).
    #[arg(long)]
    pub metastore_own_tables: bool,
}

impl MetastoreArgs {
    /// `[metastore]` as these flags give it.
    pub fn settings(&self) -> bronze::MetastoreSettings {
        bronze::MetastoreSettings {
            kind: self.metastore,
            region: self.metastore_region.clone(),
            endpoint: self.metastore_endpoint.clone(),
            uri: self.metastore_uri.clone(),
            token_env: self.metastore_token_env.clone(),
            database: self.metastore_database.clone(),
            timeout: self.metastore_timeout.map(bronze::Duration),
            own_tables: self.metastore_own_tables.then_some(true),
        }
    }
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The table.
    pub table: String,
    /// Newest commits to show (default all).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Times in this machine's time zone (default UTC). `--json` always has both the
    /// ISO 8601 UTC time and epoch milliseconds.
    #[arg(long)]
    pub local: bool,
    #[command(flatten)]
    pub location: Location,
}

/// A table name or `--all`.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Tables {
    /// The table.
    pub table: Option<String>,
    /// Every table of the schema.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct OptimizeArgs {
    #[command(flatten)]
    pub tables: Tables,
    /// Target file size (e.g. 128MB; default the table's target, 128 MiB).
    #[arg(long, value_parser = parse_budget)]
    pub target_size: Option<u64>,
    /// Z-order by these columns (comma separated) instead of bin-packing.
    #[arg(long, value_delimiter = ',')]
    pub zorder: Vec<String>,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct VacuumArgs {
    #[command(flatten)]
    pub tables: Tables,
    /// Keep files referenced by any version newer than this (e.g. 168h, 7d) [default:
    /// the table's delta.deletedFileRetentionDuration, at least 168h].
    #[arg(long, value_parser = parse_hours)]
    pub retain: Option<u64>,
    /// List what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Allow a retention under the table's own or under 168h.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct MaintainArgs {
    /// Start no table once this much time has passed (the table in progress finishes;
    /// the rest are listed and wait for the next run), e.g. 30m, 2h.
    #[arg(long, value_parser = parse_ttl, value_name = "DURATION")]
    pub max_duration: Option<std::time::Duration>,
    /// Visit at most N tables, the worst first.
    #[arg(long, value_name = "N")]
    pub max_tables: Option<usize>,
    /// VACUUM keeps files referenced by any version newer than this (e.g. 168h, 7d)
    /// [default: each table's delta.deletedFileRetentionDuration, at least 168h].
    #[arg(long, value_parser = parse_hours)]
    pub retain: Option<u64>,
    /// Allow a retention under a table's own or under 168h.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub tables: Tables,
    #[command(flatten)]
    pub location: Location,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// The batch folder(s), normally `landing/<source>/<entity>/batch_id=<id>`. Several
    /// folders (or a quoted glob such as 'landing/*/*/batch_id=X') must share one batch
    /// id and load as one batch: one dedup across them (first wins by landing path, then
    /// file, then line), one commit per table.
    #[arg(required = true, num_args = 1.., value_name = "BATCH_DIR")]
    pub batch_dirs: Vec<PathBuf>,
    /// Treat the folder given as a landing zone (`landing/`, `landing/<source>/` or
    /// `landing/<source>/<entity>/`, local or an object store URL): load every
    /// `batch_id=` folder under it that the catalog has not loaded successfully, oldest
    /// batch id first within each entity. Several processes may run the same command:
    /// each batch is loaded by one of them. An entity whose batch fails, is busy with
    /// another worker or is still being copied waits for the next invocation.
    ///
    /// Example: bronze ingest --pending landing/ --catalog ./lakehouse --max-batches 50
    #[arg(long, conflicts_with_all = ["batch_id", "landing_path"])]
    pub pending: bool,
    /// With --pending: load at most N batches in this invocation.
    #[arg(long, value_name = "N", requires = "pending")]
    pub max_batches: Option<usize>,
    /// With --pending: load up to N batches at once, of different entities (each
    /// entity's still in batch id order). Each batch in flight has its own threads and
    /// its own --memory-budget, so N multiplies the memory a run may use.
    #[arg(long, value_name = "N", requires = "pending", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_batches_in_flight: u16,
    /// With --pending: start no batch once the batches of this invocation read SIZE of
    /// landing files (512MB, 20GiB); the batch that crosses it is finished, never cut.
    #[arg(long, value_name = "SIZE", requires = "pending", value_parser = parse_budget)]
    pub max_bytes: Option<u64>,
    /// With --pending: load an entity's batches in any order, for a backfill spread over
    /// every worker (with --max-batches-in-flight, several processes, or Spark tasks): a
    /// failed, busy or unfinished batch holds none of its entity's later batches back,
    /// and an entity's schema evolves in the order its batches commit, not batch id
    /// order. `status` still shows the oldest pending batch.
    #[arg(long, requires = "pending")]
    pub unordered: bool,
    /// With --pending: load only folders holding a `_SUCCESS` marker (the copy step is
    /// done); an entity's later batches wait behind one without it.
    #[arg(long, requires = "pending")]
    pub require_success: bool,
    /// With --pending: keep going: look for pending batches again every --interval until
    /// interrupted. Ctrl-C lets the batch in flight finish and commit, then exits; a
    /// second Ctrl-C stops at once (the batch is resumed or repaired by the next run).
    #[arg(long, requires = "pending")]
    pub watch: bool,
    /// With --watch: the pause between two looks at the landing zone (`60s`, `5m`).
    #[arg(long, default_value = "60s", value_parser = parse_ttl, requires = "watch")]
    pub interval: std::time::Duration,
    /// Settings file (TOML): envelope, dedup keys, flattening, evolution per topic, child
    /// table names. Default: `./bronze.toml` when it exists. Flags override it; unknown
    /// keys are an error. See docs/settings.md for every key.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Root of the lakehouse: a folder (created if missing) or an object store URL
    /// (s3://bucket/lake, abfss://container@account.dfs.core.windows.net/lake,
    /// gs://bucket/lake) [default: ./lakehouse].
    #[arg(long)]
    pub catalog: Option<String>,
    /// Object store option KEY=VALUE (credentials, endpoint, region), repeatable; over the
    /// standard environment variables (AWS_*, AZURE_STORAGE_*, GOOGLE_*) and the config
    /// file's [storage] section. Values are never shown.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_options: Vec<String>,
    /// Schema (sub-folder of the catalog) holding the tables [default: bronze].
    #[arg(long)]
    pub schema: Option<String>,
    /// Batch id to use instead of the folder's `batch_id=<id>` ([A-Za-z0-9_-], up to 128).
    #[arg(long)]
    pub batch_id: Option<String>,
    /// Landing path of the batch folder, `<source>/<entity>`, instead of the names of the
    /// two folders above `batch_id=<id>` (one folder only). With the batch id it is the
    /// batch's identity: what a rerun replaces.
    #[arg(long, value_name = "SOURCE/ENTITY")]
    pub landing_path: Option<String>,
    /// Envelope field holding the topic (e.g. `type`, `_path`, `event_type`) [default: topic].
    #[arg(long)]
    pub topic_field: Option<String>,
    /// Envelope field holding the message id; '' for none (no dedup, ids from file and
    /// line) [default: message_id].
    #[arg(long)]
    pub id_field: Option<String>,
    /// Envelope field holding the payload; '' for none (every non-envelope field is
    /// payload) [default: payload].
    #[arg(long)]
    pub payload_field: Option<String>,
    /// Top-level fields whose values together form the dedup key, instead of the id
    /// field (`--dedup-fields source,seq`); a line missing one of them is never a
    /// duplicate [default: the id field].
    #[arg(long, value_delimiter = ',', value_name = "FIELD,...")]
    pub dedup_fields: Option<Vec<String>>,
    /// How leaf values are typed: `infer` (bool/int64/float64/string per column, mixed
    /// columns as JSON text) or `strings` (every leaf as text) [default: infer].
    #[arg(long, value_parser = parse_enum::<bronze::TypesMode>)]
    pub types: Option<bronze::TypesMode>,
    /// What a field with no column in an existing table does: `add` the column in the same
    /// commit, `rescue` it into `_rescued_data`, or `fail` the topic's write [default: add].
    #[arg(long, value_parser = parse_enum::<bronze::Evolution>)]
    pub evolution: Option<bronze::Evolution>,
    /// A field with no column in an existing table of one topic: `TOPIC=add|rescue|fail`
    /// (`[topics."<topic>"] evolution` in bronze.toml), repeatable.
    #[arg(long, value_name = "TOPIC=MODE", value_parser = parse_topic_mode::<bronze::Evolution>)]
    pub topic_evolution: Vec<(String, bronze::Evolution)>,
    /// What one topic's payload becomes: `TOPIC=flatten` (columns and child tables) or
    /// `TOPIC=variant` (one `payload` column of type `variant` holding it whole, no child
    /// tables; `[topics."<topic>"] payload` in bronze.toml), repeatable. A topic's table
    /// keeps the mode it was created with: switching an existing table is refused, naming
    /// how to reload it.
    #[arg(long, value_name = "TOPIC=MODE", value_parser = parse_topic_mode::<bronze::PayloadMode>)]
    pub topic_payload: Vec<(String, bronze::PayloadMode)>,
    /// The child table of an array path: `PATH=TABLE` (`--child-table
    /// 'payload.quotes[].currentprice=currentprice'`; `[flatten.child_tables]` in
    /// bronze.toml), repeatable.
    #[arg(long, value_name = "PATH=TABLE", value_parser = parse_child_table)]
    pub child_table: Vec<(String, String)>,
    /// Child tables named by array `path` (shared across topics: `currentprice`) or
    /// qualified by `topic` (`quote__currentprice`) [default: path].
    #[arg(long, value_parser = parse_enum::<bronze::ChildNaming>)]
    pub child_naming: Option<bronze::ChildNaming>,
    /// The type of the value at a payload path, for every topic or one:
    /// `[TOPIC:]POINTER=TYPE`, repeatable (`--column-type '/amount=decimal(18,2)'`,
    /// `--column-type 'trade:/ts=timestamp'`, `/currentprice/*/ts` for a child table's
    /// column). TYPE: string, boolean, int64, float64, decimal(P,S), date, timestamp
    /// (UTC), json. A value that does not convert is null in its column and kept in
    /// `_rescued_data` (`[flatten.column_types]` in bronze.toml).
    #[arg(long, value_name = "[TOPIC:]POINTER=TYPE", value_parser = bronze::column_types::parse_hint)]
    pub column_type: Vec<(String, bronze::ColumnType)>,
    /// String columns whose every value is an RFC 3339 timestamp (with `Z` or an offset)
    /// become UTC timestamps, every value a date (`2026-01-15`) dates:
    /// `--detect-types timestamp,date` (`detect_types` in `[flatten]`) [default: none].
    #[arg(long, value_delimiter = ',', value_name = "TYPE,...", value_parser = parse_enum::<bronze::DetectType>)]
    pub detect_types: Option<Vec<bronze::DetectType>>,
    /// Topics processed at once (default: 2 per core, at most 32, on a local catalog; 32
    /// on an object store, where commits wait on the network; 1 = sequential).
    #[arg(long)]
    pub max_parallel: Option<usize>,
    /// Threads used to parse files (default: all cores).
    #[arg(long, env = "BRONZE_THREADS")]
    pub threads: Option<usize>,
    /// Nesting depth beyond which sub-trees are kept as JSON text [default: 16].
    #[arg(long)]
    pub max_depth: Option<usize>,
    /// Persist the staging table `_tmp_raw_load_<batch_id>` even when the batch fits in
    /// memory, so a crashed run can resume from it. Dropped when the batch ends.
    #[arg(long)]
    pub persist_staging: bool,
    /// Memory staging may use (e.g. 512MB, 2GiB); a batch needing more (about 3x its
    /// landing size) is staged in chunks that spill to the staging table. Its message
    /// ids (~40 bytes each, kept to drop duplicates) count against it: a batch of millions
    /// of short messages needs ~90 MB for them. Default: a quarter of the machine's
    /// memory.
    #[arg(long, value_parser = str::parse::<bronze::Size>)]
    pub memory_budget: Option<bronze::Size>,
    /// Re-read the landing files even if a complete staging table of an earlier run of this
    /// batch exists (by default the run resumes from it).
    #[arg(long)]
    pub no_resume: bool,
    /// Only one process ever writes this catalog. Needed on an S3-compatible store
    /// without put-if-absent (conditional put disabled or ignored), which is refused
    /// otherwise: commits then go by copy-then-delete and the lease by check-then-write,
    /// so two writers at once could overwrite each other's commits and lose data.
    #[arg(long)]
    pub single_writer: bool,
    /// How long the batch lease stays valid without renewal (e.g. 10m, 90s, 2h). A run
    /// renews it every quarter of this; a lease not renewed within it (its run was
    /// killed or its host lost) is taken over by the next run of the batch [default: 10m].
    #[arg(long, value_parser = str::parse::<bronze::Duration>, value_name = "DURATION")]
    pub lease_ttl: Option<bronze::Duration>,
    /// With `--pending` on an object store: list each entity's folders in full when the
    /// last full listing is this old (e.g. 24h, 1h, 0s for every round). In between, only
    /// the folders after the entity's last loaded batch are listed, a few requests
    /// however many batches were loaded before; a folder that lands late with an older
    /// batch id is found, warned about and loaded at the next full listing. Local
    /// landing zones are always listed in full [default: 24h].
    #[arg(long, value_parser = str::parse::<bronze::Duration>, value_name = "DURATION")]
    pub full_listing_every: Option<bronze::Duration>,
    /// The size the data files of a write aim at (optimize write; bytes or e.g. 64MiB,
    /// 1GiB). Rows of one table and batch are split into files of about this size, and a
    /// new table records it as `delta.targetFileSize` (used by `bronze optimize` and
    /// auto compaction) [default: 128MiB; `target_file_size` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --target-file-size 256MiB
    #[arg(long, value_parser = str::parse::<bronze::Size>, value_name = "SIZE")]
    pub target_file_size: Option<bronze::Size>,
    /// Parquet compression of the data files: snappy (fastest to write and read), lz4_raw
    /// (as fast; older Spark and Hive readers lack it), zstd or zstd(N) with N 1 to 22
    /// (zstd(1): files ~40 % smaller for twice the encode time), gzip, uncompressed
    /// [default: snappy; `compression` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --compression 'zstd(3)'
    #[arg(long, value_parser = str::parse::<bronze::Codec>, value_name = "CODEC")]
    pub compression: Option<bronze::Codec>,
    /// Compact a table right after a commit once it has --auto-compact-min-files files
    /// under half the target file size (a table with
    /// `delta.autoOptimize.autoCompact=false` never is) [default: on; `auto_compact` in
    /// bronze.toml]. Overrides a settings file's `auto_compact = false`.
    #[arg(long, overrides_with = "no_auto_compact")]
    pub auto_compact: bool,
    /// Never compact after a commit: small files wait for `bronze optimize` or `bronze
    /// maintain` (`auto_compact = false` in bronze.toml).
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --no-auto-compact
    #[arg(long, overrides_with = "auto_compact")]
    pub no_auto_compact: bool,
    /// Files under half the target file size a table must have before a commit compacts
    /// it [default: 50, Databricks' minNumFiles; `auto_compact_min_files` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --auto-compact-min-files 20
    #[arg(long, value_name = "N")]
    pub auto_compact_min_files: Option<u64>,
    /// Take the batch lease (<CATALOG>/<SCHEMA>/_bronze_leases/), so that two runs of one
    /// batch never load it at once [default: on; `batch_lease` in bronze.toml]. Overrides
    /// a settings file's `batch_lease = false`.
    #[arg(long, overrides_with = "no_batch_lease")]
    pub batch_lease: bool,
    /// Take no batch lease: only when runs are coordinated elsewhere (an orchestrator
    /// that never starts a batch twice); two runs of one batch at once could then
    /// interleave their commits (`batch_lease = false` in bronze.toml).
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --no-batch-lease
    #[arg(long, overrides_with = "batch_lease")]
    pub no_batch_lease: bool,
    /// How writes to one table are serialized within the run: `per_table` (only writes to
    /// the same table wait), `global` (every write waits for every other) or `none`
    /// (Delta's conflict checks alone); the last two exist to compare [default: per_table;
    /// `lock_policy` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --lock-policy global
    #[arg(long, value_name = "POLICY", value_parser = parse_enum::<bronze::LockPolicy>)]
    pub lock_policy: Option<bronze::LockPolicy>,
    /// How a batch's rows become commits: `table` (one commit per table with every
    /// topic's rows) or `topic` (one per topic and table, as a notebook looping over
    /// topics does: more commits and files, kept to compare) [default: table;
    /// `commit_per` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --commit-per topic
    #[arg(long, value_name = "UNIT", value_parser = parse_enum::<bronze::CommitPer>)]
    pub commit_per: Option<bronze::CommitPer>,
    /// How a landing file holds its records: `lines` (JSON Lines), `array` (one JSON
    /// array of envelopes), `stream` (envelopes one after another, pretty-printed over
    /// many lines) or `auto`, decided per file by its first non-blank byte (`[` an array,
    /// unless it closes on its line and lines follow; a `{` whose value goes on past its
    /// line a stream; else lines). Each record's `_line` is its first line; a broken
    /// record is kept whole in _corrupt_records [default: auto; `format` in bronze.toml].
    ///
    /// Example: bronze ingest landing/s/e/batch_id=1 --format array
    #[arg(long, value_name = "FORMAT", value_parser = parse_enum::<bronze::Format>)]
    pub format: Option<bronze::Format>,
    /// With --pending: what to do with a loaded batch whose folder changed after its load
    /// (a file landed late, changed or was removed; each batch's manifest records what
    /// its load read): `reload` loads it again as a rerun and says why, `report` lists it
    /// (here, in `bronze status` and the metrics) and leaves it, `fail` lists it as
    /// failed (exit code 2). Only removed files never reload: the rerun would drop their
    /// rows. Each entity's three latest loaded batches are checked every round, all of
    /// them once per --full-listing-every [default: reload; `late_files` in bronze.toml].
    ///
    /// Example: bronze ingest --pending landing/ --late-files report
    #[arg(long, value_name = "POLICY", value_parser = parse_enum::<bronze::LateFiles>)]
    pub late_files: Option<bronze::LateFiles>,
    /// Push each batch run's metrics to this Prometheus Pushgateway (job `bronze`,
    /// grouped by landing path; `[metrics] push_url` in bronze.toml): rows per table,
    /// messages, corrupt lines, duplicates, stage times, store requests, success and the
    /// last success's time. A gateway that is down or slow costs a warning and at most
    /// 5 s, never the batch or the exit code.
    ///
    /// Example: bronze ingest --pending landing/ --metrics-push http://pushgateway:9091
    #[arg(long, value_name = "URL")]
    pub metrics_push: Option<String>,
    #[command(flatten)]
    pub metastore: MetastoreArgs,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

impl IngestArgs {
    /// The settings these flags give, by their names in bronze.toml.
    pub fn settings(&self) -> Result<Settings> {
        Ok(Settings {
            catalog: self.catalog.clone(),
            storage: storage_options(&self.storage_options)?,
            schema: self.schema.clone(),
            batch_id: self.batch_id.clone(),
            landing_path: self.landing_path.clone(),
            max_parallel: self.max_parallel,
            threads: self.threads,
            memory_budget: self.memory_budget,
            persist_staging: self.persist_staging.then_some(true),
            resume: self.no_resume.then_some(false),
            lease_ttl: self.lease_ttl,
            full_listing_every: self.full_listing_every,
            single_writer: self.single_writer.then_some(true),
            target_file_size: self.target_file_size,
            compression: self.compression,
            auto_compact: on_off(self.auto_compact, self.no_auto_compact),
            auto_compact_min_files: self.auto_compact_min_files,
            batch_lease: on_off(self.batch_lease, self.no_batch_lease),
            lock_policy: self.lock_policy,
            commit_per: self.commit_per,
            format: self.format,
            late_files: self.late_files,
            envelope: bronze::EnvelopeSettings {
                topic_field: self.topic_field.clone(),
                id_field: self.id_field.clone(),
                payload_field: self.payload_field.clone(),
                dedup_fields: self.dedup_fields.clone(),
            },
            flatten: bronze::FlattenSettings {
                max_depth: self.max_depth,
                types: self.types,
                evolution: self.evolution,
                child_naming: self.child_naming,
                child_tables: self.child_table.iter().cloned().collect(),
                column_types: column_types(&self.column_type)?,
                detect_types: self.detect_types.clone(),
            },
            metrics: bronze::MetricsSettings {
                push_url: self.metrics_push.clone(),
            },
            metastore: self.metastore.settings(),
            topics: self.topic_settings(),
        })
    }

    /// `[topics."<topic>"]` as `--topic-evolution` and `--topic-payload` give them.
    fn topic_settings(&self) -> std::collections::BTreeMap<String, bronze::TopicSettings> {
        let mut topics = std::collections::BTreeMap::<String, bronze::TopicSettings>::new();
        for (topic, mode) in &self.topic_evolution {
            topics.entry(topic.clone()).or_default().evolution = Some(*mode);
        }
        for (topic, mode) in &self.topic_payload {
            topics.entry(topic.clone()).or_default().payload = Some(*mode);
        }
        topics
    }

    /// The library settings these flags describe, over the settings file's (validated by
    /// the library).
    pub fn to_config(&self) -> Result<IngestConfig> {
        self.settings()?
            .over(settings_file(self.config.as_deref())?)
            .resolve()
    }
}

/// The `--column-type` hints by `[TOPIC:]POINTER`; the same one given twice is an error
/// naming both (as a key twice in `bronze.toml` is).
fn column_types(
    hints: &[(String, bronze::ColumnType)],
) -> Result<std::collections::BTreeMap<String, bronze::ColumnType>> {
    let mut out = std::collections::BTreeMap::new();
    for (key, ty) in hints {
        if let Some(first) = out.insert(key.clone(), *ty) {
            return Err(bronze::Error::Config {
                name: "column_types",
                reason: format!(
                    "`--column-type {key}={first}` and `--column-type {key}={ty}`: one type per pointer"
                ),
            });
        }
    }
    Ok(out)
}

/// A setting a `--X` / `--no-X` pair gives: `true`, `false`, or unset when neither is
/// given (clap keeps only the last of the two).
fn on_off(on: bool, off: bool) -> Option<bool> {
    (on || off).then_some(on)
}

/// Parses a lower-case setting value the way `bronze.toml` spells it.
fn parse_enum<T: serde::de::DeserializeOwned>(s: &str) -> std::result::Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| format!("{s:?}: {e}"))
}

/// `TOPIC=MODE` of `--topic-evolution` and `--topic-payload`.
fn parse_topic_mode<T: serde::de::DeserializeOwned>(
    s: &str,
) -> std::result::Result<(String, T), String> {
    let (topic, mode) = s
        .rsplit_once('=')
        .filter(|(topic, _)| !topic.is_empty())
        .ok_or_else(|| format!("{s:?} is not TOPIC=MODE (e.g. trade=fail, events=variant)"))?;
    Ok((topic.to_string(), parse_enum(mode)?))
}

/// `PATH=TABLE` of `--child-table`.
fn parse_child_table(s: &str) -> std::result::Result<(String, String), String> {
    s.rsplit_once('=')
        .filter(|(path, table)| !path.is_empty() && !table.is_empty())
        .map(|(path, table)| (path.to_string(), table.to_string()))
        .ok_or_else(|| format!("{s:?} is not PATH=TABLE (e.g. quotes[].currentprice=currentprice)"))
}

/// A size flag, with the settings' text for a bad one.
fn parse_budget(s: &str) -> std::result::Result<u64, String> {
    s.parse::<bronze::Size>().map(|s| s.0)
}

/// A duration flag, with the settings' text for a bad one.
fn parse_ttl(s: &str) -> std::result::Result<std::time::Duration, String> {
    s.parse::<bronze::Duration>().map(|d| d.0)
}

/// A bare number of hours, or a duration as the settings take it (`168h`, `7d`, `90m`),
/// rounded up to whole hours; with the settings' text for a bad one.
pub fn parse_hours(s: &str) -> std::result::Result<u64, String> {
    if let Ok(hours) = s.trim().parse::<u64>() {
        return Ok(hours);
    }
    const HOUR_NANOS: u128 = 3600 * 1_000_000_000;
    let hours = s
        .parse::<bronze::Duration>()?
        .0
        .as_nanos()
        .div_ceil(HOUR_NANOS);
    Ok(u64::try_from(hours).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bronze ingest DIR <flags>`'s configuration, without a settings file.
    fn from_flags(flags: &[&str]) -> String {
        let mut argv = vec!["bronze", "ingest", "landing/s/e/batch_id=1"];
        argv.extend(flags);
        let Command::Ingest(args) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!("an ingest command")
        };
        format!("{:?}", args.settings().unwrap().resolve().unwrap())
    }

    /// Every setting, set through `bronze.toml`, the CLI's flags and Python's keyword
    /// arguments (as the JSON `Settings::from_json` reads; `python/tests/test_settings.py`
    /// sends the same keys through the package itself), gives the same configuration,
    /// and not the default one; and the table holds every setting.
    #[test]
    fn every_setting_is_reachable_by_one_name_from_the_file_the_flags_and_python() {
        let cases: &[(&str, &[&str], serde_json::Value)] = &[
            (
                "catalog = \"/data/lake\"",
                &["--catalog", "/data/lake"],
                serde_json::json!({"catalog": "/data/lake"}),
            ),
            (
                "schema = \"raw\"",
                &["--schema", "raw"],
                serde_json::json!({"schema": "raw"}),
            ),
            (
                "[storage]\nAWS_REGION = \"eu-west-1\"",
                &["--storage-option", "AWS_REGION=eu-west-1"],
                serde_json::json!({"storage_options": {"AWS_REGION": "eu-west-1"}}),
            ),
            (
                "batch_id = \"b1\"",
                &["--batch-id", "b1"],
                serde_json::json!({"batch_id": "b1"}),
            ),
            (
                "landing_path = \"s/e\"",
                &["--landing-path", "s/e"],
                serde_json::json!({"landing_path": "s/e"}),
            ),
            (
                "max_parallel = 3",
                &["--max-parallel", "3"],
                serde_json::json!({"max_parallel": 3}),
            ),
            (
                "threads = 3",
                &["--threads", "3"],
                serde_json::json!({"threads": 3}),
            ),
            (
                "memory_budget = \"64MiB\"",
                &["--memory-budget", "64MiB"],
                serde_json::json!({"memory_budget": 67108864}),
            ),
            (
                "persist_staging = true",
                &["--persist-staging"],
                serde_json::json!({"persist_staging": true}),
            ),
            (
                "resume = false",
                &["--no-resume"],
                serde_json::json!({"resume": false}),
            ),
            (
                "lease_ttl = \"90s\"",
                &["--lease-ttl", "90s"],
                serde_json::json!({"lease_ttl": 90.0}),
            ),
            (
                "full_listing_every = 3600",
                &["--full-listing-every", "1h"],
                serde_json::json!({"full_listing_every": "1h"}),
            ),
            (
                "single_writer = true",
                &["--single-writer"],
                serde_json::json!({"single_writer": true}),
            ),
            (
                "target_file_size = \"64MiB\"",
                &["--target-file-size", "64MiB"],
                serde_json::json!({"target_file_size": "64MiB"}),
            ),
            (
                "compression = \"zstd(3)\"",
                &["--compression", "zstd(3)"],
                serde_json::json!({"compression": "zstd(3)"}),
            ),
            (
                "auto_compact = false",
                &["--no-auto-compact"],
                serde_json::json!({"auto_compact": false}),
            ),
            (
                "auto_compact_min_files = 10",
                &["--auto-compact-min-files", "10"],
                serde_json::json!({"auto_compact_min_files": 10}),
            ),
            (
                "batch_lease = false",
                &["--no-batch-lease"],
                serde_json::json!({"batch_lease": false}),
            ),
            (
                "lock_policy = \"global\"",
                &["--lock-policy", "global"],
                serde_json::json!({"lock_policy": "global"}),
            ),
            (
                "commit_per = \"topic\"",
                &["--commit-per", "topic"],
                serde_json::json!({"commit_per": "topic"}),
            ),
            (
                "format = \"array\"",
                &["--format", "array"],
                serde_json::json!({"format": "array"}),
            ),
            (
                "late_files = \"fail\"",
                &["--late-files", "fail"],
                serde_json::json!({"late_files": "fail"}),
            ),
            (
                "[envelope]\ntopic_field = \"type\"",
                &["--topic-field", "type"],
                serde_json::json!({"envelope": {"topic_field": "type"}}),
            ),
            (
                "[envelope]\nid_field = \"\"",
                &["--id-field", ""],
                serde_json::json!({"envelope": {"id_field": ""}}),
            ),
            (
                "[envelope]\npayload_field = \"\"",
                &["--payload-field", ""],
                serde_json::json!({"envelope": {"payload_field": ""}}),
            ),
            (
                "[envelope]\ndedup_fields = [\"source\", \"seq\"]",
                &["--dedup-fields", "source,seq"],
                serde_json::json!({"envelope": {"dedup_fields": ["source", "seq"]}}),
            ),
            (
                "[flatten]\nmax_depth = 4",
                &["--max-depth", "4"],
                serde_json::json!({"flatten": {"max_depth": 4}}),
            ),
            (
                "[flatten]\ntypes = \"strings\"",
                &["--types", "strings"],
                serde_json::json!({"flatten": {"types": "strings"}}),
            ),
            (
                "[flatten]\nevolution = \"rescue\"",
                &["--evolution", "rescue"],
                serde_json::json!({"flatten": {"evolution": "rescue"}}),
            ),
            (
                "[flatten]\nchild_naming = \"topic\"",
                &["--child-naming", "topic"],
                serde_json::json!({"flatten": {"child_naming": "topic"}}),
            ),
            (
                "[flatten.child_tables]\n\"quotes[].currentprice\" = \"prices\"",
                &["--child-table", "quotes[].currentprice=prices"],
                serde_json::json!({"flatten": {"child_tables": {"quotes[].currentprice": "prices"}}}),
            ),
            (
                "[topics.\"market.quote\"]\nevolution = \"fail\"",
                &["--topic-evolution", "market.quote=fail"],
                serde_json::json!({"topics": {"market.quote": {"evolution": "fail"}}}),
            ),
            (
                "[metastore]\nkind = \"glue\"\nregion = \"eu-west-1\"",
                &["--metastore", "glue", "--metastore-region", "eu-west-1"],
                serde_json::json!({"metastore": {"kind": "glue", "region": "eu-west-1"}}),
            ),
            (
                "[metastore]\nkind = \"glue\"\nregion = \"r\"\nendpoint = \"http://127.0.0.1:5000\"",
                &[
                    "--metastore",
                    "glue",
                    "--metastore-region",
                    "r",
                    "--metastore-endpoint",
                    "http://127.0.0.1:5000",
                ],
                serde_json::json!({"metastore": {"kind": "glue", "region": "r", "endpoint": "http://127.0.0.1:5000"}}),
            ),
            (
                "[metastore]\nkind = \"hive\"\nuri = \"thrift://127.0.0.1:9083\"",
                &[
                    "--metastore",
                    "hive",
                    "--metastore-uri",
                    "thrift://127.0.0.1:9083",
                ],
                serde_json::json!({"metastore": {"kind": "hive", "uri": "thrift://127.0.0.1:9083"}}),
            ),
            (
                "[metastore]\nkind = \"unity\"\nuri = \"http://uc\"\ntoken_env = \"UC_TOKEN\"\ndatabase = \"main.b\"",
                &[
                    "--metastore",
                    "unity",
                    "--metastore-uri",
                    "http://uc",
                    "--metastore-token-env",
                    "UC_TOKEN",
                    "--metastore-database",
                    "main.b",
                ],
                serde_json::json!({"metastore": {"kind": "unity", "uri": "http://uc", "token_env": "UC_TOKEN", "database": "main.b"}}),
            ),
            (
                "[metastore]\nkind = \"hive\"\nuri = \"thrift://h:9083\"\nown_tables = true",
                &[
                    "--metastore",
                    "hive",
                    "--metastore-uri",
                    "thrift://h:9083",
                    "--metastore-own-tables",
                ],
                serde_json::json!({"metastore": {"kind": "hive", "uri": "thrift://h:9083", "own_tables": true}}),
            ),
            (
                "[metastore]\nkind = \"glue\"\nregion = \"r\"\ndatabase = \"bronze_{entity}\"",
                &[
                    "--metastore",
                    "glue",
                    "--metastore-region",
                    "r",
                    "--metastore-database",
                    "bronze_{entity}",
                ],
                serde_json::json!({"metastore": {"kind": "glue", "region": "r", "database": "bronze_{entity}"}}),
            ),
            (
                "[metastore]\nkind = \"glue\"\nregion = \"r\"\ntimeout = \"5s\"",
                &[
                    "--metastore",
                    "glue",
                    "--metastore-region",
                    "r",
                    "--metastore-timeout",
                    "5s",
                ],
                serde_json::json!({"metastore": {"kind": "glue", "region": "r", "timeout": "5s"}}),
            ),
            (
                "[topics.\"market.event\"]\npayload = \"variant\"",
                &["--topic-payload", "market.event=variant"],
                serde_json::json!({"topics": {"market.event": {"payload": "variant"}}}),
            ),
            (
                "[flatten]\ndetect_types = [\"timestamp\", \"date\"]",
                &["--detect-types", "timestamp,date"],
                serde_json::json!({"flatten": {"detect_types": ["timestamp", "date"]}}),
            ),
            (
                "[flatten.column_types]\n\"/amount\" = \"decimal(18,2)\"",
                &["--column-type", "/amount=decimal(18,2)"],
                serde_json::json!({"flatten": {"column_types": {"/amount": "decimal(18,2)"}}}),
            ),
            (
                "[topics.\"market.trade\".column_types]\n\"/ts\" = \"timestamp\"",
                &["--column-type", "market.trade:/ts=timestamp"],
                serde_json::json!({"topics": {"market.trade": {"column_types": {"/ts": "timestamp"}}}}),
            ),
            (
                "[metrics]\npush_url = \"http://gw:9091\"",
                &["--metrics-push", "http://gw:9091"],
                serde_json::json!({"metrics": {"push_url": "http://gw:9091"}}),
            ),
        ];
        let default = from_flags(&[]);
        for (toml, flags, python) in cases {
            let file = format!(
                "{:?}",
                Settings::from_toml(toml).unwrap().resolve().unwrap()
            );
            let python = format!(
                "{:?}",
                Settings::from_json(python.clone())
                    .unwrap()
                    .resolve()
                    .unwrap()
            );
            assert_ne!(file, default, "{toml}");
            assert_eq!(from_flags(flags), file, "{flags:?} and {toml}");
            assert_eq!(python, file, "{python} and {toml}");
        }
        // The table covers every setting: all its files together leave none unset.
        let all = cases
            .iter()
            .fold(Settings::default(), |below, (toml, _, _)| {
                Settings::from_toml(toml).unwrap().over(below)
            });
        assert_eq!(
            all.unset_keys(),
            Vec::<String>::new(),
            "settings not in the table"
        );
    }

    /// A bad value reads the same whichever layer gave it.
    #[test]
    fn a_bad_value_has_one_text_in_every_layer() {
        for (flag, key, text) in [
            (
                "--lease-ttl",
                "lease_ttl",
                "\"soon\" is not a duration; write e.g. 10m, 90s or 2h",
            ),
            (
                "--memory-budget",
                "memory_budget",
                "\"soon\" is not a size; write e.g. 512MB or 2GiB",
            ),
            (
                "--target-file-size",
                "target_file_size",
                "\"soon\" is not a size; write e.g. 512MB or 2GiB",
            ),
            (
                "--compression",
                "compression",
                "\"soon\" is not a compression; write snappy, lz4_raw, zstd, zstd(3), gzip or uncompressed",
            ),
            (
                "--lock-policy",
                "lock_policy",
                "unknown variant `soon`, expected one of `per_table`, `global`, `none`",
            ),
            (
                "--commit-per",
                "commit_per",
                "unknown variant `soon`, expected `table` or `topic`",
            ),
            (
                "--format",
                "format",
                "unknown variant `soon`, expected one of `auto`, `lines`, `array`, `stream`",
            ),
            (
                "--late-files",
                "late_files",
                "unknown variant `soon`, expected one of `reload`, `report`, `fail`",
            ),
        ] {
            let flag = Cli::try_parse_from(["bronze", "ingest", "d", flag, "soon"])
                .unwrap_err()
                .to_string();
            let file = Settings::from_toml(&format!("{key} = \"soon\""))
                .unwrap_err()
                .to_string();
            let python = Settings::from_json(serde_json::json!({key: "soon"}))
                .unwrap_err()
                .to_string();
            for got in [flag, file, python] {
                assert!(got.contains(text), "{got}");
            }
        }
    }

    /// `--auto-compact` and `--batch-lease` turn back on what a settings file turns off;
    /// of a flag and its `--no-` the last wins.
    #[test]
    fn an_on_flag_overrides_the_files_off_and_the_last_of_a_pair_wins() {
        let file = Settings::from_toml("auto_compact = false\nbatch_lease = false\n").unwrap();
        let parse = |flags: &[&str]| {
            let mut argv = vec!["bronze", "ingest", "d"];
            argv.extend(flags);
            let Command::Ingest(args) = Cli::try_parse_from(argv).unwrap().command else {
                unreachable!("an ingest command")
            };
            args.settings()
                .unwrap()
                .over(file.clone())
                .resolve()
                .unwrap()
        };
        let c = parse(&["--auto-compact", "--batch-lease"]);
        assert!(c.auto_compact && c.batch_lease);
        let c = parse(&[
            "--auto-compact",
            "--no-auto-compact",
            "--no-batch-lease",
            "--batch-lease",
        ]);
        assert!(!c.auto_compact && c.batch_lease);
        let c = parse(&[]);
        assert!(!c.auto_compact && !c.batch_lease);
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_hours("168h"), Ok(168));
        assert_eq!(parse_hours("7d"), Ok(168));
        assert_eq!(parse_hours("90m"), Ok(2));
        assert_eq!(parse_hours("0"), Ok(0));
        assert!(parse_hours("soon").is_err());
    }
}
