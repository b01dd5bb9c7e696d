//! Stage: data files → one Arrow staging table, grouped by topic.
//!
//! Every non-blank line is parsed exactly once with simd-json (a tape, no per-row value
//! tree). A line that is a JSON object with a usable topic (and id, when an id field is
//! configured) becomes a staged message; anything else becomes a [`CorruptLine`] with the
//! parser's reason and the exact bytes. Duplicates by message id are dropped, first
//! occurrence (file order, then line) wins.
//!
//! The payload and metadata are kept as the exact JSON text the source sent (found with a
//! top-level structural scan of the validated line), so staging is lossless: numbers keep
//! their literal text and nothing is re-encoded. Flattening parses only the payload.
//!
//! This stage does no Delta I/O; it only reads the landing files.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use rayon::prelude::*;

use crate::config::EnvelopeConfig;
use crate::discover::SourceFile;
use crate::error::{Error, Result};
use crate::read::{self, Line};

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

/// One message: envelope fields decoded, payload and metadata as exact JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The topic, as sent.
    pub topic: String,
    /// The message id (`None` when no id field is configured).
    pub id: Option<String>,
    /// 1-based line number in its file.
    pub line: u64,
    /// JSON object text of the other envelope fields, if the line had a payload field.
    pub meta: Option<String>,
    /// JSON text of the payload.
    pub payload: String,
    /// The dedup key from [`EnvelopeConfig::dedup_fields`] (their raw values), when
    /// configured and every field is present.
    pub dedup_key: Option<String>,
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

/// The staging table: the batch parsed once, grouped by topic.
#[derive(Debug)]
pub struct Staging {
    /// One record batch per topic (schema [`staging_schema`]), rows in (file, line) order.
    pub topics: BTreeMap<String, RecordBatch>,
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
    pub fn messages(&self) -> u64 {
        self.topics.values().map(|b| b.num_rows() as u64).sum()
    }
}

/// Schema of the staging table.
pub fn staging_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("_topic", DataType::Utf8, false),
        Field::new("_id", DataType::Utf8, false),
        Field::new("_source_file", DataType::Utf8, false),
        Field::new("_line", DataType::Int64, false),
        Field::new("_meta", DataType::Utf8, true),
        Field::new("_payload", DataType::Utf8, false),
    ]))
}

/// Reusable per-worker buffers, so parsing allocates nothing per line once warm.
struct Scratch {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            input: Vec::new(),
            buffers: simd_json::Buffers::default(),
        }
    }
}

/// Stages every file on the current rayon pool; a file that cannot be read fails the
/// whole stage (loading part of a batch would replace its rows with fewer).
pub fn stage(files: &[SourceFile], envelope: &EnvelopeConfig) -> Result<Staging> {
    stage_with_progress(
        files,
        envelope,
        &|| {},
        &mut IdSet::default(),
        &read::read_file,
    )
}

/// Reads one data file's bytes (decompressed).
pub type FileReader<'a> = dyn Fn(&SourceFile) -> Result<Vec<u8>> + Sync + 'a;

/// [`stage`], calling `on_file` after each file (from worker threads). `seen` holds the
/// message ids of earlier chunks of the same batch, so dedup spans chunks.
pub fn stage_with_progress(
    files: &[SourceFile],
    envelope: &EnvelopeConfig,
    on_file: &(dyn Fn() + Sync),
    seen: &mut IdSet,
    reader: &FileReader<'_>,
) -> Result<Staging> {
    let staged: Vec<Result<StagedFile>> = files
        .par_iter()
        .map_init(Scratch::new, |scratch, file| {
            let bytes = reader(file)?;
            let staged = stage_bytes(&bytes, &file.name, envelope, scratch);
            on_file();
            Ok(staged)
        })
        .collect();
    let staged = staged.into_iter().collect::<Result<Vec<_>>>()?;
    let parsed = std::time::Instant::now();
    let by_id = envelope.id_field.is_some() && envelope.dedup_fields.is_none();
    let staging = assemble(files, staged, by_id, seen);
    tracing::debug!(
        files = files.len(),
        assemble_ms = parsed.elapsed().as_millis() as u64,
        "assembled"
    );
    Ok(staging)
}

/// Stages one file's bytes (pure; used by tests and benches).
pub fn stage_file_bytes(bytes: &[u8], source_file: &str, envelope: &EnvelopeConfig) -> StagedFile {
    stage_bytes(bytes, source_file, envelope, &mut Scratch::new())
}

