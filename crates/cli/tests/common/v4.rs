//! A small NFSv4.1 client for end-to-end tests: one TCP connection, one client id with one
//! session of one slot, COMPOUNDs with SEQUENCE added, AUTH_SYS as any uid/gid. It asks for no
//! back channel, so the server sends it no callbacks (and hands it no delegations). Replies are
//! decoded with the workspace's sans-IO crates; every wait is bounded by the socket's timeout.

use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, AuthSys, CallHeader, Message, OpaqueAuth, RecordDecoder, ReplyBody};
use eagernfs_xdr::Opaque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Longest wait for one reply (a server on a busy 2-CPU machine may be slow, never this slow).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// One NFSv4.1 client with its session.
pub(crate) struct V4 {
    stream: TcpStream,
    decoder: RecordDecoder,
    buf: BytesMut,
    cred: OpaqueAuth,
    next_xid: u32,
    /// Its client id.
    pub(crate) clientid: Clientid4,
    session: Sessionid4,
    /// The next sequence id of slot 0.
    seq: u32,
}

fn opaque<const N: usize>(b: &[u8]) -> Opaque<N> {
    Opaque(Bytes::copy_from_slice(b))
}

impl V4 {
    /// Connect to `port` on 127.0.0.1 as `uid`/`gid`, and make client `owner` a client id and a
    /// session (EXCHANGE_ID, CREATE_SESSION). The verifier is the same for every call with the
    /// same owner: a client that did not restart.
    pub(crate) fn connect(port: u16, owner: &str, uid: u32, gid: u32) -> V4 {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the server");
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        let cred = OpaqueAuth::sys(&AuthSys {
            stamp: 0,
            machine_name: opaque(b"eagernfs-test"),
            uid,
            gid,
            gids: vec![gid],
        });
        let mut v = V4 {
            stream,
            decoder: RecordDecoder::new(4 << 20),
            buf: BytesMut::new(),
            cred,
            next_xid: rand_xid(owner),
            clientid: 0,
            session: [0; 16],
            seq: 1,
        };
        let eid = ArgOp::ExchangeId(ExchangeId4Args {
            clientowner: ClientOwner4 { co_verifier: [7; 8], co_ownerid: opaque(owner.as_bytes()) },
            flags: EXCHGID4_FLAG_USE_NON_PNFS,
            state_protect: StateProtect4A::None,
            client_impl_id: ImplIdOpt(None),
        });
        let r = v.raw(vec![eid]);
        let Some(ResOp::ExchangeId(Res4::Ok(e))) = r.resarray.first() else {
            panic!("EXCHANGE_ID of {owner}: {r:?}")
        };
        v.clientid = e.clientid;
        let attrs = ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: 1 << 20,
            ca_maxresponsesize: 1 << 20,
            ca_maxresponsesize_cached: 8192,
            ca_maxoperations: 16,
            ca_maxrequests: 1,
            ca_rdma_ird: RdmaIrd(None),
        };
        let cs = ArgOp::CreateSession(CreateSession4Args {
            clientid: e.clientid,
            sequence: e.sequenceid,
            flags: 0,
            fore_chan_attrs: attrs.clone(),
            back_chan_attrs: attrs,
            cb_program: 0x4000_0000,
            sec_parms: SecParmsList(vec![CallbackSecParms4::None]),
        });
        let r = v.raw(vec![cs]);
        let Some(ResOp::CreateSession(Res4::Ok(s))) = r.resarray.first() else {
            panic!("CREATE_SESSION of {owner}: {r:?}")
        };
        v.session = s.sessionid;
        v
    }

    /// Send SEQUENCE and `ops` without waiting; the reply's xid.
    pub(crate) fn send(&mut self, ops: Vec<ArgOp>) -> u32 {
        let mut all = vec![ArgOp::Sequence(Sequence4Args {
            sessionid: self.session,
            sequenceid: self.seq,
            slotid: 0,
            highest_slotid: 0,
            cachethis: false,
        })];
        self.seq += 1;
        all.extend(ops);
        self.send_raw(all)
    }

    /// The reply to `xid` (the only call outstanding on this connection).
    pub(crate) fn recv(&mut self, xid: u32) -> Compound4Res {
        let mut record = loop {
            if let Some(r) = self.decoder.decode(&mut self.buf).expect("reply framing") {
                break r;
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("the server closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("no reply within {REPLY_TIMEOUT:?}: {e}"),
            }
        };
        let Message::Reply(h) = Message::decode(&mut record).expect("reply header") else {
            panic!("the server sent a call on a connection with no back channel")
        };
        assert_eq!(h.xid, xid, "reply xid");
        assert!(
            matches!(h.body, ReplyBody::Accepted { stat: AcceptStat::Success, .. }),
            "COMPOUND not accepted: {:?}",
            h.body
        );
        eagernfs_xdr::decode_exact(record).expect("COMPOUND4res decodes")
    }

    /// SEQUENCE, then `ops`; the reply.
    pub(crate) fn compound(&mut self, ops: Vec<ArgOp>) -> Compound4Res {
        let xid = self.send(ops);
        self.recv(xid)
    }

    /// Exactly `ops` (no SEQUENCE).
    fn raw(&mut self, ops: Vec<ArgOp>) -> Compound4Res {
        let xid = self.send_raw(ops);
        self.recv(xid)
    }

    fn send_raw(&mut self, ops: Vec<ArgOp>) -> u32 {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        let header = CallHeader {
            xid,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: NFS_V4,
            proc_: NFSPROC4_COMPOUND,
            cred: self.cred.clone(),
            verf: OpaqueAuth::none(),
        };
        let args = Compound4Args { tag: Opaque::default(), minorversion: 1, argarray: ops };
        let mut out = BytesMut::new();
        let at = begin_record(&mut out);
        out.extend_from_slice(&eagernfs_xdr::to_vec(&header));
        out.extend_from_slice(&eagernfs_xdr::to_vec(&args));
        finish_record(&mut out, at);
        self.stream.write_all(&out).expect("send a call");
        xid
    }

    /// RECLAIM_COMPLETE (the client's registration is done); its status.
    pub(crate) fn reclaim_complete(&mut self) -> Nfsstat4 {
        self.compound(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]).status
    }

    /// The operations that make the file handle of `path` (from the pseudo-root) current.
    pub(crate) fn walk(path: &str) -> Vec<ArgOp> {
        let mut ops = vec![ArgOp::Putrootfh(())];
        for c in path.split('/').filter(|c| !c.is_empty()) {
            ops.push(ArgOp::Lookup(Lookup4Args { objname: opaque(c.as_bytes()) }));
        }
        ops
    }

    /// The file handle of `path` (which must exist).
    pub(crate) fn fh(&mut self, path: &str) -> NfsFh4 {
        let mut ops = Self::walk(path);
        ops.push(ArgOp::Getfh(()));
        let r = self.compound(ops);
        match r.resarray.last() {
            Some(ResOp::Getfh(Res4::Ok(fh))) => fh.clone(),
            _ => panic!("the file handle of {path}: {r:?}"),
        }
    }

    /// CREATE directory `name` in `dir`; the status.
    pub(crate) fn mkdir(&mut self, dir: &NfsFh4, name: &str) -> Nfsstat4 {
        self.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: dir.clone() }),
            ArgOp::Create(Create4Args {
                objtype: Createtype4::Dir,
                objname: opaque(name.as_bytes()),
                createattrs: Fattr4::default(),
            }),
        ])
        .status
    }

    /// OPEN `file` for reading with CLAIM_PREVIOUS: reclaim, in the grace period after a
    /// server restart, an open held before it. The status.
    pub(crate) fn reclaim_open(&mut self, file: &NfsFh4) -> Nfsstat4 {
        self.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: file.clone() }),
            ArgOp::Open(Open4Args {
                seqid: 0,
                share_access: OPEN4_SHARE_ACCESS_READ,
                share_deny: OPEN4_SHARE_DENY_NONE,
                owner: StateOwner4 { clientid: self.clientid, owner: opaque(b"reclaimer") },
                openhow: Openflag4::NoCreate,
                claim: OpenClaim4::Previous(OpenDelegationType4::None),
            }),
        ])
        .status
    }
}

/// A starting xid that differs between clients (the server keys nothing on it across connections;
/// this only makes captures readable).
fn rand_xid(owner: &str) -> u32 {
    owner.bytes().fold(0x9e37_79b9u32, |h, b| h.rotate_left(5) ^ b as u32).wrapping_mul(0x0100_0193)
}
