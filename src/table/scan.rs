//! A table's rows read back through the Delta kernel's own scan (deletion vectors
//! applied, column mapping resolved, a column older files lack read as null): for
//! `_run_control` (the backlog, `status`, the report) and the staging table.

use std::sync::Arc;

use arrow::array::{Array as _, AsArray as _, BooleanArray, RecordBatch};
use arrow::datatypes::DataType;
use buoyant_kernel::EngineData;
use buoyant_kernel::engine::arrow_data::ArrowEngineData;
use buoyant_kernel::expressions::{Expression, Predicate};
use buoyant_kernel::schema::StructType;

use super::Storage;
use crate::error::{Error, Result};
use crate::naming::TableName;

/// Rows whose text `column` equals `value` (a null never does).
#[derive(Clone, Debug)]
pub(crate) struct Equals {
    pub(crate) column: String,
    pub(crate) value: String,
}

impl Equals {
    pub(crate) fn new(column: &str, value: &str) -> Self {
        Equals {
            column: column.to_string(),
            value: value.to_string(),
        }
    }

    fn mask(
        &self,
        batch: &RecordBatch,
    ) -> std::result::Result<BooleanArray, arrow::error::ArrowError> {
        let Some(c) = batch.column_by_name(&self.column) else {
            return Ok(BooleanArray::from(vec![false; batch.num_rows()]));
        };
        let c = arrow::compute::cast(c, &DataType::Utf8)?;
        let c = c.as_string::<i32>();
        Ok((0..c.len())
            .map(|i| Some(c.is_valid(i) && c.value(i) == self.value))
            .collect())
    }
}

/// `columns` (those the table has) of `table`'s rows matching every one of `filters`;
/// none when the table does not exist yet. The filters also skip files whose statistics
/// or partition values rule them out.
pub(crate) async fn read_rows(
    storage: &Storage,
    table: &TableName,
    filters: &[Equals],
    columns: &[&str],
) -> Result<Vec<RecordBatch>> {
    use futures::TryStreamExt as _;
    let Some(t) = storage.opener().open(table).await? else {
        return Ok(Vec::new());
    };
    stream_rows(storage, table, &t, filters, columns)?
        .try_collect()
        .await
}

/// [`read_rows`] of the loaded table `t`, as a stream of batches of a few thousand rows
/// read one after the other (never the whole table in memory), in the kernel's scan
/// order (the same for the same log).
pub(crate) fn stream_rows(
    storage: &Storage,
    table: &TableName,
    t: &deltalake::DeltaTable,
    filters: &[Equals],
    columns: &[&str],
) -> Result<impl futures::Stream<Item = Result<RecordBatch>> + Send + Unpin + use<>> {
    let version = t.version().ok_or_else(|| {
        Error::delta(
            table.as_str(),
            "read",
            deltalake::DeltaTableError::NotInitialized,
        )
    })?;
    let root = storage.table_url(table)?;
    let engine = t.log_store().engine(None);
    let filters = filters.to_vec();
    let columns: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    let name = table.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(2);
    // On a blocking thread, as delta-rs runs the kernel: its engine blocks on the
    // runtime for object store reads. Two batches ahead at most.
    tokio::task::spawn_blocking(move || {
        let batches = match kernel_scan(&name, root, version, &engine, &filters, &columns) {
            Ok(batches) => batches,
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        };
        for data in batches {
            let batch = matching(&name, data, &filters);
            let failed = batch.is_err();
            if matches!(&batch, Ok(b) if b.num_rows() == 0) {
                continue;
            }
            if tx.blocking_send(batch).is_err() || failed {
                return;
            }
        }
    });
    Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (b, rx))
    })))
}

/// A Delta kernel error reading `table`.
fn kernel_error(table: &TableName, e: buoyant_kernel::Error) -> Error {
    Error::delta(table.as_str(), "read", deltalake::DeltaTableError::from(e))
}

/// The kernel's scan of `table` (at `root`) at `version`: `columns` and the columns of
/// `filters` (those the table has), skipping files whose statistics rule the filters
/// out; its batches as read, not yet filtered row by row.
fn kernel_scan(
    table: &TableName,
    root: url::Url,
    version: buoyant_kernel::Version,
    engine: &Arc<dyn buoyant_kernel::Engine>,
    filters: &[Equals],
    columns: &[String],
) -> Result<impl Iterator<Item = buoyant_kernel::DeltaResult<Box<dyn EngineData>>> + use<>> {
    let kernel = |e| kernel_error(table, e);
    let snapshot = buoyant_kernel::Snapshot::builder_for(root)
        .at_version(version)
        .build(engine.as_ref())
        .map_err(kernel)?;
    let schema = snapshot.schema();
    let mut wanted: Vec<&str> = columns.iter().map(String::as_str).collect();
    for f in filters {
        if !wanted.contains(&f.column.as_str()) {
            wanted.push(&f.column);
        }
    }
    let fields = wanted.iter().filter_map(|c| schema.field(c).cloned());
    let projected = Arc::new(StructType::try_new(fields).map_err(kernel)?);
    let skipping = filters
        .iter()
        .filter(|f| schema.field(&f.column).is_some())
        .map(|f| {
            Predicate::eq(
                Expression::column([f.column.as_str()]),
                Expression::literal(f.value.as_str()),
            )
        })
        .reduce(Predicate::and);
    let scan = snapshot
        .scan_builder()
        .with_schema(projected)
        .with_predicate(skipping.map(Arc::new))
        .build()
        .map_err(kernel)?;
    scan.execute(Arc::clone(engine)).map_err(kernel)
}

/// The rows of a scanned batch `data` of `table` matching every one of `filters`.
fn matching(
    table: &TableName,
    data: buoyant_kernel::DeltaResult<Box<dyn EngineData>>,
    filters: &[Equals],
) -> Result<RecordBatch> {
    let arrow = |e| Error::arrow(table.as_str(), e);
    let data = data
        .and_then(ArrowEngineData::try_from_engine_data)
        .map_err(|e| kernel_error(table, e))?;
    let mut batch = data.record_batch().clone();
    for f in filters {
        let mask = f.mask(&batch).map_err(arrow)?;
        batch = arrow::compute::filter_record_batch(&batch, &mask).map_err(arrow)?;
    }
    Ok(batch)
}
