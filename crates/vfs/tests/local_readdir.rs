//! READDIR of the local backend on large directories, alone and under
//! concurrent change, on ext4 (/tmp here) and tmpfs. Needs root.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::{Backend, Credentials, FileHandle, FsError};
use tempfile::TempDir;

const ENTRIES: usize = 100_000;
/// How many entries the sink takes per call, as a client's buffer would.
const PAGE: usize = 500;

struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path) -> Mount {
        fs::create_dir_all(at).unwrap();
        let target = CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: all strings are NUL-terminated and live across the call.
        let r =
            unsafe { libc::mount(c"none".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
        assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
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

/// An export root on ext4 (under /tmp) or on a fresh tmpfs.
fn export(tmpfs: bool) -> (TempDir, Option<Mount>, PathBuf) {
    let dir = tempfile::Builder::new().prefix("eagernfs-readdir-").tempdir_in("/tmp").unwrap();
    let (mount, root) = if tmpfs {
        let at = dir.path().join("tmpfs");
        (Some(Mount::tmpfs(&at)), at)
    } else {
        (None, dir.path().to_path_buf())
    };
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    (dir, mount, root)
}

fn open(root: &Path) -> LocalBackend {
    LocalBackend::open(LocalConfig {
        root: root.to_path_buf(),
        handle_key: [9; 16],
        unsafe_async: true,
        journaled: false,
    })
    .unwrap()
}

fn populate(dir: &Path, prefix: &str, n: usize) {
    for i in 0..n {
        fs::File::create(dir.join(format!("{prefix}{i}"))).unwrap();
    }
}

/// List `dir` in pages of [`PAGE`] entries, resuming after the last
/// accepted entry each time. Counts every name seen; also reports the
/// number of calls.
fn list_paged(
    b: &LocalBackend,
    dir: &FileHandle,
    mut between_pages: impl FnMut(),
) -> (HashMap<Vec<u8>, usize>, usize) {
    let cred = Credentials::root();
    let mut counts = HashMap::new();
    let mut cookie = 0;
    let mut verf = [0; 8];
    let mut calls = 0;
    loop {
        calls += 1;
        let mut taken = 0;
        let mut last_cookie = cookie;
        let info = b
            .readdir(&cred, dir, cookie, verf, false, &mut |e| {
                if taken == PAGE {
                    return false;
                }
                taken += 1;
                last_cookie = e.cookie;
                *counts.entry(e.name.to_vec()).or_insert(0) += 1;
                true
            })
            .unwrap();
        verf = info.cookieverf;
        if info.eof {
            return (counts, calls);
        }
        assert!(taken > 0, "no progress");
        cookie = last_cookie;
        between_pages();
    }
}

fn full_listing_returns_each_name_once(tmpfs: bool) {
    let (_dir, _mount, root) = export(tmpfs);
    let big = root.join("big");
    fs::create_dir(&big).unwrap();
    populate(&big, "entry-", ENTRIES);
    let b = open(&root);
    let dir = b.lookup(&Credentials::root(), &b.root(), b"big").unwrap().handle;
    let (counts, calls) = list_paged(&b, &dir, || {});
    assert_eq!(counts.len(), ENTRIES + 2, "every name plus . and ..");
    assert!(counts.values().all(|&c| c == 1), "a name came twice");
    for i in 0..ENTRIES {
        assert!(counts.contains_key(format!("entry-{i}").as_bytes()), "entry-{i} missing");
    }
    assert!(calls >= ENTRIES / PAGE);
}

/// One thread lists while another creates and removes other names between
/// (and during) the listing's calls: every untouched name must still come
/// exactly once.
fn listing_under_concurrent_change(tmpfs: bool) {
    let (_dir, _mount, root) = export(tmpfs);
    let big = root.join("big");
    fs::create_dir(&big).unwrap();
    populate(&big, "keep-", ENTRIES);
    // Names the other thread removes while the listing runs.
    populate(&big, "doomed-", 5_000);
    let b = Arc::new(open(&root));
    let dir = b.lookup(&Credentials::root(), &b.root(), b"big").unwrap().handle;
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicUsize::new(0));
    let churn = {
        let (b, dir, stop, changes) = (b.clone(), dir.clone(), stop.clone(), changes.clone());
        std::thread::spawn(move || {
            let cred = Credentials::root();
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let new = format!("churn-{i}");
                b.create(&cred, &dir, new.as_bytes(), &eagernfs_vfs::CreateMode::Guarded(Default::default()))
                    .unwrap();
                if i & 1 == 0 {
                    b.remove(&cred, &dir, new.as_bytes()).unwrap();
                }
                if i < 5_000 {
                    b.remove(&cred, &dir, format!("doomed-{i}").as_bytes()).unwrap();
                }
                i += 1;
                changes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Make sure the other thread is really changing the directory while we
    // list: wait for its first change, and for more before each page.
    while changes.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let mut seen_changes = 0;
    let (counts, _) = list_paged(&b, &dir, || {
        let target = seen_changes + 1;
        while changes.load(Ordering::Relaxed) < target {
            std::thread::yield_now();
        }
        seen_changes = changes.load(Ordering::Relaxed);
    });
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert!(changes.load(Ordering::Relaxed) > 100, "the directory barely changed");
    for i in 0..ENTRIES {
        let name = format!("keep-{i}");
        assert_eq!(counts.get(name.as_bytes()), Some(&1), "{name}");
    }
    // Names that come and go may or may not be seen, but never twice.
    assert!(counts.values().all(|&c| c == 1), "a name came twice");
}

#[test]
fn ext4_full_listing_in_pages() {
    full_listing_returns_each_name_once(false);
}

#[test]
fn tmpfs_full_listing_in_pages() {
    full_listing_returns_each_name_once(true);
}

#[test]
fn ext4_listing_under_concurrent_change() {
    listing_under_concurrent_change(false);
}

#[test]
fn tmpfs_listing_under_concurrent_change() {
    listing_under_concurrent_change(true);
}

#[test]
fn cookies_survive_a_restart() {
    let (_dir, _mount, root) = export(false);
    populate(&root, "f", 2_000);
    let b = open(&root);
    let cred = Credentials::root();
    let mut first_page = Vec::new();
    let info = b
        .readdir(&cred, &b.root(), 0, [0; 8], false, &mut |e| {
            first_page.push(e.clone());
            first_page.len() < 100
        })
        .unwrap();
    let resume = first_page[98].cookie;
    let refused = first_page[99].name.clone();
    drop(b);
    let b = open(&root);
    let mut next = None;
    b.readdir(&cred, &b.root(), resume, info.cookieverf, false, &mut |e| {
        next = Some(e.name.clone());
        false
    })
    .unwrap();
    assert_eq!(next, Some(refused));
    // A cookie beyond any position is refused, not a crash.
    assert_eq!(
        b.readdir(&cred, &b.root(), u64::MAX, info.cookieverf, false, &mut |_| true).unwrap_err(),
        FsError::BadCookie
    );
}
