//! The fitted rows of several topics for one table, concatenated for one commit.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};

use crate::error::{Error, Result};
use crate::naming::TableName;

/// Concatenates batches of one table from several topics into one, over the union of
/// their columns (in order of first appearance). A column that one topic typed
/// differently widens: int64 and float64 to float64, anything else to string.
pub(crate) fn widen(table: &TableName, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    if let [one] = batches {
        return Ok(vec![one.clone()]);
    }
    let mut fields: Vec<Field> = Vec::new();
    for b in batches {
        for f in b.schema().fields() {
            match fields.iter_mut().find(|x| x.name() == f.name()) {
                None => fields.push(f.as_ref().clone()),
                Some(x) if x.data_type() != f.data_type() => {
                    let widened = match (x.data_type(), f.data_type()) {
                        (DataType::Int64, DataType::Float64)
                        | (DataType::Float64, DataType::Int64) => DataType::Float64,
                        _ => DataType::Utf8,
                    };
                    *x = Field::new(x.name(), widened, true);
                }
                Some(x) => {
                    if f.is_nullable() && !x.is_nullable() {
                        *x = x.clone().with_nullable(true);
                    }
                }
            }
        }
    }
    // A column missing from some topic is null there.
    for f in fields.iter_mut() {
        if batches
            .iter()
            .any(|b| b.schema().field_with_name(f.name()).is_err())
        {
            *f = f.clone().with_nullable(true);
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let mut conformed = Vec::with_capacity(batches.len());
    for b in batches {
        let columns = schema
            .fields()
            .iter()
            .map(|f| match b.column_by_name(f.name()) {
                Some(c) if c.data_type() == f.data_type() => Ok(Arc::clone(c)),
                Some(c) => cast(c, f.data_type()),
                None => Ok(arrow::array::new_null_array(f.data_type(), b.num_rows())),
            })
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()
            .map_err(|e| Error::arrow(table.as_str(), e))?;
        conformed.push(
            RecordBatch::try_new(Arc::clone(&schema), columns)
                .map_err(|e| Error::arrow(table.as_str(), e))?,
        );
    }
    Ok(conformed)
}
