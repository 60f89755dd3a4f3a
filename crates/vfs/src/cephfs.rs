//! A directory of a CephFS, exported as a [`Backend`] through libcephfs's
//! low-level API (`ceph_ll_*`).
//!
//! The server becomes one CephFS client (one MDS session) per export, the
//! way ganesha's FSAL_CEPH and ceph-fuse are. libcephfs is loaded at run
//! time ([`ffi`](self::ffi)): the `eagernfs` binary runs on machines without
//! Ceph, and a CephFS export there fails with a message naming the package.
//!
//! # Handles
//! (file-system id, inode, snapshot) with a keyed MAC ([`handle`]): valid
//! across restarts and on every server sharing the key. A handle resolves
//! with `ceph_ll_lookup_vino` (the client's cache, else the MDS).
//!
//! # Whose permissions
//! Namespace calls (lookup, create, remove, rename, link, chmod/chown/utimes)
//! pass the caller's uid, gid and groups (`UserPerm`) and libcephfs checks
//! them as the kernel would. Files for READ, WRITE and COMMIT are opened
//! once by the server and kept open ([`files`]); those calls, READDIR's
//! "plus" part, truncation and ACCESS check the mode bits in user space with
//! [`perm`], with knfsd's owner override, exactly as the local backend does.
//! POSIX ACLs are therefore not honoured on those paths.
//!
//! # Caching and durability
//! libcephfs caches attributes, names and file data under the capabilities
//! the MDS grants; the MDS recalls them before another client could see a
//! difference, so the cache stays coherent and nothing here revalidates it.
//! WRITE UNSTABLE is a buffered `ceph_ll_write` (the client's object cache
//! writes back to the OSDs on its own); DATA_SYNC adds `ceph_ll_fsync` of the
//! data, FILE_SYNC of data and metadata; COMMIT is `ceph_ll_fsync`. The write
//! verifier is random per instance and changes whenever a sync, a close or
//! a write fails in a way that may have lost buffered data (including the
//! loss of the MDS session: libcephfs then answers `ESHUTDOWN`/`ENOTCONN`).
//! `async` exports skip every sync (unsafe, as for local directories).
//!
//! # A slow or dead cluster
//! Every call enters through a [`gate`](self::gate): when a call has waited
//! for the cluster longer than [`CephConfig::stall_after`], or too many wait
//! at once, new calls are answered [`FsError::Jukebox`] at once instead of
//! joining the wait.
//!
//! # Locks
//! [`FileLocks`] over `ceph_ll_setlk`/`getlk`: the lock manager's locks are
//! CephFS locks, which exclude every client of the file system. They belong
//! to the MDS session, so the backend remembers them ([`held`]) and a new
//! session takes them again.
//!
//! # Layout
//! - this file: configuration, opening, the [`Backend`] and [`FileLocks`] implementations.
//! - `ffi`: the library, loaded with `dlopen`, and its C declarations.
//! - `mount`: safe wrappers (mount, inode references, open files, directory streams).
//! - `handle`: handle layout and MAC.
//! - `files`: open files for I/O.
//! - `gate`: refusing calls while the cluster does not answer.
//! - `held`: the locks held, for a new session to take again.
//! - `source`: the `cephfs://` URL.

mod ffi;
mod files;
mod gate;
mod handle;
mod held;
mod mount;
mod source;

pub use ffi::{version, LoadError, LIBRARY};
pub use source::{is_cephfs_url, CephFsSource, SourceError, DEFAULT_CLIENT, DEFAULT_CONF, SCHEME};

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use siphasher::sip128::{Hasher128, SipHasher24};
use std::sync::atomic::{AtomicBool, Ordering};

use self::ffi::{ceph_statx, vinodeno_t, CEPH_NOSNAP};
use self::files::{FileCache, OpenFile, Vino};
use self::gate::Gate;
use self::handle::HandleCodec;
use self::held::LockRecord;
use self::mount::{Errno, InodeRef, Mount, MountFailure, MountSpec};
use crate::verifier::WriteVerifier;
use crate::{
    access, perm, Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FileLocks,
    FileType, FsError, FsProperties, FsResult, FsStat, LockConflict, LockRange, Lookup, NodeKind, ReadResult,
    SetAttr, SetTime, StableHow, Timestamp, Verifier, Wcc, WccAttr, WriteResult, NAME_MAX,
    SYMLINK_TARGET_BYTES_MAX,
};

/// The largest READ or WRITE done in one call (larger ones are answered short).
const IO_MAX_BYTES: usize = 16 << 20;
/// Files kept open for I/O.
const OPEN_FILES_MAX: usize = 1024;
/// The largest file CephFS allows by default (`max_file_size`, 1 TiB).
const MAX_FILE_SIZE: u64 = 1 << 40;

/// libcephfs's debug subsystems whose messages are not kept in memory
/// (`debug_* = 0/0`; the defaults gather up to level 5 or 10).
const QUIET_SUBSYSTEMS: &[&str] = &[
    "debug_client",
    "debug_objectcacher",
    "debug_objecter",
    "debug_ms",
    "debug_monc",
    "debug_mgrc",
    "debug_auth",
    "debug_crypto",
    "debug_finisher",
    "debug_asok",
    "debug_buffer",
    "debug_filer",
    "debug_striper",
    "debug_timer",
    "debug_context",
    "debug_perfcounter",
    "debug_throttle",
    "debug_journaler",
    "debug_rados",
    "debug_none",
    "debug_lockdep",
    "debug_heartbeatmap",
    "debug_optracker",
    "debug_tp",
];

/// How to export a CephFS directory.
#[derive(Clone, Debug)]
pub struct CephConfig {
    /// Which cluster, client, file system and directory.
    pub source: CephFsSource,
    /// Key of the MAC in every handle; keep it secret and stable (handles
    /// survive a restart, or a move to another server, only with the same key).
    pub handle_key: [u8; 16],
    /// Skip every sync while answering as if it happened: **unsafe**.
    pub unsafe_async: bool,
    /// How long connecting (monitors, authentication, the MDS) may take at
    /// open before it fails.
    pub mount_timeout: Duration,
    /// A call waiting for the cluster this long marks it stalled: new calls
    /// are answered JUKEBOX until it returns.
    pub stall_after: Duration,
    /// Most calls of this export waiting inside libcephfs at once.
    pub max_calls_inside: usize,
    /// The libcephfs to load: a file name looked up on the library path
    /// ([`LIBRARY`]) or a path.
    pub library: String,
    /// libcephfs's object cache (`client_oc_size`): file data read and
    /// written. Half of it may hold UNSTABLE writes not yet sent to the OSDs
    /// (`client_oc_max_dirty`); write-back starts once an eighth is dirty or
    /// data is 30 s old. libcephfs's defaults (200 MiB, 100 MiB, 8 MiB, 5 s)
    /// are a desktop client's; an NFS server, like knfsd over the page cache
    /// (dirty data up to 10 % of memory or 30 s), keeps UNSTABLE data until
    /// COMMIT or pressure, so overwrites of hot blocks reach the OSDs once.
    pub cache_bytes: u64,
    /// A name for this server's session, the same on every start of the
    /// same server and different on every other server: the session a
    /// previous run left behind (a crash) is ended at start, so its
    /// capabilities and locks do not hold files for the MDS's session
    /// timeout (60 s). `None`: no name, no such clean-up.
    pub session_uuid: Option<String>,
    /// Set for a head of a cluster (`--node-id`): a session the cluster ends
    /// is then *not* replaced; this flag is raised instead (the server
    /// answers nothing more and exits). The cluster ends a head's session
    /// when another head takes its node over, and a new session under the
    /// node's name would end the new head's session in turn, releasing
    /// the locks its clients hold.
    pub fence: Option<Arc<AtomicBool>>,
}

impl CephConfig {
    /// The defaults for `source`: 30 s to mount, stalled after 5 s, at most
    /// 64 calls inside at once while the cluster is slow.
    pub fn new(source: CephFsSource, handle_key: [u8; 16]) -> CephConfig {
        CephConfig {
            source,
            handle_key,
            unsafe_async: false,
            mount_timeout: Duration::from_secs(30),
            stall_after: Duration::from_secs(5),
            max_calls_inside: 64,
            library: LIBRARY.to_string(),
            session_uuid: None,
            cache_bytes: 512 << 20,
            fence: None,
        }
    }
}

