//! The MOUNT protocol, versions 1 and 3 (RFC 1813 appendix I; version 1
//! from RFC 1094 appendix A): how a client turns an export path into the
//! root file handle, and how it lists exports and mounts.
//!
//! # Layout
//! - constants and limits, procedure numbers and [`MOUNT_PROCEDURES`];
//! - data types: [`Mountstat3`], [`Mountres3`] (v3 MNT), [`Fhstatus`]
//!   (v1 MNT), [`Mountlist`] (DUMP), [`Exports`] (EXPORT);
//! - [`MountArgs`] / [`MountRes`]: the body of any procedure by number.
//!   The arguments are the same in both versions; only MNT's result differs.

use eagernfs_xdr::{decode_array, encode_array, xdr_enum, xdr_struct, BufMut, Bytes, Decode, Encode, Opaque};

use crate::{Error, ProcInfo};

/// The MOUNT program number.
pub const MOUNT_PROGRAM: u32 = 100005;
/// MOUNT version 1 (for NFSv2 clients; 32-byte handles).
pub const MOUNT_V1: u32 = 1;
/// MOUNT version 3 (for NFSv3 clients; handles up to 64 bytes).
pub const MOUNT_V3: u32 = 3;

/// Longest export path, in bytes (`MNTPATHLEN`).
pub const MNTPATHLEN: usize = 1024;
/// Longest host or group name, in bytes (`MNTNAMLEN`).
pub const MNTNAMLEN: usize = 255;
/// Largest version 3 file handle, in bytes (`FHSIZE3`).
pub const FHSIZE3: usize = 64;
/// Size of a version 1 file handle, in bytes (`FHSIZE`).
pub const FHSIZE: usize = 32;
/// Most authentication flavors we decode in a MNT reply. The RFC sets no
/// bound; real servers list one to three, and the bound keeps a forged
/// count from costing anything.
pub const MAX_AUTH_FLAVORS: usize = 16;

/// Procedure number of NULL.
pub const MOUNTPROC_NULL: u32 = 0;
/// Procedure number of MNT: export path to root handle.
pub const MOUNTPROC_MNT: u32 = 1;
/// Procedure number of DUMP: list the mounts the server has recorded.
pub const MOUNTPROC_DUMP: u32 = 2;
/// Procedure number of UMNT: forget one mount of the caller.
pub const MOUNTPROC_UMNT: u32 = 3;
/// Procedure number of UMNTALL: forget all mounts of the caller.
pub const MOUNTPROC_UMNTALL: u32 = 4;
/// Procedure number of EXPORT: list the exports.
pub const MOUNTPROC_EXPORT: u32 = 5;

/// The MOUNT procedure table (both versions), indexed by procedure number.
/// No MOUNT procedure changes the exported file system; MNT and UMNT only
/// change the server's advisory mount list, and repeating them is harmless.
pub const MOUNT_PROCEDURES: [ProcInfo; 6] = [
    ProcInfo::new(MOUNTPROC_NULL, "NULL", false, true),
    ProcInfo::new(MOUNTPROC_MNT, "MNT", false, true),
    ProcInfo::new(MOUNTPROC_DUMP, "DUMP", false, true),
    ProcInfo::new(MOUNTPROC_UMNT, "UMNT", false, true),
    ProcInfo::new(MOUNTPROC_UMNTALL, "UMNTALL", false, true),
    ProcInfo::new(MOUNTPROC_EXPORT, "EXPORT", false, true),
];

/// The table row of MOUNT procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn procedure(procedure: u32) -> Option<&'static ProcInfo> {
    MOUNT_PROCEDURES.get(procedure as usize)
}

/// The name of MOUNT procedure `procedure` ("MNT"), or `None`.
pub fn name_of(procedure: u32) -> Option<&'static str> {
    self::procedure(procedure).map(|p| p.name)
}

/// A server path naming an export (`dirpath`).
#[doc(alias = "dirpath")]
pub type Dirpath = Opaque<MNTPATHLEN>;
/// A host or netgroup name (`name`).
#[doc(alias = "name")]
pub type Name = Opaque<MNTNAMLEN>;
/// A version 3 file handle (`fhandle3`).
#[doc(alias = "fhandle3")]
pub type Fhandle3 = Opaque<FHSIZE3>;
/// A version 1 file handle (`fhandle`): exactly [`FHSIZE`] bytes.
#[doc(alias = "fhandle")]
pub type Fhandle = [u8; FHSIZE];

