//! Fitting flattened rows to the table they go to — one policy, three steps:
//!
//! - [`to_table`]: a topic's rows against the table's schema (the existing schema wins;
//!   what does not fit is rescued, see below);
//! - [`widen`]: the fitted rows of several topics for one commit, concatenated over the
//!   union of their columns (a column typed differently widens);
//! - [`cast_to_table`]: a batch cast to the table's types where that keeps every value,
//!   else refused (`_corrupt_records`, written outside the flattener).
//!
//! [`to_table`] in detail:
//!
//! Runs under the table's lock, against the schema the commit will see. Per data column
//! (matched to the table's column by its original path, field metadata `bronze.path`):
//! - same type: kept;
//! - another type: every value that fits the table's type exactly is converted (int64 →
//!   float64 up to 2^53, int64 → a narrower integer column of another engine's table
//!   within its range, anything → a JSON-text column, a JSON string → a string
//!   column, a JSON number or boolean → its typed column); a value that does not fit is
//!   set to null in the column and kept in `_rescued_data` under its path;
//! - a path the table has no column for: [`Evolution::Add`] adds it (renamed `_2`, `_3`,
//!   ... when the name belongs to another path), [`Evolution::Rescue`] moves its values
//!   to `_rescued_data` (a hinted column's as the payload wrote them, which the
//!   flattener keeps aside for this), [`Evolution::Fail`] refuses the write naming the
//!   fields.
//!
//! Nothing becomes null silently: every value is either in its column or rescued.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Date32Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::column_types::{parse_date, parse_timestamp, type_text};
use crate::config::Evolution;
use crate::error::{Error, Result};
use crate::flatten::{
    DETECT_META, HINT_META, JSON_META, PATH_META, RESCUED_META, SOURCE_META, data_field,
    rescued_column, timestamp_type,
};
use crate::json::{Doc, Kind};
use crate::naming::{RESCUED, SYSTEM_COLUMNS, TableName};

mod cast;
mod convert;
mod widen;

pub(crate) use cast::cast_to_table;
use convert::{convert, json_of};
pub(crate) use widen::widen;

/// A batch fitted to a table.
#[derive(Debug)]
pub(crate) struct Conformed {
    pub(crate) batch: RecordBatch,
    /// Columns this batch adds to the table.
    pub(crate) added: Vec<String>,
    /// Values moved to `_rescued_data` here.
    pub(crate) rescued: u64,
}

fn path_of(f: &Field) -> &str {
    f.metadata()
        .get(PATH_META)
        .map_or(f.name().as_str(), String::as_str)
}

fn is_json(f: &Field) -> bool {
    f.metadata().get(JSON_META).is_some_and(|v| v == "true")
}

/// What the strings of a field's string column are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Text {
    /// JSON text (the field carries the JSON marker).
    Json,
    /// Plain strings.
    Plain,
}

impl Text {
    /// The text of `f`'s strings.
    fn of(f: &Field) -> Text {
        if is_json(f) { Text::Json } else { Text::Plain }
    }
}

/// Fits `batch` to `target` (`None`: a new table, taken as is but for the types
/// detected). The flattener's marks (hinted and detectable columns, the count of values
/// its hints rescued) are read and dropped here: they are never written.
pub(crate) fn to_table(
    table: &TableName,
    batch: RecordBatch,
    target: Option<&Schema>,
    evolution: Evolution,
) -> Result<Conformed> {
    let hint_rescued = batch
        .schema()
        .metadata()
        .get(RESCUED_META)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    let Some(target) = target else {
        return Ok(Conformed {
            batch: new_table(table, batch)?,
            added: Vec::new(),
            rescued: hint_rescued,
        });
    };
    let n = batch.num_rows();
    let Fitting {
        mut fields,
        mut columns,
        mut rescued,
        base_rescued,
        mut added,
        refused,
        moved,
    } = fit_columns(table, &batch, target, evolution)?;
    if !refused.is_empty() {
        return Err(Error::SchemaEvolution {
            table: table.to_string(),
            fields: refused,
        });
    }
    if !rescued.is_empty() || base_rescued.is_some() {
        if let Some(base) = &base_rescued {
            rescued.extend(unpack_rescued(base));
        }
        fields.push(Field::new(RESCUED, DataType::Utf8, true));
        columns.push(rescued_column(n, rescued));
        if target.field_with_name(RESCUED).is_err() {
            added.push(RESCUED.to_string());
        }
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::arrow(table.as_str(), e))?;
    Ok(Conformed {
        batch,
        added,
        rescued: moved + hint_rescued,
    })
}

