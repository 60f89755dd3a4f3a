//! The caching file layer against an in-process eagernfs server (memory
//! backend, which makes a removed file's handle stale at once, as a real
//! file system does): files unlinked or renamed over while open live on
//! under a hidden name until their last close ("silly rename"), and ACCESS
//! answers are cached per caller. Calls are counted at the server.

// The server's black-box test harness (TestServer, export specs).
#[path = "../../server/tests/common/mod.rs"]
mod common;

use std::future::Future;
use std::time::Duration;

use common::{memory, spec, TestServer, WAIT};
use eagernfs_client::cache::{CacheConfig, CachedFs, ROOT_INO};
use eagernfs_client::{Cred, LookupCache, MountOptions, NfsClient, NfsOps};
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

/// A cache over a fresh connection. Attributes are trusted for minutes so
/// that nothing a test counts depends on how fast the machine is.
async fn mount(s: &TestServer, ac: bool) -> CachedFs<NfsClient> {
    mount_with(s, MountOptions { ac, ..MountOptions::default() }).await
}

/// As [`mount`], with other options (`ac` and the attribute periods are set here).
async fn mount_with(s: &TestServer, opts: MountOptions) -> CachedFs<NfsClient> {
    let opts = MountOptions {
        acregmin: Duration::from_secs(600),
        acregmax: Duration::from_secs(600),
        acdirmin: Duration::from_secs(600),
        acdirmax: Duration::from_secs(600),
        ..opts
    };
    let url = format!("nfs://127.0.0.1:{}/export", s.addr.port());
    let client = within(NfsClient::connect(&url)).await.expect("connect");
    let cfg = CacheConfig::from_options(&opts, None);
    within(CachedFs::with_config(client, cfg)).await.expect("cache")
}

fn root() -> Cred {
    Cred::root()
}

/// The names in the export's root as the server has them (asked directly,
/// not through the cache).
async fn server_names(fs: &CachedFs<NfsClient>) -> Vec<String> {
    let c = fs.client();
    let r = within(c.readdir(&root(), &c.root(), 0, [0; 8], 64 * 1024)).await.expect("READDIR");
    assert!(r.reply.eof, "one page is enough here");
    let mut names: Vec<String> = r
        .reply
        .entries
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name.0).into_owned())
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    names
}

fn hidden(names: &[String]) -> Vec<&String> {
    names.iter().filter(|n| n.starts_with(".nfs")).collect()
}

/// What `ino`'s hidden name must look like: `.nfs`, the fileid as 16 hex
/// digits, then an 8 hex digit counter.
fn assert_hidden_name_of(name: &str, fileid: u64) {
    assert_eq!(name.len(), 4 + 16 + 8, "{name}");
    assert_eq!(&name[4..20], format!("{fileid:016x}"), "{name}");
    assert!(name[20..].bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
}

fn errno<T: std::fmt::Debug>(r: Result<T, eagernfs_client::cache::FsError>) -> i32 {
    r.expect_err("should fail").errno()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_unlinked_while_open_lives_on_until_its_last_release() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let (e, fh1) = within(fs.create(ROOT_INO, b"f", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.write(fh1, 0, b"before unlink")).await.unwrap();
    within(fs.flush(fh1)).await.unwrap();
    let fh2 = within(fs.open(e.ino, libc::O_RDWR, &c)).await.unwrap();

    let (removes, renames) = (s.stats.nfs3(NFSPROC3_REMOVE), s.stats.nfs3(NFSPROC3_RENAME));
    within(fs.unlink(ROOT_INO, b"f", &c)).await.unwrap();
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), removes, "an open file is not removed");
    assert_eq!(s.stats.nfs3(NFSPROC3_RENAME), renames + 1, "it is renamed instead");

    // The name is gone, through the cache and on the server; the file
    // lives on under one hidden name.
    assert_eq!(errno(within(fs.lookup(ROOT_INO, b"f", &c)).await), libc::ENOENT);
    let names = server_names(&fs).await;
    assert!(!names.contains(&"f".to_string()), "{names:?}");
    let hid = hidden(&names);
    assert_eq!(hid.len(), 1, "{names:?}");
    assert_hidden_name_of(hid[0], e.attr.fileid);
    // Asked again, the lookup cache agrees (no stale positive entry).
    assert_eq!(errno(within(fs.lookup(ROOT_INO, b"f", &c)).await), libc::ENOENT);

    // Both handles keep working: reads see the data, writes reach the
    // server and are committed.
    assert_eq!(&within(fs.read(fh1, 0, 100)).await.unwrap()[..], b"before unlink");
    within(fs.write(fh2, 0, b"BEFORE")).await.unwrap();
    within(fs.flush(fh2)).await.unwrap();
    let direct = within(fs.client().read(&c, &fs.file_handle(e.ino).unwrap(), 0, 100)).await.unwrap();
    assert_eq!(&direct.data[..], b"BEFORE unlink", "the write reached the hidden file");

    // Not the last handle: the hidden file stays.
    within(fs.release(fh1)).await.unwrap();
    within(fs.wait_background()).await;
    assert_eq!(hidden(&server_names(&fs).await).len(), 1);
    assert_eq!(&within(fs.read(fh2, 0, 100)).await.unwrap()[..], b"BEFORE unlink");
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), removes);

    // The last release removes it.
    within(fs.release(fh2)).await.unwrap();
    within(fs.wait_background()).await;
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), removes + 1);
    assert_eq!(server_names(&fs).await, Vec::<String>::new(), "hidden file gone");
}

