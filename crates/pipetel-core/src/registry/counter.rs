//! Counters: values that only go up.

use std::sync::atomic::{AtomicU64, Ordering};

use super::family::Cell;
use super::handle::metric_handle;
use super::meta::Meta;
use super::values::value_cell;
use crate::sync::{add_f64, load_f64};

/// Whole increments go to an integer cell (one `fetch_add`); fractional ones to an `f64` cell.
pub(crate) struct CounterCell {
    whole: AtomicU64,
    frac: AtomicU64,
}

/// Below 2^53 every integer is exact as an `f64`.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl CounterCell {
    #[inline]
    fn add(&self, meta: &Meta, n: f64) {
        if !n.is_finite() || n < 0.0 {
            meta.warn_once(&format!("a counter cannot be increased by {n}"));
            return;
        }
        if n.fract() == 0.0 && n < EXACT_INT {
            self.whole.fetch_add(n as u64, Ordering::Relaxed);
        } else {
            add_f64(&self.frac, n);
        }
    }

    fn value(&self) -> f64 {
        self.whole.load(Ordering::Relaxed) as f64 + load_f64(&self.frac)
    }
}

impl Cell for CounterCell {
    value_cell!(Counter, "counter", f64_observable_counter);
    fn new(_: &()) -> Self {
        CounterCell { whole: AtomicU64::new(0), frac: AtomicU64::new(0f64.to_bits()) }
    }
    fn reset(&self) {
        self.whole.store(0, Ordering::Relaxed);
        self.frac.store(0f64.to_bits(), Ordering::Relaxed);
    }
}

metric_handle! {
    /// A counter: one series of a value that only goes up. Cheap to clone; clones are the same
    /// series. `inc` is a single relaxed atomic add.
    ///
    /// From [`Registry::counter`](super::Registry::counter), or per label set from a
    /// [`CounterVec`].
    pub struct Counter(CounterCell);
    /// Counters by label values, from [`Registry::counter_vec`](super::Registry::counter_vec):
    /// [`CounterVec::with`](super::MetricVec::with) gives the [`Counter`] of one label set.
    pub type CounterVec;
}

impl Counter {
    /// Adds 1: one relaxed atomic add.
    #[inline]
    pub fn inc(&self) {
        self.0.series.cell.whole.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`. A negative or non-finite `n` is refused (logged once; the value is unchanged).
    #[inline]
    pub fn inc_by(&self, n: f64) {
        self.0.series.cell.add(&self.0.family.meta, n);
    }

    /// The current value.
    pub fn value(&self) -> f64 {
        self.0.series.cell.value()
    }

    /// Resets this series to 0.
    pub fn reset(&self) {
        self.0.series.cell.reset();
    }
}
