//! NFS version 4.1 (RFC 8881) and the NFSv4.2 operations (RFC 7862) a
//! server needs: data types, the arguments and results of the modelled
//! operations, COMPOUND, the callback program, attributes, and the
//! operation table.
//!
//! # Layout
//! - this file: program constants, operation numbers and [`NFS4_OPERATIONS`]
//!   ([`OpInfo`]: name, minor version, mutates, needs a file handle, where it
//!   may stand in a COMPOUND).
//! - `types`: shared data types ([`Nfsstat4`], [`Stateid4`], [`Bitmap4`],
//!   [`Fattr4`], [`ChannelAttrs4`], …) and the wire bounds.
//! - `ops`: one `Xxx4Args` / `Xxx4ResOk` per modelled operation, and
//!   [`Res4`], the shape of most results.
//! - `compound`: [`Compound4Head`] and [`ArgOp::decode`] for a server that
//!   decodes one operation at a time; [`Compound4Args`] / [`Compound4Res`]
//!   whole, for clients.
//! - `callback`: CB_COMPOUND and the callbacks a server sends.
//! - `attr`: attribute numbers and [`FileAttrs`] (typed `fattr4`).
//!
//! Every length read from the wire is bounded before anything is
//! allocated; see the constants in `types`.

mod attr;
mod callback;
mod compound;
mod ops;
mod types;

pub use attr::*;
pub use callback::*;
pub use compound::*;
pub use ops::*;
pub use types::*;

/// The NFS program number (shared with NFSv3).
pub const NFS_PROGRAM: u32 = 100003;
/// The protocol version of NFSv4.x.
pub const NFS_V4: u32 = 4;
/// NFSPROC4_NULL.
pub const NFSPROC4_NULL: u32 = 0;
/// NFSPROC4_COMPOUND.
pub const NFSPROC4_COMPOUND: u32 = 1;
/// The highest minor version this crate models.
pub const NFS4_MINOR_VERSION_MAX: u32 = 2;

/// The two procedures of NFSv4, indexed by number. COMPOUND is marked
/// idempotent: an NFSv4.1 session's slots are its reply cache, so the
/// NFSv3 duplicate reply cache must stay out of its way; whether it
/// changes anything is each operation's business ([`OpInfo::mutates`]).
pub const NFS4_PROCEDURES: [crate::ProcInfo; 2] = [
    crate::ProcInfo::new(NFSPROC4_NULL, "NULL", false, true),
    crate::ProcInfo::new(NFSPROC4_COMPOUND, "COMPOUND", false, true),
];

/// The table row of procedure `procedure`, or `None` (PROC_UNAVAIL).
pub fn procedure(procedure: u32) -> Option<&'static crate::ProcInfo> {
    NFS4_PROCEDURES.get(procedure as usize)
}

macro_rules! opnums {
    ($( $num:literal $konst:ident $name:literal; )*) => {
        $(
            #[doc = concat!("Operation number of ", $name, ".")]
            pub const $konst: u32 = $num;
        )*
    };
}

