//! The run's `_corrupt_records`: this batch's corrupt lines, replaced on rerun (the
//! run's `_run_control` rows are appended by [`crate::run_control::append_rows`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema};

use super::state::Run;
use crate::batch::now_micros;
use crate::error::Error;
use crate::flatten::{self, Lineage};
use crate::naming::{self, TableName};
use crate::run_control::TableWrite;
use crate::stage::CorruptLine;
use crate::table::Committed;

/// Replaces this batch's rows in `_corrupt_records`; when the batch now has none,
/// deletes its old ones. `None` when there was nothing to do (no lines, no table).
pub(super) fn write_corrupt(run: &Run, corrupt: &[CorruptLine]) -> Option<TableWrite> {
    let table = TableName::system(naming::CORRUPT_TABLE);
    let started_micros = now_micros();
    let rows = corrupt.len() as u64;
    let key = run.key();
    // Other processes write the table too (other batches' corrupt lines): a replace
    // that loses to their commits is planned again, as a topic table's is.
    let result = {
        let _guard = run.ctx.locks().lock(&table);
        if corrupt.is_empty() {
            let deleted = run.ctx.catalog.replanned(&table, || {
                run.runtime()
                    .block_on(run.storage.rewriter().delete_batch(&table, key))
            });
            match deleted {
                Ok(None) => return None,
                Ok(Some(version)) => Ok(Committed {
                    version,
                    ..Default::default()
                }),
                Err(e) => Err(e),
            }
        } else {
            corrupt_batch(corrupt, &run.lineage)
                .map_err(|e| Error::arrow(table.as_str(), e))
                .and_then(|batch| {
                    run.ctx.catalog.replanned(&table, || {
                        run.runtime()
                            .block_on(run.storage.committer(run.mode).replace(
                                &table,
                                batch.clone(),
                                key,
                            ))
                    })
                })
        }
    };
    Some(TableWrite {
        table,
        topic: String::new(),
        rows_in: rows,
        rows_planned: rows,
        started_micros,
        ended_micros: now_micros(),
        result,
        added: Vec::new(),
        rescued: 0,
    })
}

pub(super) fn corrupt_batch(
    corrupt: &[CorruptLine],
    lineage: &Lineage,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    let n = corrupt.len();
    let schema = Schema::new(vec![
        Field::new(naming::BATCH_ID, DataType::Utf8, false),
        Field::new(naming::LANDING_PATH, DataType::Utf8, true),
        Field::new(naming::SOURCE_FILE, DataType::Utf8, false),
        Field::new(naming::LINE, DataType::Int64, false),
        Field::new(naming::CORRUPT_RECORD, DataType::Utf8, false),
        Field::new(naming::CORRUPT_BYTES, DataType::Binary, false),
        Field::new(naming::REASON, DataType::Utf8, false),
        Field::new(naming::LOADED_AT, flatten::timestamp_type(), false),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec![lineage.key.batch_id.as_str(); n])),
        Arc::new(StringArray::from_iter(
            corrupt
                .iter()
                .map(|c| lineage.landing_path_of(&c.source_file)),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.source_file.as_str()),
        )),
        Arc::new(Int64Array::from_iter_values(
            corrupt.iter().map(|c| c.line as i64),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| String::from_utf8_lossy(&c.raw)),
        )),
        Arc::new(BinaryArray::from_iter_values(
            corrupt.iter().map(|c| c.raw.as_slice()),
        )),
        Arc::new(StringArray::from_iter_values(
            corrupt.iter().map(|c| c.reason.as_str()),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(vec![lineage.loaded_at_micros; n]).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(Arc::new(schema), columns)
}
