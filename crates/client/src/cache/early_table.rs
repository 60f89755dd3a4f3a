//! The files created early (`dirops=async`, see `early`): what the kernel
//! was told about each, and what it asked of the file since, in order,
//! for when the file exists on the server. Below `fs` (which keeps one
//! table per mount) and `early` (which makes the files and plays back what
//! waited).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use bytes::Bytes;
use eagernfs_proto::nfs3::{Fattr3, Sattr3, SetTime};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::config::{EARLY_FILES_MAX, EARLY_FILE_BYTES_MAX};
use super::inode::{coarse_now, SETID_BITS};
use crate::ops::Cred;

/// The numbers the kernel was given for a file created early: the file,
/// once made on the server, takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Given {
    /// Its inode number.
    pub(crate) ino: u64,
    /// The generation given with it (an `Inode`'s is otherwise derived
    /// from its NFS handle, not known yet).
    pub(crate) generation: u32,
    /// The open file handle the create returned.
    pub(crate) fh: u64,
}

/// A request about a file created early, answered already, done on the
/// file once it exists.
#[derive(Debug)]
pub(crate) enum Later {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    Setattr {
        attrs: Sattr3,
        cred: Cred,
    },
    /// A close of the handle (`deleg_close=writeback` only: its write-back
    /// may wait).
    Flush,
    /// The handle's last close.
    Release,
    /// The kernel dropped this many references.
    Forget(u64),
}

/// What a file created early owed, taken to make it in one call.
#[derive(Debug)]
pub(crate) struct Whole {
    pub(crate) data: Vec<u8>,
    /// Its mode at its close.
    pub(crate) mode: u32,
    /// Its times, if the program set them.
    pub(crate) then: Option<Sattr3>,
}

/// One file created early.
#[derive(Debug)]
pub(crate) struct EarlyFile {
    /// Its directory's inode number and its name there.
    pub(crate) parent: u64,
    pub(crate) name: Bytes,
    pub(crate) given: Given,
    /// What the kernel is shown: the attributes the server will give it,
    /// as far as they are known here, with the changes answered since.
    pub(crate) attr: Fattr3,
    later: VecDeque<Later>,
    /// Bytes of data in `later`.
    bytes: u64,
    /// Someone waits for the file to exist: make it now.
    urgent: bool,
    /// What it owed was taken to make it in one call ([`EarlyFiles::take_whole`]):
    /// requests that would add to it wait for the file instead.
    taken: bool,
}

impl EarlyFile {
    pub(crate) fn new(parent: u64, name: Bytes, given: Given, attr: Fattr3) -> Self {
        EarlyFile { parent, name, given, attr, later: VecDeque::new(), bytes: 0, urgent: false, taken: false }
    }
}

#[derive(Default)]
struct Table {
    files: HashMap<u64, EarlyFile>,
    /// Open file handle → inode number.
    by_fh: HashMap<u64, u64>,
}

/// Whether the server makes files as the user who asks (no squashing, no
/// group other than the caller's): learned from the mount's plain creates.
const OWNER_UNKNOWN: u8 = 0;
const OWNER_KEPT: u8 = 1;
const OWNER_CHANGED: u8 = 2;

/// The mount's files created early and not done on the server yet.
#[derive(Default)]
pub(crate) struct EarlyFiles {
    table: Mutex<Table>,
    /// `table.files.len()`, read without the lock.
    count: AtomicUsize,
    /// Wakes whoever waits for a file to be done.
    done: Notify,
    /// Wakes the tasks making the files: one was closed or is waited for.
    kick: Notify,
    owner: AtomicU8,
    /// Handles of the last files the server refused to make, oldest first
    /// (their requests fail with EIO rather than EBADF).
    refused: Mutex<VecDeque<u64>>,
}

/// Handles of refused early files remembered at most.
const REFUSED_MAX: usize = 256;

