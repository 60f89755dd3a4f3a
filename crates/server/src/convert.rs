//! Conversions between backend values ([`eagernfs_vfs`]) and NFSv3 wire types.

use eagernfs_proto::nfs3::{
    Createhow3, Fattr3, Ftype3, Nfsstat3, Nfstime3, Sattr3, SetTime as WireSetTime, Specdata3,
    WccAttr as WireWcc, WccData,
};
use eagernfs_vfs::{Attr, CreateMode, FileType, FsError, SetAttr, SetTime, Timestamp, Wcc, WccAttr};

pub(crate) fn status(e: FsError) -> Nfsstat3 {
    match e {
        FsError::Perm => Nfsstat3::Perm,
        FsError::NoEnt => Nfsstat3::Noent,
        FsError::Io => Nfsstat3::Io,
        FsError::Nxio => Nfsstat3::Nxio,
        FsError::Access => Nfsstat3::Acces,
        FsError::Exist => Nfsstat3::Exist,
        FsError::XDev => Nfsstat3::Xdev,
        FsError::NoDev => Nfsstat3::Nodev,
        FsError::NotDir => Nfsstat3::Notdir,
        FsError::IsDir => Nfsstat3::Isdir,
        FsError::Inval => Nfsstat3::Inval,
        FsError::FBig => Nfsstat3::Fbig,
        FsError::NoSpc => Nfsstat3::Nospc,
        FsError::RoFs => Nfsstat3::Rofs,
        FsError::MLink => Nfsstat3::Mlink,
        FsError::NameTooLong => Nfsstat3::Nametoolong,
        FsError::NotEmpty => Nfsstat3::Notempty,
        FsError::DQuot => Nfsstat3::Dquot,
        FsError::Stale => Nfsstat3::Stale,
        FsError::BadHandle => Nfsstat3::Badhandle,
        FsError::NotSync => Nfsstat3::NotSync,
        FsError::BadCookie => Nfsstat3::BadCookie,
        FsError::NotSupp => Nfsstat3::Notsupp,
        FsError::TooSmall => Nfsstat3::Toosmall,
        FsError::ServerFault => Nfsstat3::Serverfault,
        FsError::BadType => Nfsstat3::Badtype,
        FsError::Jukebox => Nfsstat3::Jukebox,
    }
}

/// NFSv3 times are unsigned 32-bit seconds: clamp what does not fit (a
/// file stamped before 1970 reads as 1970-01-01T00:00:00Z, one after
/// 2106-02-07T06:28:15Z as that second; both backends alike).
pub(crate) fn time(t: Timestamp) -> Nfstime3 {
    Nfstime3 { seconds: t.secs.clamp(0, u32::MAX as i64) as u32, nseconds: t.nsecs }
}

pub(crate) fn timestamp(t: Nfstime3) -> Timestamp {
    Timestamp { secs: t.seconds as i64, nsecs: t.nseconds.min(999_999_999) }
}

pub(crate) fn ftype(t: FileType) -> Ftype3 {
    match t {
        FileType::Regular => Ftype3::Reg,
        FileType::Directory => Ftype3::Dir,
        FileType::BlockDevice => Ftype3::Blk,
        FileType::CharDevice => Ftype3::Chr,
        FileType::Symlink => Ftype3::Lnk,
        FileType::Socket => Ftype3::Sock,
        FileType::Fifo => Ftype3::Fifo,
    }
}

pub(crate) fn fattr(a: &Attr) -> Fattr3 {
    Fattr3 {
        ftype: ftype(a.ftype),
        mode: a.mode & 0o7777,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        size: a.size,
        used: a.used,
        rdev: Specdata3 { specdata1: a.rdev.0, specdata2: a.rdev.1 },
        fsid: a.fsid,
        fileid: a.fileid,
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
    }
}

pub(crate) fn post_op(a: Option<&Attr>) -> Option<Fattr3> {
    a.map(fattr)
}

pub(crate) fn wcc_attr(w: &WccAttr) -> WireWcc {
    WireWcc { size: w.size, mtime: time(w.mtime), ctime: time(w.ctime) }
}

pub(crate) fn wcc(w: &Wcc) -> WccData {
    WccData { before: w.before.as_ref().map(wcc_attr), after: w.after.as_ref().map(fattr) }
}

fn set_time(t: WireSetTime) -> SetTime {
    match t {
        WireSetTime::DontChange => SetTime::DontChange,
        WireSetTime::SetToServerTime => SetTime::ServerTime,
        WireSetTime::SetToClientTime(t) => SetTime::ClientTime(timestamp(t)),
    }
}

pub(crate) fn sattr(s: &Sattr3) -> SetAttr {
    SetAttr {
        mode: s.mode.map(|m| m & 0o7777),
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        atime: set_time(s.atime),
        mtime: set_time(s.mtime),
    }
}

pub(crate) fn createhow(h: &Createhow3) -> CreateMode {
    match h {
        Createhow3::Unchecked(s) => CreateMode::Unchecked(sattr(s)),
        Createhow3::Guarded(s) => CreateMode::Guarded(sattr(s)),
        Createhow3::Exclusive(v) => CreateMode::Exclusive(*v),
    }
}

pub(crate) fn stable(s: eagernfs_proto::nfs3::StableHow) -> eagernfs_vfs::StableHow {
    use eagernfs_proto::nfs3::StableHow as W;
    match s {
        W::Unstable => eagernfs_vfs::StableHow::Unstable,
        W::DataSync => eagernfs_vfs::StableHow::DataSync,
        W::FileSync => eagernfs_vfs::StableHow::FileSync,
    }
}

pub(crate) fn stable_wire(s: eagernfs_vfs::StableHow) -> eagernfs_proto::nfs3::StableHow {
    use eagernfs_proto::nfs3::StableHow as W;
    match s {
        eagernfs_vfs::StableHow::Unstable => W::Unstable,
        eagernfs_vfs::StableHow::DataSync => W::DataSync,
        eagernfs_vfs::StableHow::FileSync => W::FileSync,
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn times_outside_nfstime3_are_clamped() {
        let t = |secs| time(Timestamp { secs, nsecs: 5 });
        assert_eq!(t(1 << 32).seconds, u32::MAX);
        assert_eq!(t(1 << 40).seconds, u32::MAX);
        assert_eq!(t(u32::MAX as i64).seconds, u32::MAX);
        assert_eq!(t(-1).seconds, 0);
        assert_eq!(t(1_700_000_000).seconds, 1_700_000_000);
    }
}
