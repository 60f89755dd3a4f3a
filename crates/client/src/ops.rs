//! NFSv3 operations as an async trait: the contract between the wire client
//! and everything built on it (the caching layer, the FUSE mount, the tools
//! and benchmarks).
//!
//! Every call carries the caller's [`Cred`] (sent as AUTH_SYS), so one
//! client can act for many local users, as a FUSE mount must. Results are
//! the RFC 1813 success bodies from [`eagernfs_proto::nfs3`]; every failure
//! is an [`NfsError`] that maps to an errno a person understands.
//!
//! The trait uses `impl Future` returns, so it is for generic code
//! (`C: NfsOps`), not trait objects.

use bytes::Bytes;
use eagernfs_proto::nfs3::*;
use std::future::Future;

/// The local user a call is made for (sent as AUTH_SYS).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups; only the first 16 fit in AUTH_SYS.
    pub groups: Vec<u32>,
}

impl Cred {
    /// The superuser.
    pub fn root() -> Self {
        Cred::default()
    }

    /// The identity of this process (real uid/gid and supplementary groups).
    pub fn current_process() -> Self {
        // SAFETY: getuid/getgid cannot fail; getgroups is called with a
        // buffer of the size it reports, and its result is checked.
        unsafe {
            let uid = libc::getuid();
            let gid = libc::getgid();
            let n = libc::getgroups(0, std::ptr::null_mut());
            let mut groups = vec![0 as libc::gid_t; n.max(0) as usize];
            let got = if n > 0 { libc::getgroups(n, groups.as_mut_ptr()) } else { 0 };
            groups.truncate(got.max(0) as usize);
            groups.retain(|g| *g != gid);
            Cred { uid, gid, groups }
        }
    }
}

/// Why an NFS call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NfsError {
    /// The server answered with an NFSv3 error status.
    #[error("NFS server error: {0:?}")]
    Nfs(Nfsstat3),
    /// The server refused the call at the RPC level (program, version,
    /// procedure, garbage arguments, authentication).
    #[error("RPC error: {0}")]
    Rpc(String),
    /// A soft mount gave up after `retrans` retransmissions.
    #[error("server not responding (timed out)")]
    TimedOut,
    /// The connection failed and could not be re-established (soft mounts),
    /// or the client was shut down.
    #[error("connection to the server failed: {0}")]
    Connection(String),
    /// The server's reply did not decode.
    #[error("malformed reply from server: {0}")]
    BadReply(String),
    /// The MOUNT protocol refused the export.
    #[error("mount failed: {0}")]
    Mount(String),
    /// The server's lock manager is out of locks, or cannot monitor us
    /// (NLM4_DENIED_NOLOCKS).
    #[error("the server's lock manager refused: no locks available")]
    NoLocks,
    /// The server answered with an NFSv4 status that NFSv3 has no word
    /// for (NFS4ERR_SHARE_DENIED, NFS4ERR_FILE_OPEN, …). Statuses both
    /// versions share are [`NfsError::Nfs`], so callers check one variant.
    #[error("NFS server error: NFS4ERR_{0:?}")]
    Nfs4(eagernfs_proto::nfs4::Nfsstat4),
}

impl NfsError {
    /// The errno a local program should see for this error.
    pub fn errno(&self) -> i32 {
        match self {
            NfsError::Nfs(s) => nfsstat_errno(*s),
            NfsError::Rpc(_) => libc::EIO,
            NfsError::TimedOut => libc::EIO,
            NfsError::Connection(_) => libc::EIO,
            NfsError::BadReply(_) => libc::EIO,
            NfsError::Mount(_) => libc::EACCES,
            NfsError::NoLocks => libc::ENOLCK,
            NfsError::Nfs4(s) => nfsstat4_errno(*s),
        }
    }
}

/// The errno Linux's NFSv4 client gives a status NFSv3 does not have
/// (`nfs4_map_errors`; stateid and session trouble the client could not
/// recover from is EIO).
pub fn nfsstat4_errno(s: eagernfs_proto::nfs4::Nfsstat4) -> i32 {
    use eagernfs_proto::nfs4::Nfsstat4::*;
    match s {
        ShareDenied | Access => libc::EACCES,
        FileOpen => libc::EBUSY,
        Symlink => libc::ELOOP,
        Wrongsec | WrongCred | Perm => libc::EPERM,
        Badowner | Badname | Badchar | WrongType | Inval | Attrnotsupp => libc::EINVAL,
        MinorVersMismatch => libc::EPROTONOSUPPORT,
        Denied | Locked | Delay | Grace => libc::EAGAIN,
        Deadlock => libc::EDEADLK,
        LockRange | LockNotsupp | Notsupp => libc::EOPNOTSUPP,
        Nametoolong => libc::ENAMETOOLONG,
        Noent => libc::ENOENT,
        Exist => libc::EEXIST,
        Notdir => libc::ENOTDIR,
        Isdir => libc::EISDIR,
        Stale | Fhexpired => libc::ESTALE,
        Nospc => libc::ENOSPC,
        Rofs => libc::EROFS,
        _ => libc::EIO,
    }
}

