//! [`SingleWriter`]: a store without put-if-absent, made usable by a catalog that only
//! one process writes (`--single-writer`).
//!
//! Delta commits (deltalake's default log store) and the batch lease create objects
//! with `PutMode::Create`, which an S3-compatible store without conditional put
//! refuses (`NotImplemented`). Over such a store, this wrapper checks that the object
//! is absent, then writes it: correct with one writer, and a lost update with two
//! (both check, both write). That is why it is used only when the user declares a
//! single writer, and a store without put-if-absent is otherwise refused
//! ([`crate::Catalog`]'s probe).

use std::sync::Arc;

use deltalake::logstore::object_store::{
    self, CopyOptions, DynObjectStore, GetOptions, GetResult, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, ObjectStoreExt as _, PutMode, PutMultipartOptions, PutOptions,
    PutPayload, PutResult, path::Path,
};
use futures::stream::BoxStream;

/// A store whose refused create-if-absent puts become check-then-write.
#[derive(Debug)]
pub(crate) struct SingleWriter {
    inner: Arc<DynObjectStore>,
}

impl SingleWriter {
    pub(crate) fn wrap(inner: Arc<DynObjectStore>) -> Arc<DynObjectStore> {
        Arc::new(SingleWriter { inner })
    }
}

impl std::fmt::Display for SingleWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SingleWriter({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for SingleWriter {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if !matches!(opts.mode, PutMode::Create) {
            return self.inner.put_opts(location, payload, opts).await;
        }
        let overwrite = PutOptions {
            mode: PutMode::Overwrite,
            ..opts.clone()
        };
        match self.inner.put_opts(location, payload.clone(), opts).await {
            Err(object_store::Error::NotImplemented { .. }) => {
                match self.inner.head(location).await {
                    Ok(_) => Err(object_store::Error::AlreadyExists {
                        path: location.to_string(),
                        source: "exists (checked before writing: single-writer mode)".into(),
                    }),
                    Err(object_store::Error::NotFound { .. }) => {
                        self.inner.put_opts(location, payload, overwrite).await
                    }
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
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
        self.inner.list_with_offset(prefix, offset)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::logstore::object_store::memory::InMemory;

    /// Refuses create-if-absent, as S3 with `conditional_put` disabled does.
    #[derive(Debug)]
    struct NoCreate;

    impl std::fmt::Display for NoCreate {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("NoCreate")
        }
    }

    #[async_trait::async_trait]
    impl crate::testdata::Hook for NoCreate {
        async fn put(
            &self,
            inner: &DynObjectStore,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            if matches!(opts.mode, PutMode::Create) {
                return Err(object_store::Error::NotImplemented {
                    operation: "create".into(),
                    implementer: "NoCreate".into(),
                });
            }
            inner.put_opts(location, payload, opts).await
        }
    }

    #[test]
    fn a_create_over_a_store_without_it_is_check_then_write() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let store = SingleWriter::wrap(crate::testdata::Hooked::new(
            Arc::new(InMemory::new()),
            NoCreate,
        ));
        let path = Path::from("t/_delta_log/00000000000000000000.json");
        let create = |body: &'static [u8]| {
            rt.block_on(store.put_opts(
                &path,
                PutPayload::from_static(body),
                PutOptions::from(PutMode::Create),
            ))
        };
        create(b"first").unwrap();
        assert!(matches!(
            create(b"second"),
            Err(object_store::Error::AlreadyExists { .. })
        ));
        let kept = rt
            .block_on(async { store.get(&path).await?.bytes().await })
            .unwrap();
        assert_eq!(&kept[..], b"first");
    }
}
