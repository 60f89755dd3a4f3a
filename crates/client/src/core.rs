//! The sans-IO RPC client state machine of one connection.
//!
//! [`RpcCore`] owns everything about the calls of one TCP connection except
//! the socket and the clock: the slot table (calls in flight, bounded; more
//! calls queue), xid allocation, the table of outstanding calls, their
//! retransmission timers with nfs(5) `timeo`/`retrans` meaning, hard and
//! soft mount semantics, and the reconnect backoff. Time is an argument
//! (`now`), never read, so tests drive it with simulated time, loss,
//! duplication and reordering; the tokio driver (`driver.rs`) is a thin loop
//! around it.
//!
//! # Timers (as Linux's sunrpc does for TCP)
//! A call gets a slot, and its *major timeout* window starts:
//! `timeo × (retrans + 1)`, at most 600 s. Each transmission arms a *minor*
//! timeout: `timeo` for the first, then `timeo` longer for each retry (linear
//! backoff, capped by the window). A minor timeout retransmits the call with
//! the same xid (the server's duplicate reply cache answers a call it has
//! already executed). At the major timeout a soft mount fails the call with
//! [`NfsError::TimedOut`]; a hard mount reports "server not responding" once
//! ([`Event::NotResponding`]), opens a new window, and keeps trying, until a
//! reply arrives ([`Event::ServerOk`]).
//!
//! # Connection
//! The driver asks [`RpcCore::wants_connect`] and reports the outcome
//! ([`RpcCore::on_connected`], [`RpcCore::on_connect_failed`],
//! [`RpcCore::on_disconnect`]). Connecting happens only while there is work;
//! failed attempts back off from 100 ms doubling to 2 s (a refused connect
//! costs the server one reset; a longer cap only delays the return of a
//! restarted or taken-over server: the cluster soak saw clients come back
//! 12.7 s after a kill, 6 s after their head, with a 10 s cap), and the backoff
//! resets only once the server answers a call (a server that accepts and
//! hangs up must not make us spin). After a reconnect every outstanding call
//! is sent again.
//!
//! # Layout
//! - [`Call`]: an encoded call waiting for its xid.
//! - [`CoreConfig`]: the knobs, built from [`MountOptions`].
//! - [`RpcCore`]: the state machine; [`Event`] is what it reports.
//! - [`rpc_error_message`]: RPC-level refusals as sentences.

use crate::ops::{NfsError, NfsResult};
use crate::options::{MountOptions, TIMEO_MAX};
use bytes::{Bytes, BytesMut};
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, AuthStat, CallHeader, Message, OpaqueAuth, RejectedReply, ReplyBody};
use eagernfs_xdr::Encode;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Identifies a submitted call to its owner (the driver maps it to the
/// waiting task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token(pub u64);

/// A call, encoded and framed, waiting for an xid.
#[derive(Debug)]
pub struct Call {
    /// Program, version and procedure, kept to word error messages.
    pub prog: u32,
    pub vers: u32,
    pub proc_: u32,
    /// Record mark, RPC header with xid 0, arguments (or, with a tail,
    /// the arguments up to the tail).
    record: BytesMut,
    /// Bytes that follow `record` on the wire, sent as they are.
    tail: Vec<Bytes>,
}

/// A framed call as it goes on the wire: record mark, RPC header and
/// arguments in `head`, then `tail` — a WRITE's data, written from the
/// caller's buffers instead of being copied into the head (see
/// [`Call::with_opaque_tail`]). Cloning is cheap (reference counts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub head: Bytes,
    pub tail: Arc<[Bytes]>,
}

impl Record {
    /// Bytes on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// Whether the record is empty (never, for a built call).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole record in one buffer (copies if there is a tail).
    pub fn to_bytes(&self) -> Bytes {
        if self.tail.is_empty() {
            return self.head.clone();
        }
        let mut b = BytesMut::with_capacity(self.len());
        b.extend_from_slice(&self.head);
        for t in self.tail.iter() {
            b.extend_from_slice(t);
        }
        b.freeze()
    }
}

/// Zeros to pad an XDR opaque to a multiple of four bytes.
static XDR_PAD: [u8; 3] = [0; 3];

/// Byte offset of the xid in a framed call (after the 4-byte record mark).
const XID_OFFSET: usize = 4;

impl Call {
    /// Encode a call. `args_len_hint` is the expected size of the encoded
    /// arguments (the payload of a WRITE), so the buffer is allocated once.
    pub fn new<A: Encode + ?Sized>(
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &OpaqueAuth,
        args: &A,
        args_len_hint: usize,
    ) -> Call {
        let header = CallHeader {
            xid: 0,
            rpcvers: eagernfs_rpc::RPC_VERSION,
            prog,
            vers,
            proc_,
            cred: cred.clone(),
            verf: OpaqueAuth::none(),
        };
        let mut record = BytesMut::with_capacity(4 + 40 + cred.body.len() + 8 + args_len_hint + 64);
        let at = begin_record(&mut record);
        header.encode(&mut record);
        args.encode(&mut record);
        finish_record(&mut record, at);
        Call { prog, vers, proc_, record, tail: Vec::new() }
    }

    /// Encode a call whose arguments end with a variable-length opaque
    /// (WRITE's data): `args` encodes everything before it, and `payload`
    /// is sent after its length word without being copied — on one CPU a
    /// 1 MiB copy per WRITE is time the writer waits for.
    pub fn with_opaque_tail<A: Encode + ?Sized>(
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &OpaqueAuth,
        args: &A,
        payload: Bytes,
    ) -> Call {
        let mut call = Call::new(prog, vers, proc_, cred, args, 4);
        let n = payload.len();
        assert!(n <= u32::MAX as usize, "opaque too long for XDR");
        call.record.extend_from_slice(&(n as u32).to_be_bytes());
        let pad = (4 - n % 4) % 4;
        let total = call.record.len() - 4 + n + pad;
        assert!(total <= 0x7fff_ffff, "RPC record too large to frame");
        // One fragment holds head and tail: rewrite the mark for both.
        call.record[..4].copy_from_slice(&(0x8000_0000 | total as u32).to_be_bytes());
        if n > 0 {
            call.tail.push(payload);
        }
        if pad > 0 {
            call.tail.push(Bytes::from_static(&XDR_PAD[..pad]));
        }
        call
    }

    /// Encode a call whose arguments hold a variable-length opaque with
    /// more arguments after it (an NFSv4 WRITE inside a COMPOUND): `args`
    /// encodes everything before the opaque, `payload` follows its length
    /// word without being copied (as in [`Call::with_opaque_tail`]), and
    /// `after` (already encoded) follows the payload's padding.
    pub fn with_opaque_between<A: Encode + ?Sized>(
        prog: u32,
        vers: u32,
        proc_: u32,
        cred: &OpaqueAuth,
        args: &A,
        payload: Bytes,
        after: Bytes,
    ) -> Call {
        let mut call = Call::with_opaque_tail(prog, vers, proc_, cred, args, payload);
        if !after.is_empty() {
            let total = call.len() - 4 + after.len();
            assert!(total <= 0x7fff_ffff, "RPC record too large to frame");
            call.record[..4].copy_from_slice(&(0x8000_0000 | total as u32).to_be_bytes());
            call.tail.push(after);
        }
        call
    }

