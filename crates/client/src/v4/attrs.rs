//! Attributes: `fattr4` to NFSv3's `fattr3` and `sattr3` to `fattr4`, owner
//! strings to ids and back, and the attribute masks the compounds ask for.
//!
//! Owners go out as numbers (`"1000"`), as Linux sends them over AUTH_SYS
//! with `nfs4_disable_idmapping` (its default): the server checks the
//! caller's AUTH_SYS ids anyway, and both eagernfs and nfs-ganesha accept
//! numbers. Owners come in as numbers (eagernfs sends numbers), as
//! `number@domain`, or as `name@domain`, which is looked up in this host's
//! password or group database (what Linux's idmapper does); a name this host
//! does not know is `nobody` (65534), as on Linux.
//!
//! # Layout
//! - masks: [`standard`] (what GETATTR asks for everywhere), [`fs_info`],
//!   [`fs_stat`], [`readdir_plain`].
//! - [`decode`], [`to_fattr3`], [`to_fattr4`]: the conversions.
//! - [`IdMapper`]: owner strings.
//! - [`fsinfo`], [`fsstat`], [`pathconf`]: NFSv3's file system questions
//!   answered from attributes.

use crate::ops::{NfsError, NfsResult};
use eagernfs_proto::nfs3::{
    Fattr3, Fsinfo3ResOk, Fsstat3ResOk, Ftype3, Nfstime3, Pathconf3ResOk, Sattr3, SetTime, Specdata3,
    FSF3_CANSETTIME, FSF3_HOMOGENEOUS, FSF3_LINK, FSF3_SYMLINK,
};
use eagernfs_proto::nfs4::*;
use eagernfs_xdr::{Encode, Error as XdrError, Opaque};
use parking_lot::Mutex;
use std::collections::HashMap;

/// The attributes every GETATTR asks for: what NFSv3's `fattr3` holds, and
/// the change attribute.
pub(crate) const STANDARD: &[u32] = &[
    FATTR4_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_FSID,
    FATTR4_FILEID,
    FATTR4_MODE,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
];

/// The attributes that answer FSINFO and PATHCONF, and the lease.
const FS_INFO: &[u32] = &[
    FATTR4_SUPPORTED_ATTRS,
    FATTR4_LINK_SUPPORT,
    FATTR4_SYMLINK_SUPPORT,
    FATTR4_LEASE_TIME,
    FATTR4_CANSETTIME,
    FATTR4_CASE_INSENSITIVE,
    FATTR4_CASE_PRESERVING,
    FATTR4_CHOWN_RESTRICTED,
    FATTR4_HOMOGENEOUS,
    FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK,
    FATTR4_MAXNAME,
    FATTR4_MAXREAD,
    FATTR4_MAXWRITE,
    FATTR4_NO_TRUNC,
    FATTR4_TIME_DELTA,
];

/// The attributes that answer FSSTAT.
const FS_STAT: &[u32] = &FATTR4_FSSTAT;

/// [`STANDARD`] as bitmap words, made once: a GETATTR in nearly every
/// COMPOUND asks for them, and `Bitmap4::from_bits` grows its `Vec` word by
/// word (issue 34's profile).
const STANDARD_WORDS: [u32; 2] = bit_words(STANDARD);

/// [`STANDARD`] as a bitmap.
pub(crate) fn standard() -> Bitmap4 {
    Bitmap4(STANDARD_WORDS.to_vec())
}

/// [`STANDARD`] and the file handle: what READDIR asks for to answer READDIRPLUS.
pub(crate) fn readdir_plus() -> Bitmap4 {
    let mut b = standard();
    b.set(FATTR4_FILEHANDLE);
    b.set(FATTR4_RDATTR_ERROR);
    b
}

/// What READDIR asks for to answer NFSv3's READDIR: the file id only.
pub(crate) fn readdir_plain() -> Bitmap4 {
    Bitmap4::from_bits(&[FATTR4_FILEID, FATTR4_RDATTR_ERROR])
}

