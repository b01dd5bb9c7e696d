//! Property test: every message is recoverable from its topic row, its child rows and
//! `_rescued_data`, through staging, flattening and fitting a second batch to the
//! schema the first one created (type conflicts across batches).
//!
//! Messages are random trees: objects with hostile keys (unicode, `/`, `~`, `.`, `__`,
//! case twins, system column names, empty), scalars of every kind, numbers beyond
//! int64/float64, and arrays of objects, scalars, mixed values and arrays. Array-valued
//! members use plain lower-case keys: a child table is named by its sanitised path, so
//! two arrays whose paths sanitise alike would share a table (by design, see the
//! README). Comparison is up to key order, number formatting (numbers compare as
//! `f64`, or by literal beyond it), and members that are null or empty objects.
//!
//! A second property covers hinted types (`timestamp`, `date`, `decimal`, `json`, a
//! child table's column): every value comes back, as its column holds it or from
//! `_rescued_data`, up to what a conversion normalises and nothing else: a timestamp
//! is its instant in UTC (its offset and the way it was written are not kept), a
//! string holding a decimal becomes that number.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use proptest::prelude::*;

use super::*;
use crate::column_types::{
    date_text, decimal_text, parse_decimal, parse_timestamp, timestamp_text,
};
use crate::config::Evolution;
use crate::json::{Doc, Kind, NumClass};

/// Cases run by the property test.
const CASES: u32 = 2000;

/// A generated JSON value, rendered to text by [`render`].
#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Int(i64),
    /// A number literal beyond int64/float64 or more precise than an f64.
    Big(String),
    /// A decimal literal (`12.5`).
    Dec(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn render(j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Int(i) => out.push_str(&i.to_string()),
        J::Big(s) | J::Dec(s) => out.push_str(s),
        J::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
        J::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(v, out);
            }
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            let mut seen = std::collections::HashSet::new();
            let mut first = true;
            for (k, v) in members {
                if !seen.insert(k.clone()) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push(':');
                render(v, out);
            }
            out.push('}');
        }
    }
}

fn hostile_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("A".to_string()),
        Just("a.b".to_string()),
        Just("a__b".to_string()),
        Just("x/y".to_string()),
        Just("t~1".to_string()),
        Just("_id".to_string()),
        Just("_batch_id".to_string()),
        Just("_rescued_data".to_string()),
        Just("value".to_string()),
        Just(String::new()),
        Just("naïve ✓".to_string()),
        Just("Name".to_string()),
        Just("name".to_string()),
        "[a-c]{1,2}",
        any::<String>().prop_map(|s| s.chars().take(6).collect()),
    ]
}

fn scalar() -> impl Strategy<Value = J> {
    prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i64>().prop_map(J::Int),
        (-50i64..50).prop_map(J::Int),
        (-999i64..999, 0u32..99).prop_map(|(a, b)| J::Dec(format!("{a}.{b:02}"))),
        prop_oneof![
            Just("123456789012345678901234567890".to_string()),
            Just("-98765432109876543210".to_string()),
            Just("1e400".to_string()),
            Just("3.14159265358979323846".to_string()),
            Just("9223372036854775808".to_string()),
        ]
        .prop_map(J::Big),
        any::<String>().prop_map(|s| J::Str(s.chars().take(8).collect())),
        Just(J::Str("12".into())),
        Just(J::Str("true".into())),
    ]
}

/// Values with no arrays inside (members may have hostile keys).
fn plain() -> impl Strategy<Value = J> {
    scalar().prop_recursive(3, 12, 4, |inner| {
        prop::collection::vec((hostile_key(), inner), 0..4).prop_map(J::Obj)
    })
}

/// Any value; arrays only under plain lower-case keys.
fn value() -> impl Strategy<Value = J> {
    plain().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            // Objects mixing hostile-keyed plain members and safely keyed any members.
            (
                prop::collection::vec((hostile_key(), plain()), 0..3),
                prop::collection::vec(("[k-m]{1,2}", inner.clone()), 0..3),
            )
                .prop_map(|(mut a, b)| {
                    a.extend(b);
                    J::Obj(a)
                }),
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
            // Arrays of objects: child tables.
            prop::collection::vec(
                prop::collection::vec(("[k-m]{1,2}", inner), 0..3).prop_map(J::Obj),
                1..4
            )
            .prop_map(J::Arr),
        ]
    })
}

