//! Bindings of `pipetel-recorders`: the cumulative recorders a worker process keeps and sends
//! to an exporting process (`Family`, `Counter`, `Gauge`, `Histogram`, `MetricSnapshot`,
//! `merge`, `EdgeTransfers`, `Envelope`).
//!
//! Thread-safety follows the Rust recorders exactly: `Counter`, `Gauge`, `Histogram` and
//! `EdgeTransfers` are per-thread (one recorder per thread: using one from a thread other than
//! the one that created it raises `pipetel.ThreadError`; dropping it anywhere is fine);
//! families, snapshots and envelopes are immutable and shared freely.

use pipetel_recorders as rec;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;

use crate::args::arg;
use crate::errors::{guard, to_py, DecodeError, FamilyError, MergeError, RecordError, SnapshotError, ThreadError};

/// A recorder owned by the thread that created it. The lock is never contended (only the owner
/// gets past the thread check); it only makes the class `Sync`, as PyO3 requires, without
/// `unsendable` (whose check panics).
pub(crate) struct PerThread<T> {
    owner: ThreadId,
    owner_key: u64,
    what: &'static str,
    inner: Mutex<T>,
}

/// A cheap per-thread key: `std::thread::current()` clones an `Arc` on every call, too slow for
/// the check on each record; this is one thread-local read.
fn thread_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static KEY: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    KEY.with(|k| *k)
}

impl<T> PerThread<T> {
    fn new(what: &'static str, inner: T) -> Self {
        PerThread { owner: std::thread::current().id(), owner_key: thread_key(), what, inner: Mutex::new(inner) }
    }

    /// Runs `f` on the recorder if called on its owner thread.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> PyResult<R>) -> PyResult<R> {
        if thread_key() != self.owner_key {
            let here = std::thread::current().id();
            return Err(ThreadError::new_err(format!(
                "this {} was created on thread {:?} and used on thread {:?}: recorders are not \
                 thread-safe; take one recorder per thread and merge their snapshots",
                self.what, self.owner, here
            )));
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        guard(|| f(&mut inner))
    }
}

fn refs(labels: &[String]) -> Vec<&str> {
    labels.iter().map(String::as_str).collect()
}

fn kind_from_str(kind: &str) -> PyResult<rec::Kind> {
    match kind {
        "counter" => Ok(rec::Kind::Counter),
        "gauge" => Ok(rec::Kind::Gauge),
        "histogram" => Ok(rec::Kind::Histogram),
        other => {
            Err(PyValueError::new_err(format!("kind must be \"counter\", \"gauge\" or \"histogram\", got {other:?}")))
        }
    }
}

/// A metric family: name, help, unit, kind, label names and (histograms) bucket bounds.
#[pyclass(module = "pipetel.recorders", name = "Family", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct PyFamily(pub(crate) rec::Family);

