//! Safe wrappers over one libcephfs mount: the mount itself, references to
//! its inodes, open files, directory streams and credentials.
//!
//! Every wrapper releases what it holds when dropped (`ceph_ll_put`,
//! `ceph_ll_close`, `ceph_ll_releasedir`, `ceph_userperm_destroy`), and
//! borrows the [`Mount`] it came from, so nothing outlives its mount.
//! libcephfs returns errors as negative errno values; they come back here
//! as [`Errno`].

use std::ffi::{c_int, CStr, CString};
use std::sync::Arc;
use std::time::Duration;

use super::ffi::{self, ceph_statx, vinodeno_t, Lib, Ptr};
use crate::Credentials;

/// A positive errno from libcephfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

/// 0 or a positive count is success; a negative value is `-errno`.
fn check(r: c_int) -> Result<c_int, Errno> {
    if r < 0 {
        Err(Errno(-r))
    } else {
        Ok(r)
    }
}

/// Where a mount comes from: everything `ceph_mount` needs.
#[derive(Clone, Debug)]
pub(crate) struct MountSpec {
    pub(crate) client_id: String,
    pub(crate) conf: std::path::PathBuf,
    pub(crate) fs_name: String,
    pub(crate) path: String,
    /// How long connecting to the monitors and the MDS may take.
    pub(crate) timeout: Duration,
    /// Extra `ceph.conf` options (name, value).
    pub(crate) options: Vec<(&'static str, String)>,
    /// This client's lasting name: a session of an earlier run under the
    /// same name is ended before mounting (its capabilities and locks are
    /// released at once instead of after the MDS's session timeout).
    pub(crate) session_uuid: Option<String>,
}

/// The step of mounting that failed, and its errno.
#[derive(Debug)]
pub(crate) enum MountFailure {
    Create(Errno),
    ReadConf(Errno),
    SetOption(String, Errno),
    Init(Errno),
    SelectFs(Errno),
    Reclaim(Errno),
    Mount(Errno),
    /// Nothing answered within the timeout (an MDS that is down).
    TimedOut,
}

/// A mounted CephFS client (`struct ceph_mount_info`).
pub(crate) struct Mount {
    pub(crate) lib: &'static Lib,
    pub(crate) cm: Ptr<ffi::ceph_mount_info>,
}

impl Mount {
    /// [`Mount::connect`] within `spec.timeout` (and a little): libcephfs
    /// bounds its wait for the monitors, but not for an MDS that does not
    /// answer, and a mount cannot be cancelled. So it runs on a thread of its
    /// own; one that outlives the wait finishes (and unmounts) unobserved.
    pub(crate) fn connect_within(lib: &'static Lib, spec: MountSpec) -> Result<Mount, MountFailure> {
        let wait = spec.timeout + Duration::from_secs(2);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("cephfs-mount".into())
            .spawn(move || {
                let _ = tx.send(Mount::connect(lib, &spec));
            })
            .map_err(|_| MountFailure::Create(Errno(libc::EAGAIN)))?;
        rx.recv_timeout(wait).unwrap_or(Err(MountFailure::TimedOut))
    }