/// FSINFO's and PATHCONF's attributes.
pub(crate) fn fs_info() -> Bitmap4 {
    Bitmap4::from_bits(FS_INFO)
}

/// FSSTAT's attributes.
pub(crate) fn fs_stat() -> Bitmap4 {
    Bitmap4::from_bits(FS_STAT)
}

/// Decode a `fattr4` the server sent.
pub(crate) fn decode(f: &Fattr4) -> NfsResult<FileAttrs> {
    FileAttrs::from_fattr(f).map_err(|e| NfsError::BadReply(format!("attributes: {e}")))
}

fn ftype3(t: NfsFtype4) -> Ftype3 {
    match t {
        NfsFtype4::Reg | NfsFtype4::Namedattr => Ftype3::Reg,
        NfsFtype4::Dir | NfsFtype4::Attrdir => Ftype3::Dir,
        NfsFtype4::Blk => Ftype3::Blk,
        NfsFtype4::Chr => Ftype3::Chr,
        NfsFtype4::Lnk => Ftype3::Lnk,
        NfsFtype4::Sock => Ftype3::Sock,
        NfsFtype4::Fifo => Ftype3::Fifo,
    }
}

/// An NFSv4 time as NFSv3's unsigned 32-bit seconds (clamped: NFSv3 cannot
/// name times before 1970 or after 2106).
pub(crate) fn time3(t: Nfstime4) -> Nfstime3 {
    Nfstime3 { seconds: t.seconds.clamp(0, u32::MAX as i64) as u32, nseconds: t.nseconds.min(999_999_999) }
}

fn time4(t: Nfstime3) -> Nfstime4 {
    Nfstime4 { seconds: t.seconds as i64, nseconds: t.nseconds }
}

/// NFSv3's 64-bit fsid from NFSv4's two words (equal fsids stay equal).
pub(crate) fn fsid3(f: Fsid4) -> u64 {
    f.major ^ f.minor.rotate_left(32)
}

/// `fattr3` from GETATTR's [`STANDARD`] attributes. The type must be there
/// (every server returns it: it is a mandatory attribute); anything else
/// missing reads as 0 (space used as the size).
pub(crate) fn to_fattr3(a: &FileAttrs, ids: &IdMapper) -> NfsResult<Fattr3> {
    let ftype = a.ftype.ok_or_else(|| NfsError::BadReply("attributes without the type".into()))?;
    let size = a.size.unwrap_or(0);
    let rdev = a.rawdev.unwrap_or_default();
    Ok(Fattr3 {
        ftype: ftype3(ftype),
        mode: a.mode.unwrap_or(0) & 0o7777,
        nlink: a.numlinks.unwrap_or(1),
        uid: a.owner.as_ref().map_or(NOBODY, |o| ids.id(o, false)),
        gid: a.owner_group.as_ref().map_or(NOBODY, |o| ids.id(o, true)),
        size,
        used: a.space_used.unwrap_or(size),
        rdev: Specdata3 { specdata1: rdev.specdata1, specdata2: rdev.specdata2 },
        fsid: a.fsid.map_or(0, fsid3),
        fileid: a.fileid.unwrap_or(0),
        atime: a.time_access.map_or_else(Nfstime3::default, time3),
        mtime: a.time_modify.map_or_else(Nfstime3::default, time3),
        ctime: a.time_metadata.map_or_else(Nfstime3::default, time3),
    })
}

/// Decode and convert in one step.
pub(crate) fn fattr3_of(f: &Fattr4, ids: &IdMapper) -> NfsResult<Fattr3> {
    decode_file(f, ids)?.attrs
}

/// One file's attributes as the client uses them: NFSv3's `fattr3` (an
/// error if the type is missing, as [`to_fattr3`]), the file id and the
/// file handle, when the `fattr4` carried them.
#[derive(Debug)]
pub(crate) struct FileAttrs3 {
    pub(crate) attrs: NfsResult<Fattr3>,
    pub(crate) fileid: Option<u64>,
    pub(crate) filehandle: Option<NfsFh4>,
}

