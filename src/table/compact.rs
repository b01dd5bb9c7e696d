//! OPTIMIZE without a query engine: bin-packing small files toward the target size, or
//! rewriting every file in Z-order of some columns. Files are read with the `parquet`
//! crate and written with delta-rs's file writer; the commit removes and adds with
//! `dataChange = false` and records the version it was planned on, which
//! [`super::strict::StrictCommits`] checks its removes against.
//!
//! The bin-packing plans as delta-rs's OPTIMIZE does: files in the log's order, those of
//! the target size or more left alone (and ending a bin: a bin holds neighbouring files
//! only), a bin closed when the next file would take it past the target, bins of one file
//! dropped. Z-order interleaves the bits of the first 16 bytes of each column's
//! order-preserving row encoding, as delta-rs's `zorder_key` does.
//!
//! Auto compaction plans by size tiers instead ([`Plan::Tiered`]): the small files from
//! the smallest up, each taken only while it is no larger than the files taken before it
//! together. A daily table's new files are merged with the few earlier merges of their
//! size, never with the whole table: a file is rewritten only into one at least twice its
//! size, so a row is rewritten about log2(table / new files) times over the table's life
//! instead of once per compaction, and a compaction's cost does not grow with history.

use std::sync::Arc;

use arrow::array::{ArrayRef, LargeBinaryArray, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use deltalake::kernel::{Action, LogicalFileView};
use deltalake::{DeltaTable, DeltaTableError};
use serde::Serialize;

use super::datafiles::FileLayout;
use super::planned::{Duties, LogEntry, PlannedOn};
use super::row_ids::{CopiedFile, FileIds, RowShape, copied_rows};
use super::shape::{StatsColumns, check_plain_layout, read_file};
use super::strict::READ_VERSION;
use crate::error::{Error, Result};

/// What an OPTIMIZE did.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct OptimizeReport {
    /// Table.
    pub table: String,
    /// Files before.
    pub files_before: u64,
    /// Files after.
    pub files_after: u64,
    /// Files written.
    pub files_added: u64,
    /// Files replaced.
    pub files_removed: u64,
    /// Version after (unchanged when there was nothing to do).
    pub version: u64,
    /// A liquid-clustered table's clustering columns: bronze compacted its unclustered
    /// files only and clustered nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clustered_by: Option<Vec<String>>,
}

/// Minimum file size below which a file counts as small: half the target (Databricks'
/// `minFileSize` default).
pub fn small_file_threshold(target_file_size: u64) -> u64 {
    target_file_size / 2
}

/// Which files a compaction rewrites.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Plan<'a> {
    /// Every run of neighbouring files under `target` ([`optimize`]'s bin-packing).
    BinPack,
    /// The small files by size tiers (auto compaction; see the module's doc).
    Tiered,
    /// Every file, rewritten in Z-order of these columns.
    ZOrder(&'a [String]),
}

impl<'a> Plan<'a> {
    /// The columns of a Z-order (none for the other plans).
    fn zorder(self) -> &'a [String] {
        match self {
            Plan::ZOrder(columns) => columns,
            Plan::BinPack | Plan::Tiered => &[],
        }
    }

    /// The bins (of indexes into `files`) the plan rewrites toward `target` bytes per
    /// file.
    fn bins(self, files: &[LogicalFileView], target: u64) -> Vec<Vec<usize>> {
        match self {
            Plan::BinPack => compaction_bins(files, target),
            Plan::Tiered => tiered_bins(files, target),
            Plan::ZOrder(_) => zorder_bins(files),
        }
    }
}

/// OPTIMIZE of `t` (named `name`): bin-packs toward `target` bytes per file, or Z-orders
/// by `zorder` when it names columns; one commit, none when there is nothing to do.
pub(crate) async fn optimize(
    name: &str,
    t: DeltaTable,
    target: u64,
    zorder: &[String],
    compression: super::Compression,
) -> Result<OptimizeReport> {
    let plan = if zorder.is_empty() {
        Plan::BinPack
    } else {
        Plan::ZOrder(zorder)
    };
    rewrite(name, t, target, plan, compression).await
}

