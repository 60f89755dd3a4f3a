//! Tests of the local-directory backend. They need root (the backend does),
//! and the cross-mount tests mount a tmpfs.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use bytes::Bytes;
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::{
    access, Backend, CreateMode, Credentials, DirEntry, FileHandle, FileType, FsError, NodeKind, SetAttr,
    SetTime, StableHow, Timestamp, MAX_BACKEND_HANDLE, SYMLINK_TARGET_BYTES_MAX,
};
use tempfile::TempDir;

const KEY: [u8; 16] = *b"0123456789abcdef";

fn config(root: &Path, key: [u8; 16]) -> LocalConfig {
    LocalConfig { root: root.to_path_buf(), handle_key: key, unsafe_async: false, journaled: false }
}

fn setup() -> (TempDir, LocalBackend) {
    let dir = tempfile::Builder::new().prefix("eagernfs-local-").tempdir_in("/tmp").unwrap();
    // tempdir makes 0700; other users must be able to search the root.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let b = LocalBackend::open(config(dir.path(), KEY)).unwrap();
    (dir, b)
}

fn root() -> Credentials {
    Credentials::root()
}

fn user(uid: u32, gid: u32, groups: &[u32]) -> Credentials {
    Credentials { uid, gid, groups: groups.to_vec() }
}

fn mode(m: u32) -> SetAttr {
    SetAttr { mode: Some(m), ..SetAttr::default() }
}

fn create(b: &LocalBackend, cred: &Credentials, dir: &FileHandle, name: &str, m: u32) -> FileHandle {
    b.create(cred, dir, name.as_bytes(), &CreateMode::Guarded(mode(m))).unwrap().handle
}

fn mkdir(b: &LocalBackend, cred: &Credentials, dir: &FileHandle, name: &str, m: u32) -> FileHandle {
    b.mkdir(cred, dir, name.as_bytes(), &mode(m)).unwrap().handle
}

fn chown(b: &LocalBackend, fh: &FileHandle, uid: u32, gid: u32) {
    b.setattr(&root(), fh, &SetAttr { uid: Some(uid), gid: Some(gid), ..SetAttr::default() }, None).unwrap();
}

/// A world-writable directory owned by root, for tests where users create.
fn public_dir(b: &LocalBackend) -> FileHandle {
    mkdir(b, &root(), &b.root(), "pub", 0o777)
}

fn list(b: &LocalBackend, cred: &Credentials, dir: &FileHandle, plus: bool) -> Vec<DirEntry> {
    let mut out = Vec::new();
    let mut cookie = 0;
    let mut verf = [0; 8];
    loop {
        let mut page = Vec::new();
        let info = b
            .readdir(cred, dir, cookie, verf, plus, &mut |e| {
                page.push(e.clone());
                page.len() < 7
            })
            .unwrap();
        verf = info.cookieverf;
        if info.eof {
            out.extend(page);
            return out;
        }
        // The refused entry (last pushed) comes again next time.
        page.pop();
        cookie = page.last().map(|e| e.cookie).unwrap_or(cookie);
        out.extend(page);
    }
}

