//! A table's columns from its rows: the lineage and id columns, each data column typed
//! (by its hint, by [`TypesMode`], or marked for detection) and `_rescued_data`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Array, Int64Builder, RecordBatch, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};

use super::builder::TableBuilder;
use super::fill::{fill, fill_strings};
use super::hinted;
use super::ids::{ChildIds, utf8_column};
use super::lineage::LineageStrings;
use super::{
    Cell, Column, DETECT_META, F64_EXACT_INT, HINT_META, JSON_META, PATH_META, RESCUED_META,
    TypedColumn, timestamp_type,
};
use crate::column_types::{ColumnType, DetectType};
use crate::config::{FlattenConfig, TypesMode};
use crate::error::{Error, Result};
use crate::json::NumClass;
use crate::naming::{self, LANDING_PATH, RESCUED, TableName};

/// A data column's field: its name, type, original path and JSON marker.
pub(crate) fn data_field(name: &str, dt: DataType, path: &str, json: bool) -> Field {
    let mut meta = std::collections::HashMap::from([(PATH_META.to_string(), path.to_string())]);
    if json {
        meta.insert(JSON_META.to_string(), "true".to_string());
    }
    Field::new(name, dt, true).with_metadata(meta)
}

/// Builds the `_rescued_data` column: per row, a JSON object of the entries for it.
/// Entries of one key are collected in order; `dup:` keys always hold an array.
pub(crate) fn rescued_column(n: usize, mut entries: Vec<(u32, String, String)>) -> ArrayRef {
    entries.sort_by_key(|e| e.0);
    let mut b = StringBuilder::new();
    let mut it = entries.into_iter().peekable();
    for row in 0..n as u32 {
        let mut obj: BTreeMap<String, Vec<String>> = BTreeMap::new();
        while let Some(e) = it.next_if(|e| e.0 == row) {
            obj.entry(e.1).or_default().push(e.2);
        }
        if obj.is_empty() {
            b.append_null();
            continue;
        }
        let mut s = String::from("{");
        for (i, (k, vals)) in obj.into_iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&serde_json::to_string(&k).unwrap_or_default());
            s.push(':');
            if k.starts_with("dup:") || vals.len() > 1 {
                s.push('[');
                s.push_str(&vals.join(","));
                s.push(']');
            } else {
                s.push_str(&vals[0]);
            }
        }
        s.push('}');
        b.append_value(s);
    }
    Arc::new(b.finish())
}

/// The id columns of a table's rows (`root_ids` their message ids): `_id`, and for a
/// child table (`ids`, `idx`) `_parent_id`, `_root_id` and `_idx`.
fn id_columns(
    ids: ChildIds,
    root_ids: &[&str],
    idx: Vec<i64>,
    is_child: bool,
    strings: &LineageStrings<'_>,
) -> Result<(Vec<Field>, Vec<ArrayRef>)> {
    let mut fields = vec![Field::new(naming::ID, DataType::Utf8, false)];
    let mut arrays: Vec<ArrayRef> = Vec::new();
    if !is_child {
        let ids = root_ids.iter().map(|r| r.as_bytes());
        arrays.push(Arc::new(utf8_column(naming::ID, ids)?));
        return Ok((fields, arrays));
    }
    let parent_ids = (0..root_ids.len()).map(|r| ids.parent_id(r, root_ids[r]).as_bytes());
    let parents = strings.runs(naming::PARENT_ID, parent_ids)?;
    let roots = strings.runs(naming::ROOT_ID, root_ids.iter().map(|r| r.as_bytes()))?;
    arrays.push(Arc::new(ids.into_column()?));
    for (name, (dt, array)) in [(naming::PARENT_ID, parents), (naming::ROOT_ID, roots)] {
        fields.push(Field::new(name, dt, true));
        arrays.push(array);
    }
    fields.push(Field::new(naming::IDX, DataType::Int64, true));
    arrays.push(Arc::new(Int64Array::from(idx)));
    Ok((fields, arrays))
}

