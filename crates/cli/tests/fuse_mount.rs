//! `eagernfs mount` end to end: a real FUSE mount of a real server, used
//! through ordinary system calls, checked against a model and against the
//! server's directory on disk.
//!
//! Needs root and /dev/fuse (CI has both); otherwise each test prints why
//! it skips. Layout:
//! - [`FuseMount`]: `eagernfs mount` (daemon mode: it returns when ready)
//!   and `eagernfs umount` on drop.
//! - the fsx-style model test ([`fsx`]) against eagernfs and ganesha;
//! - close-to-open between two mounts (and, to show the test can fail,
//!   stale data with `nocto`);
//! - namespace operations checked on disk;
//! - permissions decided by the server for a non-root caller, including
//!   supplementary groups;
//! - mount failures reported with a reason and exit status; foreground
//!   mode unmounting on SIGTERM.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------
// fsx: random operations against an in-memory reference copy.

/// SplitMix64: small, seedable, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// Files the model test works on at once.
const FSX_FILES: usize = 3;
/// Largest file: several 64 KiB cache chunks and several small wsizes.
const FSX_FILE_BYTES_MAX: u64 = 320 * 1024;
/// Largest single write/read/mmap range.
const FSX_OP_BYTES_MAX: u64 = 70 * 1024;
/// Operations kept for the failure report.
const FSX_LOG_LEN: usize = 30;

struct ModelFile {
    path: PathBuf,
    /// What the file must contain.
    data: Vec<u8>,
    /// An open read-write descriptor, reopened now and then (each close
    /// is a flush + COMMIT, each open a close-to-open revalidation).
    handle: Option<File>,
}

impl ModelFile {
    fn handle(&mut self) -> &File {
        if self.handle.is_none() {
            let f = OpenOptions::new().read(true).write(true).open(&self.path).unwrap();
            self.handle = Some(f);
        }
        self.handle.as_ref().unwrap()
    }
}

/// Mount options `vers` (a version, or nothing: the default) and `rest` together.
fn with_vers(vers: &str, rest: &str) -> String {
    [vers, rest].iter().filter(|o| !o.is_empty()).copied().collect::<Vec<_>>().join(",")
}

