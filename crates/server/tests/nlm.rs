//! The lock manager (NLM v4) and status monitor (NSM v1) on the wire: locks
//! between client hosts, blocked requests granted on release, the grace
//! period after a restart, and who may have a host's locks dropped.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_proto::nfs3::NfsFh3;
use eagernfs_proto::nlm::*;
use eagernfs_proto::portmap::{Mapping, IPPROTO_TCP, PMAPPROC_GETPORT, PMAP_PROGRAM, PMAP_V2};
use eagernfs_rpc::AcceptStat;
use eagernfs_server::{LockConfig, LockHost, ServerConfig};
use eagernfs_xdr::Opaque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn config(locks: LockConfig) -> ServerConfig {
    ServerConfig { locks: LockConfig { callbacks: false, ..locks }, ..ServerConfig::default() }
}

fn server(locks: LockConfig) -> TestServer {
    TestServer::start_with(
        config(locks),
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    )
}

fn from(s: &TestServer, ip: &str) -> Client {
    Client::connect_from(s.addr, format!("{ip}:0").parse().unwrap()).unwrap()
}

/// A client host: its connection and name.
struct Host {
    c: Client,
    name: &'static str,
}

impl Host {
    fn alock(&self, fh: &NfsFh3, owner: u8, offset: u64, len: u64) -> Nlm4Lock {
        Nlm4Lock {
            caller_name: Opaque::from_static(self.name.as_bytes()),
            fh: Opaque(fh.data.0.clone()),
            oh: Opaque(Bytes::from(vec![owner; 8])),
            svid: owner as i32,
            l_offset: offset,
            l_len: len,
        }
    }

    fn lock(
        &mut self,
        fh: &NfsFh3,
        owner: u8,
        offset: u64,
        len: u64,
        exclusive: bool,
        block: bool,
    ) -> Nlm4Stats {
        self.lock_args(Nlm4LockArgs {
            cookie: Opaque::from_static(b"ck"),
            block,
            exclusive,
            alock: self.alock(fh, owner, offset, len),
            reclaim: false,
            state: 1,
        })
    }

    fn lock_args(&mut self, args: Nlm4LockArgs) -> Nlm4Stats {
        let r: Nlm4Res = self.c.call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &args).results();
        assert_eq!(r.cookie.as_bytes(), args.cookie.as_bytes(), "the cookie comes back");
        r.stat
    }

    fn unlock(&mut self, fh: &NfsFh3, owner: u8, offset: u64, len: u64) -> Nlm4Stats {
        let args =
            Nlm4UnlockArgs { cookie: Opaque::from_static(b"u"), alock: self.alock(fh, owner, offset, len) };
        let r: Nlm4Res = self.c.call(NLM_PROGRAM, NLM_V4, proc4::UNLOCK, &args).results();
        r.stat
    }

    fn test(&mut self, fh: &NfsFh3, owner: u8, offset: u64, len: u64, exclusive: bool) -> Nlm4TestReply {
        let args = Nlm4TestArgs {
            cookie: Opaque::from_static(b"t"),
            exclusive,
            alock: self.alock(fh, owner, offset, len),
        };
        let r: Nlm4TestRes = self.c.call(NLM_PROGRAM, NLM_V4, proc4::TEST, &args).results();
        r.stat
    }

    fn notify(&mut self, name: &'static str) {
        let args = StatChge { mon_name: Opaque::from_static(name.as_bytes()), state: 3 };
        let r = self.c.call(NSM_PROGRAM, NSM_V1, sm::NOTIFY, &args);
        assert_eq!(r.accept_stat(), AcceptStat::Success);
    }
}

fn file(s: &TestServer) -> NfsFh3 {
    let mut c = s.client();
    let root = c.root("/mem");
    c.create(&root, "f")
}

