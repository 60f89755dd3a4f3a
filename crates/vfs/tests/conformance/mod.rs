//! Backend conformance suite: the [`Backend`] contract as executable checks.
//!
//! Every check is a `pub fn(&dyn Backend)` that starts from a fresh,
//! empty backend whose root the superuser may write, works inside its own
//! scratch directory, and panics with a message on the first violation.
//! The checks only assume what Linux (and so knfsd over a local file
//! system) does, so the local backend, run as real fsuid/fsgid, must pass
//! them as well as the memory backend.
//!
//! # Layout
//! - [`Check`], [`CHECKS`], [`run_all`], [`run_selected`]: the entry points.
//! - helpers (credentials, create/read/write/list shortcuts).
//! - the checks, grouped: handles, files, data, attributes, directories,
//!   names (rename/link/symlink/mknod), create modes, READDIR, permissions.
//!
//! # Use
//! ```ignore
//! mod conformance;
//! #[test]
//! fn conformance_suite() {
//!     conformance::run_all(&|| Box::new(MyBackend::new(...)) as Box<dyn Backend>);
//! }
//! ```
//! `make` may return anything that derefs to `dyn Backend` (e.g. a struct
//! that also owns a temporary directory, dropped after the check).

// Each test crate uses the parts it needs; `pub` marks the suite API for
// them (it is not reachable from outside a test crate, which is fine).
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use eagernfs_vfs::{
    access, Attr, Backend, CreateMode, Credentials, DirEntry, FileHandle, FileType, FsError, FsResult,
    NodeKind, SeekWhat, SetAttr, SetTime, StableHow, Timestamp, XattrSet, NAME_MAX, SYMLINK_TARGET_BYTES_MAX,
    XATTR_VALUE_MAX,
};

/// One named check and what it needs from the environment.
pub struct Check {
    pub name: &'static str,
    pub run: fn(&dyn Backend),
    /// Uses credentials other than root (the local backend needs to be able
    /// to switch fsuid/fsgid and supplementary groups).
    pub other_users: bool,
    /// Makes character/block device nodes as root (needs CAP_MKNOD).
    pub device_nodes: bool,
}

/// Builds [`CHECKS`] from `name` or `name: flag flag…`, so the list of
/// checks is written once.
macro_rules! checks {
    (@has $want:ident) => { false };
    (@has $want:ident $first:ident $($rest:ident)*) => {
        checks!(@eq $want $first) || checks!(@has $want $($rest)*)
    };
    (@eq other_users other_users) => { true };
    (@eq device_nodes device_nodes) => { true };
    (@eq $a:ident $b:ident) => { false };
    ($($name:ident $(: $($flag:ident)+)?),* $(,)?) => {
        /// Every check, in a stable order.
        pub const CHECKS: &[Check] = &[$(
            Check {
                name: stringify!($name),
                run: $name,
                other_users: checks!(@has other_users $($($flag)+)?),
                device_nodes: checks!(@has device_nodes $($($flag)+)?),
            }
        ),*];
    };
}

checks! {
    root_and_dot_names,
    garbage_handles_are_refused,
    create_lookup_getattr,
    name_errors,
    read_write_round_trips,
    write_stability_and_commit,
    sparse_files,
    truncation,
    wcc_reports_sizes,
    times_follow_posix,
    setattr_guard,
    mkdir_rmdir_nlink,
    remove_semantics,
    stale_after_remove,
    rename_files,
    rename_directories,
    hard_links,
    symlinks,
    mknod_fifo_and_socket,
    mknod_devices: device_nodes,
    exclusive_create,
    unchecked_and_guarded_create,
    readdir_pages_10k_exactly_once,
    readdir_refused_entry_comes_again,
    readdirplus_attributes,
    readdir_during_concurrent_changes,
    fsstat_and_properties,
    perm_read_write_denied: other_users,
    perm_create_remove_denied: other_users,
    perm_chown_chgrp_chmod: other_users,
    perm_times: other_users,
    perm_sticky_directory: other_users,
    perm_search_needed: other_users,
    perm_owner_override: other_users,
    perm_access_bits: other_users,
    perm_nonroot_creates_own_files: other_users,
    perm_setgid_directory_inherits: other_users,
    v42_allocate_deallocate_seek,
    v42_copy_and_clone,
    xattrs_round_trip,
    xattrs_need_permission: other_users,
}

/// Run every check, each on a fresh backend from `make`.
pub fn run_all<T: Deref<Target = dyn Backend>>(make: &dyn Fn() -> T) {
    run_selected(make, &|_| true)
}

/// Run the checks `keep` selects, each on a fresh backend; report every
/// failure (not just the first) and panic if any failed.
pub fn run_selected<T: Deref<Target = dyn Backend>>(make: &dyn Fn() -> T, keep: &dyn Fn(&Check) -> bool) {
    let mut failed = Vec::new();
    let mut ran = 0;
    for check in CHECKS.iter().filter(|c| keep(c)) {
        ran += 1;
        let started = std::time::Instant::now();
        let backend = make();
        let outcome = catch_unwind(AssertUnwindSafe(|| (check.run)(&*backend)));
        drop(backend);
        // Shown with --nocapture: where a slow backend spends the suite's time.
        eprintln!("conformance: {} {:.2} s", check.name, started.elapsed().as_secs_f64());
        if outcome.is_err() {
            failed.push(check.name);
        }
    }
    assert!(ran > 0, "no conformance check selected");
    assert!(failed.is_empty(), "{} of {ran} conformance checks failed: {failed:?}", failed.len());
}

// ---------------------------------------------------------------- helpers

pub fn root() -> Credentials {
    Credentials::root()
}

/// An ordinary user whose primary group equals its uid.
pub fn user(uid: u32) -> Credentials {
    Credentials { uid, gid: uid, groups: Vec::new() }
}

pub fn mode(m: u32) -> SetAttr {
    SetAttr { mode: Some(m), ..SetAttr::default() }
}

#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: FsResult<T>, allowed: &[FsError], what: &str) -> FsError {
    match r {
        Err(e) if allowed.contains(&e) => e,
        other => panic!("{what}: expected one of {allowed:?}, got {other:?}"),
    }
}

/// A scratch directory (mode 0755, root's) for one check, so no check
/// depends on the export root's own mode or contents.
#[track_caller]
pub fn scratch(b: &dyn Backend) -> FileHandle {
    let r = b.root();
    b.setattr(&root(), &r, &mode(0o755), None).expect("chmod export root");
    mkdir_as(b, &root(), &r, "t", 0o755)
}

#[track_caller]
pub fn mkdir_as(b: &dyn Backend, who: &Credentials, dir: &FileHandle, name: &str, m: u32) -> FileHandle {
    let c = b.mkdir(who, dir, name.as_bytes(), &mode(m)).unwrap_or_else(|e| panic!("mkdir {name}: {e:?}"));
    assert_eq!(c.attr.ftype, FileType::Directory);
    c.handle
}

#[track_caller]
pub fn mkfile_as(b: &dyn Backend, who: &Credentials, dir: &FileHandle, name: &str, m: u32) -> FileHandle {
    let c = b
        .create(who, dir, name.as_bytes(), &CreateMode::Guarded(mode(m)))
        .unwrap_or_else(|e| panic!("create {name}: {e:?}"));
    assert_eq!(c.attr.ftype, FileType::Regular);
    c.handle
}

#[track_caller]
pub fn mkfile(b: &dyn Backend, dir: &FileHandle, name: &str) -> FileHandle {
    mkfile_as(b, &root(), dir, name, 0o644)
}

#[track_caller]
pub fn lookup(b: &dyn Backend, dir: &FileHandle, name: &str) -> FsResult<Attr> {
    b.lookup(&root(), dir, name.as_bytes()).map(|l| l.attr)
}

#[track_caller]
pub fn attr(b: &dyn Backend, fh: &FileHandle) -> Attr {
    b.getattr(fh).expect("getattr")
}

/// Write all of `data` at `offset` in pieces of at most 1 MiB.
#[track_caller]
pub fn write_all(b: &dyn Backend, who: &Credentials, fh: &FileHandle, offset: u64, data: &[u8]) {
    let mut done = 0;
    while done < data.len() {
        let piece = &data[done..data.len().min(done + (1 << 20))];
        let w = b.write(who, fh, offset + done as u64, piece, StableHow::Unstable).expect("write");
        assert!(w.count > 0 && w.count as usize <= piece.len(), "write count {}", w.count);
        done += w.count as usize;
    }
}

/// Read the whole file with `count`-sized reads, checking EOF flags.
#[track_caller]
pub fn read_all_by(b: &dyn Backend, fh: &FileHandle, count: u32) -> Vec<u8> {
    let size = attr(b, fh).size;
    let mut out = Vec::new();
    // Bounded: a backend that never says EOF fails instead of hanging.
    for _ in 0..=size / count.max(1) as u64 + 2 {
        let r = b.read(&root(), fh, out.len() as u64, count).expect("read");
        let reached = out.len() as u64 + r.data.len() as u64;
        out.extend_from_slice(&r.data);
        if r.eof {
            assert_eq!(reached, size, "eof before the end");
            return out;
        }
        assert!(reached < size || r.data.is_empty() || reached == size, "read past the end");
        assert!(!r.data.is_empty(), "a read before EOF returned nothing");
    }
    panic!("no EOF after reading {} of {size} bytes", out.len());
}

#[track_caller]
pub fn read_all(b: &dyn Backend, fh: &FileHandle) -> Vec<u8> {
    read_all_by(b, fh, 64 * 1024)
}