fn read_exact_at_eof(f: &File, off: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = f.read_at(&mut buf[got..], off + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

fn first_difference(a: &[u8], b: &[u8]) -> String {
    let at = a.iter().zip(b).position(|(x, y)| x != y);
    match at {
        Some(i) => format!("first difference at +{i}: got {:#04x}, want {:#04x}", a[i], b[i]),
        None => format!("lengths differ: got {}, want {}", a.len(), b.len()),
    }
}

/// Run up to `ops_max` random operations (or until `time_max`) on files
/// under `dir` (a FUSE mount), checking every read against the model.
/// At the end the files are closed and compared, through the mount and
/// on the server's disk (`server_dir`). Returns the operation count.
fn fsx(
    dir: &Path,
    server_dir: &Path,
    seed: u64,
    ops_max: usize,
    time_max: Duration,
) -> Result<usize, String> {
    let mut rng = Rng(seed);
    let mut files: Vec<ModelFile> = (0..FSX_FILES)
        .map(|i| {
            let path = dir.join(format!("fsx{i}"));
            File::create(&path).unwrap();
            ModelFile { path, data: Vec::new(), handle: None }
        })
        .collect();
    let mut log: Vec<String> = Vec::new();
    let started = Instant::now();
    let mut done = 0;
    let fail = |log: &[String], what: String| -> String {
        let tail = &log[log.len().saturating_sub(FSX_LOG_LEN)..];
        format!(
            "fsx seed {seed} (rerun with EAGERNFS_FSX_SEED={seed}): {what}\nlast operations:\n  {}",
            tail.join("\n  ")
        )
    };
    while done < ops_max && started.elapsed() < time_max {
        let which = rng.below(FSX_FILES as u64) as usize;
        let m = &mut files[which];
        let size = m.data.len() as u64;
        let op = rng.below(100);
        let name = format!("fsx{which}");
        match op {
            // write at a random offset, sometimes leaving a hole past EOF
            0..=24 => {
                let len = 1 + rng.below(FSX_OP_BYTES_MAX);
                let end_max = (size + 16 * 1024).min(FSX_FILE_BYTES_MAX);
                let off = rng.below(end_max.saturating_sub(len).max(1));
                let bytes = rng.bytes(len as usize);
                log.push(format!("{name}: write {off}+{len} (size {size})"));
                m.handle().write_all_at(&bytes, off).map_err(|e| fail(&log, format!("write: {e}")))?;
                let end = (off + len) as usize;
                if m.data.len() < end {
                    m.data.resize(end, 0);
                }
                m.data[off as usize..end].copy_from_slice(&bytes);
            }
            // read a random range and compare
            25..=44 => {
                let off = rng.below(size + 4096);
                let len = 1 + rng.below(FSX_OP_BYTES_MAX) as usize;
                log.push(format!("{name}: read {off}+{len} (size {size})"));
                let got =
                    read_exact_at_eof(m.handle(), off, len).map_err(|e| fail(&log, format!("read: {e}")))?;
                let from = (off as usize).min(m.data.len());
                let want = &m.data[from..(from + len).min(m.data.len())];
                if got != want {
                    return Err(fail(&log, format!("read {off}+{len}: {}", first_difference(&got, want))));
                }
            }
            // truncate (grow or shrink)
            45..=52 => {
                let new = rng.below(FSX_FILE_BYTES_MAX);
                log.push(format!("{name}: truncate {size} -> {new}"));
                m.handle().set_len(new).map_err(|e| fail(&log, format!("truncate: {e}")))?;
                m.data.resize(new as usize, 0);
            }
            // append through a separate O_APPEND descriptor, closed at once
            53..=60 => {
                let len = 1 + rng.below(FSX_OP_BYTES_MAX / 4);
                if size + len > FSX_FILE_BYTES_MAX {
                    continue;
                }
                let bytes = rng.bytes(len as usize);
                log.push(format!("{name}: append {len} at {size}"));
                let mut f = OpenOptions::new()
                    .append(true)
                    .open(&m.path)
                    .map_err(|e| fail(&log, format!("open O_APPEND: {e}")))?;
                f.write_all(&bytes).map_err(|e| fail(&log, format!("append: {e}")))?;
                drop(f);
                m.data.extend_from_slice(&bytes);
            }
            // mmap read of the whole file
            61..=70 => {
                if size == 0 {
                    continue;
                }
                log.push(format!("{name}: mmap read (size {size})"));
                // SAFETY: only this test touches the file while mapped.
                let map = unsafe { memmap2::Mmap::map(m.handle()) }
                    .map_err(|e| fail(&log, format!("mmap: {e}")))?;
                if map[..] != m.data[..] {
                    return Err(fail(&log, format!("mmap read: {}", first_difference(&map, &m.data))));
                }
            }
            // mmap write inside the file, sometimes msync'd
            71..=80 => {
                if size == 0 {
                    continue;
                }
                let off = rng.below(size);
                let len = 1 + rng.below((size - off).min(FSX_OP_BYTES_MAX));
                let bytes = rng.bytes(len as usize);
                let sync = rng.below(2) == 0;
                log.push(format!("{name}: mmap write {off}+{len} msync={sync} (size {size})"));
                // SAFETY: only this test touches the file while mapped.
                let mut map = unsafe { memmap2::MmapMut::map_mut(m.handle()) }
                    .map_err(|e| fail(&log, format!("mmap: {e}")))?;
                map[off as usize..(off + len) as usize].copy_from_slice(&bytes);
                if sync {
                    map.flush().map_err(|e| fail(&log, format!("msync: {e}")))?;
                }
                drop(map);
                m.data[off as usize..(off + len) as usize].copy_from_slice(&bytes);
            }
            // close and reopen
            81..=88 => {
                log.push(format!("{name}: close+reopen"));
                m.handle = None;
            }
            // fsync
            89..=92 => {
                log.push(format!("{name}: fsync"));
                m.handle().sync_all().map_err(|e| fail(&log, format!("fsync: {e}")))?;
            }
            // size as fstat and stat see it
            _ => {
                log.push(format!("{name}: stat (size {size})"));
                let by_fd = m.handle().metadata().map_err(|e| fail(&log, format!("fstat: {e}")))?.len();
                let by_path = fs::metadata(&m.path).map_err(|e| fail(&log, format!("stat: {e}")))?.len();
                if by_fd != size || by_path != size {
                    return Err(fail(&log, format!("size: fstat {by_fd}, stat {by_path}, want {size}")));
                }
            }
        }
        done += 1;
    }
    // Closing writes everything back (close-to-open): after it, both the
    // mount and the server's disk must hold exactly the model.
    for (i, m) in files.iter_mut().enumerate() {
        if let Some(f) = m.handle.take() {
            f.sync_all().map_err(|e| fail(&log, format!("final fsync: {e}")))?;
        }
        let through = fs::read(&m.path).map_err(|e| fail(&log, format!("final read: {e}")))?;
        if through != m.data {
            return Err(fail(
                &log,
                format!("fsx{i} through the mount: {}", first_difference(&through, &m.data)),
            ));
        }
        let on_disk = fs::read(server_dir.join(format!("fsx{i}"))).unwrap();
        if on_disk != m.data {
            return Err(fail(&log, format!("fsx{i} on the server: {}", first_difference(&on_disk, &m.data))));
        }
    }
    Ok(done)
}

fn fsx_seed() -> u64 {
    match std::env::var("EAGERNFS_FSX_SEED") {
        Ok(s) => s.parse().expect("EAGERNFS_FSX_SEED must be a number"),
        Err(_) => {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        }
    }
}

fn run_fsx(server: &Server, options: &str, ops: usize, time_max: Duration) {
    let mount = FuseMount::new(&server.url(""), options);
    let seed = fsx_seed();
    eprintln!(
        "fsx: seed {seed}, options '{options}', server {}",
        if server.is_ganesha() { "ganesha" } else { "eagernfs" }
    );
    match fsx(&mount.path(""), server.dir(), seed, ops, time_max) {
        Ok(n) => eprintln!("fsx: {n} operations passed"),
        Err(e) => panic!("{e}\nserver log:\n{}", server.log_tail(20)),
    }
}

#[test]
fn fsx_model_against_eagernfs() {
    require_fuse!("fsx_model_against_eagernfs");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    // Defaults: 1 MiB WRITEs, lazy write-back.
    run_fsx(&server, "", 4000, Duration::from_secs(40));
    // Small transfers (many WRITEs and READs per chunk), eager write-back,
    // attributes never trusted.
    run_fsx(&server, "wsize=8192,rsize=8192,eager,noac", 2000, Duration::from_secs(40));
}

#[test]
fn fsx_model_against_ganesha() {
    require_fuse!("fsx_model_against_ganesha");
    let export = tempfile::tempdir().unwrap();
    let Some(server) = Server::ganesha(export.path()) else {
        skip("fsx_model_against_ganesha", "ganesha could not start");
        return;
    };
    run_fsx(&server, "", 4000, Duration::from_secs(40));
    run_fsx(&server, "wsize=8192,rsize=8192,eager", 2000, Duration::from_secs(40));
}

// ---------------------------------------------------------------------
// Close-to-open between two mounts.

#[test]
fn close_to_open_between_two_mounts() {
    close_to_open_between_two_mounts_over("");
}

/// The same over NFSv3.
#[test]
fn close_to_open_between_two_mounts_over_nfsv3() {
    close_to_open_between_two_mounts_over("vers=3");
}

fn close_to_open_between_two_mounts_over(vers: &str) {
    require_fuse!("close_to_open_between_two_mounts");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    // Long attribute timeouts: only close-to-open can make B see A's data.
    let a = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    let b = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));

    fs::write(a.path("f"), b"version one").unwrap();
    // B reads it: now B has it cached (data and attributes).
    assert_eq!(fs::read(b.path("f")).unwrap(), b"version one");
    // A rewrites it in place, same length, and closes.
    let mut f = OpenOptions::new().write(true).open(a.path("f")).unwrap();
    f.write_all(b"version two").unwrap();
    drop(f);
    assert_eq!(fs::read(export.path().join("f")).unwrap(), b"version two", "close on A did not write back");
    // B opens it again: the open revalidates and sees the new bytes.
    let mut got = Vec::new();
    File::open(b.path("f")).unwrap().read_to_end(&mut got).unwrap();
    assert_eq!(got, b"version two", "B's open after A's close must see A's data");

    // Growing the file works the same way, through a kept-open reader.
    let reader = File::open(b.path("f")).unwrap();
    drop(reader);
    let mut f = OpenOptions::new().append(true).open(a.path("f")).unwrap();
    f.write_all(b", and more").unwrap();
    drop(f);
    assert_eq!(fs::read(b.path("f")).unwrap(), b"version two, and more");
}

