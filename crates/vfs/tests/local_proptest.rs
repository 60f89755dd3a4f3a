//! Property tests of the local backend's file-handle invariant. Needs root.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::{Backend, CreateMode, Credentials, FileHandle, FsError, SetAttr};
use proptest::prelude::*;
use tempfile::TempDir;

fn backend() -> &'static (TempDir, LocalBackend) {
    static B: OnceLock<(TempDir, LocalBackend)> = OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("eagernfs-prop-").tempdir_in("/tmp").unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let b = LocalBackend::open(LocalConfig {
            root: dir.path().into(),
            handle_key: [3; 16],
            unsafe_async: true,
            journaled: false,
        })
        .unwrap();
        (dir, b)
    })
}

/// A fresh directory per case, so names from different cases never collide.
fn fresh_dir(b: &LocalBackend) -> FileHandle {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!("case-{}", N.fetch_add(1, Ordering::Relaxed));
    b.mkdir(&Credentials::root(), &b.root(), name.as_bytes(), &SetAttr::default()).unwrap().handle
}

/// Valid single components: any bytes but `/` and NUL, not `.` or `..`.
fn name() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>().prop_filter("no / or NUL", |b| *b != b'/' && *b != 0), 1..40)
        .prop_filter("not a dot entry", |n| n != b"." && n != b"..")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_issued_handle_names_its_object(names in proptest::collection::btree_set(name(), 1..12)) {
        let (_, b) = backend();
        let cred = Credentials::root();
        let dir = fresh_dir(b);
        let names: BTreeSet<Vec<u8>> = names;
        let mut made = Vec::new();
        for n in &names {
            let c = b.create(&cred, &dir, n, &CreateMode::Guarded(SetAttr::default())).unwrap();
            made.push((n.clone(), c));
        }
        for (n, c) in &made {
            prop_assert_eq!(b.getattr(&c.handle).unwrap().fileid, c.attr.fileid);
            let l = b.lookup(&cred, &dir, n).unwrap();
            prop_assert_eq!(&l.handle, &c.handle);
        }
        // All distinct objects, all distinct handles.
        let ids: BTreeSet<u64> = made.iter().map(|(_, c)| c.attr.fileid).collect();
        prop_assert_eq!(ids.len(), made.len());
    }

    #[test]
    fn a_flipped_bit_never_names_another_object(pick in any::<prop::sample::Index>(), bit in 0usize..8,
                                                 which in 0usize..3) {
        let (_, b) = backend();
        let cred = Credentials::root();
        let dir = fresh_dir(b);
        let file = b.create(&cred, &dir, b"f", &CreateMode::Guarded(SetAttr::default())).unwrap().handle;
        let handle = [b.root(), dir, file][which].clone();
        let mut bytes = handle.0.to_vec();
        let i = pick.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let flipped = FileHandle(bytes.into());
        let got = b.getattr(&flipped);
        prop_assert!(matches!(got, Err(FsError::BadHandle) | Err(FsError::Stale)), "got {:?}", got);
        let read = b.read(&cred, &flipped, 0, 1);
        prop_assert!(matches!(read, Err(FsError::BadHandle) | Err(FsError::Stale)), "got {:?}", read);
    }
}
