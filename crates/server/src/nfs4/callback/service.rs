//! The callback thread: CB_NULL probes, CB_RECALLs and CB_GETATTRs over the back channels sessions bound,
//! sent and matched to their answers on one thread that waits for no client.

use super::super::session::Session;
use super::{BackChannel, CbSec, Probe, PATH_DOWN, PATH_UP};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, CallHeader, OpaqueAuth, ReplyBody, ReplyHeader};
use eagernfs_xdr::{Decode, Encode, Opaque};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// A callback to send.
enum Job {
    Probe(Arc<Session>),
    Recall { session: Arc<Session>, stateid: Stateid4, fh: NfsFh4 },
    Getattr { session: Arc<Session>, fh: NfsFh4, mask: Bitmap4, probe: Arc<Probe> },
}

/// What the callback thread is told.
enum Event {
    Job(Job),
    /// A reply to call `xid` arrived.
    Reply(ReplyHeader, Bytes),
}

/// Most callbacks waiting to be sent (more are dropped: a recall not sent is revoked later).
const QUEUE: usize = 4096;
/// How long a client has to answer a callback.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// Most callbacks sent and not answered at once (more wait in the queue).
const IN_FLIGHT_MAX: usize = 1024;

/// The back channel service.
pub(crate) struct Callbacks {
    channel: Arc<OnceLock<Weak<dyn BackChannel>>>,
    events: Mutex<Option<SyncSender<Event>>>,
    stats: Arc<crate::Stats>,
}

impl Callbacks {
    pub(crate) fn new(stats: Arc<crate::Stats>) -> Callbacks {
        Callbacks { channel: Arc::new(OnceLock::new()), events: Mutex::new(None), stats }
    }

    /// Connect to the service threads (once they run).
    pub(crate) fn attach(&self, channel: Weak<dyn BackChannel>) {
        let _ = self.channel.set(channel);
    }

    fn channel(&self) -> Option<Arc<dyn BackChannel>> {
        self.channel.get().and_then(Weak::upgrade)
    }

    /// Whether connection `conn` is still open (true when not known).
    pub(crate) fn conn_alive(&self, conn: u64) -> bool {
        self.channel().is_none_or(|ch| ch.alive(conn))
    }

    /// A reply to one of our calls arrived.
    pub(crate) fn reply_arrived(&self, header: ReplyHeader, body: Bytes) {
        if let Some(tx) = self.events.lock().as_ref() {
            let _ = tx.try_send(Event::Reply(header, body));
        }
    }

    /// Whether `session`'s back channel works (as far as we know).
    pub(crate) fn path_up(&self, session: &Session) -> bool {
        let b = session.back.inner.lock();
        if matches!(b.sec, CbSec::Unusable) {
            return false;
        }
        let Some(ch) = self.channel() else { return false };
        if !b.conns.iter().any(|c| ch.alive(*c)) {
            return false;
        }
        session.back.path.load(Ordering::Relaxed) != PATH_DOWN
    }

    /// Check a back channel with CB_NULL, in the background.
    pub(crate) fn probe(&self, session: &Arc<Session>) {
        if session.back.inner.lock().conns.is_empty() {
            return;
        }
        self.submit(Job::Probe(session.clone()));
    }

    /// Ask the client holding a delegation to return it, in the background.
    pub(crate) fn recall(&self, session: Arc<Session>, stateid: Stateid4, fh: NfsFh4) {
        self.submit(Job::Recall { session, stateid, fh });
    }

    /// Ask the client holding a write delegation of `fh` for the attributes in `mask`
    /// (CB_GETATTR), in the background: the answer goes to `probe`.
    pub(crate) fn getattr(&self, session: Arc<Session>, fh: NfsFh4, mask: Bitmap4, probe: Arc<Probe>) {
        self.submit(Job::Getattr { session, fh, mask, probe });
    }