impl EarlyFiles {
    /// A plain create by this mount gave the file the caller's owner and
    /// group (`kept`) or not. Once not, never again early: what the kernel
    /// would be shown could be wrong.
    pub(crate) fn note_owner(&self, kept: bool) {
        if !kept {
            self.owner.store(OWNER_CHANGED, Ordering::Relaxed);
        } else {
            let _ =
                self.owner.compare_exchange(OWNER_UNKNOWN, OWNER_KEPT, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    pub(crate) fn owner_kept(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == OWNER_KEPT
    }

    /// No file is early now (one atomic load: every request checks it).
    pub(crate) fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Room for one more, and `name` is not one of `parent`'s early files.
    pub(crate) fn may_add(&self, parent: u64, name: &[u8]) -> bool {
        let t = self.table.lock();
        t.files.len() < EARLY_FILES_MAX && !t.files.values().any(|f| f.parent == parent && f.name == name)
    }

    pub(crate) fn add(&self, f: EarlyFile) {
        let mut t = self.table.lock();
        t.by_fh.insert(f.given.fh, f.given.ino);
        t.files.insert(f.given.ino, f);
        self.count.store(t.files.len(), Ordering::Release);
    }

    pub(crate) fn has_ino(&self, ino: u64) -> bool {
        !self.is_empty() && self.table.lock().files.contains_key(&ino)
    }

    pub(crate) fn has_fh(&self, fh: u64) -> bool {
        !self.is_empty() && self.table.lock().by_fh.contains_key(&fh)
    }

    pub(crate) fn has_name(&self, parent: u64, name: &[u8]) -> bool {
        !self.is_empty() && self.table.lock().files.values().any(|f| f.parent == parent && f.name == name)
    }

    /// What the kernel is shown of early file `ino`, and its generation.
    pub(crate) fn shown(&self, ino: u64) -> Option<(Fattr3, u32)> {
        if self.is_empty() {
            return None;
        }
        self.table.lock().files.get(&ino).map(|f| (f.attr, f.given.generation))
    }

    /// Take a write through early handle `fh`: `None` if `fh` is not
    /// early, `Some(false)` if the file holds too much already (the caller
    /// waits for it to be made instead).
    pub(crate) fn push_write(&self, fh: u64, offset: u64, data: &[u8]) -> Option<bool> {
        if self.is_empty() {
            return None;
        }
        let mut t = self.table.lock();
        let ino = *t.by_fh.get(&fh)?;
        let f = t.files.get_mut(&ino)?;
        let len = data.len() as u64;
        if f.taken || f.bytes + len > EARLY_FILE_BYTES_MAX {
            return Some(false);
        }
        f.bytes += len;
        let end = offset.saturating_add(len);
        if end > f.attr.size {
            f.attr.size = end;
            f.attr.used = end.div_ceil(4096) * 4096;
        }
        let now = coarse_now();
        f.attr.mtime = now;
        f.attr.ctime = now;
        f.later.push_back(Later::Write { offset, data: data.to_vec() });
        Some(true)
    }

    /// Take a SETATTR of early file `ino` by `cred`: `None` if `ino` is
    /// not early; `Some(None)` if this change must wait for the file to be
    /// made (one the server might refuse or do differently: a new owner or
    /// group, set-id bits, a change by someone other than the owner);
    /// else the attributes now shown, and the file's generation.
    pub(crate) fn push_setattr(
        &self,
        ino: u64,
        attrs: &Sattr3,
        cred: &Cred,
    ) -> Option<Option<(Fattr3, u32)>> {
        if self.is_empty() {
            return None;
        }
        let mut t = self.table.lock();
        let f = t.files.get_mut(&ino)?;
        let a = &mut f.attr;
        let takes = !f.taken
            && cred.uid == a.uid
            && attrs.mode.is_none_or(|m| m & (SETID_BITS | 0o1000) == 0)
            && attrs.uid.is_none_or(|u| u == a.uid)
            && attrs.gid.is_none_or(|g| g == a.gid);
        if !takes {
            return Some(None);
        }
        let now = coarse_now();
        if let Some(m) = attrs.mode {
            a.mode = m & 0o7777;
        }
        if let Some(s) = attrs.size {
            a.size = s;
            a.used = s.div_ceil(4096) * 4096;
            a.mtime = now;
        }
        match attrs.atime {
            SetTime::DontChange => {}
            SetTime::SetToServerTime => a.atime = now,
            SetTime::SetToClientTime(t) => a.atime = t,
        }
        match attrs.mtime {
            SetTime::DontChange => {}
            SetTime::SetToServerTime => a.mtime = now,
            SetTime::SetToClientTime(t) => a.mtime = t,
        }
        a.ctime = now;
        let shown = (*a, f.given.generation);
        f.later.push_back(Later::Setattr { attrs: *attrs, cred: cred.clone() });
        Some(Some(shown))
    }

    /// Take a close (`Later::Flush`) or last close (`Later::Release`) of
    /// early handle `fh`; false if `fh` is not early.
    pub(crate) fn push_close(&self, fh: u64, what: Later) -> bool {
        if self.is_empty() {
            return false;
        }
        let mut t = self.table.lock();
        let Some(ino) = t.by_fh.get(&fh).copied() else { return false };
        match t.files.get_mut(&ino) {
            Some(f) if !f.taken => {
                let last = matches!(what, Later::Release);
                f.later.push_back(what);
                if last {
                    self.kick.notify_waiters();
                }
                true
            }
            _ => false,
        }
    }

    /// Take the kernel's FORGET of early file `ino`; false if not early.
    pub(crate) fn push_forget(&self, ino: u64, n: u64) -> bool {
        if self.is_empty() {
            return false;
        }
        match self.table.lock().files.get_mut(&ino) {
            Some(f) => {
                f.later.push_back(Later::Forget(n));
                true
            }
            None => false,
        }
    }

    /// The next request early file `ino` owes, in the order they came.
    /// None: all done, and the file is early no more (requests about it
    /// from now on are done as for any file).
    pub(crate) fn next(&self, ino: u64) -> Option<Later> {
        let mut t = self.table.lock();
        let f = t.files.get_mut(&ino)?;
        if let Some(op) = f.later.pop_front() {
            if let Later::Write { data, .. } = &op {
                f.bytes -= data.len() as u64;
            }
            return Some(op);
        }
        self.finish(&mut t, ino);
        None
    }

    /// Early file `ino` will not be made (the server refused it): forget it
    /// and what it owed. Returns how many requests it owed.
    pub(crate) fn abandon(&self, ino: u64) -> usize {
        let mut t = self.table.lock();
        let n = t.files.get(&ino).map_or(0, |f| f.later.len());
        if let Some(f) = t.files.get(&ino) {
            let mut r = self.refused.lock();
            if r.len() >= REFUSED_MAX {
                r.pop_front();
            }
            r.push_back(f.given.fh);
        }
        self.finish(&mut t, ino);
        n
    }

    /// Whether `fh` was the handle of an early file the server refused.
    pub(crate) fn refused(&self, fh: u64) -> bool {
        self.refused.lock().contains(&fh)
    }

    fn finish(&self, t: &mut Table, ino: u64) {
        if let Some(f) = t.files.remove(&ino) {
            t.by_fh.remove(&f.given.fh);
        }
        self.count.store(t.files.len(), Ordering::Release);
        self.done.notify_waiters();
    }

    /// Mark the early files `which` picks as waited for (their makers go
    /// on at once); whether there were any.
    fn hurry(&self, which: &impl Fn(&EarlyFile) -> bool) -> bool {
        let mut any = false;
        let mut newly = false;
        for f in self.table.lock().files.values_mut().filter(|f| which(f)) {
            any = true;
            newly |= !std::mem::replace(&mut f.urgent, true);
        }
        if newly {
            self.kick.notify_waiters();
        }
        any
    }

    /// Make the early files `which` picks now and wait until they are done.
    async fn settle(&self, which: impl Fn(&EarlyFile) -> bool) {
        loop {
            if self.is_empty() {
                return;
            }
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.hurry(&which) {
                return;
            }
            done.await;
        }
    }

    /// Make directory `parent`'s early files now (something about the
    /// directory goes to the server, which must find them made).
    pub(crate) fn hurry_parent(&self, parent: u64) {
        if !self.is_empty() {
            self.hurry(&|f: &EarlyFile| f.parent == parent);
        }
    }

    /// Wait until `ino` is not early (made, and what it owed done).
    pub(crate) async fn settle_ino(&self, ino: u64) {
        self.settle(|f| f.given.ino == ino).await;
    }

    /// Wait until handle `fh` is not an early file's.
    pub(crate) async fn settle_fh(&self, fh: u64) {
        self.settle(|f| f.given.fh == fh).await;
    }

    /// Wait until no file of directory `parent` is early.
    pub(crate) async fn settle_parent(&self, parent: u64) {
        self.settle(|f| f.parent == parent).await;
    }

    /// Wait until `name` in `parent` is not an early file.
    pub(crate) async fn settle_name(&self, parent: u64, name: &[u8]) {
        self.settle(|f| f.parent == parent && f.name == name).await;
    }

    /// Wait until no file is early.
    pub(crate) async fn settle_all(&self) {
        self.settle(|_| true).await;
    }

    /// Wait until early file `ino` is closed (its last RELEASE came),
    /// waited for, or gone, for at most `most`.
    pub(crate) async fn ready(&self, ino: u64, most: std::time::Duration) {
        let _ = tokio::time::timeout(most, async {
            loop {
                let kicked = self.kick.notified();
                tokio::pin!(kicked);
                kicked.as_mut().enable();
                match self.table.lock().files.get(&ino) {
                    Some(f) if !f.urgent && !f.later.iter().any(|op| matches!(op, Later::Release)) => {}
                    _ => return,
                }
                kicked.await;
            }
        })
        .await;
    }

    /// What early file `ino` owes, taken whole if it is a file made,
    /// written from its start (at most `max` bytes), given times, a mode
    /// (keeping its owner's write bit) and a chown to itself, and closed:
    /// its data, its mode, and the times to set. What came after the
    /// close (FORGETs) stays. `None` (nothing taken): it owes something
    /// else, or is still open.
    pub(crate) fn take_whole(&self, ino: u64, max: u64) -> Option<Whole> {
        let mut t = self.table.lock();
        let f = t.files.get_mut(&ino)?;
        let mut data = Vec::new();
        let mut then = Sattr3::default();
        let mut setting = false;
        let mut closed = 0;
        for (i, op) in f.later.iter().enumerate() {
            match op {
                Later::Write { offset, data: d } if !setting && *offset == data.len() as u64 => {
                    if data.len() as u64 + d.len() as u64 > max {
                        return None;
                    }
                    data.extend_from_slice(d);
                }
                Later::Setattr { attrs, .. } if attrs.size.is_none() => {
                    setting = true;
                    if attrs.atime != SetTime::DontChange {
                        then.atime = attrs.atime;
                    }
                    if attrs.mtime != SetTime::DontChange {
                        then.mtime = attrs.mtime;
                    }
                }
                Later::Flush => {}
                Later::Release => {
                    closed = i + 1;
                    break;
                }
                _ => return None,
            }
        }
        if closed == 0 || f.attr.mode & 0o200 == 0 || f.attr.size != data.len() as u64 {
            return None;
        }
        f.later.drain(..closed);
        f.bytes = 0;
        f.taken = true;
        let times = then.atime != SetTime::DontChange || then.mtime != SetTime::DontChange;
        Some(Whole { data, mode: f.attr.mode, then: times.then_some(then) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_proto::nfs3::{Ftype3, Nfstime3, Specdata3};

    fn file(ino: u64, parent: u64, name: &[u8]) -> EarlyFile {
        let attr = Fattr3 {
            ftype: Ftype3::Reg,
            mode: 0o600,
            nlink: 1,
            uid: 7,
            gid: 8,
            size: 0,
            used: 0,
            rdev: Specdata3::default(),
            fsid: 1,
            fileid: ino,
            atime: Nfstime3::default(),
            mtime: Nfstime3::default(),
            ctime: Nfstime3::default(),
        };
        EarlyFile::new(
            parent,
            Bytes::copy_from_slice(name),
            Given { ino, generation: 3, fh: ino + 100 },
            attr,
        )
    }

    fn owner() -> Cred {
        Cred { uid: 7, gid: 8, groups: vec![] }
    }

    #[test]
    fn requests_come_back_in_order_and_the_file_is_done_after_the_last() {
        let t = EarlyFiles::default();
        assert!(t.is_empty());
        t.add(file(5, 1, b"a"));
        assert!(t.has_ino(5) && t.has_fh(105) && t.has_name(1, b"a"));
        assert!(!t.has_name(1, b"b") && !t.may_add(1, b"a") && t.may_add(1, b"b"));
        assert_eq!(t.push_write(105, 0, b"hello"), Some(true));
        assert_eq!(t.push_write(999, 0, b"x"), None);
        let chmod = Sattr3 { mode: Some(0o644), ..Sattr3::default() };
        let (shown, generation) = t.push_setattr(5, &chmod, &owner()).unwrap().unwrap();
        assert_eq!((shown.mode, shown.size, generation), (0o644, 5, 3));
        assert!(t.push_close(105, Later::Flush));
        assert!(t.push_close(105, Later::Release));
        assert!(t.push_forget(5, 1));
        assert!(matches!(t.next(5), Some(Later::Write { offset: 0, ref data }) if data == b"hello"));
        assert!(matches!(t.next(5), Some(Later::Setattr { .. })));
        assert!(matches!(t.next(5), Some(Later::Flush)));
        assert!(matches!(t.next(5), Some(Later::Release)));
        assert!(matches!(t.next(5), Some(Later::Forget(1))));
        assert!(t.next(5).is_none());
        assert!(t.is_empty() && !t.has_fh(105) && t.shown(5).is_none());
    }

    #[test]
    fn changes_the_server_might_refuse_or_do_differently_wait() {
        let t = EarlyFiles::default();
        t.add(file(5, 1, b"a"));
        let other = Cred { uid: 9, gid: 8, groups: vec![] };
        for (attrs, cred) in [
            (Sattr3 { mode: Some(0o4755), ..Sattr3::default() }, owner()),
            (Sattr3 { mode: Some(0o1644), ..Sattr3::default() }, owner()),
            (Sattr3 { uid: Some(9), ..Sattr3::default() }, owner()),
            (Sattr3 { gid: Some(9), ..Sattr3::default() }, owner()),
            (Sattr3 { mode: Some(0o644), ..Sattr3::default() }, other),
        ] {
            assert_eq!(t.push_setattr(5, &attrs, &cred), Some(None), "{attrs:?} by {}", cred.uid);
        }
        // The owner's no-op chown, times and a truncation are taken.
        let same = Sattr3 { uid: Some(7), gid: Some(8), ..Sattr3::default() };
        assert!(t.push_setattr(5, &same, &owner()).unwrap().is_some());
        let times = Sattr3 {
            mtime: SetTime::SetToClientTime(Nfstime3 { seconds: 10, nseconds: 1 }),
            size: Some(3),
            ..Sattr3::default()
        };
        let (shown, _) = t.push_setattr(5, &times, &owner()).unwrap().unwrap();
        assert_eq!((shown.mtime.seconds, shown.size), (10, 3));
        assert_eq!(t.push_setattr(6, &same, &owner()), None);
    }

    #[test]
    fn a_file_holds_a_bounded_amount_of_data() {
        let t = EarlyFiles::default();
        t.add(file(5, 1, b"a"));
        let big = vec![0u8; EARLY_FILE_BYTES_MAX as usize];
        assert_eq!(t.push_write(105, 0, &big), Some(true));
        assert_eq!(t.push_write(105, big.len() as u64, b"x"), Some(false));
        assert!(t.next(5).is_some());
        assert_eq!(t.push_write(105, 0, b"x"), Some(true));
        assert_eq!(t.abandon(5), 1);
        assert!(t.is_empty() && t.refused(105) && !t.refused(106));
    }

    #[test]
    fn a_file_written_from_its_start_given_times_and_closed_is_taken_whole() {
        let t = EarlyFiles::default();
        t.add(file(5, 1, b"a"));
        assert_eq!(t.push_write(105, 0, b"hel"), Some(true));
        assert_eq!(t.push_write(105, 3, b"lo"), Some(true));
        let times = Sattr3 {
            mtime: SetTime::SetToClientTime(Nfstime3 { seconds: 9, nseconds: 0 }),
            ..Sattr3::default()
        };
        assert!(t.push_setattr(5, &times, &owner()).unwrap().is_some());
        let chmod = Sattr3 { mode: Some(0o644), ..Sattr3::default() };
        assert!(t.push_setattr(5, &chmod, &owner()).unwrap().is_some());
        assert!(t.take_whole(5, 100).is_none(), "still open");
        assert!(t.push_close(105, Later::Flush) && t.push_close(105, Later::Release));
        assert!(t.push_forget(5, 1));
        assert!(t.take_whole(5, 4).is_none(), "more than it may take");
        let w = t.take_whole(5, 100).expect("taken whole");
        assert_eq!((&w.data[..], w.mode), (&b"hello"[..], 0o644));
        assert_eq!(w.then.map(|a| a.mtime), Some(times.mtime));
        // Nothing more is taken for it; the FORGET that came after stays.
        assert_eq!(t.push_write(105, 5, b"!"), Some(false));
        assert_eq!(t.push_setattr(5, &chmod, &owner()), Some(None));
        assert!(matches!(t.next(5), Some(Later::Forget(1))));
        assert!(t.next(5).is_none());

        // A write after a change of times, a gap, a truncation, no write bit: not taken.
        for (i, case) in ["late write", "gap", "truncate", "read-only"].iter().enumerate() {
            let ino = 10 + i as u64;
            t.add(file(ino, 1, case.as_bytes()));
            let fh = ino + 100;
            match *case {
                "late write" => {
                    t.push_setattr(ino, &times, &owner());
                    t.push_write(fh, 0, b"x");
                }
                "gap" => {
                    t.push_write(fh, 1, b"x");
                }
                "truncate" => {
                    t.push_write(fh, 0, b"xy");
                    t.push_setattr(ino, &Sattr3 { size: Some(1), ..Sattr3::default() }, &owner());
                }
                _ => {
                    t.push_setattr(ino, &Sattr3 { mode: Some(0o444), ..Sattr3::default() }, &owner());
                }
            }
            assert!(t.push_close(fh, Later::Release));
            assert!(t.take_whole(ino, 100).is_none(), "{case}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_maker_waits_for_the_close_or_someone_waiting_or_its_time() {
        let t = std::sync::Arc::new(EarlyFiles::default());
        t.add(file(5, 1, b"a"));
        let started = tokio::time::Instant::now();
        t.ready(5, std::time::Duration::from_millis(50)).await;
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(50), "neither closed nor waited for");
        let waiter = {
            let t = t.clone();
            tokio::spawn(async move { t.ready(5, std::time::Duration::from_secs(60)).await })
        };
        tokio::task::yield_now().await;
        t.hurry_parent(1);
        waiter.await.unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "woken by the hurry");
    }

    #[test]
    fn owners_learned_from_plain_creates() {
        let t = EarlyFiles::default();
        assert!(!t.owner_kept());
        t.note_owner(true);
        assert!(t.owner_kept());
        t.note_owner(false);
        t.note_owner(true);
        assert!(!t.owner_kept());
    }

    #[tokio::test]
    async fn waiters_wake_when_their_file_is_done() {
        let t = std::sync::Arc::new(EarlyFiles::default());
        t.add(file(5, 1, b"a"));
        t.add(file(6, 2, b"b"));
        let w = {
            let t = t.clone();
            tokio::spawn(async move {
                t.settle_parent(1).await;
                t.has_ino(6)
            })
        };
        tokio::task::yield_now().await;
        assert!(!w.is_finished());
        assert!(t.next(5).is_none());
        assert!(w.await.unwrap(), "woke when directory 1 had none left, 6 still early");
        t.settle_ino(5).await;
        assert_eq!(t.abandon(6), 0);
        t.settle_all().await;
    }
}
