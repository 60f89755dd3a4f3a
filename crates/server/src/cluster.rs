//! Several servers ("heads") on one CephFS: the state they share, kept in RADOS.
//!
//! Each head has a node id (`eagernfs serve --node-id N`). A head started with
//! the id of a head that died takes its place: its clients, its lock holders,
//! its CephFS session. Nothing is exchanged between heads per call; they share
//! a few small objects in one RADOS pool namespace:
//!
//! - `handle-key`: the 16-byte key of every file handle's MAC, created by
//!   the first head (exclusive create), read by the others, so a handle from
//!   any head works on every head.
//! - `node-N`: what head N must hand on: its NSM state number and the hosts
//!   holding locks through it (statd's `sm/` directory), rewritten whenever a
//!   host appears or goes, and the RADOS client id it runs as.
//! - `grace`: the cluster's grace state, in the manner of nfs-ganesha's
//!   `rados_cluster` design: a current epoch C and a recovery epoch R (0: no
//!   grace in force), and per node two flags: NEED (it has clients to let
//!   reclaim) and ENFORCING (it grants only reclaims). Every change is a
//!   read-modify-write checked against the object's version (a concurrent
//!   change makes the write fail and the head retry on the new state), then
//!   announced with a RADOS notify to the heads watching the object.
//!
//! # A take-over
//! The new head (same node id) reads `node-N`, sets its NEED flag (starting
//! a grace period, `R := C, C := C + 1`, if none is in force) and waits
//! until every other live head (one whose RADOS client answers a notify of `grace`) has
//! set ENFORCING: from then on nobody grants a lock that is not a reclaim.
//! Only then is the dead head's CephFS session ended (its locks and
//! capabilities released at once: `ceph_start_reclaim` with the node's
//! session uuid, by the CephFS backend), the hosts of `node-N` are sent
//! SM_NOTIFY, and their locks are reclaimed through the new head. When its
//! grace period is over the head clears NEED; the last head to clear it
//! ends the grace period for all (`R := 0`, every ENFORCING cleared).
//!
//! The logic is written against [`SharedStore`], which RADOS implements
//! ([`eagernfs_vfs::rados::Rados`]) and [`MemoryStore`] does in memory for tests.

use crate::nlm::LockHost;
use eagernfs_vfs::rados::{Expect, Rados, RadosError, Versioned, WatchEvent};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The object names.
pub const GRACE_OID: &str = "grace";
pub const KEY_OID: &str = "handle-key";
pub fn node_oid(node: u32) -> String {
    format!("node-{node}")
}

/// Read-modify-write attempts before giving up (each loses only to another
/// head's successful write, so this many means something is wrong).
const UPDATE_TRIES: usize = 1000;
/// How often the shared state is read even without a notification (a lost
/// notify, a lost watch).
const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// How long a take-over waits for the other heads' ENFORCING before it asks
/// which heads are up at all.
const CONFIRM_QUICKLY: Duration = Duration::from_millis(300);
/// How long a notify waits for the other heads' acknowledgements.
const NOTIFY_WAIT: Duration = Duration::from_secs(1);
/// How much longer than its own timeout a take-over waits for a notify to
/// complete: librados waits for the OSD's completion of a notify without a
/// deadline of its own, and a completion lost with a broken connection to
/// the OSD would hold the head's start (or its stop) for ever.
const NOTIFY_MARGIN: Duration = Duration::from_secs(5);
/// How long a dead head's RADOS client stays blocklisted (its process is
/// gone; a new process has a new address).
const FENCE_FOR: Duration = Duration::from_secs(24 * 3600);

/// A head's right to answer: renewed by each successful read of [`GRACE_OID`]
/// (a round trip to the OSD that holds it), for `length` from the moment
/// the read was *sent*. A head whose lease ran out answers nothing (see
/// `docs/cluster.md`, "Fencing"): it may be cut off from the cluster while
/// another head takes its node over, and a take-over waits out the lease
/// after fencing the old head before it ends the old head's CephFS session.
///
/// Time is `CLOCK_BOOTTIME`, which keeps counting while the machine is
/// suspended (`CLOCK_MONOTONIC`, and so `Instant`, does not): a head frozen
/// by a suspend sees its lease over when it wakes. A fenced lease (its node
/// taken over, its RADOS client blocklisted, its CephFS session ended) never
/// becomes valid again.
pub struct Lease {
    length: Duration,
    /// Valid until this many nanoseconds of `CLOCK_BOOTTIME` (0: not yet).
    until_ns: std::sync::atomic::AtomicU64,
    /// Raised for good: this head must answer nothing more. Shared with the
    /// CephFS backend, which raises it when the cluster ends its session.
    fenced: Arc<AtomicBool>,
    /// Why it was fenced (for the log line and the exit).
    why: Mutex<Option<String>>,
    /// "Answering nothing" was logged (cleared when renewed).
    said_out: AtomicBool,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("length", &self.length).field("valid", &self.valid()).finish()
    }
}

/// Nanoseconds of `CLOCK_BOOTTIME`.
pub fn boottime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_BOOTTIME exists on every Linux this runs on.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    assert_eq!(r, 0, "clock_gettime(CLOCK_BOOTTIME)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Lease {
    /// A lease of `length`, not valid until first renewed.
    pub fn new(length: Duration) -> Lease {
        Lease {
            length,
            until_ns: Default::default(),
            fenced: Arc::new(AtomicBool::new(false)),
            why: Mutex::new(None),
            said_out: AtomicBool::new(false),
        }
    }

    pub fn length(&self) -> Duration {
        self.length
    }

    /// A read of the grace state sent at `sent_ns` (of [`boottime_ns`]) came back.
    pub fn renewed(&self, sent_ns: u64) {
        let until = sent_ns.saturating_add(self.length.as_nanos() as u64);
        self.until_ns.fetch_max(until, Ordering::AcqRel);
        if self.valid() && self.said_out.swap(false, Ordering::AcqRel) {
            tracing::warn!("cluster: the cluster answers again: answering calls again");
        }
    }

    /// Whether this head may answer now. A lease of length 0 never runs out
    /// (`--cluster-lease 0`), but can be fenced.
    pub fn valid(&self) -> bool {
        !self.fenced.load(Ordering::Acquire)
            && (self.length.is_zero() || boottime_ns() < self.until_ns.load(Ordering::Acquire))
    }

    /// Whether a call may be answered now; says so in the log when that changes.
    pub fn admit(&self) -> bool {
        let ok = self.valid();
        if !ok && !self.said_out.swap(true, Ordering::AcqRel) {
            match self.fenced() {
                Some(why) => tracing::error!("cluster: this head is fenced ({why}): it answers nothing more"),
                None => tracing::error!(
                    "cluster: no answer from the cluster for {:?} (this head's lease): answering nothing \
                     (NFSv3 calls get JUKEBOX, others no reply) until it answers again",
                    self.length
                ),
            }
        }
        ok
    }

    /// Never valid again; the first reason given is kept.
    pub fn fence(&self, why: &str) {
        let mut w = self.why.lock();
        if w.is_none() {
            *w = Some(why.to_string());
        }
        self.fenced.store(true, Ordering::Release);
    }

    /// Why it was fenced, if it was.
    pub fn fenced(&self) -> Option<String> {
        if !self.fenced.load(Ordering::Acquire) {
            return None;
        }
        Some(self.why.lock().clone().unwrap_or_else(|| {
            "the cluster ended this head's CephFS session (evicted or blocklisted)".to_string()
        }))
    }

    /// The flag a CephFS backend raises when the cluster ends its session.
    pub fn fence_flag(&self) -> Arc<AtomicBool> {
        self.fenced.clone()
    }
}

