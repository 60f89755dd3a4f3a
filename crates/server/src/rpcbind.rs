//! Registration with a running rpcbind/portmapper (optional).
//!
//! Clients that cannot be told the port (`mount -o port=`) ask the
//! portmapper on port 111. When one runs, we register NFS v3 and MOUNT
//! v1–v3 at our port with PMAPPROC_SET, and remove them at shutdown. This is
//! a small blocking client: it runs once at start and once at stop (and
//! finds clients' lock services for NLM's callbacks). The list of what this
//! server answers, `served`, is here too: the built-in portmap program
//! answers from it.

use bytes::{Bytes, BytesMut};
use eagernfs_proto::portmap::{
    Mapping, IPPROTO_TCP, IPPROTO_UDP, PMAPPROC_GETPORT, PMAPPROC_SET, PMAPPROC_UNSET, PMAP_PROGRAM, PMAP_V2,
};
use eagernfs_proto::{mount, nfs3};
use eagernfs_rpc::record::{begin_record, finish_record};
use eagernfs_rpc::{AcceptStat, CallHeader, Message, OpaqueAuth, RecordDecoder, ReplyBody};
use eagernfs_xdr::{Decode, Encode};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// (program, version) pairs this server answers (over TCP, and UDP if on).
pub(crate) const SERVED: [(u32, u32); 5] = [
    (nfs3::NFS_PROGRAM, nfs3::NFS_V3),
    (mount::MOUNT_PROGRAM, 1),
    (mount::MOUNT_PROGRAM, 2),
    (mount::MOUNT_PROGRAM, mount::MOUNT_V3),
    (PMAP_PROGRAM, PMAP_V2),
];

/// The lock manager and status monitor, when locks are served.
pub(crate) const LOCK_PROGRAMS: [(u32, u32); 2] =
    [(eagernfs_proto::nlm::NLM_PROGRAM, eagernfs_proto::nlm::NLM_V4), (eagernfs_proto::nlm::NSM_PROGRAM, 1)];

/// Every (program, version) this server answers.
pub(crate) fn served(locks: bool) -> impl Iterator<Item = (u32, u32)> + Clone {
    SERVED.into_iter().chain(LOCK_PROGRAMS.into_iter().filter(move |_| locks))
}

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcbindError {
    #[error(
        "cannot reach the portmapper at {addr}: {source} (is rpcbind running? start it with `rpcbind -f &`)"
    )]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("portmapper I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("portmapper sent a reply we could not read")]
    BadReply,
    #[error("portmapper refused to register program {prog} version {vers} (already registered by another server?)")]
    Refused { prog: u32, vers: u32 },
}

fn call(stream: &mut TcpStream, xid: u32, proc_: u32, m: &Mapping) -> Result<bool, RpcbindError> {
    let mut body = rpc_call(stream, xid, PMAP_PROGRAM, PMAP_V2, proc_, OpaqueAuth::none(), m)?;
    bool::decode(&mut body).map_err(|_| RpcbindError::BadReply)
}

/// GETPORT over `stream`: the port `m` is registered at (0: none).
fn call_getport(stream: &mut TcpStream, xid: u32, m: &Mapping) -> Result<u32, RpcbindError> {
    let mut body = rpc_call(stream, xid, PMAP_PROGRAM, PMAP_V2, PMAPPROC_GETPORT, OpaqueAuth::none(), m)?;
    u32::decode(&mut body).map_err(|_| RpcbindError::BadReply)
}

/// One blocking RPC call over `stream`: the body of a successful reply.
pub(crate) fn rpc_call(
    stream: &mut TcpStream,
    xid: u32,
    prog: u32,
    vers: u32,
    proc_: u32,
    cred: OpaqueAuth,
    args: &impl Encode,
) -> Result<Bytes, RpcbindError> {
    let mut out = BytesMut::new();
    let at = begin_record(&mut out);
    CallHeader { xid, rpcvers: 2, prog, vers, proc_, cred, verf: OpaqueAuth::none() }.encode(&mut out);
    args.encode(&mut out);
    finish_record(&mut out, at);
    stream.write_all(&out)?;
    let mut dec = RecordDecoder::new(64 * 1024);
    let mut buf = BytesMut::new();
    let record = loop {
        if let Some(r) = dec.decode(&mut buf).map_err(|_| RpcbindError::BadReply)? {
            break r;
        }
        let mut chunk = [0u8; 512];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(RpcbindError::BadReply);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut body: Bytes = record;
    match Message::decode(&mut body) {
        Ok(Message::Reply(r))
            if r.xid == xid && matches!(r.body, ReplyBody::Accepted { stat: AcceptStat::Success, .. }) =>
        {
            Ok(body)
        }
        _ => Err(RpcbindError::BadReply),
    }
}

/// Ask the portmapper at `portmapper` where `prog`/`vers` listens over TCP.
pub(crate) fn getport(portmapper: SocketAddr, prog: u32, vers: u32) -> Result<Option<u16>, RpcbindError> {
    let mut s = connect(portmapper)?;
    let port = call_getport(&mut s, 1, &Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 })?;
    Ok(u16::try_from(port).ok().filter(|p| *p != 0))
}

