//! Column mapping (Delta protocol, "Column Mapping"): a table another engine set to
//! `delta.columnMapping.mode = name` or `id` names its columns in data files by
//! physical names (and parquet field ids), which stay when the engine renames or drops a
//! column. Bronze's batches are in the table's logical names; [`Mapping`] turns them
//! into the physical names and field ids data files hold, and rows read back from data
//! files into the logical names, by field id where the file has one (`id` mode needs
//! it), else by physical name. A column bronze adds gets a fresh physical name and the
//! next id ([`with_new_columns`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, make_array};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::error::ArrowError;
use buoyant_kernel::schema::{MetadataValue, StructField, StructType};
use buoyant_kernel::table_features::ColumnMappingMode;
use deltalake::DeltaTableError;

/// The parquet field id an Arrow field carries (the `parquet` crate's key).
const FIELD_ID: &str = "PARQUET:field_id";
/// The column metadata keys of column mapping.
const ID_KEY: &str = "delta.columnMapping.id";
const PHYSICAL_KEY: &str = "delta.columnMapping.physicalName";
/// The table property that holds the highest column id given so far.
const MAX_ID_PROPERTY: &str = "delta.columnMapping.maxColumnId";

/// A column-mapped table's columns: each logical field beside its physical one.
#[derive(Clone, Debug)]
pub(crate) struct Mapping {
    mode: ColumnMappingMode,
    /// The table's columns in logical names (what bronze's batches use).
    logical: SchemaRef,
    /// The same columns, in the same order, under their physical names, with their
    /// field ids (`PARQUET:field_id`, nested fields too).
    physical: SchemaRef,
}

impl Mapping {
    /// The mapping of a table with schema `schema` under `mode`; `None` without mapping.
    pub(crate) fn new(
        schema: &StructType,
        mode: ColumnMappingMode,
    ) -> Result<Option<Mapping>, DeltaTableError> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
        if mode == ColumnMappingMode::None {
            return Ok(None);
        }
        let physical = schema.make_physical(mode)?;
        let logical: Schema = schema.try_into_arrow()?;
        let physical: Schema = (&physical).try_into_arrow()?;
        Ok(Some(Mapping {
            mode,
            logical: Arc::new(logical),
            physical: Arc::new(physical),
        }))
    }

    /// The mapping of `snapshot`'s table; `None` without mapping.
    pub(crate) fn of(
        snapshot: &deltalake::table::state::DeltaTableState,
    ) -> Result<Option<Mapping>, DeltaTableError> {
        let config = snapshot.snapshot().table_configuration();
        Mapping::new(
            config.logical_schema().as_ref(),
            config.column_mapping_mode(),
        )
    }

    /// The physical field of the logical column `name`.
    fn physical_field(&self, name: &str) -> Result<&FieldRef, ArrowError> {
        let i = self.logical.index_of(name).map_err(|_| {
            ArrowError::SchemaError(format!(
                "column `{name}` is not in the table's column mapping"
            ))
        })?;
        Ok(&self.physical.fields()[i])
    }

    /// The logical name of the column whose physical name is `physical`.
    pub(crate) fn logical_name(&self, physical: &str) -> Option<String> {
        let i = self.physical.index_of(physical).ok()?;
        Some(self.logical.field(i).name().clone())
    }

    /// The physical name of the logical column `name` (itself when unmapped).
    pub(crate) fn physical_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.physical_field(name)
            .map(|f| f.name().as_str())
            .unwrap_or(name)
    }

    /// `stats` with its columns (logical names) as data files name them.
    pub(crate) fn physical_stats(
        &self,
        stats: super::shape::StatsColumns,
    ) -> super::shape::StatsColumns {
        super::shape::StatsColumns {
            columns: stats.columns.map(|cs| {
                cs.iter()
                    .map(|c| self.physical_name(c).to_string())
                    .collect()
            }),
            ..stats
        }
    }

    /// `schema` (logical columns of the table) as data files hold it.
    pub(crate) fn physical_schema(&self, schema: &Schema) -> Result<SchemaRef, ArrowError> {
        let fields = schema
            .fields()
            .iter()
            .map(|f| self.physical_field(f.name()).map(Arc::clone))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(Schema::new(fields)))
    }

    /// `batch` (logical columns) as data files hold it: physical names, field ids.
    pub(crate) fn to_physical(&self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let schema = self.physical_schema(batch.schema().as_ref())?;
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| retyped(c, f.data_type()))
            .collect::<Result<Vec<_>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(schema, columns, &options)
    }

    /// `batch`, rows of data file `path`, in the table's logical names: each column found
    /// by its field id when the file's column has one, else (`name` mode) by its
    /// physical name; columns the file lacks are left out (they read as null), as are
    /// the file's columns the table no longer has (dropped by another engine).
    pub(crate) fn to_logical(
        &self,
        batch: &RecordBatch,
        path: &str,
    ) -> Result<RecordBatch, ArrowError> {
        let file = batch.schema();
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for (logical, physical) in self.logical.fields().iter().zip(self.physical.fields()) {
            let id = physical.metadata().get(FIELD_ID);
            let by_id = id.and_then(|id| {
                file.fields()
                    .iter()
                    .position(|f| f.metadata().get(FIELD_ID) == Some(id))
            });
            let found = by_id.or_else(|| match self.mode {
                ColumnMappingMode::Id => None,
                _ => file.index_of(physical.name()).ok(),
            });
            let Some(i) = found else { continue };
            let column = batch.column(i);
            let column = if nested(logical.data_type()) {
                if !same_layout(column.data_type(), logical.data_type()) {
                    return Err(ArrowError::SchemaError(format!(
                        "column `{}` of data file {path} has type {}, which does not match the \
                         table's {}; bronze does not rewrite it",
                        logical.name(),
                        column.data_type(),
                        logical.data_type()
                    )));
                }
                retyped(column, logical.data_type())?
            } else {
                Arc::clone(column)
            };
            fields.push(Field::new(logical.name(), column.data_type().clone(), true));
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
    }
}

