//! Changes of names and attributes made durable before they are answered, many
//! callers sharing one sync (a `sync` export's promise, knfsd's `commit_metadata`).
//!
//! A caller makes its change, then calls [`MetaSync::durable`] with the objects
//! the change touched (the directories, the new or changed object). The first
//! caller to find no sync covering its change runs one for everything changed so
//! far; callers that arrive meanwhile wait for it, and the next one of them runs
//! the next sync for all who came during the last: group commit, so N concurrent
//! CREATEs cost about two syncs, not N.
//!
//! What a sync is depends on the file system ([`Strategy`], chosen at open):
//! - **ext4 with a journal**: `fsync` of a directory forces a commit of the
//!   journal's running transaction (`ext4_force_commit`), which holds every
//!   change whose system call has returned, on any inode. One `fsync` of the
//!   export's root therefore covers the whole group. Cheaper than `syncfs`,
//!   which first writes back every dirty data page of the file system (a
//!   client's UNSTABLE writes waiting for their COMMIT), and than an `fsync`
//!   per object: on ext4 an `fsync` of a file whose change was already
//!   committed still flushes the device's cache (`docs/benchmarks/metasync-*`).
//! - **anything else** (XFS, btrfs, ext4 without a journal, tmpfs): `fsync` of
//!   each distinct object of the group, reopened from its `O_PATH` descriptor
//!   (directories with `openat(".")`, regular files through `/proc/self/fd`);
//!   objects that cannot be opened for that (symlinks, devices, FIFOs) make the
//!   group end with one `syncfs`.
//!
//! A failed sync is returned to its caller (answered `NFS3ERR_IO`: the change
//! was made but may not survive a crash); later callers try again.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::sys;
use crate::FileType;

/// How a group of changes is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Strategy {
    /// Nothing: an `async` export, or one behind the intent journal (which logs the changes).
    Off,
    /// One `fsync` of the root forces a commit of the file system's journal (ext4 with one).
    OneCommit,
    /// `fsync` of each object touched (`syncfs` for those that cannot be opened).
    EachObject,
}

/// Counters for tests and statistics.
#[derive(Debug, Default)]
pub(super) struct MetaSyncCounters {
    /// Changes made durable (calls of `durable`).
    pub(super) changes: AtomicU64,
    /// Syncs run (groups).
    pub(super) syncs: AtomicU64,
}

/// The group commit of one export's metadata changes.
pub(super) struct MetaSync {
    strategy: Strategy,
    /// Changes whose system call has returned and whose caller asked for durability.
    changed: AtomicU64,
    /// Every change counted in `changed` up to this value is durable.
    synced: AtomicU64,
    /// Objects touched by changes not yet covered by a sync (`EachObject` only).
    pending: Mutex<Vec<(Arc<OwnedFd>, FileType)>>,
    /// Held by the caller running a sync: the others wait on it, then find
    /// their change covered.
    syncing: Mutex<()>,
    pub(super) counters: MetaSyncCounters,
}

impl MetaSync {
    pub(super) fn new(strategy: Strategy) -> MetaSync {
        MetaSync {
            strategy,
            changed: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
            syncing: Mutex::new(()),
            counters: MetaSyncCounters::default(),
        }
    }

    pub(super) fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Return once the change the caller just made, touching `objects`, is on
    /// stable storage. `root` is the export's root directory (a real descriptor).
    pub(super) fn durable(&self, root: &OwnedFd, objects: &[(&Arc<OwnedFd>, FileType)]) -> io::Result<()> {
        let strategy = self.strategy;
        self.durable_with(objects, |group| match strategy {
            Strategy::Off => Ok(()),
            Strategy::OneCommit => sys::fsync(root.as_fd()),
            Strategy::EachObject => sync_each(root, group),
        })
    }

