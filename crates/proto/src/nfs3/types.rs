//! NFSv3 data types shared by several procedures (RFC 1813 §2.5 and §2.6).

use eagernfs_xdr::{xdr_enum, xdr_struct, BufMut, Bytes, Decode, Encode, Opaque, Result};

use super::limits::{
    NFS3_COOKIEVERFSIZE, NFS3_CREATEVERFSIZE, NFS3_FHSIZE, NFS3_NAME_MAX, NFS3_PATH_MAX, NFS3_WRITEVERFSIZE,
};

/// A file name component (`filename3`), at most [`NFS3_NAME_MAX`] bytes.
///
/// RFC 1813 leaves `filename3` unbounded; we refuse longer names at decode
/// time because no server file system accepts them and the bound keeps a
/// forged length from costing anything.
#[doc(alias = "filename3")]
pub type Filename3 = Opaque<NFS3_NAME_MAX>;

/// A symbolic link's target (`nfspath3`), at most [`NFS3_PATH_MAX`] bytes.
#[doc(alias = "nfspath3")]
pub type Nfspath3 = Opaque<NFS3_PATH_MAX>;

/// A position in a directory, opaque to the client (`cookie3`).
#[doc(alias = "cookie3")]
pub type Cookie3 = u64;
/// The server's proof that a cookie is still valid (`cookieverf3`).
#[doc(alias = "cookieverf3")]
pub type Cookieverf3 = [u8; NFS3_COOKIEVERFSIZE];
/// The client's token for an exclusive CREATE (`createverf3`).
#[doc(alias = "createverf3")]
pub type Createverf3 = [u8; NFS3_CREATEVERFSIZE];
/// Changes whenever the server may have lost unstable writes (`writeverf3`).
#[doc(alias = "writeverf3")]
pub type Writeverf3 = [u8; NFS3_WRITEVERFSIZE];
/// A file's unique number within its file system (`fileid3`).
#[doc(alias = "fileid3")]
pub type Fileid3 = u64;

xdr_enum! {
    /// Status of every NFSv3 result (RFC 1813 §2.6, `nfsstat3`).
    #[doc(alias = "nfsstat3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Nfsstat3 {
        /// NFS3_OK: the call succeeded.
        Ok = 0,
        /// NFS3ERR_PERM: not the owner, or the operation needs privilege.
        Perm = 1,
        /// NFS3ERR_NOENT: no such file or directory.
        Noent = 2,
        /// NFS3ERR_IO: a hard I/O error.
        Io = 5,
        /// NFS3ERR_NXIO: no such device or address.
        Nxio = 6,
        /// NFS3ERR_ACCES: permission denied.
        Acces = 13,
        /// NFS3ERR_EXIST: the target already exists.
        Exist = 17,
        /// NFS3ERR_XDEV: a link across file systems.
        Xdev = 18,
        /// NFS3ERR_NODEV: no such device.
        Nodev = 19,
        /// NFS3ERR_NOTDIR: not a directory.
        Notdir = 20,
        /// NFS3ERR_ISDIR: is a directory.
        Isdir = 21,
        /// NFS3ERR_INVAL: an invalid argument.
        Inval = 22,
        /// NFS3ERR_FBIG: the file would exceed the server's limit.
        Fbig = 27,
        /// NFS3ERR_NOSPC: no space left on the device.
        Nospc = 28,
        /// NFS3ERR_ROFS: the file system (or export) is read-only.
        Rofs = 30,
        /// NFS3ERR_MLINK: too many hard links.
        Mlink = 31,
        /// NFS3ERR_NAMETOOLONG: a name is longer than the server allows.
        Nametoolong = 63,
        /// NFS3ERR_NOTEMPTY: the directory is not empty.
        Notempty = 66,
        /// NFS3ERR_DQUOT: quota exceeded.
        Dquot = 69,
        /// NFS3ERR_STALE: the handle names an object that no longer exists.
        Stale = 70,
        /// NFS3ERR_REMOTE: too many levels of remote in path.
        Remote = 71,
        /// NFS3ERR_BADHANDLE: the handle is not one this server issued.
        Badhandle = 10001,
        /// NFS3ERR_NOT_SYNC: a SETATTR guard did not match.
        NotSync = 10002,
        /// NFS3ERR_BAD_COOKIE: a READDIR cookie (or its verifier) is stale.
        BadCookie = 10003,
        /// NFS3ERR_NOTSUPP: the operation is not supported.
        Notsupp = 10004,
        /// NFS3ERR_TOOSMALL: the reply would not fit in the client's buffer.
        Toosmall = 10005,
        /// NFS3ERR_SERVERFAULT: an error the other codes cannot express.
        Serverfault = 10006,
        /// NFS3ERR_BADTYPE: an object type the server does not support.
        Badtype = 10007,
        /// NFS3ERR_JUKEBOX: try again later (the server is busy).
        Jukebox = 10008,
    }
}

