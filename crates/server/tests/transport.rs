//! The TCP transport under stress: graceful shutdown with calls in flight,
//! a client that stops reading, and several listeners.

mod common;

use common::*;
use eagernfs_proto::mount::{MOUNT_PROGRAM, MOUNT_V3};
use eagernfs_proto::nfs3::*;
use eagernfs_proto::portmap::*;
use eagernfs_rpc::AcceptStat;
use eagernfs_server::ServerConfig;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

fn rw_spec() -> eagernfs_server::ExportSpec {
    spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())
}

/// Cancel while a client has many calls outstanding: every call it sent
/// before the cancellation is answered, then the connection closes, and
/// `run` returns (an idle connection does not hold it up).
#[test]
fn shutdown_answers_every_call_already_sent() {
    // Two calls execute at a time, so most of the batch is still queued
    // (read or unread) when the token fires.
    let config = ServerConfig { max_requests_per_connection: 2, ..ServerConfig::default() };
    let s = TestServer::start_with(config, vec![rw_spec()]);
    let mut c = s.client();
    let root = c.root("/mem");
    let file = c.create(&root, "f");
    let mut idle = s.client();
    assert_eq!(idle.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);

    const N: usize = 40;
    let data = vec![0x5au8; 64 * 1024];
    let mut batch = Vec::new();
    let mut sent = Vec::new();
    for i in 0..N {
        let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE);
        let args = enc(&write_args(&file, (i * data.len()) as u64, &data, StableHow::FileSync));
        batch.extend_from_slice(&Client::record(&Client::call_message(&h, &args)));
        sent.push(h.xid);
    }
    c.send_raw(&batch);
    // Everything is in the server's socket buffer (or already read) now.
    s.shutdown_token().cancel();

    let mut answered = HashSet::new();
    while let Some(rec) = c.recv_record() {
        let mut rec = rec;
        let Ok(eagernfs_rpc::Message::Reply(h)) = eagernfs_rpc::Message::decode(&mut rec) else {
            panic!("not a reply")
        };
        assert!(sent.contains(&h.xid), "reply to an unknown xid");
        assert!(answered.insert(h.xid), "two replies to one call");
        let res: Write3Res = eagernfs_xdr::decode_exact(rec).unwrap();
        assert!(matches!(res, Write3Res::Ok(_)), "{res:?}");
    }
    assert_eq!(
        answered.len(),
        N,
        "{} of {N} calls sent before shutdown were never answered (the connection closed first)",
        N - answered.len()
    );
    assert!(idle.closed(), "the idle connection is closed at shutdown");
    s.stop();
}

/// Shutdown returns promptly with connections that are idle or mid-record.
#[test]
fn shutdown_with_idle_and_partial_connections() {
    let s = TestServer::start(vec![rw_spec()]);
    let addr = s.addr;
    let mut idle = s.client();
    assert_eq!(idle.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    let mut partial = s.client();
    // Half a record: a header announcing 100 bytes, and 10 of them.
    let mut bytes = (0x8000_0000u32 | 100).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0; 10]);
    partial.send_raw(&bytes);
    // Whether or not the server has read these bytes yet, it must not wait for the rest.
    s.stop();
    assert!(idle.closed());
    assert!(partial.closed());
    // The listener is gone.
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err());
}

/// A client that sends calls and never reads the replies must not take the
/// service threads other clients need. The pool is kept small (8 threads)
/// so a few stuck threads would show at once.
#[test]
fn a_client_that_never_reads_does_not_starve_others() {
    let mut config = ServerConfig::default();
    config.svc.threads_max = 8;
    let s = TestServer::start_with(config, vec![rw_spec()]);
    let mut setup = s.client();
    let root = setup.root("/mem");
    let file = setup.create(&root, "big");
    const READ_BYTES: u32 = 256 * 1024;
    let grow = eagernfs_proto::nfs3::Sattr3 { size: Some(READ_BYTES as u64), ..Default::default() };
    assert!(matches!(setup.setattr(&file, grow, None), Setattr3Res::Ok(_)));

    // 400 READs of 256 KiB = 100 MiB of replies, far more than socket buffers hold.
    let mut hog = s.client();
    let mut batch = Vec::new();
    for _ in 0..400 {
        let h = hog.header(NFS_PROGRAM, NFS_V3, NFSPROC3_READ);
        let args = enc(&Read3Args { file: file.clone(), offset: 0, count: READ_BYTES });
        batch.extend_from_slice(&Client::record(&Client::call_message(&h, &args)));
    }
    hog.send_raw(&batch);

    // Probe with another client until the hog's connection has stopped
    // making progress (its READ count unchanged over 200 round trips):
    // every probe must be answered promptly throughout.
    let mut victim = s.client();
    let (mut last, mut unchanged, mut probes) = (u64::MAX, 0, 0);
    while unchanged < 200 {
        let xid = victim.send_call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &());
        let reads = s.stats.nfs3(NFSPROC3_READ);
        let r = victim.recv_within(Duration::from_secs(5)).unwrap_or_else(|| {
            panic!(
                "a NULL call went unanswered for 5 s while another client held {reads} READ replies unread"
            )
        });
        assert_eq!(r.header.xid, xid);
        probes += 1;
        assert!(probes < 200_000, "the hog never stopped making progress");
        if reads == last {
            unchanged += 1;
        } else {
            (last, unchanged) = (reads, 0);
        }
    }
    assert!(last < 400, "the hog's replies cannot all have been written: {last}");
    drop(hog);
    s.stop();
}