/// The mount answers a `release` with nothing left to write back on its
/// FUSE reader thread, which belongs to no runtime: the last close of an
/// unlinked file made there must still REMOVE its hidden name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_close_on_a_thread_of_no_runtime_removes_the_hidden_name() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let (_, fh) = within(fs.create(ROOT_INO, b"u", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.write(fh, 0, b"data")).await.unwrap();
    within(fs.flush(fh)).await.unwrap();
    within(fs.unlink(ROOT_INO, b"u", &c)).await.unwrap();
    assert_eq!(hidden(&server_names(&fs).await).len(), 1, "renamed to a hidden name while open");

    let removes = s.stats.nfs3(NFSPROC3_REMOVE);
    let on_thread = fs.clone();
    let released = std::thread::spawn(move || {
        assert!(tokio::runtime::Handle::try_current().is_err(), "a plain thread, as FUSE's");
        on_thread.try_release(fh)
    })
    .join()
    .expect("the releasing thread");
    assert!(matches!(released, Some(Ok(()))), "settled: released on the calling thread");
    within(fs.wait_background()).await;
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), removes + 1, "the hidden name was REMOVEd");
    assert_eq!(server_names(&fs).await, Vec::<String>::new(), "hidden file gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_renamed_over_while_open_lives_on_until_its_last_release() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let (old, old_fh) = within(fs.create(ROOT_INO, b"target", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.write(old_fh, 0, b"old contents")).await.unwrap();
    within(fs.flush(old_fh)).await.unwrap();
    let (new, new_fh) = within(fs.create(ROOT_INO, b"new", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.write(new_fh, 0, b"new contents")).await.unwrap();
    within(fs.release(new_fh)).await.unwrap();

    within(fs.rename(ROOT_INO, b"new", ROOT_INO, b"target", &c)).await.unwrap();
    let names = server_names(&fs).await;
    assert_eq!(hidden(&names).len(), 1, "{names:?}");
    assert_hidden_name_of(hidden(&names)[0], old.attr.fileid);
    assert!(names.contains(&"target".to_string()) && !names.contains(&"new".to_string()), "{names:?}");
    assert_eq!(errno(within(fs.lookup(ROOT_INO, b"new", &c)).await), libc::ENOENT);
    let now_target = within(fs.lookup(ROOT_INO, b"target", &c)).await.unwrap();
    assert_eq!(now_target.ino, new.ino, "the name is the moved file's");

    // The replaced file is still readable and writable through its handle.
    assert_eq!(&within(fs.read(old_fh, 0, 100)).await.unwrap()[..], b"old contents");
    within(fs.write(old_fh, 0, b"OLD")).await.unwrap();
    within(fs.flush(old_fh)).await.unwrap();
    assert_eq!(&within(fs.read(old_fh, 0, 100)).await.unwrap()[..], b"OLD contents");

    within(fs.release(old_fh)).await.unwrap();
    within(fs.wait_background()).await;
    assert_eq!(server_names(&fs).await, vec!["target".to_string()]);
    // And the moved file was not disturbed.
    let fh = within(fs.open(now_target.ino, libc::O_RDONLY, &c)).await.unwrap();
    assert_eq!(&within(fs.read(fh, 0, 100)).await.unwrap()[..], b"new contents");
    within(fs.release(fh)).await.unwrap();
}

/// The link count the cache shows for `ino` (from its attribute cache while trusted).
async fn nlink(fs: &CachedFs<NfsClient>, ino: u64) -> u32 {
    within(fs.getattr(ino, &root())).await.unwrap().attr.nlink
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hidden_name_is_not_counted_as_a_link() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    // The only name of an open file goes: no link is left.
    let (only, fh) = within(fs.create(ROOT_INO, b"only", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.unlink(ROOT_INO, b"only", &c)).await.unwrap();
    assert_eq!(nlink(&fs, only.ino).await, 0, "a local file system shows 0");
    let direct = within(fs.client().getattr(&c, &fs.file_handle(only.ino).unwrap())).await.unwrap();
    assert_eq!(direct.nlink, 1, "the server still has the hidden name");
    within(fs.release(fh)).await.unwrap();
    within(fs.wait_background()).await;

    // With a second name, one is left, before and after the hidden name is removed.
    let (two, fh) = within(fs.create(ROOT_INO, b"two", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.link(two.ino, ROOT_INO, b"other", &c)).await.unwrap();
    assert_eq!(nlink(&fs, two.ino).await, 2);
    within(fs.unlink(ROOT_INO, b"two", &c)).await.unwrap();
    assert_eq!(nlink(&fs, two.ino).await, 1);
    within(fs.release(fh)).await.unwrap();
    within(fs.wait_background()).await;
    assert_eq!(nlink(&fs, two.ino).await, 1, "the hidden name is gone from the server too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_over_a_name_drops_the_replaced_objects_attributes() {
    for lookupcache in [LookupCache::All, LookupCache::None] {
        let s = server();
        let fs = mount_with(&s, MountOptions { lookupcache, ..MountOptions::default() }).await;
        let c = root();
        for name in [&b"a"[..], b"b"] {
            let (_, fh) = within(fs.create(ROOT_INO, name, 0o644, libc::O_RDWR, &c)).await.unwrap();
            within(fs.release(fh)).await.unwrap();
        }
        let b = within(fs.lookup(ROOT_INO, b"b", &c)).await.unwrap();
        within(fs.link(b.ino, ROOT_INO, b"c", &c)).await.unwrap();
        assert_eq!(nlink(&fs, b.ino).await, 2, "{lookupcache:?}");
        // Without a lookup cache the rename must ask what `b` is; it does so while a file is
        // open, which is when a stale count could be seen without a new lookup (fstat).
        let (_, busy) = within(fs.create(ROOT_INO, b"busy", 0o644, libc::O_RDWR, &c)).await.unwrap();
        within(fs.rename(ROOT_INO, b"a", ROOT_INO, b"b", &c)).await.unwrap();
        assert_eq!(nlink(&fs, b.ino).await, 1, "{lookupcache:?}: `c` is its last name");
        within(fs.release(busy)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_nobody_has_open_is_removed_directly() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let (_, fh) = within(fs.create(ROOT_INO, b"closed", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.release(fh)).await.unwrap();
    // Another file stays open, so "no handles at all" is not what decides.
    let (_, other) = within(fs.create(ROOT_INO, b"busy", 0o644, libc::O_RDWR, &c)).await.unwrap();

    let (removes, renames) = (s.stats.nfs3(NFSPROC3_REMOVE), s.stats.nfs3(NFSPROC3_RENAME));
    within(fs.unlink(ROOT_INO, b"closed", &c)).await.unwrap();
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), removes + 1, "one REMOVE");
    assert_eq!(s.stats.nfs3(NFSPROC3_RENAME), renames, "no silly rename");
    assert_eq!(server_names(&fs).await, vec!["busy".to_string()]);
    assert_eq!(errno(within(fs.lookup(ROOT_INO, b"closed", &c)).await), libc::ENOENT);
    within(fs.release(other)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_holding_only_a_hidden_file_is_not_empty() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let d = within(fs.mkdir(ROOT_INO, b"d", 0o755, &c)).await.unwrap();
    let (_, fh) = within(fs.create(d.ino, b"f", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.unlink(d.ino, b"f", &c)).await.unwrap();
    assert_eq!(errno(within(fs.rmdir(ROOT_INO, b"d", &c)).await), libc::ENOTEMPTY);
    within(fs.release(fh)).await.unwrap();
    within(fs.wait_background()).await;
    within(fs.rmdir(ROOT_INO, b"d", &c)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_answers_are_cached_per_caller_until_a_chmod() {
    let s = server();
    let fs = mount(&s, true).await;
    let c = root();
    let (e, fh) = within(fs.create(ROOT_INO, b"f", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.release(fh)).await.unwrap();
    let asks = || s.stats.nfs3(NFSPROC3_ACCESS);

    let a0 = asks();
    within(fs.access(e.ino, libc::R_OK, &c)).await.unwrap();
    assert_eq!(asks(), a0 + 1, "first check asks the server");
    within(fs.access(e.ino, libc::R_OK, &c)).await.unwrap();
    within(fs.access(e.ino, libc::R_OK | libc::W_OK, &c)).await.unwrap();
    assert_eq!(asks(), a0 + 1, "same caller: answered from the cache, other bits included");

    // Another user, and the same uid with other groups, are other callers.
    let user = Cred { uid: 1000, gid: 1000, groups: vec![] };
    within(fs.access(e.ino, libc::R_OK, &user)).await.unwrap();
    assert_eq!(asks(), a0 + 2);
    assert_eq!(errno(within(fs.access(e.ino, libc::W_OK, &user)).await), libc::EACCES);
    assert_eq!(asks(), a0 + 2, "a refusal is cached too");
    let grouped = Cred { uid: 1000, gid: 1000, groups: vec![5] };
    within(fs.access(e.ino, libc::R_OK, &grouped)).await.unwrap();
    assert_eq!(asks(), a0 + 3);

    // A chmod through the cache: everyone is asked again, and the new
    // answer is the one that counts.
    within(fs.setattr(e.ino, Sattr3 { mode: Some(0o600), ..Sattr3::default() }, &c)).await.unwrap();
    assert_eq!(errno(within(fs.access(e.ino, libc::R_OK, &user)).await), libc::EACCES);
    assert_eq!(asks(), a0 + 4, "asked again after the chmod");
    within(fs.access(e.ino, libc::R_OK, &c)).await.unwrap();
    assert_eq!(asks(), a0 + 5);
    within(fs.access(e.ino, libc::R_OK, &c)).await.unwrap();
    assert_eq!(asks(), a0 + 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noac_asks_access_every_time() {
    let s = server();
    let fs = mount(&s, false).await;
    let c = root();
    let (e, fh) = within(fs.create(ROOT_INO, b"f", 0o644, libc::O_RDWR, &c)).await.unwrap();
    within(fs.release(fh)).await.unwrap();
    let a0 = s.stats.nfs3(NFSPROC3_ACCESS);
    for _ in 0..3 {
        within(fs.access(e.ino, libc::R_OK, &c)).await.unwrap();
    }
    assert_eq!(s.stats.nfs3(NFSPROC3_ACCESS), a0 + 3);
}
