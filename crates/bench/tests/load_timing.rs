//! The open-loop generator sends calls on time: against an in-process server (memory
//! backend), a low-rate step starts its calls within a fraction of a millisecond of their
//! intended times. With tokio's millisecond timer alone the median send lag was ~0.5-1 ms
//! (a deadline is rounded up to the next tick), so this fails if the pacer stops working.
//!
//! A timing test, kept alone in its own binary so no other test of this crate competes for
//! the CPUs while it runs. The bound holds on a machine whose CPUs are all busy with other
//! work (checked under `stress-ng --cpu 2` on 2 CPUs); see the assertion.

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
    let report = run_load(&config).expect("load run");
    let step = &report.steps[0];
    assert_eq!(step.rate.completed_ops, calls);
    assert_eq!(step.errors, 0, "{:?}", step.rate.ops);
    let lag = step.send_lag.as_ref().expect("an open-loop step measures its send lag");
    assert_eq!(lag.count, calls, "every call's send lag is recorded");
    let summary = summarize_load(&report);
    eprintln!("{summary}send lag p50 {} ns, p90 {} ns, p99 {} ns", lag.p50_ns, lag.p90_ns, lag.p99_ns);
    assert!(summary.contains("lag p99"), "{summary}");
    // Idle, the median is a few µs. With every CPU busy with other work (stress-ng --cpu 2
    // on 2 CPUs) the median was 5-10 µs when this was written, later 30-100 µs and once over
    // this bound, while the pacer spun through the last 2 ms of every wait: the kernel
    // treated its thread as a CPU hog and descheduled it for whole slices. Now that it
    // sleeps on a timerfd until shortly before each call, the median under stress is
    // 6-20 µs (idle 5-9 µs); p90 and p99 still reach 1-5 ms there (the calls' own workers
    // wait for a CPU). Only the median is asserted; it is still far below the ~1 ms of a
    // millisecond timer.
    assert!(lag.p50_ns < 200_000, "median send lag {} ns\n{summary}", lag.p50_ns);
}
