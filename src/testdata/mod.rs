//! Deterministic generator of landed batches, for benches, tests and `examples/gen_batch`.
//!
//! The shape follows a real multi-topic feed: `topics` topics over six families; seven
//! topics carry a `currentprice` array (one child table shared by all of them), two
//! families nest arrays two levels deep (`levels__orders`, `holdings__lots`), others
//! carry `items_<k>` arrays, so a 36-topic batch has 14 child tables. Lines average
//! about 815 bytes. A share of lines are exact resends (duplicates) or corrupt.
//! The same spec and seed always give the same bytes.
//!
//! Two payload profiles ([`Profile`]): `Padded`, about a dozen ASCII leaves padded with
//! free text, and `Dense` ([`dense`]), about 27 leaves of mostly short non-ASCII strings
//! and no padding, which costs far more per byte to parse, flatten and encode.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use deltalake::logstore::object_store::{
    CopyOptions, DynObjectStore, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result as ObjectResult,
    path::Path as ObjectPath,
};
use futures::stream::BoxStream;

pub mod dense;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenSpec {
    /// Number of files.
    pub files: usize,
    /// Lines per file.
    pub lines_per_file: usize,
    /// Number of topics.
    pub topics: usize,
    /// Duplicates per 1,000 lines (default 20 = 2 %).
    pub duplicates_per_mille: u32,
    /// Corrupt lines per 10,000 lines (default 10 = 0.1 %).
    pub corrupt_per_10k: u32,
    /// Seed of the generator.
    pub seed: u64,
    /// Write `*.jsonl.gz` instead of `*.jsonl`.
    pub gzip: bool,
    /// What the payloads look like.
    pub profile: Profile,
}

/// What the generated payloads look like.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// A dozen leaves, ASCII, padded to ~815 bytes with one `"lorem ipsum …"` string
    /// (about 40 % of a line), which costs little to parse, flatten or compress.
    #[default]
    Padded,
    /// About 27 leaves, most of them short strings with non-ASCII text, no padding, at a
    /// similar line size ([`dense`]).
    Dense,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "padded" => Ok(Profile::Padded),
            "dense" => Ok(Profile::Dense),
            other => Err(format!("unknown profile {other:?} (padded or dense)")),
        }
    }
}

impl Default for GenSpec {
    fn default() -> Self {
        GenSpec {
            files: 200,
            lines_per_file: 50,
            topics: 36,
            duplicates_per_mille: 20,
            corrupt_per_10k: 10,
            seed: 42,
            gzip: false,
            profile: Profile::Padded,
        }
    }
}

/// What was generated (the ground truth tests can check against).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GenSummary {
    /// The batch folder.
    pub dir: PathBuf,
    /// Lines written.
    pub lines: u64,
    /// Duplicate lines (exact resends).
    pub duplicates: u64,
    /// Corrupt lines.
    pub corrupt: u64,
    /// Bytes written (before compression).
    pub bytes: u64,
}

/// splitmix64: tiny, seeded, and stable across platforms.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn price(&mut self) -> f64 {
        (self.below(1_000_000) as f64) / 100.0 + 0.01
    }
}

const SYMBOLS: [&str; 8] = ["AAPL", "MSFT", "ASML", "SHEL", "NESN", "SAP", "NOVO", "TTE"];

/// Topic name of topic `i`.
pub fn topic_name(i: usize) -> String {
    const FAMILIES: [&str; 6] = [
        "quote",
        "trade",
        "orderbook",
        "position",
        "reference",
        "news",
    ];
    format!("{}_{:02}", FAMILIES[i % 6], i)
}

fn currentprice(rng: &mut Rng, out: &mut String) {
    out.push_str("\"currentprice\":[");
    for k in 0..1 + rng.below(3) {
        if k > 0 {
            out.push(',');
        }
        let ccy = if rng.below(2) == 0 { "EUR" } else { "USD" };
        let _ = write!(
            out,
            "{{\"px\":{:.2},\"ccy\":\"{ccy}\",\"ts\":{}}}",
            rng.price(),
            1_775_000_000 + rng.below(86_400)
        );
    }
    out.push(']');
}