/// A deterministic byte pattern that differs at every offset and between seeds.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// List a directory, accepting at most `page` entries per READDIR call.
#[track_caller]
pub fn list_as(
    b: &dyn Backend,
    who: &Credentials,
    dir: &FileHandle,
    page: usize,
    plus: bool,
) -> Vec<DirEntry> {
    let mut out: Vec<DirEntry> = Vec::new();
    let mut cookie = 0;
    let mut verf = [0u8; 8];
    for _ in 0..1_000_000 {
        let mut taken = 0;
        let info = b
            .readdir(who, dir, cookie, verf, plus, &mut |e| {
                if taken == page {
                    return false;
                }
                taken += 1;
                out.push(e.clone());
                true
            })
            .expect("readdir");
        verf = info.cookieverf;
        if info.eof {
            return out;
        }
        assert!(taken > 0, "READDIR made no progress and said no EOF");
        cookie = out.last().map(|e| e.cookie).expect("an entry was taken");
    }
    panic!("READDIR never reached EOF");
}

#[track_caller]
pub fn list(b: &dyn Backend, dir: &FileHandle, page: usize) -> Vec<DirEntry> {
    list_as(b, &root(), dir, page, false)
}

/// Names in a listing, with how often each appeared.
pub fn name_counts(entries: &[DirEntry]) -> HashMap<Vec<u8>, usize> {
    let mut counts = HashMap::new();
    for e in entries {
        *counts.entry(e.name.to_vec()).or_insert(0) += 1;
    }
    counts
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs() as i64
}

/// A time long ago, with nanoseconds, to set and then see replaced.
const PAST: Timestamp = Timestamp { secs: 1_000_000_000, nsecs: 123_456_789 };

fn set_times(b: &dyn Backend, fh: &FileHandle, t: Timestamp) {
    let set = SetAttr { atime: SetTime::ClientTime(t), mtime: SetTime::ClientTime(t), ..SetAttr::default() };
    b.setattr(&root(), fh, &set, None).expect("set times");
}

#[track_caller]
fn assert_recent(t: Timestamp, what: &str) {
    let n = now_secs();
    assert!((n - 120..=n + 120).contains(&t.secs), "{what} {t:?} is not close to now ({n})");
}

// ---------------------------------------------------------------- handles

/// The root is a directory; `.` and `..` of the root are the root; `..` of
/// a subdirectory is its parent.
pub fn root_and_dot_names(b: &dyn Backend) {
    let r = b.root();
    let ra = attr(b, &r);
    assert_eq!(ra.ftype, FileType::Directory);
    assert_eq!(lookup(b, &r, ".").unwrap().fileid, ra.fileid);
    let up = b.lookup(&root(), &r, b"..").expect("lookup .. of root");
    assert_eq!(up.attr.fileid, ra.fileid, ".. of the root must be the root");
    assert_eq!(attr(b, &up.handle).fileid, ra.fileid);
    let t = scratch(b);
    let sub = mkdir_as(b, &root(), &t, "sub", 0o755);
    assert_eq!(lookup(b, &sub, "..").unwrap().fileid, attr(b, &t).fileid);
    assert_eq!(lookup(b, &sub, ".").unwrap().fileid, attr(b, &sub).fileid);
    assert!(r.0.len() <= eagernfs_vfs::MAX_BACKEND_HANDLE);
    assert!(sub.0.len() <= eagernfs_vfs::MAX_BACKEND_HANDLE);
    // The same object looked up twice is the same object.
    let again = b.lookup(&root(), &t, b"sub").unwrap();
    assert_eq!(attr(b, &again.handle).fileid, attr(b, &sub).fileid);
}

/// Byte strings the backend never issued fail with BadHandle or Stale, on
/// every kind of call, and a mutated valid handle never names another object.
pub fn garbage_handles_are_refused(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    write_all(b, &root(), &f, 0, b"data");
    let fid = attr(b, &f).fileid;
    let mut garbage: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xff; 8],
        vec![0; f.0.len()],
        vec![0xff; f.0.len()],
        vec![0x5a; eagernfs_vfs::MAX_BACKEND_HANDLE],
        vec![0xa5; 200],
        f.0[..f.0.len() - 1].to_vec(),
        [&f.0[..], &[0u8][..]].concat(),
    ];
    garbage.extend(pattern(64, 7).chunks(16).map(|c| c.to_vec()));
    let bad = [FsError::BadHandle, FsError::Stale];
    for g in &garbage {
        let h = FileHandle(g.clone().into());
        expect_err(b.getattr(&h), &bad, "getattr garbage");
        expect_err(b.read(&root(), &h, 0, 10), &bad, "read garbage");
        expect_err(b.write(&root(), &h, 0, b"x", StableHow::FileSync), &bad, "write garbage");
        expect_err(b.lookup(&root(), &h, b"f"), &bad, "lookup in garbage");
        expect_err(b.create(&root(), &h, b"n", &CreateMode::Guarded(mode(0o644))), &bad, "create in garbage");
        expect_err(b.setattr(&root(), &h, &mode(0o600), None), &bad, "setattr garbage");
        expect_err(b.readdir(&root(), &h, 0, [0; 8], false, &mut |_| true), &bad, "readdir garbage");
        expect_err(b.remove(&root(), &h, b"f"), &bad, "remove in garbage");
        expect_err(b.commit(&root(), &h, 0, 0), &bad, "commit garbage");
    }
    // Flip each bit pattern of each byte of a valid handle: either refused,
    // or (a byte the backend ignores) still the same object.
    for i in 0..f.0.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut m = f.0.to_vec();
            m[i] ^= flip;
            match b.getattr(&FileHandle(m.into())) {
                Err(FsError::BadHandle | FsError::Stale) => {}
                Ok(a) => assert_eq!(a.fileid, fid, "byte {i} ^ {flip:#x} named another object"),
                Err(e) => panic!("mutated handle (byte {i}) gave {e:?}, not BadHandle/Stale"),
            }
        }
    }
    assert_eq!(read_all(b, &f), b"data", "garbage calls changed nothing");
}

// ---------------------------------------------------------------- files

/// A created file has the mode asked for (no server umask), the caller as
/// owner, one link, size 0; LOOKUP and GETATTR agree with CREATE.
pub fn create_lookup_getattr(b: &dyn Backend) {
    let t = scratch(b);
    for (i, m) in [0o644, 0o600, 0o777, 0o640, 0o4755, 0o2755, 0o1644].into_iter().enumerate() {
        let name = format!("f{i}");
        let c = b.create(&root(), &t, name.as_bytes(), &CreateMode::Guarded(mode(m))).expect("create");
        assert_eq!(c.attr.mode & 0o7777, m, "mode of {name}");
        assert_eq!((c.attr.uid, c.attr.nlink, c.attr.size), (0, 1, 0));
        assert_eq!(c.attr.ftype, FileType::Regular);
        let l = b.lookup(&root(), &t, name.as_bytes()).expect("lookup");
        assert_eq!(l.attr.fileid, c.attr.fileid);
        assert_eq!(attr(b, &l.handle), attr(b, &c.handle));
        assert_eq!(l.dir_attr.map(|d| d.fileid), Some(attr(b, &t).fileid));
        let after = c.dir_wcc.after.expect("create returns the directory's new attributes");
        assert_eq!(after.fileid, attr(b, &t).fileid);
    }
    let ids: HashSet<u64> = (0..7).map(|i| lookup(b, &t, &format!("f{i}")).unwrap().fileid).collect();
    assert_eq!(ids.len(), 7, "fileids are unique");
    let d = attr(b, &t);
    assert_eq!(d.ftype, FileType::Directory);
    assert_eq!(d.nlink, 2, "a directory without subdirectories has two links");
}

/// NoEnt, NotDir, NameTooLong, Exist where POSIX says.
pub fn name_errors(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "file");
    expect_err(b.lookup(&root(), &t, b"missing"), &[FsError::NoEnt], "lookup missing");
    expect_err(b.lookup(&root(), &f, b"x"), &[FsError::NotDir], "lookup in a file");
    expect_err(
        b.create(&root(), &f, b"x", &CreateMode::Guarded(mode(0o644))),
        &[FsError::NotDir],
        "create in file",
    );
    expect_err(b.mkdir(&root(), &f, b"x", &mode(0o755)), &[FsError::NotDir], "mkdir in file");
    expect_err(b.readdir(&root(), &f, 0, [0; 8], false, &mut |_| true), &[FsError::NotDir], "readdir file");
    let long = vec![b'a'; NAME_MAX + 1];
    expect_err(
        b.create(&root(), &t, &long, &CreateMode::Guarded(mode(0o644))),
        &[FsError::NameTooLong],
        "create long",
    );
    expect_err(b.mkdir(&root(), &t, &long, &mode(0o755)), &[FsError::NameTooLong], "mkdir long");
    expect_err(b.lookup(&root(), &t, &long), &[FsError::NameTooLong, FsError::NoEnt], "lookup long");
    let longest = vec![b'b'; NAME_MAX];
    b.create(&root(), &t, &longest, &CreateMode::Guarded(mode(0o644))).expect("NAME_MAX is allowed");
    expect_err(b.mkdir(&root(), &t, b"file", &mode(0o755)), &[FsError::Exist], "mkdir over file");
    expect_err(
        b.symlink(&root(), &t, b"file", b"x", &SetAttr::default()),
        &[FsError::Exist],
        "symlink over file",
    );
    expect_err(b.readlink(&root(), &f), &[FsError::Inval], "readlink of a file");
    expect_err(b.read(&root(), &t, 0, 10), &[FsError::IsDir, FsError::Inval], "read a directory");
    expect_err(
        b.write(&root(), &t, 0, b"x", StableHow::FileSync),
        &[FsError::IsDir, FsError::Inval],
        "write a directory",
    );
}

