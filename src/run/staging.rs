//! Staging step of a run: the batch parsed once, in memory when it fits the budget,
//! spilled to the staging table in chunks when it does not, or resumed from a complete
//! staging table.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;

use super::context::Context;
use super::corrupt;
use super::state::Run;
use super::{IN_MEMORY_PER_LANDING_BYTE, MemoryRelease, Progress};
use crate::error::Result;
use crate::report::StagingMode;
use crate::run_control::TableWrite;
use crate::source::discover;
use crate::source::prefetch::{EarlyFetch, Prefetched, fetch_all};
use crate::stage::spill::{StagingSummary, StagingTable};
use crate::stage::{self, CorruptLine, IdSet};

/// The staged batch, wherever it lives.
pub(super) struct StagedBatch {
    pub(super) mode: StagingMode,
    pub(super) summary: StagingSummary,
    /// Topic → staged rows, when staged in memory.
    pub(super) memory: Option<BTreeMap<String, Vec<RecordBatch>>>,
    pub(super) files: Vec<crate::stage::FileStats>,
    pub(super) corrupt: Vec<CorruptLine>,
    /// What the report should say about staging (a budget the batch's ids exceed).
    pub(super) warnings: Vec<String>,
}

/// Bytes a landing file takes once read: a compressed file counts four times its size
/// (JSON compresses about that much).
pub(super) fn landing_size(f: &discover::SourceFile) -> u64 {
    f.bytes.saturating_mul(f.compression.expansion())
}

/// How many of `files` (at least one) make the next chunk of at most `budget` bytes of
/// landing data. Gzip files count four times their size: JSON compresses about that much.
fn next_chunk_len(files: &[discover::SourceFile], budget: u64) -> usize {
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        bytes += landing_size(f);
        if i > 0 && bytes > budget {
            return i;
        }
    }
    files.len()
}

/// Landing bytes of the next staging chunk of a batch over `budget`, when the message ids
/// kept to drop duplicates take `ids` bytes: an eighth of what the ids leave of the
/// budget (a chunk in flight holds its raw bytes, the parsed messages, their Arrow
/// staging and the staging write's buffers: four to five times its size, plus
/// allocator slack), and never less than a sixteenth of the budget. Ids of millions of
/// short messages take a real part of a small budget (~94 MiB for 2.3 M messages).
fn chunk_budget(budget: u64, ids: u64) -> u64 {
    (budget.saturating_sub(ids).max(budget / 2) / 8).max(1)
}

/// How an over-budget batch is cut into staging chunks as its ids grow, and when the
/// allocator's free pages go back: chunks of one size reuse each other's pages (handing
/// them back between alike chunks made each fault its memory in again, ~1 s of the
/// historical batch at 256 MiB); once the ids shrink the chunks by an eighth, the pages
/// of the larger ones go back.
struct Chunks {
    /// The memory budget, when the batch is over it (else one chunk).
    budget: Option<u64>,
    /// The chunk budget the pages were last handed back for.
    released_for: Option<u64>,
}

impl Chunks {
    fn new(budget: Option<u64>) -> Self {
        Chunks {
            budget,
            released_for: None,
        }
    }

    /// How many of `rest` make the next chunk, `seen` holding the ids so far; calls
    /// `release` when the chunks shrank by an eighth since the last call.
    fn next_len(
        &mut self,
        rest: &[discover::SourceFile],
        seen: &IdSet,
        release: impl Fn(),
    ) -> usize {
        let Some(budget) = self.budget else {
            return rest.len();
        };
        let chunk = chunk_budget(budget, seen.heap_bytes());
        match self.released_for {
            None => self.released_for = Some(chunk),
            Some(last) if chunk < last / 8 * 7 => {
                release();
                self.released_for = Some(chunk);
            }
            Some(_) => {}
        }
        next_chunk_len(rest, chunk)
    }

    /// The decoded bytes per piece when `file` is staged in pieces: a batch over its
    /// budget whose file alone is over twice a chunk's bytes.
    fn piece_for(&self, file: &discover::SourceFile, seen: &IdSet) -> Option<usize> {
        let chunk = chunk_budget(self.budget?, seen.heap_bytes());
        (landing_size(file) > chunk.saturating_mul(2))
            .then(|| usize::try_from(chunk).unwrap_or(usize::MAX))
    }

