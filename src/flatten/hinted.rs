//! Columns typed by a hint ([`crate::column_types`]): each value converted to the hinted
//! type, or, when it does not convert exactly, null in the column and kept in
//! `_rescued_data` under the column's path with its JSON text.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanBuilder, PrimitiveBuilder, StringBuilder, StructArray,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field, Fields, Decimal128Type, Float64Type, Int64Type,
    TimestampMicrosecondType,
};

use super::fill::fill_strings;
use super::{Cell, Column, F64_EXACT_INT, SOURCE_META, TypedColumn, timestamp_type};
use crate::column_types::{ColumnType, parse_date, parse_decimal, parse_timestamp};
use crate::json::NumClass;

/// The column of cells `col` hinted `ty`; the values that do not convert
/// are appended to `rescued` as `(row, path, JSON text)`.
pub(super) fn column(
    col: Column<'_>,
    n: usize,
    ty: ColumnType,
    path: &str,
    rescued: &mut Vec<(u32, String, String)>,
) -> TypedColumn {
    let cells = &col.cells;
    let mut keep = |row: u32, cell: Cell<'_>| {
        rescued.push((row, path.to_string(), cell.json().into_owned()));
    };
    match ty {
        ColumnType::String => {
            let b = fill_strings(n, cells, |c| c.text());
            TypedColumn::new(DataType::Utf8, Arc::new(b))
        }
        ColumnType::Json => {
            let b = fill_strings(n, cells, |c| c.json());
            TypedColumn::json_text(Arc::new(b))
        }
        ColumnType::Variant => variants(col, n, path, rescued),
        ColumnType::Boolean => TypedColumn::new(DataType::Boolean, booleans(n, cells, &mut keep)),
        ColumnType::Int64 => {
            let mut b = primitive::<Int64Type>(n, cells, &mut keep, int);
            TypedColumn::new(DataType::Int64, Arc::new(b.finish()))
        }
        ColumnType::Float64 => {
            let mut b = primitive::<Float64Type>(n, cells, &mut keep, float);
            TypedColumn::new(DataType::Float64, Arc::new(b.finish()))
        }
        ColumnType::Decimal(p, s) => {
            let conv = |c: Cell<'_>| match c {
                Cell::Num(lit, _) => parse_decimal(lit, p, s),
                Cell::Str(..) => parse_decimal(&c.text(), p, s),
                _ => None,
            };
            let mut b = primitive::<Decimal128Type>(n, cells, &mut keep, conv)
                .with_precision_and_scale(p, s)
                .expect("a hinted precision and scale are valid");
            TypedColumn::new(DataType::Decimal128(p, s), Arc::new(b.finish()))
        }
        ColumnType::Date => {
            let conv = |c: Cell<'_>| match c {
                Cell::Str(..) => parse_date(&c.text()),
                _ => None,
            };
            let mut b = primitive::<Date32Type>(n, cells, &mut keep, conv);
            TypedColumn::new(DataType::Date32, Arc::new(b.finish()))
        }
        ColumnType::Timestamp => {
            let conv = |c: Cell<'_>| match c {
                Cell::Str(..) => parse_timestamp(&c.text()),
                _ => None,
            };
            let mut b = primitive::<TimestampMicrosecondType>(n, cells, &mut keep, conv)
                .with_timezone("UTC");
            TypedColumn::new(timestamp_type(), Arc::new(b.finish()))
        }
    }
}

/// The companion of a hinted column `name` ([`super::SOURCE_META`]): for each row whose
/// value converted (non-null in `typed`), the value's JSON text as the payload had it.
pub(super) fn source_column(
    name: &str,
    cells: &[(u32, Cell<'_>)],
    n: usize,
    typed: &ArrayRef,
) -> (Field, ArrayRef) {
    let mut b = StringBuilder::new();
    let mut next = 0u32;
    for &(row, c) in cells {
        b.append_nulls((row - next) as usize);
        if typed.is_valid(row as usize) {
            b.append_value(c.json());
        } else {
            b.append_null();
        }
        next = row + 1;
    }
    b.append_nulls(n - next as usize);
    let meta = HashMap::from([(SOURCE_META.to_string(), name.to_string())]);
    let field = Field::new(format!("{SOURCE_META}:{name}"), DataType::Utf8, true).with_metadata(meta);
    (field, Arc::new(b.finish()))
}

/// A boolean column of `n` rows from `cells`; a cell that is not a boolean is null and
/// goes to `keep`.
fn booleans<'a>(n: usize, cells: &[(u32, Cell<'a>)], keep: &mut impl FnMut(u32, Cell<'a>)) -> ArrayRef {
    let mut b = BooleanBuilder::with_capacity(n);
    let mut next = 0u32;
    for &(row, c) in cells {
        b.append_nulls((row - next) as usize);
        match c {
            Cell::Bool(v) => b.append_value(v),
            _ => {
                keep(row, c);
                b.append_null();
            }
        }
        next = row + 1;
    }
    b.append_nulls(n - next as usize);
    Arc::new(b.finish())
}

