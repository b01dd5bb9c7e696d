//! A commit's data files: batches written as Parquet with bronze's writer properties
//! ([`super::writer_properties`]) by delta-rs's file writer, and the commit properties
//! that record them (the writer's own metrics, the read version, the batch's `txn`).

use std::num::NonZeroU64;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::DeltaTableError;

use super::entry::{CommitNotes, with_batch_txns};
use super::files::{TOPICS_TAG, topics_of};
use super::mapping::Mapping;
use super::shape::StatsColumns;
use super::strict::READ_VERSION;
use super::{Committed, Storage, Work, writer_properties};

/// What [`write_data_files`] wrote: the add actions, what they add, and the properties
/// of the commit that adds them.
pub(super) type DataFiles = (
    Vec<deltalake::kernel::Add>,
    Committed,
    deltalake::kernel::transaction::CommitProperties,
);

/// How a table's data files are laid out: the rows' schema, the columns with statistics,
/// and the table's column mapping (physical names and field ids), if any.
pub(super) struct FileLayout<'a> {
    pub(super) schema: SchemaRef,
    pub(super) stats: StatsColumns,
    pub(super) mapping: Option<&'a Mapping>,
}

impl FileLayout<'_> {
    /// The layout of a new table's files, or of a table [`super::Opener::open_unloaded`]
    /// took: rows of `schema`, default statistics columns, no column mapping.
    pub(super) fn new_table(schema: SchemaRef) -> Self {
        FileLayout {
            schema,
            stats: StatsColumns::new_table(),
            mapping: None,
        }
    }
}

/// Writes `batches` as data files of the table behind `log_store` (`storage`'s file size
/// and compression, in `layout`); returns their add actions, what they add, and commit
/// properties that record the writer's own row count and what `notes` say (the batch's
/// `txn` among them).
pub(super) async fn write_data_files(
    storage: &Storage,
    log_store: &deltalake::logstore::LogStoreRef,
    layout: FileLayout<'_>,
    batches: &[RecordBatch],
    notes: CommitNotes<'_>,
) -> std::result::Result<DataFiles, DeltaTableError> {
    use deltalake::datafile::writer::{DeltaWriter, WriterConfig};

    let started = std::time::Instant::now();
    let FileLayout {
        schema,
        stats,
        mapping,
    } = layout;
    // A column-mapped table's files hold physical names and field ids.
    let (schema, written, stats) = super::mapping::for_files(mapping, schema, batches, stats)?;
    let (file_schema, clustering) = (std::sync::Arc::clone(&schema), stats.clustering.clone());
    let config = WriterConfig::new(
        schema,
        Vec::new(),
        Some(writer_properties(storage.compression)),
        NonZeroU64::new(storage.target_file_size),
        None,
        stats.num_indexed,
        stats.columns,
    );
    let mut writer = DeltaWriter::new(log_store.object_store(None), config);
    for b in written.iter() {
        writer.write(b).await?;
    }
    let mut adds = writer.close().await?;
    super::exact_stats::exact_decimal_bounds(&mut adds, &written)?;
    super::exact_stats::absent_columns_null(&mut adds, &file_schema, &clustering)?;
    let adds = with_topics_tag(adds, batches)?;
    // Rows of removed files written again are not the writer's new rows.
    let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum::<u64>() - notes.rewritten_rows;
    let c = Committed {
        files_added: adds.len() as u64,
        bytes_added: adds.iter().map(|a| a.size.max(0) as u64).sum(),
        rows_added: rows,
        ..Default::default()
    };
    let metrics = write_metrics(rows, adds.len(), started, notes);
    let properties = write_properties(metrics, notes);
    storage.clock.add(Work::WriteFiles, started);
    Ok((adds, c, properties))
}

/// Commit properties with `metrics` (`operationMetrics`), the read version `notes`
/// give, `isBlindAppend` for an append, and the `txn` of the batch they name.
fn write_properties(
    metrics: serde_json::Value,
    notes: CommitNotes<'_>,
) -> deltalake::kernel::transaction::CommitProperties {
    let mut metadata = vec![("operationMetrics".to_string(), metrics)];
    if let Some(v) = notes.read_version {
        metadata.push((READ_VERSION.to_string(), serde_json::json!(v)));
    }
    if notes.blind_append {
        metadata.push(("isBlindAppend".to_string(), serde_json::json!(true)));
    }
    let mut properties = super::commit_properties().with_metadata(metadata);
    if let Some(key) = notes.txn {
        properties = with_batch_txns(properties, key);
    }
    properties
}

/// `adds` tagged with the topics of `batches` ([`TOPICS_TAG`]) when they name any.
fn with_topics_tag(
    mut adds: Vec<deltalake::kernel::Add>,
    batches: &[RecordBatch],
) -> std::result::Result<Vec<deltalake::kernel::Add>, DeltaTableError> {
    if let Some(topics) = topics_of(batches).filter(|t| !t.is_empty()) {
        let tag = serde_json::to_string(&topics)?;
        for a in &mut adds {
            a.tags = Some(std::collections::HashMap::from([(
                TOPICS_TAG.to_string(),
                Some(tag.clone()),
            )]));
        }
    }
    Ok(adds)
}

/// The `operationMetrics` of a write of `rows` new rows in `files` files begun at
/// `started`, with what `notes` say it removes and writes again.
fn write_metrics(
    rows: u64,
    files: usize,
    started: std::time::Instant,
    notes: CommitNotes<'_>,
) -> serde_json::Value {
    // The metric names of deltalake's own writes, so `history` reads both alike.
    let mut metrics = serde_json::json!({
        "num_added_rows": rows,
        "num_added_files": files,
        "execution_time_ms": started.elapsed().as_millis() as u64,
    });
    if let Some((files, rows)) = notes.removed {
        metrics["num_removed_files"] = files.into();
        metrics["num_removed_rows"] = rows.into();
    }
    if notes.rewritten_rows > 0 {
        // delta-rs's name (DELETE, MERGE) for rows of removed files written again.
        metrics["num_copied_rows"] = notes.rewritten_rows.into();
    }
    metrics
}
