//! Compressed landing files: which codec a file is in (its magic bytes, else its name)
//! and its text, decoded as far as the stream is whole.
//!
//! A stream cut short or damaged keeps every line decoded before the damage; the rest
//! becomes one [`Damage`] the staging keeps as a corrupt record naming the file and the
//! compressed offset, so a bad copy loses no line that could be read and never passes
//! unnoticed.

use std::io::Read;

use serde::Serialize;

/// How a data file is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip (`.gz`, `.gzip`), one member or several.
    Gzip,
    /// Zstandard (`.zst`, `.zstd`), one frame or several.
    Zstd,
    /// bzip2 (`.bz2`), one stream or several.
    Bzip2,
    /// LZ4's frame format (`.lz4`), what the `lz4` tool writes.
    Lz4,
    /// Snappy's framing format (`.sz`, `.snappy`).
    Snappy,
    /// zlib (`.zz`, `.zlib`): deflate with zlib's header.
    Zlib,
    /// Raw deflate (`.deflate`), which has no header to recognise it by.
    Deflate,
}

/// Name endings of compressed files and their codec, lower-case.
const EXTENSIONS: [(&str, Compression); 9] = [
    (".gz", Compression::Gzip),
    (".gzip", Compression::Gzip),
    (".zst", Compression::Zstd),
    (".zstd", Compression::Zstd),
    (".bz2", Compression::Bzip2),
    (".lz4", Compression::Lz4),
    (".sz", Compression::Snappy),
    (".snappy", Compression::Snappy),
    (".zz", Compression::Zlib),
];

/// Name endings read as compressed beyond [`EXTENSIONS`].
const MORE_EXTENSIONS: [(&str, Compression); 2] = [
    (".zlib", Compression::Zlib),
    (".deflate", Compression::Deflate),
];

impl Compression {
    /// The codec a lower-case file name ends in, and the name without that ending
    /// (`p.jsonl.zst` → `p.jsonl`, Zstd); a name without one is plain.
    pub fn of_name(lower: &str) -> (&str, Compression) {
        EXTENSIONS
            .iter()
            .chain(MORE_EXTENSIONS.iter())
            .find_map(|(ext, c)| lower.strip_suffix(ext).map(|stem| (stem, *c)))
            .unwrap_or((lower, Compression::None))
    }

    /// The codec whose magic bytes `head` starts with, of those whose magic no text
    /// starts with (4 bytes or more, or bytes that are not text). JSON text starts with
    /// `{`, `[`, whitespace or a byte order mark, never with one of these.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        const SNAPPY: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
        // `BZh`, the block size, then the first block's magic (pi's digits).
        const BZIP2_BLOCK: [u8; 6] = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
        match head {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            [b'B', b'Z', b'h', b'1'..=b'9', rest @ ..] if rest.starts_with(&BZIP2_BLOCK) => {
                Some(Compression::Bzip2)
            }
            [0x04, 0x22, 0x4d, 0x18, ..] => Some(Compression::Lz4),
            _ if head.starts_with(&SNAPPY) => Some(Compression::Snappy),
            _ => None,
        }
    }

    /// Whether `head` starts as a zlib stream does: a 32 KiB window (what every zlib
    /// writer uses), no preset dictionary, a valid check. Two bytes that text can start
    /// with (`x^`): trusted for a file named as compressed only.
    fn looks_zlib(head: &[u8]) -> bool {
        matches!(head, [0x78, flags, ..]
            if flags & 0x20 == 0 && (0x7800u16 | u16::from(*flags)).is_multiple_of(31))
    }

    /// The codec a file is read with: the one its first bytes name, else its name's (a
    /// raw deflate file has no magic bytes; a file named `.gz` that holds zstd is read as
    /// zstd; a file named as compressed whose bytes are zlib's is read as zlib).
    pub fn decide(self, head: &[u8]) -> Compression {
        match Compression::sniff(head) {
            Some(c) => c,
            None if self != Compression::None && Compression::looks_zlib(head) => Compression::Zlib,
            None => self,
        }
    }

    /// Decoded bytes per landing byte, for budgeting memory before a file is read: JSON
    /// compresses about four times with any of these codecs.
    pub fn expansion(self) -> u64 {
        match self {
            Compression::None => 1,
            _ => 4,
        }
    }

    /// What the codec is called in messages.
    pub fn label(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Bzip2 => "bzip2",
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
            Compression::Zlib => "zlib",
            Compression::Deflate => "deflate",
        }
    }
}

