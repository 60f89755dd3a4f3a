//! Deterministic simulation (issue 8, point 1; TigerBeetle's VOPR, FoundationDB's simulator):
//! the real server core (dispatch, duplicate reply cache, NFSv3 handlers, memory backend) driven
//! call by call over a simulated network on a simulated clock, all from one seeded PRNG. The
//! network drops, duplicates, delays and so reorders calls and replies; connections reset; the
//! server restarts (its duplicate reply cache and everything in flight are lost, the disk is
//! kept). A client runs a random sequence of operations, retransmitting on its timeout as an NFS
//! client does. Every answer is checked against the same sequence run on a fresh server with no
//! faults, and so is the whole tree at the end.
//!
//! The one difference allowed is NFSv3's own: a non-idempotent call (CREATE, MKDIR, REMOVE,
//! RENAME, …) retransmitted across a server restart may run twice, and its second run answers
//! EXIST or NOENT for what the first run did. Anything else is a bug.
//!
//! CI runs `SIM_SEEDS` seeds (default 200); `SIM_SEEDS=10000` (scripts/sim.sh) is the long run;
//! `SIM_SEED=N` reruns one seed and prints its whole trace. Seeds that found bugs are in
//! [`REGRESSION_SEEDS`] and always run.

mod common;

use bytes::{Bytes, BytesMut};
use common::seqops::*;
use common::*;
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::{CallHeader, Message, OpaqueAuth, ReplyBody};
use eagernfs_server::sim::SimServer;
use eagernfs_server::{ExportSpec, ServerConfig};
use eagernfs_vfs::Backend;
use eagernfs_xdr::{Decode, Encode, Opaque};
use std::net::SocketAddr;
use std::sync::Arc;

/// Seeds that once failed (with the bug each found), always run.
const REGRESSION_SEEDS: &[u64] = &[];

/// SplitMix64: small and reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `per_mille` / 1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// How hostile the world is, per mille.
#[derive(Debug, Clone, Copy)]
struct Faults {
    drop: u64,
    duplicate: u64,
    /// Most ticks a message spends in flight (random below it: reordering).
    max_delay: u64,
    /// Per tick while a call is outstanding.
    reset: u64,
    restart: u64,
}

/// Ticks before the client retransmits (a message takes at most `max_delay`).
const TIMEOUT_TICKS: u64 = 60;
/// A call with no answer after this many ticks is a hang: a bug.
const HANG_TICKS: u64 = 200_000;

enum Msg {
    Call(Bytes),
    Reply(Bytes),
}

/// The network, the clock and the server.
struct World {
    rng: Rng,
    now: u64,
    faults: Faults,
    server: SimServer,
    backend: Arc<dyn Backend>,
    in_flight: Vec<(u64, Msg)>,
    xid: u32,
    client: SocketAddr,
    /// The last call crossed a server restart (it may have run twice).
    restarted_during_call: bool,
    trace: Vec<String>,
}

fn exports(backend: &Arc<dyn Backend>) -> Vec<ExportSpec> {
    vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", backend.clone())]
}

fn config() -> ServerConfig {
    ServerConfig {
        locks: eagernfs_server::LockConfig { enabled: false, ..Default::default() },
        ..Default::default()
    }
}

impl World {
    fn new(seed: u64, faults: Faults) -> World {
        let backend = memory();
        World {
            rng: Rng(seed),
            now: 0,
            faults,
            server: SimServer::new(config(), exports(&backend)),
            backend,
            in_flight: Vec::new(),
            xid: (seed as u32) << 8,
            client: "127.0.0.9:800".parse().unwrap(),
            restarted_during_call: false,
            trace: Vec::new(),
        }
    }

    fn send(&mut self, m: Msg) {
        if self.rng.chance(self.faults.drop) {
            return;
        }
        let copies = if self.rng.chance(self.faults.duplicate) { 2 } else { 1 };
        for i in 0..copies {
            let at = self.now + 1 + self.rng.below(self.faults.max_delay.max(1));
            let m = match (&m, i) {
                (Msg::Call(b), _) => Msg::Call(b.clone()),
                (Msg::Reply(b), _) => Msg::Reply(b.clone()),
            };
            self.in_flight.push((at, m));
        }
    }

    fn message(&mut self, proc_: u32, args: &[u8]) -> Bytes {
        let sys =
            eagernfs_rpc::AuthSys { stamp: 0, machine_name: Opaque::default(), uid: 0, gid: 0, gids: vec![] };
        let header = CallHeader {
            xid: self.xid,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: NFS_V3,
            proc_,
            cred: OpaqueAuth::sys(&sys),
            verf: OpaqueAuth::none(),
        };
        let mut b = BytesMut::new();
        header.encode(&mut b);
        b.extend_from_slice(args);
        b.freeze()
    }

