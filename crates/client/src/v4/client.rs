//! [`Nfs4Client`]: the NFSv4.1/4.2 wire client, implementing [`NfsOps`] so
//! the caching layer, the tools and the mount run over it unchanged, and
//! offering what NFSv3 cannot: opens, byte-range locks, and compounds that
//! do in one round trip what NFSv3 needs several for.
//!
//! Each NFSv3-shaped call becomes one COMPOUND (docs/nfs4-client.md lists
//! them). NFSv4 I/O names a stateid, and NFSv3's calls carry none: READ,
//! WRITE and a SETATTR of the size use the stateid of an open this client
//! holds on the file (one made with [`Nfs4Client::open`], the caller's own
//! first), else the anonymous stateid, which RFC 8881 §8.2.3 allows for
//! exactly this and which eagernfs, nfs-ganesha and knfsd accept; share
//! reservations still hold for it (a server refuses anonymous I/O that
//! another client's deny mode forbids). So calls made through [`NfsOps`]
//! alone leave no state on the server, as over NFSv3; a caller that knows
//! when files are opened and closed (the mount) opens them for real.
//!
//! # Layout
//! - [`Nfs4Client`]: connecting (the session, then the URL's path from
//!   the pseudo-root in one COMPOUND), accessors.
//! - the [`NfsOps`] impl.
//! - opens, locks and delegations: [`Nfs4Client::open`], [`Nfs4Client::close`],
//!   [`Nfs4Client::lock`], [`Nfs4Client::unlock`], [`Nfs4Client::test_lock`].
//! - compounds beyond NFSv3 (issue 34 item 4): [`Nfs4Client::lookup_path`],
//!   [`Nfs4Client::create_open`], [`Nfs4Client::write_close`],
//!   [`Nfs4Client::read_whole`], [`Nfs4Client::remove_unchecked`].

use super::attrs::{self, IdMapper};
use super::callback::{CallbackHooks, CallbackService, CallbackStats};
use super::compound::{component, Reply};
use super::session::{lock_owner_name, open_owner_name, Core, SessionConfig, SessionStats, OPS_MAX};
use super::state::{cut, end_of, CloseAction, GrantedAttrs, LockKey, Locks, OpenAccess, OpenKey, Range};
use crate::driver::{RpcClient, TransportConfig};
use crate::mount;
use crate::nfs::{default_cred, transfer_size};
use crate::ops::{
    CreatedWritten, Cred, FileOpened, FileRead, FileToRead, NameToRemove, NfsError, NfsOps, NfsResult,
    OpenWant, WriteClosed,
};
use crate::options::{MountOptions, NfsVersion, TRANSFER_SIZE_MAX};
use crate::url::NfsUrl;
use bytes::Bytes;
use eagernfs_proto::nfs3::{self, *};
use eagernfs_proto::nfs4::*;
use eagernfs_xdr::Opaque;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The NFS port a v4 client uses when the URL names none (RFC 8881: no portmapper).
const NFS4_PORT: u16 = 2049;
/// Fore-channel slots asked for (the server may grant fewer).
const SLOTS_WANTED: u32 = 64;
/// Room in a request or reply for everything around a READ's or WRITE's data.
const HEADER_ROOM: u32 = 64 * 1024;
/// Per-file OPEN/CLOSE locks kept before unused ones are dropped.
const OPEN_LOCKS_KEPT: usize = 1024;
/// A CLOSE left for later ([`Nfs4Client::close_soon`]) waits this long,
/// from when it was left, for another COMPOUND to ride on before it goes
/// alone.
const CLOSE_DELAY: std::time::Duration = std::time::Duration::from_millis(50);
/// CLOSEs riding on one COMPOUND at most.
const CLOSES_PER_COMPOUND: usize = 8;
/// DELEGRETURNs in one COMPOUND when all are given back (at unmount).
const DELEGRETURNS_PER_COMPOUND: usize = 32;
/// Such COMPOUNDs in flight at once.
const DELEGRETURN_COMPOUNDS_IN_FLIGHT: usize = 8;
/// CLOSEs kept waiting at most: past this they go at once.
const CLOSES_WAITING_MAX: usize = 256;

/// An NFSv4.1/4.2 client rooted at one directory. Clones share the
/// session and connections.
#[derive(Clone)]
pub struct Nfs4Client {
    inner: Arc<Inner>,
}

struct Inner {
    core: Arc<Core>,
    /// The directory calls start from (the URL's path, or its parent).
    root: NfsFh3,
    /// The path of `root` from the server's pseudo-root.
    export: String,
    /// The URL's path below `root` (`/` for `root` itself).
    path_inside: String,
    options: MountOptions,
    fsinfo: Fsinfo3ResOk,
    rsize: u32,
    wsize: u32,
    read_only: AtomicBool,
    ids: Arc<IdMapper>,
    /// Ask for delegations when opening (off unless the caching layer uses
    /// them, as the mount does: a delegation nobody uses only costs
    /// recalls). Shared with the clients [`Nfs4Client::rooted_at`] makes.
    want_delegations: Arc<AtomicBool>,
    /// Delegations held at most (the least recently used go back past it).
    delegations_max: Arc<AtomicUsize>,
    /// The server may grant directory delegations: cleared when it does not
    /// know GET_DIR_DELEGATION (NOTSUPP), so it is not asked again.
    dir_delegations: Arc<AtomicBool>,
    /// Ask for a delegation of each directory a MKDIR makes
    /// ([`Nfs4Client::set_delegate_new_dirs`]).
    delegate_new_dirs: Arc<AtomicBool>,
    /// OPEN and CLOSE of one file and owner go one at a time, so the
    /// server's open and the table agree.
    open_locks: Arc<Mutex<HashMap<OpenKey, Arc<tokio::sync::Mutex<()>>>>>,
    /// Opens whose last local close came and whose CLOSE is not sent yet
    /// ([`Nfs4Client::close_soon`]): it rides on the next COMPOUND sent as
    /// the same user, or goes alone after [`CLOSE_DELAY`].
    closes: Arc<Mutex<Vec<LaterClose>>>,
    /// A task sends the CLOSEs no COMPOUND took.
    closer: Arc<AtomicBool>,
}

/// A CLOSE left for later.
#[derive(Debug, Clone)]
struct LaterClose {
    key: OpenKey,
    fh: NfsFh3,
    /// The open's stateid when it was left, its sequence id exact: an OPEN
    /// that takes the open up again meanwhile (the same owner opening the
    /// same file) moves it on, and the server then refuses this CLOSE
    /// (OLD_STATEID) instead of ending the open taken up.
    stateid: Stateid4,
    /// The state table's generation then (a reclaim replaces stateids).
    generation: u64,
    /// Who it is sent as: the open's user.
    cred: Cred,
    /// Times it went out and came back neither done nor refused.
    tries: u32,
    /// When it was left (or put back after a try): it goes alone only once
    /// it has waited [`CLOSE_DELAY`] from here.
    left_at: tokio::time::Instant,
}

impl std::fmt::Debug for Nfs4Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nfs4Client")
            .field("server", &self.inner.core.rpc.server())
            .field("minor", &self.inner.core.cfg.minor)
            .field("export", &self.inner.export)
            .finish()
    }
}

/// A file this client holds open on the server (see [`Nfs4Client::open`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFile {
    pub fh: NfsFh3,
    /// The local user whose open owner holds it.
    pub uid: u32,
    pub access: OpenAccess,
}

/// A lock in the way (LOCK or LOCKT answered NFS4ERR_DENIED).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockConflict {
    pub offset: u64,
    /// All ones: to the end of the file.
    pub length: u64,
    pub write: bool,
    /// The other owner's name, as the server reports it.
    pub owner: Bytes,
    /// The other owner's client id (this client's own: [`Nfs4Client::client_id`]).
    pub clientid: Clientid4,
}

/// What [`Nfs4Client::write_close`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteClose {
    pub write: Write3ResOk,
    /// The SETATTR's answer, if one was sent (an error does not undo the write).
    pub setattr: Option<NfsResult<()>>,
    /// The file's attributes after it all.
    pub attrs: Option<Fattr3>,
}

/// Files [`Nfs4Client::read_files`] reads in one COMPOUND at most.
const FILES_READ_MAX: usize = crate::options::READAHEAD_FILES_MAX as usize;
/// Operations per file in [`Nfs4Client::read_files`]'s COMPOUND.
const FILE_READ_OPS: usize = 6;

/// What [`Nfs4Client::read_whole`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWhole {
    pub data: Bytes,
    pub eof: bool,
    /// The file's attributes when it was opened.
    pub attrs: Option<Fattr3>,
}

/// A new client instance's `co_ownerid`: unique on this host for the life of
/// the process (a second mount of the same server is a client of its own).
fn client_owner() -> Bytes {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Bytes::from(format!(
        "eagernfs/{}/{}/{n}/{:08x}",
        crate::driver::hostname(),
        std::process::id(),
        rand::random::<u32>()
    ))
}

fn fh4(fh: &NfsFh3) -> NfsFh4 {
    NfsFh4 { data: Opaque(fh.data.0.clone()) }
}

/// An NFSv4 handle as the NFSv3-shaped API carries it. NFSv4 handles may
/// be up to 128 bytes (nfs-ganesha's are 128), twice NFSv3's 64; an
/// `NfsFh3` holds them all the same (its bound applies to decoding NFSv3
/// replies), and one from this client only ever goes back over NFSv4.
fn fh3(fh: NfsFh4) -> NfsResult<NfsFh3> {
    if fh.data.len() > NFS4_FHSIZE {
        return Err(NfsError::BadReply(format!(
            "a file handle of {} bytes (NFSv4 allows {NFS4_FHSIZE})",
            fh.data.len()
        )));
    }
    Ok(NfsFh3 { data: Opaque(fh.data.0) })
}

fn putfh(fh: &NfsFh3) -> ArgOp {
    ArgOp::Putfh(Putfh4Args { object: fh4(fh) })
}

fn getattr(mask: Bitmap4) -> ArgOp {
    ArgOp::Getattr(Getattr4Args { attr_request: mask })
}

fn std_getattr() -> ArgOp {
    getattr(attrs::standard())
}

fn stable4(s: StableHow) -> StableHow4 {
    match s {
        StableHow::Unstable => StableHow4::Unstable4,
        StableHow::DataSync => StableHow4::DataSync4,
        StableHow::FileSync => StableHow4::FileSync4,
    }
}

fn stable3(s: StableHow4) -> StableHow {
    match s {
        StableHow4::Unstable4 => StableHow::Unstable,
        StableHow4::DataSync4 => StableHow::DataSync,
        StableHow4::FileSync4 => StableHow::FileSync,
    }
}

fn wcc(after: Option<Fattr3>) -> WccData {
    WccData { before: None, after }
}

/// The minor versions to try for `vers`, best first.
pub(crate) fn minors_for(vers: Option<NfsVersion>) -> &'static [u32] {
    match vers {
        Some(NfsVersion::V41) => &[1],
        Some(NfsVersion::V42) => &[2],
        _ => &[2, 1],
    }
}

impl Nfs4Client {
    /// Connect to the URL's server over NFSv4 (`vers=4.1`/`4.2` in the URL
    /// picks the minor version; otherwise 4.2, then 4.1).
    pub async fn connect(url: &str) -> NfsResult<Nfs4Client> {
        let url: NfsUrl = url.parse().map_err(|e| NfsError::Mount(format!("{e}")))?;
        Self::connect_url(&url).await
    }

    /// As [`Nfs4Client::connect`], for a parsed URL.
    pub async fn connect_url(url: &NfsUrl) -> NfsResult<Nfs4Client> {
        let minors = minors_for(url.options.vers);
        let mut last = None;
        for &minor in minors {
            match Self::connect_minor(url, minor).await {
                Err(e @ NfsError::Nfs4(Nfsstat4::MinorVersMismatch)) => last = Some(e),
                r => return r,
            }
        }
        Err(last.unwrap_or(NfsError::Nfs4(Nfsstat4::MinorVersMismatch)))
    }

    /// Connect speaking minor version `minor` (1 or 2): a session, then the
    /// URL's path walked from the pseudo-root in one COMPOUND. The client's
    /// root is the deepest directory of the path that exists (the rest is
    /// [`Nfs4Client::path_inside`]), or, with `export=` in the URL, exactly
    /// that directory.
    pub async fn connect_minor(url: &NfsUrl, minor: u32) -> NfsResult<Nfs4Client> {
        let mut options = url.options.clone();
        if options.udp {
            // RFC 8881 §2.9.1: NFSv4 runs over transports with congestion control.
            return Err(NfsError::Mount("NFSv4 needs TCP: proto=udp is for vers=3".into()));
        }
        if options.xprtsec != crate::options::Xprtsec::None
            && options.tls_name.is_none()
            && url.host.parse::<std::net::IpAddr>().is_err()
        {
            options.tls_name = Some(url.host.clone());
        }
        let port = url.nfs_port().unwrap_or(NFS4_PORT);
        let addr = mount::resolve(&url.host, port).await?;
        let mut alternates = Vec::new();
        for a in url.alternates.iter() {
            match mount::resolve(&a.host, options.nfsport.or(a.port).unwrap_or(port)).await {
                Ok(x) => alternates.push(x),
                Err(e) => tracing::warn!("fall-back address {a} skipped: {e}"),
            }
        }
        let callbacks = Arc::new(CallbackService::new(NFS4_CALLBACK));
        let config = TransportConfig::new(addr, &options)
            .with_alternates(&alternates, &options)
            .with_call_handler(callbacks.clone());
        let core_cfg = crate::core::CoreConfig::from_options(&options);
        let max = options.transfer_size_max().min(TRANSFER_SIZE_MAX) + HEADER_ROOM;
        let cfg = SessionConfig {
            minor,
            owner: client_owner(),
            verifier: rand::random(),
            slots: SLOTS_WANTED,
            max_request: max,
            max_response: max,
            hard: options.hard,
            major_window: core_cfg.major_window(),
            machine: default_cred(&options),
        };
        let core = Core::new(RpcClient::new(config), cfg, callbacks);
        core.recover(None).await?;
        Self::start(core, url, options).await
    }

