//! The caching layer over NFSv4 against an in-process eagernfs server: the
//! round trips issue 34 asks of a mount (counted as the COMPOUNDs the
//! client sends), with the opens they leave on the server.
//!
//! - A small file created, written, given its times and closed: two
//!   COMPOUNDs (OPEN that creates; WRITE, SETATTR, CLOSE), its data on the
//!   server when the close returns.
//! - A small file opened cold and read: one COMPOUND (ACCESS, GETATTR, OPEN,
//!   READ, CLOSE); the read is served from what it brought.
//! - A file of a known type removed: one COMPOUND (REMOVE, no LOOKUP).
//! - A larger file opened for reading: its open is held until the last
//!   close, which ends it.

// The server's black-box test harness (TestServer, export specs).
#[path = "../../server/tests/common/mod.rs"]
mod common;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{memory, spec, TestServer, WAIT};
use eagernfs_client::cache::{CachedFs, ROOT_INO};
use eagernfs_client::{Cred, MountOptions, Nfs4Client, NfsOps};
use eagernfs_proto::nfs3::*;

/// Fail the test instead of hanging it.
async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(WAIT, f).await.expect("test step timed out")
}

fn server() -> TestServer {
    TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )])
}

async fn connect(s: &TestServer) -> Nfs4Client {
    let url = format!("nfs://127.0.0.1:{}/export", s.addr.port());
    within(Nfs4Client::connect(&url)).await.expect("connect over NFSv4")
}

/// A cache as a FUSE mount sets it up, attributes trusted for minutes so
/// that no count depends on the machine's speed.
async fn mount(c: &Nfs4Client) -> CachedFs<Nfs4Client> {
    let long = Duration::from_secs(600);
    let opts =
        MountOptions { acregmin: long, acregmax: long, acdirmin: long, acdirmax: long, ..Default::default() };
    within(CachedFs::new_adjusted(c.clone(), &opts, |cfg| cfg.drop_whole_reads = true)).await.expect("mount")
}

/// COMPOUNDs sent so far, and how many of operation `op` they carried.
fn sent(c: &Nfs4Client, op: &str) -> (u64, u64) {
    let st = c.session_stats();
    let n = st.ops().into_iter().find(|(name, _)| *name == op).map_or(0, |(_, n)| n);
    (st.compounds.load(Ordering::Relaxed), n)
}

