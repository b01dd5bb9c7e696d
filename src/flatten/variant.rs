//! JSON values as Parquet Variant values (`metadata` and `value` bytes), built straight
//! from bronze's parse ([`Doc`]), never through JSON text again.
//!
//! What a Variant holds, value for value:
//! - `null`, `true`, `false`, strings (escapes decoded), objects and arrays, empty ones
//!   included. Keys keep their case.
//! - An integer that fits `i64`: the narrowest of int8, int16, int32 and int64.
//! - An integer beyond `i64`, or a literal with a fraction and no exponent, whose digits
//!   and scale fit decimal(38): the narrowest of decimal4, decimal8 and decimal16 (`1.10`
//!   keeps its scale, 2).
//! - A literal with an exponent: double when an `f64` holds it exactly enough to print it
//!   back (`6.02e23`), as Spark's `parse_json` reads it; else a decimal when one holds it
//!   exactly (`1.2345678901234567890e5`).
//! - Beyond decimal(38), a double when the literal is the double's own shortest form
//!   (`1.7976931348623157e308`, `1e-40` written out: what JavaScript and Python print).
//! - A number that fits none of them (`1e400`, 40 significant digits of an integer):
//!   Variant null in place, and its literal in `_rescued_data` under its pointer.
//! - `-0` and `-0.0` are zero: an integer or a decimal has no negative zero.
//! - A key repeated in one object: the last value is kept (as `json.loads` does), the
//!   earlier ones rescued under `dup:<pointer>`, so each object's keys stay unique as the
//!   Variant spec requires.
//! - A value nested deeper than [`MAX_DEPTH`] is rescued whole (Variant null in place).

use parquet_variant::{VariantDecimal4, VariantDecimal8, VariantDecimal16};

use std::fmt::Write as _;

use crate::json::{Doc, Kind, NumClass};

/// Objects and arrays nested deeper than this are rescued whole: the encoder recurses,
/// and a topic task's stack is bounded.
pub const MAX_DEPTH: usize = 256;

/// A JSON value as a Variant, and what no Variant value holds exactly.
#[derive(Debug, Default)]
pub struct Encoded {
    /// The Variant's metadata (its dictionary of keys).
    pub metadata: Vec<u8>,
    /// The Variant's value.
    pub value: Vec<u8>,
    /// `(pointer, JSON text)` of each value kept out of the Variant: numbers beyond every
    /// Variant number type, earlier values of a repeated key (`dup:<pointer>`), values
    /// nested too deep.
    pub rescued: Vec<(String, String)>,
}

/// Encodes node `node` of `doc`, found at JSON pointer `at` (the prefix of every rescued
/// pointer), on its own ([`Encoder`] encodes many into shared buffers).
pub fn encode(doc: &Doc<'_>, node: usize, at: &str) -> Encoded {
    let mut encoder = Encoder::default();
    let mut out = Encodings::default();
    let i = encoder.encode(&mut out, doc, node, at);
    let (metadata, value) = out.get(i as usize);
    Encoded {
        metadata: metadata.to_vec(),
        value: value.to_vec(),
        rescued: std::mem::take(&mut encoder.rescued),
    }
}

/// The Variant encodings of a column's values, one after the other in two buffers.
#[derive(Debug, Default)]
pub struct Encodings {
    metadata: Vec<u8>,
    metadata_ends: Vec<usize>,
    value: Vec<u8>,
    value_ends: Vec<usize>,
}

impl Encodings {
    /// The metadata and value bytes of encoding `i`.
    pub fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let span = |ends: &[usize], i: usize| match i {
            0 => 0..ends[0],
            i => ends[i - 1]..ends[i],
        };
        (
            &self.metadata[span(&self.metadata_ends, i)],
            &self.value[span(&self.value_ends, i)],
        )
    }
}

/// A step of the path from an encoded value's root to the value being written.
#[derive(Clone, Copy)]
enum Step {
    /// An object member, by its key's index in the dictionary.
    Key(u32),
    /// An array element, by its index.
    Index(u32),
}