    /// Create a client, read the configuration, connect and mount
    /// `spec.path` of file system `spec.fs_name`.
    pub(crate) fn connect(lib: &'static Lib, spec: &MountSpec) -> Result<Mount, MountFailure> {
        let cstr = |s: &str| CString::new(s).map_err(|_| Errno(libc::EINVAL));
        let id = cstr(&spec.client_id).map_err(MountFailure::Create)?;
        let mut cm = std::ptr::null_mut();
        // SAFETY: `cm` is a valid out-pointer; `id` is NUL-terminated.
        check(unsafe { (lib.ceph_create)(&mut cm, id.as_ptr()) }).map_err(MountFailure::Create)?;
        // From here on the handle is released on every path (Drop).
        let m = Mount { lib, cm: Ptr(cm) };
        let conf = CString::new(spec.conf.as_os_str().as_encoded_bytes())
            .map_err(|_| MountFailure::ReadConf(Errno(libc::EINVAL)))?;
        // SAFETY: a live handle and a NUL-terminated path.
        check(unsafe { (lib.ceph_conf_read_file)(cm, conf.as_ptr()) }).map_err(MountFailure::ReadConf)?;
        let timeout_s = spec.timeout.as_secs().max(1).to_string();
        let mut options: Vec<(&str, String)> = vec![("client_mount_timeout", timeout_s)];
        options.extend(spec.options.iter().cloned());
        for (name, value) in &options {
            let (n, v) = (cstr(name), cstr(value));
            let (Ok(n), Ok(v)) = (n, v) else {
                return Err(MountFailure::SetOption(name.to_string(), Errno(libc::EINVAL)));
            };
            // SAFETY: a live handle and NUL-terminated strings.
            check(unsafe { (lib.ceph_conf_set)(cm, n.as_ptr(), v.as_ptr()) })
                .map_err(|e| MountFailure::SetOption(name.to_string(), e))?;
        }
        // SAFETY: a live, configured handle.
        check(unsafe { (lib.ceph_init)(cm) }).map_err(MountFailure::Init)?;
        let fs = cstr(&spec.fs_name).map_err(MountFailure::SelectFs)?;
        // SAFETY: as above.
        check(unsafe { (lib.ceph_select_filesystem)(cm, fs.as_ptr()) }).map_err(MountFailure::SelectFs)?;
        if let Some(uuid) = &spec.session_uuid {
            let u = cstr(uuid).map_err(MountFailure::Reclaim)?;
            // SAFETY: an initialised handle and a NUL-terminated uuid.
            let r = unsafe { (lib.ceph_start_reclaim)(cm, u.as_ptr(), ffi::CEPH_RECLAIM_RESET) };
            // ENOENT: no earlier session of this name, the usual case.
            if r < 0 && -r != libc::ENOENT {
                return Err(MountFailure::Reclaim(Errno(-r)));
            }
            // SAFETY: as above; both calls are valid before ceph_mount.
            unsafe {
                (lib.ceph_finish_reclaim)(cm);
                (lib.ceph_set_uuid)(cm, u.as_ptr());
            }
        }
        let path = cstr(&spec.path).map_err(MountFailure::Mount)?;
        // SAFETY: as above.
        check(unsafe { (lib.ceph_mount)(cm, path.as_ptr()) }).map_err(MountFailure::Mount)?;
        Ok(m)
    }

    fn cm(&self) -> *mut ffi::ceph_mount_info {
        self.cm.0
    }

    /// The file system's id in the cluster (its FSCID).
    pub(crate) fn fs_cid(&self) -> i64 {
        // SAFETY: a mounted handle.
        unsafe { (self.lib.ceph_get_fs_cid)(self.cm()) }
    }

    /// This client's id in the cluster (`client.N`), for messages.
    pub(crate) fn instance_id(&self) -> u64 {
        // SAFETY: a mounted handle.
        unsafe { (self.lib.ceph_get_instance_id)(self.cm()) }
    }

    /// The mounted directory.
    pub(crate) fn root(self: &Arc<Self>) -> Result<InodeRef, Errno> {
        let mut out = std::ptr::null_mut();
        // SAFETY: a mounted handle and a valid out-pointer.
        check(unsafe { (self.lib.ceph_ll_lookup_root)(self.cm(), &mut out) })?;
        Ok(InodeRef { m: self.clone(), inode: Ptr(out) })
    }

    /// The inode `vino`, from the client's cache or asked of the MDS.
    pub(crate) fn inode(self: &Arc<Self>, vino: vinodeno_t) -> Result<InodeRef, Errno> {
        let mut out = std::ptr::null_mut();
        // SAFETY: as above.
        check(unsafe { (self.lib.ceph_ll_lookup_vino)(self.cm(), vino, &mut out) })?;
        Ok(InodeRef { m: self.clone(), inode: Ptr(out) })
    }

