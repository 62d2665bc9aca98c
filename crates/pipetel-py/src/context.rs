//! The current span: the `contextvars.ContextVar` that holds it, the `Span` class, and W3C
//! `traceparent` values (`pipetel.current_span()`, `pipetel.traceparent()`).
//!
//! A Python span is an OTel span made directly with the tracer `init` installed (the global
//! tracer provider; a no-op one before `init` or without a trace exporter). The current span is
//! kept in a `contextvars.ContextVar`, so asyncio tasks inherit the span current where they were
//! created; a new thread starts with none (pass `parent=`). A stage's or shard's span is made
//! current through a `Span` that borrows it (`PySpan::borrowed`), so the variable only ever
//! holds `Span` objects.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use pipetel::opentelemetry::propagation::TextMapPropagator as _;
use pipetel::opentelemetry::trace::{SpanRef, Status, TraceContextExt as _};
use pipetel::opentelemetry::{Context, KeyValue};
use pipetel::opentelemetry_sdk::propagation::TraceContextPropagator;
use pipetel::span_metrics::ForeignSpanTimer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::args::arg;
use crate::attributes::{attributes, to_attribute};
use crate::errors::{exiting_exception, guard};

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

/// The variable's `get`, `set` and `reset`, bound once (a span's start, enter and exit each call
/// one, and looking the method up by name costs as much as the call).
static VAR_METHODS: PyOnceLock<[Py<PyAny>; 3]> = PyOnceLock::new();

/// `(get, set, reset)` of the current-span variable.
fn var_methods(py: Python<'_>) -> PyResult<&[Py<PyAny>; 3]> {
    VAR_METHODS.get_or_try_init(py, || -> PyResult<[Py<PyAny>; 3]> {
        let var = current_var(py)?;
        Ok([var.getattr("get")?.unbind(), var.getattr("set")?.unbind(), var.getattr("reset")?.unbind()])
    })
}

