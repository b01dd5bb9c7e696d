//! Row ids: a child row's `_id` (its element's place in the message, see [`ChildIds`]),
//! JSON pointer tokens, and string columns of ids.


use arrow::array::StringArray;

use crate::error::{Error, Result};
use crate::naming;


/// The `_id`s of a child table's rows as one text, built as the rows are (no allocation per
/// row): row `r`'s `_id` is `text[ends[r]..ends[r + 1]]`, and its `_parent_id` the first
/// `parent_lens[r]` bytes of it (0: the parent is a topic row, whose `_id` is the message
/// id, `_root_id`).
///
/// An `_id` is `<message id>` + `<pointer>` + `/<index>` repeated down the levels, where
/// `<pointer>` is the array's JSON pointer from its parent row, keys escaped by RFC 6901
/// (`~` → `~0`, `/` → `~1`), and the message id is escaped the same way. So the text up to
/// the first `/` is the escaped message id, which gives the message id back (escaping is
/// reversible), and the rest is the JSON pointer of the element in that message's payload
/// (`/holdings/3/lots/1`). In one payload a pointer names at most one value (a repeated
/// key is flattened once, the others are rescued), so two rows have the same `_id` only
/// if they come from the same message id, whatever table, array path, depth or topic fed
/// them. Message ids are unique across all the topics of a batch (staging drops a repeated
/// id whatever its topic), so the topic is not part of the id: within a batch a child
/// table's `_id`s are unique even when several topics feed it. Where message ids repeat
/// (a dedup key other than the id, or one message id loaded by two batches), child ids
/// repeat with them, as the topic rows' `_id`s do; `_batch_id` and `_topic` tell such rows
/// apart.
#[derive(Debug)]
pub(super) struct ChildIds {
    text: String,
    /// Arrow offsets of the ids in `text`: 0, then the end of each.
    ends: Vec<i32>,
    parent_lens: Vec<u32>,
    /// Whether `text` outgrew an Arrow string column (2 GiB): an error when it is built.
    overflow: bool,
}

impl Default for ChildIds {
    fn default() -> Self {
        ChildIds {
            text: String::new(),
            ends: vec![0],
            parent_lens: Vec::new(),
            overflow: false,
        }
    }
}

impl ChildIds {
    /// Adds the id `prefix` + `idx` of a row whose parent's `_id` is `parent_len` bytes
    /// of `prefix` (0: the message id).
    #[inline]
    pub(super) fn push(&mut self, prefix: &str, parent_len: u32, idx: usize) {
        self.text.push_str(prefix);
        push_index(&mut self.text, idx);
        match i32::try_from(self.text.len()) {
            Ok(end) => self.ends.push(end),
            Err(_) => {
                self.overflow = true;
                self.ends.push(i32::MAX);
            }
        }
        self.parent_lens.push(parent_len);
    }

    /// The `_id` of row `r`.
    pub(super) fn id(&self, r: usize) -> &str {
        &self.text[self.ends[r] as usize..self.ends[r + 1] as usize]
    }

    /// The `_parent_id` of row `r`, its message id being `root_id`.
    pub(super) fn parent_id<'s>(&'s self, r: usize, root_id: &'s str) -> &'s str {
        match self.parent_lens[r] as usize {
            0 => root_id,
            len => &self.id(r)[..len],
        }
    }

    /// The `_id` column: the text and offsets as they are, no copy. Their spare capacity
    /// is given back first (the allocator shrinks in place): the column may be held
    /// until the table's commit.
    pub(super) fn into_column(mut self) -> Result<StringArray> {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        if self.overflow {
            return Err(Error::arrow(
                naming::ID,
                arrow::error::ArrowError::ComputeError("column over 2 GiB".into()),
            ));
        }
        StringArray::try_new(
            arrow::buffer::OffsetBuffer::new(self.ends.into()),
            self.text.into_bytes().into(),
            None,
        )
        .map_err(|e| Error::arrow(naming::ID, e))
    }
}

/// Appends `i` in decimal.
#[inline]
fn push_index(out: &mut String, mut i: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (i % 10) as u8;
        i /= 10;
        if i == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// Appends `s` as a JSON pointer token (RFC 6901): `~` → `~0`, `/` → `~1`.
#[inline]
pub(super) fn push_token(out: &mut String, s: &str) {
    // Ids and keys are short: a plain scan beats setting up a vectorised search.
    if !s.bytes().any(|b| b == b'~' || b == b'/') {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// A string column of `values`, each known to be UTF-8 (message ids, child ids): built
/// from their bytes and checked once as a whole, not value by value.
pub(super) fn utf8_column<'v>(column: &str, values: impl Iterator<Item = &'v [u8]>) -> Result<StringArray> {
    // Sized for ids of about 32 bytes (grows if they are longer).
    let rows = values.size_hint().0;
    let mut bytes = Vec::with_capacity(rows * 32);
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i32);
    for v in values {
        bytes.extend_from_slice(v);
        let end = i32::try_from(bytes.len()).map_err(|_| {
            Error::arrow(
                column,
                arrow::error::ArrowError::ComputeError("column over 2 GiB".into()),
            )
        })?;
        offsets.push(end);
    }
    StringArray::try_new(
        arrow::buffer::OffsetBuffer::new(offsets.into()),
        bytes.into(),
        None,
    )
    .map_err(|e| Error::arrow(column, e))
}