impl Nfsstat3 {
    /// Every status, in wire-value order (for tests and statistics).
    pub const ALL: [Nfsstat3; 29] = [
        Nfsstat3::Ok,
        Nfsstat3::Perm,
        Nfsstat3::Noent,
        Nfsstat3::Io,
        Nfsstat3::Nxio,
        Nfsstat3::Acces,
        Nfsstat3::Exist,
        Nfsstat3::Xdev,
        Nfsstat3::Nodev,
        Nfsstat3::Notdir,
        Nfsstat3::Isdir,
        Nfsstat3::Inval,
        Nfsstat3::Fbig,
        Nfsstat3::Nospc,
        Nfsstat3::Rofs,
        Nfsstat3::Mlink,
        Nfsstat3::Nametoolong,
        Nfsstat3::Notempty,
        Nfsstat3::Dquot,
        Nfsstat3::Stale,
        Nfsstat3::Remote,
        Nfsstat3::Badhandle,
        Nfsstat3::NotSync,
        Nfsstat3::BadCookie,
        Nfsstat3::Notsupp,
        Nfsstat3::Toosmall,
        Nfsstat3::Serverfault,
        Nfsstat3::Badtype,
        Nfsstat3::Jukebox,
    ];

    /// True for NFS3_OK.
    pub fn is_ok(self) -> bool {
        self == Nfsstat3::Ok
    }
}

xdr_enum! {
    /// The type of a file system object (RFC 1813 §2.5, `ftype3`).
    #[doc(alias = "ftype3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Ftype3 {
        /// NF3REG: a regular file.
        Reg = 1,
        /// NF3DIR: a directory.
        Dir = 2,
        /// NF3BLK: a block device.
        Blk = 3,
        /// NF3CHR: a character device.
        Chr = 4,
        /// NF3LNK: a symbolic link.
        Lnk = 5,
        /// NF3SOCK: a socket.
        Sock = 6,
        /// NF3FIFO: a named pipe.
        Fifo = 7,
    }
}

xdr_struct! {
    /// Device numbers of a block or character special file (RFC 1813 §2.5, `specdata3`).
    #[doc(alias = "specdata3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Specdata3 {
        /// The major device number.
        pub specdata1: u32,
        /// The minor device number.
        pub specdata2: u32,
    }
}

xdr_struct! {
    /// An NFSv3 file handle (RFC 1813 §2.5, `nfs_fh3`): at most
    /// [`NFS3_FHSIZE`] opaque bytes that only the issuing server interprets.
    #[doc(alias = "nfs_fh3")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct NfsFh3 {
        /// The handle bytes, shared with the receive buffer.
        pub data: Opaque<NFS3_FHSIZE>,
    }
}

xdr_struct! {
    /// A time stamp (RFC 1813 §2.5, `nfstime3`): seconds and nanoseconds
    /// since the Unix epoch. Unsigned on the wire, so it cannot name times
    /// before 1970 or after 2106.
    #[doc(alias = "nfstime3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Nfstime3 {
        /// Whole seconds since 1970-01-01T00:00:00Z.
        pub seconds: u32,
        /// Nanoseconds within the second (below 10^9 for a valid time).
        pub nseconds: u32,
    }
}

/// Encoded size of [`Fattr3`]: 13 fields, all fixed-size.
pub const FATTR3_LEN: usize = 84;

