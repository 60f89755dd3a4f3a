//! The client's NFSv4 state (sans-IO): opens, byte-range locks and
//! delegations it holds, kept so that I/O can name the right stateid and so
//! that all of it can be reclaimed after a server restart.
//!
//! - Opens: one per file and open owner (this client's owner for a local
//!   uid, as Linux keeps one per credential), with how many local opens use
//!   each access mode; the server's open has the union of those modes.
//! - Locks: per file and lock owner (a local process's, or an open file
//!   description's, number), the ranges granted, with POSIX's rules (a new
//!   lock replaces the owner's overlapping ones; an unlock may split one).
//! - Delegations the server gave with an OPEN, until returned.
//!
//! [`StateTable::generation`] changes whenever the stateids change wholesale
//! (a reclaim), so a request built with old stateids knows to rebuild.

use crate::ops::Cred;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use std::collections::HashMap;

pub use crate::ops::OpenAccess;

impl OpenAccess {
    /// The `share_access` bits.
    pub fn bits(self) -> u32 {
        match self {
            OpenAccess::Read => OPEN4_SHARE_ACCESS_READ,
            OpenAccess::Write => OPEN4_SHARE_ACCESS_WRITE,
            OpenAccess::Both => OPEN4_SHARE_ACCESS_BOTH,
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            OpenAccess::Read => 0,
            OpenAccess::Write => 1,
            OpenAccess::Both => 2,
        }
    }
}

/// Which open: a file and the local uid whose open owner holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct OpenKey {
    pub(crate) fh: Bytes,
    pub(crate) uid: u32,
}

/// One open the server knows of.
#[derive(Debug, Clone)]
pub(crate) struct Open {
    pub(crate) fh: NfsFh4,
    /// The open owner's name (its uid).
    pub(crate) owner: Bytes,
    pub(crate) stateid: Stateid4,
    /// Local opens by access (read, write, both).
    counts: [u32; 3],
    /// The access the server's open has now.
    pub(crate) access: u32,
    /// The deny bits (always none today: Linux's client never denies).
    pub(crate) deny: u32,
    /// Who opened it (a reclaim or re-open is sent as them).
    pub(crate) cred: Cred,
}

impl Open {
    /// The access the local opens need together (0: none left).
    pub(crate) fn wanted(&self) -> u32 {
        let [r, w, b] = self.counts;
        let mut a = 0;
        if r > 0 || b > 0 {
            a |= OPEN4_SHARE_ACCESS_READ;
        }
        if w > 0 || b > 0 {
            a |= OPEN4_SHARE_ACCESS_WRITE;
        }
        a
    }
}

/// Which lock state: a file and a lock owner.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LockKey {
    pub(crate) fh: Bytes,
    pub(crate) owner: u64,
}

/// A granted byte range: `[offset, end)`; `end == u64::MAX` is to the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) offset: u64,
    pub(crate) end: u64,
    pub(crate) write: bool,
}

impl Range {
    /// NFSv4's length (all ones for "to the end").
    pub(crate) fn length(&self) -> u64 {
        if self.end == u64::MAX {
            u64::MAX
        } else {
            self.end - self.offset
        }
    }
}

/// The end of a range given as NFSv4 does (offset, length; all ones: to the end).
pub(crate) fn end_of(offset: u64, length: u64) -> u64 {
    if length == u64::MAX {
        u64::MAX
    } else {
        offset.saturating_add(length)
    }
}

/// One lock owner's locks on one file.
#[derive(Debug, Clone)]
pub(crate) struct Locks {
    pub(crate) fh: NfsFh4,
    /// The lock stateid, once the server gave one.
    pub(crate) stateid: Option<Stateid4>,
    /// Which open the first lock came from (its owner's uid).
    pub(crate) open_uid: u32,
    pub(crate) ranges: Vec<Range>,
}

/// Remove `[offset, end)` from `ranges` (splitting where needed).
pub(crate) fn cut(ranges: &mut Vec<Range>, offset: u64, end: u64) {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    for r in ranges.drain(..) {
        if r.end <= offset || r.offset >= end {
            out.push(r);
            continue;
        }
        if r.offset < offset {
            out.push(Range { end: offset, ..r });
        }
        if r.end > end {
            out.push(Range { offset: end, ..r });
        }
    }
    *ranges = out;
}

