//! NFSv4.1 for `bench load` (`vers=4.1` in the URL): one session per virtual client over its
//! own connection, a slot per call in flight, and each load operation as the COMPOUND a Linux
//! client sends for it (SEQUENCE, PUTFH, the operation, and GETATTR where Linux asks for
//! attributes), so the call rates of NFSv3 and NFSv4.1 compare like for like.
//!
//! The file set is prepared over NFSv3 as always; its handles are then found again through
//! the NFSv4 pseudo-root (PUTROOTFH and LOOKUP of the URL's path), as a server's NFSv3 and
//! NFSv4 handles need not be the same bytes.

use bytes::{Bytes, BytesMut};
use eagernfs_client::{Cred, NfsError};
use eagernfs_proto::nfs4::*;
use eagernfs_rpc::{AcceptStat, AuthSys, CallHeader, Message, OpaqueAuth, RecordDecoder, ReplyBody};
use eagernfs_xdr::{Encode, Opaque};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{oneshot, Semaphore};

/// Replies waited for, by xid.
type Pending = Arc<Mutex<HashMap<u32, oneshot::Sender<Result<Bytes, NfsError>>>>>;

/// One NFSv4.1 session.
pub(crate) struct V4Client {
    writer: tokio::sync::Mutex<tokio::net::tcp::OwnedWriteHalf>,
    pending: Pending,
    next_xid: AtomicU32,
    cred: OpaqueAuth,
    session: Sessionid4,
    /// Free slots and each slot's next sequence id.
    slots: Mutex<(Vec<u32>, Vec<u32>)>,
    free: Semaphore,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for V4Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn err(status: Nfsstat4) -> NfsError {
    NfsError::Rpc(format!("NFS4ERR {status:?}"))
}

/// The standard attributes a Linux client asks GETATTR for.
pub(crate) fn basic_attrs() -> Bitmap4 {
    Bitmap4::from_bits(&[
        FATTR4_TYPE,
        FATTR4_CHANGE,
        FATTR4_SIZE,
        FATTR4_FSID,
        FATTR4_FILEID,
        FATTR4_MODE,
        FATTR4_NUMLINKS,
        FATTR4_OWNER,
        FATTR4_OWNER_GROUP,
        FATTR4_SPACE_USED,
        FATTR4_TIME_ACCESS,
        FATTR4_TIME_METADATA,
        FATTR4_TIME_MODIFY,
    ])
}

impl V4Client {
    /// Connect (from `source`, if given), make a client id and a session of `slots` slots.
    pub(crate) async fn connect(
        addr: SocketAddr,
        source: Option<IpAddr>,
        cred: &Cred,
        owner: String,
        slots: u32,
    ) -> Result<V4Client, NfsError> {
        let sock =
            if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }
                .map_err(|e| NfsError::Connection(e.to_string()))?;
        if let Some(ip) = source {
            sock.bind(SocketAddr::new(ip, 0)).map_err(|e| NfsError::Connection(format!("bind {ip}: {e}")))?;
        }
        let stream = sock.connect(addr).await.map_err(|e| NfsError::Connection(format!("{addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let pending: Pending = Arc::default();
        let reader = tokio::spawn(read_replies(read, pending.clone()));
        let auth = OpaqueAuth::sys(&AuthSys {
            stamp: 0,
            machine_name: Opaque::from_static(b"eagernfs-bench"),
            uid: cred.uid,
            gid: cred.gid,
            gids: cred.groups.iter().copied().take(16).collect(),
        });
        let mut c = V4Client {
            writer: tokio::sync::Mutex::new(write),
            pending,
            next_xid: AtomicU32::new(rand::random()),
            cred: auth,
            session: [0; 16],
            slots: Mutex::new((Vec::new(), Vec::new())),
            free: Semaphore::new(0),
            reader,
        };
        let eid = ArgOp::ExchangeId(ExchangeId4Args {
            clientowner: ClientOwner4 { co_verifier: rand::random(), co_ownerid: Opaque(Bytes::from(owner)) },
            flags: EXCHGID4_FLAG_USE_NON_PNFS,
            state_protect: StateProtect4A::None,
            client_impl_id: ImplIdOpt(None),
        });
        let r = c.raw(vec![eid]).await?;
        let Some(ResOp::ExchangeId(Res4::Ok(e))) = r.resarray.first() else { return Err(err(r.status)) };
        let attrs = |reqs| ChannelAttrs4 {
            ca_headerpadsize: 0,
            ca_maxrequestsize: (1 << 20) + 4096,
            ca_maxresponsesize: (1 << 20) + 4096,
            ca_maxresponsesize_cached: 4096,
            ca_maxoperations: 16,
            ca_maxrequests: reqs,
            ca_rdma_ird: RdmaIrd(None),
        };
        let cs = ArgOp::CreateSession(CreateSession4Args {
            clientid: e.clientid,
            sequence: e.sequenceid,
            flags: 0,
            fore_chan_attrs: attrs(slots),
            back_chan_attrs: attrs(1),
            cb_program: NFS4_CALLBACK,
            sec_parms: SecParmsList(vec![CallbackSecParms4::None]),
        });
        let r = c.raw(vec![cs]).await?;
        let Some(ResOp::CreateSession(Res4::Ok(s))) = r.resarray.first() else { return Err(err(r.status)) };
        c.session = s.sessionid;
        let n = s.fore_chan_attrs.ca_maxrequests;
        c.slots = Mutex::new(((0..n).rev().collect(), vec![1; n as usize]));
        c.free.add_permits(n as usize);
        let r =
            c.compound(vec![ArgOp::ReclaimComplete(ReclaimComplete4Args { one_fs: false })], false).await?;
        if r.status != Nfsstat4::Ok {
            return Err(err(r.status));
        }
        Ok(c)
    }

    /// Send `ops` as one COMPOUND (no SEQUENCE added) and wait for its results.
    async fn raw(&self, ops: Vec<ArgOp>) -> Result<Compound4Res, NfsError> {
        let xid = self.next_xid.fetch_add(1, Ordering::Relaxed);
        let header = CallHeader {
            xid,
            rpcvers: 2,
            prog: NFS_PROGRAM,
            vers: NFS_V4,
            proc_: NFSPROC4_COMPOUND,
            cred: self.cred.clone(),
            verf: OpaqueAuth::none(),
        };
        let mut out = BytesMut::with_capacity(256);
        let at = eagernfs_rpc::record::begin_record(&mut out);
        header.encode(&mut out);
        Compound4Args { tag: Opaque::default(), minorversion: 1, argarray: ops }.encode(&mut out);
        eagernfs_rpc::record::finish_record(&mut out, at);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(xid, tx);
        {
            let mut w = self.writer.lock().await;
            if let Err(e) = w.write_all(&out).await {
                self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&xid);
                return Err(NfsError::Connection(e.to_string()));
            }
        }
        let body = rx.await.map_err(|_| NfsError::Connection("connection closed".into()))??;
        eagernfs_xdr::decode_exact(body).map_err(|e| NfsError::BadReply(e.to_string()))
    }

    /// SEQUENCE on a free slot, then `ops`.
    pub(crate) async fn compound(&self, ops: Vec<ArgOp>, cachethis: bool) -> Result<Compound4Res, NfsError> {
        let permit = self.free.acquire().await.map_err(|_| NfsError::Connection("closed".into()))?;
        let (slot, seq, top) = {
            let mut s = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let slot = s.0.pop().expect("a permit means a free slot");
            let seq = s.1[slot as usize];
            s.1[slot as usize] = seq.wrapping_add(1);
            (slot, seq, s.1.len() as u32 - 1)
        };
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(ArgOp::Sequence(Sequence4Args {
            sessionid: self.session,
            sequenceid: seq,
            slotid: slot,
            highest_slotid: top,
            cachethis,
        }));
        all.extend(ops);
        let r = self.raw(all).await;
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).0.push(slot);
        drop(permit);
        r
    }