fn payload() -> impl Strategy<Value = J> {
    (
        prop::collection::vec((hostile_key(), plain()), 0..4),
        prop::collection::vec(("[k-m]{1,2}", value()), 0..4),
    )
        .prop_map(|(mut a, b)| {
            a.extend(b);
            J::Obj(a)
        })
}

/// A comparable value: numbers as `f64` bits when an f64 holds them, else by literal.
#[derive(Clone, Debug, PartialEq)]
enum C {
    Bool(bool),
    Num(u64),
    Lit(String),
    Str(String),
    Arr(Vec<Option<C>>),
    Obj(BTreeMap<String, C>),
}

fn num(f: f64) -> C {
    C::Num((f + 0.0).to_bits())
}

/// A node of a parsed document as `C`; `None` for null. Null members and members that
/// end up empty objects are dropped (they compare equal to absent).
fn cmp_doc(doc: &Doc<'_>, i: usize) -> Option<C> {
    match doc.kind(i) {
        Kind::Null => None,
        Kind::Bool(b) => Some(C::Bool(b)),
        Kind::Num(NumClass::Big) => Some(C::Lit(doc.raw(i).to_string())),
        Kind::Num(_) => Some(num(doc.raw(i).parse().unwrap())),
        Kind::Str { .. } => Some(C::Str(doc.str(i).into_owned())),
        Kind::Array => Some(C::Arr(doc.elements(i).map(|e| cmp_doc(doc, e)).collect())),
        Kind::Object => {
            let mut m = BTreeMap::new();
            for (k, v) in doc.members(i) {
                if let Some(c) = cmp_doc(doc, v) {
                    m.insert(doc.str(k).into_owned(), c);
                }
            }
            Some(C::Obj(m))
        }
        Kind::Raw => unreachable!("parsed without a depth limit"),
    }
}

fn cmp_text(text: &str) -> Option<C> {
    let doc = Doc::parse(text, usize::MAX).unwrap();
    cmp_doc(&doc, 0)
}

fn prune(c: Option<C>) -> Option<C> {
    match c? {
        C::Obj(m) => {
            let m: BTreeMap<String, C> = m
                .into_iter()
                .filter_map(|(k, v)| prune(Some(v)).map(|v| (k, v)))
                .filter(|(_, v)| !matches!(v, C::Obj(o) if o.is_empty()))
                .collect();
            Some(C::Obj(m))
        }
        C::Arr(items) => Some(C::Arr(items.into_iter().map(prune).collect())),
        other => Some(other),
    }
}

/// Decodes an RFC 6901 pointer.
fn pointer_keys(p: &str) -> Vec<String> {
    if p.is_empty() {
        return Vec::new();
    }
    p[1..]
        .split('/')
        .map(|k| k.replace("~1", "/").replace("~0", "~"))
        .collect()
}

fn set_at(root: &mut Option<C>, keys: &[String], v: C) {
    if keys.is_empty() {
        *root = Some(v);
        return;
    }
    if !matches!(root, Some(C::Obj(_))) {
        *root = Some(C::Obj(BTreeMap::new()));
    }
    let Some(C::Obj(m)) = root else {
        unreachable!()
    };
    let mut slot = m.remove(&keys[0]);
    set_at(&mut slot, &keys[1..], v);
    if let Some(s) = slot {
        m.insert(keys[0].clone(), s);
    }
}

