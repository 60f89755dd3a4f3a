//! [`NfsFuse`]: the kernel's FUSE requests turned into [`CachedFs`] calls.
//!
//! Each request becomes a task on the tokio runtime, which replies when
//! its call finishes (fuser's reply objects are `Send`). The reader thread
//! goes straight back to the kernel for the next request, so a slow READ
//! never holds up a LOOKUP, and nothing here takes a lock around a
//! request: the cache layer's own per-inode locks are all there is. The
//! kernel bounds how many requests are outstanding (`max_background` for
//! read-ahead and write-back, one per blocked thread otherwise), which
//! bounds the tasks.
//!
//! Every call carries the requesting process's credentials (uid, gid and
//! supplementary groups), so the server decides what each user may do.
//! TTLs given to the kernel are what remains of the cache's own attribute
//! period: the kernel never trusts attributes longer than we would
//! (with `noac`, not at all).

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use eagernfs_client::cache::{CachedFs, Entry, FsError};
use eagernfs_client::{AnyClient, Cred, LocalLock, LockClient, LookupCache, Nfs4Client, NfsError, NfsOps};
use fuser::{
    AccessFlags, Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, Notifier, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use tokio::runtime::Handle;

use crate::attr::{file_attr, file_type, sattr};
use crate::callbacks::MountCallbacks;
use crate::creds::CredCache;
use crate::locks4::{self, V4Locks};

/// Largest WRITE the kernel may send us: Linux's FUSE limit (256 pages).
/// Bigger writes mean fewer requests; the cache coalesces to `wsize`.
pub const MAX_WRITE_BYTES: u32 = 1 << 20;
/// Read-ahead and write-back requests the kernel may have outstanding at
/// once (its default is 12, too few to keep a network pipe busy).
pub const MAX_BACKGROUND: u16 = 64;
/// The kernel's `__FMODE_EXEC`, set in the open flags FUSE passes on for
/// the open execve(2) makes of a program.
const FMODE_EXEC: i32 = 0x20;
/// `statfs` block unit: `df` multiplies block counts by it.
const STATFS_FRAGMENT_BYTES: u32 = 4096;

/// A FUSE file system over a [`CachedFs`].
pub struct NfsFuse<C: NfsOps> {
    /// The caching layer; clones share everything.
    fs: CachedFs<C>,
    /// Where request tasks run.
    rt: Handle,
    /// Supplementary groups of callers, briefly cached.
    creds: Arc<CredCache>,
    /// `lookupcache=none`: the kernel may not cache names either.
    names_uncached: bool,
    /// Told at unmount: MOUNT UMNT (NFSv3, advisory, as the Linux client
    /// does), or the end of the session (NFSv4).
    umnt: Option<AnyClient>,
    /// Tells the kernel to drop what it cached about an inode or a name
    /// when we know better (set once the session exists).
    kernel: Arc<OnceLock<Notifier>>,
    /// Byte-range locks through the server (NLM), and which kinds go there.
    locks: Option<Locks>,
    /// The same over NFSv4 (LOCK, LOCKU, LOCKT): then `locks` is `None`.
    locks4: Option<V4Locks>,
    local_lock: LocalLock,
}

/// The lock client and what identifies this mount's lock owners.
#[derive(Clone)]
struct Locks {
    client: LockClient,
    /// Random per mount, first in every owner handle: owners of two mounts
    /// never collide, and a conflict found by TEST is known to be ours.
    nonce: [u8; 8],
    /// The process that took each owner's locks (what F_GETLK reports).
    pids: Arc<parking_lot::Mutex<std::collections::HashMap<u64, u32>>>,
    /// Owners that took locks through each open file (FUSE handle).
    /// Open-file-description locks (`F_OFD_SETLK`) belong to the open file
    /// itself and must go at its last close, but FUSE tells us nothing
    /// then (the kernel only drops locks it keeps itself): `release`
    /// unlocks every owner listed for the handle. POSIX owners' locks are
    /// already gone by then (every close drops them, in `flush`), so this
    /// frees exactly the open file's own locks.
    by_handle: Arc<parking_lot::Mutex<std::collections::HashMap<u64, std::collections::HashSet<u64>>>>,
}

impl Locks {
    fn owner(&self, lock_owner: u64) -> eagernfs_client::lock::LockOwner {
        let mut oh = Vec::with_capacity(16);
        oh.extend_from_slice(&self.nonce);
        oh.extend_from_slice(&lock_owner.to_be_bytes());
        eagernfs_client::lock::LockOwner {
            oh: bytes::Bytes::from(oh),
            svid: (lock_owner ^ (lock_owner >> 32)) as i32 & i32::MAX,
        }
    }

    /// The local pid holding `owner`'s lock, if the owner is this mount's.
    fn local_pid(&self, owner: &eagernfs_client::lock::LockOwner) -> u32 {
        if owner.oh.len() != 16 || owner.oh[..8] != self.nonce {
            return 0;
        }
        let id = u64::from_be_bytes(owner.oh[8..16].try_into().expect("16 bytes"));
        self.pids.lock().get(&id).copied().unwrap_or(0)
    }
}

/// `fcntl`'s `[start, end]` (end inclusive, `OFFSET_MAX` to the end) as NLM's range.
fn lock_range(start: u64, end: u64) -> eagernfs_client::lock::LockRange {
    let len = if end >= i64::MAX as u64 { 0 } else { end.saturating_sub(start) + 1 };
    eagernfs_client::lock::LockRange { offset: start, len }
}

/// Whether process `pid` has a signal waiting that would interrupt a
/// blocking `fcntl(F_SETLKW)` (any pending signal it neither blocks nor
/// ignores; SIGKILL always). FUSE cannot tell us (fuser does not pass
/// interrupts on), so a waiting lock request looks. A process that is gone
/// counts as interrupted.
fn signal_pending(pid: u32) -> bool {
    if pid == 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return true };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let pending = field("SigPnd:") | field("ShdPnd:");
    pending & !field("SigBlk:") & !field("SigIgn:") != 0
}