fn stage_bytes(
    bytes: &[u8],
    source_file: &str,
    envelope: &EnvelopeConfig,
    scratch: &mut Scratch,
) -> StagedFile {
    let mut out = StagedFile {
        bytes: bytes.len() as u64,
        ..Default::default()
    };
    for line in read::lines(bytes) {
        if line.is_blank() {
            out.blank_lines += 1;
            continue;
        }
        out.lines += 1;
        match parse_line(&line, envelope, scratch) {
            Ok(m) => out.messages.push(m),
            Err(reason) => out.corrupt.push(CorruptLine {
                source_file: source_file.to_string(),
                line: line.number,
                raw: line.raw.to_vec(),
                reason,
            }),
        }
    }
    out
}

/// Parses one line into a message, or says why it is corrupt.
fn parse_line(
    line: &Line<'_>,
    env: &EnvelopeConfig,
    scratch: &mut Scratch,
) -> Result<Message, String> {
    let text = line.text;
    scratch.input.clear();
    scratch.input.extend_from_slice(text);
    // One validating parse of the whole line; the tape is dropped at once, the spans
    // below are read from the original (unmodified) bytes.
    if let Err(e) = simd_json::to_tape_with_buffers(&mut scratch.input, &mut scratch.buffers) {
        // simd-json refuses numbers an f64 cannot hold (`1e400`); the strict reader
        // accepts them (their literal text is kept) and refuses what is really not JSON.
        let strict = std::str::from_utf8(text)
            .map_err(|_| "invalid UTF-8".to_string())
            .and_then(|t| crate::json::validate(t).map_err(|_| String::new()));
        match strict {
            Ok(()) => {}
            Err(reason) if !reason.is_empty() => return Err(format!("invalid JSON: {reason}")),
            Err(_) => return Err(format!("invalid JSON: {e}")),
        }
    }
    let text = trim(text);
    if text.first() != Some(&b'{') {
        return Err("not a JSON object".to_string());
    }
    let fields = top_level_fields(text).ok_or_else(|| "not a JSON object".to_string())?;
    let mut topic = None;
    let mut id = None;
    let mut payload = None;
    let mut others: Vec<(&[u8], &[u8])> = Vec::new();
    let mut dedup_parts: Vec<Option<&[u8]>> = match &env.dedup_fields {
        Some(f) => vec![None; f.len()],
        None => Vec::new(),
    };
    for (key_raw, value) in fields {
        let key = decode_key(key_raw);
        let key = key.as_deref();
        if let (Some(names), Some(k)) = (&env.dedup_fields, key) {
            for (slot, name) in dedup_parts.iter_mut().zip(names) {
                if slot.is_none() && name == k {
                    *slot = Some(value);
                }
            }
        }
        if key == Some(env.topic_field.as_str()) && topic.is_none() {
            topic = Some(value);
        } else if key.is_some() && key == env.id_field.as_deref() && id.is_none() {
            id = Some(value);
        } else if key.is_some() && key == env.payload_field.as_deref() && payload.is_none() {
            payload = Some(value);
        } else {
            others.push((key_raw, value));
        }
    }
    let topic_field = &env.topic_field;
    let topic = match topic {
        None => return Err(format!("missing topic field `{topic_field}`")),
        Some(v) => match decode_string(v) {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(format!(
                    "topic field `{topic_field}` is not a non-empty string"
                ));
            }
        },
    };
    let id = match &env.id_field {
        None => None,
        Some(id_field) => match id {
            None => return Err(format!("missing id field `{id_field}`")),
            Some(v) => match decode_id(v) {
                Some(id) => Some(id),
                None => {
                    return Err(format!(
                        "id field `{id_field}` is not a non-empty string or an integer"
                    ));
                }
            },
        },
    };
    let object_text = |fields: &[(&[u8], &[u8])]| {
        let mut s = Vec::with_capacity(
            fields
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>()
                + 2,
        );
        s.push(b'{');
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                s.push(b',');
            }
            s.extend_from_slice(k);
            s.push(b':');
            s.extend_from_slice(v);
        }
        s.push(b'}');
        s
    };
    let (meta, payload) = match payload {
        Some(p) => {
            let meta = (!others.is_empty()).then(|| object_text(&others));
            (meta, p.to_vec())
        }
        None => (None, object_text(&others)),
    };
    // The line passed simd-json's UTF-8 validation, so every sub-slice of it cut at
    // structural characters is valid UTF-8 too; the lossy path never allocates here.
    let to_string = |v: Vec<u8>| String::from_utf8(v).map_err(|_| "invalid UTF-8".to_string());
    // Raw JSON values joined by a byte JSON text cannot hold outside strings.
    let dedup_key = if dedup_parts.is_empty() {
        None
    } else {
        dedup_parts
            .iter()
            .map(|p| p.map(|v| String::from_utf8_lossy(v)))
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.join("\u{1}"))
    };
    Ok(Message {
        dedup_key,
        topic,
        id,
        line: line.number,
        meta: meta.map(to_string).transpose()?,
        payload: to_string(payload)?,
    })
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &b[start..end]
}