    /// Credentials for one call.
    pub(crate) fn perms(&self, cred: &Credentials) -> Perms {
        // libcephfs keeps a pointer to the group list (it does not copy it):
        // the list lives in the `Perms`, on the heap, until it is destroyed.
        let mut groups: Box<[libc::gid_t]> = cred.groups.clone().into_boxed_slice();
        // SAFETY: the list outlives the UserPerm (both live in `Perms`, and
        // the UserPerm is destroyed first).
        let p = unsafe {
            (self.lib.ceph_userperm_new)(cred.uid, cred.gid, groups.len() as c_int, groups.as_mut_ptr())
        };
        Perms { lib: self.lib, p: Ptr(p), _groups: groups }
    }

    /// Flush everything this client has buffered and wait for it.
    pub(crate) fn sync_all(&self) -> Result<(), Errno> {
        // SAFETY: a mounted handle.
        check(unsafe { (self.lib.ceph_sync_fs)(self.cm()) }).map(drop)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and nothing borrowed from it is left
        // (every wrapper borrows the mount). Unmount fails on a handle that
        // was never mounted; release works either way.
        unsafe {
            (self.lib.ceph_unmount)(self.cm());
            (self.lib.ceph_release)(self.cm());
        }
    }
}

/// Credentials (`UserPerm`) for the calls of one request.
pub(crate) struct Perms {
    lib: &'static Lib,
    p: Ptr<ffi::UserPerm>,
    /// The supplementary groups `p` points to.
    _groups: Box<[libc::gid_t]>,
}

impl Perms {
    fn ptr(&self) -> *const ffi::UserPerm {
        self.p.0
    }
}

impl Drop for Perms {
    fn drop(&mut self) {
        // SAFETY: made by ceph_userperm_new, destroyed once.
        unsafe { (self.lib.ceph_userperm_destroy)(self.p.0) };
    }
}

/// A counted reference to an inode of the client's cache (`ceph_ll_put` on drop).
pub(crate) struct InodeRef {
    m: Arc<Mount>,
    inode: Ptr<ffi::Inode>,
}

/// A new object and its attributes.
pub(crate) struct Made {
    pub(crate) inode: InodeRef,
    pub(crate) stx: ceph_statx,
}

/// A C string for a name the caller has already checked (no NUL).
fn name_c(name: &[u8]) -> Result<CString, Errno> {
    CString::new(name).map_err(|_| Errno(libc::EINVAL))
}

impl InodeRef {
    fn lib(&self) -> &'static Lib {
        self.m.lib
    }

    fn raw(&self) -> *mut ffi::Inode {
        self.inode.0
    }

    /// Attributes, from the cache when the client's capabilities cover them.
    pub(crate) fn getattr(&self, perms: &Perms) -> Result<ceph_statx, Errno> {
        let flags = 0;
        let mut stx = ceph_statx::default();
        // SAFETY: a live inode reference and a valid out-pointer.
        check(unsafe {
            (self.lib().ceph_ll_getattr)(
                self.m.cm(),
                self.raw(),
                &mut stx,
                ffi::CEPH_STATX_BASIC_STATS,
                flags,
                perms.ptr(),
            )
        })?;
        Ok(stx)
    }

    /// Wait until every change of this inode made through this client
    /// (metadata requests, attribute changes it holds back, and unless
    /// `data_only` its buffered data too) is safe in the MDS's journal and on
    /// the OSDs.
    pub(crate) fn sync(&self, data_only: bool) -> Result<(), Errno> {
        // SAFETY: a live inode reference.
        check(unsafe { (self.lib().ceph_ll_sync_inode)(self.m.cm(), self.raw(), data_only as c_int) })
            .map(drop)
    }

    pub(crate) fn setattr(&self, stx: &mut ceph_statx, mask: c_int, perms: &Perms) -> Result<(), Errno> {
        // SAFETY: as above.
        check(unsafe { (self.lib().ceph_ll_setattr)(self.m.cm(), self.raw(), stx, mask, perms.ptr()) })
            .map(drop)
    }

