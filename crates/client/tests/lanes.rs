//! Lanes (`eagernfs_client::lane`): the read-only calls of a thread inside
//! `lane::wait_here` are sent on a blocking connection of their own and
//! answered on that thread; everything else, and every call a lane cannot
//! answer, goes through the shared connections as before.

// The server's black-box test harness (TestServer, export specs).
#[path = "../../server/tests/common/mod.rs"]
mod common;

use bytes::Bytes;
use common::{memory, spec, TestServer, WAIT};
use eagernfs_client::driver::{RpcClient, TransportConfig};
use eagernfs_client::lane::{self, LaneStats, LANE_WAIT_MAX};
use eagernfs_client::{Cred, MountOptions, Nfs4Client, NfsClient, NfsOps};
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::RecordDecoder;
use std::future::Future;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn root() -> Cred {
    Cred::root()
}

/// Poll `fut` exactly once on this (non-runtime) thread, inside
/// `wait_here`: `Ready` means it was answered without the runtime's help.
fn poll_once_here<F: Future>(rt: &Runtime, fut: F) -> Poll<F::Output> {
    let mut fut = pin!(fut);
    let _rt = rt.enter();
    lane::wait_here(|| fut.as_mut().poll(&mut Context::from_waker(Waker::noop())))
}

/// Run `fut` to the end on this thread inside `wait_here` (its lane call
/// finishes here, anything else on the runtime).
fn run_here<F: Future>(rt: &Runtime, fut: F) -> F::Output {
    let _rt = rt.enter();
    lane::wait_here(|| futures::executor::block_on(fut))
}

fn calls(s: &LaneStats) -> u64 {
    s.calls.load(Relaxed)
}

