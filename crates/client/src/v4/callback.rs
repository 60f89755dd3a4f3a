//! The back channel (RFC 8881 §2.10.3.1, §20): the calls a server makes on
//! the client's own connection — CB_NULL (is the channel up?), CB_COMPOUND
//! with CB_SEQUENCE first, then CB_RECALL (give a delegation back),
//! CB_GETATTR (the size and change attribute of a file written under a
//! write delegation), CB_RECALL_ANY and CB_NOTIFY_LOCK — answered on the
//! connection's task, without waiting for anything.
//!
//! The caching layer plugs in through [`CallbackHooks`] (issue 36's
//! delegation cache: flush, then return). Without hooks, or when a hook
//! declines, a recalled delegation is returned at once (DELEGRETURN, sent
//! from a task of its own), CB_GETATTR says NFS4ERR_BADHANDLE (this client
//! holds no write delegation it writes under), and the rest is
//! acknowledged.
//!
//! CB_SEQUENCE keeps the back channel's slots: a callback the server sends
//! again (same slot and sequence id) gets the answer it got the first time,
//! not a second recall.

use crate::driver::CallHandler;
use bytes::{BufMut, Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::{AcceptStat, Message, ReplyHeader};
use eagernfs_xdr::{Decode, Encode};
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// What the layer above (issue 36's delegation cache) does with callbacks.
/// Called on a connection's task: answer at once, spawn anything slow.
pub trait CallbackHooks: Send + Sync + 'static {
    /// CB_RECALL of delegation `stateid` of `fh`. Return `true` if the
    /// hook gives it back itself (after flushing what it holds under it,
    /// with [`super::Nfs4Client::return_delegation`]); `false` and the
    /// client returns it at once.
    fn recall(&self, fh: &NfsFh4, stateid: &Stateid4, truncate: bool) -> bool {
        let _ = (fh, stateid, truncate);
        false
    }

    /// CB_GETATTR: the attributes named in `mask` (size, change) of a file
    /// this client writes under a write delegation; `None`: not such a file.
    fn getattr(&self, fh: &NfsFh4, mask: &Bitmap4) -> Option<FileAttrs> {
        let _ = (fh, mask);
        None
    }

    /// CB_RECALL_ANY: keep at most `keep` delegations of the kinds in `mask`.
    fn recall_any(&self, keep: u32, mask: &Bitmap4) {
        let _ = (keep, mask);
    }

    /// CB_NOTIFY_LOCK: a lock `owner` waited for on `fh` may be free now.
    fn lock_available(&self, fh: &NfsFh4, owner: &StateOwner4) {
        let _ = (fh, owner);
    }
}

/// What the callback service needs from the session layer above it.
pub(crate) trait Owner: Send + Sync {
    /// The current session and how many back-channel slots it has.
    fn back_session(&self) -> Option<(Sessionid4, u32)>;
    /// The minor version the session speaks.
    fn minor(&self) -> u32;
    /// Give delegation `stateid` of `fh` back (DELEGRETURN, from a task).
    fn return_delegation(&self, fh: NfsFh4, stateid: Stateid4);
    /// The server recalled delegation `stateid`: from now on it promises
    /// nothing (called before the hooks, so no open trusts it meanwhile).
    fn recalled(&self, stateid: &Stateid4) {
        let _ = stateid;
    }
}

/// Counters of the back channel.
#[derive(Debug, Default)]
pub struct CallbackStats {
    /// CB_NULL calls answered.
    pub nulls: AtomicU64,
    /// CB_COMPOUND calls answered (retries included).
    pub compounds: AtomicU64,
    /// CB_COMPOUNDs answered from the slot's kept reply.
    pub replays: AtomicU64,
    /// CB_RECALLs.
    pub recalls: AtomicU64,
    /// CB_GETATTRs.
    pub getattrs: AtomicU64,
    /// Calls refused (wrong program or version, undecodable, bad session or slot).
    pub refused: AtomicU64,
}