/// The rows of a new table: every column as flattened, but for a detectable one whose
/// values are all of a detected type ([`detect`]), without the flattener's marks.
fn new_table(table: &TableName, batch: RecordBatch) -> Result<RecordBatch> {
    let schema = batch.schema();
    let marked = |f: &Field| {
        let meta = f.metadata();
        meta.contains_key(HINT_META)
            || meta.contains_key(DETECT_META)
            || meta.contains_key(SOURCE_META)
    };
    if schema.metadata().is_empty() && !schema.fields().iter().any(|f| marked(f)) {
        return Ok(batch);
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        if field.metadata().contains_key(SOURCE_META) {
            continue;
        }
        let (dt, array) = typed_as_detected(field, array);
        let mut meta = field.metadata().clone();
        meta.remove(HINT_META);
        meta.remove(DETECT_META);
        fields.push(
            field
                .as_ref()
                .clone()
                .with_data_type(dt)
                .with_metadata(meta),
        );
        columns.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| Error::arrow(table.as_str(), e))
}

/// A new column's type and values: those [`detect`] finds for a detectable column, else
/// its own.
fn typed_as_detected(field: &Field, array: &ArrayRef) -> (DataType, ArrayRef) {
    field
        .metadata()
        .get(DETECT_META)
        .and_then(|kinds| detect(array, kinds))
        .unwrap_or_else(|| (field.data_type().clone(), Arc::clone(array)))
}

/// A string column whose every value (at least one) is of one of `kinds`
/// (`timestamp,date`, tried in that order), converted; `None` when no kind fits all.
fn detect(array: &ArrayRef, kinds: &str) -> Option<(DataType, ArrayRef)> {
    let strings = array.as_string_opt::<i32>()?;
    if strings.null_count() == strings.len() {
        return None;
    }
    fn all<T>(strings: &StringArray, parse: fn(&str) -> Option<T>) -> Option<Vec<Option<T>>> {
        strings
            .iter()
            .map(|s| s.map_or(Some(None), |s| parse(s).map(Some)))
            .collect()
    }
    kinds.split(',').find_map(|kind| match kind {
        "timestamp" => all(strings, parse_timestamp).map(|v| {
            let a = TimestampMicrosecondArray::from(v).with_timezone("UTC");
            (timestamp_type(), Arc::new(a) as ArrayRef)
        }),
        "date" => all(strings, parse_date)
            .map(|v| (DataType::Date32, Arc::new(Date32Array::from(v)) as ArrayRef)),
        _ => None,
    })
}

/// Refuses a hinted column (`field`, flattened with its hint's type) that the table has
/// (`existing`) with another type.
fn check_hint(table: &TableName, field: &Field, existing: &Field) -> Result<()> {
    let Some(hint) = field.metadata().get(HINT_META) else {
        return Ok(());
    };
    let have = type_text(existing.data_type(), is_json(existing));
    let want = type_text(field.data_type(), is_json(field));
    if have == want {
        return Ok(());
    }
    Err(Error::TypeHint {
        table: table.to_string(),
        conflict: Box::new(crate::error::TypeConflict {
            column: existing.name().clone(),
            path: path_of(field).to_string(),
            hint: hint.clone(),
            existing: have,
            hinted: want,
        }),
    })
}

/// A batch's columns fitted to a table, before its `_rescued_data` column is rebuilt.
#[derive(Default)]
struct Fitting {
    fields: Vec<Field>,
    columns: Vec<ArrayRef>,
    /// Values that do not fit, as `(row, path, JSON text)`.
    rescued: Vec<(u32, String, String)>,
    /// The batch's own `_rescued_data` column.
    base_rescued: Option<ArrayRef>,
    /// Columns the batch adds to the table.
    added: Vec<String>,
    /// `name (path)` of each column [`Evolution::Fail`] refuses.
    refused: Vec<String>,
    /// Values moved to `rescued`.
    moved: u64,
}

