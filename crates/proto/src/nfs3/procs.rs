//! Arguments and results of the 22 NFSv3 procedures (RFC 1813 §3.3).
//!
//! Every result is an enum: [`Ok`](Read3Res::Ok) carries the RFC's `resok`
//! arm, [`Fail`](Read3Res::Fail) the error status and the `resfail` arm
//! (the attributes a server still reports on failure, so the client can
//! keep its cache coherent). Encoding writes the status word then the arm;
//! decoding picks the arm from the status.

use eagernfs_xdr::{decode_opaque, encode_opaque, xdr_struct, BufMut, Bytes, Decode, Encode, Error, Result};

use super::limits::MAX_IO_SIZE;
use super::types::*;
use crate::{decode_list, encode_list, opaque_len};

/// Size of the status word that precedes every result arm.
pub const NFS3_STATUS_LEN: usize = 4;

/// Generate a result enum `{ Ok(resok), Fail(status, resfail) }` and its codec.
macro_rules! nfs_res {
    (
        $(#[$meta:meta])*
        $name:ident { ok: $ok:ty, fail: $fail:ty $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            /// NFS3_OK and the result.
            Ok($ok),
            /// An error status (never [`Nfsstat3::Ok`]) and what the server
            /// still reports on failure.
            Fail(Nfsstat3, $fail),
        }

        impl $name {
            /// The status word this result is sent with.
            pub fn status(&self) -> Nfsstat3 {
                match self {
                    Self::Ok(_) => Nfsstat3::Ok,
                    Self::Fail(status, _) => *status,
                }
            }
        }

        impl From<$ok> for $name {
            fn from(ok: $ok) -> Self {
                Self::Ok(ok)
            }
        }

        impl Encode for $name {
            fn encode<B: BufMut>(&self, buf: &mut B) {
                match self {
                    Self::Ok(ok) => {
                        Nfsstat3::Ok.encode(buf);
                        ok.encode(buf);
                    }
                    Self::Fail(status, fail) => {
                        // A failure labelled OK is a server bug; sending it
                        // would make the client parse the fail arm as the
                        // ok arm, so say SERVERFAULT instead.
                        debug_assert!(!status.is_ok(), "{} failure with NFS3_OK status", stringify!($name));
                        let status = if status.is_ok() { Nfsstat3::Serverfault } else { *status };
                        status.encode(buf);
                        fail.encode(buf);
                    }
                }
            }
        }

        impl Decode for $name {
            fn decode(buf: &mut Bytes) -> Result<Self> {
                let status = Nfsstat3::decode(buf)?;
                if status.is_ok() {
                    Ok(Self::Ok(<$ok>::decode(buf)?))
                } else {
                    Ok(Self::Fail(status, <$fail>::decode(buf)?))
                }
            }
        }
    };
}

// ---------------------------------------------------------------- NULL (§3.3.0)

xdr_struct! {
    /// NULL arguments (RFC 1813 §3.3.0): none. The call only checks that
    /// the server answers.
    #[doc(alias = "NFSPROC3_NULL")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Null3Args {}
}

xdr_struct! {
    /// NULL result (RFC 1813 §3.3.0): none.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Null3Res {}
}

impl Null3Res {
    /// NULL always succeeds.
    pub fn status(&self) -> Nfsstat3 {
        Nfsstat3::Ok
    }
}

// ---------------------------------------------------------------- GETATTR (§3.3.1)

xdr_struct! {
    /// GETATTR arguments (RFC 1813 §3.3.1).
    #[doc(alias = "GETATTR3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Getattr3Args {
        /// The object whose attributes are wanted.
        pub object: NfsFh3,
    }
}

xdr_struct! {
    /// GETATTR success (RFC 1813 §3.3.1).
    #[doc(alias = "GETATTR3resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Getattr3ResOk {
        /// The object's attributes.
        pub obj_attributes: Fattr3,
    }
}

nfs_res! {
    /// GETATTR result (RFC 1813 §3.3.1). The failure arm is empty.
    #[doc(alias = "GETATTR3res")]
    Getattr3Res { ok: Getattr3ResOk, fail: () }
}

// ---------------------------------------------------------------- SETATTR (§3.3.2)

/// The ctime the client believes the object has; SETATTR fails with
/// NFS3ERR_NOT_SYNC if it differs (RFC 1813 §3.3.2, `sattrguard3`).
#[doc(alias = "sattrguard3")]
pub type Sattrguard3 = Option<Nfstime3>;

