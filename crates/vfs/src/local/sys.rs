//! Thin, safe wrappers over the Linux system calls the local backend uses.
//!
//! Every wrapper takes a directory or object descriptor plus at most one
//! path *component*: the backend never builds a path string from client
//! input. The only absolute paths are `/proc/self/fd/N` magic links, used
//! where Linux has no descriptor-based call that works without
//! `CAP_DAC_READ_SEARCH` (see [`linkat_fd`] and [`chmod_fd`]).

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Attr, FileType, Timestamp};

/// The empty path used with `AT_EMPTY_PATH` to act on a descriptor itself.
pub(super) const EMPTY: &CStr = c"";

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Turn a `-1`-on-error return value into an `io::Result`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(last_err())
    } else {
        Ok(ret)
    }
}

fn cvt_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(last_err())
    } else {
        Ok(ret)
    }
}

/// Retry a call interrupted by a signal; the server's workers may receive
/// signals (e.g. profiling) and an interrupted fsync must not fail a COMMIT.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            r => return r,
        }
    }
}

/// Wrap a freshly returned descriptor.
fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: the caller passes a descriptor just returned by a successful
    // system call, which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub(super) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    retry(|| {
        // SAFETY: `name` is NUL-terminated and outlives the call; the kernel
        // only reads it.
        let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) })?;
        Ok(owned(fd))
    })
}

pub(super) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `stat` for the duration of the call.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

