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
    /// The clustering columns (physical paths): a file without one of them gets its
    /// null count in the statistics ([`super::exact_stats::absent_columns_null`]).
    pub(crate) clustering: Vec<Vec<String>>,
}

impl StatsColumns {
    /// What a new table without data-skipping properties gets.
    pub(crate) fn new_table() -> Self {
        StatsColumns {
            num_indexed: buoyant_kernel::table_properties::DataSkippingNumIndexedCols::NumColumns(
                32,
            ),
            columns: None,
            clustering: Vec::new(),
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
            clustering: Vec::new(),
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
/// reads them, with INT96 timestamps (Spark's default) in microseconds.
pub(crate) async fn read_file(
    store: &ObjectStoreRef,
    path: &deltalake::Path,
) -> std::result::Result<Vec<RecordBatch>, DeltaTableError> {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    let bytes = store.get(path).await?.bytes().await?;
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?;
    if let Some(hint) = int96_in_micros(builder.parquet_schema(), builder.schema()) {
        let options = ArrowReaderOptions::new().with_schema(hint);
        builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options)?;
    }
    let legacy = legacy_calendar(builder.metadata().file_metadata());
    let reader = builder.with_batch_size(8192).build()?;
    let batches = reader.collect::<std::result::Result<Vec<_>, ArrowError>>()?;
    if let Some(key) = legacy {
        refuse_shifted_values(&batches, path, key)?;
    }
    Ok(batches)
}

/// What in Spark's file metadata says the file's dates and timestamps are in the legacy
/// hybrid (Julian before 1582) calendar, when it does: a `legacyINT96` or
/// `legacyDateTime` key, or, as Spark reads it, a file written by Spark before 3.1 (which
/// wrote no such key; 3.0 already wrote dates in the proleptic calendar but INT96 still
/// in the hybrid one, so 3.0 is treated as legacy too, which only refuses more).
fn legacy_calendar(meta: &parquet::file::metadata::FileMetaData) -> Option<&'static str> {
    const KEYS: [&str; 2] = [
        "org.apache.spark.legacyINT96",
        "org.apache.spark.legacyDateTime",
    ];
    let kv = meta.key_value_metadata()?;
    if let Some(k) = KEYS.into_iter().find(|k| kv.iter().any(|e| e.key == *k)) {
        return Some(k);
    }
    let version = kv
        .iter()
        .find(|e| e.key == "org.apache.spark.version")
        .and_then(|e| e.value.as_deref())?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    ((major, minor) < (3, 1)).then_some("written by Spark before 3.1")
}

/// Days since the epoch of 1582-10-15 and microseconds of 1900-01-01T00:00:00Z: before
/// them, Spark's legacy calendar and the proleptic Gregorian one bronze writes differ.
const LEGACY_DATE_BEFORE: i32 = -141_427;
const LEGACY_TIMESTAMP_BEFORE: i64 = -2_208_988_800_000_000;

/// An error naming the file when a file in the legacy calendar (`key`) holds a date or a
/// timestamp its copy would shift; the others copy exactly.
fn refuse_shifted_values(
    batches: &[RecordBatch],
    path: &deltalake::Path,
    key: &str,
) -> std::result::Result<(), DeltaTableError> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Date32Type, TimeUnit, TimestampMicrosecondType};
    fn early(c: &arrow::array::ArrayRef) -> bool {
        match c.data_type() {
            DataType::Struct(_) => c.as_struct().columns().iter().any(early),
            DataType::List(_) => early(c.as_list::<i32>().values()),
            DataType::Map(..) => c.as_map().entries().columns().iter().any(early),
            _ => early_leaf(c),
        }
    }
    fn early_leaf(c: &arrow::array::ArrayRef) -> bool {
        use arrow::datatypes::{TimestampMillisecondType, TimestampNanosecondType};
        match c.data_type() {
            DataType::Timestamp(TimeUnit::Millisecond, _) => c
                .as_primitive::<TimestampMillisecondType>()
                .iter()
                .flatten()
                .any(|t| t < LEGACY_TIMESTAMP_BEFORE / 1_000),
            DataType::Timestamp(TimeUnit::Nanosecond, _) => c
                .as_primitive::<TimestampNanosecondType>()
                .iter()
                .flatten()
                .any(|t| t.div_euclid(1_000) < LEGACY_TIMESTAMP_BEFORE),
            DataType::Date32 => c
                .as_primitive::<Date32Type>()
                .iter()
                .flatten()
                .any(|d| d < LEGACY_DATE_BEFORE),
            DataType::Timestamp(TimeUnit::Microsecond, _) => c
                .as_primitive::<TimestampMicrosecondType>()
                .iter()
                .flatten()
                .any(|t| t < LEGACY_TIMESTAMP_BEFORE),
            _ => false,
        }
    }
    for b in batches {
        if let Some(i) = (0..b.num_columns()).find(|&i| early(b.column(i))) {
            return Err(DeltaTableError::Generic(format!(
                "data file {path} was written in Spark's legacy hybrid calendar ({key}) and its \
                 column `{}` holds a date before 1582-10-15 or a timestamp before 1900-01-01, \
                 which a copy in the proleptic Gregorian calendar would shift; nothing was \
                 written. Have Spark rewrite the file first with \
                 spark.sql.parquet.int96RebaseModeInWrite and \
                 spark.sql.parquet.datetimeRebaseModeInWrite set to CORRECTED (OPTIMIZE, or \
                 an UPDATE of its rows)",
                b.schema().field(i).name()
            )));
        }
    }
    Ok(())
}

