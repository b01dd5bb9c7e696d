//! Stage: data files → one Arrow staging table, grouped by topic.
//!
//! Every non-blank line is parsed exactly once, by [`crate::json`]'s strict reader with
//! only the top level materialised (no per-row value tree). A line that is a JSON object
//! with a usable topic (and id, when an id field is configured) becomes a staged message; anything else becomes a [`CorruptLine`] with the
//! parser's reason and the exact bytes. Duplicates by message id are dropped, first
//! occurrence (file order, then line) wins.
//!
//! The payload and metadata are kept as the exact JSON text the source sent (found with a
//! top-level structural scan of the validated line), so staging is lossless: numbers keep
//! their literal text and nothing is re-encoded. Flattening parses only the payload.
//!
//! This stage does no Delta I/O; it only reads the landing files.

mod pieces;
pub(crate) mod spill;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rayon::prelude::*;

use crate::config::EnvelopeConfig;
use crate::error::{Error, Result};
use crate::json::{Doc, Kind, Node};
use crate::naming;
use crate::source::discover::SourceFile;
pub use self::pieces::Pieces;
use crate::source::read::{Decoded, Line};
use crate::source::records::{ARRAY_NOT_CLOSED, Cutter, Record};

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
    fn new(start: usize, len: usize, side: bool) -> Span {
        debug_assert!(len < u32::MAX as usize, "a span of a line over 4 GiB");
        Span {
            start,
            len: u32::try_from(len).unwrap_or(u32::MAX),
            side,
        }
    }

    /// The span's length in bytes.
    fn len(self) -> usize {
        self.len as usize
    }

    /// The span's bytes, in a file's `text` or its `side` buffer.
    fn of<'a>(self, text: &'a [u8], side: &'a [u8]) -> &'a [u8] {
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
    /// The dedup key from [`EnvelopeConfig::dedup_fields`] (their raw values), when
    /// configured and every field is present.
    pub dedup_key: Option<Span>,
    /// [`id_hash`] of the dedup key, else of the id (0 without either): computed while
    /// the line is in cache, so dedup only probes its table. 32 bits, in the padding
    /// after `topic`: a larger message cost the historical batch 130 MB of peak RSS.
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
    text: Vec<u8>,
    /// Text staging composed for the file's messages.
    side: Vec<u8>,
}

impl StagedFile {
    /// The text of a span of this file's messages, not validated again: the line it
    /// comes from was (the UTF-8 check of [`parse_line`], before anything of it is
    /// recorded). Debug builds (the tests, the fuzz targets) check it anyway.
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
    fn bytes(&self, span: Span) -> &[u8] {
        span.of(&self.text, &self.side)
    }

    /// The topic of a message of this file.
    #[cfg(any(test, feature = "testing"))]
    pub fn topic(&self, m: &Message) -> &str {
        &self.topics[m.topic as usize]
    }
}

/// Per-file counts, in file order.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FileStats {
    /// `_source_file`.
    pub file: String,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Non-blank lines.
    pub lines: u64,
    /// Messages staged (after dedup).
    pub messages: u64,
    /// Corrupt lines.
    pub corrupt: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
}

impl FileStats {
    /// Adds the counts of the next piece of the same file.
    pub fn add(&mut self, piece: &FileStats) {
        self.bytes += piece.bytes;
        self.lines += piece.lines;
        self.messages += piece.messages;
        self.corrupt += piece.corrupt;
        self.duplicates += piece.duplicates;
    }
}

/// The staging table: the batch parsed once, grouped by topic.
#[derive(Debug)]
pub struct Staging {
    /// Each topic's record batches (schema [`staging_schema`]), rows in (file, line)
    /// order across the batches: one batch per group of files staged together.
    pub topics: BTreeMap<String, Vec<RecordBatch>>,
    /// Corrupt lines in (file, line) order.
    pub corrupt: Vec<CorruptLine>,
    /// Per-file counts.
    pub files: Vec<FileStats>,
    /// Duplicate messages dropped.
    pub duplicates: u64,
}

impl Staging {
    /// Non-blank lines in the batch.
    pub fn lines(&self) -> u64 {
        self.files.iter().map(|f| f.lines).sum()
    }
    /// Messages staged.
    #[cfg(any(test, feature = "testing"))]
    pub fn messages(&self) -> u64 {
        self.topics
            .values()
            .flatten()
            .map(|b| b.num_rows() as u64)
            .sum()
    }
}

/// Schema of the staging table.
pub fn staging_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(naming::TOPIC, DataType::Utf8, false),
        Field::new(naming::ID, DataType::Utf8, false),
        Field::new(naming::SOURCE_FILE, DataType::Utf8, false),
        Field::new(naming::LINE, DataType::Int64, false),
        Field::new(naming::META, DataType::Utf8, true),
        Field::new(naming::PAYLOAD, DataType::Utf8, false),
    ]))
}

/// Reusable per-worker buffers, so parsing allocates nothing per line once warm.
struct Scratch {
    /// The strict reader's node storage.
    nodes: Vec<Node>,
    /// The current file's topics → index in [`StagedFile::topics`].
    topic_index: HashMap<String, u32>,
    /// The current line's top-level members: byte ranges of key and value.
    members: Vec<(Range<usize>, Range<usize>)>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            nodes: Vec::new(),
            topic_index: HashMap::new(),
            members: Vec::new(),
        }
    }
}

/// Stages every file on the current rayon pool; a file that cannot be read fails the
/// whole stage (loading part of a batch would replace its rows with fewer).
#[cfg(any(test, feature = "testing"))]
pub fn stage(files: &[SourceFile], envelope: &EnvelopeConfig) -> Result<Staging> {
    stage_with_progress(
        files,
        envelope,
        (&|| {}, false),
        &mut IdSet::default(),
        &crate::source::read::read_file,
    )
}