#[test]
fn hosts_contend_for_byte_ranges() {
    let s = server(LockConfig::default());
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };
    assert_eq!(a.lock(&fh, 1, 0, 100, true, false), Nlm4Stats::Granted);
    assert_eq!(b.lock(&fh, 1, 50, 10, false, false), Nlm4Stats::Denied, "overlaps A's exclusive lock");
    assert_eq!(b.lock(&fh, 1, 100, 0, true, false), Nlm4Stats::Granted, "from 100 to the end is free");
    // Same owner bytes and svid on another host are another owner.
    match a.test(&fh, 1, 150, 1, false) {
        Nlm4TestReply::Denied(h) => {
            assert_eq!((h.exclusive, h.l_offset, h.l_len, h.svid), (true, 100, 0, 1));
        }
        other => panic!("A should see B's lock: {other:?}"),
    }
    // A's own second owner conflicts with A's first.
    assert_eq!(a.lock(&fh, 2, 10, 1, false, false), Nlm4Stats::Denied);
    assert_eq!(a.unlock(&fh, 1, 0, 100), Nlm4Stats::Granted);
    assert_eq!(a.lock(&fh, 2, 10, 1, false, false), Nlm4Stats::Granted);
    assert!(
        matches!(b.test(&fh, 9, 0, 10, false), Nlm4TestReply::Other(Nlm4Stats::Granted)),
        "shared locks coexist"
    );
    assert_eq!(s.stats.snapshot().locks_held, 2);
    s.stop();
}

#[test]
fn a_blocked_request_is_granted_when_the_holder_lets_go() {
    let s = server(LockConfig::default());
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };
    assert_eq!(a.lock(&fh, 1, 0, 0, true, false), Nlm4Stats::Granted);
    assert_eq!(b.lock(&fh, 1, 0, 10, true, true), Nlm4Stats::Blocked);
    assert_eq!(b.lock(&fh, 1, 0, 10, true, true), Nlm4Stats::Blocked, "asking again keeps its place");
    assert_eq!(s.stats.snapshot().locks_waiting, 1);
    assert_eq!(a.unlock(&fh, 1, 0, 0), Nlm4Stats::Granted);
    // Granted at the unlock, before B asks again: A cannot take it back.
    assert_eq!(a.lock(&fh, 1, 5, 1, true, false), Nlm4Stats::Denied);
    assert_eq!(b.lock(&fh, 1, 0, 10, true, true), Nlm4Stats::Granted);
    let snap = s.stats.snapshot();
    assert_eq!((snap.locks_held, snap.locks_waiting), (1, 0));
    // A cancelled request is not granted later.
    assert_eq!(a.lock(&fh, 3, 0, 10, true, true), Nlm4Stats::Blocked);
    let cancel = Nlm4CancArgs {
        cookie: Opaque::from_static(b"c"),
        block: true,
        exclusive: true,
        alock: a.alock(&fh, 3, 0, 10),
    };
    let r: Nlm4Res = a.c.call(NLM_PROGRAM, NLM_V4, proc4::CANCEL, &cancel).results();
    assert_eq!(r.stat, Nlm4Stats::Granted, "a queued request was withdrawn");
    assert_eq!(b.unlock(&fh, 1, 0, 10), Nlm4Stats::Granted);
    assert_eq!(s.stats.snapshot().locks_held, 0, "nothing was granted to the cancelled request");
    s.stop();
}

#[test]
fn only_the_host_itself_can_have_its_locks_dropped() {
    let s = server(LockConfig::default());
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };
    assert_eq!(a.lock(&fh, 1, 0, 0, true, false), Nlm4Stats::Granted);
    // B claims to be A restarting: refused (B's address took no lock as host-a).
    b.notify("host-a");
    let free_all = Nlm4Notify { name: Opaque::from_static(b"host-a"), state: 5 };
    assert_eq!(b.c.call(NLM_PROGRAM, NLM_V4, proc4::FREE_ALL, &free_all).accept_stat(), AcceptStat::Success);
    assert_eq!(b.lock(&fh, 1, 0, 1, true, false), Nlm4Stats::Denied);
    // A's status monitor says A restarted: its locks go.
    a.notify("host-a");
    assert_eq!(b.lock(&fh, 1, 0, 1, true, false), Nlm4Stats::Granted);
    // FREE_ALL from B's own address drops B's.
    let free_all = Nlm4Notify { name: Opaque::from_static(b"host-b"), state: 5 };
    b.c.call(NLM_PROGRAM, NLM_V4, proc4::FREE_ALL, &free_all);
    assert_eq!(s.stats.snapshot().locks_held, 0);
    s.stop();
}