    pub(crate) fn lookup(&self, name: &[u8], perms: &Perms) -> Result<Made, Errno> {
        let c = name_c(name)?;
        let mut out = std::ptr::null_mut();
        let mut stx = ceph_statx::default();
        // SAFETY: a live directory reference, a NUL-terminated name, valid out-pointers.
        check(unsafe {
            (self.lib().ceph_ll_lookup)(
                self.m.cm(),
                self.raw(),
                c.as_ptr(),
                &mut out,
                &mut stx,
                ffi::CEPH_STATX_BASIC_STATS,
                0,
                perms.ptr(),
            )
        })?;
        Ok(Made { inode: InodeRef { m: self.m.clone(), inode: Ptr(out) }, stx })
    }

    pub(crate) fn mknod(
        &self,
        name: &[u8],
        mode: u32,
        rdev: libc::dev_t,
        perms: &Perms,
    ) -> Result<Made, Errno> {
        let c = name_c(name)?;
        let mut out = std::ptr::null_mut();
        let mut stx = ceph_statx::default();
        // SAFETY: as above.
        check(unsafe {
            (self.lib().ceph_ll_mknod)(
                self.m.cm(),
                self.raw(),
                c.as_ptr(),
                mode as libc::mode_t,
                rdev,
                &mut out,
                &mut stx,
                ffi::CEPH_STATX_BASIC_STATS,
                0,
                perms.ptr(),
            )
        })?;
        Ok(Made { inode: InodeRef { m: self.m.clone(), inode: Ptr(out) }, stx })
    }

    pub(crate) fn mkdir(&self, name: &[u8], mode: u32, perms: &Perms) -> Result<Made, Errno> {
        let c = name_c(name)?;
        let mut out = std::ptr::null_mut();
        let mut stx = ceph_statx::default();
        // SAFETY: as above.
        check(unsafe {
            (self.lib().ceph_ll_mkdir)(
                self.m.cm(),
                self.raw(),
                c.as_ptr(),
                mode as libc::mode_t,
                &mut out,
                &mut stx,
                ffi::CEPH_STATX_BASIC_STATS,
                0,
                perms.ptr(),
            )
        })?;
        Ok(Made { inode: InodeRef { m: self.m.clone(), inode: Ptr(out) }, stx })
    }

    pub(crate) fn symlink(&self, name: &[u8], target: &CStr, perms: &Perms) -> Result<Made, Errno> {
        let c = name_c(name)?;
        let mut out = std::ptr::null_mut();
        let mut stx = ceph_statx::default();
        // SAFETY: as above.
        check(unsafe {
            (self.lib().ceph_ll_symlink)(
                self.m.cm(),
                self.raw(),
                c.as_ptr(),
                target.as_ptr(),
                &mut out,
                &mut stx,
                ffi::CEPH_STATX_BASIC_STATS,
                0,
                perms.ptr(),
            )
        })?;
        Ok(Made { inode: InodeRef { m: self.m.clone(), inode: Ptr(out) }, stx })
    }

    /// Make a hard link to `self` named `name` in `dir`.
    pub(crate) fn link_into(&self, dir: &InodeRef, name: &[u8], perms: &Perms) -> Result<(), Errno> {
        let c = name_c(name)?;
        // SAFETY: live references and a NUL-terminated name.
        check(unsafe {
            (self.lib().ceph_ll_link)(self.m.cm(), self.raw(), dir.raw(), c.as_ptr(), perms.ptr())
        })
        .map(drop)
    }

    pub(crate) fn unlink(&self, name: &[u8], perms: &Perms) -> Result<(), Errno> {
        let c = name_c(name)?;
        // SAFETY: as above.
        check(unsafe { (self.lib().ceph_ll_unlink)(self.m.cm(), self.raw(), c.as_ptr(), perms.ptr()) })
            .map(drop)
    }