xdr_struct! {
    /// SETATTR arguments (RFC 1813 §3.3.2).
    #[doc(alias = "SETATTR3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Setattr3Args {
        /// The object to change.
        pub object: NfsFh3,
        /// The attributes to change.
        pub new_attributes: Sattr3,
        /// Apply only if the object's ctime equals this.
        pub guard: Sattrguard3,
    }
}

xdr_struct! {
    /// SETATTR success (RFC 1813 §3.3.2).
    #[doc(alias = "SETATTR3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Setattr3ResOk {
        /// The object's attributes before and after.
        pub obj_wcc: WccData,
    }
}

xdr_struct! {
    /// SETATTR failure (RFC 1813 §3.3.2).
    #[doc(alias = "SETATTR3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Setattr3ResFail {
        /// The object's attributes before and after.
        pub obj_wcc: WccData,
    }
}

nfs_res! {
    /// SETATTR result (RFC 1813 §3.3.2).
    #[doc(alias = "SETATTR3res")]
    Setattr3Res { ok: Setattr3ResOk, fail: Setattr3ResFail }
}

// ---------------------------------------------------------------- LOOKUP (§3.3.3)

xdr_struct! {
    /// LOOKUP arguments (RFC 1813 §3.3.3).
    #[doc(alias = "LOOKUP3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Lookup3Args {
        /// The directory and the name to find in it.
        pub what: Diropargs3,
    }
}

xdr_struct! {
    /// LOOKUP success (RFC 1813 §3.3.3).
    #[doc(alias = "LOOKUP3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Lookup3ResOk {
        /// The handle of the object found.
        pub object: NfsFh3,
        /// Its attributes.
        pub obj_attributes: PostOpAttr,
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
    }
}

xdr_struct! {
    /// LOOKUP failure (RFC 1813 §3.3.3).
    #[doc(alias = "LOOKUP3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Lookup3ResFail {
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// LOOKUP result (RFC 1813 §3.3.3).
    #[doc(alias = "LOOKUP3res")]
    Lookup3Res { ok: Lookup3ResOk, fail: Lookup3ResFail }
}

// ---------------------------------------------------------------- ACCESS (§3.3.4)

xdr_struct! {
    /// ACCESS arguments (RFC 1813 §3.3.4).
    #[doc(alias = "ACCESS3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Access3Args {
        /// The object to check.
        pub object: NfsFh3,
        /// The [`ACCESS3_*`](super::ACCESS3_READ) bits to check.
        pub access: u32,
    }
}

xdr_struct! {
    /// ACCESS success (RFC 1813 §3.3.4).
    #[doc(alias = "ACCESS3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Access3ResOk {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// The subset of the requested bits that the caller is granted.
        pub access: u32,
    }
}

xdr_struct! {
    /// ACCESS failure (RFC 1813 §3.3.4).
    #[doc(alias = "ACCESS3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Access3ResFail {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// ACCESS result (RFC 1813 §3.3.4).
    #[doc(alias = "ACCESS3res")]
    Access3Res { ok: Access3ResOk, fail: Access3ResFail }
}

// ---------------------------------------------------------------- READLINK (§3.3.5)

xdr_struct! {
    /// READLINK arguments (RFC 1813 §3.3.5).
    #[doc(alias = "READLINK3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readlink3Args {
        /// The symbolic link to read.
        pub symlink: NfsFh3,
    }
}

xdr_struct! {
    /// READLINK success (RFC 1813 §3.3.5).
    #[doc(alias = "READLINK3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readlink3ResOk {
        /// The link's attributes.
        pub symlink_attributes: PostOpAttr,
        /// The link's target.
        pub data: Nfspath3,
    }
}

xdr_struct! {
    /// READLINK failure (RFC 1813 §3.3.5).
    #[doc(alias = "READLINK3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readlink3ResFail {
        /// The link's attributes.
        pub symlink_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// READLINK result (RFC 1813 §3.3.5).
    #[doc(alias = "READLINK3res")]
    Readlink3Res { ok: Readlink3ResOk, fail: Readlink3ResFail }
}

// ---------------------------------------------------------------- READ (§3.3.6)

xdr_struct! {
    /// READ arguments (RFC 1813 §3.3.6).
    ///
    /// `count` is not bounded here: a client may ask for more than the
    /// server's `rtmax`, and the server answers with at most `rtmax` bytes.
    #[doc(alias = "READ3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Read3Args {
        /// The file to read.
        pub file: NfsFh3,
        /// Byte offset to start at.
        pub offset: u64,
        /// Number of bytes wanted.
        pub count: u32,
    }
}