    async fn start(core: Arc<Core>, url: &NfsUrl, options: MountOptions) -> NfsResult<Nfs4Client> {
        let ids = Arc::new(IdMapper::default());
        let cred = default_cred(&options);
        let (root, export, path_inside) = match &url.export {
            Some(export) => {
                let comps: Vec<&str> = export.split('/').filter(|c| !c.is_empty()).collect();
                let walked = walk(&core, &ids, &cred, None, &comps).await?;
                if walked.len() != comps.len() + 1 {
                    return Err(NfsError::Mount(format!("no such directory {export} on the server (NFSv4)")));
                }
                let (fh, a) = walked.last().cloned().expect("the root at least");
                if a.ftype != Ftype3::Dir {
                    return Err(NfsError::Nfs(Nfsstat3::Notdir));
                }
                let inside = url.path_inside(export).unwrap_or_else(|| "/".into());
                (fh, export.clone(), inside)
            }
            None => {
                let comps: Vec<&str> = url.components().collect();
                let walked = walk(&core, &ids, &cred, None, &comps).await?;
                // The deepest directory reached is the root.
                let deepest = walked.iter().rposition(|(_, a)| a.ftype == Ftype3::Dir).unwrap_or(0);
                let root = walked[deepest].0.clone();
                let export = format!("/{}", comps[..deepest].join("/"));
                let inside = format!("/{}", comps[deepest..].join("/"));
                (root, export, inside)
            }
        };
        Self::rooted(core, root, export, path_inside, options, ids, None).await
    }

    /// A client over `core` whose root is `root`: one GETATTR asks for the
    /// lease and the transfer sizes. With `share`, the per-file OPEN/CLOSE
    /// locks and the CLOSEs left for later are that client's (they are the
    /// session's state, as the state table is).
    async fn rooted(
        core: Arc<Core>,
        root: NfsFh3,
        export: String,
        path_inside: String,
        options: MountOptions,
        ids: Arc<IdMapper>,
        share: Option<&Inner>,
    ) -> NfsResult<Nfs4Client> {
        let cred = default_cred(&options);
        let mut mask = attrs::fs_info();
        for n in attrs::STANDARD {
            mask.set(*n);
        }
        let ops = vec![putfh(&root), getattr(mask)];
        let mut r = core.run(&cred, false, &|| ops.clone()).await?;
        r.ok(OP_PUTFH)?;
        let a = attrs::decode(&r.getattr()?)?;
        if let Some(lease) = a.lease_time {
            core.set_lease(lease);
        }
        let obj = attrs::to_fattr3(&a, &ids).ok();
        let fsinfo = attrs::fsinfo(&a, obj);
        let fore = core.fore_channel().await?;
        let read_room = fore.ca_maxresponsesize.saturating_sub(HEADER_ROOM / 4);
        let write_room = fore.ca_maxrequestsize.saturating_sub(HEADER_ROOM / 4);
        let rsize = transfer_size(fsinfo.rtmax, options.rsize, options.transfer_size_max().min(read_room));
        let wsize = transfer_size(fsinfo.wtmax, options.wsize, options.transfer_size_max().min(write_room));
        let read_only = AtomicBool::new(options.ro);
        Ok(Nfs4Client {
            inner: Arc::new(Inner {
                core,
                root,
                export,
                path_inside,
                options,
                fsinfo,
                rsize,
                wsize,
                read_only,
                ids,
                want_delegations: share.map(|i| i.want_delegations.clone()).unwrap_or_default(),
                delegations_max: share.map(|i| i.delegations_max.clone()).unwrap_or_else(|| {
                    Arc::new(AtomicUsize::new(crate::options::DELEGATIONS_MAX_DEFAULT as usize))
                }),
                dir_delegations: share
                    .map(|i| i.dir_delegations.clone())
                    .unwrap_or_else(|| Arc::new(AtomicBool::new(true))),
                delegate_new_dirs: share.map(|i| i.delegate_new_dirs.clone()).unwrap_or_default(),
                open_locks: share.map(|i| i.open_locks.clone()).unwrap_or_default(),
                closes: share.map(|i| i.closes.clone()).unwrap_or_default(),
                closer: share.map(|i| i.closer.clone()).unwrap_or_default(),
            }),
        })
    }

    /// A client whose root is `root` (a directory below this one), over
    /// the same session and connections.
    pub async fn rooted_at(&self, root: NfsFh3) -> NfsResult<Nfs4Client> {
        let i = &self.inner;
        let c = Self::rooted(
            i.core.clone(),
            root,
            i.export.clone(),
            "/".into(),
            i.options.clone(),
            i.ids.clone(),
            Some(i),
        )
        .await?;
        Ok(c)
    }

    /// The minor version spoken (1 or 2).
    pub fn minor_version(&self) -> u32 {
        self.inner.core.cfg.minor
    }

    /// `vers=` for the version spoken.
    pub fn version(&self) -> NfsVersion {
        if self.minor_version() == 1 {
            NfsVersion::V41
        } else {
            NfsVersion::V42
        }
    }

    /// Whether `self` and `other` share the session and connections.
    pub fn shares_connections_with(&self, other: &Nfs4Client) -> bool {
        Arc::ptr_eq(&self.inner.core, &other.inner.core)
    }

    pub fn rsize(&self) -> u32 {
        self.inner.rsize
    }

    pub fn wsize(&self) -> u32 {
        self.inner.wsize
    }

    pub fn options(&self) -> &MountOptions {
        &self.inner.options
    }

    /// The path of the root directory from the server's pseudo-root.
    pub fn export(&self) -> &str {
        &self.inner.export
    }

    /// The URL's path below the root (`/` for the root itself).
    pub fn path_inside(&self) -> &str {
        &self.inner.path_inside
    }

    /// The server's address (of several, the one in use now).
    pub fn server(&self) -> SocketAddr {
        self.inner.core.rpc.server()
    }

    /// The root's file system attributes, as answered at connect.
    pub fn server_fsinfo(&self) -> &Fsinfo3ResOk {
        &self.inner.fsinfo
    }

    /// The RPC transport (connection statistics and events).
    pub fn rpc(&self) -> &RpcClient {
        &self.inner.core.rpc
    }

    /// The session layer's counters.
    pub fn session_stats(&self) -> &SessionStats {
        &self.inner.core.stats
    }

    /// The back channel's counters.
    pub fn callback_stats(&self) -> &CallbackStats {
        &self.inner.core.callbacks.stats
    }

    /// This client's `co_ownerid`: what a server records to let it reclaim
    /// after a restart.
    pub fn client_owner(&self) -> Bytes {
        self.inner.core.cfg.owner.clone()
    }

    /// The current session id and client id (`None` while recovering).
    pub fn session_id(&self) -> Option<Sessionid4> {
        self.inner.core.session_id()
    }

    pub fn client_id(&self) -> Option<Clientid4> {
        self.inner.core.client_id()
    }

    /// The lease the server gave (renewed when idle for a third of it).
    pub fn lease(&self) -> std::time::Duration {
        self.inner.core.lease()
    }

    /// The credential the options ask for (`uid=`/`gid=`), else this process's.
    pub fn default_cred(&self) -> Cred {
        default_cred(&self.inner.options)
    }

    /// Refuse modifying calls (`true`), or allow them again.
    pub fn set_read_only(&self, read_only: bool) {
        self.inner.read_only.store(read_only, Ordering::Relaxed);
    }

    /// Try again an operation answered NFS4ERR_DELAY (the default, as
    /// RFC 8881 expects of a client), or return it as JUKEBOX (`false`).
    pub fn set_retry_jukebox(&self, on: bool) {
        self.inner.core.retry_delay.store(on, Ordering::Relaxed);
    }

    /// Ask for delegations with OPEN and keep them (the mount's cache uses
    /// them: [`Nfs4Client::delegated`]); recalls go to the hooks of
    /// [`Nfs4Client::set_callback_hooks`], or the delegation is returned at
    /// once. Off: every delegation a server grants anyway is returned.
    pub fn set_want_delegations(&self, on: bool) {
        self.inner.want_delegations.store(on, Ordering::Relaxed);
    }

    /// Ask for a delegation of each directory a MKDIR makes, in the same
    /// COMPOUND (when delegations are wanted): for a cache that then
    /// answers creates and removes in it without waiting (`dirops=async`).
    /// Off by default: another client's change of such a directory costs a
    /// recall.
    pub fn set_delegate_new_dirs(&self, on: bool) {
        self.inner.delegate_new_dirs.store(on, Ordering::Relaxed);
    }

    /// Hold at most `max` delegations: past it the least recently used are
    /// returned (DELEGRETURN), so neither side's table grows without bound.
    pub fn set_delegations_max(&self, max: u32) {
        self.inner.delegations_max.store(max.max(1) as usize, Ordering::Relaxed);
    }

    /// Whether this client holds a delegation of `fh` that still promises
    /// that no other client changes the file: granted, not recalled, and
    /// the lease known to hold (a client whose lease lapsed may have lost
    /// its delegations without being told). Counts as a use of it.
    pub fn delegated(&self, fh: &NfsFh3) -> bool {
        self.delegation_stateid(fh, false).is_some()
    }

    /// [`Nfs4Client::delegated`], by a write delegation: no other client
    /// may open the file until this one gives it back.
    pub fn write_delegated(&self, fh: &NfsFh3) -> bool {
        self.delegation_stateid(fh, true).is_some()
    }

    /// The change attribute and size file `fh` had when this client's write
    /// delegation of it was granted (see [`GrantedAttrs`]): what CB_GETATTR
    /// answers while nothing of the file is unwritten. `None`: no write
    /// delegation of it is held (recalled ones count: one being returned
    /// may still be asked), or its grant's reply carried no attributes.
    pub fn write_delegation_granted(&self, fh: &NfsFh3) -> Option<GrantedAttrs> {
        let st = self.inner.core.state.lock();
        st.held_delegation(&fh.data).filter(|d| d.write).and_then(|d| d.granted)
    }

    /// The stateid of the delegation of `fh` this client may use (see
    /// [`Nfs4Client::delegated`]); `write`: only a write delegation.
    fn delegation_stateid(&self, fh: &NfsFh3, write: bool) -> Option<Stateid4> {
        if !self.inner.want_delegations.load(Ordering::Relaxed) || !self.inner.core.lease_held() {
            return None;
        }
        let mut st = self.inner.core.state.lock();
        let d = st.delegation_for(&fh.data)?;
        (!write || d.write).then_some(d.stateid)
    }

    /// Who handles recalls and CB_GETATTR (see [`CallbackHooks`]).
    pub fn set_callback_hooks(&self, hooks: Option<Arc<dyn CallbackHooks>>) {
        self.inner.core.callbacks.set_hooks(hooks);
    }

    /// Delegations held now, as (file, stateid, write?).
    pub fn delegations(&self) -> Vec<(NfsFh4, Stateid4, bool)> {
        let st = self.inner.core.state.lock();
        st.delegations.values().map(|d| (d.fh.clone(), d.stateid, d.write)).collect()
    }

    /// How many delegations are held now.
    pub fn delegation_count(&self) -> usize {
        self.inner.core.state.lock().delegations.len()
    }

    /// Give delegation `stateid` of `fh` back (DELEGRETURN).
    pub async fn return_delegation(&self, fh: &NfsFh4, stateid: Stateid4) -> NfsResult<()> {
        self.inner.core.delegreturn(fh.clone(), stateid).await
    }

    /// End the session (and the client id, if no state is held). The
    /// client can still be used: the next call makes a new session.
    /// Delegations are given back first: a client id that holds some
    /// cannot be destroyed, and the server would keep them until our lease
    /// ran out, making any other client that wants one of those files wait
    /// on a recall no one answers.
    pub async fn unmount(&self) -> NfsResult<()> {
        self.send_closes(None).await;
        self.return_all_delegations().await;
        self.inner.core.destroy().await
    }

