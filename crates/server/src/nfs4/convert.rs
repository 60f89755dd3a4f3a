//! Backend values to NFSv4 ones, for every operation module: errors ([`status`]), names a
//! client may use ([`check_name`]), a directory's change info ([`cinfo`]).

use super::attrs;
use eagernfs_proto::nfs4::*;
use eagernfs_vfs::FsError;

/// The NFSv4 status for a backend error.
pub(crate) fn status(e: FsError) -> Nfsstat4 {
    match e {
        FsError::Perm => Nfsstat4::Perm,
        FsError::NoEnt => Nfsstat4::Noent,
        FsError::Io => Nfsstat4::Io,
        FsError::Nxio => Nfsstat4::Nxio,
        FsError::Access => Nfsstat4::Access,
        FsError::Exist => Nfsstat4::Exist,
        FsError::XDev => Nfsstat4::Xdev,
        FsError::NoDev => Nfsstat4::Nxio,
        FsError::NotDir => Nfsstat4::Notdir,
        FsError::IsDir => Nfsstat4::Isdir,
        FsError::Inval => Nfsstat4::Inval,
        FsError::FBig => Nfsstat4::Fbig,
        FsError::NoSpc => Nfsstat4::Nospc,
        FsError::RoFs => Nfsstat4::Rofs,
        FsError::MLink => Nfsstat4::Mlink,
        FsError::NameTooLong => Nfsstat4::Nametoolong,
        FsError::NotEmpty => Nfsstat4::Notempty,
        FsError::DQuot => Nfsstat4::Dquot,
        FsError::Stale => Nfsstat4::Stale,
        FsError::BadHandle => Nfsstat4::Badhandle,
        FsError::NotSync => Nfsstat4::Inval,
        FsError::BadCookie => Nfsstat4::BadCookie,
        FsError::NotSupp => Nfsstat4::Notsupp,
        FsError::TooSmall => Nfsstat4::Toosmall,
        FsError::ServerFault => Nfsstat4::Serverfault,
        FsError::BadType => Nfsstat4::Badtype,
        FsError::Jukebox => Nfsstat4::Delay,
    }
}

/// A name a client may use: UTF-8, one component, not `.` or `..`, at most NAME_MAX bytes.
pub(crate) fn check_name(name: &[u8]) -> Result<&[u8], Nfsstat4> {
    if name.is_empty() || std::str::from_utf8(name).is_err() {
        return Err(Nfsstat4::Inval);
    }
    if name.len() > eagernfs_vfs::NAME_MAX {
        return Err(Nfsstat4::Nametoolong);
    }
    if name == b"." || name == b".." || name.contains(&b'/') {
        return Err(Nfsstat4::Badname);
    }
    if name.contains(&0) {
        return Err(Nfsstat4::Badchar);
    }
    Ok(name)
}

/// A directory's change around an operation, from the backend's before/after attributes.
pub(crate) fn cinfo(w: &eagernfs_vfs::Wcc) -> ChangeInfo4 {
    let after = w.after.as_ref().map_or(0, |a| attrs::change_of(a.ctime));
    let before = w.before.as_ref().map_or(after, |b| attrs::change_of(b.ctime));
    ChangeInfo4 { atomic: false, before, after }
}
