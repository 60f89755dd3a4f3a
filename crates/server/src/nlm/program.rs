//! The NLM v4 and NSM v1 programs: one handler per procedure, on the lock manager's table.

use super::grant::{Gated, Grant};
use super::locks::{Held, LockResult, Mirror, Owner, Range};
use super::mirror::{self, BackendMirror};
use super::{as_mirror, LockManager};
use crate::call::{Call, Outcome};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_proto::nlm::*;
use eagernfs_xdr::{Encode, Opaque};
use std::sync::Arc;

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
            let stat = if in_grace(call, lm) || write_delegated(call, &a.alock.fh) {
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

/// An NFSv4 client holds a write delegation of the file (and may hold locks
/// on it no one else sees): it is recalled, and the caller is told to try
/// again as in a grace period (NLM has no JUKEBOX; clients retry after a while).
fn write_delegated(call: &Call, fh: &Netobj) -> bool {
    call.state.nfs4.as_ref().is_some_and(|v4| v4.has_write_delegations() && v4.v3_read(&fh.0))
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
    if !a.reclaim && write_delegated(call, &a.alock.fh) {
        return Nlm4Stats::DeniedGracePeriod;
    }
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
