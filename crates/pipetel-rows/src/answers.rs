//! The answers' arithmetic, shared by the library (stage rows, the sampler's straggler rule)
//! and the tool (`pipetel top`, `pipetel rows`): the distribution of shard figures, the skew
//! rule, and when a running shard or stage whose process stopped writing counts as lost.

use std::time::Duration;

/// How many times the 75th percentile a skewed stage's slowest shard exceeds.
pub const SKEW_FACTOR: f64 = 1.5;

/// Sample intervals a running shard may miss before readers show it as `lost` (its process
/// died without writing its end row).
pub const LOST_AFTER_INTERVALS: u32 = 3;

/// Whether a shard or stage still `running` in the rows is lost: its last row is older than
/// [`LOST_AFTER_INTERVALS`] sample intervals at `now_ms` (both milliseconds since the epoch).
pub fn is_lost(last_row_ms: i64, now_ms: i64, sample_interval: Duration) -> bool {
    let allowed =
        i64::try_from(sample_interval.as_millis()).unwrap_or(i64::MAX).saturating_mul(LOST_AFTER_INTERVALS.into());
    now_ms.saturating_sub(last_row_ms) > allowed
}

/// A distribution of shard figures: the least, the quartiles, the 90th percentile, the most
/// (linear interpolation between the closest ranks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distribution {
    /// The least value.
    pub p0: f64,
    /// The 25th percentile.
    pub p25: f64,
    /// The median.
    pub p50: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The greatest value.
    pub max: f64,
}

impl Distribution {
    /// The distribution of `values` (NaN ignored); `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Distribution> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Distribution {
            p0: v[0],
            p25: quantile(&v, 0.25),
            p50: quantile(&v, 0.5),
            p75: quantile(&v, 0.75),
            p90: quantile(&v, 0.9),
            max: v[v.len() - 1],
        })
    }

    /// The points in the order of [`crate::fields::QUANTILES`].
    pub fn points(&self) -> [f64; 6] {
        [self.p0, self.p25, self.p50, self.p75, self.p90, self.max]
    }

    /// `max ÷ p75`, when the 75th percentile is above zero.
    pub fn skew(&self) -> Option<f64> {
        (self.p75 > 0.0).then(|| self.max / self.p75)
    }

    /// The skew rule: the greatest value is over 1.5 × the 75th percentile and more than `min`
    /// seconds beyond it.
    pub fn skewed(&self, min: Duration) -> bool {
        beyond_rule(self.max, self.p75, min)
    }
}

/// The skew rule for one value: `x` is over [`SKEW_FACTOR`] × `p75` and more than `min` seconds beyond it.
pub fn beyond_rule(x: f64, p75: f64, min: Duration) -> bool {
    x > SKEW_FACTOR * p75 && x - p75 > min.as_secs_f64()
}

/// Sorted `v` at quantile `q` (linear interpolation between the closest ranks); NaN when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_ranks() {
        let d = Distribution::of(&[4.0, 1.0, 3.0, 2.0, 5.0]).expect("values");
        assert_eq!(d.points(), [1.0, 2.0, 3.0, 4.0, 4.6, 5.0]);
        assert_eq!(Distribution::of(&[7.0]).expect("one").points(), [7.0; 6]);
        assert_eq!(Distribution::of(&[]), None);
        assert_eq!(d.skew(), Some(1.25));
    }

    #[test]
    fn the_skew_rule_needs_both_the_factor_and_the_minimum() {
        let d = Distribution::of(&[10.0, 10.0, 10.0, 10.0, 30.0]).expect("values");
        assert!(d.skewed(Duration::from_secs(10)));
        assert!(!d.skewed(Duration::from_secs(20)), "20 s beyond p75 is not more than 20 s");
        let d = Distribution::of(&[1.0, 1.0, 1.0, 1.0, 1.4]).expect("values");
        assert!(!d.skewed(Duration::ZERO), "1.4 × p75 is under the factor");
    }

    #[test]
    fn lost_after_three_missed_intervals() {
        let i = Duration::from_secs(10);
        assert!(!is_lost(1_000, 31_000, i));
        assert!(is_lost(1_000, 31_001, i));
    }
}