/// A tmpfs mounted for the duration of a test.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path) -> Mount {
        Mount::new("none", at, "tmpfs", "")
    }

    fn new(source: &str, at: &Path, fstype: &str, options: &str) -> Mount {
        fs::create_dir_all(at).unwrap();
        let target = CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
        let source = CString::new(source).unwrap();
        let fstype = CString::new(fstype).unwrap();
        let options = CString::new(options).unwrap();
        // SAFETY: all strings are NUL-terminated and live across the call.
        let r = unsafe {
            libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, options.as_ptr().cast())
        };
        assert_eq!(r, 0, "mount {fstype:?} at {}: {}", at.display(), std::io::Error::last_os_error());
        Mount(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let target = CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the path is NUL-terminated.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

// ---------------------------------------------------------------- handles

#[test]
fn handles_are_small_and_resolve_to_the_same_object() {
    let (dir, b) = setup();
    assert!(b.root().0.len() <= MAX_BACKEND_HANDLE);
    let fh = create(&b, &root(), &b.root(), "f", 0o644);
    assert!(fh.0.len() <= MAX_BACKEND_HANDLE);
    let ino = fs::metadata(dir.path().join("f")).unwrap().ino();
    assert_eq!(b.getattr(&fh).unwrap().fileid, ino);
    let l = b.lookup(&root(), &b.root(), b"f").unwrap();
    assert_eq!(l.handle, fh);
    assert_eq!(b.getattr(&b.root()).unwrap().fileid, fs::metadata(dir.path()).unwrap().ino());
}

#[test]
fn handles_survive_a_restart_with_the_same_key_only() {
    let (dir, b) = setup();
    let fh = create(&b, &root(), &b.root(), "f", 0o644);
    let ino = b.getattr(&fh).unwrap().fileid;
    let root_fh = b.root();
    drop(b);
    let again = LocalBackend::open(config(dir.path(), KEY)).unwrap();
    assert_eq!(again.root(), root_fh);
    assert_eq!(again.getattr(&fh).unwrap().fileid, ino);
    let other = LocalBackend::open(config(dir.path(), *b"another export!!")).unwrap();
    assert_eq!(other.getattr(&fh), Err(FsError::BadHandle));
    assert_eq!(other.getattr(&root_fh), Err(FsError::BadHandle));
}

#[test]
fn a_handle_bound_to_another_root_is_refused_even_with_the_same_key() {
    let (dir, b) = setup();
    fs::create_dir(dir.path().join("sub")).unwrap();
    let fh = create(&b, &root(), &b.root(), "f", 0o644);
    let sub = LocalBackend::open(config(&dir.path().join("sub"), KEY)).unwrap();
    assert_eq!(sub.getattr(&fh), Err(FsError::BadHandle));
}

#[test]
fn forged_and_malformed_handles_are_bad_handles() {
    let (_dir, b) = setup();
    let fh = create(&b, &root(), &b.root(), "f", 0o644);
    // Keep the kernel handle (a real inode) and replace the MAC.
    let mut forged = fh.0.to_vec();
    let n = forged.len();
    forged[n - 16..].copy_from_slice(&[0x5a; 16]);
    assert_eq!(b.getattr(&FileHandle(forged.into())), Err(FsError::BadHandle));
    assert_eq!(b.getattr(&FileHandle(Bytes::new())), Err(FsError::BadHandle));
    assert_eq!(b.getattr(&FileHandle(fh.0.slice(..fh.0.len() - 1))), Err(FsError::BadHandle));
    let mut long = fh.0.to_vec();
    long.resize(64, 0);
    assert_eq!(b.getattr(&FileHandle(long.into())), Err(FsError::BadHandle));
    let cred = root();
    let bad = FileHandle(Bytes::from_static(&[1; 40]));
    assert_eq!(b.read(&cred, &bad, 0, 10).unwrap_err(), FsError::BadHandle);
    assert_eq!(b.lookup(&cred, &bad, b"x").unwrap_err(), FsError::BadHandle);
    assert_eq!(b.write(&cred, &bad, 0, b"x", StableHow::Unstable).unwrap_err(), FsError::BadHandle);
}

#[test]
fn removed_objects_are_stale() {
    let (dir, b) = setup();
    let cred = root();
    // Removed through the backend after its descriptor was cached by a write.
    let f = create(&b, &cred, &b.root(), "f", 0o644);
    b.write(&cred, &f, 0, b"data", StableHow::Unstable).unwrap();
    b.remove(&cred, &b.root(), b"f").unwrap();
    assert_eq!(b.getattr(&f), Err(FsError::Stale));
    assert_eq!(b.read(&cred, &f, 0, 4).unwrap_err(), FsError::Stale);
    // Removed behind the backend's back while cached.
    let g = create(&b, &cred, &b.root(), "g", 0o644);
    b.read(&cred, &g, 0, 4).unwrap();
    fs::remove_file(dir.path().join("g")).unwrap();
    assert_eq!(b.read(&cred, &g, 0, 4).unwrap_err(), FsError::Stale);
    assert_eq!(b.getattr(&g), Err(FsError::Stale));
    // A removed directory.
    let d = mkdir(&b, &cred, &b.root(), "d", 0o755);
    b.rmdir(&cred, &b.root(), b"d").unwrap();
    assert_eq!(b.getattr(&d), Err(FsError::Stale));
    assert_eq!(b.lookup(&cred, &d, b"x").unwrap_err(), FsError::Stale);
}

#[test]
fn lookup_does_not_cross_into_another_file_system() {
    let (dir, b) = setup();
    let _m = Mount::tmpfs(&dir.path().join("mnt"));
    fs::write(dir.path().join("mnt/inside"), b"x").unwrap();
    assert_eq!(b.lookup(&root(), &b.root(), b"mnt").unwrap_err(), FsError::XDev);
    // READDIRPLUS lists the name but gives no handle into the mount.
    let entries = list(&b, &root(), &b.root(), true);
    let e = entries.iter().find(|e| &e.name[..] == b"mnt").expect("mount point listed");
    assert!(e.handle.is_none() && e.attr.is_none());
}

// ---------------------------------------------------------------- no escape

#[test]
fn symlinks_are_never_followed() {
    let (_dir, b) = setup();
    let cred = root();
    let r = b.root();
    b.symlink(&cred, &r, b"etc", b"/etc", &SetAttr::default()).unwrap();
    b.symlink(&cred, &r, b"pw", b"/etc/passwd", &SetAttr::default()).unwrap();
    let etc = b.lookup(&cred, &r, b"etc").unwrap();
    assert_eq!(etc.attr.ftype, FileType::Symlink);
    assert_eq!(b.lookup(&cred, &etc.handle, b"passwd").unwrap_err(), FsError::NotDir);
    assert_eq!(
        b.create(&cred, &etc.handle, b"x", &CreateMode::Unchecked(SetAttr::default())).unwrap_err(),
        FsError::NotDir
    );
    assert_eq!(b.readdir(&cred, &etc.handle, 0, [0; 8], false, &mut |_| true).unwrap_err(), FsError::NotDir);
    let pw = b.lookup(&cred, &r, b"pw").unwrap();
    assert_eq!(pw.attr.ftype, FileType::Symlink);
    assert_eq!(b.read(&cred, &pw.handle, 0, 100).unwrap_err(), FsError::Inval);
    assert_eq!(b.write(&cred, &pw.handle, 0, b"x", StableHow::FileSync).unwrap_err(), FsError::Inval);
    assert_eq!(&b.readlink(&cred, &pw.handle).unwrap().0[..], b"/etc/passwd");
    // CREATE over a symlink does not write through it.
    assert_eq!(
        b.create(&cred, &r, b"pw", &CreateMode::Unchecked(SetAttr { size: Some(0), ..SetAttr::default() }))
            .unwrap_err(),
        FsError::Exist
    );
    assert!(fs::metadata("/etc/passwd").unwrap().len() > 0);
    // Names are single components.
    assert_eq!(b.lookup(&cred, &r, b"etc/passwd").unwrap_err(), FsError::Inval);
    assert_eq!(b.lookup(&cred, &r, b"../etc").unwrap_err(), FsError::Inval);
    assert_eq!(b.lookup(&cred, &r, b"").unwrap_err(), FsError::Inval);
    assert_eq!(b.lookup(&cred, &r, &[b'a'; 256]).unwrap_err(), FsError::NameTooLong);
}

#[test]
fn dotdot_of_the_root_is_the_root() {
    let (dir, b) = setup();
    let cred = root();
    let r = b.root();
    let up = b.lookup(&cred, &r, b"..").unwrap();
    assert_eq!(up.handle, r);
    assert_eq!(up.attr.fileid, fs::metadata(dir.path()).unwrap().ino());
    assert_eq!(b.lookup(&cred, &up.handle, b"..").unwrap().handle, r);
    assert_eq!(b.lookup(&cred, &r, b".").unwrap().handle, r);
    // `..` of a subdirectory is its parent.
    let sub = mkdir(&b, &cred, &r, "sub", 0o755);
    assert_eq!(b.lookup(&cred, &sub, b"..").unwrap().handle, r);
    // READDIR of the root: `..` is the root too.
    let entries = list(&b, &cred, &r, true);
    let dd = entries.iter().find(|e| &e.name[..] == b"..").unwrap();
    assert_eq!(dd.fileid, up.attr.fileid);
    assert_eq!(dd.handle.as_ref(), Some(&r));
    // `..` cannot be removed or renamed away.
    assert_eq!(b.rmdir(&cred, &r, b"..").unwrap_err(), FsError::Inval);
    assert_eq!(b.rename(&cred, &r, b"..", &r, b"x").unwrap_err(), FsError::Inval);
}

// ---------------------------------------------------------------- credentials

#[test]
fn a_private_root_file_is_unreadable_by_others() {
    let (_dir, b) = setup();
    let f = create(&b, &root(), &b.root(), "secret", 0o600);
    b.write(&root(), &f, 0, b"top secret", StableHow::Unstable).unwrap();
    let u = user(1000, 1000, &[]);
    assert_eq!(b.read(&u, &f, 0, 100).unwrap_err(), FsError::Access);
    assert_eq!(b.write(&u, &f, 0, b"x", StableHow::Unstable).unwrap_err(), FsError::Access);
    assert_eq!(b.access(&u, &f, access::ALL).unwrap().0 & access::READ, 0);
    assert_eq!(&b.read(&root(), &f, 0, 100).unwrap().data[..], b"top secret");
}

#[test]
fn users_cannot_create_in_a_root_owned_0755_dir() {
    let (dir, b) = setup();
    let u = user(1000, 1000, &[]);
    let r = b.root();
    assert_eq!(
        b.create(&u, &r, b"x", &CreateMode::Guarded(SetAttr::default())).unwrap_err(),
        FsError::Access
    );
    assert_eq!(b.mkdir(&u, &r, b"d", &SetAttr::default()).unwrap_err(), FsError::Access);
    assert_eq!(b.symlink(&u, &r, b"s", b"t", &SetAttr::default()).unwrap_err(), FsError::Access);
    assert!(fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn created_objects_belong_to_the_caller() {
    let (_dir, b) = setup();
    let p = public_dir(&b);
    let u = user(1000, 1001, &[]);
    let c = b.create(&u, &p, b"f", &CreateMode::Unchecked(SetAttr::default())).unwrap();
    assert_eq!((c.attr.uid, c.attr.gid), (1000, 1001));
    let d = b.mkdir(&u, &p, b"d", &SetAttr::default()).unwrap();
    assert_eq!((d.attr.uid, d.attr.gid), (1000, 1001));
    let s = b.symlink(&u, &p, b"s", b"f", &SetAttr::default()).unwrap();
    assert_eq!((s.attr.uid, s.attr.gid), (1000, 1001));
}

#[test]
fn users_cannot_chown() {
    let (_dir, b) = setup();
    let p = public_dir(&b);
    let u = user(1000, 1000, &[]);
    let f = create(&b, &u, &p, "mine", 0o644);
    let to_root = SetAttr { uid: Some(0), ..SetAttr::default() };
    assert_eq!(b.setattr(&u, &f, &to_root, None).unwrap_err(), FsError::Perm);
    let to_foreign_group = SetAttr { gid: Some(4242), ..SetAttr::default() };
    assert_eq!(b.setattr(&u, &f, &to_foreign_group, None).unwrap_err(), FsError::Perm);
    // Into a group the user is in: allowed.
    let member = user(1000, 1000, &[4242]);
    b.setattr(&member, &f, &to_foreign_group, None).unwrap();
    assert_eq!(b.getattr(&f).unwrap().gid, 4242);
    // Root may.
    b.setattr(&root(), &f, &to_root, None).unwrap();
    assert_eq!(b.getattr(&f).unwrap().uid, 0);
    // Nor may a non-owner chmod or set client times.
    let other = user(1001, 1001, &[]);
    assert_eq!(b.setattr(&other, &f, &mode(0o777), None).unwrap_err(), FsError::Perm);
}

#[test]
fn sticky_directories_protect_other_users_files() {
    let (_dir, b) = setup();
    let r = b.root();
    let tmp = mkdir(&b, &root(), &r, "tmp", 0o1777);
    let alice = user(1000, 1000, &[]);
    let bob = user(1001, 1001, &[]);
    create(&b, &alice, &tmp, "a", 0o666);
    assert_eq!(b.remove(&bob, &tmp, b"a").unwrap_err(), FsError::Perm);
    assert_eq!(b.rename(&bob, &tmp, b"a", &tmp, b"b").unwrap_err(), FsError::Perm);
    b.remove(&alice, &tmp, b"a").unwrap();
    // Without the sticky bit Bob could have.
    let open = mkdir(&b, &root(), &r, "open", 0o777);
    create(&b, &alice, &open, "a", 0o666);
    b.remove(&bob, &open, b"a").unwrap();
}

#[test]
fn group_members_read_group_files() {
    let (_dir, b) = setup();
    let f = create(&b, &root(), &b.root(), "g", 0o640);
    chown(&b, &f, 0, 4242);
    b.write(&root(), &f, 0, b"shared", StableHow::Unstable).unwrap();
    assert_eq!(&b.read(&user(1000, 1000, &[4242]), &f, 0, 10).unwrap().data[..], b"shared");
    assert_eq!(&b.read(&user(1000, 4242, &[]), &f, 0, 10).unwrap().data[..], b"shared");
    assert_eq!(b.read(&user(1000, 1000, &[]), &f, 0, 10).unwrap_err(), FsError::Access);
    // The kernel sees the groups too: a 0770 directory of group 4242.
    let d = mkdir(&b, &root(), &b.root(), "team", 0o770);
    chown(&b, &d, 0, 4242);
    let c = b.create(&user(1000, 1000, &[4242]), &d, b"x", &CreateMode::Guarded(SetAttr::default())).unwrap();
    assert_eq!((c.attr.uid, c.attr.gid), (1000, 1000));
    assert_eq!(
        b.create(&user(1000, 1000, &[]), &d, b"y", &CreateMode::Guarded(SetAttr::default())).unwrap_err(),
        FsError::Access
    );
    assert_eq!(b.lookup(&user(1000, 1000, &[]), &d, b"x").unwrap_err(), FsError::Access);
}

/// (fsuid, groups) of a thread, from /proc.
fn thread_ids(status_path: &str) -> (u32, String) {
    let status = fs::read_to_string(status_path).unwrap();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).map(|l| l[name.len()..].trim().to_string()).unwrap()
    };
    let fsuid = field("Uid:").split_whitespace().nth(3).unwrap().parse().unwrap();
    (fsuid, field("Groups:"))
}

#[test]
fn identity_changes_only_the_calling_thread() {
    let (_dir, b) = setup();
    let b = Arc::new(b);
    let mine_before = thread_ids("/proc/thread-self/status");
    let done = Arc::new(Barrier::new(2));
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let (b, done) = (b.clone(), done.clone());
        std::thread::spawn(move || {
            b.lookup(&user(1000, 1000, &[4242, 4243]), &b.root(), b".").unwrap();
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            done.wait(); // keep the thread (and its identity) alive while the test looks
        })
    };
    let tid = rx.recv().unwrap();
    // The worker still holds the caller's identity (the thread-local cache
    // keeps it until the next switch)…
    assert_eq!(thread_ids(&format!("/proc/self/task/{tid}/status")), (1000, "4242 4243".to_string()));
    // …and this thread's identity did not change with it.
    assert_eq!(thread_ids("/proc/thread-self/status"), mine_before);
    done.wait();
    worker.join().unwrap();
}