impl Fitting {
    /// Takes system column `field`: `_rescued_data` aside (rebuilt with what is rescued
    /// here), any other by name.
    fn system(
        &mut self,
        table: &TableName,
        field: &Field,
        array: &ArrayRef,
        target: &Schema,
    ) -> Result<()> {
        if field.name() == RESCUED {
            self.base_rescued = Some(Arc::clone(array));
        } else {
            let (f, a) = system_column(table, field, array, target)?;
            self.fields.push(f);
            self.columns.push(a);
        }
        Ok(())
    }

    /// Takes data column `field` into the table's column `t` for its `path`: converted
    /// to `t`'s type, what does not fit rescued.
    fn existing(
        &mut self,
        table: &TableName,
        field: &Field,
        array: &ArrayRef,
        t: &Field,
        path: &str,
    ) -> Result<()> {
        check_hint(table, field, t)?;
        let (a, r) = convert(array, field, t, path);
        self.moved += r.len() as u64;
        self.rescued.extend(r);
        self.fields.push(t.clone().with_nullable(true));
        self.columns.push(a);
        Ok(())
    }
}

/// Fits each column of `batch` to `target`: system columns by name, data columns by
/// path, a path the table lacks as `evolution` says.
fn fit_columns(
    table: &TableName,
    batch: &RecordBatch,
    target: &Schema,
    evolution: Evolution,
) -> Result<Fitting> {
    let n = batch.num_rows();
    let schema = batch.schema();
    let mut taken: HashSet<String> = target.fields().iter().map(|f| f.name().clone()).collect();
    taken.extend(schema.fields().iter().map(|f| f.name().clone()));
    let by_path = columns_by_path(target);
    let sources = sources_of(batch);
    let mut out = Fitting::default();
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        let name = field.name().as_str();
        if field.metadata().contains_key(SOURCE_META) {
            continue;
        }
        if name == RESCUED || SYSTEM_COLUMNS.contains(&name) {
            out.system(table, field, array, target)?;
            continue;
        }
        let path = path_of(field);
        // The table's column for this path: by path, else by name when that column has no
        // path of its own (written before paths were recorded) or the same one.
        let existing = by_path
            .get(path)
            .copied()
            .or_else(|| column_by_name(target, name, path));
        match existing {
            Some(t) => out.existing(table, field, array, t, path)?,
            None => match evolution {
                Evolution::Add => {
                    let new_name = free_name(name, target, &mut taken);
                    out.added.push(new_name.clone());
                    let json = is_json(field);
                    let (data_type, array) = typed_as_detected(field, array);
                    out.fields
                        .push(data_field(&new_name, data_type, path, json));
                    out.columns.push(array);
                }
                Evolution::Rescue => {
                    // A hinted column's values as the payload wrote them, when kept.
                    let (array, text) = match sources.get(name) {
                        Some(source) => (*source, Text::Json),
                        None => (array, Text::of(field)),
                    };
                    out.moved += rescue_all(array, text, path, &mut out.rescued);
                }
                Evolution::Fail if array.null_count() < n => {
                    out.refused.push(format!("{name} ({path})"));
                }
                Evolution::Fail => {}
            },
        }
    }
    Ok(out)
}

/// The payload's JSON text of the values `batch`'s hinted columns converted, by the
/// hinted column's name (kept by the flattener for [`Evolution::Rescue`]).
fn sources_of(batch: &RecordBatch) -> HashMap<&str, &ArrayRef> {
    batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter_map(|(f, a)| Some((f.metadata().get(SOURCE_META)?.as_str(), a)))
        .collect()
}

/// The table's columns that record their path (`bronze.path`), by path.
fn columns_by_path(target: &Schema) -> HashMap<&str, &Field> {
    target
        .fields()
        .iter()
        .filter(|f| f.metadata().contains_key(PATH_META))
        .map(|f| (path_of(f), f.as_ref()))
        .collect()
}

