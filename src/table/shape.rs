//! The shape of data files: which columns get statistics, the layouts bronze reads and
//! writes itself, and batches conformed to a table's schema.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use deltalake::DeltaTableError;
use deltalake::logstore::ObjectStoreRef;

use crate::error::{Error, Result};

/// Which columns of new data files get statistics: the table's
/// `delta.dataSkippingNumIndexedCols` / `delta.dataSkippingStatsColumns` (the first 32
/// columns when unset).
#[derive(Clone, Debug)]
pub(crate) struct StatsColumns {
    pub(crate) num_indexed: buoyant_kernel::table_properties::DataSkippingNumIndexedCols,
    pub(crate) columns: Option<Vec<String>>,
}

impl StatsColumns {
    /// What a new table without data-skipping properties gets.
    pub(crate) fn new_table() -> Self {
        StatsColumns {
            num_indexed: buoyant_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(
                32,
            ),
            columns: None,
        }
    }

    /// The table's own.
    pub(crate) fn of(snapshot: &deltalake::table::state::DeltaTableState) -> Self {
        use deltalake::kernel::transaction::TableReference as _;
        use deltalake::table::config::TablePropertiesExt as _;
        let config = snapshot.config();
        StatsColumns {
            num_indexed: config.num_indexed_cols(),
            columns: config
                .data_skipping_stats_columns
                .as_ref()
                .map(|cs| cs.iter().map(|c| c.to_string()).collect()),
        }
    }
}

/// The layout bronze's own reads and writes of data files do not handle: partitions
/// (values in paths, not in files). An error naming the table and what to do.
pub(crate) fn check_plain_layout(
    table: &str,
    snapshot: &deltalake::table::state::DeltaTableState,
) -> Result<()> {
    let partitions = snapshot.metadata().partition_columns();
    if !partitions.is_empty() {
        return Err(Error::delta(
            table,
            "rewrite",
            DeltaTableError::Generic(format!(
                "the table is partitioned by {partitions:?}; bronze writes unpartitioned tables \
                 and cannot rewrite partitioned files: load into a table of its own"
            )),
        ));
    }
    Ok(())
}

/// The rows of one data file (`path` relative to the table), as the `parquet` crate
/// reads them.
pub(crate) async fn read_file(
    store: &ObjectStoreRef,
    path: &deltalake::Path,
) -> std::result::Result<Vec<RecordBatch>, DeltaTableError> {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let bytes = store.get(path).await?.bytes().await?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?
        .with_batch_size(8192)
        .build()?;
    Ok(reader.collect::<std::result::Result<Vec<_>, ArrowError>>()?)
}

/// `batch` in `schema`: columns by name, cast where the type differs (an error, never a
/// null, for a value the type cannot hold), null where `batch` lacks the column (a file
/// written before the column was added).
pub(crate) fn conform(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, ArrowError> {
    if batch.schema() == *schema {
        return Ok(batch.clone());
    }
    let strict = arrow::compute::CastOptions {
        safe: false,
        ..Default::default()
    };
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(Arc::clone(c)),
            Some(c) => arrow::compute::cast_with_options(c, f.data_type(), &strict),
            None => Ok(arrow::array::new_null_array(
                f.data_type(),
                batch.num_rows(),
            )),
        })
        .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)
}

/// The table's schema with the columns of `batches` it lacks appended, nullable (older
/// files read them as null), in the order they first appear.
pub(crate) fn merged_schema(table: &Schema, batches: &[RecordBatch]) -> SchemaRef {
    let mut fields: Vec<Field> = table.fields().iter().map(|f| f.as_ref().clone()).collect();
    for b in batches {
        for f in b.schema().fields() {
            if !fields.iter().any(|x| x.name() == f.name()) {
                fields.push(f.as_ref().clone().with_nullable(true));
            }
        }
    }
    Arc::new(Schema::new_with_metadata(fields, table.metadata().clone()))
}

/// Column types bronze writes into a new or widened schema without a protocol feature
/// (the flattener's, `_corrupt_records`' binary, dates and decimals).
pub(crate) fn plain_type(t: &DataType) -> bool {
    use arrow::datatypes::TimeUnit;
    matches!(
        t,
        DataType::Utf8
            | DataType::Binary
            | DataType::Int64
            | DataType::Int32
            | DataType::Float64
            | DataType::Boolean
            | DataType::Date32
            | DataType::Decimal128(..)
            | DataType::Timestamp(TimeUnit::Microsecond, Some(_))
    )
}