/// The `#[pymethods]` block of `Family` (a class has one): a static constructor per kind
/// listed, a getter per text field listed (`text name;` reads the family's `name()`), then the
/// methods given. A constructor takes `name`, `help`, `unit` and `labels`, then the kind's own
/// arguments, and passes `$buckets` as the bucket bounds.
macro_rules! family_methods {
    (
        $($(#[$doc:meta])* fn $kind:ident($($opt:ident: $opt_ty:ty),*) $text:literal, buckets $buckets:expr;)*
        $(text $field:ident;)*
        { $($methods:tt)* }
    ) => {
        #[pymethods]
        impl PyFamily {
            $(
                $(#[$doc])*
                #[staticmethod]
                #[pyo3(
                    signature = (
                        name, help = String::new(), unit = String::new(), labels = Vec::new() $(, $opt = Vec::new())*
                    ),
                    text_signature = $text
                )]
                fn $kind(
                    #[pyo3(from_py_with = arg::name)] name: String,
                    #[pyo3(from_py_with = arg::help)] help: String,
                    #[pyo3(from_py_with = arg::unit)] unit: String,
                    #[pyo3(from_py_with = arg::labels)] labels: Vec<String>,
                    $(#[pyo3(from_py_with = arg::$opt)] $opt: $opt_ty,)*
                ) -> PyResult<Self> {
                    PyFamily::new(name, stringify!($kind).to_owned(), help, unit, labels, $buckets)
                }
            )*

            $(
                #[getter]
                fn $field(&self) -> &str {
                    self.0.$field()
                }
            )*

            $($methods)*
        }
    };
}

family_methods! {
    /// A counter family.
    fn counter() "(name, help=\"\", unit=\"\", labels=...)", buckets Vec::new();

    /// A gauge family.
    fn gauge() "(name, help=\"\", unit=\"\", labels=...)", buckets Vec::new();

    /// A histogram family with the given finite, increasing bucket bounds.
    fn histogram(buckets: Vec<f64>) "(name, help=\"\", unit=\"\", labels=..., buckets=...)", buckets buckets;

    text name;
    text help;
    text unit;

{
    #[new]
    #[pyo3(
        signature = (name, kind, help = String::new(), unit = String::new(), labels = Vec::new(), buckets = Vec::new()),
        text_signature = "(name, kind, help=\"\", unit=\"\", labels=..., buckets=...)"
    )]
    fn new(
        #[pyo3(from_py_with = arg::name)] name: String,
        #[pyo3(from_py_with = arg::kind)] kind: String,
        #[pyo3(from_py_with = arg::help)] help: String,
        #[pyo3(from_py_with = arg::unit)] unit: String,
        #[pyo3(from_py_with = arg::labels)] labels: Vec<String>,
        #[pyo3(from_py_with = arg::buckets)] buckets: Vec<f64>,
    ) -> PyResult<Self> {
        guard(|| {
            let kind = kind_from_str(&kind)?;
            rec::Family::new(&name, &help, &unit, kind, &refs(&labels), &buckets)
                .map(PyFamily)
                .map_err(to_py::<FamilyError>)
        })
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind().as_str()
    }
    #[getter]
    fn label_names(&self) -> Vec<String> {
        self.0.label_names().to_vec()
    }
    #[getter]
    fn buckets(&self) -> Vec<f64> {
        self.0.bounds().to_vec()
    }

    fn __repr__(&self) -> String {
        format!(
            "Family(name={:?}, kind={:?}, labels={:?}, buckets={:?})",
            self.0.name(),
            self.0.kind().as_str(),
            self.0.label_names(),
            self.0.bounds()
        )
    }
}
}

/// A cumulative snapshot of one family, one row per label-value combination, sorted.
#[pyclass(module = "pipetel.recorders", name = "MetricSnapshot", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct PySnapshot(pub(crate) rec::MetricSnapshot);

#[pymethods]
impl PySnapshot {
    /// A snapshot from its columns, validated (the inverse of the getters).
    #[new]
    #[pyo3(signature = (family, label_values, values = Vec::new(), bucket_counts = Vec::new(), sums = Vec::new()))]
    fn new(
        #[pyo3(from_py_with = arg::family)] family: PyFamily,
        #[pyo3(from_py_with = arg::label_values)] label_values: Vec<Vec<String>>,
        #[pyo3(from_py_with = arg::values)] values: Vec<f64>,
        #[pyo3(from_py_with = arg::bucket_counts)] bucket_counts: Vec<Vec<u64>>,
        #[pyo3(from_py_with = arg::sums)] sums: Vec<f64>,
    ) -> PyResult<Self> {
        guard(|| {
            rec::MetricSnapshot::from_columns(
                family.0,
                label_values.into_iter().flatten().collect(),
                values,
                bucket_counts.into_iter().flatten().collect(),
                sums,
            )
            .map(PySnapshot)
            .map_err(to_py::<SnapshotError>)
        })
    }