/// Where a compressed stream broke, and the decoded bytes after the file's last whole
/// line (kept with the corrupt record, not parsed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Compressed bytes the decoder had taken when it stopped: the damage is at or
    /// before this offset.
    pub offset: u64,
    /// Why the decoder stopped.
    pub reason: String,
    /// Decoded bytes after the last `\n` before the damage.
    pub tail: Vec<u8>,
}

impl Damage {
    /// The corrupt record's reason.
    pub fn describe(&self, codec: Compression, size: u64) -> String {
        format!(
            "the {} stream breaks at or before compressed byte {} of {size} ({}): the lines \
             before it are loaded; copy the file again and rerun the batch",
            codec.label(),
            self.offset,
            self.reason
        )
    }
}

/// A file's decoded text, and where its stream broke when it did.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The text up to the damage (to its last whole line), or all of it.
    pub bytes: Vec<u8>,
    /// The codec the file was read with.
    pub codec: Option<Compression>,
    /// Where the stream broke.
    pub damage: Option<Damage>,
}

impl Decoded {
    /// Plain bytes, as read.
    pub fn plain(bytes: Vec<u8>) -> Self {
        Decoded {
            bytes,
            codec: Some(Compression::None),
            damage: None,
        }
    }
}

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// A decoder of `codec` over `input`.
pub(crate) fn decoder<'r, R: Read + Send + 'r>(
    codec: Compression,
    input: R,
) -> std::io::Result<Box<dyn Read + Send + 'r>> {
    Ok(match codec {
        Compression::None => Box::new(input),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(input)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input)?),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(input)),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(input)),
        Compression::Snappy => Box::new(snap::read::FrameDecoder::new(input)),
        Compression::Zlib => Box::new(flate2::read::ZlibDecoder::new(input)),
        Compression::Deflate => Box::new(flate2::read::DeflateDecoder::new(input)),
    })
}

/// Decodes `input` (`size` compressed bytes) with `codec`: the whole text, or the text
/// up to its last whole line before the stream broke and the [`Damage`]. An empty file
/// is an empty text, as an empty plain file is.
pub fn decode(codec: Compression, input: impl Read + Send, size: u64) -> Decoded {
    let mut out =
        Vec::with_capacity(usize::try_from(size.saturating_mul(codec.expansion())).unwrap_or(0));
    let mut decoded = Decoded {
        codec: Some(codec),
        ..Decoded::default()
    };
    if size == 0 {
        return decoded;
    }
    let mut counted = Counting {
        inner: input,
        read: 0,
    };
    let failure = match decoder(codec, &mut counted) {
        Ok(mut reader) => read_all(&mut reader, &mut out).err(),
        Err(e) => Some(e),
    };
    // A stream that ends before its end marker is cut short: every decoder says so as an
    // error, but zlib's and deflate's stop quietly, and so does a snappy stream cut
    // between frames (its format has no end marker).
    let failure = failure.or_else(|| {
        (counted.read < size).then(|| {
            std::io::Error::other(format!(
                "the stream ends at byte {} of {size}; the rest is not {}",
                counted.read,
                codec.label()
            ))
        })
    });
    if let Some(e) = failure {
        let keep = memchr::memrchr(b'\n', &out).map_or(0, |i| i + 1);
        decoded.damage = Some(Damage {
            offset: counted.read,
            reason: e.to_string(),
            tail: out.split_off(keep),
        });
    }
    decoded.bytes = out;
    decoded
}

