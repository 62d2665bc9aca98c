//! `pipetel.init(service_name=None, *, config_file=None, span_exporters=None,
//! log_exporters=None, metric_exporters=None, **settings) -> Guard`, its guard, and
//! `pipetel.is_initialized()`.
//!
//! # Settings
//! A keyword of `init` is a key of pipetel's configuration file with each `.` written `_`
//! (`prometheus_port=0`, `exporters_metrics=["prometheus"]`), applied with
//! [`pipetel::Config::with_setting`] after the file and the environment, so it beats both, as the
//! Rust builder does. Python values map onto TOML values: `bool`, `int`, `float`, `str`, a list
//! or tuple (array), a dict with string keys (table).
//!
//! # Exporters of the application's
//! `span_exporters`, `log_exporters` and `metric_exporters` take lists of exporters written for
//! the OpenTelemetry Python SDK (`SpanExporter`, `LogRecordExporter`, `MetricExporter`), plugged
//! in beside the exporters the settings name, or instead of them with those set to `none`
//! (see `crate::plugged`). They are not settings: `_init_settings()` leaves them out, so a
//! process a remote stage starts gets the settings only.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use pipetel::config::toml;
use pipetel::opentelemetry::logs::LoggerProvider as _;
use pipetel::opentelemetry_sdk::logs::SdkLogger;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::args::{arg, type_name};
use crate::errors::{exiting_exception, guard, to_py, AlreadyInitialized, ConfigError, InitError, ShutdownError};
use crate::plugged::Plugged;

/// Set once `init` succeeded in this process (`init` is once per process, also after shutdown).
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The arguments `init` succeeded with (`service_name`, `config_file` and the keyword
/// settings), for `pipetel._init_settings()`: a remote stage's handle carries them so a process
/// running its shards starts pipetel alike.
static INIT_ARGS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// How the pull endpoint `init` configured answers: its path, the credentials it requires and its
/// TLS files, for `pipetel._pull_endpoint_settings()` (the multiprocess shared port answers the
/// same way).
struct PullSettings {
    path: String,
    bearer_token: Option<String>,
    basic_auth: Option<(String, String)>,
    tls: Option<(PathBuf, PathBuf)>,
}

static PULL: OnceLock<PullSettings> = OnceLock::new();

/// The logger of the provider `init` installed, when logs are exported (`pipetel.LoggingHandler`
/// emits through it). Set once: `init` is once per process; after shutdown the provider drops
/// what it is given.
static LOGGER: OnceLock<SdkLogger> = OnceLock::new();

/// What the pull endpoint serves, when `init` installed the Prometheus exporter (set once, as
/// [`LOGGER`]).
static RENDER: OnceLock<pipetel::PrometheusRender> = OnceLock::new();

/// The logger records from Python's `logging` go to, or `None` before `init` or when no log
/// exporter is configured.
pub(crate) fn logger() -> Option<&'static SdkLogger> {
    LOGGER.get()
}

