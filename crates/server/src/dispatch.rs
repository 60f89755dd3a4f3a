//! From one RPC record to one reply record.
//!
//! The RPC-level checks happen here, in RFC 5531 order: RPC version
//! (RPC_MISMATCH), program (PROG_UNAVAIL), version (PROG_MISMATCH), procedure
//! (PROC_UNAVAIL, from the program's table), credentials (AUTH_ERROR), and
//! arguments (GARBAGE_ARGS). Only then does a program handler run. Each
//! program answers with a body that is encoded straight after the reply
//! header into the buffer that goes to the socket.

use crate::exports::ExportOptions;
use crate::stats::Program;
use crate::svc::{IoOrder, Ticket, Turn};
use crate::{drc, handle, ExportSpec, ServerState};
use bytes::{Bytes, BytesMut};
use eagernfs_proto::nfs3::{NfsFh3, Nfsstat3};
use eagernfs_proto::{mount, nfs3, nlm, portmap};
use eagernfs_rpc::message::{peek_xid, CredError};
use eagernfs_rpc::record::{begin_record, finish_record, finish_record_with_tail};
use eagernfs_rpc::{
    AcceptStat, AuthFlavor, AuthStat, AuthSys, CallHeader, Message, RejectedReply, ReplyHeader,
};
use eagernfs_vfs::{Credentials, FileHandle};
use eagernfs_xdr::Encode;
use std::net::SocketAddr;

/// The far end of a connection and the local port it reached.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub(crate) addr: SocketAddr,
    pub(crate) local_port: u16,
    pub(crate) transport: Transport,
}

/// How a call arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// TCP (also when TLS runs over it: see [`Connection::tls`]).
    Tcp,
    /// One datagram per call and per reply: transfers must fit one.
    Udp,
}

/// Largest READ/WRITE/READDIR payload over UDP: what Linux uses, so a
/// reply (payload plus a few hundred bytes of header and attributes)
/// fits in one datagram (at most 65,507 bytes over IPv4).
pub(crate) const UDP_IO_MAX_BYTES: u32 = 32 * 1024;

/// Per-connection state shared by the calls of one connection.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) peer: Peer,
    /// Keeps one file's READs and WRITEs in arrival order.
    pub(crate) order: std::sync::Arc<IoOrder>,
    /// What TLS proved (TLS connections only).
    pub(crate) tls: Option<crate::tls::TlsPeer>,
}

impl Connection {
    pub(crate) fn new(peer: Peer) -> Self {
        Connection { peer, order: Default::default(), tls: None }
    }

    /// A connection relayed from TLS.
    pub(crate) fn with_tls(peer: Peer, tls: crate::tls::TlsPeer) -> Self {
        Connection { peer, order: Default::default(), tls: Some(tls) }
    }

    /// How the connection is secured, for `xprtsec=`.
    pub(crate) fn security(&self) -> crate::exports::TransportSecurity {
        use crate::exports::TransportSecurity;
        match &self.tls {
            None => TransportSecurity::None,
            Some(t) if t.client_cert.is_some() => TransportSecurity::Mtls,
            Some(_) => TransportSecurity::Tls,
        }
    }
}

/// Who the caller claims to be.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// AUTH_NONE: mapped to the export's anonymous user.
    Anonymous,
    /// AUTH_SYS.
    Sys(AuthSys),
}

/// One decoded call, handed to a program handler.
pub(crate) struct Call<'a> {
    pub(crate) state: &'a ServerState,
    /// The exports as of this call's start (a reload does not change them
    /// under a running call).
    pub(crate) exports: &'a [ExportSpec],
    pub(crate) conn: &'a Connection,
    pub(crate) header: &'a CallHeader,
    pub(crate) caller: Caller,
    /// A READ or WRITE's place in its connection's order.
    pub(crate) ticket: Option<&'a Ticket>,
}

/// An object named by a file handle, with the caller's rights on its export.
pub(crate) struct Resolved<'a> {
    pub(crate) export: &'a ExportSpec,
    pub(crate) fh: FileHandle,
    pub(crate) cred: Credentials,
    pub(crate) options: &'a ExportOptions,
}