/// The payload of one message of topic `t`.
fn payload(t: usize, n: u64, rng: &mut Rng) -> String {
    let mut p = String::with_capacity(800);
    let sym = SYMBOLS[rng.below(SYMBOLS.len() as u64) as usize];
    let _ = write!(
        p,
        "{{\"symbol\":\"{sym}\",\"seq\":{n},\"instrument\":{{\"isin\":\"NL{:010}\",\"venue\":\"XAMS\",\"lot\":{}}}",
        rng.below(10_000_000_000),
        1 + rng.below(100)
    );
    // Seven topics (0, 1, 6, 7, 12, 13, 18) share the currentprice child table.
    if t % 6 < 2 && t < 20 {
        p.push(',');
        currentprice(rng, &mut p);
    }
    match t % 6 {
        0 => {
            let _ = write!(
                p,
                ",\"bid\":{:.2},\"ask\":{:.2},\"live\":{}",
                rng.price(),
                rng.price(),
                rng.below(2) == 0
            );
        }
        1 => {
            let _ = write!(
                p,
                ",\"px\":{:.2},\"qty\":{},\"side\":\"{}\"",
                rng.price(),
                1 + rng.below(1000),
                if rng.below(2) == 0 { "buy" } else { "sell" }
            );
        }
        2 => {
            p.push_str(",\"levels\":[");
            for l in 0..1 + rng.below(3) {
                if l > 0 {
                    p.push(',');
                }
                let _ = write!(
                    p,
                    "{{\"px\":{:.2},\"qty\":{},\"orders\":[",
                    rng.price(),
                    rng.below(500)
                );
                for o in 0..rng.below(3) {
                    if o > 0 {
                        p.push(',');
                    }
                    let _ = write!(
                        p,
                        "{{\"order_id\":\"o{}\",\"qty\":{}}}",
                        rng.below(1_000_000),
                        1 + rng.below(50)
                    );
                }
                p.push_str("]}");
            }
            p.push(']');
        }
        3 => {
            p.push_str(",\"holdings\":[");
            for h in 0..1 + rng.below(2) {
                if h > 0 {
                    p.push(',');
                }
                let _ = write!(p, "{{\"account\":\"A{}\",\"lots\":[", rng.below(1000));
                for l in 0..1 + rng.below(2) {
                    if l > 0 {
                        p.push(',');
                    }
                    let _ = write!(
                        p,
                        "{{\"qty\":{},\"cost\":{:.2}}}",
                        1 + rng.below(100),
                        rng.price()
                    );
                }
                p.push_str("]}");
            }
            p.push(']');
        }
        4 => {
            let _ = write!(
                p,
                ",\"ref\":{{\"name\":\"Instrument {n}\",\"class\":{{\"l1\":\"equity\",\"l2\":\"common\"}},\"active\":true}}"
            );
        }
        _ => {
            let _ = write!(
                p,
                ",\"headline\":\"headline {n} about {sym}\",\"tickers\":[\"{sym}\",\"{}\"]",
                SYMBOLS[(n % 8) as usize]
            );
        }
    }
    // Nine more child tables, items_0..items_8, on the topics that do not nest deeply.
    if t % 6 >= 4 || t >= 20 {
        let k = t % 9;
        let _ = write!(
            p,
            ",\"items_{k}\":[{{\"code\":\"c{}\",\"weight\":{:.4}}}]",
            rng.below(100),
            rng.price() / 1000.0
        );
    }
    // Free text so that lines average about 815 bytes, as in the reference feed.
    let target = 560 + rng.below(260) as usize;
    if p.len() + 12 < target {
        p.push_str(",\"note\":\"");
        while p.len() + 2 < target {
            p.push_str("lorem ipsum ");
        }
        p.push('"');
    }
    p.push('}');
    p
}

/// An object store that waits `latency` before every request to the wrapped store, as
/// cloud object storage does (~20 ms per request). Benches use it over the local file
/// system to show where parallel commits pay off. (`object_store`'s own `ThrottledStore`
/// cannot wrap the local file system: it panics on its file-backed reads.)
#[derive(Debug)]
pub struct LatencyStore<S> {
    inner: S,
    latency: std::time::Duration,
    /// Requests in flight at once, like a client's connection pool; `None`: unbounded.
    in_flight: Option<tokio::sync::Semaphore>,
    /// Every request's timing, when traced ([`LatencyStore::with_trace`]).
    trace: Option<Arc<Trace>>,
}

/// The requests a traced [`LatencyStore`] saw.
#[derive(Debug)]
struct Trace {
    origin: std::time::Instant,
    requests: parking_lot::Mutex<Vec<TracedRequest>>,
}