/// Make one call with `call` that finds no lane (so it goes through the
/// shared connections and starts one), then wait until that lane is up.
/// Only one call: a second could take the new lane, and in the failure
/// test that is the call under test.
fn until_a_lane_is_up<F: Future>(rt: &Runtime, stats: &LaneStats, call: impl FnOnce() -> F) {
    assert_eq!(stats.connects.load(Relaxed), 0);
    run_here(rt, call());
    let deadline = Instant::now() + WAIT;
    while stats.connects.load(Relaxed) == 0 {
        assert!(Instant::now() < deadline, "no lane connected within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_thread_that_waits_here_gets_its_read_only_calls_answered_on_a_lane() {
    let rt = runtime();
    let server = TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let url = format!("nfs://127.0.0.1:{}/export", server.addr.port());
    let c = rt.block_on(NfsClient::connect(&url)).expect("mount");
    let cred = root();
    let mode = |m| Sattr3 { mode: Some(m), ..Default::default() };
    let data = Bytes::from_static(b"read on a lane");
    let f = rt
        .block_on(c.create(&cred, &c.root(), b"f", Createhow3::Unchecked(mode(0o644))))
        .unwrap()
        .obj
        .expect("a handle");
    rt.block_on(c.write(&cred, &f, 0, data.clone(), StableHow::FileSync)).unwrap();
    let stats = c.rpc().lane_stats().expect("a plain TCP client has lanes");

    // Outside wait_here nothing goes on a lane.
    for _ in 0..5 {
        rt.block_on(c.getattr(&cred, &f)).unwrap();
    }
    assert_eq!(stats.connects.load(Relaxed), 0, "no lane was made for calls outside wait_here");
    assert_eq!(calls(stats), 0);

    until_a_lane_is_up(&rt, stats, || c.getattr(&cred, &f));

    // With a lane idle, each read-only call is answered within its first
    // poll: sent and waited for on this thread, the runtime not involved.
    let before = calls(stats);
    let Poll::Ready(attr) = poll_once_here(&rt, c.getattr(&cred, &f)) else {
        panic!("GETATTR was not answered on this thread")
    };
    assert_eq!(attr.unwrap().size, data.len() as u64);
    let Poll::Ready(found) = poll_once_here(&rt, c.lookup(&cred, &c.root(), b"f")) else {
        panic!("LOOKUP was not answered on this thread")
    };
    assert_eq!(found.unwrap().object, f);
    let Poll::Ready(missing) = poll_once_here(&rt, c.lookup(&cred, &c.root(), b"nothing")) else {
        panic!("a failing LOOKUP was not answered on this thread")
    };
    assert!(missing.is_err(), "no such file, as on the shared connections");
    let Poll::Ready(read) = poll_once_here(&rt, c.read(&cred, &f, 0, 1024)) else {
        panic!("READ was not answered on this thread")
    };
    let read = read.unwrap();
    assert_eq!((&read.data[..], read.eof), (&data[..], true));
    let Poll::Ready(access) = poll_once_here(&rt, c.access(&cred, &f, ACCESS3_READ)) else {
        panic!("ACCESS was not answered on this thread")
    };
    assert_eq!(access.unwrap().access & ACCESS3_READ, ACCESS3_READ);
    assert_eq!(calls(stats), before + 5);
    assert_eq!(stats.connects.load(Relaxed), 1, "one lane, reused");

    // A call that changes something never takes a lane, even here.
    let before = calls(stats);
    run_here(&rt, c.setattr(&cred, &f, mode(0o600), None)).unwrap();
    run_here(&rt, c.write(&cred, &f, 0, Bytes::from_static(b"R"), StableHow::FileSync)).unwrap();
    assert_eq!(calls(stats), before, "SETATTR and WRITE went through the shared connections");
    let attr = run_here(&rt, c.getattr(&cred, &f)).unwrap();
    assert_eq!((attr.mode & 0o777, calls(stats)), (0o600, before + 1));
    assert_eq!(&run_here(&rt, c.read(&cred, &f, 0, 1)).unwrap().data[..], b"R");
    assert_eq!(stats.failures.load(Relaxed), 0);
}

/// What the fake server does with calls on connections after its first.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Later {
    /// Read them and never answer.
    Silent,
    /// Close the connection on the first call.
    HangUp,
}

/// A server that answers every call on its first connection with an empty
/// success and treats later connections (lanes) as `later` says; it
/// reports each call that reaches a later connection on the channel.
fn fake_server(later: Later) -> (SocketAddr, std::sync::mpsc::Receiver<u32>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (n, sock) in listener.incoming().enumerate() {
            let Ok(mut sock) = sock else { return };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut decoder = RecordDecoder::new(1 << 20);
                let mut buf = bytes::BytesMut::new();
                let mut chunk = [0u8; 4096];
                // Silent lanes stay open (and unanswered) until the test ends.
                let mut held = Vec::new();
                loop {
                    let got = match sock.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(got) => got,
                    };
                    buf.extend_from_slice(&chunk[..got]);
                    while let Ok(Some(record)) = decoder.decode(&mut buf) {
                        let xid = u32::from_be_bytes(record[..4].try_into().unwrap());
                        if n > 0 {
                            let _ = seen.send(xid);
                            match later {
                                Later::Silent => {
                                    held.push(record);
                                    continue;
                                }
                                Later::HangUp => return,
                            }
                        }
                        // xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, SUCCESS.
                        let mut reply = vec![0x80, 0, 0, 24];
                        for w in [xid, 1, 0, 0, 0, 0] {
                            reply.extend_from_slice(&w.to_be_bytes());
                        }
                        if sock.write_all(&reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, rx)
}

/// A lane that gets no answer in time, or is closed under its call, is
/// given up; the call is answered on the shared connections all the same,
/// and lanes rest instead of making the next calls wait too.
#[test]
fn a_lane_that_fails_is_given_up_and_its_call_answered_on_the_shared_connections() {
    for later in [Later::Silent, Later::HangUp] {
        let rt = runtime();
        let (addr, lane_calls_seen) = fake_server(later);
        let client =
            rt.block_on(async { RpcClient::new(TransportConfig::new(addr, &MountOptions::default())) });
        let cred = root();
        let null = || client.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &cred, &());
        // The first call connects the shared connection (the server's first).
        rt.block_on(null()).expect("NULL");
        let stats = client.lane_stats().unwrap();
        until_a_lane_is_up(&rt, stats, || async { null().await.expect("NULL while no lane is up") });

        let started = Instant::now();
        run_here(&rt, null()).unwrap_or_else(|e| panic!("{later:?}: the call failed: {e}"));
        let waited = started.elapsed();
        lane_calls_seen.recv_timeout(WAIT).expect("the call went on the lane first");
        assert_eq!(stats.failures.load(Relaxed), 1, "{later:?}: the lane was given up");
        assert_eq!(calls(stats), 0, "{later:?}: no lane answered");
        match later {
            // The lane waited its limit, not the mount's minutes-long timeo.
            Later::Silent => assert!(
                waited >= LANE_WAIT_MAX.mul_f64(0.9) && waited < LANE_WAIT_MAX + WAIT / 2,
                "waited {waited:?}"
            ),
            Later::HangUp => assert!(waited < WAIT / 2, "waited {waited:?}"),
        }

        // Resting lanes: the next calls go straight to the shared connections.
        let started = Instant::now();
        for _ in 0..3 {
            run_here(&rt, null()).expect("NULL after the lane failed");
        }
        assert!(lane_calls_seen.try_recv().is_err(), "{later:?}: a call went on a lane while lanes rest");
        assert!(started.elapsed() < LANE_WAIT_MAX, "{later:?}: calls waited on a failed lane again");
        assert_eq!(stats.failures.load(Relaxed), 1);
        drop(client);
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}

/// NFSv4.1/4.2 (issue 34): a COMPOUND that changes nothing (lookups,
/// attributes, listings), from a thread inside `wait_here`, goes on a lane
/// with its SEQUENCE, as NFSv3's read-only calls do, and is answered on
/// that thread: no hand-off to the runtime and back per call. COMPOUNDs
/// that change a file do only when the server keeps their reply
/// (`cachethis`), and the session's slots stay in step with the server over
/// both kinds of connection (no retry, no new session).
#[test]
fn nfsv4_compounds_that_change_nothing_are_answered_on_a_lane() {
    let rt = runtime();
    let server = TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let url = format!("nfs://127.0.0.1:{}/export", server.addr.port());
    let c = rt.block_on(Nfs4Client::connect(&url)).expect("mount over NFSv4");
    let cred = root();
    let mode = |m| Sattr3 { mode: Some(m), ..Default::default() };
    let data = Bytes::from_static(b"listed on a lane");
    let f = rt
        .block_on(c.create(&cred, &c.root(), b"f", Createhow3::Unchecked(mode(0o644))))
        .unwrap()
        .obj
        .expect("a handle");
    rt.block_on(c.write(&cred, &f, 0, data.clone(), StableHow::FileSync)).unwrap();
    let stats = c.rpc().lane_stats().expect("a plain TCP client has lanes");

    for _ in 0..5 {
        rt.block_on(c.getattr(&cred, &f)).unwrap();
    }
    assert_eq!(stats.connects.load(Relaxed), 0, "no lane was made for calls outside wait_here");

    until_a_lane_is_up(&rt, stats, || c.getattr(&cred, &f));

    let before = calls(stats);
    let Poll::Ready(attr) = poll_once_here(&rt, c.getattr(&cred, &f)) else {
        panic!("SEQUENCE+PUTFH+GETATTR was not answered on this thread")
    };
    assert_eq!(attr.unwrap().size, data.len() as u64);
    let Poll::Ready(found) = poll_once_here(&rt, c.lookup(&cred, &c.root(), b"f")) else {
        panic!("LOOKUP was not answered on this thread")
    };
    assert_eq!(found.unwrap().object, f);
    let Poll::Ready(missing) = poll_once_here(&rt, c.lookup(&cred, &c.root(), b"nothing")) else {
        panic!("a failing LOOKUP was not answered on this thread")
    };
    assert!(missing.is_err(), "no such file, as on the shared connection");
    let Poll::Ready(listed) = poll_once_here(&rt, c.readdirplus(&cred, &c.root(), 0, [0; 8], 8192, 65536))
    else {
        panic!("READDIR was not answered on this thread")
    };
    let listed = listed.unwrap();
    let names: Vec<&[u8]> = listed.reply.entries.iter().map(|e| &e.name.0[..]).collect();
    assert!(names.contains(&&b"f"[..]), "{names:?}");
    let Poll::Ready(access) = poll_once_here(&rt, c.access(&cred, &f, ACCESS3_READ)) else {
        panic!("ACCESS was not answered on this thread")
    };
    assert_eq!(access.unwrap().access & ACCESS3_READ, ACCESS3_READ);
    assert_eq!(calls(stats), before + 5);
    assert_eq!(stats.connects.load(Relaxed), 1, "one lane, reused");

    // A COMPOUND that changes something takes a lane only when the server keeps its reply in
    // the slot (cachethis: SETATTR, OPEN), so that a second copy after a failed lane is
    // answered from there; a WRITE (its reply not kept) goes through the shared connection.
    let before = calls(stats);
    run_here(&rt, c.setattr(&cred, &f, mode(0o600), None)).unwrap();
    assert_eq!(calls(stats), before + 1, "SETATTR on a lane");
    run_here(&rt, c.write(&cred, &f, 0, Bytes::from_static(b"L"), StableHow::FileSync)).unwrap();
    assert_eq!(calls(stats), before + 1, "WRITE through the shared connection");
    run_here(&rt, c.create(&cred, &c.root(), b"g", Createhow3::Unchecked(mode(0o644)))).unwrap();
    assert_eq!(calls(stats), before + 2, "OPEN that creates on a lane");
    let attr = run_here(&rt, c.getattr(&cred, &f)).unwrap();
    assert_eq!((attr.mode & 0o777, calls(stats)), (0o600, before + 3));
    assert_eq!(stats.failures.load(Relaxed), 0);
    let s = c.session_stats();
    assert_eq!(s.sessions.load(Relaxed), 1, "the one session served both connections");
    assert_eq!(
        (s.same_slot_retries.load(Relaxed), s.resequenced.load(Relaxed), s.binds.load(Relaxed)),
        (0, 0, 0),
        "slots stayed in step; the lane was bound by its SEQUENCE (SP4_NONE)"
    );
}
