//! Metrics in Prometheus: a batch pushed to a real Pushgateway (Debian's
//! `prometheus-pushgateway`, which `scripts/test` installs), read back from its
//! `/metrics` and scraped by a real Prometheus; the shipped alert rules checked and
//! unit-tested by `promtool`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::cloud::{Emulator, emulator_command, free_port, start};
use crate::util::{BATCH1, TempLake, batch_dir, bronze_cli, on_catalog, repo};

fn debian_bin(name: &str) -> &'static Path {
    let path: &'static Path = Box::leak(Path::new("/usr/bin").join(name).into_boxed_path());
    assert!(
        path.exists(),
        "{} missing: the metrics tests need Debian's prometheus and prometheus-pushgateway, which scripts/test installs",
        path.display()
    );
    path
}

/// A Pushgateway on a free port, stopped when dropped.
fn pushgateway() -> Emulator {
    let port = free_port();
    let mut cmd = emulator_command(debian_bin("prometheus-pushgateway"));
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"));
    start(
        cmd,
        "Listening on",
        format!("http://127.0.0.1:{port}"),
        true,
    )
}

/// GET `url`'s body.
fn get(url: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async { reqwest::get(url).await?.error_for_status()?.text().await })
        .unwrap()
}

/// The samples of `name` in an exposition, as (labels, value), labels `k="v"` joined.
fn samples(text: &str, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .map(|rest| {
            let (labels, value) = rest.rsplit_once("} ").unwrap();
            let labels = labels
                .split("\",")
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once("=\"").unwrap();
                    (k.to_string(), v.trim_end_matches('"').to_string())
                })
                .collect();
            (labels, value.trim().parse().unwrap())
        })
        .collect()
}

fn one(text: &str, name: &str) -> (BTreeMap<String, String>, f64) {
    let mut s = samples(text, name);
    assert_eq!(s.len(), 1, "{name} in:\n{text}");
    s.remove(0)
}

/// `bronze ingest DIR --metrics-push URL --json` on the lake: exit code, report, stderr.
fn ingest_pushing(lake: &TempLake, dir: &Path, url: &str) -> (i32, serde_json::Value, String) {
    let dir = dir.to_str().unwrap();
    let out = on_catalog(lake, &["ingest", dir, "--metrics-push", url, "--json"]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap(), report, stderr)
}

#[test]
fn a_batch_pushes_its_metrics_and_a_failed_run_keeps_the_last_success() {
    let gateway = pushgateway();
    let lake = TempLake::new();
    let (code, report, stderr) = ingest_pushing(&lake, &batch_dir(BATCH1), &gateway.endpoint);
    assert_eq!(code, 1, "the fixture batch has corrupt lines: {stderr}");
    assert!(!stderr.contains("metrics not pushed"), "{stderr}");
    let text = get(&format!("{}/metrics", gateway.endpoint));
    // Every table's rows, as the report says.
    let rows: BTreeMap<String, f64> = samples(&text, "bronze_batch_rows")
        .into_iter()
        .map(|(labels, v)| {
            assert_eq!(labels["landing_path"], "market/events");
            assert_eq!(labels["batch_id"], BATCH1);
            assert_eq!(labels["job"], "bronze");
            (labels["table"].clone(), v)
        })
        .collect();
    let reported: BTreeMap<String, f64> = report["tables"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, o)| (t.clone(), o["rows_written"].as_u64().unwrap() as f64))
        .collect();
    assert_eq!(rows, reported);
    for (metric, field) in [
        ("bronze_batch_messages", "messages"),
        ("bronze_batch_corrupt_lines", "corrupt_lines"),
        ("bronze_batch_duplicates", "duplicates"),
        ("bronze_batch_commit_replans", "commit_replans"),
        ("bronze_batch_store_retries", "store_retries"),
    ] {
        assert_eq!(
            one(&text, metric).1,
            report[field].as_u64().unwrap() as f64,
            "{metric}"
        );
    }
    let stages: BTreeMap<String, f64> = samples(&text, "bronze_batch_duration_seconds")
        .into_iter()
        .map(|(l, v)| (l["stage"].clone(), v))
        .collect();
    let reported: BTreeMap<String, f64> =
        serde_json::from_value(report["stage_seconds"].clone()).unwrap();
    assert_eq!(stages, reported);
    assert_eq!(one(&text, "bronze_batch_success").1, 1.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let (_, pushed_at) = one(&text, "bronze_batch_last_success_timestamp_seconds");
    assert!(
        pushed_at <= now && now - pushed_at < 600.0,
        "{pushed_at} vs {now}"
    );

    // A run of the same entity that fails before its report (no such folder): success 0
    // for its batch, and the last success's time stays for the staleness alert.
    let missing = lake
        .catalog()
        .join("landing/market/events/batch_id=missing");
    let (code, _, stderr) = ingest_pushing(&lake, &missing, &gateway.endpoint);
    assert_eq!(code, 2, "{stderr}");
    let text = get(&format!("{}/metrics", gateway.endpoint));
    let (labels, success) = one(&text, "bronze_batch_success");
    assert_eq!((labels["batch_id"].as_str(), success), ("missing", 0.0));
    assert_eq!(
        one(&text, "bronze_batch_last_success_timestamp_seconds").1,
        pushed_at
    );
}

