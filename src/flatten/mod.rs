//! Flatten: one topic's staged messages → a topic table plus child tables.
//!
//! Takes a topic's staging [`RecordBatch`] (schema [`crate::stage::staging_schema`]) and
//! gives back a [`TablePlan`]: one Arrow batch per target table. Pure: no I/O. The
//! payload text is read with [`crate::json`], so cells borrow the staged text (no copy
//! per value), numbers keep their literal and sub-trees kept as JSON are their exact
//! source text.
//!
//! Rules (also in `docs/tables.md` and `DESIGN.md`):
//! - nested objects become columns joined with `__` (`quote__bid`); every data column
//!   carries its original path as a JSON pointer in field metadata `bronze.path`;
//! - an array whose elements are all objects becomes rows of a child table named by its
//!   path (`currentprice`, `quotes__legs`), shared by every topic with an array at that
//!   path (or qualified by topic, or mapped explicitly: [`FlattenConfig`]); any other
//!   non-empty array becomes rows of a child table with one `value` column (objects and
//!   arrays inside it as JSON text); an empty array or object is kept as the JSON text
//!   `[]` / `{}` in the parent's column at its path;
//! - objects and arrays deeper than `max_depth` are kept as their JSON source text;
//! - a payload that is not an object is one `value` column (path ``);
//! - envelope metadata becomes `_meta__<field>` columns (path `_meta/<pointer>`);
//! - column types: see [`TypesMode`]. A JSON-text column is marked `bronze.json=true`;
//! - a column whose pointer in the payload (`*` for an array's elements) has a hint
//!   ([`crate::column_types`]) takes the hinted type; a value that does not convert is
//!   null in it and goes to `_rescued_data` under the column's path (`/amount`), as a
//!   value that does not fit an existing column does. A `json` hint keeps an object or
//!   array at its pointer whole (at `/arr/*`, each element whole in the child table's
//!   `value` column, objects too). Hinted and detectable columns are marked for
//!   [`crate::table::fit::to_table`], which detects timestamp and date columns;
//! - a key repeated in one object: the last value is the column's (as JSON readers do),
//!   earlier ones go to `_rescued_data` under `dup:<pointer>` as a JSON array.
//!
//! Keys: a topic row's `_id` is its message id. A child row's `_id` is its element's place
//! in the message: the parent row's `_id`, the array's JSON pointer from the parent's row
//! (`/holdings`, `/legs/items`: keys with `~` → `~0`, `/` → `~1`) and `/<index>`, so
//! `m-7/holdings/3/lots/1`; a first-level row starts from the message id escaped the same
//! way (`a/b` → `a~1b`). Its `_parent_id` is the parent row's `_id`, `_root_id` the message
//! id, `_idx` the index. See [`ids::ChildIds`] for why these ids are unique.
//!
//! - this module: the entry points ([`flatten`], [`flatten_compact`], [`plain`]), the
//!   flattened values ([`Cell`]) and the field metadata the flattener marks columns with;
//! - [`walk`]: the walk over the staged messages, value by value, into rows and cells;
//! - [`builder`]: the rows being built for one table, and the trie of its key paths;
//! - [`ids`]: child row ids and JSON pointer tokens;
//! - [`lineage`]: what a run stamps on every row, and its shared columns;
//! - [`columns`]: a table's Arrow batch from its rows, each data column typed;
//! - [`hinted`]: columns typed by a hint;
//! - [`fill`]: Arrow arrays filled from cells.

pub use crate::naming::TableName;

mod builder;
mod columns;
mod fill;
mod hinted;
mod ids;
mod lineage;
mod variant;
mod walk;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Schema, TimeUnit};

use crate::config::FlattenConfig;
use crate::error::{Error, Result};
use crate::json::NumClass;

pub(crate) use columns::{data_field, rescued_column};
#[cfg(test)]
pub(crate) use hinted::variant_fields;
use fill::prefetch_read;
pub use lineage::Lineage;
use lineage::LineageColumns;
use walk::flatten_with;

/// Field metadata key holding a column's original path (a JSON pointer).
pub const PATH_META: &str = "bronze.path";

/// Field metadata key marking a column whose values are JSON text.
pub const JSON_META: &str = "bronze.json";

/// Field metadata key of a flattened column typed by a hint: the hint's full pointer in
/// the payload. Read and dropped when the batch is fitted to its table.
pub const HINT_META: &str = "bronze.hint";

/// Field metadata key of a flattened string column whose type may be detected: the
/// types to try (`timestamp,date`). Read and dropped when the batch is fitted.
pub const DETECT_META: &str = "bronze.detect";

/// Schema metadata key of a flattened batch: how many values its hints rescued. Read
/// and dropped when the batch is fitted.
pub const RESCUED_META: &str = "bronze.rescued";

