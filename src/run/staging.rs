//! Staging step of a run: the batch parsed once, in memory when it fits the budget,
//! spilled to the staging table in chunks when it does not, or resumed from a complete
//! staging table.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;

use super::{IN_MEMORY_PER_LANDING_BYTE, Ingest, MemoryRelease, Progress};
use crate::error::Result;
use crate::flatten::Lineage;
use crate::report::StagingMode;
use crate::source::discover;
use crate::source::prefetch::{EarlyFetch, Prefetched, fetch_all};
use crate::stage::spill::{StagingSummary, StagingTable};
use crate::stage::{self, CorruptLine};
use crate::table::Storage;
use crate::validate::TableWrite;

/// The staged batch, wherever it lives.
pub(super) struct StagedBatch {
    pub(super) mode: StagingMode,
    pub(super) summary: StagingSummary,
    /// Topic → staged rows, when staged in memory.
    pub(super) memory: Option<BTreeMap<String, Vec<RecordBatch>>>,
    pub(super) files: Vec<crate::stage::FileStats>,
    pub(super) corrupt: Vec<CorruptLine>,
}

/// Bytes a landing file takes once read: gzip counts four times its size (JSON
/// compresses about that much).
pub(super) fn landing_size(f: &discover::SourceFile) -> u64 {
    match f.compression {
        discover::Compression::Gzip => f.bytes.saturating_mul(4),
        discover::Compression::None => f.bytes,
    }
}

