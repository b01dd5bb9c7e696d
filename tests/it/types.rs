//! Column types through real Delta tables: hints (`[flatten.column_types]`), detection
//! (`detect_types`), values that do not convert kept in `_rescued_data`, and hints that
//! contradict an existing column.

use std::path::{Path, PathBuf};

use arrow::datatypes::{DataType, TimeUnit};

use crate::util::*;

fn write_batch(root: &Path, id: &str, lines: &[&str]) -> PathBuf {
    let dir = root.join(format!("batch_id={id}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part-0.jsonl"), lines.join("\n")).unwrap();
    dir
}

/// The flattening settings of a `bronze.toml`.
fn flatten(toml: &str) -> bronze::FlattenConfig {
    bronze::Settings::from_toml(toml)
        .unwrap()
        .resolve()
        .unwrap()
        .flatten
}

fn run(lake: &TempLake, dir: &Path, toml: &str) -> bronze::BatchReport {
    lake.ingest()
        .with_flatten(flatten(toml))
        .build()
        .unwrap()
        .run(dir)
        .unwrap()
}

/// The Arrow type of each column of `table`, as the Delta log has them.
fn types(lake: &TempLake, table: &str) -> std::collections::BTreeMap<String, DataType> {
    lake.with_table(table, None, async |t| {
        let schema = t.snapshot().unwrap().snapshot().arrow_schema();
        schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect()
    })
}

const HINTS: &str = r#"
[flatten.column_types]
"/amount" = "decimal(18,2)"
"/legs/*/at" = "timestamp"

[topics.order.column_types]
"/placed/at" = "timestamp"
"/day" = "date"
"#;

#[test]
fn hinted_columns_land_typed_and_what_does_not_convert_is_rescued() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let dir = write_batch(
        landing.path(),
        "t1",
        &[
            r#"{"topic":"order","message_id":"1","payload":{"amount":12.5,"placed":{"at":"2026-01-15T12:00:00+02:00"},"day":"2026-01-15","legs":[{"at":"2026-01-15T10:00:00.25Z"}]}}"#,
            r#"{"topic":"order","message_id":"2","payload":{"amount":"1e999","placed":{"at":"n/a"},"day":"2026-01-16"}}"#,
            r#"{"topic":"quote","message_id":"3","payload":{"amount":"7.10","placed":{"at":"2026-01-15T10:00:00Z"}}}"#,
        ],
    );
    let report = run(&lake, &dir, HINTS);
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    let order = types(&lake, "order");
    let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    assert_eq!(order["amount"], DataType::Decimal128(18, 2));
    assert_eq!(order["placed__at"], utc);
    assert_eq!(order["day"], DataType::Date32);
    assert_eq!(types(&lake, "legs")["at"], utc);
    // The hint of one topic leaves the others' columns alone.
    assert_eq!(types(&lake, "quote")["placed__at"], DataType::Utf8);
    assert_eq!(types(&lake, "quote")["amount"], DataType::Decimal128(18, 2));
    let rows = lake.rows("order").sorted_by("_id");
    let first = rows.eq("_id", "1");
    let first = first.iter().next().unwrap();
    assert_eq!(first.get("amount").as_deref(), Some("12.50"));
    assert_eq!(first.micros("placed__at"), Some(1_768_471_200_000_000));
    assert_eq!(first.get("day").as_deref(), Some("2026-01-15"));
    assert_eq!(
        rows.texts("_rescued_data"),
        [
            None,
            Some(r#"{"/amount":"1e999","/placed/at":"n/a"}"#.into())
        ]
    );
    assert_eq!(lake.rows("quote").values("amount"), ["7.10"]);
    assert_eq!(
        lake.rows("legs").iter().next().unwrap().micros("at"),
        Some(1_768_471_200_250_000)
    );
    assert_eq!(report.tables["order"].rescued_values, 2);
    assert_eq!(report.warnings, Vec::<String>::new());
    assert_accounted(&lake, &report);
}

