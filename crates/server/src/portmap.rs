//! Portmap v2 (RFC 1833 §3), answered on the NFS port itself.
//!
//! Clients that ask the portmapper where NFS and MOUNT live are told "here":
//! the port they are already connected to. SET and UNSET are refused (we
//! are not a general-purpose rpcbind) and CALLIT is not offered (it is an
//! amplification vector and nothing NFSv3 needs).

use crate::call::{Call, Outcome};
use crate::rpcbind::served;
use bytes::{Bytes, BytesMut};
use eagernfs_proto::portmap::*;
use eagernfs_xdr::Encode;

/// The transports served: TCP always, UDP when configured.
fn protocols(call: &Call) -> &'static [u32] {
    if call.state.config.udp {
        &[IPPROTO_TCP, IPPROTO_UDP]
    } else {
        &[IPPROTO_TCP]
    }
}

pub(crate) fn dispatch(call: &Call, mut body: Bytes, out: &mut BytesMut) -> Outcome {
    let Ok(args) = PortmapArgs::decode(call.header.proc_, &mut body) else {
        return Outcome::GarbageArgs;
    };
    let port = call.conn.peer.local_port as u32;
    let locks = call.state.locks.is_some();
    let res = match args {
        PortmapArgs::Null => PortmapRes::Null,
        PortmapArgs::Set(_) => PortmapRes::Set(false),
        PortmapArgs::Unset(_) => PortmapRes::Unset(false),
        PortmapArgs::Getport(m) => {
            let served = protocols(call).contains(&m.prot) && served(locks).any(|p| p == (m.prog, m.vers));
            PortmapRes::Getport(if served { port } else { 0 })
        }
        PortmapArgs::Dump => PortmapRes::Dump(Pmaplist(
            protocols(call)
                .iter()
                .flat_map(|&prot| served(locks).map(move |(prog, vers)| Mapping { prog, vers, prot, port }))
                .collect(),
        )),
        PortmapArgs::Callit(_) => return Outcome::ProcUnavail,
    };
    res.encode(out);
    Outcome::Replied
}