fn cell(b: &RecordBatch, col: usize, row: usize) -> Option<C> {
    let field = b.schema().field(col).clone();
    let a = b.column(col);
    if a.is_null(row) {
        return None;
    }
    let json = field.metadata().get(JSON_META).is_some_and(|v| v == "true");
    Some(match a.data_type() {
        DataType::Boolean => C::Bool(a.as_boolean().value(row)),
        DataType::Int64 => num(a.as_primitive::<Int64Type>().value(row) as f64),
        DataType::Float64 => num(a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 if json => cmp_text(a.as_string::<i32>().value(row))?,
        DataType::Utf8 => C::Str(a.as_string::<i32>().value(row).to_string()),
        DataType::Decimal128(_, s) => {
            let v = a.as_primitive::<arrow::datatypes::Decimal128Type>().value(row);
            num(decimal_text(v, *s).parse().unwrap())
        }
        DataType::Date32 => {
            let days = a.as_primitive::<arrow::datatypes::Date32Type>().value(row);
            C::Str(date_text(days).unwrap())
        }
        DataType::Timestamp(..) => {
            let micros = a
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(row);
            C::Str(timestamp_text(micros).unwrap())
        }
        other => panic!("unexpected column type {other}"),
    })
}

/// Rebuilds every message (by `_id`) from a topic table and child tables.
fn rebuild(
    topic_table: &str,
    tables: &BTreeMap<String, RecordBatch>,
) -> HashMap<String, Option<C>> {
    // Every row by id: (table, row).
    let mut children: HashMap<String, Vec<(String, usize)>> = HashMap::new();
    for (name, b) in tables {
        if name == topic_table {
            continue;
        }
        let parents = b.column_by_name("_parent_id").unwrap().as_string::<i32>();
        for row in 0..b.num_rows() {
            children
                .entry(parents.value(row).to_string())
                .or_default()
                .push((name.clone(), row));
        }
    }
    fn row_value(
        table: &str,
        row: usize,
        tables: &BTreeMap<String, RecordBatch>,
        children: &HashMap<String, Vec<(String, usize)>>,
    ) -> Option<C> {
        let b = &tables[table];
        let mut v: Option<C> = None;
        for (i, f) in b.schema().fields().iter().enumerate() {
            if let Some(path) = f.metadata().get(PATH_META)
                && let Some(c) = cell(b, i, row)
            {
                set_at(&mut v, &pointer_keys(path), c);
            }
        }
        if let Some(r) = b.column_by_name(RESCUED) {
            let r = r.as_string::<i32>();
            if r.is_valid(row) {
                let doc = Doc::parse(r.value(row), usize::MAX).unwrap();
                for (k, val) in doc.members(0) {
                    let key = doc.str(k);
                    assert!(!key.starts_with("dup:"), "no duplicate keys generated");
                    if let Some(c) = cmp_doc(&doc, val) {
                        set_at(&mut v, &pointer_keys(&key), c);
                    }
                }
            }
        }
        let id = b
            .column_by_name("_id")
            .unwrap()
            .as_string::<i32>()
            .value(row);
        // Arrays: child rows by child table, in `_idx` order.
        let mut arrays: BTreeMap<&str, Vec<(i64, Option<C>)>> = BTreeMap::new();
        for (child, crow) in children.get(id).map(Vec::as_slice).unwrap_or(&[]) {
            let idx = tables[child]
                .column_by_name("_idx")
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(*crow);
            let elem = row_value(child, *crow, tables, children);
            arrays.entry(child).or_default().push((idx, elem));
        }
        let is_topic = !b.schema().fields().iter().any(|f| f.name() == "_parent_id");
        for (child, mut items) in arrays {
            items.sort_by_key(|(i, _)| *i);
            let rel = if is_topic {
                child
            } else {
                child.strip_prefix(&format!("{table}__")).unwrap()
            };
            let keys: Vec<String> = rel.split("__").map(str::to_string).collect();
            set_at(
                &mut v,
                &keys,
                C::Arr(items.into_iter().map(|(_, e)| e).collect()),
            );
        }
        v
    }
    let b = &tables[topic_table];
    let ids = b.column_by_name("_id").unwrap().as_string::<i32>();
    (0..b.num_rows())
        .map(|row| {
            (
                ids.value(row).to_string(),
                row_value(topic_table, row, tables, &children),
            )
        })
        .collect()
}

/// A payload with no values reads back as no values: the empty object.
fn top(v: Option<C>) -> Option<C> {
    prune(v.or(Some(C::Obj(BTreeMap::new()))))
}

fn tables_of(plan: TablePlan) -> BTreeMap<String, RecordBatch> {
    plan.tables
        .into_iter()
        .map(|(t, b)| (t.to_string(), b))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn every_message_is_rebuilt_from_its_rows(
        first in prop::collection::vec(payload(), 1..5),
        second in prop::collection::vec(payload(), 1..5),
        max_depth in 2usize..8,
    ) {
        let cfg = FlattenConfig { max_depth, ..FlattenConfig::default() };
        let lineage = Lineage::new("b", 0);
        let lines = |batch: &[J], prefix: &str| -> (Vec<String>, HashMap<String, Option<C>>) {
            let mut lines = Vec::new();
            let mut want = HashMap::new();
            for (i, p) in batch.iter().enumerate() {
                let mut text = String::new();
                render(p, &mut text);
                let id = format!("{prefix}{i}");
                want.insert(id.clone(), prune(cmp_text(&text)));
                lines.push(format!(r#"{{"topic":"t","message_id":"{id}","payload":{text}}}"#));
            }
            (lines, want)
        };
        // The first batch creates the tables.
        let (l1, want1) = lines(&first, "a");
        let staged1 = super::tests::stage_topics(&l1);
        let t1 = tables_of(flatten("t", &staged1["t"], &lineage, &cfg).unwrap());
        let got1: HashMap<_, _> = rebuild("t", &t1).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got1, &want1);
        // The second is fitted to the schemas the first created.
        let (l2, want2) = lines(&second, "b");
        let staged2 = super::tests::stage_topics(&l2);
        let mut t2 = tables_of(flatten("t", &staged2["t"], &lineage, &cfg).unwrap());
        for (name, batch) in t2.iter_mut() {
            if let Some(existing) = t1.get(name) {
                let target = crate::flatten::fit::merged_schema(None, existing);
                let table = TableName::existing(name).unwrap();
                let fitted = crate::flatten::fit::to_table(
                    &table, batch.clone(), Some(&target), Evolution::Add,
                ).unwrap();
                *batch = fitted.batch;
            }
        }
        let got2: HashMap<_, _> = rebuild("t", &t2).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got2, &want2);
    }
}

/// A timestamp string in one of the forms RFC 3339 allows (UTC `Z`, an offset, a space
/// for `T`, 0 to 6 fraction digits), or a value a timestamp column does not take.
fn timestamp_value() -> impl Strategy<Value = J> {
    let text = (
        -2_208_988_800_000_000i64..4_102_444_800_000_000,
        -14i32..15,
        0u8..3,
    )
        .prop_map(|(micros, hours, form)| {
            let utc = chrono::DateTime::from_timestamp_micros(micros).unwrap();
            let at = utc.with_timezone(&chrono::FixedOffset::east_opt(hours * 3600).unwrap());
            J::Str(match form {
                0 => utc.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                1 => at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false),
                _ => at.format("%Y-%m-%d %H:%M:%S%.f%:z").to_string(),
            })
        });
    prop_oneof![
        4 => text,
        1 => Just(J::Str("n/a".into())),
        1 => Just(J::Str("2026-01-15T10:00:00".into())),
        1 => Just(J::Str("2026-01-15T10:00:00.1234567890123Z".into())),
        1 => any::<i64>().prop_map(J::Int),
        1 => Just(J::Null),
    ]
}

