//! Validate (pipeline step 5): every write checked against what it planned
//! (`committed_rows = planned_rows`, from the commit's own metrics), and the batch's row
//! accounting (non-blank lines = topic-table rows + corrupt records + dropped
//! duplicates), turned into the report's per-table outcomes and the `_run_control` rows.

use std::collections::BTreeMap;

use crate::batch::BatchKey;
use crate::naming::TableName;
use crate::report::TableOutcome;
use crate::run_control::{
    Invariant, RunControlRow, RunStatus, TableWrite, check_commit, write_row,
};
use crate::stage::spill::StagingSummary;

/// Non-blank lines = topic-table rows + corrupt records + dropped duplicates, per file
/// (from staging) and per topic (rows the topic's own table committed, from the writes;
/// a failed write is already a failed row and is not counted twice).
pub(crate) fn check_invariant(
    summary: &StagingSummary,
    files: &[crate::stage::FileStats],
    rows: &[RunControlRow],
) -> Invariant {
    let mut problems = Vec::new();
    let messages: u64 = summary.topics.iter().map(|(_, n)| n).sum();
    if summary.lines != messages + summary.corrupt_lines + summary.duplicates {
        problems.push(format!(
            "batch: lines({}) != messages({messages}) + corrupt({}) + duplicates({})",
            summary.lines, summary.corrupt_lines, summary.duplicates
        ));
    }
    for f in files {
        if f.lines != f.messages + f.corrupt + f.duplicates {
            problems.push(format!(
                "{}: lines({}) != messages({}) + corrupt({}) + duplicates({})",
                f.file, f.lines, f.messages, f.corrupt, f.duplicates
            ));
        }
    }
    for (topic, staged) in &summary.topics {
        let table = TableName::for_topic(topic).to_string();
        let written: u64 = rows
            .iter()
            .filter(|r| r.topic == *topic && r.table == table && r.status == RunStatus::Ok)
            .map(|r| r.rows_written)
            .sum();
        let failed = rows
            .iter()
            .any(|r| r.topic == *topic && r.table == table && r.status != RunStatus::Ok);
        if !failed && written != *staged {
            problems.push(format!(
                "topic {topic:?}: {written} rows in `{table}` for {staged} messages"
            ));
        }
    }
    if problems.is_empty() {
        Invariant {
            ok: true,
            text: format!(
                "lines({}) = messages({messages}) + corrupt({}) + duplicates({}) per file and batch; topic rows = messages for {} topics ok",
                summary.lines,
                summary.corrupt_lines,
                summary.duplicates,
                summary.topics.len()
            ),
        }
    } else {
        Invariant {
            ok: false,
            text: format!("FAILED: {}", problems.join("; ")),
        }
    }
}

/// The report's per-table outcomes and the `_run_control` rows of a run's writes, with
/// each commit's check (`committed_rows = planned_rows`).
pub(crate) fn outcomes(
    writes: Vec<TableWrite>,
    run_id: &str,
    key: &BatchKey,
    options: &crate::store::location::StorageOptions,
) -> (BTreeMap<String, TableOutcome>, Vec<RunControlRow>) {
    let mut tables: BTreeMap<String, TableOutcome> = BTreeMap::new();
    let mut run_control = Vec::with_capacity(writes.len());
    for w in writes {
        let t = tables.entry(w.table.to_string()).or_default();
        if !w.topic.is_empty() {
            t.topics.push(w.topic.clone());
        }
        let mut row = write_row(&w, run_id, key);
        for c in &w.added {
            if !t.added_columns.contains(c) {
                t.added_columns.push(c.clone());
            }
        }
        t.rescued_values += w.rescued;
        match w.result {
            Ok(c) => {
                check_commit(&mut row, &c, w.rows_planned);
                t.rows_written += c.rows_added;
                t.version = Some(t.version.map_or(c.version, |v| v.max(c.version)));
            }
            Err(e) => {
                // What a store echoed must not carry an option's value into the report,
                // the log or `_run_control`.
                let msg = options.mask(&crate::error::chain(&e));
                tracing::error!(table = %row.table, topic = %row.topic, error = %msg, "table failed");
                row.status = RunStatus::Failed;
                row.error = Some(msg);
            }
        }
        if row.status != RunStatus::Ok {
            t.error = row.error.clone();
        }
        run_control.push(row);
    }

    (tables, run_control)
}