fn root() -> Cred {
    Cred::root()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_file_costs_two_round_trips_to_write_and_one_to_read_or_remove() {
    let s = server();
    let c = connect(&s).await;
    let fs = mount(&c).await;
    let cr = root();
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    let mtime = Nfstime3 { seconds: 1_600_000_000, nseconds: 0 };

    // tar's way: create, write, the times and mode through the open file, close.
    let (before, closes) = sent(&c, "CLOSE");
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
    let (e, fh) = within(fs.create(ROOT_INO, b"small", 0o600, flags, &cr)).await.unwrap();
    assert_eq!(sent(&c, "CLOSE").0 - before, 1, "create: one OPEN that creates");
    within(fs.write(fh, 0, &data)).await.unwrap();
    let times = Sattr3 {
        mode: Some(0o600),
        atime: SetTime::SetToClientTime(mtime),
        mtime: SetTime::SetToClientTime(mtime),
        ..Sattr3::default()
    };
    within(fs.setattr(e.ino, times, &cr)).await.unwrap();
    within(fs.flush(fh)).await.unwrap();
    within(fs.release(fh)).await.unwrap();
    let (after, closes_after) = sent(&c, "CLOSE");
    assert_eq!(after - before, 2, "write, times and close: one more COMPOUND");
    assert_eq!(closes_after - closes, 1, "the open ended with it");
    // On the server when close returned, with the times the program set.
    let (sfh, a) = within(c.lookup_path(&cr, "/small")).await.unwrap();
    assert_eq!(a.size, data.len() as u64);
    assert_eq!(a.mtime, mtime, "the held times went after the data");
    assert_eq!(within(c.read(&cr, &sfh, 0, 10_000)).await.unwrap().data, data);

    // Cold, from a cache that has never seen it (another mount).
    let c2 = connect(&s).await;
    let fs2 = mount(&c2).await;
    let e2 = within(fs2.lookup(ROOT_INO, b"small", &cr)).await.unwrap();
    let (before, closes) = sent(&c2, "CLOSE");
    let (_, reads) = sent(&c2, "READ");
    let o = within(fs2.open_checked(e2.ino, libc::O_RDONLY, libc::R_OK, &cr)).await.unwrap();
    let got = within(fs2.read(o.fh, 0, 128 * 1024)).await.unwrap();
    assert_eq!(&got[..], &data[..]);
    within(fs2.release(o.fh)).await.unwrap();
    assert_eq!(sent(&c2, "CLOSE").0 - before, 1, "open, read and close: one COMPOUND");
    assert_eq!(sent(&c2, "CLOSE").1 - closes, 1, "nothing left open on the server");
    assert_eq!(sent(&c2, "READ").1 - reads, 1, "one READ, in the open's COMPOUND");

    // A changed file is seen at the next open (close-to-open), and read again with it.
    let other: Vec<u8> = vec![7; 3000];
    within(c.write(&cr, &sfh, 0, other.clone().into(), StableHow::FileSync)).await.unwrap();
    within(c.setattr(&cr, &sfh, Sattr3 { size: Some(3000), ..Sattr3::default() }, None)).await.unwrap();
    let o = within(fs2.open_checked(e2.ino, libc::O_RDONLY, libc::R_OK, &cr)).await.unwrap();
    assert_eq!(within(fs2.read(o.fh, 0, 128 * 1024)).await.unwrap(), other);
    within(fs2.release(o.fh)).await.unwrap();

    // rm: the type is known here, so the server is not asked to check it.
    let (before, removes) = sent(&c2, "REMOVE");
    let (_, lookups) = sent(&c2, "LOOKUP");
    within(fs2.unlink(ROOT_INO, b"small", &cr)).await.unwrap();
    assert_eq!(sent(&c2, "REMOVE").0 - before, 1, "one COMPOUND");
    assert_eq!(sent(&c2, "REMOVE").1 - removes, 1);
    assert_eq!(sent(&c2, "LOOKUP").1 - lookups, 0, "no LOOKUP to check the type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_larger_file_keeps_its_open_until_the_last_close() {
    let s = server();
    let c = connect(&s).await;
    let fs = mount(&c).await;
    let cr = root();
    let data: Vec<u8> = (0..600_000u32).map(|i| (i % 241) as u8).collect();
    let (e, fh) =
        within(fs.create(ROOT_INO, b"big", 0o644, libc::O_RDWR | libc::O_CREAT, &cr)).await.unwrap();
    within(fs.write(fh, 0, &data)).await.unwrap();
    within(fs.flush(fh)).await.unwrap();
    within(fs.release(fh)).await.unwrap();

    let (_, opens) = sent(&c, "OPEN");
    let (_, closes) = sent(&c, "CLOSE");
    let a = within(fs.open_checked(e.ino, libc::O_RDONLY, libc::R_OK, &cr)).await.unwrap();
    let b = within(fs.open_checked(e.ino, libc::O_RDONLY, libc::R_OK, &cr)).await.unwrap();
    assert_eq!(sent(&c, "OPEN").1 - opens, 1, "one open on the server for both");
    let got = within(fs.read(a.fh, 500_000, 1000)).await.unwrap();
    assert_eq!(&got[..], &data[500_000..501_000]);
    within(fs.release(a.fh)).await.unwrap();
    assert_eq!(sent(&c, "CLOSE").1 - closes, 0, "still open through the other");
    within(fs.release(b.fh)).await.unwrap();
    // The CLOSE waits a moment for a COMPOUND to ride on; none comes, so it goes alone.
    let deadline = std::time::Instant::now() + WAIT;
    while sent(&c, "CLOSE").1 == closes {
        assert!(std::time::Instant::now() < deadline, "the last close never ended the open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sent(&c, "CLOSE").1 - closes, 1, "the last close ends it");
}

/// What tar does as root: create 0600, write, set the times and owner (held), chmod 0644 (a
/// real change: on the server before it returns, after the data), close. Over NFSv4 that is
/// two round trips a file: the OPEN that creates, then WRITE + SETATTR in one; the CLOSE
/// rides on the next file's OPEN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tar_s_files_cost_two_round_trips_each_with_the_close_riding_on_the_next() {
    let s = server();
    let c = connect(&s).await;
    let fs = mount(&c).await;
    let cr = root();
    let mtime = Nfstime3 { seconds: 1_600_000_000, nseconds: 0 };
    let files = 10u64;
    let (before, closes) = sent(&c, "CLOSE");
    for i in 0..files {
        let name = format!("f{i}");
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let (e, fh) = within(fs.create(ROOT_INO, name.as_bytes(), 0o600, flags, &cr)).await.unwrap();
        within(fs.write(fh, 0, &vec![i as u8; 3000 + i as usize])).await.unwrap();
        let times = Sattr3 { mtime: SetTime::SetToClientTime(mtime), ..Sattr3::default() };
        within(fs.setattr(e.ino, times, &cr)).await.unwrap();
        within(fs.setattr(e.ino, Sattr3 { uid: Some(0), gid: Some(0), ..Sattr3::default() }, &cr))
            .await
            .unwrap();
        within(fs.setattr(e.ino, Sattr3 { mode: Some(0o644), ..Sattr3::default() }, &cr)).await.unwrap();
        within(fs.flush(fh)).await.unwrap();
        within(fs.release(fh)).await.unwrap();
    }
    let (after, _) = sent(&c, "CLOSE");
    assert!(after - before <= 2 * files + 1, "{files} files: {} COMPOUNDs", after - before);
    // Every open is ended (the last CLOSE goes alone, a moment later).
    let deadline = std::time::Instant::now() + WAIT;
    while sent(&c, "CLOSE").1 - closes < files {
        assert!(std::time::Instant::now() < deadline, "not every open was ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for i in 0..files {
        let (_, a) = within(c.lookup_path(&cr, &format!("/f{i}"))).await.unwrap();
        assert_eq!((a.size, a.mode & 0o7777, a.mtime), (3000 + i, 0o644, mtime), "f{i} on the server");
    }
}