impl From<Nfsstat3> for NfsError {
    fn from(s: Nfsstat3) -> Self {
        NfsError::Nfs(s)
    }
}

/// Map an NFSv3 status to the errno Linux's client uses for it.
pub fn nfsstat_errno(s: Nfsstat3) -> i32 {
    use Nfsstat3::*;
    match s {
        Ok => 0,
        Perm => libc::EPERM,
        Noent => libc::ENOENT,
        Io => libc::EIO,
        Nxio => libc::ENXIO,
        Acces => libc::EACCES,
        Exist => libc::EEXIST,
        Xdev => libc::EXDEV,
        Nodev => libc::ENODEV,
        Notdir => libc::ENOTDIR,
        Isdir => libc::EISDIR,
        Inval => libc::EINVAL,
        Fbig => libc::EFBIG,
        Nospc => libc::ENOSPC,
        Rofs => libc::EROFS,
        Mlink => libc::EMLINK,
        Nametoolong => libc::ENAMETOOLONG,
        Notempty => libc::ENOTEMPTY,
        Dquot => libc::EDQUOT,
        Stale => libc::ESTALE,
        Remote => libc::EREMOTE,
        // Linux reports a handle it cannot use as stale.
        Badhandle => libc::ESTALE,
        NotSync => libc::EINVAL,
        BadCookie => libc::EINVAL,
        Notsupp => libc::EOPNOTSUPP,
        Toosmall => libc::EINVAL,
        Serverfault => libc::EIO,
        Badtype => libc::EINVAL,
        Jukebox => libc::EAGAIN,
    }
}

/// Result of an NFS call.
pub type NfsResult<T> = Result<T, NfsError>;

/// Every NFSv3 procedure (RFC 1813 §3.3) as an async call.
///
/// Implementations must allow many calls at once from many tasks (the
/// wire client pipelines them). A failure status is returned as
/// `Err(NfsError::Nfs(status))`; the attributes a failure reply carries are
/// dropped (callers that care re-fetch them).
pub trait NfsOps: Send + Sync + 'static {
    /// The root handle of the mounted export.
    fn root(&self) -> NfsFh3;

    fn null(&self) -> impl Future<Output = NfsResult<()>> + Send;
    fn getattr(&self, cred: &Cred, fh: &NfsFh3) -> impl Future<Output = NfsResult<Fattr3>> + Send;
    fn setattr(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        attrs: Sattr3,
        guard: Option<Nfstime3>,
    ) -> impl Future<Output = NfsResult<WccData>> + Send;
    fn lookup(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
    ) -> impl Future<Output = NfsResult<Lookup3ResOk>> + Send;
    fn access(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        mask: u32,
    ) -> impl Future<Output = NfsResult<Access3ResOk>> + Send;
    fn readlink(&self, cred: &Cred, fh: &NfsFh3) -> impl Future<Output = NfsResult<Readlink3ResOk>> + Send;
    fn read(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        count: u32,
    ) -> impl Future<Output = NfsResult<Read3ResOk>> + Send;
    fn write(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        stable: StableHow,
    ) -> impl Future<Output = NfsResult<Write3ResOk>> + Send;
    fn create(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
    ) -> impl Future<Output = NfsResult<Create3ResOk>> + Send;
    fn mkdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
    ) -> impl Future<Output = NfsResult<Mkdir3ResOk>> + Send;
    fn symlink(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        target: &[u8],
        attrs: Sattr3,
    ) -> impl Future<Output = NfsResult<Symlink3ResOk>> + Send;
    fn mknod(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        what: Mknoddata3,
    ) -> impl Future<Output = NfsResult<Mknod3ResOk>> + Send;
    fn remove(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
    ) -> impl Future<Output = NfsResult<WccData>> + Send;
    fn rmdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
    ) -> impl Future<Output = NfsResult<WccData>> + Send;
    fn rename(
        &self,
        cred: &Cred,
        from_dir: &NfsFh3,
        from_name: &[u8],
        to_dir: &NfsFh3,
        to_name: &[u8],
    ) -> impl Future<Output = NfsResult<Rename3ResOk>> + Send;
    fn link(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        dir: &NfsFh3,
        name: &[u8],
    ) -> impl Future<Output = NfsResult<Link3ResOk>> + Send;
    fn readdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        count: u32,
    ) -> impl Future<Output = NfsResult<Readdir3ResOk>> + Send;
    fn readdirplus(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        dircount: u32,
        maxcount: u32,
    ) -> impl Future<Output = NfsResult<Readdirplus3ResOk>> + Send;
    fn fsstat(&self, cred: &Cred, fh: &NfsFh3) -> impl Future<Output = NfsResult<Fsstat3ResOk>> + Send;
    fn fsinfo(&self, cred: &Cred, fh: &NfsFh3) -> impl Future<Output = NfsResult<Fsinfo3ResOk>> + Send;
    fn pathconf(&self, cred: &Cred, fh: &NfsFh3) -> impl Future<Output = NfsResult<Pathconf3ResOk>> + Send;
    fn commit(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        count: u32,
    ) -> impl Future<Output = NfsResult<Commit3ResOk>> + Send;
}
