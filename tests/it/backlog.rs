//! A landing zone as a backlog (`bronze ingest --pending`): every batch not loaded
//! successfully is loaded, oldest first per entity; a failed batch is pending again and
//! holds its entity's later batches back; worker processes started together load each
//! batch once.

use std::path::{Path, PathBuf};

use bronze::BatchStatus;

use crate::util::*;

/// `landing/<source>/<entity>/batch_id=<id>` copies of the fixture batch for every
/// entity and id; the landing root.
fn landing_zone(root: &Path, entities: &[&str], ids: &[&str]) -> PathBuf {
    let landing = root.join("landing");
    for entity in entities {
        for id in ids {
            bronze::testdata::copy_tree(
                &batch_dir(BATCH1),
                &landing.join(entity).join(format!("batch_id={id}")),
            )
            .unwrap();
        }
    }
    landing
}

fn names(outcomes: &[bronze::BacklogOutcome]) -> Vec<(String, String, BatchStatus)> {
    outcomes
        .iter()
        .map(|o| {
            (
                o.batch.landing_path.clone(),
                o.batch.batch_id.clone(),
                o.status,
            )
        })
        .collect()
}

/// Table rows equal `batches` copies of the fixture batch's.
fn assert_copies(lake: &TempLake, batches: u64) {
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(
            lake.count(&format!("SELECT count(*) FROM {table}")) as u64,
            batches * rows,
            "{table}"
        );
    }
}

#[test]
fn pending_loads_every_unloaded_batch_oldest_first_and_then_none() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s1/e1", "s1/e2", "s2/e1"], &["d2", "d1"]);
    let lake = TempLake::new();
    // One batch loaded before, on its own.
    let ingest = lake.ingest().build().unwrap();
    ingest.run(landing.join("s1/e2/batch_id=d1")).unwrap();
    let pending = ingest.pending(&landing).unwrap();
    let listed: Vec<(String, String)> = pending
        .iter()
        .map(|b| (b.landing_path.clone(), b.batch_id.clone()))
        .collect();
    let pair = |lp: &str, id: &str| (lp.to_string(), id.to_string());
    assert_eq!(
        listed,
        [
            pair("s1/e1", "d1"),
            pair("s2/e1", "d1"),
            pair("s1/e1", "d2"),
            pair("s1/e2", "d2"),
            pair("s2/e1", "d2"),
        ]
    );
    let outcomes = ingest
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    assert!(
        outcomes.iter().all(|o| o.status == BatchStatus::Loaded),
        "{:?}",
        names(&outcomes)
    );
    assert_eq!(outcomes.len(), 5);
    assert_copies(&lake, 6);
    assert!(ingest.pending(&landing).unwrap().is_empty());
    assert!(
        ingest
            .run_pending(&landing, &bronze::PendingOptions::default())
            .unwrap()
            .is_empty()
    );
    // Only the entity under a narrower root.
    std::fs::create_dir_all(landing.join("s2/e1/batch_id=d3")).unwrap();
    bronze::testdata::copy_tree(&batch_dir(BATCH1), &landing.join("s2/e1/batch_id=d3")).unwrap();
    let narrow = ingest.pending(landing.join("s1")).unwrap();
    assert!(narrow.is_empty(), "{narrow:?}");
    assert_eq!(ingest.pending(landing.join("s2/e1")).unwrap().len(), 1);
}

#[test]
fn a_failed_batch_is_pending_again_and_holds_its_entitys_later_batches_back() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2"]);
    // `s/a`'s first batch has a file that cannot be read (simulated).
    std::fs::write(
        landing.join("s/a/batch_id=d1/part-unreadable.jsonl"),
        b"{\"topic\":\"t\",\"message_id\":\"m\"}\n",
    )
    .unwrap();
    let lake = TempLake::new();
    let failing = lake
        .ingest()
        .with_failpoint("unreadable_file")
        .build()
        .unwrap();
    let outcomes = failing
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    let pair = |lp: &str, id: &str, s| (lp.to_string(), id.to_string(), s);
    assert_eq!(
        names(&outcomes),
        [
            pair("s/a", "d1", BatchStatus::Failed),
            pair("s/b", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Waiting),
            pair("s/b", "d2", BatchStatus::Loaded),
        ]
    );
    assert!(
        outcomes[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("unreadable"),
        "{:?}",
        outcomes[0].reason
    );
    assert!(
        outcomes[2].reason.as_deref().unwrap_or("").contains("d1"),
        "{:?}",
        outcomes[2].reason
    );
    // Once the file can be read, the next invocation loads what is left, in order.
    let outcomes = lake
        .ingest()
        .build()
        .unwrap()
        .run_pending(&landing, &bronze::PendingOptions::default())
        .unwrap();
    assert_eq!(
        names(&outcomes),
        [
            pair("s/a", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Loaded),
        ]
    );
}

