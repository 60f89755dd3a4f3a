//! The operations on open, lock and delegation state (OPEN, CLOSE, OPEN_DOWNGRADE, LOCK,
//! LOCKT, LOCKU, FREE_STATEID, TEST_STATEID, DELEGRETURN), the stateid checks of READ, WRITE and
//! SETATTR, and delegation recalls, on the table of `state`.

use super::{
    bump, find, insert, lock_owner, range, remove, revoke, special, Entry, Inner, Kind, Other, StateTable,
    WriteDeleg, RECALL_COOLDOWN_NS,
};
use crate::nfs4::convert::{check_name, cinfo, status};
use crate::nfs4::ctx::Ctx;
use crate::nfs4::fh::{Cur, Obj};
use crate::nfs4::Nfs4;
use crate::nlm::locks::{Held, LockResult};
use crate::nlm::Grant;
use crate::nlm::{as_mirror, mirror};
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{access as acc, CreateMode, FileType, FsError};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl StateTable {
    /// Revoke delegations whose recall went unanswered for a lease.
    pub(crate) fn revoke_overdue_recalls(&self, v4: &Nfs4, now: u64) {
        let lease = v4.config.lease.as_nanos() as u64;
        let revoked: Vec<Clientid4> = {
            let mut inner = self.inner.lock();
            let overdue: Vec<(Other, Clientid4)> = inner
                .recalling
                .iter()
                .filter_map(|k| {
                    let e = inner.ids.get(k)?;
                    match e.kind {
                        Kind::Deleg { recalled_ns: Some(t), revoked: false, .. }
                            if now.saturating_sub(t) > lease =>
                        {
                            Some((*k, e.client))
                        }
                        _ => None,
                    }
                })
                .collect();
            for (o, _) in &overdue {
                revoke(self, &mut inner, o);
            }
            overdue.into_iter().map(|(_, c)| c).collect()
        };
        // Client records are looked up without the state lock held (lock order: clients, then state).
        flag_revoked(v4, &revoked);
    }
}

/// Tell each client in `clients` (in SEQUENCE) that a delegation of theirs was revoked.
fn flag_revoked(v4: &Nfs4, clients: &[Clientid4]) {
    for client in clients {
        if let Some(c) = v4.sessions.client(*client) {
            c.status_flags.fetch_or(SEQ4_STATUS_RECALLABLE_STATE_REVOKED, Ordering::Relaxed);
        }
        tracing::info!(client, "delegation revoked: not returned within a lease of its recall");
    }
}

fn current_client(ctx: &Ctx) -> Result<Clientid4, Nfsstat4> {
    ctx.client().map(|c| c.id)
}

fn epoch(ctx: &Ctx) -> u32 {
    ctx.v4.config.boot_epoch
}

/// Whether other clients' opens or delegations on the file stand in the way of
/// `access`/`deny` by `client`; a lapsed client in the way is expired first.
fn conflicts(
    v4: &Nfs4,
    inner: &Inner,
    file: &Bytes,
    client: Clientid4,
    owner: &Bytes,
    access: u32,
    deny: u32,
) -> Result<(), Vec<Clientid4>> {
    let Some(f) = inner.files.get(file) else { return Ok(()) };
    let mut in_way = Vec::new();
    for o in &f.opens {
        let Some(e) = inner.ids.get(o) else { continue };
        if let Kind::Open { owner: eo, access: ea, deny: ed, .. } = &e.kind {
            if e.client == client && eo == owner {
                continue;
            }
            if ed & access != 0 || ea & deny != 0 {
                in_way.push(e.client);
            }
        }
    }
    let _ = v4;
    if in_way.is_empty() {
        Ok(())
    } else {
        Err(in_way)
    }
}

/// Expire the lapsed clients among `clients`; whether all of them were (so the request may go ahead).
fn clear_lapsed(v4: &Nfs4, clients: &[Clientid4]) -> bool {
    let mut all = true;
    for c in clients {
        if !v4.expire_if_lapsed(*c) {
            all = false;
        }
    }
    all
}

// ------------------------------------------------------------ I/O checks

/// Check that `stateid` permits READ (or WRITE, `write`) of `o` by this client.
pub(crate) fn check_io(ctx: &Ctx, o: &Obj, stateid: &Stateid4, write: bool) -> Result<(), Nfsstat4> {
    let v4 = ctx.v4;
    let want = if write { OPEN4_SHARE_ACCESS_WRITE } else { OPEN4_SHARE_ACCESS_READ };
    if special(stateid) {
        // The anonymous stateid: allowed unless another open denies this
        // access. The READ bypass stateid skips that for reads (RFC 8881
        // §8.2.3) and is the anonymous one for anything else.
        if *stateid == Stateid4::BYPASS && !write {
            return Ok(());
        }
        loop {
            let inner = v4.state.inner.lock();
            let Some(f) = inner.files.get(&o.wire) else { return Ok(()) };
            let denying: Vec<Clientid4> = f
                .opens
                .iter()
                .filter_map(|x| inner.ids.get(x))
                .filter(|e| matches!(e.kind, Kind::Open { deny, .. } if deny & want != 0))
                .map(|e| e.client)
                .collect();
            drop(inner);
            if denying.is_empty() {
                return Ok(());
            }
            if !clear_lapsed(v4, &denying) {
                return Err(Nfsstat4::Locked);
            }
        }
    }
    let client = current_client(ctx)?;
    let mut inner = v4.state.inner.lock();
    let e = find(&mut inner, client, stateid)?;
    if e.file != o.wire {
        return Err(Nfsstat4::BadStateid);
    }
    let access = match &e.kind {
        Kind::Open { access, .. } => *access,
        Kind::Lock { open, .. } => {
            let open = *open;
            match inner.ids.get(&open).map(|e| &e.kind) {
                Some(Kind::Open { access, .. }) => *access,
                _ => return Err(Nfsstat4::BadStateid),
            }
        }
        // A write delegation covers both; a read delegation covers reads (a
        // write through it has no open behind it).
        Kind::Deleg { write: Some(_), .. } => OPEN4_SHARE_ACCESS_BOTH,
        Kind::Deleg { .. } if !write => OPEN4_SHARE_ACCESS_READ,
        Kind::Deleg { .. } => return Err(Nfsstat4::Openmode),
    };
    if access & want == 0 {
        // Reading through a write-only open is allowed (clients read back what they wrote), as in knfsd.
        if !write {
            return Ok(());
        }
        return Err(Nfsstat4::Openmode);
    }
    Ok(())
}

