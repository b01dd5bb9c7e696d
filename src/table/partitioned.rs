//! The staging table's append: rows partitioned by a column, in one commit put as the
//! next version, by the one run that writes the table.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::DeltaTableError;

use super::Storage;
use super::put::put_commit;
use super::shape::StatsColumns;
use crate::error::{Error, Result};
use crate::naming::TableName;

/// Appends `batches` to `table`, partitioned by the `partition` column, in one commit
/// put as the next version (created at version 0, without table properties, when
/// missing). For a table one run writes alone (its staging table): a version taken
/// meanwhile is an error.
pub(crate) async fn append_partitioned(
    storage: &Storage,
    table: &TableName,
    batches: &[RecordBatch],
    partition: &str,
    properties: parquet::file::properties::WriterProperties,
) -> Result<()> {
    use deltalake::datafile::writer::{DeltaWriter, WriterConfig};
    use deltalake::kernel::Action;

    let delta = |e: DeltaTableError| Error::delta(table.as_str(), "write", e);
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let handle = storage.opener().create_handle(table).await?;
    let version = handle.version().map_or(0, |v| v + 1);
    let log_store = handle.log_store();
    let schema = first.schema();
    let stats = StatsColumns::new_table();
    let config = WriterConfig::new(
        Arc::clone(&schema),
        vec![partition.to_string()],
        Some(properties),
        None,
        None,
        stats.num_indexed,
        stats.columns,
    );
    let mut writer = DeltaWriter::new(log_store.object_store(None), config);
    for b in batches {
        writer.write(b).await.map_err(delta)?;
    }
    let adds = writer.close().await.map_err(delta)?;
    let mut actions = Vec::with_capacity(adds.len() + 2);
    if version == 0 {
        actions.extend(create_actions(table, &schema, partition)?);
    }
    actions.extend(adds.into_iter().map(Action::Add));
    let properties = super::commit_properties();
    if put_commit(&log_store, version, properties, actions)
        .await
        .map_err(delta)?
    {
        Ok(())
    } else {
        Err(delta(DeltaTableError::Generic(format!(
            "version {version} was written by another process meanwhile"
        ))))
    }
}

/// The protocol and metadata actions that create `table` with `schema`, partitioned by
/// the `partition` column, without table properties.
fn create_actions(
    table: &TableName,
    schema: &SchemaRef,
    partition: &str,
) -> Result<[deltalake::kernel::Action; 2]> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
    use deltalake::kernel::{Action, Protocol, StructType, new_metadata};

    let delta = |e: DeltaTableError| Error::delta(table.as_str(), "write", e);
    let kernel: StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| Error::arrow(table.as_str(), e))?;
    let metadata = new_metadata(&kernel, [partition], Vec::<(String, String)>::new())
        .map_err(|e| delta(e.into()))?;
    let protocol: Protocol = serde_json::from_value(serde_json::json!({
        "minReaderVersion": 1,
        "minWriterVersion": 2,
    }))
    .map_err(|e| delta(e.into()))?;
    Ok([Action::Protocol(protocol), Action::Metadata(metadata)])
}
