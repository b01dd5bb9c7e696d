//! A strict, iterative JSON reader that keeps the source text.
//!
//! Staging validates every line with this reader (only the top level materialised) and
//! keeps the payload as its exact source text. Flattening then needs more than a value tree: the literal text
//! of numbers beyond `i64`/`f64` (so they are kept, never rounded), the source text of
//! sub-trees kept as JSON, and no recursion on hostile nesting. This reader gives that:
//! one pass over a `&str` into a flat list of [`Node`]s, each a byte span of the input;
//! containers deeper than `max_depth` are validated but kept as one [`Kind::Raw`] node
//! (their exact text), so memory is bounded by the shallow part of the document and
//! nesting depth costs 16 bytes of heap per level, never stack.
//!
//! It follows RFC 8259 strictly (no comments, trailing commas, `NaN`, control characters
//! in strings, or lone surrogates) and accepts numbers an `f64` cannot hold (`1e400`:
//! their literal text is kept).

use std::borrow::Cow;

/// Class of a number literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumClass {
    /// An integer literal that fits `i64`.
    Int,
    /// A literal an `f64` holds exactly enough to print it back (at most 15 significant
    /// digits, finite, not flushed to zero).
    Float,
    /// Anything else: beyond `i64` or `f64`, or more precise than an `f64`. Kept as text.
    Big,
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number literal.
    Num(NumClass),
    /// A string; `escaped` when its text holds a backslash escape.
    Str {
        /// The literal holds a `\` escape and must be decoded.
        escaped: bool,
    },
    /// An object: its members follow as (key string, value) node pairs.
    Object,
    /// An array: its elements follow.
    Array,
    /// An object or array beyond the depth limit, kept as its source text.
    Raw,
}

/// One value of the document: its kind, its byte span in the text and the index of the
/// node after its sub-tree (so siblings are reached without walking children).
#[derive(Clone, Copy, Debug)]
pub struct Node {
    /// What the node is.
    pub kind: Kind,
    start: u32,
    end: u32,
    next: u32,
}

/// Why a text is not JSON: the byte offset and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset in the text.
    pub offset: usize,
    /// What went wrong.
    pub reason: &'static str,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

impl std::error::Error for ParseError {}

/// A parsed document: the text and its nodes (node 0 is the root).
#[derive(Debug)]
pub struct Doc<'a> {
    text: &'a str,
    nodes: Vec<Node>,
}

impl<'a> Doc<'a> {
    /// Parses `text`, materialising containers up to `max_depth` levels deep (the root is
    /// level 1); deeper ones become [`Kind::Raw`].
    pub fn parse(text: &'a str, max_depth: usize) -> Result<Doc<'a>, ParseError> {
        let mut nodes = Vec::new();
        parse_into(text, max_depth, &mut nodes)?;
        Ok(Doc { text, nodes })
    }

    /// Parses reusing `nodes`' allocation (cleared first); give it back with
    /// [`Doc::into_nodes`].
    pub fn parse_reusing(
        text: &'a str,
        max_depth: usize,
        mut nodes: Vec<Node>,
    ) -> Result<Doc<'a>, (ParseError, Vec<Node>)> {
        match parse_into(text, max_depth, &mut nodes) {
            Ok(()) => Ok(Doc { text, nodes }),
            Err(e) => Err((e, nodes)),
        }
    }

    /// The node storage, for reuse.
    pub fn into_nodes(self) -> Vec<Node> {
        self.nodes
    }

    /// The root node's index (always 0).
    pub fn root(&self) -> usize {
        0
    }

    /// Node `i`.
    #[cfg(any(test, feature = "testing"))]
    pub fn node(&self, i: usize) -> Node {
        self.nodes[i]
    }

    /// Kind of node `i`.
    pub fn kind(&self, i: usize) -> Kind {
        self.nodes[i].kind
    }