/// A non-special stateid given where any valid one will do (SETATTR without a size).
pub(crate) fn check_stateid_valid(ctx: &Ctx, stateid: &Stateid4) -> Result<(), Nfsstat4> {
    if special(stateid) {
        return Ok(());
    }
    let client = current_client(ctx)?;
    let mut inner = ctx.v4.state.inner.lock();
    find(&mut inner, client, stateid).map(|_| ())
}

// ------------------------------------------------------------ delegations

/// What another client is about to do with a delegated file, which decides the delegations it recalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflict {
    /// Change it (data, attributes, names, links) or open it for writing: every delegation.
    Change,
    /// Read it, open it for reading, lock it: write delegations only (a read
    /// delegation's holder shares the file with readers).
    Read,
}

/// An access to `o` by this COMPOUND's client (or without a session) that
/// changes it (`write`) or reads it: recall other clients' delegations that
/// conflict. NFS4ERR_DELAY while any is outstanding.
pub(crate) fn break_delegations(ctx: &Ctx, o: &Obj, write: bool) -> Result<(), Nfsstat4> {
    let me = ctx.client().ok().map(|c| c.id);
    let conflict = if write { Conflict::Change } else { Conflict::Read };
    if recall(ctx.v4, &o.wire, me, conflict) {
        return Err(Nfsstat4::Delay);
    }
    Ok(())
}

/// The last name of `o` was just removed (by a REMOVE or a RENAME over
/// it), and `o` is a directory (`is_dir`) or a file: if the object is gone
/// and only delegations of it are left (the remover's own: any other
/// client's were recalled first), drop them, since no one can give them
/// back; a client that does not return them with its REMOVE, as ours
/// does, would otherwise keep them until its client id ends.
pub(crate) fn object_removed(ctx: &Ctx, o: &Obj, is_dir: bool) {
    let state = &ctx.v4.state;
    if !state.only_delegated(&o.wire) {
        return;
    }
    // A file may have other names, or be kept alive by the server (removed
    // while open): gone only if its handle no longer works.
    let gone = is_dir || matches!(o.backend().getattr(&o.fh), Err(FsError::Stale | FsError::NoEnt));
    if gone {
        state.forget_delegations_of_gone(&o.wire);
    }
}

/// Recall the delegations of `file` held by clients other than `me` that
/// `conflict` runs into. Whether any is still out (the caller must wait:
/// NFS4ERR_DELAY or JUKEBOX).
pub(crate) fn recall(v4: &Nfs4, file: &Bytes, me: Option<Clientid4>, conflict: Conflict) -> bool {
    let counter = match conflict {
        Conflict::Change => &v4.state.delegations,
        Conflict::Read => &v4.state.write_delegations,
    };
    if counter.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let now = v4.clock.now_ns();
    let lease = v4.config.lease.as_nanos() as u64;
    let mut send = Vec::new();
    let mut lapsed = Vec::new();
    let mut revoked = Vec::new();
    let mut outstanding = false;
    {
        let mut inner = v4.state.inner.lock();
        let Some(f) = inner.files.get(file) else { return false };
        // The delegations in the way.
        let delegs: Vec<Other> = f
            .delegs
            .iter()
            .copied()
            .filter(|o| {
                inner.ids.get(o).is_some_and(|e| {
                    Some(e.client) != me
                        && (conflict == Conflict::Change
                            || matches!(e.kind, Kind::Deleg { write: Some(_), .. }))
                })
            })
            .collect();
        if delegs.is_empty() {
            return false;
        }
        if let Some(f) = inner.files.get_mut(file) {
            f.recalled_ns = now.max(1);
        }
        for o in delegs {
            let Some(e) = inner.ids.get_mut(&o) else { continue };
            let client = e.client;
            if let Kind::Deleg { recalled_ns, .. } = &mut e.kind {
                match recalled_ns {
                    Some(t) if now.saturating_sub(*t) > lease => {
                        revoke(&v4.state, &mut inner, &o);
                        revoked.push(client);
                        continue;
                    }
                    Some(_) => outstanding = true,
                    None => {
                        *recalled_ns = Some(now);
                        outstanding = true;
                        send.push((o, e.seqid, client));
                        inner.recalling.insert(o);
                    }
                }
                lapsed.push(client);
            }
        }
    }
    flag_revoked(v4, &revoked);
    // A lapsed client's delegation is not worth waiting for.
    lapsed.sort();
    lapsed.dedup();
    let mut cleared = true;
    for c in &lapsed {
        let live = v4.sessions.client(*c).is_some_and(|c| c.lease_valid(v4, now));
        if !live {
            v4.expire_if_lapsed(*c);
        } else {
            cleared = false;
        }
    }
    let fh = NfsFh4 { data: eagernfs_xdr::Opaque(file.clone()) };
    for (other, seqid, client) in send {
        match back_session(v4, client) {
            Some(s) => {
                tracing::debug!(client, "recalling a delegation");
                v4.back.recall(s, Stateid4 { seqid, other }, fh.clone());
            }
            None => tracing::info!(
                client,
                "a delegation to recall, but the client has no back channel: sent when it binds one, revoked if not returned within a lease"
            ),
        }
    }
    outstanding && !cleared
}

/// A session of `client` whose back channel works, if it has one.
pub(super) fn back_session(v4: &Nfs4, client: Clientid4) -> Option<Arc<crate::nfs4::session::Session>> {
    v4.sessions.client(client).and_then(|c| {
        let ids = c.m.lock().sessions.clone();
        ids.iter().filter_map(|id| v4.sessions.session(id)).find(|s| v4.back.path_up(s))
    })
}

/// Send `client`'s outstanding recalls again over `session`, whose back channel is new: a
/// recall that found no back channel, or whose connection went away unanswered, reaches the
/// client now instead of ending in revocation (a recall that did arrive is harmless twice).
/// The revocation deadline stays that of the first recall.
pub(crate) fn resend_recalls(v4: &Nfs4, session: &Arc<crate::nfs4::session::Session>) {
    if !v4.has_delegations() {
        return;
    }
    let client = session.client.id;
    let again: Vec<(Stateid4, Bytes)> = {
        let inner = v4.state.inner.lock();
        inner
            .recalling
            .iter()
            .filter_map(|o| inner.ids.get(o).map(|e| (o, e)))
            .filter(|(_, e)| e.client == client)
            .map(|(o, e)| (Stateid4 { seqid: e.seqid, other: *o }, e.file.clone()))
            .collect()
    };
    for (stateid, file) in again {
        tracing::debug!(client, "recalling a delegation again over a new back channel");
        v4.back.recall(session.clone(), stateid, NfsFh4 { data: eagernfs_xdr::Opaque(file) });
    }
}

impl Nfs4 {
    /// An NFSv3 call is about to change the file with wire handle `file`:
    /// whether a delegation stands in the way (answer NFS3ERR_JUKEBOX; the
    /// recall is under way).
    pub(crate) fn v3_change(&self, file: &Bytes) -> bool {
        recall(self, file, None, Conflict::Change)
    }

