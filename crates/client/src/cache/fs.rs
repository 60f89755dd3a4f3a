//! [`CachedFs`]: the inode-based file API (what FUSE and the tools call),
//! and its metadata operations. Data I/O is in `io`, directories in `dir`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use eagernfs_proto::nfs3::*;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::ahead::AheadShared;
use super::budget::ByteBudget;
use super::config::{CacheConfig, CHUNK_BYTES};
use super::dirent::DirEntry;
use super::disk::{file_key, DiskCache};
use super::inode::{
    merge_later, AttrClock, Chunk, Dentry, Inode, InodeState, InodeTable, SillyName, DIR_ENTRIES_MAX,
    ROOT_INO,
};
use super::{FsError, FsResult};
use crate::ops::{Cred, FileOpened, NfsError, NfsOps, OpenAccess, OpenWant};
use crate::options::{LookupCache, MountOptions};

/// Attributes of an inode as FUSE needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The inode number (1 for the root; otherwise the fileid unless it
    /// had to be remapped).
    pub ino: u64,
    /// The attributes. `size` includes data written here and not yet on
    /// the server; `fileid` is the server's number, use `ino` instead.
    pub attr: Fattr3,
    /// How long the kernel may cache these attributes (and, for a lookup,
    /// the name): what is left of our own attribute-cache period.
    pub ttl: Duration,
    /// The generation a FUSE file handle for this inode carries (derived
    /// from the NFS file handle; never 0).
    pub generation: u32,
}

/// An open file, as the kernel is told about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The handle id for read/write/flush/release.
    pub fh: u64,
    /// Nothing but our own kernel changed the file since the kernel last
    /// opened it: it may keep the pages it cached then (FUSE's
    /// `FOPEN_KEEP_CACHE`).
    pub keep_cache: bool,
}

/// Filesystem statistics (FSSTAT), as `statfs` needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Total bytes.
    pub total_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Free bytes available to the caller.
    pub avail_bytes: u64,
    /// Total file slots.
    pub total_files: u64,
    /// Free file slots.
    pub free_files: u64,
    /// Free file slots available to the caller.
    pub avail_files: u64,
    /// Preferred I/O size (our wsize), what `f_bsize` should say.
    pub block_bytes: u32,
    /// Longest name.
    pub name_max: u32,
}

/// Counters describing what the cache did, for tests and statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// write() calls that had to wait for room in the dirty budget.
    pub writes_waited: u64,
    /// Of those, how many needed more than one completed WRITE to get in.
    pub writes_waited_several_releases: u64,
    /// Of those, how many were let in by a COMMIT completing.
    pub writes_waited_on_commit: u64,
    /// Times a flusher held back a WRITE because the mount's unstable
    /// bound was reached (it waits for a COMMIT to free room).
    pub flusher_stalls_on_unstable: u64,
    /// Most dirty + in-flight bytes ever held.
    pub dirty_bytes_peak: u64,
    /// Most unstable bytes ever held.
    pub unstable_bytes_peak: u64,
    /// Bytes sent again because a COMMIT returned a different verifier.
    pub resent_bytes: u64,
    /// Chunks fetched by read-ahead.
    pub readahead_chunks: u64,
    /// Chunks dropped behind a sequential reader (`CacheConfig::drop_behind`).
    pub dropped_behind_chunks: u64,
    /// Chunks served from the disk cache.
    pub disk_hits: u64,
    /// Attribute lookups answered from the cache, and those that asked the server.
    pub attr_hits: u64,
    pub attr_misses: u64,
    /// Name lookups answered from the cache (positive or negative), and those sent.
    pub lookup_hits: u64,
    pub lookup_misses: u64,
    /// Chunks a read found in memory, and those it had to fetch (disk or server).
    pub read_chunk_hits: u64,
    pub read_chunk_misses: u64,
    /// Opens answered with no call because a delegation vouched for the file.
    pub delegated_opens: u64,
    /// Closes that returned before their write-back, the file being held
    /// under a write delegation (`deleg_close=writeback`).
    pub closes_written_back_later: u64,
    /// Small files read ahead of a program opening a directory's files in
    /// order, each under a delegation (see `ahead`), and the round trips
    /// that read them.
    pub files_read_ahead: u64,
    pub files_read_ahead_calls: u64,
    /// Directory listings read ahead of a program walking a tree, each
    /// under a delegation of its directory (see `dir`), and of those the
    /// ones a program then read with no call.
    pub listings_read_ahead: u64,
    pub listings_read_ahead_used: u64,
    /// Unlinks and rmdirs that returned before their REMOVE was answered
    /// (`dirops=async`), and of those the REMOVEs that failed.
    pub removes_later: u64,
    pub removes_later_failed: u64,
    /// Creates that returned before the server made the file
    /// (`dirops=async`), and of those the ones the server then refused.
    pub creates_early: u64,
    pub creates_early_failed: u64,
    /// Of the creates answered early, the files made in one call with
    /// their data, times and close (`NfsOps::create_written`).
    pub creates_whole: u64,
    /// chmods held for the write-back under a write delegation
    /// (`deleg_chmod=hold`).
    pub modes_held: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) writes_waited: AtomicU64,
    pub(crate) writes_waited_several_releases: AtomicU64,
    pub(crate) writes_waited_on_commit: AtomicU64,
    pub(crate) flusher_stalls_on_unstable: AtomicU64,
    pub(crate) unstable_bytes_peak: AtomicU64,
    pub(crate) resent_bytes: AtomicU64,
    pub(crate) readahead_chunks: AtomicU64,
    pub(crate) dropped_behind_chunks: AtomicU64,
    pub(crate) disk_hits: AtomicU64,
    pub(crate) attr_hits: AtomicU64,
    pub(crate) attr_misses: AtomicU64,
    pub(crate) lookup_hits: AtomicU64,
    pub(crate) lookup_misses: AtomicU64,
    pub(crate) read_chunk_hits: AtomicU64,
    pub(crate) read_chunk_misses: AtomicU64,
    pub(crate) delegated_opens: AtomicU64,
    pub(crate) closes_written_back_later: AtomicU64,
    pub(crate) files_read_ahead: AtomicU64,
    pub(crate) files_read_ahead_calls: AtomicU64,
    pub(crate) listings_read_ahead: AtomicU64,
    pub(crate) listings_read_ahead_used: AtomicU64,
    pub(crate) removes_later: AtomicU64,
    pub(crate) removes_later_failed: AtomicU64,
    pub(crate) creates_early: AtomicU64,
    pub(crate) creates_early_failed: AtomicU64,
    pub(crate) creates_whole: AtomicU64,
    pub(crate) modes_held: AtomicU64,
}

/// An open file.
pub(crate) struct OpenFile {
    pub(crate) inode: Arc<Inode>,
    /// The opener's identity, used for this handle's I/O.
    pub(crate) cred: Cred,
    /// Write-back errors this handle has already reported from write or
    /// close (errseq).
    pub(crate) err_seen: AtomicU64,
    /// The same for fsync, which keeps its own cursor as Linux's does: an
    /// open file is shared by every process that inherited it, and a
    /// child's close(2) (exec closes inherited descriptors) must not take
    /// the error the parent's fsync(2) is waiting to report.
    pub(crate) fsync_err_seen: AtomicU64,
    /// The cache, told when this handle goes away (a silly-renamed file
    /// is REMOVEd at its last close). Weak: a handle must not keep the
    /// cache alive.
    pub(crate) owner: Weak<dyn LastClose>,
    /// Writes through this handle are synchronous (`O_SYNC`/`O_DSYNC`,
    /// `O_DIRECT`, or a `sync` mount).
    pub(crate) sync: bool,
    /// Opened for writing (counted in the file's `write_opens`).
    pub(crate) writable: bool,
    /// Opened `O_DIRECT`: reads go to the server, not through the data
    /// cache, and writes are on the server when they return (Linux's NFS
    /// client sends them at once and commits them before returning).
    pub(crate) direct: bool,
    /// The access it was opened for.
    pub(crate) access: OpenAccess,
    /// It holds an open on the server (NFSv4), counted in the inode's
    /// `server_opens`, to end at its last close (or sooner, with its
    /// write-back: `NfsOps::write_close`).
    pub(crate) held: AtomicBool,
    /// The program has closed it (its release has begun), counted in the
    /// inode's `closing`.
    pub(crate) closing: AtomicBool,
}

impl OpenFile {
    /// The program has closed it: from now on an unlink does not count it
    /// as open. Once per handle.
    pub(crate) fn begin_closing(&self) {
        if !self.closing.swap(true, Ordering::Relaxed) {
            self.inode.state.lock().closing += 1;
        }
    }

    /// Count it out of its inode's `open_count` (and `closing`): the
    /// caller holds the inode's state.
    pub(crate) fn count_out(&self, st: &mut super::inode::InodeState) {
        st.open_count -= 1;
        if self.closing.swap(false, Ordering::Relaxed) {
            st.closing -= 1;
        }
    }

    /// Whether it holds an open on the server now.
    pub(crate) fn held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// Its open on the server is over (or about to be ended by the
    /// caller): true if it held one.
    pub(crate) fn end_server_open(&self) -> bool {
        let was = self.held.swap(false, Ordering::Relaxed);
        if was {
            let mut st = self.inode.state.lock();
            st.server_opens = st.server_opens.saturating_sub(1);
        }
        was
    }

    /// It holds an open on the server from now on.
    pub(crate) fn hold_server_open(&self, preserve_unlinked: bool) -> bool {
        let was = self.held.swap(true, Ordering::Relaxed);
        if !was {
            let mut st = self.inode.state.lock();
            st.server_opens += 1;
            st.preserve_unlinked |= preserve_unlinked;
        }
        !was
    }
}

/// An open directory.
pub(crate) struct DirHandle {
    pub(crate) inode: Arc<Inode>,
    pub(crate) cred: Cred,
    /// The server's cookie verifier from the last page.
    pub(crate) verf: Cookieverf3,
    /// The last page fetched, and the offset it was fetched after.
    pub(crate) page: Vec<DirEntry>,
    pub(crate) page_after: u64,
    /// The last page reached the end of the directory.
    pub(crate) eof: bool,
}

/// What an [`OpenFile`] needs from the cache when it goes away; a trait
/// so the handle need not be generic over the client.
pub(crate) trait LastClose: Send + Sync {
    /// `inode` has no open handle left and was unlinked while open:
    /// REMOVE its hidden name in the background.
    fn remove_silly_later(self: Arc<Self>, inode: Arc<Inode>, silly: SillyName);
}

impl Drop for OpenFile {
    /// `release` drops the handle's last reference after it has written
    /// back, committed and counted the handle out of `open_count`, so this
    /// is where the last close of an unlinked file is seen. (A read still
    /// in flight on the handle holds a reference and delays this to its end.)
    fn drop(&mut self) {
        if self.held() {
            // `release` ends it; a handle dropped otherwise leaves the
            // server's open until the client goes.
            tracing::debug!("an open file handle went without closing its open on the server");
            self.end_server_open();
        }
        let silly = {
            let mut st = self.inode.state.lock();
            if st.open_count == 0 {
                st.unlinked_open = false;
            }
            if self.sync {
                st.file.sync_opens -= 1;
            }
            if self.writable {
                st.file.write_opens -= 1;
            }
            if st.open_count == 0 {
                st.silly.take()
            } else {
                None
            }
        };
        if let (Some(silly), Some(owner)) = (silly, self.owner.upgrade()) {
            owner.remove_silly_later(self.inode.clone(), silly);
        }
    }
}

