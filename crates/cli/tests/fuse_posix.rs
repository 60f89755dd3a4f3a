//! POSIX answers through `eagernfs mount`, as an unprivileged user (uid 65534), compared with
//! what a local file system (or the Linux NFS client) answers. Issue 12's cases, each a test
//! that failed before its fix, run against eagernfs and against nfs-ganesha as the server.
//!
//! Every call under test is made by `tests/clients/posixop.c` running as the user (see
//! [`posixop`]), so nothing but that one system call decides the answer. Setup and checks that
//! are not under test use root through the same mount, or the export directory directly.
//!
//! Needs root and /dev/fuse; otherwise each test says why it skips.

#[macro_use]
mod common;

use common::*;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Which server a scenario runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    /// `eagernfs serve DIR`: the local-directory backend.
    Eagernfs,
    /// `eagernfs serve --memory PATH`: the in-memory backend.
    EagernfsMemory,
    /// nfs-ganesha (FSAL VFS) on a directory.
    Ganesha,
}

/// A server (eagernfs with `no_root_squash`, or ganesha) exporting a fresh directory anyone may
/// create in, and a mount of it open to every user (`allow_other`).
struct Setup {
    mount: FuseMount,
    server: Server,
    /// The export is in the server's memory: there is no directory to look at.
    memory: bool,
    _export: tempfile::TempDir,
}

impl Setup {
    fn new(ganesha: bool, fuse_options: &str) -> Option<Setup> {
        Setup::with_peer(if ganesha { Peer::Ganesha } else { Peer::Eagernfs }, fuse_options)
    }

    fn with_peer(peer: Peer, fuse_options: &str) -> Option<Setup> {
        let export = tempfile::tempdir().unwrap();
        chmod(export.path(), 0o1777);
        let server = match peer {
            Peer::Ganesha => Server::ganesha(export.path())?,
            Peer::Eagernfs => Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]),
            // The directory's path is only the name the export is mounted by.
            Peer::EagernfsMemory => Server::eagernfs(export.path(), &["--memory", "-o", "rw,no_root_squash"]),
        };
        let options = if fuse_options.is_empty() {
            "allow_other".to_string()
        } else {
            format!("allow_other,{fuse_options}")
        };
        let mount = FuseMount::new(&server.url(""), &options);
        let memory = peer == Peer::EagernfsMemory;
        if memory {
            // The memory backend's root is 0755 root's; make it like the directories above.
            chmod(&mount.path(""), 0o1777);
        }
        Some(Setup { mount, server, memory, _export: export })
    }

    /// `rel` inside the mount, as a string for posixop.
    fn at(&self, rel: &str) -> String {
        self.mount.path(rel).to_str().unwrap().to_owned()
    }

    /// `rel` in the export directory on the server's disk.
    fn on_server(&self, rel: &str) -> std::path::PathBuf {
        assert!(!self.memory, "a memory export has no directory on disk");
        self.server.dir().join(rel)
    }
}

#[track_caller]
fn ok(r: Reply, what: &str) -> String {
    match r {
        Reply::Ok(payload) => payload,
        Reply::Err { kind, .. } => panic!("{what}: want success, got {kind}"),
    }
}

#[track_caller]
fn denied(r: Reply, what: &str) {
    assert_eq!(r.err_kind(), Some("EACCES"), "{what}: want EACCES, got {r:?}");
}

fn mkfifo(path: &Path, mode: u32) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), mode) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
}

fn mknod_char(path: &Path, mode: u32, major: u32, minor: u32) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | mode, libc::makedev(major, minor)) };
    assert_eq!(r, 0, "mknod: {}", std::io::Error::last_os_error());
}

// ----- 1. search permission on a cached path --------------------------------------------------

