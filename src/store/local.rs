//! [`LocalLog`]: the local file system as deltalake opens `file://` tables, with a
//! listing from an offset that reads only the names of a Delta log's folder.
//!
//! Opening a table lists its `_delta_log/` from the latest checkpoint on
//! (`list_with_offset`). `object_store`'s `LocalFileSystem` walks the whole folder for
//! that and turns every entry's path into an object path (a URL conversion each) before
//! it compares it with the offset, so every open costs time in proportion to all the log
//! entries kept — 10,000 after 10,000 batches loaded within the 30 days of
//! `delta.logRetentionDuration`. Here a folder of plain files is read as names, the names
//! after the offset compared as text, and only those stat'ed: the same objects, in
//! the same order, as `LocalFileSystem` lists. Anything else (a sub-folder, a name that
//! is not plain ASCII, an offset outside the folder) is listed by `LocalFileSystem`.
//!
//! [`crate::table::Storage`] opens every table of a local catalog through it (the root
//! store deltalake is given for a `file://` table).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use deltalake::logstore::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, local::LocalFileSystem,
    path::Path,
};
use futures::StreamExt as _;
use futures::stream::BoxStream;

/// The local file system, listing a Delta log's folder by its names.
#[derive(Debug)]
pub(crate) struct LocalLog {
    inner: Arc<LocalFileSystem>,
}

impl LocalLog {
    pub(crate) fn new() -> LocalLog {
        LocalLog {
            inner: Arc::new(LocalFileSystem::new()),
        }
    }
}

impl std::fmt::Display for LocalLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.inner, f)
    }
}

/// A name an object path keeps as it is (no percent-encoding).
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A file `LocalFileSystem` is still writing (`<name>#<digits>`), which it never lists.
fn upload_in_progress(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, suffix)| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
}

/// The objects of the folder `dir` (object path `prefix`) whose name sorts after
/// `after`; `None` when the folder cannot be listed by its names alone (it holds a
/// folder or a name that is not [`plain`], or it cannot be read).
fn files_after(
    dir: &std::path::Path,
    prefix: &Path,
    after: &str,
) -> Option<Vec<object_store::Result<ObjectMeta>>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        let name = name.to_str()?;
        let file_type = entry.file_type().ok()?;
        if file_type.is_dir() || file_type.is_symlink() {
            return None;
        }
        if upload_in_progress(name) {
            continue;
        }
        if !plain(name) {
            return None;
        }
        if name <= after || !file_type.is_file() {
            continue;
        }
        let location = prefix.clone().join(name);
        match std::fs::metadata(entry.path()) {
            Ok(metadata) => out.push(Ok(meta(&metadata, location))),
            // Removed since the folder was read: not listed, as `LocalFileSystem` does.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return None,
        }
    }
    Some(out)
}

/// An object's metadata as `LocalFileSystem` gives it (its e-tag: inode, modification
/// time in microseconds and size, in hex).
fn meta(metadata: &std::fs::Metadata, location: Path) -> ObjectMeta {
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(metadata);
    #[cfg(not(unix))]
    let inode = 0;
    let modified = metadata.modified().unwrap_or(std::time::UNIX_EPOCH);
    let micros = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size: metadata.len(),
        e_tag: Some(format!("{inode:x}-{micros:x}-{:x}", metadata.len())),
        version: None,
    }
}

#[async_trait::async_trait]
impl ObjectStore for LocalLog {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // The offset must name an object right in the folder listed.
        let plan = prefix.and_then(|prefix| {
            let after = offset.prefix_match(prefix)?.collect::<Vec<_>>();
            let [after] = after.as_slice() else {
                return None;
            };
            let dir = self.inner.path_to_filesystem(prefix).ok()?;
            Some((dir, prefix.clone(), after.as_ref().to_string()))
        });
        let Some((dir, prefix, after)) = plan else {
            return self.inner.list_with_offset(prefix, offset);
        };
        let inner = Arc::clone(&self.inner);
        let offset = offset.clone();
        futures::stream::once(async move {
            let read = {
                let prefix = prefix.clone();
                move || files_after(&dir, &prefix, &after)
            };
            let listed = if tokio::runtime::Handle::try_current().is_ok() {
                tokio::task::spawn_blocking(read).await.ok().flatten()
            } else {
                read()
            };
            match listed {
                Some(objects) => futures::stream::iter(objects).boxed(),
                None => inner.list_with_offset(Some(&prefix), &offset),
            }
        })
        .flatten()
        .boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt as _;