/// One back-channel slot: the last sequence id and the answer it got.
#[derive(Debug, Clone, Default)]
struct BackSlot {
    seq: u32,
    /// The CB_COMPOUND results (after the RPC header) last sent.
    reply: Option<Bytes>,
}

/// The back channel's slots, for one session.
#[derive(Debug, Default)]
struct BackSlots {
    session: Sessionid4,
    slots: Vec<BackSlot>,
}

/// Answers the server's calls (see the module docs).
pub(crate) struct CallbackService {
    /// The callback program number this client asked for in CREATE_SESSION.
    program: u32,
    owner: OnceLock<Weak<dyn Owner>>,
    hooks: RwLock<Option<Arc<dyn CallbackHooks>>>,
    slots: Mutex<BackSlots>,
    pub(crate) stats: CallbackStats,
}

impl std::fmt::Debug for CallbackService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackService").field("program", &self.program).finish()
    }
}

/// A CB_COMPOUND result, CB_GETATTR's included.
enum CbRes {
    Std(CbResOp),
    Getattr(Res4<Fattr4>),
}

impl CbRes {
    fn status(&self) -> Nfsstat4 {
        match self {
            CbRes::Std(r) => r.status(),
            CbRes::Getattr(r) => r.status(),
        }
    }
}

impl Encode for CbRes {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            CbRes::Std(r) => r.encode(buf),
            CbRes::Getattr(r) => {
                OP_CB_GETATTR.encode(buf);
                r.encode(buf)
            }
        }
    }
}

/// One callback operation, CB_GETATTR's included.
enum CbOp {
    Std(CbArgOp),
    Getattr(CbGetattr4Args),
}

/// Decode one operation from the front of `buf`.
fn decode_op(buf: &mut Bytes) -> eagernfs_xdr::Result<CbOp> {
    if buf.len() >= 4 && buf[..4] == OP_CB_GETATTR.to_be_bytes() {
        let _ = u32::decode(buf)?;
        return Ok(CbOp::Getattr(CbGetattr4Args::decode(buf)?));
    }
    Ok(CbOp::Std(CbArgOp::decode(buf)?))
}

/// The highest callback operation number NFSv4.1 defines (CB_NOTIFY_DEVICEID).
const OP_CB_LAST: u32 = 14;

impl CallbackService {
    pub(crate) fn new(program: u32) -> CallbackService {
        CallbackService {
            program,
            owner: OnceLock::new(),
            hooks: RwLock::new(None),
            slots: Mutex::new(BackSlots::default()),
            stats: CallbackStats::default(),
        }
    }

    /// Tie the service to its session layer (once).
    pub(crate) fn set_owner(&self, owner: Weak<dyn Owner>) {
        let _ = self.owner.set(owner);
    }

    /// Give delegation `stateid` of `fh` back on this client's own
    /// initiative (past the limit of delegations held), as a recall is:
    /// through the hooks, which write back what they hold under it first,
    /// else at once.
    pub(crate) fn give_back(&self, fh: NfsFh4, stateid: Stateid4) {
        let Some(owner) = self.owner.get().and_then(Weak::upgrade) else { return };
        owner.recalled(&stateid);
        let hooks = self.hooks.read().clone();
        if !hooks.is_some_and(|h| h.recall(&fh, &stateid, false)) {
            owner.return_delegation(fh, stateid);
        }
    }

    pub(crate) fn set_hooks(&self, hooks: Option<Arc<dyn CallbackHooks>>) {
        *self.hooks.write() = hooks;
    }

    fn owner(&self) -> Option<Arc<dyn Owner>> {
        self.owner.get()?.upgrade()
    }