/// What the cluster logic needs of an object store.
pub trait SharedStore: Send + Sync + 'static {
    fn read(&self, oid: &str) -> Result<Option<Versioned>, RadosError>;
    /// Fails with [`RadosError::Conflict`] unless `expect` holds.
    fn write(&self, oid: &str, data: &[u8], expect: Expect) -> Result<(), RadosError>;
    /// Tell the watchers of `oid` it changed, waiting at most `timeout`:
    /// the client ids that acknowledged (the heads that are up).
    fn notify(&self, oid: &str, timeout: Duration) -> Result<Vec<u64>, RadosError>;
    /// This client's id (what [`SharedStore::notify`] returns).
    fn client_id(&self) -> u64;
    /// This client's address, for [`SharedStore::fence`].
    fn address(&self) -> String;
    /// Cut the client at `addr` (a dead head's) off the cluster.
    fn fence(&self, addr: &str) -> Result<(), RadosError>;
}

impl SharedStore for Rados {
    fn read(&self, oid: &str) -> Result<Option<Versioned>, RadosError> {
        Rados::read(self, oid)
    }
    fn write(&self, oid: &str, data: &[u8], expect: Expect) -> Result<(), RadosError> {
        Rados::write(self, oid, data, expect)
    }
    fn notify(&self, oid: &str, timeout: Duration) -> Result<Vec<u64>, RadosError> {
        Rados::notify(self, oid, timeout)
    }
    fn client_id(&self) -> u64 {
        self.instance_id()
    }
    fn address(&self) -> String {
        self.addrs().unwrap_or_default()
    }
    fn fence(&self, addr: &str) -> Result<(), RadosError> {
        self.blocklist(addr, FENCE_FOR)
    }
}

/// Why the cluster state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Rados(#[from] RadosError),
    #[error(
        "the shared object {oid} is damaged ({why}); remove it (`rados rm {oid}`) only if no head is running"
    )]
    Damaged { oid: String, why: String },
    #[error("{0} kept changing: {UPDATE_TRIES} updates lost to other heads' writes")]
    Contended(String),
    #[error("node {0} was taken over by another head")]
    Superseded(u32),
}

/// A head's flags in the grace database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeFlags {
    /// It has clients that may reclaim locks: the cluster stays in grace.
    pub need: bool,
    /// It grants only reclaims.
    pub enforcing: bool,
    /// Its head stopped cleanly with clients holding locks and left its NEED
    /// for a successor (see [`Head::hand_over`]) until this time, in seconds
    /// since the Unix epoch; after it any head lifts the NEED. 0: none (a
    /// successor's start clears it, in the same write that sets its NEED).
    pub handover_until: u64,
}

/// The `grace` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraceDb {
    /// The current epoch (from 1).
    pub current: u64,
    /// The epoch whose clients may reclaim; 0 when no grace period is in force.
    pub recovery: u64,
    pub nodes: BTreeMap<u32, NodeFlags>,
}

impl Default for GraceDb {
    fn default() -> Self {
        GraceDb { current: 1, recovery: 0, nodes: BTreeMap::new() }
    }
}

const GRACE_MAGIC: &str = "eagernfs grace v1";
const NODE_MAGIC: &str = "eagernfs node v1";

impl GraceDb {
    pub fn in_grace(&self) -> bool {
        self.recovery != 0
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{GRACE_MAGIC}\nepoch {} {}\n", self.current, self.recovery);
        for (n, f) in &self.nodes {
            s.push_str(&format!(
                "node {n}{}{}{}\n",
                if f.need { " need" } else { "" },
                if f.enforcing { " enforcing" } else { "" },
                if f.handover_until != 0 {
                    format!(" handover_until={}", f.handover_until)
                } else {
                    String::new()
                }
            ));
        }
        s.into_bytes()
    }

    pub fn decode(data: &[u8]) -> Result<GraceDb, String> {
        let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
        let mut lines = text.lines();
        if lines.next() != Some(GRACE_MAGIC) {
            return Err(format!("does not begin with {GRACE_MAGIC:?}"));
        }
        let mut db = GraceDb { current: 0, recovery: 0, nodes: BTreeMap::new() };
        for line in lines {
            let mut w = line.split_whitespace();
            match w.next() {
                Some("epoch") => {
                    let mut num =
                        || w.next().and_then(|x| x.parse::<u64>().ok()).ok_or(format!("bad line {line:?}"));
                    db.current = num()?;
                    db.recovery = num()?;
                }
                Some("node") => {
                    let n: u32 = w.next().and_then(|x| x.parse().ok()).ok_or(format!("bad line {line:?}"))?;
                    let mut f = NodeFlags::default();
                    for flag in w {
                        match flag {
                            "need" => f.need = true,
                            "enforcing" => f.enforcing = true,
                            _ => match flag.strip_prefix("handover_until=").map(str::parse) {
                                Some(Ok(t)) => f.handover_until = t,
                                _ => return Err(format!("unknown flag in {line:?}")),
                            },
                        }
                    }
                    db.nodes.insert(n, f);
                }
                None => {}
                Some(_) => return Err(format!("bad line {line:?}")),
            }
        }
        if db.current == 0 || db.recovery >= db.current {
            return Err(format!("epochs {} {} out of order", db.current, db.recovery));
        }
        Ok(db)
    }

    /// `node` needs a grace period: start one unless one is in force.
    pub fn start_grace(&mut self, node: u32) {
        if self.recovery == 0 {
            self.recovery = self.current;
            self.current += 1;
        }
        let f = self.nodes.entry(node).or_default();
        f.need = true;
        f.enforcing = true;
        f.handover_until = 0;
    }

    /// `node` needs no more grace; the last one ends it for all.
    pub fn lift(&mut self, node: u32) {
        let f = self.nodes.entry(node).or_default();
        f.need = false;
        f.handover_until = 0;
        if self.nodes.values().all(|f| !f.need) {
            self.recovery = 0;
            for f in self.nodes.values_mut() {
                f.enforcing = false;
            }
        }
    }
}

/// The `node-N` object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRecord {
    /// The NSM state number of the head's last start (odd while up).
    pub nsm_state: i32,
    /// The RADOS client id the head runs as (0: none yet), and its address.
    pub client: u64,
    pub addr: String,
    /// Hosts holding locks through this head.
    pub hosts: Vec<LockHost>,
}

impl NodeRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{NODE_MAGIC}\nnsm_state {}\nclient {}\n", self.nsm_state, self.client);
        if !self.addr.is_empty() {
            s.push_str(&format!("addr {}\n", self.addr.replace(['\n', '\r', ' '], "")));
        }

        for h in &self.hosts {
            s.push_str(&format!("host {} {}\n", h.addr, h.name.replace(['\n', '\r'], " ")));
        }
        s.into_bytes()
    }

    pub fn decode(data: &[u8]) -> Result<NodeRecord, String> {
        let text = std::str::from_utf8(data).map_err(|_| "not UTF-8".to_string())?;
        let mut lines = text.lines();
        if lines.next() != Some(NODE_MAGIC) {
            return Err(format!("does not begin with {NODE_MAGIC:?}"));
        }
        let mut r = NodeRecord::default();
        for line in lines {
            let bad = || format!("bad line {line:?}");
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            match word {
                "nsm_state" => r.nsm_state = rest.trim().parse().map_err(|_| bad())?,
                "client" => r.client = rest.trim().parse().map_err(|_| bad())?,
                "addr" => r.addr = rest.trim().to_string(),
                "host" => {
                    let (addr, name) = rest.split_once(' ').ok_or_else(bad)?;
                    r.hosts.push(LockHost { addr: addr.parse().map_err(|_| bad())?, name: name.to_string() });
                }
                "" => {}
                _ => return Err(bad()),
            }
        }
        Ok(r)
    }
}

