//! Catalogs in object stores, against real emulators the tests start themselves: moto's
//! S3 server (from PyPI, installed into the venv by `scripts/test`) and Azurite (from npm,
//! installed under `.emulators/` by `scripts/test`). Each test starts its own emulator on
//! a free port with its data in a temp folder and stops it when done, also on failure.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::util::*;

/// A secret no output may ever show.
const SECRET: &str = "s3cr3t-value-never-shown-7f3a";

/// An emulator process, killed on drop.
pub(crate) struct Emulator {
    child: Child,
    pub(crate) endpoint: String,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn venv_bin(name: &str) -> PathBuf {
    let python = std::env::var_os("BRONZE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    let bin = python.with_file_name(name);
    assert!(
        bin.exists(),
        "{} missing: the cloud tests need the emulators `scripts/test` installs (run it once, or set BRONZE_PYTHON to a venv with moto[server])",
        bin.display()
    );
    bin
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A command running `program` that the kernel kills when the test process dies, even
/// by SIGKILL (a CI timeout), which no destructor survives: `setpriv --pdeathsig KILL`
/// (util-linux) when the machine has it.
pub(crate) fn emulator_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    if std::path::Path::new("/usr/bin/setpriv").exists() {
        let mut c = Command::new("/usr/bin/setpriv");
        c.args(["--pdeathsig", "KILL", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Starts `cmd` and returns once a line of its output contains `ready` (the rest of its
/// output is drained in the background so the process never blocks on a full pipe).
pub(crate) fn start(
    mut cmd: Command,
    ready: &str,
    endpoint: String,
    from_stderr: bool,
) -> Emulator {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the emulator starts");
    let (watched, other): (Box<dyn std::io::Read + Send>, Box<dyn std::io::Read + Send>) =
        if from_stderr {
            (
                Box::new(child.stderr.take().unwrap()),
                Box::new(child.stdout.take().unwrap()),
            )
        } else {
            (
                Box::new(child.stdout.take().unwrap()),
                Box::new(child.stderr.take().unwrap()),
            )
        };
    std::thread::spawn(move || std::io::copy(&mut { other }, &mut std::io::sink()));
    let mut lines = BufReader::new(watched);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("the emulator exited before it was ready:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains(ready) {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    Emulator { child, endpoint }
}

/// moto's S3 server on a free port.
/// moto's S3 server as `scripts/moto_server.py` runs it (conditional writes that hold).
pub(crate) fn moto() -> Emulator {
    moto_with(&[])
}

fn moto_with(env: &[(&str, &str)]) -> Emulator {
    let port = free_port();
    let mut cmd = emulator_command(venv_bin("python"));
    cmd.arg(repo().join("scripts/moto_server.py"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .envs(env.iter().copied());
    start(cmd, "Running on", format!("http://127.0.0.1:{port}"), true)
}

/// The S3 emulator keeps S3's promise that Delta's commits rest on: of six concurrent
/// `If-None-Match: *` puts of one key, one succeeds. Thread switches are made frequent,
/// under which plain moto lets two through for about 8 keys in 100.
#[test]
fn the_s3_emulator_lets_one_of_six_concurrent_conditional_puts_through() {
    let moto = moto_with(&[("BRONZE_MOTO_SWITCH_INTERVAL", "0.000001")]);
    create_bucket(&moto.endpoint, "race");
    let out = python(
        r#"
import sys, threading, boto3, botocore
url = sys.argv[1]
clients = [boto3.client("s3", endpoint_url=url, aws_access_key_id="a", aws_secret_access_key="b",
                        region_name="us-east-1") for _ in range(6)]
winners = []
for k in range(60):
    wins, start = [], threading.Barrier(6)
    def put(c, i):
        start.wait()
        try:
            c.put_object(Bucket="race", Key=f"k{k}", Body=str(i).encode(), IfNoneMatch="*")
            wins.append(i)
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == "PreconditionFailed", e
    threads = [threading.Thread(target=put, args=(c, i)) for i, c in enumerate(clients)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    winners.append(len(wins))
print(winners)
"#,
        &[&moto.endpoint],
    );
    let winners: Vec<usize> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(winners, vec![1; 60]);
}

/// Runs a Python snippet of the venv (boto3, deltalake) with `args`; its stdout. The
/// snippet ends with `os._exit(0)` once its output is flushed: under load, pyarrow's
/// threads have been seen to abort the interpreter's teardown ("terminate called
/// without an active exception") after the snippet had done its work.
pub(crate) fn python(code: &str, args: &[&str]) -> String {
    let code = format!("{code}\nimport os, sys\nsys.stdout.flush()\nos._exit(0)\n");
    let out = Command::new(venv_bin("python"))
        .arg("-c")
        .arg(&code)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `KEY=VALUE` pairs as owned strings.
fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn s3_options(endpoint: &str) -> Vec<(String, String)> {
    owned(&[
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_REGION", "us-east-1"),
    ])
}

pub(crate) fn create_bucket(endpoint: &str, bucket: &str) {
    python(
        "import sys, boto3\n\
         boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='testing',\n\
             aws_secret_access_key='testing', region_name='us-east-1').create_bucket(Bucket=sys.argv[2])",
        &[endpoint, bucket],
    );
}

/// Rows per table of the catalog at `url`, read by Python `deltalake` with the same
/// storage options: a reader that is not `bronze`.
fn rows_per_table(
    url: &str,
    tables: &[String],
    options: &[(String, String)],
) -> BTreeMap<String, u64> {
    let opts = serde_json::to_string(&options.iter().cloned().collect::<BTreeMap<_, _>>()).unwrap();
    let out = python(
        r#"
import sys, json, deltalake
root, opts = sys.argv[1], json.loads(sys.argv[2])
for t in sys.argv[3:]:
    d = deltalake.DeltaTable(f"{root}/{t}", storage_options=opts)
    print(t, d.to_pyarrow_dataset().count_rows())
"#,
        &[
            &[url, &opts][..],
            &tables.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    out.lines()
        .map(|l| {
            let (t, n) = l.split_once(' ').unwrap();
            (t.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// The CLI running `command` with `options` as `--storage-option`s.
fn cli_with(command: &str, options: &[(String, String)]) -> Command {
    let mut c = bronze_cli();
    c.arg(command);
    for (k, v) in options {
        c.arg("--storage-option").arg(format!("{k}={v}"));
    }
    c
}

/// Loads the fixture batch twice into `catalog` (an object store URL reached with
/// `options`): both runs report the expected rows, another Delta reader (Python
/// `deltalake`) finds exactly the batch's rows after each, `health` lists the tables,
/// with `maintenance` OPTIMIZE, checkpoint, VACUUM (dry run) and history succeed and
/// leave the rows as they were, and no output shows `secret`.
fn load_twice_and_check(
    catalog: &str,
    options: &[(String, String)],
    secret: &str,
    maintenance: bool,
) {
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    let mut outputs = String::new();
    for run in 0..2 {
        // The rerun logs everything bronze logs (-vvv): no secret there either.
        let out = cli_with("ingest", options)
            .args(["--catalog", catalog, "--json"])
            .args((run == 1).then_some("-vvv"))
            .arg(batch_dir(BATCH1))
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        outputs.push_str(&stdout);
        outputs.push_str(&stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "run {run}: corrupt lines make 1\n{stderr}"
        );
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let exp = expected(BATCH1);
        for field in ["corrupt_lines", "duplicates"] {
            assert_eq!(report[field], exp[field], "run {run}: {field}");
        }
        // Object store calls per stage: the lease and every table's commit go to the
        // store (the fixture folder is local: discovery makes none).
        let calls = &report["store_calls"];
        assert_eq!(calls["discover"], 0, "run {run}: {calls}");
        assert!(calls["lease"].as_u64() >= Some(2), "run {run}: {calls}");
        assert!(
            calls["tables"].as_u64() >= Some(2 * want.len() as u64),
            "run {run}: {calls}"
        );
        assert!(
            calls["run_control"].as_u64() >= Some(1),
            "run {run}: {calls}"
        );
        for (table, rows) in &want {
            assert_eq!(
                report["tables"][table]["rows_written"].as_u64(),
                Some(*rows),
                "run {run}, table {table}: {stderr}"
            );
        }
        // What is in the store, read by another Delta reader: the batch's rows once,
        // after each run.
        assert_eq!(
            rows_per_table(&format!("{catalog}/bronze"), &tables, options),
            want,
            "run {run}"
        );
    }
    let mut maintain = |command: &str, args: &[&str]| -> String {
        let out = cli_with(command, options)
            .args(["--catalog", catalog])
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        outputs.push_str(&stdout);
        outputs.push_str(&String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{command} {args:?}:\n{outputs}");
        stdout
    };
    let health = maintain("health", &["--json"]);
    for table in &tables {
        assert!(
            health.contains(&format!("\"{table}\"")),
            "{table}: {health}"
        );
    }
    if maintenance {
        // Maintenance in the store: compaction, a checkpoint, a VACUUM dry run and the
        // history (both loads); the rows are the same after them.
        maintain("optimize", &["--all"]);
        maintain("checkpoint", &["--all"]);
        maintain("vacuum", &["--all", "--dry-run"]);
        let history = maintain("history", &["_run_control", "--json"]);
        assert_eq!(history.matches("\"WRITE\"").count(), 2, "{history}");
        // The report reads `_run_control` and every table from the store: both runs.
        let report: serde_json::Value =
            serde_json::from_str(&maintain("report", &["--json"])).unwrap();
        assert_eq!(report["batches"].as_array().unwrap().len(), 2, "{report}");
        let reported: Vec<&str> = report["health"]["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["table"].as_str().unwrap())
            .collect();
        for table in tables.iter().map(String::as_str).chain(["_run_control"]) {
            assert!(reported.contains(&table), "{table}: {reported:?}");
        }
        assert_eq!(
            rows_per_table(&format!("{catalog}/bronze"), &tables, options),
            want,
            "after maintenance"
        );
    }
    assert!(!outputs.contains(secret), "a secret was shown:\n{outputs}");
    assert!(
        !outputs.contains("ERROR"),
        "a clean load logs no error:\n{outputs}"
    );
}

/// An ingest of the fixture batch into `catalog` with `options` and `args`.
fn ingest_into(catalog: &str, options: &[(String, String)], args: &[&str]) -> Command {
    let mut c = cli_with("ingest", options);
    c.args(["--catalog", catalog, "--json"])
        .args(args)
        .arg(batch_dir(BATCH1));
    c
}

fn report_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Waits (up to 60 s) until `done` holds.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The batch lease in an object store: a run slower than its TTL keeps its lease (its
/// heartbeat renews it with a conditional update) and a second run of the batch exits 3;
/// a lease of another host is live while renewed and taken over (compare-and-swap) once
/// not renewed within the TTL; the catalog ends with exactly one copy of the batch.
fn leases_hold_in(catalog: &str, options: &[(String, String)]) {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let (store, root) = bronze::testdata::object_store_at(catalog, options).unwrap();
    let lease = root
        .join("bronze")
        .join(bronze::lease::LEASE_DIR)
        .join(bronze::lease::lease_file("market/events", BATCH1).as_str());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let read = || -> Option<bronze::lease::Holder> {
        let bytes = rt
            .block_on(async { store.get(&lease).await?.bytes().await })
            .ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    };

    // A pauses after staging with a TTL of 1 s and stays paused past it.
    let a = Paused::start(ingest_into(catalog, options, &["--lease-ttl", "1s"]));
    until("A's lease renewed past its TTL", || {
        read().is_some_and(|h| {
            h.renewed_micros
                .is_some_and(|r| r - h.since_micros > 1_500_000)
        })
    });
    let b = ingest_into(catalog, options, &["--lease-ttl", "1s"])
        .output()
        .unwrap();
    let b_err = String::from_utf8_lossy(&b.stderr);
    assert_eq!(b.status.code(), Some(3), "{b_err}");
    assert!(b_err.contains("being loaded by another run"), "{b_err}");
    let a_out = a.finish();
    assert_eq!(
        a_out.status.code(),
        Some(1),
        "A finishes (corrupt lines make 1)"
    );
    assert!(read().is_none(), "A released its lease");

    // A lease of a lost host: live while renewed, taken over once not renewed for the TTL.
    let put_lease = |renewed_micros: i64| {
        let holder = bronze::lease::Holder {
            run_id: "lost-run".into(),
            host: "lost-host".into(),
            pid: 1,
            pid_start: Some(1),
            since_micros: renewed_micros - 1,
            renewed_micros: Some(renewed_micros),
            released_micros: None,
        };
        rt.block_on(store.put(&lease, serde_json::to_vec(&holder).unwrap().into()))
            .unwrap();
    };
    let now = chrono::Utc::now().timestamp_micros();
    put_lease(now);
    let live = ingest_into(catalog, options, &["--lease-ttl", "10m"])
        .output()
        .unwrap();
    assert_eq!(
        live.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&live.stderr)
    );
    put_lease(now - 3_600_000_000);
    let took = ingest_into(catalog, options, &["--lease-ttl", "10m"])
        .output()
        .unwrap();
    assert_eq!(took.status.code(), Some(1));
    let warnings = report_of(&took)["warnings"].to_string();
    assert!(
        warnings.contains("took over the lease of run lost-run"),
        "{warnings}"
    );
    assert!(read().is_none(), "released after the takeover");
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        rows_per_table(&format!("{catalog}/bronze"), &tables, options),
        want,
        "exactly one copy"
    );
}

/// Over its memory budget a run spills its staging table to the store and streams its
/// topics back from it; killed after staging, the rerun resumes from the staging table,
/// loads exact counts and drops the staging table.
fn spill_and_resume_in(catalog: &str, options: &[(String, String)]) {
    use futures::TryStreamExt as _;
    let killed = ingest_into(catalog, options, &["--memory-budget", "4KiB"])
        .env("BRONZE_FAILPOINT", "after_staging")
        .env("BRONZE_FAILPOINT_ACTION", "kill")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(killed.status.signal(), Some(9));
    let (store, root) = bronze::testdata::object_store_at(catalog, options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let staging = || -> Vec<String> {
        let listed = rt
            .block_on(store.list_with_delimiter(Some(&root.clone().join("bronze"))))
            .unwrap();
        listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .filter(|n| n.starts_with("_tmp_raw_load_"))
            .collect()
    };
    assert_eq!(staging().len(), 1, "the killed run left its staging table");
    let out = ingest_into(catalog, options, &["--memory-budget", "4KiB"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_of(&out);
    assert_eq!(report["staging"], "resumed");
    let exp = expected(BATCH1);
    for field in ["corrupt_lines", "duplicates"] {
        assert_eq!(report[field], exp[field], "{field}");
    }
    assert!(
        staging().is_empty(),
        "staging dropped after the resumed run"
    );
    let left: Vec<_> = rt
        .block_on(
            store
                .list(Some(
                    &root.clone().join("bronze").join(bronze::lease::LEASE_DIR),
                ))
                .try_collect::<Vec<_>>(),
        )
        .unwrap();
    assert!(
        left.is_empty(),
        "the dead run's lease was taken over and released"
    );
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        rows_per_table(&format!("{catalog}/bronze"), &tables, options),
        want
    );
}

#[test]
fn in_s3_a_slow_run_keeps_its_lease_and_a_lost_one_is_taken_over() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    leases_hold_in("s3://lake/lakehouse", &s3_options(&s3.endpoint));
}

#[test]
fn in_s3_a_spilled_batch_killed_after_staging_resumes_from_the_store() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    spill_and_resume_in("s3://lake/lakehouse", &s3_options(&s3.endpoint));
}

/// An S3-compatible store without put-if-absent (object_store's `conditional_put`
/// disabled): refused, naming the fix and writing nothing; with `--single-writer` the
/// batch loads exactly, a rerun changes nothing, and OPTIMIZE needs the flag too.
#[test]
fn in_s3_without_put_if_absent_a_run_is_refused_unless_single_writer() {
    use futures::TryStreamExt as _;
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    let catalog = "s3://lake/lakehouse";
    let mut options = s3_options(&s3.endpoint);
    options.push(("conditional_put".into(), "disabled".into()));
    let refused = ingest_into(catalog, &options, &[]).output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot put-if-absent") && err.contains("--single-writer"),
        "{err}"
    );
    let (store, root) = bronze::testdata::object_store_at(catalog, &options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let written: Vec<_> = rt
        .block_on(store.list(Some(&root)).try_collect::<Vec<_>>())
        .unwrap();
    assert!(written.is_empty(), "nothing written: {written:?}");

    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    for run in 0..2 {
        let out = ingest_into(catalog, &options, &["--single-writer"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "run {run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            rows_per_table(&format!("{catalog}/bronze"), &tables, &options),
            want,
            "run {run}"
        );
    }
    let optimize = |extra: &[&str]| {
        cli_with("optimize", &options)
            .args(["--catalog", catalog, "--all"])
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = optimize(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--single-writer"));
    let done = optimize(&["--single-writer"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(
        rows_per_table(&format!("{catalog}/bronze"), &tables, &options),
        want
    );
}

/// `scripts/faulty_proxy.py` in front of `upstream` with `args` (its faults).
fn faulty_proxy(upstream: &str, args: &[&str]) -> Emulator {
    let port = free_port();
    let mut cmd = emulator_command(venv_bin("python"));
    cmd.arg(repo().join("scripts/faulty_proxy.py"))
        .arg(upstream)
        .args(["--port", &port.to_string()])
        .args(args);
    start(
        cmd,
        "listening on",
        format!("http://127.0.0.1:{port}"),
        false,
    )
}

/// A network that fails requests for a while (503 SlowDown, connections dropped after
/// the request was sent, mid-upload for puts): `object_store` retries them with
/// jittered backoff, the report and the `(batch)` row of `_run_control` count the
/// retries, and the batch loads exactly.
#[test]
fn in_s3_through_a_faulty_network_a_run_retries_counts_and_loads_exactly() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    let proxy = faulty_proxy(&s3.endpoint, &["--every", "5", "--faults", "8"]);
    let catalog = "s3://lake/lakehouse";
    let out = ingest_into(catalog, &s3_options(&proxy.endpoint), &[])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let report = report_of(&out);
    let retries = report["store_retries"].as_u64().unwrap();
    // Each of the 8 faults is retried once (the proxy fails no retry).
    assert_eq!(retries, 8, "retries counted");
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    let direct = s3_options(&s3.endpoint);
    assert_eq!(
        rows_per_table(&format!("{catalog}/bronze"), &tables, &direct),
        want
    );
    let opts = serde_json::to_string(&direct.iter().cloned().collect::<BTreeMap<_, _>>()).unwrap();
    let recorded = python(
        r#"
import sys, json, deltalake
t = deltalake.DeltaTable(sys.argv[1], storage_options=json.loads(sys.argv[2])).to_pyarrow_table()
print(max(r for r, n in zip(t["store_retries"].to_pylist(), t["table"].to_pylist()) if n == "(batch)"))
"#,
        &[&format!("{catalog}/bronze/_run_control"), &opts],
    );
    assert_eq!(recorded.trim(), retries.to_string(), "_run_control");
}

/// A store that goes down mid-run for longer than the retries last: the run fails with
/// the store's error (exit 2, no panic), and once the store is back the same command
/// loads the batch exactly (nothing half-written that the rerun does not repair).
#[test]
fn in_s3_a_store_down_mid_run_fails_cleanly_and_the_rerun_repairs_it() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    let dir = tempfile::tempdir().unwrap();
    let heal = dir.path().join("healed");
    let proxy = faulty_proxy(
        &s3.endpoint,
        &["--down-after", "40", "--heal-file", heal.to_str().unwrap()],
    );
    let catalog = "s3://lake/lakehouse";
    let mut options = s3_options(&proxy.endpoint);
    options.extend(owned(&[("max_retries", "2"), ("retry_timeout", "3s")]));
    let failed = ingest_into(catalog, &options, &[]).output().unwrap();
    let err = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{err}");
    assert!(
        err.contains("503") && err.contains("s3://lake/lakehouse") && !err.contains("panicked"),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
    std::fs::write(&heal, b"").unwrap();
    let rerun = ingest_into(catalog, &options, &[]).output().unwrap();
    assert_eq!(
        rerun.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        rows_per_table(
            &format!("{catalog}/bronze"),
            &tables,
            &s3_options(&s3.endpoint)
        ),
        want
    );
}

#[test]
fn in_azure_a_slow_run_keeps_its_lease_and_a_lost_one_is_taken_over() {
    let (az, _data) = azurite();
    create_container(&az.endpoint, "lake");
    leases_hold_in(
        &format!("abfss://lake@{AZURITE_ACCOUNT}.dfs.core.windows.net/lakehouse"),
        &azure_options(&az.endpoint),
    );
}

#[test]
fn in_azure_a_spilled_batch_killed_after_staging_resumes_from_the_store() {
    let (az, _data) = azurite();
    create_container(&az.endpoint, "lake");
    spill_and_resume_in(
        &format!("abfss://lake@{AZURITE_ACCOUNT}.dfs.core.windows.net/lakehouse"),
        &azure_options(&az.endpoint),
    );
}

#[test]
fn a_catalog_in_s3_loads_the_fixture_batch_exactly_and_a_rerun_changes_nothing() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "lake");
    load_twice_and_check(
        "s3://lake/lakehouse",
        &s3_options(&s3.endpoint),
        SECRET,
        true,
    );
}

/// Azurite's well-known development account.
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Azurite's blob service on a free port, its data in a temp folder.
fn azurite() -> (Emulator, tempfile::TempDir) {
    azurite_with_accounts(None)
}

/// Azurite with `accounts` (`name:key;…`, Azurite's `AZURITE_ACCOUNTS`) instead of its
/// development account.
fn azurite_with_accounts(accounts: Option<&str>) -> (Emulator, tempfile::TempDir) {
    let bin = std::env::var_os("BRONZE_AZURITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".emulators/node_modules/.bin/azurite-blob"));
    assert!(
        bin.exists(),
        "{} missing: the cloud tests need Azurite, which `scripts/test` installs from npm",
        bin.display()
    );
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = emulator_command(bin);
    cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .arg("--location")
        .arg(data.path())
        .args(["--skipApiVersionCheck", "--loose", "--disableTelemetry"]);
    if let Some(accounts) = accounts {
        cmd.env("AZURITE_ACCOUNTS", accounts);
    }
    let emulator = start(
        cmd,
        "successfully listens on",
        format!("http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"),
        false,
    );
    (emulator, data)
}

fn azure_options(endpoint: &str) -> Vec<(String, String)> {
    owned(&[
        ("AZURE_STORAGE_ACCOUNT_NAME", AZURITE_ACCOUNT),
        ("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY),
        ("AZURE_STORAGE_ENDPOINT", endpoint),
        ("AZURE_ALLOW_HTTP", "true"),
    ])
}

fn create_container(endpoint: &str, container: &str) {
    create_container_of(AZURITE_ACCOUNT, endpoint, container);
}

/// Creates `container` in `account` (whose key is [`AZURITE_KEY`]) at `endpoint`.
fn create_container_of(account: &str, endpoint: &str, container: &str) {
    python(
        "import sys\n\
         from azure.storage.blob import BlobServiceClient\n\
         account, key, endpoint, container = sys.argv[1:5]\n\
         conn = f'DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};BlobEndpoint={endpoint};'\n\
         BlobServiceClient.from_connection_string(conn).create_container(container)",
        &[account, AZURITE_KEY, endpoint, container],
    );
}

#[test]
fn a_catalog_in_azure_blob_storage_loads_the_fixture_batch_exactly_and_a_rerun_changes_nothing() {
    let (az, _data) = azurite();
    create_container(&az.endpoint, "lake");
    load_twice_and_check(
        &format!("abfss://lake@{AZURITE_ACCOUNT}.dfs.core.windows.net/lakehouse"),
        &azure_options(&az.endpoint),
        AZURITE_KEY,
        true,
    );
}

#[test]
fn a_missing_bucket_or_bad_url_is_refused_with_the_store_named_and_no_secret() {
    let s3 = moto();
    let options = s3_options(&s3.endpoint);
    let out = cli_with("ingest", &options)
        .args(["--catalog", "s3://no-such-bucket/lake"])
        .arg(batch_dir(BATCH1))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no-such-bucket"), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    for (catalog, says) in [
        ("ftp://host/lake", "unknown scheme"),
        ("s3:///lake", "no bucket"),
    ] {
        let out = cli_with("ingest", &options)
            .args(["--catalog", catalog])
            .arg(batch_dir(BATCH1))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{catalog}: {stderr}");
        assert!(stderr.contains(says), "{catalog}: {stderr}");
    }
}

/// `rel` (`/`-separated) under `dir` in a store.
fn object_path(
    dir: &deltalake::logstore::object_store::path::Path,
    rel: &str,
) -> deltalake::logstore::object_store::path::Path {
    let full = if dir.as_ref().is_empty() {
        rel.to_string()
    } else {
        format!("{dir}/{rel}")
    };
    deltalake::logstore::object_store::path::Path::parse(full).unwrap()
}

/// The fixture folder copied as objects to `<root>/market/events/batch_id=<id>` (plus a
/// sub-folder that is not read); that folder's path under `root`.
fn upload_fixture(root: &str, options: &[(String, String)]) -> String {
    upload_fixture_as(root, options, BATCH1)
}

/// [`upload_fixture`] as `<root>/market/events/batch_id=<id>`.
fn upload_fixture_as(root: &str, options: &[(String, String)], id: &str) -> String {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    let (store, dir) = bronze::testdata::object_store_at(root, options).unwrap();
    let folder = format!("market/events/batch_id={id}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    for e in std::fs::read_dir(batch_dir(BATCH1)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            let name = e.file_name().into_string().unwrap();
            let path = object_path(&dir, &format!("{folder}/{name}"));
            rt.block_on(store.put(&path, std::fs::read(e.path()).unwrap().into()))
                .unwrap();
        }
    }
    let nested = object_path(&dir, &format!("{folder}/nested/x.jsonl"));
    rt.block_on(store.put(&nested, b"{}".to_vec().into()))
        .unwrap();
    folder
}

/// The fixture folder copied as objects under `root` (an object store URL), plus a
/// sub-folder that is not read, loads into a local catalog exactly as the folder on
/// disk does, with lineage naming the objects.
fn a_landing_folder_in(root: &str, options: &[(String, String)], secret: &str) {
    let folder = upload_fixture(root, options);
    let lake = TempLake::new();
    let out = cli_with("ingest", options)
        .args(["--json", "--catalog"])
        .arg(lake.catalog())
        .arg(format!("{root}/{folder}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "corrupt lines make 1: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let exp = expected(BATCH1);
    for field in [
        "lines",
        "messages",
        "duplicates",
        "corrupt_lines",
        "files_read",
    ] {
        assert_eq!(report[field], exp[field], "{field}: {stderr}");
    }
    for (table, rows) in expected_tables(BATCH1) {
        assert_eq!(lake.count(&table) as u64, rows, "{table}");
    }
    // Lineage names the object and the folder's landing path.
    let pattern = format!("{root}/{folder}/%");
    assert_eq!(
        lake.rows("_corrupt_records")
            .eq("_landing_path", "market/events")
            .filter(|r| r.get("_source_file").is_some_and(|f| like(&f, &pattern)))
            .len() as u64,
        exp["corrupt_lines"].as_u64().unwrap()
    );
    assert!(!stderr.contains(secret), "{stderr}");
}

#[test]
fn a_landing_folder_in_s3_loads_into_a_local_catalog_like_the_same_folder_on_disk() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "landing");
    a_landing_folder_in("s3://landing", &s3_options(&s3.endpoint), SECRET);
}

#[test]
fn a_landing_folder_in_azure_loads_into_a_local_catalog_like_the_same_folder_on_disk() {
    let (az, _data) = azurite();
    create_container(&az.endpoint, "landing");
    a_landing_folder_in(
        &format!("abfss://landing@{AZURITE_ACCOUNT}.dfs.core.windows.net/zone"),
        &azure_options(&az.endpoint),
        AZURITE_KEY,
    );
}

/// GCS has no emulator here that honours preconditions: an unreachable endpoint (a
/// closed port) gives, after the client's bounded retries, exit 2 and an error naming
/// the `gs://` location, for a landing folder and for a catalog.
#[test]
fn an_unreachable_gcs_endpoint_fails_with_the_location_named() {
    let options = owned(&[
        (
            "GOOGLE_BASE_URL",
            &format!("http://127.0.0.1:{}", free_port()),
        ),
        ("GOOGLE_SKIP_SIGNATURE", "true"),
        ("GOOGLE_ALLOW_HTTP", "true"),
        ("max_retries", "2"),
    ]);
    let lake = TempLake::new();
    let landing = format!("gs://landing/market/events/batch_id={BATCH1}");
    let out = cli_with("ingest", &options)
        .arg("--catalog")
        .arg(lake.catalog())
        .arg(&landing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&landing) && stderr.contains("after 2 retries"),
        "{stderr}"
    );
    let out = cli_with("health", &options)
        .args(["--catalog", "gs://lake/lakehouse"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("gs://lake/lakehouse"), "{stderr}");
}

/// Storage options or environment variables, as `(KEY, VALUE)`.
type Options = Vec<(String, String)>;

/// The `bronze` commands of the block in docs/cloud.md ("In the cloud"), joined across `\`
/// and with their leading `VAR=value` assignments, as (environment, arguments); `export`
/// lines give the environment of the commands after them.
fn readme_cloud_commands() -> Vec<(Options, Vec<String>)> {
    let block = crate::util::doc_sh_block("## In the cloud");
    let text = block.replace("\\\n", " ");
    let mut exported = Vec::new();
    let mut commands = Vec::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut words = line.split_whitespace().peekable();
        let export = words.next_if_eq(&"export").is_some();
        let mut env = exported.clone();
        while let Some((k, v)) = words.peek().and_then(|w| w.split_once('=')) {
            env.push((k.to_string(), v.to_string()));
            words.next();
        }
        if export {
            exported = env;
            continue;
        }
        assert_eq!(words.next(), Some("bronze"), "{line}");
        commands.push((env, words.map(str::to_string).collect()));
    }
    commands
}

/// The commands of docs/cloud.md ("In the cloud") run as written against the emulators:
/// the ADLS and OneLake ones against Azurite (accounts `myaccount` and `onelake`, the
/// endpoint given as `AZURE_STORAGE_ENDPOINT`, the account key for the page's `...`), the
/// S3 one against moto (`AWS_ENDPOINT_URL`); each loads the fixture batch exactly. GCS
/// has no emulator here: its command must fail with the location and the credentials file
/// named.
#[test]
fn the_readme_cloud_commands_run_as_written_against_the_emulators() {
    let (az, _data) = azurite_with_accounts(Some(&format!(
        "myaccount:{AZURITE_KEY};onelake:{AZURITE_KEY}"
    )));
    let az_base = az.endpoint.trim_end_matches(AZURITE_ACCOUNT).to_string();
    create_container_of("myaccount", &format!("{az_base}myaccount"), "landing");
    create_container_of("myaccount", &format!("{az_base}myaccount"), "lake");
    create_container_of("onelake", &format!("{az_base}onelake"), "myworkspace");
    let s3 = moto();
    create_bucket(&s3.endpoint, "landing");
    create_bucket(&s3.endpoint, "lake");
    let work = tempfile::tempdir().unwrap();
    bronze::testdata::copy_tree(
        &batch_dir(BATCH1),
        &work
            .path()
            .join(format!("landing/market/events/batch_id={BATCH1}")),
    )
    .unwrap();
    let commands = readme_cloud_commands();
    assert_eq!(commands.len(), 4, "{commands:?}");
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    for (mut env, args) in commands {
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("<workspace>", "myworkspace")
                    .replace("<lakehouse>", "mylakehouse")
            })
            .collect();
        let joined = args.join(" ");
        let catalog = args[args.iter().position(|a| a == "--catalog").unwrap() + 1].clone();
        for (k, v) in &mut env {
            if k == "AZURE_STORAGE_ACCOUNT_KEY" {
                *v = AZURITE_KEY.to_string();
            }
        }
        if joined.contains("abfss://") {
            let account = if catalog.contains("onelake") {
                "onelake"
            } else {
                "myaccount"
            };
            env.push((
                "AZURE_STORAGE_ENDPOINT".into(),
                format!("{az_base}{account}"),
            ));
            env.push(("AZURE_ALLOW_HTTP".into(), "true".into()));
            for arg in args.iter().filter(|a| a.starts_with("abfss://landing@")) {
                let root = arg.split("/market/").next().unwrap();
                upload_fixture(root, &env);
            }
        } else if joined.contains("s3://") {
            env.extend(s3_options(&s3.endpoint));
            for arg in args.iter().filter(|a| a.starts_with("s3://landing/")) {
                upload_fixture("s3://landing", &env);
                assert!(arg.ends_with(&format!("batch_id={BATCH1}")), "{arg}");
            }
        }
        let out = bronze_cli()
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(work.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if joined.contains("gs://") {
            assert_eq!(out.status.code(), Some(2), "{joined}: {stderr}");
            assert!(
                stderr.contains(&catalog) && stderr.contains("key.json"),
                "{stderr}"
            );
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(1),
            "{joined}: corrupt lines make 1: {stderr}"
        );
        assert_eq!(
            rows_per_table(&format!("{catalog}/bronze"), &tables, &env),
            want,
            "{joined}"
        );
    }
}

/// `--pending --require-success` over a landing zone and a catalog in S3: the batch is
/// found by listing the store, its `_SUCCESS` found, loaded, and pending no more.
#[test]
fn in_s3_a_pending_backlog_is_listed_and_loaded_once() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "landing");
    create_bucket(&s3.endpoint, "lake");
    let options = s3_options(&s3.endpoint);
    upload_fixture("s3://landing/zone", &options);
    let pending = |expect: usize| {
        let out = cli_with("ingest", &options)
            .args(["--pending", "--require-success", "--json"])
            .args(["--catalog", "s3://lake/lakehouse"])
            .arg("s3://landing/zone")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code().is_some_and(|c| c < 2), "{stderr}");
        let outcomes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let outcomes = outcomes.as_array().unwrap().clone();
        assert_eq!(outcomes.len(), expect, "{outcomes:?}");
        outcomes
    };
    // `bronze status` on the store, before and after: one batch pending, then loaded.
    let status = || {
        let out = cli_with("status", &options)
            .args(["--json", "--catalog", "s3://lake/lakehouse"])
            .arg("s3://landing/zone")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let entities: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let e = &entities[0];
        assert_eq!(e["landing_path"], "market/events");
        (
            e["loaded"].as_u64(),
            e["pending"].as_u64(),
            e["in_progress"].clone(),
        )
    };
    assert_eq!(status(), (Some(0), Some(1), serde_json::json!([])));
    let first = pending(1);
    assert_eq!(first[0]["status"], "loaded");
    assert_eq!(first[0]["batch"]["landing_path"], "market/events");
    pending(0);
    assert_eq!(status(), (Some(1), Some(0), serde_json::json!([])));
    let want = expected_tables(BATCH1);
    let tables: Vec<String> = want.keys().cloned().collect();
    assert_eq!(
        rows_per_table("s3://lake/lakehouse/bronze", &tables, &options),
        want
    );
}

/// A backlog in S3 lists an entity's folders from its last loaded batch on (its ledger
/// says which): a no-op `--pending` makes as many requests after 6 loaded batches as
/// after 3. A folder that lands late with an older batch id is not seen by those
/// listings; the next full listing (`--full-listing-every`) finds and loads it.
#[test]
fn in_s3_a_no_op_pending_makes_the_same_requests_whatever_the_history_and_a_late_folder_loads() {
    let s3 = moto();
    create_bucket(&s3.endpoint, "landing");
    create_bucket(&s3.endpoint, "lake");
    let log = tempfile::NamedTempFile::new().unwrap();
    let log_path = log.path().to_str().unwrap().to_string();
    let proxy = faulty_proxy(&s3.endpoint, &["--log", &log_path]);
    let options = s3_options(&proxy.endpoint);
    let requests = || std::fs::read_to_string(&log_path).unwrap().lines().count();
    // `ingest --pending` with `args`: the batch ids it loaded, and the requests it made.
    let pending = |args: &[&str]| -> (Vec<String>, usize) {
        let before = requests();
        let out = cli_with("ingest", &options)
            .args(["--pending", "--json", "--catalog", "s3://lake/lakehouse"])
            .args(args)
            .arg("s3://landing/zone")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code().is_some_and(|c| c < 2), "{stderr}");
        let outcomes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ids = outcomes
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                assert_eq!(o["status"], "loaded", "{o}");
                o["batch"]["batch_id"].as_str().unwrap().to_string()
            })
            .collect();
        (ids, requests() - before)
    };
    let upload = |ids: &[&str]| {
        for id in ids {
            upload_fixture_as("s3://landing/zone", &options, id);
        }
    };
    upload(&["d01", "d02", "d03"]);
    assert_eq!(pending(&[]).0, ["d01", "d02", "d03"]);
    // The first no-op folds the loads' `_run_control` commits into the ledger.
    assert!(pending(&[]).0.is_empty());
    let (none, after_3) = pending(&[]);
    assert!(none.is_empty());
    upload(&["d04", "d05", "d06"]);
    assert_eq!(pending(&[]).0, ["d04", "d05", "d06"]);
    assert!(pending(&[]).0.is_empty());
    let (none, after_6) = pending(&[]);
    assert!(none.is_empty());
    assert_eq!(
        after_6, after_3,
        "requests of a no-op --pending after 6 batches and after 3"
    );
    // Late: an older id than the last loaded one.
    upload(&["d00"]);
    assert!(pending(&[]).0.is_empty());
    let (late, _) = pending(&["--full-listing-every", "0s"]);
    assert_eq!(late, ["d00"]);
    assert!(pending(&["--full-listing-every", "0s"]).0.is_empty());
    let out = cli_with("status", &options)
        .args(["--json", "--catalog", "s3://lake/lakehouse"])
        .arg("s3://landing/zone")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entities: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(entities[0]["loaded"], 7, "{entities}");
    assert_eq!(entities[0]["pending"], 0, "{entities}");
    // A failed rerun of a batch the listing had passed: pending again, from the ledger.
    let fail_rerun = |id: &str| {
        let out = cli_with("ingest", &options)
            .args(["--catalog", "s3://lake/lakehouse"])
            .arg(format!("s3://landing/zone/market/events/batch_id={id}"))
            .env("BRONZE_FAILPOINT", "lose_a_row")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "the rerun of {id} fails");
    };
    fail_rerun("d02");
    assert_eq!(pending(&[]).0, ["d02"]);
    // A failed batch whose folder was deleted since: not pending, not counted.
    fail_rerun("d03");
    delete_prefix(&options, "market/events/batch_id=d03/");
    for _ in 0..2 {
        assert!(pending(&[]).0.is_empty());
        let out = cli_with("status", &options)
            .args(["--json", "--catalog", "s3://lake/lakehouse"])
            .arg("s3://landing/zone")
            .output()
            .unwrap();
        let entities: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let counts = &entities[0];
        assert_eq!(
            (&counts["loaded"], &counts["failed"], &counts["pending"]),
            (&6.into(), &0.into(), &0.into()),
            "{entities}"
        );
    }
}

/// Deletes every object under `s3://landing/zone/<rel>`.
fn delete_prefix(options: &[(String, String)], rel: &str) {
    use deltalake::logstore::object_store::ObjectStoreExt as _;
    use futures::TryStreamExt as _;
    let (store, dir) = bronze::testdata::object_store_at("s3://landing/zone", options).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let prefix = object_path(&dir, rel.trim_end_matches('/'));
    let listed: Vec<_> = rt
        .block_on(store.list(Some(&prefix)).try_collect())
        .unwrap();
    assert!(!listed.is_empty(), "{rel} holds objects");
    for o in listed {
        rt.block_on(store.delete(&o.location)).unwrap();
    }
}
