//! `eagernfs serve --node-id N`: one head of several on one CephFS.
//!
//! Joins the cluster's shared state in RADOS (see `eagernfs_server::cluster`)
//! before the exports are opened: the handle key comes from there, the lock
//! holders and NSM state of node N too, and when they may hold locks the
//! cluster enters its grace period and every live head confirms it before
//! the CephFS backend ends node N's previous session (which releases its
//! locks in the file system).

use anyhow::{bail, Context, Result};
use eagernfs_server::cluster::{Head, Joined};
use eagernfs_server::{LockConfig, LockHost};
use eagernfs_vfs::cephfs::CephFsSource;
use eagernfs_vfs::rados::{Rados, RadosSpec};
use std::sync::Arc;
use std::time::Duration;

/// The flags of a head.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Several servers on one CephFS")]
pub(crate) struct ClusterArgs {
    /// This server's node id among the servers ("heads") exporting one CephFS. Heads share
    /// the handle key, lock holders and grace state in RADOS; a server started with the
    /// node id (and address) of one that died takes over its clients and ends its CephFS
    /// session at once. Needs CephFS exports and librados.
    #[arg(long, value_name = "N")]
    pub(crate) node_id: Option<u32>,

    /// The RADOS pool holding the heads' shared state (a few small objects).
    #[arg(long, value_name = "POOL", default_value = ".nfs", requires = "node_id")]
    pub(crate) cluster_pool: String,

    /// The namespace in --cluster-pool (one per cluster of heads).
    #[arg(long, value_name = "NAME", default_value = "eagernfs", requires = "node_id")]
    pub(crate) cluster_namespace: String,

    /// The librados shared object (a file name looked up on the library path, or a path).
    #[arg(long, value_name = "LIB", default_value = eagernfs_vfs::rados::LIBRARY)]
    pub(crate) librados: String,

    /// Seconds a take-over waits for the other live heads to confirm the grace period
    /// before it ends the dead head's CephFS session.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, requires = "node_id")]
    pub(crate) cluster_confirm_timeout: f64,

    /// Seconds a head keeps answering without hearing from the cluster (a read of the
    /// shared grace state, renewed four times a lease): a head cut off from the cluster
    /// longer answers nothing (NFSv3: JUKEBOX), and a take-over of a node waits this long
    /// after taking the node (its writes to the shared state) before it ends the previous
    /// head's CephFS session (not after a restart in place). 0: no lease (only where
    /// something else makes sure a replaced head is dead, e.g. pacemaker's STONITH). See
    /// docs/cluster.md, "Fencing".
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, requires = "node_id")]
    pub(crate) cluster_lease: f64,
}

/// The exit status of a head that was fenced (its node taken over, or its CephFS
/// session ended): EX_TEMPFAIL. Do not restart it automatically: a restarted head takes
/// its node back, fencing the head that replaced it.
pub(crate) const EXIT_FENCED: i32 = 75;

/// A joined head: what the server is built with, and what keeps it current.
pub(crate) struct Member {
    pub(crate) head: Arc<Head>,
    pub(crate) key: [u8; 16],
    /// Where the shared state is (`pool/namespace`): names this cluster of heads.
    place: String,
    joined: Joined,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The flock that says node N runs from this state directory (see [`here`]).
    _here: std::fs::File,
}

impl Member {
    /// The CephFS session name of this node's export `src`: the same on
    /// every start of node N of this cluster of heads, so a new head ends the
    /// old one's session, and different from node N of another cluster of
    /// heads (another pool or namespace) on the same CephFS, whose session it
    /// must not end. It names the client, file system and path, not the
    /// ceph.conf's path (which may differ between the machines that run node N).
    pub(crate) fn session_uuid(&self, src: &CephFsSource) -> String {
        use siphasher::sip::SipHasher24;
        use std::hash::Hasher;
        let mut h = SipHasher24::new_with_keys(0, 0);
        h.write(format!("{}@{}{}", src.client_id, src.fs_name, src.path).as_bytes());
        h.write_u8(0);
        h.write(self.place.as_bytes());
        format!("eagernfs-node-{}-{:016x}", self.head.node(), h.finish())
    }

    /// The head's lease: the server checks it at every call, the CephFS
    /// backend raises its fence when its session is ended.
    pub(crate) fn lease(&self) -> Arc<eagernfs_server::cluster::Lease> {
        self.head.lease()
    }

