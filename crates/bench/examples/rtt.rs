//! One round trip at a time: the latency of a single small call over NFSv3 and over NFSv4.x
//! through eagernfs's client, without FUSE (issue 34: "why is an NFSv4.2 round trip through the
//! mount slower than an NFSv3 one").
//!
//!     cargo build --release -p eagernfs-bench --example rtt
//!     taskset -c 0 target/release/examples/rtt nfs://127.0.0.1:PORT/export getattr 3 inline 20000
//!
//! Arguments: URL, the call (`getattr` of the export's root, or `readdir`: READDIRPLUS over v3,
//! the mount's READDIR COMPOUND over v4, of the export's root, listed whole from cookie 0, or
//! `file`: the write path of one small file as `cp -r` and `tar x` through the mount send it),
//! the version (`3`, `4.1`, `4.2`), how the calls are made, and how many.
//!
//! `file` makes CALLS files in the export's root, one at a time, each with the three calls the
//! mount sends for it, timed apart and printed as three lines (`create`, `write`, `remove`):
//! the create at `open(O_WRONLY|O_CREAT|O_EXCL)` (`NfsOps::create_open`: NFSv3 CREATE GUARDED;
//! NFSv4 SEQUENCE, PUTFH, OPEN create, GETFH, GETATTR, PUTFH, GETATTR), the write-back of its
//! 64 bytes at `close` (`NfsOps::write_close`: NFSv3 WRITE FILE_SYNC; NFSv4 SEQUENCE, PUTFH,
//! WRITE FILE_SYNC, GETATTR, CLOSE), and its removal (`NfsOps::remove_known`: REMOVE). The
//! names are `rtt-PID-N`; each file is removed before the next is made, so at most one is left
//! behind if the run is killed.
//!
//! - `task`: from one task of a tokio runtime, one call after another.
//! - `inline`: as the FUSE mount makes them (`eagernfs-fuse`'s `inline.rs`): a thread that is
//!   not the runtime's polls each call's future once inside `lane::wait_here`; a future that
//!   waits is handed to the runtime by its waker and finishes there, and the thread waits for
//!   it (as `find` waits for the mount's reply).
//!
//! Prints the calls' median and mean in µs, and the process's voluntary and involuntary context
//! switches per call (getrusage) over the timed calls. With `RTT_SERVER_PID` set (the server's
//! pid, on this machine), also the server's CPU time per call (`srv_cpu_us_per_call`: all its
//! threads' run time from /proc/PID/task/*/schedstat, read before and after each call; what a
//! server thread still runs after its reply has gone out may land in the next call's). A first tenth (at least 100) of the calls
//! warms up (connects, makes the v4 session, connects the lanes) and is not counted.