xdr_enum! {
    /// Status of a version 3 MNT (RFC 1813 appendix I, `mountstat3`).
    #[doc(alias = "mountstat3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Mountstat3 {
        /// MNT3_OK.
        Ok = 0,
        /// MNT3ERR_PERM: not the owner.
        Perm = 1,
        /// MNT3ERR_NOENT: no such export.
        Noent = 2,
        /// MNT3ERR_IO: I/O error.
        Io = 5,
        /// MNT3ERR_ACCES: the client may not mount this export.
        Acces = 13,
        /// MNT3ERR_NOTDIR: not a directory.
        Notdir = 20,
        /// MNT3ERR_INVAL: invalid argument.
        Inval = 22,
        /// MNT3ERR_NAMETOOLONG: the path is too long.
        Nametoolong = 63,
        /// MNT3ERR_NOTSUPP: operation not supported.
        Notsupp = 10004,
        /// MNT3ERR_SERVERFAULT: a failure on the server.
        Serverfault = 10006,
    }
}

/// A successful version 3 MNT (RFC 1813 appendix I, `mountres3_ok`).
#[doc(alias = "mountres3_ok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mountres3Ok {
    /// The export root's handle.
    pub fhandle: Fhandle3,
    /// RPC authentication flavors the server accepts for this export, most
    /// preferred first (at most [`MAX_AUTH_FLAVORS`] on decode).
    pub auth_flavors: Vec<u32>,
}

impl Encode for Mountres3Ok {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.fhandle.encode(buf);
        encode_array(buf, &self.auth_flavors);
    }
}
impl Decode for Mountres3Ok {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        Ok(Mountres3Ok {
            fhandle: Fhandle3::decode(buf)?,
            auth_flavors: decode_array(buf, MAX_AUTH_FLAVORS)?,
        })
    }
}

/// Result of a version 3 MNT (RFC 1813 appendix I, `mountres3`).
#[doc(alias = "mountres3")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mountres3 {
    /// MNT3_OK with the root handle.
    Ok(Mountres3Ok),
    /// An error status (never [`Mountstat3::Ok`]); the arm is empty.
    Fail(Mountstat3),
}

impl Mountres3 {
    /// The status word this result is sent with.
    pub fn status(&self) -> Mountstat3 {
        match self {
            Mountres3::Ok(_) => Mountstat3::Ok,
            Mountres3::Fail(s) => *s,
        }
    }
}

impl Encode for Mountres3 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Mountres3::Ok(ok) => {
                Mountstat3::Ok.encode(buf);
                ok.encode(buf);
            }
            Mountres3::Fail(status) => {
                // A failure labelled OK would make the client read a handle
                // that is not there; say SERVERFAULT instead.
                debug_assert!(*status != Mountstat3::Ok, "Mountres3 failure with MNT3_OK status");
                let status = if *status == Mountstat3::Ok { Mountstat3::Serverfault } else { *status };
                status.encode(buf);
            }
        }
    }
}
impl Decode for Mountres3 {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        match Mountstat3::decode(buf)? {
            Mountstat3::Ok => Ok(Mountres3::Ok(Mountres3Ok::decode(buf)?)),
            status => Ok(Mountres3::Fail(status)),
        }
    }
}

/// Result of a version 1 MNT (RFC 1094 appendix A, `fhstatus`).
#[doc(alias = "fhstatus")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fhstatus {
    /// Status 0 with the root handle.
    Ok(Fhandle),
    /// A nonzero Unix errno (the arm is empty). Kept as a number because
    /// version 1 servers may send any errno.
    Fail(u32),
}

/// errno EIO, sent in place of a meaningless `Fhstatus::Fail(0)`.
const EIO: u32 = 5;

impl Encode for Fhstatus {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            Fhstatus::Ok(fh) => {
                0u32.encode(buf);
                fh.encode(buf);
            }
            Fhstatus::Fail(errno) => {
                debug_assert!(*errno != 0, "Fhstatus failure with status 0");
                (if *errno == 0 { EIO } else { *errno }).encode(buf);
            }
        }
    }
}
impl Decode for Fhstatus {
    fn decode(buf: &mut Bytes) -> eagernfs_xdr::Result<Self> {
        match u32::decode(buf)? {
            0 => Ok(Fhstatus::Ok(Fhandle::decode(buf)?)),
            errno => Ok(Fhstatus::Fail(errno)),
        }
    }
}

xdr_struct! {
    /// One recorded mount (RFC 1813 appendix I, `mountbody` without its
    /// `ml_next` link, which [`Mountlist`] encodes).
    #[doc(alias = "mountbody")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Mountbody {
        /// The client that mounted.
        pub ml_hostname: Name,
        /// The path it mounted.
        pub ml_directory: Dirpath,
    }
}

linked_list! {
    /// The DUMP result: the mounts the server has recorded (`mountlist`).
    #[doc(alias = "mountlist")]
    Mountlist(Mountbody)
}

linked_list! {
    /// The hosts or netgroups allowed to mount an export (`groups`); empty
    /// means everyone.
    #[doc(alias = "groups")]
    Groups(Name)
}

