//! Property test: every message is recoverable from its topic row, its child rows and
//! `_rescued_data`, through staging, flattening and fitting a second batch to the
//! schema the first one created (type conflicts across batches).
//!
//! Messages are random trees: objects with hostile keys (unicode, `/`, `~`, `.`, `__`,
//! case twins, system column names, empty), scalars of every kind, numbers beyond
//! int64/float64, and arrays of objects, scalars, mixed values and arrays. Array-valued
//! members use plain lower-case keys: a child table is named by its sanitised path, so
//! two arrays whose paths sanitise alike would share a table (by design, see
//! docs/tables.md). Comparison is up to key order, number formatting (numbers compare as
//! `f64`, or by literal beyond it), and members that are null or empty objects.
//!
//! A second property covers hinted types (`timestamp`, `date`, `decimal`, `string`,
//! `int64`, `float64`, `boolean`, `json`, a child table's column) and detection: every
//! value comes back, as its column holds it or from `_rescued_data` (exactly the values
//! that do not convert are there), up to what a conversion normalises and nothing else:
//! - a timestamp is its instant in UTC: its offset (`+05:45`, `-00:00`), `T`/`t`/space,
//!   `Z`/`z` and fraction digits are not kept;
//! - a decimal is its value: a string holding one becomes that number, and its literal's
//!   form (an exponent, trailing zeros, the sign of a zero: `-0` is `0.00`) is not kept;
//! - `string` writes a number, a boolean or an empty object or array as its JSON text
//!   (`42` and `"42"` read back the same);
//! - a number in an `int64` or `float64` column is its value, not its literal, as
//!   without hints.
//!
//! The expected values are derived from what the generators rendered (the instant, the
//! unscaled decimal), not with the parsers under test.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use proptest::prelude::*;

use super::*;
use crate::column_types::{DetectType, date_text, decimal_text, timestamp_text};
use crate::config::Evolution;
use crate::json::{Doc, Kind, NumClass};
use crate::naming::RESCUED;

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
                let target = crate::table::fit::merged_schema(None, existing);
                let table = TableName::existing(name).unwrap();
                let fitted = crate::table::fit::to_table(
                    &table, batch.clone(), Some(&target), Evolution::Add,
                ).unwrap();
                *batch = fitted.batch;
            }
        }
        let got2: HashMap<_, _> = rebuild("t", &t2).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got2, &want2);
    }
}

/// A value of a hinted (or detected) member: as the payload writes it, as its column
/// gives it back, and whether it goes to `_rescued_data` (when not null). The generators
/// know the value they render, so what comes back is derived without the code under
/// test.
#[derive(Clone, Debug)]
struct Typed {
    raw: J,
    back: J,
    rescued: bool,
}

impl Typed {
    /// A value that converts, and comes back as `back`.
    fn converts(raw: J, back: J) -> Typed {
        Typed { raw, back, rescued: false }
    }

    /// A value kept as it is: rescued when `rescued`, else in its column unchanged.
    fn kept(raw: J, rescued: bool) -> Typed {
        let rescued = rescued && !matches!(raw, J::Null);
        Typed { back: raw.clone(), raw, rescued }
    }
}

/// Microseconds since the epoch of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z.
const FIRST_MICROS: i64 = -62_135_596_800_000_000;
const LAST_MICROS: i64 = 253_402_300_799_999_999;
/// Days since the epoch of 0001-01-01 and 9999-12-31.
const FIRST_DAY: i64 = -719_162;
const LAST_DAY: i64 = 2_932_896;
const DAY_MICROS: i64 = 86_400_000_000;

/// `(year, month, day)` of a day counted from 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DD` and `HH:MM:SS` of `micros` (local), and its microseconds in the second;
/// `None` when the year does not take four digits.
fn fields(micros: i64) -> Option<(String, String, i64)> {
    let (days, in_day) = (micros.div_euclid(DAY_MICROS), micros.rem_euclid(DAY_MICROS));
    let (y, m, d) = civil(days);
    if !(0..=9999).contains(&y) {
        return None;
    }
    let secs = in_day / 1_000_000;
    let time = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    Some((format!("{y:04}-{m:02}-{d:02}"), time, in_day % 1_000_000))
}

/// The text a timestamp column gives back for `micros`: UTC, `Z`, 0, 3 or 6 fraction
/// digits.
fn canonical_timestamp(micros: i64) -> String {
    let (date, time, sub) = fields(micros).unwrap();
    let frac = match sub {
        0 => String::new(),
        s if s % 1000 == 0 => format!(".{:03}", s / 1000),
        s => format!(".{s:06}"),
    };
    format!("{date}T{time}{frac}Z")
}

