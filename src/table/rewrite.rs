//! Commits that read data files back, without a query engine: the replace of a batch's
//! rows in files that hold other rows too (a file written before a compaction mixed
//! batches or topics), the delete of a batch, and appends that add columns (schema
//! merge). Files that may hold the batch's rows (by their `_batch_id` statistics) are
//! read with the `parquet` crate; those that do are removed and their other rows written
//! again beside the new ones, in one commit with the new schema.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::kernel::{Action, MetadataExt as _};
use deltalake::{DeltaTable, DeltaTableError};

use super::datafiles::{DataFiles, FileLayout, write_data_files};
use super::entry::{CommitNotes, commit_on};
use super::files::BatchRows;
use super::files::Folders;
use super::mapping::Mapping;
use super::planned::{Duties, LogEntry, PlannedOn};
use super::row_ids::{CopiedFile, FileIds, Materialized, RowShape, copied_rows};
use super::shape::{
    StatsColumns, check_plain_layout, conform, merged_schema, plain_type, read_file,
};
use super::stats::{Pending, WrittenTable};
use super::strict::READ_VERSION;
use super::{Committed, Storage, Work, arrow_schema};
use crate::batch::BatchKey;
use crate::error::{Error, Result};
use crate::naming::TableName;

/// Whether a table may take a new variant column: its protocol has `variantType` (or
/// its preview), which bronze never adds to an existing table itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variants {
    Taken,
    Refused,
}

impl Variants {
    /// Whether the table of `snapshot` takes variant columns.
    pub(super) fn of(snapshot: &deltalake::table::state::DeltaTableState) -> Self {
        use buoyant_kernel::table_features::TableFeature;
        let taken = snapshot.protocol().writer_features().is_some_and(|f| {
            f.contains(&TableFeature::VariantType) || f.contains(&TableFeature::VariantTypePreview)
        });
        match taken {
            true => Variants::Taken,
            false => Variants::Refused,
        }
    }
}

/// `current` widened by the columns of `batches` it lacks; a new column of a type bronze
/// does not add to an existing table ([`plain_type`]; a variant column only to a table
/// with the feature) is refused by name.
fn widened_schema(
    current: &SchemaRef,
    batches: &[RecordBatch],
    variants: Variants,
) -> std::result::Result<SchemaRef, DeltaTableError> {
    let schema = merged_schema(current, batches);
    let refused = schema
        .fields()
        .iter()
        .skip(current.fields().len())
        .find(|f| {
            let variant = crate::column_types::is_variant(f.data_type());
            !(plain_type(f.data_type()) || variant && variants == Variants::Taken)
        });
    match refused {
        Some(f) if crate::column_types::is_variant(f.data_type()) => {
            Err(DeltaTableError::Generic(format!(
                "column `{}` would be a variant, but the table's protocol has no `variantType` feature, and bronze never upgrades a table's protocol as a side effect of a load: enable it first (Spark: ALTER TABLE <table> SET TBLPROPERTIES ('delta.feature.variantType' = 'supported')) and load again, or load the topic into a new table (another --schema); its existing columns stay as they are",
                f.name()
            )))
        }
        Some(f) => Err(DeltaTableError::Generic(format!(
            "column `{}` has type {}, which bronze does not add to an existing table",
            f.name(),
            f.data_type()
        ))),
        None => Ok(schema),
    }
}

/// The commit's metrics when it only removes files (a batch deleted, no rows written).
fn delete_properties(
    removed_files: u64,
    removed_rows: u64,
    read_version: u64,
) -> deltalake::kernel::transaction::CommitProperties {
    super::commit_properties().with_metadata([
        (
            "operationMetrics".to_string(),
            serde_json::json!({
                "num_added_rows": 0,
                "num_added_files": 0,
                "num_removed_files": removed_files,
                "num_removed_rows": removed_rows,
            }),
        ),
        (READ_VERSION.to_string(), serde_json::json!(read_version)),
    ])
}

/// The operation a rewrite records: DELETE of the rows' predicate when no rows are
/// written, an overwrite with it when some are, an append when no rows are replaced.
fn operation_of(
    predicate: Option<String>,
    nothing_written: bool,
) -> deltalake::protocol::DeltaOperation {
    use deltalake::protocol::{DeltaOperation, SaveMode};
    match (predicate, nothing_written) {
        (Some(p), true) => DeltaOperation::Delete { predicate: Some(p) },
        (Some(p), false) => DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: None,
            predicate: Some(p),
        },
        (None, _) => DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        },
    }
}

