//! [`Validator`]: what cached data (memory chunks, a directory's names, disk
//! chunks) is valid against. Below both the inode state and the disk cache,
//! which keep data under it.

use eagernfs_proto::nfs3::{Fattr3, Nfstime3, WccAttr};

/// What cached data is valid against: the attributes that change when a
/// file's content does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Validator {
    pub(crate) mtime: Nfstime3,
    pub(crate) ctime: Nfstime3,
    pub(crate) size: u64,
}

impl Validator {
    pub(crate) fn of(a: &Fattr3) -> Self {
        Validator { mtime: a.mtime, ctime: a.ctime, size: a.size }
    }
    pub(crate) fn of_wcc(a: &WccAttr) -> Self {
        Validator { mtime: a.mtime, ctime: a.ctime, size: a.size }
    }
}