/// Attributes [`decode_file`] reads in place, as bitmap words: [`STANDARD`], the
/// file handle, `rdattr_error` and the file id (all GETATTR and READDIR ask
/// for). A `fattr4` with any other takes [`decode`]'s way.
const IN_PLACE: [u32; 2] = {
    let (standard, more) = (bit_words(STANDARD), bit_words(&[FATTR4_RDATTR_ERROR, FATTR4_FILEHANDLE]));
    [standard[0] | more[0], standard[1] | more[1]]
};

const fn bit_words(bits: &[u32]) -> [u32; 2] {
    let mut w = [0u32; 2];
    let mut i = 0;
    while i < bits.len() {
        w[(bits[i] / 32) as usize] |= 1 << (bits[i] % 32);
        i += 1;
    }
    w
}

/// XDR values read from a borrowed slice: no `Bytes` handle per value.
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        let remaining = self.buf.len() - self.at;
        if remaining < n {
            return Err(XdrError::Truncated { needed: n, remaining });
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, XdrError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, XdrError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn time(&mut self) -> Result<Nfstime4, XdrError> {
        Ok(Nfstime4 { seconds: self.u64()? as i64, nseconds: self.u32()? })
    }

    /// Variable-length opaque data of at most `max` bytes: where it lies in the buffer.
    fn opaque(&mut self, max: usize) -> Result<std::ops::Range<usize>, XdrError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        let padded = len + (4 - len % 4) % 4;
        let start = self.at;
        self.take(padded)?;
        Ok(start..start + len)
    }
}

/// Decode a `fattr4` the server sent into what the client keeps of it.
/// The same result as [`decode`] then [`to_fattr3`], without building a
/// [`FileAttrs`] (every attribute an `Option`, owners as `Bytes` handles):
/// issue 34's profile put that at a fifth of the client's CPU per READDIR.
pub(crate) fn decode_file(f: &Fattr4, ids: &IdMapper) -> NfsResult<FileAttrs3> {
    let words = &f.attrmask.0;
    let in_place = words.iter().enumerate().all(|(i, w)| w & !IN_PLACE.get(i).copied().unwrap_or(0) == 0);
    if !in_place {
        let a = decode(f)?;
        return Ok(FileAttrs3 { attrs: to_fattr3(&a, ids), fileid: a.fileid, filehandle: a.filehandle });
    }
    decode_in_place(f, ids).map_err(|e| NfsError::BadReply(format!("attributes: {}", AttrError::Xdr(e))))
}

