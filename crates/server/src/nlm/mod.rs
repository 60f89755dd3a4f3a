//! Byte-range locks for NFSv3 clients: the Network Lock Manager (NLM v4)
//! and the Network Status Monitor (NSM v1), on the NFS port.
//!
//! - `locks`: the lock table (POSIX semantics between owners, queues of
//!   blocked requests).
//! - this module: the two programs' handlers, the grace period after a
//!   restart (only reclaims are granted, so clients get back what they held
//!   before anyone else can take it), and the record of hosts holding locks.
//! - `callback`: calls the server makes to clients: GRANTED when a blocked
//!   request is granted, SM_NOTIFY after a restart (found through the
//!   client's rpcbind, as Linux's lockd and statd do; best effort, bounded).
//! - `mirror`: for a backend whose file system enforces locks itself (a
//!   CephFS), every lock is taken there too before it is granted here, so
//!   it excludes the file system's other clients as well. NFSv4's LOCK,
//!   LOCKU and lease expiry use the same table and the same mirror.
//!
//! On a local directory, locks are between NFS clients of this server;
//! processes on the server itself do not see them (the local backend does
//! not take `fcntl` locks on the exported files). A host's locks are dropped when its status monitor
//! says it restarted (SM_NOTIFY) or its lock manager asks (FREE_ALL), in
//! both cases only when the call comes from the address the locks were
//! taken from.

mod callback;
mod host;
pub(crate) mod locks;
pub(crate) mod mirror;

use crate::call::{Call, Outcome};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_proto::nlm::*;
use eagernfs_xdr::{Encode, Opaque};
use locks::{Held, LockResult, LockTable, Mirror, NoMirror, Owner, Range};
use mirror::BackendMirror;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use callback::{hostname, notify_restart};
pub use host::LockHost;

/// Called with every host holding locks whenever a new one appears or one
/// goes (so the list survives a restart, like statd's `sm/` directory).
pub type HostsChanged = Arc<dyn Fn(&[LockHost]) + Send + Sync>;

/// How the lock manager behaves.
#[derive(Clone)]
pub struct LockConfig {
    /// Serve NLM and NSM at all.
    pub enabled: bool,
    /// After a restart that had lock holders, only reclaims are granted for this long.
    pub grace_period: Duration,
    /// Hosts that held locks when the server last stopped: when not empty, the
    /// server starts in its grace period and tells each one it restarted.
    pub previous_hosts: Vec<LockHost>,
    /// This start's NSM state number (odd while up, one higher each start).
    pub nsm_state: i32,
    /// Most locks and waiting requests held at once (NLM4_DENIED_NOLOCKS beyond).
    pub max_locks: u64,
    /// Persist the hosts holding locks.
    pub on_hosts_changed: Option<HostsChanged>,
    /// Tell clients of granted blocked locks (GRANTED) and of a restart (SM_NOTIFY).
    pub callbacks: bool,
    /// Set while the cluster of heads this server is one of is in its grace
    /// period (another head took over a dead one's clients): only reclaims are granted.
    pub cluster_grace: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Called once every host of `previous_hosts` has reclaimed what it held
    /// (see [`LockManager`]'s reclaim tracking): the grace period ends then.
    pub on_reclaims_done: Option<Arc<dyn Fn() + Send + Sync>>,
    /// A head's lease: no GRANTED callback goes out while it does not hold.
    pub lease: Option<Arc<crate::cluster::Lease>>,
}

impl Default for LockConfig {
    fn default() -> Self {
        LockConfig {
            enabled: true,
            grace_period: Duration::from_secs(90),
            previous_hosts: Vec::new(),
            nsm_state: 1,
            max_locks: 1 << 20,
            on_hosts_changed: None,
            callbacks: true,
            cluster_grace: None,
            on_reclaims_done: None,
            lease: None,
        }
    }
}

impl std::fmt::Debug for LockConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockConfig")
            .field("enabled", &self.enabled)
            .field("grace_period", &self.grace_period)
            .field("previous_hosts", &self.previous_hosts)
            .field("nsm_state", &self.nsm_state)
            .field("max_locks", &self.max_locks)
            .field("callbacks", &self.callbacks)
            .finish()
    }
}

