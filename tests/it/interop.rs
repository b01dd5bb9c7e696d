//! Other engines read what we write: deltalake (Python), Polars and DuckDB get the same
//! rows as our reader after ingest, OPTIMIZE, VACUUM and a checkpoint, including time
//! travel to an earlier version. `scripts/test` installs the Python side.

use std::path::PathBuf;

use crate::util::*;

fn python() -> PathBuf {
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

fn check(lake: &TempLake, stage: &str, old: &std::collections::BTreeMap<String, u64>) {
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
    let spec = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        spec.path(),
        serde_json::json!({ "tables": tables }).to_string(),
    )
    .unwrap();
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
    assert!(
        stdout.contains(&format!("checked {} tables", tables.len())),
        "{stdout}"
    );
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
