//! The rows a run records in `_run_control`: one per table write ([`TableWrite`], made
//! into a row by [`write_row`] and [`check_commit`]) and one for the run's row accounting
//! ([`Invariant`], made into the `(batch)` row by [`invariant_row`]).

use serde::Serialize;

use super::INVARIANT_ROW;
use crate::batch::{BatchKey, now_micros};
use crate::error::Result;
use crate::naming::TableName;
use crate::stage::spill::StagingSummary;
use crate::table::Committed;

/// The outcome of one `_run_control` row: a write, or the run's row accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RunStatus {
    /// Committed, and its check held.
    #[default]
    Ok,
    /// Failed (see `error`): the rerun repairs it.
    Failed,
}

impl RunStatus {
    /// `ok` or `failed`, as `_run_control` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of `_run_control`: one (topic, table) write of a run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunControlRow {
    /// `<batch id>-<start micros>`: tells runs of the same batch apart.
    pub run_id: String,
    /// The batch.
    pub batch_id: String,
    /// The landing paths of the batch's folders (`<source>/<entity>`), sorted: with the
    /// batch id, what the run loaded and replaced. `_run_control`'s column holds them
    /// comma separated.
    #[serde(default)]
    pub landing_paths: Vec<String>,
    /// The topic (empty for `_corrupt_records`).
    pub topic: String,
    /// The table written.
    pub table: String,
    /// Staged messages of the topic (corrupt lines for `_corrupt_records`).
    pub rows_in: u64,
    /// Rows the commit added (from the added files' statistics).
    pub rows_written: u64,
    /// Data files the commit added.
    pub files_added: u64,
    /// Bytes of the data files the commit added.
    pub bytes_added: u64,
    /// Delta version committed.
    pub version: Option<u64>,
    /// Start of this write, microseconds since the epoch (UTC).
    pub started_at_micros: i64,
    /// End of this write.
    pub ended_at_micros: i64,
    /// `ok` or `failed`.
    pub status: RunStatus,
    /// The error of a failed write.
    pub error: Option<String>,
    /// Checks run on the commit and their result.
    pub checks: String,
    /// Schema changes the write applied (`added: a, b`), empty when none.
    pub schema_changes: String,
    /// Values moved to `_rescued_data` because they did not fit the table's columns.
    pub rescued_values: u64,
    /// Requests the object store client retried during the run (the `(batch)` row; 0 on
    /// the others).
    #[serde(default)]
    pub store_retries: u64,
}

/// One topic's write to one table.
pub(crate) struct TableWrite {
    pub(crate) table: TableName,
    pub(crate) topic: String,
    pub(crate) rows_in: u64,
    pub(crate) rows_planned: u64,
    pub(crate) started_micros: i64,
    pub(crate) ended_micros: i64,
    pub(crate) result: Result<Committed>,
    /// Columns the write added to the table.
    pub(crate) added: Vec<String>,
    /// Values moved to `_rescued_data` while fitting the table's schema.
    pub(crate) rescued: u64,
}

impl TableWrite {
    /// Adds a later slice's write of the same topic and table to this one: planned rows,
    /// columns and rescued values summed, the commits' figures summed up to the last
    /// version, the first error kept.
    pub(crate) fn absorb(&mut self, w: TableWrite) {
        self.rows_planned += w.rows_planned;
        self.ended_micros = w.ended_micros;
        self.rescued += w.rescued;
        for a in w.added {
            if !self.added.contains(&a) {
                self.added.push(a);
            }
        }
        self.result = match (
            std::mem::replace(&mut self.result, Ok(Committed::default())),
            w.result,
        ) {
            (Ok(a), Ok(b)) => Ok(Committed {
                version: b.version,
                files_added: a.files_added + b.files_added,
                bytes_added: a.bytes_added + b.bytes_added,
                rows_added: a.rows_added + b.rows_added,
                compacted: b.compacted.or(a.compacted),
            }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
    }

    /// A topic whose rows could not be read or flattened: its own table's write failed
    /// with `error`, its `rows_in` staged messages planned and none committed.
    pub(crate) fn failed(
        topic: &str,
        rows_in: u64,
        started_micros: i64,
        error: crate::Error,
    ) -> TableWrite {
        TableWrite {
            table: TableName::for_topic(topic),
            topic: topic.to_string(),
            rows_in,
            rows_planned: rows_in,
            started_micros,
            ended_micros: now_micros(),
            result: Err(error),
            added: Vec::new(),
            rescued: 0,
        }
    }
}

/// The batch's row accounting: whether it holds, and what was checked.
pub(crate) struct Invariant {
    pub(crate) ok: bool,
    pub(crate) text: String,
}

/// The `_run_control` row of write `w` before its result is in: what it took in, when it
/// ran, the columns it added and the values it rescued.
pub(crate) fn write_row(w: &TableWrite, run_id: &str, key: &BatchKey) -> RunControlRow {
    RunControlRow {
        run_id: run_id.to_string(),
        batch_id: key.batch_id.clone(),
        landing_paths: key.landing_paths.clone(),
        topic: w.topic.clone(),
        table: w.table.to_string(),
        rows_in: w.rows_in,
        rows_written: 0,
        files_added: 0,
        bytes_added: 0,
        version: None,
        started_at_micros: w.started_micros,
        ended_at_micros: w.ended_micros,
        status: RunStatus::Ok,
        error: None,
        checks: String::new(),
        schema_changes: if w.added.is_empty() {
            String::new()
        } else {
            format!("added: {}", w.added.join(", "))
        },
        rescued_values: w.rescued,
        store_retries: 0,
    }
}

/// Fills `row` from commit `c` and checks it: the commit's statistics hold exactly the
/// `rows_planned` (else the row fails).
pub(crate) fn check_commit(row: &mut RunControlRow, c: &Committed, rows_planned: u64) {
    row.rows_written = c.rows_added;
    row.files_added = c.files_added;
    row.bytes_added = c.bytes_added;
    row.version = Some(c.version);
    if c.rows_added == rows_planned {
        row.checks = format!("committed_rows=planned_rows({rows_planned}) ok");
        if let Some((before, after)) = c.compacted {
            row.checks = format!("auto_compacted(files {before}->{after}); {}", row.checks);
        }
    } else {
        row.checks = format!(
            "committed_rows({}) != planned_rows({}) FAILED",
            c.rows_added, rows_planned
        );
        row.status = RunStatus::Failed;
        row.error = Some("the commit does not hold the planned rows".into());
    }
}

/// The `(batch)` row of `_run_control`: the run's row accounting.
pub(crate) fn invariant_row(
    invariant: &Invariant,
    summary: &StagingSummary,
    run_id: &str,
    key: &BatchKey,
    started_micros: i64,
    store_retries: u64,
) -> RunControlRow {
    RunControlRow {
        run_id: run_id.to_string(),
        batch_id: key.batch_id.clone(),
        landing_paths: key.landing_paths.clone(),
        topic: String::new(),
        table: INVARIANT_ROW.to_string(),
        rows_in: summary.lines,
        rows_written: summary.topics.iter().map(|(_, n)| n).sum(),
        started_at_micros: started_micros,
        ended_at_micros: now_micros(),
        status: if invariant.ok {
            RunStatus::Ok
        } else {
            RunStatus::Failed
        },
        error: (!invariant.ok).then(|| "row accounting does not add up".to_string()),
        checks: invariant.text.clone(),
        store_retries,
        ..Default::default()
    }
}