/// Encodes JSON values as Variants into [`Encodings`], its buffers reused from value to
/// value: nothing is allocated per value once they have grown, and a value with the
/// keys of the one before (in the same order) reuses its dictionary.
#[derive(Default)]
pub struct Encoder {
    /// The keys of the value being encoded, in the order the key walk meets them, one
    /// after the other; then where each ends, and its node in the document
    /// (`u32::MAX` for a key of a container parsed again past the depth limit).
    key_bytes: Vec<u8>,
    key_ends: Vec<u32>,
    key_nodes: Vec<u32>,
    /// `key_bytes` and `key_ends` of the value the dictionary was built for.
    dict_bytes: Vec<u8>,
    dict_ends: Vec<u32>,
    /// The dictionary: each key's bytes in `dict_bytes`, sorted and unique (a key's
    /// index is its field id); each walked key's field id; and the metadata.
    dict: Vec<(u32, u32)>,
    walk_ids: Vec<u32>,
    metadata: Vec<u8>,
    /// Walked keys in key order, while the dictionary is built.
    order: Vec<u32>,
    /// Per key node of the document, its field id.
    node_ids: Vec<u32>,
    /// Containers still to collect keys from, with their depth.
    todo: Vec<(usize, usize)>,
    /// How many containers parsed again past the depth limit are being written: their
    /// keys' field ids are looked up by name.
    reparsed: usize,
    /// Per member of the objects being written: its field id, value node and whether it
    /// is the last with its key.
    members: Vec<(u32, u32, bool)>,
    /// Per field id, its last member in the object being sorted out.
    last_at: Vec<u32>,
    /// The children written so far of the containers being written: an array element's
    /// offset, an object field's id and offset.
    children: Vec<(u32, u32)>,
    /// A container's header, before it moves in front of its children.
    header: Vec<u8>,
    /// From the value's root to the value being written, for rescued pointers.
    path: Vec<Step>,
    /// The pointer of the value's root.
    at: String,
    /// `(pointer, JSON text)` of the values kept out of the Variants encoded so far
    /// ([`Encoded::rescued`]); the caller takes them.
    pub rescued: Vec<(String, String)>,
}

impl Encoder {
    /// Appends the Variant of node `node` of `doc` (found at JSON pointer `at`) to `out`;
    /// gives its index there. What no Variant holds is added to [`Encoder::rescued`].
    pub fn encode(&mut self, out: &mut Encodings, doc: &Doc<'_>, node: usize, at: &str) -> u32 {
        self.at.clear();
        self.at.push_str(at);
        self.key_bytes.clear();
        self.key_ends.clear();
        self.key_nodes.clear();
        self.walk_keys(doc, node, 0, true);
        if self.metadata.is_empty()
            || self.key_bytes != self.dict_bytes
            || self.key_ends != self.dict_ends
        {
            self.build_dictionary();
        }
        out.metadata.extend_from_slice(&self.metadata);
        out.metadata_ends.push(out.metadata.len());
        for (&k, &id) in self.key_nodes.iter().zip(&self.walk_ids) {
            if k != u32::MAX {
                if self.node_ids.len() <= k as usize {
                    self.node_ids.resize(k as usize + 1, 0);
                }
                self.node_ids[k as usize] = id;
            }
        }
        self.put(&mut out.value, doc, node, 0);
        out.value_ends.push(out.value.len());
        (out.value_ends.len() - 1) as u32
    }

    /// Adds the keys of value `node` (at `depth`) of `doc` to the walked keys, down to
    /// [`MAX_DEPTH`] as the value walk goes; `top` when `doc` is the encoded document.
    fn walk_keys(&mut self, doc: &Doc<'_>, node: usize, depth: usize, top: bool) {
        let base = self.todo.len();
        self.todo.push((node, depth));
        while self.todo.len() > base {
            let Some((i, depth)) = self.todo.pop() else {
                break;
            };
            match doc.kind(i) {
                _ if depth >= MAX_DEPTH => {}
                Kind::Object => {
                    for (k, v) in doc.members(i) {
                        self.key_bytes.extend_from_slice(doc.str(k).as_bytes());
                        self.key_ends.push(self.key_bytes.len() as u32);
                        self.key_nodes.push(if top { k as u32 } else { u32::MAX });
                        self.todo.push((v, depth + 1));
                    }
                }
                Kind::Array => self.todo.extend(doc.elements(i).map(|e| (e, depth + 1))),
                // Past the parse's depth limit: the value walk parses it again, and so
                // does this.
                Kind::Raw => {
                    if let Ok(sub) = Doc::parse(doc.raw(i), MAX_DEPTH - depth) {
                        self.walk_keys(&sub, sub.root(), depth, false);
                    }
                }
                _ => {}
            }
        }
    }