/// The `(key, value)` byte spans of the top-level members of a JSON object that has
/// already been validated. `None` if the bytes are not an object after all.
pub(crate) fn top_level_fields(b: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = skip_string(b, i)?;
        let key = &b[i..key_end];
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let v_start = skip_ws(b, i + 1);
        let v_end = skip_value(b, v_start)?;
        out.push((key, &b[v_start..v_end]));
        i = skip_ws(b, v_end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b'}') => return Some(out),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// `b[i]` is `"`; returns the index just past the closing quote.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// Returns the index just past the value starting at `i`. Iterative (a depth counter,
/// no recursion), so nesting depth cannot overflow the stack.
fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let start = i;
            while b
                .get(i)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                i += 1;
            }
            (i > start).then_some(i)
        }
    }
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

/// Decodes a value span that must be a JSON string.
fn decode_string(raw: &[u8]) -> Option<String> {
    if raw.first() != Some(&b'"') {
        return None;
    }
    decode_key(raw).map(|s| s.into_owned())
}

/// An id is a non-empty string or an integer (kept as its literal text).
fn decode_id(raw: &[u8]) -> Option<String> {
    match raw.first()? {
        b'"' => decode_string(raw).filter(|s| !s.is_empty()),
        b'-' | b'0'..=b'9' if raw.iter().all(|c| c.is_ascii_digit() || *c == b'-') => {
            std::str::from_utf8(raw).ok().map(str::to_string)
        }
        _ => None,
    }
}

/// Message ids (or dedup keys) seen so far in a batch, across files and staging chunks.
///
/// Packed for batches of millions of messages: every id's bytes go to one arena and the
/// table holds `(offset, length)`, about 20 bytes plus the id per entry instead of a
/// `String` each (~60 bytes and one allocation per id).
#[derive(Default)]
pub struct IdSet {
    arena: Vec<u8>,
    table: hashbrown::HashTable<(u64, u32)>,
    hasher: std::hash::RandomState,
}

impl IdSet {
    /// Adds `id`; `false` when it was already there.
    pub fn insert(&mut self, id: &str) -> bool {
        use std::hash::BuildHasher as _;
        let bytes = id.as_bytes();
        let hash = self.hasher.hash_one(bytes);
        let arena = &self.arena;
        let slice = |&(o, l): &(u64, u32)| &arena[o as usize..o as usize + l as usize];
        if self.table.find(hash, |e| slice(e) == bytes).is_some() {
            return false;
        }
        let entry = (self.arena.len() as u64, bytes.len() as u32);
        self.arena.extend_from_slice(bytes);
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.table.insert_unique(hash, entry, |&(o, l)| {
            hasher.hash_one(&arena[o as usize..o as usize + l as usize])
        });
        true
    }

