//! The periodic-spike detector on synthetic series with known answers.

use eagernfs_bench::spikes::{detect_spikes, SpikeConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Fast calls around 140 µs (± 20 µs), like the paper's Fig. 2.
fn base_series(rng: &mut StdRng, calls: usize) -> Vec<u64> {
    (0..calls).map(|_| rng.gen_range(120_000..160_000)).collect()
}

const SPIKE_NS: u64 = 19_000_000;

#[test]
fn a_spike_every_85_calls_is_periodic_with_period_85() {
    let mut rng = StdRng::seed_from_u64(85);
    let mut series = base_series(&mut rng, 6400);
    for i in (84..series.len()).step_by(85) {
        series[i] = SPIKE_NS + rng.gen_range(0..1_000_000);
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert!(report.periodic, "{report:?}");
    assert_eq!(report.period_calls, Some(85));
    assert_eq!(report.spikes, 75);
    assert!((report.spike_fraction - 75.0 / 6400.0).abs() < 1e-12);
    assert_eq!(report.first_spike_calls[..3], [84, 169, 254]);
    assert!(report.period_score.unwrap() > 0.95);
}

#[test]
fn spikes_every_80_to_90_calls_are_periodic_near_85() {
    // "every 80 to 90 system calls, the client flushes the inode's write request queue"
    let mut rng = StdRng::seed_from_u64(8090);
    let mut series = base_series(&mut rng, 20_000);
    let mut next = rng.gen_range(80..=90);
    while next < series.len() {
        series[next] = SPIKE_NS;
        next += rng.gen_range(80..=90);
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert!(report.periodic, "{report:?}");
    let period = report.period_calls.unwrap();
    assert!((83..=87).contains(&period), "period {period}");
}

#[test]
fn a_period_survives_unrelated_random_spikes_in_between() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut series = base_series(&mut rng, 20_000);
    for i in (50..series.len()).step_by(85) {
        series[i] = SPIKE_NS;
    }
    // About one random spike per 200 calls: many gaps between consecutive spikes are no
    // longer 85, but every periodic spike still has its successor 85 calls later.
    for value in series.iter_mut() {
        if rng.gen_bool(0.005) {
            *value = SPIKE_NS / 2;
        }
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert!(report.periodic, "{report:?}");
    assert_eq!(report.period_calls, Some(85));
}

#[test]
fn random_spikes_are_not_periodic_at_any_density() {
    for (seed, probability) in [(1u64, 1.0 / 85.0), (2, 0.01), (3, 0.05), (4, 0.2), (5, 0.4), (6, 1.0 / 85.0)]
    {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut series = base_series(&mut rng, 20_000);
        for value in series.iter_mut() {
            if rng.gen_bool(probability) {
                *value = SPIKE_NS;
            }
        }
        let report = detect_spikes(&series, &SpikeConfig::default());
        assert!(report.spikes > 100, "seed {seed}: the series must have spikes to test");
        assert!(!report.periodic, "seed {seed}, p = {probability}: {report:?}");
        assert!((report.spike_fraction - probability).abs() < 0.02, "{report:?}");
    }
}

#[test]
fn a_dense_period_of_three_is_still_recognised() {
    // Every third call slow: a third of the calls spike, so chance alone puts a spike 3 calls
    // after a third of them; the score above chance must still see the rhythm.
    let mut rng = StdRng::seed_from_u64(3);
    let mut series = base_series(&mut rng, 3000);
    for i in (2..series.len()).step_by(3) {
        series[i] = SPIKE_NS;
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert_eq!(report.spikes, 1000);
    assert!(report.periodic, "{report:?}");
    assert_eq!(report.period_calls, Some(3));
}

#[test]
fn a_smooth_series_has_no_spikes_and_no_period() {
    let mut rng = StdRng::seed_from_u64(0);
    let series = base_series(&mut rng, 5000);
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert_eq!(report.spikes, 0);
    assert!(!report.periodic);
    assert_eq!(report.period_calls, None);
    assert!(report.median_ns >= 120_000 && report.median_ns < 160_000);
    assert_eq!(report.threshold_ns, report.median_ns * 10);
}

#[test]
fn three_spikes_are_too_few_for_a_period() {
    let mut series = vec![100_000u64; 1000];
    for i in [100, 200, 300] {
        series[i] = SPIKE_NS;
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert_eq!(report.spikes, 3);
    assert!(!report.periodic);
    // Nine beats in a row are a rhythm.
    for i in [400, 500, 600, 700, 800, 900] {
        series[i] = SPIKE_NS;
    }
    let report = detect_spikes(&series, &SpikeConfig::default());
    assert!(report.periodic, "{report:?}");
    assert_eq!(report.period_calls, Some(100));
}

#[test]
fn an_empty_series_is_handled() {
    let report = detect_spikes(&[], &SpikeConfig::default());
    assert_eq!(report.spikes, 0);
    assert_eq!(report.spike_fraction, 0.0);
    assert!(!report.periodic);
}
