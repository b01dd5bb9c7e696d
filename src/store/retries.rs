//! Counting the object store client's retries.
//!
//! `object_store` retries a transient failure itself (5xx, 429, 408, a connection
//! refused or reset, a timeout of an idempotent request) with jittered exponential
//! backoff, bounded by `max_retries` (10) and `retry_timeout` (3 minutes), both storage
//! options. It reports each retry only as an INFO event of target
//! `object_store::client::retry`, from the thread that polls the request: a worker of
//! the catalog's tokio runtime for spawned tasks, or the thread that calls `block_on`
//! (the run's caller, its parse and topic pools, the lease heartbeat). Each of those
//! threads gets a dispatcher that counts those events into the catalog's
//! [`RetryCounter`] and forwards everything (the counted events too, when enabled) to
//! the dispatcher the thread would have had, so logging is unchanged.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::subscriber::{Interest, Subscriber};
use tracing::{Dispatch, Event, Metadata, span};

/// Target of `object_store`'s retry events.
const RETRY_TARGET: &str = "object_store::client::retry";

/// Retries the object store client made, shared by the threads of one runtime.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetryCounter(Arc<AtomicU64>);

impl RetryCounter {
    /// Retries so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// A dispatcher that counts retries here and forwards every event to the calling
    /// thread's current default.
    fn dispatch(&self) -> Dispatch {
        Dispatch::new(Counting {
            inner: tracing::dispatcher::get_default(Dispatch::clone),
            retries: self.clone(),
        })
    }

    /// Makes the calling thread count retries here for the rest of its life: for the
    /// start of the threads of a runtime or a pool the run owns.
    pub(crate) fn install_on_this_thread(&self) {
        // The guard would restore the previous default when dropped.
        std::mem::forget(tracing::dispatcher::set_default(&self.dispatch()));
    }

    /// Runs `f` on the calling thread counting retries here: requests of a future
    /// driven by `block_on` run on the thread that calls it.
    pub(crate) fn counting<T>(&self, f: impl FnOnce() -> T) -> T {
        tracing::dispatcher::with_default(&self.dispatch(), f)
    }
}

fn is_retry(metadata: &Metadata<'_>) -> bool {
    metadata.target() == RETRY_TARGET
}

/// Counts retry events and forwards everything to `inner`.
struct Counting {
    inner: Dispatch,
    retries: RetryCounter,
}

impl Subscriber for Counting {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if is_retry(metadata) {
            Interest::always()
        } else {
            self.inner.register_callsite(metadata)
        }
    }
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        is_retry(metadata) || self.inner.enabled(metadata)
    }
    fn new_span(&self, span: &span::Attributes<'_>) -> span::Id {
        self.inner.new_span(span)
    }
    fn record(&self, span: &span::Id, values: &span::Record<'_>) {
        self.inner.record(span, values)
    }
    fn record_follows_from(&self, span: &span::Id, follows: &span::Id) {
        self.inner.record_follows_from(span, follows)
    }
    fn event(&self, event: &Event<'_>) {
        if is_retry(event.metadata()) {
            self.retries.0.fetch_add(1, Ordering::Relaxed);
            if !self.inner.enabled(event.metadata()) {
                return;
            }
        }
        self.inner.event(event)
    }
    fn enter(&self, span: &span::Id) {
        self.inner.enter(span)
    }
    fn exit(&self, span: &span::Id) {
        self.inner.exit(span)
    }
    fn clone_span(&self, id: &span::Id) -> span::Id {
        self.inner.clone_span(id)
    }
    fn try_close(&self, id: span::Id) -> bool {
        self.inner.try_close(id)
    }
    fn current_span(&self) -> tracing_core::span::Current {
        self.inner.current_span()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_events_are_counted_on_the_threads_of_a_counting_runtime_only() {
        let counter = RetryCounter::default();
        let on_start = counter.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .on_thread_start(move || on_start.install_on_this_thread())
            .build()
            .unwrap();
        rt.block_on(async {
            let tasks: Vec<_> = (0..3)
                .map(|i| {
                    tokio::spawn(async move {
                        tracing::info!(target: "object_store::client::retry", "backing off, retry {i}");
                        tracing::info!(target: "object_store::client::other", "not a retry");
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert_eq!(counter.get(), 3);
        // Not on a thread of that runtime.
        tracing::info!(target: "object_store::client::retry", "elsewhere");
        assert_eq!(counter.get(), 3);
    }
}
