//! RPC-level behaviour on the wire: error replies (RFC 5531 §9), record
//! marking (§11), pipelining and concurrency on one connection, and the
//! portmap program served on the NFS port (RFC 1833 §3).

mod common;

use bytes::{BufMut, BytesMut};
use common::*;
use eagernfs_proto::mount::{MOUNT_PROGRAM, MOUNT_V3};
use eagernfs_proto::nfs3::*;
use eagernfs_proto::portmap::*;
use eagernfs_rpc::{AcceptStat, AuthStat, AuthSys, OpaqueAuth, RejectedReply, ReplyBody, ReplyHeader};
use eagernfs_server::ServerConfig;
use eagernfs_xdr::Opaque;
use std::collections::HashSet;

fn server() -> TestServer {
    TestServer::start(vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())])
}

fn denied(r: &Reply) -> RejectedReply {
    match &r.header.body {
        ReplyBody::Denied(why) => *why,
        other => panic!("expected MSG_DENIED, got {other:?}"),
    }
}

/// A reply to an RPC-level error carries nothing after the header.
fn assert_no_results(r: &Reply) {
    assert!(r.body.is_empty(), "{} bytes after an error reply header", r.body.len());
}

#[test]
fn rpc_level_errors() {
    let s = server();
    let mut c = s.client();
    let root = c.root("/mem");
    let getattr = enc(&Getattr3Args { object: root.clone() });

    // RPC version 3: MSG_DENIED / RPC_MISMATCH 2..2.
    let mut h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL);
    h.rpcvers = 3;
    c.send_header(&h, &[]);
    let r = c.recv();
    assert_eq!(r.header.xid, h.xid);
    assert_eq!(denied(&r), RejectedReply::RpcMismatch { low: 2, high: 2 });
    assert_no_results(&r);

    // Unknown program.
    let r = c.call(400_123, 1, 0, &());
    assert_eq!(r.accept_stat(), AcceptStat::ProgUnavail);
    assert_no_results(&r);

    // NFS versions 2 and 5: PROG_MISMATCH 3..4 (version 4 is NFSv4.1/4.2, served on TCP).
    for vers in [2, 5] {
        let r = c.call(NFS_PROGRAM, vers, 0, &());
        assert_eq!(r.accept_stat(), AcceptStat::ProgMismatch { low: 3, high: 4 }, "NFS v{vers}");
        assert_no_results(&r);
    }
    let r = c.call(NFS_PROGRAM, 4, 0, &());
    assert_eq!(r.accept_stat(), AcceptStat::Success, "NFSv4 NULL");
    assert_no_results(&r);
    // MOUNT version 4: PROG_MISMATCH 1..3.
    let r = c.call(MOUNT_PROGRAM, 4, 0, &());
    assert_eq!(r.accept_stat(), AcceptStat::ProgMismatch { low: 1, high: 3 });
    // Portmap version 3 (rpcbind) is not served: 2..2.
    let r = c.call(PMAP_PROGRAM, 3, 0, &());
    assert_eq!(r.accept_stat(), AcceptStat::ProgMismatch { low: 2, high: 2 });

    // NFS procedure 22 does not exist.
    let r = c.call_raw(NFS_PROGRAM, NFS_V3, 22, &getattr);
    assert_eq!(r.accept_stat(), AcceptStat::ProcUnavail);
    assert_no_results(&r);
    let r = c.call(MOUNT_PROGRAM, MOUNT_V3, 6, &());
    assert_eq!(r.accept_stat(), AcceptStat::ProcUnavail);

    // Truncated GETATTR arguments: a handle length with no handle, and half a length word.
    for cut in [&getattr[..4], &getattr[..2], &[][..]] {
        let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
        c.send_header(&h, cut);
        let r = c.recv();
        assert_eq!(r.header.xid, h.xid);
        assert_eq!(r.accept_stat(), AcceptStat::GarbageArgs, "GETATTR args cut to {} bytes", cut.len());
        assert_no_results(&r);
    }
    // A handle longer than NFS3_FHSIZE is garbage too, not a bad handle.
    let mut long = BytesMut::new();
    long.put_u32(65);
    long.extend_from_slice(&[0u8; 68]);
    let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
    c.send_header(&h, &long);
    assert_eq!(c.recv().accept_stat(), AcceptStat::GarbageArgs);

    // AUTH_DH credential on GETATTR: AUTH_TOOWEAK.
    let mut h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
    h.cred = OpaqueAuth { flavor: 3, body: Opaque::from_static(&[0, 0, 0, 0, 1, 2, 3, 4]) };
    c.send_header(&h, &getattr);
    let r = c.recv();
    assert_eq!(r.header.xid, h.xid);
    assert_eq!(denied(&r), RejectedReply::AuthError(AuthStat::TooWeak));
    assert_no_results(&r);

    // AUTH_SYS with 17 groups (the limit is 16): AUTH_BADCRED.
    let mut h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
    h.cred = OpaqueAuth::sys(&AuthSys { uid: 0, gid: 0, gids: (0..17).collect(), ..Default::default() });
    c.send_header(&h, &getattr);
    assert_eq!(denied(&c.recv()), RejectedReply::AuthError(AuthStat::BadCred));
    // AUTH_SYS whose body has trailing bytes, or is cut short: AUTH_BADCRED.
    let good = eagernfs_xdr::to_vec(&AuthSys { uid: 5, gid: 5, ..Default::default() });
    for body in [[&good[..], &[0, 0, 0, 0]].concat(), good[..good.len() - 4].to_vec()] {
        let mut h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
        h.cred = OpaqueAuth { flavor: 1, body: Opaque::new(body).unwrap() };
        c.send_header(&h, &getattr);
        assert_eq!(denied(&c.recv()), RejectedReply::AuthError(AuthStat::BadCred));
    }

    // A credential that overruns the record: answered (the xid is known), connection kept.
    let mut raw = eagernfs_xdr::to_vec(&c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR));
    let xid = u32::from_be_bytes(raw[..4].try_into().unwrap());
    raw.truncate(28);
    raw.extend_from_slice(&100u32.to_be_bytes()); // cred length 100, but only 8 bytes follow
    raw.extend_from_slice(&[0; 8]);
    c.send_raw(&Client::record(&raw));
    let r = c.recv();
    assert_eq!(r.header.xid, xid);
    assert!(matches!(r.header.body, ReplyBody::Denied(_)), "{:?}", r.header.body);

    // NULL with AUTH_NONE works and returns no results.
    c.cred = OpaqueAuth::none();
    let r = c.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &());
    assert_eq!(r.accept_stat(), AcceptStat::Success);
    assert_no_results(&r);
    c.cred = sys(0, 0);

    // The connection survived every error above.
    assert!(matches!(c.getattr(&root), Getattr3Res::Ok(_)));
    assert!(s.stats.rejected() >= 14, "rejected counter: {}", s.stats.rejected());
}

