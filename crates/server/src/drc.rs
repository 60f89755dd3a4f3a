//! Duplicate reply cache for non-idempotent procedures.
//!
//! A client that loses a reply (connection reset, timeout) retransmits the
//! call with the same xid. Re-executing REMOVE, RENAME, CREATE, … would turn
//! the first call's success into NFS3ERR_NOENT or NFS3ERR_EXIST, so for the
//! procedures the table marks non-idempotent we remember the reply and send
//! it again. A duplicate that arrives while the original is still running is
//! dropped: the client retransmits again and will then find the reply.
//!
//! Keyed by client address (not port: a TCP client reconnects from a new
//! port), xid, program, version, procedure and a checksum of the
//! arguments, so that a client reusing an xid for different work is not
//! given a stale answer. Sharded to keep the lock off the hot path of
//! unrelated clients, and bounded: each shard forgets its oldest entries.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::stats::Stats;

const SHARDS: usize = 64;

/// Identifies one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) client: IpAddr,
    pub(crate) xid: u32,
    pub(crate) prog: u32,
    pub(crate) vers: u32,
    pub(crate) proc_: u32,
    pub(crate) args_sum: u64,
}

impl Key {
    pub(crate) fn new(client: IpAddr, xid: u32, prog: u32, vers: u32, proc_: u32, args: &[u8]) -> Self {
        // The checksum only separates different calls that share an xid; it
        // is not a security boundary (the client owns its own xids).
        let mut h = std::collections::hash_map::DefaultHasher::new();
        args.hash(&mut h);
        Key { client, xid, prog, vers, proc_, args_sum: h.finish() }
    }

    fn shard(&self) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish() as usize % SHARDS
    }
}

#[derive(Debug)]
enum Entry {
    InProgress,
    Done(Bytes),
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Key, Entry>,
    /// Insertion order, for eviction.
    order: VecDeque<Key>,
}

/// What to do with an incoming call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// First time seen: execute it, then call [`Drc::finish`] (or [`Drc::abandon`]).
    New,
    /// Still executing: send nothing.
    InProgress,
    /// Already answered: send this reply again.
    Replay(Bytes),
}

/// The cache.
#[derive(Debug)]
pub(crate) struct Drc {
    shards: Vec<Mutex<Shard>>,
    /// Most entries a shard keeps.
    per_shard: usize,
    /// Where hits, misses, drops and evictions are counted.
    stats: Arc<Stats>,
}

/// Bytes one entry costs, counted generously: the key, the reply of a
/// namespace call (a few hundred bytes with its attributes), the map and
/// queue slots.
pub(crate) const DRC_ENTRY_BYTES: u64 = 640;

/// Entries for a machine with `memory_bytes` of RAM: 1/256 of it, between
/// 32 Ki and 4 Mi entries. Banks's target is ~10^5 calls/s with entries
/// living longer than a client's retry time (about 1.1 s over UDP); a
/// 4 GiB machine gets 26 Ki entries' worth of memory → the 32 Ki floor,
/// 24 GiB gets 157 Ki, enough for 10^5 non-idempotent calls/s.
pub fn drc_entries_for_memory(memory_bytes: u64) -> usize {
    (memory_bytes / 256 / DRC_ENTRY_BYTES).clamp(32 * 1024, 4 * 1024 * 1024) as usize
}

impl Drc {
    /// A cache of about `capacity` entries.
    pub(crate) fn new(capacity: usize, stats: Arc<Stats>) -> Self {
        Drc {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            stats,
        }
    }

    /// Look up a call, marking it in progress if new.
    pub(crate) fn begin(&self, key: Key) -> Lookup {
        let mut s = self.shards[key.shard()].lock();
        match s.map.get(&key) {
            Some(Entry::InProgress) => {
                self.stats.drc.in_progress.fetch_add(1, Ordering::Relaxed);
                return Lookup::InProgress;
            }
            Some(Entry::Done(r)) => {
                self.stats.drc.hits.fetch_add(1, Ordering::Relaxed);
                return Lookup::Replay(r.clone());
            }
            None => {}
        }
        self.stats.drc.misses.fetch_add(1, Ordering::Relaxed);
        while let Some(&oldest) = s.order.front() {
            if s.order.len() < self.per_shard {
                break;
            }
            // A call still running must stay findable by its finish(); let the
            // shard run over for now (calls in flight are bounded elsewhere).
            if matches!(s.map.get(&oldest), Some(Entry::InProgress)) {
                break;
            }
            s.order.pop_front();
            s.map.remove(&oldest);
            self.stats.drc.evicted.fetch_add(1, Ordering::Relaxed);
        }
        s.map.insert(key, Entry::InProgress);
        s.order.push_back(key);
        Lookup::New
    }