    /// `ops` after SEQUENCE; an error status is an error.
    pub(crate) async fn ok(&self, ops: Vec<ArgOp>, cachethis: bool) -> Result<Compound4Res, NfsError> {
        let r = self.compound(ops, cachethis).await?;
        if r.status != Nfsstat4::Ok {
            return Err(err(r.status));
        }
        Ok(r)
    }

    /// The handle of `path` (components from the pseudo-root), a few LOOKUPs per COMPOUND.
    pub(crate) async fn walk(&self, path: &[&str]) -> Result<NfsFh4, NfsError> {
        let mut at: Option<NfsFh4> = None;
        let comps: Vec<&&str> = path.iter().filter(|c| !c.is_empty()).collect();
        let mut chunks = comps.chunks(8).peekable();
        loop {
            let mut ops = vec![match &at {
                None => ArgOp::Putrootfh(()),
                Some(fh) => ArgOp::Putfh(Putfh4Args { object: fh.clone() }),
            }];
            for c in chunks.next().unwrap_or(&[]) {
                ops.push(ArgOp::Lookup(Lookup4Args {
                    objname: Opaque(Bytes::copy_from_slice(c.as_bytes())),
                }));
            }
            ops.push(ArgOp::Getfh(()));
            let r = self.ok(ops, false).await?;
            match r.resarray.last() {
                Some(ResOp::Getfh(Res4::Ok(fh))) => at = Some(fh.clone()),
                _ => return Err(NfsError::BadReply("no file handle".into())),
            }
            if chunks.peek().is_none() {
                return at.ok_or_else(|| NfsError::BadReply("no file handle".into()));
            }
        }
    }
}

/// Hand each reply to its caller; an error to all when the connection ends.
async fn read_replies(mut read: tokio::net::tcp::OwnedReadHalf, pending: Pending) {
    let mut dec = RecordDecoder::new(8 << 20);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(mut rec)) => {
                    let Ok(Message::Reply(h)) = Message::decode(&mut rec) else { continue };
                    let result = match h.body {
                        ReplyBody::Accepted { stat: AcceptStat::Success, .. } => Ok(rec),
                        other => Err(NfsError::Rpc(format!("{other:?}"))),
                    };
                    if let Some(tx) = pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&h.xid) {
                        let _ = tx.send(result);
                    }
                }
                Ok(None) => break,
                Err(_) => return fail_all(&pending),
            }
        }
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return fail_all(&pending),
            Ok(_) => {}
        }
    }
}