    fn submit(&self, job: Job) {
        let mut events = self.events.lock();
        if events.is_none() {
            let (tx, rx) = sync_channel::<Event>(QUEUE);
            let worker = Worker {
                channel: self.channel.clone(),
                xid: rand::random(),
                stats: self.stats.clone(),
                pending: HashMap::new(),
                queued: std::collections::VecDeque::new(),
            };
            match std::thread::Builder::new().name("nfs4-callback".into()).spawn(move || worker.run(rx)) {
                Ok(_) => *events = Some(tx),
                Err(e) => {
                    tracing::warn!("no thread for NFSv4 callbacks ({e}); delegations will be revoked instead of recalled");
                    return;
                }
            }
        }
        if let Some(tx) = events.as_ref() {
            if let Err(TrySendError::Full(Event::Job(job))) = tx.try_send(Event::Job(job)) {
                tracing::debug!("NFSv4 callback queue full: a callback was dropped");
                if let Job::Getattr { probe, .. } = job {
                    probe.finish(None);
                }
            }
        }
    }
}

/// What a call sent was.
enum Sent {
    /// CB_NULL.
    Probe,
    Recall,
    /// CB_GETATTR, whose answer goes here.
    Getattr(Arc<Probe>),
}

/// A call sent and not answered yet.
struct Pending {
    session: Arc<Session>,
    sent: Sent,
    deadline: Instant,
}

/// The callback thread: sends calls as they come and matches answers by
/// xid, so a client that never answers holds up no other client's callbacks.
struct Worker {
    channel: Arc<OnceLock<Weak<dyn BackChannel>>>,
    xid: u32,
    stats: Arc<crate::Stats>,
    pending: HashMap<u32, Pending>,
    /// Jobs waiting for room in `pending`.
    queued: std::collections::VecDeque<Job>,
}

impl Worker {
    fn run(mut self, rx: Receiver<Event>) {
        loop {
            let wait = self
                .pending
                .values()
                .map(|p| p.deadline)
                .min()
                .map(|d| d.saturating_duration_since(Instant::now()));
            let event = match wait {
                Some(w) => match rx.recv_timeout(w) {
                    Ok(e) => Some(e),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
                None => match rx.recv() {
                    Ok(e) => Some(e),
                    Err(_) => return,
                },
            };
            match event {
                Some(Event::Job(job)) => self.queued.push_back(job),
                Some(Event::Reply(header, body)) => {
                    if let Some(p) = self.pending.remove(&header.xid) {
                        let results = match header.body {
                            ReplyBody::Accepted { stat: AcceptStat::Success, .. } => Some(body),
                            _ => None,
                        };
                        self.answered(p, results);
                    }
                }
                None => {}
            }
            let now = Instant::now();
            let late: Vec<u32> =
                self.pending.iter().filter(|(_, p)| p.deadline <= now).map(|(x, _)| *x).collect();
            for x in late {
                if let Some(p) = self.pending.remove(&x) {
                    self.answered(p, None);
                }
            }
            while self.pending.len() < IN_FLIGHT_MAX {
                let Some(job) = self.queued.pop_front() else { break };
                self.send(job);
            }
        }
    }

    /// The outcome of a call (`None`: no answer in time, or an RPC error).
    fn answered(&self, p: Pending, results: Option<Bytes>) {
        match &p.sent {
            Sent::Probe => {
                let ok = results.is_some();
                p.session.back.path.store(if ok { PATH_UP } else { PATH_DOWN }, Ordering::Relaxed);
                tracing::debug!(up = ok, "NFSv4 back channel probed");
                return;
            }
            Sent::Getattr(probe) => {
                let Some(mut body) = results else {
                    p.session.back.path.store(PATH_DOWN, Ordering::Relaxed);
                    probe.finish(None);
                    return;
                };
                p.session.back.path.store(PATH_UP, Ordering::Relaxed);
                let attrs = match CbGetattrCompound4Res::decode(&mut body) {
                    Ok(CbGetattrCompound4Res { status: Nfsstat4::Ok, getattr: Some(Res4::Ok(f)) }) => {
                        FileAttrs::from_fattr(&f).ok()
                    }
                    other => {
                        tracing::info!(?other, "CB_GETATTR failed: the write delegation is recalled");
                        None
                    }
                };
                probe.finish(attrs);
                return;
            }
            Sent::Recall => {}
        }
        let status = results.and_then(|mut b| CbCompound4Res::decode(&mut b).ok()).map(|r| r.status);
        match status {
            Some(Nfsstat4::Ok) => {
                self.stats.lock_callbacks_delivered.fetch_add(1, Ordering::Relaxed);
                p.session.back.path.store(PATH_UP, Ordering::Relaxed);
            }
            other => {
                self.stats.lock_callbacks_failed.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    ?other,
                    "CB_RECALL not accepted; sent again if the client binds a new back channel, revoked if not returned within a lease"
                );
                if other.is_none() {
                    p.session.back.path.store(PATH_DOWN, Ordering::Relaxed);
                }
            }
        }
    }

