//! The open-loop generator sends calls on time: against an in-process server (memory
//! backend), a low-rate step starts its calls within a fraction of a millisecond of their
//! intended times. With tokio's millisecond timer alone the median send lag was ~0.5-1 ms
//! (a deadline is rounded up to the next tick), so this fails if the pacer stops working.
//!
//! A timing test, kept alone in its own binary so no other test of this crate competes for
//! the CPUs while it runs. It runs at a raised priority (nice -10, as root), as a load
//! generator on a shared machine should: the pacer makes the sends precise, but no pacer
//! gives a thread the CPU that other programs hold. See the assertion for what was measured.

#[path = "../../server/tests/common/mod.rs"]
mod common;

use common::{memory, spec, TestServer};
use eagernfs_bench::load::clients::SourceAddrs;
use eagernfs_bench::load::fileset::FileSetShape;
use eagernfs_bench::load::mix::OpMix;
use eagernfs_bench::load::{run_load, summarize_load, Arrivals, LoadConfig, Schedule};
use std::time::Duration;

#[test]
fn a_low_rate_open_loop_step_sends_its_calls_on_time() {
    // Before any thread starts: on Linux a nice value belongs to a thread, and the threads
    // it starts (the server's, the generator's, the reference sleeper's) inherit it.
    // SAFETY: setpriority on the calling thread with plain integer arguments.
    let raised = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) } == 0;
    if !raised {
        eprintln!("could not raise this test's priority (not root?): the bound may fail on a busy machine");
    }
    let s = TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )]);
    let calls = 600;
    let config = LoadConfig {
        url: format!("nfs://127.0.0.1:{}/export", s.addr.port()),
        client_counts: vec![4],
        source_addrs: SourceAddrs::Distinct,
        // Cheap calls: what is measured is the generator, not the server.
        mix: OpMix::parse("GETATTR=1").expect("mix"),
        arrivals: Arrivals::Poisson,
        schedule: Schedule::Rates(vec![1000.0]),
        fileset: FileSetShape { dir_name: "set".into(), dirs: 1, files_per_dir: 2, file_size_bytes: 4096 },
        io_size_bytes: 4096,
        // The call bound ends the step (~0.6 s at 1000/s), not the clock.
        step_duration: Duration::from_secs(60),
        step_ops_max: calls,
        max_duration: Duration::from_secs(120),
        progress: false,
        ..LoadConfig::default()
    };
    // What the machine gives a thread that only sleeps until instants at the same rate, at the
    // same time: when the bound below fails, this says whether the machine or the pacer is late.
    let reference = std::thread::spawn(move || bare_sleeper_lags(calls as usize, Duration::from_millis(1)));
    let report = run_load(&config).expect("load run");
    let mut reference = reference.join().expect("reference sleeper");
    reference.sort_unstable();
    let (ref_p50, ref_p90) = (reference[reference.len() / 2], reference[reference.len() * 9 / 10]);
    let step = &report.steps[0];
    assert_eq!(step.rate.completed_ops, calls);
    assert_eq!(step.errors, 0, "{:?}", step.rate.ops);
    let lag = step.send_lag.as_ref().expect("an open-loop step measures its send lag");
    assert_eq!(lag.count, calls, "every call's send lag is recorded");
    let summary = summarize_load(&report);
    eprintln!("{summary}send lag p50 {} ns, p90 {} ns, p99 {} ns", lag.p50_ns, lag.p90_ns, lag.p99_ns);
    assert!(summary.contains("lag p99"), "{summary}");
    // Idle, the median is a few µs. Under `stress-ng --cpu 2` on 2 CPUs at equal priority it
    // was 6-20 µs when the pacer was written, later (another kernel, the same VM type)
    // 50-500 µs, and with 4 hogs up to 1.2 ms: the generator's and the in-process server's
    // threads, which work (this is a debug build), wait behind the hogs for their CPU share,
    // while a thread that only sleeps (the reference above) still woke in 15-20 µs. At
    // nice -10 the median under 2 and 4 hogs was 12-37 µs (8 runs), so the bound tests
    // the pacer, not the machine's load. p90 and p99 still reach ms there (the calls' own
    // workers wait for a CPU); only the median is asserted, still far below the ~1 ms of a
    // millisecond timer.
    assert!(
        lag.p50_ns < 200_000,
        "median send lag {} ns (a bare sleeping thread beside it: p50 {ref_p50} ns, p90 {ref_p90} ns; \
         priority raised: {raised})\n{summary}",
        lag.p50_ns
    );
}

/// What the kernel gives a plain thread: it sleeps until each of `n` instants `gap` apart
/// (no timer slack) and returns how late each wake was, in ns.
fn bare_sleeper_lags(n: usize, gap: Duration) -> Vec<u64> {
    // SAFETY: prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let start = std::time::Instant::now();
    (1..=n as u32)
        .map(|i| {
            let at = start + gap * i;
            if let Some(d) = at.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(d);
            }
            std::time::Instant::now().saturating_duration_since(at).as_nanos() as u64
        })
        .collect()
}
