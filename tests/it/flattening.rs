//! Lossless flattening through real Delta tables: schema evolution modes on a rerun,
//! type conflicts across batches, hostile topics and keys, `bronze.toml`.

use std::path::{Path, PathBuf};
use std::process::Command;

use bronze::Evolution;

use crate::util::*;

fn write_batch(root: &Path, id: &str, lines: &[&str]) -> PathBuf {
    let dir = root.join(format!("batch_id={id}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part-0.jsonl"), lines.join("\n")).unwrap();
    dir
}

fn run(lake: &TempLake, dir: &Path, evolution: Evolution) -> bronze::BatchReport {
    lake.ingest()
        .with_evolution(evolution)
        .build()
        .unwrap()
        .run(dir)
        .unwrap()
}

const FIRST: &[&str] = &[
    r#"{"topic":"q","message_id":"1","payload":{"px":1,"sym":"A"}}"#,
    r#"{"topic":"q","message_id":"2","payload":{"px":2,"sym":"B"}}"#,
];
/// The same batch resent with a new field `venue` on one message.
const RESENT: &[&str] = &[
    r#"{"topic":"q","message_id":"1","payload":{"px":1,"sym":"A","venue":"XAMS"}}"#,
    r#"{"topic":"q","message_id":"2","payload":{"px":2,"sym":"B"}}"#,
];

#[test]
fn rerun_with_a_new_field_under_add_adds_the_column_in_the_same_commit() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    run(
        &lake,
        &write_batch(landing.path(), "e1", FIRST),
        Evolution::Add,
    );
    let dir = write_batch(landing.path(), "e1", RESENT);
    let report = run(&lake, &dir, Evolution::Add);
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.tables["q"].added_columns, ["venue"]);
    assert_eq!(lake.rows("q").eq("_id", "1").values("venue"), ["XAMS"]);
    assert_eq!(lake.count("q"), 2, "replaced, not appended");
    assert_eq!(
        lake.rows("_run_control")
            .eq("table", "q")
            .filter(|r| r.get("schema_changes").is_some_and(|c| !c.is_empty()))
            .values("schema_changes"),
        ["added: venue"]
    );
}

#[test]
fn rerun_with_a_new_field_under_rescue_keeps_the_schema_and_the_value() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    run(
        &lake,
        &write_batch(landing.path(), "e2", FIRST),
        Evolution::Add,
    );
    let before = lake.columns("q");
    let report = run(
        &lake,
        &write_batch(landing.path(), "e2", RESENT),
        Evolution::Rescue,
    );
    assert_eq!(report.exit_code(), 0);
    let after = lake.columns("q");
    assert!(!after.contains(&"venue".to_string()), "{after:?}");
    assert_eq!(
        after
            .iter()
            .filter(|c| !before.contains(c))
            .collect::<Vec<_>>(),
        ["_rescued_data"]
    );
    assert_eq!(
        lake.rows("q").eq("_id", "1").values("_rescued_data"),
        [r#"{"/venue":"XAMS"}"#]
    );
    assert_eq!(report.tables["q"].rescued_values, 1);
}

#[test]
fn rerun_with_a_new_field_under_fail_fails_the_topic_and_keeps_old_rows() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    run(
        &lake,
        &write_batch(landing.path(), "e3", FIRST),
        Evolution::Add,
    );
    let before = lake.dump("q");
    let report = run(
        &lake,
        &write_batch(landing.path(), "e3", RESENT),
        Evolution::Fail,
    );
    assert_eq!(report.exit_code(), 2);
    let err = report.tables["q"].error.clone().unwrap();
    assert!(err.contains("venue (/venue)"), "{err}");
    assert_eq!(lake.dump("q"), before, "the refused write changed nothing");
    // Per topic: another topic in `add` mode evolves in the same run.
    let mixed = write_batch(
        landing.path(),
        "e4",
        &[
            r#"{"topic":"q","message_id":"1","payload":{"px":1,"sym":"A","venue":"XAMS"}}"#,
            r#"{"topic":"r","message_id":"2","payload":{"n":1}}"#,
        ],
    );
    lake.ingest().build().unwrap().run(&mixed).unwrap();
    let mixed2 = write_batch(
        landing.path(),
        "e4",
        &[
            r#"{"topic":"q","message_id":"1","payload":{"px":1,"sym":"A","venue":"XAMS","new":1}}"#,
            r#"{"topic":"r","message_id":"2","payload":{"n":1,"new":2}}"#,
        ],
    );
    let report = lake
        .ingest()
        .with_topic_evolution("q", Evolution::Fail)
        .build()
        .unwrap()
        .run(&mixed2)
        .unwrap();
    assert!(report.tables["q"].error.is_some());
    assert!(report.tables["r"].error.is_none());
    assert_eq!(lake.rows("r").values("new"), ["2"]);
}

#[test]
fn a_type_conflict_in_a_later_batch_is_rescued_on_the_same_row() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    run(
        &lake,
        &write_batch(landing.path(), "t1", FIRST),
        Evolution::Add,
    );
    let report = run(
        &lake,
        &write_batch(
            landing.path(),
            "t2",
            &[
                r#"{"topic":"q","message_id":"3","payload":{"px":"n/a","sym":"C"}}"#,
                r#"{"topic":"q","message_id":"4","payload":{"px":4,"sym":"D"}}"#,
                r#"{"topic":"q","message_id":"5","payload":{"px":123456789012345678901234567890,"sym":"E"}}"#,
            ],
        ),
        Evolution::Add,
    );
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.tables["q"].rescued_values, 2);
    assert_eq!(
        lake.rows("q")
            .eq("_batch_id", "t2")
            .sorted_by("_id")
            .iter()
            .map(|r| format!(
                "{} {} {}",
                r.get("_id").unwrap_or_default(),
                r.get("px").unwrap_or("null".into()),
                r.get("_rescued_data").unwrap_or_default()
            ))
            .collect::<Vec<_>>(),
        [
            r#"3 null {"/px":"n/a"}"#,
            "4 4 ",
            r#"5 null {"/px":123456789012345678901234567890}"#,
        ]
    );
}