/// `schema` (the Arrow schema the `parquet` crate reads from `parquet`) with every INT96
/// timestamp in microseconds, or `None` when the file has no INT96 column. The crate
/// reads INT96 as nanoseconds by default, which wrap silently outside 1677-2262 (Spark's
/// `9999-12-31` sentinels among them); microseconds cover every instant a Delta
/// timestamp holds.
fn int96_in_micros(
    parquet: &parquet::schema::types::SchemaDescriptor,
    schema: &SchemaRef,
) -> Option<SchemaRef> {
    let int96: Vec<bool> = parquet
        .columns()
        .iter()
        .map(|c| c.physical_type() == parquet::basic::Type::INT96)
        .collect();
    if !int96.contains(&true) {
        return None;
    }
    // Arrow's leaves come in the order of the Parquet schema's leaf columns.
    let mut leaves = int96.into_iter();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| with_micros(f, &mut leaves))
        .collect();
    Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

/// `field` with its INT96 leaves (`leaves` says, in order, which leaf is one) read as
/// microseconds.
fn with_micros(field: &Field, leaves: &mut dyn Iterator<Item = bool>) -> Field {
    use arrow::datatypes::TimeUnit;
    let nested =
        |f: &Arc<Field>, leaves: &mut dyn Iterator<Item = bool>| Arc::new(with_micros(f, leaves));
    let data_type = match field.data_type() {
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| with_micros(f, leaves))
                .collect::<Vec<_>>()
                .into(),
        ),
        DataType::List(f) => DataType::List(nested(f, leaves)),
        DataType::LargeList(f) => DataType::LargeList(nested(f, leaves)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(nested(f, leaves), *n),
        DataType::Map(f, sorted) => DataType::Map(nested(f, leaves), *sorted),
        other => match (leaves.next(), other) {
            (Some(true), DataType::Timestamp(TimeUnit::Nanosecond, tz)) => {
                DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
            }
            _ => other.clone(),
        },
    };
    field.clone().with_data_type(data_type)
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

