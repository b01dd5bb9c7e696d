//! `bronze maintain`: what `health` recommends, done for every table of a catalog, as
//! predictive optimization does for managed tables on Databricks. Per table, worst
//! first: OPTIMIZE where small files piled up, VACUUM past the table's retention (its
//! `delta.deletedFileRetentionDuration`, never under [`MIN_RETENTION_HOURS`](super::MIN_RETENTION_HOURS) unless
//! forced), a checkpoint once 10 commits followed the
//! last, and the log entries older than the table's `delta.logRetentionDuration`
//! (30 days by default) and older than its latest checkpoint removed. Each step runs
//! under the table's lock and commits through the same conflict checks as a load, so
//! it is safe beside ingesting workers; a step that loses to one is reported for that
//! table, and the others go on.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{
    FLAG_MAX_AVG_BYTES, FLAG_MIN_FILES, Maintenance, VacuumReport, last_checkpoint_version,
};
use crate::error::{Error, Result};
use crate::table::upkeep::{OptimizeReport, live_files, small_file_threshold};

/// Commits after the last checkpoint that make a new one due (as `health` says).
const CHECKPOINT_AFTER: u64 = 10;

/// What `maintain` did to one table.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct MaintainedTable {
    /// Table.
    pub table: String,
    /// The OPTIMIZE, when small files had piled up.
    pub optimize: Option<OptimizeReport>,
    /// The VACUUM (its files: what it deleted).
    pub vacuum: Option<VacuumReport>,
    /// The version a checkpoint was written at.
    pub checkpoint: Option<u64>,
    /// Log entries removed past the log retention.
    pub logs_removed: usize,
    /// The first step that failed, with why (the steps after it did not run).
    pub error: Option<String>,
}

impl MaintainedTable {
    /// Whether any step changed the table.
    pub fn did_something(&self) -> bool {
        self.optimize.as_ref().is_some_and(|o| o.files_removed > 0)
            || self.vacuum.as_ref().is_some_and(|v| !v.files.is_empty())
            || self.checkpoint.is_some()
            || self.logs_removed > 0
    }
}

/// What a `maintain` did.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct MaintainReport {
    /// The tables visited, worst first.
    pub tables: Vec<MaintainedTable>,
    /// Tables not visited: the bounds were reached first.
    pub not_reached: Vec<String>,
    /// Wall time.
    pub seconds: f64,
}

impl MaintainReport {
    /// Whether a table's step failed.
    pub fn failed(&self) -> bool {
        self.tables.iter().any(|t| t.error.is_some())
    }

    /// One line per table that something was done to or that failed, and a summary.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        for t in &self.tables {
            let mut did = Vec::new();
            if let Some(o) = t.optimize.as_ref().filter(|o| o.files_removed > 0) {
                did.push(format!(
                    "optimized {} -> {} files",
                    o.files_before, o.files_after
                ));
            }
            if let Some(v) = t.vacuum.as_ref().filter(|v| !v.files.is_empty()) {
                did.push(format!(
                    "vacuumed {} files ({} bytes)",
                    v.files.len(),
                    v.bytes
                ));
            }
            if let Some(v) = t.checkpoint {
                did.push(format!("checkpoint at version {v}"));
            }
            if t.logs_removed > 0 {
                did.push(format!("removed {} expired log entries", t.logs_removed));
            }
            if let Some(e) = &t.error {
                did.push(format!("FAILED: {e}"));
            }
            if !did.is_empty() {
                let _ = writeln!(s, "{}: {}", t.table, did.join(", "));
            }
        }
        let changed = self.tables.iter().filter(|t| t.did_something()).count();
        let _ = write!(
            s,
            "{} tables visited, {changed} changed, in {:.1} s",
            self.tables.len(),
            self.seconds
        );
        if !self.not_reached.is_empty() {
            let _ = write!(
                s,
                "; {} not reached within the bounds (run again): {}",
                self.not_reached.len(),
                self.not_reached.join(", ")
            );
        }
        s.push('\n');
        s
    }
}

/// A `maintain` of a catalog's tables ([`Maintenance::maintain`]).
#[derive(Debug)]
#[must_use = "an operation does nothing until `execute` is called"]
pub struct Maintain<'a> {
    maintenance: &'a Maintenance<'a>,
    max_tables: Option<usize>,
    max_duration: Option<Duration>,
    retention_hours: Option<u64>,
    force: bool,
    now_millis: Option<i64>,
}

impl<'a> Maintenance<'a> {
    /// Everything `health` recommends, for every table of the schema, worst first:
    /// OPTIMIZE where small files piled up, VACUUM past the retention, a checkpoint once
    /// 10 commits followed the last, log entries past `delta.logRetentionDuration` and
    /// before the latest checkpoint removed; each step under the table's lock. Runs on
    /// [`Maintain::execute`].
    pub fn maintain(&self) -> Maintain<'_> {
        Maintain {
            maintenance: self,
            max_tables: None,
            max_duration: None,
            retention_hours: None,
            force: false,
            now_millis: None,
        }
    }
}

/// Where a table comes in [`Maintain::execute`]'s visits (ordered as `health` ranks
/// tables, worst first: flagged tables, then by small files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    /// `health` flags the table (many files, small on average).
    flagged: bool,
    /// Its files under the small-file threshold.
    small_files: u64,
}