#[test]
fn hostile_topics_and_keys_stay_inside_the_schema_and_out_of_system_columns() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let dir = write_batch(
        landing.path(),
        "h1",
        &[
            r#"{"topic":"../../x","message_id":"1","payload":{"_batch_id":"mine","_id":"also mine","a":1}}"#,
            r#"{"topic":"_delta_log","message_id":"2","payload":{"a":2}}"#,
            r#"{"topic":"_run_control","message_id":"3","payload":{"a":3}}"#,
            r#"{"topic":"_tmp_raw_load_h1","message_id":"4","payload":{"a":4}}"#,
        ],
    );
    let report = lake.ingest().build().unwrap().run(&dir).unwrap();
    assert_accounted(&lake, &report);
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    // Nothing was created next to the schema folder or above it.
    let parent: Vec<_> = std::fs::read_dir(lake.catalog())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(parent, ["bronze"]);
    let tables = lake.all_tables();
    for t in &tables {
        assert!(
            !t.contains('/') && !t.contains(".."),
            "{t} leaves the schema folder"
        );
    }
    for t in [
        "t_______x",
        "t__delta_log",
        "t__run_control",
        "t__tmp_raw_load_h1",
    ] {
        assert!(tables.contains(&t.to_string()), "{t} not in {tables:?}");
    }
    assert_eq!(
        lake.rows("t_______x")
            .iter()
            .map(|r| {
                let f = |c: &str| r.get(c).unwrap_or_default();
                format!(
                    "{}|{}|{}|{}",
                    f("_batch_id"),
                    f("_id"),
                    f("_batch_id_2"),
                    f("_id_2")
                )
            })
            .collect::<Vec<_>>(),
        ["h1|1|mine|also mine"]
    );
    // `_run_control` itself holds run-control rows only.
    assert_eq!(
        lake.rows("_run_control")
            .eq("table", "t__run_control")
            .len(),
        1
    );
}

fn bronze() -> Command {
    crate::util::bronze_cli()
}

#[test]
fn bronze_toml_sets_the_feed_and_flags_override_it() {
    let landing = tempfile::tempdir().unwrap();
    let lake = tempfile::tempdir().unwrap();
    let dir = write_batch(
        landing.path(),
        "c1",
        &[
            r#"{"type":"q","seq":1,"src":"a","body":{"px":1.50,"quotes":[{"currentprice":[{"v":1}]}]}}"#,
            r#"{"type":"q","seq":1,"src":"a","body":{"px":9}}"#,
            r#"{"type":"q","seq":1,"src":"b","body":{"px":2}}"#,
        ],
    );
    let config = landing.path().join("bronze.toml");
    std::fs::write(
        &config,
        r#"
schema = "raw"
[envelope]
topic_field = "type"
id_field = ""
payload_field = "body"
dedup_fields = ["seq", "src"]
[flatten]
types = "strings"
[flatten.child_tables]
"quotes[].currentprice" = "currentprice"
"#,
    )
    .unwrap();
    let out = bronze()
        .args(["ingest", "--json", "--config"])
        .arg(&config)
        .arg("--catalog")
        .arg(lake.path())
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["duplicates"], 1, "dedup on (seq, src)");
    let raw = TempLake::at(lake.path().to_path_buf(), "raw");
    assert_eq!(
        raw.rows("q").sorted_by_key(|r| r.int("_line")).values("px"),
        ["1.50", "2"],
        "types = strings keeps the literal"
    );
    assert_eq!(raw.count("currentprice"), 1);
    // A flag beats the file.
    let out = bronze()
        .args(["ingest", "--json", "--types", "infer", "--config"])
        .arg(&config)
        .arg("--catalog")
        .arg(lake.path())
        .arg("--schema")
        .arg("typed")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let typed = TempLake::at(lake.path().to_path_buf(), "typed");
    assert_eq!(
        typed
            .rows("q")
            .sorted_by_key(|r| r.int("_line"))
            .values("px"),
        ["1.5", "2.0"]
    );
    // Unknown keys are refused, naming them.
    std::fs::write(&config, "[flatten]\nevolutoin = \"add\"\n").unwrap();
    let out = bronze()
        .args(["ingest", "--config"])
        .arg(&config)
        .arg("--catalog")
        .arg(lake.path())
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("evolutoin") && err.contains("bronze.toml"),
        "{err}"
    );
}

#[test]
fn a_100k_deep_line_is_kept_inside_the_pool_threads() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(50_000), "}".repeat(50_000));
    let lines = [
        format!(r#"{{"topic":"deep","message_id":"1","payload":{{"x":{deep}}}}}"#),
        format!(r#"{{"topic":"deep","message_id":"2","payload":{objects}}}"#),
    ];
    let dir = write_batch(
        landing.path(),
        "d1",
        &lines.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let report = lake
        .ingest()
        .with_max_parallel(4)
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    assert_eq!(lake.count("deep"), 2);
    // The array is a one-row `value` child table holding the rest as JSON text.
    let kept = lake.rows("x").values("value");
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].len(), deep.len() - 2);
}
