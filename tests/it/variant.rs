//! VARIANT columns: a part of the payload hinted `variant` kept whole as Delta's
//! `variant` type (table feature `variantType`), value for value.

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use parquet_variant::Variant;

use crate::util::*;

fn write_batch(root: &Path, id: &str, lines: &[&str]) -> PathBuf {
    let dir = root.join(format!("batch_id={id}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part-0.jsonl"), lines.join("\n")).unwrap();
    dir
}

fn run(lake: &TempLake, dir: &Path, toml: &str) -> bronze::BatchReport {
    let flatten = bronze::Settings::from_toml(toml)
        .unwrap()
        .resolve()
        .unwrap()
        .flatten;
    lake.ingest()
        .with_flatten(flatten)
        .build()
        .unwrap()
        .run(dir)
        .unwrap()
}

/// A `doc` value's Variant encoding, as read back.
struct Encoding {
    metadata: Vec<u8>,
    value: Vec<u8>,
}

impl Encoding {
    fn variant(&self) -> Variant<'_, '_> {
        Variant::try_new(&self.metadata, &self.value).expect("a valid Variant")
    }
}

/// Each row's `doc` column (a struct of the encoding's two binaries); `None` when null.
fn docs(rows: &Rows) -> Vec<Option<Encoding>> {
    variants(rows, "doc")
}

/// Each row's value of the variant column `column`; `None` when null.
fn variants(rows: &Rows, column: &str) -> Vec<Option<Encoding>> {
    let batch = rows.batch();
    let doc = batch.column_by_name(column).unwrap().as_struct();
    let (metadata, value) = (
        doc.column(0).as_binary::<i32>(),
        doc.column(1).as_binary::<i32>(),
    );
    (0..doc.len())
        .map(|row| {
            doc.is_valid(row).then(|| Encoding {
                metadata: metadata.value(row).to_vec(),
                value: value.value(row).to_vec(),
            })
        })
        .collect()
}

