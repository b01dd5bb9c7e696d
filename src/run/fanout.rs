//! Fan-out: the staged topics over the fan-out pool, in waves that fit the memory
//! budget, each table committed once per batch or once per topic.

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use rayon::prelude::*;

use super::gather::{Gather, GatheredTables};
use super::staging::StagedBatch;
use super::topic::{Again, Fanout, TopicRows, part_writes, rows_of};
use super::{Ingest, MEMORY_PER_LANDING_BYTE, Progress, pool};
use crate::batch::now_micros;
use crate::config::CommitPer;
use crate::error::{Error, Result};
use crate::flatten::Lineage;
use crate::report::StagingMode;
use crate::run_control::TableWrite;
use crate::source::discover;
use crate::stage::spill::{StagingSummary, StagingTable};
use crate::table::{self, RunMode, Storage, Write};

/// Logs the fan-out's time and tables written, and returns its writes in order:
/// `_corrupt_records`' (when written beside the topics), each topic's own in topic
/// order, then the gathered tables'.
fn fanned_out_writes(
    fan: &Fanout<'_>,
    corrupt_write: Option<TableWrite>,
    results: Vec<(Vec<TableWrite>, Vec<Vec<TableWrite>>)>,
) -> Vec<TableWrite> {
    tracing::info!(
        ms = (now_micros() - fan.started) / 1000,
        tables = fan.written.load(Ordering::Relaxed),
        "written"
    );
    let mut writes: Vec<TableWrite> = corrupt_write.into_iter().collect();
    let mut gathered = Vec::new();
    for (own, tables) in results {
        writes.extend(own);
        gathered.extend(tables.into_iter().flatten());
    }
    writes.extend(gathered);
    writes
}

/// How the topics of a batch fan out ([`Ingest::waves`]).
pub(super) struct Waves {
    /// Over the memory budget: topics stream from the staging table in waves.
    pub(super) bounded: bool,
    /// One commit per (topic, table) rather than one per table.
    pub(super) per_topic: bool,
    /// Topics in flight at once.
    pub(super) wave: usize,
    /// Staged bytes a topic in flight flattens and commits at once.
    pub(super) slice_bytes: u64,
    /// The pool of an over-budget batch's waves (`None`: the fan-out pool).
    pub(super) pool: Option<rayon::ThreadPool>,
}

/// Topics processed at once when a batch is over the memory budget: a topic in flight
/// holds its staged rows and their flattened tables (about four times its landing
/// bytes); at least one, at most the fan-out pool's threads.
pub(super) fn wave_size(summary: &StagingSummary, budget: u64, threads: usize) -> usize {
    let bytes_per_message = summary.bytes_read / summary.lines.max(1);
    let largest = summary.topics.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let per_topic = (largest * bytes_per_message * 4).max(1);
    ((budget / per_topic) as usize).clamp(1, threads.max(1))
}

