//! [`Metered`]: an object store that counts the calls a run makes to it, so the report
//! can say how many requests each stage of a run costs on a store with latency (one
//! call is one request, except a multipart upload, counted once for all its parts, and
//! the client's retries, counted apart in `store_retries`), and that keeps the Delta
//! commit files it reads (`_delta_log/<20 digits>.json`): they never change once
//! written (each is put if absent), yet opening a table reads its latest commit two or
//! three times (the kernel's snapshot, the `txn` check, the write's own snapshot), each
//! a round trip on a table's critical path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deltalake::logstore::object_store::{
    self, CopyOptions, DynObjectStore, GetOptions, GetResult, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    path::Path,
};
use futures::stream::BoxStream;

/// Calls made to the metered stores of one catalog (its own and the landing zones'),
/// and the commit files they read.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallCounter {
    calls: Arc<AtomicU64>,
    commits: Arc<CommitCache>,
}

impl CallCounter {
    /// Calls so far.
    pub(crate) fn get(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        self.calls.fetch_add(n, Ordering::Relaxed);
    }

    /// Forgets the commit files read so far: each run starts with none, so a table
    /// another process deleted and created again between two runs of a long-lived
    /// process is read afresh.
    pub(crate) fn new_run(&self) {
        self.commits.entries.clear();
        self.commits.bytes.store(0, Ordering::Relaxed);
    }

    /// `inner`, its calls counted here.
    pub(crate) fn meter(&self, inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Arc::new(Metered {
            inner,
            calls: self.clone(),
        })
    }
}

/// Commit files read, by path: at most [`CommitCache::MAX_ENTRY`] bytes each and
/// [`CommitCache::MAX_TOTAL`] in all (then it starts over).
#[derive(Debug, Default)]
struct CommitCache {
    entries: dashmap::DashMap<Path, (bytes::Bytes, ObjectMeta, object_store::Attributes)>,
    bytes: AtomicU64,
}

impl CommitCache {
    const MAX_ENTRY: usize = 1 << 20;
    const MAX_TOTAL: u64 = 256 << 20;

    fn get(&self, path: &Path) -> Option<GetResult> {
        let hit = self.entries.get(path)?;
        let (bytes, meta, attributes) = hit.value().clone();
        Some(result(bytes, meta, attributes))
    }

    fn keep(
        &self,
        path: &Path,
        bytes: &bytes::Bytes,
        meta: &ObjectMeta,
        attributes: &object_store::Attributes,
    ) {
        if bytes.len() > Self::MAX_ENTRY {
            return;
        }
        if self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed) > Self::MAX_TOTAL {
            self.entries.clear();
            self.bytes.store(bytes.len() as u64, Ordering::Relaxed);
        }
        self.entries.insert(
            path.clone(),
            (bytes.clone(), meta.clone(), attributes.clone()),
        );
    }
}

/// A whole object's bytes as a get's result.
fn result(
    bytes: bytes::Bytes,
    meta: ObjectMeta,
    attributes: object_store::Attributes,
) -> GetResult {
    use futures::StreamExt as _;
    let range = 0..bytes.len() as u64;
    GetResult {
        payload: object_store::GetResultPayload::Stream(
            futures::stream::once(async move { Ok(bytes) }).boxed(),
        ),
        meta,
        range,
        attributes,
    }
}

/// Whether a get of `path` with `options` reads a whole Delta commit file, plainly.
fn reads_a_commit(path: &Path, options: &GetOptions) -> bool {
    let plain = options.range.is_none()
        && !options.head
        && options.version.is_none()
        && options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none();
    let text = path.as_ref();
    let Some((dir, name)) = text.rsplit_once('/') else {
        return false;
    };
    plain
        && (dir == "_delta_log" || dir.ends_with("/_delta_log"))
        && name.len() == 25
        && name.ends_with(".json")
        && name[..20].bytes().all(|b| b.is_ascii_digit())
}

/// A store whose calls are counted.
#[derive(Debug)]
struct Metered {
    inner: Arc<DynObjectStore>,
    calls: CallCounter,
}

impl std::fmt::Display for Metered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Metered {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.calls.add(1);
        self.calls.commits.entries.remove(location);
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.calls.add(1);
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if !reads_a_commit(location, &options) {
            self.calls.add(1);
            return self.inner.get_opts(location, options).await;
        }
        let cache = &self.calls.commits;
        if let Some(hit) = cache.get(location) {
            return Ok(hit);
        }
        self.calls.add(1);
        let got = self.inner.get_opts(location, options).await?;
        let (meta, attributes) = (got.meta.clone(), got.attributes.clone());
        let bytes = got.bytes().await?;
        cache.keep(location, &bytes, &meta, &attributes);
        Ok(result(bytes, meta, attributes))
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.calls.add(ranges.len() as u64);
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        use futures::StreamExt as _;
        let calls = self.calls.clone();
        self.inner
            .delete_stream(locations.inspect(move |_| calls.add(1)).boxed())
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.calls.add(1);
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.calls.add(1);
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.calls.add(1);
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.calls.add(1);
        self.calls.commits.entries.remove(to);
        self.inner.copy_opts(from, to, options).await
    }
    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.calls.add(1);
        self.calls.commits.entries.remove(to);
        self.calls.commits.entries.remove(from);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::{ObjectStoreExt as _, memory::InMemory};

    #[test]
    fn a_commit_file_is_read_once_and_afresh_after_a_delete_other_files_every_time() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let counter = CallCounter::default();
        let store = counter.meter(Arc::new(InMemory::new()));
        let commit = Path::from("t/_delta_log/00000000000000000000.json");
        let hint = Path::from("t/_delta_log/_last_checkpoint");
        let read = |p: &Path| {
            rt.block_on(async { store.get(p).await?.bytes().await })
                .unwrap()
        };
        rt.block_on(store.put(&commit, b"v0".to_vec().into()))
            .unwrap();
        rt.block_on(store.put(&hint, b"h".to_vec().into())).unwrap();
        let after_puts = counter.get();
        assert_eq!(&read(&commit)[..], b"v0");
        assert_eq!(&read(&commit)[..], b"v0");
        assert_eq!(
            counter.get() - after_puts,
            1,
            "the second read is the kept one"
        );
        read(&hint);
        read(&hint);
        assert_eq!(
            counter.get() - after_puts,
            3,
            "other files are read every time"
        );
        // A table deleted and created again (a staging table cleared and restaged).
        rt.block_on(store.delete(&commit)).unwrap();
        rt.block_on(store.put(&commit, b"v0 again".to_vec().into()))
            .unwrap();
        assert_eq!(&read(&commit)[..], b"v0 again");
        // A new run forgets what it read.
        counter.new_run();
        let before = counter.get();
        read(&commit);
        assert_eq!(counter.get() - before, 1);
        assert!(reads_a_commit(&commit, &GetOptions::default()));
        assert!(!reads_a_commit(
            &commit,
            &GetOptions {
                head: true,
                ..Default::default()
            }
        ));
        assert!(!reads_a_commit(
            &Path::from("t/_delta_log/00000000000000000010.checkpoint.parquet"),
            &GetOptions::default()
        ));
    }
}