    /// The lock manager's configuration: node N's hosts and state number,
    /// hosts recorded in RADOS, the cluster's grace flag.
    pub(crate) fn lock_config(&self, grace_period: Duration) -> LockConfig {
        let head = self.head.clone();
        // Until the grace period is over, the hosts that have not reclaimed yet stay on
        // the list too: a crash of this head before then must not forget them.
        let (previous, until) =
            (self.joined.previous_hosts.clone(), std::time::Instant::now() + grace_period);
        let on_hosts_changed: eagernfs_server::HostsChanged = Arc::new(move |hosts: &[LockHost]| {
            let mut hosts = hosts.to_vec();
            if std::time::Instant::now() < until {
                for h in &previous {
                    if !hosts.contains(h) {
                        hosts.push(h.clone());
                    }
                }
            }
            if let Err(e) = head.record_hosts(&hosts) {
                tracing::error!("cannot record the hosts holding locks in RADOS: {e}");
            }
        });
        LockConfig {
            grace_period,
            previous_hosts: self.joined.previous_hosts.clone(),
            nsm_state: self.joined.nsm_state,
            on_hosts_changed: Some(on_hosts_changed),
            cluster_grace: Some(self.head.grace_flag()),
            on_reclaims_done: Some({
                let head = self.head.clone();
                Arc::new(move || head.reclaims_done())
            }),
            lease: Some(self.head.lease()),
            ..LockConfig::default()
        }
    }
}