/// READ success (RFC 1813 §3.3.6).
///
/// `data` is at most [`MAX_IO_SIZE`] bytes on decode and is a slice of the
/// receive buffer, not a copy.
#[doc(alias = "READ3resok")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Read3ResOk {
    /// The file's attributes after the read.
    pub file_attributes: PostOpAttr,
    /// Number of bytes read (normally `data.len()`; kept separately because
    /// it is a separate wire field).
    pub count: u32,
    /// The read reached the end of the file.
    pub eof: bool,
    /// The bytes read.
    pub data: Bytes,
}

impl Encode for Read3ResOk {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.file_attributes.encode(buf);
        self.count.encode(buf);
        self.eof.encode(buf);
        encode_opaque(buf, &self.data);
    }
}
impl Decode for Read3ResOk {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Read3ResOk {
            file_attributes: PostOpAttr::decode(buf)?,
            count: u32::decode(buf)?,
            eof: bool::decode(buf)?,
            data: decode_opaque(buf, MAX_IO_SIZE)?,
        })
    }
}

impl Read3ResOk {
    /// Encoded size of the success arm without the data bytes: the server
    /// can check a reply against its record-size limit before reading.
    pub fn header_len(file_attributes: &PostOpAttr) -> usize {
        post_op_attr_len(file_attributes) + 4 + 4 + 4
    }
}

xdr_struct! {
    /// READ failure (RFC 1813 §3.3.6).
    #[doc(alias = "READ3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Read3ResFail {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// READ result (RFC 1813 §3.3.6).
    #[doc(alias = "READ3res")]
    Read3Res { ok: Read3ResOk, fail: Read3ResFail }
}

// ---------------------------------------------------------------- WRITE (§3.3.7)

/// WRITE arguments (RFC 1813 §3.3.7).
///
/// Decoding refuses a `count` or a data length above [`MAX_IO_SIZE`]
/// ([`Error::TooLong`]) before touching the data. The two may differ on the
/// wire; RFC 1813 leaves that case to the server (which should use the
/// smaller, or answer NFS3ERR_INVAL), so both are kept.
#[doc(alias = "WRITE3args")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write3Args {
    /// The file to write.
    pub file: NfsFh3,
    /// Byte offset to start at.
    pub offset: u64,
    /// Number of bytes to write, as the client states it.
    pub count: u32,
    /// How durably the data must be stored before replying.
    pub stable: StableHow,
    /// The bytes, sliced from the receive buffer.
    pub data: Bytes,
}

impl Encode for Write3Args {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.file.encode(buf);
        self.offset.encode(buf);
        self.count.encode(buf);
        self.stable.encode(buf);
        encode_opaque(buf, &self.data);
    }
}
/// The part of [`Write3Args`] before the data: what a sender encodes
/// when it writes the data (its length word, the bytes and their padding)
/// from its own buffers instead of copying them into the record.
#[derive(Debug, Clone, Copy)]
pub struct Write3ArgsHead<'a>(pub &'a Write3Args);

impl Encode for Write3ArgsHead<'_> {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        let a = self.0;
        a.file.encode(buf);
        a.offset.encode(buf);
        a.count.encode(buf);
        a.stable.encode(buf);
    }
}

impl Decode for Write3Args {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        let file = NfsFh3::decode(buf)?;
        let offset = u64::decode(buf)?;
        let count = u32::decode(buf)?;
        if count as usize > MAX_IO_SIZE {
            return Err(Error::TooLong { len: count as usize, max: MAX_IO_SIZE });
        }
        let stable = StableHow::decode(buf)?;
        let data = decode_opaque(buf, MAX_IO_SIZE)?;
        Ok(Write3Args { file, offset, count, stable, data })
    }
}

xdr_struct! {
    /// WRITE success (RFC 1813 §3.3.7).
    #[doc(alias = "WRITE3resok")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Write3ResOk {
        /// The file's attributes before and after.
        pub file_wcc: WccData,
        /// Number of bytes written.
        pub count: u32,
        /// How durably they were stored (at least what was asked).
        pub committed: StableHow,
        /// The server's write verifier; a change tells the client to resend
        /// uncommitted data.
        pub verf: Writeverf3,
    }
}

xdr_struct! {
    /// WRITE failure (RFC 1813 §3.3.7).
    #[doc(alias = "WRITE3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Write3ResFail {
        /// The file's attributes before and after.
        pub file_wcc: WccData,
    }
}

nfs_res! {
    /// WRITE result (RFC 1813 §3.3.7).
    #[doc(alias = "WRITE3res")]
    Write3Res { ok: Write3ResOk, fail: Write3ResFail }
}

