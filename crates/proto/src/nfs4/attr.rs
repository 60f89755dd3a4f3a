//! File attributes (RFC 8881 §5): their numbers, and [`FileAttrs`], which
//! turns a `fattr4` (a bitmap and the values of the set bits, in bit order)
//! into typed fields and back.
//!
//! [`FileAttrs`] models more attributes than a server need support, so a
//! request naming one it does not support can be answered
//! NFS4ERR_ATTRNOTSUPP rather than NFS4ERR_BADXDR; an attribute it does not
//! model at all (ACLs, quotas, layouts, …) cannot be skipped, since its
//! length is unknown, and decoding reports it as [`AttrError::Unknown`].

use eagernfs_xdr::{BufMut, Bytes, Decode, Encode, Error, Opaque};

use super::types::*;

/// Why a `fattr4` did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttrError {
    /// An attribute this crate does not model: its value cannot be skipped.
    #[error("attribute {0} is not supported")]
    Unknown(u32),
    /// The values do not decode, or bytes remain after them.
    #[error("attribute values do not decode: {0}")]
    Xdr(#[from] Error),
}

macro_rules! attributes {
    ($( $num:literal $konst:ident $field:ident : $ty:ty; )*) => {
        $(
            #[doc = concat!("Attribute number of `", stringify!($field), "`.")]
            pub const $konst: u32 = $num;
        )*

        /// Typed attribute values; `None` means absent from the bitmap.
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct FileAttrs {
            $( pub $field: Option<$ty>, )*
        }

        /// Every attribute [`FileAttrs`] models, in ascending order.
        pub const MODELLED: &[u32] = &[$($num),*];

        /// Bytes [`FileAttrs::to_fattr`] reserves for the values.
        const FATTR_VALS_BYTES_TYPICAL: usize = 256;

        impl FileAttrs {
            /// The bitmap of the attributes present.
            pub fn mask(&self) -> Bitmap4 {
                let mut b = Bitmap4::default();
                $( if self.$field.is_some() { b.set($num); } )*
                b
            }

            /// The values of the attributes present, in bit order.
            pub fn encode_values<B: BufMut>(&self, buf: &mut B) {
                $( if let Some(v) = &self.$field { v.encode(buf); } )*
            }

            /// The `fattr4` of the attributes present.
            pub fn to_fattr(&self) -> Fattr4 {
                // Room for what a READDIR entry or a GETATTR carries (type,
                // sizes, ids, owners, times, a handle): growing from empty
                // costs five reallocations per entry (issue 34's profile).
                let mut vals = Vec::with_capacity(FATTR_VALS_BYTES_TYPICAL);
                self.encode_values(&mut vals);
                Fattr4 { attrmask: self.mask(), attr_vals: Opaque(Bytes::from(vals)) }
            }

            /// Decode a `fattr4`. Every byte of its values must be used.
            pub fn from_fattr(f: &Fattr4) -> Result<FileAttrs, AttrError> {
                let mut a = FileAttrs::default();
                let mut buf = f.attr_vals.0.clone();
                for n in f.attrmask.iter() {
                    match n {
                        $( $num => a.$field = Some(<$ty>::decode(&mut buf)?), )*
                        n => return Err(AttrError::Unknown(n)),
                    }
                }
                if !buf.is_empty() {
                    return Err(AttrError::Xdr(Error::Trailing(buf.len())));
                }
                Ok(a)
            }
        }
    };
}

eagernfs_xdr::xdr_struct! {
    /// What OPEN supports (`open_arguments4`, RFC 9754 §3): each bitmap has bit
    /// `n` set for the value `n` of its kind (`open_args_share_access4`, …,
    /// `open_args_createmode4`) the server accepts.
    #[doc(alias = "open_arguments4")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct OpenArguments4 {
        pub oa_share_access: Bitmap4,
        pub oa_share_deny: Bitmap4,
        pub oa_share_access_want: Bitmap4,
        pub oa_open_claim: Bitmap4,
        pub oa_create_mode: Bitmap4,
    }
}

eagernfs_xdr::xdr_struct! {
    /// Mode bits to change under a mask (`mode_masked4`).
    #[doc(alias = "mode_masked4")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct ModeMasked4 { pub value_to_set: u32, pub mask_bits: u32 }
}

