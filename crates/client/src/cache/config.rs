//! [`CacheConfig`]: the cache layer's typed settings, derived from the
//! [`MountOptions`] the user gave and the server's FSINFO answer.

use std::path::PathBuf;
use std::time::Duration;

use eagernfs_proto::nfs3::{Fsinfo3ResOk, MAX_IO_SIZE};

use crate::options::{LookupCache, MountOptions, TRANSFER_SIZE_MAX, TRANSFER_SIZE_MIN};

/// REMOVEs of `dirops=async` in flight at most per mount: past it an unlink
/// waits for one to be answered (the server's session slots bound them too).
pub(crate) const REMOVES_IN_FLIGHT_MAX: usize = 32;

/// REMOVEs of `dirops=async` one call carries at most (over NFSv4, one
/// COMPOUND; the client may split it further to fit the session).
pub(crate) const REMOVES_PER_CALL: usize = 12;

/// Files created early (`dirops=async`, see `early`) a mount holds at most
/// before the server has made them: past it a create waits as without the
/// option.
pub(crate) const EARLY_FILES_MAX: usize = 64;

/// Data an early file holds at most before it exists on the server: a
/// write past it waits for the file to be made.
pub(crate) const EARLY_FILE_BYTES_MAX: u64 = 1 << 20;

/// How long a file created early waits for its close before it is made
/// (then in one call with its data, `early`); past it, or when something
/// waits for it, it is made at once and what it owed done after.
pub(crate) const EARLY_CLOSE_WAIT: Duration = Duration::from_millis(50);

/// Size of a cached data chunk, in memory and on disk. CacheFS used 64 KiB
/// chunks; it is large enough that per-chunk bookkeeping is cheap and small
/// enough that a random 4 KiB read does not drag in much more.
pub const CHUNK_BYTES: u64 = 64 * 1024;

/// Default bound on write-back memory per mount (dirty + unstable), when
/// `dirtymax=` is not given.
pub const WRITE_BACK_BYTES_DEFAULT: u64 = 64 << 20;
/// Default bound on the persistent disk cache, when `cachesize=` is not given.
pub const DISK_CACHE_BYTES_DEFAULT: u64 = 1 << 30;
/// Default age at which dirty data is written back without a close (Linux: 30 s).
pub const DIRTY_EXPIRE_DEFAULT: Duration = Duration::from_secs(30);
/// Default bound on clean (read) data kept in memory per mount.
pub const MEMORY_CACHE_BYTES_DEFAULT: u64 = 256 << 20;
/// Least distance behind a sequential reader at which its chunks are
/// dropped (`drop_behind`): the kernel may have a few read-ahead requests
/// in flight at once and answer them out of order.
pub const DROP_BEHIND_BYTES_MIN: u64 = 4 << 20;

/// Everything the cache layer needs to know, already bounds-checked.
/// Build it with [`CacheConfig::from_options`]; tests set fields directly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Largest READ payload, in bytes (the user's `rsize` capped by the
    /// server's `rtmax`).
    pub rsize: u32,
    /// Largest WRITE payload, in bytes (`wsize` capped by `wtmax`).
    /// Dirty data is coalesced into WRITEs of this size.
    pub wsize: u32,
    /// Least time a regular file's attributes are trusted (`acregmin`).
    /// The trust period doubles while the file does not change, up to
    /// `acregmax`, as Linux does.
    pub acregmin: Duration,
    /// Longest time a regular file's attributes are trusted (`acregmax`).
    pub acregmax: Duration,
    /// As `acregmin`, for directories (and the lookup cache in them).
    pub acdirmin: Duration,
    /// As `acregmax`, for directories.
    pub acdirmax: Duration,
    /// `noac`: attributes are never trusted and every write() is written
    /// through FILE_SYNC before it returns (nfs(5) semantics).
    pub noac: bool,
    /// `sync` mount option: every write waits for a FILE_SYNC WRITE.
    pub sync: bool,
    /// Close-to-open: GETATTR on every open, write-back + COMMIT on close.
    /// `nocto` keeps the write-back on close (data must not be lost) but
    /// trusts the attribute cache on open.
    pub cto: bool,
    /// Which lookup results are cached.
    pub lookupcache: LookupCache,
    /// Bound on dirty bytes (buffered, not yet acknowledged by the server)
    /// per mount: writers wait byte-wise for room once it is reached.
    pub dirty_bytes_max: u64,
    /// Bound on unstable bytes (acknowledged UNSTABLE, kept until a COMMIT
    /// returns the same verifier) per mount. The flusher stops sending
    /// before exceeding it and COMMITs early to stay clear of it.
    pub unstable_bytes_max: u64,
    /// A file's unstable bytes at which the flusher sends a COMMIT without
    /// waiting for close or fsync ("memory pressure").
    pub commit_bytes: u64,
    /// Eager write-back (Rago et al.): each file's flusher starts as soon
    /// as a full `wsize` is dirty, sends in offset order, and a writer
    /// waits once the file has `eager_file_bytes_max` dirty bytes.
    pub eager: bool,
    /// Per-file dirty bound in eager mode.
    pub eager_file_bytes_max: u64,
    /// WRITEs in flight per file.
    pub writes_in_flight_max: usize,
    /// How far ahead of a sequential reader to prefetch, in bytes.
    /// 0 disables read-ahead.
    pub readahead_bytes: u64,
    /// Small files read ahead at most per round trip of a program opening
    /// a directory's files in order (`readahead_files=N`; 0: none).
    pub files_ahead_max: u32,
    /// Bound on clean data cached in memory per mount.
    pub memory_cache_bytes_max: u64,
    /// Drop-behind: a sequential reader's chunks are dropped once it is
    /// `readahead_bytes` (at least [`DROP_BEHIND_BYTES_MIN`]) past them,
    /// because whoever asked for them keeps them: behind a mount, the
    /// kernel's page cache holds what FUSE read (and keeps it across opens
    /// while the file is unchanged), so a second copy here would only cost
    /// memory and page faults. Random readers' chunks stay cached.
    pub drop_behind: bool,
    /// A read that takes a whole file from its start in one request keeps
    /// nothing here, for the same reason (the kernel's page cache has it).
    /// On for FUSE mounts; off where the caller has no cache of its own.
    pub drop_whole_reads: bool,
    /// `cache=DIR`: the persistent disk cache, if any.
    pub disk_cache_dir: Option<PathBuf>,
    /// Bound on the disk cache's size; least recently used chunks are
    /// culled beyond it.
    pub disk_cache_bytes_max: u64,
    /// `ro`: refuse every modification locally with EROFS (at mount; a
    /// remount changes it with `CachedFs::set_read_only`).
    pub read_only: bool,
    /// Bytes of directory entries asked for per READDIR(PLUS).
    pub readdir_bytes: u32,
    /// Dirty data older than about this is written back (and committed) even
    /// if nobody closes or syncs the file, as the kernel's dirty-expire does:
    /// a writer that keeps a file open must not leave data only in client
    /// memory. Files are checked every half period, so data waits between
    /// one and one and a half periods. `None`: only close, fsync and memory
    /// pressure write back.
    pub dirty_expire: Option<Duration>,
    /// `deleg_close=writeback`: a close of a file held under a write
    /// delegation returns without waiting for its write-back, when the
    /// layer above answers recalls by writing back first
    /// (`CachedFs::set_recalls_write_back`).
    pub deleg_close_writeback: bool,
    /// `deleg_chmod=hold`: a chmod of a file held under a write delegation,
    /// by the file's creator while it is open for writing, goes with the
    /// data at write-back (see `InodeState::defer_setattr`), when the layer
    /// above writes back before giving a delegation back.
    pub deleg_chmod_hold: bool,
    /// `dirops=async`: an unlink or rmdir in a directory held under a
    /// delegation returns before the server answers (see `dirops`), when
    /// the layer above settles them before giving a delegation back.
    pub dirops_async: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig::from_options(&MountOptions::default(), None)
    }
}

