//! The table a commit went to, and what the commit changed that its loaded state does
//! not show yet.

use deltalake::DeltaTable;

/// A table a commit went to, for the maintenance after it: its state, and what the
/// commit changed that the state does not show yet (appends and whole-file replaces keep
/// the state from before their commit rather than replaying the log again; see
/// [`commit_on`]).
pub(crate) struct WrittenTable {
    pub(crate) table: DeltaTable,
    pub(crate) pending: Pending,
}

/// Files a commit added and removed that a [`WrittenTable`]'s state does not list yet.
#[derive(Default)]
pub(crate) struct Pending {
    /// Sizes of the added files.
    pub(crate) adds: Vec<u64>,
    /// Paths of the removed files, as the log records them.
    pub(crate) removes: Vec<String>,
}

impl Pending {
    /// The files a commit adds (their sizes) and removes (their paths), for the upkeep
    /// after it.
    pub(crate) fn of(
        adds: &[deltalake::kernel::Add],
        removes: &[deltalake::kernel::Remove],
    ) -> Pending {
        Pending {
            adds: adds.iter().map(|a| a.size.max(0) as u64).collect(),
            removes: removes.iter().map(|r| r.path.clone()).collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.adds.is_empty() && self.removes.is_empty()
    }
}

impl WrittenTable {
    pub(super) fn current(table: DeltaTable) -> Self {
        WrittenTable {
            table,
            pending: Pending::default(),
        }
    }
}
