//! The report of one run: what was read, what was kept aside, what was written.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::run_control::RunControlRow;
use crate::stage::{CorruptLine, FileStats};

/// How many corrupt lines the report lists in full (counts stay exact).
pub const MAX_LISTED_CORRUPT: usize = 100;

/// Where a batch was staged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum StagingMode {
    /// Parsed into memory; nothing persisted.
    #[default]
    Memory,
    /// Spilled to the staging table `_tmp_raw_load_<batch id>_<hash>` (over the memory
    /// budget, or asked for with `--persist-staging`).
    Persisted,
    /// Read back from a complete staging table left by an earlier run of the batch.
    Resumed,
}

impl StagingMode {
    /// `memory`, `persisted` or `resumed`.
    pub fn as_str(self) -> &'static str {
        match self {
            StagingMode::Memory => "memory",
            StagingMode::Persisted => "persisted",
            StagingMode::Resumed => "resumed",
        }
    }
}

impl std::fmt::Display for StagingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened to one table in a run.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TableOutcome {
    /// Rows written by this run (over all its topics).
    pub rows_written: u64,
    /// Topics that wrote to it (a shared child table has several).
    pub topics: Vec<String>,
    /// Delta version after this run's last commit to it.
    pub version: Option<u64>,
    /// The error of a failed write (the other tables are still written).
    pub error: Option<String>,
    /// Columns this run added to the table (schema evolution `add`).
    pub added_columns: Vec<String>,
    /// Values this run kept in `_rescued_data` because they did not fit the table.
    pub rescued_values: u64,
}

/// The outcome of [`Ingest::run`](crate::Ingest::run).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct BatchReport {
    /// The batch id.
    pub batch_id: String,
    /// The batch: its landing path(s) and id (`kafka-eu/market/batch_id=X`, or
    /// `{a/b,c/d}/batch_id=X` for several folders).
    #[serde(default)]
    pub batch: String,
    /// The folders loaded, in the order their files were read: path, landing path
    /// (`_landing_path` of their rows) and data files read.
    #[serde(default)]
    pub folders: Vec<crate::batch::Folder>,
    /// Data files read.
    pub files_read: usize,
    /// Entries of the batch folder skipped (manifests, `_SUCCESS`, hidden files, ...).
    pub files_skipped: usize,
    /// Their names (within their folder), sorted.
    #[serde(default)]
    pub skipped_files: Vec<String>,
    /// Bytes read (after decompression).
    pub bytes_read: u64,
    /// Non-blank lines.
    pub lines: u64,
    /// Messages loaded (non-blank lines minus corrupt lines minus duplicates).
    pub messages: u64,
    /// Lines kept in `_corrupt_records`.
    pub corrupt_lines: u64,
    /// Duplicate messages dropped (first occurrence wins).
    pub duplicates: u64,
    /// Topics in the batch.
    pub topics: usize,
    /// Per table outcome, by table name.
    pub tables: BTreeMap<String, TableOutcome>,
    /// Per file counts, in file order.
    pub files: Vec<FileStats>,
    /// The first [`MAX_LISTED_CORRUPT`] corrupt lines (file, line, reason).
    pub corrupt: Vec<CorruptLine>,
    /// The rows written to `_run_control` for this run, one per (topic, table) write.
    pub run_control: Vec<RunControlRow>,
    /// Where staging lived (`memory`, `persisted`, `resumed`; resumed, the per-file counts
    /// and the corrupt-line list are empty, the totals are the staged ones).
    pub staging: StagingMode,
    /// Things that did not fail the load but need attention (a staging table not dropped).
    pub warnings: Vec<String>,
    /// Tables the run created or widened that the catalog of `[metastore]` did not take
    /// (`database.table: why`); `bronze register` catches up. Exit code 1.
    #[serde(default)]
    pub unregistered: Vec<String>,
    /// Whether every non-blank line is accounted for (topic-table row, corrupt record or
    /// dropped duplicate), per file and per topic; checked by the library on every run.
    pub invariant_ok: bool,
    /// The accounting check, as recorded in `_run_control` (table `(batch)`).
    pub invariant: String,
    /// Requests to object stores that failed with a transient error (5xx, 429, a
    /// timeout, a dropped connection) and were retried with jittered backoff.
    #[serde(default)]
    pub store_retries: u64,
    /// Commits planned again because another writer's commit conflicted with them while
    /// they were in flight (a schema change, files added that a replace might match,
    /// files compacted away: conflicts deltalake does not retry).
    #[serde(default)]
    pub commit_replans: u64,
    /// Object store calls per stage (`discover`, `lease`, `stage`, `tables`,
    /// `run_control`, `cleanup`), when the catalog or the landing folder is in an object
    /// store: one call is one request, except a multipart upload (one for all its
    /// parts) and the client's retries.
    #[serde(default)]
    pub store_calls: BTreeMap<String, u64>,
    /// Wall time of each stage of the run, in seconds: `discover`, `lease` (the batch
    /// lease and what the catalog holds of the batch), `stage` (read, parse, dedup,
    /// group by topic), `tables` (flatten, encode and commit every table, topics in
    /// parallel), `run_control`, `cleanup` (dropping the staging table, when persisted).
    /// They add up to `elapsed` but for the report's own assembly.
    #[serde(default)]
    pub stage_seconds: BTreeMap<String, f64>,
    /// Where the `tables` stage's time went, in seconds summed over the table tasks
    /// (which run in parallel, so a sum can exceed the stage's wall time): `flatten`
    /// (payloads into topic and child table rows), `open` (reading tables' logs),
    /// `write_files` (encoding and uploading Parquet), `commit` (putting the log entry),
    /// `builder` (reading back the data files a replace rewrites because they mix the
    /// batch's rows with others).
    #[serde(default)]
    pub task_seconds: BTreeMap<String, f64>,
    /// Peak resident memory of the process so far (`VmHWM`), when the OS tells.
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
    /// Wall time of the run.
    #[serde(serialize_with = "as_secs", deserialize_with = "from_secs")]
    pub elapsed: Duration,
}