impl<'a> Call<'a> {
    /// The export's options for this caller's address and port, if it may use the export at all.
    pub(crate) fn export_options(&self, export: &'a ExportSpec) -> Result<&'a ExportOptions, Nfsstat3> {
        let addr = self.conn.peer.addr;
        let options = match &self.conn.tls {
            // Mutual TLS: a rule naming a host covers a client whose certificate is for it.
            Some(t) if t.client_cert.is_some() => {
                export.access.options_for_peer(addr.ip(), &|name| t.proves(name))
            }
            _ => export.access.options_for(addr.ip()),
        };
        let options = options.ok_or(Nfsstat3::Acces)?;
        let security = self.conn.security();
        if !options.xprtsec.allows(security) {
            tracing::info!(peer = %addr, ?security, xprtsec = %options.xprtsec, "refused: the export needs another transport security");
            return Err(Nfsstat3::Acces);
        }
        if !options.port_allowed(addr.port()) {
            tracing::warn!(peer = %addr, "request from a non-privileged port refused (export is `secure`)");
            return Err(Nfsstat3::Perm);
        }
        Ok(options)
    }

    /// The caller's credentials after the export's squash rules.
    pub(crate) fn credentials(&self, options: &ExportOptions) -> Credentials {
        match &self.caller {
            Caller::Sys(sys) => options.squash(sys.uid, sys.gid, &sys.gids),
            Caller::Anonymous => {
                Credentials { uid: options.anonuid, gid: options.anongid, groups: Vec::new() }
            }
        }
    }

    /// The largest transfer this call may make: `configured`, and no more
    /// than fits a datagram when the call came over UDP.
    pub(crate) fn io_max(&self, configured: u32) -> u32 {
        match self.conn.peer.transport {
            Transport::Tcp => configured,
            Transport::Udp => configured.min(UDP_IO_MAX_BYTES),
        }
    }

    /// Just before a READ or WRITE reaches the backend: wait until the
    /// connection's earlier READs and WRITEs of the same file are done
    /// there. Hold the result until this call's backend call returns.
    pub(crate) fn io_turn(&self) -> Option<Turn<'a>> {
        self.ticket.map(|t| t.wait_turn())
    }

    /// Find the export and backend handle behind a wire handle and check the caller may use it.
    pub(crate) fn resolve(&self, fh: &NfsFh3) -> Result<Resolved<'a>, Nfsstat3> {
        let (id, bfh) = handle::from_wire(fh)?;
        // A well-formed handle for an export we no longer serve is stale, not bad.
        let export = self.exports.iter().find(|e| e.id == id).ok_or(Nfsstat3::Stale)?;
        let options = self.export_options(export)?;
        let cred = self.credentials(options);
        Ok(Resolved { export, fh: bfh, cred, options })
    }
}

/// What a program handler did with a call.
pub(crate) enum Outcome {
    /// Results were written after the success header.
    Replied,
    /// Results were written after the success header except for the bytes
    /// of their last field, a variable-length opaque (a READ's data): those
    /// follow on the wire from their own buffer, then XDR padding.
    RepliedWithData(Piece),
    /// The arguments did not decode.
    GarbageArgs,
    /// The procedure exists in the protocol but this server does not offer it.
    ProcUnavail,
}