/// Reads one data file's text (decoded).
pub type FileReader<'a> = dyn Fn(&SourceFile) -> Result<Decoded> + Sync + 'a;

/// [`stage`], calling `on_file` after each file (from worker threads); `in_order`: the
/// threads take the files one by one in order (files arriving from a fetch in that
/// order), else each a range of them. `seen` holds the message ids of earlier chunks of
/// the same batch, so dedup spans chunks.
pub fn stage_with_progress(
    files: &[SourceFile],
    envelope: &EnvelopeConfig,
    (on_file, in_order): (&(dyn Fn() + Sync), bool),
    seen: &mut IdSet,
    reader: &FileReader<'_>,
) -> Result<Staging> {
    let stage_one = |scratch: &mut Scratch, file: &SourceFile| -> Result<StagedFile> {
        let decoded = reader(file)?;
        let staged = stage_bytes(decoded, file, envelope, scratch);
        on_file();
        Ok(staged)
    };
    let staged: Vec<Result<StagedFile>> = if in_order {
        // Every thread takes the next file in order (the order they arrive in from a
        // fetch that hands them over as they come), not a range of its own; the results
        // are put back in file order.
        let mut numbered: Vec<(usize, Result<StagedFile>)> = files
            .iter()
            .enumerate()
            .par_bridge()
            .map_init(Scratch::new, |scratch, (i, file)| (i, stage_one(scratch, file)))
            .collect();
        numbered.sort_unstable_by_key(|(i, _)| *i);
        numbered.into_iter().map(|(_, staged)| staged).collect()
    } else {
        files
            .par_iter()
            .map_init(Scratch::new, |scratch, file| stage_one(scratch, file))
            .collect()
    };
    let staged = staged.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(assemble(files, staged, dedup_by_id(envelope), seen))
}

/// Whether messages are deduplicated by their id (an id field and no dedup fields).
fn dedup_by_id(envelope: &EnvelopeConfig) -> bool {
    envelope.id_field.is_some() && envelope.dedup_fields.is_none()
}

/// Stages one file's bytes (pure; used by tests and benches).
#[cfg(any(test, feature = "testing"))]
pub fn stage_file_bytes(bytes: &[u8], source_file: &str, envelope: &EnvelopeConfig) -> StagedFile {
    let file = SourceFile {
        path: source_file.into(),
        name: source_file.to_string(),
        bytes: bytes.len() as u64,
        compression: crate::source::codec::Compression::None,
        folder: 0,
        modified: None,
        etag: None,
    };
    stage_bytes(Decoded::plain(bytes.to_vec()), &file, envelope, &mut Scratch::new())
}

/// Stages a whole file's text: its records in the envelope's format (decided by the text
/// for `auto`), and a corrupt record for a stream that broke.
fn stage_bytes(
    decoded: Decoded,
    file: &SourceFile,
    envelope: &EnvelopeConfig,
    scratch: &mut Scratch,
) -> StagedFile {
    let mut cutter = Cutter::new(envelope.format.of_text(&decoded.bytes));
    stage_text(decoded, (&mut cutter, true), file, envelope, scratch).0
}

/// Stages the whole records of `text` (the next piece of `file`, all of it with `eof`)
/// as `cutter` cuts them; with `eof`, the stream's damage too. Returns the staged piece
/// and the bytes after its last whole record, which start the next piece.
fn stage_text(
    decoded: Decoded,
    (cutter, eof): (&mut Cutter, bool),
    file: &SourceFile,
    envelope: &EnvelopeConfig,
    scratch: &mut Scratch,
) -> (StagedFile, Vec<u8>) {
    let Decoded {
        mut bytes,
        codec,
        damage,
    } = decoded;
    let mut out = StagedFile::default();
    scratch.topic_index.clear();
    let taken = cutter.cut(&bytes, eof, &mut |record| {
        // A broken stream is one corrupt record, whatever it cut short.
        if damage.is_some() && record.corrupt == Some(ARRAY_NOT_CLOSED) {
            return;
        }
        stage_record(&mut out, &bytes, (record, &file.name), envelope, scratch);
    });
    if let Some(damage) = damage {
        out.lines += 1;
        out.corrupt.push(CorruptLine {
            source_file: file.name.clone(),
            line: cutter.line(),
            reason: damage.describe(codec.unwrap_or(file.compression), file.bytes),
            raw: damage.tail,
        });
    }
    let rest = bytes[taken..].to_vec();
    bytes.truncate(taken);
    out.bytes = taken as u64;
    out.text = bytes;
    (out, rest)
}

/// Stages one record of `source_file` into `out`: a message, a corrupt record, or
/// nothing for a blank line.
fn stage_record(
    out: &mut StagedFile,
    bytes: &[u8],
    (record, source_file): (Record<'_>, &str),
    envelope: &EnvelopeConfig,
    scratch: &mut Scratch,
) {
    let Record { line, nth, corrupt } = record;
    if corrupt.is_none() && line.is_blank() {
        out.blank_lines += 1;
        return;
    }
    out.lines += 1;
    let parsed = match corrupt {
        Some(reason) => Err(reason.to_string()),
        None => {
            let mut sink = Sink {
                base: bytes,
                side: &mut out.side,
                topics: &mut out.topics,
            };
            parse_line(&line, envelope, scratch, &mut sink)
        }
    };
    match parsed {
        Ok(mut m) => {
            m.at = At::new(line.number, nth);
            out.messages.push(m);
        }
        Err(reason) => out.corrupt.push(CorruptLine {
            source_file: source_file.to_string(),
            line: line.number,
            raw: line.raw.to_vec(),
            reason,
        }),
    }
}

/// Where [`parse_line`] records a message's text: spans of `base` (the file's text), or
/// of `side` for text it composes; topics are interned in `topics`.
struct Sink<'b> {
    base: &'b [u8],
    side: &'b mut Vec<u8>,
    topics: &'b mut Vec<String>,
}