// ---------------------------------------------------------------- CREATE (§3.3.8)

xdr_struct! {
    /// CREATE arguments (RFC 1813 §3.3.8).
    #[doc(alias = "CREATE3args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Create3Args {
        /// The directory and the new file's name (RFC field `where`).
        pub where_: Diropargs3,
        /// The kind of creation and its attributes or verifier.
        pub how: Createhow3,
    }
}

/// Generate the shared `{ obj, obj_attributes, dir_wcc }` success arm and
/// `{ dir_wcc }` failure arm of CREATE, MKDIR, SYMLINK and MKNOD.
macro_rules! create_like_res {
    ($proc:literal, $section:literal, $ok:ident $ok_alias:literal, $fail:ident $fail_alias:literal, $res:ident $res_alias:literal) => {
        xdr_struct! {
            #[doc = concat!($proc, " success (RFC 1813 §", $section, ").")]
            #[doc(alias = $ok_alias)]
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $ok {
                /// The new object's handle.
                pub obj: PostOpFh3,
                /// The new object's attributes.
                pub obj_attributes: PostOpAttr,
                /// The directory's attributes before and after.
                pub dir_wcc: WccData,
            }
        }

        xdr_struct! {
            #[doc = concat!($proc, " failure (RFC 1813 §", $section, ").")]
            #[doc(alias = $fail_alias)]
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $fail {
                /// The directory's attributes before and after.
                pub dir_wcc: WccData,
            }
        }

        nfs_res! {
            #[doc = concat!($proc, " result (RFC 1813 §", $section, ").")]
            #[doc(alias = $res_alias)]
            $res { ok: $ok, fail: $fail }
        }
    };
}

create_like_res!("CREATE", "3.3.8", Create3ResOk "CREATE3resok", Create3ResFail "CREATE3resfail", Create3Res "CREATE3res");

// ---------------------------------------------------------------- MKDIR (§3.3.9)

xdr_struct! {
    /// MKDIR arguments (RFC 1813 §3.3.9).
    #[doc(alias = "MKDIR3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Mkdir3Args {
        /// The parent directory and the new directory's name (RFC field `where`).
        pub where_: Diropargs3,
        /// Initial attributes.
        pub attributes: Sattr3,
    }
}

create_like_res!("MKDIR", "3.3.9", Mkdir3ResOk "MKDIR3resok", Mkdir3ResFail "MKDIR3resfail", Mkdir3Res "MKDIR3res");

// ---------------------------------------------------------------- SYMLINK (§3.3.10)

xdr_struct! {
    /// SYMLINK arguments (RFC 1813 §3.3.10).
    #[doc(alias = "SYMLINK3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Symlink3Args {
        /// The directory and the link's name (RFC field `where`).
        pub where_: Diropargs3,
        /// The link's attributes and target.
        pub symlink: Symlinkdata3,
    }
}

create_like_res!("SYMLINK", "3.3.10", Symlink3ResOk "SYMLINK3resok", Symlink3ResFail "SYMLINK3resfail", Symlink3Res "SYMLINK3res");

// ---------------------------------------------------------------- MKNOD (§3.3.11)

xdr_struct! {
    /// MKNOD arguments (RFC 1813 §3.3.11).
    #[doc(alias = "MKNOD3args")]
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Mknod3Args {
        /// The directory and the new node's name (RFC field `where`).
        pub where_: Diropargs3,
        /// The kind of node and its attributes.
        pub what: Mknoddata3,
    }
}

create_like_res!("MKNOD", "3.3.11", Mknod3ResOk "MKNOD3resok", Mknod3ResFail "MKNOD3resfail", Mknod3Res "MKNOD3res");

// ---------------------------------------------------------------- REMOVE (§3.3.12), RMDIR (§3.3.13)

/// Generate the `{ object: diropargs3 }` arguments and `{ dir_wcc }` result
/// arms shared by REMOVE and RMDIR.
macro_rules! remove_like {
    ($proc:literal, $section:literal, $args:ident $args_alias:literal, $ok:ident $ok_alias:literal, $fail:ident $fail_alias:literal, $res:ident $res_alias:literal) => {
        xdr_struct! {
            #[doc = concat!($proc, " arguments (RFC 1813 §", $section, ").")]
            #[doc(alias = $args_alias)]
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $args {
                /// The directory and the name to remove from it.
                pub object: Diropargs3,
            }
        }

        xdr_struct! {
            #[doc = concat!($proc, " success (RFC 1813 §", $section, ").")]
            #[doc(alias = $ok_alias)]
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $ok {
                /// The directory's attributes before and after.
                pub dir_wcc: WccData,
            }
        }

        xdr_struct! {
            #[doc = concat!($proc, " failure (RFC 1813 §", $section, ").")]
            #[doc(alias = $fail_alias)]
            #[derive(Debug, Clone, PartialEq, Eq, Default)]
            pub struct $fail {
                /// The directory's attributes before and after.
                pub dir_wcc: WccData,
            }
        }

        nfs_res! {
            #[doc = concat!($proc, " result (RFC 1813 §", $section, ").")]
            #[doc(alias = $res_alias)]
            $res { ok: $ok, fail: $fail }
        }
    };
}

