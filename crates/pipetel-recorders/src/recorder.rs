//! Single-threaded recorders: counters, gauges and histograms keyed by label values.
//!
//! A recorder lives on one thread (it is [`Send`], so it can be moved to the thread that uses
//! it, but not [`Sync`]): recording is a hash of the label values, a lookup and a plain add,
//! without atomics or locks. Threads that need the same family each keep their own recorder
//! and their snapshots are [merged](crate::merge).

use std::cell::RefCell;

use crate::family::{Family, FamilyError, Kind};
use crate::index::SeriesIndex;
use crate::snapshot::MetricSnapshot;

/// Why a value was not recorded. Nothing is recorded when an error is returned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The number of label values differs from the family's label names.
    #[error("family {family:?} takes {expected} label values, got {got}")]
    Arity {
        /// The family.
        family: String,
        /// Its number of labels.
        expected: usize,
        /// Label values given.
        got: usize,
    },
    /// The value is NaN or infinite, or a counter increment is negative.
    #[error("invalid value {value} for {kind} family {family:?}")]
    InvalidValue {
        /// The family.
        family: String,
        /// Its kind.
        kind: Kind,
        /// The rejected value.
        value: f64,
    },
    /// The recorder holds as many series as it can index.
    #[error("family {family:?} has too many series")]
    TooManySeries {
        /// The family.
        family: String,
    },
}

#[derive(Debug)]
struct Store {
    index: SeriesIndex,
    /// Counter totals / gauge values, or per-bucket (not cumulative) histogram counts.
    cells: Vec<f64>,
    counts: Vec<u64>,
    sums: Vec<f64>,
}

#[derive(Debug)]
struct Recorder {
    family: Family,
    store: RefCell<Store>,
}

impl Recorder {
    fn new(family: Family, kind: Kind) -> Result<Recorder, FamilyError> {
        family.expect_kind(kind)?;
        Ok(Recorder {
            store: RefCell::new(Store {
                index: SeriesIndex::new(family.arity()),
                cells: Vec::new(),
                counts: Vec::new(),
                sums: Vec::new(),
            }),
            family,
        })
    }

    #[inline]
    fn check_value(&self, value: f64, min: f64) -> Result<(), RecordError> {
        if value.is_finite() && value >= min {
            Ok(())
        } else {
            Err(RecordError::InvalidValue { family: self.family.name().to_owned(), kind: self.family.kind(), value })
        }
    }

    /// [`Recorder::with_series`] for a `value` that must be finite and at least `min`.
    #[inline]
    fn record(
        &self,
        labels: &[&str],
        value: f64,
        min: f64,
        f: impl FnOnce(&mut Store, usize),
    ) -> Result<(), RecordError> {
        self.check_value(value, min)?;
        self.with_series(labels, f)
    }

    /// Runs `f` on the store and the series of `labels`, created (zeroed) if new.
    #[inline]
    fn with_series<R>(&self, labels: &[&str], f: impl FnOnce(&mut Store, usize) -> R) -> Result<R, RecordError> {
        if labels.len() != self.family.arity() {
            return Err(RecordError::Arity {
                family: self.family.name().to_owned(),
                expected: self.family.arity(),
                got: labels.len(),
            });
        }
        // No method of this type calls out while holding the borrow, so it is never contended.
        let mut store = self.store.borrow_mut();
        let before = store.index.len();
        let Some(i) = store.index.find_or_insert(labels) else {
            return Err(RecordError::TooManySeries { family: self.family.name().to_owned() });
        };
        if i == before {
            match self.family.kind() {
                Kind::Counter | Kind::Gauge => store.cells.push(0.0),
                Kind::Histogram => {
                    let b = self.family.buckets();
                    let len = store.counts.len();
                    store.counts.resize(len + b, 0);
                    store.sums.push(0.0);
                }
            }
        }
        Ok(f(&mut store, i))
    }

    fn series_count(&self) -> usize {
        self.store.borrow().index.len()
    }

