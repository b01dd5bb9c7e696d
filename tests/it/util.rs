//! Test helpers: fixture paths, a temporary lakehouse, and table readers that go through
//! the Delta kernel's scan (never through bronze's own code).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use buoyant_kernel::engine::arrow_data::ArrowEngineData;

pub const BATCH1: &str = "2026-04-05_001";
pub const BATCH2: &str = "2026-04-06_001";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of README.md, then of the pages of `docs/` in name order.
fn documents() -> Vec<String> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    std::iter::once(repo().join("README.md"))
        .chain(pages)
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

/// Every section titled `heading` (its leading `#`s ignored) in README.md and the pages of
/// `docs/`, in that order: the heading's line up to the next heading of the same or a
/// higher level, lines inside code blocks never taken for headings.
fn sections(heading: &str) -> Vec<String> {
    let title = heading.trim_start_matches('#').trim();
    let mut found = Vec::new();
    for text in documents() {
        let mut in_code = false;
        let mut open: Option<(usize, Vec<&str>)> = None;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            }
            let level = line.len() - line.trim_start_matches('#').len();
            let is_heading = !in_code && level > 0 && line[level..].starts_with(' ');
            if is_heading {
                if let Some((_, lines)) = open.take_if(|(open_level, _)| level <= *open_level) {
                    found.push(lines.join("\n") + "\n");
                }
                if open.is_none() && line[level..].trim() == title {
                    open = Some((level, Vec::new()));
                }
            }
            if let Some((_, lines)) = open.as_mut() {
                lines.push(line);
            }
        }
        if let Some((_, lines)) = open {
            found.push(lines.join("\n") + "\n");
        }
    }
    found
}

/// The section titled `heading` in README.md or a page of `docs/`, as written: the first
/// of that title that holds `needle`.
pub fn doc_section(heading: &str, needle: &str) -> String {
    sections(heading)
        .into_iter()
        .find(|s| s.contains(needle))
        .unwrap_or_else(|| panic!("no section {heading:?} in README.md or docs/ holds {needle:?}"))
}

