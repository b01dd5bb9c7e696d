//! The staging table ([`Staging`]) assembled from a batch's staged files: duplicates
//! dropped across files, the files cut into groups, each group built into one record
//! batch per topic.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rayon::prelude::*;

use super::columns::{Builders, topic_sizes};
use super::ids::IdSet;
use super::staged::{CorruptLine, StagedFile};
use crate::naming;
use crate::source::discover::SourceFile;

/// Per-file counts, in file order.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FileStats {
    /// `_source_file`.
    pub file: String,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Non-blank lines.
    pub lines: u64,
    /// Messages staged (after dedup).
    pub messages: u64,
    /// Corrupt lines.
    pub corrupt: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
}

impl FileStats {
    /// Adds the counts of the next piece of the same file.
    pub fn add(&mut self, piece: &FileStats) {
        self.bytes += piece.bytes;
        self.lines += piece.lines;
        self.messages += piece.messages;
        self.corrupt += piece.corrupt;
        self.duplicates += piece.duplicates;
    }
}

/// The staging table: the batch parsed once, grouped by topic.
#[derive(Debug)]
pub struct Staging {
    /// Each topic's record batches (schema [`staging_schema`]), rows in (file, line)
    /// order across the batches: one batch per group of files staged together.
    pub topics: BTreeMap<String, Vec<RecordBatch>>,
    /// Corrupt lines in (file, line) order.
    pub corrupt: Vec<CorruptLine>,
    /// Per-file counts.
    pub files: Vec<FileStats>,
    /// Duplicate messages dropped.
    pub duplicates: u64,
}

impl Staging {
    /// Non-blank lines in the batch.
    pub fn lines(&self) -> u64 {
        self.files.iter().map(|f| f.lines).sum()
    }
    /// Messages staged.
    #[cfg(any(test, feature = "testing"))]
    pub fn messages(&self) -> u64 {
        self.topics
            .values()
            .flatten()
            .map(|b| b.num_rows() as u64)
            .sum()
    }
}

/// Schema of the staging table.
pub fn staging_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(naming::TOPIC, DataType::Utf8, false),
        Field::new(naming::ID, DataType::Utf8, false),
        Field::new(naming::SOURCE_FILE, DataType::Utf8, false),
        Field::new(naming::LINE, DataType::Int64, false),
        Field::new(naming::META, DataType::Utf8, true),
        Field::new(naming::PAYLOAD, DataType::Utf8, false),
    ]))
}

/// Dedups across files (file order, then line) and builds each topic's record batches.
///
/// Dedup keeps the first of equal keys in message order ([`IdSet::insert_all`], by
/// shard in parallel). The files are then cut
/// into groups of consecutive files, and each group is built on the current rayon pool
/// into one batch per topic (columns sized exactly up front, copied from spans of the
/// file's text while it is hot in cache); a group's files are freed as soon as it is
/// built, so the batch's text and its Arrow copy are never both whole in memory.
pub(crate) fn assemble(
    files: &[SourceFile],
    mut staged: Vec<StagedFile>,
    dedup: bool,
    seen: &mut IdSet,
) -> Staging {
    let corrupt_per_file: Vec<u64> = staged.iter().map(|f| f.corrupt.len() as u64).collect();
    let corrupt: Vec<CorruptLine> = staged
        .iter_mut()
        .flat_map(|f| std::mem::take(&mut f.corrupt))
        .collect();
    let started = std::time::Instant::now();
    let fresh = {
        let keys: Vec<Option<(u32, &[u8])>> = staged
            .iter()
            .flat_map(|sf| {
                sf.messages.iter().map(move |m| match (m.dedup_key, m.id) {
                    (Some(key), _) => Some((m.key_hash, sf.bytes(key))),
                    (None, Some(id)) if dedup => Some((m.key_hash, sf.bytes(id))),
                    _ => None,
                })
            })
            .collect();
        seen.insert_all(&keys)
    };
    let (stats, duplicates) = keep_fresh(files, &mut staged, fresh, &corrupt_per_file);
    let groups = file_groups(staged);
    let deduped = std::time::Instant::now();
    let schema = staging_schema();
    let built: Vec<Vec<(String, RecordBatch)>> = groups
        .into_par_iter()
        .with_max_len(1)
        .map(|group| build_group(files, group, &schema))
        .collect();
    tracing::debug!(
        files = files.len(),
        dedup_ms = (deduped - started).as_millis() as u64,
        build_ms = deduped.elapsed().as_millis() as u64,
        "staging assembled"
    );
    let mut topics: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for (topic, batch) in built.into_iter().flatten() {
        topics.entry(topic).or_default().push(batch);
    }
    Staging {
        topics,
        corrupt,
        files: stats,
        duplicates,
    }
}

