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
use eagernfs_xdr::{Bytes, Encode, Opaque};

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

/// Bytes [`encode`] reserves for the values: what a READDIR entry or a GETATTR carries (type,
/// sizes, ids, owners, times, a handle) without growing.
const VALS_BYTES_TYPICAL: usize = 256;

/// The attributes that need the backend's [`FsProperties`].
const NEEDS_PROPS: &[u32] = &[
    FATTR4_LINK_SUPPORT,
    FATTR4_SYMLINK_SUPPORT,
    FATTR4_CASE_INSENSITIVE,
    FATTR4_CASE_PRESERVING,
    FATTR4_MAXFILESIZE,
    FATTR4_MAXLINK,
    FATTR4_MAXNAME,
    FATTR4_TIME_DELTA,
];

/// The attributes that need the backend's [`FsStat`] (a system call).
const NEEDS_STAT: &[u32] = &FATTR4_FSSTAT;

/// Encode the attributes in `want` that this server supports (write-only ones are the caller's
/// to refuse).
///
/// Each value goes straight into the `fattr4`'s buffer, in bit order, as it is found: no
/// [`FileAttrs`] with every attribute an `Option`, no owner `String`s, no mask computed after
/// (a READDIR encodes this per entry: issue 34's profile). The bytes are those of
/// `FileAttrs::to_fattr` of the same values (the test `direct_encoding_is_file_attrs_encoding`).
pub(crate) fn encode(v4: &Nfs4, call: &Call, src: &Source, want: &Bitmap4) -> Fattr4 {
    let a = src.attr;
    let obj: Option<&Obj> = match src.cur {
        Cur::Pseudo(_) => None,
        Cur::Obj(o) => Some(o),
    };
    let fsid = match obj {
        None => PSEUDO_FSID,
        Some(o) => Fsid4 { major: o.export.id as u64, minor: a.fsid },
    };
    let asked = |set: &[u32]| set.iter().any(|n| want.contains(*n));
    let props = if asked(NEEDS_PROPS) {
        obj.map_or_else(pseudo_properties, |o| o.backend().properties())
    } else {
        pseudo_properties()
    };
    let stat = if asked(NEEDS_STAT) {
        obj.and_then(|o| o.backend().fsstat(&o.fh).ok()).unwrap_or_default()
    } else {
        FsStat::default()
    };
    let values = Values {
        attr: a,
        fsid,
        props,
        stat,
        lease_secs: v4.lease_secs(),
        read_max: call.state.config.read_max_bytes as u64,
        write_max: call.state.config.write_max_bytes as u64,
        mounted_on: src.mounted_on.unwrap_or(a.fileid),
    };
    // The handle straight from the object's wire form (a clone of a `Bytes` made for this
    // reply would allocate to share it).
    let handle = |v: &mut Vec<u8>| match src.cur {
        Cur::Pseudo(id) => eagernfs_xdr::encode_opaque(v, &id.to_be_bytes()),
        Cur::Obj(o) => eagernfs_xdr::encode_opaque(v, &o.wire),
    };
    // Whether the backend keeps extended attributes for this object.
    let xattrs = || obj.is_some_and(|o| o.backend().listxattr(&o.cred, &o.fh).is_ok());
    encode_values(&values, handle, xattrs, want)
}

/// [`encode`] of `values`, the file handle (`handle` appends it) and whether the object has
/// extended attributes (each asked only if wanted).
fn encode_values(
    values: &Values,
    handle: impl FnOnce(&mut Vec<u8>),
    xattrs: impl FnOnce() -> bool,
    want: &Bitmap4,
) -> Fattr4 {
    let (mut handle, mut xattrs) = (Some(handle), Some(xattrs));
    // The answer's bitmap: the words of `want`'s, each bit kept as its value is written.
    let mut mask = Bitmap4(vec![0; want.0.len()]);
    let mut vals: Vec<u8> = Vec::with_capacity(VALS_BYTES_TYPICAL);
    for (w, word) in want.0.iter().enumerate() {
        let mut bits = *word;
        while bits != 0 {
            let n = w as u32 * 32 + bits.trailing_zeros();
            bits &= bits - 1;
            let done = match n {
                FATTR4_FILEHANDLE => handle.take().map(|f| f(&mut vals)).is_some(),
                FATTR4_XATTR_SUPPORT => xattrs.take().map(|f| f().encode(&mut vals)).is_some(),
                n => values.encode(n, &mut vals),
            };
            if done {
                mask.0[w] |= 1 << (n % 32);
            }
        }
    }
    mask.trim();
    Fattr4 { attrmask: mask, attr_vals: Opaque(Bytes::from(vals)) }
}

/// What [`encode`]'s values come from, but the handle and the extended attributes.
struct Values<'a> {
    attr: &'a Attr,
    fsid: Fsid4,
    props: FsProperties,
    stat: FsStat,
    lease_secs: u32,
    read_max: u64,
    write_max: u64,
    mounted_on: u64,
}

