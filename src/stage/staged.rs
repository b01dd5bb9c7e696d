//! What staging one file gives: a [`StagedFile`] of [`Message`]s, each a few [`Span`]s of
//! the file's text, and its [`CorruptLine`]s.

/// A line that could not be read as a message; kept byte-exact in `_corrupt_records`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CorruptLine {
    /// `_source_file` of the line.
    pub source_file: String,
    /// 1-based line number.
    pub line: u64,
    /// Exact bytes of the line (without `\n`).
    #[serde(skip)]
    pub raw: Vec<u8>,
    /// Why it is corrupt, from the parser or the envelope check.
    pub reason: String,
}

/// Where a piece of a message's text is: a byte range of its file's text, or of the
/// file's side buffer (text staging composed: metadata objects, decoded ids, dedup keys).
///
/// 16 bytes: the length is a `u32`. Every piece is part of one line, or composed of
/// distinct parts of one line (dedup fields are listed once each, a check of the
/// configuration), and a line of `u32::MAX` bytes or more is corrupt before any span of
/// it is taken ([`crate::json`]). A message holds four spans, and a batch of millions of
/// messages holds all of them until it is staged (BENCHMARKS.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    start: usize,
    len: u32,
    side: bool,
}

impl Span {
    /// A span of `len` bytes from `start`; `len` saturates at `u32::MAX`, which no span of
    /// a line shorter than that reaches.
    pub(super) fn new(start: usize, len: usize, side: bool) -> Span {
        debug_assert!(len < u32::MAX as usize, "a span of a line over 4 GiB");
        Span {
            start,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            side,
        }
    }

    /// The span's length in bytes.
    pub(super) fn len(self) -> usize {
        self.len as usize
    }

    /// The span's bytes, in a file's `text` or its `side` buffer.
    pub(super) fn of<'a>(self, text: &'a [u8], side: &'a [u8]) -> &'a [u8] {
        let buf = if self.side { side } else { text };
        &buf[self.start..self.start + self.len()]
    }
}

/// A record's place in its file in one word: its first line (the low 36 bits, 1-based)
/// and how many records start on that line before it (the high 28 bits; elements of an
/// array written on one line). A message without an id gets one from its file and this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At(u64);

impl At {
    const LINE_BITS: u32 = 36;

    /// Line `line`, the `nth` record starting on it; either saturates past its bits (a
    /// file of 2^36 lines, or 2^28 records on one line, is far beyond any landing file).
    pub fn new(line: u64, nth: u32) -> At {
        let line = line.min((1 << Self::LINE_BITS) - 1);
        let nth = u64::from(nth).min((1 << (64 - Self::LINE_BITS)) - 1);
        At(nth << Self::LINE_BITS | line)
    }

    /// The 1-based first line.
    pub fn line(self) -> u64 {
        self.0 & ((1 << Self::LINE_BITS) - 1)
    }

    /// Records starting on the same line before this one.
    pub fn nth(self) -> u32 {
        (self.0 >> Self::LINE_BITS) as u32
    }
}

/// One message: envelope fields located, payload and metadata as exact JSON text.
///
/// Spans into its [`StagedFile`] instead of owned strings: staging a batch allocates per
/// file, not per message (the per-message strings and their frees were a fifth of the
/// historical batch's profile, BENCHMARKS.md). Read them with [`StagedFile::text`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The topic, as an index into [`StagedFile::topics`].
    pub topic: u32,
    /// The message id (`None` when no id field is configured).
    pub id: Option<Span>,
    /// Its record's place in its file.
    pub at: At,
    /// JSON object text of the other envelope fields, if the line had a payload field.
    pub meta: Option<Span>,
    /// JSON text of the payload.
    pub payload: Span,
    /// The dedup key from [`crate::config::EnvelopeConfig::dedup_fields`] (their raw
    /// values), when configured and every field is present.
    pub dedup_key: Option<Span>,
    /// [`super::ids::id_hash`] of the dedup key, else of the id (0 without either):
    /// computed while the line is in cache, so dedup only probes its table. 32 bits, in
    /// the padding after `topic`: a larger message cost the historical batch 130 MB of
    /// peak RSS.
    pub key_hash: u32,
}

/// What staging one file gave.
#[derive(Debug, Default)]
pub struct StagedFile {
    /// Messages in line order.
    pub messages: Vec<Message>,
    /// Corrupt lines in line order.
    pub corrupt: Vec<CorruptLine>,
    /// Non-blank lines.
    pub lines: u64,
    /// Blank or whitespace-only lines (not records).
    pub blank_lines: u64,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Distinct topics of the file's messages, in order of first appearance.
    pub topics: Vec<String>,
    /// The file's text (decompressed), which most spans point into.
    pub(super) text: Vec<u8>,
    /// Text staging composed for the file's messages.
    pub(super) side: Vec<u8>,
}

impl StagedFile {
    /// The text of a span of this file's messages, not validated again: the line it
    /// comes from was (the UTF-8 check of [`super::parse::parse_line`], before anything
    /// of it is recorded). Debug builds (the tests, the fuzz targets) check it anyway.
    #[allow(unsafe_code)]
    pub fn text(&self, span: Span) -> std::borrow::Cow<'_, str> {
        let bytes = self.bytes(span);
        debug_assert!(std::str::from_utf8(bytes).is_ok(), "a span is not UTF-8");
        // SAFETY: every span is UTF-8. A span of the file's text is a sub-slice of a
        // line that passed the UTF-8 check in `parse_line`, cut at a JSON token's
        // first and last byte (ASCII structural characters, quotes or a scalar's ends),
        // which are character boundaries; a span of the side buffer was composed of such
        // sub-slices, ASCII separators (`{`, `,`, `:`, `}`, 0x01) and ids decoded into
        // `String`s. A second validation here was 3-4 % of a dense load's CPU
        // (BENCHMARKS.md).
        std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// The bytes of a span (no UTF-8 check: for comparing, not for output).
    pub(super) fn bytes(&self, span: Span) -> &[u8] {
        span.of(&self.text, &self.side)
    }

    /// The topic of a message of this file.
    #[cfg(any(test, feature = "testing"))]
    pub fn topic(&self, m: &Message) -> &str {
        &self.topics[m.topic as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dedup's hash rides in `topic`'s padding and a span's length is 32 bits: every byte
    /// of a message is held for each of a batch's messages until it is staged (a larger
    /// message cost the historical batch 130 MB of peak RSS).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_message_stays_80_bytes() {
        assert_eq!(std::mem::size_of::<Span>(), 16);
        assert_eq!(std::mem::size_of::<Option<Span>>(), 16);
        assert_eq!(std::mem::size_of::<Message>(), 80);
    }
}