fn decode_in_place(f: &Fattr4, ids: &IdMapper) -> Result<FileAttrs3, XdrError> {
    let vals = &f.attr_vals.0;
    let mut c = Cursor { buf: vals, at: 0 };
    let mut ftype = None;
    let (mut size, mut fsid, mut fileid, mut mode, mut numlinks) = (None, None, None, None, None);
    let (mut owner, mut owner_group, mut rawdev, mut space_used) = (None, None, None, None);
    let (mut atime, mut mtime, mut ctime, mut filehandle) = (None, None, None, None);
    for (w, word) in f.attrmask.0.iter().enumerate() {
        let mut bits = *word;
        while bits != 0 {
            let n = w as u32 * 32 + bits.trailing_zeros();
            bits &= bits - 1;
            match n {
                FATTR4_TYPE => {
                    let v = c.u32()?;
                    ftype = Some(
                        NfsFtype4::from_u32(v).ok_or(XdrError::BadEnum { name: "NfsFtype4", value: v })?,
                    );
                }
                FATTR4_CHANGE => {
                    c.u64()?;
                }
                FATTR4_SIZE => size = Some(c.u64()?),
                FATTR4_FSID => fsid = Some(Fsid4 { major: c.u64()?, minor: c.u64()? }),
                FATTR4_RDATTR_ERROR => {
                    let v = c.u32()?;
                    Nfsstat4::from_u32(v).ok_or(XdrError::BadEnum { name: "Nfsstat4", value: v })?;
                }
                FATTR4_FILEHANDLE => filehandle = Some(c.opaque(NFS4_FHSIZE)?),
                FATTR4_FILEID => fileid = Some(c.u64()?),
                FATTR4_MODE => mode = Some(c.u32()?),
                FATTR4_NUMLINKS => numlinks = Some(c.u32()?),
                FATTR4_OWNER => owner = Some(c.opaque(UTF8STR_MAX)?),
                FATTR4_OWNER_GROUP => owner_group = Some(c.opaque(UTF8STR_MAX)?),
                FATTR4_RAWDEV => rawdev = Some(Specdata3 { specdata1: c.u32()?, specdata2: c.u32()? }),
                FATTR4_SPACE_USED => space_used = Some(c.u64()?),
                FATTR4_TIME_ACCESS => atime = Some(c.time()?),
                FATTR4_TIME_METADATA => ctime = Some(c.time()?),
                FATTR4_TIME_MODIFY => mtime = Some(c.time()?),
                _ => unreachable!("only IN_PLACE attributes come here"),
            }
        }
    }
    if c.at != vals.len() {
        return Err(XdrError::Trailing(vals.len() - c.at));
    }
    // As to_fattr3.
    let attrs = match ftype {
        None => Err(NfsError::BadReply("attributes without the type".into())),
        Some(ftype) => {
            let size = size.unwrap_or(0);
            Ok(Fattr3 {
                ftype: ftype3(ftype),
                mode: mode.unwrap_or(0) & 0o7777,
                nlink: numlinks.unwrap_or(1),
                uid: owner.map_or(NOBODY, |r| ids.id(&vals[r], false)),
                gid: owner_group.map_or(NOBODY, |r| ids.id(&vals[r], true)),
                size,
                used: space_used.unwrap_or(size),
                rdev: rawdev.unwrap_or_default(),
                fsid: fsid.map_or(0, fsid3),
                fileid: fileid.unwrap_or(0),
                atime: atime.map_or_else(Nfstime3::default, time3),
                mtime: mtime.map_or_else(Nfstime3::default, time3),
                ctime: ctime.map_or_else(Nfstime3::default, time3),
            })
        }
    };
    Ok(FileAttrs3 { attrs, fileid, filehandle: filehandle.map(|r| NfsFh4 { data: Opaque(vals.slice(r)) }) })
}

fn settime(t: SetTime) -> Option<Settime4> {
    match t {
        SetTime::DontChange => None,
        SetTime::SetToServerTime => Some(Settime4::ServerTime),
        SetTime::SetToClientTime(t) => Some(Settime4::ClientTime(time4(t))),
    }
}

/// The attributes `s` sets, as SETATTR, CREATE and OPEN take them: the
/// `fattr4` [`FileAttrs::to_fattr`] makes of them, written directly (each
/// value in bit order; owners as numbers) rather than through a
/// `FileAttrs` and an owner `String` (issue 34's profile of an untar).
pub(crate) fn to_fattr4(s: &Sattr3) -> Fattr4 {
    let mut mask = [0u32; 2];
    let mut set = |n: u32| mask[(n / 32) as usize] |= 1 << (n % 32);
    let mut vals = Vec::with_capacity(64);
    if let Some(size) = s.size {
        set(FATTR4_SIZE);
        size.encode(&mut vals);
    }
    if let Some(mode) = s.mode {
        set(FATTR4_MODE);
        (mode & 0o7777).encode(&mut vals);
    }
    let mut digits = [0u8; 10];
    if let Some(uid) = s.uid {
        set(FATTR4_OWNER);
        eagernfs_xdr::encode_opaque(&mut vals, decimal(uid, &mut digits));
    }
    if let Some(gid) = s.gid {
        set(FATTR4_OWNER_GROUP);
        eagernfs_xdr::encode_opaque(&mut vals, decimal(gid, &mut digits));
    }
    if let Some(t) = settime(s.atime) {
        set(FATTR4_TIME_ACCESS_SET);
        t.encode(&mut vals);
    }
    if let Some(t) = settime(s.mtime) {
        set(FATTR4_TIME_MODIFY_SET);
        t.encode(&mut vals);
    }
    let mut attrmask = Bitmap4(mask.to_vec());
    attrmask.trim();
    Fattr4 { attrmask, attr_vals: Opaque(bytes::Bytes::from(vals)) }
}

