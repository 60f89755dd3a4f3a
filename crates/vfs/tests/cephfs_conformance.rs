//! The CephFS backend against the shared conformance suite, on a real
//! cluster: `scripts/ceph-cluster.sh start` makes one (CI does; see
//! `scripts/test`). Without one the tests print SKIP, unless
//! `EAGERNFS_REQUIRE_CEPH=1` says a cluster must be there.
//!
//! Each check gets a fresh directory of the file system, exported on its
//! own (`cephfs://admin@cephfs/DIR`), removed afterwards.

mod ceph;
mod conformance;

use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};

use ceph::{cluster_conf, source, top};
use eagernfs_vfs::cephfs::{CephBackend, CephConfig};
use eagernfs_vfs::{Backend, CreateMode, Credentials, FileHandle, FileType, FsError, SetAttr, StableHow};

/// Remove everything below `dir` (as root), then `dir/name` itself.
fn remove_tree(b: &dyn Backend, dir: &FileHandle, name: &[u8]) {
    let root = Credentials::root();
    let Ok(l) = b.lookup(&root, dir, name) else { return };
    if l.attr.ftype == FileType::Directory {
        // Children first; list again after each pass until empty.
        loop {
            let mut names = Vec::new();
            b.readdir(&root, &l.handle, 0, [0; 8], false, &mut |e| {
                if e.name.as_ref() != b"." && e.name.as_ref() != b".." {
                    names.push(e.name.to_vec());
                }
                names.len() < 4096
            })
            .expect("list for removal");
            if names.is_empty() {
                break;
            }
            for n in names {
                remove_tree(b, &l.handle, &n);
            }
        }
        b.setattr(&root, &l.handle, &SetAttr { mode: Some(0o755), ..SetAttr::default() }, None).ok();
        b.rmdir(&root, dir, name).expect("rmdir");
    } else {
        b.remove(&root, dir, name).expect("remove");
    }
}

/// A backend over a fresh directory, removed after the check.
struct Fresh<'a> {
    backend: Option<CephBackend>,
    top: &'a CephBackend,
    name: String,
}

impl Deref for Fresh<'_> {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        self.backend.as_ref().expect("until dropped")
    }
}

impl Drop for Fresh<'_> {
    fn drop(&mut self) {
        // Unmount the check's export first (its open files are closed and synced).
        drop(self.backend.take());
        remove_tree(self.top, &self.top.root(), self.name.as_bytes());
    }
}

fn fresh<'a>(conf: &std::path::Path, top: &'a CephBackend) -> Fresh<'a> {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!("conformance-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let set = SetAttr { mode: Some(0o755), ..SetAttr::default() };
    top.mkdir(&Credentials::root(), &top.root(), name.as_bytes(), &set).expect("mkdir for the check");
    let backend = CephBackend::open(CephConfig::new(source(conf, &format!("/{name}")), [5; 16]))
        .expect("mount the check's directory");
    Fresh { backend: Some(backend), top, name }
}

/// Every check, in four threads (each check has an export of its own, and most of a check's
/// time is libcephfs's unmount, a second): the 10,000-entry listing alone in one, the rest
/// spread over the others.
#[test]
fn conformance_suite() {
    let Some(conf) = cluster_conf() else { return };
    const THREADS: usize = 4;
    let big = "readdir_pages_10k_exactly_once";
    let others: Vec<&str> = conformance::CHECKS.iter().map(|c| c.name).filter(|n| *n != big).collect();
    let top = top(&conf);
    let failed: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let mine: Vec<&str> = if t == 0 {
                    vec![big]
                } else {
                    others
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % (THREADS - 1) == t - 1)
                        .map(|(_, n)| *n)
                        .collect()
                };
                let (conf, top) = (&conf, &top);
                s.spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        conformance::run_selected(&|| fresh(conf, top), &|c| mine.contains(&c.name))
                    }))
                    .err()
                    .map(|e| {
                        e.downcast_ref::<String>().cloned().unwrap_or_else(|| format!("thread {t} failed"))
                    })
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().expect("a check thread")).collect()
    });
    assert!(failed.is_empty(), "{failed:?}");
}

/// Handles name the same objects after the export is mounted again (a
/// restart), and on another mount with the same key (another server).
#[test]
fn handles_survive_a_new_mount() {
    let Some(conf) = cluster_conf() else { return };
    let top = top(&conf);
    let f = fresh(&conf, &top);
    let root = Credentials::root();
    let c = f.create(&root, &f.root(), b"kept", &CreateMode::Guarded(SetAttr::default())).unwrap();
    f.write(&root, &c.handle, 0, b"still here", StableHow::FileSync).unwrap();
    let again = CephBackend::open(CephConfig::new(source(&conf, &format!("/{}", f.name)), [5; 16])).unwrap();
    assert_eq!(again.root(), f.root(), "the same root handle");
    assert_eq!(&again.read(&root, &c.handle, 0, 100).unwrap().data[..], b"still here");
    let other_key =
        CephBackend::open(CephConfig::new(source(&conf, &format!("/{}", f.name)), [6; 16])).unwrap();
    assert_eq!(other_key.getattr(&c.handle).unwrap_err(), FsError::BadHandle, "another key refuses");
}
