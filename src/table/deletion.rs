//! Deletion vectors another engine left on data files (Spark's DELETE, UPDATE and MERGE
//! on a table with `delta.enableDeletionVectors`): the rows a file's vector marks are
//! gone, so a rewrite of that file copies only the others.

use arrow::array::{BooleanArray, RecordBatch};
use arrow::error::ArrowError;
use deltalake::DeltaTableError;

/// The row indexes (positions in the file, ascending) the deletion vector `dv` of a data
/// file of `t` marks deleted, read by the Delta kernel (inline, or from its file).
pub(crate) async fn deleted_rows(
    t: &deltalake::DeltaTable,
    dv: deltalake::kernel::DeletionVectorDescriptor,
) -> Result<Vec<u64>, DeltaTableError> {
    use deltalake::logstore::LogStore as _;
    let dv: buoyant_kernel::actions::deletion_vector::DeletionVectorDescriptor =
        dv.try_into().map_err(|e: buoyant_kernel::Error| {
            DeltaTableError::Generic(format!("a deletion vector bronze cannot read: {e}"))
        })?;
    let log_store = t.log_store();
    let engine = log_store.engine(None);
    // The table's URL ends with `/`, as the kernel needs to join paths under it.
    let mut root = log_store.root_url().clone();
    if !root.path().ends_with('/') {
        root.set_path(&format!("{}/", root.path()));
    }
    // On a blocking thread, as delta-rs runs the kernel: its engine blocks on the runtime
    // for object store reads.
    let read = tokio::task::spawn_blocking(move || dv.row_indexes(engine.storage_handler(), &root));
    let mut rows = read
        .await
        .map_err(|e| DeltaTableError::Generic(format!("reading a deletion vector: {e}")))?
        .map_err(|e| DeltaTableError::Generic(format!("reading a deletion vector: {e}")))?;
    rows.sort_unstable();
    Ok(rows)
}

/// The rows of a file's `batches` (in file order) but those at the positions `deleted`
/// (ascending).
pub(crate) fn without_rows(
    batches: Vec<RecordBatch>,
    deleted: &[u64],
) -> Result<Vec<RecordBatch>, ArrowError> {
    let mut start = 0u64;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let end = start + b.num_rows() as u64;
        let from = deleted.partition_point(|&r| r < start);
        let to = deleted.partition_point(|&r| r < end);
        if from == to {
            out.push(b);
        } else {
            let mut keep = vec![true; b.num_rows()];
            for &r in &deleted[from..to] {
                keep[(r - start) as usize] = false;
            }
            out.push(arrow::compute::filter_record_batch(
                &b,
                &BooleanArray::from(keep),
            )?);
        }
        start = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};
    use std::sync::Arc;

    #[test]
    fn rows_at_the_marked_positions_are_left_out_across_batches() {
        let batch = |from: i64, n: i64| {
            RecordBatch::try_from_iter([(
                "n",
                Arc::new(Int64Array::from_iter_values(from..from + n)) as _,
            )])
            .unwrap()
        };
        let kept =
            without_rows(vec![batch(0, 3), batch(3, 4), batch(7, 2)], &[0, 4, 5, 8]).unwrap();
        let values: Vec<i64> = kept
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                (0..c.len()).map(|i| c.value(i)).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(values, [1, 2, 3, 6, 7]);
    }
}