xdr_struct! {
    /// The attributes of a file system object (RFC 1813 §2.5, `fattr3`).
    /// Always [`FATTR3_LEN`] bytes on the wire.
    #[doc(alias = "fattr3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Fattr3 {
        /// The object's type.
        pub ftype: Ftype3,
        /// Permission bits and set-id/sticky bits (the low 12 bits of st_mode).
        pub mode: u32,
        /// Number of hard links.
        pub nlink: u32,
        /// Owner user id.
        pub uid: u32,
        /// Owner group id.
        pub gid: u32,
        /// Size in bytes.
        pub size: u64,
        /// Bytes of disk space actually used.
        pub used: u64,
        /// Device numbers, for block and character special files.
        pub rdev: Specdata3,
        /// File system identifier (fileids are unique within it).
        pub fsid: u64,
        /// The object's number within its file system.
        pub fileid: Fileid3,
        /// Time of last access.
        pub atime: Nfstime3,
        /// Time of last data modification.
        pub mtime: Nfstime3,
        /// Time of last attribute (or data) change.
        pub ctime: Nfstime3,
    }
}

/// Attributes returned after an operation if the server has them
/// (RFC 1813 §2.6, `post_op_attr`).
#[doc(alias = "post_op_attr")]
pub type PostOpAttr = Option<Fattr3>;

/// Encoded size of a [`PostOpAttr`]: the discriminant and, if present, the attributes.
pub fn post_op_attr_len(attr: &PostOpAttr) -> usize {
    4 + if attr.is_some() { FATTR3_LEN } else { 0 }
}

xdr_struct! {
    /// The subset of attributes used for weak cache consistency
    /// (RFC 1813 §2.6, `wcc_attr`).
    #[doc(alias = "wcc_attr")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WccAttr {
        /// Size in bytes before the operation.
        pub size: u64,
        /// Modification time before the operation.
        pub mtime: Nfstime3,
        /// Change time before the operation.
        pub ctime: Nfstime3,
    }
}

/// Attributes from just before an operation, if the server took them
/// atomically with it (RFC 1813 §2.6, `pre_op_attr`).
#[doc(alias = "pre_op_attr")]
pub type PreOpAttr = Option<WccAttr>;

xdr_struct! {
    /// Weak cache consistency data (RFC 1813 §2.6, `wcc_data`): lets a client
    /// tell whether only its own operation changed the object, and so keep
    /// its cache.
    #[doc(alias = "wcc_data")]
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct WccData {
        /// Attributes before the operation.
        pub before: PreOpAttr,
        /// Attributes after the operation.
        pub after: PostOpAttr,
    }
}

/// A file handle returned after an operation, if the server has it
/// (RFC 1813 §2.6, `post_op_fh3`).
#[doc(alias = "post_op_fh3")]
pub type PostOpFh3 = Option<NfsFh3>;

/// Encoded size of a [`PostOpFh3`].
pub fn post_op_fh3_len(fh: &PostOpFh3) -> usize {
    4 + fh.as_ref().map_or(0, |fh| crate::opaque_len(fh.data.len()))
}

/// New mode bits, if they are to be set (RFC 1813 §2.6, `set_mode3`).
#[doc(alias = "set_mode3")]
pub type SetMode3 = Option<u32>;
/// New owner, if it is to be set (`set_uid3`).
#[doc(alias = "set_uid3")]
pub type SetUid3 = Option<u32>;
/// New group, if it is to be set (`set_gid3`).
#[doc(alias = "set_gid3")]
pub type SetGid3 = Option<u32>;
/// New size, if the file is to be truncated or extended (`set_size3`).
#[doc(alias = "set_size3")]
pub type SetSize3 = Option<u64>;

xdr_enum! {
    /// How a time attribute is to be set (RFC 1813 §2.6, `time_how`).
    #[doc(alias = "time_how")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum TimeHow {
        /// DONT_CHANGE.
        DontChange = 0,
        /// SET_TO_SERVER_TIME.
        SetToServerTime = 1,
        /// SET_TO_CLIENT_TIME.
        SetToClientTime = 2,
    }
}

