//! Periodic latency-spike detection (Lever & Honeyman §3.3, Fig. 2).
//!
//! The paper's first finding was that `write()` latency is spiky *and periodic*: one call in
//! about 85 took over 19 ms because the client flushed an inode's request queue whenever it
//! passed a fixed length. A period in calls points at a count-based limit in the code under
//! test; random spikes point at something else (the scheduler, a disk, another process). So
//! the report says how many calls spiked and whether their spacing has a period.
//!
//! # Method
//! A spike is a call slower than `factor` × the median call. For a candidate period `P`
//! (taken from the most common gaps between consecutive spikes) we ask, for every spike that
//! has at least `P + tolerance` calls after it, whether another spike follows `P ± tolerance`
//! calls later; the fraction of yes answers is the candidate's *support*. Random spikes also
//! produce support, by chance: with a fraction `p` of calls spiking and a window of `w` calls
//! it is `1 - (1 - p)^w`. The *score* is support above chance, rescaled so that 0 is chance and
//! 1 is every spike followed by its successor: `(support - chance) / (1 - chance)`. A
//! candidate is periodic when its score reaches `min_score` (0.5 by default) *and* so many
//! successors would be unlikely by chance: the binomial tail probability of at least that many
//! hits must be at most `max_p_value` (10^-4). The score alone is not enough when there are few
//! spikes: among six random spikes, three gaps of similar length are common. Comparing with
//! chance is what keeps dense random spikes (where *some* spike is always near) from looking
//! periodic; asking about successors rather than consecutive gaps is what keeps a periodic
//! pattern periodic when unrelated random spikes fall between its beats.

use crate::stats::median_ns;
use serde::{Deserialize, Serialize};

/// How spikes are defined and how sure the detector must be before calling them periodic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpikeConfig {
    /// A call is a spike when slower than this many times the median call.
    pub factor: f64,
    /// Fewer spikes than this never make a period (three beats are not a rhythm), and a
    /// period needs this many spikes, less one, followed by a successor at that distance.
    pub min_spikes: usize,
    /// A successor may be this fraction of the period early or late (the paper saw spikes
    /// "every 80 to 90 system calls"); rounded down, so short periods must match exactly.
    pub tolerance_fraction: f64,
    /// Score above chance, from 0 to 1, needed to call the spikes periodic.
    pub min_score: f64,
    /// Largest probability that random spikes would show as many successors, for a period.
    pub max_p_value: f64,
}

impl Default for SpikeConfig {
    fn default() -> Self {
        Self { factor: 10.0, min_spikes: 4, tolerance_fraction: 0.1, min_score: 0.5, max_p_value: 1e-4 }
    }
}

/// What the detector found in one series of latencies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpikeReport {
    /// Median latency of the series.
    pub median_ns: u64,
    /// Calls slower than this were spikes (`factor` × median).
    pub threshold_ns: u64,
    /// Number of spikes.
    pub spikes: u64,
    /// Spikes as a fraction of all calls (0 to 1).
    pub spike_fraction: f64,
    /// Whether the spikes recur with a period (see the module docs for the test).
    pub periodic: bool,
    /// The best candidate period in calls (the median observed spacing), when there was one.
    pub period_calls: Option<u64>,
    /// The best candidate's score above chance (0 = chance, 1 = every spike has a successor).
    pub period_score: Option<f64>,
    /// Probability that random spikes would give the best candidate as many successors.
    pub period_p_value: Option<f64>,
    /// The call indices of the first spikes (at most 16), to find them in a plot.
    pub first_spike_calls: Vec<u64>,
}

/// How many of the most common gaps between spikes are tried as periods: the work stays
/// bounded however many spikes a run has.
const MAX_CANDIDATES: usize = 32;

/// Finds spikes in `samples_ns` (one latency per call, in call order) and tests their
/// spacing for a period.
pub fn detect_spikes(samples_ns: &[u64], config: &SpikeConfig) -> SpikeReport {
    let median = median_ns(samples_ns).unwrap_or(0);
    // A zero median (a clock coarser than the calls) would make every nonzero call a spike.
    let threshold_ns = (median.max(1) as f64 * config.factor).ceil() as u64;
    let spikes: Vec<u64> =
        samples_ns.iter().enumerate().filter(|&(_, &ns)| ns > threshold_ns).map(|(i, _)| i as u64).collect();
    let calls = samples_ns.len() as u64;
    let spike_fraction = if calls == 0 { 0.0 } else { spikes.len() as f64 / calls as f64 };
    let best = if spikes.len() >= config.min_spikes.max(2) {
        best_period(&spikes, calls, spike_fraction, config)
    } else {
        None
    };
    SpikeReport {
        median_ns: median,
        threshold_ns,
        spikes: spikes.len() as u64,
        spike_fraction,
        periodic: best.is_some_and(|b| b.is_periodic(config)),
        period_calls: best.map(|b| b.period_calls),
        period_score: best.map(|b| b.score),
        period_p_value: best.map(|b| b.p_value),
        first_spike_calls: spikes.iter().take(16).copied().collect(),
    }
}

#[derive(Debug, Clone, Copy)]
struct Candidate {
    period_calls: u64,
    score: f64,
    p_value: f64,
}