    /// Builds the dictionary of the walked keys (sorted, unique), each walked key's field
    /// id and the metadata; they stay for the next values with the same walked keys.
    #[cold]
    fn build_dictionary(&mut self) {
        std::mem::swap(&mut self.key_bytes, &mut self.dict_bytes);
        std::mem::swap(&mut self.key_ends, &mut self.dict_ends);
        let (bytes, ends) = (&self.dict_bytes, &self.dict_ends);
        let span = |j: u32| {
            let j = j as usize;
            let start = if j == 0 { 0 } else { ends[j - 1] };
            (start, ends[j])
        };
        let key = |j: u32| {
            let (start, end) = span(j);
            &bytes[start as usize..end as usize]
        };
        self.order.clear();
        self.order.extend(0..ends.len() as u32);
        self.order.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
        self.dict.clear();
        self.walk_ids.clear();
        self.walk_ids.resize(ends.len(), 0);
        for &j in &self.order {
            let same = self.dict.last().is_some_and(|&(s, e)| {
                &bytes[s as usize..e as usize] == key(j)
            });
            if !same {
                self.dict.push(span(j));
            }
            self.walk_ids[j as usize] = (self.dict.len() - 1) as u32;
        }
        let mut metadata = std::mem::take(&mut self.metadata);
        metadata.clear();
        self.write_metadata(&mut metadata);
        self.metadata = metadata;
    }

    /// The bytes of dictionary key `id`.
    fn key(&self, id: u32) -> &[u8] {
        let (start, end) = self.dict[id as usize];
        &self.dict_bytes[start as usize..end as usize]
    }

    /// The field id of `key`: its index in the dictionary.
    fn field_id(&self, key: &str) -> Option<u32> {
        let bytes = &self.dict_bytes;
        self.dict
            .binary_search_by(|k| bytes[k.0 as usize..k.1 as usize].cmp(key.as_bytes()))
            .ok()
            .map(|i| i as u32)
    }

    /// Appends the metadata of the dictionary: version 1, sorted, offsets as wide as the
    /// largest of the key count and their bytes needs.
    fn write_metadata(&self, out: &mut Vec<u8>) {
        let total: usize = self.dict.iter().map(|k| (k.1 - k.0) as usize).sum();
        let size = int_size(total.max(self.dict.len()));
        out.push(0x01 | 0x10 | ((size as u8 - 1) << 6));
        push_int(out, self.dict.len(), size);
        push_int(out, 0, size);
        let mut end = 0;
        for k in &self.dict {
            end += (k.1 - k.0) as usize;
            push_int(out, end, size);
        }
        for id in 0..self.dict.len() as u32 {
            out.extend_from_slice(self.key(id));
        }
    }

    /// Appends value `i` of `doc` (at `depth`) to `out`.
    fn put(&mut self, out: &mut Vec<u8>, doc: &Doc<'_>, i: usize, depth: usize) {
        match doc.kind(i) {
            Kind::Null => out.push(0),
            Kind::Bool(true) => out.push(1 << 2),
            Kind::Bool(false) => out.push(2 << 2),
            Kind::Str { .. } => put_string(out, &doc.str(i)),
            Kind::Num(class) => match number(doc.raw(i), class) {
                Some(n) => n.write(out),
                None => self.rescue(out, doc.raw(i)),
            },
            Kind::Array | Kind::Object if depth >= MAX_DEPTH => self.rescue(out, doc.raw(i)),
            Kind::Array => self.array(out, doc, i, depth),
            Kind::Object => self.object(out, doc, i, depth),
            // A container past the parse's depth limit: parsed again from its text.
            Kind::Raw => match Doc::parse(doc.raw(i), MAX_DEPTH.saturating_sub(depth)) {
                Ok(sub) if sub.kind(sub.root()) != Kind::Raw => {
                    self.reparsed += 1;
                    self.put(out, &sub, sub.root(), depth);
                    self.reparsed -= 1;
                }
                _ => self.rescue(out, doc.raw(i)),
            },
        }
    }

