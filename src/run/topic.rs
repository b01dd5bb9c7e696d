//! A topic's task: flatten its staged rows, then commit each of its tables under the
//! table's lock and keep the table healthy after the commit.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::array::RecordBatch;

use super::Progress;
use super::gather::{Gather, GatheredTables, OwnTable, SlicedPlan};
use super::state::Run;
use super::write::{self, Again, PartMeta, part_writes, rows_of};
use crate::batch::now_micros;
use crate::error::{Error, Result};
use crate::flatten;
use crate::naming::TableName;
use crate::run_control::TableWrite;
use crate::stage::spill::StagingTable;
use crate::table::{self, Write};

/// Staged rows flattened in one pass: a topic staged in memory comes as one batch per
/// group of files, flattened together; read back from the staging table it comes in
/// slices of a few thousand rows, flattened a few at a time.
pub(super) const FLATTEN_ROWS: usize = 16_384;

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
    /// The run: its storage, mode and lineage.
    pub(super) run: &'a Run<'a>,
    /// When the fan-out started.
    pub(super) started: i64,
    /// Tables written so far, for the progress.
    pub(super) written: &'a AtomicUsize,
    /// The column type hints the flattened tables matched.
    pub(super) hints: &'a super::hints::HintsSeen,
    /// Topics of the batch.
    pub(super) total: usize,
    /// The tables of the batch's topics.
    pub(super) topic_tables: std::collections::BTreeSet<TableName>,
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
    fn commit(&mut self, fan: &Fanout<'_>, table: TableName, batches: Vec<RecordBatch>) {
        let write = match self.by_table.get(&table) {
            Some(w) if w.result.is_err() => return,
            Some(_) => Write::Append,
            None => Write::Replace,
        };
        let started_micros = now_micros();
        let meta = vec![PartMeta {
            topic: self.topic.to_string(),
            rows_in: self.rows_in,
            rows_planned: rows_of(&batches),
        }];
        // One commit per (topic, table): the other topics write the shared tables again.
        let again = match fan.gather {
            None => Again::Later,
            Some(_) => Again::Never,
        };
        let result = write::write_topic(fan.run, &table, self.topic, batches, write, again);
        for w in part_writes(&table, meta, result, started_micros, now_micros()) {
            self.add(w);
        }
    }

    /// Child rows of this topic for `table`, the table of another topic of the batch:
    /// refused, whichever of the two would commit first (a table is a topic's or a
    /// child table, never both).
    fn refuse_child_rows(&mut self, table: TableName, batches: &[RecordBatch]) {
        let now = now_micros();
        let error = Error::TableKind {
            table: table.to_string(),
            topic: self.topic.into(),
            child_table: false,
        };
        self.add(TableWrite {
            table,
            topic: self.topic.to_string(),
            rows_in: self.rows_in,
            rows_planned: rows_of(batches),
            started_micros: now,
            ended_micros: now,
            result: Err(error),
            added: Vec::new(),
            rescued: 0,
        });
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
    fn done(self, fan: &Fanout<'_>) -> Vec<TableWrite> {
        let topic = self.topic;
        self.by_table
            .into_values()
            .inspect(|w| {
                let done = fan.written.fetch_add(1, Ordering::Relaxed) + 1;
                fan.run.ctx.report_progress(Progress::TableWritten {
                    table: w.table.to_string(),
                    topic: topic.to_string(),
                    done,
                    topics: fan.total,
                });
            })
            .collect()
    }
}