/// The Arrow batch of table `name`'s rows `t` from `topic`: the id and lineage columns,
/// the data columns typed, and `_rescued_data`.
pub(super) fn build_batch(
    name: &TableName,
    t: TableBuilder<'_>,
    topic: &str,
    strings: &LineageStrings<'_>,
    cfg: &FlattenConfig,
) -> Result<RecordBatch> {
    let n = t.root_ids.len();
    let lineage = strings.lineage;
    let (mut fields, mut arrays) = id_columns(t.ids, &t.root_ids, t.idx, t.is_child, strings)?;
    arrays.reserve(t.columns.len() + 12 - arrays.len());
    let mut push = |name: &str, nullable: bool, (dt, array): (DataType, ArrayRef)| {
        fields.push(Field::new(name, dt, nullable));
        arrays.push(array);
    };
    push(naming::BATCH_ID, false, strings.constant(lineage.key.batch_id.as_str(), n));
    push(LANDING_PATH, true, strings.landing(&t.files));
    push(naming::TOPIC, false, strings.constant(topic, n));
    push(naming::SOURCE_FILE, false, strings.files(&t.files));
    fields.push(Field::new(naming::LINE, DataType::Int64, false));
    arrays.push(Arc::new(Int64Array::from(t.lines)));
    fields.push(Field::new(naming::LOADED_AT, timestamp_type(), false));
    arrays.push(strings.loaded_at(n));
    let mut rescued = t.rescued;
    let before = rescued.len();
    let names = t.namer.into_names();
    let typing = TableTyping {
        cfg,
        topic,
        bases: &t.bases,
    };
    let (data_fields, data) = data_columns(names, t.columns, n, typing, &mut rescued);
    fields.extend(data_fields);
    arrays.extend(data);
    let mut meta = std::collections::HashMap::new();
    if rescued.len() > before {
        meta.insert(RESCUED_META.to_string(), (rescued.len() - before).to_string());
    }
    if !rescued.is_empty() {
        fields.push(Field::new(RESCUED, DataType::Utf8, true));
        arrays.push(rescued_column(n, rescued));
    }
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, meta)), arrays)
        .map_err(|e| Error::arrow(name.as_str(), e))
}

/// Where the types of a table's data columns come from: `cfg`'s hints and detection,
/// for a table whose rows are at `bases` in `topic`'s payloads.
#[derive(Clone, Copy)]
struct TableTyping<'a> {
    cfg: &'a FlattenConfig,
    topic: &'a str,
    bases: &'a [String],
}

/// The `n` rows' data columns of a table, named `names` (with their paths), from
/// `columns`: each typed as its hint says (the values it rescues appended to `rescued`)
/// or inferred.
fn data_columns(
    names: Vec<(String, String)>,
    columns: Vec<Column<'_>>,
    n: usize,
    typing: TableTyping<'_>,
    rescued: &mut Vec<(u32, String, String)>,
) -> (Vec<Field>, Vec<ArrayRef>) {
    let TableTyping { cfg, topic, bases } = typing;
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    let mut sources = Vec::new();
    let rescue_new = cfg.evolution_for(topic) == crate::config::Evolution::Rescue;
    for ((col_name, path), column) in names.into_iter().zip(columns) {
        let typing = Typing::of(cfg, topic, bases, &path);
        let typed = match typing {
            Typing::Hinted(ty, _) if rescue_new && ty != ColumnType::Json => {
                let cells = column.cells.clone();
                let typed = hinted::column(column, n, ty, &path, rescued);
                sources.push(hinted::source_column(&col_name, &cells, n, &typed.values));
                typed
            }
            Typing::Hinted(ty, _) => hinted::column(column, n, ty, &path, rescued),
            _ => build_column(column, n, cfg.types),
        };
        let mut field = data_field(&col_name, typed.data_type, &path, typed.json);
        typing.mark(&mut field);
        fields.push(field);
        arrays.push(typed.values);
    }
    for (field, array) in sources {
        fields.push(field);
        arrays.push(array);
    }
    (fields, arrays)
}

/// How a data column gets its type: as [`TypesMode`] says, from a hint, or detected
/// when it is all strings ([`crate::table::fit`]).
pub(super) enum Typing {
    Inferred,
    /// The type hinted and the column's full pointer in the payload.
    Hinted(ColumnType, String),
    /// The types detection tries.
    Detect(String),
}

impl Typing {
    /// The typing of the column at `path` of a table whose rows are at `bases` in
    /// `topic`'s payloads: the hint of the first base that has one for it.
    pub(super) fn of(cfg: &FlattenConfig, topic: &str, bases: &[String], path: &str) -> Typing {
        if !(path.is_empty() || path.starts_with('/')) {
            // Envelope metadata (`_meta/…`): never hinted.
            return Typing::Inferred;
        }
        for base in bases {
            let full = format!("{base}{path}");
            // A type built in code that no hint's text names (`validate` refuses it for a
            // run) is no hint.
            if let Some(ty) = cfg.column_type(topic, &full).filter(|t| t.is_valid()) {
                return Typing::Hinted(ty, full);
            }
        }
        if cfg.detect_types.is_empty() || cfg.types == TypesMode::Strings {
            return Typing::Inferred;
        }
        let kinds: Vec<&str> = cfg
            .detect_types
            .iter()
            .map(|d| match d {
                DetectType::Timestamp => "timestamp",
                DetectType::Date => "date",
            })
            .collect();
        Typing::Detect(kinds.join(","))
    }

