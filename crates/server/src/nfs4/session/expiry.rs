//! A client's lease, and a client's end: its sessions, its state and its place in the record
//! of clients that may reclaim, gone together. Below the session and state operations, which
//! both expire clients.

use super::{Client, Session, RECORD_WAIT_MAX};
use crate::nfs4::Nfs4;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use std::sync::atomic::Ordering;

impl Client {
    /// Its lease has not run out.
    pub(crate) fn lease_valid(&self, v4: &Nfs4, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.renewed_ns.load(Ordering::Relaxed)) <= v4.config.lease.as_nanos() as u64
    }

    /// Whether this client may still reclaim state.
    pub(crate) fn can_reclaim(&self, v4: &Nfs4) -> bool {
        self.may_reclaim && !self.m.lock().reclaim_complete && v4.sessions.in_grace(v4.clock.now_ns())
    }
}

impl Nfs4 {
    pub(super) fn drop_session(&self, session: &Session) {
        session.destroyed.store(true, Ordering::Release);
        let mut all = self.sessions.sessions.write();
        if all.remove(&session.id).is_some() {
            self.sessions.slots_total.fetch_sub(session.fore.ca_maxrequests as usize, Ordering::AcqRel);
        }
        self.sessions.gauge_sessions(all.len());
        drop(all);
        session.client.m.lock().sessions.retain(|s| *s != session.id);
    }

    /// Add or remove a client from the persisted set that may reclaim after a
    /// restart. The generation to wait for until the set as it is now is on
    /// stable storage (`None`: it is, or nothing records it).
    pub(crate) fn record_reclaimable(&self, owner: &Bytes, add: bool) -> Option<u64> {
        // The set is handed to the writer under its lock, so the newest set is written last.
        let mut r = self.sessions.reclaimable.lock();
        let changed = if add { r.insert(owner.clone()) } else { r.remove(owner) };
        let Some(Ok(recorder)) = &self.sessions.recorder else {
            return (add && matches!(self.sessions.recorder, Some(Err(_)))).then_some(0);
        };
        if !add && !changed {
            return None;
        }
        recorder.ticket(changed, || r.iter().cloned().collect())
    }

    /// Whether `client` holds opens, locks or delegations.
    pub(crate) fn client_has_state(&self, client: &Client) -> bool {
        self.state.client_state_count(client.id) > 0
    }

    /// Remove a client, its sessions and all its state.
    pub(crate) fn expire_client(&self, id: Clientid4, why: &str) {
        let client = {
            let mut t = self.sessions.table.lock();
            let Some(c) = t.clients.remove(&id) else { return };
            if let Some(list) = t.by_owner.get_mut(&c.owner) {
                list.retain(|i| *i != id);
                if list.is_empty() {
                    t.by_owner.remove(&c.owner);
                }
            }
            self.sessions.gauge_clients(&t);
            c
        };
        let sessions = {
            let mut m = client.m.lock();
            m.destroyed = true;
            std::mem::take(&mut m.sessions)
        };
        for s in sessions {
            if let Some(session) = self.sessions.session(&s) {
                self.drop_session(&session);
            }
        }
        let still_there = self.sessions.table.lock().by_owner.contains_key(&client.owner);
        if !still_there {
            // It may no longer reclaim after a restart. When it holds state, which other
            // clients may be given once it is released, that is on stable storage first: after
            // a crash it must not reclaim what someone else then holds (RFC 8881 §8.4.3).
            let generation = self.record_reclaimable(&client.owner, false);
            if let (Some(g), Some(Ok(r))) = (generation, &self.sessions.recorder) {
                if self.client_has_state(&client) {
                    if let Err(e) = r.wait(g, RECORD_WAIT_MAX) {
                        tracing::warn!(
                            client = id,
                            "NFSv4 client expired before its record was removed: {e:?}"
                        );
                    }
                }
            }
        }
        let released = self.state.release_client(id);
        if released > 0 {
            tracing::info!(client = id, state = released, "NFSv4 client's state released: {why}");
        }
    }

    /// A request conflicts with state of `client`: if its lease ran out
    /// (a courtesy client), expire it and say so; otherwise the conflict stands.
    pub(crate) fn expire_if_lapsed(&self, client: Clientid4) -> bool {
        let now = self.clock.now_ns();
        match self.sessions.client(client) {
            Some(c) if !c.lease_valid(self, now) => {
                self.expire_client(client, "lease expired and its state was in another client's way");
                true
            }
            Some(_) => false,
            // Already gone: nothing stands in the way.
            None => true,
        }
    }
}
