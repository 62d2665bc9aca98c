//! Bindings of `pipetel::registry` for the TeleFuser metrics API (`pipetel.telefuser`):
//! `MetricRegistry`, `Counter`, `Gauge`, `Histogram`, `Summary`, `MetricLabel`, custom
//! collectors, and the exceptions TeleFuser programs catch.
//!
//! A metric handle holds one pre-resolved series of the Rust registry: `counter.inc()` is one
//! relaxed atomic add behind a frozen class (no borrow flag, no label lookup). Labels given at
//! registration (`labels={"method": "GET"}`) pick the series once; registering the same name
//! with other label values gives the other series of the same family.
//!
//! Custom collectors are Python callables the Rust render calls back: the render attaches to
//! the interpreter only to call them (`get_prometheus_format` detaches first, so a scrape on
//! another thread never waits on a lock held by a thread that waits for the interpreter), and
//! an exception in one is reported through `sys.unraisablehook` and contributes no lines.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pipetel::registry::{self as reg, Opts, Registry, RegistryError};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};

use crate::errors::{guard, FamilyError, PipetelError, RecordError};

create_exception!(
    pipetel,
    MetricAlreadyRegisteredError,
    FamilyError,
    "The name is taken by a metric of another kind, label names, buckets or quantiles."
);

/// An exception type with two bases (one of pipetel's, one of Python's), made once.
struct DualException {
    cell: PyOnceLock<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
}

impl DualException {
    const fn new(name: &'static str, doc: &'static str) -> Self {
        DualException { cell: PyOnceLock::new(), name, doc }
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        bases: impl FnOnce(Python<'py>) -> (Bound<'py, PyType>, Bound<'py, PyType>),
    ) -> PyResult<&Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let (a, b) = bases(py);
            let ns = PyDict::new(py);
            ns.set_item("__module__", "pipetel")?;
            ns.set_item("__doc__", self.doc)?;
            let made = py.get_type::<PyType>().call1((self.name, PyTuple::new(py, [a, b])?, ns))?;
            Ok(made.cast_into::<PyType>()?.unbind())
        })?;
        Ok(ty.bind(py))
    }
}

static INVALID_VALUE: DualException = DualException::new(
    "InvalidValueError",
    "A value a metric cannot record: NaN, a negative counter increment, a non-finite amount.",
);
static UNSUPPORTED: DualException = DualException::new(
    "UnsupportedOperationError",
    "An operation the metric's kind does not allow (a counter's dec or set).",
);
static INVALID_METRIC: DualException = DualException::new(
    "InvalidMetricError",
    "An invalid metric definition: name, label names or values, buckets or quantiles.",
);
static NOT_FOUND: DualException = DualException::new("MetricNotFoundError", "No metric of that name is registered.");

fn invalid_value_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INVALID_VALUE.get(py, |py| (py.get_type::<RecordError>(), py.get_type::<pyo3::exceptions::PyValueError>()))
}
fn unsupported_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UNSUPPORTED.get(py, |py| (py.get_type::<RecordError>(), py.get_type::<PyRuntimeError>()))
}
fn invalid_metric_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INVALID_METRIC.get(py, |py| (py.get_type::<FamilyError>(), py.get_type::<PyValueError>()))
}
fn not_found_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    NOT_FOUND.get(py, |py| (py.get_type::<PipetelError>(), py.get_type::<PyKeyError>()))
}

