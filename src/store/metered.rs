//! [`Metered`]: an object store that counts the calls a run makes to it, so the report
//! can say how many requests each stage of a run costs on a store with latency (one
//! call is one request, except a multipart upload, counted once for all its parts, and
//! the client's retries, counted apart in `store_retries`), and that keeps the Delta
//! commit files it reads (`_delta_log/<20 digits>.json`): they never change once
//! written (each is put if absent), yet opening a table reads its latest commit two or
//! three times (the kernel's snapshot, the `txn` check, the write's own snapshot), each
//! a round trip on a table's critical path. Checkpoint files, as immutable, are kept
//! too, read whole the first time a part of one is asked for (the kernel reads a
//! checkpoint's footer and column chunks one request after another).

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
        self.commits.checkpoints.clear();
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

/// Commit and checkpoint files read, by path: at most [`CommitCache::MAX_ENTRY`] bytes
/// each ([`CommitCache::MAX_CHECKPOINT`] for a checkpoint) and [`CommitCache::MAX_TOTAL`]
/// in all (then it starts over).
#[derive(Debug, Default)]
struct CommitCache {
    entries: dashmap::DashMap<Path, (bytes::Bytes, ObjectMeta, object_store::Attributes)>,
    bytes: AtomicU64,
    /// Checkpoint files seen in listings, small enough to keep whole, by path: their
    /// size.
    checkpoints: dashmap::DashMap<Path, u64>,
}

impl CommitCache {
    const MAX_ENTRY: usize = 1 << 20;
    const MAX_CHECKPOINT: u64 = 32 << 20;
    const MAX_TOTAL: u64 = 256 << 20;

    /// Notes a listed object's size when it is a checkpoint small enough to keep.
    fn listed(&self, meta: &ObjectMeta) {
        if meta.size <= Self::MAX_CHECKPOINT && is_checkpoint(&meta.location) {
            self.checkpoints.insert(meta.location.clone(), meta.size);
        }
    }

