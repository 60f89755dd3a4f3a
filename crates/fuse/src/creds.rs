//! Who is asking: the uid and gid FUSE gives with each request, plus the
//! caller's supplementary groups, which FUSE does not give and which the
//! server needs (a file readable by group `staff` must open for a member).
//!
//! The groups are read from `/proc/PID/status` (`Groups:`) and kept for a
//! short while per (pid, uid, gid), so a process doing thousands of calls
//! reads the file about once a second, and a process that changes its
//! identity is a different key at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use eagernfs_client::Cred;
use parking_lot::Mutex;

/// How long a process's groups are trusted. Group changes of a running
/// process are rare (setgroups); a second keeps the cost of reading /proc
/// out of the hot path without serving stale groups for long.
pub const GROUPS_TTL: Duration = Duration::from_secs(1);
/// Processes remembered at once; past this the table is emptied, which
/// bounds memory on a machine with many short-lived processes.
pub const PROCESSES_MAX: usize = 4096;
/// AUTH_SYS carries at most 16 supplementary groups.
pub const GROUPS_MAX: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    pid: u32,
    uid: u32,
    gid: u32,
}

/// A short-lived cache of callers' credentials.
#[derive(Default)]
pub struct CredCache {
    entries: Mutex<HashMap<Key, (Instant, Cred)>>,
}

impl CredCache {
    /// An empty cache.
    pub fn new() -> Self {
        CredCache::default()
    }

    /// The credential to send for a request from `pid` running as
    /// `uid`/`gid`. Requests the kernel makes on its own (pid 0, e.g.
    /// write-back of mmap pages) carry no groups.
    pub fn get(&self, pid: u32, uid: u32, gid: u32) -> Cred {
        if pid == 0 {
            return Cred { uid, gid, groups: Vec::new() };
        }
        let key = Key { pid, uid, gid };
        let now = Instant::now();
        if let Some((at, cred)) = self.entries.lock().get(&key) {
            if now.duration_since(*at) < GROUPS_TTL {
                return cred.clone();
            }
        }
        // Read outside the lock: /proc can be slow under load.
        let groups = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| parse_groups(&s, gid))
            .unwrap_or_default();
        let cred = Cred { uid, gid, groups };
        let mut entries = self.entries.lock();
        if entries.len() >= PROCESSES_MAX {
            entries.clear();
        }
        entries.insert(key, (now, cred.clone()));
        cred
    }
}

/// The `Groups:` line of a /proc status file, without the primary group
/// (it is sent separately) and cut to what AUTH_SYS carries.
pub fn parse_groups(status: &str, primary_gid: u32) -> Vec<u32> {
    let Some(line) = status.lines().find_map(|l| l.strip_prefix("Groups:")) else {
        return Vec::new();
    };
    let mut groups = Vec::new();
    for g in line.split_whitespace().filter_map(|g| g.parse::<u32>().ok()) {
        if g != primary_gid && !groups.contains(&g) {
            groups.push(g);
            if groups.len() == GROUPS_MAX {
                break;
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_line_is_parsed_without_the_primary_group() {
        let status = "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 1000 27 \nNgid:\t0\n";
        assert_eq!(parse_groups(status, 1000), vec![4, 24, 27]);
        assert_eq!(parse_groups("Name:\tx\n", 0), Vec::<u32>::new());
        assert_eq!(parse_groups("Groups:\n", 0), Vec::<u32>::new());
    }

    #[test]
    fn groups_are_cut_to_what_auth_sys_carries() {
        let line: Vec<String> = (100..140).map(|g| g.to_string()).collect();
        let status = format!("Groups:\t{}\n", line.join(" "));
        let g = parse_groups(&status, 0);
        assert_eq!(g.len(), GROUPS_MAX);
        assert_eq!(g[0], 100);
    }

    #[test]
    fn own_process_groups_are_found() {
        let me = std::process::id();
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let cred = CredCache::new().get(me, uid, gid);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert_eq!(cred.groups, parse_groups(&status, gid));
        assert_eq!((cred.uid, cred.gid), (uid, gid));
        // A kernel-initiated request has no process to ask.
        assert!(CredCache::new().get(0, 5, 6).groups.is_empty());
    }
}