/// How a generated timestamp is written.
#[derive(Clone, Copy, Debug)]
struct Form {
    /// Offset east of UTC in minutes.
    offset: i32,
    /// How a zero offset is written: `Z`, `z`, `+00:00`, `-00:00`.
    zero: u8,
    /// Fraction digits (0 to 9).
    digits: u32,
    /// `T`, `t` or a space.
    sep: char,
    /// A nonzero digit below the microsecond (with more than 6 digits).
    sub_micro: bool,
}

/// `micros` written as `form` says (its fraction cut to the digits written), and the
/// instant written; `None` when the local year does not take four digits.
fn written(micros: i64, form: Form) -> Option<(String, i64)> {
    let unit = 10i64.pow(6 - form.digits.min(6));
    let micros = micros - micros.rem_euclid(unit);
    let (date, time, sub) = fields(micros + i64::from(form.offset) * 60_000_000)?;
    let mut frac = String::new();
    if form.digits > 0 {
        let six = format!("{sub:06}");
        frac = format!(".{}", &six[..form.digits.min(6) as usize]);
        for i in 6..form.digits {
            frac.push(if form.sub_micro && i == form.digits - 1 { '7' } else { '0' });
        }
    }
    let offset = match (form.offset, form.zero) {
        (0, 0) => "Z".to_string(),
        (0, 1) => "z".to_string(),
        (0, 2) => "+00:00".to_string(),
        (0, _) => "-00:00".to_string(),
        (o, _) => {
            let sign = if o < 0 { '-' } else { '+' };
            format!("{sign}{:02}:{:02}", o.abs() / 60, o.abs() % 60)
        }
    };
    Some((format!("{date}{}{time}{frac}{offset}", form.sep), micros))
}

fn form() -> impl Strategy<Value = Form> {
    let offset = prop_oneof![
        3 => Just(0),
        1 => Just(345),
        1 => Just(-570),
        1 => Just(840),
        1 => Just(-720),
        2 => -1439i32..=1439,
    ];
    let sep = prop_oneof![Just('T'), Just('t'), Just(' ')];
    (offset, 0u8..4, 0u32..=9, sep, prop::bool::weighted(0.2)).prop_map(
        |(offset, zero, digits, sep, sub_micro)| Form {
            offset,
            zero,
            digits,
            sep,
            sub_micro: sub_micro && digits > 6,
        },
    )
}

/// An instant, often near the first or last one a timestamp column takes (or just
/// beyond).
fn instant() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => -2_208_988_800_000_000i64..4_102_444_800_000_000,
        1 => FIRST_MICROS - 2 * DAY_MICROS..FIRST_MICROS + 2 * DAY_MICROS,
        1 => LAST_MICROS - 2 * DAY_MICROS..LAST_MICROS + 2 * DAY_MICROS,
        1 => FIRST_MICROS..=LAST_MICROS,
    ]
}

/// A timestamp string: an instant written in one of the forms RFC 3339 allows (any
/// offset, `Z`/`z`, `T`/`t`/space, 0 to 9 fraction digits), converted when the instant
/// is within years 1 to 9999 and has no digit below the microsecond; or a string a
/// timestamp column does not take.
fn timestamp_text_value() -> impl Strategy<Value = Typed> {
    let text = (instant(), form()).prop_map(|(micros, form)| match written(micros, form) {
        Some((text, at)) if !form.sub_micro && (FIRST_MICROS..=LAST_MICROS).contains(&at) => {
            Typed::converts(J::Str(text), J::Str(canonical_timestamp(at)))
        }
        Some((text, _)) => Typed::kept(J::Str(text), true),
        None => Typed::kept(J::Str("n/a".into()), true),
    });
    prop_oneof![
        6 => text,
        1 => prop_oneof![
            Just("n/a"),
            Just("2026-01-15T10:00:00"),
            Just("2016-12-31T23:59:60Z"),
            Just("2016-12-31 23:59:60.5+01:00"),
            Just("2026-01-15 日本語です"),
            Just("2026-01-15T10:00:0日Z"),
        ]
        .prop_map(|s| Typed::kept(J::Str(s.into()), true)),
    ]
}

