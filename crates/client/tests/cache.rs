//! The caching file layer against an in-memory server model (`cache_fake.rs`).
//! Each test names the behaviour it pins down; each would fail without it.

#[path = "cache_fake.rs"]
mod fake;

use std::time::Duration;

use eagernfs_client::cache::{CacheConfig, CachedFs, FsError, DROP_BEHIND_BYTES_MIN, ROOT_INO};
use eagernfs_client::ops::Cred;
use eagernfs_client::options::{LookupCache, MountOptions};
use eagernfs_proto::nfs3::*;
use fake::Fake;

const KIB: u64 = 1024;

fn config() -> CacheConfig {
    let mut c = CacheConfig::from_options(&MountOptions::default(), None);
    c.rsize = 64 * 1024;
    c.wsize = 64 * 1024;
    c.readahead_bytes = 0;
    c
}

async fn mount(fake: &Fake, cfg: CacheConfig) -> CachedFs<Fake> {
    CachedFs::with_config(fake.clone(), cfg).await.expect("mount")
}

fn cred() -> Cred {
    Cred { uid: 1000, gid: 1000, groups: vec![] }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

async fn open_file(fs: &CachedFs<Fake>, name: &str, flags: i32) -> (u64, u64) {
    let e = fs.lookup(ROOT_INO, name.as_bytes(), &cred()).await.expect("lookup");
    let fh = fs.open(e.ino, flags, &cred()).await.expect("open");
    (e.ino, fh)
}

async fn read_all(fs: &CachedFs<Fake>, fh: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while (out.len() as u64) < len {
        let b = fs.read(fh, out.len() as u64, 32 * 1024).await.expect("read");
        if b.is_empty() {
            break;
        }
        out.extend_from_slice(&b);
    }
    out
}

// ----- inode numbers ---------------------------------------------------

#[tokio::test]
async fn inode_numbers_are_fileids_and_1_is_the_root() {
    let fake = Fake::new();
    let a = fake.add_file("a", b"x");
    fake.set_next_fileid(1);
    let one = fake.add_file("one", b"y");
    assert_eq!(one, 1);
    let fs = mount(&fake, config()).await;
    let e = fs.lookup(ROOT_INO, b"a", &cred()).await.unwrap();
    assert_eq!(e.ino, a, "a fileid is its inode number");
    let e1 = fs.lookup(ROOT_INO, b"one", &cred()).await.unwrap();
    assert_ne!(e1.ino, ROOT_INO, "fileid 1 must not alias the root");
    let root = fs.getattr(ROOT_INO, &cred()).await.unwrap();
    assert_eq!(root.attr.ftype, Ftype3::Dir);
    assert_eq!(fs.getattr(e1.ino, &cred()).await.unwrap().attr.fileid, 1);
}

// ----- attribute cache -------------------------------------------------

#[tokio::test(start_paused = true)]
async fn attributes_are_cached_for_acregmin_and_the_period_grows_while_unchanged() {
    let fake = Fake::new();
    fake.add_file("f", b"hello");
    let mut cfg = config();
    cfg.acregmin = Duration::from_secs(3);
    cfg.acregmax = Duration::from_secs(60);
    let fs = mount(&fake, cfg).await;
    let e = fs.lookup(ROOT_INO, b"f", &cred()).await.unwrap();
    let g0 = fake.calls(NFSPROC3_GETATTR);
    fs.getattr(e.ino, &cred()).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0, "fresh attributes come from the cache");
    tokio::time::advance(Duration::from_secs(4)).await;
    fs.getattr(e.ino, &cred()).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0 + 1, "expired after acregmin");
    // Unchanged: now trusted for 6 s.
    tokio::time::advance(Duration::from_secs(5)).await;
    fs.getattr(e.ino, &cred()).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0 + 1, "period doubled while unchanged");
    tokio::time::advance(Duration::from_secs(2)).await;
    fs.getattr(e.ino, &cred()).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0 + 2);
}

#[tokio::test(start_paused = true)]
async fn noac_asks_every_time() {
    let fake = Fake::new();
    fake.add_file("f", b"hello");
    let opts = MountOptions { ac: false, ..MountOptions::default() };
    let mut cfg = CacheConfig::from_options(&opts, None);
    cfg.readahead_bytes = 0;
    assert!(cfg.noac);
    let fs = mount(&fake, cfg).await;
    let e = fs.lookup(ROOT_INO, b"f", &cred()).await.unwrap();
    let g0 = fake.calls(NFSPROC3_GETATTR);
    for _ in 0..3 {
        fs.getattr(e.ino, &cred()).await.unwrap();
    }
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0 + 3);
    assert_eq!(fs.getattr(e.ino, &cred()).await.unwrap().ttl, Duration::ZERO);
}

// ----- WCC: our own changes keep the cache, others' drop it ------------

#[tokio::test]
async fn own_writes_keep_cached_data_a_foreign_change_drops_it() {
    let fake = Fake::new();
    let data = pattern(256 * KIB as usize, 1);
    let id = fake.add_file("f", &data);
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDWR).await;
    assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
    let reads = fake.reads().len();
    // Our write to chunk 3; chunks 0..3 stay valid (WCC pre-op matched).
    fs.write(fh, 3 * 64 * KIB + 10, b"mine").await.unwrap();
    fs.flush(fh).await.unwrap();
    assert_eq!(fs.read(fh, 0, 4096).await.unwrap(), &data[..4096]);
    assert_eq!(fake.reads().len(), reads, "own change: chunk 0 still cached");
    // Someone else writes behind our back, then we write: WCC pre-op
    // does not match our cache, so cached chunks are dropped.
    fake.poke(id, 0, b"THEIRS");
    fs.write(fh, 3 * 64 * KIB + 20, b"again").await.unwrap();
    fs.flush(fh).await.unwrap();
    assert_eq!(&fs.read(fh, 0, 6).await.unwrap()[..], b"THEIRS");
    assert!(fake.reads().len() > reads, "foreign change: chunk 0 read again");
}

// ----- close-to-open ---------------------------------------------------

#[tokio::test(start_paused = true)]
async fn close_to_open_between_two_clients() {
    let fake = Fake::new();
    fake.add_file("f", b"old old old");
    let a = mount(&fake, config()).await;
    let b = mount(&fake, config()).await;
    let mut nocto_cfg = config();
    nocto_cfg.cto = false;
    let c = mount(&fake, nocto_cfg).await;
    // B and C read (and cache) the old contents.
    let (_, bfh) = open_file(&b, "f", libc::O_RDONLY).await;
    assert_eq!(&b.read(bfh, 0, 100).await.unwrap()[..], b"old old old");
    b.release(bfh).await.unwrap();
    let (_, cfh) = open_file(&c, "f", libc::O_RDONLY).await;
    assert_eq!(&c.read(cfh, 0, 100).await.unwrap()[..], b"old old old");
    c.release(cfh).await.unwrap();
    // A writes and closes: the data is on the server, committed, when
    // close returns.
    let (_, afh) = open_file(&a, "f", libc::O_RDWR).await;
    a.write(afh, 0, b"NEW").await.unwrap();
    a.flush(afh).await.unwrap();
    assert_eq!(&fake.stable(fake.lookup_id("f").unwrap())[..3], b"NEW");
    a.release(afh).await.unwrap();
    // B opens (GETATTR on open) and sees the new data at once.
    let (_, bfh) = open_file(&b, "f", libc::O_RDONLY).await;
    assert_eq!(&b.read(bfh, 0, 100).await.unwrap()[..], b"NEW old old");
    // C (nocto) trusts its attribute cache and still sees the old data:
    // the difference is the open-time GETATTR.
    let (_, cfh) = open_file(&c, "f", libc::O_RDONLY).await;
    assert_eq!(&c.read(cfh, 0, 100).await.unwrap()[..], b"old old old");
}

// ----- write-back ------------------------------------------------------