    /// The warning of a batch whose message ids alone take more than half the memory
    /// budget: the run goes on, over its budget, rather than fail a batch it can load.
    fn ids_warning(&self, seen: &IdSet, summary: &StagingSummary) -> Option<String> {
        let budget = self.budget?;
        let ids = seen.heap_bytes();
        if ids <= budget / 2 {
            return None;
        }
        let messages = (summary.lines).saturating_sub(summary.corrupt_lines + summary.duplicates);
        Some(format!(
            "the ids of this batch's {messages} messages, kept to drop duplicates, take {} of the {} memory budget: the run's peak exceeds the budget; give it --memory-budget {} or more",
            human_bytes(ids),
            human_bytes(budget),
            human_bytes(ids.saturating_mul(2)),
        ))
    }
}

/// `n` bytes in MiB (or KiB below one MiB), as `--memory-budget` takes them.
fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{}MiB", n.div_ceil(1 << 20))
    } else {
        format!("{}KiB", n.div_ceil(1 << 10))
    }
}

/// What the chunks of a batch staged so far add up to.
#[derive(Default)]
struct Chunked {
    /// The message ids staged, to drop duplicates.
    seen: IdSet,
    summary: StagingSummary,
    /// Topic → messages staged.
    counts: BTreeMap<String, u64>,
    corrupt: Vec<CorruptLine>,
    files: Vec<crate::stage::FileStats>,
    /// Topic → staged rows, when staged in memory.
    memory: Option<BTreeMap<String, Vec<RecordBatch>>>,
}

impl Chunked {
    /// Counts a staged chunk of `files` files in; returns its topics' rows.
    fn add(&mut self, files: usize, staging: stage::Staging) -> BTreeMap<String, Vec<RecordBatch>> {
        self.summary.files_read += files;
        self.summary.bytes_read += staging.files.iter().map(|f| f.bytes).sum::<u64>();
        self.summary.lines += staging.lines();
        self.summary.duplicates += staging.duplicates;
        for (topic, batch) in &staging.topics {
            *self.counts.entry(topic.clone()).or_default() +=
                batch.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        }
        self.corrupt.extend(staging.corrupt);
        for file in staging.files {
            match self.files.last_mut() {
                // The next piece of a file staged in pieces.
                Some(last) if last.file == file.file => last.add(&file),
                _ => self.files.push(file),
            }
        }
        staging.topics
    }
}

/// Drops a persisted staging table once every table is in; keeps it when a table
/// failed, so the rerun resumes from it instead of re-reading the landing files.
pub(super) fn finish_staging(
    ctx: &Context,
    staging_table: &StagingTable<'_>,
    failed: bool,
    warnings: &mut Vec<String>,
) {
    if failed {
        warnings.push(format!(
                "staging table `{}` kept: a table failed, a rerun resumes from it (pass --no-resume to re-read the landing files)",
                staging_table.name()
            ));
    } else if let Err(e) = ctx.runtime().block_on(staging_table.drop_table()) {
        warnings.push(format!(
            "could not drop staging table `{}`: {}",
            staging_table.name(),
            crate::error::chain(&e)
        ));
    }
}

/// Stages the batch in memory, in chunks spilled to the staging table, or resumes
/// from a complete staging table. A persisted staging table is complete only once
/// `_corrupt_records` is written (its write is returned: a resumed run does not see
/// the corrupt lines); staged in memory, the corrupt lines come back whole and are
/// written while the topics fan out.
pub(super) fn stage_batch(
    run: &Run,
    files: &[discover::SourceFile],
    staging_table: &StagingTable<'_>,
    early: Option<EarlyFetch>,
) -> Result<(StagedBatch, Vec<TableWrite>)> {
    let stager = Stager::new(run.ctx);
    if let Some(resumed) = stager.resume(staging_table)? {
        return Ok((resumed, Vec::new()));
    }
    // A leftover that is not complete (a run killed or failed while staging, maybe
    // before its first commit: data files without a log) is cleared first, whether
    // this run stages in memory or not. One listing when there is none.
    run.runtime().block_on(staging_table.drop_table())?;
    let over_budget = stager.over_budget(files);
    let persisted = (run.ctx.config.persist_staging || over_budget).then_some(staging_table);
    let mut chunks = Chunks::new(over_budget.then_some(run.ctx.config.memory_budget));
    let chunked = stager.stage_chunks(files, &mut chunks, persisted, early)?;
    complete_staging(run, chunked, &chunks, persisted)
}