/// Why a CephFS export could not be opened. Each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Library(#[from] LoadError),
    #[error("{url}: cannot read the Ceph configuration {conf}: {errno}; give the cluster's ceph.conf with ?conf=PATH")]
    Conf { url: String, conf: String, errno: String },
    #[error("{url}: cannot connect to the cluster named in {conf}: {errno}. Is it running and reachable (`ceph -s --conf {conf} --id {id}`)? Is client.{id}'s key in the keyring the conf names?")]
    Connect { url: String, conf: String, id: String, errno: String },
    #[error("{url}: the cluster has no file system named {fs:?} (`ceph fs ls --conf {conf}` lists them)")]
    NoFileSystem { url: String, fs: String, conf: String },
    #[error("{url}: {path} does not exist in file system {fs:?}; create it first (e.g. through ceph-fuse)")]
    NoPath { url: String, path: String, fs: String },
    #[error("{url}: mounting failed after {timeout_s} s: {errno}. Is an MDS of {fs:?} active (`ceph fs status {fs} --conf {conf}`)?")]
    Mount { url: String, fs: String, conf: String, timeout_s: u64, errno: String },
    #[error("{url}: {what}: {errno}")]
    Other { url: String, what: String, errno: String },
}

/// A [`Backend`] over a CephFS directory.
pub struct CephBackend {
    /// The MDS session now; replaced whole if the cluster ends it (see
    /// [`CephBackend::session_lost`]). A call takes it once, at its start,
    /// and uses only it: inodes of two client instances never meet.
    session: Arc<RwLock<Arc<Session>>>,
    /// How to mount again.
    lib: &'static ffi::Lib,
    spec: MountSpec,
    /// A new session is being made.
    reconnecting: Arc<AtomicBool>,
    /// The CephFS locks held for the lock manager (sessions come and go).
    held: Arc<LockRecord>,
    root_vino: vinodeno_t,
    /// `Attr::fsid` of live objects (snapshots get another).
    fsid: u64,
    codec: HandleCodec,
    verifier: Arc<WriteVerifier>,
    gate: Gate,
    /// Constant per export (see `readdir`).
    cookieverf: Verifier,
    unsafe_async: bool,
    read_bufs: Arc<crate::bufpool::BufPool>,
    /// For log lines: the source URL.
    what: String,
    /// See [`CephConfig::fence`].
    fence: Option<Arc<AtomicBool>>,
}

/// One MDS session and everything that belongs to it.
struct Session {
    mount: Arc<Mount>,
    /// The export root, referenced for as long as the session lives.
    root: InodeRef,
    /// The server's own credentials (uid 0), made once: most calls use them.
    root_perms: mount::Perms,
    files: FileCache,
    /// Files on which the lock manager holds locks: CephFS ties locks to an
    /// open file, so these stay open (outside the I/O cache, which may close
    /// its files at any time) until the lock manager lets go of the file.
    lock_files: Mutex<HashMap<Vino, Arc<OpenFile>>>,
}

impl Session {
    /// Mount `spec` and reference its root.
    fn open(lib: &'static ffi::Lib, spec: MountSpec) -> Result<(Session, ceph_statx), SessionError> {
        let mount = Arc::new(Mount::connect_within(lib, spec).map_err(SessionError::Mount)?);
        let root = mount.root().map_err(|e| SessionError::Root("looking up the root", e))?;
        let root_perms = mount.perms(&Credentials::root());
        let stx = root.getattr(&root_perms).map_err(|e| SessionError::Root("stat of the root", e))?;
        let files = FileCache::new(OPEN_FILES_MAX);
        Ok((Session { mount, root, root_perms, files, lock_files: Mutex::new(HashMap::new()) }, stx))
    }

    /// The file that holds the lock manager's locks on `v`, opened if need be.
    fn lock_file(
        &self,
        v: Vino,
        sync_on_close: bool,
        verifier: &Arc<WriteVerifier>,
    ) -> Result<Arc<OpenFile>, Errno> {
        if let Some(f) = self.lock_files.lock().get(&v) {
            return Ok(f.clone());
        }
        let inode = self.mount.inode(vinodeno_t { ino: v.0, snapid: v.1 })?;
        let f = Arc::new(open_as_server(&self.root_perms, inode, sync_on_close, verifier)?);
        Ok(self.lock_files.lock().entry(v).or_insert(f).clone())
    }
}

/// Open a regular file as the server, read-write if possible.
fn open_as_server(
    perms: &mount::Perms,
    inode: InodeRef,
    sync_on_close: bool,
    verifier: &Arc<WriteVerifier>,
) -> Result<OpenFile, Errno> {
    let (file, write_errno) = match inode.open(libc::O_RDWR, perms) {
        Ok(f) => (f, None),
        Err(e) if matches!(e.0, libc::EROFS | libc::EACCES | libc::EPERM) => {
            (inode.open(libc::O_RDONLY, perms)?, Some(e.0))
        }
        Err(e) => return Err(e),
    };
    Ok(OpenFile::new(inode, file, write_errno, sync_on_close, verifier.clone()))
}

/// Take the locks of `record` again in the session `slot` holds (see
/// [`held`]); what another client took meanwhile is lost, and logged.
fn retake_locks(
    slot: &RwLock<Arc<Session>>,
    record: &LockRecord,
    sync_on_close: bool,
    verifier: &Arc<WriteVerifier>,
    what: &str,
) {
    let (mut taken, mut lost) = (0usize, 0usize);
    for (v, rec) in record.files() {
        let held = rec.lock();
        if held.is_empty() {
            continue;
        }
        // The session current now, under the file's mutex, as lock calls do.
        let s = slot.read().clone();
        let f = match s.lock_file(v, sync_on_close, verifier) {
            Ok(f) => f,
            Err(e) => {
                lost += held.locks().len();
                tracing::error!(
                    "{what}: inode {:#x}: the {} lock(s) held on it could not be taken again ({e}): the NFS clients holding them are no longer protected from other CephFS clients",
                    v.0,
                    held.locks().len()
                );
                continue;
            }
        };
        for &(owner, exclusive, range) in held.locks() {
            let kind = if exclusive { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
            match f.file().setlk(&mut flock(kind, range), ceph_owner(owner), false) {
                Ok(()) => taken += 1,
                Err(e) => {
                    lost += 1;
                    let why = if matches!(e.0, libc::EAGAIN | libc::EACCES) {
                        "another CephFS client took a conflicting lock while this server was cut off"
                            .to_string()
                    } else {
                        e.to_string()
                    };
                    tracing::error!(
                        "{what}: inode {:#x}: a lock of NFS owner {owner:#018x} on bytes {}..{} is lost: {why}",
                        v.0,
                        range.start,
                        range.end
                    );
                }
            }
        }
    }
    if taken + lost > 0 {
        tracing::info!("{what}: {taken} lock(s) taken again in the new session, {lost} lost");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Open files go (synced if dirty) before the mount does.
        self.files.clear();
        self.lock_files.lock().clear();
    }
}

/// Why a session could not be made.
enum SessionError {
    Mount(MountFailure),
    Root(&'static str, Errno),
}

thread_local! {
    /// Set when a libcephfs call of this thread answered ESHUTDOWN: the
    /// cluster ended the session (evicted, blocklisted).
    static SESSION_ENDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// One call's view: the backend and the session it uses throughout.
struct Cx<'a> {
    b: &'a CephBackend,
    s: Arc<Session>,
}

impl std::ops::Deref for Cx<'_> {
    type Target = CephBackend;
    fn deref(&self) -> &CephBackend {
        self.b
    }
}

// ------------------------------------------------------------------ helpers

/// An errno from libcephfs as a backend error.
fn fs_err(e: Errno) -> FsError {
    match e.0 {
        // The MDS or OSDs did not answer in time, or our session is gone
        // (evicted, blocklisted: ESHUTDOWN): nothing the caller did wrong.
        libc::ETIMEDOUT | libc::ENOTCONN => FsError::Jukebox,
        libc::ESHUTDOWN => {
            // A new session is made (see `CephBackend::call`): try again then.
            SESSION_ENDED.with(|f| f.set(true));
            FsError::Jukebox
        }
        n => FsError::from_errno(n),
    }
}

/// Errors resolving an inode by number: gone is stale.
fn handle_err(e: Errno) -> FsError {
    match e.0 {
        libc::ESTALE | libc::ENOENT => FsError::Stale,
        _ => fs_err(e),
    }
}

/// Check a client-supplied name is one path component.
fn component(name: &[u8]) -> FsResult<&[u8]> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(FsError::Inval);
    }
    Ok(name)
}

