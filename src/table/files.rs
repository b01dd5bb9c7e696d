//! Which files and rows of a table belong to a batch: the batch's predicate, and the
//! files a rerun can replace whole from their statistics and topic tags.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use deltalake::DeltaTable;
use deltalake::datafusion::prelude::{Expr, col, lit};

use super::arrow_schema;
use crate::batch::BatchKey;
use crate::error::Result;
use crate::flatten::LANDING_PATH;
use crate::naming::TableName;

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
/// not `keyed`: without the column) is [`BatchFiles::Mixed`].
pub(super) fn batch_files(t: &DeltaTable, key: &BatchKey, keyed: bool) -> BatchFiles {
    let Ok(snapshot) = t.snapshot() else {
        return BatchFiles::Mixed;
    };
    let batch_id = key.batch_id.as_str();
    let ours = |path: &str| key.landing_paths.iter().any(|p| p == path);
    let mut whole = Vec::new();
    for f in snapshot.log_data().iter() {
        let Some(stats) = f
            .stats()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        else {
            return BatchFiles::Mixed;
        };
        let bounds = |column: &str| {
            let bound = |which: &str| {
                stats
                    .get(which)?
                    .get(column)?
                    .as_str()
                    .filter(|v| v.len() < 32)
                    .map(str::to_string)
            };
            Some((bound("minValues")?, bound("maxValues")?))
        };
        let Some((min, max)) = bounds("_batch_id") else {
            return BatchFiles::Mixed;
        };
        if !(min.as_str() <= batch_id && batch_id <= max.as_str()) {
            continue;
        }
        if min != max {
            return BatchFiles::Mixed;
        }
        if !key.landing_paths.is_empty() {
            // Rows written before landing paths (null, or no column yet) are told apart
            // by `_source_file` only: the replace-where decides.
            if !keyed {
                return BatchFiles::Mixed;
            }
            let nulls = stats
                .get("nullCount")
                .and_then(|n| n.get(LANDING_PATH))
                .and_then(serde_json::Value::as_u64);
            if nulls != Some(0) {
                return BatchFiles::Mixed;
            }
            match bounds(LANDING_PATH) {
                Some((first, last)) if first == last && ours(&first) => {}
                // Another folder's rows of the same batch id: not the batch's.
                Some((first, last))
                    if !key
                        .landing_paths
                        .iter()
                        .any(|p| first.as_str() <= p.as_str() && p.as_str() <= last.as_str()) =>
                {
                    continue;
                }
                _ => return BatchFiles::Mixed,
            }
        }
        let topics = match bounds("_topic") {
            Some((topic, last)) if topic == last => vec![topic],
            _ => match tagged_topics(&f) {
                Some(topics) => topics,
                None => return BatchFiles::Mixed,
            },
        };
        whole.push(WholeFile {
            topics,
            remove: f.remove_action(true),
            rows: f.num_records().unwrap_or(0) as u64,
        });
    }
    if whole.is_empty() {
        BatchFiles::None
    } else {
        BatchFiles::Whole(whole)
    }
}

/// The distinct `_topic` values of `batches`, in order; `None` when a batch has no
/// `_topic` column of strings or a null in it.
pub(super) fn topics_of(batches: &[RecordBatch]) -> Option<Vec<String>> {
    let mut topics: Vec<String> = Vec::new();
    for b in batches {
        let column = b.column_by_name("_topic")?;
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
    whole: Vec<WholeFile>,
    topics: &[String],
) -> Option<(Vec<deltalake::kernel::Remove>, u64)> {
    let mut removes = Vec::new();
    let mut rows = 0;
    for file in whole {
        let ours = file.topics.iter().filter(|t| topics.contains(t)).count();
        if ours == file.topics.len() {
            removes.push(file.remove);
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

/// `<batch> AND _topic IN (topics)` ([`batch_predicate`]): the rows this batch's folders'
/// topics wrote to a table; rows of a topic that failed to flatten are left alone, and
/// so are rows of other folders with the same batch id.
pub(crate) fn batch_topics_predicate(key: &BatchKey, topics: &[String], keyed: bool) -> Expr {
    let list = topics.iter().map(|t| lit(t.clone())).collect();
    batch_predicate(key, keyed).and(col("_topic").in_list(list, false))
}

/// The rows of a batch: `_batch_id = X AND (_landing_path IN (<its folders>) OR
/// (_landing_path IS NULL AND <legacy>))`, where `<legacy>` matches rows written before
/// landing paths (when the batch id was the whole key) by their `_source_file`:
/// `_source_file LIKE '%/<suffix>/%'` for each folder's [`BatchKey::legacy_suffixes`]. In
/// a table without the column (not `keyed`), `_batch_id = X AND <legacy>`. A key without
/// landing paths (benches) is `_batch_id = X`.
pub(crate) fn batch_predicate(key: &BatchKey, keyed: bool) -> Expr {
    let id = col("_batch_id").eq(lit(key.batch_id.clone()));
    if key.landing_paths.is_empty() {
        return id;
    }
    let legacy = key
        .legacy_suffixes
        .iter()
        .map(|s| col("_source_file").like(lit(format!("%/{}/%", like_escape(s)))))
        .reduce(Expr::or)
        .unwrap_or(lit(false));
    if !keyed {
        return id.and(legacy);
    }
    let paths = key.landing_paths.iter().map(|p| lit(p.clone())).collect();
    id.and(
        col(LANDING_PATH)
            .in_list(paths, false)
            .or(col(LANDING_PATH).is_null().and(legacy)),
    )
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
