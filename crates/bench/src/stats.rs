//! Latency statistics: a recorder that takes one sample per call in fixed memory, and the
//! summary every report carries (mean with and without outliers, percentiles, extremes).
//!
//! Means, minimum and maximum are exact. Percentiles come from an HDR histogram with three
//! significant digits (a p99 of 1234567 ns may read 1234943 ns), clamped to the exact extremes.
//! The "outlier" split follows Lever & Honeyman §3.3: the mean is reported over all calls and
//! over the calls at or under a threshold (1 ms in the paper), because a few slow calls can
//! triple the mean and hide what most calls cost.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Latency percentiles and means of one set of calls, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of calls measured.
    pub count: u64,
    /// Sum of all latencies: with `count`, lets a reader recompute the mean exactly.
    pub total_ns: u64,
    /// Fastest call.
    pub min_ns: u64,
    /// Arithmetic mean over all calls.
    pub mean_ns: f64,
    /// Calls slower than this are outliers (the paper's 1 ms).
    pub outlier_threshold_ns: u64,
    /// How many calls were slower than `outlier_threshold_ns`.
    pub outliers: u64,
    /// Mean over the calls at or under the threshold; `None` when every call was an outlier.
    pub mean_without_outliers_ns: Option<f64>,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Slowest call.
    pub max_ns: u64,
}

/// Collects latency samples in fixed memory; cheap enough to call once per operation.
///
/// Recorders merge, so a load generator can keep one per virtual client and operation and
/// add them up at the end without sharing a lock on the hot path.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
    outlier_threshold_ns: u64,
    count: u64,
    total_ns: u64,
    min_ns: u64,
    max_ns: u64,
    within_count: u64,
    within_total_ns: u64,
}

impl LatencyRecorder {
    /// A recorder that splits outliers at `outlier_threshold`.
    pub fn new(outlier_threshold: Duration) -> Self {
        Self {
            // Three significant digits; the histogram grows to fit any value it is given, so
            // no sample is ever rejected.
            histogram: Histogram::new(3).expect("3 significant digits is a valid precision"),
            outlier_threshold_ns: duration_ns(outlier_threshold),
            count: 0,
            total_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            within_count: 0,
            within_total_ns: 0,
        }
    }

    /// Records one call's latency.
    pub fn record(&mut self, latency_ns: u64) {
        // The histogram cannot hold 0; a 0 ns call (a coarse clock) counts in its first bucket.
        // `record` grows the histogram to fit; only a value beyond what it can ever track
        // (far past a year in nanoseconds) fails, and is then counted at the top.
        let value = latency_ns.max(1);
        if self.histogram.record(value).is_err() {
            self.histogram.saturating_record(value);
        }
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(latency_ns);
        self.min_ns = self.min_ns.min(latency_ns);
        self.max_ns = self.max_ns.max(latency_ns);
        if latency_ns <= self.outlier_threshold_ns {
            self.within_count += 1;
            self.within_total_ns = self.within_total_ns.saturating_add(latency_ns);
        }
    }

    /// Adds another recorder's samples. Both must use the same outlier threshold, or the
    /// "without outliers" mean would mix two definitions: then this returns `false` and
    /// changes nothing.
    pub fn merge(&mut self, other: &LatencyRecorder) -> bool {
        if other.outlier_threshold_ns != self.outlier_threshold_ns {
            return false;
        }
        if other.count == 0 {
            return true;
        }
        if self.histogram.add(&other.histogram).is_err() {
            return false;
        }
        self.count += other.count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.within_count += other.within_count;
        self.within_total_ns = self.within_total_ns.saturating_add(other.within_total_ns);
        true
    }

