//! An NFSv4.1 client for tests: a session over one connection, COMPOUNDs
//! with SEQUENCE added, and callbacks (CB_NULL, CB_COMPOUND) answered as
//! they arrive while a reply is awaited, each one kept for the test to see.

use super::{Client, WAIT};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::{AcceptStat, Message, OpaqueAuth, ReplyBody, ReplyHeader};
use eagernfs_xdr::{Decode, Encode, Opaque};
use std::net::SocketAddr;

/// The callback program the test client registers.
pub const CB_PROG: u32 = 0x4000_0000;

/// One callback the server sent.
#[derive(Debug, Clone)]
pub enum Callback {
    Null,
    Compound(CbCompound4Args),
    /// A CB_COMPOUND of CB_SEQUENCE and CB_GETATTR.
    Getattr(CbGetattr4Args),
}

/// A client with a session.
pub struct V4 {
    pub c: Client,
    pub clientid: Clientid4,
    pub sessionid: Sessionid4,
    /// Next sequence id per slot.
    pub seq: Vec<u32>,
    pub minor: u32,
    /// Callbacks received so far.
    pub callbacks: Vec<Callback>,
    /// The owner id it was made with.
    pub owner: Vec<u8>,
    /// What CB_GETATTR is answered with (`None`: NFS4ERR_BADHANDLE).
    pub cb_getattr: Option<FileAttrs>,
}

fn o<const N: usize>(b: &[u8]) -> Opaque<N> {
    Opaque(Bytes::copy_from_slice(b))
}

pub fn name(s: &str) -> Component4 {
    o(s.as_bytes())
}

/// COMPOUND arguments.
pub fn compound(minor: u32, ops: Vec<ArgOp>) -> Compound4Args {
    Compound4Args { tag: Opaque::default(), minorversion: minor, argarray: ops }
}

/// Send a COMPOUND on `c` and wait for its reply, answering callbacks that come first.
pub fn call(c: &mut Client, args: &Compound4Args, callbacks: &mut Vec<Callback>) -> Compound4Res {
    call_with(c, args, callbacks, None)
}

/// As [`call`], answering CB_GETATTR with `getattr`.
pub fn call_with(
    c: &mut Client,
    args: &Compound4Args,
    callbacks: &mut Vec<Callback>,
    getattr: Option<&FileAttrs>,
) -> Compound4Res {
    let xid = c.send_call(NFS_PROGRAM, NFS_V4, NFSPROC4_COMPOUND, args);
    wait_reply_with(c, xid, callbacks, getattr)
}

/// Wait for the reply to `xid`, answering callbacks meanwhile.
pub fn wait_reply(c: &mut Client, xid: u32, callbacks: &mut Vec<Callback>) -> Compound4Res {
    wait_reply_with(c, xid, callbacks, None)
}

/// As [`wait_reply`], answering CB_GETATTR with `getattr`.
pub fn wait_reply_with(
    c: &mut Client,
    xid: u32,
    callbacks: &mut Vec<Callback>,
    getattr: Option<&FileAttrs>,
) -> Compound4Res {
    loop {
        let (m, body) = c.recv_any().expect("server closed the connection");
        match m {
            Message::Reply(h) => {
                assert_eq!(h.xid, xid, "reply xid");
                assert!(
                    matches!(h.body, ReplyBody::Accepted { stat: AcceptStat::Success, .. }),
                    "COMPOUND not accepted: {:?}",
                    h.body
                );
                return eagernfs_xdr::decode_exact(body).expect("COMPOUND4res decodes");
            }
            Message::Call(h) => answer_callback_with(c, h, body, callbacks, getattr),
        }
    }
}

/// Answer one callback with success, and remember it.
pub fn answer_callback(
    c: &mut Client,
    h: eagernfs_rpc::CallHeader,
    body: Bytes,
    callbacks: &mut Vec<Callback>,
) {
    answer_callback_with(c, h, body, callbacks, None)
}

/// The CB_GETATTR of a CB_COMPOUND `body` holds (it comes after CB_SEQUENCE), if any.
fn cb_getattr_of(body: &Bytes) -> Option<(CbCompound4Args, CbSequence4Args, CbGetattr4Args)> {
    let mut b = body.clone();
    let tag = Utf8Str::decode(&mut b).ok()?;
    let minorversion = u32::decode(&mut b).ok()?;
    let callback_ident = u32::decode(&mut b).ok()?;
    let n = u32::decode(&mut b).ok()?;
    let CbArgOp::Sequence(seq) = CbArgOp::decode(&mut b).ok()? else { return None };
    if n != 2 || u32::decode(&mut b).ok()? != OP_CB_GETATTR {
        return None;
    }
    let g = CbGetattr4Args::decode(&mut b).ok()?;
    Some((CbCompound4Args { tag, minorversion, callback_ident, argarray: vec![] }, seq, g))
}