    /// Give every delegation back (DELEGRETURN), many per COMPOUND and
    /// several COMPOUNDs at once. Each stops being a promise at once.
    pub async fn return_all_delegations(&self) {
        use futures::stream::{self, StreamExt};
        let all: Vec<(NfsFh4, Stateid4)> = {
            let mut st = self.inner.core.state.lock();
            let all: Vec<_> = st.delegations.values().map(|d| (d.fh.clone(), d.stateid)).collect();
            for (_, s) in &all {
                st.recalled(&s.other);
            }
            all
        };
        if all.is_empty() {
            return;
        }
        let max_ops = match self.inner.core.fore_channel().await {
            Ok(f) => f.ca_maxoperations.clamp(4, OPS_MAX) as usize,
            Err(_) => 4,
        };
        let per = ((max_ops - 1) / 2).min(DELEGRETURNS_PER_COMPOUND);
        let cred = self.inner.core.cfg.machine.clone();
        let batches = all.chunks(per).map(|batch| {
            let cred = cred.clone();
            async move {
                let build = || {
                    batch
                        .iter()
                        .flat_map(|(fh, stateid)| {
                            [
                                ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                                ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: *stateid }),
                            ]
                        })
                        .collect()
                };
                // The COMPOUND stops at a refused one (revoked meanwhile): the rest go alone.
                let mut done = 0;
                if let Ok(mut r) = self.inner.core.run(&cred, true, &build).await {
                    while done < batch.len() && r.ok(OP_PUTFH).is_ok() && r.op(OP_DELEGRETURN).is_ok() {
                        self.inner.core.state.lock().remove_delegation(&batch[done].1.other);
                        self.inner.core.stats.delegreturns.fetch_add(1, Ordering::Relaxed);
                        done += 1;
                    }
                }
                for (fh, stateid) in &batch[done..] {
                    if let Err(e) = self.inner.core.delegreturn(fh.clone(), *stateid).await {
                        tracing::debug!("DELEGRETURN at unmount: {e}");
                        self.inner.core.state.lock().remove_delegation(&stateid.other);
                    }
                }
            }
        });
        stream::iter(batches).buffer_unordered(DELEGRETURN_COMPOUNDS_IN_FLIGHT).collect::<Vec<()>>().await;
    }

    fn writable(&self) -> NfsResult<()> {
        if self.inner.read_only.load(Ordering::Relaxed) {
            Err(NfsError::Nfs(Nfsstat3::Rofs))
        } else {
            Ok(())
        }
    }

    /// Run a COMPOUND, with CLOSEs left for later riding after its own
    /// operations (see [`Nfs4Client::close_soon`]).
    async fn run(
        &self,
        cred: &Cred,
        cachethis: bool,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
    ) -> NfsResult<Reply> {
        self.run_with_optional(cred, cachethis, build, 0).await
    }

    /// [`Nfs4Client::run`] where the last `optional` operations `build`
    /// makes are asked for in passing: their failure (an error ends the
    /// COMPOUND there) neither fails nor repeats the request, and their
    /// results, if any, are the reply's last.
    async fn run_with_optional(
        &self,
        cred: &Cred,
        cachethis: bool,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
        optional: usize,
    ) -> NfsResult<Reply> {
        let riders = self.take_closes(cred, build).await;
        // The operations that decide the request's status, and those that are its own.
        let main = std::sync::atomic::AtomicUsize::new(0);
        let own = std::sync::atomic::AtomicUsize::new(0);
        if riders.is_empty() {
            if optional == 0 {
                return self.inner.core.run(cred, cachethis, build).await;
            }
            let counted = || {
                let ops = build();
                main.store(ops.len().saturating_sub(optional), Ordering::Relaxed);
                ops
            };
            return self.inner.core.run_main(cred, cachethis, &counted, Some(&main)).await;
        }
        let with_closes = || {
            let mut ops = build();
            main.store(ops.len().saturating_sub(optional), Ordering::Relaxed);
            own.store(ops.len(), Ordering::Relaxed);
            ops.extend(self.close_ops(&riders));
            ops
        };
        let r = self.inner.core.run_main(cred, cachethis, &with_closes, Some(&main)).await;
        match r {
            Ok(mut reply) => {
                let tail = reply.split_off_after(main.load(Ordering::Relaxed), own.load(Ordering::Relaxed));
                self.closes_done(riders, tail);
                Ok(reply)
            }
            Err(e) => {
                self.closes_done(riders, Vec::new());
                Err(e)
            }
        }
    }

    fn fattr3(&self, f: &Fattr4) -> NfsResult<Fattr3> {
        attrs::fattr3_of(f, &self.inner.ids)
    }

    fn fattr3_opt(&self, f: Option<Fattr4>) -> Option<Fattr3> {
        f.and_then(|f| self.fattr3(&f).ok())
    }

    /// The open owner of `uid` on the current client id.
    fn open_owner(&self, uid: u32) -> StateOwner4 {
        StateOwner4 {
            clientid: self.inner.core.client_id().unwrap_or_default(),
            owner: Opaque(open_owner_name(uid)),
        }
    }

    /// `share_access` with this client's wish about delegations.
    /// OPEN of the current file handle (CLAIM_FH, no create, deny none)
    /// for `uid`'s open-owner.
    fn open_fh(&self, uid: u32, share_access: u32) -> ArgOp {
        ArgOp::Open(Open4Args {
            seqid: 0,
            share_access,
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: self.open_owner(uid),
            openhow: Openflag4::NoCreate,
            claim: OpenClaim4::Fh,
        })
    }

    fn share_access(&self, access: u32) -> u32 {
        if self.inner.want_delegations.load(Ordering::Relaxed) {
            access
        } else {
            access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG
        }
    }

    /// Keep a delegation an OPEN brought (if delegations are wanted), or give it back.
    /// `file_attrs`: the file's attributes from the GETATTR after that OPEN in its COMPOUND
    /// (a write delegation keeps their change attribute and size for CB_GETATTR).
    fn got_delegation(&self, fh: &NfsFh3, d: &OpenDelegation4, file_attrs: Option<&Fattr4>) {
        let Some((stateid, write)) = d.granted() else { return };
        use super::callback::Owner;
        if self.inner.want_delegations.load(Ordering::Relaxed) {
            let max = self.inner.delegations_max.load(Ordering::Relaxed);
            let granted =
                file_attrs.and_then(|f| attrs::decode(f).ok()).and_then(|a| match (a.change, a.size) {
                    (Some(change), Some(size)) => Some(GrantedAttrs { change, size }),
                    _ => None,
                });
            let evicted = self.inner.core.state.lock().add_delegation(fh4(fh), stateid, write, granted, max);
            for (fh, stateid) in evicted {
                // As a recall: what is written under it goes to the server first.
                self.inner.core.callbacks.give_back(fh, stateid);
            }
        } else {
            self.inner.core.return_delegation(fh4(fh), stateid);
        }
    }

    /// Whether a listing of `dir` from its start should ask for a delegation
    /// of it: delegations wanted, the server not known to refuse them, none
    /// held.
    fn may_ask_dir_delegation(&self, dir: &NfsFh3) -> bool {
        self.inner.want_delegations.load(Ordering::Relaxed)
            && self.inner.dir_delegations.load(Ordering::Relaxed)
            && self.inner.core.lease_held()
            && self.inner.core.state.lock().held_delegation(&dir.data).is_none()
    }

    /// The tail of a GETATTR that asked for a delegation of `dir`
    /// (GET_DIR_DELEGATION, GETATTR): keep one granted if the directory's
    /// attributes after the grant are those from before it (`before`, but
    /// for the access time), so that what the caller checks against them
    /// is what the promise covers; else give it back at once. Directory
    /// delegations are kept and given back as read delegations of files are
    /// (a recall drops them: nothing to write back).
    fn got_dir_delegation(&self, dir: &NfsFh3, before: &Fattr3, r: &mut Reply) {
        let granted = match r.skip() {
            Some(ResOp::GetDirDelegation(Res4::Ok(GetDirDelegation4Res::Granted(ok)))) => ok.stateid,
            Some(ResOp::GetDirDelegation(Res4::Err(Nfsstat4::Notsupp)) | ResOp::Illegal(_)) => {
                tracing::debug!("the server does not grant directory delegations: not asked again");
                self.inner.dir_delegations.store(false, Ordering::Relaxed);
                return;
            }
            // GDD4_UNAVAIL, or a refusal that may pass (DELAY, …).
            _ => return,
        };
        use super::callback::Owner;
        let after = self.fattr3_opt(r.getattr_opt());
        let unchanged = after.is_some_and(|a| Fattr3 { atime: a.atime, ..*before } == a);
        if unchanged && self.inner.want_delegations.load(Ordering::Relaxed) {
            let max = self.inner.delegations_max.load(Ordering::Relaxed);
            let evicted = self.inner.core.state.lock().add_delegation(fh4(dir), granted, false, None, max);
            for (fh, stateid) in evicted {
                self.inner.core.callbacks.give_back(fh, stateid);
            }
        } else {
            self.inner.core.return_delegation(fh4(dir), granted);
        }
    }

    /// The stateid for I/O on `fh`: an open's (see `StateTable::io_stateid`),
    /// else a delegation's that covers it, else the anonymous one.
    fn io_stateid(&self, fh: &NfsFh3, uid: u32, write: bool) -> Stateid4 {
        let s = self.inner.core.state.lock().io_stateid(&fh.data, uid, write);
        if s != Stateid4::ANONYMOUS {
            return s;
        }
        match self.delegation_stateid(fh, write) {
            Some(d) => Stateid4 { seqid: 0, other: d.other },
            // A recalled write delegation still covers the write-back the
            // recall waits for (RFC 8881 §10.2: flushed before DELEGRETURN).
            None if write => match self.inner.core.state.lock().held_delegation(&fh.data) {
                Some(d) if d.write => Stateid4 { seqid: 0, other: d.stateid.other },
                _ => s,
            },
            None => s,
        }
    }

    /// `stateid` was `fh`'s delegation's and the server refused it: forget
    /// that delegation. Whether it was one.
    fn forget_delegation_of(&self, fh: &NfsFh3, stateid: &Stateid4) -> bool {
        let mut st = self.inner.core.state.lock();
        let ours = st.delegations.get(&stateid.other).is_some_and(|d| d.fh.data[..] == fh.data[..]);
        if ours {
            st.remove_delegation(&stateid.other);
        }
        ours
    }

    /// One async lock per open key, held while its OPEN or CLOSE runs.
    fn open_lock(&self, key: &OpenKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut m = self.inner.open_locks.lock();
        if m.len() >= OPEN_LOCKS_KEPT {
            // Those no one holds or waits for go.
            m.retain(|_, l| Arc::strong_count(l) > 1);
        }
        m.entry(key.clone()).or_default().clone()
    }
}

/// Walk `comps` from `start` (the pseudo-root if `None`) in as few
/// COMPOUNDs as the session allows: each component's handle and attributes,
/// `start` first, as far as the walk got (it stops at a name that does not
/// exist). Any other error is returned.
async fn walk(
    core: &Core,
    ids: &IdMapper,
    cred: &Cred,
    start: Option<&NfsFh3>,
    comps: &[&str],
) -> NfsResult<Vec<(NfsFh3, Fattr3)>> {
    let max_ops = core.fore_channel().await?.ca_maxoperations.clamp(4, OPS_MAX) as usize;
    let per = ((max_ops - 3) / 3).max(1);
    let mut out: Vec<(NfsFh3, Fattr3)> = Vec::new();
    let mut at: Option<NfsFh3> = start.cloned();
    let mut first = true;
    let mut rest = comps;
    loop {
        let chunk = &rest[..rest.len().min(per)];
        let mut ops = vec![match &at {
            Some(fh) => putfh(fh),
            None => ArgOp::Putrootfh(()),
        }];
        if first {
            ops.push(ArgOp::Getfh(()));
            ops.push(std_getattr());
        }
        for c in chunk {
            let objname = component(c.as_bytes())?;
            ops.push(if *c == ".." { ArgOp::Lookupp(()) } else { ArgOp::Lookup(Lookup4Args { objname }) });
            ops.push(ArgOp::Getfh(()));
            ops.push(std_getattr());
        }
        let mut r = core.run(cred, false, &|| ops.clone()).await?;
        r.op(if at.is_some() { OP_PUTFH } else { OP_PUTROOTFH })?;
        if first {
            let fh = fh3(r.getfh()?)?;
            let a = attrs::fattr3_of(&r.getattr()?, ids)?;
            out.push((fh, a));
            first = false;
        }
        for c in chunk {
            match r.op(if *c == ".." { OP_LOOKUPP } else { OP_LOOKUP }) {
                Ok(_) => {}
                Err(NfsError::Nfs(Nfsstat3::Noent | Nfsstat3::Notdir))
                | Err(NfsError::Nfs4(Nfsstat4::Symlink)) => return Ok(out),
                Err(e) => return Err(e),
            }
            let fh = fh3(r.getfh()?)?;
            let a = attrs::fattr3_of(&r.getattr()?, ids)?;
            out.push((fh.clone(), a));
            at = Some(fh);
        }
        rest = &rest[chunk.len()..];
        if rest.is_empty() {
            return Ok(out);
        }
    }
}

impl Nfs4Client {
    /// Walk `path` (`/`-separated, below the root) in one COMPOUND (more if
    /// the session limits operations): handle and attributes of the last
    /// component. Symbolic links are not followed.
    pub async fn lookup_path(&self, cred: &Cred, path: &str) -> NfsResult<(NfsFh3, Fattr3)> {
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        let core = &self.inner.core;
        let max_ops = core.fore_channel().await?.ca_maxoperations.clamp(4, OPS_MAX) as usize;
        let per = (max_ops - 3).max(1);
        let mut at = self.inner.root.clone();
        let mut rest = &comps[..];
        loop {
            let chunk = &rest[..rest.len().min(per)];
            let mut ops = vec![putfh(&at)];
            for c in chunk {
                ops.push(if *c == ".." {
                    ArgOp::Lookupp(())
                } else {
                    ArgOp::Lookup(Lookup4Args { objname: component(c.as_bytes())? })
                });
            }
            ops.push(ArgOp::Getfh(()));
            ops.push(std_getattr());
            let mut r = self.run(cred, false, &|| ops.clone()).await?;
            r.ok(OP_PUTFH)?;
            for c in chunk {
                r.ok(if *c == ".." { OP_LOOKUPP } else { OP_LOOKUP })?;
            }
            let fh = fh3(r.getfh()?)?;
            let a = self.fattr3(&r.getattr()?)?;
            rest = &rest[chunk.len()..];
            if rest.is_empty() {
                return Ok((fh, a));
            }
            at = fh;
        }
    }
}

// ------------------------------------------------------------ opens, locks

impl Nfs4Client {
    /// Open `fh` for `access` as `cred`'s open owner: an OPEN the first
    /// time (or when more access is needed), a count after that. Every
    /// `open` needs its [`Nfs4Client::close`]. READ and WRITE through
    /// [`NfsOps`] use the open's stateid while it is held.
    pub async fn open(&self, cred: &Cred, fh: &NfsFh3, access: OpenAccess) -> NfsResult<OpenFile> {
        if access != OpenAccess::Read {
            self.writable()?;
        }
        let key = OpenKey { fh: fh.data.0.clone(), uid: cred.uid };
        let lock = self.open_lock(&key);
        let _held = lock.lock().await;
        let covered = self
            .inner
            .core
            .state
            .lock()
            .opens
            .get(&key)
            .is_some_and(|o| o.access & access.bits() == access.bits());
        if covered {
            self.inner.core.state.lock().add_local(&key, access);
            self.take_up(&key);
            return Ok(OpenFile { fh: fh.clone(), uid: cred.uid, access });
        }
        let want = {
            let st = self.inner.core.state.lock();
            st.opens.get(&key).map_or(0, |o| o.access) | access.bits()
        };
        let build = || vec![putfh(fh), self.open_fh(cred.uid, self.share_access(want))];
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        let ok = r.open()?;
        {
            let mut st = self.inner.core.state.lock();
            st.opened(key.clone(), fh4(fh), open_owner_name(cred.uid), cred, access, ok.stateid);
            if let Some(o) = st.opens.get_mut(&key) {
                o.access |= want;
            }
        }
        self.take_up(&key);
        self.got_delegation(fh, &ok.delegation, None);
        Ok(OpenFile { fh: fh.clone(), uid: cred.uid, access })
    }

    /// End one [`Nfs4Client::open`]: CLOSE after the last, OPEN_DOWNGRADE
    /// when the opens left need less access.
    pub async fn close(&self, cred: &Cred, f: &OpenFile) -> NfsResult<()> {
        self.close_as(cred, f, false).await
    }

    /// [`Nfs4Client::close`], but the CLOSE after the last local open is
    /// left for later: it rides on the next COMPOUND this client sends as
    /// the same user (an untar's next file's OPEN carries the last one's
    /// CLOSE), or goes alone once it has waited [`CLOSE_DELAY`] for one.
    /// The open's data and attributes are on the server already; what
    /// waits is only the end of the open, which no other client needs (this
    /// client never denies access), and an open of the file meanwhile takes
    /// it up again. Locks held through it are released before this returns.
    pub async fn close_soon(&self, cred: &Cred, f: &OpenFile) -> NfsResult<()> {
        self.close_as(cred, f, true).await
    }

