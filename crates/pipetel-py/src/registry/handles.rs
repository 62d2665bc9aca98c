//! The metric handles of `pipetel.registry` (one series each): `CounterSeries`, `GaugeSeries`,
//! `HistogramSeries`, `SummarySeries` (`pipetel.telefuser` names them `Counter`, `Gauge`, ...).
//!
//! A handle holds one pre-resolved series of the Rust registry: `counter.inc()` is one relaxed
//! atomic add behind a frozen class (no borrow flag, no label lookup).

use std::sync::Arc;

use pipetel::registry::{self as reg, RegistryError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::exceptions::{invalid_value, unsupported};
use super::labels::PyMetricLabel;
use crate::args::arg;
use crate::errors::guard;

/// Refuses NaN (and, unless `infinite_ok`, infinities) with `InvalidValueError` naming `what`.
#[inline]
fn check_number(value: f64, what: &str, metric: &Meta, infinite_ok: bool) -> PyResult<()> {
    if value.is_nan() || (!infinite_ok && value.is_infinite()) {
        return Err(invalid_value(format!("{what} of metric {} must be a finite number, got {value}", metric.name)));
    }
    Ok(())
}

/// What every metric handle keeps beside its series: exposed name, help, labels.
struct Meta {
    name: String,
    help: String,
    labels: Vec<(String, String)>,
}

impl Meta {
    fn new(name: String, help: &str, labels: Vec<(String, String)>) -> Arc<Meta> {
        Arc::new(Meta { name, help: help.to_owned(), labels })
    }

    fn labels_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let labels: Vec<PyMetricLabel> =
            self.labels.iter().map(|(n, v)| PyMetricLabel { name: n.clone(), value: v.clone() }).collect();
        PyTuple::new(py, labels)
    }
}

/// Registers (or finds) a metric without labels: registry, name, help, options.
type One<M> = fn(&reg::Registry, &str, &str, reg::Opts) -> Result<M, RegistryError>;
/// Registers (or finds) a labelled metric: registry, name, help, label names, options.
type Family<M> = fn(&reg::Registry, &str, &str, &[&str], reg::Opts) -> Result<reg::MetricVec<M>, RegistryError>;

/// A handle class as the registry makes it: how its kind registers (the unlabelled metric, or
/// a family with label names) and the handle of one registered series.
pub(crate) trait SeriesHandle: Sized {
    /// The Rust metric the handle holds.
    type Series: reg::Metric;
    /// Registers the metric without labels.
    const ONE: One<Self::Series>;
    /// Registers the family with label names.
    const FAMILY: Family<Self::Series>;

    /// The handle of a series, with its help text and labels (sorted by name).
    fn of(series: Self::Series, help: &str, labels: Vec<(String, String)>) -> Self;
}

/// How each handle class registers.
macro_rules! series_handles {
    ($($ty:ident($rust:ty): $one:expr, $family:expr;)*) => {$(
        impl SeriesHandle for $ty {
            type Series = $rust;
            const ONE: One<$rust> = $one;
            const FAMILY: Family<$rust> = $family;

            fn of(series: $rust, help: &str, labels: Vec<(String, String)>) -> Self {
                $ty::new(series, help, labels)
            }
        }
    )*};
}

series_handles! {
    PyCounter(reg::Counter):
        |r, name, help, _| r.counter(name, help),
        |r, name, help, labels, _| r.counter_vec(name, help, labels);
    PyGauge(reg::Gauge):
        |r, name, help, _| r.gauge(name, help),
        |r, name, help, labels, _| r.gauge_vec(name, help, labels);
    PyHistogram(reg::Histogram): reg::Registry::histogram_with, reg::Registry::histogram_vec;
    PySummary(reg::Summary): reg::Registry::summary_with, reg::Registry::summary_vec;
}