/// A date string, or a value a date column does not take.
fn date_value() -> impl Strategy<Value = J> {
    prop_oneof![
        4 => (-30_000i32..30_000).prop_map(|d| J::Str(date_text(d).unwrap())),
        1 => Just(J::Str("2026-02-30".into())),
        1 => Just(J::Str("2026-1-5".into())),
        1 => (0i64..99).prop_map(J::Int),
    ]
}

/// A number for a `decimal(10,2)` column, a string holding one, or a value it does not
/// take (too many digits, too precise, not a number).
fn decimal_value() -> impl Strategy<Value = J> {
    prop_oneof![
        3 => (-99_999_999i64..99_999_999, 0u32..100)
            .prop_map(|(a, b)| J::Dec(format!("{a}.{b:02}"))),
        2 => any::<i64>().prop_map(J::Int),
        1 => (-999i64..999, 0u32..1000).prop_map(|(a, b)| J::Dec(format!("{a}.{b:03}"))),
        1 => (-999i64..999).prop_map(|a| J::Str(format!("{a}.10"))),
        1 => Just(J::Big("1e999".into())),
        1 => Just(J::Str("n/a".into())),
        1 => any::<bool>().prop_map(J::Bool),
    ]
}

/// A payload with hinted members (see [`TYPED_HINTS`]) and others.
fn typed_payload() -> impl Strategy<Value = J> {
    let item = (timestamp_value(), scalar())
        .prop_map(|(at, k)| J::Obj(vec![("at".into(), at), ("k".into(), k)]));
    (
        timestamp_value(),
        date_value(),
        decimal_value(),
        value(),
        prop::collection::vec(item, 1..4),
        scalar(),
    )
        .prop_map(|(ts, day, amt, raw, items, other)| {
            J::Obj(vec![
                ("ts".into(), ts),
                ("day".into(), day),
                ("amt".into(), amt),
                ("raw".into(), raw),
                ("items".into(), J::Arr(items)),
                ("other".into(), other),
            ])
        })
}

