//! What a write delegation changes for everyone else (RFC 8881 §10.4.3,
//! RFC 9754): another client's GETATTR of the file's size, change or times
//! is answered with what the holder reports in CB_GETATTR, since only the
//! holder knows them while it writes; a holder that cannot say has the
//! delegation recalled (the caller waits: NFS4ERR_DELAY, JUKEBOX). And the
//! holder of an `OPEN_DELEGATE_WRITE_ATTRS_DELEG` sets the file's atime and
//! mtime itself with SETATTR of `time_deleg_access`/`time_deleg_modify`.

use super::ops::{back_session, recall, Conflict};
use super::{find, Kind, Other, Shown};
use crate::nfs4::callback::Probe;
use crate::nfs4::Nfs4;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{Attr, SetTime, Timestamp};
use std::time::{Duration, Instant};

/// How long a GETATTR waits for the holder's CB_GETATTR answer; past it the
/// delegation is recalled and the caller told to come back. A holder
/// answers from memory within a round trip; the bound keeps one that does
/// not from holding a service thread for long.
const CB_GETATTR_WAIT: Duration = Duration::from_secs(1);

/// The attributes whose values only a write delegation's holder knows.
fn held_by_holder(want: &Bitmap4, times: bool) -> bool {
    [FATTR4_CHANGE, FATTR4_SIZE, FATTR4_TIME_MODIFY, FATTR4_TIME_METADATA].iter().any(|n| want.contains(*n))
        || (times && (want.contains(FATTR4_TIME_ACCESS) || want.contains(FATTR4_TIME_DELEG_ACCESS)))
        || want.contains(FATTR4_TIME_DELEG_MODIFY)
}

/// The wall clock, as a timestamp.
fn wall_now() -> Timestamp {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp { secs: d.as_secs() as i64, nsecs: d.subsec_nanos() }
}

fn ts(t: Nfstime4) -> Option<Timestamp> {
    (t.nseconds < 1_000_000_000).then_some(Timestamp { secs: t.seconds, nsecs: t.nseconds })
}

/// The timestamp just after `t` (one nanosecond on: the next change).
fn after(t: Timestamp) -> Timestamp {
    if t.nsecs + 1 >= 1_000_000_000 {
        Timestamp { secs: t.secs + 1, nsecs: 0 }
    } else {
        Timestamp { secs: t.secs, nsecs: t.nsecs + 1 }
    }
}

/// A delegated time as RFC 9754 §4 has the server take it: one not later
/// than the file's when the delegation was granted says nothing (`None`),
/// one in the future is the server's now.
fn vetted(t: Option<Nfstime4>, granted: Timestamp, now: Timestamp) -> Option<Timestamp> {
    let t = ts(t?)?;
    if t <= granted {
        return None;
    }
    Some(t.min(now))
}

/// `attr`, the backend's attributes of `file` for a GETATTR asking for `want`
/// by `me` (`None`: an NFSv3 caller), as another client must see them while
/// a write delegation of the file is out: with the size, change and times
/// the holder reports in CB_GETATTR. NFS4ERR_DELAY when the holder could not
/// say (its delegation is then recalled).
pub(crate) fn delegated_attrs(
    v4: &Nfs4,
    file: &Bytes,
    me: Option<Clientid4>,
    want: &Bitmap4,
    attr: &mut Attr,
) -> Result<(), Nfsstat4> {
    if v4.state.write_delegations.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return Ok(());
    }
    // The write delegation of another client, and a CB_GETATTR to wait for (new or in flight).
    let (other, holder, probe, send) = {
        let mut inner = v4.state.inner.lock();
        let Some(f) = inner.files.get(file) else { return Ok(()) };
        let found = f.delegs.iter().copied().find(|o| {
            inner.ids.get(o).is_some_and(|e| {
                Some(e.client) != me && matches!(e.kind, Kind::Deleg { write: Some(_), revoked: false, .. })
            })
        });
        let Some(other) = found else { return Ok(()) };
        let e = inner.ids.get_mut(&other).expect("found above");
        let holder = e.client;
        let Kind::Deleg { write: Some(w), recalled_ns, .. } = &mut e.kind else { return Ok(()) };
        if !held_by_holder(want, w.times) {
            return Ok(());
        }
        if recalled_ns.is_some() {
            // Being recalled: the holder is writing back; wait for the return.
            drop(inner);
            return if recall(v4, file, me, Conflict::Change) { Err(Nfsstat4::Delay) } else { Ok(()) };
        }
        match &w.probe {
            // In flight and recent enough to wait for: share it (an answer already in
            // may be older than this GETATTR: ask again).
            Some(p) if !p.answered() && p.sent + CB_GETATTR_WAIT > Instant::now() => {
                (other, holder, p.clone(), false)
            }
            _ => {
                let p = Probe::new();
                w.probe = Some(p.clone());
                (other, holder, p, true)
            }
        }
    };
    if send {
        let Some(session) = back_session(v4, holder) else {
            probe.finish(None);
            return give_up(v4, file, me);
        };
        let mut mask = Bitmap4::from_bits(&[FATTR4_CHANGE, FATTR4_SIZE]);
        if matches!(times_of(v4, &other), Some(true)) {
            mask.set(FATTR4_TIME_DELEG_ACCESS);
            mask.set(FATTR4_TIME_DELEG_MODIFY);
        }
        v4.back.getattr(session, NfsFh4 { data: eagernfs_xdr::Opaque(file.clone()) }, mask, probe.clone());
    }
    let Some(Some(reported)) = probe.wait_until(probe.sent + CB_GETATTR_WAIT) else {
        return give_up(v4, file, me);
    };
    let Some(holder_change) = reported.change else { return give_up(v4, file, me) };
    // Fold the answer into what others are shown.
    let mut inner = v4.state.inner.lock();
    let Some(e) = inner.ids.get_mut(&other) else { return Ok(()) };
    let Kind::Deleg { write: Some(w), revoked: false, .. } = &mut e.kind else { return Ok(()) };
    let now = wall_now();
    if w.times {
        if let Some(t) = vetted(reported.time_deleg_access, w.granted_atime, now) {
            attr.atime = attr.atime.max(t);
        }
    }
    let unmodified = w.shown.is_none() && holder_change == crate::nfs4::attrs::change_of(w.granted_ctime);
    if unmodified {
        return Ok(());
    }
    let size = reported.size.unwrap_or(attr.size);
    let shown = match w.shown {
        Some(s) if s.holder_change == holder_change && s.size == size => s,
        prev => {
            // A modification not shown yet: a change (and ctime) later than anything shown or stored.
            let floor = prev.map_or(attr.ctime, |p| p.ctime.max(attr.ctime));
            let ctime = now.max(after(floor));
            let mtime = if w.times {
                vetted(reported.time_deleg_modify, w.granted_mtime, now).unwrap_or(ctime).max(attr.mtime)
            } else {
                ctime
            };
            let s = Shown { holder_change, size, ctime, mtime };
            w.shown = Some(s);
            s
        }
    };
    attr.size = shown.size;
    attr.ctime = attr.ctime.max(shown.ctime);
    attr.mtime = attr.mtime.max(shown.mtime);
    Ok(())
}

