//! A topic's task: flatten its staged rows, then commit each of its tables under the
//! table's lock and keep the table healthy after the commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::array::RecordBatch;

use super::gather::{Gather, GatheredTables, SlicedPlan};
use super::{Ingest, Progress};
use crate::batch::now_micros;
use crate::error::{Error, Result};
use crate::flatten::{self, Lineage};
use crate::naming::TableName;
use crate::run_control::TableWrite;
use crate::stage::spill::StagingTable;
use crate::table::{self, Committed, RunMode, Storage, Write};

/// Staged rows flattened in one pass: a topic staged in memory comes as one batch per
/// group of files, flattened together; read back from the staging table it comes in
/// slices of a few thousand rows, flattened a few at a time.
pub(super) const FLATTEN_ROWS: usize = 16_384;

pub(super) fn rows_of(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

/// One [`TableWrite`] per part of a shared commit: `meta` is `(topic, rows in, rows
/// planned)` per part, in the order the parts were given.
pub(super) fn part_writes(
    table: &TableName,
    meta: Vec<(String, u64, u64)>,
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
    /// The write of the part `(topic, rows in, rows planned)`.
    fn write(
        &self,
        (topic, rows_in, rows_planned): (String, u64, u64),
        result: Result<Committed>,
        added: Vec<String>,
        rescued: u64,
    ) -> TableWrite {
        TableWrite {
            table: self.table.clone(),
            topic,
            rows_in,
            rows_planned,
            started_micros: self.started_micros,
            ended_micros: self.ended_micros,
            result,
            added,
            rescued,
        }
    }

    /// The parts' writes of a commit that failed with `e`.
    fn failed(&self, meta: Vec<(String, u64, u64)>, e: Error) -> Vec<TableWrite> {
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
        meta: Vec<(String, u64, u64)>,
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

/// Where a topic's staged rows come from.
pub(super) enum TopicRows<'a> {
    /// All at once (staged in memory, or read whole from the staging table).
    Whole(&'a (dyn Fn(&str) -> Result<Vec<RecordBatch>> + Sync)),
    /// From the staging table as a stream, `slice_bytes` of staged rows at a time: an
    /// over-budget batch, whose memory holds one slice, never the whole topic.
    Streamed {
        staging: &'a StagingTable<'a>,
        slice_bytes: u64,
    },
}

/// What the topic tasks of one fan-out share.
pub(super) struct Fanout<'a> {
    pub(super) storage: &'a Storage,
    /// The run's mode, which its commits follow.
    pub(super) mode: RunMode,
    pub(super) lineage: &'a Lineage,
    /// When the fan-out started.
    pub(super) started: i64,
    /// Tables written so far, for the progress.
    pub(super) written: &'a AtomicUsize,
    /// The column type hints the flattened tables matched.
    pub(super) hints: &'a super::hints::HintsSeen,
    /// Topics of the batch.
    pub(super) total: usize,
    /// One commit per table: the tables several topics may feed, gathered for the last
    /// topic's task. `None`: one commit per (topic, table).
    pub(super) gather: Option<Gather>,
}

/// A topic's writes to its tables: per table, the aggregate of its commits.
struct TopicWrites<'t> {
    topic: &'t str,
    rows_in: u64,
    by_table: BTreeMap<TableName, TableWrite>,
}

/// Whether other topics write a table later in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Again {
    /// They do: the table's state after this write is kept for them
    /// ([`crate::table::Opener::keep_warm`]).
    Later,
    /// This write is the run's last to the table.
    Never,
}

impl<'t> TopicWrites<'t> {
    fn new(topic: &'t str, rows_in: u64) -> Self {
        TopicWrites {
            topic,
            rows_in,
            by_table: BTreeMap::new(),
        }
    }