/// Rewrites the files of `t` that `plan` picks toward `target` bytes per file, in one
/// commit; none when there is nothing to do.
pub(crate) async fn rewrite(
    name: &str,
    t: DeltaTable,
    target: u64,
    plan: Plan<'_>,
    compression: super::Compression,
) -> Result<OptimizeReport> {
    let zorder = plan.zorder();
    let delta = |e| Error::delta(name, "optimize", e);
    let snapshot = t.snapshot().map_err(delta)?;
    let files: Vec<LogicalFileView> = snapshot.log_data().iter().collect();
    let files_before = files.len() as u64;
    let mut report = OptimizeReport {
        table: name.to_string(),
        files_before,
        files_after: files_before,
        version: snapshot.version(),
        ..Default::default()
    };
    let schema = snapshot.snapshot().arrow_schema();
    check_zorder_columns(name, &schema, zorder)?;
    let duties = Duties::read(&t, snapshot).await.map_err(delta)?;
    if let Some(columns) = &duties.clustering {
        check_clustered(name, columns, zorder)?;
        report.clustered_by = Some(columns.clone());
    }
    let files = unclustered(files, &duties);
    let bins = plan.bins(&files, target);
    if bins.is_empty() {
        return Ok(report);
    }
    check_plain_layout(name, snapshot)?;
    // Refused before any file is written.
    super::planned::refuse_unwritable(snapshot, &[]).map_err(delta)?;
    let at = PlannedOn {
        t: &t,
        snapshot,
        duties: &duties,
    };
    let compaction = Compaction {
        name,
        at,
        schema,
        zorder,
        target,
        compression,
    };
    let started = std::time::Instant::now();
    let done = compaction.rewrite_bins(&files, bins).await?;
    let metrics = done.metrics(files_before, started);
    let (files_added, files_removed) = (done.adds.len() as u64, done.removes.len() as u64);
    report.version = compaction.commit(done, metrics).await.map_err(delta)?;
    report.files_added = files_added;
    report.files_removed = files_removed;
    report.files_after = files_before - files_removed + files_added;
    Ok(report)
}

/// `files` but those a clustering engine clustered, in a table with liquid clustering
/// (`duties`): they stay as they are, bronze does not cluster.
fn unclustered(files: Vec<LogicalFileView>, duties: &Duties) -> Vec<LogicalFileView> {
    if duties.clustering.is_none() {
        return files;
    }
    #[allow(deprecated)] // Its only way to a file's `clusteringProvider`.
    let unclustered = |f: &LogicalFileView| f.add_action().clustering_provider.is_none();
    files.into_iter().filter(unclustered).collect()
}

/// One compaction of a table, planned on a version of it: what each bin's rewrite and
/// the commit take.
struct Compaction<'a> {
    /// The table's name.
    name: &'a str,
    at: PlannedOn<'a>,
    /// The table's schema.
    schema: SchemaRef,
    /// The columns of a Z-order (none: the bins are compacted in their order).
    zorder: &'a [String],
    /// The target file size, in bytes.
    target: u64,
    compression: super::Compression,
}

