//! Many worker processes on one landing zone and one set of tables (issue 23): 4
//! `bronze ingest --pending` processes on 3 entities × 20 batches whose topics share a
//! child table and whose batches add columns, under 5 seeded interleavings (the
//! `store_jitter` failpoint), with OPTIMIZE and VACUUM run meanwhile by another process;
//! in one of the 5, a worker killed mid-batch before them; and once more with the
//! catalog in S3 (moto). Every batch is loaded exactly once,
//! every table holds exactly the rows and columns the batches carry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::util::*;

const ENTITIES: usize = 3;
const BATCHES: usize = 20;
const MESSAGES: usize = 12;

/// What the landing zone holds, to check the tables against.
#[derive(Default)]
struct Expected {
    rows: BTreeMap<&'static str, i64>,
    /// Column → rows holding a value in it, per table.
    columns: BTreeMap<(&'static str, String), i64>,
}

/// `landing/src/e<e>/batch_id=d<k>`: `MESSAGES` messages (and one duplicate line) of
/// `trade` and `quote`, each with a `currentprice` array (the child table both topics
/// share: 2 elements in a trade, 1 in a quote). Every 4th batch of an entity adds a
/// column `f_<e>_<k>` to `trade`; every 5th gives its quotes' prices a `ccy_<e>` column.
fn landing_zone(root: &Path) -> (PathBuf, Expected) {
    let landing = root.join("landing");
    let mut expected = Expected::default();
    for e in 0..ENTITIES {
        for k in 1..=BATCHES {
            let dir = landing.join(format!("src/e{e}/batch_id=d{k:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut lines = Vec::new();
            for i in 0..MESSAGES {
                let id = format!("e{e}-d{k}-m{i}");
                let line = if i % 2 == 0 {
                    let extra = if k % 4 == 0 {
                        *expected
                            .columns
                            .entry(("trade", format!("f_{e}_{k}")))
                            .or_default() += 1;
                        format!(",\"f_{e}_{k}\":\"v{i}\"")
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"topic\":\"trade\",\"message_id\":\"{id}\",\"payload\":{{\"sym\":\"S{i}\",\"qty\":{i}{extra},\"currentprice\":[{{\"px\":{i}.5}},{{\"px\":{i}.25}}]}}}}"
                    )
                } else {
                    let ccy = if k % 5 == 0 {
                        *expected
                            .columns
                            .entry(("currentprice", format!("ccy_{e}")))
                            .or_default() += 1;
                        format!(",\"ccy_{e}\":\"EUR\"")
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"topic\":\"quote\",\"message_id\":\"{id}\",\"payload\":{{\"bid\":{i}.5,\"currentprice\":[{{\"px\":{i}.75{ccy}}}]}}}}"
                    )
                };
                lines.push(line);
            }
            // A duplicate delivery of the first message: dropped.
            lines.push(lines[0].clone());
            std::fs::write(dir.join("part-0.jsonl"), lines.join("\n") + "\n").unwrap();
            *expected.rows.entry("trade").or_default() += (MESSAGES / 2) as i64;
            *expected.rows.entry("quote").or_default() += (MESSAGES / 2) as i64;
            *expected.rows.entry("currentprice").or_default() += (MESSAGES / 2 * 3) as i64;
        }
    }
    (landing, expected)
}

/// Where the workers write: a local catalog, or one in an object store reached with
/// `env` (the store's standard environment variables).
struct Target<'a> {
    catalog: String,
    env: Vec<(String, String)>,
    local: Option<&'a TempLake>,
}

impl Target<'_> {
    fn cli(&self) -> std::process::Command {
        let mut c = bronze_cli();
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// A `bronze ingest --pending --json` worker with the seeded store jitter.
fn worker(target: &Target<'_>, landing: &Path, seed: u64, kill: bool) -> Child {
    let mut c = target.cli();
    c.args([
        "ingest",
        "--pending",
        "--json",
        "--lease-ttl",
        "30s",
        "--catalog",
    ])
    .arg(&target.catalog)
    .arg(landing)
    .env("BRONZE_FAILPOINT", bronze::failpoint::JITTER)
    .env("BRONZE_FAILPOINT_SEED", seed.to_string())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if kill {
        // Dies (SIGKILL) after its first batch's first table write.
        c.env("BRONZE_FAILPOINT", "between_tables")
            .env("BRONZE_FAILPOINT_ACTION", "kill");
    }
    c.spawn().unwrap()
}

/// Batches a `--pending --json` run's output reports loaded, as (entity, id).
fn loaded(stdout: &[u8]) -> Vec<(String, String)> {
    let outcomes: serde_json::Value = serde_json::from_slice(stdout).unwrap_or_default();
    outcomes
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|o| o["status"] == "loaded")
        .map(|o| {
            (
                o["batch"]["landing_path"].as_str().unwrap().to_string(),
                o["batch"]["batch_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// OPTIMIZE of every table and `maintain` (VACUUM at the default retention, checkpoints,
/// log clean-up), from their own processes, in a loop until `stop`; the runs that
/// succeeded.
fn maintenance(target: &Target<'_>, stop: &AtomicBool) -> usize {
    let mut runs = 0;
    while !stop.load(Ordering::SeqCst) {
        for command in [&["optimize", "--all"][..], &["maintain"][..]] {
            let out = target
                .cli()
                .args(command)
                .arg("--catalog")
                .arg(&target.catalog)
                .output()
                .unwrap();
            // Before the first table exists there is nothing to maintain; a conflict with
            // a commit is the maintenance run's to lose, never the workers'.
            runs += usize::from(out.status.success());
        }
    }
    runs
}

/// One interleaving: 4 workers (one killed mid-batch when `kill`), maintenance beside
/// them, then single sweeps until nothing is pending; every check.
fn scenario(target: &Target<'_>, seed: u64, kill: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (landing, expected) = landing_zone(dir.path());
    let stop = AtomicBool::new(false);
    let maintained = AtomicUsize::new(0);
    let mut loads: Vec<(String, String)> = Vec::new();
    /// Stops the maintenance loop when the workers are done, also when a check fails
    /// (the scope waits for the loop before it lets a failure through).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| maintained.store(maintenance(target, &stop), Ordering::SeqCst));
        let _stop = StopOnDrop(&stop);
        if kill {
            // The armed worker first, alone: it takes the first batch and dies in it
            // (with the others already running it could find every batch taken).
            let out = worker(target, &landing, seed * 10, true)
                .wait_with_output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                None,
                "the armed worker was killed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let workers: Vec<Child> = (1..=4)
            .map(|w| worker(target, &landing, seed * 10 + w, false))
            .collect();
        for (w, child) in workers.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.code().is_some_and(|c| c < 2),
                "seed {seed} worker {w}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            loads.extend(loaded(&out.stdout));
        }
    });
    // What waited behind a busy batch this round (and the killed worker's batch) is
    // loaded by the next invocations.
    for _ in 0..ENTITIES * BATCHES {
        let out = worker(target, &landing, seed, false)
            .wait_with_output()
            .unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "{out:?}");
        let round = loaded(&out.stdout);
        if round.is_empty() {
            break;
        }
        loads.extend(round);
    }
    match target.local {
        Some(lake) => check(lake, &expected, loads, seed),
        None => check_in_store(target, &expected, loads),
    }
    assert!(
        maintained.load(Ordering::SeqCst) > 0,
        "seed {seed}: no maintenance run succeeded"
    );
}

/// Every batch reported loaded by exactly one run.
fn check_loads(mut loads: Vec<(String, String)>, seed: u64) {
    loads.sort();
    let before = loads.len();
    loads.dedup();
    assert_eq!(before, loads.len(), "seed {seed}: a batch loaded twice");
    assert_eq!(
        loads.len(),
        ENTITIES * BATCHES,
        "seed {seed}: every batch loaded"
    );
}

fn check(lake: &TempLake, expected: &Expected, loads: Vec<(String, String)>, seed: u64) {
    check_loads(loads, seed);
    let ok = lake
        .rows("_run_control")
        .eq("table", "(batch)")
        .eq("status", "ok");
    // Distinct `_batch_id || landing_paths` (null when either is).
    let keys: std::collections::BTreeSet<String> = ok
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{}{}",
                r.get("_batch_id")?,
                r.get("landing_paths")?
            ))
        })
        .collect();
    assert_eq!(keys.len(), ENTITIES * BATCHES);
    assert_eq!(
        ok.len(),
        ENTITIES * BATCHES,
        "seed {seed}: one successful run per batch"
    );
    for (table, rows) in &expected.rows {
        assert_eq!(
            lake.count(table) as i64,
            *rows,
            "seed {seed}: rows of {table}"
        );
    }
    for ((table, column), rows) in &expected.columns {
        assert_eq!(
            lake.rows(table).filter(|r| r.get(column).is_some()).len() as i64,
            *rows,
            "seed {seed}: column {column} of {table}"
        );
    }
    assert!(leases(lake).is_empty(), "seed {seed}: a lease left");
    assert!(staging_dirs(lake).is_empty(), "seed {seed}: staging left");
}

