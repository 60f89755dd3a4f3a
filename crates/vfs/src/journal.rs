//! An intent journal in front of a backend: stable writes at the speed of one
//! sequential, group-committed log (the Prestoserve/NVRAM idea, ZFS's intent log).
//!
//! # What it does
//! [`Journaled`] wraps any [`Backend`]. Every WRITE goes to the backend as an
//! unstable write (the page cache) and, as a checksummed record, to the journal;
//! it is answered once the journal holds it durably, with `committed = FILE_SYNC`
//! whatever the client asked (RFC 1813 allows a stronger answer). Many calls
//! share one journal `fdatasync` (group commit), so a client that writes
//! FILE_SYNC per block costs one sequential log write per group instead of one
//! `fsync` of its file per block, and a client writing UNSTABLE may drop its
//! copy at once instead of holding it until COMMIT (Rago et al.'s *early
//! laundering*). COMMIT has nothing left to do but answer.
//!
//! Changes of names and attributes (CREATE, MKDIR, SYMLINK, MKNOD, LINK,
//! RENAME, REMOVE, RMDIR, SETATTR, SETXATTR, REMOVEXATTR) are made in the
//! backend as before (so every later call sees them), recorded (`meta.rs`),
//! and answered once their record is durable, sharing the log write of the
//! calls in flight as WRITEs do: NetApp's NVRAM log for metadata. The backend
//! is told not to sync them itself (`LocalConfig::journaled`). The changes
//! of one NFSv4 COMPOUND wait for the log once, before its reply
//! ([`DeferredDurability`], `deferred.rs`), so a small file's WRITE, SETATTR
//! and CLOSE cost one log write even when nobody else is writing. A change
//! and its record reach the backend and the log in the same order for all
//! changes of one directory, and a truncation and the file's writes for one
//! file (stripe locks held across both).
//!
//! In the background a checkpointer makes the backend's files durable
//! ([`Backend::sync_all`], `syncfs` for a local directory) and then frees the log
//! up to the point that sync covered. When the log is full, writers wait for
//! the checkpointer (back-pressure); the log never holds more than its size.
//!
//! # Restart
//! [`Journaled::open`] replays the log from its last checkpoint into the
//! backend before anything is served, syncs the backend, and starts a fresh lap.
//! The names the log's changes touched are first put where the log leaves
//! them, whatever part of the changes the file system kept (`Replayer`:
//! a create that exists, a rename whose source is gone, a remove of what is
//! removed change nothing; a create the file system lost is made again; a
//! replay interrupted by another crash is run again to the same end); then the
//! data and attribute records are applied as root, in log order; one whose
//! file no longer exists (removed after it was written) is skipped. The write verifier is kept in the
//! journal's header: when replay restored every acknowledged record it stays the
//! same, so clients need not resend anything; it changes when the header or a
//! record before the log's end was damaged, or a record could not be applied.
//!
//! # Failure model
//! - Process crash (`kill -9`), kernel crash, power loss: every write that was
//!   answered is in the synced journal and is replayed. A torn last group was
//!   never answered and is ignored.
//! - A write or sync error on the journal device: no further write is answered
//!   (they fail with NFS3ERR_IO); the server keeps serving reads. Restart once the
//!   device is fixed.
//! - **A lost journal device** (or a journal file deleted) loses the writes
//!   acknowledged since the last checkpoint (at most the log's size, usually a
//!   second or two of writes); the export's files hold whatever reached them. A
//!   new journal gets a new verifier, so clients that still hold unstable data
//!   resend it; data they were told was stable is gone. Put the journal on a
//!   device at least as reliable as the export.
//! - Changes made to the exported files by local programs (not through NFS)
//!   within the window between a write and its checkpoint may be overwritten by
//!   replay after a crash.
//! - An object whose creation the file system lost in the crash (created in
//!   the last second or so, before a checkpoint) is made again by replay with
//!   the same name, contents and attributes but a new file handle: a client
//!   that kept the old handle gets `Stale` and must look the name up again
//!   (a kernel client does so at its next open; an open file of it fails).
//!   The file system chooses inode numbers, so its handles cannot be made again.
//! - A write by a user other than root clears a file's setuid and setgid bits
//!   in the file system; replay writes as root and does not: if the crash lost
//!   that side effect, the bits come back.
//! - The duplicate reply cache is in memory: a retransmission of a call
//!   answered before the crash is executed again after it (a REMOVE then gets
//!   NFS3ERR_NOENT), as with any NFSv3 server restart. WRITEs are not cached
//!   and need not be (executing one again writes the same bytes).

mod deferred;
mod device;
mod log;
mod meta;
mod stats;

pub use deferred::DeferredDurability;
pub use device::LogDevice;
pub use stats::JournalStats;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};

use self::deferred::Durable;
use self::log::{HeaderState, Log, Op, RecordRef};
use self::meta::{Meta, What};
use crate::{
    perm, Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FsError,
    FsProperties, FsResult, FsStat, Lookup, NodeKind, ReadResult, SetAttr, SetTime, StableHow, Verifier, Wcc,
    WccAttr, WriteResult, XattrSet,
};

/// A journal file written with `O_DIRECT | O_DSYNC`: each group is one write
/// that returns once it is on stable storage, without going through the page
/// cache (and without the separate `fdatasync`). Groups are page-aligned in
/// the log; their bytes are copied into an aligned buffer for the write.
/// Reads (replay) go through a second, ordinary descriptor.
struct DirectFile {
    direct: File,
    buffered: File,
    scratch: Mutex<Vec<u8>>,
}

const DIRECT_ALIGN: usize = 4096;

