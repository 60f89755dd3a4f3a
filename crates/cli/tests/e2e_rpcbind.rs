//! `serve --register`: with a real rpcbind on port 111, eagernfs registers NFS v3 and MOUNT at
//! its own port, so a client that knows nothing but the host (libnfs without `nfsport=` and
//! `mountport=`) finds it; and the registrations are removed at shutdown.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

/// `rpcinfo -p 127.0.0.1` lines as (program, version, protocol, port).
fn registrations() -> Option<Vec<(u32, u32, String, u16)>> {
    let mut cmd = Command::new("rpcinfo");
    cmd.args(["-p", "127.0.0.1"]);
    let out = run_command(cmd, Duration::from_secs(10));
    if !out.status.success() {
        return None;
    }
    Some(
        out.stdout_text()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((
                    f.first()?.parse().ok()?,
                    f.get(1)?.parse().ok()?,
                    f.get(2)?.to_string(),
                    f.get(3)?.parse().ok()?,
                ))
            })
            .collect(),
    )
}

/// Start rpcbind if nothing answers on port 111. Returns the process we started, if any.
fn ensure_rpcbind() -> Option<std::process::Child> {
    if registrations().is_some() {
        return None;
    }
    let child = Command::new("rpcbind").arg("-f").spawn().ok()?;
    // rpcbind has no readiness signal: poll rpcinfo with a deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while registrations().is_none() {
        assert!(std::time::Instant::now() < deadline, "rpcbind did not start answering within 10 s");
        std::thread::yield_now();
    }
    Some(child)
}

#[test]
fn registers_with_rpcbind_and_unregisters_at_shutdown() {
    if !is_root() && skip("registers_with_rpcbind", "rpcbind and port 111 need root") {
        return;
    }
    if ganesha_override() && skip("registers_with_rpcbind", "eagernfs-only feature") {
        return;
    }
    let mut started = ensure_rpcbind();
    let export = tempfile::tempdir().unwrap();
    std::fs::write(export.path().join("hello.txt"), b"hello via rpcbind\n").unwrap();
    let mut server = Server::eagernfs(export.path(), &["--register", "127.0.0.1:111"]);
    let port = server.port();

    let regs = registrations().expect("rpcinfo works");
    for (prog, vers) in [(100003, 3), (100005, 3), (100005, 1)] {
        assert!(
            regs.iter().any(|r| r.0 == prog && r.1 == vers && r.2 == "tcp" && r.3 == port),
            "program {prog} v{vers} not registered at port {port}: {regs:?}"
        );
    }

    // A client that only knows the host asks the portmapper and gets to us.
    let url = format!("nfs://127.0.0.1{}/hello.txt", server.dir().display());
    let cat = nfs_cat(&url);
    cat.assert_success("nfs-cat through the portmapper");
    assert_eq!(cat.stdout_text(), "hello via rpcbind\n");

    server.stop();
    let regs = registrations().expect("rpcinfo works");
    assert!(
        !regs.iter().any(|r| (r.0 == 100003 || r.0 == 100005) && r.3 == port),
        "registrations left behind after shutdown: {regs:?}"
    );
    if let Some(child) = started.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