    /// An NFSv3 READ or an NLM lock of `file` (someone other than any NFSv4
    /// client): whether a write delegation stands in the way (JUKEBOX, or
    /// NLM's grace answer, while it is recalled).
    pub(crate) fn v3_read(&self, file: &Bytes) -> bool {
        recall(self, file, None, Conflict::Read)
    }

    /// Whether any write delegation is out (a cheap test before looking one up).
    pub(crate) fn has_write_delegations(&self) -> bool {
        self.state.write_delegations.load(Ordering::Relaxed) > 0
    }

    /// Whether any delegation is out (a cheap test before looking one up).
    pub(crate) fn has_delegations(&self) -> bool {
        self.state.delegations.load(Ordering::Relaxed) > 0
    }
}

// ------------------------------------------------------------ OPEN

/// The access and deny of an OPEN, checked.
fn share(access: u32, deny: u32) -> Result<(u32, u32), Nfsstat4> {
    let a = access & 0xff;
    if !(1..=3).contains(&a) || access & !0x3_ffff & !0x10_0000 & !0x20_0000 != 0 {
        return Err(Nfsstat4::Inval);
    }
    if deny > 3 {
        return Err(Nfsstat4::Inval);
    }
    Ok((a, deny))
}

pub(crate) fn open(ctx: &mut Ctx, a: &Open4Args) -> Result<Open4ResOk, Nfsstat4> {
    let v4 = ctx.v4;
    let client = ctx.client()?.clone();
    let (access, deny) = share(a.share_access, a.share_deny)?;
    let now = v4.clock.now_ns();
    let in_grace = v4.sessions.in_grace(now);
    let reclaim = matches!(a.claim, OpenClaim4::Previous(_));
    if reclaim {
        if !in_grace {
            return Err(Nfsstat4::NoGrace);
        }
        if !client.can_reclaim(v4) {
            return Err(Nfsstat4::ReclaimBad);
        }
    } else if (in_grace || !client.m.lock().reclaim_complete)
        && !matches!(a.claim, OpenClaim4::DelegateCur { .. } | OpenClaim4::DelegCurFh(_))
    {
        // Also before the client's RECLAIM_COMPLETE (RFC 8881 §18.51.3).
        return Err(Nfsstat4::Grace);
    }
    // The file, and the directory's change if the name was looked up.
    let (file, cinfo, created_mask) = match &a.claim {
        OpenClaim4::Null(name) | OpenClaim4::DelegateCur { file: name, .. } => {
            open_by_name(ctx, a, name, access)?
        }
        OpenClaim4::Fh | OpenClaim4::Previous(_) | OpenClaim4::DelegCurFh(_) => {
            if matches!(a.openhow, Openflag4::Create(_)) {
                return Err(Nfsstat4::Inval);
            }
            let o = match ctx.cur()? {
                Cur::Obj(o) => o.clone(),
                Cur::Pseudo(_) => return Err(Nfsstat4::Isdir),
            };
            (o, ChangeInfo4::default(), None)
        }
        OpenClaim4::DelegatePrev(_) | OpenClaim4::DelegPrevFh => return Err(Nfsstat4::Notsupp),
    };
    let attr = file.backend().getattr(&file.fh).map_err(status)?;
    match attr.ftype {
        FileType::Regular => {}
        FileType::Directory => return Err(Nfsstat4::Isdir),
        FileType::Symlink => return Err(Nfsstat4::Symlink),
        _ => return Err(Nfsstat4::WrongType),
    }
    if access & OPEN4_SHARE_ACCESS_WRITE != 0 && file.options.read_only {
        return Err(Nfsstat4::Rofs);
    }
    // The caller's permission for the access asked (a file it just made is its own).
    if created_mask.is_none() && !reclaim {
        let mut need = 0;
        if access & OPEN4_SHARE_ACCESS_READ != 0 {
            need |= acc::READ;
        }
        if access & OPEN4_SHARE_ACCESS_WRITE != 0 {
            need |= acc::MODIFY;
        }
        let (granted, _) =
            file.backend().access(&file.cred, &file.fh, need | acc::EXECUTE).map_err(status)?;
        let read_ok = need & acc::READ == 0 || granted & (acc::READ | acc::EXECUTE) != 0;
        let write_ok = need & acc::MODIFY == 0 || granted & acc::MODIFY != 0;
        if !read_ok || !write_ok {
            return Err(Nfsstat4::Access);
        }
    }
    let owner = a.owner.owner.0.clone();
    // Share reservations (before any recall: an OPEN they deny has no need of it).
    loop {
        let inner = v4.state.inner.lock();
        match conflicts(v4, &inner, &file.wire, client.id, &owner, access, deny) {
            Ok(()) => break,
            Err(in_way) => {
                drop(inner);
                if !clear_lapsed(v4, &in_way) {
                    return Err(Nfsstat4::ShareDenied);
                }
            }
        }
    }
    // Another client's delegation stands in the way.
    let deleg_claim = match &a.claim {
        OpenClaim4::DelegateCur { delegate_stateid, .. } | OpenClaim4::DelegCurFh(delegate_stateid) => {
            Some(*delegate_stateid)
        }
        _ => None,
    };
    if let Some(d) = deleg_claim {
        let mut inner = v4.state.inner.lock();
        let e = find(&mut inner, client.id, &d)?;
        if !matches!(e.kind, Kind::Deleg { .. }) || e.file != file.wire {
            return Err(Nfsstat4::BadStateid);
        }
    } else {
        // Writing (or denying reads) conflicts with any delegation; reading, with write delegations.
        let conflict = if access & OPEN4_SHARE_ACCESS_WRITE != 0 || deny & OPEN4_SHARE_DENY_READ != 0 {
            Conflict::Change
        } else {
            Conflict::Read
        };
        if recall(v4, &file.wire, Some(client.id), conflict) {
            return Err(Nfsstat4::Delay);
        }
    }
    let stateid = {
        let mut inner = v4.state.inner.lock();
        let existing = inner.files.get(&file.wire).and_then(|f| {
            f.opens.iter().copied().find(|o| {
                inner.ids.get(o).is_some_and(|e| {
                    e.client == client.id && matches!(&e.kind, Kind::Open { owner: eo, .. } if *eo == owner)
                })
            })
        });
        match existing {
            Some(o) => {
                let e = inner.ids.get_mut(&o).expect("found above");
                if let Kind::Open { access: ea, deny: ed, access_used, deny_used, .. } = &mut e.kind {
                    *ea |= access;
                    *ed |= deny;
                    *access_used |= 1 << access;
                    *deny_used |= 1 << deny;
                }
                Stateid4 { seqid: bump(&mut e.seqid), other: o }
            }
            None => {
                room(v4, &mut inner, client.id)?;
                let o = v4.state.new_other(epoch(ctx));
                let kind = Kind::Open { owner, access, deny, access_used: 1 << access, deny_used: 1 << deny };
                insert(
                    &v4.state,
                    &mut inner,
                    o,
                    Entry { seqid: 1, client: client.id, file: file.wire.clone(), kind },
                );
                Stateid4 { seqid: 1, other: o }
            }
        }
    };
    let delegation = delegate(ctx, &client, &file, &attr, access, deny, a.share_access, reclaim, &a.claim);
    ctx.set_cur(Cur::Obj(file));
    ctx.cur_stateid = Some(stateid);
    Ok(Open4ResOk {
        stateid,
        cinfo,
        rflags: OPEN4_RESULT_LOCKTYPE_POSIX,
        attrset: created_mask.unwrap_or_default(),
        delegation,
    })
}