pub(super) fn fstatat_nofollow(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
    // SAFETY: as in `fstat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated; `st` is writable for the call.
    cvt(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

/// The largest kernel handle we accept. It is what is left of
/// [`crate::MAX_BACKEND_HANDLE`] after our header and MAC (see `handle.rs`);
/// ext4 needs 8 bytes, tmpfs 12, btrfs 20 and XFS at most 24.
pub(super) const KERNEL_HANDLE_MAX: usize = 41;

/// A kernel file handle as `name_to_handle_at` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KernelHandle {
    /// The file system's handle type (`FILEID_*`), ≤ 254 for every known one.
    pub(super) htype: u8,
    pub(super) len: u8,
    pub(super) bytes: [u8; KERNEL_HANDLE_MAX],
}

impl KernelHandle {
    pub(super) fn data(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// `struct file_handle` with room for [`KERNEL_HANDLE_MAX`] bytes of payload.
#[repr(C)]
struct RawHandle {
    handle_bytes: libc::c_uint,
    handle_type: libc::c_int,
    f_handle: [u8; KERNEL_HANDLE_MAX],
}

/// `name_to_handle_at(dir, name, flags)`: the handle and the mount id.
/// `EOVERFLOW` (a handle larger than we can carry) becomes `EOPNOTSUPP`, as
/// does a handle type we cannot store in one byte.
pub(super) fn name_to_handle_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
) -> io::Result<(KernelHandle, i32)> {
    let mut raw = RawHandle {
        handle_bytes: KERNEL_HANDLE_MAX as u32,
        handle_type: 0,
        f_handle: [0; KERNEL_HANDLE_MAX],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: `raw` starts with the `file_handle` header and its
    // `handle_bytes` says how much room follows, so the kernel writes within
    // it; `name` is NUL-terminated; `mount_id` is writable.
    let r = unsafe {
        libc::name_to_handle_at(
            dir.as_raw_fd(),
            name.as_ptr(),
            (&mut raw as *mut RawHandle).cast::<libc::file_handle>(),
            &mut mount_id,
            flags,
        )
    };
    if r < 0 {
        let e = last_err();
        if e.raw_os_error() == Some(libc::EOVERFLOW) {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        return Err(e);
    }
    let len = raw.handle_bytes as usize;
    if len > KERNEL_HANDLE_MAX || !(0..=254).contains(&raw.handle_type) {
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    Ok((KernelHandle { htype: raw.handle_type as u8, len: len as u8, bytes: raw.f_handle }, mount_id))
}

/// `open_by_handle_at(mount_fd, kh, flags)`; needs `CAP_DAC_READ_SEARCH`
/// in the effective set, i.e. fsuid 0 (see `creds.rs`).
pub(super) fn open_by_handle_at(
    mount: BorrowedFd<'_>,
    kh: &KernelHandle,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let mut raw =
        RawHandle { handle_bytes: kh.len as u32, handle_type: kh.htype as libc::c_int, f_handle: kh.bytes };
    retry(|| {
        // SAFETY: `raw` is a complete `file_handle` whose `handle_bytes` does
        // not exceed the payload that follows; the kernel only reads it.
        let fd = cvt(unsafe {
            libc::open_by_handle_at(
                mount.as_raw_fd(),
                (&mut raw as *mut RawHandle).cast::<libc::file_handle>(),
                flags | libc::O_CLOEXEC,
            )
        })?;
        Ok(owned(fd))
    })
}

thread_local! {
    /// Whether this thread has its own umask (`unshare(CLONE_FS)` done):
    /// `None` until the first create on the thread tries.
    static OWN_UMASK: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Set once a thread could not get its own umask, so the warning is logged once.
static NO_OWN_UMASK_WARNED: AtomicBool = AtomicBool::new(false);

/// Run `create` (one mkdirat/mknodat) with the umask at 0, so the object is
/// born with exactly the mode asked for: restoring the bits afterwards with a
/// chmod leaves a moment in which the object is on disk with a mode that is
/// neither before nor after the call, which a power cut (another call's sync
/// committing the file system's journal in between) can make permanent.
///
/// The umask belongs to the thread's file-system attributes (umask, cwd,
/// root), which threads share unless a thread unshares them. So the first
/// create on a thread gives that thread its own copy (`unshare(CLONE_FS)`),
/// and the umask is cleared only around the call: the rest of the process,
/// and this thread's other files, keep the process umask. The backend only
/// uses descriptors and `/proc/self/fd` paths, never the cwd or root, so a
/// thread that stops following a later `chdir` of the process loses nothing.
/// Where unsharing is refused (a seccomp filter), the create runs under the
/// process umask and the caller's chmod restores the bits, as before.
fn without_umask<T>(create: impl FnOnce() -> T) -> T {
    let own = OWN_UMASK.with(|c| {
        if let Some(own) = c.get() {
            return own;
        }
        // SAFETY: unshare takes flags and touches no memory; CLONE_FS
        // changes only the calling thread's file-system attributes.
        let ok = unsafe { libc::unshare(libc::CLONE_FS) } == 0;
        if !ok && !NO_OWN_UMASK_WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "unshare(CLONE_FS) failed ({}): objects are created under the process umask, \
                 then given their mode, which a power cut between the two can undo; \
                 allow unshare in the seccomp profile to avoid it",
                last_err()
            );
        }
        c.set(Some(ok));
        ok
    });
    if !own {
        return create();
    }
    // SAFETY: umask cannot fail and touches no memory; this thread's umask is
    // its own (above), and is put back before returning.
    let old = unsafe { libc::umask(0) };
    let r = create();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    r
}

/// `mkdirat` with exactly `mode` (no umask; see [`without_umask`]).
pub(super) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    without_umask(|| {
        // SAFETY: `name` is NUL-terminated and only read.
        cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) }).map(drop)
    })
}

/// `mknodat` with exactly `mode` (no umask; see [`without_umask`]).
pub(super) fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, dev: libc::dev_t) -> io::Result<()> {
    without_umask(|| {
        // SAFETY: `name` is NUL-terminated and only read.
        cvt(unsafe { libc::mknodat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t, dev) }).map(drop)
    })
}

pub(super) fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: both strings are NUL-terminated and only read.
    cvt(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

pub(super) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and only read.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
}

pub(super) fn renameat(
    from: BorrowedFd<'_>,
    from_name: &CStr,
    to: BorrowedFd<'_>,
    to_name: &CStr,
) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated and only read.
    cvt(unsafe { libc::renameat(from.as_raw_fd(), from_name.as_ptr(), to.as_raw_fd(), to_name.as_ptr()) })
        .map(drop)
}

fn proc_fd_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a formatted number")
}

