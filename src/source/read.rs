//! Read: a [`SourceFile`] → its bytes and its lines.
//!
//! Lines are split on `\n` ourselves (faster than a streaming deserializer and it keeps
//! the exact bytes of each line for `_corrupt_records`). Line numbers are 1-based and
//! count every line, blank ones included, so they match what an editor shows.

use std::io::Read;

use deltalake::logstore::object_store::ObjectStoreExt as _;

use crate::error::{Error, Result};
use crate::source::discover::{Compression, SourceFile};

/// Reads the whole file, decompressing gzip. A truncated or corrupt `.gz` is an error
/// naming the file: its content cannot be recovered, so the batch must not be loaded
/// as if it were complete.
pub fn read_file(file: &SourceFile) -> Result<Vec<u8>> {
    decode(file, None)
}

/// Reads a file through an object store rooted at `/` (cloud landing zones, or a local
/// store wrapped to inject latency), decompressing gzip.
pub fn read_file_from_store(
    file: &SourceFile,
    store: &deltalake::logstore::object_store::DynObjectStore,
    runtime: &tokio::runtime::Runtime,
) -> Result<Vec<u8>> {
    let raw = runtime.block_on(fetch_raw(file, store))?;
    decode(file, Some(raw))
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

/// Decompresses bytes already fetched for `file` (gzip), or returns them as they are.
pub fn decode_bytes(file: &SourceFile, raw: Vec<u8>) -> Result<Vec<u8>> {
    decode(file, Some(raw))
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

/// The lines of the gzip file `file` (`bytes` long) read from `compressed`: nothing for
/// an empty file (as an empty plain file holds no line); an error naming the file and the
/// fix for one that is not a whole gzip stream.
fn gunzip(file: &SourceFile, compressed: impl Read, bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes * 4);
    if bytes == 0 {
        return Ok(out);
    }
    flate2::read::MultiGzDecoder::new(compressed)
        .read_to_end(&mut out)
        .map_err(|e| {
            let why = format!(
                "not a whole gzip stream ({e}): the copy may have been cut short or the file \
                 is not gzip; copy it again, or move it out of the batch folder"
            );
            Error::io(&file.path, std::io::Error::new(e.kind(), why))
        })?;
    Ok(out)
}

fn decode(file: &SourceFile, raw: Option<Vec<u8>>) -> Result<Vec<u8>> {
    if let Some(raw) = raw {
        check_unchanged(file, raw.len() as u64)?;
        return match file.compression {
            Compression::None => Ok(raw),
            Compression::Gzip => gunzip(file, raw.as_slice(), raw.len()),
        };
    }
    match file.compression {
        Compression::None => {
            let bytes = std::fs::read(&file.path).map_err(|e| Error::io(&file.path, e))?;
            check_unchanged(file, bytes.len() as u64)?;
            Ok(bytes)
        }
        Compression::Gzip => {
            let f = std::fs::File::open(&file.path).map_err(|e| Error::io(&file.path, e))?;
            let mut reader = std::io::BufReader::new(f);
            let out = gunzip(file, &mut reader, file.bytes as usize)?;
            let now = reader
                .get_ref()
                .metadata()
                .map_err(|e| Error::io(&file.path, e))?
                .len();
            check_unchanged(file, now)?;
            Ok(out)
        }
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
    fn truncated_gzip_is_an_error_naming_the_file() {
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
        };
        let err = read_file(&file).unwrap_err();
        assert!(err.to_string().contains("x.jsonl.gz"), "{err}");
        std::fs::write(&path, &gz).unwrap();
        // Listed at half its size, read whole: it changed in between.
        let err = read_file(&file).unwrap_err();
        assert!(matches!(err, Error::FileChanged { .. }), "{err}");
        file.bytes = gz.len() as u64;
        assert_eq!(lines(&read_file(&file).unwrap()).count(), 100);
    }
}
