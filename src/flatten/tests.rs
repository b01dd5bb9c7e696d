use std::collections::BTreeMap;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use super::*;
use crate::config::EnvelopeConfig;
use crate::stage::stage_file_bytes;

fn lineage() -> Lineage {
    Lineage {
        batch_id: "b1".into(),
        loaded_at_micros: 1_700_000_000_000_000,
    }
}

/// Stages the lines and flattens every topic; tables of all topics by name.
fn run(lines: &[&str]) -> BTreeMap<String, Vec<RecordBatch>> {
    let text = lines.join("\n");
    let staged = stage_file_bytes(text.as_bytes(), "f.jsonl", &EnvelopeConfig::default());
    assert!(staged.corrupt.is_empty(), "{:?}", staged.corrupt);
    let file = crate::discover::SourceFile {
        path: "f.jsonl".into(),
        name: "f.jsonl".into(),
        bytes: 0,
        compression: crate::discover::Compression::None,
    };
    let staging = crate::stage::assemble(&[file], vec![staged], true, &mut Default::default());
    let mut out: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for (topic, batch) in &staging.topics {
        let plan = flatten(topic, batch, &lineage(), 16).unwrap();
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
        ("x", "1"),
        "mixed scalars widen to text"
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
    assert_eq!((s.value(0), s.value(1)), ("1", "x"));
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