    /// Size of the framed record in bytes.
    pub fn len(&self) -> usize {
        self.record.len() + self.tail.iter().map(Bytes::len).sum::<usize>()
    }

    /// Whether the record is empty (never, for a built call).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole framed record in one buffer (tests).
    #[cfg(test)]
    pub(crate) fn wire_bytes(&self) -> Bytes {
        let mut b = BytesMut::from(&self.record[..]);
        for t in &self.tail {
            b.extend_from_slice(t);
        }
        b.freeze()
    }

    /// Whether the whole record is in one buffer (no WRITE payload after it).
    pub(crate) fn is_contiguous(&self) -> bool {
        self.tail.is_empty()
    }

    /// Give the call `xid` and return its record, for a caller that sends
    /// it itself (a lane). Only for contiguous calls.
    pub(crate) fn set_xid(&mut self, xid: u32) -> &[u8] {
        debug_assert!(self.tail.is_empty());
        self.record[XID_OFFSET..XID_OFFSET + 4].copy_from_slice(&xid.to_be_bytes());
        &self.record
    }
}

/// The result a reply record (the bytes after its record mark) carries
/// for a call to `prog`/`vers`/`proc_`: the bytes after the reply header,
/// or an error naming the refusal.
pub(crate) fn reply_result(prog: u32, vers: u32, proc_: u32, record: Bytes) -> NfsResult<Bytes> {
    let mut body = record;
    match Message::decode(&mut body) {
        Ok(Message::Reply(h)) => accepted_result(prog, vers, proc_, h.body, body),
        Ok(Message::Call(_)) => Err(NfsError::BadReply("a call where a reply was expected".into())),
        Err(e) => Err(NfsError::BadReply(format!("reply header does not decode: {e}"))),
    }
}

/// A decoded reply header's verdict on the results in `body`.
fn accepted_result(prog: u32, vers: u32, proc_: u32, header: ReplyBody, body: Bytes) -> NfsResult<Bytes> {
    match header {
        ReplyBody::Accepted { stat: AcceptStat::Success, .. } => Ok(body),
        ReplyBody::Accepted { stat, .. } => {
            Err(NfsError::Rpc(rpc_error_message(prog, vers, proc_, RpcRefusal::Accepted(stat))))
        }
        ReplyBody::Denied(why) => {
            Err(NfsError::Rpc(rpc_error_message(prog, vers, proc_, RpcRefusal::Denied(why))))
        }
    }
}

/// The knobs of the state machine.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// First minor timeout, and the step by which each retry's grows
    /// (over UDP each retry's doubles instead).
    pub timeo: Duration,
    /// Exponential backoff of minor timeouts (Linux's UDP behaviour; TCP
    /// grows them linearly).
    pub backoff_doubles: bool,
    /// Retransmissions per major timeout window (the window is
    /// `timeo × (retrans + 1)`).
    pub retrans: u32,
    /// Hard mount: retry for ever. Soft: fail at the major timeout.
    pub hard: bool,
    /// Calls in flight at once on this connection; the server stops
    /// reading a connection beyond its own limit, so more only queue there.
    pub slots_max: usize,
    /// Calls waiting for a slot before [`RpcCore::can_submit`] says no
    /// (the driver then stops taking calls, pushing back on callers).
    pub queue_max: usize,
    /// First reconnect delay.
    pub reconnect_delay_min: Duration,
    /// Largest reconnect delay.
    pub reconnect_delay_max: Duration,
    /// Until a connection has succeeded once, a failed connect fails the
    /// calls waiting for it (a mount that cannot reach its server should
    /// say so at once, not retry for ever).
    pub fail_fast_until_connected: bool,
    /// First xid to hand out (random in production, so a restarted client
    /// does not reuse the xids the server's duplicate cache remembers).
    pub first_xid: u32,
    /// Calls from the server on this connection (an NFSv4.1 back channel)
    /// are reported as [`Event::Call`] instead of dropped as garbage.
    pub accept_calls: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig::from_options(&MountOptions::default())
    }
}

impl CoreConfig {
    /// The transport settings of `o` (timeo, retrans, hard/soft).
    pub fn from_options(o: &MountOptions) -> Self {
        CoreConfig {
            timeo: o.timeo,
            backoff_doubles: o.udp,
            retrans: o.retrans,
            hard: o.hard,
            slots_max: 128,
            queue_max: 1024,
            reconnect_delay_min: Duration::from_millis(100),
            reconnect_delay_max: Duration::from_secs(2),
            fail_fast_until_connected: true,
            first_xid: 1,
            accept_calls: false,
        }
    }

    /// The major timeout window: `timeo × (retrans + 1)`, at most 600 s.
    pub fn major_window(&self) -> Duration {
        self.timeo.checked_mul(self.retrans.saturating_add(1)).unwrap_or(TIMEO_MAX).min(TIMEO_MAX)
    }
}

/// What the state machine reports to its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A call finished: the results (the bytes after the reply header) or
    /// why it failed.
    Completed(Token, Result<Bytes, NfsError>),
    /// A hard mount's call reached a major timeout: log "server not
    /// responding, still trying". Reported once until [`Event::ServerOk`].
    NotResponding,
    /// A reply arrived after [`Event::NotResponding`]: log "server OK".
    ServerOk,
    /// The server sent a call on this connection (an NFSv4.1 callback; only
    /// with [`CoreConfig::accept_calls`]): the whole RPC message, its xid
    /// first. An answer goes back with [`RpcCore::queue_reply`].
    Call(Bytes),
}

/// Counters for tests, statistics and benchmarks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CoreStats {
    /// Calls admitted to a slot.
    pub calls: u64,
    /// Replies matched to a call.
    pub answered: u64,
    /// Most calls that held slots at once (shows pipelining).
    pub in_flight_max: u64,
    /// Retransmissions after a minor or major timeout (not resends after a
    /// reconnect).
    pub retransmissions: u64,
    /// Calls sent again because the connection was re-established.
    pub resent_after_reconnect: u64,
    /// Major timeouts (soft: calls failed; hard: windows restarted).
    pub major_timeouts: u64,
    /// Replies for no outstanding call (duplicates, or late replies to
    /// calls that timed out): dropped.
    pub replies_unmatched: u64,
    /// Records that were not RPC replies at all: dropped.
    pub records_garbage: u64,
    /// Calls from the server (NFSv4.1 callbacks) handed to the driver.
    pub calls_received: u64,
}

/// Round trips of one kind of call.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RttStats {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