#[test]
fn a_reply_sent_to_the_server_gets_no_answer() {
    let s = server();
    let mut c = s.client();
    // A well-formed REPLY message, then a NULL call: the first thing that
    // comes back must be the NULL's reply.
    let bogus = eagernfs_xdr::to_vec(&ReplyHeader::success(0xabcd_0001));
    c.send_raw(&Client::record(&bogus));
    // And a record too short to hold an xid and a message type.
    c.send_raw(&Client::record(&[1, 2, 3]));
    let xid = c.send_call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &());
    let r = c.recv();
    assert_eq!(r.header.xid, xid, "the server answered a reply or a runt record");
    assert_eq!(r.accept_stat(), AcceptStat::Success);
}

#[test]
fn a_call_in_seven_byte_fragments_is_reassembled() {
    let s = server();
    let mut c = s.client();
    let root = c.root("/mem");
    let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR);
    let msg = Client::call_message(&h, &enc(&Getattr3Args { object: root.clone() }));
    let framed = eagernfs_rpc::record::frame(&msg, 7);
    assert!(framed.len() > msg.len() + 4 * 10, "many fragments");
    // Send fragment by fragment in separate writes, to also split the stream.
    for chunk in framed.chunks(11) {
        c.send_raw(chunk);
    }
    let r = c.recv();
    assert_eq!(r.header.xid, h.xid);
    let res: Getattr3Res = r.results();
    let Getattr3Res::Ok(ok) = res else { panic!("GETATTR failed: {res:?}") };
    assert_eq!(ok.obj_attributes.ftype, Ftype3::Dir);
    // An empty non-final fragment in the middle of a record is legal.
    let h = c.header(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL);
    let msg = Client::call_message(&h, &[]);
    let mut framed = BytesMut::new();
    framed.put_u32(8);
    framed.extend_from_slice(&msg[..8]);
    framed.put_u32(0);
    framed.put_u32(0x8000_0000 | (msg.len() - 8) as u32);
    framed.extend_from_slice(&msg[8..]);
    c.send_raw(&framed);
    assert_eq!(c.recv().header.xid, h.xid);
}