impl Sink<'_> {
    /// `part` is a sub-slice of `base`.
    fn span(&self, part: &[u8]) -> Span {
        let start = part.as_ptr() as usize - self.base.as_ptr() as usize;
        Span::new(start, part.len(), false)
    }

    /// The bytes of a span recorded here.
    fn bytes(&self, span: Span) -> &[u8] {
        span.of(self.base, self.side)
    }

    /// Appends `parts` to the side buffer as one text.
    fn compose<'p>(&mut self, parts: impl IntoIterator<Item = &'p [u8]>) -> Span {
        let start = self.side.len();
        for p in parts {
            self.side.extend_from_slice(p);
        }
        Span::new(start, self.side.len() - start, true)
    }
}

/// Parses one line into a message, or says why it is corrupt.
fn parse_line(
    line: &Line<'_>,
    env: &EnvelopeConfig,
    scratch: &mut Scratch,
    sink: &mut Sink<'_>,
) -> Result<Message, String> {
    // One validating pass over the whole line (UTF-8, then bronze's strict reader with
    // only the top level materialised) gives the members' exact spans; nested values
    // stay unparsed text (BENCHMARKS.md, "Per stage": 35 % less CPU than a simd-json tape
    // followed by a structural scan).
    // SIMD validation: std's scalar check was 4-5 % of a dense load's CPU (non-ASCII
    // text; BENCHMARKS.md).
    let text = simdutf8::basic::from_utf8(line.text).map_err(|_| "invalid UTF-8".to_string())?;
    let doc = match Doc::parse_reusing(text, 1, std::mem::take(&mut scratch.nodes)) {
        Ok(doc) => doc,
        Err((e, nodes)) => {
            scratch.nodes = nodes;
            return Err(format!("invalid JSON: {e}"));
        }
    };
    let is_object = doc.kind(doc.root()) == Kind::Object;
    // Ranges of the line, not nodes, which go back to the scratch; both buffers are
    // reused line after line.
    let mut members = std::mem::take(&mut scratch.members);
    members.clear();
    if is_object {
        let at = |s: &str| {
            let start = s.as_ptr() as usize - text.as_ptr() as usize;
            start..start + s.len()
        };
        members.extend(
            doc.members(doc.root())
                .map(|(k, v)| (at(doc.raw(k)), at(doc.raw(v)))),
        );
    }
    scratch.nodes = doc.into_nodes();
    let message = if is_object {
        envelope(line, &members, env, &mut scratch.topic_index, sink)
    } else {
        Err("not a JSON object".to_string())
    };
    scratch.members = members;
    message
}

/// The message of a line that is a JSON object whose top-level `members` are given.
fn envelope(
    line: &Line<'_>,
    members: &[(Range<usize>, Range<usize>)],
    env: &EnvelopeConfig,
    topic_index: &mut HashMap<String, u32>,
    sink: &mut Sink<'_>,
) -> Result<Message, String> {
    let field = |i: usize| {
        let (k, v) = &members[i];
        (&line.text[k.clone()], &line.text[v.clone()])
    };
    let fields = envelope_fields(members.len(), field, env);
    // The other members, in order: the metadata (or, without a payload field, the
    // payload).
    let found = [fields.topic, fields.id, fields.payload];
    let taken = found.map(|f| f.map(|(i, _)| i));
    let others = || {
        (0..members.len())
            .filter(move |i| !taken.contains(&Some(*i)))
            .map(field)
    };
    let [topic, id, payload] = found.map(|f| f.map(|(_, v)| v));
    let topic = topic_name(topic, &env.topic_field)?;
    let id = match &env.id_field {
        None => None,
        Some(id_field) => Some(message_id(id, id_field, sink)?),
    };
    let topic = intern_topic(topic, topic_index, sink);
    let mut object_text = || {
        let members = others().enumerate().flat_map(|(i, (k, v))| {
            let comma: &[u8] = if i > 0 { b"," } else { b"" };
            [comma, k, b":", v]
        });
        sink.compose(std::iter::once(&b"{"[..]).chain(members).chain([&b"}"[..]]))
    };
    let (meta, payload) = match payload {
        Some(p) => {
            let meta = others().next().is_some().then(&mut object_text);
            (meta, sink.span(p))
        }
        None => (None, object_text()),
    };
    let dedup_key = dedup_key(&fields.dedup_parts, sink);
    let key_hash = dedup_key.or(id).map_or(0, |key| id_hash(sink.bytes(key)));
    Ok(Message {
        dedup_key,
        key_hash,
        topic,
        id,
        at: At::new(line.number, 0),
        meta,
        payload,
    })
}

/// The first member named like each envelope field, as (member index, raw value), and
/// the dedup fields' raw values.
struct EnvelopeFields<'l> {
    topic: Option<(usize, &'l [u8])>,
    id: Option<(usize, &'l [u8])>,
    payload: Option<(usize, &'l [u8])>,
    dedup_parts: Vec<Option<&'l [u8]>>,
}

/// Finds the envelope fields among `len` members (`field(i)`: member `i`'s raw key and
/// value).
#[inline]
fn envelope_fields<'l>(
    len: usize,
    field: impl Fn(usize) -> (&'l [u8], &'l [u8]),
    env: &EnvelopeConfig,
) -> EnvelopeFields<'l> {
    let mut found = EnvelopeFields {
        topic: None,
        id: None,
        payload: None,
        dedup_parts: match &env.dedup_fields {
            Some(f) => vec![None; f.len()],
            None => Vec::new(),
        },
    };
    for i in 0..len {
        let (key_raw, value) = field(i);
        let key = decode_key(key_raw);
        let key = key.as_deref();
        if let (Some(names), Some(k)) = (&env.dedup_fields, key) {
            for (slot, name) in found.dedup_parts.iter_mut().zip(names) {
                if slot.is_none() && name == k {
                    *slot = Some(value);
                }
            }
        }
        if key == Some(env.topic_field.as_str()) && found.topic.is_none() {
            found.topic = Some((i, value));
        } else if key.is_some() && key == env.id_field.as_deref() && found.id.is_none() {
            found.id = Some((i, value));
        } else if key.is_some() && key == env.payload_field.as_deref() && found.payload.is_none() {
            found.payload = Some((i, value));
        }
    }
    found
}

