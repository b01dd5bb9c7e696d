//! Staging whole files: envelopes read exactly, corrupt lines kept, groups of files
//! assembled in order.

use std::collections::BTreeMap;

use super::*;

/// A staged message's text, read back through its spans.
#[derive(Debug)]
struct Owned {
    topic: String,
    id: Option<String>,
    meta: Option<String>,
    payload: String,
}

fn one(line: &str) -> Result<Owned, String> {
    one_with(line, &EnvelopeConfig::default())
}

fn one_with(line: &str, env: &EnvelopeConfig) -> Result<Owned, String> {
    let s = stage_file_bytes(line.as_bytes(), "f", env);
    if let Some(c) = s.corrupt.first() {
        return Err(c.reason.clone());
    }
    let m = &s.messages[0];
    Ok(Owned {
        topic: s.topic(m).to_string(),
        id: m.id.map(|v| s.text(v).into_owned()),
        meta: m.meta.map(|v| s.text(v).into_owned()),
        payload: s.text(m.payload).into_owned(),
    })
}

#[test]
fn envelope_fields_are_extracted_exactly() {
    let m = one(r#"{"topic":"quote","message_id":"m1","src":"x","ts":1.50,"payload":{"a":123456789012345678901234567890,"b":[1,2]}}"#)
        .unwrap();
    assert_eq!(m.topic, "quote");
    assert_eq!(m.id.as_deref(), Some("m1"));
    assert_eq!(m.meta.as_deref(), Some(r#"{"src":"x","ts":1.50}"#));
    assert_eq!(
        m.payload,
        r#"{"a":123456789012345678901234567890,"b":[1,2]}"#
    );
}

#[test]
fn configurable_fields_and_absent_payload() {
    let env = EnvelopeConfig {
        topic_field: "type".into(),
        id_field: None,
        payload_field: Some("payload".into()),
        dedup_fields: None,
        ..EnvelopeConfig::default()
    };
    let m = one_with(r#"{"type":"t","x":{"y":"}"},"z":null}"#, &env).unwrap();
    assert_eq!(m.topic, "t");
    assert_eq!(m.id, None);
    assert_eq!(m.meta, None);
    assert_eq!(m.payload, r#"{"x":{"y":"}"},"z":null}"#);
}

#[test]
fn escaped_keys_and_integer_ids() {
    let m = one(r#"{"top\u0069c":"a\"b","message_id":42,"payload":{}}"#).unwrap();
    assert_eq!(m.topic, "a\"b");
    assert_eq!(m.id.as_deref(), Some("42"));
}

#[test]
fn groups_of_files_keep_file_order_and_the_first_duplicate() {
    use arrow::array::{AsArray as _, Int64Array};
    // 48 files of ~40 KB: more than the smallest group (1 MiB), so every topic comes
    // in several batches, and duplicates span groups.
    let env = EnvelopeConfig::default();
    let pad = "x".repeat(900);
    let (mut files, mut staged) = (Vec::new(), Vec::new());
    let mut want: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    let mut ids = std::collections::HashSet::new();
    let mut dups = 0;
    for f in 0..48usize {
        let name = format!("part-{f:03}.jsonl");
        let mut text = String::new();
        for l in 0..40usize {
            let topic = ["a", "b", "c"][(f + l) % 3];
            // Every 7th line repeats an id first seen in the first file.
            let id = if l % 7 == 0 {
                format!("dup-{l}")
            } else {
                format!("{f}-{l}")
            };
            text.push_str(&format!(
                r#"{{"topic":"{topic}","message_id":"{id}","payload":{{"pad":"{pad}","l":{l}}}}}"#
            ));
            text.push('\n');
            if ids.insert(id) {
                want.entry(topic.into())
                    .or_default()
                    .push((name.clone(), l as i64 + 1));
            } else {
                dups += 1;
            }
        }
        staged.push(stage_file_bytes(text.as_bytes(), &name, &env));
        files.push(SourceFile {
            path: name.clone().into(),
            name,
            bytes: 0,
            compression: crate::source::discover::Compression::None,
            folder: 0,
            modified: None,
            etag: None,
        });
    }
    let staging = assemble(&files, staged, true, &mut IdSet::default());
    assert_eq!(staging.duplicates, dups);
    assert!(
        staging.topics.values().all(|b| b.len() > 1),
        "several groups"
    );
    for (topic, want) in want {
        let got: Vec<(String, i64)> = staging.topics[&topic]
            .iter()
            .flat_map(|b| {
                let files = b.column(2).as_string::<i32>().clone();
                let lines = b
                    .column(3)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                (0..b.num_rows()).map(move |r| (files.value(r).to_string(), lines.value(r)))
            })
            .collect();
        assert_eq!(got, want, "topic {topic}");
    }
}

#[test]
fn corrupt_reasons() {
    let cases = [
        ("{not json", "invalid JSON"),
        ("[1,2]", "not a JSON object"),
        ("\"s\"", "not a JSON object"),
        (r#"{"message_id":"1","payload":{}}"#, "missing topic"),
        (
            r#"{"topic":null,"message_id":"1"}"#,
            "not a non-empty string",
        ),
        (r#"{"topic":"","message_id":"1"}"#, "not a non-empty string"),
        (r#"{"topic":"a","payload":{}}"#, "missing id"),
        (
            r#"{"topic":"a","message_id":{"x":1}}"#,
            "not a non-empty string or an integer",
        ),
        (
            r#"{"topic":"a","message_id":1.5}"#,
            "not a non-empty string or an integer",
        ),
    ];
    for (line, want) in cases {
        let err = one(line).unwrap_err();
        assert!(err.contains(want), "{line}: {err}");
    }
}

#[test]
fn corrupt_lines_keep_exact_bytes_and_line_numbers() {
    let bytes = b"{\"topic\":\"a\",\"message_id\":\"1\",\"payload\":{}}\n\n\xff\xfe bad\r\n{\"topic\":\"a\",\"message_id\":\"1\",\"payload\":{}}";
    let s = stage_file_bytes(bytes, "f", &EnvelopeConfig::default());
    assert_eq!((s.lines, s.blank_lines, s.messages.len()), (3, 1, 2));
    assert_eq!(s.corrupt.len(), 1);
    assert_eq!(s.corrupt[0].line, 3);
    assert_eq!(s.corrupt[0].raw, b"\xff\xfe bad\r");
}

#[test]
fn top_level_members_keep_their_exact_text_past_nested_strings_and_brackets() {
    let m = one(
        r#" { "topic" : "a", "message_id":"1", "k" : "x}]\"" , "payload":[{"c":"]"}], "d":-1.5e3 } "#,
    )
    .unwrap();
    assert_eq!(m.payload, r#"[{"c":"]"}]"#);
    assert_eq!(m.meta.as_deref(), Some(r#"{"k":"x}]\"","d":-1.5e3}"#));
    // Anything the strict reader refuses is corrupt, whatever the envelope holds.
    for bad in [
        r#"{"topic":"a","message_id":"1","payload":{"x":1e}}"#,
        r#"{"topic":"a","message_id":"1","payload":"\ud800"}"#,
        r#"{"topic":"a","message_id":"1","payload":{}} trailing"#,
        r#"{"topic":"a","message_id":"1","payload":{},}"#,
    ] {
        assert!(one(bad).unwrap_err().contains("invalid JSON"), "{bad}");
    }
}