#[test]
fn nocto_mount_serves_its_cache_on_open() {
    nocto_mount_serves_its_cache_on_open_over("");
}

/// The same over NFSv3.
#[test]
fn nocto_mount_serves_its_cache_on_open_over_nfsv3() {
    nocto_mount_serves_its_cache_on_open_over("vers=3");
}

fn nocto_mount_serves_its_cache_on_open_over(vers: &str) {
    // The other side of the test above: without close-to-open and with
    // long attribute timeouts, B's open trusts its cache. This shows the
    // close-to-open test would fail without the feature.
    require_fuse!("nocto_mount_serves_its_cache_on_open");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let a = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    let b = FuseMount::new(&server.url(""), &with_vers(vers, "nocto,actimeo=60"));
    fs::write(a.path("f"), b"version one").unwrap();
    assert_eq!(fs::read(b.path("f")).unwrap(), b"version one");
    fs::write(a.path("f"), b"version two").unwrap();
    assert_eq!(fs::read(export.path().join("f")).unwrap(), b"version two");
    assert_eq!(fs::read(b.path("f")).unwrap(), b"version one", "nocto with actimeo=60 revalidated anyway");
}

/// Names under `dir`, recursively (relative, sorted): a listing through a mount.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn rm_rf_removes_what_another_mount_changed_since_this_one_listed_it() {
    rm_rf_removes_what_another_mount_changed_over("");
}

/// The same over NFSv3.
#[test]
fn rm_rf_removes_what_another_mount_changed_since_this_one_listed_it_over_nfsv3() {
    rm_rf_removes_what_another_mount_changed_over("vers=3");
}

