//! The local backend against the shared conformance suite (needs root: the
//! backend switches fsuid/fsgid and makes device nodes).

mod conformance;

use std::fs;
use std::ops::Deref;
use std::os::unix::fs::PermissionsExt;

use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::Backend;
use tempfile::TempDir;

/// A backend over a fresh temporary directory, removed after the check.
struct Fresh {
    backend: LocalBackend,
    _dir: TempDir,
}

impl Deref for Fresh {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        &self.backend
    }
}

fn fresh() -> Fresh {
    let dir = tempfile::Builder::new().prefix("eagernfs-conf-").tempdir_in("/tmp").unwrap();
    // tempdir makes 0700; the suite's other users must reach their scratch dirs.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let backend = LocalBackend::open(LocalConfig {
        root: dir.path().into(),
        handle_key: [5; 16],
        unsafe_async: false,
        journaled: false,
    })
    .unwrap();
    Fresh { backend, _dir: dir }
}

#[test]
fn conformance_suite() {
    conformance::run_all(&fresh);
}
