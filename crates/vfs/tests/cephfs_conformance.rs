//! The CephFS backend against the shared conformance suite, on a real
//! cluster: `scripts/ceph-cluster.sh start` makes one (CI does; see
//! `scripts/test`). Without one the tests print SKIP, unless
//! `EAGERNFS_REQUIRE_CEPH=1` says a cluster must be there.
//!
//! Each check gets a fresh directory of the file system, exported on its
//! own (`cephfs://admin@cephfs/DIR`), removed afterwards.

mod conformance;

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use eagernfs_vfs::cephfs::{CephBackend, CephConfig, CephFsSource};
use eagernfs_vfs::{Backend, CreateMode, Credentials, FileHandle, FileType, FsError, SetAttr, StableHow};

/// The test cluster's ceph.conf, or `None` (with a SKIP line) if there is none.
fn cluster_conf() -> Option<PathBuf> {
    let conf = std::env::var_os("EAGERNFS_CEPH_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/eagernfs-ceph/ceph.conf"));
    if conf.exists() && eagernfs_vfs::cephfs::version(eagernfs_vfs::cephfs::LIBRARY).is_ok() {
        return Some(conf);
    }
    let why = format!(
        "no Ceph test cluster ({} missing, or libcephfs not installed): start one with scripts/ceph-cluster.sh start",
        conf.display()
    );
    if std::env::var("EAGERNFS_REQUIRE_CEPH").as_deref() == Ok("1") {
        panic!("EAGERNFS_REQUIRE_CEPH=1 but {why}");
    }
    eprintln!("SKIP: {why}");
    None
}

fn source(conf: &std::path::Path, path: &str) -> CephFsSource {
    CephFsSource::parse(&format!("cephfs://admin@cephfs{path}?conf={}", conf.display())).unwrap()
}

/// The whole file system, for making and removing the checks' directories.
fn top(conf: &std::path::Path) -> CephBackend {
    CephBackend::open(CephConfig::new(source(conf, "/"), [9; 16])).expect("mount the test cluster's root")
}

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
struct Fresh {
    backend: Option<CephBackend>,
    top: CephBackend,
    name: String,
}

impl Deref for Fresh {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        self.backend.as_ref().expect("until dropped")
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        // Unmount the check's export first (its open files are closed and synced).
        drop(self.backend.take());
        remove_tree(&self.top, &self.top.root(), self.name.as_bytes());
    }
}

fn fresh(conf: &std::path::Path) -> Fresh {
    static N: AtomicU32 = AtomicU32::new(0);
    let top = top(conf);
    let name = format!("conformance-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let set = SetAttr { mode: Some(0o755), ..SetAttr::default() };
    top.mkdir(&Credentials::root(), &top.root(), name.as_bytes(), &set).expect("mkdir for the check");
    let backend = CephBackend::open(CephConfig::new(source(conf, &format!("/{name}")), [5; 16]))
        .expect("mount the check's directory");
    Fresh { backend: Some(backend), top, name }
}

#[test]
fn conformance_suite() {
    let Some(conf) = cluster_conf() else { return };
    conformance::run_all(&|| fresh(&conf));
}

/// Handles name the same objects after the export is mounted again (a
/// restart), and on another mount with the same key (another server).
#[test]
fn handles_survive_a_new_mount() {
    let Some(conf) = cluster_conf() else { return };
    let f = fresh(&conf);
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