    /// The reply message to the call message `record`.
    pub(crate) fn answer(&self, record: Bytes) -> Option<Bytes> {
        let mut body = record;
        let Ok(Message::Call(h)) = Message::decode(&mut body) else { return None };
        let refuse = |stat| {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            Some(Bytes::from(eagernfs_xdr::to_vec(&ReplyHeader::accepted_error(h.xid, stat))))
        };
        if h.prog != self.program {
            return refuse(AcceptStat::ProgUnavail);
        }
        if h.vers != NFS_CB_VERSION {
            return refuse(AcceptStat::ProgMismatch { low: NFS_CB_VERSION, high: NFS_CB_VERSION });
        }
        let results = match h.proc_ {
            CB_NULL => {
                self.stats.nulls.fetch_add(1, Ordering::Relaxed);
                Bytes::new()
            }
            CB_COMPOUND => match self.compound(body) {
                Some(r) => r,
                None => return refuse(AcceptStat::GarbageArgs),
            },
            _ => return refuse(AcceptStat::ProcUnavail),
        };
        let mut out = BytesMut::with_capacity(24 + results.len());
        ReplyHeader::success(h.xid).encode(&mut out);
        out.extend_from_slice(&results);
        Some(out.freeze())
    }

    /// Run a CB_COMPOUND: its encoded results, or `None` if its arguments
    /// do not decode (GARBAGE_ARGS).
    fn compound(&self, mut body: Bytes) -> Option<Bytes> {
        self.stats.compounds.fetch_add(1, Ordering::Relaxed);
        let tag = Utf8Str::decode(&mut body).ok()?;
        let minor = u32::decode(&mut body).ok()?;
        let _callback_ident = u32::decode(&mut body).ok()?;
        let count = u32::decode(&mut body).ok()? as usize;
        let owner = self.owner();
        let mut results: Vec<CbRes> = Vec::new();
        let finish = |results: Vec<CbRes>| {
            let status = results.last().map_or(Nfsstat4::Ok, CbRes::status);
            let mut out = BytesMut::new();
            status.encode(&mut out);
            tag.encode(&mut out);
            (results.len() as u32).encode(&mut out);
            for r in &results {
                r.encode(&mut out);
            }
            out.freeze()
        };
        if owner.as_ref().is_none_or(|o| o.minor() != minor) || minor == 0 {
            let mut out = BytesMut::new();
            Nfsstat4::MinorVersMismatch.encode(&mut out);
            tag.encode(&mut out);
            0u32.encode(&mut out);
            return Some(out.freeze());
        }
        let owner = owner.expect("checked above");
        if count > CB_COMPOUND_OPS_MAX {
            results.push(CbRes::Std(CbResOp::Other(OP_CB_ILLEGAL, Nfsstat4::Resource)));
            return Some(finish(results));
        }
        // The slot whose kept answer this compound's results become.
        let mut slot: Option<(u32, u32)> = None;
        for i in 0..count {
            let op = match decode_op(&mut body) {
                Ok(op) => op,
                Err(_) if i == 0 => return None,
                Err(_) => {
                    results.push(CbRes::Std(CbResOp::Other(OP_CB_ILLEGAL, Nfsstat4::Badxdr)));
                    break;
                }
            };
            let res = match op {
                CbOp::Std(CbArgOp::Sequence(s)) if i == 0 => match self.sequence(&*owner, &s) {
                    Sequenced::New(r) => {
                        slot = Some((s.slotid, s.sequenceid));
                        CbRes::Std(CbResOp::Sequence(Res4::Ok(r)))
                    }
                    Sequenced::Replay(reply) => {
                        self.stats.replays.fetch_add(1, Ordering::Relaxed);
                        return Some(reply);
                    }
                    Sequenced::Err(e) => {
                        self.stats.refused.fetch_add(1, Ordering::Relaxed);
                        CbRes::Std(CbResOp::Sequence(Res4::Err(e)))
                    }
                },
                CbOp::Std(CbArgOp::Sequence(_)) => {
                    CbRes::Std(CbResOp::Sequence(Res4::Err(Nfsstat4::SequencePos)))
                }
                // Everything else needs CB_SEQUENCE first.
                op if i == 0 => {
                    let n = match &op {
                        CbOp::Std(a) => a.opnum(),
                        CbOp::Getattr(_) => OP_CB_GETATTR,
                    };
                    if (OP_CB_GETATTR..=OP_CB_LAST).contains(&n) {
                        CbRes::Std(CbResOp::Other(n, Nfsstat4::OpNotInSession))
                    } else {
                        CbRes::Std(CbResOp::Other(OP_CB_ILLEGAL, Nfsstat4::OpIllegal))
                    }
                }
                CbOp::Std(CbArgOp::Recall(r)) => {
                    self.stats.recalls.fetch_add(1, Ordering::Relaxed);
                    owner.recalled(&r.stateid);
                    let hooks = self.hooks.read().clone();
                    let taken = hooks.is_some_and(|h| h.recall(&r.fh, &r.stateid, r.truncate));
                    if !taken {
                        owner.return_delegation(r.fh.clone(), r.stateid);
                    }
                    CbRes::Std(CbResOp::Recall(Res4::OK))
                }
                CbOp::Getattr(g) => {
                    self.stats.getattrs.fetch_add(1, Ordering::Relaxed);
                    let hooks = self.hooks.read().clone();
                    match hooks.and_then(|h| h.getattr(&g.fh, &g.attr_request)) {
                        Some(attrs) => {
                            CbRes::Getattr(Res4::Ok(keep_only(&attrs, &g.attr_request).to_fattr()))
                        }
                        None => CbRes::Getattr(Res4::Err(Nfsstat4::Badhandle)),
                    }
                }
                CbOp::Std(CbArgOp::RecallAny(a)) => {
                    if let Some(h) = self.hooks.read().clone() {
                        h.recall_any(a.objects_to_keep, &a.type_mask);
                    }
                    CbRes::Std(CbResOp::RecallAny(Res4::OK))
                }
                CbOp::Std(CbArgOp::NotifyLock(n)) => {
                    if let Some(h) = self.hooks.read().clone() {
                        h.lock_available(&n.fh, &n.lock_owner);
                    }
                    CbRes::Std(CbResOp::NotifyLock(Res4::OK))
                }
                CbOp::Std(CbArgOp::Other(n)) if (OP_CB_GETATTR..=OP_CB_LAST).contains(&n) => {
                    CbRes::Std(CbResOp::Other(n, Nfsstat4::Notsupp))
                }
                CbOp::Std(CbArgOp::Other(_)) => {
                    CbRes::Std(CbResOp::Other(OP_CB_ILLEGAL, Nfsstat4::OpIllegal))
                }
            };
            let failed = !res.status().is_ok();
            results.push(res);
            if failed {
                break;
            }
        }
        let reply = finish(results);
        if let Some((slot, seq)) = slot {
            let mut s = self.slots.lock();
            if let Some(b) = s.slots.get_mut(slot as usize) {
                if b.seq == seq {
                    b.reply = Some(reply.clone());
                }
            }
        }
        Some(reply)
    }