/// Link the object behind `fd` (any descriptor, `O_PATH` included) as
/// `dir/name`.
///
/// `linkat(fd, "", …, AT_EMPTY_PATH)` needs `CAP_DAC_READ_SEARCH`, which a
/// caller's fsuid drops, so we follow the `/proc/self/fd` magic link
/// instead: the kernel then applies the caller's own checks
/// (`fs.protected_hardlinks`, write permission on `dir`).
pub(super) fn linkat_fd(fd: BorrowedFd<'_>, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    let src = proc_fd_path(fd.as_raw_fd());
    // SAFETY: both paths are NUL-terminated and only read.
    cvt(unsafe {
        libc::linkat(libc::AT_FDCWD, src.as_ptr(), dir.as_raw_fd(), name.as_ptr(), libc::AT_SYMLINK_FOLLOW)
    })
    .map(drop)
}

/// Set to false the first time `fchmodat2` reports `ENOSYS` (kernels < 6.6).
static HAVE_FCHMODAT2: AtomicBool = AtomicBool::new(true);

/// `chmod` the object behind an `O_PATH` descriptor, as the current fsuid.
///
/// `fchmod` refuses `O_PATH` descriptors; `fchmodat2(fd, "", AT_EMPTY_PATH)`
/// (Linux 6.6) does not, and older kernels get the `/proc/self/fd` link.
/// Never called on symlinks (their mode is meaningless on Linux).
pub(super) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    if HAVE_FCHMODAT2.load(Ordering::Relaxed) {
        // SAFETY: the empty path is NUL-terminated and only read.
        let r = unsafe {
            libc::syscall(
                libc::SYS_fchmodat2,
                fd.as_raw_fd(),
                EMPTY.as_ptr(),
                mode as libc::c_uint,
                libc::AT_EMPTY_PATH,
            )
        };
        match cvt_long(r) {
            Ok(_) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                HAVE_FCHMODAT2.store(false, Ordering::Relaxed)
            }
            Err(e) => return Err(e),
        }
    }
    let path = proc_fd_path(fd.as_raw_fd());
    // SAFETY: `path` is NUL-terminated and only read.
    cvt(unsafe { libc::chmod(path.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`: change the owner of the
/// object itself (a symlink is not followed). `None` leaves a field alone.
pub(super) fn chown_fd(fd: BorrowedFd<'_>, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let uid = uid.unwrap_or(u32::MAX) as libc::uid_t;
    let gid = gid.unwrap_or(u32::MAX) as libc::gid_t;
    // SAFETY: the empty path is NUL-terminated and only read.
    cvt(unsafe { libc::fchownat(fd.as_raw_fd(), EMPTY.as_ptr(), uid, gid, libc::AT_EMPTY_PATH) }).map(drop)
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH)` (Linux ≥ 5.8): set the times of
/// the object itself. Entries may be `UTIME_NOW` / `UTIME_OMIT`.
pub(super) fn utimens_fd(fd: BorrowedFd<'_>, times: &[libc::timespec; 2]) -> io::Result<()> {
    // SAFETY: `times` points at two valid timespecs; the path is NUL-terminated.
    cvt(unsafe { libc::utimensat(fd.as_raw_fd(), EMPTY.as_ptr(), times.as_ptr(), libc::AT_EMPTY_PATH) })
        .map(drop)
}

/// Read the target of the symlink behind an `O_PATH` descriptor.
pub(super) fn readlink_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for `buf.len()` bytes; the path is NUL-terminated.
    let n = unsafe { libc::readlinkat(fd.as_raw_fd(), EMPTY.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(last_err())
    } else {
        Ok(n as usize)
    }
}

/// `pread` into uninitialised memory; returns how many bytes (at the
/// start of `buf`) the kernel wrote.
pub(super) fn pread_uninit(
    fd: BorrowedFd<'_>,
    buf: &mut [std::mem::MaybeUninit<u8>],
    offset: u64,
) -> io::Result<usize> {
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    retry(|| {
        // SAFETY: `buf` is writable for `buf.len()` bytes; the kernel only
        // writes (never reads) them.
        let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), off) };
        if n < 0 {
            Err(last_err())
        } else {
            Ok(n as usize)
        }
    })
}

pub(super) fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> io::Result<usize> {
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    retry(|| {
        // SAFETY: `buf` is readable for `buf.len()` bytes.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), off) };
        if n < 0 {
            Err(last_err())
        } else {
            Ok(n as usize)
        }
    })
}