impl Values<'_> {
    /// Append attribute `n`'s value to `v` if this server returns it (else nothing, and false).
    fn encode(&self, n: u32, v: &mut Vec<u8>) -> bool {
        let (a, props, stat) = (self.attr, &self.props, &self.stat);
        match n {
            FATTR4_SUPPORTED_ATTRS => supported().encode(v),
            FATTR4_TYPE => ftype4(a.ftype).encode(v),
            FATTR4_FH_EXPIRE_TYPE => FH4_PERSISTENT.encode(v),
            FATTR4_CHANGE => change_of(a.ctime).encode(v),
            FATTR4_SIZE => a.size.encode(v),
            FATTR4_LINK_SUPPORT => props.supports_hard_links.encode(v),
            FATTR4_SYMLINK_SUPPORT => props.supports_symlinks.encode(v),
            FATTR4_NAMED_ATTR => false.encode(v),
            FATTR4_FSID => self.fsid.encode(v),
            FATTR4_UNIQUE_HANDLES => true.encode(v),
            FATTR4_LEASE_TIME => self.lease_secs.encode(v),
            FATTR4_RDATTR_ERROR => Nfsstat4::Ok.encode(v),
            FATTR4_ACLSUPPORT => 0u32.encode(v),
            FATTR4_CANSETTIME => true.encode(v),
            FATTR4_CASE_INSENSITIVE => props.case_insensitive.encode(v),
            FATTR4_CASE_PRESERVING => props.case_preserving.encode(v),
            FATTR4_CHOWN_RESTRICTED => true.encode(v),
            FATTR4_FILEID => a.fileid.encode(v),
            FATTR4_FILES_AVAIL => stat.avail_files.encode(v),
            FATTR4_FILES_FREE => stat.free_files.encode(v),
            FATTR4_FILES_TOTAL => stat.total_files.encode(v),
            FATTR4_HOMOGENEOUS => true.encode(v),
            FATTR4_MAXFILESIZE => props.max_file_size.encode(v),
            FATTR4_MAXLINK => props.link_max.encode(v),
            FATTR4_MAXNAME => props.name_max.encode(v),
            FATTR4_MAXREAD => self.read_max.encode(v),
            FATTR4_MAXWRITE => self.write_max.encode(v),
            FATTR4_MODE => (a.mode & 0o7777).encode(v),
            FATTR4_NO_TRUNC => true.encode(v),
            FATTR4_NUMLINKS => a.nlink.encode(v),
            FATTR4_OWNER => encode_id(v, a.uid),
            FATTR4_OWNER_GROUP => encode_id(v, a.gid),
            FATTR4_RAWDEV => Specdata4 { specdata1: a.rdev.0, specdata2: a.rdev.1 }.encode(v),
            FATTR4_SPACE_AVAIL => stat.avail_bytes.encode(v),
            FATTR4_SPACE_FREE => stat.free_bytes.encode(v),
            FATTR4_SPACE_TOTAL => stat.total_bytes.encode(v),
            FATTR4_SPACE_USED => a.used.encode(v),
            FATTR4_TIME_ACCESS => time4(a.atime).encode(v),
            FATTR4_TIME_DELTA => time4(props.time_delta).encode(v),
            FATTR4_TIME_METADATA => time4(a.ctime).encode(v),
            FATTR4_TIME_MODIFY => time4(a.mtime).encode(v),
            FATTR4_MOUNTED_ON_FILEID => self.mounted_on.encode(v),
            FATTR4_SUPPATTR_EXCLCREAT => Bitmap4::from_bits(EXCLCREAT).encode(v),
            FATTR4_TIME_DELEG_ACCESS => time4(a.atime).encode(v),
            FATTR4_TIME_DELEG_MODIFY => time4(a.mtime).encode(v),
            FATTR4_OPEN_ARGUMENTS => open_arguments().encode(v),
            _ => return false,
        }
        true
    }
}

