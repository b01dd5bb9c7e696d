//! Flatten: one topic's staged messages → a topic table plus child tables.
//!
//! Takes a topic's staging [`RecordBatch`] (schema [`crate::stage::staging_schema`]) and
//! gives back a [`TablePlan`]: one Arrow batch per target table. Pure: no I/O.
//!
//! Rules (see `DESIGN.md`):
//! - nested objects become columns joined with `__` (`quote__bid`);
//! - an array whose non-null elements are all objects becomes rows of a child table named
//!   by its path inside the payload (`currentprice`, `quotes__legs`), shared by every
//!   topic with an array at that path; any other array becomes rows of a child table with
//!   one `value` column (objects and arrays inside it as JSON text); an empty array
//!   gives no rows;
//! - objects and arrays deeper than `max_depth` are kept as JSON text;
//! - a payload that is not an object is flattened as `{"value": payload}`;
//! - envelope metadata becomes `_meta__<field>` columns (its arrays as JSON text);
//! - column types are inferred per batch and column: all bool → boolean, all integers →
//!   int64, integers and floats → float64, anything else → string (numbers and booleans
//!   as their JSON text). A column holding only nulls is a string column.
//!
//! Keys: topic rows have `_id` = message id; child rows `_id` = stable hash of
//! (root id, table, parent id, index), `_parent_id`, `_root_id`, `_idx`.

pub use crate::naming::TableName;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanBuilder, Float64Builder, Int64Array, Int64Builder, RecordBatch,
    StringArray, StringBuilder, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use simd_json::prelude::*;
use simd_json::tape::Value;

use crate::error::{Error, Result};
use crate::naming::{self, ColumnNamer};

/// What a run stamps on every row.
#[derive(Clone, Debug)]
pub struct Lineage {
    /// `_batch_id`.
    pub batch_id: String,
    /// `_loaded_at`, microseconds since the Unix epoch, UTC.
    pub loaded_at_micros: i64,
}

/// The tables one topic produces, each as one Arrow batch.
#[derive(Debug, Default)]
pub struct TablePlan {
    /// Target table → rows for it from this topic.
    pub tables: BTreeMap<TableName, RecordBatch>,
}

/// A flattened leaf value.
#[derive(Clone, Debug, PartialEq)]
enum Cell {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Default)]
struct Column {
    /// `(row, value)` in row order; nulls are absent.
    cells: Vec<(usize, Cell)>,
}

impl Column {
    fn set(&mut self, row: usize, cell: Cell) {
        match self.cells.last_mut() {
            // A duplicate key in one object: the last value wins, as in most JSON readers.
            Some((r, c)) if *r == row => *c = cell,
            _ => self.cells.push((row, cell)),
        }
    }
}

/// Rows being built for one target table.
struct TableBuilder {
    is_child: bool,
    namer: ColumnNamer,
    columns: Vec<Column>,
    ids: Vec<String>,
    parent_ids: Vec<String>,
    root_ids: Vec<String>,
    idx: Vec<i64>,
    files: Vec<usize>,
    lines: Vec<i64>,
}

impl TableBuilder {
    fn new(is_child: bool) -> Self {
        TableBuilder {
            is_child,
            namer: ColumnNamer::new(),
            columns: Vec::new(),
            ids: Vec::new(),
            parent_ids: Vec::new(),
            root_ids: Vec::new(),
            idx: Vec::new(),
            files: Vec::new(),
            lines: Vec::new(),
        }
    }

    fn column(&mut self, key: &str, name: &str) -> usize {
        let i = self.namer.column(key, name);
        if i == self.columns.len() {
            self.columns.push(Column::default());
        }
        i
    }
}

/// Where the row being flattened came from.
#[derive(Clone, Copy)]
struct RowCtx<'a> {
    root_id: &'a str,
    file: usize,
    line: i64,
}

struct Flattener<'a> {
    max_depth: usize,
    tables: BTreeMap<TableName, TableBuilder>,
    /// The topic's own table.
    topic_table: TableName,
    files: Vec<&'a str>,
}

/// A path inside the payload: original keys (for collision detection) and sanitised
/// parts (for the column name).
#[derive(Default, Clone)]
struct Path {
    keys: Vec<String>,
}

impl Path {
    fn key(&self) -> String {
        // Unit separator: cannot clash with keys containing `.` or `__`.
        self.keys.join("\u{1f}")
    }
    fn name(&self) -> String {
        self.keys
            .iter()
            .map(|k| naming::sanitize(k))
            .collect::<Vec<_>>()
            .join(naming::PATH_SEP)
    }
}