#[tokio::test]
async fn small_writes_become_wsize_unstable_writes_and_one_commit() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    let data = pattern(1024 * KIB as usize, 7);
    for (i, piece) in data.chunks(4096).enumerate() {
        fs.write(fh, i as u64 * 4096, piece).await.unwrap();
    }
    assert_eq!(fake.calls(NFSPROC3_WRITE), 0, "write-behind: nothing sent before close");
    fs.flush(fh).await.unwrap();
    let writes = fake.writes();
    assert_eq!(writes.len(), 16, "coalesced into 64 KiB WRITEs");
    assert!(writes.iter().all(|w| w.stable == StableHow::Unstable && w.len == 64 * 1024));
    assert_eq!(fake.calls(NFSPROC3_COMMIT), 1);
    assert_eq!(fake.stable(id), data);
    // Reads see the data, and the file size counts it.
    assert_eq!(fs.getattr(fake.lookup_id("f").unwrap(), &cred()).await.unwrap().attr.size, data.len() as u64);
}

/// A file closed with less than one WRITE of data: one FILE_SYNC WRITE,
/// no COMMIT (the data is stable when close returns, in one round trip).
#[tokio::test]
async fn a_small_file_closes_with_one_file_sync_write_and_no_commit() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    fs.write(fh, 0, &pattern(20_000, 1)).await.unwrap();
    fs.write(fh, 20_000, &pattern(5_000, 2)).await.unwrap();
    fs.flush(fh).await.unwrap();
    let writes = fake.writes();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].stable, StableHow::FileSync);
    assert_eq!(fake.calls(NFSPROC3_COMMIT), 0);
    assert_eq!(fake.stable(id).len(), 25_000, "stable on the server");
    // More than one WRITE's worth: UNSTABLE WRITEs and one COMMIT, as before.
    fs.write(fh, 0, &pattern(3 * 64 * 1024, 3)).await.unwrap();
    fs.flush(fh).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_COMMIT), 1);
    assert_eq!(fake.stable(id), pattern(3 * 64 * 1024, 3));
}

/// What tar does as root to every file it extracts: create (0600 until
/// its owner is set), write, then set times, owner and mode through the
/// open file, then close. The times and the chown to the owner the file
/// already has change nothing another client sees: they wait. The chmod
/// is a real change: it goes to the server before it returns, after the
/// data written before it, and carries the waiting changes in the same
/// SETATTR. Close then has nothing left to send.
#[tokio::test]
async fn tar_s_times_and_same_owner_wait_for_its_chmod_which_follows_the_data() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    let (e, fh) = fs.create(ROOT_INO, b"f", 0o600, libc::O_WRONLY | libc::O_EXCL, &root).await.unwrap();
    fs.write(fh, 0, &pattern(9000, 4)).await.unwrap();
    fake.reset_counts();
    let mtime = Nfstime3 { seconds: 1_700_000_000, nseconds: 0 };
    let times = Sattr3 { mtime: SetTime::SetToClientTime(mtime), ..Sattr3::default() };
    fs.setattr(e.ino, times, &root).await.unwrap();
    let held =
        fs.setattr(e.ino, Sattr3 { uid: Some(0), gid: Some(0), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!(fake.call_order(), Vec::<u32>::new(), "times and a same-owner chown wait");
    assert_eq!(held.attr.mtime, mtime, "the mount shows the waiting time");
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(held.attr.ctime.seconds as u64 + 1 >= now_s, "and the change's ctime: {:?}", held.attr.ctime);
    let a = fs.setattr(e.ino, Sattr3 { mode: Some(0o644), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!(
        fake.call_order(),
        vec![NFSPROC3_WRITE, NFSPROC3_SETATTR],
        "the chmod is on the server when it returns, after the data written before it"
    );
    let on_server = fake.attr(e.ino);
    assert_eq!((on_server.mode, on_server.mtime, on_server.size), (0o644, mtime, 9000));
    assert_eq!((a.attr.mode, a.attr.mtime, a.attr.size), (0o644, mtime, 9000), "what the mount shows");
    fs.flush(fh).await.unwrap();
    fs.release(fh).await.unwrap();
    assert_eq!(fake.call_order(), vec![NFSPROC3_WRITE, NFSPROC3_SETATTR], "close has nothing left to send");
}

/// A change of mode, owner or group through a file still open for writing
/// by its creator is on the server when the call returns, in the order the
/// program made them: the last word wins. A chmod to the mode the file
/// already has waits (nothing changes for another client), and a real
/// change after it takes it along.
#[tokio::test]
async fn changes_of_mode_and_owner_reach_the_server_at_once_and_in_order() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    let (e, fh) = fs.create(ROOT_INO, b"f", 0o644, libc::O_RDWR | libc::O_EXCL, &root).await.unwrap();
    fake.reset_counts();
    fs.setattr(e.ino, Sattr3 { mode: Some(0o600), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!(fake.attr(e.ino).mode, 0o600, "a narrowed mode is on the server when chmod returns");
    fs.write(fh, 0, b"secret").await.unwrap();
    fs.setattr(e.ino, Sattr3 { mode: Some(0o4755), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!(fake.call_order(), vec![NFSPROC3_SETATTR, NFSPROC3_WRITE, NFSPROC3_SETATTR]);
    fs.setattr(e.ino, Sattr3 { uid: Some(5000), gid: Some(5000), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!((fake.attr(e.ino).uid, fake.attr(e.ino).gid), (5000, 5000), "chown at once");
    fs.setattr(e.ino, Sattr3 { mode: Some(0o6755), ..Sattr3::default() }, &root).await.unwrap();
    assert_eq!(fake.attr(e.ino).mode, 0o6755, "the set-id chmod after the chown is the last word");
    fake.reset_counts();
    // No change for anyone else: waits for close, shown at once.
    let same = fs.setattr(e.ino, Sattr3 { mode: Some(0o6755), ..Sattr3::default() }, &root).await;
    assert!(same.is_ok());
    fs.flush(fh).await.unwrap();
    fs.release(fh).await.unwrap();
    assert_eq!(fake.attr(e.ino).mode, 0o6755);
    assert_eq!(fake.attr(e.ino).size, 6);
}

/// A write after a deferred explicit mtime moves the time, as on a local
/// file system: the earlier time is not applied after it. And only the
/// file's creator's changes wait (another caller's go at once).
#[tokio::test]
async fn deferred_times_do_not_outlive_a_later_write_and_only_the_creator_s_changes_wait() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    let (e, fh) = fs.create(ROOT_INO, b"f", 0o600, libc::O_WRONLY | libc::O_EXCL, &root).await.unwrap();
    let old = Nfstime3 { seconds: 1_000_000_000, nseconds: 0 };
    fs.setattr(e.ino, Sattr3 { mtime: SetTime::SetToClientTime(old), ..Sattr3::default() }, &root)
        .await
        .unwrap();
    fs.write(fh, 0, b"later").await.unwrap();
    fs.flush(fh).await.unwrap();
    assert_ne!(fake.attr(e.ino).mtime, old, "the write's time, not the earlier explicit one");
    fake.reset_counts();
    // Someone who did not create the file: their chmod goes to the server now.
    let other = Cred { uid: 1000, gid: 1000, groups: vec![] };
    fs.setattr(e.ino, Sattr3 { mode: Some(0o640), ..Sattr3::default() }, &other).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_SETATTR), 1);
    fs.release(fh).await.unwrap();
}

/// While the SETATTR carrying deferred changes is out (here held at the
/// server; in life, the write-back timer sent it while the file stays
/// open), `stat` still shows them, a newer change shows over them, and a
/// second flush returns only once they are on the server. The fuse_posix
/// times test once saw the times from before the last change here.
#[tokio::test]
async fn deferred_changes_stay_visible_while_their_setattr_is_out() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    let (e, fh) = fs.create(ROOT_INO, b"f", 0o600, libc::O_WRONLY | libc::O_EXCL, &root).await.unwrap();
    let t = |s: u32| Nfstime3 { seconds: s, nseconds: 0 };
    let set = |s: u32| Sattr3 { mtime: SetTime::SetToClientTime(t(s)), ..Sattr3::default() };
    fs.setattr(e.ino, set(1_600_000_000), &root).await.unwrap();
    let gate = fake.gate(NFSPROC3_SETATTR);
    let first = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.fsync(fh).await })
    };
    fake.until_called(NFSPROC3_SETATTR).await;
    assert_eq!(
        fs.getattr(e.ino, &root).await.unwrap().attr.mtime,
        t(1_600_000_000),
        "while the SETATTR is out"
    );
    fs.setattr(e.ino, set(1_700_000_000), &root).await.unwrap();
    assert_eq!(
        fs.getattr(e.ino, &root).await.unwrap().attr.mtime,
        t(1_700_000_000),
        "a newer change over it"
    );
    let second = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.flush(fh).await })
    };
    // The second flush cannot send its SETATTR before the first is answered.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!second.is_finished(), "a flush returned with deferred changes still out");
    gate.add_permits(2);
    fake.ungate(NFSPROC3_SETATTR);
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(fake.attr(e.ino).mtime, t(1_700_000_000), "the last change is the last word on the server");
    assert_eq!(fs.getattr(e.ino, &root).await.unwrap().attr.mtime, t(1_700_000_000));
    fs.release(fh).await.unwrap();
}