    /// Record the reply of a call begun with [`Drc::begin`].
    pub(crate) fn finish(&self, key: Key, reply: Bytes) {
        let mut s = self.shards[key.shard()].lock();
        if let Some(e) = s.map.get_mut(&key) {
            *e = Entry::Done(reply);
        }
    }

    /// Forget a call that produced no cacheable reply.
    pub(crate) fn abandon(&self, key: Key) {
        let mut s = self.shards[key.shard()].lock();
        s.map.remove(&key);
        s.order.retain(|k| *k != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(xid: u32, args: &[u8]) -> Key {
        Key::new("127.0.0.1".parse().unwrap(), xid, 100003, 3, 12, args)
    }

    #[test]
    fn replays_a_finished_call() {
        let d = Drc::new(100, Default::default());
        assert_eq!(d.begin(key(1, b"a")), Lookup::New);
        assert_eq!(d.begin(key(1, b"a")), Lookup::InProgress);
        d.finish(key(1, b"a"), Bytes::from_static(b"reply"));
        assert_eq!(d.begin(key(1, b"a")), Lookup::Replay(Bytes::from_static(b"reply")));
    }

    #[test]
    fn same_xid_other_arguments_is_a_new_call() {
        let d = Drc::new(100, Default::default());
        assert_eq!(d.begin(key(1, b"a")), Lookup::New);
        d.finish(key(1, b"a"), Bytes::from_static(b"reply"));
        assert_eq!(d.begin(key(1, b"b")), Lookup::New);
    }

    #[test]
    fn other_client_same_xid_is_a_new_call() {
        let d = Drc::new(100, Default::default());
        let k = key(1, b"a");
        assert_eq!(d.begin(k), Lookup::New);
        let other = Key { client: "127.0.0.2".parse().unwrap(), ..k };
        assert_eq!(d.begin(other), Lookup::New);
    }

    #[test]
    fn bounded_and_oldest_first() {
        let d = Drc::new(SHARDS, Default::default()); // one entry per shard
        for xid in 0..10_000 {
            let k = key(xid, b"x");
            assert_eq!(d.begin(k), Lookup::New);
            d.finish(k, Bytes::new());
        }
        let total: usize = d.shards.iter().map(|s| s.lock().map.len()).sum();
        assert!(total <= SHARDS, "cache grew to {total}");
        // The newest call is still remembered.
        assert!(matches!(d.begin(key(9_999, b"x")), Lookup::Replay(_)));
    }

    #[test]
    fn counts_what_it_does() {
        let d = Drc::new(100, Default::default());
        assert_eq!(d.begin(key(1, b"a")), Lookup::New);
        assert_eq!(d.begin(key(1, b"a")), Lookup::InProgress);
        d.finish(key(1, b"a"), Bytes::new());
        assert!(matches!(d.begin(key(1, b"a")), Lookup::Replay(_)));
        let c = d.stats.drc_counts();
        assert_eq!((c.misses, c.in_progress, c.hits), (1, 1, 1));
    }

    #[test]
    fn sized_from_memory_for_banks_call_rate() {
        assert_eq!(drc_entries_for_memory(1 << 30), 32 * 1024, "small machines get the floor");
        // 24 GiB: at least 1.1 s of 10^5 calls/s.
        assert!(drc_entries_for_memory(24 << 30) >= 110_000);
        assert_eq!(drc_entries_for_memory(u64::MAX), 4 * 1024 * 1024);
    }

    #[test]
    fn abandon_forgets() {
        let d = Drc::new(100, Default::default());
        assert_eq!(d.begin(key(5, b"a")), Lookup::New);
        d.abandon(key(5, b"a"));
        assert_eq!(d.begin(key(5, b"a")), Lookup::New);
    }
}
