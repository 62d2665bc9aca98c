//! Bindings of `pipetel::registry` for the TeleFuser metrics API (`pipetel.telefuser`):
//! `MetricRegistry` and its custom collectors here; the metric handles in `handles`, labels in
//! `labels`, the exceptions TeleFuser programs catch in `exceptions`.
//!
//! Labels given at registration (`labels={"method": "GET"}`) pick the series once; registering
//! the same name with other label values gives the other series of the same family.
//!
//! Custom collectors are Python callables the Rust render calls back: the render attaches to
//! the interpreter only to call them (`get_prometheus_format` detaches first, so a scrape on
//! another thread never waits on a lock held by a thread that waits for the interpreter), and
//! an exception in one is reported through `sys.unraisablehook` and contributes no lines.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pipetel::registry::{Opts, Registry, RegistryError};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::args::{arg, type_name};
use crate::errors::guard;

mod exceptions;
mod handles;
mod labels;
mod text;

use exceptions::not_found;
pub(crate) use exceptions::{invalid_value, registration_error, registry_error};
pub(crate) use text::prometheus_client_bounds;

use handles::PySummary;
pub(crate) use handles::{PyCounter, PyGauge, PyHistogram, SeriesHandle};
use labels::{labels_of, PyMetricLabel};

type Collectors = Arc<Mutex<Vec<Py<PyAny>>>>;

/// A registry of metrics under one namespace (TeleFuser's `MetricRegistry`).
#[pyclass(module = "pipetel.registry", name = "MetricRegistry", frozen, subclass)]
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

/// The options of a counter or a gauge: none.
fn no_options(_name: &str) -> PyResult<Opts> {
    Ok(Opts::new())
}

/// A histogram's options: its buckets, None for the registry's default ones.
fn histogram_options(_name: &str, buckets: Option<Vec<f64>>) -> PyResult<Opts> {
    let mut opts = Opts::new();
    if let Some(mut bounds) = buckets {
        // The `+Inf` bucket is implied: prometheus_client and TeleFuser code may still name it.
        if bounds.last() == Some(&f64::INFINITY) {
            bounds.pop();
        }
        opts = opts.buckets(bounds);
    }
    Ok(opts)
}

/// A summary's options: its quantiles and window, None for the defaults; a window that is not
/// a positive number of seconds is refused.
fn summary_options(name: &str, quantiles: Option<Vec<f64>>, max_age_seconds: Option<f64>) -> PyResult<Opts> {
    let mut opts = Opts::new();
    if let Some(q) = quantiles {
        opts = opts.quantiles(q);
    }
    if let Some(age) = max_age_seconds {
        let Ok(age) = Duration::try_from_secs_f64(age) else {
            return Err(registration_error(
                RegistryError::InvalidOption {
                    metric: name.to_owned(),
                    reason: format!("the window must be a positive number of seconds, got {age}"),
                },
                "name",
                "max_age_seconds",
            ));
        };
        opts = opts.max_age(age);
    }
    Ok(opts)
}

impl PyMetricRegistry {
    /// Registers (or finds) the metric `name` of `H`'s kind and returns the handle of the series
    /// `labels` pick; a refusal names the argument at fault (`option_arg` for the options).
    fn register<H: SeriesHandle>(
        &self,
        name: &str,
        description: &str,
        labels: Vec<(String, String)>,
        opts: Opts,
        option_arg: &str,
    ) -> PyResult<H> {
        guard(|| {
            let local = self.local(name);
            let series = if labels.is_empty() {
                (H::ONE)(&self.inner, local, description, opts)
            } else {
                (H::FAMILY)(&self.inner, local, description, &names_of(&labels), opts).and_then(|v| v.with(&labels[..]))
            }
            .map_err(|e| registration_error(e, "name", option_arg))?;
            Ok(H::of(series, description, labels))
        })
    }
}