    async fn close_as(&self, cred: &Cred, f: &OpenFile, later: bool) -> NfsResult<()> {
        let key = OpenKey { fh: f.fh.data.0.clone(), uid: f.uid };
        let lock = self.open_lock(&key);
        let _held = lock.lock().await;
        let action = self.inner.core.state.lock().drop_local(&key, f.access);
        match action {
            None | Some(CloseAction::Nothing) => Ok(()),
            Some(CloseAction::Downgrade(stateid, access)) => {
                let build = || {
                    vec![
                        putfh(&f.fh),
                        ArgOp::OpenDowngrade(OpenDowngrade4Args {
                            open_stateid: self.current_open_stateid(&key).unwrap_or(stateid),
                            seqid: 0,
                            share_access: access,
                            share_deny: OPEN4_SHARE_DENY_NONE,
                        }),
                    ]
                };
                let mut r = self.run(cred, true, &build).await?;
                r.ok(OP_PUTFH)?;
                let s = r.downgrade()?;
                self.inner.core.state.lock().closed(&key, Some((s, access)));
                Ok(())
            }
            Some(CloseAction::Close(stateid)) => {
                // POSIX: the last close of a file releases its owners' locks.
                for (owner, _) in self.held_locks(&f.fh, f.uid) {
                    self.unlock(cred, &f.fh, owner, 0, u64::MAX).await?;
                }
                self.forget_idle_locks(&f.fh, f.uid);
                if later {
                    self.leave_close(key, &f.fh, cred);
                    return Ok(());
                }
                let build = || {
                    vec![
                        putfh(&f.fh),
                        ArgOp::Close(Close4Args {
                            seqid: 0,
                            open_stateid: self.current_open_stateid(&key).unwrap_or(stateid),
                        }),
                    ]
                };
                let r = self.run(cred, true, &build).await;
                // Whatever the server says, this open is over here.
                self.inner.core.state.lock().closed(&key, None);
                let mut r = r?;
                r.ok(OP_PUTFH)?;
                match r.close() {
                    // The server forgot it already (an expired lease): nothing is held.
                    Ok(_) | Err(NfsError::Nfs4(Nfsstat4::BadStateid | Nfsstat4::Expired)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn current_open_stateid(&self, key: &OpenKey) -> Option<Stateid4> {
        self.inner.core.state.lock().opens.get(key).map(|o| o.stateid)
    }

    /// The lock owners holding ranges of `fh` through `uid`'s open.
    fn held_locks(&self, fh: &NfsFh3, uid: u32) -> Vec<(u64, usize)> {
        let st = self.inner.core.state.lock();
        st.locks
            .iter()
            .filter(|(k, l)| k.fh[..] == fh.data[..] && l.open_uid == uid && !l.ranges.is_empty())
            .map(|(k, l)| (k.owner, l.ranges.len()))
            .collect()
    }

    /// Forget the lock state of `fh` through `uid`'s open that holds no
    /// range (the server frees it with the CLOSE).
    fn forget_idle_locks(&self, fh: &NfsFh3, uid: u32) {
        let mut st = self.inner.core.state.lock();
        st.locks.retain(|k, l| !(k.fh[..] == fh.data[..] && l.open_uid == uid && l.ranges.is_empty()));
    }

    /// Take a byte-range lock for local lock owner `owner` (a process, or an
    /// open file description) on a file this client has open
    /// ([`Nfs4Client::open`]). `length` all ones: to the end. Another
    /// owner's lock in the way is `Err(NfsError::Nfs4(Nfsstat4::Denied))`
    /// (EAGAIN): a caller that waits asks again after a pause.
    pub async fn lock(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        owner: u64,
        write: bool,
        offset: u64,
        length: u64,
    ) -> NfsResult<()> {
        self.lock_as(cred, fh, owner, write, offset, length, false).await
    }

    /// [`Nfs4Client::lock`] for a caller that waits for the lock (`fcntl`'s
    /// F_SETLKW): asked as a blocking lock (READW_LT/WRITEW_LT), which tells
    /// the server someone will ask again (RFC 8881 §9.6: it may keep the
    /// lock for us a while, and notify us with CB_NOTIFY_LOCK). A conflict
    /// is still `Err(NfsError::Nfs4(Nfsstat4::Denied))`: ask again later.
    pub async fn lock_blocking(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        owner: u64,
        write: bool,
        offset: u64,
        length: u64,
    ) -> NfsResult<()> {
        self.lock_as(cred, fh, owner, write, offset, length, true).await
    }

    /// The local lock owner (as given to [`Nfs4Client::lock`]) of a
    /// conflict, if the lock in the way is this client's own.
    pub fn own_lock_owner(&self, c: &LockConflict) -> Option<u64> {
        if Some(c.clientid) != self.client_id() {
            return None;
        }
        let name = std::str::from_utf8(&c.owner).ok()?;
        u64::from_str_radix(name.strip_prefix("lock ")?, 16).ok()
    }

    /// Whether local lock owner `owner` holds any range of `fh` here.
    pub fn holds_lock(&self, fh: &NfsFh3, owner: u64) -> bool {
        let key = LockKey { fh: fh.data.0.clone(), owner };
        self.inner.core.state.lock().locks.get(&key).is_some_and(|l| !l.ranges.is_empty())
    }

    #[allow(clippy::too_many_arguments)]
    async fn lock_as(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        owner: u64,
        write: bool,
        offset: u64,
        length: u64,
        blocking: bool,
    ) -> NfsResult<()> {
        let key = LockKey { fh: fh.data.0.clone(), owner };
        let open_uid = {
            let st = self.inner.core.state.lock();
            let own = OpenKey { fh: fh.data.0.clone(), uid: cred.uid };
            if st.opens.contains_key(&own) {
                Some(cred.uid)
            } else {
                st.opens.keys().find(|k| k.fh[..] == fh.data[..]).map(|k| k.uid)
            }
        };
        let Some(open_uid) = open_uid else {
            // NFSv4 locks hang off an open.
            return Err(NfsError::Nfs4(Nfsstat4::BadStateid));
        };
        let build = || {
            let st = self.inner.core.state.lock();
            let locker = match st.locks.get(&key).and_then(|l| l.stateid) {
                Some(s) => Locker4::Existing(ExistLockOwner4 { lock_stateid: s, lock_seqid: 0 }),
                None => Locker4::NewOwner(OpenToLockOwner4 {
                    open_seqid: 0,
                    open_stateid: st
                        .opens
                        .get(&OpenKey { fh: fh.data.0.clone(), uid: open_uid })
                        .map_or(Stateid4::ANONYMOUS, |o| o.stateid),
                    lock_seqid: 0,
                    lock_owner: StateOwner4 {
                        clientid: self.inner.core.client_id().unwrap_or_default(),
                        owner: Opaque(lock_owner_name(owner)),
                    },
                }),
            };
            vec![
                putfh(fh),
                ArgOp::Lock(Lock4Args {
                    locktype: match (write, blocking) {
                        (true, false) => NfsLockType4::WriteLt,
                        (false, false) => NfsLockType4::ReadLt,
                        (true, true) => NfsLockType4::WritewLt,
                        (false, true) => NfsLockType4::ReadwLt,
                    },
                    reclaim: false,
                    offset,
                    length,
                    locker,
                }),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        match r.lock()? {
            Ok(stateid) => {
                let mut st = self.inner.core.state.lock();
                let l = st.locks.entry(key).or_insert_with(|| Locks {
                    fh: fh4(fh),
                    stateid: None,
                    open_uid,
                    ranges: Vec::new(),
                });
                l.stateid = Some(stateid);
                let end = end_of(offset, length);
                cut(&mut l.ranges, offset, end);
                l.ranges.push(Range { offset, end, write });
                Ok(())
            }
            Err(_denied) => Err(NfsError::Nfs4(Nfsstat4::Denied)),
        }
    }

    /// Release `owner`'s locks on `[offset, offset + length)`.
    pub async fn unlock(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        owner: u64,
        offset: u64,
        length: u64,
    ) -> NfsResult<()> {
        let key = LockKey { fh: fh.data.0.clone(), owner };
        let Some(stateid) = self.inner.core.state.lock().locks.get(&key).and_then(|l| l.stateid) else {
            return Ok(()); // nothing held
        };
        let build = || {
            let stateid =
                self.inner.core.state.lock().locks.get(&key).and_then(|l| l.stateid).unwrap_or(stateid);
            vec![
                putfh(fh),
                ArgOp::Locku(Locku4Args {
                    locktype: NfsLockType4::WriteLt,
                    seqid: 0,
                    lock_stateid: stateid,
                    offset,
                    length,
                }),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        let s = r.locku()?;
        let mut st = self.inner.core.state.lock();
        if let Some(l) = st.locks.get_mut(&key) {
            l.stateid = Some(s);
            cut(&mut l.ranges, offset, end_of(offset, length));
        }
        Ok(())
    }

    /// The lock that would stop `owner` from taking this one, if any (LOCKT).
    pub async fn test_lock(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        owner: u64,
        write: bool,
        offset: u64,
        length: u64,
    ) -> NfsResult<Option<LockConflict>> {
        let build = || {
            vec![
                putfh(fh),
                ArgOp::Lockt(Lockt4Args {
                    locktype: if write { NfsLockType4::WriteLt } else { NfsLockType4::ReadLt },
                    offset,
                    length,
                    owner: StateOwner4 {
                        clientid: self.inner.core.client_id().unwrap_or_default(),
                        owner: Opaque(lock_owner_name(owner)),
                    },
                }),
            ]
        };
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        Ok(r.lockt()?.map(|d| LockConflict {
            offset: d.offset,
            length: d.length,
            write: d.locktype.is_write(),
            owner: d.owner.owner.0,
            clientid: d.owner.clientid,
        }))
    }
}

// ------------------------------------------------------------ compounds beyond NFSv3

impl Nfs4Client {
    /// Create `name` in `dir` and open it, in one COMPOUND: OPEN (create),
    /// GETFH, GETATTR, and the directory's GETATTR. `exclusive`: EXCLUSIVE4_1
    /// with this verifier (exactly once; set the attributes after);
    /// otherwise GUARDED (`EEXIST` if the name exists) or, with `guarded`
    /// false, UNCHECKED. The open is held: [`Nfs4Client::close`] it (or
    /// [`Nfs4Client::write_close`]).
    pub async fn create_open(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        how: CreateHow,
        access: OpenAccess,
    ) -> NfsResult<(OpenFile, Create3ResOk)> {
        let (f, res, _rflags) = self.create_open_flags(cred, dir, name, attrs, how, access).await?;
        Ok((f, res))
    }

    /// [`Nfs4Client::create_open`], with OPEN's result flags.
    async fn create_open_flags(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        how: CreateHow,
        access: OpenAccess,
    ) -> NfsResult<(OpenFile, Create3ResOk, u32)> {
        self.writable()?;
        let objname = component(name)?;
        let createhow = match how {
            CreateHow::Exclusive(verf) => Createhow4::Exclusive41 { verf, attrs: attrs::to_fattr4(&attrs) },
            CreateHow::Guarded => Createhow4::Guarded(attrs::to_fattr4(&attrs)),
            CreateHow::Unchecked => Createhow4::Unchecked(attrs::to_fattr4(&attrs)),
        };
        let build = || {
            vec![
                putfh(dir),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: self.share_access(access.bits()),
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: self.open_owner(cred.uid),
                    openhow: Openflag4::Create(createhow.clone()),
                    claim: OpenClaim4::Null(objname.clone()),
                }),
                ArgOp::Getfh(()),
                std_getattr(),
                putfh(dir),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        let ok = r.open()?;
        let fh = fh3(r.getfh()?)?;
        let obj_fattr = r.getattr_opt();
        let obj_attributes = obj_fattr.as_ref().and_then(|f| self.fattr3(f).ok());
        let dir_attrs = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        let key = OpenKey { fh: fh.data.0.clone(), uid: cred.uid };
        {
            let lock = self.open_lock(&key);
            let _held = lock.lock().await;
            self.inner.core.state.lock().opened(
                key.clone(),
                fh4(&fh),
                open_owner_name(cred.uid),
                cred,
                access,
                ok.stateid,
            );
            self.take_up(&key);
        }
        self.got_delegation(&fh, &ok.delegation, obj_fattr.as_ref());
        let res = Create3ResOk { obj: Some(fh.clone()), obj_attributes, dir_wcc: wcc(dir_attrs) };
        Ok((OpenFile { fh, uid: cred.uid, access }, res, ok.rflags))
    }

    /// Write `data` at `offset` FILE_SYNC, set `times` (and whatever else
    /// `times` holds) and end the open `f`, in one COMPOUND: a small file
    /// written and closed in one round trip. The CLOSE is sent only when
    /// `f` is the last local open of the file and no lock is held through
    /// it; otherwise the open stays (and `f` with it: close it later).
    pub async fn write_close(
        &self,
        cred: &Cred,
        f: &OpenFile,
        offset: u64,
        data: Bytes,
        times: Option<Sattr3>,
    ) -> NfsResult<WriteClose> {
        let (w, _closed) = self.write_sync(cred, &f.fh, offset, data, times, Some((f.uid, f.access))).await?;
        Ok(w)
    }

    /// [`NfsOps::create_written`] in one COMPOUND: PUTFH of the directory,
    /// OPEN (create, GUARDED, no delegation wanted), GETFH, WRITE FILE_SYNC
    /// and SETATTR through the open (the current stateid), GETATTR, CLOSE,
    /// then the directory's GETATTR. If the OPEN made the file and a later
    /// operation failed, the open is closed in a call of its own and that
    /// failure returned (the file stays, made, with what was written).
    pub async fn create_written(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        data: Bytes,
        then: Option<Sattr3>,
    ) -> NfsResult<CreatedWritten> {
        self.writable()?;
        let objname = component(name)?;
        let createhow = Createhow4::Guarded(attrs::to_fattr4(&attrs));
        let build = || {
            let mut ops = vec![
                putfh(dir),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: OPEN4_SHARE_ACCESS_WRITE | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: self.open_owner(cred.uid),
                    openhow: Openflag4::Create(createhow.clone()),
                    claim: OpenClaim4::Null(objname.clone()),
                }),
                ArgOp::Getfh(()),
            ];
            if !data.is_empty() {
                ops.push(ArgOp::Write(Write4Args {
                    stateid: Stateid4::CURRENT,
                    offset: 0,
                    stable: StableHow4::FileSync4,
                    data: data.clone(),
                }));
            }
            if let Some(t) = &then {
                ops.push(ArgOp::Setattr(Setattr4Args {
                    stateid: Stateid4::ANONYMOUS,
                    obj_attributes: attrs::to_fattr4(t),
                }));
            }
            ops.push(std_getattr());
            ops.push(ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }));
            ops.push(putfh(dir));
            ops.push(std_getattr());
            ops
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        let ok = r.open()?;
        let fh = fh3(r.getfh()?)?;
        let rest: NfsResult<Option<Fattr4>> = (|| {
            if !data.is_empty() {
                r.write()?;
            }
            if then.is_some() {
                r.setattr()?;
            }
            let a = r.getattr_opt();
            r.close()?;
            Ok(a)
        })();
        let file = match rest {
            Ok(a) => a,
            Err(e) => {
                // Made, but not all of it: end the open the server keeps.
                let close =
                    || vec![putfh(&fh), ArgOp::Close(Close4Args { seqid: 0, open_stateid: ok.stateid })];
                if let Err(c) = self.run(cred, true, &close).await {
                    tracing::debug!("closing a file made in one COMPOUND whose write failed: {c}");
                }
                return Err(e);
            }
        };
        // A server may grant one anyway: keep it as any other.
        self.got_delegation(&fh, &ok.delegation, file.as_ref());
        let dir_attrs = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        let attrs = file.as_ref().and_then(|f| self.fattr3(f).ok());
        Ok(CreatedWritten { obj: fh, attrs, dir_wcc: wcc(dir_attrs) })
    }

    /// WRITE FILE_SYNC, [SETATTR], GETATTR and, with `close` (the uid and
    /// access of a local open), CLOSE if that was the last local open of
    /// the file and it holds no locks (the locks would go with it). Returns
    /// whether that local open is over (else it is still counted).
    async fn write_sync(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        times: Option<Sattr3>,
        close: Option<(u32, OpenAccess)>,
    ) -> NfsResult<(WriteClose, bool)> {
        self.writable()?;
        let key = OpenKey { fh: fh.data.0.clone(), uid: close.map_or(cred.uid, |(uid, _)| uid) };
        let lock = self.open_lock(&key);
        let _held = lock.lock().await;
        // What ending the local open asks of the server now.
        let mut ended = false;
        let mut send_close = false;
        if let Some((uid, access)) = close {
            if self.held_locks(fh, uid).is_empty() {
                let mut st = self.inner.core.state.lock();
                match st.drop_local(&key, access) {
                    Some(CloseAction::Close(_)) => send_close = true,
                    // Other local opens still need all it has: nothing to send.
                    Some(CloseAction::Nothing) => ended = true,
                    // A narrower open is left: the caller's close downgrades it.
                    Some(CloseAction::Downgrade(..)) => {
                        st.add_local(&key, access);
                    }
                    None => {}
                }
            }
        }
        let count = data.len() as u32;
        let build = || {
            let stateid = match self.current_open_stateid(&key) {
                Some(s) if close.is_some() => Stateid4 { seqid: 0, ..s },
                _ => self.io_stateid(fh, cred.uid, true),
            };
            let mut ops = vec![
                putfh(fh),
                ArgOp::Write(Write4Args {
                    stateid,
                    offset,
                    stable: StableHow4::FileSync4,
                    data: data.clone(),
                }),
            ];
            if let Some(t) = &times {
                ops.push(ArgOp::Setattr(Setattr4Args { stateid, obj_attributes: attrs::to_fattr4(t) }));
            }
            ops.push(std_getattr());
            if send_close {
                ops.push(ArgOp::Close(Close4Args {
                    seqid: 0,
                    open_stateid: self.current_open_stateid(&key).unwrap_or(stateid),
                }));
            }
            ops
        };
        let reopen = |this: &Self| {
            // The CLOSE did not run: the open is still there, and counted again.
            if let (true, Some((_, access))) = (send_close, close) {
                this.inner.core.state.lock().add_local(&key, access);
            }
        };
        let mut r = match self.run(cred, true, &build).await {
            Ok(r) => r,
            Err(e) => {
                reopen(self);
                return Err(e);
            }
        };
        let w = match r.ok(OP_PUTFH).and_then(|()| r.write()) {
            Ok(w) => w,
            Err(e) => {
                reopen(self);
                return Err(e);
            }
        };
        let setattr = times.map(|_| r.setattr().map(|_| ()));
        let attrs = self.fattr3_opt(r.getattr_opt());
        if send_close {
            match r.skip().map(|c| c.status()) {
                // Gone from the server either way (an expired lease forgot it).
                Some(Nfsstat4::Ok | Nfsstat4::BadStateid | Nfsstat4::Expired) => {
                    self.inner.core.state.lock().closed(&key, None);
                    ended = true;
                }
                _ => reopen(self),
            }
        }
        let write = Write3ResOk {
            file_wcc: wcc(attrs),
            count: w.count.min(count),
            committed: stable3(w.committed),
            verf: w.writeverf,
        };
        Ok((WriteClose { write, setattr, attrs }, ended))
    }

    /// Read up to `count` bytes from the start of `fh` in one COMPOUND:
    /// OPEN, GETATTR, READ with the open's stateid, CLOSE (a cold `cat` of a
    /// small file). When this client holds an open of the file already, its
    /// stateid is used and nothing is opened or closed.
    pub async fn read_whole(&self, cred: &Cred, fh: &NfsFh3, count: u32) -> NfsResult<ReadWhole> {
        let held = self.io_stateid(fh, cred.uid, false) != Stateid4::ANONYMOUS;
        let build = || {
            if held {
                return vec![
                    putfh(fh),
                    std_getattr(),
                    ArgOp::Read(Read4Args {
                        stateid: self.io_stateid(fh, cred.uid, false),
                        offset: 0,
                        count,
                    }),
                ];
            }
            vec![
                putfh(fh),
                self.open_fh(cred.uid, OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG),
                std_getattr(),
                ArgOp::Read(Read4Args { stateid: Stateid4::CURRENT, offset: 0, count }),
                ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }),
            ]
        };
        // Not kept for a retry (the reply holds the data, more than a slot
        // keeps); run twice, an OPEN and CLOSE of the same file leave nothing.
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let ok = if held { None } else { Some(r.open()?) };
        let fattr = r.getattr_opt();
        if let Some(ok) = ok {
            self.got_delegation(fh, &ok.delegation, fattr.as_ref());
        }
        let attrs = self.fattr3_opt(fattr);
        let read = r.read()?;
        Ok(ReadWhole { data: read.data, eof: read.eof, attrs })
    }

    /// [`NfsOps::read_files`]: for each file, PUTFH, ACCESS, OPEN for
    /// reading (a delegation wanted), GETATTR, READ with the open's stateid
    /// and CLOSE, all in one COMPOUND of at most [`FILES_READ_MAX`] files
    /// (fewer if the session takes fewer operations). Only when delegations
    /// are wanted: without one, what is read here would be asked for again
    /// at the file's open. Never tried again: a server that answers DELAY
    /// (a file another client holds, being recalled) or GRACE stops it
    /// there, and what came before is kept.
    pub async fn read_files(&self, cred: &Cred, files: &[FileToRead]) -> NfsResult<Vec<FileRead>> {
        if !self.inner.want_delegations.load(Ordering::Relaxed) || files.is_empty() {
            return Ok(Vec::new());
        }
        let max_ops = self.inner.core.fore_channel().await?.ca_maxoperations.clamp(4, OPS_MAX) as usize;
        let n_max = ((max_ops - 1) / FILE_READ_OPS).min(FILES_READ_MAX);
        // Files this user holds (or is making, or closing) no open of: an
        // open in use reads through its own stateid, and an OPEN here
        // would change its share.
        let mut picked = Vec::new();
        for (index, f) in files.iter().enumerate() {
            if picked.len() == n_max {
                break;
            }
            if self.delegated(&f.fh) {
                continue;
            }
            let key = OpenKey { fh: f.fh.data.0.clone(), uid: cred.uid };
            let Ok(guard) = self.open_lock(&key).try_lock_owned() else { continue };
            if self.inner.core.state.lock().opens.contains_key(&key) {
                continue;
            }
            picked.push((index, key, guard));
        }
        if picked.is_empty() {
            return Ok(Vec::new());
        }
        let build = || {
            let mut ops = Vec::with_capacity(picked.len() * FILE_READ_OPS);
            for (index, _, _) in &picked {
                let f = &files[*index];
                ops.push(putfh(&f.fh));
                ops.push(ArgOp::Access(Access4Args { access: f.check }));
                ops.push(self.open_fh(cred.uid, self.share_access(OPEN4_SHARE_ACCESS_READ)));
                ops.push(std_getattr());
                ops.push(ArgOp::Read(Read4Args { stateid: Stateid4::CURRENT, offset: 0, count: f.count }));
                ops.push(ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }));
            }
            ops
        };
        // None of it is the request proper (`main` 0): nothing is tried
        // again, and the reply, holding file data, is not kept by the slot.
        let main = AtomicUsize::new(0);
        let mut r = self.inner.core.run_main(cred, false, &build, Some(&main)).await?;
        let mut out = Vec::with_capacity(picked.len());
        for (index, key, _guard) in &picked {
            let f = &files[*index];
            if r.ok(OP_PUTFH).is_err() {
                break;
            }
            let Ok(a) = r.access() else { break };
            let mut got = FileRead {
                index: *index,
                access: Some(a.access & a.supported & f.check),
                attrs: None,
                data: None,
                delegated: false,
            };
            let Ok(ok) = r.open() else {
                out.push(got);
                break;
            };
            let fattr = r.getattr().ok();
            self.got_delegation(&f.fh, &ok.delegation, fattr.as_ref());
            got.attrs = fattr.and_then(|a| self.fattr3(&a).ok());
            let read = r.read().ok();
            let closed = r.skip().is_some_and(|c| c.status().is_ok());
            if !closed {
                // The server keeps the open: close it like any other
                // whose last local use ended.
                let last = {
                    let mut st = self.inner.core.state.lock();
                    st.opened(
                        key.clone(),
                        fh4(&f.fh),
                        open_owner_name(cred.uid),
                        cred,
                        OpenAccess::Read,
                        ok.stateid,
                    );
                    matches!(st.drop_local(key, OpenAccess::Read), Some(CloseAction::Close(_)))
                };
                if last {
                    self.leave_close(key.clone(), &f.fh, cred);
                }
            }
            got.delegated = self.delegated(&f.fh);
            let stop = read.is_none() || !closed;
            got.data = read.map(|rd| (rd.data, rd.eof));
            out.push(got);
            if stop {
                break;
            }
        }
        Ok(out)
    }

    /// REMOVE and the directory's GETATTR in one COMPOUND, with no check of
    /// what the name is (NfsOps's `remove` and `rmdir` check; a caller that
    /// knows the type, as the mount does, saves the server a LOOKUP).
    pub async fn remove_unchecked(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.writable()?;
        let target = component(name)?;
        let build = || vec![putfh(dir), ArgOp::Remove(Remove4Args { target: target.clone() }), std_getattr()];
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        r.remove()?;
        Ok(wcc(self.fattr3_opt(r.getattr_opt())))
    }

    /// DELEGRETURN of `victim`'s delegation `stateid`, then REMOVE of its
    /// last name and the directory's GETATTR, in one COMPOUND (Linux's
    /// client returns the delegation of a file with one link before its
    /// REMOVE, in a round trip of its own). A refused DELEGRETURN (revoked
    /// meanwhile) stops the COMPOUND before the REMOVE, which then goes alone.
    async fn remove_returning(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        victim: &NfsFh3,
        stateid: Stateid4,
    ) -> NfsResult<WccData> {
        self.writable()?;
        let target = component(name)?;
        let build = || {
            vec![
                putfh(victim),
                ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: stateid }),
                putfh(dir),
                ArgOp::Remove(Remove4Args { target: target.clone() }),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        // Given back, or not ours to give any more (stale, revoked): either
        // way no longer a promise.
        self.inner.core.state.lock().remove_delegation(&stateid.other);
        if r.ok(OP_PUTFH).is_err() || r.op(OP_DELEGRETURN).is_err() {
            return self.remove_unchecked(cred, dir, name).await;
        }
        self.inner.core.stats.delegreturns.fetch_add(1, Ordering::Relaxed);
        r.ok(OP_PUTFH)?;
        r.remove()?;
        Ok(wcc(self.fattr3_opt(r.getattr_opt())))
    }

    /// REMOVE after checking that `name` is (`dir`) or is not a directory,
    /// as NFSv3's RMDIR and REMOVE do.
    async fn remove_checked(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        want_dir: bool,
    ) -> NfsResult<WccData> {
        self.writable()?;
        let target = component(name)?;
        let is_dir = FileAttrs { ftype: Some(NfsFtype4::Dir), ..FileAttrs::default() }.to_fattr();
        let check = if want_dir {
            ArgOp::Verify(Verify4Args { obj_attributes: is_dir })
        } else {
            ArgOp::Nverify(Verify4Args { obj_attributes: is_dir })
        };
        let build = || {
            vec![
                putfh(dir),
                ArgOp::Savefh(()),
                ArgOp::Lookup(Lookup4Args { objname: target.clone() }),
                check.clone(),
                ArgOp::Restorefh(()),
                ArgOp::Remove(Remove4Args { target: target.clone() }),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        r.ok(OP_SAVEFH)?;
        r.ok(OP_LOOKUP)?;
        match r.ok(if want_dir { OP_VERIFY } else { OP_NVERIFY }) {
            Ok(()) => {}
            Err(NfsError::Nfs4(Nfsstat4::NotSame)) => return Err(NfsError::Nfs(Nfsstat3::Notdir)),
            Err(NfsError::Nfs4(Nfsstat4::Same)) => return Err(NfsError::Nfs(Nfsstat3::Isdir)),
            Err(e) => return Err(e),
        }
        r.ok(OP_RESTOREFH)?;
        r.remove()?;
        Ok(wcc(self.fattr3_opt(r.getattr_opt())))
    }

    /// CREATE of a non-regular object, with its handle and attributes and
    /// the directory's attributes.
    async fn create_other(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        objtype: Createtype4,
        attrs: &Sattr3,
    ) -> NfsResult<(Option<NfsFh3>, Option<Fattr3>, WccData)> {
        self.writable()?;
        let objname = component(name)?;
        let createattrs = attrs::to_fattr4(attrs);
        // A new directory is asked for a delegation in passing, when the
        // cache asks for it (a server without them still makes it, and is
        // not asked again): every name it will have is made here, so
        // creates and removes in it may go on without waiting
        // (`dirops=async`) from the start.
        let delegate = matches!(objtype, Createtype4::Dir)
            && self.inner.delegate_new_dirs.load(Ordering::Relaxed)
            && self.inner.want_delegations.load(Ordering::Relaxed)
            && self.inner.dir_delegations.load(Ordering::Relaxed)
            && self.inner.core.lease_held();
        let build = || {
            let mut ops = vec![
                putfh(dir),
                ArgOp::Savefh(()),
                ArgOp::Create(Create4Args {
                    objtype: objtype.clone(),
                    objname: objname.clone(),
                    createattrs: createattrs.clone(),
                }),
                ArgOp::Getfh(()),
                std_getattr(),
            ];
            if delegate {
                ops.push(ArgOp::GetDirDelegation(GetDirDelegation4Args::default()));
                ops.push(std_getattr());
            }
            ops.push(ArgOp::Restorefh(()));
            ops.push(std_getattr());
            ops
        };
        let mut r = if delegate {
            self.run_with_optional(cred, true, &build, 4).await?
        } else {
            self.run(cred, true, &build).await?
        };
        r.ok(OP_PUTFH)?;
        r.ok(OP_SAVEFH)?;
        r.create()?;
        let fh = r.getfh_opt().map(fh3).transpose()?;
        let obj = self.fattr3_opt(r.getattr_opt());
        if delegate {
            if let (Some(fh), Some(a)) = (&fh, &obj) {
                self.got_dir_delegation(fh, a, &mut r);
            }
            // What is left of GET_DIR_DELEGATION's tail, up to RESTOREFH.
            loop {
                match r.skip() {
                    Some(ResOp::Restorefh(s)) if s.status().is_ok() => {
                        return Ok((fh, obj, wcc(self.fattr3_opt(r.getattr_opt()))));
                    }
                    Some(ResOp::Restorefh(_)) | None => return Ok((fh, obj, wcc(None))),
                    Some(_) => {}
                }
            }
        }
        let dir_attrs = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        Ok((fh, obj, wcc(dir_attrs)))
    }

    /// READDIR for NFSv3's READDIR (`plus`: with attributes and handles).
    /// `counts`: READDIR's `dircount` and `maxcount`.
    async fn list(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        counts: (u32, u32),
        kind: ListKind,
    ) -> NfsResult<Listing> {
        let (plus, ahead) = match kind {
            ListKind::Names => (false, None),
            ListKind::Plus => (true, None),
            ListKind::PlusAhead { parent_fileid } => (true, Some(parent_fileid)),
        };
        // NFSv4 lists no "." or "..": they are made here with cookies 1 and
        // 2, which NFSv4 servers never hand out (RFC 8881 §18.23.3), as
        // Linux's client does. Read ahead, the listing asks for a delegation
        // of the directory in passing instead of looking up its parent (the
        // caller knows it).
        let dots = cookie < 2;
        let delegate = ahead.is_some() && cookie == 0 && self.may_ask_dir_delegation(dir);
        let (server_cookie, server_verf) = if cookie <= 2 { (0, [0u8; 8]) } else { (cookie, verf) };
        let mask = if plus { attrs::readdir_plus() } else { attrs::readdir_plain() };
        let build = || {
            let mut ops = vec![
                putfh(dir),
                std_getattr(),
                ArgOp::Readdir(Readdir4Args {
                    cookie: server_cookie,
                    cookieverf: server_verf,
                    dircount: counts.0,
                    maxcount: counts.1,
                    attr_request: mask.clone(),
                }),
            ];
            if delegate {
                // After the READDIR: a GETATTR after the grant that matches
                // the one before the listing shows the listing is what the
                // delegation covers (`got_dir_delegation`).
                ops.push(ArgOp::GetDirDelegation(GetDirDelegation4Args::default()));
                ops.push(std_getattr());
            } else if dots {
                ops.push(ArgOp::Lookupp(()));
                ops.push(getattr(Bitmap4::from_bits(&[FATTR4_FILEID])));
            }
            ops
        };
        let optional = if delegate { 2 } else { 0 };
        let mut r = self.run_with_optional(cred, false, &build, optional).await?;
        r.ok(OP_PUTFH)?;
        let dir_attrs = self.fattr3_opt(r.getattr_opt());
        let rd = r.readdir()?;
        let parent_fileid = if delegate {
            if let Some(before) = &dir_attrs {
                self.got_dir_delegation(dir, before, &mut r);
            }
            ahead
        } else if dots && r.ok(OP_LOOKUPP).is_ok() {
            r.getattr_opt().and_then(|f| attrs::decode(&f).ok()).and_then(|a| a.fileid)
        } else {
            None
        };
        let mut entries = Vec::with_capacity(rd.entries.len() + 2);
        if let Some(d) = &dir_attrs {
            if cookie == 0 {
                entries.push(Listed {
                    fileid: d.fileid,
                    name: b".".to_vec().into(),
                    cookie: 1,
                    attrs: Some(*d),
                    fh: Some(dir.clone()),
                });
            }
            if dots {
                entries.push(Listed {
                    fileid: parent_fileid.unwrap_or(d.fileid),
                    name: Bytes::from_static(b".."),
                    cookie: 2,
                    attrs: None,
                    fh: None,
                });
            }
        }
        for e in rd.entries {
            let a = attrs::decode_file(&e.attrs, &self.inner.ids).ok();
            let fileid = a.as_ref().and_then(|a| a.fileid).unwrap_or(0);
            let (attrs, fh) = match a {
                Some(a) if plus => (a.attrs.ok(), a.filehandle.and_then(|f| fh3(f).ok())),
                _ => (None, None),
            };
            entries.push(Listed { fileid, name: e.name.0, cookie: e.cookie, attrs, fh });
        }
        Ok(Listing { dir_attrs, verf: rd.cookieverf, entries, eof: rd.eof })
    }
}

/// How [`Nfs4Client::create_open`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateHow {
    /// Create or open what is there.
    Unchecked,
    /// EEXIST if the name exists.
    Guarded,
    /// Exactly once, with this verifier.
    Exclusive(Verifier4),
}

impl Listing {
    /// As READDIRPLUS answers it.
    fn plus(self) -> Readdirplus3ResOk {
        let entries = self
            .entries
            .into_iter()
            .map(|e| Entryplus3 {
                fileid: e.fileid,
                name: Opaque(e.name),
                cookie: e.cookie,
                name_attributes: e.attrs,
                name_handle: e.fh,
            })
            .collect();
        Readdirplus3ResOk {
            dir_attributes: self.dir_attrs,
            cookieverf: self.verf,
            reply: Dirlistplus3 { entries, eof: self.eof },
        }
    }
}

/// What [`Nfs4Client::list`] asks for.
#[derive(Debug, Clone, Copy)]
enum ListKind {
    /// Names and fileids (READDIR).
    Names,
    /// With attributes and handles (READDIRPLUS).
    Plus,
    /// As `Plus`, read ahead of a program walking a tree, with a
    /// delegation of the directory asked for in passing; its parent has
    /// fileid `parent_fileid`.
    PlusAhead { parent_fileid: u64 },
}

/// A directory listing before it takes NFSv3's shape.
struct Listing {
    dir_attrs: Option<Fattr3>,
    verf: Verifier4,
    entries: Vec<Listed>,
    eof: bool,
}

struct Listed {
    fileid: u64,
    name: Bytes,
    cookie: u64,
    attrs: Option<Fattr3>,
    fh: Option<NfsFh3>,
}

impl NfsOps for Nfs4Client {
    fn root(&self) -> NfsFh3 {
        self.inner.root.clone()
    }

    async fn null(&self) -> NfsResult<()> {
        let cred = self.default_cred();
        self.inner.core.rpc.call(nfs3::NFS_PROGRAM, NFS_V4, NFSPROC4_NULL, &cred, &()).await.map(|_| ())
    }

    async fn getattr(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fattr3> {
        let build = || vec![putfh(fh), std_getattr()];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        self.fattr3(&r.getattr()?)
    }

    /// PUTFH, GETATTR, and when the mount may hold directory delegations
    /// and holds none of `dir`, GET_DIR_DELEGATION and GETATTR asked in
    /// passing after them (a server without them still answers the
    /// GETATTR, and is not asked again): a directory looked at again is
    /// held from then on, so the next opens of it ask nothing.
    async fn getattr_listed_dir(&self, cred: &Cred, dir: &NfsFh3) -> NfsResult<Fattr3> {
        if !self.may_ask_dir_delegation(dir) {
            return self.getattr(cred, dir).await;
        }
        let build = || {
            vec![
                putfh(dir),
                std_getattr(),
                ArgOp::GetDirDelegation(GetDirDelegation4Args::default()),
                std_getattr(),
            ]
        };
        let mut r = self.run_with_optional(cred, false, &build, 2).await?;
        r.ok(OP_PUTFH)?;
        let a = self.fattr3(&r.getattr()?)?;
        self.got_dir_delegation(dir, &a, &mut r);
        Ok(a)
    }

    async fn setattr(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        attrs: Sattr3,
        guard: Option<Nfstime3>,
    ) -> NfsResult<WccData> {
        self.writable()?;
        let set = attrs::to_fattr4(&attrs);
        let build = || {
            let stateid =
                if attrs.size.is_some() { self.io_stateid(fh, cred.uid, true) } else { Stateid4::ANONYMOUS };
            let mut ops = vec![putfh(fh)];
            if let Some(g) = guard {
                let ctime = FileAttrs {
                    time_metadata: Some(Nfstime4 { seconds: g.seconds as i64, nseconds: g.nseconds }),
                    ..FileAttrs::default()
                };
                ops.push(ArgOp::Verify(Verify4Args { obj_attributes: ctime.to_fattr() }));
            }
            ops.push(ArgOp::Setattr(Setattr4Args { stateid, obj_attributes: set.clone() }));
            ops.push(std_getattr());
            ops
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        if guard.is_some() {
            match r.ok(OP_VERIFY) {
                Ok(()) => {}
                Err(NfsError::Nfs4(Nfsstat4::NotSame)) => return Err(NfsError::Nfs(Nfsstat3::NotSync)),
                Err(e) => return Err(e),
            }
        }
        r.setattr()?;
        Ok(wcc(self.fattr3_opt(r.getattr_opt())))
    }

    async fn lookup(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<Lookup3ResOk> {
        let step = match name {
            b"." => None,
            b".." => Some(ArgOp::Lookupp(())),
            _ => Some(ArgOp::Lookup(Lookup4Args { objname: component(name)? })),
        };
        let build = || {
            let mut ops = vec![putfh(dir), std_getattr()];
            ops.extend(step.clone());
            ops.push(ArgOp::Getfh(()));
            ops.push(std_getattr());
            ops
        };
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let dir_attributes = self.fattr3_opt(Some(r.getattr()?));
        if let Some(s) = &step {
            r.ok(s.opnum())?;
        }
        let object = fh3(r.getfh()?)?;
        let obj_attributes = Some(self.fattr3(&r.getattr()?)?);
        Ok(Lookup3ResOk { object, obj_attributes, dir_attributes })
    }

    async fn access(&self, cred: &Cred, fh: &NfsFh3, mask: u32) -> NfsResult<Access3ResOk> {
        let build = || vec![putfh(fh), ArgOp::Access(Access4Args { access: mask }), std_getattr()];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let a = r.access()?;
        Ok(Access3ResOk {
            obj_attributes: self.fattr3_opt(r.getattr_opt()),
            access: a.access & a.supported & mask,
        })
    }

    async fn readlink(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Readlink3ResOk> {
        let build = || vec![putfh(fh), ArgOp::Readlink(()), std_getattr()];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let target = r.readlink()?;
        Ok(Readlink3ResOk { symlink_attributes: self.fattr3_opt(r.getattr_opt()), data: Opaque(target.0) })
    }

    async fn read(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Read3ResOk> {
        let mut tries = 0;
        loop {
            let used = Mutex::new(Stateid4::ANONYMOUS);
            // READ last: a server may send its data straight from the file.
            let build = || {
                let stateid = self.io_stateid(fh, cred.uid, false);
                *used.lock() = stateid;
                vec![putfh(fh), ArgOp::Read(Read4Args { stateid, offset, count })]
            };
            let mut r = self.run(cred, false, &build).await?;
            r.ok(OP_PUTFH)?;
            match r.read() {
                Ok(rd) => {
                    let count = rd.data.len() as u32;
                    return Ok(Read3ResOk { file_attributes: None, count, eof: rd.eof, data: rd.data });
                }
                // A delegation returned or revoked while this READ was on its
                // way: forget it, and read with what is held now.
                Err(NfsError::Nfs4(
                    Nfsstat4::BadStateid
                    | Nfsstat4::DelegRevoked
                    | Nfsstat4::AdminRevoked
                    | Nfsstat4::Expired
                    | Nfsstat4::OldStateid,
                )) if tries == 0 && self.forget_delegation_of(fh, &used.lock()) => {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn write(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        stable: StableHow,
    ) -> NfsResult<Write3ResOk> {
        self.writable()?;
        let count = data.len() as u32;
        let build = || {
            vec![
                putfh(fh),
                ArgOp::Write(Write4Args {
                    stateid: self.io_stateid(fh, cred.uid, true),
                    offset,
                    stable: stable4(stable),
                    data: data.clone(),
                }),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let w = r.write()?;
        Ok(Write3ResOk {
            file_wcc: wcc(self.fattr3_opt(r.getattr_opt())),
            count: w.count.min(count),
            committed: stable3(w.committed),
            verf: w.writeverf,
        })
    }

    async fn create(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
    ) -> NfsResult<Create3ResOk> {
        // OPEN creates regular files; the open is closed in the same COMPOUND.
        self.writable()?;
        let objname = component(name)?;
        let (createhow, access) = match how {
            Createhow3::Unchecked(s) => {
                let access =
                    if s.size.is_some() { OPEN4_SHARE_ACCESS_WRITE } else { OPEN4_SHARE_ACCESS_READ };
                (Createhow4::Unchecked(attrs::to_fattr4(&s)), access)
            }
            Createhow3::Guarded(s) => (Createhow4::Guarded(attrs::to_fattr4(&s)), OPEN4_SHARE_ACCESS_BOTH),
            Createhow3::Exclusive(verf) => {
                (Createhow4::Exclusive41 { verf, attrs: Fattr4::default() }, OPEN4_SHARE_ACCESS_BOTH)
            }
        };
        let build = || {
            vec![
                putfh(dir),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: self.open_owner(cred.uid),
                    openhow: Openflag4::Create(createhow.clone()),
                    claim: OpenClaim4::Null(objname.clone()),
                }),
                ArgOp::Getfh(()),
                std_getattr(),
                ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }),
                putfh(dir),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        let ok = r.open()?;
        let fh = fh3(r.getfh()?)?;
        let obj_fattr = r.getattr_opt();
        self.got_delegation(&fh, &ok.delegation, obj_fattr.as_ref());
        let obj_attributes = self.fattr3_opt(obj_fattr);
        if !r.skip().is_some_and(|c| c.status().is_ok()) {
            tracing::debug!(
                "CLOSE after an NFSv4 create failed: the server keeps the open until the lease ends"
            );
        }
        let dir_attrs = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        Ok(Create3ResOk { obj: Some(fh), obj_attributes, dir_wcc: wcc(dir_attrs) })
    }

    async fn mkdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8], attrs: Sattr3) -> NfsResult<Mkdir3ResOk> {
        let (obj, obj_attributes, dir_wcc) =
            self.create_other(cred, dir, name, Createtype4::Dir, &attrs).await?;
        Ok(Mkdir3ResOk { obj, obj_attributes, dir_wcc })
    }

    async fn symlink(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        target: &[u8],
        attrs: Sattr3,
    ) -> NfsResult<Symlink3ResOk> {
        if target.len() > LINKTEXT_MAX {
            return Err(NfsError::Nfs(Nfsstat3::Nametoolong));
        }
        let t = Createtype4::Lnk(Opaque(Bytes::copy_from_slice(target)));
        let (obj, obj_attributes, dir_wcc) = self.create_other(cred, dir, name, t, &attrs).await?;
        Ok(Symlink3ResOk { obj, obj_attributes, dir_wcc })
    }

    async fn mknod(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        what: Mknoddata3,
    ) -> NfsResult<Mknod3ResOk> {
        let spec = |d: &Devicedata3| Specdata4 { specdata1: d.spec.specdata1, specdata2: d.spec.specdata2 };
        let (t, attrs) = match what {
            Mknoddata3::Chr(d) => (Createtype4::Chr(spec(&d)), d.dev_attributes),
            Mknoddata3::Blk(d) => (Createtype4::Blk(spec(&d)), d.dev_attributes),
            Mknoddata3::Sock(a) => (Createtype4::Sock, a),
            Mknoddata3::Fifo(a) => (Createtype4::Fifo, a),
            Mknoddata3::Reg | Mknoddata3::Dir | Mknoddata3::Lnk => {
                return Err(NfsError::Nfs(Nfsstat3::Badtype))
            }
        };
        let (obj, obj_attributes, dir_wcc) = self.create_other(cred, dir, name, t, &attrs).await?;
        Ok(Mknod3ResOk { obj, obj_attributes, dir_wcc })
    }

    async fn remove(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.remove_checked(cred, dir, name, false).await
    }

    async fn rmdir(&self, cred: &Cred, dir: &NfsFh3, name: &[u8]) -> NfsResult<WccData> {
        self.remove_checked(cred, dir, name, true).await
    }

    async fn rename(
        &self,
        cred: &Cred,
        from_dir: &NfsFh3,
        from_name: &[u8],
        to_dir: &NfsFh3,
        to_name: &[u8],
    ) -> NfsResult<Rename3ResOk> {
        self.writable()?;
        let (oldname, newname) = (component(from_name)?, component(to_name)?);
        let build = || {
            vec![
                putfh(from_dir),
                ArgOp::Savefh(()),
                putfh(to_dir),
                ArgOp::Rename(Rename4Args { oldname: oldname.clone(), newname: newname.clone() }),
                std_getattr(),
                ArgOp::Restorefh(()),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        r.ok(OP_SAVEFH)?;
        r.ok(OP_PUTFH)?;
        r.rename()?;
        let to = self.fattr3_opt(r.getattr_opt());
        let from = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        Ok(Rename3ResOk { fromdir_wcc: wcc(from), todir_wcc: wcc(to) })
    }

    async fn link(&self, cred: &Cred, fh: &NfsFh3, dir: &NfsFh3, name: &[u8]) -> NfsResult<Link3ResOk> {
        self.writable()?;
        let newname = component(name)?;
        let build = || {
            vec![
                putfh(fh),
                ArgOp::Savefh(()),
                putfh(dir),
                ArgOp::Link(Link4Args { newname: newname.clone() }),
                std_getattr(),
                ArgOp::Restorefh(()),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        r.ok(OP_SAVEFH)?;
        r.ok(OP_PUTFH)?;
        r.link()?;
        let dir_attrs = self.fattr3_opt(r.getattr_opt());
        let file = if r.skip().is_some_and(|x| x.status().is_ok()) {
            self.fattr3_opt(r.getattr_opt())
        } else {
            None
        };
        Ok(Link3ResOk { file_attributes: file, linkdir_wcc: wcc(dir_attrs) })
    }

    async fn readdir(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        count: u32,
    ) -> NfsResult<Readdir3ResOk> {
        let l = self.list(cred, dir, cookie, verf, (count, count), ListKind::Names).await?;
        let entries = l
            .entries
            .into_iter()
            .map(|e| Entry3 { fileid: e.fileid, name: Opaque(e.name), cookie: e.cookie })
            .collect();
        Ok(Readdir3ResOk {
            dir_attributes: l.dir_attrs,
            cookieverf: l.verf,
            reply: Dirlist3 { entries, eof: l.eof },
        })
    }

    async fn readdirplus(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        cookie: u64,
        verf: Cookieverf3,
        dircount: u32,
        maxcount: u32,
    ) -> NfsResult<Readdirplus3ResOk> {
        let l = self.list(cred, dir, cookie, verf, (dircount, maxcount), ListKind::Plus).await?;
        Ok(l.plus())
    }

    fn lists_ahead(&self) -> bool {
        self.inner.want_delegations.load(Ordering::Relaxed)
            && self.inner.dir_delegations.load(Ordering::Relaxed)
            && self.inner.core.lease_held()
    }

    async fn readdirplus_ahead(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        parent_fileid: u64,
        dircount: u32,
        maxcount: u32,
    ) -> NfsResult<Option<Readdirplus3ResOk>> {
        let l = self
            .list(cred, dir, 0, [0; 8], (dircount, maxcount), ListKind::PlusAhead { parent_fileid })
            .await?;
        Ok((l.eof && self.delegated(dir)).then(|| l.plus()))
    }

    async fn fsstat(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsstat3ResOk> {
        let mut mask = attrs::fs_stat();
        for n in attrs::STANDARD {
            mask.set(*n);
        }
        let build = || vec![putfh(fh), getattr(mask.clone())];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let a = attrs::decode(&r.getattr()?)?;
        Ok(attrs::fsstat(&a, attrs::to_fattr3(&a, &self.inner.ids).ok()))
    }

    async fn fsinfo(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Fsinfo3ResOk> {
        let a = self.fs_info_attrs(cred, fh).await?;
        Ok(attrs::fsinfo(&a, attrs::to_fattr3(&a, &self.inner.ids).ok()))
    }

    async fn pathconf(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<Pathconf3ResOk> {
        let a = self.fs_info_attrs(cred, fh).await?;
        Ok(attrs::pathconf(&a, attrs::to_fattr3(&a, &self.inner.ids).ok()))
    }

    async fn commit(&self, cred: &Cred, fh: &NfsFh3, offset: u64, count: u32) -> NfsResult<Commit3ResOk> {
        let build = || vec![putfh(fh), ArgOp::Commit(Commit4Args { offset, count })];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let verf = r.commit()?;
        Ok(Commit3ResOk { file_wcc: WccData::default(), verf })
    }

    async fn open_file(&self, cred: &Cred, fh: &NfsFh3, want: OpenWant) -> NfsResult<FileOpened> {
        self.open_checked(cred, fh, want).await
    }

    async fn close_file(&self, cred: &Cred, fh: &NfsFh3, access: OpenAccess) -> NfsResult<()> {
        self.close_soon(cred, &OpenFile { fh: fh.clone(), uid: cred.uid, access }).await
    }

    fn delegated(&self, fh: &NfsFh3) -> bool {
        Nfs4Client::delegated(self, fh)
    }

    fn write_delegated(&self, fh: &NfsFh3) -> bool {
        Nfs4Client::write_delegated(self, fh)
    }

    fn read_files_max(&self) -> usize {
        if self.inner.want_delegations.load(Ordering::Relaxed) {
            FILES_READ_MAX
        } else {
            0
        }
    }

    async fn read_files(&self, cred: &Cred, files: &[FileToRead]) -> NfsResult<Vec<FileRead>> {
        Nfs4Client::read_files(self, cred, files).await
    }

    async fn create_open(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        how: Createhow3,
        access: OpenAccess,
    ) -> NfsResult<(Create3ResOk, FileOpened)> {
        let (attrs, how) = match how {
            Createhow3::Unchecked(a) => (a, CreateHow::Unchecked),
            Createhow3::Guarded(a) => (a, CreateHow::Guarded),
            Createhow3::Exclusive(verf) => (Sattr3::default(), CreateHow::Exclusive(verf)),
        };
        let (_, res, rflags) = self.create_open_flags(cred, dir, name, attrs, how, access).await?;
        let opened = FileOpened {
            held: true,
            attrs: res.obj_attributes,
            preserve_unlinked: rflags & OPEN4_RESULT_PRESERVE_UNLINKED != 0,
            ..FileOpened::default()
        };
        Ok((res, opened))
    }

    fn creates_written(&self) -> bool {
        true
    }

    async fn create_written(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        attrs: Sattr3,
        data: Bytes,
        then: Option<Sattr3>,
    ) -> NfsResult<CreatedWritten> {
        Nfs4Client::create_written(self, cred, dir, name, attrs, data, then).await
    }

    async fn write_close(
        &self,
        cred: &Cred,
        fh: &NfsFh3,
        offset: u64,
        data: Bytes,
        attrs: Option<Sattr3>,
        close: Option<OpenAccess>,
    ) -> NfsResult<WriteClosed> {
        let close = close.map(|a| (cred.uid, a));
        let (w, closed) = self.write_sync(cred, fh, offset, data, attrs, close).await?;
        // NFSv4's SETATTR answers no pre-operation attributes; the GETATTR
        // after it is the file's state once both changes are done.
        let setattr = w.setattr.map(|r| r.map(|()| wcc(w.attrs)));
        Ok(WriteClosed { write: w.write, setattr, closed })
    }

    async fn remove_known(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        _is_dir: bool,
    ) -> NfsResult<WccData> {
        // NFSv4's REMOVE removes either kind: the caller has checked.
        self.remove_unchecked(cred, dir, name).await
    }

    async fn remove_last_name(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        name: &[u8],
        _is_dir: bool,
        victim: &NfsFh3,
    ) -> NfsResult<WccData> {
        match self.delegation_stateid(victim, false) {
            Some(stateid) => self.remove_returning(cred, dir, name, victim, stateid).await,
            None => self.remove_unchecked(cred, dir, name).await,
        }
    }

    async fn remove_names(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        names: &[NameToRemove],
    ) -> Vec<Option<NfsResult<WccData>>> {
        let max_ops = match self.inner.core.fore_channel().await {
            Ok(f) => f.ca_maxoperations.clamp(4, OPS_MAX) as usize,
            Err(e) => return names.iter().map(|_| Some(Err(e.clone()))).collect(),
        };
        // SEQUENCE and the closing GETATTR, then at most four per name.
        let per_call = ((max_ops - 2) / 4).clamp(1, REMOVES_PER_COMPOUND);
        let mut out = Vec::with_capacity(names.len());
        for chunk in names.chunks(per_call) {
            out.extend(self.remove_chunk(cred, dir, chunk).await);
        }
        out
    }
}

/// Names one [`NfsOps::remove_names`] COMPOUND removes at most.
const REMOVES_PER_COMPOUND: usize = 12;

impl Nfs4Client {
    /// [`NfsOps::remove_names`] in one COMPOUND: per name [PUTFH (the
    /// object), DELEGRETURN,] PUTFH, REMOVE, and the directory's GETATTR
    /// at the end. The server stops at the first failure: the names before
    /// it are removed, its own result is that failure, and the names after
    /// it were not tried (`None`). A refused DELEGRETURN is no failure of
    /// its REMOVE, which was not tried either: sent again alone, it finds
    /// no delegation to give back.
    async fn remove_chunk(
        &self,
        cred: &Cred,
        dir: &NfsFh3,
        names: &[NameToRemove],
    ) -> Vec<Option<NfsResult<WccData>>> {
        let all = |e: NfsError| names.iter().map(|_| Some(Err(e.clone()))).collect();
        if let Err(e) = self.writable() {
            return all(e);
        }
        let targets = match names.iter().map(|n| component(&n.name)).collect::<NfsResult<Vec<_>>>() {
            Ok(t) => t,
            Err(e) => return all(e),
        };
        let stateids: Vec<Option<Stateid4>> = names
            .iter()
            .map(|n| n.last_of.as_ref().and_then(|v| self.delegation_stateid(v, false)))
            .collect();
        let build = || {
            let mut ops = Vec::with_capacity(4 * names.len() + 1);
            for ((n, target), stateid) in names.iter().zip(&targets).zip(&stateids) {
                if let (Some(victim), Some(stateid)) = (&n.last_of, stateid) {
                    ops.push(putfh(victim));
                    ops.push(ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: *stateid }));
                }
                ops.push(putfh(dir));
                ops.push(ArgOp::Remove(Remove4Args { target: target.clone() }));
            }
            ops.push(std_getattr());
            ops
        };
        let mut r = match self.run(cred, true, &build).await {
            Ok(r) => r,
            Err(e) => return all(e),
        };
        let mut out: Vec<Option<NfsResult<()>>> = Vec::with_capacity(names.len());
        let mut stopped = false;
        for stateid in &stateids {
            if stopped || r.exhausted() {
                stopped = true;
                out.push(None);
                continue;
            }
            if let Some(stateid) = stateid {
                let returned = r.ok(OP_PUTFH).and_then(|()| r.ok(OP_DELEGRETURN));
                // Given back, or not ours to give any more: no promise now.
                self.inner.core.state.lock().remove_delegation(&stateid.other);
                if returned.is_err() {
                    stopped = true;
                    out.push(None);
                    continue;
                }
                self.inner.core.stats.delegreturns.fetch_add(1, Ordering::Relaxed);
            }
            let removed = r.ok(OP_PUTFH).and_then(|()| r.remove().map(drop));
            stopped = removed.is_err();
            out.push(Some(removed));
        }
        let after = wcc(self.fattr3_opt(if stopped { None } else { r.getattr_opt() }));
        out.into_iter().map(|o| o.map(|r| r.map(|()| after.clone()))).collect()
    }
}

impl Nfs4Client {
    /// [`NfsOps::open_file`] in one COMPOUND: PUTFH, [ACCESS], GETATTR,
    /// OPEN (CLAIM_FH) unless `cred`'s open of the file covers the access
    /// already, and for [`OpenWant::read_whole`] READ with the open's
    /// stateid, then CLOSE if the open was made for this read alone (no
    /// open of `cred`'s was held: a cold `cat` costs one round trip and
    /// leaves no state behind).
    async fn open_checked(&self, cred: &Cred, fh: &NfsFh3, want: OpenWant) -> NfsResult<FileOpened> {
        let access = want.access;
        if access != OpenAccess::Read {
            self.writable()?;
        }
        let key = OpenKey { fh: fh.data.0.clone(), uid: cred.uid };
        let lock = self.open_lock(&key);
        let _held = lock.lock().await;
        let have = self.inner.core.state.lock().opens.get(&key).map_or(0, |o| o.access);
        let need_open = have & access.bits() != access.bits();
        // Opened only to be read at once, then closed in the same COMPOUND.
        let transient = want.read_whole.is_some() && have == 0;
        let share = have | access.bits();
        let build = || {
            let mut ops = vec![putfh(fh)];
            if let Some(mask) = want.check {
                ops.push(ArgOp::Access(Access4Args { access: mask }));
            }
            if need_open {
                // A delegation outlives the CLOSE of an open read whole: the
                // next open of the file asks nothing.
                let share_access = self.share_access(share);
                ops.push(self.open_fh(cred.uid, share_access));
            }
            // After the OPEN: the attributes a delegation it brings vouches
            // for from then on (a change between a GETATTR before it and
            // the OPEN would be missed for as long as the delegation lasts).
            ops.push(std_getattr());
            if let Some(count) = want.read_whole {
                let stateid =
                    if need_open { Stateid4::CURRENT } else { self.io_stateid(fh, cred.uid, false) };
                ops.push(ArgOp::Read(Read4Args { stateid, offset: 0, count }));
                if transient {
                    ops.push(ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }));
                }
            }
            ops
        };
        // A reply carrying file data is more than a slot keeps (nfs-ganesha
        // refuses to keep it): such a request is not kept, and run again it
        // does the same (the same owner's OPEN of the same file).
        let cachethis = need_open && want.read_whole.is_none();
        let mut r = self.run(cred, cachethis, &build).await?;
        r.ok(OP_PUTFH)?;
        let mut out = FileOpened::default();
        if let Some(mask) = want.check {
            let a = r.access()?;
            out.access = Some(a.access & a.supported & mask);
        }
        let mut opened = None;
        let ok = if need_open { Some(r.open()?) } else { None };
        // Without them (a GETATTR that failed after the OPEN) the open is
        // still recorded below, for the caller to close.
        let fattr = r.getattr().ok();
        if let Some(ok) = ok {
            out.preserve_unlinked = ok.rflags & OPEN4_RESULT_PRESERVE_UNLINKED != 0;
            self.got_delegation(fh, &ok.delegation, fattr.as_ref());
            opened = Some(ok.stateid);
        }
        out.attrs = fattr.and_then(|a| self.fattr3(&a).ok());
        if opened.is_none() && out.attrs.is_none() {
            return Err(NfsError::BadReply("OPEN's GETATTR brought no attributes".into()));
        }
        let mut closed = false;
        if want.read_whole.is_some() {
            if let Ok(rd) = r.read() {
                out.data = Some((rd.data, rd.eof));
                closed = transient && r.skip().is_some_and(|c| c.status().is_ok());
            }
        }
        // Recorded unless it was closed again: a READ or CLOSE that failed
        // leaves the open held, for the caller to close.
        let mut st = self.inner.core.state.lock();
        match opened {
            Some(stateid) if !closed => {
                st.opened(key.clone(), fh4(fh), open_owner_name(cred.uid), cred, access, stateid);
                if let Some(o) = st.opens.get_mut(&key) {
                    o.access |= share;
                }
                out.held = true;
            }
            Some(_) => {}
            None => {
                st.add_local(&key, access);
                out.held = true;
            }
        }
        drop(st);
        if out.held {
            self.take_up(&key);
        }
        Ok(out)
    }
}

// ------------------------------------------------------------ CLOSEs left for later

impl Nfs4Client {
    /// Leave the CLOSE of `key` (whose last local open just ended) for later.
    fn leave_close(&self, key: OpenKey, fh: &NfsFh3, cred: &Cred) {
        let (stateid, generation) = {
            let st = self.inner.core.state.lock();
            match st.opens.get(&key) {
                Some(o) => (o.stateid, st.generation()),
                None => return,
            }
        };
        let many = {
            let mut q = self.inner.closes.lock();
            let left_at = tokio::time::Instant::now();
            q.push(LaterClose {
                key,
                fh: fh.clone(),
                stateid,
                generation,
                cred: cred.clone(),
                tries: 0,
                left_at,
            });
            q.len() >= CLOSES_WAITING_MAX
        };
        if many {
            let me = self.clone();
            tokio::spawn(async move { me.send_closes(None).await });
        }
        self.start_closer();
    }

    /// An open of `key` is in use again: its CLOSE, if left for later, is
    /// not to be sent. Called holding `key`'s OPEN/CLOSE lock, which a
    /// COMPOUND carrying that CLOSE holds until its answer is applied.
    fn take_up(&self, key: &OpenKey) {
        self.inner.closes.lock().retain(|c| c.key != *key);
    }

    /// The CLOSEs left for later that may ride on a COMPOUND `build` makes
    /// as `cred` (sent as the same user, after its operations, within the
    /// session's operation limit; not after a READ, which a server may send
    /// straight from the file when it ends the COMPOUND), each with its
    /// file's OPEN/CLOSE lock, held until the answer is applied.
    async fn take_closes(
        &self,
        cred: &Cred,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
    ) -> Vec<(LaterClose, tokio::sync::OwnedMutexGuard<()>)> {
        if self.inner.closes.lock().iter().all(|c| c.cred != *cred) {
            return Vec::new();
        }
        let ops = build();
        if matches!(ops.last(), Some(ArgOp::Read(_))) {
            return Vec::new();
        }
        let max = match self.inner.core.fore_channel().await {
            Ok(f) => f.ca_maxoperations.clamp(4, OPS_MAX) as usize,
            Err(_) => return Vec::new(),
        };
        let room = (max.saturating_sub(ops.len() + 1) / 2).min(CLOSES_PER_COMPOUND);
        self.claim_closes(|c| c.cred == *cred, room)
    }

    /// Up to `n` CLOSEs left for later that `pick` chooses and whose file's
    /// OPEN/CLOSE lock is free now, taken from the queue with their locks.
    fn claim_closes(
        &self,
        pick: impl Fn(&LaterClose) -> bool,
        n: usize,
    ) -> Vec<(LaterClose, tokio::sync::OwnedMutexGuard<()>)> {
        let mut taken = Vec::new();
        let mut q = self.inner.closes.lock();
        let mut i = 0;
        while i < q.len() && taken.len() < n {
            if pick(&q[i]) {
                if let Ok(guard) = self.open_lock(&q[i].key).try_lock_owned() {
                    taken.push((q.remove(i), guard));
                    continue;
                }
            }
            i += 1;
        }
        taken
    }

    /// PUTFH and CLOSE for each of `riders`.
    fn close_ops(&self, riders: &[(LaterClose, tokio::sync::OwnedMutexGuard<()>)]) -> Vec<ArgOp> {
        let st = self.inner.core.state.lock();
        let mut ops = Vec::with_capacity(2 * riders.len());
        for (c, _) in riders {
            // After a reclaim the open has a new stateid: that one is closed.
            let stateid = match st.opens.get(&c.key) {
                Some(o) if st.generation() != c.generation => o.stateid,
                _ => c.stateid,
            };
            ops.push(putfh(&c.fh));
            ops.push(ArgOp::Close(Close4Args { seqid: 0, open_stateid: stateid }));
        }
        ops
    }

    /// Apply the answers (`tail`: PUTFH and CLOSE results, as far as the
    /// server went) to CLOSEs that rode along: done, refused because the
    /// open was taken up again, or left for another try.
    fn closes_done(&self, riders: Vec<(LaterClose, tokio::sync::OwnedMutexGuard<()>)>, tail: Vec<ResOp>) {
        let mut results = tail.into_iter();
        let mut again = Vec::new();
        for (mut c, _guard) in riders {
            let (put, close) = (results.next(), results.next());
            let mut st = self.inner.core.state.lock();
            let unused = st.opens.get(&c.key).is_some_and(|o| o.wanted() == 0);
            let status = match (&put, &close) {
                (Some(p), _) if !p.status().is_ok() => Some(p.status()),
                (_, Some(cl)) => Some(cl.status()),
                _ => None,
            };
            match status {
                // Ended, or not there to end (an expired lease, a removed file).
                Some(
                    Nfsstat4::Ok
                    | Nfsstat4::BadStateid
                    | Nfsstat4::Expired
                    | Nfsstat4::StaleStateid
                    | Nfsstat4::Stale
                    | Nfsstat4::Fhexpired,
                ) => {
                    if unused {
                        st.closed(&c.key, None);
                    }
                }
                // Taken up again meanwhile (the open's stateid moved on).
                Some(Nfsstat4::OldStateid) if !unused => {}
                _ if unused && c.tries < 4 => {
                    c.tries += 1;
                    c.left_at = tokio::time::Instant::now();
                    if let Some(o) = st.opens.get(&c.key) {
                        (c.stateid, c.generation) = (o.stateid, st.generation());
                    }
                    again.push(c);
                }
                other => {
                    if unused {
                        tracing::warn!("an NFSv4 CLOSE was not taken ({other:?}): the server keeps the open until our lease ends");
                        st.closed(&c.key, None);
                    }
                }
            }
        }
        if !again.is_empty() {
            self.inner.closes.lock().extend(again);
            self.start_closer();
        }
    }

    /// Make sure a task sends the CLOSEs no COMPOUND takes within [`CLOSE_DELAY`]
    /// of their being left. Each waits its own delay: a task that slept one
    /// delay from when it started sent a CLOSE left late in its sleep almost
    /// at once, although the caller's next COMPOUND was about to carry it
    /// (an untar's next OPEN); the busier the machine, the more often.
    fn start_closer(&self) {
        if self.inner.closer.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.inner.closer.store(false, Ordering::Release);
            return;
        };
        let me = self.clone();
        rt.spawn(async move {
            loop {
                let oldest = me.inner.closes.lock().iter().map(|c| c.left_at).min();
                if let Some(left_at) = oldest {
                    tokio::time::sleep_until(left_at + CLOSE_DELAY).await;
                    if !me.send_closes(Some(tokio::time::Instant::now())).await {
                        // The files of those due are being opened or closed
                        // right now (those calls decide), or the send failed.
                        tokio::time::sleep(CLOSE_DELAY).await;
                    }
                    continue;
                }
                me.inner.closer.store(false, Ordering::Release);
                // A CLOSE left after the last look, with no task to see it: go on.
                if me.inner.closes.lock().is_empty() || me.inner.closer.swap(true, Ordering::AcqRel) {
                    return;
                }
            }
        });
    }

    /// Send CLOSEs left for later now, in COMPOUNDs of their own (one per
    /// user they are sent as): all of them, or with `due_at`, those that
    /// have waited [`CLOSE_DELAY`] by then, with the same user's others
    /// riding along (the round trip is paid). Returns false if it stopped
    /// at CLOSEs it could not take (their files are being opened or closed
    /// right now: those calls decide) or at a failed send.
    async fn send_closes(&self, due_at: Option<tokio::time::Instant>) -> bool {
        let due = |c: &LaterClose| due_at.is_none_or(|t| c.left_at + CLOSE_DELAY <= t);
        for _ in 0..CLOSES_WAITING_MAX {
            let first = self.inner.closes.lock().iter().find(|c| due(c)).map(|c| c.cred.clone());
            let Some(cred) = first else { return true };
            let mut riders = self.claim_closes(|c| c.cred == cred && due(c), CLOSES_PER_COMPOUND);
            if riders.is_empty() {
                return false;
            }
            let room = CLOSES_PER_COMPOUND - riders.len();
            riders.extend(self.claim_closes(|c| c.cred == cred, room));
            let build = || self.close_ops(&riders);
            let main = std::sync::atomic::AtomicUsize::new(0);
            match self.inner.core.run_main(&cred, true, &build, Some(&main)).await {
                Ok(mut reply) => {
                    let tail = reply.split_off(0);
                    self.closes_done(riders, tail);
                }
                Err(e) => {
                    tracing::debug!("CLOSEs left for later: {e}");
                    self.closes_done(riders, Vec::new());
                    return false;
                }
            }
        }
        true
    }
}

impl Nfs4Client {
    async fn fs_info_attrs(&self, cred: &Cred, fh: &NfsFh3) -> NfsResult<FileAttrs> {
        let mut mask = attrs::fs_info();
        for n in attrs::STANDARD {
            mask.set(*n);
        }
        let build = || vec![putfh(fh), getattr(mask.clone())];
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        attrs::decode(&r.getattr()?)
    }
}
