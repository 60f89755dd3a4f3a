//! Inodes: the table from FUSE inode numbers to NFS file handles, and each
//! inode's cached state (attributes, data, write-back, lookup cache) behind
//! its own lock.
//!
//! # Attribute and data validity
//! An inode's attributes are trusted for an adaptive period: `ac*min`
//! after they change, doubling at each revalidation that finds them
//! unchanged, up to `ac*max` (as Linux does). Cached data (file chunks, a
//! directory's names) belongs to a *validator*, the (mtime, ctime, size)
//! the server had when the data was known good. Fresh attributes with a
//! different validator mean someone else changed the object: the clean
//! cache is dropped. Our own changes come back with weak cache consistency
//! data (pre-op and post-op attributes): each reply's (pre → post) pair is
//! chained onto the validator, so a change that was only ours moves the
//! validator along and keeps the cache. Pipelined WRITE replies arrive out
//! of order, so pairs that do not chain yet wait; if any is left unchained
//! once none of our changes is in flight, another client changed the file
//! between them and the cache is dropped.
//!
//! # Which attributes are newer
//! Replies do not arrive in the order the server produced them (pipelined
//! WRITEs, a READ sent before a WRITE and answered after it), and ctime
//! cannot order them: Linux file systems stamp times from a clock that
//! moves every few milliseconds, so a burst of changes shares one ctime.
//! As Linux's client does (`attr_gencount`), every call that may bring
//! attributes takes a tick of the mount's [`AttrClock`] before it is sent,
//! and its attributes replace the cached ones only if its tick is later
//! than that of the call whose attributes are cached, or its ctime is
//! strictly later. A stale answer can therefore never shrink the size a
//! program (or a mapping) sees. The size also covers what we wrote
//! (`written_end`) until a call sent after all our writes were answered
//! brings the server's own size.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eagernfs_proto::nfs3::{Fattr3, Ftype3, NfsFh3, Nfstime3, Sattr3, SetTime, WccData, Writeverf3};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::ahead::Listed;
use super::budget::ByteBudget;
use super::dirent::DirEntry;
use super::extents::Extents;
use super::validator::Validator;
use crate::ops::{Cred, NfsError};

/// The inode number FUSE uses for the mount's root.
pub const ROOT_INO: u64 = 1;
/// Inode numbers handed out when a fileid cannot be used as is (it is 1,
/// or another object already has it): counted up from here.
const REMAP_BASE: u64 = 1 << 63;
/// Unchained WCC pairs kept before we give up and drop the cache.
const WCC_PENDING_MAX: usize = 1024;
/// Names cached per directory before the lookup cache starts over.
pub(crate) const DIR_ENTRIES_MAX: usize = 65536;
/// Inode numbers whose file handles are remembered after the kernel
/// forgot them, so a FUSE file handle (`name_to_handle_at`, an NFS
/// re-export) still opens the file: the kernel then asks LOOKUP of "." in
/// that inode number. About 100 bytes each.
pub(crate) const FORGOTTEN_MAX: usize = 1 << 17;

/// Callers whose ACCESS answers are kept per inode. A file is rarely
/// checked by more than a few identities at once; past this the oldest
/// answer goes, so the cost per inode stays a few hundred bytes.
pub(crate) const ACCESS_ENTRIES_MAX: usize = 8;

/// S_ISUID | S_ISGID.
pub(crate) const SETID_BITS: u32 = 0o6000;

/// `mode` as Linux (6.x, `setattr_should_drop_sgid`) leaves it after a
/// write by someone without CAP_FSETID: set-uid always goes; set-gid goes
/// with group execute, or without it when the writer is not in the file's
/// group (`writer_in_group`).
pub(crate) fn mode_without_setid(mode: u32, writer_in_group: bool) -> u32 {
    let mut m = mode & !0o4000;
    if m & 0o2000 != 0 && (m & 0o010 != 0 || !writer_in_group) {
        m &= !0o2000;
    }
    m
}

fn time_key(t: Nfstime3) -> (u32, u32) {
    (t.seconds, t.nseconds)
}

/// Now, on the clock Linux file systems stamp times with
/// (`CLOCK_REALTIME_COARSE`): a time we show for a write of ours is then
/// never later than the one the server (on the same clock) gives it.
pub(crate) fn coarse_now() -> Nfstime3 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    Nfstime3 { seconds: ts.tv_sec.clamp(0, u32::MAX as i64) as u32, nseconds: ts.tv_nsec as u32 }
}

/// The mount's attribute clock: a tick is taken before each call whose
/// reply may carry attributes, so replies can be ordered by when their
/// calls were sent (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct AttrClock(AtomicU64);

impl AttrClock {
    /// A tick later than every tick taken before.
    pub(crate) fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// A cached chunk of file data.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    /// The chunk's bytes: `CHUNK_BYTES` of them, or fewer at end of file.
    pub(crate) data: Bytes,
    /// The server said end-of-file within this chunk.
    pub(crate) eof: bool,
    /// The buffer of the READ the chunk came in, and where in it the chunk
    /// starts: consecutive chunks of one READ are consecutive there, so a
    /// read spanning them is a slice of it, not a copy.
    pub(crate) whole: Bytes,
    pub(crate) at: usize,
}

impl Chunk {
    /// A chunk that is `data[at..at + len]` of one READ's `data`.
    pub(crate) fn of_read(whole: &Bytes, at: usize, len: usize, eof: bool) -> Self {
        Chunk { data: whole.slice(at..at + len), eof, whole: whole.clone(), at }
    }

    /// A chunk that came alone (from the disk cache).
    pub(crate) fn alone(data: Bytes, eof: bool) -> Self {
        Chunk { whole: data.clone(), data, eof, at: 0 }
    }

    /// A chunk is usable if it is full or ends at end of file.
    pub(crate) fn complete(&self, chunk_bytes: u64) -> bool {
        self.eof || self.data.len() as u64 == chunk_bytes
    }
}

/// `later`'s changes over `into`'s: one SETATTR that leaves what the two
/// in that order would.
pub(crate) fn merge_later(into: &mut Sattr3, later: &Sattr3) {
    into.mode = later.mode.or(into.mode);
    into.uid = later.uid.or(into.uid);
    into.gid = later.gid.or(into.gid);
    into.size = later.size.or(into.size);
    if later.atime != SetTime::DontChange {
        into.atime = later.atime;
    }
    if later.mtime != SetTime::DontChange {
        into.mtime = later.mtime;
    }
}

