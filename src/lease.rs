//! Batch leases: at most one run loads a given batch folder into a schema at a time.
//!
//! Two runs of one batch at once would each replace the batch's rows table by table;
//! where their commits interleave (an over-budget topic committed in slices, say) the
//! tables could end with rows of both. So a run first creates, for each folder of its
//! batch, `<schema>/_bronze_leases/<source>+<entity>+<batch_id>.json` ([`lease_file`])
//! with a create-if-absent put (atomic on a
//! local disk and on S3, ADLS and GCS) and deletes it when it ends, failed or not. A
//! second run finds the file and stops with [`Error::BatchLeased`], naming the holder.
//!
//! A lease left by a run that died (SIGKILL, lost node) is taken over when its holder
//! is provably gone: same host and no process with that pid and start time, or older
//! than the lease TTL.

use std::sync::Arc;
use std::time::Duration;

use deltalake::logstore::object_store::{
    self, DynObjectStore, ObjectStoreExt as _, PutMode, PutOptions, path::Path as StorePath,
};

use crate::error::{Error, Result};

pub use crate::schema::LEASE_DIR;

/// The lease file of one folder of a batch: `<source>+<entity>+<batch id>.json` (`+` is
/// outside both allow-lists, so names cannot collide); a name over 200 bytes is cut to
/// the batch id and a hash of the landing path.
pub fn lease_file(landing_path: &str, batch_id: &str) -> String {
    let stem = format!("{}+{batch_id}", landing_path.replace('/', "+"));
    if stem.len() <= 200 {
        format!("{stem}.json")
    } else {
        let hash = crate::naming::stable_id(&[landing_path.as_bytes()]);
        format!("{batch_id}+{}.json", &hash[..16])
    }
}

pub use crate::schema::Holder;

impl Holder {
    fn me(run_id: &str, now_micros: i64) -> Holder {
        let pid = std::process::id();
        Holder {
            run_id: run_id.to_string(),
            host: host_name(),
            pid,
            pid_start: process_start(pid),
            since_micros: now_micros,
        }
    }

    /// Whether the holder is provably gone (or the lease outlived `ttl`).
    fn is_stale(&self, now_micros: i64, ttl: Duration) -> bool {
        let age = now_micros.saturating_sub(self.since_micros);
        if age > i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX) {
            return true;
        }
        // On this host: gone when no process has that pid and start time (without
        // `/proc` neither is known and only the TTL tells).
        self.host == host_name() && process_start(self.pid) != self.pid_start
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// Start time of process `pid` in clock ticks since boot, `None` when there is no such
/// process (or no `/proc`).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; the command name (field 2) is in parentheses and may hold spaces.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// A held lease; released (deleted) on drop.
pub(crate) struct Lease {
    store: Arc<DynObjectStore>,
    path: StorePath,
    runtime: tokio::runtime::Handle,
    /// A lease of a dead run this one took over.
    pub(crate) took_over: Option<Holder>,
}

impl Lease {
    /// Takes the lease of one folder of a batch (`(landing_path, batch_id)`) under the
    /// schema at `schema_dir` (a path in `store`), or says who holds it.
    pub(crate) fn acquire(
        store: Arc<DynObjectStore>,
        schema_dir: &StorePath,
        display_dir: &str,
        (landing_path, batch_id): (&str, &str),
        run_id: &str,
        ttl: Duration,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Lease> {
        let file = lease_file(landing_path, batch_id);
        let path = schema_dir.clone().join(LEASE_DIR).join(file.as_str());
        let shown = format!("{display_dir}/{LEASE_DIR}/{file}");
        let batch_id = &format!("{landing_path}/batch_id={batch_id}");
        let io = |e: object_store::Error| Error::Lease {
            path: shown.clone(),
            source: Box::new(e),
        };
        let now = crate::clock::now_micros();
        let me = Holder::me(run_id, now);
        let body = serde_json::to_vec(&me).expect("a lease holder serializes");
        let mut took_over = None;
        // Two attempts: the second after removing a stale lease.
        for _ in 0..2 {
            let put = runtime.block_on(store.put_opts(
                &path,
                body.clone().into(),
                PutOptions::from(PutMode::Create),
            ));
            match put {
                Ok(_) => {
                    return Ok(Lease {
                        store,
                        path,
                        runtime: runtime.handle().clone(),
                        took_over,
                    });
                }
                Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(io(e)),
            }
            let held = runtime.block_on(async {
                let got = store.get(&path).await?;
                got.bytes().await
            });
            let holder = match held {
                Ok(bytes) => serde_json::from_slice::<Holder>(&bytes).ok(),
                // Released between our put and our read: try again.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(io(e)),
            };
            match holder {
                Some(h) if !h.is_stale(now, ttl) => {
                    return Err(Error::BatchLeased {
                        batch_id: batch_id.to_string(),
                        holder: Box::new(h),
                        path: shown.clone(),
                    });
                }
                // Stale, or unreadable (a torn write of a killed run): take it over.
                h => {
                    tracing::warn!(lease = %shown, holder = ?h, "taking over the lease of a run that is gone");
                    took_over = h;
                    match runtime.block_on(store.delete(&path)) {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(io(e)),
                    }
                }
            }
        }
        Err(Error::BatchLeased {
            batch_id: batch_id.to_string(),
            holder: Box::new(Holder::me("(another run that just took it)", now)),
            path: shown,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let (store, path) = (Arc::clone(&self.store), self.path.clone());
        // Dropped on a pool or caller thread, never inside the runtime.
        if let Err(e) = self
            .runtime
            .block_on(async move { store.delete(&path).await })
        {
            tracing::warn!(lease = %self.path, error = %e, "could not release the batch lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_start_is_read_and_a_missing_pid_has_none() {
        assert!(process_start(std::process::id()).is_some());
        // pid_max is at most 2^22 on Linux.
        assert_eq!(process_start(u32::MAX - 1), None);
    }

    #[test]
    fn a_live_holder_is_not_stale_a_dead_or_old_one_is() {
        let now = crate::clock::now_micros();
        let ttl = Duration::from_secs(3600);
        // A live process of this host (pid 1 runs as long as the machine).
        let live = Holder {
            run_id: "r".into(),
            host: host_name(),
            pid: 1,
            pid_start: process_start(1),
            since_micros: now,
        };
        assert!(!live.is_stale(now, ttl));
        let reused_pid = Holder {
            pid_start: process_start(1).map(|s| s + 1),
            ..live.clone()
        };
        assert!(reused_pid.is_stale(now, ttl));
        let dead = Holder {
            pid: u32::MAX - 1,
            ..live.clone()
        };
        assert!(dead.is_stale(now, ttl));
        let elsewhere = Holder {
            host: "another-host".into(),
            pid: u32::MAX - 1,
            ..live.clone()
        };
        assert!(
            !elsewhere.is_stale(now, ttl),
            "another host: only the TTL tells"
        );
        let old = Holder {
            since_micros: now - 2 * 3_600_000_000,
            ..elsewhere
        };
        assert!(old.is_stale(now, ttl));
    }
}