/// The topic of a message from its topic field's raw value: a non-empty string.
#[inline]
fn topic_name<'l>(
    raw: Option<&'l [u8]>,
    topic_field: &str,
) -> Result<std::borrow::Cow<'l, str>, String> {
    match raw.filter(|v| v.first() == Some(&b'"')).map(decode_key) {
        None if raw.is_none() => Err(format!("missing topic field `{topic_field}`")),
        Some(Some(t)) if !t.is_empty() => Ok(t),
        _ => Err(format!(
            "topic field `{topic_field}` is not a non-empty string"
        )),
    }
}

/// The message id from the id field's raw value: a non-empty string or an integer.
#[inline]
fn message_id(raw: Option<&[u8]>, id_field: &str, sink: &mut Sink<'_>) -> Result<Span, String> {
    let raw = raw.ok_or_else(|| format!("missing id field `{id_field}`"))?;
    id_span(raw, sink)
        .ok_or_else(|| format!("id field `{id_field}` is not a non-empty string or an integer"))
}

/// The topic's index in `sink.topics`, added on its first message.
#[inline]
fn intern_topic(
    topic: std::borrow::Cow<'_, str>,
    topic_index: &mut HashMap<String, u32>,
    sink: &mut Sink<'_>,
) -> u32 {
    match topic_index.get(topic.as_ref()) {
        Some(&t) => t,
        None => {
            let t = sink.topics.len() as u32;
            sink.topics.push(topic.to_string());
            topic_index.insert(topic.into_owned(), t);
            t
        }
    }
}

/// The dedup key from the dedup fields' raw values (`None` unless every one is there):
/// raw JSON values joined by a byte JSON text cannot hold outside strings.
#[inline]
fn dedup_key(parts: &[Option<&[u8]>], sink: &mut Sink<'_>) -> Option<Span> {
    if parts.is_empty() {
        return None;
    }
    parts
        .iter()
        .copied()
        .collect::<Option<Vec<_>>>()
        .map(|parts| {
            let mut joined = Vec::with_capacity(parts.len() * 2);
            for (i, p) in parts.into_iter().enumerate() {
                if i > 0 {
                    joined.push(&b"\x01"[..]);
                }
                joined.push(p);
            }
            sink.compose(joined)
        })
}

/// Decodes a key span (with quotes).
fn decode_key(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let inner = raw.get(1..raw.len().checked_sub(1)?)?;
    if inner.contains(&b'\\') {
        serde_json::from_slice::<String>(raw).ok().map(Into::into)
    } else {
        std::str::from_utf8(inner).ok().map(Into::into)
    }
}

/// An id is a non-empty string or an integer (kept as its literal text): the span of its
/// text, decoded into the side buffer when it has escapes.
fn id_span(raw: &[u8], sink: &mut Sink<'_>) -> Option<Span> {
    match raw.first()? {
        b'"' => match decode_key(raw)? {
            std::borrow::Cow::Borrowed("") => None,
            // Unescaped: the text between the quotes, a sub-slice of the line.
            std::borrow::Cow::Borrowed(s) => Some(sink.span(s.as_bytes())),
            std::borrow::Cow::Owned(s) => (!s.is_empty()).then(|| sink.compose([s.as_bytes()])),
        },
        b'-' | b'0'..=b'9' if raw.iter().all(|c| c.is_ascii_digit() || *c == b'-') => {
            Some(sink.span(raw))
        }
        _ => None,
    }
}

/// The hash of message ids and dedup keys: one random seed per process, so staging
/// threads hash each key while its line is in cache and every [`IdSet`] probes with it.
static ID_HASHER: std::sync::LazyLock<ahash::RandomState> =
    std::sync::LazyLock::new(ahash::RandomState::new);

/// [`IdSet`]'s hash of an id or dedup key. 32 bits are plenty to find a key among
/// millions (equal hashes only cost a comparison of the bytes).
pub(crate) fn id_hash(bytes: &[u8]) -> u32 {
    ID_HASHER.hash_one(bytes) as u32
}

/// Bits of a key's hash that pick its shard of an [`IdSet`].
const ID_SHARD_BITS: u32 = 4;

/// Shards of an [`IdSet`]: equal keys share a shard, so shards dedup in parallel.
const ID_SHARDS: usize = 1 << ID_SHARD_BITS;

/// The shard of a key: the top [`ID_SHARD_BITS`] of its hash.
fn shard_of(hash: u32) -> usize {
    (hash >> (u32::BITS - ID_SHARD_BITS)) as usize
}

