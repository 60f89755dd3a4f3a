//! The session operations (EXCHANGE_ID, CREATE_SESSION, SEQUENCE, BIND_CONN_TO_SESSION,
//! DESTROY_SESSION, DESTROY_CLIENTID, RECLAIM_COMPLETE) and the sweep of lapsed records, on the
//! tables of `session`.

use super::RECORD_WAIT_MAX;
use super::{
    Client, ClientMut, Last, Principal, SeqOutcome, Session, Slot, SlotGuard, BACK_MIN_REQUEST_BYTES,
    BACK_MIN_RESPONSE_BYTES, COURTESY_MAX_NS, FORE_MIN_BYTES, SLOTS_TOTAL_MAX,
};
use crate::call::{Call, Caller};
use crate::nfs4::callback::{BackState, CbSec};
use crate::nfs4::Nfs4;
use crate::records::NotRecorded;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

impl Principal {
    pub(crate) fn of(call: &Call) -> Principal {
        match &call.caller {
            Caller::Sys(s) => Principal { flavor: 1, uid: s.uid },
            Caller::Anonymous => Principal { flavor: 0, uid: u32::MAX },
        }
    }
}

impl Nfs4 {
    // ------------------------------------------------------------ EXCHANGE_ID

    pub(crate) fn exchange_id(&self, call: &Call, a: &ExchangeId4Args) -> Res4<ExchangeId4ResOk> {
        if a.flags & !EXCHGID4_FLAG_MASK_A != 0 {
            return Res4::Err(Nfsstat4::Inval);
        }
        // Only SP4_NONE over AUTH_SYS: machine-credential protection needs a
        // credential that proves something, and SSV needs GSS (as knfsd).
        match &a.state_protect {
            StateProtect4A::None => {}
            StateProtect4A::MachCred(_) => return Res4::Err(Nfsstat4::Inval),
            StateProtect4A::Ssv(_) => return Res4::Err(Nfsstat4::EncrAlgUnsupp),
        }
        let now = self.clock.now_ns();
        self.sweep(call, now);
        let principal = Principal::of(call);
        let update = a.flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A != 0;
        let owner = a.clientowner.co_ownerid.0.clone();
        let verifier = a.clientowner.co_verifier;
        let mut t = self.sessions.table.lock();
        let ids = t.by_owner.get(&owner).cloned().unwrap_or_default();
        let records: Vec<Arc<Client>> = ids.iter().filter_map(|id| t.clients.get(id).cloned()).collect();
        let confirmed = records.iter().find(|c| c.m.lock().confirmed).cloned();
        let reply = |c: &Client, confirmed: bool| {
            let seq = c.m.lock().cs_seq.wrapping_add(1);
            let mut flags = EXCHGID4_FLAG_USE_NON_PNFS;
            if confirmed {
                flags |= EXCHGID4_FLAG_CONFIRMED_R;
            }
            Res4::Ok(ExchangeId4ResOk {
                clientid: c.id,
                sequenceid: seq,
                flags,
                state_protect: StateProtect4R::None,
                server_owner: ServerOwner4 {
                    so_minor_id: 0,
                    so_major_id: eagernfs_xdr::Opaque(self.server_name.clone()),
                },
                server_scope: eagernfs_xdr::Opaque(self.server_name.clone()),
                server_impl_id: ImplIdOpt(Some(NfsImplId4 {
                    nii_domain: eagernfs_xdr::Opaque::from_static(b"eagernfs.org"),
                    nii_name: eagernfs_xdr::Opaque(Bytes::from(format!(
                        "eagernfs {}",
                        env!("CARGO_PKG_VERSION")
                    ))),
                    nii_date: Nfstime4::default(),
                })),
            })
        };
        if update {
            // RFC 8881 §18.35.4, cases 6–9.
            let Some(c) = confirmed else { return Res4::Err(Nfsstat4::Noent) };
            if c.principal != principal {
                return Res4::Err(Nfsstat4::Perm);
            }
            if c.verifier != verifier {
                return Res4::Err(Nfsstat4::NotSame);
            }
            c.renew(now);
            return reply(&c, true);
        }
        if let Some(c) = &confirmed {
            if c.verifier == verifier && c.principal == principal {
                // Case 2: the same client again (a retry, or a second look).
                c.renew(now);
                return reply(c, true);
            }
            if c.principal != principal {
                if self.client_has_state(c) || !c.m.lock().sessions.is_empty() {
                    // Case 3: someone else's client id, still in use.
                    return Res4::Err(Nfsstat4::ClidInuse);
                }
                // Someone else's, unused: it goes now.
                let old = c.id;
                drop(t);
                self.expire_client(old, "its owner id was taken by another principal");
                t = self.sessions.table.lock();
            }
            // Case 4 (the client restarted) or a collision with a lapsed one:
            // a new unconfirmed record; the old goes when the new is confirmed.
        }
        // Cases 1, 4, 5: a new unconfirmed record replaces any unconfirmed one.
        for c in &records {
            if !c.m.lock().confirmed {
                t.clients.remove(&c.id);
                c.m.lock().destroyed = true;
            }
        }
        if t.clients.len() >= self.config.max_clients {
            drop(t);
            if !self.purge_one_lapsed(now) {
                tracing::warn!(
                    "NFSv4 client table full ({} clients): EXCHANGE_ID delayed",
                    self.config.max_clients
                );
                return Res4::Err(Nfsstat4::Delay);
            }
            t = self.sessions.table.lock();
        }
        let id = ((self.sessions.epoch as u64) << 32)
            | self.sessions.next_client.fetch_add(1, Ordering::Relaxed) as u64;
        let client = Arc::new(Client {
            id,
            owner: owner.clone(),
            verifier,
            principal,
            renewed_ns: AtomicU64::new(now),
            status_flags: AtomicU32::new(0),
            may_reclaim: self.sessions.reclaimable.lock().contains(&owner),
            m: Mutex::new(ClientMut::default()),
        });
        t.clients.insert(id, client.clone());
        let list = t.by_owner.entry(owner).or_default();
        list.retain(|i| records.iter().any(|c| c.id == *i && c.m.lock().confirmed));
        list.push(id);
        self.sessions.gauge_clients(&t);
        reply(&client, false)
    }

