//! Latency percentiles by nearest rank.

use serde::{Deserialize, Serialize};

/// Latency summary in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// How many samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Percentiles {
    /// Summarises samples given in nanoseconds; `None` when there are none.
    pub fn from_nanos(mut samples: Vec<u64>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| -> f64 {
            // Nearest rank: the smallest sample with at least p of the samples at or below it.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let idx = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            samples[idx] as f64 / 1_000.0
        };
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Some(Self {
            n,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            p999: rank(0.999),
            max: rank(1.0),
            mean: sum as f64 / n as f64 / 1_000.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_a_hundred() {
        let p =
            Percentiles::from_nanos((1..=100).rev().map(|i| i * 1_000).collect()).expect("samples");
        assert_eq!(
            (p.n, p.p50, p.p90, p.p99, p.max),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(p.p999, 100.0);
        assert!((p.mean - 50.5).abs() < 1e-9);
        assert!(Percentiles::from_nanos(Vec::new()).is_none());
        let one = Percentiles::from_nanos(vec![7_000]).expect("one");
        assert_eq!((one.p50, one.max), (7.0, 7.0));
    }
}