/// `n` in decimal, written at the end of `buf`.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// [`to_fattr4`] through [`FileAttrs`]: what it must equal.
#[cfg(test)]
fn to_fattr4_by_file_attrs(s: &Sattr3) -> Fattr4 {
    FileAttrs {
        mode: s.mode.map(|m| m & 0o7777),
        owner: s.uid.map(owner_string),
        owner_group: s.gid.map(owner_string),
        size: s.size,
        time_access_set: settime(s.atime),
        time_modify_set: settime(s.mtime),
        ..FileAttrs::default()
    }
    .to_fattr()
}

/// The id a name this host does not know maps to (Linux's `nobody`).
pub const NOBODY: u32 = 65534;

/// An id as an owner string: the number.
#[cfg(test)]
pub(crate) fn owner_string(id: u32) -> Utf8Str {
    Opaque(bytes::Bytes::from(id.to_string()))
}

/// Most owner names remembered (each a database lookup saved).
const NAMES_MAX: usize = 4096;

/// Owner strings to ids, remembering the names it had to look up.
#[derive(Debug, Default)]
pub struct IdMapper {
    /// (group?, name) → id, for `name@domain` owners.
    names: Mutex<HashMap<(bool, Vec<u8>), u32>>,
}

impl IdMapper {
    /// The uid (or gid, `group`) an owner string names.
    pub fn id(&self, owner: &[u8], group: bool) -> u32 {
        let name = match owner.iter().position(|b| *b == b'@') {
            Some(at) => &owner[..at],
            None => owner,
        };
        if let Some(n) = numeric(name) {
            return n;
        }
        if name.is_empty() {
            return NOBODY;
        }
        if let Some(id) = self.names.lock().get(&(group, name.to_vec())) {
            return *id;
        }
        let id = lookup_name(name, group).unwrap_or(NOBODY);
        let mut names = self.names.lock();
        if names.len() >= NAMES_MAX {
            names.clear();
        }
        names.insert((group, name.to_vec()), id);
        id
    }
}

/// `s` as a decimal number, if it is one (no sign, no spaces).
fn numeric(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    // By hand: every entry of a listing has two owners (issue 34's profile).
    let mut n = 0u64;
    for b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    u32::try_from(n).ok()
}

/// Look a user (or group) name up in this host's databases.
fn lookup_name(name: &[u8], group: bool) -> Option<u32> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: the out-structures are zeroed and valid for writing; `buf` is
    // valid for its length; `result` is only read after the call returned 0
    // and points into `pw`/`gr` when not null.
    unsafe {
        if group {
            let mut gr: libc::group = std::mem::zeroed();
            let mut result: *mut libc::group = std::ptr::null_mut();
            let rc =
                libc::getgrnam_r(cname.as_ptr(), &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut result);
            (rc == 0 && !result.is_null()).then_some(gr.gr_gid)
        } else {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut result: *mut libc::passwd = std::ptr::null_mut();
            let rc =
                libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut result);
            (rc == 0 && !result.is_null()).then_some(pw.pw_uid)
        }
    }
}