/// A time attribute change (`set_atime` / `set_mtime`, RFC 1813 §2.6).
///
/// The two RFC unions are identical, so one type serves both; see the
/// [`SetAtime`] and [`SetMtime`] aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SetTime {
    /// Leave the time as it is.
    #[default]
    DontChange,
    /// Set the time to the server's current time (a `touch` without a time).
    SetToServerTime,
    /// Set the time to the given value.
    SetToClientTime(Nfstime3),
}

/// Access time change (`set_atime`).
#[doc(alias = "set_atime")]
pub type SetAtime = SetTime;
/// Modification time change (`set_mtime`).
#[doc(alias = "set_mtime")]
pub type SetMtime = SetTime;

impl Encode for SetTime {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        match self {
            SetTime::DontChange => TimeHow::DontChange.encode(buf),
            SetTime::SetToServerTime => TimeHow::SetToServerTime.encode(buf),
            SetTime::SetToClientTime(t) => {
                TimeHow::SetToClientTime.encode(buf);
                t.encode(buf);
            }
        }
    }
}
impl Decode for SetTime {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match TimeHow::decode(buf)? {
            TimeHow::DontChange => SetTime::DontChange,
            TimeHow::SetToServerTime => SetTime::SetToServerTime,
            TimeHow::SetToClientTime => SetTime::SetToClientTime(Nfstime3::decode(buf)?),
        })
    }
}

xdr_struct! {
    /// Attributes to set (RFC 1813 §2.6, `sattr3`): each field says whether
    /// and how to change one attribute. `Sattr3::default()` changes nothing.
    #[doc(alias = "sattr3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Sattr3 {
        /// New permission bits.
        pub mode: SetMode3,
        /// New owner.
        pub uid: SetUid3,
        /// New group.
        pub gid: SetGid3,
        /// New size.
        pub size: SetSize3,
        /// New access time.
        pub atime: SetAtime,
        /// New modification time.
        pub mtime: SetMtime,
    }
}

xdr_struct! {
    /// A name within a directory (RFC 1813 §2.6, `diropargs3`).
    #[doc(alias = "diropargs3")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct Diropargs3 {
        /// The directory.
        pub dir: NfsFh3,
        /// The entry's name in it.
        pub name: Filename3,
    }
}

xdr_enum! {
    /// How durably WRITE data must be stored before the reply
    /// (RFC 1813 §3.3.7, `stable_how`).
    #[doc(alias = "stable_how")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum StableHow {
        /// UNSTABLE: the server may cache the data until a COMMIT.
        Unstable = 0,
        /// DATA_SYNC: data (and the metadata to read it back) on stable storage.
        DataSync = 1,
        /// FILE_SYNC: data and all metadata on stable storage.
        FileSync = 2,
    }
}

xdr_enum! {
    /// The kind of CREATE (RFC 1813 §3.3.8, `createmode3`).
    #[doc(alias = "createmode3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Createmode3 {
        /// UNCHECKED: create, or open an existing file without error.
        Unchecked = 0,
        /// GUARDED: fail with NFS3ERR_EXIST if the name exists.
        Guarded = 1,
        /// EXCLUSIVE: create once, identified by a client verifier, so a
        /// retransmitted CREATE succeeds instead of failing with EXIST.
        Exclusive = 2,
    }
}

/// How to create a regular file (RFC 1813 §3.3.8, `createhow3`).
#[doc(alias = "createhow3")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Createhow3 {
    /// UNCHECKED with the initial attributes.
    Unchecked(Sattr3),
    /// GUARDED with the initial attributes.
    Guarded(Sattr3),
    /// EXCLUSIVE with the client's verifier (the server stores it, commonly
    /// in the atime/mtime, to recognise a retransmission).
    Exclusive(Createverf3),
}

impl Createhow3 {
    /// The discriminant of this arm.
    pub fn mode(&self) -> Createmode3 {
        match self {
            Createhow3::Unchecked(_) => Createmode3::Unchecked,
            Createhow3::Guarded(_) => Createmode3::Guarded,
            Createhow3::Exclusive(_) => Createmode3::Exclusive,
        }
    }
}

