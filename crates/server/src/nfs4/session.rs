//! Client records, sessions and their slot tables (RFC 8881 §2.4, §2.10,
//! §18.33–§18.37, §18.46, §18.50, §18.51), leases and the grace period.
//!
//! A client id is the boot epoch (high 32 bits) and a counter, so one from
//! an earlier start is never taken for a current one. A session's slots
//! each keep the last reply sent on them (up to the negotiated cached
//! size): a request with the slot's current sequence id is a retry and
//! gets that reply, byte for byte, whichever connection it comes on;
//! one whose reply was too large to keep gets NFS4ERR_RETRY_UNCACHED_REP,
//! and a retry whose operations differ from the original gets
//! NFS4ERR_SEQ_FALSE_RETRY. Slots are bounded per session and over the
//! whole server, so a flood of sessions cannot hold unbounded replies.
//!
//! # Layout
//! - this file: client records, sessions, slots and the grace period
//!   ([`Sessions`]), below everything that names the NFSv4 service.
//! - `expiry`: leases, and the end of a client with all it holds.
//! - `ops`: the session operations and the sweep of lapsed records.

mod expiry;
mod ops;

use super::callback::BackState;
use crate::records::Recorder;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Who established a client id: the flavor and uid of the EXCHANGE_ID (a
/// different principal may not take over a client id that has state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Principal {
    flavor: u32,
    uid: u32,
}

/// A client (one EXCHANGE_ID's owner, verifier and principal).
pub(crate) struct Client {
    pub(crate) id: Clientid4,
    pub(crate) owner: Bytes,
    pub(crate) verifier: Verifier4,
    pub(crate) principal: Principal,
    /// When its lease was last renewed (the service clock, ns).
    pub(crate) renewed_ns: AtomicU64,
    /// SEQUENCE status flags to report (state revoked, …).
    pub(crate) status_flags: AtomicU32,
    /// It held state before the restart and may reclaim it in the grace period.
    pub(crate) may_reclaim: bool,
    pub(crate) m: Mutex<ClientMut>,
}

/// The parts of a client record that change under its lock.
#[derive(Default)]
pub(crate) struct ClientMut {
    /// A CREATE_SESSION confirmed it.
    pub(crate) confirmed: bool,
    /// CREATE_SESSION's own replay slot: the last sequence id and its reply.
    pub(crate) cs_seq: u32,
    pub(crate) cs_reply: Option<Res4<CreateSession4ResOk>>,
    pub(crate) sessions: Vec<Sessionid4>,
    /// RECLAIM_COMPLETE was sent.
    pub(crate) reclaim_complete: bool,
    /// Gone: calls that still hold it get NFS4ERR_STALE_CLIENTID or BADSESSION.
    pub(crate) destroyed: bool,
}

/// One slot of a session's fore channel.
#[derive(Debug, Default)]
struct Slot {
    /// The sequence id of the last request accepted on the slot.
    seqid: u32,
    /// A request is running on it.
    busy: bool,
    /// What a retry of the last request gets.
    last: Last,
}

#[derive(Debug, Default)]
enum Last {
    /// Nothing was ever done on this slot.
    #[default]
    Nothing,
    /// The reply (the COMPOUND4res), and a hash of the request's tag and
    /// operations after SEQUENCE, to tell a retry from a different request.
    Cached { reply: Bytes, request: u64 },
    /// The reply was too large to keep.
    Uncached { request: u64 },
}

/// A session.
pub(crate) struct Session {
    pub(crate) id: Sessionid4,
    pub(crate) client: Arc<Client>,
    pub(crate) fore: ChannelAttrs4,
    slots: Mutex<Vec<Slot>>,
    /// Connections bound to the fore channel.
    fore_conns: Mutex<Vec<u64>>,
    /// The back channel: connections, program, security, its slot.
    pub(crate) back: BackState,
    /// Set once DESTROY_SESSION ran (calls holding it answer BADSESSION).
    pub(crate) destroyed: AtomicBool,
    /// The minor version it was made with (its callbacks use the same).
    pub(crate) minor: u32,
}

