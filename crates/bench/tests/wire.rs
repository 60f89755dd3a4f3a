//! The wire-level tools against an in-process eagernfs server (memory backend, port 0): the
//! arithmetic of each report on a tiny run. No timing thresholds: only counts and the
//! relations between the numbers a report prints.

// The server's black-box test harness (TestServer, export specs).
#[path = "../../server/tests/common/mod.rs"]
mod common;

use common::{memory, spec, TestServer};
use eagernfs_bench::load::clients::SourceAddrs;
use eagernfs_bench::load::fileset::FileSetShape;
use eagernfs_bench::load::mix::OpMix;
use eagernfs_bench::load::{run_load, Arrivals, LoadConfig, Schedule, StepEnd};
use eagernfs_bench::mountstorm::{run_mountstorm, MountstormConfig};
use eagernfs_proto::nfs3::NFSPROC3_GETATTR;
use std::time::Duration;

fn mem_server() -> TestServer {
    TestServer::start(vec![spec(
        1,
        &["/export"],
        "/export 127.0.0.0/8(rw,insecure,no_root_squash)",
        memory(),
    )])
}

fn tiny_load(s: &TestServer) -> LoadConfig {
    LoadConfig {
        url: format!("nfs://127.0.0.1:{}/export", s.addr.port()),
        client_counts: vec![3],
        source_addrs: SourceAddrs::Distinct,
        mix: OpMix::sfs3(),
        arrivals: Arrivals::Poisson,
        schedule: Schedule::Rates(vec![2000.0]),
        fileset: FileSetShape { dir_name: "set".into(), dirs: 2, files_per_dir: 3, file_size_bytes: 16384 },
        io_size_bytes: 4096,
        // Long enough that the call bound, not the clock, ends the step on any machine.
        step_duration: Duration::from_secs(60),
        step_ops_max: 300,
        max_duration: Duration::from_secs(120),
        progress: false,
        ..LoadConfig::default()
    }
}

#[test]
fn load_counts_every_requested_call_and_rates_are_calls_over_time() {
    let s = mem_server();
    let getattrs_before = s.stats.nfs3(NFSPROC3_GETATTR);
    let report = run_load(&tiny_load(&s)).expect("load run");
    assert_eq!(report.steps.len(), 1);
    let step = &report.steps[0];
    assert_eq!(step.ended_by, StepEnd::Ops);
    assert_eq!(step.issued_ops, 300);
    assert_eq!(step.rate.completed_ops, 300, "every issued call is answered and counted");
    let per_op: u64 = step.rate.ops.iter().map(|o| o.calls).sum();
    assert_eq!(per_op, 300, "per-operation calls add up to the total");
    let latency = step.latency.as_ref().expect("latencies recorded");
    assert_eq!(latency.count, 300);
    let per_op_latencies: u64 =
        step.rate.ops.iter().filter_map(|o| o.latency.as_ref()).map(|l| l.count).sum();
    assert_eq!(per_op_latencies, 300);
    assert_eq!(step.service_latency.as_ref().map(|l| l.count), Some(300));
    assert_eq!(step.errors, 0, "{:?}", step.rate.ops);
    assert!(step.rate.elapsed_ns > 0);
    let expected = 300.0 / (step.rate.elapsed_ns as f64 / 1e9);
    assert_eq!(step.rate.achieved_ops_per_s, Some(expected));
    assert_eq!(step.rate.offered_ops_per_s, Some(2000.0));
    assert_eq!(step.rate.clients, 3);
    // The server saw at least the GETATTRs the report counts (it also saw the preparation's).
    let ours = step.rate.ops.iter().find(|o| o.op == "GETATTR").map_or(0, |o| o.calls);
    assert!(s.stats.nfs3(NFSPROC3_GETATTR) - getattrs_before >= ours);
    // The file set was created (6 files), and a second run reuses it.
    assert_eq!(report.fileset_files_written, 6);
    let again = run_load(&tiny_load(&s)).expect("second run");
    assert_eq!(again.fileset_files_written, 0, "the file set is reused");
    let json = serde_json::to_string(&report).unwrap();
    let back: eagernfs_bench::load::LoadReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report, "the JSON report round-trips");
    // Open-loop steps measure their send lag; a report written before that existed loads.
    assert_eq!(step.send_lag.as_ref().map(|l| l.count), Some(300));
    let mut old: serde_json::Value = serde_json::to_value(&report).unwrap();
    old["steps"][0].as_object_mut().unwrap().remove("send_lag").expect("send_lag in the JSON");
    let old: eagernfs_bench::load::LoadReport = serde_json::from_value(old).unwrap();
    assert_eq!(old.steps[0].send_lag, None);
    assert!(eagernfs_bench::load::summarize_load(&old).contains("n/a"));
}