/// A stage of a run, timed and counted in [`BatchReport::stage_seconds`] and
/// [`BatchReport::store_calls`] under its [`Stage::as_str`] name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// The batch key and its files.
    Discover,
    /// The batch lease and what the catalog holds of the batch.
    Lease,
    /// Read, parse, dedup, group by topic.
    Staging,
    /// Flatten, encode and commit every table.
    Tables,
    /// The `_run_control` rows.
    RunControl,
    /// Dropping the staging table, when persisted.
    Cleanup,
}

impl Stage {
    /// The stages in the order a run goes through them.
    pub(crate) const ALL: [Stage; 6] = [
        Stage::Discover,
        Stage::Lease,
        Stage::Staging,
        Stage::Tables,
        Stage::RunControl,
        Stage::Cleanup,
    ];

    /// The stage's name in reports and metrics.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Stage::Discover => "discover",
            Stage::Lease => "lease",
            Stage::Staging => "stage",
            Stage::Tables => "tables",
            Stage::RunControl => "run_control",
            Stage::Cleanup => "cleanup",
        }
    }
}

fn from_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let secs = <f64 as serde::Deserialize>::deserialize(d)?;
    Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// `: a, b, c` for the skipped files' names (the first five, then how many more).
fn skipped_names(names: &[String]) -> String {
    const SHOWN: usize = 5;
    match names.len() {
        0 => String::new(),
        n if n <= SHOWN => format!(": {}", names.join(", ")),
        n => format!(": {} and {} more", names[..SHOWN].join(", "), n - SHOWN),
    }
}

impl BatchReport {
    /// The lines for the run's counters that are not zero.
    fn counters_text(&self, s: &mut String) {
        use std::fmt::Write as _;
        let calls: u64 = self.store_calls.values().sum();
        if calls > 0 {
            let stages: Vec<String> = self
                .store_calls
                .iter()
                .map(|(stage, n)| format!("{stage} {n}"))
                .collect();
            let _ = writeln!(s, "object store calls: {calls} ({})", stages.join(", "));
        }
        if !self.stage_seconds.is_empty() {
            let stages: Vec<String> = Stage::ALL
                .iter()
                .filter_map(|st| {
                    let name = st.as_str();
                    Some(format!("{name} {:.3} s", self.stage_seconds.get(name)?))
                })
                .collect();
            let _ = writeln!(s, "stages: {}", stages.join(", "));
        }
        if self.task_seconds.values().any(|v| *v > 0.0) {
            let tasks: Vec<String> = self
                .task_seconds
                .iter()
                .filter(|(_, v)| **v > 0.0)
                .map(|(work, v)| format!("{work} {v:.3} s"))
                .collect();
            let _ = writeln!(s, "table tasks (summed): {}", tasks.join(", "));
        }
        if self.commit_replans > 0 {
            let _ = writeln!(
                s,
                "commits planned again after another writer's conflicting commit: {}",
                self.commit_replans
            );
        }
        if self.store_retries > 0 {
            let _ = writeln!(
                s,
                "object store requests retried after transient errors: {}",
                self.store_retries
            );
        }
    }

