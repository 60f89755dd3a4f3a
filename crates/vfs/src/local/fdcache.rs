//! Open descriptors for READ/WRITE/COMMIT, and the write verifier.
//!
//! Opening a file by handle costs a credential switch and two system calls;
//! a client streaming a file sends thousands of READs or WRITEs for it. So
//! regular files are kept open (by the server, read-write when possible)
//! in a bounded cache, and READ/WRITE check permission in user space from
//! `fstat`. The cache is split into shards, each a small map behind its own
//! mutex that is held only to look up or insert: I/O always happens on an
//! `Arc` taken out of the map, so an eviction never closes a descriptor in
//! use, and no lock is held across a system call.
//!
//! Linux reports a write-back error once to each descriptor that was open
//! when it happened. If we closed a descriptor holding unstable data, a
//! later COMMIT on a fresh descriptor would not see the error and the
//! client would believe lost data safe. So a descriptor with unstable data
//! is synced when it leaves the cache, and a failure changes the write
//! verifier, which makes every client resend what it has not committed.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use super::sys;

pub(super) use crate::verifier::WriteVerifier;

/// Sequential UNSTABLE bytes written to one file between starts of its
/// writeback.
pub(super) const EAGER_WRITEBACK_BYTES: u64 = 4 << 20;

/// How far ahead of a sequential reader the server asks the kernel to have
/// the file in its page cache (`POSIX_FADV_WILLNEED`); a new hint goes out
/// once the reader has used up half of that lead.
pub(super) const READ_PREFETCH_BYTES: u64 = 16 << 20;

/// A regular file opened by the server.
pub(super) struct IoFile {
    pub(super) fd: OwnedFd,
    /// Why an `O_RDWR` open failed (`EROFS`, `ETXTBSY`, …) when we fell back
    /// to read-only; a write is answered with this error.
    pub(super) write_errno: Option<i32>,
    /// Unstable writes completed so far (a counter), and how many of them
    /// a finished sync is known to cover: the file holds unsynced data
    /// while `written > synced`. A COMMIT with nothing new costs no sync,
    /// and concurrent COMMITs of one file share one (group commit).
    written: AtomicU64,
    synced: AtomicU64,
    /// Bytes of the current sequential run of UNSTABLE writes whose
    /// writeback has not been started, and where the run's next write would
    /// begin (see [`IoFile::eager_writeback_due`]).
    unstarted: AtomicU64,
    run_end: AtomicU64,
    /// Where the current sequential run of READs would continue, and how
    /// far ahead of the file's start its page cache has been asked to be
    /// filled (see [`IoFile::prefetch_due`]).
    read_next: AtomicU64,
    read_ahead_until: AtomicU64,
    /// Held while a sync runs, so COMMITs that arrive meanwhile wait for it
    /// and then find their data covered instead of syncing again.
    sync_lock: Mutex<()>,
    /// False with `unsafe_async`, where nothing is ever synced.
    sync_on_close: bool,
    verifier: Arc<WriteVerifier>,
}

impl IoFile {
    pub(super) fn new(
        fd: OwnedFd,
        write_errno: Option<i32>,
        sync_on_close: bool,
        verifier: Arc<WriteVerifier>,
    ) -> Self {
        IoFile {
            fd,
            write_errno,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            unstarted: AtomicU64::new(0),
            run_end: AtomicU64::new(u64::MAX),
            read_next: AtomicU64::new(u64::MAX),
            read_ahead_until: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
            sync_on_close,
            verifier,
        }
    }