/// Two mounts share a tree; B lists it (and keeps the listings), then A changes it: makes new
/// names in one copy, and in another removes a subdirectory's contents and the subdirectory
/// too. B's `rm -rf` of each must remove what is there now: close-to-open holds for
/// directories, so B's opendir asks the server and drops a listing kept from before A's
/// changes. (Served from the kept listings, rm missed A's new names and failed with ENOTEMPTY,
/// or tried the removed subdirectory's names and failed with ESTALE.) Long attribute
/// timeouts: only the open's revalidation can make B see A's changes.
fn rm_rf_removes_what_another_mount_changed_over(vers: &str) {
    require_fuse!("rm_rf_removes_what_another_mount_changed_since_this_one_listed_it");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let a = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    let b = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    for (t, remove_sub) in [("added", false), ("removed", true)] {
        fs::create_dir_all(a.path(&format!("{t}/sub"))).unwrap();
        for i in 0..3 {
            fs::write(a.path(&format!("{t}/sub/f{i}")), b"x").unwrap();
        }
        assert_eq!(tree(&b.path(t)), ["sub", "sub/f0", "sub/f1", "sub/f2"], "B lists {t}");
        if remove_sub {
            for i in 0..3 {
                fs::remove_file(a.path(&format!("{t}/sub/f{i}"))).unwrap();
            }
            fs::remove_dir(a.path(&format!("{t}/sub"))).unwrap();
        }
        fs::write(a.path(&format!("{t}/new")), b"y").unwrap();
        fs::create_dir(a.path(&format!("{t}/sub2"))).unwrap();
        fs::write(a.path(&format!("{t}/sub2/g")), b"z").unwrap();
        let out = Command::new("rm").arg("-rf").arg(b.path(t)).output().unwrap();
        assert!(
            out.status.success(),
            "-o {vers:?}: B's rm -rf of the tree A changed ({t}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!export.path().join(t).exists(), "-o {vers:?}: {t} is gone from the server");
    }
}

#[test]
fn names_another_mount_removed_are_not_found_rather_than_stale() {
    names_another_mount_removed_over("");
}

/// The same over NFSv3.
#[test]
fn names_another_mount_removed_are_not_found_rather_than_stale_over_nfsv3() {
    names_another_mount_removed_over("vers=3");
}

/// B looks at a directory, and lists another; A removes both. Within B's (long) attribute
/// period, B's next steps through them must see what a kernel NFS mount sees: ENOENT (but for
/// the first read of the kept listing, see below), and a directory B makes again under the
/// name works. (B answered the kernel's retry of the path
/// walk, which follows ESTALE, from its cache, so the programs got "Stale file handle" until
/// the attribute period ran out, and `mkdir` said the name existed.)
fn names_another_mount_removed_over(vers: &str) {
    require_fuse!("names_another_mount_removed_are_not_found_rather_than_stale");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let a = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    let b = FuseMount::new(&server.url(""), &with_vers(vers, "actimeo=60"));
    for d in ["looked", "listed"] {
        fs::create_dir_all(a.path(&format!("{d}/sub"))).unwrap();
        fs::write(a.path(&format!("{d}/f")), b"x").unwrap();
    }
    assert!(fs::metadata(b.path("looked/sub")).unwrap().is_dir());
    assert_eq!(tree(&b.path("listed")), ["f", "sub"]);
    for d in ["looked", "listed"] {
        fs::remove_dir_all(a.path(d)).unwrap();
    }
    let errno = |r: std::io::Result<()>, what: &str| match r {
        Ok(()) => panic!("-o {vers:?}: {what} succeeded after A removed it"),
        Err(e) => e.raw_os_error(),
    };
    // A name under the removed directory B never looked up: the lookup in it is what fails.
    let r = fs::metadata(b.path("looked/never")).map(|_| ());
    assert_eq!(
        errno(r, "stat looked/never"),
        Some(libc::ENOENT),
        "-o {vers:?}: stat of a name in a removed directory"
    );
    let r = fs::read_dir(b.path("looked/sub")).map(|_| ());
    assert_eq!(
        errno(r, "opendir looked/sub"),
        Some(libc::ENOENT),
        "-o {vers:?}: opendir of a removed directory"
    );
    let list = |p: PathBuf| -> std::io::Result<()> {
        for e in fs::read_dir(p)? {
            e?;
        }
        Ok(())
    };
    // The directory B listed (its listing kept): the first read revalidates it and finds it
    // gone (ESTALE from getdents, which the kernel does not retry; a kernel NFS mount, which
    // pays a GETATTR at every opendir, says ENOENT at the open). From then on B knows.
    let first = errno(list(b.path("listed")), "listing listed");
    assert!(
        first == Some(libc::ESTALE) || first == Some(libc::ENOENT),
        "-o {vers:?}: listing a removed directory: {first:?}"
    );
    for _ in 0..2 {
        let r = list(b.path("listed"));
        assert_eq!(errno(r, "listing listed again"), Some(libc::ENOENT), "-o {vers:?}: listing it again");
    }
    for d in ["looked", "listed"] {
        fs::create_dir(b.path(d)).unwrap_or_else(|e| panic!("-o {vers:?}: B makes {d} again: {e}"));
        fs::write(b.path(&format!("{d}/g")), b"y").unwrap();
        assert_eq!(
            fs::read(export.path().join(d).join("g")).unwrap(),
            b"y",
            "-o {vers:?}: {d}/g on the server"
        );
    }
}

// ---------------------------------------------------------------------
// Namespace operations, checked on the server's disk.

#[test]
fn namespace_operations_reach_the_server() {
    namespace_operations_reach_the_server_over("");
}

/// The same over NFSv3.
#[test]
fn namespace_operations_reach_the_server_over_nfsv3() {
    namespace_operations_reach_the_server_over("vers=3");
}

fn namespace_operations_reach_the_server_over(vers: &str) {
    require_fuse!("namespace_operations_reach_the_server");
    let export = tempfile::tempdir().unwrap();
    let disk = export.path().canonicalize().unwrap();
    let server = Server::eagernfs(&disk, &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), vers);

    fs::create_dir(m.path("d")).unwrap();
    assert!(disk.join("d").is_dir());
    fs::write(m.path("d/file"), b"0123456789").unwrap();
    assert_eq!(fs::read(disk.join("d/file")).unwrap(), b"0123456789");

    // rename of a file, then of a directory
    fs::rename(m.path("d/file"), m.path("d/renamed")).unwrap();
    assert!(!disk.join("d/file").exists() && disk.join("d/renamed").is_file());
    fs::rename(m.path("d"), m.path("e")).unwrap();
    assert!(!disk.join("d").exists() && disk.join("e/renamed").is_file());
    assert!(fs::metadata(m.path("d")).is_err(), "old name still visible through the mount");

    // symlink
    std::os::unix::fs::symlink("e/renamed", m.path("link")).unwrap();
    assert_eq!(fs::read_link(disk.join("link")).unwrap(), Path::new("e/renamed"));
    assert_eq!(fs::read_link(m.path("link")).unwrap(), Path::new("e/renamed"));
    assert_eq!(fs::read(m.path("link")).unwrap(), b"0123456789", "following the link");

    // hard link
    fs::hard_link(m.path("e/renamed"), m.path("hard")).unwrap();
    let (a, b) = (fs::metadata(disk.join("hard")).unwrap(), fs::metadata(disk.join("e/renamed")).unwrap());
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "hard link on disk");
    assert_eq!(fs::metadata(m.path("hard")).unwrap().nlink(), 2, "nlink through the mount");

    // chmod
    fs::set_permissions(m.path("hard"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(disk.join("e/renamed")).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(fs::metadata(m.path("e/renamed")).unwrap().mode() & 0o7777, 0o640);

    // truncate, down and up
    OpenOptions::new().write(true).open(m.path("hard")).unwrap().set_len(4).unwrap();
    assert_eq!(fs::read(disk.join("hard")).unwrap(), b"0123");
    OpenOptions::new().write(true).open(m.path("hard")).unwrap().set_len(6).unwrap();
    assert_eq!(fs::read(disk.join("hard")).unwrap(), b"0123\0\0");
    assert_eq!(fs::read(m.path("hard")).unwrap(), b"0123\0\0");

    // a fifo
    let fifo = std::ffi::CString::new(m.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) },
        0,
        "mkfifo: {}",
        std::io::Error::last_os_error()
    );
    assert!(fs::symlink_metadata(disk.join("fifo")).unwrap().file_type().is_fifo());

    // directory listing matches the disk
    let mut through: Vec<String> =
        fs::read_dir(m.path("")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    let mut on_disk: Vec<String> =
        fs::read_dir(&disk).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    through.sort();
    on_disk.sort();
    assert_eq!(through, on_disk);

    // unlink, rmdir (non-empty first: refused)
    fs::remove_file(m.path("hard")).unwrap();
    assert!(!disk.join("hard").exists());
    assert_eq!(fs::metadata(disk.join("e/renamed")).unwrap().nlink(), 1);
    let err = fs::remove_dir(m.path("e")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTEMPTY), "rmdir of a non-empty directory: {err}");
    fs::remove_file(m.path("e/renamed")).unwrap();
    fs::remove_dir(m.path("e")).unwrap();
    assert!(!disk.join("e").exists());
    let err = fs::metadata(m.path("e")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));

    // statfs: the server's file system, as the server's statvfs sees it
    let (through, local) = (statvfs(&m.path("")), statvfs(&disk));
    let total = |s: &libc::statvfs| s.f_blocks * s.f_frsize;
    let diff = total(&through).abs_diff(total(&local));
    assert!(diff <= 1 << 20, "statfs total bytes: mount {} vs disk {}", total(&through), total(&local));
    assert!(through.f_bavail <= through.f_blocks && through.f_files > 0);
}

fn statvfs(path: &Path) -> libc::statvfs {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid path and an out-struct of the right type.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0, "statvfs {}", path.display());
        s
    }
}

// ---------------------------------------------------------------------
// Permissions: the server decides, with the caller's credentials.

const USER: u32 = 1000;
const STAFF: u32 = 4242;

/// Run `cat path` as uid/gid 1000 with the given supplementary groups.
fn cat_as_user(path: &Path, groups: &[u32]) -> ToolOutput {
    let mut cmd = Command::new("cat");
    cmd.arg(path);
    let groups: Vec<libc::gid_t> = groups.to_vec();
    // SAFETY: only async-signal-safe calls (setgroups/setgid/setuid)
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(USER) != 0
                || libc::setuid(USER) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run_command(cmd, TOOL_TIMEOUT)
}

#[test]
fn server_decides_permissions_for_each_caller() {
    server_decides_permissions_for_each_caller_over("");
}

/// The same over NFSv3.
#[test]
fn server_decides_permissions_for_each_caller_over_nfsv3() {
    server_decides_permissions_for_each_caller_over("vers=3");
}