/// FSINFO from the [`fs_info`] attributes of the root.
pub(crate) fn fsinfo(a: &FileAttrs, obj: Option<Fattr3>) -> Fsinfo3ResOk {
    let rtmax = a.maxread.map_or(0, |m| m.min(u32::MAX as u64) as u32);
    let wtmax = a.maxwrite.map_or(0, |m| m.min(u32::MAX as u64) as u32);
    let mut properties = 0;
    if a.link_support.unwrap_or(false) {
        properties |= FSF3_LINK;
    }
    if a.symlink_support.unwrap_or(false) {
        properties |= FSF3_SYMLINK;
    }
    if a.homogeneous.unwrap_or(true) {
        properties |= FSF3_HOMOGENEOUS;
    }
    if a.cansettime.unwrap_or(true) {
        properties |= FSF3_CANSETTIME;
    }
    Fsinfo3ResOk {
        obj_attributes: obj,
        rtmax,
        rtpref: rtmax,
        rtmult: 4096,
        wtmax,
        wtpref: wtmax,
        wtmult: 4096,
        dtpref: rtmax.clamp(4096, 1 << 20),
        maxfilesize: a.maxfilesize.unwrap_or(u64::MAX),
        time_delta: a.time_delta.map_or(Nfstime3 { seconds: 0, nseconds: 1 }, time3),
        properties,
    }
}

/// FSSTAT from the [`fs_stat`] attributes.
pub(crate) fn fsstat(a: &FileAttrs, obj: Option<Fattr3>) -> Fsstat3ResOk {
    Fsstat3ResOk {
        obj_attributes: obj,
        tbytes: a.space_total.unwrap_or(0),
        fbytes: a.space_free.unwrap_or(0),
        abytes: a.space_avail.unwrap_or(0),
        tfiles: a.files_total.unwrap_or(0),
        ffiles: a.files_free.unwrap_or(0),
        afiles: a.files_avail.unwrap_or(0),
        invarsec: 0,
    }
}

