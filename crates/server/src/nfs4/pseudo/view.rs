//! The pseudo-root as one call sees it: which pseudo directories and exports the caller may
//! see, and the tree of the exports the call runs with.

use super::{Cache, Child, Tree};
use crate::call::Call;
use std::sync::Arc;

impl Tree {
    /// Whether the caller may see pseudo node `id` (it leads to an export the caller may use).
    pub(crate) fn visible(&self, call: &Call, id: u32) -> bool {
        let Some(n) = self.nodes.get(&id) else { return false };
        n.exports_below.iter().any(|e| export_visible(call, *e))
    }

    /// Whether `child` of a pseudo directory is shown to the caller.
    pub(crate) fn child_visible(&self, call: &Call, child: Child) -> bool {
        match child {
            Child::Dir(d) => self.visible(call, d),
            Child::Export(e) => export_visible(call, e),
        }
    }
}

/// The caller's address is on the export's client list (any transport: a
/// client on the wrong one is told NFS4ERR_WRONGSEC when it enters).
fn export_visible(call: &Call, id: u32) -> bool {
    call.exports.iter().any(|e| e.id == id && e.access.options_for(call.conn.peer.addr.ip()).is_some())
}

impl Cache {
    /// The tree for the exports `call` runs with.
    pub(crate) fn get(&self, call: &Call) -> Arc<Tree> {
        let mut c = self.0.lock();
        if let Some((exports, tree)) = c.as_ref() {
            // The cache holds the exports it was built from, so their memory
            // cannot be reused by a newer set: equal addresses mean the same set.
            if exports.as_ptr() == call.exports.as_ptr() && exports.len() == call.exports.len() {
                return tree.clone();
            }
        }
        let tree = Arc::new(Tree::build(call.exports));
        let now = call.state.exports();
        if now.as_ptr() == call.exports.as_ptr() {
            *c = Some((now, tree.clone()));
        }
        tree
    }
}