fn search_permission_is_enforced_on_cached_paths(ganesha: bool) {
    let Some(s) = Setup::new(ganesha, "") else { return };
    let nobody = As::nobody();
    fs::create_dir(s.mount.path("d")).unwrap();
    chmod(&s.mount.path("d"), 0o777);
    fs::write(s.mount.path("d/f"), b"below a directory").unwrap();
    chmod(&s.mount.path("d/f"), 0o666);
    // The user walks the path once: the kernel now has every component cached.
    ok(posixop(&nobody, &["lstat", &s.at("d/f")]), "lstat before the chmod");
    ok(posixop(&nobody, &["open", &s.at("d/f"), "rdonly"]), "open before the chmod");
    // The directory's owner takes search permission away from everybody else.
    chmod(&s.mount.path("d"), 0o700);
    let f = s.at("d/f");
    denied(posixop(&nobody, &["lstat", &f]), "lstat");
    denied(posixop(&nobody, &["chmod", &f, "600"]), "chmod");
    denied(posixop(&nobody, &["chown", &f, "65534", "65534"]), "chown");
    denied(posixop(&nobody, &["truncate", &f, "0"]), "truncate");
    denied(posixop(&nobody, &["open", &f, "rdonly"]), "open");
    denied(posixop(&nobody, &["link", &f, &s.at("l")]), "link");
    // Nothing happened to the file, and its owner still gets through.
    assert_eq!(fs::read(s.on_server("d/f")).unwrap(), b"below a directory");
    assert_eq!(fs::metadata(s.on_server("d/f")).unwrap().mode() & 0o7777, 0o666);
    ok(posixop(&As::root(), &["truncate", &f, "5"]), "root's truncate");
    assert_eq!(fs::read(s.on_server("d/f")).unwrap(), b"below");
}

#[test]
fn search_permission_is_enforced_on_cached_paths_eagernfs() {
    require_fuse!("search_permission_is_enforced_on_cached_paths_eagernfs");
    search_permission_is_enforced_on_cached_paths(false);
}

#[test]
fn search_permission_is_enforced_on_cached_paths_ganesha() {
    require_fuse!("search_permission_is_enforced_on_cached_paths_ganesha");
    search_permission_is_enforced_on_cached_paths(true);
}

// ----- 2. opening FIFOs and device nodes -----------------------------------------------------

fn special_files_open_by_mode_bits(ganesha: bool) {
    // `dev`: device nodes work on this mount, so a refusal is about the mode, not `nodev`.
    let Some(s) = Setup::new(ganesha, "dev") else { return };
    let nobody = As::nobody();
    mkfifo(&s.mount.path("p"), 0o600);
    mknod_char(&s.mount.path("null"), 0o600, 1, 3);
    let (fifo, dev) = (s.at("p"), s.at("null"));
    for flags in [&["rdwr"][..], &["rdonly", "nonblock"][..]] {
        let mut args = vec!["open", &fifo];
        args.extend_from_slice(flags);
        denied(posixop(&nobody, &args), &format!("FIFO 0600 open {flags:?}"));
        let mut args = vec!["open", &dev];
        args.extend_from_slice(flags);
        denied(posixop(&nobody, &args), &format!("char device 0600 open {flags:?}"));
    }
    // Their owner opens both, and once the mode allows it, so does everybody.
    ok(posixop(&As::root(), &["open", &s.at("p"), "rdonly", "nonblock"]), "owner opens the FIFO");
    ok(posixop(&As::root(), &["open", &s.at("null"), "rdwr"]), "owner opens the device");
    chmod(&s.mount.path("p"), 0o666);
    chmod(&s.mount.path("null"), 0o666);
    ok(posixop(&nobody, &["open", &s.at("p"), "rdwr"]), "FIFO 0666 open rdwr");
    ok(posixop(&nobody, &["open", &s.at("null"), "rdwr"]), "device 0666 open rdwr");
}

#[test]
fn special_files_open_by_mode_bits_eagernfs() {
    require_fuse!("special_files_open_by_mode_bits_eagernfs");
    special_files_open_by_mode_bits(false);
}

#[test]
fn special_files_open_by_mode_bits_ganesha() {
    require_fuse!("special_files_open_by_mode_bits_ganesha");
    special_files_open_by_mode_bits(true);
}

// ----- 3. truncate needs write permission ----------------------------------------------------