/// Where the connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    /// No connection; connect (when there is work) at `retry_at`.
    Disconnected {
        retry_at: Instant,
    },
    /// The driver is connecting.
    Connecting,
    Connected,
}

/// One call holding a slot.
#[derive(Debug)]
struct Outstanding {
    token: Token,
    prog: u32,
    vers: u32,
    proc_: u32,
    /// The framed record with its xid, resent as is.
    record: Record,
    /// Admission order, so calls are resent after a reconnect in the order
    /// they were first sent.
    seq: u64,
    /// The minor timeout the next transmission arms.
    timeout: Duration,
    /// When the current major timeout window ends.
    major_at: Instant,
    /// When to retransmit; `None` while not on the wire (queued for
    /// transmission, or disconnected).
    retransmit_at: Option<Instant>,
    /// The key of this call in `RpcCore::timers`.
    timer_at: Instant,
    /// When it last went on the wire (for the round-trip time).
    sent_at: Option<Instant>,
}

impl Outstanding {
    fn next_timer(&self) -> Instant {
        match self.retransmit_at {
            Some(r) => r.min(self.major_at),
            None => self.major_at,
        }
    }
}

/// The RPC state machine of one connection. See the module docs.
#[derive(Debug)]
pub struct RpcCore {
    config: CoreConfig,
    state: ConnState,
    /// A connection has succeeded at least once.
    ever_connected: bool,
    /// The delay before the next reconnect attempt.
    reconnect_delay: Duration,
    /// The slot table: calls in flight, by xid.
    calls: HashMap<u32, Outstanding>,
    /// One entry per outstanding call: its next timer.
    timers: BTreeSet<(Instant, u32)>,
    /// Calls waiting for a slot, in submission order.
    queue: VecDeque<(Token, Call)>,
    /// Xids whose record must be written, in order. May hold xids of calls
    /// that have since finished; those are skipped.
    transmit: VecDeque<u32>,
    /// Replies to the server's calls ([`Event::Call`]), written before any
    /// call; dropped when the connection breaks (the server calls again).
    replies: VecDeque<Record>,
    next_xid: u32,
    next_token: u64,
    next_seq: u64,
    events: VecDeque<Event>,
    /// A major timeout was reported and no reply has arrived since.
    not_responding: bool,
    /// The server answered a call on the current connection, so a
    /// disconnect is news (reconnect at once), not a server that accepts
    /// and hangs up (back off).
    answered_since_connect: bool,
    stats: CoreStats,
    /// Round trips by (program, procedure).
    rtt: std::collections::BTreeMap<(u32, u32), RttStats>,
}

impl RpcCore {
    /// A state machine with no connection, which wants one as soon as a call
    /// is submitted.
    pub fn new(config: CoreConfig, now: Instant) -> Self {
        RpcCore {
            reconnect_delay: config.reconnect_delay_min,
            next_xid: config.first_xid,
            config,
            state: ConnState::Disconnected { retry_at: now },
            ever_connected: false,
            calls: HashMap::new(),
            timers: BTreeSet::new(),
            queue: VecDeque::new(),
            transmit: VecDeque::new(),
            replies: VecDeque::new(),
            next_token: 0,
            next_seq: 0,
            events: VecDeque::new(),
            not_responding: false,
            answered_since_connect: false,
            stats: CoreStats::default(),
            rtt: std::collections::BTreeMap::new(),
        }
    }

    /// Whether another call may be submitted without exceeding the queue
    /// bound.
    pub fn can_submit(&self) -> bool {
        self.calls.len() < self.config.slots_max || self.queue.len() < self.config.queue_max
    }

    /// Take a call. It is sent as soon as it has a slot and a connection.
    pub fn submit(&mut self, now: Instant, call: Call) -> Token {
        let token = Token(self.next_token);
        self.next_token += 1;
        if self.calls.len() < self.config.slots_max {
            self.admit(now, token, call);
        } else {
            self.queue.push_back((token, call));
        }
        token
    }

    /// Give `call` a slot and an xid, and queue it for transmission.
    fn admit(&mut self, now: Instant, token: Token, call: Call) {
        let xid = self.alloc_xid();
        let Call { prog, vers, proc_, mut record, tail } = call;
        record[XID_OFFSET..XID_OFFSET + 4].copy_from_slice(&xid.to_be_bytes());
        let major_at = now + self.config.major_window();
        let out = Outstanding {
            token,
            prog,
            vers,
            proc_,
            record: Record { head: record.freeze(), tail: tail.into() },
            seq: self.next_seq,
            timeout: self.config.timeo.min(self.config.major_window()),
            major_at,
            retransmit_at: None,
            timer_at: major_at,
            sent_at: None,
        };
        self.next_seq += 1;
        self.timers.insert((major_at, xid));
        self.calls.insert(xid, out);
        self.transmit.push_back(xid);
        self.stats.calls += 1;
        self.stats.in_flight_max = self.stats.in_flight_max.max(self.calls.len() as u64);
    }

    /// The next xid not held by an outstanding call.
    fn alloc_xid(&mut self) -> u32 {
        loop {
            let xid = self.next_xid;
            self.next_xid = self.next_xid.wrapping_add(1);
            if !self.calls.contains_key(&xid) {
                return xid;
            }
        }
    }

    /// Move a call's timer to `at`.
    fn set_timer(timers: &mut BTreeSet<(Instant, u32)>, xid: u32, out: &mut Outstanding) {
        let at = out.next_timer();
        if at != out.timer_at {
            timers.remove(&(out.timer_at, xid));
            timers.insert((at, xid));
            out.timer_at = at;
        }
    }

