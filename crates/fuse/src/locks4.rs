//! `fcntl`, `flock` and OFD locks over NFSv4: LOCK, LOCKU and LOCKT on the
//! server's one lock table (the same one NFSv3 clients' NLM locks are in,
//! so each excludes the other), instead of NLM.
//!
//! A lock hangs off an open of the file on the server: the caller makes
//! sure the FUSE handle holds one (`CachedFs::hold_open`) before asking.
//! NFSv4 has no queue of blocked requests: a waiter (`F_SETLKW`) asks
//! again with a growing pause, and a CB_NOTIFY_LOCK from a server that
//! sends them (eagernfs does not) wakes it early.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use eagernfs_client::v4::LockConflict;
use eagernfs_client::{Cred, Nfs4Client, NfsError};
use eagernfs_proto::nfs3::NfsFh3;
use parking_lot::Mutex;

use crate::callbacks::MountCallbacks;

/// NFSv4's (offset, length) for `fcntl`'s `[start, end]` (end inclusive;
/// `OFFSET_MAX` or more: to the end of the file, NFSv4's all-ones length).
pub(crate) fn range(start: u64, end: u64) -> (u64, u64) {
    if end >= i64::MAX as u64 {
        (start, u64::MAX)
    } else {
        (start, end.saturating_sub(start) + 1)
    }
}

/// `fcntl`'s inclusive end of an NFSv4 range.
pub(crate) fn fcntl_end(offset: u64, length: u64) -> u64 {
    if length == u64::MAX || offset.checked_add(length).is_none_or(|e| e > i64::MAX as u64) {
        i64::MAX as u64
    } else {
        offset + length.max(1) - 1
    }
}

/// This mount's NFSv4 locks.
#[derive(Clone)]
pub(crate) struct V4Locks {
    pub(crate) client: Nfs4Client,
    /// The process that took each owner's locks (what F_GETLK reports).
    pids: Arc<Mutex<HashMap<u64, u32>>>,
    /// Owners that took locks through each open file (FUSE handle): OFD
    /// and flock locks go at its last close (see `NfsFuse::release`).
    pub(crate) by_handle: Arc<Mutex<HashMap<u64, HashSet<u64>>>>,
    /// Woken when the server says a lock may be free (CB_NOTIFY_LOCK).
    wakeups: Arc<MountCallbacks>,
}

impl V4Locks {
    pub(crate) fn new(client: Nfs4Client, wakeups: Arc<MountCallbacks>) -> Self {
        V4Locks { client, pids: Default::default(), by_handle: Default::default(), wakeups }
    }

    /// Whether `owner` holds locks on `fh` (no call to the server).
    pub(crate) fn holds(&self, fh: &NfsFh3, owner: u64) -> bool {
        self.client.holds_lock(fh, owner)
    }

    /// Remember who asks for `owner`'s locks through FUSE handle `handle`
    /// (before the call: the lock may be granted the moment it is asked).
    pub(crate) fn note(&self, handle: u64, owner: u64, pid: u32) {
        self.pids.lock().insert(owner, pid);
        self.by_handle.lock().entry(handle).or_default().insert(owner);
    }

    /// Release every lock `owner` holds on `fh` (a close), if it holds any.
    pub(crate) async fn release_owner(&self, cred: &Cred, fh: &NfsFh3, owner: u64) {
        if !self.holds(fh, owner) {
            return;
        }
        if let Err(e) = self.client.unlock(cred, fh, owner, 0, u64::MAX).await {
            tracing::warn!("releasing locks at close: {e}");
        }
        self.pids.lock().remove(&owner);
    }

    /// The local process holding a conflicting lock, if it is ours (else 0).
    pub(crate) fn local_pid(&self, c: &LockConflict) -> u32 {
        self.client.own_lock_owner(c).and_then(|o| self.pids.lock().get(&o).copied()).unwrap_or(0)
    }

    /// Wait up to `pause` for a lock of the server to be released.
    pub(crate) async fn wait(&self, pause: Duration) {
        let _ = tokio::time::timeout(pause, self.wakeups.lock_wakeups.notified()).await;
    }
}

/// The errno of a failed lock call (ENOLCK for trouble that is not the
/// server's answer about the lock).
pub(crate) fn lock_errno(e: &NfsError) -> i32 {
    match e {
        NfsError::Nfs(_) | NfsError::Nfs4(_) | NfsError::NoLocks => e.errno(),
        _ => libc::ENOLCK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcntl_ranges_and_nfsv4_ranges_convert_both_ways() {
        assert_eq!(range(0, i64::MAX as u64), (0, u64::MAX), "to the end of the file");
        assert_eq!(range(10, 19), (10, 10));
        assert_eq!(range(5, 5), (5, 1));
        assert_eq!(fcntl_end(10, 10), 19);
        assert_eq!(fcntl_end(100, u64::MAX), i64::MAX as u64);
        assert_eq!(fcntl_end(u64::MAX - 5, 10), i64::MAX as u64, "no overflow");
    }
}