fn truncate_needs_write_permission(ganesha: bool) {
    let Some(s) = Setup::new(ganesha, "") else { return };
    let nobody = As::nobody();
    // Another user's file, readable by all.
    fs::write(s.mount.path("theirs"), b"root's data").unwrap();
    chmod(&s.mount.path("theirs"), 0o644);
    denied(posixop(&nobody, &["truncate", &s.at("theirs"), "0"]), "truncate(2) of another's 0644 file");
    denied(posixop(&nobody, &["open", &s.at("theirs"), "wronly", "trunc"]), "O_TRUNC of another's 0644 file");
    assert_eq!(fs::read(s.on_server("theirs")).unwrap(), b"root's data");
    // The caller's own file, made read-only: the owner may chmod it back, not write it (the
    // NFS server lets an owner write regardless of mode; a POSIX truncate must not).
    let mine = s.at("mine");
    ok(posixop(&nobody, &["open", &mine, "wronly", "creat"]), "create own file");
    ok(posixop(&nobody, &["append-fstat", &mine, "own data"]), "write own file");
    ok(posixop(&nobody, &["chmod", &mine, "444"]), "chmod own file 0444");
    denied(posixop(&nobody, &["truncate", &mine, "0"]), "truncate(2) of own 0444 file");
    denied(posixop(&nobody, &["open", &mine, "wronly", "trunc"]), "O_TRUNC of own 0444 file");
    denied(posixop(&nobody, &["open", &mine, "rdwr"]), "O_RDWR of own 0444 file");
    assert_eq!(fs::read(s.on_server("mine")).unwrap(), b"own data");
    ok(posixop(&nobody, &["chmod", &mine, "644"]), "chmod own file back to 0644");
    ok(posixop(&nobody, &["truncate", &mine, "3"]), "truncate own 0644 file");
    assert_eq!(fs::read(s.on_server("mine")).unwrap(), b"own");
}

#[test]
fn truncate_needs_write_permission_eagernfs() {
    require_fuse!("truncate_needs_write_permission_eagernfs");
    truncate_needs_write_permission(false);
}

#[test]
fn truncate_needs_write_permission_ganesha() {
    require_fuse!("truncate_needs_write_permission_ganesha");
    truncate_needs_write_permission(true);
}

// ----- 4. set-id bits after another user's write ---------------------------------------------

fn write_by_another_user_clears_setid_bits(ganesha: bool) {
    let Some(s) = Setup::new(ganesha, "") else { return };
    let nobody = As::nobody();
    // (mode, what a local ext4 leaves after a write by a user outside the file's group and
    // without CAP_FSETID: set-uid goes, set-gid goes too, with or without group execute).
    for (i, (mode, after)) in
        [(0o4777, 0o777), (0o2777, 0o777), (0o6777, 0o777), (0o2767, 0o767)].into_iter().enumerate()
    {
        let name = format!("setid{i}");
        fs::write(s.mount.path(&name), b"root's ").unwrap();
        chmod(&s.mount.path(&name), mode);
        let got =
            ok(posixop(&nobody, &["append-fstat", &s.at(&name), "appended"]), &format!("append to {mode:o}"));
        assert_eq!(
            got,
            format!("fd={after:o} path={after:o}"),
            "mode {mode:o} after another user's write, from fstat and from stat"
        );
        assert_eq!(
            fs::read(s.on_server(&name)).unwrap(),
            b"root's appended",
            "mode {mode:o}: the data arrived"
        );
        assert_eq!(
            fs::metadata(s.on_server(&name)).unwrap().mode() & 0o7777,
            after,
            "mode {mode:o} on the server"
        );
        let seen = ok(posixop(&nobody, &["lstat", &s.at(&name)]), "lstat after");
        assert_eq!(
            field(&seen, "mode"),
            Some(format!("{after:o}")),
            "mode {mode:o} seen by a later stat: {seen}"
        );
    }
    // Root (CAP_FSETID, not squashed) keeps the bits, as on a local disk.
    fs::write(s.mount.path("kept"), b"x").unwrap();
    chmod(&s.mount.path("kept"), 0o4755);
    let got = ok(posixop(&As::root(), &["append-fstat", &s.at("kept"), "y"]), "root appends");
    assert_eq!(got, "fd=4755 path=4755");
    assert_eq!(fs::metadata(s.on_server("kept")).unwrap().mode() & 0o7777, 0o4755);
}

#[test]
fn write_by_another_user_clears_setid_bits_eagernfs() {
    require_fuse!("write_by_another_user_clears_setid_bits_eagernfs");
    write_by_another_user_clears_setid_bits(false);
}

#[test]
fn write_by_another_user_clears_setid_bits_ganesha() {
    require_fuse!("write_by_another_user_clears_setid_bits_ganesha");
    write_by_another_user_clears_setid_bits(true);
}

// ----- 5. link counts after a rename over a link, and an unlink of an open file -----------------