/// Room for one more stateid of `client` (lapsed clients' state goes first).
fn room(v4: &Nfs4, inner: &mut parking_lot::MutexGuard<Inner>, client: Clientid4) -> Result<(), Nfsstat4> {
    if inner.per_client.get(&client).copied().unwrap_or(0) >= v4.state.per_client_max() {
        tracing::warn!(client, "NFSv4 client holds {} stateids: more are delayed", v4.state.per_client_max());
        return Err(Nfsstat4::Delay);
    }
    if inner.ids.len() >= v4.state.max {
        let holders: Vec<Clientid4> = inner.per_client.keys().copied().filter(|c| *c != client).collect();
        // Client records are looked at without the state lock (lock order: clients, then state).
        parking_lot::MutexGuard::unlocked(inner, || {
            let now = v4.clock.now_ns();
            for c in holders {
                if v4.sessions.client(c).is_none_or(|c| !c.lease_valid(v4, now)) {
                    v4.expire_client(c, "lease expired; room was needed for state");
                }
            }
        });
        if inner.ids.len() >= v4.state.max {
            tracing::warn!("NFSv4 state table full ({} stateids): OPEN and LOCK delayed", v4.state.max);
            return Err(Nfsstat4::Delay);
        }
    }
    Ok(())
}

/// OPEN by name in the current directory: look up or create. The file, the
/// directory's change, and (if created) the attributes set.
fn open_by_name<'a>(
    ctx: &Ctx<'a, '_>,
    a: &Open4Args,
    name: &Component4,
    access: u32,
) -> Result<(Obj<'a>, ChangeInfo4, Option<Bitmap4>), Nfsstat4> {
    let dir = match ctx.cur()? {
        Cur::Obj(o) => o.clone(),
        Cur::Pseudo(_) => {
            return Err(if matches!(a.openhow, Openflag4::Create(_)) {
                Nfsstat4::Rofs
            } else {
                Nfsstat4::Isdir
            })
        }
    };
    let dattr = dir.backend().getattr(&dir.fh).map_err(status)?;
    match dattr.ftype {
        FileType::Directory => {}
        FileType::Symlink => return Err(Nfsstat4::Symlink),
        _ => return Err(Nfsstat4::Notdir),
    }
    let name = check_name(name)?;
    match &a.openhow {
        Openflag4::NoCreate => {
            let l = dir.backend().lookup(&dir.cred, &dir.fh, name).map_err(status)?;
            let change = crate::nfs4::attrs::change_of(l.dir_attr.as_ref().unwrap_or(&dattr).ctime);
            let _ = access;
            Ok((dir.sibling(l.handle), ChangeInfo4 { atomic: true, before: change, after: change }, None))
        }
        Openflag4::Create(how) => {
            if dir.options.read_only {
                return Err(Nfsstat4::Rofs);
            }
            let (mode, later, mask) = match how {
                Createhow4::Unchecked(f) => {
                    let t = crate::nfs4::attrs::decode_set(ctx.v4, f)?;
                    (CreateMode::Unchecked(t.set), None, t.mask)
                }
                Createhow4::Guarded(f) => {
                    let t = crate::nfs4::attrs::decode_set(ctx.v4, f)?;
                    (CreateMode::Guarded(t.set), None, t.mask)
                }
                Createhow4::Exclusive(v) => (CreateMode::Exclusive(*v), None, Bitmap4::default()),
                Createhow4::Exclusive41 { verf, attrs } => {
                    let allowed = Bitmap4::from_bits(crate::nfs4::attrs::EXCLCREAT);
                    if !attrs.attrmask.minus(&allowed).is_empty() {
                        return Err(Nfsstat4::Inval);
                    }
                    let t = crate::nfs4::attrs::decode_set(ctx.v4, attrs)?;
                    (CreateMode::Exclusive(*verf), Some(t.set), t.mask)
                }
            };
            // A name made: another client's delegation of the directory goes first.
            break_delegations(ctx, &dir, true)?;
            let c = dir.backend().create(&dir.cred, &dir.fh, name, &mode);
            let c = match c {
                Err(FsError::IsDir) => return Err(Nfsstat4::Isdir),
                r => r.map_err(status)?,
            };
            let file = dir.sibling(c.handle);
            if let Some(set) = later {
                if set != Default::default() {
                    file.backend().setattr(&file.cred, &file.fh, &set, None).map_err(status)?;
                }
            }
            Ok((file, cinfo(&c.dir_wcc), Some(mask)))
        }
    }
}

/// The space limit of a write delegation: none. A limit promises that the
/// holder's writes up to it will find room (RFC 8881 §10.4.1), which only
/// reserving the space would keep; the server reserves nothing, so it
/// promises nothing either way and lets the holder write back when it
/// likes (as knfsd does): a full file system shows up at the holder's
/// write-back (its fsync, or the return), as a local disk's delayed
/// allocation does at fsync.
const SPACE_LIMIT: NfsSpaceLimit4 = NfsSpaceLimit4::Size(u64::MAX);