/// One capability (per `linux/capability.h`).
const CAP_DAC_READ_SEARCH: u32 = 2;

#[test]
fn open_names_the_missing_capability() {
    let (dir, _b) = setup();
    let root = dir.path().to_path_buf();
    // Capabilities are per thread: drop CAP_DAC_READ_SEARCH (effective and
    // permitted, or setfsuid(0) would raise it again) on a throwaway thread.
    let err = std::thread::spawn(move || {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Header { version: 0x2008_0522, pid: 0 };
        let mut d = [Data::default(); 2];
        // SAFETY: header and a two-element data array, as capget v3 expects.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) }, 0);
        d[0].effective &= !(1 << CAP_DAC_READ_SEARCH);
        d[0].permitted &= !(1 << CAP_DAC_READ_SEARCH);
        // SAFETY: as above; capset only reads them.
        assert_eq!(unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) }, 0);
        LocalBackend::open(config(&root, KEY)).err().expect("open must fail without CAP_DAC_READ_SEARCH")
    })
    .join()
    .unwrap();
    assert!(err.to_string().contains("CAP_DAC_READ_SEARCH"), "{err}");
}

// ---------------------------------------------------------------- attributes

#[test]
fn attributes_match_stat() {
    let (dir, b) = setup();
    let cred = root();
    let f = create(&b, &cred, &b.root(), "f", 0o640);
    b.write(&cred, &f, 0, &[7u8; 10_000], StableHow::FileSync).unwrap();
    let times = SetAttr {
        atime: SetTime::ClientTime(Timestamp { secs: 1_000_000_000, nsecs: 123_456_789 }),
        mtime: SetTime::ClientTime(Timestamp { secs: 1_100_000_000, nsecs: 987_654_321 }),
        ..SetAttr::default()
    };
    b.setattr(&cred, &f, &times, None).unwrap();
    let a = b.getattr(&f).unwrap();
    let m = fs::symlink_metadata(dir.path().join("f")).unwrap();
    assert_eq!(a.ftype, FileType::Regular);
    assert_eq!(a.fileid, m.ino());
    assert_eq!(a.fsid, m.dev());
    assert_eq!(a.nlink, 1);
    assert_eq!(a.size, 10_000);
    assert_eq!(a.used, m.blocks() * 512);
    assert!(a.used >= 10_000);
    assert_eq!(a.mode, 0o640);
    assert_eq!(a.atime, Timestamp { secs: 1_000_000_000, nsecs: 123_456_789 });
    assert_eq!(a.mtime, Timestamp { secs: 1_100_000_000, nsecs: 987_654_321 });
    assert_eq!(a.ctime, Timestamp { secs: m.ctime(), nsecs: m.ctime_nsec() as u32 });
    let dev = b
        .mknod(&cred, &b.root(), b"null", NodeKind::CharDevice { major: 1, minor: 3 }, &mode(0o600))
        .unwrap();
    assert_eq!(dev.attr.ftype, FileType::CharDevice);
    assert_eq!(dev.attr.rdev, (1, 3));
    assert_eq!(dev.attr.mode, 0o600);
    b.link(&cred, &f, &b.root(), b"f2").unwrap();
    assert_eq!(b.getattr(&f).unwrap().nlink, 2);
    let d = b.getattr(&b.root()).unwrap();
    assert_eq!(d.ftype, FileType::Directory);
}

