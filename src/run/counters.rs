//! What a run counts on its catalog, stage by stage: the store client's retries,
//! commits planned again, object store calls and wall time.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::catalog::Catalog;
use crate::report::{BatchReport, Stage};

/// What a run counts on its catalog: the store client's retries, commits planned
/// again, and object store calls per stage.
pub(super) struct RunCounters {
    retries: u64,
    replans: u64,
    calls: u64,
    by_stage: BTreeMap<Stage, u64>,
    /// When the last stage ended, and each stage's wall time.
    mark: Instant,
    seconds: BTreeMap<Stage, f64>,
}

impl RunCounters {
    pub(super) fn start(catalog: &Catalog) -> RunCounters {
        catalog.new_run();
        RunCounters {
            retries: catalog.store_retries(),
            replans: catalog.commit_replans(),
            calls: catalog.store_calls(),
            by_stage: BTreeMap::new(),
            mark: Instant::now(),
            seconds: BTreeMap::new(),
        }
    }

    /// The calls and the time since the last mark are `stage`'s.
    pub(super) fn mark(&mut self, stage: Stage, catalog: &Catalog) {
        let now = catalog.store_calls();
        self.by_stage.insert(stage, now.saturating_sub(self.calls));
        self.calls = now;
        let at = Instant::now();
        self.seconds.insert(stage, (at - self.mark).as_secs_f64());
        self.mark = at;
    }

    /// Retries since the start.
    pub(super) fn retries(&self, catalog: &Catalog) -> u64 {
        catalog.store_retries().saturating_sub(self.retries)
    }

    /// Fills the report's counters (the calls since the last mark are `cleanup`'s).
    pub(super) fn finish(mut self, catalog: &Catalog, report: &mut BatchReport) {
        self.mark(Stage::Cleanup, catalog);
        report.store_retries = self.retries(catalog);
        report.commit_replans = catalog.commit_replans().saturating_sub(self.replans);
        report.store_calls = by_name(self.by_stage);
        report.stage_seconds = by_name(self.seconds);
    }
}

/// `per_stage` keyed by the stages' names, as reports carry them.
fn by_name<V>(per_stage: BTreeMap<Stage, V>) -> BTreeMap<String, V> {
    per_stage
        .into_iter()
        .map(|(stage, v)| (stage.as_str().to_string(), v))
        .collect()
}