impl DirectFile {
    fn open(path: &Path) -> io::Result<DirectFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let buffered =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let direct = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)?;
        Ok(DirectFile { direct, buffered, scratch: Mutex::new(Vec::new()) })
    }
}

impl LogDevice for DirectFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        LogDevice::read_at(&self.buffered, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !(offset as usize).is_multiple_of(DIRECT_ALIGN) || !buf.len().is_multiple_of(DIRECT_ALIGN) {
            // Not a whole number of pages: through the page cache, then synced.
            self.buffered.write_all_at(buf, offset)?;
            return self.buffered.sync_data();
        }
        let mut scratch = self.scratch.lock();
        if scratch.len() < buf.len() + DIRECT_ALIGN {
            scratch.resize(buf.len() + DIRECT_ALIGN, 0);
        }
        let skip = scratch.as_ptr().align_offset(DIRECT_ALIGN);
        let aligned = &mut scratch[skip..skip + buf.len()];
        aligned.copy_from_slice(buf);
        self.direct.write_all_at(aligned, offset)
    }

    fn sync(&self) -> io::Result<()> {
        // Direct writes were synchronous; anything that went through the page
        // cache was synced on the spot.
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        LogDevice::size(&self.buffered)
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        self.buffered.grow(len)
    }
}

/// How to run a journal.
#[derive(Clone, Debug)]
pub struct JournalOptions {
    /// Size of the log area (rounded down to 4 KiB; at least 4 MiB).
    pub size_bytes: u64,
    /// Identifies the export the journal belongs to: a journal made for another
    /// export is refused rather than replayed into the wrong files.
    pub owner: [u8; 16],
    /// The checkpointer runs at least this often while there is something to free.
    pub checkpoint_interval: Duration,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions { size_bytes: 256 << 20, owner: [0; 16], checkpoint_interval: Duration::from_secs(1) }
    }
}

/// What opening the journal found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// The journal was new (no header yet).
    pub fresh: bool,
    /// Records applied to the backend.
    pub records: u64,
    /// Data bytes they wrote.
    pub bytes: u64,
    /// Records whose file no longer exists.
    pub stale: u64,
    /// Names the log's changes touched that the file system had right already.
    pub already: u64,
    /// Objects whose creation a crash had taken back, made again: the same
    /// name, contents and attributes, but a new file handle (a client still
    /// holding the old one gets `Stale` and must look the name up again).
    pub remade: u64,
    /// Records the backend refused (other than stale): their data may be lost.
    pub failed: u64,
    /// A valid record was found after the point replay stopped: the log was
    /// damaged in the middle and acknowledged writes may be lost.
    pub damaged: bool,
    /// The write verifier is the one from before the restart.
    pub verifier_kept: bool,
    /// How long replay (including the backend's sync) took.
    pub duration: Duration,
}

/// Locks that keep each file's backend writes and their records in the same order.
const STRIPES: usize = 64;

/// Which stripe lock orders `fh`'s changes.
fn stripe_index(fh: &FileHandle) -> usize {
    let h = fh.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (h % STRIPES as u64) as usize
}

/// The state the checkpointer shares.
struct Core {
    inner: Arc<dyn Backend>,
    log: Log,
    header: Mutex<log::Header>,
    stop: AtomicBool,
}

impl Durable for Core {
    fn wait_durable(&self, lsn: u64) -> io::Result<()> {
        self.log.wait_durable(lsn)
    }
}

impl Core {
    /// Make the backend durable and free the log up to what that covered.
    fn checkpoint(&self) -> io::Result<()> {
        // Every record before `synced` was written to the backend before it was
        // appended (under its file's stripe lock), so the backend's sync covers it.
        let mut target = self.log.synced();
        if target <= self.log.checkpoint() && self.log.appended() > target {
            // Records appended but nobody syncing them yet: sync them, so the
            // space they take can be freed.
            self.log.wait_durable(self.log.appended())?;
            target = self.log.synced();
        }
        if target <= self.log.checkpoint() {
            return Ok(());
        }
        self.inner.sync_all().map_err(|e| io::Error::other(format!("backend sync: {e}")))?;
        let mut h = self.header.lock();
        let mut next = h.clone();
        next.seq += 1;
        next.checkpoint = target;
        log::write_header(self.log.device(), &next)?;
        *h = next;
        drop(h);
        self.log.set_checkpoint(target);
        Ok(())
    }

