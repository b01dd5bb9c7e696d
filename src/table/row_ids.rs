//! Row tracking's ids kept through copies. On a table with row tracking on, a row's id is
//! its file's `baseRowId` plus its position in the file, and its commit version the file's
//! `defaultRowCommitVersion`, unless the file materializes them in the two columns the
//! table's configuration names (`delta.rowTracking.materializedRowIdColumnName`,
//! `…materializedRowCommitVersionColumnName`). A compaction or a rerun that copies rows
//! into a new file writes both columns for them, as Spark's OPTIMIZE does, so each copied
//! row keeps its id and version; the rows a commit adds leave them null (new ids from the
//! new file's `baseRowId`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use super::mapping::Mapping;
use super::shape::conform;

/// The field metadata key marking a materialized row-tracking column in the schema bronze
/// writes files with (column mapping passes such a column through by its own name).
pub(crate) const MATERIALIZED: &str = super::mapping::OWN_NAME;

/// The two materialized columns of a row-tracking table (physical names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Materialized {
    pub(crate) row_id: String,
    pub(crate) commit_version: String,
}

/// What a data file says of its rows' ids: `baseRowId`, `defaultRowCommitVersion`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FileIds {
    pub(crate) base_row_id: Option<i64>,
    pub(crate) default_version: Option<i64>,
}

impl FileIds {
    #[allow(deprecated)] // The file's add action is its only way to both fields.
    pub(crate) fn of(f: &deltalake::kernel::LogicalFileView) -> FileIds {
        let add = f.add_action();
        FileIds {
            base_row_id: add.base_row_id,
            default_version: add.default_row_commit_version,
        }
    }
}

impl Materialized {
    /// The table's materialized columns while row tracking is supported and not
    /// suspended and the configuration names both.
    pub(crate) fn of(snapshot: &deltalake::table::state::DeltaTableState) -> Option<Self> {
        use buoyant_kernel::table_features::TableFeature;
        let config = snapshot.snapshot().table_configuration();
        let props = config.table_properties();
        if !config.is_feature_supported(&TableFeature::RowTracking)
            || props.row_tracking_suspended == Some(true)
        {
            return None;
        }
        Some(Materialized {
            row_id: props.materialized_row_id_column_name.clone()?,
            commit_version: props.materialized_row_commit_version_column_name.clone()?,
        })
    }

    fn fields(&self) -> [Field; 2] {
        let marked = |name: &str| {
            Field::new(name, DataType::Int64, true).with_metadata(
                [(MATERIALIZED.to_string(), "true".to_string())]
                    .into_iter()
                    .collect(),
            )
        };
        [marked(&self.row_id), marked(&self.commit_version)]
    }

    /// `schema` (the table's logical columns) with the two columns after them: the
    /// schema of the files a copy writes.
    pub(crate) fn extended(&self, schema: &SchemaRef) -> SchemaRef {
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.extend(self.fields());
        Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
    }

    /// Each row's id and commit version in a file's `raw` batches (file order, before
    /// its deletion vector applies): the materialized value where the file has one, else
    /// the file's base id plus the row's position and the file's default version (null
    /// when the file has neither).
    fn ids(&self, raw: &RecordBatch, start: i64, file: FileIds) -> [ArrayRef; 2] {
        let n = raw.num_rows();
        let kept = |name: &str| {
            raw.column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
        };
        let id = kept(&self.row_id);
        let version = kept(&self.commit_version);
        let ids: Int64Array = (0..n)
            .map(|i| match &id {
                Some(c) if c.is_valid(i) => Some(c.value(i)),
                _ => file.base_row_id.map(|b| b + start + i as i64),
            })
            .collect();
        let versions: Int64Array = (0..n)
            .map(|i| match &version {
                Some(c) if c.is_valid(i) => Some(c.value(i)),
                _ => file.default_version,
            })
            .collect();
        [Arc::new(ids), Arc::new(versions)]
    }
}

/// A data file a copy takes rows from.
#[derive(Clone, Copy)]
pub(crate) struct CopiedFile<'a> {
    /// Its path, as the log records it.
    pub(crate) path: &'a str,
    /// What gives its rows their ids.
    pub(crate) ids: FileIds,
    /// The positions of its rows a deletion vector deleted, ascending.
    pub(crate) deleted: &'a [u64],
}

/// The shape of the rows a copy takes: the table's logical `schema`, read through its
/// column `mapping`, and with its `materialized` row-id columns.
#[derive(Clone, Copy)]
pub(crate) struct RowShape<'a> {
    pub(crate) schema: &'a SchemaRef,
    pub(crate) mapping: Option<&'a Mapping>,
    pub(crate) materialized: Option<&'a Materialized>,
}