// ---------------------------------------------------------------- read / write / commit

#[test]
fn write_then_read_back_with_each_stability() {
    let (_dir, b) = setup();
    let cred = root();
    let f = create(&b, &cred, &b.root(), "f", 0o644);
    for (i, how) in [StableHow::Unstable, StableHow::DataSync, StableHow::FileSync].into_iter().enumerate() {
        let w = b.write(&cred, &f, i as u64 * 4, b"abcd", how).unwrap();
        assert_eq!(w.count, 4);
        assert_eq!(w.committed, how);
        assert_eq!(w.verifier, b.write_verifier());
        assert_eq!(w.wcc.before.unwrap().size, i as u64 * 4);
        assert_eq!(w.wcc.after.unwrap().size, (i as u64 + 1) * 4);
    }
    let (wcc, verf) = b.commit(&cred, &f, 0, 0).unwrap();
    assert_eq!(verf, b.write_verifier());
    assert_eq!(wcc.after.unwrap().size, 12);
    let r = b.read(&cred, &f, 0, 100).unwrap();
    assert_eq!(&r.data[..], b"abcdabcdabcd");
    assert!(r.eof);
    let r = b.read(&cred, &f, 2, 4).unwrap();
    assert_eq!(&r.data[..], b"cdab");
    assert!(!r.eof);
    let r = b.read(&cred, &f, 100, 4).unwrap();
    assert!(r.data.is_empty() && r.eof);
    let (dir2, b2) = setup();
    drop(dir2);
    assert_ne!(b.write_verifier(), b2.write_verifier());
}

#[test]
fn unsafe_async_still_reports_what_was_asked() {
    let dir = tempfile::Builder::new().prefix("eagernfs-local-").tempdir_in("/tmp").unwrap();
    let b = LocalBackend::open(LocalConfig { unsafe_async: true, ..config(dir.path(), KEY) }).unwrap();
    let f = create(&b, &root(), &b.root(), "f", 0o644);
    let w = b.write(&root(), &f, 0, b"x", StableHow::FileSync).unwrap();
    assert_eq!(w.committed, StableHow::FileSync);
    assert_eq!(&b.read(&root(), &f, 0, 1).unwrap().data[..], b"x");
    b.commit(&root(), &f, 0, 0).unwrap();
}

