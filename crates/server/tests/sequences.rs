//! Structure-aware fuzzing of operation sequences (issue 8, point 5): random sequences of NFSv3
//! calls (create, mkdir, symlink, link, remove, rmdir, rename, write, read, truncate, chmod,
//! getattr, readdir, readlink, commit) on a small namespace where names collide, sent over the
//! wire to one server that exports the same empty tree twice: from the memory backend and from
//! the local backend on a real directory. The local backend is a thin layer over the kernel's
//! own file system, which makes it the reference model: every call must give the memory export
//! the same answer (status, type, size, link count, mode, bytes read, directory names, link
//! targets). A failing sequence is shrunk by proptest to the shortest one and printed; the
//! seeds that found bugs are kept in `sequences.proptest-regressions` and rerun first.
//!
//! CI runs `PROPTEST_CASES` sequences (default 48); a long campaign is
//! `PROPTEST_CASES=20000 cargo test -p eagernfs-server --test sequences --release`
//! (`scripts/fuzz-sequences.sh`). Needs root (the local backend opens files by handle).

mod common;

use common::seqops::*;
use common::*;
use eagernfs_server::ExportSpec;
use eagernfs_vfs::local::{LocalBackend, LocalConfig};
use proptest::prelude::*;
use std::sync::Arc;

fn local_export(dir: &std::path::Path) -> ExportSpec {
    let backend = LocalBackend::open(LocalConfig {
        root: dir.to_path_buf(),
        handle_key: *b"sequences-key-01",
        unsafe_async: false,
        journaled: false,
    })
    .expect("the local backend needs root and a file system with file handles");
    spec(2, &["/local"], "/local 127.0.0.0/8(rw,insecure,no_root_squash)", Arc::new(backend))
}

/// Run `ops` on both exports of a fresh server; the first call whose answers differ, with the
/// sequence so far.
fn differential(ops: &[Op]) -> Result<(), String> {
    let dir = tempfile::Builder::new().prefix("eagernfs-seq-").tempdir_in("/tmp").unwrap();
    let s = TestServer::start(vec![
        spec(1, &["/mem"], "/mem 127.0.0.0/8(rw,insecure,no_root_squash)", memory()),
        local_export(dir.path()),
    ]);
    let mut c = s.client();
    let mem = Side { root: c.root("/mem") };
    let local = Side { root: c.root("/local") };
    let mut trace = Vec::new();
    for op in ops {
        let want = run(&mut c, &local, op);
        let got = run(&mut c, &mem, op);
        trace.push(format!("{op:?} -> {want}"));
        if want != got {
            drop(c);
            s.stop();
            return Err(format!(
                "after:\n  {}\nthe memory backend answered\n  {got}\nwhere the kernel's file system answered\n  {want}",
                trace.join("\n  ")
            ));
        }
    }
    drop(c);
    s.stop();
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_memory_backend_answers_every_sequence_as_the_kernel_does(ops in proptest::collection::vec(op(), 1..40)) {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP: needs root (the local backend)");
            return Ok(());
        }
        if let Err(e) = differential(&ops) {
            prop_assert!(false, "{}", e);
        }
    }
}