impl Candidate {
    fn is_periodic(&self, config: &SpikeConfig) -> bool {
        self.score >= config.min_score && self.p_value <= config.max_p_value && self.period_calls >= 2
    }
}

fn best_period(spikes: &[u64], calls: u64, spike_fraction: f64, config: &SpikeConfig) -> Option<Candidate> {
    // The most common gaps between consecutive spikes are the candidate periods.
    let mut gaps: Vec<u64> = spikes.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let mut counted: Vec<(u64, usize)> = Vec::new();
    for gap in gaps {
        match counted.last_mut() {
            Some((g, n)) if *g == gap => *n += 1,
            _ => counted.push((gap, 1)),
        }
    }
    // Most frequent first; among equals, the shorter gap (a multiple of the period is not it).
    counted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    counted.truncate(MAX_CANDIDATES);

    let mut best: Option<Candidate> = None;
    for &(gap, _) in &counted {
        let Some(candidate) = score_period(spikes, calls, gap, spike_fraction, config) else { continue };
        let better = match best {
            None => true,
            // A candidate that passes beats one that does not (a long "period" confirmed by
            // three lucky gaps must not hide the real one); then a clearly higher score wins;
            // a near tie goes to the shorter period (a multiple of the period also scores).
            Some(b) => match (candidate.is_periodic(config), b.is_periodic(config)) {
                (true, false) => true,
                (false, true) => false,
                _ => {
                    candidate.score > b.score + 1e-9
                        || ((candidate.score - b.score).abs() <= 1e-9
                            && candidate.period_calls < b.period_calls)
                }
            },
        };
        if better {
            best = Some(candidate);
        }
    }
    best
}

fn score_period(
    spikes: &[u64],
    calls: u64,
    period: u64,
    spike_fraction: f64,
    config: &SpikeConfig,
) -> Option<Candidate> {
    let tolerance = (period as f64 * config.tolerance_fraction).floor() as u64;
    let low = period.saturating_sub(tolerance).max(1);
    let high = period + tolerance;
    let mut eligible = 0usize;
    let mut distances = Vec::new();
    for &spike in spikes {
        // A spike too close to the end cannot show whether a successor would have come.
        if spike + high >= calls {
            break;
        }
        eligible += 1;
        let first = spikes.partition_point(|&s| s < spike + low);
        if let Some(&next) = spikes.get(first).filter(|&&s| s <= spike + high) {
            distances.push(next - spike);
        }
    }
    if eligible + 1 < config.min_spikes.max(2) {
        return None;
    }
    // Fewer confirmations than that are too few to tell a rhythm from coincidence, however
    // unlikely chance makes them look: among five random spikes two gaps often match.
    if distances.len() + 1 < config.min_spikes.max(2) {
        return Some(Candidate { period_calls: period, score: 0.0, p_value: 1.0 });
    }
    let support = distances.len() as f64 / eligible as f64;
    let window = (high - low + 1) as i32;
    let chance = 1.0 - (1.0 - spike_fraction).powi(window);
    let score = if chance >= 1.0 { 0.0 } else { ((support - chance) / (1.0 - chance)).max(0.0) };
    let p_value = binomial_tail(eligible as u64, distances.len() as u64, chance);
    distances.sort_unstable();
    Some(Candidate { period_calls: distances[(distances.len() - 1) / 2], score, p_value })
}

/// P(X >= k) for X ~ Binomial(n, q), summed in log space so thousands of trials neither
/// overflow nor underflow.
fn binomial_tail(n: u64, k: u64, q: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    if q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return 1.0;
    }
    // ln C(n, k) + k ln q + (n - k) ln(1 - q), then each next term by the ratio
    // (n - i) / (i + 1) * q / (1 - q).
    let ln_choose: f64 = (0..k).map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln()).sum();
    let mut ln_term = ln_choose + k as f64 * q.ln() + (n - k) as f64 * (1.0 - q).ln();
    let ln_ratio_q = q.ln() - (1.0 - q).ln();
    let mut total = 0.0f64;
    for i in k..=n {
        let term = ln_term.exp();
        total += term;
        // Past the mode the terms only shrink; once they stop mattering, stop.
        if term < total * 1e-17 && (i as f64) > n as f64 * q {
            break;
        }
        if i < n {
            ln_term += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + ln_ratio_q;
        }
    }
    total.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::binomial_tail;

    #[test]
    fn binomial_tail_matches_small_cases_by_hand() {
        // Two fair coins: P(X >= 1) = 3/4, P(X >= 2) = 1/4.
        assert!((binomial_tail(2, 1, 0.5) - 0.75).abs() < 1e-12);
        assert!((binomial_tail(2, 2, 0.5) - 0.25).abs() < 1e-12);
        // Ten trials at 0.1, all hits: 1e-10.
        assert!((binomial_tail(10, 10, 0.1) / 1e-10 - 1.0).abs() < 1e-9);
        assert_eq!(binomial_tail(5, 0, 0.3), 1.0);
        assert_eq!(binomial_tail(5, 6, 0.3), 0.0);
        // Large n stays finite and in range.
        let p = binomial_tail(30_000, 10_000, 0.3);
        assert!(p > 0.0 && p < 1e-10, "{p}");
    }
}