    // ------------------------------------------------------------ CREATE_SESSION

    pub(crate) fn create_session(
        &self,
        call: &Call,
        a: &CreateSession4Args,
        minor: u32,
    ) -> Res4<CreateSession4ResOk> {
        let now = self.clock.now_ns();
        let Some(client) = self.sessions.client(a.clientid) else {
            return Res4::Err(Nfsstat4::StaleClientid);
        };
        let mut m = client.m.lock();
        if m.destroyed {
            return Res4::Err(Nfsstat4::StaleClientid);
        }
        if a.sequence == m.cs_seq {
            if let Some(r) = &m.cs_reply {
                return r.clone();
            }
            return Res4::Err(Nfsstat4::SeqMisordered);
        }
        if a.sequence != m.cs_seq.wrapping_add(1) {
            return Res4::Err(Nfsstat4::SeqMisordered);
        }
        if !m.confirmed && client.principal != Principal::of(call) {
            // Not remembered: a retry gets the same answer.
            return Res4::Err(Nfsstat4::ClidInuse);
        }
        if !m.confirmed && !client.lease_valid(self, now) {
            // Not confirmed within a lease: the record is gone (RFC 8881 §18.35.4).
            drop(m);
            self.expire_client(client.id, "not confirmed within a lease");
            return Res4::Err(Nfsstat4::StaleClientid);
        }
        let result = self.new_session(call, &client, &mut m, a, minor);
        if let Res4::Ok(ok) = &result {
            // Only a session made uses up the sequence id (a refused request
            // gets the same answer again, RFC 8881 §18.36.4).
            m.cs_seq = a.sequence;
            m.cs_reply = Some(result.clone());
            let first = !m.confirmed;
            m.confirmed = true;
            drop(m);
            client.renew(now);
            if first {
                self.replace_older_records(&client);
            }
            if let Some(s) = self.sessions.session(&ok.sessionid) {
                self.back_channel_new(&s);
            }
        }
        result
    }

