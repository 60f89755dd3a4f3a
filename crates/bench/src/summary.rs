//! The short human summary each command prints after its run.

use crate::report::{StopReason, WriteReport, WriteRun};
use crate::units::{format_bytes, format_ns, format_rate};
use std::fmt::Write;

/// A few lines per run: throughputs, latency, spikes. A sweep gets one line per size.
pub fn summarize_write(report: &WriteReport) -> String {
    let mut out = String::new();
    let s = &report.settings;
    let _ = writeln!(
        out,
        "bench write: {} · {} blocks{} · {} · {} CPUs",
        report.target.label,
        format_bytes(s.block_size_bytes),
        if s.fsync { "" } else { " · no fsync" },
        report.machine.kernel,
        report.machine.cpus,
    );
    match report.runs.as_slice() {
        [] => {
            let _ = writeln!(out, "  no run completed");
        }
        [run] => write_single(&mut out, report, run),
        runs => write_sweep(&mut out, runs),
    }
    if !report.skipped_sizes_bytes.is_empty() {
        let sizes: Vec<String> = report.skipped_sizes_bytes.iter().map(|&b| format_bytes(b)).collect();
        let _ =
            writeln!(out, "  not run (time bound of {:.0} s used up): {}", s.max_seconds, sizes.join(", "));
    }
    out
}

fn stop_note(run: &WriteRun) -> String {
    match run.stopped_early {
        None => String::new(),
        Some(StopReason::MaxDuration) => " (stopped by --max-seconds)".to_string(),
        Some(StopReason::MaxCalls) => " (stopped by --max-calls)".to_string(),
    }
}

/// The period in time as well as in calls: a period that is constant in time (a 4 ms timer
/// tick, a 5 s writeback) points elsewhere than one constant in calls (a request-count limit,
/// as in the paper). Calls are spaced by the write loop's time divided by the calls made.
fn period_time(run: &WriteRun, period_calls: u64) -> String {
    if run.calls == 0 {
        return String::new();
    }
    let loop_ns = run.writes_elapsed_ns.saturating_sub(run.create_ns) as f64;
    format!(" ≈ {}", format_ns(loop_ns / run.calls as f64 * period_calls as f64))
}

fn write_single(out: &mut String, report: &WriteReport, run: &WriteRun) {
    let _ = writeln!(
        out,
        "  file      {} written in {} write() calls{}",
        format_bytes(run.bytes_written),
        run.calls,
        stop_note(run)
    );
    let _ = writeln!(
        out,
        "  MB/s      after last write {} · after fsync {} · after close {}   (MB = 10^6 B)",
        format_rate(run.mb_per_s_writes),
        format_rate(run.mb_per_s_fsync),
        format_rate(run.mb_per_s_close),
    );
    let _ = writeln!(
        out,
        "  time      create {} · writes {} · fsync {} · close {}",
        format_ns(run.create_ns as f64),
        format_ns(run.writes_elapsed_ns.saturating_sub(run.create_ns) as f64),
        run.fsync_ns.map_or_else(|| "skipped".to_string(), |ns| format_ns(ns as f64)),
        format_ns(run.close_ns as f64),
    );
    if let Some(peak) = run.held_peak_bytes {
        let mean = if run.held_samples.is_empty() {
            0
        } else {
            run.held_samples.iter().map(|s| s[1]).sum::<u64>() / run.held_samples.len() as u64
        };
        let _ = writeln!(
            out,
            "  held      peak {} · mean {} of written data held by the client (dirty, in flight, kept until COMMIT)",
            format_bytes(peak),
            format_bytes(mean)
        );
    }
    if let Some(l) = &run.latency {
        let _ = writeln!(
            out,
            "  latency   mean {} ({} without the {} calls > {}) · p50 {} · p99 {} · p99.9 {} · max {}",
            format_ns(l.mean_ns),
            l.mean_without_outliers_ns.map_or_else(|| "n/a".to_string(), format_ns),
            l.outliers,
            format_ns(l.outlier_threshold_ns as f64),
            format_ns(l.p50_ns as f64),
            format_ns(l.p99_ns as f64),
            format_ns(l.p999_ns as f64),
            format_ns(l.max_ns as f64),
        );
    }
    let sp = &run.spikes;
    let rhythm = match (sp.periodic, sp.period_calls) {
        (true, Some(p)) => format!(
            "periodic, every {p} calls{} (score {:.2})",
            period_time(run, p),
            sp.period_score.unwrap_or(0.0)
        ),
        _ if sp.spikes < report.settings.spikes.min_spikes as u64 => {
            "too few to test for a period".to_string()
        }
        _ => "not periodic".to_string(),
    };
    let _ = writeln!(
        out,
        "  spikes    {} calls > {}× median ({}) = {:.2}% of calls · {}",
        sp.spikes,
        report.settings.spikes.factor,
        format_ns(sp.threshold_ns as f64),
        sp.spike_fraction * 100.0,
        rhythm,
    );
}

fn write_sweep(out: &mut String, runs: &[WriteRun]) {
    let _ = writeln!(
        out,
        "  {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}  period",
        "size", "calls", "MB/s wr", "MB/s fs", "MB/s cl", "mean", "p99", "spikes"
    );
    for run in runs {
        let (mean, p99) = run.latency.as_ref().map_or(("n/a".to_string(), "n/a".to_string()), |l| {
            (format_ns(l.mean_ns), format_ns(l.p99_ns as f64))
        });
        let period = match (run.spikes.periodic, run.spikes.period_calls) {
            (true, Some(p)) => format!("{p} calls{}", period_time(run, p)),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6.2}%  {}{}",
            format_bytes(run.bytes_written),
            run.calls,
            format_rate(run.mb_per_s_writes),
            format_rate(run.mb_per_s_fsync),
            format_rate(run.mb_per_s_close),
            mean,
            p99,
            run.spikes.spike_fraction * 100.0,
            period,
            stop_note(run),
        );
    }
}