    /// Record that unstable data was written (after the write completed).
    pub(super) fn mark_dirty(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// Count a READ of `n` bytes at `offset` of a file of `size` bytes.
    /// From the second READ of a sequential run (each starting where the
    /// one before ended), returns the range past it, up to
    /// [`READ_PREFETCH_BYTES`] ahead, that the page cache should be asked
    /// to fill, whenever less than half of that lead is left.
    ///
    /// The kernel's own read-ahead follows a sequential reader too, but
    /// the server's reader is the worst case for it: one READ at a time,
    /// each copied out the moment its pages arrive. On the 2-CPU VM
    /// this was measured on, a 1 GiB cold sequential read with 1 MiB
    /// `pread`s took 0.77–1.78 s (0.4–1.6 s of it system time) and the
    /// same with a hint 16 MiB ahead 0.48–0.87 s (0.3 s system), 5
    /// alternating runs each. A READ that does not continue the run ends
    /// it; the first READ of a file (a small file read whole) asks for
    /// nothing.
    pub(super) fn prefetch_due(&self, offset: u64, n: u64, size: u64) -> Option<(u64, u64)> {
        let end = offset.saturating_add(n);
        let sequential = self.read_next.swap(end, Ordering::Relaxed) == offset;
        if !sequential {
            self.read_ahead_until.store(0, Ordering::Relaxed);
            return None;
        }
        let target = end.saturating_add(READ_PREFETCH_BYTES).min(size);
        let until = self.read_ahead_until.load(Ordering::Relaxed);
        if n == 0 || until >= end.saturating_add(READ_PREFETCH_BYTES / 2).min(size) {
            return None;
        }
        let from = until.max(end);
        if from >= target {
            return None;
        }
        self.read_ahead_until.store(target, Ordering::Relaxed);
        Some((from, target - from))
    }

    /// Count an UNSTABLE write of `n` bytes at `offset`. Once a sequential
    /// run of them (each starting where the one before ended) holds
    /// [`EAGER_WRITEBACK_BYTES`] not yet sent to the disk, returns that
    /// range, whose writeback the caller then starts. Linux alone starts
    /// writing dirty pages only past `dirty_background_ratio` of memory
    /// (gigabytes here), so a client copying a large file would find all of
    /// it still to write at its COMMIT and wait for the whole disk write
    /// then; started early, the disk writes while the network transfers (the
    /// server side of Rago et al.'s eager writeback), and the COMMIT finds
    /// little left. Scattered writes never start anything: sending a few
    /// random pages at a time would only cost the server CPU and the disk
    /// seeks the kernel's own writeback batches better.
    pub(super) fn eager_writeback_due(&self, offset: u64, n: usize) -> Option<(u64, u64)> {
        let end = offset + n as u64;
        let sequential = self.run_end.swap(end, Ordering::Relaxed) == offset;
        let total = if sequential {
            self.unstarted.fetch_add(n as u64, Ordering::Relaxed) + n as u64
        } else {
            self.unstarted.store(n as u64, Ordering::Relaxed);
            n as u64
        };
        if total < EAGER_WRITEBACK_BYTES {
            return None;
        }
        let taken = self.unstarted.swap(0, Ordering::Relaxed);
        (taken >= EAGER_WRITEBACK_BYTES).then(|| (end.saturating_sub(taken), taken))
    }

    /// Whether unstable data written so far may not be on stable storage.
    fn dirty(&self) -> bool {
        self.written.load(Ordering::SeqCst) > self.synced.load(Ordering::SeqCst)
    }

    /// Make every write completed before this call durable with `sync`
    /// (`fdatasync` or `fsync`), unless a sync that started after them has
    /// already finished. `always`: sync even if nothing unstable is known
    /// (a FILE_SYNC write's own data and metadata). A failure is returned
    /// and the data stays counted as unsynced.
    pub(super) fn sync_with(
        &self,
        always: bool,
        sync: impl FnOnce(&OwnedFd) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let target = self.written.load(Ordering::SeqCst);
        if !always && self.synced.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let _one_at_a_time = self.sync_lock.lock();
        if !always && self.synced.load(Ordering::SeqCst) >= target {
            // A sync that started after our writes finished while we waited.
            return Ok(());
        }
        // Everything written before this point is covered by this sync.
        let covered = self.written.load(Ordering::SeqCst);
        sync(&self.fd)?;
        self.synced.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }

    /// How many writes have completed (to pass to `mark_synced` after a
    /// sync that started after them).
    pub(super) fn written_so_far(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// The first `written` writes are on stable storage (`syncfs` covered
    /// them).
    pub(super) fn mark_synced(&self, written: u64) {
        self.synced.fetch_max(written, Ordering::SeqCst);
    }
}

impl Drop for IoFile {
    fn drop(&mut self) {
        if !self.sync_on_close || !self.dirty() {
            return;
        }
        // A removed file's data is gone anyway; do not pay for a sync.
        match sys::fstat(self.fd.as_fd()) {
            Ok(st) if st.st_nlink == 0 => return,
            _ => {}
        }
        if sys::fdatasync(self.fd.as_fd()).is_err() {
            self.verifier.regenerate();
        }
    }
}

struct Slot<V> {
    file: Arc<V>,
    /// Value of the cache's clock at the last use, for least-recently-used eviction.
    used_at: u64,
}

/// One lock's worth of the cache.
type Shard<V> = Mutex<HashMap<Bytes, Slot<V>>>;

/// Take the least recently used eighth (at least one) of a full shard out of
/// it. Finding the oldest costs a pass over the shard; taking an eighth per
/// pass makes that a constant per insert instead of a pass each (a shard
/// holds hundreds, and an untar of small files inserts at every create).
fn evict_oldest<V>(map: &mut HashMap<Bytes, Slot<V>>) -> Vec<Slot<V>> {
    let n = (map.len() / 8).max(1);
    let mut ages: Vec<u64> = map.values().map(|s| s.used_at).collect();
    if ages.is_empty() {
        return Vec::new();
    }
    let (_, cutoff, _) = ages.select_nth_unstable(n - 1);
    let cutoff = *cutoff;
    let old: Vec<Bytes> =
        map.iter().filter(|(_, s)| s.used_at <= cutoff).map(|(k, _)| k.clone()).take(n).collect();
    old.iter().filter_map(|k| map.remove(k)).collect()
}

/// A bounded, sharded map from handle bytes to open files (`IoFile`), or
/// to any other per-handle descriptor (the `O_PATH` object cache).
pub(super) struct FdCache<V = IoFile> {
    shards: Box<[Shard<V>]>,
    per_shard_max: usize,
    clock: AtomicU64,
    hasher: RandomState,
}

const SHARDS: usize = 16;

impl<V> FdCache<V> {
    /// A cache of at most about `capacity` descriptors.
    pub(super) fn new(capacity: usize) -> Self {
        let per_shard_max = capacity.div_ceil(SHARDS).max(1);
        FdCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::with_capacity(per_shard_max + 1))).collect(),
            per_shard_max,
            clock: AtomicU64::new(0),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, key: &[u8]) -> &Shard<V> {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<Arc<V>> {
        let now = self.tick();
        let mut map = self.shard(key).lock();
        let slot = map.get_mut(key)?;
        slot.used_at = now;
        Some(slot.file.clone())
    }

    /// Insert `file` unless another thread inserted one for `key` first;
    /// returns the one in the cache. Evicts the least recently used entry of
    /// the shard when it is full.
    pub(super) fn insert(&self, key: &Bytes, file: Arc<V>) -> Arc<V> {
        let now = self.tick();
        // Dropped after the lock is released: dropping may sync a file.
        let evicted;
        let winner;
        {
            let mut map = self.shard(key).lock();
            if let Some(slot) = map.get_mut(&key[..]) {
                slot.used_at = now;
                return slot.file.clone();
            }
            evicted = if map.len() >= self.per_shard_max { evict_oldest(&mut map) } else { Vec::new() };
            winner = file.clone();
            map.insert(key.clone(), Slot { file, used_at: now });
        }
        drop(evicted);
        winner
    }

    /// Forget `key` (its file was removed or found stale).
    pub(super) fn remove(&self, key: &[u8]) {
        let evicted = self.shard(key).lock().remove(key);
        drop(evicted);
    }

    /// Every cached file, for `sync_all`.
    pub(super) fn all(&self) -> Vec<Arc<V>> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().map(|v| v.file.clone()).collect::<Vec<_>>())
            .collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(v: &Arc<WriteVerifier>) -> Arc<IoFile> {
        let fd = std::fs::File::open("/dev/null").unwrap();
        Arc::new(IoFile::new(fd.into(), None, true, v.clone()))
    }

