//! The duplicate reply cache on the wire: a client that lost the reply to a REMOVE (its
//! connection broke) retransmits the same call, with the same xid, on a new connection. The
//! server must answer with the first reply (NFS3_OK), not run the REMOVE again (NOENT). A call
//! with a new xid is new work and is executed.

mod common;

use common::*;
use eagernfs_proto::nfs3::*;

fn mem_server() -> TestServer {
    TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )])
}

#[test]
fn a_retransmitted_remove_gets_its_first_answer() {
    let s = mem_server();
    let mut c = s.client();
    let root = c.root("/export");
    c.create(&root, "victim");
    let args = eagernfs_xdr::to_vec(&diropargs(&root, "victim"));

    let header = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_REMOVE);
    c.send_header(&header, &args);
    let first = c.recv();
    assert_eq!(first.results::<Remove3Res>().status(), Nfsstat3::Ok);

    // The same call again from a new connection (same client address, new port).
    let mut again = s.client();
    again.send_header(&header, &args);
    let replay = again.recv();
    assert_eq!(
        replay.results::<Remove3Res>().status(),
        Nfsstat3::Ok,
        "retransmission re-executed the REMOVE"
    );
    assert_eq!(s.stats.replayed(), 1);
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), 1, "the REMOVE ran once");
    let drc = s.stats.drc_counts();
    // CREATE and the first REMOVE were new; the retransmission was a hit.
    assert_eq!((drc.misses, drc.hits, drc.in_progress), (2, 1, 0), "{drc:?}");

    // A new xid is a new call: now the file really is gone.
    let fresh = again.header(NFS_PROGRAM, NFS_V3, NFSPROC3_REMOVE);
    again.send_header(&fresh, &args);
    assert_eq!(again.recv().results::<Remove3Res>().status(), Nfsstat3::Noent);
}

#[test]
fn idempotent_calls_are_not_cached() {
    let s = mem_server();
    let mut c = s.client();
    let root = c.root("/export");
    let fh = c.create(&root, "f");
    let header = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
    let args = eagernfs_xdr::to_vec(&Getattr3Args { object: fh });
    c.send_header(&header, &args);
    c.recv();
    c.send_header(&header, &args);
    c.recv();
    assert_eq!(s.stats.replayed(), 0);
    assert_eq!(s.stats.nfs3(NFSPROC3_GETATTR), 2, "GETATTR is simply run again");
}
