//! Credentials: AUTH_SYS uids are enforced by the server against the disk's permissions, and
//! root is squashed to 65534 unless the export says no_root_squash.
//!
//! These tests need root: only a root server can create files owned by someone else, and only
//! root can set up root-owned fixtures for an unprivileged client to be refused.

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;

const USER: &str = "uid=1000&gid=1000";
const ROOT: &str = "uid=0&gid=0";
const SECRET: &[u8] = b"only root may read this";

#[test]
fn unprivileged_user_is_held_to_disk_permissions() {
    if !is_root() && skip("unprivileged_user_is_held_to_disk_permissions", "needs root") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let dir = export.path();
    chmod(dir, 0o755);
    fs::write(dir.join("secret"), SECRET).unwrap();
    chmod(&dir.join("secret"), 0o600);
    fs::create_dir(dir.join("rootdir")).unwrap();
    chmod(&dir.join("rootdir"), 0o755);
    fs::create_dir(dir.join("userdir")).unwrap();
    chown(&dir.join("userdir"), 1000, 1000);
    chmod(&dir.join("userdir"), 0o755);

    let server = Server::eagernfs(dir, &[]);
    let mut op = Nfsop::start(&server.url_with("", USER));

    // Reading a root-owned 0600 file: refused by open (ACCESS) ...
    let kind = op.err("open /secret r");
    assert_eq!(kind, "EACCES", "open of a 0600 root file as uid 1000");
    // ... and by READ itself, which a client need not precede with ACCESS.
    let fh = op.ok("fh /secret");
    let kind = op.err(&format!("read-raw {fh} 0 100"));
    assert_eq!(kind, "NFS3ERR_ACCES", "raw READ of a 0600 root file as uid 1000");
    let cat = nfs_cat(&server.url_with("/secret", USER));
    assert!(!cat.status.success(), "nfs-cat of a 0600 root file succeeded as uid 1000");
    assert!(!cat.stdout_text().contains("only root"), "secret leaked through nfs-cat");

    // Creating in a root-owned 0755 directory.
    assert_eq!(op.err("open /rootdir/new wc 0644"), "EACCES");
    assert_eq!(op.err("mkdir /rootdir/sub"), "EACCES");
    assert!(!dir.join("rootdir/new").exists() && !dir.join("rootdir/sub").exists());
    // Removing someone else's file from a directory we cannot write.
    assert_eq!(op.err("unlink /secret"), "EACCES");
    assert!(dir.join("secret").exists());
    // Giving a file away is root's privilege.
    let id = op.ok("open /userdir/mine wc 0644");
    op.ok(&format!("close {id}"));
    assert_eq!(op.err("chown /userdir/mine 0 0"), "EPERM");

    // Creating in a directory owned by 1000 makes files owned by 1000 on disk.
    let id = op.ok("open /userdir/made-by-1000 wc 0640");
    op.ok(&format!("pwrite {id} 0 hex:68656c6c6f"));
    op.ok(&format!("close {id}"));
    op.ok("mkdir /userdir/subdir-by-1000 0750");
    for name in ["mine", "made-by-1000", "subdir-by-1000"] {
        let meta = fs::metadata(dir.join("userdir").join(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (1000, 1000), "owner of {name} on disk");
    }
    assert_eq!(fs::read(dir.join("userdir/made-by-1000")).unwrap(), b"hello");
    assert_eq!(fs::metadata(dir.join("userdir/made-by-1000")).unwrap().mode() & 0o777, 0o640);
    let st = op.ok("stat /userdir/made-by-1000");
    assert_eq!((field_u64(&st, "uid"), field_u64(&st, "gid")), (1000, 1000), "{st}");

    // Root on the same server is squashed by default, so the secret stays closed to it too.
    let mut root = Nfsop::start(&server.url_with("", ROOT));
    let fh = root.ok("fh /secret");
    assert_eq!(root.err(&format!("read-raw {fh} 0 100")), "NFS3ERR_ACCES", "squashed root read a 0600 file");
}

#[test]
fn root_is_squashed_by_default() {
    if !is_root() && skip("root_is_squashed_by_default", "needs root") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    chmod(export.path(), 0o777);
    let server = Server::eagernfs(export.path(), &[]);
    let mut op = Nfsop::start(&server.url_with("", ROOT));
    let id = op.ok("open /by-root wc 0644");
    op.ok(&format!("close {id}"));
    op.ok("mkdir /dir-by-root");
    for name in ["by-root", "dir-by-root"] {
        let meta = fs::metadata(export.path().join(name)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{name}: root must be squashed to 65534");
    }
}

#[test]
fn no_root_squash_keeps_root() {
    if !is_root() && skip("no_root_squash_keeps_root", "needs root") {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let dir = export.path();
    fs::write(dir.join("secret"), SECRET).unwrap();
    chmod(&dir.join("secret"), 0o600);
    let server = Server::eagernfs(dir, &["-o", "rw,no_root_squash"]);
    let mut op = Nfsop::start(&server.url_with("", ROOT));
    let id = op.ok("open /by-root wc 0644");
    op.ok(&format!("close {id}"));
    let meta = fs::metadata(dir.join("by-root")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (0, 0), "no_root_squash must keep uid 0");
    // Unsquashed root reads the 0600 file.
    let id = op.ok("open /secret r");
    assert_eq!(from_hex(&op.ok(&format!("pread {id} 0 100"))), SECRET);
}