/// The first ```` ```sh ```` block of the section titled `heading` in README.md or a page
/// of `docs/` (the first such section that has one), as written.
pub fn doc_sh_block(heading: &str) -> String {
    let section = doc_section(heading, "```sh\n");
    let block = section.split("```sh\n").nth(1).expect("an sh block");
    block.split("```").next().unwrap().to_string()
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
            let n = lake.rows(&table).eq("_batch_id", batch).len();
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

/// A command's stdout and stderr, for assertion messages and searches.
pub fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
    /// One run of a fixture batch with the default settings, its report.
    pub fn load(&self, batch: &str) -> bronze::BatchReport {
        self.ingest()
            .build()
            .unwrap()
            .run(batch_dir(batch))
            .unwrap()
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
    /// Every live row of `table` through the Delta kernel's own scan (deletion vectors
    /// applied, a column older files lack read as null), in the table's schema.
    pub fn rows(&self, table: &str) -> Rows {
        self.rows_at(table, None)
    }
    /// [`Self::rows`] of `table` as of `version` (the latest when `None`).
    pub fn rows_at(&self, table: &str, version: Option<u64>) -> Rows {
        let url = url::Url::from_directory_path(self.schema_dir().join(table)).unwrap();
        let engine = self.with_table(table, None, async |t| t.log_store().engine(None));
        let mut builder = buoyant_kernel::Snapshot::builder_for(url);
        if let Some(v) = version {
            builder = builder.at_version(v);
        }
        let snapshot = builder.build(engine.as_ref()).unwrap();
        let scan = snapshot.scan_builder().build().unwrap();
        let schema: arrow::datatypes::SchemaRef = {
            use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
            let schema: arrow::datatypes::Schema =
                scan.logical_schema().as_ref().try_into_arrow().unwrap();
            Arc::new(schema)
        };
        let batches: Vec<RecordBatch> = scan
            .execute(engine)
            .unwrap()
            .map(|data| {
                let data = ArrowEngineData::try_from_engine_data(data.unwrap()).unwrap();
                data.record_batch().clone()
            })
            .collect();
        let schema = batches.first().map_or(schema, |b| b.schema());
        let batch = arrow::compute::concat_batches(&schema, &batches)
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        Rows { batch }
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
    /// The number of rows of `table`.
    pub fn count(&self, table: &str) -> usize {
        self.rows(table).len()
    }
    /// Every row of `table` except `_loaded_at`, as text, sorted (for equality checks).
    pub fn dump(&self, table: &str) -> String {
        let rows = self.rows(table);
        let columns: Vec<String> = rows
            .columns()
            .into_iter()
            .filter(|n| n != "_loaded_at")
            .collect();
        let mut lines: Vec<String> = rows
            .iter()
            .map(|r| {
                columns
                    .iter()
                    .map(|c| r.get(c).unwrap_or_else(|| "NULL".into()))
                    .collect::<Vec<_>>()
                    .join(" | ")
            })
            .collect();
        lines.sort();
        format!("{}\n{}", columns.join(" | "), lines.join("\n"))
    }
}

/// The rows of a table ([`TempLake::rows`]), to filter and read as text.
#[derive(Clone)]
pub struct Rows {
    batch: RecordBatch,
}

impl Rows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }
    /// Column names, in the table's order.
    pub fn columns(&self) -> Vec<String> {
        let schema = self.batch.schema();
        schema.fields().iter().map(|f| f.name().clone()).collect()
    }
    /// The rows, one after the other.
    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        (0..self.len()).map(move |i| Row { rows: self, i })
    }
    /// The rows for which `keep` holds.
    pub fn filter(&self, keep: impl Fn(&Row<'_>) -> bool) -> Rows {
        let mask: arrow::array::BooleanArray = self.iter().map(|r| Some(keep(&r))).collect();
        Rows {
            batch: arrow::compute::filter_record_batch(&self.batch, &mask).unwrap(),
        }
    }
    /// The rows whose `column` reads as `value` ([`Row::get`]).
    pub fn eq(&self, column: &str, value: impl std::fmt::Display) -> Rows {
        let value = value.to_string();
        self.filter(|r| r.get(column).as_deref() == Some(value.as_str()))
    }
    /// The values of `column` as text ([`Row::get`]; `None` for null), in row order.
    pub fn texts(&self, column: &str) -> Vec<Option<String>> {
        self.iter().map(|r| r.get(column)).collect()
    }
    /// The non-null values of `column` as text, in row order.
    pub fn strings(&self, column: &str) -> Vec<String> {
        self.texts(column).into_iter().flatten().collect()
    }
    /// The number of distinct non-null values of `column`.
    pub fn distinct(&self, column: &str) -> usize {
        let values: std::collections::BTreeSet<String> = self.strings(column).into_iter().collect();
        values.len()
    }
    /// The rows of a batch key: its id and, when it has them, its folders' landing paths
    /// (comma separated, as in `_run_control`).
    pub fn of_batch(&self, batch_id: &str, landing_paths: &str) -> Rows {
        let paths: Vec<&str> = landing_paths.split(',').filter(|p| !p.is_empty()).collect();
        self.filter(|r| {
            r.get("_batch_id").as_deref() == Some(batch_id)
                && (paths.is_empty()
                    || r.get("_landing_path")
                        .is_some_and(|p| paths.contains(&p.as_str())))
        })
    }
    /// The rows sorted by the text of `column` (stable: ties keep their order).
    pub fn sorted_by(&self, column: &str) -> Rows {
        self.sorted_by_key(|r| r.get(column))
    }
    /// The rows sorted by `key` (stable: ties keep their order), for orders the text of
    /// one column does not give (numbers, several columns).
    pub fn sorted_by_key<K: Ord>(&self, key: impl Fn(&Row<'_>) -> K) -> Rows {
        let mut order: Vec<(K, u32)> = self.iter().map(|r| (key(&r), r.i as u32)).collect();
        order.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let indices =
            arrow::array::UInt32Array::from_iter_values(order.into_iter().map(|(_, i)| i));
        let columns = self
            .batch
            .columns()
            .iter()
            .map(|c| arrow::compute::take(c, &indices, None).unwrap())
            .collect();
        Rows {
            batch: RecordBatch::try_new(self.batch.schema(), columns).unwrap(),
        }
    }
    /// The rows as one Arrow batch.
    pub fn batch(&self) -> &RecordBatch {
        &self.batch
    }
    /// The value of `column` as text ([`Row::get`]) of every row, in row order; panics
    /// on a null (where a test expects every row to have one).
    pub fn values(&self, column: &str) -> Vec<String> {
        self.iter()
            .map(|r| {
                r.get(column)
                    .unwrap_or_else(|| panic!("{column} is null or missing in a row"))
            })
            .collect()
    }
}

/// One row of [`Rows`].
pub struct Row<'a> {
    rows: &'a Rows,
    i: usize,
}

impl Row<'_> {
    /// The value of `column` as text: strings as they are, numbers and timestamps as
    /// Arrow casts them to text, binary as lowercase hex; `None` for null or a column
    /// the table does not have.
    pub fn get(&self, column: &str) -> Option<String> {
        let c = self.rows.batch.column_by_name(column)?;
        if c.is_null(self.i) {
            return None;
        }
        if let DataType::Binary = c.data_type() {
            let bytes = c.as_binary::<i32>().value(self.i);
            return Some(bytes.iter().map(|b| format!("{b:02x}")).collect());
        }
        let text = cast(&c.slice(self.i, 1), &DataType::Utf8).unwrap();
        Some(text.as_string::<i32>().value(0).to_string())
    }
    /// The value of an integer `column` (`None` for null).
    pub fn int(&self, column: &str) -> Option<i64> {
        self.get(column).map(|v| v.parse().unwrap())
    }
    /// The value of a timestamp `column` as microseconds since the epoch, as SQL's
    /// `CAST(ts AS BIGINT)` (`None` for null or a missing column).
    pub fn micros(&self, column: &str) -> Option<i64> {
        let c = self.rows.batch.column_by_name(column)?;
        if c.is_null(self.i) {
            return None;
        }
        let n = cast(&c.slice(self.i, 1), &DataType::Int64).unwrap();
        Some(n.as_primitive::<arrow::datatypes::Int64Type>().value(0))
    }
}

