//! Arrow arrays filled from a column's cells, row by row, nulls where a row has none,
//! the cells' text prefetched ahead.

use std::borrow::Cow;

use arrow::array::{Array, NullBufferBuilder, StringArray};
use arrow::buffer::{NullBuffer, OffsetBuffer};

use super::Cell;

/// A string column of `n` rows from `cells`, each value as `text` gives it.
pub(super) fn fill_strings<'a>(
    n: usize,
    cells: &[(u32, Cell<'a>)],
    text: impl Fn(Cell<'a>) -> Cow<'a, str>,
) -> StringArray {
    let bytes: usize = cells.iter().map(|(_, c)| c.json().len()).sum();
    let mut b = StringColumn::with_capacity(n, bytes);
    fill(
        &mut b,
        n,
        cells,
        |b, c| b.push(&text(c)),
        StringColumn::push_null,
    );
    b.finish()
}

/// A string column built value by value: offsets, text and validity written directly
/// (an Arrow builder costs more per value). Panics past 2 GiB of text, as Arrow's do.
struct StringColumn {
    offsets: Vec<i32>,
    text: String,
    nulls: NullBufferBuilder,
}

impl StringColumn {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        StringColumn {
            offsets,
            text: String::with_capacity(bytes),
            nulls: NullBufferBuilder::new(rows),
        }
    }

    #[inline(always)]
    fn end(&mut self) {
        let end = i32::try_from(self.text.len()).expect("byte array offset overflow");
        self.offsets.push(end);
    }

    #[inline(always)]
    fn push(&mut self, value: &str) {
        self.text.push_str(value);
        self.end();
        self.nulls.append_non_null();
    }

    #[inline(always)]
    fn push_null(&mut self) {
        self.end();
        self.nulls.append_null();
    }

    fn finish(mut self) -> StringArray {
        let nulls = self.nulls.finish();
        string_array(self.offsets, self.text, nulls)
    }
}

/// The string column of `text` cut at `offsets`, which must be the lengths of `text` after
/// each whole `&str` appended to it (0 first, a null's value being empty); `nulls` as its
/// validity.
#[allow(unsafe_code)]
fn string_array(offsets: Vec<i32>, text: String, nulls: Option<NullBuffer>) -> StringArray {
    let offsets = OffsetBuffer::new(offsets.into());
    // SAFETY: the values are one `String` (valid UTF-8) and the offsets, as required
    // above, are char boundaries of it, never decreasing, from 0 to its length: what
    // `StringArray::new` would check. Checked in debug builds (every test) below.
    let array = unsafe { StringArray::new_unchecked(offsets, text.into_bytes().into(), nulls) };
    debug_assert!(array.to_data().validate_full().is_ok());
    array
}

/// Cells ahead of the one being appended whose text is prefetched. A column's values lie
/// a payload apart in the staged text (hundreds of bytes), so once a run of rows has been
/// parsed each value is a cache miss the hardware prefetcher cannot predict; asking for
/// the text a few cells early overlaps the misses (BENCHMARKS.md, "Per stage").
const PREFETCH_AHEAD: usize = 16;

/// A hint to load the cache line at `p`.
#[inline(always)]
#[allow(unsafe_code)]
pub(super) fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and reads nothing the program
    // observes, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

pub(super) fn fill<'a, B>(
    b: &mut B,
    n: usize,
    cells: &[(u32, Cell<'a>)],
    mut put: impl FnMut(&mut B, Cell<'a>),
    mut null: impl FnMut(&mut B),
) {
    let mut next = 0usize;
    for (i, &(row, cell)) in cells.iter().enumerate() {
        if let Some(&(_, ahead)) = cells.get(i + PREFETCH_AHEAD) {
            ahead.prefetch();
        }
        while next < row as usize {
            null(b);
            next += 1;
        }
        put(b, cell);
        next += 1;
    }
    while next < n {
        null(b);
        next += 1;
    }
}