    fn run_checkpointer(self: Arc<Self>, interval: Duration) {
        let mut last = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            let pressed = self.log.wait_space_wanted(interval.min(Duration::from_millis(200)));
            let half_full = self.log.used() > self.log.area() / 2;
            if !(pressed || half_full || last.elapsed() >= interval) {
                continue;
            }
            last = Instant::now();
            let before = self.log.checkpoint();
            let result = self.checkpoint();
            if pressed && result.is_ok() && self.log.checkpoint() == before {
                // Writers wait and nothing could be freed: they wait for
                // records still being appended; do not spin.
                std::thread::sleep(Duration::from_millis(1));
            }
            if let Err(e) = result {
                tracing::error!("journal checkpoint failed (will retry): {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// A backend whose writes are made durable by an intent journal. See the module docs.
pub struct Journaled {
    core: Arc<Core>,
    /// The same core, as what a [`DeferredDurability`] scope waits for.
    log_handle: Arc<dyn Durable>,
    stripes: Box<[Mutex<()>]>,
    verifier: Verifier,
    checkpointer: Mutex<Option<JoinHandle<()>>>,
}

impl Journaled {
    /// Open (or create) the journal at `path` for `inner`, replaying what it
    /// holds into `inner` first.
    pub fn open_file(
        inner: Arc<dyn Backend>,
        path: &Path,
        opts: JournalOptions,
    ) -> io::Result<(Journaled, Replay)> {
        match DirectFile::open(path) {
            Ok(d) => return Journaled::open(inner, Box::new(d), opts),
            // tmpfs and some others have no O_DIRECT: write through the page cache.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("journal {}: {e}", path.display()))),
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("journal {}: {e}", path.display())))?;
        Journaled::open(inner, Box::new(f), opts)
    }

    /// Open the journal on `dev` for `inner`, replaying what it holds first.
    pub fn open(
        inner: Arc<dyn Backend>,
        dev: Box<dyn LogDevice>,
        opts: JournalOptions,
    ) -> io::Result<(Journaled, Replay)> {
        let started = Instant::now();
        let area = opts.size_bytes / 4096 * 4096;
        if area < log::AREA_MIN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("journal size {} bytes is below the minimum of 4 MiB", opts.size_bytes),
            ));
        }
        let mut replay = Replay::default();
        let (verifier, seq, start) = match log::read_header(&*dev)? {
            HeaderState::Damaged => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the journal's headers are both damaged (or this is not an eagernfs journal); \
                     move it aside to start a new one — writes acknowledged since the last checkpoint are lost",
                ))
            }
            HeaderState::Fresh => {
                replay.fresh = true;
                (rand::random::<Verifier>(), 0, 0)
            }
            HeaderState::Valid(h) => {
                if h.owner != opts.owner {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "this journal belongs to another export (or another handle key); \
                         point --journal elsewhere, or move it aside if that export is gone",
                    ));
                }
                let end = replay_into(&*inner, &*dev, &h, &mut replay)?;
                inner.sync_all().map_err(|e| {
                    io::Error::other(format!("journal replay could not sync the export ({e}); the journal is kept"))
                })?;
                let clean = !replay.damaged && replay.failed == 0;
                replay.verifier_kept = clean;
                let verifier = if clean { h.verifier } else { rand::random() };
                // A fresh lap beyond anything the old one may have written:
                // no record left on the device can pass for a new one.
                let start = (end.max(h.checkpoint) + h.area).next_multiple_of(4096);
                (verifier, h.seq, start)
            }
        };
        dev.grow(log::AREA_START + area)?;
        let header = log::Header { seq: seq + 1, owner: opts.owner, verifier, area, checkpoint: start };
        log::write_header(&*dev, &header)?;
        replay.duration = started.elapsed();
        let core = Arc::new(Core {
            inner,
            log: Log::new(dev, area, start),
            header: Mutex::new(header),
            stop: AtomicBool::new(false),
        });
        let interval = opts.checkpoint_interval;
        let worker = core.clone();
        let checkpointer = std::thread::Builder::new()
            .name("journal-ckpt".into())
            .spawn(move || worker.run_checkpointer(interval))?;
        let stripes = (0..STRIPES).map(|_| Mutex::new(())).collect();
        let log_handle: Arc<dyn Durable> = core.clone();
        Ok((
            Journaled { core, log_handle, stripes, verifier, checkpointer: Mutex::new(Some(checkpointer)) },
            replay,
        ))
    }

    /// Counters and fill level.
    pub fn stats(&self) -> JournalStats {
        let c = &self.core.log.counters;
        JournalStats {
            records: c.records.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            space_waits: c.space_waits.load(Ordering::Relaxed),
            checkpoints: c.checkpoints.load(Ordering::Relaxed),
            used_bytes: self.core.log.used(),
            size_bytes: self.core.log.area(),
        }
    }

    fn stripe(&self, fh: &FileHandle) -> &Mutex<()> {
        &self.stripes[stripe_index(fh)]
    }

    /// The stripe locks of several objects, taken in one order (no deadlock).
    fn stripes_of(&self, handles: &[&FileHandle]) -> Vec<MutexGuard<'_, ()>> {
        let mut at: Vec<usize> = handles.iter().map(|h| stripe_index(h)).collect();
        at.sort_unstable();
        at.dedup();
        at.into_iter().map(|i| self.stripes[i].lock()).collect()
    }

    /// Append a change of names or attributes; the LSN to wait for.
    fn append_meta(&self, m: &Meta) -> FsResult<u64> {
        let payload = m.encode();
        // Handles and names come from the backend and the server's checks,
        // within what a record holds: replay reads back what is logged.
        debug_assert_eq!(Meta::decode(&payload).as_ref(), Some(m));
        self.core.log.append(&[], RecordRef::Meta { payload: &payload }).map_err(|e| {
            tracing::error!("{e}");
            FsError::Io
        })
    }

    /// What `name` in `dir` is (asked as root: only kept, never answered).
    fn identity(&self, dir: &FileHandle, name: &[u8]) -> Option<FileHandle> {
        self.inner().lookup(&Credentials::root(), dir, name).ok().map(|l| l.handle)
    }

    /// Record a new object made by `made` (under the directory's stripe
    /// lock), then wait for the record to be durable.
    fn journal_create(
        &self,
        dir: &FileHandle,
        name: &[u8],
        what: What,
        made: impl FnOnce() -> FsResult<Created>,
    ) -> FsResult<Created> {
        let (created, end) = {
            let _order = self.stripe(dir).lock();
            let created = made()?;
            let m = Meta::Create {
                dir: dir.0.to_vec(),
                name: name.to_vec(),
                obj: created.handle.0.to_vec(),
                what,
                attr: attr_of_new(&created.attr),
            };
            let end = self.append_meta(&m)?;
            (created, end)
        };
        self.durable(end)?;
        Ok(created)
    }

    fn inner(&self) -> &dyn Backend {
        &*self.core.inner
    }

    /// Wait until the record ending at `lsn` is durable, or, inside a
    /// [`DeferredDurability`] scope of this thread, leave that to its end.
    fn durable(&self, lsn: u64) -> FsResult<()> {
        if deferred::defer(&self.log_handle, lsn) {
            return Ok(());
        }
        self.durable_now(lsn)
    }

    fn durable_now(&self, lsn: u64) -> FsResult<()> {
        self.core.log.wait_durable(lsn).map_err(|e| {
            tracing::error!("{e}");
            FsError::Io
        })
    }

    fn append(&self, fh: &FileHandle, rec: RecordRef<'_>) -> FsResult<u64> {
        if fh.0.len() > log::HANDLE_MAX {
            return Err(FsError::BadHandle);
        }
        self.core.log.append(&fh.0, rec).map_err(|e| {
            tracing::error!("{e}");
            FsError::Io
        })
    }

    /// REMOVE or RMDIR.
    fn journal_remove(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        is_dir: bool,
    ) -> FsResult<Wcc> {
        let (wcc, end) = {
            let _order = self.stripe(dir).lock();
            let wcc = if is_dir {
                self.inner().rmdir(cred, dir, name)?
            } else {
                self.inner().remove(cred, dir, name)?
            };
            (wcc, self.append_meta(&Meta::Remove { dir: dir.0.to_vec(), name: name.to_vec() })?)
        };
        self.durable(end)?;
        Ok(wcc)
    }

    /// Record a change of `fh`'s extended attributes made by `change` (under its stripe).
    fn journal_xattr(&self, fh: &FileHandle, m: Meta, change: impl FnOnce() -> FsResult<()>) -> FsResult<()> {
        let end = {
            let _order = self.stripe(fh).lock();
            change()?;
            self.append_meta(&m)?
        };
        self.durable(end)
    }
}