opnums! {
    3 OP_ACCESS "ACCESS";
    4 OP_CLOSE "CLOSE";
    5 OP_COMMIT "COMMIT";
    6 OP_CREATE "CREATE";
    7 OP_DELEGPURGE "DELEGPURGE";
    8 OP_DELEGRETURN "DELEGRETURN";
    9 OP_GETATTR "GETATTR";
    10 OP_GETFH "GETFH";
    11 OP_LINK "LINK";
    12 OP_LOCK "LOCK";
    13 OP_LOCKT "LOCKT";
    14 OP_LOCKU "LOCKU";
    15 OP_LOOKUP "LOOKUP";
    16 OP_LOOKUPP "LOOKUPP";
    17 OP_NVERIFY "NVERIFY";
    18 OP_OPEN "OPEN";
    19 OP_OPENATTR "OPENATTR";
    20 OP_OPEN_CONFIRM "OPEN_CONFIRM";
    21 OP_OPEN_DOWNGRADE "OPEN_DOWNGRADE";
    22 OP_PUTFH "PUTFH";
    23 OP_PUTPUBFH "PUTPUBFH";
    24 OP_PUTROOTFH "PUTROOTFH";
    25 OP_READ "READ";
    26 OP_READDIR "READDIR";
    27 OP_READLINK "READLINK";
    28 OP_REMOVE "REMOVE";
    29 OP_RENAME "RENAME";
    30 OP_RENEW "RENEW";
    31 OP_RESTOREFH "RESTOREFH";
    32 OP_SAVEFH "SAVEFH";
    33 OP_SECINFO "SECINFO";
    34 OP_SETATTR "SETATTR";
    35 OP_SETCLIENTID "SETCLIENTID";
    36 OP_SETCLIENTID_CONFIRM "SETCLIENTID_CONFIRM";
    37 OP_VERIFY "VERIFY";
    38 OP_WRITE "WRITE";
    39 OP_RELEASE_LOCKOWNER "RELEASE_LOCKOWNER";
    40 OP_BACKCHANNEL_CTL "BACKCHANNEL_CTL";
    41 OP_BIND_CONN_TO_SESSION "BIND_CONN_TO_SESSION";
    42 OP_EXCHANGE_ID "EXCHANGE_ID";
    43 OP_CREATE_SESSION "CREATE_SESSION";
    44 OP_DESTROY_SESSION "DESTROY_SESSION";
    45 OP_FREE_STATEID "FREE_STATEID";
    46 OP_GET_DIR_DELEGATION "GET_DIR_DELEGATION";
    47 OP_GETDEVICEINFO "GETDEVICEINFO";
    48 OP_GETDEVICELIST "GETDEVICELIST";
    49 OP_LAYOUTCOMMIT "LAYOUTCOMMIT";
    50 OP_LAYOUTGET "LAYOUTGET";
    51 OP_LAYOUTRETURN "LAYOUTRETURN";
    52 OP_SECINFO_NO_NAME "SECINFO_NO_NAME";
    53 OP_SEQUENCE "SEQUENCE";
    54 OP_SET_SSV "SET_SSV";
    55 OP_TEST_STATEID "TEST_STATEID";
    56 OP_WANT_DELEGATION "WANT_DELEGATION";
    57 OP_DESTROY_CLIENTID "DESTROY_CLIENTID";
    58 OP_RECLAIM_COMPLETE "RECLAIM_COMPLETE";
    59 OP_ALLOCATE "ALLOCATE";
    60 OP_COPY "COPY";
    61 OP_COPY_NOTIFY "COPY_NOTIFY";
    62 OP_DEALLOCATE "DEALLOCATE";
    63 OP_IO_ADVISE "IO_ADVISE";
    64 OP_LAYOUTERROR "LAYOUTERROR";
    65 OP_LAYOUTSTATS "LAYOUTSTATS";
    66 OP_OFFLOAD_CANCEL "OFFLOAD_CANCEL";
    67 OP_OFFLOAD_STATUS "OFFLOAD_STATUS";
    68 OP_READ_PLUS "READ_PLUS";
    69 OP_SEEK "SEEK";
    70 OP_WRITE_SAME "WRITE_SAME";
    71 OP_CLONE "CLONE";
    72 OP_GETXATTR "GETXATTR";
    73 OP_SETXATTR "SETXATTR";
    74 OP_LISTXATTRS "LISTXATTRS";
    75 OP_REMOVEXATTR "REMOVEXATTR";
    10044 OP_ILLEGAL "ILLEGAL";
}

/// Where an operation may stand in a COMPOUND (RFC 8881 §2.10.6.3 and
/// each operation's description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Only after SEQUENCE: first in a COMPOUND it is NFS4ERR_OP_NOT_IN_SESSION.
    InSession,
    /// SEQUENCE itself: only first (elsewhere NFS4ERR_SEQUENCE_POS).
    First,
    /// May start a COMPOUND without SEQUENCE, but then must be its only
    /// operation (NFS4ERR_NOT_ONLY_OP): EXCHANGE_ID, CREATE_SESSION,
    /// BIND_CONN_TO_SESSION, DESTROY_SESSION, DESTROY_CLIENTID.
    SoleOrInSession,
}