use bytes::Bytes;
use eagernfs_client::{AnyClient, Cred, NfsOps, OpenAccess};
use eagernfs_proto::nfs3::{Createhow3, Sattr3};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: rtt URL getattr|readdir|file 3|4.1|4.2 task|inline CALLS");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, op, vers, mode, calls] = &args[..] else { usage() };
    let calls: usize = calls.parse().unwrap_or_else(|_| usage());
    let kind = match op.as_str() {
        "getattr" => Kind::Getattr,
        "readdir" => Kind::Readdir,
        "file" => Kind::File,
        _ => usage(),
    };
    let inline = match mode.as_str() {
        "task" => false,
        "inline" => true,
        _ => usage(),
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}vers={vers}");
    // As the mount makes its runtime (worker threads: the CPUs it may use).
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let client = match rt.block_on(AnyClient::connect(&url)) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("rtt: connecting to {url}: {e}");
            std::process::exit(1)
        }
    };
    let warm = (calls / 10).max(100);
    // Per step of one iteration (one for getattr and readdir; create, write, remove for file):
    // its times and the context switches over the timed iterations.
    let steps: &[&str] = match kind {
        Kind::Getattr => &["getattr"],
        Kind::Readdir => &["readdir"],
        Kind::File => &["create", "write", "remove"],
    };
    let server = std::env::var("RTT_SERVER_PID").ok().map(|p| {
        p.parse::<u32>().unwrap_or_else(|_| {
            eprintln!("rtt: RTT_SERVER_PID={p}: not a pid");
            std::process::exit(2)
        })
    });
    let mut stats: Vec<Step> = steps.iter().map(|_| Step::new(calls, server)).collect();
    let pid = std::process::id();
    let run = |call: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>| {
        if inline {
            run_inline(rt.handle(), call);
        } else {
            rt.block_on(rt.spawn(call)).expect("the call's task");
        }
    };
    for i in 0..warm + calls {
        let timed = i >= warm;
        match kind {
            Kind::Getattr | Kind::Readdir => {
                let c = client.clone();
                let readdir = kind == Kind::Readdir;
                stats[0].time(timed, || {
                    run(Box::pin(async move {
                        let root = c.root();
                        let r = if readdir {
                            c.readdirplus(&Cred::root(), &root, 0, [0; 8], 8192, 65536)
                                .await
                                .map(|r| r.reply.entries.len())
                        } else {
                            c.getattr(&Cred::root(), &root).await.map(|_| 1)
                        };
                        check(r);
                    }))
                });
            }
            Kind::File => {
                let name = format!("rtt-{pid}-{i}").into_bytes();
                let fh = Arc::new(std::sync::Mutex::new(None));
                let (c, n, f) = (client.clone(), name.clone(), fh.clone());
                stats[0].time(timed, || {
                    run(Box::pin(async move {
                        let how = Createhow3::Guarded(Sattr3 { mode: Some(0o644), ..Sattr3::default() });
                        let (r, _opened) =
                            check(c.create_open(&Cred::root(), &c.root(), &n, how, OpenAccess::Write).await);
                        *f.lock().unwrap() = r.obj;
                    }))
                });
                let Some(obj) = fh.lock().unwrap().take() else {
                    eprintln!(
                        "rtt: the create of {} answered no file handle",
                        String::from_utf8_lossy(&name)
                    );
                    std::process::exit(1)
                };
                let c = client.clone();
                stats[1].time(timed, || {
                    run(Box::pin(async move {
                        let data = Bytes::from_static(&[b'x'; 64]);
                        check(
                            c.write_close(&Cred::root(), &obj, 0, data, None, Some(OpenAccess::Write)).await,
                        );
                    }))
                });
                let (c, n) = (client.clone(), name.clone());
                stats[2].time(timed, || {
                    run(Box::pin(async move {
                        check(c.remove_known(&Cred::root(), &c.root(), &n, false).await);
                    }))
                });
            }
        }
    }
    for (step, s) in steps.iter().zip(stats.iter_mut()) {
        let t = &mut s.times_ns;
        let mean_us = t.iter().sum::<u64>() as f64 / t.len() as f64 / 1000.0;
        t.sort_unstable();
        let median_us = t[t.len() / 2] as f64 / 1000.0;
        let srv = match s.server {
            Some(_) => format!(" srv_cpu_us_per_call {:.1}", s.server_ns as f64 / calls as f64 / 1000.0),
            None => String::new(),
        };
        println!(
            "{step} v{vers} {mode} calls {calls} median_us {median_us:.1} mean_us {mean_us:.1} \
             vcsw_per_call {:.2} ivcsw_per_call {:.2}{srv}",
            s.vcsw as f64 / calls as f64,
            s.ivcsw as f64 / calls as f64
        );
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Getattr,
    Readdir,
    File,
}

/// One step's timed calls: each call's time, the client's context switches during them, and
/// the server's CPU time (if its pid is known).
struct Step {
    times_ns: Vec<u64>,
    vcsw: i64,
    ivcsw: i64,
    server: Option<u32>,
    server_ns: u64,
}

impl Step {
    fn new(calls: usize, server: Option<u32>) -> Step {
        Step { times_ns: Vec::with_capacity(calls), vcsw: 0, ivcsw: 0, server, server_ns: 0 }
    }

    /// Make the call `f`, and count it if `timed`.
    fn time(&mut self, timed: bool, f: impl FnOnce()) {
        let c0 = self.server.filter(|_| timed).map_or(0, run_time_ns);
        let s0 = context_switches();
        let t0 = Instant::now();
        f();
        let ns = t0.elapsed().as_nanos() as u64;
        let s1 = context_switches();
        if timed {
            self.times_ns.push(ns);
            self.vcsw += s1.0 - s0.0;
            self.ivcsw += s1.1 - s0.1;
            if let Some(pid) = self.server {
                self.server_ns += run_time_ns(pid).saturating_sub(c0);
            }
        }
    }
}

/// The CPU time all threads of process `pid` have run so far, in ns (threads that have ended
/// no longer count: the server's service threads live as long as it does).
fn run_time_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        eprintln!("rtt: RTT_SERVER_PID={pid}: no such process");
        std::process::exit(1)
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// The call's answer, or the end of the run with its error.
fn check<T>(r: eagernfs_client::NfsResult<T>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("rtt: {e}");
        std::process::exit(1)
    })
}

/// The process's voluntary and involuntary context switches so far.
fn context_switches() -> (i64, i64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    (u.ru_nvcsw, u.ru_nivcsw)
}

/// Run `fut` as the mount runs a FUSE request (`eagernfs_fuse::run_inline`: on this thread
/// until it first waits, then on `rt`), and return when it has finished, which the FUSE reader
/// thread does not wait for.
fn run_inline(rt: &tokio::runtime::Handle, fut: impl Future<Output = ()> + Send + 'static) {
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
    eagernfs_fuse::run_inline(rt, async move {
        fut.await;
        let _ = done_tx.send(());
    });
    done_rx.recv().expect("the call finished");
}