    /// CB_SEQUENCE: check the session and slot, and whether this is a retry.
    fn sequence(&self, owner: &dyn Owner, a: &CbSequence4Args) -> Sequenced {
        let Some((session, nslots)) = owner.back_session() else {
            return Sequenced::Err(Nfsstat4::Badsession);
        };
        if a.sessionid != session {
            return Sequenced::Err(Nfsstat4::Badsession);
        }
        let mut s = self.slots.lock();
        if s.session != session || s.slots.len() != nslots as usize {
            s.session = session;
            s.slots = vec![BackSlot::default(); nslots.max(1) as usize];
        }
        let top = s.slots.len() as u32 - 1;
        let Some(slot) = s.slots.get_mut(a.slotid as usize) else { return Sequenced::Err(Nfsstat4::Badslot) };
        if a.sequenceid == slot.seq.wrapping_add(1) {
            *slot = BackSlot { seq: a.sequenceid, reply: None };
            Sequenced::New(CbSequence4ResOk {
                sessionid: a.sessionid,
                sequenceid: a.sequenceid,
                slotid: a.slotid,
                highest_slotid: top,
                target_highest_slotid: top,
            })
        } else if a.sequenceid == slot.seq && slot.seq != 0 {
            match &slot.reply {
                Some(r) => Sequenced::Replay(r.clone()),
                None => Sequenced::Err(Nfsstat4::Delay),
            }
        } else {
            Sequenced::Err(Nfsstat4::SeqMisordered)
        }
    }
}