/// `schema` as the Delta kernel's, a variant column
/// ([`crate::column_types::is_variant`]) as Delta's
/// `variant` type.
pub(crate) fn kernel_schema(
    schema: &arrow::datatypes::Schema,
) -> std::result::Result<deltalake::kernel::StructType, arrow::error::ArrowError> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
    let kernel: deltalake::kernel::StructType = schema.try_into_kernel()?;
    let fields = kernel.fields().cloned().map(|mut f| {
        if schema
            .field_with_name(&f.name)
            .is_ok_and(|a| crate::column_types::is_variant(a.data_type()))
        {
            f.data_type = deltalake::kernel::DataType::unshredded_variant();
        }
        f
    });
    deltalake::kernel::StructType::try_new(fields)
        .map_err(|e| arrow::error::ArrowError::SchemaError(e.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, TimestampMicrosecondArray};

    /// A Parquet file as Spark writes timestamps by default: `ts` INT96 at the top level,
    /// `s.ts` INT96 in a struct, beside an INT64 `id`.
    fn int96_file(instants: &[(i64, i64)]) -> bytes::Bytes {
        use parquet::data_type::{Int64Type, Int96, Int96Type};
        use parquet::file::writer::SerializedFileWriter;
        let schema = parquet::schema::parser::parse_message_type(
            "message spark { required int64 id; required int96 ts; \
             required group s { required int96 ts; } }",
        )
        .unwrap();
        let mut out = Vec::new();
        let mut writer =
            SerializedFileWriter::new(&mut out, Arc::new(schema), Default::default()).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let ids: Vec<i64> = (0..instants.len() as i64).collect();
        let mut column = group.next_column().unwrap().unwrap();
        column
            .typed::<Int64Type>()
            .write_batch(&ids, None, None)
            .unwrap();
        column.close().unwrap();
        for _ in 0..2 {
            // Julian day and nanoseconds of the day, as Spark writes them.
            let values: Vec<Int96> = instants
                .iter()
                .map(|&(secs, nanos)| {
                    let day = secs.div_euclid(86_400);
                    let nanos_of_day = secs.rem_euclid(86_400) * 1_000_000_000 + nanos;
                    let mut v = Int96::new();
                    v.set_data(
                        nanos_of_day as u32,
                        (nanos_of_day >> 32) as u32,
                        (day + 2_440_588) as u32,
                    );
                    v
                })
                .collect();
            let mut column = group.next_column().unwrap().unwrap();
            column
                .typed::<Int96Type>()
                .write_batch(&values, None, None)
                .unwrap();
            column.close().unwrap();
        }
        group.close().unwrap();
        writer.close().unwrap();
        bytes::Bytes::from(out)
    }

    #[tokio::test]
    async fn int96_timestamps_past_2262_read_as_written() {
        use deltalake::logstore::object_store::{ObjectStoreExt as _, memory::InMemory};
        // 9999-12-31 23:59:59, 2999-01-01, 1600-01-01 00:00:00.000001 and the epoch.
        let instants = [
            (253_402_300_799, 0),
            (32_472_144_000, 0),
            (-11_676_096_000, 1_000),
            (0, 0),
        ];
        let store: ObjectStoreRef = Arc::new(InMemory::new());
        let path = deltalake::Path::from("part-0.parquet");
        store
            .put(&path, int96_file(&instants).into())
            .await
            .unwrap();
        let batches = read_file(&store, &path).await.unwrap();
        let expected: Vec<i64> = instants
            .iter()
            .map(|&(secs, nanos)| secs * 1_000_000 + nanos / 1_000)
            .collect();
        let micros = |a: &dyn Array| {
            a.as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("INT96 read as microseconds")
                .values()
                .to_vec()
        };
        let b = &batches[0];
        assert_eq!(micros(b.column_by_name("ts").unwrap()), expected);
        let s = b
            .column_by_name("s")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow::array::StructArray>()
            .unwrap();
        assert_eq!(micros(s.column(0)), expected);
        // Conformed to a table's UTC timestamp column, the values stay.
        let table = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into())),
            false,
        )]));
        let conformed = conform(b, &table).unwrap();
        assert_eq!(micros(conformed.column(0)), expected);
    }
}
