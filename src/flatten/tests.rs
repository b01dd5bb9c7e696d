use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use super::*;
use crate::config::EnvelopeConfig;
use crate::config::TypesMode;
use crate::column_types::{ColumnType, DetectType};
use crate::stage::stage_file_bytes;
use crate::naming::RESCUED;
use crate::table::fit;

fn lineage() -> Lineage {
    Lineage::new("b1", 1_700_000_000_000_000)
}

/// Stages the lines as one file: each topic's staged rows.
pub(super) fn stage_topics(lines: &[impl AsRef<str>]) -> BTreeMap<String, Vec<RecordBatch>> {
    let text = lines
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join("\n");
    let staged = stage_file_bytes(text.as_bytes(), "f.jsonl", &EnvelopeConfig::default());
    assert!(staged.corrupt.is_empty(), "{:?}", staged.corrupt);
    let file = crate::source::discover::SourceFile {
        path: "f.jsonl".into(),
        name: "f.jsonl".into(),
        bytes: 0,
        compression: crate::source::discover::Compression::None,
        folder: 0,
        modified: None,
        etag: None,
    };
    crate::stage::assemble(&[file], vec![staged], true, &mut Default::default()).topics
}

/// Stages the lines and flattens every topic; tables of all topics by name.
fn run(lines: &[&str]) -> BTreeMap<String, Vec<RecordBatch>> {
    let mut out: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for (topic, batch) in &stage_topics(lines) {
        let plan = flatten(topic, batch, &lineage(), &FlattenConfig::default()).unwrap();
        for (t, b) in plan.tables {
            out.entry(t.to_string()).or_default().push(b);
        }
    }
    out
}