// ---------------------------------------------------------------- data

/// Files of many sizes (around block and chunk boundaries) read back exactly,
/// whatever the read size, with EOF only at the end.
pub fn read_write_round_trips(b: &dyn Backend) {
    let t = scratch(b);
    let sizes = [
        0usize,
        1,
        2,
        511,
        512,
        513,
        4095,
        4096,
        4097,
        65535,
        65536,
        65537,
        1 << 20,
        (1 << 20) + 1,
        3 * (1 << 20) + 5,
    ];
    for (i, &size) in sizes.iter().enumerate() {
        let f = mkfile(b, &t, &format!("s{size}"));
        let data = pattern(size, i as u64 + 1);
        write_all(b, &root(), &f, 0, &data);
        let a = attr(b, &f);
        assert_eq!(a.size, size as u64, "size after writing {size}");
        for count in [4099u32, 65536, 1 << 20] {
            assert!(read_all_by(b, &f, count) == data, "content of {size}-byte file read {count} at a time");
        }
        // A read that ends exactly at the end of the file says EOF; one
        // that ends before it does not; one past it returns nothing.
        if size > 0 {
            let r = b.read(&root(), &f, 0, size as u32).unwrap();
            assert!(r.eof && r.data.len() == size, "whole-file read of {size}");
            let r = b.read(&root(), &f, 0, size as u32 - 1).unwrap();
            assert!(!r.eof && r.data.len() == size - 1, "read short of the end of {size}");
        }
        let r = b.read(&root(), &f, size as u64 + 10, 100).unwrap();
        assert!(r.eof && r.data.is_empty(), "read past the end");
    }
    // Overwrites in the middle, across boundaries, then extend.
    let f = lookup_handle(b, &t, &format!("s{}", 3 * (1 << 20) + 5));
    // The last file of the loop: its seed was its index + 1.
    let mut model = pattern(3 * (1 << 20) + 5, sizes.len() as u64);
    for (off, len, seed) in [(65530usize, 20usize, 100u64), (1 << 20, 70000, 101), (3 * (1 << 20), 100, 102)]
    {
        let d = pattern(len, seed);
        write_all(b, &root(), &f, off as u64, &d);
        if model.len() < off + len {
            model.resize(off + len, 0);
        }
        model[off..off + len].copy_from_slice(&d);
    }
    assert!(read_all(b, &f) == model, "content after overwrites and extension");
    assert_eq!(attr(b, &f).size, model.len() as u64);
}

fn lookup_handle(b: &dyn Backend, dir: &FileHandle, name: &str) -> FileHandle {
    b.lookup(&root(), dir, name.as_bytes()).expect("lookup").handle
}

/// WRITE reports its count, a durability at least the one asked for and
/// the backend's verifier; COMMIT returns the same verifier.
pub fn write_stability_and_commit(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    let verf = b.write_verifier();
    assert_eq!(b.write_verifier(), verf, "the verifier is stable while nothing fails");
    for (i, how) in [StableHow::Unstable, StableHow::DataSync, StableHow::FileSync].into_iter().enumerate() {
        let w = b.write(&root(), &f, i as u64 * 100, &[i as u8 + 1; 100], how).expect("write");
        assert_eq!(w.count, 100);
        assert!(w.committed >= how, "asked {how:?}, got {:?}", w.committed);
        assert_eq!(w.verifier, verf);
    }
    let (wcc, cv) = b.commit(&root(), &f, 0, 0).expect("commit");
    assert_eq!(cv, verf, "COMMIT returns the write verifier");
    assert_eq!(wcc.after.map(|a| a.size), Some(300));
    let (_, cv) = b.commit(&root(), &f, 100, 50).expect("commit range");
    assert_eq!(cv, verf);
    let data = read_all(b, &f);
    assert!(data[..100].iter().all(|&x| x == 1) && data[200..].iter().all(|&x| x == 3));
    // An empty write succeeds and changes nothing.
    let w = b.write(&root(), &f, 1000, b"", StableHow::FileSync).expect("empty write");
    assert_eq!(w.count, 0);
    assert_eq!(attr(b, &f).size, 300);
}

/// Writing far past the end leaves a hole that reads as zeros and takes
/// (almost) no space.
pub fn sparse_files(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "sparse");
    let off = 64 << 20;
    write_all(b, &root(), &f, off, b"abc");
    let a = attr(b, &f);
    assert_eq!(a.size, off + 3);
    if b.properties().holes_reported {
        assert!(a.used < 1 << 20, "a 64 MiB hole should not be stored (used {})", a.used);
    } else {
        // A file system that cannot tell stored bytes from holes must not
        // claim less than the file holds.
        assert!(a.used >= a.size, "used {} below the size {}", a.used, a.size);
    }
    let r = b.read(&root(), &f, off - 2, 10).unwrap();
    assert_eq!(&r.data[..], b"\0\0abc");
    assert!(r.eof);
    let r = b.read(&root(), &f, 12345, 4096).unwrap();
    assert!(r.data.len() == 4096 && r.data.iter().all(|&x| x == 0) && !r.eof, "hole reads as zeros");
    // A size set by SETATTR is a hole too.
    let g = mkfile(b, &t, "grown");
    b.setattr(&root(), &g, &SetAttr { size: Some(10 << 20), ..SetAttr::default() }, None).unwrap();
    let a = attr(b, &g);
    assert_eq!(a.size, 10 << 20);
    assert!(if b.properties().holes_reported { a.used < 1 << 20 } else { a.used >= a.size });
    let r = b.read(&root(), &g, (10 << 20) - 100, 1000).unwrap();
    assert!(r.eof && r.data.len() == 100 && r.data.iter().all(|&x| x == 0));
}

/// Shrinking drops data; growing again shows zeros, never the old bytes.
pub fn truncation(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    let data = pattern(200_000, 3);
    write_all(b, &root(), &f, 0, &data);
    let size = |s: u64| SetAttr { size: Some(s), ..SetAttr::default() };
    b.setattr(&root(), &f, &size(100), None).expect("shrink");
    assert_eq!(read_all(b, &f), &data[..100]);
    b.setattr(&root(), &f, &size(150_000), None).expect("grow");
    let back = read_all(b, &f);
    assert_eq!(back.len(), 150_000);
    assert_eq!(&back[..100], &data[..100]);
    assert!(back[100..].iter().all(|&x| x == 0), "old data must not reappear after truncate");
    b.setattr(&root(), &f, &size(0), None).expect("to zero");
    assert_eq!(attr(b, &f).size, 0);
    assert!(read_all(b, &f).is_empty());
    expect_err(b.setattr(&root(), &t, &size(0), None), &[FsError::IsDir, FsError::Inval], "truncate a dir");
}

/// Weak cache consistency: before and after sizes of WRITE, SETATTR,
/// and directory attributes of directory changes.
pub fn wcc_reports_sizes(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    let w = b.write(&root(), &f, 0, &[1; 100], StableHow::Unstable).unwrap();
    assert_eq!(w.wcc.before.map(|x| x.size), Some(0), "WRITE wcc before");
    assert_eq!(w.wcc.after.as_ref().map(|x| x.size), Some(100), "WRITE wcc after");
    let w = b.write(&root(), &f, 150, &[2; 50], StableHow::FileSync).unwrap();
    assert_eq!(w.wcc.before.map(|x| x.size), Some(100));
    assert_eq!(w.wcc.after.as_ref().map(|x| x.size), Some(200));
    let s = b.setattr(&root(), &f, &SetAttr { size: Some(10), ..SetAttr::default() }, None).unwrap();
    assert_eq!(s.before.map(|x| x.size), Some(200), "SETATTR wcc before");
    assert_eq!(s.after.as_ref().map(|x| x.size), Some(10), "SETATTR wcc after");
    let dir_id = attr(b, &t).fileid;
    let c = b.create(&root(), &t, b"g", &CreateMode::Unchecked(mode(0o644))).unwrap();
    assert_eq!(c.dir_wcc.after.map(|a| a.fileid), Some(dir_id));
    let r = b.remove(&root(), &t, b"g").unwrap();
    assert_eq!(r.after.map(|a| a.fileid), Some(dir_id));
    assert!(r.before.is_some(), "REMOVE reports the directory before the change");
}