/// The staged batch from its chunks; a `persisted` staging table gets the batch's
/// `_corrupt_records` written (the write returned) and is then marked complete.
fn complete_staging(
    run: &Run,
    chunked: Chunked,
    chunks: &Chunks,
    persisted: Option<&StagingTable<'_>>,
) -> Result<(StagedBatch, Vec<TableWrite>)> {
    let Chunked {
        seen,
        mut summary,
        counts,
        corrupt,
        files,
        memory,
    } = chunked;
    summary.corrupt_lines = corrupt.len() as u64;
    let warnings = chunks.ids_warning(&seen, &summary).into_iter().collect();
    drop(seen);
    if persisted.is_some() {
        // Staging's chunks and ids are freed; the topics' slices come next.
        run.ctx.release_memory(MemoryRelease::BetweenPhases);
    }
    summary.topics = counts.into_iter().collect();
    let mut writes = Vec::new();
    if let Some(staging_table) = persisted {
        writes.extend(corrupt::write_corrupt(run, &corrupt));
        run.runtime()
            .block_on(staging_table.mark_complete(&summary))?;
    }
    let staged = StagedBatch {
        mode: if persisted.is_some() {
            StagingMode::Persisted
        } else {
            StagingMode::Memory
        },
        summary,
        memory,
        files,
        warnings,
        corrupt,
    };
    Ok((staged, writes))
}

/// The staging of a run's batch: parse, chunk, spill, resume, on the parse pool.
pub(super) struct Stager<'a> {
    ctx: &'a Context,
}

impl<'a> Stager<'a> {
    /// Stages with `ctx`'s settings, pools and stores.
    pub(super) fn new(ctx: &'a Context) -> Self {
        Stager { ctx }
    }

    /// Stages `files` chunk by chunk as `chunks` cuts them, each chunk appended to the
    /// `persisted` staging table when there is one, else kept in memory.
    fn stage_chunks(
        &self,
        files: &[discover::SourceFile],
        chunks: &mut Chunks,
        persisted: Option<&StagingTable<'_>>,
        mut early: Option<EarlyFetch>,
    ) -> Result<Chunked> {
        let staged_files = AtomicUsize::new(0);
        let total_files = files.len();
        let on_file = || {
            let done = staged_files.fetch_add(1, Ordering::Relaxed) + 1;
            self.ctx.report_progress(Progress::FileStaged {
                done,
                total: total_files,
            });
        };
        let mut chunked = Chunked::default();
        let mut rest = files;
        while !rest.is_empty() {
            let len = chunks.next_len(rest, &chunked.seen, || {
                self.ctx.release_memory(MemoryRelease::BetweenPhases)
            });
            let (chunk, tail) = rest.split_at(len);
            rest = tail;
            if let (Some(staging_table), [file]) = (persisted, chunk)
                && let Some(piece) = chunks.piece_for(file, &chunked.seen)
            {
                self.stage_in_pieces(file, piece, &mut chunked, staging_table)?;
                on_file();
                continue;
            }
            let staging = self.stage_chunk(chunk, early.take(), &on_file, &mut chunked.seen)?;
            let topics = chunked.add(chunk.len(), staging);
            match persisted {
                Some(staging_table) => self.persist_chunk(staging_table, topics)?,
                None => {
                    chunked.memory = Some(topics);
                    // The files' text is freed group by group while staging builds. glibc's
                    // malloc (a library user's default) keeps those pages unless trimmed;
                    // jemalloc's arenas hand them to flattening, which needs as much again
                    // (purging them cost 40k page faults, 2 % of the CPU; BENCHMARKS.md).
                    self.ctx.release_memory(MemoryRelease::AfterStaging);
                }
            }
        }
        Ok(chunked)
    }