/// The current-span variable's value: a [`PySpan`] or `None`.
fn current_value(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    var_methods(py)?[0].bind(py).call0()
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

/// A span in progress, or a stage's or shard's span seen as the current span. A context
/// manager: `with` makes it the current span (the parent of spans started inside, also in asyncio
/// tasks created inside) and ends it on the way out; an exception ends it with status error and
/// an `exception` event, and goes on.
#[pyclass(module = "pipetel.tracing", name = "Span", frozen)]
pub struct PySpan {
    cx: Context,
    name: String,
    /// `false` for a stage's or shard's span: ending belongs to its handle.
    owned: bool,
    ended: AtomicBool,
    /// `ContextVar` tokens of the `with` blocks entered, innermost last.
    tokens: Mutex<Vec<Py<PyAny>>>,
    /// The `span.duration` timing of a span started by `pipetel.span` (see [`SPAN_TARGET`]).
    timer: Mutex<Option<ForeignSpanTimer>>,
}

/// The `span.target` of Python spans in `span.duration` (`PIPETEL_SPAN_METRICS_FILTER=python=off`
/// leaves them out).
pub(crate) const SPAN_TARGET: &str = "python";

impl PySpan {
    /// A stage's or shard's span as the current span (never ended through this object).
    pub(crate) fn borrowed(name: String, cx: Context) -> Self {
        PySpan {
            cx,
            name,
            owned: false,
            ended: AtomicBool::new(false),
            tokens: Mutex::new(Vec::new()),
            timer: Mutex::new(None),
        }
    }

    /// A span started by `pipetel.span` (ended through this object), timed for `span.duration`
    /// as a Rust span is (from now to its end).
    pub(crate) fn owned(name: String, cx: Context) -> Self {
        let timer = ForeignSpanTimer::start(&name, SPAN_TARGET);
        PySpan {
            cx,
            name,
            owned: true,
            ended: AtomicBool::new(false),
            tokens: Mutex::new(Vec::new()),
            timer: Mutex::new(timer),
        }
    }

    /// The context holding this span.
    pub(crate) fn context(&self) -> &Context {
        &self.cx
    }

    pub(crate) fn enter(slf: &Bound<'_, Self>) -> PyResult<()> {
        let token = var_methods(slf.py())?[1].bind(slf.py()).call1((slf,))?;
        slf.get().tokens.lock().unwrap_or_else(PoisonError::into_inner).push(token.unbind());
        Ok(())
    }

    pub(crate) fn leave(&self, py: Python<'_>) -> PyResult<()> {
        let token = self.tokens.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if let Some(token) = token {
            // A token made in another context (left on another thread): the current span there
            // stays as it is, which is all `reset` could do.
            if let Err(e) = var_methods(py)?[2].bind(py).call1((token,)) {
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
        let timer = self.timer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(timer) = timer {
            timer.end(error.is_some(), Some(self.cx.span().span_context()));
        }
        let span = self.cx.span();
        match error {
            Some((kind, message)) => record_exception(&span, &kind, &message),
            None => span.set_status(Status::Ok),
        }
        span.end();
    }
}

/// Marks `span` failed by an exception: an `exception` event with its type and
/// message, and status error.
pub(crate) fn record_exception(span: &SpanRef<'_>, kind: &str, message: &str) {
    let attributes = vec![
        KeyValue::new("exception.type", kind.to_string()),
        KeyValue::new("exception.message", message.to_string()),
    ];
    span.add_event("exception", attributes);
    span.set_status(Status::error(format!("{kind}: {message}")));
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
    fn set_attribute(&self, #[pyo3(from_py_with = arg::key)] key: String, value: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let value = to_attribute(&format!("value (attribute {key:?})"), value)?;
            self.cx.span().set_attribute(KeyValue::new(key, value));
            Ok(())
        })
    }

    /// Adds an event with attributes.
    #[pyo3(signature = (name, /, **attributes))]
    fn add_event(
        &self,
        #[pyo3(from_py_with = arg::name)] name: String,
        attributes: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        guard(|| {
            let mut attrs = Vec::new();
            self::attributes(None, attributes, &mut attrs)?;
            self.cx.span().add_event(name, attrs);
            Ok(())
        })
    }

    /// Ends the span with status error (`reason`), as an exception leaving its `with` does.
    fn fail(&self, #[pyo3(from_py_with = arg::reason)] reason: String) {
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

    #[pyo3(signature = (*exc_info))]
    fn __exit__(&self, py: Python<'_>, exc_info: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.leave(py)?;
        let error = exiting_exception(exc_info).map(|e| describe_exception(&e));
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

/// `pipetel.current_span()`: the current span in this context (thread or asyncio task), or
/// `None`.
#[pyfunction]
fn current_span(py: Python<'_>) -> PyResult<Option<Py<PySpan>>> {
    let current = current_value(py)?;
    Ok(current.cast::<PySpan>().ok().map(|s| s.clone().unbind()))
}

/// `pipetel.traceparent()`: the W3C `traceparent` header value of the current span, or `None`
/// when there is none (or traces are not exported).
#[pyfunction]
fn traceparent(py: Python<'_>) -> PyResult<Option<String>> {
    let current = current_value(py)?;
    Ok(current.cast::<PySpan>().ok().and_then(|s| traceparent_of(&s.get().cx)))
}

/// The current span's context (the parent of spans and stages started now), or an empty one.
pub(crate) fn current_context(py: Python<'_>) -> PyResult<Context> {
    let current = current_value(py)?;
    // The variable holds nothing but `Span` objects (or `None`): see the module docs.
    Ok(current.cast::<PySpan>().map(|s| s.get().cx.clone()).unwrap_or_default())
}

/// Adds the functions and the `Span` class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(current_span, m)?)?;
    m.add_function(wrap_pyfunction!(traceparent, m)?)?;
    m.add_class::<PySpan>()?;
    Ok(())
}
