//! One value of every result type the CLI prints with `--json`, as JSON: what the Python
//! package's dataclasses (`bronze/_records.py`) are checked against, key for key.
//!
//! Each value has every nested record present once (a list of one, a map of one, an
//! option set), so the keys of the nested types show too. Built with struct literals
//! where a type has no `Default`, so a field added to one of them does not compile until
//! it is given here.

use std::collections::{BTreeMap, HashMap};

use crate::batch::Folder;
use crate::maintenance::{
    CheckpointReport, HistoryEntry, MaintainReport, MaintainedTable, OptimizeReport, TableHealth,
    VacuumReport,
};
use crate::report::{BatchReport, TableOutcome};
use crate::run::{BacklogOutcome, BatchStatus, EntityStatus, Failure, InProgress, PendingBatch};
use crate::run_control::RunControlRow;
use crate::stage::{CorruptLine, FileStats};

/// Each result type by the name of its Python dataclass, with one value of it as JSON.
pub fn result_shapes() -> Vec<(&'static str, serde_json::Value)> {
    let report = batch_report();
    let outcome = backlog_outcome(&report);
    let in_progress = in_progress();
    let failure = failure();
    let entity = entity_status(&in_progress, &failure);
    let maintained = maintained_table();
    let maintain = MaintainReport {
        tables: vec![maintained.clone()],
        ..MaintainReport::default()
    };
    vec![
        ("Folder", json(&folder())),
        ("TableOutcome", json(&TableOutcome::default())),
        ("FileStats", json(&file_stats())),
        ("CorruptLine", json(&corrupt_line())),
        ("RunControlRow", json(&RunControlRow::default())),
        ("Report", json(&report)),
        ("Batch", json(&pending_batch())),
        ("LandingChange", json(&crate::LandingChange::default())),
        ("Changed", json(&entity.changed[0])),
        ("Unregistered", json(&entity.unregistered[0])),
        ("Outcome", json(&outcome)),
        ("InProgress", json(&in_progress)),
        ("Failure", json(&failure)),
        ("EntityStatus", json(&entity)),
        ("TableHealth", json(&TableHealth::default())),
        ("HistoryEntry", json(&history_entry())),
        ("OptimizeResult", json(&OptimizeReport::default())),
        ("VacuumResult", json(&VacuumReport::default())),
        ("CheckpointResult", json(&CheckpointReport::default())),
        ("MaintainedTable", json(&maintained)),
        ("MaintainReport", json(&maintain)),
    ]
}

fn backlog_outcome(report: &BatchReport) -> BacklogOutcome {
    BacklogOutcome {
        batch: pending_batch(),
        status: BatchStatus::Loaded,
        reason: Some(String::new()),
        report: Some(report.clone()),
    }
}

fn in_progress() -> InProgress {
    InProgress {
        batch_id: String::new(),
        run_id: String::new(),
        host: String::new(),
        pid: 0,
        age_seconds: 0.0,
        renewed_seconds_ago: Some(0.0),
        stale: false,
    }
}

fn failure() -> Failure {
    Failure {
        batch_id: String::new(),
        reason: String::new(),
    }
}

fn entity_status(in_progress: &InProgress, failure: &Failure) -> EntityStatus {
    EntityStatus {
        in_progress: vec![in_progress.clone()],
        oldest_pending: Some(String::new()),
        last_failure: Some(failure.clone()),
        last_loaded_micros: Some(0),
        changed: vec![crate::Changed {
            batch_id: String::new(),
            change: crate::LandingChange::default(),
        }],
        unregistered: vec![crate::metastore::pending::Unregistered {
            database: String::new(),
            table: String::new(),
            landing_path: String::new(),
            reason: String::new(),
            since_micros: 0,
            version: 0,
        }],
        ..EntityStatus::default()
    }
}

fn maintained_table() -> MaintainedTable {
    MaintainedTable {
        optimize: Some(OptimizeReport::default()),
        vacuum: Some(VacuumReport::default()),
        checkpoint: Some(0),
        error: Some(String::new()),
        ..MaintainedTable::default()
    }
}

fn json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    // Plain data with string keys: serializing it cannot fail.
    serde_json::to_value(value).unwrap_or_default()
}

fn batch_report() -> BatchReport {
    BatchReport {
        folders: vec![folder()],
        tables: BTreeMap::from([(String::new(), TableOutcome::default())]),
        files: vec![file_stats()],
        corrupt: vec![corrupt_line()],
        run_control: vec![RunControlRow::default()],
        peak_rss_bytes: Some(0),
        ..BatchReport::default()
    }
}

fn folder() -> Folder {
    Folder {
        path: Default::default(),
        landing_path: String::new(),
        files: 0,
    }
}

fn file_stats() -> FileStats {
    FileStats {
        file: String::new(),
        bytes: 0,
        lines: 0,
        messages: 0,
        corrupt: 0,
        duplicates: 0,
    }
}

fn corrupt_line() -> CorruptLine {
    CorruptLine {
        source_file: String::new(),
        line: 0,
        raw: Vec::new(),
        reason: String::new(),
    }
}

fn pending_batch() -> PendingBatch {
    PendingBatch {
        folder: Default::default(),
        landing_path: String::new(),
        batch_id: String::new(),
        late: Some(crate::LandingChange::default()),
    }
}

fn history_entry() -> HistoryEntry {
    HistoryEntry {
        version: 0,
        timestamp_millis: None,
        operation: None,
        parameters: HashMap::new(),
        metrics: serde_json::Value::Null,
        timestamp: None,
        action: String::new(),
        predicate: None,
        rows_added: None,
        rows_removed: None,
        files_added: None,
        files_removed: None,
        duration_ms: None,
    }
}