fn server_decides_permissions_for_each_caller_over(vers: &str) {
    require_fuse!("server_decides_permissions_for_each_caller");
    let export = tempfile::tempdir().unwrap();
    let dir = export.path();
    chmod(dir, 0o755);
    fs::write(dir.join("secret"), b"root only").unwrap();
    chmod(&dir.join("secret"), 0o600);
    fs::write(dir.join("public"), b"anyone").unwrap();
    chmod(&dir.join("public"), 0o644);
    fs::write(dir.join("staff"), b"staff only").unwrap();
    chown(&dir.join("staff"), 0, STAFF);
    chmod(&dir.join("staff"), 0o640);
    fs::create_dir(dir.join("home")).unwrap();
    chown(&dir.join("home"), USER, USER);

    let server = Server::eagernfs(dir, &["-o", "rw,no_root_squash"]);
    // allow_other lets uid 1000 in; no default_permissions, so the kernel
    // checks nothing and every decision is the server's.
    let m = FuseMount::new(&server.url(""), &with_vers(vers, "allow_other"));

    let out = cat_as_user(&m.path("secret"), &[]);
    assert!(!out.status.success(), "uid 1000 read a root 0600 file: {:?}", out.stdout);
    assert!(out.stderr.contains("Permission denied"), "want EACCES, got: {}", out.stderr);
    assert!(!out.stdout_text().contains("root only"));

    let out = cat_as_user(&m.path("public"), &[]);
    assert!(out.status.success(), "uid 1000 could not read a 0644 file: {}", out.stderr);
    assert_eq!(out.stdout_text(), "anyone");

    // Supplementary groups travel too: a member of 4242 reads the group
    // file, a non-member does not.
    let out = cat_as_user(&m.path("staff"), &[STAFF]);
    assert!(
        out.status.success(),
        "member of {STAFF} could not read a 0640 root:{STAFF} file: {}",
        out.stderr
    );
    assert_eq!(out.stdout_text(), "staff only");
    let out = cat_as_user(&m.path("staff"), &[]);
    assert!(!out.status.success() && out.stderr.contains("Permission denied"), "{}", out.stderr);

    // Root (not squashed on this export) reads the secret.
    assert_eq!(fs::read(m.path("secret")).unwrap(), b"root only");

    // A file uid 1000 creates is owned by uid 1000 on the server.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo mine > \"$0\""]).arg(m.path("home/made"));
    cmd.uid(USER).gid(USER);
    let out = run_command(cmd, TOOL_TIMEOUT);
    assert!(out.status.success(), "uid 1000 could not create in its own directory: {}", out.stderr);
    let meta = fs::metadata(dir.join("home/made")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (USER, USER));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo no > \"$0\""]).arg(m.path("not-yours"));
    cmd.uid(USER).gid(USER);
    let out = run_command(cmd, TOOL_TIMEOUT);
    assert!(!out.status.success() && out.stderr.contains("Permission denied"), "{}", out.stderr);
    assert!(!dir.join("not-yours").exists());
}

// ---------------------------------------------------------------------
// Mounting and unmounting.

fn mount_fails(url: &str, mountpoint: &Path, options: &str) -> String {
    let mut cmd = Command::new(eagernfs_bin());
    cmd.arg("mount").arg(url).arg(mountpoint);
    if !options.is_empty() {
        cmd.args(["-o", options]);
    }
    let out = run_command(cmd, MOUNT_TIMEOUT);
    assert!(!out.status.success(), "mount of {url} succeeded but should not");
    assert!(!is_mounted(mountpoint), "a failed mount left {} mounted", mountpoint.display());
    out.stderr
}

#[test]
fn failed_mounts_say_why_and_exit_nonzero() {
    require_fuse!("failed_mounts_say_why_and_exit_nonzero");
    let export = tempfile::tempdir().unwrap();
    fs::write(export.path().join("plain"), b"x").unwrap();
    let server = Server::eagernfs(export.path(), &[]);
    let mp = tempfile::tempdir().unwrap();

    let err = mount_fails(&server.url("/no/such/dir"), mp.path(), "");
    assert!(err.contains("no /no/such/dir inside export"), "{err}");
    let err = mount_fails(&server.url("/plain"), mp.path(), "");
    assert!(err.contains("not a directory"), "{err}");
    let err = mount_fails(&server.url(""), &mp.path().join("missing"), "");
    assert!(err.contains("does not exist"), "{err}");
    let err = mount_fails(&server.url(""), mp.path(), "allow_othr");
    assert!(err.contains("unknown mount option 'allow_othr'"), "{err}");
    // Nothing listens there.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let err = mount_fails(
        &format!("nfs://127.0.0.1/x?nfsport={port}&mountport={port}"),
        mp.path(),
        "soft,timeo=10,retrans=1",
    );
    assert!(err.contains("connection refused"), "{err}");
}

#[test]
fn foreground_mount_unmounts_on_sigterm() {
    require_fuse!("foreground_mount_unmounts_on_sigterm");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let mp = tempfile::tempdir().unwrap();
    let mut child = Command::new(eagernfs_bin())
        .arg("mount")
        .arg("-f")
        .arg(server.url(""))
        .arg(mp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The foreground daemon logs "mounted ..." once the mount is ready.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = lines.by_ref().map_while(Result::ok).any(|l| l.contains("mounted "));
    assert!(ready, "foreground mount never reported ready");
    assert!(is_mounted(mp.path()));
    // Keep draining its log so it never blocks on a full pipe.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    fs::write(mp.path().join("kept"), b"written before SIGTERM").unwrap();

    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait()));
    let status = match rx.recv_timeout(MOUNT_TIMEOUT) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            // SAFETY: our child, which did not exit in time.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = Command::new(eagernfs_bin()).args(["umount", "-z"]).arg(mp.path()).status();
            panic!("foreground mount did not exit within {MOUNT_TIMEOUT:?} of SIGTERM");
        }
    };
    let log = drain.join().unwrap();
    assert!(status.success(), "foreground mount exited with {status} after SIGTERM; log: {log:?}");
    assert!(!is_mounted(mp.path()), "still mounted after the daemon exited");
    assert_eq!(fs::read(export.path().join("kept")).unwrap(), b"written before SIGTERM");
}
#[test]
fn umount_returns_once_the_daemon_has_exited() {
    require_fuse!("umount_returns_once_the_daemon_has_exited");
    let export = tempfile::tempdir().unwrap();
    fs::write(export.path().join("f"), pattern_bytes(3, 0, 4 << 20)).unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), "");
    assert_eq!(mount_daemons(&m.path).len(), 1, "one daemon serves the mount");
    // Leave work behind: read-ahead of a file read halfway, a written file.
    let mut f = File::open(m.path("f")).unwrap();
    let mut half = vec![0; 2 << 20];
    f.read_exact(&mut half).unwrap();
    drop(f);
    fs::write(m.path("g"), b"last words").unwrap();
    let path = m.path.clone();
    drop(m);
    // umount(8) semantics: once it returns, nothing is left serving (or
    // writing to the server on behalf of) the mount, so stopping the server
    // now cannot cut anything off.
    assert_eq!(mount_daemons(&path), Vec::<u32>::new(), "the daemon outlived umount");
    assert_eq!(fs::read(export.path().join("g")).unwrap(), b"last words");
}