/// `batches`, in order, each in `schema` ([`conform`]).
fn conform_all(
    batches: &[RecordBatch],
    schema: &SchemaRef,
) -> std::result::Result<Vec<RecordBatch>, arrow::error::ArrowError> {
    let mut out: Vec<RecordBatch> = Vec::with_capacity(batches.len());
    for b in batches {
        out.push(conform(b, schema)?);
    }
    Ok(out)
}

/// The metadata action that gives the table of `snapshot` (named `name`, with Arrow
/// schema `current`) `schema`, the current columns with the new ones after them, and
/// that schema. The table's own columns are kept exactly as its log has them (their
/// metadata's JSON types too); under column mapping each new column gets the next id
/// and a physical name, and `delta.columnMapping.maxColumnId` follows.
fn schema_metadata(
    name: &str,
    snapshot: &deltalake::table::state::DeltaTableState,
    schema: &SchemaRef,
    current: &SchemaRef,
) -> Result<(Action, deltalake::kernel::StructType)> {
    let config = snapshot.snapshot().table_configuration();
    let mode = config.column_mapping_mode();
    let max_id = super::mapping::max_column_id(
        snapshot.metadata().configuration(),
        config.logical_schema().as_ref(),
    );
    let new = &schema.fields()[current.fields().len()..];
    let (kernel, max) =
        super::mapping::with_new_columns(config.logical_schema().as_ref(), new, mode, max_id)
            .map_err(|e| Error::delta(name, "write", e))?;
    let mut metadata = snapshot
        .metadata()
        .clone()
        .with_schema(&kernel)
        .map_err(|e| Error::delta(name, "write", e.into()))?;
    if let Some(max) = max {
        metadata = metadata
            .add_config_key(super::mapping::max_column_id_key(), max.to_string())
            .map_err(|e| Error::delta(name, "write", e.into()))?;
    }
    Ok((Action::Metadata(metadata), kernel))
}

/// What a rewrite's read of the files holding the rows it replaces found.
#[derive(Default)]
struct Split {
    /// The files' removes.
    removes: Vec<deltalake::kernel::Remove>,
    /// Their other rows, written again.
    kept: Vec<RecordBatch>,
    /// How many rows it deletes.
    matched: u64,
    /// Those rows, when asked for (a change data file).
    deleted: Vec<RecordBatch>,
}

/// A table as a rewrite reads it: its handle, its snapshot, its column mapping.
#[derive(Clone, Copy)]
struct TableAt<'a> {
    t: &'a DeltaTable,
    snapshot: &'a deltalake::table::state::DeltaTableState,
    mapping: Option<&'a Mapping>,
}

/// A rewrite's actions: the new schema's `metadata` (when it changed), the removes, then
/// the adds.
fn commit_actions(
    metadata: Option<Action>,
    removes: Vec<deltalake::kernel::Remove>,
    adds: Vec<deltalake::kernel::Add>,
) -> Vec<Action> {
    let mut actions: Vec<Action> = Vec::with_capacity(1 + removes.len() + adds.len());
    actions.extend(metadata);
    actions.extend(removes.into_iter().map(Action::Remove));
    actions.extend(adds.into_iter().map(Action::Add));
    actions
}

/// What [`Rewriter::rewrite`] replaces: the rows `rows` selects, or nothing (an append).
#[derive(Clone, Copy)]
pub(super) struct Rewrite<'a> {
    /// The rows to replace (`None`: an append that only merges schemas).
    pub(super) rows: Option<BatchRows<'a>>,
    /// The batch whose `txn` the commit records (`None`: none), the new rows' batch.
    pub(super) txn: Option<&'a BatchKey>,
}

/// Replaces rows of a [`Storage`]'s tables in files that hold others too, reading those
/// files back.
#[derive(Clone, Copy)]
pub(crate) struct Rewriter<'a> {
    storage: &'a Storage,
}

impl<'a> Rewriter<'a> {
    pub(super) fn new(storage: &'a Storage) -> Self {
        Rewriter { storage }
    }

