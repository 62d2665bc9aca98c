//! Histograms kept in atomics and rendered by the pull endpoint itself: what measured functions
//! (`function.*`) and span metrics (`span.duration`) record into when `init` installed no push
//! exporter, in place of OTel histograms that only the endpoint would read. Durations are
//! recorded as differences of [`crate::sync::clock`] readings and converted to seconds when rendered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::exemplar::Exemplars;
use super::Writer;
use crate::sync::{ticks_per_second, ticks_to_seconds};

/// A histogram kept in its owner's atomics: with the pull endpoint alone, what a measured
/// function or a span-metrics callsite records into and what the endpoint renders (no OTel
/// instrument exists for it then). Its exposition is the one the pull endpoint's encoder
/// writes for the OTel histogram of the same name, bounds and attributes.
#[derive(Debug)]
pub(crate) struct Direct {
    bounds: &'static [f64],
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: Box<[AtomicU64]>,
    /// The sum: `f64` bits for durations, an integer for sizes (as the OTel histograms'
    /// value types are).
    sum: AtomicU64,
    float: bool,
    /// For durations: the bounds in raw readings of [`crate::sync::clock`], so a call's duration
    /// is bucketed and summed as the difference of its two readings, converted to seconds
    /// only when rendered (a bound is off by at most one reading, under a nanosecond).
    tick_bounds: Box<[u64]>,
    /// The calls' durations, in raw readings (added to `sum` when rendered).
    ticks: AtomicU64,
    exemplars: Exemplars,
}

impl Direct {
    pub(crate) fn new(bounds: &'static [f64], float: bool) -> Self {
        let rate = ticks_per_second();
        Direct {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(if float { 0f64.to_bits() } else { 0 }),
            float,
            // `as` saturates: a bound past the counter's range takes every reading.
            tick_bounds: if float { bounds.iter().map(|b| (b * rate) as u64).collect() } else { Box::new([]) },
            ticks: AtomicU64::new(0),
            exemplars: Exemplars::new(Arc::from(bounds)),
        }
    }

    /// Counts a call that lasted `ticks` raw clock readings; returns its bucket.
    #[inline]
    pub(crate) fn record_ticks(&self, ticks: u64) -> usize {
        let bounds = &self.tick_bounds;
        let i = if bounds.len() <= 16 {
            bounds.iter().position(|b| ticks <= *b).unwrap_or(bounds.len())
        } else {
            bounds.partition_point(|b| *b < ticks)
        };
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.ticks.fetch_add(ticks, Ordering::Relaxed);
        i
    }

    /// The bucket bounds.
    pub(crate) fn bounds(&self) -> &'static [f64] {
        self.bounds
    }

    /// The latest exemplar of each bucket.
    pub(crate) fn exemplars(&self) -> &Exemplars {
        &self.exemplars
    }

    /// Observations per bucket (not cumulative), `+Inf` last.
    pub(crate) fn counts(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect()
    }

    /// The sum of a duration (float) histogram, in seconds: the values recorded as seconds
    /// plus the durations recorded as clock readings.
    pub(crate) fn sum(&self) -> f64 {
        let ticks = self.ticks.load(Ordering::Relaxed);
        let sum = crate::sync::load_f64(&self.sum);
        if ticks > 0 {
            sum + ticks_to_seconds(ticks)
        } else {
            sum
        }
    }

    /// Counts `v` (seconds) in its bucket and adds it to the sum; returns the bucket.
    #[inline]
    pub(crate) fn record_f64(&self, v: f64) -> usize {
        let i = crate::exposition::bucket_index(self.bounds, v);
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        crate::sync::add_f64(&self.sum, v);
        i
    }

    /// Counts a size in its bucket and adds it to the sum; returns the bucket.
    #[inline]
    pub(crate) fn record_u64(&self, v: u64) -> usize {
        let i = crate::exposition::bucket_index(self.bounds, v as f64);
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(v, Ordering::Relaxed);
        i
    }

    /// Writes this series (`labels`: its label block) as the OTel histogram's data point would be
    /// written; like a bound OTel histogram, a series with no observation yet shows zeros.
    pub(crate) fn write(&self, w: &mut Writer<'_>, name: &str, labels: &str, bounds: &[String]) {
        let counts = self.counts();
        let count = counts.iter().fold(0u64, |a, c| a.saturating_add(*c));
        let cumulative = counts.iter().scan(0u64, |c, n| {
            *c = c.saturating_add(*n);
            Some(*c)
        });
        let exemplar = |i| self.exemplars.get(i);
        if self.float {
            w.histogram_with(name, labels, bounds, cumulative, count, self.sum(), exemplar);
        } else {
            let sum = self.sum.load(Ordering::Relaxed);
            w.histogram_with(name, labels, bounds, cumulative, count, sum, exemplar);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A duration in raw clock readings lands in the bucket its seconds belong to (but within
    /// a reading of a bound), and the sum is the durations' sum in seconds.
    #[test]
    fn durations_in_clock_readings_bucket_and_sum_as_seconds() {
        let h = Direct::new(crate::buckets::SECONDS_BUCKETS, true);
        let rate = ticks_per_second();
        let mut expected_sum = 0.0;
        let mut expected = vec![0u64; crate::buckets::SECONDS_BUCKETS.len() + 1];
        for seconds in [1e-7, 0.004, 0.006, 0.3, 2.0, 9.0, 1e4, 0.0] {
            let ticks = (seconds * rate) as u64;
            let i = h.record_ticks(ticks);
            assert_eq!(
                i,
                crate::exposition::bucket_index(crate::buckets::SECONDS_BUCKETS, ticks_to_seconds(ticks)),
                "{seconds}"
            );
            expected[i] += 1;
            expected_sum += ticks_to_seconds(ticks);
        }
        assert_eq!(h.counts(), expected);
        assert!((h.sum() - expected_sum).abs() < 1e-6, "{} vs {expected_sum}", h.sum());
        assert!((h.sum() - 10_011.3100001).abs() < 1e-3, "{}", h.sum());
        h.record_f64(0.5);
        assert!((h.sum() - (expected_sum + 0.5)).abs() < 1e-6, "{}", h.sum());
    }
}