    /// Commits one slice's rows of `table`: replacing this batch's rows of the topic on
    /// the table's first commit, appending after it; nothing once a commit failed.
    fn commit(
        &mut self,
        run: &Ingest,
        fan: &Fanout<'_>,
        table: TableName,
        batches: Vec<RecordBatch>,
    ) {
        let write = match self.by_table.get(&table) {
            Some(w) if w.result.is_err() => return,
            Some(_) => Write::Append,
            None => Write::Replace,
        };
        let started_micros = now_micros();
        let meta = vec![(self.topic.to_string(), self.rows_in, rows_of(&batches))];
        // One commit per (topic, table): the other topics write the shared tables again.
        let again = match fan.gather {
            None => Again::Later,
            Some(_) => Again::Never,
        };
        let result = run.write_topic(
            (fan.storage, fan.mode),
            &table,
            (self.topic, batches),
            fan.lineage,
            (write, again),
        );
        for w in part_writes(&table, meta, result, started_micros, now_micros()) {
            self.add(w);
        }
    }

    /// The topic's rows could not be read or flattened: its own table's write fails.
    fn fail(&mut self, started_micros: i64, error: Error) {
        self.add(TableWrite::failed(
            self.topic,
            self.rows_in,
            started_micros,
            error,
        ));
    }

    fn add(&mut self, w: TableWrite) {
        match self.by_table.get_mut(&w.table) {
            Some(acc) => acc.absorb(w),
            None => {
                self.by_table.insert(w.table.clone(), w);
            }
        }
    }

    /// The writes in table order, each reported as done (`total`: the batch's topics).
    fn done(self, run: &Ingest, written: &AtomicUsize, total: usize) -> Vec<TableWrite> {
        let topic = self.topic;
        self.by_table
            .into_values()
            .inspect(|w| {
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                run.report_progress(Progress::TableWritten {
                    table: w.table.to_string(),
                    topic: topic.to_string(),
                    done,
                    topics: total,
                });
            })
            .collect()
    }
}

impl Ingest {
    /// Flattens a topic's staged batches a run of consecutive batches at a time, up to
    /// [`FLATTEN_ROWS`] rows per run (so only one run's values are in flight), collecting
    /// each table's batches.
    pub(super) fn flatten_slices(
        &self,
        topic: &str,
        batches: &[RecordBatch],
        lineage: &Lineage,
    ) -> Result<SlicedPlan> {
        let mut out: SlicedPlan = BTreeMap::new();
        let mut rest = batches;
        while !rest.is_empty() {
            let mut rows = 0;
            let run = rest
                .iter()
                .take_while(|b| {
                    let first = rows == 0;
                    rows += b.num_rows();
                    first || rows <= FLATTEN_ROWS
                })
                .count();
            let (now, later) = rest.split_at(run);
            rest = later;
            for (table, batch) in
                flatten::flatten_compact(topic, now, lineage, &self.config.flatten)?.tables
            {
                out.entry(table).or_default().push(batch);
            }
        }
        #[cfg(feature = "failpoints")]
        if self.failpoint_hit("lose_a_row") {
            crate::failpoint::lose_a_row(out.get_mut(&TableName::for_topic(topic)));
        }
        Ok(out)
    }

    /// Commits one topic's rows for `table` under the table's lock (replacing the
    /// batch's rows of the topic, or appending a later slice), then runs
    /// [`Self::after_write`].
    pub(super) fn write_topic(
        &self,
        storage_mode: (&Storage, RunMode),
        table: &TableName,
        (topic, batches): (&str, Vec<RecordBatch>),
        lineage: &Lineage,
        (write, again): (Write, Again),
    ) -> Result<(Committed, Vec<table::PartOutcome>)> {
        let parts = vec![table::Part {
            topic: topic.to_string(),
            batches,
            evolution: self.config.flatten.evolution_for(topic),
        }];
        self.write_parts(storage_mode, table, parts, lineage, (write, again))
    }