/// An open asks the server once: the ACCESS check brings the attributes
/// close-to-open needs, so no GETATTR follows it; with the answer cached,
/// a GETATTR alone. The kernel may keep its pages at the next open only if
/// nothing but our own writes changed the file.
#[tokio::test]
async fn an_open_is_one_round_trip_and_the_kernel_keeps_pages_of_an_unchanged_file() {
    let fake = Fake::new();
    // Larger than a file opened with a READ (see the next test).
    const SIZE: usize = 300_000;
    fake.add_file("f", &pattern(SIZE, 5));
    let fs = mount(&fake, config()).await;
    let e = fs.lookup(ROOT_INO, b"f", &cred()).await.unwrap();
    fake.reset_counts();
    let o = fs.open_checked(e.ino, libc::O_RDONLY, libc::R_OK, &cred()).await.unwrap();
    assert_eq!(fake.call_order(), vec![NFSPROC3_ACCESS], "no GETATTR after the ACCESS");
    assert!(!o.keep_cache, "the kernel had nothing cached");
    assert_eq!(read_all(&fs, o.fh, SIZE as u64).await, pattern(SIZE, 5));
    fs.release(o.fh).await.unwrap();
    // Unchanged: the ACCESS answer is cached, one GETATTR revalidates,
    // and the kernel may keep its pages.
    fake.reset_counts();
    let o = fs.open_checked(e.ino, libc::O_RDONLY, libc::R_OK, &cred()).await.unwrap();
    assert_eq!(fake.call_order(), vec![NFSPROC3_GETATTR]);
    assert!(o.keep_cache);
    fs.release(o.fh).await.unwrap();
    // Changed by someone else: the kernel must drop its pages.
    fake.poke(fake.lookup_id("f").unwrap(), 0, b"changed");
    let o = fs.open_checked(e.ino, libc::O_RDONLY, libc::R_OK, &cred()).await.unwrap();
    assert!(!o.keep_cache, "a foreign change drops the kernel's pages");
    assert_eq!(&read_all(&fs, o.fh, SIZE as u64).await[..7], b"changed");
    fs.release(o.fh).await.unwrap();
}

/// Reads of cached data are answered at once (`try_read`, what the FUSE
/// reader thread calls): no hop to the runtime, no call. Data not cached,
/// or attributes not trusted, are left to `read`.
#[tokio::test(start_paused = true)]
async fn cached_reads_are_answered_at_once() {
    let fake = Fake::new();
    fake.add_file("f", &pattern(10_000, 5));
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    assert!(fs.try_read(fh, 0, 4096).is_none(), "nothing cached yet");
    assert_eq!(read_all(&fs, fh, 10_000).await, pattern(10_000, 5));
    fake.reset_counts();
    let got = fs.try_read(fh, 1000, 4096).expect("cached").unwrap();
    assert_eq!(&got[..], &pattern(10_000, 5)[1000..5096]);
    assert!(fs.try_read(fh, 20_000, 10).expect("past the end").unwrap().is_empty());
    assert_eq!(fake.call_order(), Vec::<u32>::new(), "no call");
    // Once the attributes expire, the read must revalidate: not here.
    tokio::time::advance(Duration::from_secs(120)).await;
    assert!(fs.try_read(fh, 0, 10).is_none());
    fs.release(fh).await.unwrap();
}

/// One file's slow COMMIT (a big file's close waiting for the server's
/// disk) holds up nothing else: another file is created, written, closed
/// and read back, and names are looked up, while it is still out.
#[tokio::test]
async fn a_slow_commit_holds_up_no_other_file() {
    let fake = Fake::new();
    fake.add_file("big", b"");
    let fs = mount(&fake, config()).await;
    let (_, big) = open_file(&fs, "big", libc::O_WRONLY).await;
    fs.write(big, 0, &pattern(4 * 64 * 1024, 1)).await.unwrap();
    let gate = fake.gate(NFSPROC3_COMMIT);
    let closing = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.flush(big).await })
    };
    // Wait until the COMMIT is out (held at the server).
    fake.until_called(NFSPROC3_COMMIT).await;
    let root = Cred { uid: 0, gid: 0, groups: vec![] };
    let other = async {
        let (e, fh) = fs.create(ROOT_INO, b"small", 0o644, libc::O_RDWR | libc::O_EXCL, &root).await.unwrap();
        fs.write(fh, 0, b"not held up").await.unwrap();
        fs.flush(fh).await.unwrap();
        assert_eq!(&fs.read(fh, 0, 100).await.unwrap()[..], b"not held up");
        fs.release(fh).await.unwrap();
        fs.lookup(ROOT_INO, b"big", &cred()).await.unwrap();
        e.ino
    };
    tokio::time::timeout(Duration::from_secs(10), other).await.expect("the other file's work finished");
    assert!(!closing.is_finished(), "the big file's close is still waiting for its COMMIT");
    gate.add_permits(1);
    fake.ungate(NFSPROC3_COMMIT);
    closing.await.unwrap().unwrap();
}

#[tokio::test]
async fn verifier_change_between_write_and_commit_resends_everything() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    let data = pattern(512 * KIB as usize, 3);
    fs.write(fh, 0, &data).await.unwrap();
    // The server restarts after taking the WRITEs, before the COMMIT: the
    // unstable data is gone there.
    fake.restart_before_commits(1);
    fs.flush(fh).await.unwrap();
    assert_eq!(fake.stable(id), data, "nothing lost");
    assert_eq!(fake.calls(NFSPROC3_COMMIT), 2);
    assert_eq!(fake.calls(NFSPROC3_WRITE), 16, "8 WRITEs, then all 8 again");
    assert_eq!(fs.stats().resent_bytes, data.len() as u64);
}

#[tokio::test]
async fn resend_never_puts_old_data_over_newer() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let mut cfg = config();
    cfg.eager = true;
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    fs.write(fh, 0, &[1u8; 64 * 1024]).await.unwrap();
    fs.flush(fh).await.unwrap();
    // Old data sent (eager: a full wsize goes at once) but not committed,
    // then overwritten; the server restarts before the COMMIT.
    fs.write(fh, 0, &[2u8; 64 * 1024]).await.unwrap();
    fs.write(fh, 0, &[3u8; 64 * 1024]).await.unwrap();
    fake.restart_before_commits(1);
    fs.flush(fh).await.unwrap();
    assert_eq!(fake.stable(id), vec![3u8; 64 * 1024]);
}

