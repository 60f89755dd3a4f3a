//! `bench write` on a temporary directory: the report's arithmetic must agree with itself and
//! with what was written. No timing thresholds: only relations that hold on any machine.

use eagernfs_bench::cli_args::{BenchCommand, WriteArgs};
use eagernfs_bench::report::{load_write_report, save_json, StopReason, WRITE_SCHEMA};
use eagernfs_bench::table::compare_write_reports;
use eagernfs_bench::{
    bench_plot, bench_table, bench_write, run_write, DirectoryTarget, WriteConfig, WriteRun,
};
use eagernfs_bench::{PlotCommand, PlotKind, TableCommand, WriteCommand};
use std::time::Duration;

fn config(sizes_bytes: Vec<u64>, block_size_bytes: usize) -> WriteConfig {
    WriteConfig { sizes_bytes, block_size_bytes, progress: false, ..WriteConfig::default() }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn check_run_arithmetic(run: &WriteRun) {
    let latency = run.latency.as_ref().expect("a run with calls has a latency summary");
    assert_eq!(latency.count, run.calls);
    assert_eq!(run.latencies_ns.len() as u64, run.calls);
    assert_eq!(run.latencies_ns.iter().sum::<u64>(), latency.total_ns);
    assert!(close(latency.mean_ns, latency.total_ns as f64 / run.calls as f64));
    assert_eq!(*run.latencies_ns.iter().min().unwrap(), latency.min_ns);
    assert_eq!(*run.latencies_ns.iter().max().unwrap(), latency.max_ns);
    assert!(latency.min_ns <= latency.p50_ns && latency.p50_ns <= latency.p99_ns);
    assert!(latency.p99_ns <= latency.p999_ns && latency.p999_ns <= latency.max_ns);
    // The outlier split agrees with the samples.
    let within: Vec<u64> =
        run.latencies_ns.iter().copied().filter(|&ns| ns <= latency.outlier_threshold_ns).collect();
    assert_eq!(latency.outliers, run.calls - within.len() as u64);
    match latency.mean_without_outliers_ns {
        Some(mean) => assert!(close(mean, within.iter().sum::<u64>() as f64 / within.len() as f64)),
        None => assert!(within.is_empty()),
    }
    // MB/s = bytes / 10^6 / seconds, for each of the three end points, and the end points
    // come in order.
    let rate = |ns: u64| run.bytes_written as f64 / 1e6 / (ns as f64 / 1e9);
    assert!(close(run.mb_per_s_writes.unwrap(), rate(run.writes_elapsed_ns)));
    assert!(close(run.mb_per_s_close.unwrap(), rate(run.close_elapsed_ns)));
    if let Some(fsync_elapsed_ns) = run.fsync_elapsed_ns {
        assert!(close(run.mb_per_s_fsync.unwrap(), rate(fsync_elapsed_ns)));
        assert!(run.writes_elapsed_ns <= fsync_elapsed_ns && fsync_elapsed_ns <= run.close_elapsed_ns);
        assert!(run.fsync_ns.unwrap() <= fsync_elapsed_ns - run.writes_elapsed_ns);
    }
    assert!(run.close_ns <= run.close_elapsed_ns);
    // The write loop's calls fit inside the time measured up to the last write.
    assert!(latency.total_ns <= run.writes_elapsed_ns);
    assert!(run.create_ns <= run.writes_elapsed_ns);
}

#[test]
fn sixty_four_writes_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let target = DirectoryTarget::new(dir.path(), Some("tmp".into())).unwrap();
    let report = run_write(&target, &config(vec![64 * 8192], 8192)).unwrap();
    assert_eq!(report.schema, WRITE_SCHEMA);
    assert_eq!(report.target.label, "tmp");
    assert_eq!(report.settings.block_size_bytes, 8192);
    assert_eq!(report.runs.len(), 1);
    let run = &report.runs[0];
    assert_eq!(run.bytes_written, 64 * 8192);
    assert_eq!(run.file_size_requested_bytes, 64 * 8192);
    assert_eq!(run.calls, 64);
    assert_eq!(run.stopped_early, None);
    check_run_arithmetic(run);
    // The file is gone afterwards, and nothing else was left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_size_that_is_not_a_multiple_of_the_block_ends_with_a_short_write() {
    let dir = tempfile::tempdir().unwrap();
    let target = DirectoryTarget::new(dir.path(), None).unwrap();
    let mut cfg = config(vec![10_000], 4096);
    cfg.keep_files = true;
    let report = run_write(&target, &cfg).unwrap();
    let run = &report.runs[0];
    assert_eq!(run.calls, 3);
    assert_eq!(run.bytes_written, 10_000);
    check_run_arithmetic(run);
    // Kept on request, with exactly the bytes reported, and not all zeros.
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    let data = std::fs::read(&files[0]).unwrap();
    assert_eq!(data.len(), 10_000);
    assert!(data.iter().any(|&b| b != 0));
    // A second block repeats the first: every call writes the same buffer.
    assert_eq!(data[..4096], data[4096..8192]);
}