    /// Commits `parts` to `table` in one commit under the table's lock (replacing the
    /// batch's rows of their topics, or appending; planned again, up to
    /// [`crate::catalog::MAX_REPLANS`] times, when another process's commit conflicts with it:
    /// [`table::is_replannable_conflict`]), then runs [`Self::after_write`].
    pub(super) fn write_parts(
        &self,
        (storage, mode): (&Storage, RunMode),
        table: &TableName,
        parts: Vec<table::Part>,
        lineage: &Lineage,
        (write, again): (Write, Again),
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
        let _guard = self.locks().lock(table);
        let written = self.catalog.replanned(table, || {
            self.runtime()
                .block_on(storage.committer(mode).replace_parts(
                    table,
                    parts.clone(),
                    &lineage.key,
                    write,
                ))
        });
        written.map(|((c, outcomes), t)| {
            if let Some(t) = t.as_ref().filter(|_| again == Again::Later) {
                storage.opener().keep_warm(table, &t.table);
            }
            (self.after_write(storage, table, c, t), outcomes)
        })
    }

    /// [`Self::after_commit`] when the write committed something to a table that had
    /// commits before (`written` is `None` when every part was refused and nothing was
    /// written, when the commit created the table, or when it appended to a table opened
    /// unloaded, whose next maintenance comes with a later commit: nothing to maintain).
    pub(super) fn after_write(
        &self,
        storage: &Storage,
        table: &TableName,
        c: Committed,
        written: Option<table::WrittenTable>,
    ) -> Committed {
        if c == Committed::default() {
            return c;
        }
        let c = match written {
            Some(t) => self.after_commit(storage, table, c, t),
            None => c,
        };
        #[cfg(feature = "failpoints")]
        if self.failpoint_hit("between_tables") && crate::failpoint::kill_action() {
            crate::failpoint::kill_self("between_tables");
        }
        c
    }