/// A value of a `timestamp` member: a timestamp string, or a value that is not one.
fn timestamp_value() -> impl Strategy<Value = Typed> {
    prop_oneof![
        6 => timestamp_text_value(),
        1 => any::<i64>().prop_map(|i| Typed::kept(J::Int(i), true)),
        1 => Just(Typed::kept(J::Null, false)),
    ]
}

/// A date string (years 0 to 9999: year 0 is not taken), or a value a date column does
/// not take.
fn date_value() -> impl Strategy<Value = Typed> {
    prop_oneof![
        // Year 0 (a leap year: 366 days) and no earlier: `fields` writes years 0 to 9999.
        4 => (FIRST_DAY - 366..=LAST_DAY).prop_map(|days| {
            let (date, ..) = fields(days * DAY_MICROS).unwrap();
            if days >= FIRST_DAY {
                Typed::converts(J::Str(date.clone()), J::Str(date))
            } else {
                Typed::kept(J::Str(date), true)
            }
        }),
        1 => prop_oneof![Just("2026-02-30"), Just("2026-1-5"), Just("2026-01-15 ")]
            .prop_map(|s| Typed::kept(J::Str(s.into()), true)),
        1 => (0i64..99).prop_map(|i| Typed::kept(J::Int(i), true)),
    ]
}

/// `digits` × 10^-`p` as a JSON number literal (no exponent).
fn place(digits: &str, p: i32) -> String {
    if p <= 0 {
        let zeros = if digits == "0" { 0 } else { p.unsigned_abs() as usize };
        return format!("{digits}{}", "0".repeat(zeros));
    }
    let p = p as usize;
    let padded = format!("{digits:0>width$}", width = p + 1);
    let (int, frac) = padded.split_at(padded.len() - p);
    format!("{int}.{frac}")
}

/// The unscaled value `v` (scale 2) as a literal: plain with 2 decimals and `zeros` more
/// trailing zeros, or with an exponent `k` written as `style` says; `-` before a zero
/// when `neg_zero`.
fn decimal_literal(v: i64, k: i32, style: u8, zeros: usize, neg_zero: bool) -> String {
    let sign = if v < 0 || (v == 0 && neg_zero) { "-" } else { "" };
    let digits = v.unsigned_abs().to_string();
    let body = match style {
        0 => format!("{}{}", place(&digits, 2), "0".repeat(zeros)),
        1 => format!("{}e{k}", place(&digits, 2 + k)),
        2 => format!("{}E{k}", place(&digits, 2 + k)),
        _ => format!("{}e{}{k}", place(&digits, 2 + k), if k >= 0 { "+" } else { "" }),
    };
    format!("{sign}{body}")
}

/// A number for a `decimal(10,2)` column (plain or with an exponent, `-0`, between -1
/// and 0), a string holding one, or a value it does not take (too many digits, too
/// precise, not JSON number syntax, not a number).
fn decimal_value() -> impl Strategy<Value = Typed> {
    let fits = prop_oneof![
        3 => -9_999_999_999i64..=9_999_999_999,
        1 => -99i64..=0,
    ];
    let literal = (fits, -3i32..=3, 0u8..4, 0usize..3, any::<bool>(), any::<bool>()).prop_map(
        |(v, k, style, zeros, neg_zero, as_string)| {
            let text = decimal_literal(v, k, style, zeros, neg_zero);
            let back = J::Dec(decimal_literal(v, 0, 0, 0, false));
            let raw = if as_string { J::Str(text) } else { J::Dec(text) };
            Typed::converts(raw, back)
        },
    );
    let too_precise = (-999_999i64..999_999)
        .prop_filter("a third decimal", |v| v % 10 != 0)
        .prop_map(|v| {
            let sign = if v < 0 { "-" } else { "" };
            Typed::kept(J::Dec(format!("{sign}{}", place(&v.unsigned_abs().to_string(), 3))), true)
        });
    let too_big = (10_000_000_000i64..1_000_000_000_000, any::<bool>()).prop_map(|(v, s)| {
        let text = place(&v.to_string(), 2);
        Typed::kept(if s { J::Str(text) } else { J::Dec(text) }, true)
    });
    prop_oneof![
        6 => literal,
        1 => too_precise,
        1 => too_big,
        1 => any::<i64>().prop_map(|i| {
            if i.unsigned_abs() < 100_000_000 {
                Typed::converts(J::Int(i), J::Int(i))
            } else {
                Typed::kept(J::Int(i), true)
            }
        }),
        1 => prop_oneof![Just(" 5"), Just("5 "), Just("+5"), Just(".5"), Just("5."), Just("n/a")]
            .prop_map(|s| Typed::kept(J::Str(s.into()), true)),
        1 => Just(Typed::kept(J::Big("1e999".into()), true)),
        1 => any::<bool>().prop_map(|b| Typed::kept(J::Bool(b), true)),
    ]
}