#[test]
fn a_hint_that_matches_no_column_is_a_warning_and_one_for_no_topic_an_error() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let line = r#"{"topic":"q","message_id":"1","payload":{"sym":"A"}}"#;
    let dir = write_batch(landing.path(), "w1", &[line]);
    let report = run(
        &lake,
        &dir,
        "[flatten.column_types]\n\"/price\" = \"float64\"\n",
    );
    assert_eq!(report.exit_code(), 0);
    assert_eq!(
        report.warnings,
        ["the column type hint `/price` matched no column of this batch"]
    );
    // A topic in neither the batch nor the schema: exit 2, no table written.
    let dir = write_batch(
        landing.path(),
        "w2",
        &[line.replace("\"q\"", "\"r\"").as_str()],
    );
    let out = on_catalog(
        &lake,
        &[
            "ingest",
            dir.to_str().unwrap(),
            "--column-type",
            "quote:/sym=int64",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "`quote:/sym=int64`: no topic `quote` in this batch (r) nor a table of it in the schema"
        ),
        "{err}"
    );
    assert!(
        !lake.tables().contains(&"r".to_string()),
        "{:?}",
        lake.tables()
    );
    // A topic with a table in the schema is not a typo.
    let out = on_catalog(
        &lake,
        &[
            "ingest",
            dir.to_str().unwrap(),
            "--column-type",
            "q:/sym=string",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn detected_timestamps_and_dates_land_typed_and_a_later_batch_is_fitted_to_them() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let detect = "[flatten]\ndetect_types = [\"timestamp\", \"date\"]\n";
    let dir = write_batch(
        landing.path(),
        "d1",
        &[
            r#"{"topic":"ev","message_id":"1","payload":{"ts":"2026-01-15T10:00:00Z","d":"2026-01-15","s":"2026-01-15"}}"#,
            r#"{"topic":"ev","message_id":"2","payload":{"ts":"2026-01-15T11:00:00-01:00","d":"2026-01-16","s":"soon"}}"#,
        ],
    );
    assert_eq!(run(&lake, &dir, detect).exit_code(), 0);
    let ev = types(&lake, "ev");
    assert_eq!(
        ev["ts"],
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(ev["d"], DataType::Date32);
    assert_eq!(ev["s"], DataType::Utf8);
    let micros: Vec<_> = lake
        .rows("ev")
        .sorted_by("_id")
        .iter()
        .map(|r| r.micros("ts"))
        .collect();
    assert_eq!(
        micros,
        [Some(1_768_471_200_000_000), Some(1_768_478_400_000_000)]
    );
    // A later batch without detection: its strings are fitted to the table's types.
    let dir = write_batch(
        landing.path(),
        "d2",
        &[r#"{"topic":"ev","message_id":"3","payload":{"ts":"yesterday","d":"2026-01-17"}}"#],
    );
    let report = run(&lake, &dir, "");
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.tables["ev"].rescued_values, 1);
    let row = lake.rows("ev").eq("_id", "3");
    assert_eq!(row.values("d"), ["2026-01-17"]);
    assert_eq!(row.values("_rescued_data"), [r#"{"/ts":"yesterday"}"#]);
}

#[test]
fn a_hint_contradicting_an_existing_column_fails_the_batch_before_any_write() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let line = r#"{"topic":"q","message_id":"1","payload":{"sym":"A","legs":[{"px":"1.5"}]}}"#;
    let first = write_batch(landing.path(), "c1", &[line]);
    assert_eq!(run(&lake, &first, "").exit_code(), 0);
    let versions =
        |lake: &TempLake| ["q", "legs"].map(|t| lake.with_table(t, None, async |t| t.version()));
    let before = versions(&lake);
    let other = r#"{"topic":"r","message_id":"2","payload":{"x":1}}"#;
    let second = write_batch(landing.path(), "c2", &[line, other]);
    for (hints, says) in [
        (
            "[flatten.column_types]\n\"/sym\" = \"int64\"\n",
            "`q` has column `sym` (/sym) as string, but the hint `/sym` says int64: a hint types new columns only",
        ),
        (
            "[topics.q.column_types]\n\"/legs/*/px\" = \"decimal(9,2)\"\n",
            "`legs` has column `px` (/px) as string, but the hint `q:/legs/*/px` says decimal(9,2)",
        ),
    ] {
        let report = run(&lake, &second, hints);
        assert_eq!(report.exit_code(), 2);
        let error = report.tables["q"].error.clone().unwrap();
        assert!(error.contains(says), "{error}");
        assert!(
            error.contains("no table of the batch was written"),
            "{error}"
        );
        assert_eq!(versions(&lake), before, "nothing written");
        assert!(
            !lake.tables().contains(&"r".to_string()),
            "{:?}",
            lake.tables()
        );
    }
}

/// The commands of docs/types.md, run as written (in a temporary folder, `bronze` the one
/// built for the tests): the tables hold what its "after" tables show.
#[test]
fn readme_types_commands_run_as_written() {
    let (dir, out) = run_sh(&doc_sh_block("### Types"));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("2 values rescued"), "{report}");
    assert!(report.contains("1 values rescued"), "{report}");
    let lake = TempLake::at(dir.path().join("lakehouse"), "bronze");
    let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let order = types(&lake, "order");
    assert_eq!(order["amount"], DataType::Decimal128(18, 2));
    assert_eq!(order["placed_at"], utc);
    assert_eq!(order["day"], DataType::Date32);
    assert_eq!(types(&lake, "legs")["ts"], utc);
    let rows = lake.rows("order").sorted_by("_id");
    assert_eq!(rows.texts("amount"), [Some("12.50".into()), None]);
    let placed: Vec<_> = rows.iter().map(|r| r.micros("placed_at")).collect();
    assert_eq!(placed, [Some(1_768_471_200_000_000), None]);
    assert_eq!(rows.values("day"), ["2026-01-15", "2026-01-16"]);
    assert_eq!(
        rows.texts("_rescued_data"),
        [
            None,
            Some(r#"{"/amount":"1e999","/placed_at":"n/a"}"#.into())
        ]
    );
    let legs = lake.rows("legs").sorted_by("_parent_id");
    let ts: Vec<_> = legs.iter().map(|r| r.micros("ts")).collect();
    assert_eq!(ts, [Some(1_768_471_200_000_000), None]);
    assert_eq!(
        legs.texts("_rescued_data"),
        [None, Some(r#"{"/ts":"soon"}"#.into())]
    );
}

/// The batch of docs/types.md without the flags: its tables hold what the "before" tables
/// show (amount as JSON text, the timestamps and dates as strings, nothing rescued).
#[test]
fn readme_types_before_tables_are_the_batch_without_the_flags() {
    let block = doc_sh_block("### Types");
    // The block up to its `bronze ingest`, then the same ingest without the flags.
    let setup = &block[..block
        .find("bronze ingest")
        .expect("the block runs bronze ingest")];
    let script =
        format!("{setup}bronze ingest landing/shop/orders/batch_id=b1 --catalog ./lakehouse\n");
    let (dir, _) = run_sh(&script);
    let lake = TempLake::at(dir.path().join("lakehouse"), "bronze");
    let order = types(&lake, "order");
    for column in ["amount", "placed_at", "day"] {
        assert_eq!(order[column], DataType::Utf8, "{column}");
    }
    assert_eq!(types(&lake, "legs")["ts"], DataType::Utf8);
    let rows = lake.rows("order").sorted_by("_id");
    assert_eq!(
        rows.texts("amount"),
        [Some("12.5".into()), Some(r#""1e999""#.into())]
    );
    assert_eq!(
        rows.values("placed_at"),
        ["2026-01-15T12:00:00+02:00", "n/a"]
    );
    assert_eq!(rows.values("day"), ["2026-01-15", "2026-01-16"]);
    let legs = lake.rows("legs").sorted_by("_parent_id");
    assert_eq!(legs.values("ts"), ["2026-01-15T10:00:00Z", "soon"]);
    for table in ["order", "legs"] {
        let columns = lake.columns(table);
        assert!(
            !columns.iter().any(|c| c == "_rescued_data"),
            "{table}: {columns:?}"
        );
    }
}

/// A schema of more tables than the pre-check opens ahead (256) still has a hinted child
/// table checked before any write.
#[test]
fn a_hinted_child_table_is_checked_before_any_write_in_a_schema_of_many_tables() {
    let landing = tempfile::tempdir().unwrap();
    let lake = TempLake::new();
    let line = r#"{"topic":"q","message_id":"1","payload":{"sym":"A","legs":[{"px":"1.5"}]}}"#;
    let mut lines = vec![line.to_string()];
    lines.extend(
        (0..260).map(|i| format!(r#"{{"topic":"t{i}","message_id":"m{i}","payload":{{"x":1}}}}"#)),
    );
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let first = write_batch(landing.path(), "m1", &lines);
    assert_eq!(run(&lake, &first, "").exit_code(), 0);
    let versions =
        |lake: &TempLake| ["q", "legs"].map(|t| lake.with_table(t, None, async |t| t.version()));
    let before = versions(&lake);
    let second = write_batch(landing.path(), "m2", &[line]);
    let hints = "[topics.q.column_types]\n\"/legs/*/px\" = \"decimal(9,2)\"\n";
    let report = run(&lake, &second, hints);
    assert_eq!(report.exit_code(), 2);
    let error = report.tables["q"].error.clone().unwrap();
    assert!(
        error.contains("`legs` has column `px` (/px) as string"),
        "{error}"
    );
    assert!(
        error.contains("no table of the batch was written"),
        "{error}"
    );
    assert_eq!(versions(&lake), before, "nothing written");
}
