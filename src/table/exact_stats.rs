//! Decimal bounds in `add.stats` written exactly. delta-rs's statistics writer turns a
//! decimal's min and max into an `f64`, which rounds any value of 16 or more
//! significant digits: a min rounded up or a max rounded down makes Spark's data
//! skipping (which reads the bounds as exact decimals) prune a file holding a matching
//! row. Here the bounds of every decimal column (in structs too) are replaced by the
//! exact bounds of the rows written, as JSON numbers in decimal notation.

use arrow::array::{Array, AsArray, RecordBatch, StructArray};
use arrow::datatypes::{DataType, Decimal128Type};
use deltalake::DeltaTableError;

/// Sets, in `adds`' statistics, the null count of each clustering column (`paths`,
/// physical) that the files' `schema` lacks to the file's row count: the column reads as
/// null in every row, and a clustering column has statistics in every file a clustered
/// table adds (the writer's own stats leave out a column the file does not hold).
pub(super) fn absent_columns_null(
    adds: &mut [deltalake::kernel::Add],
    schema: &arrow::datatypes::Schema,
    paths: &[Vec<String>],
) -> Result<(), DeltaTableError> {
    let absent: Vec<&Vec<String>> = paths.iter().filter(|p| !holds(schema, p)).collect();
    if absent.is_empty() {
        return Ok(());
    }
    for add in adds.iter_mut() {
        let Some(text) = add.stats.as_deref() else {
            continue;
        };
        let mut value: serde_json::Value = serde_json::from_str(text)?;
        let Some(rows) = value["numRecords"].as_i64() else {
            continue;
        };
        for path in &absent {
            let Some((leaf, parents)) = path.split_last() else {
                continue;
            };
            let mut at = &mut value["nullCount"];
            for p in parents {
                if !at.is_object() && !at.is_null() {
                    break;
                }
                at = &mut at[p.as_str()];
            }
            if at.is_null() {
                *at = serde_json::json!({});
            }
            if let Some(object) = at.as_object_mut() {
                object.insert(leaf.clone(), serde_json::json!(rows));
            }
        }
        add.stats = Some(serde_json::to_string(&value)?);
    }
    Ok(())
}

/// Whether `schema` has the (nested) column `path`.
fn holds(schema: &arrow::datatypes::Schema, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Ok(mut field) = schema.field_with_name(first) else {
        return false;
    };
    for name in rest {
        let DataType::Struct(fields) = field.data_type() else {
            return false;
        };
        let Some(f) = fields.iter().find(|f| f.name() == name) else {
            return false;
        };
        field = f;
    }
    true
}

/// The exact least and greatest values of a decimal column, unscaled, with its scale.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bounds {
    min: i128,
    max: i128,
    scale: i8,
}

/// Sets the `minValues` and `maxValues` of every decimal column in `adds`' statistics
/// to the bounds of that column over `batches` (the rows the files hold, in the files'
/// names): exact, and never inside a file's own bounds, so a file split off the same
/// rows keeps safe bounds too. A decimal type other than 128-bit (the widest Delta has)
/// loses its bounds instead: missing bounds are always safe.
pub(super) fn exact_decimal_bounds(
    adds: &mut [deltalake::kernel::Add],
    batches: &[RecordBatch],
) -> Result<(), DeltaTableError> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let mut columns = Vec::new();
    for (i, f) in first.schema().fields().iter().enumerate() {
        let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
        collect(&mut columns, vec![f.name().clone()], f.data_type(), &parts);
    }
    if columns.is_empty() {
        return Ok(());
    }
    for add in adds.iter_mut() {
        let Some(text) = add.stats.as_deref() else {
            continue;
        };
        add.stats = Some(rewritten(text, &columns)?);
    }
    Ok(())
}

/// The decimal columns under `path` (of type `data_type`, its values `parts`), with
/// their bounds (`None`: bounds to drop), into `out`.
fn collect(
    out: &mut Vec<(Vec<String>, Option<Bounds>)>,
    path: Vec<String>,
    data_type: &DataType,
    parts: &[&dyn Array],
) {
    match data_type {
        DataType::Struct(fields) => {
            for (i, f) in fields.iter().enumerate() {
                let children: Vec<&dyn Array> = parts
                    .iter()
                    .map(|p| p.as_any().downcast_ref::<StructArray>())
                    .map(|s| s.expect("a struct column").column(i).as_ref())
                    .collect();
                let mut child = path.clone();
                child.push(f.name().clone());
                collect(out, child, f.data_type(), &children);
            }
        }
        DataType::Decimal128(_, scale) => {
            let mut bounds: Option<Bounds> = None;
            for p in parts {
                for v in p.as_primitive::<Decimal128Type>().iter().flatten() {
                    let b = bounds.get_or_insert(Bounds {
                        min: v,
                        max: v,
                        scale: *scale,
                    });
                    b.min = b.min.min(v);
                    b.max = b.max.max(v);
                }
            }
            out.push((path, bounds));
        }
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal256(..) => {
            out.push((path, None));
        }
        _ => {}
    }
}