/// `InvalidValueError(message)`.
pub(crate) fn invalid_value(message: String) -> PyErr {
    Python::attach(|py| match invalid_value_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

fn unsupported(message: String) -> PyErr {
    Python::attach(|py| match unsupported_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

fn not_found(message: String) -> PyErr {
    Python::attach(|py| match not_found_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

/// A registry error as the exception TeleFuser code expects: a conflict is
/// `MetricAlreadyRegisteredError`, anything else `InvalidMetricError`; the message is Rust's.
pub(crate) fn registry_error(error: RegistryError) -> PyErr {
    if matches!(error, RegistryError::Conflict { .. }) {
        return MetricAlreadyRegisteredError::new_err(error.to_string());
    }
    Python::attach(|py| match invalid_metric_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), error.to_string()),
        Err(e) => e,
    })
}

/// Refuses NaN (and, unless `infinite_ok`, infinities) with `InvalidValueError` naming `what`.
#[inline]
fn check_number(value: f64, what: &str, metric: &Meta, infinite_ok: bool) -> PyResult<()> {
    if value.is_nan() || (!infinite_ok && value.is_infinite()) {
        return Err(invalid_value(format!("{what} of metric {} must be a finite number, got {value}", metric.name)));
    }
    Ok(())
}

/// A label: name and value (TeleFuser's `MetricLabel`).
#[pyclass(module = "pipetel.telefuser", name = "MetricLabel", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMetricLabel {
    name: String,
    value: String,
}

#[pymethods]
impl PyMetricLabel {
    #[new]
    fn new(name: String, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let value = label_value(&name, value)?;
        Ok(PyMetricLabel { name, value })
    }

    /// The label's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The label's value.
    #[getter]
    fn value(&self) -> &str {
        &self.value
    }

    /// `name="value"`, as in the exposition (the value escaped).
    fn to_prometheus(&self) -> String {
        let escaped = self.value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        format!("{}=\"{escaped}\"", self.name)
    }

    fn __repr__(&self) -> String {
        format!("MetricLabel(name={:?}, value={:?})", self.name, self.value)
    }
}

/// A label value: a `str`, or an `int`, `float` or `bool` written as Python's `str()` does.
fn label_value(name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    let py = value.py();
    let scalar = value.is_instance(&py.get_type::<pyo3::types::PyInt>())?
        || value.is_instance(&py.get_type::<pyo3::types::PyFloat>())?;
    if scalar {
        return Ok(value.str()?.to_cow()?.into_owned());
    }
    Err(PyTypeError::new_err(format!(
        "the value of label {name:?} must be a str (or an int or float), got {}",
        value.get_type().name()?
    )))
}

/// Labels as TeleFuser takes them: `None`, a dict of names to values, or a list of
/// `MetricLabel` (or any objects with `name` and `value`), sorted by name as TeleFuser does.
pub(crate) fn labels_of(labels: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(labels) = labels.filter(|l| !l.is_none()) else { return Ok(Vec::new()) };
    let mut pairs = Vec::new();
    if let Ok(dict) = labels.cast::<PyDict>() {
        for (k, v) in dict.iter() {
            let Ok(name) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "label names must be str, got {} ({})",
                    k.repr()?,
                    k.get_type().name()?
                )));
            };
            let name = name.to_cow()?.into_owned();
            let value = label_value(&name, &v)?;
            pairs.push((name, value));
        }
    } else if labels.cast::<PyList>().is_ok() || labels.cast::<PyTuple>().is_ok() {
        for (i, item) in labels.try_iter()?.enumerate() {
            let item = item?;
            if let Ok(label) = item.cast::<PyMetricLabel>() {
                let label = label.get();
                pairs.push((label.name.clone(), label.value.clone()));
                continue;
            }
            let (Ok(name), Ok(value)) = (item.getattr("name"), item.getattr("value")) else {
                return Err(PyTypeError::new_err(format!(
                    "labels[{i}] must be a MetricLabel (an object with name and value), got {}",
                    item.get_type().name()?
                )));
            };
            let Ok(name) = name.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!("labels[{i}].name must be a str")));
            };
            let name = name.to_cow()?.into_owned();
            let value = label_value(&name, &value)?;
            pairs.push((name, value));
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "labels must be a dict of str to str or a list of MetricLabel, got {}",
            labels.get_type().name()?
        )));
    }
    pairs.sort();
    Ok(pairs)
}

/// What every metric handle keeps beside its series: exposed name, help, labels.
pub(crate) struct Meta {
    name: String,
    help: String,
    labels: Vec<(String, String)>,
}

impl Meta {
    fn labels_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let labels: Vec<PyMetricLabel> =
            self.labels.iter().map(|(n, v)| PyMetricLabel { name: n.clone(), value: v.clone() }).collect();
        PyTuple::new(py, labels)
    }
}

/// A counter: one series that only goes up.
#[pyclass(module = "pipetel.telefuser", name = "Counter", frozen)]
pub struct PyCounter {
    inner: reg::Counter,
    meta: Arc<Meta>,
}

#[pymethods]
impl PyCounter {
    /// Adds `amount` (default 1). A negative or non-finite amount raises `InvalidValueError`.
    #[pyo3(signature = (amount = None))]
    #[inline]
    fn inc(&self, amount: Option<f64>) -> PyResult<()> {
        match amount {
            None => {
                self.inner.inc();
                Ok(())
            }
            Some(n) => {
                if !(n.is_finite() && n >= 0.0) {
                    return Err(invalid_value(format!(
                        "counter {} can only be increased by a finite, non-negative amount, got {n}",
                        self.meta.name
                    )));
                }
                guard(|| {
                    self.inner.inc_by(n);
                    Ok(())
                })
            }
        }
    }