    #[test]
    fn bounded_and_least_recently_used_goes_first() {
        let v = Arc::new(WriteVerifier::new());
        let c = FdCache::new(SHARDS * 2);
        let keys: Vec<Bytes> = (0..200u32).map(|i| Bytes::from(i.to_be_bytes().to_vec())).collect();
        for k in &keys {
            c.insert(k, file(&v));
            // Keep key 0 hot: it must survive every eviction in its shard.
            assert!(c.get(&keys[0]).is_some());
        }
        assert!(c.len() <= SHARDS * 2);
        assert!(c.get(&keys[0]).is_some());
    }

    #[test]
    fn a_full_shard_gives_up_its_oldest_eighth_and_keeps_the_rest() {
        let v = Arc::new(WriteVerifier::new());
        let per_shard = 64;
        let c = FdCache::new(SHARDS * per_shard);
        let keys: Vec<Bytes> = (0..10_000u32).map(|i| Bytes::from(i.to_be_bytes().to_vec())).collect();
        for k in &keys {
            c.insert(k, file(&v));
            assert!(c.get(&keys[0]).is_some(), "the hot key stays");
        }
        let len = c.len();
        assert!(len <= SHARDS * per_shard, "bounded: {len}");
        assert!(len >= SHARDS * (per_shard - per_shard / 8), "an eviction takes an eighth, not more: {len}");
        // The newest survive: the last key inserted into each shard is still there.
        assert!(c.get(keys.last().unwrap()).is_some());
    }