/// A scalar (or an empty object or array) for a `string` member: a string as it is, any
/// other value as its JSON text.
fn string_value() -> impl Strategy<Value = Typed> {
    prop_oneof![
        6 => scalar(),
        1 => Just(J::Obj(Vec::new())),
        1 => Just(J::Arr(Vec::new())),
    ]
    .prop_map(|j| {
        let back = match &j {
            J::Null => J::Null,
            J::Str(_) => j.clone(),
            other => {
                let mut text = String::new();
                render(other, &mut text);
                J::Str(text)
            }
        };
        Typed::converts(j, back)
    })
}

/// A scalar for an `int64`, `float64` or `boolean` member (`ty`), kept as it is:
/// rescued unless the type holds it exactly.
fn scalar_for(ty: &'static str) -> impl Strategy<Value = Typed> {
    scalar().prop_map(move |j| {
        let holds = match (ty, &j) {
            (_, J::Null) => true,
            ("int64", J::Int(_)) => true,
            ("float64", J::Int(i)) => i.unsigned_abs() <= 1 << 53,
            ("float64", J::Dec(_)) => true,
            ("boolean", J::Bool(_)) => true,
            _ => false,
        };
        Typed::kept(j, !holds)
    })
}

/// A message with hinted members (see [`TYPED_HINTS`]), a member `when` left to
/// detection, and others: the payload, the members as their columns give them back
/// (`when` aside), the pointers whose value is rescued, and `when`.
#[derive(Clone, Debug)]
struct Message {
    raw: J,
    back: Vec<(String, J)>,
    rescued: std::collections::BTreeSet<String>,
    when: Typed,
}

/// A message with a member per hint of [`TYPED_HINTS`], a member `when` left to
/// detection, a `json` one and an unhinted one.
fn typed_message() -> impl Strategy<Value = Message> {
    let item = (timestamp_value(), scalar());
    let hinted = (
        timestamp_value(),
        date_value(),
        decimal_value(),
        string_value(),
        scalar_for("int64"),
        scalar_for("float64"),
        scalar_for("boolean"),
    );
    (hinted, prop::collection::vec(item, 1..4), timestamp_text_value(), value(), scalar()).prop_map(
        |((ts, day, amt, s, i, f, b), items, when, raw, other)| {
            let members = [("ts", ts), ("day", day), ("amt", amt), ("s", s), ("i", i), ("f", f), ("b", b)];
            let rescued = members
                .iter()
                .filter(|(_, t)| t.rescued)
                .map(|(k, _)| format!("/{k}"))
                .collect();
            let (raw_items, back_items): (Vec<J>, Vec<J>) = items
                .into_iter()
                .map(|(at, k)| {
                    let item = |at: J| J::Obj(vec![("at".into(), at), ("k".into(), k.clone())]);
                    (item(at.raw), item(at.back))
                })
                .unzip();
            let mut payload: Vec<(String, J)> =
                members.iter().map(|(k, t)| (k.to_string(), t.raw.clone())).collect();
            let mut back: Vec<(String, J)> =
                members.iter().map(|(k, t)| (k.to_string(), t.back.clone())).collect();
            payload.extend([
                ("items".into(), J::Arr(raw_items)),
                ("when".into(), when.raw.clone()),
                ("raw".into(), raw.clone()),
                ("other".into(), other.clone()),
            ]);
            back.extend([
                ("items".into(), J::Arr(back_items)),
                ("raw".into(), raw),
                ("other".into(), other),
            ]);
            Message { raw: J::Obj(payload), back, rescued, when }
        },
    )
}

/// The hints of [`typed_message`]'s members.
const TYPED_HINTS: &[(&str, &str)] = &[
    ("/ts", "timestamp"),
    ("/day", "date"),
    ("/amt", "decimal(10,2)"),
    ("/s", "string"),
    ("/i", "int64"),
    ("/f", "float64"),
    ("/b", "boolean"),
    ("/raw", "json"),
    ("/items/*/at", "timestamp"),
];