    /// Always raises `UnsupportedOperationError`: a counter cannot go down.
    #[pyo3(signature = (amount = 1.0))]
    fn dec(&self, amount: f64) -> PyResult<()> {
        let _ = amount;
        Err(unsupported(format!("counter {} cannot be decremented", self.meta.name)))
    }

    /// Always raises `UnsupportedOperationError`: a counter cannot be set, use `inc`.
    fn set(&self, value: f64) -> PyResult<()> {
        let _ = value;
        Err(unsupported(format!("counter {} cannot be set directly, use inc() instead", self.meta.name)))
    }

    /// The current value.
    #[getter]
    fn value(&self) -> f64 {
        self.inner.value()
    }

    /// Resets this series to 0.
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
        format!("Counter(name={:?}, labels={:?})", self.meta.name, self.meta.labels)
    }
}

/// A gauge: one series that goes up and down.
#[pyclass(module = "pipetel.telefuser", name = "Gauge", frozen)]
pub struct PyGauge {
    inner: reg::Gauge,
    meta: Arc<Meta>,
}

#[pymethods]
impl PyGauge {
    /// Adds `amount` (default 1; finite).
    #[pyo3(signature = (amount = 1.0))]
    fn inc(&self, amount: f64) -> PyResult<()> {
        check_number(amount, "the increment", &self.meta, false)?;
        self.inner.inc_by(amount);
        Ok(())
    }

    /// Subtracts `amount` (default 1; finite).
    #[pyo3(signature = (amount = 1.0))]
    fn dec(&self, amount: f64) -> PyResult<()> {
        check_number(amount, "the decrement", &self.meta, false)?;
        self.inner.dec_by(amount);
        Ok(())
    }

    /// Sets the value (infinities allowed, NaN refused).
    fn set(&self, value: f64) -> PyResult<()> {
        check_number(value, "the value", &self.meta, true)?;
        self.inner.set(value);
        Ok(())
    }

    /// Sets the value to the current Unix time in seconds.
    fn set_to_current_time(&self) {
        self.inner.set_to_current_time();
    }

    /// The current value.
    #[getter]
    fn value(&self) -> f64 {
        self.inner.value()
    }

    /// Resets this series to 0.
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
        format!("Gauge(name={:?}, labels={:?})", self.meta.name, self.meta.labels)
    }
}

/// A histogram with fixed buckets: one series.
#[pyclass(module = "pipetel.telefuser", name = "Histogram", frozen)]
pub struct PyHistogram {
    inner: reg::Histogram,
    meta: Arc<Meta>,
}

impl PyCounter {
    /// The handle of an unlabelled counter.
    pub(crate) fn wrap(inner: reg::Counter, help: &str) -> Self {
        PyCounter { meta: Arc::new(Meta { name: inner.name(), help: help.to_owned(), labels: Vec::new() }), inner }
    }
}

impl PyGauge {
    /// The handle of an unlabelled gauge.
    pub(crate) fn wrap(inner: reg::Gauge, help: &str) -> Self {
        PyGauge { meta: Arc::new(Meta { name: inner.name(), help: help.to_owned(), labels: Vec::new() }), inner }
    }
}

impl PyHistogram {
    /// The handle of an unlabelled histogram.
    pub(crate) fn wrap(inner: reg::Histogram, help: &str) -> Self {
        PyHistogram { meta: Arc::new(Meta { name: inner.name(), help: help.to_owned(), labels: Vec::new() }), inner }
    }
}

#[pymethods]
impl PyHistogram {
    /// Records one observation (NaN refused).
    fn observe(&self, value: f64) -> PyResult<()> {
        check_number(value, "an observation", &self.meta, true)?;
        self.inner.observe(value);
        Ok(())
    }

    /// Observations so far.
    #[getter]
    fn count(&self) -> u64 {
        self.inner.count()
    }

    /// Sum of the observations.
    #[getter]
    fn sum(&self) -> f64 {
        self.inner.sum()
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

    /// Resets buckets, count and sum.
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
        format!("Histogram(name={:?}, labels={:?})", self.meta.name, self.meta.labels)
    }
}