/// `stats` (an `add.stats` JSON text) with the bounds of `columns` set or dropped.
fn rewritten(
    stats: &str,
    columns: &[(Vec<String>, Option<Bounds>)],
) -> Result<String, DeltaTableError> {
    let mut value: serde_json::Value = serde_json::from_str(stats)?;
    // serde_json writes numbers through f64 or integers only: each exact bound goes in as
    // a unique string and its quotes are taken off after.
    let token = format!("bronze-exact-{}-", uuid::Uuid::new_v4().simple());
    let mut numbers = Vec::new();
    for (path, bounds) in columns {
        let Some(leaf) = path.last() else {
            continue;
        };
        for (key, bound) in [
            ("minValues", bounds.map(|b| (b.min, b.scale))),
            ("maxValues", bounds.map(|b| (b.max, b.scale))),
        ] {
            let Some(object) = parent(&mut value, key, path) else {
                continue;
            };
            if object.get(leaf).is_none_or(serde_json::Value::is_null) {
                continue;
            }
            match bound {
                Some((v, scale)) => {
                    let placeholder = format!("{token}{}", numbers.len());
                    numbers.push((placeholder.clone(), decimal_text(v, scale)));
                    object.insert(leaf.clone(), serde_json::Value::String(placeholder));
                }
                None => {
                    object.remove(leaf);
                }
            }
        }
    }
    let mut text = serde_json::to_string(&value)?;
    for (placeholder, number) in numbers {
        text = text.replacen(&format!("\"{placeholder}\""), &number, 1);
    }
    Ok(text)
}

/// The object of `stats[key]` that holds `path`'s leaf, when the statistics have it.
fn parent<'a>(
    stats: &'a mut serde_json::Value,
    key: &str,
    path: &[String],
) -> Option<&'a mut serde_json::Map<String, serde_json::Value>> {
    let (_, parents) = path.split_last()?;
    let mut object = stats.get_mut(key)?.as_object_mut()?;
    for p in parents {
        object = object.get_mut(p)?.as_object_mut()?;
    }
    Some(object)
}

/// The decimal `unscaled` × 10^-`scale` in plain decimal notation, a JSON number.
fn decimal_text(unscaled: i128, scale: i8) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    if scale <= 0 {
        let zeros = "0".repeat(scale.unsigned_abs() as usize);
        return if unscaled == 0 {
            "0".to_string()
        } else {
            format!("{sign}{digits}{zeros}")
        };
    }
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Int64Array};
    use arrow::datatypes::{Field, Fields, Schema};
    use std::sync::Arc;

    #[test]
    fn clustering_columns_a_file_lacks_count_every_row_null() {
        let nested = Fields::from(vec![Field::new("k", DataType::Utf8, true)]);
        let schema = Schema::new(vec![
            Field::new("x", DataType::Int64, true),
            Field::new("t", DataType::Struct(nested), true),
        ]);
        let mut adds = vec![deltalake::kernel::Add {
            stats: Some(
                r#"{"numRecords":3,"minValues":{"x":1},"maxValues":{"x":2},"nullCount":{"x":0}}"#
                    .into(),
            ),
            ..Default::default()
        }];
        let paths = [
            vec!["x".to_string()],
            vec!["t".to_string(), "k".to_string()],
            vec!["s".to_string(), "k".to_string()],
            vec!["region".to_string()],
        ];
        absent_columns_null(&mut adds, &schema, &paths).unwrap();
        let stats: serde_json::Value =
            serde_json::from_str(adds[0].stats.as_deref().unwrap()).unwrap();
        assert_eq!(
            stats["nullCount"],
            serde_json::json!({"x": 0, "s": {"k": 3}, "region": 3})
        );
        assert_eq!(stats["minValues"], serde_json::json!({"x": 1}));
    }

    #[test]
    fn decimals_are_written_in_plain_notation() {
        assert_eq!(
            decimal_text(123_456_789_012_345_678, 18),
            "0.123456789012345678"
        );
        assert_eq!(decimal_text(-5, 3), "-0.005");
        assert_eq!(decimal_text(1_000, 2), "10.00");
        assert_eq!(decimal_text(0, 2), "0.00");
        assert_eq!(decimal_text(42, 0), "42");
        assert_eq!(
            decimal_text(i128::MAX, 38),
            "1.70141183460469231731687303715884105727"
        );
    }

    #[test]
    fn decimal_bounds_replace_the_rounded_ones_and_others_stay() {
        let amount = DataType::Decimal128(38, 18);
        let nested = Fields::from(vec![Field::new("p", amount.clone(), true)]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("amt", amount.clone(), true),
            Field::new("s", DataType::Struct(nested.clone()), true),
            Field::new("gone", amount.clone(), true),
        ]));
        let dec = |v: Vec<Option<i128>>| {
            Arc::new(
                Decimal128Array::from(v)
                    .with_precision_and_scale(38, 18)
                    .unwrap(),
            )
        };
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                dec(vec![Some(123_456_789_012_345_678), Some(-1)]),
                Arc::new(StructArray::new(
                    nested,
                    vec![dec(vec![Some(7), None])],
                    None,
                )),
                dec(vec![None, None]),
            ],
        )
        .unwrap();
        // What delta-rs writes: the bounds through f64.
        let stats = r#"{"numRecords":2,"minValues":{"n":1,"amt":-1e-18,"s":{"p":7e-18},"gone":null},"maxValues":{"n":2,"amt":0.12345678901234568,"s":{"p":7e-18}},"nullCount":{"n":0,"amt":0,"s":{"p":1},"gone":2}}"#;
        let mut adds = vec![deltalake::kernel::Add {
            stats: Some(stats.to_string()),
            ..Default::default()
        }];
        exact_decimal_bounds(&mut adds, &[batch]).unwrap();
        let text = adds[0].stats.clone().unwrap();
        assert!(text.contains(r#""amt":0.123456789012345678"#), "{text}");
        assert!(text.contains(r#""amt":-0.000000000000000001"#), "{text}");
        assert!(text.contains(r#""s":{"p":0.000000000000000007}"#), "{text}");
        let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["minValues"]["n"], 1);
        assert_eq!(parsed["maxValues"]["n"], 2);
        assert_eq!(parsed["nullCount"]["gone"], 2);
        assert!(parsed["minValues"]["gone"].is_null());
    }
}