#[test]
fn closed_loop_steps_per_client_count_each_count_their_calls() {
    let s = mem_server();
    let config = LoadConfig {
        client_counts: vec![1, 2],
        schedule: Schedule::ClosedLoop { outstanding: 2 },
        step_ops_max: 120,
        max_ops: 1000,
        ..tiny_load(&s)
    };
    let report = run_load(&config).expect("load run");
    assert_eq!(report.steps.len(), 2);
    for (step, clients) in report.steps.iter().zip([1, 2]) {
        assert_eq!(step.rate.clients, clients);
        assert_eq!(step.rate.completed_ops, 120);
        assert_eq!(step.rate.offered_ops_per_s, None);
        assert_eq!(step.closed_loop_outstanding, Some(2));
        assert_eq!(step.late_starts, 0, "a closed loop starts every call when it means to");
        assert_eq!(step.send_lag, None, "a closed loop has no intended times to be late for");
    }
    let dir = tempfile::tempdir().unwrap();
    let files = eagernfs_bench::load::plot_load(&report, &dir.path().join("l")).unwrap();
    let names: Vec<String> =
        files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["l-callrate.svg", "l-callrate.png", "l-clients.svg", "l-clients.png"]);
}

#[test]
fn the_run_bound_on_calls_ends_the_schedule() {
    let s = mem_server();
    let config =
        LoadConfig { schedule: Schedule::Rates(vec![1000.0, 2000.0, 3000.0]), max_ops: 250, ..tiny_load(&s) };
    let report = run_load(&config).expect("load run");
    let total: u64 = report.steps.iter().map(|s| s.rate.completed_ops).sum();
    assert_eq!(total, 250);
    assert_eq!(report.steps.len(), 1, "the first step used the whole budget");
    assert_eq!(report.stopped_early, Some(eagernfs_bench::report::StopReason::MaxCalls));
}

fn storm(port: u16, clients: u32) -> MountstormConfig {
    MountstormConfig {
        server: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        export: "/export".into(),
        clients,
        progress: false,
        max_duration: Duration::from_secs(60),
        ..MountstormConfig::default()
    }
}

#[test]
fn a_storm_of_50_clients_all_succeed() {
    let s = mem_server();
    let report = run_mountstorm(&storm(s.addr.port(), 50)).expect("storm");
    assert_eq!(report.succeeded, 50, "failures: {:?}", report.failures);
    assert_eq!(report.failed, 0);
    assert!(report.failures.is_empty());
    assert_eq!(report.success_times_ns.len(), 50);
    assert!(report.success_times_ns.windows(2).all(|w| w[0] <= w[1]), "sorted completion times");
    assert_eq!(report.all_succeeded_ns, report.success_times_ns.last().copied());
    assert_eq!(report.latency.as_ref().map(|l| l.count), Some(50));
    assert!(report.all_succeeded_ns.unwrap() <= report.elapsed_ns);
    // Every client mounted and made its first GETATTR.
    assert!(s.stats.nfs3(NFSPROC3_GETATTR) >= 50);
}

#[test]
fn a_storm_against_a_closed_port_reports_every_failure_with_its_cause() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = MountstormConfig { concurrency: Some(10), ..storm(port, 50) };
    let report = run_mountstorm(&config).expect("storm");
    assert_eq!(report.succeeded, 0);
    assert_eq!(report.failed, 50);
    assert_eq!(report.failures.values().sum::<u64>(), 50);
    assert_eq!(report.failures.len(), 1, "one cause, counted once per client: {:?}", report.failures);
    let cause = report.failures.keys().next().unwrap();
    assert!(cause.contains("connection refused"), "{cause}");
    assert_eq!(report.all_succeeded_ns, None);
    assert_eq!(report.latency, None);
}