/// A summary: quantiles over a sliding window, plus count and sum.
#[pyclass(module = "pipetel.telefuser", name = "Summary", frozen)]
pub struct PySummary {
    inner: reg::Summary,
    meta: Arc<Meta>,
}

#[pymethods]
impl PySummary {
    /// Records one observation (finite).
    fn observe(&self, value: f64) -> PyResult<()> {
        check_number(value, "an observation", &self.meta, false)?;
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

    /// Empties the window, zeroes count and sum.
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
        format!("Summary(name={:?}, labels={:?})", self.meta.name, self.meta.labels)
    }
}

type Collectors = Arc<Mutex<Vec<Py<PyAny>>>>;

/// A registry of metrics under one namespace (TeleFuser's `MetricRegistry`).
#[pyclass(module = "pipetel.telefuser", name = "MetricRegistry", frozen, subclass)]
pub struct PyMetricRegistry {
    inner: Registry,
    namespace: String,
    collectors: Collectors,
    /// Whether the Rust text collector that calls `collectors` is installed (`clear` removes it).
    installed: Mutex<bool>,
}

impl PyMetricRegistry {
    /// The name within the registry: TeleFuser keeps a name that already starts with the
    /// namespace, so `telefuser_x` and `x` are the same metric of namespace `telefuser`.
    fn local<'a>(&self, name: &'a str) -> &'a str {
        if self.namespace.is_empty() {
            return name;
        }
        name.strip_prefix(self.namespace.as_str()).and_then(|rest| rest.strip_prefix('_')).unwrap_or(name)
    }

    fn meta(name: String, help: &str, labels: Vec<(String, String)>) -> Arc<Meta> {
        Arc::new(Meta { name, help: help.to_owned(), labels })
    }
}

fn names_of(labels: &[(String, String)]) -> Vec<&str> {
    labels.iter().map(|(k, _)| k.as_str()).collect()
}

/// Calls one Python collector: it returns a list of exposition lines (or one str).
fn call_collector(py: Python<'_>, collector: &Py<PyAny>) -> PyResult<String> {
    let result = collector.bind(py).call0()?;
    if let Ok(text) = result.cast::<PyString>() {
        return Ok(text.to_cow()?.into_owned());
    }
    let mut out = String::new();
    for (i, line) in result
        .try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "a custom collector must return a list of str lines, got {}",
                result.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?
        .enumerate()
    {
        let line = line?;
        let Ok(line) = line.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "line {i} of a custom collector's output must be a str, got {}",
                line.get_type().name()?
            )));
        };
        out.push_str(&line.to_cow()?);
        out.push('\n');
    }
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[pymethods]
impl PyMetricRegistry {
    /// A registry whose metric names start with `namespace_` (TeleFuser's default `telefuser`;
    /// an empty namespace adds nothing). Registries of one namespace share their metrics (and
    /// share them with the service metrics of that prefix).
    #[new]
    #[pyo3(signature = (namespace = "telefuser"))]
    fn new(namespace: &str) -> PyResult<Self> {
        guard(|| {
            // One Rust registry per namespace and process, shared with the service metrics of
            // that prefix: two metrics of one name are never exported twice.
            let inner = pipetel::service::registry_of(namespace).map_err(registry_error)?;
            Ok(PyMetricRegistry {
                inner,
                namespace: namespace.to_owned(),
                collectors: Arc::new(Mutex::new(Vec::new())),
                installed: Mutex::new(false),
            })
        })
    }

    /// The namespace (name prefix).
    #[getter]
    fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Registers (or finds) a counter; `labels` pick its series. Exposed as `<namespace>_<name>_total`.
    #[pyo3(signature = (name, description = "", labels = None))]
    fn counter(&self, name: &str, description: &str, labels: Option<&Bound<'_, PyAny>>) -> PyResult<PyCounter> {
        let labels = labels_of(labels)?;
        guard(|| {
            let local = self.local(name);
            let inner = if labels.is_empty() {
                self.inner.counter(local, description)
            } else {
                self.inner.counter_vec(local, description, &names_of(&labels)).and_then(|v| v.with(&labels[..]))
            }
            .map_err(registry_error)?;
            Ok(PyCounter { meta: Self::meta(inner.name(), description, labels), inner })
        })
    }