impl Trace {
    fn record(
        &self,
        op: &'static str,
        path: String,
        asked: std::time::Instant,
        started: std::time::Instant,
    ) {
        let ms =
            |t: std::time::Instant| t.saturating_duration_since(self.origin).as_secs_f64() * 1e3;
        self.requests.lock().push(TracedRequest {
            op,
            path,
            asked_ms: ms(asked),
            started_ms: ms(started),
            done_ms: ms(std::time::Instant::now()),
        });
    }
}

/// One request through a traced [`LatencyStore`]: milliseconds since the store was made.
#[derive(Debug, Clone)]
pub struct TracedRequest {
    /// `get`, `put`, `put_multipart`, `list`, `list_delimited`, `copy` or `delete`.
    pub op: &'static str,
    /// The object or prefix.
    pub path: String,
    /// When the request was made.
    pub asked_ms: f64,
    /// When it got a connection slot (equals `asked_ms` without a pool bound).
    pub started_ms: f64,
    /// When its latency had passed (the inner store's own time is not included).
    pub done_ms: f64,
}

impl<S> LatencyStore<S> {
    /// Wraps `inner`, adding `latency` to every request.
    pub fn new(inner: S, latency: std::time::Duration) -> Self {
        LatencyStore {
            inner,
            latency,
            in_flight: None,
            trace: None,
        }
    }

    /// Records every request's timing, for [`LatencyStore::trace`].
    pub fn with_trace(mut self) -> Self {
        self.trace = Some(Arc::new(Trace {
            origin: std::time::Instant::now(),
            requests: parking_lot::Mutex::new(Vec::new()),
        }));
        self
    }

    /// The requests recorded so far, in the order they finished (empty unless
    /// [`LatencyStore::with_trace`]).
    pub fn trace(&self) -> Vec<TracedRequest> {
        self.trace
            .as_ref()
            .map(|t| t.requests.lock().clone())
            .unwrap_or_default()
    }

    /// At most `n` requests wait at once (a client's connection pool); the others queue.
    pub fn with_max_in_flight(mut self, n: usize) -> Self {
        self.in_flight = Some(tokio::sync::Semaphore::new(n.max(1)));
        self
    }

    /// Waits the request latency, holding a connection slot when the pool is bounded.
    async fn wait(&self, op: &'static str, path: &impl std::fmt::Display) {
        let asked = std::time::Instant::now();
        let _slot = match &self.in_flight {
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        let started = std::time::Instant::now();
        tokio::time::sleep(self.latency).await;
        if let Some(trace) = &self.trace {
            trace.record(op, path.to_string(), asked, started);
        }
    }
}

impl<S: std::fmt::Display> std::fmt::Display for LatencyStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LatencyStore({}, {:?})", self.inner, self.latency)
    }
}

/// A listing's prefix for a trace (`/` for the root).
fn fmt_prefix(prefix: Option<&ObjectPath>) -> String {
    prefix.map_or_else(|| "/".to_string(), ToString::to_string)
}

mod latency_impl {
    use deltalake::logstore::object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
        PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, path::Path,
    };
    use futures::stream::{BoxStream, StreamExt as _};

    use super::LatencyStore;

    #[async_trait::async_trait]
    impl<S: ObjectStore> ObjectStore for LatencyStore<S> {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> Result<PutResult> {
            self.wait("put", location).await;
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.wait("put_multipart", location).await;
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            self.wait("get", location).await;
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            // Deletes are rare (VACUUM, dropping staging): latency only, no pool.
            let latency = self.latency;
            let delayed = locations
                .then(move |l| async move {
                    tokio::time::sleep(latency).await;
                    l
                })
                .boxed();
            self.inner.delete_stream(delayed)
        }
        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            // Listings are rare (opening a table): latency only, no pool.
            let latency = self.latency;
            let inner = self.inner.list(prefix);
            let trace = self.trace.clone();
            let path = super::fmt_prefix(prefix);
            futures::stream::once(async move {
                let asked = std::time::Instant::now();
                tokio::time::sleep(latency).await;
                if let Some(t) = trace {
                    t.record("list", path, asked, asked);
                }
                inner
            })
            .flatten()
            .boxed()
        }
        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.wait("list_delimited", &super::fmt_prefix(prefix))
                .await;
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
            self.wait("copy", from).await;
            self.inner.copy_opts(from, to, options).await
        }
    }
}

