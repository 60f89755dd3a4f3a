//! What the CephFS test files share: finding the test cluster, naming a directory of it, and a
//! mount of its root.
#![allow(dead_code)]

use std::path::PathBuf;

use eagernfs_vfs::cephfs::{CephBackend, CephConfig, CephFsSource};

/// The test cluster's ceph.conf, or `None` (with a SKIP line) if there is none.
pub(crate) fn cluster_conf() -> Option<PathBuf> {
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

pub(crate) fn source(conf: &std::path::Path, path: &str) -> CephFsSource {
    CephFsSource::parse(&format!("cephfs://admin@cephfs{path}?conf={}", conf.display())).unwrap()
}

/// The whole file system, for making and removing the checks' directories: one mount for
/// every check (an unmount takes libcephfs a second). It must be dropped (unmounted) before the
/// process ends: a session left behind holds its capabilities until the MDS times it out, and
/// the next run would wait that long (60 s) for them.
pub(crate) fn top(conf: &std::path::Path) -> CephBackend {
    // Only for making and removing directories: no waiting for the MDS's journal (a check
    // removes up to 10,000 files).
    let mut cfg = CephConfig::new(source(conf, "/"), [9; 16]);
    cfg.unsafe_async = true;
    CephBackend::open(cfg).expect("mount the test cluster's root")
}