impl Drop for Journaled {
    fn drop(&mut self) {
        self.core.stop.store(true, Ordering::Release);
        self.core.log.wake();
        if let Some(t) = self.checkpointer.lock().take() {
            let _ = t.join();
        }
    }
}

/// Apply the records after `h.checkpoint` to `inner`; returns the LSN replay stopped at.
///
/// Two passes. The first reads the changes of names and puts every name they
/// touched where the log leaves it ([`Replayer`]); the second applies the
/// data and attribute records in log order, to the objects as they now are.
fn replay_into(
    inner: &dyn Backend,
    dev: &dyn LogDevice,
    h: &log::Header,
    out: &mut Replay,
) -> io::Result<u64> {
    let limit = h.checkpoint + h.area;
    // Pass 1: find the end of the log and the changes of names on the way.
    let mut changes = Vec::new();
    let mut lsn = h.checkpoint;
    while lsn < limit {
        let Some((next, found)) = log::read_record(dev, h.area, lsn)? else { break };
        lsn = next;
        if let Some(log::Found { op: Op::Meta { payload }, lsn: at, .. }) = found {
            match Meta::decode(&payload) {
                Some(m) => changes.push(m),
                None => {
                    // Its CRC held, so a different version wrote it: nothing to guess.
                    tracing::error!("journal replay: record at {at} is a change this version cannot read");
                    out.failed += 1;
                }
            }
        }
    }
    let end = lsn;
    // Groups start on page boundaries: a valid record at one past where replay
    // stopped means the log was damaged in the middle, not merely cut short.
    let mut probe = end.next_multiple_of(4096);
    while probe < limit {
        if let Ok(Some((_, Some(_)))) = log::read_record(dev, h.area, probe) {
            tracing::error!(
                "journal damaged: replay stopped at {end} but a valid record follows at {probe}; \
                 writes acknowledged after the damage are lost"
            );
            out.damaged = true;
            break;
        }
        probe += 4096;
    }
    // The scratch directory's name: the same for a replay interrupted and run
    // again (the header is rewritten only once replay is done), and one no
    // client can name, being derived from the export's secret handle key.
    let owner: String = h.owner[..8].iter().map(|b| format!("{b:02x}")).collect();
    let scratch = format!(".eagernfs-replay-{owner}-{}", h.seq).into_bytes();
    let mut r = Replayer { inner, root: Credentials::root(), remade: HashMap::new(), scratch };
    r.reconcile(&changes, out);
    // Pass 2: data and attributes, in log order.
    let mut lsn = h.checkpoint;
    while lsn < end {
        let Some((next, found)) = log::read_record(dev, h.area, lsn)? else { break };
        lsn = next;
        let Some(rec) = found else { continue };
        let result = match &rec.op {
            Op::Write { offset, data } => {
                out.bytes += data.len() as u64;
                inner.write(&r.root, &r.fh(&rec.handle), *offset, data, StableHow::Unstable).map(drop)
            }
            Op::Truncate { size } => {
                let set = SetAttr { size: Some(*size), ..SetAttr::default() };
                inner.setattr(&r.root, &r.fh(&rec.handle), &set, None).map(drop)
            }
            Op::Meta { payload } => match Meta::decode(payload) {
                Some(m) => r.apply_attributes(&m),
                None => continue,
            },
        };
        match result {
            Ok(()) => out.records += 1,
            Err(FsError::Stale | FsError::NoEnt | FsError::BadHandle) => out.stale += 1,
            Err(e) => {
                tracing::error!("journal replay: record at {} ({}) failed: {e}", rec.lsn, kind(&rec.op));
                out.failed += 1;
            }
        }
    }
    Ok(end)
}

/// Most directory levels replay walks (finding a directory's depth, emptying
/// the scratch directory).
const DEPTH_MAX: usize = 4096;

