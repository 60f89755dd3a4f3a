//! NFS version 3 (RFC 1813): constants, data types, the arguments and
//! results of all 22 procedures, and the procedure table.
//!
//! # Layout
//! - this file: program constants, `ACCESS3_*` and `FSF3_*` bits,
//!   procedure numbers, [`NFS3_PROCEDURES`], and [`Nfs3Args`] / [`Nfs3Res`],
//!   which decode or encode the body of any procedure chosen by number.
//! - `limits`: sizes (§2.4) and the bounds every decoder enforces
//!   ([`NFS3_FHSIZE`], [`NFS3_NAME_MAX`], [`MAX_IO_SIZE`], …).
//! - `types`: data types shared by procedures (§2.5–2.6): [`Fattr3`],
//!   [`Sattr3`], [`WccData`], [`NfsFh3`], …
//! - `procs`: one `XxxNArgs` / `XxxNResOk` / `XxxNResFail` / `XxxNRes`
//!   group per procedure (§3.3), plus the READDIR size accounting
//!   ([`Entry3::encoded_len`], [`Readdir3ResOk::fixed_len`]).
//!
//! # Building a reply
//! A handler builds the procedure's result value and encodes it after the
//! RPC reply header: `Read3Res::Ok(Read3ResOk { .. }).encode(&mut buf)`, or
//! `Read3Res::Fail(Nfsstat3::Stale, Read3ResFail { file_attributes: None })`.

mod limits;
mod procs;
mod types;

pub use limits::*;
pub use procs::*;
pub use types::*;

use eagernfs_xdr::{BufMut, Bytes, Decode, Encode};

use crate::{Error, ProcInfo};

/// The NFS program number.
pub const NFS_PROGRAM: u32 = 100003;
/// The protocol version this module speaks.
pub const NFS_V3: u32 = 3;
/// The well-known NFS port (not registered through portmap by all servers,
/// but clients try it first).
pub const NFS_PORT: u16 = 2049;

/// ACCESS: read data or list a directory.
pub const ACCESS3_READ: u32 = 0x0001;
/// ACCESS: look up a name in a directory.
pub const ACCESS3_LOOKUP: u32 = 0x0002;
/// ACCESS: rewrite data or change directory entries.
pub const ACCESS3_MODIFY: u32 = 0x0004;
/// ACCESS: write beyond the end of a file or add directory entries.
pub const ACCESS3_EXTEND: u32 = 0x0008;
/// ACCESS: delete directory entries.
pub const ACCESS3_DELETE: u32 = 0x0010;
/// ACCESS: execute a file (meaningless for directories, see LOOKUP).
pub const ACCESS3_EXECUTE: u32 = 0x0020;
/// All ACCESS bits defined by RFC 1813.
pub const ACCESS3_ALL: u32 =
    ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE | ACCESS3_EXECUTE;

/// FSINFO property: the file system supports hard links.
pub const FSF3_LINK: u32 = 0x0001;
/// FSINFO property: the file system supports symbolic links.
pub const FSF3_SYMLINK: u32 = 0x0002;
/// FSINFO property: PATHCONF answers are the same for every object.
pub const FSF3_HOMOGENEOUS: u32 = 0x0008;
/// FSINFO property: SETATTR can set times to client-given values.
pub const FSF3_CANSETTIME: u32 = 0x0010;