impl Nfs4 {
    /// An NFSv3 GETATTR of `file`: its attributes `attr` as a write
    /// delegation's holder reports them (CB_GETATTR); `false` if the holder
    /// could not say (answer JUKEBOX: the delegation is being recalled).
    pub(crate) fn v3_getattr(&self, file: &Bytes, attr: &mut Attr) -> bool {
        let all = Bitmap4::from_bits(&[FATTR4_CHANGE, FATTR4_SIZE, FATTR4_TIME_ACCESS, FATTR4_TIME_MODIFY]);
        delegated_attrs(self, file, None, &all, attr).is_ok()
    }
}

/// Whether delegation `o` delegates timestamps.
fn times_of(v4: &Nfs4, o: &Other) -> Option<bool> {
    let inner = v4.state.inner.lock();
    match &inner.ids.get(o)?.kind {
        Kind::Deleg { write: Some(w), .. } => Some(w.times),
        _ => None,
    }
}

/// The holder did not say: recall its delegation; the caller comes back.
fn give_up(v4: &Nfs4, file: &Bytes, me: Option<Clientid4>) -> Result<(), Nfsstat4> {
    if recall(v4, file, me, Conflict::Change) {
        Err(Nfsstat4::Delay)
    } else {
        Ok(())
    }
}

/// SETATTR of `time_deleg_access`/`time_deleg_modify` by `client` with
/// `stateid` (RFC 9754 §4): only the holder of the file's
/// `OPEN_DELEGATE_WRITE_ATTRS_DELEG` may (NFS4ERR_BAD_STATEID otherwise).
/// The times as they are to be set: one not later than the file's when the
/// delegation was granted is left alone, one in the future is now.
pub(crate) fn check_deleg_times(
    v4: &Nfs4,
    client: Clientid4,
    stateid: &Stateid4,
    file: &Bytes,
    access: Option<Nfstime4>,
    modify: Option<Nfstime4>,
) -> Result<(SetTime, SetTime), Nfsstat4> {
    let mut inner = v4.state.inner.lock();
    let e = find(&mut inner, client, stateid)?;
    let Kind::Deleg { write: Some(w), .. } = &e.kind else { return Err(Nfsstat4::BadStateid) };
    if !w.times || e.file != *file {
        return Err(Nfsstat4::BadStateid);
    }
    let now = wall_now();
    for t in [access, modify].into_iter().flatten() {
        if ts(t).is_none() {
            return Err(Nfsstat4::Inval);
        }
    }
    let set = |t: Option<Timestamp>| t.map_or(SetTime::DontChange, SetTime::ClientTime);
    Ok((set(vetted(access, w.granted_atime, now)), set(vetted(modify, w.granted_mtime, now))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delegated_times_count_only_when_later_than_the_grant_and_not_in_the_future() {
        let granted = Timestamp { secs: 100, nsecs: 5 };
        let now = Timestamp { secs: 200, nsecs: 0 };
        let t = |secs, nsecs| Some(Nfstime4 { seconds: secs, nseconds: nsecs });
        assert_eq!(vetted(t(100, 5), granted, now), None);
        assert_eq!(vetted(t(50, 0), granted, now), None);
        assert_eq!(vetted(t(150, 1), granted, now), Some(Timestamp { secs: 150, nsecs: 1 }));
        assert_eq!(vetted(t(900, 0), granted, now), Some(now));
        assert_eq!(vetted(t(150, 1_000_000_000), granted, now), None);
        assert_eq!(after(Timestamp { secs: 1, nsecs: 999_999_999 }), Timestamp { secs: 2, nsecs: 0 });
    }
}
