//! The backend API (ganesha calls it an FSAL) and the backends behind it.
//!
//! The server speaks NFSv3 on the wire and calls a [`Backend`] for every
//! file-system operation. The trait is protocol-neutral: it knows file
//! handles, attributes and credentials, not XDR. Keeping it so lets a
//! backend be tested on its own, and lets a caching layer wrap any backend.
//!
//! # Layout
//! - this file: the trait and its value types ([`Attr`], [`SetAttr`],
//!   [`Credentials`], [`FsError`], …).
//! - [`perm`]: permission checks from mode bits, shared by backends that do
//!   not delegate them to the kernel.
//! - `local`: a directory on a local file system (handles from
//!   `name_to_handle_at`, operations done with the caller's fsuid/fsgid).
//! - `memory`: an in-memory file system (the papers' "memory server", to
//!   compare clients without disk noise).
//! - [`cephfs`]: a directory of a CephFS, through libcephfs (loaded at run
//!   time), with byte-range locks the whole cluster sees ([`FileLocks`]).
//!
//! # The file-handle invariant
//! For every handle `h` a backend returns, `getattr(h)` succeeds and names
//! the same object until it is removed, and then fails with
//! [`FsError::Stale`]. For any byte string the backend did not issue,
//! every method fails with [`FsError::BadHandle`] or [`FsError::Stale`] and
//! never touches an object outside the backend's tree. Handles of the local
//! backend stay valid across a server restart. Handles are at most
//! [`MAX_BACKEND_HANDLE`] bytes.
//!
//! # Credentials
//! Every method that reads or changes a file takes the caller's
//! [`Credentials`] (already mapped by the server's squash rules) and must
//! refuse what those credentials may not do, even when the server process
//! runs as root.

use bytes::Bytes;

pub mod bufpool;
pub mod cephfs;
mod dylib;
pub mod journal;
pub mod local;
pub mod memory;
pub mod perm;
pub mod rados;
pub mod spliced;
mod verifier;

/// The largest handle a backend may issue. NFSv3 allows 64 bytes; the server
/// prefixes 4 bytes of export identity.
pub const MAX_BACKEND_HANDLE: usize = 60;

/// The longest single path component a backend accepts.
pub const NAME_MAX: usize = 255;

/// The longest symlink target a backend stores or returns, in bytes: what
/// Linux's `symlink(2)` takes, `PATH_MAX` (4096) less the NUL that ends the
/// string. Longer ones are refused with [`FsError::NameTooLong`].
pub const SYMLINK_TARGET_BYTES_MAX: usize = 4095;

/// An opaque backend file handle (at most [`MAX_BACKEND_HANDLE`] bytes).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FileHandle(pub Bytes);

/// Who is asking. For AUTH_SYS these come from the RPC credential after the
/// export's squash rules; `groups` holds the supplementary groups (≤ 16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Credentials {
    /// The superuser (used by the server for its own housekeeping).
    pub fn root() -> Self {
        Credentials { uid: 0, gid: 0, groups: Vec::new() }
    }

    /// True if `gid` is the primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// A point in time: seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct Timestamp {
    pub secs: i64,
    pub nsecs: u32,
}

/// The type of a file-system object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    BlockDevice,
    CharDevice,
    Symlink,
    Socket,
    Fifo,
}

/// Attributes of an object (NFSv3 `fattr3`, protocol-neutral).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ftype: FileType,
    /// Permission bits including setuid/setgid/sticky (`0o7777` mask).
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes of storage used.
    pub used: u64,
    /// Device numbers for block/char devices (major, minor).
    pub rdev: (u32, u32),
    /// Identifies the file system (st_dev for the local backend).
    pub fsid: u64,
    /// Unique per object within `fsid` (the inode number).
    pub fileid: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
}

/// The pre-operation attributes of weak cache consistency (`wcc_attr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WccAttr {
    pub size: u64,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
}

impl From<&Attr> for WccAttr {
    fn from(a: &Attr) -> Self {
        WccAttr { size: a.size, mtime: a.mtime, ctime: a.ctime }
    }
}

/// Weak cache consistency data: attributes before and after a change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wcc {
    pub before: Option<WccAttr>,
    pub after: Option<Attr>,
}

/// How SETATTR (and create) sets a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SetTime {
    #[default]
    DontChange,
    /// The server's current time.
    ServerTime,
    /// A time supplied by the client.
    ClientTime(Timestamp),
}

/// Attributes to change (`sattr3`); `None` / `DontChange` leaves a field alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: SetTime,
    pub mtime: SetTime,
}

