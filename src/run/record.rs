//! The record step of a run: its outcome per table and its `_run_control` rows (one
//! per write and the row accounting's), appended to `_run_control` once, after the
//! parallel phase.

use std::collections::BTreeMap;

use super::staging::StagedBatch;
use super::state::Run;
use super::write;
use crate::lease::Lease;
use crate::naming::{RUN_CONTROL_TABLE, TableName};
use crate::report::TableOutcome;
use crate::run_control::{Invariant, TableWrite, invariant_row};
use crate::validate::{check_invariant, outcomes};

/// What a run recorded: its outcome per table, its `_run_control` rows and its row
/// accounting.
pub(super) struct Recorded {
    pub(super) tables: BTreeMap<String, crate::report::TableOutcome>,
    pub(super) run_control: Vec<crate::run_control::RunControlRow>,
    pub(super) invariant: Invariant,
}

impl Recorded {
    /// Whether a table failed or the rows do not add up.
    pub(super) fn failed(&self) -> bool {
        self.tables.values().any(|t| t.error.is_some()) || !self.invariant.ok
    }
}

/// The run's outcome per table, its `_run_control` rows (one per write and the row
/// accounting's), appended to `_run_control` once, and that accounting; the leases
/// are told once the rows are recorded.
pub(super) fn record_run(
    run: &Run,
    writes: Vec<TableWrite>,
    staged: &StagedBatch,
    store_retries: u64,
) -> Recorded {
    let key = run.key();
    let run_id = run.run_id.as_str();
    let (mut tables, mut run_control) =
        outcomes(writes, run_id, key, &run.ctx.config.storage_options);
    let invariant = check_invariant(&staged.summary, &staged.files, &run_control);
    if !invariant.ok {
        tracing::error!(check = %invariant.text, "row accounting does not add up");
    }
    run_control.push(invariant_row(
        &invariant,
        &staged.summary,
        run_id,
        key,
        run.started_micros,
        store_retries,
    ));
    // Run with `_run_control`'s lock held, on the versions its upkeep is due.
    let upkeep = |table: &TableName, c, written| {
        write::after_commit(run, table, c, written);
    };
    let appended = crate::run_control::append_rows(
        &run.ctx.catalog,
        &run.storage,
        run.mode,
        &run_control,
        key,
        upkeep,
    );
    match appended {
        Ok(()) => run.leases.iter().for_each(Lease::recorded),
        // `_run_control`'s outcome says why its rows are not recorded.
        Err(e) => {
            let error = run
                .ctx
                .config
                .storage_options
                .mask(&crate::error::chain(&e));
            let outcome = TableOutcome {
                error: Some(error),
                ..Default::default()
            };
            tables.insert(RUN_CONTROL_TABLE.to_string(), outcome);
        }
    }
    Recorded {
        tables,
        run_control,
        invariant,
    }
}
