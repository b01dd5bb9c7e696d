//! A column's values converted to the type of the table's column: each value that fits
//! exactly is converted, each other one comes back as `(row, path, JSON text)` to be
//! rescued.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Field, Float64Type, Int64Type, TimeUnit,
    TimestampMicrosecondType,
};

use super::Text;
use crate::column_types::{
    date_text, decimal_text, local_timestamp_text, parse_date, parse_decimal,
    parse_local_timestamp, parse_timestamp, timestamp_text,
};
use crate::flatten::F64_EXACT_INT;
use crate::json::{Doc, Kind, NumClass};

/// One value in a form any column type can be tried against.
enum Val<'a> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
    /// JSON text (from a JSON-text column).
    Json(&'a str),
    /// A string rendered from a typed value (a timestamp's or a date's text).
    Text(String),
    /// A number literal rendered from a typed value (a decimal's).
    Lit(String),
}

fn value_at(array: &ArrayRef, text: Text, row: usize) -> Option<Val<'_>> {
    if array.is_null(row) {
        return None;
    }
    match array.data_type() {
        DataType::Boolean => Some(Val::Bool(array.as_boolean().value(row))),
        DataType::Int64 => Some(Val::Int(array.as_primitive::<Int64Type>().value(row))),
        DataType::Float64 => Some(Val::Float(array.as_primitive::<Float64Type>().value(row))),
        DataType::Utf8 if text == Text::Json => {
            Some(Val::Json(array.as_string::<i32>().value(row)))
        }
        DataType::Utf8 => Some(Val::Str(array.as_string::<i32>().value(row))),
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let micros = array.as_primitive::<TimestampMicrosecondType>().value(row);
            match tz {
                Some(_) => timestamp_text(micros).map(Val::Text),
                None => local_timestamp_text(micros).map(Val::Text),
            }
        }
        DataType::Date32 => date_text(array.as_primitive::<Date32Type>().value(row)).map(Val::Text),
        DataType::Decimal128(_, s) => Some(Val::Lit(decimal_text(
            array.as_primitive::<Decimal128Type>().value(row),
            *s,
        ))),
        _ => None,
    }
}

/// The value at `row` as JSON text (`None` for null).
pub(super) fn json_of(array: &ArrayRef, text: Text, row: usize) -> Option<String> {
    value_at(array, text, row).map(|v| match v {
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        Val::Float(f) => float_json(f),
        Val::Str(s) => serde_json::to_string(s).unwrap_or_default(),
        Val::Text(s) => serde_json::to_string(&s).unwrap_or_default(),
        Val::Json(s) => s.to_string(),
        Val::Lit(s) => s,
    })
}

fn float_json(f: f64) -> String {
    // Flattened floats are finite; `Display` prints the shortest text that reads back.
    if f.is_finite() {
        let s = f.to_string();
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        "null".into()
    }
}

/// A JSON text read as a typed value when it is a scalar.
fn parse_json_scalar(s: &str) -> Option<Val<'_>> {
    let doc = Doc::parse(s, 1).ok()?;
    match doc.kind(0) {
        Kind::Bool(b) => Some(Val::Bool(b)),
        Kind::Num(NumClass::Int) => s.trim().parse().ok().map(Val::Int),
        Kind::Num(NumClass::Float) => s.trim().parse().ok().map(Val::Float),
        _ => None,
    }
}