/// Reads `NAME count` lines of a `serve --stats-file`.
fn stat_count(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, c)| c.trim().parse().unwrap())
}

#[test]
fn disk_cache_serves_a_reread_after_restarts_without_reads_on_the_wire() {
    require_fuse!("disk_cache_serves_a_reread_after_restarts");
    if ganesha_override()
        && skip("disk_cache_serves_a_reread_after_restarts", "counts calls with eagernfs's --stats-file")
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let data = pattern_bytes(11, 0, 3 * (1 << 20) + 4321);
    fs::write(export.path().join("f"), &data).unwrap();
    // NFSv3: the server's --stats-file counts NFSv3 procedures.
    let options = format!("cache={},vers=3", cache.path().display());
    // One server, restarted between clients (same handle key, so the same file handles):
    // each instance writes its call counts to the stats file when it stops.
    let stats = scratch.path().join("stats");
    let mut server = Server::eagernfs(
        export.path(),
        &["-o", "rw,no_root_squash", "--stats-file", stats.to_str().unwrap()],
    );
    let reads_of_last_instance = || stat_count(&fs::read_to_string(&stats).unwrap(), "READ");

    // First client: reads through the server and fills the disk cache.
    {
        let m = FuseMount::new(&server.url(""), &options);
        assert!(fs::read(m.path("f")).unwrap() == data, "first read differs");
    }
    server.restart();
    assert!(reads_of_last_instance() > 0, "the first read went to the server");

    // A new client process after a server restart: the re-read comes from the disk cache.
    {
        let m = FuseMount::new(&server.url(""), &options);
        assert!(fs::read(m.path("f")).unwrap() == data, "cached re-read differs");
    }
    server.restart();
    assert_eq!(reads_of_last_instance(), 0, "the re-read went to the wire");

    // The file changes on the server: the validator no longer matches, the data is read again.
    let mut changed = data.clone();
    changed[100] ^= 0xff;
    fs::write(export.path().join("f"), &changed).unwrap();
    {
        let m = FuseMount::new(&server.url(""), &options);
        assert!(
            fs::read(m.path("f")).unwrap() == changed,
            "a changed file was served stale from the disk cache"
        );
    }
    server.stop();
    assert!(reads_of_last_instance() > 0, "the changed file was not read from the server");
}

#[test]
fn stat_of_a_mount_reports_its_operations_and_metrics() {
    require_fuse!("stat_of_a_mount_reports_its_operations_and_metrics");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let (port, _) = free_ports();
    let m = FuseMount::new(&server.url(""), &format!("metrics=127.0.0.1:{port}"));
    fs::write(m.path("f"), pattern_bytes(4, 0, 3 << 20)).unwrap();
    assert_eq!(fs::read(m.path("f")).unwrap().len(), 3 << 20);
    let mp = m.path.to_str().unwrap().to_string();

    let mut cmd = Command::new(eagernfs_bin());
    cmd.args(["stat", &mp]);
    let out = run_command(cmd, MOUNT_TIMEOUT);
    out.assert_success("eagernfs stat MOUNTPOINT");
    let text = out.stdout_text();
    let calls = |op: &str| -> u64 {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(op))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("no {op} row in\n{text}"))
    };
    assert!(calls("WRITE") >= 3, "3 MiB went out in WRITEs:\n{text}");
    assert!(calls("COMMIT") >= 1, "close committed:\n{text}");
    assert!(text.contains("cache hit rates"), "{text}");

    let mut cmd = Command::new(eagernfs_bin());
    cmd.args(["stat", "--json", &mp]);
    let json: serde_json::Value =
        serde_json::from_str(&run_command(cmd, MOUNT_TIMEOUT).stdout_text()).unwrap();
    assert_eq!(json["dirty_bytes"].as_u64(), Some(0), "everything was written back at close");
    assert_eq!(json["unstable_bytes"].as_u64(), Some(0), "and committed");

    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let line = format!("eagernfs_client_rpc_calls_total{{mountpoint=\"{mp}\",operation=\"WRITE\"}}");
    assert!(body.contains(&line), "{body}");
}

/// nfs(5) `sync` and an `O_SYNC` open write FILE_SYNC (the data is stable when write() returns,
/// no COMMIT needed); an ordinary open on an ordinary mount writes UNSTABLE and COMMITs at close.
#[test]
fn sync_mounts_and_o_sync_opens_write_file_sync() {
    use std::os::unix::fs::OpenOptionsExt;
    require_fuse!("sync_mounts_and_o_sync_opens_write_file_sync");
    if ganesha_override()
        && skip("sync_mounts_and_o_sync_opens_write_file_sync", "counts calls with --stats-file")
    {
        return;
    }
    let export = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let stats = scratch.path().join("stats");
    let mut server = Server::eagernfs(
        export.path(),
        &["-o", "rw,no_root_squash", "--stats-file", stats.to_str().unwrap()],
    );
    let block = pattern_bytes(5, 0, 64 * 1024);
    let counts = |server: &mut Server| {
        server.restart();
        let text = fs::read_to_string(&stats).unwrap();
        (
            stat_count(&text, "WRITE/FILE_SYNC"),
            stat_count(&text, "WRITE/UNSTABLE"),
            stat_count(&text, "COMMIT"),
        )
    };
    let write_blocks = |f: &mut File| {
        for _ in 0..4 {
            f.write_all(&block).unwrap();
        }
    };
    // More than one WRITE's worth (a file closed with less goes as one FILE_SYNC WRITE, with no
    // COMMIT: see the cache's a_small_file_closes_with_one_file_sync_write_and_no_commit).
    let write_plain = |f: &mut File| {
        for _ in 0..40 {
            f.write_all(&block).unwrap();
        }
    };
    {
        // NFSv3: the server's --stats-file counts NFSv3 WRITEs by how stable they are.
        let m = FuseMount::new(&server.url(""), "vers=3");
        let mut f =
            fs::OpenOptions::new().write(true).create(true).truncate(true).open(m.path("plain")).unwrap();
        write_plain(&mut f);
        drop(f);
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_SYNC)
            .open(m.path("osync"))
            .unwrap();
        write_blocks(&mut f);
        // Each write() returned with its data on the server: the export shows it while the file
        // is still open, before any close or fsync.
        assert_eq!(fs::read(export.path().join("osync")).unwrap().len(), 4 * block.len());
    }
    let (file_sync, unstable, commits) = counts(&mut server);
    assert!(file_sync >= 4, "O_SYNC writes went FILE_SYNC: {file_sync}");
    assert!(unstable >= 1 && commits >= 1, "the plain file went UNSTABLE + COMMIT: {unstable} {commits}");
    {
        let m = FuseMount::new(&server.url(""), "sync,vers=3");
        let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).open(m.path("s")).unwrap();
        write_blocks(&mut f);
        assert_eq!(fs::read(export.path().join("s")).unwrap().len(), 4 * block.len());
    }
    let (file_sync, unstable, commits) = counts(&mut server);
    assert!(file_sync >= 4, "a sync mount writes FILE_SYNC: {file_sync}");
    assert_eq!((unstable, commits), (0, 0), "and never UNSTABLE or COMMIT");
}

