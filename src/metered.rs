//! [`Metered`]: an object store that counts the calls a run makes to it, so the report
//! can say how many requests each stage of a run costs on a store with latency (one
//! call is one request, except a multipart upload, counted once for all its parts, and
//! the client's retries, counted apart in `store_retries`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deltalake::logstore::object_store::{
    self, CopyOptions, DynObjectStore, GetOptions, GetResult, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    path::Path,
};
use futures::stream::BoxStream;

/// Calls made to the metered stores of one catalog (its own and the landing zones').
#[derive(Clone, Debug, Default)]
pub(crate) struct CallCounter(Arc<AtomicU64>);

impl CallCounter {
    /// Calls so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// `inner`, its calls counted here.
    pub(crate) fn meter(&self, inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Arc::new(Metered {
            inner,
            calls: self.clone(),
        })
    }
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
        self.calls.add(1);
        self.inner.get_opts(location, options).await
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
        self.inner.copy_opts(from, to, options).await
    }
    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.calls.add(1);
        self.inner.rename_opts(from, to, options).await
    }
}
