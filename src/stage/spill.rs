//! The persisted staging table `_tmp_raw_load_<batch_id>_<hash of landing paths>`.
//!
//! A batch larger than the memory budget (or any batch with `--persist-staging`) is
//! staged in chunks that are appended to this Delta table, partitioned by a short hash
//! of the topic, so each topic task reads back only its own partition. When every chunk
//! is in, a metadata commit marks the table complete and records the batch's counts; a
//! rerun that finds a complete staging table resumes from it instead of re-reading the
//! landing files. The table is dropped when the batch ends. Its name carries the batch
//! id, so two batches running at once never share one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt as _, TryStreamExt as _};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::naming::{self, TableName};
use crate::stage::staging_schema;
use crate::table::Storage;
use crate::table::scan::{Equals, stream_rows};

/// Table property marking a staging table complete.
const COMPLETE_KEY: &str = "bronze.staging.complete";
/// Table property holding the batch's counts.
const SUMMARY_KEY: &str = "bronze.staging.summary";

/// Counts of a staged batch, kept with the staging table so a resumed run can report them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct StagingSummary {
    pub(crate) files_read: usize,
    pub(crate) bytes_read: u64,
    pub(crate) lines: u64,
    pub(crate) corrupt_lines: u64,
    pub(crate) duplicates: u64,
    /// Topic → staged messages.
    pub(crate) topics: Vec<(String, u64)>,
}

/// The staging table of one batch.
pub(crate) struct StagingTable<'a> {
    storage: &'a Storage,
    table: TableName,
    /// The complete table as the topics' reads open it: loaded once, not once per topic
    /// (nothing writes it once complete).
    loaded: parking_lot::Mutex<Option<deltalake::DeltaTable>>,
}

/// The short partition value of a topic: hostile or very long topic names never reach a
/// path, and each topic task reads one partition.
fn topic_hash(topic: &str) -> String {
    naming::stable_id(&[topic.as_bytes()])[..8].to_string()
}