/// A handle class: the struct, its constructors, and one `#[pymethods]` block holding the
/// methods given, a getter per read listed (`reads { count: u64; }` returns the series'
/// `count()`, documented as given), and what every handle has (`name`, `description`, `labels`,
/// `repr`, and `reset`, documented as given). A `one number` handle (a counter, a gauge) also
/// has the `value` getter, and its `reset` sets 0.
macro_rules! handle {
    ($(#[$doc:meta])* $ty:ident, $rust:ty, $py_name:literal, one number, { $($methods:tt)* }) => {
        handle!($(#[$doc])* $ty, $rust, $py_name, reset: /// Resets this series to 0.
        reads {
            /// The current value.
            value: f64;
        }
        { $($methods)* });
    };
    (
        $(#[$doc:meta])* $ty:ident, $rust:ty, $py_name:literal, reset: $(#[$reset_doc:meta])+
        $(reads { $($(#[$read_doc:meta])* $read:ident: $read_ty:ty;)* })?
        { $($methods:tt)* }
    ) => {
        $(#[$doc])*
        #[pyclass(module = "pipetel.registry", name = $py_name, frozen)]
        pub struct $ty {
            inner: $rust,
            meta: Arc<Meta>,
        }

        impl $ty {
            /// The handle of a series, with its help text and labels (sorted by name).
            pub(crate) fn new(inner: $rust, help: &str, labels: Vec<(String, String)>) -> Self {
                $ty { meta: Meta::new(inner.name(), help, labels), inner }
            }
        }

        #[pymethods]
        impl $ty {
            $($methods)*

            $($(
                $(#[$read_doc])*
                #[getter]
                fn $read(&self) -> $read_ty {
                    self.inner.$read()
                }
            )*)?

            $(#[$reset_doc])+
            fn reset(&self) {
                self.inner.reset();
            }

            /// The name in the exposition (with the registry's namespace; counters end in `_total`).
            #[getter]
            fn name(&self) -> &str {
                &self.meta.name
            }
            /// The help text.
            #[getter]
            fn description(&self) -> &str {
                &self.meta.help
            }
            /// The series' labels, sorted by name.
            #[getter]
            fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                self.meta.labels_tuple(py)
            }
            fn __repr__(&self) -> String {
                format!(concat!($py_name, "(name={:?}, labels={:?})"), self.meta.name, self.meta.labels)
            }
        }
    };
}

handle!(
    /// A counter: one series that only goes up.
    PyCounter, reg::Counter, "CounterSeries", one number, {
    /// Adds `amount` (default 1): a number; a negative or non-finite amount raises
    /// `InvalidValueError`, `None` or another type `TypeError`.
    #[pyo3(signature = (amount = 1.0))]
    #[inline]
    fn inc(&self, #[pyo3(from_py_with = arg::amount)] amount: f64) -> PyResult<()> {
        if amount == 1.0 {
            // The integer cell's single add: what `inc_by(1.0)` ends in, without its checks.
            self.inner.inc();
            return Ok(());
        }
        if !(amount.is_finite() && amount >= 0.0) {
            return Err(invalid_value(format!(
                "amount: counter {} can only be increased by a finite, non-negative amount, got {amount}",
                self.meta.name
            )));
        }
        guard(|| {
            self.inner.inc_by(amount);
            Ok(())
        })
    }

    /// Always raises `UnsupportedOperationError`: a counter cannot go down.
    #[pyo3(signature = (amount = 1.0))]
    fn dec(&self, #[pyo3(from_py_with = arg::amount)] amount: f64) -> PyResult<()> {
        let _ = amount;
        Err(unsupported(format!("counter {} cannot be decremented", self.meta.name)))
    }

    /// Always raises `UnsupportedOperationError`: a counter cannot be set, use `inc`.
    fn set(&self, #[pyo3(from_py_with = arg::value)] value: f64) -> PyResult<()> {
        let _ = value;
        Err(unsupported(format!("counter {} cannot be set directly, use inc() instead", self.meta.name)))
    }
});

handle!(
    /// A gauge: one series that goes up and down.
    PyGauge, reg::Gauge, "GaugeSeries", one number, {
    /// Adds `amount` (default 1; finite).
    #[pyo3(signature = (amount = 1.0))]
    fn inc(&self, #[pyo3(from_py_with = arg::amount)] amount: f64) -> PyResult<()> {
        check_number(amount, "amount: the increment", &self.meta, false)?;
        self.inner.inc_by(amount);
        Ok(())
    }

    /// Subtracts `amount` (default 1; finite).
    #[pyo3(signature = (amount = 1.0))]
    fn dec(&self, #[pyo3(from_py_with = arg::amount)] amount: f64) -> PyResult<()> {
        check_number(amount, "amount: the decrement", &self.meta, false)?;
        self.inner.dec_by(amount);
        Ok(())
    }

    /// Sets the value (infinities allowed, NaN refused).
    fn set(&self, #[pyo3(from_py_with = arg::value)] value: f64) -> PyResult<()> {
        check_number(value, "value: the value", &self.meta, true)?;
        self.inner.set(value);
        Ok(())
    }

    /// Sets the value to the current Unix time in seconds.
    fn set_to_current_time(&self) {
        self.inner.set_to_current_time();
    }
});

handle!(
    /// A histogram with fixed buckets: one series.
    PyHistogram, reg::Histogram, "HistogramSeries", reset: /// Resets buckets, count and sum.
    reads {
        /// Observations so far.
        count: u64;
        /// Sum of the observations.
        sum: f64;
    }
    {
    /// Records one observation (NaN refused).
    fn observe(&self, #[pyo3(from_py_with = arg::value)] value: f64) -> PyResult<()> {
        check_number(value, "value: an observation", &self.meta, true)?;
        self.inner.observe(value);
        Ok(())
    }

    /// Mean observation; 0.0 before the first (as TeleFuser).
    #[getter]
    fn average(&self) -> f64 {
        self.inner.average().unwrap_or(0.0)
    }

    /// The bucket upper bounds (`+Inf` implied).
    #[getter]
    fn buckets(&self) -> Vec<f64> {
        self.inner.buckets().to_vec()
    }

    /// `(upper bound, cumulative count)` per bucket, `+Inf` last.
    #[getter]
    fn bucket_counts(&self) -> Vec<(f64, u64)> {
        let value = self.inner.value();
        let mut out = value.buckets;
        out.push((f64::INFINITY, value.count));
        out
    }
});

handle!(
    /// A summary: quantiles over a sliding window, plus count and sum.
    PySummary, reg::Summary, "SummarySeries", reset: /// Empties the window, zeroes count and sum.
    {
    /// Records one observation (finite).
    fn observe(&self, #[pyo3(from_py_with = arg::value)] value: f64) -> PyResult<()> {
        check_number(value, "value: an observation", &self.meta, false)?;
        guard(|| {
            self.inner.observe(value);
            Ok(())
        })
    }

    /// Observations since creation or reset.
    #[getter]
    fn count(&self) -> u64 {
        self.inner.value().count
    }

    /// Sum of those observations.
    #[getter]
    fn sum(&self) -> f64 {
        self.inner.value().sum
    }

    /// Mean observation; 0.0 before the first.
    #[getter]
    fn average(&self) -> f64 {
        let v = self.inner.value();
        if v.count == 0 {
            0.0
        } else {
            v.sum / v.count as f64
        }
    }

    /// The configured quantiles.
    #[getter]
    fn quantiles(&self) -> Vec<f64> {
        self.inner.quantiles().to_vec()
    }

    /// `{quantile: value}` over the window; a value is None while the window is empty.
    fn quantile_values(&self) -> Vec<(f64, Option<f64>)> {
        self.inner.value().quantiles
    }
});