    /// One call through the faulty world: retransmitted until its reply arrives.
    fn rpc(&mut self, proc_: u32, args: Vec<u8>) -> Nfs3Res {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let msg = self.message(proc_, &args);
        self.restarted_during_call = false;
        let started = self.now;
        let mut sent = self.now;
        self.send(Msg::Call(msg.clone()));
        loop {
            self.now += 1;
            assert!(self.now - started < HANG_TICKS, "call {xid} (procedure {proc_}) never answered");
            if self.rng.chance(self.faults.restart) {
                self.trace.push(format!("t={} server restart", self.now));
                self.server.restart(exports(&self.backend));
                self.in_flight.clear();
                self.restarted_during_call = true;
            } else if self.rng.chance(self.faults.reset) {
                self.trace.push(format!("t={} connection reset", self.now));
                self.in_flight.clear();
            }
            // Deliver what is due, in a random order among those due together.
            let mut due: Vec<Msg> = Vec::new();
            let mut i = 0;
            while i < self.in_flight.len() {
                if self.in_flight[i].0 <= self.now {
                    due.push(self.in_flight.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
            while !due.is_empty() {
                let k = self.rng.below(due.len() as u64) as usize;
                match due.swap_remove(k) {
                    Msg::Call(m) => {
                        if let Some(reply) = self.server.call(self.client, m) {
                            self.send(Msg::Reply(reply));
                        }
                    }
                    Msg::Reply(r) => {
                        let mut body = r.clone();
                        let Ok(Message::Reply(h)) = Message::decode(&mut body) else { panic!("not a reply") };
                        if h.xid != xid {
                            continue; // a late duplicate of an earlier call's reply
                        }
                        assert!(matches!(h.body, ReplyBody::Accepted { .. }), "call {xid} refused: {h:?}");
                        return Nfs3Res::decode(proc_, &mut body).expect("a reply that decodes");
                    }
                }
            }
            if self.now - sent >= TIMEOUT_TICKS {
                sent = self.now;
                self.send(Msg::Call(msg.clone()));
            }
        }
    }
}

impl Caller for World {
    fn nfs_raw(&mut self, proc_: u32, args: Vec<u8>) -> Nfs3Res {
        self.rpc(proc_, args)
    }
}

/// Calls straight to a server: no faults (the reference run, and the final tree dump).
struct Direct<'a>(&'a SimServer, u32);

impl Caller for Direct<'_> {
    fn nfs_raw(&mut self, proc_: u32, args: Vec<u8>) -> Nfs3Res {
        self.1 += 1;
        let sys =
            eagernfs_rpc::AuthSys { stamp: 0, machine_name: Opaque::default(), uid: 0, gid: 0, gids: vec![] };
        let header = CallHeader {
            xid: self.1,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: NFS_V3,
            proc_,
            cred: OpaqueAuth::sys(&sys),
            verf: OpaqueAuth::none(),
        };
        let mut b = BytesMut::new();
        header.encode(&mut b);
        b.extend_from_slice(&args);
        let mut r = self.0.call("127.0.0.8:800".parse().unwrap(), b.freeze()).expect("a reply");
        let Ok(Message::Reply(_)) = Message::decode(&mut r) else { panic!("not a reply") };
        Nfs3Res::decode(proc_, &mut r).expect("a reply that decodes")
    }
}

/// The export's root handle, through MOUNT.
fn server_root(server: &SimServer) -> NfsFh3 {
    use eagernfs_proto::mount::{Mountres3, MOUNTPROC_MNT, MOUNT_PROGRAM, MOUNT_V3};
    let header = CallHeader {
        xid: 7,
        rpcvers: 2,
        prog: MOUNT_PROGRAM,
        vers: MOUNT_V3,
        proc_: MOUNTPROC_MNT,
        cred: OpaqueAuth::none(),
        verf: OpaqueAuth::none(),
    };
    let mut b = BytesMut::new();
    header.encode(&mut b);
    Opaque::<1024>::new(Bytes::from_static(b"/mem")).unwrap().encode(&mut b);
    let mut r = server.call("127.0.0.8:800".parse().unwrap(), b.freeze()).expect("a reply");
    let Ok(Message::Reply(_)) = Message::decode(&mut r) else { panic!("not a reply") };
    match Mountres3::decode(&mut r).unwrap() {
        Mountres3::Ok(ok) => NfsFh3 { data: Opaque(ok.fhandle.0) },
        Mountres3::Fail(s) => panic!("MNT /mem: {s:?}"),
    }
}

/// Everything in the tree, as lines (names, types, sizes, link counts, modes, contents).
fn dump(c: &mut impl Caller, side: &Side) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<u8>> = vec![vec![]];
    while let Some(p) = todo.pop() {
        out.push(format!("{p:?}: {}", run(c, side, &Op::Getattr { obj: p.clone() })));
        out.push(format!("{p:?}: {}", run(c, side, &Op::Readdir { dir: p.clone() })));
        out.push(format!("{p:?}: {}", run(c, side, &Op::Read { file: p.clone(), offset: 0, len: 20_000 })));
        out.push(format!(
            "{p:?}: {}",
            run(c, side, &Op::Read { file: p.clone(), offset: 20_000, len: 20_000 })
        ));
        out.push(format!(
            "{p:?}: {}",
            run(c, side, &Op::Read { file: p.clone(), offset: 40_000, len: 40_000 })
        ));
        out.push(format!("{p:?}: {}", run(c, side, &Op::Readlink { obj: p.clone() })));
        if p.len() < 2 {
            for i in 0..NAMES.len() as u8 {
                let mut q = p.clone();
                q.push(i);
                todo.push(q);
            }
        }
    }
    out
}

