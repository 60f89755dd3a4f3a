//! The byte-range lock table: POSIX `fcntl` semantics between lock owners.
//!
//! An owner is (client host name, owner handle, svid), as NLM names it. Locks
//! of one owner never conflict with each other: a new lock replaces whatever
//! the owner held on its range (splitting or joining its other locks, as
//! `fcntl` does), and an unlock of a range releases exactly that range.
//! Locks of different owners conflict when their ranges overlap and either
//! is exclusive. A blocked request waits in its file's queue, in arrival
//! order; whenever locks of the file are released the queue is tried again
//! and what can be granted is granted at once, for the caller to announce
//! (NLM's GRANTED callback).
//!
//! Files are spread over shards by file handle, each with its own mutex, so
//! lock traffic on different files does not serialise.
//!
//! A [`Mirror`] makes the file system behind a file take part: every lock
//! the table would grant is first taken there (and refused if it refuses:
//! another client of a cluster file system holds it), every release is
//! passed on, and the mirror hears when the table holds nothing more for the
//! file. Its calls happen under the file's shard lock, so they are ordered
//! exactly as the table's own changes. A request the mirror refused (no
//! conflict here) waits like any other and is tried again by [`LockTable::retry`].

use bytes::Bytes;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Who holds or wants a lock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Owner {
    /// The client's `caller_name`.
    pub(crate) host: Bytes,
    /// The owner handle (`oh`).
    pub(crate) oh: Bytes,
    pub(crate) svid: i32,
}

/// A byte range `[start, end)`; `end == u64::MAX` reaches the end of the file however it grows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl Range {
    /// From NLM's offset and length (0: to the end of the file).
    pub(crate) fn from_nlm(offset: u64, len: u64) -> Range {
        let end = if len == 0 { u64::MAX } else { offset.saturating_add(len) };
        Range { start: offset, end }
    }

    /// NLM's length for this range (0: to the end of the file).
    pub(crate) fn nlm_len(&self) -> u64 {
        if self.end == u64::MAX {
            0
        } else {
            self.end - self.start
        }
    }

    fn overlaps(&self, o: &Range) -> bool {
        self.start < o.end && o.start < self.end
    }
}

/// One held lock.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub(crate) owner: Owner,
    pub(crate) exclusive: bool,
    pub(crate) range: Range,
    /// The address the lock was taken from: only that host's status
    /// monitor may have it dropped (SM_NOTIFY), so nobody can free another
    /// host's locks by naming it.
    pub(crate) addr: IpAddr,
}

/// A blocked request, and what is needed to tell its client it was granted.
#[derive(Debug, Clone)]
pub(crate) struct Waiter<T> {
    pub(crate) want: Held,
    /// Whatever the caller needs to announce the grant (the request's arguments).
    pub(crate) notice: T,
}

/// What the file system behind a file says to a lock the table would grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Taken there too.
    Granted,
    /// Someone else holds a conflicting lock there.
    Denied,
    /// It cannot answer now (a stalled cluster): try later.
    Unavailable,
}

/// The file system's side of one file's locks (see the module docs).
pub(crate) trait Mirror {
    /// Take `want` in the file system too, if it allows.
    fn admit(&self, want: &Held) -> Admit;
    /// Release `owner`'s locks on `range` in the file system.
    fn release(&self, owner: &Owner, range: Range);
    /// The table holds no lock and no request for the file any more.
    fn idle(&self);
    /// Whether a new lock may be granted now (false in a grace period, when
    /// only reclaims are). Asked before a waiter is tried and again after the
    /// file system admitted a request: that answer can take long (the MDS
    /// holds a request on a lock of a dead head's session until the session
    /// ends, which a take-over does only once the grace period is in force),
    /// so a request that began before the grace period must not end in a
    /// grant during it.
    fn open(&self) -> bool {
        true
    }
}

/// Locks only between this server's clients.
pub(crate) struct NoMirror;

impl Mirror for NoMirror {
    fn admit(&self, _: &Held) -> Admit {
        Admit::Granted
    }
    fn release(&self, _: &Owner, _: Range) {}
    fn idle(&self) {}
}