    #[test]
    fn eager_writeback_starts_once_per_threshold_of_a_sequential_run() {
        let f = file(&Arc::new(WriteVerifier::new()));
        let mib = 1u64 << 20;
        // 1 MiB sequential writes: the 4th, 8th and 12th start writeback of the 4 MiB before.
        let due: Vec<Option<(u64, u64)>> =
            (0..12).map(|i| f.eager_writeback_due(i * mib, mib as usize)).collect();
        let starts: Vec<(usize, (u64, u64))> =
            due.iter().enumerate().filter_map(|(i, d)| d.map(|r| (i, r))).collect();
        assert_eq!(starts, [(3, (0, 4 * mib)), (7, (4 * mib, 4 * mib)), (11, (8 * mib, 4 * mib))]);
        // Random 8 KiB writes never do, however many.
        let scattered = file(&Arc::new(WriteVerifier::new()));
        assert!(
            (0..4096u64).all(|i| scattered.eager_writeback_due((i * 7919 % 4096) * 16384, 8192).is_none())
        );
        // A jump starts a new run.
        let jumpy = file(&Arc::new(WriteVerifier::new()));
        for i in 0..3 {
            assert!(jumpy.eager_writeback_due(i * mib, mib as usize).is_none());
        }
        assert!(jumpy.eager_writeback_due(100 * mib, mib as usize).is_none(), "not contiguous: a new run");
    }

