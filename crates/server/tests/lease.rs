//! A head of a cluster answers only while its lease holds (`ServerConfig::lease`,
//! docs/cluster.md "Fencing"): NFSv3 calls get NFS3ERR_JUKEBOX, NLM, NSM and MOUNT calls
//! get no reply at all, and no GRANTED callback goes out; a lease renewed again lets
//! calls through again; a fenced lease never does.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_proto::nfs3::{Commit3Args, Getattr3Args, StableHow, Write3Args};
use eagernfs_proto::nfs3::{
    Nfsstat3, NFSPROC3_COMMIT, NFSPROC3_GETATTR, NFSPROC3_WRITE, NFS_PROGRAM, NFS_V3,
};
use eagernfs_proto::nlm::*;
use eagernfs_server::cluster::{boottime_ns, Lease};
use eagernfs_server::{LockConfig, ServerConfig};
use eagernfs_xdr::Opaque;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_head_out_of_its_lease_answers_nothing_that_could_be_stale() {
    let lease = Arc::new(Lease::new(Duration::from_secs(3600)));
    let s = TestServer::start_with(
        ServerConfig {
            lease: Some(lease.clone()),
            locks: LockConfig { callbacks: false, ..LockConfig::default() },
            ..ServerConfig::default()
        },
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    );
    let mut c = s.client();
    // Never renewed: nothing is answered yet, not even MOUNT.
    let p: eagernfs_proto::mount::Dirpath = Opaque::new(Bytes::from_static(b"/mem")).unwrap();
    c.send_call(eagernfs_proto::mount::MOUNT_PROGRAM, eagernfs_proto::mount::MOUNT_V3, 1, &p);
    assert!(c.recv_within(Duration::from_millis(500)).is_none(), "MOUNT answered without a lease");
    // Renewed now (as by a read of the grace state sent now): served.
    lease.renewed(boottime_ns());
    let mut c = s.client();
    let root = c.root("/mem");
    let fh = c.create(&root, "f");
    assert_eq!(c.getattr(&fh).status(), Nfsstat3::Ok);

    // The lease runs out (the last read that renewed it was sent longer ago than its length).
    let lease2 = Arc::new(Lease::new(Duration::from_millis(600)));
    assert!(!lease2.valid(), "not valid before it is first renewed");
    lease2.renewed(boottime_ns().saturating_sub(700_000_000));
    assert!(!lease2.valid(), "a renewal sent 700 ms ago gives no 600 ms lease now");
    lease2.renewed(boottime_ns());
    assert!(lease2.valid());

    // Fenced (its node taken over): NFSv3 gets JUKEBOX, never a WRITE or COMMIT done.
    lease.fence("node 1 was taken over by another head");
    assert_eq!(c.getattr(&fh).status(), Nfsstat3::Jukebox);
    let w = Write3Args {
        file: fh.clone(),
        offset: 0,
        count: 3,
        stable: StableHow::FileSync,
        data: Bytes::from_static(b"abc"),
    };
    let r: eagernfs_proto::nfs3::Write3Res = c.nfs(NFSPROC3_WRITE, &w);
    assert_eq!(r.status(), Nfsstat3::Jukebox, "no WRITE acknowledged by a fenced head");
    let r: eagernfs_proto::nfs3::Commit3Res =
        c.nfs(NFSPROC3_COMMIT, &Commit3Args { file: fh.clone(), offset: 0, count: 0 });
    assert_eq!(r.status(), Nfsstat3::Jukebox, "no COMMIT acknowledged by a fenced head");
    // NLM: no reply at all (it has no "try again later" that says nothing about locks).
    let args = Nlm4LockArgs {
        cookie: Opaque::from_static(b"ck"),
        block: false,
        exclusive: true,
        alock: Nlm4Lock {
            caller_name: Opaque::from_static(b"host-a"),
            fh: Opaque(fh.data.0.clone()),
            oh: Opaque(Bytes::from_static(b"owner-1")),
            svid: 1,
            l_offset: 0,
            l_len: 10,
        },
        reclaim: false,
        state: 1,
    };
    c.send_call(NLM_PROGRAM, NLM_V4, proc4::LOCK, &args);
    assert!(c.recv_within(Duration::from_millis(500)).is_none(), "an NLM LOCK answered by a fenced head");
    // Renewing a fenced lease does not bring it back.
    lease.renewed(boottime_ns());
    assert!(!lease.valid());
    let mut c2 = s.client();
    c2.send_call(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR, &Getattr3Args { object: fh.clone() });
    let r = c2.recv_within(Duration::from_secs(10)).expect("JUKEBOX comes back");
    let res: eagernfs_proto::nfs3::Getattr3Res = r.results();
    assert_eq!(res.status(), Nfsstat3::Jukebox);
    assert!(lease.fenced().unwrap().contains("taken over"));
    assert_eq!(s.stats.snapshot().locks_held, 0, "nothing was granted");
    s.stop();
}