/// A Python value as the TOML value of the file key `key`.
fn to_toml(key: &str, value: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    let bad = |what: String| ConfigError::new_err(format!("invalid value for setting `{key}`: {what}"));
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(toml::Value::Boolean(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        let i: i64 = value.extract().map_err(|_| bad(format!("{value} does not fit a 64-bit integer")))?;
        return Ok(toml::Value::Integer(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        let f = f.value();
        if !f.is_finite() {
            return Err(bad(format!("{f} is not a finite number")));
        }
        return Ok(toml::Value::Float(f));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(toml::Value::String(s.extract::<String>()?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: PyResult<Vec<toml::Value>> = value.try_iter()?.map(|item| to_toml(key, &item?)).collect();
        return Ok(toml::Value::Array(items?));
    }
    if let Ok(d) = value.cast::<PyDict>() {
        let mut table = toml::Table::new();
        for (k, v) in d.iter() {
            let k: String = k.extract().map_err(|_| bad(format!("the dict key {k} is not a string")))?;
            table.insert(k, to_toml(key, &v)?);
        }
        return Ok(toml::Value::Table(table));
    }
    Err(bad(format!("a {} is not a bool, int, float, str, list or dict", type_name(value))))
}

fn init_error(error: pipetel::InitError) -> PyErr {
    match error {
        pipetel::InitError::Config(e) => to_py::<ConfigError>(e),
        pipetel::InitError::AlreadyInitialized => to_py::<AlreadyInitialized>(error),
        other => to_py::<InitError>(other),
    }
}

/// `pipetel.init`: reads the configuration (the file named by `config_file` or `PIPETEL_CONFIG`,
/// then the `OTEL_*`/`PIPETEL_*` variables, then `service_name` and the keyword settings),
/// installs pipetel as Rust `pipetel::init` does, and returns the guard. `span_exporters`,
/// `log_exporters` and `metric_exporters` (lists of OpenTelemetry Python SDK exporters) are
/// plugged in beside the configured exporters, or instead of them with those set to `["none"]`.
#[pyfunction]
#[pyo3(signature = (
    service_name = None,
    *,
    config_file = None,
    span_exporters = None,
    log_exporters = None,
    metric_exporters = None,
    **settings
))]
fn init(
    py: Python<'_>,
    #[pyo3(from_py_with = arg::service_name)] service_name: Option<String>,
    #[pyo3(from_py_with = arg::config_file)] config_file: Option<PathBuf>,
    span_exporters: Option<&Bound<'_, PyAny>>,
    log_exporters: Option<&Bound<'_, PyAny>>,
    metric_exporters: Option<&Bound<'_, PyAny>>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyGuard>> {
    // Checked first: a wrong exporter argument is reported before any setting is read.
    let plugged = Plugged::from_args(py, span_exporters, log_exporters, metric_exporters)?;
    let args = PyDict::new(py);
    args.set_item("service_name", &service_name)?;
    args.set_item("config_file", config_file.as_ref().map(|p| p.to_string_lossy().into_owned()))?;
    if let Some(settings) = settings {
        args.update(settings.as_mapping())?;
    }
    let config = guard(|| {
        let file = config_file.map(|p| p.to_string_lossy().into_owned());
        let lookup = |name: &str| match (&file, name) {
            (Some(file), pipetel::config::PIPETEL_CONFIG) => Some(file.clone()),
            _ => std::env::var(name).ok(),
        };
        let mut config = pipetel::Config::from_lookup(lookup).map_err(to_py::<ConfigError>)?;
        if let Some(name) = service_name {
            config = config.with_service_name(name);
        }
        if let Some(settings) = settings {
            for (key, value) in settings.iter() {
                let key: String = key.extract()?;
                let value = to_toml(&key, &value)?;
                config = config.with_setting(&key, value).map_err(to_py::<ConfigError>)?;
            }
        }
        config.validate().map_err(to_py::<ConfigError>)?;
        Ok(config)
    })?;
    let (config, notebook_progress) = crate::notebook::divert(py, config);
    let pull = PullSettings {
        path: config.prometheus_path().to_string(),
        bearer_token: config.prometheus_bearer_token().map(str::to_string),
        basic_auth: config.prometheus_basic_auth().map(|(u, p)| (u.to_string(), p.to_string())),
        tls: config.prometheus_tls().map(|(c, k)| (c.to_path_buf(), k.to_path_buf())),
    };
    // Binding the endpoint and building exporters may block: other Python threads run meanwhile.
    let options = plugged.options();
    let telemetry = py.detach(|| guard(|| pipetel::init_with(config, options).map_err(init_error)))?;
    INITIALIZED.store(true, Ordering::SeqCst);
    let _ = INIT_ARGS.set(py, args.unbind());
    crate::notebook::show(py, notebook_progress);
    // With `PIPETEL_PROFILE=cpu`: the Python stacks of the threads running shards.
    crate::profile::start(py)?;
    if let Some(lp) = telemetry.logger_provider() {
        let _ = LOGGER.set(lp.logger(pipetel::SCOPE_NAME));
    }
    if let Some(render) = telemetry.prometheus_render() {
        let _ = RENDER.set(render);
        let _ = PULL.set(pull);
    }
    let prometheus_addr = telemetry.prometheus_addr().map(|a| a.to_string());
    let guard_obj =
        Py::new(py, PyGuard { telemetry: Mutex::new(Some(telemetry)), prometheus_addr, pid: std::process::id() })?;
    // Flushed at interpreter exit when not shut down before (as the OTel Python SDK does).
    py.import("atexit")?.call_method1("register", (guard_obj.bind(py).getattr("shutdown")?,))?;
    Ok(guard_obj)
}

/// `pipetel.is_initialized()`: whether `init` succeeded in this process (it stays `True` after
/// the guard shut down: `init` is once per process).
#[pyfunction]
pub(crate) fn is_initialized() -> bool {
    INITIALIZED.load(Ordering::SeqCst)
}

/// `pipetel.prometheus_text(openmetrics=False)`: the whole page the pull endpoint serves now
/// (every instrument, stage, GPU, span, pipeline and registry metric), in the Prometheus text
/// format 0.0.4, or in OpenMetrics 1.0 with exemplars; for an application's own `/metrics`
/// route. Raises `InitError` before `init`, or when `init` did not install the Prometheus
/// exporter. Renders without the GIL.
#[pyfunction]
#[pyo3(signature = (openmetrics = false))]
fn prometheus_text(py: Python<'_>, #[pyo3(from_py_with = arg::openmetrics)] openmetrics: bool) -> PyResult<String> {
    let Some(render) = RENDER.get() else {
        return Err(InitError::new_err(
            "prometheus_text: no page to render: call pipetel.init with the prometheus metric exporter \
             (the default) first",
        ));
    };
    py.detach(|| guard(|| Ok(if openmetrics { render.render_openmetrics() } else { render.render() })))
}

/// The page the pull endpoint serves now (text format), or `None` without the Prometheus
/// exporter; called without the GIL.
pub(crate) fn page_text() -> Option<String> {
    RENDER.get().map(pipetel::PrometheusRender::render)
}

/// Whether `prometheus_text` has a page to render (`init` installed the Prometheus exporter).
#[pyfunction]
fn _has_prometheus_text() -> bool {
    RENDER.get().is_some()
}

/// `pipetel._pull_endpoint_settings()`: how the pull endpoint `init` installed answers, as a dict
/// (`path`; `bearer_token`, `basic_auth` as `(user, password)`, `tls_cert` and `tls_key` paths,
/// each `None` when not set), or `None` before `init` or without the Prometheus exporter. For the
/// multiprocess shared port, which must answer as the endpoint does.
#[pyfunction]
fn _pull_endpoint_settings(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(pull) = PULL.get() else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("path", &pull.path)?;
    d.set_item("bearer_token", pull.bearer_token.as_deref())?;
    d.set_item("basic_auth", pull.basic_auth.as_ref().map(|(u, p)| (u.as_str(), p.as_str())))?;
    d.set_item("tls_cert", pull.tls.as_ref().map(|(c, _)| c.to_string_lossy().into_owned()))?;
    d.set_item("tls_key", pull.tls.as_ref().map(|(_, k)| k.to_string_lossy().into_owned()))?;
    Ok(Some(d))
}

/// `pipetel._init_settings()`: a copy of the arguments `init` succeeded with in this process
/// (`service_name`, `config_file`, then the keyword settings), or `None` before `init`.
#[pyfunction]
fn _init_settings(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    INIT_ARGS.get(py).map(|d| d.bind(py).copy()).transpose()
}

/// What `init` returns: owns pipetel's providers and exporters. `shutdown()` flushes and stops
/// them (also at the end of a `with` block, and at interpreter exit); `flush()` exports what is
/// buffered now. Both release the GIL while they wait.
#[pyclass(module = "pipetel", name = "Guard", frozen)]
pub struct PyGuard {
    telemetry: Mutex<Option<pipetel::Telemetry>>,
    prometheus_addr: Option<String>,
    /// The process `init` ran in: a child forked after `init` inherits the guard but not the
    /// exporter threads, so there `flush` and `shutdown` do nothing (instead of waiting the
    /// shutdown timeout out for threads that do not exist).
    pid: u32,
}

impl PyGuard {
    /// Runs `f` on the telemetry without the GIL (the lock is taken and released without it, so
    /// no thread ever waits for it while holding the GIL).
    fn with_telemetry<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Option<pipetel::Telemetry>) -> R + Send,
    ) -> R {
        py.detach(|| {
            let mut telemetry = self.telemetry.lock().unwrap_or_else(PoisonError::into_inner);
            if std::process::id() != self.pid {
                // Forked child: dropping would flush into exporter threads it does not have.
                std::mem::forget(telemetry.take());
            }
            f(&mut telemetry)
        })
    }
}