    /// [`MetaSync::durable`] with the sync itself given (tests count and time it).
    fn durable_with(
        &self,
        objects: &[(&Arc<OwnedFd>, FileType)],
        sync: impl FnOnce(&[(Arc<OwnedFd>, FileType)]) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.strategy == Strategy::Off {
            return Ok(());
        }
        if self.strategy == Strategy::EachObject {
            let mut pending = self.pending.lock();
            pending.extend(objects.iter().map(|(fd, t)| (Arc::clone(fd), *t)));
        }
        // Counted after the objects are queued: a sync that sees this count
        // also takes them.
        let target = self.changed.fetch_add(1, Ordering::SeqCst) + 1;
        self.counters.changes.fetch_add(1, Ordering::Relaxed);
        if self.synced.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let _one_at_a_time = self.syncing.lock();
        if self.synced.load(Ordering::SeqCst) >= target {
            // A sync that started after our change finished while we waited.
            return Ok(());
        }
        // Every change counted so far has returned from its system call: this sync covers it.
        let covered = self.changed.load(Ordering::SeqCst);
        let group = std::mem::take(&mut *self.pending.lock());
        self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        let result = sync(&group);
        match result {
            Ok(()) => {
                self.synced.fetch_max(covered, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => {
                // Whoever waits next syncs again, with these objects too.
                self.pending.lock().extend(group);
                Err(e)
            }
        }
    }
}

/// `fsync` each distinct object; `syncfs` once if one of them cannot be opened for it.
fn sync_each(root: &OwnedFd, group: &[(Arc<OwnedFd>, FileType)]) -> io::Result<()> {
    let mut seen = HashSet::new();
    let mut need_syncfs = false;
    for (fd, ftype) in group {
        let Ok(st) = sys::fstat(fd.as_fd()) else { continue };
        if !seen.insert((st.st_dev, st.st_ino)) || st.st_nlink == 0 {
            // Synced already in this group, or removed since (nothing of it to keep).
            continue;
        }
        let real = match ftype {
            FileType::Directory => sys::openat(fd.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY),
            FileType::Regular => sys::reopen(fd.as_fd(), libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY),
            _ => {
                need_syncfs = true;
                continue;
            }
        };
        match real {
            Ok(real) => sys::fsync(real.as_fd())?,
            // A lease held by a local program refuses the open: the whole file system then.
            Err(_) => need_syncfs = true,
        }
    }
    if need_syncfs {
        sys::syncfs(root.as_fd())?;
    }
    Ok(())
}

/// Which strategy suits the file system of `root` (whose `st_dev` is `dev`).
pub(super) fn strategy_for(root: &OwnedFd, dev: u64) -> Strategy {
    let Ok(sf) = sys::fstatfs(root.as_fd()) else { return Strategy::EachObject };
    if sf.f_type as libc::c_long == libc::EXT4_SUPER_MAGIC && sys::has_jbd2_journal(dev) {
        Strategy::OneCommit
    } else {
        Strategy::EachObject
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// Callers that arrive while a sync runs share the next one: 8 concurrent
    /// changes, the first sync held until all 8 have been made, cost 2 syncs.
    #[test]
    fn changes_made_during_a_sync_share_the_next_one() {
        let m = Arc::new(MetaSync::new(Strategy::OneCommit));
        let syncs = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (m, syncs) = (m.clone(), syncs.clone());
                std::thread::spawn(move || {
                    m.durable_with(&[], |_| {
                        if syncs.fetch_add(1, Ordering::SeqCst) == 0 {
                            // The first sync lasts until every caller has made its change.
                            let deadline = Instant::now() + Duration::from_secs(30);
                            while m.changed.load(Ordering::SeqCst) < 8 {
                                assert!(Instant::now() < deadline, "the other callers never came");
                                std::thread::yield_now();
                            }
                        }
                        Ok(())
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        let n = syncs.load(Ordering::SeqCst);
        assert!((1..=2).contains(&n), "8 changes took {n} syncs");
        assert_eq!(m.synced.load(Ordering::SeqCst), 8);
    }

    /// A failed sync is the caller's error, and the next caller syncs again.
    #[test]
    fn a_failed_sync_is_reported_and_retried() {
        let m = MetaSync::new(Strategy::OneCommit);
        let err = m.durable_with(&[], |_| Err(io::Error::from_raw_os_error(libc::EIO))).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        let mut ran = false;
        m.durable_with(&[], |_| {
            ran = true;
            Ok(())
        })
        .unwrap();
        assert!(ran, "the change after a failed sync needs a sync of its own");
        assert_eq!(m.synced.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn nothing_is_synced_when_off() {
        let m = MetaSync::new(Strategy::Off);
        m.durable_with(&[], |_| panic!("an `async` export never syncs")).unwrap();
    }
}