#[test]
fn a_payload_part_hinted_variant_is_one_variant_column_of_a_variant_table() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let dir = write_batch(
        landing.path(),
        "v1",
        &[
            r#"{"topic":"ev","message_id":"1","payload":{"sym":"A","doc":{"px":1.10,"Px":null,"legs":[1,2,{"k":"é"}],"big":1e400}}}"#,
            r#"{"topic":"ev","message_id":"2","payload":{"sym":"B","doc":"just text"}}"#,
            r#"{"topic":"ev","message_id":"3","payload":{"sym":"C"}}"#,
        ],
    );
    let report = run(
        &lake,
        &dir,
        "[topics.ev.column_types]\n\"/doc\" = \"variant\"\n",
    );
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    // The table's protocol has the feature; no child table for `doc/legs`.
    let features = lake.with_table("ev", None, async |t| {
        let snapshot = t.snapshot().unwrap();
        let p = snapshot.protocol();
        (
            p.min_reader_version(),
            p.min_writer_version(),
            format!("{:?} {:?}", p.reader_features(), p.writer_features()),
        )
    });
    assert_eq!((features.0, features.1), (3, 7), "{}", features.2);
    // Writer 2's own features listed beside it (Spark refuses a table without them).
    assert_eq!(
        features.2,
        "Some([VariantType]) Some([AppendOnly, Invariants, VariantType])"
    );
    assert_eq!(
        lake.tables(),
        ["ev"],
        "no child table for the variant's arrays"
    );
    let rows = lake.rows("ev").sorted_by("_id");
    let docs = docs(&rows);
    let variant = |row: usize| docs[row].as_ref().expect("a value").variant();
    let first = variant(0);
    let object = first.as_object().unwrap();
    assert_eq!(
        object.get("px"),
        Some(Variant::from(
            parquet_variant::VariantDecimal4::try_new(110, 2).unwrap()
        ))
    );
    assert_eq!(
        object.get("Px"),
        Some(Variant::Null),
        "key case and nulls kept"
    );
    assert_eq!(object.get("big"), Some(Variant::Null), "rescued");
    let legs = object.get("legs").unwrap();
    let legs = legs.as_list().unwrap();
    assert_eq!(legs.get(0), Some(Variant::Int8(1)));
    assert_eq!(
        legs.get(2).unwrap().as_object().unwrap().get("k"),
        Some(Variant::from("é"))
    );
    assert_eq!(variant(1), Variant::from("just text"));
    assert!(docs[2].is_none(), "no value: a null row");
    assert_eq!(
        rows.texts("_rescued_data"),
        [Some(r#"{"/doc/big":1e400}"#.into()), None, None]
    );
}

#[test]
fn later_batches_and_reruns_of_a_variant_table_keep_their_values() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let hint = "[topics.ev.column_types]\n\"/doc\" = \"variant\"\n";
    let one = write_batch(
        landing.path(),
        "v1",
        &[r#"{"topic":"ev","message_id":"1","payload":{"doc":{"a":1}}}"#],
    );
    let two = write_batch(
        landing.path(),
        "v2",
        &[r#"{"topic":"ev","message_id":"2","payload":{"doc":[true,"x"],"new":5}}"#],
    );
    for dir in [&one, &two, &one] {
        let report = run(&lake, dir, hint);
        assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    }
    let rows = lake.rows("ev").sorted_by("_id");
    assert_eq!(rows.len(), 2, "the rerun replaced its batch's row");
    let docs = docs(&rows);
    let variant = |row: usize| docs[row].as_ref().expect("a value").variant();
    assert_eq!(
        variant(0).as_object().unwrap().get("a"),
        Some(Variant::Int8(1))
    );
    let list = variant(1);
    let list = list.as_list().unwrap();
    assert_eq!(list.get(0), Some(Variant::BooleanTrue));
    assert_eq!(list.get(1), Some(Variant::from("x")));
    assert_eq!(rows.texts("new"), [None, Some("5".into())]);
}

#[test]
fn a_variant_column_is_never_added_to_a_table_without_the_feature() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let one = write_batch(
        landing.path(),
        "f1",
        &[r#"{"topic":"ev","message_id":"1","payload":{"doc":{"a":1}}}"#],
    );
    let report = run(&lake, &one, "");
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    let protocol = || {
        lake.with_table("ev", None, async |t| {
            let s = t.snapshot().unwrap();
            format!("{:?}", s.protocol())
        })
    };
    let before = protocol();
    let two = write_batch(
        landing.path(),
        "f2",
        &[r#"{"topic":"ev","message_id":"2","payload":{"doc":{"a":2}}}"#],
    );
    let report = run(
        &lake,
        &two,
        "[topics.ev.column_types]\n\"/doc\" = \"variant\"\n",
    );
    assert_eq!(report.exit_code(), 2, "{}", report.to_text());
    let error = report.tables["ev"].error.clone().unwrap();
    assert!(error.contains("variant"), "{error}");
    assert!(error.contains("delta.feature.variantType"), "{error}");
    assert_eq!(protocol(), before, "no silent upgrade");
    assert_eq!(lake.count("ev"), 1);
}

/// README's "Semi-structured payloads as VARIANT" commands, run as written: `doc` is one
/// variant column holding each value whole.
#[test]
fn readme_variant_commands_run_as_written() {
    let (dir, _) = run_sh(&doc_sh_block("### Semi-structured payloads as VARIANT"));
    let lake = TempLake::at(dir.path().join("lakehouse"), "bronze");
    assert_eq!(lake.tables(), ["ev"]);
    let rows = lake.rows("ev").sorted_by("_id");
    let docs = docs(&rows);
    let first = docs[0].as_ref().unwrap().variant();
    let legs = first.as_object().unwrap().get("legs").unwrap();
    let k = legs.as_list().unwrap().get(1).unwrap();
    assert_eq!(k.as_object().unwrap().get("k"), Some(Variant::from("é")));
    assert_eq!(
        docs[1].as_ref().unwrap().variant(),
        Variant::from("just text")
    );
    assert_eq!(rows.values("sym"), ["A", "B"]);
}

#[test]
fn under_rescue_a_variant_column_the_table_lacks_is_rescued_as_its_json_text() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let one = write_batch(
        landing.path(),
        "r1",
        &[r#"{"topic":"ev","message_id":"1","payload":{"sym":"A"}}"#],
    );
    assert_eq!(run(&lake, &one, "").exit_code(), 0);
    let two = write_batch(
        landing.path(),
        "r2",
        &[r#"{"topic":"ev","message_id":"2","payload":{"sym":"B","doc":{"a":[1,1.10]}}}"#],
    );
    let toml =
        "[topics.ev]\nevolution = \"rescue\"\n\n[topics.ev.column_types]\n\"/doc\" = \"variant\"\n";
    let report = run(&lake, &two, toml);
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    assert!(!lake.columns("ev").contains(&"doc".to_string()));
    assert_eq!(
        lake.rows("ev").eq("_id", "2").values("_rescued_data"),
        [r#"{"/doc":{"a":[1,1.10]}}"#]
    );
}

#[test]
fn a_topic_in_variant_payload_mode_is_one_payload_column_and_no_child_tables() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let dir = write_batch(
        landing.path(),
        "p1",
        &[
            r#"{"topic":"ev","message_id":"1","source":"feed","payload":{"Sym":"A","px":1.10,"legs":[{"k":1},{"k":"é"}],"big":1e400}}"#,
            r#"{"topic":"ev","message_id":"2","payload":[1,"two",null]}"#,
            r#"{"topic":"ev","message_id":"3","payload":"just text"}"#,
            r#"{"topic":"q","message_id":"4","payload":{"legs":[{"k":2}]}}"#,
        ],
    );
    let report = run(&lake, &dir, "[topics.ev]\npayload = \"variant\"\n");
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    // `q` is flattened as before: its array is the child table `legs`; `ev` has none.
    assert_eq!(lake.tables(), ["ev", "legs", "q"]);
    assert_eq!(lake.rows("legs").len(), 1, "only q's element");
    let data: Vec<String> = lake
        .columns("ev")
        .into_iter()
        .filter(|c| !c.starts_with('_'))
        .collect();
    assert_eq!(
        data,
        ["payload"],
        "the envelope, the lineage and one payload column"
    );
    assert!(lake.columns("ev").contains(&"_meta__source".to_string()));
    let rows = lake.rows("ev").sorted_by("_id");
    let payloads = variants(&rows, "payload");
    let payload = |row: usize| payloads[row].as_ref().expect("a value").variant();
    let first = payload(0);
    let object = first.as_object().unwrap();
    assert_eq!(object.get("Sym"), Some(Variant::from("A")), "key case kept");
    assert_eq!(
        object.get("px"),
        Some(Variant::from(
            parquet_variant::VariantDecimal4::try_new(110, 2).unwrap()
        ))
    );
    let legs = object.get("legs").unwrap();
    let second = legs.as_list().unwrap().get(1).unwrap();
    assert_eq!(
        second.as_object().unwrap().get("k"),
        Some(Variant::from("é"))
    );
    assert_eq!(object.get("big"), Some(Variant::Null), "rescued");
    let list = payload(1);
    let list = list.as_list().unwrap();
    assert_eq!(
        (list.get(0), list.get(1), list.get(2)),
        (
            Some(Variant::Int8(1)),
            Some(Variant::from("two")),
            Some(Variant::Null)
        )
    );
    assert_eq!(payload(2), Variant::from("just text"));
    assert_eq!(
        rows.texts("_rescued_data"),
        [Some(r#"{"/big":1e400}"#.into()), None, None]
    );
}

/// A topic switched to `payload = "variant"` over its table of flattened columns is
/// refused, table untouched; the steps the error names migrate it.
#[test]
fn a_flattened_topic_switched_to_variant_payload_is_refused_and_migrates_as_the_error_says() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let one = write_batch(
        landing.path(),
        "m1",
        &[r#"{"topic":"ev","message_id":"1","payload":{"a":1,"legs":[{"k":1}]}}"#],
    );
    let two = write_batch(
        landing.path(),
        "m2",
        &[r#"{"topic":"ev","message_id":"2","payload":{"a":2,"b":"x"}}"#],
    );
    let ingest = |dir: &Path, extra: &[&str]| {
        let mut args = vec!["ingest", dir.to_str().unwrap()];
        args.extend(extra);
        on_catalog(&lake, &args)
    };
    let out = ingest(&one, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let table = lake.schema_dir().join("ev");
    let before = std::fs::read_dir(table.join("_delta_log")).unwrap().count();
    let out = ingest(&two, &["--topic-payload", "ev=variant"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let error = said(&out);
    assert!(error.contains("payload mode is `variant`"), "{error}");
    assert!(error.contains("--topic-payload 'ev=variant'"), "{error}");
    assert!(
        error.contains("mv <catalog>/<schema>/ev <catalog>/<schema>/ev_flattened"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(table.join("_delta_log")).unwrap().count(),
        before,
        "nothing committed to the flattened table"
    );
    assert_eq!(lake.count("ev"), 1);
    // The migration as the error words it.
    std::fs::rename(&table, lake.schema_dir().join("ev_flattened")).unwrap();
    for dir in [&one, &two] {
        let out = ingest(dir, &["--topic-payload", "ev=variant"]);
        assert!(out.status.success(), "{}", said(&out));
    }
    assert!(lake.columns("ev_flattened").contains(&"a".to_string()));
    assert_eq!(lake.count("ev_flattened"), 1, "the old table kept aside");
    let rows = lake.rows("ev").sorted_by("_id");
    let payloads = variants(&rows, "payload");
    let a = |row: usize| {
        let v = payloads[row].as_ref().unwrap().variant();
        v.as_object().unwrap().get("a").and_then(|a| a.as_int8())
    };
    assert_eq!((a(0), a(1)), (Some(1), Some(2)));
    assert!(!lake.columns("ev").contains(&"a".to_string()));
    // A later batch whose messages carry no payload at all still fits the table.
    let three = write_batch(
        landing.path(),
        "m3",
        &[
            r#"{"topic":"ev","message_id":"3"}"#,
            r#"{"topic":"ev","message_id":"4","payload":null}"#,
        ],
    );
    let out = ingest(&three, &["--topic-payload", "ev=variant"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(lake.count("ev"), 4);
}

/// Back from `variant` to `flatten` over a table that keeps payloads whole is refused
/// too; and a flattened table whose payload has a field `payload` hinted `variant` is
/// not taken for a table of whole payloads.
#[test]
fn a_payload_mode_other_than_its_table_s_is_refused_in_both_directions() {
    let landing = tempfile::tempdir().unwrap();
    let line = r#"{"topic":"ev","message_id":"1","payload":{"payload":{"a":1},"b":2}}"#;
    let dir = write_batch(landing.path(), "d1", &[line]);
    let cases: [(&[&str], &[&str], &str); 2] = [
        (
            &["--topic-payload", "ev=variant"],
            &[],
            "--topic-payload 'ev=flatten'",
        ),
        (
            &["--column-type", "ev:/payload=variant"],
            &["--topic-payload", "ev=variant"],
            "--topic-payload 'ev=variant'",
        ),
    ];
    for (first, then, says) in cases {
        let lake = TempLake::new();
        let ingest = |extra: &[&str]| {
            let mut args = vec!["ingest", dir.to_str().unwrap()];
            args.extend(extra);
            on_catalog(&lake, &args)
        };
        let out = ingest(first);
        assert!(out.status.success(), "{}", said(&out));
        let columns = lake.columns("ev");
        let out = ingest(then);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{first:?} then {then:?}: {}",
            said(&out)
        );
        assert!(said(&out).contains(says), "{}", said(&out));
        assert_eq!(lake.columns("ev"), columns, "the table as it was");
        assert_eq!(lake.count("ev"), 1);
    }
}

#[test]
fn a_hint_on_a_topic_whose_payload_is_kept_whole_is_refused() {
    let err = bronze::Settings::from_toml(
        "[topics.ev]\npayload = \"variant\"\n\n[topics.ev.column_types]\n\"/ts\" = \"timestamp\"\n",
    )
    .unwrap()
    .resolve()
    .expect_err("refused")
    .to_string();
    assert!(err.contains("`ev:/ts=timestamp`"), "{err}");
    assert!(err.contains("payload mode `variant`"), "{err}");
}
