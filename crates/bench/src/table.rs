//! Markdown ratio tables: one row per workload, a column per system, and their ratio.
//!
//! `bench compare` prints one of these (eagernfs against nfs-ganesha); [`compare_write_reports`]
//! builds one from two `bench write` reports. The ratio is always first column / second
//! column; each row says whether higher is better so a reader knows which way is a win.

use crate::report::WriteReport;
use crate::units::{format_bytes, format_ns};
use std::fmt::Write;

/// Whether a larger value is better (throughput) or worse (latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Throughputs, rates.
    Higher,
    /// Latencies, times.
    Lower,
}

/// One workload measured on both systems.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioRow {
    /// What was measured (`write 100 MB, MB/s after close`).
    pub workload: String,
    /// Unit of the values (`MB/s`, `ns`): latencies in `ns` are printed in readable units.
    pub unit: String,
    /// Value on the first system, `None` if it was not measured or failed.
    pub a: Option<f64>,
    /// Value on the second system.
    pub b: Option<f64>,
    /// Which direction is a win.
    pub better: Better,
}

/// A table comparing two systems.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioTable {
    /// Heading printed above the table.
    pub title: String,
    /// Name of the first system (`eagernfs`).
    pub a_name: String,
    /// Name of the second system (`ganesha`).
    pub b_name: String,
    /// The workloads.
    pub rows: Vec<RatioRow>,
}

impl RatioRow {
    /// `a / b`, or `None` when either side is missing or `b` is zero.
    pub fn ratio(&self) -> Option<f64> {
        match (self.a, self.b) {
            (Some(a), Some(b)) if b != 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
            _ => None,
        }
    }
}

impl RatioTable {
    /// An empty table.
    pub fn new(title: impl Into<String>, a_name: impl Into<String>, b_name: impl Into<String>) -> Self {
        Self { title: title.into(), a_name: a_name.into(), b_name: b_name.into(), rows: Vec::new() }
    }

    /// Adds a row.
    pub fn push(
        &mut self,
        workload: impl Into<String>,
        unit: &str,
        a: Option<f64>,
        b: Option<f64>,
        better: Better,
    ) {
        self.rows.push(RatioRow { workload: workload.into(), unit: unit.to_string(), a, b, better });
    }

    /// The table as GitHub-flavoured Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        if !self.title.is_empty() {
            let _ = writeln!(out, "### {}\n", self.title);
        }
        let _ = writeln!(
            out,
            "| workload | {} | {} | {} / {} | better |",
            self.a_name, self.b_name, self.a_name, self.b_name
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---|");
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                row.workload,
                format_value(row.a, &row.unit),
                format_value(row.b, &row.unit),
                row.ratio().map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}")),
                match row.better {
                    Better::Higher => "higher",
                    Better::Lower => "lower",
                },
            );
        }
        out
    }
}

fn format_value(value: Option<f64>, unit: &str) -> String {
    match value {
        None => "n/a".to_string(),
        Some(v) if unit == "ns" => format_ns(v),
        Some(v) => format!("{v:.1} {unit}"),
    }
}

/// Compares two `bench write` reports size by size: the three throughputs and the mean and
/// p99 write() latency. Sizes present in only one report get `n/a` on the other side.
pub fn compare_write_reports(a: &WriteReport, b: &WriteReport, a_name: &str, b_name: &str) -> RatioTable {
    let mut table = RatioTable::new(
        format!("bench write, {} blocks (MB = 10^6 B)", format_bytes(a.settings.block_size_bytes)),
        a_name,
        b_name,
    );
    let mut sizes: Vec<u64> = a.runs.iter().chain(&b.runs).map(|r| r.file_size_requested_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let find = |r: &WriteReport| r.runs.iter().find(|run| run.file_size_requested_bytes == size).cloned();
        let (ra, rb) = (find(a), find(b));
        let label = format_bytes(size);
        let pick = |f: fn(&crate::report::WriteRun) -> Option<f64>| {
            (ra.as_ref().and_then(f), rb.as_ref().and_then(f))
        };
        let (x, y) = pick(|r| r.mb_per_s_writes);
        table.push(format!("write {label}: MB/s after last write"), "MB/s", x, y, Better::Higher);
        let (x, y) = pick(|r| r.mb_per_s_fsync);
        table.push(format!("write {label}: MB/s after fsync"), "MB/s", x, y, Better::Higher);
        let (x, y) = pick(|r| r.mb_per_s_close);
        table.push(format!("write {label}: MB/s after close"), "MB/s", x, y, Better::Higher);
        let (x, y) = pick(|r| r.latency.as_ref().map(|l| l.mean_ns));
        table.push(format!("write {label}: mean write() latency"), "ns", x, y, Better::Lower);
        let (x, y) = pick(|r| r.latency.as_ref().map(|l| l.p99_ns as f64));
        table.push(format!("write {label}: p99 write() latency"), "ns", x, y, Better::Lower);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_is_first_over_second_and_missing_values_print_na() {
        let mut t = RatioTable::new("t", "eagernfs", "ganesha");
        t.push("seq write", "MB/s", Some(300.0), Some(200.0), Better::Higher);
        t.push("getattr p99", "ns", Some(50_000.0), Some(100_000.0), Better::Lower);
        t.push("mountstorm", "s", None, Some(3.0), Better::Lower);
        t.push("zero", "MB/s", Some(1.0), Some(0.0), Better::Higher);
        assert_eq!(t.rows[0].ratio(), Some(1.5));
        assert_eq!(t.rows[1].ratio(), Some(0.5));
        assert_eq!(t.rows[2].ratio(), None);
        assert_eq!(t.rows[3].ratio(), None);
        let md = t.to_markdown();
        assert!(md.contains("| workload | eagernfs | ganesha | eagernfs / ganesha | better |"), "{md}");
        assert!(md.contains("| seq write | 300.0 MB/s | 200.0 MB/s | 1.50 | higher |"), "{md}");
        assert!(md.contains("| getattr p99 | 50.0 µs | 100 µs | 0.50 | lower |"), "{md}");
        assert!(md.contains("| mountstorm | n/a | 3.0 s | n/a | lower |"), "{md}");
    }
}