/// How durable a WRITE must be before it is answered (`stable_how`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StableHow {
    /// May be cached; the client will COMMIT.
    Unstable,
    /// Data (and the metadata needed to read it back) on stable storage.
    DataSync,
    /// Data and all metadata on stable storage.
    FileSync,
}

/// An 8-byte verifier (write verifier, exclusive-create verifier, cookie verifier).
pub type Verifier = [u8; 8];

/// How to CREATE a regular file (`createhow3`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateMode {
    /// Create, or truncate/update an existing file.
    Unchecked(SetAttr),
    /// Fail with `Exist` if the name exists.
    Guarded(SetAttr),
    /// Exactly-once create: the verifier is stored with the file so that a
    /// retransmitted CREATE with the same verifier succeeds, and one with a
    /// different verifier fails with `Exist` (RFC 1813 §3.3.8).
    Exclusive(Verifier),
}

/// The kind of special file MKNOD makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    CharDevice { major: u32, minor: u32 },
    BlockDevice { major: u32, minor: u32 },
    Socket,
    Fifo,
}

/// A newly made object and its parent directory's change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    pub handle: FileHandle,
    pub attr: Attr,
    pub dir_wcc: Wcc,
}

/// Result of LOOKUP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    pub handle: FileHandle,
    pub attr: Attr,
    pub dir_attr: Option<Attr>,
}

/// Result of READ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult {
    pub data: Bytes,
    pub eof: bool,
    pub attr: Option<Attr>,
}

/// Where a READ's data is ([`Backend::read_spliced`]).
#[derive(Debug)]
pub enum ReadData {
    /// In a buffer, as [`Backend::read`] returns it.
    Buffer(Bytes),
    /// In a pipe, to be spliced into a socket.
    Spliced(spliced::Spliced),
}

/// Result of [`Backend::read_spliced`].
#[derive(Debug)]
pub struct SplicedRead {
    pub data: ReadData,
    pub eof: bool,
    pub attr: Option<Attr>,
}

/// Result of WRITE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteResult {
    pub count: u32,
    /// How durable the data actually is (may exceed what was asked).
    pub committed: StableHow,
    pub verifier: Verifier,
    pub wcc: Wcc,
}

/// One directory entry offered to a READDIR sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub fileid: u64,
    pub name: Bytes,
    /// Opaque position *after* this entry: passing it back resumes at the next one.
    pub cookie: u64,
    /// Filled for READDIRPLUS (`plus == true`), when available.
    pub attr: Option<Attr>,
    pub handle: Option<FileHandle>,
}

/// What READDIR returns besides the entries it gave the sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirInfo {
    /// True if the sink saw the last entry.
    pub eof: bool,
    pub cookieverf: Verifier,
    pub dir_attr: Option<Attr>,
}

/// File-system usage (`FSSTAT3resok`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FsStat {
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub avail_bytes: u64,
    pub total_files: u64,
    pub free_files: u64,
    pub avail_files: u64,
}

/// Static properties of a backend (feeds FSINFO and PATHCONF).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsProperties {
    pub max_file_size: u64,
    /// Smallest time difference the backend can store.
    pub time_delta: Timestamp,
    pub supports_hard_links: bool,
    pub supports_symlinks: bool,
    pub link_max: u32,
    pub name_max: u32,
    pub case_insensitive: bool,
    pub case_preserving: bool,
    /// `Attr::used` counts only bytes stored, so a hole uses no space. False
    /// for a file system that cannot tell (CephFS reports the size as used).
    pub holes_reported: bool,
}

/// What [`Backend::seek`] looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekWhat {
    /// The next byte of data at or after the offset.
    Data,
    /// The next hole at or after the offset (the end of the file is one).
    Hole,
}

/// How [`Backend::setxattr`] treats an attribute that exists (or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrSet {
    /// Create or replace.
    Either,
    /// Fail with [`FsError::Exist`] if it exists.
    Create,
    /// Fail with [`FsError::NoEnt`] if it does not.
    Replace,
}

/// The longest extended attribute value a backend stores (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_VALUE_MAX: usize = 64 * 1024;