/// Every change of names or attributes is synced before it returns on a `sync`
/// export (one count per call; concurrent calls may share a sync), and none on
/// an `async` one.
#[test]
fn every_change_of_names_or_attributes_is_synced_before_it_returns() {
    let (_dir, b) = setup();
    let cred = root();
    let r = b.root();
    let before = b.metadata_syncs();
    assert_eq!((before.changes, before.syncs), (0, 0));
    let expect = std::cell::Cell::new(0);
    let step = |what: &str, b: &LocalBackend| {
        expect.set(expect.get() + 1);
        let now = b.metadata_syncs();
        assert_eq!(now.changes, expect.get(), "{what} was not made durable before it returned");
        assert_eq!(now.syncs, expect.get(), "{what}: one caller, one sync");
    };
    let f = create(&b, &cred, &r, "f", 0o644);
    step("CREATE", &b);
    b.create(&cred, &r, b"f", &CreateMode::Unchecked(SetAttr { size: Some(0), ..SetAttr::default() }))
        .unwrap();
    step("CREATE of an existing file (truncation)", &b);
    let d = mkdir(&b, &cred, &r, "d", 0o755);
    step("MKDIR", &b);
    b.symlink(&cred, &d, b"s", b"target", &SetAttr::default()).unwrap();
    step("SYMLINK", &b);
    b.mknod(&cred, &d, b"p", NodeKind::Fifo, &mode(0o644)).unwrap();
    step("MKNOD", &b);
    b.link(&cred, &f, &d, b"f2").unwrap();
    step("LINK", &b);
    b.rename(&cred, &d, b"f2", &r, b"f3").unwrap();
    step("RENAME", &b);
    b.setattr(&cred, &f, &mode(0o600), None).unwrap();
    step("SETATTR", &b);
    if b.setxattr(&cred, &f, b"k", b"v", eagernfs_vfs::XattrSet::Either).is_ok() {
        step("SETXATTR", &b);
        b.removexattr(&cred, &f, b"k").unwrap();
        step("REMOVEXATTR", &b);
    }
    b.remove(&cred, &r, b"f3").unwrap();
    step("REMOVE", &b);
    b.remove(&cred, &d, b"s").unwrap();
    b.remove(&cred, &d, b"p").unwrap();
    expect.set(expect.get() + 2);
    b.rmdir(&cred, &r, b"d").unwrap();
    step("RMDIR", &b);
    // Reads and failures sync nothing.
    b.lookup(&cred, &r, b"f").unwrap();
    b.getattr(&f).unwrap();
    assert_eq!(b.remove(&cred, &r, b"missing").unwrap_err(), FsError::NoEnt);
    assert_eq!(b.metadata_syncs().changes, expect.get());

    let dir = tempfile::Builder::new().prefix("eagernfs-local-").tempdir_in("/tmp").unwrap();
    let a = LocalBackend::open(LocalConfig { unsafe_async: true, ..config(dir.path(), KEY) }).unwrap();
    let f = create(&a, &cred, &a.root(), "f", 0o644);
    a.setattr(&cred, &f, &mode(0o600), None).unwrap();
    a.rename(&cred, &a.root(), b"f", &a.root(), b"g").unwrap();
    assert_eq!(a.metadata_syncs().changes, 0, "an `async` export syncs nothing");
    let dir = tempfile::Builder::new().prefix("eagernfs-local-").tempdir_in("/tmp").unwrap();
    let j = LocalBackend::open(LocalConfig { journaled: true, ..config(dir.path(), KEY) }).unwrap();
    create(&j, &cred, &j.root(), "f", 0o644);
    assert_eq!(j.metadata_syncs().changes, 0, "behind a journal, the journal makes changes durable");
}

