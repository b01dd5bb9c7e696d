//! Tests of the table layer: writes, replaces, commits and their logs, against real
//! tables in temporary folders.

use super::commit::{Created, WriteJob};
use super::files::TOPICS_TAG;
use super::*;
use crate::batch::BatchKey;
use arrow::array::{ArrayRef, Int64Array, StringArray};

/// A first run of a batch, which records its `txn` in every table it writes.
const FIRST: RunMode = RunMode {
    seen: Seen::Never,
    txns: Txns::InTables,
};

/// The mode of a run whose appends open tables from their log alone
/// (`unloaded_appends`), or of a rerun of a batch seen before.
fn mode(unloaded_appends: bool) -> RunMode {
    RunMode {
        seen: if unloaded_appends {
            Seen::Never
        } else {
            Seen::Before
        },
        ..FIRST
    }
}

/// A key without landing paths: rows and predicates by batch id alone.
fn k(id: &str) -> BatchKey {
    BatchKey::of_id(id)
}

fn storage(dir: &std::path::Path) -> Storage {
    Storage {
        schema_url: Url::from_directory_path(dir).unwrap(),
        root_store: None,
        target_file_size: 128 << 20,
        compression: Compression::SNAPPY,
        auto_compact_at: None,
        options: Default::default(),
        clock: Default::default(),
        opened: Default::default(),
    }
}

fn part(topic: &str, rows: i64) -> Part {
    part_of(topic, rows, "b1")
}

/// `rows` rows of `topic` in batch `batch_id`.
fn part_of(topic: &str, rows: i64, batch_id: &str) -> Part {
    let ids: Vec<String> = (0..rows).map(|i| format!("{topic}-{i}")).collect();
    // Lineage never null, payload columns nullable: as the flattener makes them.
    let batch = RecordBatch::try_from_iter_with_nullable(vec![
        (
            "_batch_id",
            Arc::new(StringArray::from(vec![batch_id; rows as usize])) as ArrayRef,
            false,
        ),
        (
            "_topic",
            Arc::new(StringArray::from(vec![topic; rows as usize])) as ArrayRef,
            false,
        ),
        ("_id", Arc::new(StringArray::from(ids)) as ArrayRef, false),
        (
            "seq",
            Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
            true,
        ),
    ])
    .unwrap();
    Part {
        topic: topic.to_string(),
        batches: vec![batch],
        evolution: crate::config::Evolution::Add,
    }
}

/// A table fed by thousands of files keeps `_source_file` dictionary-encoded (one
/// path per file, a small key per row) where other string columns fall back to plain
/// past [`DICTIONARY_PAGE_LIMIT`]: the path is not written again on every row.
#[test]
fn source_files_stay_a_dictionary_past_the_general_limit() {
    use parquet::file::reader::{FileReader as _, SerializedFileReader};
    let (files, per_file) = (4_000usize, 5usize);
    let path =
        |f: usize| format!("/landing/market/events/batch_id=2026-04-05_001/part-{f:0>80}.jsonl");
    let rows = files * per_file;
    let source: Vec<String> = (0..rows).map(|r| path(r / per_file)).collect();
    // Another column of the same distinct values without the exemption.
    let batch = RecordBatch::try_from_iter(vec![
        (
            "_source_file",
            Arc::new(StringArray::from(source.clone())) as ArrayRef,
        ),
        ("other", Arc::new(StringArray::from(source)) as ArrayRef),
    ])
    .unwrap();
    assert!(files * path(0).len() > DICTIONARY_PAGE_LIMIT);
    let mut bytes = Vec::new();
    let props = writer_properties(Compression::UNCOMPRESSED);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
    let group = reader.metadata().row_group(0);
    let (source, other) = (group.column(0), group.column(1));
    // One copy of each path (the dictionary) and small keys, against a path per row.
    let one_copy = (files * path(0).len()) as i64;
    assert!(
        source.uncompressed_size() < one_copy * 3 / 2,
        "{}",
        source.uncompressed_size()
    );
    assert!(
        other.uncompressed_size() > one_copy * 3,
        "{}",
        other.uncompressed_size()
    );
}

/// The key columns of a child table as written: `_idx` dictionary-encoded, the
/// per-row keys plain; no statistics on `_parent_id`, `_idx` and `_line`, page
/// statistics (a column index) on `_id`, file-level ones on `_root_id`.
#[test]
fn key_columns_get_their_encodings_and_statistics() {
    use parquet::basic::Encoding;
    use parquet::file::reader::{FileReader as _, SerializedFileReader};
    let rows = 3_000usize;
    let root = |r: usize| format!("m-{:06}", r / 30);
    let parent = |r: usize| format!("{}/lots/{}", root(r), r / 6 % 5);
    let string = |f: &dyn Fn(usize) -> String| {
        Arc::new(StringArray::from_iter_values((0..rows).map(f))) as ArrayRef
    };
    let batch = RecordBatch::try_from_iter(vec![
        (
            naming::ID,
            string(&|r| format!("{}/legs/{}", parent(r), r % 6)),
        ),
        (naming::PARENT_ID, string(&parent)),
        (naming::ROOT_ID, string(&root)),
        (
            naming::IDX,
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|r| r % 6),
            )) as ArrayRef,
        ),
        (
            naming::LINE,
            Arc::new(Int64Array::from_iter_values(
                (0..rows as i64).map(|r| r / 30),
            )) as ArrayRef,
        ),
    ])
    .unwrap();
    let mut bytes = Vec::new();
    let props = writer_properties(Compression::SNAPPY);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).unwrap();
    let group = reader.metadata().row_group(0);
    let column = |name: &str| {
        (0..group.num_columns())
            .map(|i| group.column(i))
            .find(|c| c.column_path().string() == name)
            .unwrap()
    };
    let dictionary = |name: &str| {
        column(name)
            .encodings()
            .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY))
    };
    assert!(dictionary(naming::IDX));
    for name in [naming::ID, naming::PARENT_ID, naming::ROOT_ID, naming::LINE] {
        assert!(!dictionary(name), "{name}");
    }
    for name in [naming::PARENT_ID, naming::IDX, naming::LINE] {
        assert!(column(name).statistics().is_none(), "{name}");
    }
    for name in [naming::ID, naming::ROOT_ID] {
        assert!(column(name).statistics().is_some(), "{name}");
    }
    assert!(column(naming::ID).column_index_offset().is_some());
    assert!(column(naming::ROOT_ID).column_index_offset().is_none());
}