fn link_counts_follow_renames_and_unlinks(ganesha: bool) {
    let Some(s) = Setup::new(ganesha, "") else { return };
    let nobody = As::nobody();
    let nlink = |rel: &str| {
        let seen = ok(posixop(&nobody, &["lstat", &s.at(rel)]), &format!("lstat {rel}"));
        field(&seen, "nlink").unwrap_or_else(|| panic!("no nlink in {seen:?}"))
    };
    // `b` has a second name `c`; renaming `a` over `b` leaves `c` its only name. `c` is
    // stat'ed first, so the kernel and the client cache both hold the old count.
    for kind in ["file", "fifo"] {
        let (a, b, c) = (format!("{kind}-a"), format!("{kind}-b"), format!("{kind}-c"));
        for name in [&a, &b] {
            let made = if kind == "file" {
                posixop(&nobody, &["open", &s.at(name), "wronly", "creat"])
            } else {
                posixop(&nobody, &["mkfifo", &s.at(name), "644"])
            };
            ok(made, &format!("create {name}"));
        }
        ok(posixop(&nobody, &["link", &s.at(&b), &s.at(&c)]), &format!("link {b} {c}"));
        assert_eq!(nlink(&c), "2", "{kind}: two names before the rename");
        ok(posixop(&nobody, &["rename", &s.at(&a), &s.at(&b)]), &format!("rename {a} over {b}"));
        assert_eq!(nlink(&c), "1", "{kind}: {c} is the last name of what {b} was");
        assert_eq!(nlink(&b), "1", "{kind}: {b} is now what {a} was");
        assert_eq!(fs::symlink_metadata(s.on_server(&c)).unwrap().nlink(), 1, "{kind}: on the server");
    }
    // An open file that is unlinked has no name left, though the client keeps it on the server
    // under a hidden one until it is closed (as the Linux NFS client shows 0 too).
    ok(posixop(&nobody, &["open", &s.at("open-only"), "wronly", "creat"]), "create open-only");
    let got = ok(posixop(&nobody, &["unlink-fstat", &s.at("open-only")]), "unlink-fstat open-only");
    assert_eq!(got, "nlink=0", "fstat of an open file after its unlink");
    // With a second name, one is left, seen by fstat on the open file and later by lstat.
    ok(posixop(&nobody, &["open", &s.at("open-two"), "wronly", "creat"]), "create open-two");
    ok(posixop(&nobody, &["link", &s.at("open-two"), &s.at("open-other")]), "link open-two");
    assert_eq!(nlink("open-other"), "2");
    let got = ok(posixop(&nobody, &["unlink-fstat", &s.at("open-two")]), "unlink-fstat open-two");
    assert_eq!(got, "nlink=1", "fstat of an open file with another name after its unlink");
    assert_eq!(nlink("open-other"), "1", "the other name after the unlinked file was closed");
}

#[test]
fn link_counts_follow_renames_and_unlinks_eagernfs() {
    require_fuse!("link_counts_follow_renames_and_unlinks_eagernfs");
    link_counts_follow_renames_and_unlinks(false);
}

#[test]
fn link_counts_follow_renames_and_unlinks_ganesha() {
    require_fuse!("link_counts_follow_renames_and_unlinks_ganesha");
    link_counts_follow_renames_and_unlinks(true);
}

// ----- 6. symlink targets up to PATH_MAX - 1 bytes --------------------------------------------

/// A symlink target of `len` bytes that looks like a path: 200-byte components.
fn long_target(len: usize) -> String {
    let component = "c".repeat(199) + "/";
    component.repeat(len / component.len() + 1)[..len].to_string()
}

fn symlink_targets_up_to_path_max(peer: Peer) {
    let Some(s) = Setup::with_peer(peer, "") else { return };
    let nobody = As::nobody();
    // Linux's PATH_MAX (4096) counts the NUL that ends a path: 4095 bytes is the longest
    // target symlink(2) takes.
    let target = long_target(4095);
    ok(posixop(&nobody, &["symlink", &target, &s.at("long")]), "symlink to a 4095-byte target");
    let got = ok(posixop(&nobody, &["readlink", &s.at("long")]), "readlink of a 4095-byte target");
    assert!(got == target, "readlink gave {} bytes, not the 4095 written", got.len());
    let seen = ok(posixop(&nobody, &["lstat", &s.at("long")]), "lstat");
    assert_eq!(field(&seen, "size").as_deref(), Some("4095"), "{seen}");
    if s.memory {
        return;
    }
    assert_eq!(fs::read_link(s.on_server("long")).unwrap().as_os_str().len(), 4095, "on the server");
    // One made on the server's disk reads back whole too.
    let other = long_target(4094) + "x";
    std::os::unix::fs::symlink(&other, s.on_server("made-there")).unwrap();
    let got = ok(posixop(&nobody, &["readlink", &s.at("made-there")]), "readlink of one made on the server");
    assert!(got == other, "readlink gave {} bytes, not the 4095 on disk", got.len());
}