#[tokio::test]
async fn write_and_commit_errors_are_reported_once_per_handle() {
    let fake = Fake::new();
    fake.add_file("f", b"");
    let fs = mount(&fake, config()).await;
    let (ino, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    let fh2 = fs.open(ino, libc::O_WRONLY, &cred()).await.unwrap();
    fake.fail(NFSPROC3_WRITE, Nfsstat3::Nospc, Some(1));
    fs.write(fh, 0, &[1u8; 1000]).await.expect("buffered: the error comes later");
    let e = fs.flush(fh).await.unwrap_err();
    assert_eq!(e.errno(), libc::ENOSPC);
    fs.flush(fh).await.expect("reported once");
    // The other handle learns about it too, on its next write.
    assert_eq!(fs.write(fh2, 0, b"x").await.unwrap_err().errno(), libc::ENOSPC);
    fake.fail(NFSPROC3_COMMIT, Nfsstat3::Dquot, Some(1));
    // More than one WRITE's worth, so the fsync sends UNSTABLE + COMMIT (a
    // single WRITE would go FILE_SYNC, with no COMMIT to fail).
    fs.write(fh, 0, &[2u8; 128 * 1024]).await.unwrap();
    assert_eq!(fs.fsync(fh).await.unwrap_err().errno(), libc::EDQUOT);
    fs.release(fh).await.unwrap();
    assert_eq!(fs.release(fh2).await.unwrap_err().errno(), libc::EDQUOT);
}

#[tokio::test]
async fn a_close_through_a_shared_handle_leaves_the_error_for_fsync() {
    // One open file, two processes (fork): the child's close(2) sees the
    // write-back error, and the parent's fsync(2) must still report it.
    let fake = Fake::new();
    fake.add_file("f", b"");
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    fake.fail(NFSPROC3_WRITE, Nfsstat3::Nospc, Some(1));
    fs.write(fh, 0, &[1u8; 1000]).await.expect("buffered: the error comes later");
    assert_eq!(fs.flush(fh).await.unwrap_err().errno(), libc::ENOSPC, "the close that wrote back");
    assert_eq!(fs.fsync(fh).await.unwrap_err().errno(), libc::ENOSPC, "fsync after another close");
    fs.fsync(fh).await.expect("each fsync error is reported once");
    fs.flush(fh).await.expect("and a close after the fsync has nothing new to say");
}

#[tokio::test]
async fn reads_see_our_unwritten_data_and_cached_data_is_not_read_twice() {
    let fake = Fake::new();
    let data = pattern(200 * 1024, 9);
    fake.add_file("f", &data);
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDWR).await;
    assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
    let n = fake.reads().len();
    assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
    assert_eq!(fake.reads().len(), n, "second pass served from memory");
    fs.write(fh, 100, b"dirty bytes").await.unwrap();
    fs.write(fh, data.len() as u64 + 10, b"tail").await.unwrap();
    let mut want = data.clone();
    want[100..111].copy_from_slice(b"dirty bytes");
    want.extend_from_slice(&[0; 10]);
    want.extend_from_slice(b"tail");
    assert_eq!(fake.calls(NFSPROC3_WRITE), 0);
    assert_eq!(read_all(&fs, fh, want.len() as u64).await, want);
}

// ----- flow control ----------------------------------------------------

#[tokio::test]
async fn try_write_buffers_without_waiting_and_leaves_a_full_bound_to_write() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let mut cfg = config();
    cfg.dirty_bytes_max = 256 * KIB;
    let fs = mount(&fake, cfg.clone()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    // WRITEs are held at the server: nothing gives bytes back.
    let gate = fake.gate(NFSPROC3_WRITE);
    let block = pattern(8192, 9);
    let mut accepted = 0u64;
    while let Some(r) = fs.try_write(fh, accepted, &block) {
        assert_eq!(r.unwrap(), 8192);
        accepted += 8192;
        assert!(accepted <= cfg.dirty_bytes_max, "try_write went past the dirty bound");
    }
    assert_eq!(accepted, cfg.dirty_bytes_max, "try_write took everything up to the bound");
    assert_eq!(fs.stats().writes_waited, 0, "try_write never waits");
    // Refused again without taking anything: once WRITEs complete, the
    // waiting write() gets in and the file is whole.
    assert!(fs.try_write(fh, accepted, &block).is_none());
    let pending = {
        let fs = fs.clone();
        let block = block.clone();
        tokio::spawn(async move { fs.write(fh, accepted, &block).await })
    };
    gate.add_permits(1 << 20);
    fake.ungate(NFSPROC3_WRITE);
    assert_eq!(pending.await.unwrap().unwrap(), 8192);
    fs.flush(fh).await.unwrap();
    let want: Vec<u8> = (0..accepted / 8192 + 1).flat_map(|_| block.clone()).collect();
    assert_eq!(fake.stable(id), want);
    // A bad handle is an answer (an error), not "use write instead".
    assert!(fs.try_write(u64::MAX, 0, &block).unwrap().is_err(), "unknown handle");
}

#[tokio::test]
async fn flow_control_has_no_stalls_and_never_waits_for_a_commit() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let mut cfg = config();
    cfg.dirty_bytes_max = 1024 * KIB;
    cfg.unstable_bytes_max = 4096 * KIB;
    cfg.commit_bytes = 256 * KIB;
    let fs = mount(&fake, cfg.clone()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
    let block = pattern(8192, 5);
    for i in 0..10_000u64 {
        fs.write(fh, i * 8192, &block).await.unwrap();
    }
    fs.flush(fh).await.unwrap();
    let st = fs.stats();
    assert!(st.writes_waited > 0, "the bound was reached and writers waited: {st:?}");
    assert_eq!(st.writes_waited_several_releases, 0, "each wait ended at the first WRITE completion: {st:?}");
    assert_eq!(st.writes_waited_on_commit, 0, "{st:?}");
    assert_eq!(st.flusher_stalls_on_unstable, 0, "{st:?}");
    assert!(st.dirty_bytes_peak <= cfg.dirty_bytes_max, "{st:?}");
    assert!(st.unstable_bytes_peak <= cfg.unstable_bytes_max, "{st:?}");
    assert!(fake.calls(NFSPROC3_COMMIT) > 1, "unstable data was committed early");
    assert!(fake.writes().iter().all(|w| w.stable == StableHow::Unstable));
    let stable = fake.stable(id);
    assert_eq!(stable.len(), 10_000 * 8192);
    assert!(stable.chunks(8192).all(|c| c == &block[..]));
}

// ----- eager write-back ------------------------------------------------

#[tokio::test]
async fn eager_writes_in_offset_order_before_close() {
    for eager in [true, false] {
        let fake = Fake::new();
        let id = fake.add_file("f", b"");
        let mut cfg = config();
        cfg.eager = eager;
        cfg.eager_file_bytes_max = 256 * KIB;
        let fs = mount(&fake, cfg).await;
        let (_, fh) = open_file(&fs, "f", libc::O_WRONLY).await;
        let data = pattern(2048 * KIB as usize, 1);
        for (i, piece) in data.chunks(8192).enumerate() {
            fs.write(fh, i as u64 * 8192, piece).await.unwrap();
        }
        let before_close = fake.writes();
        fs.flush(fh).await.unwrap();
        assert_eq!(fake.stable(id), data);
        if eager {
            assert!(
                before_close.len() >= 24,
                "eager: WRITEs went out while writing ({})",
                before_close.len()
            );
            let offsets: Vec<u64> = fake.writes().iter().map(|w| w.offset).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]), "in offset order: {offsets:?}");
            assert_eq!(offsets.len(), 32);
        } else {
            assert!(before_close.is_empty(), "write-behind below the bound waits for close");
        }
    }
}

// ----- read-ahead ------------------------------------------------------

#[tokio::test]
async fn sequential_reads_prefetch_random_reads_do_not() {
    let fake = Fake::new();
    let data = pattern(2048 * KIB as usize, 2);
    let id = fake.add_file("f", &data);
    let mut cfg = config();
    cfg.readahead_bytes = 256 * KIB;
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    let mut ahead = 0;
    for i in 0..(data.len() as u64 / 16384) {
        let off = i * 16384;
        let b = fs.read(fh, off, 16384).await.unwrap();
        assert_eq!(&b[..], &data[off as usize..off as usize + 16384]);
        let reader_chunk_end = (off / (64 * KIB) + 1) * 64 * KIB;
        if fake.reads().iter().any(|(f, o, _)| *f == id && *o >= reader_chunk_end) {
            ahead += 1;
        }
    }
    assert!(ahead > 0, "READs were issued ahead of the reader");
    let offsets: Vec<u64> = fake.reads().iter().map(|r| r.1).collect();
    let mut dedup = offsets.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), offsets.len(), "no chunk read twice");
    assert!(fs.stats().readahead_chunks > 0);

    // Random reads on a fresh mount: every READ is for a chunk asked for.
    let fs = mount(&fake, fs.config().clone()).await;
    fake.reset_counts();
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    let mut asked = Vec::new();
    for k in [17u64, 3, 29, 11, 0, 23, 7, 19] {
        let off = k * 64 * KIB + 100;
        fs.read(fh, off, 1000).await.unwrap();
        asked.push(k * 64 * KIB);
    }
    for (_, o, _) in fake.reads() {
        assert!(asked.contains(&o), "READ at {o} was not asked for");
    }
    assert_eq!(fake.reads().len(), asked.len());
}