/// Puts every name the log's changes touched where the log leaves it.
///
/// After a crash the file system holds the changes made up to some moment,
/// perhaps more (ext4 commits whole transactions in order, but changes the
/// server had not yet answered may be among them), plus whatever an earlier,
/// interrupted replay did. Rather than guess which records it still lacks,
/// replay works out from the records alone what each name they touched must
/// name at the end of the log (an object, by handle, or nothing: the last
/// record that touched the name decides), and makes the file system so:
///
/// 1. every touched name that names something else is emptied: its object
///    is moved into the scratch directory (nothing is removed yet);
/// 2. every touched name that must name an object gets it, shallowest names
///    first: a file is linked (it may have several names), a directory moved
///    from where it is; an object the log created that the file system lost
///    is made again in the scratch directory, with the attributes it was
///    answered with, then moved to its name (its new handle stands for the
///    old one in every later record: the journal's data rebuild it);
/// 3. what is left in the scratch directory is what the log removed: removed.
///
/// Each record is thus applied exactly once, whatever the file system had:
/// a create that exists, a rename whose source is gone and a remove of what
/// is already removed change nothing. An object that existed before the log
/// is never removed unless the log removed its last touched name.
struct Replayer<'a> {
    inner: &'a dyn Backend,
    root: Credentials,
    /// Old handle → the object made again in its place.
    remade: HashMap<Vec<u8>, FileHandle>,
    /// The name of the directory replay works in, in the export's root:
    /// objects taken off a name wait there until they get their final one
    /// (or are removed), objects made again are made there first. Its entries
    /// are named by handle, so a replay interrupted by another crash finds
    /// them; it is gone when replay ends.
    scratch: Vec<u8>,
}

/// A name: its directory's handle and the name in it.
type Name = (Vec<u8>, Vec<u8>);

/// Where the log leaves the names it touched.
#[derive(Default)]
struct Plan {
    /// Touched names in the order first touched.
    names: Vec<Name>,
    /// What each touched name must name (by handle), or nothing.
    last: HashMap<Name, Option<Vec<u8>>>,
    /// Objects the log created: how to make them again.
    created: HashMap<Vec<u8>, (What, SetAttr)>,
    /// Object → a touched name it ends with (a directory's only one).
    named: HashMap<Vec<u8>, Name>,
}

impl Plan {
    fn of(changes: &[Meta]) -> Plan {
        let mut p = Plan::default();
        for m in changes {
            match m {
                Meta::Create { dir, name, obj, what, attr } => {
                    p.created.insert(obj.clone(), (what.clone(), attr.clone()));
                    p.set(dir, name, Some(obj));
                }
                Meta::Link { obj, dir, name } => p.set(dir, name, Some(obj)),
                Meta::Remove { dir, name } => p.set(dir, name, None),
                Meta::Rename { from_dir, from_name, to_dir, to_name, obj } => {
                    p.set(from_dir, from_name, None);
                    p.set(to_dir, to_name, Some(obj));
                }
                Meta::SetAttr { .. } | Meta::SetXattr { .. } | Meta::RemoveXattr { .. } => {}
            }
        }
        for key in &p.names {
            if let Some(obj) = &p.last[key] {
                p.named.insert(obj.clone(), key.clone());
            }
        }
        p
    }

    fn set(&mut self, dir: &[u8], name: &[u8], obj: Option<&Vec<u8>>) {
        let key = (dir.to_vec(), name.to_vec());
        if self.last.insert(key.clone(), obj.cloned()).is_none() {
            self.names.push(key);
        }
    }

    /// The final name of directory `dir` (a directory has one).
    fn name_of(&self, dir: &[u8]) -> Option<&Name> {
        self.named.get(dir)
    }

    /// How deep a name lies below the directories that stay where they are.
    fn depth(&self, key: &Name) -> usize {
        let mut depth = 0;
        let mut dir = &key.0;
        while let Some(k) = self.name_of(dir) {
            depth += 1;
            if depth > DEPTH_MAX {
                break;
            }
            dir = &k.0;
        }
        depth
    }
}