    fn new_session(
        &self,
        call: &Call,
        client: &Arc<Client>,
        m: &mut ClientMut,
        a: &CreateSession4Args,
        minor: u32,
    ) -> Res4<CreateSession4ResOk> {
        let known = CREATE_SESSION4_FLAG_PERSIST
            | CREATE_SESSION4_FLAG_CONN_BACK_CHAN
            | CREATE_SESSION4_FLAG_CONN_RDMA;
        if a.flags & !known != 0 {
            return Res4::Err(Nfsstat4::Inval);
        }
        let f = &a.fore_chan_attrs;
        let b = &a.back_chan_attrs;
        if f.ca_maxrequestsize < FORE_MIN_BYTES
            || f.ca_maxresponsesize < FORE_MIN_BYTES
            || f.ca_maxoperations < 2
        {
            return Res4::Err(Nfsstat4::Toosmall);
        }
        if b.ca_maxrequestsize < BACK_MIN_REQUEST_BYTES
            || b.ca_maxresponsesize < BACK_MIN_RESPONSE_BYTES
            || b.ca_maxoperations < 2
            || b.ca_maxrequests < 1
        {
            return Res4::Err(Nfsstat4::Toosmall);
        }
        if f.ca_maxrequests == 0 {
            return Res4::Err(Nfsstat4::Inval);
        }
        if m.sessions.len() >= self.config.max_sessions_per_client {
            return Res4::Err(Nfsstat4::Delay);
        }
        let cfg = &call.state.config;
        // Slots: what was asked, no more than a session's share, and what the
        // whole server still has room for.
        let want = f.ca_maxrequests.min(self.config.max_slots) as usize;
        let mut total = self.sessions.slots_total.load(Ordering::Relaxed);
        let slots = loop {
            let room = SLOTS_TOTAL_MAX.saturating_sub(total);
            let n = want.min(room);
            if n == 0 {
                tracing::warn!("NFSv4 slot budget spent ({SLOTS_TOTAL_MAX} slots): CREATE_SESSION delayed");
                return Res4::Err(Nfsstat4::Delay);
            }
            match self.sessions.slots_total.compare_exchange(
                total,
                total + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break n,
                Err(t) => total = t,
            }
        };
        let fore = ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: f.ca_maxrequestsize.min(cfg.max_record_bytes as u32),
            ca_maxresponsesize: f.ca_maxresponsesize.min(cfg.read_max_bytes + 64 * 1024),
            ca_maxresponsesize_cached: f.ca_maxresponsesize_cached.min(self.config.max_cached_reply_bytes),
            ca_maxoperations: f.ca_maxoperations.min(self.config.max_ops),
            ca_maxrequests: slots as u32,
            ca_rdma_ird: RdmaIrd(None),
        };
        let back_attrs = ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: b.ca_maxrequestsize,
            ca_maxresponsesize: b.ca_maxresponsesize,
            ca_maxresponsesize_cached: 0,
            ca_maxoperations: b.ca_maxoperations.min(2),
            ca_maxrequests: 1,
            ca_rdma_ird: RdmaIrd(None),
        };
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&client.id.to_be_bytes());
        id[8..12].copy_from_slice(&self.sessions.next_session.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        id[12..].copy_from_slice(&rand::random::<u32>().to_be_bytes());
        let tcp = call.conn.id != 0;
        let back_chan = a.flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN != 0 && tcp;
        let sec = CbSec::choose(&a.sec_parms.0);
        let session = Arc::new(Session {
            id,
            client: client.clone(),
            fore: fore.clone(),
            slots: Mutex::new((0..slots).map(|_| Slot::default()).collect()),
            fore_conns: Mutex::new(if tcp { vec![call.conn.id] } else { Vec::new() }),
            back: BackState::new(a.cb_program, sec, if back_chan { Some(call.conn.id) } else { None }),
            minor,
            destroyed: AtomicBool::new(false),
        });
        {
            let mut all = self.sessions.sessions.write();
            all.insert(id, session);
            self.sessions.gauge_sessions(all.len());
        }
        m.sessions.push(id);
        let mut flags = 0;
        if back_chan {
            flags |= CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
        }
        Res4::Ok(CreateSession4ResOk {
            sessionid: id,
            sequence: a.sequence,
            flags,
            fore_chan_attrs: fore,
            back_chan_attrs: back_attrs,
        })
    }

    /// A client was confirmed: older records of the same owner (an earlier
    /// instance of the client) go, with their state.
    fn replace_older_records(&self, client: &Arc<Client>) {
        let old: Vec<Clientid4> = {
            let t = self.sessions.table.lock();
            t.by_owner
                .get(&client.owner)
                .map(|v| v.iter().copied().filter(|i| *i != client.id).collect())
                .unwrap_or_default()
        };
        for id in old {
            self.expire_client(id, "replaced by a new instance of the client");
        }
    }

    // ------------------------------------------------------------ SEQUENCE

    /// SEQUENCE: the session, the slot, and whether this is a retry.
    /// `ops`: the COMPOUND's operation count; `request_len`: its size.
    pub(crate) fn sequence(
        &self,
        call: &Call,
        a: &Sequence4Args,
        ops: u32,
        request_len: usize,
        request: u64,
    ) -> Result<(SeqOutcome, Sequence4ResOk), Nfsstat4> {
        let now = self.clock.now_ns();
        let session = self.sessions.session(&a.sessionid).ok_or(Nfsstat4::Badsession)?;
        if session.destroyed.load(Ordering::Acquire) || session.client.m.lock().destroyed {
            return Err(Nfsstat4::Badsession);
        }
        if a.slotid >= session.fore.ca_maxrequests {
            return Err(Nfsstat4::Badslot);
        }
        if ops > session.fore.ca_maxoperations {
            return Err(Nfsstat4::TooManyOps);
        }
        if request_len > session.fore.ca_maxrequestsize as usize {
            return Err(Nfsstat4::ReqTooBig);
        }
        let top = session.fore.ca_maxrequests - 1;
        let mut slots = session.slots.lock();
        let slot = &mut slots[a.slotid as usize];
        let outcome = if a.sequenceid == slot.seqid.wrapping_add(1) {
            if slot.busy {
                // The previous request on this slot has not finished: the
                // client broke the one-request-per-slot rule.
                return Err(Nfsstat4::SeqMisordered);
            }
            slot.seqid = a.sequenceid;
            slot.busy = true;
            slot.last = Last::Nothing;
            SeqOutcome::New(SlotGuard { session: session.clone(), slot: a.slotid, request, done: false })
        } else if a.sequenceid == slot.seqid {
            if slot.busy {
                return Err(Nfsstat4::Delay);
            }
            match &slot.last {
                Last::Cached { reply, request: r } if *r == request => SeqOutcome::Replay(reply.clone()),
                Last::Uncached { request: r } if *r == request => return Err(Nfsstat4::RetryUncachedRep),
                Last::Nothing => return Err(Nfsstat4::SeqMisordered),
                Last::Cached { .. } | Last::Uncached { .. } => return Err(Nfsstat4::SeqFalseRetry),
            }
        } else {
            return Err(Nfsstat4::SeqMisordered);
        };
        drop(slots);
        // A request on a connection not bound to the session binds it (SP4_NONE).
        if call.conn.id != 0 {
            session.bind_fore(call.conn.id, |c| self.back.conn_alive(c));
        }
        session.client.renew(now);
        // Lapsed records go now and then (after this client's own renewal).
        self.sweep(call, now);
        let mut flags = session.client.status_flags.load(Ordering::Relaxed);
        if !self.back.path_up(&session) {
            flags |= SEQ4_STATUS_CB_PATH_DOWN | SEQ4_STATUS_CB_PATH_DOWN_SESSION;
        }
        let ok = Sequence4ResOk {
            sessionid: a.sessionid,
            sequenceid: a.sequenceid,
            slotid: a.slotid,
            highest_slotid: top,
            target_highest_slotid: top,
            status_flags: flags,
        };
        Ok((outcome, ok))
    }

    // ------------------------------------------------------------ BIND_CONN_TO_SESSION

    /// A connection was bound to `session`'s back channel: check it, and send the client's
    /// outstanding recalls over it.
    fn back_channel_new(&self, session: &Arc<Session>) {
        if !session.back.has_connection() {
            return;
        }
        self.back.probe(session);
        crate::nfs4::state::resend_recalls(self, session);
    }

    pub(crate) fn bind_conn(&self, call: &Call, a: &BindConnToSession4Args) -> Res4<BindConnToSession4ResOk> {
        let Some(session) = self.sessions.session(&a.sessid) else { return Res4::Err(Nfsstat4::Badsession) };
        if session.destroyed.load(Ordering::Acquire) {
            return Res4::Err(Nfsstat4::Badsession);
        }
        if a.use_conn_in_rdma_mode {
            // Not an RDMA transport: the server says so by answering false.
        }
        let id = call.conn.id;
        if id == 0 {
            return Res4::Err(Nfsstat4::Inval);
        }
        let dir = match a.dir {
            ChannelDirFromClient4::Fore => ChannelDirFromServer4::Fore,
            ChannelDirFromClient4::Back => ChannelDirFromServer4::Back,
            ChannelDirFromClient4::ForeOrBoth | ChannelDirFromClient4::BackOrBoth => {
                ChannelDirFromServer4::Both
            }
        };
        if matches!(dir, ChannelDirFromServer4::Fore | ChannelDirFromServer4::Both) {
            session.bind_fore(id, |c| self.back.conn_alive(c));
        }
        if matches!(dir, ChannelDirFromServer4::Back | ChannelDirFromServer4::Both) {
            session.back.bind(id);
            self.back_channel_new(&session);
        }
        session.client.renew(self.clock.now_ns());
        Res4::Ok(BindConnToSession4ResOk { sessid: a.sessid, dir, use_conn_in_rdma_mode: false })
    }

    // ------------------------------------------------------------ DESTROY_SESSION

    /// `current`: the session of this COMPOUND's SEQUENCE, if any.
    pub(crate) fn destroy_session(
        &self,
        call: &Call,
        a: &DestroySession4Args,
        current: Option<&Session>,
    ) -> StatusRes {
        let Some(session) = self.sessions.session(&a.sessionid) else {
            return Res4::Err(Nfsstat4::Badsession);
        };
        if current.is_none() && call.conn.id != 0 && !session.fore_bound(call.conn.id) {
            return Res4::Err(Nfsstat4::ConnNotBoundToSession);
        }
        self.drop_session(&session);
        Res4::OK
    }

    // ------------------------------------------------------------ DESTROY_CLIENTID

    pub(crate) fn destroy_clientid(&self, a: &DestroyClientid4Args) -> StatusRes {
        let Some(client) = self.sessions.client(a.clientid) else {
            return Res4::Err(Nfsstat4::StaleClientid);
        };
        if !client.m.lock().sessions.is_empty() || self.client_has_state(&client) {
            return Res4::Err(Nfsstat4::ClientidBusy);
        }
        self.expire_client(client.id, "DESTROY_CLIENTID");
        Res4::OK
    }

    // ------------------------------------------------------------ RECLAIM_COMPLETE

    pub(crate) fn reclaim_complete(&self, client: &Client, a: &ReclaimComplete4Args) -> StatusRes {
        if a.one_fs {
            // Per file system completion: nothing is tracked per file system here.
            return Res4::OK;
        }
        if client.m.lock().reclaim_complete {
            return Res4::Err(Nfsstat4::CompleteAlready);
        }
        // From now on this client may hold state worth reclaiming after a restart
        // (before this it gets none but what it reclaims, RFC 8881 §18.51.3), so it
        // is on stable storage before it is told it is done: a client the server
        // cannot recognise after a restart gets NFS4ERR_RECLAIM_BAD for what it
        // held. Concurrent registrations share one write.
        if let Some(generation) = self.record_reclaimable(&client.owner, true) {
            let recorded = match &self.sessions.recorder {
                Some(Ok(r)) => r.wait(generation, RECORD_WAIT_MAX),
                Some(Err(e)) => Err(NotRecorded::Failed(e.clone())),
                None => Ok(()),
            };
            if let Err(why) = recorded {
                // Not done: it may not open or lock anything new yet, and asks again.
                tracing::debug!(
                    client = client.id,
                    ?why,
                    "RECLAIM_COMPLETE delayed: the client is not recorded"
                );
                return Res4::Err(Nfsstat4::Delay);
            }
        }
        {
            let mut m = client.m.lock();
            if m.reclaim_complete {
                return Res4::Err(Nfsstat4::CompleteAlready);
            }
            m.reclaim_complete = true;
        }
        self.sessions.grace.lock().pending.remove(&client.owner);
        Res4::OK
    }

    /// Make room for one client record: the oldest unconfirmed record goes
    /// first (its client only has to ask again), then the longest-lapsed
    /// client without state, then the longest-lapsed with state. Whether one went.
    fn purge_one_lapsed(&self, now: u64) -> bool {
        let clients = self.sessions.clients();
        let oldest = |it: &mut dyn Iterator<Item = &Arc<Client>>| -> Option<Clientid4> {
            it.min_by_key(|c| c.renewed_ns.load(Ordering::Relaxed)).map(|c| c.id)
        };
        let unconfirmed = oldest(&mut clients.iter().filter(|c| !c.m.lock().confirmed));
        let lapsed = || clients.iter().filter(|c| !c.lease_valid(self, now));
        let victim = unconfirmed
            .or_else(|| oldest(&mut lapsed().filter(|c| !self.client_has_state(c))))
            .or_else(|| oldest(&mut lapsed()));
        match victim {
            Some(id) => {
                self.expire_client(id, "room was needed for a new client");
                true
            }
            None => false,
        }
    }

    /// At most once a second: forget unconfirmed records and lapsed clients
    /// without state; courtesy clients (lapsed, with state) stay until their
    /// state is in someone's way, or a day.
    pub(crate) fn sweep(&self, _call: &Call, now: u64) {
        let last = self.sessions.swept_ns.load(Ordering::Relaxed);
        if now.saturating_sub(last) < 1_000_000_000
            || self
                .sessions
                .swept_ns
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.state.revoke_overdue_recalls(self, now);
        for c in self.sessions.clients() {
            if c.lease_valid(self, now) {
                continue;
            }
            let confirmed = c.m.lock().confirmed;
            let idle = now.saturating_sub(c.renewed_ns.load(Ordering::Relaxed));
            if !confirmed || !self.client_has_state(&c) || idle > COURTESY_MAX_NS {
                self.expire_client(c.id, "lease expired");
            }
        }
    }
}
