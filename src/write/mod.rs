//! Write: one table's rows for one (batch, topic) → a Delta commit.
//!
//! A write replaces this batch's rows for its topic (`_batch_id = X AND _topic = T`,
//! built as a typed DataFusion expression, never pasted into SQL) in one commit, so a
//! rerun converges to the same rows and two topics feeding one child table never erase
//! each other. New columns are added in the same commit (schema merge). Where the table
//! already has a column, its type wins when the new values can be cast losslessly
//! (integers to float, anything to string); otherwise the table's write fails with an
//! error naming the column.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::arrow::array::{ArrayRef, RecordBatch};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::datafusion::prelude::{Expr, col, lit};
use deltalake::operations::write::SchemaMode;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};
use url::Url;

use crate::error::{Error, Result};
use crate::naming::TableName;

/// Where a table lives: `<catalog>/<schema>/<table>`.
pub(crate) fn table_dir(schema_dir: &Path, table: &TableName) -> PathBuf {
    schema_dir.join(table.as_str())
}

pub(crate) fn table_url(dir: &Path) -> Result<Url> {
    Url::from_directory_path(dir).map_err(|()| Error::Config {
        name: "catalog",
        reason: format!("{} is not an absolute path", dir.display()),
    })
}

/// Opens a table; `Ok(None)` when there is no Delta table at `dir` yet.
pub(crate) async fn open(dir: &Path, table: &TableName) -> Result<Option<DeltaTable>> {
    if !dir.join("_delta_log").is_dir() {
        return Ok(None);
    }
    let url = table_url(dir)?;
    deltalake::open_table(url)
        .await
        .map(Some)
        .map_err(|e| Error::delta(table.as_str(), "open", e))
}

/// `_batch_id = batch AND _topic = topic`.
pub(crate) fn batch_topic_predicate(batch_id: &str, topic: &str) -> Expr {
    col("_batch_id")
        .eq(lit(batch_id.to_string()))
        .and(col("_topic").eq(lit(topic.to_string())))
}

/// `_batch_id = batch`.
pub(crate) fn batch_predicate(batch_id: &str) -> Expr {
    col("_batch_id").eq(lit(batch_id.to_string()))
}

/// Replaces the rows matching `predicate` in the table at `dir` with `batch`, creating
/// the table when needed. Returns the committed version.
pub(crate) async fn replace(
    dir: &Path,
    table: &TableName,
    batch: RecordBatch,
    predicate: Expr,
) -> Result<u64> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let existing = open(dir, table).await?;
    let (delta, batch) = match existing {
        Some(t) => {
            let schema = t
                .snapshot()
                .map_err(|e| Error::delta(table.as_str(), "read schema of", e))?
                .snapshot()
                .arrow_schema();
            let batch = conform(table, batch, &schema)?;
            (t, batch)
        }
        None => {
            let url = table_url(dir)?;
            let t = DeltaTable::try_from_url(url)
                .await
                .map_err(|e| Error::delta(table.as_str(), "open", e))?;
            (t, batch)
        }
    };
    let written = delta
        .write(vec![batch])
        .with_save_mode(SaveMode::Overwrite)
        .with_replace_where(predicate)
        .with_schema_mode(SchemaMode::Merge)
        .await
        .map_err(|e| Error::delta(table.as_str(), "write", e))?;
    written
        .version()
        .ok_or_else(|| Error::delta(table.as_str(), "write", DeltaTableError::NotInitialized))
}

/// Deletes the rows matching `predicate`, if the table exists. Returns the new version.
pub(crate) async fn delete(dir: &Path, table: &TableName, predicate: Expr) -> Result<Option<u64>> {
    let Some(t) = open(dir, table).await? else {
        return Ok(None);
    };
    let (t, _metrics) = t
        .delete()
        .with_predicate(predicate)
        .await
        .map_err(|e| Error::delta(table.as_str(), "delete", e))?;
    Ok(t.version())
}

/// Casts the batch's columns to the table's types where that keeps every value.
fn conform(table: &TableName, batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
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