/// What SEQUENCE decided for a request.
pub(crate) enum SeqOutcome {
    /// A new request on the slot: run the COMPOUND, then [`SlotGuard::finish`].
    New(SlotGuard),
    /// A retry: send this reply again.
    Replay(Bytes),
}

/// A slot held by a running request. Dropping it unfinished (a panic, a
/// reply that could not be built) leaves the slot free with no reply kept.
pub(crate) struct SlotGuard {
    pub(crate) session: Arc<Session>,
    slot: u32,
    request: u64,
    done: bool,
}

/// Connections a session's fore channel lists before the closed ones are
/// dropped from the list.
const FORE_CONNS_PRUNE_AT: usize = 8;

impl Session {
    /// Bind connection `id` to the fore channel (`alive`: whether a
    /// connection is still open).
    pub(crate) fn bind_fore(&self, id: u64, alive: impl Fn(u64) -> bool) {
        bind_conn_id(&mut self.fore_conns.lock(), id, alive);
    }

    /// Whether connection `id` is bound to the fore channel.
    pub(crate) fn fore_bound(&self, id: u64) -> bool {
        self.fore_conns.lock().contains(&id)
    }
}

/// Add `id` to a session's connections, dropping those no longer `alive`
/// once there are [`FORE_CONNS_PRUNE_AT`]: a client whose connections come
/// and go (the mount's lanes after failures, reconnects) would otherwise
/// grow the list, which every SEQUENCE searches, for the session's life.
fn bind_conn_id(conns: &mut Vec<u64>, id: u64, alive: impl Fn(u64) -> bool) {
    if conns.contains(&id) {
        return;
    }
    if conns.len() >= FORE_CONNS_PRUNE_AT {
        conns.retain(|c| alive(*c));
    }
    conns.push(id);
}

impl SlotGuard {
    /// Keep `reply` for retries (if it fits) and free the slot.
    pub(crate) fn finish(mut self, reply: Option<Bytes>) {
        let mut slots = self.session.slots.lock();
        let s = &mut slots[self.slot as usize];
        s.busy = false;
        s.last = match reply {
            Some(reply) => Last::Cached { reply, request: self.request },
            None => Last::Uncached { request: self.request },
        };
        self.done = true;
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if !self.done {
            let mut slots = self.session.slots.lock();
            let s = &mut slots[self.slot as usize];
            s.busy = false;
            s.last = Last::Uncached { request: self.request };
        }
    }
}

/// The grace period after a restart.
struct Grace {
    /// Until when (service clock, ns); `None`: no grace (none, or over).
    until: Option<u64>,
    /// Owner ids that may still reclaim (those that held state and have
    /// not said RECLAIM_COMPLETE): the grace ends early when none are left.
    pending: std::collections::HashSet<Bytes>,
}

/// Every client and session.
pub(crate) struct Sessions {
    table: Mutex<Table>,
    sessions: RwLock<HashMap<Sessionid4, Arc<Session>>>,
    next_client: AtomicU32,
    next_session: AtomicU32,
    epoch: u32,
    grace: Mutex<Grace>,
    /// The clients that may reclaim after a restart (persisted by the binary).
    reclaimable: Mutex<std::collections::BTreeSet<Bytes>>,
    /// Writes `reclaimable` (the binary's `on_clients_changed`) on a thread of
    /// its own; `Err` if it is to be written and cannot be (no thread).
    pub(crate) recorder: Option<Result<Recorder<Vec<Bytes>>, String>>,
    /// Slots over all sessions (bounded by [`SLOTS_TOTAL_MAX`]).
    slots_total: AtomicUsize,
    /// When the last sweep of lapsed records ran.
    swept_ns: AtomicU64,
    /// Where the client and session gauges go.
    stats: Arc<crate::Stats>,
}

