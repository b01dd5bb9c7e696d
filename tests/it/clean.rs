//! `bronze clean`: the landing files of loaded batches moved to an archive or deleted
//! after a retention, only while their folder matches their manifest, under the batch
//! lease, recorded in the manifest and `_run_control`; a later run of a cleaned batch
//! says where its files went. On disk and in an S3 emulator.

use std::path::Path;

use crate::util::*;

fn line(id: &str) -> String {
    format!("{{\"topic\":\"t\",\"message_id\":\"{id}\",\"payload\":{{\"v\":1}}}}\n")
}

/// Batches b1 and b2 of `src/ent` under `root`, loaded; then b2 gets a late file and b3
/// lands (not loaded).
fn landing(root: &Path, lake: &TempLake) {
    for id in ["b1", "b2"] {
        let folder = root.join(format!("src/ent/batch_id={id}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("a.jsonl"), line(&format!("{id}-1"))).unwrap();
        std::fs::write(folder.join("_SUCCESS"), "").unwrap();
    }
    let out = on_catalog(lake, &["ingest", "--pending", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    std::fs::write(root.join("src/ent/batch_id=b2/late.jsonl"), line("b2-late")).unwrap();
    let b3 = root.join("src/ent/batch_id=b3");
    std::fs::create_dir_all(&b3).unwrap();
    std::fs::write(b3.join("a.jsonl"), line("b3-1")).unwrap();
}

/// `bronze clean ROOT --older-than 0s --move-to DEST` and `extra`.
fn move_now(lake: &TempLake, root: &Path, dest: &Path, extra: &[&str]) -> std::process::Output {
    let (root, dest) = (root.to_str().unwrap(), dest.to_str().unwrap());
    let mut args = vec!["clean", root, "--older-than", "0s", "--move-to", dest];
    args.extend_from_slice(extra);
    on_catalog(lake, &args)
}

#[test]
fn clean_moves_unchanged_loaded_batches_to_an_archive_and_a_rerun_says_where_they_went() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let archive = dir.path().join("archive");
    let lake = TempLake::new();
    landing(&root, &lake);
    let clean = |extra: &[&str]| move_now(&lake, &root, &archive, extra);
    // Dry run: b1 would be cleaned, b2 is kept (changed since its load), b3 not loaded.
    let out = clean(&["--dry-run"]);
    assert!(out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("would_clean  src/ent/batch_id=b1  2 files"),
        "{text}"
    );
    assert!(
        text.contains("kept         src/ent/batch_id=b2") && text.contains("1 added (late.jsonl)"),
        "{text}"
    );
    assert!(!text.contains("batch_id=b3"), "{text}");
    assert!(root.join("src/ent/batch_id=b1/a.jsonl").exists());

    let out = clean(&[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("1 cleaned, 0 would be cleaned (--dry-run), 1 kept, 0 failed"),
        "{}",
        said(&out)
    );
    let moved = archive.join("src/ent/batch_id=b1");
    assert_eq!(
        std::fs::read_to_string(moved.join("a.jsonl")).unwrap(),
        line("b1-1")
    );
    assert!(moved.join("_SUCCESS").exists());
    assert!(!root.join("src/ent/batch_id=b1").exists());
    // The manifest and `_run_control` record it.
    let manifest = lake.schema_dir().join("_bronze_manifests/src+ent/b1.json");
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    assert_eq!(
        m["cleaned"]["moved_to"],
        format!("{}/src/ent/batch_id=b1", archive.display())
    );
    let rows = lake.rows("_run_control").eq("table", bronze::CLEAN_ROW);
    assert_eq!(rows.strings("_batch_id"), ["b1"]);
    assert!(
        rows.strings("checks")[0].contains("moved 2 landing files"),
        "{:?}",
        rows.strings("checks")
    );
    // A second clean has nothing more to do for b1.
    let out = clean(&[]);
    assert!(said(&out).contains("0 cleaned"), "{}", said(&out));

    // The backlog goes on: b2 is loaded again for its late file, b3 for the first time,
    // and nothing is said of b1.
    let out = on_catalog(&lake, &["ingest", "--pending", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(!said(&out).contains("batch_id=b1"), "{}", said(&out));
    let mut ids = lake.rows("t").strings("_id");
    ids.sort();
    assert_eq!(ids, ["b1-1", "b2-1", "b2-late", "b3-1"]);

    // A run of b1's old folder says where its files are; a run from the archive loads it.
    let out = on_catalog(
        &lake,
        &["ingest", root.join("src/ent/batch_id=b1").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("`bronze clean` moved its landing files to")
            && text.contains(&format!("bronze ingest {}", moved.display())),
        "{text}"
    );
    let out = on_catalog(&lake, &["ingest", moved.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(lake.rows("t").eq("_id", "b1-1").len(), 1);

    // A file landing in the cleaned folder later: reported (the load's files count as
    // removed), never loaded in place of the cleaned ones.
    let b1 = root.join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&b1).unwrap();
    std::fs::write(b1.join("again.jsonl"), line("b1-again")).unwrap();
    let out = on_catalog(&lake, &["ingest", "--pending", root.to_str().unwrap()]);
    let text = said(&out);
    assert!(
        text.contains("batch_id=b1")
            && text.contains("1 added (again.jsonl)")
            && text.contains("its rows are kept"),
        "{text}"
    );
    let out = on_catalog(&lake, &["ingest", b1.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("a rerun from it would replace every row of the batch"),
        "{}",
        said(&out)
    );
    assert_eq!(lake.rows("t").eq("_id", "b1-1").len(), 1);
    std::fs::remove_dir_all(&b1).unwrap();

    // An archive under the landing root is refused before anything moves.
    let inside = root.join("archive");
    let out = move_now(&lake, &root, &inside, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("under the landing root"),
        "{}",
        said(&out)
    );
}

#[test]
fn clean_takes_only_the_files_the_load_read_and_the_copy_steps_markers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    landing(&root, &lake);
    let b1 = root.join("src/ent/batch_id=b1");
    std::fs::write(b1.join("notes.txt"), "kept").unwrap();
    let archive = dir.path().join("archive");
    let out = move_now(&lake, &root, &archive, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out)
            .contains("1 other files left in the folder, which its load did not read (notes.txt)"),
        "{}",
        said(&out)
    );
    assert!(
        b1.join("notes.txt").exists()
            && !b1.join("a.jsonl").exists()
            && !b1.join("_SUCCESS").exists()
    );
    assert!(archive.join("src/ent/batch_id=b1/a.jsonl").exists());
    assert!(!archive.join("src/ent/batch_id=b1/notes.txt").exists());
}

#[test]
fn clean_deletes_only_after_a_week_and_only_loads_older_than_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    landing(&root, &lake);
    let clean = |older: &str| {
        on_catalog(
            &lake,
            &[
                "clean",
                root.to_str().unwrap(),
                "--older-than",
                older,
                "--delete",
            ],
        )
    };
    let out = clean("1d");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("--delete needs --older-than 7d or more"),
        "{}",
        said(&out)
    );
    // Loaded just now: younger than a week, nothing to clean.
    let out = clean("7d");
    assert!(
        said(&out).contains("0 cleaned, 0 would be cleaned (--dry-run), 0 kept"),
        "{}",
        said(&out)
    );
    // b1's load eight days ago.
    let manifest = lake.schema_dir().join("_bronze_manifests/src+ent/b1.json");
    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let eight_days = 8 * 24 * 3600 * 1_000_000i64;
    m["loaded_micros"] = (m["loaded_micros"].as_i64().unwrap() - eight_days).into();
    std::fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
    let out = clean("7d");
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("cleaned      src/ent/batch_id=b1"),
        "{}",
        said(&out)
    );
    assert!(!root.join("src/ent/batch_id=b1").exists());
    assert!(root.join("src/ent/batch_id=b2/a.jsonl").exists());
    let out = on_catalog(
        &lake,
        &["ingest", root.join("src/ent/batch_id=b1").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out)
            .contains("`bronze clean` deleted its landing files; its rows stay in the tables"),
        "{}",
        said(&out)
    );
    assert_eq!(lake.rows("t").eq("_id", "b1-1").len(), 1);
}

#[test]
fn in_s3_clean_moves_a_batch_to_an_archive_bucket() {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let s3 = crate::cloud::moto();
    crate::cloud::create_bucket(&s3.endpoint, "landing");
    crate::cloud::create_bucket(&s3.endpoint, "archive");
    let options = crate::cloud::s3_options(&s3.endpoint);
    let (landing, _) = bronze::testdata::object_store_at("s3://landing", &options).unwrap();
    let (archive, _) = bronze::testdata::object_store_at("s3://archive", &options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let path = |p: &str| deltalake::logstore::object_store::path::Path::parse(p).unwrap();
    rt.block_on(landing.put(
        &path("src/ent/batch_id=b1/a.jsonl"),
        line("b1-1").into_bytes().into(),
    ))
    .unwrap();
    let lake = TempLake::new();
    let run = |args: &[&str]| {
        let mut cmd = bronze_cli();
        cmd.args(args).arg("--catalog").arg(lake.catalog());
        for (k, v) in &options {
            cmd.arg("--storage-option").arg(format!("{k}={v}"));
        }
        cmd.output().unwrap()
    };
    let out = run(&["ingest", "--pending", "s3://landing"]);
    assert!(out.status.success(), "{}", said(&out));
    let out = run(&[
        "clean",
        "s3://landing",
        "--older-than",
        "0s",
        "--move-to",
        "s3://archive/old",
    ]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("1 cleaned"), "{}", said(&out));
    let got = rt
        .block_on(async {
            archive
                .get(&path("old/src/ent/batch_id=b1/a.jsonl"))
                .await?
                .bytes()
                .await
        })
        .unwrap();
    assert_eq!(got.as_ref(), line("b1-1").as_bytes());
    assert!(
        rt.block_on(landing.head(&path("src/ent/batch_id=b1/a.jsonl")))
            .is_err()
    );
    let out = run(&["ingest", "--pending", "s3://landing"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(!said(&out).contains("batch_id=b1"), "{}", said(&out));
}

#[test]
fn clean_keeps_a_batch_whose_rerun_died_without_recording_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("landing");
    let lake = TempLake::new();
    landing(&root, &lake);
    let b1 = root.join("src/ent/batch_id=b1");
    // A rerun of b1 killed after staging: its lease stays, saying its writes are not
    // recorded, and its rerun needs the landing files.
    let killed = bronze_cli()
        .arg("ingest")
        .arg(&b1)
        .arg("--catalog")
        .arg(lake.catalog())
        .env("BRONZE_FAILPOINT", "after_staging")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert!(!killed.status.success());
    let archive = dir.path().join("archive");
    let out = move_now(&lake, &root, &archive, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains("kept         src/ent/batch_id=b1")
            && said(&out).contains("ended without recording its writes"),
        "{}",
        said(&out)
    );
    assert!(b1.join("a.jsonl").exists());
    // The lease still tells the next run: it takes it over and replaces what the killed
    // run left, and then b1 can be cleaned.
    let out = on_catalog(&lake, &["ingest", b1.to_str().unwrap()]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("took over the lease"), "{}", said(&out));
    let out = move_now(&lake, &root, &archive, &[]);
    assert!(
        said(&out).contains("cleaned      src/ent/batch_id=b1"),
        "{}",
        said(&out)
    );
}