fn is_dot_or_dotdot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// A name to create: `.` and `..` always exist.
fn new_name(name: &[u8]) -> FsResult<&[u8]> {
    if is_dot_or_dotdot(name) {
        return Err(FsError::Exist);
    }
    component(name)
}

/// A name to remove or rename: `.` and `..` are not entries one may change.
fn old_name(name: &[u8]) -> FsResult<&[u8]> {
    if is_dot_or_dotdot(name) {
        return Err(FsError::Inval);
    }
    component(name)
}

fn ts(t: libc::timespec) -> Timestamp {
    Timestamp { secs: t.tv_sec, nsecs: t.tv_nsec as u32 }
}

fn to_timespec(t: Timestamp) -> FsResult<libc::timespec> {
    if t.nsecs > 999_999_999 {
        return Err(FsError::Inval);
    }
    Ok(libc::timespec { tv_sec: t.secs, tv_nsec: t.nsecs as libc::c_long })
}

/// The server's clock, for "set to the server's time".
/// The time `t` sets (`None`: left as it is). libcephfs 16 ignores
/// `CEPH_SETATTR_*_NOW`, so "the server's time" is given as a time.
fn time_to_set(t: SetTime) -> FsResult<Option<libc::timespec>> {
    Ok(match t {
        SetTime::DontChange => None,
        SetTime::ServerTime => Some(now()),
        SetTime::ClientTime(t) => Some(to_timespec(t)?),
    })
}

fn now() -> libc::timespec {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long }
}

fn vino_of(stx: &ceph_statx) -> vinodeno_t {
    // libcephfs reports an object's snapshot id as its st_dev.
    vinodeno_t { ino: stx.stx_ino, snapid: stx.stx_dev }
}

fn key(v: vinodeno_t) -> Vino {
    (v.ino, v.snapid)
}

/// Where an exclusive CREATE keeps its verifier: as the local backend does,
/// the halves as mtime and atime seconds (a client follows up with a SETATTR
/// of its real times).
fn exclusive_times(verf: &Verifier) -> (Timestamp, Timestamp) {
    let m = u32::from_be_bytes([verf[0], verf[1], verf[2], verf[3]]);
    let a = u32::from_be_bytes([verf[4], verf[5], verf[6], verf[7]]);
    (Timestamp { secs: a as i64, nsecs: 0 }, Timestamp { secs: m as i64, nsecs: 0 })
}

/// The mode of a file whose creator gave none (as the local backend: 0).
const DEFAULT_FILE_MODE: u32 = 0;
const DEFAULT_DIR_MODE: u32 = 0o755;

impl CephBackend {
    /// Connect to the cluster and open `cfg.source` for export. Blocks
    /// while connecting (at most about `cfg.mount_timeout`).
    pub fn open(cfg: CephConfig) -> Result<CephBackend, OpenError> {
        let lib = ffi::lib(&cfg.library)?;
        let src = &cfg.source;
        let what = src.to_string();
        let conf_s = src.conf.display().to_string();
        // Checked here because libcephfs reports a missing file only as ENOENT.
        if let Err(e) = std::fs::metadata(&src.conf) {
            return Err(OpenError::Conf { url: what, conf: conf_s, errno: e.to_string() });
        }
        let spec = MountSpec {
            client_id: src.client_id.clone(),
            conf: src.conf.clone(),
            fs_name: src.fs_name.clone(),
            path: src.path.clone(),
            timeout: cfg.mount_timeout,
            session_uuid: cfg.session_uuid.clone(),
            options: vec![
                // The client's own view of permissions is the one NFS needs.
                ("client_permissions", "true".into()),
                // Directory sizes as entry counts, as POSIX tools expect (not
                // recursive bytes).
                ("client_dirsize_rbytes", "false".into()),
                // One admin socket per client instance (the conf's usual
                // `$name.asok` would be taken by the first export, or by
                // another tool of the same client name).
                ("admin_socket", "$run_dir/$cluster-$name.$pid.$cctid.asok".into()),
            ]
            .into_iter()
            // libcephfs keeps every debug message up to level 5 of its
            // subsystems in memory by default (for a dump after a crash): a
            // quarter of the server's CPU on 8 KiB READs, in its log thread and
            // in formatting the messages. Errors are still logged.
            .chain(QUIET_SUBSYSTEMS.iter().map(|s| (*s, "0/0".to_string())))
            // Write-back as an NFS server's (see `CephConfig::cache_bytes`).
            .chain([
                ("client_oc_size", cfg.cache_bytes.to_string()),
                ("client_oc_max_dirty", (cfg.cache_bytes / 2).to_string()),
                ("client_oc_target_dirty", (cfg.cache_bytes / 8).to_string()),
                ("client_oc_max_dirty_age", "30".to_string()),
            ])
            .collect(),
        };
        let (session, stx) = Session::open(lib, spec.clone()).map_err(|f| {
            let f = match f {
                SessionError::Mount(f) => f,
                SessionError::Root(what_failed, e) => {
                    return OpenError::Other { url: what.clone(), what: what_failed.into(), errno: e.to_string() }
                }
            };
            let errno = |e: Errno| e.to_string();
            match f {
                MountFailure::ReadConf(e) if e.0 == libc::EINVAL => OpenError::Conf {
                    url: what.clone(),
                    conf: conf_s.clone(),
                    errno: "libcephfs cannot parse it (check its syntax; a last line without a newline is enough to be refused)".into(),
                },
                MountFailure::TimedOut => OpenError::Mount {
                    url: what.clone(),
                    fs: src.fs_name.clone(),
                    conf: conf_s.clone(),
                    timeout_s: cfg.mount_timeout.as_secs(),
                    errno: "no answer from the cluster".into(),
                },
                MountFailure::ReadConf(e) => {
                    OpenError::Conf { url: what.clone(), conf: conf_s.clone(), errno: errno(e) }
                }
                MountFailure::Init(e) => OpenError::Connect {
                    url: what.clone(),
                    conf: conf_s.clone(),
                    id: src.client_id.clone(),
                    errno: errno(e),
                },
                MountFailure::SelectFs(e) | MountFailure::Mount(e) if e.0 == libc::ENOENT => {
                    // ENOENT is the file system's name or the path: tell which.
                    if matches!(f, MountFailure::SelectFs(_)) || src.path == "/" {
                        OpenError::NoFileSystem {
                            url: what.clone(),
                            fs: src.fs_name.clone(),
                            conf: conf_s.clone(),
                        }
                    } else {
                        OpenError::NoPath {
                            url: what.clone(),
                            path: src.path.clone(),
                            fs: src.fs_name.clone(),
                        }
                    }
                }
                MountFailure::SelectFs(e) | MountFailure::Mount(e) => OpenError::Mount {
                    url: what.clone(),
                    fs: src.fs_name.clone(),
                    conf: conf_s.clone(),
                    timeout_s: cfg.mount_timeout.as_secs(),
                    errno: errno(e),
                },
                MountFailure::Reclaim(e) => OpenError::Other {
                    url: what.clone(),
                    what: "ending the session of this server's previous run (ceph_start_reclaim)".into(),
                    errno: errno(e),
                },
                MountFailure::Create(e) => {
                    OpenError::Other { url: what.clone(), what: "ceph_create".into(), errno: errno(e) }
                }
                MountFailure::SetOption(name, e) => {
                    OpenError::Other { url: what.clone(), what: format!("setting {name}"), errno: errno(e) }
                }
            }
        })?;
        if stx.stx_mode as u32 & libc::S_IFMT != libc::S_IFDIR {
            return Err(OpenError::Other {
                url: what,
                what: "the export root".into(),
                errno: "not a directory".into(),
            });
        }
        let root_vino = vino_of(&stx);
        let fs_cid = session.mount.fs_cid();
        let codec = HandleCodec::new(cfg.handle_key, fs_cid, root_vino);
        // The cookie verifier: constant for the export and across restarts,
        // because cookies are (see `readdir`).
        let mut h = SipHasher24::new_with_key(&cfg.handle_key);
        std::hash::Hasher::write(&mut h, b"eagernfs cephfs readdir cookieverf v1");
        std::hash::Hasher::write(&mut h, &fs_cid.to_be_bytes());
        std::hash::Hasher::write(&mut h, &root_vino.ino.to_be_bytes());
        let cv = h.finish128().as_bytes();
        let mut cookieverf = [0u8; 8];
        cookieverf.copy_from_slice(&cv[..8]);
        tracing::info!(
            "{what}: mounted as client.{} (fscid {fs_cid}, root inode {:#x}, libcephfs {})",
            session.mount.instance_id(),
            root_vino.ino,
            version(&cfg.library).unwrap_or_default()
        );
        Ok(CephBackend {
            session: Arc::new(RwLock::new(Arc::new(session))),
            lib,
            spec,
            reconnecting: Arc::default(),
            held: Arc::default(),
            root_vino,
            fsid: 0xCE9F_0000_0000_0000 ^ fs_cid as u64,
            codec,
            verifier: Arc::new(WriteVerifier::new()),
            gate: Gate::new(what.clone(), cfg.stall_after, cfg.max_calls_inside),
            cookieverf,
            unsafe_async: cfg.unsafe_async,
            read_bufs: Arc::default(),
            what,
            fence: cfg.fence.clone(),
        })
    }

