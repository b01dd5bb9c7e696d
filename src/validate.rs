//! Validate (pipeline step 5): every write checked against what it planned
//! (`committed_rows = planned_rows`, from the commit's own metrics), and the batch's row
//! accounting (non-blank lines = topic-table rows + corrupt records + dropped
//! duplicates), turned into the report's per-table outcomes and the `_run_control` rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema};

use crate::batch::BatchKey;
use crate::batch::now_micros;
use crate::error::Result;
use crate::flatten;
use crate::naming::{self, TableName};
use crate::report::{RunControlRow, RunStatus, TableOutcome};
use crate::run_control::INVARIANT_ROW;
use crate::stage::spill::StagingSummary;
use crate::table::Committed;

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
    let landing_paths = key.landing_paths.join(",");
    for w in writes {
        let t = tables.entry(w.table.to_string()).or_default();
        if !w.topic.is_empty() {
            t.topics.push(w.topic.clone());
        }
        let mut row = write_row(&w, run_id, key, &landing_paths);
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

/// The `_run_control` row of write `w` before its result is in: what it took in, when it
/// ran, the columns it added and the values it rescued.
fn write_row(w: &TableWrite, run_id: &str, key: &BatchKey, landing_paths: &str) -> RunControlRow {
    RunControlRow {
        run_id: run_id.to_string(),
        batch_id: key.batch_id.clone(),
        landing_paths: landing_paths.to_string(),
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
fn check_commit(row: &mut RunControlRow, c: &Committed, rows_planned: u64) {
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
    (started_micros, store_retries): (i64, u64),
) -> RunControlRow {
    RunControlRow {
        run_id: run_id.to_string(),
        batch_id: key.batch_id.clone(),
        landing_paths: key.landing_paths.join(","),
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

/// `_run_control`'s rows as one Arrow batch.
pub(crate) fn run_control_batch(
    rows: &[RunControlRow],
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let ts = |f: fn(&RunControlRow) -> i64| -> ArrayRef {
        Arc::new(
            TimestampMicrosecondArray::from_iter_values(rows.iter().map(f)).with_timezone("UTC"),
        )
    };
    let strs = |f: fn(&RunControlRow) -> &str| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let u64s = |f: fn(&RunControlRow) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(f)))
    };
    let as_i64 = |a: ArrayRef| -> std::result::Result<ArrayRef, arrow::error::ArrowError> {
        arrow::compute::cast(&a, &DataType::Int64)
    };
    let columns: Vec<ArrayRef> = vec![
        strs(|r| &r.run_id),
        strs(|r| &r.batch_id),
        strs(|r| &r.landing_paths),
        strs(|r| &r.topic),
        strs(|r| &r.table),
        as_i64(u64s(|r| r.rows_in))?,
        as_i64(u64s(|r| r.rows_written))?,
        as_i64(u64s(|r| r.files_added))?,
        as_i64(u64s(|r| r.bytes_added))?,
        Arc::new(Int64Array::from_iter(
            rows.iter().map(|r| r.version.map(|v| v as i64)),
        )),
        ts(|r| r.started_at_micros),
        ts(|r| r.ended_at_micros),
        strs(|r| r.status.as_str()),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.error.as_deref()),
        )),
        strs(|r| &r.checks),
        strs(|r| &r.schema_changes),
        as_i64(u64s(|r| r.rescued_values))?,
        as_i64(u64s(|r| r.store_retries))?,
    ];
    RecordBatch::try_new(Arc::new(run_control_schema()), columns)
}

/// The schema of `_run_control`'s rows as [`run_control_batch`] builds them.
fn run_control_schema() -> Schema {
    Schema::new(vec![
        Field::new("run_id", DataType::Utf8, false),
        Field::new(naming::BATCH_ID, DataType::Utf8, false),
        Field::new("landing_paths", DataType::Utf8, true),
        Field::new("topic", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("rows_in", DataType::Int64, false),
        Field::new("rows_written", DataType::Int64, false),
        Field::new("files_added", DataType::Int64, false),
        Field::new("bytes_added", DataType::Int64, false),
        Field::new("version", DataType::Int64, true),
        Field::new("started_at", flatten::timestamp_type(), false),
        Field::new("ended_at", flatten::timestamp_type(), false),
        Field::new("status", DataType::Utf8, false),
        Field::new("error", DataType::Utf8, true),
        Field::new("checks", DataType::Utf8, false),
        Field::new("schema_changes", DataType::Utf8, false),
        Field::new("rescued_values", DataType::Int64, false),
        Field::new("store_retries", DataType::Int64, true),
    ])
}