impl Compaction<'_> {
    /// Rewrites each of `bins` (indexes into `files`): its files' rows read and written
    /// again toward the target size; what they removed and wrote.
    async fn rewrite_bins(
        &self,
        files: &[LogicalFileView],
        bins: Vec<Vec<usize>>,
    ) -> Result<Rewritten> {
        let name = self.name;
        let duties = self.at.duties;
        let store = self.at.t.log_store().object_store(None);
        let mut done = Rewritten::default();
        // The schema of the files written: with row tracking, each row's id and version too.
        let materialized = duties.materialized.as_ref();
        let written_schema =
            materialized.map_or_else(|| Arc::clone(&self.schema), |m| m.extended(&self.schema));
        let shape = RowShape {
            schema: &self.schema,
            mapping: duties.mapping.as_ref(),
            materialized,
        };
        for bin in bins {
            let (mut batches, removes, bytes_removed) =
                read_bin(name, &store, files, &bin, shape).await?;
            done.bytes_removed += bytes_removed;
            done.removes.extend(removes);
            done.rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            if !self.zorder.is_empty() {
                batches = zordered(&written_schema, &batches, self.zorder)
                    .map_err(|e| Error::arrow(name, e))?;
            }
            let layout = FileLayout {
                schema: Arc::clone(&written_schema),
                stats: duties.stats_columns(StatsColumns::of(self.at.snapshot), &self.schema),
                mapping: duties.mapping.as_ref(),
            };
            let written = write(self.at.t, layout, &batches, self.target, self.compression)
                .await
                .map_err(|e| Error::delta(name, "optimize", e))?;
            done.bytes_added += written.iter().map(|a| a.size.max(0) as u64).sum::<u64>();
            done.adds.extend(written);
        }
        Ok(done)
    }

    /// Commits `done`'s removes and adds on the version the compaction was planned on,
    /// with its `metrics`; the new version.
    async fn commit(
        &self,
        done: Rewritten,
        metrics: serde_json::Value,
    ) -> std::result::Result<u64, DeltaTableError> {
        let PlannedOn {
            t,
            snapshot,
            duties,
        } = self.at;
        let mut actions: Vec<Action> = done.removes.into_iter().map(Action::Remove).collect();
        actions.extend(done.adds.into_iter().map(Action::Add));
        let properties = super::commit_properties().with_metadata([
            ("operationMetrics".to_string(), metrics),
            (
                READ_VERSION.to_string(),
                serde_json::json!(snapshot.version()),
            ),
        ]);
        let operation = deltalake::protocol::DeltaOperation::Optimize {
            predicate: None,
            target_size: self.target.min(i64::MAX as u64) as i64,
        };
        super::planned::refuse_unwritable(snapshot, &actions)?;
        if duties.planned {
            let entry = LogEntry {
                properties,
                actions,
                copies: true,
                operation,
            };
            return super::planned::commit_planned(self.at, entry).await;
        }
        let finalized = deltalake::kernel::transaction::CommitBuilder::from(properties)
            .with_actions(actions)
            .build(Some(snapshot), t.log_store(), operation)
            .await?;
        Ok(finalized.version() as u64)
    }
}

/// Refuses a Z-order by a column `schema` lacks, naming it.
fn check_zorder_columns(name: &str, schema: &SchemaRef, zorder: &[String]) -> Result<()> {
    for c in zorder {
        if schema.field_with_name(c).is_err() {
            return Err(Error::delta(
                name,
                "optimize",
                DeltaTableError::Generic(format!(
                    "Z-order column `{c}` is not a column of the table"
                )),
            ));
        }
    }
    Ok(())
}

/// Refuses a Z-order of a liquid-clustered table (clustered by `columns`): its layout is
/// the clustering's, which bronze does not write.
fn check_clustered(name: &str, columns: &[String], zorder: &[String]) -> Result<()> {
    if zorder.is_empty() {
        return Ok(());
    }
    Err(Error::delta(
        name,
        "optimize",
        DeltaTableError::Generic(format!(
            "the table is liquid-clustered by {}, which Z-order would undo; run OPTIMIZE in \
             the engine that clusters it (bronze only compacts its unclustered files)",
            columns.join(", ")
        )),
    ))
}

/// What an OPTIMIZE's bins removed and wrote.
#[derive(Default)]
struct Rewritten {
    removes: Vec<deltalake::kernel::Remove>,
    adds: Vec<deltalake::kernel::Add>,
    /// Rows read (and written again).
    rows: u64,
    bytes_removed: u64,
    bytes_added: u64,
}