    /// Appends array `i`: its header, then its elements.
    fn array(&mut self, out: &mut Vec<u8>, doc: &Doc<'_>, i: usize, depth: usize) {
        let (start, base, rescued) = (out.len(), self.children.len(), self.rescued.len());
        for (n, e) in doc.elements(i).enumerate() {
            self.children.push((0, (out.len() - start) as u32));
            self.path.push(Step::Index(n as u32));
            self.put(out, doc, e, depth + 1);
            self.path.pop();
        }
        if self.oversized(out, start, base, rescued) {
            return self.rescue(out, doc.raw(i));
        }
        let count = self.children.len() - base;
        let data = out.len() - start;
        let (large, offset_size) = (count > 0xFF, int_size(data));
        self.header.clear();
        self.header
            .push(3 | ((u8::from(large) << 2 | (offset_size as u8 - 1)) << 2));
        push_int(&mut self.header, count, if large { 4 } else { 1 });
        for &(_, offset) in &self.children[base..] {
            push_int(&mut self.header, offset as usize, offset_size);
        }
        push_int(&mut self.header, data, offset_size);
        self.children.truncate(base);
        out.splice(start..start, self.header.iter().copied());
    }

    /// Appends object `i`: its header (field ids in key order), then each key's last
    /// value; earlier values of a repeated key are rescued under `dup:<pointer>`.
    fn object(&mut self, out: &mut Vec<u8>, doc: &Doc<'_>, i: usize, depth: usize) {
        let (start, rescued) = (out.len(), self.rescued.len());
        let mbase = self.members.len();
        for (k, v) in doc.members(i) {
            // Every key was collected; one that is not (never) is rescued with its value.
            let id = match self.reparsed {
                0 => self.node_ids.get(k).copied(),
                _ => self.field_id(&doc.str(k)),
            };
            let id = id.unwrap_or(u32::MAX);
            self.members.push((id, v as u32, true));
        }
        self.mark_repeated(mbase);
        let base = self.children.len();
        for m in mbase..self.members.len() {
            let (id, v, last) = self.members[m];
            if id == u32::MAX {
                self.rescue_unknown_key(doc, i, v as usize);
                continue;
            }
            self.path.push(Step::Key(id));
            if last {
                self.children.push((id, (out.len() - start) as u32));
                self.put(out, doc, v as usize, depth + 1);
            } else {
                let pointer = format!("dup:{}", self.pointer());
                self.rescued.push((pointer, doc.raw(v as usize).to_string()));
            }
            self.path.pop();
        }
        self.members.truncate(mbase);
        if self.oversized(out, start, base, rescued) {
            return self.rescue(out, doc.raw(i));
        }
        let fields = &mut self.children[base..];
        fields.sort_unstable_by_key(|f| f.0);
        let count = fields.len();
        let data = out.len() - start;
        let (large, offset_size) = (count > 0xFF, int_size(data));
        let id_size = int_size(self.dict.len().saturating_sub(1));
        self.header.clear();
        let value_header =
            u8::from(large) << 4 | (id_size as u8 - 1) << 2 | (offset_size as u8 - 1);
        self.header.push(2 | (value_header << 2));
        push_int(&mut self.header, count, if large { 4 } else { 1 });
        for &(id, _) in &self.children[base..] {
            push_int(&mut self.header, id as usize, id_size);
        }
        for &(_, offset) in &self.children[base..] {
            push_int(&mut self.header, offset as usize, offset_size);
        }
        push_int(&mut self.header, data, offset_size);
        self.children.truncate(base);
        out.splice(start..start, self.header.iter().copied());
    }

    /// Whether the children written to `out` from `start` are more bytes than a
    /// container's offsets hold (4 GiB); if so they are dropped, with the children from
    /// `children` on and the values rescued from `rescued` on, for the container to be
    /// rescued whole.
    fn oversized(&mut self, out: &mut Vec<u8>, start: usize, children: usize, rescued: usize) -> bool {
        if out.len() - start <= u32::MAX as usize {
            return false;
        }
        out.truncate(start);
        self.children.truncate(children);
        self.rescued.truncate(rescued);
        true
    }