/// A delegation held.
#[derive(Debug, Clone)]
pub(crate) struct Delegation {
    pub(crate) fh: NfsFh4,
    pub(crate) stateid: Stateid4,
    pub(crate) write: bool,
    /// The server recalled it: no longer a promise (it is being returned).
    pub(crate) recalled: bool,
    /// A write delegation's file as the OPEN that granted it showed it
    /// (that OPEN's GETATTR): what CB_GETATTR answers while nothing is
    /// unwritten. `None`: that reply carried no attributes.
    pub(crate) granted: Option<GrantedAttrs>,
    /// When it was last used ([`StateTable::delegation_for`]'s tick), for
    /// returning the least recently used beyond the limit.
    used: u64,
}

/// The change attribute and size of a file when a write delegation of it
/// was granted. A holder with nothing unwritten answers CB_GETATTR with
/// this change attribute, which tells the server the file is unmodified
/// (RFC 8881 §10.4.3): the server's own attributes are then right, and it
/// keeps the delegation out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantedAttrs {
    /// The change attribute the server showed at the grant.
    pub change: u64,
    /// The size then.
    pub size: u64,
}

/// Everything this client holds on the server.
#[derive(Debug, Default)]
pub(crate) struct StateTable {
    pub(crate) opens: HashMap<OpenKey, Open>,
    pub(crate) locks: HashMap<LockKey, Locks>,
    /// By the stateid's `other` field.
    pub(crate) delegations: HashMap<[u8; NFS4_OTHER_SIZE], Delegation>,
    /// The delegation of each file (its handle), at most one.
    deleg_by_fh: HashMap<Bytes, [u8; NFS4_OTHER_SIZE]>,
    /// Counts delegation uses (the LRU order).
    deleg_tick: u64,
    generation: u64,
}

impl StateTable {
    /// Changes when stateids are replaced wholesale (see the module docs).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The stateids were replaced (a reclaim or re-open).
    pub(crate) fn bump(&mut self) {
        self.generation += 1;
    }

    /// The stateid for I/O on `fh`: an open whose access covers it (the
    /// caller's own first), else the anonymous stateid (RFC 8881 §8.2.3).
    /// Sent with sequence id 0, "the current one", so an OPEN that moved
    /// the sequence on meanwhile does not make the I/O fail. Not an open
    /// no local open uses any more: its CLOSE may be on its way.
    pub(crate) fn io_stateid(&self, fh: &[u8], uid: u32, write: bool) -> Stateid4 {
        let need = if write { OPEN4_SHARE_ACCESS_WRITE } else { OPEN4_SHARE_ACCESS_READ };
        let usable = |o: &&Open| o.access & need != 0 && o.wanted() != 0;
        let own = self.opens.get(&OpenKey { fh: Bytes::copy_from_slice(fh), uid });
        let found =
            own.filter(usable).or_else(|| self.opens.values().filter(|o| &o.fh.data[..] == fh).find(usable));
        match found {
            Some(o) => Stateid4 { seqid: 0, other: o.stateid.other },
            None => Stateid4::ANONYMOUS,
        }
    }

