//! What `bronze report` shows: every batch run from `_run_control`, every table's health
//! with its file sizes, the last failures, and a landing zone's backlog.

use std::collections::BTreeMap;

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::DataType;
use serde::Serialize;

use super::{HealthReport, Maintenance};
use crate::error::{Error, Result};
use crate::schema::{INVARIANT_ROW, RUN_CONTROL_TABLE};

/// The lakehouse at a glance ([`Maintenance::overview`]).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Overview {
    /// The catalog, as it may be shown (secrets masked).
    pub catalog: String,
    /// The schema.
    pub schema: String,
    /// When the overview was read, ISO 8601 UTC.
    pub generated_at: String,
    /// The catalog's target file size.
    pub target_file_bytes: u64,
    /// Each run of a batch, oldest first.
    pub batches: Vec<BatchRun>,
    /// Every table's health ([`Maintenance::health`]), with its file sizes.
    pub health: HealthReport,
    /// The latest failed writes and row accountings, newest first (at most
    /// [`FAILURES_SHOWN`]).
    pub failures: Vec<FailedWrite>,
    /// A landing zone's backlog per entity, when one was given.
    pub landing: Vec<crate::EntityStatus>,
}

/// Failures an [`Overview`] keeps.
pub const FAILURES_SHOWN: usize = 20;

/// One run of a batch, from its `_run_control` rows.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct BatchRun {
    /// The run.
    pub run_id: String,
    /// The batch id.
    pub batch_id: String,
    /// Its folders' landing paths, comma separated.
    pub landing_paths: String,
    /// Start, ISO 8601 UTC.
    pub started_at: String,
    /// Start, microseconds since the epoch.
    pub started_at_micros: i64,
    /// Every write and the row accounting ok.
    pub ok: bool,
    /// Non-blank lines read.
    pub lines: u64,
    /// Messages written to their topic tables.
    pub rows: u64,
    /// Corrupt lines (kept in `_corrupt_records`).
    pub corrupt: u64,
    /// Duplicate messages dropped (lines − messages − corrupt).
    pub duplicates: u64,
    /// Wall time of the run.
    pub seconds: f64,
    /// That time by stage, from the rows' times: reading and staging until the first
    /// table write, writing tables, then recording and cleaning up.
    pub stages: Stages,
}

/// Seconds of a run by stage ([`BatchRun::stages`]).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stages {
    /// From the start to the first table write: discovery, lease, parsing, staging.
    pub read: f64,
    /// From the first table write's start to the last one's end.
    pub tables: f64,
    /// From there to the end: `_run_control`, cleanup.
    pub finish: f64,
}

/// A failed write or row accounting.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct FailedWrite {
    /// The run.
    pub run_id: String,
    /// The batch id.
    pub batch_id: String,
    /// Its folders' landing paths.
    pub landing_paths: String,
    /// The table (`(batch)` for the row accounting).
    pub table: String,
    /// When it ended, ISO 8601 UTC.
    pub at: String,
    /// Why.
    pub reason: String,
}

/// A `_run_control` row, as the overview reads it.
struct Row {
    run_id: String,
    batch_id: String,
    landing_paths: String,
    table: String,
    ok: bool,
    reason: String,
    rows_in: u64,
    rows_written: u64,
    started: i64,
    ended: i64,
}

impl Maintenance<'_> {
    /// The lakehouse at a glance: every batch run, every table's health and file sizes,
    /// the last failures (`landing` empty; the caller adds a landing zone's status).
    pub fn overview(&self) -> Result<Overview> {
        let storage = self.storage()?;
        let rows = self.block_on(run_control(&storage))?;
        let mut failures: Vec<FailedWrite> = rows
            .iter()
            .filter(|r| !r.ok)
            .map(|r| FailedWrite {
                run_id: r.run_id.clone(),
                batch_id: r.batch_id.clone(),
                landing_paths: r.landing_paths.clone(),
                table: r.table.clone(),
                at: iso(r.ended),
                reason: r.reason.clone(),
            })
            .collect();
        failures.sort_by(|a, b| b.at.cmp(&a.at));
        failures.truncate(FAILURES_SHOWN);
        Ok(Overview {
            catalog: self.catalog.shown(),
            schema: self.catalog.schema().to_string(),
            generated_at: iso(crate::clock::now_micros()),
            target_file_bytes: self.catalog.target_file_size(),
            batches: batch_runs(rows),
            health: self.health()?,
            failures,
            landing: Vec::new(),
        })
    }
}

