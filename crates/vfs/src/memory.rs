//! An in-memory backend: the papers' "memory server".
//!
//! It exists to compare NFS clients without disk noise, so it has to be
//! fast under concurrency and behave, protocol-wise, like a disk-backed
//! export (same permission answers, same WRITE/COMMIT traffic).
//!
//! # Layout
//! - [`MemoryConfig`], [`MemoryBackend`]: the inode table, capacity
//!   counters and the [`Backend`] implementation.
//! - `data`: sparse file contents in fixed-size chunks.
//!
//! # Concurrency
//! There is no global lock on the I/O path. The inode table is split into
//! shards, each a `RwLock<HashMap>` held only to find or insert an inode.
//! Every inode has its own `RwLock` over its attributes and contents, so
//! reads of one file run in parallel and writes to different files never
//! meet. Lock order, which rules out deadlock:
//! 1. `rename_lock`, taken only by a rename that moves a directory to
//!    another parent (the only operation that changes the tree's shape,
//!    so the "not into its own subtree" check is race-free under it);
//! 2. inode locks: either one at a time, or a set taken in ascending inode
//!    number (operations that touch a directory and a child look the child
//!    up under the directory's lock, drop it, lock both in order, and
//!    retry if the entry changed meanwhile);
//! 3. table shard locks, always last and never held while taking another lock.
//!
//! # Handles
//! `[tag][instance u64][inode u64][generation u32]`, 21 bytes. Inode
//! numbers are never reused within an instance; the random instance id
//! makes every handle of an earlier instance (or another memory backend)
//! `Stale`, and anything malformed is `BadHandle`.
//!
//! # Choices where POSIX leaves room
//! - WRITE reports exactly the stability asked for and COMMIT is a no-op
//!   that returns the verifier: a client then sends the same WRITE/COMMIT
//!   sequence it would send to a disk server, which is what a comparison
//!   needs (reporting FILE_SYNC would silently remove COMMIT traffic).
//! - No atime updates on READ/READDIR (like `noatime`), so readers take
//!   shared locks only.
//! - A mode not given at create time is 0 (as knfsd does); an exclusive
//!   create makes mode 0, and the client's follow-up SETATTR sets it.
//! - Directory size is a constant 4096; symlink size is the target length.
//! - The READDIR cookie verifier is constant per instance, since cookies
//!   never go bad; an all-zero verifier is accepted with any cookie,
//!   because the Linux client sends zeros after it drops its cache.

mod data;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};

use crate::perm::{self, R, W, X};
use crate::{
    Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FileType, FsError,
    FsProperties, FsResult, FsStat, Lookup, NodeKind, ReadResult, SeekWhat, SetAttr, SetTime, StableHow,
    Timestamp, Verifier, Wcc, WccAttr, WriteResult, XattrSet, NAME_MAX, SYMLINK_TARGET_BYTES_MAX,
    XATTR_VALUE_MAX,
};
use data::SparseData;

/// Limits of one memory file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Total bytes of file data stored (holes are free); a write beyond it fails with `NoSpc`.
    pub max_bytes: u64,
    /// Total objects, the root included; a create beyond it fails with `NoSpc`.
    pub max_files: u64,
}

impl Default for MemoryConfig {
    /// 1 GiB and a million files: enough for the papers' benchmarks.
    fn default() -> Self {
        MemoryConfig { max_bytes: 1 << 30, max_files: 1 << 20 }
    }
}

/// Number of inode-table shards: a power of two well above the core count,
/// so concurrent lookups of different inodes rarely share one.
const SHARDS: usize = 64;
/// First byte of every handle (format version of this backend's handles).
const HANDLE_TAG: u8 = 0xE1;
/// Tag + instance + inode + generation.
const HANDLE_LEN: usize = 1 + 8 + 8 + 4;
const ROOT_INO: u64 = 1;
/// Links per object, as ext4 allows.
const LINK_MAX: u32 = 65_000;
/// Largest file size (what an `off_t` holds).
const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// The most one READ returns: bounds the buffer a huge `count` on a sparse
/// file could otherwise make us allocate (a short read is legal NFS).
const READ_MAX_BYTES: u32 = 4 << 20;
/// Reported size of every directory.
const DIR_SIZE: u64 = 4096;
/// READDIR cookie after `.`; the one after `..`; entries count from there.
const COOKIE_DOT: u64 = 1;
const COOKIE_DOTDOT: u64 = 2;
/// Entries copied out per directory-lock hold in READDIR, so a slow sink
/// never holds a directory lock and the sink may call back into us.
const READDIR_BATCH: usize = 128;

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;
const S_IXGRP: u32 = 0o010;

/// One directory's entries.
#[derive(Debug)]
struct Dir {
    /// Name → (insertion sequence, inode).
    by_name: HashMap<Bytes, (u64, u64)>,
    /// Insertion sequence → (name, inode): READDIR walks this, and a
    /// sequence number is the cookie, so a cookie stays valid whatever is
    /// added or removed around it.
    by_seq: BTreeMap<u64, (Bytes, u64)>,
    /// Next sequence number; only grows.
    next_seq: u64,
}

impl Dir {
    fn new() -> Self {
        Dir { by_name: HashMap::new(), by_seq: BTreeMap::new(), next_seq: COOKIE_DOTDOT + 1 }
    }

    fn get(&self, name: &[u8]) -> Option<u64> {
        self.by_name.get(name).map(|&(_, ino)| ino)
    }

    fn insert(&mut self, name: &[u8], ino: u64) {
        let name = Bytes::copy_from_slice(name);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_seq.insert(seq, (name.clone(), ino));
        self.by_name.insert(name, (seq, ino));
    }

    fn remove(&mut self, name: &[u8]) {
        if let Some((seq, _)) = self.by_name.remove(name) {
            self.by_seq.remove(&seq);
        }
    }
}

/// What an inode holds besides attributes.
#[derive(Debug)]
enum Body {
    Regular {
        data: SparseData,
        /// Verifier of the EXCLUSIVE create that made this file, if any.
        create_verf: Option<Verifier>,
    },
    Directory(Dir),
    Symlink(Bytes),
    Special,
}

/// The lock-protected part of an inode.
#[derive(Debug)]
struct State {
    /// Kept current at every change (size, used, nlink, times), so permission
    /// checks and replies read it directly.
    attr: Attr,
    /// Set when the last name went away: every later use of the handle is `Stale`.
    removed: bool,
    body: Body,
    /// User extended attributes (at most [`XATTRS_BYTES_MAX`] of names and values).
    xattrs: BTreeMap<Bytes, Bytes>,
}