/// The hinted pointers of the `_rescued_data` of each row of `table`, by `_id`.
fn rescued_pointers(table: &RecordBatch) -> HashMap<String, std::collections::BTreeSet<String>> {
    let ids = table.column_by_name("_id").unwrap().as_string::<i32>();
    let rescued = table.column_by_name(RESCUED).map(|r| r.as_string::<i32>().clone());
    (0..table.num_rows())
        .map(|row| {
            let mut keys = std::collections::BTreeSet::new();
            if let Some(r) = rescued.as_ref().filter(|r| r.is_valid(row)) {
                let doc = Doc::parse(r.value(row), usize::MAX).unwrap();
                for (k, _) in doc.members(0) {
                    let key = doc.str(k).into_owned();
                    if TYPED_HINTS.iter().any(|(p, _)| *p == key) {
                        keys.insert(key);
                    }
                }
            }
            (ids.value(row).to_string(), keys)
        })
        .collect()
}

/// What a batch of `messages` should read back as (by `_id`, with `prefix`), `when`
/// given back as a timestamp when `when_typed`, and the hinted pointers rescued per
/// message.
#[allow(clippy::type_complexity)]
fn expected(
    messages: &[Message],
    prefix: &str,
    when_typed: bool,
) -> (Vec<String>, HashMap<String, Option<C>>, HashMap<String, std::collections::BTreeSet<String>>) {
    let mut lines = Vec::new();
    let mut want = HashMap::new();
    let mut rescued = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        let (mut text, mut typed) = (String::new(), String::new());
        render(&m.raw, &mut text);
        let when = if when_typed { m.when.back.clone() } else { m.when.raw.clone() };
        let mut back = m.back.clone();
        back.push(("when".into(), when));
        render(&J::Obj(back), &mut typed);
        let id = format!("{prefix}{i}");
        want.insert(id.clone(), prune(cmp_text(&typed)));
        rescued.insert(id.clone(), m.rescued.clone());
        lines.push(format!(r#"{{"topic":"t","message_id":"{id}","payload":{text}}}"#));
    }
    (lines, want, rescued)
}

/// Flattens `lines` with `cfg` and fits each table to `to` (a new table where `to` has
/// none).
fn flattened_and_fitted(
    lines: &[String],
    cfg: &FlattenConfig,
    to: &BTreeMap<String, RecordBatch>,
) -> BTreeMap<String, RecordBatch> {
    let staged = super::tests::stage_topics(lines);
    let tables = tables_of(flatten("t", &staged["t"], &Lineage::new("b", 0), cfg).unwrap());
    tables
        .into_iter()
        .map(|(name, batch)| {
            let target = to.get(&name).map(|b| b.schema());
            let table = TableName::existing(&name).unwrap();
            let fitted =
                crate::table::fit::to_table(&table, batch, target.as_deref(), Evolution::Add)
                    .unwrap();
            (name, fitted.batch)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES / 4, ..ProptestConfig::default() })]

    #[test]
    fn every_typed_value_is_rebuilt_as_converted_or_rescued(
        first in prop::collection::vec(typed_message(), 1..5),
        second in prop::collection::vec(typed_message(), 1..5),
    ) {
        let mut cfg = FlattenConfig {
            detect_types: vec![DetectType::Timestamp, DetectType::Date],
            ..FlattenConfig::default()
        };
        for (pointer, ty) in TYPED_HINTS {
            cfg.column_types.insert(pointer.to_string(), ty.parse().unwrap());
        }
        // `when` is detected a timestamp when every value of the first batch is one; the
        // second batch's are then converted or rescued, else kept as strings.
        let detected = first.iter().all(|m| !m.when.rescued);
        // The first batch creates the tables, typed as hinted.
        let (l1, want1, rescued1) = expected(&first, "a", detected);
        let t1 = flattened_and_fitted(&l1, &cfg, &BTreeMap::new());
        let schema = t1["t"].schema();
        prop_assert_eq!(schema.field_with_name("ts").unwrap().data_type(), &timestamp_type());
        let got1: HashMap<_, _> = rebuild("t", &t1).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got1, &want1);
        prop_assert_eq!(&rescued_pointers(&t1["t"]), &rescued1);
        // The second is fitted to them.
        let (l2, want2, rescued2) = expected(&second, "b", detected);
        let t2 = flattened_and_fitted(&l2, &cfg, &t1);
        let got2: HashMap<_, _> = rebuild("t", &t2).into_iter().map(|(k, v)| (k, top(v))).collect();
        prop_assert_eq!(&got2, &want2);
        prop_assert_eq!(&rescued_pointers(&t2["t"]), &rescued2);
    }
}