    /// Marks the members from `base` on that a later member with the same key follows.
    fn mark_repeated(&mut self, base: usize) {
        if self.last_at.len() < self.dict.len() {
            self.last_at.resize(self.dict.len(), 0);
        }
        let members = &mut self.members[base..];
        // Each key's last member, then whether each member is it: only this object's
        // keys are read, so what other objects left in `last_at` does not matter.
        for (n, m) in members.iter().enumerate() {
            if let Some(slot) = self.last_at.get_mut(m.0 as usize) {
                *slot = n as u32;
            }
        }
        for (n, m) in members.iter_mut().enumerate() {
            m.2 = self.last_at.get(m.0 as usize).is_none_or(|&l| l == n as u32);
        }
    }

    /// A member whose key is not in the dictionary (the key walk and the value walk
    /// disagree: never expected): its value is rescued under its own key.
    #[cold]
    fn rescue_unknown_key(&mut self, doc: &Doc<'_>, obj: usize, v: usize) {
        let Some((k, _)) = doc.members(obj).find(|&(_, value)| value == v) else {
            return;
        };
        let mut pointer = self.pointer();
        pointer.push('/');
        push_token(&mut pointer, &doc.str(k));
        self.rescued.push((pointer, doc.raw(v).to_string()));
    }

    /// Variant null in place of `text`, which is rescued under the current pointer.
    fn rescue(&mut self, out: &mut Vec<u8>, text: &str) {
        out.push(0);
        let pointer = self.pointer();
        self.rescued.push((pointer, text.to_string()));
    }

    /// The JSON pointer of the value being written (RFC 6901).
    #[cold]
    fn pointer(&self) -> String {
        let mut pointer = self.at.clone();
        for step in &self.path {
            pointer.push('/');
            match *step {
                Step::Key(id) => push_token(&mut pointer, &String::from_utf8_lossy(self.key(id))),
                Step::Index(n) => {
                    let _ = write!(pointer, "{n}");
                }
            }
        }
        pointer
    }
}

/// Bytes an unsigned integer up to `v` takes: 1 to 4.
fn int_size(v: usize) -> usize {
    match v {
        0..=0xFF => 1,
        0x100..=0xFFFF => 2,
        0x1_0000..=0xFF_FFFF => 3,
        _ => 4,
    }
}

/// Appends `v` as a little-endian integer of `size` bytes.
fn push_int(out: &mut Vec<u8>, v: usize, size: usize) {
    out.extend_from_slice(&(v as u32).to_le_bytes()[..size]);
}

