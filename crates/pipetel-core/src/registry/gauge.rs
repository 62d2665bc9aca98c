//! Gauges: values that go up and down.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::family::Cell;
use super::handle::metric_handle;
use super::values::value_cell;
use crate::sync::{add_f64, load_f64};

/// The value's `f64` bits.
pub(crate) struct GaugeCell(AtomicU64);

impl Cell for GaugeCell {
    value_cell!(Gauge, "gauge", f64_observable_gauge);
    fn new(_: &()) -> Self {
        GaugeCell(AtomicU64::new(0f64.to_bits()))
    }
    fn reset(&self) {
        self.0.store(0f64.to_bits(), Ordering::Relaxed);
    }
}

impl GaugeCell {
    fn value(&self) -> f64 {
        load_f64(&self.0)
    }
}

metric_handle! {
    /// A gauge: one series of a value that goes up and down. Cheap to clone; clones are the same
    /// series.
    ///
    /// From [`Registry::gauge`](super::Registry::gauge), or per label set from a [`GaugeVec`].
    pub struct Gauge(GaugeCell);
    /// Gauges by label values, from [`Registry::gauge_vec`](super::Registry::gauge_vec):
    /// [`GaugeVec::with`](super::MetricVec::with) gives the [`Gauge`] of one label set.
    pub type GaugeVec;
}

impl Gauge {
    /// Sets the value (any `f64`, NaN and infinities included, as Prometheus allows).
    #[inline]
    pub fn set(&self, v: f64) {
        self.0.series.cell.0.store(v.to_bits(), Ordering::Relaxed);
    }

    /// Adds 1.
    #[inline]
    pub fn inc(&self) {
        self.inc_by(1.0);
    }

    /// Subtracts 1.
    #[inline]
    pub fn dec(&self) {
        self.inc_by(-1.0);
    }

    /// Adds `n` (negative to subtract). A non-finite `n` is refused (logged once).
    #[inline]
    pub fn inc_by(&self, n: f64) {
        if !n.is_finite() {
            self.0.family.meta.warn_once(&format!("a gauge cannot be moved by {n}"));
            return;
        }
        add_f64(&self.0.series.cell.0, n);
    }

    /// Subtracts `n`. A non-finite `n` is refused (logged once).
    #[inline]
    pub fn dec_by(&self, n: f64) {
        self.inc_by(-n);
    }

    /// Sets the value to the current Unix time in seconds.
    pub fn set_to_current_time(&self) {
        self.set(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0));
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