/// The table's column named `name`, when it has no path of its own (written before
/// paths were recorded) or the same `path`; else the one column without a path whose
/// name differs only in case (another engine's: Delta column names ignore case, and
/// bronze's are lower case).
fn column_by_name<'t>(target: &'t Schema, name: &str, path: &str) -> Option<&'t Field> {
    if let Ok(t) = target.field_with_name(name) {
        return (!t.metadata().contains_key(PATH_META) || path_of(t) == path).then_some(t);
    }
    let mut alike = target
        .fields()
        .iter()
        .filter(|t| t.name().eq_ignore_ascii_case(name) && !t.metadata().contains_key(PATH_META));
    match (alike.next(), alike.next()) {
        (Some(t), None) => Some(t.as_ref()),
        _ => None,
    }
}

/// `name`, or when the table has a column of that name for another path, the first of
/// `name_2`, `name_3`, … that is free (taken from then on).
fn free_name(name: &str, target: &Schema, taken: &mut HashSet<String>) -> String {
    // Delta column names ignore case.
    let held = |n: &str| {
        target
            .fields()
            .iter()
            .any(|f| f.name().eq_ignore_ascii_case(n))
    };
    if !held(name) {
        return name.to_string();
    }
    // The suffix stays within the longest name: the name is cut to make room.
    let suffixed = |k: usize| {
        let suffix = format!("_{k}");
        let mut end = crate::naming::MAX_NAME_LEN
            .saturating_sub(suffix.len())
            .min(name.len());
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}{suffix}", &name[..end])
    };
    let mut k = 2;
    while taken.contains(&suffixed(k)) || held(&suffixed(k)) {
        k += 1;
    }
    let free = suffixed(k);
    taken.insert(free.clone());
    free
}

/// Every non-null value of a column moved to `rescued` under its path; how many.
fn rescue_all(
    array: &ArrayRef,
    text: Text,
    path: &str,
    rescued: &mut Vec<(u32, String, String)>,
) -> u64 {
    let mut moved = 0;
    for row in 0..array.len() {
        if let Some(json) = json_of(array, text, row) {
            rescued.push((row as u32, path.to_string(), json));
            moved += 1;
        }
    }
    moved
}

/// The schema a table has after `batch` (fitted by [`to_table`]) is merged into it.
pub(crate) fn merged_schema(target: Option<&Schema>, batch: &RecordBatch) -> SchemaRef {
    let Some(target) = target else {
        return batch.schema();
    };
    let mut fields: Vec<Field> = target.fields().iter().map(|f| f.as_ref().clone()).collect();
    for f in batch.schema().fields() {
        if target.field_with_name(f.name()).is_err() {
            fields.push(f.as_ref().clone());
        }
    }
    Arc::new(Schema::new(fields))
}

/// System columns keep their name; a type the table has differently is cast when that is
/// lossless (tables written by older versions or other tools).
fn system_column(
    table: &TableName,
    field: &Field,
    array: &ArrayRef,
    target: &Schema,
) -> Result<(Field, ArrayRef)> {
    match target.field_with_name(field.name()) {
        Ok(t) if t.data_type() != field.data_type() => {
            let a = arrow::compute::cast(array, t.data_type())
                .map_err(|e| Error::arrow(table.as_str(), e))?;
            Ok((Field::new(field.name(), t.data_type().clone(), true), a))
        }
        _ => Ok((field.clone(), Arc::clone(array))),
    }
}