/// A key's hash as a shard's table takes it: spread over 64 bits (hashbrown picks the
/// bucket from the low bits, a tag from the top 7).
fn table_hash(hash: u32) -> u64 {
    u64::from(hash).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Message ids (or dedup keys) seen so far in a batch, across files and staging chunks.
///
/// Packed for batches of millions of messages: every id's bytes go to one arena and the
/// table holds `(offset, length)`, about 15-25 bytes plus the id per entry instead of a
/// `String` each (~60 bytes and one allocation per id). Sharded by hash, so that
/// [`IdSet::insert_all`] inserts a batch's keys on every thread of the pool: one
/// thread took 110 ms of the historical batch's staging, the other core idle.
pub struct IdSet {
    shards: Vec<IdShard>,
}

impl Default for IdSet {
    fn default() -> Self {
        IdSet {
            shards: (0..ID_SHARDS).map(|_| IdShard::default()).collect(),
        }
    }
}

/// One shard of an [`IdSet`].
#[derive(Default)]
struct IdShard {
    arena: Vec<u8>,
    table: hashbrown::HashTable<IdEntry>,
}

/// A key of an [`IdShard`]: where its bytes are in the arena, and its [`id_hash`], so
/// growing the table never reads the arena. 12 bytes: a shard's arena holds at most
/// 4 GiB of ids (64 GiB for a batch), far beyond what a batch's ids take in memory.
#[derive(Clone, Copy)]
struct IdEntry {
    offset: u32,
    len: u32,
    hash: u32,
}

impl IdShard {
    /// Adds `bytes`, whose [`id_hash`] is `hash`; `false` when it was already there.
    /// A key that no longer fits the shard's arena (4 GiB of ids in one shard) is taken
    /// as new and not kept: its later copies are kept too, nothing is dropped.
    fn insert(&mut self, hash: u32, bytes: &[u8]) -> bool {
        let arena = &self.arena;
        let found = self.table.find(table_hash(hash), |e| {
            e.hash == hash && &arena[e.offset as usize..][..e.len as usize] == bytes
        });
        if found.is_some() {
            return false;
        }
        let (Ok(offset), Ok(len)) = (
            u32::try_from(self.arena.len()),
            u32::try_from(bytes.len()),
        ) else {
            return true;
        };
        self.arena.extend_from_slice(bytes);
        self.table.insert_unique(
            table_hash(hash),
            IdEntry { offset, len, hash },
            |e| table_hash(e.hash),
        );
        true
    }
}

impl IdSet {
    /// Adds `id`; `false` when it was already there.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert(&mut self, id: &str) -> bool {
        self.insert_bytes(id.as_bytes())
    }

    /// Adds an id given as bytes; `false` when it was already there.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert_bytes(&mut self, bytes: &[u8]) -> bool {
        let hash = id_hash(bytes);
        self.shards[shard_of(hash)].insert(hash, bytes)
    }

    /// Adds `keys` (each with its [`id_hash`]; `None` is never a duplicate) as if one by
    /// one in order, the shards in parallel on the current rayon pool; whether each was
    /// new.
    pub(crate) fn insert_all(&mut self, keys: &[Option<(u32, &[u8])>]) -> Vec<bool> {
        let mut by_shard: Vec<Vec<u32>> = vec![Vec::new(); ID_SHARDS];
        for (i, key) in keys.iter().enumerate() {
            if let Some((hash, _)) = key {
                by_shard[shard_of(*hash)].push(i as u32);
            }
        }
        let duplicates: Vec<Vec<u32>> = self
            .shards
            .par_iter_mut()
            .zip(by_shard)
            .map(|(shard, indices)| {
                // Sized once for the keys to come (at most all new): no rehash midway.
                shard.table.reserve(indices.len(), |e| table_hash(e.hash));
                indices
                    .into_iter()
                    .filter(|&i| {
                        let (hash, bytes) = keys[i as usize].expect("indexed keys are Some");
                        !shard.insert(hash, bytes)
                    })
                    .collect()
            })
            .collect();
        let mut fresh = vec![true; keys.len()];
        for i in duplicates.into_iter().flatten() {
            fresh[i as usize] = false;
        }
        fresh
    }

    /// Heap bytes the set holds (its arenas' and tables' capacity): about 35-45 bytes
    /// per id of ~13 bytes, ~90 MB for a batch of 2.3 M messages.
    pub fn heap_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<IdEntry>() + 1;
        self.shards
            .iter()
            .map(|s| (s.arena.capacity() + s.table.capacity() * entry) as u64)
            .sum()
    }

    /// Ids held.
    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.table.len()).sum()
    }

    /// Whether no id was added.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.table.is_empty())
    }
}

/// Dedups across files (file order, then line) and builds each topic's record batches.
///
/// Dedup keeps the first of equal keys in message order ([`IdSet::insert_all`], by
/// shard in parallel). The files are then cut
/// into groups of consecutive files, and each group is built on the current rayon pool
/// into one batch per topic (columns sized exactly up front, copied from spans of the
/// file's text while it is hot in cache); a group's files are freed as soon as it is
/// built, so the batch's text and its Arrow copy are never both whole in memory.
pub(crate) fn assemble(
    files: &[SourceFile],
    mut staged: Vec<StagedFile>,
    dedup: bool,
    seen: &mut IdSet,
) -> Staging {
    let corrupt_per_file: Vec<u64> = staged.iter().map(|f| f.corrupt.len() as u64).collect();
    let corrupt: Vec<CorruptLine> = staged
        .iter_mut()
        .flat_map(|f| std::mem::take(&mut f.corrupt))
        .collect();
    let started = std::time::Instant::now();
    let fresh = {
        let keys: Vec<Option<(u32, &[u8])>> = staged
            .iter()
            .flat_map(|sf| {
                sf.messages.iter().map(move |m| match (m.dedup_key, m.id) {
                    (Some(key), _) => Some((m.key_hash, sf.bytes(key))),
                    (None, Some(id)) if dedup => Some((m.key_hash, sf.bytes(id))),
                    _ => None,
                })
            })
            .collect();
        seen.insert_all(&keys)
    };
    let (stats, duplicates) = keep_fresh(files, &mut staged, fresh, &corrupt_per_file);
    let groups = file_groups(staged);
    let deduped = std::time::Instant::now();
    let schema = staging_schema();
    let built: Vec<Vec<(String, RecordBatch)>> = groups
        .into_par_iter()
        .with_max_len(1)
        .map(|group| build_group(files, group, &schema))
        .collect();
    tracing::debug!(
        files = files.len(),
        dedup_ms = (deduped - started).as_millis() as u64,
        build_ms = deduped.elapsed().as_millis() as u64,
        "staging assembled"
    );
    let mut topics: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for (topic, batch) in built.into_iter().flatten() {
        topics.entry(topic).or_default().push(batch);
    }
    Staging {
        topics,
        corrupt,
        files: stats,
        duplicates,
    }
}

