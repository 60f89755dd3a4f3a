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
//!
//! Beyond NFSv3's procedures the trait offers a few *capabilities*: what
//! the caching layer needs at an open, a close, a create or a remove, for
//! a client that can do it in fewer round trips (NFSv4's opens and
//! COMPOUNDs) to do so. Each has a default in terms of the NFSv3 calls,
//! which is exactly what an NFSv3 client sends, so the cache is written
//! once for both versions (and for the fake servers in the tests).

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

/// How a file is opened: for reading, writing or both (NFSv4's share
/// access; an NFSv3 client has no opens and ignores it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenAccess {
    Read,
    Write,
    Both,
}

impl OpenAccess {
    /// The access `open(2)` flags ask for.
    pub fn of_flags(flags: i32) -> OpenAccess {
        match flags & libc::O_ACCMODE {
            libc::O_RDONLY => OpenAccess::Read,
            libc::O_WRONLY => OpenAccess::Write,
            _ => OpenAccess::Both,
        }
    }
}

/// What the caching layer asks for when a file is opened
/// ([`NfsOps::open_file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenWant {
    /// The access the open is for.
    pub access: OpenAccess,
    /// ACCESS3 bits to ask the server about for the caller (the check an
    /// open makes), if the answer is not known already.
    pub check: Option<u32>,
    /// Fresh attributes (close-to-open's check that the file is unchanged).
    pub attrs: bool,
    /// Read up to this many bytes from the start of the file in the same
    /// round trip (a small file about to be read whole), and end the open
    /// with it if nothing else needs it: a client that cannot do that
    /// cheaply reads nothing ([`FileOpened::data`] is `None`).
    pub read_whole: Option<u32>,
}

/// What [`NfsOps::open_file`] (or [`NfsOps::create_open`]) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOpened {
    /// The server holds an open for the caller now: end it with
    /// [`NfsOps::close_file`] (or [`NfsOps::write_close`]). Always false
    /// for NFSv3, which has no opens.
    pub held: bool,
    /// The file's attributes, when asked for (or brought anyway).
    pub attrs: Option<Fattr3>,
    /// Of [`OpenWant::check`]'s bits, those the server granted.
    pub access: Option<u32>,
    /// [`OpenWant::read_whole`]'s bytes from offset 0, and whether they
    /// reach the end of the file.
    pub data: Option<(Bytes, bool)>,
    /// The server keeps the file while this open is held even if its last
    /// name is removed (NFSv4's OPEN4_RESULT_PRESERVE_UNLINKED, RFC 8881
    /// §18.16.4): removing it needs no hidden name.
    pub preserve_unlinked: bool,
}

/// One name of a [`NfsOps::remove_names`] batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameToRemove {
    pub name: Bytes,
    /// What it names is a directory (see [`NfsOps::remove_known`]).
    pub is_dir: bool,
    /// The object, when this is its last name: its delegation goes back in
    /// the same call (see [`NfsOps::remove_last_name`]).
    pub last_of: Option<NfsFh3>,
}

/// A small file for [`NfsOps::read_files`]: read from offset 0, with
/// the caller's access checked as an open would check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToRead {
    pub fh: NfsFh3,
    /// Bytes to read from offset 0 (the whole file if it is no longer).
    pub count: u32,
    /// ACCESS3 bits to ask about for the caller.
    pub check: u32,
}

/// What [`NfsOps::read_files`] brought for one of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    /// Which file: its index in the list given.
    pub index: usize,
    /// Of [`FileToRead::check`]'s bits, those the server granted.
    pub access: Option<u32>,
    /// The file's attributes, from after its open.
    pub attrs: Option<Fattr3>,
    /// Its bytes from offset 0, and whether they reach its end.
    pub data: Option<(Bytes, bool)>,
    /// The server granted a delegation of it, held now: the attributes and
    /// data stay true until it is recalled.
    pub delegated: bool,
}

/// What [`NfsOps::write_close`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteClosed {
    /// The WRITE's answer.
    pub write: Write3ResOk,
    /// The SETATTR's answer, if attributes were given (an error does not
    /// undo the write).
    pub setattr: Option<NfsResult<WccData>>,
    /// The open was ended with it (else it is still held).
    pub closed: bool,
}