/// The answer to a lock request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LockResult {
    Granted,
    /// A conflicting lock is held; the request was not queued.
    Denied,
    /// Queued: it will be granted when the conflicts go.
    Blocked,
    /// The table is full.
    NoLocks,
    /// The file system could not answer (and the request did not ask to wait).
    Unavailable,
    /// A grace period began while the file system was asked ([`Mirror::open`]):
    /// not granted, not queued.
    Grace,
}

#[derive(Debug)]
struct FileLocks<T> {
    held: Vec<Held>,
    waiting: Vec<Waiter<T>>,
}

impl<T> Default for FileLocks<T> {
    fn default() -> Self {
        FileLocks { held: Vec::new(), waiting: Vec::new() }
    }
}

impl<T> FileLocks<T> {
    fn conflict(&self, want: &Held) -> Option<&Held> {
        self.held.iter().find(|h| {
            h.owner != want.owner && h.range.overlaps(&want.range) && (h.exclusive || want.exclusive)
        })
    }

    /// Take `want` for its owner (no conflict checked): the owner's locks on
    /// the range are replaced, neighbours of the same kind joined.
    fn apply(&mut self, want: Held) {
        self.release(&want.owner, want.range);
        let mut merged = want;
        // Join touching or overlapping locks of the same owner and kind.
        loop {
            let join = self.held.iter().position(|h| {
                h.owner == merged.owner
                    && h.exclusive == merged.exclusive
                    && h.range.start <= merged.range.end
                    && merged.range.start <= h.range.end
            });
            let Some(i) = join else { break };
            let h = self.held.swap_remove(i);
            merged.range.start = merged.range.start.min(h.range.start);
            merged.range.end = merged.range.end.max(h.range.end);
        }
        self.held.push(merged);
    }

    /// Give back in the file system what `mirror` just admitted for `want`
    /// (a grace period began meanwhile), keeping there what its owner held
    /// of the range before.
    fn undo_admit(&self, want: &Held, mirror: &dyn Mirror) {
        mirror.release(&want.owner, want.range);
        for h in self.held.iter().filter(|h| h.owner == want.owner && h.range.overlaps(&want.range)) {
            let range =
                Range { start: h.range.start.max(want.range.start), end: h.range.end.min(want.range.end) };
            if mirror.admit(&Held { range, ..h.clone() }) != Admit::Granted {
                tracing::warn!(?range, "a lock held before could not be taken again in the file system");
            }
        }
    }

    /// Release `range` of `owner`'s locks (splitting a lock that straddles it).
    fn release(&mut self, owner: &Owner, range: Range) {
        let mut kept = Vec::with_capacity(self.held.len() + 1);
        for h in self.held.drain(..) {
            if &h.owner != owner || !h.range.overlaps(&range) {
                kept.push(h);
                continue;
            }
            if h.range.start < range.start {
                kept.push(Held { range: Range { start: h.range.start, end: range.start }, ..h.clone() });
            }
            if range.end < h.range.end {
                kept.push(Held { range: Range { start: range.end, end: h.range.end }, ..h });
            }
        }
        self.held = kept;
    }

    /// Grant every waiter that no longer conflicts here and that `mirror`
    /// admits, in arrival order (a waiter also waits behind an earlier
    /// waiter it conflicts with, so a stream of shared locks cannot starve
    /// an exclusive one).
    fn grant_waiters(&mut self, mirror: &dyn Mirror) -> Vec<Waiter<T>> {
        let mut granted = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i].want;
            let behind = self.waiting[..i].iter().any(|e| {
                e.want.owner != w.owner
                    && e.want.range.overlaps(&w.range)
                    && (e.want.exclusive || w.exclusive)
            });
            if behind || self.conflict(w).is_some() {
                i += 1;
                continue;
            }
            if !mirror.open() {
                break;
            }
            if mirror.admit(w) != Admit::Granted {
                i += 1;
                continue;
            }
            if !mirror.open() {
                self.undo_admit(w, mirror);
                break;
            }
            let waiter = self.waiting.remove(i);
            self.apply(waiter.want.clone());
            granted.push(waiter);
        }
        granted
    }

    fn is_empty(&self) -> bool {
        self.held.is_empty() && self.waiting.is_empty()
    }
}

