//! A directory on a local Linux file system, exported as a [`Backend`].
//!
//! # How it stays inside the export
//! - Every object is reached through a descriptor: handles resolve with
//!   `open_by_handle_at(root_fd, …)`, and all name operations are the `*at`
//!   calls relative to the parent's descriptor with a single component
//!   (checked again here: no `/`, no NUL, at most [`NAME_MAX`] bytes). No
//!   path is ever built from client input.
//! - LOOKUP opens with `O_PATH | O_NOFOLLOW`, so a symlink is returned as a
//!   symlink and never followed; using a symlink's handle as a directory
//!   fails with `NotDir`, reading it with `Inval`.
//! - `..` of the root is the root.
//! - LOOKUP refuses (`XDev`) an object on another file system or another
//!   mount (mount points and bind mounts inside the export), so every
//!   handle names an object on the root's mount.
//! - Handles carry a keyed MAC (see `handle.rs`) bound to the export's key
//!   and root, checked before any system call.
//! - What is *not* prevented: a local user who moves or hard-links a file
//!   out of the exported directory on the same file system leaves a handle
//!   that still resolves (knfsd's `no_subtree_check` behaves the same).
//!
//! # Whose permissions
//! Operations that the kernel checks (lookup, create, remove, rename,
//! link, chmod/chown/utimes, truncation's suid clearing, writes' suid
//! clearing) run with the caller's fsuid/fsgid/groups on the calling thread
//! only (see `creds.rs`). Resolving a handle needs fsuid 0 and happens
//! before the switch. READ, WRITE, COMMIT, truncation, READDIR and ACCESS
//! check mode bits in user space with [`perm`], using a descriptor the
//! server opened, so the hot path costs no identity switch (READ) or at
//! most one (WRITE). POSIX ACLs are therefore not honoured on those paths.
//!
//! The calling thread keeps the identity of the last caller after a method
//! returns (that is the point of the cache): call the backend from
//! dedicated worker threads, not from threads that create files of their own.
//!
//! # Attributes
//! `fileid = st_ino`, `fsid = st_dev`, `used = st_blocks * 512`, times to
//! the nanosecond, `mode & 0o7777`, `rdev` as (major, minor).
//!
//! # Durability
//! WRITE `Unstable` is a `pwrite`; `DataSync` adds `fdatasync`, `FileSync`
//! adds `fsync`, and `committed` reports exactly what was done. COMMIT is
//! `fdatasync` of the whole file (a superset of the range asked for). The
//! write verifier is random per instance and changes whenever a sync or a
//! write fails with possible loss of unstable data. A cached descriptor
//! holding unstable data is synced before it is closed (see `fdcache.rs`).
//! A change of names or attributes (CREATE, MKDIR, SYMLINK, MKNOD, LINK,
//! RENAME, REMOVE, RMDIR, SETATTR, SETXATTR, REMOVEXATTR) returns once it is
//! on stable storage, as knfsd's `commit_metadata` does on a `sync` export:
//! the directories and objects it touched are synced, concurrent changes
//! sharing syncs (`metasync.rs`; on ext4 one journal commit per group).
//! [`LocalConfig::journaled`] turns that off behind the intent journal,
//! which logs the changes instead.
//! [`LocalConfig::unsafe_async`] skips every sync while still answering as if
//! it had happened: **unsafe**, a crash loses data and changes the client was
//! told are safe. Only for benchmarks and scratch exports.
//!
//! # Defaults
//! CREATE without a mode makes files `0o644`, MKDIR directories `0o755`,
//! MKNOD nodes `0o644`. The process umask does not apply: objects are
//! created with the umask at 0 on a thread that has its own (see
//! `sys::mkdirat`), so the requested rwx bits are there from the first
//! moment (the client has already applied its own umask),
//! while setgid inheritance from a setgid directory works as on Linux.
//! Symlink modes are ignored (Linux has none). SETATTR of a time to "now"
//! needs only write permission, as with knfsd; a client-given time needs
//! the owner.
//!
//! # Layout
//! - this file: configuration, the [`Backend`] implementation.
//! - `sys`: safe wrappers over the system calls.
//! - `creds`: per-thread fsuid/fsgid/groups with a cache.
//! - `handle`: handle layout and MAC.
//! - `fdcache`: open descriptors for I/O and the write verifier.
//! - `metasync`: group commit of changes of names and attributes.

mod creds;
mod fdcache;
mod handle;
mod metasync;
mod sys;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use siphasher::sip128::SipHasher24;

use self::fdcache::{FdCache, IoFile, WriteVerifier};
use self::handle::HandleCodec;
use self::metasync::{MetaSync, Strategy};
use self::sys::{attr_from_stat, EMPTY};
use crate::spliced::PipePool;
use crate::{
    access, perm, Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FileType,
    FsError, FsProperties, FsResult, FsStat, Lookup, NodeKind, ReadData, ReadResult, SeekWhat, SetAttr,
    SetTime, SplicedRead, StableHow, Timestamp, Verifier, Wcc, WccAttr, WriteResult, XattrSet, NAME_MAX,
    SYMLINK_TARGET_BYTES_MAX, XATTR_VALUE_MAX,
};

/// The largest READ or WRITE done in one call; a larger request is
/// answered short, which NFS allows. Bounds the buffer a READ allocates.
const IO_MAX_BYTES: usize = 16 << 20;

/// Idle pipes kept for spliced READs (two descriptors each).
const PIPES_KEPT: usize = 64;

/// Buffer for one `getdents64` call.
const DIRENT_BUF_BYTES: usize = 32 * 1024;

/// The mode of a file whose creator gave none, and of an EXCLUSIVE create until the client's
/// SETATTR that follows it: 0, as knfsd (and the memory backend) do, so a file is never, even
/// for a moment, open to more users than its creator meant.
const DEFAULT_FILE_MODE: u32 = 0;
const DEFAULT_DIR_MODE: u32 = 0o755;

/// How to export a local directory.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// The exported directory. Everything the backend touches is inside it
    /// (see the module docs for the one exception).
    pub root: PathBuf,
    /// Key of the MAC in every handle. Keep it secret and stable: handles
    /// survive a restart only with the same key, and a different key per
    /// export makes one export's handles useless on another.
    pub handle_key: [u8; 16],
    /// Skip `fsync`/`fdatasync` for stable writes and COMMIT, and the syncs of
    /// changes of names and attributes, while still reporting them done. **Unsafe**: a crash
    /// loses acknowledged data and changes.
    pub unsafe_async: bool,
    /// An intent journal (`crate::journal`) is in front of this backend and
    /// makes every change and every byte written durable in its log before
    /// they are answered; the journal's checkpoint (`sync_all`) syncs the
    /// file system in the background. The backend then syncs neither a change
    /// of names or attributes (CREATE, MKDIR, SYMLINK, MKNOD, LINK, RENAME,
    /// REMOVE, RMDIR, SETATTR, SETXATTR, REMOVEXATTR), which without a journal
    /// is answered only once on stable storage, concurrent calls sharing syncs
    /// (`metasync.rs`: what a `sync` export promises), nor a cached file's
    /// unstable data when the cache closes it (a write-back error then shows at
    /// the checkpoint's `syncfs`, and the log keeps the data until one succeeds).
    pub journaled: bool,
}

