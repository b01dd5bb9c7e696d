//! Tables other engines changed: a table a batch would write that bronze will not write
//! (a table feature it does not handle, an append-only table on a rerun) fails the
//! batch before any table is written, with one error naming each such table, what is
//! in the way and the fix; the other tables keep their versions.

use deltalake::kernel::TableFeatures;

use crate::util::*;

/// Turns `feature` on in `table`, as another engine would.
fn add_feature(lake: &TempLake, table: &str, feature: TableFeatures) {
    add_features(lake, table, vec![feature]);
}

/// Turns `features` on in `table` in one commit, as another engine would.
fn add_features(lake: &TempLake, table: &str, features: Vec<TableFeatures>) {
    lake.with_table(table, None, async |t| {
        t.add_feature()
            .with_features(features)
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

/// Lists `feature` among `table`'s writer features (with appendOnly and invariants, which
/// writer version 2 implied, when it had none), as another engine would: a commit of the
/// protocol alone.
fn add_writer_feature(lake: &TempLake, table: &str, feature: &str) {
    let (version, reader, writer) = lake.with_table(table, None, async |t| {
        let s = t.snapshot().unwrap();
        let p = s.protocol();
        let features = |f: Option<&[buoyant_kernel::table_features::TableFeature]>| {
            f.unwrap_or_default()
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
        };
        (
            s.version(),
            features(p.reader_features()),
            features(p.writer_features()),
        )
    });
    let mut writer = if writer.is_empty() {
        vec!["appendOnly".to_string(), "invariants".to_string()]
    } else {
        writer
    };
    writer.push(feature.to_string());
    let protocol = serde_json::json!({"protocol": {
        "minReaderVersion": if reader.is_empty() { 1 } else { 3 },
        "minWriterVersion": 7,
        "readerFeatures": if reader.is_empty() { None } else { Some(reader) },
        "writerFeatures": writer,
    }});
    let mut protocol = protocol;
    if protocol["protocol"]["readerFeatures"].is_null() {
        protocol["protocol"]
            .as_object_mut()
            .unwrap()
            .remove("readerFeatures");
    }
    let info = serde_json::json!({"commitInfo": {"timestamp": 0, "operation": "UPGRADE PROTOCOL"}});
    let log = lake.schema_dir().join(table).join("_delta_log");
    std::fs::write(
        log.join(format!("{:020}.json", version + 1)),
        format!("{info}\n{protocol}\n"),
    )
    .unwrap();
}

#[test]
fn a_feature_bronze_does_not_write_refuses_the_batch_before_any_table_is_written() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    // In a topic table; in a child table shared by topics; also in the table of a topic
    // the batch does not have, and in `_corrupt_records` (the batch has no corrupt line).
    add_writer_feature(&lake, "quote", "someFutureFeature");
    add_writer_feature(&lake, "currentprice", "liquid");
    add_writer_feature(&lake, "news", "someFutureFeature");
    add_writer_feature(&lake, "_corrupt_records", "someFutureFeature");
    // Row tracking without the domain metadata the protocol asks beside it.
    add_feature(&lake, "trade", TableFeatures::RowTracking);
    let e = assert_refused(
        &lake,
        BATCH2,
        &[
            "`quote` has someFutureFeature",
            "DROP FEATURE someFutureFeature",
            "`currentprice` has liquid",
            "`trade` has rowTracking without domainMetadata",
        ],
    );
    // Nor is such a table vacuumed: nothing deleted.
    let before = files(&lake.schema_dir().join("quote"));
    let vacuum = on_catalog(&lake, &["vacuum", "quote", "--retain", "0h", "--force"]);
    let err = String::from_utf8_lossy(&vacuum.stderr);
    assert!(
        !vacuum.status.success() && err.contains("has someFutureFeature"),
        "{err}"
    );
    assert_eq!(files(&lake.schema_dir().join("quote")), before);
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

/// Every table of the run committed (the fixture batches have corrupt lines: exit 1).
fn assert_loaded(report: &bronze::BatchReport) {
    assert!(report.exit_code() <= 1, "{}", report.to_text());
    assert!(
        report.tables.values().all(|t| t.error.is_none()),
        "{}",
        report.to_text()
    );
}

/// Every commit of `table` from version `from` on: its version and its actions.
fn commits(lake: &TempLake, table: &str, from: u64) -> Vec<(u64, Vec<serde_json::Value>)> {
    let log = lake.schema_dir().join(table).join("_delta_log");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&log).unwrap().map(Result::unwrap) {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(v) = name
            .strip_suffix(".json")
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        if v < from {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        let actions = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        out.push((v, actions));
    }
    out.sort_by_key(|(v, _)| *v);
    out
}

/// The last configuration every commit of `table` set for each domain.
/// The writer features `table`'s protocol lists, by name.
fn writer_features(lake: &TempLake, table: &str) -> Vec<String> {
    lake.with_table(table, None, async |d| {
        let protocol = d.snapshot().unwrap().protocol().clone();
        let features = protocol.writer_features().unwrap_or_default();
        features.iter().map(|f| f.to_string()).collect()
    })
}

fn domains(lake: &TempLake, table: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for (_, actions) in commits(lake, table, 0) {
        for a in actions {
            let d = &a["domainMetadata"];
            if let Some(domain) = d["domain"].as_str() {
                if d["removed"].as_bool() == Some(true) {
                    out.remove(domain);
                } else {
                    out.insert(
                        domain.to_string(),
                        d["configuration"].as_str().unwrap().to_string(),
                    );
                }
            }
        }
    }
    out
}

/// Delta's row tracking rules, checked on every commit of `table` from version `from`
/// on (the log replayed from 0): each file added has `baseRowId` above the high-water
/// mark before its commit and `defaultRowCommitVersion` = its commit's version; the mark
/// (`delta.rowTracking` domain) covers every id assigned; a remove of a file carries the
/// fields of its add; the live files' row ids never overlap. Returns the files added
/// and removed from `from` on.
fn assert_row_tracking(lake: &TempLake, table: &str, from: u64) -> (usize, usize) {
    let mut mark: i64 = -1;
    let mut live: std::collections::BTreeMap<String, (Option<i64>, Option<i64>, i64)> =
        Default::default();
    let (mut added, mut removed) = (0, 0);
    for (v, actions) in commits(lake, table, 0) {
        let before = mark;
        let mut highest = before;
        for a in &actions {
            if let Some(c) = a["domainMetadata"]["configuration"]
                .as_str()
                .filter(|_| a["domainMetadata"]["domain"] == "delta.rowTracking")
            {
                let c: serde_json::Value = serde_json::from_str(c).unwrap();
                mark = c["rowIdHighWaterMark"].as_i64().unwrap();
            }
        }
        for a in &actions {
            if let Some(path) = a["remove"]["path"].as_str() {
                let (base, cv, _) = live
                    .remove(path)
                    .unwrap_or_else(|| panic!("{table} v{v}: remove of a file not live: {path}"));
                if v >= from {
                    removed += 1;
                    assert_eq!(
                        a["remove"]["baseRowId"].as_i64(),
                        base,
                        "{table} v{v}: {path}"
                    );
                    assert_eq!(
                        a["remove"]["defaultRowCommitVersion"].as_i64(),
                        cv,
                        "{table} v{v}: {path}"
                    );
                }
            }
        }
        for a in &actions {
            let add = &a["add"];
            let Some(path) = add["path"].as_str() else {
                continue;
            };
            let stats: serde_json::Value =
                serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
            let rows = stats["numRecords"].as_i64().unwrap();
            let base = add["baseRowId"].as_i64();
            if v >= from {
                added += 1;
                let base = base.unwrap_or_else(|| panic!("{table} v{v}: {path} has no baseRowId"));
                assert!(
                    base > before,
                    "{table} v{v}: baseRowId {base} not above the mark {before}"
                );
                assert_eq!(
                    add["defaultRowCommitVersion"].as_i64(),
                    Some(v as i64),
                    "{table} v{v}"
                );
                highest = highest.max(base + rows - 1);
            }
            live.insert(
                path.to_string(),
                (base, add["defaultRowCommitVersion"].as_i64(), rows),
            );
        }
        assert!(
            mark >= highest,
            "{table} v{v}: the mark {mark} is below row id {highest}"
        );
    }
    let mut ranges: Vec<(i64, i64)> = live
        .values()
        .filter_map(|(b, _, n)| b.map(|b| (b, b + n)))
        .collect();
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "{table}: row ids overlap: {w:?}");
    }
    (added, removed)
}

/// A domain another writer set in `table`, as a user-controlled domain.
fn add_user_domain(lake: &TempLake, table: &str, domain: &str, configuration: &str) {
    use deltalake::kernel::transaction::CommitBuilder;
    lake.with_table(table, None, async |t| {
        let v = t.version().unwrap();
        let action = deltalake::kernel::Action::DomainMetadata(deltalake::kernel::DomainMetadata {
            domain: domain.to_string(),
            configuration: configuration.to_string(),
            removed: false,
        });
        let op = deltalake::protocol::DeltaOperation::Write {
            mode: deltalake::protocol::SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let prepared = CommitBuilder::default()
            .with_actions(vec![action])
            .build(None, t.log_store(), op)
            .into_prepared_commit_future()
            .await
            .unwrap();
        t.log_store()
            .write_commit_entry(
                v + 1,
                prepared.commit_or_bytes().clone(),
                uuid::Uuid::new_v4(),
            )
            .await
            .unwrap();
    });
}

/// Row tracking and domain metadata turned on in every table after a first batch (what
/// Databricks does to tables its users care about): the next batch and a rerun of the
/// first load, every file bronze adds gets fresh row ids above the high-water mark, the
/// removes of a rerun keep their files' ids, and a domain another writer set stays.
#[test]
fn row_tracking_and_domain_metadata_tables_take_new_batches_and_reruns() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    let mut from = std::collections::BTreeMap::new();
    // Row tracking keeps its high-water mark in a domain: both features, as Databricks
    // lists them (a table with row tracking alone is refused, below).
    for t in lake.all_tables() {
        let both = vec![TableFeatures::RowTracking, TableFeatures::DomainMetadata];
        add_features(&lake, &t, both);
        let v = lake.with_table(&t, None, async |d| d.version().unwrap());
        from.insert(t, v + 1);
    }
    add_user_domain(
        &lake,
        "currentprice",
        "com.example.owner",
        r#"{"team":"risk"}"#,
    );
    let report = lake.load(BATCH2);
    assert_loaded(&report);
    assert_accounted(&lake, &report);
    let rerun = lake.load(BATCH1);
    assert_loaded(&rerun);
    assert_accounted(&lake, &rerun);
    assert_both_fixture_batches_landed(&lake);
    assert_readable_without_duplicates(&lake, "row tracking");
    let (mut added, mut removed) = (0, 0);
    for (t, v) in &from {
        let (a, r) = assert_row_tracking(&lake, t, *v);
        (added, removed) = (added + a, removed + r);
        let features = writer_features(&lake, t);
        assert!(
            features.contains(&"rowTracking".to_string()),
            "{t}: {features:?}"
        );
    }
    assert!(added >= from.len(), "files added: {added}");
    assert!(removed > 0, "the rerun removed files");
    assert_eq!(
        domains(&lake, "currentprice")
            .get("com.example.owner")
            .map(String::as_str),
        Some(r#"{"team":"risk"}"#)
    );
    crate::interop::check(&lake, "row tracking", &Default::default());
}

/// Features whose values a writer computes or checks, listed but unused (what
/// Databricks lists when it upgrades a table's protocol): batches load and rerun.
#[test]
fn features_listed_but_unused_take_batches_and_reruns() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    // deltalake refuses to list most of them, so they are listed by hand.
    for f in [
        "checkConstraints",
        "generatedColumns",
        "identityColumns",
        "changeDataFeed",
    ] {
        add_writer_feature(&lake, "trade", f);
    }
    let report = lake.load(BATCH2);
    assert_loaded(&report);
    let rerun = lake.load(BATCH1);
    assert_loaded(&rerun);
    assert_both_fixture_batches_landed(&lake);
}

/// The change data feed on (`delta.enableChangeDataFeed`): a rerun whose batch shares a
/// file with another batch (after an OPTIMIZE) rewrites that file and records a change
/// data file with the batch's rows deleted and inserted, none of the copied rows; Python
/// deltalake's change data feed reads the same; batches load exactly.
#[test]
fn a_rerun_on_a_change_data_feed_table_records_its_changes_only() {
    let lake = TempLake::new();
    lake.load(BATCH1);
    set_property(&lake, "quote", "delta.enableChangeDataFeed", "true");
    assert_loaded(&lake.load(BATCH2));
    cli_ok(&lake, &["optimize", "quote"]);
    let before = lake.with_table("quote", None, async |t| t.version().unwrap());
    assert_loaded(&lake.load(BATCH1));
    assert_both_fixture_batches_landed(&lake);
    let rows = expected_tables(BATCH1)["quote"];
    let rerun = commits(&lake, "quote", before + 1);
    let cdc: Vec<&str> = rerun
        .iter()
        .flat_map(|(_, a)| a)
        .filter_map(|a| a["cdc"]["path"].as_str())
        .collect();
    assert_eq!(cdc.len(), 1, "{rerun:?}");
    let file = std::fs::File::open(lake.schema_dir().join("quote").join(cdc[0])).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut changes = std::collections::BTreeMap::new();
    for b in reader {
        let b = b.unwrap();
        let kinds = b.column_by_name("_change_type").unwrap();
        let batches = b.column_by_name("_batch_id").unwrap();
        use arrow::array::AsArray as _;
        for i in 0..b.num_rows() {
            let key = (
                kinds.as_string::<i32>().value(i).to_string(),
                batches.as_string::<i32>().value(i).to_string(),
            );
            *changes.entry(key).or_insert(0u64) += 1;
        }
    }
    let expected = std::collections::BTreeMap::from([
        (("delete".to_string(), BATCH1.to_string()), rows),
        (("insert".to_string(), BATCH1.to_string()), rows),
    ]);
    assert_eq!(changes, expected);
    // Python deltalake's change data feed of the rerun's version.
    let script = format!(
        "import pyarrow as pa\nfrom deltalake import DeltaTable\n\
         cdf = DeltaTable({path:?}).load_cdf(starting_version={v}, ending_version={v})\n\
         t = pa.RecordBatchReader.from_stream(cdf).read_all()\n\
         print(sorted(t.group_by(['_change_type', '_batch_id']).aggregate([([], 'count_all')]).to_pylist(), key=str))",
        path = lake.schema_dir().join("quote").display().to_string(),
        v = before + 1,
    );
    let out = std::process::Command::new(crate::interop::python())
        .args(["-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for kind in ["delete", "insert"] {
        let want =
            format!("'_change_type': '{kind}', '_batch_id': '{BATCH1}', 'count_all': {rows}");
        assert!(text.contains(&want), "{want} not in {text}");
    }
    assert!(!text.contains(BATCH2), "{text}");
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
/// and Delta's test tables: Databricks' preview liquid clustering, a partitioned
/// column-mapped table, identity columns), each the table of a topic named like it: a
/// batch of that topic is refused before any write, naming what bronze does not write,
/// and the table is left byte for byte as it was.
#[test]
fn tables_databricks_wrote_with_features_bronze_does_not_write_are_left_untouched() {
    for (table, line, feature) in [
        (
            "table_with_liquid_clustering",
            r#"{"topic":"table_with_liquid_clustering","message_id":"m1","payload":{"id":42}}"#,
            "`table_with_liquid_clustering` has liquid",
        ),
        (
            "table_with_column_mapping",
            r#"{"topic":"table_with_column_mapping","message_id":"m1","payload":{"Company Very Short":"BMS","Super Name":"Ada"}}"#,
            "`table_with_column_mapping` has partition columns (Company Very Short)",
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
        } else if feature.contains("partition") {
            "load the topic into a table of bronze's own"
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

/// Runs the CLI on the lake's catalog with `args`, which must succeed; its output.
fn cli_ok(lake: &TempLake, args: &[&str]) -> String {
    let out = on_catalog(lake, args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Loads `lines` (one JSON envelope per line) as batch `batch` of a feed into `lake`.
fn load_lines(lake: &TempLake, batch: &str, lines: &[String]) -> bronze::BatchReport {
    let landing = tempfile::tempdir().unwrap();
    let dir = landing.path().join(format!("feed/events/batch_id={batch}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part-0.jsonl"), lines.join("\n")).unwrap();
    lake.ingest().build().unwrap().run(&dir).unwrap()
}

/// The clustering columns' statistics of every file `table` added from version `from`
/// on: each must have min, max and null count for each column.
fn assert_clustering_statistics(lake: &TempLake, table: &str, from: u64, columns: &[&str]) {
    for (v, actions) in commits(lake, table, from) {
        for a in actions {
            let Some(stats) = a["add"]["stats"].as_str() else {
                continue;
            };
            let stats: serde_json::Value = serde_json::from_str(stats).unwrap();
            for c in columns {
                for k in ["minValues", "maxValues", "nullCount"] {
                    assert!(
                        !stats[k][c].is_null(),
                        "{table} v{v}: no {k} of {c}: {stats}"
                    );
                }
            }
            assert!(
                a["add"]["clusteringProvider"].is_null(),
                "bronze clusters nothing"
            );
        }
    }
}

/// Liquid-clustered tables: the one Spark 3.5 / Delta 3.2 created (`CLUSTER BY (year,
/// month)`, from Trino's test tables) and the Databricks one with row tracking (its
/// preview feature named as the protocol names it). A batch of a topic named like each
/// loads and reruns: rows exact, files unclustered with statistics of the clustering
/// columns, the clustering domain and the features as they were, row ids fresh, and
/// Python deltalake, Polars and DuckDB read the tables; `bronze optimize` compacts the
/// unclustered files and says it clusters nothing.
#[test]
fn liquid_clustered_tables_spark_wrote_load_and_rerun() {
    let lake = TempLake::new();
    for table in [
        "spark_liquid_clustering",
        "synthetic_clustering_rowtracking",
    ] {
        let fixture = repo().join("fixtures/other_engines").join(table);
        copy_tree(&fixture, &lake.schema_dir().join(table));
    }
    let before: std::collections::BTreeMap<String, (u64, String, Vec<String>)> = [
        "spark_liquid_clustering",
        "synthetic_clustering_rowtracking",
    ]
    .into_iter()
    .map(|t| {
        let v = lake.with_table(t, None, async |d| d.snapshot().unwrap().version());
        let features = writer_features(&lake, t);
        (
            t.to_string(),
            (v, domains(&lake, t)["delta.clustering"].clone(), features),
        )
    })
    .collect();
    let lines = |n: usize| -> Vec<String> {
        (0..n)
            .flat_map(|i| {
                [
                    format!(r#"{{"topic":"spark_liquid_clustering","message_id":"s{i}","payload":{{"data":"zoé {i}","year":2025,"month":{}}}}}"#, i % 12 + 1),
                    format!(r#"{{"topic":"synthetic_clustering_rowtracking","message_id":"r{i}","payload":{{"id":{}}}}}"#, 100 + i),
                ]
            })
            .collect()
    };
    for (batch, n) in [("b1", 3), ("b2", 2), ("b1", 3)] {
        let report = load_lines(&lake, batch, &lines(n));
        assert_loaded(&report);
    }
    let spark = lake.rows("spark_liquid_clustering").eq("_batch_id", "b1");
    assert_eq!(spark.len(), 3);
    assert_eq!(
        spark.sorted_by("month").strings("data"),
        ["zoé 0", "zoé 1", "zoé 2"]
    );
    assert_eq!(lake.rows("spark_liquid_clustering").len(), 5);
    let ids = lake.rows("synthetic_clustering_rowtracking");
    assert_eq!(ids.len(), 10 + 5, "Databricks' 10 rows and the batches' 5");
    for (t, (v, clustering, features)) in &before {
        assert_eq!(&domains(&lake, t)["delta.clustering"], clustering, "{t}");
        let after = writer_features(&lake, t);
        assert_eq!(&after, features, "{t}");
        let columns: &[&str] = if t.starts_with("spark") {
            &["year", "month"]
        } else {
            &["id"]
        };
        assert_clustering_statistics(&lake, t, v + 1, columns);
    }
    let (added, removed) = assert_row_tracking(&lake, "synthetic_clustering_rowtracking", 1);
    assert!(added >= 3 && removed >= 1, "{added} {removed}");
    let first = commits(&lake, "synthetic_clustering_rowtracking", 1);
    let base = first
        .iter()
        .flat_map(|(_, a)| a)
        .find_map(|a| a["add"]["baseRowId"].as_i64());
    assert_eq!(base, Some(10), "above Databricks' high-water mark of 9");
    crate::interop::check(&lake, "loads into clustered tables", &Default::default());

    let text = cli_ok(&lake, &["optimize", "--all"]);
    assert!(text.contains("liquid-clustered by year, month"), "{text}");
    assert!(text.contains("nothing clustered"), "{text}");
    assert_eq!(lake.rows("spark_liquid_clustering").len(), 5);
    let zorder = on_catalog(
        &lake,
        &["optimize", "spark_liquid_clustering", "--zorder", "year"],
    );
    assert!(!zorder.status.success());
    assert!(String::from_utf8_lossy(&zorder.stderr).contains("liquid-clustered by year, month"));
    // Row tracking is enabled there: each commit says whether copied rows kept their ids
    // (loads copy none; OPTIMIZE copies every row, its id and commit version in the
    // table's materialized columns: `tests/engines/test_spark_features.py` has Spark read
    // them).
    let preserved: Vec<(String, Option<String>)> =
        commits(&lake, "synthetic_clustering_rowtracking", 1)
            .into_iter()
            .map(|(_, actions)| {
                let info = &actions
                    .iter()
                    .find(|a| a["commitInfo"].is_object())
                    .unwrap()["commitInfo"];
                let tag = info["tags"]["delta.rowTracking.preserved"].as_str();
                (
                    info["operation"].as_str().unwrap().to_string(),
                    tag.map(str::to_string),
                )
            })
            .collect();
    let write = ("WRITE".to_string(), Some("true".to_string()));
    let optimize = ("OPTIMIZE".to_string(), Some("true".to_string()));
    assert_eq!(preserved, [write.clone(), write.clone(), write, optimize]);
    // VACUUM (deltalake's commits of it refuse these tables): the files no version
    // references go, the rows stay.
    cli_ok(&lake, &["vacuum", "--all", "--retain", "0h", "--force"]);
    for (table, rows) in [
        ("spark_liquid_clustering", 5),
        ("synthetic_clustering_rowtracking", 15),
    ] {
        assert_eq!(lake.rows(table).len(), rows, "{table}");
        let live = lake.with_table(table, None, async |t| {
            t.snapshot().unwrap().log_data().iter().count()
        });
        let parquet = files(&lake.schema_dir().join(table))
            .into_iter()
            .filter(|(f, _)| f.ends_with(".parquet") && !f.starts_with("_delta_log"))
            .count();
        assert_eq!(parquet, live, "{table}: only live files left");
    }
}

/// The columns of a table's schema in its log: `(name, physical name, column id)`.
fn mapped_columns(lake: &TempLake, table: &str) -> Vec<(String, String, i64)> {
    let mut schema = None;
    for (_, actions) in commits(lake, table, 0) {
        for a in actions {
            if let Some(s) = a["metaData"]["schemaString"].as_str() {
                schema = Some(serde_json::from_str::<serde_json::Value>(s).unwrap());
            }
        }
    }
    schema.unwrap()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let m = &f["metadata"];
            (
                f["name"].as_str().unwrap().to_string(),
                m["delta.columnMapping.physicalName"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                m["delta.columnMapping.id"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The top-level columns of a Parquet file: `(name, field id)`.
fn parquet_columns(path: &std::path::Path) -> Vec<(String, Option<i32>)> {
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader as _;
    let schema = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .root_schema()
        .clone();
    schema
        .get_fields()
        .iter()
        .map(|f| {
            let info = f.get_basic_info();
            (f.name().to_string(), info.has_id().then(|| info.id()))
        })
        .collect()
}

/// Column-mapped tables Spark wrote: `id` mode (Spark 3.3 / Delta 2.3), `name` mode with
/// every type, nested ones too (Spark 3.5 / Delta 3.3), and that table after another
/// engine renamed a column and dropped one. A batch of a topic named like each loads and
/// reruns: rows exact and read back by their logical names; bronze's files hold
/// physical names and field ids; each column bronze adds gets a new physical name and
/// the next id, `delta.columnMapping.maxColumnId` following; the renamed column's values
/// land under its physical name, a payload field named like the dropped column becomes
/// a new column; deltalake, Polars and DuckDB read the tables.
#[test]
fn column_mapped_tables_spark_wrote_load_and_rerun() {
    let tables = [
        ("delta_cm_id", 20, r#"{"value":7}"#),
        (
            "delta_cm_name_alltypes",
            6,
            r#"{"StringType":"zoé","IntegerType":5}"#,
        ),
        (
            "synthetic_cm_name_renamed_dropped",
            6,
            r#"{"renamed_string":"zoé","BinaryType":"new"}"#,
        ),
    ];
    let lake = TempLake::new();
    let mut before = std::collections::BTreeMap::new();
    let mut engine_rows = std::collections::BTreeMap::new();
    for (table, _, _) in &tables {
        let fixture = repo().join("fixtures/other_engines").join(table);
        copy_tree(&fixture, &lake.schema_dir().join(table));
        before.insert(*table, mapped_columns(&lake, table));
        engine_rows.insert(*table, rows_as_text(lake.rows(table).batch(), None));
    }
    let lines = |n: usize| -> Vec<String> {
        (0..n)
            .flat_map(|i| {
                tables.iter().map(move |(t, _, p)| {
                    format!(r#"{{"topic":"{t}","message_id":"{t}-{i}","payload":{p}}}"#)
                })
            })
            .collect()
    };
    for (batch, n) in [("b1", 3), ("b2", 2)] {
        assert_loaded(&load_lines(&lake, batch, &lines(n)));
    }
    // OPTIMIZE reads the engine's files and bronze's by their physical names (nested
    // columns too) and writes them as one; the rerun then rewrites that file.
    let text = cli_ok(&lake, &["optimize", "--all"]);
    for (table, _, _) in &tables {
        let files = lake.with_table(table, None, async |t| {
            t.snapshot().unwrap().log_data().iter().count()
        });
        assert_eq!(files, 1, "{table}: {text}");
    }
    assert_loaded(&load_lines(&lake, "b1", &lines(2)));
    for (table, rows, _) in &tables {
        assert_eq!(
            lake.rows(table).len(),
            rows + 4,
            "{table}: the engine's rows and 2 + 2"
        );
        assert_eq!(lake.rows(table).eq("_batch_id", "b1").len(), 2, "{table}");
        let old = &before[table];
        let now = mapped_columns(&lake, table);
        assert_eq!(
            &now[..old.len()],
            &old[..],
            "{table}: the engine's columns as they were"
        );
        let max_old = old.iter().map(|(_, _, id)| *id).max().unwrap();
        let added = &now[old.len()..];
        assert!(
            added.iter().any(|(n, _, _)| n == "_batch_id"),
            "{table}: {added:?}"
        );
        for (i, (name, physical, id)) in added.iter().enumerate() {
            assert!(
                physical.starts_with("col-") && physical != name,
                "{table}: {name} {physical}"
            );
            assert_eq!(*id, max_old + 1 + i as i64, "{table}: {name}");
        }
        let config = commits(&lake, table, 0)
            .into_iter()
            .flat_map(|(_, a)| a)
            .filter_map(|a| {
                a["metaData"]["configuration"]["delta.columnMapping.maxColumnId"]
                    .as_str()
                    .map(str::to_string)
            })
            .next_back()
            .unwrap();
        assert_eq!(
            config,
            (max_old + added.len() as i64).to_string(),
            "{table}"
        );
        // Bronze's files: physical names and field ids only.
        for (_, actions) in commits(&lake, table, 1) {
            for a in actions {
                let Some(path) = a["add"]["path"].as_str() else {
                    continue;
                };
                for (column, id) in parquet_columns(&lake.schema_dir().join(table).join(path)) {
                    let (_, _, want) =
                        now.iter()
                            .find(|(_, p, _)| *p == column)
                            .unwrap_or_else(|| {
                                panic!("{table}: {path} has column {column}, no physical name")
                            });
                    assert_eq!(id, Some(*want as i32), "{table}: {column}");
                }
            }
        }
    }
    // The engine's rows, nested values too, as they were (read back after OPTIMIZE and
    // the rerun rewrote them).
    for (table, rows) in &engine_rows {
        let columns: Vec<String> = before[table].iter().map(|(n, _, _)| n.clone()).collect();
        let now = rows_as_text(lake.rows(table).batch(), Some(&columns));
        assert_eq!(&now, rows, "{table}");
    }
    let ids = lake.rows("delta_cm_id").eq("_batch_id", "b1");
    assert_eq!(ids.values("value"), ["7", "7"]);
    let renamed = lake
        .rows("synthetic_cm_name_renamed_dropped")
        .eq("_batch_id", "b2");
    assert_eq!(renamed.strings("renamed_string"), ["zoé", "zoé"]);
    assert_eq!(renamed.strings("binarytype"), ["new", "new"]);
    let columns = mapped_columns(&lake, "synthetic_cm_name_renamed_dropped");
    let physical = |name: &str| {
        columns
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, p, _)| p.clone())
    };
    let dropped = before["delta_cm_name_alltypes"]
        .iter()
        .find(|(n, _, _)| n == "BinaryType")
        .map(|(_, p, _)| p.clone());
    assert_ne!(
        physical("binarytype"),
        dropped,
        "a new column, not the dropped one"
    );
    assert_eq!(
        physical("renamed_string"),
        before["delta_cm_name_alltypes"]
            .iter()
            .find(|(n, _, _)| n == "StringType")
            .map(|(_, p, _)| p.clone()),
    );
    crate::interop::check(
        &lake,
        "loads into column-mapped tables",
        &Default::default(),
    );
}

/// Each row of `batch` without a `_batch_id` (another engine's) as text, every column (or
/// `columns`, in order) formatted as Arrow displays it, nested values too; sorted.
fn rows_as_text(batch: &arrow::array::RecordBatch, columns: Option<&[String]>) -> Vec<String> {
    use arrow::array::Array as _;
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let names: Vec<String> = match columns {
        Some(c) => c.to_vec(),
        None => batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    };
    let options = FormatOptions::default();
    let formatters: Vec<ArrayFormatter> = names
        .iter()
        .map(|n| {
            ArrayFormatter::try_new(batch.column_by_name(n).unwrap().as_ref(), &options).unwrap()
        })
        .collect();
    let ours = batch.column_by_name("_batch_id");
    let mut out: Vec<String> = (0..batch.num_rows())
        .filter(|&i| ours.is_none_or(|c| c.is_null(i)))
        .map(|i| {
            formatters
                .iter()
                .map(|f| f.value(i).to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect();
    out.sort();
    out
}

/// Files another engine clustered (`clusteringProvider`) stay as they are at
/// `bronze optimize`; the unclustered ones are compacted (the table: Databricks'
/// clustered one, five of its files marked clustered by hand).
#[test]
fn optimize_leaves_files_another_engine_clustered() {
    let table = "synthetic_clustering_rowtracking";
    let (lake, dir) = lake_with_fixture(table);
    let log = dir.join("_delta_log/00000000000000000000.json");
    let mut clustered = Vec::new();
    let text: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let mut a: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(path) = a["add"]["path"].as_str().map(str::to_string)
                && clustered.len() < 5
            {
                a["add"]["clusteringProvider"] = "liquid".into();
                clustered.push(path);
            }
            a.to_string()
        })
        .collect();
    std::fs::write(&log, text.join("\n") + "\n").unwrap();
    let out = cli_ok(&lake, &["optimize", table]);
    assert!(out.contains("10 -> 6 files"), "{out}");
    let live: Vec<String> = lake.with_table(table, None, async |t| {
        t.snapshot()
            .unwrap()
            .log_data()
            .iter()
            .map(|f| f.path().to_string())
            .collect()
    });
    for path in &clustered {
        assert!(live.contains(path), "{path} kept: {live:?}");
    }
    assert_eq!(lake.rows(table).len(), 10);
}

/// A struct's fields reordered and one renamed by another engine (a metadata-only
/// commit, as Delta writes one under column mapping): OPTIMIZE reads Spark's files by
/// each nested field's physical name, not its place, and the rows read the same after.
#[test]
fn optimize_reads_nested_fields_by_physical_name_after_another_engine_reorders_them() {
    let table = "delta_cm_name_alltypes";
    let (lake, dir) = lake_with_fixture(table);
    let first = std::fs::read_to_string(dir.join("_delta_log/00000000000000000000.json")).unwrap();
    let mut metadata = first
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|a| a["metaData"].is_object())
        .unwrap();
    let mut schema: serde_json::Value =
        serde_json::from_str(metadata["metaData"]["schemaString"].as_str().unwrap()).unwrap();
    let nested = schema["fields"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|f| f["name"] == "nested_struct")
        .unwrap();
    let children = nested["type"]["fields"].as_array_mut().unwrap();
    children.reverse();
    let aa = children.iter_mut().find(|f| f["name"] == "aa").unwrap();
    aa["name"] = "renamed_aa".into();
    metadata["metaData"]["schemaString"] = schema.to_string().into();
    let info = serde_json::json!({"commitInfo": {"timestamp": 1, "operation": "CHANGE COLUMN"}});
    std::fs::write(
        dir.join("_delta_log/00000000000000000001.json"),
        format!("{info}\n{metadata}\n"),
    )
    .unwrap();
    let before = rows_as_text(lake.rows(table).batch(), None);
    assert!(
        before.iter().any(|r| r.contains("renamed_aa")),
        "{before:?}"
    );
    let out = cli_ok(&lake, &["optimize", table]);
    assert!(out.contains("2 -> 1 files"), "{out}");
    assert_eq!(rows_as_text(lake.rows(table).batch(), None), before);
}

/// A lake holding the fixture table `table` (`fixtures/other_engines`), and its folder.
fn lake_with_fixture(table: &str) -> (TempLake, std::path::PathBuf) {
    let lake = TempLake::new();
    let dir = lake.schema_dir().join(table);
    copy_tree(&repo().join("fixtures/other_engines").join(table), &dir);
    (lake, dir)
}

/// A rerun of a batch whose corrupt lines were fixed deletes its earlier rows of
/// `_corrupt_records`: an append-only `_corrupt_records` refuses that rerun before any
/// table is written, though the batch has no corrupt line now.
#[test]
fn a_rerun_without_corrupt_lines_checks_corrupt_records_up_front() {
    let lake = TempLake::new();
    let good = r#"{"topic":"fixed","message_id":"m1","payload":{"n":1}}"#.to_string();
    let lines = [good.clone(), "{not json".to_string()];
    assert_loaded(&load_lines(&lake, "c1", &lines));
    assert_eq!(lake.rows("_corrupt_records").len(), 1);
    set_property(&lake, "_corrupt_records", "delta.appendOnly", "true");
    let before = lake.with_table("fixed", None, async |t| t.version().unwrap());
    let report = load_lines(&lake, "c1", &[good]);
    assert_eq!(report.exit_code(), 2, "{}", report.to_text());
    let error = report.tables["fixed"].error.clone().unwrap_or_default();
    assert!(
        error.contains("`_corrupt_records` has delta.appendOnly"),
        "{error}"
    );
    assert!(
        error.contains("no table of the batch was written"),
        "{error}"
    );
    let after = lake.with_table("fixed", None, async |t| t.version().unwrap());
    assert_eq!(after, before, "the topic's table not written");
}