fn persisted_schema() -> SchemaRef {
    let mut fields: Vec<Field> = staging_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(naming::TOPIC_HASH, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

impl<'a> StagingTable<'a> {
    pub(crate) fn new(storage: &'a Storage, key: &crate::batch::BatchKey) -> Self {
        StagingTable {
            storage,
            table: TableName::staging(&key.slug()),
            loaded: parking_lot::Mutex::new(None),
        }
    }

    pub(crate) fn name(&self) -> &TableName {
        &self.table
    }

    /// `Some(summary)` when a complete staging table of this batch exists.
    pub(crate) async fn complete(&self) -> Result<Option<StagingSummary>> {
        let Some(t) = self.storage.opener().open(&self.table).await? else {
            return Ok(None);
        };
        let snapshot = t
            .snapshot()
            .map_err(|e| Error::delta(self.table.as_str(), "read", e))?;
        let config = snapshot.metadata().configuration();
        if config.get(COMPLETE_KEY).map(String::as_str) != Some("true") {
            return Ok(None);
        }
        Ok(config
            .get(SUMMARY_KEY)
            .and_then(|s| serde_json::from_str(s).ok()))
    }

    /// Appends one chunk (one staging batch per topic).
    pub(crate) async fn append(
        &self,
        topics: impl IntoIterator<Item = (&String, &RecordBatch)>,
    ) -> Result<()> {
        self.loaded.lock().take();
        let schema = persisted_schema();
        let mut batches = Vec::new();
        for (topic, batch) in topics {
            let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
            columns.push(Arc::new(StringArray::from(vec![
                topic_hash(topic);
                batch.num_rows()
            ])));
            batches.push(
                RecordBatch::try_new(Arc::clone(&schema), columns)
                    .map_err(|e| Error::arrow(self.table.as_str(), e))?,
            );
        }
        if batches.is_empty() {
            return Ok(());
        }
        // Staging lives for one batch and is dropped at the end: compressing it costs CPU
        // and buys nothing, so its files are written uncompressed.
        // Nor dictionary-encoded: payloads are unique per row, and the dictionary
        // interner held every payload of a chunk in memory (33 MB of a 95 MB heap peak,
        // valgrind massif) before falling back to plain encoding.
        let props = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_enabled(false)
            .build();
        crate::table::append_partitioned(
            self.storage,
            &self.table,
            &batches,
            naming::TOPIC_HASH,
            props,
        )
        .await
    }

    /// Marks the table complete, recording the batch's counts.
    pub(crate) async fn mark_complete(&self, summary: &StagingSummary) -> Result<()> {
        self.loaded.lock().take();
        let t = self.open_existing("complete").await?;
        let summary = serde_json::to_string(summary).unwrap_or_default();
        let props = HashMap::from([
            (COMPLETE_KEY.to_string(), "true".to_string()),
            (SUMMARY_KEY.to_string(), summary),
        ]);
        t.set_tbl_properties()
            .with_properties(props)
            .with_raise_if_not_exists(false)
            .await
            .map_err(|e| Error::delta(self.table.as_str(), "mark complete", e))?;
        Ok(())
    }

    /// The table as complete, loaded on the first call.
    async fn loaded(&self) -> Result<deltalake::DeltaTable> {
        if let Some(t) = self.loaded.lock().as_ref() {
            return Ok(t.clone());
        }
        let t = self.open_existing("read").await?;
        *self.loaded.lock() = Some(t.clone());
        Ok(t)
    }

    /// The table, read from its log; an error naming `action` when there is none.
    async fn open_existing(&self, action: &'static str) -> Result<deltalake::DeltaTable> {
        self.storage.opener().open(&self.table).await?.ok_or_else(|| {
            Error::delta(
                self.table.as_str(),
                action,
                deltalake::DeltaTableError::NotInitialized,
            )
        })
    }

    /// The staged rows of one topic, with the in-memory staging schema, as a stream of
    /// batches of a few thousand rows read one after the other (so an over-budget topic
    /// never has to be in memory at once). Deterministic order: files in the kernel's
    /// scan order, rows in file order.
    pub(crate) async fn topic_stream(
        &self,
        topic: &str,
    ) -> Result<impl futures::Stream<Item = Result<RecordBatch>> + Send + Unpin + use<'_>> {
        let t = self.loaded().await?;
        // Only the topic's partition is read; rows keep their order within a file, so
        // the read is deterministic without a sort (a sort would hold the whole topic
        // twice).
        let filters = [
            Equals::new(naming::TOPIC_HASH, &topic_hash(topic)),
            Equals::new(naming::TOPIC, topic),
        ];
        let schema = staging_schema();
        let columns: Vec<&str> = schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let stream = stream_rows(self.storage, &self.table, &t, &filters, &columns)?;
        let schema = staging_schema();
        Ok(stream.map(move |b| {
            let b = b?;
            let mut columns = Vec::with_capacity(schema.fields().len());
            for field in schema.fields() {
                let c = b
                    .column_by_name(field.name())
                    .ok_or_else(|| Error::arrow(self.table.as_str(), missing(field.name())))?;
                columns.push(
                    cast(c, field.data_type()).map_err(|e| Error::arrow(self.table.as_str(), e))?,
                );
            }
            RecordBatch::try_new(Arc::clone(&schema), columns)
                .map_err(|e| Error::arrow(self.table.as_str(), e))
        }))
    }

    /// All staged rows of one topic (see [`Self::topic_stream`]).
    pub(crate) async fn read_topic(&self, topic: &str) -> Result<Vec<RecordBatch>> {
        self.topic_stream(topic).await?.try_collect().await
    }

    /// Deletes every object of the staging table.
    pub(crate) async fn drop_table(&self) -> Result<()> {
        self.loaded.lock().take();
        // A store rooted at the table's folder: list everything under it, delete it all.
        let store = self.storage.table_store(&self.table)?;
        let locations = store.list(None).map_ok(|m| m.location).boxed();
        store
            .delete_stream(locations)
            .try_collect::<Vec<_>>()
            .await
            .map_err(|e| Error::delta(self.table.as_str(), "drop", e.into()))?;
        if let Some(dir) = self.storage.local_dir(&self.table) {
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(dir, e)),
            }
        }
        Ok(())
    }
}

fn missing(name: &str) -> arrow::error::ArrowError {
    arrow::error::ArrowError::SchemaError(format!("staging column `{name}` missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_hashes_are_short_and_stable() {
        assert_eq!(topic_hash("quote"), topic_hash("quote"));
        assert_eq!(topic_hash(&"x".repeat(5000)).len(), 8);
        assert_ne!(topic_hash("a"), topic_hash("b"));
    }
}