const SHARDS: usize = 16;

/// Every file's locks. `T` is what a waiter carries to announce its grant.
pub(crate) struct LockTable<T> {
    shards: Vec<parking_lot::Mutex<HashMap<Bytes, FileLocks<T>>>>,
    /// Locks held and requests waiting over all files, against `max_locks`.
    held: AtomicU64,
    waiting: AtomicU64,
    max_locks: u64,
    gauges: Option<Arc<crate::Stats>>,
}

impl<T: Clone> LockTable<T> {
    /// A table that holds at most `max_locks` locks and waiters together.
    pub(crate) fn new(max_locks: u64, gauges: Option<Arc<crate::Stats>>) -> Self {
        LockTable {
            shards: (0..SHARDS).map(|_| Default::default()).collect(),
            held: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            max_locks,
            gauges,
        }
    }

    fn shard(&self, fh: &[u8]) -> &parking_lot::Mutex<HashMap<Bytes, FileLocks<T>>> {
        // FNV-1a: handles are already random-looking, any mix will do.
        let mut h: u32 = 0x811c_9dc5;
        for b in fh {
            h ^= *b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
        &self.shards[h as usize % SHARDS]
    }

    /// Update the counters after a file's entry changed from `before` to `after` (held, waiting).
    fn account(&self, before: (usize, usize), after: (usize, usize)) {
        let adjust = |c: &AtomicU64, b: usize, a: usize| {
            if a >= b {
                c.fetch_add((a - b) as u64, Ordering::Relaxed);
            } else {
                c.fetch_sub((b - a) as u64, Ordering::Relaxed);
            }
        };
        adjust(&self.held, before.0, after.0);
        adjust(&self.waiting, before.1, after.1);
        if let Some(s) = &self.gauges {
            s.locks_held.store(self.held.load(Ordering::Relaxed), Ordering::Relaxed);
            s.locks_waiting.store(self.waiting.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Run `f` on `fh`'s locks, keeping the counters and dropping an empty
    /// entry (telling `mirror`, under the same lock).
    fn with_file<R>(&self, fh: &Bytes, mirror: &dyn Mirror, f: impl FnOnce(&mut FileLocks<T>) -> R) -> R {
        let mut shard = self.shard(fh).lock();
        let file = shard.entry(fh.clone()).or_default();
        let before = (file.held.len(), file.waiting.len());
        let r = f(file);
        let after = (file.held.len(), file.waiting.len());
        if file.is_empty() {
            shard.remove(fh);
            mirror.idle();
        }
        drop(shard);
        self.account(before, after);
        r
    }

    /// The lock that would stop `want`, if any (TEST).
    pub(crate) fn test(&self, fh: &Bytes, want: &Held) -> Option<Held> {
        let shard = self.shard(fh).lock();
        shard.get(fh).and_then(|f| f.conflict(want).cloned())
    }

    /// Take `want`, or queue it when `block` (LOCK). A request already
    /// queued for the same owner and range is not queued twice.
    pub(crate) fn lock(
        &self,
        fh: &Bytes,
        want: Held,
        block: bool,
        notice: T,
        mirror: &dyn Mirror,
    ) -> LockResult {
        let full = self.held.load(Ordering::Relaxed) + self.waiting.load(Ordering::Relaxed) >= self.max_locks;
        self.with_file(fh, mirror, |file| {
            if !mirror.open() {
                return LockResult::Grace;
            }
            if file.conflict(&want).is_none() {
                if full && !file.held.iter().any(|h| h.owner == want.owner) {
                    return LockResult::NoLocks;
                }
                match mirror.admit(&want) {
                    Admit::Granted if !mirror.open() => {
                        file.undo_admit(&want, mirror);
                        return LockResult::Grace;
                    }
                    Admit::Granted => {
                        // A queued request of the same owner that this one supersedes goes.
                        file.waiting.retain(|w| !(w.want.owner == want.owner && w.want.range == want.range));
                        file.apply(want);
                        return LockResult::Granted;
                    }
                    Admit::Unavailable if !block => return LockResult::Unavailable,
                    // Held elsewhere (or no answer yet): refused or queued as for a conflict here.
                    Admit::Denied | Admit::Unavailable => {}
                }
            }
            if !block {
                return LockResult::Denied;
            }
            let queued = file.waiting.iter().any(|w| {
                w.want.owner == want.owner && w.want.range == want.range && w.want.exclusive == want.exclusive
            });
            if !queued {
                if full {
                    return LockResult::NoLocks;
                }
                file.waiting.push(Waiter { want, notice });
            }
            LockResult::Blocked
        })
    }

    /// Release `range` of `owner`'s locks on `fh` (UNLOCK); returns the
    /// waiters that this granted.
    pub(crate) fn unlock(
        &self,
        fh: &Bytes,
        owner: &Owner,
        range: Range,
        mirror: &dyn Mirror,
    ) -> Vec<Waiter<T>> {
        self.with_file(fh, mirror, |file| {
            // The file system first: a waiter granted below takes it there next.
            mirror.release(owner, range);
            file.release(owner, range);
            file.grant_waiters(mirror)
        })
    }

    /// Try `fh`'s waiters again (the file system refused them before).
    pub(crate) fn retry(&self, fh: &Bytes, mirror: &dyn Mirror) -> Vec<Waiter<T>> {
        if !self.shard(fh).lock().contains_key(fh) {
            return Vec::new();
        }
        self.with_file(fh, mirror, |file| file.grant_waiters(mirror))
    }

    /// Files with queued requests, and one notice of each (to find its file system).
    pub(crate) fn files_waiting(&self) -> Vec<(Bytes, T)> {
        let mut out = Vec::new();
        for shard in &self.shards {
            for (fh, file) in shard.lock().iter() {
                if let Some(w) = file.waiting.first() {
                    out.push((fh.clone(), w.notice.clone()));
                }
            }
        }
        out
    }

    /// Withdraw a queued request (CANCEL): true if one was queued.
    pub(crate) fn cancel(
        &self,
        fh: &Bytes,
        owner: &Owner,
        range: Range,
        mirror: &dyn Mirror,
    ) -> (bool, Vec<Waiter<T>>) {
        self.with_file(fh, mirror, |file| {
            let before = file.waiting.len();
            file.waiting.retain(|w| !(&w.want.owner == owner && w.want.range == range));
            let found = file.waiting.len() < before;
            // A request behind the withdrawn one may now go.
            (found, if found { file.grant_waiters(mirror) } else { Vec::new() })
        })
    }

    /// Drop every lock and queued request of host `host` taken from `addr`
    /// (`None`: from any address), on every file; returns the waiters granted
    /// as a result and how many locks went. `mirror_for` gives each file's
    /// mirror.
    pub(crate) fn release_host(
        &self,
        host: &[u8],
        addr: Option<IpAddr>,
        mirror_for: &dyn Fn(&Bytes) -> Box<dyn Mirror>,
    ) -> (usize, Vec<Waiter<T>>) {
        let mine = |h: &Held| h.owner.host == host && addr.is_none_or(|a| a == h.addr);
        let mut released = 0;
        let mut granted = Vec::new();
        for shard in &self.shards {
            let mut map = shard.lock();
            let mut delta = (0usize, 0usize, 0usize, 0usize);
            map.retain(|fh, file| {
                let before = (file.held.len(), file.waiting.len());
                if !file.held.iter().any(mine) && !file.waiting.iter().any(|w| mine(&w.want)) {
                    delta.0 += before.0;
                    delta.1 += before.1;
                    delta.2 += before.0;
                    delta.3 += before.1;
                    return true;
                }
                let mirror = mirror_for(fh);
                for h in file.held.iter().filter(|h| mine(h)) {
                    mirror.release(&h.owner, h.range);
                }
                file.held.retain(|h| !mine(h));
                file.waiting.retain(|w| !mine(&w.want));
                released += before.0 - file.held.len();
                granted.extend(file.grant_waiters(&*mirror));
                delta.0 += before.0;
                delta.1 += before.1;
                delta.2 += file.held.len();
                delta.3 += file.waiting.len();
                if file.is_empty() {
                    mirror.idle();
                }
                !file.is_empty()
            });
            drop(map);
            self.account((delta.0, delta.1), (delta.2, delta.3));
        }
        (released, granted)
    }

    /// Whether `owner` holds any lock on `fh`.
    pub(crate) fn owner_holds(&self, fh: &Bytes, owner: &Owner) -> bool {
        let shard = self.shard(fh).lock();
        shard.get(fh).is_some_and(|f| f.held.iter().any(|h| &h.owner == owner))
    }

    /// The hosts (name, address) holding at least one lock now.
    #[cfg(test)]
    pub(crate) fn hosts(&self) -> Vec<(Bytes, IpAddr)> {
        let mut out: Vec<(Bytes, IpAddr)> = Vec::new();
        for shard in &self.shards {
            for file in shard.lock().values() {
                for h in &file.held {
                    if !out.iter().any(|(n, a)| *n == h.owner.host && *a == h.addr) {
                        out.push((h.owner.host.clone(), h.addr));
                    }
                }
            }
        }
        out
    }

    /// Locks held now over all files.
    #[cfg(test)]
    pub(crate) fn held_count(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn owner(n: u8) -> Owner {
        Owner { host: Bytes::from(vec![b'h', n]), oh: Bytes::from(vec![n]), svid: n as i32 }
    }
    fn held(n: u8, exclusive: bool, start: u64, end: u64) -> Held {
        Held { owner: owner(n), exclusive, range: Range { start, end }, addr: "127.0.0.1".parse().unwrap() }
    }
    fn table() -> LockTable<u32> {
        LockTable::new(1000, None)
    }
    fn fh() -> Bytes {
        Bytes::from_static(b"file")
    }

    #[test]
    fn shared_locks_coexist_and_exclusive_ones_conflict() {
        let t = table();
        assert_eq!(t.lock(&fh(), held(1, false, 0, 10), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(2, false, 5, 15), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(3, true, 9, 12), false, 0, &NoMirror), LockResult::Denied);
        assert_eq!(t.lock(&fh(), held(3, true, 15, 20), false, 0, &NoMirror), LockResult::Granted);
        let c = t.test(&fh(), &held(4, false, 0, u64::MAX)).unwrap();
        assert_eq!(c.owner, owner(3));
    }

    #[test]
    fn unlocking_the_middle_splits_a_lock_and_a_waiter_gets_the_hole() {
        let t = table();
        assert_eq!(t.lock(&fh(), held(1, true, 0, 100), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(2, true, 40, 60), true, 7, &NoMirror), LockResult::Blocked);
        // The same request again is not queued twice.
        assert_eq!(t.lock(&fh(), held(2, true, 40, 60), true, 7, &NoMirror), LockResult::Blocked);
        let granted = t.unlock(&fh(), &owner(1), Range { start: 30, end: 70 }, &NoMirror);
        assert_eq!(granted.len(), 1);
        assert_eq!(granted[0].notice, 7);
        assert_eq!(t.held_count(), 3);
        assert!(t.test(&fh(), &held(3, false, 0, 30)).is_some());
        assert!(t.test(&fh(), &held(3, false, 30, 40)).is_none());
        assert_eq!(t.test(&fh(), &held(3, false, 50, 51)).unwrap().owner, owner(2));
        // Owner 2 asking again finds its lock: granted, nothing added.
        assert_eq!(t.lock(&fh(), held(2, true, 40, 60), true, 7, &NoMirror), LockResult::Granted);
        assert_eq!(t.held_count(), 3);
    }

    #[test]
    fn an_owner_converts_its_own_lock_and_neighbours_join() {
        let t = table();
        t.lock(&fh(), held(1, false, 0, 10), false, 0, &NoMirror);
        t.lock(&fh(), held(1, false, 10, 20), false, 0, &NoMirror);
        assert_eq!(t.held_count(), 1);
        assert_eq!(t.lock(&fh(), held(1, true, 5, 15), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.held_count(), 3);
        assert_eq!(t.lock(&fh(), held(2, false, 0, 5), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(2, false, 5, 6), false, 0, &NoMirror), LockResult::Denied);
    }

    #[test]
    fn a_host_s_locks_go_only_for_its_own_address() {
        let t = table();
        t.lock(&fh(), held(1, true, 0, 10), false, 0, &NoMirror);
        assert_eq!(t.lock(&fh(), held(2, true, 0, 10), true, 9, &NoMirror), LockResult::Blocked);
        let (n, granted) =
            t.release_host(b"h\x01", Some("127.0.0.2".parse().unwrap()), &|_| Box::new(NoMirror));
        assert_eq!((n, granted.len()), (0, 0));
        let (n, granted) =
            t.release_host(b"h\x01", Some("127.0.0.1".parse().unwrap()), &|_| Box::new(NoMirror));
        assert_eq!((n, granted.len()), (1, 1));
        assert_eq!(t.hosts().len(), 1);
    }

    #[test]
    fn waiters_are_granted_in_arrival_order_as_conflicts_go() {
        let t = table();
        t.lock(&fh(), held(1, false, 0, 10), false, 0, &NoMirror);
        assert_eq!(t.lock(&fh(), held(2, true, 0, 10), true, 2, &NoMirror), LockResult::Blocked);
        assert_eq!(t.lock(&fh(), held(3, true, 5, 20), true, 3, &NoMirror), LockResult::Blocked);
        let granted = t.unlock(&fh(), &owner(1), Range { start: 0, end: u64::MAX }, &NoMirror);
        assert_eq!(granted.iter().map(|w| w.notice).collect::<Vec<_>>(), vec![2]);
        let (found, granted) = t.cancel(&fh(), &owner(3), Range { start: 5, end: 20 }, &NoMirror);
        assert!(found && granted.is_empty());
        assert_eq!(t.lock(&fh(), held(3, true, 5, 20), true, 3, &NoMirror), LockResult::Blocked);
        let granted = t.unlock(&fh(), &owner(2), Range { start: 0, end: u64::MAX }, &NoMirror);
        assert_eq!(granted.iter().map(|w| w.notice).collect::<Vec<_>>(), vec![3]);
    }

    /// A file system with locks of its own other clients (`foreign`), and a
    /// record of what the table passed on.
    #[derive(Default)]
    struct FakeFs {
        foreign: std::cell::RefCell<Vec<Range>>,
        taken: std::cell::RefCell<Vec<(Owner, Range)>>,
        released: std::cell::RefCell<Vec<(Owner, Range)>>,
        idle: std::cell::Cell<usize>,
        down: std::cell::Cell<bool>,
    }

    impl Mirror for FakeFs {
        fn admit(&self, want: &Held) -> Admit {
            if self.down.get() {
                return Admit::Unavailable;
            }
            if self.foreign.borrow().iter().any(|r| r.overlaps(&want.range)) {
                return Admit::Denied;
            }
            self.taken.borrow_mut().push((want.owner.clone(), want.range));
            Admit::Granted
        }
        fn release(&self, owner: &Owner, range: Range) {
            self.released.borrow_mut().push((owner.clone(), range));
        }
        fn idle(&self) {
            self.idle.set(self.idle.get() + 1);
        }
    }

    /// A file system whose answer may come after a grace period began (the
    /// MDS held the request until a take-over, confirmed by every head,
    /// ended the dead head's session): [`Mirror::open`] is asked again.
    #[derive(Default)]
    struct SlowFs {
        /// Only reclaims are granted now.
        grace: std::cell::Cell<bool>,
        /// The next admit returns after the grace period began.
        grace_on_admit: std::cell::Cell<bool>,
        taken: std::cell::RefCell<Vec<(u8, bool, u64, u64)>>,
        released: std::cell::RefCell<Vec<(u8, u64, u64)>>,
    }

    impl Mirror for SlowFs {
        fn admit(&self, want: &Held) -> Admit {
            if self.grace_on_admit.take() {
                self.grace.set(true);
            }
            self.taken.borrow_mut().push((
                want.owner.oh[0],
                want.exclusive,
                want.range.start,
                want.range.end,
            ));
            Admit::Granted
        }
        fn release(&self, owner: &Owner, range: Range) {
            self.released.borrow_mut().push((owner.oh[0], range.start, range.end));
        }
        fn idle(&self) {}
        fn open(&self) -> bool {
            !self.grace.get()
        }
    }

    #[test]
    fn a_grant_the_file_system_gives_once_a_grace_period_began_is_given_back() {
        let t = table();
        let fs = SlowFs::default();
        assert_eq!(t.lock(&fh(), held(1, false, 0, 10), false, 0, &fs), LockResult::Granted);

        // Asked before the grace period, answered in it: refused, and taken back
        // in the file system, so the lock a reclaim needs stays free there.
        fs.grace_on_admit.set(true);
        assert_eq!(t.lock(&fh(), held(2, true, 20, 30), false, 0, &fs), LockResult::Grace);
        assert_eq!(*fs.released.borrow(), vec![(2, 20, 30)]);
        assert!(t.test(&fh(), &held(3, true, 20, 30)).is_none(), "not in the table either");
        assert_eq!(t.held_count(), 1);
        // In the grace period the file system is not even asked, and nothing is queued.
        let asked = fs.taken.borrow().len();
        assert_eq!(t.lock(&fh(), held(2, true, 20, 30), true, 5, &fs), LockResult::Grace);
        assert_eq!(fs.taken.borrow().len(), asked);
        assert!(t.files_waiting().is_empty());

        // An owner's own lock is kept in the file system when its change is given back.
        fs.grace.set(false);
        fs.grace_on_admit.set(true);
        fs.released.borrow_mut().clear();
        assert_eq!(t.lock(&fh(), held(1, true, 5, 20), false, 0, &fs), LockResult::Grace);
        assert_eq!(*fs.released.borrow(), vec![(1, 5, 20)]);
        assert_eq!(
            fs.taken.borrow().last(),
            Some(&(1, false, 5, 10)),
            "the shared lock on 5..10 taken again"
        );
        assert!(t.test(&fh(), &held(3, false, 0, 10)).is_none(), "still shared");
        assert_eq!(t.test(&fh(), &held(3, true, 9, 10)).map(|h| h.range), Some(Range { start: 0, end: 10 }));
    }

    #[test]
    fn waiters_are_not_granted_in_a_grace_period() {
        let t = table();
        let fs = SlowFs::default();
        assert_eq!(t.lock(&fh(), held(1, true, 0, 10), false, 0, &fs), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(2, true, 0, 10), true, 7, &fs), LockResult::Blocked);
        let asked = fs.taken.borrow().len();

        // The holder lets go in the grace period: the waiter waits on, untried.
        fs.grace.set(true);
        assert!(t.unlock(&fh(), &owner(1), Range { start: 0, end: 10 }, &fs).is_empty());
        assert!(t.retry(&fh(), &fs).is_empty());
        assert_eq!(fs.taken.borrow().len(), asked, "the file system was not asked");
        assert_eq!(t.files_waiting(), vec![(fh(), 7)]);

        // Tried before it, admitted in it: given back, still waiting.
        fs.grace.set(false);
        fs.grace_on_admit.set(true);
        assert!(t.retry(&fh(), &fs).is_empty());
        assert_eq!(fs.released.borrow().last(), Some(&(2, 0, 10)));
        assert_eq!(t.files_waiting(), vec![(fh(), 7)]);
        assert_eq!(t.held_count(), 0);

        // After it: granted.
        fs.grace.set(false);
        let granted = t.retry(&fh(), &fs);
        assert_eq!(granted.iter().map(|w| w.notice).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn the_file_system_is_asked_before_a_grant_and_told_of_releases() {
        let t = table();
        let fs = FakeFs::default();
        fs.foreign.borrow_mut().push(Range { start: 0, end: 10 });
        // Held by another client of the file system: refused, or queued.
        assert_eq!(t.lock(&fh(), held(1, true, 5, 6), false, 0, &fs), LockResult::Denied);
        assert_eq!(fs.idle.get(), 1, "nothing held or queued: the file system may let go of the file");
        assert_eq!(t.lock(&fh(), held(1, true, 5, 6), true, 7, &fs), LockResult::Blocked);
        assert_eq!(t.files_waiting(), vec![(fh(), 7)]);
        assert!(t.retry(&fh(), &fs).is_empty(), "still held there");
        fs.foreign.borrow_mut().clear();
        let granted = t.retry(&fh(), &fs);
        assert_eq!(granted.iter().map(|w| w.notice).collect::<Vec<_>>(), vec![7]);
        assert_eq!(fs.taken.borrow().len(), 1, "taken in the file system when granted");
        // A conflict here is decided here: the file system is not asked.
        assert_eq!(t.lock(&fh(), held(2, true, 0, 100), false, 0, &fs), LockResult::Denied);
        assert_eq!(fs.taken.borrow().len(), 1);
        // Releases go to the file system; the last one makes the file idle.
        t.unlock(&fh(), &owner(1), Range { start: 0, end: u64::MAX }, &fs);
        assert_eq!(fs.released.borrow().len(), 1);
        assert_eq!(fs.idle.get(), 2);
        // A file system that cannot answer: a non-blocking request is told so,
        // a blocking one waits for a retry.
        fs.down.set(true);
        assert_eq!(t.lock(&fh(), held(3, false, 0, 1), false, 0, &fs), LockResult::Unavailable);
        assert_eq!(t.lock(&fh(), held(3, false, 0, 1), true, 9, &fs), LockResult::Blocked);
        fs.down.set(false);
        assert_eq!(t.retry(&fh(), &fs).len(), 1);
        // A host that restarted: its locks are released in the file system too.
        let (n, _) = t.release_host(b"h\x03", None, &|_| Box::new(NoMirror));
        assert_eq!(n, 1);
    }

    #[test]
    fn the_table_refuses_beyond_its_bound() {
        let t: LockTable<u32> = LockTable::new(2, None);
        assert_eq!(t.lock(&fh(), held(1, true, 0, 1), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(2, true, 2, 3), false, 0, &NoMirror), LockResult::Granted);
        assert_eq!(t.lock(&fh(), held(3, true, 4, 5), false, 0, &NoMirror), LockResult::NoLocks);
        assert_eq!(t.lock(&fh(), held(3, true, 0, 1), true, 0, &NoMirror), LockResult::NoLocks);
    }

    // A model: per owner, the set of (byte, exclusive) it holds, over bytes 0..32.
    #[derive(Debug, Clone)]
    enum Op {
        Lock(u8, bool, u64, u64),
        Unlock(u8, u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3, any::<bool>(), 0u64..32, 1u64..12).prop_map(|(o, x, s, l)| Op::Lock(o, x, s, s + l)),
            (0u8..3, 0u64..32, 1u64..12).prop_map(|(o, s, l)| Op::Unlock(o, s, s + l)),
        ]
    }

    proptest! {
        /// After any sequence of locks and unlocks, the table answers TEST
        /// for every byte exactly as a per-byte model does.
        #[test]
        fn the_table_matches_a_per_byte_model(ops in proptest::collection::vec(op(), 0..40)) {
            let t = table();
            // model[owner][byte] = None | Some(exclusive)
            let mut model = [[None::<bool>; 48]; 3];
            for o in &ops {
                match *o {
                    Op::Lock(n, x, s, e) => {
                        let conflict = (0..3usize).filter(|&m| m != n as usize).any(|m| {
                            (s..e).any(|b| matches!(model[m][b as usize], Some(hx) if hx || x))
                        });
                        let r = t.lock(&fh(), held(n, x, s, e), false, 0, &NoMirror);
                        prop_assert_eq!(r == LockResult::Granted, !conflict);
                        if !conflict {
                            for b in s..e { model[n as usize][b as usize] = Some(x); }
                        }
                    }
                    Op::Unlock(n, s, e) => {
                        t.unlock(&fh(), &owner(n), Range { start: s, end: e }, &NoMirror);
                        for b in s..e { model[n as usize][b as usize] = None; }
                    }
                }
            }
            for asker in 0..4u8 {
                for b in 0..48u64 {
                    for x in [false, true] {
                        let expect = (0..3usize).filter(|&m| m != asker as usize).any(|m| {
                            matches!(model[m][b as usize], Some(hx) if hx || x)
                        });
                        prop_assert_eq!(t.test(&fh(), &held(asker, x, b, b + 1)).is_some(), expect, "byte {} excl {} asker {}", b, x, asker);
                    }
                }
            }
        }
    }
}