/// Grant a delegation if the client wants one (or does not mind) and nothing
/// stands in the way: a write delegation to a client opening the file for
/// writing that no other client has open or locked, a read delegation to
/// one opening it for reading only that no other client writes; otherwise
/// why not (OPEN_DELEGATE_NONE_EXT, when the client said what it wants).
#[allow(clippy::too_many_arguments)]
fn delegate(
    ctx: &Ctx,
    client: &Arc<crate::nfs4::session::Client>,
    file: &Obj,
    attr: &eagernfs_vfs::Attr,
    access: u32,
    deny: u32,
    share_access: u32,
    reclaim: bool,
    claim: &OpenClaim4,
) -> OpenDelegation4 {
    let v4 = ctx.v4;
    let want = share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
    let times = share_access & OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS != 0;
    let none = |why| {
        if want == OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE {
            OpenDelegation4::None
        } else {
            OpenDelegation4::NoneExt(OpenNoneDelegation4 {
                why,
                later: matches!(why, 1 | 2).then_some(false),
            })
        }
    };
    if want == OPEN4_SHARE_ACCESS_WANT_NO_DELEG {
        return none(why_no_deleg::NOT_WANTED);
    }
    if want == OPEN4_SHARE_ACCESS_WANT_CANCEL {
        return none(why_no_deleg::CANCELLED);
    }
    if !v4.config.delegations
        || reclaim
        || matches!(claim, OpenClaim4::DelegateCur { .. } | OpenClaim4::DelegCurFh(_))
    {
        return none(why_no_deleg::RESOURCE);
    }
    let writing = access & OPEN4_SHARE_ACCESS_WRITE != 0;
    let write = match want {
        // A write delegation needs an open for writing (the holder's writes were not allowed otherwise).
        OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG if !writing => return none(why_no_deleg::RESOURCE),
        OPEN4_SHARE_ACCESS_WANT_READ_DELEG if writing => return none(why_no_deleg::CONTENTION),
        _ => writing,
    };
    if write {
        // Off by the operator's choice, or on a file system whose other clients could
        // change the file unseen (CephFS: no recall from its capabilities yet).
        if !v4.config.write_delegations || file.export.backend.remote() {
            return none(why_no_deleg::RESOURCE);
        }
    } else if deny != OPEN4_SHARE_DENY_NONE {
        return none(why_no_deleg::CONTENTION);
    }
    let Some(session) = &ctx.session else { return none(why_no_deleg::RESOURCE) };
    if !v4.back.path_up(session) {
        return none(why_no_deleg::RESOURCE);
    }
    // Byte-range locks of others: the holder of a write delegation may lock locally.
    if write {
        let probe = crate::nlm::locks::Held {
            owner: lock_owner(client.id, &Bytes::from_static(b"\0write-delegation")),
            exclusive: true,
            range: crate::nlm::locks::Range { start: 0, end: u64::MAX },
            addr: ctx.call.conn.peer.addr.ip(),
        };
        if v4.state.locks.test(&file.wire, &probe).is_some_and(|h| holder(&h) != Some(client.id)) {
            return none(why_no_deleg::CONTENTION);
        }
    }
    let now = v4.clock.now_ns();
    let mut inner = v4.state.inner.lock();
    if let Some(f) = inner.files.get(&file.wire) {
        // Already holds one: the same stateid.
        if let Some(o) = f.delegs.iter().find(|o| inner.ids.get(*o).is_some_and(|e| e.client == client.id)) {
            let e = &inner.ids[o];
            let stateid = Stateid4 { seqid: e.seqid, other: *o };
            return match &e.kind {
                Kind::Deleg { write: Some(w), .. } => granted_write(stateid, w.times),
                _ if write => none(why_no_deleg::NOT_SUPP_UPGRADE),
                _ => granted_read(stateid),
            };
        }
        if f.recalled_ns != 0 && now.saturating_sub(f.recalled_ns) < RECALL_COOLDOWN_NS {
            return none(why_no_deleg::CONTENTION);
        }
        let others = |e: &&Entry| e.client != client.id;
        let in_way = if write {
            // Any other client's open or delegation.
            f.opens.iter().chain(&f.delegs).filter_map(|o| inner.ids.get(o)).any(|e| others(&e))
        } else {
            // Any open for writing, the client's own too (its writes would go around the delegation).
            f.opens.iter().filter_map(|o| inner.ids.get(o)).any(
                |e| matches!(e.kind, Kind::Open { access, .. } if access & OPEN4_SHARE_ACCESS_WRITE != 0),
            )
        };
        if in_way {
            return none(why_no_deleg::CONTENTION);
        }
    }
    if room(v4, &mut inner, client.id).is_err() {
        return none(why_no_deleg::RESOURCE);
    }
    let o = v4.state.new_other(epoch(ctx));
    let kind = Kind::Deleg {
        recalled_ns: None,
        revoked: false,
        write: write.then(|| {
            Box::new(WriteDeleg {
                times,
                granted_ctime: attr.ctime,
                granted_atime: attr.atime,
                granted_mtime: attr.mtime,
                shown: None,
                probe: None,
            })
        }),
    };
    v4.state.count_granted(&kind);
    insert(&v4.state, &mut inner, o, Entry { seqid: 1, client: client.id, file: file.wire.clone(), kind });
    let stateid = Stateid4 { seqid: 1, other: o };
    if write {
        granted_write(stateid, times)
    } else {
        granted_read(stateid)
    }
}

fn granted_read(stateid: Stateid4) -> OpenDelegation4 {
    OpenDelegation4::Read(OpenReadDelegation4 { stateid, recall: false, permissions: Nfsace4::default() })
}

fn granted_write(stateid: Stateid4, times: bool) -> OpenDelegation4 {
    let w = OpenWriteDelegation4 {
        stateid,
        recall: false,
        space_limit: SPACE_LIMIT,
        permissions: Nfsace4::default(),
    };
    if times {
        OpenDelegation4::WriteAttrsDeleg(w)
    } else {
        OpenDelegation4::Write(w)
    }
}

/// An open stateid of this client for the current file.
fn open_entry<'i>(
    inner: &'i mut Inner,
    client: Clientid4,
    s: &Stateid4,
    file: &Bytes,
) -> Result<&'i mut Entry, Nfsstat4> {
    let e = find(inner, client, s)?;
    if !matches!(e.kind, Kind::Open { .. }) || e.file != *file {
        return Err(Nfsstat4::BadStateid);
    }
    Ok(e)
}

fn cur_obj<'a>(ctx: &Ctx<'a, '_>) -> Result<Obj<'a>, Nfsstat4> {
    match ctx.cur()? {
        Cur::Obj(o) => Ok(o.clone()),
        Cur::Pseudo(_) => Err(Nfsstat4::Isdir),
    }
}