/// Concurrent changes share syncs: 8 threads each creating and removing files
/// make every change durable in fewer syncs than changes (the syncs take long
/// enough on any disk for callers to meet; on tmpfs they cost nothing and may not).
#[test]
fn concurrent_changes_share_syncs() {
    let (_dir, b) = setup();
    let b = Arc::new(b);
    let start = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (b, start) = (b.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..25 {
                    let name = format!("t{t}-{i}");
                    create(&b, &root(), &b.root(), &name, 0o644);
                    b.remove(&root(), &b.root(), name.as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = b.metadata_syncs();
    assert_eq!(s.changes, 400);
    assert!(s.syncs >= 1 && s.syncs <= s.changes, "{s:?}");
    eprintln!("400 changes from 8 threads: {} syncs ({})", s.syncs, s.how);
}

#[test]
fn io_on_non_files_is_refused_without_opening_them() {
    let (_dir, b) = setup();
    let cred = root();
    let r = b.root();
    assert_eq!(b.read(&cred, &r, 0, 10).unwrap_err(), FsError::IsDir);
    assert_eq!(b.write(&cred, &r, 0, b"x", StableHow::Unstable).unwrap_err(), FsError::IsDir);
    // /dev/zero's numbers: reading it would return zeros, not an error.
    let z = b.mknod(&cred, &r, b"zero", NodeKind::CharDevice { major: 1, minor: 5 }, &mode(0o666)).unwrap();
    assert_eq!(b.read(&cred, &z.handle, 0, 10).unwrap_err(), FsError::Inval);
    let fifo = b.mknod(&cred, &r, b"fifo", NodeKind::Fifo, &mode(0o666)).unwrap();
    assert_eq!(b.read(&cred, &fifo.handle, 0, 10).unwrap_err(), FsError::Inval);
    // Also when an ACCESS or GETATTR has left the object's O_PATH descriptor cached, which
    // the READ then checks the type through instead of opening its own.
    for h in [&z.handle, &fifo.handle] {
        b.getattr(h).unwrap();
        b.access(&cred, h, access::READ).unwrap();
        assert_eq!(b.read(&cred, h, 0, 10).unwrap_err(), FsError::Inval);
    }
    b.access(&cred, &r, access::READ).unwrap();
    assert_eq!(b.read(&cred, &r, 0, 10).unwrap_err(), FsError::IsDir);
}

#[test]
fn the_owner_may_write_a_read_only_file_and_others_may_not() {
    let (_dir, b) = setup();
    let p = public_dir(&b);
    let owner = user(1000, 1000, &[]);
    let f = create(&b, &owner, &p, "ro", 0o444);
    b.write(&owner, &f, 0, b"mine", StableHow::DataSync).unwrap();
    b.commit(&owner, &f, 0, 0).unwrap();
    let other = user(1001, 1001, &[]);
    assert_eq!(b.write(&other, &f, 0, b"no", StableHow::Unstable).unwrap_err(), FsError::Access);
    assert_eq!(b.read(&other, &f, 0, 4).unwrap().data, Bytes::from_static(b"mine"));
}

#[test]
fn a_users_write_clears_setuid_as_a_local_write_would() {
    let (_dir, b) = setup();
    let p = public_dir(&b);
    let u = user(1000, 1000, &[]);
    let f = create(&b, &u, &p, "prog", 0o755);
    b.setattr(&u, &f, &mode(0o4755), None).unwrap();
    assert_eq!(b.getattr(&f).unwrap().mode, 0o4755);
    b.write(&u, &f, 0, b"changed", StableHow::Unstable).unwrap();
    assert_eq!(b.getattr(&f).unwrap().mode, 0o755);
}

/// A loop device, detached on drop.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").args(["-d", &self.0]).status();
    }
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Lost unstable data must change the write verifier. To lose some for
/// real: ext4 on a loop device whose backing file lives on a tmpfs too
/// small for it, so write-back fails once the tmpfs is full.
#[test]
fn a_failed_write_back_changes_the_write_verifier() {
    let base = tempfile::Builder::new().prefix("eagernfs-eio-").tempdir_in("/tmp").unwrap();
    let back = Mount::new("none", &base.path().join("back"), "tmpfs", "size=16m");
    let img = back.0.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    let dev = Loop(run("losetup", &["-f", "--show", img.to_str().unwrap()]));
    run("mkfs.ext4", &["-q", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", &dev.0]);
    let mnt = Mount::new(&dev.0, &base.path().join("mnt"), "ext4", "errors=continue");
    let b = LocalBackend::open(config(&mnt.0, KEY)).unwrap();
    let before = b.write_verifier();
    let f = create(&b, &root(), &b.root(), "big", 0o644);
    let chunk = vec![0x5a; 1 << 20];
    let mut failed = false;
    for i in 0..40u64 {
        match b.write(&root(), &f, i << 20, &chunk, StableHow::Unstable) {
            Ok(w) => assert_eq!(w.committed, StableHow::Unstable),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    failed |= b.commit(&root(), &f, 0, 0).is_err();
    assert!(failed, "40 MiB cannot fit in a 16 MiB backing store");
    assert_ne!(b.write_verifier(), before);
    drop(b);
    drop(mnt);
    drop(dev);
    drop(back);
}

// ---------------------------------------------------------------- setattr

#[test]
fn setattr_applies_guards_size_mode_and_times() {
    let (_dir, b) = setup();
    let cred = root();
    let f = create(&b, &cred, &b.root(), "f", 0o644);
    b.write(&cred, &f, 0, b"0123456789", StableHow::Unstable).unwrap();
    let a = b.getattr(&f).unwrap();
    let wrong = Timestamp { secs: a.ctime.secs - 1, nsecs: a.ctime.nsecs };
    assert_eq!(b.setattr(&cred, &f, &mode(0o600), Some(wrong)).unwrap_err(), FsError::NotSync);
    assert_eq!(b.getattr(&f).unwrap().mode, 0o644);
    let set = SetAttr { size: Some(4), mode: Some(0o600), ..SetAttr::default() };
    let wcc = b.setattr(&cred, &f, &set, Some(a.ctime)).unwrap();
    let before = wcc.before.unwrap();
    assert_eq!((before.size, before.mtime, before.ctime), (10, a.mtime, a.ctime));
    let after = wcc.after.unwrap();
    assert_eq!((after.size, after.mode), (4, 0o600));
    assert_eq!(&b.read(&cred, &f, 0, 100).unwrap().data[..], b"0123");
    let t = Timestamp { secs: 1234, nsecs: 5678 };
    let set = SetAttr { mtime: SetTime::ClientTime(t), ..SetAttr::default() };
    assert_eq!(b.setattr(&cred, &f, &set, None).unwrap().after.unwrap().mtime, t);
    let set = SetAttr { mtime: SetTime::ServerTime, ..SetAttr::default() };
    let now = b.setattr(&cred, &f, &set, None).unwrap().after.unwrap().mtime;
    assert!(now.secs > 1_600_000_000);
    assert_eq!(
        b.setattr(&cred, &b.root(), &SetAttr { size: Some(0), ..SetAttr::default() }, None).unwrap_err(),
        FsError::IsDir
    );
}

#[test]
fn truncation_needs_write_permission() {
    let (_dir, b) = setup();
    let f = create(&b, &root(), &b.root(), "f", 0o644);
    b.write(&root(), &f, 0, b"keep", StableHow::Unstable).unwrap();
    let trunc = SetAttr { size: Some(0), ..SetAttr::default() };
    assert_eq!(b.setattr(&user(1000, 1000, &[]), &f, &trunc, None).unwrap_err(), FsError::Access);
    assert_eq!(b.getattr(&f).unwrap().size, 4);
}

#[test]
fn writers_may_touch_but_only_owners_set_times() {
    let (_dir, b) = setup();
    let w = create(&b, &root(), &b.root(), "w", 0o666);
    let before = b.getattr(&w).unwrap();
    let u = user(1000, 1000, &[]);
    // mtime to "now", atime untouched: the kernel alone would want the owner.
    let touch = SetAttr { mtime: SetTime::ServerTime, ..SetAttr::default() };
    let after = b.setattr(&u, &w, &touch, None).unwrap().after.unwrap();
    assert_eq!(after.atime, before.atime);
    let explicit =
        SetAttr { mtime: SetTime::ClientTime(Timestamp { secs: 5, nsecs: 0 }), ..SetAttr::default() };
    assert_eq!(b.setattr(&u, &w, &explicit, None).unwrap_err(), FsError::Perm);
    let ro = create(&b, &root(), &b.root(), "ro", 0o644);
    assert_eq!(b.setattr(&u, &ro, &touch, None).unwrap_err(), FsError::Access);
}

/// Run `f` on a thread whose own umask is `mask`, as on a server whose
/// process umask would strip bits. The thread has its own file-system
/// attributes first (`unshare(CLONE_FS)`), so the mask does not leak into
/// the tests running beside it.
fn with_thread_umask<T: Send>(mask: u32, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: unshare and umask take integers and touch no memory.
            let r = unsafe { libc::unshare(libc::CLONE_FS) };
            assert_eq!(r, 0, "unshare(CLONE_FS): {}", std::io::Error::last_os_error());
            // SAFETY: as above.
            unsafe { libc::umask(mask as libc::mode_t) };
            f()
        })
        .join()
        .unwrap()
    })
}

#[test]
fn created_modes_ignore_the_umask_but_keep_setgid_inheritance() {
    let (_dir, b) = setup();
    let (f, d) = with_thread_umask(0o077, || {
        let sg = mkdir(&b, &root(), &b.root(), "sg", 0o777);
        b.setattr(&root(), &sg, &SetAttr { gid: Some(4242), mode: Some(0o2777), ..SetAttr::default() }, None)
            .unwrap();
        let u = user(1000, 1000, &[]);
        let f = b.create(&u, &sg, b"f", &CreateMode::Guarded(mode(0o664))).unwrap();
        let d = b.mkdir(&u, &sg, b"d", &mode(0o775)).unwrap();
        (f, d)
    });
    assert_eq!((f.attr.mode, f.attr.gid), (0o664, 4242));
    assert_eq!((d.attr.mode, d.attr.gid), (0o2775, 4242));
}

/// A created object has its mode from the moment it exists: the backend
/// does not create it under the umask and chmod it afterwards, because a
/// power cut between the two (another call's sync committing the file
/// system in between) leaves it on disk with a mode that is neither what
/// the client had nor what it asked for. Seen by the power-cut test; here
/// inotify on the parent shows any chmod of a new entry as `IN_ATTRIB`.
#[test]
fn created_objects_have_their_mode_from_the_start() {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let (dir, b) = setup();
    // SAFETY: inotify_init1 takes flags and touches no memory.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(fd >= 0, "inotify_init1: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let ino = unsafe { OwnedFd::from_raw_fd(fd) };
    let path = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
    // SAFETY: `path` is NUL-terminated and only read.
    let wd =
        unsafe { libc::inotify_add_watch(ino.as_raw_fd(), path.as_ptr(), libc::IN_CREATE | libc::IN_ATTRIB) };
    assert!(wd >= 0, "inotify_add_watch: {}", std::io::Error::last_os_error());
    let modes = with_thread_umask(0o022, || {
        let r = b.root();
        let f = b.create(&root(), &r, b"f", &CreateMode::Guarded(mode(0o664))).unwrap();
        let d = b.mkdir(&root(), &r, b"d", &mode(0o777)).unwrap();
        let p = b.mknod(&root(), &r, b"p", NodeKind::Fifo, &mode(0o666)).unwrap();
        [f.attr.mode, d.attr.mode, p.attr.mode]
    });
    assert_eq!(modes, [0o664, 0o777, 0o666]);
    // The events are queued by the calls themselves, all returned above.
    let mut created = Vec::new();
    let mut changed = Vec::new();
    let mut buf = [0u8; 4096];
    for _ in 0..64 {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::read(ino.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "reading inotify: {e}");
            break;
        }
        let mut at = 0;
        while at + 16 <= n as usize {
            let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().unwrap());
            let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
            let name = buf[at + 16..at + 16 + len].split(|&c| c == 0).next().unwrap().to_vec();
            let name = String::from_utf8(name).unwrap();
            if mask & libc::IN_CREATE != 0 {
                created.push(name.clone());
            }
            if mask & libc::IN_ATTRIB != 0 {
                changed.push(name);
            }
            at += 16 + len;
        }
    }
    created.sort();
    assert_eq!(created, ["d", "f", "p"], "the watch sees the creates");
    assert!(changed.is_empty(), "created, then changed afterwards: {changed:?}");
}