#[test]
fn after_a_restart_only_reclaims_are_granted_in_the_grace_period() {
    let recorded: Arc<Mutex<Vec<Vec<LockHost>>>> = Default::default();
    let sink = recorded.clone();
    let s = server(LockConfig {
        grace_period: Duration::from_secs(3600),
        previous_hosts: vec![LockHost { name: "host-a".into(), addr: "127.0.0.1".parse().unwrap() }],
        nsm_state: 7,
        on_hosts_changed: Some(Arc::new(move |h: &[LockHost]| sink.lock().unwrap().push(h.to_vec()))),
        ..LockConfig::default()
    });
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };
    assert_eq!(b.lock(&fh, 1, 0, 0, true, false), Nlm4Stats::DeniedGracePeriod);
    assert_eq!(b.test(&fh, 1, 0, 0, true), Nlm4TestReply::Other(Nlm4Stats::DeniedGracePeriod));
    let reclaim = Nlm4LockArgs {
        cookie: Opaque::from_static(b"r"),
        block: false,
        exclusive: true,
        alock: a.alock(&fh, 1, 0, 0),
        reclaim: true,
        state: 3,
    };
    assert_eq!(a.lock_args(reclaim), Nlm4Stats::Granted);
    // The status monitor reports the state number this start was given.
    let st: SmStatRes = a.c.call(NSM_PROGRAM, NSM_V1, sm::STAT, &SmName::default()).results();
    assert_eq!(st, SmStatRes { res: 0, state: 7 });
    // The new holder was recorded (for the next restart) before it was granted.
    let rec = recorded.lock().unwrap().clone();
    assert_eq!(
        rec.last().unwrap(),
        &vec![LockHost { name: "host-a".into(), addr: "127.0.0.1".parse().unwrap() }]
    );
    s.stop();
}

