//! Tables other engines changed: a table a batch would write that bronze will not write
//! (a table feature it does not handle, an append-only table on a rerun) fails the
//! batch before any table is written, with one error naming each such table, what is
//! in the way and the fix; the other tables keep their versions.

use deltalake::kernel::TableFeatures;

use crate::util::*;

/// Turns `feature` on in `table`, as another engine would.
fn add_feature(lake: &TempLake, table: &str, feature: TableFeatures) {
    lake.with_table(table, None, async |t| {
        t.add_feature()
            .with_feature(feature)
            .with_allow_protocol_versions_increase(true)
            .await
            .unwrap();
    });
}

/// Every table's version, by table.
fn versions(lake: &TempLake) -> Vec<(String, Option<u64>)> {
    lake.all_tables()
        .into_iter()
        .map(|t| {
            let v = lake.with_table(&t, None, async |d| d.version());
            (t, v)
        })
        .collect()
}

/// Runs `batch`, which must be refused before any write: exit 2, every topic's table
/// failed with the one error, which has each of `says`; no table changed.
fn assert_refused(lake: &TempLake, batch: &str, says: &[&str]) -> String {
    let before = versions(lake);
    let report = lake
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(batch))
        .unwrap();
    assert_eq!(report.exit_code(), 2, "{}", report.to_text());
    let errors: Vec<&String> = report
        .tables
        .values()
        .filter_map(|t| t.error.as_ref())
        .collect();
    assert!(!errors.is_empty(), "{}", report.to_text());
    for e in &errors {
        for s in says {
            assert!(e.contains(s), "{s:?} not in {e}");
        }
        assert!(e.contains("no table of the batch was written"), "{e}");
    }
    let mut after = versions(lake);
    // Only `_run_control` records the refused run.
    let rc = after.iter().position(|(t, _)| t == "_run_control").unwrap();
    let (_, v) = after.remove(rc);
    let mut expected = before.clone();
    let (_, was) = expected.remove(
        before
            .iter()
            .position(|(t, _)| t == "_run_control")
            .unwrap(),
    );
    assert_eq!(after, expected, "no table written");
    assert_eq!(v, was.map(|v| v + 1));
    let recorded = lake
        .rows("_run_control")
        .eq("_batch_id", batch)
        .eq("status", "failed");
    assert!(recorded.len() >= 1, "the refusal is in `_run_control`");
    assert!(
        leases(lake).is_empty(),
        "nothing written: the lease is gone"
    );
    errors[0].clone()
}

#[test]
fn a_feature_bronze_does_not_write_refuses_the_batch_before_any_table_is_written() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    // In a topic table: row tracking; in a child table shared by topics: domain metadata;
    // also in the table of a topic the batch does not have, and in `_corrupt_records`
    // (the batch has no corrupt line).
    add_feature(&lake, "quote", TableFeatures::RowTracking);
    add_feature(&lake, "currentprice", TableFeatures::DomainMetadata);
    add_feature(&lake, "news", TableFeatures::RowTracking);
    add_feature(&lake, "_corrupt_records", TableFeatures::RowTracking);
    let e = assert_refused(
        &lake,
        BATCH2,
        &[
            "`quote` has rowTracking",
            "DROP FEATURE rowTracking",
            "`currentprice` has domainMetadata",
        ],
    );
    // Tables this batch does not write: not named.
    assert!(
        !e.contains("`news`") && !e.contains("`_corrupt_records`"),
        "{e}"
    );
    for (table, _) in expected_tables(BATCH2) {
        if lake.schema_dir().join(&table).is_dir() {
            assert_eq!(
                lake.rows(&table).eq("_batch_id", BATCH2).len(),
                0,
                "{table}"
            );
        }
    }
}

#[test]
fn an_append_only_table_refuses_a_rerun_before_any_write_and_takes_new_batches() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    set_property(&lake, "trade", "delta.appendOnly", "true");
    let report = lake.load(BATCH2);
    assert_accounted(&lake, &report);
    assert_refused(
        &lake,
        BATCH1,
        &[
            "`trade` has delta.appendOnly",
            "'delta.appendOnly' = 'false'",
        ],
    );
    assert_both_fixture_batches_landed(&lake);
}

/// Every file under `dir` with its size, sorted.
fn files(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let name = e.path().strip_prefix(dir).unwrap().display().to_string();
                out.push((name, e.metadata().unwrap().len()));
            }
        }
    }
    out.sort();
    out
}

/// Tables Databricks and Spark wrote (`fixtures/other_engines`, from delta-rs's test data
/// and Delta's test tables: liquid clustering with row tracking, column mapping by name
/// and by id, identity columns), each the table of a topic named like it: a batch of
/// that topic is refused before any write, naming the first feature bronze does not
/// write, and the table is left byte for byte as it was.
#[test]
fn tables_databricks_wrote_with_features_bronze_does_not_write_are_left_untouched() {
    for (table, line, feature) in [
        (
            "table_with_liquid_clustering",
            r#"{"topic":"table_with_liquid_clustering","message_id":"m1","payload":{"id":42}}"#,
            "`table_with_liquid_clustering` has domainMetadata",
        ),
        (
            "table_with_column_mapping",
            r#"{"topic":"table_with_column_mapping","message_id":"m1","payload":{"Company Very Short":"BMS","Super Name":"Ada"}}"#,
            "`table_with_column_mapping` has columnMapping",
        ),
        (
            "delta_cm_id",
            r#"{"topic":"delta_cm_id","message_id":"m1","payload":{"value":7}}"#,
            "`delta_cm_id` has columnMapping",
        ),
        (
            "delta_cm_name_alltypes",
            r#"{"topic":"delta_cm_name_alltypes","message_id":"m1","payload":{"StringType":"s","IntegerType":1}}"#,
            "`delta_cm_name_alltypes` has columnMapping",
        ),
        (
            "rs_identity_always_v2checkpoint",
            r#"{"topic":"rs_identity_always_v2checkpoint","message_id":"m1","payload":{"name":"Ada"}}"#,
            "`rs_identity_always_v2checkpoint` has an identity column",
        ),
        (
            "delta_identity_writer2",
            r#"{"topic":"delta_identity_writer2","message_id":"m1","payload":{"part":1,"value":"v"}}"#,
            "`delta_identity_writer2` has an identity column",
        ),
    ] {
        let lake = TempLake::new();
        let fixture = repo().join("fixtures/other_engines").join(table);
        copy_tree(&fixture, &lake.schema_dir().join(table));
        let landing = tempfile::tempdir().unwrap();
        let dir = landing.path().join("feed/events/batch_id=b1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("part-0.jsonl"), line).unwrap();
        let report = lake.ingest().build().unwrap().run(&dir).unwrap();
        assert_eq!(report.exit_code(), 2, "{table}: {}", report.to_text());
        let error = report.tables[table].error.as_deref().unwrap_or_default();
        assert!(error.contains(feature), "{table}: {error}");
        let fix = if feature.contains("identity") {
            "load the topic into a table without it"
        } else {
            "DROP FEATURE"
        };
        assert!(error.contains(fix), "{table}: {error}");
        assert_eq!(
            files(&lake.schema_dir().join(table)),
            files(&fixture),
            "{table}: not written"
        );
    }
}
