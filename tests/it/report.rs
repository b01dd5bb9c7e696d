//! `bronze report --html`: the page of a catalog of several batch runs (one failed),
//! rendered by headless Chromium (Debian's `chromium`, installed by `scripts/test`; or
//! `BRONZE_CHROMIUM`): no script or console error, each chart with one data point per
//! batch run (or per table), and a screenshot.

use std::path::Path;
use std::process::Command;

use crate::util::*;

/// Headless Chromium, as this machine's closed network needs it (no background
/// connections), with its own profile folder.
fn chromium(profile: &Path) -> Command {
    let bin = std::env::var("BRONZE_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The number of elements of class `point` in each chart of `dom`, by `data-chart`.
fn points_per_chart(dom: &str) -> std::collections::BTreeMap<String, usize> {
    let mut charts = std::collections::BTreeMap::new();
    for piece in dom.split("<svg ").skip(1) {
        let Some(name) = piece
            .split("data-chart=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        else {
            continue;
        };
        let body = piece.split("</svg>").next().unwrap_or_default();
        charts.insert(name.to_string(), body.matches("class=\"point\"").count());
    }
    charts
}

#[test]
fn the_html_report_renders_in_chromium_with_a_point_per_batch_run() {
    let lake = TempLake::new();
    let ingest = |batch: &str, failpoint: Option<&str>| {
        let mut c = bronze_cli();
        c.args(["ingest", "--catalog"])
            .arg(lake.catalog())
            .arg(batch_dir(batch));
        if let Some(point) = failpoint {
            c.env("BRONZE_FAILPOINT", point);
        }
        c.output().unwrap().status.code()
    };
    assert_eq!(ingest(BATCH1, None), Some(1), "corrupt lines: exit 1");
    assert_eq!(ingest(BATCH2, None), Some(0));
    assert_eq!(ingest(BATCH2, None), Some(0), "a rerun");
    // A run whose row accounting fails (a flattener bug simulated): a failure to show.
    assert_eq!(ingest(BATCH1, Some("lose_a_row")), Some(2));
    let runs = lake.rows("_run_control").eq("table", "(batch)").len();
    assert_eq!(runs, 4);

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("lakehouse.html");
    let out = bronze_cli()
        .args(["report", "--html"])
        .arg(&page)
        .arg("--landing")
        .arg(repo().join("fixtures/landing"))
        .arg("--catalog")
        .arg(lake.catalog())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<script") && !html.contains("http://") && !html.contains("https://"),
        "self-contained: no script, nothing fetched"
    );
    assert!(
        html.contains("row accounting") || html.contains("FAILED"),
        "the failure's reason"
    );
    assert!(html.contains("market/events"), "the landing zone's entity");

    // Rendered: the DOM Chromium built, and its console.
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", page.display());
    let rendered = chromium(profile.path())
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("headless Chromium (`apt-get install chromium`; scripts/test installs it)");
    assert!(rendered.status.success(), "{rendered:?}");
    let console = String::from_utf8_lossy(&rendered.stderr);
    assert!(
        !console.contains("Uncaught") && !console.contains(":CONSOLE("),
        "script or console errors: {console}"
    );
    let dom = String::from_utf8(rendered.stdout).unwrap();
    let charts = points_per_chart(&dom);
    // Tables: the schema's folders with a Delta log (staging is gone after each run).
    let tables = std::fs::read_dir(lake.schema_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("_delta_log").is_dir())
        .count();
    for chart in ["rows", "bad-lines", "time"] {
        assert_eq!(charts.get(chart), Some(&runs), "{chart}: {charts:?}");
    }
    assert_eq!(charts.get("file-sizes"), Some(&tables), "{charts:?}");

    // A screenshot of the page as a person sees it.
    let shot = dir.path().join("report.png");
    let taken = chromium(profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1100,2400")
        .arg(&url)
        .output()
        .unwrap();
    assert!(taken.status.success(), "{taken:?}");
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    if let Some(keep) = std::env::var_os("BRONZE_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    // `--json`: the same data.
    let json = bronze_cli()
        .args(["report", "--json", "--catalog"])
        .arg(lake.catalog())
        .output()
        .unwrap();
    let overview: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(overview["batches"].as_array().unwrap().len(), runs);
    let failed: Vec<_> = overview["batches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["batch_id"], BATCH1);
    assert!(!overview["failures"].as_array().unwrap().is_empty());
}