impl Replayer<'_> {
    /// The object a recorded handle names now.
    fn fh(&self, h: &[u8]) -> FileHandle {
        self.remade.get(h).cloned().unwrap_or_else(|| FileHandle(Bytes::copy_from_slice(h)))
    }

    fn attr(&self, h: &[u8]) -> Option<Attr> {
        self.inner.getattr(&self.fh(h)).ok()
    }

    /// What `name` in `dir` names now.
    fn at(&self, dir: &FileHandle, name: &[u8]) -> Option<FileHandle> {
        self.inner.lookup(&self.root, dir, name).ok().map(|l| l.handle)
    }

    /// Where directory `d` is: its parent and its name there.
    fn locate(&self, d: &FileHandle) -> Option<(FileHandle, Vec<u8>)> {
        let parent = self.inner.lookup(&self.root, d, b"..").ok()?.handle;
        let mut found = None;
        let mut cookie = 0;
        let mut verf = [0; 8];
        for _ in 0..1_000_000 {
            let mut last = cookie;
            let info = self
                .inner
                .readdir(&self.root, &parent, cookie, verf, true, &mut |e| {
                    last = e.cookie;
                    if e.name.as_ref() != b"." && e.name.as_ref() != b".." && e.handle.as_ref() == Some(d) {
                        found = Some(e.name.to_vec());
                    }
                    found.is_none()
                })
                .ok()?;
            if found.is_some() || info.eof {
                break;
            }
            (cookie, verf) = (last, info.cookieverf);
        }
        found.map(|n| (parent, n))
    }

    fn scratch_name(prefix: &str, h: &[u8]) -> Vec<u8> {
        let mut n = prefix.as_bytes().to_vec();
        n.extend(h.iter().flat_map(|b| format!("{b:02x}").into_bytes()));
        n
    }

    fn reconcile(&mut self, changes: &[Meta], out: &mut Replay) {
        if changes
            .iter()
            .all(|m| matches!(m, Meta::SetAttr { .. } | Meta::SetXattr { .. } | Meta::RemoveXattr { .. }))
        {
            return;
        }
        let plan = Plan::of(changes);
        let (inner, root) = (self.inner, self.root.clone());
        let top = inner.root();
        let scratch_name = self.scratch.clone();
        let shown = String::from_utf8_lossy(&scratch_name).into_owned();
        let private = SetAttr { mode: Some(0o700), ..SetAttr::default() };
        let scratch = match inner.mkdir(&root, &top, &scratch_name, &private) {
            Ok(c) => c.handle,
            // Left by a replay a crash interrupted.
            Err(FsError::Exist) => match self.at(&top, &scratch_name) {
                Some(h) => h,
                None => {
                    tracing::error!("journal replay: cannot use {shown}");
                    out.failed += 1;
                    return;
                }
            },
            Err(e) => {
                tracing::error!("journal replay: cannot make {shown}: {e}");
                out.failed += 1;
                return;
            }
        };
        // Objects an interrupted replay made again and left in the scratch directory.
        for obj in plan.created.keys() {
            if self.attr(obj).is_none() {
                if let Some(h) = self.at(&scratch, &Self::scratch_name("new-", obj)) {
                    self.remade.insert(obj.clone(), h);
                }
            }
        }
        // 1. Empty every touched name that names something else.
        for key in &plan.names {
            let (dir, name) = key;
            let want = plan.last[key].as_ref().map(|o| self.fh(o));
            let dir = self.fh(dir);
            let Some(now) = self.at(&dir, name) else { continue };
            if Some(&now) == want.as_ref() {
                out.already += 1;
                continue;
            }
            let parked = Self::scratch_name("old-", &now.0);
            let result = if self.at(&scratch, &parked).is_some() {
                // A file already parked under another of its names.
                inner.remove(&root, &dir, name).map(drop)
            } else {
                inner.rename(&root, &dir, name, &scratch, &parked).map(drop)
            };
            if let Err(e) = result {
                tracing::error!(
                    "journal replay: cannot take {} off its name: {e}",
                    String::from_utf8_lossy(name)
                );
                out.failed += 1;
            }
        }
        // 2. Give every touched name its object, directories before what they hold.
        let mut order: Vec<&Name> = plan.names.iter().filter(|k| plan.last[*k].is_some()).collect();
        order.sort_by_key(|k| plan.depth(k));
        for key in order {
            let obj = plan.last[key].as_ref().expect("filtered");
            let dir = self.fh(&key.0);
            let name = &key.1;
            if self.at(&dir, name).is_some_and(|h| h == self.fh(obj)) {
                continue;
            }
            let result = match self.attr(obj) {
                Some(a) if a.ftype == crate::FileType::Directory => match self.locate(&self.fh(obj)) {
                    Some((from, from_name)) => inner.rename(&root, &from, &from_name, &dir, name).map(drop),
                    None => Err(FsError::Stale),
                },
                Some(_) => inner.link(&root, &self.fh(obj), &dir, name).map(drop),
                None => match plan.created.get(obj) {
                    Some((what, attr)) => self
                        .remake(&scratch, obj, what, attr)
                        .and_then(|made| {
                            out.remade += 1;
                            inner
                                .rename(&root, &scratch, &Self::scratch_name("new-", obj), &dir, name)
                                .map(|_| made)
                        })
                        .map(drop),
                    // Made before the log and gone: a change nobody was answered for
                    // (a removal in flight at the crash) took it.
                    None => Err(FsError::Stale),
                },
            };
            match result {
                Ok(()) => out.records += 1,
                Err(FsError::Stale | FsError::NoEnt | FsError::BadHandle) => out.stale += 1,
                Err(e) => {
                    tracing::error!("journal replay: cannot name {}: {e}", String::from_utf8_lossy(name));
                    out.failed += 1;
                }
            }
        }
        // 3. What is left was removed.
        if let Err(e) = self.empty(&scratch, 0) {
            tracing::error!("journal replay: cannot empty {shown}: {e}");
            out.failed += 1;
            return;
        }
        if let Err(e) = inner.rmdir(&root, &top, &scratch_name) {
            tracing::error!("journal replay: cannot remove {shown}: {e}");
            out.failed += 1;
        }
    }

    /// Make `obj` again as `new-HEX` in the scratch directory.
    fn remake(
        &mut self,
        scratch: &FileHandle,
        obj: &[u8],
        what: &What,
        attr: &SetAttr,
    ) -> FsResult<FileHandle> {
        let (inner, root) = (self.inner, &self.root);
        let name = Self::scratch_name("new-", obj);
        let made = match what {
            What::File => inner.create(root, scratch, &name, &CreateMode::Guarded(attr.clone())),
            What::Dir => inner.mkdir(root, scratch, &name, attr),
            What::Symlink(t) => inner.symlink(root, scratch, &name, t, attr),
            What::Node(k) => inner.mknod(root, scratch, &name, *k, attr),
        }?;
        self.remade.insert(obj.to_vec(), made.handle.clone());
        Ok(made.handle)
    }

    /// Remove everything in directory `dir`.
    fn empty(&self, dir: &FileHandle, depth: usize) -> FsResult<()> {
        if depth > DEPTH_MAX {
            return Err(FsError::NameTooLong);
        }
        // Listed first, then removed: removing while listing may skip entries.
        let mut entries = Vec::new();
        let (mut cookie, mut verf) = (0, [0; 8]);
        for _ in 0..1_000_000 {
            let mut last = cookie;
            let info = self.inner.readdir(&self.root, dir, cookie, verf, true, &mut |e| {
                last = e.cookie;
                if e.name.as_ref() != b"." && e.name.as_ref() != b".." {
                    entries.push((e.name.to_vec(), e.handle.clone(), e.attr.as_ref().map(|a| a.ftype)));
                }
                true
            })?;
            if info.eof {
                break;
            }
            (cookie, verf) = (last, info.cookieverf);
        }
        for (name, handle, ftype) in entries {
            if ftype == Some(crate::FileType::Directory) {
                if let Some(h) = handle {
                    self.empty(&h, depth + 1)?;
                }
                self.inner.rmdir(&self.root, dir, &name)?;
            } else {
                self.inner.remove(&self.root, dir, &name)?;
            }
        }
        Ok(())
    }

    /// Pass 2: a change of attributes, to the object as it now is. Changes of
    /// names were reconciled in pass 1.
    fn apply_attributes(&self, m: &Meta) -> FsResult<()> {
        let (inner, root) = (self.inner, &self.root);
        match m {
            Meta::SetAttr { obj, attr } => inner.setattr(root, &self.fh(obj), attr, None).map(drop),
            Meta::SetXattr { obj, name, value } => {
                inner.setxattr(root, &self.fh(obj), name, value, XattrSet::Either)
            }
            Meta::RemoveXattr { obj, name } => match inner.removexattr(root, &self.fh(obj), name) {
                Err(FsError::NoEnt) if self.attr(obj).is_some() => Ok(()),
                r => r,
            },
            Meta::Create { .. } | Meta::Link { .. } | Meta::Remove { .. } | Meta::Rename { .. } => Ok(()),
        }
    }
}

