//! Which files and rows of a table belong to a batch: the batch's predicate, and the
//! files a rerun can replace whole from their statistics and topic tags.

use arrow::array::{Array as _, AsArray as _, BooleanArray, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use deltalake::DeltaTable;

use super::arrow_schema;
use super::mapping::Mapping;
use crate::batch::BatchKey;
use crate::error::Result;
use crate::naming::{self, LANDING_PATH, TableName};

/// How the data files of a table hold rows of one batch, by their statistics.
pub(super) enum BatchFiles {
    /// No file can hold rows of the batch: a plain append.
    None,
    /// Every file holding rows of the batch holds only them (`_batch_id` statistics with
    /// min = max), of topics it names: one (`_topic` statistics with min = max) or those
    /// of its [`TOPICS_TAG`]. Those files, with their topics.
    Whole(Vec<WholeFile>),
    /// Some file may hold them beside other rows, or its statistics (missing, or possibly
    /// truncated at 32 bytes) cannot tell.
    Mixed,
}

/// A file of [`BatchFiles::Whole`].
pub(super) struct WholeFile {
    /// The topics of its rows.
    topics: Vec<String>,
    /// Its remove action.
    remove: deltalake::kernel::Remove,
    /// Its rows (statistics), what removing it removes.
    rows: u64,
}

impl BatchFiles {
    pub(super) fn may_hold(&self) -> bool {
        !matches!(self, BatchFiles::None)
    }
}

/// [`BatchFiles`] of `t` for `key`: one pass over its files' statistics. A file holds
/// rows of the batch when its `_batch_id` range holds the id and its `_landing_path`
/// range one of the batch's; a file of the same batch id from other folders only is not
/// the batch's. A file that may hold rows from before landing paths (null, or a table
/// of [`Folders::SourceFile`]: without the column) is [`BatchFiles::Mixed`].
pub(super) fn batch_files(t: &DeltaTable, key: &BatchKey, folders: Folders) -> BatchFiles {
    let Ok(snapshot) = t.snapshot() else {
        return BatchFiles::Mixed;
    };
    let Ok(mapping) = Mapping::of(snapshot) else {
        return BatchFiles::Mixed;
    };
    let mut whole = Vec::new();
    for f in snapshot.log_data().iter() {
        match file_holds(&f, key, folders, mapping.as_ref()) {
            Ok(None) => continue,
            Ok(Some(file)) => whole.push(file),
            Err(Mixed) => return BatchFiles::Mixed,
        }
    }
    if whole.is_empty() {
        BatchFiles::None
    } else {
        BatchFiles::Whole(whole)
    }
}

/// A file that may hold rows of a batch beside others, or whose statistics cannot tell.
struct Mixed;

/// What file `f` holds of `key`'s rows, by its statistics (see [`batch_files`]): none,
/// only rows of the batch (of topics it names), or [`Mixed`].
fn file_holds(
    f: &deltalake::kernel::LogicalFileView,
    key: &BatchKey,
    folders: Folders,
    mapping: Option<&Mapping>,
) -> Result<Option<WholeFile>, Mixed> {
    let Some(stats) = stats_of(f, mapping) else {
        return Err(Mixed);
    };
    let batch_id = key.batch_id.as_str();
    let Some((min, max)) = text_bounds(&stats, naming::BATCH_ID) else {
        return Err(Mixed);
    };
    if !(min.as_str() <= batch_id && batch_id <= max.as_str()) {
        return Ok(None);
    }
    if min != max {
        return Err(Mixed);
    }
    if !key.landing_paths.is_empty() {
        // Rows written before landing paths (null, or no column yet) are told apart
        // by `_source_file` only: the rewrite decides, row by row.
        if folders == Folders::SourceFile {
            return Err(Mixed);
        }
        match landing_of(&stats, key) {
            Landing::Ours => {}
            Landing::Other => return Ok(None),
            Landing::Unsure => return Err(Mixed),
        }
    }
    let topics = match text_bounds(&stats, naming::TOPIC) {
        Some((topic, last)) if topic == last => vec![topic],
        _ => match tagged_topics(f) {
            Some(topics) => topics,
            None => return Err(Mixed),
        },
    };
    Ok(Some(WholeFile {
        topics,
        remove: remove_of(f, true),
        rows: f.num_records().unwrap_or(0) as u64,
    }))
}

/// The statistics of file `f`, keyed by logical column names (a column-mapped table's
/// files key them by physical name).
fn stats_of(
    f: &deltalake::kernel::LogicalFileView,
    mapping: Option<&Mapping>,
) -> Option<serde_json::Value> {
    let mut stats = serde_json::from_str::<serde_json::Value>(&f.stats()?).ok()?;
    if let Some(m) = mapping {
        for which in ["minValues", "maxValues", "nullCount"] {
            if let Some(serde_json::Value::Object(columns)) = stats.get_mut(which) {
                *columns = std::mem::take(columns)
                    .into_iter()
                    .map(|(k, v)| (m.logical_name(&k).unwrap_or(k), v))
                    .collect();
            }
        }
    }
    Some(stats)
}

/// Whose rows a file of the batch id holds, by its `_landing_path` statistics.
enum Landing {
    /// One of the batch's folders'.
    Ours,
    /// Other folders' only: not the batch's.
    Other,
    /// Null paths, several folders, or statistics that cannot tell.
    Unsure,
}

/// [`Landing`] of a file with statistics `stats` for `key`.
fn landing_of(stats: &serde_json::Value, key: &BatchKey) -> Landing {
    let nulls = stats
        .get("nullCount")
        .and_then(|n| n.get(LANDING_PATH))
        .and_then(serde_json::Value::as_u64);
    if nulls != Some(0) {
        return Landing::Unsure;
    }
    let ours = |path: &str| key.landing_paths.iter().any(|p| p == path);
    match text_bounds(stats, LANDING_PATH) {
        Some((first, last)) if first == last && ours(&first) => Landing::Ours,
        // Another folder's rows of the same batch id: not the batch's.
        Some((first, last))
            if !key
                .landing_paths
                .iter()
                .any(|p| first.as_str() <= p.as_str() && p.as_str() <= last.as_str()) =>
        {
            Landing::Other
        }
        _ => Landing::Unsure,
    }
}

/// The `(min, max)` text statistics of `column`, when both are there and shorter than 32
/// bytes (a longer one may be truncated).
fn text_bounds(stats: &serde_json::Value, column: &str) -> Option<(String, String)> {
    let bound = |which: &str| {
        stats
            .get(which)?
            .get(column)?
            .as_str()
            .filter(|v| v.len() < 32)
            .map(str::to_string)
    };
    Some((bound("minValues")?, bound("maxValues")?))
}

/// Whether file `f` may hold rows of `batch_id` by its `_batch_id` statistics (it may when
/// it has none; a bound of 32 bytes or more may be truncated and does not rule it out).
pub(super) fn may_hold_batch(
    f: &deltalake::kernel::LogicalFileView,
    batch_id: &str,
    mapping: Option<&Mapping>,
) -> bool {
    let Some(stats) = stats_of(f, mapping) else {
        return true;
    };
    let bound = |which: &str| {
        stats
            .get(which)
            .and_then(|b| b.get(naming::BATCH_ID))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let (Some(min), Some(max)) = (bound("minValues"), bound("maxValues")) else {
        // No bounds: all null (no rows of any batch) when the null count says so.
        let rows = stats.get("numRecords").and_then(|n| n.as_u64());
        let nulls = stats
            .get("nullCount")
            .and_then(|n| n.get(naming::BATCH_ID))
            .and_then(|n| n.as_u64());
        return !(rows.is_some() && rows == nulls);
    };
    let below_max = max.len() >= 32 || batch_id <= max.as_str();
    // A truncated minimum is a prefix of the real one, so below it is below the real one.
    batch_id >= min.as_str() && below_max
}

/// The distinct `_topic` values of `batches`, in order; `None` when a batch has no
/// `_topic` column of strings or a null in it.
pub(super) fn topics_of(batches: &[RecordBatch]) -> Option<Vec<String>> {
    let mut topics: Vec<String> = Vec::new();
    for b in batches {
        let column = b.column_by_name(naming::TOPIC)?;
        let values = column
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()?;
        if arrow::array::Array::null_count(values) > 0 {
            return None;
        }
        for v in values.iter().flatten() {
            // Rows come topic by topic: compare with the last one first.
            if topics.last().is_some_and(|t| t == v) || topics.iter().any(|t| t == v) {
                continue;
            }
            topics.push(v.to_string());
        }
    }
    Some(topics)
}

/// The `tags` key of an add action that lists the topics of the rows in its file (a JSON
/// array; those of the whole commit, so possibly more than the file holds).
pub const TOPICS_TAG: &str = "bronze.topics";

/// The topics a file's [`TOPICS_TAG`] names.
pub(super) fn tagged_topics(f: &deltalake::kernel::LogicalFileView) -> Option<Vec<String>> {
    // The file view exposes `tags` only through the (deprecated) add action.
    #[allow(deprecated)]
    let add = f.add_action();
    let tag = add.tags?.remove(TOPICS_TAG)??;
    serde_json::from_str(&tag).ok()
}

/// The removes of `whole`'s files whose topics are all among `topics` (files of other
/// topics stay), with the rows they hold; `None` when a file holds one of `topics`
/// beside a topic not among them.
pub(super) fn whole_removes(
    whole: &[WholeFile],
    topics: &[String],
) -> Option<(Vec<deltalake::kernel::Remove>, u64)> {
    let mut removes = Vec::new();
    let mut rows = 0;
    for file in whole {
        let ours = file.topics.iter().filter(|t| topics.contains(t)).count();
        if ours == file.topics.len() {
            removes.push(file.remove.clone());
            rows += file.rows;
        } else if ours > 0 {
            return None;
        }
    }
    Some((removes, rows))
}

/// The table's schema, when every one of `batches` has it exactly (the direct paths
/// write the files in it).
pub(super) fn same_schema(
    table: &TableName,
    t: &DeltaTable,
    batches: &[RecordBatch],
) -> Result<Option<SchemaRef>> {
    let schema = arrow_schema(table, t)?;
    let same = batches
        .iter()
        .all(|b| b.schema().fields() == schema.fields());
    Ok(same.then_some(schema))
}

/// How a table's rows tell the landing folder they came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Folders {
    /// By the `_landing_path` column (null in rows written before landing paths, which
    /// `_source_file` tells).
    LandingPath,
    /// By `_source_file` only: the table has no `_landing_path` column.
    SourceFile,
}

impl Folders {
    /// How the rows of a table of `schema` tell their folder.
    pub(super) fn of(schema: &arrow::datatypes::Schema) -> Folders {
        if schema.field_with_name(LANDING_PATH).is_ok() {
            Folders::LandingPath
        } else {
            Folders::SourceFile
        }
    }
}

/// The rows of one batch in a table, of some of its topics or all: `_batch_id = X AND
/// (_landing_path IN (<its folders>) OR (_landing_path IS NULL AND <legacy>))`, where
/// `<legacy>` matches rows written before landing paths (when the batch id was the whole
/// key) by their `_source_file`: `_source_file LIKE '%/<suffix>/%'` for each folder's
/// [`BatchKey::legacy_suffixes`]. In a table without the column
/// ([`Folders::SourceFile`]), `_batch_id = X AND <legacy>`. A key without landing paths
/// (benches) is `_batch_id = X`.
/// With topics, `AND _topic IN (topics)`: rows of a topic that failed to flatten are left
/// alone, and so are rows of other folders with the same batch id. A null never matches,
/// as in SQL.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BatchRows<'a> {
    key: &'a BatchKey,
    folders: Folders,
    topics: Option<&'a [String]>,
}

