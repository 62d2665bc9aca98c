//! `pipetel.span(name, parent=None, attributes=None, **attrs)`: a span started now, and what
//! `parent=` names (a `Span`, a `Stage`, a `Shard` or a W3C `traceparent` string, which is how a
//! trace continues in another process).

use pipetel::opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _};
use std::sync::OnceLock;

use pipetel::opentelemetry::global::BoxedTracer;
use pipetel::opentelemetry::{global, Context};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::args::{arg, type_name};
use crate::attributes::attributes;
use crate::context::{current_context, extract_traceparent, PySpan};
use crate::errors::guard;
use crate::pipeline::context_of;

/// The parent context `parent=` names: a span, a stage or a shard, a `traceparent` string, or
/// (with `None`) the current span in this context.
fn parent_context(py: Python<'_>, parent: Option<&Bound<'_, PyAny>>) -> PyResult<Context> {
    let Some(parent) = parent.filter(|p| !p.is_none()) else { return current_context(py) };
    if let Ok(span) = parent.cast::<PySpan>() {
        return Ok(span.get().context().clone());
    }
    if let Ok(s) = parent.cast::<PyString>() {
        return extract_traceparent("parent", &s.extract::<String>()?);
    }
    if let Some(cx) = context_of(parent) {
        return Ok(cx);
    }
    Err(PyTypeError::new_err(format!(
        "parent: expected a Span, Stage, Shard or a traceparent str, got a {}",
        type_name(parent)
    )))
}

/// `pipetel.span(name, parent=None, attributes=None, **attrs)`: starts a span now (a child of
/// `parent`, else of the current span); use it as `with pipetel.span(...) as s:`.
#[pyfunction]
#[pyo3(signature = (name, /, parent = None, attributes = None, **attrs))]
fn span(
    py: Python<'_>,
    #[pyo3(from_py_with = arg::name)] name: String,
    parent: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = arg::attributes)] attributes: Option<Bound<'_, PyDict>>,
    attrs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PySpan> {
    let parent_cx = parent_context(py, parent)?;
    let mut kvs = Vec::new();
    self::attributes(Some("attributes"), attributes.as_ref(), &mut kvs)?;
    self::attributes(None, attrs, &mut kvs)?;
    guard(|| {
        let start = |tracer: &BoxedTracer| {
            tracer
                .span_builder(name.clone())
                .with_kind(SpanKind::Internal)
                .with_attributes(kvs)
                .start_with_context(tracer, &parent_cx)
        };
        let span = match TRACER.get() {
            Some(tracer) => start(tracer),
            // Before `init` the global tracer may still change: taken anew for each span.
            None if !crate::init::is_initialized() => start(&global::tracer(pipetel::SCOPE_NAME)),
            None => start(TRACER.get_or_init(|| global::tracer(pipetel::SCOPE_NAME))),
        };
        Ok(PySpan::owned(name, parent_cx.with_span(span)))
    })
}

/// The tracer `init` installed, taken at the first span after it (`init` is once per process).
static TRACER: OnceLock<BoxedTracer> = OnceLock::new();

/// Adds `span` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(span, m)?)?;
    Ok(())
}