/// Drops the messages `fresh` (one per message, in file order) marks as duplicates
/// from `staged`; each file's stats, and the duplicates dropped in all.
fn keep_fresh(
    files: &[SourceFile],
    staged: &mut [StagedFile],
    fresh: Vec<bool>,
    corrupt_per_file: &[u64],
) -> (Vec<FileStats>, u64) {
    let mut stats = Vec::with_capacity(files.len());
    let mut duplicates = 0;
    let mut fresh = fresh.into_iter();
    for (fi, (file, sf)) in files.iter().zip(staged).enumerate() {
        let before = sf.messages.len();
        sf.messages.retain(|_| fresh.next().unwrap_or(true));
        let fs = FileStats {
            file: file.name.clone(),
            bytes: sf.bytes,
            lines: sf.lines,
            messages: sf.messages.len() as u64,
            corrupt: corrupt_per_file[fi],
            duplicates: (before - sf.messages.len()) as u64,
        };
        duplicates += fs.duplicates;
        stats.push(fs);
    }
    (stats, duplicates)
}

/// `staged` cut into groups of consecutive files (with their indices) of about an
/// eighth of a thread's share of the bytes each.
fn file_groups(staged: Vec<StagedFile>) -> Vec<Vec<(usize, StagedFile)>> {
    // Groups of about an eighth of a thread's share: enough groups to keep every thread
    // busy, few enough that topics get a handful of batches, not one per file.
    let total: u64 = staged.iter().map(|f| f.bytes).sum();
    let threads = rayon::current_num_threads().max(1) as u64;
    let group_bytes = (total / (threads * 8)).clamp(1 << 20, 64 << 20);
    let mut groups: Vec<Vec<(usize, StagedFile)>> = Vec::new();
    let mut in_group = u64::MAX;
    for (fi, sf) in staged.into_iter().enumerate() {
        if in_group >= group_bytes {
            groups.push(Vec::new());
            in_group = 0;
        }
        in_group += sf.bytes.max(1);
        if let Some(g) = groups.last_mut() {
            g.push((fi, sf));
        }
    }
    groups
}

/// One batch per topic of a group of consecutive files (their kept messages, in order);
/// the files are dropped here, on the pool thread.
fn build_group(
    files: &[SourceFile],
    group: Vec<(usize, StagedFile)>,
    schema: &SchemaRef,
) -> Vec<(String, RecordBatch)> {
    let (names, local) = group_topics(&group);
    let sizes = topic_sizes(files, &group, &local, names.len());
    let mut builders: Vec<Builders> = names
        .iter()
        .zip(&sizes)
        .map(|(name, s)| Builders::with_sizes(name, s))
        .collect();
    for ((fi, sf), map) in group.iter().zip(&local) {
        let (source, key) = (&files[*fi].name, files[*fi].id_key());
        for m in &sf.messages {
            let t = map[m.topic as usize];
            builders[t].append(names[t], (source, key), sf, m);
        }
    }
    names
        .iter()
        .zip(builders)
        .map(|(name, b)| (name.to_string(), b.finish(schema)))
        .collect()
}

/// The group's topics in order of first appearance, and per file, its file-local topic
/// indices mapped to the group's.
fn group_topics(group: &[(usize, StagedFile)]) -> (Vec<&str>, Vec<Vec<usize>>) {
    let mut names: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut local: Vec<Vec<usize>> = Vec::with_capacity(group.len());
    for (_, sf) in group {
        let mut map = Vec::with_capacity(sf.topics.len());
        for t in &sf.topics {
            let i = *index.entry(t.as_str()).or_insert_with(|| {
                names.push(t.as_str());
                names.len() - 1
            });
            map.push(i);
        }
        local.push(map);
    }
    (names, local)
}

/// One topic's rows in a group and the bytes its columns need.
#[derive(Default)]
struct Sizes {
    rows: usize,
    id_bytes: usize,
    file_bytes: usize,
    meta_bytes: usize,
    payload_bytes: usize,
}

/// Per topic of the group (`topics` of them, `local` mapping each file's topics), the
/// rows and bytes its staged columns need.
fn topic_sizes(
    files: &[SourceFile],
    group: &[(usize, StagedFile)],
    local: &[Vec<usize>],
    topics: usize,
) -> Vec<Sizes> {
    let span_len = |s: Span| s.len();
    let mut sizes: Vec<Sizes> = (0..topics).map(|_| Sizes::default()).collect();
    for ((fi, sf), map) in group.iter().zip(local) {
        let name_len = files[*fi].name.len();
        for m in &sf.messages {
            let s = &mut sizes[map[m.topic as usize]];
            s.rows += 1;
            // A generated id is 32 hex characters.
            s.id_bytes += m.id.map_or(32, span_len);
            s.file_bytes += name_len;
            s.meta_bytes += m.meta.map_or(0, span_len);
            s.payload_bytes += span_len(m.payload);
        }
    }
    sizes
}

