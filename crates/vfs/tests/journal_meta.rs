//! Changes of names and attributes behind the intent journal: answered once logged, and after
//! a crash replayed exactly once, whatever part of them the file system still has.
//!
//! A crash is the journal dropped without a checkpoint (its records stay in the log), then the
//! export's directory changed behind its back to what a file system could have kept: all of
//! the changes, none of some (a create, a rename, a remove undone), or a replay interrupted and
//! run again. After each replay the tree must be exactly what the calls were answered with.
//! They need root, as the local backend does.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eagernfs_vfs::journal::{JournalOptions, Journaled, Replay};
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use eagernfs_vfs::{
    Attr, Backend, CreateMode, Created, Credentials, DirEntry, DirInfo, FileHandle, FsError, FsProperties,
    FsResult, FsStat, Lookup, NodeKind, ReadResult, SetAttr, StableHow, Timestamp, Verifier, Wcc,
    WriteResult, XattrSet,
};
use tempfile::TempDir;

fn root() -> Credentials {
    Credentials::root()
}

fn mode(m: u32) -> SetAttr {
    SetAttr { mode: Some(m), ..SetAttr::default() }
}

/// An export and its journal; the backend is opened anew for each run of the server.
struct Setup {
    export: TempDir,
    journal_dir: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let export = tempfile::Builder::new().prefix("eagernfs-jmeta-").tempdir_in("/tmp").unwrap();
        std::fs::set_permissions(export.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Setup { export, journal_dir: tempfile::tempdir().unwrap() }
    }

    fn dir(&self) -> &Path {
        self.export.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.export.path().join(rel)
    }

    fn backend(&self) -> Arc<LocalBackend> {
        // Behind the journal: the journal makes changes durable, the backend does not sync them.
        let cfg = LocalConfig {
            root: self.dir().to_path_buf(),
            handle_key: *b"journal-meta-key",
            unsafe_async: false,
            journaled: true,
        };
        Arc::new(LocalBackend::open(cfg).unwrap())
    }

    /// Start a server run: replay what the journal holds into `backend`.
    fn open(&self, backend: Arc<dyn Backend>) -> (Journaled, Replay) {
        let opts = JournalOptions {
            size_bytes: 16 << 20,
            owner: *b"journal-meta-own",
            // No checkpoint behind the test's back: the log keeps every record until the crash.
            checkpoint_interval: Duration::from_secs(3600),
        };
        Journaled::open_file(backend, &self.journal_dir.path().join("journal"), opts).expect("journal opens")
    }

    /// Everything under the export: path → what it is (hard links share an inode number,
    /// replaced by the first path that has it so trees compare across runs).
    fn tree(&self) -> BTreeMap<String, String> {
        let mut raw = BTreeMap::new();
        walk(self.dir(), "", &mut raw);
        let mut first: BTreeMap<u64, String> = BTreeMap::new();
        for (path, (_, ino)) in &raw {
            first.entry(*ino).or_insert_with(|| path.clone());
        }
        raw.into_iter().map(|(p, (what, ino))| (p, format!("{what} (inode of {})", first[&ino]))).collect()
    }
}

fn walk(root: &Path, rel: &str, out: &mut BTreeMap<String, (String, u64)>) {
    let dir = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    for name in names {
        let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        let full = root.join(&path);
        let md = std::fs::symlink_metadata(&full).unwrap();
        let perm = md.permissions().mode() & 0o7777;
        let what = if md.is_dir() {
            format!("dir {perm:o}")
        } else if md.file_type().is_symlink() {
            format!("symlink to {}", std::fs::read_link(&full).unwrap().display())
        } else {
            let x = xattr_of(&full);
            format!("file {perm:o} {:?}{x}", String::from_utf8_lossy(&std::fs::read(&full).unwrap()))
        };
        out.insert(path.clone(), (what, md.ino()));
        if md.is_dir() {
            walk(root, &path, out);
        }
    }
}