/// Each row's value in a typed column: `fit` says what a value becomes there (`None`: it
/// does not fit, and `rescue` keeps it). JSON text is read as a typed scalar first.
fn fitted<T>(
    array: &ArrayRef,
    from: Text,
    rescue: &mut impl FnMut(usize),
    fit: impl Fn(Val<'_>) -> Option<T>,
) -> Vec<Option<T>> {
    (0..array.len())
        .map(|row| {
            let v = match value_at(array, from, row)? {
                Val::Json(s) => parse_json_scalar(s).unwrap_or(Val::Json(s)),
                v => v,
            };
            let out = fit(v);
            if out.is_none() {
                rescue(row);
            }
            out
        })
        .collect()
}

/// Converts `array` (typed as `from`) to the type of `to`; values that do not fit come
/// back as `(row, path, JSON text)`.
pub(super) fn convert(
    array: &ArrayRef,
    from: &Field,
    to: &Field,
    path: &str,
) -> (ArrayRef, Vec<(u32, String, String)>) {
    let (from_text, to_text) = (Text::of(from), Text::of(to));
    if from.data_type() == to.data_type() && from_text == to_text {
        return (Arc::clone(array), Vec::new());
    }
    let n = array.len();
    let mut rescued = Vec::new();
    let mut rescue = |row: usize| {
        if let Some(j) = json_of(array, from_text, row) {
            rescued.push((row as u32, path.to_string(), j));
        }
    };
    let out: ArrayRef = match to.data_type() {
        DataType::Utf8 if to_text == Text::Json => Arc::new(json_text_column(array, from_text)),
        DataType::Utf8 => Arc::new(string_column(array, from_text, &mut rescue)),
        DataType::Int64 => Arc::new(Int64Array::from(fitted(
            array,
            from_text,
            &mut rescue,
            int_fit,
        ))),
        DataType::Float64 => Arc::new(Float64Array::from(fitted(
            array,
            from_text,
            &mut rescue,
            float_fit,
        ))),
        to_type @ (DataType::Int32 | DataType::Int16 | DataType::Int8 | DataType::Float32) => {
            narrow_column(array, from_text, to_type, &mut rescue)
        }
        DataType::Boolean => Arc::new(BooleanArray::from(fitted(
            array,
            from_text,
            &mut rescue,
            bool_fit,
        ))),
        to_type @ (DataType::Timestamp(TimeUnit::Microsecond, _)
        | DataType::Date32
        | DataType::Decimal128(..)) => typed_column(array, from_text, to_type, &mut rescue),
        other => {
            // A type bronze does not write (a table created by another tool): every
            // value is rescued rather than guessed at.
            for row in 0..n {
                rescue(row);
            }
            arrow::array::new_null_array(other, n)
        }
    };
    (out, rescued)
}

/// `array`'s values in a column of a type narrower than bronze's own, of a table another
/// engine created (Spark's `int`, `smallint`, `tinyint`, `float`): the integers in its
/// range; for a float, a value whose shortest decimal form it gives back (`0.1`,
/// `19.99`, not `0.123456789`). The others go to `rescue`.
fn narrow_column(
    array: &ArrayRef,
    from: Text,
    to: &DataType,
    rescue: &mut impl FnMut(usize),
) -> ArrayRef {
    match to {
        DataType::Int32 => Arc::new(Int32Array::from(fitted(array, from, rescue, |v| {
            int_fit(v).and_then(|i| i32::try_from(i).ok())
        }))),
        DataType::Int16 => Arc::new(Int16Array::from(fitted(array, from, rescue, |v| {
            int_fit(v).and_then(|i| i16::try_from(i).ok())
        }))),
        DataType::Int8 => Arc::new(Int8Array::from(fitted(array, from, rescue, |v| {
            int_fit(v).and_then(|i| i8::try_from(i).ok())
        }))),
        _ => Arc::new(Float32Array::from(fitted(array, from, rescue, |v| {
            let f = float_fit(v)?;
            let narrow = f as f32;
            (narrow.to_string().parse::<f64>().ok() == Some(f)).then_some(narrow)
        }))),
    }
}

/// `array`'s values in a timestamp (UTC or, in a table another engine created, without a
/// zone), date or decimal column of type `to`; the
/// values that do not fit go to `rescue`.
fn typed_column(
    array: &ArrayRef,
    from: Text,
    to: &DataType,
    rescue: &mut impl FnMut(usize),
) -> ArrayRef {
    match to {
        DataType::Timestamp(_, Some(tz)) => Arc::new(
            TimestampMicrosecondArray::from(fitted(array, from, rescue, |v| {
                text_fit(v, parse_timestamp)
            }))
            .with_timezone(tz.clone()),
        ),
        DataType::Timestamp(_, None) => Arc::new(TimestampMicrosecondArray::from(fitted(
            array,
            from,
            rescue,
            |v| text_fit(v, parse_local_timestamp),
        ))),
        &DataType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from(fitted(array, from, rescue, |v| decimal_fit(v, p, s)))
                .with_precision_and_scale(p, s)
                .expect("the table's precision and scale are valid"),
        ),
        _ => Arc::new(Date32Array::from(fitted(array, from, rescue, |v| {
            text_fit(v, parse_date)
        }))),
    }
}

