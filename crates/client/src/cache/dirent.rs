//! [`DirEntry`]: one entry of a directory listing, as `readdir` returns it
//! and as an inode keeps a listing it may serve again.

use bytes::Bytes;
use eagernfs_proto::nfs3::{Fattr3, Ftype3};

/// A directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Inode number. Exact when the server sent a handle (READDIRPLUS);
    /// otherwise the fileid, which is the inode number a lookup gives
    /// unless it had to be remapped.
    pub ino: u64,
    /// The entry's name.
    pub name: Bytes,
    /// The file type, when known (READDIRPLUS sends it; READDIR does not).
    pub kind: Option<Ftype3>,
    /// Pass this to the next `readdir` to continue after this entry.
    pub offset: u64,
    /// The entry's attributes (READDIRPLUS only).
    pub attr: Option<Fattr3>,
}
