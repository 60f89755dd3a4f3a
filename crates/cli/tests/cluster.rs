//! Several heads on one CephFS (`eagernfs serve --node-id N`), on the one-node test cluster
//! (`scripts/ceph-cluster.sh start`; `scripts/test` starts it in CI). Without a cluster the
//! test prints SKIP, unless `EAGERNFS_REQUIRE_CEPH=1` says one must be there.
//!
//! Two heads, each on its own loopback address (127.0.0.11, 127.0.0.12). A client writes and
//! locks through head A; a handle A gave works on B (one handle key, in RADOS); B's client
//! cannot take A's client's lock (a CephFS lock). Head A is killed with SIGKILL and a new
//! head started with A's node id, address and port, but a state directory of its own (as on
//! another machine), takes over: it ends A's CephFS session at once (no MDS session
//! timeout), the client's next call succeeds (the time from the kill is printed), committed
//! data is intact and the write verifier changed (UNSTABLE data is to be resent); during the
//! cluster's grace period B grants no new lock, the client reclaims its lock through the new
//! head, and once the grace period is over B's client is still refused it: nobody else
//! held it meanwhile. The take-over is repeated `EAGERNFS_TAKEOVER_ROUNDS` times (default 2),
//! each during the previous one's grace period, and the times are summarised.
//!
//! Without a moving address: `eagernfs mount nfs://A,B/` over two heads. A file is written
//! and fsynced (committed); another is being written (UNSTABLE WRITEs, committed in batches,
//! and dirty data not yet sent) when the head in use is killed with SIGKILL and restarted at
//! once (as its service manager would). The mount carries on through the other head with no
//! error: the first call after the kill succeeds (the time is printed), the writer finishes,
//! what the dead head had acknowledged but not committed is resent (new verifier; the bytes
//! resent are printed) and every byte is on the file system afterwards. The restart matters to the other head, not to the client: it
//! ends the dead head's CephFS session, whose capabilities the other head's calls on the same
//! files would otherwise wait for until the MDS times the session out. The next round kills
//! the other head (`EAGERNFS_FAILOVER_ROUNDS`, default 3).

mod common;

use bytes::Bytes;
use common::ceph::*;
use common::*;
use eagernfs_client::lock::{LockRange, LockReply};
use eagernfs_client::{MountOptions, NfsOps};
use eagernfs_proto::nfs3::{Createhow3, NfsFh3, Sattr3, StableHow};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The tests with heads run one at a time: a head killed with SIGKILL (the take-over
/// test's) holds capabilities until its successor ends its session, and every other
/// head's calls on those files would wait meanwhile.
static HEADS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn heads_turn() -> std::sync::MutexGuard<'static, ()> {
    HEADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The same turn, for the fail-over tests: together they would also load the machine and the
/// one-node cluster beyond the heads' start timeout, and a process spawned by one test while
/// another holds a file of a FUSE mount open inherits that descriptor and closes it at exec,
/// which waits for the file's write-back, which may wait for a killed head.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    heads_turn()
}