/// An owner or group as it goes out: the number in decimal, as a `utf8str_mixed`.
fn encode_id(v: &mut Vec<u8>, id: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut x = id;
    loop {
        at -= 1;
        digits[at] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    eagernfs_xdr::encode_opaque(v, &digits[at..]);
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
    for n in f.attrmask.iter() {
        if !SUPPORTED.contains(&n) {
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

    #[test]
    fn direct_encoding_is_file_attrs_encoding() {
        let t = |secs, nsecs| Timestamp { secs, nsecs };
        let attr = Attr {
            ftype: FileType::Regular,
            mode: 0o104755,
            nlink: 3,
            uid: 4_000_000_123,
            gid: 0,
            size: 1 << 40,
            used: 8192,
            rdev: (7, 9),
            fsid: 0xfeed,
            fileid: 0x1234_5678_9abc,
            atime: t(1_700_000_000, 5),
            mtime: t(1_700_000_001, 999_999_999),
            ctime: t(1_700_000_002, 1),
        };
        let props = FsProperties {
            max_file_size: u64::MAX / 3,
            time_delta: t(0, 1),
            supports_hard_links: true,
            supports_symlinks: false,
            link_max: 65000,
            name_max: 255,
            case_insensitive: false,
            case_preserving: true,
            holes_reported: true,
        };
        let stat = FsStat {
            total_bytes: 11,
            free_bytes: 12,
            avail_bytes: 13,
            total_files: 14,
            free_files: 15,
            avail_files: 16,
        };
        let values = Values {
            attr: &attr,
            fsid: Fsid4 { major: 3, minor: attr.fsid },
            props: props.clone(),
            stat,
            lease_secs: 90,
            read_max: 1 << 20,
            write_max: 1 << 19,
            mounted_on: 77,
        };
        let wire = NfsFh4 { data: Opaque(Bytes::from_static(b"\0\0\0\x03handle-bytes")) };
        // What the encoder built before it wrote values straight into the buffer.
        let s = |ts: Timestamp| Some(time4(ts));
        let every = FileAttrs {
            supported_attrs: Some(supported()),
            ftype: Some(NfsFtype4::Reg),
            fh_expire_type: Some(FH4_PERSISTENT),
            change: Some(change_of(attr.ctime)),
            size: Some(attr.size),
            link_support: Some(true),
            symlink_support: Some(false),
            named_attr: Some(false),
            fsid: Some(values.fsid),
            unique_handles: Some(true),
            lease_time: Some(90),
            rdattr_error: Some(Nfsstat4::Ok),
            aclsupport: Some(0),
            cansettime: Some(true),
            case_insensitive: Some(false),
            case_preserving: Some(true),
            chown_restricted: Some(true),
            filehandle: Some(wire.clone()),
            fileid: Some(attr.fileid),
            files_avail: Some(16),
            files_free: Some(15),
            files_total: Some(14),
            homogeneous: Some(true),
            maxfilesize: Some(props.max_file_size),
            maxlink: Some(65000),
            maxname: Some(255),
            maxread: Some(1 << 20),
            maxwrite: Some(1 << 19),
            mode: Some(0o4755),
            no_trunc: Some(true),
            numlinks: Some(3),
            owner: Some(Opaque(Bytes::from_static(b"4000000123"))),
            owner_group: Some(Opaque(Bytes::from_static(b"0"))),
            rawdev: Some(Specdata4 { specdata1: 7, specdata2: 9 }),
            space_avail: Some(13),
            space_free: Some(12),
            space_total: Some(11),
            space_used: Some(8192),
            time_access: s(attr.atime),
            time_delta: s(props.time_delta),
            time_metadata: s(attr.ctime),
            time_modify: s(attr.mtime),
            mounted_on_fileid: Some(77),
            suppattr_exclcreat: Some(Bitmap4::from_bits(EXCLCREAT)),
            xattr_support: Some(true),
            time_deleg_access: s(attr.atime),
            time_deleg_modify: s(attr.mtime),
            open_arguments: Some(open_arguments()),
            ..FileAttrs::default()
        };
        // What the mount's READDIR asks for.
        let listing = FileAttrs {
            ftype: every.ftype,
            change: every.change,
            size: every.size,
            fsid: every.fsid,
            rdattr_error: every.rdattr_error,
            filehandle: every.filehandle.clone(),
            fileid: every.fileid,
            mode: every.mode,
            numlinks: every.numlinks,
            owner: every.owner.clone(),
            owner_group: every.owner_group.clone(),
            rawdev: every.rawdev,
            space_used: every.space_used,
            time_access: every.time_access,
            time_metadata: every.time_metadata,
            time_modify: every.time_modify,
            ..FileAttrs::default()
        };
        let ids =
            FileAttrs { fileid: every.fileid, rdattr_error: every.rdattr_error, ..FileAttrs::default() };
        // Write-only, unmodelled or unsupported attributes are left out of the answer.
        let mut all = SUPPORTED.to_vec();
        all.extend([FATTR4_ACL, FATTR4_TIME_ACCESS_SET, FATTR4_HIDDEN, 100]);
        for (want, expected) in [
            (Bitmap4::from_bits(&all), &every),
            (listing.mask(), &listing),
            (ids.mask(), &ids),
            (Bitmap4::default(), &FileAttrs::default()),
            (Bitmap4::from_bits(&[FATTR4_ACL, FATTR4_TIME_MODIFY_SET]), &FileAttrs::default()),
        ] {
            let direct = encode_values(&values, |v| wire.encode(v), || true, &want);
            assert_eq!(direct, expected.to_fattr(), "asked for {want:?}");
        }
        // Only a request for it looks at the extended attributes or makes the handle.
        let direct =
            encode_values(&values, |_| panic!("handle made"), || panic!("xattrs listed"), &ids.mask());
        assert_eq!(direct, ids.to_fattr());
    }
}
