//! Calls of the CephFS backend that the MDS must not see, counted by the MDS itself (on the test
//! cluster; SKIP without one). A file of its own so that no other test's calls run beside the
//! count.

mod ceph;

use std::path::Path;

use ceph::{cluster_conf, top};
use eagernfs_vfs::{Backend, CreateMode, Credentials, SetAttr};

/// How many GETATTR requests the MDS (`mds.a`, scripts/ceph-cluster.sh's) has handled.
fn mds_getattrs(conf: &Path) -> u64 {
    let out = std::process::Command::new("ceph")
        .args(["--conf"])
        .arg(conf)
        .args(["tell", "mds.a", "perf", "dump", "mds_server"])
        .output()
        .expect("the ceph command (ceph-common)");
    assert!(out.status.success(), "ceph tell mds.a perf dump: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("\"req_getattr_latency\"").expect("req_getattr_latency in the MDS's counters");
    let rest = &text[at..];
    let count = rest.find("\"avgcount\":").map(|i| &rest[i + "\"avgcount\":".len()..]).expect("its avgcount");
    count.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().expect("a count")
}

/// Listing a directory from the start (READDIR and READDIRPLUS at cookie 0, what every `ls`
/// sends) is answered from libcephfs's cache: libcephfs's own "." and ".." entries cost a
/// getattr of the directory's recursive statistics from the MDS each time (two per listing,
/// measured), so the backend makes those two entries itself.
#[test]
fn listing_a_directory_asks_the_mds_nothing() {
    let Some(conf) = cluster_conf() else { return };
    let b = top(&conf);
    let root = Credentials::root();
    let name = format!("mds-count-{}", std::process::id());
    let set = SetAttr { mode: Some(0o755), ..SetAttr::default() };
    let d = b.mkdir(&root, &b.root(), name.as_bytes(), &set).expect("mkdir").handle;
    for i in 0..10 {
        b.create(&root, &d, format!("f{i}").as_bytes(), &CreateMode::Guarded(SetAttr::default()))
            .expect("create");
    }
    let list = |plus: bool| {
        let mut names = Vec::new();
        b.readdir(&root, &d, 0, [0; 8], plus, &mut |e| {
            names.push(e.name.clone());
            true
        })
        .expect("readdir");
        names
    };
    let first = list(true);
    assert_eq!(first.len(), 12, "10 files, . and ..: {first:?}");
    assert_eq!((&first[0][..], &first[1][..]), (&b"."[..], &b".."[..]));
    let before = mds_getattrs(&conf);
    for _ in 0..50 {
        assert_eq!(list(false).len(), 12);
        assert_eq!(list(true).len(), 12);
    }
    let asked = mds_getattrs(&conf) - before;
    for i in 0..10 {
        b.remove(&root, &d, format!("f{i}").as_bytes()).expect("remove");
    }
    b.rmdir(&root, &b.root(), name.as_bytes()).expect("rmdir");
    // Anything else on the cluster (a CI step beside this one) may add a few.
    assert!(asked < 20, "100 listings cost {asked} MDS getattrs");
}