    /// Keep delegation `stateid` of `fh` (replacing any other of the file)
    /// and, past `max` held, give up the least recently used ones: returned
    /// for the caller to DELEGRETURN (an eighth of `max` at once, so the
    /// cost of choosing is spread over many grants). `granted`: the file's
    /// attributes in the granting OPEN's reply. A delegation granted again
    /// (a later OPEN of a file whose delegation is held answers the same
    /// stateid) keeps the attributes of its first grant: those are the
    /// server's reference for "unmodified", not the file as it is now.
    pub(crate) fn add_delegation(
        &mut self,
        fh: NfsFh4,
        stateid: Stateid4,
        write: bool,
        granted: Option<GrantedAttrs>,
        max: usize,
    ) -> Vec<(NfsFh4, Stateid4)> {
        self.deleg_tick += 1;
        let key = fh.data.0.clone();
        if let Some(old) = self.deleg_by_fh.insert(key, stateid.other) {
            if old != stateid.other {
                self.delegations.remove(&old);
            }
        }
        let granted = match self.delegations.get(&stateid.other) {
            Some(held) if held.write == write && held.granted.is_some() => held.granted,
            _ => granted.filter(|_| write),
        };
        self.delegations.insert(
            stateid.other,
            Delegation { fh, stateid, write, recalled: false, granted, used: self.deleg_tick },
        );
        if self.delegations.len() <= max.max(1) {
            return Vec::new();
        }
        let mut by_age: Vec<([u8; NFS4_OTHER_SIZE], u64)> =
            self.delegations.iter().map(|(o, d)| (*o, d.used)).collect();
        by_age.sort_unstable_by_key(|(_, used)| *used);
        let excess = self.delegations.len() - max.max(1);
        let n = excess.max(max / 8).min(by_age.len() - 1);
        by_age[..n].iter().filter_map(|(o, _)| self.remove_delegation(o)).map(|d| (d.fh, d.stateid)).collect()
    }

    /// The delegation held on `fh` that is still a promise (not recalled),
    /// counted as used now.
    pub(crate) fn delegation_for(&mut self, fh: &[u8]) -> Option<&Delegation> {
        let o = self.deleg_by_fh.get(fh)?;
        self.deleg_tick += 1;
        let d = self.delegations.get_mut(o)?;
        if d.recalled {
            return None;
        }
        d.used = self.deleg_tick;
        Some(d)
    }

    /// The delegation held on `fh`, recalled or not (not counted as a use).
    pub(crate) fn held_delegation(&self, fh: &[u8]) -> Option<&Delegation> {
        self.delegations.get(self.deleg_by_fh.get(fh)?)
    }

    /// The server recalled delegation `other`: it promises nothing from now on.
    pub(crate) fn recalled(&mut self, other: &[u8; NFS4_OTHER_SIZE]) {
        if let Some(d) = self.delegations.get_mut(other) {
            d.recalled = true;
        }
    }

    /// Forget delegation `other` (returned, revoked or evicted).
    pub(crate) fn remove_delegation(&mut self, other: &[u8; NFS4_OTHER_SIZE]) -> Option<Delegation> {
        let d = self.delegations.remove(other)?;
        if self.deleg_by_fh.get(&d.fh.data.0) == Some(other) {
            self.deleg_by_fh.remove(&d.fh.data.0);
        }
        Some(d)
    }

    /// Forget every delegation (the server lost or revoked them).
    pub(crate) fn clear_delegations(&mut self) {
        self.delegations.clear();
        self.deleg_by_fh.clear();
    }

    /// Count one more local open of `key`; the access the server's open
    /// must have now, and whether an OPEN must ask for more than it has.
    pub(crate) fn add_local(&mut self, key: &OpenKey, access: OpenAccess) -> Option<&mut Open> {
        let o = self.opens.get_mut(key)?;
        o.counts[access.index()] += 1;
        Some(o)
    }

    /// Record an OPEN's answer for `key` with one local open of `access`.
    pub(crate) fn opened(
        &mut self,
        key: OpenKey,
        fh: NfsFh4,
        owner: Bytes,
        cred: &Cred,
        access: OpenAccess,
        stateid: Stateid4,
    ) {
        let o = self.opens.entry(key).or_insert_with(|| Open {
            fh,
            owner,
            stateid,
            counts: [0; 3],
            access: 0,
            deny: OPEN4_SHARE_DENY_NONE,
            cred: cred.clone(),
        });
        o.counts[access.index()] += 1;
        o.access |= access.bits();
        if newer(stateid.seqid, o.stateid.seqid) || o.stateid.other != stateid.other {
            o.stateid = stateid;
        }
    }

    /// One local open of `key` with `access` ended: what is left to do on
    /// the server (nothing, a downgrade to the access still wanted, or a close).
    pub(crate) fn drop_local(&mut self, key: &OpenKey, access: OpenAccess) -> Option<CloseAction> {
        let o = self.opens.get_mut(key)?;
        let c = &mut o.counts[access.index()];
        *c = c.saturating_sub(1);
        let want = o.wanted();
        Some(if want == 0 {
            CloseAction::Close(o.stateid)
        } else if want != o.access {
            CloseAction::Downgrade(o.stateid, want)
        } else {
            CloseAction::Nothing
        })
    }

