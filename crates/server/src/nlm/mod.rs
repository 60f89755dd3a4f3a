//! Byte-range locks for NFSv3 clients: the Network Lock Manager (NLM v4)
//! and the Network Status Monitor (NSM v1), on the NFS port.
//!
//! - `locks`: the lock table (POSIX semantics between owners, queues of
//!   blocked requests).
//! - this module: the lock manager ([`LockManager`]): the grace period
//!   after a restart (only reclaims are granted, so clients get back what
//!   they held before anyone else can take it), and the record of hosts
//!   holding locks (`host`: [`LockHost`]).
//! - `program`: the two programs' handlers, on the lock manager.
//! - `grant`: what a blocked request leaves for its GRANTED callback, the
//!   grace period's gate on every grant, and the thread that retries
//!   requests a file system refused.
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
mod grant;
mod host;
pub(crate) mod locks;
pub(crate) mod mirror;
mod program;

use bytes::Bytes;
use grant::{Gated, GraceState, Retrier};
use locks::{LockTable, Mirror, NoMirror};
use mirror::BackendMirror;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use callback::{hostname, notify_restart};
pub(crate) use grant::Grant;
pub use host::LockHost;
pub(crate) use program::{dispatch, dispatch_nsm};

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

/// The running lock manager.
pub(crate) struct LockManager {
    /// The lock table, shared with NFSv4 (its LOCK takes the same locks).
    table: Arc<LockTable<Grant>>,
    /// Started with the first request a file system refused.
    retrying: std::sync::OnceLock<Arc<Retrier>>,
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
                grant::start_retrying(Arc::downgrade(&self.table), grace, move |g| announce(tx.as_ref(), g))
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

/// `m` as the table takes it.
pub(crate) fn as_mirror(m: &Option<Arc<BackendMirror>>) -> &dyn Mirror {
    match m {
        Some(m) => &**m,
        None => &NoMirror,
    }
}