#[test]
fn a_new_head_takes_over_a_killed_ones_clients_data_and_locks() {
    let Some(conf) = heads_ceph_conf("a_new_head_takes_over_a_killed_ones_clients_data_and_locks") else {
        return;
    };
    let _turn = heads_turn();
    let ns = format!("e2e-{}", unique());
    // Long: it must end early, once X has reclaimed.
    let grace_s = 60;
    let (addr_a, addr_b) = (addr_on("127.0.0.11"), addr_on("127.0.0.12"));
    let mut a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
    let b = Head::start(&conf, &ns, 2, &addr_b, grace_s);
    let rt = runtime();

    // Through A: a file, committed data, an UNSTABLE write, a lock.
    let ca = rt.block_on(client(&addr_a));
    let cred = ca.default_cred();
    let name = format!("takeover-{ns}");
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let made = rt
        .block_on(ca.create(&cred, &ca.root(), name.as_bytes(), how))
        .unwrap_or_else(|e| panic!("create through head A: {e}\n{}", a.log()));
    let fh: NfsFh3 = made.obj.expect("CREATE returns the handle");
    rt.block_on(ca.write(&cred, &fh, 0, Bytes::from_static(b"committed"), StableHow::FileSync)).unwrap();
    let verf_a =
        rt.block_on(ca.write(&cred, &fh, 100, Bytes::from_static(b"x"), StableHow::Unstable)).unwrap().verf;
    let lx = rt.block_on(locker(&ca, "client-x"));
    // Learns the server's NSM state number, so a change of it is seen as a restart.
    rt.block_on(lx.announce_restart()).unwrap();
    let [ox, oy] = owners(["owner-x", "owner-y"]);
    let range = LockRange { offset: 0, len: 10 };
    assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Granted);

    // Through B: A's handle works (one key), A's client's lock excludes B's client.
    let cb = rt.block_on(client(&addr_b));
    let r = rt.block_on(cb.read(&cb.default_cred(), &fh, 0, 9)).expect("A's handle read through B");
    assert_eq!(&r.data[..], b"committed");
    let ly = rt.block_on(locker(&cb, "client-y"));
    assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Denied);

    // A dies; a new head takes node 1 and A's address. Again, for as many rounds as asked
    // (EAGERNFS_TAKEOVER_ROUNDS, default 2): a take-over during the last one's grace period.
    let rounds: usize =
        std::env::var("EAGERNFS_TAKEOVER_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    let mut verf = verf_a;
    let mut figures = Vec::new();
    let mut killed = Instant::now();
    let mut listening = Instant::now();
    for round in 1..=rounds {
        a.kill9();
        killed = Instant::now();
        a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
        listening = Instant::now();
        let started = killed.elapsed();
        // The head listens: its client reconnects and is answered (a busy cluster may still
        // hold the first calls up for a while: the new head waits for the old session's
        // capabilities to go).
        let resumed = loop {
            let r = rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), ca.getattr(&cred, &fh)).await
            });
            if let Ok(Ok(_)) = r {
                break killed.elapsed();
            }
            assert!(
                listening.elapsed() < Duration::from_secs(60),
                "no answer within 60 s of the new head listening: {r:?}\n{}",
                a.log()
            );
        };
        eprintln!(
            "take-over {round}: new head listening {started:?} after the kill; first successful call {resumed:?} after it"
        );
        figures.push(resumed);
        if std::env::var_os("EAGERNFS_TEST_VERBOSE").is_some() {
            eprintln!("{}", a.log());
        }
        assert!(a.log().contains("took over node 1"), "{}", a.log());
        assert!(
            a.log().contains("confirmed by every live head"),
            "head B confirmed the grace period before A's session was ended:\n{}",
            a.log()
        );

        // Data: the committed bytes are there; the verifier changed, so UNSTABLE data is resent.
        let r = rt.block_on(ca.read(&cred, &fh, 0, 9)).expect("read through the new head");
        assert_eq!(&r.data[..], b"committed");
        let now = rt
            .block_on(ca.write(&cred, &fh, 100, Bytes::from_static(b"x"), StableHow::Unstable))
            .unwrap()
            .verf;
        assert_ne!(verf, now, "a new head, a new write verifier");
        verf = now;

        // Grace: B grants no new lock (A's lock is gone from CephFS with A's session).
        assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Grace);
        // `eagernfs stat` of B shows the cluster in its grace period, node 1 needing it.
        let doc = head_stat(&b);
        let c = &doc["cluster"];
        assert_eq!((c["node"].as_u64(), c["in_grace"].as_bool()), (Some(2), Some(true)), "{c}");
        assert!(c["nodes"].as_array().unwrap().iter().any(|n| n["node"] == 1 && n["need"] == true), "{c}");
        // X asks for more, hears of the grace period, and so reclaims what it held (unless
        // its keeper, which looks at the server's NSM state every 2 s, did already: then
        // this call says X is done and may be granted).
        let more = LockRange { offset: 20, len: 10 };
        let r = rt.block_on(lx.lock(&fh, &ox, more, true, false)).unwrap();
        assert!(matches!(r, LockReply::Grace | LockReply::Granted), "{r:?}");
    }
    figures.sort();
    eprintln!(
        "take-over, kill -9 to the first successful call, {rounds} rounds: min {:?} median {:?} max {:?}",
        figures[0],
        figures[figures.len() / 2],
        figures[figures.len() - 1]
    );
    // X has reclaimed (the Grace answer above made it); its next lock call, not a reclaim,
    // says it is done, and it was node 1's only host: the grace period ends early.
    let more = LockRange { offset: 20, len: 10 };
    let r = rt.block_on(lx.lock(&fh, &ox, more, true, false)).unwrap();
    assert!(matches!(r, LockReply::Grace | LockReply::Granted), "{r:?}");
    // Until the grace period ends (cluster-wide), B answers Grace; then Denied: X holds it.
    // Early: well before --grace-period, counted from when the new head serves.
    let deadline = listening + Duration::from_secs(grace_s as u64 / 2);
    let over = loop {
        match rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap() {
            LockReply::Grace => {}
            LockReply::Denied => break killed.elapsed(),
            other => panic!("B's client got {other:?} for the lock X held (and reclaimed): {}", b.log()),
        }
        assert!(
            Instant::now() < deadline,
            "the grace period did not end early (--grace-period {grace_s}):\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!(
        "grace period: over {over:?} after the last kill (--grace-period {grace_s} s), X having reclaimed"
    );
    assert!(a.log().contains("grace period over early"), "{}", a.log());
    assert!(lx.holds(&fh, &ox), "X still holds its lock");
    drop(b);
}

