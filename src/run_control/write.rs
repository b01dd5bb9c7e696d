//! Writing `_run_control`: a run's rows appended as one Arrow batch in one commit that
//! carries the batch's `txn`, under the table's lock, and the cadence of the table's
//! upkeep.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema};

use super::rows::RunControlRow;
use crate::batch::BatchKey;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::flatten;
use crate::naming::{self, RUN_CONTROL_TABLE, TableName};
use crate::table::{Committed, RunMode, Storage, Txns, WrittenTable};

/// `_run_control`'s upkeep runs on every this many of its versions (its appends skip
/// the file list in between).
pub(crate) const UPKEEP_EVERY: u64 = 10;

/// Appends a run's `rows` (of the batch `key`) to `_run_control` in one commit, once,
/// after the parallel phase: under the table's lock in `catalog`, and planned again when
/// another writer's commit conflicts with it ([`Catalog::replanned`]). The commit carries
/// the batch's `txn` ([`Txns::InTables`], whatever the run's `mode` says of the other
/// tables): it is what tells the next run of the batch that it was loaded before. On the
/// versions [`upkeep_due`] picks, `upkeep` runs on the table, the lock still held, so
/// the table keeps a few files however many runs it records.
pub(crate) fn append_rows(
    catalog: &Catalog,
    storage: &Storage,
    mode: RunMode,
    rows: &[RunControlRow],
    key: &BatchKey,
    upkeep: impl FnOnce(&TableName, Committed, WrittenTable),
) -> Result<()> {
    let table = TableName::system(RUN_CONTROL_TABLE);
    let committer = storage.committer(RunMode {
        txns: Txns::InTables,
        ..mode
    });
    let batch = rows_batch(rows)?;
    let _guard = catalog.locks().lock(&table);
    // A blind append: only another writer's schema change conflicts with it.
    let c = catalog.replanned(&table, || {
        let append = committer.append(&table, batch.clone(), key);
        catalog.runtime().block_on(append)
    })?;
    if !upkeep_due(&c) {
        return Ok(());
    }
    match catalog.runtime().block_on(storage.opener().open(&table)) {
        Ok(Some(t)) => {
            let written = WrittenTable {
                table: t,
                pending: Default::default(),
            };
            upkeep(&table, c, written);
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(table = %table, error = %crate::error::chain(&e), "table maintenance after commit failed")
        }
    }
    Ok(())
}

/// The run's rows as the one batch it appends to `_run_control`.
fn rows_batch(rows: &[RunControlRow]) -> Result<RecordBatch> {
    run_control_batch(rows).map_err(|e| Error::arrow(RUN_CONTROL_TABLE, e))
}

/// Whether commit `c` to `_run_control` is one its upkeep runs after ([`UPKEEP_EVERY`]).
fn upkeep_due(c: &Committed) -> bool {
    c.version.is_multiple_of(UPKEEP_EVERY)
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
        // The folders' landing paths, comma separated (a `_landing_path` has no comma).
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.landing_paths.join(",")),
        )),
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