/// Every value of `array` as JSON text, nulls kept.
fn json_text_column(array: &ArrayRef, from: Text) -> StringArray {
    let mut b = StringBuilder::new();
    for row in 0..array.len() {
        b.append_option(json_of(array, from, row));
    }
    b.finish()
}

/// Each row's value in a string column: strings as they are, JSON strings decoded; any
/// other value does not fit, and `rescue` keeps it.
fn string_column(array: &ArrayRef, from: Text, rescue: &mut impl FnMut(usize)) -> StringArray {
    let mut b = StringBuilder::new();
    for row in 0..array.len() {
        match value_at(array, from, row) {
            None => b.append_null(),
            Some(Val::Str(s)) => b.append_value(s),
            Some(Val::Text(s)) => b.append_value(s),
            Some(Val::Json(s)) if s.trim_start().starts_with('"') => {
                match serde_json::from_str::<String>(s) {
                    Ok(v) => b.append_value(v),
                    Err(_) => {
                        rescue(row);
                        b.append_null()
                    }
                }
            }
            Some(_) => {
                rescue(row);
                b.append_null()
            }
        }
    }
    b.finish()
}

/// What a value becomes in an int64 column: integers only.
#[inline]
fn int_fit(v: Val<'_>) -> Option<i64> {
    match v {
        Val::Int(i) => Some(i),
        _ => None,
    }
}

/// What a value becomes in a float64 column: floats, and integers a float64 holds exactly.
#[inline]
fn float_fit(v: Val<'_>) -> Option<f64> {
    match v {
        Val::Float(f) => Some(f),
        Val::Int(i) if i.unsigned_abs() <= F64_EXACT_INT.unsigned_abs() => Some(i as f64),
        _ => None,
    }
}

/// What a string becomes in a column of a type `parse` reads from text (a timestamp, a
/// date): strings only.
fn text_fit<T>(v: Val<'_>, parse: fn(&str) -> Option<T>) -> Option<T> {
    match v {
        Val::Str(s) => parse(s),
        Val::Text(s) => parse(&s),
        Val::Json(s) => parse(&serde_json::from_str::<String>(s).ok()?),
        _ => None,
    }
}

/// What a value becomes in a `decimal(p,s)` column: a number, or a string holding one,
/// with every digit kept.
fn decimal_fit(v: Val<'_>, p: u8, s: i8) -> Option<i128> {
    match v {
        Val::Int(i) => parse_decimal(&i.to_string(), p, s),
        Val::Float(f) => parse_decimal(&float_json(f), p, s),
        Val::Str(t) => parse_decimal(t, p, s),
        Val::Lit(t) | Val::Text(t) => parse_decimal(&t, p, s),
        Val::Json(t) => parse_decimal(&serde_json::from_str::<String>(t).ok()?, p, s),
        Val::Bool(_) => None,
    }
}

/// What a value becomes in a boolean column: booleans only.
#[inline]
fn bool_fit(v: Val<'_>) -> Option<bool> {
    match v {
        Val::Bool(b) => Some(b),
        _ => None,
    }
}