/// A table kept from a run's commit ([`Opener::keep_warm`]) is brought up to date
/// with what any writer committed since before the run's next write plans on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_table_sees_other_writers_commits_before_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let write = |s: &Storage, topic: &str, rows: i64, batch: &str| {
        let s = s.clone();
        let (name, key, p) = (name.clone(), k(batch), part_of(topic, rows, batch));
        async move {
            s.committer(FIRST)
                .replace_parts(&name, vec![p], &key, Write::Replace)
                .await
                .unwrap()
        }
    };
    write(&s, "quote", 5, "b1").await;
    let (_, written) = write(&s, "trade", 3, "b1").await;
    s.opener()
        .keep_warm(&name, &written.expect("a loaded write").table);
    assert!(s.opener().is_warm(&name));
    // Another process (its own storage) replaces batch b1's quote rows and adds b2.
    let other = storage(dir.path());
    write(&other, "quote", 2, "b1").await;
    write(&other, "quote", 4, "b2").await;
    // This run's next write: the kept table at the latest version, and its replace
    // of b1's trade rows keeps the other writer's rows.
    let ((c, _), _) = write(&s, "trade", 1, "b1").await;
    assert!(!s.opener().is_warm(&name), "taken by the write");
    assert_eq!(c.version, 4);
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(4), 2 + 4 + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_table_is_created_in_one_commit_like_a_write_builder_would() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let ((c, outcomes), written) = s
        .committer(FIRST)
        .replace_parts(&name, vec![part("quote", 5)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    // Created at version 0; nothing to maintain, so no table state was loaded.
    assert_eq!((c.version, c.files_added, c.rows_added), (0, 1, 5));
    assert_eq!(outcomes[0].rows, 5);
    assert!(written.is_none());

    let t = s
        .opener()
        .open(&name)
        .await
        .unwrap()
        .expect("a Delta table");
    let snapshot = t.snapshot().unwrap();
    let protocol = snapshot.protocol();
    assert_eq!(
        (protocol.min_reader_version(), protocol.min_writer_version()),
        (1, 2)
    );
    let config = snapshot.metadata().configuration().clone();
    for (k, v) in upkeep::default_table_properties(128 << 20) {
        assert_eq!(config.get(k), Some(&v), "{k}");
    }
    assert_eq!(
        config.get(BATCH_TXN_PROPERTY).map(String::as_str),
        Some("true")
    );
    let files: Vec<_> = snapshot.log_data().iter().collect();
    assert_eq!(files.len(), 1);
    let stats: serde_json::Value =
        serde_json::from_str(&files[0].stats().expect("file statistics")).unwrap();
    assert_eq!(stats["numRecords"], 5);
    assert_eq!(stats["minValues"]["_id"], "quote-0");
    assert_eq!(stats["maxValues"]["seq"], 4);

    // Each commit of a batch's rows records the batch.
    let txn = |version| {
        commit_actions(dir.path(), "quote", version)
            .into_iter()
            .filter_map(|a| a.get("txn").cloned())
            .collect::<Vec<_>>()
    };
    assert_eq!(txn(0).len(), 1);
    assert_eq!(txn(0)[0]["appId"], "bronze/b1");

    // The next batch's rows go in as an append on the unloaded table (its log has
    // no `txn` of b2): not due a checkpoint, so nothing to maintain.
    let ((c, _), written) = s
        .committer(FIRST)
        .replace_parts(
            &name,
            vec![part_of("quote", 3, "b2")],
            &k("b2"),
            Write::Replace,
        )
        .await
        .unwrap();
    assert_eq!((c.version, c.rows_added), (1, 3));
    assert!(written.is_none());
    assert_eq!(txn(1)[0]["appId"], "bronze/b2");
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(1), 8));

    // A rerun of b2 finds its `txn`: the loaded path replaces its rows.
    let ((c, _), _) = s
        .committer(FIRST)
        .replace_parts(
            &name,
            vec![part_of("quote", 2, "b2")],
            &k("b2"),
            Write::Replace,
        )
        .await
        .unwrap();
    assert_eq!((c.version, c.rows_added), (2, 2));
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 5 + 2);
    assert!(s.opener().batch_seen(&name, &k("b2")).await);
    assert!(!s.opener().batch_seen(&name, &k("b3")).await);
    assert!(
        !s.opener()
            .batch_seen(&TableName::for_topic("none"), &k("b2"))
            .await
    );
    // A log that cannot be read may hold it: seen.
    let torn = TableName::for_topic("torn");
    std::fs::create_dir_all(dir.path().join("torn/_delta_log")).unwrap();
    std::fs::write(
        dir.path().join("torn/_delta_log/00000000000000000000.json"),
        b"{\"protocol\": not json",
    )
    .unwrap();
    assert!(s.opener().batch_seen(&torn, &k("b2")).await);
}

