//! Records: a file's text cut into the JSON values staging parses, one per line (JSON
//! Lines), the elements of one top-level array, or values one after another over many
//! lines (pretty-printed envelopes).
//!
//! Cutting never parses: it follows brackets and strings only, so a broken record is cut
//! where the next one starts and kept whole with its bytes, and a file of any size can be
//! cut piece by piece ([`Cutter::cut`] with `eof = false` takes the whole records of a
//! piece and leaves the rest for the next one). Each record's line is the line its first
//! byte is on.

use serde::{Deserialize, Serialize};

use crate::source::read::{Line, lines};

/// How a file's records are laid out (`format` in `bronze.toml`, `--format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Decided per file by its first non-blank byte and the value it starts: `[` is an
    /// array (unless that array ends on its line and more follows: JSON Lines whose first
    /// line is an array); a `{` whose value ends on a later line is a stream; anything
    /// else is lines (default).
    #[default]
    Auto,
    /// JSON Lines: one record per line.
    Lines,
    /// One top-level JSON array whose elements are the records (several arrays one
    /// after another are read in turn; a file that does not start with `[` is read as a
    /// stream).
    Array,
    /// JSON values one after another, each over as many lines as it takes. A `{` at the
    /// start of a line always starts a record, so one broken record does not take the
    /// ones after it.
    Stream,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Auto => "auto",
            Format::Lines => "lines",
            Format::Array => "array",
            Format::Stream => "stream",
        })
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(Format::Auto),
            "lines" => Ok(Format::Lines),
            "array" => Ok(Format::Array),
            "stream" => Ok(Format::Stream),
            other => Err(format!(
                "{other:?} is not a format; write auto, lines, array or stream"
            )),
        }
    }
}

impl Format {
    /// The format `text` (a file's first bytes, or all of them) is read in: this one,
    /// or for [`Format::Auto`] the one its first non-blank byte says.
    pub fn of_text(self, text: &[u8]) -> Format {
        if self != Format::Auto {
            return self;
        }
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        let Some(start) = text.iter().position(|b| !b.is_ascii_whitespace()) else {
            return Format::Lines;
        };
        // The first value, looked at up to its first line break (an array) or its first
        // MiB (an object): a large file is not scanned whole to decide.
        let line_end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        let on_its_line = value_end(&text[..line_end], start, None).1 == Ended::Closed;
        match text[start] {
            // JSON Lines whose first record is an array (a corrupt line, kept as one).
            b'[' if on_its_line && text[line_end..].iter().any(|b| !b.is_ascii_whitespace()) => {
                Format::Lines
            }
            b'[' => Format::Array,
            b'{' if !on_its_line => {
                let window = &text[..text.len().min(start + (1 << 20))];
                match value_end(window, start, None).1 {
                    Ended::Closed => Format::Stream,
                    _ => Format::Lines,
                }
            }
            _ => Format::Lines,
        }
    }
}

/// A record of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Its first line's number and its bytes (`raw` and `text` alike, without the
    /// whitespace around it, for an array element or a value of a stream).
    pub line: Line<'a>,
    /// How many records start on the same line before it (elements of an array written
    /// on one line): with the line, it tells the records of a file apart.
    pub nth: u32,
    /// Why it is corrupt, when that is known without parsing it.
    pub corrupt: Option<&'static str>,
}

/// Why a record at the end of a file is corrupt: its array was never closed.
pub const ARRAY_NOT_CLOSED: &str =
    "the JSON array is not closed at the end of the file: it may have been cut short";

/// Where an array file stands between pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before an array's `[` (or between arrays).
    Outside,
    /// Inside an array, before an element.
    Inside,
}

/// Cuts a file's text into records, piece after piece.
#[derive(Clone, Debug)]
pub struct Cutter {
    format: Format,
    phase: Phase,
    /// The line the next piece starts on.
    line: u64,
    /// The next piece is the file's first (its byte order mark is dropped).
    first: bool,
    /// The line of the last record, and how many records started on it before that one.
    last: (u64, u32),
    /// The next piece starts at the start of a line (the file's start, or after a line
    /// break): the indentation of a record on its first line is then known.
    at_line_start: bool,
}