/// One row of the operation table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    /// The operation number (the row's index in [`NFS4_OPERATIONS`] is `number - 3`).
    pub number: u32,
    /// The RFC name ("READ").
    pub name: &'static str,
    /// The first minor version that defines it (0, 1 or 2). An operation
    /// of a later minor version than the COMPOUND's is OP_ILLEGAL there.
    pub minor_min: u32,
    /// The last minor version that allows it: NFSv4.0 operations that
    /// NFSv4.1 made "mandatory not to implement" end at 0 and are
    /// NFS4ERR_NOTSUPP in later versions.
    pub minor_max: u32,
    /// Changes the file system: refused with NFS4ERR_ROFS on a read-only
    /// export (OPEN decides for itself: only a create or write access changes).
    pub mutates: bool,
    /// Works on the current file handle: NFS4ERR_NOFILEHANDLE without one.
    pub needs_fh: bool,
    /// Where it may stand.
    pub position: Position,
}

const fn op(number: u32, name: &'static str, minor_min: u32, mutates: bool, needs_fh: bool) -> OpInfo {
    OpInfo { number, name, minor_min, minor_max: u32::MAX, mutates, needs_fh, position: Position::InSession }
}

const fn obsolete(number: u32, name: &'static str) -> OpInfo {
    OpInfo {
        number,
        name,
        minor_min: 0,
        minor_max: 0,
        mutates: false,
        needs_fh: false,
        position: Position::InSession,
    }
}

const fn sessionless(number: u32, name: &'static str) -> OpInfo {
    OpInfo {
        number,
        name,
        minor_min: 1,
        minor_max: u32::MAX,
        mutates: false,
        needs_fh: false,
        position: Position::SoleOrInSession,
    }
}