/// Flattens one topic's staged rows.
pub fn flatten(
    topic: &str,
    staged: &RecordBatch,
    lineage: &Lineage,
    max_depth: usize,
) -> Result<TablePlan> {
    let col = |name: &str| -> Result<&StringArray> {
        staged
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| {
                Error::arrow(
                    "_staging",
                    arrow::error::ArrowError::SchemaError(format!(
                        "staging column `{name}` missing"
                    )),
                )
            })
    };
    let ids = col("_id")?;
    let files = col("_source_file")?;
    let metas = col("_meta")?;
    let payloads = col("_payload")?;
    let lines = staged
        .column_by_name("_line")
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        .ok_or_else(|| {
            Error::arrow(
                "_staging",
                arrow::error::ArrowError::SchemaError("staging column `_line` missing".into()),
            )
        })?;

    let topic_table = TableName::for_topic(topic);
    let mut f = Flattener {
        max_depth,
        tables: BTreeMap::new(),
        topic_table: topic_table.clone(),
        files: Vec::new(),
    };
    f.tables
        .insert(topic_table.clone(), TableBuilder::new(false));
    let mut scratch = Vec::new();
    let mut buffers = simd_json::Buffers::default();
    for r in 0..staged.num_rows() {
        let file = files.value(r);
        let file_idx = match f.files.last() {
            Some(last) if *last == file => f.files.len() - 1,
            _ => {
                f.files.push(file);
                f.files.len() - 1
            }
        };
        let ctx = RowCtx {
            root_id: ids.value(r),
            file: file_idx,
            line: lines.value(r),
        };
        let row = f.new_row(&topic_table, ctx, None, None);
        if metas.is_valid(r) {
            scratch.clear();
            scratch.extend_from_slice(metas.value(r).as_bytes());
            // Staging only holds text that parsed as JSON; a failure here is a bug.
            let tape = simd_json::to_tape_with_buffers(&mut scratch, &mut buffers)
                .map_err(|e| parse_bug(topic, &e))?;
            if let Some(obj) = tape.as_value().as_object() {
                for (k, v) in obj.iter() {
                    f.meta_value(&topic_table, row, k, v);
                }
            }
        }
        scratch.clear();
        scratch.extend_from_slice(payloads.value(r).as_bytes());
        let tape = simd_json::to_tape_with_buffers(&mut scratch, &mut buffers)
            .map_err(|e| parse_bug(topic, &e))?;
        let payload = tape.as_value();
        let mut path = Path::default();
        if payload.is_object() {
            f.object(&topic_table, row, &mut path, payload, 0, ctx);
        } else {
            path.keys.push("value".into());
            f.value(&topic_table, row, &mut path, payload, 0, ctx);
        }
    }
    f.finish(topic, lineage)
}

fn parse_bug(topic: &str, e: &simd_json::Error) -> Error {
    Error::arrow(
        TableName::for_topic(topic).to_string(),
        arrow::error::ArrowError::ParseError(format!("staged JSON did not parse again: {e}")),
    )
}

impl<'a> Flattener<'a> {
    fn new_row(
        &mut self,
        table: &TableName,
        ctx: RowCtx<'_>,
        parent: Option<&str>,
        idx: Option<usize>,
    ) -> usize {
        let t = self
            .tables
            .entry(table.clone())
            .or_insert_with(|| TableBuilder::new(true));
        let row = t.ids.len();
        match (parent, idx) {
            (Some(parent), Some(idx)) => {
                let id = naming::stable_id(&[
                    ctx.root_id.as_bytes(),
                    table.as_str().as_bytes(),
                    parent.as_bytes(),
                    &(idx as u64).to_le_bytes(),
                ]);
                t.ids.push(id);
                t.parent_ids.push(parent.to_string());
                t.root_ids.push(ctx.root_id.to_string());
                t.idx.push(idx as i64);
            }
            _ => t.ids.push(ctx.root_id.to_string()),
        }
        t.files.push(ctx.file);
        t.lines.push(ctx.line);
        row
    }

    fn row_id(&self, table: &TableName, row: usize) -> String {
        self.tables[table].ids[row].clone()
    }

    fn set(&mut self, table: &TableName, row: usize, key: &str, name: &str, cell: Option<Cell>) {
        // `table` was created by `new_row` before any value of its rows is set.
        let Some(t) = self.tables.get_mut(table) else {
            return;
        };
        let c = t.column(key, name);
        if let Some(cell) = cell {
            t.columns[c].set(row, cell);
        }
    }

    fn meta_value(&mut self, table: &TableName, row: usize, key: &str, v: Value<'_, '_>) {
        let mut path = Path {
            keys: vec![key.to_string()],
        };
        self.meta_rec(table, row, &mut path, v, 0);
    }