impl Encode for Createhow3 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.mode().encode(buf);
        match self {
            Createhow3::Unchecked(a) | Createhow3::Guarded(a) => a.encode(buf),
            Createhow3::Exclusive(v) => v.encode(buf),
        }
    }
}
impl Decode for Createhow3 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match Createmode3::decode(buf)? {
            Createmode3::Unchecked => Createhow3::Unchecked(Sattr3::decode(buf)?),
            Createmode3::Guarded => Createhow3::Guarded(Sattr3::decode(buf)?),
            Createmode3::Exclusive => Createhow3::Exclusive(Createverf3::decode(buf)?),
        })
    }
}

xdr_struct! {
    /// Attributes and device numbers of a new device file (RFC 1813 §3.3.11, `devicedata3`).
    #[doc(alias = "devicedata3")]
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Devicedata3 {
        /// Initial attributes.
        pub dev_attributes: Sattr3,
        /// Major and minor device numbers.
        pub spec: Specdata3,
    }
}

/// What MKNOD is to create (RFC 1813 §3.3.11, `mknoddata3`).
///
/// Regular files, directories and symbolic links have their own
/// procedures; their arms carry nothing and the server answers them with
/// NFS3ERR_BADTYPE. They are kept as variants so such a call still decodes
/// and gets that precise answer rather than GARBAGE_ARGS.
#[doc(alias = "mknoddata3")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mknoddata3 {
    /// NF3CHR: a character device.
    Chr(Devicedata3),
    /// NF3BLK: a block device.
    Blk(Devicedata3),
    /// NF3SOCK: a socket, with its initial attributes.
    Sock(Sattr3),
    /// NF3FIFO: a named pipe, with its initial attributes.
    Fifo(Sattr3),
    /// NF3REG (not creatable by MKNOD).
    Reg,
    /// NF3DIR (not creatable by MKNOD).
    Dir,
    /// NF3LNK (not creatable by MKNOD).
    Lnk,
}

impl Mknoddata3 {
    /// The discriminant of this arm.
    pub fn ftype(&self) -> Ftype3 {
        match self {
            Mknoddata3::Chr(_) => Ftype3::Chr,
            Mknoddata3::Blk(_) => Ftype3::Blk,
            Mknoddata3::Sock(_) => Ftype3::Sock,
            Mknoddata3::Fifo(_) => Ftype3::Fifo,
            Mknoddata3::Reg => Ftype3::Reg,
            Mknoddata3::Dir => Ftype3::Dir,
            Mknoddata3::Lnk => Ftype3::Lnk,
        }
    }
}

impl Encode for Mknoddata3 {
    fn encode<B: BufMut>(&self, buf: &mut B) {
        self.ftype().encode(buf);
        match self {
            Mknoddata3::Chr(d) | Mknoddata3::Blk(d) => d.encode(buf),
            Mknoddata3::Sock(a) | Mknoddata3::Fifo(a) => a.encode(buf),
            Mknoddata3::Reg | Mknoddata3::Dir | Mknoddata3::Lnk => {}
        }
    }
}
impl Decode for Mknoddata3 {
    fn decode(buf: &mut Bytes) -> Result<Self> {
        Ok(match Ftype3::decode(buf)? {
            Ftype3::Chr => Mknoddata3::Chr(Devicedata3::decode(buf)?),
            Ftype3::Blk => Mknoddata3::Blk(Devicedata3::decode(buf)?),
            Ftype3::Sock => Mknoddata3::Sock(Sattr3::decode(buf)?),
            Ftype3::Fifo => Mknoddata3::Fifo(Sattr3::decode(buf)?),
            Ftype3::Reg => Mknoddata3::Reg,
            Ftype3::Dir => Mknoddata3::Dir,
            Ftype3::Lnk => Mknoddata3::Lnk,
        })
    }
}

xdr_struct! {
    /// The target and attributes of a new symbolic link (RFC 1813 §3.3.10, `symlinkdata3`).
    #[doc(alias = "symlinkdata3")]
    #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
    pub struct Symlinkdata3 {
        /// Initial attributes of the link.
        pub symlink_attributes: Sattr3,
        /// The path the link points to (not interpreted by the server).
        pub symlink_data: Nfspath3,
    }
}