impl Maintain<'_> {
    /// Visit at most `n` tables (the worst first); the others are listed as not reached.
    pub fn with_max_tables(mut self, n: Option<usize>) -> Self {
        self.max_tables = n;
        self
    }

    /// Start no table once this much time has passed (the table in progress finishes).
    pub fn with_max_duration(mut self, d: Option<Duration>) -> Self {
        self.max_duration = d;
        self
    }

    /// VACUUM keeps unreferenced files younger than `hours` (default and minimum each
    /// table's own retention, never under [`MIN_RETENTION_HOURS`](super::MIN_RETENTION_HOURS), unless
    /// [`Self::with_force`]).
    pub fn with_retention_hours(mut self, hours: u64) -> Self {
        self.retention_hours = Some(hours);
        self
    }

    /// Allows a retention under a table's own and under [`MIN_RETENTION_HOURS`](super::MIN_RETENTION_HOURS).
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Runs as if the time were `now_millis` (ms since the Unix epoch): VACUUM's
    /// retention and the log retention count from there. Tests move time forward.
    pub fn with_clock(mut self, now_millis: i64) -> Self {
        self.now_millis = Some(now_millis);
        self
    }

    /// Visits the tables, worst first (as `health` ranks them). Ranking reads each
    /// table's snapshot and counts toward [`Self::with_max_duration`]; a table that
    /// cannot be opened is reported with its error, and the others go on.
    pub fn execute(self) -> Result<MaintainReport> {
        let started = Instant::now();
        if let Some(hours) = self.retention_hours {
            super::check_retention(hours, self.force)?;
        }
        let out_of_time = || self.max_duration.is_some_and(|d| started.elapsed() >= d);
        let mut report = MaintainReport::default();
        let mut ranked = Vec::new();
        for table in self.maintenance.tables()? {
            if out_of_time() {
                report.not_reached.push(table);
                continue;
            }
            match self.rank(&table) {
                Ok(rank) => ranked.push((rank, table)),
                Err(e) => report.tables.push(MaintainedTable {
                    table,
                    error: Some(crate::error::chain(&e)),
                    ..Default::default()
                }),
            }
        }
        ranked.sort_by(|(a, x), (b, y)| b.cmp(a).then(x.cmp(y)));
        for (rank, table) in ranked {
            let out_of_tables = self.max_tables.is_some_and(|n| report.tables.len() >= n);
            if out_of_time() || out_of_tables {
                report.not_reached.push(table);
                continue;
            }
            report.tables.push(self.table(&table, rank));
        }
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// `health`'s order: flagged tables first, then by small files.
    fn rank(&self, table: &str) -> Result<Rank> {
        let m = self.maintenance;
        let storage = m.storage()?;
        let (_, t) = m.open(&storage, table)?;
        let small = small_file_threshold(m.catalog.target_file_size());
        let files = live_files(&t, table)?;
        let n = files.len() as u64;
        let bytes: u64 = files.iter().map(|(_, s)| s).sum();
        let flagged = n > FLAG_MIN_FILES && bytes.checked_div(n).unwrap_or(0) < FLAG_MAX_AVG_BYTES;
        let small_files = files.iter().filter(|(_, s)| *s < small).count() as u64;
        Ok(Rank {
            flagged,
            small_files,
        })
    }

    /// The steps for one table; the first that fails ends its visit.
    fn table(&self, table: &str, rank: Rank) -> MaintainedTable {
        let mut done = MaintainedTable {
            table: table.to_string(),
            ..Default::default()
        };
        if let Err(e) = self.steps(table, rank, &mut done) {
            done.error = Some(crate::error::chain(&e));
        }
        done
    }

    fn steps(&self, table: &str, rank: Rank, done: &mut MaintainedTable) -> Result<()> {
        let Rank {
            flagged,
            small_files: small,
        } = rank;
        let m = self.maintenance;
        let storage = m.storage()?;
        // A staging table is a load's, in flight or left by a killed run (its batch's
        // rerun drops it): not compacted (its files are partitioned by topic).
        let staging = table.starts_with(crate::naming::STAGING_PREFIX);
        if (flagged || small > FLAG_MIN_FILES) && !staging {
            done.optimize = Some(m.optimize_table(table).execute()?);
        }
        let mut vacuum = m.vacuum_table(table).with_force(self.force);
        if let Some(hours) = self.retention_hours {
            vacuum = vacuum.with_retention_hours(hours);
        }
        if let Some(now) = self.now_millis {
            vacuum = vacuum.with_clock(now);
        }
        done.vacuum = Some(vacuum.execute()?);
        let (_, t) = m.open(&storage, table)?;
        let version = t.version().unwrap_or_default();
        let last = m.block_on(last_checkpoint_version(&t));
        let since = last.map_or(version + 1, |c| version.saturating_sub(c));
        if since > CHECKPOINT_AFTER {
            done.checkpoint = Some(m.checkpoint(table)?);
        }
        done.logs_removed = self.clean_up_logs(table)?;
        Ok(())
    }

    /// Removes the log entries before the latest checkpoint that are older than the
    /// table's log retention, under the table's lock.
    fn clean_up_logs(&self, table: &str) -> Result<usize> {
        let now = self
            .now_millis
            .unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
        self.maintenance.locked(table, |t| async move {
            use deltalake::table::config::TablePropertiesExt as _;
            let Some(checkpoint) = last_checkpoint_version(&t).await else {
                return Ok(0);
            };
            let snapshot = t.snapshot().map_err(|e| Error::delta(table, "read", e))?;
            let retention = snapshot.table_config().log_retention_duration();
            let cutoff = now - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            deltalake::checkpoints::cleanup_expired_logs_for(
                checkpoint as _,
                t.log_store().as_ref(),
                cutoff,
                None,
            )
            .await
            .map_err(|e| Error::delta(table, "clean up the log of", e))
        })
    }
}
