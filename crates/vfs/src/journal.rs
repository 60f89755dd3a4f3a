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
//! laundering*). COMMIT has nothing left to do but answer. SETATTR of the size
//! and a CREATE that truncates are journaled too, so replay never resurrects data
//! a later truncation removed.
//!
//! In the background a checkpointer makes the backend's files durable
//! ([`Backend::sync_all`], `syncfs` for a local directory) and then frees the log
//! up to the point that sync covered. When the log is full, writers wait for
//! the checkpointer (back-pressure); the log never holds more than its size.
//!
//! # Restart
//! [`Journaled::open`] replays the log from its last checkpoint into the
//! backend before anything is served, syncs the backend, and starts a fresh lap.
//! Records are applied as root, in log order; one whose file no longer exists
//! (removed after it was written) is skipped. The write verifier is kept in the
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
//! - Only file data and sizes are journaled: namespace operations (CREATE,
//!   REMOVE, RENAME…) are as durable as without a journal.

mod device;
mod log;
mod stats;

pub use device::LogDevice;
pub use stats::JournalStats;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use self::log::{HeaderState, Log, Op, RecordRef};
use crate::{
    perm, Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FsError,
    FsProperties, FsResult, FsStat, Lookup, NodeKind, ReadResult, SetAttr, StableHow, Verifier, Wcc, WccAttr,
    WriteResult,
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

/// The state the checkpointer shares.
struct Core {
    inner: Arc<dyn Backend>,
    log: Log,
    header: Mutex<log::Header>,
    stop: AtomicBool,
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
        Ok((Journaled { core, stripes, verifier, checkpointer: Mutex::new(Some(checkpointer)) }, replay))
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
        let h =
            fh.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        &self.stripes[(h % STRIPES as u64) as usize]
    }

    fn inner(&self) -> &dyn Backend {
        &*self.core.inner
    }

    fn durable(&self, lsn: u64) -> FsResult<()> {
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

    /// Journal a size change made by `fh`'s last operation.
    fn journal_size(&self, fh: &FileHandle, size: u64) -> FsResult<()> {
        let end = self.append(fh, RecordRef::Truncate { size })?;
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
fn replay_into(
    inner: &dyn Backend,
    dev: &dyn LogDevice,
    h: &log::Header,
    out: &mut Replay,
) -> io::Result<u64> {
    let root = Credentials::root();
    let limit = h.checkpoint + h.area;
    let mut lsn = h.checkpoint;
    while lsn < limit {
        let Some((next, found)) = log::read_record(dev, h.area, lsn)? else { break };
        lsn = next;
        let Some(rec) = found else { continue };
        let fh = FileHandle(Bytes::from(rec.handle));
        let result = match &rec.op {
            Op::Write { offset, data } => {
                out.bytes += data.len() as u64;
                inner.write(&root, &fh, *offset, data, StableHow::Unstable).map(|_| ())
            }
            Op::Truncate { size } => {
                let set = SetAttr { size: Some(*size), ..SetAttr::default() };
                inner.setattr(&root, &fh, &set, None).map(|_| ())
            }
        };
        match result {
            Ok(()) => out.records += 1,
            Err(FsError::Stale | FsError::NoEnt | FsError::BadHandle) => out.stale += 1,
            Err(e) => {
                tracing::error!("journal replay: record at {} ({:?}) failed: {e}", rec.lsn, kind(&rec.op));
                out.failed += 1;
            }
        }
    }
    // Groups start on page boundaries: a valid record at one past where replay
    // stopped means the log was damaged in the middle, not merely cut short.
    let mut probe = lsn.next_multiple_of(4096);
    while probe < limit {
        if let Ok(Some((_, Some(_)))) = log::read_record(dev, h.area, probe) {
            tracing::error!(
                "journal damaged: replay stopped at {lsn} but a valid record follows at {probe}; \
                 writes acknowledged after the damage are lost"
            );
            out.damaged = true;
            break;
        }
        probe += 4096;
    }
    Ok(lsn)
}

fn kind(op: &Op) -> &'static str {
    match op {
        Op::Write { .. } => "write",
        Op::Truncate { .. } => "truncate",
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
        let Some(size) = set.size else { return self.inner().setattr(cred, fh, set, guard) };
        let end = {
            let _order = self.stripe(fh).lock();
            let wcc = self.inner().setattr(cred, fh, set, guard)?;
            (self.append(fh, RecordRef::Truncate { size })?, wcc)
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
        let created = self.inner().create(cred, dir, name, how)?;
        if let CreateMode::Unchecked(SetAttr { size: Some(_), .. }) = how {
            // An existing file may have been truncated: replay must not bring
            // back data written to it before.
            self.journal_size(&created.handle, created.attr.size)?;
        }
        Ok(created)
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        self.inner().mkdir(cred, dir, name, set)
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        self.inner().symlink(cred, dir, name, target, set)
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        self.inner().mknod(cred, dir, name, kind, set)
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.inner().remove(cred, dir, name)
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.inner().rmdir(cred, dir, name)
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        self.inner().rename(cred, from_dir, from_name, to_dir, to_name)
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        self.inner().link(cred, fh, dir, name)
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
        self.durable(self.core.log.appended())?;
        Ok((Wcc { before: Some(WccAttr::from(&attr)), after: Some(attr) }, self.verifier))
    }

    fn write_verifier(&self) -> Verifier {
        self.verifier
    }

    fn sync_all(&self) -> FsResult<()> {
        // Everything appended is synced, then the backend, then the log is empty.
        self.durable(self.core.log.appended())?;
        self.core.checkpoint().map_err(|e| {
            tracing::error!("journal checkpoint: {e}");
            FsError::Io
        })
    }

    fn journal_stats(&self) -> Option<JournalStats> {
        Some(self.stats())
    }

    // Extended attributes are metadata the journal does not hold: straight
    // to the backend. The NFSv4.2 data operations (ALLOCATE, COPY, …) are
    // not offered: they would pass data the journal has not applied yet.
    fn getxattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<Bytes> {
        self.inner().getxattr(cred, fh, name)
    }

    fn setxattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        name: &[u8],
        value: &[u8],
        how: crate::XattrSet,
    ) -> FsResult<()> {
        self.inner().setxattr(cred, fh, name, value, how)
    }

    fn listxattr(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Vec<Bytes>> {
        self.inner().listxattr(cred, fh)
    }

    fn removexattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<()> {
        self.inner().removexattr(cred, fh, name)
    }
}
