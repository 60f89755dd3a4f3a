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
use super::state::{cut, end_of, CloseAction, LockKey, Locks, OpenAccess, OpenKey, Range};
use crate::driver::{RpcClient, TransportConfig};
use crate::mount;
use crate::nfs::{default_cred, transfer_size};
use crate::ops::{Cred, NfsError, NfsOps, NfsResult};
use crate::options::{MountOptions, NfsVersion, TRANSFER_SIZE_MAX};
use crate::url::NfsUrl;
use bytes::Bytes;
use eagernfs_proto::nfs3::{self, *};
use eagernfs_proto::nfs4::*;
use eagernfs_xdr::Opaque;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The NFS port a v4 client uses when the URL names none (RFC 8881: no portmapper).
const NFS4_PORT: u16 = 2049;
/// Fore-channel slots asked for (the server may grant fewer).
const SLOTS_WANTED: u32 = 64;
/// Room in a request or reply for everything around a READ's or WRITE's data.
const HEADER_ROOM: u32 = 64 * 1024;
/// Per-file OPEN/CLOSE locks kept before unused ones are dropped.
const OPEN_LOCKS_KEPT: usize = 1024;

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
    /// Ask for delegations when opening (off until the caching layer uses
    /// them: a delegation nobody uses only costs recalls).
    want_delegations: AtomicBool,
    /// OPEN and CLOSE of one file and owner go one at a time, so the
    /// server's open and the table agree.
    open_locks: Arc<Mutex<HashMap<OpenKey, Arc<tokio::sync::Mutex<()>>>>>,
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
        Self::rooted(core, root, export, path_inside, options, ids).await
    }

    /// A client over `core` whose root is `root`: one GETATTR asks for the
    /// lease and the transfer sizes.
    async fn rooted(
        core: Arc<Core>,
        root: NfsFh3,
        export: String,
        path_inside: String,
        options: MountOptions,
        ids: Arc<IdMapper>,
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
                want_delegations: AtomicBool::new(false),
                open_locks: Arc::default(),
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
        )
        .await?;
        c.inner.want_delegations.store(i.want_delegations.load(Ordering::Relaxed), Ordering::Relaxed);
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

    /// Ask for delegations with OPEN (issue 36's cache will); recalls then
    /// go to the hooks of [`Nfs4Client::set_callback_hooks`], or the
    /// delegation is returned at once.
    pub fn set_want_delegations(&self, on: bool) {
        self.inner.want_delegations.store(on, Ordering::Relaxed);
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

    /// Give delegation `stateid` of `fh` back (DELEGRETURN).
    pub async fn return_delegation(&self, fh: &NfsFh4, stateid: Stateid4) -> NfsResult<()> {
        self.inner.core.delegreturn(fh.clone(), stateid).await
    }

    /// End the session (and the client id, if no state is held). The
    /// client can still be used: the next call makes a new session.
    pub async fn unmount(&self) -> NfsResult<()> {
        self.inner.core.destroy().await
    }

    fn writable(&self) -> NfsResult<()> {
        if self.inner.read_only.load(Ordering::Relaxed) {
            Err(NfsError::Nfs(Nfsstat3::Rofs))
        } else {
            Ok(())
        }
    }

    async fn run(
        &self,
        cred: &Cred,
        cachethis: bool,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
    ) -> NfsResult<Reply> {
        self.inner.core.run(cred, cachethis, build).await
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
    fn share_access(&self, access: u32) -> u32 {
        if self.inner.want_delegations.load(Ordering::Relaxed) {
            access
        } else {
            access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG
        }
    }

    /// Keep a delegation an OPEN brought (if delegations are wanted), or give it back.
    fn got_delegation(&self, fh: &NfsFh3, d: &OpenDelegation4) {
        let (stateid, write) = match d {
            OpenDelegation4::Read(r) => (r.stateid, false),
            OpenDelegation4::Write(w) => (w.stateid, true),
            OpenDelegation4::None | OpenDelegation4::NoneExt(_) => return,
        };
        if self.inner.want_delegations.load(Ordering::Relaxed) {
            let mut st = self.inner.core.state.lock();
            st.delegations.insert(stateid.other, super::state::Delegation { fh: fh4(fh), stateid, write });
        } else {
            use super::callback::Owner;
            self.inner.core.return_delegation(fh4(fh), stateid);
        }
    }

    fn io_stateid(&self, fh: &NfsFh3, uid: u32, write: bool) -> Stateid4 {
        self.inner.core.state.lock().io_stateid(&fh.data, uid, write)
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
            return Ok(OpenFile { fh: fh.clone(), uid: cred.uid, access });
        }
        let want = {
            let st = self.inner.core.state.lock();
            st.opens.get(&key).map_or(0, |o| o.access) | access.bits()
        };
        let build = || {
            vec![
                putfh(fh),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: self.share_access(want),
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: self.open_owner(cred.uid),
                    openhow: Openflag4::NoCreate,
                    claim: OpenClaim4::Fh,
                }),
            ]
        };
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
        self.got_delegation(fh, &ok.delegation);
        Ok(OpenFile { fh: fh.clone(), uid: cred.uid, access })
    }

    /// End one [`Nfs4Client::open`]: CLOSE after the last, OPEN_DOWNGRADE
    /// when the opens left need less access.
    pub async fn close(&self, cred: &Cred, f: &OpenFile) -> NfsResult<()> {
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
                    locktype: if write { NfsLockType4::WriteLt } else { NfsLockType4::ReadLt },
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
        let obj_attributes = self.fattr3_opt(r.getattr_opt());
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
                key,
                fh4(&fh),
                open_owner_name(cred.uid),
                cred,
                access,
                ok.stateid,
            );
        }
        self.got_delegation(&fh, &ok.delegation);
        let res = Create3ResOk { obj: Some(fh.clone()), obj_attributes, dir_wcc: wcc(dir_attrs) };
        Ok((OpenFile { fh, uid: cred.uid, access }, res))
    }

    /// Write `data` at `offset` FILE_SYNC, set `times` (and whatever else
    /// `times` holds) and end the open `f`, in one COMPOUND: a small file
    /// written and closed in one round trip. The CLOSE is sent only when
    /// `f` is the last local open of the file; otherwise the open stays.
    pub async fn write_close(
        &self,
        cred: &Cred,
        f: &OpenFile,
        offset: u64,
        data: Bytes,
        times: Option<Sattr3>,
    ) -> NfsResult<WriteClose> {
        self.writable()?;
        let key = OpenKey { fh: f.fh.data.0.clone(), uid: f.uid };
        let lock = self.open_lock(&key);
        let _held = lock.lock().await;
        let action = self.inner.core.state.lock().drop_local(&key, f.access);
        let close = matches!(action, Some(CloseAction::Close(_)));
        let count = data.len() as u32;
        let build = || {
            let stateid =
                self.current_open_stateid(&key).map_or(Stateid4::ANONYMOUS, |s| Stateid4 { seqid: 0, ..s });
            let mut ops = vec![
                putfh(&f.fh),
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
            if close {
                ops.push(ArgOp::Close(Close4Args {
                    seqid: 0,
                    open_stateid: self.current_open_stateid(&key).unwrap_or(stateid),
                }));
            }
            ops
        };
        let r = self.run(cred, true, &build).await;
        if close {
            self.inner.core.state.lock().closed(&key, None);
        }
        let mut r = r?;
        r.ok(OP_PUTFH)?;
        let w = r.write()?;
        let setattr = times.map(|_| r.setattr().map(|_| ()));
        let attrs = self.fattr3_opt(r.getattr_opt());
        let write = Write3ResOk {
            file_wcc: wcc(attrs),
            count: w.count.min(count),
            committed: stable3(w.committed),
            verf: w.writeverf,
        };
        Ok(WriteClose { write, setattr, attrs })
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
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    share_deny: OPEN4_SHARE_DENY_NONE,
                    owner: self.open_owner(cred.uid),
                    openhow: Openflag4::NoCreate,
                    claim: OpenClaim4::Fh,
                }),
                std_getattr(),
                ArgOp::Read(Read4Args { stateid: Stateid4::CURRENT, offset: 0, count }),
                ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::CURRENT }),
            ]
        };
        // Not kept for a retry (the reply holds the data, more than a slot
        // keeps); run twice, an OPEN and CLOSE of the same file leave nothing.
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        if !held {
            let ok = r.open()?;
            self.got_delegation(fh, &ok.delegation);
        }
        let attrs = self.fattr3_opt(r.getattr_opt());
        let read = r.read()?;
        Ok(ReadWhole { data: read.data, eof: read.eof, attrs })
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
        let build = || {
            vec![
                putfh(dir),
                ArgOp::Savefh(()),
                ArgOp::Create(Create4Args {
                    objtype: objtype.clone(),
                    objname: objname.clone(),
                    createattrs: createattrs.clone(),
                }),
                ArgOp::Getfh(()),
                std_getattr(),
                ArgOp::Restorefh(()),
                std_getattr(),
            ]
        };
        let mut r = self.run(cred, true, &build).await?;
        r.ok(OP_PUTFH)?;
        r.ok(OP_SAVEFH)?;
        r.create()?;
        let fh = r.getfh_opt().map(fh3).transpose()?;
        let obj = self.fattr3_opt(r.getattr_opt());
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
        plus: bool,
    ) -> NfsResult<Listing> {
        // NFSv4 lists no "." or "..": they are made here with cookies 1 and
        // 2, which NFSv4 servers never hand out (RFC 8881 §18.23.3), as
        // Linux's client does.
        let dots = cookie < 2;
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
            if dots {
                ops.push(ArgOp::Lookupp(()));
                ops.push(getattr(Bitmap4::from_bits(&[FATTR4_FILEID])));
            }
            ops
        };
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let dir_attrs = self.fattr3_opt(r.getattr_opt());
        let rd = r.readdir()?;
        let parent_fileid = if dots && r.ok(OP_LOOKUPP).is_ok() {
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
            let a = attrs::decode(&e.attrs).ok();
            let fileid = a.as_ref().and_then(|a| a.fileid).unwrap_or(0);
            let attrs = a.as_ref().filter(|_| plus).and_then(|a| attrs::to_fattr3(a, &self.inner.ids).ok());
            let fh = a.and_then(|a| a.filehandle).filter(|_| plus).and_then(|f| fh3(f).ok());
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
        // READ last: a server may send its data straight from the file.
        let build = || {
            vec![
                putfh(fh),
                ArgOp::Read(Read4Args { stateid: self.io_stateid(fh, cred.uid, false), offset, count }),
            ]
        };
        let mut r = self.run(cred, false, &build).await?;
        r.ok(OP_PUTFH)?;
        let rd = r.read()?;
        Ok(Read3ResOk { file_attributes: None, count: rd.data.len() as u32, eof: rd.eof, data: rd.data })
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
        self.got_delegation(&fh, &ok.delegation);
        let obj_attributes = self.fattr3_opt(r.getattr_opt());
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
        let l = self.list(cred, dir, cookie, verf, (count, count), false).await?;
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
        let l = self.list(cred, dir, cookie, verf, (dircount, maxcount), true).await?;
        let entries = l
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
        Ok(Readdirplus3ResOk {
            dir_attributes: l.dir_attrs,
            cookieverf: l.verf,
            reply: Dirlistplus3 { entries, eof: l.eof },
        })
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
