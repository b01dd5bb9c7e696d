//! The write step of a topic's tables: rows committed to a table under its lock
//! (replacing the batch's rows, or appending a later slice), planned again when another
//! process's commit conflicts, and the table kept healthy after the commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::array::RecordBatch;
use rayon::prelude::*;

use super::Progress;
use super::gather::GatheredTables;
use super::state::Run;
use crate::batch::now_micros;
use crate::error::{Error, Result};
use crate::flatten;
use crate::naming::TableName;
use crate::run_control::TableWrite;
use crate::table::{self, Committed, Write};

/// Whether other topics write a table later in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Again {
    /// They do: the table's state after this write is kept for them
    /// ([`crate::table::Opener::keep_warm`]).
    Later,
    /// This write is the run's last to the table.
    Never,
}

pub(super) fn rows_of(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

/// Commits one topic's rows for `table` under the table's lock (replacing the
/// batch's rows of the topic, or appending a later slice), then runs
/// [`after_write`].
pub(super) fn write_topic(
    run: &Run,
    table: &TableName,
    topic: &str,
    batches: Vec<RecordBatch>,
    write: Write,
    again: Again,
) -> Result<(Committed, Vec<table::PartOutcome>)> {
    let parts = vec![table::Part {
        topic: topic.to_string(),
        batches,
        evolution: run.ctx.config.flatten.evolution_for(topic),
    }];
    write_parts(run, table, parts, write, again)
}

/// Commits `parts` to `table` in one commit under the table's lock (replacing the
/// batch's rows of their topics, or appending; planned again, up to
/// [`crate::catalog::MAX_REPLANS`] times, when another process's commit conflicts with it:
/// [`table::is_replannable_conflict`]), then runs [`after_write`].
pub(super) fn write_parts(
    run: &Run,
    table: &TableName,
    parts: Vec<table::Part>,
    write: Write,
    again: Again,
) -> Result<(Committed, Vec<table::PartOutcome>)> {
    // The table's string columns, from the flattened rows' dictionaries: one table's
    // rows at a time, before its lock is taken.
    let parts = parts
        .into_iter()
        .map(|p| {
            let batches = p.batches.into_iter().map(flatten::plain);
            Ok(table::Part {
                batches: batches.collect::<Result<_>>()?,
                ..p
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let _guard = run.ctx.locks().lock(table);
    let written = run.ctx.catalog.replanned(table, || {
        run.runtime()
            .block_on(run.storage.committer(run.mode).replace_parts(
                table,
                parts.clone(),
                run.key(),
                write,
            ))
    });
    written.map(|((c, outcomes), t)| {
        if let Some(t) = t.as_ref().filter(|_| again == Again::Later) {
            run.storage.opener().keep_warm(table, &t.table);
        }
        (after_write(run, table, c, t), outcomes)
    })
}

/// [`after_commit`] when the write committed something to a table that had
/// commits before (`written` is `None` when every part was refused and nothing was
/// written, when the commit created the table, or when it appended to a table opened
/// unloaded, whose next maintenance comes with a later commit: nothing to maintain).
pub(super) fn after_write(
    run: &Run,
    table: &TableName,
    c: Committed,
    written: Option<table::WrittenTable>,
) -> Committed {
    if c == Committed::default() {
        return c;
    }
    let c = match written {
        Some(t) => after_commit(run, table, c, t),
        None => c,
    };
    #[cfg(feature = "failpoints")]
    if run.ctx.failpoint_hit("between_tables") && crate::failpoint::kill_action() {
        crate::failpoint::kill_self("between_tables");
    }
    c
}

/// Called with the table's lock held after a commit: adds missing table properties
/// and compacts when small files piled up. Failures here are warnings in the log,
/// never a failed load: the rows are committed.
pub(super) fn after_commit(
    run: &Run,
    table: &TableName,
    mut c: Committed,
    written: table::WrittenTable,
) -> Committed {
    let cfg = &run.ctx.config;
    let compact_at = cfg.auto_compact.then_some(cfg.auto_compact_min_files);
    let started = Instant::now();
    let outcome = run.runtime().block_on(crate::table::upkeep::after_commit(
        &run.storage,
        table,
        written,
        cfg.target_file_size,
        compact_at,
    ));
    tracing::debug!(table = %table, us = started.elapsed().as_micros() as u64, "after commit");
    match outcome {
        Ok(Some(report)) => {
            tracing::info!(table = %table, before = report.files_before, after = report.files_after, "auto compacted");
            c.compacted = Some((report.files_before, report.files_after));
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(table = %table, error = %crate::error::chain(&e), "table maintenance after commit failed")
        }
    }
    c
}

/// Writes each gathered table once, in parallel, under its lock: all its topics' parts
/// in one commit. `total` is the number of tables the run writes, for the progress.
pub(super) fn write_gathered(
    run: &Run,
    tables: GatheredTables,
    written: &AtomicUsize,
    total: usize,
) -> Vec<Vec<TableWrite>> {
    tables
        .into_par_iter()
        .with_max_len(1)
        .map(|(table, parts)| {
            let started_micros = now_micros();
            let topic_names: Vec<String> = parts.iter().map(|(t, _, _)| t.clone()).collect();
            let meta: Vec<PartMeta> = parts
                .iter()
                .map(|(t, rows_in, b)| PartMeta {
                    topic: t.clone(),
                    rows_in: *rows_in,
                    rows_planned: rows_of(b),
                })
                .collect();
            let parts: Vec<table::Part> = parts
                .into_iter()
                .map(|(topic, _, batches)| table::Part {
                    evolution: run.ctx.config.flatten.evolution_for(&topic),
                    topic,
                    batches,
                })
                .collect();
            let result = write_parts(run, &table, parts, Write::Replace, Again::Never);
            let done = written.fetch_add(1, Ordering::Relaxed) + 1;
            run.ctx.report_progress(Progress::TableWritten {
                table: table.to_string(),
                topic: topic_names.join(","),
                done,
                topics: total,
            });
            part_writes(&table, meta, result, started_micros, now_micros())
        })
        .collect()
}

/// What a part of a shared commit is: its topic and its rows.
pub(super) struct PartMeta {
    pub(super) topic: String,
    /// Rows the topic staged.
    pub(super) rows_in: u64,
    /// Rows of the part planned for the table.
    pub(super) rows_planned: u64,
}

/// One [`TableWrite`] per part of a shared commit: `meta` per part, in the order the
/// parts were given.
pub(super) fn part_writes(
    table: &TableName,
    meta: Vec<PartMeta>,
    result: Result<(Committed, Vec<table::PartOutcome>)>,
    started_micros: i64,
    ended_micros: i64,
) -> Vec<TableWrite> {
    let commit = SharedCommit {
        table,
        started_micros,
        ended_micros,
    };
    match result {
        Err(e) => commit.failed(meta, e),
        Ok((c, outcomes)) => commit.committed(meta, c, outcomes),
    }
}

/// One commit of parts of several topics (or one) to a table.
struct SharedCommit<'a> {
    table: &'a TableName,
    started_micros: i64,
    ended_micros: i64,
}

impl SharedCommit<'_> {
    /// The write of `part`.
    fn write(
        &self,
        part: PartMeta,
        result: Result<Committed>,
        added: Vec<String>,
        rescued: u64,
    ) -> TableWrite {
        TableWrite {
            table: self.table.clone(),
            topic: part.topic,
            rows_in: part.rows_in,
            rows_planned: part.rows_planned,
            started_micros: self.started_micros,
            ended_micros: self.ended_micros,
            result,
            added,
            rescued,
        }
    }

    /// The parts' writes of a commit that failed with `e`.
    fn failed(&self, meta: Vec<PartMeta>, e: Error) -> Vec<TableWrite> {
        // The only part keeps the error; several share it.
        let (mut only, shared) = if meta.len() == 1 {
            (Some(e), None)
        } else {
            (None, Some(Arc::new(e)))
        };
        meta.into_iter()
            .map(|part| {
                let err = match (only.take(), &shared) {
                    (Some(e), _) => e,
                    (None, Some(s)) => Error::Shared(Arc::clone(s)),
                    (None, None) => Error::Internal {
                        what: "a failed write without its error".into(),
                    },
                };
                self.write(part, Err(err), Vec::new(), 0)
            })
            .collect()
    }

    /// The parts' writes of commit `c`, each part's from its outcome.
    fn committed(
        &self,
        meta: Vec<PartMeta>,
        c: Committed,
        outcomes: Vec<table::PartOutcome>,
    ) -> Vec<TableWrite> {
        let total: u64 = outcomes.iter().map(|o| o.rows).sum();
        meta.into_iter()
            .zip(outcomes)
            .map(|(part, o)| match o.error {
                Some(e) => self.write(part, Err(e), Vec::new(), 0),
                None => {
                    // The commit's statistics count all parts; a part's share is its
                    // own rows when the total matches.
                    let rows_added = if c.rows_added == total {
                        o.rows
                    } else {
                        c.rows_added
                    };
                    let result = Ok(Committed { rows_added, ..c });
                    self.write(part, result, o.added, o.rescued)
                }
            })
            .collect()
    }
}