/// Field metadata key of a flattened column that is not written: the payload's JSON text
/// of each value the hinted column it names converted, kept for a topic whose new fields
/// are rescued ([`crate::config::Evolution::Rescue`]) so that `_rescued_data` gets the
/// values as they were written. Read and dropped when the batch is fitted.
pub const SOURCE_META: &str = "bronze.source";

/// The tables one topic produces, each as one Arrow batch.
#[derive(Debug, Default)]
pub struct TablePlan {
    /// Target table → rows for it from this topic.
    pub tables: BTreeMap<TableName, RecordBatch>,
}

/// A flattened leaf value, borrowing the staged text.
#[derive(Clone, Copy, Debug)]
enum Cell<'a> {
    Bool(bool),
    /// A number literal and its class.
    Num(&'a str, NumClass),
    /// A string literal with its quotes, and whether it has escapes.
    Str(&'a str, bool),
    /// JSON source text of a sub-tree.
    Json(&'a str),
    /// A value kept as a Variant: its JSON source text, and its encoding's place in its
    /// column's [`Column::variants`].
    Variant(&'a str, u32),
}

impl<'a> Cell<'a> {
    /// The value as JSON text.
    fn json(self) -> Cow<'a, str> {
        match self {
            Cell::Bool(true) => "true".into(),
            Cell::Bool(false) => "false".into(),
            Cell::Num(s, _) | Cell::Str(s, _) | Cell::Json(s) | Cell::Variant(s, _) => s.into(),
        }
    }

    /// Asks the CPU to start loading the value's text (see [`fill::PREFETCH_AHEAD`]).
    #[inline(always)]
    fn prefetch(self) {
        if let Cell::Num(s, _) | Cell::Str(s, _) | Cell::Json(s) | Cell::Variant(s, _) = self {
            prefetch_read(s.as_ptr());
        }
    }

    /// The value as text: strings decoded, anything else as its JSON text.
    fn text(self) -> Cow<'a, str> {
        match self {
            Cell::Str(s, escaped) => crate::json::decode_string(s, escaped),
            other => other.json(),
        }
    }
}

#[derive(Debug, Default)]
struct Column<'a> {
    /// `(row, value)` in row order; nulls are absent.
    cells: Vec<(u32, Cell<'a>)>,
    /// The encodings of its [`Cell::Variant`] values.
    variants: variant::Encodings,
}

/// Flattens one topic's staged rows (its batches in order, as one input).
#[cfg(any(test, feature = "testing"))]
pub fn flatten<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
) -> Result<TablePlan> {
    flatten_with(topic, staged, lineage, cfg, LineageColumns::Plain)
}

/// [`flatten`], with the lineage columns whose values repeat (`_batch_id`,
/// `_landing_path`, `_topic`, `_source_file`) as Arrow dictionaries: a row of a child
/// table then holds 4-byte keys instead of ~100 bytes of copied text. The loader keeps
/// the flattened rows of tables that several topics feed this way until their one
/// commit, and turns them back into the table's string columns ([`plain`]) one table at
/// a time as it writes them (BENCHMARKS.md).
pub fn flatten_compact<'a>(
    topic: &'a str,
    staged: &'a [RecordBatch],
    lineage: &Lineage,
    cfg: &FlattenConfig,
) -> Result<TablePlan> {
    flatten_with(topic, staged, lineage, cfg, LineageColumns::Dictionary)
}

/// `batch` with its dictionary columns ([`flatten_compact`]) cast to their value type:
/// the columns, types and field metadata of [`flatten`]'s batches.
pub fn plain(batch: RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(..)))
    {
        return Ok(batch);
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.data_type() {
            DataType::Dictionary(_, value) => {
                let cast = arrow::compute::cast(column, value)
                    .map_err(|e| Error::arrow(field.name(), e))?;
                fields.push(field.as_ref().clone().with_data_type(value.as_ref().clone()));
                columns.push(cast);
            }
            _ => {
                fields.push(field.as_ref().clone());
                columns.push(column.clone());
            }
        }
    }
    let schema = Schema::new_with_metadata(fields, schema.metadata().clone());
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| Error::arrow("_flattened", e))
}

/// The Arrow type of a `_loaded_at` column.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// A data column built from its cells: its Arrow type, whether its strings are JSON text,
/// and its values.
struct TypedColumn {
    data_type: DataType,
    json: bool,
    values: ArrayRef,
}

impl TypedColumn {
    /// A column of `values`, of type `data_type` (strings as they are).
    fn new(data_type: DataType, values: ArrayRef) -> Self {
        TypedColumn {
            data_type,
            json: false,
            values,
        }
    }

    /// A string column of JSON text.
    fn json_text(values: ArrayRef) -> Self {
        TypedColumn {
            data_type: DataType::Utf8,
            json: true,
            values,
        }
    }
}

/// Largest integer magnitude an `f64` holds exactly (2^53).
pub(crate) const F64_EXACT_INT: i64 = 1 << 53;

#[cfg(test)]
mod roundtrip;
#[cfg(test)]
mod tests;