/// State shared by the API object and the background tasks.
pub(crate) struct Shared<C> {
    pub(crate) client: C,
    pub(crate) cfg: CacheConfig,
    pub(crate) inodes: InodeTable,
    pub(crate) handles: Mutex<HashMap<u64, Arc<OpenFile>>>,
    pub(crate) dir_handles: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<DirHandle>>>>,
    pub(crate) next_handle: AtomicU64,
    /// Dirty + in-flight bytes of the mount: writers wait on it.
    pub(crate) budget: ByteBudget,
    /// Bytes in WRITEs not yet answered.
    pub(crate) inflight_total: AtomicU64,
    /// Bytes acknowledged UNSTABLE and not yet committed.
    pub(crate) unstable_total: AtomicU64,
    /// Files with write-back state, so pressure can reach all of them.
    pub(crate) dirty_inodes: Mutex<HashMap<u64, Arc<Inode>>>,
    /// Flushers parked on the unstable bound, woken when room appears.
    pub(crate) stalled: Mutex<Vec<Arc<Inode>>>,
    /// Clean bytes cached in memory (kept by the inodes' chunk methods).
    pub(crate) mem_bytes: Arc<AtomicU64>,
    /// Chunks in insertion order, for eviction (FIFO: a streaming reader's
    /// old chunks go first).
    pub(crate) mem_fifo: Mutex<VecDeque<(u64, u64)>>,
    pub(crate) disk: Option<Arc<DiskCache>>,
    /// Cleared when the server answers READDIRPLUS with NOTSUPP.
    pub(crate) readdirplus: AtomicBool,
    /// Cold opens followed for reading files ahead (`ahead`).
    pub(crate) files_ahead: Arc<AheadShared>,
    /// Wakes the reads of directories whose listings were being read ahead
    /// (`InodeState::listing_ahead`).
    pub(crate) listings_ahead_done: tokio::sync::Notify,
    /// Listings read ahead in a row that came back with no delegation: past
    /// a few, none is read ahead until the server grants a delegation of a
    /// directory again (see `dir`).
    pub(crate) listings_refused: AtomicU32,
    pub(crate) counters: Counters,
    /// Makes hidden names for files unlinked while open unique.
    pub(crate) silly_counter: AtomicU32,
    /// Background tasks whose work must not be lost (deferred REMOVEs of
    /// hidden names, read-ahead fetches and their disk-cache stores), so
    /// unmount (and a test) can wait for them.
    pub(crate) background: BackgroundTasks,
    /// Orders attribute replies by when their calls were sent.
    pub(crate) clock: Arc<AttrClock>,
    /// Refuse every change with EROFS: `ro` at mount, then whatever a
    /// remount last said.
    pub(crate) read_only: AtomicBool,
    /// The runtime the cache was made on, for work that must run on after
    /// a call made from a thread of no runtime: the mount answers `release`
    /// on its FUSE reader thread, and a last close there must still REMOVE
    /// the hidden name of an unlinked file.
    pub(crate) runtime: tokio::runtime::Handle,
    /// The layer above answers recalls by writing back first
    /// (`CachedFs::set_recalls_write_back`): only then may a close under a
    /// write delegation leave its write-back for later.
    pub(crate) recalls_write_back: AtomicBool,
    /// Wakes whoever waits for a directory's background REMOVEs (`dirops`).
    pub(crate) dirops_done: Notify,
    /// Bounds the background REMOVEs in flight (`dirops`).
    pub(crate) dirops_slots: Arc<tokio::sync::Semaphore>,
    /// The first background REMOVE failure not yet reported (`dirops`).
    pub(crate) dirops_error: Mutex<Option<NfsError>>,
    /// Files created early, not yet all done on the server (`early`).
    pub(crate) early: super::early_table::EarlyFiles,
}

/// Counts tasks that run on after the call that started them returned,
/// so that [`CachedFs::sync_all`] (unmount) can wait for them: a process
/// that exits with a read-ahead still storing chunks loses them from the
/// disk cache, and one with a REMOVE pending leaves a hidden file behind.
pub(crate) struct BackgroundTasks {
    running: Arc<watch::Sender<usize>>,
}

/// One counted task: the count goes down when this is dropped, whether the
/// task finished or was cancelled.
pub(crate) struct BackgroundGuard {
    running: Arc<watch::Sender<usize>>,
}

impl BackgroundTasks {
    fn new() -> Self {
        BackgroundTasks { running: Arc::new(watch::Sender::new(0)) }
    }

    /// Count a task from now: call it before spawning, so a waiter that
    /// starts once the spawning call has returned cannot miss the task,
    /// and move the guard into the task.
    pub(crate) fn start(&self) -> BackgroundGuard {
        self.running.send_modify(|n| *n += 1);
        BackgroundGuard { running: self.running.clone() }
    }

    /// Wait until no counted task is running.
    pub(crate) async fn idle(&self) {
        let mut rx = self.running.subscribe();
        // The sender lives in `self`, which we borrow: this cannot fail.
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl Drop for BackgroundGuard {
    fn drop(&mut self) {
        self.running.send_modify(|n| *n -= 1);
    }
}

/// The caching file layer over an [`NfsOps`] client: inode numbers, open
/// file handles and directory handles as FUSE uses them, with attribute,
/// lookup, data and disk caches and UNSTABLE write-back. Cloning is cheap
/// and shares everything; all methods take `&self` and may run at once.
pub struct CachedFs<C: NfsOps> {
    shared: Arc<Shared<C>>,
}

impl<C: NfsOps> Clone for CachedFs<C> {
    fn clone(&self) -> Self {
        CachedFs { shared: self.shared.clone() }
    }
}

/// `open` flags that matter here.
fn wants_write(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY
}

fn check_name(name: &[u8]) -> FsResult<()> {
    if name.len() > NFS3_NAME_MAX {
        return Err(NfsError::Nfs(Nfsstat3::Nametoolong).into());
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Invalid("bad file name"));
    }
    Ok(())
}

/// Hidden names tried per silly rename before giving up: each is checked
/// with a LOOKUP, and a directory full of our hidden names is broken.
const SILLY_TRIES_MAX: u32 = 64;

fn sattr_mode(mode: u32) -> Sattr3 {
    Sattr3 { mode: Some(mode & 0o7777), ..Sattr3::default() }
}

/// Files at most this large (as last seen) are read whole with their open
/// when opened for reading (`OpenWant::read_whole`): most of a source
/// tree, in one round trip each.
pub(crate) const READ_AT_OPEN_BYTES_MAX: u64 = 256 * 1024;

/// The ACCESS3 bits an access(2) `mask` needs on `inode`, and those to ask
/// about: everything access(2) can ask, as Linux does, so the one answer
/// serves this caller's later masks too.
pub(crate) fn access_bits(inode: &Inode, mask: i32) -> (u32, u32) {
    let write_bits = if inode.is_dir() {
        ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE
    } else {
        ACCESS3_MODIFY | ACCESS3_EXTEND
    };
    let exec_bit = if inode.is_dir() { ACCESS3_LOOKUP } else { ACCESS3_EXECUTE };
    let mut want = 0;
    if mask & libc::R_OK != 0 {
        want |= ACCESS3_READ;
    }
    if mask & libc::W_OK != 0 {
        want |= write_bits;
    }
    if mask & libc::X_OK != 0 {
        want |= exec_bit;
    }
    (want, ACCESS3_READ | write_bits | exec_bit)
}

/// Cache `data`, a file's bytes from offset 0 as one READ gave them
/// (`eof`: they reach its end), as chunks; returns those inserted.
pub(crate) fn cache_whole(st: &mut InodeState, ino: u64, data: &Bytes, eof: bool) -> Vec<(u64, u64)> {
    let c = CHUNK_BYTES as usize;
    let mut inserted = Vec::new();
    for k in 0..data.len().div_ceil(c).max(1) {
        let lo = k * c;
        let hi = (lo + c).min(data.len());
        let chunk = Chunk::of_read(data, lo, hi - lo, eof && hi == data.len());
        if chunk.complete(CHUNK_BYTES) {
            st.file.insert_chunk(k as u64, chunk);
            inserted.push((ino, k as u64));
        }
    }
    inserted
}

impl<C: NfsOps> CachedFs<C> {
    /// Set up the cache for a mounted client: FSINFO decides rsize/wsize,
    /// the root's attributes are fetched, and the disk cache (if
    /// `cache=DIR`) is opened.
    pub async fn new(client: C, opts: &MountOptions) -> FsResult<Self> {
        Self::new_adjusted(client, opts, |_| {}).await
    }

    /// [`CachedFs::new`], with `adjust` changing the settings the options
    /// gave (a FUSE mount sets what only holds in front of the kernel's
    /// page cache).
    pub async fn new_adjusted(
        client: C,
        opts: &MountOptions,
        adjust: impl FnOnce(&mut CacheConfig),
    ) -> FsResult<Self> {
        let cred = Cred::current_process();
        let root = client.root();
        let info = client.fsinfo(&cred, &root).await.ok();
        let mut cfg = CacheConfig::from_options(opts, info.as_ref());
        adjust(&mut cfg);
        Self::with_config(client, cfg).await
    }

    /// Set up the cache with explicit settings.
    pub async fn with_config(client: C, cfg: CacheConfig) -> FsResult<Self> {
        let root = client.root();
        let attr = client.getattr(&Cred::current_process(), &root).await?;
        let disk = match &cfg.disk_cache_dir {
            Some(dir) => {
                let (dir, max) = (dir.clone(), cfg.disk_cache_bytes_max);
                let opened = tokio::task::spawn_blocking(move || DiskCache::open(&dir, max))
                    .await
                    .map_err(|e| FsError::Io(e.to_string()))?;
                Some(Arc::new(opened.map_err(|e| FsError::Io(format!("cache directory: {e}")))?))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            budget: ByteBudget::new(cfg.dirty_bytes_max),
            client,
            inodes: InodeTable::new(),
            handles: Mutex::new(HashMap::new()),
            dir_handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            inflight_total: AtomicU64::new(0),
            unstable_total: AtomicU64::new(0),
            dirty_inodes: Mutex::new(HashMap::new()),
            stalled: Mutex::new(Vec::new()),
            mem_bytes: Arc::new(AtomicU64::new(0)),
            mem_fifo: Mutex::new(VecDeque::new()),
            disk,
            readdirplus: AtomicBool::new(true),
            files_ahead: Arc::new(AheadShared::default()),
            listings_ahead_done: tokio::sync::Notify::new(),
            listings_refused: AtomicU32::new(0),
            counters: Counters::default(),
            silly_counter: AtomicU32::new(0),
            background: BackgroundTasks::new(),
            clock: Arc::new(AttrClock::default()),
            read_only: AtomicBool::new(cfg.read_only),
            runtime: tokio::runtime::Handle::current(),
            recalls_write_back: AtomicBool::new(false),
            dirops_done: Notify::new(),
            dirops_slots: Arc::new(tokio::sync::Semaphore::new(super::config::REMOVES_IN_FLIGHT_MAX)),
            early: super::early_table::EarlyFiles::default(),
            dirops_error: Mutex::new(None),
            cfg,
        });
        let (root_inode, _) = shared.intern_inode(&root, &attr, true);
        root_inode.state.lock().nlookup = 1;
        if let Some(expire) = shared.cfg.dirty_expire {
            tokio::spawn(expire_dirty_data(Arc::downgrade(&shared), expire));
        }
        Ok(CachedFs { shared })
    }