    /// The next record to write, if connected. Arms its retransmit timer.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Record> {
        if self.state != ConnState::Connected {
            return None;
        }
        if let Some(reply) = self.replies.pop_front() {
            return Some(reply);
        }
        while let Some(xid) = self.transmit.pop_front() {
            let Some(out) = self.calls.get_mut(&xid) else { continue };
            if out.retransmit_at.is_some() {
                continue; // already on the wire
            }
            out.retransmit_at = Some(now + out.timeout);
            out.sent_at = Some(now);
            let record = out.record.clone();
            Self::set_timer(&mut self.timers, xid, out);
            return Some(record);
        }
        None
    }

    /// When [`RpcCore::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let call_timer = self.timers.first().map(|(at, _)| *at);
        let reconnect = match self.state {
            ConnState::Disconnected { retry_at } if self.has_work() => Some(retry_at),
            _ => None,
        };
        match (call_timer, reconnect) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fire every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, xid)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(mut out) = self.calls.remove(&xid) else { continue };
            if now >= out.major_at {
                self.stats.major_timeouts += 1;
                if !self.config.hard {
                    self.events.push_back(Event::Completed(out.token, Err(NfsError::TimedOut)));
                    self.admit_queued(now);
                    continue;
                }
                if !self.not_responding {
                    self.not_responding = true;
                    self.events.push_back(Event::NotResponding);
                }
                // A new window, as if the call were new; send it again now.
                out.major_at = now + self.config.major_window();
                out.timeout = self.config.timeo.min(self.config.major_window());
                if out.retransmit_at.take().is_some() {
                    self.stats.retransmissions += 1;
                    self.transmit.push_back(xid);
                }
            } else if out.retransmit_at.is_some_and(|r| now >= r) {
                out.retransmit_at = None;
                let next = if self.config.backoff_doubles {
                    out.timeout.saturating_mul(2)
                } else {
                    out.timeout + self.config.timeo
                };
                out.timeout = next.min(self.config.major_window());
                self.stats.retransmissions += 1;
                self.transmit.push_back(xid);
            }
            out.timer_at = out.next_timer();
            self.timers.insert((out.timer_at, xid));
            self.calls.insert(xid, out);
        }
    }

    /// A record arrived from the server. Replies are matched by xid;
    /// anything else is counted and dropped. Never panics on any input.
    pub fn handle_record(&mut self, now: Instant, record: Bytes) {
        let peeked = peek_reply_xid(&record);
        let mut body = record.clone();
        let header = match Message::decode(&mut body) {
            Ok(Message::Reply(h)) => h,
            Ok(Message::Call(_)) if self.config.accept_calls => {
                self.stats.calls_received += 1;
                self.events.push_back(Event::Call(record));
                return;
            }
            Ok(Message::Call(_)) => {
                self.stats.records_garbage += 1;
                return;
            }
            Err(e) => {
                // The header is broken, but if its first words name one of
                // our calls, fail that call now rather than at its timeout.
                match peeked.and_then(|xid| self.take_call(xid)) {
                    Some(out) => {
                        let err = NfsError::BadReply(format!("reply header does not decode: {e}"));
                        self.complete(now, out, Err(err));
                    }
                    None => self.stats.records_garbage += 1,
                }
                return;
            }
        };
        let Some(out) = self.take_call(header.xid) else {
            self.stats.replies_unmatched += 1;
            return;
        };
        let result = accepted_result(out.prog, out.vers, out.proc_, header.body, body);
        self.stats.answered += 1;
        if let Some(sent) = out.sent_at {
            let ns = now.saturating_duration_since(sent).as_nanos() as u64;
            let r = self.rtt.entry((out.prog, out.proc_)).or_default();
            r.count += 1;
            r.sum_ns += ns;
            r.max_ns = r.max_ns.max(ns);
        }
        self.complete(now, out, result);
    }

    /// Round-trip times of answered calls, by (program, procedure): from
    /// the last transmission to the reply (Linux's mountstats "RTT").
    pub fn rtt_stats(&self) -> &std::collections::BTreeMap<(u32, u32), RttStats> {
        &self.rtt
    }

    /// Remove the call `xid` from the slot table and its timer.
    fn take_call(&mut self, xid: u32) -> Option<Outstanding> {
        let out = self.calls.remove(&xid)?;
        self.timers.remove(&(out.timer_at, xid));
        Some(out)
    }

    /// The server answered `out`: report it and give its slot away.
    fn complete(&mut self, now: Instant, out: Outstanding, result: Result<Bytes, NfsError>) {
        // The server is talking: reconnects may start fast again.
        self.reconnect_delay = self.config.reconnect_delay_min;
        self.answered_since_connect = true;
        if self.not_responding {
            self.not_responding = false;
            self.events.push_back(Event::ServerOk);
        }
        self.events.push_back(Event::Completed(out.token, result));
        self.admit_queued(now);
    }

    fn admit_queued(&mut self, now: Instant) {
        while self.calls.len() < self.config.slots_max {
            let Some((token, call)) = self.queue.pop_front() else { break };
            self.admit(now, token, call);
        }
    }

    /// Send `reply` (a framed RPC reply to one of the server's calls)
    /// before any call waiting for transmission; dropped if the connection
    /// is down or breaks before it is written.
    pub fn queue_reply(&mut self, reply: Record) {
        if self.state == ConnState::Connected {
            self.replies.push_back(reply);
        }
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether there are calls that need a connection.
    fn has_work(&self) -> bool {
        !self.calls.is_empty() || !self.queue.is_empty()
    }

    /// Whether the driver should start connecting now. If so, it must call
    /// [`RpcCore::on_connecting`] and later report the outcome.
    pub fn wants_connect(&self, now: Instant) -> bool {
        matches!(self.state, ConnState::Disconnected { retry_at } if retry_at <= now && self.has_work())
    }

    /// The driver started connecting.
    pub fn on_connecting(&mut self) {
        self.state = ConnState::Connecting;
    }

    /// The connection is up: (re)send every outstanding call.
    pub fn on_connected(&mut self, _now: Instant) {
        self.state = ConnState::Connected;
        self.ever_connected = true;
        self.answered_since_connect = false;
    }

    /// The connection attempt failed (`why` says how, for error messages).
    pub fn on_connect_failed(&mut self, now: Instant, why: &str) {
        self.schedule_reconnect(now);
        if self.config.fail_fast_until_connected && !self.ever_connected {
            let err = NfsError::Connection(why.to_string());
            let mut failed: Vec<Outstanding> = self.calls.drain().map(|(_, o)| o).collect();
            failed.sort_by_key(|o| o.seq);
            self.timers.clear();
            self.transmit.clear();
            for out in failed {
                self.events.push_back(Event::Completed(out.token, Err(err.clone())));
            }
            for (token, _) in self.queue.drain(..) {
                self.events.push_back(Event::Completed(token, Err(err.clone())));
            }
        }
    }

    /// The connection attempt failed, but the driver has another address
    /// to try: connect again now, without backoff, failing nothing.
    pub fn on_connect_failed_try_next(&mut self, now: Instant) {
        self.state = ConnState::Disconnected { retry_at: now };
    }

    /// The connection broke. Every outstanding call will be sent again
    /// after the reconnect; their major timeouts keep running.
    pub fn on_disconnect(&mut self, now: Instant) {
        self.replies.clear();
        if self.state == ConnState::Connected && self.answered_since_connect {
            // A working connection broke: reconnect at once; back off if
            // that keeps failing.
            self.state = ConnState::Disconnected { retry_at: now };
        } else {
            self.schedule_reconnect(now);
        }
        let mut order: Vec<(u64, u32)> = Vec::with_capacity(self.calls.len());
        for (xid, out) in self.calls.iter_mut() {
            if out.retransmit_at.take().is_some() {
                self.stats.resent_after_reconnect += 1;
            }
            Self::set_timer(&mut self.timers, *xid, out);
            order.push((out.seq, *xid));
        }
        order.sort_unstable();
        self.transmit = order.into_iter().map(|(_, xid)| xid).collect();
    }

    fn schedule_reconnect(&mut self, now: Instant) {
        self.state = ConnState::Disconnected { retry_at: now + self.reconnect_delay };
        self.reconnect_delay = (self.reconnect_delay * 2).min(self.config.reconnect_delay_max);
    }

    /// Fail every call (the client is shutting down).
    pub fn abort_all(&mut self, err: NfsError) {
        let calls: Vec<Outstanding> = self.calls.drain().map(|(_, o)| o).collect();
        self.timers.clear();
        self.transmit.clear();
        for out in calls {
            self.events.push_back(Event::Completed(out.token, Err(err.clone())));
        }
        for (token, _) in self.queue.drain(..) {
            self.events.push_back(Event::Completed(token, Err(err.clone())));
        }
    }

    /// Calls holding a slot.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Calls waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Whether the connection is up.
    pub fn is_connected(&self) -> bool {
        self.state == ConnState::Connected
    }

    /// The counters.
    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }
}