/// `_corrupt_records` keeps each line's bytes in a binary column: its table is created
/// by the direct commit too (version 0 with its rows, nothing read back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_a_binary_column_is_created_in_one_direct_commit() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::system("_bytes");
    let batch = RecordBatch::try_from_iter_with_nullable(vec![
        (
            "_batch_id",
            Arc::new(StringArray::from(vec!["b1"; 2])) as ArrayRef,
            false,
        ),
        (
            "_corrupt_bytes",
            Arc::new(arrow::array::BinaryArray::from_iter_values([
                b"{\"a\":".as_slice(),
                b"\xff\xfe",
            ])) as ArrayRef,
            false,
        ),
    ])
    .unwrap();
    let c = s
        .committer(FIRST)
        .replace(&name, batch, &k("b1"))
        .await
        .unwrap();
    assert_eq!((c.version, c.files_added, c.rows_added), (0, 1, 2));
    let actions = commit_actions(dir.path(), "_bytes", 0);
    let info = actions
        .iter()
        .find_map(|a| a.get("commitInfo"))
        .expect("commitInfo");
    let metrics: Vec<&String> = info["operationMetrics"]
        .as_object()
        .expect("operationMetrics")
        .keys()
        .collect();
    assert_eq!(
        metrics,
        ["execution_time_ms", "num_added_files", "num_added_rows"],
        "{info}"
    );
    let protocol = actions.iter().find_map(|a| a.get("protocol")).unwrap();
    assert_eq!(
        (&protocol["minReaderVersion"], &protocol["minWriterVersion"]),
        (&serde_json::json!(1), &serde_json::json!(2))
    );
    let t = s
        .opener()
        .open(&name)
        .await
        .unwrap()
        .expect("a Delta table");
    assert_eq!(live_rows(&t), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_skip_the_log_replay_until_a_checkpoint_is_due() {
    for unloaded in [true, false] {
        appends_until_a_checkpoint(unloaded).await;
    }
}

/// Ten batches appended to one table, with or without [`Opener::open_unloaded`].
async fn appends_until_a_checkpoint(unloaded: bool) {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let log = dir.path().join("quote/_delta_log");
    // Ids that sort after every earlier one: each load is a plain append.
    for day in 1..=10u64 {
        let mut p = part("quote", 4);
        let id = format!("b{day:02}");
        let ids = StringArray::from(vec![id.as_str(); 4]);
        let b = &p.batches[0];
        p.batches[0] = RecordBatch::try_new(
            b.schema(),
            vec![
                Arc::new(ids),
                b.column(1).clone(),
                b.column(2).clone(),
                b.column(3).clone(),
            ],
        )
        .unwrap();
        let ((c, _), written) = s
            .committer(mode(unloaded))
            .replace_parts(&name, vec![p], &k(&id), Write::Replace)
            .await
            .unwrap();
        let version = day - 1;
        assert_eq!(c.version, version);
        let checkpoint = log.join(format!("{version:020}.checkpoint.parquet"));
        match version {
            0 => assert!(written.is_none(), "created: nothing to maintain"),
            // Version 9 is due a checkpoint (interval 10): written, and the state is
            // the new version's.
            9 => assert_checkpointed(written, 9, &checkpoint),
            // Opened unloaded: nothing loaded, nothing to maintain.
            _ if unloaded => {
                assert!(written.is_none());
                assert!(!checkpoint.exists());
            }
            // Otherwise the state from before the commit, the new file beside it.
            _ => {
                let w = written.unwrap();
                assert_eq!(w.table.version(), Some(version - 1));
                assert_eq!(w.pending.adds.len(), 1);
                assert!(w.pending.adds[0] > 0);
                assert!(w.pending.removes.is_empty());
                assert!(!checkpoint.exists());
            }
        }
    }
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(t.version(), Some(9));
    assert_eq!(t.snapshot().unwrap().log_data().iter().count(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reruns_replacing_whole_files_skip_the_log_replay_until_a_checkpoint_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let log = dir.path().join("quote/_delta_log");
    let live = |t: &DeltaTable| -> Vec<String> {
        t.snapshot()
            .unwrap()
            .log_data()
            .iter()
            .map(|f| f.path().into_owned())
            .collect()
    };
    // The same batch loaded ten times: a create, then nine replaces of its one file.
    let mut before: Vec<String> = Vec::new();
    for version in 0..10u64 {
        let ((c, _), written) = s
            .committer(FIRST)
            .replace_parts(&name, vec![part("quote", 4)], &k("b1"), Write::Replace)
            .await
            .unwrap();
        assert_eq!(c.version, version);
        let checkpoint = log.join(format!("{version:020}.checkpoint.parquet"));
        match version {
            0 => assert!(written.is_none(), "created: nothing to maintain"),
            // Due a checkpoint (interval 10): written, the state the new version's.
            9 => assert_checkpointed(written, 9, &checkpoint),
            // The state from before the commit, with the file it replaced and the
            // new one's size beside it.
            _ => {
                let w = written.unwrap();
                assert_eq!(w.table.version(), Some(version - 1));
                assert_eq!(live(&w.table), before);
                assert_eq!(w.pending.removes, before);
                assert_eq!(w.pending.adds.len(), 1);
                assert!(!checkpoint.exists());
            }
        }
        let t = s.opener().open(&name).await.unwrap().unwrap();
        assert_eq!(live_rows(&t), 4);
        before = live(&t);
        assert_eq!(before.len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_compaction_after_a_replace_does_not_count_the_files_it_removed() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    for id in ["b1", "b2", "b3"] {
        s.committer(FIRST)
            .replace_parts(&name, vec![part_of("quote", 4, id)], &k(id), Write::Replace)
            .await
            .unwrap();
    }
    let rerun = |id: &'static str| {
        let s = s.clone();
        let name = name.clone();
        async move {
            let (_, written) = s
                .committer(FIRST)
                .replace_parts(&name, vec![part_of("quote", 4, id)], &k(id), Write::Replace)
                .await
                .unwrap();
            written.unwrap()
        }
    };
    // Three small files before and after the rerun of b2 (one removed, one added):
    // under a trigger of four, no compaction.
    let w = rerun("b2").await;
    assert_eq!(w.pending.removes.len(), 1);
    let compacted = upkeep::after_commit(&s, &name, w, 128 << 20, Some(4))
        .await
        .unwrap();
    assert!(compacted.is_none(), "{compacted:?}");
    // The same after a rerun of b3, were the removed file counted: four, compacted.
    let mut w = rerun("b3").await;
    w.pending.removes.clear();
    let compacted = upkeep::after_commit(&s, &name, w, 128 << 20, Some(4))
        .await
        .unwrap()
        .expect("compacted");
    assert_eq!(compacted.files_after, 1);
}

/// A table of three batches in three files, and two handles on it as of then.
async fn three_files_two_stale_handles(s: &Storage, name: &TableName) -> [DeltaTable; 2] {
    for id in ["b1", "b2", "b3"] {
        s.committer(FIRST)
            .replace_parts(name, vec![part_of("quote", 4, id)], &k(id), Write::Replace)
            .await
            .unwrap();
    }
    let open = || async { s.opener().open(name).await.unwrap().unwrap() };
    [open().await, open().await]
}

/// deltalake 1.1's conflict check ignores removes of `dataChange = false`: without
/// `StrictCommits`, the second compaction of the same files commits too, and every
/// row is there twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactions_of_the_same_files_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let [a, b] = three_files_two_stale_handles(&s, &name).await;
    let compact = |t| upkeep::optimize("quote", t, 128 << 20, &[], Compression::SNAPPY);
    let first = compact(a).await.unwrap();
    assert_eq!((first.files_removed, first.files_added), (3, 1));
    let Err(second) = compact(b).await else {
        panic!("a second compaction of removed files committed");
    };
    assert!(is_replannable_conflict(&second), "{second:?}");
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(3), 12));
}

/// Row tracking turned on in `name` (as another engine would), and two handles on it
/// as of then.
async fn row_tracking_two_stale_handles(s: &Storage, name: &TableName) -> [DeltaTable; 2] {
    let [t, _] = three_files_two_stale_handles(s, name).await;
    t.add_feature()
        .with_feature(deltalake::kernel::TableFeatures::RowTracking)
        .with_feature(deltalake::kernel::TableFeatures::DomainMetadata)
        .with_allow_protocol_versions_increase(true)
        .await
        .unwrap();
    let open = || async { s.opener().open(name).await.unwrap().unwrap() };
    [open().await, open().await]
}

/// The `(baseRowId, numRecords, defaultRowCommitVersion)` of each file commit
/// `version` adds, and the row-id high-water mark it sets.
fn row_ids_of(dir: &std::path::Path, version: u64) -> (Vec<(i64, i64, i64)>, Option<i64>) {
    let actions = commit_actions(dir, "quote", version);
    let adds = actions
        .iter()
        .filter(|a| a["add"].is_object())
        .map(|a| {
            let stats: serde_json::Value =
                serde_json::from_str(a["add"]["stats"].as_str().unwrap()).unwrap();
            (
                a["add"]["baseRowId"].as_i64().unwrap(),
                stats["numRecords"].as_i64().unwrap(),
                a["add"]["defaultRowCommitVersion"].as_i64().unwrap(),
            )
        })
        .collect();
    let mark = actions.iter().find_map(|a| {
        (a["domainMetadata"]["domain"] == planned::ROW_TRACKING_DOMAIN)
            .then(|| planned::high_water_mark(a["domainMetadata"]["configuration"].as_str()?))?
    });
    (adds, mark)
}

/// Two appends planned on the same version of a row-tracking table: the second loses
/// the version, is planned again for the next one above the first's high-water mark
/// (never the same bytes), and both commit with disjoint row ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_racing_on_a_row_tracking_table_get_disjoint_row_ids() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let [a, b] = row_tracking_two_stale_handles(&s, &name).await;
    let v = a.version().unwrap();
    let append = |t: DeltaTable, id: &'static str, rows| {
        let s = &s;
        async move {
            let batch = part_of("quote", rows, id).batches.remove(0);
            s.committer(FIRST)
                .append_files(&t, &[batch], None)
                .await
                .unwrap()
        }
    };
    let (first, _) = append(a, "b4", 5).await;
    let (second, _) = append(b, "b5", 7).await;
    assert_eq!((first.version, second.version), (v + 1, v + 2));
    let (adds, mark) = row_ids_of(dir.path(), v + 1);
    assert_eq!((adds, mark), (vec![(0, 5, (v + 1) as i64)], Some(4)));
    let (adds, mark) = row_ids_of(dir.path(), v + 2);
    assert_eq!((adds, mark), (vec![(5, 7, (v + 2) as i64)], Some(11)));
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 12 + 12);
}