/// The rows a copy takes from one data file: its `raw` batches (as read) without the rows
/// its deletion vector deleted, in the table's logical schema; with row-id columns
/// materialized, each row's id and commit version after them ([`Materialized::extended`]).
pub(crate) fn copied_rows(
    raw: Vec<RecordBatch>,
    file: CopiedFile<'_>,
    shape: RowShape<'_>,
) -> Result<Vec<RecordBatch>, ArrowError> {
    let RowShape {
        schema,
        mapping,
        materialized,
    } = shape;
    let CopiedFile {
        path,
        ids: file,
        deleted,
    } = file;
    let logical = |b: &RecordBatch| {
        let b = match mapping {
            Some(m) => m.to_logical(b, path)?,
            None => b.clone(),
        };
        conform(&b, schema)
    };
    let Some(m) = materialized else {
        let raw = super::deletion::without_rows(raw, deleted)?;
        return raw.iter().map(logical).collect();
    };
    // The ids ride beside the rows through the deletion vector's filter.
    let mut start = 0i64;
    let mut with_ids = Vec::with_capacity(raw.len());
    for b in &raw {
        let [ids, versions] = m.ids(b, start, file);
        start += b.num_rows() as i64;
        let mut fields: Vec<Field> = vec![Field::new("row_id", DataType::Int64, true)];
        fields.push(Field::new("row_commit_version", DataType::Int64, true));
        let keys = RecordBatch::try_new(Arc::new(Schema::new(fields)), vec![ids, versions])?;
        with_ids.push((b.clone(), keys));
    }
    let (rows, keys): (Vec<_>, Vec<_>) = with_ids.into_iter().unzip();
    let rows = super::deletion::without_rows(rows, deleted)?;
    let keys = super::deletion::without_rows(keys, deleted)?;
    let extended = m.extended(schema);
    rows.iter()
        .zip(keys)
        .map(|(b, k)| {
            let mut columns = logical(b)?.columns().to_vec();
            columns.extend(k.columns().iter().cloned());
            let options = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
            RecordBatch::try_new_with_options(Arc::clone(&extended), columns, &options)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    fn m() -> Materialized {
        Materialized {
            row_id: "_row-id-col-1".into(),
            commit_version: "_row-commit-version-col-1".into(),
        }
    }

    fn values(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
        let c = b.column_by_name(name).unwrap().as_primitive::<Int64Type>();
        (0..c.len())
            .map(|i| c.is_valid(i).then(|| c.value(i)))
            .collect()
    }

    #[test]
    fn copied_rows_keep_materialized_ids_or_take_base_plus_position_across_a_deletion_vector() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let raw = |xs: Vec<i64>, ids: Vec<Option<i64>>| {
            RecordBatch::try_from_iter([
                ("x", Arc::new(Int64Array::from(xs)) as ArrayRef),
                ("_row-id-col-1", Arc::new(Int64Array::from(ids)) as ArrayRef),
            ])
            .unwrap()
        };
        let file = FileIds {
            base_row_id: Some(100),
            default_version: Some(7),
        };
        let out = copied_rows(
            vec![
                raw(vec![0, 1, 2], vec![None, Some(5), None]),
                raw(vec![3, 4], vec![None, None]),
            ],
            CopiedFile {
                path: "f.parquet",
                ids: file,
                deleted: &[0, 3],
            },
            RowShape {
                schema: &schema,
                mapping: None,
                materialized: Some(&m()),
            },
        )
        .unwrap();
        let all = arrow::compute::concat_batches(&m().extended(&schema), &out).unwrap();
        assert_eq!(values(&all, "x"), [Some(1), Some(2), Some(4)]);
        assert_eq!(
            values(&all, "_row-id-col-1"),
            [Some(5), Some(102), Some(104)]
        );
        assert_eq!(values(&all, "_row-commit-version-col-1"), [Some(7); 3]);
        // Without row tracking the rows alone, in the table's columns.
        let plain = copied_rows(
            vec![raw(vec![0, 1], vec![None, None])],
            CopiedFile {
                path: "f.parquet",
                ids: file,
                deleted: &[1],
            },
            RowShape {
                schema: &schema,
                mapping: None,
                materialized: None,
            },
        )
        .unwrap();
        assert_eq!(plain[0].schema(), schema);
        assert_eq!(values(&plain[0], "x"), [Some(0)]);
    }
}