xdr_struct! {
    /// One export (RFC 1813 appendix I, `exportnode` without its `ex_next`
    /// link, which [`Exports`] encodes).
    #[doc(alias = "exportnode")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Exportnode {
        /// The exported path.
        pub ex_dir: Dirpath,
        /// Who may mount it.
        pub ex_groups: Groups,
    }
}

linked_list! {
    /// The EXPORT result (`exports`).
    #[doc(alias = "exports")]
    Exports(Exportnode)
}

/// The call body of any MOUNT procedure (the same in versions 1 and 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountArgs {
    /// NULL: no arguments.
    Null,
    /// MNT: the path to mount.
    Mnt(Dirpath),
    /// DUMP: no arguments.
    Dump,
    /// UMNT: the path to unmount.
    Umnt(Dirpath),
    /// UMNTALL: no arguments.
    Umntall,
    /// EXPORT: no arguments.
    Export,
}

impl MountArgs {
    /// Decode the arguments of procedure `procedure` from the front of `buf`.
    pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        Ok(match procedure {
            MOUNTPROC_NULL => MountArgs::Null,
            MOUNTPROC_MNT => MountArgs::Mnt(Dirpath::decode(buf)?),
            MOUNTPROC_DUMP => MountArgs::Dump,
            MOUNTPROC_UMNT => MountArgs::Umnt(Dirpath::decode(buf)?),
            MOUNTPROC_UMNTALL => MountArgs::Umntall,
            MOUNTPROC_EXPORT => MountArgs::Export,
            _ => return Err(Error::UnknownProcedure { program: "MOUNT", procedure }),
        })
    }

    /// The procedure number these arguments belong to.
    pub fn procedure(&self) -> u32 {
        match self {
            MountArgs::Null => MOUNTPROC_NULL,
            MountArgs::Mnt(_) => MOUNTPROC_MNT,
            MountArgs::Dump => MOUNTPROC_DUMP,
            MountArgs::Umnt(_) => MOUNTPROC_UMNT,
            MountArgs::Umntall => MOUNTPROC_UMNTALL,
            MountArgs::Export => MOUNTPROC_EXPORT,
        }
    }
}

impl Encode for MountArgs {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            MountArgs::Mnt(path) | MountArgs::Umnt(path) => path.encode(buf),
            MountArgs::Null | MountArgs::Dump | MountArgs::Umntall | MountArgs::Export => {}
        }
    }
}

/// The reply body of any MOUNT procedure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountRes {
    /// NULL: no result.
    Null,
    /// Version 3 MNT.
    Mnt3(Mountres3),
    /// Version 1 MNT.
    Mnt1(Fhstatus),
    /// DUMP.
    Dump(Mountlist),
    /// UMNT: no result.
    Umnt,
    /// UMNTALL: no result.
    Umntall,
    /// EXPORT.
    Export(Exports),
}

impl MountRes {
    /// Decode the result of procedure `procedure` of MOUNT version `version`.
    pub fn decode(version: u32, procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
        Ok(match procedure {
            MOUNTPROC_NULL => MountRes::Null,
            MOUNTPROC_MNT if version == MOUNT_V1 => MountRes::Mnt1(Fhstatus::decode(buf)?),
            MOUNTPROC_MNT if version == MOUNT_V3 => MountRes::Mnt3(Mountres3::decode(buf)?),
            MOUNTPROC_DUMP => MountRes::Dump(Mountlist::decode(buf)?),
            MOUNTPROC_UMNT => MountRes::Umnt,
            MOUNTPROC_UMNTALL => MountRes::Umntall,
            MOUNTPROC_EXPORT => MountRes::Export(Exports::decode(buf)?),
            _ => return Err(Error::UnknownProcedure { program: "MOUNT", procedure }),
        })
    }

    /// The procedure number this result belongs to.
    pub fn procedure(&self) -> u32 {
        match self {
            MountRes::Null => MOUNTPROC_NULL,
            MountRes::Mnt3(_) | MountRes::Mnt1(_) => MOUNTPROC_MNT,
            MountRes::Dump(_) => MOUNTPROC_DUMP,
            MountRes::Umnt => MOUNTPROC_UMNT,
            MountRes::Umntall => MOUNTPROC_UMNTALL,
            MountRes::Export(_) => MOUNTPROC_EXPORT,
        }
    }
}

impl Encode for MountRes {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            MountRes::Mnt3(r) => r.encode(buf),
            MountRes::Mnt1(r) => r.encode(buf),
            MountRes::Dump(r) => r.encode(buf),
            MountRes::Export(r) => r.encode(buf),
            MountRes::Null | MountRes::Umnt | MountRes::Umntall => {}
        }
    }
}
