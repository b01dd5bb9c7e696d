//! Test helpers: fixture paths, a temporary lakehouse, and table readers that go through
//! `deltalake` + DataFusion (never through bronze's own code).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Int64Type};
use arrow::util::pretty::pretty_format_batches;
use deltalake::datafusion::prelude::SessionContext;

pub const BATCH1: &str = "2026-04-05_001";
pub const BATCH2: &str = "2026-04-06_001";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn batch_dir(batch: &str) -> PathBuf {
    repo().join(format!("fixtures/landing/market/events/batch_id={batch}"))
}

/// The expected-counts file of a fixture batch.
pub fn expected(batch: &str) -> serde_json::Value {
    let path = repo().join(format!("fixtures/expected/batch_id={batch}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn expected_tables(batch: &str) -> BTreeMap<String, u64> {
    expected(batch)["tables"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// Every table holds exactly the expected rows of each fixture batch (both loaded).
pub fn assert_both_fixture_batches_landed(lake: &TempLake) {
    for batch in [BATCH1, BATCH2] {
        for (table, rows) in expected_tables(batch) {
            let n = lake.count(&format!(
                "SELECT count(*) FROM {table} WHERE _batch_id = '{batch}'"
            ));
            assert_eq!(n as u64, rows, "{batch} {table}");
        }
    }
}

/// Parse threads for every test run: `BRONZE_THREADS` (which the CLI reads too), else
/// four per core, so that tests run with more threads than cores.
pub fn test_threads() -> usize {
    std::env::var("BRONZE_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| 4 * std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// The CLI as built for the tests, with [`test_threads`] parse threads.
pub fn bronze_cli() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_bronze"));
    c.env("BRONZE_THREADS", test_threads().to_string());
    c
}

/// `bronze ARGS --catalog <lake>`, run to its end.
pub fn on_catalog(lake: &TempLake, args: &[&str]) -> std::process::Output {
    bronze_cli()
        .args(args)
        .arg("--catalog")
        .arg(lake.catalog())
        .output()
        .unwrap()
}

/// A CLI run paused at its `after_staging` failpoint, holding its lease; [`Paused::finish`]
/// lets it go on and waits for it.
pub struct Paused {
    child: std::process::Child,
    /// Its stderr, read up to the pause (kept open so the run can still log).
    _stderr: std::io::BufReader<std::process::ChildStderr>,
}

impl Paused {
    /// Starts `cmd` (an `ingest`) armed to pause after staging; returns once it has.
    pub fn start(mut cmd: std::process::Command) -> Paused {
        use std::io::BufRead as _;
        use std::process::Stdio;
        let mut child = cmd
            .env("BRONZE_FAILPOINT", "after_staging")
            .env("BRONZE_FAILPOINT_ACTION", "pause")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("paused") {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the run ended before pausing"
            );
        }
        Paused {
            child,
            _stderr: stderr,
        }
    }

    /// Lets the run go on; its output once it ends.
    pub fn finish(mut self) -> std::process::Output {
        use std::io::Write as _;
        self.child.stdin.take().unwrap().write_all(b"\n").unwrap();
        self.child.wait_with_output().unwrap()
    }
}

/// A temporary catalog (or one at a given path, for CLI tests).
pub struct TempLake {
    _dir: Option<tempfile::TempDir>,
    catalog: PathBuf,
    schema: String,
}

impl TempLake {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        TempLake {
            catalog: dir.path().to_path_buf(),
            _dir: Some(dir),
            schema: "bronze".into(),
        }
    }
    pub fn at(catalog: PathBuf, schema: &str) -> Self {
        TempLake {
            _dir: None,
            catalog,
            schema: schema.into(),
        }
    }
    pub fn catalog(&self) -> &Path {
        &self.catalog
    }
    pub fn schema_dir(&self) -> PathBuf {
        self.catalog().join(&self.schema)
    }
    /// A builder on this catalog with [`test_threads`] parse threads.
    pub fn ingest(&self) -> bronze::IngestBuilder {
        bronze::Ingest::builder(self.catalog()).with_threads(test_threads())
    }
    /// Names of the data tables (every Delta table but the `_run_control` log).
    pub fn tables(&self) -> Vec<String> {
        let mut t = self.all_tables();
        t.retain(|n| n != bronze::RUN_CONTROL_TABLE);
        t
    }
    /// Names of every Delta table under the schema folder: folders whose `_delta_log`
    /// holds a commit, as `Maintenance::tables` lists them. (A run killed while another
    /// thread was committing a table's version 0 can leave `_delta_log/` with only the
    /// object store's staging file in it: no table yet for any reader, and the rerun
    /// creates it.) Not through `Maintenance` itself: its `Ingest` owns a runtime, which
    /// callers inside an async block could not drop.
    pub fn all_tables(&self) -> Vec<String> {
        let is_commit = |e: std::fs::DirEntry| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".json") || name.ends_with(".checkpoint.parquet")
        };
        let has_commit = |log: PathBuf| {
            std::fs::read_dir(log).is_ok_and(|mut es| es.any(|e| e.is_ok_and(is_commit)))
        };
        let mut names: Vec<String> = std::fs::read_dir(self.schema_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| has_commit(e.path().join("_delta_log")))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
    /// Runs `sql` with the tables of the schema it names registered under their names.
    pub fn sql(&self, sql: &str) -> Vec<RecordBatch> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let ctx = SessionContext::new();
            // Only the tables the query names (a catalog may hold a thousand).
            for name in self
                .all_tables()
                .into_iter()
                .filter(|n| sql.contains(n.as_str()))
            {
                let url = url::Url::from_directory_path(self.schema_dir().join(&name)).unwrap();
                let table = deltalake::open_table(url).await.unwrap();
                table.update_datafusion_session(&ctx.state()).unwrap();
                let provider = table.table_provider().await.unwrap();
                ctx.register_table(name.as_str(), provider).unwrap();
            }
            ctx.sql(sql).await.unwrap().collect().await.unwrap()
        })
    }
    /// Runs `f` on the table opened through `deltalake` (at `version` when given).
    pub fn with_table<T>(
        &self,
        table: &str,
        version: Option<u64>,
        f: impl AsyncFnOnce(deltalake::DeltaTable) -> T,
    ) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let url = url::Url::from_directory_path(self.schema_dir().join(table)).unwrap();
            let t = match version {
                Some(v) => deltalake::open_table_with_version(url, v).await.unwrap(),
                None => deltalake::open_table(url).await.unwrap(),
            };
            f(t).await
        })
    }
    /// Column names of a table, as the Delta log has them.
    pub fn columns(&self, table: &str) -> Vec<String> {
        self.with_table(table, None, async |t| {
            let schema = t.snapshot().unwrap().snapshot().arrow_schema();
            schema.fields().iter().map(|f| f.name().clone()).collect()
        })
    }
    /// The first column of a query's result, cast to text.
    pub fn strings(&self, sql: &str) -> Vec<String> {
        self.sql(sql)
            .iter()
            .flat_map(|b| {
                let c = cast(b.column(0), &DataType::Utf8).unwrap();
                let c = c.as_string::<i32>();
                (0..c.len())
                    .map(|i| c.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
    /// The single i64 a `SELECT count(*) ...` returns.
    pub fn count(&self, sql: &str) -> i64 {
        let batches = self.sql(sql);
        let b = batches.iter().find(|b| b.num_rows() > 0).expect("one row");
        let c = b.column(0);
        assert_eq!(c.null_count(), 0);
        c.as_primitive::<Int64Type>().value(0)
    }
    /// Every row of `table` except `_loaded_at`, sorted, as text (for equality checks).
    pub fn dump(&self, table: &str) -> String {
        let cols: Vec<String> = self
            .columns(table)
            .into_iter()
            .filter(|n| n != "_loaded_at")
            .collect();
        let list = cols
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let batches = self.sql(&format!("SELECT {list} FROM {table} ORDER BY {list}"));
        pretty_format_batches(&batches).unwrap().to_string()
    }
}

/// Sets a table property of `table`, as a user would.
pub fn set_property(lake: &TempLake, table: &str, key: &str, value: &str) {
    lake.with_table(table, None, async |t| {
        t.set_tbl_properties()
            .with_properties([(key.to_string(), value.to_string())].into())
            .await
            .unwrap();
    });
}

/// The row accounting of a run, checked from outside the library: its own check passed,
/// and the tables hold it: per topic, the topic table's rows of this batch equal the
/// topic's messages; `_corrupt_records` holds the batch's corrupt lines; and non-blank
/// lines = messages + corrupt + duplicates.
pub fn assert_accounted(lake: &TempLake, report: &bronze::BatchReport) {
    assert!(report.invariant_ok, "{}", report.invariant);
    assert_eq!(
        report.lines,
        report.messages + report.corrupt_lines + report.duplicates,
        "{}",
        report.to_text()
    );
    let batch = batch_filter(&report.batch_id, &report.run_control[0].landing_paths);
    let mut in_tables = 0;
    for row in &report.run_control {
        if !row.topic.is_empty() && row.table == bronze::TableName::for_topic(&row.topic).as_str() {
            let n = lake.count(&format!(
                "SELECT count(*) FROM \"{}\" WHERE {batch} AND _topic = '{}'",
                row.table,
                row.topic.replace('\'', "''")
            ));
            assert_eq!(
                n as u64, row.rows_in,
                "topic {:?} in {}",
                row.topic, row.table
            );
            in_tables += n as u64;
        }
    }
    assert_eq!(in_tables, report.messages, "topic-table rows = messages");
    if report.corrupt_lines > 0 {
        assert_eq!(
            lake.count(&format!(
                "SELECT count(*) FROM _corrupt_records WHERE {batch}"
            )) as u64,
            report.corrupt_lines
        );
    }
}

/// The SQL condition selecting the rows of a batch key: its id and, when it has them,
/// its folders' landing paths (comma separated, as in `_run_control`).
pub fn batch_filter(batch_id: &str, landing_paths: &str) -> String {
    if landing_paths.is_empty() {
        return format!("_batch_id = '{batch_id}'");
    }
    let list: Vec<String> = landing_paths.split(',').map(|p| format!("'{p}'")).collect();
    format!(
        "_batch_id = '{batch_id}' AND _landing_path IN ({})",
        list.join(", ")
    )
}

/// Staging tables (`_tmp_raw_load_*`) left under the schema folder.
pub fn staging_dirs(lake: &TempLake) -> Vec<String> {
    match std::fs::read_dir(lake.schema_dir()) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("_tmp_raw_load_"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Batch leases left under the schema folder.
pub fn leases(lake: &TempLake) -> Vec<String> {
    match std::fs::read_dir(lake.schema_dir().join(bronze::lease::LEASE_DIR)) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Both catalogs hold the same data tables with the same rows (`_loaded_at` aside).
pub fn assert_same_tables(a: &TempLake, b: &TempLake) {
    assert_eq!(a.tables(), b.tables());
    for t in a.tables() {
        assert_eq!(a.dump(&t), b.dump(&t), "{t}");
    }
}

/// Copies a folder tree (a catalog, to start several scenarios from one state).
pub fn copy_tree(from: &Path, to: &Path) {
    bronze::testdata::copy_tree(from, to).unwrap();
}

/// Every table opens and is read in full; no `_id` appears twice within a batch (the
/// one-copy rule holds even in the middle of a crashed rerun). One query per table.
pub fn assert_readable_without_duplicates(lake: &TempLake, context: &str) {
    for t in lake.all_tables() {
        let cols = lake.columns(&t);
        let sql = if cols.iter().any(|c| c == "_id") && cols.iter().any(|c| c == "_batch_id") {
            let folder = if cols.iter().any(|c| c == "_landing_path") {
                "coalesce(_landing_path, '')"
            } else {
                "''"
            };
            format!(
                "SELECT count(*) - count(DISTINCT concat(_batch_id, '/', {folder}, '/', _id)) FROM \"{t}\""
            )
        } else {
            format!("SELECT count(*) * 0 FROM \"{t}\"")
        };
        assert_eq!(lake.count(&sql), 0, "{context}: duplicate rows in {t}");
    }
}

/// Every data table's rows (`_loaded_at` aside), sorted, by table.
pub fn snapshot(lake: &TempLake) -> BTreeMap<String, String> {
    lake.tables()
        .into_iter()
        .map(|t| (lake.dump(&t), t))
        .map(|(dump, t)| (t, dump))
        .collect()
}

/// Every integration test ends with this check (run by `TempLake`'s drop): for each
/// batch key (batch id and landing paths) in `_run_control`, the last recorded run, if it succeeded, is what the tables
/// hold: per topic, the topic table's rows of the batch equal the run's messages of the
/// topic, and `_corrupt_records` holds its corrupt lines. Runs that failed (a refused
/// topic, a simulated lost row) are skipped: their check is their own test's.
pub fn assert_last_runs_accounted(lake: &TempLake) {
    if !lake.schema_dir().join("_run_control/_delta_log").is_dir() {
        return;
    }
    const SEP: char = '\u{1}';
    let landing = if lake
        .columns("_run_control")
        .iter()
        .any(|c| c == "landing_paths")
    {
        "coalesce(landing_paths, '')"
    } else {
        "''"
    };
    let rows = lake.strings(&format!(
        "SELECT concat_ws(chr(1), _batch_id, run_id, status, \"table\", CAST(rows_in AS VARCHAR), topic, {landing}) FROM _run_control",
    ));
    // batch key → (run started, run id) of its last run; run id → its rows.
    let mut last: BTreeMap<(String, String), (i64, String)> = BTreeMap::new();
    let mut runs: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for r in rows {
        let f: Vec<String> = r.splitn(7, SEP).map(str::to_string).collect();
        let started: i64 = f[1].rsplit('-').next().unwrap().parse().unwrap();
        let key = (f[0].clone(), f[6].clone());
        let e = last.entry(key).or_insert((started, f[1].clone()));
        if started > e.0 {
            *e = (started, f[1].clone());
        }
        runs.entry(f[1].clone()).or_default().push(f);
    }
    let keyed: Vec<String> = last
        .keys()
        .filter(|(_, paths)| !paths.is_empty())
        .map(|(id, _)| id.clone())
        .collect();
    for ((batch_id, landing_paths), (_, run)) in last {
        // A run from before landing paths, superseded by runs of folders of its id.
        if landing_paths.is_empty() && keyed.contains(&batch_id) {
            continue;
        }
        let batch = batch_filter(&batch_id, &landing_paths);
        let rows = &runs[&run];
        if rows.iter().any(|f| f[2] != "ok") {
            continue;
        }
        assert!(
            rows.iter().any(|f| f[3] == bronze::INVARIANT_ROW),
            "{run}: no check row"
        );
        for f in rows {
            let (table, rows_in, topic) = (&f[3], f[4].parse::<i64>().unwrap(), &f[5]);
            let sql = if !topic.is_empty() && *table == bronze::TableName::for_topic(topic).as_str()
            {
                format!(
                    "SELECT count(*) FROM \"{table}\" WHERE {batch} AND _topic = '{}'",
                    topic.replace('\'', "''")
                )
            } else if table == "_corrupt_records" {
                if !lake.schema_dir().join(table).join("_delta_log").is_dir() {
                    assert_eq!(rows_in, 0, "last run {run}: {table} missing");
                    continue;
                }
                format!("SELECT count(*) FROM _corrupt_records WHERE {batch}")
            } else {
                continue;
            };
            assert_eq!(
                lake.count(&sql),
                rows_in,
                "last run {run}: {table} {topic:?}"
            );
        }
    }
}

impl Drop for TempLake {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_last_runs_accounted(self);
        }
    }
}
