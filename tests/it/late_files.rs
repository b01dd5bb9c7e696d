//! Files that land in a batch's folder after its load, change there, or are removed: each
//! loaded batch's manifest records what its load read, and `--pending`, `status` and the
//! metrics compare its folder with it, under each `late_files` policy; on disk and in an
//! S3 emulator.

use std::path::Path;
use std::process::Output;

use crate::util::*;

fn line(id: &str) -> String {
    format!("{{\"topic\":\"t\",\"message_id\":\"{id}\",\"payload\":{{\"v\":\"{id}\"}}}}\n")
}

fn bronze(lake: &TempLake, args: &[&str], root: &Path) -> Output {
    bronze_cli()
        .args(args)
        .arg(root)
        .arg("--catalog")
        .arg(lake.catalog())
        .output()
        .unwrap()
}

fn pending(lake: &TempLake, root: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["ingest", "--pending"];
    args.extend_from_slice(extra);
    bronze(lake, &args, root)
}

fn ids(lake: &TempLake) -> Vec<String> {
    let mut ids = lake.rows("t").strings("_id");
    ids.sort();
    ids
}

/// `landing/src/ent/batch_id=b1` with `a.jsonl` (a1, a2), loaded by `--pending`.
fn loaded_batch(root: &Path, lake: &TempLake) -> std::path::PathBuf {
    let folder = root.join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("a.jsonl"), line("a1") + &line("a2")).unwrap();
    let out = pending(lake, root, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(ids(lake), ["a1", "a2"]);
    // The manifest names what the load read.
    let manifest = lake.schema_dir().join("_bronze_manifests/src+ent/b1.json");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    assert_eq!(m["files"][0]["name"], "a.jsonl");
    assert_eq!(m["files"][0]["lines"], 2);
    assert_eq!(m["files"][0]["messages"], 2);
    folder
}

#[test]
fn a_late_file_and_a_changed_one_are_loaded_again_and_a_removed_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    let folder = loaded_batch(&root, &lake);
    // Nothing changed: nothing pending.
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("0 pending"), "{}", said(&out));

    // A file lands late: status says so, the next round loads the batch again.
    std::fs::write(folder.join("b.jsonl"), line("b1")).unwrap();
    let status = bronze(&lake, &["status"], &root);
    assert!(
        said(&status).contains("src/ent/batch_id=b1: changed after its load: 1 added (b.jsonl)"),
        "{}",
        said(&status)
    );
    let out = pending(&lake, &root, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("loaded again: its folder changed after its load: 1 added (b.jsonl)"),
        "{}",
        said(&out)
    );
    assert_eq!(ids(&lake), ["a1", "a2", "b1"]);
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("0 pending"), "{}", said(&out));

    // A file changes (copied again with more lines): loaded again, its rows replaced.
    std::fs::write(
        folder.join("a.jsonl"),
        line("a1") + &line("a2") + &line("a3"),
    )
    .unwrap();
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("1 changed (a.jsonl)"), "{}", said(&out));
    assert_eq!(ids(&lake), ["a1", "a2", "a3", "b1"]);

    // A file is removed: reported, never loaded again (its rows stay).
    std::fs::remove_file(folder.join("b.jsonl")).unwrap();
    let out = pending(&lake, &root, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("changed") && text.contains("1 removed (b.jsonl)"),
        "{text}"
    );
    assert!(text.contains("its rows are kept"), "{text}");
    assert_eq!(ids(&lake), ["a1", "a2", "a3", "b1"]);
    let status = bronze(&lake, &["status", "--json"], &root);
    let entities: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(entities[0]["changed"][0]["batch_id"], "b1", "{entities}");
    assert_eq!(entities[0]["changed"][0]["change"]["removed"][0], "b.jsonl");

    // A file added beside the removed one: a rerun would still drop b.jsonl's rows, so
    // the batch is reported, not loaded again.
    std::fs::write(folder.join("c.jsonl"), line("c1")).unwrap();
    let out = pending(&lake, &root, &[]);
    let text = said(&out);
    assert!(
        text.contains("1 added (c.jsonl), 1 removed (b.jsonl)")
            && text.contains("its rows are kept"),
        "{text}"
    );
    assert_eq!(ids(&lake), ["a1", "a2", "a3", "b1"]);
}