    /// Ids held.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no id was added.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// Dedups across files (file order, then line) and builds one record batch per topic.
///
/// Dedup is one pass over the messages in order (first wins); the topics' batches are
/// then built in parallel on the current rayon pool, each sized exactly up front (no
/// buffer regrowth, no copy of a half-built column).
pub(crate) fn assemble(
    files: &[SourceFile],
    mut staged: Vec<StagedFile>,
    dedup: bool,
    seen: &mut IdSet,
) -> Staging {
    /// One topic's messages, as `(file, message)` indices, and the bytes they need.
    #[derive(Default)]
    struct TopicRows<'s> {
        topic: &'s str,
        rows: Vec<(u32, u32)>,
        id_bytes: usize,
        file_bytes: usize,
        meta_bytes: usize,
        payload_bytes: usize,
    }
    let corrupt_per_file: Vec<u64> = staged.iter().map(|f| f.corrupt.len() as u64).collect();
    let corrupt: Vec<CorruptLine> = staged
        .iter_mut()
        .flat_map(|f| std::mem::take(&mut f.corrupt))
        .collect();
    let mut stats = Vec::with_capacity(files.len());
    let mut duplicates = 0;
    let mut topics: Vec<TopicRows<'_>> = Vec::new();
    let mut topic_index: HashMap<&str, usize> = HashMap::new();
    for (fi, (file, staged)) in files.iter().zip(&staged).enumerate() {
        let mut fs = FileStats {
            file: file.name.clone(),
            bytes: staged.bytes,
            lines: staged.lines,
            messages: 0,
            corrupt: corrupt_per_file[fi],
            duplicates: 0,
        };
        for (mi, m) in staged.messages.iter().enumerate() {
            if let Some(key) = &m.dedup_key
                && !seen.insert(key)
            {
                fs.duplicates += 1;
                continue;
            }
            if dedup
                && m.dedup_key.is_none()
                && let Some(id) = &m.id
                && !seen.insert(id)
            {
                fs.duplicates += 1;
                continue;
            }
            fs.messages += 1;
            let t = *topic_index.entry(m.topic.as_str()).or_insert_with(|| {
                topics.push(TopicRows {
                    topic: m.topic.as_str(),
                    ..Default::default()
                });
                topics.len() - 1
            });
            let t = &mut topics[t];
            t.rows.push((fi as u32, mi as u32));
            // A generated id is 32 hex characters.
            t.id_bytes += m.id.as_ref().map_or(32, String::len);
            t.file_bytes += file.name.len();
            t.meta_bytes += m.meta.as_ref().map_or(0, String::len);
            t.payload_bytes += m.payload.len();
        }
        duplicates += fs.duplicates;
        stats.push(fs);
    }
    let schema = staging_schema();
    let files_staged = &staged;
    let built: Vec<(String, RecordBatch)> = topics
        .into_par_iter()
        .with_max_len(1)
        .map(|t| {
            let n = t.rows.len();
            let mut topic = StringBuilder::with_capacity(n, n * t.topic.len());
            let mut id = StringBuilder::with_capacity(n, t.id_bytes);
            let mut file = StringBuilder::with_capacity(n, t.file_bytes);
            let mut line = Int64Builder::with_capacity(n);
            let mut meta = StringBuilder::with_capacity(n, t.meta_bytes);
            let mut payload = StringBuilder::with_capacity(n, t.payload_bytes);
            for &(fi, mi) in &t.rows {
                let source = &files[fi as usize];
                let m = &files_staged[fi as usize].messages[mi as usize];
                topic.append_value(t.topic);
                match &m.id {
                    Some(v) => id.append_value(v),
                    None => id.append_value(crate::naming::stable_id(&[
                        source.name.as_bytes(),
                        &m.line.to_le_bytes(),
                    ])),
                }
                file.append_value(&source.name);
                line.append_value(m.line as i64);
                meta.append_option(m.meta.as_deref());
                payload.append_value(&m.payload);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(topic.finish()),
                Arc::new(id.finish()),
                Arc::new(file.finish()),
                Arc::new(line.finish()),
                Arc::new(meta.finish()),
                Arc::new(payload.finish()),
            ];
            // The columns are built right above with the schema's types and equal lengths.
            let batch = RecordBatch::try_new(schema.clone(), columns)
                .map_err(|e| Error::arrow("_staging", e))
                .expect("staging columns match the staging schema");
            (t.topic.to_string(), batch)
        })
        .collect();
    // Millions of small strings: freed on the pool's threads, not one by one here.
    staged.into_par_iter().with_min_len(64).for_each(drop);
    Staging {
        topics: built.into_iter().collect(),
        corrupt,
        files: stats,
        duplicates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Result<Message, String> {
        one_with(line, &EnvelopeConfig::default())
    }

    fn one_with(line: &str, env: &EnvelopeConfig) -> Result<Message, String> {
        let l = read::lines(line.as_bytes()).next().unwrap();
        parse_line(&l, env, &mut Scratch::new())
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
    fn top_level_scan_skips_nested_strings_and_brackets() {
        let f = top_level_fields(br#" { "a" : "x}]\"" , "b":[{"c":"]"}], "d":-1.5e3 } "#).unwrap();
        let vals: Vec<_> = f
            .iter()
            .map(|(_, v)| std::str::from_utf8(v).unwrap())
            .collect();
        assert_eq!(vals, [r#""x}]\"""#, r#"[{"c":"]"}]"#, "-1.5e3"]);
        assert_eq!(top_level_fields(b"{}").unwrap().len(), 0);
    }
}
