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

/// The field metadata key marking a column data files hold by its own name, outside the
/// mapping: row tracking's materialized columns (`super::row_ids`).
pub(crate) const OWN_NAME: &str = "bronze.rowTracking.materialized";

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
    /// A column marked [`OWN_NAME`] has its physical name.
    pub(crate) fn physical_schema(&self, schema: &Schema) -> Result<SchemaRef, ArrowError> {
        let materialized = |f: &FieldRef| f.metadata().contains_key(OWN_NAME);
        let fields = schema
            .fields()
            .iter()
            .map(|f| match materialized(f) {
                true => Ok(Arc::clone(f)),
                false => self.physical_field(f.name()).map(Arc::clone),
            })
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

    /// `batch`, rows of data file `path`, in the table's logical names: each column (and
    /// each field of a struct, at any depth) found by its field id in `id` mode, by its
    /// physical name in `name` mode; what the file lacks is left out at the top (it reads
    /// as null) and null inside a struct, and the file's columns the table no longer has
    /// (dropped by another engine) are not read.
    pub(crate) fn to_logical(
        &self,
        batch: &RecordBatch,
        path: &str,
    ) -> Result<RecordBatch, ArrowError> {
        let file = batch.schema();
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for (logical, physical) in self.logical.fields().iter().zip(self.physical.fields()) {
            let Some(i) = self.find(file.fields(), physical) else {
                continue;
            };
            let column = self
                .resolve(batch.column(i), logical, physical)
                .map_err(|e| {
                    ArrowError::SchemaError(format!(
                        "column `{}` of data file {path}: {e}",
                        logical.name()
                    ))
                })?;
            fields.push(Field::new(logical.name(), column.data_type().clone(), true));
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
    }

    /// The position among a file's `fields` of the field whose table field is
    /// `physical`: by field id in `id` mode (a file without ids has none), by physical
    /// name in `name` mode (ids are not used there) and for a field the table gives no id.
    fn find(&self, fields: &arrow::datatypes::Fields, physical: &Field) -> Option<usize> {
        match (self.mode, physical.metadata().get(FIELD_ID)) {
            (ColumnMappingMode::Id, Some(id)) => fields
                .iter()
                .position(|f| f.metadata().get(FIELD_ID) == Some(id)),
            _ => fields.iter().position(|f| f.name() == physical.name()),
        }
    }

    /// A file's `array` of the table field `logical` (`physical` as files name it), in
    /// the logical type: struct fields resolved one by one ([`Mapping::find`]), lists'
    /// elements and maps' entries within them; leaves as the file has them (cast later).
    fn resolve(
        &self,
        array: &ArrayRef,
        logical: &Field,
        physical: &Field,
    ) -> Result<ArrayRef, ArrowError> {
        match (logical.data_type(), physical.data_type(), array.data_type()) {
            (DataType::Struct(l), DataType::Struct(p), DataType::Struct(f)) => {
                self.resolve_struct(array, l, p, f)
            }
            (DataType::List(l), DataType::List(p), DataType::List(_)) => {
                self.resolve_list::<i32>(array, l, p)
            }
            (DataType::LargeList(l), DataType::LargeList(p), DataType::LargeList(_)) => {
                self.resolve_list::<i64>(array, l, p)
            }
            (DataType::Map(l, sorted), DataType::Map(p, _), DataType::Map(..)) => {
                self.resolve_map(array, l, p, *sorted)
            }
            (l, _, f) if nested(l) || nested(f) => Err(ArrowError::SchemaError(format!(
                "the file's {} does not match the table's {}",
                array.data_type(),
                logical.data_type()
            ))),
            _ => Ok(Arc::clone(array)),
        }
    }

    /// [`Mapping::resolve`] of a struct: the table's fields `l` (files name them `p`)
    /// among the file's `f`; one the file lacks is null.
    fn resolve_struct(
        &self,
        array: &ArrayRef,
        l: &arrow::datatypes::Fields,
        p: &arrow::datatypes::Fields,
        f: &arrow::datatypes::Fields,
    ) -> Result<ArrayRef, ArrowError> {
        use arrow::array::{Array as _, AsArray as _, StructArray};
        let s = array.as_struct();
        let children = l
            .iter()
            .zip(p.iter())
            .map(|(l, p)| match self.find(f, p) {
                Some(i) => self.resolve(s.column(i), l, p),
                None => Ok(arrow::array::new_null_array(l.data_type(), s.len())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Arc::new(StructArray::try_new(
            typed_as(l, &children),
            children,
            s.nulls().cloned(),
        )?))
    }

    /// [`Mapping::resolve`] of a list: its elements (`l`, files name it `p`).
    fn resolve_list<O: arrow::array::OffsetSizeTrait>(
        &self,
        array: &ArrayRef,
        l: &FieldRef,
        p: &FieldRef,
    ) -> Result<ArrayRef, ArrowError> {
        use arrow::array::{Array as _, AsArray as _, GenericListArray};
        let a = array.as_list::<O>();
        let values = self.resolve(a.values(), l, p)?;
        let element = Arc::new(
            l.as_ref()
                .clone()
                .with_data_type(values.data_type().clone()),
        );
        let list = GenericListArray::<O>::try_new(
            element,
            a.offsets().clone(),
            values,
            a.nulls().cloned(),
        )?;
        Ok(Arc::new(list))
    }

    /// [`Mapping::resolve`] of a map: its entries (`l`, files name them `p`).
    fn resolve_map(
        &self,
        array: &ArrayRef,
        l: &FieldRef,
        p: &FieldRef,
        sorted: bool,
    ) -> Result<ArrayRef, ArrowError> {
        use arrow::array::{Array as _, AsArray as _, MapArray, StructArray};
        let a = array.as_map();
        // A map's key and value are its entries' first and second fields, whatever the
        // file names them; neither has a field id (Spark writes ids on struct fields only).
        let (DataType::Struct(lf), DataType::Struct(pf)) = (l.data_type(), p.data_type()) else {
            return Err(ArrowError::SchemaError(format!(
                "map entries of type {} are not a struct",
                l.data_type()
            )));
        };
        let file = a.entries();
        let children = lf
            .iter()
            .zip(pf.iter())
            .zip(file.columns())
            .map(|((l, p), c)| self.resolve(c, l, p))
            .collect::<Result<Vec<_>, _>>()?;
        let entries =
            StructArray::try_new(typed_as(lf, &children), children, file.nulls().cloned())?;
        let field = Arc::new(
            l.as_ref()
                .clone()
                .with_data_type(entries.data_type().clone()),
        );
        let map = MapArray::try_new(
            field,
            a.offsets().clone(),
            entries,
            a.nulls().cloned(),
            sorted,
        )?;
        Ok(Arc::new(map))
    }
}

/// The table's struct fields `l` with the types of the `children` resolved for them.
fn typed_as(l: &arrow::datatypes::Fields, children: &[ArrayRef]) -> arrow::datatypes::Fields {
    l.iter()
        .zip(children)
        .map(|(l, c)| Arc::new(l.as_ref().clone().with_data_type(c.data_type().clone())))
        .collect::<Vec<_>>()
        .into()
}

/// What data files are written from: `schema`, `batches` and the statistics columns
/// `stats` (all in logical names) under `mapping`'s physical names and field ids, or as
/// they are without one.
pub(crate) fn for_files<'a>(
    mapping: Option<&Mapping>,
    schema: SchemaRef,
    batches: &'a [RecordBatch],
    stats: super::shape::StatsColumns,
) -> Result<
    (
        SchemaRef,
        std::borrow::Cow<'a, [RecordBatch]>,
        super::shape::StatsColumns,
    ),
    ArrowError,
> {
    let Some(m) = mapping else {
        return Ok((schema, std::borrow::Cow::Borrowed(batches), stats));
    };
    let physical = batches
        .iter()
        .map(|b| m.to_physical(b))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        m.physical_schema(&schema)?,
        std::borrow::Cow::Owned(physical),
        m.physical_stats(stats),
    ))
}