#[test]
fn the_call_bound_stops_a_run_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let target = DirectoryTarget::new(dir.path(), None).unwrap();
    let mut cfg = config(vec![1 << 20], 4096);
    cfg.max_calls = 5;
    let report = run_write(&target, &cfg).unwrap();
    let run = &report.runs[0];
    assert_eq!(run.stopped_early, Some(StopReason::MaxCalls));
    assert_eq!(run.calls, 5);
    assert_eq!(run.bytes_written, 5 * 4096);
    check_run_arithmetic(run);
}

#[test]
fn a_sweep_runs_every_size_in_order_and_without_fsync_has_no_fsync_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let target = DirectoryTarget::new(dir.path(), None).unwrap();
    let mut cfg = config(vec![3 * 4096, 1 << 16, 5 * 4096], 4096);
    cfg.fsync = false;
    let report = run_write(&target, &cfg).unwrap();
    let sizes: Vec<u64> = report.runs.iter().map(|r| r.bytes_written).collect();
    assert_eq!(sizes, [3 * 4096, 1 << 16, 5 * 4096]);
    assert!(report.skipped_sizes_bytes.is_empty());
    for run in &report.runs {
        assert_eq!(run.fsync_ns, None);
        assert_eq!(run.mb_per_s_fsync, None);
        check_run_arithmetic(run);
    }
}