fn tiny_stream(
    s: &TestServer,
    direction: eagernfs_bench::stream::Direction,
) -> eagernfs_bench::stream::StreamConfig {
    eagernfs_bench::stream::StreamConfig {
        url: format!("nfs://127.0.0.1:{}/export", s.addr.port()),
        direction,
        size_bytes: 1 << 20,
        rpc_size_bytes: 32 << 10,
        in_flight: 8,
        progress: false,
        ..Default::default()
    }
}

#[test]
fn a_file_sync_stream_sends_no_commit_and_counts_what_was_answered_stable() {
    use eagernfs_bench::stream::{run_stream, Direction, Stability};
    let s = mem_server();
    let config = eagernfs_bench::stream::StreamConfig {
        stable: Stability::FileSync,
        ..tiny_stream(&s, Direction::Write)
    };
    let r = run_stream(&config).expect("stream");
    assert_eq!(r.stable, Stability::FileSync);
    assert_eq!(r.bytes, 1 << 20);
    assert_eq!(r.stably_answered_bytes, 1 << 20, "a FILE_SYNC WRITE is answered at least FILE_SYNC");
    assert_eq!(r.commit_ns, None, "no COMMIT after stable writes");
    assert!(eagernfs_bench::stream::summarize_stream(&r).contains("WRITE FILE_SYNC"));
}

#[test]
fn a_stream_counts_its_bytes_and_each_order_holds_every_offset_once() {
    use eagernfs_bench::stream::{run_stream, Direction};
    let s = mem_server();
    for direction in [Direction::Write, Direction::Read] {
        let r = run_stream(&tiny_stream(&s, direction)).expect("stream");
        assert_eq!(r.bytes, 1 << 20);
        assert_eq!(r.rpcs, 32);
        assert_eq!(r.stopped_early, None);
        assert_eq!(r.latency.as_ref().map(|l| l.count), Some(32));
        let expected: Vec<u64> = (0..32).map(|i| i * 32768).collect();
        assert_eq!(r.sent.offsets, expected, "one issuer sends in order");
        assert_eq!(r.sent.out_of_order, 0);
        let mut completed = r.completed.offsets.clone();
        completed.sort_unstable();
        assert_eq!(completed, expected, "every offset completes exactly once");
        assert_eq!(r.mb_per_s, eagernfs_bench::units::mb_per_s(r.bytes, r.transfer_ns));
        assert_eq!(r.commit_ns.is_some(), direction == Direction::Write);
        assert_eq!(r.backend, None);
    }
}

#[test]
fn a_stream_bounded_by_rpcs_stops_early_and_says_so() {
    use eagernfs_bench::stream::{run_stream, Direction};
    let s = mem_server();
    let config = eagernfs_bench::stream::StreamConfig { max_rpcs: 5, ..tiny_stream(&s, Direction::Write) };
    let r = run_stream(&config).expect("stream");
    assert_eq!(r.rpcs, 5);
    assert_eq!(r.bytes, 5 * 32768);
    assert_eq!(r.stopped_early, Some(eagernfs_bench::report::StopReason::MaxCalls));
}

#[test]
fn a_stream_reads_the_backend_order_from_a_server_trace() {
    use eagernfs_bench::stream::{run_stream, Direction};
    let s = mem_server();
    // First learn the file's fileid, then write a trace naming it in a known order (the
    // in-process harness does not expose the server's own trace).
    let first = run_stream(&tiny_stream(&s, Direction::Write)).expect("stream");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("io.trace");
    let mut text = String::new();
    for i in [0u64, 2, 1, 3].into_iter().chain(4..32) {
        text.push_str(&format!("W {} {} 32768\n", first.fileid, i * 32768));
    }
    std::fs::write(&trace, text).unwrap();
    let config = eagernfs_bench::stream::StreamConfig {
        server_trace: Some(trace),
        trace_wait: Duration::from_secs(5),
        ..tiny_stream(&s, Direction::Write)
    };
    let r = run_stream(&config).expect("stream");
    assert_eq!(r.fileid, first.fileid, "the same file, truncated and rewritten");
    let backend = r.backend.as_ref().expect("backend order");
    assert_eq!(backend.offsets.len(), 32);
    assert_eq!(backend.out_of_order, 1);
    assert_eq!(backend.out_of_order_fraction, 1.0 / 32.0);
    assert_eq!(r.backend_note, None);
    let out = dir.path().join("s");
    let files = eagernfs_bench::stream::plot_stream(&r, &out).unwrap();
    assert!(files.iter().all(|f| std::fs::metadata(f).unwrap().len() > 0));
}