/// The xid of a record whose first two words say "reply", whatever follows.
pub(crate) fn peek_reply_xid(record: &[u8]) -> Option<u32> {
    if record.len() < 8 || record[4..8] != 1u32.to_be_bytes() {
        return None;
    }
    Some(u32::from_be_bytes([record[0], record[1], record[2], record[3]]))
}

/// Why the server refused a call at the RPC level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcRefusal {
    Accepted(AcceptStat),
    Denied(RejectedReply),
}

/// A program's name for messages.
pub fn program_name(prog: u32) -> String {
    match prog {
        eagernfs_proto::nfs3::NFS_PROGRAM => "NFS".into(),
        eagernfs_proto::mount::MOUNT_PROGRAM => "MOUNT".into(),
        eagernfs_proto::portmap::PMAP_PROGRAM => "portmap".into(),
        p => format!("program {p}"),
    }
}

/// An RPC-level refusal as a sentence a person can act on.
pub fn rpc_error_message(prog: u32, vers: u32, proc_: u32, why: RpcRefusal) -> String {
    let name = program_name(prog);
    match why {
        RpcRefusal::Accepted(AcceptStat::Success) => "no error".into(),
        RpcRefusal::Accepted(AcceptStat::ProgUnavail) => {
            format!("the server does not offer {name} on this port (PROG_UNAVAIL)")
        }
        RpcRefusal::Accepted(AcceptStat::ProgMismatch { low, high }) => format!(
            "the server does not speak {name} version {vers}; it supports versions {low} to {high} (PROG_MISMATCH)"
        ),
        RpcRefusal::Accepted(AcceptStat::ProcUnavail) => {
            format!("the server's {name} v{vers} has no procedure {proc_} (PROC_UNAVAIL)")
        }
        RpcRefusal::Accepted(AcceptStat::GarbageArgs) => format!(
            "the server could not decode the arguments of {name} v{vers} procedure {proc_} (GARBAGE_ARGS)"
        ),
        RpcRefusal::Accepted(AcceptStat::SystemErr) => {
            format!("the server failed internally on {name} procedure {proc_} (SYSTEM_ERR)")
        }
        RpcRefusal::Denied(RejectedReply::RpcMismatch { low, high }) => {
            format!("the server does not speak ONC RPC version 2 (calling {name}); it supports {low} to {high} (RPC_MISMATCH)")
        }
        RpcRefusal::Denied(RejectedReply::AuthError(stat)) => {
            let hint = match stat {
                AuthStat::TooWeak => {
                    "; the export may require a privileged source port (run as root with resvport) or another security flavor"
                }
                AuthStat::BadCred | AuthStat::RejectedCred => "; the server did not accept the AUTH_SYS credential",
                _ => "",
            };
            format!("the server refused the credentials of a {name} call: {stat:?} (AUTH_ERROR){hint}")
        }
    }
}