/// Two compactions of the same files of a row-tracking table: the first removes them
/// with their row ids and says the copied rows did not keep them; the second, planned
/// on the version before, is refused as a conflict to plan again (nothing retried
/// with stale row ids).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactions_racing_on_a_row_tracking_table_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let [a, b] = row_tracking_two_stale_handles(&s, &name).await;
    let v = a.version().unwrap();
    // Files with row ids, to be removed.
    let batch = part_of("quote", 2, "b4").batches.remove(0);
    s.committer(FIRST)
        .append_files(&a, &[batch], None)
        .await
        .unwrap();
    let [a, b] = [a, b].map(|mut t| {
        futures::executor::block_on(async { t.update_state().await.unwrap() });
        t
    });
    let compact = |t| upkeep::optimize("quote", t, 128 << 20, &[], Compression::SNAPPY);
    let first = compact(a).await.unwrap();
    assert_eq!((first.files_removed, first.files_added), (4, 1));
    let actions = commit_actions(dir.path(), "quote", v + 2);
    let removed_ids: Vec<Option<i64>> = actions
        .iter()
        .filter(|x| x["remove"].is_object())
        .map(|x| x["remove"]["baseRowId"].as_i64())
        .collect();
    assert_eq!(removed_ids.len(), 4);
    assert!(removed_ids.contains(&Some(0)), "{removed_ids:?}");
    let (adds, mark) = row_ids_of(dir.path(), v + 2);
    assert_eq!((adds, mark), (vec![(2, 14, (v + 2) as i64)], Some(15)));
    let Err(second) = compact(b).await else {
        panic!("a second compaction of removed files committed");
    };
    assert!(is_replannable_conflict(&second), "{second:?}");
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(v + 2), 14));
}