attributes! {
    0 FATTR4_SUPPORTED_ATTRS supported_attrs: Bitmap4;
    1 FATTR4_TYPE ftype: NfsFtype4;
    2 FATTR4_FH_EXPIRE_TYPE fh_expire_type: u32;
    3 FATTR4_CHANGE change: u64;
    4 FATTR4_SIZE size: u64;
    5 FATTR4_LINK_SUPPORT link_support: bool;
    6 FATTR4_SYMLINK_SUPPORT symlink_support: bool;
    7 FATTR4_NAMED_ATTR named_attr: bool;
    8 FATTR4_FSID fsid: Fsid4;
    9 FATTR4_UNIQUE_HANDLES unique_handles: bool;
    10 FATTR4_LEASE_TIME lease_time: u32;
    11 FATTR4_RDATTR_ERROR rdattr_error: Nfsstat4;
    13 FATTR4_ACLSUPPORT aclsupport: u32;
    14 FATTR4_ARCHIVE archive: bool;
    15 FATTR4_CANSETTIME cansettime: bool;
    16 FATTR4_CASE_INSENSITIVE case_insensitive: bool;
    17 FATTR4_CASE_PRESERVING case_preserving: bool;
    18 FATTR4_CHOWN_RESTRICTED chown_restricted: bool;
    19 FATTR4_FILEHANDLE filehandle: NfsFh4;
    20 FATTR4_FILEID fileid: u64;
    21 FATTR4_FILES_AVAIL files_avail: u64;
    22 FATTR4_FILES_FREE files_free: u64;
    23 FATTR4_FILES_TOTAL files_total: u64;
    25 FATTR4_HIDDEN hidden: bool;
    26 FATTR4_HOMOGENEOUS homogeneous: bool;
    27 FATTR4_MAXFILESIZE maxfilesize: u64;
    28 FATTR4_MAXLINK maxlink: u32;
    29 FATTR4_MAXNAME maxname: u32;
    30 FATTR4_MAXREAD maxread: u64;
    31 FATTR4_MAXWRITE maxwrite: u64;
    33 FATTR4_MODE mode: u32;
    34 FATTR4_NO_TRUNC no_trunc: bool;
    35 FATTR4_NUMLINKS numlinks: u32;
    36 FATTR4_OWNER owner: Utf8Str;
    37 FATTR4_OWNER_GROUP owner_group: Utf8Str;
    38 FATTR4_QUOTA_AVAIL_HARD quota_avail_hard: u64;
    39 FATTR4_QUOTA_AVAIL_SOFT quota_avail_soft: u64;
    40 FATTR4_QUOTA_USED quota_used: u64;
    41 FATTR4_RAWDEV rawdev: Specdata4;
    42 FATTR4_SPACE_AVAIL space_avail: u64;
    43 FATTR4_SPACE_FREE space_free: u64;
    44 FATTR4_SPACE_TOTAL space_total: u64;
    45 FATTR4_SPACE_USED space_used: u64;
    46 FATTR4_SYSTEM system: bool;
    47 FATTR4_TIME_ACCESS time_access: Nfstime4;
    48 FATTR4_TIME_ACCESS_SET time_access_set: Settime4;
    49 FATTR4_TIME_BACKUP time_backup: Nfstime4;
    50 FATTR4_TIME_CREATE time_create: Nfstime4;
    51 FATTR4_TIME_DELTA time_delta: Nfstime4;
    52 FATTR4_TIME_METADATA time_metadata: Nfstime4;
    53 FATTR4_TIME_MODIFY time_modify: Nfstime4;
    54 FATTR4_TIME_MODIFY_SET time_modify_set: Settime4;
    55 FATTR4_MOUNTED_ON_FILEID mounted_on_fileid: u64;
    74 FATTR4_MODE_SET_MASKED mode_set_masked: ModeMasked4;
    75 FATTR4_SUPPATTR_EXCLCREAT suppattr_exclcreat: Bitmap4;
    77 FATTR4_CLONE_BLKSIZE clone_blksize: u32;
    79 FATTR4_CHANGE_ATTR_TYPE change_attr_type: u32;
    82 FATTR4_XATTR_SUPPORT xattr_support: bool;
    84 FATTR4_TIME_DELEG_ACCESS time_deleg_access: Nfstime4;
    85 FATTR4_TIME_DELEG_MODIFY time_deleg_modify: Nfstime4;
    86 FATTR4_OPEN_ARGUMENTS open_arguments: OpenArguments4;
}