    pub(crate) fn rmdir(&self, name: &[u8], perms: &Perms) -> Result<(), Errno> {
        let c = name_c(name)?;
        // SAFETY: as above.
        check(unsafe { (self.lib().ceph_ll_rmdir)(self.m.cm(), self.raw(), c.as_ptr(), perms.ptr()) })
            .map(drop)
    }

    pub(crate) fn rename(
        &self,
        name: &[u8],
        to_dir: &InodeRef,
        to_name: &[u8],
        perms: &Perms,
    ) -> Result<(), Errno> {
        let (a, b) = (name_c(name)?, name_c(to_name)?);
        // SAFETY: as above.
        check(unsafe {
            (self.lib().ceph_ll_rename)(
                self.m.cm(),
                self.raw(),
                a.as_ptr(),
                to_dir.raw(),
                b.as_ptr(),
                perms.ptr(),
            )
        })
        .map(drop)
    }

    /// The target of a symlink, into `buf`; returns its length (which may
    /// exceed nothing: libcephfs truncates to the buffer).
    pub(crate) fn readlink(&self, buf: &mut [u8], perms: &Perms) -> Result<usize, Errno> {
        // SAFETY: the buffer is valid for its length.
        let n = check(unsafe {
            (self.lib().ceph_ll_readlink)(
                self.m.cm(),
                self.raw(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                perms.ptr(),
            )
        })?;
        Ok(n as usize)
    }

    pub(crate) fn open(&self, flags: c_int, perms: &Perms) -> Result<File, Errno> {
        let mut fh = std::ptr::null_mut();
        // SAFETY: a live inode reference and a valid out-pointer.
        check(unsafe { (self.lib().ceph_ll_open)(self.m.cm(), self.raw(), flags, &mut fh, perms.ptr()) })?;
        Ok(File { m: self.m.clone(), fh: Ptr(fh), closed: false })
    }

    pub(crate) fn opendir(&self, perms: &Perms) -> Result<DirStream, Errno> {
        let mut d = std::ptr::null_mut();
        // SAFETY: as above.
        check(unsafe { (self.lib().ceph_ll_opendir)(self.m.cm(), self.raw(), &mut d, perms.ptr()) })?;
        Ok(DirStream { m: self.m.clone(), d: Ptr(d) })
    }

    pub(crate) fn statfs(&self) -> Result<libc::statvfs, Errno> {
        // SAFETY: zeroed statvfs is valid; filled by the call.
        let mut sv: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        check(unsafe { (self.lib().ceph_ll_statfs)(self.m.cm(), self.raw(), &mut sv) })?;
        Ok(sv)
    }
}

impl Drop for InodeRef {
    fn drop(&mut self) {
        // SAFETY: one reference taken, one put.
        unsafe { (self.lib().ceph_ll_put)(self.m.cm(), self.raw()) };
    }
}

/// An open file (`Fh`), closed on drop unless [`File::close`] was called.
pub(crate) struct File {
    m: Arc<Mount>,
    fh: Ptr<ffi::Fh>,
    closed: bool,
}

impl File {
    /// Read into spare capacity (`MaybeUninit`), initialising what it returns.
    pub(crate) fn read_uninit(
        &self,
        offset: u64,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Result<usize, Errno> {
        // SAFETY: libcephfs only writes into the buffer, at most its length,
        // and returns how many bytes it wrote.
        let n = check(unsafe {
            (self.m.lib.ceph_ll_read)(
                self.m.cm(),
                self.fh.0,
                offset as i64,
                buf.len() as u64,
                buf.as_mut_ptr().cast(),
            )
        })?;
        Ok(n as usize)
    }

    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        // SAFETY: as above.
        let n = check(unsafe {
            (self.m.lib.ceph_ll_write)(
                self.m.cm(),
                self.fh.0,
                offset as i64,
                data.len() as u64,
                data.as_ptr().cast(),
            )
        })?;
        Ok(n as usize)
    }

