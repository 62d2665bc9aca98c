//! `init`, its guard, and spans: `pipetel.init(service_name=None, *, config_file=None,
//! **settings) -> Guard`, `pipetel.span(...)`, `pipetel.traceparent()`, `pipetel.current_span()`.
//!
//! # Settings
//! A keyword of `init` is a key of pipetel's configuration file with each `.` written `_`
//! (`prometheus_port=0`, `exporters_metrics=["prometheus"]`), applied with
//! [`pipetel::Config::with_setting`] after the file and the environment, so it beats both, as the
//! Rust builder does. Python values map onto TOML values: `bool`, `int`, `float`, `str`, a list
//! or tuple (array), a dict with string keys (table).
//!
//! # Spans
//! A Python span is an OTel span made directly with the tracer `init` installed (the global
//! tracer provider; a no-op one before `init` or without a trace exporter). The current span is
//! kept in a `contextvars.ContextVar`, so asyncio tasks inherit the span current where they were
//! created; a new thread starts with none (pass `parent=`). `parent=` also takes a W3C
//! `traceparent` string, which is how a trace continues in another process.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use pipetel::config::toml;
use pipetel::opentelemetry::propagation::TextMapPropagator as _;
use pipetel::opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use pipetel::opentelemetry::{global, Array, Context, KeyValue, StringValue, Value};
use pipetel::opentelemetry_sdk::propagation::TraceContextPropagator;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{guard, to_py, AlreadyInitialized, ConfigError, InitError, ShutdownError};

/// Set once `init` succeeded in this process (`init` is once per process, also after shutdown).
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The `ContextVar` holding the current span (a [`PySpan`]) or `None`.
static CURRENT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn current_var(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    CURRENT
        .get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            let var = py.import("contextvars")?.getattr("ContextVar")?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("default", py.None())?;
            Ok(var.call(("pipetel_current_span",), Some(&kwargs))?.unbind())
        })
        .map(|var| var.bind(py))
}