#[test]
fn bad_configurations_are_refused_before_touching_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let target = DirectoryTarget::new(dir.path(), None).unwrap();
    for cfg in [
        config(vec![4096], 0),
        config(vec![0], 4096),
        config(vec![], 4096),
        WriteConfig { max_calls: 0, ..config(vec![4096], 4096) },
        WriteConfig { max_duration: Duration::ZERO, ..config(vec![4096], 4096) },
    ] {
        assert!(run_write(&target, &cfg).is_err(), "{cfg:?}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert!(DirectoryTarget::new(dir.path().join("missing"), None).is_err());
}

#[test]
fn json_round_trips_and_feeds_plots_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // `--json a.json.gz` saves the report compressed; every reader takes it as it is.
    let json = out.path().join("a.json.gz");
    let command = WriteCommand {
        target_dir: dir.path().to_path_buf(),
        label: Some("first".into()),
        config: config(vec![1 << 16, 1 << 17], 8192),
        json_path: Some(json.clone()),
        plot_prefix: Some(out.path().join("a")),
    };
    let output = bench_write(&command).unwrap();
    assert!(output.summary.contains("bench write: first"), "{}", output.summary);
    assert_eq!(load_write_report(&json).unwrap(), output.report);
    // A sweep draws throughput and, per size, latency and histogram, each as SVG and PNG.
    for name in
        ["a.json.gz", "a-throughput.svg", "a-throughput.png", "a-64KiB-latency.png", "a-128KiB-histogram.svg"]
    {
        assert!(output.files.contains(&out.path().join(name)), "{name} missing from {:?}", output.files);
    }
    for file in &output.files {
        let bytes = std::fs::read(file).unwrap();
        match file.extension().and_then(|e| e.to_str()) {
            Some("png") => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", file.display()),
            Some("svg") => assert!(String::from_utf8_lossy(&bytes).contains("<svg"), "{}", file.display()),
            Some("gz") => assert_eq!(&bytes[..2], b"\x1f\x8b", "{} is not gzip", file.display()),
            _ => {}
        }
    }

    // A second report, relabelled and saved uncompressed, for a two-target chart and a ratio
    // table that read one report of each form.
    let mut second = output.report.clone();
    second.target.label = "second".into();
    let json_b = out.path().join("b.json");
    save_json(&second, &json_b).unwrap();
    assert_eq!(std::fs::read(&json_b).unwrap()[0], b'{', "a .json name stays plain JSON");
    assert_eq!(load_write_report(&json_b).unwrap(), second);
    for kind in [PlotKind::Throughput(eagernfs_bench::plot::ThroughputMetric::Close), PlotKind::Histogram] {
        let files = bench_plot(&PlotCommand {
            inputs: vec![json.clone(), json_b.clone()],
            labels: vec![],
            kind,
            output_prefix: out.path().join("both"),
            title: None,
        })
        .unwrap();
        assert_eq!(files.len(), 2);
    }
    let markdown = bench_table(&TableCommand {
        a: json.clone(),
        b: json_b.clone(),
        a_name: "eagernfs".into(),
        b_name: "ganesha".into(),
    })
    .unwrap();
    // The same numbers on both sides: every ratio is exactly 1.
    let table = compare_write_reports(&output.report, &second, "eagernfs", "ganesha");
    assert_eq!(table.rows.len(), 2 * 5);
    assert!(table.rows.iter().all(|r| r.ratio() == Some(1.0)), "{markdown}");
    assert!(markdown.contains("| write 64 KiB: MB/s after close |"), "{markdown}");

    // Any other JSON is refused by name.
    let other = out.path().join("other.json");
    std::fs::write(&other, r#"{"schema":"something/else"}"#).unwrap();
    assert!(load_write_report(&other).unwrap_err().to_string().contains("something/else"));
}

#[test]
fn the_clap_arguments_build_the_same_command() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: BenchCommand,
    }
    let cli = Cli::try_parse_from([
        "bench",
        "write",
        "/tmp",
        "--size",
        "25MB",
        "--block",
        "4KiB",
        "--outlier",
        "500us",
        "--max-seconds",
        "60",
        "--json",
        "out.json",
        "--no-fsync",
    ])
    .unwrap();
    let BenchCommand::Write(args) = cli.command else { panic!("not write") };
    let command = args.to_command().unwrap();
    assert_eq!(command.config.sizes_bytes, [25_000_000]);
    assert_eq!(command.config.block_size_bytes, 4096);
    assert_eq!(command.config.outlier_threshold, Duration::from_micros(500));
    assert_eq!(command.config.max_duration, Duration::from_secs(60));
    assert!(!command.config.fsync);
    assert_eq!(command.json_path.as_deref(), Some(std::path::Path::new("out.json")));

    let sweep = Cli::try_parse_from(["bench", "write", "/tmp", "--sweep"]).unwrap();
    let BenchCommand::Write(args) = sweep.command else { panic!("not write") };
    let sizes = args.to_command().unwrap().config.sizes_bytes;
    assert_eq!((sizes[0], *sizes.last().unwrap(), sizes.len()), (25_000_000, 450_000_000, 11));

    let list = Cli::try_parse_from(["bench", "write", "/tmp", "--sizes", "1MiB,2MiB"]).unwrap();
    let BenchCommand::Write(args): BenchCommand = list.command else { panic!("not write") };
    assert_eq!(args.to_command().unwrap().config.sizes_bytes, [1 << 20, 2 << 20]);

    let bad: Result<WriteArgs, _> =
        Cli::try_parse_from(["bench", "write", "/tmp", "--block", "0"]).map(|c| match c.command {
            BenchCommand::Write(a) => a,
            _ => unreachable!(),
        });
    assert!(bad.unwrap().to_command().is_err(), "a zero block is refused");
    assert!(Cli::try_parse_from(["bench", "write", "/tmp", "--sweep", "--sizes", "1MiB"]).is_err());
}
