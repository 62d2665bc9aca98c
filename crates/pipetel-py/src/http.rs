//! The native half of `pipetel.asgi.Middleware` and `pipetel.wsgi.Middleware`: per request, a
//! server span continuing the caller's W3C trace context and the HTTP server metrics of Rust's
//! `pipetel::http` layer, recorded through its own instruments
//! ([`pipetel::http::ServerInstruments`]), so names, units, buckets and scope are the same.
//!
//! `_HttpServer()` takes the global tracer and meter as they are when it is made (the Python
//! middleware makes it at the first request, so after `init`). `server.start(...)` counts the
//! request active and starts its span; the returned `_HttpRequest`'s `span` is a `Span` the
//! middleware makes current while the application runs; `request.finish(...)` names the span
//! after the route, sets the status, ends it and records the duration and body sizes. Values that
//! come from the network (a bad `traceparent`, an unknown method) never raise: a bad
//! `traceparent` starts a new trace, an unknown method is recorded as `_OTHER` (with the method
//! as sent in the span's `http.request.method_original`), so a client cannot grow the series.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pipetel::http::ServerInstruments;
use pipetel::opentelemetry::global::{self, BoxedTracer};
use pipetel::opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use pipetel::opentelemetry::{Context, KeyValue};
use pyo3::prelude::*;

use crate::context::{record_exception, PySpan};
use crate::errors::guard;

/// The methods the conventions know; any other is `_OTHER`.
const KNOWN_METHODS: [&str; 9] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE"];

/// The tracer and instruments of one middleware.
#[pyclass(module = "pipetel", name = "_HttpServer", frozen)]
pub struct PyHttpServer {
    tracer: BoxedTracer,
    instruments: ServerInstruments,
}

/// One request being served (see the module docs).
#[pyclass(module = "pipetel", name = "_HttpRequest", frozen)]
pub struct PyHttpRequest {
    instruments: ServerInstruments,
    started: Instant,
    method: &'static str,
    scheme: &'static str,
    version: String,
    request_size: Option<u64>,
    span: Py<PySpan>,
    finished: AtomicBool,
}

fn static_scheme(scheme: &str) -> &'static str {
    match scheme {
        "https" | "wss" => "https",
        _ => "http",
    }
}

/// The parent context a request's W3C headers name (none, or an invalid one: a new trace).
fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let Some(traceparent) = traceparent else { return Context::new() };
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), traceparent.trim().to_string());
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
    global::get_text_map_propagator(|p| p.extract(&carrier))
}

#[pymethods]
impl PyHttpServer {
    #[new]
    fn new() -> PyResult<Self> {
        guard(|| {
            Ok(PyHttpServer { tracer: global::tracer(pipetel::SCOPE_NAME), instruments: ServerInstruments::new() })
        })
    }

    /// Counts a request active and starts its server span.
    #[pyo3(signature = (method, path, scheme, version, traceparent=None, tracestate=None, user_agent=None, request_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        scheme: &str,
        version: &str,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
        user_agent: Option<&str>,
        request_size: Option<u64>,
    ) -> PyResult<PyHttpRequest> {
        let started = Instant::now();
        let known = KNOWN_METHODS.iter().find(|m| **m == method).copied();
        let method_kv = known.unwrap_or("_OTHER");
        let scheme = static_scheme(scheme);
        let span = guard(|| {
            let parent = extract(traceparent, tracestate);
            let mut attributes = Vec::with_capacity(6);
            attributes.push(KeyValue::new("http.request.method", method_kv));
            if known.is_none() {
                attributes.push(KeyValue::new("http.request.method_original", method.to_owned()));
            }
            attributes.push(KeyValue::new("url.scheme", scheme));
            attributes.push(KeyValue::new("url.path", path.to_owned()));
            if let Some(agent) = user_agent {
                attributes.push(KeyValue::new("user_agent.original", agent.to_owned()));
            }
            let name = if known.is_some() { method_kv } else { "HTTP" };
            let span = self
                .tracer
                .span_builder(name)
                .with_kind(SpanKind::Server)
                .with_attributes(attributes)
                .start_with_context(&self.tracer, &parent);
            self.instruments
                .started(&[KeyValue::new("url.scheme", scheme), KeyValue::new("http.request.method", method_kv)]);
            Ok(PySpan::borrowed(name.to_owned(), parent.with_span(span)))
        })?;
        Ok(PyHttpRequest {
            instruments: self.instruments.clone(),
            started,
            method: method_kv,
            scheme,
            version: version.to_owned(),
            request_size,
            span: Py::new(py, span)?,
            finished: AtomicBool::new(false),
        })
    }
}

#[pymethods]
impl PyHttpRequest {
    /// The request's server span (make it current while the application runs).
    #[getter]
    fn span(&self, py: Python<'_>) -> Py<PySpan> {
        self.span.clone_ref(py)
    }

    /// Ends the request: `status` the response status (`None`: no response was started),
    /// `route` the matched route template, `response_size` the body bytes sent, `error` the
    /// exception that left the application. A second call does nothing.
    #[pyo3(signature = (status=None, route=None, response_size=None, error=None))]
    fn finish(
        &self,
        py: Python<'_>,
        status: Option<u16>,
        route: Option<&str>,
        response_size: Option<u64>,
        error: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if self.finished.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let seconds = self.started.elapsed().as_secs_f64();
        let error = error.filter(|e| !e.is_none()).map(crate::context::describe_exception);
        let span = self.span.bind(py).get();
        guard(|| {
            let cx = span.context();
            let otel_span = cx.span();
            let mut attributes = Vec::with_capacity(6);
            attributes.push(KeyValue::new("network.protocol.name", "http"));
            attributes.push(KeyValue::new("network.protocol.version", self.version.clone()));
            attributes.push(KeyValue::new("url.scheme", self.scheme));
            attributes.push(KeyValue::new("http.request.method", self.method));
            if let Some(status) = status {
                let kv = KeyValue::new("http.response.status_code", i64::from(status));
                otel_span.set_attribute(kv.clone());
                attributes.push(kv);
            }
            if let Some(route) = route {
                let kv = KeyValue::new("http.route", route.to_owned());
                otel_span.set_attribute(kv.clone());
                attributes.push(kv);
                otel_span
                    .update_name(format!("{} {route}", if self.method == "_OTHER" { "HTTP" } else { self.method }));
            }
            match (&error, status) {
                (Some((kind, message)), _) => record_exception(&otel_span, kind, message),
                (None, Some(code)) if code >= 500 => otel_span.set_status(Status::error(format!("HTTP {code}"))),
                _ => {}
            }
            otel_span.end();
            let active = [KeyValue::new("url.scheme", self.scheme), KeyValue::new("http.request.method", self.method)];
            // Without a response (the application raised first) the duration has no status code
            // and no body sizes, as the Rust layer records a failed request.
            let (request_size, response_size) =
                if status.is_some() { (self.request_size, response_size) } else { (None, None) };
            self.instruments.finished(&active, &attributes, seconds, request_size, response_size);
            Ok(())
        })
    }
}

/// Adds the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHttpServer>()?;
    m.add_class::<PyHttpRequest>()?;
    Ok(())
}