/// Behind a mount the kernel's page cache keeps what a sequential reader
/// read, so the mount drops its own copy once the reader is well past it
/// (a 1 GiB read used to leave 256 MiB duplicated and page-faulted in).
/// Random readers keep theirs; with drop-behind off everything stays.
#[tokio::test]
async fn a_sequential_reader_drops_chunks_behind_it_a_random_reader_does_not() {
    let fake = Fake::new();
    let len = 4 * DROP_BEHIND_BYTES_MIN;
    let data = pattern(len as usize, 9);
    let id = fake.add_file("f", &data);
    let chunk = 64 * KIB;

    for drop_behind in [true, false] {
        let mut cfg = config();
        cfg.drop_behind = drop_behind;
        let fs = mount(&fake, cfg).await;
        let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
        assert!(read_all(&fs, fh, len).await == data, "the data, drop_behind={drop_behind}");
        if drop_behind {
            // What is left: the lag behind the reader and the chunk it is in.
            assert!(fs.cached_bytes() <= DROP_BEHIND_BYTES_MIN + chunk, "cached {}", fs.cached_bytes());
            assert_eq!(fs.stats().dropped_behind_chunks, (len - DROP_BEHIND_BYTES_MIN - chunk) / chunk);
        } else {
            assert_eq!(fs.cached_bytes(), len);
            assert_eq!(fs.stats().dropped_behind_chunks, 0);
        }
        // Reading the start again: from the server only if it was dropped,
        // and right either way.
        fake.reset_counts();
        let b = fs.read(fh, 0, 4096).await.unwrap();
        assert_eq!(&b[..], &data[..4096]);
        let again = fake.reads().iter().filter(|(f, o, _)| *f == id && *o == 0).count();
        assert_eq!(again, usize::from(drop_behind), "READs of offset 0 again, drop_behind={drop_behind}");
    }

    // A random reader over the same range keeps every chunk it fetched.
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    let n = len / chunk;
    let mut k = 7u64;
    for _ in 0..n {
        k = (k * 37 + 11) % n; // full period: every chunk once
        let off = k * chunk + 100;
        let b = fs.read(fh, off, 1000).await.unwrap();
        assert_eq!(&b[..], &data[off as usize..off as usize + 1000]);
    }
    assert_eq!(fs.stats().dropped_behind_chunks, 0);
    assert_eq!(fs.cached_bytes(), len);
}

/// `drop_whole_reads` (FUSE mounts): a read that takes a whole file from its start in one
/// request (cat of a small file) leaves nothing cached in the mount, whose kernel keeps the
/// pages; a read of part of a file, or from past its start, keeps its chunks as before.
#[tokio::test]
async fn a_file_read_whole_in_one_request_is_not_kept_when_the_kernel_keeps_it() {
    let fake = Fake::new();
    let data = pattern(3000, 5);
    let id = fake.add_file("s", &data);
    for drop_whole in [true, false] {
        let mut cfg = config();
        cfg.drop_whole_reads = drop_whole;
        let fs = mount(&fake, cfg).await;
        let (_, fh) = open_file(&fs, "s", libc::O_RDONLY).await;
        // Part of the file, then the rest from past its start: kept either way.
        assert_eq!(&fs.read(fh, 0, 1000).await.unwrap()[..], &data[..1000]);
        assert_eq!(&fs.read(fh, 1000, 4096).await.unwrap()[..], &data[1000..]);
        assert_eq!(fs.cached_bytes(), 3000, "partial reads, drop_whole_reads={drop_whole}");
        // The whole file in one request: dropped only when asked.
        fake.reset_counts();
        assert_eq!(&fs.read(fh, 0, 128 * 1024).await.unwrap()[..], &data[..]);
        assert_eq!(fake.reads().len(), 0, "answered from the cache");
        let left = if drop_whole { 0 } else { 3000 };
        assert_eq!(fs.cached_bytes(), left, "after a whole read, drop_whole_reads={drop_whole}");
        // Read again: from the server only if it was dropped, and right either way (the
        // first of them a miss that fetched, then dropped it again).
        assert_eq!(&fs.read(fh, 0, 128 * 1024).await.unwrap()[..], &data[..]);
        let again = fake.reads().iter().filter(|(f, o, _)| *f == id && *o == 0).count();
        assert_eq!(again, usize::from(drop_whole), "READs again, drop_whole_reads={drop_whole}");
        assert_eq!(fs.cached_bytes(), left);
    }
}

// ----- directories -----------------------------------------------------

#[tokio::test]
async fn readdirplus_fills_the_lookup_and_attribute_caches() {
    let fake = Fake::new();
    for i in 0..10 {
        fake.add_file(&format!("f{i}"), b"abc");
    }
    fake.set_readdir_page_entries(4);
    let fs = mount(&fake, config()).await;
    let dh = fs.opendir(ROOT_INO, &cred()).await.unwrap();
    let mut names = Vec::new();
    let mut offset = 0;
    loop {
        let page = fs.readdir(dh, offset).await.unwrap();
        if page.is_empty() {
            break;
        }
        // Take two at a time, as a small FUSE buffer would.
        for e in page.iter().take(2) {
            names.push(String::from_utf8(e.name.to_vec()).unwrap());
            offset = e.offset;
        }
    }
    fs.releasedir(dh).unwrap();
    assert_eq!(names.len(), 12, "{names:?}");
    assert!(fake.calls(NFSPROC3_READDIRPLUS) >= 3);
    let (l0, g0) = (fake.calls(NFSPROC3_LOOKUP), fake.calls(NFSPROC3_GETATTR));
    for i in 0..10 {
        let e = fs.lookup(ROOT_INO, format!("f{i}").as_bytes(), &cred()).await.unwrap();
        assert_eq!(e.attr.size, 3);
    }
    assert_eq!(fake.calls(NFSPROC3_LOOKUP), l0, "names came from READDIRPLUS");
    assert_eq!(fake.calls(NFSPROC3_GETATTR), g0, "attributes too");
}

#[tokio::test]
async fn readdir_falls_back_when_readdirplus_is_not_supported() {
    let fake = Fake::new();
    let id = fake.add_file("only", b"");
    fake.set_readdirplus_notsupp(true);
    let fs = mount(&fake, config()).await;
    for round in 0..2 {
        let dh = fs.opendir(ROOT_INO, &cred()).await.unwrap();
        let page = fs.readdir(dh, 0).await.unwrap();
        let e = page.iter().find(|e| &e.name[..] == b"only").expect("entry listed");
        assert_eq!(e.ino, id);
        assert!(fs.readdir(dh, page.last().unwrap().offset).await.unwrap().is_empty());
        fs.releasedir(dh).unwrap();
        if round == 0 {
            // A change of ours: the next listing is read again.
            fs.mkdir(ROOT_INO, b"sub", 0o755, &cred()).await.unwrap();
        }
    }
    assert_eq!(fake.calls(NFSPROC3_READDIRPLUS), 1, "NOTSUPP is remembered");
    assert_eq!(fake.calls(NFSPROC3_READDIR), 2);
}

