//! The service threads' configuration ([`SvcConfig`], [`PoolMode`]), part of the server's.

use std::time::Duration;

/// How threads are grouped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolMode {
    /// One pool for the whole server; the scheduler places threads.
    #[default]
    Global,
    /// One pool per CPU the process may run on, its threads bound to it
    /// (Banks's per-node pools, per CPU here): a connection's calls stay on
    /// one CPU's caches.
    PerCpu,
}

/// Thread limits of the service.
#[derive(Clone, Debug)]
pub struct SvcConfig {
    /// How threads are grouped.
    pub pools: PoolMode,
    /// Threads each pool keeps even when idle (at least one per slot).
    pub threads_min: usize,
    /// Most threads in all pools together.
    pub threads_max: usize,
    /// An idle thread above the minimum ends after waiting this long.
    pub idle_exit: Duration,
    /// Every WRITE may block (an export has an intent journal, which answers
    /// after a group commit): run them all on slow-call threads.
    pub writes_block: bool,
    /// Every change of names or attributes may block (a local export syncs
    /// each before answering it, a journal commit's wait): run them on
    /// slow-call threads rather than hold a slot until the watchdog notices.
    pub metadata_blocks: bool,
    /// Threads running quick calls at once, per CPU (slots). One suits calls
    /// that only use the CPU; calls that often wait on other machines (a
    /// cluster's round trips on a cache miss) need more, or every such wait
    /// holds the others up until the watchdog notices it.
    pub slots_per_cpu: usize,
    /// A call of an export whose backend waits on other machines (a
    /// cluster) that has not returned after this long is answered
    /// NFS3ERR_JUKEBOX ("try again later") by the watchdog; its own answer,
    /// when it comes, is dropped.
    pub remote_reply_after: Duration,
}

impl Default for SvcConfig {
    fn default() -> Self {
        SvcConfig {
            pools: PoolMode::Global,
            threads_min: 2,
            threads_max: 64,
            idle_exit: Duration::from_secs(10),
            writes_block: false,
            metadata_blocks: false,
            slots_per_cpu: 1,
            remote_reply_after: Duration::from_secs(10),
        }
    }
}