/// Handle one record; `None` means send nothing (it was not a call).
/// `ticket`: the record's place in its connection's READ/WRITE order.
pub(crate) fn handle_record(
    state: &ServerState,
    conn: &Connection,
    record: Bytes,
    ticket: Option<&Ticket>,
) -> Option<Reply> {
    let mut body = record.clone();
    let header = match Message::decode(&mut body) {
        Ok(Message::Call(c)) => c,
        // A reply sent to a server has no one to go to.
        Ok(Message::Reply(_)) => return None,
        Err(e) => {
            // The header itself is malformed (usually a credential that
            // overruns the record). Answer if we can name the call.
            state.stats.count_rejected();
            tracing::debug!(peer = %conn.peer.addr, "malformed RPC header: {e}");
            let xid = peek_xid(&record)?;
            return Some(Reply::from(reply_header_only(ReplyHeader::denied(
                xid,
                RejectedReply::AuthError(AuthStat::BadCred),
            ))));
        }
    };
    let xid = header.xid;
    let reject = |h: ReplyHeader| {
        state.stats.count_rejected();
        Some(Reply::from(reply_header_only(h)))
    };
    if header.rpcvers != eagernfs_rpc::RPC_VERSION {
        return reject(ReplyHeader::denied(xid, RejectedReply::RpcMismatch { low: 2, high: 2 }));
    }
    // Program and version, then procedure (from the program's table).
    let (program, info) = match header.prog {
        nfs3::NFS_PROGRAM if header.vers == nfs3::NFS_V3 => (Program::Nfs3, nfs3::procedure(header.proc_)),
        nfs3::NFS_PROGRAM => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 3, high: 3 }))
        }
        mount::MOUNT_PROGRAM if (1..=3).contains(&header.vers) => {
            (Program::Mount, mount::procedure(header.proc_))
        }
        mount::MOUNT_PROGRAM => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 1, high: 3 }))
        }
        portmap::PMAP_PROGRAM if header.vers == portmap::PMAP_V2 => {
            (Program::Portmap, portmap::procedure(header.proc_))
        }
        portmap::PMAP_PROGRAM => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 2, high: 2 }))
        }
        nlm::NLM_PROGRAM if state.locks.is_some() && header.vers == nlm::NLM_V4 => {
            (Program::Nlm, nlm::nlm_procedure(header.proc_))
        }
        nlm::NLM_PROGRAM if state.locks.is_some() => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 4, high: 4 }))
        }
        nlm::NSM_PROGRAM if state.locks.is_some() && header.vers == nlm::NSM_V1 => {
            (Program::Nsm, nlm::nsm_procedure(header.proc_))
        }
        nlm::NSM_PROGRAM if state.locks.is_some() => {
            return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgMismatch { low: 1, high: 1 }))
        }
        _ => return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProgUnavail)),
    };
    let Some(info) = info else {
        return reject(ReplyHeader::accepted_error(xid, AcceptStat::ProcUnavail));
    };
    // RPC-with-TLS probe (RFC 9289 §4.1): NULL with AUTH_TLS. Answered with the STARTTLS
    // verifier when TLS is configured and the connection is plain TCP; otherwise as an
    // ordinary NULL, which tells the client this server will not start TLS.
    if header.cred.flavor == AuthFlavor::Tls as u32 {
        if header.proc_ != 0 {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::BadCred)));
        }
        if state.config.tls.is_some() && conn.peer.transport == Transport::Tcp && conn.tls.is_none() {
            state.stats.count(program, 0);
            let mut reply = Reply::from(reply_header_only(ReplyHeader::starttls(xid)));
            reply.starttls = true;
            return Some(reply);
        }
    }
    // Credentials. NULL answers anyone (clients probe with AUTH_NONE);
    // otherwise AUTH_SYS, or AUTH_NONE mapped to the anonymous user.
    let caller = match header.auth_sys() {
        Ok(sys) => Caller::Sys(sys),
        Err(CredError::NotAuthSys(f)) if f == AuthFlavor::None as u32 || header.proc_ == 0 => {
            Caller::Anonymous
        }
        Err(CredError::NotAuthSys(_)) => {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::TooWeak)))
        }
        Err(CredError::Malformed(_)) => {
            return reject(ReplyHeader::denied(xid, RejectedReply::AuthError(AuthStat::BadCred)))
        }
    };
    // Non-idempotent calls go through the duplicate reply cache.
    let drc_key = (!info.idempotent)
        .then(|| drc::Key::new(conn.peer.addr.ip(), xid, header.prog, header.vers, header.proc_, &body));
    if let Some(key) = drc_key {
        match state.drc.begin(key) {
            drc::Lookup::New => {}
            drc::Lookup::InProgress => return None,
            drc::Lookup::Replay(reply) => return Some(Reply::from(BytesMut::from(&reply[..]))),
        }
    }
    let exports = state.exports();
    let call = Call { state, exports: &exports, conn, header: &header, caller, ticket };
    let mut out = BytesMut::with_capacity(512);
    let at = begin_record(&mut out);
    ReplyHeader::success(xid).encode(&mut out);
    let outcome = match program {
        Program::Nfs3 => crate::nfs3::dispatch(&call, body, &mut out),
        Program::Mount => crate::mount::dispatch(&call, body, &mut out),
        Program::Portmap => crate::portmap::dispatch(&call, body, &mut out),
        Program::Nlm => crate::nlm::dispatch(&call, body, &mut out),
        Program::Nsm => crate::nlm::dispatch_nsm(&call, body, &mut out),
    };
    let failed = match &outcome {
        Outcome::Replied | Outcome::RepliedWithData(_) => None,
        Outcome::GarbageArgs => Some(AcceptStat::GarbageArgs),
        Outcome::ProcUnavail => Some(AcceptStat::ProcUnavail),
    };
    if let Some(stat) = failed {
        if let Some(key) = drc_key {
            state.drc.abandon(key);
        }
        return reject(ReplyHeader::accepted_error(xid, stat));
    }
    state.stats.count(program, header.proc_);
    let tail = match outcome {
        Outcome::RepliedWithData(data) => Some(data),
        _ => None,
    };
    let mut reply = Reply::new(out, at, tail);
    if let Some(key) = drc_key {
        state.drc.finish(key, reply.take_bytes());
    }
    Some(reply)
}