pub(super) fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain call on a valid descriptor.
    retry(|| cvt(unsafe { libc::fsync(fd.as_raw_fd()) }).map(drop))
}

pub(super) fn fdatasync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain call on a valid descriptor.
    retry(|| cvt(unsafe { libc::fdatasync(fd.as_raw_fd()) }).map(drop))
}

/// Ask the kernel to read `len` bytes at `offset` into the page cache
/// without waiting for them (`POSIX_FADV_WILLNEED`).
pub(super) fn will_need(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let (offset, len) = (offset.min(i64::MAX as u64) as i64, len.min(i64::MAX as u64) as i64);
    // SAFETY: plain call on a valid descriptor with integer arguments.
    match unsafe { libc::posix_fadvise(fd.as_raw_fd(), offset, len, libc::POSIX_FADV_WILLNEED) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Start writing the dirty pages of `len` bytes at `offset` to the disk
/// without waiting for them (pages already being written are skipped).
/// Durability is still what `fdatasync` gives; this only gets the disk
/// going earlier.
pub(super) fn start_writeback(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let (offset, len) = (offset.min(i64::MAX as u64) as i64, len.min(i64::MAX as u64) as i64);
    // SAFETY: plain call on a valid descriptor with integer arguments.
    retry(|| {
        cvt(unsafe { libc::sync_file_range(fd.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) })
            .map(drop)
    })
}

pub(super) fn ftruncate(fd: BorrowedFd<'_>, size: u64) -> io::Result<()> {
    let size = i64::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: plain call on a valid descriptor.
    retry(|| cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size) }).map(drop))
}

pub(super) fn lseek_set(fd: BorrowedFd<'_>, offset: i64) -> io::Result<()> {
    // SAFETY: plain call on a valid descriptor.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), offset, libc::SEEK_SET) };
    if r < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}

/// One `getdents64` call into `buf`; returns the number of bytes filled
/// (0 at the end of the directory).
pub(super) fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is writable for `buf.len()` bytes; the kernel writes
        // whole `linux_dirent64` records within that length.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
        cvt_long(n).map(|n| n as usize)
    })
}

/// One record of a `getdents64` buffer.
pub(super) struct RawDirent<'a> {
    pub(super) ino: u64,
    /// The position after this entry (what `lseek` resumes from).
    pub(super) off: i64,
    pub(super) name: &'a [u8],
}

/// Iterate over the records `getdents64` wrote into `buf[..len]`. Stops at
/// the first malformed record rather than trusting a bad length.
pub(super) fn dirents(buf: &[u8]) -> impl Iterator<Item = RawDirent<'_>> {
    // Header of `struct linux_dirent64`: d_ino u64, d_off i64, d_reclen u16, d_type u8.
    const NAME_AT: usize = 19;
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        let rest = buf.get(pos..)?;
        if rest.len() < NAME_AT {
            return None;
        }
        let ino = u64::from_ne_bytes(rest[0..8].try_into().ok()?);
        let off = i64::from_ne_bytes(rest[8..16].try_into().ok()?);
        let reclen = u16::from_ne_bytes(rest[16..18].try_into().ok()?) as usize;
        if reclen < NAME_AT || reclen > rest.len() {
            return None;
        }
        let name_area = &rest[NAME_AT..reclen];
        let name_len = name_area.iter().position(|&b| b == 0).unwrap_or(name_area.len());
        pos += reclen;
        Some(RawDirent { ino, off, name: &name_area[..name_len] })
    })
}

pub(super) fn fstatvfs(fd: BorrowedFd<'_>) -> io::Result<libc::statvfs> {
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut sv: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `sv` is writable for the call.
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut sv) })?;
    Ok(sv)
}

pub(super) fn fstatfs(fd: BorrowedFd<'_>) -> io::Result<libc::statfs> {
    // SAFETY: an all-zero `statfs` is a valid value of this plain C struct.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `sf` is writable for the call.
    cvt(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sf) })?;
    Ok(sf)
}