/// Most bytes of extended attribute names and values one object holds.
const XATTRS_BYTES_MAX: usize = 256 * 1024;

#[derive(Debug)]
struct Inode {
    ino: u64,
    generation: u32,
    /// Immutable, so rename can decide whether it needs `rename_lock`
    /// without locking the inode.
    ftype: FileType,
    /// Parent directory (directories only). Written only at mkdir (before
    /// the inode is reachable) and under `rename_lock`, so the subtree check
    /// reads it without inode locks.
    parent: AtomicU64,
    state: RwLock<State>,
}

/// One slice of the inode table.
type Shard = RwLock<HashMap<u64, Arc<Inode>>>;

/// What a create-like call makes: everything about a new object that
/// does not come from its parent or the caller's credentials.
struct NewNode {
    ftype: FileType,
    /// Device numbers (device nodes only).
    rdev: (u32, u32),
    body: Body,
}

/// Write guards over a few inodes, taken in ascending inode order.
struct Locked<'a> {
    guards: Vec<(u64, RwLockWriteGuard<'a, State>)>,
}

impl<'a> Locked<'a> {
    fn new(nodes: &[&'a Arc<Inode>]) -> Self {
        let mut sorted: Vec<&'a Arc<Inode>> = nodes.to_vec();
        sorted.sort_by_key(|n| n.ino);
        sorted.dedup_by_key(|n| n.ino);
        Locked { guards: sorted.into_iter().map(|n| (n.ino, n.state.write())).collect() }
    }

    /// The state of a locked inode. Asking for one not in the set is a bug.
    fn st(&mut self, ino: u64) -> &mut State {
        let i = self.guards.iter().position(|(g, _)| *g == ino).expect("inode is in the locked set");
        &mut self.guards[i].1
    }
}

/// The in-memory file system. Cheap to share: every method takes `&self`.
pub struct MemoryBackend {
    cfg: MemoryConfig,
    /// Random per instance; part of every handle.
    instance: u64,
    fsid: u64,
    write_verf: Verifier,
    cookie_verf: Verifier,
    /// Inode number → inode, sharded by inode number.
    shards: Box<[Shard]>,
    next_ino: AtomicU64,
    /// File data stored (sum of every file's stored bytes).
    used_bytes: AtomicU64,
    /// Objects that exist (the root included).
    used_files: AtomicU64,
    /// Serialises renames that move a directory between parents.
    rename_lock: Mutex<()>,
}

fn now() -> Timestamp {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Timestamp { secs: d.as_secs() as i64, nsecs: d.subsec_nanos() }
}

fn wcc(before: WccAttr, after: &Attr) -> Wcc {
    Wcc { before: Some(before), after: Some(after.clone()) }
}

/// Reject what no create-like call accepts as a new name: `.` and `..`
/// always exist (Linux says EEXIST), an empty name is no name.
fn check_new_name(name: &[u8]) -> FsResult<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() {
        return Err(FsError::Inval);
    }
    if name == b"." || name == b".." {
        return Err(FsError::Exist);
    }
    Ok(())
}

/// An existing directory's state, or the error for using it as one.
fn dir_of(st: &State) -> FsResult<&Dir> {
    match &st.body {
        Body::Directory(d) => Ok(d),
        _ => Err(FsError::NotDir),
    }
}

fn dir_of_mut(st: &mut State) -> FsResult<&mut Dir> {
    match &mut st.body {
        Body::Directory(d) => Ok(d),
        _ => Err(FsError::NotDir),
    }
}

/// Whether `cred` may add `name` to the directory `st`, checked in the
/// order a local file system answers: stale, not a directory, search
/// permission, a bad name, the name taken, write permission.
fn check_can_add(cred: &Credentials, st: &State, name: &[u8]) -> FsResult<()> {
    live(st)?;
    let d = dir_of(st)?;
    if !perm::allowed(cred, &st.attr, X) {
        return Err(FsError::Access);
    }
    check_new_name(name)?;
    if d.get(name).is_some() {
        return Err(FsError::Exist);
    }
    if !perm::allowed(cred, &st.attr, W) {
        return Err(FsError::Access);
    }
    Ok(())
}

fn live(st: &State) -> FsResult<()> {
    if st.removed {
        Err(FsError::Stale)
    } else {
        Ok(())
    }
}

/// The error READ/WRITE/COMMIT give for a non-regular file.
fn not_regular(ftype: FileType) -> FsError {
    if ftype == FileType::Directory {
        FsError::IsDir
    } else {
        FsError::Inval
    }
}

/// Check what SETATTR (or the attributes of a create) may change, before
/// anything changes. Mirrors Linux `setattr_prepare`: mode and explicit
/// times need ownership; owner changes need root; a group change needs
/// ownership and membership of the new group; "now" times need ownership
/// or write permission; size needs write permission (with the NFS owner
/// override). A uid/gid equal to the current one is no change.
fn authorize_setattr(cred: &Credentials, attr: &Attr, set: &SetAttr) -> FsResult<()> {
    let root = cred.uid == 0;
    let owner = root || cred.uid == attr.uid;
    if let Some(uid) = set.uid {
        if uid != attr.uid && !root {
            return Err(FsError::Perm);
        }
    }
    if let Some(gid) = set.gid {
        if gid != attr.gid && !root && !(cred.uid == attr.uid && cred.in_group(gid)) {
            return Err(FsError::Perm);
        }
    }
    if set.mode.is_some() && !owner && attr.ftype != FileType::Symlink {
        return Err(FsError::Perm);
    }
    let client_time =
        matches!(set.atime, SetTime::ClientTime(_)) || matches!(set.mtime, SetTime::ClientTime(_));
    if client_time && !owner {
        return Err(FsError::Perm);
    }
    let server_time = set.atime == SetTime::ServerTime || set.mtime == SetTime::ServerTime;
    if server_time && !owner && !perm::allowed(cred, attr, W) {
        return Err(FsError::Access);
    }
    if let Some(size) = set.size {
        match attr.ftype {
            FileType::Regular => {}
            other => return Err(not_regular(other)),
        }
        if !perm::allowed_io(cred, attr, W) {
            return Err(FsError::Access);
        }
        if size > MAX_FILE_SIZE {
            return Err(FsError::FBig);
        }
    }
    Ok(())
}

