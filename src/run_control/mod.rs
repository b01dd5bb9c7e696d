//! `_run_control`: the table in which every run records what it did, one row per table
//! write of each run (its topic, rows in and written, version, checks and error) and one
//! `(batch)` row with the run's row accounting. Rows are only appended, one commit per
//! run. The backlog's ledgers read it to know which batches each entity has loaded,
//! `bronze status` and the HTML report to say how each batch's last run went.
//!
//! [`rows`] makes the rows from a run's writes, [`write`] appends them (one commit per
//! run, [`append_rows`]), [`read`] reads them back.

mod read;
mod rows;
mod write;

pub(crate) use read::{RunRow, rows_of, run_control_rows};
pub(crate) use rows::{Invariant, TableWrite, check_commit, invariant_row, write_row};
pub use rows::{RunControlRow, RunStatus};
pub(crate) use write::append_rows;

/// The `table` value of the `_run_control` row that records a run's row accounting.
pub const INVARIANT_ROW: &str = "(batch)";

/// `_run_control`'s `table` for `bronze clean`'s row in the run that loaded a batch: its
/// landing files moved or deleted.
pub const CLEAN_ROW: &str = "(clean)";