/// What CB_SEQUENCE decided.
enum Sequenced {
    New(CbSequence4ResOk),
    /// A retry: the kept answer.
    Replay(Bytes),
    Err(Nfsstat4),
}

/// The attributes of `a` that `mask` asks for, of those CB_GETATTR may
/// carry (RFC 8881 §20.1: the change attribute and the size; the times too,
/// for RFC 9754's delegated timestamps).
fn keep_only(a: &FileAttrs, mask: &Bitmap4) -> FileAttrs {
    fn pick<T: Copy>(mask: &Bitmap4, n: u32, v: Option<T>) -> Option<T> {
        v.filter(|_| mask.contains(n))
    }
    FileAttrs {
        change: pick(mask, FATTR4_CHANGE, a.change),
        size: pick(mask, FATTR4_SIZE, a.size),
        time_access: pick(mask, FATTR4_TIME_ACCESS, a.time_access),
        time_modify: pick(mask, FATTR4_TIME_MODIFY, a.time_modify),
        time_metadata: pick(mask, FATTR4_TIME_METADATA, a.time_metadata),
        ..FileAttrs::default()
    }
}

impl CallHandler for CallbackService {
    fn call(&self, _connection: usize, call: Bytes) -> Option<Bytes> {
        self.answer(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_rpc::{CallHeader, OpaqueAuth, ReplyBody};
    use eagernfs_xdr::Opaque;

    /// A session layer that records the delegations it is asked to return.
    #[derive(Default)]
    struct FakeOwner {
        returned: Mutex<Vec<Stateid4>>,
    }

    const SESSION: Sessionid4 = [7; 16];

    impl Owner for FakeOwner {
        fn back_session(&self) -> Option<(Sessionid4, u32)> {
            Some((SESSION, 2))
        }
        fn minor(&self) -> u32 {
            1
        }
        fn return_delegation(&self, _fh: NfsFh4, stateid: Stateid4) {
            self.returned.lock().push(stateid);
        }
    }

    fn service() -> (Arc<CallbackService>, Arc<FakeOwner>) {
        let s = Arc::new(CallbackService::new(NFS4_CALLBACK));
        let o = Arc::new(FakeOwner::default());
        let weak: Weak<dyn Owner> = Arc::downgrade(&(o.clone() as Arc<dyn Owner>));
        s.set_owner(weak);
        (s, o)
    }

    fn call(xid: u32, prog: u32, proc_: u32, args: &[u8]) -> Bytes {
        let h = CallHeader {
            xid,
            rpcvers: 2,
            prog,
            vers: NFS_CB_VERSION,
            proc_,
            cred: OpaqueAuth::none(),
            verf: OpaqueAuth::none(),
        };
        let mut v = eagernfs_xdr::to_vec(&h);
        v.extend_from_slice(args);
        Bytes::from(v)
    }

    fn seq(slot: u32, sequenceid: u32) -> CbArgOp {
        CbArgOp::Sequence(CbSequence4Args {
            sessionid: SESSION,
            sequenceid,
            slotid: slot,
            highest_slotid: 0,
            cachethis: false,
            referring_call_lists: vec![],
        })
    }

    fn compound(ops: Vec<CbArgOp>, getattr: Option<CbGetattr4Args>) -> Vec<u8> {
        let mut out = BytesMut::new();
        Utf8Str::from_static(b"t").encode(&mut out);
        1u32.encode(&mut out);
        0u32.encode(&mut out);
        (ops.len() as u32 + u32::from(getattr.is_some())).encode(&mut out);
        for op in &ops {
            op.encode(&mut out);
        }
        if let Some(g) = getattr {
            OP_CB_GETATTR.encode(&mut out);
            g.encode(&mut out);
        }
        out.to_vec()
    }

    /// The reply's header and the CB_COMPOUND status and result statuses.
    /// A reply's header, and a CB_COMPOUND's status and per-operation statuses.
    type Answered = (ReplyHeader, Option<(Nfsstat4, Vec<(u32, Nfsstat4)>)>);

    fn answer(s: &CallbackService, record: Bytes) -> Answered {
        let mut r = s.answer(record).expect("an answer");
        let Message::Reply(h) = Message::decode(&mut r).unwrap() else { panic!("not a reply") };
        if r.is_empty() {
            return (h, None);
        }
        let status = Nfsstat4::decode(&mut r).unwrap();
        let _tag = Utf8Str::decode(&mut r).unwrap();
        let n = u32::decode(&mut r).unwrap();
        let mut res = Vec::new();
        for _ in 0..n {
            let op = u32::decode(&mut r).unwrap();
            let st = Nfsstat4::decode(&mut r).unwrap();
            if op == OP_CB_SEQUENCE && st.is_ok() {
                let _ = CbSequence4ResOk::decode(&mut r).unwrap();
            }
            if op == OP_CB_GETATTR && st.is_ok() {
                let _ = Fattr4::decode(&mut r).unwrap();
            }
            res.push((op, st));
        }
        (h, Some((status, res)))
    }

    #[test]
    fn cb_null_and_rpc_refusals() {
        let (s, _) = service();
        let (h, body) = answer(&s, call(1, NFS4_CALLBACK, CB_NULL, &[]));
        assert_eq!(h, ReplyHeader::success(1));
        assert!(body.is_none());
        let (h, _) = answer(&s, call(2, 99, CB_NULL, &[]));
        assert!(matches!(h.body, ReplyBody::Accepted { stat: AcceptStat::ProgUnavail, .. }));
        let (h, _) = answer(&s, call(3, NFS4_CALLBACK, 7, &[]));
        assert!(matches!(h.body, ReplyBody::Accepted { stat: AcceptStat::ProcUnavail, .. }));
        let (h, _) = answer(&s, call(4, NFS4_CALLBACK, CB_COMPOUND, &[0, 0]));
        assert!(matches!(h.body, ReplyBody::Accepted { stat: AcceptStat::GarbageArgs, .. }));
        assert!(s.answer(Bytes::from_static(b"junk")).is_none(), "not a call: no answer");
    }

    #[test]
    fn a_recall_is_answered_returned_once_and_its_retry_replayed() {
        let (s, owner) = service();
        let deleg = Stateid4 { seqid: 1, other: [3; 12] };
        let recall = CbArgOp::Recall(CbRecall4Args {
            stateid: deleg,
            truncate: false,
            fh: NfsFh4 { data: Opaque::from_static(b"fh") },
        });
        let args = compound(vec![seq(0, 1), recall.clone()], None);
        let (_, body) = answer(&s, call(5, NFS4_CALLBACK, CB_COMPOUND, &args));
        assert_eq!(
            body,
            Some((Nfsstat4::Ok, vec![(OP_CB_SEQUENCE, Nfsstat4::Ok), (OP_CB_RECALL, Nfsstat4::Ok)]))
        );
        assert_eq!(*owner.returned.lock(), vec![deleg]);
        // The server sends it again (same slot and sequence id): the same
        // answer, and no second return.
        let (h, body2) = answer(&s, call(6, NFS4_CALLBACK, CB_COMPOUND, &args));
        assert_eq!(h.xid, 6);
        assert_eq!(body2, body);
        assert_eq!(owner.returned.lock().len(), 1);
        assert_eq!(s.stats.replays.load(Ordering::Relaxed), 1);
        // A sequence id that skips is misordered; an unknown session is bad.
        let args = compound(vec![seq(0, 5), recall.clone()], None);
        let (_, body) = answer(&s, call(7, NFS4_CALLBACK, CB_COMPOUND, &args));
        assert_eq!(body.unwrap().1, vec![(OP_CB_SEQUENCE, Nfsstat4::SeqMisordered)]);
        let args = compound(vec![seq(9, 1)], None);
        assert_eq!(
            answer(&s, call(8, NFS4_CALLBACK, CB_COMPOUND, &args)).1.unwrap().1,
            vec![(OP_CB_SEQUENCE, Nfsstat4::Badslot)]
        );
        // Without CB_SEQUENCE first nothing runs.
        let args = compound(vec![recall], None);
        assert_eq!(
            answer(&s, call(9, NFS4_CALLBACK, CB_COMPOUND, &args)).1.unwrap().1,
            vec![(OP_CB_RECALL, Nfsstat4::OpNotInSession)]
        );
        assert_eq!(owner.returned.lock().len(), 1);
    }

    struct Holder;
    impl CallbackHooks for Holder {
        fn recall(&self, _: &NfsFh4, _: &Stateid4, _: bool) -> bool {
            true
        }
        fn getattr(&self, _: &NfsFh4, _: &Bitmap4) -> Option<FileAttrs> {
            Some(FileAttrs { size: Some(42), change: Some(7), mode: Some(0o644), ..FileAttrs::default() })
        }
    }

    #[test]
    fn hooks_take_recalls_and_answer_cb_getattr() {
        let (s, owner) = service();
        let g = CbGetattr4Args {
            fh: NfsFh4 { data: Opaque::from_static(b"fh") },
            attr_request: Bitmap4::from_bits(&[FATTR4_SIZE, FATTR4_CHANGE]),
        };
        // No hooks: not a file written under a delegation here.
        let args = compound(vec![seq(1, 1)], Some(g.clone()));
        let (_, body) = answer(&s, call(1, NFS4_CALLBACK, CB_COMPOUND, &args));
        assert_eq!(body.unwrap().1[1], (OP_CB_GETATTR, Nfsstat4::Badhandle));
        s.set_hooks(Some(Arc::new(Holder)));
        let args = compound(vec![seq(1, 2)], Some(g));
        let mut r = s.answer(call(2, NFS4_CALLBACK, CB_COMPOUND, &args)).unwrap();
        let _ = Message::decode(&mut r).unwrap();
        assert_eq!(Nfsstat4::decode(&mut r).unwrap(), Nfsstat4::Ok);
        let _ = Utf8Str::decode(&mut r).unwrap();
        assert_eq!(u32::decode(&mut r).unwrap(), 2);
        let _ = (u32::decode(&mut r), Nfsstat4::decode(&mut r), CbSequence4ResOk::decode(&mut r));
        assert_eq!(u32::decode(&mut r).unwrap(), OP_CB_GETATTR);
        assert_eq!(Nfsstat4::decode(&mut r).unwrap(), Nfsstat4::Ok);
        let attrs = FileAttrs::from_fattr(&Fattr4::decode(&mut r).unwrap()).unwrap();
        assert_eq!((attrs.size, attrs.change, attrs.mode), (Some(42), Some(7), None), "only what was asked");
        // The hook returns recalled delegations itself.
        let recall = CbArgOp::Recall(CbRecall4Args {
            stateid: Stateid4::default(),
            truncate: false,
            fh: NfsFh4::default(),
        });
        let args = compound(vec![seq(0, 1), recall], None);
        let _ = answer(&s, call(3, NFS4_CALLBACK, CB_COMPOUND, &args));
        assert!(owner.returned.lock().is_empty());
    }

    proptest::proptest! {
        /// Whatever follows a callback's RPC header, the answer is a reply
        /// or nothing; it never panics.
        #[test]
        fn junk_after_the_header_never_panics(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            proc_ in 0u32..3,
        ) {
            let (s, _) = service();
            let _ = s.answer(call(1, NFS4_CALLBACK, proc_, &body));
            // A CB_COMPOUND that starts well and continues with junk.
            let mut args = compound(vec![seq(0, 1)], None);
            args.extend_from_slice(&body);
            let _ = s.answer(call(2, NFS4_CALLBACK, CB_COMPOUND, &args));
        }
    }
}