/// The `#[pymethods]` block of `MetricRegistry` (a class has one): the registration methods
/// listed, then the methods given. A registration method takes `name`, `description` and
/// `labels`, then its kind's options (each read by the `arg` function of its name), which
/// `$options` turns into `Opts`; a refused option names `$option_arg`.
macro_rules! registry_methods {
    (
        $(
            $(#[$doc:meta])*
            fn $method:ident($($opt:ident: $opt_ty:ty),*) -> $handle:ident, $text:literal,
                $options:expr, $option_arg:literal;
        )*
        { $($methods:tt)* }
    ) => {
        #[pymethods]
        impl PyMetricRegistry {
            $(
                $(#[$doc])*
                #[pyo3(
                    signature = (name, description = String::new(), labels = None $(, $opt = None)*),
                    text_signature = $text
                )]
                fn $method(
                    &self,
                    #[pyo3(from_py_with = arg::name)] name: String,
                    #[pyo3(from_py_with = arg::description)] description: String,
                    labels: Option<&Bound<'_, PyAny>>,
                    $(#[pyo3(from_py_with = arg::$opt)] $opt: $opt_ty,)*
                ) -> PyResult<$handle> {
                    let labels = labels_of(labels)?;
                    let opts = $options(&name $(, $opt)*)?;
                    self.register(&name, &description, labels, opts, $option_arg)
                }
            )*

            $($methods)*
        }
    };
}

registry_methods! {
    /// Registers (or finds) a counter; `labels` pick its series. Exposed as `<namespace>_<name>_total`.
    fn counter() -> PyCounter, "($self, name, description=\"\", labels=None)", no_options, "name";

    /// Registers (or finds) a gauge; `labels` pick its series.
    fn gauge() -> PyGauge, "($self, name, description=\"\", labels=None)", no_options, "name";

    /// Registers (or finds) a histogram. `buckets`: finite, strictly increasing upper bounds, as
    /// Rust takes them (a trailing `+Inf` is implied and may be given); None for the registry's
    /// default buckets.
    fn histogram(buckets: Option<Vec<f64>>) -> PyHistogram,
        "($self, name, description=\"\", labels=None, buckets=None)", histogram_options, "buckets";

    /// Registers (or finds) a summary: `quantiles` (default 0.5, 0.9, 0.95, 0.99) over a sliding
    /// window of `max_age_seconds` (default 600).
    fn summary(quantiles: Option<Vec<f64>>, max_age_seconds: Option<f64>) -> PySummary,
        "($self, name, description=\"\", labels=None, quantiles=None, max_age_seconds=None)",
        summary_options, "quantiles";

    /// `counter`, kept for TeleFuser code that calls it.
    fn get_or_create_counter() -> PyCounter, "($self, name, description=\"\", labels=None)", no_options, "name";

    /// `gauge`, kept for TeleFuser code that calls it.
    fn get_or_create_gauge() -> PyGauge, "($self, name, description=\"\", labels=None)", no_options, "name";

    /// `histogram`, kept for TeleFuser code that calls it.
    fn get_or_create_histogram(buckets: Option<Vec<f64>>) -> PyHistogram,
        "($self, name, description=\"\", labels=None, buckets=None)", histogram_options, "buckets";

{
    /// A registry whose metric names start with `namespace_` (TeleFuser's default `telefuser`;
    /// an empty namespace adds nothing). Registries of one namespace share their metrics (and
    /// share them with the service metrics of that prefix).
    #[new]
    #[pyo3(signature = (namespace = "telefuser".to_owned()), text_signature = "(namespace=\"telefuser\")")]
    fn new(#[pyo3(from_py_with = arg::namespace)] namespace: String) -> PyResult<Self> {
        guard(|| {
            // One Rust registry per namespace and process, shared with the service metrics of
            // that prefix: two metrics of one name are never exported twice.
            let inner = pipetel::service::registry_of(&namespace)
                .map_err(|e| registration_error(e, "namespace", "namespace"))?;
            Ok(PyMetricRegistry {
                inner,
                namespace,
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

    /// Adds a collector: a callable returning exposition lines (a list of str, or one str),
    /// called at every render (`get_prometheus_format` and the pull endpoint's scrapes). Lines
    /// are checked; invalid ones are dropped with one warning. An exception in the callable is
    /// reported through `sys.unraisablehook` and that collector adds nothing to that render.
    fn add_custom_collector(&self, py: Python<'_>, collector: Bound<'_, PyAny>) -> PyResult<()> {
        if !collector.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "collector: a custom collector must be callable, got {}",
                type_name(&collector)
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
    /// collectors' lines last; bucket bounds as prometheus_client writes them (`le="1.0"`).
    fn get_prometheus_format(&self, py: Python<'_>) -> PyResult<String> {
        let registry = self.inner.clone();
        py.detach(move || guard(|| Ok(prometheus_client_bounds(registry.prometheus_text()))))
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
    fn get_metric_name(&self, #[pyo3(from_py_with = arg::name)] name: String) -> PyResult<String> {
        let local = self.local(&name);
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
}

/// `_tf_stage_metrics_text()`: the stage contexts' series out of the pull endpoint's page (what
/// TeleFuser's global registry held besides its own metrics), bounds as prometheus_client writes
/// them; "" before `init` or without the Prometheus exporter. Renders without the GIL.
#[pyfunction]
fn stage_metrics_text(py: Python<'_>) -> PyResult<String> {
    py.detach(|| guard(|| Ok(crate::init::page_text().map(|page| text::stage_metrics_text(&page)).unwrap_or_default())))
}

/// Adds the classes and exception types to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("_tf_stage_metrics_text", wrap_pyfunction!(stage_metrics_text, m)?)?;
    m.add("_TfMetricLabel", py.get_type::<PyMetricLabel>())?;
    m.add("_TfCounter", py.get_type::<PyCounter>())?;
    m.add("_TfGauge", py.get_type::<PyGauge>())?;
    m.add("_TfHistogram", py.get_type::<PyHistogram>())?;
    m.add("_TfSummary", py.get_type::<PySummary>())?;
    m.add("_TfMetricRegistry", py.get_type::<PyMetricRegistry>())?;
    exceptions::register(m)
}