    /// Run one call with the session of now; if libcephfs said the cluster
    /// ended that session, start making a new one.
    fn call<T>(&self, f: impl FnOnce(&Cx<'_>) -> T) -> T {
        let cx = Cx { b: self, s: self.session.read().clone() };
        SESSION_ENDED.with(|e| e.set(false));
        let r = f(&cx);
        if SESSION_ENDED.with(|e| e.replace(false)) {
            self.session_lost(&cx.s);
        }
        r
    }

    /// The cluster ended session `lost` (evicted or blocklisted, libcephfs
    /// answers ESHUTDOWN): what libcephfs held back (UNSTABLE writes not yet
    /// on the OSDs) is gone, so the write verifier changes, and clients
    /// resend it; a new session is made in the background (calls meanwhile
    /// are answered JUKEBOX). Handles stay valid: they name inodes, not
    /// anything of the session.
    fn session_lost(&self, lost: &Arc<Session>) {
        if !Arc::ptr_eq(&self.session.read(), lost) || self.reconnecting.swap(true, Ordering::AcqRel) {
            return;
        }
        self.verifier.regenerate();
        if let Some(fence) = &self.fence {
            tracing::error!(
                "{}: the cluster ended this head's session (its node was taken over, or it was evicted): \
                 not connecting again under the node's name (that would end the new head's session)",
                self.what
            );
            fence.store(true, Ordering::Release);
            return;
        }
        tracing::error!(
            "{}: the cluster ended this server's session (evicted or blocklisted): UNSTABLE writes it held are lost (the write verifier changed, so clients resend them); connecting again",
            self.what
        );
        let (lib, spec, what, root_vino) = (self.lib, self.spec.clone(), self.what.clone(), self.root_vino);
        let reconnecting = self.reconnecting.clone();
        let (held, verifier, sync_on_close) = (self.held.clone(), self.verifier.clone(), !self.unsafe_async);
        // The thread keeps the backend's session slot through a weak
        // reference: a backend dropped meanwhile ends the attempts.
        let slot = Arc::downgrade(&self.session);
        let spawned = std::thread::Builder::new().name("cephfs-reconnect".into()).spawn(move || {
            let mut wait = Duration::from_secs(1);
            loop {
                let Some(slot) = slot.upgrade() else { break };
                match Session::open(lib, spec.clone()) {
                    Ok((session, stx)) if vino_of(&stx) == root_vino => {
                        tracing::info!("{what}: connected again as client.{}", session.mount.instance_id());
                        let old = std::mem::replace(&mut *slot.write(), Arc::new(session));
                        // The locks went with the old session.
                        retake_locks(&slot, &held, sync_on_close, &verifier, &what);
                        // The old session's files are closed and its mount
                        // released away from any call (an evicted client's
                        // unmount may wait).
                        let _ = std::thread::Builder::new().name("cephfs-unmount".into()).spawn(move || drop(old));
                        break;
                    }
                    Ok(_) => tracing::error!("{what}: the export's root is another directory now; its handles are stale: restart the server"),
                    Err(SessionError::Mount(f)) => tracing::warn!("{what}: connecting again failed ({f:?}); retrying in {wait:?}"),
                    Err(SessionError::Root(w, e)) => tracing::warn!("{what}: {w} failed ({e}); retrying in {wait:?}"),
                }
                drop(slot);
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(30));
            }
            reconnecting.store(false, Ordering::Release);
        });
        if let Err(e) = spawned {
            tracing::error!("{}: no thread to connect again ({e}); restart the server", self.what);
            self.reconnecting.store(false, Ordering::Release);
        }
    }

    fn attr(&self, stx: &ceph_statx) -> Attr {
        let mode = stx.stx_mode as u32;
        let ftype = match mode & libc::S_IFMT {
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFBLK => FileType::BlockDevice,
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFIFO => FileType::Fifo,
            _ => FileType::Regular,
        };
        // An object seen in a snapshot is another object than the live one
        // with the same inode number: give each snapshot its own fsid.
        let snap = stx.stx_dev;
        let fsid = if snap == CEPH_NOSNAP { self.fsid } else { self.fsid ^ snap.rotate_left(17) ^ 1 };
        Attr {
            ftype,
            mode: mode & 0o7777,
            nlink: stx.stx_nlink,
            uid: stx.stx_uid,
            gid: stx.stx_gid,
            size: stx.stx_size,
            used: stx.stx_blocks.saturating_mul(512),
            rdev: (libc::major(stx.stx_rdev), libc::minor(stx.stx_rdev)),
            fsid,
            fileid: stx.stx_ino,
            atime: ts(stx.stx_atime),
            mtime: ts(stx.stx_mtime),
            ctime: ts(stx.stx_ctime),
        }
    }
}

/// The mode bits a change of owner or a write by a non-root caller drops:
/// setuid, and setgid when group execute is set (otherwise it means
/// mandatory locking).
fn suid_kill(mode: u32) -> u32 {
    let mut kill = mode & libc::S_ISUID;
    if mode & (libc::S_ISGID | libc::S_IXGRP) == (libc::S_ISGID | libc::S_IXGRP) {
        kill |= libc::S_ISGID;
    }
    kill
}

/// `flock` for a lock request.
fn flock(kind: libc::c_short, range: LockRange) -> libc::flock {
    // SAFETY: flock is plain integers.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = range.start.min(i64::MAX as u64) as i64;
    // 0: to the end of the file; so is any end beyond what an off_t holds.
    fl.l_len = if range.end == u64::MAX || range.end > i64::MAX as u64 {
        0
    } else {
        (range.end - range.start) as i64
    };
    fl
}

/// CephFS compares lock owners by (client, owner) when the owner's top bit
/// is set, and by (client, owner, pid) otherwise: set it, so the pid
/// plays no part.
fn ceph_owner(owner: u64) -> u64 {
    owner | 1 << 63
}

fn conflict_of(fl: &libc::flock) -> LockConflict {
    let start = fl.l_start.max(0) as u64;
    let end = if fl.l_len <= 0 { u64::MAX } else { start.saturating_add(fl.l_len as u64) };
    LockConflict {
        exclusive: fl.l_type == libc::F_WRLCK as libc::c_short,
        range: LockRange { start, end },
        pid: fl.l_pid,
    }
}

impl FileLocks for CephBackend {
    fn try_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>> {
        // The record and CephFS change together, under the file's mutex,
        // with the session current then (see `held`).
        let v = key(self.codec.decode(fh)?);
        let rec = self.held.file(v);
        let mut held = rec.lock();
        let r = self.call(|cx| cx.fl_try_lock(fh, owner, exclusive, range));
        if let Ok(None) = r {
            held.lock(owner, exclusive, range);
        }
        r
    }

    fn test_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>> {
        self.call(|cx| cx.fl_test_lock(fh, owner, exclusive, range))
    }

    fn unlock(&self, fh: &FileHandle, owner: u64, range: LockRange) -> FsResult<()> {
        let v = key(self.codec.decode(fh)?);
        let Some(rec) = self.held.get(v) else { return Ok(()) };
        let mut held = rec.lock();
        // Recorded first: if the session is ending, the new one does not take it.
        held.unlock(owner, range);
        self.call(|cx| cx.fl_unlock(fh, owner, range))
    }

