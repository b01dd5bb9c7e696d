//! Lineage: what a run stamps on every row ([`Lineage`]), and the lineage columns a
//! table's rows repeat, built once per flatten and shared by its tables.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, DictionaryArray, Int32Array, StringArray, TimestampMicrosecondArray,
};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Int32Type};

use super::ids::utf8_column;
use crate::error::Result;

/// What a run stamps on every row.
#[derive(Clone, Debug)]
pub struct Lineage {
    /// The batch (`_batch_id`, and the key its writes replace).
    pub key: crate::batch::BatchKey,
    /// `_loaded_at`, microseconds since the Unix epoch, UTC.
    pub loaded_at_micros: i64,
    /// `_landing_path` by source file: each batch folder's path (as its files'
    /// `_source_file` values start) and its landing path. Empty: `_landing_path` null.
    pub landing: Vec<(String, String)>,
}

impl Lineage {
    /// A lineage without landing paths (rows get a null `_landing_path`).
    #[cfg(any(test, feature = "testing"))]
    pub fn new(batch_id: impl Into<String>, loaded_at_micros: i64) -> Lineage {
        Lineage {
            key: crate::batch::BatchKey::of_id(batch_id),
            loaded_at_micros,
            landing: Vec::new(),
        }
    }

    /// The lineage of batch `key` read from `folders`.
    pub fn of(
        key: &crate::batch::BatchKey,
        folders: &[crate::batch::Folder],
        loaded_at_micros: i64,
    ) -> Lineage {
        Lineage {
            key: key.clone(),
            loaded_at_micros,
            landing: folders
                .iter()
                .map(|f| {
                    let mut prefix = f.path.to_string_lossy().into_owned();
                    if !prefix.ends_with(std::path::MAIN_SEPARATOR) {
                        prefix.push(std::path::MAIN_SEPARATOR);
                    }
                    (prefix, f.landing_path.clone())
                })
                .collect(),
        }
    }

    /// The landing path of the folder `source_file` (a `_source_file` value) was read from.
    pub fn landing_path_of(&self, source_file: &str) -> Option<&str> {
        match self.landing.as_slice() {
            [] => None,
            [(_, one)] => Some(one),
            many => many
                .iter()
                .find(|(prefix, _)| source_file.starts_with(prefix.as_str()))
                .map(|(_, p)| p.as_str()),
        }
    }
}

/// How the lineage columns whose values repeat are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LineageColumns {
    /// As string columns, the values copied ([`super::flatten`]).
    Plain,
    /// As Arrow dictionaries ([`super::flatten_compact`]).
    Dictionary,
}

/// The lineage a batch's rows repeat: the run's, and the files the topic's rows came
/// from; built as `columns` says.
///
/// Built once per flatten and shared by its tables: the dictionaries' values
/// (`_source_file`, `_landing_path`: one entry per file, hundreds of kilobytes on a batch
/// of thousands of files) and the buffers of the columns every row repeats (a constant's
/// zero keys, `_loaded_at`), which each table slices. The flattened rows of the tables
/// several topics feed wait for their one commit ([`super::flatten_compact`]); built per table,
/// these copies were a quarter of the historical batch's peak heap (BENCHMARKS.md).
pub(super) struct LineageStrings<'l> {
    pub(super) lineage: &'l Lineage,
    columns: LineageColumns,
    /// The files' `_source_file` values, in [`super::walk::Flattener::files`] order.
    files: Arc<StringArray>,
    /// The files' `_landing_path` values, in the same order.
    landing: Arc<StringArray>,
    /// Zero keys, as many as the largest table has rows.
    zeros: ScalarBuffer<i32>,
    /// `_loaded_at` of as many rows.
    loaded_at: ScalarBuffer<i64>,
}

impl<'l> LineageStrings<'l> {
    /// The shared values of tables of up to `rows` rows whose rows came from `files`.
    pub(super) fn new(lineage: &'l Lineage, files: &[&str], columns: LineageColumns, rows: usize) -> Self {
        let names = StringArray::from_iter_values(files.iter());
        let landing = StringArray::from_iter(files.iter().map(|f| lineage.landing_path_of(f)));
        LineageStrings {
            lineage,
            columns,
            files: Arc::new(names),
            landing: Arc::new(landing),
            zeros: ScalarBuffer::from(vec![0; rows]),
            loaded_at: ScalarBuffer::from(vec![lineage.loaded_at_micros; rows]),
        }
    }

    /// A string column of `keys.len()` rows, row `i` being `values[keys[i]]`: a
    /// dictionary for [`LineageColumns::Dictionary`], else the values copied.
    fn column(&self, values: &Arc<StringArray>, keys: &[u32]) -> (DataType, ArrayRef) {
        if self.columns == LineageColumns::Dictionary {
            let keys = Int32Array::from_iter_values(keys.iter().map(|&k| k as i32));
            let values: ArrayRef = Arc::clone(values) as ArrayRef;
            let array = DictionaryArray::<Int32Type>::new(keys, values);
            (array.data_type().clone(), Arc::new(array))
        } else {
            let value = |k: u32| values.is_valid(k as usize).then(|| values.value(k as usize));
            let array = StringArray::from_iter(keys.iter().map(|&k| value(k)));
            (DataType::Utf8, Arc::new(array))
        }
    }

    /// `_source_file` of rows from the files `keys` index.
    pub(super) fn files(&self, keys: &[u32]) -> (DataType, ArrayRef) {
        self.column(&self.files, keys)
    }

    /// `_landing_path` of rows from the files `keys` index.
    pub(super) fn landing(&self, keys: &[u32]) -> (DataType, ArrayRef) {
        self.column(&self.landing, keys)
    }

    /// A string column of `values` (UTF-8: [`utf8_column`]); for
    /// [`LineageColumns::Dictionary`], a dictionary of its runs of equal values (a child
    /// row's parent and root ids repeat for its siblings).
    pub(super) fn runs<'v>(
        &self,
        column: &str,
        values: impl ExactSizeIterator<Item = &'v [u8]>,
    ) -> Result<(DataType, ArrayRef)> {
        if self.columns == LineageColumns::Plain {
            return Ok((DataType::Utf8, Arc::new(utf8_column(column, values)?)));
        }
        let mut keys = Vec::with_capacity(values.len());
        let mut distinct: Vec<&[u8]> = Vec::new();
        for v in values {
            if distinct.last() != Some(&v) {
                distinct.push(v);
            }
            keys.push(distinct.len() as i32 - 1);
        }
        let values = utf8_column(column, distinct.into_iter())?;
        Ok(dictionary(Int32Array::from(keys), values))
    }

    /// A column of `n` rows of `value`.
    pub(super) fn constant(&self, value: &str, n: usize) -> (DataType, ArrayRef) {
        if self.columns == LineageColumns::Dictionary {
            let keys = Int32Array::new(self.zeros.slice(0, n), None);
            dictionary(keys, StringArray::from(vec![value]))
        } else {
            (DataType::Utf8, Arc::new(StringArray::from(vec![value; n])))
        }
    }

    /// `_loaded_at` of `n` rows.
    pub(super) fn loaded_at(&self, n: usize) -> ArrayRef {
        Arc::new(TimestampMicrosecondArray::new(self.loaded_at.slice(0, n), None).with_timezone("UTC"))
    }
}

fn dictionary(keys: Int32Array, values: StringArray) -> (DataType, ArrayRef) {
    let array = DictionaryArray::<Int32Type>::new(keys, Arc::new(values));
    (array.data_type().clone(), Arc::new(array))
}