remove_like!(
    "REMOVE", "3.3.12", Remove3Args "REMOVE3args", Remove3ResOk "REMOVE3resok", Remove3ResFail "REMOVE3resfail", Remove3Res "REMOVE3res"
);
remove_like!(
    "RMDIR", "3.3.13", Rmdir3Args "RMDIR3args", Rmdir3ResOk "RMDIR3resok", Rmdir3ResFail "RMDIR3resfail", Rmdir3Res "RMDIR3res"
);

// ---------------------------------------------------------------- RENAME (§3.3.14)

xdr_struct! {
    /// RENAME arguments (RFC 1813 §3.3.14).
    #[doc(alias = "RENAME3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename3Args {
        /// The source directory and name.
        pub from: Diropargs3,
        /// The target directory and name.
        pub to: Diropargs3,
    }
}

xdr_struct! {
    /// RENAME success (RFC 1813 §3.3.14).
    #[doc(alias = "RENAME3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename3ResOk {
        /// The source directory's attributes before and after.
        pub fromdir_wcc: WccData,
        /// The target directory's attributes before and after.
        pub todir_wcc: WccData,
    }
}

xdr_struct! {
    /// RENAME failure (RFC 1813 §3.3.14).
    #[doc(alias = "RENAME3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Rename3ResFail {
        /// The source directory's attributes before and after.
        pub fromdir_wcc: WccData,
        /// The target directory's attributes before and after.
        pub todir_wcc: WccData,
    }
}

nfs_res! {
    /// RENAME result (RFC 1813 §3.3.14).
    #[doc(alias = "RENAME3res")]
    Rename3Res { ok: Rename3ResOk, fail: Rename3ResFail }
}

// ---------------------------------------------------------------- LINK (§3.3.15)

xdr_struct! {
    /// LINK arguments (RFC 1813 §3.3.15).
    #[doc(alias = "LINK3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Link3Args {
        /// The existing file.
        pub file: NfsFh3,
        /// The directory and name of the new link.
        pub link: Diropargs3,
    }
}

xdr_struct! {
    /// LINK success (RFC 1813 §3.3.15).
    #[doc(alias = "LINK3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Link3ResOk {
        /// The file's attributes (its link count changed).
        pub file_attributes: PostOpAttr,
        /// The directory's attributes before and after.
        pub linkdir_wcc: WccData,
    }
}

xdr_struct! {
    /// LINK failure (RFC 1813 §3.3.15).
    #[doc(alias = "LINK3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Link3ResFail {
        /// The file's attributes.
        pub file_attributes: PostOpAttr,
        /// The directory's attributes before and after.
        pub linkdir_wcc: WccData,
    }
}

nfs_res! {
    /// LINK result (RFC 1813 §3.3.15).
    #[doc(alias = "LINK3res")]
    Link3Res { ok: Link3ResOk, fail: Link3ResFail }
}

// ---------------------------------------------------------------- READDIR (§3.3.16)

xdr_struct! {
    /// READDIR arguments (RFC 1813 §3.3.16).
    #[doc(alias = "READDIR3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdir3Args {
        /// The directory to list.
        pub dir: NfsFh3,
        /// Where to continue (0 for the start).
        pub cookie: Cookie3,
        /// The verifier returned with `cookie` (zeros for the start).
        pub cookieverf: Cookieverf3,
        /// Upper bound, in bytes, on the encoded [`Readdir3ResOk`]; see
        /// [`Readdir3ResOk::fixed_len`] for how to fill it.
        pub count: u32,
    }
}

xdr_struct! {
    /// One READDIR entry (RFC 1813 §3.3.16, `entry3`).
    ///
    /// On the wire an entry is preceded by a `value_follows` word (the list
    /// is linked); the codec of this struct writes only the entry itself,
    /// [`Entry3::encoded_len`] counts both.
    #[doc(alias = "entry3")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Entry3 {
        /// The entry's file number.
        pub fileid: Fileid3,
        /// The entry's name.
        pub name: Filename3,
        /// Where to continue after this entry.
        pub cookie: Cookie3,
    }
}

