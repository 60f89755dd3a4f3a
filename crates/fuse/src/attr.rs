//! Conversions between NFSv3 attributes and what the kernel's FUSE
//! protocol wants.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use eagernfs_proto::nfs3::{Fattr3, Ftype3, Nfstime3, Sattr3, SetTime};
use fuser::{FileAttr, FileType, INodeNo, TimeOrNow};

/// The block size `stat` reports when the server gives none: what `du`
/// divides `used` by.
const STAT_BLOCK_BYTES: u32 = 4096;

/// The FUSE file type of an NFS one.
pub fn file_type(t: Ftype3) -> FileType {
    match t {
        Ftype3::Reg => FileType::RegularFile,
        Ftype3::Dir => FileType::Directory,
        Ftype3::Blk => FileType::BlockDevice,
        Ftype3::Chr => FileType::CharDevice,
        Ftype3::Lnk => FileType::Symlink,
        Ftype3::Sock => FileType::Socket,
        Ftype3::Fifo => FileType::NamedPipe,
    }
}

fn time(t: Nfstime3) -> SystemTime {
    UNIX_EPOCH + Duration::new(u64::from(t.seconds), t.nseconds.min(999_999_999))
}

/// Linux's dev_t encoding (what FUSE's 32-bit `rdev` carries) of an NFS
/// major/minor pair; the kernel's `new_encode_dev`.
pub fn encode_rdev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// FUSE attributes for inode `ino` with NFS attributes `a`.
pub fn file_attr(ino: u64, a: &Fattr3) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: a.size,
        blocks: a.used.div_ceil(512),
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
        crtime: time(a.ctime),
        kind: file_type(a.ftype),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: encode_rdev(a.rdev.specdata1, a.rdev.specdata2),
        blksize: STAT_BLOCK_BYTES,
        flags: 0,
    }
}

fn set_time(t: Option<TimeOrNow>) -> SetTime {
    match t {
        None => SetTime::DontChange,
        // "Now" is the server's now: its clock stamps every other change,
        // so times set this way compare sanely with them.
        Some(TimeOrNow::Now) => SetTime::SetToServerTime,
        // NFSv3's `nfstime3` holds unsigned 32-bit seconds: a time before
        // 1970 is sent as 1970-01-01T00:00:00Z and one after
        // 2106-02-07T06:28:15Z (2^32 - 1 s) as that second. A documented limit
        // of the protocol (README, "Limits"), tested in fuse_posix.rs.
        Some(TimeOrNow::SpecificTime(st)) => {
            let d = st.duration_since(UNIX_EPOCH).unwrap_or_default();
            SetTime::SetToClientTime(Nfstime3 {
                seconds: d.as_secs().min(u64::from(u32::MAX)) as u32,
                nseconds: d.subsec_nanos(),
            })
        }
    }
}

/// The SETATTR arguments for a FUSE setattr.
pub fn sattr(
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
) -> Sattr3 {
    Sattr3 { mode: mode.map(|m| m & 0o7777), uid, gid, size, atime: set_time(atime), mtime: set_time(mtime) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdev_matches_libc_makedev() {
        for (major, minor) in [(8, 1), (259, 3), (1, 300), (4095, 0xfffff)] {
            assert_eq!(u64::from(encode_rdev(major, minor)), libc::makedev(major, minor), "{major}:{minor}");
        }
    }

    #[test]
    fn times_round_trip_through_sattr() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123);
        let s = sattr(
            Some(0o100644),
            None,
            None,
            Some(5),
            Some(TimeOrNow::Now),
            Some(TimeOrNow::SpecificTime(t)),
        );
        assert_eq!(s.mode, Some(0o644), "file type bits are not mode bits");
        assert_eq!(s.atime, SetTime::SetToServerTime);
        assert_eq!(s.mtime, SetTime::SetToClientTime(Nfstime3 { seconds: 1_700_000_000, nseconds: 123 }));
        assert_eq!(time(Nfstime3 { seconds: 1_700_000_000, nseconds: 123 }), t);
    }
}