pub(crate) fn close(ctx: &mut Ctx, a: &Close4Args) -> Result<Stateid4, Nfsstat4> {
    let client = current_client(ctx)?;
    let o = cur_obj(ctx)?;
    let s = ctx.stateid(&a.open_stateid)?;
    let v4 = ctx.v4;
    let mut inner = v4.state.inner.lock();
    open_entry(&mut inner, client, &s, &o.wire)?;
    // Locks taken through this open must go first.
    let locks: Vec<(Other, Bytes)> = inner
        .files
        .get(&o.wire)
        .map(|f| f.locks.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|l| match inner.ids.get(&l).map(|e| &e.kind) {
            Some(Kind::Lock { open, owner }) if *open == s.other => Some((l, owner.clone())),
            _ => None,
        })
        .collect();
    if locks.iter().any(|(_, owner)| v4.state.locks.owner_holds(&o.wire, &lock_owner(client, owner))) {
        return Err(Nfsstat4::LocksHeld);
    }
    for (l, _) in locks {
        remove(&v4.state, &mut inner, &l);
    }
    remove(&v4.state, &mut inner, &s.other).ok_or(Nfsstat4::BadStateid)?;
    ctx.cur_stateid = None;
    // The closed stateid is gone: RFC 8881 §18.2.4 has the server answer the invalid special stateid.
    Ok(Stateid4::INVALID)
}

pub(crate) fn open_downgrade(ctx: &mut Ctx, a: &OpenDowngrade4Args) -> Result<Stateid4, Nfsstat4> {
    let client = current_client(ctx)?;
    let o = cur_obj(ctx)?;
    let s = ctx.stateid(&a.open_stateid)?;
    let (access, deny) = share(a.share_access, a.share_deny)?;
    let mut inner = ctx.v4.state.inner.lock();
    let e = open_entry(&mut inner, client, &s, &o.wire)?;
    let Kind::Open { access: ea, deny: ed, access_used, deny_used, .. } = &mut e.kind else {
        return Err(Nfsstat4::BadStateid);
    };
    // Only to modes the open already had (RFC 8881 §18.18.3).
    if access & !*ea != 0
        || deny & !*ed != 0
        || *access_used & (1 << access) == 0
        || *deny_used & (1 << deny) == 0
    {
        return Err(Nfsstat4::Inval);
    }
    *ea = access;
    *ed = deny;
    *access_used = 1 << access;
    *deny_used = 1 << deny;
    let st = Stateid4 { seqid: bump(&mut e.seqid), other: s.other };
    ctx.cur_stateid = Some(st);
    Ok(st)
}

// ------------------------------------------------------------ LOCK, LOCKT, LOCKU

fn denied(h: &Held) -> Lock4Denied {
    let client = if h.owner.host.len() == 10 && h.owner.host[0] == 0 {
        u64::from_be_bytes(h.owner.host[2..10].try_into().unwrap_or([0; 8]))
    } else {
        0
    };
    Lock4Denied {
        offset: h.range.start,
        length: if h.range.end == u64::MAX { u64::MAX } else { h.range.end - h.range.start },
        locktype: if h.exclusive { NfsLockType4::WriteLt } else { NfsLockType4::ReadLt },
        owner: StateOwner4 { clientid: client, owner: eagernfs_xdr::Opaque(h.owner.oh.clone()) },
    }
}

/// LOCK4denied for a lock another client of the file system holds (not
/// one of this server's clients: no client id, no owner).
fn denied_elsewhere(c: &eagernfs_vfs::LockConflict) -> Lock4Denied {
    Lock4Denied {
        offset: c.range.start,
        length: if c.range.end == u64::MAX { u64::MAX } else { c.range.end - c.range.start },
        locktype: if c.exclusive { NfsLockType4::WriteLt } else { NfsLockType4::ReadLt },
        owner: StateOwner4 { clientid: 0, owner: eagernfs_xdr::Opaque(Bytes::new()) },
    }
}

/// The NFSv4 client that holds `h`, if an NFSv4 client does.
fn holder(h: &Held) -> Option<Clientid4> {
    (h.owner.host.len() == 10 && h.owner.host[0] == 0)
        .then(|| u64::from_be_bytes(h.owner.host[2..10].try_into().unwrap_or([0; 8])))
}

pub(crate) fn lock(ctx: &mut Ctx, a: &Lock4Args) -> Lock4Res {
    match lock_inner(ctx, a) {
        Ok(s) => Lock4Res::Ok(s),
        Err(Ok(d)) => Lock4Res::Denied(d),
        Err(Err(s)) => Lock4Res::Err(s),
    }
}

