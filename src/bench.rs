//! Entry points for the per-stage benches (`benches/stages.rs`) and the parse-only
//! baseline (`examples/parse_only.rs`): each stage of a load on its own, so a regression
//! in one shows in review.
//!
//! Not a stable API.

use std::collections::BTreeMap;

use arrow::array::RecordBatch;

use crate::error::Result;
use crate::naming::TableName;
use crate::run::Ingest;
pub use crate::table::{Compression, writer_properties};

/// The parse-only baseline: every line of `bytes` through simd-json's tape parser (the
/// least work any loader must do), nothing kept. Returns the lines that parsed.
pub fn simd_json_parse_only(bytes: &[u8], scratch: &mut ParseScratch) -> usize {
    count_parsed(bytes, scratch, |line, buffers| {
        simd_json::to_tape_with_buffers(line, buffers).is_ok()
    })
}

/// bronze's own strict reader (`json::validate`: UTF-8, then RFC 8259, nothing
/// materialised) over every line of `bytes`. Returns the lines that parsed.
pub fn bronze_validate_only(bytes: &[u8], scratch: &mut ParseScratch) -> usize {
    count_parsed(bytes, scratch, |line, _| {
        std::str::from_utf8(line).is_ok_and(|t| crate::json::validate(t).is_ok())
    })
}

/// The parse-only baseline as a DOM: every line of `bytes` into a
/// `simd_json::BorrowedValue` (what a script that "parses each line with simd-json"
/// does), nothing kept. Returns the lines that parsed.
pub fn simd_json_dom_only(bytes: &[u8], scratch: &mut ParseScratch) -> usize {
    count_parsed(bytes, scratch, |line, buffers| {
        simd_json::value::borrowed::to_value_with_buffers(line, buffers).is_ok()
    })
}

/// The parse-only baseline as a script would write it with simd-json's default API:
/// every line copied and parsed with `simd_json::to_owned_value` (fresh buffers and owned
/// strings per line), nothing kept. Returns the lines that parsed.
pub fn simd_json_owned_dom(bytes: &[u8], scratch: &mut ParseScratch) -> usize {
    count_parsed(bytes, scratch, |line, _| {
        simd_json::to_owned_value(&mut line.to_vec()).is_ok()
    })
}

/// Non-blank lines of `bytes` that `parse` accepts (each copied into the scratch input
/// first: simd-json parses in place).
fn count_parsed(
    bytes: &[u8],
    scratch: &mut ParseScratch,
    parse: impl Fn(&mut [u8], &mut simd_json::Buffers) -> bool,
) -> usize {
    let mut ok = 0;
    // Lines found with memchr, as bronze's own reader does (`read::lines`).
    for line in crate::source::read::lines(bytes).map(|l| l.raw) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        scratch.input.clear();
        scratch.input.extend_from_slice(line);
        if parse(&mut scratch.input, &mut scratch.buffers) {
            ok += 1;
        }
    }
    ok
}

/// Buffers [`simd_json_parse_only`] reuses across calls.
#[derive(Default)]
pub struct ParseScratch {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

/// The commit stage alone: writes each table's batches as one Delta commit under
/// `<catalog>/bronze/` (replacing `batch_id`'s rows, as a load does), tables one after
/// the other on `ingest`'s runtime. Returns the rows committed.
pub fn commit(
    ingest: &Ingest,
    batch_id: &str,
    tables: &BTreeMap<TableName, Vec<(String, Vec<RecordBatch>)>>,
) -> Result<u64> {
    let storage = ingest.storage()?;
    // A first load of the batch that records its `txn` in every table.
    let committer = storage.committer(crate::table::RunMode::default());
    let key = crate::batch::BatchKey::of_id(batch_id);
    let mut rows = 0;
    for (table, parts) in tables {
        let parts = parts
            .iter()
            .map(|(topic, batches)| crate::table::Part {
                topic: topic.clone(),
                batches: batches.clone(),
                evolution: crate::config::Evolution::Add,
            })
            .collect();
        let ((c, _), _) = ingest
            .catalog()
            .runtime()
            .block_on(committer.replace_parts(table, parts, &key, crate::table::Write::Replace))?;
        rows += c.rows_added;
    }
    Ok(rows)
}

/// The fit stage of a first load: each table's batches fitted as the rows of a new
/// table (where type detection runs, with `detect_types` set). Returns the rows fitted.
pub fn fit_new_tables(
    tables: &BTreeMap<TableName, Vec<(String, Vec<RecordBatch>)>>,
) -> Result<usize> {
    let mut rows = 0;
    for (table, parts) in tables {
        for batch in parts.iter().flat_map(|(_, batches)| batches) {
            let fitted = crate::table::fit::to_table(
                table,
                batch.clone(),
                None,
                crate::config::Evolution::Add,
            )?;
            rows += fitted.batch.num_rows();
        }
    }
    Ok(rows)
}

/// Removes `<catalog>/bronze/` (between bench iterations, so each commit creates its
/// tables as a first load does).
pub fn clear(ingest: &Ingest) -> std::io::Result<()> {
    let Some(dir) = ingest.config().catalog.local() else {
        return Err(std::io::Error::other(
            "the bench catalog is not a local folder",
        ));
    };
    match std::fs::remove_dir_all(dir.join(&ingest.config().schema)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// What a batch's flattened tables hold: leaves (non-null values in data columns, the
/// ones whose field carries a path, lineage and `_rescued_data` not counted) and rows
/// (of every table, topic and child), for the per-leaf and per-row costs of the stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Non-null values in data columns.
    pub leaves: u64,
    /// Rows of every table.
    pub rows: u64,
}

/// The [`Counts`] of `tables`.
pub fn counts(tables: &BTreeMap<TableName, Vec<(String, Vec<RecordBatch>)>>) -> Counts {
    let mut counts = Counts::default();
    for batch in tables.values().flatten().flat_map(|(_, batches)| batches) {
        counts.rows += batch.num_rows() as u64;
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            if field.metadata().contains_key(crate::flatten::PATH_META) {
                counts.leaves += (column.len() - column.null_count()) as u64;
            }
        }
    }
    counts
}