/// `open_args_share_access_want4`: bit numbers in `oa_share_access_want` (RFC 9754 §3).
pub mod open_args_want {
    /// OPEN4_SHARE_ACCESS_WANT_ANY_DELEG.
    pub const ANY_DELEG: u32 = 3;
    /// OPEN4_SHARE_ACCESS_WANT_NO_DELEG.
    pub const NO_DELEG: u32 = 4;
    /// OPEN4_SHARE_ACCESS_WANT_CANCEL.
    pub const CANCEL: u32 = 5;
    /// OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL.
    pub const SIGNAL_DELEG_WHEN_RESRC_AVAIL: u32 = 17;
    /// OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED.
    pub const PUSH_DELEG_WHEN_UNCONTENDED: u32 = 18;
    /// OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS.
    pub const DELEG_TIMESTAMPS: u32 = 20;
    /// OPEN4_SHARE_ACCESS_WANT_OPEN_XOR_DELEGATION.
    pub const OPEN_XOR_DELEGATION: u32 = 21;
}

/// The attributes that answer NFSv3's FSSTAT: space and file counts.
pub const FATTR4_FSSTAT: [u32; 6] = [
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
];

/// Attribute number of `acl` (not modelled).
pub const FATTR4_ACL: u32 = 12;
/// Attribute number of `fs_locations` (not modelled).
pub const FATTR4_FS_LOCATIONS: u32 = 24;
/// Attribute number of `mimetype` (not modelled).
pub const FATTR4_MIMETYPE: u32 = 32;

/// `fh_expire_type`: handles never expire.
pub const FH4_PERSISTENT: u32 = 0;
/// `change_attr_type`: the change attribute is a counter that only grows.
pub const NFS4_CHANGE_TYPE_IS_MONOTONIC_INCR: u32 = 0;
/// `change_attr_type`: the change attribute is a version counter.
pub const NFS4_CHANGE_TYPE_IS_VERSION_COUNTER: u32 = 1;
/// `change_attr_type`: the change attribute is derived from the ctime.
pub const NFS4_CHANGE_TYPE_IS_TIME_METADATA: u32 = 3;

/// Attributes a client may only read: SETATTR naming one is NFS4ERR_INVAL.
pub fn is_read_only(attr: u32) -> bool {
    !matches!(
        attr,
        FATTR4_SIZE
            | FATTR4_ACL
            | FATTR4_ARCHIVE
            | FATTR4_HIDDEN
            | FATTR4_MIMETYPE
            | FATTR4_MODE
            | FATTR4_OWNER
            | FATTR4_OWNER_GROUP
            | FATTR4_SYSTEM
            | FATTR4_TIME_ACCESS_SET
            | FATTR4_TIME_BACKUP
            | FATTR4_TIME_CREATE
            | FATTR4_TIME_MODIFY_SET
            | FATTR4_MODE_SET_MASKED
            | FATTR4_TIME_DELEG_ACCESS
            | FATTR4_TIME_DELEG_MODIFY
    ) && attr != 58 // dacl
        && attr != 59 // sacl
        && attr != 70 // retention_set
        && attr != 72 // retentevt_set
        && attr != 73 // retention_hold
        && attr != 80 // sec_label
}

/// Attributes a client may only write (SETATTR); GETATTR never returns them.
pub fn is_write_only(attr: u32) -> bool {
    matches!(attr, FATTR4_TIME_ACCESS_SET | FATTR4_TIME_MODIFY_SET | FATTR4_MODE_SET_MASKED)
}

impl From<AttrError> for Nfsstat4 {
    /// The status a server answers a request whose attributes did not decode with.
    fn from(e: AttrError) -> Nfsstat4 {
        match e {
            AttrError::Unknown(_) => Nfsstat4::Attrnotsupp,
            AttrError::Xdr(_) => Nfsstat4::Badxdr,
        }
    }
}

impl FileAttrs {
    /// Decode `f` and keep nothing outside `f`'s bitmap: convenience for tests.
    pub fn decode_bytes(mask: &Bitmap4, vals: &[u8]) -> Result<FileAttrs, AttrError> {
        FileAttrs::from_fattr(&Fattr4 {
            attrmask: mask.clone(),
            attr_vals: Opaque(Bytes::copy_from_slice(vals)),
        })
    }
}