/// The `user.k` extended attribute, if any.
fn xattr_of(path: &Path) -> String {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated; `buf` is valid for its length.
    let n = unsafe { libc::getxattr(p.as_ptr(), c"user.k".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        String::new()
    } else {
        format!(" user.k={}", String::from_utf8_lossy(&buf[..n as usize]))
    }
}

fn lookup(b: &dyn Backend, dir: &FileHandle, name: &str) -> FileHandle {
    b.lookup(&root(), dir, name.as_bytes()).unwrap().handle
}

fn create(b: &dyn Backend, dir: &FileHandle, name: &str, m: u32) -> FileHandle {
    b.create(&root(), dir, name.as_bytes(), &CreateMode::Guarded(mode(m))).unwrap().handle
}

fn write(b: &dyn Backend, fh: &FileHandle, offset: u64, data: &str) {
    let r = b.write(&root(), fh, offset, data.as_bytes(), StableHow::Unstable).unwrap();
    assert_eq!(r.committed, StableHow::FileSync);
}

fn clean(r: &Replay) {
    assert!(!r.fresh && r.failed == 0 && !r.damaged, "{r:?}");
}

/// All changes reached the file system before the crash: replay changes nothing, and every
/// handle still names its object.
#[test]
fn replay_leaves_alone_what_the_file_system_has() {
    let s = Setup::new();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    let d = j.mkdir(&root(), &top, b"d", &mode(0o750)).unwrap().handle;
    let f = create(&j, &d, "f", 0o640);
    write(&j, &f, 0, "hello");
    j.symlink(&root(), &d, b"s", b"../f", &SetAttr::default()).unwrap();
    j.link(&root(), &f, &top, b"l").unwrap();
    j.rename(&root(), &top, b"l", &top, b"r").unwrap();
    let g = create(&j, &top, "g", 0o600);
    j.remove(&root(), &top, b"g").unwrap();
    j.mkdir(&root(), &top, b"e", &mode(0o700)).unwrap();
    j.rmdir(&root(), &top, b"e").unwrap();
    j.setattr(&root(), &f, &mode(0o604), None).unwrap();
    j.setxattr(&root(), &f, b"k", b"v", XattrSet::Either).unwrap();
    let before = s.tree();
    drop(j);
    let b = s.backend();
    let (j, r) = s.open(b.clone());
    clean(&r);
    assert_eq!(r.remade, 0, "{r:?}");
    assert_eq!(s.tree(), before);
    assert!(
        j.getattr(&f).is_ok() && j.getattr(&d).is_ok(),
        "handles survive a replay of what the file system has"
    );
    assert_eq!(j.getattr(&g).unwrap_err(), FsError::Stale);
}

/// The file system lost a file and a directory the clients were told were made: replay makes
/// them again, with their names, contents and attributes, and the later changes to them.
#[test]
fn what_a_crash_took_back_is_made_again() {
    let s = Setup::new();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    let d = j.mkdir(&root(), &top, b"d", &mode(0o750)).unwrap().handle;
    let g = create(&j, &d, "g", 0o600);
    write(&j, &g, 0, "in d");
    let f = create(&j, &top, "f", 0o640);
    write(&j, &f, 0, "hello");
    write(&j, &f, 5, " world");
    j.setattr(&root(), &f, &mode(0o604), None).unwrap();
    j.setxattr(&root(), &f, b"k", b"v", XattrSet::Either).unwrap();
    j.link(&root(), &f, &d, b"f2").unwrap();
    j.symlink(&root(), &d, b"s", b"../f", &SetAttr::default()).unwrap();
    let want = s.tree();
    drop(j);
    // The file system kept none of it.
    std::fs::remove_dir_all(s.path("d")).unwrap();
    std::fs::remove_file(s.path("f")).unwrap();
    let (j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(r.remade, 4, "f, d, d/g and d/s were made again: {r:?}");
    assert_eq!(s.tree(), want);
    assert_eq!(j.getattr(&f).unwrap_err(), FsError::Stale, "an object made again has a new handle");
}

/// A rename the file system lost is done; one it has is not done twice.
#[test]
fn a_rename_is_done_once() {
    let s = Setup::new();
    std::fs::write(s.path("a"), "a").unwrap();
    std::fs::write(s.path("keep"), "keep").unwrap();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    j.rename(&root(), &top, b"a", &top, b"b").unwrap();
    let want = s.tree();
    drop(j);
    let (j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want, "the file system had the rename");
    drop(j);
    // Once more, with the rename undone behind the journal's back: the log still holds it
    // (the journal above was dropped without a checkpoint, then replayed into a new lap).
    let (j, _) = s.open(s.backend());
    j.rename(&root(), &top, b"b", &top, b"c").unwrap();
    let want = s.tree();
    drop(j);
    std::fs::rename(s.path("c"), s.path("b")).unwrap();
    let (_j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want, "the file system lost the rename");
}

/// A remove the file system lost is done (the file kept by another link, as a lost remove
/// leaves it); a remove of what is gone does nothing.
#[test]
fn a_remove_is_done_once() {
    let s = Setup::new();
    std::fs::write(s.path("x"), "x").unwrap();
    std::fs::hard_link(s.path("x"), s.path("y")).unwrap();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    j.remove(&root(), &top, b"x").unwrap();
    let want = s.tree();
    drop(j);
    std::fs::hard_link(s.path("y"), s.path("x")).unwrap();
    let (j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want);
    drop(j);
    let (_j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want, "nothing left to replay");
}

/// A name linked and then renamed away, the file's first name removed: all in the file
/// system, the replay must not bring the link's first name back (it re-linked it when it
/// judged record by record).
#[test]
fn a_link_renamed_away_stays_away() {
    let s = Setup::new();
    std::fs::write(s.path("f"), "f").unwrap();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    let f = lookup(&j, &top, "f");
    j.link(&root(), &f, &top, b"l").unwrap();
    j.rename(&root(), &top, b"l", &top, b"r").unwrap();
    j.remove(&root(), &top, b"f").unwrap();
    let want = s.tree();
    drop(j);
    let (_j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want);
}

/// A mail server's delivery: a new file renamed over the old one. The file system lost the
/// rename (the old file is kept by another link): replay replaces it.
#[test]
fn a_rename_over_a_file_replaces_it() {
    let s = Setup::new();
    std::fs::write(s.path("t"), "old").unwrap();
    std::fs::hard_link(s.path("t"), s.path("t2")).unwrap();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    let tmp = create(&j, &top, "tmp", 0o600);
    write(&j, &tmp, 0, "new");
    j.rename(&root(), &top, b"tmp", &top, b"t").unwrap();
    let want = s.tree();
    drop(j);
    std::fs::rename(s.path("t"), s.path("tmp")).unwrap();
    std::fs::hard_link(s.path("t2"), s.path("t")).unwrap();
    let (_j, r) = s.open(s.backend());
    clean(&r);
    assert_eq!(s.tree(), want);
    assert_eq!(std::fs::read(s.path("t2")).unwrap(), b"old");
}

// ----- a replay interrupted by another crash -------------------------------------------------

/// The local backend, crashing (a panic) at its `n`th change: whatever it did before stays.
struct CrashAt {
    inner: Arc<LocalBackend>,
    left: AtomicI64,
}

impl CrashAt {
    fn change(&self) {
        if self.left.fetch_sub(1, Ordering::SeqCst) == 0 {
            panic!("crash during replay");
        }
    }
}

impl Backend for CrashAt {
    fn root(&self) -> FileHandle {
        self.inner.root()
    }
    fn getattr(&self, fh: &FileHandle) -> FsResult<Attr> {
        self.inner.getattr(fh)
    }
    fn setattr(&self, c: &Credentials, fh: &FileHandle, s: &SetAttr, g: Option<Timestamp>) -> FsResult<Wcc> {
        self.change();
        self.inner.setattr(c, fh, s, g)
    }
    fn lookup(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Lookup> {
        self.inner.lookup(c, d, n)
    }
    fn access(&self, c: &Credentials, fh: &FileHandle, w: u32) -> FsResult<(u32, Attr)> {
        self.inner.access(c, fh, w)
    }
    fn readlink(&self, c: &Credentials, fh: &FileHandle) -> FsResult<(Bytes, Attr)> {
        self.inner.readlink(c, fh)
    }
    fn read(&self, c: &Credentials, fh: &FileHandle, o: u64, n: u32) -> FsResult<ReadResult> {
        self.inner.read(c, fh, o, n)
    }
    fn write(
        &self,
        c: &Credentials,
        fh: &FileHandle,
        o: u64,
        d: &[u8],
        s: StableHow,
    ) -> FsResult<WriteResult> {
        self.change();
        self.inner.write(c, fh, o, d, s)
    }
    fn create(&self, c: &Credentials, d: &FileHandle, n: &[u8], h: &CreateMode) -> FsResult<Created> {
        self.change();
        self.inner.create(c, d, n, h)
    }
    fn mkdir(&self, c: &Credentials, d: &FileHandle, n: &[u8], s: &SetAttr) -> FsResult<Created> {
        self.change();
        self.inner.mkdir(c, d, n, s)
    }
    fn symlink(&self, c: &Credentials, d: &FileHandle, n: &[u8], t: &[u8], s: &SetAttr) -> FsResult<Created> {
        self.change();
        self.inner.symlink(c, d, n, t, s)
    }
    fn mknod(
        &self,
        c: &Credentials,
        d: &FileHandle,
        n: &[u8],
        k: NodeKind,
        s: &SetAttr,
    ) -> FsResult<Created> {
        self.change();
        self.inner.mknod(c, d, n, k, s)
    }
    fn remove(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Wcc> {
        self.change();
        self.inner.remove(c, d, n)
    }
    fn rmdir(&self, c: &Credentials, d: &FileHandle, n: &[u8]) -> FsResult<Wcc> {
        self.change();
        self.inner.rmdir(c, d, n)
    }
    fn rename(
        &self,
        c: &Credentials,
        a: &FileHandle,
        an: &[u8],
        b: &FileHandle,
        bn: &[u8],
    ) -> FsResult<(Wcc, Wcc)> {
        self.change();
        self.inner.rename(c, a, an, b, bn)
    }
    fn link(
        &self,
        c: &Credentials,
        fh: &FileHandle,
        d: &FileHandle,
        n: &[u8],
    ) -> FsResult<(Option<Attr>, Wcc)> {
        self.change();
        self.inner.link(c, fh, d, n)
    }
    fn readdir(
        &self,
        c: &Credentials,
        d: &FileHandle,
        cookie: u64,
        v: Verifier,
        plus: bool,
        sink: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> FsResult<DirInfo> {
        self.inner.readdir(c, d, cookie, v, plus, sink)
    }
    fn fsstat(&self, fh: &FileHandle) -> FsResult<FsStat> {
        self.inner.fsstat(fh)
    }
    fn properties(&self) -> FsProperties {
        self.inner.properties()
    }
    fn commit(&self, c: &Credentials, fh: &FileHandle, o: u64, n: u32) -> FsResult<(Wcc, Verifier)> {
        self.inner.commit(c, fh, o, n)
    }
    fn write_verifier(&self) -> Verifier {
        self.inner.write_verifier()
    }
    fn sync_all(&self) -> FsResult<()> {
        self.inner.sync_all()
    }
    fn setxattr(&self, c: &Credentials, fh: &FileHandle, n: &[u8], v: &[u8], how: XattrSet) -> FsResult<()> {
        self.change();
        self.inner.setxattr(c, fh, n, v, how)
    }
    fn removexattr(&self, c: &Credentials, fh: &FileHandle, n: &[u8]) -> FsResult<()> {
        self.change();
        self.inner.removexattr(c, fh, n)
    }
}

/// Changes through the journal, of which the file system keeps only what existed before
/// (everything else undone behind its back), so replay has much to do; returns the tree the
/// calls were answered with.
fn workload(s: &Setup) -> BTreeMap<String, String> {
    std::fs::create_dir(s.path("old")).unwrap();
    std::fs::write(s.path("old/o"), "old").unwrap();
    std::fs::write(s.path("t"), "t").unwrap();
    std::fs::hard_link(s.path("t"), s.path("t2")).unwrap();
    let (j, _) = s.open(s.backend());
    let top = j.root();
    let old = lookup(&j, &top, "old");
    let d = j.mkdir(&root(), &top, b"d", &mode(0o755)).unwrap().handle;
    let e = j.mkdir(&root(), &d, b"e", &mode(0o700)).unwrap().handle;
    let f = create(&j, &e, "f", 0o640);
    write(&j, &f, 0, "data of f");
    j.link(&root(), &f, &top, b"fl").unwrap();
    j.rename(&root(), &top, b"old", &d, b"moved").unwrap();
    j.rename(&root(), &old, b"o", &e, b"o2").unwrap();
    let tmp = create(&j, &top, "tmp", 0o600);
    write(&j, &tmp, 0, "new t");
    j.rename(&root(), &top, b"tmp", &top, b"t").unwrap();
    j.setattr(&root(), &f, &mode(0o604), None).unwrap();
    j.symlink(&root(), &e, b"s", b"f", &SetAttr::default()).unwrap();
    let gone = create(&j, &d, "gone", 0o600);
    write(&j, &gone, 0, "soon gone");
    j.remove(&root(), &d, b"gone").unwrap();
    let want = s.tree();
    drop(j);
    // The file system lost everything since the journal opened: what existed before is back
    // where it was (the same objects), everything made since is gone.
    std::fs::rename(s.path("d/moved"), s.path("old")).unwrap();
    std::fs::rename(s.path("d/e/o2"), s.path("old/o")).unwrap();
    std::fs::remove_dir_all(s.path("d")).unwrap();
    std::fs::remove_file(s.path("fl")).unwrap();
    std::fs::remove_file(s.path("t")).unwrap();
    std::fs::hard_link(s.path("t2"), s.path("t")).unwrap();
    want
}

/// A replay interrupted after any number of its own changes, then run again, ends with the
/// tree the calls were answered with.
#[test]
fn a_replay_interrupted_anywhere_and_run_again_ends_the_same() {
    // How many changes a whole replay makes.
    let s = Setup::new();
    let want = workload(&s);
    let inode = |p: &str| std::fs::symlink_metadata(s.path(p)).unwrap().ino();
    let (old, o) = (inode("old"), inode("old/o"));
    let counting = Arc::new(CrashAt { inner: s.backend(), left: AtomicI64::new(i64::MAX) });
    let (_j, r) = s.open(counting.clone());
    clean(&r);
    assert_eq!(s.tree(), want);
    let changes = i64::MAX - counting.left.load(Ordering::SeqCst);
    assert!(changes > 10, "the replay made only {changes} changes");
    // The objects that existed before the log were moved, never made again.
    assert_eq!((inode("d/moved"), inode("d/e/o2")), (old, o));
    for n in 0..changes {
        let s = Setup::new();
        let want = workload(&s);
        let crashing = Arc::new(CrashAt { inner: s.backend(), left: AtomicI64::new(n) });
        let crashed = std::panic::catch_unwind(AssertUnwindSafe(|| s.open(crashing.clone())));
        assert!(crashed.is_err(), "change {n} of {changes}: the replay should have crashed");
        let (_j, r) = s.open(s.backend());
        clean(&r);
        assert_eq!(s.tree(), want, "replay interrupted at its change {n} of {changes}, then run again");
    }
}