/// A reply record: a head (record mark, RPC header, results) and, for a
/// READ, the data straight from the backend (its buffer, or a pipe holding
/// the file's pages) and its XDR padding.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) head: BytesMut,
    pub(crate) tail: Option<Piece>,
    /// The answer to an RPC-with-TLS probe: once it is written, the
    /// connection goes to the TLS relay.
    pub(crate) starttls: bool,
}

/// One piece of a reply on its way to the socket; a READ's data is one
/// (the reply's tail).
#[derive(Debug)]
pub(crate) enum Piece {
    /// In a buffer.
    Bytes(Bytes),
    /// In a pipe, to be spliced into the socket (never copied by us).
    Spliced(eagernfs_vfs::spliced::Spliced),
}

impl Piece {
    pub(crate) fn len(&self) -> usize {
        match self {
            Piece::Bytes(b) => b.len(),
            Piece::Spliced(s) => s.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data in a buffer (a spliced piece is read out of its pipe).
    fn into_bytes(self) -> Bytes {
        match self {
            Piece::Bytes(b) => b,
            Piece::Spliced(s) => {
                let want = s.len();
                match s.into_bytes() {
                    Ok(b) if b.len() == want => b,
                    // Reading our own pipe cannot fail short; if it ever
                    // did, zeros keep the record's length true.
                    r => {
                        tracing::error!("reading a READ's data back from its pipe failed: {r:?}");
                        let mut b = BytesMut::zeroed(want);
                        if let Ok(got) = r {
                            b[..got.len()].copy_from_slice(&got);
                        }
                        b.freeze()
                    }
                }
            }
        }
    }
}

/// XDR padding after opaque data.
static PAD: [u8; 3] = [0; 3];

impl From<BytesMut> for Reply {
    /// A finished record with no tail.
    fn from(head: BytesMut) -> Reply {
        Reply { head, tail: None, starttls: false }
    }
}

impl Reply {
    /// Frame the record begun at `at` in `head`, counting `tail` and its padding.
    fn new(mut head: BytesMut, at: usize, tail: Option<Piece>) -> Reply {
        let extra = tail.as_ref().map_or(0, |t| t.len() + pad_len(t.len()));
        finish_record_with_tail(&mut head, at, extra);
        Reply { head, tail, starttls: false }
    }

    /// The pieces to send, in order (each its own buffer or pipe: no copy).
    pub(crate) fn into_pieces(self) -> impl Iterator<Item = Piece> {
        let pad = self.tail.as_ref().map_or(0, |t| pad_len(t.len()));
        let pad = (pad > 0).then(|| Piece::Bytes(Bytes::from_static(&PAD[..pad])));
        let tail = self.tail.filter(|t| !t.is_empty());
        std::iter::once(Piece::Bytes(self.head.freeze())).chain(tail).chain(pad)
    }

    /// The whole record in one buffer (a datagram, the reply cache). A
    /// spliced tail is read into a buffer first.
    pub(crate) fn take_bytes(&mut self) -> Bytes {
        let tail = self.tail.take().map(Piece::into_bytes);
        let all = match &tail {
            None => Bytes::copy_from_slice(&self.head),
            Some(t) => {
                let mut all = BytesMut::with_capacity(self.head.len() + t.len() + 3);
                all.extend_from_slice(&self.head);
                all.extend_from_slice(t);
                all.extend_from_slice(&PAD[..pad_len(t.len())]);
                all.freeze()
            }
        };
        self.tail = tail.map(Piece::Bytes);
        all
    }
}

fn pad_len(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// An NFSv3 NFS3ERR_JUKEBOX reply to call `xid` of procedure `proc_`.
pub(crate) fn jukebox_reply(xid: u32, proc_: u32) -> Option<Reply> {
    let body = crate::nfs3::jukebox_body(proc_)?;
    let mut out = BytesMut::with_capacity(48 + body.len());
    let at = begin_record(&mut out);
    ReplyHeader::success(xid).encode(&mut out);
    out.extend_from_slice(&body);
    finish_record(&mut out, at);
    Some(Reply::from(out))
}

/// A reply with no results (every RPC-level error).
fn reply_header_only(h: ReplyHeader) -> BytesMut {
    let mut out = BytesMut::with_capacity(48);
    let at = begin_record(&mut out);
    h.encode(&mut out);
    finish_record(&mut out, at);
    out
}