    /// The exact source text of node `i` (with quotes for strings).
    pub fn raw(&self, i: usize) -> &'a str {
        let n = self.nodes[i];
        &self.text[n.start as usize..n.end as usize]
    }

    /// `(key node, value node)` of object `i`'s members, in source order.
    pub fn members(&self, i: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let end = self.nodes[i].next as usize;
        let mut j = i + 1;
        std::iter::from_fn(move || {
            if j >= end {
                return None;
            }
            let key = j;
            let value = j + 1;
            j = self.nodes[value].next as usize;
            Some((key, value))
        })
    }

    /// Element nodes of array `i`, in order.
    pub fn elements(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let end = self.nodes[i].next as usize;
        let mut j = i + 1;
        std::iter::from_fn(move || {
            if j >= end {
                return None;
            }
            let e = j;
            j = self.nodes[e].next as usize;
            Some(e)
        })
    }

    /// Whether container `i` has no members or elements.
    pub fn is_empty(&self, i: usize) -> bool {
        self.nodes[i].next as usize == i + 1
    }

    /// The decoded value of string node `i`.
    #[inline(always)]
    pub fn str(&self, i: usize) -> Cow<'a, str> {
        let n = self.nodes[i];
        if n.kind == (Kind::Str { escaped: true }) {
            decode_string(self.raw(i), true)
        } else {
            // Without escapes the value is the text between the quotes.
            Cow::Borrowed(&self.text[n.start as usize + 1..n.end as usize - 1])
        }
    }
}

/// Decodes a string literal (with its quotes) that this module validated.
#[inline]
pub fn decode_string(raw: &str, escaped: bool) -> Cow<'_, str> {
    let inner = &raw[1..raw.len() - 1];
    if !escaped {
        return Cow::Borrowed(inner);
    }
    Cow::Owned(decode_escapes(inner))
}

/// The text of a string literal's inside `inner`, its escapes decoded.
fn decode_escapes(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    // Runs between escapes are copied whole; only the escapes go char by char.
    while let Some(at) = memchr::memchr(b'\\', rest.as_bytes()) {
        out.push_str(&rest[..at]);
        let mut chars = rest[at + 1..].chars();
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hi = hex4(&mut chars);
                let code = if (0xD800..0xDC00).contains(&hi) {
                    // Validated: a high surrogate is followed by `\u` and a low one.
                    chars.next();
                    chars.next();
                    let lo = hex4(&mut chars);
                    0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)
                } else {
                    hi
                };
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            Some(other) => out.push(other),
            None => {}
        }
        rest = chars.as_str();
    }
    out.push_str(rest);
    out
}

fn hex4(chars: &mut std::str::Chars<'_>) -> u32 {
    let mut v = 0;
    for _ in 0..4 {
        v = v * 16 + chars.next().and_then(|c| c.to_digit(16)).unwrap_or(0);
    }
    v
}

/// Checks that `text` is one JSON value (nothing materialised).
#[cfg(any(test, feature = "testing"))]
pub fn validate(text: &str) -> Result<(), ParseError> {
    let mut nodes = Vec::new();
    parse_into(text, 0, &mut nodes)
}

/// Stack entry of an open container.
#[derive(Clone, Copy)]
struct Open {
    is_object: bool,
    /// The node to close, when this container was materialised (or is the outermost of a
    /// raw sub-tree).
    node: Option<u32>,
    /// Inside (or the top of) a raw sub-tree.
    raw: bool,
}

fn err(offset: usize, reason: &'static str) -> ParseError {
    ParseError { offset, reason }
}