/// SQL's `text LIKE pattern`: `%` matches any run of characters, `_` any one character.
pub fn like(text: &str, pattern: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    // `m[j]`: `p[..j]` matches the text read so far.
    let mut m = vec![false; p.len() + 1];
    m[0] = true;
    for j in 0..p.len() {
        m[j + 1] = m[j] && p[j] == '%';
    }
    for c in text.chars() {
        let mut next = vec![false; p.len() + 1];
        for j in 0..p.len() {
            next[j + 1] = match p[j] {
                '%' => next[j] || m[j + 1],
                '_' => m[j],
                x => m[j] && x == c,
            };
        }
        m = next;
    }
    m[p.len()]
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
    let of_batch = |table: &str| {
        lake.rows(table).of_batch(
            &report.batch_id,
            &report.run_control[0].landing_paths.join(","),
        )
    };
    let mut in_tables = 0;
    for row in &report.run_control {
        if !row.topic.is_empty() && row.table == bronze::TableName::for_topic(&row.topic).as_str() {
            let n = of_batch(&row.table).eq("_topic", &row.topic).len();
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
            of_batch("_corrupt_records").len() as u64,
            report.corrupt_lines
        );
    }
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

/// The `txn` a table's log holds for `app_id`, if any.
pub fn txn_version(lake: &TempLake, table: &str, app_id: &str) -> Option<i64> {
    lake.with_table(table, None, async |t| {
        let log_store = t.log_store();
        t.snapshot()
            .unwrap()
            .transaction_version(log_store.as_ref(), app_id)
            .await
            .unwrap()
    })
}

/// The run took over a lease a run of its batch left, and says so.
pub fn assert_took_over_a_lease(report: &bronze::BatchReport) {
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("took over the lease")),
        "{:?}",
        report.warnings
    );
}

/// Every lease left under the schema folder is released (by a run that ended before
/// `_run_control` recorded its writes): none names a run as still going.
pub fn assert_no_live_lease(lake: &TempLake, context: &str) {
    for name in leases(lake) {
        let path = lake.schema_dir().join(bronze::lease::LEASE_DIR).join(&name);
        let holder: bronze::lease::Holder =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(
            holder.released_micros.is_some(),
            "{context}: a live lease left: {holder:?}"
        );
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
        let rows = lake.rows(&t);
        if !rows.columns().iter().any(|c| c == "_id") {
            continue;
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in rows.iter() {
            let key = (r.get("_batch_id"), r.get("_landing_path"), r.get("_id"));
            assert!(
                seen.insert(key.clone()),
                "{context}: duplicate rows in {t}: {key:?}"
            );
        }
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
    let fields = [
        "_batch_id",
        "run_id",
        "status",
        "table",
        "rows_in",
        "topic",
        "landing_paths",
    ];
    // batch key → (run started, run id) of its last run; run id → its rows.
    let mut last: BTreeMap<(String, String), (i64, String)> = BTreeMap::new();
    let mut runs: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for r in lake.rows("_run_control").iter() {
        let f: Vec<String> = fields
            .iter()
            .map(|c| r.get(c).unwrap_or_default())
            .collect();
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
        let of_batch = |table: &str| lake.rows(table).of_batch(&batch_id, &landing_paths);
        let rows = &runs[&run];
        if rows.iter().any(|f| f[2] != "ok") {
            continue;
        }
        assert!(
            rows.iter().any(|f| f[3] == bronze::INVARIANT_ROW),
            "{run}: no check row"
        );
        for f in rows {
            let (table, rows_in, topic) = (&f[3], f[4].parse::<usize>().unwrap(), &f[5]);
            let n = if !topic.is_empty() && *table == bronze::TableName::for_topic(topic).as_str() {
                of_batch(table).eq("_topic", topic).len()
            } else if table == "_corrupt_records" {
                if !lake.schema_dir().join(table).join("_delta_log").is_dir() {
                    assert_eq!(rows_in, 0, "last run {run}: {table} missing");
                    continue;
                }
                of_batch(table).len()
            } else {
                continue;
            };
            assert_eq!(n, rows_in, "last run {run}: {table} {topic:?}");
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

/// Runs `script` with `sh -e` in a new temporary folder, `bronze` the one built for the
/// tests; it must exit 0. The folder and the output.
pub fn run_sh(script: &str) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_bronze"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir.path())
        .env("PATH", path)
        .env("BRONZE_THREADS", test_threads().to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, out)
}