/// An error from a backend. Each maps to one `nfsstat3` (same names as RFC 1813 §2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("not owner")]
    Perm,
    #[error("no such file or directory")]
    NoEnt,
    #[error("I/O error")]
    Io,
    #[error("no such device or address")]
    Nxio,
    #[error("permission denied")]
    Access,
    #[error("file exists")]
    Exist,
    #[error("cross-device link")]
    XDev,
    #[error("no such device")]
    NoDev,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("invalid argument")]
    Inval,
    #[error("file too large")]
    FBig,
    #[error("no space left on device")]
    NoSpc,
    #[error("read-only file system")]
    RoFs,
    #[error("too many links")]
    MLink,
    #[error("name too long")]
    NameTooLong,
    #[error("directory not empty")]
    NotEmpty,
    #[error("quota exceeded")]
    DQuot,
    #[error("stale file handle")]
    Stale,
    #[error("illegal file handle")]
    BadHandle,
    #[error("setattr guard mismatch")]
    NotSync,
    #[error("readdir cookie is stale")]
    BadCookie,
    #[error("operation not supported")]
    NotSupp,
    #[error("buffer too small")]
    TooSmall,
    #[error("server fault")]
    ServerFault,
    #[error("bad type for operation")]
    BadType,
    #[error("try again later")]
    Jukebox,
}

impl FsError {
    /// Map an `errno` from a system call. A shortage that passes (memory,
    /// descriptors, a call interrupted or timed out) asks the client to try
    /// again, as knfsd answers ENOMEM; an errno with no NFS meaning is an I/O
    /// error, logged with its name so the answer can be traced.
    pub fn from_errno(e: i32) -> FsError {
        match e {
            libc::EPERM => FsError::Perm,
            libc::ENOENT => FsError::NoEnt,
            libc::ENXIO => FsError::Nxio,
            libc::EACCES => FsError::Access,
            libc::EEXIST => FsError::Exist,
            libc::EXDEV => FsError::XDev,
            libc::ENODEV => FsError::NoDev,
            libc::ENOTDIR => FsError::NotDir,
            libc::EISDIR => FsError::IsDir,
            libc::EINVAL => FsError::Inval,
            libc::EFBIG => FsError::FBig,
            libc::ENOSPC => FsError::NoSpc,
            libc::EROFS => FsError::RoFs,
            libc::EMLINK => FsError::MLink,
            libc::ENAMETOOLONG => FsError::NameTooLong,
            libc::ENOTEMPTY => FsError::NotEmpty,
            libc::EDQUOT => FsError::DQuot,
            libc::ESTALE => FsError::Stale,
            libc::EOPNOTSUPP => FsError::NotSupp,
            libc::ELOOP => FsError::Inval,
            libc::EAGAIN | libc::ENOMEM | libc::EMFILE | libc::ENFILE | libc::EINTR | libc::ETIMEDOUT => {
                FsError::Jukebox
            }
            libc::EIO => FsError::Io,
            _ => {
                tracing::warn!("{} answered as an I/O error", std::io::Error::from_raw_os_error(e));
                FsError::Io
            }
        }
    }
}

impl From<std::io::Error> for FsError {
    fn from(e: std::io::Error) -> Self {
        e.raw_os_error().map(FsError::from_errno).unwrap_or(FsError::Io)
    }
}

/// Result of a backend call.
pub type FsResult<T> = Result<T, FsError>;

/// Access bits for [`Backend::access`] (same values as NFSv3 ACCESS3_*).
pub mod access {
    pub const READ: u32 = 0x0001;
    pub const LOOKUP: u32 = 0x0002;
    pub const MODIFY: u32 = 0x0004;
    pub const EXTEND: u32 = 0x0008;
    pub const DELETE: u32 = 0x0010;
    pub const EXECUTE: u32 = 0x0020;
    pub const ALL: u32 = 0x003f;
}

/// A byte range of a lock: `[start, end)`, `end == u64::MAX` reaching the
/// end of the file however it grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockRange {
    pub start: u64,
    pub end: u64,
}

/// A lock that stands in the way of one asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockConflict {
    pub exclusive: bool,
    pub range: LockRange,
    /// The holder's process id as its file system reports it (0 if unknown).
    pub pid: i32,
}

/// Byte-range locks enforced by the file system behind a backend, so they
/// exclude its other clients as well (a cluster file system: another NFS
/// head, a FUSE or kernel mount). The server's lock manager keeps its own
/// table (owners, waiters, grace period, callbacks) and mirrors every lock
/// it grants here: a lock is granted only if the file system grants it too,
/// and released here when released there.
///
/// Owners are 64-bit ids the lock manager derives from its protocol's
/// owner (NLM: host, owner handle, svid; NFSv4 will use client id and lock
/// owner): locks of one owner never conflict with each other. None of the
/// calls waits for a conflicting lock: a blocked request is retried by the
/// lock manager.
pub trait FileLocks: Send + Sync {
    /// Take the lock unless another owner's lock conflicts: `Ok(None)` when
    /// taken (replacing what `owner` held on the range, POSIX-style),
    /// `Ok(Some(conflict))` when refused (the conflict may be only the range
    /// asked for: a backend need not find out who holds it; [`FileLocks::test_lock`] does).
    fn try_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>>;

