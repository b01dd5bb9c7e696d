//! The one public error type.
//!
//! Run-level failures are returned as [`Error`]; record-level problems (a line that is
//! not JSON, a message without a topic) are data, kept in `_corrupt_records` and counted
//! in the [`BatchReport`](crate::BatchReport), never errors.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Longest batch id accepted ([`Error::InvalidBatchId`] states it).
pub const MAX_BATCH_ID_LEN: usize = 128;

/// Longest part of a landing path accepted ([`Error::InvalidLandingPath`] states it).
pub const MAX_LANDING_PART_LEN: usize = 128;

/// A hinted column whose table has it with another type ([`Error::TypeHint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeConflict {
    /// The existing column.
    pub column: String,
    /// The column's path in its rows (`bronze.path`).
    pub path: String,
    /// The hint's pointer in the payload.
    pub hint: String,
    /// The type the table has.
    pub existing: String,
    /// The type the hint asks for.
    pub hinted: String,
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop a run, or one table of a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The batch id is not usable in paths and predicates.
    #[error(
        "invalid batch id {id:?}: {reason}; a batch id is 1 to {max} characters of A-Z, a-z, 0-9, `_` and `-`",
        max = MAX_BATCH_ID_LEN
    )]
    InvalidBatchId {
        /// The refused id, as given.
        id: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The batch folder name does not carry a batch id and none was given.
    #[error(
        "cannot tell the batch id of {}: the folder is not named `batch_id=<id>`; rename it or pass --batch-id",
        path.display()
    )]
    MissingBatchId {
        /// The batch folder.
        path: PathBuf,
    },
    /// A folder's landing path (`<source>/<entity>`) is not usable in paths and ids.
    #[error(
        "invalid landing path {path:?}: {reason}; the two folders above `batch_id=<id>` name a batch's place in the landing zone, each 1 to {max} characters of A-Z, a-z, 0-9, `_`, `-` and `.`: rename them, or pass --landing-path <source>/<entity>",
        max = MAX_LANDING_PART_LEN
    )]
    InvalidLandingPath {
        /// The refused path, as given or found.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// Folders given to one run carry different batch ids.
    #[error(
        "the folders of one run must share a batch id: {} is batch {}, {} is batch {}; load them in separate runs",
        first.0.display(),
        first.1,
        other.0.display(),
        other.1
    )]
    MixedBatchIds {
        /// The first folder and its batch id.
        first: Box<(PathBuf, String)>,
        /// A folder with another batch id, and that id.
        other: Box<(PathBuf, String)>,
    },
    /// The batch folder holds no data file.
    #[error(
        "no data files in {}: expected *.jsonl, *.json or *.jsonl.gz ({skipped} other entries skipped)",
        path.display()
    )]
    NoDataFiles {
        /// The batch folder.
        path: PathBuf,
        /// Entries skipped (manifests, hidden files, other extensions).
        skipped: usize,
    },
    /// A landed file changed size between discovery and reading: the copy step is
    /// probably still writing the batch.
    #[error(
        "{} changed while being read ({before} bytes when the batch was listed, {after} bytes now): the copy step is still writing the batch; rerun once it is complete",
        path.display()
    )]
    FileChanged {
        /// The file.
        path: PathBuf,
        /// Size at discovery.
        before: u64,
        /// Size after reading.
        after: u64,
    },
    /// A file or folder could not be read.
    #[error("failed to read {}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A setting is out of range or contradicts another one.
    #[error("invalid setting `{name}`: {reason}")]
    Config {
        /// The setting, as `bronze.toml` and Python's keyword arguments name it (its flag
        /// is the same name with dashes).
        name: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A value of a settings layer (Python's keyword arguments, a `config=` dict) that its
    /// key cannot take, or a key that does not exist.
    #[error("invalid setting `{key}`: {reason}")]
    Setting {
        /// The key, dotted below its section (`flatten.max_depth`).
        key: String,
        /// Why it was refused.
        reason: String,
    },
    /// Building Arrow arrays failed (a bug in flattening if it ever happens).
    #[error("table `{table}`: could not build Arrow data")]
    Arrow {
        /// The table being built.
        table: String,
        /// The cause.
        #[source]
        source: Box<arrow::error::ArrowError>,
    },
    /// A Delta operation on a table failed.
    #[error("table `{table}`: {action} failed")]
    Delta {
        /// The table.
        table: String,
        /// What was being done (`write`, `open`, `delete`).
        action: &'static str,
        /// The cause.
        #[source]
        source: Box<deltalake::DeltaTableError>,
    },
    /// New fields arrived for a table whose topic has `evolution = "fail"`.
    #[error(
        "table `{table}` has no column for {}; the topic's evolution mode is `fail`: add the fields with `--evolution add` (or `rescue` to keep them in `_rescued_data`)",
        fields.join(", ")
    )]
    SchemaEvolution {
        /// The table.
        table: String,
        /// The new fields, as `column (original path)`.
        fields: Vec<String>,
    },
    /// Rows of one kind (a topic's, or child rows of arrays) for a table of the other
    /// kind: a topic named like a child table, or an array whose child table is named
    /// like a topic's table. Nothing of that topic was written there.
    #[error(
        "table `{table}` is {}; topic `{topic}`'s {} would mix with them: nothing of the topic was written there. A table is a topic's or a child table, never both: map the arrays to another child table (`--child-table '<array path>=<name>'`, or `--child-naming topic`), or load the topic into another schema",
        if *child_table { "a child table (it has `_parent_id`)" } else { "a topic's table (it has no `_parent_id`)" },
        if *child_table { "rows" } else { "child rows" }
    )]
    TableKind {
        /// The table.
        table: String,
        /// The topic whose rows were refused.
        topic: Box<str>,
        /// Whether the table is a child table (the rows were a topic's), or a topic's
        /// table (the rows were child rows).
        child_table: bool,
    },
    /// A topic whose payload mode is not the one its existing table was created with:
    /// `variant` over a table of its flattened columns (no `payload` column of type
    /// `variant` for the whole payload), or `flatten` over a table that has one. Nothing
    /// of that topic was written there.
    #[error(
        "table `{table}` keeps topic `{topic}`'s payloads {}, but the topic's payload mode is `{}`: a table keeps the layout it was created with, so nothing of the topic was written. To switch, move the table's folder aside (`mv <catalog>/<schema>/{table} <catalog>/<schema>/{table}_{}`; in an object store, copy it and delete it), then ingest the topic's batches again, oldest first, with `--topic-payload '{topic}={}'` (`[topics.\"{topic}\"] payload = \"{}\"`): the first run creates the table anew and each run replaces its batch's rows (child tables keep the rows loaded before, which join the moved table). Or set the topic's payload mode back to `{}`",
        if *to_variant { "flattened into columns" } else { "whole, in one `payload` column of type variant" },
        if *to_variant { "variant" } else { "flatten" },
        if *to_variant { "flattened" } else { "variant" },
        if *to_variant { "variant" } else { "flatten" },
        if *to_variant { "variant" } else { "flatten" },
        if *to_variant { "flatten" } else { "variant" }
    )]
    PayloadLayout {
        /// The table.
        table: String,
        /// The topic whose rows were refused.
        topic: Box<str>,
        /// Whether the topic's payload mode is `variant` (the table's payloads are
        /// flattened), or `flatten` (the table keeps them whole).
        to_variant: bool,
    },
    /// A catalog refused a table's registration.
    #[error("{catalog} catalog, table `{table}`: {reason}")]
    Metastore {
        /// Which catalog: `glue`, `hive` or `unity`.
        catalog: &'static str,
        /// The table as the catalog names it (`database.table`).
        table: String,
        /// What the catalog answered, or why it could not be reached.
        reason: String,
    },
    /// A catalog could not be reached (a connection refused, reset or timed out, HTTP 429
    /// or 5xx) in its bounded attempts ([`crate::metastore::ATTEMPTS`]).
    #[error("the {catalog} catalog could not be reached: {reason}")]
    MetastoreUnreachable {
        /// Which catalog: `glue`, `hive` or `unity`.
        catalog: &'static str,
        /// Its address, and the last attempt's failure.
        reason: String,
    },
    /// A column type hint contradicts the type an existing column already has.
    #[error(
        "table `{table}` has column `{}` ({}) as {}, but the hint `{}` says {}: a hint types new columns only; retype the column as the README's \"Types\" says, or drop the hint",
        conflict.column, conflict.path, conflict.existing, conflict.hint, conflict.hinted
    )]
    TypeHint {
        /// The table.
        table: String,
        /// The column and the two types.
        conflict: Box<TypeConflict>,
    },
    /// No Delta table of that name in the schema.
    #[error("no table `{table}` in this schema; `bronze health` lists the tables")]
    NoSuchTable {
        /// The name asked for.
        table: String,
    },
    /// An object store could not be reached or set up (credentials, endpoint, bucket).
    #[error("object store {location}: {reason}")]
    Store {
        /// The location, with anything secret masked.
        location: String,
        /// What failed and what to do about it.
        reason: String,
    },
    /// The failure of a commit shared by several topics, reported on each of them: the
    /// same error (message and causes) for each.
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
    /// A state the library's own invariants rule out (a bug: please report it with the
    /// message).
    #[error("internal error: {what}; please report it")]
    Internal {
        /// What was found.
        what: String,
    },
    /// Another run holds the batch's lease: it is loading the same batch right now.
    #[error(
        "batch {batch_id} is being loaded by another run ({} on host {}, pid {}, since {}); wait for it to finish and rerun. If that run is gone for good, delete {path} and rerun",
        holder.run_id,
        holder.host,
        holder.pid,
        chrono::DateTime::from_timestamp_micros(holder.since_micros).map_or_else(|| holder.since_micros.to_string(), |t| t.to_rfc3339())
    )]
    BatchLeased {
        /// The batch id.
        batch_id: String,
        /// Who holds the lease.
        holder: Box<Holder>,
        /// The lease file.
        path: String,
    },
    /// Another run took this run's batch lease over: this run could not renew it within
    /// its TTL (the store was unreachable, or the process stalled), so the lease looked
    /// abandoned. This run stopped before its next commit; the other run loads the batch.
    #[error(
        "lost the batch lease {path}: {reason}; another run is loading the batch now: check its outcome in `_run_control` before rerunning"
    )]
    LeaseLost {
        /// The lease file.
        path: String,
        /// What happened.
        reason: String,
    },
    /// Tables of the batch bronze will not write (a table feature or property another
    /// engine set), found before any write: nothing of the batch was written.
    #[error("not written: {tables}; no table of the batch was written")]
    Refused {
        /// Each refused table with the feature in the way and what to do, `; `-joined.
        tables: String,
    },
    /// The batch's landing files were cleaned by `bronze clean`: its folder has no data
    /// files to load.
    #[error("batch {batch} cannot be loaded from its folder: `bronze clean` {how}")]
    BatchCleaned {
        /// The batch.
        batch: String,
        /// What clean did (`moved its landing files to …`, `deleted its landing files`),
        /// and how to load the batch again when its files were archived.
        how: String,
    },
    /// A worker of a backlog found, once it held the batch's lease, that another worker
    /// had loaded the batch since it listed the backlog; nothing was done.
    #[error("batch {batch} was loaded by another worker meanwhile")]
    AlreadyLoaded {
        /// The batch.
        batch: String,
    },
    /// The batch lease could not be written or read.
    #[error("could not take the batch lease {path}")]
    Lease {
        /// The lease file.
        path: String,
        /// The storage error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A simulated crash (only with the `failpoints` feature, for tests).
    #[error("failpoint `{name}` hit")]
    Failpoint {
        /// The failpoint.
        name: &'static str,
    },
    /// The async runtime or the thread pool could not start.
    #[error("could not start the {what}")]
    Runtime {
        /// `tokio runtime`, `thread pool`, or `landing fetch` (cancelled).
        what: &'static str,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Who holds a lease: the content of a lease file, and what [`Error::BatchLeased`] names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's run id.
    pub run_id: String,
    /// Host name of the holder.
    pub host: String,
    /// Process id of the holder.
    pub pid: u32,
    /// Start time of the holder process (clock ticks since boot, `/proc/<pid>/stat`),
    /// to tell a reused pid from the holder.
    pub pid_start: Option<u64>,
    /// When the lease was taken, microseconds since the Unix epoch.
    pub since_micros: i64,
    /// When the holder last renewed it (its heartbeat), microseconds since the Unix
    /// epoch; absent in a lease not renewed yet (and in leases of bronze 0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed_micros: Option<i64>,
    /// When the holder ended without recording its outcome in `_run_control` (it failed
    /// before, or that write failed), microseconds since the Unix epoch: the next run of
    /// the batch takes the lease over at once and replaces whatever rows the run wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_micros: Option<i64>,
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn delta(
        table: impl Into<String>,
        action: &'static str,
        source: deltalake::DeltaTableError,
    ) -> Self {
        Error::Delta {
            table: table.into(),
            action,
            source: Box::new(with_feature_hint(source)),
        }
    }

    pub(crate) fn arrow(table: impl Into<String>, source: arrow::error::ArrowError) -> Self {
        Error::Arrow {
            table: table.into(),
            source: Box::new(source),
        }
    }
}

/// A commit deltalake refused for table features it cannot write, with what they are and
/// what to do: invariants, CHECK constraints, generated columns and the change data feed
/// need values computed from SQL expressions, which bronze's writer (no query engine)
/// does not evaluate.
fn with_feature_hint(source: deltalake::DeltaTableError) -> deltalake::DeltaTableError {
    use deltalake::kernel::transaction::TransactionError;
    match source {
        deltalake::DeltaTableError::Transaction {
            source: TransactionError::UnsupportedTableFeatures(features),
        } => deltalake::DeltaTableError::Generic(format!(
            "the table's protocol requires writer features this operation does not \
             support: {features:?}; nothing was committed: drop the feature in the engine \
             that added it (`ALTER TABLE … DROP FEATURE …`), or load into a table of \
             bronze's own"
        )),
        other => other,
    }
}

/// The error and its causes, joined with `: `, for reports and logs.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_stays_small() {
        assert!(size_of::<Error>() <= 64, "{}", size_of::<Error>());
    }

    #[test]
    fn messages_say_what_to_do() {
        let e = Error::MissingBatchId {
            path: PathBuf::from("landing/x"),
        };
        assert!(e.to_string().contains("--batch-id"));
    }
}
