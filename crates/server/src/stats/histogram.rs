//! A latency histogram every service thread records into without a lock.
//!
//! Two sets of atomic buckets: fine ones (a quarter of an octave each, from
//! 1 ns to hours) for percentiles within 19 %, and the fixed bounds a
//! Prometheus histogram exposes ([`PROM_BOUNDS_S`]), counted exactly.

use std::sync::atomic::{AtomicU64, Ordering};

/// Fine buckets: values 0..4 ns one each, then four per power of two.
const FINE_BUCKETS: usize = 252;

/// Upper bounds (seconds) of the buckets `/metrics` exposes (`le`), before
/// `+Inf`: from 25 µs (a cached GETATTR) to 10 s (a stuck disk).
pub const PROM_BOUNDS_S: [f64; 16] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 10.0,
];

fn fine_index(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize;
    let sub = ((ns >> (msb - 2)) & 3) as usize;
    4 * (msb - 1) + sub
}

/// The largest value that falls in fine bucket `i`.
fn fine_upper_ns(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let msb = i / 4 + 1;
    let sub = (i % 4) as u64;
    let lower = (4 + sub) << (msb - 2);
    lower.saturating_add((1u64 << (msb - 2)) - 1)
}

/// Latencies of one kind of call.
pub(crate) struct Histogram {
    fine: Box<[AtomicU64]>,
    prom: [AtomicU64; PROM_BOUNDS_S.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            fine: (0..FINE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            prom: Default::default(),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram").field("count", &self.count.load(Ordering::Relaxed)).finish()
    }
}

/// A histogram's state at one moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HistogramSnapshot {
    pub count: u64,
    pub sum_ns: u64,
    /// Non-cumulative counts per [`PROM_BOUNDS_S`] bucket, then `+Inf`.
    pub buckets: Vec<u64>,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl Histogram {
    pub(crate) fn record(&self, ns: u64) {
        self.fine[fine_index(ns).min(FINE_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        let s = ns as f64 / 1e9;
        let p = PROM_BOUNDS_S.iter().position(|b| s <= *b).unwrap_or(PROM_BOUNDS_S.len());
        self.prom[p].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        let fine: Vec<u64> = self.fine.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = fine.iter().sum();
        let quantile = |q: f64| {
            if total == 0 {
                return 0;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in fine.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return fine_upper_ns(i);
                }
            }
            fine_upper_ns(FINE_BUCKETS - 1)
        };
        let max_ns = fine.iter().rposition(|n| *n > 0).map_or(0, fine_upper_ns);
        HistogramSnapshot {
            count: self.count.load(Ordering::Relaxed),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            buckets: self.prom.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
            p50_ns: quantile(0.5),
            p90_ns: quantile(0.9),
            p99_ns: quantile(0.99),
            p999_ns: quantile(0.999),
            max_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fine_buckets_cover_every_value_and_are_ordered() {
        let mut last = 0;
        for v in [0u64, 1, 3, 4, 5, 7, 8, 1000, 1023, 1024, 1_000_000, u64::MAX / 2, u64::MAX] {
            let i = fine_index(v);
            assert!(i < FINE_BUCKETS, "{v}");
            assert!(fine_upper_ns(i) >= v, "{v} above its bucket's bound {}", fine_upper_ns(i));
            assert!(i >= last);
            last = i;
        }
        // Quarter-octave resolution: the bound is within 25 % of the value.
        for v in [5u64, 100, 12_345, 9_999_999] {
            assert!(fine_upper_ns(fine_index(v)) as f64 <= v as f64 * 1.25 + 1.0);
        }
    }

    #[test]
    fn percentiles_and_prometheus_buckets() {
        let h = Histogram::default();
        for _ in 0..990 {
            h.record(100_000); // 100 µs
        }
        for _ in 0..10 {
            h.record(20_000_000); // 20 ms
        }
        let s = h.snapshot();
        assert_eq!(s.count, 1000);
        assert!((100_000..125_000).contains(&s.p50_ns), "{}", s.p50_ns);
        assert!((100_000..125_000).contains(&s.p99_ns), "the 990th of 1000 is still 100 µs: {}", s.p99_ns);
        assert!((20_000_000..25_000_000).contains(&s.p999_ns), "{}", s.p999_ns);
        // 100 µs lands in the le=0.0001 bucket, 20 ms in le=0.025.
        assert_eq!(s.buckets[2], 990);
        assert_eq!(s.buckets[9], 10);
        assert_eq!(s.buckets.iter().sum::<u64>(), 1000);
    }
}