#[test]
fn compare_runs_every_workload_on_every_target_and_tables_their_ratios() {
    use eagernfs_bench::compare::{bench_compare, CompareCommand, CompareTarget};
    let (a, b) = (mem_server(), mem_server());
    let out = tempfile::tempdir().unwrap();
    let url = |s: &TestServer| format!("nfs://127.0.0.1:{}/export", s.addr.port());
    let command = CompareCommand {
        targets: vec![
            CompareTarget { name: "one".into(), url: url(&a) },
            CompareTarget { name: "two".into(), url: url(&b) },
        ],
        restarts: Default::default(),
        stream_size_bytes: 1 << 20,
        stream_rpc_size_bytes: 65536,
        stream_in_flight: 4,
        load_rates: vec![300.0],
        load_clients: 2,
        load_step: Duration::from_millis(500),
        mountstorm_clients: 20,
        out_dir: out.path().to_path_buf(),
        progress: false,
    };
    let o = bench_compare(&command).expect("compare");
    for t in &o.report.targets {
        assert!(t.errors.is_empty(), "{}: {:?}", t.target.name, t.errors);
        assert_eq!(t.stream_write.as_ref().unwrap().bytes, 1 << 20);
        assert_eq!(t.stream_read.as_ref().unwrap().bytes, 1 << 20);
        assert_eq!(t.load.as_ref().unwrap().steps.len(), 1);
        assert_eq!(t.mountstorm.as_ref().unwrap().succeeded, 20);
    }
    let md = &o.markdown;
    assert!(md.contains("| workload | one | two | one / two | better |"), "{md}");
    assert!(
        md.contains("| mount storm, 20 clients: failed | 0.0 clients | 0.0 clients | n/a | lower |"),
        "{md}"
    );
    // Every row with both values has their ratio.
    let write = &o
        .report
        .targets
        .iter()
        .map(|t| t.stream_write.as_ref().unwrap().mb_per_s_committed.unwrap())
        .collect::<Vec<_>>();
    assert!(md.contains(&format!("{:.2} | higher", write[0] / write[1])), "{md}");
    assert!(out.path().join("table.md").exists());
    assert!(out.path().join("compare-callrate.svg").exists());
    assert!(out.path().join("compare-mountstorm.png").exists());
    // The reports are saved compressed and read back whole.
    assert!(out.path().join("one-load.json.gz").exists());
    let saved: eagernfs_bench::compare::CompareReport = eagernfs_bench::report::load_report(
        &out.path().join("compare.json.gz"),
        eagernfs_bench::compare::COMPARE_SCHEMA,
    )
    .expect("compare.json.gz reads back");
    assert_eq!(saved, o.report);
}

#[test]
fn bench_write_through_the_client_sends_unstable_writes_and_commits() {
    use eagernfs_bench::write::{run_write, WriteConfig};
    use eagernfs_bench::write_nfs::NfsTarget;
    use eagernfs_proto::nfs3::{StableHow, NFSPROC3_COMMIT, NFSPROC3_REMOVE};
    let s = mem_server();
    let target = NfsTarget::connect(&format!("nfs://127.0.0.1:{}/export", s.addr.port()), None).unwrap();
    let config = WriteConfig {
        sizes_bytes: vec![4 << 20],
        block_size_bytes: 8192,
        progress: false,
        ..WriteConfig::default()
    };
    let report = run_write(&target, &config).expect("write run");
    let run = &report.runs[0];
    assert_eq!(run.bytes_written, 4 << 20);
    assert_eq!(run.calls, 512, "one write() per 8 KiB block");
    assert_eq!(run.latency.as_ref().unwrap().count, 512);
    assert_eq!(report.target.fs_type, "nfs-wire");
    // The client never wrote a block FILE_SYNC; it wrote UNSTABLE and committed.
    assert!(s.stats.writes(StableHow::Unstable) >= 4, "4 MiB in at most 1 MiB WRITEs");
    assert_eq!(s.stats.writes(StableHow::FileSync), 0);
    assert!(s.stats.nfs3(NFSPROC3_COMMIT) >= 1, "fsync/close committed");
    assert_eq!(s.stats.nfs3(NFSPROC3_REMOVE), 1, "the benchmark removed its file");
}