// ---------------------------------------------------------------- create

#[test]
fn create_modes() {
    let (_dir, b) = setup();
    let cred = root();
    let r = b.root();
    let c = b.create(&cred, &r, b"f", &CreateMode::Guarded(mode(0o666))).unwrap();
    // The process umask does not apply: the client already applied its own.
    assert_eq!(c.attr.mode, 0o666);
    assert!(c.dir_wcc.before.is_some() && c.dir_wcc.after.is_some());
    b.write(&cred, &c.handle, 0, b"data", StableHow::Unstable).unwrap();
    assert_eq!(
        b.create(&cred, &r, b"f", &CreateMode::Guarded(SetAttr::default())).unwrap_err(),
        FsError::Exist
    );
    // UNCHECKED on an existing file applies only the size (here: truncate), as knfsd does:
    // its mode stays.
    let again = b
        .create(
            &cred,
            &r,
            b"f",
            &CreateMode::Unchecked(SetAttr { size: Some(0), mode: Some(0o600), ..SetAttr::default() }),
        )
        .unwrap();
    assert_eq!(again.handle, c.handle);
    assert_eq!((again.attr.size, again.attr.mode), (0, 0o666));
    // UNCHECKED over a directory does not make it a file.
    mkdir(&b, &cred, &r, "d", 0o755);
    assert_eq!(
        b.create(&cred, &r, b"d", &CreateMode::Unchecked(SetAttr::default())).unwrap_err(),
        FsError::Exist
    );
    assert_eq!(
        b.create(&cred, &r, b".", &CreateMode::Unchecked(SetAttr::default())).unwrap_err(),
        FsError::Exist
    );
    // Without a mode: 0, as knfsd (the client's SETATTR gives the one it means).
    let dflt = b.create(&cred, &r, b"dflt", &CreateMode::Unchecked(SetAttr::default())).unwrap();
    assert_eq!(dflt.attr.mode, 0);
}

#[test]
fn exclusive_create_is_exactly_once() {
    let (_dir, b) = setup();
    let p = public_dir(&b);
    let u = user(1000, 1000, &[]);
    let v1 = *b"verifier";
    let first = b.create(&u, &p, b"x", &CreateMode::Exclusive(v1)).unwrap();
    assert_eq!(first.attr.uid, 1000);
    // A retransmission gets the same file.
    let retry = b.create(&u, &p, b"x", &CreateMode::Exclusive(v1)).unwrap();
    assert_eq!(retry.handle, first.handle);
    // Another client's create with another verifier fails.
    assert_eq!(b.create(&u, &p, b"x", &CreateMode::Exclusive(*b"VERIFIER")).unwrap_err(), FsError::Exist);
    // Once the client set real times the verifier no longer matches.
    let set = SetAttr { mtime: SetTime::ServerTime, atime: SetTime::ServerTime, ..SetAttr::default() };
    b.setattr(&u, &first.handle, &set, None).unwrap();
    assert_eq!(b.create(&u, &p, b"x", &CreateMode::Exclusive(v1)).unwrap_err(), FsError::Exist);
    // An existing file never made by an exclusive create.
    create(&b, &u, &p, "plain", 0o644);
    assert_eq!(b.create(&u, &p, b"plain", &CreateMode::Exclusive(v1)).unwrap_err(), FsError::Exist);
}

// ---------------------------------------------------------------- namespace

#[test]
fn namespace_operations() {
    let (dir, b) = setup();
    let cred = root();
    let r = b.root();
    let d = mkdir(&b, &cred, &r, "d", 0o750);
    assert_eq!(b.getattr(&d).unwrap().mode, 0o750);
    let f = create(&b, &cred, &d, "f", 0o644);
    assert_eq!(b.rmdir(&cred, &r, b"d").unwrap_err(), FsError::NotEmpty);
    assert_eq!(b.remove(&cred, &r, b"d").unwrap_err(), FsError::IsDir);
    assert_eq!(b.rmdir(&cred, &d, b"f").unwrap_err(), FsError::NotDir);
    assert_eq!(b.mkdir(&cred, &r, b"d", &SetAttr::default()).unwrap_err(), FsError::Exist);
    // rename across directories keeps the handle.
    let (from, to) = b.rename(&cred, &d, b"f", &r, b"g").unwrap();
    assert!(from.after.is_some() && to.after.is_some());
    assert_eq!(b.lookup(&cred, &r, b"g").unwrap().handle, f);
    assert_eq!(b.lookup(&cred, &d, b"f").unwrap_err(), FsError::NoEnt);
    // link
    let (attr, _) = b.link(&cred, &f, &d, b"again").unwrap();
    assert_eq!(attr.unwrap().nlink, 2);
    assert_eq!(b.lookup(&cred, &d, b"again").unwrap().handle, f);
    assert_eq!(b.link(&cred, &f, &d, b"again").unwrap_err(), FsError::Exist);
    // A hard link to a symlink links the symlink itself.
    let s = b.symlink(&cred, &r, b"s", b"/nowhere", &SetAttr::default()).unwrap();
    b.link(&cred, &s.handle, &r, b"s2").unwrap();
    let s2 = b.lookup(&cred, &r, b"s2").unwrap();
    assert_eq!((s2.handle, s2.attr.ftype), (s.handle.clone(), FileType::Symlink));
    // Users need write permission on the directory to link into it…
    let pubd = public_dir(&b);
    let u = user(1000, 1000, &[]);
    let own = create(&b, &u, &pubd, "own", 0o644);
    assert_eq!(b.link(&u, &own, &r, b"nope").unwrap_err(), FsError::Access);
    // …and, with fs.protected_hardlinks (Debian's default), may not link
    // a file they neither own nor may write.
    if fs::read_to_string("/proc/sys/fs/protected_hardlinks").is_ok_and(|v| v.trim() == "1") {
        assert_eq!(b.link(&u, &f, &pubd, b"nope").unwrap_err(), FsError::Perm);
    }
    // remove and rmdir
    b.remove(&cred, &d, b"again").unwrap();
    b.remove(&cred, &r, b"g").unwrap();
    b.rmdir(&cred, &r, b"d").unwrap();
    assert_eq!(b.lookup(&cred, &r, b"d").unwrap_err(), FsError::NoEnt);
    // mknod of a device needs root; fifos do not.
    let p = pubd;
    let dev = NodeKind::CharDevice { major: 1, minor: 3 };
    assert_eq!(b.mknod(&u, &p, b"null", dev, &SetAttr::default()).unwrap_err(), FsError::Perm);
    assert_eq!(
        b.mknod(&u, &p, b"fifo", NodeKind::Fifo, &SetAttr::default()).unwrap().attr.ftype,
        FileType::Fifo
    );
    assert_eq!(fs::symlink_metadata(dir.path().join("pub/fifo")).unwrap().uid(), 1000);
    // Longer than symlink(2) takes: refused before the kernel is asked.
    let long = vec![b'x'; SYMLINK_TARGET_BYTES_MAX + 1];
    assert_eq!(b.symlink(&cred, &r, b"long", &long, &SetAttr::default()).unwrap_err(), FsError::NameTooLong);
}