fn col_names(b: &RecordBatch) -> Vec<String> {
    b.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

#[test]
fn nested_objects_become_double_underscore_columns() {
    let t = run(&[
        r#"{"topic":"Quote","message_id":"1","src":"x","payload":{"Bid":{"Px":1.5,"Qty":2},"ok":true}}"#,
    ]);
    let b = &t["quote"][0];
    let names = col_names(b);
    for want in [
        "_id",
        "_batch_id",
        "_topic",
        "_source_file",
        "_line",
        "_loaded_at",
        "_meta__src",
        "bid__px",
        "bid__qty",
        "ok",
    ] {
        assert!(names.contains(&want.to_string()), "{want} not in {names:?}");
    }
    assert_eq!(
        b.column_by_name("bid__px").unwrap().data_type(),
        &DataType::Float64
    );
    assert_eq!(
        b.column_by_name("bid__qty").unwrap().data_type(),
        &DataType::Int64
    );
    assert_eq!(
        b.column_by_name("ok").unwrap().data_type(),
        &DataType::Boolean
    );
    assert_eq!(
        b.column_by_name("_topic")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "Quote"
    );
}

#[test]
fn arrays_of_objects_share_one_child_table_across_topics() {
    let t = run(&[
        r#"{"topic":"a","message_id":"1","payload":{"currentprice":[{"px":1},{"px":2}]}}"#,
        r#"{"topic":"b","message_id":"2","payload":{"currentprice":[{"px":3}],"x":1}}"#,
    ]);
    let cp = &t["currentprice"];
    assert_eq!(cp.len(), 2, "one batch per topic, same table");
    let a = &cp[0];
    assert_eq!(a.num_rows(), 2);
    assert_eq!(
        a.column_by_name("_parent_id")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "1"
    );
    assert_eq!(
        a.column_by_name("_root_id")
            .unwrap()
            .as_string::<i32>()
            .value(1),
        "1"
    );
    assert_eq!(
        a.column_by_name("_idx")
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(1),
        1
    );
    let ids = a.column_by_name("_id").unwrap().as_string::<i32>();
    assert_ne!(ids.value(0), ids.value(1));
    // Deterministic: same input, same ids.
    let again =
        run(&[r#"{"topic":"a","message_id":"1","payload":{"currentprice":[{"px":1},{"px":2}]}}"#]);
    assert_eq!(
        again["currentprice"][0]
            .column_by_name("_id")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        ids.value(0)
    );
}

#[test]
fn nested_arrays_scalar_arrays_and_grandchildren() {
    let t = run(&[
        r#"{"topic":"o","message_id":"9","payload":{"lines":[{"sku":"a","taxes":[{"r":0.2}]}],"tags":["x",1]}}"#,
    ]);
    let lines = &t["lines"][0];
    let line_id = lines
        .column_by_name("_id")
        .unwrap()
        .as_string::<i32>()
        .value(0)
        .to_string();
    let taxes = &t["lines__taxes"][0];
    assert_eq!(
        taxes
            .column_by_name("_parent_id")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        line_id
    );
    assert_eq!(
        taxes
            .column_by_name("_root_id")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "9"
    );
    assert_eq!(
        taxes
            .column_by_name("r")
            .unwrap()
            .as_primitive::<Float64Type>()
            .value(0),
        0.2
    );
    let tags = &t["tags"][0];
    let v = tags.column_by_name("value").unwrap().as_string::<i32>();
    assert_eq!(
        (v.value(0), v.value(1)),
        ("\"x\"", "1"),
        "mixed scalars become JSON text, keeping each value's type"
    );
    assert_eq!(
        tags.schema().field_with_name("value").unwrap().metadata()[JSON_META],
        "true"
    );
}

#[test]
fn types_widen_and_nulls_stay_null() {
    let t = run(&[
        r#"{"topic":"t","message_id":"1","payload":{"a":1,"b":1,"c":null,"big":18446744073709551615}}"#,
        r#"{"topic":"t","message_id":"2","payload":{"a":2.5,"b":"x"}}"#,
    ]);
    let b = &t["t"][0];
    assert_eq!(
        b.column_by_name("a").unwrap().data_type(),
        &DataType::Float64
    );
    let s = b.column_by_name("b").unwrap().as_string::<i32>();
    assert_eq!((s.value(0), s.value(1)), ("1", "\"x\""));
    let c = b.column_by_name("c").unwrap();
    assert_eq!(c.null_count(), 2);
    assert_eq!(
        b.column_by_name("big").unwrap().as_string::<i32>().value(0),
        "18446744073709551615"
    );
}

#[test]
fn names_collide_deterministically_and_never_hit_system_columns() {
    let t = run(&[
        r#"{"topic":"t","message_id":"1","payload":{"a.b":1,"a":{"b":2},"_batch_id":"evil","A.B":3}}"#,
    ]);
    let b = &t["t"][0];
    let get = |n: &str| {
        b.column_by_name(n)
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(0)
    };
    assert_eq!(get("a_b"), 1);
    assert_eq!(get("a__b"), 2);
    assert_eq!(get("a_b_2"), 3);
    assert_eq!(
        b.column_by_name("_batch_id")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "b1"
    );
    assert_eq!(
        b.column_by_name("_batch_id_2")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "evil"
    );
}

#[test]
fn deep_subtrees_are_kept_as_json_text() {
    let deep = format!("{}1{}", "{\"a\":".repeat(30), "}".repeat(30));
    let line = format!(r#"{{"topic":"d","message_id":"1","payload":{deep}}}"#);
    let t = run(&[&line]);
    let b = &t["d"][0];
    let last = b.schema().fields().last().unwrap().name().clone();
    let v = b
        .column_by_name(&last)
        .unwrap()
        .as_string::<i32>()
        .value(0)
        .to_string();
    assert!(v.starts_with("{\"a\":") && v.ends_with('}'), "{v}");
    let parsed: serde_json::Value = serde_json::from_str(&v).unwrap();
    assert!(parsed.is_object());
}

#[test]
fn non_object_payload_is_a_value_column() {
    let t = run(&[r#"{"topic":"s","message_id":"1","payload":"hello"}"#]);
    assert_eq!(
        t["s"][0]
            .column_by_name("value")
            .unwrap()
            .as_string::<i32>()
            .value(0),
        "hello"
    );
}

fn strings_of(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let c = b
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", col_names(b)))
        .as_string::<i32>();
    (0..c.len())
        .map(|i| c.is_valid(i).then(|| c.value(i).to_string()))
        .collect()
}

#[test]
fn numbers_beyond_int64_and_float64_keep_their_literal_text() {
    let t = run(&[
        r#"{"topic":"n","message_id":"1","payload":{"i":123456789012345678901234567890,"f":1e400,"p":3.14159265358979323846,"ok":1.25}}"#,
        r#"{"topic":"n","message_id":"2","payload":{"i":1,"f":2.5,"p":1,"ok":2}}"#,
    ]);
    let b = &t["n"][0];
    assert_eq!(
        strings_of(b, "i"),
        [
            Some("123456789012345678901234567890".into()),
            Some("1".into())
        ]
    );
    assert_eq!(
        strings_of(b, "f"),
        [Some("1e400".into()), Some("2.5".into())]
    );
    assert_eq!(
        strings_of(b, "p")[0].as_deref(),
        Some("3.14159265358979323846")
    );
    assert_eq!(
        b.column_by_name("ok").unwrap().data_type(),
        &DataType::Float64
    );
}

#[test]
fn duplicate_keys_keep_every_value() {
    let t = run(&[
        r#"{"topic":"d","message_id":"1","payload":{"a":1,"b":{"c":true},"a":2,"a":"three"}}"#,
    ]);
    let b = &t["d"][0];
    assert_eq!(strings_of(b, "a"), [Some("three".into())]);
    assert_eq!(strings_of(b, RESCUED), [Some(r#"{"dup:/a":[1,2]}"#.into())]);
}

#[test]
fn empty_containers_and_mixed_arrays_are_kept() {
    let t = run(&[
        r#"{"topic":"e","message_id":"1","payload":{"none":[],"obj":{},"mix":[1,"a",{"k":null},[2]],"objs":[{"x":1},{}]}}"#,
    ]);
    let b = &t["e"][0];
    assert_eq!(strings_of(b, "none"), [Some("[]".into())]);
    assert_eq!(strings_of(b, "obj"), [Some("{}".into())]);
    let mix = &t["mix"][0];
    assert_eq!(
        strings_of(mix, "value"),
        [
            Some("1".into()),
            Some("\"a\"".into()),
            Some(r#"{"k":null}"#.into()),
            Some("[2]".into())
        ]
    );
    let objs = &t["objs"][0];
    assert_eq!(objs.num_rows(), 2);
    assert_eq!(strings_of(objs, "value"), [None, Some("{}".into())]);
}

#[test]
fn columns_record_their_original_path() {
    let t = run(&[r#"{"topic":"p","message_id":"1","payload":{"A.b":1,"a":{"b":2},"x/y~z":3}}"#]);
    let b = &t["p"][0];
    let schema = b.schema();
    let path = |name: &str| schema.field_with_name(name).unwrap().metadata()[PATH_META].clone();
    assert_eq!(path("a_b"), "/A.b");
    assert_eq!(path("a__b"), "/a/b");
    assert_eq!(path("x_y_z"), "/x~1y~0z");
}

#[test]
fn strings_mode_lands_every_leaf_as_text() {
    let text =
        r#"{"topic":"s","message_id":"1","payload":{"n":1.50,"b":true,"s":"x","o":{"deep":[1]}}}"#;
    let topics = stage_topics(&[text]);
    let cfg = FlattenConfig {
        types: TypesMode::Strings,
        ..Default::default()
    };
    let plan = flatten("s", &topics["s"], &lineage(), &cfg).unwrap();
    let b = &plan.tables[&TableName::for_topic("s")];
    assert_eq!(strings_of(b, "n"), [Some("1.50".into())]);
    assert_eq!(strings_of(b, "b"), [Some("true".into())]);
    assert_eq!(strings_of(b, "s"), [Some("x".into())]);
}

#[test]
fn child_tables_can_be_qualified_by_topic_or_mapped() {
    let text =
        r#"{"topic":"quote","message_id":"1","payload":{"quotes":[{"currentprice":[{"px":1}]}]}}"#;
    let topics = stage_topics(&[text]);
    let names = |cfg: &FlattenConfig| -> Vec<String> {
        flatten("quote", &topics["quote"], &lineage(), cfg)
            .unwrap()
            .tables
            .keys()
            .map(|t| t.to_string())
            .collect()
    };
    assert_eq!(
        names(&FlattenConfig::default()),
        ["quote", "quotes", "quotes__currentprice"]
    );
    let by_topic = FlattenConfig {
        child_naming: crate::config::ChildNaming::Topic,
        ..Default::default()
    };
    assert_eq!(
        names(&by_topic),
        ["quote", "quote__quotes", "quote__quotes__currentprice"]
    );
    let mut mapped = FlattenConfig::default();
    mapped.child_tables.insert(
        "payload.quotes[].currentprice".into(),
        "currentprice".into(),
    );
    assert_eq!(names(&mapped), ["currentprice", "quote", "quotes"]);
}

#[test]
fn hostile_nesting_is_kept_as_text_without_recursion() {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let line = format!(r#"{{"topic":"deep","message_id":"1","payload":{{"a":{deep}}}}}"#);
    // In a small-stack thread, as rayon workers have.
    let t = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || run(&[&line]))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(t["deep"][0].num_rows(), 1);
}

#[test]
fn long_paths_give_bounded_distinct_column_names() {
    let deep_a = format!(
        r#"{{"topic":"l","message_id":"1","payload":{}1{}}}"#,
        r#"{"segment_with_a_long_name":"#.repeat(12),
        "}".repeat(12)
    );
    let t = run(&[&deep_a]);
    for f in t["l"][0].schema().fields() {
        assert!(
            f.name().len() <= crate::naming::MAX_NAME_LEN,
            "{}",
            f.name()
        );
    }
}

#[test]
fn a_child_named_like_its_own_topic_table_gets_the_topic_qualified_name() {
    // Found by the `parse_flatten` fuzz target: topic `c__levels` and an array under
    // `` `levels `` both sanitise to `c__levels`.
    let t = run(&[
        r#"{"topic":"c__levels","message_id":"1","payload":{"`levels":[{"px":1}]}}"#,
        r#"{"topic":"levels","message_id":"2","payload":{"levels":[{"px":2}],"x":1}}"#,
    ]);
    assert_eq!(
        t["c__levels"].iter().map(|b| b.num_rows()).sum::<usize>(),
        1
    );
    assert_eq!(t["levels"].iter().map(|b| b.num_rows()).sum::<usize>(), 1);
    assert!(!col_names(&t["levels"][0]).contains(&"_parent_id".to_string()));
    assert_eq!(t["c__levels___levels"][0].num_rows(), 1, "{:?}", t.keys());
    assert_eq!(t["levels__levels"][0].num_rows(), 1, "{:?}", t.keys());
}

#[test]
fn a_topic_staged_in_several_batches_flattens_as_one() {
    // Rows that add columns, child rows and type changes part-way, so a split between
    // batches would show in the schema, the child ids or the widened types.
    let lines: Vec<String> = (0..9)
        .map(|i| {
            let extra = if i >= 5 {
                format!(r#","late":{i},"p":"{i}.5""#)
            } else {
                format!(r#","p":{i}"#)
            };
            format!(
                r#"{{"topic":"t","message_id":"{i}","payload":{{"n":{i},"items":[{{"x":{i}}},{{"y":"{i}"}}]{extra}}}}}"#
            )
        })
        .collect();
    let staged = stage_topics(&lines);
    let whole = &staged["t"];
    assert_eq!(whole.len(), 1);
    let b = &whole[0];
    for cut in [1, 4, 5, 8] {
        let parts = [b.slice(0, cut), b.slice(cut, b.num_rows() - cut)];
        let split = flatten("t", &parts, &lineage(), &FlattenConfig::default()).unwrap();
        let one = flatten("t", whole, &lineage(), &FlattenConfig::default()).unwrap();
        assert_eq!(split.tables, one.tables, "cut after row {cut}");
    }
}

#[test]
fn child_ids_are_the_message_id_and_the_elements_pointer() {
    // Siblings share all but their index (built once per array); consecutive rows,
    // parents and tables vary, so a stale prefix would show. Keys and message ids are
    // escaped as JSON pointer tokens: `~` → `~0`, `/` → `~1`.
    let t = run(&[
        r#"{"topic":"o","message_id":"m1","payload":{"lines":[{"taxes":[{"r":1},{"r":2}]},{"taxes":[{"r":3}]}]}}"#,
        r#"{"topic":"o","message_id":"m/2~","payload":{"lines":[{"taxes":[{"r":4}]},{}],"x/y~z":{"k":[7]}}}"#,
    ]);
    let ids = |table: &str| strings_of(&t[table][0], "_id");
    let parents = |table: &str| strings_of(&t[table][0], "_parent_id");
    let some = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
    assert_eq!(ids("lines"), some(&["m1/lines/0", "m1/lines/1", "m~12~0/lines/0", "m~12~0/lines/1"]));
    assert_eq!(parents("lines"), some(&["m1", "m1", "m/2~", "m/2~"]));
    assert_eq!(
        ids("lines__taxes"),
        some(&["m1/lines/0/taxes/0", "m1/lines/0/taxes/1", "m1/lines/1/taxes/0", "m~12~0/lines/0/taxes/0"])
    );
    assert_eq!(
        parents("lines__taxes"),
        some(&["m1/lines/0", "m1/lines/0", "m1/lines/1", "m~12~0/lines/0"])
    );
    assert_eq!(strings_of(&t["lines__taxes"][0], "_root_id"), some(&["m1", "m1", "m1", "m/2~"]));
    let scalar = t.keys().find(|k| k.ends_with("__k")).unwrap();
    assert_eq!(ids(scalar), some(&["m~12~0/x~1y~0z/k/0"]));
}

#[test]
fn one_message_id_in_two_topics_is_one_message() {
    // Staging drops a repeated message id whatever its topic, so topics sharing a child
    // table never give it the same `_id` twice from one batch: ids need no topic.
    let t = run(&[
        r#"{"topic":"a","message_id":"1","payload":{"currentprice":[{"px":1},{"px":2}]}}"#,
        r#"{"topic":"b","message_id":"1","payload":{"currentprice":[{"px":3}]}}"#,
        r#"{"topic":"b","message_id":"2","payload":{"currentprice":[{"px":4}]}}"#,
    ]);
    let ids: Vec<_> = t["currentprice"]
        .iter()
        .flat_map(|b| strings_of(b, "_id"))
        .map(Option::unwrap)
        .collect();
    assert_eq!(ids, ["1/currentprice/0", "1/currentprice/1", "2/currentprice/0"]);
    let topics: Vec<_> = t["currentprice"].iter().flat_map(|b| strings_of(b, "_topic")).collect();
    assert_eq!(topics, [Some("a".to_string()), Some("a".into()), Some("b".into())]);
}

/// Child ids under random payloads: hostile keys and message ids, arrays of arrays,
/// scalar arrays, payloads that are arrays, several topics, child tables fed by several
/// array paths at different depths (mapped onto one, or named alike).
mod child_id_properties {
    use std::collections::{BTreeMap, HashMap, HashSet};

    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::config::ChildNaming;

    /// Message ids, one per message (never empty): prefixes of each other, escapes and
    /// their look-alikes.
    const MESSAGE_IDS: [&str; 10] = ["m", "m/0", "m/a", "m~1a", "m~01", "~1", "/", "~", "é/日", "m/a/0"];

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "0", "1", "/", "~", "~1", "~0", "a/b", "", "é", "日本", "a__b", "A"])
            .prop_map(String::from)
    }

    fn object(inner: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
        prop::collection::btree_map(key(), inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            (0i64..5).prop_map(Value::from),
            "[xy]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 48, 4, |inner| {
            prop_oneof![
                // Scalars, mixed values, arrays of arrays.
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                // Arrays of objects: child tables with columns.
                prop::collection::vec(object(inner.clone()), 1..4).prop_map(Value::Array),
                object(inner),
            ]
        })
    }

    fn payload() -> impl Strategy<Value = Value> {
        prop_oneof![
            4 => object(value()),
            1 => prop::collection::vec(value(), 1..4).prop_map(Value::Array),
        ]
    }

    /// `s` unescaped from a JSON pointer token.
    fn unescape(s: &str) -> String {
        s.replace("~1", "/").replace("~0", "~")
    }

    fn escape(s: &str) -> String {
        s.replace('~', "~0").replace('/', "~1")
    }

    /// Whether the value at `pointer` in `v` is reached through objects only.
    fn through_objects(mut v: &Value, pointer: &str) -> bool {
        for token in pointer.split('/').skip(1) {
            match v {
                Value::Object(m) => v = &m[&unescape(token)],
                _ => return false,
            }
        }
        true
    }

    /// Every table's batches from flattening `lines` by topic with `cfg`.
    fn tables(lines: &[String], cfg: &FlattenConfig) -> BTreeMap<String, Vec<RecordBatch>> {
        let mut out: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
        for (topic, batch) in &stage_topics(lines) {
            let plan = flatten(topic, batch, &lineage(), cfg).unwrap();
            for (t, b) in plan.tables {
                out.entry(t.to_string()).or_default().push(b);
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn child_ids_are_unique_joinable_and_name_their_element(
            payloads in prop::collection::vec(payload(), 1..=MESSAGE_IDS.len()),
            mapped in any::<bool>(),
            by_topic in any::<bool>(),
        ) {
            let mut cfg = FlattenConfig::default();
            if mapped {
                // Arrays at different paths and depths onto one table (a grandchild
                // table onto its own parent's too).
                for path in ["a", "b", "0", "b.a", "a[].a", "a[].b", "b[].0.a", ""] {
                    cfg.child_tables.insert(path.to_string(), "shared".to_string());
                }
            }
            if by_topic {
                cfg.child_naming = ChildNaming::Topic;
            }
            let mut by_id = HashMap::new();
            let lines: Vec<String> = payloads
                .iter()
                .zip(MESSAGE_IDS)
                .enumerate()
                .map(|(i, (p, id))| {
                    by_id.insert(id.to_string(), p.clone());
                    let (id, p) = (Value::from(id), p.to_string());
                    format!(r#"{{"topic":"{}","message_id":{id},"payload":{p}}}"#, ["t", "u"][i % 2])
                })
                .collect();
            let tables = tables(&lines, &cfg);
            // Deterministic: the same input gives the same rows.
            prop_assert_eq!(&tables, &self::tables(&lines, &cfg));
            let mut all = HashSet::new();
            let mut rows = Vec::new();
            for (name, batches) in &tables {
                if !col_names(&batches[0]).contains(&"_parent_id".to_string()) {
                    continue;
                }
                let mut in_table = HashSet::new();
                for b in batches {
                    let idx = b.column_by_name("_idx").unwrap().as_primitive::<Int64Type>();
                    let cols = ["_id", "_parent_id", "_root_id"].map(|c| strings_of(b, c));
                    for r in 0..b.num_rows() {
                        let [id, parent, root] = cols.each_ref().map(|c| c[r].clone().unwrap());
                        prop_assert!(in_table.insert(id.clone()), "{} repeats {}", name, id);
                        prop_assert!(all.insert(id.clone()), "{} in two tables", id);
                        rows.push((id, parent, root, idx.value(r)));
                    }
                }
            }
            for (id, parent, root, idx) in &rows {
                // `_root_id` is the message; the text up to the first `/` is its id
                // escaped, the rest the element's JSON pointer in its payload.
                let (first, pointer) = id.split_at(id.find('/').unwrap());
                prop_assert_eq!(&unescape(first), root);
                prop_assert_eq!(first, escape(root));
                let payload = &by_id[root];
                let (array, last) = pointer.rsplit_once('/').unwrap();
                prop_assert_eq!(last, idx.to_string());
                let elements = payload.pointer(array).and_then(Value::as_array);
                prop_assert!(elements.is_some_and(|e| e.len() > *idx as usize), "{} in {}", id, payload);
                // `_parent_id` joins: the message id of a first-level row, else a child
                // row's `_id`, a prefix of this one.
                if parent == root {
                    // A first-level row: objects only on the way to its array.
                    prop_assert!(through_objects(payload, array), "{} is nested", id);
                } else {
                    prop_assert!(all.contains(parent), "{} has no parent {}", id, parent);
                    prop_assert!(id.starts_with(&format!("{parent}/")), "{} under {}", id, parent);
                }
                let escaped = format!("{}/", escape(root));
                prop_assert!(id.starts_with(&escaped), "{} for {}", id, root);
            }
        }
    }
}

#[test]
fn compact_lineage_turns_back_into_the_same_batches() {
    // Two files, one under a folder with a landing path and one without (null).
    let stage = |name: &str, lines: &[&str]| {
        let text = lines.join("\n");
        stage_file_bytes(text.as_bytes(), name, &EnvelopeConfig::default())
    };
    let file = |name: &str| crate::source::discover::SourceFile {
        path: name.into(),
        name: name.into(),
        bytes: 0,
        compression: crate::source::discover::Compression::None,
        folder: 0,
        modified: None,
        etag: None,
    };
    let a = [
        r#"{"topic":"t","message_id":"1","payload":{"x":1,"tags":["é","ü"],"lots":[{"q":1,"legs":[{"p":1},{"p":2}]},{"q":2}]}}"#,
        r#"{"topic":"u","message_id":"2","payload":{"tags":["ß"]}}"#,
    ];
    let b = [r#"{"topic":"t","message_id":"3","payload":{"x":2,"tags":["中"]}}"#];
    let staged = vec![stage("in/a.jsonl", &a), stage("other/b.jsonl", &b)];
    let files = [file("in/a.jsonl"), file("other/b.jsonl")];
    let topics = crate::stage::assemble(&files, staged, true, &mut Default::default()).topics;
    let mut lineage = lineage();
    // Two folders: a file under neither gets a null `_landing_path`.
    lineage.landing = vec![
        ("in/".into(), "abfss://landing/in".into()),
        ("more/".into(), "abfss://landing/more".into()),
    ];
    let mut compared = 0;
    for (topic, batches) in &topics {
        let cfg = FlattenConfig::default();
        let plain_plan = flatten(topic, batches, &lineage, &cfg).unwrap();
        let compact_plan = flatten_compact(topic, batches, &lineage, &cfg).unwrap();
        assert_eq!(
            plain_plan.tables.keys().collect::<Vec<_>>(),
            compact_plan.tables.keys().collect::<Vec<_>>()
        );
        for ((table, expected), (_, compact)) in plain_plan.tables.iter().zip(compact_plan.tables)
        {
            let dictionaries = compact
                .schema()
                .fields()
                .iter()
                .filter(|f| matches!(f.data_type(), DataType::Dictionary(..)))
                .map(|f| f.name().clone())
                .collect::<Vec<_>>();
            let mut lineage = ["_batch_id", "_landing_path", "_topic", "_source_file"].to_vec();
            if table.as_str() != *topic {
                lineage.splice(0..0, ["_parent_id", "_root_id"]);
            }
            assert_eq!(dictionaries, lineage, "{table}");
            assert_eq!(&plain(compact).unwrap(), expected, "{table}");
            compared += 1;
        }
    }
    // t, u, the child table `tags` from both topics, `lots` and `lots__legs` (derived
    // parent ids) from t.
    assert_eq!(compared, 6);
    let landing = |table: &str| {
        let plan = flatten("t", &topics["t"], &lineage, &FlattenConfig::default()).unwrap();
        let b = &plan.tables[&TableName::for_topic(table)];
        let c = b.column_by_name("_landing_path").unwrap().as_string::<i32>();
        (0..c.len()).map(|i| c.is_valid(i).then(|| c.value(i).to_string())).collect::<Vec<_>>()
    };
    assert_eq!(
        landing("t"),
        [Some("abfss://landing/in".to_string()), None]
    );
}

/// Flattens `lines` of topic `t` with `cfg`: its tables by name.
fn run_with(lines: &[&str], cfg: &FlattenConfig) -> BTreeMap<String, RecordBatch> {
    let staged = stage_topics(lines);
    let plan = flatten("t", &staged["t"], &lineage(), cfg).unwrap();
    plan.tables
        .into_iter()
        .map(|(t, b)| (t.to_string(), b))
        .collect()
}

fn hinted(hints: &[(&str, &str)]) -> FlattenConfig {
    let mut cfg = FlattenConfig::default();
    for (pointer, ty) in hints {
        cfg.column_types
            .insert(pointer.to_string(), ty.parse().unwrap());
    }
    cfg
}

/// Three messages of topic `t` flattened with a hint of every type (and one through an
/// array's elements): the first converts, the others do not.
fn every_type_hinted() -> BTreeMap<String, RecordBatch> {
    let cfg = hinted(&[
        ("/amount", "decimal(18,2)"),
        ("/at/ts", "timestamp"),
        ("/day", "date"),
        ("/n", "int64"),
        ("/ok", "boolean"),
        ("/raw", "json"),
        ("/code", "string"),
        ("/items/*/at", "timestamp"),
    ]);
    run_with(
        &[
            r#"{"topic":"t","message_id":"1","payload":{"amount":12.5,"at":{"ts":"2026-01-15T12:00:00+02:00"},"day":"2026-01-15","n":7,"ok":true,"raw":"x","code":42,"items":[{"at":"2026-01-15T10:00:00Z"},{"at":"soon"}]}}"#,
            r#"{"topic":"t","message_id":"2","payload":{"amount":"1e999","at":{"ts":"n/a"},"day":"2026-02-30","n":1.5,"ok":"yes","raw":{"a":1},"code":"A"}}"#,
            r#"{"topic":"t","message_id":"3","payload":{"amount":1.255,"at":{"ts":"2026-01-15T10:00:00.1234567890123Z"}}}"#,
        ],
        &cfg,
    )
}

#[test]
fn hinted_columns_take_their_type() {
    let t = every_type_hinted();
    let b = &t["t"];
    let field = |name: &str| b.schema().field_with_name(name).unwrap().clone();
    assert_eq!(field("amount").data_type(), &DataType::Decimal128(18, 2));
    assert_eq!(field("at__ts").data_type(), &timestamp_type());
    assert_eq!(field("day").data_type(), &DataType::Date32);
    assert_eq!(field("n").data_type(), &DataType::Int64);
    assert_eq!(field("ok").data_type(), &DataType::Boolean);
    assert_eq!(field("raw").metadata().get(JSON_META).map(String::as_str), Some("true"));
    assert_eq!(field("at__ts").metadata().get(HINT_META).map(String::as_str), Some("/at/ts"));
    let amount = b.column_by_name("amount").unwrap();
    let amount = amount.as_primitive::<arrow::datatypes::Decimal128Type>();
    assert_eq!(amount.iter().collect::<Vec<_>>(), [Some(1250), None, None]);
    let ts = b.column_by_name("at__ts").unwrap();
    let ts = ts.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(ts.iter().collect::<Vec<_>>(), [Some(1_768_471_200_000_000), None, None]);
    let day = b.column_by_name("day").unwrap();
    let day = day.as_primitive::<arrow::datatypes::Date32Type>();
    assert_eq!(day.iter().collect::<Vec<_>>(), [Some(20_468), None, None]);
    assert_eq!(strings_of(b, "raw"), [Some("\"x\"".into()), Some(r#"{"a":1}"#.into()), None]);
    assert_eq!(strings_of(b, "code"), [Some("42".into()), Some("A".into()), None]);
}

#[test]
fn values_a_hint_does_not_convert_are_rescued_and_counted() {
    let t = every_type_hinted();
    let b = &t["t"];
    assert_eq!(
        strings_of(b, RESCUED),
        [
            None,
            Some(r#"{"/amount":"1e999","/at/ts":"n/a","/day":"2026-02-30","/n":1.5,"/ok":"yes"}"#.into()),
            Some(r#"{"/amount":1.255,"/at/ts":"2026-01-15T10:00:00.1234567890123Z"}"#.into()),
        ]
    );
    assert_eq!(b.schema().metadata().get(RESCUED_META).map(String::as_str), Some("7"));
    // A pointer through an array's elements types the child table's column.
    let items = &t["items"];
    let at = items.column_by_name("at").unwrap();
    let at = at.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(at.iter().collect::<Vec<_>>(), [Some(1_768_471_200_000_000), None]);
    assert_eq!(strings_of(items, RESCUED), [None, Some(r#"{"/at":"soon"}"#.into())]);
    // Fitted to a new table: the marks are gone, the count is the table's.
    let table = TableName::for_topic("t");
    let c = fit::to_table(&table, b.clone(), None, crate::config::Evolution::Add).unwrap();
    assert_eq!(c.rescued, 7);
    assert!(c.batch.schema().metadata().is_empty());
    assert!(
        c.batch
            .schema()
            .fields()
            .iter()
            .all(|f| !f.metadata().contains_key(HINT_META))
    );
}

#[test]
fn the_smallest_int64_is_an_int64_and_rescued_from_a_float64() {
    let min = "-9223372036854775808";
    let t = run_with(
        &[
            &format!(r#"{{"topic":"t","message_id":"1","payload":{{"i":{min},"f":{min},"x":{min}}}}}"#),
            r#"{"topic":"t","message_id":"2","payload":{"i":1,"f":-9007199254740992,"x":0.5}}"#,
        ],
        &hinted(&[("/i", "int64"), ("/f", "float64")]),
    );
    let b = &t["t"];
    let i = b.column_by_name("i").unwrap().as_primitive::<Int64Type>();
    assert_eq!(i.iter().collect::<Vec<_>>(), [Some(i64::MIN), Some(1)]);
    let f = b.column_by_name("f").unwrap().as_primitive::<Float64Type>();
    assert_eq!(f.iter().collect::<Vec<_>>(), [None, Some(-9_007_199_254_740_992.0)]);
    assert_eq!(strings_of(b, RESCUED)[0], Some(format!(r#"{{"/f":{min}}}"#)));
    // Unhinted, next to a float: a JSON-text column keeps its literal.
    assert_eq!(strings_of(b, "x")[0].as_deref(), Some(min));
}

#[test]
fn a_topics_own_hint_wins_over_every_topics() {
    let mut cfg = hinted(&[("/v", "string")]);
    cfg.topic_column_types
        .entry("t".into())
        .or_default()
        .insert("/v".into(), ColumnType::Int64);
    let t = run_with(&[r#"{"topic":"t","message_id":"1","payload":{"v":3}}"#], &cfg);
    assert_eq!(t["t"].column_by_name("v").unwrap().data_type(), &DataType::Int64);
    assert_eq!(cfg.column_type("other", "/v"), Some(ColumnType::String));
}

#[test]
fn detection_types_string_columns_whose_every_value_parses() {
    let cfg = FlattenConfig {
        detect_types: vec![DetectType::Timestamp, DetectType::Date],
        ..FlattenConfig::default()
    };
    let lines = [
        r#"{"topic":"t","message_id":"1","payload":{"ts":"2026-01-15T12:00:00+02:00","d":"2026-01-15","s":"2026-01-15","meta":{"at":"2026-01-15T10:00:00Z"}}}"#,
        r#"{"topic":"t","message_id":"2","payload":{"ts":"2026-01-16T00:00:00Z","d":"2026-01-16","s":"tomorrow"}}"#,
    ];
    let t = run_with(&lines, &cfg);
    let table = TableName::for_topic("t");
    let fitted = |target: Option<&Schema>| {
        fit::to_table(&table, t["t"].clone(), target, crate::config::Evolution::Add)
            .unwrap()
            .batch
    };
    let new = fitted(None);
    let ty = |b: &RecordBatch, c: &str| b.schema().field_with_name(c).unwrap().data_type().clone();
    assert_eq!(ty(&new, "ts"), timestamp_type());
    assert_eq!(ty(&new, "meta__at"), timestamp_type());
    assert_eq!(ty(&new, "d"), DataType::Date32);
    assert_eq!(ty(&new, "s"), DataType::Utf8);
    let ts = new.column_by_name("ts").unwrap();
    let ts = ts.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(ts.value(0), 1_768_471_200_000_000);
    // A table that has the columns as strings keeps them, and every text as it was.
    let strings = run_with(&lines, &FlattenConfig::default());
    let existing = strings["t"].schema();
    let kept = fitted(Some(&existing));
    assert_eq!(ty(&kept, "ts"), DataType::Utf8);
    assert_eq!(
        strings_of(&kept, "ts"),
        [Some("2026-01-15T12:00:00+02:00".into()), Some("2026-01-16T00:00:00Z".into())]
    );
    // Without detection a later batch's strings are fitted to the detected types; a
    // value that does not parse is rescued.
    let later = run_with(
        &[r#"{"topic":"t","message_id":"3","payload":{"ts":"n/a","d":"2026-01-17"}}"#],
        &FlattenConfig::default(),
    );
    let c = fit::to_table(&table, later["t"].clone(), Some(&new.schema()), crate::config::Evolution::Add)
        .unwrap();
    assert_eq!(ty(&c.batch, "ts"), timestamp_type());
    assert_eq!(strings_of(&c.batch, RESCUED), [Some(r#"{"/ts":"n/a"}"#.into())]);
    assert_eq!(c.rescued, 1);
    let d = c.batch.column_by_name("d").unwrap();
    assert_eq!(d.as_primitive::<arrow::datatypes::Date32Type>().value(0), 20_470);
}

#[test]
fn a_hint_contradicting_an_existing_column_names_the_column_and_both_types() {
    let plain = run_with(
        &[r#"{"topic":"t","message_id":"1","payload":{"at":{"ts":"2026-01-15T10:00:00Z"}}}"#],
        &FlattenConfig::default(),
    );
    let existing = plain["t"].schema();
    let typed = run_with(
        &[r#"{"topic":"t","message_id":"2","payload":{"at":{"ts":"2026-01-15T10:00:00Z"}}}"#],
        &hinted(&[("/at/ts", "timestamp")]),
    );
    let table = TableName::for_topic("t");
    let err = fit::to_table(&table, typed["t"].clone(), Some(&existing), crate::config::Evolution::Add)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "table `t` has column `at__ts` (/at/ts) as string, but the hint `/at/ts` says timestamp: a hint types new columns only; retype the column as the README's \"Types\" says, or drop the hint"
    );
    // The same hint against a table that has the type fits.
    let new = fit::to_table(&table, typed["t"].clone(), None, crate::config::Evolution::Add).unwrap();
    let again = fit::to_table(&table, typed["t"].clone(), Some(&new.batch.schema()), crate::config::Evolution::Add);
    assert!(again.is_ok());
}

#[test]
fn a_new_hinted_column_rescued_by_the_evolution_mode_keeps_each_value_as_written() {
    let mut cfg = hinted(&[
        ("/amount", "decimal(18,2)"),
        ("/ts", "timestamp"),
        ("/code", "string"),
        ("/raw", "json"),
    ]);
    cfg.evolution = crate::config::Evolution::Rescue;
    let lines = [
        r#"{"topic":"t","message_id":"1","payload":{"id":1,"amount":12.50,"ts":"2026-01-15T12:00:00+02:00","code":42,"raw":{"a":1}}}"#,
        r#"{"topic":"t","message_id":"2","payload":{"id":2,"amount":"n/a","ts":"soon","code":"A"}}"#,
    ];
    let t = run_with(&lines, &cfg);
    let existing = run_with(
        &[r#"{"topic":"t","message_id":"0","payload":{"id":0}}"#],
        &FlattenConfig::default(),
    );
    let table = TableName::for_topic("t");
    let evolution = crate::config::Evolution::Rescue;
    let c = fit::to_table(&table, t["t"].clone(), Some(&existing["t"].schema()), evolution)
        .unwrap();
    assert_eq!(
        strings_of(&c.batch, RESCUED),
        [
            Some(r#"{"/amount":12.50,"/code":42,"/raw":{"a":1},"/ts":"2026-01-15T12:00:00+02:00"}"#.into()),
            Some(r#"{"/amount":"n/a","/code":"A","/ts":"soon"}"#.into()),
        ]
    );
    assert_eq!(c.rescued, 7);
    let names = col_names(&c.batch);
    assert!(names.iter().all(|n| !n.starts_with(SOURCE_META)), "{names:?}");
    // A new table, or one with the columns, takes the typed values; the text is dropped.
    for target in [None, Some(fit::to_table(&table, t["t"].clone(), None, evolution).unwrap())] {
        let schema = target.map(|c| c.batch.schema());
        let c = fit::to_table(&table, t["t"].clone(), schema.as_deref(), evolution).unwrap();
        let names = col_names(&c.batch);
        assert!(names.contains(&"amount".to_string()), "{names:?}");
        assert!(names.iter().all(|n| !n.starts_with(SOURCE_META)), "{names:?}");
        assert_eq!(c.rescued, 2);
    }
}

#[test]
fn a_json_hint_on_an_arrays_elements_keeps_each_whole_in_value() {
    let cfg = hinted(&[("/legs/*", "json"), ("/tags/*", "json")]);
    let t = run_with(
        &[
            r#"{"topic":"t","message_id":"1","payload":{"legs":[{"px":1,"q":{"a":2}},{"px":2}],"tags":["a",{"b":1},3]}}"#,
        ],
        &cfg,
    );
    let legs = &t["legs"];
    assert!(legs.column_by_name("px").is_none());
    assert_eq!(
        strings_of(legs, "value"),
        [Some(r#"{"px":1,"q":{"a":2}}"#.into()), Some(r#"{"px":2}"#.into())]
    );
    let field = legs.schema().field_with_name("value").unwrap().clone();
    assert_eq!(field.metadata().get(JSON_META).map(String::as_str), Some("true"));
    assert_eq!(field.metadata().get(HINT_META).map(String::as_str), Some("/legs/*"));
    assert_eq!(
        strings_of(&t["tags"], "value"),
        [Some(r#""a""#.into()), Some(r#"{"b":1}"#.into()), Some("3".into())]
    );
}

#[test]
fn a_hint_through_any_array_feeding_a_shared_child_table_types_its_column() {
    let mut cfg = hinted(&[("/b/legs/*/ts", "timestamp")]);
    cfg.child_tables.insert("a.legs".into(), "legs".into());
    cfg.child_tables.insert("b.legs".into(), "legs".into());
    let a = r#""a":{"legs":[{"ts":"2026-01-15T10:00:00Z"}]}"#;
    let b = r#""b":{"legs":[{"ts":"2026-01-15T11:00:00Z"}]}"#;
    for payload in [format!("{a},{b}"), format!("{b},{a}")] {
        let line = format!(r#"{{"topic":"t","message_id":"1","payload":{{{payload}}}}}"#);
        let t = run_with(&[&line], &cfg);
        let legs = &t["legs"];
        let ts = legs.schema().field_with_name("ts").unwrap().clone();
        assert_eq!(ts.data_type(), &timestamp_type(), "{payload}");
        assert_eq!(ts.metadata().get(HINT_META).map(String::as_str), Some("/b/legs/*/ts"));
        assert_eq!(legs.column_by_name("ts").unwrap().null_count(), 0, "{payload}");
    }
}

#[test]
fn a_decimal_type_no_hint_could_name_is_no_hint_to_the_flattener() {
    let mut cfg = FlattenConfig::default();
    for (pointer, ty) in [("/a", ColumnType::Decimal(40, 2)), ("/b", ColumnType::Decimal(5, -1))] {
        cfg.column_types.insert(pointer.into(), ty);
    }
    let t = run_with(&[r#"{"topic":"t","message_id":"1","payload":{"a":1.5,"b":2}}"#], &cfg);
    let b = &t["t"];
    assert_eq!(b.column_by_name("a").unwrap().data_type(), &DataType::Float64);
    assert_eq!(b.column_by_name("b").unwrap().data_type(), &DataType::Int64);
}

#[test]
fn repeated_keys_leave_the_column_order_of_first_values() {
    let t = run(&[
        r#"{"topic":"d","message_id":"1","payload":{"a":{"x":1},"b":2,"a":{"y":3},"c":{"k":1,"k":2}}}"#,
        r#"{"topic":"d","message_id":"2","payload":{"c":{"k":3},"a":{"x":4},"b":5}}"#,
    ]);
    let b = &t["d"][0];
    let schema = b.schema();
    let data: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|f| f.metadata().contains_key(PATH_META))
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(data, ["b", "a__y", "c__k", "a__x"]);
    let k = b.column_by_name("c__k").unwrap().as_primitive::<Int64Type>();
    assert_eq!(k.iter().collect::<Vec<_>>(), [Some(2), Some(3)]);
    assert_eq!(
        strings_of(b, RESCUED),
        [Some(r#"{"dup:/a":[{"x":1}],"dup:/c/k":[1]}"#.into()), None]
    );
}