/// What [`LocalBackend::metadata_syncs`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataSyncs {
    /// How a change is made durable before its reply, in words.
    pub how: &'static str,
    /// Changes made durable before their reply.
    pub changes: u64,
    /// Syncs that took (groups of concurrent changes).
    pub syncs: u64,
}

/// A [`Backend`] over a local directory. Needs root (`CAP_DAC_READ_SEARCH`
/// for `open_by_handle_at`, `CAP_SETUID`/`CAP_SETGID` to act as callers).
pub struct LocalBackend {
    /// The root directory, opened for reading: the mount descriptor for
    /// `open_by_handle_at`, and what `syncfs`/`fstatvfs` act on.
    root_fd: OwnedFd,
    /// Identity of the root, to answer `..` of the root with the root.
    root_dev: u64,
    root_ino: u64,
    /// Mount id of the root: objects on another mount are not exported.
    root_mount_id: i32,
    root_handle: FileHandle,
    codec: HandleCodec,
    unsafe_async: bool,
    /// `LocalConfig::journaled`.
    journaled: bool,
    /// Group commit of changes of names and attributes (off when `LocalConfig::journaled`).
    meta: MetaSync,
    verifier: Arc<WriteVerifier>,
    /// See [`LocalBackend::readdir`] for why it is constant.
    cookieverf: Verifier,
    props: FsProperties,
    /// The file system was mounted read-only when we opened it: ACCESS
    /// then grants no modification.
    read_only: bool,
    files: FdCache,
    /// `O_PATH` descriptors of objects recently named by handle (ganesha's
    /// MDCACHE idea, for descriptors only: attributes are always fresh from
    /// `fstat`). Saves `open_by_handle_at` and `close` on every GETATTR,
    /// ACCESS, SETATTR and directory operation on a hot object. A removed
    /// object's descriptor answers `nlink == 0` and is dropped (stale).
    paths: FdCache<OwnedFd>,
    /// Reused buffers for READ data (see `crate::bufpool`).
    read_bufs: Arc<crate::bufpool::BufPool>,
    /// Pipes for READs answered by splice (`None`: this system cannot).
    pipes: Option<Arc<PipePool>>,
}

/// An object opened by the server (`O_PATH`) and its attributes.
struct Obj {
    /// Shared with the object cache (`paths`) when it came from there.
    fd: Arc<OwnedFd>,
    attr: Attr,
}

impl Obj {
    fn is_dir(&self) -> FsResult<()> {
        if self.attr.ftype == FileType::Directory {
            Ok(())
        } else {
            Err(FsError::NotDir)
        }
    }
}

/// A child just created or looked up: the object and its handle.
struct Child {
    obj: Obj,
    handle: FileHandle,
}

/// An extended attribute call's error: a missing attribute is `NoEnt`, one
/// too large `FBig`, a file system without them `NotSupp`.
fn xattr_err(e: io::Error) -> FsError {
    match e.raw_os_error() {
        Some(libc::ENODATA) => FsError::NoEnt,
        Some(libc::E2BIG | libc::ERANGE) => FsError::FBig,
        Some(libc::EOPNOTSUPP) => FsError::NotSupp,
        _ => e.into(),
    }
}

fn io_err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// Errors of `open_by_handle_at` for a handle whose MAC verified: the
/// object is gone.
fn handle_err(e: io::Error) -> FsError {
    match e.raw_os_error() {
        Some(libc::ESTALE) | Some(libc::ENOENT) => FsError::Stale,
        _ => e.into(),
    }
}

/// Check a client-supplied name is one path component.
fn component(name: &[u8]) -> FsResult<CString> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') {
        return Err(FsError::Inval);
    }
    CString::new(name).map_err(|_| FsError::Inval)
}

fn is_dot_or_dotdot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// A name to create: `.` and `..` always exist.
fn new_name(name: &[u8]) -> FsResult<CString> {
    if is_dot_or_dotdot(name) {
        return Err(FsError::Exist);
    }
    component(name)
}

/// A name to remove or rename: `.` and `..` are not entries one may change.
fn old_name(name: &[u8]) -> FsResult<CString> {
    if is_dot_or_dotdot(name) {
        return Err(FsError::Inval);
    }
    component(name)
}

fn timespec(t: SetTime) -> FsResult<libc::timespec> {
    Ok(match t {
        SetTime::DontChange => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        SetTime::ServerTime => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        SetTime::ClientTime(ts) => {
            if ts.nsecs > 999_999_999 {
                return Err(FsError::Inval);
            }
            libc::timespec { tv_sec: ts.secs, tv_nsec: ts.nsecs as libc::c_long }
        }
    })
}

/// Where an exclusive CREATE keeps its verifier (RFC 1813 §3.3.8 leaves it
/// to the server): the first half as mtime seconds, the second as atime
/// seconds, both with 0 ns. A client follows up with a SETATTR of its real
/// times, so the stash never outlives the create. Unsigned 32-bit seconds
/// are valid times on ext4 and tmpfs, so no bit is lost.
fn exclusive_times(verf: &Verifier) -> (Timestamp, Timestamp) {
    let m = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]);
    let a = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]);
    (Timestamp { secs: a as i64, nsecs: 0 }, Timestamp { secs: m as i64, nsecs: 0 })
}

fn fd_cache_capacity() -> usize {
    // A quarter of the descriptor limit leaves the rest for sockets and
    // per-request descriptors.
    (sys::nofile_soft_limit() / 4).clamp(16, 4096) as usize
}