#[test]
fn a_gateway_that_is_down_costs_a_warning_not_the_batch() {
    let lake = TempLake::new();
    let down = format!("http://127.0.0.1:{}", free_port());
    let (code, report, stderr) = ingest_pushing(&lake, &batch_dir(BATCH1), &down);
    assert_eq!(code, 1, "the batch's own exit code: {stderr}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("metrics not pushed to http://127.0.0.1"),
        "{warnings}"
    );
    assert!(lake.count("trade") > 0);
    let batch = batch_dir(BATCH1);
    let args = [
        "ingest",
        batch.to_str().unwrap(),
        "--metrics-push",
        "pushgateway:9091",
    ];
    let bad = on_catalog(&lake, &args);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("write e.g. http://pushgateway:9091"), "{err}");
}

#[test]
fn prometheus_scrapes_the_pushed_rows_from_the_gateway() {
    let gateway = pushgateway();
    let lake = TempLake::new();
    let (code, report, stderr) = ingest_pushing(&lake, &batch_dir(BATCH1), &gateway.endpoint);
    assert_eq!(code, 1, "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let target = gateway.endpoint.trim_start_matches("http://");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let mut cmd = emulator_command(debian_bin("prometheus"));
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    let prometheus = start(
        cmd,
        "Server is ready to receive web requests",
        format!("http://127.0.0.1:{port}"),
        true,
    );
    // Scrapes run every second: the query answers once the first one is in.
    let query = format!(
        "{}/api/v1/query?query=bronze_batch_rows%7Btable%3D%22trade%22%7D",
        prometheus.endpoint
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let answer = loop {
        let answer: serde_json::Value = serde_json::from_str(&get(&query)).unwrap();
        if answer["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            break answer;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never scraped: {answer}"
        );
        // The pause between two polls of the query (the condition above is what is
        // waited for).
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    let result = &answer["data"]["result"][0];
    assert_eq!(result["metric"]["landing_path"], "market/events");
    assert_eq!(result["metric"]["job"], "bronze");
    assert_eq!(
        result["value"][1].as_str().unwrap().parse::<f64>().unwrap(),
        report["tables"]["trade"]["rows_written"].as_u64().unwrap() as f64
    );
}

#[test]
fn the_shipped_alert_rules_check_and_pass_their_unit_tests() {
    let docs = repo().join("docs");
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ] {
        let out = Command::new(debian_bin("promtool"))
            .args(args)
            .current_dir(&docs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A `--watch` run, killed if the test fails before it stops it.
struct Watching(std::process::Child);

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls the gateway's `/metrics` until `done` holds for it (the push comes after the
/// line the test waited for); the text. A failure shows `log`, what the pusher wrote to
/// stderr.
fn gateway_until(gateway: &Emulator, log: &Path, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = get(&format!("{}/metrics", gateway.endpoint));
        if done(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never pushed; stderr:\n{}\nthe gateway:\n{text}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        // The pause between two polls (the condition above is what is waited for).
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn status_prints_the_backlog_as_metrics_and_watch_pushes_it_after_each_round() {
    use std::io::BufRead as _;
    let gateway = pushgateway();
    let lake = TempLake::new();
    let landing = lake.catalog().with_file_name("landing");
    for id in ["d1", "d2"] {
        bronze::testdata::copy_tree(
            &batch_dir(BATCH1),
            &landing.join(format!("s/a/batch_id={id}")),
        )
        .unwrap();
    }
    let root = landing.to_str().unwrap();
    let loaded = on_catalog(&lake, &["ingest", "--pending", root, "--max-batches", "1"]);
    assert_eq!(loaded.status.code(), Some(1));
    let status = on_catalog(&lake, &["status", root, "--metrics"]);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let text = String::from_utf8(status.stdout).unwrap();
    let value = |name: &str| {
        let (labels, v) = one(&text, name);
        assert_eq!(labels["landing_path"], "s/a", "{name}");
        v
    };
    assert_eq!(value("bronze_backlog_pending_batches"), 1.0);
    assert_eq!(value("bronze_backlog_failed_batches"), 0.0);
    assert_eq!(value("bronze_backlog_in_progress_batches"), 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let age = value("bronze_backlog_oldest_pending_age_seconds");
    assert!((0.0..600.0).contains(&age), "d2 landed just now: {age}");
    let last = value("bronze_backlog_last_loaded_timestamp_seconds");
    assert!(last <= now && now - last < 600.0, "{last} vs {now}");

    // --watch pushes the backlog after its round: d2 loaded, nothing pending.
    let log = lake.catalog().with_file_name("watch.stderr");
    let mut child = Watching(
        bronze_cli()
            .args(["ingest", "--pending"])
            .arg(&landing)
            .arg("--catalog")
            .arg(lake.catalog())
            .args([
                "--watch",
                "--interval",
                "200ms",
                "--metrics-push",
                &gateway.endpoint,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // Its stdout read to the end on a thread (a closed pipe would end the watch), each
    // line sent here.
    let stdout = child.0.stdout.take().unwrap();
    let (tx, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // The round that loaded d2 (an earlier one may have printed it otherwise).
    let mut before = Vec::new();
    loop {
        let line = printed
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|e| {
                panic!(
                    "no line of d2 loaded ({e}): {before:?}; stderr:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
            });
        if line.starts_with("loaded") && line.contains("s/a/batch_id=d2") {
            break;
        }
        before.push(line);
    }
    let pushed = gateway_until(&gateway, &log, |t| {
        samples(t, "bronze_backlog_pending_batches")
            .iter()
            .any(|(labels, v)| labels["landing_path"] == "s/a" && *v == 0.0)
    });
    let kill = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert_eq!(child.0.wait().unwrap().code(), Some(1));
    let (labels, _) = samples(&pushed, "bronze_backlog_pending_batches").remove(0);
    assert_eq!(labels["job"], "bronze");
    assert_eq!(labels["backlog"], landing.display().to_string());
    // The batch's own push is beside it, in the landing path's group.
    let (labels, success) = one(&pushed, "bronze_batch_success");
    assert_eq!((labels["batch_id"].as_str(), success), ("d2", 1.0));
}

/// The commands of docs/metrics.md ("Metrics and alerts"), run as written but for the gateway's port (a
/// free one) and the catalog (a temporary folder): the ingest pushes, the gateway's
/// `/metrics` holds `bronze_batch_rows`, and promtool passes the rules' tests.
#[test]
fn readme_metrics_commands_run_as_written() {
    let block = crate::util::doc_sh_block("## Metrics and alerts");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 4, "{block}");
    assert_eq!(
        lines[0],
        "prometheus-pushgateway --web.listen-address=127.0.0.1:9091 &"
    );
    let gateway = pushgateway();
    let lake = TempLake::new();
    let args: Vec<String> = lines[1]
        .replace("http://127.0.0.1:9091", &gateway.endpoint)
        .replace("./lakehouse", &lake.catalog().display().to_string())
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    let out = bronze_cli()
        .args(&args)
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (url, grep) = lines[2]
        .strip_prefix("curl -s ")
        .and_then(|rest| rest.split_once(" | grep "))
        .unwrap();
    let url = url.replace("http://127.0.0.1:9091", &gateway.endpoint);
    let pattern = grep.trim_matches('\'').trim_start_matches('^');
    let text = get(&url);
    assert!(text.lines().any(|l| l.starts_with(pattern)), "{text}");
    let promtool: Vec<&str> = lines[3].split_whitespace().collect();
    let out = Command::new(debian_bin(promtool[0]))
        .args(&promtool[1..])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
