//! Real server processes killed with SIGKILL at random points while clients write.
//!
//! With `serve --journal` (FILE_SYNC and UNSTABLE writes, 8 writers): after each restart every
//! byte the server acknowledged is in the file, the journal was replayed, and the write verifier
//! is the one from before the crash, so a client need not resend anything.
//! Without a journal (UNSTABLE + COMMIT, some FILE_SYNC): every block written FILE_SYNC or
//! covered by a COMMIT with its WRITE's verifier survives, and the verifier changes.
//!
//! `EAGERNFS_CRASH_ROUNDS=100 cargo test -p eagernfs --test e2e_crash` runs the long series.

mod common;

use bytes::Bytes;
use common::*;
use eagernfs_client::{NfsClient, NfsOps, NfsUrl};
use eagernfs_proto::nfs3::{Createhow3, NfsFh3, Sattr3, StableHow};
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BLOCK: u64 = 32 * 1024;

async fn connect(server: &Server) -> NfsClient {
    let url: NfsUrl = server.url("").parse().expect("url");
    NfsClient::connect_url(&url).await.expect("mount")
}

async fn create(c: &NfsClient, name: &str) -> NfsFh3 {
    let cred = c.default_cred();
    let how = Createhow3::Unchecked(Sattr3 { mode: Some(0o644), ..Default::default() });
    let made = c.create(&cred, &c.root(), name.as_bytes(), how).await.expect("create");
    match made.obj {
        Some(fh) => fh,
        None => c.lookup(&cred, &c.root(), name.as_bytes()).await.expect("lookup").object,
    }
}

/// Block `n` of round `round`: every block's bytes are distinct.
fn block(round: u64, n: u64) -> Bytes {
    Bytes::from(pattern_bytes(round * 1_000_003 + n, n * BLOCK, BLOCK as usize))
}