/// PATHCONF from the [`fs_info`] attributes.
pub(crate) fn pathconf(a: &FileAttrs, obj: Option<Fattr3>) -> Pathconf3ResOk {
    Pathconf3ResOk {
        obj_attributes: obj,
        linkmax: a.maxlink.unwrap_or(1),
        name_max: a.maxname.unwrap_or(255),
        no_trunc: a.no_trunc.unwrap_or(true),
        chown_restricted: a.chown_restricted.unwrap_or(true),
        case_insensitive: a.case_insensitive.unwrap_or(false),
        case_preserving: a.case_preserving.unwrap_or(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_words_are_the_standard_bits() {
        assert_eq!(standard(), Bitmap4::from_bits(STANDARD));
        assert_eq!(Bitmap4(IN_PLACE.to_vec()), {
            let mut b = readdir_plus();
            b.set(FATTR4_FILEID);
            b
        });
    }

    #[test]
    fn owners_are_numbers_or_names_this_host_knows() {
        let ids = IdMapper::default();
        assert_eq!(ids.id(b"1000", false), 1000);
        assert_eq!(ids.id(b"1000@example.org", false), 1000);
        assert_eq!(ids.id(b"root@localdomain", false), 0, "root is in every password database");
        assert_eq!(ids.id(b"root", true), 0);
        assert_eq!(ids.id(b"no-such-user-here@x", false), NOBODY);
        assert_eq!(ids.id(b"", false), NOBODY);
        assert_eq!(ids.id(b"-1", false), NOBODY, "not a number, not a name");
        assert_eq!(ids.id(b"99999999999", false), NOBODY, "too large for an id");
        assert_eq!(ids.id(b"4294967295", false), u32::MAX);
        assert_eq!(ids.id(b"4294967296", false), NOBODY, "too large for an id");
        assert_eq!(ids.id(b"0000000042", true), 42);
        assert_eq!(ids.id(b"12a", true), NOBODY);
        assert_eq!(&owner_string(42)[..], b"42");
    }

    #[test]
    fn fattr4_and_fattr3_agree() {
        let a = FileAttrs {
            ftype: Some(NfsFtype4::Chr),
            size: Some(10),
            mode: Some(0o104_755),
            numlinks: Some(2),
            owner: Some(owner_string(7)),
            owner_group: Some(Opaque::from_static(b"8@dom")),
            rawdev: Some(Specdata4 { specdata1: 4, specdata2: 5 }),
            fsid: Some(Fsid4 { major: 3, minor: 0 }),
            fileid: Some(99),
            time_access: Some(Nfstime4 { seconds: 1, nseconds: 2 }),
            time_modify: Some(Nfstime4 { seconds: -5, nseconds: 3 }),
            time_metadata: Some(Nfstime4 { seconds: 1 << 40, nseconds: 4 }),
            ..FileAttrs::default()
        };
        let f = fattr3_of(&a.to_fattr(), &IdMapper::default()).unwrap();
        assert_eq!(f.ftype, Ftype3::Chr);
        assert_eq!((f.mode, f.nlink, f.uid, f.gid), (0o4755, 2, 7, 8));
        assert_eq!((f.size, f.used, f.fileid, f.fsid), (10, 10, 99, 3));
        assert_eq!((f.rdev.specdata1, f.rdev.specdata2), (4, 5));
        assert_eq!(f.atime, Nfstime3 { seconds: 1, nseconds: 2 });
        assert_eq!(f.mtime.seconds, 0, "before 1970 is clamped");
        assert_eq!(f.ctime.seconds, u32::MAX, "after 2106 is clamped");
        // No type: a broken reply, not a regular file.
        assert!(to_fattr3(&FileAttrs::default(), &IdMapper::default()).is_err());
    }

    /// [`decode`] then [`to_fattr3`]: what [`decode_file`] must equal.
    fn by_file_attrs(
        f: &Fattr4,
        ids: &IdMapper,
    ) -> NfsResult<(NfsResult<Fattr3>, Option<u64>, Option<NfsFh4>)> {
        let a = decode(f)?;
        Ok((to_fattr3(&a, ids), a.fileid, a.filehandle))
    }

    fn assert_same(f: &Fattr4, what: &str) {
        let ids = IdMapper::default();
        let quick = decode_file(f, &ids).map(|d| (d.attrs, d.fileid, d.filehandle));
        let slow = by_file_attrs(f, &ids);
        assert_eq!(format!("{quick:?}"), format!("{slow:?}"), "{what}");
    }

    #[test]
    fn attributes_decoded_in_place_are_those_file_attrs_decode() {
        let full = FileAttrs {
            ftype: Some(NfsFtype4::Lnk),
            change: Some(77),
            size: Some(1 << 40),
            fsid: Some(Fsid4 { major: 3, minor: 9 }),
            rdattr_error: Some(Nfsstat4::Ok),
            filehandle: Some(NfsFh4 { data: Opaque::from_static(b"a handle of 21 bytes.") }),
            fileid: Some(12345),
            mode: Some(0o120_777),
            numlinks: Some(3),
            owner: Some(Opaque::from_static(b"1000")),
            owner_group: Some(Opaque::from_static(b"root@somewhere")),
            rawdev: Some(Specdata4 { specdata1: 8, specdata2: 1 }),
            space_used: Some(4096),
            time_access: Some(Nfstime4 { seconds: 1_700_000_000, nseconds: 5 }),
            time_metadata: Some(Nfstime4 { seconds: -1, nseconds: 6 }),
            time_modify: Some(Nfstime4 { seconds: 1 << 33, nseconds: 7 }),
            ..FileAttrs::default()
        };
        let f = full.to_fattr();
        assert_same(&f, "every attribute read in place");
        let d = decode_file(&f, &IdMapper::default()).unwrap();
        let a = d.attrs.unwrap();
        assert_eq!((a.ftype, a.uid, a.gid, a.size, a.fileid), (Ftype3::Lnk, 1000, 0, 1 << 40, 12345));
        assert_eq!(&d.filehandle.unwrap().data[..], b"a handle of 21 bytes.");
        assert_same(
            &FileAttrs { fileid: Some(5), ..FileAttrs::default() }.to_fattr(),
            "no type: an error in attrs",
        );
        assert_same(&Fattr4::default(), "nothing");
        // One attribute not read in place: the whole fattr4 goes through FileAttrs.
        assert_same(&FileAttrs { maxread: Some(1 << 20), ..full.clone() }.to_fattr(), "with maxread");
        // Malformed: every way each value can be cut short, a byte too many,
        // a type and an error that name nothing, an owner too long.
        for cut in 0..f.attr_vals.len() {
            let g = Fattr4 { attrmask: f.attrmask.clone(), attr_vals: Opaque(f.attr_vals.0.slice(..cut)) };
            assert_same(&g, &format!("cut at {cut}"));
            assert!(decode_file(&g, &IdMapper::default()).is_err(), "cut at {cut}");
        }
        let mut more = f.attr_vals.to_vec();
        more.extend_from_slice(&[0; 4]);
        let g = Fattr4 { attrmask: f.attrmask.clone(), attr_vals: Opaque(more.into()) };
        assert_same(&g, "trailing bytes");
        assert!(decode_file(&g, &IdMapper::default()).is_err());
        for (mask, vals) in [
            (vec![FATTR4_TYPE], 10u32.to_be_bytes().to_vec()),
            (vec![FATTR4_RDATTR_ERROR], 99_999u32.to_be_bytes().to_vec()),
            (vec![FATTR4_OWNER], 1025u32.to_be_bytes().to_vec()),
            (vec![FATTR4_FILEHANDLE], 129u32.to_be_bytes().to_vec()),
            (vec![FATTR4_OWNER], [&3u32.to_be_bytes()[..], b"abc"].concat()),
        ] {
            let g = Fattr4 { attrmask: Bitmap4::from_bits(&mask), attr_vals: Opaque(vals.into()) };
            assert_same(&g, &format!("{mask:?}"));
            assert!(decode_file(&g, &IdMapper::default()).is_err(), "{mask:?}");
        }
    }

    #[test]
    fn sattr3_becomes_the_attributes_setattr_sends() {
        let s = Sattr3 {
            mode: Some(0o1644),
            uid: Some(5),
            gid: None,
            size: Some(0),
            atime: SetTime::SetToServerTime,
            mtime: SetTime::SetToClientTime(Nfstime3 { seconds: 9, nseconds: 1 }),
        };
        let a = FileAttrs::from_fattr(&to_fattr4(&s)).unwrap();
        assert_eq!(a.mode, Some(0o1644));
        assert_eq!(a.owner.as_deref(), Some(&b"5"[..]));
        assert_eq!(a.owner_group, None);
        assert_eq!(a.size, Some(0));
        assert_eq!(a.time_access_set, Some(Settime4::ServerTime));
        assert_eq!(a.time_modify_set, Some(Settime4::ClientTime(Nfstime4 { seconds: 9, nseconds: 1 })));
        assert!(to_fattr4(&Sattr3::default()).attrmask.is_empty(), "nothing to set: an empty mask");
        let times = [
            SetTime::DontChange,
            SetTime::SetToServerTime,
            SetTime::SetToClientTime(Nfstime3 { seconds: u32::MAX, nseconds: 999_999_999 }),
        ];
        for bits in 0..16u32 {
            for (atime, mtime) in times.iter().flat_map(|a| times.iter().map(move |m| (*a, *m))) {
                let on = |b: u32| bits & (1 << b) != 0;
                let s = Sattr3 {
                    mode: on(0).then_some(0o170_777),
                    uid: on(1).then_some(if on(3) { 0 } else { u32::MAX }),
                    gid: on(2).then_some(if on(3) { 4_000_000_000 } else { 7 }),
                    size: on(3).then_some(u64::MAX),
                    atime,
                    mtime,
                };
                assert_eq!(to_fattr4(&s), to_fattr4_by_file_attrs(&s), "{s:?}");
            }
        }
    }
}