/// ISO 8601 UTC of microseconds since the epoch.
fn iso(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The runs of `rows` that recorded their row accounting, oldest first.
fn batch_runs(rows: Vec<Row>) -> Vec<BatchRun> {
    let mut runs: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in rows {
        runs.entry(r.run_id.clone()).or_default().push(r);
    }
    let mut out: Vec<BatchRun> = runs
        .into_values()
        .filter_map(|rows| {
            let batch = rows.iter().find(|r| r.table == INVARIANT_ROW)?;
            let writes = rows.iter().filter(|r| r.table != INVARIANT_ROW);
            let corrupt = rows
                .iter()
                .filter(|r| r.table == crate::schema::CORRUPT_TABLE)
                .map(|r| r.rows_in)
                .sum::<u64>();
            let first = writes.clone().map(|r| r.started).min();
            let last = writes.clone().map(|r| r.ended).max();
            let secs = |from: i64, to: i64| (to - from).max(0) as f64 / 1e6;
            let stages = match (first, last) {
                (Some(first), Some(last)) => Stages {
                    read: secs(batch.started, first),
                    tables: secs(first, last),
                    finish: secs(last, batch.ended),
                },
                _ => Stages {
                    read: secs(batch.started, batch.ended),
                    ..Default::default()
                },
            };
            Some(BatchRun {
                run_id: batch.run_id.clone(),
                batch_id: batch.batch_id.clone(),
                landing_paths: batch.landing_paths.clone(),
                started_at: iso(batch.started),
                started_at_micros: batch.started,
                ok: rows.iter().all(|r| r.ok),
                lines: batch.rows_in,
                rows: batch.rows_written,
                corrupt,
                duplicates: batch
                    .rows_in
                    .saturating_sub(batch.rows_written)
                    .saturating_sub(corrupt),
                seconds: secs(batch.started, batch.ended),
                stages,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        a.started_at_micros
            .cmp(&b.started_at_micros)
            .then(a.run_id.cmp(&b.run_id))
    });
    out
}

/// Every row of `_run_control` (none when it does not exist yet).
async fn run_control(storage: &crate::table::Storage) -> Result<Vec<Row>> {
    let batches = crate::table::read_rows(
        storage,
        &crate::naming::TableName::system(RUN_CONTROL_TABLE),
        None,
        &[
            "run_id",
            "_batch_id",
            "landing_paths",
            "table",
            "status",
            "error",
            "checks",
            "rows_in",
            "rows_written",
            "started_at",
            "ended_at",
        ],
    )
    .await?;
    let arrow = |e| Error::arrow(RUN_CONTROL_TABLE, e);
    let mut rows = Vec::new();
    for b in &batches {
        let column = |name: &str, to: &DataType| {
            let c = b.column_by_name(name).ok_or_else(|| Error::Internal {
                what: format!("_run_control has no column {name}"),
            })?;
            arrow::compute::cast(c, to).map_err(arrow)
        };
        let text = |name: &str| column(name, &DataType::Utf8);
        let int = |name: &str| column(name, &DataType::Int64);
        let (run, batch, paths, table) = (
            text("run_id")?,
            text("_batch_id")?,
            text("landing_paths")?,
            text("table")?,
        );
        let (status, error, checks) = (text("status")?, text("error")?, text("checks")?);
        let (rows_in, written) = (int("rows_in")?, int("rows_written")?);
        let (started, ended) = (int("started_at")?, int("ended_at")?);
        let s = |a: &arrow::array::ArrayRef, i: usize| {
            let a = a.as_string::<i32>();
            if a.is_null(i) {
                String::new()
            } else {
                a.value(i).to_string()
            }
        };
        let n = |a: &arrow::array::ArrayRef, i: usize| {
            let a = a.as_primitive::<arrow::datatypes::Int64Type>();
            if a.is_null(i) { 0 } else { a.value(i) }
        };
        for i in 0..b.num_rows() {
            let ok = s(&status, i) == "ok";
            let reason = match s(&error, i) {
                e if e.is_empty() => s(&checks, i),
                e => e,
            };
            rows.push(Row {
                run_id: s(&run, i),
                batch_id: s(&batch, i),
                landing_paths: s(&paths, i),
                table: s(&table, i),
                ok,
                reason,
                rows_in: n(&rows_in, i).max(0) as u64,
                rows_written: n(&written, i).max(0) as u64,
                started: n(&started, i),
                ended: n(&ended, i),
            });
        }
    }
    Ok(rows)
}
