//! Fan-out: the staged topics over the fan-out pool, in waves that fit the memory
//! budget, each table committed once per batch or once per topic.

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use rayon::prelude::*;

use super::MEMORY_PER_LANDING_BYTE;
use super::context::{Context, pool};
use super::corrupt;
use super::gather::Gather;
use super::hints::HintsSeen;
use super::staging::{StagedBatch, Stager};
use super::state::Run;
use super::topic::{Fanout, TopicRows};
use crate::batch::now_micros;
use crate::config::CommitPer;
use crate::error::{Error, Result};
use crate::report::StagingMode;
use crate::run_control::TableWrite;
use crate::source::discover;
use crate::stage::spill::{StagingSummary, StagingTable};

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

/// How the topics of a batch fan out ([`waves`]).
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

/// Flattens and writes every staged topic (and `_corrupt_records`, when staged in
/// memory) and returns the writes: in memory, every topic flattened then one commit
/// per table; over budget, topic by topic in waves that fit the memory budget.
pub(super) fn process_topics(
    run: &Run,
    staged: &mut StagedBatch,
    staging_table: &StagingTable<'_>,
    hints: &HintsSeen,
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
        if run.ctx.config.reread_per_topic {
            // The benches' baseline: every topic re-reads and re-parses the batch.
            return Stager::new(run.ctx).reread_topic(&found.files, topic);
        }
        // Each topic's staged rows are taken out once, so they are freed as soon as
        // the topic is flattened.
        match &memory {
            Some(m) => m.lock().remove(topic).ok_or_else(|| Error::Internal {
                what: format!("topic {topic:?} missing from staging"),
            }),
            None => run.runtime().block_on(staging_table.read_topic(topic)),
        }
    };
    let waves = waves(run.ctx, &staged.summary, in_memory)?;
    let topics = &staged.summary.topics;
    let fan = Fanout {
        run,
        started: now_micros(),
        written: &written,
        hints,
        total: topics.len(),
        topic_tables: topics
            .iter()
            .map(|(t, _)| crate::naming::TableName::for_topic(t))
            .collect(),
        gather: (!waves.per_topic)
            .then(|| Gather::new(topics, run.ctx.parse_pool.current_num_threads())),
    };
    let rows = || {
        if waves.bounded && !Stager::new(run.ctx).reread_per_topic() {
            TopicRows::Streamed {
                staging: staging_table,
                slice_bytes: waves.slice_bytes,
            }
        } else {
            TopicRows::Whole(&topic_input)
        }
    };
    let fan_out = || fan_out(&fan, topics, &waves, &rows);
    let (corrupt_write, results) = beside_corrupt(run, staged, fan_out);
    Ok(fanned_out_writes(&fan, corrupt_write, results))
}

/// Runs `fan_out`; staged in memory, `_corrupt_records` is written meanwhile (one
/// more table, not a step before them; persisted staging wrote it already), and its
/// write is returned beside `fan_out`'s result.
fn beside_corrupt<R>(
    run: &Run,
    staged: &StagedBatch,
    fan_out: impl FnOnce() -> R,
) -> (Option<TableWrite>, R) {
    std::thread::scope(|s| {
        let corrupt = (staged.mode == StagingMode::Memory)
            .then(|| s.spawn(|| corrupt::write_corrupt(run, &staged.corrupt)));
        let results = fan_out();
        let corrupt = corrupt.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (corrupt.flatten(), results)
    })
}

/// Runs every topic's task, `wave` topics at a time on `pool` (the fan-out pool when
/// `None`; waves of alike topics reuse each other's freed memory, none is handed
/// back in between). Per topic in topic order: its own writes, and, from the task of
/// the topic flattened last, the gathered tables' writes.
fn fan_out<'a>(
    fan: &Fanout<'_>,
    topics: &[(String, u64)],
    waves: &Waves,
    rows: &(dyn Fn() -> TopicRows<'a> + Sync),
) -> Vec<(Vec<TableWrite>, Vec<Vec<TableWrite>>)> {
    let pool = waves.pool.as_ref().unwrap_or(&fan.run.ctx.fanout_pool);
    let wave = waves.wave;
    let mut results = Vec::with_capacity(topics.len());
    for (n, chunk) in topics.chunks(wave).enumerate() {
        results.extend(pool.install(|| {
            chunk
                .par_iter()
                .with_max_len(1)
                .enumerate()
                .map(|(i, (topic, rows_in))| fan.topic_task(n * wave + i, topic, *rows_in, rows()))
                .collect::<Vec<_>>()
        }));
    }
    results
}

/// How the topics of a staged batch fan out. A batch staged in memory fits the
/// budget: flatten every topic, then one commit per table. A persisted (over-budget)
/// batch is processed topic by topic, in waves sized so that the topics in flight fit
/// the memory budget.
fn waves(ctx: &Context, summary: &StagingSummary, in_memory: bool) -> Result<Waves> {
    let bounded = !in_memory && !ctx.config.persist_staging;
    let wave = if bounded {
        wave_size(summary, ctx.config.memory_budget, ctx.fanout_threads())
    } else {
        summary.topics.len().max(1)
    };
    Ok(Waves {
        bounded,
        per_topic: ctx.config.commit_per == CommitPer::Topic || bounded,
        wave,
        // Staged bytes a topic in flight flattens and commits at once: a topic larger
        // than that is written in several commits (the first replaces, the others
        // append).
        slice_bytes: (ctx.config.memory_budget / (MEMORY_PER_LANDING_BYTE * wave as u64)).max(1),
        // Over budget, the waves run on a pool of `wave` threads: every thread that
        // allocates keeps its own allocator arena, and 32 of them tripled peak RSS.
        pool: if bounded {
            Some(pool(wave, "wave", ctx.catalog.retry_counter())?)
        } else {
            None
        },
    })
}