/// A builder of `n` rows holding `conv` of each cell; a cell `conv` refuses is null and
/// goes to `keep`.
fn primitive<'a, T: ArrowPrimitiveType>(
    n: usize,
    cells: &[(u32, Cell<'a>)],
    keep: &mut impl FnMut(u32, Cell<'a>),
    conv: impl Fn(Cell<'a>) -> Option<T::Native>,
) -> PrimitiveBuilder<T> {
    let mut b = PrimitiveBuilder::<T>::with_capacity(n);
    let mut next = 0u32;
    for &(row, c) in cells {
        b.append_nulls((row - next) as usize);
        match conv(c) {
            Some(v) => b.append_value(v),
            None => {
                keep(row, c);
                b.append_null();
            }
        }
        next = row + 1;
    }
    b.append_nulls(n - next as usize);
    b
}

/// A JSON integer within int64.
fn int(c: Cell<'_>) -> Option<i64> {
    match c {
        Cell::Num(s, NumClass::Int) => s.parse().ok(),
        _ => None,
    }
}

/// A JSON number a float64 holds: a float, or an integer up to 2^53.
fn float(c: Cell<'_>) -> Option<f64> {
    match c {
        Cell::Num(s, NumClass::Float) => s.parse().ok().filter(|f: &f64| f.is_finite()),
        Cell::Num(s, NumClass::Int) => s
            .parse::<i64>()
            .ok()
            .filter(|i| i.unsigned_abs() <= F64_EXACT_INT.unsigned_abs())
            .map(|i| i as f64),
        _ => None,
    }
}

/// The Delta `variant` column of `col`'s values: a struct of the encodings' `metadata` and
/// `value` bytes, null where the row has no value. A value the walk did not encode (a
/// path hinted `variant` after its first rows) is encoded from its JSON text.
fn variants(
    col: Column<'_>,
    n: usize,
    path: &str,
    rescued: &mut Vec<(u32, String, String)>,
) -> TypedColumn {
    let Column { cells, variants } = col;
    let mut out = VariantColumn::with_capacity(n);
    for (row, cell) in cells {
        out.nulls_until(row);
        match cell {
            Cell::Variant(_, i) => {
                let (metadata, value) = variants.get(i as usize);
                out.push(metadata, value);
            }
            other => {
                let text = other.json();
                match crate::json::Doc::parse(&text, super::variant::MAX_DEPTH) {
                    Ok(doc) => {
                        let mut encoded = super::variant::encode(&doc, doc.root(), path);
                        rescued.extend(encoded.rescued.drain(..).map(|(k, j)| (row, k, j)));
                        out.push(&encoded.metadata, &encoded.value);
                    }
                    // Text of a parsed value always parses; kept aside all the same.
                    Err(_) => rescued.push((row, path.to_string(), text.into_owned())),
                }
            }
        }
    }
    out.nulls_until(n as u32);
    out.finish()
}

/// A variant column being built, row by row.
struct VariantColumn {
    metadata: BinaryBuilder,
    value: BinaryBuilder,
    valid: Vec<bool>,
}

impl VariantColumn {
    fn with_capacity(n: usize) -> Self {
        VariantColumn {
            metadata: BinaryBuilder::with_capacity(n, 0),
            value: BinaryBuilder::with_capacity(n, 0),
            valid: Vec::with_capacity(n),
        }
    }

    /// Null rows up to `row` (excluded).
    fn nulls_until(&mut self, row: u32) {
        let gap = (row as usize).saturating_sub(self.valid.len());
        for _ in 0..gap {
            self.metadata.append_value([]);
            self.value.append_value([]);
        }
        self.valid.extend(std::iter::repeat_n(false, gap));
    }

    fn push(&mut self, metadata: &[u8], value: &[u8]) {
        self.metadata.append_value(metadata);
        self.value.append_value(value);
        self.valid.push(true);
    }

    fn finish(mut self) -> TypedColumn {
        let fields = variant_fields();
        let array = StructArray::new(
            fields.clone(),
            vec![Arc::new(self.metadata.finish()), Arc::new(self.value.finish())],
            Some(NullBuffer::from(self.valid)),
        );
        TypedColumn::new(DataType::Struct(fields), Arc::new(array))
    }
}

/// A Delta `variant` column's fields in Arrow, as the Delta kernel reads them: `metadata`
/// and `value`, both binary and never null.
pub(crate) fn variant_fields() -> Fields {
    Fields::from(vec![
        Field::new("metadata", DataType::Binary, false),
        Field::new("value", DataType::Binary, false),
    ])
}