/// What [`NfsOps::create_written`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedWritten {
    /// The new file's handle.
    pub obj: NfsFh3,
    /// Its attributes after the write and the changes.
    pub attrs: Option<Fattr3>,
    /// The directory's attributes before (if known) and after.
    pub dir_wcc: WccData,
}

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

    // ----- capabilities (see the module docs): each default is what an
    // NFSv3 client sends.

    /// Open `fh` for the caching layer: the access check and fresh
    /// attributes `want` asks for, an open held on the server if the
    /// protocol has them, and the file's first bytes if asked and cheap.
    /// Default: ACCESS if a check is asked (its attributes are the fresh
    /// ones), else GETATTR if attributes are; no open, no data.
    fn open_file(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        want: OpenWant,
    ) -> impl Future<Output = NfsResult<FileOpened>> + Send {
        async move {
            let mut out = FileOpened::default();
            if let Some(mask) = want.check {
                let r = self.access(cred, fh, mask).await?;
                out.access = Some(r.access);
                out.attrs = r.obj_attributes;
            }
            if want.attrs && out.attrs.is_none() {
                out.attrs = Some(self.getattr(cred, fh).await?);
            }
            Ok(out)
        }
    }

    /// End an open [`NfsOps::open_file`] or [`NfsOps::create_open`] said is
    /// held (one per such open, with its access). Default: nothing.
    fn close_file(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        access: OpenAccess,
    ) -> impl Future<Output = NfsResult<()>> + Send {
        let _ = (cred, fh, access);
        async { Ok(()) }
    }

    /// Create a regular file and open it for `access`. Default: CREATE
    /// (nothing held).
    fn create_open(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
        access: OpenAccess,
    ) -> impl Future<Output = NfsResult<(Create3ResOk, FileOpened)>> + Send {
        let _ = access;
        async move {
            let r = self.create(cred, dir, name, how).await?;
            let opened = FileOpened { attrs: r.obj_attributes, ..FileOpened::default() };
            Ok((r, opened))
        }
    }

    /// Write `data` at `offset` on stable storage (FILE_SYNC), then set
    /// `attrs` (the changes held for the close), and end the held open of
    /// `close`'s access if given and nothing else needs it: a small file's
    /// whole write-back at its close. An `Err` is the WRITE's (nothing else
    /// was done). Default: WRITE FILE_SYNC, then SETATTR; nothing closed.
    fn write_close(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        attrs: Option<Sattr3>,
        close: Option<OpenAccess>,
    ) -> impl Future<Output = NfsResult<WriteClosed>> + Send {
        let _ = close;
        async move {
            let write = self.write(cred, fh, offset, data, StableHow::FileSync).await?;
            let setattr = match attrs {
                Some(a) => Some(self.setattr(cred, fh, a, None).await),
                None => None,
            };
            Ok(WriteClosed { write, setattr, closed: false })
        }
    }

    /// Whether [`NfsOps::create_written`] does its work in one call.
    /// Default: no.
    fn creates_written(&self) -> bool {
        false
    }

    /// Create regular file `name` in `dir` (failing if the name exists)
    /// with `attrs` (its mode), write `data` at offset 0 on stable storage,
    /// set `then` (times) and leave nothing open: a small file a program
    /// has made, written and closed already, made on the server in one
    /// call. For clients whose [`NfsOps::creates_written`] is true; the
    /// default does it in the usual calls (CREATE, WRITE FILE_SYNC,
    /// SETATTR).
    fn create_written(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        data: Bytes,
        then: Option<Sattr3>,
    ) -> impl Future<Output = NfsResult<CreatedWritten>> + Send {
        async move {
            let r = self.create(cred, dir, name, Createhow3::Guarded(attrs)).await?;
            let obj = r.obj.ok_or_else(|| NfsError::BadReply("CREATE without a handle".into()))?;
            if !data.is_empty() {
                self.write(cred, &obj, 0, data, StableHow::FileSync).await?;
            }
            if let Some(t) = then {
                self.setattr(cred, &obj, t, None).await?;
            }
            let attrs = Some(self.getattr(cred, &obj).await?);
            Ok(CreatedWritten { obj, attrs, dir_wcc: r.dir_wcc })
        }
    }

    /// Whether the server has promised that no other client changes `fh`
    /// until it says otherwise (an NFSv4 delegation, held and not
    /// recalled): its cached attributes and data need no revalidation, and
    /// an open for reading needs no call (its reads use the delegation).
    /// For a directory (a directory delegation): its names and listing
    /// need none either.
    /// Asked often: must answer at once. Default: never (NFSv3 has no such
    /// promise).
    fn delegated(&self, fh: &NfsFh3) -> bool {
        let _ = fh;
        false
    }

    /// Whether [`NfsOps::readdirplus_ahead`] may bring listings to keep.
    /// Default: no (without a delegation of a directory, close-to-open asks
    /// at its next read anyway).
    fn lists_ahead(&self) -> bool {
        false
    }

    /// The whole listing of directory `dir` (child of the directory with
    /// fileid `parent_fileid`) in one READDIRPLUS-shaped page, read ahead
    /// of a program walking a tree, with a delegation of `dir` asked for in
    /// passing: `None` unless the listing ended on the page and the
    /// delegation was granted (the listing is then good until a recall).
    /// Default: none.
    fn readdirplus_ahead(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        parent_fileid: u64,
        dircount: u32,
        maxcount: u32,
    ) -> impl Future<Output = NfsResult<Option<Readdirplus3ResOk>>> + Send {
        let _ = (cred, dir, parent_fileid, dircount, maxcount);
        async { Ok(None) }
    }

    /// How many files [`NfsOps::read_files`] reads in one round trip; 0 if
    /// it reads none. Default: 0 (without delegations an open must ask the
    /// server anyway, so reading ahead saves no round trip).
    fn read_files_max(&self) -> usize {
        0
    }

    /// Read several small files whole in one round trip, each under a
    /// delegation the server grants with it, for the caller to cache: what
    /// a program reading a directory's files in order opens next. Files
    /// this client holds opens of, or is opening, are left out; so is
    /// everything after a file the server refused (the round trip stops
    /// there). Default: reads nothing.
    fn read_files(
        &self,
        cred: &Cred,
        files: &[FileToRead],
    ) -> impl Future<Output = NfsResult<Vec<FileRead>>> + Send {
        let _ = (cred, files);
        async { Ok(Vec::new()) }
    }

    /// Whether the promise of [`NfsOps::delegated`] is a write delegation's:
    /// no other client may even open `fh`, so what this client writes may
    /// stay here until it is recalled (the caller must then write it back
    /// before the delegation goes back). Default: never.
    fn write_delegated(&self, fh: &NfsFh3) -> bool {
        let _ = fh;
        false
    }

    /// GETATTR of directory `dir` whose listing the caller keeps, to see
    /// whether it changed (close-to-open for directories): a directory
    /// looked at again is worth a delegation, which the NFSv4 client asks
    /// for in the same round trip (see [`NfsOps::delegated`]). Default:
    /// GETATTR.
    fn getattr_listed_dir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
    ) -> impl Future<Output = NfsResult<Fattr3>> + Send {
        self.getattr(cred, dir)
    }

    /// Remove `name` from `dir`, which the caller knows is a directory
    /// (`is_dir`) or is not, so the server need not check. Default: RMDIR
    /// or REMOVE.
    fn remove_known(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        is_dir: bool,
    ) -> impl Future<Output = NfsResult<WccData>> + Send {
        async move {
            if is_dir {
                self.rmdir(cred, dir, name).await
            } else {
                self.remove(cred, dir, name).await
            }
        }
    }

    /// [`NfsOps::remove_known`] of the last name of `victim` (a directory,
    /// or a file with one link that is not open here and has nothing
    /// unwritten): a client that holds a delegation of it gives it back in
    /// the same call, since once the object is gone its handle is stale
    /// and the delegation can be returned no more. Default: `remove_known`.
    fn remove_last_name(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        is_dir: bool,
        victim: &NfsFh3,
    ) -> impl Future<Output = NfsResult<WccData>> + Send {
        let _ = victim;
        self.remove_known(cred, dir, name, is_dir)
    }

    /// Remove `names` from `dir`, in order, each as `remove_known` (or
    /// `remove_last_name` when it says whose last name it is), in as few
    /// calls as the protocol allows. One result per name, in order; `None`:
    /// not tried, because an earlier name of the same call failed (the
    /// caller sends it again alone). Default: one call per name.
    fn remove_names(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        names: &[NameToRemove],
    ) -> impl Future<Output = Vec<Option<NfsResult<WccData>>>> + Send {
        async move {
            let mut out = Vec::with_capacity(names.len());
            for n in names {
                let r = match &n.last_of {
                    Some(victim) => self.remove_last_name(cred, dir, &n.name, n.is_dir, victim).await,
                    None => self.remove_known(cred, dir, &n.name, n.is_dir).await,
                };
                out.push(Some(r));
            }
            out
        }
    }
}