/// Eight bytes that differ between mounts (time, pid and address mixed).
fn rand_nonce() -> [u8; 8] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish().to_be_bytes()
}

/// Attributes for the "." and ".." entries of a READDIRPLUS reply: the
/// kernel links neither, it only needs a type for `d_type`.
fn dir_placeholder() -> eagernfs_proto::nfs3::Fattr3 {
    use eagernfs_proto::nfs3::{Fattr3, Ftype3, Nfstime3, Specdata3};
    Fattr3 {
        ftype: Ftype3::Dir,
        mode: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        size: 0,
        used: 0,
        rdev: Specdata3::default(),
        fsid: 0,
        fileid: 0,
        atime: Nfstime3::default(),
        mtime: Nfstime3::default(),
        ctime: Nfstime3::default(),
    }
}

fn errno(e: &FsError) -> Errno {
    let code = e.errno();
    // A server or transport failure is worth a line in the log; ENOENT
    // and friends are ordinary answers.
    if code == libc::EIO || matches!(e, FsError::Io(_)) {
        tracing::warn!("returning EIO: {e}");
    } else {
        tracing::debug!("returning errno {code}: {e}");
    }
    Errno::from_i32(code)
}

/// [`errno`] for a failed request about inode `ino` (for a change in a
/// directory, the directory). When the server called its handle stale
/// (another client removed it), the cache first forgets it and the names
/// leading to it (`CachedFs::forget_stale`): the kernel walks the path again
/// after ESTALE, and that walk's lookups then find what the server has now
/// (ENOENT), as on a kernel NFS mount, instead of the same stale object.
fn failed<C: NfsOps>(fs: &CachedFs<C>, ino: u64, e: &FsError) -> Errno {
    if e.is_stale() {
        fs.forget_stale(ino);
    }
    errno(e)
}

fn name_bytes(name: &OsStr) -> Vec<u8> {
    name.as_bytes().to_vec()
}

impl<C: NfsOps> NfsFuse<C> {
    /// Serve `fs`, running request tasks on `rt`.
    pub fn new(fs: CachedFs<C>, rt: Handle) -> Self {
        let names_uncached = fs.config().lookupcache == LookupCache::None;
        NfsFuse {
            fs,
            rt,
            creds: Arc::new(CredCache::new()),
            names_uncached,
            umnt: None,
            kernel: Arc::new(OnceLock::new()),
            locks: None,
            locks4: None,
            local_lock: LocalLock::All,
        }
    }

    /// Send `fcntl` and `flock` locks (those `local_lock` does not keep
    /// local) to the server through `locks`; with `None` they fail with
    /// ENOLCK unless kept local.
    pub fn with_locks(mut self, locks: Option<LockClient>, local_lock: LocalLock) -> Self {
        self.locks = locks.map(|client| Locks {
            client,
            nonce: rand_nonce(),
            pids: Default::default(),
            by_handle: Default::default(),
        });
        self.local_lock = local_lock;
        self
    }

    /// Send `fcntl` and `flock` locks (those `local_lock` does not keep
    /// local) to an NFSv4 server through `client` (LOCK, LOCKU, LOCKT).
    /// `callbacks` wake waiters on CB_NOTIFY_LOCK.
    pub(crate) fn with_v4_locks(
        mut self,
        client: Nfs4Client,
        callbacks: Arc<MountCallbacks>,
        local_lock: LocalLock,
    ) -> Self {
        self.locks = None;
        self.locks4 = Some(V4Locks::new(client, callbacks));
        self.local_lock = local_lock;
        self
    }

