//! NFS, MOUNT and portmap over UDP (`ServerConfig::udp`): one datagram per call and per
//! reply, transfers capped so a reply fits a datagram, retransmissions answered from the
//! duplicate reply cache, and portmap telling UDP clients the port only when UDP is on.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_proto::mount::{Mountres3, MOUNTPROC_MNT, MOUNT_PROGRAM, MOUNT_V3};
use eagernfs_proto::nfs3::*;
use eagernfs_proto::portmap::*;
use eagernfs_rpc::{AcceptStat, CallHeader, Message, OpaqueAuth};
use eagernfs_server::ServerConfig;
use eagernfs_xdr::Encode;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// A synchronous RPC client over one UDP socket.
struct UdpClient {
    sock: UdpSocket,
    server: SocketAddr,
    next_xid: u32,
}

impl UdpClient {
    fn new(server: SocketAddr) -> UdpClient {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(WAIT)).unwrap();
        UdpClient { sock, server, next_xid: 0x5500 }
    }

    fn header(&mut self, prog: u32, vers: u32, proc_: u32) -> CallHeader {
        self.next_xid += 1;
        CallHeader {
            xid: self.next_xid,
            rpcvers: 2,
            prog,
            vers,
            proc_,
            cred: sys(0, 0),
            verf: OpaqueAuth::none(),
        }
    }

    /// Send `header` + `args` as one datagram; return the reply to that xid.
    fn call_with(&mut self, header: &CallHeader, args: &[u8]) -> Reply {
        self.sock.send_to(&Client::call_message(header, args), self.server).unwrap();
        let mut buf = vec![0u8; 65536];
        loop {
            let (n, from) = self.sock.recv_from(&mut buf).expect("no UDP reply");
            assert_eq!(from, self.server);
            let mut body = Bytes::copy_from_slice(&buf[..n]);
            match Message::decode(&mut body) {
                Ok(Message::Reply(h)) if h.xid == header.xid => return Reply { header: h, body },
                Ok(Message::Reply(_)) => continue, // an earlier retransmission's answer
                other => panic!("not a reply: {other:?}"),
            }
        }
    }

    fn call<A: Encode>(&mut self, prog: u32, vers: u32, proc_: u32, args: &A) -> Reply {
        let h = self.header(prog, vers, proc_);
        self.call_with(&h, &eagernfs_xdr::to_vec(args))
    }
}

fn server(udp: bool) -> TestServer {
    let config = ServerConfig { udp, ..ServerConfig::default() };
    TestServer::start_with(
        config,
        vec![spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory())],
    )
}

#[test]
fn nfs_and_mount_over_udp_with_transfers_that_fit_a_datagram() {
    let s = server(true);
    let mut u = UdpClient::new(s.addr);
    assert_eq!(u.call(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, &()).accept_stat(), AcceptStat::Success);
    let path: eagernfs_proto::mount::Dirpath =
        eagernfs_xdr::Opaque::new(Bytes::from_static(b"/mem")).unwrap();
    let root = match u.call(MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC_MNT, &path).results::<Mountres3>() {
        Mountres3::Ok(ok) => ok.fhandle,
        other => panic!("MNT over UDP failed: {other:?}"),
    };
    let root = NfsFh3 { data: root };
    // FSINFO over UDP advertises what fits a datagram; over TCP the configured 1 MiB.
    let info: Fsinfo3Res =
        u.call(NFS_PROGRAM, NFS_V3, NFSPROC3_FSINFO, &Fsinfo3Args { fsroot: root.clone() }).results();
    let Fsinfo3Res::Ok(info) = info else { panic!("{info:?}") };
    assert_eq!((info.rtmax, info.wtmax), (32 * 1024, 32 * 1024));
    let mut tcp = s.client();
    let tcp_info: Fsinfo3Res = tcp.nfs(NFSPROC3_FSINFO, &Fsinfo3Args { fsroot: root.clone() });
    let Fsinfo3Res::Ok(tcp_info) = tcp_info else { panic!() };
    assert_eq!(tcp_info.rtmax, 1 << 20);

    // A 64 KiB file read over UDP with count 64 KiB: at most 32 KiB come back.
    let file = tcp.create(&root, "f");
    let data = vec![9u8; 64 * 1024];
    let w: Write3Res = tcp.nfs(NFSPROC3_WRITE, &write_args(&file, 0, &data, StableHow::FileSync));
    assert!(matches!(w, Write3Res::Ok(_)));
    let r: Read3Res = u
        .call(
            NFS_PROGRAM,
            NFS_V3,
            NFSPROC3_READ,
            &Read3Args { file: file.clone(), offset: 0, count: 64 * 1024 },
        )
        .results();
    let Read3Res::Ok(r) = r else { panic!("{r:?}") };
    assert_eq!(r.count, 32 * 1024);
    assert!(!r.eof);
    assert!(r.data.iter().all(|b| *b == 9));
    s.stop();
}

#[test]
fn a_retransmitted_remove_over_udp_gets_its_first_answer() {
    let s = server(true);
    let mut tcp = s.client();
    let root = tcp.root("/mem");
    tcp.create(&root, "victim");
    let mut u = UdpClient::new(s.addr);
    let h = u.header(NFS_PROGRAM, NFS_V3, NFSPROC3_REMOVE);
    let args = eagernfs_xdr::to_vec(&diropargs(&root, "victim"));
    let first: Remove3Res = u.call_with(&h, &args).results();
    // The reply was "lost": the client sends the same datagram again.
    let again: Remove3Res = u.call_with(&h, &args).results();
    assert_eq!(
        (first.status(), again.status()),
        (Nfsstat3::Ok, Nfsstat3::Ok),
        "the retransmission ran again"
    );
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), 1);
    assert_eq!(s.stats.drc_counts().hits, 1);
    s.stop();
}

#[test]
fn portmap_names_udp_only_when_it_is_served() {
    for udp in [true, false] {
        let s = server(udp);
        let mut tcp = s.client();
        let query = Mapping { prog: NFS_PROGRAM, vers: NFS_V3, prot: IPPROTO_UDP, port: 0 };
        let port: u32 = tcp.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, &query).results();
        assert_eq!(port, if udp { s.addr.port() as u32 } else { 0 }, "udp={udp}");
        if udp {
            let mut u = UdpClient::new(s.addr);
            let port: u32 = u.call(PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, &query).results();
            assert_eq!(port, s.addr.port() as u32);
        } else {
            // Nothing listens on the UDP port.
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            let mut u = UdpClient { sock, server: s.addr, next_xid: 1 };
            let h = u.header(NFS_PROGRAM, NFS_V3, NFSPROC3_NULL);
            u.sock.send_to(&Client::call_message(&h, &[]), s.addr).unwrap();
            let mut buf = [0u8; 512];
            assert!(u.sock.recv_from(&mut buf).is_err(), "a UDP reply with UDP off");
        }
        s.stop();
    }
}