impl Rewritten {
    /// The commit's `operationMetrics`, by delta-rs's OPTIMIZE names (the bytes by
    /// Spark's): scalars only, since Spark reads the metrics as a map of strings in its
    /// history, change feed and stream sources, and fails on a nested object.
    fn metrics(&self, files_before: u64, started: std::time::Instant) -> serde_json::Value {
        serde_json::json!({
            "numFilesAdded": self.adds.len(),
            "numFilesRemoved": self.removes.len(),
            "numBatches": self.rows,
            "totalFilesSkipped": files_before as usize - self.removes.len(),
            "numAddedBytes": self.bytes_added,
            "numRemovedBytes": self.bytes_removed,
            "executionTimeMs": started.elapsed().as_millis() as u64,
        })
    }
}

/// The rows of a bin's files (`bin` indexes `files`, none with a deletion vector) in
/// `shape` (with their row ids after them where materialized), the files' removes, and
/// their bytes.
async fn read_bin(
    name: &str,
    store: &deltalake::logstore::ObjectStoreRef,
    files: &[LogicalFileView],
    bin: &[usize],
    shape: RowShape<'_>,
) -> Result<(Vec<RecordBatch>, Vec<deltalake::kernel::Remove>, u64)> {
    let mut batches = Vec::new();
    let mut removes = Vec::new();
    let mut bytes_removed = 0u64;
    for &i in bin {
        let f = &files[i];
        let raw = read_file(store, &f.object_store_path())
            .await
            .map_err(|e| Error::delta(name, "optimize", e))?;
        let path = f.path();
        let file = CopiedFile {
            path: path.as_ref(),
            ids: FileIds::of(f),
            deleted: &[],
        };
        let rows = copied_rows(raw, file, shape).map_err(|e| Error::arrow(name, e))?;
        batches.extend(rows);
        bytes_removed += f.size().max(0) as u64;
        removes.push(super::files::remove_of(f, false));
    }
    Ok((batches, removes, bytes_removed))
}

/// The one bin a Z-order rewrites: every file but those with deletion vectors (they
/// stay as they are); none when no file is left.
fn zorder_bins(files: &[LogicalFileView]) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..files.len())
        .filter(|&i| files[i].deletion_vector_descriptor().is_none())
        .collect();
    if all.is_empty() {
        Vec::new()
    } else {
        vec![all]
    }
}

/// The bins of file indexes a bin-packing rewrites (see the module's doc).
fn compaction_bins(files: &[LogicalFileView], target: u64) -> Vec<Vec<usize>> {
    let mut bins: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut size = 0u64;
    for (i, f) in files.iter().enumerate() {
        let bytes = f.size().max(0) as u64;
        if bytes > target || f.deletion_vector_descriptor().is_some() {
            bins.push(std::mem::take(&mut current));
            size = 0;
            continue;
        }
        if !current.is_empty() && size + bytes > target {
            bins.push(std::mem::take(&mut current));
            size = 0;
        }
        current.push(i);
        size += bytes;
    }
    bins.push(current);
    bins.retain(|b| b.len() > 1);
    bins
}

/// The one bin a tiered compaction rewrites (see the module's doc): of the files under
/// half `target` without deletion vectors, the smallest two, then each next one by size
/// while it is no larger than those taken together and they stay within `target`; in
/// the log's order. None when fewer than two files are small.
fn tiered_bins(files: &[LogicalFileView], target: u64) -> Vec<Vec<usize>> {
    let sizes: Vec<Option<u64>> = files
        .iter()
        .map(|f| {
            f.deletion_vector_descriptor()
                .is_none()
                .then(|| f.size().max(0) as u64)
        })
        .collect();
    let bin = tiers(&sizes, target);
    if bin.is_empty() {
        Vec::new()
    } else {
        vec![bin]
    }
}

/// [`tiered_bins`] on file sizes (`None`: a file that is not rewritten).
fn tiers(sizes: &[Option<u64>], target: u64) -> Vec<usize> {
    let small = small_file_threshold(target);
    let mut by_size: Vec<(u64, usize)> = sizes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.filter(|s| *s < small).map(|s| (s, i)))
        .collect();
    by_size.sort_unstable();
    let mut taken = Vec::new();
    let mut total = 0u64;
    for (size, i) in by_size {
        if taken.len() >= 2 && (size > total || total + size > target) {
            break;
        }
        taken.push(i);
        total += size;
    }
    if taken.len() < 2 {
        return Vec::new();
    }
    taken.sort_unstable();
    taken
}