    /// Both stores' listings of `prefix` from `offset`, sorted.
    fn both(
        dir: &std::path::Path,
        prefix: &str,
        offset: &str,
    ) -> (Vec<ObjectMeta>, Vec<ObjectMeta>) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let base = Path::from_absolute_path(dir).unwrap();
        let prefix = Path::from(format!("{base}/{prefix}"));
        let offset = Path::from(format!("{base}/{offset}"));
        let list = |store: &dyn ObjectStore| {
            let mut got: Vec<ObjectMeta> = rt
                .block_on(store.list_with_offset(Some(&prefix), &offset).try_collect())
                .unwrap();
            got.sort_by(|a, b| a.location.cmp(&b.location));
            got
        };
        (list(&LocalLog::new()), list(&LocalFileSystem::new()))
    }

    #[test]
    fn a_log_folder_lists_the_same_objects_as_the_file_system_store() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t/_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        for v in 0..30 {
            std::fs::write(log.join(format!("{v:020}.json")), format!("{v}")).unwrap();
        }
        std::fs::write(log.join("00000000000000000020.checkpoint.parquet"), "x").unwrap();
        std::fs::write(log.join("_last_checkpoint"), "{}").unwrap();
        let offset = "t/_delta_log/00000000000000000020";
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", offset);
        assert_eq!(fast, plain_store);
        // 20.checkpoint.parquet, 20.json .. 29.json, _last_checkpoint.
        assert_eq!(fast.len(), 12, "{fast:?}");
        // Nothing after the last name.
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", "t/_delta_log/_z");
        assert_eq!((fast.len(), plain_store.len()), (0, 0));
        // A folder that is not there: nothing, as the file system store lists it.
        let (fast, plain_store) = both(dir.path(), "u/_delta_log", "u/_delta_log/0");
        assert_eq!((fast.len(), plain_store.len()), (0, 0));
    }

    #[test]
    fn a_folder_with_a_sub_folder_or_an_encoded_name_is_listed_by_the_file_system_store() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("t/_delta_log");
        std::fs::create_dir_all(log.join("_sidecars")).unwrap();
        std::fs::write(log.join("_sidecars/a.parquet"), "x").unwrap();
        std::fs::write(log.join("00000000000000000001.json"), "1").unwrap();
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", "t/_delta_log/0");
        assert_eq!(fast, plain_store);
        assert_eq!(fast.len(), 2);
        std::fs::remove_dir_all(log.join("_sidecars")).unwrap();
        std::fs::write(log.join("a b%.json"), "1").unwrap();
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", "t/_delta_log/0");
        assert_eq!(fast, plain_store);
        assert_eq!(fast.len(), 2, "{fast:?}");
        std::fs::remove_file(log.join("a b%.json")).unwrap();
        // A folder named like a file being written: its files are listed.
        std::fs::create_dir_all(log.join("d#1")).unwrap();
        std::fs::write(log.join("d#1/00000000000000000003.json"), "1").unwrap();
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", "t/_delta_log/0");
        assert_eq!(fast, plain_store);
        assert_eq!(fast.len(), 2, "{fast:?}");
        std::fs::remove_dir_all(log.join("d#1")).unwrap();
        // A file being written is listed by neither.
        std::fs::write(log.join("00000000000000000002.json#123"), "1").unwrap();
        let (fast, plain_store) = both(dir.path(), "t/_delta_log", "t/_delta_log/0");
        assert_eq!(fast, plain_store);
        assert_eq!(fast.len(), 1, "{fast:?}");
        // An offset deeper than the folder listed.
        let (fast, plain_store) = both(dir.path(), "t", "t/_delta_log/0");
        assert_eq!(fast, plain_store);
    }
}