impl Entry3 {
    /// Exact bytes this entry adds to a READDIR reply: the `value_follows`
    /// word, fileid, name (length, bytes, padding) and cookie.
    pub fn encoded_len(&self) -> usize {
        entry3_len(self.name.len())
    }
}

/// Bytes an `entry3` with a `name_len`-byte name takes, with its
/// `value_follows` word.
fn entry3_len(name_len: usize) -> usize {
    4 + 8 + opaque_len(name_len) + 8
}

/// A READDIR entry list and the end-of-directory flag (RFC 1813 §3.3.16, `dirlist3`).
#[doc(alias = "dirlist3")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dirlist3 {
    /// The entries, in directory order.
    pub entries: Vec<Entry3>,
    /// No entries follow the last one.
    pub eof: bool,
}

impl Encode for Dirlist3 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_list(buf, &self.entries);
        self.eof.encode(buf);
    }
}
impl Decode for Dirlist3 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Dirlist3 { entries: decode_list(buf)?, eof: bool::decode(buf)? })
    }
}

xdr_struct! {
    /// READDIR success (RFC 1813 §3.3.16).
    #[doc(alias = "READDIR3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdir3ResOk {
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
        /// The verifier to send back with any cookie from this reply.
        pub cookieverf: Cookieverf3,
        /// The entries.
        pub reply: Dirlist3,
    }
}

impl Readdir3ResOk {
    /// Bytes of a `READDIR3resok` with no entries: the directory
    /// attributes, the cookie verifier, the list-terminating
    /// `value_follows = false` word and `eof`. That is 104 bytes with
    /// attributes, 20 without.
    ///
    /// To fill a reply within the client's `count`, start from this (plus
    /// [`NFS3_STATUS_LEN`] if the status word is to be counted too, the safe
    /// reading) and add entries while the running total plus
    /// [`Entry3::encoded_len`] stays within `count`. If not even the first
    /// entry fits, answer NFS3ERR_TOOSMALL.
    pub fn fixed_len(dir_attributes: &PostOpAttr) -> usize {
        post_op_attr_len(dir_attributes) + 8 + 4 + 4
    }

    /// Exact encoded size of this success arm (without the status word).
    pub fn encoded_len(&self) -> usize {
        Self::fixed_len(&self.dir_attributes)
            + self.reply.entries.iter().map(Entry3::encoded_len).sum::<usize>()
    }
}

xdr_struct! {
    /// READDIR failure (RFC 1813 §3.3.16).
    #[doc(alias = "READDIR3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdir3ResFail {
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// READDIR result (RFC 1813 §3.3.16).
    #[doc(alias = "READDIR3res")]
    Readdir3Res { ok: Readdir3ResOk, fail: Readdir3ResFail }
}

// ---------------------------------------------------------------- READDIRPLUS (§3.3.17)

xdr_struct! {
    /// READDIRPLUS arguments (RFC 1813 §3.3.17).
    #[doc(alias = "READDIRPLUS3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdirplus3Args {
        /// The directory to list.
        pub dir: NfsFh3,
        /// Where to continue (0 for the start).
        pub cookie: Cookie3,
        /// The verifier returned with `cookie` (zeros for the start).
        pub cookieverf: Cookieverf3,
        /// Upper bound on the directory information alone (fileids, names,
        /// cookies), in bytes; see [`Entryplus3::dircount_len`].
        pub dircount: u32,
        /// Upper bound on the whole encoded [`Readdirplus3ResOk`], in bytes.
        pub maxcount: u32,
    }
}

xdr_struct! {
    /// One READDIRPLUS entry (RFC 1813 §3.3.17, `entryplus3`).
    ///
    /// As with [`Entry3`], the codec writes the entry without its leading
    /// `value_follows` word; [`Entryplus3::encoded_len`] counts both.
    #[doc(alias = "entryplus3")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Entryplus3 {
        /// The entry's file number.
        pub fileid: Fileid3,
        /// The entry's name.
        pub name: Filename3,
        /// Where to continue after this entry.
        pub cookie: Cookie3,
        /// The entry's attributes.
        pub name_attributes: PostOpAttr,
        /// The entry's handle.
        pub name_handle: PostOpFh3,
    }
}

