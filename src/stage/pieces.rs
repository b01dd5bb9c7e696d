//! A landing file larger than a staging chunk, staged piece by piece: its text streamed
//! through its decoder, cut after its last whole record, each piece staged and handed on
//! before the next is read. Memory holds a piece, never the whole file (a 1 GB JSON
//! array under a 256 MiB budget: BENCHMARKS.md).

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::assemble::{Staging, assemble};
use super::dedup_by_id;
use super::ids::IdSet;
use super::parse::Scratch;
use super::text::{TextEnd, stage_text};
use crate::config::EnvelopeConfig;
use crate::error::{Error, Result};
use crate::source::codec::{Compression, Damage, Decoded, decoder};
use crate::source::discover::SourceFile;
use crate::source::records::Cutter;

/// Counts the raw bytes read through it, for the offset of a damaged stream and the
/// check that the file kept its size.
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What [`Pieces::fill`] read.
enum Filled {
    /// The bytes it wanted; more of the file follows.
    Wanted,
    /// The file's end, with the damage of a stream that broke.
    FileEnd(Option<Damage>),
}

/// The pieces of one landing file, staged in turn ([`Pieces::next`]).
pub struct Pieces<'a> {
    file: &'a SourceFile,
    envelope: &'a EnvelopeConfig,
    codec: Compression,
    text: Box<dyn Read + Send + 'a>,
    raw_read: Arc<AtomicU64>,
    /// Decoded bytes a piece aims at.
    piece: usize,
    cutter: Option<Cutter>,
    /// The bytes after the last piece's last whole record.
    carry: Vec<u8>,
    done: bool,
    scratch: Scratch,
}