/// Nanosecond times are stored as given; writes set mtime and ctime; a
/// chmod sets ctime only; directory changes set the directory's mtime.
pub fn times_follow_posix(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    set_times(b, &f, PAST);
    let a = attr(b, &f);
    assert_eq!((a.atime, a.mtime), (PAST, PAST), "client times are stored to the nanosecond");
    assert_recent(a.ctime, "ctime after setattr");
    b.write(&root(), &f, 0, b"x", StableHow::FileSync).unwrap();
    let w = attr(b, &f);
    assert!(w.mtime > PAST, "write sets mtime");
    assert_recent(w.mtime, "mtime after write");
    assert!(w.ctime >= a.ctime, "write sets ctime");
    set_times(b, &f, PAST);
    let before = attr(b, &f);
    b.setattr(&root(), &f, &mode(0o600), None).unwrap();
    let c = attr(b, &f);
    assert_eq!(c.mtime, PAST, "chmod leaves mtime alone");
    assert!(c.ctime >= before.ctime, "chmod sets ctime");
    assert_recent(c.ctime, "ctime after chmod");
    let s = SetAttr { mtime: SetTime::ServerTime, ..SetAttr::default() };
    b.setattr(&root(), &f, &s, None).unwrap();
    assert_recent(attr(b, &f).mtime, "mtime set to server time");

    for step in ["create", "mkdir", "remove", "rename", "link", "rmdir"] {
        set_times(b, &t, PAST);
        match step {
            "create" => drop(mkfile(b, &t, "n")),
            "mkdir" => drop(mkdir_as(b, &root(), &t, "d", 0o755)),
            "remove" => drop(b.remove(&root(), &t, b"n").unwrap()),
            "rename" => drop(b.rename(&root(), &t, b"f", &t, b"f2").unwrap()),
            "link" => drop(b.link(&root(), &f, &t, b"f3").unwrap()),
            _ => drop(b.rmdir(&root(), &t, b"d").unwrap()),
        }
        let d = attr(b, &t);
        assert!(d.mtime > PAST, "{step} sets the directory's mtime");
        assert_recent(d.mtime, step);
    }
}

/// SETATTR with a guard applies only if the ctime still matches.
pub fn setattr_guard(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    let ctime = attr(b, &f).ctime;
    let wrong = Timestamp { secs: ctime.secs - 1000, nsecs: ctime.nsecs };
    expect_err(b.setattr(&root(), &f, &mode(0o600), Some(wrong)), &[FsError::NotSync], "stale guard");
    assert_eq!(attr(b, &f).mode & 0o7777, 0o644, "a refused guarded SETATTR changes nothing");
    let w = b.setattr(&root(), &f, &mode(0o600), Some(ctime)).expect("matching guard");
    assert_eq!(w.after.map(|a| a.mode & 0o7777), Some(0o600));
    assert_eq!(attr(b, &f).mode & 0o7777, 0o600);
}

// ---------------------------------------------------------------- directories

/// Directory link counts are 2 + subdirectories; RMDIR needs an empty directory.
pub fn mkdir_rmdir_nlink(b: &dyn Backend) {
    let t = scratch(b);
    let base = attr(b, &t).nlink;
    let d = mkdir_as(b, &root(), &t, "d", 0o750);
    let da = attr(b, &d);
    assert_eq!((da.nlink, da.mode & 0o7777, da.uid), (2, 0o750, 0));
    assert_eq!(attr(b, &t).nlink, base + 1, "mkdir adds a link to the parent");
    let e = mkdir_as(b, &root(), &d, "e", 0o755);
    mkfile(b, &d, "file");
    assert_eq!(attr(b, &d).nlink, 3, "a file does not add a directory link");
    expect_err(b.rmdir(&root(), &t, b"d"), &[FsError::NotEmpty, FsError::Exist], "rmdir non-empty");
    expect_err(b.rmdir(&root(), &d, b"file"), &[FsError::NotDir], "rmdir a file");
    expect_err(b.rmdir(&root(), &d, b"nope"), &[FsError::NoEnt], "rmdir missing");
    b.rmdir(&root(), &d, b"e").expect("rmdir empty");
    expect_err(b.getattr(&e), &[FsError::Stale], "removed directory handle");
    assert_eq!(attr(b, &d).nlink, 2);
    b.remove(&root(), &d, b"file").unwrap();
    b.rmdir(&root(), &t, b"d").expect("rmdir now empty");
    assert_eq!(attr(b, &t).nlink, base);
    expect_err(lookup(b, &t, "d"), &[FsError::NoEnt], "lookup removed dir");
    expect_err(
        b.mkdir(&root(), &d, b"x", &mode(0o755)),
        &[FsError::Stale, FsError::NoEnt],
        "mkdir in removed dir",
    );
}

/// REMOVE takes away one name and refuses directories.
pub fn remove_semantics(b: &dyn Backend) {
    let t = scratch(b);
    mkdir_as(b, &root(), &t, "d", 0o755);
    expect_err(b.remove(&root(), &t, b"d"), &[FsError::IsDir, FsError::Perm], "remove a directory");
    expect_err(b.remove(&root(), &t, b"missing"), &[FsError::NoEnt], "remove missing");
    let f = mkfile(b, &t, "f");
    b.remove(&root(), &t, b"f").expect("remove");
    expect_err(lookup(b, &t, "f"), &[FsError::NoEnt], "lookup removed");
    expect_err(b.remove(&root(), &t, b"f"), &[FsError::NoEnt], "remove twice");
    expect_err(b.getattr(&f), &[FsError::Stale], "getattr removed");
    // The name can be used again, for a new object.
    let g = mkfile(b, &t, "f");
    expect_err(b.getattr(&f), &[FsError::Stale], "old handle still stale after the name is reused");
    assert_eq!(attr(b, &g).size, 0);
}

/// After its last name goes, every call on a handle fails with Stale.
pub fn stale_after_remove(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    write_all(b, &root(), &f, 0, b"hello");
    let d = mkdir_as(b, &root(), &t, "d", 0o755);
    b.remove(&root(), &t, b"f").unwrap();
    b.rmdir(&root(), &t, b"d").unwrap();
    let st = [FsError::Stale];
    expect_err(b.getattr(&f), &st, "getattr");
    expect_err(b.read(&root(), &f, 0, 5), &st, "read");
    expect_err(b.write(&root(), &f, 0, b"x", StableHow::FileSync), &st, "write");
    expect_err(b.setattr(&root(), &f, &mode(0o600), None), &st, "setattr");
    expect_err(b.access(&root(), &f, access::READ), &st, "access");
    expect_err(b.commit(&root(), &f, 0, 0), &st, "commit");
    expect_err(b.lookup(&root(), &d, b"x"), &[FsError::Stale, FsError::NoEnt], "lookup in removed dir");
    expect_err(b.readdir(&root(), &d, 0, [0; 8], false, &mut |_| true), &st, "readdir removed dir");
    expect_err(b.link(&root(), &f, &t, b"again"), &[FsError::Stale, FsError::NoEnt], "link removed file");
}

// ---------------------------------------------------------------- names

/// Rename moves a name, replaces a file target (whose handle goes stale),
/// keeps the object, and refuses type mismatches.
pub fn rename_files(b: &dyn Backend) {
    let t = scratch(b);
    let a = mkfile(b, &t, "a");
    write_all(b, &root(), &a, 0, b"A");
    let id = attr(b, &a).fileid;
    let (from, to) = b.rename(&root(), &t, b"a", &t, b"b").expect("rename");
    assert!(from.after.is_some() && to.after.is_some(), "rename returns both directories");
    expect_err(lookup(b, &t, "a"), &[FsError::NoEnt], "old name gone");
    assert_eq!(lookup(b, &t, "b").unwrap().fileid, id);
    assert_eq!(read_all(b, &a), b"A", "the handle survives a rename");
    // Replace an existing file.
    let c = mkfile(b, &t, "c");
    write_all(b, &root(), &c, 0, b"C");
    b.rename(&root(), &t, b"b", &t, b"c").expect("rename over a file");
    assert_eq!(lookup(b, &t, "c").unwrap().fileid, id);
    expect_err(b.getattr(&c), &[FsError::Stale], "replaced target is gone");
    assert_eq!(attr(b, &a).nlink, 1);
    // Across directories.
    let d = mkdir_as(b, &root(), &t, "d", 0o755);
    b.rename(&root(), &t, b"c", &d, b"moved").expect("rename across directories");
    assert_eq!(lookup(b, &d, "moved").unwrap().fileid, id);
    // Errors.
    expect_err(b.rename(&root(), &t, b"nope", &t, b"x"), &[FsError::NoEnt], "rename missing");
    let e = mkdir_as(b, &root(), &t, "e", 0o755);
    drop(e);
    expect_err(b.rename(&root(), &d, b"moved", &t, b"e"), &[FsError::IsDir, FsError::Exist], "file over dir");
    expect_err(
        b.rename(&root(), &t, b"e", &d, b"moved"),
        &[FsError::NotDir, FsError::Exist],
        "dir over file",
    );
    // Renaming a name onto itself, or onto another link of the same file, changes nothing.
    b.rename(&root(), &d, b"moved", &d, b"moved").expect("rename onto itself");
    b.link(&root(), &a, &d, b"alias").unwrap();
    b.rename(&root(), &d, b"moved", &d, b"alias").expect("rename onto a hard link of itself");
    assert_eq!(lookup(b, &d, "moved").unwrap().fileid, id, "POSIX: both names stay");
    assert_eq!(lookup(b, &d, "alias").unwrap().fileid, id);
    assert_eq!(attr(b, &a).nlink, 2);
    assert_eq!(read_all(b, &a), b"A");
}

