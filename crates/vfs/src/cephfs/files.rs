//! Files kept open for READ, WRITE and COMMIT.
//!
//! `ceph_ll_open` asks the MDS for capabilities; a client streaming a file
//! sends thousands of READs or WRITEs for it. So files are opened once, by
//! the server (uid 0, read-write when possible: READ and WRITE check the
//! caller's permission from the attributes, as the local backend does), and
//! kept in a bounded cache split into shards. I/O happens on an `Arc` taken
//! out of the cache, so an eviction never closes a file in use.
//!
//! libcephfs reports a write-back error to the files open when it
//! happened. A file holding unstable data is therefore synced before it is
//! closed, and a failure (of that sync or of the close) changes the write
//! verifier, which makes every client resend what it has not committed.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::mount::{Errno, File, InodeRef};
use crate::verifier::WriteVerifier;

/// (inode, snapshot): what a file is cached under.
pub(crate) type Vino = (u64, u64);

/// A file opened by the server.
pub(crate) struct OpenFile {
    /// The file's inode, referenced while it is open (for its attributes).
    inode: InodeRef,
    /// `None` only while being dropped.
    file: Option<File>,
    /// Why a read-write open failed (`EROFS` in a snapshot) when we fell
    /// back to read-only; a write is answered with it.
    pub(crate) write_errno: Option<i32>,
    /// Unstable writes completed, and how many of them a finished sync
    /// covers: COMMITs with nothing new cost nothing, concurrent ones share
    /// one sync.
    written: AtomicU64,
    synced: AtomicU64,
    sync_lock: Mutex<()>,
    /// False for `async` exports, where nothing is ever synced.
    sync_on_close: bool,
    verifier: Arc<WriteVerifier>,
}

impl OpenFile {
    pub(crate) fn new(
        inode: InodeRef,
        file: File,
        write_errno: Option<i32>,
        sync_on_close: bool,
        verifier: Arc<WriteVerifier>,
    ) -> OpenFile {
        OpenFile {
            inode,
            file: Some(file),
            write_errno,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
            sync_on_close,
            verifier,
        }
    }

    pub(crate) fn inode(&self) -> &InodeRef {
        &self.inode
    }

    pub(crate) fn file(&self) -> &File {
        self.file.as_ref().expect("open until dropped")
    }

    /// Record an unstable write (after it completed).
    pub(crate) fn mark_dirty(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// Make every write completed before this call durable (`fsync`, data
    /// only unless `metadata`), unless a sync that started after them has
    /// finished already. `always`: sync even with nothing unstable known
    /// (a stable write's own data).
    pub(crate) fn sync(&self, always: bool, metadata: bool) -> Result<(), Errno> {
        let target = self.written.load(Ordering::SeqCst);
        if !always && self.synced.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let _one_at_a_time = self.sync_lock.lock();
        if !always && self.synced.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let covered = self.written.load(Ordering::SeqCst);
        self.file().fsync(!metadata)?;
        self.synced.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }

    /// How many writes have completed (for [`OpenFile::mark_synced`]).
    pub(crate) fn written_so_far(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// The first `written` writes are durable (a file-system-wide sync
    /// that started after them finished).
    pub(crate) fn mark_synced(&self, written: u64) {
        self.synced.fetch_max(written, Ordering::SeqCst);
    }

    fn dirty(&self) -> bool {
        self.written.load(Ordering::SeqCst) > self.synced.load(Ordering::SeqCst)
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else { return };
        if self.sync_on_close && self.dirty() && file.fsync(true).is_err() {
            self.verifier.regenerate();
        }
        if let Err(e) = file.close() {
            // The close reports write-back errors libcephfs kept for it.
            tracing::warn!("closing a CephFS file: {e}");
            self.verifier.regenerate();
        }
    }
}

const SHARDS: usize = 16;

/// One shard: files and when each was last used.
type Shard = Mutex<HashMap<Vino, (Arc<OpenFile>, u64)>>;

/// The cache of open files.
pub(crate) struct FileCache {
    shards: Vec<Shard>,
    per_shard: usize,
    hasher: RandomState,
    /// A clock for least-recently-used eviction.
    tick: AtomicU64,
}

impl FileCache {
    pub(crate) fn new(capacity: usize) -> FileCache {
        FileCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: (capacity / SHARDS).max(1),
            hasher: RandomState::new(),
            tick: AtomicU64::new(0),
        }
    }

    fn shard(&self, v: Vino) -> &Shard {
        &self.shards[self.hasher.hash_one(v) as usize % SHARDS]
    }

    pub(crate) fn get(&self, v: Vino) -> Option<Arc<OpenFile>> {
        let t = self.tick.fetch_add(1, Ordering::Relaxed);
        let mut s = self.shard(v).lock();
        let e = s.get_mut(&v)?;
        e.1 = t;
        Some(e.0.clone())
    }

    /// Keep `f` for `v`; if another thread opened the same file meanwhile,
    /// keep that one and return it (this one is closed).
    pub(crate) fn insert(&self, v: Vino, f: Arc<OpenFile>) -> Arc<OpenFile> {
        let t = self.tick.fetch_add(1, Ordering::Relaxed);
        let mut evicted = None;
        let kept = {
            let mut s = self.shard(v).lock();
            if let Some(e) = s.get_mut(&v) {
                e.1 = t;
                e.0.clone()
            } else {
                if s.len() >= self.per_shard {
                    let oldest = s.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| *k);
                    evicted = oldest.and_then(|k| s.remove(&k));
                }
                s.insert(v, (f.clone(), t));
                f
            }
        };
        // Closed (and synced if dirty) outside the lock, once unused.
        drop(evicted);
        kept
    }

    pub(crate) fn remove(&self, v: Vino) {
        let gone = self.shard(v).lock().remove(&v);
        drop(gone);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.lock().is_empty())
    }

    /// Every file open now.
    pub(crate) fn all(&self) -> Vec<Arc<OpenFile>> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().values().map(|(f, _)| f.clone()).collect::<Vec<_>>())
            .collect()
    }

    /// Close everything (shutdown).
    pub(crate) fn clear(&self) {
        for s in &self.shards {
            let gone: Vec<_> = s.lock().drain().collect();
            drop(gone);
        }
    }
}