/// Entries of an existing `_rescued_data` column, `dup:` arrays unpacked; each value's
/// JSON text as it is (a number beyond float64, `1e999`, keeps its literal).
fn unpack_rescued(base: &ArrayRef) -> Vec<(u32, String, String)> {
    let mut out = Vec::new();
    let Some(strings) = base.as_string_opt::<i32>() else {
        return out;
    };
    for row in 0..strings.len() {
        if strings.is_null(row) {
            continue;
        }
        let Ok(doc) = Doc::parse(strings.value(row), usize::MAX) else {
            continue;
        };
        if doc.kind(0) != Kind::Object {
            continue;
        }
        for (k, v) in doc.members(0) {
            let key = doc.str(k).into_owned();
            if key.starts_with("dup:") && doc.kind(v) == Kind::Array {
                for item in doc.elements(v) {
                    out.push((row as u32, key.clone(), doc.raw(item).to_string()));
                }
            } else {
                out.push((row as u32, key, doc.raw(v).to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, Int64Array};
    use arrow::datatypes::{Float64Type, Int64Type};

    use super::*;
    use arrow::array::StringArray;

    fn data(name: &str, dt: DataType, path: &str, json: bool) -> Field {
        data_field(name, dt, path, json)
    }

    fn batch(fields: Vec<Field>, cols: Vec<ArrayRef>) -> RecordBatch {
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    }

    fn strings(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
        let c = b.column_by_name(name).unwrap().as_string::<i32>();
        (0..c.len())
            .map(|i| c.is_valid(i).then(|| c.value(i).to_string()))
            .collect()
    }

    fn t() -> TableName {
        TableName::for_topic("t")
    }

    #[test]
    fn values_that_do_not_fit_are_rescued_not_nulled() {
        let target = Schema::new(vec![data("px", DataType::Int64, "/px", false)]);
        let b = batch(
            vec![data("px", DataType::Utf8, "/px", true)],
            vec![Arc::new(StringArray::from(vec![
                Some("12"),
                Some("\"abc\""),
                None,
                Some("1.5"),
            ]))],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        let px = c
            .batch
            .column_by_name("px")
            .unwrap()
            .as_primitive::<Int64Type>();
        assert_eq!(px.value(0), 12);
        assert!(px.is_null(1) && px.is_null(2) && px.is_null(3));
        assert_eq!(c.rescued, 2);
        assert_eq!(
            strings(&c.batch, RESCUED),
            [
                None,
                Some(r#"{"/px":"abc"}"#.into()),
                None,
                Some(r#"{"/px":1.5}"#.into())
            ]
        );
        assert_eq!(c.added, [RESCUED]);
    }

    #[test]
    fn ints_widen_into_floats_only_when_exact() {
        let target = Schema::new(vec![data("q", DataType::Float64, "/q", false)]);
        let b = batch(
            vec![data("q", DataType::Int64, "/q", false)],
            vec![Arc::new(Int64Array::from(vec![3, i64::MAX, i64::MIN]))],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        let q = c
            .batch
            .column_by_name("q")
            .unwrap()
            .as_primitive::<Float64Type>();
        assert_eq!(q.value(0), 3.0);
        assert!(q.is_null(1) && q.is_null(2));
        assert_eq!(
            strings(&c.batch, RESCUED)[1..],
            [
                Some(r#"{"/q":9223372036854775807}"#.into()),
                Some(r#"{"/q":-9223372036854775808}"#.into())
            ]
        );
    }

    #[test]
    fn ints_narrow_into_another_engines_int_columns_within_range() {
        use arrow::datatypes::{Float32Type, Int8Type, Int32Type};
        // Spark's `int`, `tinyint` and `float` columns carry no `bronze.path`.
        let target = Schema::new(vec![
            Field::new("year", DataType::Int32, true),
            Field::new("small", DataType::Int8, true),
            Field::new("f", DataType::Float32, true),
        ]);
        let b = batch(
            vec![
                data("year", DataType::Int64, "/year", false),
                data("small", DataType::Int64, "/small", false),
                data("f", DataType::Float64, "/f", false),
            ],
            vec![
                Arc::new(Int64Array::from(vec![2025, 1 << 40])),
                Arc::new(Int64Array::from(vec![-128, 128])),
                Arc::new(Float64Array::from(vec![0.1, 0.123456789])),
            ],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        let year = c
            .batch
            .column_by_name("year")
            .unwrap()
            .as_primitive::<Int32Type>();
        assert_eq!((year.value(0), year.is_null(1)), (2025, true));
        let small = c
            .batch
            .column_by_name("small")
            .unwrap()
            .as_primitive::<Int8Type>();
        assert_eq!((small.value(0), small.is_null(1)), (-128, true));
        let f = c
            .batch
            .column_by_name("f")
            .unwrap()
            .as_primitive::<Float32Type>();
        assert_eq!((f.value(0), f.is_null(1)), (0.1, true));
        assert_eq!(
            strings(&c.batch, RESCUED),
            [
                None,
                Some(r#"{"/f":0.123456789,"/small":128,"/year":1099511627776}"#.into())
            ]
        );
    }

    #[test]
    fn anything_fits_a_json_column() {
        let target = Schema::new(vec![data("v", DataType::Utf8, "/v", true)]);
        let b = batch(
            vec![data("v", DataType::Float64, "/v", false)],
            vec![Arc::new(Float64Array::from(vec![2.0, 0.25]))],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        assert_eq!(
            strings(&c.batch, "v"),
            [Some("2.0".to_string()), Some("0.25".to_string())]
        );
        assert!(c.batch.column_by_name(RESCUED).is_none());
    }

    #[test]
    fn new_fields_follow_the_evolution_mode() {
        let target = Schema::new(vec![data("a", DataType::Int64, "/a", false)]);
        let make = || {
            batch(
                vec![
                    data("a", DataType::Int64, "/a", false),
                    data("b", DataType::Utf8, "/b", false),
                ],
                vec![
                    Arc::new(Int64Array::from(vec![1])),
                    Arc::new(StringArray::from(vec!["x"])),
                ],
            )
        };
        let add = to_table(&t(), make(), Some(&target), Evolution::Add).unwrap();
        assert_eq!(add.added, ["b"]);
        assert_eq!(strings(&add.batch, "b"), [Some("x".into())]);
        let rescue = to_table(&t(), make(), Some(&target), Evolution::Rescue).unwrap();
        assert!(rescue.batch.column_by_name("b").is_none());
        assert_eq!(
            strings(&rescue.batch, RESCUED),
            [Some(r#"{"/b":"x"}"#.into())]
        );
        let err = to_table(&t(), make(), Some(&target), Evolution::Fail).unwrap_err();
        assert!(err.to_string().contains("b (/b)"), "{err}");
    }

    #[test]
    fn a_name_taken_by_another_path_gets_a_suffix() {
        // The table's `name` came from `Name`; this batch's `name` is from `name`.
        let target = Schema::new(vec![data("name", DataType::Utf8, "/Name", false)]);
        let b = batch(
            vec![data("name", DataType::Utf8, "/name", false)],
            vec![Arc::new(StringArray::from(vec!["lower"]))],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        assert_eq!(c.added, ["name_2"]);
        assert_eq!(strings(&c.batch, "name_2"), [Some("lower".into())]);
        assert!(c.batch.column_by_name("name").is_none());
    }

    #[test]
    fn another_engines_column_takes_its_field_whatever_the_case() {
        // Spark's `StringType` (no path); bronze names the payload's field `stringtype`.
        let target = Schema::new(vec![
            Field::new("StringType", DataType::Utf8, true),
            data("other", DataType::Utf8, "/other", false),
        ]);
        let b = batch(
            vec![
                data("stringtype", DataType::Utf8, "/StringType", false),
                data("OTHER", DataType::Utf8, "/OTHER", false),
            ],
            vec![
                Arc::new(StringArray::from(vec!["zoé"])),
                Arc::new(StringArray::from(vec!["x"])),
            ],
        );
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        assert_eq!(strings(&c.batch, "StringType"), [Some("zoé".into())]);
        // A column of bronze's own for another path is not taken; the new column's name
        // must differ in more than case.
        assert_eq!(c.added, ["OTHER_2"]);
    }

    #[test]
    fn rescued_values_keep_their_literal_when_fitted_again() {
        let text = r#"{"/amt":1e999,"dup:/a":[1,2.50]}"#;
        let rescued: ArrayRef = Arc::new(StringArray::from(vec![Some(text)]));
        let b = batch(
            vec![Field::new(RESCUED, DataType::Utf8, true)],
            vec![rescued],
        );
        let target = Schema::new(vec![Field::new(RESCUED, DataType::Utf8, true)]);
        let c = to_table(&t(), b, Some(&target), Evolution::Add).unwrap();
        assert_eq!(strings(&c.batch, RESCUED), [Some(text.to_string())]);
    }
}
