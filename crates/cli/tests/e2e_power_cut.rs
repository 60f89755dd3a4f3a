//! Power cuts: every change a client had a reply for is on the disk a power cut leaves.
//!
//! The export is an ext4 file system on a loop device backed by an image file. Four clients
//! (tasks, each in its own directory; two share an NFSv3 connection, two an NFSv4.1 session,
//! whose COMPOUNDs the journal makes durable once each, before the reply) create files, directories, symlinks and
//! hard links, write (FILE_SYNC), chmod, truncate, rename and remove through the server, each
//! recording the calls it had a reply for. After a random number of replies the server is frozen
//! with SIGSTOP and, once the loop device has finished the writes it had started, the image is
//! copied: the copy is the disk as it stood at that instant. The server is then killed, the copy
//! checked with `e2fsck` (which first replays ext4's own journal, as mounting after a power cut
//! does), mounted where the export was and, with `--journal`, served again so the intent journal
//! is replayed. Every acknowledged change must be there; of a client's one call without a reply,
//! either outcome is accepted.
//!
//! # Why the copy is what a power cut leaves
//! A frozen server submits nothing more; what the kernel still had in flight (a journal commit an
//! `fsync` started) completes, and the copy waits for the device to go quiet
//! (`/sys/block/loopN/stat`: no request in flight, the write count steady) and checks the count
//! did not move while it copied. The image lives on tmpfs, where the loop device's completed
//! writes are exactly the file's contents (on a disk-backed image, `losetup --direct-io=on` gives
//! the same: the writes bypass the backing file's page cache), so the copy holds every write the
//! "disk" acknowledged and nothing the kernel had only in memory: ext4's running transaction, dirty
//! pages, and whatever the server had not written. ext4 is mounted with `commit=600` so that its
//! own timer commits nothing between the freeze and the copy (the default 5 s interval only
//! shortens the window in which a change is lost; it closes none). What this does not model: a
//! disk whose volatile cache loses or reorders writes it completed but was not told to flush;
//! ext4's and the journal's flushes (`fsync`, `O_DSYNC`) are what make those safe, and they are
//! issued, but no write is ever lost here for want of one.
//!
//! `EAGERNFS_POWER_CUT_ROUNDS` (default 20 per test, about 10 s) and `EAGERNFS_POWER_CUT_SEED` (default: from
//! the clock, printed; a failure prints the seed of its round) — `scripts/power-cut.sh --rounds
//! 100` runs the long series. Needs root, loop devices, `mkfs.ext4` and `e2fsck`; skips (saying
//! why) without them unless `EAGERNFS_REQUIRE_LOOP=1`.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use eagernfs_client::{AnyClient, NfsOps, NfsUrl, NfsVersion};
use eagernfs_proto::nfs3::{Createhow3, NfsFh3, Sattr3, StableHow};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Clients writing at once, each in a directory of its own.
const WORKERS: usize = 4;
/// Calls one client makes at most in a round (it is frozen long before).
const OPS_MAX: usize = 20_000;
/// Size of the ext4 image.
const IMAGE_BYTES: u64 = 128 << 20;
/// How long the device may take to finish what it had started after the freeze.
const QUIET_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn acknowledged_changes_survive_a_power_cut() {
    power_cuts("acknowledged_changes_survive_a_power_cut", false);
}

#[test]
fn acknowledged_changes_survive_a_power_cut_with_the_journal() {
    power_cuts("acknowledged_changes_survive_a_power_cut_with_the_journal", true);
}

// ----- the model of what clients were told ------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Inode {
    kind: Kind,
    mode: u32,
    /// The handle the server gave (absent for a create whose reply never came).
    fh: Option<NfsFh3>,
}

/// One client's directory as its replies describe it: paths relative to it, and the objects
/// they name (hard links share one).
#[derive(Clone, Debug, Default)]
struct Model {
    inodes: HashMap<u64, Inode>,
    names: BTreeMap<String, u64>,
    next_inode: u64,
    next_name: u64,
}

