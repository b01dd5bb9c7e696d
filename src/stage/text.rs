//! A file's text → a [`StagedFile`]: its records cut in the envelope's format, each
//! staged as a message, a corrupt record or a blank line; a stream that broke gives one
//! corrupt record more.

use super::parse::{Scratch, Sink, parse_line};
use super::staged::{At, CorruptLine, StagedFile};
use crate::config::EnvelopeConfig;
use crate::source::discover::SourceFile;
use crate::source::read::Decoded;
use crate::source::records::{ARRAY_NOT_CLOSED, Cutter, Record};

/// Whether the text staged ends its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TextEnd {
    /// More of the file follows: the bytes after the last whole record are handed back.
    MoreFollows,
    /// The file ends here: every byte is staged, a record cut short included.
    FileEnds,
}

/// Stages a whole file's text: its records in the envelope's format (decided by the text
/// for `auto`), and a corrupt record for a stream that broke.
pub(super) fn stage_bytes(
    decoded: Decoded,
    file: &SourceFile,
    envelope: &EnvelopeConfig,
    scratch: &mut Scratch,
) -> StagedFile {
    let mut cutter = Cutter::new(envelope.format.of_text(&decoded.bytes));
    stage_text(decoded, &mut cutter, TextEnd::FileEnds, file, envelope, scratch).0
}

/// Stages the whole records of `decoded` (the next piece of `file`, its last at
/// [`TextEnd::FileEnds`]) as `cutter` cuts them; at the file's end, the stream's damage
/// too. Returns the staged piece and the bytes after its last whole record, which start
/// the next piece.
pub(super) fn stage_text(
    decoded: Decoded,
    cutter: &mut Cutter,
    end: TextEnd,
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
    scratch.start_file();
    let eof = end == TextEnd::FileEnds;
    let taken = cutter.cut(&bytes, eof, &mut |record| {
        // A broken stream is one corrupt record, whatever it cut short.
        if damage.is_some() && record.corrupt == Some(ARRAY_NOT_CLOSED) {
            return;
        }
        stage_record(&mut out, &bytes, record, &file.name, envelope, scratch);
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
    record: Record<'_>,
    source_file: &str,
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