/// Blocked locks across heads: X holds a lock through head A; Y asks head B for it with
/// block=true and is queued (B's table has no conflict: CephFS refused it), as is Z, who then
/// cancels. When X unlocks, B grants Y's request and sends GRANTED; the time from X's unlock
/// to Y's GRANTED is measured over `EAGERNFS_BLOCKED_ROUNDS` rounds (default 5). Y asking
/// twice holds one lock, Z's cancelled request is never granted, and once Y unlocks nothing is
/// left in CephFS (X takes the lock again at once).
#[test]
fn a_blocked_lock_is_granted_across_heads_when_the_holder_unlocks() {
    let test = "a_blocked_lock_is_granted_across_heads_when_the_holder_unlocks";
    let Some(conf) = heads_ceph_conf(test) else { return };
    let _turn = heads_turn();
    let ns = format!("blk-{}", unique());
    let (addr_a, addr_b) = (addr_on("127.0.0.11"), addr_on("127.0.0.12"));
    let _a = Head::start(&conf, &ns, 1, &addr_a, 5);
    let b = Head::start(&conf, &ns, 2, &addr_b, 5);
    let rt = runtime();
    let ca = rt.block_on(client(&addr_a));
    let cred = ca.default_cred();
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let fh = rt
        .block_on(ca.create(&cred, &ca.root(), format!("blocked-{ns}").as_bytes(), how))
        .unwrap()
        .obj
        .unwrap();
    let cb = rt.block_on(client(&addr_b));
    let (lx, ly, lz) = (
        rt.block_on(locker(&ca, "client-x")),
        rt.block_on(locker(&cb, "client-y")),
        rt.block_on(locker(&cb, "client-z")),
    );
    // Y takes GRANTED calls (registered with this host's portmapper, if no other lock manager is).
    let local = cb.rpc().local_addr().expect("local address").ip();
    // No portmapper at all (none runs until a test starts one) is the same case as another
    // lock manager holding it: GRANTED cannot reach us, head B's grant is read instead.
    let callbacks = rt.block_on(ly.start_callbacks(local, &MountOptions::default())).unwrap_or_else(|e| {
        eprintln!("{test}: no portmapper to register with ({e})");
        false
    });
    if !callbacks {
        eprintln!(
            "{test}: another lock manager is registered with the portmapper: GRANTED is not received here; the time to head B's grant is measured"
        );
    }
    let [ox, oy, oz] = owners(["owner-x", "owner-y", "owner-z"]);
    let range = LockRange { offset: 0, len: 10 };
    let rounds: usize =
        std::env::var("EAGERNFS_BLOCKED_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut figures = Vec::new();
    for round in 1..=rounds {
        assert_eq!(
            rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(),
            LockReply::Granted,
            "round {round}"
        );
        assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, true)).unwrap(), LockReply::Blocked);
        // Asked again: still one request (and, granted, one lock).
        assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, true)).unwrap(), LockReply::Blocked);
        if round == 1 {
            // Z queues too, then withdraws: its request must never be granted.
            assert_eq!(rt.block_on(lz.lock(&fh, &oz, range, true, true)).unwrap(), LockReply::Blocked);
            rt.block_on(lz.cancel(&fh, &oz, range, true)).unwrap();
        }
        let before = ly.granted_callbacks();
        let unlocked = Instant::now();
        rt.block_on(lx.unlock(&fh, &ox, range)).unwrap();
        let granted = loop {
            if callbacks {
                if ly.granted_callbacks() > before {
                    break unlocked.elapsed();
                }
                rt.block_on(ly.wait_for_grant(Duration::from_millis(5)));
            } else if lock_counts(&b) == (1, 0) {
                // Head B's own count: its queue empty, one lock held (Y's, checked below).
                // Not Y asking again: a LOCK tries CephFS itself, which would measure the client.
                break unlocked.elapsed();
            }
            assert!(
                unlocked.elapsed() < Duration::from_secs(10),
                "Y not granted within 10 s of X's unlock:\n{}",
                b.log()
            );
        };
        let seen = if callbacks { "Y's GRANTED from head B" } else { "head B's grant to Y" };
        eprintln!("round {round}: X unlocked through head A; {seen} {granted:?} later");
        figures.push(granted);
        // Y holds it (asking again finds it held: Granted), once: B holds one lock, queues none.
        assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Granted);
        assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Denied);
        assert_eq!(rt.block_on(lz.lock(&fh, &oz, range, true, false)).unwrap(), LockReply::Denied);
        assert_eq!(lock_counts(&b), (1, 0), "head B's locks held and requests waiting");
        // Y lets go: nothing of it is left in CephFS, X takes the lock at once.
        rt.block_on(ly.unlock(&fh, &oy, range)).unwrap();
    }
    assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Granted);
    rt.block_on(ly.stop_callbacks());
    figures.sort();
    eprintln!(
        "unlock through head A to the grant by head B, {rounds} rounds{}: min {:?} median {:?} max {:?}",
        if callbacks { " (GRANTED received)" } else { " (no callbacks: seen by `eagernfs stat`)" },
        figures[0],
        figures[figures.len() / 2],
        figures[figures.len() - 1]
    );
}

