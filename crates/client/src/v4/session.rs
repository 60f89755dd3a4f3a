//! The session layer (RFC 8881 §2.10, §8.4, §18.35–§18.37, §18.46): one
//! client id and one session over an [`RpcClient`], every COMPOUND sent
//! with SEQUENCE on a slot of the session, and recovery.
//!
//! - **Establishing.** EXCHANGE_ID (the client owner and verifier this
//!   client keeps for its life), CREATE_SESSION on connection 0 with the
//!   back channel on the same connection (the slot table is sized from the
//!   reply), then RECLAIM_COMPLETE.
//! - **Exactly once.** A request keeps its slot and sequence id until it is
//!   answered: the transport sends the same record again after a lost
//!   connection or a timeout, and the server's slot cache answers a request
//!   it already ran (non-idempotent requests ask for it with `cachethis`).
//!   SEQUENCE answered NFS4ERR_DELAY (the first copy is still running) is
//!   sent again, same slot and sequence id, after a pause.
//! - **Recovery.** NFS4ERR_BADSESSION or DEADSESSION: a new session for the
//!   same client id. The server forgot the client id too (it restarted, or
//!   our lease ran out): a new one, and every open and lock this client
//!   holds is reclaimed (OPEN with CLAIM_PREVIOUS, LOCK with `reclaim`)
//!   before RECLAIM_COMPLETE and before anything else is sent; what the
//!   server will not take back as a reclaim (no grace period) is opened or
//!   locked again as new, and a lock someone else took meanwhile is lost
//!   (counted and logged). Requests waiting meanwhile go on once the new
//!   session is there, rebuilt with the new stateids.
//! - **Retries.** NFS4ERR_DELAY and NFS4ERR_GRACE are tried again after
//!   0.1 s, doubling to 5 s: on a hard mount until answered otherwise, on a
//!   soft one for at most its major timeout (`timeo × (retrans + 1)`).
//! - **Lease.** Every SEQUENCE renews it; a client idle for a third of the
//!   lease sends a SEQUENCE alone.
//! - **Back channel.** CREATE_SESSION binds connection 0 to it; when that
//!   connection is made again, or SEQUENCE says the back channel is down,
//!   BIND_CONN_TO_SESSION binds it again. Calls on it are answered by
//!   `callback` (a recalled delegation is returned from here).

use super::callback::{CallbackService, Owner};
use super::compound::{self, Reply};
use super::slots::{SlotTable, Ticket};
use super::state::{Range, StateTable};
use super::status;
use crate::driver::{RpcClient, TransportEvent};
use crate::ops::{Cred, NfsError, NfsResult};
use bytes::Bytes;
use eagernfs_proto::nfs3::Nfsstat3;
use eagernfs_proto::nfs4::*;
use eagernfs_xdr::Opaque;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, Notify};

/// First pause before a request answered DELAY or GRACE is sent again.
pub(crate) const RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest pause between tries (Linux's `NFS4_POLL_RETRY_MAX` is 15 s;
/// a grace period ends sooner for a client that asks more often).
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(5);
/// The lease assumed until the server says (RFC 8881's suggestion, 90 s).
const LEASE_DEFAULT: Duration = Duration::from_secs(90);
/// Back-channel slots asked for.
const BACK_SLOTS: u32 = 4;
/// Operations per COMPOUND asked for.
pub(crate) const OPS_MAX: u32 = 64;
/// The largest reply a slot is asked to keep for a retry: the replies of
/// non-idempotent requests are small.
const CACHED_REPLY_BYTES: u32 = 16 * 1024;
/// Most times in a row a request is sent again for a reason that should
/// not last (a slot refused, a connection not bound) before it fails.
const AGAIN_MAX: u32 = 64;
/// BIND_CONN_TO_SESSION is sent at most this often because of SEQUENCE's
/// "back channel down" flags (the server probes a new binding meanwhile).
const REBIND_EVERY: Duration = Duration::from_secs(2);

/// How a session is made: fixed for the client's life.
#[derive(Debug, Clone)]
pub(crate) struct SessionConfig {
    /// 1 or 2.
    pub(crate) minor: u32,
    /// `co_ownerid`: names this client instance to the server across its
    /// restarts (so it may reclaim), and no other.
    pub(crate) owner: Bytes,
    /// `co_verifier`: a new one means a new instance of the client.
    pub(crate) verifier: Verifier4,
    /// Fore-channel slots asked for.
    pub(crate) slots: u32,
    /// Largest request and reply asked for (a full WRITE or READ and headers).
    pub(crate) max_request: u32,
    pub(crate) max_response: u32,
    /// Retry for ever (hard) or for at most `major_window` (soft).
    pub(crate) hard: bool,
    pub(crate) major_window: Duration,
    /// Who EXCHANGE_ID, CREATE_SESSION, reclaims and renewals are sent as.
    pub(crate) machine: Cred,
}

/// Counters of the session layer.
#[derive(Debug)]
pub struct SessionStats {
    /// Operations sent in COMPOUNDs the server answered, by operation number
    /// (SEQUENCE included; the last entry counts any number beyond the table).
    /// The server ran no operation after one that failed.
    ops: [AtomicU64; OPS_COUNTED],
    /// COMPOUNDs answered with a SEQUENCE result.
    pub compounds: AtomicU64,
    /// SEQUENCE answered DELAY: sent again on the same slot and sequence id.
    pub same_slot_retries: AtomicU64,
    /// SEQ_MISORDERED after a lost request: sent again with the lost one's
    /// sequence id (the server never saw it).
    pub resequenced: AtomicU64,
    /// Operations answered DELAY or GRACE and tried again after a pause.
    pub delayed: AtomicU64,
    /// Sessions made.
    pub sessions: AtomicU64,
    /// Client ids obtained (EXCHANGE_ID answered with a new record).
    pub client_ids: AtomicU64,
    /// Opens and locks reclaimed after the server lost them.
    pub reclaimed_opens: AtomicU64,
    pub reclaimed_locks: AtomicU64,
    /// Opens and locks not reclaimed but made again as new.
    pub reopened: AtomicU64,
    /// Locks lost: neither reclaimed nor granted again.
    pub lost_locks: AtomicU64,
    /// SEQUENCEs sent alone to keep the lease.
    pub renewals: AtomicU64,
    /// BIND_CONN_TO_SESSION sent.
    pub binds: AtomicU64,
    /// Delegations returned.
    pub delegreturns: AtomicU64,
    /// COMPOUNDs answered (those without SEQUENCE too), by their main
    /// operation (`main_op`): the round trips a mount made, by kind.
    kinds: [KindCounts; OPS_COUNTED],
}

/// One kind of COMPOUND's counts.
#[derive(Debug, Default)]
struct KindCounts {
    calls: AtomicU64,
    errors: AtomicU64,
    rtt_sum_ns: AtomicU64,
    rtt_max_ns: AtomicU64,
}

/// COMPOUNDs of one kind (see [`SessionStats::compound_kinds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompoundKind {
    /// The main operation's name ("OPEN", "WRITE"; "SEQUENCE" for a
    /// SEQUENCE alone, which renews the lease).
    pub name: &'static str,
    pub calls: u64,
    /// Those whose status was not NFS4_OK.
    pub errors: u64,
    /// From sending to the answer (the last time it was sent).
    pub rtt_sum_ns: u64,
    pub rtt_max_ns: u64,
}