#[derive(Default)]
struct Table {
    clients: HashMap<Clientid4, Arc<Client>>,
    /// Owner id → its client ids (a confirmed one and a newer unconfirmed one at most).
    by_owner: HashMap<Bytes, Vec<Clientid4>>,
}

/// Slots over all sessions at most: each may hold a cached reply of up to
/// `max_cached_reply_bytes`, so this bounds the reply cache's memory.
pub(crate) const SLOTS_TOTAL_MAX: usize = 32 * 1024;
/// Smallest request and response a fore channel must allow (a SEQUENCE and a little).
const FORE_MIN_BYTES: u32 = 128;
/// Smallest back channel request and response (CB_SEQUENCE and CB_RECALL with a handle).
const BACK_MIN_REQUEST_BYTES: u32 = 256;
const BACK_MIN_RESPONSE_BYTES: u32 = 128;
/// A courtesy client (lease ran out, state kept) is purged after this long even without conflict.
const COURTESY_MAX_NS: u64 = 24 * 3600 * 1_000_000_000;
/// Longest a RECLAIM_COMPLETE waits for its client to be recorded; then it is
/// answered NFS4ERR_DELAY and the client asks again (the write goes on).
pub(crate) const RECORD_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// The thread that writes the clients that may reclaim: one write at a time
/// as the server itself (never a service thread, which runs as its last
/// caller), the newest list last; failures counted and logged once until a
/// write succeeds again.
fn start_recorder(
    f: super::ClientsChanged,
    stats: Arc<crate::Stats>,
) -> Result<Recorder<Vec<Bytes>>, String> {
    let failing = AtomicBool::new(false);
    let outcome = Box::new(move |r: Result<(), &str>| {
        stats.nfs4_record_writes.fetch_add(1, Ordering::Relaxed);
        match r {
            Ok(()) => {
                if failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("the NFSv4 clients that may reclaim are recorded again");
                }
            }
            Err(e) => {
                stats.nfs4_record_failures.fetch_add(1, Ordering::Relaxed);
                if !failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "cannot record the NFSv4 clients that may reclaim after a restart: {e}; \
                         clients finishing their registration (RECLAIM_COMPLETE) are told to retry \
                         (NFS4ERR_DELAY) until it can"
                    );
                }
            }
        }
    });
    Recorder::start("nfs4-clients", Box::new(move |owners: &Vec<Bytes>| f(owners)), outcome).map_err(|e| {
        tracing::error!("no thread to record the NFSv4 clients that may reclaim ({e})");
        format!("no thread to record them ({e})")
    })
}

impl Sessions {
    pub(crate) fn new(config: &super::Nfs4Config, now_ns: u64, stats: Arc<crate::Stats>) -> Sessions {
        let pending: std::collections::HashSet<Bytes> = config.previous_clients.iter().cloned().collect();
        let until = (!pending.is_empty()).then(|| now_ns + config.grace_period.as_nanos() as u64);
        if until.is_some() {
            tracing::info!(
                clients = pending.len(),
                "NFSv4 grace period for {:?}: only reclaims are granted",
                config.grace_period
            );
        }
        Sessions {
            table: Default::default(),
            sessions: Default::default(),
            next_client: AtomicU32::new(1),
            next_session: AtomicU32::new(1),
            epoch: config.boot_epoch,
            reclaimable: Mutex::new(config.previous_clients.iter().cloned().collect()),
            recorder: config.on_clients_changed.clone().map(|f| start_recorder(f, stats.clone())),
            grace: Mutex::new(Grace { until, pending }),
            slots_total: AtomicUsize::new(0),
            swept_ns: AtomicU64::new(now_ns),
            stats,
        }
    }

    fn gauge_clients(&self, t: &Table) {
        self.stats.nfs4_clients.store(t.clients.len() as u64, Ordering::Relaxed);
    }

    fn gauge_sessions(&self, n: usize) {
        self.stats.nfs4_sessions.store(n as u64, Ordering::Relaxed);
    }