impl MemoryBackend {
    /// An empty file system: a root directory (mode 0755, owned by root).
    pub fn new(cfg: MemoryConfig) -> Self {
        let instance: u64 = rand::random();
        let mut write_verf: Verifier = rand::random();
        // Zero is what clients send when they have no verifier; never issue it.
        write_verf[0] |= 1;
        let mut cookie_verf: Verifier = rand::random();
        cookie_verf[0] |= 1;
        let shards = (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect();
        let backend = MemoryBackend {
            cfg,
            instance,
            fsid: instance,
            write_verf,
            cookie_verf,
            shards,
            next_ino: AtomicU64::new(ROOT_INO + 1),
            used_bytes: AtomicU64::new(0),
            used_files: AtomicU64::new(1),
            rename_lock: Mutex::new(()),
        };
        let t = now();
        let root_attr = backend.new_attr(FileType::Directory, ROOT_INO, 0o755, 0, 0, t);
        let root = Inode {
            ino: ROOT_INO,
            generation: rand::random(),
            ftype: FileType::Directory,
            parent: AtomicU64::new(ROOT_INO),
            state: RwLock::new(State {
                attr: Attr { nlink: 2, ..root_attr },
                removed: false,
                body: Body::Directory(Dir::new()),
                xattrs: BTreeMap::new(),
            }),
        };
        backend.shard(ROOT_INO).write().insert(ROOT_INO, Arc::new(root));
        backend
    }

    fn new_attr(&self, ftype: FileType, ino: u64, mode: u32, uid: u32, gid: u32, t: Timestamp) -> Attr {
        Attr {
            ftype,
            mode,
            nlink: 1,
            uid,
            gid,
            size: if ftype == FileType::Directory { DIR_SIZE } else { 0 },
            used: if ftype == FileType::Directory { DIR_SIZE } else { 0 },
            rdev: (0, 0),
            fsid: self.fsid,
            fileid: ino,
            atime: t,
            mtime: t,
            ctime: t,
        }
    }

    fn shard(&self, ino: u64) -> &Shard {
        &self.shards[(ino % SHARDS as u64) as usize]
    }

    fn by_ino(&self, ino: u64) -> Option<Arc<Inode>> {
        self.shard(ino).read().get(&ino).cloned()
    }

    /// An inode reached from a directory entry. Entries and table rows
    /// change together under the directory lock the caller holds, so a
    /// miss is a broken invariant, reported rather than panicking a server.
    fn entry_inode(&self, ino: u64) -> FsResult<Arc<Inode>> {
        let node = self.by_ino(ino);
        debug_assert!(node.is_some(), "directory entry names inode {ino} missing from the table");
        node.ok_or(FsError::ServerFault)
    }

    fn handle_of(&self, node: &Inode) -> FileHandle {
        let mut h = Vec::with_capacity(HANDLE_LEN);
        h.push(HANDLE_TAG);
        h.extend_from_slice(&self.instance.to_be_bytes());
        h.extend_from_slice(&node.ino.to_be_bytes());
        h.extend_from_slice(&node.generation.to_be_bytes());
        FileHandle(Bytes::from(h))
    }

    /// Decode a handle and find its inode (which may have been removed since;
    /// callers check `removed` under its lock).
    fn inode(&self, fh: &FileHandle) -> FsResult<Arc<Inode>> {
        let h = &fh.0[..];
        if h.len() != HANDLE_LEN || h[0] != HANDLE_TAG {
            return Err(FsError::BadHandle);
        }
        let field = |from: usize| -> [u8; 8] { h[from..from + 8].try_into().expect("8-byte slice") };
        let instance = u64::from_be_bytes(field(1));
        let ino = u64::from_be_bytes(field(9));
        let generation = u32::from_be_bytes(h[17..21].try_into().expect("4-byte slice"));
        if instance != self.instance {
            return Err(FsError::Stale);
        }
        match self.by_ino(ino) {
            Some(node) if node.generation == generation => Ok(node),
            _ => Err(FsError::Stale),
        }
    }

    fn reserve_bytes(&self, n: u64) -> FsResult<()> {
        if n == 0 {
            return Ok(());
        }
        self.used_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|&total| total <= self.cfg.max_bytes)
            })
            .map(|_| ())
            .map_err(|_| FsError::NoSpc)
    }

    fn reserve_file(&self) -> FsResult<()> {
        self.used_files
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(1).filter(|&total| total <= self.cfg.max_files)
            })
            .map(|_| ())
            .map_err(|_| FsError::NoSpc)
    }

    /// The last name of `node` is gone: make its handle stale and give back
    /// what it used. Called with `node`'s lock held (as `st`).
    fn destroy(&self, ino: u64, st: &mut State) {
        st.removed = true;
        st.attr.nlink = 0;
        if let Body::Regular { data, .. } = &mut st.body {
            let released = data.truncate(0);
            self.used_bytes.fetch_sub(released, Ordering::AcqRel);
        }
        self.used_files.fetch_sub(1, Ordering::AcqRel);
        self.shard(ino).write().remove(&ino);
    }

    /// Is `ancestor` `dir` or above it? Walks parent links, which only move
    /// under `rename_lock`; the caller holds it.
    fn is_ancestor(&self, ancestor: u64, mut dir: u64) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            if dir == ROOT_INO {
                return false;
            }
            match self.by_ino(dir) {
                Some(node) => dir = node.parent.load(Ordering::Acquire),
                // A removed directory has no ancestors left.
                None => return false,
            }
        }
    }

    /// Make `new` named `name` in `dir_fh`; `set` is applied as the
    /// creator's SETATTR would be.
    fn make_node(
        &self,
        cred: &Credentials,
        dir_fh: &FileHandle,
        name: &[u8],
        set: &SetAttr,
        new: NewNode,
    ) -> FsResult<Created> {
        let NewNode { ftype, rdev, body } = new;
        let dir = self.inode(dir_fh)?;
        let mut dst = dir.state.write();
        check_can_add(cred, &dst, name)?;
        if ftype == FileType::Directory && dst.attr.nlink >= LINK_MAX {
            return Err(FsError::MLink);
        }

        // Owner and mode as Linux gives them: the creator's fsuid, and the
        // directory's group when it is setgid (subdirectories inherit the bit).
        let t = now();
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        let dir_setgid = dst.attr.mode & S_ISGID != 0;
        let gid = if dir_setgid { dst.attr.gid } else { cred.gid };
        let mut mode = if ftype == FileType::Symlink { 0o777 } else { set.mode.unwrap_or(0) & 0o7777 };
        if ftype == FileType::Directory && dir_setgid {
            mode |= S_ISGID;
        }
        if ftype != FileType::Directory && mode & S_ISGID != 0 && cred.uid != 0 && !cred.in_group(gid) {
            mode &= !S_ISGID;
        }
        let mut attr = self.new_attr(ftype, ino, mode, cred.uid, gid, t);
        attr.rdev = rdev;
        if ftype == FileType::Directory {
            attr.nlink = 2;
        }
        if let Body::Symlink(target) = &body {
            attr.size = target.len() as u64;
            attr.used = target.len() as u64;
        }
        // The rest of `set` is a SETATTR by the creator: check it first so a
        // refused attribute leaves nothing behind.
        let rest = SetAttr { mode: None, ..set.clone() };
        authorize_setattr(cred, &attr, &rest)?;
        self.reserve_file()?;
        let mut st = State { attr, removed: false, body, xattrs: BTreeMap::new() };
        apply_setattr(cred, &mut st, &rest, t, &mut 0);

        let node = Arc::new(Inode {
            ino,
            generation: rand::random(),
            ftype,
            parent: AtomicU64::new(dir.ino),
            state: RwLock::new(st),
        });
        let handle = self.handle_of(&node);
        let attr = node.state.read().attr.clone();
        self.shard(ino).write().insert(ino, node);

        let before = WccAttr::from(&dst.attr);
        dir_of_mut(&mut dst)?.insert(name, ino);
        if ftype == FileType::Directory {
            dst.attr.nlink += 1;
        }
        dst.attr.mtime = t;
        dst.attr.ctime = t;
        Ok(Created { handle, attr, dir_wcc: wcc(before, &dst.attr) })
    }

    /// CREATE when the name already exists: EXCLUSIVE succeeds only for the
    /// same verifier; UNCHECKED truncates a regular file if asked (the only
    /// attribute knfsd applies here). `None` means the name vanished meanwhile.
    fn create_existing(
        &self,
        cred: &Credentials,
        dir: &Inode,
        child: &Inode,
        how: &CreateMode,
    ) -> FsResult<Option<Created>> {
        let mut st = child.state.write();
        if st.removed {
            return Ok(None);
        }
        match how {
            CreateMode::Guarded(_) => return Err(FsError::Exist),
            CreateMode::Exclusive(verf) => match &st.body {
                Body::Regular { create_verf: Some(v), .. } if v == verf => {}
                _ => return Err(FsError::Exist),
            },
            CreateMode::Unchecked(set) => {
                if child.ftype != FileType::Regular {
                    return Err(FsError::Exist);
                }
                if let Some(size) = set.size {
                    let only_size = SetAttr { size: Some(size), ..SetAttr::default() };
                    authorize_setattr(cred, &st.attr, &only_size)?;
                    let mut released = 0;
                    apply_setattr(cred, &mut st, &only_size, now(), &mut released);
                    self.used_bytes.fetch_sub(released, Ordering::AcqRel);
                }
            }
        }
        let attr = st.attr.clone();
        let handle = self.handle_of(child);
        drop(st);
        let dir_attr = dir.state.read().attr.clone();
        Ok(Some(Created { handle, attr, dir_wcc: wcc(WccAttr::from(&dir_attr), &dir_attr) }))
    }

    /// Remove `name` from `dir_fh` (REMOVE with `want_dir == false`, RMDIR with true).
    fn unlink(&self, cred: &Credentials, dir_fh: &FileHandle, name: &[u8], want_dir: bool) -> FsResult<Wcc> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        if name == b"." || name.is_empty() {
            return Err(FsError::Inval);
        }
        if name == b".." {
            return Err(if want_dir { FsError::NotEmpty } else { FsError::Inval });
        }
        let dir = self.inode(dir_fh)?;
        loop {
            let child = {
                let st = dir.state.read();
                live(&st)?;
                let d = dir_of(&st)?;
                if !perm::allowed(cred, &st.attr, X) {
                    return Err(FsError::Access);
                }
                let ino = d.get(name).ok_or(FsError::NoEnt)?;
                self.entry_inode(ino)?
            };
            let mut locked = Locked::new(&[&dir, &child]);
            // Revalidate: the entry may have changed while nothing was locked.
            {
                let dst = locked.st(dir.ino);
                live(dst)?;
                if dir_of(dst)?.get(name) != Some(child.ino) {
                    continue;
                }
                if !perm::allowed(cred, &dst.attr, W | X) {
                    return Err(FsError::Access);
                }
            }
            let owner = locked.st(child.ino).attr.uid;
            if !perm::sticky_allows(cred, &locked.st(dir.ino).attr, owner) {
                return Err(FsError::Perm);
            }
            let is_dir = child.ftype == FileType::Directory;
            match (want_dir, is_dir) {
                (false, true) => return Err(FsError::IsDir),
                (true, false) => return Err(FsError::NotDir),
                (true, true) => {
                    if !dir_of(locked.st(child.ino))?.by_seq.is_empty() {
                        return Err(FsError::NotEmpty);
                    }
                }
                (false, false) => {}
            }
            let t = now();
            let dst = locked.st(dir.ino);
            let before = WccAttr::from(&dst.attr);
            dir_of_mut(dst)?.remove(name);
            if is_dir {
                dst.attr.nlink -= 1;
            }
            dst.attr.mtime = t;
            dst.attr.ctime = t;
            let after = dst.attr.clone();
            let cst = locked.st(child.ino);
            cst.attr.ctime = t;
            if is_dir || cst.attr.nlink <= 1 {
                self.destroy(child.ino, cst);
            } else {
                cst.attr.nlink -= 1;
            }
            return Ok(wcc(before, &after));
        }
    }

    /// The attributes and handle of an entry for READDIRPLUS, if it still exists.
    fn plus_of(&self, ino: u64) -> (Option<Attr>, Option<FileHandle>) {
        match self.by_ino(ino) {
            Some(node) => {
                let st = node.state.read();
                if st.removed {
                    (None, None)
                } else {
                    (Some(st.attr.clone()), Some(self.handle_of(&node)))
                }
            }
            None => (None, None),
        }
    }
}