    /// Number of samples recorded so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary, or `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let quantile = |q: f64| self.histogram.value_at_quantile(q).clamp(self.min_ns, self.max_ns);
        Some(LatencySummary {
            count: self.count,
            total_ns: self.total_ns,
            min_ns: self.min_ns,
            mean_ns: self.total_ns as f64 / self.count as f64,
            outlier_threshold_ns: self.outlier_threshold_ns,
            outliers: self.count - self.within_count,
            mean_without_outliers_ns: (self.within_count > 0)
                .then(|| self.within_total_ns as f64 / self.within_count as f64),
            p50_ns: quantile(0.50),
            p90_ns: quantile(0.90),
            p99_ns: quantile(0.99),
            p999_ns: quantile(0.999),
            max_ns: self.max_ns,
        })
    }
}

impl LatencySummary {
    /// Summarises a series of latencies (`None` when it is empty).
    pub fn from_samples(samples_ns: &[u64], outlier_threshold: Duration) -> Option<Self> {
        let mut recorder = LatencyRecorder::new(outlier_threshold);
        samples_ns.iter().for_each(|&ns| recorder.record(ns));
        recorder.summary()
    }
}

/// The exact median of a series (the lower middle value for an even count), `None` if empty.
pub fn median_ns(samples_ns: &[u64]) -> Option<u64> {
    if samples_ns.is_empty() {
        return None;
    }
    let mut sorted = samples_ns.to_vec();
    let middle = (sorted.len() - 1) / 2;
    Some(*sorted.select_nth_unstable(middle).1)
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (585 years).
pub fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_example_outliers_split_the_mean() {
        // 2523 fast calls of 139 µs and 37 slow ones of 19.3 ms, as in §3.3 (2560 calls).
        let mut samples = vec![139_000u64; 2523];
        samples.extend(std::iter::repeat_n(19_300_000, 37));
        let s = LatencySummary::from_samples(&samples, Duration::from_millis(1)).unwrap();
        assert_eq!(s.count, 2560);
        assert_eq!(s.outliers, 37);
        assert_eq!(s.mean_without_outliers_ns, Some(139_000.0));
        let mean = (2523.0 * 139_000.0 + 37.0 * 19_300_000.0) / 2560.0;
        assert!((s.mean_ns - mean).abs() < 1e-6);
        assert_eq!(s.min_ns, 139_000);
        assert_eq!(s.max_ns, 19_300_000);
        // The median is a fast call; the 99th percentile (call 2535 of 2560) is a slow one.
        assert!(s.p50_ns.abs_diff(139_000) <= 139);
        assert!(s.p99_ns.abs_diff(19_300_000) <= 19_300);
    }

    #[test]
    fn percentiles_of_a_uniform_series() {
        let samples: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let s = LatencySummary::from_samples(&samples, Duration::from_secs(1)).unwrap();
        assert!(s.p50_ns.abs_diff(500_000) <= 1000, "p50 {}", s.p50_ns);
        assert!(s.p90_ns.abs_diff(900_000) <= 1000, "p90 {}", s.p90_ns);
        assert!(s.p99_ns.abs_diff(990_000) <= 1000, "p99 {}", s.p99_ns);
        assert_eq!(s.max_ns, 1_000_000);
        assert!(s.p999_ns <= s.max_ns);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn merged_recorders_equal_one_recorder() {
        let threshold = Duration::from_micros(500);
        let (mut a, mut b, mut all) = (
            LatencyRecorder::new(threshold),
            LatencyRecorder::new(threshold),
            LatencyRecorder::new(threshold),
        );
        for i in 0..2000u64 {
            let ns = (i * 7919) % 1_000_000;
            if i % 3 == 0 {
                a.record(ns)
            } else {
                b.record(ns)
            }
            all.record(ns);
        }
        assert!(a.merge(&b));
        assert_eq!(a.summary(), all.summary());
        assert!(!a.merge(&LatencyRecorder::new(Duration::from_millis(1))), "thresholds differ");
    }

    #[test]
    fn empty_series_has_no_summary() {
        assert_eq!(LatencySummary::from_samples(&[], Duration::from_millis(1)), None);
        assert_eq!(median_ns(&[]), None);
        assert_eq!(median_ns(&[5, 1, 9, 3]), Some(3));
    }
}