fn kind(op: &Op) -> &'static str {
    match op {
        Op::Write { .. } => "write",
        Op::Truncate { .. } => "truncate",
        Op::Meta { payload } => Meta::decode(payload).map(|m| m.kind()).unwrap_or("change"),
    }
}

/// What a SETATTR left, as replay sets it again: the values the object has
/// now for the fields the call changed (a time set to "now" is the time it
/// became; chown may have cleared setuid bits, so the mode comes with it).
fn attr_after(set: &SetAttr, after: &Attr) -> SetAttr {
    let changed = |t: SetTime, now| (t != SetTime::DontChange).then_some(SetTime::ClientTime(now));
    SetAttr {
        mode: (set.mode.is_some() || set.uid.is_some() || set.gid.is_some()).then_some(after.mode),
        uid: set.uid.map(|_| after.uid),
        gid: set.gid.map(|_| after.gid),
        size: set.size.map(|_| after.size),
        atime: changed(set.atime, after.atime).unwrap_or_default(),
        mtime: changed(set.mtime, after.mtime).unwrap_or_default(),
    }
}

/// Every attribute of a new object, as replay would make it again.
fn attr_of_new(a: &Attr) -> SetAttr {
    SetAttr {
        mode: Some(a.mode),
        uid: Some(a.uid),
        gid: Some(a.gid),
        size: (a.ftype == crate::FileType::Regular).then_some(a.size),
        atime: SetTime::ClientTime(a.atime),
        mtime: SetTime::ClientTime(a.mtime),
    }
}

