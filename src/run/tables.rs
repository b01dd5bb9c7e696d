//! The tables step of a run: every staged topic written ([`super::fanout`]), once
//! every table the batch may write is one bronze writes; else none.

use std::sync::Arc;

use super::fanout;
use super::hints;
use super::staging::StagedBatch;
use super::state::Run;
use crate::batch::now_micros;
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::naming::TableName;
use crate::run_control::TableWrite;
use crate::source::discover;
use crate::stage::spill::StagingTable;

/// Writes every topic of the staged batch ([`fanout::process_topics`]), once every
/// table it may write is one bronze writes; else none ([`refused`]). A column type hint
/// for a topic that is nowhere is an error before any write ([`hints::check_topics`]);
/// the hints the flattened tables match go to `seen`.
pub(super) fn write_tables(
    run: &Run,
    staged: &mut StagedBatch,
    staging_table: &StagingTable,
    seen: &hints::HintsSeen,
    found: &discover::Discovery,
) -> Result<Vec<TableWrite>> {
    tracing::info!(
        mode = staged.mode.as_str(),
        lines = staged.summary.lines,
        corrupt = staged.summary.corrupt_lines,
        duplicates = staged.summary.duplicates,
        topics = staged.summary.topics.len(),
        "staged"
    );
    hints::check_topics(&run.ctx.config.flatten, &staged.summary.topics, || {
        run.runtime().block_on(run.storage.schema_tables())
    })?;
    if let Some(refused) = refused(run, &staged.summary) {
        return Ok(refused);
    }
    run.leases.iter().for_each(Lease::writing);
    fanout::process_topics(run, staged, staging_table, seen, found)
}

/// The batch's writes when a table it may write is one bronze will not write
/// ([`crate::table::Opener::refusals`]): each topic's fails with one error naming every such
/// table, what is in the way and the fix, and nothing is written.
fn refused(run: &Run, summary: &crate::stage::spill::StagingSummary) -> Option<Vec<TableWrite>> {
    let topics: Vec<TableName> = summary
        .topics
        .iter()
        .map(|(t, _)| TableName::for_topic(t))
        .collect();
    let hinted = hints::HintTargets::of(&run.ctx.config.flatten, &summary.topics);
    // A topic named like a child table would mix its rows with the child rows there.
    let conflict = |table: &TableName, look: &crate::table::writable::Look| {
        if look.child && topics.contains(table) {
            return Some(crate::table::writable::Refusal {
                feature: "child rows (`_parent_id`: it is the child table of arrays named like the topic)".into(),
                fix: "a table is a topic's or a child table, never both: load the topic into another schema, or map those arrays to another child table (`--child-table '<array path>=<name>'`) and move the child rows there".into(),
            });
        }
        hinted.conflict(table, look)
    };
    let hinted_tables = hinted.tables();
    let batch = crate::table::BatchTables {
        topics: &topics,
        hinted: &hinted_tables,
        corrupt: summary.corrupt_lines > 0,
    };
    let refused = run.runtime().block_on(run.storage.opener().refusals(
        batch,
        run.key(),
        run.mode,
        &conflict,
    ));
    if refused.is_empty() {
        return None;
    }
    let tables = refused
        .iter()
        .map(|(t, r)| format!("`{t}` has {}: {}", r.feature, r.fix))
        .collect::<Vec<_>>()
        .join("; ");
    tracing::error!(%tables, "the batch's tables refused before any write");
    let now = now_micros();
    let error = Arc::new(Error::Refused { tables });
    Some(
        summary
            .topics
            .iter()
            .map(|(topic, n)| TableWrite {
                table: TableName::for_topic(topic),
                topic: topic.clone(),
                rows_in: *n,
                rows_planned: 0,
                started_micros: now,
                ended_micros: now,
                result: Err(Error::Shared(Arc::clone(&error))),
                added: Vec::new(),
                rescued: 0,
            })
            .collect(),
    )
}