impl<'a> Pieces<'a> {
    /// The pieces of `file`, whose raw bytes `raw` reads, of about `piece` decoded bytes
    /// each; its codec is the one its first bytes name, else its name's.
    pub fn open(
        file: &'a SourceFile,
        mut raw: Box<dyn Read + Send + 'a>,
        envelope: &'a EnvelopeConfig,
        piece: usize,
    ) -> Result<Self> {
        let mut head = Vec::with_capacity(16);
        (&mut raw)
            .take(16)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(&file.path, e))?;
        let codec = file.compression.decide(&head);
        let raw_read = Arc::new(AtomicU64::new(0));
        let counted = Counted {
            inner: std::io::Cursor::new(head).chain(raw),
            read: Arc::clone(&raw_read),
        };
        let text = decoder(codec, counted).map_err(|e| Error::io(&file.path, e))?;
        Ok(Pieces {
            file,
            envelope,
            codec,
            text,
            raw_read,
            piece: piece.max(1 << 16),
            cutter: None,
            carry: Vec::new(),
            done: false,
            scratch: Scratch::new(),
        })
    }

    /// The next piece staged (its messages' ids added to `seen`, duplicates of earlier
    /// ones dropped), or `None` after the last.
    pub fn next(&mut self, seen: &mut IdSet) -> Result<Option<Staging>> {
        if self.done {
            return Ok(None);
        }
        let mut buf = std::mem::take(&mut self.carry);
        let mut want = self.piece;
        loop {
            let (end, damage) = match self.fill(&mut buf, want)? {
                Filled::Wanted => (TextEnd::MoreFollows, None),
                Filled::FileEnd(damage) => (TextEnd::FileEnds, damage),
            };
            let cutter = self
                .cutter
                .get_or_insert_with(|| Cutter::new(self.envelope.format.of_text(&buf)));
            let before = buf.len();
            let decoded = Decoded {
                bytes: std::mem::take(&mut buf),
                codec: Some(self.codec),
                damage,
            };
            let (staged, rest) =
                stage_text(decoded, cutter, end, self.file, self.envelope, &mut self.scratch);
            if end == TextEnd::MoreFollows && rest.len() == before {
                // No whole record yet (one longer than a piece): read on.
                buf = rest;
                want = buf.len() + self.piece;
                continue;
            }
            self.carry = rest;
            self.done = end == TextEnd::FileEnds;
            let staging = assemble(
                std::slice::from_ref(self.file),
                vec![staged],
                dedup_by_id(self.envelope),
                seen,
            );
            return Ok(Some(staging));
        }
    }

    /// Reads decoded text into `buf` until it holds `want` bytes or the file ends; at
    /// the end, the damage of a stream that broke (its text then ends at its last whole
    /// line, the rest in the [`Damage`]). A plain file's read error, or a file whose size
    /// changed since it was listed, is an error naming it.
    fn fill(&mut self, buf: &mut Vec<u8>, want: usize) -> Result<Filled> {
        const STEP: usize = 1 << 20;
        while buf.len() < want {
            let at = buf.len();
            buf.resize(at + STEP.min(want - at).max(1), 0);
            match self.text.read(&mut buf[at..]) {
                Ok(0) => {
                    buf.truncate(at);
                    let read = self.raw_read.load(Ordering::Relaxed);
                    if read < self.file.bytes && self.codec != Compression::None {
                        // zlib, deflate and snappy end quietly before a damaged rest.
                        let keep = memchr::memrchr(b'\n', buf).map_or(0, |i| i + 1);
                        let damage = Damage {
                            offset: read,
                            reason: format!(
                                "the stream ends at byte {read} of {}; the rest is not {}",
                                self.file.bytes,
                                self.codec.label()
                            ),
                            tail: buf.split_off(keep),
                        };
                        return Ok(Filled::FileEnd(Some(damage)));
                    }
                    if read != self.file.bytes {
                        return Err(Error::FileChanged {
                            path: self.file.path.clone(),
                            before: self.file.bytes,
                            after: read,
                        });
                    }
                    return Ok(Filled::FileEnd(None));
                }
                Ok(n) => buf.truncate(at + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => buf.truncate(at),
                Err(e) if self.codec == Compression::None => {
                    return Err(Error::io(&self.file.path, e));
                }
                Err(e) => {
                    buf.truncate(at);
                    let keep = memchr::memrchr(b'\n', buf).map_or(0, |i| i + 1);
                    let damage = Damage {
                        offset: self.raw_read.load(Ordering::Relaxed),
                        reason: e.to_string(),
                        tail: buf.split_off(keep),
                    };
                    return Ok(Filled::FileEnd(Some(damage)));
                }
            }
        }
        Ok(Filled::Wanted)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::source::records::Format;

    /// `n` pretty-printed envelopes in one array, element 7 broken.
    fn array(n: usize) -> Vec<u8> {
        let mut text = b"[\n".to_vec();
        for i in 0..n {
            let payload = if i == 7 { "{\"x\": }".to_string() } else { format!("{{\"n\": {i}, \"s\": \"]}},\\\"{{ é\"}}") };
            let sep = if i + 1 < n { "," } else { "" };
            writeln!(
                text,
                "  {{\n    \"topic\": \"t{}\",\n    \"message_id\": \"m{}\",\n    \"payload\": {payload}\n  }}{sep}",
                i % 3,
                i % 5000
            )
            .unwrap();
        }
        text.extend_from_slice(b"]\n");
        text
    }

    /// A message's topic, id and line.
    type Row = (String, String, i64);
    /// A corrupt record's line and bytes.
    type Kept = (u64, Vec<u8>);

    /// Every message's (topic, id, line) and every corrupt record's (line, bytes).
    fn contents(stagings: &[Staging]) -> (Vec<Row>, Vec<Kept>) {
        use arrow::array::AsArray as _;
        let mut rows = Vec::new();
        for staging in stagings {
            for (topic, batches) in &staging.topics {
                for b in batches {
                    let ids = b.column(1).as_string::<i32>();
                    let lines = b.column(3).as_primitive::<arrow::datatypes::Int64Type>();
                    for i in 0..b.num_rows() {
                        rows.push((topic.clone(), ids.value(i).to_string(), lines.value(i)));
                    }
                }
            }
        }
        rows.sort();
        let corrupt = stagings
            .iter()
            .flat_map(|s| s.corrupt.iter().map(|c| (c.line, c.raw.clone())))
            .collect();
        (rows, corrupt)
    }

    fn file_at(path: &std::path::Path, compression: Compression) -> SourceFile {
        SourceFile {
            path: path.to_path_buf(),
            name: path.display().to_string(),
            bytes: std::fs::metadata(path).unwrap().len(),
            compression,
            folder: 0,
            modified: None,
            etag: None,
        }
    }

    #[test]
    fn a_file_staged_in_pieces_gives_what_it_gives_whole() {
        let dir = tempfile::tempdir().unwrap();
        let text = array(8000);
        assert!(text.len() > 6 * (1 << 16), "several pieces");
        let plain = dir.path().join("a.json");
        std::fs::write(&plain, &text).unwrap();
        let packed = dir.path().join("a.json.zst");
        std::fs::write(&packed, zstd::stream::encode_all(text.as_slice(), 3).unwrap()).unwrap();
        let env = EnvelopeConfig::default();
        let whole = super::super::stage(&[file_at(&plain, Compression::None)], &env).unwrap();
        let want = contents(std::slice::from_ref(&whole));
        assert_eq!(want.1.len(), 1, "the broken element");
        for (path, codec) in [(&plain, Compression::None), (&packed, Compression::Zstd)] {
            let file = file_at(path, codec);
            let raw = Box::new(std::fs::File::open(path).unwrap());
            let mut pieces = Pieces::open(&file, raw, &env, 1 << 16).unwrap();
            let mut seen = IdSet::default();
            let mut got = Vec::new();
            while let Some(staging) = pieces.next(&mut seen).unwrap() {
                got.push(staging);
            }
            assert!(got.len() > 5, "{} pieces", got.len());
            assert_eq!(contents(&got), want, "{codec:?}");
            // Duplicates across pieces are dropped as within one file.
            let dups: u64 = got.iter().map(|s| s.duplicates).sum();
            assert_eq!(dups, whole.duplicates);
            // Ids repeat every 5,000 elements; the broken element 7 gave no m7 before 5,007.
            assert_eq!(dups, 2999);
        }
        // Forced to another format, the pieces still give what the whole gives.
        let env = EnvelopeConfig {
            format: Format::Stream,
            ..EnvelopeConfig::default()
        };
        let whole = super::super::stage(&[file_at(&plain, Compression::None)], &env).unwrap();
        let file = file_at(&plain, Compression::None);
        let mut pieces =
            Pieces::open(&file, Box::new(std::fs::File::open(&plain).unwrap()), &env, 1 << 16).unwrap();
        let mut got = Vec::new();
        while let Some(staging) = pieces.next(&mut IdSet::default()).unwrap() {
            got.push(staging);
        }
        assert_eq!(contents(&got).1.len(), contents(&[whole]).1.len());
    }

    #[test]
    fn a_cut_stream_in_pieces_keeps_its_lines_and_one_damage_record() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..40_000)
            .flat_map(|i| format!("{{\"topic\":\"t\",\"message_id\":\"m{i}\",\"payload\":{{}}}}\n").into_bytes())
            .collect();
        let packed = zstd::stream::encode_all(text.as_slice(), 3).unwrap();
        let path = dir.path().join("a.jsonl.zst");
        std::fs::write(&path, &packed[..packed.len() * 3 / 4]).unwrap();
        let file = file_at(&path, Compression::Zstd);
        let env = EnvelopeConfig::default();
        let mut pieces =
            Pieces::open(&file, Box::new(std::fs::File::open(&path).unwrap()), &env, 1 << 16).unwrap();
        let mut got = Vec::new();
        while let Some(staging) = pieces.next(&mut IdSet::default()).unwrap() {
            got.push(staging);
        }
        let (rows, corrupt) = contents(&got);
        assert!(rows.len() > 10_000);
        assert_eq!(corrupt.len(), 1);
        assert_eq!(corrupt[0].0, rows.len() as u64 + 1);
        let reason = &got.last().unwrap().corrupt[0].reason;
        assert!(reason.contains("breaks at or before compressed byte"), "{reason}");
    }
}
