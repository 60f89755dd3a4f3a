//! What a program handler is given and what it answers: the types every
//! program (NFSv3, NFSv4, MOUNT, portmap, NLM) shares with dispatch and the
//! service threads.
//!
//! # Layout
//! - [`Peer`], [`Transport`], [`Connection`]: where a call came from.
//! - [`Caller`], [`Call`], [`Resolved`]: one decoded call, and a file handle
//!   resolved to its export with the caller's rights there.
//! - [`Outcome`]: what a handler did with the call.
//!
//! - `order`: a call's place in its connection's READ/WRITE order
//!   ([`Ticket`], [`Turn`]); `tls_peer`: what TLS proved about the caller
//!   ([`TlsPeer`]). Both stand below this file, as does the reply record
//!   ([`crate::reply`]): a call carries them, it does not reach up into
//!   the service threads that make them.

mod order;
mod tls_peer;

pub(crate) use order::{IoOrder, Ticket, Turn};
pub(crate) use tls_peer::TlsPeer;

use crate::exports::ExportOptions;
use crate::reply::Piece;
use crate::{handle, ExportSpec, ServerState};
use eagernfs_proto::nfs3::{NfsFh3, Nfsstat3};
use eagernfs_rpc::{AuthSys, CallHeader};
use eagernfs_vfs::{Credentials, FileHandle};
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
    pub(crate) tls: Option<TlsPeer>,
    /// The service's id for a TCP connection (0: a datagram, or not served
    /// by the service threads): NFSv4.1 sessions bind connections by it and
    /// send callbacks on it.
    pub(crate) id: u64,
}

impl Connection {
    pub(crate) fn new(peer: Peer) -> Self {
        Connection { peer, order: Default::default(), tls: None, id: 0 }
    }

    /// A connection relayed from TLS.
    pub(crate) fn with_tls(peer: Peer, tls: TlsPeer) -> Self {
        Connection { peer, order: Default::default(), tls: Some(tls), id: 0 }
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

/// Why a caller may not use an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The export's client list does not name the caller.
    NotListed,
    /// The export needs TLS (or mutual TLS) and the connection has less.
    Transport,
    /// The export is `secure` and the caller's port is not privileged.
    Port,
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
        self.export_access(export).map_err(|r| match r {
            Refusal::NotListed | Refusal::Transport => Nfsstat3::Acces,
            Refusal::Port => Nfsstat3::Perm,
        })
    }

    /// As [`Call::export_options`], saying why a caller is refused (NFSv4
    /// answers a transport that is not secure enough with NFS4ERR_WRONGSEC).
    pub(crate) fn export_access(&self, export: &'a ExportSpec) -> Result<&'a ExportOptions, Refusal> {
        let addr = self.conn.peer.addr;
        let options = match &self.conn.tls {
            // Mutual TLS: a rule naming a host covers a client whose certificate is for it.
            Some(t) if t.client_cert.is_some() => {
                export.access.options_for_peer(addr.ip(), &|name| t.proves(name))
            }
            _ => export.access.options_for(addr.ip()),
        };
        let options = options.ok_or(Refusal::NotListed)?;
        let security = self.conn.security();
        if !options.xprtsec.allows(security) {
            tracing::info!(peer = %addr, ?security, xprtsec = %options.xprtsec, "refused: the export needs another transport security");
            return Err(Refusal::Transport);
        }
        if !options.port_allowed(addr.port()) {
            tracing::warn!(peer = %addr, "request from a non-privileged port refused (export is `secure`)");
            return Err(Refusal::Port);
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
