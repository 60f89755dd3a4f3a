//! Calls and bytes per client host, for `eagernfs stat` and the status
//! page: who uses the server, and how much.
//!
//! Sharded by address so threads serving different clients do not meet on
//! one lock; bounded (a flood from many addresses must not grow it without
//! end): a full shard forgets the host idle longest.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;

const SHARDS: usize = 16;
/// Hosts remembered at most (over all shards).
pub(crate) const HOSTS_MAX: usize = 4096;

/// One client host.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientSnapshot {
    pub addr: IpAddr,
    pub calls: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Seconds since its last call.
    pub idle_s: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    calls: u64,
    bytes_read: u64,
    bytes_written: u64,
    /// Server uptime (s) at its last call.
    last_seen_s: u64,
}

pub(crate) struct ClientTable {
    shards: Box<[Mutex<HashMap<IpAddr, Counters>>]>,
    hasher: RandomState,
}

impl Default for ClientTable {
    fn default() -> Self {
        ClientTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl std::fmt::Debug for ClientTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTable")
    }
}

impl ClientTable {
    fn with(&self, addr: IpAddr, now_s: Option<u64>, f: impl FnOnce(&mut Counters)) {
        let mut shard = self.shards[self.hasher.hash_one(addr) as usize % SHARDS].lock();
        if !shard.contains_key(&addr) && shard.len() >= HOSTS_MAX / SHARDS {
            if let Some(idle) = shard.iter().min_by_key(|(_, c)| c.last_seen_s).map(|(a, _)| *a) {
                shard.remove(&idle);
            }
        }
        let c = shard.entry(addr).or_default();
        if let Some(now) = now_s {
            c.last_seen_s = now;
        }
        f(c);
    }

    pub(crate) fn call(&self, addr: IpAddr, now_s: u64) {
        self.with(addr, Some(now_s), |c| c.calls += 1);
    }

    pub(crate) fn read(&self, addr: IpAddr, n: u64) {
        self.with(addr, None, |c| c.bytes_read += n);
    }

    pub(crate) fn wrote(&self, addr: IpAddr, n: u64) {
        self.with(addr, None, |c| c.bytes_written += n);
    }

    /// Every host, busiest first.
    pub(crate) fn snapshot(&self, now_s: u64) -> Vec<ClientSnapshot> {
        let mut all: Vec<ClientSnapshot> = self
            .shards
            .iter()
            .flat_map(|s| {
                s.lock()
                    .iter()
                    .map(|(a, c)| ClientSnapshot {
                        addr: *a,
                        calls: c.calls,
                        bytes_read: c.bytes_read,
                        bytes_written: c.bytes_written,
                        idle_s: now_s.saturating_sub(c.last_seen_s),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.addr.cmp(&b.addr)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_host_and_stays_bounded() {
        let t = ClientTable::default();
        let a: IpAddr = "127.0.0.9".parse().unwrap();
        t.call(a, 1);
        t.call(a, 2);
        t.read(a, 100);
        t.wrote(a, 7);
        let s = t.snapshot(5);
        assert_eq!((s[0].calls, s[0].bytes_read, s[0].bytes_written, s[0].idle_s), (2, 100, 7, 3));
        for i in 0..20_000u32 {
            t.call(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)), 10);
        }
        assert!(t.snapshot(10).len() <= HOSTS_MAX);
    }
}
