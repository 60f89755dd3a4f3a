//! Directory listing at scale and the namespace operations (mkdir, rmdir, unlink, rename, link,
//! symlink, readlink), each checked against the server's disk, not only against the client.

mod common;

use common::*;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;

const BIG_DIR_ENTRIES: usize = 100_000;

/// A listing of 100,000 entries needs many READDIR(PLUS) pages; a cookie bug shows up as a
/// missing, repeated or invented name.
#[test]
fn listing_100k_entries_returns_each_name_exactly_once() {
    let export = tempfile::tempdir().unwrap();
    let big = export.path().join("big");
    fs::create_dir(&big).unwrap();
    for i in 0..BIG_DIR_ENTRIES {
        fs::File::create(big.join(format!("entry-{i:06}"))).unwrap();
    }
    let server = Server::eagernfs(export.path(), &[]);

    let out = nfs_ls(&server.url("/big"));
    out.assert_success("nfs-ls of the 100k directory");
    let mut seen: HashMap<String, usize> = HashMap::new();
    for name in ls_names(&out) {
        *seen.entry(name).or_default() += 1;
    }
    let repeated: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).take(5).collect();
    assert!(repeated.is_empty(), "names listed more than once, e.g. {repeated:?}");
    let missing: Vec<String> = (0..BIG_DIR_ENTRIES)
        .map(|i| format!("entry-{i:06}"))
        .filter(|n| !seen.contains_key(n))
        .take(5)
        .collect();
    assert!(missing.is_empty(), "names never listed, e.g. {missing:?}");
    assert_eq!(seen.len(), BIG_DIR_ENTRIES, "listing has names that are not in the directory");

    // The same count through nfsop's opendir/readdir path (READDIRPLUS paging in libnfs).
    let mut op = Nfsop::start(&server.url(""));
    assert_eq!(op.ok("readdir-count /big"), BIG_DIR_ENTRIES.to_string());
}

#[test]
fn namespace_operations_change_the_disk() {
    let export = tempfile::tempdir().unwrap();
    let dir = export.path();
    let server = Server::eagernfs(dir, &["-o", "rw,no_root_squash"]);
    let mut op = Nfsop::start(&server.url(""));

    // mkdir, and a second mkdir of the same name fails.
    op.ok("mkdir /d 0750");
    let meta = fs::metadata(dir.join("d")).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.mode() & 0o7777, 0o750, "mkdir mode on disk");
    assert_eq!(op.err("mkdir /d"), "EEXIST");

    // A file with known contents.
    let id = op.ok("open /d/f wc 0644");
    op.ok(&format!("pwrite {id} 0 pat:11:5000"));
    op.ok(&format!("close {id}"));
    assert!(fs::read(dir.join("d/f")).unwrap() == pattern_bytes(11, 0, 5000));

    // rename moves the inode: same contents and inode number under the new name.
    let ino = fs::metadata(dir.join("d/f")).unwrap().ino();
    op.ok("rename /d/f /d/g");
    assert!(!dir.join("d/f").exists(), "rename left the old name");
    assert_eq!(fs::metadata(dir.join("d/g")).unwrap().ino(), ino, "rename changed the inode");
    assert_eq!(op.err("stat /d/f"), "ENOENT");

    // rename over an existing file replaces it.
    fs::write(dir.join("d/victim"), b"old").unwrap();
    op.ok("rename /d/g /d/victim");
    assert_eq!(fs::metadata(dir.join("d/victim")).unwrap().ino(), ino);
    assert!(!dir.join("d/g").exists());

    // link: two names, one inode, nlink 2 both on disk and through the server.
    op.ok("link /d/victim /d/hard");
    let a = fs::metadata(dir.join("d/victim")).unwrap();
    let b = fs::metadata(dir.join("d/hard")).unwrap();
    assert_eq!(a.ino(), b.ino(), "hard link is a different inode");
    assert_eq!(a.nlink(), 2, "nlink on disk after link");
    let st = op.ok("stat /d/hard");
    assert_eq!(field_u64(&st, "nlink"), 2, "nlink through the server: {st}");
    assert_eq!(field_u64(&st, "size"), 5000);

    // symlink + readlink: the target text is stored verbatim and read back verbatim.
    op.ok("symlink ../some/where /d/sym");
    assert_eq!(fs::read_link(dir.join("d/sym")).unwrap().to_str(), Some("../some/where"));
    assert_eq!(op.ok("readlink /d/sym"), "../some/where");
    let lst = op.ok("lstat /d/sym");
    assert_eq!(field_u64(&lst, "mode") & 0o170000, 0o120000, "lstat of a symlink: {lst}");
    // A symlink made on disk reads back through the server too.
    std::os::unix::fs::symlink("target-made-on-disk", dir.join("d/disk-sym")).unwrap();
    assert_eq!(op.ok("readlink /d/disk-sym"), "target-made-on-disk");

    // unlink removes one name; the other keeps the data and nlink drops to 1.
    op.ok("unlink /d/victim");
    assert!(!dir.join("d/victim").exists());
    assert_eq!(fs::metadata(dir.join("d/hard")).unwrap().nlink(), 1);
    assert_eq!(op.err("unlink /d/victim"), "ENOENT");

    // rmdir refuses a non-empty directory, then removes an empty one.
    assert_eq!(op.err("rmdir /d"), "ENOTEMPTY");
    assert!(dir.join("d").is_dir());
    op.ok("mkdir /d/empty");
    op.ok("rmdir /d/empty");
    assert!(!dir.join("d/empty").exists());

    // Directory rename carries its contents.
    op.ok("rename /d /renamed");
    assert!(dir.join("renamed/hard").is_file());
    assert!(!dir.join("d").exists());

    // chmod / truncate go through SETATTR.
    op.ok("chmod /renamed/hard 0600");
    assert_eq!(fs::metadata(dir.join("renamed/hard")).unwrap().mode() & 0o7777, 0o600);
    op.ok("truncate /renamed/hard 10");
    assert!(fs::read(dir.join("renamed/hard")).unwrap() == pattern_bytes(11, 0, 10));

    // A file created on disk after the mount is visible by name and in the listing.
    fs::write(dir.join("renamed/late"), b"late").unwrap();
    let listing = op.ok("readdir /renamed");
    let names: Vec<&str> = listing.split_once(' ').map(|(_, n)| n.split('/').collect()).unwrap_or_default();
    for want in ["hard", "sym", "disk-sym", "late"] {
        assert!(names.contains(&want), "{want} missing from listing {listing:?}");
    }
    assert_eq!(names.len(), 4, "unexpected names in {listing:?}");
}