/// Directory renames fix link counts and `..`, replace only empty
/// directories, and never move a directory into its own subtree.
pub fn rename_directories(b: &dyn Backend) {
    let t = scratch(b);
    let p = mkdir_as(b, &root(), &t, "p", 0o755);
    let q = mkdir_as(b, &root(), &t, "q", 0o755);
    let d = mkdir_as(b, &root(), &p, "d", 0o755);
    let sub = mkdir_as(b, &root(), &d, "sub", 0o755);
    mkfile(b, &sub, "leaf");
    assert_eq!((attr(b, &p).nlink, attr(b, &q).nlink), (3, 2));
    b.rename(&root(), &p, b"d", &q, b"d").expect("move a directory");
    assert_eq!((attr(b, &p).nlink, attr(b, &q).nlink), (2, 3), "links move with the directory");
    assert_eq!(lookup(b, &d, "..").unwrap().fileid, attr(b, &q).fileid, ".. follows the move");
    // Into its own subtree, at any depth, or onto itself as a child.
    expect_err(b.rename(&root(), &q, b"d", &d, b"x"), &[FsError::Inval], "into itself");
    expect_err(b.rename(&root(), &q, b"d", &sub, b"x"), &[FsError::Inval], "into its subtree");
    expect_err(b.rename(&root(), &t, b"q", &sub, b"x"), &[FsError::Inval], "ancestor into subtree");
    assert_eq!(lookup(b, &q, "d").unwrap().fileid, attr(b, &d).fileid, "refused renames change nothing");
    // Over an empty directory: replaced. Over a non-empty one: refused.
    let empty = mkdir_as(b, &root(), &p, "empty", 0o755);
    b.rename(&root(), &q, b"d", &p, b"empty").expect("replace an empty directory");
    expect_err(b.getattr(&empty), &[FsError::Stale], "replaced directory");
    assert_eq!((attr(b, &p).nlink, attr(b, &q).nlink), (3, 2));
    mkdir_as(b, &root(), &q, "full", 0o755);
    mkfile(b, &lookup_handle(b, &q, "full"), "x");
    expect_err(
        b.rename(&root(), &p, b"empty", &q, b"full"),
        &[FsError::NotEmpty, FsError::Exist],
        "over non-empty",
    );
    // A target that is an ancestor of the source is non-empty by definition.
    expect_err(
        b.rename(&root(), &d, b"sub", &t, b"p"),
        &[FsError::NotEmpty, FsError::Exist],
        "over ancestor",
    );
    // Same-directory rename of a directory keeps the parent's count.
    b.rename(&root(), &p, b"empty", &p, b"renamed").expect("rename dir in place");
    assert_eq!(attr(b, &p).nlink, 3);
    assert_eq!(read_all(b, &lookup_handle(b, &sub, "leaf")), b"");
}

/// Hard links share one object; nlink counts names; directories cannot be linked.
pub fn hard_links(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    write_all(b, &root(), &f, 0, b"shared");
    let d = mkdir_as(b, &root(), &t, "d", 0o755);
    let (a, wcc) = b.link(&root(), &f, &d, b"g").expect("link");
    assert_eq!(a.map(|a| a.nlink), Some(2));
    assert!(wcc.after.is_some());
    assert_eq!(attr(b, &f).nlink, 2);
    let g = lookup_handle(b, &d, "g");
    assert_eq!(attr(b, &g).fileid, attr(b, &f).fileid);
    write_all(b, &root(), &g, 6, b"!");
    assert_eq!(read_all(b, &f), b"shared!");
    expect_err(b.link(&root(), &f, &d, b"g"), &[FsError::Exist], "link over an existing name");
    expect_err(b.link(&root(), &d, &t, b"dirlink"), &[FsError::Perm, FsError::IsDir], "link a directory");
    expect_err(b.link(&root(), &f, &f, b"x"), &[FsError::NotDir], "link into a file");
    b.remove(&root(), &t, b"f").unwrap();
    assert_eq!(attr(b, &g).nlink, 1, "remove drops one link");
    assert_eq!(read_all(b, &f), b"shared!", "the object lives while a name remains");
    b.remove(&root(), &d, b"g").unwrap();
    expect_err(b.getattr(&f), &[FsError::Stale], "last link gone");
}

/// Symlinks store their target verbatim and are never followed.
pub fn symlinks(b: &dyn Backend) {
    let t = scratch(b);
    let targets: [&[u8]; 4] =
        [b"plain", b"../up/and/../down", b"/absolute/path with spaces", b"\x01\xfe odd bytes \xff"];
    for (i, target) in targets.iter().enumerate() {
        let name = format!("l{i}");
        let c = b.symlink(&root(), &t, name.as_bytes(), target, &SetAttr::default()).expect("symlink");
        assert_eq!(c.attr.ftype, FileType::Symlink);
        assert_eq!(c.attr.size, target.len() as u64, "symlink size is the target length");
        let (got, a) = b.readlink(&root(), &c.handle).expect("readlink");
        assert_eq!(&got[..], *target);
        assert_eq!(a.fileid, c.attr.fileid);
        let l = b.lookup(&root(), &t, name.as_bytes()).unwrap();
        assert_eq!(l.attr.ftype, FileType::Symlink, "lookup does not follow");
    }
    // The longest target Linux takes, and one byte more.
    let long = vec![b'x'; SYMLINK_TARGET_BYTES_MAX];
    let c = b.symlink(&root(), &t, b"long", &long, &SetAttr::default()).expect("longest target");
    assert_eq!(c.attr.size, SYMLINK_TARGET_BYTES_MAX as u64);
    assert_eq!(&b.readlink(&root(), &c.handle).unwrap().0[..], &long[..]);
    let longer = vec![b'x'; SYMLINK_TARGET_BYTES_MAX + 1];
    expect_err(
        b.symlink(&root(), &t, b"longer", &longer, &SetAttr::default()),
        &[FsError::NameTooLong],
        "a target longer than Linux takes",
    );
    expect_err(lookup(b, &t, "longer"), &[FsError::NoEnt], "nothing made by a refused symlink");
    // A symlink to a directory is not a directory.
    mkdir_as(b, &root(), &t, "d", 0o755);
    let s = b.symlink(&root(), &t, b"tod", b"d", &SetAttr::default()).unwrap();
    expect_err(b.lookup(&root(), &s.handle, b"x"), &[FsError::NotDir], "lookup through a symlink");
    expect_err(b.read(&root(), &s.handle, 0, 10), &[FsError::Inval, FsError::IsDir], "read a symlink");
    b.remove(&root(), &t, b"tod").expect("remove removes the link itself");
    assert_eq!(lookup(b, &t, "d").unwrap().ftype, FileType::Directory);
}

pub fn mknod_fifo_and_socket(b: &dyn Backend) {
    let t = scratch(b);
    let f = b.mknod(&root(), &t, b"fifo", NodeKind::Fifo, &mode(0o640)).expect("mkfifo");
    assert_eq!(f.attr.ftype, FileType::Fifo);
    assert_eq!(f.attr.mode & 0o7777, 0o640);
    let s = b.mknod(&root(), &t, b"sock", NodeKind::Socket, &mode(0o600)).expect("mksock");
    assert_eq!(s.attr.ftype, FileType::Socket);
    assert_eq!(lookup(b, &t, "fifo").unwrap().ftype, FileType::Fifo);
    expect_err(
        b.mknod(&root(), &t, b"fifo", NodeKind::Fifo, &mode(0o640)),
        &[FsError::Exist],
        "mknod over name",
    );
    b.remove(&root(), &t, b"fifo").unwrap();
    b.remove(&root(), &t, b"sock").unwrap();
}

pub fn mknod_devices(b: &dyn Backend) {
    let t = scratch(b);
    let c = b
        .mknod(&root(), &t, b"null", NodeKind::CharDevice { major: 1, minor: 3 }, &mode(0o666))
        .expect("mknod c");
    assert_eq!((c.attr.ftype, c.attr.rdev), (FileType::CharDevice, (1, 3)));
    let k = b
        .mknod(&root(), &t, b"blk", NodeKind::BlockDevice { major: 7, minor: 0 }, &mode(0o660))
        .expect("mknod b");
    assert_eq!((k.attr.ftype, k.attr.rdev), (FileType::BlockDevice, (7, 0)));
    assert_eq!(attr(b, &c.handle).rdev, (1, 3));
}

/// EXCLUSIVE create (RFC 1813 §3.3.8): a retry with the same verifier
/// succeeds with the same file; another verifier gets Exist.
pub fn exclusive_create(b: &dyn Backend) {
    let t = scratch(b);
    let v1 = *b"verif-01";
    let v2 = *b"verif-02";
    let c = b.create(&root(), &t, b"x", &CreateMode::Exclusive(v1)).expect("exclusive create");
    assert_eq!(c.attr.ftype, FileType::Regular);
    let again =
        b.create(&root(), &t, b"x", &CreateMode::Exclusive(v1)).expect("retry with the same verifier");
    assert_eq!(again.attr.fileid, c.attr.fileid, "the retry returns the same file");
    assert_eq!(attr(b, &again.handle).fileid, c.attr.fileid);
    expect_err(b.create(&root(), &t, b"x", &CreateMode::Exclusive(v2)), &[FsError::Exist], "other verifier");
    // An existing file not made by an exclusive create never matches.
    mkfile(b, &t, "plain");
    expect_err(b.create(&root(), &t, b"plain", &CreateMode::Exclusive(v1)), &[FsError::Exist], "plain file");
    mkdir_as(b, &root(), &t, "dir", 0o755);
    expect_err(b.create(&root(), &t, b"dir", &CreateMode::Exclusive(v1)), &[FsError::Exist], "directory");
    // The client then sets the attributes it wanted.
    b.setattr(&root(), &c.handle, &mode(0o640), None).expect("setattr after exclusive create");
    assert_eq!(attr(b, &c.handle).mode & 0o7777, 0o640);
    // Each name is created once: exactly one of several racing creators with
    // distinct verifiers wins.
    let t = &t;
    let winners: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4u8)
            .map(|i| s.spawn(move || b.create(&root(), t, b"race", &CreateMode::Exclusive([i; 8])).is_ok()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap() as usize).sum()
    });
    assert_eq!(winners, 1, "exactly one exclusive creator wins");
}