    /// The session named `id`, if it exists.
    pub(crate) fn session(&self, id: &Sessionid4) -> Option<Arc<Session>> {
        self.sessions.read().get(id).cloned()
    }

    /// The client named `id`, if it exists.
    pub(crate) fn client(&self, id: Clientid4) -> Option<Arc<Client>> {
        self.table.lock().clients.get(&id).cloned()
    }

    /// Every client (for sweeps).
    fn clients(&self) -> Vec<Arc<Client>> {
        self.table.lock().clients.values().cloned().collect()
    }

    /// Whether the server is in its grace period now.
    pub(crate) fn in_grace(&self, now_ns: u64) -> bool {
        let mut g = self.grace.lock();
        match g.until {
            Some(t) if now_ns < t && !g.pending.is_empty() => true,
            Some(_) => {
                g.until = None;
                tracing::info!("NFSv4 grace period over");
                false
            }
            None => false,
        }
    }
}

impl Client {
    pub(crate) fn renew(&self, now_ns: u64) {
        self.renewed_ns.fetch_max(now_ns, Ordering::Relaxed);
    }
}

/// An 8-byte digest of the request's tag and operations after SEQUENCE: their
/// lengths and a CRC-32 of their bytes. It tells a retry on a slot from a
/// different request with the same sequence id (NFS4ERR_SEQ_FALSE_RETRY),
/// which needs no strength against a forger: a client can only fool itself
/// into its own cached reply. It runs over every COMPOUND, WRITE data
/// included, so it must cost little per byte: SipHash here took 2.5 % of
/// the server's samples in an untar of small files; CRC-32 runs on the
/// CPU's carry-less multiply.
pub(crate) fn request_hash(tag: &[u8], rest: &[u8]) -> u64 {
    let mut h = crc32fast::Hasher::new();
    h.update(&(tag.len() as u32).to_be_bytes());
    h.update(tag);
    h.update(rest);
    let len = (tag.len() as u64).wrapping_add(rest.len() as u64) & 0xffff_ffff;
    (len << 32) | u64::from(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::{bind_conn_id, request_hash, FORE_CONNS_PRUNE_AT};

    #[test]
    fn closed_connections_leave_a_sessions_list_once_it_grows() {
        let mut conns = Vec::new();
        let open = |c: u64| c.is_multiple_of(2);
        for id in 1..=1000u64 {
            bind_conn_id(&mut conns, id, open);
            bind_conn_id(&mut conns, id, open);
            assert!(conns.len() <= 2 * FORE_CONNS_PRUNE_AT + 500, "{} listed after {id}", conns.len());
        }
        // Every open one stays; closed ones only since the last pruning.
        assert!((2..=1000).step_by(2).all(|c| conns.contains(&c)), "an open connection was dropped");
        assert!(conns.iter().filter(|c| !open(**c)).count() < FORE_CONNS_PRUNE_AT, "{conns:?}");
        assert_eq!(conns.iter().filter(|c| **c == 1000).count(), 1, "listed once");
        // A short list keeps even closed ones (nothing to gain).
        let mut few = Vec::new();
        for id in [1, 3, 5] {
            bind_conn_id(&mut few, id, |_| false);
        }
        assert_eq!(few, [1, 3, 5]);
    }

    #[test]
    fn a_request_digest_changes_with_any_byte_and_with_where_the_tag_ends() {
        let body: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let d = request_hash(b"tag", &body);
        assert_eq!(d, request_hash(b"tag", &body.clone()));
        for at in [0, 1, 4095, 35_000, body.len() - 1] {
            let mut other = body.clone();
            other[at] ^= 1;
            assert_ne!(d, request_hash(b"tag", &other), "a byte changed at {at}");
        }
        assert_ne!(d, request_hash(b"tag", &body[..body.len() - 1]));
        assert_ne!(request_hash(b"ab", b"c"), request_hash(b"a", b"bc"), "the tag's end is part of it");
    }
}
