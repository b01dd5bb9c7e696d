//! System names, limits and fixed shapes: the names bronze gives its own tables, columns
//! and files, the bounds of what it accepts as ids, and the lease file's content. A leaf:
//! every other module may use it, it uses none.

use serde::{Deserialize, Serialize};

/// Longest batch id accepted.
pub const MAX_BATCH_ID_LEN: usize = 128;

/// Longest part of a landing path accepted.
pub const MAX_LANDING_PART_LEN: usize = 128;

/// Longest table or column name we write.
pub const MAX_NAME_LEN: usize = 128;

/// The column holding the landing path (`<source>/<entity>`) of a row's batch folder.
pub const LANDING_PATH: &str = "_landing_path";

/// The column of a child table's rows holding the `_id` of the row their array is in:
/// only child tables have it.
pub const PARENT_ID: &str = "_parent_id";

/// The column holding values that did not fit their column.
pub const RESCUED: &str = "_rescued_data";

/// System columns: payload fields can never take these names.
pub const SYSTEM_COLUMNS: &[&str] = &[
    "_id",
    PARENT_ID,
    "_root_id",
    "_idx",
    "_batch_id",
    LANDING_PATH,
    "_topic",
    "_source_file",
    "_line",
    "_loaded_at",
    RESCUED,
    "_corrupt_record",
];

/// Prefix of the per-batch staging tables.
pub const STAGING_PREFIX: &str = "_tmp_raw_load_";

/// Table holding lines that could not be read as messages.
pub const CORRUPT_TABLE: &str = "_corrupt_records";

/// Name of the run-control table.
pub const RUN_CONTROL_TABLE: &str = "_run_control";

/// The `table` value of the `_run_control` row that records a run's row accounting.
pub const INVARIANT_ROW: &str = "(batch)";

/// Folder of the lease files, under the schema folder.
pub const LEASE_DIR: &str = "_bronze_leases";

/// Folder of the backlog's ledgers (what each entity has loaded), under the schema folder.
pub const LEDGER_DIR: &str = "_bronze_ledger";

/// Largest integer magnitude an `f64` holds exactly (2^53).
pub const F64_EXACT_INT: i64 = 1 << 53;

/// Who holds a lease.
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