    /// Stages one file larger than a chunk piece by piece ([`stage::Pieces`]), each piece
    /// appended to the staging table before the next is read. A local file is streamed
    /// from disk; a file in an object store is fetched whole first (its raw bytes, often
    /// compressed, then decoded piece by piece).
    fn stage_in_pieces(
        &self,
        file: &discover::SourceFile,
        piece: usize,
        chunked: &mut Chunked,
        staging_table: &StagingTable<'_>,
    ) -> Result<()> {
        self.ctx.simulated_read_faults(file)?;
        let raw: Box<dyn std::io::Read + Send> =
            match self.ctx.landing_store(std::slice::from_ref(file))? {
                Some(store) => {
                    let bytes = self
                        .ctx
                        .runtime()
                        .block_on(crate::source::read::fetch_raw(file, store.as_ref()))?;
                    Box::new(std::io::Cursor::new(bytes))
                }
                None => Box::new(std::io::BufReader::with_capacity(
                    1 << 20,
                    std::fs::File::open(&file.path).map_err(|e| crate::Error::io(&file.path, e))?,
                )),
            };
        let mut pieces = stage::Pieces::open(file, raw, &self.ctx.config.envelope, piece)?;
        let mut staged = 0usize;
        while let Some(staging) = self
            .ctx
            .parse_pool
            .install(|| pieces.next(&mut chunked.seen))?
        {
            let topics = chunked.add(0, staging);
            self.persist_chunk(staging_table, topics)?;
            staged += 1;
        }
        tracing::debug!(file = %file.name, pieces = staged, piece_bytes = piece, "staged in pieces");
        // A stream that broke stops reading early: a local file must still have the size
        // it was listed with, as a file read whole must.
        if !file.name.contains("://")
            && let Ok(meta) = std::fs::metadata(&file.path)
            && meta.len() != file.bytes
        {
            return Err(crate::Error::FileChanged {
                path: file.path.clone(),
                before: file.bytes,
                after: meta.len(),
            });
        }
        chunked.summary.files_read += 1;
        Ok(())
    }

    /// Appends a chunk's topics to the staging table, then frees them.
    fn persist_chunk(
        &self,
        staging_table: &StagingTable<'_>,
        topics: BTreeMap<String, Vec<RecordBatch>>,
    ) -> Result<()> {
        self.ctx.runtime().block_on(
            staging_table.append(
                topics
                    .iter()
                    .flat_map(|(t, batches)| batches.iter().map(move |b| (t, b))),
            ),
        )?;
        drop(topics);
        self.ctx.failpoint("after_staging_chunk")
    }

    /// The batch as a complete staging table of an earlier run left it, when resuming is
    /// on and there is one.
    fn resume(&self, staging_table: &StagingTable<'_>) -> Result<Option<StagedBatch>> {
        if !self.ctx.config.resume {
            return Ok(None);
        }
        let Some(summary) = self.ctx.runtime().block_on(staging_table.complete())? else {
            return Ok(None);
        };
        tracing::info!(table = %staging_table.name(), "resuming from a complete staging table");
        Ok(Some(StagedBatch {
            mode: StagingMode::Resumed,
            summary,
            memory: None,
            files: Vec::new(),
            corrupt: Vec::new(),
            warnings: Vec::new(),
        }))
    }

