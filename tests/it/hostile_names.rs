//! Paths, names and links a hostile user tries: each would lose or double rows unless a
//! path, a name or a file name is one identity however it is spelled. Each test starts
//! from a landing folder `src/ent/batch_id=b1` with one file `p.jsonl`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::*;

const M1: &str = r#"{"topic":"t","message_id":"m1","payload":{"x":1}}"#;

/// `<root>/src/ent/batch_id=b1` holding `p.jsonl` with `lines`.
fn landed(root: &Path, lines: &[&str]) -> PathBuf {
    let dir = root.join("src/ent/batch_id=b1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("p.jsonl"), lines.join("\n") + "\n").unwrap();
    dir
}

fn ingest(batch: &Path, catalog: &Path, extra: &[&str]) -> Output {
    bronze_cli()
        .arg("ingest")
        .arg(batch)
        .arg("--catalog")
        .arg(catalog)
        .args(extra)
        .output()
        .unwrap()
}

fn ids(catalog: &Path, table: &str) -> Vec<String> {
    let mut ids = TempLake::at(catalog.to_path_buf(), "bronze")
        .rows(table)
        .strings("_id");
    ids.sort();
    ids
}

#[test]
fn a_catalog_path_with_a_percent_is_refused_before_any_io_never_read_as_another() {
    let dir = tempfile::tempdir().unwrap();
    let batch = landed(dir.path(), &[M1]);
    // Another catalog at the decoded path, which a run must never read.
    let other = dir.path().join("cpy/catA");
    assert!(ingest(&batch, &other, &[]).status.success());
    let percent = dir.path().join("cpy/cat%41");
    for _ in 0..2 {
        let out = ingest(&batch, &percent, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains("holds a `%`"), "{}", said(&out));
        assert!(
            !percent.exists(),
            "nothing created at {}",
            percent.display()
        );
    }
    assert_eq!(ids(&other, "t"), ["m1"]);
    // The same for a URL whose path decodes to a `%`.
    let url = format!("file://{}", dir.path().join("cpy/cat%2541").display());
    let out = ingest(&batch, Path::new(&url), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("holds a `%`"), "{}", said(&out));
}

#[cfg(unix)]
#[test]
fn data_files_whose_names_are_not_utf8_are_read_and_named_losslessly() {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = tempfile::tempdir().unwrap();
    let batch = landed(dir.path(), &[M1]);
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.jsonl");
    std::fs::write(
        batch.join(name),
        "{\"topic\":\"t\",\"message_id\":\"m2\",\"payload\":{}}\n",
    )
    .unwrap();
    // A data file that merely starts with `manifest`, beside a real manifest.
    std::fs::write(
        batch.join("manifest-2026.jsonl"),
        "{\"topic\":\"t\",\"message_id\":\"m3\",\"payload\":{}}\n",
    )
    .unwrap();
    std::fs::write(batch.join("manifest.json"), "{\"files\":3}\n").unwrap();
    // Files named like data that bronze does not read, and one it reads.
    std::fs::write(batch.join("p.jsonl.xz"), "x").unwrap();
    std::fs::write(
        batch.join("q.ndjson"),
        "{\"topic\":\"t\",\"message_id\":\"m4\",\"payload\":{}}\n",
    )
    .unwrap();
    let lake = dir.path().join("lake");
    let out = ingest(&batch, &lake, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let text = said(&out);
    assert!(
        text.contains("4 files read (2 skipped: manifest.json, p.jsonl.xz)"),
        "{text}"
    );
    assert!(text.contains("p.jsonl.xz: not a data file name"), "{text}");
    assert_eq!(ids(&lake, "t"), ["m1", "m2", "m3", "m4"]);
    let files = TempLake::at(lake, "bronze")
        .rows("t")
        .strings("_source_file");
    assert!(
        files.iter().any(|f| f.ends_with("/caf\\xE9.jsonl")),
        "{files:?}"
    );
}

#[test]
fn a_topic_named_like_a_child_table_never_shares_it() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // In one batch: the topic `legs` and the child rows of `order`'s array `legs`.
    let batch = landed(
        dir.path(),
        &[
            r#"{"topic":"legs","message_id":"l1","payload":{"x":"a"}}"#,
            r#"{"topic":"order","message_id":"o1","payload":{"legs":[{"px":1.5}]}}"#,
        ],
    );
    let out = ingest(&batch, &lake, &["--topic-evolution", "legs=fail"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("table `legs` is a topic's table"),
        "{}",
        said(&out)
    );
    let legs = TempLake::at(lake.clone(), "bronze");
    assert_eq!(legs.rows("legs").strings("_id"), ["l1"]);
    assert!(!legs.columns("legs").contains(&"px".to_string()));
    // Later, the topic `legs` against a child table `legs` another batch made: refused
    // before any write.
    let other = dir.path().join("lake2");
    let orders = landed(
        &dir.path().join("o"),
        &[r#"{"topic":"order","message_id":"o1","payload":{"legs":[{"px":1.5}]}}"#],
    );
    assert!(ingest(&orders, &other, &[]).status.success());
    let topic = landed(
        &dir.path().join("l"),
        &[r#"{"topic":"legs","message_id":"l1","payload":{"x":"a"}}"#],
    );
    let out = ingest(&topic, &other, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("no table of the batch was written"),
        "{}",
        said(&out)
    );
    assert_eq!(ids(&other, "legs"), ["o1/legs/0"]);
}

#[test]
fn optimize_all_and_maintain_pass_over_a_staging_table() {
    let dir = tempfile::tempdir().unwrap();
    let lake = TempLake::at(dir.path().join("lake"), "bronze");
    let batch = landed(dir.path(), &[M1]);
    // A staging table left by a killed `--persist-staging` run.
    let out = bronze_cli()
        .arg("ingest")
        .arg(&batch)
        .arg("--catalog")
        .arg(lake.catalog())
        .args(["--persist-staging"])
        .env("BRONZE_FAILPOINT", "after_staging")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", said(&out));
    let staging: Vec<String> = lake
        .all_tables()
        .into_iter()
        .filter(|t| t.starts_with("_tmp_raw_load_"))
        .collect();
    assert_eq!(staging.len(), 1, "{:?}", lake.all_tables());
    let out = on_catalog(&lake, &["optimize", "--all"]);
    assert!(out.status.success(), "{}", said(&out));
    assert!(
        said(&out).contains(&format!("{}: skipped, the staging table", staging[0])),
        "{}",
        said(&out)
    );
    let out = on_catalog(&lake, &["maintain"]);
    assert!(out.status.success(), "{}", said(&out));
}

#[cfg(unix)]
#[test]
fn a_rerun_through_a_symlinked_folder_replaces_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let batch = landed(dir.path(), &[M1]);
    std::os::unix::fs::symlink(dir.path().join("src/ent"), dir.path().join("src/ent_alias"))
        .unwrap();
    assert!(ingest(&batch, &lake, &[]).status.success());
    let alias = dir.path().join("src/ent_alias/batch_id=b1");
    let out = ingest(&alias, &lake, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(ids(&lake, "t"), ["m1"]);
    let paths = TempLake::at(lake.clone(), "bronze")
        .rows("t")
        .strings("_landing_path");
    assert_eq!(paths, ["src/ent"]);
    // A link named as another batch: refused, not loaded as a second batch.
    std::os::unix::fs::symlink(&batch, dir.path().join("src/ent/batch_id=b2")).unwrap();
    let out = ingest(&dir.path().join("src/ent/batch_id=b2"), &lake, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("is a link to"), "{}", said(&out));
    assert_eq!(ids(&lake, "t"), ["m1"]);
}

#[test]
fn column_names_that_collide_at_128_bytes_stay_within_128() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let payload = format!(
        r#"{{"topic":"t","message_id":"m1","payload":{{"{}":1,"{}":2}}}}"#,
        "A".repeat(128),
        "a".repeat(128)
    );
    let batch = landed(dir.path(), &[&payload]);
    assert!(ingest(&batch, &lake, &[]).status.success());
    let columns = TempLake::at(lake.clone(), "bronze").columns("t");
    let long: Vec<&String> = columns.iter().filter(|c| c.len() > 100).collect();
    assert_eq!(long.len(), 2, "{columns:?}");
    assert!(long.iter().all(|c| c.len() <= 128), "{columns:?}");
    // The same two keys in two batches: the second's column is renamed within 128 too.
    let other = dir.path().join("lake2");
    for (batch, key) in [("b1", "A"), ("b2", "a")] {
        let folder = dir.path().join(format!("two/src/ent/batch_id={batch}"));
        std::fs::create_dir_all(&folder).unwrap();
        let line = format!(
            r#"{{"topic":"t","message_id":"{batch}","payload":{{"{}":1}}}}"#,
            key.repeat(128)
        );
        std::fs::write(folder.join("p.jsonl"), line + "\n").unwrap();
        assert!(ingest(&folder, &other, &[]).status.success());
    }
    let columns = TempLake::at(other, "bronze").columns("t");
    let long: Vec<&String> = columns.iter().filter(|c| c.len() > 100).collect();
    assert_eq!(long.len(), 2, "{columns:?}");
    assert!(long.iter().all(|c| c.len() <= 128), "{columns:?}");
}

#[test]
fn a_gzip_file_of_zero_bytes_is_empty_and_a_broken_one_is_a_corrupt_record_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let batch = landed(dir.path(), &[M1]);
    std::fs::write(batch.join("empty.jsonl.gz"), b"").unwrap();
    let out = ingest(&batch, &lake, &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(ids(&lake, "t"), ["m1"]);
    std::fs::write(batch.join("cut.jsonl.gz"), [0x1f, 0x8b, 0x08, 0x00]).unwrap();
    let out = ingest(&batch, &lake, &[]);
    // A corrupt record, as a corrupt line: exit code 1, the file and the fix named.
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let corrupt = TempLake::at(lake.clone(), "bronze").rows("_corrupt_records");
    assert!(corrupt.strings("_source_file")[0].ends_with("cut.jsonl.gz"));
    let reason = &corrupt.strings("_reason")[0];
    assert!(reason.contains("copy the file again"), "{reason}");
}

#[test]
fn claims_of_takeovers_by_killed_runs_are_removed_by_the_run_that_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let lake = TempLake::at(dir.path().join("lake"), "bronze");
    let batch = landed(dir.path(), &[M1]);
    let leases = lake.schema_dir().join("_bronze_leases");
    let killed = || {
        bronze_cli()
            .arg("ingest")
            .arg(&batch)
            .arg("--catalog")
            .arg(lake.catalog())
            .env("BRONZE_FAILPOINT", "after_staging")
            .env("BRONZE_FAILPOINT_ACTION", "kill")
            .output()
            .unwrap()
    };
    let listed = || {
        let mut names: Vec<String> = std::fs::read_dir(&leases)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    // Killed runs, each after taking over the lease of the one before.
    for _ in 0..3 {
        assert!(!killed().status.success());
    }
    let claims = listed().iter().filter(|n| n.contains(".claim-")).count();
    assert!(claims >= 2, "{:?}", listed());
    let out = ingest(&batch, lake.catalog(), &[]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(listed(), Vec::<String>::new());
    assert_eq!(ids(lake.catalog(), "t"), ["m1"]);
}