/// The id of a message without one: from its file's key and its line, and for the
/// second and later records starting on one line, their place on it too.
fn derived_id(key: &[u8], at: At) -> String {
    match at.nth() {
        0 => crate::naming::stable_id(&[key, &at.line().to_le_bytes()]),
        nth => crate::naming::stable_id(&[key, &at.line().to_le_bytes(), &nth.to_le_bytes()]),
    }
}

/// One topic's staged columns being built.
struct Builders {
    topic: StringBuilder,
    id: StringBuilder,
    file: StringBuilder,
    line: Int64Builder,
    meta: StringBuilder,
    payload: StringBuilder,
}

impl Builders {
    /// Builders sized for the topic `name` from its [`Sizes`], so no column reallocates.
    fn with_sizes(name: &str, s: &Sizes) -> Self {
        Builders {
            topic: StringBuilder::with_capacity(s.rows, s.rows * name.len()),
            id: StringBuilder::with_capacity(s.rows, s.id_bytes),
            file: StringBuilder::with_capacity(s.rows, s.file_bytes),
            line: Int64Builder::with_capacity(s.rows),
            meta: StringBuilder::with_capacity(s.rows, s.meta_bytes),
            payload: StringBuilder::with_capacity(s.rows, s.payload_bytes),
        }
    }

    /// Appends one message of `sf` (from the landing file `source`, whose messages without
    /// an id get one from `key` and their line) to topic `name`.
    #[inline]
    fn append(&mut self, name: &str, (source, key): (&str, &[u8]), sf: &StagedFile, m: &Message) {
        self.topic.append_value(name);
        match m.id {
            Some(v) => self.id.append_value(sf.text(v)),
            None => self.id.append_value(derived_id(key, m.at)),
        }
        self.file.append_value(source);
        self.line.append_value(m.at.line() as i64);
        self.meta.append_option(m.meta.map(|s| sf.text(s)));
        self.payload.append_value(sf.text(m.payload));
    }

