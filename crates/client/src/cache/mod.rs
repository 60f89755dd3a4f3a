//! The caching file layer: what the FUSE mount and the tools call.
//!
//! [`CachedFs`] wraps any [`NfsOps`](crate::ops::NfsOps) client and offers
//! an inode-based API shaped like FUSE's low-level one: `lookup`/`forget`
//! manage inode numbers, `open` returns a file handle id used by `read`,
//! `write`, `flush`, `fsync` and `release`, `opendir` a directory handle for
//! `readdir`. Every call carries the caller's [`Cred`](crate::ops::Cred).
//! Errors are [`FsError`]; [`FsError::errno`] gives what to return to the
//! kernel (ESTALE, EACCES, ENOSPC, EDQUOT, EROFS… as the server said).
//!
//! # What it caches, and the papers behind it
//! - **Attributes** (Sun's white paper; Linux's adaptive timeouts): trusted
//!   for `acregmin`..`acregmax` (`acdir*` for directories), doubling while
//!   the object does not change; `noac` trusts nothing. Our own changes
//!   keep the caches valid through WCC data (see `inode`).
//! - **Close-to-open**: `open` always GETATTRs, dropping cached data if the
//!   file changed; `flush`/`release` write back and COMMIT before
//!   returning, so the next client to open sees our data.
//! - **Write-back** (Lever & Honeyman; Sun's "safe asynchronous writes"):
//!   dirty bytes per file live in [`extents`](self) runs whose cost per
//!   write does not grow with the number of pending writes; they are cut
//!   into `wsize` WRITEs sent UNSTABLE, several in flight, and kept until
//!   a COMMIT returns the WRITEs' verifier. A different verifier (the
//!   server restarted) puts the data back to be sent and committed again.
//!   A WRITE or COMMIT error is reported on the next write/flush/fsync of
//!   each open handle (Linux's errseq).
//! - **Flow control without stalls**: dirty + in-flight bytes are bounded
//!   per mount; a writer that finds no room waits for the first WRITE
//!   completion that makes room for it — never for a COMMIT, never for a
//!   "flush everything" (Lever Fig. 2). Unstable bytes have their own
//!   bound, kept by COMMITting early (at `commit_bytes` per file, or half
//!   the bound per mount). Write-behind starts at half the dirty bound,
//!   when a writer would wait, or on flush.
//! - **Eager write-back** (`eager`, Rago et al.): each file's flusher
//!   starts as soon as a full `wsize` is dirty, sends in offset order, and
//!   bounds the file's dirty bytes so a writer is paced by its own file.
//! - **Reads**: 64 KiB chunks cached in memory while the attributes say
//!   the file is unchanged; sequential readers get read-ahead of
//!   `readahead_bytes` fetched by a background task (random readers do
//!   not); reads see our own unwritten data. Drop-behind: a sequential
//!   reader's chunks are dropped once it is well past them, since the
//!   kernel's page cache in front of the mount keeps what it read.
//! - **Files read ahead** (NFSv4 with delegations): a program that opens
//!   a directory's small files in listing order (`grep -r`, `cp -r`,
//!   `tar c`) has the next ones read whole ahead of it, several in one
//!   COMPOUND, each under a read delegation, so their opens ask nothing;
//!   the window doubles while it keeps going (`readahead_files=N`).
//! - **Directories**: READDIRPLUS (READDIR if the server says NOTSUPP)
//!   fills the attribute and lookup caches; `lookupcache=all|pos|none`,
//!   negative entries expire with the directory's attributes.
//! - **Access** (Linux's access cache): ACCESS answers per inode and
//!   caller (uid, gid, groups), a few callers per inode, trusted while the
//!   attributes they came with are; a new mode or owner, or our SETATTR,
//!   drops them.
//! - **Unlink of an open file** (Linux's "silly rename"): the file is
//!   renamed to a hidden `.nfs…` name instead of removed, so open handles
//!   keep working; the hidden name is removed after the last release. The
//!   link count shown leaves the hidden name out, as Linux's does.
//! - **Namespace changes**: REMOVE and RENAME drop the cached attributes
//!   of every object whose link count or ctime they change (the removed or
//!   replaced object, the moved one); WCC data keeps the directories'.
//! - **Disk cache** (`cache=DIR`, CacheFS / FS-Cache style): chunks on
//!   disk with their file's validator, served after a client restart once
//!   a GETATTR shows the file unchanged; bounded, least recently used
//!   culled; a damaged chunk file is a miss.
//!
//! # Concurrency
//! Each inode has its own lock, never held across a call to the server;
//! the inode and handle tables are locked only to look up or insert.
//! Background work is tokio tasks: one flusher per file with write-back
//! work (running only while it has work), and read-ahead fetches.
//!
//! # Layout
//! - `fs`: [`CachedFs`], its constructor, metadata operations, handles.
//! - `io`: read (chunks, read-ahead, disk), write, flush and the per-file
//!   flusher task (WRITE/COMMIT pipelining, verifier checks, resends).
//! - `deleg`: write-back under write delegations, for the layer that
//!   answers recalls (above `fs` and `io`).
//! - `dir`: opendir/readdir/releasedir, READDIRPLUS with fallback.
//! - `dirops`: unlinks and rmdirs that return before their REMOVE is
//!   answered (`dirops=async`), under a delegation of the directory.
//! - `early`: creates that return before the server has made the file
//!   (`dirops=async`), under a delegation of the directory; the requests
//!   about such a file are answered and done once it exists (above `fs`;
//!   `early_table`, below `fs`, keeps them).
//! - `prefetch`: small files read ahead, several per round trip, each
//!   under a delegation, of a program opening a directory's files in
//!   listing order (above `fs`); `ahead` decides when and which (below
//!   `inode`, which remembers where each file was listed).
//! - `inode`: the inode table, per-inode state, attribute timeouts and
//!   WCC chaining.
//! - `dirent`: [`DirEntry`], a listing's entry (below `inode`, which keeps
//!   listings).
//! - `validator`: what cached data is valid against (below `inode` and
//!   `disk`).
//! - `extents`: the dirty-run structure.
//! - `budget`: byte-wise FIFO flow control.
//! - `disk`: the persistent chunk store.
//! - `config`: [`CacheConfig`], derived from mount options and FSINFO.