/// The grace period ends once every host that held locks has reclaimed them: a host is done
/// when, after a reclaim, it sends a LOCK that is not one (clients reclaim everything first).
/// Not before: a LOCK from a host that has not reclaimed yet, another host's calls, or the
/// same name from another address change nothing.
#[test]
fn the_grace_period_ends_early_once_every_previous_host_has_reclaimed() {
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let d = done.clone();
    let host = |name: &str, ip: &str| LockHost { name: name.into(), addr: ip.parse().unwrap() };
    let s = server(LockConfig {
        grace_period: Duration::from_secs(3600),
        previous_hosts: vec![host("host-a", "127.0.0.1"), host("host-c", "127.0.0.3")],
        on_reclaims_done: Some(Arc::new(move || {
            d.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })),
        ..LockConfig::default()
    });
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };
    let mut c = Host { c: from(&s, "127.0.0.3"), name: "host-c" };
    let mut fake_a = Host { c: from(&s, "127.0.0.2"), name: "host-a" };
    let reclaim = |h: &Host, owner: u8, offset: u64| Nlm4LockArgs {
        cookie: Opaque::from_static(b"r"),
        block: false,
        exclusive: true,
        alock: h.alock(&fh, owner, offset, 1),
        reclaim: true,
        state: 3,
    };
    // Before it has reclaimed, a's plain LOCK is no sign (it has not noticed the restart).
    assert_eq!(a.lock(&fh, 1, 50, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    assert_eq!(a.lock_args(reclaim(&a, 1, 0)), Nlm4Stats::Granted);
    assert_eq!(a.lock_args(reclaim(&a, 1, 1)), Nlm4Stats::Granted);
    // Someone naming a from another address, and b, end nothing.
    let r = fake_a.lock_args(reclaim(&fake_a, 9, 10));
    assert_eq!(r, Nlm4Stats::Granted, "a reclaim from anyone is granted in grace (as before)");
    assert_eq!(fake_a.lock(&fh, 9, 60, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    assert_eq!(b.lock(&fh, 2, 70, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    // a is done; c is not yet.
    assert_eq!(a.lock(&fh, 1, 50, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(b.lock(&fh, 2, 70, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    // c restarted (SM_NOTIFY from its own address): it has nothing to reclaim. Grace is over.
    let notify = StatChge { mon_name: Opaque::from_static(b"host-c"), state: 9 };
    c.c.call(NSM_PROGRAM, NSM_V1, sm::NOTIFY, &notify);
    assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(b.lock(&fh, 2, 70, 1, true, false), Nlm4Stats::Granted, "grace over: new locks granted");
    assert_eq!(b.lock(&fh, 2, 0, 1, true, false), Nlm4Stats::Denied, "a's reclaimed lock holds");
    assert_eq!(c.lock(&fh, 3, 80, 1, true, false), Nlm4Stats::Granted);
    assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 1, "said once");
    s.stop();
}

#[test]
fn no_grace_without_previous_holders_and_bad_calls_get_clear_answers() {
    let s = server(LockConfig::default());
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    assert_eq!(a.lock(&fh, 1, 0, 0, true, false), Nlm4Stats::Granted, "a fresh server has no grace period");
    // A handle of no export, or garbage: stale.
    let bogus = NfsFh3 { data: Opaque(Bytes::from_static(&[0xee; 20])) };
    assert_eq!(a.lock(&bogus, 1, 0, 0, true, false), Nlm4Stats::StaleFh);
    let too_long = NfsFh3 { data: Opaque(Bytes::from(vec![1u8; 64])) };
    assert_eq!(a.lock(&too_long, 1, 0, 0, true, false), Nlm4Stats::StaleFh);
    // Truncated arguments: GARBAGE_ARGS; NLM v3 and the async forms: not offered.
    assert_eq!(a.c.call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &7u32).accept_stat(), AcceptStat::GarbageArgs);
    assert!(matches!(
        a.c.call(NLM_PROGRAM, 3, proc4::NULL, &()).accept_stat(),
        AcceptStat::ProgMismatch { low: 4, high: 4 }
    ));
    assert_eq!(a.c.call(NLM_PROGRAM, NLM_V4, 17, &()).accept_stat(), AcceptStat::ProcUnavail);
    let msg = Nlm4LockArgs { alock: a.alock(&fh, 1, 0, 0), ..Default::default() };
    assert_eq!(a.c.call(NLM_PROGRAM, NLM_V4, proc4::LOCK_MSG, &msg).accept_stat(), AcceptStat::ProcUnavail);
    // The portmapper on the NFS port names the lock manager and status monitor.
    for (prog, vers) in [(NLM_PROGRAM, NLM_V4), (NSM_PROGRAM, NSM_V1)] {
        let m = Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 };
        let port: u32 = a.c.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, &m).results();
        assert_eq!(port, s.addr.port() as u32);
    }
    s.stop();

    // With locks off, neither program exists.
    let off = server(LockConfig { enabled: false, ..LockConfig::default() });
    let mut c = off.client();
    assert_eq!(c.call(NLM_PROGRAM, NLM_V4, proc4::NULL, &()).accept_stat(), AcceptStat::ProgUnavail);
    assert_eq!(c.call(NSM_PROGRAM, NSM_V1, sm::NULL, &()).accept_stat(), AcceptStat::ProgUnavail);
    off.stop();
}

// ------------------------------------------------------------ a grant that comes late

/// The locks of a memory backend that enforces locks itself, as CephFS does,
/// and whose answer to a lock can come after a grace period began: the MDS
/// holds a request on a lock of a dead head's session until that session
/// ends, and a take-over ends it only once every live head enforces the
/// grace period.
struct SlowLocks {
    /// The cluster's grace flag (what `LockConfig::cluster_grace` reads).
    grace: Arc<std::sync::atomic::AtomicBool>,
    /// The next `try_lock` answers only after the grace period began.
    late: std::sync::atomic::AtomicBool,
    /// Locks taken here: owner id, exclusive, range.
    held: Mutex<Vec<(u64, bool, eagernfs_vfs::LockRange)>>,
}

impl eagernfs_vfs::FileLocks for SlowLocks {
    fn try_lock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        owner: u64,
        exclusive: bool,
        range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<Option<eagernfs_vfs::LockConflict>> {
        use std::sync::atomic::Ordering;
        if self.late.swap(false, Ordering::AcqRel) {
            self.grace.store(true, Ordering::Release);
        }
        let mut held = self.held.lock().unwrap();
        held.retain(|&(o, _, r)| o != owner || r.end <= range.start || range.end <= r.start);
        held.push((owner, exclusive, range));
        Ok(None)
    }

    fn test_lock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        _owner: u64,
        _exclusive: bool,
        _range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<Option<eagernfs_vfs::LockConflict>> {
        Ok(None)
    }

    fn unlock(
        &self,
        _fh: &eagernfs_vfs::FileHandle,
        owner: u64,
        range: eagernfs_vfs::LockRange,
    ) -> eagernfs_vfs::FsResult<()> {
        // Whole ranges only, as this test releases them.
        self.held
            .lock()
            .unwrap()
            .retain(|&(o, _, r)| o != owner || r.end <= range.start || range.end <= r.start);
        Ok(())
    }

    fn forget_file(&self, _fh: &eagernfs_vfs::FileHandle) {}
}

impl Hooks for SlowLocks {
    fn file_locks(&self) -> Option<&dyn eagernfs_vfs::FileLocks> {
        Some(self)
    }
}

/// A LOCK that passed the grace check before a take-over and that the file
/// system granted after it (the cluster soak's double grant,
/// docs/benchmarks/cluster-soak-locks-2026-11-26) is refused as in the grace
/// period and given back in the file system, where the reclaim then finds it
/// free; once the grace period is over, locks go as before.
#[test]
fn a_lock_the_file_system_grants_once_the_cluster_is_in_grace_is_given_back() {
    use std::sync::atomic::Ordering;
    let grace = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fs = Arc::new(Wrapped {
        inner: memory(),
        hooks: SlowLocks { grace: grace.clone(), late: Default::default(), held: Default::default() },
    });
    let s = TestServer::start_with(
        config(LockConfig { cluster_grace: Some(grace.clone()), ..LockConfig::default() }),
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", fs.clone())],
    );
    let fh = file(&s);
    let mut a = Host { c: from(&s, "127.0.0.1"), name: "host-a" };
    let mut b = Host { c: from(&s, "127.0.0.2"), name: "host-b" };

    fs.late.store(true, Ordering::Release);
    assert_eq!(b.lock(&fh, 1, 0, 1, true, false), Nlm4Stats::DeniedGracePeriod);
    assert!(grace.load(Ordering::Acquire), "the file system answered in the grace period");
    assert_eq!(*fs.held.lock().unwrap(), vec![], "given back in the file system");
    // Blocking or not, nothing is granted or queued in the grace period.
    assert_eq!(b.lock(&fh, 1, 0, 1, true, true), Nlm4Stats::DeniedGracePeriod);
    // The holder's reclaim is granted, there and here.
    let reclaim = Nlm4LockArgs {
        cookie: Opaque::from_static(b"r"),
        block: false,
        exclusive: true,
        alock: a.alock(&fh, 1, 0, 1),
        reclaim: true,
        state: 3,
    };
    assert_eq!(a.lock_args(reclaim), Nlm4Stats::Granted);
    assert_eq!(fs.held.lock().unwrap().len(), 1);

    // The grace period is over: B waits for A's lock as usual.
    grace.store(false, Ordering::Release);
    assert_eq!(b.lock(&fh, 1, 0, 1, true, false), Nlm4Stats::Denied);
    assert_eq!(a.unlock(&fh, 1, 0, 1), Nlm4Stats::Granted);
    assert_eq!(b.lock(&fh, 1, 0, 1, true, false), Nlm4Stats::Granted);
    assert_eq!(fs.held.lock().unwrap().len(), 1);
    s.stop();
}