/// Whether `t` has child fields (whose names a mapping changes).
fn nested(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_) | DataType::Map(..)
    )
}

/// Whether `a` and `b` are the same type but for the names and metadata of their child
/// fields: the same memory layout.
fn same_layout(a: &DataType, b: &DataType) -> bool {
    match (a, b) {
        (DataType::Struct(x), DataType::Struct(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(x, y)| same_layout(x.data_type(), y.data_type()))
        }
        (DataType::List(x), DataType::List(y))
        | (DataType::LargeList(x), DataType::LargeList(y))
        | (DataType::Map(x, _), DataType::Map(y, _)) => same_layout(x.data_type(), y.data_type()),
        _ => a == b,
    }
}

/// `array` typed as `to`, a type of the same layout whose child fields are named
/// otherwise (nothing is copied).
fn retyped(array: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    if array.data_type() == to {
        return Ok(Arc::clone(array));
    }
    Ok(make_array(retyped_data(array.to_data(), to)?))
}

fn retyped_data(
    data: arrow::array::ArrayData,
    to: &DataType,
) -> Result<arrow::array::ArrayData, ArrowError> {
    let children: Vec<&DataType> = match to {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type()).collect(),
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => vec![f.data_type()],
        _ => Vec::new(),
    };
    let child_data = data
        .child_data()
        .iter()
        .zip(children)
        .map(|(c, t)| retyped_data(c.clone(), t))
        .collect::<Result<Vec<_>, _>>()?;
    let builder = data.into_builder().data_type(to.clone());
    let builder = if child_data.is_empty() {
        builder
    } else {
        builder.child_data(child_data)
    };
    builder.build()
}

/// `existing` (the table's schema, exact) with `new` (columns bronze adds, from Arrow)
/// appended; under column mapping each new column (and each field nested in it) gets
/// the next id and a physical name of its own, and `max_id` (the table's
/// `delta.columnMapping.maxColumnId`) is advanced past them. Returns the schema and the
/// new highest id (`None` without mapping).
pub(crate) fn with_new_columns(
    existing: &StructType,
    new: &[FieldRef],
    (mode, max_id): (ColumnMappingMode, i64),
) -> Result<(StructType, Option<i64>), DeltaTableError> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
    let mut fields: Vec<StructField> = existing.fields().cloned().collect();
    let mut max = max_id;
    for f in new {
        let field: StructField = f.as_ref().try_into_kernel()?;
        let field = if mode == ColumnMappingMode::None {
            field
        } else {
            mapped(field, &mut max)
        };
        fields.push(field);
    }
    let schema = StructType::try_new(fields)?;
    Ok((schema, (mode != ColumnMappingMode::None).then_some(max)))
}

/// `field` with the next column id and a fresh physical name (`col-<uuid>`, as Delta
/// names them), nested struct fields too.
fn mapped(field: StructField, max: &mut i64) -> StructField {
    use buoyant_kernel::schema::DataType as K;
    *max += 1;
    let id = *max;
    let data_type = match field.data_type() {
        K::Struct(s) => {
            let children: Vec<StructField> = s.fields().cloned().map(|c| mapped(c, max)).collect();
            StructType::try_new(children)
                .map(|s| K::Struct(Box::new(s)))
                .unwrap_or_else(|_| field.data_type().clone())
        }
        other => other.clone(),
    };
    let mut metadata = field.metadata().clone();
    metadata.insert(ID_KEY.to_string(), MetadataValue::Number(id));
    metadata.insert(
        PHYSICAL_KEY.to_string(),
        MetadataValue::String(format!("col-{}", uuid::Uuid::new_v4())),
    );
    StructField::new(field.name().clone(), data_type, field.is_nullable()).with_metadata(metadata)
}

/// The `delta.columnMapping.maxColumnId` of a table's configuration (0 when unset).
pub(crate) fn max_column_id(configuration: &std::collections::HashMap<String, String>) -> i64 {
    configuration
        .get(MAX_ID_PROPERTY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The property key of [`max_column_id`].
pub(crate) fn max_column_id_key() -> String {
    MAX_ID_PROPERTY.to_string()
}
