//! Attributes: backend values ([`Attr`], [`FsProperties`], [`FsStat`]) to
//! `fattr4` for GETATTR, READDIR and VERIFY, and `fattr4` to a backend
//! [`SetAttr`] for SETATTR, CREATE and OPEN.
//!
//! The change attribute is the ctime in nanoseconds: every change of data
//! or metadata sets the ctime, and Linux's file systems stamp it finely
//! enough (multigrain timestamps, 6.13+) that two changes a client could
//! tell apart never share one; the memory backend stamps from the clock in
//! nanoseconds. Owners go out as numbers (as knfsd does for AUTH_SYS) and
//! come in as numbers, `number@domain`, or `name@domain` in the configured
//! id domain.

use super::fh::{Cur, Obj};
use super::Nfs4;
use crate::call::Call;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::{Attr, FileType, FsProperties, FsStat, SetAttr, SetTime, Timestamp};
use eagernfs_xdr::{Bytes, Opaque};

/// The fsid of the pseudo-root's directories (exports use their id as `major`, a u32).
pub(crate) const PSEUDO_FSID: Fsid4 = Fsid4 { major: u64::MAX, minor: u64::MAX };

/// Attributes this server returns (and, the writable ones, sets).
pub(crate) const SUPPORTED: &[u32] = &[
    FATTR4_SUPPORTED_ATTRS,
    FATTR4_TYPE,
    FATTR4_FH_EXPIRE_TYPE,
    FATTR4_CHANGE,
    FATTR4_SIZE,
    FATTR4_LINK_SUPPORT,
    FATTR4_SYMLINK_SUPPORT,
    FATTR4_NAMED_ATTR,
    FATTR4_FSID,
    FATTR4_UNIQUE_HANDLES,
    FATTR4_LEASE_TIME,
    FATTR4_RDATTR_ERROR,
    FATTR4_ACLSUPPORT,
    FATTR4_CANSETTIME,
    FATTR4_CASE_INSENSITIVE,
    FATTR4_CASE_PRESERVING,
    FATTR4_CHOWN_RESTRICTED,
    FATTR4_FILEHANDLE,
    FATTR4_FILEID,
    FATTR4_FILES_AVAIL,
    FATTR4_FILES_FREE,
    FATTR4_FILES_TOTAL,
    FATTR4_HOMOGENEOUS,
    FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK,
    FATTR4_MAXNAME,
    FATTR4_MAXREAD,
    FATTR4_MAXWRITE,
    FATTR4_MODE,
    FATTR4_NO_TRUNC,
    FATTR4_NUMLINKS,
    FATTR4_OWNER,
    FATTR4_OWNER_GROUP,
    FATTR4_RAWDEV,
    FATTR4_SPACE_AVAIL,
    FATTR4_SPACE_FREE,
    FATTR4_SPACE_TOTAL,
    FATTR4_SPACE_USED,
    FATTR4_TIME_ACCESS,
    FATTR4_TIME_ACCESS_SET,
    FATTR4_TIME_DELTA,
    FATTR4_TIME_METADATA,
    FATTR4_TIME_MODIFY,
    FATTR4_TIME_MODIFY_SET,
    FATTR4_MOUNTED_ON_FILEID,
    FATTR4_SUPPATTR_EXCLCREAT,
    FATTR4_XATTR_SUPPORT,
    FATTR4_TIME_DELEG_ACCESS,
    FATTR4_TIME_DELEG_MODIFY,
    FATTR4_OPEN_ARGUMENTS,
];