/// Apply an authorised SETATTR to `st` at time `t`. Adds bytes released by
/// a truncate to `released` (the caller returns them to the capacity).
fn apply_setattr(cred: &Credentials, st: &mut State, set: &SetAttr, t: Timestamp, released: &mut u64) {
    let times_before = (st.attr.atime, st.attr.mtime);
    let chown = set.uid.is_some_and(|u| u != st.attr.uid) || set.gid.is_some_and(|g| g != st.attr.gid);
    let mut changed = chown;
    if let Some(uid) = set.uid {
        st.attr.uid = uid;
    }
    if let Some(gid) = set.gid {
        st.attr.gid = gid;
    }
    // Symlink modes are meaningless; knfsd ignores a request to change one.
    if let (Some(mode), false) = (set.mode, st.attr.ftype == FileType::Symlink) {
        let mut mode = mode & 0o7777;
        // Linux: a non-root caller outside the file's group cannot set setgid.
        if cred.uid != 0 && !cred.in_group(st.attr.gid) {
            mode &= !S_ISGID;
        }
        st.attr.mode = mode;
        changed = true;
    }
    // Changing the owner of a non-directory drops setuid, and setgid when it
    // means "run as group" (group-executable), as Linux does even for root.
    if chown && st.attr.ftype != FileType::Directory {
        st.attr.mode &= !S_ISUID;
        if st.attr.mode & S_IXGRP != 0 {
            st.attr.mode &= !S_ISGID;
        }
    }
    if let (Some(size), Body::Regular { data, .. }) = (set.size, &mut st.body) {
        if size != st.attr.size {
            *released += data.truncate(size);
            st.attr.size = size;
            st.attr.used = data.stored_bytes();
            st.attr.mtime = t;
        }
        changed = true;
    }
    match set.atime {
        SetTime::DontChange => {}
        SetTime::ServerTime => st.attr.atime = t,
        SetTime::ClientTime(at) => st.attr.atime = at,
    }
    match set.mtime {
        SetTime::DontChange => {}
        SetTime::ServerTime => st.attr.mtime = t,
        SetTime::ClientTime(mt) => st.attr.mtime = mt,
    }
    if changed || set.atime != SetTime::DontChange || set.mtime != SetTime::DontChange {
        st.attr.ctime = t;
    }
    if (st.attr.atime, st.attr.mtime) != times_before {
        forget_create_verifier(st);
    }
}