/// The same checks on a catalog in an object store, read by Python `deltalake` and
/// `boto3` with the same settings: rows per table, values per added column, one ok
/// `(batch)` run per batch, no lease or staging object left.
fn check_in_store(target: &Target<'_>, expected: &Expected, loads: Vec<(String, String)>) {
    check_loads(loads, 0);
    let batches = (ENTITIES * BATCHES) as u64;
    let options: BTreeMap<String, String> = target
        .env
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.clone()))
        .collect();
    let spec = serde_json::json!({
        "tables": expected.rows.keys().collect::<Vec<_>>(),
        "columns": expected.columns.keys().collect::<Vec<_>>(),
    });
    let out = crate::cloud::python(
        r#"
import sys, json, deltalake, boto3
root, opts, spec = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
table = lambda t: deltalake.DeltaTable(f"{root}/bronze/{t}", storage_options=opts).to_pyarrow_table()
out = {"rows": {t: table(t).num_rows for t in spec["tables"]}, "values": {}}
for t, c in spec["columns"]:
    col = table(t).column(c)
    out["values"][f"{t}.{c}"] = len(col) - col.null_count
runs = [r for r in table("_run_control").to_pylist() if r["table"] == "(batch)" and r["status"] == "ok"]
out["ok_runs"] = len(runs)
out["ok_batches"] = len({(r["_batch_id"], r["landing_paths"]) for r in runs})
bucket, prefix = root[len("s3://"):].split("/", 1)
s3 = boto3.client("s3", endpoint_url=opts["aws_endpoint_url"], aws_access_key_id=opts["aws_access_key_id"],
                  aws_secret_access_key=opts["aws_secret_access_key"], region_name=opts["aws_region"])
keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/bronze/").get("Contents", [])]
out["left"] = [k for k in keys if "/_bronze_leases/" in k or "/_tmp_raw_load_" in k]
# What a failed check prints: rows per batch, and each table's log.
out["per_batch"] = {}
out["log"] = {}
for t in spec["tables"]:
    counts = {}
    for r in table(t).select(["_landing_path", "_batch_id"]).to_pylist():
        key = f'{r["_landing_path"]}/{r["_batch_id"]}'
        counts[key] = counts.get(key, 0) + 1
    out["per_batch"][t] = counts
    log = []
    for k in sorted(k for k in keys if k.startswith(f"{prefix}/bronze/{t}/_delta_log/") and k.endswith(".json")):
        actions = [json.loads(l) for l in s3.get_object(Bucket=bucket, Key=k)["Body"].read().splitlines() if l.strip()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        log.append({"v": k.rsplit("/", 1)[1], "op": info.get("operation"), "read": info.get("readVersion"),
                    "params": info.get("operationParameters"),
                    "adds": [a["add"]["path"][-20:] for a in actions if "add" in a],
                    "removes": [(a["remove"]["path"][-20:], a["remove"].get("dataChange")) for a in actions if "remove" in a],
                    "txns": [a["txn"] for a in actions if "txn" in a]})
    out["log"][t] = log
print(json.dumps(out))
"#,
        &[
            &target.catalog,
            &serde_json::to_string(&options).unwrap(),
            &spec.to_string(),
        ],
    );
    let found: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for (table, rows) in &expected.rows {
        let per_batch = rows / batches as i64;
        let off: BTreeMap<&String, &serde_json::Value> = found["per_batch"][*table]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, n)| n.as_i64() != Some(per_batch))
            .collect();
        assert_eq!(
            found["rows"][*table],
            *rows,
            "rows of {table}; {} batches hold rows, those without {per_batch}: {off:?}; the log:\n{}",
            found["per_batch"][*table].as_object().unwrap().len(),
            serde_json::to_string_pretty(&found["log"][*table]).unwrap()
        );
    }
    for ((table, column), rows) in &expected.columns {
        assert_eq!(
            found["values"][format!("{table}.{column}")],
            *rows,
            "{table}.{column}"
        );
    }
    assert_eq!(found["ok_runs"], batches, "one successful run per batch");
    assert_eq!(found["ok_batches"], batches);
    assert_eq!(
        found["left"],
        serde_json::json!([]),
        "a lease or staging left"
    );
}

#[test]
fn four_workers_load_a_shared_backlog_once_under_five_interleavings() {
    for seed in 1..=5 {
        let lake = TempLake::new();
        let target = Target {
            catalog: lake.catalog().to_string_lossy().into_owned(),
            env: Vec::new(),
            local: Some(&lake),
        };
        scenario(&target, seed, seed == 3);
    }
}

/// The same backlog with the catalog in S3 (moto's server, conditional puts): commits,
/// leases and their takeover go through the store. One interleaving, with a worker
/// killed mid-batch. Under load this found two compactions of the same files both
/// committed (deltalake's check skips `dataChange = false` removes): `StrictCommits`.
#[test]
fn four_workers_load_a_shared_backlog_once_into_an_s3_catalog() {
    let moto = crate::cloud::moto();
    crate::cloud::create_bucket(&moto.endpoint, "lake");
    let target = Target {
        catalog: "s3://lake/workers".into(),
        env: crate::cloud::s3_options(&moto.endpoint),
        local: None,
    };
    scenario(&target, 7, true);
}