/// What OPEN accepts (`open_arguments`, RFC 9754 §3): every access and deny,
/// the wishes about delegations it honours (a write or read delegation is
/// asked for by the access wanted; delegated timestamps), every claim but
/// the two of a delegation from before a restart, every create mode.
pub(crate) fn open_arguments() -> OpenArguments4 {
    OpenArguments4 {
        oa_share_access: Bitmap4::from_bits(&[1, 2, 3]),
        oa_share_deny: Bitmap4::from_bits(&[0, 1, 2, 3]),
        oa_share_access_want: Bitmap4::from_bits(&[
            open_args_want::ANY_DELEG,
            open_args_want::NO_DELEG,
            open_args_want::CANCEL,
            open_args_want::DELEG_TIMESTAMPS,
        ]),
        // CLAIM_NULL, _PREVIOUS, _DELEGATE_CUR, _FH, _DELEG_CUR_FH.
        oa_open_claim: Bitmap4::from_bits(&[0, 1, 2, 4, 5]),
        // UNCHECKED4, GUARDED4, EXCLUSIVE4, EXCLUSIVE4_1.
        oa_create_mode: Bitmap4::from_bits(&[0, 1, 2, 3]),
    }
}

/// What an EXCLUSIVE4_1 create may set besides its verifier (the times
/// hold the verifier until the first SETATTR).
pub(crate) const EXCLCREAT: &[u32] = &[FATTR4_SIZE, FATTR4_MODE, FATTR4_OWNER, FATTR4_OWNER_GROUP];

pub(crate) fn supported() -> Bitmap4 {
    Bitmap4::from_bits(SUPPORTED)
}