/// What a non-idempotent call that ran twice may answer the second time.
fn second_run_answer(op: &Op, first: &str, second: &str) -> bool {
    let ok = first.starts_with("OK") || first == "Ok";
    match op {
        Op::Remove { .. } | Op::Rmdir { .. } | Op::Rename { .. } => ok && second == "Noent",
        Op::Create { how: 1, .. } | Op::Mkdir { .. } | Op::Symlink { .. } | Op::Link { .. } => {
            ok && second == "Exist"
        }
        _ => false,
    }
}

fn gen_ops(rng: &mut Rng, n: usize) -> Vec<Op> {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut seed = [0u8; 32];
    for chunk in seed.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes());
    }
    let mut runner =
        TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    (0..n).map(|_| op().new_tree(&mut runner).expect("an op").current()).collect()
}

/// Run one seed; `Err(trace)` on a difference.
fn simulate(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed ^ 0x5eed);
    let n = 5 + rng.below(30) as usize;
    let ops = gen_ops(&mut rng, n);
    let faults = Faults {
        drop: rng.below(300),
        duplicate: rng.below(300),
        max_delay: 1 + rng.below(120),
        reset: rng.below(20),
        restart: rng.below(10),
    };
    // The reference: the same operations, no faults.
    let reference = SimServer::new(config(), exports(&memory()));
    let ref_side = Side { root: server_root(&reference) };
    let mut direct = Direct(&reference, 1);
    let expected: Vec<String> = ops.iter().map(|op| run(&mut direct, &ref_side, op)).collect();

    let mut world = World::new(seed, faults);
    let side = Side { root: server_root(&world.server) };
    world.trace.push(format!("seed {seed}: {faults:?}"));
    let mut twice = false;
    for (op, want) in ops.iter().zip(&expected) {
        let got = run(&mut world, &side, op);
        let crossed = world.restarted_during_call;
        world.trace.push(format!("t={} {op:?} -> {got}", world.now));
        if got != *want {
            if crossed && second_run_answer(op, want, &got) {
                twice = true;
                continue;
            }
            return Err(format!(
                "{}\nexpected {want} (no faults){}",
                world.trace.join("\n"),
                if crossed {
                    " — the call crossed a restart, but this answer is not a second run's"
                } else {
                    ""
                }
            ));
        }
    }
    let _ = twice;
    let server = std::mem::replace(&mut world.server, SimServer::new(config(), exports(&world.backend)));
    let got_tree = dump(&mut Direct(&server, 1 << 20), &side);
    let want_tree = dump(&mut Direct(&reference, 1 << 20), &ref_side);
    if got_tree != want_tree {
        let diff: Vec<String> = got_tree
            .iter()
            .zip(&want_tree)
            .filter(|(g, w)| g != w)
            .map(|(g, w)| format!("  got  {g}\n  want {w}"))
            .collect();
        return Err(format!("{}\nthe trees differ at the end:\n{}", world.trace.join("\n"), diff.join("\n")));
    }
    Ok(())
}

#[test]
fn the_server_gives_the_answers_of_a_fault_free_run_under_any_network() {
    if let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        if let Err(e) = simulate(seed) {
            panic!("{e}");
        }
        return;
    }
    let seeds: u64 = std::env::var("SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let first: u64 = std::env::var("SIM_FIRST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut failed = Vec::new();
    for seed in REGRESSION_SEEDS.iter().copied().chain(first..first + seeds) {
        if let Err(e) = simulate(seed) {
            if failed.is_empty() {
                eprintln!("seed {seed} failed:\n{e}\n(rerun: SIM_SEED={seed} cargo test -p eagernfs-server --test sim)");
            }
            failed.push(seed);
        }
    }
    assert!(failed.is_empty(), "{} of {} seeds failed: {:?}", failed.len(), seeds, failed);
}