/// Appends a string: a short string (header and bytes) up to 63 bytes, else a string
/// primitive with its 4-byte length.
fn put_string(out: &mut Vec<u8>, s: &str) {
    if s.len() < 64 {
        out.push(((s.len() as u8) << 2) | 1);
    } else {
        out.push(16 << 2);
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(s.as_bytes());
}

/// Rescued key `key` of a value found at pointer `at`, from the document's root:
/// `/x` → `<at>/x`, `dup:/x` → `dup:<at>/x`.
pub fn under(at: &str, key: &str) -> String {
    match key.strip_prefix("dup:") {
        Some(rest) => format!("dup:{at}{rest}"),
        None => format!("{at}{key}"),
    }
}

/// Appends `key` to a JSON pointer as one token (`~` as `~0`, `/` as `~1`, RFC 6901).
fn push_token(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// A JSON number as the Variant number that holds it exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Number {
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Decimal4(VariantDecimal4),
    Decimal8(VariantDecimal8),
    Decimal16(VariantDecimal16),
    Double(f64),
}

impl Number {
    /// Appends this number as a Variant primitive: its type's header, then its bytes
    /// (little-endian; a decimal's scale first).
    fn write(self, out: &mut Vec<u8>) {
        match self {
            Number::Int8(v) => {
                out.push(3 << 2);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Number::Int16(v) => {
                out.push(4 << 2);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Number::Int32(v) => {
                out.push(5 << 2);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Number::Int64(v) => {
                out.push(6 << 2);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Number::Double(v) => {
                out.push(7 << 2);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Number::Decimal4(d) => {
                out.extend_from_slice(&[8 << 2, d.scale()]);
                out.extend_from_slice(&d.integer().to_le_bytes());
            }
            Number::Decimal8(d) => {
                out.extend_from_slice(&[9 << 2, d.scale()]);
                out.extend_from_slice(&d.integer().to_le_bytes());
            }
            Number::Decimal16(d) => {
                out.extend_from_slice(&[10 << 2, d.scale()]);
                out.extend_from_slice(&d.integer().to_le_bytes());
            }
        }
    }
}

/// The Variant number of literal `raw` (of class `class`), or `None` when no Variant
/// number holds it exactly.
fn number(raw: &str, class: NumClass) -> Option<Number> {
    if class == NumClass::Int {
        let v: i64 = raw.parse().ok()?;
        return Some(narrowest_int(v));
    }
    let exponent = raw.contains(['e', 'E']);
    if exponent && class == NumClass::Float {
        return raw.parse::<f64>().ok().map(Number::Double);
    }
    decimal(raw).or_else(|| exact_double(raw).map(Number::Double))
}

/// The `f64` of literal `raw` when it holds its exact value (its shortest form prints the
/// same digits: `1.7976931348623157e308`, `1e-40`); `None` when it rounds or overflows.
fn exact_double(raw: &str) -> Option<f64> {
    let f: f64 = raw.parse().ok().filter(|f: &f64| f.is_finite())?;
    (exact_value(&format!("{f:e}"))? == exact_value(raw)?).then_some(f)
}

/// A number literal's exact value as `<sign><digits>e<exponent>`, its digits without
/// leading or trailing zeros (`0` for zero); `None` when the exponent is beyond `i64`.
pub(crate) fn exact_value(literal: &str) -> Option<String> {
    let (sign, body) = match literal.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", literal),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some("0".into());
    }
    let exp = exponent
        .checked_sub(fraction.len() as i64)?
        .checked_add((digits.len() - trimmed.len()) as i64)?;
    Some(format!("{sign}{trimmed}e{exp}"))
}

/// The narrowest integer type holding `v`.
fn narrowest_int(v: i64) -> Number {
    if let Ok(v) = i8::try_from(v) {
        Number::Int8(v)
    } else if let Ok(v) = i16::try_from(v) {
        Number::Int16(v)
    } else if let Ok(v) = i32::try_from(v) {
        Number::Int32(v)
    } else {
        Number::Int64(v)
    }
}

/// Most digits a decimal16 holds, and its largest scale.
const MAX_PRECISION: usize = 38;

/// Literal `raw` as an exact decimal of at most 38 digits and scale at most 38: a
/// fraction's digits are its scale (`1.10` → 110, scale 2); an exponent moves the point
/// (`1.5e3` → 1500, scale 0; `15e-4` → 15, scale 4); `None` when no decimal(38)
/// holds it.
fn decimal(raw: &str) -> Option<Number> {
    let (negative, body) = match raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = format!("{whole}{fraction}");
    let mut scale = (fraction.len() as i64).checked_sub(exponent)?;
    if scale < 0 {
        // A whole number: the exponent's zeros are digits.
        let zeros = usize::try_from(-scale).ok().filter(|z| *z <= MAX_PRECISION)?;
        digits.extend(std::iter::repeat_n('0', zeros));
        scale = 0;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > MAX_PRECISION || scale > MAX_PRECISION as i64 {
        return None;
    }
    let unscaled: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().ok()?
    };
    let unscaled = if negative { -unscaled } else { unscaled };
    let scale = u8::try_from(scale).ok()?;
    let precision = significant.len().max(scale as usize).max(1);
    // A decimal's precision bounds its unscaled digits; the scale may exceed them
    // (`0.001` is 1 at scale 3), up to the type's largest precision.
    if precision <= 9 {
        let v = VariantDecimal4::try_new(i32::try_from(unscaled).ok()?, scale).ok()?;
        Some(Number::Decimal4(v))
    } else if precision <= 18 {
        let v = VariantDecimal8::try_new(i64::try_from(unscaled).ok()?, scale).ok()?;
        Some(Number::Decimal8(v))
    } else {
        VariantDecimal16::try_new(unscaled, scale)
            .ok()
            .map(Number::Decimal16)
    }
}

#[cfg(test)]
mod tests;