#[test]
fn an_oversized_record_closes_only_that_connection() {
    let config = ServerConfig { max_record_bytes: 64 * 1024, ..ServerConfig::default() };
    let s = TestServer::start_with(config, vec![spec(1, &["/mem"], "/mem *(rw,insecure)", memory())]);
    let mut bystander = s.client();
    assert_eq!(bystander.call(NFS_PROGRAM, NFS_V3, 0, &()).accept_stat(), AcceptStat::Success);

    // One fragment over the limit.
    let mut c = s.client();
    c.send_raw(&(0x8000_0000u32 | (64 * 1024 + 1)).to_be_bytes());
    assert!(c.closed(), "a record over max_record_bytes must close the connection");

    // Fragments each under the limit whose sum is over it.
    let mut c = s.client();
    let frag = vec![0u8; 40 * 1024];
    let mut out = BytesMut::new();
    out.put_u32(frag.len() as u32);
    out.extend_from_slice(&frag);
    out.put_u32(0x8000_0000 | frag.len() as u32);
    out.extend_from_slice(&frag);
    // The server may close before reading everything; a failed write is fine.
    let _ = c.try_send_raw(&out);
    assert!(c.closed(), "fragments summing over max_record_bytes must close the connection");

    // Other connections and new ones are unaffected.
    assert_eq!(bystander.call(NFS_PROGRAM, NFS_V3, 0, &()).accept_stat(), AcceptStat::Success);
    let mut fresh = s.client();
    assert_eq!(fresh.call(NFS_PROGRAM, NFS_V3, 0, &()).accept_stat(), AcceptStat::Success);
}

#[test]
fn a_thousand_pipelined_nulls_in_one_write() {
    let s = server();
    let mut c = s.client();
    let calls: Vec<_> = (0..1000).map(|_| (NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, Vec::new())).collect();
    let (xids, replies) = c.pipeline(&calls);
    assert_eq!(replies.len(), 1000);
    for x in &xids {
        let r = &replies[x];
        assert_eq!(r.accept_stat(), AcceptStat::Success);
        assert!(r.body.is_empty());
    }
    assert_eq!(s.stats.nfs3(NFSPROC3_NULL), 1000);
}

/// 64 WRITEs then 64 READs in flight on one connection; replies matched by xid.
#[test]
fn many_calls_in_flight_on_one_connection() {
    let s = server();
    let mut c = s.client();
    let root = c.root("/mem");
    let file = c.create(&root, "f");
    const N: usize = 64;
    const CHUNK: usize = 16 * 1024;
    let pattern = |i: usize| -> Vec<u8> { (0..CHUNK).map(|j| (i * 31 + j * 7) as u8).collect() };

    let writes: Vec<_> = (0..N)
        .map(|i| {
            let a = write_args(&file, (i * CHUNK) as u64, &pattern(i), StableHow::Unstable);
            (NFS_PROGRAM, NFS_V3, NFSPROC3_WRITE, enc(&a))
        })
        .collect();
    let (xids, replies) = c.pipeline(&writes);
    let mut verfs = HashSet::new();
    for x in &xids {
        let res: Write3Res = replies[x].results();
        let Write3Res::Ok(ok) = res else { panic!("WRITE failed: {res:?}") };
        assert_eq!(ok.count as usize, CHUNK);
        verfs.insert(ok.verf);
    }
    assert_eq!(verfs.len(), 1, "one write verifier per server instance");

    let reads: Vec<_> = (0..N)
        .map(|i| {
            let a = Read3Args { file: file.clone(), offset: (i * CHUNK) as u64, count: CHUNK as u32 };
            (NFS_PROGRAM, NFS_V3, NFSPROC3_READ, enc(&a))
        })
        .collect();
    let (xids, replies) = c.pipeline(&reads);
    for (i, x) in xids.iter().enumerate() {
        let res: Read3Res = replies[x].results();
        let Read3Res::Ok(ok) = res else { panic!("READ failed: {res:?}") };
        assert_eq!(ok.count as usize, CHUNK);
        assert_eq!(&ok.data[..], &pattern(i)[..], "READ {i} returned another call's data");
        assert_eq!(ok.eof, i == N - 1);
    }
    assert_eq!(c.attr(&file).size, (N * CHUNK) as u64);
}

