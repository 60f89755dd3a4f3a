//! Units: parsing sizes and durations from the command line, formatting them for humans, and
//! the one throughput formula every report uses.
//!
//! Throughput is in MB/s with MB = 10^6 bytes, as in Lever & Honeyman and in
//! `scripts/bench-cp.sh`, so numbers from all our tools compare directly.

use std::time::Duration;

/// Bytes per MB (decimal), the unit of every throughput we report.
pub const BYTES_PER_MB: f64 = 1e6;

/// Throughput in MB/s (10^6 bytes per second) for `bytes` moved in `elapsed_ns`.
///
/// `None` when no time elapsed: a clock too coarse to measure the run gives no throughput
/// rather than an infinite one (JSON cannot carry infinity).
pub fn mb_per_s(bytes: u64, elapsed_ns: u64) -> Option<f64> {
    if elapsed_ns == 0 {
        return None;
    }
    Some(bytes as f64 / BYTES_PER_MB / (elapsed_ns as f64 / 1e9))
}

/// Operations per second for `ops` completed in `elapsed_ns` (`None` when no time elapsed).
pub fn ops_per_s(ops: u64, elapsed_ns: u64) -> Option<f64> {
    if elapsed_ns == 0 {
        return None;
    }
    Some(ops as f64 / (elapsed_ns as f64 / 1e9))
}

/// Parses a size: a plain byte count, or a number with a unit.
///
/// Binary units: `K`, `KiB`, `M`, `MiB`, `G`, `GiB` (powers of 1024). Decimal units: `kB`,
/// `MB`, `GB` (10^3, 10^6, 10^9), the paper's "MB". Units are case-insensitive. Fractions are
/// allowed (`0.5GiB`); the result is rounded down to whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a size (e.g. 8KiB, 25MB, 1048576)"))?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        other => {
            return Err(format!("unknown size unit {other:?} in {text:?} (use KiB, MiB, GiB, kB, MB, GB)"))
        }
    };
    let bytes = value * multiplier;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: a number with `ns`, `us` (or `µs`), `ms`, `s`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration (e.g. 1ms, 250us, 30s)"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        other => return Err(format!("unknown duration unit {other:?} in {text:?} (use ns, us, ms, s)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is out of range"))
}

/// A size for humans: exact binary units when the value is a whole number of them, exact
/// decimal MB when it is a whole number of those (the paper's file sizes), else MiB with
/// one decimal.
pub fn format_bytes(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * 1024 * 1024;
    match bytes {
        0 => "0 B".to_string(),
        b if b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b % 1_000_000 == 0 => format!("{} MB", b / 1_000_000),
        b if b % KIB == 0 && b < MIB => format!("{} KiB", b / KIB),
        b if b < KIB => format!("{b} B"),
        b => format!("{:.1} MiB", b as f64 / MIB as f64),
    }
}

/// A latency for humans with three significant digits and the unit that fits.
pub fn format_ns(ns: f64) -> String {
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

/// A rate with one decimal, or `n/a` when there is none.
pub(crate) fn format_rate(rate: Option<f64>) -> String {
    rate.map_or_else(|| "n/a".to_string(), |r| format!("{r:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_and_decimal_units() {
        assert_eq!(parse_size("8KiB"), Ok(8192));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("25MB"), Ok(25_000_000));
        assert_eq!(parse_size("450 MB"), Ok(450_000_000));
        assert_eq!(parse_size("0.5GiB"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("3 fortnights").is_err());
    }

    #[test]
    fn throughput_is_bytes_over_seconds_in_decimal_mb() {
        // 100 MB in 2 s is 50 MB/s.
        assert_eq!(mb_per_s(100_000_000, 2_000_000_000), Some(50.0));
        assert_eq!(mb_per_s(1, 0), None);
        assert_eq!(ops_per_s(500, 250_000_000), Some(2000.0));
    }

    #[test]
    fn formatting_picks_readable_units() {
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(25_000_000), "25 MB");
        assert_eq!(format_bytes(8192), "8 KiB");
        assert_eq!(format_ns(139_600.0), "140 µs");
        assert_eq!(format_ns(19_300_000.0), "19.3 ms");
        assert_eq!(format_ns(812.0), "812 ns");
    }
}
