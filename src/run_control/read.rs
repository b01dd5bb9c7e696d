//! Reading `_run_control`: what every run recorded, as [`RunRow`]s.

use arrow::array::{Array, AsArray as _};

use crate::error::{Error, Result};
use crate::naming::{self, RUN_CONTROL_TABLE, TableName};
use crate::table::Storage;

/// One `_run_control` row, as far as the backlog and the report need it.
pub(crate) struct RunRow {
    pub(crate) run_id: String,
    pub(crate) batch_id: String,
    pub(crate) landing_paths: Option<String>,
    /// The table written (`(batch)` for the row accounting).
    pub(crate) table: String,
    pub(crate) ok: bool,
    /// `<table>: <error>` of a failed row.
    pub(crate) error: Option<String>,
    /// The row's error, or its checks when it has none.
    pub(crate) reason: String,
    pub(crate) rows_in: u64,
    pub(crate) rows_written: u64,
    /// Start and end of the write, microseconds since the epoch.
    pub(crate) started_micros: i64,
    pub(crate) ended_micros: i64,
}

/// `_run_control`'s rows, of one batch id when given (none when it does not exist yet).
pub(crate) async fn run_control_rows(
    storage: &Storage,
    batch_id: Option<&str>,
) -> Result<Vec<RunRow>> {
    use crate::table::scan::{Equals, read_rows};
    let filters: Vec<Equals> = batch_id
        .map(|id| Equals::new(naming::BATCH_ID, id))
        .into_iter()
        .collect();
    let table = TableName::system(RUN_CONTROL_TABLE);
    let batches = read_rows(storage, &table, &filters, &RUN_ROW_COLUMNS).await?;
    rows_of(&batches)
}

/// The columns of `_run_control` a [`RunRow`] is made of.
pub(crate) const RUN_ROW_COLUMNS: [&str; 11] = [
    "run_id",
    naming::BATCH_ID,
    "landing_paths",
    "status",
    "table",
    "error",
    "checks",
    "rows_in",
    "rows_written",
    "started_at",
    "ended_at",
];

/// The [`RunRow`]s of record batches read from `_run_control` (a column a file written by
/// an older release lacks reads as nulls).
pub(crate) fn rows_of(batches: &[arrow::array::RecordBatch]) -> Result<Vec<RunRow>> {
    let mut rows = Vec::new();
    for b in batches {
        use arrow::datatypes::DataType;
        // A column, cast to the type it is read as.
        let column = |name: &str, to: &DataType| -> Result<arrow::array::ArrayRef> {
            match b.column_by_name(name) {
                Some(c) => {
                    arrow::compute::cast(c, to).map_err(|e| Error::arrow(RUN_CONTROL_TABLE, e))
                }
                None => Ok(arrow::array::new_null_array(to, b.num_rows())),
            }
        };
        let int = |name: &str| -> Result<arrow::array::Int64Array> {
            let c = column(name, &DataType::Int64)?;
            Ok(c.as_primitive::<arrow::datatypes::Int64Type>().clone())
        };
        let text = |name: &str| -> Result<arrow::array::StringArray> {
            Ok(column(name, &DataType::Utf8)?.as_string::<i32>().clone())
        };
        let (rows_in, written) = (int("rows_in")?, int("rows_written")?);
        let (started, ended) = (int("started_at")?, int("ended_at")?);
        let n = |a: &arrow::array::Int64Array, i: usize| if a.is_null(i) { 0 } else { a.value(i) };
        let (run, batch, paths, status) = (
            text("run_id")?,
            text(naming::BATCH_ID)?,
            text("landing_paths")?,
            text("status")?,
        );
        let (table, error, checks) = (text("table")?, text("error")?, text("checks")?);
        for i in 0..b.num_rows() {
            let ok = status.value(i) == "ok";
            // A failed write says why in `error`; the `(batch)` row's row accounting in
            // `checks`.
            let why = if !error.is_null(i) {
                error.value(i)
            } else {
                checks.value(i)
            };
            rows.push(RunRow {
                error: (!ok).then(|| format!("{}: {why}", table.value(i))),
                run_id: run.value(i).to_string(),
                batch_id: batch.value(i).to_string(),
                landing_paths: (!paths.is_null(i)).then(|| paths.value(i).to_string()),
                table: table.value(i).to_string(),
                // The `(batch)` row is the run's row accounting: failed when it does not
                // add up, as any failed write.
                // Every write ok, and the `(batch)` row: the row accounting added up.
                ok,
                reason: why.to_string(),
                rows_in: n(&rows_in, i).max(0) as u64,
                rows_written: n(&written, i).max(0) as u64,
                started_micros: n(&started, i),
                ended_micros: n(&ended, i),
            });
        }
    }
    Ok(rows)
}