    /// The lock that would refuse this one, if any; takes nothing.
    fn test_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>>;

    /// Release `owner`'s locks on the range.
    fn unlock(&self, fh: &FileHandle, owner: u64, range: LockRange) -> FsResult<()>;

    /// The lock manager holds no lock on the file any more: the backend may
    /// let go of what it kept for them (an open file).
    fn forget_file(&self, fh: &FileHandle);
}

/// A file system the server can export.
///
/// Methods are synchronous and may block (disk I/O); the server calls them
/// from a blocking worker pool, many at once, so implementations must be
/// safe to call concurrently and must not hold a global lock across I/O.
///
/// Names passed in are single path components: the server has already
/// refused empty names and names containing `/` or NUL; `.` and `..` reach
/// only [`Backend::lookup`], where `..` of the root is the root itself.
pub trait Backend: Send + Sync + 'static {
    /// The handle of the export's root directory.
    fn root(&self) -> FileHandle;

    /// Attributes of an object. Needs no credentials (NFS GETATTR does not check).
    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr>;

    /// Change attributes. If `guard` is set, fail with `NotSync` unless the
    /// object's ctime equals it (RFC 1813 §3.3.2). Only the owner (or root)
    /// may change mode/times-to-client-values; only root may change the owner.
    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<Timestamp>,
    ) -> FsResult<Wcc>;

    /// Find `name` in directory `dir` (needs search permission on `dir`).
    fn lookup(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Lookup>;

    /// Which of the [`access`] bits in `want` the caller has. Returns the
    /// granted subset and the object's attributes.
    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)>;

    /// The target of a symbolic link.
    fn readlink(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)>;

    /// Read up to `count` bytes at `offset`.
    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult>;

    /// As [`read`](Self::read), for a caller that can send a pipe: the
    /// backend may leave the data in one, to be spliced into the socket
    /// instead of copied through a buffer (see [`spliced`]), and otherwise
    /// answers with a buffer. Same checks and answers as `read`. The default
    /// is `read` (a backend whose files do not hold all the data, such as
    /// the journal's, must keep it).
    fn read_spliced(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<SplicedRead> {
        let r = self.read(cred, fh, offset, count)?;
        Ok(SplicedRead { data: ReadData::Buffer(r.data), eof: r.eof, attr: r.attr })
    }

    /// Write `data` at `offset` with at least the durability `stable` asks for.
    fn write(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: StableHow,
    ) -> FsResult<WriteResult>;

    /// As [`Backend::write`], calling `ordered` once the write's place among
    /// the file's writes is fixed (its data is in the file, or in the journal),
    /// before waiting for durability: the caller may then let the file's next
    /// write in, so that writes waiting for a sync share it. The default calls
    /// `ordered` when `write` returns.
    fn write_then(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        data: &[u8],
        stable: StableHow,
        ordered: &mut dyn FnMut(),
    ) -> FsResult<WriteResult> {
        let r = self.write(cred, fh, offset, data, stable);
        ordered();
        r
    }

    /// Create a regular file.
    fn create(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        how: &CreateMode,
    ) -> FsResult<Created>;

    /// Create a directory.
    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created>;

    /// Create a symbolic link holding `target` (stored as given, never followed by the server).
    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created>;

    /// Create a special file.
    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created>;

    /// Remove a non-directory.
    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc>;

    /// Remove an empty directory.
    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc>;

    /// Rename; returns the wcc of the source and target directories.
    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)>;

    /// Make a hard link to `fh` named `name` in `dir`; returns the file's new attributes and the dir wcc.
    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)>;

    /// List `dir` starting after `cookie` (0 = from the start), offering
    /// entries to `sink` in order until it returns `false` (full) or the
    /// directory ends. An entry the sink refused is not consumed: the next
    /// call with the last accepted entry's cookie returns it again. `.` and
    /// `..` are included. A non-zero `cookie` with a `cookieverf` that no
    /// longer matches fails with `BadCookie`. With `plus`, entries carry
    /// attributes and handles.
    fn readdir(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo>;

    /// Usage of the file system holding `fh`.
    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat>;

    /// Static properties (for FSINFO and PATHCONF).
    fn properties(&self) -> FsProperties;

    /// Make data written UNSTABLE in the range durable (`count == 0`: to end of file).
    /// Returns the file's wcc and the write verifier.
    fn commit(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<(Wcc, Verifier)>;

    /// The current write verifier: differs for every backend instance and
    /// changes after any failure to write back unstable data.
    fn write_verifier(&self) -> Verifier;

    /// Flush everything to stable storage (graceful shutdown).
    fn sync_all(&self) -> FsResult<()>;

    /// The intent journal's counters, for a backend behind one.
    fn journal_stats(&self) -> Option<journal::JournalStats> {
        None
    }

    /// Byte-range locks the file system itself enforces ([`FileLocks`]);
    /// `None`: locks are only between this server's clients.
    fn file_locks(&self) -> Option<&dyn FileLocks> {
        None
    }

    /// Whether calls wait on other machines (a cluster) rather than on
    /// local storage: the server then runs the calls that always do on its
    /// threads for blocking calls.
    fn remote(&self) -> bool {
        false
    }

    // ---- NFSv4.2 operations. Each defaults to `NotSupp`: a backend offers
    // what its storage can do (the server then answers NFS4ERR_NOTSUPP).

    /// Make sure `len` bytes at `offset` of regular file `fh` are allocated,
    /// growing the file if they reach past its end (ALLOCATE).
    fn allocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let _ = (cred, fh, offset, len);
        Err(FsError::NotSupp)
    }

    /// Make `len` bytes at `offset` a hole (reading as zeros, using no
    /// space), keeping the file's size (DEALLOCATE).
    fn deallocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let _ = (cred, fh, offset, len);
        Err(FsError::NotSupp)
    }

    /// Where the next data (or hole) at or after `offset` starts, and
    /// whether that is the end of the file (SEEK). `offset` at or past the
    /// end is [`FsError::Nxio`].
    fn seek(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        what: SeekWhat,
    ) -> FsResult<(bool, u64)> {
        let _ = (cred, fh, offset, what);
        Err(FsError::NotSupp)
    }

    /// Copy `len` bytes (0: to the end of the source) from `src` at
    /// `src_offset` to `dst` at `dst_offset` inside the backend (COPY);
    /// returns how many were copied. Unstable, like an UNSTABLE WRITE: COMMIT
    /// makes them durable.
    fn copy_range(
        &self,
        cred: &Credentials,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        let _ = (cred, src, src_offset, dst, dst_offset, len);
        Err(FsError::NotSupp)
    }

    /// Share `len` bytes (0: to the end of the source) of `src` with `dst`,
    /// copy-on-write, where the file system can (CLONE).
    fn clone_range(
        &self,
        cred: &Credentials,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        let _ = (cred, src, src_offset, dst, dst_offset, len);
        Err(FsError::NotSupp)
    }

    /// The user extended attribute `name` (without a namespace prefix;
    /// missing is [`FsError::NoEnt`]). RFC 8276 GETXATTR.
    fn getxattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<Bytes> {
        let _ = (cred, fh, name);
        Err(FsError::NotSupp)
    }

    /// Set user extended attribute `name` (a value over
    /// [`XATTR_VALUE_MAX`] is [`FsError::FBig`]).
    fn setxattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> FsResult<()> {
        let _ = (cred, fh, name, value, how);
        Err(FsError::NotSupp)
    }

    /// The names of the user extended attributes of `fh`.
    fn listxattr(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Vec<Bytes>> {
        let _ = (cred, fh);
        Err(FsError::NotSupp)
    }

    /// Remove user extended attribute `name` (missing is [`FsError::NoEnt`]).
    fn removexattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<()> {
        let _ = (cred, fh, name);
        Err(FsError::NotSupp)
    }
}

#[cfg(test)]
mod tests {
    use super::FsError;

    #[test]
    fn a_shortage_that_passes_asks_the_client_to_retry_and_a_failing_disk_does_not() {
        for e in [libc::ENOMEM, libc::EMFILE, libc::ENFILE, libc::EINTR, libc::ETIMEDOUT, libc::EAGAIN] {
            assert_eq!(FsError::from_errno(e), FsError::Jukebox, "errno {e}");
        }
        for e in [libc::EIO, libc::EUCLEAN, libc::EBADMSG] {
            assert_eq!(FsError::from_errno(e), FsError::Io, "errno {e}");
        }
        assert_eq!(FsError::from(std::io::Error::from_raw_os_error(libc::ESTALE)), FsError::Stale);
    }
}