impl Entryplus3 {
    /// Exact bytes this entry adds to a READDIRPLUS reply (budget against
    /// `maxcount`): the `value_follows` word, fileid, name, cookie,
    /// attributes and handle.
    pub fn encoded_len(&self) -> usize {
        entry3_len(self.name.len())
            + post_op_attr_len(&self.name_attributes)
            + post_op_fh3_len(&self.name_handle)
    }

    /// Bytes this entry counts against `dircount`: the same entry as
    /// READDIR would send ([`Entry3::encoded_len`]), since RFC 1813 says
    /// `dircount` excludes the attributes and handle.
    pub fn dircount_len(&self) -> usize {
        entry3_len(self.name.len())
    }
}

/// A READDIRPLUS entry list and the end-of-directory flag (RFC 1813 §3.3.17, `dirlistplus3`).
#[doc(alias = "dirlistplus3")]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dirlistplus3 {
    /// The entries, in directory order.
    pub entries: Vec<Entryplus3>,
    /// No entries follow the last one.
    pub eof: bool,
}

impl Encode for Dirlistplus3 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        encode_list(buf, &self.entries);
        self.eof.encode(buf);
    }
}
impl Decode for Dirlistplus3 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(Dirlistplus3 { entries: decode_list(buf)?, eof: bool::decode(buf)? })
    }
}

xdr_struct! {
    /// READDIRPLUS success (RFC 1813 §3.3.17).
    #[doc(alias = "READDIRPLUS3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdirplus3ResOk {
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
        /// The verifier to send back with any cookie from this reply.
        pub cookieverf: Cookieverf3,
        /// The entries.
        pub reply: Dirlistplus3,
    }
}

impl Readdirplus3ResOk {
    /// Bytes of a `READDIRPLUS3resok` with no entries (same layout as
    /// [`Readdir3ResOk::fixed_len`]: 104 bytes with attributes, 20 without).
    ///
    /// Fill a reply by adding entries while both the running total of
    /// `fixed_len + Σ` [`Entryplus3::encoded_len`] stays within `maxcount`
    /// and `Σ` [`Entryplus3::dircount_len`] stays within `dircount`.
    pub fn fixed_len(dir_attributes: &PostOpAttr) -> usize {
        post_op_attr_len(dir_attributes) + 8 + 4 + 4
    }

    /// Exact encoded size of this success arm (without the status word).
    pub fn encoded_len(&self) -> usize {
        Self::fixed_len(&self.dir_attributes)
            + self.reply.entries.iter().map(Entryplus3::encoded_len).sum::<usize>()
    }
}

xdr_struct! {
    /// READDIRPLUS failure (RFC 1813 §3.3.17).
    #[doc(alias = "READDIRPLUS3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Readdirplus3ResFail {
        /// The directory's attributes.
        pub dir_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// READDIRPLUS result (RFC 1813 §3.3.17).
    #[doc(alias = "READDIRPLUS3res")]
    Readdirplus3Res { ok: Readdirplus3ResOk, fail: Readdirplus3ResFail }
}

// ---------------------------------------------------------------- FSSTAT (§3.3.18)

xdr_struct! {
    /// FSSTAT arguments (RFC 1813 §3.3.18).
    #[doc(alias = "FSSTAT3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsstat3Args {
        /// Any handle in the file system.
        pub fsroot: NfsFh3,
    }
}

xdr_struct! {
    /// FSSTAT success (RFC 1813 §3.3.18): space and file counts.
    #[doc(alias = "FSSTAT3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsstat3ResOk {
        /// The file system root's attributes.
        pub obj_attributes: PostOpAttr,
        /// Total size in bytes.
        pub tbytes: u64,
        /// Free bytes.
        pub fbytes: u64,
        /// Free bytes available to the caller.
        pub abytes: u64,
        /// Total file slots.
        pub tfiles: u64,
        /// Free file slots.
        pub ffiles: u64,
        /// Free file slots available to the caller.
        pub afiles: u64,
        /// Seconds for which these values will not change (0 = volatile).
        pub invarsec: u32,
    }
}

xdr_struct! {
    /// FSSTAT failure (RFC 1813 §3.3.18).
    #[doc(alias = "FSSTAT3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsstat3ResFail {
        /// The file system root's attributes.
        pub obj_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// FSSTAT result (RFC 1813 §3.3.18).
    #[doc(alias = "FSSTAT3res")]
    Fsstat3Res { ok: Fsstat3ResOk, fail: Fsstat3ResFail }
}

// ---------------------------------------------------------------- FSINFO (§3.3.19)