/// Answer one callback (CB_GETATTR with `getattr`, the rest with success), and remember it.
pub fn answer_callback_with(
    c: &mut Client,
    h: eagernfs_rpc::CallHeader,
    mut body: Bytes,
    callbacks: &mut Vec<Callback>,
    getattr: Option<&FileAttrs>,
) {
    let mut out = BytesMut::new();
    ReplyHeader::success(h.xid).encode(&mut out);
    if let Some((args, s, g)) = (h.proc_ == CB_COMPOUND).then(|| cb_getattr_of(&body)).flatten() {
        let res = match getattr {
            Some(a) => Res4::Ok(a.to_fattr()),
            None => Res4::Err(Nfsstat4::Badhandle),
        };
        let status = res.status();
        status.encode(&mut out);
        args.tag.encode(&mut out);
        2u32.encode(&mut out);
        CbResOp::Sequence(Res4::Ok(CbSequence4ResOk {
            sessionid: s.sessionid,
            sequenceid: s.sequenceid,
            slotid: s.slotid,
            highest_slotid: s.highest_slotid,
            target_highest_slotid: s.highest_slotid,
        }))
        .encode(&mut out);
        OP_CB_GETATTR.encode(&mut out);
        res.encode(&mut out);
        callbacks.push(Callback::Getattr(g));
    } else if h.proc_ == CB_COMPOUND {
        let args = CbCompound4Args::decode(&mut body).expect("CB_COMPOUND decodes");
        let resarray = args
            .argarray
            .iter()
            .map(|op| match op {
                CbArgOp::Sequence(s) => CbResOp::Sequence(Res4::Ok(CbSequence4ResOk {
                    sessionid: s.sessionid,
                    sequenceid: s.sequenceid,
                    slotid: s.slotid,
                    highest_slotid: s.highest_slotid,
                    target_highest_slotid: s.highest_slotid,
                })),
                CbArgOp::Recall(_) => CbResOp::Recall(Res4::OK),
                CbArgOp::RecallAny(_) => CbResOp::RecallAny(Res4::OK),
                CbArgOp::NotifyLock(_) => CbResOp::NotifyLock(Res4::OK),
                CbArgOp::Other(n) => CbResOp::Other(*n, Nfsstat4::Notsupp),
            })
            .collect();
        CbCompound4Res { status: Nfsstat4::Ok, tag: args.tag.clone(), resarray }.encode(&mut out);
        callbacks.push(Callback::Compound(args));
    } else {
        callbacks.push(Callback::Null);
    }
    c.send_raw(&Client::record(&out));
}

impl V4 {
    /// EXCHANGE_ID, CREATE_SESSION (with this connection as the back
    /// channel) and RECLAIM_COMPLETE, as a client named `owner` with uid 0.
    pub fn connect(addr: SocketAddr, owner: &str) -> V4 {
        Self::connect_with(Client::connect(addr), owner, 1, 8, true)
    }

