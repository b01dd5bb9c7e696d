//! Read: a [`SourceFile`] → its bytes and its lines.
//!
//! Lines are split on `\n` ourselves (faster than a streaming deserializer and it keeps
//! the exact bytes of each line for `_corrupt_records`). Line numbers are 1-based and
//! count every line, blank ones included, so they match what an editor shows.

use deltalake::logstore::object_store::ObjectStoreExt as _;

use crate::error::{Error, Result};
pub use crate::source::codec::Decoded;
use crate::source::discover::SourceFile;

/// Reads the whole file and decodes it ([`crate::source::codec`]): a stream cut short or
/// damaged gives the text before the damage and the [`crate::source::codec::Damage`].
pub fn read_file(file: &SourceFile) -> Result<Decoded> {
    let bytes = std::fs::read(&file.path).map_err(|e| Error::io(&file.path, e))?;
    decode_bytes(file, bytes)
}

/// Reads a file through an object store rooted at `/` (cloud landing zones, or a local
/// store wrapped to inject latency), and decodes it.
pub fn read_file_from_store(
    file: &SourceFile,
    store: &deltalake::logstore::object_store::DynObjectStore,
    runtime: &tokio::runtime::Runtime,
) -> Result<Decoded> {
    let raw = runtime.block_on(fetch_raw(file, store))?;
    decode_bytes(file, raw)
}

/// The raw (still compressed) bytes of a file from an object store rooted at `/`.
pub async fn fetch_raw(
    file: &SourceFile,
    store: &deltalake::logstore::object_store::DynObjectStore,
) -> Result<Vec<u8>> {
    let to_io = |e: deltalake::logstore::object_store::Error| {
        Error::io(&file.path, std::io::Error::other(e))
    };
    let location = deltalake::logstore::object_store::path::Path::from_absolute_path(&file.path)
        .map_err(|e| {
            Error::io(
                &file.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            )
        })?;
    let got = store.get(&location).await.map_err(to_io)?;
    Ok(got.bytes().await.map_err(to_io)?.to_vec())
}

/// Decodes the raw bytes of `file` (fetched or read whole) by the codec their first
/// bytes name, else the file name's; fails when they are not the size discovery saw.
pub fn decode_bytes(file: &SourceFile, raw: Vec<u8>) -> Result<Decoded> {
    check_unchanged(file, raw.len() as u64)?;
    let codec = file.compression.decide(&raw);
    Ok(match codec {
        crate::source::codec::Compression::None => Decoded::plain(raw),
        codec => crate::source::codec::decode(codec, raw.as_slice(), raw.len() as u64),
    })
}

/// `Err(FileChanged)` unless the file still has the size discovery saw.
fn check_unchanged(file: &SourceFile, now: u64) -> Result<()> {
    if now == file.bytes {
        Ok(())
    } else {
        Err(Error::FileChanged {
            path: file.path.clone(),
            before: file.bytes,
            after: now,
        })
    }
}

/// One line of a file: its 1-based number, its raw bytes (without the `\n`), and the
/// bytes to parse (without a trailing `\r` and, on line 1, a UTF-8 BOM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based line number.
    pub number: u64,
    /// Exact bytes of the line, without the terminating `\n`.
    pub raw: &'a [u8],
    /// What the parser sees.
    pub text: &'a [u8],
}

impl Line<'_> {
    /// True for an empty or whitespace-only line, which is not a record.
    pub fn is_blank(&self) -> bool {
        self.text.iter().all(|b| b.is_ascii_whitespace())
    }
}

/// Iterates the lines of a buffer; a last line without `\n` is still a line.
pub fn lines(buf: &[u8]) -> impl Iterator<Item = Line<'_>> {
    let mut rest = buf;
    let mut number = 0u64;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        number += 1;
        let (raw, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let mut text = raw.strip_suffix(b"\r").unwrap_or(raw);
        if number == 1 {
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        }
        Some(Line { number, raw, text })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::codec::Compression;

    #[test]
    fn splits_crlf_bom_and_unterminated_last_line() {
        let buf = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \nlast";
        let got: Vec<_> = lines(buf).collect();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].text, b"{\"a\":1}");
        assert_eq!(got[0].raw, b"\xEF\xBB\xBF{\"a\":1}\r");
        assert!(got[1].is_blank() && got[2].is_blank());
        assert_eq!((got[3].number, got[3].text), (4, &b"last"[..]));
        assert_eq!(lines(b"").count(), 0);
        assert_eq!(lines(b"a\n").count(), 1);
    }

    #[test]
    fn a_cut_gzip_file_keeps_its_whole_lines_and_a_changed_one_is_an_error() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&b"{\"topic\":\"a\"}\n".repeat(100)).unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(&path, &gz[..gz.len() / 2]).unwrap();
        let mut file = SourceFile {
            path: path.clone(),
            name: "x".into(),
            bytes: (gz.len() / 2) as u64,
            compression: Compression::Gzip,
            folder: 0,
            modified: None,
            etag: None,
        };
        let cut = read_file(&file).unwrap();
        let damage = cut.damage.expect("the cut is seen");
        assert!(damage.offset <= file.bytes);
        assert!(lines(&cut.bytes).all(|l| l.text == b"{\"topic\":\"a\"}"));
        std::fs::write(&path, &gz).unwrap();
        // Listed at half its size, read whole: it changed in between.
        let err = read_file(&file).unwrap_err();
        assert!(matches!(err, Error::FileChanged { .. }), "{err}");
        file.bytes = gz.len() as u64;
        let whole = read_file(&file).unwrap();
        assert_eq!((lines(&whole.bytes).count(), whole.damage), (100, None));
        // Named as plain, gzip by its bytes.
        file.compression = Compression::None;
        assert_eq!(lines(&read_file(&file).unwrap().bytes).count(), 100);
    }
}