    /// The topic's staged batch.
    fn finish(mut self, schema: &SchemaRef) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.topic.finish()),
            Arc::new(self.id.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.meta.finish()),
            Arc::new(self.payload.finish()),
        ];
        // The columns are built right above with the schema's types and equal lengths.
        RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| Error::arrow("_staging", e))
            .expect("staging columns match the staging schema")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staged message's text, read back through its spans.
    #[derive(Debug)]
    struct Owned {
        topic: String,
        id: Option<String>,
        meta: Option<String>,
        payload: String,
    }

    fn one(line: &str) -> Result<Owned, String> {
        one_with(line, &EnvelopeConfig::default())
    }

    fn one_with(line: &str, env: &EnvelopeConfig) -> Result<Owned, String> {
        let s = stage_file_bytes(line.as_bytes(), "f", env);
        if let Some(c) = s.corrupt.first() {
            return Err(c.reason.clone());
        }
        let m = &s.messages[0];
        Ok(Owned {
            topic: s.topic(m).to_string(),
            id: m.id.map(|v| s.text(v).into_owned()),
            meta: m.meta.map(|v| s.text(v).into_owned()),
            payload: s.text(m.payload).into_owned(),
        })
    }

    #[test]
    fn envelope_fields_are_extracted_exactly() {
        let m = one(r#"{"topic":"quote","message_id":"m1","src":"x","ts":1.50,"payload":{"a":123456789012345678901234567890,"b":[1,2]}}"#)
            .unwrap();
        assert_eq!(m.topic, "quote");
        assert_eq!(m.id.as_deref(), Some("m1"));
        assert_eq!(m.meta.as_deref(), Some(r#"{"src":"x","ts":1.50}"#));
        assert_eq!(
            m.payload,
            r#"{"a":123456789012345678901234567890,"b":[1,2]}"#
        );
    }

    #[test]
    fn configurable_fields_and_absent_payload() {
        let env = EnvelopeConfig {
            topic_field: "type".into(),
            id_field: None,
            payload_field: Some("payload".into()),
            dedup_fields: None,
            ..EnvelopeConfig::default()
        };
        let m = one_with(r#"{"type":"t","x":{"y":"}"},"z":null}"#, &env).unwrap();
        assert_eq!(m.topic, "t");
        assert_eq!(m.id, None);
        assert_eq!(m.meta, None);
        assert_eq!(m.payload, r#"{"x":{"y":"}"},"z":null}"#);
    }

    #[test]
    fn escaped_keys_and_integer_ids() {
        let m = one(r#"{"top\u0069c":"a\"b","message_id":42,"payload":{}}"#).unwrap();
        assert_eq!(m.topic, "a\"b");
        assert_eq!(m.id.as_deref(), Some("42"));
    }

    #[test]
    fn groups_of_files_keep_file_order_and_the_first_duplicate() {
        use arrow::array::{AsArray as _, Int64Array};
        // 48 files of ~40 KB: more than the smallest group (1 MiB), so every topic comes
        // in several batches, and duplicates span groups.
        let env = EnvelopeConfig::default();
        let pad = "x".repeat(900);
        let (mut files, mut staged) = (Vec::new(), Vec::new());
        let mut want: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
        let mut ids = std::collections::HashSet::new();
        let mut dups = 0;
        for f in 0..48usize {
            let name = format!("part-{f:03}.jsonl");
            let mut text = String::new();
            for l in 0..40usize {
                let topic = ["a", "b", "c"][(f + l) % 3];
                // Every 7th line repeats an id first seen in the first file.
                let id = if l % 7 == 0 {
                    format!("dup-{l}")
                } else {
                    format!("{f}-{l}")
                };
                text.push_str(&format!(
                    r#"{{"topic":"{topic}","message_id":"{id}","payload":{{"pad":"{pad}","l":{l}}}}}"#
                ));
                text.push('\n');
                if ids.insert(id) {
                    want.entry(topic.into())
                        .or_default()
                        .push((name.clone(), l as i64 + 1));
                } else {
                    dups += 1;
                }
            }
            staged.push(stage_file_bytes(text.as_bytes(), &name, &env));
            files.push(SourceFile {
                path: name.clone().into(),
                name,
                bytes: 0,
                compression: crate::source::discover::Compression::None,
                folder: 0,
                modified: None,
                etag: None,
            });
        }
        let staging = assemble(&files, staged, true, &mut IdSet::default());
        assert_eq!(staging.duplicates, dups);
        assert!(
            staging.topics.values().all(|b| b.len() > 1),
            "several groups"
        );
        for (topic, want) in want {
            let got: Vec<(String, i64)> = staging.topics[&topic]
                .iter()
                .flat_map(|b| {
                    let files = b.column(2).as_string::<i32>().clone();
                    let lines = b
                        .column(3)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap()
                        .clone();
                    (0..b.num_rows()).map(move |r| (files.value(r).to_string(), lines.value(r)))
                })
                .collect();
            assert_eq!(got, want, "topic {topic}");
        }
    }

    #[test]
    fn id_set_dedups_exactly() {
        let mut s = IdSet::default();
        for i in 0..10_000 {
            assert!(s.insert(&format!("id-{i}")));
        }
        for i in 0..10_000 {
            assert!(!s.insert(&format!("id-{i}")));
        }
        assert!(s.insert("id-10000") && s.insert("") && !s.insert(""));
        assert_eq!(s.len(), 10_002);
    }

    #[test]
    fn insert_all_keeps_the_first_of_equal_keys_in_order() {
        // Keys spread over every shard, each 1-3 times, some already in the set (an
        // earlier staging chunk), and keyless messages: the outcome is a one-by-one
        // insert's, whatever shard or thread each key went to.
        let mut set = IdSet::default();
        let mut model = std::collections::HashSet::new();
        for i in 0..500 {
            let k = format!("chunk-1-{i}");
            assert!(set.insert(&k));
            model.insert(k.into_bytes());
        }
        let owned: Vec<Option<Vec<u8>>> = (0..20_000u64)
            .map(|i| {
                let n = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
                match n % 7 {
                    0 => None,
                    1 => Some(format!("chunk-1-{}", n % 600).into_bytes()),
                    _ => Some(format!("id-{}", n % 3000).into_bytes()),
                }
            })
            .collect();
        let keys: Vec<Option<(u32, &[u8])>> = owned
            .iter()
            .map(|k| k.as_deref().map(|b| (id_hash(b), b)))
            .collect();
        let shards: std::collections::HashSet<usize> =
            keys.iter().flatten().map(|(h, _)| shard_of(*h)).collect();
        assert_eq!(shards.len(), ID_SHARDS);
        let expected: Vec<bool> = owned
            .iter()
            .map(|k| k.as_ref().is_none_or(|b| model.insert(b.clone())))
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let fresh = pool.install(|| set.insert_all(&keys));
        assert_eq!(fresh, expected);
        assert_eq!(set.len(), model.len());
        assert!(!set.insert("id-7") && set.insert("id-3000"));
    }

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

    #[test]
    fn corrupt_reasons() {
        let cases = [
            ("{not json", "invalid JSON"),
            ("[1,2]", "not a JSON object"),
            ("\"s\"", "not a JSON object"),
            (r#"{"message_id":"1","payload":{}}"#, "missing topic"),
            (
                r#"{"topic":null,"message_id":"1"}"#,
                "not a non-empty string",
            ),
            (r#"{"topic":"","message_id":"1"}"#, "not a non-empty string"),
            (r#"{"topic":"a","payload":{}}"#, "missing id"),
            (
                r#"{"topic":"a","message_id":{"x":1}}"#,
                "not a non-empty string or an integer",
            ),
            (
                r#"{"topic":"a","message_id":1.5}"#,
                "not a non-empty string or an integer",
            ),
        ];
        for (line, want) in cases {
            let err = one(line).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn corrupt_lines_keep_exact_bytes_and_line_numbers() {
        let bytes = b"{\"topic\":\"a\",\"message_id\":\"1\",\"payload\":{}}\n\n\xff\xfe bad\r\n{\"topic\":\"a\",\"message_id\":\"1\",\"payload\":{}}";
        let s = stage_file_bytes(bytes, "f", &EnvelopeConfig::default());
        assert_eq!((s.lines, s.blank_lines, s.messages.len()), (3, 1, 2));
        assert_eq!(s.corrupt.len(), 1);
        assert_eq!(s.corrupt[0].line, 3);
        assert_eq!(s.corrupt[0].raw, b"\xff\xfe bad\r");
    }

    #[test]
    fn top_level_members_keep_their_exact_text_past_nested_strings_and_brackets() {
        let m = one(
            r#" { "topic" : "a", "message_id":"1", "k" : "x}]\"" , "payload":[{"c":"]"}], "d":-1.5e3 } "#,
        )
        .unwrap();
        assert_eq!(m.payload, r#"[{"c":"]"}]"#);
        assert_eq!(m.meta.as_deref(), Some(r#"{"k":"x}]\"","d":-1.5e3}"#));
        // Anything the strict reader refuses is corrupt, whatever the envelope holds.
        for bad in [
            r#"{"topic":"a","message_id":"1","payload":{"x":1e}}"#,
            r#"{"topic":"a","message_id":"1","payload":"\ud800"}"#,
            r#"{"topic":"a","message_id":"1","payload":{}} trailing"#,
            r#"{"topic":"a","message_id":"1","payload":{},}"#,
        ] {
            assert!(one(bad).unwrap_err().contains("invalid JSON"), "{bad}");
        }
    }
}