/// Drops the messages `fresh` (one per message, in file order) marks as duplicates
/// from `staged`; each file's stats, and the duplicates dropped in all.
fn keep_fresh(
    files: &[SourceFile],
    staged: &mut [StagedFile],
    fresh: Vec<bool>,
    corrupt_per_file: &[u64],
) -> (Vec<FileStats>, u64) {
    let mut stats = Vec::with_capacity(files.len());
    let mut duplicates = 0;
    let mut fresh = fresh.into_iter();
    for (fi, (file, sf)) in files.iter().zip(staged).enumerate() {
        let before = sf.messages.len();
        sf.messages.retain(|_| fresh.next().unwrap_or(true));
        let fs = FileStats {
            file: file.name.clone(),
            bytes: sf.bytes,
            lines: sf.lines,
            messages: sf.messages.len() as u64,
            corrupt: corrupt_per_file[fi],
            duplicates: (before - sf.messages.len()) as u64,
        };
        duplicates += fs.duplicates;
        stats.push(fs);
    }
    (stats, duplicates)
}

/// `staged` cut into groups of consecutive files (with their indices) of about an
/// eighth of a thread's share of the bytes each.
fn file_groups(staged: Vec<StagedFile>) -> Vec<Vec<(usize, StagedFile)>> {
    // Groups of about an eighth of a thread's share: enough groups to keep every thread
    // busy, few enough that topics get a handful of batches, not one per file.
    let total: u64 = staged.iter().map(|f| f.bytes).sum();
    let threads = rayon::current_num_threads().max(1) as u64;
    let group_bytes = (total / (threads * 8)).clamp(1 << 20, 64 << 20);
    let mut groups: Vec<Vec<(usize, StagedFile)>> = Vec::new();
    let mut in_group = u64::MAX;
    for (fi, sf) in staged.into_iter().enumerate() {
        if in_group >= group_bytes {
            groups.push(Vec::new());
            in_group = 0;
        }
        in_group += sf.bytes.max(1);
        if let Some(g) = groups.last_mut() {
            g.push((fi, sf));
        }
    }
    groups
}

/// One batch per topic of a group of consecutive files (their kept messages, in order);
/// the files are dropped here, on the pool thread.
fn build_group(
    files: &[SourceFile],
    group: Vec<(usize, StagedFile)>,
    schema: &SchemaRef,
) -> Vec<(String, RecordBatch)> {
    let (names, local) = group_topics(&group);
    let sizes = topic_sizes(files, &group, &local, names.len());
    let mut builders: Vec<Builders> = names
        .iter()
        .zip(&sizes)
        .map(|(name, s)| Builders::with_sizes(name, s))
        .collect();
    for ((fi, sf), map) in group.iter().zip(&local) {
        let (source, key) = (&files[*fi].name, files[*fi].id_key());
        for m in &sf.messages {
            let t = map[m.topic as usize];
            builders[t].append(names[t], source, key, sf, m);
        }
    }
    names
        .iter()
        .zip(builders)
        .map(|(name, b)| (name.to_string(), b.finish(schema)))
        .collect()
}

/// The group's topics in order of first appearance, and per file, its file-local topic
/// indices mapped to the group's.
fn group_topics(group: &[(usize, StagedFile)]) -> (Vec<&str>, Vec<Vec<usize>>) {
    let mut names: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut local: Vec<Vec<usize>> = Vec::with_capacity(group.len());
    for (_, sf) in group {
        let mut map = Vec::with_capacity(sf.topics.len());
        for t in &sf.topics {
            let i = *index.entry(t.as_str()).or_insert_with(|| {
                names.push(t.as_str());
                names.len() - 1
            });
            map.push(i);
        }
        local.push(map);
    }
    (names, local)
}
