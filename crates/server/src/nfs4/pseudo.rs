//! The pseudo-root: the directories an NFSv4 client walks from `/` to reach
//! the exports (RFC 8881 §7.3), built from each export's canonical path.
//!
//! With exports `/srv/a` and `/srv/b`, `/` and `/srv` are pseudo
//! directories and `a` and `b` in `/srv` are the exports' roots. A pseudo
//! directory has a file system of its own (fsid) and is read-only; a
//! client sees in it only the names that lead to an export it may use, so
//! the pseudo-root tells nobody about exports closed to them. An export at
//! `/` is the root itself.
//!
//! A pseudo directory's file handle is four bytes, the node's id (a hash of
//! its path, so handles survive a restart with the same exports); a real
//! handle is longer (export id and backend handle), so the two never mix.
//!
//! What one call sees of the tree (the caller's pseudo directories, the tree
//! of the call's exports) is in `view`: the tree and its cache stand below
//! the service state that holds them, the view above the call.

mod view;

use crate::ExportSpec;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};
use std::sync::Arc;

/// What a name in a pseudo directory leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Child {
    /// Another pseudo directory.
    Dir(u32),
    /// The root of the export with this id.
    Export(u32),
}

/// One pseudo directory.
#[derive(Debug)]
pub(crate) struct Node {
    /// Its parent (itself for the root).
    pub(crate) parent: u32,
    pub(crate) children: BTreeMap<Bytes, Child>,
    /// The ids of every export beneath it: it is visible to whoever may use one.
    pub(crate) exports_below: Vec<u32>,
}

/// The pseudo-root of one set of exports.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(crate) nodes: HashMap<u32, Node>,
    /// The root: a pseudo directory, or an export at `/`.
    pub(crate) root: Child,
    /// Export id → the pseudo directory its root is in (none for an export at `/`).
    pub(crate) parent_of_export: HashMap<u32, u32>,
}

/// Pseudo node ids are FNV-1a of the path, never 0 and never equal to another node's.
fn node_id(path: &[u8], taken: &HashMap<u32, Node>) -> u32 {
    let mut salt = 0u32;
    loop {
        let mut h: u32 = 0x811c_9dc5 ^ salt;
        for b in path {
            h ^= *b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
        if h != 0 && !taken.contains_key(&h) {
            return h;
        }
        salt += 1;
    }
}

impl Tree {
    /// Build the tree for `exports` (their first mount path each).
    pub(crate) fn build(exports: &[ExportSpec]) -> Tree {
        let mut nodes: HashMap<u32, Node> = HashMap::new();
        let root_id = node_id(b"/", &nodes);
        nodes.insert(root_id, Node { parent: root_id, children: BTreeMap::new(), exports_below: Vec::new() });
        let mut root = Child::Dir(root_id);
        let mut parent_of_export = HashMap::new();
        for e in exports {
            let Some(path) = e.mount_paths.first() else { continue };
            let comps: Vec<Bytes> = Path::new(path)
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(Bytes::copy_from_slice(n.as_encoded_bytes())),
                    _ => None,
                })
                .collect();
            if comps.is_empty() {
                // An export at `/` is the root (the first such export wins).
                if root == Child::Dir(root_id) {
                    root = Child::Export(e.id);
                }
                continue;
            }
            let mut at = root_id;
            let mut so_far = Vec::new();
            nodes.get_mut(&root_id).expect("root").exports_below.push(e.id);
            for (i, c) in comps.iter().enumerate() {
                so_far.push(b'/');
                so_far.extend_from_slice(c);
                let last = i + 1 == comps.len();
                let existing = nodes[&at].children.get(c).copied();
                match existing {
                    // An export's path below another export's root: the outer export
                    // shows its own directory there (nested exports are reached
                    // through the outer one, as with NFSv3).
                    Some(Child::Export(_)) => break,
                    Some(Child::Dir(d)) if last => {
                        // A pseudo directory already here (an export below it came first):
                        // the export replaces it; the ones below stay reachable inside it.
                        let _ = d;
                        nodes.get_mut(&at).expect("node").children.insert(c.clone(), Child::Export(e.id));
                        parent_of_export.insert(e.id, at);
                    }
                    Some(Child::Dir(d)) => {
                        at = d;
                        nodes.get_mut(&at).expect("node").exports_below.push(e.id);
                    }
                    None if last => {
                        nodes.get_mut(&at).expect("node").children.insert(c.clone(), Child::Export(e.id));
                        parent_of_export.insert(e.id, at);
                    }
                    None => {
                        let id = node_id(&so_far, &nodes);
                        nodes.insert(
                            id,
                            Node { parent: at, children: BTreeMap::new(), exports_below: vec![e.id] },
                        );
                        nodes.get_mut(&at).expect("node").children.insert(c.clone(), Child::Dir(id));
                        at = id;
                    }
                }
            }
        }
        Tree { nodes, root, parent_of_export }
    }
}

/// A tree and the exports it was built from.
type Built = (Arc<Vec<ExportSpec>>, Arc<Tree>);

/// The tree of the exports now, rebuilt after a reload.
#[derive(Default)]
pub(crate) struct Cache(parking_lot::Mutex<Option<Built>>);

#[cfg(test)]
mod tests {
    use super::*;
    use eagernfs_vfs::memory::{MemoryBackend, MemoryConfig};

    fn spec(id: u32, path: &str) -> ExportSpec {
        let (mut e, _) = crate::exports::parse(&format!("{path} *(rw)")).unwrap();
        ExportSpec {
            id,
            mount_paths: vec![path.into()],
            access: e.entries.remove(0),
            backend: Arc::new(MemoryBackend::new(MemoryConfig::default())),
        }
    }

    #[test]
    fn exports_hang_from_pseudo_directories() {
        let t = Tree::build(&[spec(7, "/srv/a"), spec(8, "/srv/b"), spec(9, "/data")]);
        let Child::Dir(root) = t.root else { panic!("root is a pseudo directory") };
        let r = &t.nodes[&root];
        assert_eq!(r.children.len(), 2);
        let Child::Dir(srv) = r.children[&Bytes::from_static(b"srv")] else { panic!() };
        assert_eq!(t.nodes[&srv].parent, root);
        assert_eq!(t.nodes[&srv].children[&Bytes::from_static(b"a")], Child::Export(7));
        assert_eq!(r.children[&Bytes::from_static(b"data")], Child::Export(9));
        assert_eq!(t.parent_of_export[&8], srv);
        assert_eq!(t.parent_of_export[&9], root);
        let mut below = r.exports_below.clone();
        below.sort();
        assert_eq!(below, vec![7, 8, 9]);
        assert!(!t.nodes.contains_key(&0));
    }

    #[test]
    fn an_export_at_the_root_is_the_root() {
        let t = Tree::build(&[spec(3, "/"), spec(4, "/x")]);
        assert_eq!(t.root, Child::Export(3));
    }

    #[test]
    fn node_ids_are_stable() {
        let a = Tree::build(&[spec(7, "/srv/a")]);
        let b = Tree::build(&[spec(7, "/srv/a")]);
        let mut ia: Vec<u32> = a.nodes.keys().copied().collect();
        let mut ib: Vec<u32> = b.nodes.keys().copied().collect();
        ia.sort();
        ib.sort();
        assert_eq!(ia, ib);
    }
}