/// The hints of [`typed_payload`]'s members.
const TYPED_HINTS: &[(&str, &str)] = &[
    ("/ts", "timestamp"),
    ("/day", "date"),
    ("/amt", "decimal(10,2)"),
    ("/raw", "json"),
    ("/items/*/at", "timestamp"),
];

/// `j` as its typed columns give it back: a timestamp that parses as its canonical UTC
/// text, a string holding a decimal as that number; every other value as it is.
fn normalised(j: &J) -> J {
    let ts = |v: &J| match v {
        J::Str(s) => parse_timestamp(s).map_or(v.clone(), |m| J::Str(timestamp_text(m).unwrap())),
        other => other.clone(),
    };
    let J::Obj(members) = j else { return j.clone() };
    let members = members
        .iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v) {
                ("ts", v) => ts(v),
                ("amt", J::Str(s)) if parse_decimal(s, 10, 2).is_some() => J::Dec(s.clone()),
                ("items", J::Arr(items)) => J::Arr(
                    items
                        .iter()
                        .map(|item| match item {
                            J::Obj(m) => J::Obj(
                                m.iter()
                                    .map(|(k, v)| (k.clone(), if k == "at" { ts(v) } else { v.clone() }))
                                    .collect(),
                            ),
                            other => other.clone(),
                        })
                        .collect(),
                ),
                (_, v) => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    J::Obj(members)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES / 4, ..ProptestConfig::default() })]

    #[test]
    fn every_typed_value_is_rebuilt_as_converted_or_rescued(
        first in prop::collection::vec(typed_payload(), 1..5),
        second in prop::collection::vec(typed_payload(), 1..5),
    ) {
        let mut cfg = FlattenConfig::default();
        for (pointer, ty) in TYPED_HINTS {
            cfg.column_types.insert(pointer.to_string(), ty.parse().unwrap());
        }
        let lineage = Lineage::new("b", 0);
        let lines = |batch: &[J], prefix: &str| -> (Vec<String>, HashMap<String, Option<C>>) {
            let mut lines = Vec::new();
            let mut want = HashMap::new();
            for (i, p) in batch.iter().enumerate() {
                let (mut text, mut typed) = (String::new(), String::new());
                render(p, &mut text);
                render(&normalised(p), &mut typed);
                let id = format!("{prefix}{i}");
                want.insert(id.clone(), prune(cmp_text(&typed)));
                lines.push(format!(r#"{{"topic":"t","message_id":"{id}","payload":{text}}}"#));
            }
            (lines, want)
        };
        let fit = |tables: BTreeMap<String, RecordBatch>, to: &BTreeMap<String, RecordBatch>| {
            tables
                .into_iter()
                .map(|(name, batch)| {
                    let target = to.get(&name).map(|b| b.schema());
                    let table = TableName::existing(&name).unwrap();
                    let fitted = crate::flatten::fit::to_table(
                        &table, batch, target.as_deref(), Evolution::Add,
                    ).unwrap();
                    (name, fitted.batch)
                })
                .collect::<BTreeMap<_, _>>()
        };
        // The first batch creates the tables, typed as hinted.
        let (l1, want1) = lines(&first, "a");
        let staged1 = super::tests::stage_topics(&l1);
        let t1 = fit(tables_of(flatten("t", &staged1["t"], &lineage, &cfg).unwrap()), &BTreeMap::new());
        let schema = t1["t"].schema();
        prop_assert_eq!(schema.field_with_name("ts").unwrap().data_type(), &timestamp_type());
        let got1: HashMap<_, _> = rebuild("t", &t1).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got1, &want1);
        // The second is fitted to them.
        let (l2, want2) = lines(&second, "b");
        let staged2 = super::tests::stage_topics(&l2);
        let t2 = fit(tables_of(flatten("t", &staged2["t"], &lineage, &cfg).unwrap()), &t1);
        let got2: HashMap<_, _> = rebuild("t", &t2).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got2, &want2);
    }
}