    fn meta_rec(
        &mut self,
        table: &TableName,
        row: usize,
        path: &mut Path,
        v: Value<'_, '_>,
        depth: usize,
    ) {
        match v.as_object() {
            Some(obj) if depth < self.max_depth && !obj.is_empty() => {
                for (k, child) in obj.iter() {
                    path.keys.push(k.to_string());
                    self.meta_rec(table, row, path, child, depth + 1);
                    path.keys.pop();
                }
            }
            _ => {
                let key = format!("\u{0}meta\u{1f}{}", path.key());
                let name = format!("_meta{}{}", naming::PATH_SEP, path.name());
                let cell = scalar_or_json(v);
                self.set(table, row, &key, &name, cell);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn object(
        &mut self,
        table: &TableName,
        row: usize,
        path: &mut Path,
        obj: Value<'_, '_>,
        depth: usize,
        ctx: RowCtx<'_>,
    ) {
        let Some(o) = obj.as_object() else { return };
        for (k, v) in o.iter() {
            path.keys.push(k.to_string());
            self.value(table, row, path, v, depth + 1, ctx);
            path.keys.pop();
        }
    }

    /// Flattens value `v` found at `path` (relative to the row's table) into `row`.
    #[allow(clippy::too_many_arguments)]
    fn value(
        &mut self,
        table: &TableName,
        row: usize,
        path: &mut Path,
        v: Value<'_, '_>,
        depth: usize,
        ctx: RowCtx<'_>,
    ) {
        let too_deep = depth > self.max_depth;
        match v.value_type() {
            ValueType::Object if !too_deep => {
                if v.as_object().is_some_and(|o| o.is_empty()) {
                    // `{}`: keep it visible as JSON text rather than dropping the key.
                    self.set(
                        table,
                        row,
                        &path.key(),
                        &path.name(),
                        Some(Cell::Str("{}".into())),
                    );
                } else {
                    self.object(table, row, path, v, depth, ctx);
                }
            }
            ValueType::Array if !too_deep => self.array(table, row, path, v, depth, ctx),
            _ => {
                let cell = scalar_or_json(v);
                self.set(table, row, &path.key(), &path.name(), cell);
            }
        }
    }

    fn array(
        &mut self,
        table: &TableName,
        row: usize,
        path: &Path,
        v: Value<'_, '_>,
        depth: usize,
        ctx: RowCtx<'_>,
    ) {
        let Some(arr) = v.as_array() else { return };
        if arr.is_empty() {
            return;
        }
        // Child table path: the parent's path (for a child row) + this array's path.
        let mut child_path: Vec<String> = if table == &self.topic_table {
            Vec::new()
        } else {
            vec![table.as_str().to_string()]
        };
        child_path.extend(path.keys.iter().cloned());
        // A parent child table's name is already sanitised; sanitising is idempotent.
        let child = TableName::for_child(&child_path);
        let parent_id = self.row_id(table, row);
        let all_objects =
            arr.iter().all(|e| e.is_null() || e.is_object()) && arr.iter().any(|e| e.is_object());
        for (i, elem) in arr.iter().enumerate() {
            let child_row = self.new_row(&child, ctx, Some(&parent_id), Some(i));
            if all_objects {
                let mut p = Path::default();
                self.object(&child, child_row, &mut p, elem, depth, ctx);
            } else {
                let cell = match elem.value_type() {
                    ValueType::Object | ValueType::Array => Some(Cell::Str(elem.encode())),
                    _ => scalar_or_json(elem),
                };
                self.set(&child, child_row, "value", "value", cell);
            }
        }
    }

    fn finish(self, topic: &str, lineage: &Lineage) -> Result<TablePlan> {
        let mut plan = TablePlan::default();
        for (name, t) in self.tables {
            if t.ids.is_empty() {
                continue;
            }
            let batch = build_batch(&name, t, topic, lineage, &self.files)?;
            plan.tables.insert(name, batch);
        }
        Ok(plan)
    }
}

fn scalar_or_json(v: Value<'_, '_>) -> Option<Cell> {
    match v.value_type() {
        ValueType::Null => None,
        ValueType::Bool => v.as_bool().map(Cell::Bool),
        ValueType::I64 => v.as_i64().map(Cell::Int),
        // Beyond i64: keep the exact digits as text rather than rounding.
        ValueType::U64 => v
            .as_u64()
            .map(|u| i64::try_from(u).map_or_else(|_| Cell::Str(u.to_string()), Cell::Int)),
        ValueType::F64 => v.as_f64().map(Cell::Float),
        ValueType::String => v.as_str().map(|s| Cell::Str(s.to_string())),
        _ => Some(Cell::Str(v.encode())),
    }
}

/// The Arrow type of a `_loaded_at` column.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn build_batch(
    name: &TableName,
    t: TableBuilder,
    topic: &str,
    lineage: &Lineage,
    files: &[&str],
) -> Result<RecordBatch> {
    let n = t.ids.len();
    let mut fields = vec![Field::new("_id", DataType::Utf8, false)];
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(StringArray::from(t.ids))];
    if t.is_child {
        fields.push(Field::new("_parent_id", DataType::Utf8, true));
        arrays.push(Arc::new(StringArray::from(t.parent_ids)));
        fields.push(Field::new("_root_id", DataType::Utf8, true));
        arrays.push(Arc::new(StringArray::from(t.root_ids)));
        fields.push(Field::new("_idx", DataType::Int64, true));
        arrays.push(Arc::new(Int64Array::from(t.idx)));
    }
    fields.push(Field::new("_batch_id", DataType::Utf8, false));
    arrays.push(Arc::new(StringArray::from(vec![
        lineage.batch_id.as_str();
        n
    ])));
    fields.push(Field::new("_topic", DataType::Utf8, false));
    arrays.push(Arc::new(StringArray::from(vec![topic; n])));
    fields.push(Field::new("_source_file", DataType::Utf8, false));
    arrays.push(Arc::new(StringArray::from_iter_values(
        t.files.iter().map(|&i| files[i]),
    )));
    fields.push(Field::new("_line", DataType::Int64, false));
    arrays.push(Arc::new(Int64Array::from(t.lines)));
    fields.push(Field::new("_loaded_at", timestamp_type(), false));
    arrays.push(Arc::new(
        TimestampMicrosecondArray::from(vec![lineage.loaded_at_micros; n]).with_timezone("UTC"),
    ));
    for ((col_name, _original), column) in t.namer.into_names().into_iter().zip(t.columns) {
        let (dt, array) = build_column(column, n);
        fields.push(Field::new(col_name, dt, true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| Error::arrow(name.as_str(), e))
}

fn build_column(col: Column, n: usize) -> (DataType, ArrayRef) {
    let (mut bools, mut ints, mut floats, mut strs) = (0, 0, 0, 0);
    for (_, c) in &col.cells {
        match c {
            Cell::Bool(_) => bools += 1,
            Cell::Int(_) => ints += 1,
            Cell::Float(_) => floats += 1,
            Cell::Str(_) => strs += 1,
        }
    }
    let total = col.cells.len();
    if total > 0 && bools == total {
        let mut b = BooleanBuilder::with_capacity(n);
        fill(
            &mut b,
            n,
            col.cells,
            |b, c| {
                if let Cell::Bool(v) = c {
                    b.append_value(v)
                }
            },
            |b| b.append_null(),
        );
        (DataType::Boolean, Arc::new(b.finish()))
    } else if total > 0 && ints == total {
        let mut b = Int64Builder::with_capacity(n);
        fill(
            &mut b,
            n,
            col.cells,
            |b, c| {
                if let Cell::Int(v) = c {
                    b.append_value(v)
                }
            },
            |b| b.append_null(),
        );
        (DataType::Int64, Arc::new(b.finish()))
    } else if total > 0 && ints + floats == total && strs == 0 {
        let mut b = Float64Builder::with_capacity(n);
        fill(
            &mut b,
            n,
            col.cells,
            |b, c| match c {
                Cell::Int(v) => b.append_value(v as f64),
                Cell::Float(v) => b.append_value(v),
                _ => b.append_null(),
            },
            |b| b.append_null(),
        );
        (DataType::Float64, Arc::new(b.finish()))
    } else {
        let mut b = StringBuilder::new();
        fill(
            &mut b,
            n,
            col.cells,
            |b, c| match c {
                Cell::Bool(v) => b.append_value(if v { "true" } else { "false" }),
                Cell::Int(v) => b.append_value(v.to_string()),
                Cell::Float(v) => b.append_value(v.to_string()),
                Cell::Str(s) => b.append_value(s),
            },
            |b| b.append_null(),
        );
        (DataType::Utf8, Arc::new(b.finish()))
    }
}

fn fill<B>(
    b: &mut B,
    n: usize,
    cells: Vec<(usize, Cell)>,
    mut put: impl FnMut(&mut B, Cell),
    mut null: impl FnMut(&mut B),
) {
    let mut next = 0;
    for (row, cell) in cells {
        while next < row {
            null(b);
            next += 1;
        }
        put(b, cell);
        next += 1;
    }
    while next < n {
        null(b);
        next += 1;
    }
}

#[cfg(test)]
mod tests;