/// The change attribute of an object with ctime `t`.
pub(crate) fn change_of(t: Timestamp) -> u64 {
    (t.secs.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(t.nsecs as u64)
}

pub(crate) fn time4(t: Timestamp) -> Nfstime4 {
    Nfstime4 { seconds: t.secs, nseconds: t.nsecs }
}

fn ftype4(t: FileType) -> NfsFtype4 {
    match t {
        FileType::Regular => NfsFtype4::Reg,
        FileType::Directory => NfsFtype4::Dir,
        FileType::BlockDevice => NfsFtype4::Blk,
        FileType::CharDevice => NfsFtype4::Chr,
        FileType::Symlink => NfsFtype4::Lnk,
        FileType::Socket => NfsFtype4::Sock,
        FileType::Fifo => NfsFtype4::Fifo,
    }
}

/// The attributes of a pseudo directory.
pub(crate) fn pseudo_attr(v4: &Nfs4, id: u32) -> Attr {
    Attr {
        ftype: FileType::Directory,
        mode: 0o555,
        nlink: 2,
        uid: 0,
        gid: 0,
        size: 4096,
        used: 4096,
        rdev: (0, 0),
        fsid: 0,
        fileid: id as u64,
        atime: v4.started,
        mtime: v4.started,
        ctime: v4.started,
    }
}

/// Everything that goes into one object's `fattr4`.
pub(crate) struct Source<'a, 'c> {
    pub(crate) cur: &'a Cur<'c>,
    pub(crate) attr: &'a Attr,
    /// The fileid of the directory an export root is mounted on (its pseudo directory).
    pub(crate) mounted_on: Option<u64>,
}

/// Encode the attributes in `want` that this server supports (write-only ones are the caller's to refuse).
pub(crate) fn encode(v4: &Nfs4, call: &Call, src: &Source, want: &Bitmap4) -> Fattr4 {
    let has = |n| want.contains(n);
    let a = src.attr;
    let (fsid, props, obj): (Fsid4, FsProperties, Option<&Obj>) = match src.cur {
        Cur::Pseudo(_) => (PSEUDO_FSID, pseudo_properties(), None),
        Cur::Obj(o) => {
            (Fsid4 { major: o.export.id as u64, minor: a.fsid }, o.backend().properties(), Some(o))
        }
    };
    let stat = if [
        FATTR4_FILES_AVAIL,
        FATTR4_FILES_FREE,
        FATTR4_FILES_TOTAL,
        FATTR4_SPACE_AVAIL,
        FATTR4_SPACE_FREE,
        FATTR4_SPACE_TOTAL,
    ]
    .iter()
    .any(|n| has(*n))
    {
        obj.and_then(|o| o.backend().fsstat(&o.fh).ok()).unwrap_or_default()
    } else {
        FsStat::default()
    };
    let cfg = &call.state.config;
    let mut f = FileAttrs::default();
    if has(FATTR4_SUPPORTED_ATTRS) {
        f.supported_attrs = Some(supported());
    }
    if has(FATTR4_TYPE) {
        f.ftype = Some(ftype4(a.ftype));
    }
    if has(FATTR4_FH_EXPIRE_TYPE) {
        f.fh_expire_type = Some(FH4_PERSISTENT);
    }
    if has(FATTR4_CHANGE) {
        f.change = Some(change_of(a.ctime));
    }
    if has(FATTR4_SIZE) {
        f.size = Some(a.size);
    }
    if has(FATTR4_LINK_SUPPORT) {
        f.link_support = Some(props.supports_hard_links);
    }
    if has(FATTR4_SYMLINK_SUPPORT) {
        f.symlink_support = Some(props.supports_symlinks);
    }
    if has(FATTR4_NAMED_ATTR) {
        f.named_attr = Some(false);
    }
    if has(FATTR4_FSID) {
        f.fsid = Some(fsid);
    }
    if has(FATTR4_UNIQUE_HANDLES) {
        f.unique_handles = Some(true);
    }
    if has(FATTR4_LEASE_TIME) {
        f.lease_time = Some(v4.lease_secs());
    }
    if has(FATTR4_RDATTR_ERROR) {
        f.rdattr_error = Some(Nfsstat4::Ok);
    }
    if has(FATTR4_ACLSUPPORT) {
        f.aclsupport = Some(0);
    }
    if has(FATTR4_CANSETTIME) {
        f.cansettime = Some(true);
    }
    if has(FATTR4_CASE_INSENSITIVE) {
        f.case_insensitive = Some(props.case_insensitive);
    }
    if has(FATTR4_CASE_PRESERVING) {
        f.case_preserving = Some(props.case_preserving);
    }
    if has(FATTR4_CHOWN_RESTRICTED) {
        f.chown_restricted = Some(true);
    }
    if has(FATTR4_FILEHANDLE) {
        f.filehandle = Some(src.cur.wire());
    }
    if has(FATTR4_FILEID) {
        f.fileid = Some(a.fileid);
    }
    if has(FATTR4_FILES_AVAIL) {
        f.files_avail = Some(stat.avail_files);
    }
    if has(FATTR4_FILES_FREE) {
        f.files_free = Some(stat.free_files);
    }
    if has(FATTR4_FILES_TOTAL) {
        f.files_total = Some(stat.total_files);
    }
    if has(FATTR4_HOMOGENEOUS) {
        f.homogeneous = Some(true);
    }
    if has(FATTR4_MAXFILESIZE) {
        f.maxfilesize = Some(props.max_file_size);
    }
    if has(FATTR4_MAXLINK) {
        f.maxlink = Some(props.link_max);
    }
    if has(FATTR4_MAXNAME) {
        f.maxname = Some(props.name_max);
    }
    if has(FATTR4_MAXREAD) {
        f.maxread = Some(cfg.read_max_bytes as u64);
    }
    if has(FATTR4_MAXWRITE) {
        f.maxwrite = Some(cfg.write_max_bytes as u64);
    }
    if has(FATTR4_MODE) {
        f.mode = Some(a.mode & 0o7777);
    }
    if has(FATTR4_NO_TRUNC) {
        f.no_trunc = Some(true);
    }
    if has(FATTR4_NUMLINKS) {
        f.numlinks = Some(a.nlink);
    }
    if has(FATTR4_OWNER) {
        f.owner = Some(Opaque(Bytes::from(a.uid.to_string())));
    }
    if has(FATTR4_OWNER_GROUP) {
        f.owner_group = Some(Opaque(Bytes::from(a.gid.to_string())));
    }
    if has(FATTR4_RAWDEV) {
        f.rawdev = Some(Specdata4 { specdata1: a.rdev.0, specdata2: a.rdev.1 });
    }
    if has(FATTR4_SPACE_AVAIL) {
        f.space_avail = Some(stat.avail_bytes);
    }
    if has(FATTR4_SPACE_FREE) {
        f.space_free = Some(stat.free_bytes);
    }
    if has(FATTR4_SPACE_TOTAL) {
        f.space_total = Some(stat.total_bytes);
    }
    if has(FATTR4_SPACE_USED) {
        f.space_used = Some(a.used);
    }
    if has(FATTR4_TIME_ACCESS) {
        f.time_access = Some(time4(a.atime));
    }
    if has(FATTR4_TIME_DELTA) {
        f.time_delta = Some(time4(props.time_delta));
    }
    if has(FATTR4_TIME_METADATA) {
        f.time_metadata = Some(time4(a.ctime));
    }
    if has(FATTR4_TIME_MODIFY) {
        f.time_modify = Some(time4(a.mtime));
    }
    if has(FATTR4_MOUNTED_ON_FILEID) {
        f.mounted_on_fileid = Some(src.mounted_on.unwrap_or(a.fileid));
    }
    if has(FATTR4_XATTR_SUPPORT) {
        // Whether the backend keeps extended attributes for this object.
        f.xattr_support = Some(obj.is_some_and(|o| o.backend().listxattr(&o.cred, &o.fh).is_ok()));
    }
    if has(FATTR4_SUPPATTR_EXCLCREAT) {
        f.suppattr_exclcreat = Some(Bitmap4::from_bits(EXCLCREAT));
    }
    if has(FATTR4_TIME_DELEG_ACCESS) {
        f.time_deleg_access = Some(time4(a.atime));
    }
    if has(FATTR4_TIME_DELEG_MODIFY) {
        f.time_deleg_modify = Some(time4(a.mtime));
    }
    if has(FATTR4_OPEN_ARGUMENTS) {
        f.open_arguments = Some(open_arguments());
    }
    f.to_fattr()
}

fn pseudo_properties() -> FsProperties {
    FsProperties {
        max_file_size: 0,
        time_delta: Timestamp { secs: 0, nsecs: 1 },
        supports_hard_links: false,
        supports_symlinks: false,
        link_max: 1,
        name_max: eagernfs_vfs::NAME_MAX as u32,
        case_insensitive: false,
        case_preserving: true,
        holes_reported: true,
    }
}

/// A GETATTR request naming a write-only attribute is NFS4ERR_INVAL (RFC 8881 §18.7.3).
pub(crate) fn check_readable(want: &Bitmap4) -> Result<(), Nfsstat4> {
    if want.iter().any(is_write_only) {
        return Err(Nfsstat4::Inval);
    }
    Ok(())
}

/// What a client asked to set.
#[derive(Debug, Default)]
pub(crate) struct ToSet {
    pub(crate) set: SetAttr,
    /// The attributes named (SETATTR's `attrsset` when it succeeds).
    pub(crate) mask: Bitmap4,
    /// Delegated times (RFC 9754: SETATTR by a write delegation's holder only).
    pub(crate) deleg_atime: Option<Nfstime4>,
    pub(crate) deleg_mtime: Option<Nfstime4>,
}

/// Decode attributes to set (CREATE, OPEN's create): no delegated times.
pub(crate) fn decode_set(v4: &Nfs4, f: &Fattr4) -> Result<ToSet, Nfsstat4> {
    let t = decode_setattr(v4, f)?;
    if t.deleg_atime.is_some() || t.deleg_mtime.is_some() {
        return Err(Nfsstat4::Inval);
    }
    Ok(t)
}

/// Decode attributes to set by SETATTR (delegated times included: the caller checks the stateid).
pub(crate) fn decode_setattr(v4: &Nfs4, f: &Fattr4) -> Result<ToSet, Nfsstat4> {
    let supported = supported();
    for n in f.attrmask.iter() {
        if !supported.contains(n) {
            return Err(Nfsstat4::Attrnotsupp);
        }
        if is_read_only(n) {
            return Err(Nfsstat4::Inval);
        }
    }
    let a = FileAttrs::from_fattr(f).map_err(Nfsstat4::from)?;
    let mut set = SetAttr { size: a.size, mode: a.mode.map(|m| m & 0o7777), ..Default::default() };
    if let Some(o) = &a.owner {
        set.uid = Some(parse_owner(o, &v4.config.id_domain, false)?);
    }
    if let Some(g) = &a.owner_group {
        set.gid = Some(parse_owner(g, &v4.config.id_domain, true)?);
    }
    set.atime = a.time_access_set.map(settime).transpose()?.unwrap_or(SetTime::DontChange);
    set.mtime = a.time_modify_set.map(settime).transpose()?.unwrap_or(SetTime::DontChange);
    let mut mask = f.attrmask.clone();
    mask.trim();
    Ok(ToSet { set, mask, deleg_atime: a.time_deleg_access, deleg_mtime: a.time_deleg_modify })
}

fn settime(t: Settime4) -> Result<SetTime, Nfsstat4> {
    Ok(match t {
        Settime4::ServerTime => SetTime::ServerTime,
        Settime4::ClientTime(t) if t.nseconds >= 1_000_000_000 => return Err(Nfsstat4::Inval),
        Settime4::ClientTime(t) => SetTime::ClientTime(Timestamp { secs: t.seconds, nsecs: t.nseconds }),
    })
}

/// An owner or group: `1000`, `1000@any.domain`, or `name@domain` in our id domain.
pub(crate) fn parse_owner(s: &[u8], domain: &str, group: bool) -> Result<u32, Nfsstat4> {
    let s = std::str::from_utf8(s).map_err(|_| Nfsstat4::Badowner)?;
    let (name, dom) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        return name.parse().map_err(|_| Nfsstat4::Badowner);
    }
    match dom {
        Some(d) if !name.is_empty() && d.eq_ignore_ascii_case(domain) => {
            lookup_id(name, group).ok_or(Nfsstat4::Badowner)
        }
        _ => Err(Nfsstat4::Badowner),
    }
}