// ----- init and the guard -----

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
    let type_name = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(bad(format!("a {type_name} is not a bool, int, float, str, list or dict")))
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
/// installs pipetel as Rust `pipetel::init` does, and returns the guard.
#[pyfunction]
#[pyo3(signature = (service_name = None, *, config_file = None, **settings))]
fn init(
    py: Python<'_>,
    service_name: Option<String>,
    config_file: Option<PathBuf>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyGuard>> {
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
    // Binding the endpoint and building exporters may block: other Python threads run meanwhile.
    let telemetry = py.detach(|| guard(|| pipetel::init(config).map_err(init_error)))?;
    INITIALIZED.store(true, Ordering::SeqCst);
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
fn is_initialized() -> bool {
    INITIALIZED.load(Ordering::SeqCst)
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
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let result = self.shutdown(py);
        match (result, exc_type) {
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

// ----- spans -----

/// A Python value as an OTel attribute value; `what` names it in errors.
pub(crate) fn to_attribute(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        let i: i64 = value
            .extract()
            .map_err(|_| PyValueError::new_err(format!("{what}: {value} does not fit a 64-bit integer")))?;
        return Ok(Value::I64(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Value::F64(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?.into()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<Value> = value.try_iter()?.map(|v| to_attribute(what, &v?)).collect::<PyResult<_>>()?;
        let same = |f: fn(&Value) -> bool| items.iter().all(f);
        let array = if same(|v| matches!(v, Value::Bool(_))) {
            Array::Bool(items.into_iter().filter_map(|v| if let Value::Bool(b) = v { Some(b) } else { None }).collect())
        } else if same(|v| matches!(v, Value::I64(_))) {
            Array::I64(items.into_iter().filter_map(|v| if let Value::I64(i) = v { Some(i) } else { None }).collect())
        } else if same(|v| matches!(v, Value::F64(_))) {
            Array::F64(items.into_iter().filter_map(|v| if let Value::F64(f) = v { Some(f) } else { None }).collect())
        } else if same(|v| matches!(v, Value::String(_))) {
            Array::String(
                items
                    .into_iter()
                    .filter_map(|v| if let Value::String(s) = v { Some(s) } else { None })
                    .collect::<Vec<StringValue>>(),
            )
        } else {
            return Err(PyTypeError::new_err(format!("{what}: a list attribute holds values of one type")));
        };
        return Ok(Value::Array(array));
    }
    let type_name = value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(PyTypeError::new_err(format!("{what}: a {type_name} is not a bool, int, float, str or a list of one of them")))
}

fn attributes(attrs: Option<&Bound<'_, PyDict>>, out: &mut Vec<KeyValue>) -> PyResult<()> {
    let Some(attrs) = attrs else { return Ok(()) };
    for (k, v) in attrs.iter() {
        let key: String =
            k.extract().map_err(|_| PyTypeError::new_err(format!("attribute names are strings, got {k}")))?;
        let value = to_attribute(&format!("attribute {key:?}"), &v)?;
        out.push(KeyValue::new(key, value));
    }
    Ok(())
}

/// A W3C `traceparent` value as a context with that remote parent.
pub(crate) fn extract_traceparent(what: &str, traceparent: &str) -> PyResult<Context> {
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_string(), traceparent.trim().to_string());
    let cx = TraceContextPropagator::new().extract(&carrier);
    if !cx.span().span_context().is_valid() {
        return Err(PyValueError::new_err(format!(
            "{what}: invalid traceparent {traceparent:?}: expected the W3C form \
             00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"
        )));
    }
    Ok(cx)
}

/// The W3C `traceparent` of the span in `cx`, when it has a valid one.
pub(crate) fn traceparent_of(cx: &Context) -> Option<String> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

/// The parent context `parent=` names: a span, a stage or a shard, a `traceparent` string, or
/// (with `None`) the current span in this context.
pub(crate) fn parent_context(py: Python<'_>, parent: Option<&Bound<'_, PyAny>>) -> PyResult<Context> {
    let parent = match parent {
        Some(p) if !p.is_none() => p.clone(),
        _ => current_var(py)?.call_method0("get")?,
    };
    if parent.is_none() {
        return Ok(Context::new());
    }
    if let Ok(span) = parent.cast::<PySpan>() {
        return Ok(span.get().cx.clone());
    }
    if let Ok(s) = parent.cast::<PyString>() {
        return extract_traceparent("parent", &s.extract::<String>()?);
    }
    if let Some(cx) = crate::pipeline::context_of(&parent) {
        return Ok(cx);
    }
    let type_name = parent.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(PyTypeError::new_err(format!("parent: expected a Span, Stage, Shard or a traceparent str, got a {type_name}")))
}

/// A span in progress, or a stage's or shard's span seen as the current span. A context
/// manager: `with` makes it the current span (the parent of spans started inside, also in asyncio
/// tasks created inside) and ends it on the way out; an exception ends it with status error and
/// an `exception` event, and goes on.
#[pyclass(module = "pipetel", name = "Span", frozen)]
pub struct PySpan {
    cx: Context,
    name: String,
    /// `false` for a stage's or shard's span: ending belongs to its handle.
    owned: bool,
    ended: AtomicBool,
    /// `ContextVar` tokens of the `with` blocks entered, innermost last.
    tokens: Mutex<Vec<Py<PyAny>>>,
}

impl PySpan {
    /// A stage's or shard's span as the current span (never ended through this object).
    pub(crate) fn borrowed(name: String, cx: Context) -> Self {
        PySpan { cx, name, owned: false, ended: AtomicBool::new(false), tokens: Mutex::new(Vec::new()) }
    }

    pub(crate) fn enter(slf: &Bound<'_, Self>) -> PyResult<()> {
        let token = current_var(slf.py())?.call_method1("set", (slf,))?;
        slf.get().tokens.lock().unwrap_or_else(PoisonError::into_inner).push(token.unbind());
        Ok(())
    }

    pub(crate) fn leave(&self, py: Python<'_>) -> PyResult<()> {
        let token = self.tokens.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if let Some(token) = token {
            // A token made in another context (left on another thread): the current span there
            // stays as it is, which is all `reset` could do.
            if let Err(e) = current_var(py)?.call_method1("reset", (token,)) {
                if !e.is_instance_of::<PyValueError>(py) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn finish(&self, error: Option<(String, String)>) {
        if !self.owned || self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let span = self.cx.span();
        match error {
            Some((kind, message)) => {
                span.add_event(
                    "exception",
                    vec![
                        KeyValue::new("exception.type", kind.clone()),
                        KeyValue::new("exception.message", message.clone()),
                    ],
                );
                span.set_status(Status::error(format!("{kind}: {message}")));
            }
            None => span.set_status(Status::Ok),
        }
        span.end();
    }
}

/// `type(exc).__qualname__` (with its module unless builtin) and `str(exc)`.
pub(crate) fn describe_exception(exc: &Bound<'_, PyAny>) -> (String, String) {
    let ty = exc.get_type();
    let name = ty.qualname().map(|n| n.to_string()).unwrap_or_else(|_| "Exception".into());
    let kind = match ty.module().map(|m| m.to_string()) {
        Ok(module) if module != "builtins" => format!("{module}.{name}"),
        _ => name,
    };
    let message = exc.str().map(|s| s.to_string()).unwrap_or_default();
    (kind, message)
}

#[pymethods]
impl PySpan {
    /// The span name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The W3C `traceparent` of this span (`None` when traces are not exported and no remote
    /// parent was given).
    #[getter]
    fn traceparent(&self) -> Option<String> {
        traceparent_of(&self.cx)
    }

    /// The trace id, 32 hex digits.
    #[getter]
    fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }

    /// The span id, 16 hex digits.
    #[getter]
    fn span_id(&self) -> String {
        self.cx.span().span_context().span_id().to_string()
    }

    /// Whether the span is recorded (sampled and a trace exporter configured).
    #[getter]
    fn is_recording(&self) -> bool {
        self.cx.span().is_recording()
    }

    /// Sets one attribute (a bool, int, float, str or a list of one of them).
    fn set_attribute(&self, key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let value = to_attribute(&format!("attribute {key:?}"), value)?;
            self.cx.span().set_attribute(KeyValue::new(key.to_owned(), value));
            Ok(())
        })
    }

    /// Adds an event with attributes.
    #[pyo3(signature = (name, /, **attributes))]
    fn add_event(&self, name: String, attributes: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        guard(|| {
            let mut attrs = Vec::new();
            self::attributes(attributes, &mut attrs)?;
            self.cx.span().add_event(name, attrs);
            Ok(())
        })
    }

    /// Ends the span with status error (`reason`), as an exception leaving its `with` does.
    fn fail(&self, reason: String) {
        let _ = guard(|| {
            self.finish(Some(("error".into(), reason)));
            Ok(())
        });
    }

    /// Ends the span (status OK). Ending twice does nothing.
    fn end(&self) {
        let _ = guard(|| {
            self.finish(None);
            Ok(())
        });
    }

    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        PySpan::enter(slf)?;
        Ok(slf.clone().unbind())
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.leave(py)?;
        let error = exc.filter(|e| !e.is_none()).map(describe_exception);
        guard(|| {
            self.finish(error);
            Ok(false)
        })
    }

    fn __repr__(&self) -> String {
        let sc = self.cx.span().span_context().clone();
        format!("Span(name={:?}, trace_id={}, span_id={})", self.name, sc.trace_id(), sc.span_id())
    }
}

/// `pipetel.span(name, parent=None, attributes=None, **attrs)`: starts a span now (a child of
/// `parent`, else of the current span); use it as `with pipetel.span(...) as s:`.
#[pyfunction]
#[pyo3(signature = (name, /, parent = None, attributes = None, **attrs))]
fn span(
    py: Python<'_>,
    name: String,
    parent: Option<&Bound<'_, PyAny>>,
    attributes: Option<&Bound<'_, PyDict>>,
    attrs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PySpan> {
    let parent_cx = parent_context(py, parent)?;
    let mut kvs = Vec::new();
    self::attributes(attributes, &mut kvs)?;
    self::attributes(attrs, &mut kvs)?;
    guard(|| {
        let tracer = global::tracer(pipetel::SCOPE_NAME);
        let span = tracer
            .span_builder(name.clone())
            .with_kind(SpanKind::Internal)
            .with_attributes(kvs)
            .start_with_context(&tracer, &parent_cx);
        Ok(PySpan {
            cx: parent_cx.with_span(span),
            name,
            owned: true,
            ended: AtomicBool::new(false),
            tokens: Mutex::new(Vec::new()),
        })
    })
}

/// `pipetel.current_span()`: the current span in this context (thread or asyncio task), or
/// `None`.
#[pyfunction]
fn current_span(py: Python<'_>) -> PyResult<Option<Py<PySpan>>> {
    let current = current_var(py)?.call_method0("get")?;
    Ok(current.cast::<PySpan>().ok().map(|s| s.clone().unbind()))
}

/// `pipetel.traceparent()`: the W3C `traceparent` header value of the current span, or `None`
/// when there is none (or traces are not exported).
#[pyfunction]
fn traceparent(py: Python<'_>) -> PyResult<Option<String>> {
    let current = current_var(py)?.call_method0("get")?;
    Ok(current.cast::<PySpan>().ok().and_then(|s| traceparent_of(&s.get().cx)))
}

/// The current span's context (for stages started inside it), or an empty one.
pub(crate) fn current_context(py: Python<'_>) -> PyResult<Context> {
    parent_context(py, None)
}

/// Adds the functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(span, m)?)?;
    m.add_function(wrap_pyfunction!(current_span, m)?)?;
    m.add_function(wrap_pyfunction!(traceparent, m)?)?;
    m.add_class::<PyGuard>()?;
    m.add_class::<PySpan>()?;
    Ok(())
}