    /// Registers (or finds) a gauge; `labels` pick its series.
    #[pyo3(signature = (name, description = "", labels = None))]
    fn gauge(&self, name: &str, description: &str, labels: Option<&Bound<'_, PyAny>>) -> PyResult<PyGauge> {
        let labels = labels_of(labels)?;
        guard(|| {
            let local = self.local(name);
            let inner = if labels.is_empty() {
                self.inner.gauge(local, description)
            } else {
                self.inner.gauge_vec(local, description, &names_of(&labels)).and_then(|v| v.with(&labels[..]))
            }
            .map_err(registry_error)?;
            Ok(PyGauge { meta: Self::meta(inner.name(), description, labels), inner })
        })
    }

    /// Registers (or finds) a histogram. `buckets`: upper bounds (sorted for you; a trailing
    /// `+Inf` is implied and may be given); None for the registry's default buckets.
    #[pyo3(signature = (name, description = "", labels = None, buckets = None))]
    fn histogram(
        &self,
        name: &str,
        description: &str,
        labels: Option<&Bound<'_, PyAny>>,
        buckets: Option<Vec<f64>>,
    ) -> PyResult<PyHistogram> {
        let labels = labels_of(labels)?;
        let mut opts = Opts::new();
        if let Some(mut bounds) = buckets {
            if bounds.iter().any(|b| b.is_nan()) {
                return Err(registry_error(RegistryError::InvalidOption {
                    metric: name.to_owned(),
                    reason: "a bucket bound is NaN".to_owned(),
                }));
            }
            bounds.sort_by(f64::total_cmp);
            if bounds.last() == Some(&f64::INFINITY) {
                bounds.pop();
            }
            opts = opts.buckets(bounds);
        }
        guard(|| {
            let local = self.local(name);
            let inner = if labels.is_empty() {
                self.inner.histogram_with(local, description, opts)
            } else {
                self.inner.histogram_vec(local, description, &names_of(&labels), opts).and_then(|v| v.with(&labels[..]))
            }
            .map_err(registry_error)?;
            Ok(PyHistogram { meta: Self::meta(inner.name(), description, labels), inner })
        })
    }

    /// Registers (or finds) a summary: `quantiles` (default 0.5, 0.9, 0.95, 0.99) over a sliding
    /// window of `max_age_seconds` (default 600).
    #[pyo3(signature = (name, description = "", labels = None, quantiles = None, max_age_seconds = None))]
    fn summary(
        &self,
        name: &str,
        description: &str,
        labels: Option<&Bound<'_, PyAny>>,
        quantiles: Option<Vec<f64>>,
        max_age_seconds: Option<f64>,
    ) -> PyResult<PySummary> {
        let labels = labels_of(labels)?;
        let mut opts = Opts::new();
        if let Some(q) = quantiles {
            opts = opts.quantiles(q);
        }
        if let Some(age) = max_age_seconds {
            let Ok(age) = Duration::try_from_secs_f64(age) else {
                return Err(registry_error(RegistryError::InvalidOption {
                    metric: name.to_owned(),
                    reason: format!("max_age_seconds must be a positive number of seconds, got {age}"),
                }));
            };
            opts = opts.max_age(age);
        }
        guard(|| {
            let local = self.local(name);
            let inner = if labels.is_empty() {
                self.inner.summary_with(local, description, opts)
            } else {
                self.inner.summary_vec(local, description, &names_of(&labels), opts).and_then(|v| v.with(&labels[..]))
            }
            .map_err(registry_error)?;
            Ok(PySummary { meta: Self::meta(inner.name(), description, labels), inner })
        })
    }

