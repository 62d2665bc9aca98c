//! Counters: values that only go up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry::metrics::Meter;

use super::error::RegistryError;
use super::family::{Cell, Family};
use super::handle::{metric_handle, Handle, MetricVec};
use super::kind::Kind;
use super::meta::Meta;
use super::opts::Opts;
use super::values::{bind_values, observing, write_values, write_values_pull};
use crate::exposition::{MetricType, Page};
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
    const KIND: Kind = Kind::Counter;
    type Spec = ();
    fn spec(_: &str, _: &Opts, _: &Arc<[f64]>) -> Result<(), RegistryError> {
        Ok(())
    }
    type Shared = ();
    fn new(_: &()) -> Self {
        CounterCell { whole: AtomicU64::new(0), frac: AtomicU64::new(0f64.to_bits()) }
    }
    fn reset(&self) {
        self.whole.store(0, Ordering::Relaxed);
        self.frac.store(0f64.to_bits(), Ordering::Relaxed);
    }
    fn write(f: &Family<Self>, out: &mut String) {
        write_values(f, &f.meta.exposed_name(), "counter", CounterCell::value, out);
    }
    fn write_pull(f: &Family<Self>, page: &mut Page<'_>) {
        write_values_pull(f, MetricType::Counter, CounterCell::value, page);
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, push_only: Option<&Meter>) {
        bind_values(family, meter, push_only, |family, meter| {
            let builder = meter.f64_observable_counter(family.meta.otel_name.clone());
            let _ = observing(family, builder, CounterCell::value).build();
        });
    }
}

/// A counter: one series of a value that only goes up. Cheap to clone; clones are the same
/// series. `inc` is a single relaxed atomic add.
///
/// From [`Registry::counter`](super::Registry::counter), or per label set from a
/// [`CounterVec`].
#[derive(Clone)]
pub struct Counter(pub(crate) Handle<CounterCell>);

/// Counters by label values, from [`Registry::counter_vec`](super::Registry::counter_vec):
/// [`CounterVec::with`](MetricVec::with) gives the [`Counter`] of one label set.
pub type CounterVec = MetricVec<Counter>;

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

metric_handle!(Counter);