/// With two listeners on different ports, portmap tells each client the
/// port it is connected to.
#[test]
fn getport_names_the_port_the_client_used() {
    let listen: Vec<SocketAddr> = vec!["127.0.0.1:0".parse().unwrap(), "127.0.0.2:0".parse().unwrap()];
    let s = TestServer::start_custom(ServerConfig::default(), vec![rw_spec()], listen);
    assert_ne!(s.addrs[0].port(), s.addrs[1].port());
    for addr in &s.addrs {
        let mut c = Client::connect(*addr);
        for (prog, vers) in [(NFS_PROGRAM, NFS_V3), (MOUNT_PROGRAM, MOUNT_V3)] {
            let m = Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 };
            let port: u32 = c.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, &m).results();
            assert_eq!(port, addr.port() as u32, "GETPORT({prog}) over {addr}");
        }
        // And both listeners serve NFS.
        let root = c.root("/mem");
        assert!(matches!(c.getattr(&root), Getattr3Res::Ok(_)));
    }
}

/// Many small calls in one send arrive in a few reads, so most of them sit in the server's
/// buffer, where epoll cannot see them; every one is still answered, past a thread's batch of
/// calls in a row and past the per-connection limit on calls in flight.
#[test]
fn calls_buffered_together_are_all_answered() {
    for max_inflight in [128, 3] {
        let config = ServerConfig { max_requests_per_connection: max_inflight, ..ServerConfig::default() };
        let s = TestServer::start_with(config, vec![rw_spec()]);
        let mut c = s.client();
        let root = c.root("/mem");
        let calls: Vec<_> = (0..200)
            .map(|i| {
                let args = eagernfs_xdr::to_vec(&Getattr3Args { object: root.clone() });
                let proc_ = if i % 2 == 0 { NFSPROC3_GETATTR } else { NFSPROC3_NULL };
                (NFS_PROGRAM, NFS_V3, proc_, if proc_ == NFSPROC3_NULL { Vec::new() } else { args })
            })
            .collect();
        let (xids, replies) = c.pipeline(&calls);
        assert_eq!(replies.len(), xids.len());
        assert!(replies.values().all(|r| r.accept_stat() == AcceptStat::Success));
        // A call sent afterwards, alone, is answered too.
        assert_eq!(c.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
        s.stop();
    }
}

/// Large records (a WRITE's data) are read into buffers of their own, reused
/// from call to call: WRITEs of many sizes, sent whole and back to back with
/// small calls behind them, dribbled in pieces, and split into several
/// fragments (a large one first), all land intact, and the small calls
/// behind a large one are not lost in its buffer.
#[test]
fn large_records_arrive_whole_however_they_are_sent() {
    let s = TestServer::start(vec![rw_spec()]);
    let mut c = s.client();
    let root = c.root("/mem");
    let f = c.create(&root, "large");
    let sizes = [16 * 1024 + 1, 20_000, 65_536, 65_537, 300_000, 1 << 20];
    let pattern =
        |off: usize, len: usize| -> Vec<u8> { (off..off + len).map(|i| (i * 7 + i / 251) as u8).collect() };
    let mut off = 0usize;
    let mut expect_len = 0usize;
    for round in 0..3 {
        for &len in &sizes {
            let data = pattern(off, len);
            let args = enc(&write_args(&f, off as u64, &data, StableHow::Unstable));
            let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE);
            let msg = Client::call_message(&h, &args);
            let mut bytes = Vec::new();
            match round {
                // Whole, with a NULL call right behind it in the same send.
                0 => {
                    bytes.extend_from_slice(&Client::record(&msg));
                    let n = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL);
                    bytes.extend_from_slice(&Client::record(&Client::call_message(&n, &[])));
                    c.send_raw(&bytes);
                    let (a, b) = (c.recv(), c.recv());
                    assert_eq!(a.accept_stat(), AcceptStat::Success);
                    assert_eq!(b.accept_stat(), AcceptStat::Success);
                    let w = if a.header.xid == h.xid { a } else { b };
                    assert!(
                        matches!(w.results::<Write3Res>(), Write3Res::Ok(ok) if ok.count as usize == len)
                    );
                }
                // In pieces of 4093 bytes, each flushed on its own.
                1 => {
                    for piece in Client::record(&msg).chunks(4093) {
                        c.send_raw(piece);
                    }
                    assert!(
                        matches!(c.recv().results::<Write3Res>(), Write3Res::Ok(ok) if ok.count as usize == len)
                    );
                }
                // Two fragments: the first large, the second the rest.
                _ => {
                    let cut = msg.len() - 100;
                    bytes.extend_from_slice(&(cut as u32).to_be_bytes());
                    bytes.extend_from_slice(&msg[..cut]);
                    bytes.extend_from_slice(&(0x8000_0000u32 | 100).to_be_bytes());
                    bytes.extend_from_slice(&msg[cut..]);
                    c.send_raw(&bytes);
                    assert!(
                        matches!(c.recv().results::<Write3Res>(), Write3Res::Ok(ok) if ok.count as usize == len)
                    );
                }
            }
            off += len;
            expect_len = off;
        }
    }
    // Read it all back.
    let mut at = 0usize;
    while at < expect_len {
        let n = (expect_len - at).min(1 << 20);
        match c.read(&f, at as u64, n as u32) {
            Read3Res::Ok(ok) => {
                assert_eq!(ok.data.len(), n, "short read at {at}");
                assert!(ok.data[..] == pattern(at, n)[..], "data differs in the {n} bytes at {at}");
            }
            other => panic!("READ at {at}: {other:?}"),
        }
        at += n;
    }
    s.stop();
}