/// What a blocked request needs to be announced when granted.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    addr: IpAddr,
    args: Nlm4TestArgs,
    /// The file's file system, when it takes part in locks (to try the
    /// request again there).
    mirror: Option<Arc<BackendMirror>>,
}

impl Grant {
    /// The notice of an NFSv4 request, which never waits in the queue
    /// (NFSv4 clients poll a lock they wait for), so nothing announces it.
    pub(crate) fn never_queued(addr: IpAddr) -> Grant {
        Grant { addr, args: Nlm4TestArgs::default(), mirror: None }
    }
}

/// The running lock manager.
pub(crate) struct LockManager {
    /// The lock table, shared with NFSv4 (its LOCK takes the same locks).
    table: Arc<LockTable<Grant>>,
    /// Started with the first request a file system refused.
    retrying: std::sync::OnceLock<Arc<mirror::Retrier>>,
    /// Whether only reclaims are granted (shared with the retrying thread).
    grace: Arc<GraceState>,
    nsm_state: i32,
    hosts: parking_lot::Mutex<Vec<(Bytes, IpAddr)>>,
    /// Runs `on_hosts_changed` on a thread of its own: service threads run
    /// with the caller's file-system identity, which may not write the
    /// server's state directory.
    persister: Option<std::sync::mpsc::SyncSender<(Vec<LockHost>, std::sync::mpsc::SyncSender<()>)>>,
    callbacks: Option<callback::Sender>,
    /// The hosts of `previous_hosts` that may still reclaim, and whether each
    /// has reclaimed something yet.
    pending: parking_lot::Mutex<Vec<(LockHost, bool)>>,
    on_reclaims_done: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// This server's grace period and the cluster's.
pub(crate) struct GraceState {
    until: Option<Instant>,
    /// Every previous host has reclaimed: the grace period is over early.
    reclaims_over: std::sync::atomic::AtomicBool,
    cluster: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl GraceState {
    pub(crate) fn in_grace(&self) -> bool {
        let own = self.until.is_some_and(|t| Instant::now() < t)
            && !self.reclaims_over.load(std::sync::atomic::Ordering::Acquire);
        own || self.cluster.as_ref().is_some_and(|g| g.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// A file's mirror that grants nothing new while a grace period is in force
/// ([`Mirror::open`]): for every path that may grant a lock that is not a
/// reclaim (LOCK, and the waiters UNLOCK, CANCEL, a host's restart and the
/// retrying thread grant).
pub(crate) struct Gated<M> {
    pub(crate) inner: M,
    pub(crate) grace: Arc<GraceState>,
}

impl<'a, M: std::ops::Deref<Target = dyn Mirror + 'a>> Mirror for Gated<M> {
    fn admit(&self, want: &Held) -> locks::Admit {
        self.inner.admit(want)
    }
    fn release(&self, owner: &Owner, range: Range) {
        self.inner.release(owner, range)
    }
    fn idle(&self) {
        self.inner.idle()
    }
    fn open(&self) -> bool {
        !self.grace.in_grace() && self.inner.open()
    }
}

/// A thread (with the server's own identity) that runs `f` for each list, answering when done.
fn start_persister(
    f: HostsChanged,
) -> Option<std::sync::mpsc::SyncSender<(Vec<LockHost>, std::sync::mpsc::SyncSender<()>)>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<(Vec<LockHost>, std::sync::mpsc::SyncSender<()>)>(16);
    std::thread::Builder::new()
        .name("nlm-hosts".into())
        .spawn(move || {
            // Not whoever created the lock manager: the process itself writes the list.
            crate::records::act_as_the_process("the thread recording lock holders");
            for (hosts, done) in rx {
                f(&hosts);
                let _ = done.send(());
            }
        })
        .map_err(|e| tracing::error!("no thread to record lock holders ({e}); a restart will not know them"))
        .ok()?;
    Some(tx)
}

impl LockManager {
    pub(crate) fn new(config: &LockConfig, table: Arc<LockTable<Grant>>, stats: Arc<crate::Stats>) -> Self {
        let grace_until = (!config.previous_hosts.is_empty()).then(|| Instant::now() + config.grace_period);
        if let Some(until) = grace_until {
            tracing::info!(
                hosts = config.previous_hosts.len(),
                "lock manager in its grace period for {:?}: only reclaims are granted",
                until - Instant::now()
            );
        }
        LockManager {
            table,
            retrying: std::sync::OnceLock::new(),
            grace: Arc::new(GraceState {
                until: grace_until,
                reclaims_over: std::sync::atomic::AtomicBool::new(config.previous_hosts.is_empty()),
                cluster: config.cluster_grace.clone(),
            }),
            nsm_state: config.nsm_state,
            hosts: Default::default(),
            persister: config.on_hosts_changed.clone().and_then(start_persister),
            callbacks: config.callbacks.then(|| callback::Sender::start(stats, config.lease.clone())),
            pending: parking_lot::Mutex::new(
                config.previous_hosts.iter().map(|h| (h.clone(), false)).collect(),
            ),
            on_reclaims_done: config.on_reclaims_done.clone(),
        }
    }

    pub(crate) fn in_grace(&self) -> bool {
        self.grace.in_grace()
    }

    /// Follow the previous hosts' reclaims, to end the grace period as soon
    /// as none of them can reclaim anything more. NLM has no "reclaim
    /// complete", so the signal is this: a host is done once it has sent a
    /// reclaim and then a LOCK that is not one. Lock clients reclaim
    /// everything before they send anything else (Linux's lockd holds every
    /// lock call of the host while its reclaimer runs, `h_rwsem`; eagernfs's
    /// client does the same), so such a LOCK means its reclaims are over. A
    /// host that reclaims nothing (it held nothing any more) gives no signal:
    /// the grace period then lasts its full length. A host that restarted
    /// (SM_NOTIFY, FREE_ALL) has nothing to reclaim. Hosts are matched by name
    /// and address, as their locks are.
    fn reclaim_progress(&self, name: &[u8], addr: IpAddr, reclaim: bool) {
        if self.grace.reclaims_over.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut pending = self.pending.lock();
        let Some(i) = pending.iter().position(|(h, _)| h.name.as_bytes() == name && h.addr == addr) else {
            return;
        };
        if reclaim {
            pending[i].1 = true;
            return;
        }
        if !pending[i].1 {
            // It has not noticed the restart yet (the answer tells it).
            return;
        }
        self.host_done(&mut pending, i, "has reclaimed its locks");
    }

    /// `name` at `addr` restarted: it has nothing to reclaim.
    fn host_restarted(&self, name: &[u8], addr: IpAddr) {
        let mut pending = self.pending.lock();
        if let Some(i) = pending.iter().position(|(h, _)| h.name.as_bytes() == name && h.addr == addr) {
            self.host_done(&mut pending, i, "restarted: nothing to reclaim");
        }
    }

    fn host_done(&self, pending: &mut Vec<(LockHost, bool)>, i: usize, why: &str) {
        let (h, _) = pending.remove(i);
        tracing::info!(host = %h.name, client = %h.addr, left = pending.len(), "grace period: the host {why}");
        if pending.is_empty() && !self.grace.reclaims_over.swap(true, std::sync::atomic::Ordering::AcqRel) {
            tracing::info!("grace period over early: every host that held locks has reclaimed them");
            if let Some(f) = &self.on_reclaims_done {
                f();
            }
        }
    }

    /// `m`, granting nothing new in a grace period.
    fn gated(&self, m: Box<dyn Mirror>) -> Gated<Box<dyn Mirror>> {
        Gated { inner: m, grace: self.grace.clone() }
    }

    /// `m`, granting nothing new in a grace period (for NFSv4's LOCK).
    pub(crate) fn gate<'a>(&self, m: &'a dyn Mirror) -> Gated<&'a dyn Mirror> {
        Gated { inner: m, grace: self.grace.clone() }
    }

    /// Announce grants (GRANTED callbacks), best effort.
    pub(crate) fn announce(&self, granted: Vec<locks::Waiter<Grant>>) {
        announce(self.callbacks.as_ref(), granted)
    }

    /// Retry, from now on, the requests file systems refused (a new one is waiting).
    fn retry_refused(&self) {
        self.retrying
            .get_or_init(|| {
                let tx = self.callbacks.clone();
                let grace = self.grace.clone();
                mirror::start_retrying(Arc::downgrade(&self.table), grace, move |g| announce(tx.as_ref(), g))
            })
            .poke();
    }

    /// Remember that `host` at `addr` holds locks (persisted before the lock
    /// is granted, so a restart knows whom to tell). A host stays on the list
    /// until it restarts (SM_NOTIFY) or frees all (FREE_ALL), as with statd.
    fn note_host(&self, host: &Bytes, addr: IpAddr) {
        let mut known = self.hosts.lock();
        if known.iter().any(|(n, a)| n == host && *a == addr) {
            return;
        }
        known.push((host.clone(), addr));
        self.persist(&known);
    }

    fn forget_host(&self, host: &[u8], addr: IpAddr) {
        let mut known = self.hosts.lock();
        let before = known.len();
        known.retain(|(n, a)| !(n == host && *a == addr));
        if known.len() != before {
            self.persist(&known);
        }
    }

    fn persist(&self, known: &[(Bytes, IpAddr)]) {
        if let Some(tx) = &self.persister {
            let list: Vec<LockHost> = known
                .iter()
                .map(|(n, a)| LockHost { name: String::from_utf8_lossy(n).into_owned(), addr: *a })
                .collect();
            let (done_tx, done) = std::sync::mpsc::sync_channel(1);
            if tx.send((list, done_tx)).is_ok() {
                let _ = done.recv();
            }
        }
    }
}

fn announce(tx: Option<&callback::Sender>, granted: Vec<locks::Waiter<Grant>>) {
    if let Some(tx) = tx {
        for w in granted {
            tx.granted(w.notice.addr, w.notice.args);
        }
    }
}

fn owner(l: &Nlm4Lock) -> Owner {
    let mut host = l.caller_name.0.clone();
    if host.first() == Some(&0) {
        // NFSv4 lock owners' host names start with a NUL byte (see
        // `nfs4::state`): an NLM caller cannot name one and free its locks.
        host = [b"nlm:".as_slice(), &host].concat().into();
    }
    Owner { host, oh: l.oh.0.clone(), svid: l.svid }
}

/// Check the lock's file handle names a file this caller may use; its
/// file system's part in locks, if it takes one.
fn check_file(call: &Call, fh: &Netobj) -> Result<Option<Arc<BackendMirror>>, Nlm4Stats> {
    let Ok(data) = Opaque::new(fh.0.clone()) else { return Err(Nlm4Stats::StaleFh) };
    let r = call.resolve(&NfsFh3 { data }).map_err(|s| match s {
        eagernfs_proto::nfs3::Nfsstat3::Stale | eagernfs_proto::nfs3::Nfsstat3::Badhandle => {
            Nlm4Stats::StaleFh
        }
        _ => Nlm4Stats::Failed,
    })?;
    r.export.backend.getattr(&r.fh).map_err(|e| match e {
        eagernfs_vfs::FsError::Jukebox => Nlm4Stats::DeniedNolocks,
        _ => Nlm4Stats::StaleFh,
    })?;
    Ok(BackendMirror::of(&r.export.backend, &r.fh))
}

/// `m` as the table takes it.
pub(crate) fn as_mirror(m: &Option<Arc<BackendMirror>>) -> &dyn Mirror {
    match m {
        Some(m) => &**m,
        None => &NoMirror,
    }
}

fn want(call: &Call, l: &Nlm4Lock, exclusive: bool) -> Held {
    Held {
        owner: owner(l),
        exclusive,
        range: Range::from_nlm(l.l_offset, l.l_len),
        addr: call.conn.peer.addr.ip(),
    }
}

pub(crate) fn dispatch(call: &Call, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let Some(lm) = call.state.locks.as_ref() else { return Outcome::ProcUnavail };
    let Ok(args) = NlmArgs::decode(call.header.proc_, &mut body) else {
        return Outcome::GarbageArgs;
    };
    let res = |cookie: Netobj, stat: Nlm4Stats| Nlm4Res { cookie, stat };
    match args {
        NlmArgs::Null => {}
        NlmArgs::Test(a) => {
            let stat = if in_grace(call, lm) {
                Nlm4TestReply::Other(Nlm4Stats::DeniedGracePeriod)
            } else {
                match check_file(call, &a.alock.fh) {
                    Err(s) => Nlm4TestReply::Other(s),
                    Ok(m) => test(lm, &a, &want(call, &a.alock, a.exclusive), m.as_deref()),
                }
            };
            Nlm4TestRes { cookie: a.cookie, stat }.encode(out);
        }
        NlmArgs::Lock(a) | NlmArgs::NmLock(a) => {
            let stat = lock(call, lm, &a);
            res(a.cookie, stat).encode(out);
        }
        NlmArgs::Cancel(a) => {
            let stat = if lm.in_grace() {
                Nlm4Stats::DeniedGracePeriod
            } else {
                let range = Range::from_nlm(a.alock.l_offset, a.alock.l_len);
                let m = lm.gated(mirror::mirror_for(call.exports, &a.alock.fh.0));
                let (found, granted) = lm.table.cancel(&a.alock.fh.0, &owner(&a.alock), range, &m);
                lm.announce(granted);
                if found {
                    Nlm4Stats::Granted
                } else {
                    Nlm4Stats::Denied
                }
            };
            res(a.cookie, stat).encode(out);
        }
        NlmArgs::Unlock(a) => {
            // Allowed in the grace period too: it only gives something up.
            let range = Range::from_nlm(a.alock.l_offset, a.alock.l_len);
            let m = lm.gated(mirror::mirror_for(call.exports, &a.alock.fh.0));
            let granted = lm.table.unlock(&a.alock.fh.0, &owner(&a.alock), range, &m);
            lm.announce(granted);
            res(a.cookie, Nlm4Stats::Granted).encode(out);
        }
        // We are not a client: nothing of ours was blocked.
        NlmArgs::Granted(a) => res(a.cookie, Nlm4Stats::Denied).encode(out),
        NlmArgs::FreeAll(n) => {
            release_host(call, lm, &n.name, "FREE_ALL");
        }
        // The asynchronous `_MSG`/`_RES` forms (old UDP clients) and DOS share
        // reservations are not offered: Linux, libnfs and our client use the
        // synchronous calls.
        NlmArgs::TestMsg(_)
        | NlmArgs::LockMsg(_)
        | NlmArgs::CancelMsg(_)
        | NlmArgs::UnlockMsg(_)
        | NlmArgs::GrantedMsg(_)
        | NlmArgs::TestRes(_)
        | NlmArgs::LockRes(_)
        | NlmArgs::CancelRes(_)
        | NlmArgs::UnlockRes(_)
        | NlmArgs::GrantedRes(_)
        | NlmArgs::Share(_)
        | NlmArgs::Unshare(_) => return Outcome::ProcUnavail,
    }
    Outcome::Replied
}

/// NLM's grace period or NFSv4's: the lock table is one, so while either
/// protocol's clients reclaim, neither grants new locks.
fn in_grace(call: &Call, lm: &LockManager) -> bool {
    lm.in_grace() || call.state.nfs4.as_ref().is_some_and(|v4| v4.in_grace())
}

fn lock(call: &Call, lm: &LockManager, a: &Nlm4LockArgs) -> Nlm4Stats {
    lm.reclaim_progress(&a.alock.caller_name.0, call.conn.peer.addr.ip(), a.reclaim);
    if in_grace(call, lm) && !a.reclaim {
        return Nlm4Stats::DeniedGracePeriod;
    }
    let m = match check_file(call, &a.alock.fh) {
        Ok(m) => m,
        Err(s) => return s,
    };
    if a.alock.l_offset > i64::MAX as u64 {
        return Nlm4Stats::Fbig;
    }
    let notice = Grant {
        addr: call.conn.peer.addr.ip(),
        args: Nlm4TestArgs { cookie: a.cookie.clone(), exclusive: a.exclusive, alock: a.alock.clone() },
        mirror: m.clone(),
    };
    // A reclaim never waits: in the grace period nothing else can hold the range.
    let block = a.block && !a.reclaim;
    lm.note_host(&a.alock.caller_name.0, call.conn.peer.addr.ip());
    // Checked again once the file system has answered (see `Mirror::open`),
    // unless this is a reclaim.
    let gated = Gated { inner: as_mirror(&m), grace: lm.grace.clone() };
    let mirror: &dyn Mirror = if a.reclaim { as_mirror(&m) } else { &gated };
    let r = lm.table.lock(&a.alock.fh.0, want(call, &a.alock, a.exclusive), block, notice, mirror);
    match r {
        LockResult::Granted => Nlm4Stats::Granted,
        LockResult::Grace => Nlm4Stats::DeniedGracePeriod,
        LockResult::Denied => Nlm4Stats::Denied,
        LockResult::Blocked => {
            if m.is_some() {
                // Another client of the file system may be what it waits for.
                lm.retry_refused();
            }
            Nlm4Stats::Blocked
        }
        LockResult::Unavailable => Nlm4Stats::DeniedNolocks,
        LockResult::NoLocks => {
            tracing::warn!(peer = %call.conn.peer.addr, "lock table full: NLM4_DENIED_NOLOCKS");
            Nlm4Stats::DeniedNolocks
        }
    }
}

/// TEST: a conflict here, or else in the file system.
fn test(lm: &LockManager, a: &Nlm4TestArgs, want: &Held, m: Option<&BackendMirror>) -> Nlm4TestReply {
    if let Some(h) = lm.table.test(&a.alock.fh.0, want) {
        return Nlm4TestReply::Denied(Nlm4Holder {
            exclusive: h.exclusive,
            svid: h.owner.svid,
            oh: Opaque(h.owner.oh.clone()),
            l_offset: h.range.start,
            l_len: h.range.nlm_len(),
        });
    }
    let Some(m) = m else { return Nlm4TestReply::Other(Nlm4Stats::Granted) };
    match m.test(want) {
        // Another client of the file system: its process id as the svid, no owner handle.
        Ok(Some(c)) => Nlm4TestReply::Denied(Nlm4Holder {
            exclusive: c.exclusive,
            svid: c.pid,
            oh: Opaque(Bytes::new()),
            l_offset: c.range.start,
            l_len: Range { start: c.range.start, end: c.range.end }.nlm_len(),
        }),
        Ok(None) => Nlm4TestReply::Other(Nlm4Stats::Granted),
        Err(eagernfs_vfs::FsError::Jukebox) => Nlm4TestReply::Other(Nlm4Stats::DeniedNolocks),
        Err(_) => Nlm4TestReply::Other(Nlm4Stats::Failed),
    }
}

/// Drop every lock `name` took from the caller's address.
fn release_host(call: &Call, lm: &LockManager, name: &[u8], why: &str) {
    let addr = call.conn.peer.addr.ip();
    let (n, granted) = lm
        .table
        .release_host(name, Some(addr), &|fh| Box::new(lm.gated(mirror::mirror_for(call.exports, fh))));
    tracing::info!(peer = %addr, host = %String::from_utf8_lossy(name), locks = n, "{why}: the host restarted; its locks are released");
    lm.announce(granted);
    lm.forget_host(name, addr);
    lm.host_restarted(name, addr);
}

/// The status monitor: our state number, and SM_NOTIFY from clients that restarted.
pub(crate) fn dispatch_nsm(call: &Call, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let Some(lm) = call.state.locks.as_ref() else { return Outcome::ProcUnavail };
    let Ok(args) = NsmArgs::decode(call.header.proc_, &mut body) else {
        return Outcome::GarbageArgs;
    };
    match args {
        NsmArgs::Null => {}
        NsmArgs::Stat(_) => SmStatRes { res: 0, state: lm.nsm_state }.encode(out),
        // We monitor our own lock manager's clients only; nobody else may
        // register here (stat_fail).
        NsmArgs::Mon(_) => SmStatRes { res: 1, state: lm.nsm_state }.encode(out),
        NsmArgs::Unmon(_) | NsmArgs::UnmonAll(_) => lm.nsm_state.encode(out),
        NsmArgs::SimuCrash => return Outcome::ProcUnavail,
        NsmArgs::Notify(c) => release_host(call, lm, &c.mon_name, "SM_NOTIFY"),
    }
    Outcome::Replied
}