/// A planned stop (SIGTERM) of a head whose client holds a lock hands the lock over: the
/// cluster enters its grace period (confirmed by the other head) before the stopping head's
/// CephFS session ends, so B's client cannot take the lock meanwhile; a successor with the
/// node id lets X reclaim, after which the grace period ends early and B's client is refused
/// (X holds it). A head without locks exits at once.
#[test]
fn a_head_stopped_cleanly_hands_its_clients_locks_to_its_successor() {
    let test = "a_head_stopped_cleanly_hands_its_clients_locks_to_its_successor";
    let Some(conf) = heads_ceph_conf(test) else { return };
    let _turn = heads_turn();
    let ns = format!("stop-{}", unique());
    let grace_s = 60;
    let (addr_a, addr_b) = (addr_on("127.0.0.11"), addr_on("127.0.0.12"));
    let mut a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
    let mut b = Head::start(&conf, &ns, 2, &addr_b, grace_s);
    let rt = runtime();
    let ca = rt.block_on(client(&addr_a));
    let cred = ca.default_cred();
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let fh =
        rt.block_on(ca.create(&cred, &ca.root(), format!("stop-{ns}").as_bytes(), how)).unwrap().obj.unwrap();
    let cb = rt.block_on(client(&addr_b));
    let (lx, ly) = (rt.block_on(locker(&ca, "client-x")), rt.block_on(locker(&cb, "client-y")));
    rt.block_on(lx.announce_restart()).unwrap();
    let [ox, oy] = owners(["owner-x", "owner-y"]);
    let range = LockRange { offset: 0, len: 10 };
    assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Granted);
    assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Denied);

    let stop_a = a.terminate();
    eprintln!("head A (holding a client's lock) exited {stop_a:?} after SIGTERM");
    assert!(a.log().contains("locks handed over"), "{}", a.log());
    assert!(a.log().contains("every live head enforces the grace period"), "{}", a.log());
    // A's CephFS session is gone, and with it X's lock in CephFS: only the grace period
    // keeps Y from it.
    assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Grace);

    // The successor: X reclaims (told by the Grace answer), then its next call ends the grace period.
    a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
    // Early: well before --grace-period, counted from when the successor serves.
    let started = Instant::now();
    let more = LockRange { offset: 20, len: 10 };
    for _ in 0..2 {
        let r = rt.block_on(lx.lock(&fh, &ox, more, true, false)).unwrap();
        assert!(matches!(r, LockReply::Grace | LockReply::Granted), "{r:?}");
    }
    let r = rt.block_on(lx.lock(&fh, &ox, more, true, false)).unwrap();
    assert!(matches!(r, LockReply::Grace | LockReply::Granted), "{r:?}");
    let over = loop {
        match rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap() {
            LockReply::Grace => {}
            LockReply::Denied => break started.elapsed(),
            other => panic!("Y got {other:?} for the lock X held and reclaimed:\n{}", a.log()),
        }
        assert!(
            started.elapsed() < Duration::from_secs(grace_s as u64 / 2),
            "grace did not end early:\n{}",
            a.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("successor started; grace period over {over:?} later (--grace-period {grace_s} s)");
    assert!(lx.holds(&fh, &ox));
    // B holds no lock: it stops at once.
    let stop_b = b.terminate();
    eprintln!("head B (no locks) exited {stop_b:?} after SIGTERM");
    assert!(!b.log().contains("locks handed over"), "{}", b.log());
    assert!(stop_b < Duration::from_secs(2), "{stop_b:?}");
}

/// `eagernfs stat --json` of head `h` (through its state directory).
fn head_stat(h: &Head) -> serde_json::Value {
    let out = run_tool(
        env!("CARGO_BIN_EXE_eagernfs"),
        [std::ffi::OsStr::new("stat"), "--json".as_ref(), "--state-dir".as_ref(), h.state_dir().as_os_str()],
    );
    out.assert_success("stat");
    serde_json::from_str(&out.stdout_text()).unwrap()
}

/// A head's locks held and requests waiting, from `eagernfs stat`.
fn lock_counts(h: &Head) -> (u64, u64) {
    let doc = head_stat(h);
    let n = |k: &str| doc["stats"][k].as_u64().unwrap_or_else(|| panic!("no {k} in {doc}"));
    (n("locks_held"), n("locks_waiting"))
}

/// `eagernfs cat nfs://ADDR/PATH`: the file's bytes as a new client of that head reads them.
fn cat_through(addr: &str, path: &str) -> Vec<u8> {
    let out = run_tool(env!("CARGO_BIN_EXE_eagernfs"), ["cat".to_string(), format!("nfs://{addr}/{path}")]);
    out.assert_success("eagernfs cat through the live head");
    out.stdout
}

/// Calls of procedure `name` in a mount's statistics.
fn op_calls(stat: &serde_json::Value, name: &str) -> u64 {
    let ops = stat["ops"].as_array().unwrap();
    ops.iter().find(|o| o["name"] == name).map_or(0, |o| o["calls"].as_u64().unwrap())
}

/// `eagernfs stat MOUNTPOINT --json`.
fn mount_stat(mountpoint: &Path) -> serde_json::Value {
    let out = run_tool(
        env!("CARGO_BIN_EXE_eagernfs"),
        ["stat".as_ref(), "--json".as_ref(), mountpoint.as_os_str()],
    );
    out.assert_success("stat of the mount");
    serde_json::from_str(&out.stdout_text()).unwrap()
}

#[test]
fn a_mount_of_two_heads_moves_to_the_other_when_the_one_in_use_is_killed() {
    let rounds = std::env::var("EAGERNFS_FAILOVER_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    heads_killed_under_a_mount(
        "a_mount_of_two_heads_moves_to_the_other_when_the_one_in_use_is_killed",
        2,
        rounds,
    );
}

/// The kernel's way, for comparison: a URL of one head, which is killed and replaced at the
/// same address (as a take-over does); the hard mount reconnects there and resends.
#[test]
fn a_mount_of_one_head_carries_on_when_the_head_is_replaced_at_its_address() {
    heads_killed_under_a_mount(
        "a_mount_of_one_head_carries_on_when_the_head_is_replaced_at_its_address",
        1,
        1,
    );
}

/// `heads` heads (1 or 2) in the mount's URL; `rounds` kills of the head in use.
fn heads_killed_under_a_mount(test: &str, heads: usize, rounds: usize) {
    let Some(conf) = heads_ceph_conf(test) else { return };
    if let Some(why) = fuse_unavailable() {
        skip(test, why);
        return;
    }
    let _one = serial();
    let ns = format!("e2e-fo-{}", unique());
    let grace_s = 8;
    let addrs: Vec<String> =
        (0..heads).map(|i| addr_on(&format!("127.0.0.{}", 13 + 2 * heads + i))).collect();
    let mut heads: Vec<Head> =
        addrs.iter().enumerate().map(|(i, a)| Head::start(&conf, &ns, i as u32 + 1, a, grace_s)).collect();
    // `eager`: WRITEs go out (UNSTABLE) while the file is open, so the head holds
    // acknowledged, uncommitted data when it dies.
    // NFSv3: the heads share NLM and NSM state for a take-over, not NFSv4 sessions.
    let m = FuseMount::new(&format!("nfs://{}/", addrs.join(",")), "eager,vers=3");
    let dir_name = format!("failover-{ns}");
    let dir = m.path(&dir_name);
    std::fs::create_dir(&dir).unwrap();
    let committed = pattern_bytes(1, 0, 1 << 20);
    {
        let f = std::fs::File::create(dir.join("committed")).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &committed, 0).unwrap();
        f.sync_all().unwrap();
    }
    // Per round: `dd` streams `total` bytes into a new file and fsyncs it; its WRITEs go out
    // UNSTABLE and are committed every few MiB. The head in use is killed once the mount has
    // sent `kill_at` WRITEs, so some were acknowledged and not yet committed, most likely.
    // The writing is another process's: a process spawned (here: the new head) while this
    // one held a file of the mount open would close it at exec, and that close waits for the
    // file's write-back, which waits for the new head.
    let (total, kill_at) = (24usize << 20, 8u64);
    let src = tempfile::NamedTempFile::new().unwrap();
    let mut in_use = 0;
    let mut figures = Vec::new();
    for round in 0..rounds {
        let stat = mount_stat(&m.path);
        assert_eq!(stat["server"], addrs[in_use].as_str(), "round {round}: {stat}");
        let resent_before = stat["resent_bytes"].as_u64().unwrap();
        let writes_before = op_calls(&stat, "WRITE");
        let name = format!("f{round}");
        let data = pattern_bytes(10 + round as u64, 0, total);
        std::fs::write(src.path(), &data).unwrap();
        let mut dd = Command::new("dd")
            .arg(format!("if={}", src.path().display()))
            .arg(format!("of={}", dir.join(&name).display()))
            .args(["bs=256k", "conv=fsync", "status=none"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dd");
        let started = Instant::now();
        while op_calls(&mount_stat(&m.path), "WRITE") - writes_before < kill_at {
            assert!(dd.try_wait().unwrap().is_none(), "round {round}: dd finished before the kill");
            assert!(started.elapsed() < Duration::from_secs(60), "round {round}: the WRITEs stalled");
        }

        heads[in_use].kill9();
        let killed = Instant::now();
        // Its service manager starts it again (same node id and address).
        let (restarted, ready) = Head::spawn(&conf, &ns, in_use as u32 + 1, &addrs[in_use], grace_s);
        let node = in_use as u32 + 1;
        let restart = std::thread::spawn(move || {
            let h = restarted.ready(node, ready, HEAD_START_TIMEOUT);
            (h, killed.elapsed())
        });
        // The first call after the kill that must reach a server: a CREATE.
        std::fs::File::create(dir.join(format!("probe{round}"))).expect("CREATE after the kill");
        let resumed = killed.elapsed();
        figures.push(resumed);
        // dd carries on to the end, fsync included.
        let status = wait_deadline(&mut dd, Duration::from_secs(300)).expect("dd finishes");
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut dd.stderr.take().unwrap(), &mut err);
        assert!(status.success(), "round {round}: dd after the kill: {status} {err}");
        let dd_took = started.elapsed();
        let (restarted, up_after) = restart.join().expect("restarting the killed head");
        heads[in_use] = restarted;
        let other = (in_use + 1) % heads.len();
        let stat = mount_stat(&m.path);
        assert_eq!(stat["server"], addrs[other].as_str(), "round {round}: {stat}");
        let resent = stat["resent_bytes"].as_u64().unwrap() - resent_before;
        eprintln!(
            "fail-over {round}: head {} killed after {kill_at} WRITEs; first call through {} {resumed:?} after the kill; the killed head back {up_after:?} after it; dd of {total} B with fsync took {dd_took:?}; {resent} B resent",
            addrs[in_use], addrs[other]
        );
        // Every byte through the mount, and on the file system through a fresh client of the
        // live head (no cache of ours in between).
        assert!(
            std::fs::read(dir.join(&name)).unwrap() == data,
            "round {round}: {name} differs in the mount"
        );
        let cat = cat_through(&addrs[other], &format!("{dir_name}/{name}"));
        assert!(cat == data, "round {round}: {name} differs on the file system");
        // The test cluster keeps its data in memory: give the space back.
        std::fs::remove_file(dir.join(&name)).unwrap();
        in_use = other;
    }
    assert!(
        cat_through(&addrs[in_use], &format!("{dir_name}/committed")) == committed,
        "the committed file differs"
    );
    figures.sort();
    eprintln!(
        "{test}: kill -9 to the first successful call, {rounds} rounds: min {:?} median {:?} max {:?}",
        figures[0],
        figures[figures.len() / 2],
        figures[figures.len() - 1]
    );
    drop(m);
    drop(heads);
}

/// A lock held through head A by a client of `nfs://A,B/`: A is killed, the client moves to B
/// at its lock keeper's next look and reclaims there at once; node 1 is then taken over by a
/// process at another address (the node id moves, the client's addresses do not), which ends
/// A's CephFS session and starts the grace period. The reclaim through B is granted: during
/// the grace period B's other client hears Grace, after it Denied (X holds the lock); it never
/// gets the lock.
#[test]
fn a_lock_held_through_a_killed_head_is_reclaimed_through_another_head() {
    const NAME: &str = "a_lock_held_through_a_killed_head_is_reclaimed_through_another_head";
    let Some(conf) = heads_ceph_conf(NAME) else { return };
    let _one = serial();
    let ns = format!("e2e-lk-{}", unique());
    let grace_s = 8;
    let [addr_a, addr_b, addr_c] = ["127.0.0.21", "127.0.0.22", "127.0.0.23"].map(addr_on);
    let mut a = Head::start(&conf, &ns, 1, &addr_a, grace_s);
    let b = Head::start(&conf, &ns, 2, &addr_b, grace_s);
    let rt = runtime();
    let cx = rt.block_on(client(&format!("{addr_a},{addr_b}")));
    let cred = cx.default_cred();
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let made = rt.block_on(cx.create(&cred, &cx.root(), format!("lk-{ns}").as_bytes(), how)).unwrap();
    let fh: NfsFh3 = made.obj.expect("CREATE returns the handle");
    let lx = rt.block_on(locker(&cx, "client-x"));
    rt.block_on(lx.announce_restart()).unwrap();
    let [ox, oy] = owners(["owner-x", "owner-y"]);
    let range = LockRange { offset: 0, len: 10 };
    assert_eq!(rt.block_on(lx.lock(&fh, &ox, range, true, false)).unwrap(), LockReply::Granted);
    let cy = rt.block_on(client(&addr_b));
    let ly = rt.block_on(locker(&cy, "client-y"));
    assert_eq!(rt.block_on(ly.lock(&fh, &oy, range, true, false)).unwrap(), LockReply::Denied);

    let mut events = cx.rpc().subscribe();
    a.kill9();
    let killed = Instant::now();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match events.recv().await {
                    Ok(eagernfs_client::TransportEvent::Moved { to, .. }) => break to,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        })
        .await
    })
    .expect("X's client moved to B within 30 s of the kill (its lock keeper looks every 2 s)");
    eprintln!("lock client moved to {addr_b} {:?} after the kill", killed.elapsed());
    assert_eq!(cx.server().to_string(), addr_b);
    let a2 = Head::start(&conf, &ns, 1, &addr_c, grace_s);
    assert!(a2.log().contains("took over node 1"), "{}", a2.log());
    // B's other client: Grace while the grace period lasts, then Denied; never the lock.
    let deadline = Instant::now() + Duration::from_secs(grace_s as u64 + 60);
    let mut graces = 0;
    loop {
        match rt.block_on(ly.lock(&fh, &oy, range, true, false)) {
            Ok(LockReply::Grace) => graces += 1,
            Ok(LockReply::Denied) if graces > 0 => break,
            // Before the take-over's grace period reaches B: A's session still holds it.
            Ok(LockReply::Denied) => {}
            other => panic!("B's client got {other:?} for the lock X held through A:\n{}", b.log()),
        }
        assert!(Instant::now() < deadline, "no grace period, or it never ended:\n{}", a2.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("X's lock reclaimed through B; B's client refused until {:?} after the kill", killed.elapsed());
    assert!(lx.holds(&fh, &ox));
    drop((a2, b));
}

/// Runs everywhere (no cluster needed): the flags' errors say what to do.
#[test]
fn a_head_without_cephfs_or_librados_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let serve = |operand: &str, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_eagernfs"));
        cmd.args(["serve", operand, "--listen", "127.0.0.1:0", "--state-dir"]).arg(&state).args(extra);
        let out = run_command(cmd, Duration::from_secs(60));
        assert!(!out.status.success(), "serve {operand} {extra:?} must fail");
        out.stderr
    };
    let e = serve(dir.path().to_str().unwrap(), &["--node-id", "1"]);
    assert!(e.contains("heads share a CephFS") && e.contains("leave out --node-id"), "{e}");
    // librados is looked for before anything else of Ceph: this fails the same on a machine
    // without any Ceph library.
    let e = serve(
        "cephfs://admin@cephfs/?conf=/nonexistent/ceph.conf",
        &["--node-id", "1", "--librados", "libnot-rados-eagernfs.so.9"],
    );
    assert!(e.contains("apt-get install librados2"), "{e}");
}