/// An EXCLUSIVE create's verifier identifies the file only until its times
/// change (a write, a truncation, the creator's SETATTR of its times): after
/// that a CREATE with the same verifier is not a retransmission but a second
/// create, and fails with EXIST, as where the verifier lives in the times
/// (knfsd, the local backend).
fn forget_create_verifier(st: &mut State) {
    if let Body::Regular { create_verf, .. } = &mut st.body {
        *create_verf = None;
    }
}

impl Backend for MemoryBackend {
    fn root(&self) -> FileHandle {
        let root = self.by_ino(ROOT_INO).expect("the root is never removed");
        self.handle_of(&root)
    }

    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        Ok(st.attr.clone())
    }

    fn setattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        set: &SetAttr,
        guard: Option<Timestamp>,
    ) -> FsResult<Wcc> {
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if guard.is_some_and(|g| g != st.attr.ctime) {
            return Err(FsError::NotSync);
        }
        authorize_setattr(cred, &st.attr, set)?;
        let before = WccAttr::from(&st.attr);
        let mut released = 0;
        apply_setattr(cred, &mut st, set, now(), &mut released);
        self.used_bytes.fetch_sub(released, Ordering::AcqRel);
        Ok(wcc(before, &st.attr))
    }

    fn lookup(&self, cred: &Credentials, dir_fh: &FileHandle, name: &[u8]) -> FsResult<Lookup> {
        let dir = self.inode(dir_fh)?;
        let (child, dir_attr) = {
            let st = dir.state.read();
            live(&st)?;
            let d = dir_of(&st)?;
            if !perm::allowed(cred, &st.attr, X) {
                return Err(FsError::Access);
            }
            if name.len() > NAME_MAX {
                return Err(FsError::NameTooLong);
            }
            let ino = match name {
                b"." => dir.ino,
                b".." => dir.parent.load(Ordering::Acquire),
                _ => d.get(name).ok_or(FsError::NoEnt)?,
            };
            if ino == dir.ino {
                let attr = st.attr.clone();
                return Ok(Lookup { handle: self.handle_of(&dir), attr: attr.clone(), dir_attr: Some(attr) });
            }
            (self.by_ino(ino).ok_or(FsError::NoEnt)?, st.attr.clone())
        };
        // The child is read after the directory lock is dropped (one inode
        // lock at a time); if it went meanwhile, the lookup came after the remove.
        let st = child.state.read();
        if st.removed {
            return Err(FsError::NoEnt);
        }
        Ok(Lookup { handle: self.handle_of(&child), attr: st.attr.clone(), dir_attr: Some(dir_attr) })
    }

    fn access(&self, cred: &Credentials, fh: &FileHandle, want: u32) -> FsResult<(u32, Attr)> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        Ok((perm::access_bits(cred, &st.attr, want), st.attr.clone()))
    }

    fn readlink(&self, _cred: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        match &st.body {
            Body::Symlink(target) => Ok((target.clone(), st.attr.clone())),
            _ => Err(FsError::Inval),
        }
    }

    fn read(&self, cred: &Credentials, fh: &FileHandle, offset: u64, count: u32) -> FsResult<ReadResult> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        let Body::Regular { data, .. } = &st.body else {
            return Err(not_regular(node.ftype));
        };
        // knfsd lets a reader with only execute permission read (clients
        // need that to execute binaries).
        if !perm::allowed_io(cred, &st.attr, R) && !perm::allowed(cred, &st.attr, X) {
            return Err(FsError::Access);
        }
        let size = st.attr.size;
        let count = count.min(READ_MAX_BYTES) as u64;
        let end = offset.saturating_add(count).min(size);
        let data = if offset >= end { Bytes::new() } else { data.read(offset, (end - offset) as usize) };
        Ok(ReadResult { data, eof: end >= size, attr: Some(st.attr.clone()) })
    }

    fn write(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        bytes: &[u8],
        stable: StableHow,
    ) -> FsResult<WriteResult> {
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if node.ftype != FileType::Regular {
            return Err(not_regular(node.ftype));
        }
        if !perm::allowed_io(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        let count = u32::try_from(bytes.len()).map_err(|_| FsError::Inval)?;
        let end = offset.checked_add(count as u64).filter(|&e| e <= MAX_FILE_SIZE).ok_or(FsError::FBig)?;
        let before = WccAttr::from(&st.attr);
        if count > 0 {
            let st = &mut *st;
            let Body::Regular { data, .. } = &mut st.body else {
                return Err(FsError::ServerFault);
            };
            self.reserve_bytes(data.write_growth(offset, count as u64))?;
            data.write(offset, bytes);
            st.attr.used = data.stored_bytes();
            forget_create_verifier(st);
            st.attr.size = st.attr.size.max(end);
            let t = now();
            st.attr.mtime = t;
            st.attr.ctime = t;
            // Writing drops setuid (and executable setgid) unless root
            // writes, as Linux's file_remove_privs does.
            if cred.uid != 0 {
                st.attr.mode &= !S_ISUID;
                if st.attr.mode & S_IXGRP != 0 {
                    st.attr.mode &= !S_ISGID;
                }
            }
        }
        Ok(WriteResult { count, committed: stable, verifier: self.write_verf, wcc: wcc(before, &st.attr) })
    }

    fn create(
        &self,
        cred: &Credentials,
        dir_fh: &FileHandle,
        name: &[u8],
        how: &CreateMode,
    ) -> FsResult<Created> {
        let dir = self.inode(dir_fh)?;
        loop {
            let existing = {
                let st = dir.state.read();
                live(&st)?;
                let d = dir_of(&st)?;
                if !perm::allowed(cred, &st.attr, X) {
                    return Err(FsError::Access);
                }
                check_new_name(name)?;
                match d.get(name) {
                    Some(ino) => Some(self.entry_inode(ino)?),
                    None => None,
                }
            };
            if let Some(child) = existing {
                match self.create_existing(cred, &dir, &child, how)? {
                    Some(created) => return Ok(created),
                    None => continue,
                }
            }
            let (set, create_verf) = match how {
                CreateMode::Unchecked(set) | CreateMode::Guarded(set) => (set.clone(), None),
                CreateMode::Exclusive(verf) => (SetAttr::default(), Some(*verf)),
            };
            let body = Body::Regular { data: SparseData::default(), create_verf };
            // Size in the create attributes makes a sparse file; apply it
            // through SETATTR, which checks it like any other.
            match self.make_node(
                cred,
                dir_fh,
                name,
                &set,
                NewNode { ftype: FileType::Regular, rdev: (0, 0), body },
            ) {
                // Someone created the name between our look and our lock:
                // go round so EXCLUSIVE/UNCHECKED see the existing file.
                Err(FsError::Exist) if !matches!(how, CreateMode::Guarded(_)) => continue,
                other => return other,
            }
        }
    }

    fn mkdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8], set: &SetAttr) -> FsResult<Created> {
        let set = SetAttr { size: None, ..set.clone() };
        let new = NewNode { ftype: FileType::Directory, rdev: (0, 0), body: Body::Directory(Dir::new()) };
        self.make_node(cred, dir, name, &set, new)
    }

    fn symlink(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        target: &[u8],
        set: &SetAttr,
    ) -> FsResult<Created> {
        if target.is_empty() {
            // As Linux symlink(2) and knfsd answer an empty target.
            return Err(FsError::NoEnt);
        }
        if target.len() > SYMLINK_TARGET_BYTES_MAX {
            return Err(FsError::NameTooLong);
        }
        if target.contains(&0) {
            // No file system can store it; keep memory exports honest.
            return Err(FsError::Inval);
        }
        let set = SetAttr { size: None, mode: None, ..set.clone() };
        let body = Body::Symlink(Bytes::copy_from_slice(target));
        self.make_node(cred, dir, name, &set, NewNode { ftype: FileType::Symlink, rdev: (0, 0), body })
    }

    fn mknod(
        &self,
        cred: &Credentials,
        dir: &FileHandle,
        name: &[u8],
        kind: NodeKind,
        set: &SetAttr,
    ) -> FsResult<Created> {
        let (ftype, rdev) = match kind {
            NodeKind::CharDevice { major, minor } => (FileType::CharDevice, (major, minor)),
            NodeKind::BlockDevice { major, minor } => (FileType::BlockDevice, (major, minor)),
            NodeKind::Socket => (FileType::Socket, (0, 0)),
            NodeKind::Fifo => (FileType::Fifo, (0, 0)),
        };
        // Device nodes need CAP_MKNOD on Linux.
        if matches!(ftype, FileType::CharDevice | FileType::BlockDevice) && cred.uid != 0 {
            return Err(FsError::Perm);
        }
        let set = SetAttr { size: None, ..set.clone() };
        self.make_node(cred, dir, name, &set, NewNode { ftype, rdev, body: Body::Special })
    }

    fn remove(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.unlink(cred, dir, name, false)
    }

    fn rmdir(&self, cred: &Credentials, dir: &FileHandle, name: &[u8]) -> FsResult<Wcc> {
        self.unlink(cred, dir, name, true)
    }

    fn rename(
        &self,
        cred: &Credentials,
        from_fh: &FileHandle,
        from_name: &[u8],
        to_fh: &FileHandle,
        to_name: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        for name in [from_name, to_name] {
            if name.len() > NAME_MAX {
                return Err(FsError::NameTooLong);
            }
            if name.is_empty() || name == b"." || name == b".." {
                return Err(FsError::Inval);
            }
        }
        let from = self.inode(from_fh)?;
        let to = self.inode(to_fh)?;
        // Both handles must name directories before any name is looked up
        // (NOTDIR before NOENT, as renameat(2) on the kernel's file systems).
        for dir in [&from, &to] {
            let st = dir.state.read();
            live(&st)?;
            dir_of(&st)?;
        }
        let mut tree_guard: Option<MutexGuard<'_, ()>> = None;
        loop {
            // Look both names up, one directory lock at a time.
            let src = {
                let st = from.state.read();
                live(&st)?;
                let d = dir_of(&st)?;
                if !perm::allowed(cred, &st.attr, X) {
                    return Err(FsError::Access);
                }
                self.entry_inode(d.get(from_name).ok_or(FsError::NoEnt)?)?
            };
            let dst = {
                let st = to.state.read();
                live(&st)?;
                let d = dir_of(&st)?;
                if !perm::allowed(cred, &st.attr, X) {
                    return Err(FsError::Access);
                }
                match d.get(to_name) {
                    Some(ino) => Some(self.entry_inode(ino)?),
                    None => None,
                }
            };
            let src_is_dir = src.ftype == FileType::Directory;
            let moves_dir = src_is_dir && from.ino != to.ino;
            if moves_dir && tree_guard.is_none() {
                tree_guard = Some(self.rename_lock.lock());
                continue;
            }
            let mut nodes = vec![&from, &to, &src];
            if let Some(d) = &dst {
                nodes.push(d);
            }
            let mut locked = Locked::new(&nodes);
            {
                let fst = locked.st(from.ino);
                live(fst)?;
                if dir_of(fst)?.get(from_name) != Some(src.ino) {
                    continue;
                }
                let tst = locked.st(to.ino);
                live(tst)?;
                if dir_of(tst)?.get(to_name) != dst.as_ref().map(|d| d.ino) {
                    continue;
                }
            }
            if moves_dir && self.is_ancestor(src.ino, to.ino) {
                return Err(FsError::Inval);
            }
            // The target is the source's directory or above it: it cannot be
            // empty (renameat(2) answers ENOTEMPTY before comparing types).
            if let Some(d) = &dst {
                if from.ino != to.ino && d.ftype == FileType::Directory && self.is_ancestor(d.ino, from.ino) {
                    return Err(FsError::NotEmpty);
                }
            }
            let from_before = WccAttr::from(&locked.st(from.ino).attr);
            let to_before = WccAttr::from(&locked.st(to.ino).attr);
            if dst.as_ref().is_some_and(|d| d.ino == src.ino) {
                // Two names of one file: POSIX says do nothing, successfully.
                let fa = locked.st(from.ino).attr.clone();
                let ta = locked.st(to.ino).attr.clone();
                return Ok((wcc(from_before, &fa), wcc(to_before, &ta)));
            }
            // Permission checks in Linux's order (may_delete, may_create).
            let src_owner = locked.st(src.ino).attr.uid;
            let fattr = locked.st(from.ino).attr.clone();
            if !perm::allowed(cred, &fattr, W | X) {
                return Err(FsError::Access);
            }
            if !perm::sticky_allows(cred, &fattr, src_owner) {
                return Err(FsError::Perm);
            }
            let tattr = locked.st(to.ino).attr.clone();
            if !perm::allowed(cred, &tattr, W | X) {
                return Err(FsError::Access);
            }
            if let Some(d) = &dst {
                let dst_owner = locked.st(d.ino).attr.uid;
                if !perm::sticky_allows(cred, &tattr, dst_owner) {
                    return Err(FsError::Perm);
                }
                match (src_is_dir, d.ftype == FileType::Directory) {
                    (true, false) => return Err(FsError::NotDir),
                    (false, true) => return Err(FsError::IsDir),
                    (true, true) => {
                        if !dir_of(locked.st(d.ino))?.by_seq.is_empty() {
                            return Err(FsError::NotEmpty);
                        }
                    }
                    (false, false) => {}
                }
            }
            if moves_dir {
                // Moving a directory rewrites its "..": Linux wants write permission on it.
                if !perm::allowed(cred, &locked.st(src.ino).attr, W) {
                    return Err(FsError::Access);
                }
                if dst.is_none() && tattr.nlink >= LINK_MAX {
                    return Err(FsError::MLink);
                }
            }

            let t = now();
            if let Some(d) = &dst {
                let tst = locked.st(to.ino);
                dir_of_mut(tst)?.remove(to_name);
                if d.ftype == FileType::Directory {
                    tst.attr.nlink -= 1;
                }
                let dstate = locked.st(d.ino);
                dstate.attr.ctime = t;
                if d.ftype == FileType::Directory || dstate.attr.nlink <= 1 {
                    self.destroy(d.ino, dstate);
                } else {
                    dstate.attr.nlink -= 1;
                }
            }
            let fst = locked.st(from.ino);
            dir_of_mut(fst)?.remove(from_name);
            if moves_dir {
                fst.attr.nlink -= 1;
            }
            fst.attr.mtime = t;
            fst.attr.ctime = t;
            let tst = locked.st(to.ino);
            dir_of_mut(tst)?.insert(to_name, src.ino);
            if moves_dir {
                tst.attr.nlink += 1;
                src.parent.store(to.ino, Ordering::Release);
            }
            tst.attr.mtime = t;
            tst.attr.ctime = t;
            locked.st(src.ino).attr.ctime = t;
            let fa = locked.st(from.ino).attr.clone();
            let ta = locked.st(to.ino).attr.clone();
            return Ok((wcc(from_before, &fa), wcc(to_before, &ta)));
        }
    }

    fn link(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        dir_fh: &FileHandle,
        name: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        let file = self.inode(fh)?;
        let dir = self.inode(dir_fh)?;
        let mut locked = Locked::new(&[&dir, &file]);
        let dattr = {
            let dst = locked.st(dir.ino);
            check_can_add(cred, dst, name)?;
            dst.attr.clone()
        };
        let fst = locked.st(file.ino);
        live(fst)?;
        if file.ftype == FileType::Directory {
            return Err(FsError::Perm);
        }
        if fst.attr.nlink >= LINK_MAX {
            return Err(FsError::MLink);
        }
        let t = now();
        fst.attr.nlink += 1;
        fst.attr.ctime = t;
        let fattr = fst.attr.clone();
        let dst = locked.st(dir.ino);
        dir_of_mut(dst)?.insert(name, file.ino);
        dst.attr.mtime = t;
        dst.attr.ctime = t;
        Ok((Some(fattr), wcc(WccAttr::from(&dattr), &dst.attr)))
    }

    fn readdir(
        &self,
        cred: &Credentials,
        dir_fh: &FileHandle,
        cookie: u64,
        cookieverf: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        let dir = self.inode(dir_fh)?;
        if cookie != 0 && cookieverf != self.cookie_verf && cookieverf != [0; 8] {
            return Err(FsError::BadCookie);
        }
        let mut pos = cookie;
        let mut first = true;
        loop {
            // Copy a batch out under the lock, then offer it with no lock held.
            let (batch, more) = {
                let st = dir.state.read();
                live(&st)?;
                let d = dir_of(&st)?;
                if first {
                    if !perm::allowed(cred, &st.attr, R) {
                        return Err(FsError::Access);
                    }
                    if pos > COOKIE_DOTDOT && pos >= d.next_seq {
                        return Err(FsError::BadCookie);
                    }
                    first = false;
                }
                let mut batch: Vec<(u64, Bytes, u64)> = Vec::with_capacity(READDIR_BATCH);
                if pos < COOKIE_DOT {
                    batch.push((COOKIE_DOT, Bytes::from_static(b"."), dir.ino));
                }
                if pos < COOKIE_DOTDOT {
                    batch.push((
                        COOKIE_DOTDOT,
                        Bytes::from_static(b".."),
                        dir.parent.load(Ordering::Acquire),
                    ));
                }
                let mut entries = d.by_seq.range(pos.max(COOKIE_DOTDOT) + 1..);
                for (&seq, (name, ino)) in entries.by_ref().take(READDIR_BATCH - batch.len()) {
                    batch.push((seq, name.clone(), *ino));
                }
                (batch, entries.next().is_some())
            };
            for (seq, name, ino) in batch {
                let (attr, handle) = if plus { self.plus_of(ino) } else { (None, None) };
                let entry = DirEntry { fileid: ino, name, cookie: seq, attr, handle };
                if !sink(&entry) {
                    return Ok(DirInfo {
                        eof: false,
                        cookieverf: self.cookie_verf,
                        dir_attr: self.dir_attr(&dir),
                    });
                }
                pos = seq;
            }
            if !more {
                return Ok(DirInfo {
                    eof: true,
                    cookieverf: self.cookie_verf,
                    dir_attr: self.dir_attr(&dir),
                });
            }
        }
    }

    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        self.getattr(fh)?;
        let used_bytes = self.used_bytes.load(Ordering::Acquire);
        let used_files = self.used_files.load(Ordering::Acquire);
        let free_bytes = self.cfg.max_bytes.saturating_sub(used_bytes);
        let free_files = self.cfg.max_files.saturating_sub(used_files);
        Ok(FsStat {
            total_bytes: self.cfg.max_bytes,
            free_bytes,
            avail_bytes: free_bytes,
            total_files: self.cfg.max_files,
            free_files,
            avail_files: free_files,
        })
    }

    fn properties(&self) -> FsProperties {
        FsProperties {
            max_file_size: MAX_FILE_SIZE,
            time_delta: Timestamp { secs: 0, nsecs: 1 },
            supports_hard_links: true,
            supports_symlinks: true,
            link_max: LINK_MAX,
            name_max: NAME_MAX as u32,
            case_insensitive: false,
            case_preserving: true,
            holes_reported: true,
        }
    }

    fn commit(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        _offset: u64,
        _count: u32,
    ) -> FsResult<(Wcc, Verifier)> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        if node.ftype != FileType::Regular {
            return Err(not_regular(node.ftype));
        }
        // knfsd asks for write permission (with owner override) on COMMIT.
        if !perm::allowed_io(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        // Written data is already where reads find it; nothing to flush.
        Ok((wcc(WccAttr::from(&st.attr), &st.attr), self.write_verf))
    }

    fn write_verifier(&self) -> Verifier {
        self.write_verf
    }

    fn allocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if node.ftype != FileType::Regular {
            return Err(not_regular(node.ftype));
        }
        if !perm::allowed_io(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        let end = offset.checked_add(len).filter(|&e| e <= MAX_FILE_SIZE).ok_or(FsError::FBig)?;
        // Holes cost nothing here, so allocating only grows the file.
        if end > st.attr.size {
            st.attr.size = end;
            let t = now();
            st.attr.mtime = t;
            st.attr.ctime = t;
        }
        Ok(())
    }

    fn deallocate(&self, cred: &Credentials, fh: &FileHandle, offset: u64, len: u64) -> FsResult<()> {
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if node.ftype != FileType::Regular {
            return Err(not_regular(node.ftype));
        }
        if !perm::allowed_io(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        let size = st.attr.size;
        let st = &mut *st;
        let Body::Regular { data, .. } = &mut st.body else { return Err(FsError::ServerFault) };
        let end = offset.saturating_add(len).min(size);
        if offset < end {
            let released = data.punch(offset, end - offset);
            self.used_bytes.fetch_sub(released, Ordering::Relaxed);
            st.attr.used = data.stored_bytes();
            let t = now();
            st.attr.mtime = t;
            st.attr.ctime = t;
        }
        Ok(())
    }

    fn seek(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        offset: u64,
        what: SeekWhat,
    ) -> FsResult<(bool, u64)> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        let Body::Regular { data, .. } = &st.body else { return Err(not_regular(node.ftype)) };
        if !perm::allowed_io(cred, &st.attr, R) && !perm::allowed(cred, &st.attr, X) {
            return Err(FsError::Access);
        }
        let size = st.attr.size;
        if offset >= size {
            return Err(FsError::Nxio);
        }
        Ok(match what {
            // Data starts in the next stored chunk (holes are never stored).
            SeekWhat::Data => match data.next_stored(offset) {
                Some(at) if at < size => (false, at),
                _ => (true, size),
            },
            // Only the end of the file is a hole this backend reports.
            SeekWhat::Hole => (true, size),
        })
    }

    fn copy_range(
        &self,
        cred: &Credentials,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        let mut done = 0u64;
        let want = if len == 0 { u64::MAX } else { len };
        while done < want {
            let chunk = (want - done).min(READ_MAX_BYTES as u64) as u32;
            let r = self.read(cred, src, src_offset + done, chunk)?;
            if r.data.is_empty() {
                break;
            }
            let w = self.write(cred, dst, dst_offset + done, &r.data, StableHow::Unstable)?;
            done += w.count as u64;
            if r.eof {
                break;
            }
        }
        Ok(done)
    }

    fn getxattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<Bytes> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        if !perm::allowed(cred, &st.attr, R) {
            return Err(FsError::Access);
        }
        st.xattrs.get(name).cloned().ok_or(FsError::NoEnt)
    }

    fn setxattr(
        &self,
        cred: &Credentials,
        fh: &FileHandle,
        name: &[u8],
        value: &[u8],
        how: XattrSet,
    ) -> FsResult<()> {
        if value.len() > XATTR_VALUE_MAX {
            return Err(FsError::FBig);
        }
        if name.is_empty() || name.len() > NAME_MAX {
            return Err(FsError::Inval);
        }
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if !perm::allowed(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        let exists = st.xattrs.contains_key(name);
        match how {
            XattrSet::Create if exists => return Err(FsError::Exist),
            XattrSet::Replace if !exists => return Err(FsError::NoEnt),
            _ => {}
        }
        let others: usize =
            st.xattrs.iter().filter(|(k, _)| k.as_ref() != name).map(|(k, v)| k.len() + v.len()).sum();
        if others + name.len() + value.len() > XATTRS_BYTES_MAX {
            return Err(FsError::NoSpc);
        }
        st.xattrs.insert(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value));
        st.attr.ctime = now();
        Ok(())
    }

    fn listxattr(&self, cred: &Credentials, fh: &FileHandle) -> FsResult<Vec<Bytes>> {
        let node = self.inode(fh)?;
        let st = node.state.read();
        live(&st)?;
        if !perm::allowed(cred, &st.attr, R) {
            return Err(FsError::Access);
        }
        Ok(st.xattrs.keys().cloned().collect())
    }

    fn removexattr(&self, cred: &Credentials, fh: &FileHandle, name: &[u8]) -> FsResult<()> {
        let node = self.inode(fh)?;
        let mut st = node.state.write();
        live(&st)?;
        if !perm::allowed(cred, &st.attr, W) {
            return Err(FsError::Access);
        }
        st.xattrs.remove(name).ok_or(FsError::NoEnt)?;
        st.attr.ctime = now();
        Ok(())
    }

    fn sync_all(&self) -> FsResult<()> {
        Ok(())
    }
}

impl MemoryBackend {
    fn dir_attr(&self, dir: &Inode) -> Option<Attr> {
        let st = dir.state.read();
        (!st.removed).then(|| st.attr.clone())
    }
}