/// A replace planned on files a compaction rewrote meanwhile would remove files
/// already gone and leave the batch's rows in the compacted one: refused as a
/// conflict (deltalake's own check finds the batch's rows in the compacted file's
/// statistics), planned again by the writer, which then replaces them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replace_planned_before_a_compaction_of_its_files_is_planned_again() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    let [stale, b] = three_files_two_stale_handles(&s, &name).await;
    upkeep::optimize("quote", b, 128 << 20, &[], Compression::SNAPPY)
        .await
        .unwrap();
    let rerun = part_of("quote", 2, "b2").batches.remove(0);
    let handle = s.handle(&name).unwrap();
    let key = k("b2");
    let replace = Some(files::BatchRows::of(&key, files::Folders::SourceFile));
    let rerun = [rerun];
    let job = WriteJob {
        committer: s.committer(FIRST),
        table: &name,
        handle: &handle,
        batches: &rerun,
        key: &key,
        files: files::BatchFiles::Mixed,
        rows: replace,
    };
    let Err(e) = job.rewrite(Some(stale)).await else {
        panic!("a replace of files a compaction removed committed");
    };
    assert!(is_replannable_conflict(&e), "{e:?}");
    // Planned again (what `write_parts` does): the batch's 4 rows become 2.
    s.committer(FIRST)
        .replace_parts(&name, vec![part_of("quote", 2, "b2")], &key, Write::Replace)
        .await
        .unwrap();
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 10);
}

/// A commit due a checkpoint: the checkpoint written, the state the new version's.
fn assert_checkpointed(written: Option<WrittenTable>, version: u64, checkpoint: &std::path::Path) {
    let w = written.unwrap();
    assert!(w.pending.is_empty());
    assert_eq!(w.table.version(), Some(version));
    assert!(checkpoint.is_file(), "{}", checkpoint.display());
}

/// `storage` reached through an object store (the local file system as one), as
/// [`Opener::preopen`] needs, with pre-opens of its own.
fn store_storage(dir: &std::path::Path) -> Storage {
    Storage {
        root_store: Some(Arc::new(
            deltalake::logstore::object_store::local::LocalFileSystem::new(),
        )),
        ..storage(dir)
    }
}

/// A run of `key` on `dir`'s schema whose tables were pre-opened (the landing files
/// in), and whether `table`'s pre-open is waiting for its write.
async fn preopened_run(
    dir: &std::path::Path,
    key: &BatchKey,
    unloaded_appends: bool,
    table: &TableName,
) -> (Storage, bool) {
    let run = store_storage(dir);
    let (_landed, rx) = tokio::sync::watch::channel(true);
    let offering = run.opened.ahead.offering();
    run.opener()
        .preopen(mode(unloaded_appends), key.clone(), rx, offering)
        .await;
    let waiting = run.opened.ahead.waiting(table);
    (run, waiting)
}