mod ahead;
mod budget;
mod config;
mod deleg;
mod dir;
mod dirent;
mod dirops;
mod disk;
mod early;
mod early_table;
mod extents;
mod fs;
mod inode;
mod io;
mod prefetch;
mod validator;

pub use config::{
    CacheConfig, CHUNK_BYTES, DIRTY_EXPIRE_DEFAULT, DISK_CACHE_BYTES_DEFAULT, DROP_BEHIND_BYTES_MIN,
    MEMORY_CACHE_BYTES_DEFAULT, WRITE_BACK_BYTES_DEFAULT,
};
pub use deleg::{Unwritten, WeakCachedFs};
pub use dirent::DirEntry;
pub use fs::{CacheStats, CachedFs, Entry, Opened, StatFs};
pub use inode::ROOT_INO;

use crate::ops::NfsError;

/// Why a cache-layer call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// The server or the transport failed the call (the NFS status is
    /// inside). A write-back failure shows up here on a later call.
    #[error(transparent)]
    Nfs(#[from] NfsError),
    /// The inode number is not known: never looked up, or forgotten.
    /// Reported as ESTALE, which makes the kernel look the name up again.
    #[error("unknown inode {0}")]
    UnknownInode(u64),
    /// No open file or directory with this handle id.
    #[error("no open handle {0}")]
    BadHandle(u64),
    /// The mount is read-only (`ro`).
    #[error("read-only mount")]
    ReadOnly,
    /// An argument the caller should not have passed.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// A local failure (the disk cache directory, a background task).
    #[error("local I/O error: {0}")]
    Io(String),
}

impl FsError {
    /// The server called the handle stale (see [`CachedFs::forget_stale`]).
    pub fn is_stale(&self) -> bool {
        matches!(self, FsError::Nfs(NfsError::Nfs(eagernfs_proto::nfs3::Nfsstat3::Stale)))
    }

    /// The errno to return to the kernel or print.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::Nfs(e) => e.errno(),
            FsError::UnknownInode(_) => libc::ESTALE,
            FsError::BadHandle(_) => libc::EBADF,
            FsError::ReadOnly => libc::EROFS,
            FsError::Invalid(_) => libc::EINVAL,
            FsError::Io(_) => libc::EIO,
        }
    }
}

/// Result of a cache-layer call.
pub type FsResult<T> = Result<T, FsError>;