    /// Tables whose write failed.
    pub fn failed_tables(&self) -> impl Iterator<Item = (&String, &TableOutcome)> {
        self.tables.iter().filter(|(_, t)| t.error.is_some())
    }

    /// True when every line became a row and every table was written.
    pub fn is_clean(&self) -> bool {
        self.corrupt_lines == 0 && self.failed_tables().next().is_none() && self.invariant_ok
    }

    /// Process exit code: 0 clean, 1 finished with corrupt lines, 2 a table failed.
    pub fn exit_code(&self) -> u8 {
        if self.failed_tables().next().is_some() || !self.invariant_ok {
            2
        } else if self.corrupt_lines > 0 || !self.unregistered.is_empty() {
            1
        } else {
            0
        }
    }

    /// A human-readable summary.
    pub fn to_text(&self) -> String {
        let mut s = self.summary();
        s.push('\n');
        self.counters_text(&mut s);
        self.folders_text(&mut s);
        self.tables_text(&mut s);
        self.problems_text(&mut s);
        s
    }

    /// One line of what the batch read and staged: the first line of
    /// [`BatchReport::to_text`] (Python's `Report.summary()`).
    pub fn summary(&self) -> String {
        format!(
            "batch {} (staging: {}): {} files read ({} skipped{}), {} bytes, {} lines, {} messages, {} topics, {} corrupt, {} duplicates, {:.2}s",
            if self.batch.is_empty() {
                &self.batch_id
            } else {
                &self.batch
            },
            self.staging,
            self.files_read,
            self.files_skipped,
            skipped_names(&self.skipped_files),
            self.bytes_read,
            self.lines,
            self.messages,
            self.topics,
            self.corrupt_lines,
            self.duplicates,
            self.elapsed.as_secs_f64()
        )
    }

    /// A line per folder, when the batch has several.
    fn folders_text(&self, s: &mut String) {
        use std::fmt::Write as _;
        if self.folders.len() > 1 {
            for f in &self.folders {
                let _ = writeln!(
                    s,
                    "folder {} ({}): {} files",
                    f.landing_path,
                    f.path.display(),
                    f.files
                );
            }
        }
    }

    /// The table of tables: rows written, version and status of each.
    fn tables_text(&self, s: &mut String) {
        use std::fmt::Write as _;
        let width = self
            .tables
            .keys()
            .map(String::len)
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            s,
            "{:<width$}  {:>9}  {:>7}  status",
            "table", "rows", "version"
        );
        for (name, t) in &self.tables {
            let version = t.version.map_or("-".to_string(), |v| v.to_string());
            let mut status = t.error.as_deref().unwrap_or("ok").to_string();
            if !t.added_columns.is_empty() {
                status.push_str(&format!("; added columns: {}", t.added_columns.join(", ")));
            }
            if t.rescued_values > 0 {
                status.push_str(&format!("; {} values rescued", t.rescued_values));
            }
            let _ = writeln!(
                s,
                "{name:<width$}  {:>9}  {version:>7}  {status}",
                t.rows_written
            );
        }
    }

    /// The row accounting's error, the warnings, the tables not registered and the
    /// corrupt lines listed.
    fn problems_text(&self, s: &mut String) {
        use std::fmt::Write as _;
        if !self.invariant_ok {
            let _ = writeln!(s, "error: row accounting: {}", self.invariant);
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        for u in &self.unregistered {
            let _ = writeln!(
                s,
                "not registered in the catalog: {u} (the next run, or `bronze register`, registers it)"
            );
        }
        for c in &self.corrupt {
            let _ = writeln!(s, "corrupt: {}:{}: {}", c.source_file, c.line, c.reason);
        }
        if self.corrupt_lines as usize > self.corrupt.len() {
            let _ = writeln!(
                s,
                "corrupt: ... {} more",
                self.corrupt_lines as usize - self.corrupt.len()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Stage;

    #[test]
    fn stage_names_in_run_order() {
        let names = Stage::ALL.map(Stage::as_str);
        let want = [
            "discover",
            "lease",
            "stage",
            "tables",
            "run_control",
            "cleanup",
        ];
        assert_eq!(names, want);
    }
}
