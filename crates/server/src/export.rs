//! One export as served ([`ExportSpec`]: its id, paths, client rules and backend), the set of
//! them every call reads ([`SharedExports`]), and the id of an export from its path.

use crate::exports;
use eagernfs_vfs::Backend;
use std::path::PathBuf;
use std::sync::Arc;

/// One exported tree.
pub struct ExportSpec {
    /// Stable identity written into every file handle of this export; must
    /// not change across restarts (from `fsid=` or a hash of the path).
    pub id: u32,
    /// The paths clients may mount it by (the first is the canonical one).
    pub mount_paths: Vec<PathBuf>,
    /// Who may mount it and with which options.
    pub access: exports::Export,
    /// The file system behind it.
    pub backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for ExportSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportSpec").field("id", &self.id).field("mount_paths", &self.mount_paths).finish()
    }
}

/// Derive a stable export id from its path (used when no `fsid=` is given).
pub fn export_id_for_path(path: &std::path::Path) -> u32 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in path.as_os_str().as_encoded_bytes() {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The exports, replaced whole by [`crate::ServerHandle::replace_exports`]; calls take
/// the set of their start.
pub(crate) type SharedExports = Arc<parking_lot::RwLock<Arc<Vec<ExportSpec>>>>;