    fn snapshot(&self) -> MetricSnapshot {
        let mut guard = self.store.borrow_mut();
        let store = &mut *guard;
        let n = store.index.len();
        let arity = self.family.arity();
        store.index.sort();
        let order = store.index.order();
        let mut labels = Vec::with_capacity(n * arity);
        for &i in order {
            labels.extend_from_slice(store.index.row(i as usize));
        }
        match self.family.kind() {
            Kind::Counter | Kind::Gauge => {
                let values = order.iter().map(|&i| store.cells[i as usize]).collect();
                MetricSnapshot::from_trusted(self.family.clone(), labels.into(), values, Vec::new(), Vec::new())
            }
            Kind::Histogram => {
                let b = self.family.buckets();
                let mut cumulative = Vec::with_capacity(n * b);
                for &i in order {
                    let mut total = 0u64;
                    for &c in &store.counts[i as usize * b..(i as usize + 1) * b] {
                        total = total.saturating_add(c);
                        cumulative.push(total);
                    }
                }
                let sums = order.iter().map(|&i| store.sums[i as usize]).collect();
                MetricSnapshot::from_trusted(self.family.clone(), labels.into(), Vec::new(), cumulative, sums)
            }
        }
    }
}

/// A recorder type (documented by the doc comments given) around its [`Recorder`], with the
/// methods every recorder type has: `new` (checking the family's kind), `family`,
/// `series_count` and `snapshot` (documented by `$snapshot`).
macro_rules! recorder_type {
    ($(#[$doc:meta])* $ty:ident, $what:literal, $snapshot:literal) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $ty(Recorder);

        impl $ty {
            #[doc = concat!("A ", $what, " of `family`.")]
            ///
            /// # Errors
            #[doc = concat!("[`FamilyError::WrongKind`] when `family` is not a ", $what, " family.")]
            pub fn new(family: Family) -> Result<$ty, FamilyError> {
                Recorder::new(family, Kind::$ty).map($ty)
            }

            /// The family.
            pub fn family(&self) -> &Family {
                &self.0.family
            }

            /// Number of series recorded so far.
            pub fn series_count(&self) -> usize {
                self.0.series_count()
            }

            #[doc = $snapshot]
            pub fn snapshot(&self) -> MetricSnapshot {
                self.0.snapshot()
            }
        }
    };
}

recorder_type!(
    /// A monotonic counter per label values.
    ///
    /// Not thread-safe by design: one recorder per thread ([`Send`], not [`Sync`]); merge the
    /// threads' snapshots.
    ///
    /// ```compile_fail
    /// fn shared<T: Sync>(_: &T) {}
    /// let c = pipetel_recorders::Counter::new(
    ///     pipetel_recorders::Family::counter("items", "", "", &[]).unwrap(),
    /// ).unwrap();
    /// shared(&c); // a Counter cannot be shared between threads
    /// ```
    Counter,
    "counter",
    "The cumulative totals of every series since this counter was created."
);

impl Counter {
    /// Adds one to the series of `labels`.
    ///
    /// # Errors
    /// [`RecordError::Arity`] when `labels` does not match the family's label names;
    /// [`RecordError::TooManySeries`] past about four billion series.
    #[inline]
    pub fn inc(&self, labels: &[&str]) -> Result<(), RecordError> {
        self.0.with_series(labels, |s, i| s.cells[i] += 1.0)
    }

    /// Adds `value` (finite, not negative) to the series of `labels`.
    ///
    /// # Errors
    /// As [`Counter::inc`], and [`RecordError::InvalidValue`] for a negative or non-finite
    /// value.
    #[inline]
    pub fn add(&self, labels: &[&str], value: f64) -> Result<(), RecordError> {
        self.0.record(labels, value, 0.0, |s, i| s.cells[i] += value)
    }
}

recorder_type!(
    /// A value per label values that goes up and down.
    ///
    /// Not thread-safe by design: one recorder per thread ([`Send`], not [`Sync`]).
    Gauge,
    "gauge",
    "The current value of every series."
);

impl Gauge {
    /// Sets the series of `labels` to `value`.
    ///
    /// # Errors
    /// [`RecordError::Arity`] when `labels` does not match the family's label names;
    /// [`RecordError::InvalidValue`] for NaN or an infinity.
    #[inline]
    pub fn set(&self, labels: &[&str], value: f64) -> Result<(), RecordError> {
        self.0.record(labels, value, f64::NEG_INFINITY, |s, i| s.cells[i] = value)
    }

    /// Adds `delta` (which may be negative) to the series of `labels`.
    ///
    /// # Errors
    /// As [`Gauge::set`].
    #[inline]
    pub fn add(&self, labels: &[&str], delta: f64) -> Result<(), RecordError> {
        self.0.record(labels, delta, f64::NEG_INFINITY, |s, i| s.cells[i] += delta)
    }
}

recorder_type!(
    /// A distribution per label values over the family's fixed buckets.
    ///
    /// `observe` bumps exactly one bucket (the first whose upper bound is at least the value, or
    /// `+Inf`) and adds to the sum; cumulative counts are built at snapshot time.
    ///
    /// Not thread-safe by design: one recorder per thread ([`Send`], not [`Sync`]).
    Histogram,
    "histogram",
    "Cumulative bucket counts (`+Inf` last = count) and sums of every series."
);

impl Histogram {
    /// Records one observation of `value` in the series of `labels`.
    ///
    /// # Errors
    /// [`RecordError::Arity`] when `labels` does not match the family's label names;
    /// [`RecordError::InvalidValue`] for NaN or an infinity.
    #[inline]
    pub fn observe(&self, labels: &[&str], value: f64) -> Result<(), RecordError> {
        let bucket = self.0.family.bounds().partition_point(|&b| b < value);
        let b = self.0.family.buckets();
        self.0.record(labels, value, f64::NEG_INFINITY, |s, i| {
            s.counts[i * b + bucket] += 1;
            s.sums[i] += value;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_accumulates_per_label_values() {
        let c = Counter::new(Family::counter("items", "", "{item}", &["stage"]).expect("valid")).expect("counter");
        c.inc(&["b"]).expect("inc");
        c.inc(&["a"]).expect("inc");
        c.add(&["b"], 2.5).expect("add");
        let s = c.snapshot();
        assert_eq!(s.label_values(), ["a", "b"]);
        assert_eq!(s.values(), [1.0, 3.5]);
        // Snapshots are cumulative: a second one still holds everything.
        c.inc(&["a"]).expect("inc");
        assert_eq!(c.snapshot().values(), [2.0, 3.5]);
        assert_eq!(c.series_count(), 2);
    }

    #[test]
    fn counter_rejects_bad_input_without_recording() {
        let c = Counter::new(Family::counter("items", "", "", &["a", "b"]).expect("valid")).expect("counter");
        let err = c.inc(&["x"]).expect_err("arity");
        assert_eq!(err, RecordError::Arity { family: "items".into(), expected: 2, got: 1 });
        assert!(err.to_string().contains("items"));
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(c.add(&["x", "y"], bad), Err(RecordError::InvalidValue { .. })));
        }
        assert!(c.snapshot().is_empty());
    }

    #[test]
    fn wrong_kind_is_an_error() {
        let g = Family::gauge("g", "", "", &[]).expect("valid");
        assert!(matches!(
            Counter::new(g.clone()),
            Err(FamilyError::WrongKind { expected: Kind::Counter, found: Kind::Gauge, .. })
        ));
        assert!(Histogram::new(g.clone()).is_err());
        assert!(Gauge::new(g).is_ok());
    }

    #[test]
    fn gauge_sets_and_adds() {
        let g = Gauge::new(Family::gauge("queue", "", "", &[]).expect("valid")).expect("gauge");
        g.set(&[], 5.0).expect("set");
        g.add(&[], -7.0).expect("add");
        assert_eq!(g.snapshot().values(), [-2.0]);
        assert!(g.set(&[], f64::NAN).is_err());
    }

    #[test]
    fn histogram_bumps_one_bucket_and_builds_cumulative_counts() {
        let h = Histogram::new(Family::histogram("lat", "", "s", &["op"], &[0.1, 1.0, 10.0]).expect("valid"))
            .expect("histogram");
        for v in [0.05, 0.1, 0.5, 1.0, 5.0, 50.0, -3.0] {
            h.observe(&["read"], v).expect("observe");
        }
        h.observe(&["write"], 2.0).expect("observe");
        let s = h.snapshot();
        let read = s.get(&["read"]).expect("read series");
        // le=0.1: -3, 0.05, 0.1; le=1: +0.5, 1.0; le=10: +5; +Inf: +50.
        assert_eq!(read.bucket_counts, [3, 5, 6, 7]);
        assert_eq!(read.count(), 7);
        assert!((read.sum - 53.65).abs() < 1e-9);
        let write = s.get(&["write"]).expect("write series");
        assert_eq!(write.bucket_counts, [0, 0, 1, 1]);
        assert_eq!(s.bucket_counts().len(), 8);
        assert!(h.observe(&["read"], f64::INFINITY).is_err());
    }
}
