//! The service threads (Banks's dynamic thread management): the pool grows
//! while calls are blocked in the backend, so other calls are still served,
//! and shrinks again when they are done.

mod common;

use common::*;
use eagernfs_proto::nfs3::*;
use eagernfs_rpc::AcceptStat;
use eagernfs_server::ServerConfig;
use std::time::{Duration, Instant};

/// Calls held in COMMIT at once.
const BLOCKED: usize = 6;

#[test]
fn threads_follow_the_calls_blocked_at_once() {
    let gated = GatedCommits::new(memory());
    let mut config = ServerConfig::default();
    config.svc.threads_min = 2;
    config.svc.threads_max = 32;
    config.svc.idle_exit = Duration::from_millis(200);
    let s = TestServer::start_with(
        config,
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", gated.clone())],
    );
    let mut setup = s.client();
    let root = setup.root("/mem");
    let file = setup.create(&root, "f");
    let started_with = s.stats.threads();
    assert!(started_with <= 3, "{started_with} threads before any load");

    // Six clients each send a COMMIT that blocks in the backend.
    let mut blocked: Vec<(Client, u32)> = (0..BLOCKED)
        .map(|_| {
            let mut c = s.client();
            let xid = c.send_call(
                NFS_PROGRAM,
                NFS_V3,
                NFSPROC3_COMMIT,
                &Commit3Args { file: file.clone(), offset: 0, count: 0 },
            );
            (c, xid)
        })
        .collect();
    assert!(gated.wait_for_waiting(BLOCKED, WAIT), "the COMMITs did not all reach the backend at once");

    // Meanwhile another client is served at once: threads were added for the blocked calls.
    let mut other = s.client();
    for _ in 0..10 {
        let r = other.call(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR, &Getattr3Args { object: file.clone() });
        assert_eq!(r.accept_stat(), AcceptStat::Success);
    }
    let grown = s.stats.threads();
    assert!(grown > BLOCKED as u64, "{grown} threads with {BLOCKED} calls blocked and others served");
    assert!(s.stats.threads_peak() >= grown);

    gated.open();
    for (c, xid) in &mut blocked {
        let r = c.recv();
        assert_eq!(r.header.xid, *xid);
        let res: Commit3Res = r.results();
        assert!(matches!(res, Commit3Res::Ok(_)), "{res:?}");
    }

    // Idle threads above the minimum end after idle_exit.
    let deadline = Instant::now() + WAIT;
    while s.stats.threads() > 2 {
        assert!(Instant::now() < deadline, "still {} threads long after the load ended", s.stats.threads());
        std::thread::sleep(Duration::from_millis(20));
    }
    s.stop();
}

/// Rago et al.'s request ordering: four clients each stream a file with many large WRITEs in
/// flight (each may block, so each goes to its own thread); the backend must see every file's
/// WRITEs in offset order, as they were sent.
#[test]
fn one_files_writes_reach_the_backend_in_arrival_order() {
    const STREAMS: usize = 4;
    const IN_FLIGHT: usize = 48;
    const IO_BYTES: usize = 128 * 1024;
    let config = ServerConfig { io_trace_max_events: Some(1 << 16), ..ServerConfig::default() };
    let s = TestServer::start_with(
        config,
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    );
    let mut setup = s.client();
    let root = setup.root("/mem");
    let files: Vec<NfsFh3> = (0..STREAMS).map(|i| setup.create(&root, &format!("f{i}"))).collect();
    let data = vec![7u8; IO_BYTES];
    std::thread::scope(|scope| {
        for file in &files {
            let (addr, data) = (s.addr, &data);
            scope.spawn(move || {
                let mut c = Client::connect(addr);
                let calls: Vec<_> = (0..IN_FLIGHT)
                    .map(|k| {
                        let args = write_args(file, (k * IO_BYTES) as u64, data, StableHow::Unstable);
                        (NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE, enc(&args))
                    })
                    .collect();
                let (xids, replies) = c.pipeline(&calls);
                assert_eq!(replies.len(), xids.len());
            });
        }
    });
    let events = s.trace.events();
    assert_eq!(events.len(), STREAMS * IN_FLIGHT);
    let mut last: std::collections::HashMap<u64, u64> = Default::default();
    let mut out_of_order = 0;
    for e in &events {
        if let Some(prev) = last.insert(e.fileid, e.offset) {
            if e.offset < prev {
                out_of_order += 1;
            }
        }
    }
    assert_eq!(out_of_order, 0, "WRITEs reached the backend out of offset order: {events:?}");
    s.stop();
}