#[test]
fn acknowledged_writes_and_the_verifier_survive_kill_9_with_a_journal() {
    let rounds: u64 = std::env::var("EAGERNFS_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let export = tempfile::tempdir().unwrap();
    let journal_dir = tempfile::tempdir().unwrap();
    let journal = journal_dir.path().join("journal");
    let journal_arg = journal.to_str().unwrap().to_string();
    let mut server = Server::eagernfs(
        export.path(),
        &["-o", "rw,no_root_squash", "--journal", &journal_arg, "--journal-size", "16MiB"],
    );
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let _in_runtime = rt.enter();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut verifier = None;
    let mut files = Vec::new();
    for round in 0..rounds {
        let acked: Arc<Mutex<Vec<u64>>> = Arc::default();
        let c = Arc::new(rt.block_on(connect(&server)));
        let fh = rt.block_on(create(&c, &format!("round-{round}")));
        // 8 writers; block n goes to the writer n % 8; half ask FILE_SYNC, half UNSTABLE.
        let tasks: Vec<_> = (0..8u64)
            .map(|w| {
                let (c, fh, acked) = (c.clone(), fh.clone(), acked.clone());
                rt.spawn(async move {
                    let cred = c.default_cred();
                    let mut seen = None;
                    for n in (w..4096).step_by(8) {
                        let stable = if n % 2 == 0 { StableHow::FileSync } else { StableHow::Unstable };
                        let Ok(r) = c.write(&cred, &fh, n * BLOCK, block(round, n), stable).await else {
                            break;
                        };
                        assert_eq!(r.count as u64, BLOCK);
                        assert_eq!(
                            r.committed,
                            StableHow::FileSync,
                            "a journaled WRITE is answered FILE_SYNC"
                        );
                        seen = Some(r.verf);
                        acked.lock().unwrap().push(n);
                    }
                    seen
                })
            })
            .collect();
        // Let some writes through, then crash at a random point.
        let want = rng.gen_range(1..200usize);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        rt.block_on(async {
            while acked.lock().unwrap().len() < want && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        server.crash_restart();
        let mut verfs = Vec::new();
        for t in tasks {
            t.abort();
            if let Ok(Some(v)) = rt.block_on(t) {
                verfs.push(v);
            }
        }
        drop(c);
        let acked = std::mem::take(&mut *acked.lock().unwrap());
        assert!(!acked.is_empty(), "round {round}: no write was acknowledged before the crash");
        for v in &verfs {
            assert_eq!(*v, verfs[0], "one verifier per server run");
        }
        assert!(server.log_tail(20).contains("journal"), "{}", server.log_tail(20));
        // Every acknowledged block of every round so far reads back.
        let c = rt.block_on(connect(&server));
        let cred = c.default_cred();
        files.push((round, acked));
        for (r, blocks) in &files {
            let fh = rt.block_on(async {
                c.lookup(&cred, &c.root(), format!("round-{r}").as_bytes()).await.expect("lookup").object
            });
            for &n in blocks {
                let got = rt.block_on(c.read(&cred, &fh, n * BLOCK, BLOCK as u32)).expect("read");
                assert!(
                    got.data == block(*r, n),
                    "round {r} block {n}: acknowledged data lost after round {round}'s crash"
                );
            }
        }
        // The verifier survived the crash: nothing needs resending.
        let fh = rt.block_on(create(&c, "probe"));
        let after =
            rt.block_on(c.write(&cred, &fh, 0, Bytes::from_static(b"x"), StableHow::Unstable)).unwrap().verf;
        if let Some(before) = verfs.first() {
            assert_eq!(&after, before, "round {round}: the verifier changed across a clean replay");
        }
        if let Some(v) = verifier {
            assert_eq!(after, v, "round {round}: the verifier changed");
        }
        verifier = Some(after);
    }
    let log = server.log_tail(400);
    assert!(log.contains("replayed"), "no replay was logged:\n{log}");
}

/// Without a journal: `kill -9` at random points while writers send UNSTABLE WRITEs and COMMITs
/// (and some FILE_SYNC). Every block written FILE_SYNC, or UNSTABLE and then covered by a COMMIT
/// that returned the WRITE's verifier, reads back after the restart; and the verifier changes,
/// telling clients to resend what they had not committed.
#[test]
fn committed_writes_survive_kill_9_without_a_journal_and_the_verifier_changes() {
    let rounds: u64 = std::env::var("EAGERNFS_CRASH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let export = tempfile::tempdir().unwrap();
    let mut server = Server::eagernfs(export.path(), &["-o", "rw,no_root_squash"]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let _in_runtime = rt.enter();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut files = Vec::new();
    let mut verifiers = Vec::new();
    for round in 0..rounds {
        let durable: Arc<Mutex<Vec<u64>>> = Arc::default();
        let c = Arc::new(rt.block_on(connect(&server)));
        let fh = rt.block_on(create(&c, &format!("plain-{round}")));
        let tasks: Vec<_> = (0..4u64)
            .map(|w| {
                let (c, fh, durable) = (c.clone(), fh.clone(), durable.clone());
                rt.spawn(async move {
                    let cred = c.default_cred();
                    let mut pending = Vec::new();
                    let mut verf = None;
                    for n in (w..4096).step_by(4) {
                        if n % 5 == 0 {
                            let Ok(r) =
                                c.write(&cred, &fh, n * BLOCK, block(round, n), StableHow::FileSync).await
                            else {
                                break;
                            };
                            assert_ne!(r.committed, StableHow::Unstable, "FILE_SYNC answered unstable");
                            durable.lock().unwrap().push(n);
                            continue;
                        }
                        let Ok(r) =
                            c.write(&cred, &fh, n * BLOCK, block(round, n), StableHow::Unstable).await
                        else {
                            break;
                        };
                        verf = Some(r.verf);
                        pending.push(n);
                        if pending.len() == 8 {
                            let Ok(done) = c.commit(&cred, &fh, 0, 0).await else { break };
                            // Only a COMMIT with the WRITEs' verifier covers them.
                            if Some(done.verf) == verf {
                                durable.lock().unwrap().append(&mut pending);
                            } else {
                                pending.clear();
                            }
                        }
                    }
                    verf
                })
            })
            .collect();
        let want = rng.gen_range(1..100usize);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        rt.block_on(async {
            while durable.lock().unwrap().len() < want && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        server.crash_restart();
        let mut before = None;
        for t in tasks {
            t.abort();
            if let Ok(Some(v)) = rt.block_on(t) {
                before = Some(v);
            }
        }
        drop(c);
        let blocks = std::mem::take(&mut *durable.lock().unwrap());
        assert!(!blocks.is_empty(), "round {round}: nothing was made durable before the crash");
        files.push((round, blocks));
        let c = rt.block_on(connect(&server));
        let cred = c.default_cred();
        for (r, blocks) in &files {
            let fh = rt.block_on(async {
                c.lookup(&cred, &c.root(), format!("plain-{r}").as_bytes()).await.expect("lookup").object
            });
            for &n in blocks {
                let got = rt.block_on(c.read(&cred, &fh, n * BLOCK, BLOCK as u32)).expect("read");
                assert!(
                    got.data == block(*r, n),
                    "round {r} block {n}: committed data lost after round {round}'s crash"
                );
            }
        }
        let probe = rt.block_on(create(&c, "probe"));
        let after = rt
            .block_on(c.write(&cred, &probe, 0, Bytes::from_static(b"x"), StableHow::Unstable))
            .unwrap()
            .verf;
        if let Some(before) = before {
            assert_ne!(
                after, before,
                "round {round}: the verifier must change across a restart without a journal"
            );
        }
        assert!(!verifiers.contains(&after), "round {round}: a verifier was reused");
        verifiers.push(after);
    }
}
