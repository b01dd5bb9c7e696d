//! Dedup: the message ids (or dedup keys) seen in a batch, in an [`IdSet`] sharded by
//! their hash so a chunk's keys are inserted on every thread of the pool.

use rayon::prelude::*;

/// The hash of message ids and dedup keys: one random seed per process, so staging
/// threads hash each key while its line is in cache and every [`IdSet`] probes with it.
static ID_HASHER: std::sync::LazyLock<ahash::RandomState> =
    std::sync::LazyLock::new(ahash::RandomState::new);

/// [`IdSet`]'s hash of an id or dedup key. 32 bits are plenty to find a key among
/// millions (equal hashes only cost a comparison of the bytes).
pub(super) fn id_hash(bytes: &[u8]) -> u32 {
    ID_HASHER.hash_one(bytes) as u32
}

/// Bits of a key's hash that pick its shard of an [`IdSet`].
const ID_SHARD_BITS: u32 = 4;

/// Shards of an [`IdSet`]: equal keys share a shard, so shards dedup in parallel.
const ID_SHARDS: usize = 1 << ID_SHARD_BITS;

/// The shard of a key: the top [`ID_SHARD_BITS`] of its hash.
fn shard_of(hash: u32) -> usize {
    (hash >> (u32::BITS - ID_SHARD_BITS)) as usize
}