fn parse_into(text: &str, max_depth: usize, nodes: &mut Vec<Node>) -> Result<(), ParseError> {
    nodes.clear();
    let b = text.as_bytes();
    if b.len() >= u32::MAX as usize {
        return Err(err(0, "text longer than 4 GiB"));
    }
    // One allocation per document for the usual depths (growing it costs more).
    let mut stack: Vec<Open> = Vec::with_capacity(16);
    let mut i = ws(b, 0);
    // Each round parses one value at `i`, then consumes separators and closing brackets
    // until the next value starts (or the document ends).
    loop {
        let in_raw = stack.last().is_some_and(|o| o.raw);
        match b.get(i) {
            None => return Err(err(i, "unexpected end, expected a value")),
            Some(b'{' | b'[') => match open(b, i, &mut stack, nodes, max_depth)? {
                Opened::Value(next) => {
                    i = next;
                    continue;
                }
                // Empty container: closed by the loop below.
                Opened::Empty(close) => i = close,
            },
            Some(b'"') => {
                let (end, kind) = string(b, i)?;
                if !in_raw {
                    push_leaf(nodes, kind, i, end);
                }
                i = end;
            }
            Some(b't') => i = literal(b, i, b"true", nodes, Kind::Bool(true), in_raw)?,
            Some(b'f') => i = literal(b, i, b"false", nodes, Kind::Bool(false), in_raw)?,
            Some(b'n') => i = literal(b, i, b"null", nodes, Kind::Null, in_raw)?,
            Some(b'-' | b'0'..=b'9') => {
                let (end, shape) = number(b, i)?;
                if !in_raw {
                    push_leaf(nodes, Kind::Num(shape.class(&text[i..end])), i, end);
                }
                i = end;
            }
            Some(_) => return Err(err(i, "expected a value")),
        }
        // After a value: separators and closings.
        match after_value(b, i, &mut stack, nodes)? {
            Some(next) => i = next,
            None => return Ok(()),
        }
    }
}

/// Where parsing goes on after an opening bracket.
enum Opened {
    /// At the container's first value.
    Value(usize),
    /// At the closing bracket of an empty container.
    Empty(usize),
}

/// Opens the container whose bracket is at `i`: its node (none inside a raw sub-tree,
/// [`Kind::Raw`] past `max_depth`), its stack entry, and an object's first key.
#[inline(always)]
fn open(
    b: &[u8],
    i: usize,
    stack: &mut Vec<Open>,
    nodes: &mut Vec<Node>,
    max_depth: usize,
) -> Result<Opened, ParseError> {
    let is_object = b.get(i) == Some(&b'{');
    let in_raw = stack.last().is_some_and(|o| o.raw);
    let node = if in_raw {
        None
    } else {
        nodes.push(Node {
            kind: if stack.len() >= max_depth {
                Kind::Raw
            } else if is_object {
                Kind::Object
            } else {
                Kind::Array
            },
            start: i as u32,
            end: 0,
            next: 0,
        });
        Some((nodes.len() - 1) as u32)
    };
    stack.push(Open {
        is_object,
        node,
        raw: in_raw || stack.len() >= max_depth,
    });
    let i = ws(b, i + 1);
    let close = if is_object { b'}' } else { b']' };
    if b.get(i) == Some(&close) {
        return Ok(Opened::Empty(i));
    }
    if is_object {
        let raw = in_raw || stack.last().is_some_and(|o| o.raw);
        return Ok(Opened::Value(key(b, i, nodes, raw)?));
    }
    Ok(Opened::Value(i))
}

/// Consumes the separators and closing brackets after a value at `i`: the start of the
/// next value, or `None` when the document is complete.
#[inline(always)]
fn after_value(
    b: &[u8],
    mut i: usize,
    stack: &mut Vec<Open>,
    nodes: &mut Vec<Node>,
) -> Result<Option<usize>, ParseError> {
    loop {
        i = ws(b, i);
        let Some(top) = stack.last().copied() else {
            return if i == b.len() {
                Ok(None)
            } else {
                Err(err(i, "unexpected text after the value"))
            };
        };
        match b.get(i) {
            Some(b',') => {
                i = ws(b, i + 1);
                if top.is_object {
                    i = key(b, i, nodes, top.raw)?;
                }
                return Ok(Some(i));
            }
            Some(b'}') if top.is_object => {}
            Some(b']') if !top.is_object => {}
            None => return Err(err(i, "unexpected end inside a container")),
            Some(_) => {
                return Err(err(
                    i,
                    if top.is_object {
                        "expected `,` or `}`"
                    } else {
                        "expected `,` or `]`"
                    },
                ));
            }
        }
        i += 1;
        stack.pop();
        if let Some(n) = top.node {
            let next = nodes.len() as u32;
            let node = &mut nodes[n as usize];
            node.end = i as u32;
            node.next = next;
        }
    }
}