/// Whether `t` has child fields (whose names a mapping changes).
fn nested(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_) | DataType::Map(..)
    )
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
    mode: ColumnMappingMode,
    max_id: i64,
) -> Result<(StructType, Option<i64>), DeltaTableError> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
    let mut fields: Vec<StructField> = existing.fields().cloned().collect();
    let mut max = max_id;
    for f in new {
        let mut field: StructField = f.as_ref().try_into_kernel()?;
        if crate::column_types::is_variant(f.data_type()) {
            field.data_type = deltalake::kernel::DataType::unshredded_variant();
        }
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

/// The highest column id a table has given: its `delta.columnMapping.maxColumnId`, or
/// the highest id in `schema` (nested fields too) when that is higher or the property
/// is missing.
pub(crate) fn max_column_id(
    configuration: &std::collections::HashMap<String, String>,
    schema: &StructType,
) -> i64 {
    let property = configuration
        .get(MAX_ID_PROPERTY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    property.max(highest_id(schema))
}

/// The highest `delta.columnMapping.id` among `schema`'s fields, at any depth (0: none).
fn highest_id(schema: &StructType) -> i64 {
    use buoyant_kernel::schema::DataType as K;
    fn of_type(t: &K) -> i64 {
        match t {
            K::Struct(s) => highest_id(s),
            K::Array(a) => of_type(a.element_type()),
            K::Map(m) => of_type(m.key_type()).max(of_type(m.value_type())),
            _ => 0,
        }
    }
    schema
        .fields()
        .map(|f| {
            let own = match f.metadata().get(ID_KEY) {
                Some(MetadataValue::Number(n)) => *n,
                _ => 0,
            };
            own.max(of_type(f.data_type()))
        })
        .max()
        .unwrap_or(0)
}

/// The property key of [`max_column_id`].
pub(crate) fn max_column_id_key() -> String {
    MAX_ID_PROPERTY.to_string()
}