impl Fanout<'_> {
    /// Whether `table`, one of `topic`'s tables, is the table of another topic of the
    /// batch.
    fn is_other_topics_table(&self, topic: &str, table: &TableName) -> bool {
        self.topic_tables.contains(table) && *table != TableName::for_topic(topic)
    }

    /// Flattens a topic's staged batches a run of consecutive batches at a time, up to
    /// [`FLATTEN_ROWS`] rows per run (so only one run's values are in flight), collecting
    /// each table's batches.
    fn flatten_slices(&self, topic: &str, batches: &[RecordBatch]) -> Result<SlicedPlan> {
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
            for (table, batch) in flatten::flatten_compact(
                topic,
                now,
                &self.run.lineage,
                &self.run.ctx.config.flatten,
            )?
            .tables
            {
                out.entry(table).or_default().push(batch);
            }
        }
        #[cfg(feature = "failpoints")]
        if self.run.ctx.failpoint_hit("lose_a_row") {
            crate::failpoint::lose_a_row(out.get_mut(&TableName::for_topic(topic)));
        }
        Ok(out)
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
        index: usize,
        topic: &str,
        rows_in: u64,
        rows: TopicRows<'_>,
    ) -> (Vec<TableWrite>, Vec<Vec<TableWrite>>) {
        let mut own = TopicWrites::new(topic, rows_in);
        let (deferred, gathered) = self.flatten_topic(topic, rows, &mut own);
        let Some(gather) = &self.gather else {
            return (own.done(self), Vec::new());
        };
        let own_table = match deferred.is_empty() {
            true => OwnTable::None,
            false => OwnTable::Written,
        };
        let last = gather
            .gathered
            .lock()
            .done(index, topic, rows_in, gathered, own_table);
        let write_own = move || {
            for (table, batches) in deferred {
                own.commit(self, table, batches);
            }
            own.done(self)
        };
        match last {
            None => (write_own(), Vec::new()),
            Some((tables, early)) => self.write_beside_gathered(tables, early, write_own),
        }
    }

    /// Flattens a topic's staged rows slice by slice. Without a gatherer each table is
    /// committed into `own` as it comes; with one, returns the tables this task commits
    /// itself once the gatherer has them (one slice: a gathered batch is staged whole),
    /// and the gathered ones. A slice that cannot be read or flattened fails the
    /// topic's own table and ends the topic.
    fn flatten_topic(
        &self,
        topic: &str,
        rows: TopicRows<'_>,
        own: &mut TopicWrites<'_>,
    ) -> (SlicedPlan, SlicedPlan) {
        let mut next_slice = self.slices(topic, rows);
        let mut deferred = SlicedPlan::new();
        let mut gathered = SlicedPlan::new();
        loop {
            let plan = {
                let _slot = self.gather.as_ref().map(|g| g.slots.take());
                match next_slice() {
                    None => break,
                    Some(slice) => slice.and_then(|b| {
                        let started = Instant::now();
                        let plan = self.flatten_slices(topic, &b);
                        self.run.storage.clock.add(table::Work::Flatten, started);
                        plan
                    }),
                }
            };
            let plan = match plan {
                Ok(plan) => {
                    self.hints.record(topic, &plan);
                    plan
                }
                Err(e) => {
                    own.fail(self.started, e);
                    break;
                }
            };
            for (table, batches) in plan {
                if self.is_other_topics_table(topic, &table) {
                    own.refuse_child_rows(table, &batches);
                    continue;
                }
                match &self.gather {
                    Some(g) if g.shared(topic, &table) => {
                        gathered.entry(table).or_default().extend(batches)
                    }
                    Some(_) => deferred.entry(table).or_default().extend(batches),
                    None => own.commit(self, table, batches),
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
        tables: GatheredTables,
        early: usize,
        write_own: impl FnOnce() -> Vec<TableWrite> + Send,
    ) -> (Vec<TableWrite>, Vec<Vec<TableWrite>>) {
        tracing::info!(
            ms = (now_micros() - self.started) / 1000,
            topics = self.total,
            gathered_tables = tables.len(),
            "every topic flattened"
        );
        let total = early + tables.len();
        rayon::join(write_own, || {
            write::write_gathered(self.run, tables, self.written, total)
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
                        None => match self.run.runtime().block_on(staging.topic_stream(topic)) {
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
                        match self.run.runtime().block_on(s.next()) {
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