/// Attribute changes to a file open for writing here, not sent yet (see
/// `InodeState::defer_setattr`).
#[derive(Clone, Debug)]
pub(crate) struct PendingAttrs {
    /// Every change so far, later ones over earlier ones.
    pub(crate) attrs: Sattr3,
    /// Whose changes they are (the file's creator here).
    pub(crate) cred: Cred,
}

/// Data acknowledged by an UNSTABLE WRITE, kept until a COMMIT returns the
/// same verifier.
#[derive(Clone, Debug)]
pub(crate) struct Unstable {
    pub(crate) offset: u64,
    pub(crate) data: Bytes,
    pub(crate) verf: Writeverf3,
}

/// A regular file's data cache and write-back state.
pub(crate) struct FileData {
    /// Clean chunks by index.
    chunks: BTreeMap<u64, Chunk>,
    /// The mount's count of clean bytes in memory, kept by the chunk
    /// methods below so no caller can forget it.
    mem_bytes: Arc<AtomicU64>,
    /// Bumped whenever cached data may no longer match the server (an
    /// invalidation or one of our writes): a READ started under an older
    /// generation must not be cached.
    pub(crate) gen: u64,
    /// Chunks being fetched: wait for the sender to go away.
    pub(crate) fetching: HashMap<u64, watch::Receiver<()>>,

    /// Read-ahead: where a sequential reader would read next.
    pub(crate) ra_next: u64,
    /// Read-ahead: consecutive sequential reads seen.
    pub(crate) ra_seq: u32,
    /// Read-ahead: prefetch has been started up to this offset.
    pub(crate) ra_until: u64,

    /// Written, not yet sent.
    pub(crate) dirty: Extents,
    /// Sent, WRITE not answered: offset → data. Ranges never overlap.
    pub(crate) inflight: BTreeMap<u64, Bytes>,
    /// Acknowledged UNSTABLE, not yet committed, by arrival order (older
    /// first; a later entry may cover an earlier one).
    pub(crate) unstable: BTreeMap<u64, Unstable>,
    pub(crate) next_unstable_id: u64,
    pub(crate) unstable_bytes: u64,
    /// A COMMIT is out, covering unstable ids up to this one.
    pub(crate) commit_in_flight: Option<u64>,
    /// Verifier mismatches in a row (a server that restarts for ever
    /// must not keep us resending for ever).
    pub(crate) resend_rounds: u32,
    /// The file's flusher task is running.
    pub(crate) flusher_running: bool,
    /// Flush everything, not only full `wsize` pieces (memory pressure).
    pub(crate) background: bool,
    /// The dirty data has aged past `dirty_expire`: write all of it back,
    /// short pieces included, and COMMIT, as if someone were flushing.
    pub(crate) expired: bool,
    /// Callers waiting in flush/fsync: send everything and COMMIT.
    pub(crate) flush_waiters: u32,
    /// The flusher is parked on the mount's unstable bound.
    pub(crate) stalled: bool,
    /// Credentials for write-back: the last writer's.
    pub(crate) write_cred: Cred,
    /// One past the last byte we wrote and the server's size in our cached
    /// attributes may not reflect yet.
    pub(crate) written_end: u64,
    /// The clock's tick when the file last became clean with `written_end`
    /// set: attributes from a call sent after it include all our writes,
    /// and `written_end` (and `written_at`) are dropped when they arrive.
    pub(crate) written_settled: Option<u64>,
    /// When we last wrote (the system's coarse clock, the one Linux file
    /// systems stamp times with): a `stat` of a file with data not on the
    /// server yet shows it as mtime and ctime, as a local file system
    /// would, instead of the times from before the write.
    pub(crate) written_at: Option<Nfstime3>,
    /// A write by a caller who may not keep set-id bits (this one) is not
    /// on the server yet: show the mode without them (`visible_attr`).
    pub(crate) setid_dropped: Option<Cred>,
    /// Open handles that write synchronously (`O_SYNC`/`O_DSYNC`, or the
    /// `sync` mount option): while there are any, WRITEs go FILE_SYNC.
    pub(crate) sync_opens: u32,
    /// Open handles that may write.
    pub(crate) write_opens: u32,
    /// Who created the file through this mount, if the server made them
    /// its owner (CREATE's reply named their uid): the server will take
    /// their mode, owner and time changes, so those can wait for close.
    pub(crate) creator: Option<Cred>,
    /// Attribute changes waiting to go with the data at close.
    pub(crate) pending_attrs: Option<PendingAttrs>,
    /// When the last held change was made (the coarse clock, as
    /// `written_at`): a `stat` shows it as ctime until the SETATTR that
    /// carries the change is answered, as a local file system would.
    pub(crate) attrs_held_at: Option<Nfstime3>,
    /// Deferred changes in a SETATTR not answered yet: shown (under any
    /// newer `pending_attrs`) until its reply's attributes are cached, and
    /// waited for by a flush, so neither a `stat` nor a `close()` sees the
    /// file as it was before them.
    pub(crate) sending_attrs: Option<Sattr3>,

    /// Write-back errors so far (Linux's errseq): an open handle reports
    /// each error once, on its next write, flush or fsync.
    pub(crate) err_seq: u64,
    pub(crate) last_err: Option<NfsError>,
}

impl FileData {
    fn new(mem_bytes: Arc<AtomicU64>) -> Self {
        FileData {
            chunks: BTreeMap::new(),
            mem_bytes,
            gen: 0,
            fetching: HashMap::new(),
            ra_next: 0,
            ra_seq: 0,
            ra_until: 0,
            dirty: Extents::default(),
            inflight: BTreeMap::new(),
            unstable: BTreeMap::new(),
            next_unstable_id: 0,
            unstable_bytes: 0,
            commit_in_flight: None,
            resend_rounds: 0,
            flusher_running: false,
            background: false,
            expired: false,
            flush_waiters: 0,
            stalled: false,
            write_cred: Cred::default(),
            written_end: 0,
            written_settled: None,
            written_at: None,
            setid_dropped: None,
            sync_opens: 0,
            write_opens: 0,
            creator: None,
            pending_attrs: None,
            attrs_held_at: None,
            sending_attrs: None,
            err_seq: 0,
            last_err: None,
        }
    }

    pub(crate) fn chunk(&self, index: u64) -> Option<&Chunk> {
        self.chunks.get(&index)
    }