/// A table holding 2 rows of b1; a run of `key` that opened it ahead (loaded or
/// not); then another writer's append of 3 rows of b3 (version 1), after the
/// pre-open. Returns the folder, the other writer and the run.
async fn opened_ahead_then_committed_to(
    key: &str,
    unloaded_appends: bool,
) -> (tempfile::TempDir, Storage, Storage) {
    let dir = tempfile::tempdir().unwrap();
    let other = storage(dir.path());
    let name = TableName::for_topic("quote");
    let b1 = k("b1");
    let first = vec![part_of("quote", 2, "b1")];
    other
        .committer(FIRST)
        .replace_parts(&name, first, &b1, Write::Replace)
        .await
        .unwrap();
    let (run, waiting) = preopened_run(dir.path(), &k(key), unloaded_appends, &name).await;
    assert!(waiting, "opened ahead");
    let b3 = k("b3");
    let meanwhile = vec![part_of("quote", 3, "b3")];
    other
        .committer(FIRST)
        .replace_parts(&name, meanwhile, &b3, Write::Replace)
        .await
        .unwrap();
    (dir, other, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_opened_ahead_and_committed_to_meanwhile_gets_the_next_version() {
    // b2's run opened the table from its log alone at version 0; its append finds
    // version 1 taken and commits version 2, nothing lost.
    let (_dir, other, run) = opened_ahead_then_committed_to("b2", true).await;
    let name = TableName::for_topic("quote");
    let ((c, _), _) = run
        .committer(mode(true))
        .replace_parts(
            &name,
            vec![part_of("quote", 4, "b2")],
            &k("b2"),
            Write::Replace,
        )
        .await
        .unwrap();
    assert!(!run.opened.ahead.waiting(&name), "its pre-open taken");
    assert_eq!((c.version, c.rows_added), (2, 4));
    let t = other.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(2), 9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_loaded_ahead_and_committed_to_meanwhile_replaces_only_its_rows() {
    // A rerun of b1 (seen before) loaded the table with its files at version 0; its
    // replace of b1's file finds version 1 taken: checked against it (no conflict:
    // b3 touched no file of b1), committed as version 2, b3's rows kept.
    let (_dir, other, run) = opened_ahead_then_committed_to("b1", false).await;
    let name = TableName::for_topic("quote");
    let ((c, _), _) = run
        .committer(mode(false))
        .replace_parts(
            &name,
            vec![part_of("quote", 5, "b1")],
            &k("b1"),
            Write::Replace,
        )
        .await
        .unwrap();
    assert!(!run.opened.ahead.waiting(&name), "its pre-open taken");
    assert_eq!((c.version, c.rows_added), (2, 5));
    let t = other.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(2), 8));
}

fn live_rows(t: &DeltaTable) -> i64 {
    t.snapshot()
        .unwrap()
        .log_data()
        .iter()
        .map(|f| {
            let stats: serde_json::Value = serde_json::from_str(&f.stats().unwrap()).unwrap();
            stats["numRecords"].as_i64().unwrap()
        })
        .sum()
}

/// The actions of commit `version` of `table`, as JSON values.
fn commit_actions(dir: &std::path::Path, table: &str, version: u64) -> Vec<serde_json::Value> {
    let log = dir
        .join(table)
        .join(format!("_delta_log/{version:020}.json"));
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Loads `first` as batch `b1`, then reruns `b1` with `rerun`; what the rerun committed.
async fn load_then_rerun(
    s: &Storage,
    table: &TableName,
    first: Vec<Part>,
    rerun: Part,
) -> Committed {
    s.committer(FIRST)
        .replace_parts(table, first, &k("b1"), Write::Replace)
        .await
        .unwrap();
    let ((c, _), _) = s
        .committer(FIRST)
        .replace_parts(table, vec![rerun], &k("b1"), Write::Replace)
        .await
        .unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_drops_whole_files_of_its_batch_and_topic_or_plans_when_files_mix() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    // A topic's own table: its files hold one batch and one topic.
    let quote = TableName::for_topic("quote");
    let c = load_then_rerun(&s, &quote, vec![part("quote", 5)], part("quote", 3)).await;
    assert_eq!((c.version, c.rows_added), (1, 3));
    let actions = commit_actions(dir.path(), "quote", 1);
    let count = |kind: &str| actions.iter().filter(|a| a.get(kind).is_some()).count();
    assert_eq!((count("remove"), count("add")), (1, 1));
    let info = &actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
    assert_eq!(info["operationParameters"]["mode"], "Overwrite");
    let predicate = info["operationParameters"]["predicate"].as_str().unwrap();
    assert!(
        predicate.contains("_batch_id") && predicate.contains("quote"),
        "{predicate}"
    );
    let t = s.opener().open(&quote).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 3);

    // A shared table whose file mixes two topics: replacing one topic's rows goes
    // through the rewrite, which keeps the other topic's rows.
    let shared = TableName::for_topic("shared");
    let both = vec![part("quote", 5), part("trade", 4)];
    let c = load_then_rerun(&s, &shared, both, part("quote", 2)).await;
    assert_eq!(c.version, 1);
    let t = s.opener().open(&shared).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 4 + 2);
    let actions = commit_actions(dir.path(), "shared", 1);
    let info = actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
    assert_eq!(info["operation"], "WRITE");
    assert!(
        info["operationMetrics"].get("execution_time_ms").is_some(),
        "the rewrite records its execution time: {info}"
    );

    // A file of two topics rerun with both (as a child table's rerun is): its
    // `bronze.topics` tag names them, so it goes whole, without a plan.
    let both = || vec![part("quote", 5), part("trade", 4)];
    let fresh = TableName::for_topic("fresh");
    s.committer(FIRST)
        .replace_parts(&fresh, both(), &k("b1"), Write::Replace)
        .await
        .unwrap();
    let tags: Vec<_> = commit_actions(dir.path(), "fresh", 0)
        .iter()
        .filter_map(|a| a["add"]["tags"][TOPICS_TAG].as_str().map(str::to_string))
        .collect();
    assert_eq!(tags, vec![r#"["quote","trade"]"#.to_string()]);
    let ((c, _), _) = s
        .committer(FIRST)
        .replace_parts(
            &fresh,
            vec![part("quote", 2), part("trade", 3)],
            &k("b1"),
            Write::Replace,
        )
        .await
        .unwrap();
    assert_eq!((c.version, c.rows_added), (1, 5));
    let actions = commit_actions(dir.path(), "fresh", 1);
    let count = |kind: &str| actions.iter().filter(|a| a.get(kind).is_some()).count();
    assert_eq!((count("remove"), count("add")), (1, 1));
    let info = actions.iter().find_map(|a| a.get("commitInfo")).unwrap();
    assert_eq!(info["operationParameters"]["mode"], "Overwrite");
    // The whole-file commit records what it removed, for `history`.
    let metrics = &info["operationMetrics"];
    assert_eq!(
        (&metrics["num_removed_files"], &metrics["num_removed_rows"]),
        (&serde_json::json!(1), &serde_json::json!(9)),
        "{info}"
    );
    let t = s.opener().open(&fresh).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 5);
    // A topic beside them in the file that this write does not replace: planned.
    let ((c, _), _) = s
        .committer(FIRST)
        .replace_parts(&fresh, vec![part("quote", 1)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    assert_eq!(c.version, 2);
    let t = s.opener().open(&fresh).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 3 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_another_writer_created_first_is_left_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    // Two writers both saw no table; the first creates it.
    let (handle, existing) = s.opener().open_or_new(&name).await.unwrap();
    assert!(existing.is_none());
    s.ensure_local_dir(&name).unwrap();
    let first = s
        .committer(FIRST)
        .create_with_files(&handle, &part("quote", 5).batches, Some(&k("b1")))
        .await;
    assert!(matches!(
        first,
        Ok(Created::Committed(Committed { version: 0, .. }))
    ));
    // The second finds version 0 taken and commits nothing (its rows then go through
    // the existing-table path); the first writer's schema and rows stay.
    let mut other = part("other", 3).batches;
    other[0] = other[0].project(&[0, 1, 2]).unwrap();
    let second = s
        .committer(FIRST)
        .create_with_files(&handle, &other, Some(&k("b2")))
        .await;
    assert!(matches!(second, Ok(Created::Raced)), "{:?}", second.err());
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(t.version(), Some(0));
    let snapshot = t.snapshot().unwrap();
    let schema = snapshot.snapshot().arrow_schema();
    assert!(schema.field_with_name("seq").is_ok());
    assert_eq!(snapshot.log_data().iter().count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unloaded_append_whose_version_was_taken_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("quote");
    s.committer(FIRST)
        .replace_parts(&name, vec![part("quote", 5)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    let u = s
        .opener()
        .open_unloaded(&name, &k("b2"), Write::Replace, FIRST)
        .await
        .expect("unloaded");
    assert_eq!(u.version, 0);
    // Another writer commits version 1 meanwhile.
    s.committer(FIRST)
        .replace_parts(&name, vec![part("quote", 4)], &k("b3"), Write::Replace)
        .await
        .unwrap();
    let appended = s
        .committer(FIRST)
        .append_unloaded(&name, &u, &part("quote", 3).batches, &k("b2"))
        .await
        .unwrap();
    assert!(appended.is_none());
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(1), 5 + 4));
    assert!(!s.opener().batch_seen(&name, &k("b2")).await);
}

/// A table created empty through deltalake with a variant column gets the protocol
/// bronze's own create writes: Spark refuses one whose NOT NULL columns lack `invariants`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_empty_with_a_variant_column_lists_spark_s_features() {
    use arrow::array::{Array, BinaryArray, StructArray};
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    let name = TableName::for_topic("ev");
    let handle = s.opener().create_handle(&name).await.unwrap();
    let rows = part("ev", 2).batches;
    let binary = || Arc::new(BinaryArray::from(vec![&[1u8, 0, 0][..], &[0u8][..]])) as ArrayRef;
    let doc = StructArray::new(
        crate::flatten::variant_fields(),
        vec![binary(), binary()],
        None,
    );
    let mut fields: Vec<_> = rows[0].schema().fields().iter().cloned().collect();
    fields.push(Arc::new(arrow::datatypes::Field::new(
        "doc",
        doc.data_type().clone(),
        true,
    )));
    let mut columns = rows[0].columns().to_vec();
    columns.push(Arc::new(doc));
    let schema = Arc::new(arrow::datatypes::Schema::new(fields));
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let t = s
        .committer(FIRST)
        .create_empty(&name, &handle, &[batch])
        .await
        .unwrap();
    let protocol = t.snapshot().unwrap().protocol().clone();
    assert_eq!(
        (protocol.min_reader_version(), protocol.min_writer_version()),
        (3, 7)
    );
    let writer = format!("{:?}", protocol.writer_features());
    for feature in ["AppendOnly", "Invariants", "VariantType"] {
        assert!(writer.contains(feature), "{writer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_tables_that_record_every_batch_are_opened_unloaded() {
    let dir = tempfile::tempdir().unwrap();
    let s = storage(dir.path());
    // Created by another writer (or an older bronze): rows of b1, no `txn`, no
    // property. Never opened unloaded, and b1's rows are replaced, not duplicated.
    let name = TableName::for_topic("quote");
    let handle = s.opener().create_handle(&name).await.unwrap();
    let rows = part("quote", 5).batches;
    let t = s
        .committer(FIRST)
        .create_empty(&name, &handle, &rows)
        .await
        .unwrap();
    let append = rewrite::Rewrite {
        rows: None,
        txn: None,
    };
    s.rewriter()
        .rewrite(&name, &t, &rows, append)
        .await
        .unwrap();
    assert!(
        s.opener()
            .open_unloaded(&name, &k("b1"), Write::Replace, FIRST)
            .await
            .is_err()
    );
    s.committer(FIRST)
        .replace_parts(&name, vec![part("quote", 2)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    let t = s.opener().open(&name).await.unwrap().unwrap();
    assert_eq!(live_rows(&t), 2);

    // Bronze's own table, until `txn`s may expire.
    let trade = TableName::for_topic("trade");
    s.committer(FIRST)
        .replace_parts(&trade, vec![part("trade", 5)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    assert!(
        s.opener()
            .open_unloaded(&trade, &k("b2"), Write::Replace, FIRST)
            .await
            .is_ok()
    );
    // Its own batch: only for a plain append (a later slice of it).
    assert!(
        s.opener()
            .open_unloaded(&trade, &k("b1"), Write::Replace, FIRST)
            .await
            .is_err()
    );
    assert!(
        s.opener()
            .open_unloaded(&trade, &k("b1"), Write::Append, FIRST)
            .await
            .is_ok()
    );
    let t = s.opener().open(&trade).await.unwrap().unwrap();
    t.set_tbl_properties()
        .with_properties(std::collections::HashMap::from([(
            "delta.setTransactionRetentionDuration".to_string(),
            "interval 7 days".to_string(),
        )]))
        .await
        .unwrap();
    assert_eq!(
        s.opener()
            .open_unloaded(&trade, &k("b2"), Write::Replace, FIRST)
            .await
            .err(),
        Some(Unopened::Other)
    );
    // Unless the run's lease and `_run_control` tell instead (writes record no
    // `txn`): then the property alone, never on another writer's table.
    let leased = storage(dir.path());
    let lease = RunMode {
        txns: Txns::RunControl,
        ..FIRST
    };
    assert!(
        leased
            .opener()
            .open_unloaded(&trade, &k("b2"), Write::Replace, lease)
            .await
            .is_ok()
    );
    assert!(
        leased
            .opener()
            .open_unloaded(&name, &k("b2"), Write::Replace, lease)
            .await
            .is_err()
    );
    leased
        .committer(lease)
        .replace_parts(&trade, vec![part("trade", 2)], &k("b4"), Write::Replace)
        .await
        .unwrap();
    assert!(
        !leased.opener().batch_seen(&trade, &k("b4")).await,
        "no `txn` written"
    );
    assert!(s.opener().batch_seen(&trade, &k("b1")).await);
    // No table yet: a folder without a log, or a log without a commit (a create that
    // was killed). The caller creates it without looking again.
    let none = TableName::for_topic("none");
    assert_eq!(
        s.opener()
            .open_unloaded(&none, &k("b2"), Write::Replace, FIRST)
            .await
            .err(),
        Some(Unopened::Absent)
    );
    std::fs::create_dir_all(dir.path().join("none/_delta_log")).unwrap();
    assert_eq!(
        s.opener()
            .open_unloaded(&none, &k("b2"), Write::Replace, FIRST)
            .await
            .err(),
        Some(Unopened::Absent)
    );
    s.committer(FIRST)
        .replace_parts(&none, vec![part("quote", 2)], &k("b2"), Write::Replace)
        .await
        .unwrap();
    let t = s.opener().open(&none).await.unwrap().unwrap();
    assert_eq!((t.version(), live_rows(&t)), (Some(0), 2));
    // Off for the run.
    let off = storage(dir.path());
    let shared = TableName::for_topic("shared");
    off.committer(mode(false))
        .replace_parts(&shared, vec![part("quote", 1)], &k("b1"), Write::Replace)
        .await
        .unwrap();
    assert!(
        off.opener()
            .open_unloaded(&shared, &k("b2"), Write::Replace, mode(false))
            .await
            .is_err()
    );
    assert!(
        s.opener()
            .open_unloaded(&shared, &k("b2"), Write::Replace, FIRST)
            .await
            .is_ok()
    );
}