    /// Reads and stages one chunk of files on the parse pool (`seen` carries the message
    /// ids across chunks). From object storage the chunk's files are fetched
    /// concurrently first (on a store with ~20 ms per request, two parse threads fetching
    /// one file at a time would wait far longer than they parse); a batch in one chunk
    /// may have started fetching at discovery (`early`).
    fn stage_chunk(
        &self,
        chunk: &[discover::SourceFile],
        early: Option<EarlyFetch>,
        on_file: &(dyn Fn() + Sync),
        seen: &mut crate::stage::IdSet,
    ) -> Result<stage::Staging> {
        // Fetched at discovery, the files are parsed in their order as they arrive.
        let (prefetched, order) = match &early {
            Some(fetch) => (
                Some(std::sync::Arc::clone(&fetch.files)),
                stage::FileOrder::Arrival,
            ),
            None => (self.prefetch(chunk)?, stage::FileOrder::Ranges),
        };
        let reader = |f: &discover::SourceFile| match prefetched
            .as_ref()
            .map(|p| p.take(f))
            .transpose()?
            .flatten()
        {
            Some(bytes) => {
                self.ctx.simulated_read_faults(f)?;
                crate::source::read::decode_bytes(f, bytes)
            }
            None => self.ctx.read_landing_file(f),
        };
        let staged = self.ctx.parse_pool.install(|| {
            stage::stage_with_progress(
                chunk,
                &self.ctx.config.envelope,
                on_file,
                order,
                seen,
                &reader,
            )
        });
        // A failed fetch stopped the parse; its error names the file.
        if let Some(fetch) = early {
            self.ctx.runtime().block_on(fetch.join())?;
        }
        staged
    }

    /// With an object store configured, the raw bytes of `files`, fetched with up to
    /// [`PREFETCH_CONCURRENCY`] requests in flight; `None` for the local file system.
    fn prefetch(
        &self,
        files: &[discover::SourceFile],
    ) -> Result<Option<std::sync::Arc<Prefetched>>> {
        let Some(store) = self.ctx.landing_store(files)? else {
            return Ok(None);
        };
        Ok(Some(
            self.ctx
                .runtime()
                .block_on(fetch_all(store, files.to_vec()))?,
        ))
    }

    /// From an object store, a batch staged in memory (one chunk) starts fetching its
    /// files as soon as it is discovered, while the run takes its lease and checks the
    /// catalog (several round trips that would otherwise come first).
    ///
    /// `fetched` is told when every file is in (dropped unsent when nothing is fetched).
    pub(super) fn start_prefetch(
        &self,
        files: &[discover::SourceFile],
        fetched: tokio::sync::watch::Sender<bool>,
    ) -> Option<EarlyFetch> {
        let store = self.ctx.landing_store(files).ok()??;
        if self.over_budget(files) || (self.ctx.config.resume && self.ctx.config.persist_staging) {
            return None;
        }
        Some(EarlyFetch::start(
            self.ctx.runtime(),
            store,
            files.to_vec(),
            move || {
                fetched.send_replace(true);
            },
        ))
    }

    /// Whether staging `files` in memory would pass the memory budget (then they are
    /// staged chunk by chunk into a staging table).
    fn over_budget(&self, files: &[discover::SourceFile]) -> bool {
        // Staged in memory, a batch peaks at two to three times its landing size
        // ([`IN_MEMORY_PER_LANDING_BYTE`]).
        let landing_bytes: u64 = files.iter().map(landing_size).sum();
        landing_bytes.saturating_mul(IN_MEMORY_PER_LANDING_BYTE) > self.ctx.config.memory_budget
    }

    /// Whether each topic re-reads the landing files (the benches' baseline).
    pub(super) fn reread_per_topic(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.ctx.config.reread_per_topic;
        #[cfg(not(feature = "testing"))]
        false
    }