/// Every operation of NFSv4.0–4.2 (and RFC 8276's extended attributes),
/// indexed by `number - 3`.
pub const NFS4_OPERATIONS: [OpInfo; 73] = [
    op(OP_ACCESS, "ACCESS", 0, false, true),
    op(OP_CLOSE, "CLOSE", 0, false, true),
    op(OP_COMMIT, "COMMIT", 0, false, true),
    op(OP_CREATE, "CREATE", 0, true, true),
    op(OP_DELEGPURGE, "DELEGPURGE", 0, false, false),
    op(OP_DELEGRETURN, "DELEGRETURN", 0, false, true),
    op(OP_GETATTR, "GETATTR", 0, false, true),
    op(OP_GETFH, "GETFH", 0, false, true),
    op(OP_LINK, "LINK", 0, true, true),
    op(OP_LOCK, "LOCK", 0, false, true),
    op(OP_LOCKT, "LOCKT", 0, false, true),
    op(OP_LOCKU, "LOCKU", 0, false, true),
    op(OP_LOOKUP, "LOOKUP", 0, false, true),
    op(OP_LOOKUPP, "LOOKUPP", 0, false, true),
    op(OP_NVERIFY, "NVERIFY", 0, false, true),
    op(OP_OPEN, "OPEN", 0, false, true),
    op(OP_OPENATTR, "OPENATTR", 0, false, true),
    obsolete(OP_OPEN_CONFIRM, "OPEN_CONFIRM"),
    op(OP_OPEN_DOWNGRADE, "OPEN_DOWNGRADE", 0, false, true),
    op(OP_PUTFH, "PUTFH", 0, false, false),
    op(OP_PUTPUBFH, "PUTPUBFH", 0, false, false),
    op(OP_PUTROOTFH, "PUTROOTFH", 0, false, false),
    op(OP_READ, "READ", 0, false, true),
    op(OP_READDIR, "READDIR", 0, false, true),
    op(OP_READLINK, "READLINK", 0, false, true),
    op(OP_REMOVE, "REMOVE", 0, true, true),
    op(OP_RENAME, "RENAME", 0, true, true),
    obsolete(OP_RENEW, "RENEW"),
    op(OP_RESTOREFH, "RESTOREFH", 0, false, false),
    op(OP_SAVEFH, "SAVEFH", 0, false, true),
    op(OP_SECINFO, "SECINFO", 0, false, true),
    op(OP_SETATTR, "SETATTR", 0, true, true),
    obsolete(OP_SETCLIENTID, "SETCLIENTID"),
    obsolete(OP_SETCLIENTID_CONFIRM, "SETCLIENTID_CONFIRM"),
    op(OP_VERIFY, "VERIFY", 0, false, true),
    op(OP_WRITE, "WRITE", 0, true, true),
    obsolete(OP_RELEASE_LOCKOWNER, "RELEASE_LOCKOWNER"),
    op(OP_BACKCHANNEL_CTL, "BACKCHANNEL_CTL", 1, false, false),
    sessionless(OP_BIND_CONN_TO_SESSION, "BIND_CONN_TO_SESSION"),
    sessionless(OP_EXCHANGE_ID, "EXCHANGE_ID"),
    sessionless(OP_CREATE_SESSION, "CREATE_SESSION"),
    sessionless(OP_DESTROY_SESSION, "DESTROY_SESSION"),
    op(OP_FREE_STATEID, "FREE_STATEID", 1, false, false),
    op(OP_GET_DIR_DELEGATION, "GET_DIR_DELEGATION", 1, false, true),
    op(OP_GETDEVICEINFO, "GETDEVICEINFO", 1, false, false),
    op(OP_GETDEVICELIST, "GETDEVICELIST", 1, false, true),
    op(OP_LAYOUTCOMMIT, "LAYOUTCOMMIT", 1, true, true),
    op(OP_LAYOUTGET, "LAYOUTGET", 1, false, true),
    op(OP_LAYOUTRETURN, "LAYOUTRETURN", 1, false, true),
    op(OP_SECINFO_NO_NAME, "SECINFO_NO_NAME", 1, false, true),
    OpInfo {
        number: OP_SEQUENCE,
        name: "SEQUENCE",
        minor_min: 1,
        minor_max: u32::MAX,
        mutates: false,
        needs_fh: false,
        position: Position::First,
    },
    op(OP_SET_SSV, "SET_SSV", 1, false, false),
    op(OP_TEST_STATEID, "TEST_STATEID", 1, false, false),
    op(OP_WANT_DELEGATION, "WANT_DELEGATION", 1, false, true),
    sessionless(OP_DESTROY_CLIENTID, "DESTROY_CLIENTID"),
    op(OP_RECLAIM_COMPLETE, "RECLAIM_COMPLETE", 1, false, false),
    op(OP_ALLOCATE, "ALLOCATE", 2, true, true),
    op(OP_COPY, "COPY", 2, true, true),
    op(OP_COPY_NOTIFY, "COPY_NOTIFY", 2, false, true),
    op(OP_DEALLOCATE, "DEALLOCATE", 2, true, true),
    op(OP_IO_ADVISE, "IO_ADVISE", 2, false, true),
    op(OP_LAYOUTERROR, "LAYOUTERROR", 2, false, true),
    op(OP_LAYOUTSTATS, "LAYOUTSTATS", 2, false, true),
    op(OP_OFFLOAD_CANCEL, "OFFLOAD_CANCEL", 2, false, true),
    op(OP_OFFLOAD_STATUS, "OFFLOAD_STATUS", 2, false, true),
    op(OP_READ_PLUS, "READ_PLUS", 2, false, true),
    op(OP_SEEK, "SEEK", 2, false, true),
    op(OP_WRITE_SAME, "WRITE_SAME", 2, true, true),
    op(OP_CLONE, "CLONE", 2, true, true),
    op(OP_GETXATTR, "GETXATTR", 2, false, true),
    op(OP_SETXATTR, "SETXATTR", 2, true, true),
    op(OP_LISTXATTRS, "LISTXATTRS", 2, false, true),
    op(OP_REMOVEXATTR, "REMOVEXATTR", 2, true, true),
];

/// The table row of operation `opnum`, or `None` for an undefined number (OP_ILLEGAL).
pub fn op_info(opnum: u32) -> Option<&'static OpInfo> {
    NFS4_OPERATIONS.get(opnum.checked_sub(3)? as usize)
}

/// The name of operation `opnum` ("ILLEGAL" for an undefined number).
pub fn op_name(opnum: u32) -> &'static str {
    op_info(opnum).map_or("ILLEGAL", |o| o.name)
}