    /// As [`V4::connect`] on `c`, minor version `minor`, `slots` slots; RECLAIM_COMPLETE if `complete`.
    pub fn connect_with(mut c: Client, owner: &str, minor: u32, slots: u32, complete: bool) -> V4 {
        let mut callbacks = Vec::new();
        let eid = ArgOp::ExchangeId(ExchangeId4Args {
            clientowner: ClientOwner4 { co_verifier: [7; 8], co_ownerid: o(owner.as_bytes()) },
            flags: EXCHGID4_FLAG_USE_NON_PNFS,
            state_protect: StateProtect4A::None,
            client_impl_id: ImplIdOpt(None),
        });
        let r = call(&mut c, &compound(minor, vec![eid]), &mut callbacks);
        let ResOp::ExchangeId(Res4::Ok(e)) = &r.resarray[0] else { panic!("EXCHANGE_ID: {r:?}") };
        let clientid = e.clientid;
        let attrs = |reqs| ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: 1 << 20,
            ca_maxresponsesize: 1 << 20,
            ca_maxresponsesize_cached: 8192,
            ca_maxoperations: 16,
            ca_maxrequests: reqs,
            ca_rdma_ird: RdmaIrd(None),
        };
        let cs = ArgOp::CreateSession(CreateSession4Args {
            clientid,
            sequence: e.sequenceid,
            flags: CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
            fore_chan_attrs: attrs(slots),
            back_chan_attrs: attrs(1),
            cb_program: CB_PROG,
            sec_parms: SecParmsList(vec![CallbackSecParms4::None]),
        });
        let r = call(&mut c, &compound(minor, vec![cs]), &mut callbacks);
        let ResOp::CreateSession(Res4::Ok(s)) = &r.resarray[0] else { panic!("CREATE_SESSION: {r:?}") };
        let mut v = V4 {
            c,
            clientid,
            sessionid: s.sessionid,
            seq: vec![1; s.fore_chan_attrs.ca_maxrequests as usize],
            minor,
            callbacks,
            owner: owner.as_bytes().to_vec(),
            cb_getattr: None,
        };
        if complete {
            v.ok(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })]);
        }
        v
    }

    /// The SEQUENCE for slot `slot`, using (and advancing) its sequence id.
    pub fn sequence(&mut self, slot: u32, cachethis: bool) -> ArgOp {
        let seq = self.seq[slot as usize];
        self.seq[slot as usize] += 1;
        ArgOp::Sequence(Sequence4Args {
            sessionid: self.sessionid,
            sequenceid: seq,
            slotid: slot,
            highest_slotid: self.seq.len() as u32 - 1,
            cachethis,
        })
    }

    /// SEQUENCE on slot 0, then `ops`.
    pub fn compound(&mut self, ops: Vec<ArgOp>) -> Compound4Res {
        let mut all = vec![self.sequence(0, true)];
        all.extend(ops);
        self.raw(all)
    }

    /// As [`V4::compound`]; every operation must succeed.
    pub fn ok(&mut self, ops: Vec<ArgOp>) -> Compound4Res {
        let r = self.compound(ops);
        assert_eq!(r.status, Nfsstat4::Ok, "COMPOUND failed: {:?}", r.resarray.last());
        r
    }

    /// Exactly these operations (no SEQUENCE added).
    pub fn raw(&mut self, ops: Vec<ArgOp>) -> Compound4Res {
        call_with(&mut self.c, &compound(self.minor, ops), &mut self.callbacks, self.cb_getattr.as_ref())
    }

    /// Wait up to WAIT for a callback `want` accepts to have arrived
    /// (answering callbacks meanwhile); whether one did.
    pub fn wait_callback(&mut self, want: impl Fn(&Callback) -> bool) -> bool {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if self.callbacks.iter().any(&want) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            // A round trip: callbacks that arrive first are answered on the way.
            let r = self.raw(vec![]);
            assert_eq!(r.status, Nfsstat4::Ok);
            std::thread::yield_now();
        }
    }

    /// PUTROOTFH and LOOKUP of each component of `path` (as ops).
    pub fn walk(path: &str) -> Vec<ArgOp> {
        let mut ops = vec![ArgOp::Putrootfh(())];
        for c in path.split('/').filter(|c| !c.is_empty()) {
            ops.push(ArgOp::Lookup(Lookup4Args { objname: name(c) }));
        }
        ops
    }

    /// The file handle of `path`.
    pub fn fh(&mut self, path: &str) -> NfsFh4 {
        let mut ops = Self::walk(path);
        ops.push(ArgOp::Getfh(()));
        let r = self.ok(ops);
        let ResOp::Getfh(Res4::Ok(fh)) = r.resarray.last().unwrap() else { panic!() };
        fh.clone()
    }

    /// OPEN (creating if needed) `file` in directory `dir` with `access`;
    /// the result (the file is the current handle after it).
    pub fn open(&mut self, dir: &NfsFh4, file: &str, access: u32, create: bool) -> Compound4Res {
        let how = if create {
            Openflag4::Create(Createhow4::Unchecked(Fattr4::default()))
        } else {
            Openflag4::NoCreate
        };
        self.compound(vec![
            ArgOp::Putfh(Putfh4Args { object: dir.clone() }),
            ArgOp::Open(Open4Args {
                seqid: 0,
                share_access: access,
                share_deny: OPEN4_SHARE_DENY_NONE,
                owner: StateOwner4 { clientid: self.clientid, owner: o(b"owner-1") },
                openhow: how,
                claim: OpenClaim4::Null(name(file)),
            }),
            ArgOp::Getfh(()),
        ])
    }

    /// [`V4::open`], which must succeed: the file handle and open stateid (and the OPEN result).
    pub fn open_ok(&mut self, dir: &NfsFh4, file: &str, access: u32) -> (NfsFh4, Stateid4, Open4ResOk) {
        let r = self.open(dir, file, access, true);
        assert_eq!(r.status, Nfsstat4::Ok, "OPEN: {:?}", r.resarray);
        let ResOp::Open(Res4::Ok(open)) = &r.resarray[2] else { panic!() };
        let ResOp::Getfh(Res4::Ok(fh)) = &r.resarray[3] else { panic!() };
        (fh.clone(), open.stateid, open.clone())
    }
}