    /// `counter`, kept for TeleFuser code that calls it.
    #[pyo3(signature = (name, description = "", labels = None))]
    fn get_or_create_counter(
        &self,
        name: &str,
        description: &str,
        labels: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyCounter> {
        self.counter(name, description, labels)
    }

    /// `gauge`, kept for TeleFuser code that calls it.
    #[pyo3(signature = (name, description = "", labels = None))]
    fn get_or_create_gauge(
        &self,
        name: &str,
        description: &str,
        labels: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyGauge> {
        self.gauge(name, description, labels)
    }

    /// `histogram`, kept for TeleFuser code that calls it.
    #[pyo3(signature = (name, description = "", labels = None, buckets = None))]
    fn get_or_create_histogram(
        &self,
        name: &str,
        description: &str,
        labels: Option<&Bound<'_, PyAny>>,
        buckets: Option<Vec<f64>>,
    ) -> PyResult<PyHistogram> {
        self.histogram(name, description, labels, buckets)
    }

    /// Adds a collector: a callable returning exposition lines (a list of str, or one str),
    /// called at every render (`get_prometheus_format` and the pull endpoint's scrapes). Lines
    /// are checked; invalid ones are dropped with one warning. An exception in the callable is
    /// reported through `sys.unraisablehook` and that collector adds nothing to that render.
    fn add_custom_collector(&self, py: Python<'_>, collector: Bound<'_, PyAny>) -> PyResult<()> {
        if !collector.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "a custom collector must be callable, got {}",
                collector.get_type().name()?
            )));
        }
        lock(&self.collectors).push(collector.unbind());
        let mut installed = lock(&self.installed);
        if !*installed {
            let collectors = self.collectors.clone();
            self.inner.add_text_collector(move || {
                // A scrape thread attaches here; `None` when the interpreter is gone.
                Python::try_attach(|py| {
                    let list: Vec<Py<PyAny>> = lock(&collectors).iter().map(|c| c.clone_ref(py)).collect();
                    let mut out = String::new();
                    for collector in &list {
                        match call_collector(py, collector) {
                            Ok(text) => {
                                out.push_str(&text);
                                if !out.is_empty() && !out.ends_with('\n') {
                                    out.push('\n');
                                }
                            }
                            Err(error) => error.write_unraisable(py, Some(collector.bind(py))),
                        }
                    }
                    out
                })
                .unwrap_or_default()
            });
            *installed = true;
        }
        let _ = py;
        Ok(())
    }

    /// Removes a collector added with `add_custom_collector` (nothing if it is not there).
    fn remove_custom_collector(&self, collector: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut list = lock(&self.collectors);
        let mut found = None;
        for (i, c) in list.iter().enumerate() {
            if c.bind(collector.py()).eq(collector)? {
                found = Some(i);
                break;
            }
        }
        if let Some(i) = found {
            list.remove(i);
        }
        Ok(())
    }

    /// The exposition of this registry alone (Prometheus text format 0.0.4), custom
    /// collectors' lines last.
    fn get_prometheus_format(&self, py: Python<'_>) -> PyResult<String> {
        let registry = self.inner.clone();
        py.detach(move || guard(|| Ok(registry.prometheus_text())))
    }

    /// Resets every metric (registrations stay).
    fn reset_all(&self) {
        self.inner.reset_all();
    }

    /// Unregisters every metric and collector; handles keep recording but are no longer
    /// exported, and registering a name again starts from zero.
    fn clear(&self) {
        self.inner.clear();
        lock(&self.collectors).clear();
        *lock(&self.installed) = false;
    }

    /// The exposed names of the registered metrics (counters with `_total`).
    fn list_metrics(&self) -> Vec<String> {
        self.inner.names()
    }

    /// Whether a metric of that name (with or without the namespace) is registered; raises
    /// `MetricNotFoundError` (a `KeyError`) otherwise. Returns the exposed name.
    fn get_metric_name(&self, name: &str) -> PyResult<String> {
        let local = self.local(name);
        let full = if self.namespace.is_empty() { local.to_owned() } else { format!("{}_{local}", self.namespace) };
        let names = self.inner.names();
        names
            .into_iter()
            .find(|n| *n == full || *n == format!("{full}_total") || n.strip_suffix("_total") == Some(full.as_str()))
            .ok_or_else(|| not_found(format!("metric {full:?} not found in registry {:?}", self.namespace)))
    }

    fn __repr__(&self) -> String {
        format!("MetricRegistry(namespace={:?})", self.namespace)
    }
}

/// Adds the classes and exception types to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("_TfMetricLabel", m.py().get_type::<PyMetricLabel>())?;
    m.add("_TfCounter", m.py().get_type::<PyCounter>())?;
    m.add("_TfGauge", m.py().get_type::<PyGauge>())?;
    m.add("_TfHistogram", m.py().get_type::<PyHistogram>())?;
    m.add("_TfSummary", m.py().get_type::<PySummary>())?;
    m.add("_TfMetricRegistry", m.py().get_type::<PyMetricRegistry>())?;
    m.add("MetricAlreadyRegisteredError", py.get_type::<MetricAlreadyRegisteredError>())?;
    m.add("InvalidValueError", invalid_value_type(py)?)?;
    m.add("UnsupportedOperationError", unsupported_type(py)?)?;
    m.add("InvalidMetricError", invalid_metric_type(py)?)?;
    m.add("MetricNotFoundError", not_found_type(py)?)?;
    Ok(())
}