    /// The family's name.
    #[getter]
    fn name(&self) -> &str {
        self.0.name()
    }
    /// The family.
    #[getter]
    fn family(&self) -> PyFamily {
        PyFamily(self.0.family().clone())
    }
    /// One tuple of label values per series.
    #[getter]
    fn label_values(&self) -> Vec<Vec<String>> {
        (0..self.0.len()).map(|i| self.0.row(i).to_vec()).collect()
    }
    /// Counter totals / gauge values, one per series (empty for histograms).
    #[getter]
    fn values(&self) -> Vec<f64> {
        self.0.values().to_vec()
    }
    /// Cumulative bucket counts per series (histograms), `+Inf` (= count) last.
    #[getter]
    fn bucket_counts(&self) -> Vec<Vec<u64>> {
        let width = self.0.family().buckets();
        if width == 0 {
            return Vec::new();
        }
        self.0.bucket_counts().chunks(width).map(<[u64]>::to_vec).collect()
    }
    /// Sum of observations per series (histograms).
    #[getter]
    fn sums(&self) -> Vec<f64> {
        self.0.sums().to_vec()
    }

    /// The value of the series with these label values (a histogram's count), or `None`.
    fn get(&self, #[pyo3(from_py_with = arg::labels)] labels: Vec<String>) -> Option<f64> {
        self.0.get(&labels).map(|s| s.value)
    }