/// Open the object behind `fd` (an `O_PATH` descriptor) again with `flags`,
/// through its `/proc/self/fd` link, as the current fsuid.
pub(super) fn reopen(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = proc_fd_path(fd.as_raw_fd());
    retry(|| {
        // SAFETY: the path is NUL-terminated and outlives the call.
        cvt(unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) }).map(owned)
    })
}

/// Whether the block device `dev` holds an ext4 file system with a journal
/// (jbd2 lists each journal it runs in `/proc/fs/jbd2/NAME-INODE`, the
/// journal's inode being 8). False when it cannot tell.
pub(super) fn has_jbd2_journal(dev: u64) -> bool {
    let sys_link = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    let Ok(target) = std::fs::read_link(sys_link) else { return false };
    let Some(name) = target.file_name().and_then(|n| n.to_str()) else { return false };
    std::path::Path::new(&format!("/proc/fs/jbd2/{name}-8")).exists()
}

/// `syncfs`: needs a real (not `O_PATH`) descriptor.
pub(super) fn syncfs(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain call on a valid descriptor.
    cvt(unsafe { libc::syncfs(fd.as_raw_fd()) }).map(drop)
}

/// The soft `RLIMIT_NOFILE`, used to size the descriptor cache.
pub(super) fn nofile_soft_limit() -> u64 {
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `rl` is writable for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } < 0 {
        return 1024;
    }
    rl.rlim_cur
}

fn ts(secs: i64, nsecs: i64) -> Timestamp {
    Timestamp { secs, nsecs: nsecs.clamp(0, 999_999_999) as u32 }
}

pub(super) fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFIFO => FileType::Fifo,
        _ => FileType::Regular,
    }
}

/// Attributes from a `stat` (see the mapping in the module docs of `local`).
pub(super) fn attr_from_stat(st: &libc::stat) -> Attr {
    let ftype = file_type(st.st_mode);
    let rdev = match ftype {
        FileType::BlockDevice | FileType::CharDevice => (libc::major(st.st_rdev), libc::minor(st.st_rdev)),
        _ => (0, 0),
    };
    Attr {
        ftype,
        mode: st.st_mode & 0o7777,
        nlink: u32::try_from(st.st_nlink).unwrap_or(u32::MAX),
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size.max(0) as u64,
        used: (st.st_blocks.max(0) as u64).saturating_mul(512),
        rdev,
        fsid: st.st_dev,
        fileid: st.st_ino,
        atime: ts(st.st_atime, st.st_atime_nsec),
        mtime: ts(st.st_mtime, st.st_mtime_nsec),
        ctime: ts(st.st_ctime, st.st_ctime_nsec),
    }
}

/// `fallocate(fd, mode, offset, len)`.
pub(super) fn fallocate(fd: BorrowedFd<'_>, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let (off, len) = (i64::try_from(offset), i64::try_from(len));
    let (Ok(off), Ok(len)) = (off, len) else { return Err(io::Error::from_raw_os_error(libc::EFBIG)) };
    // SAFETY: plain integer arguments on a descriptor we own.
    retry(|| cvt(unsafe { libc::fallocate(fd.as_raw_fd(), mode, off, len) })).map(drop)
}

/// `lseek(fd, offset, whence)`: the new offset.
pub(super) fn lseek(fd: BorrowedFd<'_>, offset: u64, whence: libc::c_int) -> io::Result<u64> {
    let off = i64::try_from(offset).map_err(|_| io::Error::from_raw_os_error(libc::ENXIO))?;
    // SAFETY: plain integer arguments on a descriptor we own.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), off, whence) };
    if r < 0 {
        return Err(last_err());
    }
    Ok(r as u64)
}

/// `copy_file_range` of up to `len` bytes at explicit offsets (which it advances); bytes copied.
pub(super) fn copy_file_range(
    src: BorrowedFd<'_>,
    src_off: &mut u64,
    dst: BorrowedFd<'_>,
    dst_off: &mut u64,
    len: usize,
) -> io::Result<usize> {
    let mut so = i64::try_from(*src_off).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    let mut d = i64::try_from(*dst_off).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: the offsets are valid i64s we own for the call; both descriptors are open.
    let n = retry(|| {
        cvt_long(unsafe { libc::copy_file_range(src.as_raw_fd(), &mut so, dst.as_raw_fd(), &mut d, len, 0) }
            as libc::c_long)
    })?;
    *src_off = so as u64;
    *dst_off = d as u64;
    Ok(n as usize)
}