/// How [`value_end`] found a value's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Its brackets closed, or a scalar ended at whitespace.
    Closed,
    /// A line at the record's own indentation started a `{` before its brackets closed.
    Cut,
    /// The text ended first.
    Eof,
}

/// The first byte of the line after the line break at `i` when that line starts at
/// `indent` exactly (`None`: no indentation known, or another one).
fn at_indent(text: &[u8], i: usize, indent: Option<&[u8]>) -> Option<u8> {
    let indent = indent?;
    if text[i] != b'\n' || !text[i + 1..].starts_with(indent) {
        return None;
    }
    let first = *text.get(i + 1 + indent.len())?;
    (!matches!(first, b' ' | b'\t')).then_some(first)
}

/// Whether a line break at `i` starts a line with `{` at `indent`: a record starting
/// where the one before it started, which a pretty printer never writes inside a record
/// it indents (what is inside is indented deeper), so the one before it is broken.
fn starts_record(text: &[u8], i: usize, indent: Option<&[u8]>) -> bool {
    at_indent(text, i, indent) == Some(b'{')
}

/// What a line at the record's own indentation says while the record is open: a `{`
/// starts the next record (the open one is broken), unless the record is written without
/// indenting what is inside it (`flat`: a line of it already started at its indentation
/// with something other than a closing bracket), where a `{` there may be part of it.
fn cut_here(text: &[u8], i: usize, indent: Option<&[u8]>, flat: &mut bool) -> bool {
    match at_indent(text, i, indent) {
        Some(b'{') => !*flat,
        Some(b'}' | b']') | None => false,
        Some(_) => {
            *flat = true;
            false
        }
    }
}

/// The end of the value starting at `at` (not whitespace): past its closing bracket or
/// quote, or at the whitespace after a bare scalar; before its brackets close, at a line
/// starting another record at its `indent` ([`starts_record`]).
fn value_end(text: &[u8], at: usize, indent: Option<&[u8]>) -> (usize, Ended) {
    match text[at] {
        b'{' | b'[' => {}
        b'"' => {
            let mut escaped = false;
            for (i, &b) in text.iter().enumerate().skip(at + 1) {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => return (i + 1, Ended::Closed),
                    _ => {}
                }
            }
            return (text.len(), Ended::Eof);
        }
        _ => {
            return match text[at..].iter().position(|b| b.is_ascii_whitespace()) {
                Some(n) => (at + n, Ended::Closed),
                None => (text.len(), Ended::Eof),
            };
        }
    }
    let mut depth = 0usize;
    let mut flat = false;
    let mut i = at;
    while i < text.len() {
        match text[i] {
            b'\n' if cut_here(text, i, indent, &mut flat) => return (i, Ended::Cut),
            b'"' => match string_end(text, i + 1, indent.filter(|_| !flat)) {
                StringEnd::Closed(end) => {
                    i = end;
                    continue;
                }
                StringEnd::Cut(at) => return (at, Ended::Cut),
                StringEnd::Eof => return (text.len(), Ended::Eof),
            },
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return (i + 1, Ended::Closed);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (text.len(), Ended::Eof)
}

/// Where a string ends.
enum StringEnd {
    /// Past its closing quote.
    Closed(usize),
    /// At a line break inside it that starts another record ([`starts_record`]).
    Cut(usize),
    /// The text ended first.
    Eof,
}

/// The end of the string whose text starts at `from` (after its opening quote), found
/// by jumping to the next quote, backslash or (with `indent`) line break: strings are
/// most of a record's bytes.
fn string_end(text: &[u8], mut from: usize, indent: Option<&[u8]>) -> StringEnd {
    while from < text.len() {
        let rest = &text[from..];
        let next = match indent {
            Some(_) => memchr::memchr3(b'"', b'\\', b'\n', rest),
            None => memchr::memchr2(b'"', b'\\', rest),
        };
        let Some(n) = next else {
            return StringEnd::Eof;
        };
        let at = from + n;
        match text[at] {
            b'"' => return StringEnd::Closed(at + 1),
            b'\\' => from = at + 2,
            _ if starts_record(text, at, indent) => return StringEnd::Cut(at),
            _ => from = at + 1,
        }
    }
    StringEnd::Eof
}

/// How an array element ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Comma,
    Close,
    /// A line at the element's own indentation started a `{` ([`starts_record`]).
    Cut,
    Eof,
}