/// A call, as the model applies it.
#[derive(Clone)]
enum Op {
    Create { path: String, mode: u32 },
    Mkdir { path: String, mode: u32 },
    Symlink { path: String, target: Vec<u8> },
    Write { path: String, offset: u64, data: Vec<u8> },
    Chmod { path: String, mode: u32 },
    Truncate { path: String, size: u64 },
    Rename { from: String, to: String },
    Remove { path: String },
    Rmdir { path: String },
    Link { from: String, to: String },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Create { path, mode } => write!(f, "create {path} {mode:o}"),
            Op::Mkdir { path, mode } => write!(f, "mkdir {path} {mode:o}"),
            Op::Symlink { path, target } => {
                write!(f, "symlink {path} -> {}", String::from_utf8_lossy(target))
            }
            Op::Write { path, offset, data } => write!(f, "write {path} {} bytes at {offset}", data.len()),
            Op::Chmod { path, mode } => write!(f, "chmod {path} {mode:o}"),
            Op::Truncate { path, size } => write!(f, "truncate {path} {size}"),
            Op::Rename { from, to } => write!(f, "rename {from} {to}"),
            Op::Remove { path } => write!(f, "remove {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Link { from, to } => write!(f, "link {from} {to}"),
        }
    }
}

fn parent_and_name(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

impl Model {
    fn fresh_name(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    fn paths_where(&self, f: impl Fn(&Kind) -> bool) -> Vec<String> {
        self.names.iter().filter(|(_, i)| f(&self.inodes[*i].kind)).map(|(p, _)| p.clone()).collect()
    }

    fn dirs(&self) -> Vec<String> {
        let mut d = vec![String::new()];
        d.extend(self.paths_where(|k| *k == Kind::Dir));
        d
    }

    fn is_empty_dir(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        !self.names.keys().any(|p| p.starts_with(&prefix))
    }

    /// A random call that can succeed in this state.
    fn pick(&mut self, rng: &mut StdRng) -> Op {
        loop {
            let dirs = self.dirs();
            let files = self.paths_where(|k| matches!(k, Kind::File(_)));
            let dir = dirs[rng.gen_range(0..dirs.len())].clone();
            let join = |d: &str, n: String| if d.is_empty() { n } else { format!("{d}/{n}") };
            match rng.gen_range(0..100) {
                0..=19 => {
                    let path = join(&dir, self.fresh_name("f"));
                    return Op::Create { path, mode: [0o644, 0o600, 0o640, 0o664][rng.gen_range(0..4)] };
                }
                20..=25 if dirs.len() < 12 => {
                    let path = join(&dir, self.fresh_name("d"));
                    return Op::Mkdir { path, mode: [0o755, 0o700, 0o775][rng.gen_range(0..3)] };
                }
                26..=30 => {
                    let path = join(&dir, self.fresh_name("s"));
                    let target = format!("target-{}", rng.gen::<u32>()).into_bytes();
                    return Op::Symlink { path, target };
                }
                31..=45 if !files.is_empty() => {
                    let path = files[rng.gen_range(0..files.len())].clone();
                    let offset = rng.gen_range(0..64 * 1024);
                    let len = rng.gen_range(1..8192);
                    let seed = rng.gen::<u64>();
                    return Op::Write { path, offset, data: pattern_bytes(seed, offset, len) };
                }
                46..=57 => {
                    let all: Vec<String> = self.paths_where(|k| !matches!(k, Kind::Symlink(_)));
                    if all.is_empty() {
                        continue;
                    }
                    let path = all[rng.gen_range(0..all.len())].clone();
                    let mode = match self.inodes[&self.names[&path]].kind {
                        // The client keeps working in its directories.
                        Kind::Dir => [0o755, 0o700, 0o750, 0o1777][rng.gen_range(0..4)],
                        _ => [0o600, 0o644, 0o400, 0o4755, 0o2711, 0o666][rng.gen_range(0..6)],
                    };
                    return Op::Chmod { path, mode };
                }
                58..=62 if !files.is_empty() => {
                    let path = files[rng.gen_range(0..files.len())].clone();
                    return Op::Truncate { path, size: rng.gen_range(0..80 * 1024) };
                }
                63..=77 => {
                    let all: Vec<String> = self.names.keys().cloned().collect();
                    if all.is_empty() {
                        continue;
                    }
                    let from = all[rng.gen_range(0..all.len())].clone();
                    let is_dir = self.inodes[&self.names[&from]].kind == Kind::Dir;
                    let to = if is_dir {
                        // A directory moves within its parent only (never into itself).
                        join(parent_and_name(&from).0, self.fresh_name("d"))
                    } else if rng.gen_bool(0.3) && files.len() > 1 {
                        // Over another file: the mail server's create-and-rename.
                        let to = files[rng.gen_range(0..files.len())].clone();
                        if to == from || self.names[&to] == self.names[&from] {
                            continue;
                        }
                        to
                    } else {
                        join(&dir, self.fresh_name("r"))
                    };
                    return Op::Rename { from, to };
                }
                78..=89 => {
                    let all = self.paths_where(|k| *k != Kind::Dir);
                    if all.is_empty() {
                        continue;
                    }
                    return Op::Remove { path: all[rng.gen_range(0..all.len())].clone() };
                }
                90..=93 => {
                    let empty: Vec<String> = self
                        .paths_where(|k| *k == Kind::Dir)
                        .into_iter()
                        .filter(|d| self.is_empty_dir(d))
                        .collect();
                    if empty.is_empty() {
                        continue;
                    }
                    return Op::Rmdir { path: empty[rng.gen_range(0..empty.len())].clone() };
                }
                94..=99 if !files.is_empty() => {
                    let from = files[rng.gen_range(0..files.len())].clone();
                    return Op::Link { from, to: join(&dir, self.fresh_name("l")) };
                }
                _ => continue,
            }
        }
    }

    fn apply(&mut self, op: &Op, fh: Option<NfsFh3>) {
        let add = |m: &mut Model, path: &str, kind: Kind, mode: u32| {
            m.next_inode += 1;
            m.inodes.insert(m.next_inode, Inode { kind, mode, fh: fh.clone() });
            m.names.insert(path.to_string(), m.next_inode);
        };
        match op {
            Op::Create { path, mode } => add(self, path, Kind::File(Vec::new()), *mode),
            Op::Mkdir { path, mode } => add(self, path, Kind::Dir, *mode),
            Op::Symlink { path, target } => add(self, path, Kind::Symlink(target.clone()), 0o777),
            Op::Write { path, offset, data } => {
                let ino = self.names[path];
                if let Some(Inode { kind: Kind::File(content), .. }) = self.inodes.get_mut(&ino) {
                    let end = *offset as usize + data.len();
                    if content.len() < end {
                        content.resize(end, 0);
                    }
                    content[*offset as usize..end].copy_from_slice(data);
                }
            }
            Op::Chmod { path, mode } => {
                let ino = self.names[path];
                self.inodes.get_mut(&ino).unwrap().mode = *mode;
            }
            Op::Truncate { path, size } => {
                let ino = self.names[path];
                if let Some(Inode { kind: Kind::File(content), .. }) = self.inodes.get_mut(&ino) {
                    content.resize(*size as usize, 0);
                }
            }
            Op::Rename { from, to } => {
                let ino = self.names.remove(from).unwrap();
                let prefix = format!("{from}/");
                let moved: Vec<(String, u64)> = self
                    .names
                    .iter()
                    .filter(|(p, _)| p.starts_with(&prefix))
                    .map(|(p, i)| (p.clone(), *i))
                    .collect();
                for (p, i) in moved {
                    self.names.remove(&p);
                    self.names.insert(format!("{to}/{}", &p[prefix.len()..]), i);
                }
                self.names.insert(to.clone(), ino);
            }
            Op::Remove { path } | Op::Rmdir { path } => {
                self.names.remove(path);
            }
            Op::Link { from, to } => {
                let ino = self.names[from];
                self.names.insert(to.clone(), ino);
            }
        }
    }

    fn fh_of(&self, root: &NfsFh3, path: &str) -> NfsFh3 {
        if path.is_empty() {
            return root.clone();
        }
        self.inodes[&self.names[path]].fh.clone().expect("an acknowledged object has a handle")
    }
}

/// A client's state: what its replies said, and the call it is waiting for.
#[derive(Clone, Debug, Default)]
struct Client {
    model: Model,
    in_flight: Option<Op>,
    /// Replies to calls in the client's directory.
    acked: u64,
    /// Its MKDIR had a reply.
    made_dir: bool,
    /// The last calls answered, for the report of a failure.
    recent: std::collections::VecDeque<Op>,
}

// ----- the client ------------------------------------------------------------------------------

/// Run one call; the handle of a new object on success.
async fn call(c: &AnyClient, root: &NfsFh3, m: &Model, op: &Op) -> Result<Option<NfsFh3>, String> {
    let cred = c.default_cred();
    let dir_and_name = |path: &str| {
        let (d, n) = parent_and_name(path);
        (m.fh_of(root, d), n.as_bytes().to_vec())
    };
    let mode = |mode: u32| Sattr3 { mode: Some(mode), ..Default::default() };
    let e = |e: eagernfs_client::NfsError| format!("{op:?}: {e}");
    match op {
        Op::Create { path, mode: md } => {
            let (d, n) = dir_and_name(path);
            let r = c.create(&cred, &d, &n, Createhow3::Guarded(mode(*md))).await.map_err(e)?;
            Ok(Some(r.obj.ok_or("CREATE without a handle")?))
        }
        Op::Mkdir { path, mode: md } => {
            let (d, n) = dir_and_name(path);
            let r = c.mkdir(&cred, &d, &n, mode(*md)).await.map_err(e)?;
            Ok(Some(r.obj.ok_or("MKDIR without a handle")?))
        }
        Op::Symlink { path, target } => {
            let (d, n) = dir_and_name(path);
            let r = c.symlink(&cred, &d, &n, target, Sattr3::default()).await.map_err(e)?;
            Ok(Some(r.obj.ok_or("SYMLINK without a handle")?))
        }
        Op::Write { path, offset, data } => {
            let fh = m.fh_of(root, path);
            let r = c
                .write(&cred, &fh, *offset, Bytes::from(data.clone()), StableHow::FileSync)
                .await
                .map_err(e)?;
            if r.count as usize != data.len() || r.committed != StableHow::FileSync {
                return Err(format!("{op:?}: short or unstable reply {r:?}"));
            }
            Ok(None)
        }
        Op::Chmod { path, mode: md } => {
            c.setattr(&cred, &m.fh_of(root, path), mode(*md), None).await.map_err(e)?;
            Ok(None)
        }
        Op::Truncate { path, size } => {
            let set = Sattr3 { size: Some(*size), ..Default::default() };
            c.setattr(&cred, &m.fh_of(root, path), set, None).await.map_err(e)?;
            Ok(None)
        }
        Op::Rename { from, to } => {
            let (fd, fname) = dir_and_name(from);
            let (td, tname) = dir_and_name(to);
            c.rename(&cred, &fd, &fname, &td, &tname).await.map_err(e)?;
            Ok(None)
        }
        Op::Remove { path } => {
            let (d, n) = dir_and_name(path);
            c.remove(&cred, &d, &n).await.map_err(e)?;
            Ok(None)
        }
        Op::Rmdir { path } => {
            let (d, n) = dir_and_name(path);
            c.rmdir(&cred, &d, &n).await.map_err(e)?;
            Ok(None)
        }
        Op::Link { from, to } => {
            let (d, n) = dir_and_name(to);
            c.link(&cred, &m.fh_of(root, from), &d, &n).await.map_err(e)?;
            Ok(None)
        }
    }
}

/// One client: make its directory, then call until frozen (or `OPS_MAX`), recording each reply.
async fn client(
    c: Arc<AnyClient>,
    worker: usize,
    seed: u64,
    state: Arc<Mutex<Client>>,
    acked: Arc<AtomicU64>,
    frozen: Arc<std::sync::atomic::AtomicBool>,
) {
    let cred = c.default_cred();
    let export = c.root();
    let name = format!("w{worker}");
    let dir = c
        .mkdir(&cred, &export, name.as_bytes(), Sattr3 { mode: Some(0o755), ..Default::default() })
        .await
        .expect("mkdir of the client's directory")
        .obj
        .expect("MKDIR without a handle");
    state.lock().unwrap().made_dir = true;
    let mut rng = StdRng::seed_from_u64(seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    for _ in 0..OPS_MAX {
        let (op, model) = {
            let mut s = state.lock().unwrap();
            let op = s.model.pick(&mut rng);
            s.in_flight = Some(op.clone());
            (op, s.model.clone())
        };
        let made = match call(&c, &dir, &model, &op).await {
            Ok(made) => made,
            // The test took the client down after the cut.
            Err(_) if frozen.load(Ordering::SeqCst) => return,
            Err(e) => panic!("client {worker}: a call failed: {e}"),
        };
        let mut s = state.lock().unwrap();
        s.model.apply(&op, made);
        s.in_flight = None;
        if s.recent.len() == 40 {
            s.recent.pop_front();
        }
        s.recent.push_back(op);
        s.acked += 1;
        acked.fetch_add(1, Ordering::SeqCst);
    }
}

// ----- the disk -------------------------------------------------------------------------------

fn run(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn run_ok(cmd: &str, args: &[&str]) -> String {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A loop device over an image file, mounted; unmounted and detached when dropped.
struct Disk {
    loop_dev: String,
    mount: PathBuf,
}

impl Disk {
    fn attach(image: &Path, mount: &Path) -> Disk {
        // Where the backing file allows it, the loop device writes past its page cache.
        let dio = if on_tmpfs(image) { "--direct-io=off" } else { "--direct-io=on" };
        let loop_dev = run_ok("losetup", &["--find", "--show", dio, image.to_str().unwrap()]);
        run_ok("mount", &["-o", "commit=600", &loop_dev, mount.to_str().unwrap()]);
        Disk { loop_dev, mount: mount.to_path_buf() }
    }

    /// `/sys/block/loopN/stat`: (writes completed, requests in flight).
    fn io_counts(&self) -> (u64, u64) {
        let name = Path::new(&self.loop_dev).file_name().unwrap().to_str().unwrap();
        let stat = fs::read_to_string(format!("/sys/block/{name}/stat")).expect("loop device stat");
        let f: Vec<u64> = stat.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
        (f[4], f[8])
    }

    /// Wait until the device has finished what it started and nothing new comes, then copy
    /// `image` to `to`; again if a write landed while copying.
    fn copy_when_quiet(&self, image: &Path, to: &Path) {
        let deadline = Instant::now() + QUIET_TIMEOUT;
        loop {
            let mut before = self.io_counts();
            // Quiet: nothing in flight and no write completed over 50 ms.
            loop {
                std::thread::sleep(Duration::from_millis(50));
                let now = self.io_counts();
                if now == before && now.1 == 0 {
                    break;
                }
                assert!(Instant::now() < deadline, "the loop device never went quiet: {now:?}");
                before = now;
            }
            run_ok("cp", &["--sparse=always", image.to_str().unwrap(), to.to_str().unwrap()]);
            if self.io_counts() == before {
                return;
            }
            assert!(Instant::now() < deadline, "the loop device kept writing while its image was copied");
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = run("umount", &[self.mount.to_str().unwrap()]);
        let _ = run("losetup", &["-d", &self.loop_dev]);
    }
}

fn on_tmpfs(path: &Path) -> bool {
    let dir = path.parent().unwrap_or(path);
    run("stat", &["-f", "-c", "%T", dir.to_str().unwrap()]).stdout.starts_with(b"tmpfs")
}

fn can_run_here() -> Result<(), String> {
    if !is_root() {
        return Err("needs root (loop devices, mount)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err("no /dev/loop-control".into());
    }
    for tool in ["losetup", "mkfs.ext4", "e2fsck", "mount", "umount"] {
        if run("sh", &["-c", &format!("command -v {tool}")]).stdout.is_empty() {
            return Err(format!("{tool} is not installed"));
        }
    }
    Ok(())
}

// ----- what is on the disk -----------------------------------------------------------------------

#[derive(Debug, PartialEq, Eq)]
struct Found {
    kind: Kind,
    mode: u32,
    ino: u64,
}

fn walk(root: &Path, rel: &str, out: &mut BTreeMap<String, Found>) {
    let dir = if rel.is_empty() { root.to_path_buf() } else { root.join(rel) };
    let Ok(entries) = fs::read_dir(&dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        let full = root.join(&path);
        let Ok(md) = fs::symlink_metadata(&full) else { continue };
        let kind = if md.file_type().is_dir() {
            Kind::Dir
        } else if md.file_type().is_symlink() {
            Kind::Symlink(fs::read_link(&full).unwrap().into_os_string().into_encoded_bytes())
        } else {
            Kind::File(fs::read(&full).unwrap_or_default())
        };
        let is_dir = kind == Kind::Dir;
        out.insert(path.clone(), Found { kind, mode: md.permissions().mode() & 0o7777, ino: md.ino() });
        if is_dir {
            walk(root, &path, out);
        }
    }
}

/// How `found` differs from `want`. `torn`: the path and previous content of a file whose
/// FILE_SYNC write had no reply: any mix of old and new bytes is accepted for it.
fn differences(want: &Model, found: &BTreeMap<String, Found>, torn: Option<(&str, &[u8])>) -> Vec<String> {
    let mut out = Vec::new();
    let mut ino_of: HashMap<u64, u64> = HashMap::new();
    for (path, i) in &want.names {
        let w = &want.inodes[i];
        let Some(f) = found.get(path) else {
            out.push(format!("{path}: missing ({:?})", short(&w.kind)));
            continue;
        };
        let content_ok = match (&w.kind, &f.kind, torn) {
            (Kind::File(new), Kind::File(got), Some((p, old))) if p == path => {
                (got.len() == new.len() || got.len() == old.len())
                    && got.iter().enumerate().all(|(k, b)| {
                        *b == new.get(k).copied().unwrap_or(0) || *b == old.get(k).copied().unwrap_or(0)
                    })
            }
            (a, b, _) => a == b,
        };
        if !content_ok {
            out.push(format!("{path}: {:?} on disk, {:?} acknowledged", short(&f.kind), short(&w.kind)));
        }
        if !matches!(w.kind, Kind::Symlink(_)) && f.mode != w.mode {
            out.push(format!("{path}: mode {:o} on disk, {:o} acknowledged", f.mode, w.mode));
        }
        if *ino_of.entry(*i).or_insert(f.ino) != f.ino {
            out.push(format!("{path}: not the same file as its other hard link"));
        }
    }
    for path in found.keys() {
        if !want.names.contains_key(path) {
            out.push(format!("{path}: on disk, removed or never made as far as the client knows"));
        }
    }
    out
}

fn short(k: &Kind) -> String {
    match k {
        Kind::File(d) => format!("file of {} bytes", d.len()),
        Kind::Dir => "directory".into(),
        Kind::Symlink(t) => format!("symlink to {}", String::from_utf8_lossy(t)),
    }
}

/// Check one client's directory: it must match the acknowledged state, or that state with the
/// call in flight applied. Returns the differences from the acknowledged state (none: passed).
fn check_client(export: &Path, worker: usize, c: &Client) -> Vec<String> {
    let missing = check_client_state(export, worker, c);
    if !missing.is_empty() {
        let recent: Vec<String> = c.recent.iter().map(|op| format!("{op:?}")).collect();
        eprintln!(
            "client {worker}: {}\n  in flight: {:?}; the calls answered before, oldest first:\n  {}",
            missing.join("; "),
            c.in_flight,
            recent.join("\n  ")
        );
    }
    missing
}

fn check_client_state(export: &Path, worker: usize, c: &Client) -> Vec<String> {
    let mut found = BTreeMap::new();
    let dir = export.join(format!("w{worker}"));
    if !dir.exists() {
        // Either its MKDIR had no reply, or it is lost.
        return if c.made_dir { vec!["the client's directory is missing".to_string()] } else { Vec::new() };
    }
    walk(&dir, "", &mut found);
    let acked = differences(&c.model, &found, None);
    if acked.is_empty() {
        return acked;
    }
    if let Some(op) = &c.in_flight {
        let mut with = c.model.clone();
        let torn = match op {
            Op::Write { path, .. } => match &c.model.inodes[&c.model.names[path]].kind {
                Kind::File(old) => Some((path.clone(), old.clone())),
                _ => None,
            },
            _ => None,
        };
        with.apply(op, None);
        if differences(&with, &found, torn.as_ref().map(|(p, o)| (p.as_str(), o.as_slice()))).is_empty() {
            return Vec::new();
        }
    }
    acked
}

// ----- rounds -----------------------------------------------------------------------------------

fn power_cuts(test: &str, journal: bool) {
    if let Err(why) = can_run_here() {
        if std::env::var("EAGERNFS_REQUIRE_LOOP").is_ok_and(|v| v == "1") {
            panic!("{test}: EAGERNFS_REQUIRE_LOOP=1 but {why}");
        }
        skip(test, &why);
        return;
    }
    let rounds: u64 =
        std::env::var("EAGERNFS_POWER_CUT_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let first_seed: u64 =
        std::env::var("EAGERNFS_POWER_CUT_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
                % 1_000_000_007
        });
    eprintln!(
        "{test}: {rounds} rounds from seed {first_seed} (EAGERNFS_POWER_CUT_SEED={first_seed} repeats them)"
    );
    let base = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let scratch = tempfile::Builder::new().prefix("eagernfs-power-cut-").tempdir_in(base).unwrap();
    let mount = tempfile::Builder::new().prefix("eagernfs-power-cut-mnt-").tempdir().unwrap();
    let mut missing_total = 0;
    let mut failures = Vec::new();
    let mut replies = 0;
    for round in 0..rounds {
        let seed = first_seed.wrapping_add(round);
        let (acked, missing) = one_round(scratch.path(), mount.path(), journal, seed);
        replies += acked;
        eprintln!("{test}: round {round} (seed {seed}): frozen after {acked} replies; {} acknowledged changes missing", missing.len());
        if !missing.is_empty() {
            missing_total += missing.len();
            failures.push(format!(
                "seed {seed}:\n  {}",
                missing.iter().take(12).cloned().collect::<Vec<_>>().join("\n  ")
            ));
        }
    }
    eprintln!("{test}: {rounds} rounds, {replies} replies, {missing_total} acknowledged changes missing");
    assert!(
        failures.is_empty(),
        "{test}: {missing_total} acknowledged changes missing after power cuts in {} of {rounds} rounds \
         (EAGERNFS_POWER_CUT_SEED=N EAGERNFS_POWER_CUT_ROUNDS=1 repeats one):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One power cut; returns the replies clients had and the differences found.
fn one_round(scratch: &Path, mount: &Path, journal: bool, seed: u64) -> (u64, Vec<String>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let image = scratch.join("disk.img");
    let copy = scratch.join("cut.img");
    let _ = fs::remove_file(&image);
    let _ = fs::remove_file(&copy);
    fs::File::create(&image).unwrap().set_len(IMAGE_BYTES).unwrap();
    // Everything initialised now: no lazy-init thread writing behind the test's back.
    run_ok(
        "mkfs.ext4",
        &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image.to_str().unwrap()],
    );
    let disk = Disk::attach(&image, mount);
    let export = mount.join("export");
    fs::create_dir(&export).unwrap();
    fs::set_permissions(&export, fs::Permissions::from_mode(0o777)).unwrap();
    let journal_path = mount.join("journal");
    let journal_arg = journal_path.to_str().unwrap().to_string();
    let mut args = vec!["-o", "rw,no_root_squash"];
    if journal {
        args.extend(["--journal", &journal_arg, "--journal-size", "16MiB"]);
    }
    let mut server = Server::eagernfs(&export, &args);
    if !journal {
        // ext4 with a journal: one commit per group of changes is what is under test.
        let log = server.log_tail(50);
        assert!(log.contains("one ext4 journal commit"), "seed {seed}: {log}");
    }

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let url: NfsUrl = server.url("").parse().expect("url");
    // Half the clients speak NFSv3 (a call per change), half NFSv4.1 (COMPOUNDs).
    let connect = |vers| {
        let mut url = url.clone();
        url.options.vers = Some(vers);
        let c = rt.block_on(AnyClient::connect_url(&url)).expect("mount");
        assert_eq!(c.version(), vers);
        Arc::new(c)
    };
    let conns = [connect(NfsVersion::V3), connect(NfsVersion::V41)];
    let acked = Arc::new(AtomicU64::new(0));
    let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let states: Vec<Arc<Mutex<Client>>> = (0..WORKERS).map(|_| Arc::default()).collect();
    let tasks: Vec<_> = states
        .iter()
        .enumerate()
        .map(|(w, s)| {
            rt.spawn(client(conns[w % 2].clone(), w, seed, s.clone(), acked.clone(), frozen.clone()))
        })
        .collect();
    // The moment of the cut: after a random number of replies.
    let cut_after = rng.gen_range(8..1500u64);
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.load(Ordering::SeqCst) < cut_after {
        assert!(
            Instant::now() < deadline,
            "seed {seed}: only {} replies in 120 s",
            acked.load(Ordering::SeqCst)
        );
        if let Some(t) = tasks.iter().find(|t| t.is_finished()) {
            let _ = t;
            panic!("seed {seed}: a client stopped before the cut (its panic is above)");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    frozen.store(true, Ordering::SeqCst);
    server.signal(libc::SIGSTOP);
    disk.copy_when_quiet(&image, &copy);
    // What the clients were told by now; a reply still on its way counts as no reply.
    let told: Vec<Client> = states.iter().map(|s| s.lock().unwrap().clone()).collect();
    server.kill();
    for t in &tasks {
        t.abort();
    }
    drop(conns);
    drop(rt);
    drop(disk);

    // ext4's journal is replayed by e2fsck, which then checks everything: 1 means it fixed
    // something (after a crash, the free-block and free-inode counts, which ext4 keeps only
    // approximately on disk); more is damage.
    let fsck = run("e2fsck", &["-fy", copy.to_str().unwrap()]);
    let code = fsck.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "seed {seed}: e2fsck exited {code}:\n{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    let disk = Disk::attach(&copy, mount);
    if journal {
        // The intent journal is replayed before the server answers; a clean stop then syncs.
        server.start_again();
        server.stop();
    }
    let mut missing = Vec::new();
    if journal {
        let log = server.log_tail(30);
        assert!(log.contains("journal"), "seed {seed}: {log}");
        if log.contains("could not be applied") || log.contains("damaged") {
            missing.push(format!("the replay failed:\n{log}"));
        }
    }
    for (w, c) in told.iter().enumerate() {
        missing.extend(check_client(&export, w, c).into_iter().map(|d| format!("w{w}/{d}")));
    }
    drop(server);
    drop(disk);
    let acked = told.iter().map(|c| c.acked).sum();
    (acked, missing)
}
