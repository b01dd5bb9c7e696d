//! A batch is its landing folder, not its id: folders of different sources or entities
//! that share a batch id keep each other's rows, load together as one batch, and tables
//! written before landing paths keep working (issue 19). Counts come from an independent
//! oracle (`tests/oracle/batch_counts.py`, Python's json module, no bronze code).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::*;

const ID: &str = "20260115T111100Z-s11";
const SOURCES: [&str; 2] = ["kafka-eu", "kafka-us"];
const ENTITIES: [&str; 5] = ["commerce", "fx", "market", "news", "ref"];
const TOPICS: [&str; 6] = [
    "prices_equity",
    "prices_fx",
    "orders",
    "news",
    "trades",
    "refdata",
];

/// A small deterministic generator (xorshift), so every run lands the same files.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The message `n` of `topic`: the same bytes wherever it lands, so a message landed in
/// two folders is a true duplicate. Non-ASCII text, nested objects, an array of objects
/// (`currentprice`, shared by every topic) and of scalars (`tags`) in most of them.
fn message(topic: &str, n: u64) -> String {
    let prices: Vec<String> = (0..n % 4)
        .map(|i| {
            format!(
                r#"{{"px":{}.{i},"ccy":"EUR","venue":"Zürich-{i}"}}"#,
                100 + n
            )
        })
        .collect();
    let tags: Vec<String> = (0..n % 3).map(|i| format!(r#""t{i}-ß""#)).collect();
    format!(
        r#"{{"topic":"{topic}","message_id":"{topic}-{n}","source":"feed","ts":"2026-01-15T11:11:{:02}Z","payload":{{"symbol":"S{n}","name":"Société {n} 東京","qty":{n},"ok":{},"meta":{{"desk":{{"id":{}}}}},"currentprice":[{}],"tags":[{}]}}}}"#,
        n % 60,
        n.is_multiple_of(2),
        n % 7,
        prices.join(","),
        tags.join(",")
    )
}

/// Lands the 10 folders `<root>/landing/<source>/<entity>/batch_id=ID`: each with 3-4
/// topics of the 6 (every topic in several folders), 2-3 files, message numbers that
/// overlap the next folder's (cross-folder duplicates), repeats inside a folder, and a
/// corrupt line in some files. Returns the folders sorted by landing path.
fn land(root: &Path) -> Vec<PathBuf> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut folders = Vec::new();
    for (s, source) in SOURCES.iter().enumerate() {
        for (e, entity) in ENTITIES.iter().enumerate() {
            let f = s * ENTITIES.len() + e;
            let dir = root
                .join("landing")
                .join(source)
                .join(entity)
                .join(format!("batch_id={ID}"));
            std::fs::create_dir_all(&dir).unwrap();
            let topics: Vec<&str> = (0..3 + f % 2).map(|k| TOPICS[(f + 2 * k) % 6]).collect();
            let files = 2 + f % 2;
            for file in 0..files {
                let mut text = String::new();
                for _ in 0..40 {
                    let topic = topics[rng.below(topics.len() as u64) as usize];
                    // Numbers 0..80 starting at 30 per folder: neighbours share some.
                    let n = (f as u64 * 30) + rng.below(80);
                    let line = message(topic, n);
                    text.push_str(&line);
                    text.push('\n');
                    if rng.below(20) == 0 {
                        text.push_str(&line);
                        text.push('\n');
                    }
                }
                if file == 1 {
                    text.push_str("{\"topic\":\"orders\",\"message_id\":\"cut\n");
                }
                std::fs::write(dir.join(format!("part-{file:05}.jsonl")), text).unwrap();
            }
            folders.push(dir);
        }
    }
    folders.sort_by_key(|d| landing_path(d));
    folders
}

/// `<source>/<entity>` of a landed folder.
fn landing_path(dir: &Path) -> String {
    let entity = dir.parent().unwrap();
    format!(
        "{}/{}",
        entity
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy(),
        entity.file_name().unwrap().to_string_lossy()
    )
}

/// What the oracle says one load of `folders` (as one batch, in this order) must hold.
fn oracle(folders: &[PathBuf]) -> BTreeMap<String, i64> {
    let python = std::env::var("BRONZE_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(python)
        .arg(repo().join("tests/oracle/batch_counts.py"))
        .args(folders)
        .output()
        .expect("python3 runs the oracle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Tables the oracle counts (topics and the two child tables), not its `_` totals.
fn tables_of(counts: &BTreeMap<String, i64>) -> impl Iterator<Item = (&String, &i64)> {
    counts.iter().filter(|(t, _)| !t.starts_with('_'))
}

/// Rows of `table` from the folder at `landing_path` (0 when the table does not exist).
fn rows_of(lake: &TempLake, table: &str, landing_path: &str) -> i64 {
    if !lake.all_tables().iter().any(|t| t == table) {
        return 0;
    }
    lake.rows(table)
        .eq("_batch_id", ID)
        .eq("_landing_path", landing_path)
        .len() as i64
}

fn total_rows(lake: &TempLake, table: &str) -> i64 {
    lake.count(table) as i64
}

/// Row counts of every table, per landing path.
fn counts(lake: &TempLake) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    for t in lake.tables() {
        for path in lake.rows(&t).texts("_landing_path") {
            let path = path.unwrap_or_else(|| "-".into());
            *out.entry((t.clone(), path)).or_insert(0) += 1;
        }
    }
    out
}

fn load(lake: &TempLake, dirs: &[PathBuf]) -> bronze::BatchReport {
    let report = lake.ingest().build().unwrap().run_folders(dirs).unwrap();
    assert!(report.exit_code() < 2, "{}", report.to_text());
    assert_accounted(lake, &report);
    report
}

#[test]
fn ten_folders_sharing_a_batch_id_keep_every_folders_rows() {
    let landing = tempfile::tempdir().unwrap();
    let folders = land(landing.path());

    // Folder by folder, into one catalog: every folder's rows stay.
    let lake = TempLake::new();
    let mut per_folder_sum: BTreeMap<String, i64> = BTreeMap::new();
    for dir in &folders {
        let report = load(&lake, std::slice::from_ref(dir));
        let path = landing_path(dir);
        assert_eq!(report.batch, format!("{path}/batch_id={ID}"));
        assert_eq!(report.folders.len(), 1);
        assert_eq!(report.folders[0].landing_path, path);
        assert!(
            report
                .run_control
                .iter()
                .all(|r| r.landing_paths == [path.as_str()])
        );
    }
    for dir in &folders {
        let want = oracle(std::slice::from_ref(dir));
        let path = landing_path(dir);
        for (table, n) in tables_of(&want) {
            assert_eq!(rows_of(&lake, table, &path), *n, "{table} of {path}");
            *per_folder_sum.entry(table.clone()).or_default() += n;
        }
        let corrupt = lake
            .rows("_corrupt_records")
            .eq("_landing_path", &path)
            .len() as i64;
        assert_eq!(
            corrupt,
            want.get("_corrupt").copied().unwrap_or(0),
            "{path}"
        );
    }
    for (table, n) in &per_folder_sum {
        assert_eq!(total_rows(&lake, table), *n, "{table}: nothing else");
    }
    assert_readable_without_duplicates(&lake, "folder by folder");

    // Rerunning any one folder changes nothing.
    let before = counts(&lake);
    load(&lake, std::slice::from_ref(&folders[3]));
    load(&lake, std::slice::from_ref(&folders[7]));
    assert_eq!(counts(&lake), before, "reruns of one folder");
    assert!(leases(&lake).is_empty());
    assert!(staging_dirs(&lake).is_empty());

    // All folders as one run: dedup across folders, exact counts.
    let together = TempLake::new();
    let report = load(&together, &folders);
    let want = oracle(&folders);
    assert_eq!(report.folders.len(), 10);
    assert_eq!(report.duplicates as i64, want["_duplicates"]);
    assert_eq!(report.corrupt_lines as i64, want["_corrupt"]);
    assert_eq!(report.lines as i64, want["_lines"]);
    for (table, n) in tables_of(&want) {
        assert_eq!(total_rows(&together, table), *n, "{table} in one run");
    }
    assert_readable_without_duplicates(&together, "one run");
    // Its rerun replaces exactly its rows.
    let before = counts(&together);
    load(&together, &folders);
    assert_eq!(counts(&together), before, "rerun of the ten folders");

    // The two ways differ by the cross-folder duplicates and nothing else: the extra
    // rows of the folder-by-folder catalog are copies of messages whose id is in
    // several folders, and every row of the one-run catalog is in it.
    for (table, n) in tables_of(&want) {
        let extra = per_folder_sum[table] - n;
        // Rows beyond the first of each `_id` (nulls one group, as in a GROUP BY).
        let rows = lake.rows(table);
        let groups: std::collections::BTreeSet<Option<String>> =
            rows.texts("_id").into_iter().collect();
        let copies = (rows.len() - groups.len()) as i64;
        assert_eq!(copies, extra, "{table}: cross-folder duplicates");
        let ids = |l: &TempLake| -> std::collections::BTreeSet<Option<String>> {
            l.rows(table).texts("_id").into_iter().collect()
        };
        assert_eq!(ids(&lake), ids(&together), "{table}: the same messages");
    }
}

#[test]
fn a_glob_loads_every_matching_folder_as_one_batch_and_mixed_ids_are_refused() {
    let landing = tempfile::tempdir().unwrap();
    let folders = land(landing.path());
    let lake = TempLake::new();
    let pattern = landing
        .path()
        .join(format!("landing/*/*/batch_id={ID}"))
        .to_string_lossy()
        .into_owned();
    let out = bronze_cli()
        .args(["ingest", &pattern, "--json", "--catalog"])
        .arg(lake.catalog())
        .output()
        .unwrap();
    let report: bronze::BatchReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1), "corrupt lines kept: exit 1");
    assert_eq!(report.folders.len(), 10);
    assert_accounted(&lake, &report);
    let want = oracle(&folders);
    for (table, n) in tables_of(&want) {
        assert_eq!(total_rows(&lake, table), *n, "{table}");
    }

    // Another batch id among the folders: refused before anything is read or written.
    let other = landing
        .path()
        .join("landing/kafka-eu/market/batch_id=other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("p.jsonl"), message("orders", 1)).unwrap();
    let fresh = TempLake::new();
    let err = fresh
        .ingest()
        .build()
        .unwrap()
        .run_folders(&[folders[0].clone(), other.clone()])
        .unwrap_err();
    assert!(matches!(err, bronze::Error::MixedBatchIds { .. }), "{err}");
    let msg = bronze::error_chain(&err);
    assert!(msg.contains("batch other") && msg.contains(ID), "{msg}");
    assert!(!fresh.schema_dir().exists(), "nothing written");

    // A pattern matching nothing names itself.
    let out = bronze_cli()
        .args(["ingest", "/nonexistent/*/batch_id=x", "--catalog"])
        .arg(fresh.catalog())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("no folder matches") && err.contains("/nonexistent/*"),
        "{err}"
    );
}

#[test]
fn hostile_landing_paths_are_refused_before_any_io_and_can_be_named() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    for bad in [
        "/nonexistent/a b/market/batch_id=x",
        "/nonexistent/x'--/market/batch_id=x",
        "/nonexistent/50%/market/batch_id=x",
        "/nonexistent/é/market/batch_id=x",
    ] {
        let err = ingest.run(bad).unwrap_err();
        assert!(
            matches!(err, bronze::Error::InvalidLandingPath { .. }),
            "{bad}: {err}"
        );
        assert!(
            bronze::error_chain(&err).contains("--landing-path"),
            "{err}"
        );
    }
    for bad in ["", "a//b", "../x", "a/./b", "a b", "x'y"] {
        assert!(
            bronze::discover::validate_landing_path(bad).is_err(),
            "{bad:?} accepted"
        );
    }

    // A folder in an odd place, named with --landing-path: its rows carry that name.
    let landing = tempfile::tempdir().unwrap();
    let dir = landing.path().join("odd place/batch_id=b1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("p.jsonl"), message("orders", 2) + "\n").unwrap();
    assert!(matches!(
        ingest.run(&dir).unwrap_err(),
        bronze::Error::InvalidLandingPath { .. }
    ));
    let named = lake
        .ingest()
        .with_landing_path("feed/orders")
        .build()
        .unwrap();
    let report = named.run(&dir).unwrap();
    assert_accounted(&lake, &report);
    let paths: std::collections::BTreeSet<Option<String>> = lake
        .rows("orders")
        .texts("_landing_path")
        .into_iter()
        .collect();
    assert_eq!(
        paths,
        std::collections::BTreeSet::from([Some("feed/orders".to_string())])
    );
    assert!(leases(&lake).is_empty());
}

#[test]
fn two_processes_loading_two_folders_of_one_batch_id_both_finish() {
    let landing = tempfile::tempdir().unwrap();
    let folders = land(landing.path());
    let lake = TempLake::new();
    let cmd = |dir: &Path| {
        let mut c = bronze_cli();
        c.arg("ingest")
            .arg(dir)
            .arg("--catalog")
            .arg(lake.catalog())
            .arg("--json");
        c
    };
    // A is paused right after staging, holding its lease, until B has finished.
    let a = Paused::start(cmd(&folders[0]));
    assert_eq!(leases(&lake).len(), 1, "A holds its folder's lease");
    let b = cmd(&folders[1]).output().unwrap();
    assert!(
        b.status.code().is_some_and(|c| c < 2),
        "B must not wait for A: {}",
        String::from_utf8_lossy(&b.stderr)
    );
    let a_out = a.finish();
    assert!(a_out.status.code().is_some_and(|c| c < 2));
    for out in [&a_out, &b] {
        let report: bronze::BatchReport = serde_json::from_slice(&out.stdout).unwrap();
        assert_accounted(&lake, &report);
    }
    for dir in &folders[..2] {
        let path = landing_path(dir);
        for (table, n) in tables_of(&oracle(std::slice::from_ref(dir))) {
            assert_eq!(rows_of(&lake, table, &path), *n, "{table} of {path}");
        }
    }
    assert!(leases(&lake).is_empty());
}

/// The catalog the previous release (before landing paths) wrote for the fixture batch
/// `market/events/batch_id=2026-04-05_001` (`fixtures/legacy/README.md` says how).
fn legacy_lake() -> TempLake {
    let lake = TempLake::new();
    copy_tree(&repo().join("fixtures/legacy/lakehouse"), lake.catalog());
    lake
}

#[test]
fn tables_written_before_landing_paths_keep_working() {
    let lake = legacy_lake();
    let expected = expected_tables(BATCH1);
    assert!(!lake.columns("trade").iter().any(|c| c == "_landing_path"));
    for (table, rows) in &expected {
        assert_eq!(total_rows(&lake, table), *rows as i64, "legacy {table}");
    }

    // Another folder with the same batch id first: the old rows (no landing path) are
    // the fixture folder's, by their `_source_file`, and stay.
    let landing = tempfile::tempdir().unwrap();
    let copy = landing
        .path()
        .join(format!("other/events/batch_id={BATCH1}"));
    copy_tree(&batch_dir(BATCH1), &copy);
    load(&lake, std::slice::from_ref(&copy));
    assert!(lake.columns("trade").iter().any(|c| c == "_landing_path"));
    for (table, rows) in &expected {
        let old = lake
            .rows(table)
            .filter(|r| r.get("_landing_path").is_none())
            .len() as i64;
        assert_eq!(old, *rows as i64, "{table}: the old rows stay");
        assert_eq!(total_rows(&lake, table), 2 * *rows as i64, "{table}");
    }

    // The old batch's own folder reruns: its old rows are replaced, not doubled.
    load(&lake, &[batch_dir(BATCH1)]);
    for (table, rows) in &expected {
        assert_eq!(total_rows(&lake, table), 2 * *rows as i64, "{table}");
        for path in ["market/events", "other/events"] {
            let n = lake.rows(table).eq("_landing_path", path).len() as i64;
            assert_eq!(n, *rows as i64, "{table} of {path}");
        }
    }
    assert_eq!(
        lake.rows("_corrupt_records")
            .filter(|r| r.get("_landing_path").is_none())
            .len(),
        0,
        "old corrupt records replaced"
    );
    assert_eq!(
        lake.count("_corrupt_records") as i64,
        2 * expected_corrupt(BATCH1)
    );

    // A new batch, then reruns of both: exact.
    load(&lake, &[batch_dir(BATCH2)]);
    load(&lake, &[batch_dir(BATCH1)]);
    load(&lake, &[batch_dir(BATCH2)]);
    for (table, rows) in &expected_tables(BATCH2) {
        let n = lake.rows(table).eq("_batch_id", BATCH2).len() as i64;
        assert_eq!(n, *rows as i64, "{table} of {BATCH2}");
    }
    for (table, rows) in &expected {
        let n = lake.rows(table).eq("_batch_id", BATCH1).len() as i64;
        assert_eq!(n, 2 * *rows as i64, "{table} of {BATCH1}");
    }
    assert_readable_without_duplicates(&lake, "legacy then new");
}

fn expected_corrupt(batch: &str) -> i64 {
    expected(batch)["corrupt_lines"].as_i64().unwrap()
}