impl CacheConfig {
    /// The settings for a mount with `opts`, given the server's FSINFO
    /// (`None`: assume the server takes the largest transfers we ask for).
    pub fn from_options(opts: &MountOptions, fsinfo: Option<&Fsinfo3ResOk>) -> Self {
        let cap = |wanted: Option<u32>, server_max: Option<u32>| {
            let mut v = wanted.unwrap_or(TRANSFER_SIZE_MAX).min(opts.transfer_size_max());
            if let Some(m) = server_max.filter(|m| *m > 0) {
                v = v.min(m);
            }
            v.clamp(TRANSFER_SIZE_MIN, MAX_IO_SIZE as u32)
        };
        let rsize = cap(opts.rsize, fsinfo.map(|f| f.rtmax));
        let wsize = cap(opts.wsize, fsinfo.map(|f| f.wtmax));
        // dirtymax bounds all write-back memory: half may be dirty, half
        // unstable. Each half must hold a few WRITEs or nothing flows.
        let total = opts.dirty_bytes_max.unwrap_or(WRITE_BACK_BYTES_DEFAULT);
        let floor = 4 * wsize as u64;
        let dirty_bytes_max = (total / 2).max(floor);
        let unstable_bytes_max = (total - total / 2).max(floor);
        let noac = !opts.ac;
        CacheConfig {
            rsize,
            wsize,
            acregmin: opts.acregmin,
            acregmax: opts.acregmax.max(opts.acregmin),
            acdirmin: opts.acdirmin,
            acdirmax: opts.acdirmax.max(opts.acdirmin),
            noac,
            sync: opts.sync,
            cto: opts.cto,
            lookupcache: opts.lookupcache,
            dirty_bytes_max,
            unstable_bytes_max,
            commit_bytes: (unstable_bytes_max / 4).max(wsize as u64),
            eager: opts.eager,
            eager_file_bytes_max: (8 * wsize as u64).max(1 << 20),
            writes_in_flight_max: 16,
            readahead_bytes: 8 * rsize as u64,
            files_ahead_max: opts.readahead_files,
            memory_cache_bytes_max: MEMORY_CACHE_BYTES_DEFAULT,
            drop_behind: true,
            drop_whole_reads: false,
            disk_cache_dir: opts.cache_dir.clone(),
            disk_cache_bytes_max: opts.cache_size_bytes_max.unwrap_or(DISK_CACHE_BYTES_DEFAULT),
            read_only: opts.ro,
            readdir_bytes: 32 * 1024,
            dirty_expire: Some(DIRTY_EXPIRE_DEFAULT),
            deleg_close_writeback: opts.deleg_close_writeback,
            deleg_chmod_hold: opts.deleg_chmod_hold,
            dirops_async: opts.dirops_async,
        }
    }

    /// The attribute trust period bounds for a file (`dir`: a directory).
    pub(crate) fn ac_bounds(&self, dir: bool) -> (Duration, Duration) {
        if self.noac {
            (Duration::ZERO, Duration::ZERO)
        } else if dir {
            (self.acdirmin, self.acdirmax)
        } else {
            (self.acregmin, self.acregmax)
        }
    }
}