/// The end of the array element starting at `at`: the `,` or `]` after it at its own
/// depth (strings skipped), a line starting another element at its `indent`, or the end
/// of the text.
fn element_end(text: &[u8], at: usize, indent: Option<&[u8]>) -> (usize, Stop) {
    let mut depth = 0usize;
    let mut flat = false;
    let mut i = at;
    while i < text.len() {
        match text[i] {
            b'\n' if depth > 0 && cut_here(text, i, indent, &mut flat) => {
                return (i, Stop::Cut);
            }
            b'"' => {
                let within = if depth > 0 && !flat { indent } else { None };
                match string_end(text, i + 1, within) {
                    StringEnd::Closed(end) => {
                        i = end;
                        continue;
                    }
                    StringEnd::Cut(at) => return (at, Stop::Cut),
                    StringEnd::Eof => return (text.len(), Stop::Eof),
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b']' if depth == 0 => return (i, Stop::Close),
            b']' => depth -= 1,
            b',' if depth == 0 => return (i, Stop::Comma),
            _ => {}
        }
        i += 1;
    }
    (text.len(), Stop::Eof)
}

/// A value [`Cutter::value_at`] found: the record's bytes (none for an array's bracket)
/// and where the next value may start.
struct Value {
    record: Option<std::ops::Range<usize>>,
    next: usize,
}

impl Value {
    /// An array's bracket at `at`: no record.
    fn bracket(at: usize) -> Value {
        Value {
            record: None,
            next: at + 1,
        }
    }

    /// The record at `bytes`, the next value starting at `next` or after.
    fn record(bytes: std::ops::Range<usize>, next: usize) -> Value {
        Value {
            record: Some(bytes),
            next,
        }
    }
}

/// `text[range]` without whitespace around it.
fn trimmed(text: &[u8], start: usize, end: usize) -> &[u8] {
    text[start..end].trim_ascii()
}

impl Cutter {
    /// A cutter for a file read in `format` (decided: not [`Format::Auto`]).
    pub fn new(format: Format) -> Self {
        Cutter {
            format,
            phase: Phase::Outside,
            line: 1,
            first: true,
            last: (0, 0),
            at_line_start: true,
        }
    }

    /// The line the next piece starts on (after the last piece: one past the file's
    /// last line break).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Cuts the whole records of `text` (the next piece of the file) and hands each to
    /// `each`; returns the bytes taken. The rest (a record not yet whole) starts the next
    /// piece; with `eof` every byte is taken, a record cut short included (an array left
    /// open adds a record saying so).
    pub fn cut<'a>(
        &mut self,
        text: &'a [u8],
        eof: bool,
        each: &mut dyn FnMut(Record<'a>),
    ) -> usize {
        let taken = match self.format {
            Format::Lines | Format::Auto => self.cut_lines(text, eof, each),
            Format::Array | Format::Stream => {
                let bom = self.first && text.starts_with(b"\xEF\xBB\xBF");
                self.cut_values(text, if bom { 3 } else { 0 }, eof, each)
            }
        };
        // Still the file's first piece when nothing of it was taken.
        if taken > 0 {
            self.first = false;
        }
        taken
    }

    /// Lines, as [`lines`] gives them: a byte order mark is dropped from the file's
    /// first line only.
    fn cut_lines<'a>(
        &mut self,
        text: &'a [u8],
        eof: bool,
        each: &mut dyn FnMut(Record<'a>),
    ) -> usize {
        let end = if eof {
            text.len()
        } else {
            memchr::memrchr(b'\n', text).map_or(0, |i| i + 1)
        };
        let first = self.line;
        for mut line in lines(&text[..end]) {
            if line.number == 1 && !self.first {
                line.text = line.raw.strip_suffix(b"\r").unwrap_or(line.raw);
            }
            line.number += first - 1;
            self.line = line.number + 1;
            self.emit(line, None, each);
        }
        end
    }

    /// Hands `line` to `each` as a record, numbered among the records of its line.
    fn emit<'a>(
        &mut self,
        line: Line<'a>,
        corrupt: Option<&'static str>,
        each: &mut dyn FnMut(Record<'a>),
    ) {
        let nth = match self.last {
            (at, n) if at == line.number => n + 1,
            _ => 0,
        };
        self.last = (line.number, nth);
        each(Record { line, nth, corrupt });
    }

    /// The line of `text[to]`, counting from `text[from]` on line `self.line`.
    fn advance(&mut self, text: &[u8], from: usize, to: usize) {
        self.line += memchr::memchr_iter(b'\n', &text[from..to]).count() as u64;
    }

    /// Values, one after another or as the elements of arrays, from `text[pos]` on.
    fn cut_values<'a>(
        &mut self,
        text: &'a [u8],
        mut pos: usize,
        eof: bool,
        each: &mut dyn FnMut(Record<'a>),
    ) -> usize {
        // `self.line` is the line of `text[pos]` throughout.
        loop {
            let Some(start) = text[pos..]
                .iter()
                .position(|b| !b.is_ascii_whitespace())
                .map(|n| pos + n)
            else {
                return self.blank_rest(text, pos, eof, each);
            };
            // A record opening its line: the indentation before it, to tell where the
            // next one starts if it is broken.
            let line_start = memchr::memrchr(b'\n', &text[..start]).map_or(0, |i| i + 1);
            let indent = (line_start > 0 || self.at_line_start)
                .then(|| &text[line_start..start])
                .filter(|ws| ws.iter().all(|b| matches!(b, b' ' | b'\t')));
            let Some(found) = self.value_at(text, start, indent, eof) else {
                return self.stop_at(text, pos, line_start.max(pos).min(start));
            };
            self.advance(text, pos, start);
            if let Some(record) = found.record {
                let raw = trimmed(text, record.start, record.end);
                if !raw.is_empty() {
                    let line = Line {
                        number: self.line,
                        raw,
                        text: raw,
                    };
                    self.emit(line, None, each);
                }
            }
            self.advance(text, start, found.next);
            pos = found.next;
        }
    }

    /// The end of the values at the blank rest of `text` from `pos`: without `eof`, the
    /// indentation at the end starts the next piece; at the file's end, an array left
    /// open adds a record saying so.
    fn blank_rest<'a>(
        &mut self,
        text: &'a [u8],
        pos: usize,
        eof: bool,
        each: &mut dyn FnMut(Record<'a>),
    ) -> usize {
        if !eof {
            let keep = memchr::memrchr(b'\n', &text[pos..]).map_or(pos, |i| pos + i + 1);
            return self.stop_at(text, pos, keep);
        }
        self.advance(text, pos, text.len());
        if self.phase == Phase::Inside {
            let at = &text[text.len()..];
            let line = Line {
                number: self.line,
                raw: at,
                text: at,
            };
            self.emit(line, Some(ARRAY_NOT_CLOSED), each);
        }
        text.len()
    }

    /// The value starting at `text[start]` (its line's indentation `indent`), an array's
    /// bracket in [`Format::Array`], or `None` when it is not whole before the piece ends
    /// (without `eof`).
    fn value_at(
        &mut self,
        text: &[u8],
        start: usize,
        indent: Option<&[u8]>,
        eof: bool,
    ) -> Option<Value> {
        let whole = |ended: bool| ended || eof;
        let value = match self.phase {
            Phase::Outside if self.format == Format::Array && text[start] == b'[' => {
                self.phase = Phase::Inside;
                Value::bracket(start)
            }
            Phase::Outside => {
                let (end, ended) = value_end(text, start, indent);
                if !whole(ended != Ended::Eof) {
                    return None;
                }
                Value::record(start..end, end)
            }
            Phase::Inside if text[start] == b']' => {
                self.phase = Phase::Outside;
                Value::bracket(start)
            }
            Phase::Inside => {
                let (end, stop) = element_end(text, start, indent);
                if !whole(stop != Stop::Eof) {
                    return None;
                }
                // A `]` closes the array on the next round; a cut element has no
                // comma after it.
                let next = if stop == Stop::Comma { end + 1 } else { end };
                Value::record(start..end, next)
            }
        };
        Some(value)
    }

    /// Stops a piece at `keep` (the rest starts the next one), counting its lines from
    /// `pos`.
    fn stop_at(&mut self, text: &[u8], pos: usize, keep: usize) -> usize {
        self.advance(text, pos, keep);
        if keep > 0 {
            self.at_line_start = text[keep - 1] == b'\n';
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every record of a whole file's `text` read in `format` (decided by the text for
    /// [`Format::Auto`]).
    fn records(text: &[u8], format: Format, each: &mut dyn FnMut(Record<'_>)) {
        Cutter::new(format.of_text(text)).cut(text, true, each);
    }

    fn all(text: &[u8], format: Format) -> Vec<(u64, String, Option<&'static str>)> {
        let mut out = Vec::new();
        records(text, format, &mut |r| {
            out.push((
                r.line.number,
                String::from_utf8_lossy(r.line.raw).into_owned(),
                r.corrupt,
            ));
        });
        out
    }

    #[test]
    fn auto_decides_by_the_first_byte_and_the_first_value() {
        assert_eq!(Format::Auto.of_text(b"  \n[{}]"), Format::Array);
        assert_eq!(
            Format::Auto.of_text(b"{\"a\":1}\n{\"a\":2}\n"),
            Format::Lines
        );
        assert_eq!(
            Format::Auto.of_text(b"{\n  \"a\": 1\n}\n{\n}"),
            Format::Stream
        );
        assert_eq!(Format::Auto.of_text(b"\xEF\xBB\xBF[1]"), Format::Array);
        // A broken first line does not make a JSON Lines file a stream.
        assert_eq!(Format::Auto.of_text(b"{\"a\":\n{\"a\":2}\n"), Format::Lines);
        assert_eq!(Format::Auto.of_text(b""), Format::Lines);
        assert_eq!(Format::Auto.of_text(b"[{},{}]\n"), Format::Array);
        assert_eq!(Format::Auto.of_text(b"\n[1,2]\n1\n{}"), Format::Lines);
        assert_eq!(Format::Auto.of_text(b"[{},\n{}]\n"), Format::Array);
        assert_eq!(Format::Lines.of_text(b"[1]"), Format::Lines);
    }

    #[test]
    fn an_array_gives_its_elements_on_their_first_lines() {
        let text = b"[\n  {\"a\": \"x,]\\\"y\"},\n  {\"b\":\n   [1, 2]}, {\"c\": {}}\n]\n";
        let got = all(text, Format::Auto);
        assert_eq!(
            got,
            [
                (2, "{\"a\": \"x,]\\\"y\"}".to_string(), None),
                (3, "{\"b\":\n   [1, 2]}".to_string(), None),
                (4, "{\"c\": {}}".to_string(), None),
            ]
        );
        assert_eq!(all(b"[]", Format::Array), []);
        let mut nth = Vec::new();
        records(
            b"[{\"a\":1},{\"a\":2},\n{\"a\":3}]",
            Format::Auto,
            &mut |r| nth.push((r.line.number, r.nth)),
        );
        assert_eq!(nth, [(1, 0), (1, 1), (2, 0)]);
        assert_eq!(all(b"[ ]\n[{\"a\":1}]", Format::Array).len(), 1);
    }

    #[test]
    fn a_broken_array_keeps_every_byte() {
        // A broken element, then the file cut short inside the array.
        let got = all(b"[{\"a\":1} junk, {\"b\":2},\n{\"c\":", Format::Array);
        assert_eq!(got[0], (1, "{\"a\":1} junk".to_string(), None));
        assert_eq!(got[1], (1, "{\"b\":2}".to_string(), None));
        assert_eq!(got[2], (2, "{\"c\":".to_string(), None));
        assert_eq!(got[3], (2, String::new(), Some(ARRAY_NOT_CLOSED)));
        // An element whose brackets never close stops where the next one starts at its
        // indentation, so it takes no good element with it.
        let got = all(
            b"[\n  {\"a\": {\"b\": [1,\n  {\"c\": 2},\n  {\"d\": 3}\n]",
            Format::Auto,
        );
        assert_eq!(
            got.iter().map(|g| (g.0, g.1.as_str())).collect::<Vec<_>>(),
            [
                (2, "{\"a\": {\"b\": [1,"),
                (3, "{\"c\": 2}"),
                (4, "{\"d\": 3}")
            ]
        );
        // Written without indenting (`json.dumps(indent=0)`), a `{` at the start of a line
        // inside a record is part of it.
        let flat = b"[\n{\n\"topic\": \"t\",\n\"payload\": {\n\"a\": [\n{\n\"b\": 1\n}\n]\n}\n},\n{\n\"topic\": \"u\"\n}\n]";
        let got = all(flat, Format::Auto);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].0, got[1].0), (2, 12));
        let stream =
            b"{\n\"topic\": \"t\",\n\"p\": [\n{\n\"b\": 1\n}\n]\n}\n{\n\"topic\": \"u\"\n}\n";
        assert_eq!(all(stream, Format::Stream).len(), 2);
        // Bytes after the array are records of their own.
        let got = all(b"[{\"a\":1}] trailing", Format::Array);
        assert_eq!(got[1], (1, "trailing".to_string(), None));
    }

    #[test]
    fn a_stream_gives_each_value_and_a_broken_one_stops_at_the_next_line_starting_a_record() {
        let text = b"{\n  \"a\": \"}\\n{\"\n}\n{\"b\": 1\n{\n \"c\": [\n{}]\n}\n";
        let got = all(text, Format::Stream);
        assert_eq!(got[0], (1, "{\n  \"a\": \"}\\n{\"\n}".to_string(), None));
        assert_eq!(got[1], (4, "{\"b\": 1".to_string(), None));
        // A `{` opening a line inside a record cuts it too (pretty printers indent), and
        // what is left of it is kept as records of its own.
        assert_eq!(got[2], (5, "{\n \"c\": [".to_string(), None));
        assert_eq!(got[3], (7, "{}".to_string(), None));
        assert_eq!(got.len(), 6);
    }

    #[test]
    fn pieces_cut_the_same_records_as_the_whole_text() {
        let mut text = b"\xEF\xBB\xBF[\n".to_vec();
        for i in 0..300 {
            text.extend_from_slice(format!("  {{\"i\": {i}, \"s\": \"a,\\\"]{{\"}},\n").as_bytes());
            if i % 50 == 7 {
                text.extend_from_slice(b"  {\"broken\": {\"x\": [\n");
            }
        }
        text.extend_from_slice(b"  {\"end\": true}\n]\n");
        for format in [Format::Array, Format::Stream, Format::Lines] {
            let whole = all(&text, format);
            if format == Format::Array {
                // 300 elements, 6 broken ones that take none with them, and the last.
                assert_eq!(whole.len(), 307);
            }
            for piece in [7usize, 64, 1000] {
                let mut cutter = Cutter::new(format);
                let mut got = Vec::new();
                let mut carry: Vec<u8> = Vec::new();
                for chunk in text.chunks(piece) {
                    carry.extend_from_slice(chunk);
                    let taken = cutter.cut(&carry, false, &mut |r| {
                        got.push((
                            r.line.number,
                            String::from_utf8_lossy(r.line.raw).into_owned(),
                            r.corrupt,
                        ));
                    });
                    carry.drain(..taken);
                }
                cutter.cut(&carry, true, &mut |r| {
                    got.push((
                        r.line.number,
                        String::from_utf8_lossy(r.line.raw).into_owned(),
                        r.corrupt,
                    ));
                });
                assert_eq!(got, whole, "{format} in pieces of {piece}");
            }
        }
    }
}
