//! Permission checks from mode bits and credentials (POSIX, without ACLs).
//!
//! Used by backends that keep their own metadata (memory) and by the local
//! backend where it checks in user space (READ/WRITE on cached descriptors,
//! ACCESS). uid 0 is the superuser here: the server has already applied
//! root_squash, so a credential that still says 0 is trusted as root.

use crate::{access, Attr, Credentials, FileType};

/// Read permission bit (in the "other" position).
pub const R: u32 = 4;
/// Write permission bit.
pub const W: u32 = 2;
/// Execute / search permission bit.
pub const X: u32 = 1;

/// The rwx bits (0..=7) that apply to `cred` for an object owned by `uid:gid` with `mode`.
pub fn class_bits(cred: &Credentials, mode: u32, uid: u32, gid: u32) -> u32 {
    if cred.uid == uid {
        (mode >> 6) & 7
    } else if cred.in_group(gid) {
        (mode >> 3) & 7
    } else {
        mode & 7
    }
}

/// May `cred` do `want` (a mask of [`R`], [`W`], [`X`]) to `attr`?
pub fn allowed(cred: &Credentials, attr: &Attr, want: u32) -> bool {
    if cred.uid == 0 {
        // Root may read and write anything; execute needs some x bit
        // (directories are always searchable).
        if want & X != 0 && attr.ftype != FileType::Directory && attr.mode & 0o111 == 0 {
            return false;
        }
        return true;
    }
    class_bits(cred, attr.mode, attr.uid, attr.gid) & want == want
}

/// Like [`allowed`], with the NFS server "owner override": the owner may
/// read and write a file it owns whatever its mode says, because NFS
/// clients check permission at open time and the server must not fail a
/// write to a file created with mode 0444 by the same open
/// (knfsd does the same).
pub fn allowed_io(cred: &Credentials, attr: &Attr, want: u32) -> bool {
    cred.uid == attr.uid || allowed(cred, attr, want)
}

/// Compute the NFSv3 ACCESS bits granted to `cred` from `want`.
pub fn access_bits(cred: &Credentials, attr: &Attr, want: u32) -> u32 {
    let r = allowed(cred, attr, R);
    let w = allowed(cred, attr, W);
    let x = allowed(cred, attr, X);
    let mut granted = 0;
    if attr.ftype == FileType::Directory {
        if r {
            granted |= access::READ;
        }
        if x {
            granted |= access::LOOKUP;
        }
        if w && x {
            granted |= access::MODIFY | access::EXTEND | access::DELETE;
        }
    } else {
        if r {
            granted |= access::READ;
        }
        if w {
            granted |= access::MODIFY | access::EXTEND;
        }
        if x {
            granted |= access::EXECUTE;
        }
        // DELETE on a non-directory depends on its parent; report it when the
        // file itself is writable, as knfsd does.
        if w {
            granted |= access::DELETE;
        }
    }
    granted & want
}

/// May `cred` remove or rename entry owned by `owner` from `dir` (sticky-bit rule)?
/// Assumes write+search on `dir` was already checked.
pub fn sticky_allows(cred: &Credentials, dir: &Attr, owner: u32) -> bool {
    dir.mode & 0o1000 == 0 || cred.uid == 0 || cred.uid == owner || cred.uid == dir.uid
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;

    fn attr(ftype: FileType, mode: u32, uid: u32, gid: u32) -> Attr {
        Attr {
            ftype,
            mode,
            nlink: 1,
            uid,
            gid,
            size: 0,
            used: 0,
            rdev: (0, 0),
            fsid: 1,
            fileid: 2,
            atime: Timestamp::default(),
            mtime: Timestamp::default(),
            ctime: Timestamp::default(),
        }
    }

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Credentials {
        Credentials { uid, gid, groups: groups.to_vec() }
    }

    #[test]
    fn owner_group_other_classes() {
        let f = attr(FileType::Regular, 0o640, 10, 20);
        assert!(allowed(&user(10, 99, &[]), &f, R | W));
        assert!(allowed(&user(11, 20, &[]), &f, R));
        assert!(!allowed(&user(11, 20, &[]), &f, W));
        assert!(allowed(&user(11, 5, &[20]), &f, R));
        assert!(!allowed(&user(11, 5, &[]), &f, R));
    }

    #[test]
    fn owner_class_is_exclusive() {
        // Owner bits apply to the owner even when "other" is more generous.
        let f = attr(FileType::Regular, 0o077, 10, 20);
        assert!(!allowed(&user(10, 20, &[]), &f, R));
        assert!(allowed(&user(11, 21, &[]), &f, R));
    }

    #[test]
    fn root_reads_anything_but_needs_an_x_bit_to_execute() {
        let f = attr(FileType::Regular, 0o600, 10, 20);
        assert!(allowed(&Credentials::root(), &f, R | W));
        assert!(!allowed(&Credentials::root(), &f, X));
        let d = attr(FileType::Directory, 0o000, 10, 20);
        assert!(allowed(&Credentials::root(), &d, X));
    }

    #[test]
    fn access_bits_for_dirs_and_files() {
        let d = attr(FileType::Directory, 0o755, 10, 20);
        assert_eq!(access_bits(&user(10, 20, &[]), &d, access::ALL), 0x1f);
        assert_eq!(access_bits(&user(11, 21, &[]), &d, access::ALL), access::READ | access::LOOKUP);
        let f = attr(FileType::Regular, 0o644, 10, 20);
        assert_eq!(access_bits(&user(11, 21, &[]), &f, access::ALL), access::READ);
        assert_eq!(access_bits(&user(11, 21, &[]), &f, access::MODIFY), 0);
    }

    #[test]
    fn owner_override_for_io() {
        let f = attr(FileType::Regular, 0o444, 10, 20);
        assert!(allowed_io(&user(10, 20, &[]), &f, W));
        assert!(!allowed_io(&user(11, 20, &[]), &f, W));
    }

    #[test]
    fn sticky_directories() {
        let d = attr(FileType::Directory, 0o1777, 0, 0);
        assert!(!sticky_allows(&user(11, 1, &[]), &d, 12));
        assert!(sticky_allows(&user(12, 1, &[]), &d, 12));
    }
}