    /// Where to put the session's notifier once it exists: the kernel's
    /// caches can then be corrected when the server changed something
    /// the kernel would not ask about again.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.kernel.clone()
    }

    /// The kernel's cached attributes of `ino` are stale: drop them (not
    /// its cached data), so the next stat asks us. Best effort: without a
    /// notifier (tests) or if the kernel has forgotten the inode, there is
    /// nothing to correct.
    fn forget_kernel_attrs(&self, ino: u64) {
        if let Some(k) = self.kernel.get() {
            let _ = k.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// Send MOUNT UMNT through `client` (NFSv3), or end its session
    /// (NFSv4), when the file system is unmounted.
    pub fn umnt_on_destroy(mut self, client: AnyClient) -> Self {
        self.umnt = Some(client);
        self
    }

    fn cred(&self, req: &Request) -> Cred {
        self.creds.get(req.pid(), req.uid(), req.gid())
    }

    /// Run `work` as a task with a clone of the cache and the caller's
    /// credentials.
    fn spawn<F, Fut>(&self, req: &Request, work: F)
    where
        F: FnOnce(CachedFs<C>, Cred) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Polling every request on the reader thread first (sending its call from there, the
        // reply still coming through the runtime) was tried (0387f50, 43f2dbc): fewer context
        // switches, but no faster on any step of scripts/bench-mount.sh in two runs
        // (docs/benchmarks/mount-2026-11-26-c and -d). Requests whose calls may wait for their
        // replies on lanes use `start`: those that read, and over NFSv4.1 those that change
        // something with one call (its slot makes a second copy harmless).
        self.rt.spawn(work(self.fs.clone(), self.cred(req)));
    }

    /// Run `work` on this reader thread, its short calls that a lane may
    /// carry on lanes (`eagernfs_client::lane`: NFSv3's read-only calls,
    /// NFSv4.1's read-only and `cachethis` COMPOUNDs): the call goes out and
    /// its reply comes back to this thread, with no runtime thread in
    /// between. Whatever else it waits for (a call no lane takes, a lock, a
    /// write-back) moves it to the runtime.
    fn start<F, Fut>(&self, req: &Request, work: F)
    where
        F: FnOnce(CachedFs<C>, Cred) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        crate::inline::run(&self.rt, work(self.fs.clone(), self.cred(req)));
    }

    /// Answer a request about directory `dir` with an entry.
    fn reply_entry(
        fs: &CachedFs<C>,
        dir: u64,
        names_uncached: bool,
        reply: ReplyEntry,
        r: Result<Entry, FsError>,
    ) {
        match r {
            Ok(e) => {
                let entry_ttl = if names_uncached { Duration::ZERO } else { e.ttl };
                reply.entry_with_ttls(
                    &e.ttl,
                    &entry_ttl,
                    &file_attr(e.ino, &e.attr),
                    Generation(u64::from(e.generation)),
                )
            }
            Err(e) => reply.error(failed(fs, dir, &e)),
        }
    }

    /// Answer a request about inode `ino`.
    fn reply_empty_at(fs: &CachedFs<C>, ino: u64, reply: ReplyEmpty, r: Result<(), FsError>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(failed(fs, ino, &e)),
        }
    }

    fn reply_empty(reply: ReplyEmpty, r: Result<(), FsError>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// A request refused for the server's grace period is asked again after this.
const GRACE_RETRY: Duration = Duration::from_millis(500);
/// A request the server queued is asked again after this at first, doubling
/// up to [`BLOCKED_POLL_MAX`] (the server grants it as soon as it can; asking
/// again only learns of that, and of a signal to the waiting process).
const BLOCKED_POLL_MIN: Duration = Duration::from_millis(20);
const BLOCKED_POLL_MAX: Duration = Duration::from_millis(500);

fn lock_errno(e: &NfsError) -> i32 {
    match e {
        NfsError::Nfs(_) | NfsError::NoLocks => e.errno(),
        _ => libc::ENOLCK,
    }
}

/// Whether `lock_owner` holds locks on `ino` here (no call to the server).
fn holds_locks<C: NfsOps>(fs: &CachedFs<C>, locks: &Locks, ino: u64, lock_owner: u64) -> bool {
    fs.file_handle(ino).is_ok_and(|nfh| locks.client.holds(&nfh, &locks.owner(lock_owner)))
}

/// Release every lock `lock_owner` holds on `ino` (a close), if it holds any.
async fn release_owner<C: NfsOps>(fs: &CachedFs<C>, locks: &Locks, ino: u64, lock_owner: u64) {
    let Ok(nfh) = fs.file_handle(ino) else { return };
    let owner = locks.owner(lock_owner);
    if !locks.client.holds(&nfh, &owner) {
        return;
    }
    let all = eagernfs_client::lock::LockRange { offset: 0, len: 0 };
    if let Err(e) = locks.client.unlock(&nfh, &owner, all).await {
        tracing::warn!("releasing locks at close: {e}");
    }
    locks.pids.lock().remove(&lock_owner);
}

/// The type of a READDIR (not PLUS) entry, which the server did not
/// send. FUSE has no "unknown" type, and a wrong one misleads programs
/// that trust `d_type` (find does not descend into a "file"), so ask:
/// a LOOKUP, whose kernel reference is dropped again at once.
async fn entry_type<C: NfsOps>(fs: &CachedFs<C>, dir: u64, name: &[u8], cred: &Cred) -> FileType {
    if name == b"." || name == b".." {
        return FileType::Directory;
    }
    match fs.lookup(dir, name, cred).await {
        Ok(e) => {
            fs.forget(e.ino, 1);
            file_type(e.attr.ftype)
        }
        // Gone meanwhile: any type will do, a later lookup fails anyway.
        Err(_) => FileType::RegularFile,
    }
}

impl<C: NfsOps> Filesystem for NfsFuse<C> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Each of these is an optimisation the kernel may refuse; the
        // mount works without any of them.
        let _ = config.set_max_write(MAX_WRITE_BYTES);
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND * 3 / 4);
        // Lookups and readdirs in one directory may run at once, and the
        // kernel drops its cached pages when it sees mtime or size change
        // (another client wrote), as NFS's attribute revalidation does.
        // HANDLE_KILLPRIV_V2: a write, truncate or chown that must clear
        // set-id bits is flagged for us instead of being preceded by a
        // chmod as the writer, which the server refuses to anyone but the
        // owner (the write then failed with EPERM and its data was lost).
        for cap in [
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_AUTO_INVAL_DATA,
            InitFlags::FUSE_MAX_PAGES,
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            // File handles (name_to_handle_at/open_by_handle_at, NFS
            // re-export): the kernel asks LOOKUP "." of an inode number it
            // forgot, and ".." to connect directories; `CachedFs::lookup`
            // answers both from the handles it remembers.
            InitFlags::FUSE_EXPORT_SUPPORT,
            // Directory listings carry attributes and count as lookups
            // (always, not the kernel's adaptive mode: our listings come
            // with attributes from the server anyway).
            InitFlags::FUSE_DO_READDIRPLUS,
        ] {
            let _ = config.add_capabilities(cap);
        }
        // Without these the kernel keeps the locks itself (local_lock).
        if self.local_lock.posix_remote() {
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS);
        }
        if self.local_lock.flock_remote() {
            let _ = config.add_capabilities(InitFlags::FUSE_FLOCK_LOCKS);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        // Unmounted: nothing may stay unwritten. Files are normally all
        // flushed by their last close; this catches a lazy unmount.
        let fs = self.fs.clone();
        let umnt = self.umnt.take();
        let locks = self.locks.as_ref().map(|l| l.client.clone());
        let done = self.rt.block_on(async move {
            let r = fs.sync_all().await;
            if let Some(l) = locks {
                l.stop_callbacks().await;
            }
            if let Some(c) = umnt {
                let _ = c.unmount().await;
            }
            r
        });
        if let Err(e) = done {
            tracing::error!("writing back cached data at unmount failed: {e}");
        }
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        // Answered from the cache on this reader thread when it can be
        // (see `CachedFs::try_lookup`), as most lookups of an untar are.
        if let Some(r) = self.fs.try_lookup(parent.0, name.as_bytes()) {
            return Self::reply_entry(&self.fs, parent.0, self.names_uncached, reply, r);
        }
        let name = name_bytes(name);
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            Self::reply_entry(&fs, parent.0, uncached, reply, fs.lookup(parent.0, &name, &cred).await)
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        // Bookkeeping only, no I/O: done in place.
        self.fs.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(e) = self.fs.try_getattr(ino.0) {
            return reply.attr(&e.ttl, &file_attr(e.ino, &e.attr));
        }
        self.start(req, move |fs, cred| async move {
            match fs.getattr(ino.0, &cred).await {
                Ok(e) => reply.attr(&e.ttl, &file_attr(e.ino, &e.attr)),
                Err(e) => reply.error(failed(&fs, ino.0, &e)),
            }
        });
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let attrs = sattr(mode, uid, gid, size, atime, mtime);
        if let Some(r) = self.fs.try_setattr(ino.0, &attrs, &self.cred(req)) {
            return match r {
                Ok(e) => reply.attr(&e.ttl, &file_attr(e.ino, &e.attr)),
                Err(e) => reply.error(errno(&e)),
            };
        }
        self.start(req, move |fs, cred| async move {
            match fs.setattr(ino.0, attrs, &cred).await {
                Ok(e) => reply.attr(&e.ttl, &file_attr(e.ino, &e.attr)),
                Err(e) => reply.error(failed(&fs, ino.0, &e)),
            }
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.start(req, move |fs, cred| async move {
            match fs.readlink(ino.0, &cred).await {
                Ok(target) => reply.data(&target),
                Err(e) => reply.error(failed(&fs, ino.0, &e)),
            }
        });
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let name = name_bytes(name);
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            Self::reply_entry(
                &fs,
                parent.0,
                uncached,
                reply,
                fs.mknod(parent.0, &name, mode, u64::from(rdev), &cred).await,
            )
        });
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        let name = name_bytes(name);
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            Self::reply_entry(&fs, parent.0, uncached, reply, fs.mkdir(parent.0, &name, mode, &cred).await)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        self.start(req, move |fs, cred| async move {
            Self::reply_empty_at(&fs, parent.0, reply, fs.unlink(parent.0, &name, &cred).await)
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let name = name_bytes(name);
        self.start(req, move |fs, cred| async move {
            Self::reply_empty_at(&fs, parent.0, reply, fs.rmdir(parent.0, &name, &cred).await)
        });
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let name = name_bytes(link_name);
        let target = target.as_os_str().as_bytes().to_vec();
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            Self::reply_entry(
                &fs,
                parent.0,
                uncached,
                reply,
                fs.symlink(parent.0, &name, &target, &cred).await,
            )
        });
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // NFSv3 RENAME always replaces; it cannot exchange or refuse to
        // replace atomically, so say so rather than pretend.
        if !flags.is_empty() {
            reply.error(Errno::EINVAL);
            return;
        }
        let (name, newname) = (name_bytes(name), name_bytes(newname));
        self.start(req, move |fs, cred| async move {
            let r = fs.rename(parent.0, &name, newparent.0, &newname, &cred).await;
            if r.as_ref().is_err_and(FsError::is_stale) {
                // Either directory may be the one gone.
                fs.forget_stale(newparent.0);
            }
            Self::reply_empty_at(&fs, parent.0, reply, r)
        });
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let newname = name_bytes(newname);
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            Self::reply_entry(
                &fs,
                newparent.0,
                uncached,
                reply,
                fs.link(ino.0, newparent.0, &newname, &cred).await,
            )
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // The kernel has checked mode bits (default_permissions); the
        // server has the last word (root squashing, ACLs): ask it with
        // ACCESS, as Linux's NFS client does at open, so a refused open
        // fails at open(2) and not at the first read(2). The cache's open
        // itself only checks freshness.
        let mut mask = match flags.acc_mode() {
            OpenAccMode::O_RDONLY => libc::R_OK,
            OpenAccMode::O_WRONLY => libc::W_OK,
            OpenAccMode::O_RDWR => libc::R_OK | libc::W_OK,
        };
        if flags.0 & libc::O_TRUNC != 0 {
            mask |= libc::W_OK;
        }
        if flags.0 & FMODE_EXEC != 0 {
            // execve opens the program to read it, but what the caller
            // needs is the right to execute it: an execute-only program
            // (mode 0111) must run. Linux's NFS client asks exactly this
            // (nfs_open_permission_mask); the server lets such a caller
            // READ the file, as knfsd does.
            mask = libc::X_OK;
        }
        // A file held under a delegation opens with no call: answered on
        // this reader thread (see `CachedFs::try_write` for why that matters).
        let done = {
            let _rt = self.rt.enter();
            self.fs.try_open_checked(ino.0, flags.0, mask, &self.cred(req))
        };
        if let Some(r) = done {
            return match r {
                Ok(o) => {
                    let keep = if o.keep_cache { FopenFlags::FOPEN_KEEP_CACHE } else { FopenFlags::empty() };
                    reply.opened(FileHandle(o.fh), keep)
                }
                Err(e) => reply.error(errno(&e)),
            };
        }
        let kernel = self.kernel.clone();
        self.start(req, move |fs, cred| async move {
            // CachedFs remembers ACCESS answers per caller while the file's
            // attributes are trusted, and an ACCESS it sends brings the
            // attributes close-to-open needs (see `open_checked`).
            match fs.open_checked(ino.0, flags.0, mask, &cred).await {
                // The kernel keeps its pages of the file only if nothing but
                // its own writes changed the file since it cached them;
                // otherwise they go at open, and reads come to our cache,
                // which open has just revalidated (close-to-open). Its
                // cached attributes go too: their period may still run, and
                // a read stops at the size they say (another client's
                // longer file would read short).
                Ok(o) => {
                    let keep = if o.keep_cache {
                        FopenFlags::FOPEN_KEEP_CACHE
                    } else {
                        if let Some(k) = kernel.get() {
                            let _ = k.inval_inode(ino, -1, 0);
                        }
                        FopenFlags::empty()
                    };
                    reply.opened(FileHandle(o.fh), keep)
                }
                Err(e) => reply.error(failed(&fs, ino.0, &e)),
            }
        });
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Cached data is answered on this reader thread (see
        // `CachedFs::try_write` for why that matters).
        let done = {
            let _rt = self.rt.enter();
            self.fs.try_read(fh.0, offset, size)
        };
        if let Some(r) = done {
            return match r {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(errno(&e)),
            };
        }
        self.start(req, move |fs, _cred| async move {
            match fs.read(fh.0, offset, size).await {
                Ok(data) => reply.data(&data),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
            // The kernel keeps the mode it had: make it ask again.
            match self.fs.drop_setid_bits(fh.0) {
                Ok(true) => self.forget_kernel_attrs(ino.0),
                Ok(false) => {}
                Err(e) => return reply.error(errno(&e)),
            }
        }
        // Most writes only copy into the cache: answer them on this
        // reader thread (see `CachedFs::try_write` for why that matters).
        let done = {
            let _rt = self.rt.enter();
            self.fs.try_write(fh.0, offset, data)
        };
        if let Some(r) = done {
            match r {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(&e)),
            }
            return;
        }
        // The request buffer is reused for the next request: copy.
        let data = data.to_vec();
        self.spawn(req, move |fs, _cred| async move {
            match fs.write(fh.0, offset, &data).await {
                Ok(n) => reply.written(n),
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // Every close(2): write back and COMMIT before it returns, and
        // release the closing process's fcntl locks on the file (POSIX:
        // any close drops them).
        if let Some(v4) = self.locks4.clone().filter(|_| self.local_lock.posix_remote()) {
            let nfh = self.fs.file_handle(ino.0).ok();
            let holds = nfh.as_ref().is_some_and(|f| v4.holds(f, lock_owner.0));
            if !holds {
                if let Some(r) = self.fs.try_flush(fh.0) {
                    return Self::reply_empty(reply, r);
                }
            }
            return self.start(req, move |fs, cred| async move {
                let r = fs.flush(fh.0).await;
                if let (true, Some(nfh)) = (holds, nfh) {
                    v4.release_owner(&cred, &nfh, lock_owner.0).await;
                }
                Self::reply_empty(reply, r)
            });
        }
        let locks = self.locks.clone().filter(|_| self.local_lock.posix_remote());
        let holds = locks.as_ref().is_some_and(|l| holds_locks(&self.fs, l, ino.0, lock_owner.0));
        if !holds {
            // Nothing to write back and no lock to drop: answered here.
            if let Some(r) = self.fs.try_flush(fh.0) {
                return Self::reply_empty(reply, r);
            }
        }
        self.start(req, move |fs, _cred| async move {
            let r = fs.flush(fh.0).await;
            if let Some(l) = locks {
                release_owner(&fs, &l, ino.0, lock_owner.0).await;
            }
            Self::reply_empty(reply, r)
        });
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The last close of an open file description drops its flock lock
        // and its OFD locks (see `Locks::by_handle`).
        if let Some(v4) = self.locks4.clone() {
            let flock = self.local_lock.flock_remote();
            let posix = self.local_lock.posix_remote();
            let nfh = self.fs.file_handle(_ino.0).ok();
            let flock_held = match (flock, lock_owner, &nfh) {
                (true, Some(owner), Some(f)) => v4.holds(f, owner.0),
                _ => false,
            };
            let ofd_held = posix && v4.by_handle.lock().contains_key(&fh.0);
            if !flock_held && !ofd_held {
                if let Some(r) = self.fs.try_release(fh.0) {
                    return Self::reply_empty(reply, r);
                }
            }
            self.fs.begin_release(fh.0);
            return self.spawn(req, move |fs, cred| async move {
                if let Some(nfh) = &nfh {
                    if let (true, Some(owner)) = (flock_held, lock_owner) {
                        v4.release_owner(&cred, nfh, owner.0).await;
                    }
                    let owners = if posix { v4.by_handle.lock().remove(&fh.0) } else { None };
                    for owner in owners.unwrap_or_default() {
                        v4.release_owner(&cred, nfh, owner).await;
                    }
                }
                Self::reply_empty(reply, fs.release(fh.0).await)
            });
        }
        let flock = self.locks.clone().filter(|_| self.local_lock.flock_remote());
        let posix = self.locks.clone().filter(|_| self.local_lock.posix_remote());
        let ino = _ino;
        let flock_held = match (&flock, lock_owner) {
            (Some(l), Some(owner)) => holds_locks(&self.fs, l, ino.0, owner.0),
            _ => false,
        };
        let ofd_held = posix.as_ref().is_some_and(|l| l.by_handle.lock().contains_key(&fh.0));
        if !flock_held && !ofd_held {
            // Nothing to write back and no lock to drop: done here.
            if let Some(r) = self.fs.try_release(fh.0) {
                return Self::reply_empty(reply, r);
            }
        }
        self.fs.begin_release(fh.0);
        self.spawn(req, move |fs, _cred| async move {
            if let (Some(l), Some(owner)) = (flock, lock_owner) {
                release_owner(&fs, &l, ino.0, owner.0).await;
            }
            if let Some(l) = posix {
                let owners = l.by_handle.lock().remove(&fh.0).unwrap_or_default();
                for owner in owners {
                    release_owner(&fs, &l, ino.0, owner).await;
                }
            }
            Self::reply_empty(reply, fs.release(fh.0).await)
        });
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        if let Some(v4) = self.locks4.clone() {
            return self.spawn(req, move |fs, cred| async move {
                // A file created early has no handle until it is made.
                fs.settle_early(ino.0).await;
                let Ok(nfh) = fs.file_handle(ino.0) else {
                    return reply.error(Errno::from_i32(libc::ESTALE));
                };
                let (offset, length) = locks4::range(start, end);
                let write = typ == libc::F_WRLCK;
                match v4.client.test_lock(&cred, &nfh, lock_owner.0, write, offset, length).await {
                    Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
                    Ok(Some(c)) => {
                        let typ = if c.write { libc::F_WRLCK } else { libc::F_RDLCK };
                        let end = locks4::fcntl_end(c.offset, c.length);
                        reply.locked(c.offset, end, typ, v4.local_pid(&c))
                    }
                    Err(e) => reply.error(Errno::from_i32(locks4::lock_errno(&e))),
                }
            });
        }
        let Some(locks) = self.locks.clone() else { return reply.error(Errno::from_i32(libc::ENOLCK)) };
        self.spawn(req, move |fs, _cred| async move {
            fs.settle_early(ino.0).await;
            let Ok(nfh) = fs.file_handle(ino.0) else { return reply.error(Errno::from_i32(libc::ESTALE)) };
            let owner = locks.owner(lock_owner.0);
            let range = lock_range(start, end);
            let exclusive = typ == libc::F_WRLCK;
            loop {
                match locks.client.test(&nfh, &owner, range, exclusive).await {
                    Ok(Ok(None)) => return reply.locked(start, end, libc::F_UNLCK, 0),
                    Ok(Ok(Some(c))) => {
                        let end =
                            if c.range.len == 0 { i64::MAX as u64 } else { c.range.offset + c.range.len - 1 };
                        let typ = if c.exclusive { libc::F_WRLCK } else { libc::F_RDLCK };
                        return reply.locked(c.range.offset, end, typ, locks.local_pid(&c.owner));
                    }
                    // The server restarted: it answers once its grace period is over.
                    Ok(Err(_)) => {
                        if signal_pending(pid) {
                            return reply.error(Errno::from_i32(libc::EINTR));
                        }
                        tokio::time::sleep(GRACE_RETRY).await;
                    }
                    Err(e) => return reply.error(Errno::from_i32(lock_errno(&e))),
                }
            }
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(v4) = self.locks4.clone() {
            return self.spawn(req, move |fs, cred| async move {
                // A file created early has no handle until it is made.
                fs.settle_early(ino.0).await;
                let Ok(nfh) = fs.file_handle(ino.0) else {
                    return reply.error(Errno::from_i32(libc::ESTALE));
                };
                let (offset, length) = locks4::range(start, end);
                let owner = lock_owner.0;
                if typ == libc::F_UNLCK {
                    return match v4.client.unlock(&cred, &nfh, owner, offset, length).await {
                        Ok(()) => reply.ok(),
                        Err(e) => reply.error(Errno::from_i32(locks4::lock_errno(&e))),
                    };
                }
                // NFSv4 locks hang off an open of the file.
                if let Err(e) = fs.hold_open(fh.0).await {
                    return reply.error(errno(&e));
                }
                v4.note(fh.0, owner, pid);
                let write = typ == libc::F_WRLCK;
                let mut wait = BLOCKED_POLL_MIN;
                loop {
                    let r = if sleep {
                        v4.client.lock_blocking(&cred, &nfh, owner, write, offset, length).await
                    } else {
                        v4.client.lock(&cred, &nfh, owner, write, offset, length).await
                    };
                    match r {
                        Ok(()) => return reply.ok(),
                        Err(NfsError::Nfs4(eagernfs_proto::nfs4::Nfsstat4::Denied)) if sleep => {
                            // Someone else's: ask again until granted, unless
                            // the caller got a signal.
                            if signal_pending(pid) {
                                return reply.error(Errno::from_i32(libc::EINTR));
                            }
                            v4.wait(wait).await;
                            wait = (wait * 2).min(BLOCKED_POLL_MAX);
                        }
                        Err(e) => return reply.error(Errno::from_i32(locks4::lock_errno(&e))),
                    }
                }
            });
        }
        let Some(locks) = self.locks.clone() else { return reply.error(Errno::from_i32(libc::ENOLCK)) };
        self.spawn(req, move |fs, _cred| async move {
            fs.settle_early(ino.0).await;
            let Ok(nfh) = fs.file_handle(ino.0) else { return reply.error(Errno::from_i32(libc::ESTALE)) };
            let owner = locks.owner(lock_owner.0);
            let range = lock_range(start, end);
            if typ == libc::F_UNLCK {
                let r = locks.client.unlock(&nfh, &owner, range).await;
                return match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(Errno::from_i32(lock_errno(&e))),
                };
            }
            // Before the call: the lock may be granted the moment it is asked.
            locks.pids.lock().insert(lock_owner.0, pid);
            locks.by_handle.lock().entry(fh.0).or_default().insert(lock_owner.0);
            let exclusive = typ == libc::F_WRLCK;
            let mut wait = BLOCKED_POLL_MIN;
            loop {
                use eagernfs_client::lock::LockReply;
                match locks.client.lock(&nfh, &owner, range, exclusive, sleep).await {
                    Ok(LockReply::Granted) => return reply.ok(),
                    Ok(LockReply::Denied) => return reply.error(Errno::from_i32(libc::EAGAIN)),
                    Ok(LockReply::Blocked) if !sleep => return reply.error(Errno::from_i32(libc::EAGAIN)),
                    Ok(LockReply::Blocked | LockReply::Grace) => {
                        // Queued on the server (or it is in its grace period):
                        // ask again until granted, unless the caller got a signal.
                        if signal_pending(pid) {
                            if let Err(e) = locks.client.cancel(&nfh, &owner, range, exclusive).await {
                                tracing::warn!("cancelling an interrupted lock request: {e}");
                            }
                            return reply.error(Errno::from_i32(libc::EINTR));
                        }
                        locks.client.wait_for_grant(wait).await;
                        wait = (wait * 2).min(BLOCKED_POLL_MAX);
                    }
                    Err(e) => return reply.error(Errno::from_i32(lock_errno(&e))),
                }
            }
        });
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.spawn(req, move |fs, _cred| async move { Self::reply_empty(reply, fs.fsync(fh.0).await) });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.start(req, move |fs, cred| async move {
            match fs.opendir(ino.0, &cred).await {
                Ok(dh) => reply.opened(FileHandle(dh), FopenFlags::empty()),
                Err(e) => reply.error(failed(&fs, ino.0, &e)),
            }
        });
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        self.start(req, move |fs, cred| async move {
            // Fill the kernel's buffer from as many server pages as fit;
            // the kernel comes back with the offset of the last entry used.
            let mut after = offset;
            loop {
                let entries = match fs.readdir(fh.0, after).await {
                    Ok(e) => e,
                    Err(e) => return reply.error(failed(&fs, ino.0, &e)),
                };
                if entries.is_empty() {
                    return reply.ok();
                }
                for e in entries {
                    let kind = match e.kind {
                        Some(k) => file_type(k),
                        None => entry_type(&fs, ino.0, &e.name, &cred).await,
                    };
                    if reply.add(INodeNo(e.ino), e.offset, kind, OsStr::from_bytes(&e.name)) {
                        return reply.ok();
                    }
                    after = e.offset;
                }
            }
        });
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        // As readdir, but each entry also carries its attributes and counts
        // as a lookup, so `ls -l`, `find`, `rm -r` and the first open of each
        // file after a listing cost the kernel no LOOKUP round trip to us
        // (the server's READDIRPLUS already told us everything).
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            let mut after = offset;
            loop {
                let entries = match fs.readdir(fh.0, after).await {
                    Ok(e) => e,
                    Err(e) => return reply.error(failed(&fs, ino.0, &e)),
                };
                if entries.is_empty() {
                    return reply.ok();
                }
                for e in entries {
                    let name = OsStr::from_bytes(&e.name);
                    if &e.name[..] == b"." || &e.name[..] == b".." {
                        // The kernel links neither (no reference is counted)
                        // and takes only the type from the attributes.
                        let attr = file_attr(e.ino, &dir_placeholder());
                        if reply.add(INodeNo(e.ino), e.offset, name, &Duration::ZERO, &attr, Generation(0)) {
                            return reply.ok();
                        }
                        after = e.offset;
                        continue;
                    }
                    // A reference for the kernel: from the listing, or (an entry
                    // that came without attributes) from a LOOKUP.
                    let entry = match fs.listed_entry(e.ino) {
                        Some(entry) => entry,
                        None => match fs.lookup(ino.0, &e.name, &cred).await {
                            Ok(entry) => entry,
                            // Gone meanwhile: leave it out.
                            Err(_) => {
                                after = e.offset;
                                continue;
                            }
                        },
                    };
                    let ttl = if uncached { Duration::ZERO } else { entry.ttl };
                    let attr = file_attr(entry.ino, &entry.attr);
                    let full = reply.add(
                        INodeNo(entry.ino),
                        e.offset,
                        name,
                        &ttl,
                        &attr,
                        Generation(u64::from(entry.generation)),
                    );
                    if full {
                        // Not sent: the kernel holds no reference for it.
                        fs.forget(entry.ino, 1);
                        return reply.ok();
                    }
                    after = e.offset;
                }
            }
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        Self::reply_empty(reply, self.fs.releasedir(fh.0));
    }

    fn fsyncdir(&self, req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        // Directory operations are synchronous at the server, except the
        // removes of `dirops=async`: their REMOVEs answered (and a failure
        // of one reported) first.
        self.spawn(req, move |fs, _cred| async move { Self::reply_empty(reply, fs.fsyncdir(ino.0).await) });
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.start(req, move |fs, cred| async move {
            match fs.statfs(ino.0, &cred).await {
                Ok(s) => {
                    let frag = u64::from(STATFS_FRAGMENT_BYTES);
                    reply.statfs(
                        s.total_bytes / frag,
                        s.free_bytes / frag,
                        s.avail_bytes / frag,
                        s.total_files,
                        s.avail_files,
                        s.block_bytes,
                        s.name_max,
                        STATFS_FRAGMENT_BYTES,
                    )
                }
                Err(e) => reply.error(errno(&e)),
            }
        });
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        self.start(req, move |fs, cred| async move {
            Self::reply_empty_at(&fs, ino.0, reply, fs.access(ino.0, mask.bits(), &cred).await)
        });
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let name = name_bytes(name);
        let uncached = self.names_uncached;
        self.start(req, move |fs, cred| async move {
            match fs.create(parent.0, &name, mode, flags, &cred).await {
                Ok((e, fh)) => {
                    // One TTL covers both the name and the attributes here.
                    let ttl = if uncached { Duration::ZERO } else { e.ttl };
                    reply.created(
                        &ttl,
                        &file_attr(e.ino, &e.attr),
                        Generation(u64::from(e.generation)),
                        FileHandle(fh),
                        FopenFlags::empty(),
                    )
                }
                Err(e) => reply.error(failed(&fs, parent.0, &e)),
            }
        });
    }
}