    /// The server's answer to a CLOSE or OPEN_DOWNGRADE of `key`.
    pub(crate) fn closed(&mut self, key: &OpenKey, downgraded: Option<(Stateid4, u32)>) {
        match downgraded {
            Some((stateid, access)) => {
                if let Some(o) = self.opens.get_mut(key) {
                    o.stateid = stateid;
                    o.access = access;
                }
            }
            None => {
                self.opens.remove(key);
            }
        }
    }
}

/// What ending a local open asks of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseAction {
    /// Other local opens still need all the access there is.
    Nothing,
    /// OPEN_DOWNGRADE to this access.
    Downgrade(Stateid4, u32),
    /// CLOSE: no local open is left.
    Close(Stateid4),
}

/// Whether sequence id `a` is after `b` (they wrap, skipping 0).
pub(crate) fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_xdr::Opaque;

    fn fh(b: &'static [u8]) -> NfsFh4 {
        NfsFh4 { data: Opaque::from_static(b) }
    }

    fn sid(seqid: u32, n: u8) -> Stateid4 {
        Stateid4 { seqid, other: [n; 12] }
    }

    #[test]
    fn io_uses_an_open_that_covers_it_else_the_anonymous_stateid() {
        let mut t = StateTable::default();
        let key = OpenKey { fh: Bytes::from_static(b"f"), uid: 5 };
        assert_eq!(t.io_stateid(b"f", 5, false), Stateid4::ANONYMOUS);
        t.opened(
            key.clone(),
            fh(b"f"),
            Bytes::from_static(b"o5"),
            &Cred::root(),
            OpenAccess::Read,
            sid(1, 9),
        );
        assert_eq!(t.io_stateid(b"f", 5, false), Stateid4 { seqid: 0, other: [9; 12] });
        assert_eq!(t.io_stateid(b"f", 7, false), Stateid4 { seqid: 0, other: [9; 12] }, "another uid's open");
        assert_eq!(t.io_stateid(b"f", 5, true), Stateid4::ANONYMOUS, "a read open does not cover writes");
        assert_eq!(t.io_stateid(b"g", 5, false), Stateid4::ANONYMOUS);
    }

    #[test]
    fn the_last_local_close_closes_and_a_narrower_need_downgrades() {
        let mut t = StateTable::default();
        let key = OpenKey { fh: Bytes::from_static(b"f"), uid: 0 };
        t.opened(key.clone(), fh(b"f"), Bytes::new(), &Cred::root(), OpenAccess::Read, sid(1, 1));
        t.add_local(&key, OpenAccess::Both).unwrap();
        t.opened(key.clone(), fh(b"f"), Bytes::new(), &Cred::root(), OpenAccess::Write, sid(2, 1));
        assert_eq!(t.opens[&key].access, OPEN4_SHARE_ACCESS_BOTH);
        assert_eq!(t.opens[&key].stateid.seqid, 2);
        assert_eq!(t.drop_local(&key, OpenAccess::Both), Some(CloseAction::Nothing), "a writer remains");
        assert_eq!(
            t.drop_local(&key, OpenAccess::Write),
            Some(CloseAction::Downgrade(sid(2, 1), OPEN4_SHARE_ACCESS_READ))
        );
        t.closed(&key, Some((sid(3, 1), OPEN4_SHARE_ACCESS_READ)));
        assert_eq!(t.drop_local(&key, OpenAccess::Read), Some(CloseAction::Close(sid(3, 1))));
        t.closed(&key, None);
        assert!(t.opens.is_empty());
        assert_eq!(t.drop_local(&key, OpenAccess::Read), None);
    }

    #[test]
    fn an_older_open_answer_does_not_replace_a_newer_stateid() {
        let mut t = StateTable::default();
        let key = OpenKey { fh: Bytes::from_static(b"f"), uid: 0 };
        t.opened(key.clone(), fh(b"f"), Bytes::new(), &Cred::root(), OpenAccess::Read, sid(3, 1));
        t.opened(key.clone(), fh(b"f"), Bytes::new(), &Cred::root(), OpenAccess::Read, sid(2, 1));
        assert_eq!(t.opens[&key].stateid.seqid, 3);
        assert!(newer(1, u32::MAX), "wraps");
    }

    #[test]
    fn delegations_are_found_by_file_and_the_least_recently_used_go_past_the_limit() {
        let mut t = StateTable::default();
        let fhn = |i: u32| NfsFh4 { data: Opaque(Bytes::from(i.to_be_bytes().to_vec())) };
        let sidn = |i: u32| Stateid4 { seqid: 1, other: [i as u8; 12] };
        for i in 0..16 {
            assert!(t.add_delegation(fhn(i), sidn(i), false, None, 16).is_empty());
        }
        // File 0 is used again: the oldest is file 1 now.
        assert_eq!(t.delegation_for(&0u32.to_be_bytes()).unwrap().stateid, sidn(0));
        let gone = t.add_delegation(fhn(16), sidn(16), false, None, 16);
        assert_eq!(gone.len(), 2, "an eighth of the limit at once: {gone:?}");
        assert_eq!(gone.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>(), vec![fhn(1), fhn(2)]);
        assert_eq!(t.delegations.len(), 15);
        assert!(t.delegation_for(&1u32.to_be_bytes()).is_none());
        assert!(t.delegation_for(&0u32.to_be_bytes()).is_some());
        // A recalled delegation is no promise, though kept until returned.
        t.recalled(&sidn(3).other);
        assert!(t.delegation_for(&3u32.to_be_bytes()).is_none());
        assert!(t.delegations.contains_key(&sidn(3).other));
        // A new delegation of the same file replaces the old one.
        t.add_delegation(fhn(4), sidn(40), false, None, 16);
        assert_eq!(t.delegation_for(&4u32.to_be_bytes()).unwrap().stateid, sidn(40));
        assert!(!t.delegations.contains_key(&sidn(4).other));
        assert!(t.remove_delegation(&sidn(40).other).is_some());
        assert!(t.delegation_for(&4u32.to_be_bytes()).is_none());
        t.clear_delegations();
        assert!(t.delegation_for(&0u32.to_be_bytes()).is_none());
    }

    #[test]
    fn a_write_delegation_keeps_the_attributes_of_its_first_grant() {
        let mut t = StateTable::default();
        let file = fh(b"file");
        let first_sid = sid(1, 7);
        let first = GrantedAttrs { change: 100, size: 10 };
        t.add_delegation(file.clone(), first_sid, true, Some(first), 16);
        // An OPEN of the file while it is held answers the same stateid, with the file as it
        // is now: the server's "unmodified" is still the first grant's change attribute.
        t.add_delegation(file.clone(), first_sid, true, Some(GrantedAttrs { change: 200, size: 20 }), 16);
        assert_eq!(t.held_delegation(b"file").unwrap().granted, Some(first));
        // A new delegation (another stateid) starts from its own grant.
        let second = GrantedAttrs { change: 300, size: 30 };
        t.add_delegation(file.clone(), sid(1, 8), true, Some(second), 16);
        assert_eq!(t.held_delegation(b"file").unwrap().granted, Some(second));
        // A read delegation keeps none: CB_GETATTR is about write delegations only.
        t.add_delegation(file, sid(1, 9), false, Some(second), 16);
        assert_eq!(t.held_delegation(b"file").unwrap().granted, None);
    }

    #[test]
    fn unlocking_cuts_and_splits_ranges() {
        let r = |o, e| Range { offset: o, end: e, write: true };
        let mut v = vec![r(0, 100), r(200, u64::MAX)];
        cut(&mut v, 50, 60);
        assert_eq!(v, vec![r(0, 50), r(60, 100), r(200, u64::MAX)]);
        cut(&mut v, 90, 250);
        assert_eq!(v, vec![r(0, 50), r(60, 90), r(250, u64::MAX)]);
        cut(&mut v, 0, u64::MAX);
        assert!(v.is_empty());
        assert_eq!(end_of(10, u64::MAX), u64::MAX);
        assert_eq!(r(250, u64::MAX).length(), u64::MAX);
        assert_eq!(r(10, 30).length(), 20);
    }
}