/// Encode `results` as a successful reply record body for tests: the reply
/// header then the results, unframed (what [`RpcCore::handle_record`] takes).
#[cfg(test)]
pub(crate) fn test_reply<R: Encode>(xid: u32, results: &R) -> Bytes {
    let mut b = BytesMut::new();
    eagernfs_rpc::ReplyHeader::success(xid).encode(&mut b);
    results.encode(&mut b);
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_rpc::{RecordDecoder, ReplyHeader};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const T: Duration = Duration::from_secs(1);

    fn config(hard: bool) -> CoreConfig {
        CoreConfig {
            timeo: T,
            backoff_doubles: false,
            retrans: 2,
            hard,
            slots_max: 4,
            queue_max: 100,
            reconnect_delay_min: Duration::from_millis(100),
            reconnect_delay_max: Duration::from_secs(2),
            fail_fast_until_connected: true,
            first_xid: 1000,
            accept_calls: false,
        }
    }

    fn call(n: u32) -> Call {
        Call::new(100003, 3, 0, &OpaqueAuth::none(), &n, 4)
    }

    /// The server side of a simulated connection: the calls it received.
    fn xid_of(record: &Bytes) -> u32 {
        let mut dec = RecordDecoder::new(1 << 20);
        let mut src = BytesMut::from(&record[..]);
        let body = dec.decode(&mut src).unwrap().unwrap();
        match Message::decode(&mut body.clone()).unwrap() {
            Message::Call(c) => c.xid,
            Message::Reply(_) => panic!("client sent a reply"),
        }
    }

    fn arg_of(record: &Bytes) -> u32 {
        // The argument is the last word of the record.
        let n = record.len();
        u32::from_be_bytes(record[n - 4..].try_into().unwrap())
    }

    fn connected(hard: bool, now: Instant) -> RpcCore {
        let mut c = RpcCore::new(config(hard), now);
        c.on_connecting();
        c.on_connected(now);
        c
    }

    fn drain(c: &mut RpcCore, now: Instant) -> Vec<Bytes> {
        std::iter::from_fn(|| c.poll_transmit(now)).map(|r| r.to_bytes()).collect()
    }

    fn events(c: &mut RpcCore) -> Vec<Event> {
        std::iter::from_fn(|| c.poll_event()).collect()
    }

    #[test]
    fn reply_completes_the_matching_call() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let a = c.submit(t0, call(1));
        let b = c.submit(t0, call(2));
        let sent = drain(&mut c, t0);
        assert_eq!(sent.len(), 2);
        // Answer the second first.
        c.handle_record(t0, test_reply(xid_of(&sent[1]), &22u32));
        c.handle_record(t0, test_reply(xid_of(&sent[0]), &11u32));
        assert_eq!(
            events(&mut c),
            vec![
                Event::Completed(b, Ok(Bytes::from_static(&[0, 0, 0, 22]))),
                Event::Completed(a, Ok(Bytes::from_static(&[0, 0, 0, 11]))),
            ]
        );
        // A duplicate reply is dropped.
        c.handle_record(t0, test_reply(xid_of(&sent[1]), &22u32));
        assert!(events(&mut c).is_empty());
        assert_eq!(c.stats().replies_unmatched, 1);
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn slot_table_bounds_calls_in_flight() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let tokens: Vec<Token> = (0..10).map(|i| c.submit(t0, call(i))).collect();
        let sent = drain(&mut c, t0);
        assert_eq!(sent.len(), 4, "only slots_max calls go on the wire");
        assert_eq!(c.stats().in_flight_max, 4);
        assert_eq!((c.in_flight(), c.queued()), (4, 6));
        c.handle_record(t0, test_reply(xid_of(&sent[2]), &()));
        let more = drain(&mut c, t0);
        assert_eq!(more.len(), 1, "one slot freed, one queued call sent");
        assert_eq!(arg_of(&more[0]), 4, "queued calls go in submission order");
        assert_eq!(events(&mut c), vec![Event::Completed(tokens[2], Ok(Bytes::new()))]);
    }

    #[test]
    fn soft_call_times_out_after_the_major_window_with_linear_retries() {
        let t0 = Instant::now();
        let mut c = connected(false, t0);
        let tok = c.submit(t0, call(7));
        let first = drain(&mut c, t0);
        assert_eq!(first.len(), 1);
        // First minor timeout: timeo.
        assert_eq!(c.poll_timeout(), Some(t0 + T));
        c.handle_timeout(t0 + T - Duration::from_millis(1));
        assert!(drain(&mut c, t0 + T).is_empty());
        c.handle_timeout(t0 + T);
        let again = drain(&mut c, t0 + T);
        assert_eq!(again, first, "retransmitted with the same xid");
        // The second minor timeout would be 2T later (t0+3T), which is
        // also the end of the major window timeo*(retrans+1) = 3T.
        assert_eq!(c.poll_timeout(), Some(t0 + 3 * T));
        c.handle_timeout(t0 + 3 * T);
        assert_eq!(events(&mut c), vec![Event::Completed(tok, Err(NfsError::TimedOut))]);
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.stats().retransmissions, 1);
        // A late reply is dropped, not matched to anything.
        c.handle_record(t0 + 4 * T, test_reply(xid_of(&first[0]), &()));
        assert!(events(&mut c).is_empty());
    }

    #[test]
    fn minor_timeouts_grow_linearly() {
        let t0 = Instant::now();
        let mut cfg = config(false);
        cfg.retrans = 5; // window 6T: retransmits at T and 3T, then 6T is major
        let mut c = RpcCore::new(cfg, t0);
        c.on_connecting();
        c.on_connected(t0);
        c.submit(t0, call(1));
        drain(&mut c, t0);
        let mut sends = vec![];
        let mut now = t0;
        while let Some(at) = c.poll_timeout() {
            now = at;
            c.handle_timeout(now);
            if !drain(&mut c, now).is_empty() {
                sends.push(now - t0);
            }
        }
        assert_eq!(sends, vec![T, 3 * T]);
        assert_eq!(now - t0, 6 * T);
    }

    #[test]
    fn over_udp_minor_timeouts_double() {
        let t0 = Instant::now();
        let mut cfg = config(false);
        cfg.backoff_doubles = true;
        cfg.retrans = 7; // window 8T: retransmits at T, 3T (T+2T), 7T (3T+4T), then 8T is major
        let mut c = RpcCore::new(cfg, t0);
        c.on_connecting();
        c.on_connected(t0);
        c.submit(t0, call(1));
        drain(&mut c, t0);
        let mut sends = vec![];
        let mut now = t0;
        while let Some(at) = c.poll_timeout() {
            now = at;
            c.handle_timeout(now);
            if !drain(&mut c, now).is_empty() {
                sends.push(now - t0);
            }
        }
        assert_eq!(sends, vec![T, 3 * T, 7 * T]);
        assert_eq!(now - t0, 8 * T);
    }

    #[test]
    fn hard_call_keeps_trying_and_reports_not_responding_once() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let a = c.submit(t0, call(1));
        let b = c.submit(t0, call(2));
        let sent = drain(&mut c, t0);
        let mut now = t0;
        let mut sends = 0;
        // Ten major windows of silence.
        while now < t0 + 30 * T {
            now = c.poll_timeout().unwrap();
            c.handle_timeout(now);
            sends += drain(&mut c, now).len();
        }
        assert!(sends >= 20, "still retransmitting: {sends}");
        assert_eq!(events(&mut c), vec![Event::NotResponding]);
        c.handle_record(now, test_reply(xid_of(&sent[0]), &()));
        c.handle_record(now, test_reply(xid_of(&sent[1]), &()));
        assert_eq!(
            events(&mut c),
            vec![
                Event::ServerOk,
                Event::Completed(a, Ok(Bytes::new())),
                Event::Completed(b, Ok(Bytes::new()))
            ]
        );
    }

    #[test]
    fn disconnect_resends_everything_after_reconnect() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let toks: Vec<Token> = (0..3).map(|i| c.submit(t0, call(i))).collect();
        let sent = drain(&mut c, t0);
        c.on_disconnect(t0);
        assert!(c.poll_transmit(t0).is_none(), "nothing sent while disconnected");
        // Nothing was answered on that connection: back off before retrying.
        assert!(!c.wants_connect(t0 + Duration::from_millis(99)));
        assert!(c.wants_connect(t0 + Duration::from_millis(100)));
        c.on_connecting();
        c.on_connect_failed(t0 + Duration::from_millis(100), "refused");
        assert!(events(&mut c).is_empty(), "hard calls survive a failed reconnect");
        assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_millis(300)), "backoff doubles");
        let t1 = t0 + Duration::from_millis(300);
        c.on_connecting();
        c.on_connected(t1);
        let resent = drain(&mut c, t1);
        assert_eq!(resent, sent, "same records, same xids, same order");
        for r in resent.iter().rev() {
            c.handle_record(t1, test_reply(xid_of(r), &()));
        }
        let done: Vec<Token> = events(&mut c)
            .into_iter()
            .map(|e| match e {
                Event::Completed(t, Ok(_)) => t,
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(done, toks.into_iter().rev().collect::<Vec<_>>());
        assert_eq!(c.stats().resent_after_reconnect, 3);
        // This connection worked, so losing it reconnects at once.
        c.submit(t1, call(9));
        drain(&mut c, t1);
        c.on_disconnect(t1);
        assert!(c.wants_connect(t1));
    }

    #[test]
    fn backoff_is_capped_and_resets_when_the_server_answers() {
        let t0 = Instant::now();
        let mut cfg = config(true);
        cfg.fail_fast_until_connected = false;
        let mut c = RpcCore::new(cfg, t0);
        let tok = c.submit(t0, call(1));
        let mut now = t0;
        let mut delays = vec![];
        let mut last_attempt = t0;
        while delays.len() < 10 {
            now = c.poll_timeout().unwrap();
            if c.wants_connect(now) {
                delays.push(now - last_attempt);
                last_attempt = now;
                c.on_connecting();
                c.on_connect_failed(now, "refused");
            }
            c.handle_timeout(now); // the hard call's major timeouts
        }
        assert_eq!(delays[0], Duration::ZERO, "the first connect is immediate");
        assert_eq!(delays[1], Duration::from_millis(100));
        assert_eq!(delays[2], Duration::from_millis(200));
        assert_eq!(*delays.last().unwrap(), Duration::from_secs(2), "capped");
        // The server answers: the next failure starts from 100 ms again.
        c.on_connecting();
        c.on_connected(now);
        let rec = drain(&mut c, now);
        c.handle_record(now, test_reply(xid_of(&rec[0]), &()));
        assert_eq!(
            events(&mut c),
            vec![Event::NotResponding, Event::ServerOk, Event::Completed(tok, Ok(Bytes::new()))]
        );
        c.submit(now, call(2));
        c.on_disconnect(now);
        c.on_connecting();
        c.on_connect_failed(now, "refused");
        assert_eq!(c.poll_timeout(), Some(now + Duration::from_millis(100)));
    }

    #[test]
    fn fail_fast_before_the_first_connection_only() {
        let t0 = Instant::now();
        let mut c = RpcCore::new(config(true), t0);
        let a = c.submit(t0, call(1));
        assert!(c.wants_connect(t0));
        c.on_connecting();
        c.on_connect_failed(t0, "connection refused by 10.0.0.1:2049");
        assert_eq!(
            events(&mut c),
            vec![Event::Completed(
                a,
                Err(NfsError::Connection("connection refused by 10.0.0.1:2049".into()))
            )]
        );
        assert!(!c.wants_connect(t0 + Duration::from_secs(60)), "no work, no reconnect");
        // Once connected, a hard mount's calls outlive failed reconnects.
        let t1 = t0 + Duration::from_secs(1);
        let b = c.submit(t1, call(2));
        c.on_connecting();
        c.on_connected(t1);
        drain(&mut c, t1);
        c.on_disconnect(t1);
        c.on_connecting();
        c.on_connect_failed(t1, "refused");
        assert!(events(&mut c).is_empty());
        assert_eq!(c.in_flight(), 1);
        let _ = b;
    }

    #[test]
    fn soft_calls_time_out_while_disconnected() {
        let t0 = Instant::now();
        let mut c = connected(false, t0);
        let a = c.submit(t0, call(1));
        drain(&mut c, t0);
        c.on_disconnect(t0);
        let mut now = t0;
        while let Some(at) = c.poll_timeout() {
            now = at;
            if c.wants_connect(now) {
                c.on_connecting();
                c.on_connect_failed(now, "refused");
            }
            c.handle_timeout(now);
            if c.in_flight() == 0 {
                break;
            }
        }
        assert_eq!(now - t0, 3 * T);
        assert_eq!(events(&mut c), vec![Event::Completed(a, Err(NfsError::TimedOut))]);
    }

    #[test]
    fn rpc_refusals_become_clear_errors() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let cases: Vec<(ReplyHeader, &str)> = vec![
            (ReplyHeader::accepted_error(0, AcceptStat::ProgUnavail), "PROG_UNAVAIL"),
            (ReplyHeader::accepted_error(0, AcceptStat::ProgMismatch { low: 2, high: 2 }), "versions 2 to 2"),
            (ReplyHeader::accepted_error(0, AcceptStat::ProcUnavail), "PROC_UNAVAIL"),
            (ReplyHeader::accepted_error(0, AcceptStat::GarbageArgs), "GARBAGE_ARGS"),
            (ReplyHeader::denied(0, RejectedReply::AuthError(AuthStat::TooWeak)), "privileged source port"),
            (ReplyHeader::denied(0, RejectedReply::RpcMismatch { low: 3, high: 4 }), "RPC_MISMATCH"),
        ];
        for (mut header, want) in cases {
            c.submit(t0, call(0));
            let sent = drain(&mut c, t0);
            header.xid = xid_of(&sent[0]);
            c.handle_record(t0, Bytes::from(eagernfs_xdr::to_vec(&header)));
            match events(&mut c).as_slice() {
                [Event::Completed(_, Err(NfsError::Rpc(msg)))] => {
                    assert!(msg.contains(want), "{msg:?} lacks {want:?}");
                    assert!(msg.contains("NFS"), "{msg}");
                }
                e => panic!("{e:?}"),
            }
        }
    }

    #[test]
    fn broken_reply_to_a_known_xid_fails_that_call() {
        let t0 = Instant::now();
        let mut c = connected(true, t0);
        let a = c.submit(t0, call(0));
        let xid = xid_of(&drain(&mut c, t0)[0]);
        let mut rec = xid.to_be_bytes().to_vec();
        rec.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 9]); // reply, reply_stat 9
        c.handle_record(t0, Bytes::from(rec));
        match events(&mut c).as_slice() {
            [Event::Completed(t, Err(NfsError::BadReply(_)))] => assert_eq!(*t, a),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn xids_skip_those_in_use() {
        let t0 = Instant::now();
        let mut cfg = config(true);
        cfg.first_xid = u32::MAX - 1;
        let mut c = RpcCore::new(cfg, t0);
        c.on_connecting();
        c.on_connected(t0);
        for i in 0..4 {
            c.submit(t0, call(i));
        }
        let xids: Vec<u32> = drain(&mut c, t0).iter().map(xid_of).collect();
        assert_eq!(xids, vec![u32::MAX - 1, u32::MAX, 0, 1]);
        let mut c2 = c;
        c2.next_xid = u32::MAX; // wrap onto xids still in flight
        c2.handle_record(t0, test_reply(0, &()));
        c2.submit(t0, call(9));
        assert_eq!(xid_of(&drain(&mut c2, t0)[0]), 0, "skips MAX and the wrap to 0 is free again");
    }

    /// Deterministic simulation: a lossy, duplicating, reordering server
    /// link with disconnects. Every call must complete exactly once, with
    /// its own answer (the server echoes the argument times two), on a hard
    /// mount; a soft mount may fail calls only with TimedOut.
    fn simulate(seed: u64, hard: bool) {
        let mut rng = StdRng::seed_from_u64(seed);
        let t0 = Instant::now();
        let mut cfg = config(hard);
        cfg.retrans = 3;
        cfg.fail_fast_until_connected = false;
        let mut c = RpcCore::new(cfg, t0);
        let mut now = t0;
        let mut want: HashMap<Token, u32> = HashMap::new();
        let mut done: HashMap<Token, Result<Bytes, NfsError>> = HashMap::new();
        // Replies in flight from the server: (deliver_at, record).
        let mut wire: Vec<(Instant, Bytes)> = Vec::new();
        let total = 200u32;
        let mut submitted = 0u32;
        for _step in 0..200_000 {
            if done.len() == total as usize {
                break;
            }
            if submitted < total && rng.gen_bool(0.3) {
                want.insert(c.submit(now, call(submitted)), submitted);
                submitted += 1;
            }
            if c.wants_connect(now) {
                c.on_connecting();
                if rng.gen_bool(0.7) {
                    c.on_connected(now);
                } else {
                    c.on_connect_failed(now, "refused");
                }
            }
            while let Some(rec) = c.poll_transmit(now).map(|r| r.to_bytes()) {
                if rng.gen_bool(0.2) {
                    continue; // lost
                }
                let xid = xid_of(&rec);
                let reply = test_reply(xid, &(arg_of(&rec) * 2));
                let copies = if rng.gen_bool(0.1) { 2 } else { 1 };
                for _ in 0..copies {
                    let delay = Duration::from_millis(rng.gen_range(0..1500));
                    wire.push((now + delay, reply.clone()));
                }
            }
            if c.is_connected() && rng.gen_bool(0.002) {
                c.on_disconnect(now);
                wire.clear(); // replies on the old connection are gone
            }
            if rng.gen_bool(0.05) {
                // Garbage from the server never panics and is dropped.
                let len = rng.gen_range(0..40);
                let junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                c.handle_record(now, Bytes::from(junk));
            }
            // Advance time to the next thing that happens.
            let next_wire = wire.iter().map(|(at, _)| *at).min();
            let next = [c.poll_timeout(), next_wire, Some(now + Duration::from_millis(50))]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            now = next.max(now);
            let (due, later): (Vec<_>, Vec<_>) = wire.drain(..).partition(|(at, _)| *at <= now);
            wire = later;
            for (_, r) in due {
                c.handle_record(now, r);
            }
            c.handle_timeout(now);
            while let Some(e) = c.poll_event() {
                if let Event::Completed(t, r) = e {
                    assert!(done.insert(t, r).is_none(), "call completed twice (seed {seed})");
                }
            }
        }
        assert_eq!(done.len(), total as usize, "every call completes (seed {seed})");
        for (t, r) in done {
            match r {
                Ok(b) => assert_eq!(&b[..], &(want[&t] * 2).to_be_bytes(), "seed {seed}"),
                Err(NfsError::TimedOut) if !hard => {}
                Err(e) => panic!("unexpected error {e:?} (seed {seed}, hard {hard})"),
            }
        }
        assert!(c.in_flight() == 0 && c.queued() == 0);
    }

    #[test]
    fn simulated_lossy_link_hard() {
        for seed in 0..20 {
            simulate(seed, true);
        }
    }

    #[test]
    fn simulated_lossy_link_soft() {
        for seed in 100..120 {
            simulate(seed, false);
        }
    }

    proptest::proptest! {
        #[test]
        fn garbage_records_never_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                       prefix_xid in proptest::prelude::any::<bool>()) {
            let t0 = Instant::now();
            let mut c = connected(true, t0);
            c.submit(t0, call(0));
            let xid = xid_of(&drain(&mut c, t0)[0]);
            let mut rec = if prefix_xid { xid.to_be_bytes().to_vec() } else { vec![] };
            rec.extend_from_slice(&data);
            c.handle_record(t0, Bytes::from(rec));
            while c.poll_event().is_some() {}
        }
    }

    #[test]
    fn a_call_with_an_opaque_tail_is_the_same_record_without_copying_the_payload() {
        use eagernfs_proto::nfs3::{
            NfsFh3, StableHow, Write3Args, Write3ArgsHead, NFSPROC3_WRITE, NFS_PROGRAM, NFS_V3,
        };
        let cred = OpaqueAuth::none();
        for n in [0usize, 1, 2, 3, 4, 5, 65_537] {
            let args = Write3Args {
                file: NfsFh3 { data: eagernfs_xdr::Opaque::from_static(b"fh") },
                offset: 9,
                count: n as u32,
                stable: StableHow::Unstable,
                data: Bytes::from(vec![7u8; n]),
            };
            let whole = Call::new(NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE, &cred, &args, n);
            let split = Call::with_opaque_tail(
                NFS_PROGRAM,
                NFS_V3,
                NFSPROC3_WRITE,
                &cred,
                &Write3ArgsHead(&args),
                args.data.clone(),
            );
            assert_eq!(split.len(), whole.len(), "{n} bytes");
            let t0 = Instant::now();
            let mut c = connected(true, t0);
            c.submit(t0, whole);
            c.submit(t0, split);
            let a = c.poll_transmit(t0).unwrap();
            let b = c.poll_transmit(t0).unwrap();
            // Same bytes apart from the xid; the payload is the caller's buffer.
            let mut a = a.to_bytes().to_vec();
            let b_bytes = b.to_bytes().to_vec();
            assert_eq!(a.len(), b_bytes.len());
            a[XID_OFFSET..XID_OFFSET + 4].copy_from_slice(&b_bytes[XID_OFFSET..XID_OFFSET + 4]);
            assert_eq!(a, b_bytes, "{n} bytes");
            if n > 0 {
                assert_eq!(b.tail[0].as_ptr(), args.data.as_ptr(), "payload copied");
            }
            // The frame decodes as one record.
            let mut dec = RecordDecoder::new(1 << 20);
            let mut src = BytesMut::from(&b_bytes[..]);
            assert_eq!(dec.decode(&mut src).unwrap().unwrap().len(), b_bytes.len() - 4);
        }
    }

    #[test]
    fn calls_from_the_server_are_reported_and_their_replies_go_out_first() {
        use eagernfs_rpc::CallHeader;
        let t0 = Instant::now();
        let callback = |xid: u32| {
            let h = CallHeader {
                xid,
                rpcvers: 2,
                prog: 0x4000_0000,
                vers: 1,
                proc_: 0,
                cred: OpaqueAuth::none(),
                verf: OpaqueAuth::none(),
            };
            Bytes::from(eagernfs_xdr::to_vec(&h))
        };
        // Without accept_calls a call is garbage, as before.
        let mut c = connected(true, t0);
        c.handle_record(t0, callback(7));
        assert!(c.poll_event().is_none());
        assert_eq!((c.stats().records_garbage, c.stats().calls_received), (1, 0));
        // With it, the call is reported whole.
        let mut cfg = config(true);
        cfg.accept_calls = true;
        let mut c = RpcCore::new(cfg, t0);
        c.on_connecting();
        c.on_connected(t0);
        let a = c.submit(t0, call(1));
        c.handle_record(t0, callback(7));
        assert_eq!(c.poll_event(), Some(Event::Call(callback(7))));
        assert_eq!(c.stats().calls_received, 1);
        // A reply queued now leaves before the call waiting for transmission.
        let reply = Record { head: Bytes::from_static(b"reply"), tail: Arc::from(Vec::new()) };
        c.queue_reply(reply.clone());
        assert_eq!(c.poll_transmit(t0), Some(reply.clone()));
        let sent = c.poll_transmit(t0).expect("the call");
        c.handle_record(t0, test_reply(xid_of(&sent.to_bytes()), &()));
        assert_eq!(events(&mut c), vec![Event::Completed(a, Ok(Bytes::new()))]);
        // One queued while the connection breaks is dropped with it.
        c.queue_reply(reply);
        c.on_disconnect(t0);
        c.on_connecting();
        c.on_connected(t0);
        assert_eq!(c.poll_transmit(t0), None);
    }
}