/// Procedure number of NULL (RFC 1813 §3.3.0).
pub const NFSPROC3_NULL: u32 = 0;
/// Procedure number of GETATTR (RFC 1813 §3.3.1).
pub const NFSPROC3_GETATTR: u32 = 1;
/// Procedure number of SETATTR (RFC 1813 §3.3.2).
pub const NFSPROC3_SETATTR: u32 = 2;
/// Procedure number of LOOKUP (RFC 1813 §3.3.3).
pub const NFSPROC3_LOOKUP: u32 = 3;
/// Procedure number of ACCESS (RFC 1813 §3.3.4).
pub const NFSPROC3_ACCESS: u32 = 4;
/// Procedure number of READLINK (RFC 1813 §3.3.5).
pub const NFSPROC3_READLINK: u32 = 5;
/// Procedure number of READ (RFC 1813 §3.3.6).
pub const NFSPROC3_READ: u32 = 6;
/// Procedure number of WRITE (RFC 1813 §3.3.7).
pub const NFSPROC3_WRITE: u32 = 7;
/// Procedure number of CREATE (RFC 1813 §3.3.8).
pub const NFSPROC3_CREATE: u32 = 8;
/// Procedure number of MKDIR (RFC 1813 §3.3.9).
pub const NFSPROC3_MKDIR: u32 = 9;
/// Procedure number of SYMLINK (RFC 1813 §3.3.10).
pub const NFSPROC3_SYMLINK: u32 = 10;
/// Procedure number of MKNOD (RFC 1813 §3.3.11).
pub const NFSPROC3_MKNOD: u32 = 11;
/// Procedure number of REMOVE (RFC 1813 §3.3.12).
pub const NFSPROC3_REMOVE: u32 = 12;
/// Procedure number of RMDIR (RFC 1813 §3.3.13).
pub const NFSPROC3_RMDIR: u32 = 13;
/// Procedure number of RENAME (RFC 1813 §3.3.14).
pub const NFSPROC3_RENAME: u32 = 14;
/// Procedure number of LINK (RFC 1813 §3.3.15).
pub const NFSPROC3_LINK: u32 = 15;
/// Procedure number of READDIR (RFC 1813 §3.3.16).
pub const NFSPROC3_READDIR: u32 = 16;
/// Procedure number of READDIRPLUS (RFC 1813 §3.3.17).
pub const NFSPROC3_READDIRPLUS: u32 = 17;
/// Procedure number of FSSTAT (RFC 1813 §3.3.18).
pub const NFSPROC3_FSSTAT: u32 = 18;
/// Procedure number of FSINFO (RFC 1813 §3.3.19).
pub const NFSPROC3_FSINFO: u32 = 19;
/// Procedure number of PATHCONF (RFC 1813 §3.3.20).
pub const NFSPROC3_PATHCONF: u32 = 20;
/// Procedure number of COMMIT (RFC 1813 §3.3.21).
pub const NFSPROC3_COMMIT: u32 = 21;

/// The NFSv3 procedure table, indexed by procedure number.
///
/// `mutates`: everything that changes the tree, so a read-only export
/// answers NFS3ERR_ROFS. COMMIT is not listed as mutating: a read-only
/// export never holds unstable data, so COMMIT there is a harmless no-op.
///
/// `idempotent`: false for the namespace operations (a retransmitted REMOVE
/// would fail with NOENT, a retransmitted CREATE GUARDED with EXIST) and for
/// SETATTR (a guarded SETATTR re-executed after its own ctime change fails
/// with NOT_SYNC, and a size change may race with WRITEs). WRITE is
/// idempotent: rewriting the same bytes at the same offset is harmless.
pub const NFS3_PROCEDURES: [ProcInfo; 22] = [
    ProcInfo::new(NFSPROC3_NULL, "NULL", false, true),
    ProcInfo::new(NFSPROC3_GETATTR, "GETATTR", false, true),
    ProcInfo::new(NFSPROC3_SETATTR, "SETATTR", true, false),
    ProcInfo::new(NFSPROC3_LOOKUP, "LOOKUP", false, true),
    ProcInfo::new(NFSPROC3_ACCESS, "ACCESS", false, true),
    ProcInfo::new(NFSPROC3_READLINK, "READLINK", false, true),
    ProcInfo::new(NFSPROC3_READ, "READ", false, true),
    ProcInfo::new(NFSPROC3_WRITE, "WRITE", true, true),
    ProcInfo::new(NFSPROC3_CREATE, "CREATE", true, false),
    ProcInfo::new(NFSPROC3_MKDIR, "MKDIR", true, false),
    ProcInfo::new(NFSPROC3_SYMLINK, "SYMLINK", true, false),
    ProcInfo::new(NFSPROC3_MKNOD, "MKNOD", true, false),
    ProcInfo::new(NFSPROC3_REMOVE, "REMOVE", true, false),
    ProcInfo::new(NFSPROC3_RMDIR, "RMDIR", true, false),
    ProcInfo::new(NFSPROC3_RENAME, "RENAME", true, false),
    ProcInfo::new(NFSPROC3_LINK, "LINK", true, false),
    ProcInfo::new(NFSPROC3_READDIR, "READDIR", false, true),
    ProcInfo::new(NFSPROC3_READDIRPLUS, "READDIRPLUS", false, true),
    ProcInfo::new(NFSPROC3_FSSTAT, "FSSTAT", false, true),
    ProcInfo::new(NFSPROC3_FSINFO, "FSINFO", false, true),
    ProcInfo::new(NFSPROC3_PATHCONF, "PATHCONF", false, true),
    ProcInfo::new(NFSPROC3_COMMIT, "COMMIT", false, true),
];

