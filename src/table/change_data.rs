//! Change data files (Delta protocol, "Change Data Files") for a table with the change
//! data feed on (`delta.enableChangeDataFeed`). A commit that only adds files, or
//! removes whole files of rows it deletes, needs none: readers take its adds as inserts
//! and its removes as deletes. A rewrite that writes rows of a removed file again does:
//! once a commit has a `cdc` action, readers take its changes from the change data files
//! alone, so the file holds the batch's deleted rows (`delete`) and its new rows
//! (`insert`), and the copied rows appear in neither.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::DeltaTableError;

use super::mapping::Mapping;

/// The column a change data file adds to the table's.
const CHANGE_TYPE: &str = "_change_type";

/// Writes the change data file of a rewrite that deletes `deleted` and inserts
/// `inserted` (both in `schema`, the table's logical columns) into the table behind
/// `store`: its `cdc` action, `None` when there is no change.
pub(super) async fn write(
    store: &deltalake::logstore::ObjectStoreRef,
    schema: &SchemaRef,
    deleted: &[RecordBatch],
    inserted: &[RecordBatch],
    mapping: Option<&Mapping>,
    compression: super::Compression,
) -> Result<Option<deltalake::kernel::AddCDCFile>, DeltaTableError> {
    let rows: usize = deleted
        .iter()
        .chain(inserted)
        .map(RecordBatch::num_rows)
        .sum();
    if rows == 0 {
        return Ok(None);
    }
    let data = match mapping {
        Some(m) => m.physical_schema(schema)?,
        None => Arc::clone(schema),
    };
    let mut fields: Vec<Arc<Field>> = data.fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(CHANGE_TYPE, DataType::Utf8, false)));
    let out = Arc::new(Schema::new(fields));
    let mut bytes = Vec::new();
    let properties = super::writer_properties(compression);
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, Arc::clone(&out), Some(properties))?;
    for (batches, kind) in [(deleted, "delete"), (inserted, "insert")] {
        for b in batches {
            let b = match mapping {
                Some(m) => m.to_physical(b)?,
                None => b.clone(),
            };
            let mut columns: Vec<ArrayRef> = b.columns().to_vec();
            columns.push(Arc::new(StringArray::from(vec![kind; b.num_rows()])));
            writer.write(&RecordBatch::try_new(Arc::clone(&out), columns)?)?;
        }
    }
    writer.close()?;
    let path = format!(
        "_change_data/cdc-00000-{}.c000.parquet",
        uuid::Uuid::new_v4()
    );
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let size = bytes.len() as i64;
    store
        .put(&deltalake::Path::from(path.as_str()), bytes.into())
        .await?;
    Ok(Some(deltalake::kernel::AddCDCFile {
        path,
        size,
        partition_values: Default::default(),
        data_change: false,
        tags: None,
    }))
}