fn lock_inner(ctx: &mut Ctx, a: &Lock4Args) -> Result<Stateid4, Result<Lock4Denied, Nfsstat4>> {
    let v4 = ctx.v4;
    let client = ctx.client().map_err(Err)?.clone();
    let o = cur_obj(ctx).map_err(Err)?;
    let attr = o.backend().getattr(&o.fh).map_err(|e| Err(status(e)))?;
    match attr.ftype {
        FileType::Regular => {}
        FileType::Directory => return Err(Err(Nfsstat4::Isdir)),
        FileType::Symlink => return Err(Err(Nfsstat4::Symlink)),
        _ => return Err(Err(Nfsstat4::WrongType)),
    }
    let r = range(a.offset, a.length).map_err(Err)?;
    let now = v4.clock.now_ns();
    let in_grace = v4.sessions.in_grace(now) || v4_nlm_grace(ctx);
    if a.reclaim {
        if !v4.sessions.in_grace(now) {
            return Err(Err(Nfsstat4::NoGrace));
        }
        if !client.can_reclaim(v4) {
            return Err(Err(Nfsstat4::ReclaimBad));
        }
    } else if in_grace || !client.m.lock().reclaim_complete {
        return Err(Err(Nfsstat4::Grace));
    }
    // The lock owner's stateid for this file: new (from an open) or existing.
    let (lock_other, owner_bytes) = {
        let mut inner = v4.state.inner.lock();
        match &a.locker {
            Locker4::NewOwner(n) => {
                let open_s = ctx.stateid(&n.open_stateid).map_err(Err)?;
                let e = open_entry(&mut inner, client.id, &open_s, &o.wire).map_err(Err)?;
                let Kind::Open { access, .. } = e.kind else { return Err(Err(Nfsstat4::BadStateid)) };
                check_lock_mode(a.locktype, access).map_err(Err)?;
                let owner = n.lock_owner.owner.0.clone();
                let existing = inner.files.get(&o.wire).and_then(|f| {
                    f.locks.iter().copied().find(|l| {
                        inner.ids.get(l).is_some_and(|e| {
                            e.client == client.id
                                && matches!(&e.kind, Kind::Lock { owner: eo, .. } if *eo == owner)
                        })
                    })
                });
                match existing {
                    Some(l) => (l, owner),
                    None => {
                        room(v4, &mut inner, client.id).map_err(Err)?;
                        let l = v4.state.new_other(epoch(ctx));
                        // Seqid 0 until the first lock is granted (it becomes 1 then).
                        insert(
                            &v4.state,
                            &mut inner,
                            l,
                            Entry {
                                seqid: 0,
                                client: client.id,
                                file: o.wire.clone(),
                                kind: Kind::Lock { owner: owner.clone(), open: open_s.other },
                            },
                        );
                        (l, owner)
                    }
                }
            }
            Locker4::Existing(x) => {
                let s = ctx.stateid(&x.lock_stateid).map_err(Err)?;
                let e = find(&mut inner, client.id, &s).map_err(Err)?;
                let (owner, open) = match &e.kind {
                    Kind::Lock { owner, open } if e.file == o.wire => (owner.clone(), *open),
                    _ => return Err(Err(Nfsstat4::BadStateid)),
                };
                let access = match inner.ids.get(&open).map(|e| &e.kind) {
                    Some(Kind::Open { access, .. }) => *access,
                    _ => return Err(Err(Nfsstat4::BadStateid)),
                };
                check_lock_mode(a.locktype, access).map_err(Err)?;
                (s.other, owner)
            }
        }
    };
    let want = Held {
        owner: lock_owner(client.id, &owner_bytes),
        exclusive: a.locktype.is_write(),
        range: r,
        addr: ctx.call.conn.peer.addr.ip(),
    };
    // On a file system that enforces locks itself (CephFS), the lock is
    // taken there too, as NLM's are: it then excludes its other clients.
    let m = mirror::BackendMirror::of(&o.export.backend, &o.fh);
    // The file system's answer may come after a grace period began (a
    // take-over ended a dead head's session): NLM's grace is asked again then.
    let gate = ctx.call.state.locks.as_ref().filter(|_| !a.reclaim).map(|l| l.gate(as_mirror(&m)));
    let mirror: &dyn crate::nlm::locks::Mirror = match &gate {
        Some(g) => g,
        None => as_mirror(&m),
    };
    let mut tries = 0;
    loop {
        let notice = Grant::never_queued(want.addr);
        match v4.state.locks.lock(&o.wire, want.clone(), false, notice, mirror) {
            LockResult::Granted => break,
            LockResult::Denied | LockResult::Blocked => {
                let conflict = v4.state.locks.test(&o.wire, &want);
                tries += 1;
                match conflict {
                    Some(h) if tries < 3 && holder(&h).is_some_and(|c| v4.expire_if_lapsed(c)) => continue,
                    Some(h) => return Err(Ok(denied(&h))),
                    // Nothing here: the file system's other clients hold it.
                    None => match m.as_ref().map(|m| m.test(&want)) {
                        Some(Ok(Some(c))) => return Err(Ok(denied_elsewhere(&c))),
                        _ if tries < 3 => continue,
                        _ => return Err(Err(Nfsstat4::Delay)),
                    },
                }
            }
            // The file system did not answer in time.
            LockResult::Unavailable => return Err(Err(Nfsstat4::Delay)),
            LockResult::NoLocks => return Err(Err(Nfsstat4::Delay)),
            // A grace period began while the file system was asked.
            LockResult::Grace => return Err(Err(Nfsstat4::Grace)),
        }
    }
    let mut inner = v4.state.inner.lock();
    let e = inner.ids.get_mut(&lock_other).ok_or(Err(Nfsstat4::BadStateid))?;
    let s = Stateid4 { seqid: bump(&mut e.seqid), other: lock_other };
    ctx.cur_stateid = Some(s);
    Ok(s)
}

/// Whether NLM's grace period (after a restart with NFSv3 lock holders) is on.
fn v4_nlm_grace(ctx: &Ctx) -> bool {
    ctx.call.state.locks.as_ref().is_some_and(|l| l.in_grace())
}

fn check_lock_mode(t: NfsLockType4, access: u32) -> Result<(), Nfsstat4> {
    let need = if t.is_write() { OPEN4_SHARE_ACCESS_WRITE } else { OPEN4_SHARE_ACCESS_READ };
    if access & need == 0 {
        return Err(Nfsstat4::Openmode);
    }
    Ok(())
}

pub(crate) fn lockt(ctx: &mut Ctx, a: &Lockt4Args) -> Lockt4Res {
    let v4 = ctx.v4;
    let client = match current_client(ctx) {
        Ok(c) => c,
        Err(s) => return Lockt4Res::Err(s),
    };
    let o = match cur_obj(ctx) {
        Ok(o) => o,
        Err(s) => return Lockt4Res::Err(s),
    };
    match o.backend().getattr(&o.fh) {
        Ok(attr) if attr.ftype == FileType::Regular => {}
        Ok(attr) if attr.ftype == FileType::Directory => return Lockt4Res::Err(Nfsstat4::Isdir),
        Ok(attr) if attr.ftype == FileType::Symlink => return Lockt4Res::Err(Nfsstat4::Symlink),
        Ok(_) => return Lockt4Res::Err(Nfsstat4::WrongType),
        Err(e) => return Lockt4Res::Err(status(e)),
    }
    let r = match range(a.offset, a.length) {
        Ok(r) => r,
        Err(s) => return Lockt4Res::Err(s),
    };
    if v4.sessions.in_grace(v4.clock.now_ns()) || v4_nlm_grace(ctx) {
        return Lockt4Res::Err(Nfsstat4::Grace);
    }
    // Another client's write delegation: its holder may hold locks it has not told us of.
    if let Err(s) = break_delegations(ctx, &o, false) {
        return Lockt4Res::Err(s);
    }
    let want = Held {
        owner: lock_owner(client, &a.owner.owner.0),
        exclusive: a.locktype.is_write(),
        range: r,
        addr: ctx.call.conn.peer.addr.ip(),
    };
    for _ in 0..3 {
        match v4.state.locks.test(&o.wire, &want) {
            None => {
                // Free here; the file system's other clients may hold it.
                let Some(m) = mirror::BackendMirror::of(&o.export.backend, &o.fh) else {
                    return Lockt4Res::Ok;
                };
                return match m.test(&want) {
                    Ok(None) => Lockt4Res::Ok,
                    Ok(Some(c)) => Lockt4Res::Denied(denied_elsewhere(&c)),
                    Err(e) => Lockt4Res::Err(status(e)),
                };
            }
            Some(h) if holder(&h).is_some_and(|c| c != client && v4.expire_if_lapsed(c)) => continue,
            Some(h) => return Lockt4Res::Denied(denied(&h)),
        }
    }
    Lockt4Res::Err(Nfsstat4::Delay)
}

pub(crate) fn locku(ctx: &mut Ctx, a: &Locku4Args) -> Result<Stateid4, Nfsstat4> {
    let v4 = ctx.v4;
    let client = current_client(ctx)?;
    let o = cur_obj(ctx)?;
    let r = range(a.offset, a.length)?;
    let s = ctx.stateid(&a.lock_stateid)?;
    let mut inner = v4.state.inner.lock();
    let e = find(&mut inner, client, &s)?;
    let owner = match &e.kind {
        Kind::Lock { owner, .. } if e.file == o.wire => owner.clone(),
        _ => return Err(Nfsstat4::BadStateid),
    };
    let st = Stateid4 { seqid: bump(&mut e.seqid), other: s.other };
    drop(inner);
    let m = mirror::BackendMirror::of(&o.export.backend, &o.fh);
    let granted = v4.state.locks.unlock(&o.wire, &lock_owner(client, &owner), r, as_mirror(&m));
    announce(ctx, granted);
    ctx.cur_stateid = Some(st);
    Ok(st)
}

