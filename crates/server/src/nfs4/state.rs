//! Open, lock and delegation state (RFC 8881 §8–§10, §18.2–§18.18,
//! §18.38, §18.48).
//!
//! Every piece of state is named by a stateid whose `other` field is the
//! boot epoch, a counter and 32 random bits: a stateid is found only by an
//! exact match, so one that was forged, or belongs to another client or
//! another start of the server, is NFS4ERR_BAD_STATEID; one whose sequence
//! number is behind is NFS4ERR_OLD_STATEID.
//!
//! - Opens: one stateid per open owner and file, with the union of the
//!   share access and deny modes of its OPENs; another open owner's OPEN
//!   that conflicts is NFS4ERR_SHARE_DENIED, and I/O needs a stateid whose
//!   access covers it (or the anonymous stateid, if no deny mode forbids).
//! - Byte-range locks: taken in the lock table NLM uses, under an owner
//!   named by the client id, so an NFSv3 client's lock and an NFSv4.1
//!   client's exclude each other on the same bytes.
//! - Read delegations: granted to a client with a working back channel that
//!   opens a file no other client has open for writing; recalled (CB_RECALL,
//!   the conflicting request answered NFS4ERR_DELAY, or NFSv3's JUKEBOX) when
//!   another client opens it for writing or changes it, by any protocol;
//!   revoked when not returned within a lease.
//! - Write delegations: granted to a client with a working back channel that
//!   opens a file for writing when no other client has it open; recalled
//!   the same way when anyone else opens, reads, changes, renames, removes,
//!   links or locks it (NFSv3 and NLM included). Another client's GETATTR of
//!   its size or change is answered with what the holder reports in
//!   CB_GETATTR (a holder that cannot say has it recalled); with RFC 9754's
//!   delegated timestamps the holder also sets atime and mtime itself.
//! - A client whose lease ran out keeps its state (a courteous server)
//!   until another client's request runs into it: then the lapsed client is
//!   expired and the request goes ahead.
//!
//! Bounds: at most `max_stateids` stateids over all clients and a
//! sixteenth of that (no fewer than 1024) per client; beyond, OPEN and LOCK
//! answer NFS4ERR_DELAY after lapsed clients' state is cleared.
//!
//! # Layout
//! - this file: the table ([`StateTable`]) and its primitives, below
//!   everything that names the NFSv4 service.
//! - `ops`: the operations, the I/O checks and delegation recalls, which
//!   work on the table through the service ([`super::Nfs4`]).
//! - `deleg`: what a write delegation changes for others: GETATTR answered
//!   through CB_GETATTR, and the holder's delegated timestamps.

mod ops;

mod deleg;

pub(crate) use deleg::{check_deleg_times, delegated_attrs};
pub(crate) use ops::{
    break_delegations, check_io, check_stateid_valid, close, delegreturn, free_stateid, get_dir_delegation,
    lock, lockt, locku, object_removed, open, open_downgrade, resend_recalls, test_stateid, want_delegation,
};

use crate::nlm::locks::{LockTable, Owner, Range};
use crate::nlm::mirror;
use crate::nlm::Grant;
use bytes::Bytes;
use eagernfs_proto::nfs4::*;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

type Other = [u8; NFS4_OTHER_SIZE];

/// What a stateid names.
#[derive(Debug, Clone)]
enum Kind {
    Open {
        owner: Bytes,
        /// Union of the share access and deny of its OPENs.
        access: u32,
        deny: u32,
        /// Which access and deny values its OPENs used (bit n: value n), for OPEN_DOWNGRADE.
        access_used: u8,
        deny_used: u8,
    },
    Lock {
        owner: Bytes,
        /// The open it came from.
        open: Other,
    },
    Deleg {
        /// When a recall was sent (the service clock, ns).
        recalled_ns: Option<u64>,
        /// Not returned in time: only FREE_STATEID is left to do with it.
        revoked: bool,
        /// A write delegation's own state; `None` for a read delegation.
        write: Option<Box<WriteDeleg>>,
    },
}

/// What a write delegation needs besides its stateid: while the holder
/// writes and changes the file without telling the server, another
/// client's GETATTR is answered with what the holder says in CB_GETATTR
/// (RFC 8881 §10.4.3), and with RFC 9754's delegated timestamps the holder
/// sets the file's times itself.
#[derive(Debug, Clone)]
struct WriteDeleg {
    /// OPEN_DELEGATE_WRITE_ATTRS_DELEG: the holder keeps atime and mtime.
    times: bool,
    /// The file's ctime when it was granted: the change attribute an
    /// unmodified file reports in CB_GETATTR.
    granted_ctime: eagernfs_vfs::Timestamp,
    /// Its access and modify times then: delegated times must be later to count.
    granted_atime: eagernfs_vfs::Timestamp,
    granted_mtime: eagernfs_vfs::Timestamp,
    /// What other clients were shown since CB_GETATTR first reported a change.
    shown: Option<Shown>,
    /// The CB_GETATTR in flight, or last answered.
    probe: Option<Arc<crate::nfs4::callback::Probe>>,
}