pub(crate) fn connect(portmapper: SocketAddr) -> Result<TcpStream, RpcbindError> {
    let s = TcpStream::connect_timeout(&portmapper, Duration::from_secs(3))
        .map_err(|source| RpcbindError::Connect { addr: portmapper, source })?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    Ok(s)
}

/// The transports to register: TCP, and UDP when it is served.
fn protocols(udp: bool) -> &'static [u32] {
    if udp {
        &[IPPROTO_TCP, IPPROTO_UDP]
    } else {
        &[IPPROTO_TCP]
    }
}

/// Register every program we serve at `port` (replacing older
/// registrations), over TCP and, with `udp`, over UDP; with `locks`, the
/// lock manager (NLM) and status monitor (NSM) too, best effort: another
/// lock manager or the host's rpc.statd may hold those, and our own
/// clients find them on the NFS port anyway. Returns what could not be
/// registered, as sentences to log.
pub fn register(
    portmapper: SocketAddr,
    port: u16,
    udp: bool,
    locks: bool,
) -> Result<Vec<String>, RpcbindError> {
    let mut s = connect(portmapper)?;
    let mut xid = 0;
    let mut notes = Vec::new();
    for &prot in protocols(udp) {
        for (prog, vers) in served(false).filter(|(p, _)| *p != PMAP_PROGRAM) {
            let m = Mapping { prog, vers, prot, port: port as u32 };
            // UNSET first: a stale entry from a crashed server would make SET fail.
            xid += 2;
            call(&mut s, xid - 1, PMAPPROC_UNSET, &m)?;
            if !call(&mut s, xid, PMAPPROC_SET, &m)? {
                return Err(RpcbindError::Refused { prog, vers });
            }
        }
        if !locks {
            continue;
        }
        for (prog, vers) in LOCK_PROGRAMS {
            let m = Mapping { prog, vers, prot, port: port as u32 };
            xid += 4;
            let current = call_getport(&mut s, xid, &m)?;
            if current != 0 && current != port as u32 {
                let holder = SocketAddr::new(portmapper.ip(), current as u16);
                if TcpStream::connect_timeout(&holder, Duration::from_secs(1)).is_ok() {
                    notes.push(format!(
                        "program {prog} v{vers} is registered to port {current}, where something answers (another lock manager, or the host's rpc.statd): left alone; eagernfs serves it on port {port}, where eagernfs clients find it"
                    ));
                    continue;
                }
                // Nothing answers there: a stale entry of a server that died.
                call(&mut s, xid + 1, PMAPPROC_UNSET, &m)?;
            }
            if !call(&mut s, xid + 2, PMAPPROC_SET, &m)? {
                notes.push(format!("the portmapper refused program {prog} v{vers}"));
            }
        }
    }
    Ok(notes)
}

/// Remove our registrations (UNSET removes every transport's).
pub fn unregister(portmapper: SocketAddr, port: u16, locks: bool) -> Result<(), RpcbindError> {
    let mut s = connect(portmapper)?;
    for (i, (prog, vers)) in served(false).filter(|(p, _)| *p != PMAP_PROGRAM).enumerate() {
        let m = Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 };
        call(&mut s, 100 + i as u32, PMAPPROC_UNSET, &m)?;
    }
    if locks {
        // Only what is ours: rpc.statd's registration stays.
        for (i, (prog, vers)) in LOCK_PROGRAMS.into_iter().enumerate() {
            let m = Mapping { prog, vers, prot: IPPROTO_TCP, port: 0 };
            let xid = 200 + 2 * i as u32;
            if call_getport(&mut s, xid, &m)? == port as u32 {
                call(&mut s, xid + 1, PMAPPROC_UNSET, &m)?;
            }
        }
    }
    Ok(())
}