    /// Marks `field` with its hint (its full pointer) or the types to detect, for
    /// [`crate::table::fit::to_table`], which reads and drops the marks.
    fn mark(self, field: &mut Field) {
        let (key, value) = match self {
            Typing::Inferred => return,
            Typing::Hinted(_, full) => (HINT_META, full),
            Typing::Detect(_) if *field.data_type() != DataType::Utf8 => return,
            Typing::Detect(_) if field.metadata().contains_key(JSON_META) => return,
            Typing::Detect(kinds) => (DETECT_META, kinds),
        };
        let mut meta = field.metadata().clone();
        meta.insert(key.to_string(), value);
        field.set_metadata(meta);
    }
}

/// One column of cells `col`, typed by the rules of [`TypesMode`].
fn build_column(col: Column<'_>, n: usize, types: TypesMode) -> TypedColumn {
    let counts = CellCounts::of(&col.cells);
    let total = col.cells.len();
    if types == TypesMode::Strings {
        let b = fill_strings(n, &col.cells, |c| c.text());
        return TypedColumn::new(DataType::Utf8, Arc::new(b));
    }
    if total > 0 && counts.bools == total {
        TypedColumn::new(DataType::Boolean, bool_column(n, &col.cells))
    } else if total > 0 && counts.ints == total {
        TypedColumn::new(DataType::Int64, int_column(n, &col.cells))
    } else if total > 0 && counts.ints + counts.floats == total && counts.wide_ints == 0 {
        TypedColumn::new(DataType::Float64, float_column(n, &col.cells))
    } else if counts.strs == total {
        // All strings, or no value at all: a string column.
        let b = fill_strings(n, &col.cells, |c| c.text());
        TypedColumn::new(DataType::Utf8, Arc::new(b))
    } else {
        // Any other mix, or numbers an int64/float64 would not hold: JSON text, so every
        // value (and its type) survives.
        let b = fill_strings(n, &col.cells, |c| c.json());
        TypedColumn::json_text(Arc::new(b))
    }
}

/// How many cells of a column hold each kind of value.
#[derive(Default)]
struct CellCounts {
    bools: usize,
    ints: usize,
    floats: usize,
    strs: usize,
    /// Integers a float64 does not hold exactly.
    wide_ints: usize,
}

impl CellCounts {
    /// The counts of `cells`.
    fn of(cells: &[(u32, Cell<'_>)]) -> Self {
        let mut counts = CellCounts::default();
        for (_, c) in cells {
            match c {
                Cell::Bool(_) => counts.bools += 1,
                Cell::Num(s, NumClass::Int) => {
                    counts.ints += 1;
                    // 15 digits stay below 2^53 (9.007e15).
                    let digits = s.len() - usize::from(s.starts_with('-'));
                    if digits > 15
                        && s.parse::<i64>().is_ok_and(|v| v.unsigned_abs() > F64_EXACT_INT.unsigned_abs())
                    {
                        counts.wide_ints += 1;
                    }
                }
                Cell::Num(_, NumClass::Float) => counts.floats += 1,
                Cell::Str(..) => counts.strs += 1,
                Cell::Num(_, NumClass::Big) | Cell::Json(_) | Cell::Variant(..) => {}
            }
        }
        counts
    }
}

/// A boolean column of `n` rows from `cells` (every one a boolean).
fn bool_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = BooleanBuilder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Bool(v) => b.append_value(v),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}

/// An int64 column of `n` rows from `cells` (every one an integer).
fn int_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = Int64Builder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Num(s, _) => b.append_option(s.parse::<i64>().ok()),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}

/// A float64 column of `n` rows from `cells` (every one a number a float64 holds).
fn float_column(n: usize, cells: &[(u32, Cell<'_>)]) -> ArrayRef {
    let mut b = Float64Builder::with_capacity(n);
    fill(
        &mut b,
        n,
        cells,
        |b, c| match c {
            Cell::Num(s, _) => b.append_option(s.parse::<f64>().ok()),
            _ => b.append_null(),
        },
        |b| b.append_null(),
    );
    Arc::new(b.finish())
}