/// UNCHECKED on an existing file truncates it if asked and keeps the
/// object; GUARDED refuses.
pub fn unchecked_and_guarded_create(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile(b, &t, "f");
    write_all(b, &root(), &f, 0, b"content");
    let id = attr(b, &f).fileid;
    let keep = b.create(&root(), &t, b"f", &CreateMode::Unchecked(mode(0o600))).expect("unchecked, existing");
    assert_eq!(keep.attr.fileid, id);
    assert_eq!(read_all(b, &f), b"content", "no size given: the data stays");
    let trunc = SetAttr { size: Some(0), mode: Some(0o644), ..SetAttr::default() };
    let c = b.create(&root(), &t, b"f", &CreateMode::Unchecked(trunc.clone())).expect("unchecked truncate");
    assert_eq!((c.attr.fileid, c.attr.size), (id, 0));
    assert_eq!(attr(b, &f).size, 0);
    expect_err(
        b.create(&root(), &t, b"f", &CreateMode::Guarded(trunc.clone())),
        &[FsError::Exist],
        "guarded",
    );
    mkdir_as(b, &root(), &t, "d", 0o755);
    expect_err(
        b.create(&root(), &t, b"d", &CreateMode::Unchecked(trunc)),
        &[FsError::Exist, FsError::IsDir],
        "unchecked over dir",
    );
    let n = b.create(&root(), &t, b"new", &CreateMode::Unchecked(mode(0o600))).expect("unchecked, new");
    assert_eq!(n.attr.mode & 0o7777, 0o600);
}

// ---------------------------------------------------------------- READDIR

/// 10,000 entries listed in small pages: every name exactly once, `.` and
/// `..` included, fileids matching LOOKUP.
pub fn readdir_pages_10k_exactly_once(b: &dyn Backend) {
    let t = scratch(b);
    let n = 10_000;
    let mut ids = HashMap::new();
    for i in 0..n {
        let name = format!("entry-{i:05}");
        let c = b.create(&root(), &t, name.as_bytes(), &CreateMode::Guarded(mode(0o644))).expect("create");
        ids.insert(name.into_bytes(), c.attr.fileid);
    }
    for page in [1000usize, 97] {
        let listed = list(b, &t, page);
        let counts = name_counts(&listed);
        assert_eq!(counts.get(&b"."[..]), Some(&1), "`.` once");
        assert_eq!(counts.get(&b".."[..]), Some(&1), "`..` once");
        assert_eq!(listed.len(), n + 2, "page {page}: {} entries for {n} files", listed.len());
        for e in &listed {
            if let Some(id) = ids.get(&e.name[..]) {
                assert_eq!(e.fileid, *id, "fileid of {:?}", String::from_utf8_lossy(&e.name));
            }
        }
        assert!(
            ids.keys().all(|k| counts.get(k) == Some(&1)),
            "page {page}: some name not seen exactly once"
        );
    }
    let dot = list(b, &t, 500).into_iter().find(|e| &e.name[..] == b"..").unwrap();
    assert_eq!(dot.fileid, attr(b, &b.root()).fileid, "`..` names the parent");
}

/// An entry the sink refuses comes first in the next call.
pub fn readdir_refused_entry_comes_again(b: &dyn Backend) {
    let t = scratch(b);
    for i in 0..20 {
        mkfile(b, &t, &format!("f{i}"));
    }
    let mut seen: Vec<DirEntry> = Vec::new();
    let mut refused: Option<DirEntry> = None;
    let info = b
        .readdir(&root(), &t, 0, [0; 8], false, &mut |e| {
            if seen.len() == 5 {
                refused = Some(e.clone());
                return false;
            }
            seen.push(e.clone());
            true
        })
        .unwrap();
    assert!(!info.eof, "a full sink means no EOF");
    let refused = refused.expect("the sink was offered a sixth entry");
    let mut next: Option<DirEntry> = None;
    b.readdir(&root(), &t, seen[4].cookie, info.cookieverf, false, &mut |e| {
        next = Some(e.clone());
        false
    })
    .unwrap();
    assert_eq!(next.map(|e| e.name), Some(refused.name), "the refused entry comes again");
    // A sink that takes nothing at all still gets a consistent answer.
    let info = b.readdir(&root(), &t, 0, [0; 8], false, &mut |_| false).unwrap();
    assert!(!info.eof);
}

/// READDIRPLUS entries carry attributes and working handles.
pub fn readdirplus_attributes(b: &dyn Backend) {
    let t = scratch(b);
    for i in 0..50 {
        let f = mkfile(b, &t, &format!("f{i}"));
        write_all(b, &root(), &f, 0, &vec![7; i]);
    }
    mkdir_as(b, &root(), &t, "dir", 0o700);
    let listed = list_as(b, &root(), &t, 7, true);
    assert_eq!(listed.len(), 53);
    for e in listed.iter().filter(|e| &e.name[..] != b"." && &e.name[..] != b"..") {
        let a = e.attr.as_ref().expect("plus entries carry attributes");
        assert_eq!(a.fileid, e.fileid);
        let h = e.handle.as_ref().expect("plus entries carry handles");
        let via = attr(b, h);
        assert_eq!(via.fileid, e.fileid);
        let name = String::from_utf8_lossy(&e.name);
        if let Some(i) = name.strip_prefix('f') {
            assert_eq!(a.size, i.parse::<u64>().unwrap(), "size of {name}");
        } else {
            assert_eq!(a.ftype, FileType::Directory);
        }
    }
}

/// Names present for the whole listing appear exactly once even while
/// another thread creates and removes entries in the same directory;
/// names that come and go appear at most once.
pub fn readdir_during_concurrent_changes(b: &dyn Backend) {
    let t = scratch(b);
    let stable = 2000;
    for i in 0..stable {
        mkfile(b, &t, &format!("stable-{i}"));
    }
    let done = AtomicBool::new(false);
    let churned = AtomicU64::new(0);
    std::thread::scope(|s| {
        // If the lister panics, the churn thread must still stop, or the
        // scope would wait for it forever.
        let _stop = StopOnDrop(&done);
        let churn = s.spawn(|| {
            let mut i = 0u64;
            // Unique names, so each can legitimately appear at most once.
            while !done.load(Ordering::Acquire) {
                let name = format!("tmp-{i}");
                b.create(&root(), &t, name.as_bytes(), &CreateMode::Guarded(mode(0o644)))
                    .expect("churn create");
                // Every third name stays; the rest go again at once.
                let phase = i % 3;
                if phase != 0 {
                    b.remove(&root(), &t, name.as_bytes()).expect("churn remove");
                }
                i += 1;
                churned.store(i, Ordering::Release);
            }
        });
        // Start listing only once the churn is really running.
        while churned.load(Ordering::Acquire) < 10 {
            std::hint::spin_loop();
        }
        let mut rounds = 0;
        let start = churned.load(Ordering::Acquire);
        // List at least three times, and until the churn made real progress
        // during our listings.
        while rounds < 3 || churned.load(Ordering::Acquire) < start + 200 {
            let counts = name_counts(&list(b, &t, 37));
            for i in 0..stable {
                let k = format!("stable-{i}").into_bytes();
                assert_eq!(counts.get(&k), Some(&1), "stable-{i} must appear exactly once");
            }
            assert!(counts.values().all(|&c| c == 1), "some name appeared twice in one listing");
            rounds += 1;
            assert!(rounds < 2_000, "churn thread stalled");
        }
        done.store(true, Ordering::Release);
        churn.join().expect("churn thread");
    });
    let total = churned.load(Ordering::Acquire);
    let kept = (0..total).filter(|i| i % 3 == 0).count();
    assert_eq!(list(b, &t, 1000).len(), stable + kept + 2, "final listing");
}

/// Sets a flag when dropped (also while unwinding).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

// ---------------------------------------------------------------- fs-wide

pub fn fsstat_and_properties(b: &dyn Backend) {
    let t = scratch(b);
    let s = b.fsstat(&t).expect("fsstat");
    assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes && s.avail_bytes <= s.free_bytes);
    assert!(s.free_files <= s.total_files && s.avail_files <= s.free_files);
    let p = b.properties();
    assert!(p.name_max as usize >= 255);
    assert!(p.max_file_size >= 1 << 32);
    assert!(p.link_max >= 2);
    assert!(p.time_delta <= Timestamp { secs: 1, nsecs: 0 });
    b.sync_all().expect("sync_all");
    expect_err(
        b.fsstat(&FileHandle(vec![1, 2, 3].into())),
        &[FsError::BadHandle, FsError::Stale],
        "fsstat garbage",
    );
}

// ---------------------------------------------------------------- permissions