/// The attributes of a file modified under a write delegation, as shown to other clients.
#[derive(Debug, Clone, Copy)]
struct Shown {
    /// The holder's change attribute these were made for (a new one is a new modification).
    holder_change: u64,
    size: u64,
    ctime: eagernfs_vfs::Timestamp,
    mtime: eagernfs_vfs::Timestamp,
}

#[derive(Debug, Clone)]
struct Entry {
    seqid: u32,
    client: Clientid4,
    file: Bytes,
    kind: Kind,
}

/// The state on one file.
#[derive(Debug, Default)]
struct FileState {
    opens: Vec<Other>,
    locks: Vec<Other>,
    delegs: Vec<Other>,
    /// When a delegation of this file was last recalled (none are granted for a while after).
    recalled_ns: u64,
}

#[derive(Default)]
struct Inner {
    ids: HashMap<Other, Entry>,
    files: HashMap<Bytes, FileState>,
    per_client: HashMap<Clientid4, usize>,
    /// Delegations recalled and neither returned nor revoked yet.
    recalling: HashSet<Other>,
}

/// Every client's opens, locks and delegations.
pub(crate) struct StateTable {
    inner: Mutex<Inner>,
    locks: Arc<LockTable<Grant>>,
    /// The exports, to find a file's lock mirror (a CephFS takes every
    /// lock itself too) when a client's locks go without a call on the file.
    exports: crate::SharedExports,
    max: usize,
    next: AtomicU32,
    /// Delegations granted and not returned (so NFSv3 calls skip the lookup when there are none).
    delegations: AtomicUsize,
    /// Of those, write delegations (so reads and GETATTRs skip the lookup when there are none).
    write_delegations: AtomicUsize,
    /// Where the stateid gauge goes.
    stats: Arc<crate::Stats>,
}

/// A delegation is not granted on a file for this long after one was recalled from it.
const RECALL_COOLDOWN_NS: u64 = 5_000_000_000;

/// The lock-table host name of an NFSv4 client: a NUL byte (which no NLM
/// caller name keeps) and the client id.
fn lock_host(client: Clientid4) -> Bytes {
    let mut v = vec![0u8, b'4'];
    v.extend_from_slice(&client.to_be_bytes());
    Bytes::from(v)
}

fn lock_owner(client: Clientid4, owner: &Bytes) -> Owner {
    Owner { host: lock_host(client), oh: owner.clone(), svid: 0 }
}

/// The range `[offset, offset+length)` (length all ones: to the end of the file).
fn range(offset: u64, length: u64) -> Result<Range, Nfsstat4> {
    if length == 0 {
        return Err(Nfsstat4::Inval);
    }
    if length == u64::MAX {
        return Ok(Range { start: offset, end: u64::MAX });
    }
    let end = offset.checked_add(length).ok_or(Nfsstat4::Inval)?;
    Ok(Range { start: offset, end })
}

impl StateTable {
    pub(crate) fn new(
        locks: Arc<LockTable<Grant>>,
        exports: crate::SharedExports,
        max: usize,
        stats: Arc<crate::Stats>,
    ) -> StateTable {
        StateTable {
            inner: Default::default(),
            locks,
            exports,
            max,
            next: AtomicU32::new(1),
            delegations: AtomicUsize::new(0),
            write_delegations: AtomicUsize::new(0),
            stats,
        }
    }

    fn gauge(&self, inner: &Inner) {
        self.stats.nfs4_stateids.store(inner.ids.len() as u64, Ordering::Relaxed);
    }

    fn per_client_max(&self) -> usize {
        (self.max / 16).max(1024)
    }

    fn new_other(&self, epoch: u32) -> Other {
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&epoch.to_be_bytes());
        o[4..8].copy_from_slice(&self.next.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        o[8..].copy_from_slice(&rand::random::<u32>().to_be_bytes());
        o
    }

    /// How many stateids `client` holds.
    pub(crate) fn client_state_count(&self, client: Clientid4) -> usize {
        self.inner.lock().per_client.get(&client).copied().unwrap_or(0)
    }

    /// Whether `file` has delegations out and neither opens nor locks: if
    /// its last name goes, nothing is left that could still use them.
    pub(crate) fn only_delegated(&self, file: &Bytes) -> bool {
        if self.delegations.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let inner = self.inner.lock();
        inner
            .files
            .get(file)
            .is_some_and(|f| !f.delegs.is_empty() && f.opens.is_empty() && f.locks.is_empty())
    }