#[pymethods]
impl PyGuard {
    /// Flushes and shuts down every provider; returns within the shutdown timeout. A second call
    /// does nothing.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let outcome = self.with_telemetry(py, |t| t.take().map(pipetel::Telemetry::shutdown));
        match outcome {
            Some(Err(e)) => Err(to_py::<ShutdownError>(e)),
            _ => Ok(()),
        }
    }

    /// Exports what every provider buffers now (bounded by the shutdown timeout).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let outcome = self.with_telemetry(py, |t| t.as_ref().map(pipetel::Telemetry::force_flush));
        match outcome {
            Some(Err(e)) => Err(to_py::<ShutdownError>(e)),
            _ => Ok(()),
        }
    }

    /// `"host:port"` of the Prometheus endpoint when it runs, else `None`.
    #[getter]
    fn prometheus_addr(&self) -> Option<String> {
        self.prometheus_addr.clone()
    }

    /// Whether the guard has not been shut down yet.
    #[getter]
    fn active(&self, py: Python<'_>) -> bool {
        self.with_telemetry(py, |t| t.is_some())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Shuts down; a shutdown error is raised only when no exception is already on its way out.
    #[pyo3(signature = (*exc_info))]
    fn __exit__(&self, py: Python<'_>, exc_info: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let result = self.shutdown(py);
        match (result, exiting_exception(exc_info)) {
            (Err(e), None) => Err(e),
            _ => Ok(false),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Guard(active={}, prometheus_addr={:?})",
            if self.active(py) { "True" } else { "False" },
            self.prometheus_addr
        )
    }
}

/// Adds the functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(prometheus_text, m)?)?;
    m.add_function(wrap_pyfunction!(_has_prometheus_text, m)?)?;
    m.add_function(wrap_pyfunction!(_init_settings, m)?)?;
    m.add_function(wrap_pyfunction!(_pull_endpoint_settings, m)?)?;
    m.add_class::<PyGuard>()?;
    Ok(())
}