impl Member {
    /// A planned stop (SIGTERM, SIGINT): if clients hold locks through this
    /// head, keep them for a successor with this node id (a grace period the
    /// other heads confirm, lasting at most `hold_for` without a successor)
    /// before the exports close, which ends the CephFS session and so
    /// releases the locks in the file system. Without locks: nothing to do.
    pub(crate) fn stop_cleanly(&self, locks_held: u64, hold_for: Duration, confirm: Duration) {
        if locks_held == 0 {
            return;
        }
        let t0 = std::time::Instant::now();
        match self.head.hand_over(hold_for, confirm) {
            Ok(confirmed) => tracing::info!(
                node = self.head.node(),
                locks = locks_held,
                "cluster: clients' locks handed over in {:.0} ms ({}); a head started with node id {} reclaims them",
                t0.elapsed().as_secs_f64() * 1e3,
                if confirmed { "every live head enforces the grace period" } else { "NOT confirmed by every head" },
                self.head.node()
            ),
            Err(e) => tracing::error!(
                "cluster: cannot start a grace period for this node's clients ({e}): their locks are released as this head stops"
            ),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let t0 = std::time::Instant::now();
        self.head.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        tracing::debug!("cluster: thread stopped in {:?}", t0.elapsed());
        self.head.unwatch();
        tracing::debug!("cluster: unwatched in {:?}", t0.elapsed());
        // A clean stop: the next start of this node need not wait out this head's lease.
        if self.head.lease().fenced().is_none() {
            match self.head.leave() {
                Ok(()) => tracing::debug!("cluster: left node {} in {:?}", self.head.node(), t0.elapsed()),
                Err(e) => tracing::warn!("cluster: cannot mark node {} stopped: {e}", self.head.node()),
            }
        }
    }
}

/// The first CephFS export's source: where the cluster is.
pub(crate) fn first_cephfs_source(
    dir: Option<&std::path::Path>,
    exports: Option<&std::path::Path>,
) -> Result<Option<CephFsSource>> {
    let parse = |s: &str| CephFsSource::parse(s).map_err(|e| anyhow::anyhow!("{e}"));
    if let Some(dir) = dir {
        let s = dir.to_string_lossy();
        return if eagernfs_vfs::cephfs::is_cephfs_url(&s) { parse(&s).map(Some) } else { Ok(None) };
    }
    let Some(file) = exports else { return Ok(None) };
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    for line in text.lines().map(str::trim_start) {
        if eagernfs_vfs::cephfs::is_cephfs_url(line) {
            let url = line.split_whitespace().next().unwrap_or(line);
            return parse(url).map(Some);
        }
    }
    Ok(None)
}

/// How long a start waits for the process that holds its node's flock to let go of it: a
/// head killed (`kill -9`) or stopping still holds it until its last thread has exited and
/// its files are closed, some milliseconds after the signal (longer for a head handing its
/// clients' locks over). A process still holding it after this is alive: the start fails.
const PREVIOUS_EXIT_WAIT: Duration = Duration::from_secs(10);

/// How often that wait tries the flock again.
const PREVIOUS_EXIT_POLL: Duration = Duration::from_millis(5);

/// Node `node` runs from `state_dir`: an exclusive flock on
/// `cluster-node-N.lock` there, held for the life of the process (the kernel
/// lets go of it when the process dies, even of SIGKILL; a frozen process
/// keeps it), and the RADOS client id the last process of this directory ran
/// as (`cluster-node-N.client`, 0 if none). With both, a restart in place
/// knows its predecessor is dead and has no lease to wait out.
///
/// A flock held by another process is waited for (at most
/// [`PREVIOUS_EXIT_WAIT`], saying so once): a restart right after a `kill -9`
/// finds the dying process still holding it for some milliseconds.
fn here(state_dir: &std::path::Path, node: u32) -> Result<(std::fs::File, u64)> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(state_dir)
        .with_context(|| format!("creating {}", state_dir.display()))?;
    let path = state_dir.join(format!("cluster-node-{node}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let deadline = std::time::Instant::now() + PREVIOUS_EXIT_WAIT;
    let mut waiting_since = None;
    while !try_flock(&file).with_context(|| format!("locking {}", path.display()))? {
        let holder = match flock_holder(&file) {
            Some(pid) => format!(" (pid {pid})"),
            None => String::new(),
        };
        if std::time::Instant::now() >= deadline {
            bail!(
                "node {node} is served from {} by another process{holder} (it holds {} and did not let go of it within {} s); stop it first",
                state_dir.display(),
                path.display(),
                PREVIOUS_EXIT_WAIT.as_secs()
            );
        }
        if waiting_since.is_none() {
            tracing::info!(
                node,
                "cluster: waiting for the previous process of node {node}{holder} to exit (it holds {}; at most {} s)",
                path.display(),
                PREVIOUS_EXIT_WAIT.as_secs()
            );
            waiting_since = Some(std::time::Instant::now());
        }
        std::thread::sleep(PREVIOUS_EXIT_POLL);
    }
    if let Some(t0) = waiting_since {
        tracing::info!(
            node,
            "cluster: the previous process of node {node} let go of {} after {:.0} ms",
            path.display(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    let last = std::fs::read_to_string(state_dir.join(format!("cluster-node-{node}.client")))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Ok((file, last))
}

/// Take the exclusive flock on `file` without blocking: false if another
/// open file description holds it.
fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        Some(libc::EINTR) => Ok(false),
        _ => Err(e),
    }
}

/// The process holding a flock on `file`, as `/proc/locks` names it (for
/// messages; `None` if it cannot tell).
fn flock_holder(file: &std::fs::File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    flock_holder_in(&locks, libc::major(meta.dev()), libc::minor(meta.dev()), meta.ino())
}

/// [`flock_holder`] on the text of `/proc/locks`: lines such as
/// `3: FLOCK  ADVISORY  WRITE 4242 fd:01:1835012 0 EOF` (device numbers in hex);
/// lines with `->` are waiters, not holders.
fn flock_holder_in(locks: &str, major: u32, minor: u32, ino: u64) -> Option<u32> {
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut id = fields.get(5)?.split(':');
        let (maj, min) =
            (u32::from_str_radix(id.next()?, 16).ok()?, u32::from_str_radix(id.next()?, 16).ok()?);
        let i: u64 = id.next()?.parse().ok()?;
        (maj == major && min == minor && i == ino).then(|| fields[4].parse().ok()).flatten()
    })
}

/// Join as `args.node_id` (None: not a head). Blocks until the other heads
/// confirm a grace period this head starts (bounded), and until the node's
/// previous head's lease has run out (unless that head ran from `state_dir`
/// and is gone).
pub(crate) fn join(
    args: &ClusterArgs,
    source: Option<CephFsSource>,
    grace_period: Duration,
    connect_timeout: Duration,
    locks: bool,
    state_dir: &std::path::Path,
) -> Result<Option<Member>> {
    let Some(node) = args.node_id else { return Ok(None) };
    let Some(source) = source else {
        bail!("--node-id {node}: heads share a CephFS; export one (cephfs://…) or leave out --node-id");
    };
    if !(args.cluster_confirm_timeout.is_finite() && (0.0..=600.0).contains(&args.cluster_confirm_timeout)) {
        bail!("--cluster-confirm-timeout {}: give 0 to 600 seconds", args.cluster_confirm_timeout);
    }
    if !(args.cluster_lease.is_finite() && (0.0..=600.0).contains(&args.cluster_lease)) {
        bail!("--cluster-lease {}: give 0 (no lease) to 600 seconds", args.cluster_lease);
    }
    let lease_length = Duration::from_secs_f64(args.cluster_lease);
    if !lease_length.is_zero() && lease_length < Duration::from_millis(500) {
        bail!("--cluster-lease {}: give at least 0.5 seconds (or 0: no lease)", args.cluster_lease);
    }
    let lease = Arc::new(eagernfs_server::cluster::Lease::new(lease_length));
    let started = std::time::Instant::now();
    let (here_lock, last_here) = here(state_dir, node)?;
    let spec = RadosSpec {
        library: args.librados.clone(),
        conf: source.conf.clone(),
        client_id: source.client_id.clone(),
        pool: args.cluster_pool.clone(),
        namespace: args.cluster_namespace.clone(),
        timeout: connect_timeout,
    };
    let rados = Arc::new(Rados::connect(&spec).map_err(|e| {
        anyhow::anyhow!("--node-id {node}: the heads' shared state (pool {:?}): {e}", args.cluster_pool)
    })?);
    tracing::debug!("cluster: RADOS connected in {:?}", started.elapsed());
    let key = eagernfs_server::cluster::handle_key(&*rados).context("the shared handle key")?;
    let grace = if locks { grace_period } else { Duration::ZERO };
    let (head, joined) = Head::join(rados.clone(), node, grace, Some(lease.clone()))
        .with_context(|| format!("joining as node {node}"))?;
    head.on_fenced(Box::new(move |why| {
        // Nothing more is answered (the lease is fenced); a restart by hand
        // or by a cluster manager takes the node back when that is wanted.
        eprintln!("eagernfs: node {node} is fenced ({why}): exiting with status {EXIT_FENCED}");
        // _exit, not exit: the C++ destructors of libcephfs and librados must not run
        // while their threads still do (that crashes), and nothing is left to flush.
        // SAFETY: ends the process; no Rust state is relied on afterwards.
        unsafe { libc::_exit(EXIT_FENCED) };
    }));
    tracing::debug!("cluster: node record and grace state in {:?}", started.elapsed());
    let watcher = rados.clone();
    head.watch_with(Box::new(move |cb| {
        let w = watcher.watch(eagernfs_server::cluster::GRACE_OID, cb)?;
        Ok(Box::new(w) as eagernfs_server::cluster::WatchGuard)
    }))
    .context("watching the cluster's grace state")?;
    let thread = head.spawn().context("starting the cluster thread")?;
    let in_grace = head.grace_flag().load(std::sync::atomic::Ordering::Acquire);
    let mut all_confirmed = true;
    if !joined.previous_hosts.is_empty() && locks {
        let confirmed = head
            .wait_enforced(Duration::from_secs_f64(args.cluster_confirm_timeout))
            .context("waiting for the other heads to enter the grace period")?;
        all_confirmed = confirmed && !head.assumed_down();
        tracing::info!(
            node,
            hosts = joined.previous_hosts.len(),
            "cluster: took over node {node} (RADOS client {} before, now {}); grace period {}",
            joined.previous.client,
            rados.instance_id(),
            if confirmed { "confirmed by every live head" } else { "NOT confirmed by every head" }
        );
    }
    // The node's previous head may be alive but cut off (or frozen): it must have
    // stopped answering before its CephFS session, and so its clients' locks, is ended
    // (by the mount that follows), and so must any head that did not confirm the grace
    // period: their leases run out first.
    let client_file = state_dir.join(format!("cluster-node-{node}.client"));
    std::fs::write(&client_file, format!("{}\n", rados.instance_id()))
        .with_context(|| format!("writing {}", client_file.display()))?;
    let previous = joined.previous.client;
    let in_place = previous != 0 && previous == last_here;
    if in_place && all_confirmed {
        // The node's previous head ran from this state directory, and its flock was
        // free: that process is dead and answers nothing; every other head confirmed the
        // grace period. A restart in place: nothing to wait for.
        tracing::info!(
            node,
            "cluster: node {node}'s previous head (RADOS client {last_here}) ran here and is gone: no lease to wait out"
        );
    } else if previous != 0 || !all_confirmed {
        if let Some(at) = head.lease_over_at() {
            let wait = at.saturating_duration_since(std::time::Instant::now());
            tracing::info!(
                node,
                "cluster: waiting {:.1} s for the lease of node {node}'s previous head{} to run out",
                wait.as_secs_f64(),
                if all_confirmed { "" } else { " and of the heads that did not confirm the grace period" }
            );
            // The grace period this head started counts from when it serves.
            head.restart_grace_clock(grace + wait);
            std::thread::sleep(wait);
        }
    }
    // The lease is renewed by each read of the grace state (the head's thread does one
    // every quarter lease); this one makes it valid before the first call.
    head.refresh().context("reading the grace state")?;
    let db = head.grace_state();
    tracing::info!(
        node,
        epoch = db.current,
        "cluster: joined in {:.0} ms; {}",
        started.elapsed().as_secs_f64() * 1e3,
        if in_grace {
            "the cluster is in its grace period (only reclaims granted)"
        } else {
            "no grace period"
        }
    );
    let place = format!("{}/{}", args.cluster_pool, args.cluster_namespace);
    Ok(Some(Member { head, key, place, joined, thread: Some(thread), _here: here_lock }))
}

/// The cluster as `eagernfs stat` and the status page show it.
pub(crate) fn status_json(head: &Head) -> serde_json::Value {
    let db = head.grace_state();
    let nodes: Vec<serde_json::Value> = db
        .nodes
        .iter()
        .map(|(n, f)| serde_json::json!({ "node": n, "need": f.need, "enforcing": f.enforcing }))
        .collect();
    serde_json::json!({
        "node": head.node(),
        "epoch": db.current,
        "recovery_epoch": db.recovery,
        "in_grace": db.in_grace(),
        "nodes": nodes,
    })
}

/// One line for `eagernfs stat`: `cluster: node 1 · epoch 2 · grace period in force … · nodes 1 (need, enforcing), 2 (enforcing)`.
pub(crate) fn status_line(c: &serde_json::Value) -> Option<String> {
    let node = c["node"].as_u64()?;
    let nodes: Vec<String> = c["nodes"]
        .as_array()?
        .iter()
        .map(|n| {
            let flags: Vec<&str> = [("need", n["need"].as_bool()), ("enforcing", n["enforcing"].as_bool())]
                .iter()
                .filter(|(_, on)| *on == Some(true))
                .map(|(name, _)| *name)
                .collect();
            let id = n["node"].as_u64().unwrap_or(0);
            if flags.is_empty() {
                id.to_string()
            } else {
                format!("{id} ({})", flags.join(", "))
            }
        })
        .collect();
    let grace = if c["in_grace"].as_bool() == Some(true) {
        format!(
            "grace period in force (clients of epoch {} reclaim; only reclaims granted)",
            c["recovery_epoch"]
        )
    } else {
        "no grace period".to_string()
    };
    Some(format!("cluster: node {node} · epoch {} · {grace} · nodes {}", c["epoch"], nodes.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_of_a_flock_is_read_from_proc_locks() {
        let locks = "1: POSIX  ADVISORY  WRITE 100 fd:01:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 fd:01:1835012 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 4343 fd:01:1835012 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 99 00:2d:1835012 0 EOF\n";
        assert_eq!(flock_holder_in(locks, 0xfd, 1, 1835012), Some(4242));
        assert_eq!(flock_holder_in(locks, 0, 0x2d, 1835012), Some(99));
        assert_eq!(flock_holder_in(locks, 0xfd, 1, 77), None, "a POSIX lock is not ours");
        assert_eq!(flock_holder_in(locks, 8, 1, 5), None);
        assert_eq!(flock_holder_in("garbage\n1: FLOCK\n", 8, 1, 5), None);
    }

    #[test]
    fn a_held_node_flock_is_found_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster-node-7.lock");
        let mine = std::fs::File::create(&path).unwrap();
        assert!(try_flock(&mine).unwrap());
        // Another open file description of the same file: the flock is held by "another process".
        let other = std::fs::File::options().write(true).open(&path).unwrap();
        assert!(!try_flock(&other).unwrap());
        assert_eq!(flock_holder(&other), Some(std::process::id()));
        drop(mine);
        assert!(try_flock(&other).unwrap());
    }

    #[test]
    fn the_status_line_names_node_epoch_grace_and_flags() {
        let c = serde_json::json!({
            "node": 1, "epoch": 3, "recovery_epoch": 2, "in_grace": true,
            "nodes": [{"node": 1, "need": true, "enforcing": true}, {"node": 2, "need": false, "enforcing": false}],
        });
        assert_eq!(
            status_line(&c).unwrap(),
            "cluster: node 1 · epoch 3 · grace period in force (clients of epoch 2 reclaim; only reclaims granted) · nodes 1 (need, enforcing), 2"
        );
        assert_eq!(status_line(&serde_json::Value::Null), None);
    }
}