    /// `file` is gone (its last name removed) with no open or lock of it
    /// left: drop its delegations, which no holder can return any more (its
    /// handle is stale, so a DELEGRETURN fails at PUTFH). A holder that
    /// names one later hears BAD_STATEID, which means "not yours".
    /// How many went.
    pub(crate) fn forget_delegations_of_gone(&self, file: &Bytes) -> usize {
        let mut inner = self.inner.lock();
        let Some(f) = inner.files.get(file) else { return 0 };
        if !f.opens.is_empty() || !f.locks.is_empty() {
            return 0;
        }
        let delegs = f.delegs.clone();
        for o in &delegs {
            remove(self, &mut inner, o);
        }
        inner.files.remove(file);
        delegs.len()
    }

    /// Drop everything `client` holds (its locks too); how many stateids went.
    pub(crate) fn release_client(&self, client: Clientid4) -> usize {
        let mut inner = self.inner.lock();
        let mine: Vec<Other> =
            inner.ids.iter().filter(|(_, e)| e.client == client).map(|(k, _)| *k).collect();
        for o in &mine {
            remove(self, &mut inner, o);
        }
        inner.per_client.remove(&client);
        drop(inner);
        // Each file's mirror passes the releases on to its file system.
        let exports = self.exports.read().clone();
        let _ = self.locks.release_host(&lock_host(client), None, &|fh| mirror::mirror_for(&exports, fh));
        mine.len()
    }
}

/// Remove stateid `o` everywhere.
fn remove(t: &StateTable, inner: &mut Inner, o: &Other) -> Option<Entry> {
    let e = inner.ids.remove(o)?;
    inner.recalling.remove(o);
    t.gauge(inner);
    if let Some(f) = inner.files.get_mut(&e.file) {
        f.opens.retain(|x| x != o);
        f.locks.retain(|x| x != o);
        let before = f.delegs.len();
        f.delegs.retain(|x| x != o);
        if f.delegs.len() < before {
            t.count_gone(&e.kind);
        }
        if f.opens.is_empty() && f.locks.is_empty() && f.delegs.is_empty() && f.recalled_ns == 0 {
            inner.files.remove(&e.file);
        }
    }
    if let Some(n) = inner.per_client.get_mut(&e.client) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            inner.per_client.remove(&e.client);
        }
    }
    Some(e)
}

/// Revoke delegation `o`: it leaves its file but its stateid stays (DELEG_REVOKED until freed).
fn revoke(t: &StateTable, inner: &mut Inner, o: &Other) {
    inner.recalling.remove(o);
    let Some(e) = inner.ids.get_mut(o) else { return };
    if let Kind::Deleg { revoked, .. } = &mut e.kind {
        *revoked = true;
    }
    let (file, kind) = (e.file.clone(), e.kind.clone());
    if let Some(f) = inner.files.get_mut(&file) {
        let before = f.delegs.len();
        f.delegs.retain(|x| x != o);
        if f.delegs.len() < before {
            t.count_gone(&kind);
        }
    }
}

impl StateTable {
    /// A delegation of kind `k` was granted.
    fn count_granted(&self, k: &Kind) {
        self.delegations.fetch_add(1, Ordering::Relaxed);
        if matches!(k, Kind::Deleg { write: Some(_), .. }) {
            self.write_delegations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A delegation of kind `k` left its file (returned, revoked, or its client's state dropped).
    fn count_gone(&self, k: &Kind) {
        self.delegations.fetch_sub(1, Ordering::Relaxed);
        if matches!(k, Kind::Deleg { write: Some(_), .. }) {
            self.write_delegations.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn insert(t: &StateTable, inner: &mut Inner, o: Other, e: Entry) {
    let file = inner.files.entry(e.file.clone()).or_default();
    match e.kind {
        Kind::Open { .. } => file.opens.push(o),
        Kind::Lock { .. } => file.locks.push(o),
        Kind::Deleg { .. } => file.delegs.push(o),
    }
    *inner.per_client.entry(e.client).or_default() += 1;
    inner.ids.insert(o, e);
    t.gauge(inner);
}

/// Find a stateid of `client` and check its sequence number (0: any).
fn find<'i>(inner: &'i mut Inner, client: Clientid4, s: &Stateid4) -> Result<&'i mut Entry, Nfsstat4> {
    let e = inner.ids.get_mut(&s.other).ok_or(Nfsstat4::BadStateid)?;
    if e.client != client {
        return Err(Nfsstat4::BadStateid);
    }
    if let Kind::Deleg { revoked: true, .. } = e.kind {
        return Err(Nfsstat4::DelegRevoked);
    }
    if s.seqid != 0 {
        if s.seqid > e.seqid {
            return Err(Nfsstat4::BadStateid);
        }
        if s.seqid < e.seqid {
            return Err(Nfsstat4::OldStateid);
        }
    }
    Ok(e)
}

fn special(s: &Stateid4) -> bool {
    *s == Stateid4::ANONYMOUS || *s == Stateid4::BYPASS
}

/// The next sequence number (1 after all ones, skipping 0).
fn bump(seqid: &mut u32) -> u32 {
    *seqid = if *seqid == u32::MAX { 1 } else { *seqid + 1 };
    *seqid
}