#[test]
fn symlink_targets_up_to_path_max_eagernfs() {
    require_fuse!("symlink_targets_up_to_path_max_eagernfs");
    symlink_targets_up_to_path_max(Peer::Eagernfs);
}

#[test]
fn symlink_targets_up_to_path_max_eagernfs_memory() {
    require_fuse!("symlink_targets_up_to_path_max_eagernfs_memory");
    symlink_targets_up_to_path_max(Peer::EagernfsMemory);
}

#[test]
fn symlink_targets_up_to_path_max_ganesha() {
    require_fuse!("symlink_targets_up_to_path_max_ganesha");
    symlink_targets_up_to_path_max(Peer::Ganesha);
}

// ----- 9. times outside nfstime3 ----------------------------------------------------------------

/// NFSv3 carries unsigned 32-bit seconds: a time set past 2106-02-07T06:28:15Z (2^32 - 1 s)
/// reads back as that second, one before 1970 as 1970-01-01T00:00:00Z. Both backends alike.
fn times_outside_nfstime3_are_clamped(peer: Peer) {
    use std::time::{Duration, UNIX_EPOCH};
    let Some(s) = Setup::with_peer(peer, "") else { return };
    let path = s.mount.path("t");
    let f = fs::File::create(&path).unwrap();
    let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
    for (set, want) in
        [(1u64 << 32, u32::MAX as i64), (1 << 33, u32::MAX as i64), (1_700_000_000, 1_700_000_000)]
    {
        f.set_times(fs::FileTimes::new().set_modified(at(set)).set_accessed(at(set))).unwrap();
        let m = fs::File::open(&path).unwrap().metadata().unwrap();
        assert_eq!((m.mtime(), m.atime()), (want, want), "set {set} s");
    }
    f.set_times(fs::FileTimes::new().set_modified(UNIX_EPOCH - Duration::from_secs(10))).unwrap();
    let m = fs::File::open(&path).unwrap().metadata().unwrap();
    assert_eq!(m.mtime(), 0, "before 1970");
    if !s.memory {
        assert_eq!(fs::metadata(s.on_server("t")).unwrap().mtime(), 0, "on the server's disk");
    }
}

#[test]
fn times_outside_nfstime3_are_clamped_eagernfs() {
    require_fuse!("times_outside_nfstime3_are_clamped_eagernfs");
    times_outside_nfstime3_are_clamped(Peer::Eagernfs);
}

#[test]
fn times_outside_nfstime3_are_clamped_eagernfs_memory() {
    require_fuse!("times_outside_nfstime3_are_clamped_eagernfs_memory");
    times_outside_nfstime3_are_clamped(Peer::EagernfsMemory);
}

// ----- 7. a rewound directory stream shows the directory as it is now --------------------------

fn rewinddir_after_unlink_no_longer_lists_the_name(peer: Peer) {
    let Some(s) = Setup::with_peer(peer, "") else { return };
    for i in 0..20 {
        fs::write(s.mount.path(&format!("f{i}")), b"x").unwrap();
    }
    let root = As::root();
    // opendir, read until f7 shows, unlink f7, rewinddir, read all again.
    let got = ok(posixop(&root, &["rewind-unlink", &s.at(""), "f7"]), "rewind-unlink");
    assert_eq!(got, "gone", "a rewound stream still listed the unlinked name");
    assert!(!s.mount.path("f7").exists());
}

#[test]
fn rewinddir_after_unlink_no_longer_lists_the_name_eagernfs() {
    require_fuse!("rewinddir_after_unlink_no_longer_lists_the_name_eagernfs");
    rewinddir_after_unlink_no_longer_lists_the_name(Peer::Eagernfs);
}