impl Backend for Journaled {
    fn root(&self) -> FileHandle {
        self.inner().root()
    }

    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        self.inner().getattr(fh)
    }

    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<crate::Timestamp>,
    ) -> FsResult<Wcc> {
        if *set == SetAttr::default() {
            return self.inner().setattr(cred, fh, set, guard);
        }
        let end = {
            // Under the file's stripe: a truncation and the file's writes reach
            // the log in the order they reached the file.
            let _order = self.stripe(fh).lock();
            let wcc = self.inner().setattr(cred, fh, set, guard)?;
            let after = match &wcc.after {
                Some(a) => a.clone(),
                None => self.inner().getattr(fh)?,
            };
            let m = Meta::SetAttr { obj: fh.0.to_vec(), attr: attr_after(set, &after) };
            (self.append_meta(&m)?, wcc)
        };
        self.durable(end.0)?;
        Ok(end.1)
    }

    fn lookup(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Lookup> {
        self.inner().lookup(cred, dir, name)
    }

    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)> {
        self.inner().access(cred, fh, want)
    }

    fn readlink(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        self.inner().readlink(cred, fh)
    }

    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult> {
        self.inner().read(cred, fh, offset, count)
    }

    fn write(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: StableHow,
    ) -> FsResult<WriteResult> {
        self.write_then(cred, fh, offset, data, stable, &mut || {})
    }

    fn write_then(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        _stable: StableHow,
        ordered: &mut dyn FnMut(),
    ) -> FsResult<WriteResult> {
        let data = &data[..data.len().min(log::DATA_MAX)];
        let (mut r, end) = {
            let _order = self.stripe(fh).lock();
            let r = self.inner().write(cred, fh, offset, data, StableHow::Unstable)?;
            let written = &data[..(r.count as usize).min(data.len())];
            let end = self.append(fh, RecordRef::Write { offset, data: written })?;
            (r, end)
        };
        ordered();
        self.durable(end)?;
        r.committed = StableHow::FileSync;
        r.verifier = self.verifier;
        Ok(r)
    }

    fn create(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        how: &CreateMode,
    ) -> FsResult<Created> {
        // GUARDED always makes a file. UNCHECKED and EXCLUSIVE may find one
        // (to truncate, or a retransmission's own): what the name was before tells.
        let existing = match how {
            CreateMode::Guarded(_) => None,
            _ => self.identity(dir, name),
        };
        let (created, end) = {
            // An existing file's stripe too: its truncation and its writes reach
            // the log in the order they reach the file.
            let mut order = vec![dir];
            order.extend(existing.as_ref());
            let _order = self.stripes_of(&order);
            let created = self.inner().create(cred, dir, name, how)?;
            let m = if existing.as_ref() != Some(&created.handle) {
                Some(Meta::Create {
                    dir: dir.0.to_vec(),
                    name: name.to_vec(),
                    obj: created.handle.0.to_vec(),
                    what: What::File,
                    attr: attr_of_new(&created.attr),
                })
            } else if let CreateMode::Unchecked(SetAttr { size: Some(_), .. }) = how {
                // Replay must not bring back data the truncation removed.
                let attr = SetAttr { size: Some(created.attr.size), ..SetAttr::default() };
                Some(Meta::SetAttr { obj: created.handle.0.to_vec(), attr })
            } else {
                None
            };
            let end = match m {
                Some(m) => self.append_meta(&m)?,
                // Nothing changed; but the file's own create may still be on its
                // way to the log, and this answer must not get there first.
                None => self.core.log.appended(),
            };
            (created, end)
        };
        self.durable(end)?;
        Ok(created)
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        self.journal_create(dir, name, What::Dir, || self.inner().mkdir(cred, dir, name, set))
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        let what = What::Symlink(target.to_vec());
        self.journal_create(dir, name, what, || self.inner().symlink(cred, dir, name, target, set))
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        self.journal_create(dir, name, What::Node(kind), || self.inner().mknod(cred, dir, name, kind, set))
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.journal_remove(cred, dir, name, false)
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.journal_remove(cred, dir, name, true)
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        let (wccs, end) = {
            let _order = self.stripes_of(&[from_dir, to_dir]);
            let found = self.inner().lookup(&Credentials::root(), from_dir, from_name).ok();
            // Only a file with several links can be renamed onto itself.
            let noop = found.as_ref().is_some_and(|l| {
                l.attr.nlink > 1 && self.identity(to_dir, to_name).as_ref() == Some(&l.handle)
            });
            let obj = found.map(|l| l.handle);
            let wccs = self.inner().rename(cred, from_dir, from_name, to_dir, to_name)?;
            let end = match obj {
                // Two links of one file: POSIX changes nothing, nor does replay.
                _ if noop => self.core.log.appended(),
                Some(obj) => self.append_meta(&Meta::Rename {
                    from_dir: from_dir.0.to_vec(),
                    from_name: from_name.to_vec(),
                    to_dir: to_dir.0.to_vec(),
                    to_name: to_name.to_vec(),
                    obj: obj.0.to_vec(),
                })?,
                // The rename found something the lookup did not (a local program
                // at work): the change is made but cannot be recorded.
                None => {
                    tracing::error!(
                        "rename: the object renamed was gone before it was renamed; not journaled"
                    );
                    return Err(FsError::Io);
                }
            };
            (wccs, end)
        };
        self.durable(end)?;
        Ok(wccs)
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        let (r, end) = {
            let _order = self.stripe(dir).lock();
            let r = self.inner().link(cred, fh, dir, name)?;
            let m = Meta::Link { obj: fh.0.to_vec(), dir: dir.0.to_vec(), name: name.to_vec() };
            (r, self.append_meta(&m)?)
        };
        self.durable(end)?;
        Ok(r)
    }

    fn readdir(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        self.inner().readdir(cred, dir, cookie, cookieverf, plus, sink)
    }

    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        self.inner().fsstat(fh)
    }

    fn properties(&self) -> FsProperties {
        self.inner().properties()
    }

    fn commit(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<(Wcc, Verifier)> {
        if offset.checked_add(count as u64).is_none() {
            return Err(FsError::Inval);
        }
        let attr = self.inner().getattr(fh)?;
        // As without a journal: only a writer (or the owner) may COMMIT.
        if !perm::allowed_io(cred, &attr, perm::W) {
            return Err(FsError::Access);
        }
        // Every WRITE was answered FILE_SYNC; one still being journaled has
        // been appended, so waiting for the log's end covers it.
        self.durable_now(self.core.log.appended())?;
        Ok((Wcc { before: Some(WccAttr::from(&attr)), after: Some(attr) }, self.verifier))
    }

    fn write_verifier(&self) -> Verifier {
        self.verifier
    }

    fn sync_all(&self) -> FsResult<()> {
        // Everything appended is synced, then the backend, then the log is empty.
        self.durable_now(self.core.log.appended())?;
        self.core.checkpoint().map_err(|e| {
            tracing::error!("journal checkpoint: {e}");
            FsError::Io
        })
    }

    fn journal_stats(&self) -> Option<JournalStats> {
        Some(self.stats())
    }

    // The NFSv4.2 data operations (ALLOCATE, COPY, …) are not offered: they
    // would pass data the journal has not applied yet.
    fn getxattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<Bytes> {
        self.inner().getxattr(cred, fh, name)
    }

    fn setxattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> FsResult<()> {
        let m = Meta::SetXattr { obj: fh.0.to_vec(), name: name.to_vec(), value: value.to_vec() };
        self.journal_xattr(fh, m, || self.inner().setxattr(cred, fh, name, value, how))
    }

    fn listxattr(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Vec<Bytes>> {
        self.inner().listxattr(cred, fh)
    }

    fn removexattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<()> {
        let m = Meta::RemoveXattr { obj: fh.0.to_vec(), name: name.to_vec() };
        self.journal_xattr(fh, m, || self.inner().removexattr(cred, fh, name))
    }
}