impl<'a> BatchRows<'a> {
    /// Every row of the batch.
    pub(crate) fn of(key: &'a BatchKey, folders: Folders) -> Self {
        BatchRows {
            key,
            folders,
            topics: None,
        }
    }

    /// The batch's rows of `topics`.
    pub(crate) fn of_topics(key: &'a BatchKey, topics: &'a [String], folders: Folders) -> Self {
        BatchRows {
            key,
            folders,
            topics: Some(topics),
        }
    }

    /// The topics whose rows these are (`None`: every topic's).
    pub(crate) fn topics(&self) -> Option<&'a [String]> {
        self.topics
    }

    /// The batch id the rows have.
    pub(crate) fn batch_id(&self) -> &str {
        &self.key.batch_id
    }

    /// Which rows of `batch` are the batch's (a column `batch` lacks reads as null).
    pub(crate) fn matches(
        &self,
        batch: &RecordBatch,
    ) -> std::result::Result<BooleanArray, ArrowError> {
        let text = |name: &str| -> std::result::Result<Option<StringArray>, ArrowError> {
            match batch.column_by_name(name) {
                Some(c) => Ok(Some(cast(c, &DataType::Utf8)?.as_string::<i32>().clone())),
                None => Ok(None),
            }
        };
        let value = |a: &Option<StringArray>, i: usize| -> Option<String> {
            a.as_ref()
                .filter(|a| a.is_valid(i))
                .map(|a| a.value(i).to_string())
        };
        let (ids, paths) = (text(naming::BATCH_ID)?, text(LANDING_PATH)?);
        let (files, topics) = (text(naming::SOURCE_FILE)?, text(naming::TOPIC)?);
        let legacy: Vec<String> = self
            .key
            .legacy_suffixes
            .iter()
            .map(|s| format!("/{s}/"))
            .collect();
        let mask = (0..batch.num_rows()).map(|i| {
            let id = ids
                .as_ref()
                .is_some_and(|a| a.is_valid(i) && a.value(i) == self.key.batch_id.as_str());
            let is_legacy =
                || value(&files, i).is_some_and(|f| legacy.iter().any(|s| f.contains(s.as_str())));
            let folder = self.key.landing_paths.is_empty()
                || if self.folders == Folders::LandingPath {
                    match value(&paths, i) {
                        Some(p) => self.key.landing_paths.contains(&p),
                        None => is_legacy(),
                    }
                } else {
                    is_legacy()
                };
            let topic = self
                .topics
                .is_none_or(|ts| value(&topics, i).is_some_and(|t| ts.contains(&t)));
            Some(id && folder && topic)
        });
        Ok(mask.collect())
    }

    /// The condition as SQL, for the commit's `predicate` (what a table's history shows).
    pub(crate) fn sql(&self) -> String {
        let quote = |v: &str| format!("'{}'", v.replace('\'', "''"));
        let list = |vs: &[String]| vs.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ");
        let mut sql = format!("{} = {}", naming::BATCH_ID, quote(&self.key.batch_id));
        if !self.key.landing_paths.is_empty() {
            let legacy = self
                .key
                .legacy_suffixes
                .iter()
                .map(|s| {
                    format!(
                        "{} LIKE {}",
                        naming::SOURCE_FILE,
                        quote(&format!("%/{}/%", like_escape(s)))
                    )
                })
                .collect::<Vec<_>>();
            let legacy = match legacy.len() {
                0 => "false".to_string(),
                1 => legacy[0].clone(),
                _ => format!("({})", legacy.join(" OR ")),
            };
            if self.folders == Folders::LandingPath {
                sql.push_str(&format!(
                    " AND ({LANDING_PATH} IN ({}) OR {LANDING_PATH} IS NULL AND {legacy})",
                    list(&self.key.landing_paths)
                ));
            } else {
                sql.push_str(&format!(" AND {legacy}"));
            }
        }
        if let Some(topics) = self.topics {
            sql.push_str(&format!(" AND {} IN ({})", naming::TOPIC, list(topics)));
        }
        sql
    }
}

/// `text` with LIKE's wildcards (`%`, `_`) and escape (`\`) escaped.
pub(super) fn like_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The remove of the file `f`, with the row ids its add had: a writer must copy
/// `baseRowId` and `defaultRowCommitVersion` into the remove of a file of a table with
/// row tracking (deltalake's `remove_action` leaves them out).
pub(super) fn remove_of(
    f: &deltalake::kernel::LogicalFileView,
    data_change: bool,
) -> deltalake::kernel::Remove {
    let mut remove = f.remove_action(data_change);
    #[allow(deprecated)] // Its only way to the file's row-tracking fields.
    let add = f.add_action();
    remove.base_row_id = add.base_row_id;
    remove.default_row_commit_version = add.default_row_commit_version;
    remove
}
