//! What `bronze report` shows: every batch run from `_run_control`, every table's health
//! with its file sizes, the last failures, and a landing zone's backlog.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{HealthReport, Maintenance};
use crate::error::Result;
use crate::run_control::INVARIANT_ROW;
use crate::run_control::RunRow;

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

impl Maintenance<'_> {
    /// The lakehouse at a glance: every batch run, every table's health and file sizes,
    /// the last failures (`landing` empty; the caller adds a landing zone's status).
    pub fn overview(&self) -> Result<Overview> {
        let storage = self.storage()?;
        let rows = self.block_on(crate::run_control::run_control_rows(&storage, None))?;
        let mut failures: Vec<FailedWrite> = rows
            .iter()
            .filter(|r| !r.ok)
            .map(|r| FailedWrite {
                run_id: r.run_id.clone(),
                batch_id: r.batch_id.clone(),
                landing_paths: r.landing_paths.clone().unwrap_or_default(),
                table: r.table.clone(),
                at: iso(r.ended_micros),
                reason: r.reason.clone(),
            })
            .collect();
        failures.sort_by(|a, b| b.at.cmp(&a.at));
        failures.truncate(FAILURES_SHOWN);
        Ok(Overview {
            catalog: self.catalog.shown(),
            schema: self.catalog.schema().to_string(),
            generated_at: iso(crate::batch::now_micros()),
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
fn batch_runs(rows: Vec<RunRow>) -> Vec<BatchRun> {
    let mut runs: BTreeMap<String, Vec<RunRow>> = BTreeMap::new();
    for r in rows {
        runs.entry(r.run_id.clone()).or_default().push(r);
    }
    let mut out: Vec<BatchRun> = runs
        .into_values()
        .filter_map(|rows| {
            let batch = rows.iter().find(|r| r.table == INVARIANT_ROW)?;
            // The run's table writes (not its accounting, nor a later `bronze clean` of
            // its landing files, recorded in the same run).
            let writes = rows
                .iter()
                .filter(|r| r.table != INVARIANT_ROW && r.table != crate::run_control::CLEAN_ROW);
            let corrupt = rows
                .iter()
                .filter(|r| r.table == crate::naming::CORRUPT_TABLE)
                .map(|r| r.rows_in)
                .sum::<u64>();
            let first = writes.clone().map(|r| r.started_micros).min();
            let last = writes.clone().map(|r| r.ended_micros).max();
            let secs = |from: i64, to: i64| (to - from).max(0) as f64 / 1e6;
            let stages = match (first, last) {
                (Some(first), Some(last)) => Stages {
                    read: secs(batch.started_micros, first),
                    tables: secs(first, last),
                    finish: secs(last, batch.ended_micros),
                },
                _ => Stages {
                    read: secs(batch.started_micros, batch.ended_micros),
                    ..Default::default()
                },
            };
            Some(BatchRun {
                run_id: batch.run_id.clone(),
                batch_id: batch.batch_id.clone(),
                landing_paths: batch.landing_paths.clone().unwrap_or_default(),
                started_at: iso(batch.started_micros),
                started_at_micros: batch.started_micros,
                ok: rows.iter().all(|r| r.ok),
                lines: batch.rows_in,
                rows: batch.rows_written,
                corrupt,
                duplicates: batch
                    .rows_in
                    .saturating_sub(batch.rows_written)
                    .saturating_sub(corrupt),
                seconds: secs(batch.started_micros, batch.ended_micros),
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