/// Root's 0600 file: others cannot read or write it.
pub fn perm_read_write_denied(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile_as(b, &root(), &t, "secret", 0o600);
    write_all(b, &root(), &f, 0, b"secret");
    let u = user(1000);
    expect_err(b.read(&u, &f, 0, 10), &[FsError::Access], "read 0600 as other");
    expect_err(b.write(&u, &f, 0, b"x", StableHow::FileSync), &[FsError::Access], "write 0600 as other");
    expect_err(
        b.setattr(&u, &f, &SetAttr { size: Some(0), ..SetAttr::default() }, None),
        &[FsError::Access],
        "truncate",
    );
    // Group and other classes.
    let g = mkfile_as(b, &root(), &t, "group", 0o640);
    b.setattr(&root(), &g, &SetAttr { gid: Some(1000), ..SetAttr::default() }, None).unwrap();
    write_all(b, &root(), &g, 0, b"grp");
    assert_eq!(&b.read(&u, &g, 0, 10).expect("group may read").data[..], b"grp");
    let member = Credentials { uid: 1001, gid: 1001, groups: vec![1000] };
    assert_eq!(&b.read(&member, &g, 0, 10).expect("supplementary group may read").data[..], b"grp");
    expect_err(b.write(&member, &g, 0, b"x", StableHow::FileSync), &[FsError::Access], "group may not write");
    expect_err(b.read(&user(1002), &g, 0, 10), &[FsError::Access], "other may not read 0640");
    assert_eq!(read_all(b, &f), b"secret");
}

/// Without write permission on a directory, nothing is created or removed in it.
pub fn perm_create_remove_denied(b: &dyn Backend) {
    let t = scratch(b);
    let d = mkdir_as(b, &root(), &t, "rootdir", 0o755);
    let f = mkfile(b, &d, "file");
    let u = user(1000);
    let acc = [FsError::Access];
    expect_err(b.create(&u, &d, b"n", &CreateMode::Guarded(mode(0o644))), &acc, "create");
    expect_err(b.create(&u, &d, b"n", &CreateMode::Exclusive([1; 8])), &acc, "exclusive create");
    expect_err(b.mkdir(&u, &d, b"n", &mode(0o755)), &acc, "mkdir");
    expect_err(b.symlink(&u, &d, b"n", b"x", &SetAttr::default()), &acc, "symlink");
    expect_err(b.mknod(&u, &d, b"n", NodeKind::Fifo, &mode(0o644)), &acc, "mknod");
    expect_err(b.remove(&u, &d, b"file"), &acc, "remove");
    expect_err(b.rename(&u, &d, b"file", &d, b"other"), &acc, "rename");
    let pubdir = mkdir_as(b, &root(), &t, "pub", 0o777);
    expect_err(b.rename(&u, &d, b"file", &pubdir, b"stolen"), &acc, "rename out");
    // Linux's protected_hardlinks may refuse first (EPERM: u cannot write f).
    expect_err(b.link(&u, &f, &d, b"l"), &[FsError::Access, FsError::Perm], "link into");
    let sub = mkdir_as(b, &root(), &d, "sub", 0o777);
    drop(sub);
    expect_err(b.rmdir(&u, &d, b"sub"), &acc, "rmdir");
    assert_eq!(list(b, &d, 100).len(), 4, "nothing changed");
    // The same user may do all that where it may write.
    b.create(&u, &pubdir, b"n", &CreateMode::Guarded(mode(0o644))).expect("create in 0777 dir");
    b.rename(&u, &pubdir, b"n", &pubdir, b"m").expect("rename in 0777 dir");
    b.remove(&u, &pubdir, b"m").expect("remove in 0777 dir");
}

/// Only root changes owners; an owner may change the group to one it is in
/// and may chmod; nobody else may.
pub fn perm_chown_chgrp_chmod(b: &dyn Backend) {
    let t = scratch(b);
    let pubdir = mkdir_as(b, &root(), &t, "pub", 0o777);
    let u = Credentials { uid: 1000, gid: 1000, groups: vec![2000] };
    let f = mkfile_as(b, &u, &pubdir, "mine", 0o644);
    let a = attr(b, &f);
    assert_eq!((a.uid, a.gid), (1000, 1000), "created with the caller's ids");
    let perm = [FsError::Perm];
    expect_err(
        b.setattr(&u, &f, &SetAttr { uid: Some(1001), ..SetAttr::default() }, None),
        &perm,
        "chown by owner",
    );
    expect_err(
        b.setattr(&u, &f, &SetAttr { gid: Some(3000), ..SetAttr::default() }, None),
        &perm,
        "chgrp to foreign group",
    );
    b.setattr(&u, &f, &SetAttr { gid: Some(2000), ..SetAttr::default() }, None)
        .expect("chgrp to own supplementary group");
    assert_eq!(attr(b, &f).gid, 2000);
    b.setattr(&u, &f, &mode(0o600), None).expect("chmod by owner");
    assert_eq!(attr(b, &f).mode & 0o7777, 0o600);
    let other = user(1001);
    expect_err(b.setattr(&other, &f, &mode(0o666), None), &perm, "chmod by other");
    expect_err(
        b.setattr(&other, &f, &SetAttr { gid: Some(1001), ..SetAttr::default() }, None),
        &perm,
        "chgrp by other",
    );
    b.setattr(&root(), &f, &SetAttr { uid: Some(1001), gid: Some(1001), ..SetAttr::default() }, None)
        .expect("root chowns");
    let a = attr(b, &f);
    assert_eq!((a.uid, a.gid), (1001, 1001));
    // A chown of a setuid file drops setuid (Linux, even for root).
    b.setattr(&root(), &f, &mode(0o4755), None).unwrap();
    b.setattr(&root(), &f, &SetAttr { uid: Some(1000), ..SetAttr::default() }, None).unwrap();
    assert_eq!(attr(b, &f).mode & 0o4000, 0, "chown clears setuid");
    assert_eq!(attr(b, &f).mode & 0o777, 0o755);
}

/// Explicit times need ownership; "now" needs ownership or write permission.
pub fn perm_times(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile_as(b, &root(), &t, "ro", 0o644);
    let w = mkfile_as(b, &root(), &t, "rw", 0o666);
    let u = user(1000);
    let client = SetAttr { mtime: SetTime::ClientTime(PAST), ..SetAttr::default() };
    let server = SetAttr { mtime: SetTime::ServerTime, ..SetAttr::default() };
    expect_err(
        b.setattr(&u, &w, &client, None),
        &[FsError::Perm],
        "explicit time on a writable file not owned",
    );
    b.setattr(&u, &w, &server, None).expect("touch a writable file");
    expect_err(b.setattr(&u, &f, &server, None), &[FsError::Access, FsError::Perm], "touch a read-only file");
    let pubdir = mkdir_as(b, &root(), &t, "pub", 0o777);
    let mine = mkfile_as(b, &u, &pubdir, "mine", 0o444);
    b.setattr(&u, &mine, &client, None).expect("owner sets explicit times");
    assert_eq!(attr(b, &mine).mtime, PAST);
}

/// In a sticky directory only the owner of an entry (or of the directory,
/// or root) may remove or rename it.
pub fn perm_sticky_directory(b: &dyn Backend) {
    let t = scratch(b);
    let tmp = mkdir_as(b, &root(), &t, "tmp", 0o1777);
    assert_eq!(attr(b, &tmp).mode & 0o7777, 0o1777);
    let (alice, bob) = (user(1000), user(1001));
    mkfile_as(b, &alice, &tmp, "a", 0o666);
    mkfile_as(b, &alice, &tmp, "a2", 0o666);
    mkfile_as(b, &bob, &tmp, "b", 0o666);
    expect_err(b.remove(&bob, &tmp, b"a"), &[FsError::Perm, FsError::Access], "remove another's file");
    expect_err(
        b.rename(&bob, &tmp, b"a", &tmp, b"x"),
        &[FsError::Perm, FsError::Access],
        "rename another's file",
    );
    expect_err(
        b.rename(&bob, &tmp, b"b", &tmp, b"a"),
        &[FsError::Perm, FsError::Access],
        "replace another's file",
    );
    lookup(b, &tmp, "a").expect("still there");
    b.rename(&alice, &tmp, b"a", &tmp, b"a-renamed").expect("owner renames");
    b.remove(&alice, &tmp, b"a-renamed").expect("owner removes");
    b.remove(&bob, &tmp, b"b").expect("bob removes his own");
    b.remove(&root(), &tmp, b"a2").expect("root removes anything");
}

/// LOOKUP needs search (x) permission on the directory; READDIR needs read.
pub fn perm_search_needed(b: &dyn Backend) {
    let t = scratch(b);
    let d = mkdir_as(b, &root(), &t, "noexec", 0o766);
    mkfile_as(b, &root(), &d, "inside", 0o666);
    let u = user(1000);
    expect_err(b.lookup(&u, &d, b"inside"), &[FsError::Access], "lookup without x");
    expect_err(
        b.create(&u, &d, b"n", &CreateMode::Guarded(mode(0o644))),
        &[FsError::Access],
        "create without x",
    );
    expect_err(b.remove(&u, &d, b"inside"), &[FsError::Access], "remove without x");
    let listed = list_as(b, &u, &d, 10, false);
    assert_eq!(listed.len(), 3, "r without x still lists names");
    let x = mkdir_as(b, &root(), &t, "xonly", 0o711);
    mkfile_as(b, &root(), &x, "known", 0o644);
    b.lookup(&u, &x, b"known").expect("x without r allows lookup");
    expect_err(b.readdir(&u, &x, 0, [0; 8], false, &mut |_| true), &[FsError::Access], "readdir without r");
}

/// knfsd's owner override: the owner may write (and read) its own file
/// whatever the mode, so a file created 0444 by an open() can be written.
pub fn perm_owner_override(b: &dyn Backend) {
    let t = scratch(b);
    let pubdir = mkdir_as(b, &root(), &t, "pub", 0o777);
    let u = user(1000);
    let f = mkfile_as(b, &u, &pubdir, "ro", 0o444);
    b.write(&u, &f, 0, b"data", StableHow::FileSync).expect("owner writes its 0444 file");
    let z = mkfile_as(b, &u, &pubdir, "zero", 0o000);
    b.write(&u, &z, 0, b"zz", StableHow::Unstable).expect("owner writes its 0000 file");
    assert_eq!(&b.read(&u, &z, 0, 10).expect("owner reads its 0000 file").data[..], b"zz");
    b.commit(&u, &z, 0, 0).expect("owner commits");
    expect_err(b.write(&user(1001), &f, 0, b"x", StableHow::FileSync), &[FsError::Access], "others may not");
    assert_eq!(read_all(b, &f), b"data");
}