    /// Called with the table's lock held after a commit: adds missing table properties
    /// and compacts when small files piled up. Failures here are warnings in the log,
    /// never a failed load: the rows are committed.
    pub(super) fn after_commit(
        &self,
        storage: &Storage,
        table: &TableName,
        mut c: Committed,
        written: table::WrittenTable,
    ) -> Committed {
        let cfg = &self.config;
        let compact_at = cfg.auto_compact.then_some(cfg.auto_compact_min_files);
        let started = Instant::now();
        let outcome = self.runtime().block_on(crate::table::upkeep::after_commit(
            storage,
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

    /// One topic's task, the same whatever the batch's size: takes the topic's staged
    /// rows a slice at a time, flattens each slice, and commits each of its tables under
    /// the table's lock (a table's first commit replaces this batch's rows of the topic,
    /// later slices append; a crash in between leaves part of the topic, which the
    /// rerun's replace clears).
    ///
    /// With [`Fanout::gather`] (one commit per table), the tables other topics may feed
    /// are handed to the gatherer instead, and the task of the last topic flattened
    /// writes them, in parallel with its own table. Returns the topic's own writes and,
    /// from that last task, the gathered tables' writes.
    pub(super) fn topic_task(
        &self,
        fan: &Fanout<'_>,
        index: usize,
        (topic, rows_in): (&str, u64),
        rows: TopicRows<'_>,
    ) -> (Vec<TableWrite>, Vec<Vec<TableWrite>>) {
        let mut own = TopicWrites::new(topic, rows_in);
        let (deferred, gathered) = self.flatten_topic(fan, topic, rows, &mut own);
        let Some(gather) = &fan.gather else {
            return (own.done(self, fan.written, fan.total), Vec::new());
        };
        let last =
            gather
                .gathered
                .lock()
                .done(index, (topic, rows_in), gathered, !deferred.is_empty());
        let write_own = move || {
            for (table, batches) in deferred {
                own.commit(self, fan, table, batches);
            }
            own.done(self, fan.written, fan.total)
        };
        match last {
            None => (write_own(), Vec::new()),
            Some((tables, early)) => self.write_beside_gathered(fan, (tables, early), write_own),
        }
    }

    /// Flattens a topic's staged rows slice by slice. Without a gatherer each table is
    /// committed into `own` as it comes; with one, returns the tables this task commits
    /// itself once the gatherer has them (one slice: a gathered batch is staged whole),
    /// and the gathered ones. A slice that cannot be read or flattened fails the
    /// topic's own table and ends the topic.
    fn flatten_topic(
        &self,
        fan: &Fanout<'_>,
        topic: &str,
        rows: TopicRows<'_>,
        own: &mut TopicWrites<'_>,
    ) -> (SlicedPlan, SlicedPlan) {
        let mut next_slice = self.slices(topic, rows);
        let mut deferred = SlicedPlan::new();
        let mut gathered = SlicedPlan::new();
        loop {
            let plan = {
                let _slot = fan.gather.as_ref().map(|g| g.slots.take());
                match next_slice() {
                    None => break,
                    Some(slice) => slice.and_then(|b| {
                        let started = Instant::now();
                        let plan = self.flatten_slices(topic, &b, fan.lineage);
                        fan.storage.clock.add(table::Work::Flatten, started);
                        plan
                    }),
                }
            };
            let plan = match plan {
                Ok(plan) => {
                    fan.hints.record(topic, &plan);
                    plan
                }
                Err(e) => {
                    own.fail(fan.started, e);
                    break;
                }
            };
            for (table, batches) in plan {
                match &fan.gather {
                    Some(g) if g.shared(topic, &table) => {
                        gathered.entry(table).or_default().extend(batches)
                    }
                    Some(_) => deferred.entry(table).or_default().extend(batches),
                    None => own.commit(self, fan, table, batches),
                }
            }
        }
        (deferred, gathered)
    }

    /// The task of the topic flattened last: writes its own tables (`write_own`) and
    /// the gathered `tables` in parallel (`early`: tables gathered tasks wrote before,
    /// for the progress).
    fn write_beside_gathered(
        &self,
        fan: &Fanout<'_>,
        (tables, early): (GatheredTables, usize),
        write_own: impl FnOnce() -> Vec<TableWrite> + Send,
    ) -> (Vec<TableWrite>, Vec<Vec<TableWrite>>) {
        tracing::info!(
            ms = (now_micros() - fan.started) / 1000,
            topics = fan.total,
            gathered_tables = tables.len(),
            "every topic flattened"
        );
        let total = early + tables.len();
        rayon::join(write_own, || {
            self.write_gathered(
                (fan.storage, fan.mode),
                tables,
                fan.lineage,
                fan.written,
                total,
            )
        })
    }

    /// The slices of a topic's staged rows, one after the other: the whole topic at
    /// once, or slices of `slice_bytes` from the staging table's stream.
    fn slices<'a>(
        &'a self,
        topic: &'a str,
        rows: TopicRows<'a>,
    ) -> Box<dyn FnMut() -> Option<Result<Vec<RecordBatch>>> + 'a> {
        use futures::StreamExt as _;
        match rows {
            TopicRows::Whole(input) => {
                let mut once = Some(input);
                Box::new(move || once.take().map(|input| input(topic)))
            }
            TopicRows::Streamed {
                staging,
                slice_bytes,
            } => {
                let mut stream = None;
                let mut exhausted = false;
                Box::new(move || {
                    if exhausted {
                        return None;
                    }
                    let s = match &mut stream {
                        Some(s) => s,
                        None => match self.runtime().block_on(staging.topic_stream(topic)) {
                            Ok(s) => stream.insert(s),
                            Err(e) => {
                                exhausted = true;
                                return Some(Err(e));
                            }
                        },
                    };
                    let mut slice = Vec::new();
                    let mut bytes = 0u64;
                    while bytes < slice_bytes {
                        match self.runtime().block_on(s.next()) {
                            Some(Ok(b)) => {
                                bytes += b.get_array_memory_size() as u64;
                                slice.push(b);
                            }
                            Some(Err(e)) => {
                                exhausted = true;
                                return Some(Err(e));
                            }
                            None => {
                                exhausted = true;
                                break;
                            }
                        }
                    }
                    (!slice.is_empty()).then_some(Ok(slice))
                })
            }
        }
    }
}