fn fail_all(pending: &Pending) {
    for (_, tx) in pending.lock().unwrap_or_else(|e| e.into_inner()).drain() {
        let _ = tx.send(Err(NfsError::Connection("connection closed".into())));
    }
}

/// The NFSv4 form of the file set: the same objects, by NFSv4 handle.
pub(crate) struct V4Set {
    pub(crate) dirs: Vec<V4Dir>,
}

pub(crate) struct V4Dir {
    pub(crate) fh: NfsFh4,
    pub(crate) files: Vec<NfsFh4>,
    pub(crate) link: NfsFh4,
}

impl V4Set {
    /// Look up every object of a file set of `dirs` × `files` under `base` (path components).
    pub(crate) async fn find(
        c: &V4Client,
        base: &[&str],
        dirs: usize,
        files: usize,
    ) -> Result<V4Set, NfsError> {
        let mut out = Vec::with_capacity(dirs);
        for d in 0..dirs {
            let dn = format!("d{d}");
            let mut path: Vec<&str> = base.to_vec();
            path.push(&dn);
            let fh = c.walk(&path).await?;
            let mut fs = Vec::with_capacity(files);
            for f in 0..files {
                fs.push(c.lookup(&fh, &format!("f{f}")).await?);
            }
            let link = c.lookup(&fh, "link").await?;
            out.push(V4Dir { fh, files: fs, link });
        }
        Ok(V4Set { dirs: out })
    }
}

impl V4Client {
    /// `name` in directory `dir`.
    pub(crate) async fn lookup(&self, dir: &NfsFh4, name: &str) -> Result<NfsFh4, NfsError> {
        let r = self
            .ok(
                vec![
                    ArgOp::Putfh(Putfh4Args { object: dir.clone() }),
                    ArgOp::Lookup(Lookup4Args { objname: Opaque(Bytes::copy_from_slice(name.as_bytes())) }),
                    ArgOp::Getfh(()),
                ],
                false,
            )
            .await?;
        match r.resarray.last() {
            Some(ResOp::Getfh(Res4::Ok(fh))) => Ok(fh.clone()),
            _ => Err(NfsError::BadReply("no file handle".into())),
        }
    }
}
