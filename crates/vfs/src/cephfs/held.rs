//! The CephFS locks this server holds for the lock manager, remembered so a
//! new session can take them again.
//!
//! CephFS ties a client's locks to its MDS session: when the cluster ends
//! the session (evicted, blocklisted), they go, while the NFS clients still
//! hold them in the lock manager's table. The backend therefore keeps, per
//! file, what it took (per owner, as POSIX leaves it: ranges that do not
//! overlap), and the new session takes it all again before anything else
//! could notice ([`crate::cephfs::CephBackend`]'s reconnect). A lock another
//! CephFS client took in between is lost, and said so in the log: NFSv3 has
//! no way to tell the holder.
//!
//! Every change of a file's record and the matching `ceph_ll_setlk` happen
//! under the file's own mutex, with the session current at that moment, so
//! a lock call racing with a new session ends in the same state either way.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use super::files::Vino;
use crate::LockRange;

/// One lock: owner, exclusive, range.
pub(crate) type Lock = (u64, bool, LockRange);

/// What this server holds on one file.
#[derive(Debug, Default)]
pub(crate) struct HeldLocks(Vec<Lock>);

impl HeldLocks {
    /// Remove `range` from `owner`'s locks (splitting what it cuts).
    fn cut(&mut self, owner: u64, range: LockRange) {
        let mut out = Vec::with_capacity(self.0.len() + 1);
        for &(o, x, r) in &self.0 {
            if o != owner || r.end <= range.start || range.end <= r.start {
                out.push((o, x, r));
                continue;
            }
            if r.start < range.start {
                out.push((o, x, LockRange { start: r.start, end: range.start }));
            }
            if range.end < r.end {
                out.push((o, x, LockRange { start: range.end, end: r.end }));
            }
        }
        self.0 = out;
    }

    /// `owner` now holds `range` (replacing what it held there).
    pub(crate) fn lock(&mut self, owner: u64, exclusive: bool, range: LockRange) {
        self.cut(owner, range);
        self.0.push((owner, exclusive, range));
    }

    /// `owner` no longer holds `range`.
    pub(crate) fn unlock(&mut self, owner: u64, range: LockRange) {
        self.cut(owner, range);
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn locks(&self) -> &[Lock] {
        &self.0
    }
}

/// Every file's record, for as long as the lock manager holds something on it.
#[derive(Default)]
pub(crate) struct LockRecord(Mutex<HashMap<Vino, Arc<Mutex<HeldLocks>>>>);

impl LockRecord {
    /// The record of file `v` (made empty if there is none).
    pub(crate) fn file(&self, v: Vino) -> Arc<Mutex<HeldLocks>> {
        self.0.lock().entry(v).or_default().clone()
    }

    /// The record of file `v`, if there is one.
    pub(crate) fn get(&self, v: Vino) -> Option<Arc<Mutex<HeldLocks>>> {
        self.0.lock().get(&v).cloned()
    }

    /// The lock manager let go of file `v`.
    pub(crate) fn forget(&self, v: Vino) -> Option<Arc<Mutex<HeldLocks>>> {
        self.0.lock().remove(&v)
    }

    /// Every file with a record now.
    pub(crate) fn files(&self) -> Vec<(Vino, Arc<Mutex<HeldLocks>>)> {
        self.0.lock().iter().map(|(v, h)| (*v, h.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> LockRange {
        LockRange { start, end }
    }

    fn sorted(h: &HeldLocks) -> Vec<Lock> {
        let mut v = h.locks().to_vec();
        v.sort_by_key(|&(o, _, r)| (o, r.start));
        v
    }

    #[test]
    fn a_lock_replaces_the_owners_lock_where_they_overlap() {
        let mut h = HeldLocks::default();
        h.lock(1, false, r(0, 100));
        h.lock(1, true, r(40, 60));
        h.lock(2, false, r(0, 100));
        assert_eq!(
            sorted(&h),
            vec![(1, false, r(0, 40)), (1, true, r(40, 60)), (1, false, r(60, 100)), (2, false, r(0, 100))]
        );
    }

    #[test]
    fn an_unlock_splits_and_leaves_other_owners_alone() {
        let mut h = HeldLocks::default();
        h.lock(1, true, r(0, u64::MAX));
        h.lock(2, false, r(10, 20));
        h.unlock(1, r(5, 10));
        h.unlock(1, r(1000, u64::MAX));
        assert_eq!(sorted(&h), vec![(1, true, r(0, 5)), (1, true, r(10, 1000)), (2, false, r(10, 20))]);
        h.unlock(1, r(0, u64::MAX));
        h.unlock(2, r(0, 15));
        assert_eq!(sorted(&h), vec![(2, false, r(15, 20))]);
        h.unlock(2, r(0, u64::MAX));
        assert!(h.is_empty());
    }
}
