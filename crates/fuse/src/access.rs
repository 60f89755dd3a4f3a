//! What the server said each caller may do with each inode, remembered
//! for as long as the inode's attributes are trusted (Linux's NFS access
//! cache does the same).
//!
//! Every open asks the server (ACCESS) whether the caller may read or
//! write, since without `default_permissions` the server is the only
//! judge. Asking on *every* open would cost a round trip per open and,
//! worse, the ACCESS reply's attributes would revalidate the file even
//! under `nocto`. Only grants are kept; a refusal is asked again next
//! time, so a chmod that opens a file up is seen at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use eagernfs_client::Cred;
use parking_lot::Mutex;

/// Grants remembered at once; past this the table is emptied, which
/// bounds memory (the kernel's inode count is the real bound normally).
pub const GRANTS_MAX: usize = 1 << 16;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    ino: u64,
    cred: Cred,
}

/// Granted access(2) masks per (inode, caller).
#[derive(Default)]
pub struct AccessCache {
    grants: Mutex<HashMap<Key, (Instant, i32)>>,
}

impl AccessCache {
    /// An empty cache.
    pub fn new() -> Self {
        AccessCache::default()
    }

    /// True if every bit of `mask` was granted to `cred` on `ino` and the
    /// grant has not expired.
    pub fn allows(&self, ino: u64, cred: &Cred, mask: i32, now: Instant) -> bool {
        let key = Key { ino, cred: cred.clone() };
        match self.grants.lock().get(&key) {
            Some((until, granted)) => now < *until && granted & mask == mask,
            None => false,
        }
    }

    /// The server granted `mask`; trust it for `ttl` (what remains of the
    /// inode's attribute period). A zero TTL (`noac`) records nothing.
    pub fn grant(&self, ino: u64, cred: &Cred, mask: i32, now: Instant, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let key = Key { ino, cred: cred.clone() };
        let mut grants = self.grants.lock();
        if grants.len() >= GRANTS_MAX {
            grants.clear();
        }
        let entry = grants.entry(key).or_insert((now, 0));
        if now >= entry.0 {
            // Expired: start again from what was just granted.
            entry.1 = 0;
        }
        entry.0 = now + ttl;
        entry.1 |= mask;
    }

    /// Forget every grant on `ino` (its mode or owner changed, or it is
    /// gone from the kernel).
    pub fn forget_inode(&self, ino: u64) {
        self.grants.lock().retain(|k, _| k.ino != ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(uid: u32, groups: &[u32]) -> Cred {
        Cred { uid, gid: uid, groups: groups.to_vec() }
    }

    #[test]
    fn grants_are_per_caller_and_mask() {
        let c = AccessCache::new();
        let now = Instant::now();
        let ttl = Duration::from_secs(3);
        c.grant(7, &cred(1000, &[]), libc::R_OK, now, ttl);
        assert!(c.allows(7, &cred(1000, &[]), libc::R_OK, now));
        assert!(!c.allows(7, &cred(1000, &[]), libc::R_OK | libc::W_OK, now), "write never granted");
        assert!(!c.allows(7, &cred(1001, &[]), libc::R_OK, now), "another user");
        assert!(!c.allows(7, &cred(1000, &[4242]), libc::R_OK, now), "other groups are another caller");
        assert!(!c.allows(8, &cred(1000, &[]), libc::R_OK, now), "another inode");
        c.grant(7, &cred(1000, &[]), libc::W_OK, now, ttl);
        assert!(c.allows(7, &cred(1000, &[]), libc::R_OK | libc::W_OK, now), "grants add up");
    }

    #[test]
    fn grants_expire_and_can_be_forgotten() {
        let c = AccessCache::new();
        let now = Instant::now();
        c.grant(7, &cred(1, &[]), libc::R_OK, now, Duration::from_secs(3));
        assert!(!c.allows(7, &cred(1, &[]), libc::R_OK, now + Duration::from_secs(3)));
        // An expired grant does not leak its old bits into a new one.
        c.grant(7, &cred(1, &[]), libc::W_OK, now + Duration::from_secs(4), Duration::from_secs(3));
        assert!(!c.allows(7, &cred(1, &[]), libc::R_OK, now + Duration::from_secs(4)));
        c.forget_inode(7);
        assert!(!c.allows(7, &cred(1, &[]), libc::W_OK, now + Duration::from_secs(4)));
        c.grant(9, &cred(1, &[]), libc::R_OK, now, Duration::ZERO);
        assert!(!c.allows(9, &cred(1, &[]), libc::R_OK, now), "noac: nothing is remembered");
    }
}