/// NLM waiters an NFSv4 unlock let through get their GRANTED callbacks.
fn announce(ctx: &Ctx, granted: Vec<crate::nlm::locks::Waiter<Grant>>) {
    if let Some(lm) = &ctx.call.state.locks {
        lm.announce(granted);
    }
}

// ------------------------------------------------------------ FREE_STATEID, TEST_STATEID, DELEGRETURN

pub(crate) fn free_stateid(ctx: &mut Ctx, s: &Stateid4) -> Result<(), Nfsstat4> {
    let v4 = ctx.v4;
    let client = ctx.client()?.clone();
    let s = ctx.stateid(s)?;
    let mut inner = v4.state.inner.lock();
    let e = match inner.ids.get(&s.other) {
        Some(e) if e.client == client.id => e.clone(),
        _ => return Err(Nfsstat4::BadStateid),
    };
    match &e.kind {
        Kind::Open { .. } => return Err(Nfsstat4::LocksHeld),
        Kind::Lock { owner, .. } => {
            if v4.state.locks.owner_holds(&e.file, &lock_owner(client.id, owner)) {
                return Err(Nfsstat4::LocksHeld);
            }
        }
        Kind::Deleg { revoked: false, .. } => return Err(Nfsstat4::LocksHeld),
        Kind::Deleg { revoked: true, .. } => {}
    }
    remove(&v4.state, &mut inner, &s.other);
    let revoked_left = inner
        .ids
        .values()
        .any(|e| e.client == client.id && matches!(e.kind, Kind::Deleg { revoked: true, .. }));
    if !revoked_left {
        client.status_flags.fetch_and(!SEQ4_STATUS_RECALLABLE_STATE_REVOKED, Ordering::Relaxed);
    }
    Ok(())
}

pub(crate) fn test_stateid(ctx: &mut Ctx, list: &[Stateid4]) -> Result<TestStateid4ResOk, Nfsstat4> {
    let client = current_client(ctx)?;
    let mut inner = ctx.v4.state.inner.lock();
    let v = list
        .iter()
        .map(|s| {
            if special(s) || *s == Stateid4::CURRENT || *s == Stateid4::INVALID {
                return Nfsstat4::BadStateid;
            }
            match find(&mut inner, client, s) {
                Ok(_) => Nfsstat4::Ok,
                Err(e) => e,
            }
        })
        .collect();
    Ok(TestStateid4ResOk(v))
}

pub(crate) fn delegreturn(ctx: &mut Ctx, s: &Stateid4) -> Result<(), Nfsstat4> {
    let client = current_client(ctx)?;
    let o = cur_obj(ctx)?;
    let s = ctx.stateid(s)?;
    let v4 = ctx.v4;
    let mut inner = v4.state.inner.lock();
    let e = find(&mut inner, client, &s)?;
    if !matches!(e.kind, Kind::Deleg { .. }) || e.file != o.wire {
        return Err(Nfsstat4::BadStateid);
    }
    remove(&v4.state, &mut inner, &s.other);
    Ok(())
}

/// GET_DIR_DELEGATION (RFC 8881 §18.39): a delegation of the current
/// directory, with no notifications: any change to its entries or its
/// attributes by another client (NFSv4 or NFSv3) recalls it, and that
/// change waits (NFS4ERR_DELAY, JUKEBOX) until it is returned. Its holder
/// may trust its listing and names meanwhile, without asking at each open.
/// GDD4_UNAVAIL (no error) when one cannot be had: delegations off, no back
/// channel, a file system others change unseen (CephFS, several heads), a
/// recent recall, or no room.
pub(crate) fn get_dir_delegation(
    ctx: &mut Ctx,
    a: &GetDirDelegation4Args,
) -> Result<GetDirDelegation4Res, Nfsstat4> {
    let _ = a;
    let client = ctx.client()?.clone();
    let o = match ctx.cur()? {
        Cur::Obj(o) => o.clone(),
        // The pseudo-root changes only with the exports: nothing to promise.
        Cur::Pseudo(_) => return Ok(GetDirDelegation4Res::Unavail { will_signal: false }),
    };
    let attr = o.backend().getattr(&o.fh).map_err(status)?;
    if attr.ftype != FileType::Directory {
        return Err(Nfsstat4::Notdir);
    }
    let v4 = ctx.v4;
    let unavail = Ok(GetDirDelegation4Res::Unavail { will_signal: false });
    if !v4.config.delegations || o.export.backend.remote() {
        return unavail;
    }
    let Some(session) = &ctx.session else { return unavail };
    if !v4.back.path_up(session) {
        return unavail;
    }
    let now = v4.clock.now_ns();
    let mut inner = v4.state.inner.lock();
    if let Some(f) = inner.files.get(&o.wire) {
        if let Some(other) =
            f.delegs.iter().find(|d| inner.ids.get(*d).is_some_and(|e| e.client == client.id))
        {
            let e = &inner.ids[other];
            return Ok(dir_granted(Stateid4 { seqid: e.seqid, other: *other }));
        }
        if f.recalled_ns != 0 && now.saturating_sub(f.recalled_ns) < RECALL_COOLDOWN_NS {
            return unavail;
        }
    }
    if room(v4, &mut inner, client.id).is_err() {
        return unavail;
    }
    let other = v4.state.new_other(epoch(ctx));
    let kind = Kind::Deleg { recalled_ns: None, revoked: false, write: None };
    v4.state.count_granted(&kind);
    insert(&v4.state, &mut inner, other, Entry { seqid: 1, client: client.id, file: o.wire.clone(), kind });
    Ok(dir_granted(Stateid4 { seqid: 1, other }))
}

fn dir_granted(stateid: Stateid4) -> GetDirDelegation4Res {
    GetDirDelegation4Res::Granted(GetDirDelegation4ResOk {
        cookieverf: [0; 8],
        stateid,
        notification: Bitmap4::default(),
        child_attributes: Bitmap4::default(),
        dir_attributes: Bitmap4::default(),
    })
}

pub(crate) fn want_delegation(ctx: &mut Ctx, a: &WantDelegation4Args) -> Result<OpenDelegation4, Nfsstat4> {
    let _ = (ctx, a);
    Err(Nfsstat4::Notsupp)
}