    #[test]
    fn a_sequential_reader_is_kept_16_mib_ahead_and_nothing_else_asks_for_read_ahead() {
        let f = file(&Arc::new(WriteVerifier::new()));
        let mib = 1u64 << 20;
        let size = 64 * mib;
        let due: Vec<(u64, (u64, u64))> =
            (0..40).filter_map(|i| f.prefetch_due(i * mib, mib, size).map(|r| (i, r))).collect();
        // The first READ asks nothing; the second asks for the 16 MiB past it; then, each
        // time the lead falls under 8 MiB, for what brings it back to 16 MiB.
        assert_eq!(
            due,
            [
                (1, (2 * mib, 16 * mib)),
                (10, (18 * mib, 9 * mib)),
                (19, (27 * mib, 9 * mib)),
                (28, (36 * mib, 9 * mib)),
                (37, (45 * mib, 9 * mib)),
            ]
        );
        let tail: Vec<(u64, u64)> = (40..64).filter_map(|i| f.prefetch_due(i * mib, mib, size)).collect();
        assert!(tail.iter().all(|&(at, len)| at + len <= size), "{tail:?}");
        // A small file read whole in one READ asks for nothing.
        let small = file(&Arc::new(WriteVerifier::new()));
        assert!(small.prefetch_due(0, 5000, 5000).is_none());
        // Random 64 KiB READs never do, however many.
        let random = file(&Arc::new(WriteVerifier::new()));
        assert!(
            (0..4096u64).all(|i| random.prefetch_due((i * 7919 % 4096) * 65536, 65536, 1 << 30).is_none())
        );
        // A jump ends the run; the new run asks again from its second READ.
        let jumpy = file(&Arc::new(WriteVerifier::new()));
        assert!(jumpy.prefetch_due(0, mib, 1 << 30).is_none());
        assert!(jumpy.prefetch_due(mib, mib, 1 << 30).is_some());
        assert!(jumpy.prefetch_due(500 * mib, mib, 1 << 30).is_none());
        assert_eq!(jumpy.prefetch_due(501 * mib, mib, 1 << 30), Some((502 * mib, 16 * mib)));
    }

    #[test]
    fn a_racing_insert_keeps_the_first() {
        let v = Arc::new(WriteVerifier::new());
        let c = FdCache::new(64);
        let k = Bytes::from_static(b"k");
        let a = c.insert(&k, file(&v));
        let b = c.insert(&k, file(&v));
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_commit_syncs_only_what_no_finished_sync_covers() {
        let v = Arc::new(WriteVerifier::new());
        let f = file(&v);
        let syncs = std::cell::Cell::new(0);
        let count = |_: &OwnedFd| {
            syncs.set(syncs.get() + 1);
            Ok(())
        };
        f.sync_with(false, count).unwrap();
        assert_eq!(syncs.get(), 0, "nothing written: no sync");
        f.mark_dirty();
        f.sync_with(false, count).unwrap();
        f.sync_with(false, count).unwrap();
        assert_eq!(syncs.get(), 1, "the second COMMIT finds its data covered");
        f.mark_dirty();
        assert!(f.sync_with(false, |_| Err(std::io::Error::from_raw_os_error(libc::EIO))).is_err());
        f.sync_with(false, count).unwrap();
        assert_eq!(syncs.get(), 2, "after a failed sync the data is still unsynced");
        f.sync_with(true, count).unwrap();
        assert_eq!(syncs.get(), 3, "FILE_SYNC always syncs");
    }

    #[test]
    fn commits_during_a_sync_wait_for_it_instead_of_syncing_again() {
        let v = Arc::new(WriteVerifier::new());
        let f = file(&v);
        f.mark_dirty();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let syncs = AtomicU64::new(0);
        let (f, syncs) = (&f, &syncs);
        std::thread::scope(|s| {
            s.spawn(move || {
                f.sync_with(false, |_| {
                    syncs.fetch_add(1, Ordering::SeqCst);
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                })
                .unwrap()
            });
            started_rx.recv().unwrap();
            // Its write was covered by the sync in progress: it waits, then returns.
            let waiter = s.spawn(move || {
                f.sync_with(false, |_| {
                    syncs.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            });
            release_tx.send(()).unwrap();
            waiter.join().unwrap().unwrap();
        });
        assert_eq!(syncs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn regenerate_changes_the_verifier() {
        let v = WriteVerifier::new();
        let before = v.get();
        v.regenerate();
        assert_ne!(before, v.get());
    }
}