    fn send(&mut self, job: Job) {
        /// The CB_SEQUENCE of the next callback on the back channel's one slot.
        fn sequence(session: &Session) -> CbSequence4Args {
            let mut b = session.back.inner.lock();
            b.seqid = b.seqid.wrapping_add(1);
            CbSequence4Args {
                sessionid: session.id,
                sequenceid: b.seqid,
                slotid: 0,
                highest_slotid: 0,
                cachethis: false,
                referring_call_lists: Vec::new(),
            }
        }
        let (session, what, proc_, args) = match job {
            Job::Probe(s) => (s, Sent::Probe, CB_NULL, Bytes::new()),
            Job::Recall { session, stateid, fh } => {
                let args = CbCompound4Args {
                    tag: Opaque::default(),
                    minorversion: session.minor,
                    callback_ident: 0,
                    argarray: vec![
                        CbArgOp::Sequence(sequence(&session)),
                        CbArgOp::Recall(CbRecall4Args { stateid, truncate: false, fh }),
                    ],
                };
                let mut body = BytesMut::new();
                args.encode(&mut body);
                (session, Sent::Recall, CB_COMPOUND, body.freeze())
            }
            Job::Getattr { session, fh, mask, probe } => {
                let args = CbGetattrCompound4Args {
                    tag: Opaque::default(),
                    minorversion: session.minor,
                    callback_ident: 0,
                    sequence: sequence(&session),
                    getattr: CbGetattr4Args { fh, attr_request: mask },
                };
                let mut body = BytesMut::new();
                args.encode(&mut body);
                (session, Sent::Getattr(probe), CB_COMPOUND, body.freeze())
            }
        };
        let sent = self.transmit(&session, proc_, &args);
        match sent {
            Some(xid) => {
                self.pending
                    .insert(xid, Pending { session, sent: what, deadline: Instant::now() + ANSWER_WITHIN });
            }
            None => self.answered(Pending { session, sent: what, deadline: Instant::now() }, None),
        }
    }

    /// Write one call on the session's back channel; its xid, or `None` if there is no connection.
    fn transmit(&mut self, s: &Session, proc_: u32, args: &[u8]) -> Option<u32> {
        let channel = self.channel.get()?.upgrade()?;
        let (program, cred, conns) = {
            let b = s.back.inner.lock();
            if matches!(b.sec, CbSec::Unusable) {
                return None;
            }
            (b.program, b.sec.cred(), b.conns.clone())
        };
        let conn = conns.iter().rev().copied().find(|c| channel.alive(*c))?;
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let header = CallHeader {
            xid,
            rpcvers: eagernfs_rpc::RPC_VERSION,
            prog: program,
            vers: NFS_CB_VERSION,
            proc_,
            cred,
            verf: OpaqueAuth::none(),
        };
        let mut out = BytesMut::with_capacity(128 + args.len());
        let at = begin_record(&mut out);
        header.encode(&mut out);
        out.extend_from_slice(args);
        finish_record(&mut out, at);
        channel.send(conn, out.freeze()).then_some(xid)
    }
}