#[test]
fn a_change_to_an_older_batch_found_by_a_full_check_is_loaded_by_the_next_round() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    for i in 1..=5 {
        let folder = root.join(format!("src/ent/batch_id=b{i}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("a.jsonl"), line(&format!("b{i}"))).unwrap();
    }
    let out = pending(&lake, &root, &[]);
    assert!(out.status.success(), "{}", said(&out));
    // b1 is not among the three latest batches a round compares: a file landing there is
    // seen by the next full check only.
    std::fs::write(root.join("src/ent/batch_id=b1/late.jsonl"), line("late")).unwrap();
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("0 pending"), "{}", said(&out));
    // A full check by `status` (due at once with an interval of 0s) finds it, and the
    // ledger keeps it: the next round, with the default interval, loads it again.
    let status = bronze(&lake, &["status", "--full-listing-every", "0s"], &root);
    assert!(
        said(&status).contains("batch_id=b1: changed after its load: 1 added (late.jsonl)"),
        "{}",
        said(&status)
    );
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("loaded again"), "{}", said(&out));
    assert!(ids(&lake).contains(&"late".to_string()));
    let out = pending(&lake, &root, &[]);
    assert!(said(&out).contains("0 pending"), "{}", said(&out));
}

#[test]
fn with_late_files_report_or_fail_a_changed_batch_is_named_and_not_loaded_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    let folder = loaded_batch(&root, &lake);
    std::fs::write(folder.join("b.jsonl"), line("b1")).unwrap();

    // The metrics count it, for the alert rule in docs/alerts.yml.
    let metrics = bronze(&lake, &["status", "--metrics"], &root);
    assert!(
        said(&metrics).contains("bronze_backlog_changed_batches{landing_path=\"src/ent\"} 1"),
        "{}",
        said(&metrics)
    );

    let out = pending(&lake, &root, &["--late-files", "report"]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("changed")
            && text.contains("src/ent/batch_id=b1")
            && text.contains("not loaded again"),
        "{text}"
    );
    assert_eq!(ids(&lake), ["a1", "a2"]);

    let out = pending(&lake, &root, &["--late-files", "fail"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("failed") && text.contains("late_files = \"fail\""),
        "{text}"
    );
    assert_eq!(ids(&lake), ["a1", "a2"]);

    // The same setting from bronze.toml.
    let config = dir.path().join("bronze.toml");
    std::fs::write(&config, "late_files = \"fail\"\n").unwrap();
    let out = pending(&lake, &root, &["--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));

    // The default reloads it, once.
    let out = pending(&lake, &root, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(ids(&lake), ["a1", "a2", "b1"]);
}

#[test]
fn in_s3_a_late_file_is_found_by_its_etag_listing_and_loaded_again() {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let s3 = crate::cloud::moto();
    crate::cloud::create_bucket(&s3.endpoint, "landing");
    let options = crate::cloud::s3_options(&s3.endpoint);
    let (store, _) = bronze::testdata::object_store_at("s3://landing", &options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let put = |name: &str, text: String| {
        let path = deltalake::logstore::object_store::path::Path::parse(format!(
            "src/ent/batch_id=b1/{name}"
        ))
        .unwrap();
        rt.block_on(store.put(&path, text.into_bytes().into()))
            .unwrap();
    };
    put("a.jsonl", line("a1"));
    let lake = TempLake::new();
    let run = |extra: &[&str]| {
        let mut cmd = bronze_cli();
        cmd.args(["ingest", "--pending", "s3://landing", "--catalog"])
            .arg(lake.catalog())
            .args(extra);
        for (k, v) in &options {
            cmd.arg("--storage-option").arg(format!("{k}={v}"));
        }
        cmd.output().unwrap()
    };
    let out = run(&[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(ids(&lake), ["a1"]);
    put("b.jsonl", line("b1"));
    // Rewritten with the same size: a new ETag.
    put("a.jsonl", line("a9"));
    let out = run(&[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("1 added (b.jsonl), 1 changed (a.jsonl)"),
        "{}",
        said(&out)
    );
    assert_eq!(ids(&lake), ["a9", "b1"]);
    let out = run(&[]);
    assert!(said(&out).contains("0 pending"), "{}", said(&out));
}