/// The FUSE client killed with SIGKILL in the middle of writing (issue 8, point 2): every byte
/// an fsync(2) returned for is on the server, and no file holds a byte that was never written
/// (whatever reached the server past the last fsync is the writer's own data, in place).
#[test]
fn a_killed_mount_loses_nothing_fsynced_and_writes_no_garbage() {
    require_fuse!("a_killed_mount_loses_nothing_fsynced_and_writes_no_garbage");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    for round in 0..3u64 {
        let m = FuseMount::new(&server.url(""), "");
        let synced = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, u64)>::new()));
        let writer = {
            let (dir, synced) = (m.path.clone(), synced.clone());
            std::thread::spawn(move || {
                // Files of growing length, each fsynced at 64 KiB steps, until the mount dies.
                for f in 0..1000u64 {
                    let name = format!("r{round}-f{f}");
                    let Ok(mut file) = File::create(dir.join(&name)) else { return };
                    let mut len = 0u64;
                    for step in 0..16u64 {
                        let chunk =
                            pattern_bytes(round * 1000 + f, len, 64 * 1024 + (step as usize % 3) * 1000);
                        if file.write_all(&chunk).is_err() {
                            return;
                        }
                        len += chunk.len() as u64;
                        if file.sync_all().is_err() {
                            return;
                        }
                        synced.lock().unwrap().push((name.clone(), len));
                    }
                }
            })
        };
        // Kill the daemon once some data is durable (bounded wait on real progress).
        let deadline = Instant::now() + Duration::from_secs(60);
        while synced.lock().unwrap().len() < 20 + round as usize * 15 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let daemons = mount_daemons(&m.path);
        assert!(!daemons.is_empty(), "the mount's daemon is running");
        for pid in daemons {
            // SAFETY: plain kill(2) of a process we started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        writer.join().unwrap();
        drop(m); // unmounts what is left of the dead mount
        let synced = std::mem::take(&mut *synced.lock().unwrap());
        assert!(!synced.is_empty(), "round {round}: nothing was fsynced before the kill");
        let mut longest: std::collections::HashMap<String, u64> = Default::default();
        for (name, len) in synced {
            let e = longest.entry(name).or_default();
            *e = (*e).max(len);
        }
        for (name, len) in &longest {
            let on_server = fs::read(export.path().join(name)).unwrap();
            assert!(
                on_server.len() as u64 >= *len,
                "{name}: {} bytes on the server, {len} fsynced",
                on_server.len()
            );
            let f: u64 = name.rsplit('f').next().unwrap().parse().unwrap();
            let want = pattern_bytes(round * 1000 + f, 0, on_server.len());
            assert!(on_server == want, "{name}: bytes on the server that were never written");
        }
    }
}

/// The kernel read-ahead of a mount's backing device (`MAJ:MIN` from mountinfo).
fn read_ahead_kb(mountpoint: &Path) -> u32 {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = mountpoint.to_str().unwrap();
    let dev = info
        .lines()
        .rfind(|l| l.split_whitespace().nth(4) == Some(want))
        .and_then(|l| l.split_whitespace().nth(2))
        .expect("the mount is in mountinfo")
        .to_string();
    fs::read_to_string(format!("/sys/class/bdi/{dev}/read_ahead_kb")).unwrap().trim().parse().unwrap()
}

/// A mount reads ahead 4 MiB (FUSE's own 128 KiB keeps a sequential reader waiting on one
/// small request after another), or what `read_ahead_kb=` says.
#[test]
fn mounts_read_ahead_what_they_are_told() {
    require_fuse!("mounts_read_ahead_what_they_are_told");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), "");
    assert_eq!(read_ahead_kb(&m.path("")), 4096);
    let small = FuseMount::new(&server.url(""), "read_ahead_kb=256");
    assert_eq!(read_ahead_kb(&small.path("")), 256);
}

/// A `stat` of a file with written data not yet on the server shows the write's times, as a
/// local file system (and Linux's NFS client, which writes back first) does; and so does a
/// `stat` right after the close. The file's times start far in the past so that any write moves
/// them, whatever the clock's resolution.
#[test]
fn stat_after_a_write_shows_the_new_times() {
    stat_after_a_write_shows_the_new_times_over("");
}

/// The same over NFSv3.
#[test]
fn stat_after_a_write_shows_the_new_times_over_nfsv3() {
    stat_after_a_write_shows_the_new_times_over("vers=3");
}

fn stat_after_a_write_shows_the_new_times_over(vers: &str) {
    require_fuse!("stat_after_a_write_shows_the_new_times");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), vers);
    let path = m.path("f");
    fs::write(&path, b"before").unwrap();
    let old = std::time::UNIX_EPOCH + Duration::from_secs(946_684_800); // 2000-01-01
    File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
    let before = fs::metadata(&path).unwrap();
    assert_eq!(before.mtime(), 946_684_800);
    let f = File::options().write(true).open(&path).unwrap();
    f.write_at(b"x", 3).unwrap();
    let during = fs::metadata(&path).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(during.mtime() >= now - 60, "stat after pwrite, before close: mtime {}", during.mtime());
    assert!(during.ctime() >= now - 60, "stat after pwrite, before close: ctime {}", during.ctime());
    drop(f);
    let after = fs::metadata(&path).unwrap();
    assert!(after.mtime() >= during.mtime() && after.mtime() >= now - 60, "after close: {}", after.mtime());
    assert_eq!(fs::read(&path).unwrap(), b"befxre");
    let on_server = fs::metadata(export.path().join("f")).unwrap();
    assert_eq!(on_server.mtime(), after.mtime(), "the mount shows the server's time once it has it");
}