/// The uid of user `name` (or gid of group `name`) from the system's databases.
fn lookup_id(name: &str, group: bool) -> Option<u32> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    if group {
        // SAFETY: zeroed `group` is a valid out-parameter; buf outlives the call; result is
        // checked before use.
        unsafe {
            let mut g: libc::group = std::mem::zeroed();
            let mut out: *mut libc::group = std::ptr::null_mut();
            let r = libc::getgrnam_r(cname.as_ptr(), &mut g, buf.as_mut_ptr().cast(), buf.len(), &mut out);
            (r == 0 && !out.is_null()).then_some(g.gr_gid)
        }
    } else {
        // SAFETY: as above, for `passwd`.
        unsafe {
            let mut p: libc::passwd = std::mem::zeroed();
            let mut out: *mut libc::passwd = std::ptr::null_mut();
            let r = libc::getpwnam_r(cname.as_ptr(), &mut p, buf.as_mut_ptr().cast(), buf.len(), &mut out);
            (r == 0 && !out.is_null()).then_some(p.pw_uid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_in_every_accepted_form() {
        assert_eq!(parse_owner(b"1000", "example.org", false), Ok(1000));
        assert_eq!(parse_owner(b"1000@anywhere", "example.org", false), Ok(1000));
        assert_eq!(parse_owner(b"root@EXAMPLE.org", "example.org", false), Ok(0));
        assert_eq!(parse_owner(b"root@example.org", "example.org", true), Ok(0));
        assert_eq!(parse_owner(b"root@other.org", "example.org", false), Err(Nfsstat4::Badowner));
        assert_eq!(parse_owner(b"root", "example.org", false), Err(Nfsstat4::Badowner));
        assert_eq!(
            parse_owner(b"no-such-user-here@example.org", "example.org", false),
            Err(Nfsstat4::Badowner)
        );
        assert_eq!(parse_owner(b"99999999999", "example.org", false), Err(Nfsstat4::Badowner));
        assert_eq!(parse_owner(b"\xff", "example.org", false), Err(Nfsstat4::Badowner));
        assert_eq!(parse_owner(b"", "example.org", false), Err(Nfsstat4::Badowner));
    }

    #[test]
    fn change_follows_ctime_to_the_nanosecond() {
        let a = change_of(Timestamp { secs: 5, nsecs: 1 });
        let b = change_of(Timestamp { secs: 5, nsecs: 2 });
        assert!(b > a);
        assert_eq!(change_of(Timestamp { secs: -3, nsecs: 0 }), 0);
    }
}