/// ACCESS answers from the mode bits.
pub fn perm_access_bits(b: &dyn Backend) {
    let t = scratch(b);
    let f = mkfile_as(b, &root(), &t, "f", 0o640);
    let u = user(1000);
    let (granted, a) = b.access(&u, &f, access::ALL).expect("access");
    assert_eq!(granted & (access::READ | access::MODIFY | access::EXTEND | access::EXECUTE), 0);
    assert_eq!(a.fileid, attr(b, &f).fileid);
    let (granted, _) = b.access(&root(), &f, access::READ | access::MODIFY).unwrap();
    assert_eq!(granted, access::READ | access::MODIFY);
    let (granted, _) = b.access(&u, &t, access::ALL).unwrap();
    assert_eq!(granted & (access::READ | access::LOOKUP), access::READ | access::LOOKUP);
    assert_eq!(
        granted & (access::MODIFY | access::EXTEND | access::DELETE),
        0,
        "0755 dir not writable by others"
    );
    let (granted, _) = b.access(&u, &f, access::READ).unwrap();
    assert_eq!(granted, 0, "only asked bits, and none granted");
    let x = mkfile_as(b, &root(), &t, "x", 0o755);
    let (granted, _) = b.access(&u, &x, access::EXECUTE | access::READ | access::MODIFY).unwrap();
    assert_eq!(granted, access::EXECUTE | access::READ);
}

/// Objects a user creates belong to that user and the user's group.
pub fn perm_nonroot_creates_own_files(b: &dyn Backend) {
    let t = scratch(b);
    let pubdir = mkdir_as(b, &root(), &t, "pub", 0o777);
    let u = user(1000);
    let d = mkdir_as(b, &u, &pubdir, "d", 0o755);
    let s = b.symlink(&u, &pubdir, b"s", b"target", &SetAttr::default()).unwrap();
    let n = b.mknod(&u, &pubdir, b"p", NodeKind::Fifo, &mode(0o644)).unwrap();
    for a in [attr(b, &d), s.attr, n.attr] {
        assert_eq!((a.uid, a.gid), (1000, 1000), "{:?} owner", a.ftype);
    }
    expect_err(
        b.mknod(&u, &pubdir, b"dev", NodeKind::CharDevice { major: 1, minor: 3 }, &mode(0o644)),
        &[FsError::Perm, FsError::Access],
        "device node as non-root",
    );
}

/// A setgid directory passes its group to new entries and its setgid bit
/// to new subdirectories (Linux; optional for a backend, so a separate check).
pub fn perm_setgid_directory_inherits(b: &dyn Backend) {
    let t = scratch(b);
    let u = user(1000);
    let sg = mkdir_as(b, &root(), &t, "sg", 0o777);
    b.setattr(&root(), &sg, &SetAttr { gid: Some(4242), mode: Some(0o2777), ..SetAttr::default() }, None)
        .unwrap();
    let f = mkfile_as(b, &u, &sg, "f", 0o644);
    assert_eq!(attr(b, &f).gid, 4242, "setgid directory passes its group to files");
    let sd = mkdir_as(b, &u, &sg, "sub", 0o755);
    let sa = attr(b, &sd);
    assert_eq!(sa.gid, 4242);
    assert_ne!(sa.mode & 0o2000, 0, "and its setgid bit to subdirectories");
}

// ---------------------------------------------------------------- NFSv4.2 and xattrs

/// ALLOCATE grows a file; DEALLOCATE makes a hole that reads as zeros and
/// keeps the size; SEEK finds data and the hole at the end. A backend may
/// offer none of it (`NotSupp`), but then offers none consistently.
fn v42_allocate_deallocate_seek(b: &dyn Backend) {
    let d = scratch(b);
    let f = mkfile(b, &d, "f");
    let who = root();
    match b.allocate(&who, &f, 0, 10_000) {
        Err(FsError::NotSupp) => {
            assert_eq!(b.deallocate(&who, &f, 0, 1), Err(FsError::NotSupp));
            return;
        }
        r => r.expect("allocate"),
    }
    assert_eq!(attr(b, &f).size, 10_000, "ALLOCATE past the end grows the file");
    let data = pattern(8192, 3);
    write_all(b, &who, &f, 0, &data);
    b.deallocate(&who, &f, 4096, 4096).expect("deallocate");
    let back = read_all(b, &f);
    assert_eq!(back.len(), 10_000, "DEALLOCATE keeps the size");
    assert_eq!(&back[..4096], &data[..4096]);
    assert!(back[4096..].iter().all(|x| *x == 0), "the hole reads as zeros");
    let (eof, at) = b.seek(&who, &f, 0, SeekWhat::Data).expect("seek data");
    assert_eq!((eof, at), (false, 0));
    let (eof, at) = b.seek(&who, &f, 0, SeekWhat::Hole).expect("seek hole");
    assert!((4096..=10_000).contains(&at), "a hole at or after the punched range: {at}");
    assert_eq!(eof, at == 10_000);
    assert_eq!(b.seek(&who, &f, 10_000, SeekWhat::Data), Err(FsError::Nxio), "at the end");
    // Not on a directory.
    assert!(b.allocate(&who, &d, 0, 1).is_err());
}

/// COPY inside the backend copies what it says; CLONE shares or is not offered.
fn v42_copy_and_clone(b: &dyn Backend) {
    let d = scratch(b);
    let src = mkfile(b, &d, "src");
    let dst = mkfile(b, &d, "dst");
    let who = root();
    let data = pattern(300_000, 9);
    write_all(b, &who, &src, 0, &data);
    match b.copy_range(&who, &src, 1000, &dst, 10, 200_000) {
        Err(FsError::NotSupp) => {}
        r => {
            assert_eq!(r.expect("copy"), 200_000);
            let back = read_all(b, &dst);
            assert_eq!(back.len(), 200_010);
            assert!(back[..10].iter().all(|x| *x == 0));
            assert_eq!(&back[10..], &data[1000..201_000]);
            // Length 0: to the end of the source.
            let n = b.copy_range(&who, &src, 299_000, &dst, 0, 0).expect("copy to the end");
            assert_eq!(n, 1000);
            assert_eq!(&read_all(b, &dst)[..1000], &data[299_000..]);
        }
    }
    match b.clone_range(&who, &src, 0, &dst, 0, 0) {
        Err(FsError::NotSupp) => {}
        r => {
            r.expect("clone");
            assert_eq!(read_all(b, &dst)[..300_000], data[..]);
        }
    }
}

/// Set, read, list, replace and remove user extended attributes.
fn xattrs_round_trip(b: &dyn Backend) {
    let d = scratch(b);
    let f = mkfile(b, &d, "x");
    let who = root();
    match b.setxattr(&who, &f, b"colour", b"blue", XattrSet::Create) {
        Err(FsError::NotSupp) => return,
        r => r.expect("setxattr"),
    }
    assert_eq!(b.getxattr(&who, &f, b"colour").unwrap(), &b"blue"[..]);
    assert_eq!(b.setxattr(&who, &f, b"colour", b"red", XattrSet::Create), Err(FsError::Exist));
    assert_eq!(b.setxattr(&who, &f, b"shape", b"x", XattrSet::Replace), Err(FsError::NoEnt));
    b.setxattr(&who, &f, b"colour", b"red", XattrSet::Replace).unwrap();
    b.setxattr(&who, &f, b"shape", b"", XattrSet::Either).unwrap();
    let mut names = b.listxattr(&who, &f).unwrap();
    names.sort();
    assert_eq!(names, vec![bytes::Bytes::from_static(b"colour"), bytes::Bytes::from_static(b"shape")]);
    assert_eq!(b.getxattr(&who, &f, b"colour").unwrap(), &b"red"[..]);
    b.removexattr(&who, &f, b"colour").unwrap();
    assert_eq!(b.getxattr(&who, &f, b"colour"), Err(FsError::NoEnt));
    assert_eq!(b.removexattr(&who, &f, b"colour"), Err(FsError::NoEnt));
    assert_eq!(
        b.setxattr(&who, &f, b"big", &vec![0u8; XATTR_VALUE_MAX + 1], XattrSet::Either),
        Err(FsError::FBig)
    );
}

/// Reading a user attribute needs read permission, setting one write permission.
fn xattrs_need_permission(b: &dyn Backend) {
    let d = scratch(b);
    let f = mkfile_as(b, &root(), &d, "private", 0o600);
    match b.setxattr(&root(), &f, b"k", b"v", XattrSet::Either) {
        Err(FsError::NotSupp) => return,
        r => r.expect("setxattr"),
    }
    let other = user(1234);
    expect_err(b.getxattr(&other, &f, b"k"), &[FsError::Access, FsError::Perm], "read without permission");
    expect_err(
        b.setxattr(&other, &f, b"k", b"w", XattrSet::Either),
        &[FsError::Access, FsError::Perm],
        "write without permission",
    );
    assert_eq!(b.getxattr(&root(), &f, b"k").unwrap(), &b"v"[..]);
}