/// What a [`Hooked`] store does to its inner store's puts, gets and deletes (by default:
/// passes them on); lists and copies always pass on. Tests use hooks to count, hold or
/// fail requests, the failpoints to kill the process before a commit.
#[async_trait::async_trait]
pub trait Hook: std::fmt::Debug + std::fmt::Display + Send + Sync + 'static {
    /// A put of `location`.
    async fn put(
        &self,
        inner: &DynObjectStore,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> ObjectResult<PutResult> {
        inner.put_opts(location, payload, opts).await
    }
    /// A multipart upload to `location`.
    async fn put_multipart(
        &self,
        inner: &DynObjectStore,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> ObjectResult<Box<dyn MultipartUpload>> {
        inner.put_multipart_opts(location, opts).await
    }
    /// A get of `location`.
    async fn get(
        &self,
        inner: &DynObjectStore,
        location: &ObjectPath,
        options: GetOptions,
    ) -> ObjectResult<GetResult> {
        inner.get_opts(location, options).await
    }
    /// Deletes of `locations`; the stream of those deleted.
    fn delete_stream(
        &self,
        inner: Arc<DynObjectStore>,
        locations: BoxStream<'static, ObjectResult<ObjectPath>>,
    ) -> BoxStream<'static, ObjectResult<ObjectPath>> {
        inner.delete_stream(locations)
    }
}

/// An object store with a [`Hook`] on its inner store's requests; derefs to the hook
/// (its counters and flags).
#[derive(Debug)]
pub struct Hooked<H> {
    inner: Arc<DynObjectStore>,
    hook: H,
}

impl<H: Hook> Hooked<H> {
    /// `inner` with `hook` on its puts and gets.
    pub fn new(inner: Arc<DynObjectStore>, hook: H) -> Arc<Self> {
        Arc::new(Hooked { inner, hook })
    }
}

impl<H> std::ops::Deref for Hooked<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.hook
    }
}

impl<H: Hook> std::fmt::Display for Hooked<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.hook, f)
    }
}

#[async_trait::async_trait]
impl<H: Hook> ObjectStore for Hooked<H> {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> ObjectResult<PutResult> {
        self.hook.put(&*self.inner, location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> ObjectResult<Box<dyn MultipartUpload>> {
        self.hook.put_multipart(&*self.inner, location, opts).await
    }
    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> ObjectResult<GetResult> {
        self.hook.get(&*self.inner, location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, ObjectResult<ObjectPath>>,
    ) -> BoxStream<'static, ObjectResult<ObjectPath>> {
        self.hook.delete_stream(Arc::clone(&self.inner), locations)
    }
    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, ObjectResult<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> ObjectResult<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> ObjectResult<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Copies the folder tree `from` to `to` (files and folders only), e.g. a catalog to
/// load the next batch into.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), target)?;
        }
    }
    Ok(())
}

/// Writes one batch folder `<root>/batch_id=<batch_id>/part-NNNNN.jsonl[.gz]`.
pub fn generate(root: &Path, batch_id: &str, spec: &GenSpec) -> std::io::Result<GenSummary> {
    let dir = root.join(format!("batch_id={batch_id}"));
    std::fs::create_dir_all(&dir)?;
    let mut rng = Rng(spec.seed);
    let mut summary = GenSummary {
        dir: dir.clone(),
        ..Default::default()
    };
    let mut recent: Vec<String> = Vec::with_capacity(64);
    let mut n: u64 = 0;
    for f in 0..spec.files {
        let mut text = String::with_capacity(spec.lines_per_file * 900);
        for _ in 0..spec.lines_per_file {
            n += 1;
            let roll = rng.below(10_000) as u32;
            let line = if roll < spec.corrupt_per_10k {
                summary.corrupt += 1;
                format!(
                    "{{\"topic\":\"{}\",\"message_id\":\"m{n}\",\"payload\":{{\"truncated\":",
                    topic_name(0)
                )
            } else if roll < spec.corrupt_per_10k + spec.duplicates_per_mille * 10
                && !recent.is_empty()
            {
                summary.duplicates += 1;
                recent[rng.below(recent.len() as u64) as usize].clone()
            } else {
                let t = rng.below(spec.topics as u64) as usize;
                let line = format!(
                    "{{\"topic\":\"{}\",\"message_id\":\"{batch_id}-{n:09}\",\"source\":\"gen\",\"ts\":\"2026-04-05T10:00:00Z\",\"payload\":{}}}",
                    topic_name(t),
                    match spec.profile {
                        Profile::Padded => payload(t, n, &mut rng),
                        Profile::Dense => dense::payload(t, n, &mut rng),
                    }
                );
                if recent.len() < 64 {
                    recent.push(line.clone());
                } else {
                    let i = rng.below(64) as usize;
                    recent[i] = line.clone();
                }
                line
            };
            text.push_str(&line);
            text.push('\n');
            summary.lines += 1;
        }
        summary.bytes += text.len() as u64;
        if spec.gzip {
            let file = std::fs::File::create(dir.join(format!("part-{f:05}.jsonl.gz")))?;
            let mut enc = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            enc.write_all(text.as_bytes())?;
            enc.finish()?;
        } else {
            std::fs::write(dir.join(format!("part-{f:05}.jsonl")), text)?;
        }
    }
    Ok(summary)
}