/// A directory listed whole is listed again from the cache (rm -r opens
/// each directory twice) while its attributes are trusted and nothing of
/// ours changed it, as Linux keeps a directory's pages; a change of ours,
/// or someone else's seen in the attributes, reads it again.
#[tokio::test(start_paused = true)]
async fn a_directory_listed_whole_is_listed_again_from_the_cache() {
    let fake = Fake::new();
    fake.add_dir("d");
    fake.add_file_in("d", "a", b"1");
    let mut cfg = config();
    cfg.acdirmin = Duration::from_secs(30);
    cfg.acdirmax = Duration::from_secs(60);
    let fs = mount(&fake, cfg).await;
    let d = fs.lookup(ROOT_INO, b"d", &cred()).await.unwrap().ino;
    let list = |fs: CachedFs<Fake>| async move {
        let dh = fs.opendir(d, &cred()).await.unwrap();
        let mut names: Vec<String> = fs
            .readdir(dh, 0)
            .await
            .unwrap()
            .iter()
            .map(|e| String::from_utf8(e.name.to_vec()).unwrap())
            .filter(|n| n != "." && n != "..")
            .collect();
        fs.releasedir(dh).unwrap();
        names.sort();
        names
    };
    assert_eq!(list(fs.clone()).await, ["a"]);
    assert_eq!(list(fs.clone()).await, ["a"]);
    assert_eq!(fake.calls(NFSPROC3_READDIRPLUS), 1, "the second listing came from the cache");
    // Ours: a new name, listed at once.
    let (_, fh) = fs.create(d, b"b", 0o644, libc::O_WRONLY | libc::O_EXCL, &cred()).await.unwrap();
    fs.release(fh).await.unwrap();
    assert_eq!(list(fs.clone()).await, ["a", "b"]);
    assert_eq!(fake.calls(NFSPROC3_READDIRPLUS), 2);
    // Someone else's: seen once the directory's attributes expire.
    fake.add_file_in("d", "c", b"3");
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(list(fs.clone()).await, ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn lookupcache_modes() {
    for mode in [LookupCache::All, LookupCache::Positive, LookupCache::None] {
        let fake = Fake::new();
        fake.add_file("here", b"");
        let mut cfg = config();
        cfg.lookupcache = mode;
        cfg.acdirmin = Duration::from_secs(30);
        cfg.acdirmax = Duration::from_secs(60);
        let fs = mount(&fake, cfg).await;
        for _ in 0..2 {
            fs.lookup(ROOT_INO, b"here", &cred()).await.unwrap();
            let e = fs.lookup(ROOT_INO, b"gone", &cred()).await.unwrap_err();
            assert_eq!(e.errno(), libc::ENOENT);
        }
        let calls = fake.calls(NFSPROC3_LOOKUP);
        match mode {
            LookupCache::All => assert_eq!(calls, 2, "both answers cached"),
            LookupCache::Positive => assert_eq!(calls, 3, "only the positive answer cached"),
            LookupCache::None => assert_eq!(calls, 4, "nothing cached"),
        }
        if mode == LookupCache::All {
            // The negative entry expires with the directory's attributes.
            tokio::time::advance(Duration::from_secs(31)).await;
            assert!(fs.lookup(ROOT_INO, b"gone", &cred()).await.is_err());
            assert_eq!(fake.calls(NFSPROC3_LOOKUP), 3);
        }
    }
}

/// Names in a directory made here are all known: looking up a new name
/// there (as an untar does before each create) asks nobody, until someone
/// else changes the directory.
#[tokio::test(start_paused = true)]
async fn a_directory_made_here_answers_lookups_of_new_names_itself() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, &cred()).await.unwrap();
    fake.reset_counts();
    for i in 0..5 {
        let name = format!("f{i}");
        let e = fs.lookup(d.ino, name.as_bytes(), &cred()).await.unwrap_err();
        assert_eq!(e.errno(), libc::ENOENT);
        fs.create(d.ino, name.as_bytes(), 0o644, libc::O_EXCL, &cred()).await.unwrap();
    }
    assert_eq!(fake.calls(NFSPROC3_LOOKUP), 0, "every negative answer came from the cache");
    assert!(fs.lookup(d.ino, b"f3", &cred()).await.is_ok());
    // Another client creates a name: once the directory's attributes are
    // checked again, the cache no longer claims to know every name.
    fake.add_file_in("d", "theirs", b"x");
    tokio::time::advance(Duration::from_secs(120)).await;
    assert!(fs.lookup(d.ino, b"theirs", &cred()).await.is_ok(), "a foreign create is found");
}

#[tokio::test]
async fn directory_operations_keep_the_lookup_cache_right() {
    let fake = Fake::new();
    let fs = mount(&fake, config()).await;
    let c = cred();
    let (e, fh) = fs.create(ROOT_INO, b"new", 0o600, libc::O_EXCL, &c).await.unwrap();
    fs.write(fh, 0, b"content").await.unwrap();
    fs.release(fh).await.unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"new", &c).await.unwrap().ino, e.ino);
    let d = fs.mkdir(ROOT_INO, b"sub", 0o755, &c).await.unwrap();
    fs.rename(ROOT_INO, b"new", d.ino, b"moved", &c).await.unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"new", &c).await.unwrap_err().errno(), libc::ENOENT);
    assert_eq!(fs.lookup(d.ino, b"moved", &c).await.unwrap().ino, e.ino);
    let l = fs.symlink(d.ino, b"link", b"moved", &c).await.unwrap();
    assert_eq!(&fs.readlink(l.ino, &c).await.unwrap()[..], b"moved");
    fs.link(e.ino, ROOT_INO, b"hard", &c).await.unwrap();
    fs.unlink(d.ino, b"moved", &c).await.unwrap();
    assert_eq!(fs.lookup(d.ino, b"moved", &c).await.unwrap_err().errno(), libc::ENOENT);
    let fh = fs.open(fs.lookup(ROOT_INO, b"hard", &c).await.unwrap().ino, libc::O_RDONLY, &c).await.unwrap();
    assert_eq!(&fs.read(fh, 0, 100).await.unwrap()[..], b"content");
    assert_eq!(
        fs.create(ROOT_INO, b"hard", 0o600, libc::O_EXCL, &c).await.unwrap_err().errno(),
        libc::EEXIST
    );
    let st = fs.statfs(ROOT_INO, &c).await.unwrap();
    assert_eq!(st.total_bytes, 1 << 30);
}

// ----- disk cache ------------------------------------------------------

#[tokio::test]
async fn disk_cache_serves_a_reread_after_restart_without_reads() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let data = pattern(300 * KIB as usize, 4);
    let id = fake.add_file("f", &data);
    let mut cfg = config();
    cfg.disk_cache_dir = Some(dir.path().to_path_buf());
    {
        let fs = mount(&fake, cfg.clone()).await;
        let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
        assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
        fs.release(fh).await.unwrap();
    }
    // A new client (process restart) with the same cache directory.
    fake.reset_counts();
    let fs = mount(&fake, cfg.clone()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
    assert_eq!(fake.calls(NFSPROC3_READ), 0, "served from disk");
    assert_eq!(fs.stats().disk_hits, 5);
    fs.release(fh).await.unwrap();
    drop(fs);

    // The file changes on the server: the disk copy is not used.
    fake.poke(id, 0, b"changed");
    let fs = mount(&fake, cfg.clone()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    assert_eq!(&fs.read(fh, 0, 7).await.unwrap()[..], b"changed");
    assert!(fake.calls(NFSPROC3_READ) > 0);
}

#[tokio::test]
async fn sync_all_waits_for_read_ahead_to_reach_the_disk_cache() {
    // Unmount calls sync_all and then the process exits: a read-ahead still
    // fetching or storing then loses its chunks, and the next client reads
    // them from the server again.
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let data = pattern(1024 * KIB as usize, 8);
    fake.add_file("f", &data);
    let mut cfg = config();
    cfg.readahead_bytes = 256 * KIB;
    cfg.disk_cache_dir = Some(dir.path().to_path_buf());
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    // A sequential reader: its first read fetches chunk 0 and reads chunks
    // 1..=4 ahead (the 256 KiB window past its chunk); once it is in chunk
    // 3 the lead is under half the window and chunks 5..=7 are fetched.
    // Those READs are held at the server.
    let step = 16 * KIB;
    let gate_at = 3 * 64 * KIB;
    for off in (0..=gate_at).step_by(step as usize) {
        if off == gate_at {
            fake.gate(NFSPROC3_READ);
        }
        let got = fs.read(fh, off, step as u32).await.unwrap();
        assert_eq!(&got[..], &data[off as usize..(off + step) as usize]);
    }
    let sync = tokio::spawn({
        let fs = fs.clone();
        async move { fs.sync_all().await }
    });
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!sync.is_finished(), "sync_all returned with a read-ahead still waiting for its READs");
    fake.ungate(NFSPROC3_READ);
    sync.await.unwrap().unwrap();
    assert_eq!(walk(dir.path()).len(), 8, "every chunk fetched is on disk");
    assert_eq!(fs.stats().readahead_chunks, 7);
}