/// What a COMPOUND is for: its first operation that is not bookkeeping
/// (current file handles, the attributes and checks around an operation,
/// lookups on the way), else its first lookup or check, else its first
/// GETATTR; `OP_SEQUENCE` for none (a renewal). CLOSEs riding at the end
/// (PUTFH, CLOSE pairs after the request's own operations) are not what it
/// is for, unless they are all it is; nor is a DELEGRETURN on the way (a
/// REMOVE's of its object), unless DELEGRETURNs are all it is.
fn main_op(ops: &[ArgOp]) -> u32 {
    let mut end = ops.len();
    while end >= 2 && matches!((&ops[end - 2], &ops[end - 1]), (ArgOp::Putfh(_), ArgOp::Close(_))) {
        end -= 2;
    }
    let ops = if end > 0 { &ops[..end] } else { ops };
    const PUTS: &[u32] = &[OP_PUTFH, OP_PUTROOTFH, OP_PUTPUBFH, OP_SAVEFH, OP_RESTOREFH];
    const AROUND: &[u32] = &[OP_GETFH, OP_GETATTR];
    const ON_THE_WAY: &[u32] = &[OP_ACCESS, OP_VERIFY, OP_NVERIFY, OP_LOOKUP, OP_LOOKUPP, OP_DELEGRETURN];
    let first = |skip: &dyn Fn(u32) -> bool| ops.iter().map(|o| o.opnum()).find(|n| !skip(*n));
    first(&|n| PUTS.contains(&n) || AROUND.contains(&n) || ON_THE_WAY.contains(&n))
        .or_else(|| first(&|n| PUTS.contains(&n) || AROUND.contains(&n)))
        .or_else(|| first(&|n| PUTS.contains(&n)))
        .unwrap_or(OP_SEQUENCE)
}

/// Operation numbers counted one by one (NFSv4.2's and the extended
/// attributes' go up to 75).
const OPS_COUNTED: usize = 77;

impl Default for SessionStats {
    fn default() -> Self {
        SessionStats {
            ops: [const { AtomicU64::new(0) }; OPS_COUNTED],
            compounds: AtomicU64::new(0),
            same_slot_retries: AtomicU64::new(0),
            resequenced: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            sessions: AtomicU64::new(0),
            client_ids: AtomicU64::new(0),
            reclaimed_opens: AtomicU64::new(0),
            reclaimed_locks: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
            lost_locks: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            binds: AtomicU64::new(0),
            delegreturns: AtomicU64::new(0),
            kinds: std::array::from_fn(|_| KindCounts::default()),
        }
    }
}