/// The object store holding `url` and the path of `url` in it, built from `options` as a
/// run builds it (for tests that put or read files beside the tables, such as leases).
pub fn object_store_at(
    url: &str,
    options: &[(String, String)],
) -> crate::Result<(Arc<DynObjectStore>, ObjectPath)> {
    let crate::Location::Url(u) = crate::Location::parse(url)? else {
        return Err(crate::Error::Config {
            name: "url",
            reason: format!("{url} is not an object store URL"),
        });
    };
    let mut o = crate::StorageOptions::default();
    for (k, v) in options {
        o.insert(k.clone(), v.clone());
    }
    let store = crate::store::location::store_for(&u, &o)?;
    let path = ObjectPath::from_url_path(u.path()).map_err(|e| crate::Error::Config {
        name: "url",
        reason: e.to_string(),
    })?;
    Ok((store, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes_and_valid_json() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let spec = GenSpec {
            files: 3,
            lines_per_file: 200,
            ..Default::default()
        };
        let sa = generate(a.path(), "x", &spec).unwrap();
        let sb = generate(b.path(), "x", &spec).unwrap();
        assert_eq!(sa.lines, 600);
        assert_eq!(
            (sa.duplicates, sa.corrupt, sa.bytes),
            (sb.duplicates, sb.corrupt, sb.bytes)
        );
        let fa = std::fs::read(sa.dir.join("part-00001.jsonl")).unwrap();
        assert_eq!(fa, std::fs::read(sb.dir.join("part-00001.jsonl")).unwrap());
        let mut bad = 0;
        for line in fa.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            if serde_json::from_slice::<serde_json::Value>(line).is_err() {
                bad += 1;
            }
        }
        assert!(bad <= 3, "{bad}");
        let avg = sa.bytes / sa.lines;
        assert!((700..=950).contains(&avg), "average line {avg} bytes");
    }

    /// Non-null leaves (scalars) of a JSON value.
    fn leaves(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::Null => 0,
            serde_json::Value::Array(a) => a.iter().map(leaves).sum(),
            serde_json::Value::Object(o) => o.values().map(leaves).sum(),
            _ => 1,
        }
    }

    #[test]
    fn the_dense_profile_is_field_dense_non_ascii_and_as_large_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let spec = GenSpec {
            files: 4,
            lines_per_file: 250,
            profile: Profile::Dense,
            ..Default::default()
        };
        let s = generate(dir.path(), "d", &spec).unwrap();
        let (mut payloads, mut leaf_count, mut non_ascii, mut nulls) = (0, 0, 0, 0);
        let mut topics = std::collections::BTreeSet::new();
        for f in 0..4 {
            let text = std::fs::read_to_string(s.dir.join(format!("part-{f:05}.jsonl"))).unwrap();
            for line in text.lines() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                let p = &v["payload"];
                if p.get("truncated").is_some() {
                    continue;
                }
                payloads += 1;
                leaf_count += leaves(p);
                non_ascii += usize::from(!p.to_string().is_ascii());
                nulls += usize::from(p["halted"].is_null());
                topics.insert(v["topic"].as_str().unwrap().to_string());
            }
        }
        let per_message = leaf_count as f64 / payloads as f64;
        assert!(
            (22.0..=34.0).contains(&per_message),
            "{per_message} leaves per message"
        );
        assert_eq!(non_ascii, payloads, "every payload has non-ASCII text");
        assert_eq!(nulls, payloads);
        assert_eq!(topics.len(), 36);
        let avg = s.bytes / s.lines;
        assert!((650..=950).contains(&avg), "average line {avg} bytes");
        // Same rates of duplicates and corrupt lines as the padded profile.
        assert!((10..=40).contains(&s.duplicates), "{}", s.duplicates);
        assert!(s.corrupt <= 5, "{}", s.corrupt);
    }
}