/// A folder whose name cannot be a batch (`batch_id=bad id`) is skipped with a warning,
/// not a reason to stop the backlog; `--pending` refuses the flags that name one batch.
#[test]
fn a_folder_that_cannot_be_a_batch_is_skipped_and_single_batch_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1"]);
    std::fs::create_dir_all(landing.join("s/a/batch_id=bad id")).unwrap();
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let pending = ingest.pending(&landing).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].batch_id, "d1");
    for flag in [["--landing-path", "s/a"], ["--batch-id", "d9"]] {
        let out = bronze_cli()
            .args(["ingest", "--pending", "--catalog"])
            .arg(lake.catalog())
            .args(flag)
            .arg(&landing)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}

/// With `require_success`, a folder without `_SUCCESS` is not ready and holds its
/// entity's later batches back; once the marker is there, both load in order.
#[test]
fn with_require_success_a_folder_without_its_marker_waits() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2"]);
    std::fs::remove_file(landing.join("s/a/batch_id=d1/_SUCCESS")).unwrap();
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let options = bronze::PendingOptions::default().with_require_success(true);
    let pair = |lp: &str, id: &str, s| (lp.to_string(), id.to_string(), s);
    assert_eq!(
        names(&ingest.run_pending(&landing, &options).unwrap()),
        [
            pair("s/a", "d1", BatchStatus::NotReady),
            pair("s/b", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Waiting),
            pair("s/b", "d2", BatchStatus::Loaded),
        ]
    );
    std::fs::write(landing.join("s/a/batch_id=d1/_SUCCESS"), b"").unwrap();
    assert_eq!(
        names(&ingest.run_pending(&landing, &options).unwrap()),
        [
            pair("s/a", "d1", BatchStatus::Loaded),
            pair("s/a", "d2", BatchStatus::Loaded),
        ]
    );
}

#[test]
fn at_most_max_batches_run_in_one_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a"], &["d1", "d2", "d3"]);
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    let first = ingest
        .run_pending(
            &landing,
            &bronze::PendingOptions::default().with_max_batches(Some(2)),
        )
        .unwrap();
    assert_eq!(first.len(), 2);
    let rest = ingest
        .run_pending(
            &landing,
            &bronze::PendingOptions::default().with_max_batches(Some(2)),
        )
        .unwrap();
    assert_eq!(
        names(&rest),
        [("s/a".into(), "d3".into(), BatchStatus::Loaded)]
    );
}

/// Batches a `--pending --json` run reports loaded.
fn loaded_in(stdout: &[u8]) -> usize {
    let outcomes: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    outcomes
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["status"] == "loaded")
        .count()
}

/// Three `bronze ingest --pending` processes started together on 2 entities × 4
/// batches, then one more to sweep up what waited: each batch loaded by exactly one
/// successful run, the tables hold each batch once.
#[test]
fn worker_processes_on_one_backlog_load_each_batch_once() {
    let dir = tempfile::tempdir().unwrap();
    let landing = landing_zone(dir.path(), &["s/a", "s/b"], &["d1", "d2", "d3", "d4"]);
    let lake = TempLake::new();
    let worker = || {
        let mut c = bronze_cli();
        c.args(["ingest", "--pending", "--json", "--catalog"])
            .arg(lake.catalog())
            .arg(&landing)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().unwrap()
    };
    let workers: Vec<_> = (0..3).map(|_| worker()).collect();
    let mut loaded = 0;
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        loaded += loaded_in(&out.stdout);
    }
    let sweep = bronze_cli()
        .args(["ingest", "--pending", "--json", "--catalog"])
        .arg(lake.catalog())
        .arg(&landing)
        .output()
        .unwrap();
    loaded += loaded_in(&sweep.stdout);
    assert_eq!(loaded, 8, "each batch loaded once");
    assert_eq!(
        lake.count(
            "SELECT count(*) FROM _run_control WHERE \"table\" = '(batch)' AND status = 'ok'"
        ),
        8,
        "one successful run per batch"
    );
    assert_copies(&lake, 8);
    assert!(leases(&lake).is_empty());
}