impl SessionStats {
    fn count_ops(&self, ops: &[ArgOp]) {
        self.ops[OP_SEQUENCE as usize].fetch_add(1, Ordering::Relaxed);
        for op in ops {
            let i = (op.opnum() as usize).min(OPS_COUNTED - 1);
            self.ops[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Count one answered COMPOUND of `ops` (its status `status`), sent
    /// `rtt` before its answer came.
    fn count_kind(&self, ops: &[ArgOp], status: Nfsstat4, rtt: Duration) {
        let k = &self.kinds[(main_op(ops) as usize).min(OPS_COUNTED - 1)];
        k.calls.fetch_add(1, Ordering::Relaxed);
        if !status.is_ok() {
            k.errors.fetch_add(1, Ordering::Relaxed);
        }
        let ns = rtt.as_nanos().min(u64::MAX as u128) as u64;
        k.rtt_sum_ns.fetch_add(ns, Ordering::Relaxed);
        k.rtt_max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// COMPOUNDs answered, by kind (those sent at least once), for
    /// `eagernfs stat`: the round trips, which NFSv3 counts by procedure.
    pub fn compound_kinds(&self) -> Vec<CompoundKind> {
        self.kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| k.calls.load(Ordering::Relaxed) > 0)
            .map(|(i, k)| CompoundKind {
                name: op_name(i as u32),
                calls: k.calls.load(Ordering::Relaxed),
                errors: k.errors.load(Ordering::Relaxed),
                rtt_sum_ns: k.rtt_sum_ns.load(Ordering::Relaxed),
                rtt_max_ns: k.rtt_max_ns.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Operations sent in answered COMPOUNDs, by name (those sent at least
    /// once), for `eagernfs stat`.
    pub fn ops(&self) -> Vec<(&'static str, u64)> {
        self.ops
            .iter()
            .enumerate()
            .map(|(i, n)| (op_name(i as u32), n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// One session.
#[derive(Debug)]
pub(crate) struct Sess {
    /// Counts sessions of this client: a request that met a dead session
    /// recovers only if no newer one exists.
    pub(crate) gen: u64,
    pub(crate) clientid: Clientid4,
    pub(crate) id: Sessionid4,
    slots: Mutex<SlotTable>,
    /// Wakes a request waiting for a slot.
    freed: Notify,
    /// The fore channel the server granted.
    pub(crate) fore: ChannelAttrs4,
    back_slots: u32,
}

/// A slot held by one request; given back (or left uncertain) on drop.
struct SlotGuard {
    sess: Arc<Sess>,
    ticket: Ticket,
    state: Held,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Taken, not sent.
    Taken,
    /// Sent, no answer taken yet: if dropped now, the outcome is unknown.
    Sent,
    /// Given back.
    Done,
}

impl SlotGuard {
    async fn take(sess: &Arc<Sess>) -> SlotGuard {
        loop {
            let notified = sess.freed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(ticket) = sess.slots.lock().take() {
                return SlotGuard { sess: sess.clone(), ticket, state: Held::Taken };
            }
            notified.await;
        }
    }

    fn finish(&mut self, f: impl FnOnce(&mut SlotTable, Ticket)) {
        if self.state != Held::Done {
            f(&mut self.sess.slots.lock(), self.ticket);
            self.state = Held::Done;
            self.sess.freed.notify_one();
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        match self.state {
            Held::Taken => self.finish(SlotTable::unused),
            Held::Sent => self.finish(SlotTable::abandoned),
            Held::Done => {}
        }
    }
}

/// What one request on one session came to.
enum Sent {
    /// The server ran it (its SEQUENCE succeeded); the operations' results.
    Reply(Reply),
    /// Try again (another slot, the same session).
    Again,
    /// The session is gone: recover, then try again.
    SessionGone,
}

/// Where recovery stands: the client id and CREATE_SESSION's next sequence id.
#[derive(Debug, Default)]
struct Recovery {
    clientid: Option<Clientid4>,
    cs_seq: Sequenceid4,
}

/// The session layer of one client (see the module docs).
pub(crate) struct Core {
    pub(crate) rpc: RpcClient,
    pub(crate) cfg: SessionConfig,
    current: Mutex<Option<Arc<Sess>>>,
    recovery: tokio::sync::Mutex<Recovery>,
    next_gen: AtomicU64,
    lease_ms: AtomicU64,
    /// Wakes the lease keeper when the lease changes (its own Arc: the
    /// keeper holds only a weak reference to the core while it waits).
    lease_changed: Arc<Notify>,
    /// When the last SEQUENCE that succeeded was sent.
    renewed: Mutex<Instant>,
    /// The earliest a "back channel down" flag may cause another bind.
    rebind_after: Mutex<Instant>,
    pub(crate) state: Mutex<StateTable>,
    pub(crate) callbacks: Arc<CallbackService>,
    pub(crate) stats: SessionStats,
    /// Retry operations answered DELAY (GRACE is always retried).
    pub(crate) retry_delay: AtomicBool,
    /// The server asked for BIND_CONN_TO_SESSION on a request that may have
    /// gone on a lane (it does not bind a connection at its first SEQUENCE):
    /// no more lanes for this client, since every lane call would cost a
    /// refusal and a bind first.
    no_lanes: AtomicBool,
    me: Weak<Core>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("minor", &self.cfg.minor).field("server", &self.rpc.server()).finish()
    }
}

impl Core {
    /// The session layer over `rpc` (whose connections answer calls with
    /// `callbacks`). Nothing is sent until the first request; a task keeps
    /// the lease and rebinds the back channel after a reconnect.
    pub(crate) fn new(rpc: RpcClient, cfg: SessionConfig, callbacks: Arc<CallbackService>) -> Arc<Core> {
        let events = rpc.subscribe();
        let core = Arc::new_cyclic(|me| Core {
            rpc,
            cfg,
            current: Mutex::new(None),
            recovery: tokio::sync::Mutex::new(Recovery::default()),
            next_gen: AtomicU64::new(1),
            lease_ms: AtomicU64::new(LEASE_DEFAULT.as_millis() as u64),
            lease_changed: Arc::new(Notify::new()),
            renewed: Mutex::new(Instant::now()),
            rebind_after: Mutex::new(Instant::now()),
            state: Mutex::new(StateTable::default()),
            callbacks,
            stats: SessionStats::default(),
            retry_delay: AtomicBool::new(true),
            no_lanes: AtomicBool::new(false),
            me: me.clone(),
        });
        let owner: Weak<dyn Owner> = core.me.clone();
        core.callbacks.set_owner(owner);
        tokio::spawn(background(core.me.clone(), events));
        core
    }

    /// The server's lease.
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn set_lease(&self, secs: u32) {
        self.lease_ms.store(u64::from(secs.max(1)) * 1000, Ordering::Relaxed);
        self.lease_changed.notify_one();
    }

    /// The current session's id, if there is one.
    pub(crate) fn session_id(&self) -> Option<Sessionid4> {
        self.current.lock().as_ref().map(|s| s.id)
    }

    /// The current client id, if there is a session.
    pub(crate) fn client_id(&self) -> Option<Clientid4> {
        self.current.lock().as_ref().map(|s| s.clientid)
    }

    /// The fore channel of the current session (establishing one first).
    pub(crate) async fn fore_channel(&self) -> NfsResult<ChannelAttrs4> {
        Ok(self.session().await?.fore.clone())
    }

    /// Whether a request first sent at `started` may wait `pause` more.
    fn may_wait(&self, started: Instant, pause: Duration) -> bool {
        self.cfg.hard || started.elapsed() + pause < self.cfg.major_window
    }

    /// The current session, made first if there is none.
    async fn session(&self) -> NfsResult<Arc<Sess>> {
        loop {
            if let Some(s) = self.current.lock().clone() {
                return Ok(s);
            }
            self.recover(None).await?;
        }
    }

    /// Run `build`'s operations after SEQUENCE until the server has answered
    /// them (see the module docs for what is tried again). `build` is called
    /// for every try, so stateids it reads from the state table are current.
    /// `cachethis`: the request changes something (not idempotent).
    pub(crate) async fn run(
        &self,
        cred: &Cred,
        cachethis: bool,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
    ) -> NfsResult<Reply> {
        self.run_main(cred, cachethis, build, None).await
    }

    /// [`Core::run`] where only the first `main` operations `build` makes
    /// (counted at each build) are the request: what follows them rides
    /// along (CLOSEs of files closed since), and its failure neither fails
    /// nor repeats the request.
    pub(crate) async fn run_main(
        &self,
        cred: &Cred,
        cachethis: bool,
        build: &(dyn Fn() -> Vec<ArgOp> + Send + Sync),
        main: Option<&AtomicUsize>,
    ) -> NfsResult<Reply> {
        let started = Instant::now();
        let mut pause = RETRY_MIN;
        let mut agains = 0u32;
        loop {
            let sess = self.session().await?;
            let generation = self.state.lock().generation();
            let ops = build();
            match self.send_on(&sess, cred, &ops, cachethis).await? {
                Sent::Reply(reply) => {
                    let s = match main {
                        Some(n) => reply.main_status(n.load(Ordering::Relaxed)),
                        None => reply.status,
                    };
                    if matches!(s, Nfsstat4::BadStateid | Nfsstat4::StaleStateid | Nfsstat4::Expired)
                        && self.state.lock().generation() != generation
                    {
                        continue; // built with stateids a reclaim replaced
                    }
                    if s == Nfsstat4::StaleClientid {
                        self.recover(Some(sess.gen)).await?;
                        continue;
                    }
                    let retry = match s {
                        Nfsstat4::Delay => self.retry_delay.load(Ordering::Relaxed),
                        Nfsstat4::Grace => true,
                        _ => false,
                    };
                    if !retry || !self.may_wait(started, pause) {
                        return Ok(reply);
                    }
                    self.stats.delayed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("NFSv4 server answered {s:?}: trying again in {pause:?}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                }
                Sent::Again => {
                    agains += 1;
                    if agains > AGAIN_MAX {
                        return Err(NfsError::BadReply(format!(
                            "the server refused this session's slots {AGAIN_MAX} times in a row"
                        )));
                    }
                }
                Sent::SessionGone => self.recover(Some(sess.gen)).await?,
            }
        }
    }

    /// Send `ops` once on `sess` (a slot's retries included).
    async fn send_on(
        &self,
        sess: &Arc<Sess>,
        cred: &Cred,
        ops: &[ArgOp],
        cachethis: bool,
    ) -> NfsResult<Sent> {
        let mut slot = SlotGuard::take(sess).await;
        let auth = self.rpc.auth_sys(cred);
        // A request the server runs at most once may go on a lane (a FUSE
        // reader thread sends it and waits for the reply itself, as NFSv3's
        // read-only calls do): one that changes nothing, or one whose reply
        // the server keeps (`cachethis`). After a lane failed, the second
        // copy goes on the same slot and sequence id: the server answers
        // it from its reply cache, or DELAY while the first still runs.
        // Connections the server has not bound (a lane) are bound by the
        // SEQUENCE itself under SP4_NONE; if this server asks for a bind
        // instead, this request and every later one go on without lanes
        // (`no_lanes`).
        let laned = (cachethis || compound::changes_nothing(ops)) && !self.no_lanes.load(Ordering::Relaxed);
        let started = Instant::now();
        let mut pause = RETRY_MIN;
        let mut binds = 0u32;
        loop {
            let highest = sess.slots.lock().highest_in_use();
            let seq = Sequence4Args {
                sessionid: sess.id,
                sequenceid: slot.ticket.seq,
                slotid: slot.ticket.slot,
                highest_slotid: highest,
                cachethis,
            };
            let call = compound::encode(self.cfg.minor, Some(seq), ops, &auth);
            slot.state = Held::Sent;
            let sent_at = Instant::now();
            // An error leaves the slot uncertain (the guard's drop).
            let body = if laned && binds == 0 {
                self.rpc.submit_once_only(call).await?
            } else {
                self.rpc.submit(call).await?
            };
            let res: Compound4Res = eagernfs_xdr::decode_exact(body)
                .map_err(|e| NfsError::BadReply(format!("COMPOUND reply does not decode: {e}")))?;
            let mut reply = Reply::new(res);
            match reply.skip() {
                Some(ResOp::Sequence(Res4::Ok(ok))) => {
                    slot.finish(|t, k| t.answered(k, &ok));
                    self.stats.compounds.fetch_add(1, Ordering::Relaxed);
                    self.stats.count_ops(ops);
                    self.stats.count_kind(ops, reply.status, sent_at.elapsed());
                    self.renewed_at(sent_at);
                    self.status_flags(ok.status_flags, sess);
                    return Ok(Sent::Reply(reply));
                }
                Some(ResOp::Sequence(Res4::Err(e))) => match e {
                    // The first copy of this request is still running there.
                    Nfsstat4::Delay if self.may_wait(started, pause) => {
                        self.stats.same_slot_retries.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(RETRY_MAX);
                    }
                    Nfsstat4::Delay => {
                        // Gave up waiting for it: its outcome is unknown.
                        slot.finish(SlotTable::abandoned);
                        return Err(status::error(e));
                    }
                    Nfsstat4::Badsession | Nfsstat4::Deadsession => {
                        slot.finish(SlotTable::unused);
                        return Ok(Sent::SessionGone);
                    }
                    Nfsstat4::Badslot | Nfsstat4::BadHighSlot => {
                        let t = slot.ticket;
                        slot.finish(|s, k| {
                            s.unused(k);
                            s.shrink(t.slot.saturating_sub(1));
                        });
                        return Ok(Sent::Again);
                    }
                    Nfsstat4::SeqMisordered => {
                        let fixed = sess.slots.lock().misordered(slot.ticket);
                        match fixed {
                            Some(t) => {
                                self.stats.resequenced.fetch_add(1, Ordering::Relaxed);
                                slot.ticket = t;
                            }
                            None => {
                                // Out of step with the server: a new session.
                                slot.finish(SlotTable::unused);
                                return Ok(Sent::SessionGone);
                            }
                        }
                    }
                    Nfsstat4::RetryUncachedRep if !cachethis => {
                        // Ran once already, reply not kept: safe to run again.
                        slot.finish(SlotTable::consumed);
                        return Ok(Sent::Again);
                    }
                    Nfsstat4::ConnNotBoundToSession if binds < AGAIN_MAX => {
                        if laned && binds == 0 {
                            self.no_lanes.store(true, Ordering::Relaxed);
                        }
                        binds += 1;
                        self.bind(sess, None).await;
                    }
                    e => {
                        slot.finish(SlotTable::unused);
                        return Err(status::error(e));
                    }
                },
                _ => {
                    // Refused before SEQUENCE ran (MINOR_VERS_MISMATCH, …).
                    slot.finish(SlotTable::unused);
                    return Err(status::error(reply.status));
                }
            }
        }
    }

    /// `ops` without SEQUENCE (EXCHANGE_ID, CREATE_SESSION,
    /// BIND_CONN_TO_SESSION, …), on connection `connection` if given.
    async fn plain(&self, ops: Vec<ArgOp>, connection: Option<usize>) -> NfsResult<Reply> {
        let auth = self.rpc.auth_sys(&self.cfg.machine);
        let call = compound::encode(self.cfg.minor, None, &ops, &auth);
        let sent_at = Instant::now();
        let body = match connection {
            Some(c) => self.rpc.submit_on(c, call).await?,
            None => self.rpc.submit(call).await?,
        };
        let res: Compound4Res = eagernfs_xdr::decode_exact(body)
            .map_err(|e| NfsError::BadReply(format!("COMPOUND reply does not decode: {e}")))?;
        self.stats.count_kind(&ops, res.status, sent_at.elapsed());
        Ok(Reply::new(res))
    }

    /// Whether the lease is known to hold now: the last SEQUENCE that
    /// succeeded was sent less than a lease ago. Past that the server may
    /// have revoked this client's delegations without a word (it expired
    /// us), so none may be trusted until the lease is renewed.
    pub(crate) fn lease_held(&self) -> bool {
        self.current.lock().is_some() && self.renewed.lock().elapsed() < self.lease()
    }

    fn renewed_at(&self, at: Instant) {
        let mut r = self.renewed.lock();
        if at > *r {
            *r = at;
        }
    }

    /// Act on SEQUENCE's status flags.
    fn status_flags(&self, flags: u32, sess: &Arc<Sess>) {
        if flags
            & (SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION | SEQ4_STATUS_BACKCHANNEL_FAULT)
            != 0
        {
            let now = Instant::now();
            let mut after = self.rebind_after.lock();
            if now >= *after {
                *after = now + REBIND_EVERY;
                drop(after);
                if let Some(me) = self.me.upgrade() {
                    let sess = sess.clone();
                    tokio::spawn(async move { me.bind(&sess, Some(0)).await });
                }
            }
        }
        if flags
            & (SEQ4_STATUS_EXPIRED_ALL_STATE_REVOKED
                | SEQ4_STATUS_EXPIRED_SOME_STATE_REVOKED
                | SEQ4_STATUS_ADMIN_STATE_REVOKED
                | SEQ4_STATUS_RECALLABLE_STATE_REVOKED)
            != 0
        {
            tracing::warn!(
                "NFSv4 server {} revoked some of this client's state (flags {flags:#x})",
                self.rpc.server()
            );
            // Which delegations went is not said: trust none of them (the
            // caching layer revalidates at the next open, as without one).
            self.state.lock().clear_delegations();
        }
        if flags & SEQ4_STATUS_RESTART_RECLAIM_NEEDED != 0 {
            if let Some(me) = self.me.upgrade() {
                let gen = sess.gen;
                tokio::spawn(async move {
                    if let Err(e) = me.recover(Some(gen)).await {
                        tracing::warn!("NFSv4 reclaim the server asked for failed: {e}");
                    }
                });
            }
        }
    }

    /// Bind a connection (`Some(i)`: connection `i`; `None`: every one) to
    /// the session's fore and back channels. Failures are logged: the next
    /// SEQUENCE tells whether it is needed again.
    async fn bind(&self, sess: &Sess, connection: Option<usize>) {
        let which: Vec<usize> = match connection {
            Some(i) => vec![i],
            None => (0..self.rpc.connection_count()).collect(),
        };
        for i in which {
            let op = ArgOp::BindConnToSession(BindConnToSession4Args {
                sessid: sess.id,
                dir: if i == 0 { ChannelDirFromClient4::BackOrBoth } else { ChannelDirFromClient4::Fore },
                use_conn_in_rdma_mode: false,
            });
            self.stats.binds.fetch_add(1, Ordering::Relaxed);
            match self.plain(vec![op], Some(i)).await.and_then(|mut r| r.bind_conn()) {
                Ok(_) => {}
                Err(e) => tracing::debug!("BIND_CONN_TO_SESSION on connection {i}: {e}"),
            }
        }
    }

    /// Make a session (and, if the server forgot this client, a client id
    /// and reclaim its state), unless one newer than `stale` exists. See the
    /// module docs.
    pub(crate) async fn recover(&self, stale: Option<u64>) -> NfsResult<()> {
        let mut r = self.recovery.lock().await;
        if let Some(cur) = self.current.lock().clone() {
            if stale.is_none_or(|g| cur.gen != g) {
                return Ok(());
            }
        }
        *self.current.lock() = None;
        let started = Instant::now();
        let mut pause = RETRY_MIN;
        loop {
            match self.establish(&mut r).await {
                Ok(sess) => {
                    *self.renewed.lock() = Instant::now();
                    *self.current.lock() = Some(sess);
                    return Ok(());
                }
                Err(e @ NfsError::Nfs(Nfsstat3::Jukebox)) | Err(e @ NfsError::Nfs4(Nfsstat4::Grace)) => {
                    if !self.may_wait(started, pause) {
                        return Err(e);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                }
                // A session lost in the middle of a reclaim: start again.
                Err(NfsError::Nfs4(
                    Nfsstat4::Badsession | Nfsstat4::Deadsession | Nfsstat4::StaleClientid,
                )) if self.may_wait(started, pause) => {
                    r.clientid = None;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn establish(&self, r: &mut Recovery) -> NfsResult<Arc<Sess>> {
        if let Some(clientid) = r.clientid {
            match self.create_session(clientid, r.cs_seq).await {
                Ok(s) => {
                    r.cs_seq = r.cs_seq.wrapping_add(1);
                    return Ok(s);
                }
                Err(NfsError::Nfs4(Nfsstat4::StaleClientid | Nfsstat4::Expired))
                | Err(NfsError::Nfs(Nfsstat3::Stale)) => r.clientid = None,
                Err(NfsError::Nfs4(Nfsstat4::SeqMisordered)) => r.clientid = None,
                Err(e) => return Err(e),
            }
        }
        let had = {
            let st = self.state.lock();
            st.opens.len() + st.locks.len()
        };
        let eid = self.exchange_id().await?;
        r.clientid = Some(eid.clientid);
        r.cs_seq = eid.sequenceid;
        let sess = self.create_session(eid.clientid, r.cs_seq).await?;
        r.cs_seq = r.cs_seq.wrapping_add(1);
        if eid.flags & EXCHGID4_FLAG_CONFIRMED_R != 0 && had == 0 {
            // The server still knew this client: its state stands.
            return Ok(sess);
        }
        self.stats.client_ids.fetch_add(1, Ordering::Relaxed);
        self.reclaim(&sess).await?;
        Ok(sess)
    }

    async fn exchange_id(&self) -> NfsResult<ExchangeId4ResOk> {
        let op = ArgOp::ExchangeId(ExchangeId4Args {
            clientowner: ClientOwner4 {
                co_verifier: self.cfg.verifier,
                co_ownerid: Opaque(self.cfg.owner.clone()),
            },
            flags: 0,
            state_protect: StateProtect4A::None,
            client_impl_id: ImplIdOpt(Some(NfsImplId4 {
                nii_domain: Opaque::from_static(b"eagernfs.org"),
                nii_name: Opaque(Bytes::from(format!("eagernfs {}", env!("CARGO_PKG_VERSION")))),
                nii_date: Nfstime4::default(),
            })),
        });
        self.plain(vec![op], None).await?.exchange_id()
    }

    async fn create_session(&self, clientid: Clientid4, seq: Sequenceid4) -> NfsResult<Arc<Sess>> {
        let op = ArgOp::CreateSession(CreateSession4Args {
            clientid,
            sequence: seq,
            flags: CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
            fore_chan_attrs: ChannelAttrs4 {
                ca_headerpadsize: 0,
                ca_maxrequestsize: self.cfg.max_request,
                ca_maxresponsesize: self.cfg.max_response,
                ca_maxresponsesize_cached: CACHED_REPLY_BYTES,
                ca_maxoperations: OPS_MAX,
                ca_maxrequests: self.cfg.slots,
                ca_rdma_ird: RdmaIrd(None),
            },
            back_chan_attrs: ChannelAttrs4 {
                ca_headerpadsize: 0,
                ca_maxrequestsize: 16 * 1024,
                ca_maxresponsesize: 16 * 1024,
                ca_maxresponsesize_cached: 16 * 1024,
                ca_maxoperations: 16,
                ca_maxrequests: BACK_SLOTS,
                ca_rdma_ird: RdmaIrd(None),
            },
            cb_program: NFS4_CALLBACK,
            sec_parms: SecParmsList(vec![CallbackSecParms4::None]),
        });
        // On connection 0, which the back channel is then bound to.
        let ok = self.plain(vec![op], Some(0)).await?.create_session()?;
        self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        let sess = Arc::new(Sess {
            gen: self.next_gen.fetch_add(1, Ordering::Relaxed),
            clientid,
            id: ok.sessionid,
            slots: Mutex::new(SlotTable::new(ok.fore_chan_attrs.ca_maxrequests)),
            freed: Notify::new(),
            fore: ok.fore_chan_attrs.clone(),
            back_slots: ok.back_chan_attrs.ca_maxrequests.clamp(1, BACK_SLOTS),
        });
        if ok.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN == 0 {
            self.bind(&sess, Some(0)).await;
        }
        Ok(sess)
    }

    /// Run `ops` on `sess` during recovery: DELAY is waited out, GRACE is
    /// not expected (reclaims are what the grace period is for).
    async fn run_on(&self, sess: &Arc<Sess>, cred: &Cred, ops: Vec<ArgOp>) -> NfsResult<Reply> {
        let started = Instant::now();
        let mut pause = RETRY_MIN;
        loop {
            match self.send_on(sess, cred, &ops, true).await? {
                Sent::Reply(r) if r.status == Nfsstat4::Delay && self.may_wait(started, pause) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RETRY_MAX);
                }
                Sent::Reply(r) => return Ok(r),
                Sent::Again => {}
                Sent::SessionGone => return Err(NfsError::Nfs4(Nfsstat4::Badsession)),
            }
        }
    }

    /// Take back every open and lock after the server lost them (module docs).
    async fn reclaim(&self, sess: &Arc<Sess>) -> NfsResult<()> {
        let (opens, locks) = {
            let mut st = self.state.lock();
            // Delegations are not reclaimed: the server recalls nothing of ours now.
            st.clear_delegations();
            let opens: Vec<_> = st.opens.iter().map(|(k, o)| (k.clone(), o.clone())).collect();
            let locks: Vec<_> = st.locks.iter().map(|(k, l)| (k.clone(), l.clone())).collect();
            (opens, locks)
        };
        let mut reopen = Vec::new();
        for (key, o) in &opens {
            let ops = vec![
                ArgOp::Putfh(Putfh4Args { object: o.fh.clone() }),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: o.access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    share_deny: o.deny,
                    owner: StateOwner4 { clientid: sess.clientid, owner: Opaque(o.owner.clone()) },
                    openhow: Openflag4::NoCreate,
                    claim: OpenClaim4::Previous(OpenDelegationType4::None),
                }),
            ];
            let mut r = self.run_on(sess, &o.cred, ops).await?;
            match r.ok(OP_PUTFH).and_then(|_| r.open()) {
                Ok(ok) => {
                    self.stats.reclaimed_opens.fetch_add(1, Ordering::Relaxed);
                    if let Some(x) = self.state.lock().opens.get_mut(key) {
                        x.stateid = ok.stateid;
                    }
                }
                Err(NfsError::Nfs4(Nfsstat4::NoGrace | Nfsstat4::ReclaimBad)) => reopen.push(key.clone()),
                Err(e) => {
                    tracing::warn!("NFSv4 open of a file could not be reclaimed ({e}); it is closed");
                    self.state.lock().opens.remove(key);
                }
            }
        }
        let mut relock = Vec::new();
        for (key, l) in &locks {
            match self.lock_ranges(sess, key, l, true).await? {
                None => {}
                Some(left) => relock.push((key.clone(), left)),
            }
        }
        let mut r = self
            .run_on(
                sess,
                &self.cfg.machine,
                vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })],
            )
            .await?;
        match r.ok(OP_RECLAIM_COMPLETE) {
            Ok(()) | Err(NfsError::Nfs4(Nfsstat4::CompleteAlready)) => {}
            Err(e) => return Err(e),
        }
        // What the server would not take back as a reclaim: as new.
        for key in reopen {
            let Some(o) = self.state.lock().opens.get(&key).cloned() else { continue };
            let ops = vec![
                ArgOp::Putfh(Putfh4Args { object: o.fh.clone() }),
                ArgOp::Open(Open4Args {
                    seqid: 0,
                    share_access: o.access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG,
                    share_deny: o.deny,
                    owner: StateOwner4 { clientid: sess.clientid, owner: Opaque(o.owner.clone()) },
                    openhow: Openflag4::NoCreate,
                    claim: OpenClaim4::Fh,
                }),
            ];
            let cred = o.cred.clone();
            let mut r = self.run_on(sess, &cred, ops).await?;
            match r.ok(OP_PUTFH).and_then(|_| r.open()) {
                Ok(ok) => {
                    self.stats.reopened.fetch_add(1, Ordering::Relaxed);
                    if let Some(x) = self.state.lock().opens.get_mut(&key) {
                        x.stateid = ok.stateid;
                    }
                }
                Err(e) => {
                    tracing::warn!("NFSv4 open of a file lost after the server lost its state: {e}");
                    self.state.lock().opens.remove(&key);
                }
            }
        }
        for (key, l) in relock {
            if let Some(lost) = self.lock_ranges(sess, &key, &l, false).await? {
                let n = lost.ranges.len() as u64;
                self.stats.lost_locks.fetch_add(n, Ordering::Relaxed);
                tracing::warn!(
                    "NFSv4: {n} byte-range lock(s) of a file were lost when the server lost its state"
                );
                let mut st = self.state.lock();
                if let Some(x) = st.locks.get_mut(&key) {
                    for r in &lost.ranges {
                        super::state::cut(&mut x.ranges, r.offset, r.end);
                    }
                    if x.ranges.is_empty() {
                        st.locks.remove(&key);
                    }
                }
            }
        }
        self.state.lock().bump();
        Ok(())
    }

    /// Take the ranges of `l` (as reclaims, or as new locks): `None` if all
    /// were granted, else the ones that were not (with reclaims refused
    /// for want of a grace period, all that are left).
    async fn lock_ranges(
        &self,
        sess: &Arc<Sess>,
        key: &super::state::LockKey,
        l: &super::state::Locks,
        reclaim: bool,
    ) -> NfsResult<Option<super::state::Locks>> {
        let open = {
            let st = self.state.lock();
            st.opens.get(&super::state::OpenKey { fh: key.fh.clone(), uid: l.open_uid }).map(|o| o.stateid)
        };
        let Some(open) = open else {
            return Ok(Some(l.clone()));
        };
        let mut lock_stateid: Option<Stateid4> = None;
        let mut failed: Vec<Range> = Vec::new();
        for (i, range) in l.ranges.iter().enumerate() {
            let locker = match lock_stateid {
                Some(s) => Locker4::Existing(ExistLockOwner4 { lock_stateid: s, lock_seqid: 0 }),
                None => Locker4::NewOwner(OpenToLockOwner4 {
                    open_seqid: 0,
                    open_stateid: open,
                    lock_seqid: 0,
                    lock_owner: StateOwner4 {
                        clientid: sess.clientid,
                        owner: Opaque(lock_owner_name(key.owner)),
                    },
                }),
            };
            let ops = vec![
                ArgOp::Putfh(Putfh4Args { object: l.fh.clone() }),
                ArgOp::Lock(Lock4Args {
                    locktype: if range.write { NfsLockType4::WriteLt } else { NfsLockType4::ReadLt },
                    reclaim,
                    offset: range.offset,
                    length: range.length(),
                    locker,
                }),
            ];
            let mut r = self.run_on(sess, &self.cfg.machine, ops).await?;
            match r.ok(OP_PUTFH).and_then(|_| r.lock()) {
                Ok(Ok(s)) => {
                    lock_stateid = Some(s);
                    if reclaim {
                        self.stats.reclaimed_locks.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.stats.reopened.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(NfsError::Nfs4(Nfsstat4::NoGrace | Nfsstat4::ReclaimBad)) if reclaim => {
                    failed.extend_from_slice(&l.ranges[i..]);
                    break;
                }
                Ok(Err(_denied)) => failed.push(*range),
                Err(e) => {
                    tracing::debug!("NFSv4 lock not taken back: {e}");
                    failed.push(*range);
                }
            }
        }
        if let Some(s) = lock_stateid {
            if let Some(x) = self.state.lock().locks.get_mut(key) {
                x.stateid = Some(s);
            }
        }
        Ok((!failed.is_empty()).then(|| super::state::Locks { ranges: failed, ..l.clone() }))
    }

    /// SEQUENCE alone: keeps the lease when nothing else does.
    pub(crate) async fn renew(&self) -> NfsResult<()> {
        self.stats.renewals.fetch_add(1, Ordering::Relaxed);
        let cred = self.cfg.machine.clone();
        self.run(&cred, false, &Vec::new).await.map(|_| ())
    }

    /// Give a delegation back (DELEGRETURN), and forget it.
    pub(crate) async fn delegreturn(&self, fh: NfsFh4, stateid: Stateid4) -> NfsResult<()> {
        let cred = self.cfg.machine.clone();
        let build = || {
            vec![
                ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
                ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: stateid }),
            ]
        };
        let mut r = self.run(&cred, true, &build).await?;
        self.state.lock().remove_delegation(&stateid.other);
        r.ok(OP_PUTFH)?;
        match r.op(OP_DELEGRETURN) {
            // Already gone (revoked, or returned by an earlier try): nothing to give back.
            Ok(_) | Err(NfsError::Nfs4(Nfsstat4::BadStateid | Nfsstat4::DelegRevoked)) => {
                self.stats.delegreturns.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// End the session and, if this client holds nothing, its client id.
    pub(crate) async fn destroy(&self) -> NfsResult<()> {
        let Some(sess) = self.current.lock().take() else { return Ok(()) };
        let op = ArgOp::DestroySession(DestroySession4Args { sessionid: sess.id });
        let _ = self.plain(vec![op], None).await?;
        let empty = {
            let st = self.state.lock();
            st.opens.is_empty() && st.locks.is_empty()
        };
        if empty {
            let op = ArgOp::DestroyClientid(DestroyClientid4Args { clientid: sess.clientid });
            let _ = self.plain(vec![op], None).await?;
        }
        Ok(())
    }
}

/// The lock owner name of local owner `owner`.
pub(crate) fn lock_owner_name(owner: u64) -> Bytes {
    Bytes::from(format!("lock {owner:016x}"))
}

/// The open owner name of local uid `uid`.
pub(crate) fn open_owner_name(uid: u32) -> Bytes {
    Bytes::from(format!("open {uid}"))
}

impl Owner for Core {
    fn back_session(&self) -> Option<(Sessionid4, u32)> {
        self.current.lock().as_ref().map(|s| (s.id, s.back_slots))
    }

    fn minor(&self) -> u32 {
        self.cfg.minor
    }

    fn recalled(&self, stateid: &Stateid4) {
        self.state.lock().recalled(&stateid.other);
    }

    fn return_delegation(&self, fh: NfsFh4, stateid: Stateid4) {
        // No longer a promise from the moment it is given back.
        self.state.lock().recalled(&stateid.other);
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            if let Err(e) = me.delegreturn(fh, stateid).await {
                tracing::warn!("NFSv4 DELEGRETURN of a recalled delegation failed: {e}");
            }
        });
    }
}

/// Keeps the lease (a SEQUENCE when idle for a third of it) and binds
/// connection 0 to the back channel again after it reconnects. Ends when
/// the client is dropped.
async fn background(me: Weak<Core>, mut events: broadcast::Receiver<TransportEvent>) {
    let mut connects0 = 0u64;
    loop {
        let (wait, lease_changed) = {
            let Some(core) = me.upgrade() else { return };
            let every = core.lease() / 3;
            let idle = core.renewed.lock().elapsed();
            (every.saturating_sub(idle).max(Duration::from_millis(10)), core.lease_changed.clone())
        };
        tokio::select! {
            _ = lease_changed.notified() => {}
            _ = tokio::time::sleep(wait) => {
                let Some(core) = me.upgrade() else { return };
                let every = core.lease() / 3;
                if core.renewed.lock().elapsed() >= every && core.current.lock().is_some() {
                    if let Err(e) = core.renew().await {
                        tracing::debug!("NFSv4 lease renewal: {e}");
                    }
                }
            }
            ev = events.recv() => match ev {
                Ok(TransportEvent::Connected { connection: 0, .. }) => {
                    connects0 += 1;
                    let Some(core) = me.upgrade() else { return };
                    let sess = core.current.lock().clone();
                    if let (Some(sess), true) = (sess, connects0 > 1) {
                        core.bind(&sess, Some(0)).await;
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fh() -> ArgOp {
        ArgOp::Putfh(Putfh4Args { object: NfsFh4 { data: Opaque::from_static(b"f") } })
    }

    fn getattr() -> ArgOp {
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::default() })
    }

    #[test]
    fn a_compound_is_counted_by_what_it_is_for() {
        let name = |ops: &[ArgOp]| op_name(main_op(ops));
        let lookup = ArgOp::Lookup(Lookup4Args { objname: Opaque::from_static(b"n") });
        let access = ArgOp::Access(Access4Args { access: 1 });
        let remove = ArgOp::Remove(Remove4Args { target: Opaque::from_static(b"n") });
        assert_eq!(name(&[fh(), getattr()]), "GETATTR");
        assert_eq!(name(&[fh(), getattr(), lookup.clone(), ArgOp::Getfh(()), getattr()]), "LOOKUP");
        assert_eq!(name(&[fh(), access.clone(), getattr()]), "ACCESS");
        let read = ArgOp::Read(Read4Args { stateid: Stateid4::ANONYMOUS, offset: 0, count: 1 });
        assert_eq!(name(&[fh(), access, getattr(), read]), "READ", "a check on the way is not the point");
        assert_eq!(
            name(&[fh(), ArgOp::Savefh(()), lookup.clone(), ArgOp::Restorefh(()), remove, getattr()]),
            "REMOVE"
        );
        assert_eq!(name(&[]), "SEQUENCE", "a renewal");
        let close = || ArgOp::Close(Close4Args { seqid: 0, open_stateid: Stateid4::ANONYMOUS });
        let looked = [fh(), lookup.clone(), ArgOp::Getfh(()), getattr(), fh(), close(), fh(), close()];
        assert_eq!(name(&looked), "LOOKUP", "CLOSEs riding along");
        assert_eq!(name(&[fh(), close(), fh(), close()]), "CLOSE", "CLOSEs alone");
        let delegreturn = || ArgOp::Delegreturn(Delegreturn4Args { deleg_stateid: Stateid4::ANONYMOUS });
        let remove = ArgOp::Remove(Remove4Args { target: Opaque::from_static(b"n") });
        assert_eq!(name(&[fh(), delegreturn(), fh(), remove, getattr()]), "REMOVE", "returned on the way");
        assert_eq!(name(&[fh(), delegreturn(), fh(), delegreturn()]), "DELEGRETURN", "returns alone");
    }
}