impl Ingest {
    /// Flattens and writes every staged topic (and `_corrupt_records`, when staged in
    /// memory) and returns the writes: in memory, every topic flattened then one commit
    /// per table; over budget, topic by topic in waves that fit the memory budget.
    pub(super) fn process_topics(
        &self,
        (storage, mode): (&Storage, RunMode),
        staged: &mut StagedBatch,
        (staging_table, hints): (&StagingTable<'_>, &super::hints::HintsSeen),
        lineage: &Lineage,
        #[cfg_attr(not(feature = "testing"), allow(unused_variables))] found: &discover::Discovery,
    ) -> Result<Vec<TableWrite>> {
        let written = AtomicUsize::new(0);
        let in_memory = staged.memory.is_some();
        let memory = staged.memory.take().map(parking_lot::Mutex::new);
        // A topic's staged rows: one batch per group of files when staged in memory,
        // the kernel scan's batches (slices of a few thousand rows) when read back from
        // the staging table.
        let topic_input = |topic: &str| -> Result<Vec<RecordBatch>> {
            #[cfg(feature = "testing")]
            if self.config.reread_per_topic {
                // The benches' baseline: every topic re-reads and re-parses the batch.
                return self.reread_topic(&found.files, topic);
            }
            // Each topic's staged rows are taken out once, so they are freed as soon as
            // the topic is flattened.
            match &memory {
                Some(m) => m.lock().remove(topic).ok_or_else(|| Error::Internal {
                    what: format!("topic {topic:?} missing from staging"),
                }),
                None => self.runtime().block_on(staging_table.read_topic(topic)),
            }
        };
        let waves = self.waves(&staged.summary, in_memory)?;
        let topics = &staged.summary.topics;
        let fan = Fanout {
            storage,
            mode,
            lineage,
            started: now_micros(),
            written: &written,
            hints,
            total: topics.len(),
            gather: (!waves.per_topic)
                .then(|| Gather::new(topics, self.parse_pool.current_num_threads())),
        };
        let rows = || {
            if waves.bounded && !self.reread_per_topic() {
                TopicRows::Streamed {
                    staging: staging_table,
                    slice_bytes: waves.slice_bytes,
                }
            } else {
                TopicRows::Whole(&topic_input)
            }
        };
        let fan_out = || self.fan_out(&fan, topics, (waves.wave, waves.pool.as_ref()), &rows);
        let (corrupt_write, results) =
            self.beside_corrupt((storage, mode), staged, lineage, fan_out);
        Ok(fanned_out_writes(&fan, corrupt_write, results))
    }

    /// Runs `fan_out`; staged in memory, `_corrupt_records` is written meanwhile (one
    /// more table, not a step before them; persisted staging wrote it already), and its
    /// write is returned beside `fan_out`'s result.
    fn beside_corrupt<R>(
        &self,
        storage_mode: (&Storage, RunMode),
        staged: &StagedBatch,
        lineage: &Lineage,
        fan_out: impl FnOnce() -> R,
    ) -> (Option<TableWrite>, R) {
        std::thread::scope(|s| {
            let corrupt = (staged.mode == StagingMode::Memory)
                .then(|| s.spawn(|| self.write_corrupt(storage_mode, &staged.corrupt, lineage)));
            let results = fan_out();
            let corrupt =
                corrupt.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
            (corrupt.flatten(), results)
        })
    }

    /// Runs every topic's task, `wave` topics at a time on `pool` (the fan-out pool when
    /// `None`; waves of alike topics reuse each other's freed memory, none is handed
    /// back in between). Per topic in topic order: its own writes, and, from the task of
    /// the topic flattened last, the gathered tables' writes.
    fn fan_out<'a>(
        &self,
        fan: &Fanout<'_>,
        topics: &[(String, u64)],
        (wave, pool): (usize, Option<&rayon::ThreadPool>),
        rows: &(dyn Fn() -> TopicRows<'a> + Sync),
    ) -> Vec<(Vec<TableWrite>, Vec<Vec<TableWrite>>)> {
        let pool = pool.unwrap_or(&self.fanout_pool);
        let mut results = Vec::with_capacity(topics.len());
        for (n, chunk) in topics.chunks(wave).enumerate() {
            results.extend(pool.install(|| {
                chunk
                    .par_iter()
                    .with_max_len(1)
                    .enumerate()
                    .map(|(i, (topic, rows_in))| {
                        self.topic_task(fan, n * wave + i, (topic, *rows_in), rows())
                    })
                    .collect::<Vec<_>>()
            }));
        }
        results
    }

    /// How the topics of a staged batch fan out. A batch staged in memory fits the
    /// budget: flatten every topic, then one commit per table. A persisted (over-budget)
    /// batch is processed topic by topic, in waves sized so that the topics in flight fit
    /// the memory budget.
    pub(super) fn waves(&self, summary: &StagingSummary, in_memory: bool) -> Result<Waves> {
        let bounded = !in_memory && !self.config.persist_staging;
        let wave = if bounded {
            wave_size(summary, self.config.memory_budget, self.fanout_threads())
        } else {
            summary.topics.len().max(1)
        };
        Ok(Waves {
            bounded,
            per_topic: self.config.commit_per == CommitPer::Topic || bounded,
            wave,
            // Staged bytes a topic in flight flattens and commits at once: a topic larger
            // than that is written in several commits (the first replaces, the others
            // append).
            slice_bytes: (self.config.memory_budget / (MEMORY_PER_LANDING_BYTE * wave as u64))
                .max(1),
            // Over budget, the waves run on a pool of `wave` threads: every thread that
            // allocates keeps its own allocator arena, and 32 of them tripled peak RSS.
            pool: if bounded {
                Some(pool(wave, "wave", self.catalog.retry_counter())?)
            } else {
                None
            },
        })
    }

    /// Writes each gathered table once, in parallel, under its lock: all its topics' parts
    /// in one commit. `total` is the number of tables the run writes, for the progress.
    pub(super) fn write_gathered(
        &self,
        storage_mode: (&Storage, RunMode),
        tables: GatheredTables,
        lineage: &Lineage,
        written: &AtomicUsize,
        total: usize,
    ) -> Vec<Vec<TableWrite>> {
        tables
            .into_par_iter()
            .with_max_len(1)
            .map(|(table, parts)| {
                let started_micros = now_micros();
                let topic_names: Vec<String> = parts.iter().map(|(t, _, _)| t.clone()).collect();
                let meta: Vec<(String, u64, u64)> = parts
                    .iter()
                    .map(|(t, rows_in, b)| (t.clone(), *rows_in, rows_of(b)))
                    .collect();
                let parts: Vec<table::Part> = parts
                    .into_iter()
                    .map(|(topic, _, batches)| table::Part {
                        evolution: self.config.flatten.evolution_for(&topic),
                        topic,
                        batches,
                    })
                    .collect();
                let result = self.write_parts(
                    storage_mode,
                    &table,
                    parts,
                    lineage,
                    (Write::Replace, Again::Never),
                );
                let done = written.fetch_add(1, Ordering::Relaxed) + 1;
                self.report_progress(Progress::TableWritten {
                    table: table.to_string(),
                    topic: topic_names.join(","),
                    done,
                    topics: total,
                });
                part_writes(&table, meta, result, started_micros, now_micros())
            })
            .collect()
    }
}