/// A key's hash as a shard's table takes it: spread over 64 bits (hashbrown picks the
/// bucket from the low bits, a tag from the top 7).
fn table_hash(hash: u32) -> u64 {
    u64::from(hash).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Message ids (or dedup keys) seen so far in a batch, across files and staging chunks.
///
/// Packed for batches of millions of messages: every id's bytes go to one arena and the
/// table holds `(offset, length)`, about 15-25 bytes plus the id per entry instead of a
/// `String` each (~60 bytes and one allocation per id). Sharded by hash, so that
/// [`IdSet::insert_all`] inserts a batch's keys on every thread of the pool: one
/// thread took 110 ms of the historical batch's staging, the other core idle.
pub struct IdSet {
    shards: Vec<IdShard>,
}

impl Default for IdSet {
    fn default() -> Self {
        IdSet {
            shards: (0..ID_SHARDS).map(|_| IdShard::default()).collect(),
        }
    }
}

/// One shard of an [`IdSet`].
#[derive(Default)]
struct IdShard {
    arena: Vec<u8>,
    table: hashbrown::HashTable<IdEntry>,
}

/// A key of an [`IdShard`]: where its bytes are in the arena, and its [`id_hash`], so
/// growing the table never reads the arena. 12 bytes: a shard's arena holds at most
/// 4 GiB of ids (64 GiB for a batch), far beyond what a batch's ids take in memory.
#[derive(Clone, Copy)]
struct IdEntry {
    offset: u32,
    len: u32,
    hash: u32,
}

impl IdShard {
    /// Adds `bytes`, whose [`id_hash`] is `hash`; `false` when it was already there.
    /// A key that no longer fits the shard's arena (4 GiB of ids in one shard) is taken
    /// as new and not kept: its later copies are kept too, nothing is dropped.
    fn insert(&mut self, hash: u32, bytes: &[u8]) -> bool {
        let arena = &self.arena;
        let found = self.table.find(table_hash(hash), |e| {
            e.hash == hash && &arena[e.offset as usize..][..e.len as usize] == bytes
        });
        if found.is_some() {
            return false;
        }
        let (Ok(offset), Ok(len)) = (
            u32::try_from(self.arena.len()),
            u32::try_from(bytes.len()),
        ) else {
            return true;
        };
        self.arena.extend_from_slice(bytes);
        self.table.insert_unique(
            table_hash(hash),
            IdEntry { offset, len, hash },
            |e| table_hash(e.hash),
        );
        true
    }
}

impl IdSet {
    /// Adds `id`; `false` when it was already there.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert(&mut self, id: &str) -> bool {
        self.insert_bytes(id.as_bytes())
    }

    /// Adds an id given as bytes; `false` when it was already there.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert_bytes(&mut self, bytes: &[u8]) -> bool {
        let hash = id_hash(bytes);
        self.shards[shard_of(hash)].insert(hash, bytes)
    }

    /// Adds `keys` (each with its [`id_hash`]; `None` is never a duplicate) as if one by
    /// one in order, the shards in parallel on the current rayon pool; whether each was
    /// new.
    pub(crate) fn insert_all(&mut self, keys: &[Option<(u32, &[u8])>]) -> Vec<bool> {
        let mut by_shard: Vec<Vec<u32>> = vec![Vec::new(); ID_SHARDS];
        for (i, key) in keys.iter().enumerate() {
            if let Some((hash, _)) = key {
                by_shard[shard_of(*hash)].push(i as u32);
            }
        }
        let duplicates: Vec<Vec<u32>> = self
            .shards
            .par_iter_mut()
            .zip(by_shard)
            .map(|(shard, indices)| {
                // Sized once for the keys to come (at most all new): no rehash midway.
                shard.table.reserve(indices.len(), |e| table_hash(e.hash));
                indices
                    .into_iter()
                    .filter(|&i| {
                        let (hash, bytes) = keys[i as usize].expect("indexed keys are Some");
                        !shard.insert(hash, bytes)
                    })
                    .collect()
            })
            .collect();
        let mut fresh = vec![true; keys.len()];
        for i in duplicates.into_iter().flatten() {
            fresh[i as usize] = false;
        }
        fresh
    }

    /// Heap bytes the set holds (its arenas' and tables' capacity): about 35-45 bytes
    /// per id of ~13 bytes, ~90 MB for a batch of 2.3 M messages.
    pub fn heap_bytes(&self) -> u64 {
        let entry = std::mem::size_of::<IdEntry>() + 1;
        self.shards
            .iter()
            .map(|s| (s.arena.capacity() + s.table.capacity() * entry) as u64)
            .sum()
    }

    /// Ids held.
    #[cfg(any(test, feature = "testing"))]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.table.len()).sum()
    }

    /// Whether no id was added.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.table.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_set_dedups_exactly() {
        let mut s = IdSet::default();
        for i in 0..10_000 {
            assert!(s.insert(&format!("id-{i}")));
        }
        for i in 0..10_000 {
            assert!(!s.insert(&format!("id-{i}")));
        }
        assert!(s.insert("id-10000") && s.insert("") && !s.insert(""));
        assert_eq!(s.len(), 10_002);
    }

    #[test]
    fn insert_all_keeps_the_first_of_equal_keys_in_order() {
        // Keys spread over every shard, each 1-3 times, some already in the set (an
        // earlier staging chunk), and keyless messages: the outcome is a one-by-one
        // insert's, whatever shard or thread each key went to.
        let mut set = IdSet::default();
        let mut model = std::collections::HashSet::new();
        for i in 0..500 {
            let k = format!("chunk-1-{i}");
            assert!(set.insert(&k));
            model.insert(k.into_bytes());
        }
        let owned: Vec<Option<Vec<u8>>> = (0..20_000u64)
            .map(|i| {
                let n = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
                match n % 7 {
                    0 => None,
                    1 => Some(format!("chunk-1-{}", n % 600).into_bytes()),
                    _ => Some(format!("id-{}", n % 3000).into_bytes()),
                }
            })
            .collect();
        let keys: Vec<Option<(u32, &[u8])>> = owned
            .iter()
            .map(|k| k.as_deref().map(|b| (id_hash(b), b)))
            .collect();
        let shards: std::collections::HashSet<usize> =
            keys.iter().flatten().map(|(h, _)| shard_of(*h)).collect();
        assert_eq!(shards.len(), ID_SHARDS);
        let expected: Vec<bool> = owned
            .iter()
            .map(|k| k.as_ref().is_none_or(|b| model.insert(b.clone())))
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let fresh = pool.install(|| set.insert_all(&keys));
        assert_eq!(fresh, expected);
        assert_eq!(set.len(), model.len());
        assert!(!set.insert("id-7") && set.insert("id-3000"));
    }
}