    /// Forgets what it knows of `path` (written, copied or renamed over).
    fn forget(&self, path: &Path) {
        self.entries.remove(path);
        self.checkpoints.remove(path);
    }

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
        let max = if is_checkpoint(path) {
            Self::MAX_CHECKPOINT as usize
        } else {
            Self::MAX_ENTRY
        };
        if bytes.len() > max {
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

/// `bytes[range]` of a whole object as a get's result.
fn slice(
    bytes: &bytes::Bytes,
    range: std::ops::Range<u64>,
    meta: ObjectMeta,
    attributes: object_store::Attributes,
) -> GetResult {
    use futures::StreamExt as _;
    let part = bytes.slice(range.start as usize..range.end as usize);
    GetResult {
        payload: object_store::GetResultPayload::Stream(
            futures::stream::once(async move { Ok(part) }).boxed(),
        ),
        meta,
        range,
        attributes,
    }
}

/// Whether `options` ask for the object as it is, unconditionally (a range allowed).
fn plain(options: &GetOptions) -> bool {
    !options.head
        && options.version.is_none()
        && options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
}

/// The file name of `path` if it is in a `_delta_log` folder.
fn in_log(path: &Path) -> Option<&str> {
    let (dir, name) = path.as_ref().rsplit_once('/')?;
    (dir == "_delta_log" || dir.ends_with("/_delta_log")).then_some(name)
}

/// Whether a get of `path` with `options` reads a whole Delta commit file, plainly.
fn reads_a_commit(path: &Path, options: &GetOptions) -> bool {
    plain(options)
        && options.range.is_none()
        && in_log(path).is_some_and(|name| {
            name.len() == 25
                && name.ends_with(".json")
                && name[..20].bytes().all(|b| b.is_ascii_digit())
        })
}

/// Whether `path` is a Delta checkpoint file (classic, multi-part or V2 UUID-named:
/// `<version>.checkpoint[.…].parquet`), which, like a commit, never changes once written.
fn is_checkpoint(path: &Path) -> bool {
    in_log(path).is_some_and(|name| {
        name.len() > 20
            && name[..20].bytes().all(|b| b.is_ascii_digit())
            && name[20..].starts_with(".checkpoint.")
            && name.ends_with(".parquet")
    })
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

impl Metered {
    /// A checkpoint file's whole bytes, kept: read whole (one request) the first time a
    /// part of it is asked for, when a listing said it is small enough
    /// ([`CommitCache::MAX_CHECKPOINT`]). The kernel reads a checkpoint's footer and then
    /// its column chunks one request after another (11 round trips for a small table's);
    /// `None` for any other object (read as asked).
    async fn checkpoint(
        &self,
        location: &Path,
    ) -> object_store::Result<Option<(bytes::Bytes, ObjectMeta, object_store::Attributes)>> {
        let cache = &self.calls.commits;
        if let Some(hit) = cache.entries.get(location) {
            return Ok(Some(hit.value().clone()));
        }
        if !cache.checkpoints.contains_key(location) {
            return Ok(None);
        }
        self.read_and_keep(location, GetOptions::default())
            .await
            .map(Some)
    }

    /// Reads `location` whole (one call) and keeps it in the cache.
    async fn read_and_keep(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<(bytes::Bytes, ObjectMeta, object_store::Attributes)> {
        self.calls.add(1);
        let got = self.inner.get_opts(location, options).await?;
        let (meta, attributes) = (got.meta.clone(), got.attributes.clone());
        let bytes = got.bytes().await?;
        self.calls
            .commits
            .keep(location, &bytes, &meta, &attributes);
        Ok((bytes, meta, attributes))
    }

    /// `listed`, each checkpoint file in it noted ([`CommitCache::listed`]).
    /// A conditional put refused because the object exists or changed: when it holds
    /// exactly what was sent, it was this put that landed (its response was lost, and the
    /// store client's retry was the one refused, as S3 does with a 412 on a retried
    /// `If-None-Match` put). Treated as refused, every layer above would read it as
    /// another writer's: deltalake would commit a blind append again at the next version
    /// (the batch's rows twice), a lease holder would think its lease taken.
    async fn landed_already(&self, location: &Path, sent: &PutPayload) -> Option<PutResult> {
        self.calls.add(1);
        let found = self
            .inner
            .get_opts(location, GetOptions::default())
            .await
            .ok()?;
        let e_tag = found.meta.e_tag.clone();
        let version = found.meta.version.clone();
        let bytes = found.bytes().await.ok()?;
        let same = bytes.len() == sent.content_length()
            && sent
                .iter()
                .scan(0, |at, chunk| {
                    let start = *at;
                    *at += chunk.len();
                    Some(bytes.get(start..*at) == Some(&chunk[..]))
                })
                .all(|equal| equal);
        if !same {
            return None;
        }
        tracing::info!(path = %location, "a conditional put was refused, but the object holds what it sent: its first attempt landed");
        Some(PutResult { e_tag, version })
    }

    fn noting_checkpoints(
        &self,
        listed: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        use futures::StreamExt as _;
        let commits = Arc::clone(&self.calls.commits);
        listed
            .inspect(move |m| {
                if let Ok(meta) = m {
                    commits.listed(meta);
                }
            })
            .boxed()
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
        self.calls.commits.forget(location);
        let conditional = !matches!(opts.mode, object_store::PutMode::Overwrite);
        let sent = conditional.then(|| payload.clone());
        match self.inner.put_opts(location, payload, opts).await {
            Err(
                e @ (object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }),
            ) => match sent {
                Some(sent) => self.landed_already(location, &sent).await.ok_or(e),
                None => Err(e),
            },
            other => other,
        }
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
        if plain(&options)
            && let Some(range) = &options.range
            && let Some(whole) = self.checkpoint(location).await?
        {
            let (bytes, meta, attributes) = whole;
            if let Ok(r) = range.as_range(bytes.len() as u64) {
                return Ok(slice(&bytes, r, meta, attributes));
            }
        }
        if !reads_a_commit(location, &options) {
            self.calls.add(1);
            return self.inner.get_opts(location, options).await;
        }
        let cache = &self.calls.commits;
        if let Some(hit) = cache.get(location) {
            return Ok(hit);
        }
        let (bytes, meta, attributes) = self.read_and_keep(location, options).await?;
        Ok(result(bytes, meta, attributes))
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        if let Some((bytes, _, _)) = self.checkpoint(location).await?
            && ranges
                .iter()
                .all(|r| r.start <= r.end && r.end <= bytes.len() as u64)
        {
            return Ok(ranges
                .iter()
                .map(|r| bytes.slice(r.start as usize..r.end as usize))
                .collect());
        }
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
        self.noting_checkpoints(self.inner.list(prefix))
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.calls.add(1);
        self.noting_checkpoints(self.inner.list_with_offset(prefix, offset))
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
        self.calls.commits.forget(to);
        self.inner.copy_opts(from, to, options).await
    }
    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.calls.add(1);
        self.calls.commits.forget(to);
        self.calls.commits.forget(from);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::{ObjectStoreExt as _, memory::InMemory};

    #[test]
    fn a_conditional_put_refused_over_its_own_landed_content_succeeds() {
        use object_store::{PutMode, UpdateVersion};
        let rt = tokio::runtime::Runtime::new().unwrap();
        let store = CallCounter::default().meter(Arc::new(InMemory::new()));
        let path = Path::from("t/_delta_log/00000000000000000000.json");
        let create = |text: &'static str| {
            let store = Arc::clone(&store);
            let path = path.clone();
            async move {
                store
                    .put_opts(
                        &path,
                        PutPayload::from_static(text.as_bytes()),
                        PutMode::Create.into(),
                    )
                    .await
            }
        };
        rt.block_on(async {
            let first = create("{\"commitInfo\":1}").await.unwrap();
            // The same bytes again: what a retried put whose first attempt landed sends.
            let again = create("{\"commitInfo\":1}").await.unwrap();
            assert_eq!(again.e_tag, first.e_tag);
            // Another writer's entry is refused as before.
            assert!(matches!(
                create("{\"commitInfo\":2}").await,
                Err(object_store::Error::AlreadyExists { .. })
            ));
            // A conditional update from a stale version: refused unless the object
            // already holds what it sends.
            let stale = UpdateVersion {
                e_tag: Some("stale".into()),
                version: None,
            };
            let update = |text: &'static str| {
                let store = Arc::clone(&store);
                let path = path.clone();
                let stale = stale.clone();
                async move {
                    store
                        .put_opts(
                            &path,
                            PutPayload::from_static(text.as_bytes()),
                            PutMode::Update(stale).into(),
                        )
                        .await
                }
            };
            assert!(update("{\"commitInfo\":1}").await.is_ok());
            assert!(matches!(
                update("{\"commitInfo\":3}").await,
                Err(object_store::Error::Precondition { .. })
            ));
        });
    }

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

    #[test]
    fn a_listed_checkpoint_is_read_whole_once_and_its_parts_served_from_it() {
        use futures::TryStreamExt as _;
        let rt = tokio::runtime::Runtime::new().unwrap();
        let counter = CallCounter::default();
        let store = counter.meter(Arc::new(InMemory::new()));
        let checkpoint = Path::from("t/_delta_log/00000000000000000009.checkpoint.parquet");
        let data = Path::from("t/part-0.parquet");
        let bytes: Vec<u8> = (0..=255u8).collect();
        for p in [&checkpoint, &data] {
            rt.block_on(store.put(p, bytes.clone().into())).unwrap();
        }
        let range = |p: &Path, r: std::ops::Range<u64>| rt.block_on(store.get_range(p, r));
        // Not listed yet: read as asked, one request per part.
        let before = counter.get();
        assert_eq!(&range(&checkpoint, 10..20).unwrap()[..], &bytes[10..20]);
        assert_eq!(counter.get() - before, 1);
        // The log listed (as opening a table does): the first part read fetches it
        // whole, the others come from it, suffix and ranges alike.
        let log = Path::from("t/_delta_log");
        let listed: Vec<_> = rt.block_on(store.list(Some(&log)).try_collect()).unwrap();
        assert_eq!(listed.len(), 1);
        let before = counter.get();
        assert_eq!(&range(&checkpoint, 0..8).unwrap()[..], &bytes[0..8]);
        let suffix = rt
            .block_on(async {
                let opts = GetOptions {
                    range: Some(object_store::GetRange::Suffix(4)),
                    ..Default::default()
                };
                store.get_opts(&checkpoint, opts).await?.bytes().await
            })
            .unwrap();
        assert_eq!(&suffix[..], &bytes[252..]);
        let parts = rt
            .block_on(store.get_ranges(&checkpoint, &[1..3, 200..256]))
            .unwrap();
        assert_eq!(
            (&parts[0][..], &parts[1][..]),
            (&bytes[1..3], &bytes[200..256])
        );
        assert_eq!(counter.get() - before, 1, "one whole read");
        // A range past its end is the store's to refuse, as before.
        assert!(range(&checkpoint, 300..400).is_err());
        // Data files are never kept.
        let before = counter.get();
        range(&data, 0..8).unwrap();
        range(&data, 0..8).unwrap();
        assert_eq!(counter.get() - before, 2);
        assert!(is_checkpoint(&Path::from(
            "t/_delta_log/00000000000000000009.checkpoint.0000000001.0000000002.parquet"
        )));
        assert!(!is_checkpoint(&Path::from(
            "t/_delta_log/00000000000000000009.json"
        )));
        assert!(!is_checkpoint(&Path::from(
            "t/00000000000000000009.checkpoint.parquet"
        )));
    }
}