    /// Whether this snapshot is from a restarted source compared with `earlier`.
    fn is_reset_from(&self, #[pyo3(from_py_with = arg::earlier)] earlier: PyRef<'_, PySnapshot>) -> bool {
        self.0.is_reset_from(&earlier.0)
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    fn __repr__(&self) -> String {
        format!("MetricSnapshot(name={:?}, series={})", self.0.name(), self.0.len())
    }
}

/// A per-thread recorder class: the struct (documented as given), its constructor, `family`,
/// `series_count`, `snapshot`, and one method per record operation listed: `fn m(value) => op;`
/// takes the series' label values (`labels`) and a number (`value`, read by the `arg` function
/// of that name) and calls the recorder's `op`.
macro_rules! recorder {
    (
        $(#[$doc:meta])* $ty:ident($rust:ty), $py_name:literal,
        { $($(#[$attr:meta])* fn $method:ident($value:ident) => $record:ident;)* }
    ) => {
        $(#[$doc])*
        #[pyclass(module = "pipetel.recorders", name = $py_name, frozen)]
        pub struct $ty(PerThread<$rust>);

        #[pymethods]
        impl $ty {
            $(
                $(#[$attr])*
                fn $method(
                    &self,
                    #[pyo3(from_py_with = arg::labels)] labels: Vec<String>,
                    #[pyo3(from_py_with = arg::$value)] $value: f64,
                ) -> PyResult<()> {
                    self.0.with(|r| r.$record(&refs(&labels), $value).map_err(to_py::<RecordError>))
                }
            )*

            #[new]
            fn new(#[pyo3(from_py_with = arg::family)] family: PyFamily) -> PyResult<Self> {
                guard(|| {
                    <$rust>::new(family.0)
                        .map(|r| $ty(PerThread::new(stringify!($ty), r)))
                        .map_err(to_py::<FamilyError>)
                })
            }
            /// The family this recorder records.
            #[getter]
            fn family(&self) -> PyResult<PyFamily> {
                self.0.with(|r| Ok(PyFamily(r.family().clone())))
            }
            /// The number of series recorded so far.
            #[getter]
            fn series_count(&self) -> PyResult<usize> {
                self.0.with(|r| Ok(r.series_count()))
            }
            /// A cumulative snapshot of everything recorded so far.
            fn snapshot(&self) -> PyResult<PySnapshot> {
                self.0.with(|r| Ok(PySnapshot(r.snapshot())))
            }
        }
    };
}

recorder!(
    /// A per-thread counter of a `Family`, keyed by label values: `Counter(family)`; only the thread
    /// that made it records on it, and `snapshot()` is cumulative. The registry's counter, declared
    /// as in prometheus_client, is `pipetel.Counter` (`pipetel.registry.Counter`).
    PyCounter(rec::Counter), "Counter", {
    /// Adds `amount` (finite, >= 0) to the series `labels`.
    #[pyo3(signature = (labels = Vec::new(), amount = 1.0))]
    fn inc(amount) => add;
});

recorder!(
    /// A per-thread gauge of a `Family`, keyed by label values: `Gauge(family)`; only the thread
    /// that made it records on it, and `snapshot()` is cumulative. The registry's gauge, declared
    /// as in prometheus_client, is `pipetel.Gauge` (`pipetel.registry.Gauge`).
    PyGauge(rec::Gauge), "Gauge", {
    /// Sets the series `labels` to `value` (finite).
    #[pyo3(signature = (labels, value))]
    fn set(value) => set;
    /// Adds `delta` (finite, any sign) to the series `labels`.
    #[pyo3(signature = (labels, delta))]
    fn add(delta) => add;
});

recorder!(
    /// A per-thread histogram of a `Family`, keyed by label values: `Histogram(family)`; only the thread
    /// that made it records on it, and `snapshot()` is cumulative. The registry's histogram, declared
    /// as in prometheus_client, is `pipetel.Histogram` (`pipetel.registry.Histogram`).
    PyHistogram(rec::Histogram), "Histogram", {
    /// Observes `value` (finite) in the series `labels`.
    #[pyo3(signature = (labels, value))]
    fn observe(value) => observe;
});

/// Sums snapshots of `family` from several sources into one.
#[pyfunction]
fn merge(
    #[pyo3(from_py_with = arg::family)] family: PyFamily,
    #[pyo3(from_py_with = arg::snapshots)] snapshots: Vec<PySnapshot>,
) -> PyResult<PySnapshot> {
    guard(|| {
        let snapshots: Vec<rec::MetricSnapshot> = snapshots.into_iter().map(|s| s.0).collect();
        rec::merge(&family.0, &snapshots).map(PySnapshot).map_err(to_py::<MergeError>)
    })
}

/// Bytes, transfers, tensors and seconds per (src, dst) edge of one transport.
#[pyclass(module = "pipetel.recorders", name = "EdgeTransfers", frozen)]
pub struct PyEdgeTransfers {
    inner: PerThread<rec::EdgeTransfers>,
    reader: rec::EdgeReader,
}

#[pymethods]
impl PyEdgeTransfers {
    #[new]
    #[pyo3(signature = (transport, namespace = None))]
    fn new(
        #[pyo3(from_py_with = arg::transport)] transport: String,
        #[pyo3(from_py_with = arg::namespace)] namespace: Option<String>,
    ) -> PyResult<Self> {
        guard(|| {
            let inner = match namespace {
                None => rec::EdgeTransfers::new(&transport),
                Some(ns) => {
                    let families = rec::EdgeFamilies::new(&ns).map_err(to_py::<FamilyError>)?;
                    rec::EdgeTransfers::with_families(&transport, families, rec::edge::DEFAULT_COLUMN_CAPACITY)
                }
            };
            let reader = inner.reader();
            Ok(PyEdgeTransfers { inner: PerThread::new("EdgeTransfers", inner), reader })
        })
    }

    /// The transport label value.
    #[getter]
    fn transport(&self) -> PyResult<String> {
        self.inner.with(|e| Ok(e.transport().to_owned()))
    }

    /// Records one transfer of `nbytes` bytes in `tensors` tensors from `src` to `dst`, taking
    /// `seconds` (a finite, non-negative duration: the seconds family is a counter, which
    /// refuses NaN, infinities and negative amounts, so `RecordError` naming `seconds`).
    #[pyo3(signature = (src, dst, nbytes, tensors = 1, seconds = 0.0))]
    fn record(
        &self,
        #[pyo3(from_py_with = arg::src)] src: String,
        #[pyo3(from_py_with = arg::dst)] dst: String,
        #[pyo3(from_py_with = arg::nbytes)] nbytes: u64,
        #[pyo3(from_py_with = arg::tensors)] tensors: u64,
        #[pyo3(from_py_with = arg::seconds)] seconds: f64,
    ) -> PyResult<()> {
        self.inner.with(|e| {
            if !(seconds.is_finite() && seconds >= 0.0) {
                let refused = rec::RecordError::InvalidValue {
                    family: e.families().seconds.name().to_owned(),
                    kind: rec::Kind::Counter,
                    value: seconds,
                };
                return Err(RecordError::new_err(format!("seconds: {refused}")));
            }
            let s = e.endpoint(&src);
            let d = e.endpoint(&dst);
            e.record(s, d, nbytes, tensors, seconds);
            Ok(())
        })
    }

    /// Cumulative snapshots: bytes, transfers, tensors, seconds.
    fn snapshot(&self) -> PyResult<Vec<PySnapshot>> {
        self.inner.with(|e| Ok(e.snapshot().into_iter().map(PySnapshot).collect()))
    }

    /// Takes a snapshot and makes it the `latest`; returns its generation (1, 2, ...).
    fn publish(&self) -> PyResult<u64> {
        self.inner.with(|e| Ok(e.publish()))
    }

    /// `(generation, snapshots)` of the last `publish()`, or `None` before the first.
    #[getter]
    fn latest(&self) -> Option<(u64, Vec<PySnapshot>)> {
        self.reader.latest().map(|p| (p.generation, p.snapshots.iter().cloned().map(PySnapshot).collect()))
    }
}

/// A source id, a sequence number and snapshots: what a worker sends to a hub.
#[pyclass(module = "pipetel.recorders", name = "Envelope", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct PyEnvelope(rec::Envelope);

impl PyEnvelope {
    /// The Rust envelope.
    pub(crate) fn into_inner(self) -> rec::Envelope {
        self.0
    }
}

#[pymethods]
impl PyEnvelope {
    #[new]
    fn new(
        #[pyo3(from_py_with = arg::source)] source: String,
        #[pyo3(from_py_with = arg::sequence)] sequence: u64,
        #[pyo3(from_py_with = arg::snapshots)] snapshots: Vec<PySnapshot>,
    ) -> Self {
        PyEnvelope(rec::Envelope::new(source, sequence, snapshots.into_iter().map(|s| s.0).collect()))
    }

    /// The sending source's id.
    #[getter]
    fn source(&self) -> &str {
        &self.0.source
    }
    /// The source's sequence number of this envelope.
    #[getter]
    fn sequence(&self) -> u64 {
        self.0.sequence
    }
    /// The snapshots carried.
    #[getter]
    fn snapshots(&self) -> Vec<PySnapshot> {
        self.0.snapshots.iter().cloned().map(PySnapshot).collect()
    }

    /// The compact binary encoding (the same bytes the Rust `Envelope::encode` makes).
    fn encode<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard(|| Ok(PyBytes::new(py, &self.0.encode())))
    }

    /// The encoding as one frame: a 4-byte little-endian length, then the encoding (what a
    /// Rust `FrameWriter::send` writes and a `FrameReader` reads).
    fn encode_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard(|| {
            let payload = self.0.encode();
            let len = u32::try_from(payload.len())
                .map_err(|_| PyValueError::new_err("envelope too large for one frame (over 4 GiB)"))?;
            let mut frame = Vec::with_capacity(payload.len() + 4);
            frame.extend_from_slice(&len.to_le_bytes());
            frame.extend_from_slice(&payload);
            Ok(PyBytes::new(py, &frame))
        })
    }

    /// Decodes bytes made by `encode` (here or in Rust), in time linear in their size, without
    /// the GIL (the bytes object is immutable and outlives the call).
    #[staticmethod]
    fn decode(#[pyo3(from_py_with = arg::data)] data: Bound<'_, PyBytes>) -> PyResult<Self> {
        let bytes = data.as_bytes();
        data.py().detach(|| guard(|| rec::Envelope::decode(bytes).map(PyEnvelope).map_err(to_py::<DecodeError>)))
    }

    fn __repr__(&self) -> String {
        format!(
            "Envelope(source={:?}, sequence={}, snapshots={})",
            self.0.source,
            self.0.sequence,
            self.0.snapshots.len()
        )
    }
}

/// Adds the recorder classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFamily>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<PyCounter>()?;
    m.add_class::<PyGauge>()?;
    m.add_class::<PyHistogram>()?;
    m.add_class::<PyEdgeTransfers>()?;
    m.add_class::<PyEnvelope>()?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    Ok(())
}