    pub(crate) fn insert_chunk(&mut self, index: u64, c: Chunk) {
        self.mem_bytes.fetch_add(c.data.len() as u64, Ordering::Relaxed);
        if let Some(old) = self.chunks.insert(index, c) {
            self.mem_bytes.fetch_sub(old.data.len() as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn remove_chunk(&mut self, index: u64) {
        if let Some(old) = self.chunks.remove(&index) {
            self.mem_bytes.fetch_sub(old.data.len() as u64, Ordering::Relaxed);
        }
    }

    /// Drop the chunks with indexes in `range` (a write or truncate touched
    /// them, or a sequential reader is past them: see
    /// `CacheConfig::drop_behind`). Returns how many there were.
    pub(crate) fn remove_chunks(&mut self, range: impl std::ops::RangeBounds<u64>) -> u64 {
        let keys: Vec<u64> = self.chunks.range(range).map(|(k, _)| *k).collect();
        for &k in &keys {
            self.remove_chunk(k);
        }
        keys.len() as u64
    }

    pub(crate) fn clear_chunks(&mut self) {
        let freed: u64 = self.chunks.values().map(|c| c.data.len() as u64).sum();
        self.mem_bytes.fetch_sub(freed, Ordering::Relaxed);
        self.chunks.clear();
    }

    #[cfg(test)]
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// No data of the file is cached here.
    pub(crate) fn no_chunks(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Nothing dirty, in flight or uncommitted, and no attribute change
    /// waiting: the server has everything.
    pub(crate) fn settled(&self) -> bool {
        self.clean() && self.pending_attrs.is_none() && self.sending_attrs.is_none()
    }

    /// Move the deferred changes to the SETATTR about to carry them.
    pub(crate) fn take_pending_attrs(&mut self) -> Option<PendingAttrs> {
        let p = self.pending_attrs.take()?;
        self.sending_attrs = Some(p.attrs);
        Some(p)
    }

    /// Nothing dirty, in flight or uncommitted.
    pub(crate) fn clean(&self) -> bool {
        self.dirty.is_empty()
            && self.inflight.is_empty()
            && self.unstable.is_empty()
            && self.commit_in_flight.is_none()
    }

    pub(crate) fn record_error(&mut self, e: NfsError) {
        self.err_seq += 1;
        self.last_err = Some(e);
    }
}

impl Drop for FileData {
    fn drop(&mut self) {
        // A forgotten inode's chunks no longer count against the mount.
        self.clear_chunks();
    }
}

/// A cached name in a directory.
#[derive(Clone, Debug)]
pub(crate) enum Dentry {
    /// The name exists: its handle (the inode table maps it to an inode).
    Positive(NfsFh3),
    /// The name does not exist, as of the directory's attributes that
    /// expire at `until`.
    Negative { until: Instant },
}

/// The hidden name a file unlinked while open lives on under (Linux's
/// "silly rename"): REMOVEd when the last open handle is released.
pub(crate) struct SillyName {
    /// The directory holding the hidden name.
    pub(crate) dir: Arc<Inode>,
    /// The hidden name, `.nfs<fileid><counter>`.
    pub(crate) name: Bytes,
    /// Who unlinked the file: the deferred REMOVE is theirs.
    pub(crate) cred: Cred,
}

/// An unlink or rmdir that returned before its REMOVE was sent
/// (`dirops=async`): queued on its directory (see `dirops`).
pub(crate) struct QueuedRemove {
    pub(crate) name: Bytes,
    pub(crate) victim: Arc<Inode>,
    /// The victim's last name: its delegation goes back with the REMOVE.
    pub(crate) last: bool,
    pub(crate) cred: Cred,
    /// The directory's change count for it (`begin_change`).
    pub(crate) gen: u64,
    /// Its place among the mount's removes in flight.
    pub(crate) slot: tokio::sync::OwnedSemaphorePermit,
}

/// What the server answered to one caller's ACCESS (Linux's access cache).
#[derive(Clone, Debug)]
pub(crate) struct AccessEntry {
    pub(crate) cred: Cred,
    /// The ACCESS3 bits asked about.
    pub(crate) asked: u32,
    /// Of those, the bits the server granted.
    pub(crate) granted: u32,
    /// The answer is trusted no longer than the attributes that came with
    /// it were.
    pub(crate) until: Instant,
}

/// Where a directory's listing read ahead stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListingAhead {
    /// Not read ahead (or read by a program since).
    No,
    /// A READDIR for it is out: a program's read waits for it.
    Reading,
    /// Kept, not read by a program yet (counted when it is).
    Kept,
}

/// The lock-protected state of an inode.
pub(crate) struct InodeState {
    pub(crate) attr: Fattr3,
    /// The clock tick of the call whose attributes `attr` holds (0: the
    /// ones the inode was made with).
    pub(crate) attr_gen: u64,
    /// The mount's attribute clock.
    pub(crate) clock: Arc<AttrClock>,
    /// When the attributes were last confirmed by the server.
    pub(crate) attr_fetched: Instant,
    /// How long they are trusted from then.
    pub(crate) attr_timeout: Duration,
    /// The validator cached data belongs to.
    pub(crate) validator: Validator,
    /// Our changes in flight (their WCC replies still to come).
    pub(crate) changes_in_flight: u32,
    /// WCC (pre → post) pairs that do not chain onto `validator` yet.
    pub(crate) wcc_pending: Vec<(Validator, Validator)>,
    /// One of our changes came back without pre-op attributes: assume it
    /// was ours (as Linux does) once the changes drain.
    pub(crate) wcc_unknown: bool,
    /// Its listing is being read ahead, or was and no program has read it
    /// yet (see `dir`).
    pub(crate) listing_ahead: ListingAhead,
    /// Directories: REMOVEs of its names sent after their unlinks returned
    /// (`dirops=async`) and not answered yet (see `dirops`).
    pub(crate) removes_in_flight: u32,
    /// Of those, the ones not sent yet, in order, and whether a task is
    /// sending them (see `dirops`: each call carries what queued meanwhile).
    pub(crate) removes_queue: Vec<QueuedRemove>,
    pub(crate) removes_sending: bool,
    /// Directories: creates that returned before the server made the file
    /// (`dirops=async`, see `early`) whose OPEN is not answered yet.
    pub(crate) creates_in_flight: u32,
    /// Open file handles on this inode.
    pub(crate) open_count: u32,
    /// Of those, the handles the program has closed whose release is still
    /// running (writing back, ending the server's open): the file is no
    /// longer open for an unlink, which needs no hidden name for them.
    pub(crate) closing: u32,
    /// Of those, the handles that hold an open on the server (NFSv4; see
    /// `NfsOps::open_file`).
    pub(crate) server_opens: u32,
    /// The server said it keeps the file while an open of ours is held,
    /// even once its last name is removed (OPEN4_RESULT_PRESERVE_UNLINKED):
    /// while every handle here holds one, an unlink needs no hidden name.
    pub(crate) preserve_unlinked: bool,
    /// Unlinked while open, kept alive by the server for our opens (see
    /// `preserve_unlinked`): those opens must last until the last close.
    pub(crate) unlinked_open: bool,
    /// Kernel lookup count (FUSE `forget` lowers it).
    pub(crate) nlookup: u64,
    pub(crate) file: FileData,
    /// Directories: name → cached lookup result.
    pub(crate) names: HashMap<Bytes, Dentry>,
    /// Directories: `names` holds every name the directory has (we made
    /// it, and every change since was ours), so a name not there does not
    /// exist: a lookup of a new name is answered without asking (an untar
    /// looks up every name it is about to create). Cleared with `names`,
    /// and after any namespace call whose outcome is not known.
    pub(crate) complete: bool,
    /// Directories: the whole listing (one READDIRPLUS page that reached
    /// the end), for the next opendir while the attributes are trusted, as
    /// Linux keeps a directory's pages. Gone with any change we make to
    /// the directory and when its attributes show someone else's.
    pub(crate) listing: Option<Arc<Vec<DirEntry>>>,
    /// Counts what makes a listing fetched meanwhile stale (see `listing`).
    pub(crate) listing_gen: u64,
    /// Regular files: where a READDIR page listed it last, for reading
    /// ahead of a program that opens the page's files in order (`ahead`).
    pub(crate) listed: Option<Listed>,
    /// Set once the file was unlinked (or renamed over) while open and
    /// lives on under a hidden name until its last close.
    pub(crate) silly: Option<SillyName>,
    /// The file has a hidden name from a silly rename, from the RENAME
    /// until the REMOVE of that name has returned (longer than `silly`,
    /// which the last close takes). The hidden name is not a link a
    /// program made: the link count shown leaves it out, as Linux's NFS
    /// client drops `nlink` locally (`nfs_drop_nlink`) and a local file
    /// system shows 0 for an open file with no name left.
    pub(crate) hidden_link: bool,
    /// Bumped whenever cached data is dropped because the object changed in
    /// a way that was not (only) ours: what the kernel cached may be stale.
    pub(crate) data_epoch: u64,
    /// `data_epoch` when the kernel last opened the file: if it has not
    /// moved since, the kernel may keep its page cache at the next open.
    pub(crate) kernel_epoch: Option<u64>,
    /// ACCESS answers by caller, oldest first, at most
    /// `ACCESS_ENTRIES_MAX`. Each expires with the attributes it came
    /// with; all are cleared when fresh attributes show a new mode or
    /// owner, and by our SETATTRs.
    pub(crate) access: Vec<AccessEntry>,
}

impl InodeState {
    pub(crate) fn new(
        attr: Fattr3,
        now: Instant,
        min: Duration,
        mem_bytes: Arc<AtomicU64>,
        clock: Arc<AttrClock>,
    ) -> Self {
        InodeState {
            attr,
            attr_gen: 0,
            clock,
            attr_fetched: now,
            attr_timeout: min,
            validator: Validator::of(&attr),
            changes_in_flight: 0,
            wcc_pending: Vec::new(),
            wcc_unknown: false,
            open_count: 0,
            closing: 0,
            listing_ahead: ListingAhead::No,
            removes_in_flight: 0,
            creates_in_flight: 0,
            removes_queue: Vec::new(),
            removes_sending: false,
            server_opens: 0,
            preserve_unlinked: false,
            unlinked_open: false,
            nlookup: 0,
            file: FileData::new(mem_bytes),
            names: HashMap::new(),
            complete: false,
            listing: None,
            listing_gen: 0,
            listed: None,
            data_epoch: 0,
            kernel_epoch: None,
            silly: None,
            hidden_link: false,
            access: Vec::new(),
        }
    }

    /// The server's cached answer to `cred` asking for `want` (ACCESS3
    /// bits): `Some(granted & want)` if an answer covering every bit of
    /// `want` is still trusted. `delegated`: the file is held under a
    /// delegation, so no other client can change its mode or owner, and
    /// answers are trusted until it is recalled (as Linux's client does).
    pub(crate) fn cached_access(&self, cred: &Cred, want: u32, now: Instant, delegated: bool) -> Option<u32> {
        let delegated = self.vouched(delegated);
        if !delegated && !self.attr_valid(now) {
            return None;
        }
        let e = self.access.iter().find(|e| e.cred == *cred)?;
        ((delegated || now < e.until) && want & !e.asked == 0).then_some(e.granted & want)
    }

    /// Remember the server's ACCESS answer for `cred`, trusted as long as
    /// the attributes are now.
    pub(crate) fn remember_access(&mut self, cred: &Cred, asked: u32, granted: u32) {
        let until = self.attr_fetched + self.attr_timeout;
        if self.attr_timeout.is_zero() {
            // noac: nothing may be trusted, so keep nothing.
            return;
        }
        self.access.retain(|e| e.cred != *cred);
        if self.access.len() >= ACCESS_ENTRIES_MAX {
            self.access.remove(0);
        }
        self.access.push(AccessEntry { cred: cred.clone(), asked, granted: granted & asked, until });
    }

    /// Whether a delegation (`delegated`: one is held) vouches for the
    /// cached attributes: it does unless they were dropped (a zero period:
    /// one of our namespace changes moved the link count or ctime, which
    /// no reply told us; or `noac`, which trusts nothing). The delegation
    /// only says no one *else* changes the file.
    pub(crate) fn vouched(&self, delegated: bool) -> bool {
        delegated && !self.attr_timeout.is_zero()
    }

    /// Whether the attributes may be used without asking the server.
    pub(crate) fn attr_valid(&self, now: Instant) -> bool {
        now < self.attr_fetched + self.attr_timeout
    }

    /// How much longer the attributes are trusted (what FUSE may cache).
    pub(crate) fn attr_ttl(&self, now: Instant) -> Duration {
        (self.attr_fetched + self.attr_timeout).saturating_duration_since(now)
    }

    /// The attributes as a local program should see them: the size
    /// includes our writes the server has not seen yet, set-id bits a
    /// pending write will clear are shown cleared, and a hidden name from
    /// a silly rename is not counted as a link.
    pub(crate) fn visible_attr(&self) -> Fattr3 {
        let mut a = self.attr;
        a.size = a.size.max(self.file.written_end);
        if let Some(t) = self.file.written_at {
            for time in [&mut a.mtime, &mut a.ctime] {
                if time_key(t) > time_key(*time) {
                    *time = t;
                }
            }
        }
        if let Some(t) = self.file.attrs_held_at {
            if time_key(t) > time_key(a.ctime) {
                a.ctime = t;
            }
        }
        if self.hidden_link {
            a.nlink = a.nlink.saturating_sub(1);
        }
        if let Some(writer) = &self.file.setid_dropped {
            let in_group = writer.gid == a.gid || writer.groups.contains(&a.gid);
            a.mode = mode_without_setid(a.mode, in_group);
        }
        let f = &self.file;
        for s in [f.sending_attrs.as_ref(), f.pending_attrs.as_ref().map(|p| &p.attrs)].into_iter().flatten()
        {
            a.mode = s.mode.map_or(a.mode, |m| m & 0o7777);
            a.uid = s.uid.unwrap_or(a.uid);
            a.gid = s.gid.unwrap_or(a.gid);
            if let SetTime::SetToClientTime(t) = s.atime {
                a.atime = t;
            }
            if let SetTime::SetToClientTime(t) = s.mtime {
                a.mtime = t;
            }
        }
        a
    }

    /// A SETATTR by `cred` of a file open for writing here that can wait
    /// and go with the data when the file is closed (or synced), because it
    /// changes nothing another client could see: explicit times (a "now"
    /// would be later at close), and a mode, owner or group the file
    /// already has. tar sets times, owner and mode on every file it
    /// extracts, one call each while the file is open, and as root its
    /// chown is mostly to the owner the file has. A real change of mode,
    /// owner or group is never held: it must be on the server when the call
    /// returns, before any data written after it, as on a kernel NFS mount
    /// (a program that narrows a mode and then writes a secret must not
    /// have the secret readable under the old mode). Only for the file's
    /// creator here, whom the server made its owner (`creator`), nothing
    /// changes the size, and no set-id bit is involved (the server's rules
    /// for clearing them are its own). Returns whether the change was taken.
    ///
    /// `mode_may_wait` (`deleg_chmod=hold`, the file held under a write
    /// delegation): a real change of mode may wait too. No other client
    /// can open the file before the delegation goes back, and it goes back
    /// only after the write-back, which sends the data first and the mode
    /// after it in one COMPOUND; meanwhile this mount shows the new mode
    /// (the kernel checks it, `visible_attr`) and asks the server nothing
    /// that depends on it (`Shared::send_held_mode`). Owners never wait.
    pub(crate) fn defer_setattr(&mut self, attrs: &Sattr3, cred: &Cred, mode_may_wait: bool) -> bool {
        let f = &self.file;
        if f.write_opens == 0 || attrs.size.is_some() || f.creator.as_ref() != Some(cred) {
            return false;
        }
        if matches!(attrs.atime, SetTime::SetToServerTime) || matches!(attrs.mtime, SetTime::SetToServerTime)
        {
            return false;
        }
        let now = self.visible_attr();
        if now.mode & SETID_BITS != 0 || attrs.mode.is_some_and(|m| m & SETID_BITS != 0) {
            return false;
        }
        let changes_mode = attrs.mode.is_some_and(|m| m & 0o7777 != now.mode & 0o7777);
        let changes_owner =
            attrs.uid.is_some_and(|u| u != now.uid) || attrs.gid.is_some_and(|g| g != now.gid);
        if changes_owner || (changes_mode && !mode_may_wait) {
            return false;
        }
        if changes_mode {
            // Who may do what changed: ACCESS answers cached are no
            // longer this mount's (and the server's would be the old
            // mode's until the write-back).
            self.access.clear();
        }
        let p = self
            .file
            .pending_attrs
            .get_or_insert_with(|| PendingAttrs { attrs: Sattr3::default(), cred: cred.clone() });
        merge_later(&mut p.attrs, attrs);
        self.file.attrs_held_at = Some(coarse_now());
        true
    }

    /// A change of mode is held for the write-back (`deleg_chmod=hold`) or
    /// on its way: the server's idea of who may open the file is not this
    /// mount's until it lands.
    pub(crate) fn mode_held(&self) -> bool {
        let f = &self.file;
        [f.sending_attrs.as_ref(), f.pending_attrs.as_ref().map(|p| &p.attrs)]
            .into_iter()
            .flatten()
            .any(|a| a.mode.is_some_and(|m| m & 0o7777 != self.attr.mode & 0o7777))
    }

    /// A regular file with one link, not open here, and nothing unwritten
    /// or held here: removing its name ends it, and loses nothing of ours.
    pub(crate) fn last_name_clean(&self) -> bool {
        self.attr.nlink <= 1
            && self.open_count == 0
            && self.file.clean()
            && self.file.pending_attrs.is_none()
            && self.file.sending_attrs.is_none()
    }

    /// Drop clean cached data (not our unwritten data).
    pub(crate) fn invalidate_data(&mut self) {
        self.file.clear_chunks();
        self.file.gen += 1;
        self.names.clear();
        self.complete = false;
        self.data_epoch += 1;
        self.drop_listing();
    }

    /// The server called the object's handle stale: trust nothing cached
    /// about it until the server answers again (a zero period, as for
    /// attributes dropped; see `vouched`), and for a directory, none of its
    /// names or its listing.
    pub(crate) fn forget_stale(&mut self) {
        self.attr_timeout = Duration::ZERO;
        self.names.clear();
        self.complete = false;
        self.drop_listing();
    }

    /// Forget the cached listing, and any being fetched.
    pub(crate) fn drop_listing(&mut self) {
        self.listing = None;
        self.listing_gen += 1;
    }

    /// New attributes are about to replace `self.attr`: a new mode or
    /// owner changes who may do what, so the ACCESS answers go. Not ctime:
    /// every WRITE moves it, and dropping the answers at each would cost
    /// an ACCESS per write-heavy open (Linux also looks at mode and owner
    /// only; anything else, such as an ACL, is bounded by the answers'
    /// own expiry).
    fn check_access_against(&mut self, a: &Fattr3) {
        let old = &self.attr;
        if old.mode != a.mode || old.uid != a.uid || old.gid != a.gid {
            self.access.clear();
        }
    }

    /// Whether attributes `a` from a call sent at tick `gen` are newer than
    /// the cached ones (see the module docs).
    fn newer(&self, a: &Fattr3, gen: u64) -> bool {
        gen > self.attr_gen || time_key(a.ctime) > time_key(self.attr.ctime)
    }

    /// Cache attributes `a` from the call sent at tick `gen`.
    fn take_attr(&mut self, a: Fattr3, gen: u64, now: Instant) {
        self.check_access_against(&a);
        self.attr = a;
        self.attr_gen = self.attr_gen.max(gen);
        self.attr_fetched = now;
        if self.file.written_settled.is_some_and(|settled| gen > settled) {
            // Sent after all our writes were answered: the server's size
            // includes them (or someone truncated since, which counts).
            self.file.written_end = 0;
            self.file.written_settled = None;
            self.file.written_at = None;
        }
    }

    /// The file has no write-back state left: from now on the server's
    /// attributes will say what our writes did.
    pub(crate) fn settle_writes(&mut self) {
        let f = &self.file;
        if (f.written_end > 0 || f.written_at.is_some()) && f.written_settled.is_none() {
            self.file.written_settled = Some(self.clock.tick());
        }
    }

    /// Attributes fresh from the server that are not the result of one of
    /// our changes (GETATTR, LOOKUP, READ, ACCESS replies), from the call
    /// sent at tick `gen`. `revalidation`: this was a check of expired
    /// attributes, so an unchanged answer lengthens the trust period.
    /// An answer older than the cached attributes is ignored.
    pub(crate) fn fresh_attrs(
        &mut self,
        a: Fattr3,
        gen: u64,
        now: Instant,
        bounds: (Duration, Duration),
        revalidation: bool,
    ) {
        let (min, max) = bounds;
        if !self.newer(&a, gen) {
            return;
        }
        if self.changes_in_flight > 0 {
            // Our own changes are moving the attributes; the WCC chain
            // decides about the cache once they drain.
            self.take_attr(a, gen, now);
            return;
        }
        let v = Validator::of(&a);
        if v != self.validator {
            self.invalidate_data();
            self.validator = v;
            self.attr_timeout = min;
        } else if revalidation {
            self.attr_timeout = (self.attr_timeout * 2).clamp(min, max);
        } else {
            self.attr_timeout = self.attr_timeout.clamp(min, max);
        }
        self.take_attr(a, gen, now);
    }

    /// One of our changes is about to be sent; returns its clock tick, to
    /// pass to `end_change`.
    pub(crate) fn begin_change(&mut self) -> u64 {
        self.changes_in_flight += 1;
        self.drop_listing();
        self.clock.tick()
    }

    /// One of our changes, sent at tick `gen`, came back with `wcc`
    /// (`None`: it failed, and changed nothing we know of).
    pub(crate) fn end_change(&mut self, wcc: Option<&WccData>, gen: u64, now: Instant, min: Duration) {
        self.changes_in_flight = self.changes_in_flight.saturating_sub(1);
        if let Some(w) = wcc {
            if let Some(post) = &w.after {
                if self.newer(post, gen) {
                    self.take_attr(*post, gen, now);
                }
                // The object is changing: trust its attributes only briefly.
                self.attr_fetched = now;
                self.attr_timeout = min;
            }
            match (&w.before, &w.after) {
                (Some(pre), Some(post)) => {
                    let (pre, post) = (Validator::of_wcc(pre), Validator::of(post));
                    if pre != post {
                        self.wcc_pending.push((pre, post));
                    }
                }
                _ => self.wcc_unknown = true,
            }
        }
        // Chain every pair that continues the validator.
        while let Some(i) = self.wcc_pending.iter().position(|(pre, _)| *pre == self.validator) {
            self.validator = self.wcc_pending.swap_remove(i).1;
        }
        if self.wcc_pending.len() > WCC_PENDING_MAX
            || (self.changes_in_flight == 0 && !self.wcc_pending.is_empty())
        {
            // Someone else changed the object between our changes.
            self.invalidate_data();
            self.wcc_pending.clear();
            self.validator = Validator::of(&self.attr);
        } else if self.changes_in_flight == 0 && self.wcc_unknown {
            self.validator = Validator::of(&self.attr);
        }
        if self.changes_in_flight == 0 {
            self.wcc_unknown = false;
        }
    }
}

/// An inode: a server object the kernel knows by number.
pub(crate) struct Inode {
    pub(crate) ino: u64,
    pub(crate) fh: NfsFh3,
    pub(crate) ftype: Ftype3,
    /// Directory name of this file in the disk cache.
    pub(crate) disk_key: String,
    pub(crate) state: Mutex<InodeState>,
    /// Wakes the flusher (new work, or room to send).
    pub(crate) kick: Notify,
    /// Wakes flush/fsync waiters (write-back made progress).
    pub(crate) progress: Notify,
    /// Eager mode: the per-file dirty bound.
    pub(crate) file_budget: Option<ByteBudget>,
    /// The generation the kernel was given before this file existed on
    /// the server (a create answered early, see `early`); 0: derived
    /// from the handle.
    pub(crate) generation_given: u32,
}

impl Inode {
    pub(crate) fn is_dir(&self) -> bool {
        self.ftype == Ftype3::Dir
    }

    /// The generation FUSE file handles carry for this inode: a hash of
    /// the NFS file handle (never 0), so a handle made for a file whose
    /// inode number was later reused (a fileid the server recycled) is
    /// refused by the kernel instead of opening the new file.
    pub(crate) fn generation(&self) -> u32 {
        if self.generation_given != 0 {
            return self.generation_given;
        }
        let h = self
            .fh
            .data
            .as_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
        ((h ^ (h >> 32)) as u32).max(1)
    }
}

#[derive(Default)]
struct Tables {
    by_ino: HashMap<u64, Arc<Inode>>,
    by_fh: HashMap<NfsFh3, u64>,
}

/// File handles of inodes the kernel forgot, oldest first out.
#[derive(Default)]
struct Forgotten {
    by_ino: HashMap<u64, NfsFh3>,
    order: std::collections::VecDeque<u64>,
}

/// Inode number → inode, and file handle → inode number. The lock is held
/// only to look up or insert, never across a call to the server.
pub(crate) struct InodeTable {
    tables: RwLock<Tables>,
    next_remap: AtomicU64,
    /// The last `FORGOTTEN_MAX` inode numbers forgotten, with their handles.
    forgotten: Mutex<Forgotten>,
}

impl InodeTable {
    pub(crate) fn new() -> Self {
        InodeTable {
            tables: RwLock::new(Tables::default()),
            next_remap: AtomicU64::new(REMAP_BASE),
            forgotten: Mutex::new(Forgotten::default()),
        }
    }

    /// The file handle inode number `ino` had when it was forgotten.
    pub(crate) fn forgotten(&self, ino: u64) -> Option<NfsFh3> {
        self.forgotten.lock().by_ino.get(&ino).cloned()
    }

    pub(crate) fn get(&self, ino: u64) -> Option<Arc<Inode>> {
        self.tables.read().by_ino.get(&ino).cloned()
    }

    pub(crate) fn by_fh(&self, fh: &NfsFh3) -> Option<Arc<Inode>> {
        let t = self.tables.read();
        t.by_fh.get(fh).and_then(|ino| t.by_ino.get(ino)).cloned()
    }

    /// The inode for `fh`, creating it with attributes `attr` if new.
    /// Returns the inode and whether it is new. A new inode's number is
    /// `prefer` if given and free (the number a FUSE file handle names),
    /// else its fileid unless that is the root's number or taken by another
    /// handle (two exports' file systems, or a fileid reused while we
    /// still know the old file), in which case it gets a remapped number.
    pub(crate) fn intern(
        &self,
        fh: &NfsFh3,
        attr: &Fattr3,
        make: impl FnOnce(u64) -> Inode,
        root: bool,
        prefer: Option<u64>,
    ) -> (Arc<Inode>, bool) {
        if let Some(i) = self.by_fh(fh) {
            return (i, false);
        }
        let mut t = self.tables.write();
        if let Some(i) = t.by_fh.get(fh).and_then(|ino| t.by_ino.get(ino)) {
            return (i.clone(), false);
        }
        let ino = if root {
            ROOT_INO
        } else if let Some(p) = prefer.filter(|p| *p != ROOT_INO && !t.by_ino.contains_key(p)) {
            p
        } else if attr.fileid != ROOT_INO && attr.fileid < REMAP_BASE && !t.by_ino.contains_key(&attr.fileid)
        {
            attr.fileid
        } else {
            self.next_remap.fetch_add(1, Ordering::Relaxed)
        };
        let inode = Arc::new(make(ino));
        t.by_ino.insert(ino, inode.clone());
        t.by_fh.insert(fh.clone(), ino);
        // The number is in use again: what it named before is not this.
        self.forgotten.lock().by_ino.remove(&ino);
        (inode, true)
    }

    /// A number no inode has or will be given by [`InodeTable::intern`]
    /// unasked: for a file the kernel must know before the server has made
    /// it (see `early`), interned later with this number as `prefer`.
    pub(crate) fn reserve(&self) -> u64 {
        self.next_remap.fetch_add(1, Ordering::Relaxed)
    }

    /// The directories known now (a snapshot; the table's lock is not held
    /// after).
    pub(crate) fn dirs(&self) -> Vec<Arc<Inode>> {
        self.tables.read().by_ino.values().filter(|i| i.is_dir()).cloned().collect()
    }

    /// Forget an inode the kernel no longer references (its handle is
    /// remembered, see [`FORGOTTEN_MAX`]).
    pub(crate) fn remove(&self, ino: u64) {
        let mut t = self.tables.write();
        if let Some(i) = t.by_ino.remove(&ino) {
            t.by_fh.remove(&i.fh);
            let mut f = self.forgotten.lock();
            if f.by_ino.insert(ino, i.fh.clone()).is_none() {
                f.order.push_back(ino);
            }
            while f.by_ino.len() > FORGOTTEN_MAX {
                let Some(old) = f.order.pop_front() else { break };
                f.by_ino.remove(&old);
            }
            // Numbers that came back into use leave stale entries in the
            // order: keep it within a few times the map.
            if f.order.len() > 4 * FORGOTTEN_MAX {
                let Forgotten { by_ino, order } = &mut *f;
                order.retain(|i| by_ino.contains_key(i));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_proto::nfs3::{Specdata3, WccAttr};

    fn attr(size: u64, t: u32) -> Fattr3 {
        Fattr3 {
            ftype: Ftype3::Reg,
            mode: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            used: size,
            rdev: Specdata3::default(),
            fsid: 1,
            fileid: 5,
            atime: Nfstime3::default(),
            mtime: Nfstime3 { seconds: t, nseconds: 0 },
            ctime: Nfstime3 { seconds: t, nseconds: 0 },
        }
    }

    fn wcc(pre: &Fattr3, post: &Fattr3) -> WccData {
        WccData {
            before: Some(WccAttr { size: pre.size, mtime: pre.mtime, ctime: pre.ctime }),
            after: Some(*post),
        }
    }

    fn state_with_chunk(a: Fattr3) -> InodeState {
        let mut s =
            InodeState::new(a, Instant::now(), Duration::from_secs(3), Arc::default(), Arc::default());
        s.file.insert_chunk(0, Chunk::alone(Bytes::from_static(b"x"), true));
        s
    }

    #[test]
    fn out_of_order_own_replies_keep_the_cache() {
        let (a0, a1, a2) = (attr(0, 1), attr(10, 2), attr(20, 3));
        let mut s = state_with_chunk(a0);
        let now = Instant::now();
        let g1 = s.begin_change();
        let g2 = s.begin_change();
        s.end_change(Some(&wcc(&a1, &a2)), g2, now, Duration::from_secs(3));
        s.end_change(Some(&wcc(&a0, &a1)), g1, now, Duration::from_secs(3));
        assert_eq!(s.file.chunk_count(), 1);
        assert_eq!(s.validator, Validator::of(&a2));
        assert_eq!(s.attr, a2);
    }

    /// Two WRITEs in one tick of the server's clock: the same ctime, the
    /// later one the larger size. Whichever reply comes last, the size
    /// cached is the later WRITE's, never the earlier, smaller one.
    #[test]
    fn replies_with_one_ctime_never_shrink_the_size() {
        let (a0, a1, a2) = (attr(0, 7), attr(100, 7), attr(300, 7));
        for later_reply_first in [false, true] {
            let mut s = state_with_chunk(a0);
            let now = Instant::now();
            let g1 = s.begin_change();
            let g2 = s.begin_change();
            if later_reply_first {
                s.end_change(Some(&wcc(&a1, &a2)), g2, now, Duration::from_secs(3));
                s.end_change(Some(&wcc(&a0, &a1)), g1, now, Duration::from_secs(3));
            } else {
                s.end_change(Some(&wcc(&a0, &a1)), g1, now, Duration::from_secs(3));
                s.end_change(Some(&wcc(&a1, &a2)), g2, now, Duration::from_secs(3));
            }
            assert_eq!(s.attr.size, 300, "later reply first: {later_reply_first}");
        }
    }

    /// A READ (or GETATTR) sent before our WRITE and answered after it
    /// carries the old size: it must not replace the WRITE's attributes,
    /// nor drop the data cache as if someone else had changed the file.
    #[test]
    fn an_answer_sent_before_our_change_is_ignored() {
        let (a0, a1) = (attr(10, 7), attr(500, 7));
        let mut s = state_with_chunk(a0);
        let now = Instant::now();
        let read_sent = s.clock.tick();
        let w = s.begin_change();
        s.end_change(Some(&wcc(&a0, &a1)), w, now, Duration::from_secs(3));
        s.fresh_attrs(a0, read_sent, now, (Duration::from_secs(3), Duration::from_secs(60)), false);
        assert_eq!(s.attr.size, 500);
        assert_eq!(s.file.chunk_count(), 1, "our own change kept the cache");
        // A strictly newer ctime wins even from an older call: the server
        // answered it after something else changed the file.
        let a2 = attr(20, 8);
        s.fresh_attrs(a2, read_sent, now, (Duration::from_secs(3), Duration::from_secs(60)), false);
        assert_eq!(s.attr.size, 20);
    }

    /// What we wrote stays visible in the size until an answer sent after
    /// all our writes were answered arrives.
    #[test]
    fn written_end_lasts_until_an_answer_sent_after_the_writes() {
        let a0 = attr(0, 7);
        let mut s = state_with_chunk(a0);
        let now = Instant::now();
        let bounds = (Duration::from_secs(3), Duration::from_secs(60));
        let sent_during_writes = s.clock.tick();
        s.file.written_end = 4096;
        s.settle_writes();
        s.fresh_attrs(attr(0, 8), sent_during_writes, now, bounds, false);
        assert_eq!(s.visible_attr().size, 4096, "an answer sent before the writes settled");
        let sent_after = s.clock.tick();
        s.fresh_attrs(attr(10, 9), sent_after, now, bounds, false);
        assert_eq!(s.visible_attr().size, 10, "the server's size once it includes our writes");
    }

    #[test]
    fn a_foreign_change_between_ours_drops_the_cache() {
        let (a0, a1, a2, a3) = (attr(0, 1), attr(10, 2), attr(15, 3), attr(20, 4));
        let mut s = state_with_chunk(a0);
        let now = Instant::now();
        let g1 = s.begin_change();
        let g2 = s.begin_change();
        s.end_change(Some(&wcc(&a0, &a1)), g1, now, Duration::from_secs(3));
        // Someone else took the file from a1 to a2 before our second write.
        s.end_change(Some(&wcc(&a2, &a3)), g2, now, Duration::from_secs(3));
        assert_eq!(s.file.chunk_count(), 0);
        assert_eq!(s.validator, Validator::of(&a3));
    }

    #[test]
    fn access_answers_expire_with_the_attributes_and_stay_bounded() {
        let a = attr(1, 1);
        let now = Instant::now();
        let mut s = InodeState::new(a, now, Duration::from_secs(3), Arc::default(), Arc::default());
        let cred = |uid| Cred { uid, gid: uid, groups: vec![] };
        s.remember_access(&cred(1), 0b11, 0b01);
        assert_eq!(s.cached_access(&cred(1), 0b01, now, false), Some(0b01));
        assert_eq!(s.cached_access(&cred(1), 0b10, now, false), Some(0), "a refusal is an answer too");
        assert_eq!(s.cached_access(&cred(1), 0b100, now, false), None, "never asked about that bit");
        assert_eq!(s.cached_access(&cred(2), 0b01, now, false), None, "another caller");
        assert_eq!(s.cached_access(&cred(1), 0b01, now + Duration::from_secs(3), false), None, "expired");
        // The attributes were revalidated unchanged: the answer still
        // expires when the attributes it came with did.
        s.fresh_attrs(
            a,
            s.clock.tick(),
            now + Duration::from_secs(2),
            (Duration::from_secs(3), Duration::from_secs(60)),
            true,
        );
        assert_eq!(s.cached_access(&cred(1), 0b01, now + Duration::from_secs(4), false), None);
        // A new mode drops every answer.
        s.remember_access(&cred(1), 0b11, 0b11);
        let mut chmodded = a;
        chmodded.mode = 0o600;
        s.fresh_attrs(
            chmodded,
            s.clock.tick(),
            now + Duration::from_secs(2),
            (Duration::from_secs(3), Duration::from_secs(60)),
            false,
        );
        assert_eq!(s.cached_access(&cred(1), 0b01, now + Duration::from_secs(2), false), None);
        // Bounded: the oldest caller goes first.
        for uid in 0..(ACCESS_ENTRIES_MAX as u32 + 1) {
            s.remember_access(&cred(uid), 1, 1);
        }
        assert_eq!(s.access.len(), ACCESS_ENTRIES_MAX);
        assert_eq!(s.cached_access(&cred(0), 1, now + Duration::from_secs(2), false), None);
        assert_eq!(s.cached_access(&cred(1), 1, now + Duration::from_secs(2), false), Some(1));
        // noac: nothing is kept.
        let mut noac = InodeState::new(a, now, Duration::ZERO, Arc::default(), Arc::default());
        noac.remember_access(&cred(1), 1, 1);
        assert!(noac.access.is_empty());
    }

    #[test]
    fn timeout_doubles_while_unchanged_and_resets_on_change() {
        let a = attr(1, 1);
        let now = Instant::now();
        let b = (Duration::from_secs(3), Duration::from_secs(10));
        let mut s = InodeState::new(a, now, b.0, Arc::default(), Arc::default());
        {
            let g = s.clock.tick();
            s.fresh_attrs(a, g, now, b, true);
        }
        assert_eq!(s.attr_timeout, Duration::from_secs(6));
        {
            let g = s.clock.tick();
            s.fresh_attrs(a, g, now, b, true);
        }
        assert_eq!(s.attr_timeout, Duration::from_secs(10));
        {
            let g = s.clock.tick();
            s.fresh_attrs(attr(2, 2), g, now, b, true);
        }
        assert_eq!(s.attr_timeout, Duration::from_secs(3));
    }
}