#[tokio::test]
async fn disk_cache_survives_damage_and_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::new();
    let data = pattern(640 * KIB as usize, 6);
    fake.add_file("f", &data);
    let mut cfg = config();
    cfg.disk_cache_dir = Some(dir.path().to_path_buf());
    cfg.disk_cache_bytes_max = 4 * (64 * KIB + 64);
    {
        let fs = mount(&fake, cfg.clone()).await;
        let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
        assert_eq!(read_all(&fs, fh, data.len() as u64).await, data);
    }
    let files: Vec<_> = walk(dir.path());
    let total: u64 = files.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(total <= cfg.disk_cache_bytes_max, "culled to the bound: {total}");
    assert!(!files.is_empty() && files.len() <= 4);
    // Damage every chunk file: a truncated one and garbage.
    for (i, p) in files.iter().enumerate() {
        if i % 2 == 0 {
            let len = std::fs::metadata(p).unwrap().len();
            std::fs::OpenOptions::new().write(true).open(p).unwrap().set_len(len / 2).unwrap();
        } else {
            std::fs::write(p, b"garbage").unwrap();
        }
    }
    fake.reset_counts();
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    assert_eq!(read_all(&fs, fh, data.len() as u64).await, data, "damage is a miss, not an error");
    assert_eq!(fs.stats().disk_hits, 0);
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

// ----- errors ----------------------------------------------------------

#[tokio::test]
async fn server_errors_reach_callers_as_their_errno() {
    let fake = Fake::new();
    fake.add_file("f", b"data");
    let fs = mount(&fake, config()).await;
    let c = cred();
    let e = fs.lookup(ROOT_INO, b"f", &c).await.unwrap();

    fake.fail(NFSPROC3_GETATTR, Nfsstat3::Stale, Some(1));
    assert_eq!(fs.open(e.ino, libc::O_RDONLY, &c).await.unwrap_err().errno(), libc::ESTALE);
    fake.fail(NFSPROC3_ACCESS, Nfsstat3::Acces, Some(1));
    assert_eq!(fs.access(e.ino, libc::R_OK, &c).await.unwrap_err().errno(), libc::EACCES);
    fake.fail(NFSPROC3_CREATE, Nfsstat3::Rofs, Some(1));
    assert_eq!(fs.create(ROOT_INO, b"n", 0o644, 0, &c).await.unwrap_err().errno(), libc::EROFS);
    fake.fail(NFSPROC3_MKDIR, Nfsstat3::Dquot, Some(1));
    assert_eq!(fs.mkdir(ROOT_INO, b"d", 0o755, &c).await.unwrap_err().errno(), libc::EDQUOT);
    fake.fail(NFSPROC3_SETATTR, Nfsstat3::Nospc, Some(1));
    let grow = Sattr3 { size: Some(1 << 20), ..Sattr3::default() };
    assert_eq!(fs.setattr(e.ino, grow, &c).await.unwrap_err().errno(), libc::ENOSPC);
    assert_eq!(fs.getattr(999_999, &c).await.unwrap_err(), FsError::UnknownInode(999_999));
    assert_eq!(fs.read(424242, 0, 1).await.unwrap_err().errno(), libc::EBADF);

    // A read-only mount refuses locally.
    let mut cfg = config();
    cfg.read_only = true;
    let ro = mount(&fake, cfg).await;
    assert_eq!(ro.create(ROOT_INO, b"x", 0o644, 0, &c).await.unwrap_err().errno(), libc::EROFS);
    let e = ro.lookup(ROOT_INO, b"f", &c).await.unwrap();
    assert_eq!(ro.open(e.ino, libc::O_WRONLY, &c).await.unwrap_err().errno(), libc::EROFS);
}

#[tokio::test]
async fn truncate_writes_back_first_and_drops_data_past_the_end() {
    let fake = Fake::new();
    let id = fake.add_file("f", &pattern(100 * 1024, 8));
    let fs = mount(&fake, config()).await;
    let (ino, fh) = open_file(&fs, "f", libc::O_RDWR).await;
    read_all(&fs, fh, 100 * 1024).await;
    fs.write(fh, 90 * 1024, b"late").await.unwrap();
    let e = fs.setattr(ino, Sattr3 { size: Some(10), ..Sattr3::default() }, &cred()).await.unwrap();
    assert_eq!(e.attr.size, 10);
    assert_eq!(fake.contents(id).len(), 10);
    assert_eq!(read_all(&fs, fh, 100).await.len(), 10);
    fs.write(fh, 20, b"z").await.unwrap();
    fs.release(fh).await.unwrap();
    let mut want = pattern(100 * 1024, 8)[..10].to_vec();
    want.extend_from_slice(&[0; 10]);
    want.push(b'z');
    assert_eq!(fake.stable(id), want);
}

// ----- random operations against a reference copy (fsx style) ----------

#[tokio::test]
async fn random_operations_match_a_reference_copy() {
    for seed in 1..=12u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let fake = Fake::new();
        let id = fake.add_file("f", b"");
        let mut cfg = config();
        cfg.wsize = 16 * 1024;
        cfg.rsize = 16 * 1024;
        cfg.eager = seed % 2 == 0;
        cfg.eager_file_bytes_max = 64 * KIB;
        cfg.dirty_bytes_max = 128 * KIB;
        cfg.unstable_bytes_max = 128 * KIB;
        cfg.commit_bytes = 32 * KIB;
        cfg.readahead_bytes = 64 * KIB;
        let fs = mount(&fake, cfg).await;
        let (ino, fh) = open_file(&fs, "f", libc::O_RDWR).await;
        let mut model: Vec<u8> = Vec::new();
        for step in 0..300 {
            match next(10) {
                0..=4 => {
                    let off = next(400 * 1024);
                    let len = 1 + next(40 * 1024) as usize;
                    let data = pattern(len, (seed as u8).wrapping_add(step as u8));
                    fs.write(fh, off, &data).await.unwrap();
                    if std::env::var("FSX_TRACE").is_ok() {
                        eprintln!("{step} write {off}+{len}");
                    }
                    let end = off as usize + len;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                }
                5..=7 => {
                    let off = next(450 * 1024);
                    let len = 1 + next(64 * 1024) as u32;
                    let got = fs.read(fh, off, len).await.unwrap();
                    if std::env::var("FSX_TRACE").is_ok() {
                        eprintln!("{step} read {off}+{len}");
                    }
                    let lo = (off as usize).min(model.len());
                    let hi = (off as usize + len as usize).min(model.len());
                    same(&got, &model[lo..hi], &format!("seed {seed} step {step}: read {off}+{len}"));
                }
                8 => {
                    if next(3) == 0 {
                        fake.restart_before_commits(1);
                        if std::env::var("FSX_TRACE").is_ok() {
                            eprintln!("{step} restart");
                        }
                    }
                    if std::env::var("FSX_TRACE").is_ok() {
                        eprintln!("{step} flush");
                    }
                    fs.flush(fh).await.unwrap();
                    same(&fake.stable(id), &model, &format!("seed {seed} step {step}: after flush"));
                }
                _ => {
                    let size = next(300 * 1024);
                    if std::env::var("FSX_TRACE").is_ok() {
                        eprintln!("{step} truncate {size}");
                    }
                    fs.setattr(ino, Sattr3 { size: Some(size), ..Sattr3::default() }, &cred()).await.unwrap();
                    model.resize(size as usize, 0);
                }
            }
            assert_eq!(
                fs.getattr(ino, &cred()).await.unwrap().attr.size,
                model.len() as u64,
                "seed {seed} step {step}: size"
            );
        }
        fs.release(fh).await.unwrap();
        same(&fake.stable(id), &model, &format!("seed {seed}: at close"));
    }
}

/// Compare byte strings, reporting the first difference instead of both.
fn same(got: &[u8], want: &[u8], what: &str) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i}: got {} want {}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

// ----- periodic write-back of old dirty data ------------------------------