    pub(crate) fn from_shared(shared: Arc<Shared<C>>) -> Self {
        CachedFs { shared }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<C>> {
        &self.shared
    }

    /// The settings in use.
    pub fn config(&self) -> &CacheConfig {
        &self.shared.cfg
    }

    /// Make the mount read-only or writable again (a remount). Going
    /// read-only first writes back and commits everything dirty, so
    /// nothing is left that could no longer be sent.
    pub async fn set_read_only(&self, read_only: bool) -> FsResult<()> {
        if read_only {
            self.sync_all().await?;
        }
        self.shared.read_only.store(read_only, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the mount refuses changes now.
    pub fn read_only(&self) -> bool {
        self.shared.read_only.load(Ordering::Relaxed)
    }

    /// The underlying client.
    pub fn client(&self) -> &C {
        &self.shared.client
    }

    /// Bytes written and not yet acknowledged (dirty or in flight), and
    /// bytes acknowledged UNSTABLE and not yet committed, now.
    pub fn write_back_bytes(&self) -> (u64, u64) {
        (self.shared.budget.used(), self.shared.unstable_total.load(Ordering::Relaxed))
    }

    /// Clean file data cached in memory, in bytes.
    pub fn cached_bytes(&self) -> u64 {
        self.shared.mem_bytes.load(Ordering::Relaxed)
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        let c = &self.shared.counters;
        CacheStats {
            writes_waited: c.writes_waited.load(Ordering::Relaxed),
            writes_waited_several_releases: c.writes_waited_several_releases.load(Ordering::Relaxed),
            writes_waited_on_commit: c.writes_waited_on_commit.load(Ordering::Relaxed),
            flusher_stalls_on_unstable: c.flusher_stalls_on_unstable.load(Ordering::Relaxed),
            dirty_bytes_peak: self.shared.budget.peak(),
            unstable_bytes_peak: c.unstable_bytes_peak.load(Ordering::Relaxed),
            resent_bytes: c.resent_bytes.load(Ordering::Relaxed),
            readahead_chunks: c.readahead_chunks.load(Ordering::Relaxed),
            dropped_behind_chunks: c.dropped_behind_chunks.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            attr_hits: c.attr_hits.load(Ordering::Relaxed),
            attr_misses: c.attr_misses.load(Ordering::Relaxed),
            lookup_hits: c.lookup_hits.load(Ordering::Relaxed),
            lookup_misses: c.lookup_misses.load(Ordering::Relaxed),
            read_chunk_hits: c.read_chunk_hits.load(Ordering::Relaxed),
            read_chunk_misses: c.read_chunk_misses.load(Ordering::Relaxed),
            delegated_opens: c.delegated_opens.load(Ordering::Relaxed),
            closes_written_back_later: c.closes_written_back_later.load(Ordering::Relaxed),
            files_read_ahead: c.files_read_ahead.load(Ordering::Relaxed),
            files_read_ahead_calls: c.files_read_ahead_calls.load(Ordering::Relaxed),
            listings_read_ahead: c.listings_read_ahead.load(Ordering::Relaxed),
            listings_read_ahead_used: c.listings_read_ahead_used.load(Ordering::Relaxed),
            removes_later: c.removes_later.load(Ordering::Relaxed),
            removes_later_failed: c.removes_later_failed.load(Ordering::Relaxed),
            creates_early: c.creates_early.load(Ordering::Relaxed),
            creates_early_failed: c.creates_early_failed.load(Ordering::Relaxed),
            creates_whole: c.creates_whole.load(Ordering::Relaxed),
            modes_held: c.modes_held.load(Ordering::Relaxed),
        }
    }

    /// The server called `ino`'s file handle stale: the object is gone
    /// (another client removed it). Nothing cached about it is trusted any
    /// more, and the names that led to it are forgotten, along with their
    /// directories' listings and trust (they changed on the server). The
    /// kernel walks the path again after ESTALE, looking each name up with
    /// us afresh; that lookup now asks the server and finds what is there
    /// now (ENOENT, or another object made under the name), as a kernel NFS
    /// mount's retry does, where answered from the cache it met the same
    /// stale object again and the program got ESTALE. Rare, so the
    /// directories are searched rather than indexed.
    pub fn forget_stale(&self, ino: u64) {
        let s = &self.shared;
        let Some(inode) = s.inodes.get(ino) else { return };
        inode.state.lock().forget_stale();
        if ino == ROOT_INO {
            // No name leads to the export's root.
            return;
        }
        for dir in s.inodes.dirs() {
            let mut st = dir.state.lock();
            let before = st.names.len();
            st.names.retain(|_, d| !matches!(d, Dentry::Positive(fh) if *fh == inode.fh));
            if st.names.len() != before {
                // Its names are all still true but the one; its listing is not.
                st.attr_timeout = Duration::ZERO;
                st.complete = false;
                st.drop_listing();
            }
        }
    }

    /// The NFS file handle behind an inode number.
    pub fn file_handle(&self, ino: u64) -> FsResult<NfsFh3> {
        // An early file has none yet (a caller that needs it waits with
        // `settle_early`).
        Ok(self.shared.inode(ino)?.fh.clone())
    }

    /// Look `name` up in directory `parent`. Counts as one kernel
    /// reference to the result (undo with [`CachedFs::forget`]).
    pub async fn lookup(&self, parent: u64, name: &[u8], cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        if !s.early.is_empty() {
            // A name created early is known once its file is made ("." of
            // an early file too).
            s.early.settle_name(parent, name).await;
            s.early.settle_ino(parent).await;
        }
        match name {
            b"." => return self.lookup_self(parent, cred).await,
            b".." => return self.lookup_parent(parent, cred).await,
            _ => {}
        }
        let dir = s.inode(parent)?;
        check_name(name)?;
        if !dir.is_dir() {
            return Err(NfsError::Nfs(Nfsstat3::Notdir).into());
        }
        s.revalidate(&dir, cred).await?;
        let key = Bytes::copy_from_slice(name);
        if s.cfg.lookupcache != LookupCache::None {
            let cached = dir.state.lock().names.get(&key).cloned();
            match cached {
                Some(Dentry::Positive(fh)) => {
                    if let Some(child) = s.inodes.by_fh(&fh) {
                        match s.revalidate(&child, cred).await {
                            Ok(()) => {
                                s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                                return Ok(s.reference(&child));
                            }
                            // The object went away: forget the name, ask again.
                            Err(FsError::Nfs(NfsError::Nfs(Nfsstat3::Stale))) => {
                                dir.state.lock().names.remove(&key);
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
                Some(Dentry::Negative { until })
                    if s.cfg.lookupcache == LookupCache::All && Instant::now() < until =>
                {
                    s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                    return Err(NfsError::Nfs(Nfsstat3::Noent).into());
                }
                None if s.cfg.lookupcache == LookupCache::All => {
                    // Every name of a directory we know whole is cached: this
                    // one does not exist (its attributes were just revalidated).
                    let st = dir.state.lock();
                    if st.complete && st.attr_valid(Instant::now()) {
                        s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                        return Err(NfsError::Nfs(Nfsstat3::Noent).into());
                    }
                }
                _ => {}
            }
        }
        s.counters.lookup_misses.fetch_add(1, Ordering::Relaxed);
        s.settle_dir(&dir).await;
        let gen = s.clock.tick();
        match s.client.lookup(cred, &dir.fh, name).await {
            Ok(r) => {
                if let Some(da) = r.dir_attributes {
                    s.fresh_attrs(&dir, da, gen, false);
                }
                let (attr, gen) = match r.obj_attributes {
                    Some(a) => (a, gen),
                    None => {
                        let gen = s.clock.tick();
                        (s.client.getattr(cred, &r.object).await?, gen)
                    }
                };
                let child = s.intern(&r.object, &attr, gen);
                if s.cfg.lookupcache != LookupCache::None {
                    s.remember_name(&dir, key, Dentry::Positive(r.object.clone()));
                }
                Ok(s.reference(&child))
            }
            Err(NfsError::Nfs(Nfsstat3::Noent)) => {
                if s.cfg.lookupcache == LookupCache::All {
                    let until = {
                        let st = dir.state.lock();
                        st.attr_fetched + st.attr_timeout
                    };
                    s.remember_name(&dir, key, Dentry::Negative { until });
                }
                Err(NfsError::Nfs(Nfsstat3::Noent).into())
            }
            Err(e) => Err(e.into()),
        }
    }

    // ----- answers from the cache alone ----------------------------------
    //
    // For callers on a thread of their own (the FUSE request readers): a
    // request the cache can answer without the server is answered there,
    // with no hop to the async runtime (two context switches per request,
    // most of an untar's client time). `None`: use the async method.

    /// [`CachedFs::lookup`] if the cache knows the answer: a cached name
    /// whose object's attributes are trusted, or a name known not to exist,
    /// in a directory whose attributes are trusted (or that this client
    /// holds a delegation of).
    pub fn try_lookup(&self, parent: u64, name: &[u8]) -> Option<FsResult<Entry>> {
        let s = &self.shared;
        if matches!(name, b"." | b"..") || s.cfg.lookupcache == LookupCache::None || check_name(name).is_err()
        {
            return None;
        }
        if s.early.has_name(parent, name) {
            return None;
        }
        let dir = s.inodes.get(parent)?;
        if !dir.is_dir() {
            return None;
        }
        let now = Instant::now();
        let mut st = dir.state.lock();
        if !st.attr_valid(now) {
            // A delegation of the directory vouches for its names however
            // old its attributes (asked only then: lookups are frequent).
            drop(st);
            let delegated = s.delegated(&dir);
            st = dir.state.lock();
            if !(st.attr_valid(now) || st.vouched(delegated)) {
                return None;
            }
        }
        match st.names.get(name) {
            Some(Dentry::Positive(fh)) => {
                let child = s.inodes.by_fh(fh)?;
                drop(st);
                if !s.trusted(&child, &child.state.lock(), now) {
                    return None;
                }
                s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                Some(Ok(s.reference(&child)))
            }
            Some(Dentry::Negative { until }) if s.cfg.lookupcache == LookupCache::All && now < *until => {
                s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                Some(Err(NfsError::Nfs(Nfsstat3::Noent).into()))
            }
            None if s.cfg.lookupcache == LookupCache::All && st.complete => {
                s.counters.lookup_hits.fetch_add(1, Ordering::Relaxed);
                Some(Err(NfsError::Nfs(Nfsstat3::Noent).into()))
            }
            _ => None,
        }
    }

    /// [`CachedFs::getattr`] while the attributes are trusted.
    pub fn try_getattr(&self, ino: u64) -> Option<Entry> {
        let s = &self.shared;
        if let Some(e) = s.early_entry(ino) {
            return Some(e);
        }
        let inode = s.inodes.get(ino)?;
        if !s.trusted(&inode, &inode.state.lock(), Instant::now()) {
            return None;
        }
        s.counters.attr_hits.fetch_add(1, Ordering::Relaxed);
        Some(s.entry_for(&inode))
    }

    /// [`CachedFs::setattr`] when it changes nothing the server must see
    /// now: an empty change with trusted attributes, or a change that waits
    /// for the file's close (see `defer_setattr`).
    pub fn try_setattr(&self, ino: u64, attrs: &Sattr3, cred: &Cred) -> Option<FsResult<Entry>> {
        let s = &self.shared;
        if let Some(taken) = s.early.push_setattr(ino, attrs, cred) {
            // `None`: this change waits for the file (`setattr`).
            let (attr, generation) = taken?;
            return Some(Ok(Entry { ino, attr, ttl: Duration::ZERO, generation }));
        }
        let inode = s.inodes.get(ino)?;
        if *attrs == Sattr3::default() {
            return self.try_getattr(ino).map(Ok);
        }
        if let Err(e) = s.check_writable() {
            return Some(Err(e));
        }
        s.defer_setattr(&inode, attrs, cred).map(Ok)
    }

    /// `ino` itself (LOOKUP of "."), even if the kernel forgot it: what the
    /// kernel asks to open a FUSE file handle (`open_by_handle_at`, an NFS
    /// re-export) whose inode it no longer has. Counts as a reference.
    async fn lookup_self(&self, ino: u64, cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        let inode = self.known_or_forgotten(ino, cred).await?;
        s.revalidate(&inode, cred).await?;
        Ok(s.reference(&inode))
    }

    /// The parent of directory `ino` (LOOKUP of ".."): what the kernel asks
    /// to connect a directory opened by file handle to the tree.
    async fn lookup_parent(&self, ino: u64, cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        let dir = self.known_or_forgotten(ino, cred).await?;
        if !dir.is_dir() {
            return Err(NfsError::Nfs(Nfsstat3::Notdir).into());
        }
        if ino == ROOT_INO {
            // The mount's root has no parent inside the mount.
            s.revalidate(&dir, cred).await?;
            return Ok(s.reference(&dir));
        }
        let gen = s.clock.tick();
        let r = s.client.lookup(cred, &dir.fh, b"..").await?;
        let attr = match r.obj_attributes {
            Some(a) => a,
            None => s.client.getattr(cred, &r.object).await?,
        };
        let parent = s.intern(&r.object, &attr, gen);
        Ok(s.reference(&parent))
    }

    /// The inode numbered `ino`, brought back under that number from its
    /// remembered file handle if the kernel had forgotten it.
    async fn known_or_forgotten(&self, ino: u64, cred: &Cred) -> FsResult<Arc<Inode>> {
        let s = &self.shared;
        if let Some(inode) = s.inodes.get(ino) {
            return Ok(inode);
        }
        let fh = s.inodes.forgotten(ino).ok_or(FsError::UnknownInode(ino))?;
        let gen = s.clock.tick();
        let attr = s.client.getattr(cred, &fh).await?;
        let (inode, new) = s.inodes.intern(&fh, &attr, |n| s.make_inode(n, &fh, &attr), false, Some(ino));
        if new {
            inode.state.lock().attr_gen = gen;
        } else {
            s.fresh_attrs(&inode, attr, gen, false);
        }
        Ok(inode)
    }

    /// The kernel dropped `nlookup` references to `ino`. The inode is
    /// forgotten once nothing references it and it holds no unwritten data.
    pub fn forget(&self, ino: u64, nlookup: u64) {
        if !self.shared.early.push_forget(ino, nlookup) {
            self.forget_now(ino, nlookup);
        }
    }

    /// [`CachedFs::forget`] of a file that exists on the server.
    pub(crate) fn forget_now(&self, ino: u64, nlookup: u64) {
        let s = &self.shared;
        if ino == ROOT_INO {
            return;
        }
        let Some(inode) = s.inodes.get(ino) else { return };
        let unused = {
            let mut st = inode.state.lock();
            st.nlookup = st.nlookup.saturating_sub(nlookup);
            st.nlookup == 0 && st.open_count == 0 && st.file.settled()
        };
        if unused {
            s.inodes.remove(ino);
        }
    }

    /// The attributes of `ino` for a directory listing that gives the
    /// kernel the entry as if looked up (FUSE's READDIRPLUS): counts one
    /// kernel reference, as [`CachedFs::lookup`] does. `None` if the inode
    /// is not known here (a READDIR entry without attributes).
    pub fn listed_entry(&self, ino: u64) -> Option<Entry> {
        let inode = self.shared.inodes.get(ino)?;
        Some(self.shared.reference(&inode))
    }

    /// Attributes of `ino`, from the cache while they are trusted.
    pub async fn getattr(&self, ino: u64, cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        if let Some(e) = s.early_entry(ino) {
            return Ok(e);
        }
        let inode = s.inode(ino)?;
        s.revalidate(&inode, cred).await?;
        Ok(s.entry_for(&inode))
    }

    /// Change attributes. On a regular file, the data written before the
    /// change is written back and committed first, as Linux's `nfs_setattr`
    /// does: nothing we resend later may land beyond a new end, and no
    /// WRITE may reach the server after a chmod or chown and clear the
    /// set-id bits it set. A size change then drops cached data past the
    /// new size. The call returns once the change is on the server (only
    /// what changes nothing another client sees may wait: `defer_setattr`).
    pub async fn setattr(&self, ino: u64, attrs: Sattr3, cred: &Cred) -> FsResult<Entry> {
        self.shared.early.settle_ino(ino).await;
        self.setattr_now(ino, attrs, cred).await
    }

    /// [`CachedFs::setattr`] of a file that exists on the server.
    pub(crate) async fn setattr_now(&self, ino: u64, attrs: Sattr3, cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        let inode = s.inode(ino)?;
        if attrs == Sattr3::default() {
            // Nothing to change: FUSE sends this before a write that must
            // clear set-id bits (the write itself carries that; see
            // `drop_setid_bits`). A SETATTR would cost a round trip, and
            // a read-only mount must not refuse it.
            s.revalidate(&inode, cred).await?;
            return Ok(s.entry_for(&inode));
        }
        s.check_writable()?;
        if let Some(e) = s.defer_setattr(&inode, &attrs, cred) {
            return Ok(e);
        }
        let mut attrs = attrs;
        let mut held = None;
        let mut sent = None;
        if inode.ftype == Ftype3::Reg {
            // A small file's data, the held changes and this one can go in
            // one call (`NfsOps::write_close`), in that order.
            if let Some(small) = s.write_small_then(&inode, &attrs, cred).await {
                attrs = small.attrs;
                held = small.held;
                match small.result {
                    Some(r) => sent = Some((r, small.gen)),
                    // The WRITE failed, so it was not sent: it goes alone below.
                    None => inode.state.lock().end_change(
                        None,
                        small.gen,
                        Instant::now(),
                        s.cfg.ac_bounds(false).0,
                    ),
                }
            } else {
                s.write_back(&inode).await;
                // Changes held for close are the program's earlier words: they
                // go in this SETATTR, under its own change, when the same caller
                // made them (else on their own, first).
                let taken = inode.state.lock().file.take_pending_attrs();
                if let Some(p) = taken {
                    if p.cred == *cred {
                        let mut merged = p.attrs;
                        merge_later(&mut merged, &attrs);
                        attrs = merged;
                        held = Some(p);
                    } else {
                        let _ = s.send_attrs(&inode, p.attrs, &p.cred).await;
                    }
                }
            }
        }
        let (r, gen) = match sent {
            Some(sent) => sent,
            None => {
                s.settle_dir(&inode).await;
                let gen = inode.state.lock().begin_change();
                (s.client.setattr(cred, &inode.fh, attrs, None).await, gen)
            }
        };
        let now = Instant::now();
        let (min, _) = s.cfg.ac_bounds(inode.is_dir());
        {
            let mut st = inode.state.lock();
            st.end_change(r.as_ref().ok(), gen, now, min);
            if held.is_some() {
                st.file.sending_attrs = None;
                if st.file.pending_attrs.is_none() {
                    st.file.attrs_held_at = None;
                }
            }
            // A chmod or chown changes who may do what; even a failed
            // SETATTR may have changed something before failing.
            st.access.clear();
            if attrs.mode.is_some() && r.is_ok() {
                // A mode set after a set-id-clearing write is what counts.
                st.file.setid_dropped = None;
            }
            if let Some(size) = attrs.size {
                if r.is_ok() {
                    // Chunks past the new end are wrong; a shrink or growth
                    // also changes the last chunk, so drop it too.
                    let first = size / CHUNK_BYTES;
                    st.file.remove_chunks(first..=u64::MAX);
                    st.file.gen += 1;
                    // Written meanwhile past the new end: gone with it.
                    let cut = st.file.dirty.truncate(size);
                    s.budget.release(cut, super::budget::Release::Dropped);
                    if let Some(b) = &inode.file_budget {
                        b.release(cut, super::budget::Release::Dropped);
                    }
                    st.file.written_end = st.file.written_end.min(size);
                }
            }
        }
        if let Some(p) = held {
            inode.progress.notify_waiters();
            if r.is_err() {
                // The caller's change failed; the held ones, which their
                // callers were told had succeeded, still go, on their own.
                inode.state.lock().file.sending_attrs = Some(p.attrs);
                let _ = s.send_attrs(&inode, p.attrs, &p.cred).await;
            }
            s.unregister_if_clean(&inode);
        }
        let wcc = r?;
        if wcc.after.is_none() {
            let gen = s.clock.tick();
            let a = s.client.getattr(cred, &inode.fh).await?;
            s.fresh_attrs(&inode, a, gen, false);
        }
        Ok(s.entry_for(&inode))
    }

    /// Check permission: `mask` is an access(2) mask (R_OK | W_OK | X_OK,
    /// or F_OK). Returns EACCES if the server denies any of it.
    pub async fn access(&self, ino: u64, mask: i32, cred: &Cred) -> FsResult<()> {
        self.access_asking(ino, mask, cred).await.map(drop)
    }

    /// [`CachedFs::access`]; `true` if it asked the server and fresh
    /// attributes came back with the answer (a close-to-open revalidation).
    async fn access_asking(&self, ino: u64, mask: i32, cred: &Cred) -> FsResult<bool> {
        let s = &self.shared;
        s.early.settle_ino(ino).await;
        let inode = s.inode(ino)?;
        if mask == libc::F_OK {
            s.revalidate(&inode, cred).await?;
            return Ok(false);
        }
        let (want, asked) = access_bits(&inode, mask);
        if mask & libc::W_OK != 0 && s.read_only.load(Ordering::Relaxed) {
            return Err(FsError::ReadOnly);
        }
        let delegated = s.delegated(&inode);
        let cached = inode.state.lock().cached_access(cred, want, Instant::now(), delegated);
        let (granted, revalidated) = match cached {
            Some(granted) => (granted, false),
            None => {
                s.send_held_mode(&inode).await;
                let gen = s.clock.tick();
                let r = s.client.access(cred, &inode.fh, asked).await?;
                let revalidated = r.obj_attributes.is_some();
                if let Some(a) = r.obj_attributes {
                    s.fresh_attrs(&inode, a, gen, true);
                }
                inode.state.lock().remember_access(cred, asked, r.access);
                (r.access, revalidated)
            }
        };
        if granted & want == want {
            Ok(revalidated)
        } else {
            Err(NfsError::Nfs(Nfsstat3::Acces).into())
        }
    }

    /// Open a file. With close-to-open (the default) this always asks the
    /// server for fresh attributes, dropping cached data if the file
    /// changed. Returns the file handle id for read/write/flush/release.
    pub async fn open(&self, ino: u64, flags: i32, cred: &Cred) -> FsResult<u64> {
        Ok(self.open_with(ino, flags, None, cred).await?.0)
    }

    /// Open a file for a caller who needs `mask` (an access(2) mask) on it,
    /// the way a kernel client does at open: the server decides (ACCESS,
    /// its answer cached per caller while the attributes are trusted) and
    /// close-to-open revalidates. An ACCESS sent here brings the file's
    /// attributes with it, and they are the revalidation: one round trip,
    /// not two; only a cached answer needs a GETATTR. A client with opens
    /// (NFSv4) opens the file in the same round trip, and reads a small
    /// file opened for reading whole with it (`NfsOps::open_file`).
    pub async fn open_checked(&self, ino: u64, flags: i32, mask: i32, cred: &Cred) -> FsResult<Opened> {
        let (fh, inode) = self.open_with(ino, flags, Some(mask), cred).await?;
        let keep_cache = {
            let mut st = inode.state.lock();
            let keep = st.kernel_epoch == Some(st.data_epoch);
            st.kernel_epoch = Some(st.data_epoch);
            keep
        };
        Ok(Opened { fh, keep_cache })
    }

    /// [`CachedFs::open_checked`] when it needs no call: a file held under
    /// a delegation, opened for reading by a caller whose access is cached.
    /// `None` (having changed nothing): use [`CachedFs::open_checked`].
    /// For callers on a thread of their own (see [`CachedFs::try_write`]).
    pub fn try_open_checked(&self, ino: u64, flags: i32, mask: i32, cred: &Cred) -> Option<FsResult<Opened>> {
        let s = &self.shared;
        if s.early.has_ino(ino) {
            return None;
        }
        let inode = s.inodes.get(ino)?;
        if OpenAccess::of_flags(flags) != OpenAccess::Read
            || flags & (libc::O_TRUNC | libc::O_DIRECT) != 0
            || mask & libc::W_OK != 0
            || !s.delegated(&inode)
        {
            return None;
        }
        let mask = Some(mask).filter(|m| *m != libc::F_OK);
        let want_bits = mask.map_or(0, |m| access_bits(&inode, m).0);
        if !inode.state.lock().vouched(true) {
            return None;
        }
        if mask.is_some() {
            let granted = inode.state.lock().cached_access(cred, want_bits, Instant::now(), true)?;
            if granted & want_bits != want_bits {
                return Some(Err(NfsError::Nfs(Nfsstat3::Acces).into()));
            }
        }
        s.counters.delegated_opens.fetch_add(1, Ordering::Relaxed);
        s.files_ahead_warm(&inode, cred);
        let fh = s.open_handle(&inode, cred, flags, &FileOpened::default(), None);
        let keep_cache = {
            let mut st = inode.state.lock();
            let keep = st.kernel_epoch == Some(st.data_epoch);
            st.kernel_epoch = Some(st.data_epoch);
            keep
        };
        Some(Ok(Opened { fh, keep_cache }))
    }

    /// Open `ino` (after checking `mask`, if given): one `NfsOps::open_file`
    /// asks what is not known (the caller's access, fresh attributes) and
    /// opens it on the server if the protocol has opens.
    async fn open_with(
        &self,
        ino: u64,
        flags: i32,
        mask: Option<i32>,
        cred: &Cred,
    ) -> FsResult<(u64, Arc<Inode>)> {
        let s = &self.shared;
        s.early.settle_ino(ino).await;
        let inode = s.inode(ino)?;
        if inode.is_dir() {
            if let Some(m) = mask {
                self.access(ino, m, cred).await?;
            }
            return Err(NfsError::Nfs(Nfsstat3::Isdir).into());
        }
        let mask = mask.filter(|m| *m != libc::F_OK);
        if mask.is_some_and(|m| m & libc::W_OK != 0) && s.read_only.load(Ordering::Relaxed) {
            return Err(FsError::ReadOnly);
        }
        if wants_write(flags) {
            s.check_writable()?;
        }
        // Being read ahead: what that brings (a delegation, the data) is
        // what this open would ask for.
        s.wait_files_ahead(ino).await;
        let now = Instant::now();
        let access = OpenAccess::of_flags(flags);
        // A delegation vouches for the cached attributes and data: an open
        // for reading needs neither close-to-open's check nor an open on
        // the server (its reads use the delegation).
        let delegated = s.delegated(&inode);
        let (want_bits, check, attrs, read_whole, delegated) = {
            let st = inode.state.lock();
            let delegated = st.vouched(delegated);
            let (want_bits, asked) = mask.map_or((0, 0), |m| access_bits(&inode, m));
            let cached = mask.and_then(|_| st.cached_access(cred, want_bits, now, delegated));
            if cached.is_some_and(|granted| granted & want_bits != want_bits) {
                return Err(NfsError::Nfs(Nfsstat3::Acces).into());
            }
            let check = (mask.is_some() && cached.is_none()).then_some(asked);
            let attrs = !delegated && (s.cfg.cto || !st.attr_valid(now));
            // A small file opened for reading is read whole with its open (a
            // client that can do that in the same round trip does; the data
            // is then here when the kernel asks for it), when its open checks
            // it for changes. Not with a disk cache, which may have it already.
            let small = st.visible_attr().size <= READ_AT_OPEN_BYTES_MAX;
            let read_whole = (access == OpenAccess::Read
                && attrs
                && flags & libc::O_DIRECT == 0
                && small
                && st.file.clean()
                && s.disk.is_none())
            .then_some(s.cfg.rsize.min(READ_AT_OPEN_BYTES_MAX as u32));
            (want_bits, check, attrs, read_whole, delegated)
        };
        if !s.cfg.cto {
            // nocto: the attributes were used from the cache if trusted.
            let counter = if attrs { &s.counters.attr_misses } else { &s.counters.attr_hits };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if delegated && access == OpenAccess::Read && check.is_none() && flags & libc::O_TRUNC == 0 {
            s.counters.delegated_opens.fetch_add(1, Ordering::Relaxed);
            s.files_ahead_warm(&inode, cred);
            return Ok((s.open_handle(&inode, cred, flags, &FileOpened::default(), None), inode));
        }
        s.send_held_mode(&inode).await;
        let gen = s.clock.tick();
        let file_gen = inode.state.lock().file.gen;
        let want = OpenWant { access, check, attrs, read_whole };
        let opened = if read_whole.is_some() {
            // A small file read whole at its open: perhaps the next of a
            // directory's files a program reads in order (`prefetch`).
            let (opened, ()) =
                tokio::join!(s.client.open_file(cred, &inode.fh, want), s.read_files_ahead(&inode, cred));
            let opened = opened?;
            s.files_ahead_opened(&inode);
            opened
        } else {
            s.client.open_file(cred, &inode.fh, want).await?
        };
        let mut inserted = Vec::new();
        {
            let mut st = inode.state.lock();
            let moved = st.file.gen != file_gen;
            // Only if asked: `nocto` trusts the cache at an open, even when
            // the open's round trip brought attributes anyway (NFSv4).
            if let Some(a) = opened.attrs.filter(|_| attrs) {
                st.fresh_attrs(a, gen, Instant::now(), s.cfg.ac_bounds(false), true);
            }
            if let (Some(asked), Some(granted)) = (check, opened.access) {
                st.remember_access(cred, asked, granted);
            }
            // The data goes with these attributes if nothing of ours (a
            // write, a newer answer) came between.
            if let Some((data, eof)) = &opened.data {
                if !moved && st.attr_gen == gen && st.file.clean() {
                    inserted = cache_whole(&mut st, inode.ino, data, *eof);
                }
            }
        }
        s.note_inserted(inserted);
        if opened.access.is_some_and(|granted| granted & want_bits != want_bits) {
            s.undo_server_open(&inode, cred, flags, &opened).await;
            return Err(NfsError::Nfs(Nfsstat3::Acces).into());
        }
        if flags & libc::O_TRUNC != 0 && wants_write(flags) {
            let truncated =
                self.setattr(inode.ino, Sattr3 { size: Some(0), ..Sattr3::default() }, cred).await;
            if let Err(e) = truncated {
                s.undo_server_open(&inode, cred, flags, &opened).await;
                return Err(e);
            }
        }
        Ok((s.open_handle(&inode, cred, flags, &opened, None), inode))
    }

    /// Make open file `fh` hold an open on the server if it holds none
    /// (its open was ended early: a small file read whole at its open, or
    /// written back with its close): NFSv4's byte-range locks hang off an
    /// open. Nothing for a client without opens.
    pub async fn hold_open(&self, fh: u64) -> FsResult<()> {
        let s = &self.shared;
        s.early.settle_fh(fh).await;
        let of = s.handle(fh)?;
        if of.held() {
            return Ok(());
        }
        let want = OpenWant { access: of.access, check: None, attrs: false, read_whole: None };
        let gen = s.clock.tick();
        let opened = s.client.open_file(&of.cred, &of.inode.fh, want).await?;
        // Attributes that came anyway are the freshest (and those a
        // delegation the OPEN brought vouches for from now on).
        if let Some(a) = opened.attrs {
            s.fresh_attrs(&of.inode, a, gen, false);
        }
        if opened.held && !of.hold_server_open(opened.preserve_unlinked) {
            // Another call made it hold one meanwhile: one is enough.
            s.client.close_file(&of.cred, &of.inode.fh, of.access).await?;
        }
        Ok(())
    }

    /// Create and open a regular file (`O_EXCL` in `flags`: fail if it
    /// exists). Counts as a kernel reference, like lookup. A client with
    /// opens (NFSv4) creates and opens it on the server in one round trip
    /// (`NfsOps::create_open`).
    pub async fn create(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        flags: i32,
        cred: &Cred,
    ) -> FsResult<(Entry, u64)> {
        self.create_file(parent, name, mode, flags, cred, true).await
    }

    /// [`CachedFs::create`]; `open`: also open it on the server (else the
    /// handle holds no open there: a file made and closed at once).
    async fn create_file(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        flags: i32,
        cred: &Cred,
        open: bool,
    ) -> FsResult<(Entry, u64)> {
        let s = &self.shared;
        s.check_writable()?;
        let dir = s.inode(parent)?;
        check_name(name)?;
        if open {
            if let Some(made) = s.create_early(&dir, name, mode, flags, cred) {
                return Ok(made);
            }
        }
        self.create_in(&dir, name, mode, flags, cred, open, None).await
    }

    /// [`CachedFs::create_file`] in `dir`, on the server now. `given`: the
    /// kernel already knows the file by these numbers (a create answered
    /// early, see `early`), and the name was not there when it was answered.
    #[allow(clippy::too_many_arguments)] // create_file's, and the numbers given
    pub(crate) async fn create_in(
        &self,
        dir: &Arc<Inode>,
        name: &[u8],
        mode: u32,
        flags: i32,
        cred: &Cred,
        open: bool,
        given: Option<super::early_table::Given>,
    ) -> FsResult<(Entry, u64)> {
        let s = &self.shared;
        let dir = dir.clone();
        let how = if flags & libc::O_EXCL != 0 || given.is_some() {
            Createhow3::Guarded(sattr_mode(mode))
        } else {
            Createhow3::Unchecked(sattr_mode(mode))
        };
        if given.is_some() {
            // Its own count is among the directory's creates in flight.
            s.settle_removes_of(&dir).await;
        } else {
            s.settle_dir(&dir).await;
        }
        let gen = dir.state.lock().begin_change();
        let (r, opened) = if open {
            match s.client.create_open(cred, &dir.fh, name, how, OpenAccess::of_flags(flags)).await {
                Ok((r, opened)) => (Ok(r), opened),
                Err(e) => (Err(e), FileOpened::default()),
            }
        } else {
            (s.client.create(cred, &dir.fh, name, how).await, FileOpened::default())
        };
        let made = r.as_ref().ok().and_then(|r| r.obj.clone());
        let at = given.map(|g| (g.ino, g.generation));
        let r = s
            .finish_dir_change_at(&dir, gen, r.map(|r| (r.obj, r.obj_attributes, r.dir_wcc)), name, cred, at)
            .await;
        let r = match (r, given) {
            // A handle the cache knew already under another number: the
            // name was made by someone else after all.
            (Ok(e), Some(g)) if e.ino != g.ino => {
                if let Some(i) = s.inodes.get(e.ino) {
                    i.state.lock().nlookup -= 1;
                }
                Err(NfsError::Nfs(Nfsstat3::Exist).into())
            }
            (r, _) => r,
        };
        let inode = match r.and_then(|r| s.inode(r.ino)) {
            Ok(inode) => inode,
            Err(e) => {
                if let (true, Some(fh)) = (opened.held, made) {
                    let _ = s.client.close_file(cred, &fh, OpenAccess::of_flags(flags)).await;
                }
                return Err(e);
            }
        };
        let attr = inode.state.lock().attr;
        if given.is_none() && dir.state.lock().attr.mode & libc::S_ISGID == 0 {
            // Whether the server makes files as their creator (no squashing,
            // no group from elsewhere): what an early create shows.
            s.early.note_owner(attr.uid == cred.uid && attr.gid == cred.gid);
        }
        if attr.uid == cred.uid {
            // The server made the caller the owner: their own later changes
            // to mode, owner and times it will accept (`defer_setattr`).
            inode.state.lock().file.creator = Some(cred.clone());
        }
        if flags & libc::O_TRUNC != 0 && attr.size != 0 {
            let truncated =
                self.setattr_now(inode.ino, Sattr3 { size: Some(0), ..Sattr3::default() }, cred).await;
            if let Err(e) = truncated {
                s.undo_server_open(&inode, cred, flags, &opened).await;
                return Err(e);
            }
        }
        let fh = s.open_handle(&inode, cred, flags, &opened, given.map(|g| g.fh));
        Ok((s.entry_for(&inode), fh))
    }

    /// Make early file `given` (see `early`) closed already: created with
    /// `mode`, written with `data` from its start, given times `then` and
    /// closed, in one call (`NfsOps::create_written`).
    #[allow(clippy::too_many_arguments)] // the file's name, numbers and all it owed
    pub(crate) async fn create_written_in(
        &self,
        dir: &Arc<Inode>,
        name: &[u8],
        cred: &Cred,
        given: super::early_table::Given,
        mode: u32,
        data: Bytes,
        then: Option<Sattr3>,
    ) -> FsResult<()> {
        let s = &self.shared;
        s.settle_removes_of(dir).await;
        let gen = dir.state.lock().begin_change();
        let r = s.client.create_written(cred, &dir.fh, name, sattr_mode(mode), data, then).await;
        let r = r.map(|c| (Some(c.obj), c.attrs, c.dir_wcc));
        let at = Some((given.ino, given.generation));
        let e = s.finish_dir_change_at(dir, gen, r, name, cred, at).await?;
        let inode = s.inode(e.ino)?;
        if e.ino != given.ino {
            inode.state.lock().nlookup -= 1;
            return Err(NfsError::Nfs(Nfsstat3::Exist).into());
        }
        let mut st = inode.state.lock();
        if st.attr.uid == cred.uid {
            st.file.creator = Some(cred.clone());
        }
        Ok(())
    }

    /// Make a directory.
    pub async fn mkdir(&self, parent: u64, name: &[u8], mode: u32, cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        s.check_writable()?;
        let dir = s.inode(parent)?;
        check_name(name)?;
        s.settle_dir(&dir).await;
        let gen = dir.state.lock().begin_change();
        let r = s.client.mkdir(cred, &dir.fh, name, sattr_mode(mode)).await;
        let e = s
            .finish_dir_change(&dir, gen, r.map(|r| (r.obj, r.obj_attributes, r.dir_wcc)), name, cred)
            .await?;
        if let Some(new) = s.inodes.get(e.ino) {
            // Just made, so empty: every name it will have, we will make.
            let mut st = new.state.lock();
            if st.names.is_empty() {
                st.complete = true;
            }
        }
        Ok(e)
    }

    /// Make a special file. `mode` carries the file type bits (S_IFIFO,
    /// S_IFSOCK, S_IFCHR, S_IFBLK; S_IFREG creates a regular file) and
    /// `rdev` the device number in Linux's encoding.
    pub async fn mknod(
        &self,
        parent: u64,
        name: &[u8],
        mode: u32,
        rdev: u64,
        cred: &Cred,
    ) -> FsResult<Entry> {
        let s = &self.shared;
        s.check_writable()?;
        let attrs = sattr_mode(mode);
        let dev = || Devicedata3 {
            dev_attributes: attrs,
            spec: Specdata3 {
                specdata1: (((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff)) as u32,
                specdata2: ((rdev & 0xff) | ((rdev >> 12) & !0xff)) as u32,
            },
        };
        let what = match mode & libc::S_IFMT {
            libc::S_IFREG => {
                // Made, not opened: nothing to open on the server.
                let (e, fh) = self.create_file(parent, name, mode, libc::O_EXCL, cred, false).await?;
                self.release(fh).await?;
                return Ok(e);
            }
            libc::S_IFIFO => Mknoddata3::Fifo(attrs),
            libc::S_IFSOCK => Mknoddata3::Sock(attrs),
            libc::S_IFCHR => Mknoddata3::Chr(dev()),
            libc::S_IFBLK => Mknoddata3::Blk(dev()),
            _ => return Err(FsError::Invalid("mknod of an unsupported file type")),
        };
        let dir = s.inode(parent)?;
        check_name(name)?;
        s.settle_dir(&dir).await;
        let gen = dir.state.lock().begin_change();
        let r = s.client.mknod(cred, &dir.fh, name, what).await;
        s.finish_dir_change(&dir, gen, r.map(|r| (r.obj, r.obj_attributes, r.dir_wcc)), name, cred).await
    }

    /// Make a symbolic link `name` → `target`.
    pub async fn symlink(&self, parent: u64, name: &[u8], target: &[u8], cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        s.check_writable()?;
        let dir = s.inode(parent)?;
        check_name(name)?;
        if target.len() > NFS3_PATH_MAX {
            return Err(NfsError::Nfs(Nfsstat3::Nametoolong).into());
        }
        s.settle_dir(&dir).await;
        let gen = dir.state.lock().begin_change();
        let r = s.client.symlink(cred, &dir.fh, name, target, Sattr3::default()).await;
        s.finish_dir_change(&dir, gen, r.map(|r| (r.obj, r.obj_attributes, r.dir_wcc)), name, cred).await
    }

    /// The target of a symbolic link.
    pub async fn readlink(&self, ino: u64, cred: &Cred) -> FsResult<Bytes> {
        let s = &self.shared;
        let inode = s.inode(ino)?;
        let gen = s.clock.tick();
        let r = s.client.readlink(cred, &inode.fh).await?;
        if let Some(a) = r.symlink_attributes {
            s.fresh_attrs(&inode, a, gen, false);
        }
        Ok(r.data.0)
    }

    /// Make a hard link to `ino` as `newname` in `newparent`.
    pub async fn link(&self, ino: u64, newparent: u64, newname: &[u8], cred: &Cred) -> FsResult<Entry> {
        let s = &self.shared;
        s.early.settle_all().await;
        s.check_writable()?;
        let inode = s.inode(ino)?;
        let dir = s.inode(newparent)?;
        check_name(newname)?;
        s.settle_dir(&dir).await;
        let dir_gen = dir.state.lock().begin_change();
        let gen = inode.state.lock().begin_change();
        let r = s.client.link(cred, &inode.fh, &dir.fh, newname).await;
        let now = Instant::now();
        {
            // LINK changes the file's ctime and nlink: its post-op
            // attributes are its new state, with no pre-op to chain.
            let mut st = inode.state.lock();
            let w = r.as_ref().ok().map(|r| WccData { before: None, after: r.file_attributes });
            st.end_change(w.as_ref(), gen, now, s.cfg.ac_bounds(false).0);
        }
        let r = r.map(|r| (Some(inode.fh.clone()), r.file_attributes, r.linkdir_wcc));
        s.finish_dir_change(&dir, dir_gen, r, newname, cred).await
    }

    /// Remove a file. A file still open here is not removed but renamed
    /// to a hidden `.nfs…` name in the same directory (NFS has no "delete
    /// on last close", and a REMOVE would make the open handle stale); the
    /// hidden name is removed when the last handle is released.
    pub async fn unlink(&self, parent: u64, name: &[u8], cred: &Cred) -> FsResult<()> {
        let s = &self.shared;
        s.early.settle_name(parent, name).await;
        s.check_writable()?;
        let dir = s.inode(parent)?;
        check_name(name)?;
        let child = s.named_child(&dir, name, cred).await;
        if let Some(open) = child.as_ref().and_then(|fh| s.open_file(fh)) {
            return s.silly_rename(&dir, name, &open, cred).await;
        }
        self.remove_name(parent, name, cred, false, child).await
    }

    /// Remove an empty directory.
    pub async fn rmdir(&self, parent: u64, name: &[u8], cred: &Cred) -> FsResult<()> {
        self.shared.early.settle_all().await;
        self.remove_name(parent, name, cred, true, None).await
    }

    /// REMOVE or RMDIR `name`, which names `removed` if the caller knows
    /// (else the lookup cache may).
    async fn remove_name(
        &self,
        parent: u64,
        name: &[u8],
        cred: &Cred,
        is_dir: bool,
        removed: Option<NfsFh3>,
    ) -> FsResult<()> {
        let s = &self.shared;
        s.check_writable()?;
        let dir = s.inode(parent)?;
        check_name(name)?;
        // What the name is, if known here (the kernel has checked it is
        // what the call says): the server need not check it again.
        let named = match dir.state.lock().names.get(name) {
            Some(Dentry::Positive(fh)) => Some(fh.clone()),
            _ => None,
        };
        let victim = removed.as_ref().or(named.as_ref()).and_then(|fh| s.inodes.by_fh(fh));
        let known = victim.as_ref().map(|i| i.is_dir());
        // Its last name, with nothing of it left here to write: a delegation
        // of it goes back with the REMOVE (it could not after).
        let last = victim.clone().filter(|v| {
            s.delegated(v) && (v.is_dir() || (v.ftype == Ftype3::Reg && v.state.lock().last_name_clean()))
        });
        if let Some(v) = victim.as_ref().filter(|_| known == Some(is_dir)) {
            if s.remove_later(&dir, name, v, last.is_some(), cred).await {
                return Ok(());
            }
        }
        if let Some(v) = victim.as_ref().filter(|v| v.is_dir()) {
            // An RMDIR must find it empty: its own background REMOVEs first.
            s.settle_dir(v).await;
        }
        let gen = dir.state.lock().begin_change();
        let r = if let (Some(v), Some(true)) = (&last, known.map(|k| k == is_dir)) {
            s.client.remove_last_name(cred, &dir.fh, name, is_dir, &v.fh).await
        } else if known == Some(is_dir) {
            s.client.remove_known(cred, &dir.fh, name, is_dir).await
        } else if is_dir {
            s.client.rmdir(cred, &dir.fh, name).await
        } else {
            s.client.remove(cred, &dir.fh, name).await
        };
        let key = Bytes::copy_from_slice(name);
        let now = Instant::now();
        let mut st = dir.state.lock();
        let old = st.names.remove(&key);
        st.end_change(r.as_ref().ok(), gen, now, s.cfg.ac_bounds(true).0);
        if r.is_err() {
            st.complete = false;
        }
        drop(st);
        // The removed object's link count and ctime changed (even a failed
        // call may have removed it: a retransmission answered NOENT).
        let removed = match (removed, old) {
            (Some(fh), _) | (None, Some(Dentry::Positive(fh))) => Some(fh),
            _ => None,
        };
        if let Some(fh) = removed {
            s.attrs_changed(&fh);
        }
        r?;
        Ok(())
    }

    /// Rename `name` in `parent` to `newname` in `newparent`.
    pub async fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        cred: &Cred,
    ) -> FsResult<()> {
        let s = &self.shared;
        s.early.settle_all().await;
        s.check_writable()?;
        let from = s.inode(parent)?;
        let to = s.inode(newparent)?;
        check_name(name)?;
        check_name(newname)?;
        // What the new name names now loses a link to the RENAME.
        let replaced = s.named_child(&to, newname, cred).await;
        let mut source = match from.state.lock().names.get(name) {
            Some(Dentry::Positive(fh)) => Some(fh.clone()),
            _ => None,
        };
        if let Some(target) = replaced.as_ref().and_then(|fh| s.open_file(fh)) {
            // The RENAME would unlink an open file: hide it first, as
            // unlink does, unless it is the very object being moved (a
            // rename onto another link of itself changes nothing).
            if source.is_none() {
                source = s.client.lookup(cred, &from.fh, name).await.ok().map(|r| r.object);
            }
            if source.as_ref() != Some(&target.fh) {
                s.silly_rename(&to, newname, &target, cred).await?;
            }
        }
        s.settle_dir(&from).await;
        s.settle_dir(&to).await;
        let from_gen = from.state.lock().begin_change();
        let to_gen = if newparent != parent { to.state.lock().begin_change() } else { from_gen };
        let r = s.client.rename(cred, &from.fh, name, &to.fh, newname).await;
        let now = Instant::now();
        let min = s.cfg.ac_bounds(true).0;
        let moved = {
            let mut st = from.state.lock();
            let moved = st.names.remove(name);
            st.end_change(r.as_ref().ok().map(|r| &r.fromdir_wcc), from_gen, now, min);
            if r.is_err() {
                st.complete = false;
            }
            moved
        };
        // The moved object's ctime changed, and the replaced one lost a
        // link (a failed call may have done both: see `remove_name`).
        if let Some(Dentry::Positive(fh)) = &moved {
            source = Some(fh.clone());
        }
        for fh in source.iter().chain(replaced.iter()) {
            s.attrs_changed(fh);
        }
        {
            let mut st = to.state.lock();
            // Whatever had the new name is gone; the moved object has it.
            st.names.remove(newname);
            if newparent != parent {
                st.end_change(r.as_ref().ok().map(|r| &r.todir_wcc), to_gen, now, min);
            }
            let mut kept = false;
            if r.is_ok() && s.cfg.lookupcache != LookupCache::None {
                if let Some(d @ Dentry::Positive(_)) = moved {
                    if st.names.len() < DIR_ENTRIES_MAX {
                        st.names.insert(Bytes::copy_from_slice(newname), d);
                        kept = true;
                    }
                }
            }
            if !kept {
                // The new name exists (or may), and is not in `names`.
                st.complete = false;
            }
        }
        r?;
        Ok(())
    }

    /// File system statistics.
    pub async fn statfs(&self, ino: u64, cred: &Cred) -> FsResult<StatFs> {
        let s = &self.shared;
        s.early.settle_ino(ino).await;
        let inode = s.inode(ino)?;
        let r = s.client.fsstat(cred, &inode.fh).await?;
        Ok(StatFs {
            total_bytes: r.tbytes,
            free_bytes: r.fbytes,
            avail_bytes: r.abytes,
            total_files: r.tfiles,
            free_files: r.ffiles,
            avail_files: r.afiles,
            block_bytes: s.cfg.wsize,
            name_max: NFS3_NAME_MAX as u32,
        })
    }

    /// Write back and commit every file (unmount, `sync`), and wait for
    /// the removal of hidden names of unlinked files already closed and
    /// for the REMOVEs of `dirops=async`. Returns the first error any file
    /// had, else a REMOVE's failure not yet reported.
    pub async fn sync_all(&self) -> FsResult<()> {
        let s = &self.shared;
        // Files created early first: what they owe makes work below.
        s.early.settle_all().await;
        let files: Vec<Arc<Inode>> = s.dirty_inodes.lock().values().cloned().collect();
        let mut first = Ok(());
        for f in files {
            if let Err(e) = s.sync_inode(&f).await {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        self.wait_background().await;
        first.and(s.take_dirops_error())
    }

    /// Wait until the background work already started is done: every
    /// hidden name whose file has had its last close is REMOVEd (that
    /// happens once `release` of the last handle returns), and every
    /// read-ahead has fetched and stored its chunks. Their errors are only
    /// logged: nobody is left to report them to.
    pub async fn wait_background(&self) {
        self.shared.background.idle().await;
    }
}

impl<C: NfsOps> Shared<C> {
    pub(crate) fn inode(&self, ino: u64) -> FsResult<Arc<Inode>> {
        self.inodes.get(ino).ok_or(FsError::UnknownInode(ino))
    }

    pub(crate) fn handle(&self, fh: u64) -> FsResult<Arc<OpenFile>> {
        match self.handles.lock().get(&fh).cloned() {
            Some(of) => Ok(of),
            // The create answered early that gave it out failed on the
            // server (`early`): what was done through it is lost.
            None if self.early.refused(fh) => Err(NfsError::Nfs(Nfsstat3::Io).into()),
            None => Err(FsError::BadHandle(fh)),
        }
    }

    pub(crate) fn check_writable(&self) -> FsResult<()> {
        if self.read_only.load(Ordering::Relaxed) {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    fn open_handle(
        self: &Arc<Self>,
        inode: &Arc<Inode>,
        cred: &Cred,
        flags: i32,
        opened: &FileOpened,
        id: Option<u64>,
    ) -> u64 {
        let id = id.unwrap_or_else(|| self.next_handle.fetch_add(1, Ordering::Relaxed));
        // O_SYNC includes O_DSYNC's bit; either asks for synchronous writes.
        let direct = flags & libc::O_DIRECT != 0;
        let sync = self.cfg.sync || direct || flags & libc::O_DSYNC != 0;
        let writable = wants_write(flags);
        let seen = {
            let mut st = inode.state.lock();
            st.open_count += 1;
            if sync {
                st.file.sync_opens += 1;
            }
            if writable {
                st.file.write_opens += 1;
            }
            st.file.err_seq
        };
        let owner: Weak<dyn LastClose> = Arc::downgrade(self) as Weak<dyn LastClose>;
        let of = OpenFile {
            inode: inode.clone(),
            cred: cred.clone(),
            err_seen: AtomicU64::new(seen),
            fsync_err_seen: AtomicU64::new(seen),
            owner,
            sync,
            writable,
            direct,
            access: OpenAccess::of_flags(flags),
            held: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        };
        if opened.held {
            of.hold_server_open(opened.preserve_unlinked);
        }
        self.handles.lock().insert(id, Arc::new(of));
        id
    }

    /// End the open on the server that `opened` says is held, when the
    /// handle it was for never came to be (the open failed after it).
    async fn undo_server_open(&self, inode: &Inode, cred: &Cred, flags: i32, opened: &FileOpened) {
        if opened.held {
            if let Err(e) = self.client.close_file(cred, &inode.fh, OpenAccess::of_flags(flags)).await {
                tracing::warn!("closing an open that failed: {e}");
            }
        }
    }

    /// What `name` in `dir` names now, asked just before an operation
    /// that removes or replaces that name: afterwards the object's cached
    /// attributes are stale (its link count and ctime change), and if it
    /// is a file open here its name must go through a silly rename first.
    /// The lookup cache usually knows (the kernel looked the name up
    /// before unlinking or renaming over it); otherwise the server is
    /// asked, except with `lookupcache=none` while no file is open: then
    /// every path walk LOOKUPs, which refreshes the attributes anyway. Any
    /// failure means "nothing there": the REMOVE or RENAME that follows
    /// reports the real error.
    async fn named_child(&self, dir: &Inode, name: &[u8], cred: &Cred) -> Option<NfsFh3> {
        let cached = dir.state.lock().names.get(name).cloned();
        match cached {
            Some(Dentry::Positive(fh)) => return Some(fh),
            Some(Dentry::Negative { until }) if Instant::now() < until => return None,
            _ => {}
        }
        if self.cfg.lookupcache == LookupCache::None && self.handles.lock().is_empty() {
            return None;
        }
        self.settle_dir(dir).await;
        self.client.lookup(cred, &dir.fh, name).await.ok().map(|r| r.object)
    }

    /// The inode of `fh` if it is a regular file open here and not already
    /// hidden: removing its name must go through a silly rename. Not if
    /// the server keeps it alive for our opens (every handle holds one, and
    /// it said so: `preserve_unlinked`): then the name goes at once, and
    /// the opens stay held until the last close.
    fn open_file(&self, fh: &NfsFh3) -> Option<Arc<Inode>> {
        let child = self.inodes.by_fh(fh)?;
        let mut st = child.state.lock();
        // Handles whose release is still running were closed by their
        // programs before this unlink: the file is not open for them (their
        // write-back and CLOSE need no name, and a file with another name
        // keeps that one).
        let open = child.ftype == Ftype3::Reg && st.open_count > st.closing && st.silly.is_none();
        if open && st.preserve_unlinked && st.server_opens == st.open_count {
            st.unlinked_open = true;
            return None;
        }
        drop(st);
        open.then_some(child)
    }

    /// A namespace operation changed the object `fh` names (its link
    /// count, its ctime): its cached attributes must be asked for again.
    fn attrs_changed(&self, fh: &NfsFh3) {
        if let Some(inode) = self.inodes.by_fh(fh) {
            inode.state.lock().attr_timeout = Duration::ZERO;
        }
    }

    /// Rename open file `child`, known as `name` in `dir`, to a hidden name
    /// in `dir` that does not exist yet, and remember it on the inode for
    /// the last close. If the file was closed meanwhile, remove it now.
    async fn silly_rename(
        &self,
        dir: &Arc<Inode>,
        name: &[u8],
        child: &Arc<Inode>,
        cred: &Cred,
    ) -> FsResult<()> {
        let fileid = child.state.lock().attr.fileid;
        let min = self.cfg.ac_bounds(true).0;
        for _ in 0..SILLY_TRIES_MAX {
            let n = self.silly_counter.fetch_add(1, Ordering::Relaxed);
            let hidden = Bytes::from(format!(".nfs{fileid:016x}{n:08x}"));
            // RENAME silently replaces an existing target, so make sure
            // there is none (someone else's file, or a leftover).
            match self.client.lookup(cred, &dir.fh, &hidden).await {
                Ok(_) => continue,
                Err(NfsError::Nfs(Nfsstat3::Noent)) => {}
                Err(e) => return Err(e.into()),
            }
            let gen = dir.state.lock().begin_change();
            let r = self.client.rename(cred, &dir.fh, name, &dir.fh, &hidden).await;
            {
                let mut st = dir.state.lock();
                st.end_change(r.as_ref().ok().map(|r| &r.fromdir_wcc), gen, Instant::now(), min);
                if r.is_ok() {
                    st.names.remove(name);
                    st.names.insert(hidden.clone(), Dentry::Positive(child.fh.clone()));
                } else {
                    st.complete = false;
                }
            }
            match r {
                // Created between our LOOKUP and RENAME: try another name.
                Err(NfsError::Nfs(Nfsstat3::Exist)) => continue,
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
            let silly = SillyName { dir: dir.clone(), name: hidden, cred: cred.clone() };
            let closed_meanwhile = {
                let mut st = child.state.lock();
                // The rename moved the file's ctime.
                st.attr_timeout = Duration::ZERO;
                st.hidden_link = true;
                if st.open_count > 0 {
                    st.silly = Some(silly);
                    None
                } else {
                    Some(silly)
                }
            };
            if let Some(silly) = closed_meanwhile {
                self.remove_silly(child, silly).await;
            }
            return Ok(());
        }
        tracing::warn!(fileid, "no free hidden name for a file unlinked while open");
        Err(NfsError::Nfs(Nfsstat3::Exist).into())
    }

    /// REMOVE the hidden name of a file whose last handle is gone. Errors
    /// are logged: the unlink that asked for this has long returned.
    async fn remove_silly(&self, child: &Inode, silly: SillyName) {
        let SillyName { dir, name, cred } = silly;
        let gen = dir.state.lock().begin_change();
        let r = self.client.remove(&cred, &dir.fh, &name).await;
        {
            let mut st = dir.state.lock();
            st.names.remove(&name);
            st.end_change(r.as_ref().ok(), gen, Instant::now(), self.cfg.ac_bounds(true).0);
        }
        {
            // The hidden name is gone (or, after an error, stays and is
            // shown for what it is: a link): ask for the count again.
            let mut st = child.state.lock();
            st.attr_timeout = Duration::ZERO;
            st.hidden_link = false;
        }
        if let Err(e) = r {
            tracing::warn!(
                name = %String::from_utf8_lossy(&name),
                error = %e,
                "could not remove the hidden name of a file unlinked while open"
            );
        }
    }

    /// Ask the server for attributes if the cached ones have expired.
    pub(crate) async fn revalidate(&self, inode: &Arc<Inode>, cred: &Cred) -> FsResult<()> {
        if self.trusted(inode, &inode.state.lock(), Instant::now()) {
            self.counters.attr_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.counters.attr_misses.fetch_add(1, Ordering::Relaxed);
        self.settle_dir(inode).await;
        let gen = self.clock.tick();
        let a = self.client.getattr(cred, &inode.fh).await?;
        self.fresh_attrs(inode, a, gen, true);
        Ok(())
    }

    /// Whether the server promised that no other client changes `inode`
    /// (a delegation of a regular file, or of a directory: its entries and
    /// attributes; see `NfsOps::delegated`).
    pub(crate) fn delegated(&self, inode: &Inode) -> bool {
        matches!(inode.ftype, Ftype3::Reg | Ftype3::Dir) && self.client.delegated(&inode.fh)
    }

    /// Whether `inode`'s cached attributes (`st`) may be used without
    /// asking: within their period, or held under a delegation, which
    /// vouches for them (nothing but this client can change the file)
    /// until it is recalled.
    pub(crate) fn trusted(&self, inode: &Inode, st: &InodeState, now: Instant) -> bool {
        st.attr_valid(now) || (!st.attr_timeout.is_zero() && self.delegated(inode))
    }

    /// Attributes `a` from a call sent at clock tick `gen` (not one of our
    /// changes); ignored if older than the cached ones.
    pub(crate) fn fresh_attrs(&self, inode: &Inode, a: Fattr3, gen: u64, revalidation: bool) {
        let bounds = self.cfg.ac_bounds(inode.is_dir());
        inode.state.lock().fresh_attrs(a, gen, Instant::now(), bounds, revalidation);
    }

    fn make_inode(&self, ino: u64, fh: &NfsFh3, attr: &Fattr3) -> Inode {
        let (min, _) = self.cfg.ac_bounds(attr.ftype == Ftype3::Dir);
        let file_budget = (self.cfg.eager && attr.ftype == Ftype3::Reg)
            .then(|| ByteBudget::new(self.cfg.eager_file_bytes_max));
        Inode {
            ino,
            fh: fh.clone(),
            ftype: attr.ftype,
            disk_key: file_key(attr.fileid, fh.data.as_bytes()),
            state: Mutex::new(InodeState::new(
                *attr,
                Instant::now(),
                min,
                self.mem_bytes.clone(),
                self.clock.clone(),
            )),
            kick: Notify::new(),
            progress: Notify::new(),
            file_budget,
            generation_given: 0,
        }
    }

    pub(crate) fn intern_inode(&self, fh: &NfsFh3, attr: &Fattr3, root: bool) -> (Arc<Inode>, bool) {
        self.inodes.intern(fh, attr, |ino| self.make_inode(ino, fh, attr), root, None)
    }

    /// The inode for a handle the server just gave us with its attributes,
    /// from a call sent at clock tick `gen`.
    pub(crate) fn intern(&self, fh: &NfsFh3, attr: &Fattr3, gen: u64) -> Arc<Inode> {
        self.intern_at(fh, attr, gen, None)
    }

    /// [`Shared::intern`]; `at`: the inode number and generation the kernel
    /// was given for the object before it existed on the server (`early`).
    fn intern_at(&self, fh: &NfsFh3, attr: &Fattr3, gen: u64, at: Option<(u64, u32)>) -> Arc<Inode> {
        let (inode, new) = match at {
            None => self.intern_inode(fh, attr, false),
            Some((ino, generation)) => {
                let make = |n| Inode { generation_given: generation, ..self.make_inode(n, fh, attr) };
                self.inodes.intern(fh, attr, make, false, Some(ino))
            }
        };
        if new {
            inode.state.lock().attr_gen = gen;
        } else {
            self.fresh_attrs(&inode, *attr, gen, false);
        }
        inode
    }

    /// Take `attrs` to go with the data at close if they may wait (see
    /// `InodeState::defer_setattr`): the inode is then among the files with
    /// work to do, where unmount and sync find it. `None`: send them now.
    fn defer_setattr(&self, inode: &Arc<Inode>, attrs: &Sattr3, cred: &Cred) -> Option<Entry> {
        if inode.ftype != Ftype3::Reg {
            return None;
        }
        let mode_may_wait = attrs.mode.is_some()
            && self.cfg.deleg_chmod_hold
            && self.recalls_write_back.load(Ordering::Relaxed)
            && !self.cfg.noac;
        {
            let mut st = inode.state.lock();
            // The delegation is checked under the inode's lock: a recall
            // marks it recalled first and then looks for what the file
            // holds (`unwritten`, under this lock), so either it finds the
            // mode held here and writes it back, or this finds no delegation.
            let mode_may_wait = mode_may_wait && self.client.write_delegated(&inode.fh);
            if !st.defer_setattr(attrs, cred, mode_may_wait) {
                return None;
            }
            if mode_may_wait && st.mode_held() {
                self.counters.modes_held.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.dirty_inodes.lock().insert(inode.ino, inode.clone());
        Some(self.entry_for(inode))
    }

    /// The inode's attributes for FUSE.
    pub(crate) fn entry_for(&self, inode: &Inode) -> Entry {
        let st = inode.state.lock();
        // While our writes are not all on the server (or their times not
        // in attributes from it yet), the kernel must ask again each time:
        // the times and size it would keep are about to change.
        let moving = st.file.written_at.is_some() || !st.file.settled();
        Entry {
            ino: inode.ino,
            attr: st.visible_attr(),
            ttl: if moving { Duration::ZERO } else { st.attr_ttl(Instant::now()) },
            generation: inode.generation(),
        }
    }

    /// What the kernel is shown of `ino` while it is a file created early
    /// (`early`): the table's attributes, asked again each time.
    pub(crate) fn early_entry(&self, ino: u64) -> Option<Entry> {
        let (attr, generation) = self.early.shown(ino)?;
        Some(Entry { ino, attr, ttl: Duration::ZERO, generation })
    }

    /// As `entry_for`, counting one kernel reference.
    fn reference(&self, inode: &Inode) -> Entry {
        inode.state.lock().nlookup += 1;
        self.entry_for(inode)
    }

    pub(crate) fn remember_name(&self, dir: &Inode, name: Bytes, d: Dentry) {
        let mut st = dir.state.lock();
        if st.names.len() >= DIR_ENTRIES_MAX {
            st.names.clear();
            st.complete = false;
        }
        st.names.insert(name, d);
    }

    /// Finish a CREATE/MKDIR/SYMLINK/MKNOD/LINK in `dir`: apply the
    /// directory's WCC, intern the new object and cache its name.
    async fn finish_dir_change(
        &self,
        dir: &Arc<Inode>,
        gen: u64,
        r: Result<(PostOpFh3, PostOpAttr, WccData), NfsError>,
        name: &[u8],
        cred: &Cred,
    ) -> FsResult<Entry> {
        self.finish_dir_change_at(dir, gen, r, name, cred, None).await
    }

    /// [`Shared::finish_dir_change`]; `at`: the number and generation the
    /// kernel was given for the new object before it existed (`early`).
    async fn finish_dir_change_at(
        &self,
        dir: &Arc<Inode>,
        gen: u64,
        r: Result<(PostOpFh3, PostOpAttr, WccData), NfsError>,
        name: &[u8],
        cred: &Cred,
        at: Option<(u64, u32)>,
    ) -> FsResult<Entry> {
        let now = Instant::now();
        let key = Bytes::copy_from_slice(name);
        {
            let mut st = dir.state.lock();
            st.names.remove(&key);
            st.end_change(r.as_ref().ok().map(|r| &r.2), gen, now, self.cfg.ac_bounds(true).0);
            if r.is_err() {
                // Whether the name exists now is not known for sure.
                st.complete = false;
            }
        }
        let (fh, attr, _) = r?;
        // A server may leave out the handle or attributes: find them.
        let fh = match fh {
            Some(fh) => fh,
            None => self.client.lookup(cred, &dir.fh, name).await?.object,
        };
        let (attr, gen) = match attr {
            Some(a) => (a, gen),
            None => {
                let gen = self.clock.tick();
                (self.client.getattr(cred, &fh).await?, gen)
            }
        };
        let inode = self.intern_at(&fh, &attr, gen, at);
        if self.cfg.lookupcache != LookupCache::None {
            self.remember_name(dir, key, Dentry::Positive(fh));
        }
        Ok(self.reference(&inode))
    }
}

impl<C: NfsOps> LastClose for Shared<C> {
    fn remove_silly_later(self: Arc<Self>, inode: Arc<Inode>, silly: SillyName) {
        // On the cache's own runtime whatever thread closed the file (the
        // mount's FUSE reader threads belong to none). A runtime already
        // shut down (teardown) drops the task: the hidden file then stays,
        // as after a client crash.
        let counted = self.background.start();
        let rt = self.runtime.clone();
        rt.spawn(async move {
            self.remove_silly(&inode, silly).await;
            drop(counted);
        });
    }
}

/// The periodic write-back task: ends when the cache is dropped.
async fn expire_dirty_data<C: NfsOps>(shared: std::sync::Weak<Shared<C>>, expire: Duration) {
    let mut tick = tokio::time::interval(expire / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut seen = std::collections::HashSet::new();
    loop {
        tick.tick().await;
        let Some(shared) = shared.upgrade() else { return };
        seen = shared.expire_dirty(&seen);
    }
}
