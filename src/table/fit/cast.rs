//! A batch cast to its table's types, where that keeps every value.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::DeltaTableError;

use crate::error::{Error, Result};
use crate::naming::TableName;

/// Casts the batch's columns to the table's types where that keeps every value.
pub(crate) fn cast_to_table(
    table: &TableName,
    batch: RecordBatch,
    target: &SchemaRef,
) -> Result<RecordBatch> {
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        match target.field_with_name(field.name()) {
            Ok(t) if t.data_type() != field.data_type() => {
                let lossless = matches!(
                    (field.data_type(), t.data_type()),
                    (_, DataType::Utf8) | (DataType::Int64, DataType::Float64)
                ) || matches!(t.data_type(), DataType::Timestamp(..));
                if !lossless {
                    return Err(Error::delta(
                        table.as_str(),
                        "write",
                        DeltaTableError::Generic(format!(
                            "column `{}` is {} in the table but this batch has {} values that do not fit it",
                            field.name(),
                            t.data_type(),
                            field.data_type()
                        )),
                    ));
                }
                let cast_array =
                    cast(array, t.data_type()).map_err(|e| Error::arrow(table.as_str(), e))?;
                fields.push(Field::new(field.name(), t.data_type().clone(), true));
                columns.push(cast_array);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(Arc::clone(array));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::arrow(table.as_str(), e))
}
