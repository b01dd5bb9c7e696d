//! Two processes and one batch: the batch lease lets exactly one load it; a lease left
//! by a killed run is taken over; a lease of another host expires. (Different batches
//! into the same tables at once: `cli::separate_processes_load_different_batches_into_
//! the_same_tables`; OPTIMIZE and VACUUM during ingestion: `maintenance::concurrent_
//! ingest_optimize_and_vacuum_lose_nothing`.)

use std::os::unix::process::ExitStatusExt as _;

use crate::util::*;

fn ingest_cmd(lake: &TempLake, batch: &str) -> std::process::Command {
    let mut c = bronze_cli();
    c.arg("ingest")
        .arg(batch_dir(batch))
        .arg("--catalog")
        .arg(lake.catalog())
        .arg("--json");
    c
}

fn report_of(out: &std::process::Output) -> bronze::BatchReport {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn two_processes_loading_one_batch_at_once_leave_exactly_one_copy() {
    let lake = TempLake::new();
    let reference = TempLake::new();
    reference
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap();

    // A holds the lease, paused right after staging (the failpoint waits on stdin).
    let a = Paused::start(ingest_cmd(&lake, BATCH1));
    assert_eq!(leases(&lake).len(), 1, "A holds the lease");

    // B, the same batch while A runs: refused at once, exit 3, naming A and the fix.
    let b = ingest_cmd(&lake, BATCH1).output().unwrap();
    let b_err = String::from_utf8_lossy(&b.stderr);
    assert_eq!(b.status.code(), Some(3), "{b_err}");
    assert!(
        b_err.contains("being loaded by another run") && b_err.contains("_bronze_leases"),
        "{b_err}"
    );

    // A goes on and finishes alone.
    let a_out = a.finish();
    let report = report_of(&a_out);
    assert!(report.exit_code() < 2, "{}", report.to_text());
    assert_accounted(&lake, &report);
    assert_readable_without_duplicates(&lake, "A then B");
    assert!(snapshot(&lake) == snapshot(&reference), "exactly one copy");
    assert!(leases(&lake).is_empty(), "A released its lease");

    // Now that A is done, B's rerun goes through and still leaves one copy.
    let b = ingest_cmd(&lake, BATCH1).output().unwrap();
    assert!(
        b.status.code().is_some_and(|c| c < 2),
        "{}",
        String::from_utf8_lossy(&b.stderr)
    );
    assert!(snapshot(&lake) == snapshot(&reference), "exactly one copy");
}

#[test]
fn the_lease_of_a_killed_run_is_taken_over_by_the_rerun() {
    let lake = TempLake::new();
    let killed = ingest_cmd(&lake, BATCH1)
        .env("BRONZE_FAILPOINT", "after_staging")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    assert_eq!(killed.status.signal(), Some(9));
    assert_eq!(leases(&lake).len(), 1, "a killed run leaves its lease");
    let out = ingest_cmd(&lake, BATCH1).output().unwrap();
    let report = report_of(&out);
    assert!(report.exit_code() < 2, "{}", report.to_text());
    assert_took_over_a_lease(&report);
    assert_accounted(&lake, &report);
    assert!(leases(&lake).is_empty());
}

#[test]
fn a_lease_of_another_host_blocks_until_it_expires() {
    let lake = TempLake::new();
    let dir = lake.schema_dir().join(bronze::lease::LEASE_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    let holder = bronze::lease::Holder {
        run_id: "elsewhere-1".into(),
        host: "another-host".into(),
        pid: 1,
        pid_start: Some(1),
        since_micros: chrono::Utc::now().timestamp_micros(),
        renewed_micros: None,
        released_micros: None,
    };
    std::fs::write(
        dir.join(bronze::lease::lease_file("market/events", BATCH1)),
        serde_json::to_vec(&holder).unwrap(),
    )
    .unwrap();
    let err = lake
        .ingest()
        .build()
        .unwrap()
        .run(batch_dir(BATCH1))
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, bronze::Error::BatchLeased { .. }) && msg.contains("another-host"),
        "{msg}"
    );
    assert_eq!(lake.tables(), Vec::<String>::new(), "nothing written");
    // Once older than the TTL, the lease is the leftover of a lost host.
    let mut b = lake.ingest();
    b.config_mut().lease_ttl = std::time::Duration::ZERO;
    let report = b.build().unwrap().run(batch_dir(BATCH1)).unwrap();
    assert_accounted(&lake, &report);
    assert!(leases(&lake).is_empty());
}