/// `FICLONERANGE`: share `len` bytes (0: to the end) of `src` at `src_off` with `dst` at `dst_off`.
pub(super) fn clone_range(
    src: BorrowedFd<'_>,
    src_off: u64,
    dst: BorrowedFd<'_>,
    dst_off: u64,
    len: u64,
) -> io::Result<()> {
    #[repr(C)]
    struct FileCloneRange {
        src_fd: i64,
        src_offset: u64,
        src_length: u64,
        dest_offset: u64,
    }
    const FICLONERANGE: libc::c_ulong = 0x4020_940d;
    let arg = FileCloneRange {
        src_fd: src.as_raw_fd() as i64,
        src_offset: src_off,
        src_length: len,
        dest_offset: dst_off,
    };
    // SAFETY: FICLONERANGE reads a `struct file_clone_range`, which `arg` is, for the call's duration.
    cvt(unsafe { libc::ioctl(dst.as_raw_fd(), FICLONERANGE, &arg) }).map(drop)
}

/// The user namespace's name for extended attribute `name`.
fn user_xattr(name: &[u8]) -> io::Result<CString> {
    let mut v = b"user.".to_vec();
    v.extend_from_slice(name);
    CString::new(v).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `getxattr` of the object behind `fd` (any descriptor, `O_PATH` too), as the current fsuid.
pub(super) fn get_xattr(fd: BorrowedFd<'_>, name: &[u8], max: usize) -> io::Result<Vec<u8>> {
    let path = proc_fd_path(fd.as_raw_fd());
    let name = user_xattr(name)?;
    let mut buf = vec![0u8; max];
    // SAFETY: both strings are NUL-terminated; `buf` is valid for `max` bytes.
    let n = retry(|| {
        cvt_long(unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
            as libc::c_long)
    })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// `setxattr` (flags: `XATTR_CREATE`, `XATTR_REPLACE` or 0).
pub(super) fn set_xattr(fd: BorrowedFd<'_>, name: &[u8], value: &[u8], flags: libc::c_int) -> io::Result<()> {
    let path = proc_fd_path(fd.as_raw_fd());
    let name = user_xattr(name)?;
    // SAFETY: both strings are NUL-terminated; `value` is valid for its length.
    retry(|| {
        cvt(unsafe {
            libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), flags)
        })
    })
    .map(drop)
}

/// The user namespace's attribute names (without `user.`).
pub(super) fn list_xattr(fd: BorrowedFd<'_>) -> io::Result<Vec<Vec<u8>>> {
    let path = proc_fd_path(fd.as_raw_fd());
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: the path is NUL-terminated; `buf` is valid for its length.
    let n = retry(|| {
        cvt_long(unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } as libc::c_long)
    })?;
    Ok(buf[..n as usize]
        .split(|b| *b == 0)
        .filter_map(|n| n.strip_prefix(b"user.").map(<[u8]>::to_vec))
        .filter(|n| !n.is_empty())
        .collect())
}

/// `removexattr`.
pub(super) fn remove_xattr(fd: BorrowedFd<'_>, name: &[u8]) -> io::Result<()> {
    let path = proc_fd_path(fd.as_raw_fd());
    let name = user_xattr(name)?;
    // SAFETY: both strings are NUL-terminated.
    retry(|| cvt(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) })).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// The thread's own umask is set up once (one `unshare` per thread), not
    /// at every create: each `unshare(CLONE_FS)` copies the thread's
    /// file-system attributes anew.
    #[test]
    fn a_thread_gets_its_own_umask_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        std::thread::spawn(move || {
            assert_eq!(OWN_UMASK.with(Cell::get), None, "a new thread has not tried yet");
            mkdirat(d.as_fd(), c"a", 0o777).unwrap();
            let first = OWN_UMASK.with(Cell::get);
            assert!(first.is_some(), "the first create remembers whether the thread has its own umask");
            mkdirat(d.as_fd(), c"b", 0o777).unwrap();
            assert_eq!(OWN_UMASK.with(Cell::get), first);
        })
        .join()
        .unwrap();
    }
}