/// The credential of a client (AUTH_SYS uid/gid).
pub fn cred(uid: u32, gid: u32) -> OpaqueAuth {
    super::sys(uid, gid)
}

/// The NFSv4.1 twin of [`crate::common::removed_dir_handle_is_stale`]: make
/// directory `dir_name` under `root` with a file in it, list it, empty and
/// remove it, then every compound on the removed directory's handle (READDIR
/// above all) must fail with STALE, whether PUTFH or the operation says so.
pub fn removed_dir_handle_is_stale_v4(v: &mut V4, root: &NfsFh4, dir_name: &str) {
    let r = v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Create(Create4Args {
            objtype: Createtype4::Dir,
            objname: name(dir_name),
            createattrs: Fattr4::default(),
        }),
        ArgOp::Getfh(()),
    ]);
    let ResOp::Getfh(Res4::Ok(d)) = r.resarray.last().unwrap() else { panic!("GETFH of the new directory") };
    let d = d.clone();
    let (file, st, _) = v.open_ok(&d, "inside", OPEN4_SHARE_ACCESS_BOTH);
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: file }),
        ArgOp::Close(Close4Args { seqid: 0, open_stateid: st }),
    ]);
    let readdir = || {
        vec![
            ArgOp::Putfh(Putfh4Args { object: d.clone() }),
            ArgOp::Readdir(Readdir4Args {
                cookie: 0,
                cookieverf: [0; 8],
                dircount: 0,
                maxcount: 8192,
                attr_request: Bitmap4::from_bits(&[FATTR4_TYPE, FATTR4_FILEHANDLE]),
            }),
        ]
    };
    let r = v.ok(readdir());
    let ResOp::Readdir(Res4::Ok(listed)) = r.resarray.last().unwrap() else {
        panic!("READDIR of the live directory")
    };
    assert_eq!(listed.entries.len(), 1, "the live directory lists its file");
    v.ok(vec![
        ArgOp::Putfh(Putfh4Args { object: d.clone() }),
        ArgOp::Remove(Remove4Args { target: name("inside") }),
        ArgOp::Putfh(Putfh4Args { object: root.clone() }),
        ArgOp::Remove(Remove4Args { target: name(dir_name) }),
    ]);

    let on_removed = |v: &mut V4, op: ArgOp, what: &str| {
        let r = v.compound(vec![ArgOp::Putfh(Putfh4Args { object: d.clone() }), op]);
        assert_eq!(r.status, Nfsstat4::Stale, "{what} of a removed directory: {:?}", r.resarray);
    };
    let r = v.compound(readdir());
    assert_eq!(r.status, Nfsstat4::Stale, "READDIR of a removed directory: {:?}", r.resarray);
    on_removed(
        v,
        ArgOp::Getattr(Getattr4Args { attr_request: Bitmap4::from_bits(&[FATTR4_TYPE]) }),
        "GETATTR",
    );
    on_removed(v, ArgOp::Lookup(Lookup4Args { objname: name("inside") }), "LOOKUP");
    on_removed(v, ArgOp::Access(Access4Args { access: ACCESS4_READ }), "ACCESS");
    let mkdir = ArgOp::Create(Create4Args {
        objtype: Createtype4::Dir,
        objname: name("sub"),
        createattrs: Fattr4::default(),
    });
    on_removed(v, mkdir, "CREATE");
    on_removed(v, ArgOp::Remove(Remove4Args { target: name("inside") }), "REMOVE");
    let r = v.compound(vec![
        ArgOp::Putfh(Putfh4Args { object: d.clone() }),
        ArgOp::Open(Open4Args {
            seqid: 0,
            share_access: OPEN4_SHARE_ACCESS_BOTH,
            share_deny: OPEN4_SHARE_DENY_NONE,
            owner: StateOwner4 { clientid: v.clientid, owner: o(b"owner-1") },
            openhow: Openflag4::Create(Createhow4::Unchecked(Fattr4::default())),
            claim: OpenClaim4::Null(name("new")),
        }),
    ]);
    assert_eq!(r.status, Nfsstat4::Stale, "OPEN in a removed directory: {:?}", r.resarray);
}