impl LocalBackend {
    /// Open `cfg.root` for export. Fails if the process lacks the
    /// privileges listed on [`LocalBackend`] or the file system cannot
    /// produce file handles.
    pub fn open(cfg: LocalConfig) -> io::Result<Self> {
        let root_file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&cfg.root)
            .map_err(|e| io_err(e.kind(), format!("opening export root {}: {e}", cfg.root.display())))?;
        let root_fd = OwnedFd::from(root_file);
        if !creds::can_switch() {
            return Err(io_err(
                io::ErrorKind::PermissionDenied,
                "the local backend needs CAP_SETUID and CAP_SETGID to act as each caller: run the server as root"
                    .into(),
            ));
        }
        creds::become_server()
            .map_err(|_| io_err(io::ErrorKind::PermissionDenied, "cannot set fsuid 0".into()))?;
        let st = sys::fstat(root_fd.as_fd())?;
        let (root_kh, root_mount_id) = sys::name_to_handle_at(root_fd.as_fd(), EMPTY, libc::AT_EMPTY_PATH)
            .map_err(|e| {
                io_err(
                    io::ErrorKind::Unsupported,
                    format!(
                        "the file system of {} cannot make file handles (name_to_handle_at: {e})",
                        cfg.root.display()
                    ),
                )
            })?;
        sys::open_by_handle_at(root_fd.as_fd(), &root_kh, libc::O_PATH).map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                io_err(
                    io::ErrorKind::PermissionDenied,
                    "open_by_handle_at needs CAP_DAC_READ_SEARCH: run the server as root".into(),
                )
            } else {
                io_err(e.kind(), format!("open_by_handle_at on {}: {e}", cfg.root.display()))
            }
        })?;
        // Binding the MAC to the root's own kernel handle (stable across
        // reboots) means a key reused for another root does not carry
        // handles over to it.
        let codec = HandleCodec::new(cfg.handle_key, root_kh.data());
        let root_handle = codec.encode(&root_kh);

        let sf = sys::fstatfs(root_fd.as_fd())?;
        let sv = sys::fstatvfs(root_fd.as_fd())?;
        let is_ext4 = sf.f_type as libc::c_long == libc::EXT4_SUPER_MAGIC;
        let props = FsProperties {
            // ext4 with 4 KiB blocks addresses 2^32 blocks per file; tmpfs
            // and most others reach the off_t limit.
            max_file_size: if is_ext4 { ((1u64 << 32) - 1) * sf.f_bsize as u64 } else { i64::MAX as u64 },
            time_delta: Timestamp { secs: 0, nsecs: 1 },
            supports_hard_links: true,
            supports_symlinks: true,
            link_max: if is_ext4 { 65_000 } else { u32::MAX },
            name_max: NAME_MAX as u32,
            case_insensitive: false,
            case_preserving: true,
            holes_reported: true,
        };

        // The cookie verifier is constant for an export (see `readdir`), and
        // the same after a restart because cookies stay valid across one.
        let mut seed = b"eagernfs readdir cookieverf v1".to_vec();
        seed.extend_from_slice(root_kh.data());
        let cv = SipHasher24::new_with_key(&cfg.handle_key).hash(&seed).as_bytes();
        let mut cookieverf = [0u8; 8];
        cookieverf.copy_from_slice(&cv[..8]);

        let verifier = Arc::new(WriteVerifier::new());
        let meta = MetaSync::new(if cfg.unsafe_async || cfg.journaled {
            Strategy::Off
        } else {
            metasync::strategy_for(&root_fd, st.st_dev)
        });
        Ok(LocalBackend {
            root_fd,
            root_dev: st.st_dev,
            root_ino: st.st_ino,
            root_mount_id,
            root_handle,
            codec,
            unsafe_async: cfg.unsafe_async,
            journaled: cfg.journaled,
            meta,
            verifier,
            cookieverf,
            props,
            read_only: sv.f_flag & libc::ST_RDONLY != 0,
            files: FdCache::new(fd_cache_capacity()),
            paths: FdCache::new(fd_cache_capacity()),
            read_bufs: Arc::default(),
            pipes: PipePool::new(PIPES_KEPT),
        })
    }

    /// How changes of names and attributes are made durable, and how many
    /// were, in how many syncs (see `LocalConfig::journaled`).
    pub fn metadata_syncs(&self) -> MetadataSyncs {
        MetadataSyncs {
            how: match self.meta.strategy() {
                Strategy::Off => "not synced before the reply",
                Strategy::OneCommit => {
                    "one ext4 journal commit (fsync of the root) per group of concurrent changes"
                }
                Strategy::EachObject => {
                    "fsync of each directory and object touched, per group of concurrent changes"
                }
            },
            changes: self.meta.counters.changes.load(std::sync::atomic::Ordering::Relaxed),
            syncs: self.meta.counters.syncs.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    fn is_root(&self, attr: &Attr) -> bool {
        attr.fsid == self.root_dev && attr.fileid == self.root_ino
    }

    /// Verify `fh` and open it as the server with `flags`.
    ///
    /// `open_by_handle_at` of a directory removed a moment before can fail
    /// with ENOMEM while the kernel is still tearing it down (seen with
    /// both CPUs busy); asked again, it answers ESTALE. So ENOMEM is asked
    /// again twice before it counts as a shortage (JUKEBOX: try again later).
    fn open_handle(&self, fh: &FileHandle, flags: libc::c_int) -> FsResult<OwnedFd> {
        let kh = self.codec.decode(fh)?;
        creds::become_server()?;
        let mut tries = 0;
        loop {
            match sys::open_by_handle_at(self.root_fd.as_fd(), &kh, flags) {
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) && tries < 2 => {
                    tries += 1;
                    std::thread::yield_now();
                }
                r => return r.map_err(handle_err),
            }
        }
    }

    /// Stat an open descriptor; a removed object (no links left, but kept
    /// alive by a descriptor) is stale.
    fn live_attr(fd: &OwnedFd) -> FsResult<Attr> {
        let st = sys::fstat(fd.as_fd())?;
        if st.st_nlink == 0 {
            return Err(FsError::Stale);
        }
        Ok(attr_from_stat(&st))
    }

    fn object(&self, fh: &FileHandle) -> FsResult<Obj> {
        if let Some(fd) = self.paths.get(&fh.0) {
            self.codec.decode(fh)?;
            return match Self::live_attr(&fd) {
                Ok(attr) => Ok(Obj { fd, attr }),
                Err(e) => {
                    self.paths.remove(&fh.0);
                    Err(e)
                }
            };
        }
        let fd = self.open_handle(fh, libc::O_PATH)?;
        let attr = Self::live_attr(&fd)?;
        let fd = self.paths.insert(&fh.0, Arc::new(fd));
        Ok(Obj { fd, attr })
    }

    /// Forget the cached descriptors of `fh` (its object was removed).
    fn forget(&self, fh: &FileHandle) {
        self.files.remove(&fh.0);
        self.paths.remove(&fh.0);
    }

    fn dir_object(&self, fh: &FileHandle) -> FsResult<Obj> {
        let d = self.object(fh)?;
        d.is_dir()?;
        Ok(d)
    }

    /// Open `dir/name` without following a symlink, as whoever the thread
    /// currently is, and make its handle. Refuses another mount.
    fn open_child(&self, dir: &Obj, name: &CStr) -> FsResult<Child> {
        let fd = sys::openat(dir.fd.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW)?;
        self.child_from_fd(fd)
    }

    fn child_from_fd(&self, fd: OwnedFd) -> FsResult<Child> {
        let attr = attr_from_stat(&sys::fstat(fd.as_fd())?);
        let (kh, mount_id) = sys::name_to_handle_at(fd.as_fd(), EMPTY, libc::AT_EMPTY_PATH)?;
        if attr.fsid != self.root_dev || mount_id != self.root_mount_id {
            return Err(FsError::XDev);
        }
        Ok(Child { handle: self.codec.encode(&kh), obj: Obj { fd: Arc::new(fd), attr } })
    }

    /// The handle `dir/name` has now, if any (to evict its cached
    /// descriptor once it is removed). Best effort.
    fn handle_of(&self, dir: &Obj, name: &CStr) -> Option<FileHandle> {
        sys::name_to_handle_at(dir.fd.as_fd(), name, 0).ok().map(|(kh, _)| self.codec.encode(&kh))
    }

    /// The server's open descriptor for regular file `fh`, from the cache
    /// or opened now (read-write if possible).
    fn io_file(&self, fh: &FileHandle) -> FsResult<Arc<IoFile>> {
        let kh = self.codec.decode(fh)?;
        if let Some(f) = self.files.get(&fh.0) {
            return Ok(f);
        }
        creds::become_server()?;
        let root = self.root_fd.as_fd();
        // Check the type through an O_PATH descriptor first: opening a
        // device node for reading would act on the device. `object` reuses
        // the one an ACCESS, LOOKUP or GETATTR of the file left in `paths`
        // (a READ usually follows one), saving an open and a close.
        match self.object(fh)?.attr.ftype {
            FileType::Regular => {}
            FileType::Directory => return Err(FsError::IsDir),
            _ => return Err(FsError::Inval),
        }
        // O_NONBLOCK: a conflicting lease held by a local process makes the
        // open fail with EWOULDBLOCK (answered as "try later") instead of
        // blocking a worker for the lease-break time.
        let flags = libc::O_NOCTTY | libc::O_NONBLOCK;
        let (fd, write_errno) = match sys::open_by_handle_at(root, &kh, libc::O_RDWR | flags) {
            Ok(fd) => (fd, None),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EROFS | libc::ETXTBSY | libc::EACCES | libc::EPERM)
                ) =>
            {
                let fd = sys::open_by_handle_at(root, &kh, libc::O_RDONLY | flags).map_err(handle_err)?;
                (fd, e.raw_os_error())
            }
            Err(e) => return Err(handle_err(e)),
        };
        // Unstable data is synced before its descriptor closes, unless nothing is
        // promised (`async`) or the journal holds it.
        let sync_on_close = !self.unsafe_async && !self.journaled;
        let file = Arc::new(IoFile::new(fd, write_errno, sync_on_close, self.verifier.clone()));
        Ok(self.files.insert(&fh.0, file))
    }

    /// The open file `fh` for a change by `cred` (write permission checked).
    fn writable_file(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Arc<IoFile>> {
        let f = self.io_file(fh)?;
        let attr = self.io_attr(fh, &f)?;
        if !perm::allowed_io(cred, &attr, perm::W) {
            return Err(FsError::Access);
        }
        if let Some(e) = f.write_errno {
            return Err(FsError::from_errno(e));
        }
        Ok(f)
    }

    /// What READ checks before reading: the open file, its attributes, and
    /// how many bytes to read (what was asked, cut at the end of the file).
    fn read_start(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<(Arc<IoFile>, Attr, usize)> {
        let f = self.io_file(fh)?;
        let attr = self.io_attr(fh, &f)?;
        // Execute permission is enough to read, as with knfsd: a client must
        // read a program to run it.
        if !perm::allowed_io(cred, &attr, perm::R) && !perm::allowed_io(cred, &attr, perm::X) {
            return Err(FsError::Access);
        }
        // Size the buffer by what the file holds, not by what was asked.
        let want = (count as usize)
            .min(IO_MAX_BYTES)
            .min(attr.size.saturating_sub(offset).try_into().unwrap_or(usize::MAX));
        if let Some((at, len)) = f.prefetch_due(offset, want as u64, attr.size) {
            // A hint: if it fails, the READs still read.
            let _ = sys::will_need(f.fd.as_fd(), at, len);
        }
        Ok((f, attr, want))
    }

    /// Read `want` bytes of `f` at `offset` into a pooled buffer (fewer at
    /// the end of the file).
    fn read_buffer(&self, f: &IoFile, offset: u64, want: usize) -> FsResult<Bytes> {
        let mut buf = self.read_bufs.take(want);
        while buf.len() < want {
            let at = offset + buf.len() as u64;
            let left = want - buf.len();
            // SAFETY: pread_uninit initialises exactly the count it returns,
            // at most `left` bytes of the spare room it is given.
            let got =
                unsafe { buf.fill_with(|spare| sys::pread_uninit(f.fd.as_fd(), &mut spare[..left], at))? };
            if got == 0 {
                break;
            }
        }
        Ok(buf.into_bytes())
    }

    /// Attributes through a cached descriptor; a removed file leaves the cache.
    fn io_attr(&self, fh: &FileHandle, f: &IoFile) -> FsResult<Attr> {
        Self::live_attr(&f.fd).inspect_err(|e| {
            if *e == FsError::Stale {
                self.files.remove(&fh.0);
            }
        })
    }

    /// Apply `set` to `obj` (whose handle is `fh`) for `cred`. Order:
    /// size, owner, mode, times: chown clears setuid bits, so the mode comes
    /// after it; truncation sets mtime, so explicit times come last.
    fn apply_set(&self, cred: &Credentials, fh: &FileHandle, obj: &Obj, set: &SetAttr) -> FsResult<()> {
        if let Some(size) = set.size {
            match obj.attr.ftype {
                FileType::Regular => {}
                FileType::Directory => return Err(FsError::IsDir),
                _ => return Err(FsError::Inval),
            }
            if !perm::allowed_io(cred, &obj.attr, perm::W) {
                return Err(FsError::Access);
            }
            let f = self.io_file(fh)?;
            if let Some(e) = f.write_errno {
                return Err(FsError::from_errno(e));
            }
            // As the caller, so the kernel clears setuid/setgid as it
            // would for a local truncate.
            creds::become_caller(cred)?;
            sys::ftruncate(f.fd.as_fd(), size)?;
        }
        creds::become_caller(cred)?;
        if set.uid.is_some() || set.gid.is_some() {
            sys::chown_fd(obj.fd.as_fd(), set.uid, set.gid)?;
        }
        if let Some(mode) = set.mode {
            // Linux has no symlink modes; knfsd ignores them too.
            if obj.attr.ftype != FileType::Symlink {
                sys::chmod_fd(obj.fd.as_fd(), mode & 0o7777)?;
            }
        }
        if set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
            let times = [timespec(set.atime)?, timespec(set.mtime)?];
            let explicit =
                matches!(set.atime, SetTime::ClientTime(_)) || matches!(set.mtime, SetTime::ClientTime(_));
            if explicit || cred.uid == obj.attr.uid || cred.uid == 0 {
                // Client-supplied times need the owner: the kernel checks.
                sys::utimens_fd(obj.fd.as_fd(), &times)?;
            } else {
                // Setting a time to "now" needs only write permission (NFS
                // semantics, as knfsd). The kernel grants that only when
                // *both* times are set to now, so check here and act as
                // the server.
                if !perm::allowed(cred, &obj.attr, perm::W) {
                    return Err(FsError::Access);
                }
                creds::become_server()?;
                sys::utimens_fd(obj.fd.as_fd(), &times)?;
            }
        }
        Ok(())
    }

    /// Finish a create: give back the permission bits the process umask
    /// took from `requested`, apply `set` (whose mode must be `None` for a
    /// new object), and describe the result.
    ///
    /// The create itself runs with the umask at 0 (`sys::mkdirat`,
    /// `sys::mknodat`), so normally nothing is missing and no chmod runs: a
    /// chmod after the create would leave a window in which a power cut
    /// keeps the object with the wrong mode. It remains for threads that
    /// cannot have their own umask (unshare refused by a seccomp filter).
    ///
    /// The umask only ever clears rwx bits, so only those are restored; the
    /// special bits stay as the kernel made them (setgid inherited from a
    /// setgid directory, setgid dropped for a group the caller is not in).
    /// The restoring chmod runs as the server: as the caller, the kernel
    /// would drop an inherited setgid bit when the caller is not in the
    /// directory's group. It grants nothing the owner could not chmod.
    fn finish_create(
        &self,
        cred: &Credentials,
        dir: &Obj,
        child: Child,
        requested: Option<u32>,
        set: &SetAttr,
    ) -> FsResult<Created> {
        if let Some(req) = requested {
            let actual = child.obj.attr.mode;
            let want = (actual & !0o777) | (req & 0o777);
            if want != actual {
                creds::become_server()?;
                sys::chmod_fd(child.obj.fd.as_fd(), want)?;
            }
        }
        self.apply_set(cred, &child.handle, &child.obj, set)?;
        self.stable(&[(&dir.fd, FileType::Directory), (&child.obj.fd, child.obj.attr.ftype)])?;
        let attr = attr_from_stat(&sys::fstat(child.obj.fd.as_fd())?);
        // An object just made is used next (the GETATTR of the same
        // COMPOUND, then its WRITE or SETATTR): keep its descriptor, as a
        // LOOKUP does, instead of opening it again by handle.
        self.paths.insert(&child.handle.0, child.obj.fd.clone());
        Ok(Created { handle: child.handle, attr, dir_wcc: self.dir_wcc(dir) })
    }

    fn dir_wcc(&self, dir: &Obj) -> Wcc {
        Wcc {
            before: Some(WccAttr::from(&dir.attr)),
            after: sys::fstat(dir.fd.as_fd()).ok().map(|st| attr_from_stat(&st)),
        }
    }

    /// Build the READDIR entry for one `getdents64` record.
    fn dir_entry(
        &self,
        dfd: &OwnedFd,
        dir: &FileHandle,
        dattr: &Attr,
        at_root: bool,
        e: &sys::RawDirent<'_>,
        plus: bool,
    ) -> DirEntry {
        let dotdot_of_root = at_root && e.name == b"..";
        let mut entry = DirEntry {
            fileid: if dotdot_of_root { self.root_ino } else { e.ino },
            name: Bytes::copy_from_slice(e.name),
            cookie: e.off as u64,
            attr: None,
            handle: None,
        };
        if !plus {
            return entry;
        }
        if e.name == b"." || dotdot_of_root {
            entry.attr = Some(dattr.clone());
            entry.handle = Some(if dotdot_of_root { self.root_handle.clone() } else { dir.clone() });
            return entry;
        }
        let Ok(name) = CString::new(e.name) else { return entry };
        // The entry may have gone, or be a mount point (stat crosses it):
        // then it keeps only its name and fileid.
        let Ok(st) = sys::fstatat_nofollow(dfd.as_fd(), &name) else { return entry };
        let Ok((kh, mount_id)) = sys::name_to_handle_at(dfd.as_fd(), &name, 0) else { return entry };
        if st.st_dev != self.root_dev || mount_id != self.root_mount_id {
            return entry;
        }
        entry.attr = Some(attr_from_stat(&st));
        entry.handle = Some(self.codec.encode(&kh));
        entry
    }

    /// Return once the change just made to `objects` is on stable storage
    /// (nothing to do for an `async` export or behind the journal). A failed
    /// sync changes the write verifier: the file system may have lost
    /// unstable data too.
    fn stable(&self, objects: &[(&Arc<OwnedFd>, FileType)]) -> FsResult<()> {
        match self.meta.strategy() {
            Strategy::Off => return Ok(()),
            // Reopening an object to sync it is the server's business, not the caller's.
            Strategy::EachObject => creds::become_server()?,
            Strategy::OneCommit => {}
        }
        self.meta.durable(&self.root_fd, objects).map_err(|e| {
            tracing::error!("syncing a change of names or attributes failed: {e}");
            self.verifier.regenerate();
            FsError::from(e)
        })
    }

    /// Sync after a write or COMMIT as `how` asks; a failure changes the
    /// write verifier, because unstable data of this file may be lost.
    fn sync(&self, f: &IoFile, how: StableHow) -> FsResult<()> {
        if self.unsafe_async || how == StableHow::Unstable {
            return Ok(());
        }
        // FILE_SYNC always syncs (its metadata too); DATA_SYNC writes and
        // COMMITs sync only what is not covered yet, sharing one fdatasync
        // between concurrent callers.
        let r = match how {
            StableHow::FileSync => f.sync_with(true, |fd| sys::fsync(fd.as_fd())),
            _ => f.sync_with(false, |fd| sys::fdatasync(fd.as_fd())),
        };
        r.map_err(|e| {
            self.verifier.regenerate();
            FsError::from(e)
        })
    }
}

