//! Real feeds vary: configurable envelope fields, no id, no payload.

use std::path::Path;

use crate::util::*;

fn write_batch(root: &Path, id: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = root.join(format!("batch_id={id}"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

#[test]
fn topic_in_type_field_without_id_or_payload() {
    let landing = tempfile::tempdir().unwrap();
    let dir = write_batch(
        landing.path(),
        "z1",
        &[(
            "conn.jsonl",
            "{\"_path\":\"conn\",\"uid\":\"C1\",\"id\":{\"orig_h\":\"10.0.0.1\",\"orig_p\":1234}}\n\
             {\"_path\":\"conn\",\"uid\":\"C1\",\"id\":{\"orig_h\":\"10.0.0.1\",\"orig_p\":1234}}\n\
             {\"_path\":\"dns\",\"uid\":\"C2\",\"answers\":[\"a\",\"b\"]}\n",
        )],
    );
    let lake = TempLake::new();
    let report = lake
        .ingest()
        .with_topic_field("_path")
        .with_id_field(None)
        .with_payload_field(None)
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert_eq!(
        (report.duplicates, report.corrupt_lines, report.messages),
        (0, 0, 3)
    );
    assert_eq!(lake.count("conn"), 2, "no id field: no dedup");
    assert_eq!(
        lake.rows("conn").distinct("_id"),
        2,
        "ids derived from file and line"
    );
    assert_eq!(
        lake.rows("conn")
            .eq("id__orig_p", 1234)
            .eq("uid", "C1")
            .len(),
        2
    );
    assert_eq!(lake.rows("answers").eq("_topic", "dns").len(), 2);
    // Rerun: derived ids are stable, rows replaced.
    lake.ingest()
        .with_topic_field("_path")
        .with_id_field(None)
        .with_payload_field(None)
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert_eq!(lake.count("conn"), 2);
}

#[test]
fn batch_id_flag_overrides_folder_and_hostile_topics_stay_inside() {
    let landing = tempfile::tempdir().unwrap();
    let dir = landing.path().join("any-name");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.json"),
        "{\"topic\":\"../../escape\",\"message_id\":\"1\",\"payload\":{\"x\":1}}\n\
         {\"topic\":\"_delta_log\",\"message_id\":\"2\",\"payload\":{\"x\":2}}\n",
    )
    .unwrap();
    let lake = TempLake::new();
    let err = lake.ingest().build().unwrap().run(&dir).unwrap_err();
    assert!(matches!(err, bronze::Error::MissingBatchId { .. }), "{err}");
    let report = lake
        .ingest()
        .with_batch_id("b-1")
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    assert_eq!(lake.tables(), ["t_______escape", "t__delta_log"]);
    assert_eq!(
        lake.rows("t_______escape")
            .eq("_topic", "../../escape")
            .len(),
        1
    );
    // Nothing was written outside the schema folder.
    let entries: Vec<_> = std::fs::read_dir(lake.catalog())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["bronze"]);
}
