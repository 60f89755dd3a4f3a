//! libcephfs, loaded when the first CephFS export is opened.
//!
//! The `eagernfs` binary links nothing of Ceph: `libcephfs.so.2` is opened
//! with `dlopen` (through the `libloading` crate) the first time a CephFS
//! export is built, and every function used is looked up then. A machine
//! without Ceph runs every other export as before, and a CephFS export there
//! fails with [`LoadError`], which names the package to install.
//!
//! The declarations below follow `cephfs/libcephfs.h` and
//! `cephfs/ceph_ll_client.h` of Ceph 16 (Pacific, libcephfs ABI 2); the
//! integration tests exercise each of them against a real cluster, and
//! `statx_layout_matches_the_header` compares the one structure we lay out
//! ourselves with the installed header when there is one.

#![allow(non_camel_case_types, clippy::unused_unit)]

use std::ffi::{c_char, c_int, c_uint};
use std::sync::OnceLock;

use crate::dylib::{dynamic_library, load_once, Loaded};

/// The shared object and the package that ships it (Debian and Ubuntu).
pub const LIBRARY: &str = "libcephfs.so.2";
pub(crate) const PACKAGE: &str = "libcephfs2";

/// `struct ceph_mount_info`, `UserPerm`, `struct Inode`, `struct Fh`,
/// `struct ceph_dir_result`: opaque to us.
#[repr(C)]
pub(crate) struct ceph_mount_info {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct UserPerm {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct Inode {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct Fh {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct ceph_dir_result {
    _private: [u8; 0],
}

/// `vinodeno_t`: an inode number and the snapshot it is seen in.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct vinodeno_t {
    pub(crate) ino: u64,
    pub(crate) snapid: u64,
}

/// `ceph_start_reclaim`: end the old session outright (the only mode there is).
pub(crate) const CEPH_RECLAIM_RESET: c_uint = 1;

/// The live file system (not a snapshot).
pub(crate) const CEPH_NOSNAP: u64 = u64::MAX - 1;

/// `struct ceph_statx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct ceph_statx {
    pub(crate) stx_mask: u32,
    pub(crate) stx_blksize: u32,
    pub(crate) stx_nlink: u32,
    pub(crate) stx_uid: u32,
    pub(crate) stx_gid: u32,
    pub(crate) stx_mode: u16,
    pub(crate) stx_ino: u64,
    pub(crate) stx_size: u64,
    pub(crate) stx_blocks: u64,
    pub(crate) stx_dev: libc::dev_t,
    pub(crate) stx_rdev: libc::dev_t,
    pub(crate) stx_atime: libc::timespec,
    pub(crate) stx_ctime: libc::timespec,
    pub(crate) stx_mtime: libc::timespec,
    pub(crate) stx_btime: libc::timespec,
    pub(crate) stx_version: u64,
}

impl Default for ceph_statx {
    fn default() -> Self {
        // SAFETY: every field is an integer or a struct of integers.
        unsafe { std::mem::zeroed() }
    }
}

pub(crate) const CEPH_STATX_MODE: c_uint = 0x1;
/// Everything `struct stat` has.
pub(crate) const CEPH_STATX_BASIC_STATS: c_uint = 0x7ff;

pub(crate) const CEPH_SETATTR_MODE: c_int = 1 << 0;
pub(crate) const CEPH_SETATTR_UID: c_int = 1 << 1;
pub(crate) const CEPH_SETATTR_GID: c_int = 1 << 2;
pub(crate) const CEPH_SETATTR_MTIME: c_int = 1 << 3;
pub(crate) const CEPH_SETATTR_ATIME: c_int = 1 << 4;
pub(crate) const CEPH_SETATTR_SIZE: c_int = 1 << 5;

dynamic_library! {
    /// Every libcephfs function eagernfs calls, resolved once.
    struct Lib, error LoadError;

    fn ceph_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> *const c_char;
    fn ceph_create(cmount: *mut *mut ceph_mount_info, id: *const c_char) -> c_int;
    fn ceph_conf_read_file(cmount: *mut ceph_mount_info, path: *const c_char) -> c_int;
    fn ceph_conf_set(cmount: *mut ceph_mount_info, option: *const c_char, value: *const c_char) -> c_int;
    fn ceph_init(cmount: *mut ceph_mount_info) -> c_int;
    fn ceph_select_filesystem(cmount: *mut ceph_mount_info, fs_name: *const c_char) -> c_int;
    fn ceph_mount(cmount: *mut ceph_mount_info, root: *const c_char) -> c_int;
    fn ceph_set_uuid(cmount: *mut ceph_mount_info, uuid: *const c_char) -> ();
    fn ceph_start_reclaim(cmount: *mut ceph_mount_info, uuid: *const c_char, flags: c_uint) -> c_int;
    fn ceph_finish_reclaim(cmount: *mut ceph_mount_info) -> ();
    fn ceph_get_fs_cid(cmount: *mut ceph_mount_info) -> i64;
    fn ceph_get_instance_id(cmount: *mut ceph_mount_info) -> u64;
    fn ceph_unmount(cmount: *mut ceph_mount_info) -> c_int;
    fn ceph_release(cmount: *mut ceph_mount_info) -> c_int;
    fn ceph_sync_fs(cmount: *mut ceph_mount_info) -> c_int;
    fn ceph_userperm_new(uid: libc::uid_t, gid: libc::gid_t, ngids: c_int, gids: *mut libc::gid_t) -> *mut UserPerm;
    fn ceph_userperm_destroy(perm: *mut UserPerm) -> ();
    fn ceph_ll_lookup_root(cmount: *mut ceph_mount_info, out: *mut *mut Inode) -> c_int;
    fn ceph_ll_lookup_vino(cmount: *mut ceph_mount_info, vino: vinodeno_t, out: *mut *mut Inode) -> c_int;
    fn ceph_ll_lookup(
        cmount: *mut ceph_mount_info,
        parent: *mut Inode,
        name: *const c_char,
        out: *mut *mut Inode,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_put(cmount: *mut ceph_mount_info, inode: *mut Inode) -> c_int;
    fn ceph_ll_getattr(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_setattr(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        stx: *mut ceph_statx,
        mask: c_int,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_open(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        flags: c_int,
        fh: *mut *mut Fh,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_read(cmount: *mut ceph_mount_info, fh: *mut Fh, off: i64, len: u64, buf: *mut c_char) -> c_int;
    fn ceph_ll_write(cmount: *mut ceph_mount_info, fh: *mut Fh, off: i64, len: u64, data: *const c_char) -> c_int;
    fn ceph_ll_fsync(cmount: *mut ceph_mount_info, fh: *mut Fh, syncdataonly: c_int) -> c_int;
    fn ceph_ll_close(cmount: *mut ceph_mount_info, fh: *mut Fh) -> c_int;
    fn ceph_ll_sync_inode(cmount: *mut ceph_mount_info, inode: *mut Inode, syncdataonly: c_int) -> c_int;
    fn ceph_ll_mknod(
        cmount: *mut ceph_mount_info,
        parent: *mut Inode,
        name: *const c_char,
        mode: libc::mode_t,
        rdev: libc::dev_t,
        out: *mut *mut Inode,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_mkdir(
        cmount: *mut ceph_mount_info,
        parent: *mut Inode,
        name: *const c_char,
        mode: libc::mode_t,
        out: *mut *mut Inode,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_symlink(
        cmount: *mut ceph_mount_info,
        parent: *mut Inode,
        name: *const c_char,
        value: *const c_char,
        out: *mut *mut Inode,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_link(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        newparent: *mut Inode,
        name: *const c_char,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_unlink(cmount: *mut ceph_mount_info, parent: *mut Inode, name: *const c_char, perms: *const UserPerm) -> c_int;
    fn ceph_ll_rmdir(cmount: *mut ceph_mount_info, parent: *mut Inode, name: *const c_char, perms: *const UserPerm) -> c_int;
    fn ceph_ll_rename(
        cmount: *mut ceph_mount_info,
        parent: *mut Inode,
        name: *const c_char,
        newparent: *mut Inode,
        newname: *const c_char,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_readlink(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        buf: *mut c_char,
        bufsize: usize,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_opendir(
        cmount: *mut ceph_mount_info,
        inode: *mut Inode,
        dirpp: *mut *mut ceph_dir_result,
        perms: *const UserPerm,
    ) -> c_int;
    fn ceph_ll_releasedir(cmount: *mut ceph_mount_info, dir: *mut ceph_dir_result) -> c_int;
    fn ceph_readdirplus_r(
        cmount: *mut ceph_mount_info,
        dirp: *mut ceph_dir_result,
        de: *mut libc::dirent,
        stx: *mut ceph_statx,
        want: c_uint,
        flags: c_uint,
        out: *mut *mut Inode,
    ) -> c_int;
    fn ceph_telldir(cmount: *mut ceph_mount_info, dirp: *mut ceph_dir_result) -> i64;
    fn ceph_seekdir(cmount: *mut ceph_mount_info, dirp: *mut ceph_dir_result, offset: i64) -> ();
    fn ceph_ll_statfs(cmount: *mut ceph_mount_info, inode: *mut Inode, buf: *mut libc::statvfs) -> c_int;
    fn ceph_ll_getlk(cmount: *mut ceph_mount_info, fh: *mut Fh, fl: *mut libc::flock, owner: u64) -> c_int;
    fn ceph_ll_setlk(cmount: *mut ceph_mount_info, fh: *mut Fh, fl: *mut libc::flock, owner: u64, sleep: c_int) -> c_int;
}

/// Why libcephfs could not be used.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "CephFS exports need libcephfs, which is not installed here ({0}): install the package \
         {PACKAGE} (apt-get install {PACKAGE}), or the libcephfs package of your distribution"
    )]
    Missing(String),
    #[error(
        "the installed {LIBRARY} lacks {0}: eagernfs needs libcephfs from Ceph 16 (Pacific) or \
         later; upgrade the package {PACKAGE}"
    )]
    Symbol(&'static str),
}

/// The library `name` (a file name searched on the library path, or a
/// path), loaded on first use; the outcome, success or not, is kept for
/// the life of the process (a library is never unloaded).
pub(crate) fn lib(name: &str) -> Result<&'static Lib, LoadError> {
    static LOADED: Loaded<Lib, LoadError> = OnceLock::new();
    load_once(&LOADED, name, Lib::open)
}

/// The version string of libcephfs `name` ("16.2.15"), if it loads.
pub fn version(name: &str) -> Result<String, LoadError> {
    let lib = lib(name)?;
    let (mut a, mut b, mut c) = (0, 0, 0);
    // SAFETY: the out-pointers are valid; the string is static in the library.
    let s = unsafe { (lib.ceph_version)(&mut a, &mut b, &mut c) };
    if s.is_null() {
        return Ok(format!("{a}.{b}.{c}"));
    }
    // SAFETY: a NUL-terminated static string.
    Ok(unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// The pointer types are plain addresses handed back to libcephfs, which
/// locks its own state; sharing them between threads is what its API is for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ptr<T>(pub(crate) *mut T);

// SAFETY: see above: libcephfs objects are used from any thread.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ceph_statx` is the one structure laid out here by hand. With the
    /// header installed (libcephfs-dev), compile a probe that prints its
    /// size and field offsets and compare; without it there is nothing to
    /// compare with.
    #[test]
    fn statx_layout_matches_the_header() {
        let header = std::path::Path::new("/usr/include/cephfs/ceph_ll_client.h");
        if !header.exists() {
            eprintln!("SKIP: {} not installed (libcephfs-dev)", header.display());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("probe.c");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>
#include <cephfs/ceph_ll_client.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct ceph_statx),
        offsetof(struct ceph_statx, stx_mode), offsetof(struct ceph_statx, stx_ino),
        offsetof(struct ceph_statx, stx_dev), offsetof(struct ceph_statx, stx_atime),
        offsetof(struct ceph_statx, stx_btime), offsetof(struct ceph_statx, stx_version));
    return 0;
}
"#,
        )
        .unwrap();
        let exe = dir.path().join("probe");
        let cc = std::process::Command::new("cc").arg(&src).arg("-o").arg(&exe).status();
        match cc {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("SKIP: no C compiler to build the probe ({other:?})");
                return;
            }
        }
        let out = std::process::Command::new(&exe).output().unwrap();
        let got = String::from_utf8(out.stdout).unwrap();
        let s = ceph_statx::default();
        let base = &s as *const _ as usize;
        let off = |p: *const u8| p as usize - base;
        let ours = format!(
            "{} {} {} {} {} {} {}\n",
            std::mem::size_of::<ceph_statx>(),
            off(&s.stx_mode as *const _ as *const u8),
            off(&s.stx_ino as *const _ as *const u8),
            off(&s.stx_dev as *const _ as *const u8),
            off(&s.stx_atime as *const _ as *const u8),
            off(&s.stx_btime as *const _ as *const u8),
            off(&s.stx_version as *const _ as *const u8),
        );
        assert_eq!(got, ours, "struct ceph_statx: header (left) vs ours (right)");
    }
}