/// With at most 2 calls executing per connection, 300 pipelined calls still
/// all get answered (the reader waits for permits instead of dropping calls).
#[test]
fn in_flight_limit_delays_but_never_drops() {
    let config = ServerConfig { max_requests_per_connection: 2, ..ServerConfig::default() };
    let s = TestServer::start_with(
        config,
        vec![spec(1, &["/mem"], "/mem *(rw,insecure,no_root_squash)", memory())],
    );
    let mut c = s.client();
    let root = c.root("/mem");
    let calls: Vec<_> = (0..300)
        .map(|i| {
            if i % 2 == 0 {
                (NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR, enc(&Getattr3Args { object: root.clone() }))
            } else {
                (NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, Vec::new())
            }
        })
        .collect();
    let (xids, replies) = c.pipeline(&calls);
    for (i, x) in xids.iter().enumerate() {
        if i % 2 == 0 {
            assert!(matches!(replies[x].results::<Getattr3Res>(), Getattr3Res::Ok(_)));
        } else {
            assert!(replies[x].body.is_empty());
        }
    }
}

#[test]
fn portmap_on_the_nfs_port() {
    let s = server();
    let port = s.addr.port() as u32;
    let mut c = s.client();
    c.cred = OpaqueAuth::none();
    let getport = |c: &mut Client, prog, vers, prot| -> u32 {
        let m = Mapping { prog, vers, prot, port: 0 };
        c.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, &m).results()
    };
    assert_eq!(getport(&mut c, NFS_PROGRAM, NFS_V3, IPPROTO_TCP), port);
    assert_eq!(getport(&mut c, MOUNT_PROGRAM, MOUNT_V3, IPPROTO_TCP), port);
    assert_eq!(getport(&mut c, MOUNT_PROGRAM, 1, IPPROTO_TCP), port);
    assert_eq!(getport(&mut c, 400_123, 1, IPPROTO_TCP), 0, "unknown program");
    assert_eq!(getport(&mut c, NFS_PROGRAM, 4, IPPROTO_TCP), 0, "NFSv4 is not served");
    assert_eq!(getport(&mut c, NFS_PROGRAM, NFS_V3, IPPROTO_UDP), 0, "no UDP transport");

    let list: Pmaplist = c.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_DUMP, &()).results();
    for (prog, vers) in [(NFS_PROGRAM, NFS_V3), (MOUNT_PROGRAM, MOUNT_V3)] {
        assert!(
            list.0.contains(&Mapping { prog, vers, prot: IPPROTO_TCP, port }),
            "DUMP lacks {prog} v{vers}: {list:?}"
        );
    }
    assert!(list.0.iter().all(|m| m.port == port && m.prot == IPPROTO_TCP));

    // SET is refused, not silently accepted.
    let set: bool = c
        .call(
            PMAP_PROGRAM,
            PMAP_V2,
            PMAPPROC_SET,
            &Mapping { prog: 400_123, vers: 1, prot: IPPROTO_TCP, port: 9 },
        )
        .results();
    assert!(!set);
    assert_eq!(getport(&mut c, 400_123, 1, IPPROTO_TCP), 0);

    let callit = CallArgs { prog: NFS_PROGRAM, vers: NFS_V3, proc_: 0, args: Opaque::default() };
    let r = c.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_CALLIT, &callit);
    assert_eq!(r.accept_stat(), AcceptStat::ProcUnavail);
    assert!(r.body.is_empty());
}