    /// Deletes the rows of `key` ([`BatchRows::of`]), if the table exists. Returns the
    /// version (unchanged when no file held them).
    pub(crate) async fn delete_batch(
        &self,
        table: &TableName,
        key: &BatchKey,
    ) -> Result<Option<u64>> {
        let Some(t) = self.storage.opener().open(table).await? else {
            return Ok(None);
        };
        let rows = BatchRows::of(key, Folders::of(arrow_schema(table, &t)?.as_ref()));
        let what = Rewrite {
            rows: Some(rows),
            txn: None,
        };
        let (c, _) = self.rewrite(table, &t, &[], what).await?;
        Ok(Some(c.version))
    }

    /// One commit on `t` that replaces the rows `what` selects with `batches` (an empty
    /// `batches` deletes them): the files whose `_batch_id` statistics may hold such
    /// rows are read, those that do are removed, and their other rows are written again
    /// beside `batches`; columns of `batches` the table lacks are added to its schema in
    /// the same commit. Committed as a `WRITE` (overwrite with the rows' SQL as its
    /// predicate, or append), with the read version [`super::strict::StrictCommits`]
    /// checks the removes against.
    pub(super) async fn rewrite(
        &self,
        table: &TableName,
        t: &DeltaTable,
        batches: &[RecordBatch],
        what: Rewrite<'_>,
    ) -> Result<(Committed, WrittenTable)> {
        let name = table.as_str();
        let delta = |e: DeltaTableError| Error::delta(name, "write", e);
        let snapshot = t.snapshot().map_err(delta)?;
        check_plain_layout(name, snapshot)?;
        let mut read = ReadRows::new(name, snapshot, batches)?;
        let mut duties = Duties::read(t, snapshot).await.map_err(delta)?;
        let at = TableAt {
            t,
            snapshot,
            mapping: duties.mapping.as_ref(),
        };
        read.split = self
            .split_rows(table, at, what.rows, read.deleted_rows(), &read.schema)
            .await?;
        // The new schema before the files: a column-mapped table's new columns get their
        // physical names there, which the files use.
        let metadata = read.schema_change(name, snapshot, &mut duties)?;
        let at = PlannedOn {
            t,
            snapshot,
            duties: &duties,
        };
        let kept_rows = read.kept_rows();
        let notes = read.notes(what, snapshot.version());
        let (adds, mut c, properties) = self.write_files(table, at, &read, notes).await?;
        c.rows_added = read.new.iter().map(|b| b.num_rows() as u64).sum();
        let pending = Pending::of(&adds, &read.split.removes);
        if metadata.is_none() && read.split.removes.is_empty() && adds.is_empty() {
            c.version = snapshot.version();
            return Ok((c, WrittenTable::current(t.clone())));
        }
        let operation = operation_of(what.rows.map(|r| r.sql()), batches.is_empty());
        let cdc = match read.change_data && kept_rows > 0 {
            true => self.change_data_file(at, &read).await.map_err(delta)?,
            false => None,
        };
        let mut actions = commit_actions(metadata, read.split.removes, adds);
        actions.extend(cdc.map(Action::Cdc));
        let entry = LogEntry {
            properties,
            actions,
            copies: kept_rows > 0,
            operation,
        };
        let commit = commit_on(at, entry, pending);
        let written = self
            .storage
            .clock
            .commit(&mut c, commit)
            .await
            .map_err(delta)?;
        Ok((c, written))
    }

    /// The rows a rewrite writes (the files' other rows, then the new ones) written as
    /// data files of `at`'s table, with the commit properties `notes` give; when nothing
    /// is written (a delete), no files and a delete's properties.
    async fn write_files(
        &self,
        table: &TableName,
        at: PlannedOn<'_>,
        read: &ReadRows,
        notes: CommitNotes<'_>,
    ) -> Result<DataFiles> {
        let name = table.as_str();
        let delta = |e: DeltaTableError| Error::delta(name, "write", e);
        // With row tracking, the copied rows keep their ids (`super::row_ids`); the new
        // rows' are null there, so they get new ones.
        let schema = match &at.duties.materialized {
            Some(m) => m.extended(&read.schema),
            None => Arc::clone(&read.schema),
        };
        let mut all = read.split.kept.clone();
        all.extend(conform_all(&read.new, &schema).map_err(|e| Error::arrow(name, e))?);
        if all.is_empty() {
            let (files, rows) = notes.removed.unwrap_or_default();
            let properties = delete_properties(files, rows, at.snapshot.version());
            return Ok((Vec::new(), Committed::default(), properties));
        }
        at.duties.check_rows(&all).map_err(delta)?;
        let layout = FileLayout {
            stats: at
                .duties
                .stats_columns(StatsColumns::of(at.snapshot), &schema),
            schema,
            mapping: at.duties.mapping.as_ref(),
        };
        let log_store = at.t.log_store();
        write_data_files(self.storage, &log_store, layout, &all, notes)
            .await
            .map_err(delta)
    }