    /// Re-stages the whole batch and keeps one topic (the baseline the benches compare
    /// staging-once against; never used otherwise).
    #[cfg(feature = "testing")]
    pub(super) fn reread_topic(
        &self,
        files: &[discover::SourceFile],
        topic: &str,
    ) -> Result<Vec<RecordBatch>> {
        // Same concurrent fetch as the staged path, so the comparison is only about
        // reading once vs once per topic.
        let prefetched = self.prefetch(files)?;
        let reader = |f: &discover::SourceFile| match prefetched.as_ref().map(|p| p.take(f)) {
            Some(Ok(Some(bytes))) => crate::source::read::decode_bytes(f, bytes),
            _ => self.ctx.read_landing_file(f),
        };
        // On a thread of its own: the topic task holds a flatten slot here, and a rayon
        // worker waiting on parallel staging takes up other topic tasks meanwhile, which
        // would wait for the slot this one holds.
        let staged = std::thread::scope(|s| {
            s.spawn(|| {
                stage::stage_with_progress(
                    files,
                    &self.ctx.config.envelope,
                    &|| {},
                    stage::FileOrder::Ranges,
                    &mut stage::IdSet::default(),
                    &reader,
                )
            })
            .join()
        });
        let mut staging = staged.map_err(|_| crate::Error::Internal {
            what: format!("re-reading the batch for topic {topic:?} panicked"),
        })??;
        staging
            .topics
            .remove(topic)
            .ok_or_else(|| crate::Error::Internal {
                what: format!("topic {topic:?} missing on re-read"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, bytes: u64, compression: discover::Compression) -> discover::SourceFile {
        discover::SourceFile {
            path: name.into(),
            name: name.to_string(),
            bytes,
            compression,
            folder: 0,
            modified: None,
            etag: None,
        }
    }

    #[test]
    fn a_chunk_takes_files_up_to_its_budget_and_at_least_one() {
        use discover::Compression::{Gzip, None as Plain};
        let files = [
            file("a.jsonl", 40, Plain),
            file("b.jsonl", 50, Plain),
            file("c.jsonl.gz", 5, Gzip),
            file("d.jsonl", 500, Plain),
        ];
        assert_eq!(next_chunk_len(&files, 100), 2, "40 + 50 fit, + 20 do not");
        assert_eq!(next_chunk_len(&files, 110), 3, "a gzip file counts 4x");
        assert_eq!(
            next_chunk_len(&files[3..], 100),
            1,
            "a larger file is its own chunk"
        );
        assert_eq!(next_chunk_len(&files, u64::MAX), 4);
    }

    #[test]
    fn free_pages_go_back_when_the_ids_shrink_the_chunks_not_between_alike_chunks() {
        use std::cell::Cell;
        let files: Vec<_> = (0..100_000)
            .map(|i| file(&format!("{i}.jsonl"), 100, discover::Compression::None))
            .collect();
        let released = Cell::new(0);
        let release = || released.set(released.get() + 1);
        let budget = 8 << 20;
        let mut chunks = Chunks::new(Some(budget));
        let mut seen = IdSet::default();
        // An eighth of the budget: 1 MiB of 100-byte files.
        assert_eq!(chunks.next_len(&files, &seen, release), (1 << 20) / 100);
        assert_eq!(chunks.next_len(&files, &seen, release), (1 << 20) / 100);
        assert_eq!(released.get(), 0, "alike chunks reuse each other's pages");
        // Ids taking a quarter of the budget: chunks of 3/4 of the size.
        let mut n = 0u64;
        while seen.heap_bytes() < budget / 4 {
            seen.insert(&format!("message-{n}"));
            n += 1;
        }
        let len = chunks.next_len(&files, &seen, release);
        assert_eq!(
            released.get(),
            1,
            "smaller chunks: the larger ones' pages go back"
        );
        assert_eq!(len as u64, (budget - seen.heap_bytes()) / 8 / 100);
        chunks.next_len(&files, &seen, release);
        assert_eq!(released.get(), 1);
        assert_eq!(chunks.ids_warning(&seen, &StagingSummary::default()), None);
        while seen.heap_bytes() <= budget / 2 {
            seen.insert(&format!("message-{n}"));
            n += 1;
        }
        let warning = chunks
            .ids_warning(&seen, &StagingSummary::default())
            .unwrap();
        assert!(warning.contains("of the 8MiB memory budget"), "{warning}");
        assert_eq!(
            Chunks::new(None).next_len(&files, &seen, release),
            files.len()
        );
        assert_eq!(
            Chunks::new(None).ids_warning(&seen, &StagingSummary::default()),
            None
        );
    }

    #[test]
    fn the_ids_shrink_the_chunks_down_to_a_sixteenth_of_the_budget() {
        assert_eq!(chunk_budget(800, 0), 100);
        assert_eq!(chunk_budget(800, 300), 62);
        assert_eq!(chunk_budget(800, 400), 50);
        assert_eq!(chunk_budget(800, 10_000), 50);
        assert_eq!(chunk_budget(4, 0), 1, "never an empty chunk");
    }
}