// ---------------------------------------------------------------- readdir

#[test]
fn readdir_lists_everything_once_with_dots() {
    let (_dir, b) = setup();
    let cred = root();
    let d = mkdir(&b, &cred, &b.root(), "d", 0o755);
    let mut handles = std::collections::HashMap::new();
    for i in 0..40 {
        let name = format!("file-{i}");
        handles.insert(name.clone(), create(&b, &cred, &d, &name, 0o644));
    }
    let entries = list(&b, &cred, &d, true);
    let mut names: Vec<String> =
        entries.iter().map(|e| String::from_utf8(e.name.to_vec()).unwrap()).collect();
    names.sort();
    let mut want: Vec<String> = handles.keys().cloned().chain([".".into(), "..".into()]).collect();
    want.sort();
    assert_eq!(names, want);
    for e in &entries {
        let name = std::str::from_utf8(&e.name).unwrap();
        let h = e.handle.as_ref().expect("plus gives handles");
        let a = e.attr.as_ref().expect("plus gives attributes");
        assert_eq!(b.getattr(h).unwrap().fileid, a.fileid);
        assert_eq!(e.fileid, a.fileid);
        match name {
            "." => assert_eq!(h, &d),
            ".." => assert_eq!(h, &b.root()),
            _ => assert_eq!(h, &handles[name]),
        }
    }
    // Without plus: names and fileids only.
    assert!(list(&b, &cred, &d, false).iter().all(|e| e.handle.is_none() && e.attr.is_none()));
}

#[test]
fn a_refused_entry_comes_back() {
    let (_dir, b) = setup();
    let cred = root();
    for i in 0..10 {
        create(&b, &cred, &b.root(), &format!("f{i}"), 0o644);
    }
    let mut seen = Vec::new();
    let mut refused = None;
    let info = b
        .readdir(&cred, &b.root(), 0, [0; 8], false, &mut |e| {
            if seen.len() == 4 {
                refused = Some(e.clone());
                return false;
            }
            seen.push(e.clone());
            true
        })
        .unwrap();
    assert!(!info.eof);
    let refused = refused.unwrap();
    let mut next = None;
    b.readdir(&cred, &b.root(), seen[3].cookie, info.cookieverf, false, &mut |e| {
        next = Some(e.clone());
        false
    })
    .unwrap();
    assert_eq!(next.unwrap().name, refused.name);
    // A stale verifier with a non-zero cookie is refused.
    let mut bad = info.cookieverf;
    bad[0] ^= 1;
    assert_eq!(
        b.readdir(&cred, &b.root(), seen[3].cookie, bad, false, &mut |_| true).unwrap_err(),
        FsError::BadCookie
    );
}

#[test]
fn readdir_checks_permission() {
    let (_dir, b) = setup();
    let d = mkdir(&b, &root(), &b.root(), "private", 0o700);
    create(&b, &root(), &d, "x", 0o644);
    let u = user(1000, 1000, &[]);
    assert_eq!(b.readdir(&u, &d, 0, [0; 8], false, &mut |_| true).unwrap_err(), FsError::Access);
    // Read without search: names but no attributes or handles.
    let rd = mkdir(&b, &root(), &b.root(), "readonly", 0o704);
    create(&b, &root(), &rd, "y", 0o644);
    let entries = list(&b, &u, &rd, true);
    assert!(entries.iter().any(|e| &e.name[..] == b"y"));
    assert!(entries.iter().all(|e| e.handle.is_none()));
}

// ---------------------------------------------------------------- file system

#[test]
fn fsstat_properties_and_sync() {
    let (_dir, b) = setup();
    let s = b.fsstat(&b.root()).unwrap();
    assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes && s.avail_bytes <= s.free_bytes);
    assert!(s.total_files > 0 && s.free_files <= s.total_files);
    let p = b.properties();
    assert_eq!(p.time_delta, Timestamp { secs: 0, nsecs: 1 });
    assert!(p.supports_hard_links && p.supports_symlinks);
    assert_eq!(p.name_max, 255);
    assert!(p.max_file_size >= 1 << 40);
    b.sync_all().unwrap();
    assert_eq!(b.fsstat(&FileHandle(Bytes::from_static(b"junk"))).unwrap_err(), FsError::BadHandle);
}

#[test]
fn open_fails_clearly_on_a_missing_root() {
    let err = LocalBackend::open(config(Path::new("/nonexistent/eagernfs"), KEY)).err().unwrap();
    assert!(err.to_string().contains("/nonexistent/eagernfs"), "{err}");
}

#[test]
fn many_threads_as_many_users() {
    let (_dir, b) = setup();
    let b = Arc::new(b);
    let p = public_dir(&b);
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let (b, p) = (b.clone(), p.clone());
            std::thread::spawn(move || {
                for i in 0..50 {
                    let u = user(2000 + (i + t) % 3, 3000 + t, &[]);
                    let name = format!("t{t}-{i}");
                    let c = b.create(&u, &p, name.as_bytes(), &CreateMode::Guarded(mode(0o600))).unwrap();
                    assert_eq!((c.attr.uid, c.attr.gid), (u.uid, u.gid));
                    b.write(&u, &c.handle, 0, name.as_bytes(), StableHow::Unstable).unwrap();
                    assert_eq!(&b.read(&u, &c.handle, 0, 64).unwrap().data[..], name.as_bytes());
                    let other = user(2000 + (i + t + 1) % 3, 9999, &[]);
                    assert_eq!(b.read(&other, &c.handle, 0, 64).unwrap_err(), FsError::Access);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