/// Reads `reader` to its end into `out`, keeping what was read before an error.
fn read_all(reader: &mut dyn Read, out: &mut Vec<u8>) -> std::io::Result<()> {
    // Small reads: a decoder that fills a large buffer from several blocks returns an
    // error for the whole read when a later block breaks, dropping the earlier ones.
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn text() -> Vec<u8> {
        (0..20000)
            .map(|i| {
                format!(
                    "{{\"topic\":\"t\",\"message_id\":\"{i}\",\"payload\":{{\"v\":\"é{i}\"}}}}\n"
                )
            })
            .collect::<String>()
            .into_bytes()
    }

    fn compress(codec: Compression, data: &[u8]) -> Vec<u8> {
        match codec {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compression::Zstd => zstd::stream::encode_all(data, 3).unwrap(),
            Compression::Bzip2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compression::Lz4 => {
                // Blocks of 64 KiB (the encoder sizes one block to a large first write;
                // the `lz4` tool writes 4 MiB blocks).
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max64KB);
                let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compression::Snappy => {
                let mut e = snap::write::FrameEncoder::new(Vec::new());
                e.write_all(data).unwrap();
                e.into_inner().unwrap()
            }
            Compression::Zlib => {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
            Compression::Deflate => {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(data).unwrap();
                e.finish().unwrap()
            }
        }
    }

    const ALL: [Compression; 7] = [
        Compression::Gzip,
        Compression::Zstd,
        Compression::Bzip2,
        Compression::Lz4,
        Compression::Snappy,
        Compression::Zlib,
        Compression::Deflate,
    ];

    #[test]
    fn every_codec_round_trips_and_is_known_by_its_magic_bytes() {
        let data = text();
        for codec in ALL {
            let packed = compress(codec, &data);
            let decided = Compression::None.decide(&packed);
            match codec {
                Compression::Deflate => assert_eq!(decided, Compression::None, "no magic"),
                // zlib's two bytes are trusted only when the name says compressed.
                Compression::Zlib => {
                    assert_eq!(decided, Compression::None);
                    assert_eq!(Compression::Gzip.decide(&packed), Compression::Zlib);
                }
                _ => assert_eq!(decided, codec),
            }
            let got = decode(codec, packed.as_slice(), packed.len() as u64);
            assert_eq!(got.damage, None, "{codec:?}");
            assert_eq!(got.bytes, data, "{codec:?}");
        }
        for plain in [
            &b"{\"a\":1}"[..],
            b"[",
            b"  {",
            b"\xEF\xBB\xBF{",
            b"x",
            b"x^ text",
            b"BZh9 text",
        ] {
            assert_eq!(
                Compression::None.decide(plain),
                Compression::None,
                "{plain:?}"
            );
        }
        assert_eq!(decode(Compression::Zstd, &b""[..], 0).bytes, b"");
    }

    #[test]
    fn a_cut_stream_keeps_the_lines_before_the_cut() {
        let data = text();
        for codec in ALL {
            let packed = compress(codec, &data);
            let cut = &packed[..packed.len() * 2 / 3];
            let got = decode(codec, cut, cut.len() as u64);
            let damage = got
                .damage
                .unwrap_or_else(|| panic!("{codec:?}: cut not seen"));
            assert!(damage.offset <= cut.len() as u64, "{codec:?}");
            assert!(
                got.bytes.ends_with(b"\n") || got.bytes.is_empty(),
                "{codec:?}"
            );
            assert!(
                data.starts_with(&got.bytes),
                "{codec:?}: the kept text is the file's"
            );
            let mut whole = got.bytes.clone();
            whole.extend_from_slice(&damage.tail);
            assert!(data.starts_with(&whole), "{codec:?}: the tail follows it");
            assert!(!damage.tail.contains(&b'\n'));
            // Every codec's blocks here (bzip2's are up to 900 kB) end well before two
            // thirds of the input: lines came through.
            assert!(
                got.bytes.len() > data.len() / 4,
                "{codec:?}: {}",
                got.bytes.len()
            );
        }
    }

    #[test]
    fn garbage_in_the_middle_is_damage_with_its_offset() {
        let data = text();
        for codec in ALL {
            let mut packed = compress(codec, &data);
            let at = packed.len() / 2;
            for b in &mut packed[at..at + 64] {
                *b ^= 0x5a;
            }
            let got = decode(codec, packed.as_slice(), packed.len() as u64);
            // A stream's checksums catch what its decoder does not; a stream without
            // them (raw deflate; zstd and lz4 frames written without one, as here) may decode
            // damage into wrong text, which staging then keeps as corrupt lines.
            if let Some(d) = got.damage {
                assert!(d.offset as usize >= at.min(packed.len()) / 2, "{codec:?}");
            } else {
                assert!(
                    matches!(
                        codec,
                        Compression::Deflate | Compression::Zstd | Compression::Lz4
                    ),
                    "{codec:?}"
                );
            }
        }
    }

    #[test]
    fn names_give_the_codec_and_the_stem() {
        assert_eq!(
            Compression::of_name("a.jsonl.zst"),
            ("a.jsonl", Compression::Zstd)
        );
        assert_eq!(
            Compression::of_name("a.json.bz2"),
            ("a.json", Compression::Bzip2)
        );
        assert_eq!(
            Compression::of_name("a.ndjson.sz"),
            ("a.ndjson", Compression::Snappy)
        );
        assert_eq!(
            Compression::of_name("a.jsonl.deflate").1,
            Compression::Deflate
        );
        assert_eq!(
            Compression::of_name("a.jsonl"),
            ("a.jsonl", Compression::None)
        );
    }
}