impl Backend for LocalBackend {
    fn root(&self) -> FileHandle {
        self.root_handle.clone()
    }

    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        self.codec.decode(fh)?;
        if let Some(f) = self.files.get(&fh.0) {
            return self.io_attr(fh, &f);
        }
        Ok(self.object(fh)?.attr)
    }

    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<Timestamp>,
    ) -> FsResult<Wcc> {
        let obj = self.object(fh)?;
        if guard.is_some_and(|g| g != obj.attr.ctime) {
            return Err(FsError::NotSync);
        }
        self.apply_set(cred, fh, &obj, set)?;
        self.stable(&[(&obj.fd, obj.attr.ftype)])?;
        let after = attr_from_stat(&sys::fstat(obj.fd.as_fd())?);
        Ok(Wcc { before: Some(WccAttr::from(&obj.attr)), after: Some(after) })
    }

    fn lookup(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Lookup> {
        let cname = component(name)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        // Opened as the caller: the kernel checks search permission on `dir`
        // (for `..` of the root too, though its result is not used).
        let fd = sys::openat(d.fd.as_fd(), &cname, libc::O_PATH | libc::O_NOFOLLOW)?;
        let child = if name == b".." && self.is_root(&d.attr) {
            let attr = attr_from_stat(&sys::fstat(d.fd.as_fd())?);
            Child { handle: self.root_handle.clone(), obj: Obj { fd: d.fd.clone(), attr } }
        } else {
            let child = self.child_from_fd(fd)?;
            // A name just looked up is usually used next (GETATTR, ACCESS,
            // READ): keep its descriptor.
            self.paths.insert(&child.handle.0, child.obj.fd.clone());
            child
        };
        // A lookup changes nothing in the directory: its attributes from
        // just before are its attributes after.
        Ok(Lookup { handle: child.handle, attr: child.obj.attr, dir_attr: Some(d.attr) })
    }

    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)> {
        let attr = self.getattr(fh)?;
        let mut granted = perm::access_bits(cred, &attr, want);
        if self.read_only {
            granted &= !(access::MODIFY | access::EXTEND | access::DELETE);
        }
        Ok((granted, attr))
    }

    fn readlink(&self, _cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        // Reading a link needs no permission on the link itself; reaching it
        // (LOOKUP) already needed search permission on its directory.
        let obj = self.object(fh)?;
        if obj.attr.ftype != FileType::Symlink {
            return Err(FsError::Inval);
        }
        // One byte more than a target may have, so a longer one shows.
        let mut buf = vec![0u8; SYMLINK_TARGET_BYTES_MAX + 1];
        let n = sys::readlink_fd(obj.fd.as_fd(), &mut buf)?;
        if n > SYMLINK_TARGET_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        buf.truncate(n);
        Ok((Bytes::from(buf), obj.attr))
    }

    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult> {
        let (f, attr, want) = self.read_start(cred, fh, offset, count)?;
        let data = self.read_buffer(&f, offset, want)?;
        let eof = offset.saturating_add(data.len() as u64) >= attr.size;
        Ok(ReadResult { data, eof, attr: Some(attr) })
    }

    fn read_spliced(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<SplicedRead> {
        let (f, attr, want) = self.read_start(cred, fh, offset, count)?;
        // An unaligned range may touch a page more than a pipe holds.
        let spliced = match &self.pipes {
            Some(pipes) if pipes.fits(offset, want) => match pipes.splice_from(f.fd.as_fd(), offset, want) {
                Ok(d) => Some(d),
                // Out of descriptors or pipe memory, or a file system
                // without splice support: copying still works.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EINVAL | libc::ENOSYS)
                    ) =>
                {
                    None
                }
                Err(e) => return Err(e.into()),
            },
            _ => None,
        };
        let data = match spliced {
            Some(d) => ReadData::Spliced(d),
            None => ReadData::Buffer(self.read_buffer(&f, offset, want)?),
        };
        let n = match &data {
            ReadData::Spliced(d) => d.len(),
            ReadData::Buffer(b) => b.len(),
        };
        let eof = offset.saturating_add(n as u64) >= attr.size;
        Ok(SplicedRead { data, eof, attr: Some(attr) })
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
        stable: StableHow,
        ordered: &mut dyn FnMut(),
    ) -> FsResult<WriteResult> {
        let f = self.io_file(fh)?;
        let before = self.io_attr(fh, &f)?;
        if !perm::allowed_io(cred, &before, perm::W) {
            return Err(FsError::Access);
        }
        if let Some(e) = f.write_errno {
            return Err(FsError::from_errno(e));
        }
        let data = &data[..data.len().min(IO_MAX_BYTES)];
        if !matches!(offset.checked_add(data.len() as u64), Some(end) if end <= i64::MAX as u64) {
            return Err(FsError::FBig);
        }
        // As the caller, so the kernel clears setuid/setgid bits on write
        // as it does for a local writer.
        creds::become_caller(cred)?;
        let mut n = 0;
        while n < data.len() {
            match sys::pwrite(f.fd.as_fd(), &data[n..], offset + n as u64) {
                Ok(0) => break,
                Ok(got) => n += got,
                Err(e) if n > 0 && e.raw_os_error() != Some(libc::EIO) => break,
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EIO) {
                        self.verifier.regenerate();
                    }
                    return Err(e.into());
                }
            }
        }
        if n == 0 && !data.is_empty() {
            return Err(FsError::Io);
        }
        // Every write counts as unsynced until a sync covers it (for a
        // DATA_SYNC write, the sync just below).
        f.mark_dirty();
        // The data is in the file: the file's next write may go in while
        // this one waits for its sync (and may share it).
        ordered();
        if stable == StableHow::Unstable {
            if let Some((at, len)) = f.eager_writeback_due(offset, n) {
                // Best effort: a failure here shows again at the COMMIT's sync.
                let _ = sys::start_writeback(f.fd.as_fd(), at, len);
            }
        }
        self.sync(&f, stable)?;
        let after = sys::fstat(f.fd.as_fd()).ok().map(|st| attr_from_stat(&st));
        Ok(WriteResult {
            count: n as u32,
            committed: stable,
            verifier: self.verifier.get(),
            wcc: Wcc { before: Some(WccAttr::from(&before)), after },
        })
    }

    fn create(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        how: &CreateMode,
    ) -> FsResult<Created> {
        let cname = new_name(name)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        match how {
            CreateMode::Unchecked(set) | CreateMode::Guarded(set) => {
                let mode = set.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
                // mknod makes a regular file without opening it, so an
                // existing file needs no read or write permission to be
                // "created" again by UNCHECKED.
                let created = match sys::mknodat(d.fd.as_fd(), &cname, libc::S_IFREG | mode, 0) {
                    Ok(()) => true,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EEXIST)
                            && matches!(how, CreateMode::Unchecked(_)) =>
                    {
                        false
                    }
                    Err(e) => return Err(e.into()),
                };
                let child = self.open_child(&d, &cname)?;
                if created {
                    let set = SetAttr { mode: None, ..set.clone() };
                    self.finish_create(cred, &d, child, Some(mode), &set)
                } else {
                    if child.obj.attr.ftype != FileType::Regular {
                        return Err(FsError::Exist);
                    }
                    // An existing file: only the size applies (truncation), as knfsd
                    // does; its mode and owner stay what they are.
                    let set = SetAttr { size: set.size, ..SetAttr::default() };
                    self.finish_create(cred, &d, child, None, &set)
                }
            }
            CreateMode::Exclusive(verf) => {
                let (atime, mtime) = exclusive_times(verf);
                match sys::mknodat(d.fd.as_fd(), &cname, libc::S_IFREG | DEFAULT_FILE_MODE, 0) {
                    Ok(()) => {
                        let child = self.open_child(&d, &cname)?;
                        let set = SetAttr {
                            atime: SetTime::ClientTime(atime),
                            mtime: SetTime::ClientTime(mtime),
                            ..SetAttr::default()
                        };
                        self.finish_create(cred, &d, child, Some(DEFAULT_FILE_MODE), &set)
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                        // A retransmission finds the file it made.
                        let child = self.open_child(&d, &cname)?;
                        let a = &child.obj.attr;
                        if a.ftype != FileType::Regular || a.atime != atime || a.mtime != mtime {
                            return Err(FsError::Exist);
                        }
                        self.finish_create(cred, &d, child, None, &SetAttr::default())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        let cname = new_name(name)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        let mode = set.mode.unwrap_or(DEFAULT_DIR_MODE) & 0o7777;
        sys::mkdirat(d.fd.as_fd(), &cname, mode)?;
        let child = self.open_child(&d, &cname)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, child, Some(mode), &set)
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        let cname = new_name(name)?;
        if target.len() > SYMLINK_TARGET_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        let ctarget = CString::new(target).map_err(|_| FsError::Inval)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        sys::symlinkat(&ctarget, d.fd.as_fd(), &cname)?;
        let child = self.open_child(&d, &cname)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, child, None, &set)
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let cname = new_name(name)?;
        let d = self.dir_object(dir)?;
        let mode = set.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
        let (ftype, dev) = match kind {
            NodeKind::CharDevice { major, minor } => (libc::S_IFCHR, libc::makedev(major, minor)),
            NodeKind::BlockDevice { major, minor } => (libc::S_IFBLK, libc::makedev(major, minor)),
            NodeKind::Socket => (libc::S_IFSOCK, 0),
            NodeKind::Fifo => (libc::S_IFIFO, 0),
        };
        // As the caller: device nodes then need a caller of uid 0, because a
        // non-zero fsuid drops CAP_MKNOD.
        creds::become_caller(cred)?;
        sys::mknodat(d.fd.as_fd(), &cname, ftype | mode, dev)?;
        let child = self.open_child(&d, &cname)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, child, Some(mode), &set)
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        let cname = old_name(name)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        let victim = self.handle_of(&d, &cname);
        sys::unlinkat(d.fd.as_fd(), &cname, 0)?;
        if let Some(v) = victim {
            self.forget(&v);
        }
        self.stable(&[(&d.fd, FileType::Directory)])?;
        Ok(self.dir_wcc(&d))
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        let cname = old_name(name)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        sys::unlinkat(d.fd.as_fd(), &cname, libc::AT_REMOVEDIR)?;
        self.stable(&[(&d.fd, FileType::Directory)])?;
        Ok(self.dir_wcc(&d))
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        let from_c = old_name(from_name)?;
        let to_c = old_name(to_name)?;
        let fd = self.dir_object(from_dir)?;
        let td = self.dir_object(to_dir)?;
        creds::become_caller(cred)?;
        let victim = self.handle_of(&td, &to_c);
        sys::renameat(fd.fd.as_fd(), &from_c, td.fd.as_fd(), &to_c)?;
        if let Some(v) = victim {
            self.forget(&v);
        }
        // A directory moved to another parent has a new `..`: where each
        // object is synced on its own, it is one of the objects to sync.
        let moved = match self.meta.strategy() {
            Strategy::EachObject if from_dir != to_dir => {
                sys::openat(td.fd.as_fd(), &to_c, libc::O_PATH | libc::O_NOFOLLOW)
                    .ok()
                    .filter(|m| {
                        sys::fstat(m.as_fd()).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
                    })
                    .map(Arc::new)
            }
            _ => None,
        };
        let mut touched = vec![(&fd.fd, FileType::Directory), (&td.fd, FileType::Directory)];
        if let Some(m) = &moved {
            touched.push((m, FileType::Directory));
        }
        self.stable(&touched)?;
        Ok((self.dir_wcc(&fd), self.dir_wcc(&td)))
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        let cname = new_name(name)?;
        let obj = self.object(fh)?;
        let d = self.dir_object(dir)?;
        creds::become_caller(cred)?;
        sys::linkat_fd(obj.fd.as_fd(), d.fd.as_fd(), &cname)?;
        self.stable(&[(&d.fd, FileType::Directory), (&obj.fd, obj.attr.ftype)])?;
        let attr = sys::fstat(obj.fd.as_fd()).ok().map(|st| attr_from_stat(&st));
        Ok((attr, self.dir_wcc(&d)))
    }

    /// Cookies are the kernel's own directory positions (`d_off` from
    /// `getdents64`, resumed with `lseek`): hash values on ext4 and stable
    /// per-entry offsets on tmpfs (Linux ≥ 6.6). Neither moves when other
    /// entries come or go, and both stay valid across a server restart, so
    /// no change to the directory can invalidate a cookie and there is
    /// nothing for a per-directory verifier to detect. The verifier is a
    /// constant derived from the export's key and root: it still tells a
    /// cookie from another export apart, and survives a restart as the
    /// cookies do. (On tmpfs before Linux 6.6 offsets are ordinals, and a
    /// concurrent removal can make a listing skip an entry; no verifier
    /// scheme short of failing every listing that races a change fixes that.)
    fn readdir(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        if cookie != 0 && cookieverf != self.cookieverf {
            return Err(FsError::BadCookie);
        }
        // A symlink's handle opened with O_DIRECTORY fails with ELOOP.
        let dfd = self.open_handle(dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(|e| match e {
            FsError::Inval => FsError::NotDir,
            e => e,
        })?;
        let dattr = Self::live_attr(&dfd)?;
        // Checked in user space: the descriptor was opened by the server.
        if !perm::allowed(cred, &dattr, perm::R) {
            return Err(FsError::Access);
        }
        // Attributes and handles of entries amount to a LOOKUP of each, which
        // needs search permission; without it READDIRPLUS gives names only.
        let plus = plus && perm::allowed(cred, &dattr, perm::X);
        let at_root = self.is_root(&dattr);
        if cookie != 0 {
            let pos = i64::try_from(cookie).map_err(|_| FsError::BadCookie)?;
            sys::lseek_set(dfd.as_fd(), pos).map_err(|_| FsError::BadCookie)?;
        }
        let info = |eof| DirInfo { eof, cookieverf: self.cookieverf, dir_attr: Some(dattr.clone()) };
        let mut buf = vec![0u8; DIRENT_BUF_BYTES];
        loop {
            let n = sys::getdents64(dfd.as_fd(), &mut buf)?;
            if n == 0 {
                return Ok(info(true));
            }
            for e in sys::dirents(&buf[..n]) {
                let entry = self.dir_entry(&dfd, dir, &dattr, at_root, &e, plus);
                if !sink(&entry) {
                    return Ok(info(false));
                }
            }
        }
    }

    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        // Every handle is on the root's file system; the lookup only checks
        // that `fh` is still valid.
        self.getattr(fh)?;
        let sv = sys::fstatvfs(self.root_fd.as_fd())?;
        let unit = sv.f_frsize as u64;
        Ok(FsStat {
            total_bytes: (sv.f_blocks as u64).saturating_mul(unit),
            free_bytes: (sv.f_bfree as u64).saturating_mul(unit),
            avail_bytes: (sv.f_bavail as u64).saturating_mul(unit),
            total_files: sv.f_files as u64,
            free_files: sv.f_ffree as u64,
            avail_files: sv.f_favail as u64,
        })
    }

    fn properties(&self) -> FsProperties {
        self.props.clone()
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
        let f = self.io_file(fh)?;
        let before = self.io_attr(fh, &f)?;
        // As knfsd: a sync costs the disk, so only a writer may ask for one
        // (the owner always may, so a COMMIT after chmod a-w still works).
        if !perm::allowed_io(cred, &before, perm::W) {
            return Err(FsError::Access);
        }
        self.sync(&f, StableHow::DataSync)?;
        let after = sys::fstat(f.fd.as_fd()).ok().map(|st| attr_from_stat(&st));
        Ok((Wcc { before: Some(WccAttr::from(&before)), after }, self.verifier.get()))
    }

    fn write_verifier(&self) -> Verifier {
        self.verifier.get()
    }

    fn allocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let f = self.writable_file(cred, fh)?;
        creds::become_caller(cred)?;
        sys::fallocate(f.fd.as_fd(), 0, offset, len)?;
        f.mark_dirty();
        Ok(())
    }

    fn deallocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let f = self.writable_file(cred, fh)?;
        creds::become_caller(cred)?;
        sys::fallocate(f.fd.as_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len)?;
        f.mark_dirty();
        Ok(())
    }

    fn seek(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        what: SeekWhat,
    ) -> FsResult<(bool, u64)> {
        let (f, attr, _) = self.read_start(cred, fh, offset, 0)?;
        if offset >= attr.size {
            return Err(FsError::Nxio);
        }
        let whence = match what {
            SeekWhat::Data => libc::SEEK_DATA,
            SeekWhat::Hole => libc::SEEK_HOLE,
        };
        match sys::lseek(f.fd.as_fd(), offset, whence) {
            Ok(at) => Ok((at >= attr.size, at)),
            // No data after the offset: the end of the file is all there is.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok((true, attr.size)),
            Err(e) => Err(e.into()),
        }
    }

    fn copy_range(
        &self,
        cred: &Credentials,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        let (s, sattr, _) = self.read_start(cred, src, src_offset, 0)?;
        let d = self.writable_file(cred, dst)?;
        let want = if len == 0 { sattr.size.saturating_sub(src_offset) } else { len };
        creds::become_caller(cred)?;
        let (mut so, mut doff, mut done) = (src_offset, dst_offset, 0u64);
        while done < want {
            let chunk = (want - done).min(1 << 30) as usize;
            let n = sys::copy_file_range(s.fd.as_fd(), &mut so, d.fd.as_fd(), &mut doff, chunk)?;
            if n == 0 {
                break;
            }
            done += n as u64;
        }
        d.mark_dirty();
        Ok(done)
    }

    fn clone_range(
        &self,
        cred: &Credentials,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        let (s, _, _) = self.read_start(cred, src, src_offset, 0)?;
        let d = self.writable_file(cred, dst)?;
        creds::become_caller(cred)?;
        match sys::clone_range(s.fd.as_fd(), src_offset, d.fd.as_fd(), dst_offset, len) {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EXDEV)) => {
                Err(FsError::NotSupp)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn getxattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<Bytes> {
        let obj = self.object(fh)?;
        creds::become_caller(cred)?;
        sys::get_xattr(obj.fd.as_fd(), name, XATTR_VALUE_MAX).map(Bytes::from).map_err(xattr_err)
    }

    fn setxattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> FsResult<()> {
        if value.len() > XATTR_VALUE_MAX {
            return Err(FsError::FBig);
        }
        let obj = self.object(fh)?;
        let flags = match how {
            XattrSet::Either => 0,
            XattrSet::Create => libc::XATTR_CREATE,
            XattrSet::Replace => libc::XATTR_REPLACE,
        };
        creds::become_caller(cred)?;
        sys::set_xattr(obj.fd.as_fd(), name, value, flags).map_err(xattr_err)?;
        self.stable(&[(&obj.fd, obj.attr.ftype)])
    }

    fn listxattr(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Vec<Bytes>> {
        let obj = self.object(fh)?;
        creds::become_caller(cred)?;
        Ok(sys::list_xattr(obj.fd.as_fd()).map_err(xattr_err)?.into_iter().map(Bytes::from).collect())
    }

    fn removexattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<()> {
        let obj = self.object(fh)?;
        creds::become_caller(cred)?;
        sys::remove_xattr(obj.fd.as_fd(), name).map_err(xattr_err)?;
        self.stable(&[(&obj.fd, obj.attr.ftype)])
    }

    fn sync_all(&self) -> FsResult<()> {
        // Done even with `unsafe_async`: this is the graceful-shutdown flush.
        // syncfs covers every cached file, so none needs its own sync on close.
        // Writes completed before syncfs starts are covered by it.
        let files: Vec<_> = self.files.all().into_iter().map(|f| (f.written_so_far(), f)).collect();
        sys::syncfs(self.root_fd.as_fd()).map_err(|e| {
            self.verifier.regenerate();
            FsError::from(e)
        })?;
        for (written, f) in files {
            f.mark_synced(written);
        }
        Ok(())
    }
}