xdr_struct! {
    /// FSINFO arguments (RFC 1813 §3.3.19).
    #[doc(alias = "FSINFO3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsinfo3Args {
        /// Any handle in the file system (normally the mount root).
        pub fsroot: NfsFh3,
    }
}

xdr_struct! {
    /// FSINFO success (RFC 1813 §3.3.19): the server's static limits and
    /// preferences, which clients use to size their READ/WRITE/READDIR calls.
    #[doc(alias = "FSINFO3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsinfo3ResOk {
        /// The file system root's attributes.
        pub obj_attributes: PostOpAttr,
        /// Largest READ the server answers in full, in bytes.
        pub rtmax: u32,
        /// Preferred READ size, in bytes.
        pub rtpref: u32,
        /// Suggested multiple for READ sizes, in bytes.
        pub rtmult: u32,
        /// Largest WRITE the server accepts, in bytes.
        pub wtmax: u32,
        /// Preferred WRITE size, in bytes.
        pub wtpref: u32,
        /// Suggested multiple for WRITE sizes, in bytes.
        pub wtmult: u32,
        /// Preferred READDIR `count`, in bytes.
        pub dtpref: u32,
        /// Largest file size, in bytes.
        pub maxfilesize: u64,
        /// Granularity of the server's time stamps.
        pub time_delta: Nfstime3,
        /// [`FSF3_*`](super::FSF3_LINK) property bits.
        pub properties: u32,
    }
}

xdr_struct! {
    /// FSINFO failure (RFC 1813 §3.3.19).
    #[doc(alias = "FSINFO3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Fsinfo3ResFail {
        /// The file system root's attributes.
        pub obj_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// FSINFO result (RFC 1813 §3.3.19).
    #[doc(alias = "FSINFO3res")]
    Fsinfo3Res { ok: Fsinfo3ResOk, fail: Fsinfo3ResFail }
}

// ---------------------------------------------------------------- PATHCONF (§3.3.20)

xdr_struct! {
    /// PATHCONF arguments (RFC 1813 §3.3.20).
    #[doc(alias = "PATHCONF3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Pathconf3Args {
        /// The object to ask about.
        pub object: NfsFh3,
    }
}

xdr_struct! {
    /// PATHCONF success (RFC 1813 §3.3.20): POSIX pathconf values.
    #[doc(alias = "PATHCONF3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Pathconf3ResOk {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
        /// Maximum number of hard links.
        pub linkmax: u32,
        /// Maximum name length, in bytes.
        pub name_max: u32,
        /// Longer names are refused rather than truncated.
        pub no_trunc: bool,
        /// Only a privileged user may change a file's owner.
        pub chown_restricted: bool,
        /// Names that differ only in case are the same name.
        pub case_insensitive: bool,
        /// The case of names is kept as given.
        pub case_preserving: bool,
    }
}

xdr_struct! {
    /// PATHCONF failure (RFC 1813 §3.3.20).
    #[doc(alias = "PATHCONF3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Pathconf3ResFail {
        /// The object's attributes.
        pub obj_attributes: PostOpAttr,
    }
}

nfs_res! {
    /// PATHCONF result (RFC 1813 §3.3.20).
    #[doc(alias = "PATHCONF3res")]
    Pathconf3Res { ok: Pathconf3ResOk, fail: Pathconf3ResFail }
}

// ---------------------------------------------------------------- COMMIT (§3.3.21)

xdr_struct! {
    /// COMMIT arguments (RFC 1813 §3.3.21).
    #[doc(alias = "COMMIT3args")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Commit3Args {
        /// The file to flush.
        pub file: NfsFh3,
        /// Start of the range, in bytes.
        pub offset: u64,
        /// Length of the range in bytes (0 = to the end of the file).
        pub count: u32,
    }
}

xdr_struct! {
    /// COMMIT success (RFC 1813 §3.3.21).
    #[doc(alias = "COMMIT3resok")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Commit3ResOk {
        /// The file's attributes before and after.
        pub file_wcc: WccData,
        /// The write verifier; if it differs from the one WRITE returned,
        /// the client must resend its unstable data.
        pub verf: Writeverf3,
    }
}

xdr_struct! {
    /// COMMIT failure (RFC 1813 §3.3.21).
    #[doc(alias = "COMMIT3resfail")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Commit3ResFail {
        /// The file's attributes before and after.
        pub file_wcc: WccData,
    }
}

nfs_res! {
    /// COMMIT result (RFC 1813 §3.3.21).
    #[doc(alias = "COMMIT3res")]
    Commit3Res { ok: Commit3ResOk, fail: Commit3ResFail }
}
