//! Portmap version 2 (RFC 1833 §3): the directory that maps an RPC program
//! and version to the port it listens on. Clients ask it where MOUNT is.
//!
//! # Layout
//! - constants, procedure numbers and [`PORTMAP_PROCEDURES`];
//! - data types: [`Mapping`], [`Pmaplist`] (DUMP), [`CallArgs`] /
//!   [`CallResult`] (CALLIT);
//! - [`PortmapArgs`] / [`PortmapRes`]: the body of any procedure by number.

use eagernfs_xdr::{xdr_struct, BufMut, Bytes, Decode, Encode, Opaque};

use crate::{Error, ProcInfo};

/// The portmap program number.
pub const PMAP_PROGRAM: u32 = 100000;
/// The portmap version this module speaks.
pub const PMAP_V2: u32 = 2;
/// The well-known portmap port.
pub const PMAP_PORT: u16 = 111;

/// `prot` value for TCP.
pub const IPPROTO_TCP: u32 = 6;
/// `prot` value for UDP.
pub const IPPROTO_UDP: u32 = 17;

/// Largest CALLIT argument or result we decode, in bytes. RFC 1833 sets no
/// bound; CALLIT travels over UDP, so nothing larger than a datagram can
/// be meaningful.
pub const CALLIT_BODY_MAX: usize = 65_536;

/// Procedure number of NULL.
pub const PMAPPROC_NULL: u32 = 0;
/// Procedure number of SET: register a mapping.
pub const PMAPPROC_SET: u32 = 1;
/// Procedure number of UNSET: remove the mappings of a program and version.
pub const PMAPPROC_UNSET: u32 = 2;
/// Procedure number of GETPORT: look up a port.
pub const PMAPPROC_GETPORT: u32 = 3;
/// Procedure number of DUMP: list all mappings.
pub const PMAPPROC_DUMP: u32 = 4;
/// Procedure number of CALLIT: forward a call to a local program.
pub const PMAPPROC_CALLIT: u32 = 5;

/// The portmap procedure table, indexed by procedure number. `mutates` is
/// false throughout: SET and UNSET change the registry, not an exported
/// file system, and re-executing them gives the same registry.
pub const PORTMAP_PROCEDURES: [ProcInfo; 6] = [
    ProcInfo::new(PMAPPROC_NULL, "NULL", false, true),
    ProcInfo::new(PMAPPROC_SET, "SET", false, true),
    ProcInfo::new(PMAPPROC_UNSET, "UNSET", false, true),
    ProcInfo::new(PMAPPROC_GETPORT, "GETPORT", false, true),
    ProcInfo::new(PMAPPROC_DUMP, "DUMP", false, true),
    // CALLIT runs an arbitrary other procedure, so it cannot be assumed safe
    // to repeat.
    ProcInfo::new(PMAPPROC_CALLIT, "CALLIT", false, false),
];

/// The table row of portmap procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn procedure(procedure: u32) -> Option<&'static ProcInfo> {
    PORTMAP_PROCEDURES.get(procedure as usize)
}

/// The name of portmap procedure `procedure` ("GETPORT"), or `None`.
pub fn name_of(procedure: u32) -> Option<&'static str> {
    self::procedure(procedure).map(|p| p.name)
}

xdr_struct! {
    /// A program/version/protocol to port mapping (RFC 1833 §3.1, `mapping`).
    /// In GETPORT and UNSET calls `port` (and for UNSET `prot`) is ignored.
    #[doc(alias = "mapping")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Mapping {
        /// RPC program number.
        pub prog: u32,
        /// Program version.
        pub vers: u32,
        /// Transport: [`IPPROTO_TCP`] or [`IPPROTO_UDP`].
        pub prot: u32,
        /// The port (0 in a GETPORT reply means "not registered").
        pub port: u32,
    }
}

linked_list! {
    /// The DUMP result (RFC 1833 §3.1, `pmaplist`).
    #[doc(alias = "pmaplist")]
    Pmaplist(Mapping)
}

xdr_struct! {
    /// CALLIT arguments (RFC 1833 §3.1, `call_args`).
    #[doc(alias = "call_args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CallArgs {
        /// Program to call.
        pub prog: u32,
        /// Its version.
        pub vers: u32,
        /// Its procedure.
        pub proc_: u32,
        /// The encoded arguments of that procedure.
        pub args: Opaque<CALLIT_BODY_MAX>,
    }
}