/// Splits files into chunks of at most `budget` bytes of landing data (at least one
/// file each). Gzip files count four times their size: JSON compresses about that much.
pub(super) fn chunk_files(
    files: &[discover::SourceFile],
    budget: u64,
) -> Vec<&[discover::SourceFile]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, f) in files.iter().enumerate() {
        let size = landing_size(f);
        if i > start && bytes + size > budget {
            chunks.push(&files[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < files.len() {
        chunks.push(&files[start..]);
    }
    chunks
}

impl Ingest {
    /// Drops a persisted staging table once every table is in; keeps it when a table
    /// failed, so the rerun resumes from it instead of re-reading the landing files.
    pub(super) fn finish_staging(
        &self,
        staging_table: &StagingTable<'_>,
        failed: bool,
        warnings: &mut Vec<String>,
    ) {
        if failed {
            warnings.push(format!(
                    "staging table `{}` kept: a table failed, a rerun resumes from it (pass --no-resume to re-read the landing files)",
                    staging_table.name()
                ));
        } else if let Err(e) = self.runtime().block_on(staging_table.drop_table()) {
            warnings.push(format!(
                "could not drop staging table `{}`: {}",
                staging_table.name(),
                crate::error::chain(&e)
            ));
        }
    }

    /// Stages the batch in memory, in chunks spilled to the staging table, or resumes
    /// from a complete staging table. A persisted staging table is complete only once
    /// `_corrupt_records` is written (pushed to `writes`: a resumed run does not see the
    /// corrupt lines); staged in memory, the corrupt lines come back whole and are
    /// written while the topics fan out.
    pub(super) fn stage_batch(
        &self,
        files: &[discover::SourceFile],
        storage: &Storage,
        staging_table: &StagingTable<'_>,
        lineage: &Lineage,
        writes: &mut Vec<TableWrite>,
        mut early: Option<EarlyFetch>,
    ) -> Result<StagedBatch> {
        if let Some(resumed) = self.resume(staging_table)? {
            return Ok(resumed);
        }
        // A leftover that is not complete (a run killed or failed while staging, maybe
        // before its first commit: data files without a log) is cleared first, whether
        // this run stages in memory or not. One listing when there is none.
        self.runtime().block_on(staging_table.drop_table())?;
        let staged_files = AtomicUsize::new(0);
        let total_files = files.len();
        let on_file = || {
            let done = staged_files.fetch_add(1, Ordering::Relaxed) + 1;
            self.report_progress(Progress::FileStaged {
                done,
                total: total_files,
            });
        };
        // A chunk in flight holds its raw bytes, the parsed messages, their Arrow staging
        // and the staging write's buffers (four to five times its size, plus allocator
        // slack): an eighth of the budget per chunk.
        let over_budget = self.over_budget(files);
        let chunks = if over_budget {
            chunk_files(files, self.config.memory_budget / 8)
        } else {
            vec![files]
        };
        let persist = self.config.persist_staging || over_budget;
        let mut seen = crate::stage::IdSet::default();
        let mut summary = StagingSummary::default();
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        let mut corrupt = Vec::new();
        let mut file_stats = Vec::new();
        let mut memory = None;
        for chunk in chunks {
            let staging = self.stage_chunk(chunk, early.take(), &on_file, &mut seen)?;
            summary.files_read += chunk.len();
            summary.bytes_read += staging.files.iter().map(|f| f.bytes).sum::<u64>();
            summary.lines += staging.lines();
            summary.duplicates += staging.duplicates;
            for (topic, batch) in &staging.topics {
                *counts.entry(topic.clone()).or_default() +=
                    batch.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
            corrupt.extend(staging.corrupt);
            file_stats.extend(staging.files);
            if persist {
                self.runtime().block_on(
                    staging_table.append(
                        staging
                            .topics
                            .iter()
                            .flat_map(|(t, batches)| batches.iter().map(move |b| (t, b))),
                    ),
                )?;
                drop(staging.topics);
                self.release_memory(MemoryRelease::BetweenPhases);
                self.failpoint("after_staging_chunk")?;
            } else {
                memory = Some(staging.topics);
                // The files' text is freed group by group while staging builds. glibc's
                // malloc (a library user's default) keeps those pages unless trimmed;
                // jemalloc's arenas hand them to flattening, which needs as much again
                // (purging them cost 40k page faults, 2 % of the CPU; BENCHMARKS.md).
                self.release_memory(MemoryRelease::AfterStaging);
            }
        }
        summary.corrupt_lines = corrupt.len() as u64;
        summary.topics = counts.into_iter().collect();
        if persist {
            writes.extend(self.write_corrupt(storage, &corrupt, lineage));
            self.runtime()
                .block_on(staging_table.mark_complete(&summary))?;
        }
        Ok(StagedBatch {
            mode: if persist {
                StagingMode::Persisted
            } else {
                StagingMode::Memory
            },
            summary,
            memory,
            files: file_stats,
            corrupt,
        })
    }

    /// The batch as a complete staging table of an earlier run left it, when resuming is
    /// on and there is one.
    pub(super) fn resume(&self, staging_table: &StagingTable<'_>) -> Result<Option<StagedBatch>> {
        if !self.config.resume {
            return Ok(None);
        }
        let Some(summary) = self.runtime().block_on(staging_table.complete())? else {
            return Ok(None);
        };
        tracing::info!(table = %staging_table.name(), "resuming from a complete staging table");
        Ok(Some(StagedBatch {
            mode: StagingMode::Resumed,
            summary,
            memory: None,
            files: Vec::new(),
            corrupt: Vec::new(),
        }))
    }

    /// Reads and stages one chunk of files on the parse pool (`seen` carries the message
    /// ids across chunks). From object storage the chunk's files are fetched
    /// concurrently first (on a store with ~20 ms per request, two parse threads fetching
    /// one file at a time would wait far longer than they parse); a batch in one chunk
    /// may have started fetching at discovery (`early`).
    pub(super) fn stage_chunk(
        &self,
        chunk: &[discover::SourceFile],
        early: Option<EarlyFetch>,
        on_file: &(dyn Fn() + Sync),
        seen: &mut crate::stage::IdSet,
    ) -> Result<stage::Staging> {
        // Fetched at discovery, the files are parsed in their order as they arrive.
        let (prefetched, in_order) = match &early {
            Some(fetch) => (Some(std::sync::Arc::clone(&fetch.files)), true),
            None => (self.prefetch(chunk)?, false),
        };
        let reader = |f: &discover::SourceFile| match prefetched
            .as_ref()
            .map(|p| p.take(f))
            .transpose()?
            .flatten()
        {
            Some(bytes) => crate::source::read::decode_bytes(f, bytes),
            None => self.read_landing_file(f),
        };
        let staged = self.parse_pool.install(|| {
            stage::stage_with_progress(
                chunk,
                &self.config.envelope,
                (on_file, in_order),
                seen,
                &reader,
            )
        });
        // A failed fetch stopped the parse; its error names the file.
        if let Some(fetch) = early {
            self.runtime().block_on(fetch.join())?;
        }
        staged
    }

    /// With an object store configured, the raw bytes of `files`, fetched with up to
    /// [`PREFETCH_CONCURRENCY`] requests in flight; `None` for the local file system.
    pub(super) fn prefetch(
        &self,
        files: &[discover::SourceFile],
    ) -> Result<Option<std::sync::Arc<Prefetched>>> {
        let Some(store) = self.landing_store(files)? else {
            return Ok(None);
        };
        Ok(Some(
            self.runtime().block_on(fetch_all(store, files.to_vec()))?,
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
        let store = self.landing_store(files).ok()??;
        if self.over_budget(files) || (self.config.resume && self.config.persist_staging) {
            return None;
        }
        Some(EarlyFetch::start(
            self.runtime(),
            store,
            files.to_vec(),
            move || {
                fetched.send_replace(true);
            },
        ))
    }

    /// Whether staging `files` in memory would pass the memory budget (then they are
    /// staged chunk by chunk into a staging table).
    pub(super) fn over_budget(&self, files: &[discover::SourceFile]) -> bool {
        // Staged in memory, a batch peaks at two to three times its landing size
        // ([`IN_MEMORY_PER_LANDING_BYTE`]).
        let landing_bytes: u64 = files.iter().map(landing_size).sum();
        landing_bytes.saturating_mul(IN_MEMORY_PER_LANDING_BYTE) > self.config.memory_budget
    }

    /// Whether each topic re-reads the landing files (the benches' baseline).
    pub(super) fn reread_per_topic(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.config.reread_per_topic;
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
            _ => self.read_landing_file(f),
        };
        let mut staging = stage::stage_with_progress(
            files,
            &self.config.envelope,
            (&|| {}, false),
            &mut stage::IdSet::default(),
            &reader,
        )?;
        staging
            .topics
            .remove(topic)
            .ok_or_else(|| crate::Error::Internal {
                what: format!("topic {topic:?} missing on re-read"),
            })
    }
}