fn push_leaf(nodes: &mut Vec<Node>, kind: Kind, start: usize, end: usize) {
    let next = nodes.len() as u32 + 1;
    nodes.push(Node {
        kind,
        start: start as u32,
        end: end as u32,
        next,
    });
}

/// Parses `"key" :` at `i`; returns the index of the value after it.
fn key(b: &[u8], i: usize, nodes: &mut Vec<Node>, raw: bool) -> Result<usize, ParseError> {
    if b.get(i) != Some(&b'"') {
        return Err(err(i, "expected a string key"));
    }
    let (end, kind) = string(b, i)?;
    if !raw {
        push_leaf(nodes, kind, i, end);
    }
    let j = ws(b, end);
    if b.get(j) != Some(&b':') {
        return Err(err(j, "expected `:`"));
    }
    Ok(ws(b, j + 1))
}

fn literal(
    b: &[u8],
    i: usize,
    word: &[u8],
    nodes: &mut Vec<Node>,
    kind: Kind,
    raw: bool,
) -> Result<usize, ParseError> {
    if b.get(i..i + word.len()) != Some(word) {
        return Err(err(i, "expected a value"));
    }
    if !raw {
        push_leaf(nodes, kind, i, i + word.len());
    }
    Ok(i + word.len())
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index of the first byte at or after `i` that is `"`, `\\` or a control character
/// (below 0x20), or `b.len()`: the end of a run of plain string bytes, eight bytes a step.
fn plain_run_end(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    /// High bit set in each byte of `x` that is zero (exact for the lowest such byte).
    fn zero_bytes(x: u64) -> u64 {
        x.wrapping_sub(LO) & !x & HI
    }
    while let Some(Ok(chunk)) = b.get(i..i + 8).map(<[u8; 8]>::try_from) {
        let w = u64::from_le_bytes(chunk);
        let hits = zero_bytes(w ^ (LO * u64::from(b'"')))
            | zero_bytes(w ^ (LO * u64::from(b'\\')))
            | (w.wrapping_sub(LO * 0x20) & !w & HI);
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while b
        .get(i)
        .is_some_and(|&c| c != b'"' && c != b'\\' && c >= 0x20)
    {
        i += 1;
    }
    i
}

/// `b[i]` is `"`: returns the index past the closing quote and its kind ([`Kind::Str`],
/// saying whether it had escapes).
fn string(b: &[u8], i: usize) -> Result<(usize, Kind), ParseError> {
    let mut j = i + 1;
    let mut escaped = false;
    loop {
        j = plain_run_end(b, j);
        match b.get(j) {
            None => return Err(err(j, "unterminated string")),
            Some(b'"') => return Ok((j + 1, Kind::Str { escaped })),
            Some(b'\\') => {
                escaped = true;
                match b.get(j + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                    Some(b'u') => {
                        let hi = hex_at(b, j + 2).ok_or_else(|| err(j, "bad \\u escape"))?;
                        j += 6;
                        if (0xD800..0xDC00).contains(&hi) {
                            let low_follows = b.get(j) == Some(&b'\\')
                                && b.get(j + 1) == Some(&b'u')
                                && hex_at(b, j + 2)
                                    .is_some_and(|lo| (0xDC00..0xE000).contains(&lo));
                            if !low_follows {
                                return Err(err(j, "lone high surrogate"));
                            }
                            j += 6;
                        } else if (0xDC00..0xE000).contains(&hi) {
                            return Err(err(j - 6, "lone low surrogate"));
                        }
                    }
                    _ => return Err(err(j, "bad escape")),
                }
            }
            Some(c) if *c < 0x20 => return Err(err(j, "control character in string")),
            Some(_) => j += 1,
        }
    }
}

fn hex_at(b: &[u8], i: usize) -> Option<u32> {
    let s = b.get(i..i + 4)?;
    s.iter()
        .try_fold(0u32, |v, &c| (c as char).to_digit(16).map(|d| v * 16 + d))
}

/// What a number literal's grammar tells about it, for [`NumShape::class`].
struct NumShape {
    is_float: bool,
    /// Significant digits of its mantissa (leading and trailing zeros do not count).
    significant: usize,
    /// Digits before the point, and after it.
    int_digits: usize,
    frac_digits: usize,
    has_exponent: bool,
}

impl NumShape {
    /// The class of the literal `lit` this shape was read from. Only materialised numbers
    /// are classified: a raw sub-tree's (and staging's, beyond the top level) are only
    /// validated, without the `i64` / `f64` parse.
    fn class(&self, lit: &str) -> NumClass {
        if !self.is_float {
            // 18 digits always fit an `i64` (below 9.2e18).
            return if self.int_digits <= 18 || lit.parse::<i64>().is_ok() {
                NumClass::Int
            } else {
                NumClass::Big
            };
        }
        let significant = self.significant;
        if significant > 15 {
            return NumClass::Big;
        }
        if !self.has_exponent && self.int_digits <= 300 && self.frac_digits <= 300 {
            // Below 1e300, so finite; zero only when no digit is significant; and at most
            // 300 fraction digits keep any other value above the subnormals (1e-308).
            return NumClass::Float;
        }
        match lit.parse::<f64>() {
            Ok(v) if v.is_finite() && significant <= 15 && (v != 0.0 || significant == 0) => {
                // Subnormals print back with fewer digits than they were written with.
                if v != 0.0 && v.abs() < f64::MIN_POSITIVE {
                    NumClass::Big
                } else {
                    NumClass::Float
                }
            }
            _ => NumClass::Big,
        }
    }
}

/// Validates a number literal at `i`: the index past it and its shape.
fn number(b: &[u8], i: usize) -> Result<(usize, NumShape), ParseError> {
    let mut j = i;
    if b[j] == b'-' {
        j += 1;
    }
    let int_start = j;
    match b.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => j = digits_end(b, j),
        _ => return Err(err(j, "expected a digit")),
    }
    let int_digits = &b[int_start..j];
    let (j, frac_digits) = match b.get(j) {
        Some(b'.') => fraction(b, j).map(|(end, digits)| (end, Some(digits)))?,
        _ => (j, None),
    };
    let has_exponent = matches!(b.get(j), Some(b'e' | b'E'));
    let j = if has_exponent { exponent_end(b, j)? } else { j };
    let is_float = frac_digits.is_some() || has_exponent;
    let frac_digits = frac_digits.unwrap_or(&[]);
    let significant = if is_float {
        significant_digits(int_digits, frac_digits)
    } else {
        0
    };
    Ok((
        j,
        NumShape {
            is_float,
            significant,
            int_digits: int_digits.len(),
            frac_digits: frac_digits.len(),
            has_exponent,
        },
    ))
}

/// The index past the digits from `j` on.
#[inline]
fn digits_end(b: &[u8], mut j: usize) -> usize {
    while b.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    j
}

/// A number's fraction, its `.` at `dot`: the index past its digits, and them (at least
/// one).
#[inline]
fn fraction(b: &[u8], dot: usize) -> Result<(usize, &[u8]), ParseError> {
    let s = dot + 1;
    let j = digits_end(b, s);
    if j == s {
        return Err(err(j, "expected a digit after `.`"));
    }
    Ok((j, &b[s..j]))
}

/// The index past a number's exponent, its `e` or `E` at `e`: an optional sign, then
/// at least one digit.
#[inline]
fn exponent_end(b: &[u8], e: usize) -> Result<usize, ParseError> {
    let mut s = e + 1;
    if matches!(b.get(s), Some(b'+' | b'-')) {
        s += 1;
    }
    let j = digits_end(b, s);
    if j == s {
        return Err(err(j, "expected a digit in the exponent"));
    }
    Ok(j)
}

/// Significant digits of a decimal written as `int.frac` (leading and trailing zeros
/// do not count).
fn significant_digits(int: &[u8], frac: &[u8]) -> usize {
    let digits = || int.iter().chain(frac);
    let Some(first) = digits().position(|&d| d != b'0') else {
        return 0;
    };
    let trailing_zeros = digits().rev().take_while(|&&d| d == b'0').count();
    int.len() + frac.len() - trailing_zeros - first
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The eight-bytes-a-step scan stops exactly where a byte-by-byte one does,
        /// wherever it starts (bytes biased towards the ones it stops at).
        #[test]
        fn plain_run_end_matches_a_byte_scan(
            b in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<u8>(),
                    proptest::prelude::Just(b'"'),
                    proptest::prelude::Just(b'\\'),
                    0u8..0x20,
                    0x20u8..0x7f,
                ],
                0..64,
            ),
            start in 0usize..64,
        ) {
            let start = start.min(b.len());
            let naive = (start..b.len())
                .find(|&i| b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20)
                .unwrap_or(b.len());
            proptest::prop_assert_eq!(plain_run_end(&b, start), naive);
        }

        /// A string escaped by serde_json (control characters, quotes, backslashes;
        /// `\u` escapes incl. surrogate pairs written by hand) decodes to itself.
        #[test]
        fn escaped_strings_decode_to_what_was_escaped(
            s in "[a-z\"\\\n\t\r\u{1}\u{8}\u{c}\u{e9}\u{1F600} ]{0,24}",
            ascii_escapes in proptest::prelude::any::<bool>(),
        ) {
            let mut json = serde_json::to_string(&s).unwrap();
            if ascii_escapes {
                // Every non-ASCII char as `\uXXXX` (a pair above the BMP).
                let mut out = String::new();
                for c in json.chars() {
                    if c.is_ascii() {
                        out.push(c);
                    } else {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                }
                json = out;
            }
            validate(&json).unwrap();
            let escaped = json.contains('\\');
            let decoded = decode_string(&json, escaped);
            proptest::prop_assert_eq!(decoded.as_ref(), s.as_str());
        }
    }

    #[test]
    fn members_elements_and_raw_text() {
        let d = Doc::parse(
            r#" {"a": 1, "b": [true, null, "x\ny"], "c": {"d": -2.5e3}} "#,
            16,
        )
        .unwrap();
        let m: Vec<_> = d.members(0).map(|(k, v)| (d.str(k), d.kind(v))).collect();
        assert_eq!(m[0], ("a".into(), Kind::Num(NumClass::Int)));
        assert_eq!(m[1].1, Kind::Array);
        let (_, arr) = d.members(0).nth(1).unwrap();
        let els: Vec<_> = d.elements(arr).map(|e| d.raw(e)).collect();
        assert_eq!(els, ["true", "null", r#""x\ny""#]);
        assert_eq!(d.str(d.elements(arr).nth(2).unwrap()), "x\ny");
        let (_, c) = d.members(0).nth(2).unwrap();
        assert_eq!(d.raw(c), r#"{"d": -2.5e3}"#);
    }

    #[test]
    fn depth_beyond_the_limit_is_raw_and_iterative() {
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let d = Doc::parse(&deep, 2).unwrap();
        assert_eq!(d.kind(0), Kind::Array);
        let inner = d.elements(d.elements(0).next().unwrap()).next().unwrap();
        assert_eq!(d.kind(inner), Kind::Raw);
        assert_eq!(d.raw(inner).len(), deep.len() - 4);
        assert!(d.nodes.len() < 10);
        validate(&deep).unwrap();
        let unbalanced = format!("{}1{}", "[".repeat(100_000), "]".repeat(99_999));
        assert!(validate(&unbalanced).is_err());
    }

    #[test]
    fn numbers_are_classified_by_what_survives_a_round_trip() {
        let class = |s: &str| match Doc::parse(s, 4).unwrap().kind(0) {
            Kind::Num(c) => c,
            k => panic!("{k:?}"),
        };
        assert_eq!(class("9223372036854775807"), NumClass::Int);
        assert_eq!(class("9223372036854775808"), NumClass::Big);
        assert_eq!(class("-12"), NumClass::Int);
        assert_eq!(class("1.5"), NumClass::Float);
        assert_eq!(class("0.1"), NumClass::Float);
        assert_eq!(class("0.0"), NumClass::Float);
        assert_eq!(class("1e400"), NumClass::Big);
        assert_eq!(class("1e-400"), NumClass::Big);
        assert_eq!(class("3.14159265358979323846"), NumClass::Big);
        assert_eq!(class("123456789012345.0"), NumClass::Float);
        // Significant digits: leading and trailing zeros on either side of the point
        // do not count.
        assert_eq!(class("1234567890123456.0"), NumClass::Big);
        assert_eq!(class("0.000000000000000123456789012345"), NumClass::Float);
        assert_eq!(class("0.0000000000000001234567890123456"), NumClass::Big);
        assert_eq!(class("100000000000000000000.000"), NumClass::Float);
        assert_eq!(class("1.0000000000000001"), NumClass::Big);
        // Without an exponent, the digits on either side of the point decide.
        assert_eq!(class("999999999999999999"), NumClass::Int);
        assert_eq!(class("-999999999999999999"), NumClass::Int);
        assert_eq!(class("-9223372036854775808"), NumClass::Int);
        assert_eq!(class("-9223372036854775809"), NumClass::Big);
        assert_eq!(class("-0.0"), NumClass::Float);
        let zeros = "0".repeat(300);
        assert_eq!(class(&format!("1{zeros}{zeros}.0")), NumClass::Big);
        assert_eq!(class(&format!("1{zeros}.0")), NumClass::Float);
        assert_eq!(class(&format!("1{}.0", &zeros[1..])), NumClass::Float);
        assert_eq!(class(&format!("0.{zeros}1")), NumClass::Float);
        assert_eq!(class(&format!("0.{zeros}{zeros}1")), NumClass::Big);
        assert_eq!(class("1.5e3"), NumClass::Float);
        assert_eq!(significant_digits(b"00120", b"0300"), 5);
        assert_eq!(significant_digits(b"0", b"000"), 0);
        // Beyond the depth limit numbers are validated, not classified.
        assert!(Doc::parse("[[1e400, 98765432109876543210, -0.5]]", 1).is_ok());
        for bad in ["[[1.]]", "[[01]]", "[[-]]", "[[1e]]"] {
            assert!(Doc::parse(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn strict_rfc_8259() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\":1,}",
            "NaN",
            "Infinity",
            "[01]",
            "[1.]",
            "[.5]",
            "// c\n1",
            "{'a':1}",
            "\"a\tb\"",
            "\"\\x\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "[1] 2",
            "{\"a\" 1}",
            "tru",
            "-",
            "1e",
            "[\"a\"",
            "{\"a\":}",
        ] {
            assert!(validate(bad).is_err(), "{bad:?} accepted");
        }
        for good in [
            "0",
            "-0.5e-3",
            "\"\\ud83d\\ude00\"",
            "[]",
            "{}",
            " [ 1 , { } ] ",
            "\"é✓\"",
        ] {
            validate(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
        }
        let d = Doc::parse(r#""\ud83d\ude00 \u00e9 \/""#, 1).unwrap();
        assert_eq!(d.str(0), "😀 é /");
    }
}