#[test]
fn rewinddir_after_unlink_no_longer_lists_the_name_ganesha() {
    require_fuse!("rewinddir_after_unlink_no_longer_lists_the_name_ganesha");
    rewinddir_after_unlink_no_longer_lists_the_name(Peer::Ganesha);
}

// ----- execute-only programs (issue 22, item 4) -------------------------------------------------

/// A program another user may execute but not read (mode 0111, 0001) runs through the mount, as
/// through a kernel NFS mount (the client asks for execute, not read, at execve's open; the
/// server lets such a caller READ it). Reading it is still refused.
fn execute_only_programs_run(peer: Peer) {
    let Some(s) = Setup::with_peer(peer, "") else { return };
    let nobody = As::nobody();
    let prog = s.mount.path("prog");
    fs::copy("/bin/true", &prog).unwrap();
    for mode in [0o111, 0o001] {
        chmod(&prog, mode);
        ok(posixop(&nobody, &["exec", &s.at("prog")]), &format!("exec of a mode {mode:o} program"));
        denied(
            posixop(&nobody, &["open", &s.at("prog"), "rdonly"]),
            &format!("reading a mode {mode:o} program"),
        );
    }
    // Without execute permission for the caller it does not run.
    chmod(&prog, 0o110);
    denied(posixop(&nobody, &["exec", &s.at("prog")]), "exec without the x bit for others");
}

#[test]
fn execute_only_programs_run_eagernfs() {
    require_fuse!("execute_only_programs_run_eagernfs");
    execute_only_programs_run(Peer::Eagernfs);
}

#[test]
fn execute_only_programs_run_eagernfs_memory() {
    require_fuse!("execute_only_programs_run_eagernfs_memory");
    execute_only_programs_run(Peer::EagernfsMemory);
}

#[test]
fn execute_only_programs_run_ganesha() {
    require_fuse!("execute_only_programs_run_ganesha");
    execute_only_programs_run(Peer::Ganesha);
}

// ----- file handles (issue 22, item 7) ---------------------------------------------------------

/// Drop the kernel's unused dentries and inodes (the mount then gets FORGETs).
fn drop_kernel_caches() {
    fs::write("/proc/sys/vm/drop_caches", "2").expect("write /proc/sys/vm/drop_caches (needs root)");
}

/// `name_to_handle_at` on the mount gives handles that `open_by_handle_at` opens again after the
/// kernel has forgotten the inodes (the mount answers LOOKUP of "." and ".." by inode number),
/// for a file and for a directory (which the kernel reconnects to the tree through ".."); a
/// removed file's handle is stale.
fn file_handles_outlive_the_kernel_s_inodes(peer: Peer) {
    let Some(s) = Setup::with_peer(peer, "") else { return };
    let root = As::root();
    fs::create_dir_all(s.mount.path("d/e")).unwrap();
    fs::write(s.mount.path("d/e/f"), b"opened by handle").unwrap();
    fs::write(s.mount.path("gone"), b"x").unwrap();
    let file = ok(posixop(&root, &["handle", &s.at("d/e/f")]), "name_to_handle_at of a file");
    let dir = ok(posixop(&root, &["handle", &s.at("d/e")]), "name_to_handle_at of a directory");
    let gone = ok(posixop(&root, &["handle", &s.at("gone")]), "name_to_handle_at of a file to remove");
    fs::remove_file(s.mount.path("gone")).unwrap();
    drop_kernel_caches();
    assert_eq!(
        ok(posixop(&root, &["open-handle", &s.at(""), &file]), "open_by_handle_at"),
        "opened by handle"
    );
    drop_kernel_caches();
    assert_eq!(ok(posixop(&root, &["open-handle", &s.at(""), &dir]), "open_by_handle_at of a dir"), "dir");
    let r = posixop(&root, &["open-handle", &s.at(""), &gone]);
    assert_eq!(r.err_kind(), Some("ESTALE"), "a removed file's handle: {r:?}");
}

#[test]
fn file_handles_outlive_the_kernel_s_inodes_eagernfs() {
    require_fuse!("file_handles_outlive_the_kernel_s_inodes_eagernfs");
    file_handles_outlive_the_kernel_s_inodes(Peer::Eagernfs);
}

#[test]
fn file_handles_outlive_the_kernel_s_inodes_ganesha() {
    require_fuse!("file_handles_outlive_the_kernel_s_inodes_ganesha");
    file_handles_outlive_the_kernel_s_inodes(Peer::Ganesha);
}