    /// The change data file of a rewrite: the rows it deletes and those it inserts.
    async fn change_data_file(
        &self,
        at: PlannedOn<'_>,
        read: &ReadRows,
    ) -> std::result::Result<Option<deltalake::kernel::AddCDCFile>, DeltaTableError> {
        let store = at.t.log_store().object_store(None);
        let mapping = at.duties.mapping.as_ref();
        let compression = self.storage.compression;
        let (deleted, inserted) = (&read.split.deleted, &read.new);
        super::change_data::write(
            &store,
            &read.schema,
            deleted,
            inserted,
            mapping,
            compression,
        )
        .await
    }

    /// [`Rewriter::split_files`] of the rows `rows` selects (nothing to split without),
    /// timed as builder work.
    async fn split_rows(
        &self,
        table: &TableName,
        at: TableAt<'_>,
        rows: Option<BatchRows<'_>>,
        deleted: DeletedRows,
        schema: &SchemaRef,
    ) -> Result<Split> {
        let started = std::time::Instant::now();
        let split = match rows {
            Some(rows) => {
                self.split_files(
                    table,
                    at,
                    Selection {
                        rows: &rows,
                        deleted,
                    },
                    schema,
                )
                .await?
            }
            None => Split::default(),
        };
        self.storage.clock.add(Work::Builder, started);
        Ok(split)
    }

    /// The files of `t` holding rows the selection selects: their removes, their other
    /// rows (in `schema`) and how many rows of the selection they held. A file whose
    /// statistics rule the batch out is not read.
    async fn split_files(
        &self,
        table: &TableName,
        at: TableAt<'_>,
        selection: Selection<'_>,
        schema: &SchemaRef,
    ) -> Result<Split> {
        let name = table.as_str();
        let store = at.t.log_store().object_store(None);
        let materialized = Materialized::of(at.snapshot);
        let shape = RowShape {
            schema,
            mapping: at.mapping,
            materialized: materialized.as_ref(),
        };
        let mut split = Split::default();
        for f in at.snapshot.log_data().iter() {
            if !super::files::may_hold_batch(&f, selection.rows.batch_id(), at.mapping) {
                continue;
            }
            let raw = read_file(&store, &f.object_store_path())
                .await
                .map_err(|e| Error::delta(name, "read", e))?;
            // Rows another engine deleted with a deletion vector are not copied.
            let gone = match f.deletion_vector_descriptor() {
                Some(dv) => super::deletion::deleted_rows(at.t, dv)
                    .await
                    .map_err(|e| Error::delta(name, "read", e))?,
                None => Vec::new(),
            };
            let path = f.path();
            let file = CopiedFile {
                path: path.as_ref(),
                ids: FileIds::of(&f),
                deleted: &gone,
            };
            let batches = copied_rows(raw, file, shape).map_err(|e| Error::arrow(name, e))?;
            let hit = selection
                .split(batches, schema, &mut split)
                .map_err(|e| Error::arrow(name, e))?;
            if hit > 0 {
                split.removes.push(super::files::remove_of(&f, true));
            }
        }
        Ok(split)
    }
}

/// The rows a rewrite replaces, and what it keeps of them.
#[derive(Clone, Copy)]
struct Selection<'a> {
    rows: &'a BatchRows<'a>,
    deleted: DeletedRows,
}

