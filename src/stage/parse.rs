//! One record's text → a [`Message`]: the line validated and read by the strict reader
//! (top level only), the envelope's fields found among its members, the message's text
//! recorded as spans of the line (or composed in the file's side buffer).

use std::collections::HashMap;
use std::ops::Range;

use super::ids::id_hash;
use super::staged::{At, Message, Span};
use crate::config::EnvelopeConfig;
use crate::json::{Doc, Kind, Node};
use crate::source::read::Line;

/// Reusable per-worker buffers, so parsing allocates nothing per line once warm.
pub(super) struct Scratch {
    /// The strict reader's node storage.
    nodes: Vec<Node>,
    /// The current file's topics → index in [`super::StagedFile::topics`].
    topic_index: HashMap<String, u32>,
    /// The current line's top-level members: byte ranges of key and value.
    members: Vec<(Range<usize>, Range<usize>)>,
}

impl Scratch {
    pub(super) fn new() -> Self {
        Scratch {
            nodes: Vec::new(),
            topic_index: HashMap::new(),
            members: Vec::new(),
        }
    }

    /// Forgets the topics of the file staged before.
    pub(super) fn start_file(&mut self) {
        self.topic_index.clear();
    }
}

/// Where [`parse_line`] records a message's text: spans of `base` (the file's text), or
/// of `side` for text it composes; topics are interned in `topics`.
pub(super) struct Sink<'b> {
    pub(super) base: &'b [u8],
    pub(super) side: &'b mut Vec<u8>,
    pub(super) topics: &'b mut Vec<String>,
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
pub(super) fn parse_line(
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