/// `batches` as one batch sorted by the Z-order key of `columns` (the table's rows in
/// memory at once, with their key: delta-rs's DataFusion plan could spill its sort).
fn zordered(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    columns: &[String],
) -> std::result::Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    let all = arrow::compute::concat_batches(schema, batches)?;
    let keyed: Vec<ArrayRef> = columns
        .iter()
        .map(|c| Arc::clone(all.column(schema.index_of(c).unwrap_or_default())))
        .collect();
    let key = zorder_key(&keyed)?;
    let order = arrow::compute::sort_to_indices(&key, None, None)?;
    let sorted = all
        .columns()
        .iter()
        .map(|c| arrow::compute::take(c, &order, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(vec![RecordBatch::try_new(Arc::clone(schema), sorted)?])
}

/// Per row, the bits of the first 16 bytes of each column's order-preserving row
/// encoding (shorter encodings padded with zeros), interleaved: bit `b` of column `c`
/// is bit `b * columns + c` of the key.
pub(crate) fn zorder_key(
    columns: &[ArrayRef],
) -> std::result::Result<ArrayRef, arrow::error::ArrowError> {
    let rows = columns.first().map_or(0, |c| c.len());
    let width = columns.len() * 16;
    let mut out = vec![0u8; rows * width];
    for (pos, column) in columns.iter().enumerate() {
        let converter = RowConverter::new(vec![SortField::new(column.data_type().clone())])?;
        let encoded = converter.convert_columns(&[Arc::clone(column)])?;
        for (row, value) in encoded.iter().enumerate() {
            let bytes = value.as_ref();
            for bit in 0..128 {
                let set = bytes
                    .get(bit / 8)
                    .is_some_and(|byte| byte & (0x80 >> (bit % 8)) != 0);
                if set {
                    let at = row * width * 8 + bit * columns.len() + pos;
                    out[at / 8] |= 0x80 >> (at % 8);
                }
            }
        }
    }
    let values: Vec<&[u8]> = out.chunks(width.max(1)).collect();
    Ok(Arc::new(LargeBinaryArray::from(values)))
}

/// `batches` written as data files of `t` in `layout` toward `target` bytes each
/// (bronze's writer properties, with `compression`); their adds, `dataChange = false`.
async fn write(
    t: &DeltaTable,
    layout: FileLayout<'_>,
    batches: &[RecordBatch],
    target: u64,
    compression: super::Compression,
) -> std::result::Result<Vec<deltalake::kernel::Add>, DeltaTableError> {
    use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
    let FileLayout {
        schema,
        stats,
        mapping,
    } = layout;
    // A column-mapped table's files hold physical names and field ids.
    let (schema, batches, stats) = super::mapping::for_files(mapping, schema, batches, stats)?;
    let schema = &schema;
    let clustering = stats.clustering.clone();
    // A row group ends at the target size too (else at 1 Mi rows), so the files of a
    // table under a million rows are cut at the target as well.
    let properties = super::writer_properties(compression)
        .into_builder()
        .set_max_row_group_bytes(usize::try_from(target).ok().filter(|t| *t > 0))
        .build();
    let config = WriterConfig::new(
        Arc::clone(schema),
        Vec::new(),
        Some(properties),
        std::num::NonZeroU64::new(target),
        None,
        stats.num_indexed,
        stats.columns,
    );
    let mut writer = DeltaWriter::new(t.log_store().object_store(None), config);
    for b in batches.iter() {
        writer.write(b).await?;
    }
    let mut adds = writer.close().await?;
    super::exact_stats::exact_decimal_bounds(&mut adds, &batches)?;
    super::exact_stats::absent_columns_null(&mut adds, schema, &clustering)?;
    for a in &mut adds {
        a.data_change = false;
    }
    Ok(adds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    /// A table's life under auto compaction: a file of `day` bytes a day, a tiered
    /// compaction whenever 50 files are small; the bytes rewritten and the most small
    /// files the table held.
    fn life(days: u64, day: u64, target: u64) -> (u64, usize) {
        let mut files: Vec<Option<u64>> = Vec::new();
        let (mut rewritten, mut most) = (0, 0);
        let small = small_file_threshold(target);
        for _ in 0..days {
            files.push(Some(day));
            let small_files = files.iter().flatten().filter(|s| **s < small).count();
            most = most.max(small_files);
            if small_files < 50 {
                continue;
            }
            let bin = tiers(&files, target);
            assert!(bin.len() >= 2, "a compaction that takes nothing: {files:?}");
            let merged: u64 = bin.iter().map(|&i| files[i].unwrap()).sum();
            rewritten += merged;
            for &i in bin.iter().rev() {
                files.remove(i);
            }
            files.push(Some(merged));
        }
        (rewritten, most)
    }

    #[test]
    fn a_tiered_compaction_rewrites_a_row_a_logarithmic_number_of_times() {
        let target = 128 << 20;
        // Bytes rewritten per byte loaded: 1.0, 2.0 and 2.8, at most log2(days / 50) plus
        // one, where rewriting the whole table at every compaction costs days / 100.
        for (days, most_rewrites) in [(1_000u64, 1.5), (10_000, 2.5), (100_000, 3.5)] {
            let (rewritten, most) = life(days, 10_000, target);
            let per_byte = rewritten as f64 / (days * 10_000) as f64;
            assert!(per_byte <= most_rewrites, "{days} days: {per_byte}");
            assert!(most <= 50, "{days} days: {most} small files");
        }
        // Past half the target a merged file is no longer small and is left alone: 1.9.
        let (rewritten, _) = life(20_000, 1 << 20, target);
        assert!((rewritten as f64) / ((20_000u64 << 20) as f64) < 2.5);
    }

    #[test]
    fn a_tiered_compaction_takes_the_small_files_by_size_tiers() {
        let target = 1_000;
        // Two new files of 10 and the earlier merges of 20 and 40 (each no larger than
        // what is taken before it), but not 400: the merge of 80 would be a fifth of it.
        let sizes = [Some(400), Some(40), Some(20), Some(10), Some(10)];
        assert_eq!(tiers(&sizes, target), vec![1, 2, 3, 4]);
        // Files of half the target or more, and files with deletion vectors, stay.
        let sizes = [Some(500), Some(10), None, Some(10), Some(499)];
        assert_eq!(tiers(&sizes, target), vec![1, 3]);
        // Within the target: 300 + 300 + 300 + 300 would pass it.
        let sizes = [Some(300); 4];
        assert_eq!(tiers(&sizes, target), vec![0, 1, 2]);
        // The two smallest are taken whatever their sizes; one small file is no bin.
        assert_eq!(tiers(&[Some(1), Some(400)], target), vec![0, 1]);
        assert_eq!(tiers(&[Some(1), Some(800)], target), Vec::<usize>::new());
    }

    #[test]
    fn zorder_keys_order_rows_by_both_columns_alike() {
        // On a 2x2 grid the Z curve visits (0,0), (0,1), (1,0), (1,1) — with column 0's
        // bit first in each pair, so rows sort by x's high bit, then y's, and so on.
        let x: ArrayRef = Arc::new(Int64Array::from(vec![1, 0, 1, 0]));
        let y: ArrayRef = Arc::new(Int64Array::from(vec![1, 1, 0, 0]));
        let key = zorder_key(&[x, y]).unwrap();
        let order = arrow::compute::sort_to_indices(&key, None, None).unwrap();
        assert_eq!(order.values().to_vec(), vec![3, 1, 2, 0]);
        // One column: the key orders as the column does.
        let s: ArrayRef = Arc::new(StringArray::from(vec!["b", "a", "c"]));
        let key = zorder_key(&[s]).unwrap();
        let order = arrow::compute::sort_to_indices(&key, None, None).unwrap();
        assert_eq!(order.values().to_vec(), vec![1, 0, 2]);
    }
}
