//! `TableLocks`: one mutex per target table, created lazily.
//!
//! Parallel topics can feed the same child table (`currentprice`); two commits to one
//! Delta table at once would conflict. Only writes to the same table wait; writes to
//! different tables run in parallel. A guard is taken in synchronous code around one
//! table's write and commit, never held across an `.await` nor while touching the map.

use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::{Mutex, RawMutex, lock_api::ArcMutexGuard};

use crate::config::LockPolicy;
use crate::naming::TableName;

/// The per-table lock map.
#[derive(Debug, Default)]
pub struct TableLocks {
    policy: LockPolicy,
    map: DashMap<TableName, Arc<Mutex<()>>>,
    global: Arc<Mutex<()>>,
}

/// Held while one table is written; dropping it lets the next writer of that table in.
pub struct TableGuard(
    // Held for its drop alone: never read.
    #[allow(dead_code)] Option<ArcMutexGuard<RawMutex, ()>>,
);

impl TableLocks {
    /// A lock map with the given policy.
    pub fn new(policy: LockPolicy) -> Self {
        TableLocks {
            policy,
            ..Default::default()
        }
    }

    /// Blocks until `table` may be written.
    pub fn lock(&self, table: &TableName) -> TableGuard {
        let mutex = match self.policy {
            LockPolicy::None => return TableGuard(None),
            LockPolicy::Global => Arc::clone(&self.global),
            // Clone the Arc out of the entry so the shard guard is dropped at the end of
            // this statement, before we block on the table's mutex.
            LockPolicy::PerTable => Arc::clone(self.map.entry(table.clone()).or_default().value()),
        };
        TableGuard(Some(Mutex::lock_arc(&mutex)))
    }

    /// Tables that have a lock so far.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True before the first lock was taken.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Runs `threads` writers on two tables; returns the peak number of writers inside
    /// the same table at once, and the peak inside any table at once.
    fn peaks(policy: LockPolicy) -> (usize, usize) {
        let locks = TableLocks::new(policy);
        let tables = [TableName::for_topic("a"), TableName::for_topic("b")];
        let inside = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let total = AtomicUsize::new(0);
        let (peak_same, peak_any) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let start = Barrier::new(8);
        std::thread::scope(|s| {
            for i in 0..8 {
                let (locks, tables, inside, total, start) =
                    (&locks, &tables, &inside, &total, &start);
                let (peak_same, peak_any) = (&peak_same, &peak_any);
                s.spawn(move || {
                    start.wait();
                    for _ in 0..200 {
                        let t = i % 2;
                        let _g = locks.lock(&tables[t]);
                        let now = inside[t].fetch_add(1, Ordering::SeqCst) + 1;
                        let all = total.fetch_add(1, Ordering::SeqCst) + 1;
                        peak_same.fetch_max(now, Ordering::SeqCst);
                        peak_any.fetch_max(all, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside[t].fetch_sub(1, Ordering::SeqCst);
                        total.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        (peak_same.into_inner(), peak_any.into_inner())
    }

    #[test]
    fn per_table_serializes_only_the_same_table() {
        let (same, _any) = peaks(LockPolicy::PerTable);
        assert_eq!(same, 1);
        let (same, any) = peaks(LockPolicy::Global);
        assert_eq!((same, any), (1, 1));
    }

    #[test]
    fn locks_are_created_lazily_once_per_table() {
        let locks = TableLocks::new(LockPolicy::PerTable);
        assert!(locks.is_empty());
        drop(locks.lock(&TableName::for_topic("x")));
        drop(locks.lock(&TableName::for_topic("x")));
        drop(locks.lock(&TableName::for_topic("y")));
        assert_eq!(locks.len(), 2);
    }
}