#[tokio::test(start_paused = true)]
async fn dirty_data_of_a_file_never_closed_reaches_the_server_and_is_committed() {
    let fake = Fake::new();
    let id = fake.add_file("f", b"");
    let mut cfg = config();
    cfg.dirty_expire = Some(Duration::from_secs(30));
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDWR).await;
    // A short write: not a full WRITE, so nothing but age would send it.
    fs.write(fh, 0, b"written, never closed").await.unwrap();
    tokio::time::advance(Duration::from_secs(10)).await;
    tokio::task::yield_now().await;
    assert_eq!(fake.calls(NFSPROC3_WRITE), 0, "young dirty data stays in the cache");
    // Well past the expiry (checked every 15 s; data waits 30 to 45 s).
    for _ in 0..40 {
        tokio::time::advance(Duration::from_secs(1)).await;
        tokio::task::yield_now().await;
    }
    assert!(fake.calls(NFSPROC3_WRITE) >= 1, "old dirty data was not written back");
    assert_eq!(fake.calls(NFSPROC3_COMMIT), 1, "and committed");
    assert_eq!(fake.stable(id), b"written, never closed", "the server's stable copy has it");
}

#[tokio::test(start_paused = true)]
async fn without_dirty_expire_only_close_writes_back() {
    let fake = Fake::new();
    fake.add_file("f", b"");
    let mut cfg = config();
    cfg.dirty_expire = None;
    let fs = mount(&fake, cfg).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDWR).await;
    fs.write(fh, 0, b"kept").await.unwrap();
    for _ in 0..120 {
        tokio::time::advance(Duration::from_secs(1)).await;
        tokio::task::yield_now().await;
    }
    assert_eq!(fake.calls(NFSPROC3_WRITE), 0);
    fs.release(fh).await.unwrap();
    assert_eq!(fake.calls(NFSPROC3_WRITE), 1);
}

// ----- opens held on the server (NFSv4's, through the NfsOps capabilities) -----

/// A file unlinked while open needs a hidden name unless the server keeps it for the open
/// (NFSv4's OPEN4_RESULT_PRESERVE_UNLINKED): then the REMOVE goes at once, the open handle
/// still reads, and the open is ended at the last close.
#[tokio::test]
async fn an_open_file_is_removed_at_once_when_the_server_keeps_it_for_the_open() {
    for preserve in [false, true] {
        let fake = Fake::new();
        fake.set_opens(Some(preserve));
        fake.add_file("f", b"still here");
        let fs = mount(&fake, config()).await;
        let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
        fake.reset_counts();
        fs.unlink(ROOT_INO, b"f", &cred()).await.unwrap();
        let (removes, renames) = (fake.calls(NFSPROC3_REMOVE), fake.calls(NFSPROC3_RENAME));
        if preserve {
            assert_eq!((removes, renames), (1, 0), "removed at once, no hidden name");
        } else {
            assert_eq!((removes, renames), (0, 1), "renamed to a hidden name");
        }
        assert_eq!(read_all(&fs, fh, 100).await, b"still here", "the open file reads on");
        fs.release(fh).await.unwrap();
        fs.wait_background().await;
        assert_eq!(fake.calls(fake::FAKE_CLOSE), 1, "the open ended at the last close");
        assert_eq!(fake.calls(NFSPROC3_REMOVE), 1, "gone from the server either way");
    }
}

/// A file its program has closed is not open for an unlink that follows, even while the
/// close's release is still ending the open on the server (FUSE sends the release after
/// close(2) has returned, and the CLOSE may take a while): the name is removed at once, not
/// renamed to a hidden name that would keep a second link to the file.
#[tokio::test]
async fn an_unlink_after_the_close_removes_the_name_while_the_release_still_runs() {
    let fake = Fake::new();
    fake.set_opens(Some(false));
    fake.add_file("f", b"data");
    let fs = mount(&fake, config()).await;
    let (_, fh) = open_file(&fs, "f", libc::O_RDONLY).await;
    assert_eq!(read_all(&fs, fh, 100).await, b"data");
    fake.reset_counts();
    let gate = fake.gate(fake::FAKE_CLOSE);
    // The FUSE layer marks the handle closed as the release arrives, before it runs.
    fs.begin_release(fh);
    let release = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.release(fh).await })
    };
    fake.until_called(fake::FAKE_CLOSE).await;
    fs.unlink(ROOT_INO, b"f", &cred()).await.unwrap();
    assert_eq!(
        (fake.calls(NFSPROC3_REMOVE), fake.calls(NFSPROC3_RENAME)),
        (1, 0),
        "removed at once, no hidden name"
    );
    assert!(!release.is_finished(), "the CLOSE is still held");
    gate.add_permits(1);
    fake.ungate(fake::FAKE_CLOSE);
    release.await.unwrap().unwrap();
    fs.wait_background().await;
    assert_eq!(fake.calls(NFSPROC3_REMOVE), 1, "no hidden name left to remove");

    // A handle still open is open: its name still gets a hidden one.
    fake.add_file("g", b"data");
    let (_, open) = open_file(&fs, "g", libc::O_RDONLY).await;
    let (_, closed) = open_file(&fs, "g", libc::O_RDONLY).await;
    fake.reset_counts();
    let gate = fake.gate(fake::FAKE_CLOSE);
    let release = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.release(closed).await })
    };
    fake.until_called(fake::FAKE_CLOSE).await;
    fs.unlink(ROOT_INO, b"g", &cred()).await.unwrap();
    assert_eq!((fake.calls(NFSPROC3_REMOVE), fake.calls(NFSPROC3_RENAME)), (0, 1), "hidden while open");
    gate.add_permits(1);
    fake.ungate(fake::FAKE_CLOSE);
    release.await.unwrap().unwrap();
    fs.release(open).await.unwrap();
    fs.wait_background().await;
    assert_eq!(fake.calls(NFSPROC3_REMOVE), 1, "the hidden name goes at the last close");
}

/// `dirops=async`: an unlink in a directory held under a delegation returns with its REMOVE
/// still out; a create of the same name waits for it (else the server would find the old
/// name), and so does an fsync of the directory. A REMOVE that fails is reported by the next
/// fsync of a directory, once. Without a delegation an unlink waits for its REMOVE.
#[tokio::test]
async fn with_dirops_async_an_unlink_under_a_delegation_returns_first_and_later_calls_wait_for_it() {
    let fake = Fake::new();
    fake.set_delegated(true);
    for i in 0..3 {
        fake.add_file(&format!("f{i}"), b"x");
    }
    let fs = mount(&fake, CacheConfig { dirops_async: true, ..config() }).await;
    fs.set_recalls_write_back(true);
    for i in 0..3 {
        fs.lookup(ROOT_INO, format!("f{i}").as_bytes(), &cred()).await.unwrap();
    }
    let root = eagernfs_client::NfsOps::root(&fake);
    let gate = fake.gate(NFSPROC3_REMOVE);
    fs.unlink(ROOT_INO, b"f0", &cred()).await.unwrap();
    fake.until_called(NFSPROC3_REMOVE).await;
    assert!(fs.removes_pending(&root), "returned with the REMOVE held at the server");
    let create = {
        let fs = fs.clone();
        tokio::spawn(async move {
            fs.create(ROOT_INO, b"f0", 0o644, libc::O_WRONLY | libc::O_EXCL, &cred()).await
        })
    };
    let fsync = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.fsyncdir(ROOT_INO).await })
    };
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(fake.calls(NFSPROC3_CREATE), 0, "the create waits for the REMOVE");
    assert!(!fsync.is_finished(), "so does an fsync of the directory");
    gate.add_permits(1);
    create.await.unwrap().expect("made once the old name is gone");
    fsync.await.unwrap().unwrap();
    assert!(!fs.removes_pending(&root));
    fake.ungate(NFSPROC3_REMOVE);

    fake.fail(NFSPROC3_REMOVE, Nfsstat3::Acces, Some(1));
    fs.unlink(ROOT_INO, b"f1", &cred()).await.expect("returns before the REMOVE fails");
    assert!(fs.fsyncdir(ROOT_INO).await.is_err(), "the failure is reported");
    assert!(fs.fsyncdir(ROOT_INO).await.is_ok(), "once");
    assert_eq!(fs.stats().removes_later_failed, 1);

    fake.set_delegated(false);
    let gate = fake.gate(NFSPROC3_REMOVE);
    let unlink = {
        let fs = fs.clone();
        tokio::spawn(async move { fs.unlink(ROOT_INO, b"f2", &cred()).await })
    };
    fake.until_called(NFSPROC3_REMOVE).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(!unlink.is_finished(), "no delegation: the unlink waits for its REMOVE");
    gate.add_permits(1);
    unlink.await.unwrap().unwrap();
    assert_eq!(fs.stats().removes_later, 2);
}