    pub(crate) fn fsync(&self, data_only: bool) -> Result<(), Errno> {
        // SAFETY: an open file.
        check(unsafe { (self.m.lib.ceph_ll_fsync)(self.m.cm(), self.fh.0, data_only as c_int) }).map(drop)
    }

    pub(crate) fn getlk(&self, fl: &mut libc::flock, owner: u64) -> Result<(), Errno> {
        // SAFETY: an open file and a valid flock.
        check(unsafe { (self.m.lib.ceph_ll_getlk)(self.m.cm(), self.fh.0, fl, owner) }).map(drop)
    }

    pub(crate) fn setlk(&self, fl: &mut libc::flock, owner: u64, wait: bool) -> Result<(), Errno> {
        // SAFETY: as above.
        check(unsafe { (self.m.lib.ceph_ll_setlk)(self.m.cm(), self.fh.0, fl, owner, wait as c_int) })
            .map(drop)
    }

    /// Close, reporting a write-back error libcephfs kept for this file.
    pub(crate) fn close(mut self) -> Result<(), Errno> {
        self.closed = true;
        // SAFETY: an open file, closed once.
        check(unsafe { (self.m.lib.ceph_ll_close)(self.m.cm(), self.fh.0) }).map(drop)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if !self.closed {
            // SAFETY: as in `close`.
            let r = unsafe { (self.m.lib.ceph_ll_close)(self.m.cm(), self.fh.0) };
            if r < 0 {
                tracing::warn!("closing a CephFS file failed: {}", Errno(-r));
            }
        }
    }
}

/// One entry of a directory stream.
pub(crate) struct Entry {
    pub(crate) name: Vec<u8>,
    /// The stream's position after this entry.
    pub(crate) next: i64,
    pub(crate) stx: ceph_statx,
    pub(crate) inode: Option<InodeRef>,
}

/// An open directory (`ceph_dir_result`).
pub(crate) struct DirStream {
    m: Arc<Mount>,
    d: Ptr<ffi::ceph_dir_result>,
}

impl DirStream {
    pub(crate) fn seek(&self, pos: i64) {
        // SAFETY: an open directory stream.
        unsafe { (self.m.lib.ceph_seekdir)(self.m.cm(), self.d.0, pos) }
    }

    /// The next entry, with its attributes and (with `plus`) an inode
    /// reference; `None` at the end.
    pub(crate) fn next(&self, plus: bool) -> Result<Option<Entry>, Errno> {
        // SAFETY: zeroed dirent is valid; filled by the call.
        let mut de: libc::dirent = unsafe { std::mem::zeroed() };
        let mut stx = ceph_statx::default();
        let mut out: *mut ffi::Inode = std::ptr::null_mut();
        let (want, outp) = if plus {
            (ffi::CEPH_STATX_BASIC_STATS, &mut out as *mut *mut ffi::Inode)
        } else {
            (0, std::ptr::null_mut())
        };
        // SAFETY: valid out-pointers (or null for the inode, which libcephfs allows).
        let r = check(unsafe {
            (self.m.lib.ceph_readdirplus_r)(self.m.cm(), self.d.0, &mut de, &mut stx, want, 0, outp)
        })?;
        if r == 0 {
            return Ok(None);
        }
        // SAFETY: libcephfs NUL-terminates d_name.
        let name = unsafe { CStr::from_ptr(de.d_name.as_ptr()) }.to_bytes().to_vec();
        // SAFETY: an open directory stream.
        let next = unsafe { (self.m.lib.ceph_telldir)(self.m.cm(), self.d.0) };
        let inode = (plus && !out.is_null()).then(|| InodeRef { m: self.m.clone(), inode: Ptr(out) });
        if !plus {
            stx.stx_ino = de.d_ino;
        }
        Ok(Some(Entry { name, next, stx, inode }))
    }
}

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: opened by ceph_ll_opendir, released once.
        unsafe { (self.m.lib.ceph_ll_releasedir)(self.m.cm(), self.d.0) };
    }
}
