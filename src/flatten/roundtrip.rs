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

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use proptest::prelude::*;

use super::*;
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