/// Seconds since the Unix epoch (heads' clocks must agree within seconds
/// for [`NodeFlags::handover_until`]).
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The next NSM state number after `last`: odd while up, wrapping before overflow.
pub fn next_nsm_state(last: i32) -> i32 {
    match last {
        l if l <= 0 || l >= i32::MAX - 2 => 1,
        l if l % 2 == 1 => l + 2,
        l => l + 1,
    }
}

/// Read-modify-write `oid` until the write wins: `change` gets the current
/// value (`None`: no object) and returns the new one, or `None` for no change.
fn update<T>(
    store: &dyn SharedStore,
    oid: &str,
    decode: impl Fn(&[u8]) -> Result<T, String>,
    encode: impl Fn(&T) -> Vec<u8>,
    mut change: impl FnMut(Option<&T>) -> Option<T>,
) -> Result<Option<T>, ClusterError> {
    for _ in 0..UPDATE_TRIES {
        let (now, expect) = match store.read(oid)? {
            Some(v) => {
                let t = decode(&v.data).map_err(|why| ClusterError::Damaged { oid: oid.into(), why })?;
                (Some(t), Expect::Version(v.version))
            }
            None => (None, Expect::Absent),
        };
        let Some(new) = change(now.as_ref()) else { return Ok(now) };
        match store.write(oid, &encode(&new), expect) {
            Ok(()) => return Ok(Some(new)),
            Err(RadosError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ClusterError::Contended(oid.into()))
}

/// Change the grace database; the new value (or the unchanged one).
pub fn update_grace(
    store: &dyn SharedStore,
    mut change: impl FnMut(&mut GraceDb) -> bool,
) -> Result<GraceDb, ClusterError> {
    let out = update(store, GRACE_OID, GraceDb::decode, GraceDb::encode, |now| {
        let mut db = now.cloned().unwrap_or_default();
        (change(&mut db) || now.is_none()).then_some(db)
    })?;
    Ok(out.unwrap_or_default())
}

fn read_grace(store: &dyn SharedStore) -> Result<GraceDb, ClusterError> {
    match store.read(GRACE_OID)? {
        None => Ok(GraceDb::default()),
        Some(v) => {
            GraceDb::decode(&v.data).map_err(|why| ClusterError::Damaged { oid: GRACE_OID.into(), why })
        }
    }
}

/// The handle key every head uses: made by the first, read by the others.
pub fn handle_key(store: &dyn SharedStore) -> Result<[u8; 16], ClusterError> {
    for _ in 0..UPDATE_TRIES {
        if let Some(v) = store.read(KEY_OID)? {
            return v.data.as_slice().try_into().map_err(|_| ClusterError::Damaged {
                oid: KEY_OID.into(),
                why: format!(
                    "{} bytes, not 16 (removing it makes every client's handles stale)",
                    v.data.len()
                ),
            });
        }
        let key: [u8; 16] = rand::random();
        match store.write(KEY_OID, &key, Expect::Absent) {
            Ok(()) => return Ok(key),
            // Another head made it first: use that one.
            Err(RadosError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ClusterError::Contended(KEY_OID.into()))
}

/// What a head learns when it joins.
#[derive(Debug)]
pub struct Joined {
    /// The hosts that held locks through this node id before (to notify, and
    /// to let reclaim).
    pub previous_hosts: Vec<LockHost>,
    /// This start's NSM state number.
    pub nsm_state: i32,
    /// The NSM state of the node's previous start, and the RADOS client it ran as.
    pub previous: NodeRecord,
}

/// One head's part in the cluster: keeps its grace flag current and its
/// node record written.
pub struct Head {
    store: Arc<dyn SharedStore>,
    node: u32,
    /// The cluster is in grace: grant only reclaims (read by the lock manager).
    grace: Arc<AtomicBool>,
    /// Bumped at each notification or lost watch; the thread waits on it.
    events: Mutex<u64>,
    woken: Condvar,
    /// When this head clears its NEED flag (none: it has none).
    lift_at: Mutex<Option<Instant>>,
    /// Handing its clients over (stopping): its NEED stays for a successor.
    handing_over: AtomicBool,
    stop: AtomicBool,
    /// The last grace state seen, for status pages.
    seen: Mutex<GraceDb>,
    /// Fencing the node's previous RADOS client.
    fencing: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The watch on the grace state (its guard), how to make it again, and
    /// whether it was lost.
    watch: Mutex<Option<WatchGuard>>,
    make_watch: Mutex<Option<MakeWatch>>,
    watch_lost: AtomicBool,
    /// This head's right to answer.
    lease: Arc<Lease>,
    /// [`Head::wait_enforced`] took heads that did not answer for down.
    assumed_down: AtomicBool,
    /// When [`Head::join`]'s writes of the node record and the grace state were done.
    written: Instant,
    /// Called once when the head is fenced (the server exits).
    on_fenced: Mutex<Option<OnFenced>>,
}

/// What a fenced head does (given why): the server exits.
pub type OnFenced = Box<dyn FnOnce(String) + Send>;

/// Keeps a watch; ends it when dropped.
pub type WatchGuard = Box<dyn Send>;
/// What a watch reports to.
pub type OnWatch = Box<dyn Fn(WatchEvent) + Send + Sync>;
/// Makes a watch on [`GRACE_OID`] that reports to the given callback.
pub type MakeWatch = Box<dyn FnMut(OnWatch) -> Result<WatchGuard, RadosError> + Send>;

/// Tell the other heads the grace state changed, without waiting for their
/// acknowledgements (a dead head's lingering watch would hold the notify up
/// to its timeout): they look at once, and their own changes notify us.
fn announce(store: &Arc<dyn SharedStore>) {
    let store = store.clone();
    let spawned = std::thread::Builder::new().name("cluster-notify".into()).spawn(move || {
        if let Err(e) = store.notify(GRACE_OID, NOTIFY_WAIT) {
            tracing::warn!("cluster: cannot notify the other heads: {e}");
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cluster: no thread to notify the other heads ({e}); they see the change within {REFRESH_EVERY:?}");
    }
}

/// `store.notify(oid, timeout)`, waited for at most `timeout` +
/// [`NOTIFY_MARGIN`] (on a thread of its own, left to finish when it does):
/// a notify not completed by then was acknowledged by nobody, as far as the
/// caller can tell (a head that is up is then taken for down, whose lease is
/// waited out: slower, never unsafe).
fn notify_bounded(
    store: &Arc<dyn SharedStore>,
    oid: &'static str,
    timeout: Duration,
) -> Result<Vec<u64>, RadosError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let s = store.clone();
    let spawned = std::thread::Builder::new().name("cluster-notify".into()).spawn(move || {
        let _ = tx.send(s.notify(oid, timeout));
    });
    if spawned.is_err() {
        return store.notify(oid, timeout);
    }
    match rx.recv_timeout(timeout + NOTIFY_MARGIN) {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                "cluster: a notify of {oid} did not complete within {:?}: taking the heads that did not confirm for down",
                timeout + NOTIFY_MARGIN
            );
            Ok(Vec::new())
        }
    }
}

impl Head {
    /// Join as `node`: take the node's record (NSM state, hosts holding locks),
    /// and start a grace period if those hosts may have locks to reclaim.
    /// The head's thread then keeps its grace flag current; see [`Head::wait_enforced`].
    pub fn join(
        store: Arc<dyn SharedStore>,
        node: u32,
        grace_period: Duration,
        lease: Option<Arc<Lease>>,
    ) -> Result<(Arc<Head>, Joined), ClusterError> {
        let oid = node_oid(node);
        let (client, addr) = (store.client_id(), store.address());
        let mut previous = NodeRecord::default();
        let rec = update(&*store, &oid, NodeRecord::decode, NodeRecord::encode, |now| {
            previous = now.cloned().unwrap_or_default();
            Some(NodeRecord {
                nsm_state: next_nsm_state(previous.nsm_state),
                client,
                addr: addr.clone(),
                hosts: previous.hosts.clone(),
            })
        })?
        .expect("written");
        // The node's previous process, if it is somehow still running, must
        // stop using the cluster (and its watch goes at once, so notifies
        // do not wait for it).
        // On a thread of its own: a blocklist waits for a new OSD map (about
        // a second), which the take-over need not wait for.
        let fencing = (!previous.addr.is_empty() && previous.addr != addr).then(|| {
            let (store, old) = (store.clone(), previous.addr.clone());
            std::thread::spawn(move || match store.fence(&old) {
                Ok(()) => tracing::info!(node, "cluster: fenced node {node}'s previous RADOS client {old}"),
                Err(e) => tracing::warn!(
                    node,
                    "cluster: cannot fence node {node}'s previous RADOS client {old}: {e}"
                ),
            })
        });
        let need = !rec.hosts.is_empty() && !grace_period.is_zero();
        let db = update_grace(&*store, |db| {
            if need {
                db.start_grace(node);
                return true;
            }
            // A need left by an earlier run of this node is over: nobody is
            // left to reclaim through it.
            let before = db.clone();
            if db.nodes.get(&node).is_some_and(|f| f.need) {
                db.lift(node);
            }
            let in_grace = db.in_grace();
            db.nodes.entry(node).or_default().enforcing = in_grace;
            *db != before
        })?;
        // Both writes (node record, grace state) are done: see `lease_over_at`.
        let written = Instant::now();
        announce(&store);
        let head = Arc::new(Head {
            store,
            node,
            grace: Arc::new(AtomicBool::new(db.in_grace())),
            events: Mutex::new(0),
            woken: Condvar::new(),
            lift_at: Mutex::new(need.then(|| Instant::now() + grace_period)),
            handing_over: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            seen: Mutex::new(db),
            fencing: Mutex::new(fencing),
            watch: Mutex::new(None),
            make_watch: Mutex::new(None),
            watch_lost: AtomicBool::new(false),
            lease: lease.unwrap_or_else(|| Arc::new(Lease::new(Duration::ZERO))),
            on_fenced: Mutex::new(None),
            assumed_down: AtomicBool::new(false),
            written,
        });
        Ok((head, Joined { previous_hosts: rec.hosts.clone(), nsm_state: rec.nsm_state, previous }))
    }

    /// Wait until the node's previous RADOS client is fenced (if it had one).
    pub fn wait_fenced(&self) {
        if let Some(t) = self.fencing.lock().take() {
            let _ = t.join();
        }
    }

    /// The flag the lock manager reads: the cluster is in grace.
    pub fn grace_flag(&self) -> Arc<AtomicBool> {
        self.grace.clone()
    }

    pub fn node(&self) -> u32 {
        self.node
    }

    /// The grace state last seen.
    pub fn grace_state(&self) -> GraceDb {
        self.seen.lock().clone()
    }

    /// Something changed (a notification, a lost watch): look again.
    pub fn poke(&self) {
        *self.events.lock() += 1;
        self.woken.notify_all();
    }

    /// The callback for a RADOS watch on [`GRACE_OID`].
    /// Watch the grace state with `make`, and again with it whenever the
    /// watch is lost (by the head's thread).
    pub fn watch_with(self: &Arc<Self>, mut make: MakeWatch) -> Result<(), RadosError> {
        *self.watch.lock() = Some(make(self.on_watch())?);
        *self.make_watch.lock() = Some(make);
        Ok(())
    }

    /// Make the watch again after it was lost; false if that failed (tried again later).
    fn rewatch(self: &Arc<Self>) -> bool {
        drop(self.watch.lock().take());
        let Some(make) = &mut *self.make_watch.lock() else { return true };
        match make(self.on_watch()) {
            Ok(w) => {
                *self.watch.lock() = Some(w);
                tracing::info!("cluster: watching the grace state again");
                true
            }
            Err(e) => {
                tracing::warn!(
                    "cluster: cannot watch the grace state again: {e}; reading it every {REFRESH_EVERY:?}"
                );
                false
            }
        }
    }

    /// End the watch (at shutdown, after [`Head::stop`]).
    pub fn unwatch(&self) {
        drop(self.watch.lock().take());
        drop(self.make_watch.lock().take());
    }

    pub fn on_watch(self: &Arc<Self>) -> OnWatch {
        let weak = Arc::downgrade(self);
        Box::new(move |ev| {
            if let Some(h) = weak.upgrade() {
                if let WatchEvent::Lost(e) = ev {
                    tracing::warn!(
                        "cluster: the watch on the grace state was lost (errno {e}); reading it again"
                    );
                    // Until read again, assume the worst.
                    h.grace.store(true, Ordering::Release);
                    h.watch_lost.store(true, Ordering::Release);
                }
                h.poke();
            }
        })
    }

    /// Read the grace state and act on it: set this head's flag, say
    /// ENFORCING when in grace, end this head's need when its time is up.
    pub fn refresh(&self) -> Result<GraceDb, ClusterError> {
        let lift = self.lift_at.lock().is_some_and(|t| Instant::now() >= t)
            && !self.handing_over.load(Ordering::Acquire);
        let node = self.node;
        let sent = boottime_ns();
        let mut before = read_grace(&*self.store).map_err(|e| self.fence_if_blocklisted(e))?;
        if before.in_grace() && self.lift_expired_handovers(&before)? {
            before = read_grace(&*self.store).map_err(|e| self.fence_if_blocklisted(e))?;
        }
        let f = before.nodes.get(&node).copied().unwrap_or_default();
        let must_change = lift || (before.in_grace() && !f.enforcing);
        let db = if must_change {
            let db = update_grace(&*self.store, |db| {
                // Checked again on every attempt: a hand-over begun meanwhile keeps the NEED.
                let lift = lift && !self.handing_over.load(Ordering::Acquire);
                if lift {
                    let had = db.nodes.get(&node).is_some_and(|f| f.need);
                    db.lift(node);
                    return had || db.in_grace();
                }
                if db.recovery != 0 {
                    // Enforced here before ENFORCING is written: a take-over
                    // that reads it ends the dead head's session next.
                    self.grace.store(true, Ordering::Release);
                }
                let f = db.nodes.entry(node).or_default();
                let changed = db.recovery != 0 && !f.enforcing;
                f.enforcing |= db.recovery != 0;
                changed
            })?;
            if lift {
                *self.lift_at.lock() = None;
                tracing::info!(
                    node,
                    "cluster: this head's grace period is over{}",
                    if db.in_grace() { " (others' goes on)" } else { "; the cluster's has ended" }
                );
            }
            announce(&self.store);
            db
        } else {
            before
        };
        // Without a watch this head may miss a take-over's grace period (and
        // not answer its notify): grant only reclaims until it watches again.
        self.grace.store(db.in_grace() || self.watch_lost.load(Ordering::Acquire), Ordering::Release);
        *self.seen.lock() = db.clone();
        // Only now, with the grace flag set from what was read: a head that
        // missed a take-over's grace period while cut off learns of it
        // before it answers again.
        self.check_still_node()?;
        self.lease.renewed(sent);
        Ok(db)
    }

    /// Every host that held locks through this node has reclaimed them: end
    /// this head's need for the grace period now instead of at its end.
    pub fn reclaims_done(&self) {
        let mut at = self.lift_at.lock();
        if at.is_some() {
            *at = Some(Instant::now());
            drop(at);
            tracing::info!(
                node = self.node,
                "cluster: every host of this node has reclaimed its locks: this head's grace period ends now"
            );
            self.poke();
        }
    }

    /// A planned stop of a head whose clients hold locks: keep them for a
    /// successor with this node id. Sets this node's NEED (a grace period
    /// for the cluster: nobody grants anything but reclaims), records until
    /// when a successor may come (`hold_for` from now; after that any head
    /// lifts the NEED, see [`NodeFlags::handover_until`]), and waits (at most
    /// `timeout`) until every other live head enforces it. Only then may this
    /// head end its CephFS session, which releases its clients' locks in the
    /// file system. True if every live head confirmed.
    pub fn hand_over(&self, hold_for: Duration, timeout: Duration) -> Result<bool, ClusterError> {
        self.handing_over.store(true, Ordering::Release);
        *self.lift_at.lock() = None;
        // This head grants only reclaims from now on, too.
        self.grace.store(true, Ordering::Release);
        let until = unix_now() + hold_for.as_secs().max(1);
        let node = self.node;
        update_grace(&*self.store, |db| {
            db.start_grace(node);
            db.nodes.entry(node).or_default().handover_until = until;
            true
        })?;
        announce(&self.store);
        tracing::info!(node, "cluster: stopping with clients holding locks: grace period for this node's clients until a successor takes them over (at most {hold_for:?})");
        self.wait_enforced(timeout)
    }

    /// Lift the NEED of nodes whose head stopped (handing over) longer ago
    /// than it allowed a successor; true if one was lifted. Decided on the
    /// grace object alone, in one checked write: a successor's start, which
    /// clears `handover_until` in its own write, cannot be lost.
    fn lift_expired_handovers(&self, db: &GraceDb) -> Result<bool, ClusterError> {
        let now = unix_now();
        let expired_in = |db: &GraceDb| -> Vec<u32> {
            db.nodes
                .iter()
                .filter(|(n, f)| {
                    **n != self.node && f.need && f.handover_until != 0 && now > f.handover_until
                })
                .map(|(n, _)| *n)
                .collect()
        };
        if expired_in(db).is_empty() {
            return Ok(false);
        }
        let mut expired = Vec::new();
        update_grace(&*self.store, |db| {
            expired = expired_in(db);
            for n in &expired {
                db.lift(*n);
            }
            !expired.is_empty()
        })?;
        for n in &expired {
            tracing::warn!(node = n, "cluster: node {n} stopped handing its clients over and no successor came in time: its grace period is lifted (its clients' locks are no longer protected)");
        }
        announce(&self.store);
        Ok(true)
    }

    /// A RADOS error that says this head's client is blocklisted (ESHUTDOWN,
    /// librados's EBLOCKLISTED) fences the head for good: another head took
    /// its node over.
    fn fence_if_blocklisted(&self, e: ClusterError) -> ClusterError {
        if let ClusterError::Rados(r) = &e {
            if r.errno() == Some(libc::ESHUTDOWN) {
                self.lease.fence(&format!(
                    "its RADOS client is blocklisted: another head took node {} over",
                    self.node
                ));
            }
        }
        e
    }

    /// Fence this head if `node-N` names another RADOS client than its own
    /// (a head took the node over but could not blocklist this one).
    fn check_still_node(&self) -> Result<(), ClusterError> {
        let v = self.store.read(&node_oid(self.node)).map_err(|e| self.fence_if_blocklisted(e.into()))?;
        let rec = match v {
            Some(v) => NodeRecord::decode(&v.data)
                .map_err(|why| ClusterError::Damaged { oid: node_oid(self.node), why })?,
            None => NodeRecord::default(),
        };
        let me = self.store.client_id();
        if rec.client != me {
            self.lease.fence(&format!(
                "node {} is served by RADOS client {} now, not by this head's ({me})",
                self.node, rec.client
            ));
            return Err(ClusterError::Superseded(self.node));
        }
        Ok(())
    }

    /// Whether [`Head::wait_enforced`] took some heads that did not answer
    /// for down (their leases are then to be waited out).
    pub fn assumed_down(&self) -> bool {
        self.assumed_down.load(Ordering::Acquire)
    }

    /// The head's lease (the server checks it at every call).
    pub fn lease(&self) -> Arc<Lease> {
        self.lease.clone()
    }

    /// When the node's previous head (and any head that did not confirm a
    /// grace period this head started) has certainly stopped answering:
    /// `None` if there is no lease to wait out (`--cluster-lease 0`).
    ///
    /// The proof (`docs/cluster.md`, "Fencing"): a head renews its lease
    /// only with a read of [`GRACE_OID`] sent at `t` followed by a read of
    /// its node record still naming its own client, and then only until
    /// `t + length`. [`Head::join`] wrote the node record, then the grace
    /// state, and both writes were done at `written`. RADOS orders the
    /// operations on one object, so the previous head's record read that
    /// came after `written` names this head's client (and fences it), and
    /// another head's grace read that came after shows the grace period
    /// (which it then enforces before it renews). Every renewal that shows
    /// neither was processed, so sent, before `written`: those leases end
    /// before `written + length`, on the other head's clock.
    pub fn lease_over_at(&self) -> Option<Instant> {
        let length = self.lease.length();
        if length.is_zero() {
            return None;
        }
        // A margin for clocks that tick at different rates on two machines
        // (NTP keeps them within 500 ppm; 2 % and 50 ms is generous).
        Some(self.written + length + length / 50 + Duration::from_millis(50))
    }

    /// The grace period this head started is counted from now (after a wait
    /// that came before serving).
    pub fn restart_grace_clock(&self, grace_period: Duration) {
        let mut at = self.lift_at.lock();
        if at.is_some() {
            *at = Some(Instant::now() + grace_period);
        }
    }

    /// At a clean stop (nothing is answered any more): the node record names
    /// no client, so the next start of the node need not wait out this head's lease.
    pub fn leave(&self) -> Result<(), ClusterError> {
        let me = self.store.client_id();
        update(&*self.store, &node_oid(self.node), NodeRecord::decode, NodeRecord::encode, |now| {
            let r = now?;
            (r.client == me).then(|| NodeRecord { client: 0, addr: String::new(), ..r.clone() })
        })?;
        Ok(())
    }

    /// Run `f` (once) when the head is fenced; the head's thread then ends.
    pub fn on_fenced(&self, f: OnFenced) {
        *self.on_fenced.lock() = Some(f);
    }

    /// Wait (at most `timeout`) until every other live head enforces the
    /// grace period, so that ending the dead head's session cannot let
    /// anyone else take its clients' locks. A head is live if its RADOS
    /// client acknowledges a notify of the grace state. True if they all
    /// enforce it (or there is no grace period).
    pub fn wait_enforced(&self, timeout: Duration) -> Result<bool, ClusterError> {
        let start = Instant::now();
        let deadline = start + timeout;
        // Up heads answer in milliseconds; only if some have not after this
        // is it worth asking who is up (which waits for dead heads' watches).
        let ask_after = start + CONFIRM_QUICKLY.min(timeout);
        let me = self.store.client_id();
        loop {
            let seen = *self.events.lock();
            let db = self.refresh()?;
            if !db.in_grace() {
                return Ok(true);
            }
            let lagging: Vec<u32> =
                db.nodes.iter().filter(|(n, f)| **n != self.node && !f.enforcing).map(|(n, _)| *n).collect();
            if lagging.is_empty() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= ask_after {
                // Wakes them again and says who is up.
                let live = notify_bounded(&self.store, GRACE_OID, NOTIFY_WAIT.min(timeout))?;
                let lagging_live: Vec<u32> = lagging
                    .into_iter()
                    .filter(|n| self.client_of(*n).is_some_and(|c| c != me && live.contains(&c)))
                    .collect();
                if lagging_live.is_empty() {
                    // Heads that did not answer are down, or cut off: their leases
                    // must run out before the dead head's locks are let go.
                    self.assumed_down.store(true, Ordering::Release);
                    return Ok(true);
                }
                if Instant::now() >= deadline {
                    tracing::warn!(lagging = ?lagging_live, "cluster: heads did not confirm the grace period in {timeout:?}; going on");
                    return Ok(false);
                }
            }
            // Woken by their write's notification; look again at least every 50 ms.
            let mut ev = self.events.lock();
            if *ev == seen {
                self.woken.wait_for(&mut ev, Duration::from_millis(50));
            }
        }
    }

    fn client_of(&self, node: u32) -> Option<u64> {
        let v = self.store.read(&node_oid(node)).ok()??;
        NodeRecord::decode(&v.data).ok().map(|r| r.client)
    }

    /// Record the hosts holding locks through this head (before the lock is granted).
    pub fn record_hosts(&self, hosts: &[LockHost]) -> Result<(), ClusterError> {
        let (client, addr) = (self.store.client_id(), self.store.address());
        let mut superseded = false;
        update(&*self.store, &node_oid(self.node), NodeRecord::decode, NodeRecord::encode, |now| {
            // Another head took the node over: its record is not this head's to write.
            if now.is_some_and(|r| r.client != client) {
                superseded = true;
                return None;
            }
            let nsm_state = now.map_or(1, |r| r.nsm_state);
            Some(NodeRecord { nsm_state, client, addr: addr.clone(), hosts: hosts.to_vec() })
        })
        .map_err(|e| self.fence_if_blocklisted(e))?;
        if superseded {
            self.lease.fence(&format!("node {} was taken over by another head", self.node));
            return Err(ClusterError::Superseded(self.node));
        }
        Ok(())
    }

    /// Keep the grace flag current until [`Head::stop`]: on every
    /// notification, every [`REFRESH_EVERY`], and when this head's grace ends.
    pub fn spawn(self: &Arc<Self>) -> std::io::Result<std::thread::JoinHandle<()>> {
        let me = self.clone();
        std::thread::Builder::new().name("cluster".into()).spawn(move || {
            let mut seen = 0;
            while !me.stop.load(Ordering::Acquire) {
                if me.watch_lost.swap(false, Ordering::AcqRel) && !me.rewatch() {
                    me.watch_lost.store(true, Ordering::Release);
                }
                if let Err(e) = me.refresh() {
                    tracing::warn!(
                        "cluster: cannot read the grace state: {e}; granting only reclaims until it can"
                    );
                    me.grace.store(true, Ordering::Release);
                }
                if let Some(why) = me.lease.fenced() {
                    tracing::error!("cluster: this head is fenced: {why}");
                    if let Some(f) = me.on_fenced.lock().take() {
                        f(why);
                    }
                    break;
                }
                let mut wait = REFRESH_EVERY;
                if !me.lease.length().is_zero() {
                    // Renewed four times a lease: one slow read does not end it.
                    wait = wait.min(me.lease.length() / 4);
                }
                if let Some(t) = *me.lift_at.lock() {
                    wait = wait.min(t.saturating_duration_since(Instant::now()));
                }
                let mut ev = me.events.lock();
                if *ev == seen && !me.stop.load(Ordering::Acquire) {
                    me.woken.wait_for(&mut ev, wait);
                }
                seen = *ev;
            }
        })
    }

    /// End the thread (at shutdown).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.poke();
    }
}

/// Objects in memory, for tests: versions, exclusive creation, watchers by id.
#[derive(Default)]
pub struct MemoryStore {
    objects: Mutex<HashMap<String, Versioned>>,
    next_version: std::sync::atomic::AtomicU64,
    /// Client ids that acknowledge notifies (set by tests).
    pub live: Mutex<Vec<u64>>,
    /// Addresses fenced.
    pub fenced: Mutex<Vec<String>>,
    /// Reads fail with this errno (set by tests: 108, ESHUTDOWN, is what a
    /// blocklisted client gets).
    pub fail_reads_with: Mutex<Option<i32>>,
    /// Called on notify (tests forward it to heads).
    #[allow(clippy::type_complexity)]
    pub on_notify: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// One client of a [`MemoryStore`]: its id.
pub struct MemoryClient {
    pub store: Arc<MemoryStore>,
    pub id: u64,
}

impl SharedStore for MemoryClient {
    fn read(&self, oid: &str) -> Result<Option<Versioned>, RadosError> {
        if let Some(errno) = *self.store.fail_reads_with.lock() {
            return Err(RadosError::Failed {
                what: format!("reading {oid}"),
                errno: std::io::Error::from_raw_os_error(errno),
                hint: "",
            });
        }
        Ok(self.store.objects.lock().get(oid).cloned())
    }
    fn write(&self, oid: &str, data: &[u8], expect: Expect) -> Result<(), RadosError> {
        let mut objects = self.store.objects.lock();
        let ok = match (objects.get(oid), expect) {
            (None, Expect::Absent) => true,
            (Some(v), Expect::Version(want)) => v.version == want,
            _ => false,
        };
        if !ok {
            return Err(RadosError::Conflict(oid.into()));
        }
        let version = self.store.next_version.fetch_add(1, Ordering::Relaxed) + 1;
        objects.insert(oid.into(), Versioned { data: data.to_vec(), version });
        Ok(())
    }
    fn notify(&self, _oid: &str, _timeout: Duration) -> Result<Vec<u64>, RadosError> {
        for f in self.store.on_notify.lock().iter() {
            f();
        }
        Ok(self.store.live.lock().clone())
    }
    fn client_id(&self) -> u64 {
        self.id
    }
    fn address(&self) -> String {
        format!("127.0.0.1:0/{}", self.id)
    }
    fn fence(&self, addr: &str) -> Result<(), RadosError> {
        self.store.fenced.lock().push(addr.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(store: &Arc<MemoryStore>, id: u64) -> Arc<dyn SharedStore> {
        store.live.lock().push(id);
        Arc::new(MemoryClient { store: store.clone(), id })
    }

    fn host(n: u8) -> LockHost {
        LockHost { name: format!("client{n}"), addr: std::net::IpAddr::from([127, 0, 0, n]) }
    }

    #[test]
    fn records_round_trip_and_damage_is_named() {
        let mut db = GraceDb::default();
        db.start_grace(3);
        db.nodes.insert(1, NodeFlags { need: false, enforcing: true, handover_until: 0 });
        db.nodes.insert(4, NodeFlags { need: true, enforcing: true, handover_until: 1_800_000_000 });
        assert_eq!(GraceDb::decode(&db.encode()).unwrap(), db);
        let r = NodeRecord {
            nsm_state: 7,
            client: 4242,
            addr: "127.0.0.1:0/99".into(),
            hosts: vec![host(5), host(6)],
        };
        assert_eq!(NodeRecord::decode(&r.encode()).unwrap(), r);
        assert!(GraceDb::decode(b"eagernfs grace v1\nepoch 2 2\n").is_err(), "recovery must be older");
        assert!(GraceDb::decode(b"something else").is_err());
        assert!(NodeRecord::decode(b"eagernfs node v1\nhost nonsense\n").is_err());
    }

    #[test]
    fn every_head_gets_the_first_heads_key() {
        let store = Arc::new(MemoryStore::default());
        let a = handle_key(&*client(&store, 1)).unwrap();
        let b = handle_key(&*client(&store, 2)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn concurrent_updates_lose_nothing() {
        // Eight heads each set their own flag 50 times, all at once: with
        // version-checked writes every node ends up in the database.
        let store = Arc::new(MemoryStore::default());
        std::thread::scope(|s| {
            for n in 0..8u32 {
                let c = client(&store, n as u64 + 1);
                s.spawn(move || {
                    for _ in 0..50 {
                        update_grace(&*c, |db| {
                            let f = db.nodes.entry(n).or_default();
                            f.enforcing = !f.enforcing;
                            true
                        })
                        .unwrap();
                    }
                });
            }
        });
        let db = read_grace(&*client(&store, 99)).unwrap();
        assert_eq!(db.nodes.len(), 8);
        assert!(db.nodes.values().all(|f| !f.enforcing), "an even number of flips each: {db:?}");
    }

    #[test]
    fn a_take_over_starts_grace_that_every_head_enforces_and_the_last_need_ends() {
        let store = Arc::new(MemoryStore::default());
        let grace = Duration::from_secs(3600);
        // Node 1 runs and has a lock holder; node 2 runs.
        let (h1, j1) = Head::join(client(&store, 11), 1, grace, None).unwrap();
        assert!(j1.previous_hosts.is_empty() && j1.nsm_state == 1);
        h1.record_hosts(&[host(7)]).unwrap();
        let (h2, _) = Head::join(client(&store, 12), 2, grace, None).unwrap();
        assert!(!h2.grace_flag().load(Ordering::Acquire), "no grace: nobody needs it");
        // Node 1 dies (its client 11 stops watching); a new head takes node 1.
        store.live.lock().retain(|c| *c != 11);
        let (h1b, j1b) = Head::join(client(&store, 13), 1, grace, None).unwrap();
        assert_eq!(j1b.previous_hosts, vec![host(7)]);
        assert_eq!(j1b.nsm_state, 3, "the next odd state number");
        h1b.wait_fenced();
        assert_eq!(*store.fenced.lock(), ["127.0.0.1:0/11"], "the dead head's client is fenced");
        assert!(h1b.grace_flag().load(Ordering::Acquire));
        // Node 2 has not seen it yet: the new head would wait for it.
        assert!(!h1b.wait_enforced(Duration::from_millis(30)).unwrap(), "node 2 has not confirmed");
        h2.refresh().unwrap();
        assert!(h2.grace_flag().load(Ordering::Acquire), "node 2 now grants only reclaims");
        assert!(h1b.wait_enforced(Duration::from_secs(5)).unwrap());
        assert!(!h1b.assumed_down(), "every head confirmed");
        // A head that is down (node 3, never answering) is not waited for.
        update_grace(&*client(&store, 14), |db| {
            db.nodes.insert(3, NodeFlags::default());
            true
        })
        .unwrap();
        assert!(h1b.wait_enforced(Duration::from_secs(5)).unwrap());
        assert!(h1b.assumed_down(), "node 3 was taken for down: its lease is to be waited out");
        let at = h1b.lease_over_at();
        assert!(at.is_none(), "a head without a lease (--cluster-lease 0) waits for nothing");
        // The new head's grace ends: the cluster's too, for everyone.
        *h1b.lift_at.lock() = Some(Instant::now());
        let db = h1b.refresh().unwrap();
        assert!(!db.in_grace() && db.nodes.values().all(|f| !f.need && !f.enforcing), "{db:?}");
        h2.refresh().unwrap();
        assert!(!h2.grace_flag().load(Ordering::Acquire));
        drop(h1);
    }

    #[test]
    fn a_notify_that_never_completes_does_not_hold_a_take_over_up() {
        let store = Arc::new(MemoryStore::default());
        let grace = Duration::from_secs(3600);
        let (h1, _) = Head::join(client(&store, 11), 1, grace, None).unwrap();
        h1.record_hosts(&[host(7)]).unwrap();
        let (_h2, _) = Head::join(client(&store, 12), 2, grace, None).unwrap();
        // From now on no notify completes until the test lets go: librados waiting for an
        // OSD's completion that was lost with its connection.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Mutex::new(held);
        store.on_notify.lock().push(Box::new(move || {
            let _ = held.lock().recv();
        }));
        store.live.lock().retain(|c| *c != 11);
        let (h1b, _) = Head::join(client(&store, 13), 1, grace, None).unwrap();
        // Node 2 has not confirmed: the take-over asks who is up, and the notify never completes.
        let (tx, rx) = std::sync::mpsc::channel();
        let (h, t0) = (h1b.clone(), Instant::now());
        std::thread::spawn(move || {
            let _ = tx.send(h.wait_enforced(Duration::from_secs(2)));
        });
        let r = rx.recv_timeout(Duration::from_secs(60)).expect("the take-over waited for ever for a notify");
        assert!(r.unwrap(), "nobody answered: nobody is up to wait for");
        assert!(h1b.assumed_down(), "node 2 was taken for down: its lease is to be waited out");
        let bound = CONFIRM_QUICKLY + NOTIFY_WAIT + NOTIFY_MARGIN + Duration::from_secs(5);
        assert!(t0.elapsed() < bound, "{:?}", t0.elapsed());
        drop(release);
    }

    #[test]
    fn a_lost_watch_is_made_again_by_the_heads_thread() {
        let store = Arc::new(MemoryStore::default());
        let (h, _) = Head::join(client(&store, 1), 1, Duration::from_secs(60), None).unwrap();
        let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let callbacks: Arc<Mutex<Vec<OnWatch>>> = Default::default();
        let (m, cbs) = (made.clone(), callbacks.clone());
        h.watch_with(Box::new(move |cb| {
            m.fetch_add(1, Ordering::SeqCst);
            cbs.lock().push(cb);
            Ok(Box::new(()) as WatchGuard)
        }))
        .unwrap();
        let thread = h.spawn().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(!h.grace_flag().load(Ordering::Acquire), "no grace period");
        // The watch is lost: the thread makes a new one (it is woken by the loss).
        (callbacks.lock()[0])(WatchEvent::Lost(libc::ENOTCONN));
        let deadline = Instant::now() + Duration::from_secs(10);
        while made.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < deadline, "no new watch within 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Watching again, the head grants new locks again once it has read the state.
        h.poke();
        while h.grace_flag().load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "still only reclaims 10 s after watching again");
            std::thread::sleep(Duration::from_millis(5));
        }
        h.stop();
        thread.join().unwrap();
        h.unwatch();
    }

    #[test]
    fn a_heads_grace_ends_as_soon_as_its_hosts_have_reclaimed() {
        let store = Arc::new(MemoryStore::default());
        let grace = Duration::from_secs(3600);
        let (h1, _) = Head::join(client(&store, 1), 1, grace, None).unwrap();
        h1.record_hosts(&[host(7)]).unwrap();
        store.live.lock().retain(|c| *c != 1);
        let (h1b, j) = Head::join(client(&store, 2), 1, grace, None).unwrap();
        assert_eq!(j.previous_hosts, vec![host(7)]);
        assert!(h1b.refresh().unwrap().in_grace(), "an hour of grace ahead");
        h1b.reclaims_done();
        let db = h1b.refresh().unwrap();
        assert!(!db.in_grace(), "over at once: {db:?}");
        assert!(!h1b.grace_flag().load(Ordering::Acquire));
        // Said again (or with no grace period of its own): nothing changes.
        h1b.reclaims_done();
        assert!(!h1b.refresh().unwrap().in_grace());
        drop(h1);
    }

    #[test]
    fn a_head_stopping_with_locks_keeps_the_grace_period_for_a_successor_or_until_its_deadline() {
        let store = Arc::new(MemoryStore::default());
        let grace = Duration::from_secs(3600);
        let (h1, _) = Head::join(client(&store, 1), 1, grace, None).unwrap();
        h1.record_hosts(&[host(7)]).unwrap();
        let (h2, _) = Head::join(client(&store, 2), 2, grace, None).unwrap();
        // Node 1 stops cleanly: grace for its clients, confirmed by node 2 before it goes on.
        let (s2, h2c) = (store.clone(), h2.clone());
        store.on_notify.lock().push(Box::new(move || {
            let _ = h2c.refresh();
        }));
        assert!(h1.hand_over(Duration::from_secs(600), Duration::from_secs(5)).unwrap(), "node 2 confirmed");
        assert!(h2.grace_flag().load(Ordering::Acquire), "node 2 grants only reclaims");
        let f = h2.refresh().unwrap().nodes[&1];
        assert!(f.need && f.handover_until > unix_now(), "{f:?}");
        // Node 1's own thread does not lift it (it is going), even when its time comes.
        *h1.lift_at.lock() = Some(Instant::now());
        assert!(h1.refresh().unwrap().in_grace());
        // A successor takes it over: the deadline goes, its own grace period runs.
        s2.live.lock().retain(|c| *c != 1);
        let (h1b, j) = Head::join(client(&store, 3), 1, grace, None).unwrap();
        assert_eq!(j.previous_hosts, vec![host(7)]);
        let f = h1b.refresh().unwrap().nodes[&1];
        assert!(f.need && f.handover_until == 0, "{f:?}");
        // It stops cleanly too, and no successor comes: once its deadline is past,
        // node 2 lifts its need (a deadline in the past, written as node 1 would).
        assert!(h1b.hand_over(Duration::from_secs(600), Duration::from_secs(5)).unwrap());
        update_grace(&*client(&store, 9), |db| {
            db.nodes.get_mut(&1).unwrap().handover_until = unix_now() - 1;
            true
        })
        .unwrap();
        let db = h2.refresh().unwrap();
        assert!(!db.in_grace(), "{db:?}");
        assert!(!h2.grace_flag().load(Ordering::Acquire));
    }

    #[test]
    fn a_head_is_fenced_for_good_when_its_node_is_taken_over_or_its_client_blocklisted() {
        let store = Arc::new(MemoryStore::default());
        let grace = Duration::from_secs(60);
        let lease = Arc::new(Lease::new(Duration::from_secs(3600)));
        let (h1, _) = Head::join(client(&store, 1), 1, grace, Some(lease.clone())).unwrap();
        assert!(!lease.valid(), "not valid before a read of the grace state");
        h1.refresh().unwrap();
        assert!(lease.valid(), "a read renews it");
        let at = h1.lease_over_at().expect("a head with a lease");
        assert!(at > Instant::now() + Duration::from_secs(3599), "a take-over waits a whole lease");
        h1.record_hosts(&[host(7)]).unwrap();
        // Node 1 is taken over (client 2); its record names the new client.
        let (h1b, j) = Head::join(client(&store, 2), 1, grace, None).unwrap();
        assert_eq!((j.previous.client, j.previous_hosts.clone()), (1, vec![host(7)]));
        // The old head's next read finds that out: fenced, for good.
        assert!(matches!(h1.refresh(), Err(ClusterError::Superseded(1))));
        assert!(!lease.valid());
        assert!(lease.fenced().unwrap().contains("RADOS client 2"), "{:?}", lease.fenced());
        lease.renewed(boottime_ns());
        assert!(!lease.valid(), "renewing a fenced lease does not bring it back");
        // Nor does it write the node's record any more (the new head's hosts stay).
        assert!(h1.record_hosts(&[host(9)]).is_err());
        let rec = NodeRecord::decode(&client(&store, 3).read(&node_oid(1)).unwrap().unwrap().data).unwrap();
        assert_eq!((rec.client, rec.hosts), (2, vec![host(7)]));
        // A head whose client is blocklisted (reads fail with ESHUTDOWN) is fenced too.
        let lease2 = Arc::new(Lease::new(Duration::from_secs(3600)));
        let (h2, _) = Head::join(client(&store, 4), 2, grace, Some(lease2.clone())).unwrap();
        h2.refresh().unwrap();
        assert!(lease2.valid());
        *store.fail_reads_with.lock() = Some(libc::ETIMEDOUT);
        assert!(h2.refresh().is_err());
        assert!(lease2.valid() && lease2.fenced().is_none(), "a slow cluster is not a fence");
        *store.fail_reads_with.lock() = Some(libc::ESHUTDOWN);
        assert!(h2.refresh().is_err());
        assert!(lease2.fenced().unwrap().contains("blocklisted"), "{:?}", lease2.fenced());
        *store.fail_reads_with.lock() = None;
        // A clean stop leaves the record without a client: the next start need not
        // wait out a lease.
        h1b.leave().unwrap();
        let rec = NodeRecord::decode(&client(&store, 3).read(&node_oid(1)).unwrap().unwrap().data).unwrap();
        assert_eq!((rec.client, rec.hosts.len()), (0, 1), "hosts kept for the next start's grace");
        let (_, j) = Head::join(client(&store, 5), 1, grace, None).unwrap();
        assert_eq!(j.previous.client, 0);
    }

    #[test]
    fn the_grace_period_lasts_while_any_head_needs_it() {
        let store = Arc::new(MemoryStore::default());
        let mut db = GraceDb::default();
        db.start_grace(1);
        db.start_grace(2);
        assert_eq!((db.current, db.recovery), (2, 1), "one epoch for both");
        db.lift(1);
        assert!(db.in_grace());
        db.lift(2);
        assert!(!db.in_grace());
        let c = client(&store, 1);
        c.write(GRACE_OID, &db.encode(), Expect::Absent).unwrap();
        assert!(matches!(c.write(GRACE_OID, b"x", Expect::Absent), Err(RadosError::Conflict(_))));
    }
}
