//! Other engines read what we write: deltalake (Python), Polars, DuckDB (its Parquet
//! reader, and its own Delta reader `delta_scan`) get the same rows as our reader after
//! ingest, OPTIMIZE, VACUUM and a checkpoint, including time travel to an earlier
//! version; typed columns read as UTC timestamps, dates and decimals there and in Spark.
//! `scripts/test` installs the Python side.

use std::path::PathBuf;

use crate::util::*;

pub(crate) fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("BRONZE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the interoperability check needs Python with deltalake, polars and duckdb: run `scripts/test` (it installs them into .venv) or set BRONZE_PYTHON"
    );
    venv
}

fn count_at(lake: &TempLake, table: &str, version: u64) -> u64 {
    lake.with_table(table, Some(version), async |t| {
        let snapshot = t.snapshot().unwrap();
        let mut rows = 0;
        for f in snapshot.log_data().iter() {
            let stats: serde_json::Value = serde_json::from_str(&f.stats().unwrap()).unwrap();
            rows += stats["numRecords"].as_u64().unwrap();
        }
        rows
    })
}

fn version_of(lake: &TempLake, table: &str) -> u64 {
    let m = lake.ingest().build().unwrap();
    m.maintenance().history(table, Some(1)).unwrap()[0].version
}

pub(crate) fn check(lake: &TempLake, stage: &str, old: &std::collections::BTreeMap<String, u64>) {
    let mut tables = Vec::new();
    for t in lake.all_tables() {
        let old_version = old.get(&t).copied();
        tables.push(serde_json::json!({
            "path": lake.schema_dir().join(&t),
            "version": version_of(lake, &t),
            "rows": lake.count(&t),
            "old_version": old_version,
            "old_rows": old_version.map(|v| count_at(lake, &t, v)),
            "columns": lake.columns(&t),
        }));
    }
    run_check(
        &serde_json::json!({ "tables": tables }),
        stage,
        tables.len(),
    );
}

/// Runs `scripts/interop_check.py` on `spec`, which lists `n` tables.
fn run_check(spec_json: &serde_json::Value, stage: &str, n: usize) {
    let spec = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(spec.path(), spec_json.to_string()).unwrap();
    let out = std::process::Command::new(python())
        .arg(repo().join("scripts/interop_check.py"))
        .arg(spec.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "after {stage}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("checked {n} tables")), "{stdout}");
}

#[test]
fn deltalake_polars_and_duckdb_read_what_we_write() {
    let lake = TempLake::new();
    let ingest = lake.ingest().build().unwrap();
    ingest.run(batch_dir(BATCH1)).unwrap();
    // Versions after the first batch: time travel targets for every later stage.
    let old: std::collections::BTreeMap<String, u64> = lake
        .all_tables()
        .into_iter()
        .map(|t| {
            let v = version_of(&lake, &t);
            (t, v)
        })
        .collect();
    ingest.run(batch_dir(BATCH2)).unwrap();
    check(&lake, "ingest", &old);
    let m = ingest.maintenance();
    for t in m.tables().unwrap() {
        m.optimize(&t, None, &[]).unwrap();
    }
    check(&lake, "optimize", &old);
    for t in m.tables().unwrap() {
        m.vacuum_table(&t).execute().unwrap();
    }
    check(&lake, "vacuum", &old);
    for t in m.tables().unwrap() {
        m.checkpoint(&t).unwrap();
    }
    check(&lake, "checkpoint", &old);
}

/// Typed columns (`[flatten.column_types]`) as every reader sees them: a UTC timestamp
/// (an offset converted, microseconds kept), a date and a decimal, with their values, in
/// deltalake, Polars, DuckDB's `delta_scan` and Spark's Parquet reader.
#[test]
fn every_reader_sees_utc_timestamps_dates_and_decimals() {
    let landing = tempfile::tempdir().unwrap();
    let dir = landing.path().join("batch_id=t1");
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        r#"{"topic":"order","message_id":"1","payload":{"amount":12.5,"placed":{"at":"2026-01-15T12:00:00+02:00"},"day":"2026-01-15","legs":[{"at":"2026-01-15T05:30:00.123456-04:30"}]}}"#,
        r#"{"topic":"order","message_id":"2","payload":{"amount":"-0.01","placed":{"at":"1999-12-31T23:59:59Z"},"day":"1999-12-31"}}"#,
    ];
    std::fs::write(dir.join("part-0.jsonl"), lines.join("\n")).unwrap();
    let hints = r#"
[flatten.column_types]
"/amount" = "decimal(18,2)"
"/placed/at" = "timestamp"
"/day" = "date"
"/legs/*/at" = "timestamp"
"#;
    let flatten = bronze::Settings::from_toml(hints)
        .unwrap()
        .resolve()
        .unwrap()
        .flatten;
    let lake = TempLake::new();
    let report = lake
        .ingest()
        .with_flatten(flatten)
        .build()
        .unwrap()
        .run(&dir)
        .unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.to_text());
    let table = |name: &str, typed: serde_json::Value| {
        serde_json::json!({
            "path": lake.schema_dir().join(name),
            "version": version_of(&lake, name),
            "rows": lake.count(name),
            "columns": lake.columns(name),
            "typed": typed,
        })
    };
    let tables = vec![
        table(
            "order",
            serde_json::json!([
                // 2026-01-15T10:00:00Z and 1999-12-31T23:59:59Z.
                {"column": "placed__at", "kind": "timestamp",
                 "values": ["1768471200000000", "946684799000000"]},
                {"column": "day", "kind": "date", "values": ["2026-01-15", "1999-12-31"]},
                {"column": "amount", "kind": "decimal(18,2)", "values": ["12.50", "-0.01"]},
            ]),
        ),
        table(
            "legs",
            serde_json::json!([
                {"column": "at", "kind": "timestamp", "values": ["1768471200123456"]},
            ]),
        ),
    ];
    let n = tables.len();
    run_check(
        &serde_json::json!({ "tables": tables, "spark": true }),
        "a typed load",
        n,
    );
}
