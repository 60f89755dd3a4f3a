//! What `Stats::snapshot` reports after real calls: per-procedure counts and latencies, bytes,
//! errors by status and the recent ones, per-client counts, connections.

mod common;

use common::*;
use eagernfs_proto::nfs3::*;

#[test]
fn a_snapshot_shows_what_the_clients_did() {
    let s =
        TestServer::start(vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())]);
    let mut c = s.client();
    let root = c.root("/mem");
    let f = c.create(&root, "f");
    let w: Write3Res = c.nfs(NFSPROC3_WRITE, &write_args(&f, 0, &[1u8; 3000], StableHow::Unstable));
    assert!(matches!(w, Write3Res::Ok(_)));
    let r: Read3Res = c.nfs(NFSPROC3_READ, &Read3Args { file: f.clone(), offset: 0, count: 1000 });
    assert!(matches!(r, Read3Res::Ok(_)));
    assert_eq!(c.lookup(&root, "missing").status(), Nfsstat3::Noent);
    // A REMOVE of a directory entry that is a directory: an error worth showing.
    c.mkdir(&root, "d");
    let rm: Remove3Res = c.nfs(NFSPROC3_REMOVE, &diropargs(&root, "d"));
    assert_ne!(rm.status(), Nfsstat3::Ok);

    let snap = s.stats.snapshot();
    let proc_ = |name: &str| snap.nfs3.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(proc_("WRITE").calls, 1);
    assert_eq!(proc_("READ").latency.count, 1);
    assert!(proc_("READ").latency.p50_ns > 0);
    assert_eq!(proc_("LOOKUP").calls, 1);
    assert_eq!((snap.bytes_written, snap.bytes_read), (3000, 1000));
    assert_eq!(snap.writes_unstable, 1);
    let err = |name: &str| snap.errors.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c);
    assert_eq!(err("NFS3ERR_NOENT"), 1);
    let rm_status = eagernfs_server::stats::status_name(rm.status());
    assert_eq!(err(&rm_status), 1);
    assert_eq!(snap.recent_errors.len(), 1, "NOENT is not an error worth listing: {:?}", snap.recent_errors);
    assert_eq!(
        (snap.recent_errors[0].procedure.as_str(), &snap.recent_errors[0].status),
        ("REMOVE", &rm_status)
    );
    let me = c.local_addr().ip();
    let client = snap.clients.iter().find(|h| h.addr == me).expect("our host is listed");
    assert_eq!(client.calls, 6, "CREATE WRITE READ LOOKUP MKDIR REMOVE: {client:?}");
    assert_eq!((client.bytes_read, client.bytes_written), (1000, 3000));
    assert_eq!(snap.connections_open, 1);
    assert!(snap.threads >= 1);
    s.stop();
}