/// Reading small files, the mount's short read-only calls (ACCESS at open, READ) are sent and
/// waited for by the FUSE reader thread on a lane of its own (`eagernfs_client::lane`), not
/// handed to the runtime: `eagernfs stat` counts them. The data is what the server has, and a
/// file changed on the server is seen at the next open (close-to-open holds on lanes too).
#[test]
fn small_files_are_read_on_lanes() {
    require_fuse!("small_files_are_read_on_lanes");
    let export = tempfile::tempdir().unwrap();
    let files = 60;
    for i in 0..files {
        fs::write(export.path().join(format!("f{i}")), pattern_bytes(i as u64, 0, 100 + i)).unwrap();
    }
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    // Lanes are the NFSv3 mount's (NFSv4 reads a small file with its open).
    let m = FuseMount::new(&server.url(""), "vers=3");
    for i in 0..files {
        assert!(fs::read(m.path(&format!("f{i}"))).unwrap() == pattern_bytes(i as u64, 0, 100 + i), "f{i}");
    }
    fs::write(export.path().join("f0"), b"changed on the server").unwrap();
    assert_eq!(fs::read(m.path("f0")).unwrap(), b"changed on the server");

    let mut cmd = Command::new(eagernfs_bin());
    cmd.args(["stat", "--json", m.path.to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&run_command(cmd, MOUNT_TIMEOUT).stdout_text()).unwrap();
    let lane_calls = json["lane_calls"].as_u64().expect("lane_calls in eagernfs stat --json");
    // Each file's open and read are two eligible calls; the first few find no lane yet (it is
    // being connected) and go through the shared connections.
    assert!(lane_calls >= files as u64, "only {lane_calls} of about {} calls went on lanes", 2 * files);
    assert_eq!(json["lane_failures"].as_u64(), Some(0));
}

/// `touch u; exec 4<u; rm u; exec 4<&-` and `mv a b` with `b` open: the hidden names go at the
/// last close (the mount sees a settled file's last close on its FUSE reader thread), so the
/// directory can be removed, and nothing is left on the server's disk.
#[test]
fn files_removed_while_open_are_gone_after_their_last_close() {
    files_removed_while_open_are_gone_after_their_last_close_over("");
}

/// The same over NFSv3.
#[test]
fn files_removed_while_open_are_gone_after_their_last_close_over_nfsv3() {
    files_removed_while_open_are_gone_after_their_last_close_over("vers=3");
}

fn files_removed_while_open_are_gone_after_their_last_close_over(vers: &str) {
    require_fuse!("files_removed_while_open_are_gone_after_their_last_close");
    let export = tempfile::tempdir().unwrap();
    let server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), vers);
    files_removed_while_open_leave_nothing(&m);
    let left: Vec<_> = fs::read_dir(export.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left on the server's disk: {left:?}");
}

fn fchmod(f: &File, mode: u32) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor.
    let r = unsafe { libc::fchmod(f.as_raw_fd(), mode) };
    assert_eq!(r, 0, "fchmod {mode:o}: {}", std::io::Error::last_os_error());
}

fn fchown(f: &File, uid: u32, gid: u32) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor.
    let r = unsafe { libc::fchown(f.as_raw_fd(), uid, gid) };
    assert_eq!(r, 0, "fchown {uid}:{gid}: {}", std::io::Error::last_os_error());
}

/// A change of mode, owner or group through a file its creator still has open for writing is
/// on the server when the call returns, before the data written after it, and in the program's
/// order (the last word wins); `fstat` shows it at once, ctime included. The server's disk
/// stands for every other client.
#[test]
fn mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order() {
    mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order_over("");
}

/// The same over NFSv3.
#[test]
fn mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order_over_nfsv3() {
    mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order_over("vers=3");
}

fn mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order_over(vers: &str) {
    require_fuse!("mode_and_owner_changes_through_an_open_file_reach_the_server_at_once_and_in_order");
    let export = tempfile::tempdir().unwrap();
    let disk = export.path().canonicalize().unwrap();
    let server = Server::eagernfs(&disk, &["-o", "rw,no_root_squash"]);
    let m = FuseMount::new(&server.url(""), vers);
    let create = |name: &str| {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new().read(true).write(true).create_new(true).mode(0o644).open(m.path(name)).unwrap()
    };
    let on_disk = |name: &str| fs::metadata(disk.join(name)).unwrap();

    // Narrow, then write a secret: the secret never sits on the server under 0644.
    let f = create("secret");
    fchmod(&f, 0o600);
    let (seen, server) = (f.metadata().unwrap(), on_disk("secret"));
    assert_eq!(server.mode() & 0o7777, 0o600, "the narrowed mode is on the server when fchmod returns");
    assert_eq!(seen.mode() & 0o7777, 0o600);
    assert_eq!((seen.ctime(), seen.ctime_nsec()), (server.ctime(), server.ctime_nsec()), "fstat's ctime");
    (&f).write_all(b"the secret").unwrap();
    fchmod(&f, 0o4755);
    assert_eq!(on_disk("secret").mode() & 0o7777, 0o4755);
    drop(f);
    assert_eq!(on_disk("secret").mode() & 0o7777, 0o4755, "the last fchmod is the last word");
    assert_eq!(fs::read(disk.join("secret")).unwrap(), b"the secret");

    // chown, then a set-id chmod: the chown must not land after it and clear the bits.
    let f = create("setid");
    (&f).write_all(b"data written before the chown").unwrap();
    fchown(&f, 5000, 5000);
    let server = on_disk("setid");
    assert_eq!((server.uid(), server.gid()), (5000, 5000), "the owner is on the server when fchown returns");
    let seen = f.metadata().unwrap();
    assert_eq!((seen.uid(), seen.gid()), (5000, 5000));
    assert_eq!((seen.ctime(), seen.ctime_nsec()), (server.ctime(), server.ctime_nsec()), "fstat's ctime");
    fchmod(&f, 0o6755);
    drop(f);
    let server = on_disk("setid");
    assert_eq!((server.mode() & 0o7777, server.uid(), server.gid()), (0o6755, 5000, 5000));
    assert_eq!(fs::read(disk.join("setid")).unwrap(), b"data written before the chown");
    let through = fs::metadata(m.path("setid")).unwrap();
    assert_eq!((through.mode() & 0o7777, through.uid()), (0o6755, 5000));
}