xdr_struct! {
    /// CALLIT result (RFC 1833 §3.1, `call_result`).
    #[doc(alias = "call_result")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct CallResult {
        /// The port the called program listens on.
        pub port: u32,
        /// The encoded result of the called procedure.
        pub res: Opaque<CALLIT_BODY_MAX>,
    }
}

/// The call body of any portmap procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortmapArgs {
    /// NULL: no arguments.
    Null,
    /// SET: the mapping to register.
    Set(Mapping),
    /// UNSET: the program and version to remove.
    Unset(Mapping),
    /// GETPORT: the program, version and protocol to look up.
    Getport(Mapping),
    /// DUMP: no arguments.
    Dump,
    /// CALLIT: the call to forward.
    Callit(CallArgs),
}

impl PortmapArgs {
    /// Decode the arguments of procedure `procedure` from the front of `buf`.
    pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        Ok(match procedure {
            PMAPPROC_NULL => PortmapArgs::Null,
            PMAPPROC_SET => PortmapArgs::Set(Mapping::decode(buf)?),
            PMAPPROC_UNSET => PortmapArgs::Unset(Mapping::decode(buf)?),
            PMAPPROC_GETPORT => PortmapArgs::Getport(Mapping::decode(buf)?),
            PMAPPROC_DUMP => PortmapArgs::Dump,
            PMAPPROC_CALLIT => PortmapArgs::Callit(CallArgs::decode(buf)?),
            _ => return Err(Error::UnknownProcedure { program: "portmap", procedure }),
        })
    }

    /// The procedure number these arguments belong to.
    pub fn procedure(&self) -> u32 {
        match self {
            PortmapArgs::Null => PMAPPROC_NULL,
            PortmapArgs::Set(_) => PMAPPROC_SET,
            PortmapArgs::Unset(_) => PMAPPROC_UNSET,
            PortmapArgs::Getport(_) => PMAPPROC_GETPORT,
            PortmapArgs::Dump => PMAPPROC_DUMP,
            PortmapArgs::Callit(_) => PMAPPROC_CALLIT,
        }
    }
}

impl Encode for PortmapArgs {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            PortmapArgs::Set(m) | PortmapArgs::Unset(m) | PortmapArgs::Getport(m) => m.encode(buf),
            PortmapArgs::Callit(c) => c.encode(buf),
            PortmapArgs::Null | PortmapArgs::Dump => {}
        }
    }
}

/// The reply body of any portmap procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortmapRes {
    /// NULL: no result.
    Null,
    /// SET: whether the mapping was registered.
    Set(bool),
    /// UNSET: whether anything was removed.
    Unset(bool),
    /// GETPORT: the port, 0 if not registered.
    Getport(u32),
    /// DUMP: all mappings.
    Dump(Pmaplist),
    /// CALLIT: the forwarded call's port and result.
    Callit(CallResult),
}

impl PortmapRes {
    /// Decode the result of procedure `procedure` from the front of `buf`.
    pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        Ok(match procedure {
            PMAPPROC_NULL => PortmapRes::Null,
            PMAPPROC_SET => PortmapRes::Set(bool::decode(buf)?),
            PMAPPROC_UNSET => PortmapRes::Unset(bool::decode(buf)?),
            PMAPPROC_GETPORT => PortmapRes::Getport(u32::decode(buf)?),
            PMAPPROC_DUMP => PortmapRes::Dump(Pmaplist::decode(buf)?),
            PMAPPROC_CALLIT => PortmapRes::Callit(CallResult::decode(buf)?),
            _ => return Err(Error::UnknownProcedure { program: "portmap", procedure }),
        })
    }

    /// The procedure number this result belongs to.
    pub fn procedure(&self) -> u32 {
        match self {
            PortmapRes::Null => PMAPPROC_NULL,
            PortmapRes::Set(_) => PMAPPROC_SET,
            PortmapRes::Unset(_) => PMAPPROC_UNSET,
            PortmapRes::Getport(_) => PMAPPROC_GETPORT,
            PortmapRes::Dump(_) => PMAPPROC_DUMP,
            PortmapRes::Callit(_) => PMAPPROC_CALLIT,
        }
    }
}

impl Encode for PortmapRes {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            PortmapRes::Set(ok) | PortmapRes::Unset(ok) => ok.encode(buf),
            PortmapRes::Getport(port) => port.encode(buf),
            PortmapRes::Dump(list) => list.encode(buf),
            PortmapRes::Callit(r) => r.encode(buf),
            PortmapRes::Null => {}
        }
    }
}