impl Selection<'_> {
    /// Splits `batches`, one file's rows, into `split`: the rows selected (kept among
    /// its deleted rows, in `schema`, when asked for) and the others (kept to be written
    /// again when the file holds a selected row). How many rows it selected.
    fn split(
        self,
        batches: Vec<RecordBatch>,
        schema: &SchemaRef,
        split: &mut Split,
    ) -> std::result::Result<u64, arrow::error::ArrowError> {
        let mut others = Vec::with_capacity(batches.len());
        let mut hit = 0u64;
        for b in batches {
            let mask = self.rows.matches(&b)?;
            let n = mask.true_count() as u64;
            hit += n;
            if self.deleted == DeletedRows::Keep && n > 0 {
                // The change data file holds the table's columns alone.
                let rows = arrow::compute::filter_record_batch(&b, &mask)
                    .and_then(|r| conform(&r, schema))?;
                split.deleted.push(rows);
            }
            let keep = arrow::compute::not(&mask)?;
            let rest = arrow::compute::filter_record_batch(&b, &keep)?;
            if rest.num_rows() > 0 {
                others.push(rest);
            }
        }
        if hit > 0 {
            split.matched += hit;
            split.kept.extend(others);
        }
        Ok(hit)
    }
}

/// What a rewrite reads: the table's schema and the new rows in it, then the files
/// holding the rows it replaces, split.
struct ReadRows {
    /// The table's schema before the rewrite.
    current: SchemaRef,
    /// The table's schema widened by the new rows' columns.
    schema: SchemaRef,
    /// The new rows, in `schema`.
    new: Vec<RecordBatch>,
    /// The table's change data feed is on: the rows deleted are kept for a change data
    /// file.
    change_data: bool,
    split: Split,
}

impl ReadRows {
    /// The new rows `batches` in the schema of `snapshot`'s table (named `name`) widened
    /// by their columns; nothing read from the files yet.
    fn new(
        name: &str,
        snapshot: &deltalake::table::state::DeltaTableState,
        batches: &[RecordBatch],
    ) -> Result<Self> {
        let current = snapshot.snapshot().arrow_schema();
        let schema = widened_schema(&current, batches, Variants::of(snapshot))
            .map_err(|e| Error::delta(name, "write", e))?;
        let new = conform_all(batches, &schema).map_err(|e| Error::arrow(name, e))?;
        let props = snapshot.snapshot().table_configuration().table_properties();
        Ok(ReadRows {
            current,
            schema,
            new,
            change_data: props.enable_change_data_feed == Some(true),
            split: Split::default(),
        })
    }

    /// The rows of the files the rewrite writes again.
    fn kept_rows(&self) -> u64 {
        self.split.kept.iter().map(|b| b.num_rows() as u64).sum()
    }

    /// What the commit of the rewrite `what`, planned on `read_version`, records beside
    /// its rows.
    fn notes<'a>(&self, what: Rewrite<'a>, read_version: u64) -> CommitNotes<'a> {
        CommitNotes {
            txn: what.txn,
            read_version: Some(read_version),
            removed: what
                .rows
                .map(|_| (self.split.removes.len() as u64, self.split.matched)),
            rewritten_rows: self.kept_rows(),
            blind_append: false,
        }
    }

    /// What the read of the files keeps of the rows the rewrite deletes.
    fn deleted_rows(&self) -> DeletedRows {
        match self.change_data {
            true => DeletedRows::Keep,
            false => DeletedRows::Drop,
        }
    }

    /// The metadata action of the schema change the new rows make, if any; a
    /// column-mapped table's mapping in `duties` follows it (its new columns' physical
    /// names).
    fn schema_change(
        &self,
        name: &str,
        snapshot: &deltalake::table::state::DeltaTableState,
        duties: &mut Duties,
    ) -> Result<Option<Action>> {
        if self.schema.fields() == self.current.fields() {
            return Ok(None);
        }
        let (action, new_schema) = schema_metadata(name, snapshot, &self.schema, &self.current)?;
        if duties.mapping.is_some() {
            let mode = snapshot
                .snapshot()
                .table_configuration()
                .column_mapping_mode();
            duties.mapping =
                Mapping::new(&new_schema, mode).map_err(|e| Error::delta(name, "write", e))?;
        }
        Ok(Some(action))
    }
}

/// What a rewrite's read of the files holding the rows it replaces keeps of the rows it
/// deletes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeletedRows {
    /// Them, for a change data file.
    Keep,
    /// Nothing.
    Drop,
}
