//! One round trip at a time: the latency of a single small call over NFSv3 and over NFSv4.x
//! through eagernfs's client, without FUSE (issue 34: "why is an NFSv4.2 round trip through the
//! mount slower than an NFSv3 one").
//!
//!     cargo build --release -p eagernfs-bench --example rtt
//!     taskset -c 0 target/release/examples/rtt nfs://127.0.0.1:PORT/export getattr 3 inline 20000
//!
//! Arguments: URL, the call (`getattr` of the export's root, or `readdir`: READDIRPLUS over v3,
//! the mount's READDIR COMPOUND over v4, of the export's root, listed whole from cookie 0), the
//! version (`3`, `4.1`, `4.2`), how the calls are made, and how many.
//!
//! - `task`: from one task of a tokio runtime, one call after another.
//! - `inline`: as the FUSE mount makes them (`eagernfs-fuse`'s `inline.rs`): a thread that is
//!   not the runtime's polls each call's future once inside `lane::wait_here`; a future that
//!   waits is handed to the runtime by its waker and finishes there, and the thread waits for
//!   it (as `find` waits for the mount's reply).
//!
//! Prints the calls' median and mean in µs, and the process's voluntary and involuntary context
//! switches per call (getrusage) over the timed calls. A first tenth (at least 100) of the calls
//! warms up (connects, makes the v4 session, connects the lanes) and is not counted.

use eagernfs_client::{AnyClient, Cred, NfsOps};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: rtt URL getattr|readdir 3|4.1|4.2 task|inline CALLS");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, op, vers, mode, calls] = &args[..] else { usage() };
    let calls: usize = calls.parse().unwrap_or_else(|_| usage());
    let readdir = match op.as_str() {
        "getattr" => false,
        "readdir" => true,
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
    let mut times_ns: Vec<u64> = Vec::with_capacity(calls);
    let mut switches = (0, 0);
    for i in 0..warm + calls {
        if i == warm {
            switches = context_switches();
        }
        let c = client.clone();
        let call = async move {
            let cred = Cred::root();
            let root = c.root();
            let r = if readdir {
                c.readdirplus(&cred, &root, 0, [0; 8], 8192, 65536).await.map(|r| r.reply.entries.len())
            } else {
                c.getattr(&cred, &root).await.map(|_| 1)
            };
            if let Err(e) = r {
                eprintln!("rtt: {e}");
                std::process::exit(1)
            }
        };
        let t0 = Instant::now();
        if inline {
            run_inline(rt.handle(), call);
        } else {
            rt.block_on(rt.spawn(call)).expect("the call's task");
        }
        if i >= warm {
            times_ns.push(t0.elapsed().as_nanos() as u64);
        }
    }
    let after = context_switches();
    let mean_us = times_ns.iter().sum::<u64>() as f64 / times_ns.len() as f64 / 1000.0;
    times_ns.sort_unstable();
    let median_us = times_ns[times_ns.len() / 2] as f64 / 1000.0;
    let per = |a: i64, b: i64| (b - a) as f64 / calls as f64;
    println!(
        "{op} v{vers} {mode} calls {calls} median_us {median_us:.1} mean_us {mean_us:.1} \
         vcsw_per_call {:.2} ivcsw_per_call {:.2}",
        per(switches.0, after.0),
        per(switches.1, after.1)
    );
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