/// The table row of procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn procedure(procedure: u32) -> Option<&'static ProcInfo> {
    NFS3_PROCEDURES.get(procedure as usize)
}

/// The name of procedure `procedure` ("READ"), or `None` if there is none.
pub fn name_of(procedure: u32) -> Option<&'static str> {
    self::procedure(procedure).map(|p| p.name)
}

/// Generate [`Nfs3Args`] and [`Nfs3Res`]: one variant per procedure, so a
/// caller that knows the procedure number can decode a body without
/// matching on numbers itself.
macro_rules! nfs3_bodies {
    ($( $number:literal $variant:ident($args:ty, $res:ty); )*) => {
        /// The call body of any NFSv3 procedure.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Nfs3Args {
            $(
                #[doc = concat!("Arguments of ", stringify!($variant), ".")]
                $variant($args),
            )*
        }

        /// The reply body of any NFSv3 procedure.
        // The variants differ in size (NULL carries nothing, LOOKUP three
        // attribute sets); a value lives briefly on the stack while one
        // reply is built, so boxing would only add an allocation per call.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Nfs3Res {
            $(
                #[doc = concat!("Result of ", stringify!($variant), ".")]
                $variant($res),
            )*
        }

        impl Nfs3Args {
            /// Decode the arguments of procedure `procedure` from the front of `buf`.
            pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
                match procedure {
                    $( $number => Ok(Self::$variant(<$args>::decode(buf)?)), )*
                    _ => Err(Error::UnknownProcedure { program: "NFSv3", procedure }),
                }
            }

            /// The procedure number these arguments belong to.
            pub fn procedure(&self) -> u32 {
                match self {
                    $( Self::$variant(_) => $number, )*
                }
            }
        }

        impl Encode for Nfs3Args {
            fn encode<B: BufMut>(&self, buf: &mut B) {
                match self {
                    $( Self::$variant(v) => v.encode(buf), )*
                }
            }
        }

        impl Nfs3Res {
            /// Decode the result of procedure `procedure` from the front of `buf`.
            pub fn decode(procedure: u32, buf: &mut Bytes) -> Result<Self, Error> {
                match procedure {
                    $( $number => Ok(Self::$variant(<$res>::decode(buf)?)), )*
                    _ => Err(Error::UnknownProcedure { program: "NFSv3", procedure }),
                }
            }

            /// The procedure number this result belongs to.
            pub fn procedure(&self) -> u32 {
                match self {
                    $( Self::$variant(_) => $number, )*
                }
            }

            /// The status word this result is sent with.
            pub fn status(&self) -> Nfsstat3 {
                match self {
                    $( Self::$variant(r) => r.status(), )*
                }
            }
        }

        impl Encode for Nfs3Res {
            fn encode<B: BufMut>(&self, buf: &mut B) {
                match self {
                    $( Self::$variant(v) => v.encode(buf), )*
                }
            }
        }

        $(
            impl From<$args> for Nfs3Args {
                fn from(v: $args) -> Self {
                    Self::$variant(v)
                }
            }
            impl From<$res> for Nfs3Res {
                fn from(v: $res) -> Self {
                    Self::$variant(v)
                }
            }
        )*
    };
}

nfs3_bodies! {
    0 Null(Null3Args, Null3Res);
    1 Getattr(Getattr3Args, Getattr3Res);
    2 Setattr(Setattr3Args, Setattr3Res);
    3 Lookup(Lookup3Args, Lookup3Res);
    4 Access(Access3Args, Access3Res);
    5 Readlink(Readlink3Args, Readlink3Res);
    6 Read(Read3Args, Read3Res);
    7 Write(Write3Args, Write3Res);
    8 Create(Create3Args, Create3Res);
    9 Mkdir(Mkdir3Args, Mkdir3Res);
    10 Symlink(Symlink3Args, Symlink3Res);
    11 Mknod(Mknod3Args, Mknod3Res);
    12 Remove(Remove3Args, Remove3Res);
    13 Rmdir(Rmdir3Args, Rmdir3Res);
    14 Rename(Rename3Args, Rename3Res);
    15 Link(Link3Args, Link3Res);
    16 Readdir(Readdir3Args, Readdir3Res);
    17 Readdirplus(Readdirplus3Args, Readdirplus3Res);
    18 Fsstat(Fsstat3Args, Fsstat3Res);
    19 Fsinfo(Fsinfo3Args, Fsinfo3Res);
    20 Pathconf(Pathconf3Args, Pathconf3Res);
    21 Commit(Commit3Args, Commit3Res);
}