    fn forget_file(&self, fh: &FileHandle) {
        let Ok(v) = self.codec.decode(fh) else { return };
        let rec = self.held.forget(key(v));
        let _held = rec.as_ref().map(|r| {
            let mut h = r.lock();
            h.clear();
            h
        });
        self.call(|cx| cx.fl_forget_file(fh))
    }
}

impl Cx<'_> {
    fn root_perms(&self) -> &mount::Perms {
        &self.s.root_perms
    }

    /// The inode a handle names.
    fn node(&self, fh: &FileHandle) -> FsResult<(InodeRef, vinodeno_t)> {
        let v = self.codec.decode(fh)?;
        let inode = self.s.mount.inode(v).map_err(handle_err)?;
        Ok((inode, v))
    }

    /// Fresh attributes of a live object; one with no links left is stale.
    fn live_attr(&self, inode: &InodeRef) -> FsResult<Attr> {
        let stx = inode.getattr(self.root_perms()).map_err(handle_err)?;
        if stx.stx_nlink == 0 {
            return Err(FsError::Stale);
        }
        Ok(self.attr(&stx))
    }

    /// An object named by a handle and its attributes.
    fn object(&self, fh: &FileHandle) -> FsResult<(InodeRef, vinodeno_t, Attr)> {
        let (inode, v) = self.node(fh)?;
        let attr = self.live_attr(&inode).inspect_err(|e| {
            if *e == FsError::Stale {
                self.s.files.remove(key(v));
            }
        })?;
        Ok((inode, v, attr))
    }

    fn dir_object(&self, fh: &FileHandle) -> FsResult<(InodeRef, vinodeno_t, Attr)> {
        let o = self.object(fh)?;
        if o.2.ftype != FileType::Directory {
            return Err(FsError::NotDir);
        }
        Ok(o)
    }

    fn dir_wcc(&self, before: &Attr, dir: &InodeRef) -> Wcc {
        Wcc { before: Some(WccAttr::from(before)), after: self.live_attr(dir).ok() }
    }

    /// The server's open file for regular file `fh`.
    fn io_file(&self, fh: &FileHandle) -> FsResult<Arc<OpenFile>> {
        let v = self.codec.decode(fh)?;
        if let Some(f) = self.s.files.get(key(v)) {
            return Ok(f);
        }
        let (inode, _) = self.node(fh)?;
        let attr = self.live_attr(&inode)?;
        match attr.ftype {
            FileType::Regular => {}
            FileType::Directory => return Err(FsError::IsDir),
            _ => return Err(FsError::Inval),
        }
        let f = self.open_file(inode)?;
        Ok(self.s.files.insert(key(v), f))
    }

    /// Open a regular file as the server, read-write if possible.
    fn open_file(&self, inode: InodeRef) -> FsResult<Arc<OpenFile>> {
        open_as_server(self.root_perms(), inode, !self.unsafe_async, &self.verifier)
            .map(Arc::new)
            .map_err(handle_err)
    }

    /// Attributes through an open file; a removed file leaves the cache.
    fn io_attr(&self, fh: &FileHandle, f: &OpenFile) -> FsResult<Attr> {
        self.live_attr(f.inode()).inspect_err(|e| {
            if *e == FsError::Stale {
                if let Ok(v) = self.codec.decode(fh) {
                    self.s.files.remove(key(v));
                }
            }
        })
    }

    /// A libcephfs failure that may have lost buffered data changes the
    /// write verifier.
    fn after_io_error(&self, e: Errno) -> FsError {
        if matches!(
            e.0,
            libc::EIO | libc::ESHUTDOWN | libc::ENOTCONN | libc::EBADF | libc::ENOSPC | libc::EDQUOT
        ) {
            // (ESHUTDOWN also starts a new session: see `session_lost`.)
            self.verifier.regenerate();
        }
        fs_err(e)
    }

    /// Sync after a write or COMMIT as `how` asks.
    fn sync(&self, f: &OpenFile, how: StableHow, always: bool) -> FsResult<()> {
        if self.unsafe_async || how == StableHow::Unstable {
            return Ok(());
        }
        f.sync(always, how == StableHow::FileSync).map_err(|e| self.after_io_error(e))
    }

    /// Apply `set` to an object for `cred`, in the order Linux gives the
    /// effects: size, owner, mode, times (chown clears setuid; truncation
    /// sets mtime, so explicit times come last).
    fn apply_set(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        inode: &InodeRef,
        attr: &Attr,
        set: &SetAttr,
    ) -> FsResult<()> {
        let perms = self.s.mount.perms(cred);
        if let Some(size) = set.size {
            match attr.ftype {
                FileType::Regular => {}
                FileType::Directory => return Err(FsError::IsDir),
                _ => return Err(FsError::Inval),
            }
            // knfsd's owner override, checked here; libcephfs is then asked as root.
            if !perm::allowed_io(cred, attr, perm::W) {
                return Err(FsError::Access);
            }
            let f = self.io_file(fh)?;
            if let Some(e) = f.write_errno {
                return Err(FsError::from_errno(e));
            }
            let mut stx = ceph_statx { stx_size: size, ..ceph_statx::default() };
            let mut mask = ffi::CEPH_SETATTR_SIZE;
            // A truncation by anyone but root drops setuid and setgid, as
            // Linux does.
            let kill = if attr.ftype == FileType::Regular { suid_kill(attr.mode) } else { 0 };
            if cred.uid != 0 && kill != 0 {
                stx.stx_mode = (attr.mode & !kill) as u16;
                mask |= ffi::CEPH_SETATTR_MODE;
            }
            inode.setattr(&mut stx, mask, self.root_perms()).map_err(fs_err)?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            let before = self.live_attr(inode)?;
            let mut stx = ceph_statx::default();
            let mut mask = 0;
            if let Some(uid) = set.uid {
                stx.stx_uid = uid;
                mask |= ffi::CEPH_SETATTR_UID;
            }
            if let Some(gid) = set.gid {
                stx.stx_gid = gid;
                mask |= ffi::CEPH_SETATTR_GID;
            }
            inode.setattr(&mut stx, mask, &perms).map_err(fs_err)?;
            // Linux drops setuid (and setgid with group execute) of a file
            // whose owner or group changes, even for root.
            let kill = if before.ftype == FileType::Directory { 0 } else { suid_kill(before.mode) };
            let changed =
                set.uid.is_some_and(|u| u != before.uid) || set.gid.is_some_and(|g| g != before.gid);
            if kill != 0 && (changed || cred.uid != 0) && set.mode.is_none() {
                let mut stx = ceph_statx { stx_mode: (before.mode & !kill) as u16, ..ceph_statx::default() };
                inode.setattr(&mut stx, ffi::CEPH_SETATTR_MODE, self.root_perms()).map_err(fs_err)?;
            }
        }
        if let Some(mode) = set.mode {
            // Linux has no symlink modes; knfsd ignores them too.
            if attr.ftype != FileType::Symlink {
                let mut stx = ceph_statx { stx_mode: (mode & 0o7777) as u16, ..ceph_statx::default() };
                inode.setattr(&mut stx, ffi::CEPH_SETATTR_MODE, &perms).map_err(fs_err)?;
            }
        }
        if set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
            let mut stx = ceph_statx::default();
            let mut mask = 0;
            if let Some(t) = time_to_set(set.atime)? {
                stx.stx_atime = t;
                mask |= ffi::CEPH_SETATTR_ATIME;
            }
            if let Some(t) = time_to_set(set.mtime)? {
                stx.stx_mtime = t;
                mask |= ffi::CEPH_SETATTR_MTIME;
            }
            let explicit =
                matches!(set.atime, SetTime::ClientTime(_)) || matches!(set.mtime, SetTime::ClientTime(_));
            let owner = self.live_attr(inode)?.uid;
            if explicit || cred.uid == owner || cred.uid == 0 {
                inode.setattr(&mut stx, mask, &perms).map_err(fs_err)?;
            } else {
                // "Now" needs only write permission (NFS semantics, as knfsd).
                let now = self.live_attr(inode)?;
                if !perm::allowed(cred, &now, perm::W) {
                    return Err(FsError::Access);
                }
                inode.setattr(&mut stx, mask, self.root_perms()).map_err(fs_err)?;
            }
        }
        // libcephfs may hold attribute changes back while it holds the
        // capabilities for them: send them now, and wait until the MDS has
        // them safe, as NFS asks of SETATTR. (Held back, they would also hide
        // the MDS's own later changes, such as a directory's mtime after a
        // create, from this client.)
        if *set != SetAttr::default() {
            inode.sync(false).map_err(fs_err)?;
        }
        Ok(())
    }

    /// Wait until the MDS has journaled the changes just made in `dir`
    /// (libcephfs returns at the MDS's early reply, before its journal
    /// write; NFS promises a change is stable once answered). Skipped for
    /// `async` exports.
    fn stable_dir(&self, dir: &InodeRef) -> FsResult<()> {
        if self.unsafe_async {
            return Ok(());
        }
        dir.sync(false).map_err(fs_err)
    }

    /// Make libcephfs fetch `dir` from the MDS again: after a directory moved
    /// out of or into it, the client's count of its subdirectories (its link
    /// count) stays as it was until it reads the directory from the MDS
    /// (Ceph 16; ceph-fuse shows the same). Reading its first entries does.
    fn refetch_dir(&self, dir: &InodeRef) {
        if let Ok(stream) = dir.opendir(self.root_perms()) {
            for _ in 0..3 {
                match stream.next(false) {
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        }
    }

    /// Finish a create: give the new object exactly the rwx bits asked for
    /// (whatever umask libcephfs applied), apply the rest of `set`, describe it.
    fn finish_create(
        &self,
        cred: &Credentials,
        dir: &InodeRef,
        dir_before: &Attr,
        made: mount::Made,
        requested: Option<u32>,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let stx = made.stx;
        let v = vino_of(&stx);
        let handle = self.codec.encode(v);
        let mut attr = self.attr(&stx);
        if let Some(req) = requested {
            let want = (attr.mode & !0o777) | (req & 0o777);
            if want != attr.mode {
                let mut s = ceph_statx { stx_mode: want as u16, ..ceph_statx::default() };
                made.inode.setattr(&mut s, ffi::CEPH_SETATTR_MODE, self.root_perms()).map_err(fs_err)?;
                attr.mode = want;
            }
        }
        self.apply_set(cred, &handle, &made.inode, &attr, set)?;
        self.stable_dir(dir)?;
        let attr = self.live_attr(&made.inode)?;
        Ok(Created { handle, attr, dir_wcc: self.dir_wcc(dir_before, dir) })
    }

    /// Drop the cached open file of `dir/name` before it is removed or
    /// replaced (only when files are cached at all).
    fn forget_child(&self, dir: &InodeRef, name: &[u8]) {
        if self.s.files.is_empty() {
            return;
        }
        if let Ok(m) = dir.lookup(name, self.root_perms()) {
            self.s.files.remove(key(vino_of(&m.stx)));
        }
    }

    /// An entry of a listing read from libcephfs (never "." or "..", see `readdir`).
    fn readdir_entry(&self, e: mount::Entry, plus: bool) -> DirEntry {
        let mut entry = DirEntry {
            fileid: e.stx.stx_ino,
            name: Bytes::from(e.name),
            cookie: e.next as u64,
            attr: None,
            handle: None,
        };
        if plus && e.inode.is_some() && e.stx.stx_mask & ffi::CEPH_STATX_MODE != 0 {
            entry.attr = Some(self.attr(&e.stx));
            entry.handle = Some(self.codec.encode(vino_of(&e.stx)));
        }
        entry
    }

    /// "." (`dotdot` false, cookie 1) or ".." (cookie 2) of a listing of directory `d`, whose
    /// handle, attributes and identity are `dir`, `dattr` and `dv`; the export root's ".." is
    /// the root itself.
    fn dot_entry(
        &self,
        (d, dv, dir, dattr): (&InodeRef, vinodeno_t, &FileHandle, &Attr),
        dotdot: bool,
        plus: bool,
    ) -> FsResult<DirEntry> {
        let (fileid, attr, handle) = if !dotdot {
            (dattr.fileid, dattr.clone(), dir.clone())
        } else if dv == self.root_vino {
            (self.root_vino.ino, dattr.clone(), self.codec.encode(self.root_vino))
        } else {
            let m = d.lookup(b"..", self.root_perms()).map_err(fs_err)?;
            (m.stx.stx_ino, self.attr(&m.stx), self.codec.encode(vino_of(&m.stx)))
        };
        Ok(DirEntry {
            fileid,
            name: Bytes::from_static(if dotdot { b".." } else { b"." }),
            cookie: if dotdot { 2 } else { 1 },
            attr: plus.then_some(attr),
            handle: plus.then_some(handle),
        })
    }

    /// The open file for locks on `fh` (kept open until `forget_file`).
    fn lock_file(&self, fh: &FileHandle) -> FsResult<Arc<OpenFile>> {
        let v = self.codec.decode(fh)?;
        if let Some(f) = self.s.lock_files.lock().get(&key(v)) {
            return Ok(f.clone());
        }
        let (inode, _, attr) = self.object(fh)?;
        if attr.ftype != FileType::Regular {
            return Err(if attr.ftype == FileType::Directory { FsError::IsDir } else { FsError::Inval });
        }
        let f = self.open_file(inode)?;
        Ok(self.s.lock_files.lock().entry(key(v)).or_insert(f).clone())
    }

    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        let _pass = self.gate.enter(false)?;
        Ok(self.object(fh)?.2)
    }

    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<Timestamp>,
    ) -> FsResult<Wcc> {
        let _pass = self.gate.enter(false)?;
        let (inode, _, attr) = self.object(fh)?;
        if guard.is_some_and(|g| g != attr.ctime) {
            return Err(FsError::NotSync);
        }
        self.apply_set(cred, fh, &inode, &attr, set)?;
        let after = self.live_attr(&inode)?;
        Ok(Wcc { before: Some(WccAttr::from(&attr)), after: Some(after) })
    }

    fn lookup(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Lookup> {
        let name = component(name)?;
        let _pass = self.gate.enter(false)?;
        let (d, dv, dattr) = self.dir_object(dir)?;
        let perms = self.s.mount.perms(cred);
        if name == b".." && dv == self.root_vino {
            // `..` of the export root is the root; the caller still needs
            // search permission on it.
            d.lookup(b".", &perms).map_err(fs_err)?;
            return Ok(Lookup { handle: self.root(), attr: dattr.clone(), dir_attr: Some(dattr) });
        }
        let m = d.lookup(name, &perms).map_err(fs_err)?;
        Ok(Lookup {
            handle: self.codec.encode(vino_of(&m.stx)),
            attr: self.attr(&m.stx),
            dir_attr: Some(dattr),
        })
    }

    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)> {
        let _pass = self.gate.enter(false)?;
        let (_, v, attr) = self.object(fh)?;
        let mut granted = perm::access_bits(cred, &attr, want);
        if v.snapid != CEPH_NOSNAP {
            // Snapshots are read-only.
            granted &= !(access::MODIFY | access::EXTEND | access::DELETE);
        }
        Ok((granted, attr))
    }

    fn readlink(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        let _pass = self.gate.enter(false)?;
        let (inode, _, attr) = self.object(fh)?;
        if attr.ftype != FileType::Symlink {
            return Err(FsError::Inval);
        }
        let mut buf = vec![0u8; SYMLINK_TARGET_BYTES_MAX + 1];
        let n = inode.readlink(&mut buf, &self.s.mount.perms(cred)).map_err(fs_err)?;
        if n > SYMLINK_TARGET_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        buf.truncate(n);
        Ok((Bytes::from(buf), attr))
    }

    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult> {
        let _pass = self.gate.enter(false)?;
        let f = self.io_file(fh)?;
        let attr = self.io_attr(fh, &f)?;
        // Execute permission is enough to read, as with knfsd.
        if !perm::allowed_io(cred, &attr, perm::R) && !perm::allowed_io(cred, &attr, perm::X) {
            return Err(FsError::Access);
        }
        let want = (count as usize)
            .min(IO_MAX_BYTES)
            .min(attr.size.saturating_sub(offset).try_into().unwrap_or(usize::MAX));
        let mut buf = self.read_bufs.take(want);
        while buf.len() < want {
            let at = offset + buf.len() as u64;
            let left = want - buf.len();
            // SAFETY: read_uninit initialises exactly the count it returns,
            // at most `left` bytes of the room it is given.
            let got = unsafe {
                buf.fill_with(|spare| {
                    f.file()
                        .read_uninit(at, &mut spare[..left])
                        .map_err(|e| std::io::Error::from_raw_os_error(e.0))
                })
            }
            .map_err(|e| fs_err(Errno(e.raw_os_error().unwrap_or(libc::EIO))))?;
            if got == 0 {
                break;
            }
        }
        let data = buf.into_bytes();
        let eof = offset.saturating_add(data.len() as u64) >= attr.size;
        Ok(ReadResult { data, eof, attr: Some(attr) })
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
        let _pass = self.gate.enter(stable != StableHow::Unstable)?;
        let f = self.io_file(fh)?;
        let before = self.io_attr(fh, &f)?;
        if !perm::allowed_io(cred, &before, perm::W) {
            return Err(FsError::Access);
        }
        if let Some(e) = f.write_errno {
            return Err(FsError::from_errno(e));
        }
        let data = &data[..data.len().min(IO_MAX_BYTES)];
        if !matches!(offset.checked_add(data.len() as u64), Some(end) if end <= MAX_FILE_SIZE) {
            return Err(FsError::FBig);
        }
        let mut n = 0;
        while n < data.len() {
            match f.file().write(offset + n as u64, &data[n..]) {
                Ok(0) => break,
                Ok(got) => n += got,
                Err(e) if n > 0 && e.0 != libc::EIO => break,
                Err(e) => return Err(self.after_io_error(e)),
            }
        }
        if n == 0 && !data.is_empty() {
            return Err(FsError::Io);
        }
        f.mark_dirty();
        ordered();
        // A write by anyone but root drops setuid/setgid, as on Linux.
        let kill = suid_kill(before.mode);
        if cred.uid != 0 && kill != 0 {
            let mut stx = ceph_statx { stx_mode: (before.mode & !kill) as u16, ..ceph_statx::default() };
            f.inode().setattr(&mut stx, ffi::CEPH_SETATTR_MODE, self.root_perms()).map_err(fs_err)?;
        }
        self.sync(&f, stable, true)?;
        let after = self.live_attr(f.inode()).ok();
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
        let name = new_name(name)?;
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        let perms = self.s.mount.perms(cred);
        match how {
            CreateMode::Unchecked(set) | CreateMode::Guarded(set) => {
                let mode = set.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
                // mknod makes a regular file without opening it, so an
                // existing file needs no permission to be "created" again
                // by UNCHECKED.
                match d.mknod(name, libc::S_IFREG | mode, 0, &perms) {
                    Ok(made) => {
                        let set = SetAttr { mode: None, ..set.clone() };
                        self.finish_create(cred, &d, &dattr, made, Some(mode), &set)
                    }
                    Err(e) if e.0 == libc::EEXIST && matches!(how, CreateMode::Unchecked(_)) => {
                        let made = d.lookup(name, &perms).map_err(fs_err)?;
                        if made.stx.stx_mode as u32 & libc::S_IFMT != libc::S_IFREG {
                            return Err(FsError::Exist);
                        }
                        // An existing file: only the size applies, as knfsd does.
                        let set = SetAttr { size: set.size, ..SetAttr::default() };
                        self.finish_create(cred, &d, &dattr, made, None, &set)
                    }
                    Err(e) => Err(fs_err(e)),
                }
            }
            CreateMode::Exclusive(verf) => {
                let (atime, mtime) = exclusive_times(verf);
                match d.mknod(name, libc::S_IFREG | DEFAULT_FILE_MODE, 0, &perms) {
                    Ok(made) => {
                        let set = SetAttr {
                            atime: SetTime::ClientTime(atime),
                            mtime: SetTime::ClientTime(mtime),
                            ..SetAttr::default()
                        };
                        self.finish_create(cred, &d, &dattr, made, Some(DEFAULT_FILE_MODE), &set)
                    }
                    Err(e) if e.0 == libc::EEXIST => {
                        // A retransmission finds the file it made.
                        let made = d.lookup(name, &perms).map_err(fs_err)?;
                        let a = self.attr(&made.stx);
                        if a.ftype != FileType::Regular || a.atime != atime || a.mtime != mtime {
                            return Err(FsError::Exist);
                        }
                        self.finish_create(cred, &d, &dattr, made, None, &SetAttr::default())
                    }
                    Err(e) => Err(fs_err(e)),
                }
            }
        }
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        let name = new_name(name)?;
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        let mode = set.mode.unwrap_or(DEFAULT_DIR_MODE) & 0o7777;
        let made = d.mkdir(name, mode, &self.s.mount.perms(cred)).map_err(fs_err)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, &dattr, made, Some(mode), &set)
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        let name = new_name(name)?;
        if target.len() > SYMLINK_TARGET_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        let target = CString::new(target).map_err(|_| FsError::Inval)?;
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        let made = d.symlink(name, &target, &self.s.mount.perms(cred)).map_err(fs_err)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, &dattr, made, None, &set)
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let name = new_name(name)?;
        let mode = set.mode.unwrap_or(DEFAULT_FILE_MODE) & 0o7777;
        let (ftype, dev) = match kind {
            NodeKind::CharDevice { major, minor } => (libc::S_IFCHR, libc::makedev(major, minor)),
            NodeKind::BlockDevice { major, minor } => (libc::S_IFBLK, libc::makedev(major, minor)),
            NodeKind::Socket => (libc::S_IFSOCK, 0),
            NodeKind::Fifo => (libc::S_IFIFO, 0),
        };
        // Only root makes device nodes (CAP_MKNOD on Linux); CephFS itself
        // would let anyone.
        if matches!(kind, NodeKind::CharDevice { .. } | NodeKind::BlockDevice { .. }) && cred.uid != 0 {
            return Err(FsError::Perm);
        }
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        let made = d.mknod(name, ftype | mode, dev, &self.s.mount.perms(cred)).map_err(fs_err)?;
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        self.finish_create(cred, &d, &dattr, made, Some(mode), &set)
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        let name = old_name(name)?;
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        self.forget_child(&d, name);
        d.unlink(name, &self.s.mount.perms(cred)).map_err(fs_err)?;
        self.stable_dir(&d)?;
        Ok(self.dir_wcc(&dattr, &d))
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        let name = old_name(name)?;
        let _pass = self.gate.enter(false)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        d.rmdir(name, &self.s.mount.perms(cred)).map_err(fs_err)?;
        self.stable_dir(&d)?;
        Ok(self.dir_wcc(&dattr, &d))
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        let from_name = old_name(from_name)?;
        let to_name = old_name(to_name)?;
        let _pass = self.gate.enter(false)?;
        let (fd, fv, fattr) = self.dir_object(from_dir)?;
        let (td, tv, tattr) = self.dir_object(to_dir)?;
        let perms = self.s.mount.perms(cred);
        // A name renamed onto itself, or onto another link of the same
        // file, is left as it is (POSIX; Linux checks nothing more). libcephfs
        // would act on it, and lose the name from its cache.
        let source = fd.lookup(from_name, &perms).map_err(fs_err)?;
        if let Ok(target) = td.lookup(to_name, &perms) {
            if vino_of(&target.stx) == vino_of(&source.stx) {
                return Ok((self.dir_wcc(&fattr, &fd), self.dir_wcc(&tattr, &td)));
            }
            if !self.s.files.is_empty() {
                self.s.files.remove(key(vino_of(&target.stx)));
            }
        }
        fd.rename(from_name, &td, to_name, &perms).map_err(fs_err)?;
        self.stable_dir(&fd)?;
        if fv != tv {
            self.stable_dir(&td)?;
            if source.stx.stx_mode as u32 & libc::S_IFMT == libc::S_IFDIR {
                self.refetch_dir(&fd);
                self.refetch_dir(&td);
            }
        }
        Ok((self.dir_wcc(&fattr, &fd), self.dir_wcc(&tattr, &td)))
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        let name = new_name(name)?;
        let _pass = self.gate.enter(false)?;
        let (inode, _, attr) = self.object(fh)?;
        let (d, _, dattr) = self.dir_object(dir)?;
        if attr.ftype == FileType::Directory {
            return Err(FsError::Perm);
        }
        inode.link_into(&d, name, &self.s.mount.perms(cred)).map_err(fs_err)?;
        self.stable_dir(&d)?;
        Ok((self.live_attr(&inode).ok(), self.dir_wcc(&dattr, &d)))
    }

    /// Cookies are libcephfs's directory positions (`ceph_telldir`): the
    /// MDS orders a directory by the hash of each name and a position is
    /// that hash, so it does not move when other entries come or go, and it
    /// is the same after a restart or on another server. The cookie
    /// verifier is therefore a constant of the export.
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
        let _pass = self.gate.enter(false)?;
        let (d, dv, dattr) = self.dir_object(dir)?;
        if !perm::allowed(cred, &dattr, perm::R) {
            return Err(FsError::Access);
        }
        // Attributes and handles of entries amount to a LOOKUP of each,
        // which needs search permission; without it READDIRPLUS gives names.
        let plus = plus && perm::allowed(cred, &dattr, perm::X);
        let info = |eof| DirInfo { eof, cookieverf: self.cookieverf, dir_attr: Some(dattr.clone()) };
        // "." and ".." are made here, not read from libcephfs: its directory stream fills them
        // with a getattr of the directory (and its parent) that asks the MDS for recursive
        // statistics every time, a round trip to the MDS per listing from the start (measured:
        // two MDS getattrs per READDIR). Their cookies are the stream's own positions (1, 2),
        // and the stream is read from position 2, its first real entry.
        let mut pos = i64::try_from(cookie).map_err(|_| FsError::BadCookie)?;
        while pos < 2 {
            let entry = self.dot_entry((&d, dv, dir, &dattr), pos == 1, plus)?;
            if !sink(&entry) {
                return Ok(info(false));
            }
            pos += 1;
        }
        let stream = d.opendir(self.root_perms()).map_err(fs_err)?;
        stream.seek(pos);
        loop {
            let Some(e) = stream.next(plus).map_err(fs_err)? else {
                return Ok(info(true));
            };
            let entry = self.readdir_entry(e, plus);
            if !sink(&entry) {
                return Ok(info(false));
            }
        }
    }

    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        let _pass = self.gate.enter(false)?;
        self.object(fh)?;
        let sv = self.s.root.statfs().map_err(fs_err)?;
        let unit = sv.f_frsize;
        // CephFS has no limit on files: it reports the files there are as
        // the total and -1 as free. Say so in NFS terms: nothing is used up.
        let used = sv.f_files;
        let free = if sv.f_ffree == u64::MAX { u64::MAX - used } else { sv.f_ffree };
        Ok(FsStat {
            total_bytes: (sv.f_blocks).saturating_mul(unit),
            free_bytes: (sv.f_bfree).saturating_mul(unit),
            avail_bytes: (sv.f_bavail).saturating_mul(unit),
            total_files: used.saturating_add(free),
            free_files: free,
            avail_files: free,
        })
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
        let _pass = self.gate.enter(true)?;
        let f = self.io_file(fh)?;
        let before = self.io_attr(fh, &f)?;
        // As knfsd: only a writer may ask for a sync.
        if !perm::allowed_io(cred, &before, perm::W) {
            return Err(FsError::Access);
        }
        self.sync(&f, StableHow::DataSync, false)?;
        let after = self.live_attr(f.inode()).ok();
        Ok((Wcc { before: Some(WccAttr::from(&before)), after }, self.verifier.get()))
    }

    fn sync_all(&self) -> FsResult<()> {
        // Done even for `async` exports: this is the graceful-shutdown flush.
        let _pass = self.gate.enter(true)?;
        let files: Vec<_> = self.s.files.all().into_iter().map(|f| (f.written_so_far(), f)).collect();
        self.s.mount.sync_all().map_err(|e| self.after_io_error(e))?;
        for (written, f) in files {
            f.mark_synced(written);
        }
        Ok(())
    }

    fn fl_try_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>> {
        let _pass = self.gate.enter(false)?;
        let f = self.lock_file(fh)?;
        let kind = if exclusive { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
        let mut fl = flock(kind, range);
        match f.file().setlk(&mut fl, ceph_owner(owner), false) {
            Ok(()) => Ok(None),
            // Who holds it is not asked (one more MDS request, on every poll
            // of a waiting request; `test_lock` says).
            Err(e) if matches!(e.0, libc::EAGAIN | libc::EACCES) => {
                Ok(Some(LockConflict { exclusive: true, range, pid: 0 }))
            }
            Err(e) => Err(fs_err(e)),
        }
    }

    fn fl_test_lock(
        &self,
        fh: &FileHandle,
        owner: u64,
        exclusive: bool,
        range: LockRange,
    ) -> FsResult<Option<LockConflict>> {
        let _pass = self.gate.enter(false)?;
        let f = self.lock_file(fh)?;
        let kind = if exclusive { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
        let mut fl = flock(kind, range);
        f.file().getlk(&mut fl, ceph_owner(owner)).map_err(fs_err)?;
        Ok((fl.l_type != libc::F_UNLCK as libc::c_short).then(|| conflict_of(&fl)))
    }

    fn fl_unlock(&self, fh: &FileHandle, owner: u64, range: LockRange) -> FsResult<()> {
        let v = self.codec.decode(fh)?;
        let Some(f) = self.s.lock_files.lock().get(&key(v)).cloned() else { return Ok(()) };
        let _pass = self.gate.enter(false)?;
        let mut fl = flock(libc::F_UNLCK as libc::c_short, range);
        f.file().setlk(&mut fl, ceph_owner(owner), false).map_err(fs_err)
    }

    fn fl_forget_file(&self, fh: &FileHandle) {
        if let Ok(v) = self.codec.decode(fh) {
            // Closing the file releases whatever CephFS lock is left on it.
            let f = self.s.lock_files.lock().remove(&key(v));
            drop(f);
        }
    }
}

impl Backend for CephBackend {
    fn root(&self) -> FileHandle {
        self.codec.encode(self.root_vino)
    }

    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        self.call(|cx| cx.getattr(fh))
    }

    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<Timestamp>,
    ) -> FsResult<Wcc> {
        self.call(|cx| cx.setattr(cred, fh, set, guard))
    }

    fn lookup(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Lookup> {
        self.call(|cx| cx.lookup(cred, dir, name))
    }

    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)> {
        self.call(|cx| cx.access(cred, fh, want))
    }

    fn readlink(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        self.call(|cx| cx.readlink(cred, fh))
    }

    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult> {
        self.call(|cx| cx.read(cred, fh, offset, count))
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
        self.call(|cx| cx.write_then(cred, fh, offset, data, stable, ordered))
    }

    fn create(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        how: &CreateMode,
    ) -> FsResult<Created> {
        self.call(|cx| cx.create(cred, dir, name, how))
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        self.call(|cx| cx.mkdir(cred, dir, name, set))
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        self.call(|cx| cx.symlink(cred, dir, name, target, set))
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        self.call(|cx| cx.mknod(cred, dir, name, kind, set))
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.call(|cx| cx.remove(cred, dir, name))
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.call(|cx| cx.rmdir(cred, dir, name))
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_dir: &FileHandle,
        from_name: &[u8],
        to_dir: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        self.call(|cx| cx.rename(cred, from_dir, from_name, to_dir, to_name))
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        self.call(|cx| cx.link(cred, fh, dir, name))
    }

    /// Cookies are libcephfs's directory positions (`ceph_telldir`): the
    /// MDS orders a directory by the hash of each name and a position is
    /// that hash, so it does not move when other entries come or go, and it
    /// is the same after a restart or on another server. The cookie
    /// verifier is therefore a constant of the export.
    fn readdir(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        cookie: u64,
        cookieverf: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        self.call(|cx| cx.readdir(cred, dir, cookie, cookieverf, plus, sink))
    }

    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        self.call(|cx| cx.fsstat(fh))
    }

    fn properties(&self) -> FsProperties {
        FsProperties {
            max_file_size: MAX_FILE_SIZE,
            time_delta: Timestamp { secs: 0, nsecs: 1 },
            supports_hard_links: true,
            supports_symlinks: true,
            link_max: u32::MAX,
            name_max: NAME_MAX as u32,
            case_insensitive: false,
            case_preserving: true,
            // CephFS counts a file's size as its blocks, stored or not.
            holes_reported: false,
        }
    }

    fn commit(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        count: u32,
    ) -> FsResult<(Wcc, Verifier)> {
        self.call(|cx| cx.commit(cred, fh, offset, count))
    }

    fn write_verifier(&self) -> Verifier {
        self.verifier.get()
    }

    fn sync_all(&self) -> FsResult<()> {
        self.call(|cx| cx.sync_all())
    }

    fn file_locks(&self) -> Option<&dyn FileLocks> {
        Some(self)
    }

    fn remote(&self) -> bool {
        true
    }
}
