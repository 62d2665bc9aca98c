//! Rust telemetry as the OpenTelemetry Python SDK's own objects: `SpanData` as
//! `opentelemetry.sdk.trace.ReadableSpan`, an `SdkLogRecord` as
//! `opentelemetry.sdk._logs.ReadableLogRecord` (holding an `opentelemetry._logs.LogRecord`), and
//! `ResourceMetrics` as `opentelemetry.sdk.metrics.export.MetricsData`, so a Python exporter gets
//! what the Python SDK's own processors and readers hand it.
//!
//! The classes are imported once, when `init` is given an exporter of the signal (so a missing
//! or too old SDK is an error of `init`, not of every export), and built by keyword.

use std::time::{SystemTime, UNIX_EPOCH};

use pipetel::opentelemetry::logs::AnyValue;
use pipetel::opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status};
use pipetel::opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use pipetel::opentelemetry_sdk::logs::SdkLogRecord;
use pipetel::opentelemetry_sdk::metrics::data::{
    AggregatedMetrics, Exemplar, ExponentialBucket, MetricData, ResourceMetrics,
};
use pipetel::opentelemetry_sdk::metrics::Temporality;
use pipetel::opentelemetry_sdk::trace::SpanData;
use pipetel::opentelemetry_sdk::Resource;
use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt as _;

/// `module.attr`, or an `ImportError` saying which argument needs it.
fn import(py: Python<'_>, argument: &str, module: &str, attr: &str) -> PyResult<Py<PyAny>> {
    py.import(module).and_then(|m| m.getattr(attr)).map(Bound::unbind).map_err(|e| {
        PyImportError::new_err(format!(
            "{argument} needs the OpenTelemetry Python SDK (`pip install opentelemetry-sdk`): \
             {module}.{attr} cannot be imported: {e}"
        ))
    })
}

/// A struct of Python classes (or other module attributes) imported at once, by table.
macro_rules! classes {
    ($(#[$doc:meta])* $name:ident { $($field:ident: ($module:literal, $attr:literal),)* }) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(super) struct $name {
            $($field: Py<PyAny>,)*
        }

        impl $name {
            /// Imports the table; `argument` names the `init` argument in the error.
            pub(super) fn import(py: Python<'_>, argument: &str) -> PyResult<Self> {
                Ok($name { $($field: import(py, argument, $module, $attr)?,)* })
            }
        }
    };
}

classes! {
    /// What a span is built from.
    SpanClasses {
        resource: ("opentelemetry.sdk.resources", "Resource"),
        scope: ("opentelemetry.sdk.util.instrumentation", "InstrumentationScope"),
        readable_span: ("opentelemetry.sdk.trace", "ReadableSpan"),
        event: ("opentelemetry.sdk.trace", "Event"),
        span_context: ("opentelemetry.trace", "SpanContext"),
        trace_flags: ("opentelemetry.trace", "TraceFlags"),
        trace_state: ("opentelemetry.trace", "TraceState"),
        link: ("opentelemetry.trace", "Link"),
        span_kind: ("opentelemetry.trace", "SpanKind"),
        status: ("opentelemetry.trace", "Status"),
        status_code: ("opentelemetry.trace", "StatusCode"),
    }
}

classes! {
    /// What a log record is built from.
    LogClasses {
        resource: ("opentelemetry.sdk.resources", "Resource"),
        scope: ("opentelemetry.sdk.util.instrumentation", "InstrumentationScope"),
        readable: ("opentelemetry.sdk._logs", "ReadableLogRecord"),
        log_record: ("opentelemetry._logs", "LogRecord"),
        severity: ("opentelemetry._logs", "SeverityNumber"),
        span_context: ("opentelemetry.trace", "SpanContext"),
        trace_flags: ("opentelemetry.trace", "TraceFlags"),
        non_recording_span: ("opentelemetry.trace", "NonRecordingSpan"),
        invalid_span: ("opentelemetry.trace", "INVALID_SPAN"),
        set_span_in_context: ("opentelemetry.trace", "set_span_in_context"),
        context: ("opentelemetry.context", "Context"),
    }
}

classes! {
    /// What a metrics collection is built from.
    MetricClasses {
        resource: ("opentelemetry.sdk.resources", "Resource"),
        scope: ("opentelemetry.sdk.util.instrumentation", "InstrumentationScope"),
        metrics_data: ("opentelemetry.sdk.metrics.export", "MetricsData"),
        resource_metrics: ("opentelemetry.sdk.metrics.export", "ResourceMetrics"),
        scope_metrics: ("opentelemetry.sdk.metrics.export", "ScopeMetrics"),
        metric: ("opentelemetry.sdk.metrics.export", "Metric"),
        sum: ("opentelemetry.sdk.metrics.export", "Sum"),
        gauge: ("opentelemetry.sdk.metrics.export", "Gauge"),
        histogram: ("opentelemetry.sdk.metrics.export", "Histogram"),
        exponential_histogram: ("opentelemetry.sdk.metrics.export", "ExponentialHistogram"),
        number_point: ("opentelemetry.sdk.metrics.export", "NumberDataPoint"),
        histogram_point: ("opentelemetry.sdk.metrics.export", "HistogramDataPoint"),
        exponential_point: ("opentelemetry.sdk.metrics.export", "ExponentialHistogramDataPoint"),
        buckets: ("opentelemetry.sdk.metrics.export", "Buckets"),
        temporality: ("opentelemetry.sdk.metrics.export", "AggregationTemporality"),
        exemplar: ("opentelemetry.sdk.metrics", "Exemplar"),
    }
}

/// Keyword arguments from `name => value` pairs.
macro_rules! kwargs {
    ($py:expr, $($key:literal => $value:expr),* $(,)?) => {{
        let kw = PyDict::new($py);
        $(kw.set_item($key, $value)?;)*
        kw
    }};
}

/// Nanoseconds since the Unix epoch (0 for a time before it).
fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// An attribute value as the Python SDK holds it (a sequence as a tuple).
fn value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::I64(i) => i.into_bound_py_any(py),
        Value::F64(f) => f.into_bound_py_any(py),
        Value::String(s) => s.as_str().into_bound_py_any(py),
        Value::Array(Array::Bool(a)) => PyTuple::new(py, a).map(Bound::into_any),
        Value::Array(Array::I64(a)) => PyTuple::new(py, a).map(Bound::into_any),
        Value::Array(Array::F64(a)) => PyTuple::new(py, a).map(Bound::into_any),
        Value::Array(Array::String(a)) => PyTuple::new(py, a.iter().map(|s| s.as_str())).map(Bound::into_any),
        // A kind newer than this code: its text rather than nothing.
        other => other.to_string().into_bound_py_any(py),
    }
}

/// Key-values as a dict of attributes.
fn attributes<'a, 'py>(py: Python<'py>, kvs: impl IntoIterator<Item = &'a KeyValue>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for kv in kvs {
        d.set_item(kv.key.as_str(), value(py, &kv.value)?)?;
    }
    Ok(d)
}

/// A log body or attribute value (any value: bytes, lists and maps included).
fn any_value<'py>(py: Python<'py>, v: &AnyValue) -> PyResult<Bound<'py, PyAny>> {
    match v {
        AnyValue::Int(i) => i.into_bound_py_any(py),
        AnyValue::Double(f) => f.into_bound_py_any(py),
        AnyValue::String(s) => s.as_str().into_bound_py_any(py),
        AnyValue::Boolean(b) => b.into_bound_py_any(py),
        AnyValue::Bytes(b) => Ok(PyBytes::new(py, b).into_any()),
        AnyValue::ListAny(items) => {
            let items: PyResult<Vec<_>> = items.iter().map(|i| any_value(py, i)).collect();
            PyList::new(py, items?).map(Bound::into_any)
        }
        AnyValue::Map(map) => {
            let d = PyDict::new(py);
            for (k, v) in map.iter() {
                d.set_item(k.as_str(), any_value(py, v)?)?;
            }
            Ok(d.into_any())
        }
        other => format!("{other:?}").into_bound_py_any(py),
    }
}

/// `Resource(attributes, schema_url)`, exactly the provider's (no detector runs again).
fn resource<'py>(py: Python<'py>, class: &Py<PyAny>, r: &Resource) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    for (k, v) in r.iter() {
        d.set_item(k.as_str(), value(py, v)?)?;
    }
    class.bind(py).call1((d, r.schema_url()))
}

/// `InstrumentationScope(name, version, schema_url, attributes)`.
fn scope<'py>(py: Python<'py>, class: &Py<PyAny>, s: &InstrumentationScope) -> PyResult<Bound<'py, PyAny>> {
    class.bind(py).call1((s.name(), s.version(), s.schema_url(), attributes(py, s.attributes())?))
}

/// What a batch's items share: the Python interpreter, the classes, the resource, and the
/// scopes converted so far (each once per batch).
pub(super) struct Batch<'a, 'py, C> {
    py: Python<'py>,
    classes: &'a C,
    resource: Bound<'py, PyAny>,
    scopes: Vec<(InstrumentationScope, Bound<'py, PyAny>)>,
}

impl<'a, 'py, C> Batch<'a, 'py, C> {
    fn scope(&mut self, class: &Py<PyAny>, s: &InstrumentationScope) -> PyResult<Bound<'py, PyAny>> {
        if let Some((_, done)) = self.scopes.iter().find(|(seen, _)| seen == s) {
            return Ok(done.clone());
        }
        let done = scope(self.py, class, s)?;
        self.scopes.push((s.clone(), done.clone()));
        Ok(done)
    }
}

impl<'a, 'py> Batch<'a, 'py, SpanClasses> {
    pub(super) fn spans(py: Python<'py>, classes: &'a SpanClasses, r: &Resource) -> PyResult<Self> {
        Ok(Batch { py, classes, resource: resource(py, &classes.resource, r)?, scopes: Vec::new() })
    }

    fn span_context(&self, ctx: &SpanContext, span_id: SpanId, is_remote: bool) -> PyResult<Bound<'py, PyAny>> {
        let (py, c) = (self.py, self.classes);
        let kw = kwargs!(py,
            "trace_id" => u128::from_be_bytes(ctx.trace_id().to_bytes()),
            "span_id" => u64::from_be_bytes(span_id.to_bytes()),
            "is_remote" => is_remote,
            "trace_flags" => c.trace_flags.bind(py).call1((ctx.trace_flags().to_u8(),))?,
        );
        let header = ctx.trace_state().header();
        if !header.is_empty() {
            kw.set_item("trace_state", c.trace_state.bind(py).call_method1("from_header", (vec![header],))?)?;
        }
        c.span_context.bind(py).call((), Some(&kw))
    }

    /// One `ReadableSpan`: name, context, parent, kind, times, attributes, events, links,
    /// status, resource and scope.
    pub(super) fn span(&mut self, s: &SpanData) -> PyResult<Bound<'py, PyAny>> {
        let (py, c) = (self.py, self.classes);
        let ctx = &s.span_context;
        let context = self.span_context(ctx, ctx.span_id(), ctx.is_remote())?;
        let parent = if s.parent_span_id == SpanId::INVALID {
            None
        } else {
            Some(self.span_context(ctx, s.parent_span_id, s.parent_span_is_remote)?)
        };
        let kind = c.span_kind.bind(py).getattr(match s.span_kind {
            SpanKind::Client => "CLIENT",
            SpanKind::Server => "SERVER",
            SpanKind::Producer => "PRODUCER",
            SpanKind::Consumer => "CONSUMER",
            SpanKind::Internal => "INTERNAL",
        })?;
        let mut events = Vec::with_capacity(s.events.events.len());
        for e in &s.events.events {
            events.push(c.event.bind(py).call1((e.name.as_ref(), attributes(py, &e.attributes)?, ns(e.timestamp)))?);
        }
        let mut links = Vec::with_capacity(s.links.links.len());
        for l in &s.links.links {
            let lc = &l.span_context;
            let linked = self.span_context(lc, lc.span_id(), lc.is_remote())?;
            links.push(c.link.bind(py).call1((linked, attributes(py, &l.attributes)?))?);
        }
        let code = c.status_code.bind(py);
        let status = match &s.status {
            Status::Unset => c.status.bind(py).call1((code.getattr("UNSET")?,))?,
            Status::Ok => c.status.bind(py).call1((code.getattr("OK")?,))?,
            Status::Error { description } => c.status.bind(py).call1((code.getattr("ERROR")?, description.as_ref()))?,
        };
        let scope = self.scope(&c.scope, &s.instrumentation_scope)?;
        let kw = kwargs!(py,
            "name" => s.name.as_ref(),
            "context" => context,
            "parent" => parent,
            "resource" => &self.resource,
            "attributes" => attributes(py, &s.attributes)?,
            "events" => PyTuple::new(py, events)?,
            "links" => PyTuple::new(py, links)?,
            "kind" => kind,
            "status" => status,
            "start_time" => ns(s.start_time),
            "end_time" => ns(s.end_time),
            "instrumentation_scope" => scope,
        );
        c.readable_span.bind(py).call((), Some(&kw))
    }
}

impl<'a, 'py> Batch<'a, 'py, LogClasses> {
    pub(super) fn logs(py: Python<'py>, classes: &'a LogClasses, r: &Resource) -> PyResult<Self> {
        Ok(Batch { py, classes, resource: resource(py, &classes.resource, r)?, scopes: Vec::new() })
    }

    /// One `ReadableLogRecord` holding the API `LogRecord` (times, severity, body, attributes,
    /// event name, and the trace and span ids through its context), with resource and scope.
    pub(super) fn log(&mut self, record: &SdkLogRecord, s: &InstrumentationScope) -> PyResult<Bound<'py, PyAny>> {
        let (py, c) = (self.py, self.classes);
        // The ids reach the Python record through its context, as the SDK's own records get them.
        let span = match record.trace_context() {
            Some(tc) => {
                let flags = tc.trace_flags.map_or(0, |f| f.to_u8());
                let kw = kwargs!(py,
                    "trace_id" => u128::from_be_bytes(tc.trace_id.to_bytes()),
                    "span_id" => u64::from_be_bytes(tc.span_id.to_bytes()),
                    "is_remote" => false,
                    "trace_flags" => c.trace_flags.bind(py).call1((flags,))?,
                );
                c.non_recording_span.bind(py).call1((c.span_context.bind(py).call((), Some(&kw))?,))?
            }
            None => c.invalid_span.bind(py).clone(),
        };
        let context = c.set_span_in_context.bind(py).call1((span, c.context.bind(py).call0()?))?;
        let severity = record.severity_number().map(|n| c.severity.bind(py).call1((n as i32,))).transpose()?;
        let attrs = PyDict::new(py);
        for (k, v) in record.attributes_iter() {
            attrs.set_item(k.as_str(), any_value(py, v)?)?;
        }
        let body = record.body().map(|b| any_value(py, b)).transpose()?;
        let kw = kwargs!(py,
            "timestamp" => record.timestamp().map(ns),
            "observed_timestamp" => record.observed_timestamp().or(record.timestamp()).map(ns),
            "context" => context,
            "severity_text" => record.severity_text(),
            "severity_number" => severity,
            "body" => body,
            "attributes" => attrs,
            "event_name" => record.event_name(),
        );
        let api_record = c.log_record.bind(py).call((), Some(&kw))?;
        let scope = self.scope(&c.scope, s)?;
        let kw = kwargs!(py,
            "log_record" => api_record,
            "resource" => &self.resource,
            "instrumentation_scope" => scope,
        );
        c.readable.bind(py).call((), Some(&kw))
    }
}

impl<'a, 'py> Batch<'a, 'py, MetricClasses> {
    /// The whole collection as `MetricsData` (one `ResourceMetrics`, a `ScopeMetrics` per
    /// scope, a `Metric` per instrument with `Sum`, `Gauge`, `Histogram` or
    /// `ExponentialHistogram` data).
    pub(super) fn metrics(
        py: Python<'py>,
        classes: &'a MetricClasses,
        rm: &ResourceMetrics,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut batch =
            Batch { py, classes, resource: resource(py, &classes.resource, rm.resource())?, scopes: Vec::new() };
        let c = classes;
        let mut scope_metrics = Vec::new();
        for sm in rm.scope_metrics() {
            let mut metrics = Vec::new();
            for m in sm.metrics() {
                let data = match m.data() {
                    AggregatedMetrics::F64(d) => batch.data(d)?,
                    AggregatedMetrics::U64(d) => batch.data(d)?,
                    AggregatedMetrics::I64(d) => batch.data(d)?,
                };
                let kw = kwargs!(py, "name" => m.name(), "description" => m.description(), "unit" => m.unit(), "data" => data);
                metrics.push(c.metric.bind(py).call((), Some(&kw))?);
            }
            let scope = batch.scope(&c.scope, sm.scope())?;
            let kw = kwargs!(py,
                "scope" => scope,
                "metrics" => metrics,
                "schema_url" => sm.scope().schema_url().unwrap_or(""),
            );
            scope_metrics.push(c.scope_metrics.bind(py).call((), Some(&kw))?);
        }
        let kw = kwargs!(py,
            "resource" => &batch.resource,
            "scope_metrics" => scope_metrics,
            "schema_url" => rm.resource().schema_url().unwrap_or(""),
        );
        let resource_metrics = c.resource_metrics.bind(py).call((), Some(&kw))?;
        c.metrics_data.bind(py).call((), Some(&kwargs!(py, "resource_metrics" => vec![resource_metrics])))
    }

    fn temporality(&self, t: Temporality) -> PyResult<Bound<'py, PyAny>> {
        let name = if t == Temporality::Delta { "DELTA" } else { "CUMULATIVE" };
        self.classes.temporality.bind(self.py).getattr(name)
    }

    fn exemplars<T>(&self, exemplars: impl Iterator<Item = &'a Exemplar<T>>) -> PyResult<Vec<Bound<'py, PyAny>>>
    where
        T: Copy + IntoPyObject<'py> + 'a,
    {
        let py = self.py;
        exemplars
            .map(|e| {
                let (trace, span) = (u128::from_be_bytes(*e.trace_id()), u64::from_be_bytes(*e.span_id()));
                let kw = kwargs!(py,
                    "filtered_attributes" => attributes(py, e.filtered_attributes())?,
                    "value" => e.value,
                    "time_unix_nano" => ns(e.time()),
                    "span_id" => (span != 0).then_some(span),
                    "trace_id" => (trace != 0).then_some(trace),
                );
                self.classes.exemplar.bind(py).call((), Some(&kw))
            })
            .collect()
    }

    fn data<T>(&self, d: &'a MetricData<T>) -> PyResult<Bound<'py, PyAny>>
    where
        T: Copy + IntoPyObject<'py> + 'a,
    {
        let (py, c) = (self.py, self.classes);
        let number =
            |attrs: Bound<'py, PyDict>, start: Option<u64>, time: u64, value: T, ex: Vec<Bound<'py, PyAny>>| {
                let kw = kwargs!(py,
                    "attributes" => attrs,
                    "start_time_unix_nano" => start,
                    "time_unix_nano" => time,
                    "value" => value,
                    "exemplars" => ex,
                );
                c.number_point.bind(py).call((), Some(&kw))
            };
        // An absent min or max is what the Python SDK's histogram reports without them.
        let min_max = |v: Option<T>, default: f64| -> PyResult<Bound<'py, PyAny>> {
            match v {
                Some(v) => v.into_bound_py_any(py),
                None => default.into_bound_py_any(py),
            }
        };
        match d {
            MetricData::Gauge(g) => {
                let (start, time) = (g.start_time().map(ns), ns(g.time()));
                let mut points = Vec::new();
                for p in g.data_points() {
                    points.push(number(
                        attributes(py, p.attributes())?,
                        start,
                        time,
                        p.value(),
                        self.exemplars(p.exemplars())?,
                    )?);
                }
                c.gauge.bind(py).call((), Some(&kwargs!(py, "data_points" => points)))
            }
            MetricData::Sum(s) => {
                let (start, time) = (Some(ns(s.start_time())), ns(s.time()));
                let mut points = Vec::new();
                for p in s.data_points() {
                    points.push(number(
                        attributes(py, p.attributes())?,
                        start,
                        time,
                        p.value(),
                        self.exemplars(p.exemplars())?,
                    )?);
                }
                let kw = kwargs!(py,
                    "data_points" => points,
                    "aggregation_temporality" => self.temporality(s.temporality())?,
                    "is_monotonic" => s.is_monotonic(),
                );
                c.sum.bind(py).call((), Some(&kw))
            }
            MetricData::Histogram(h) => {
                let (start, time) = (ns(h.start_time()), ns(h.time()));
                let mut points = Vec::new();
                for p in h.data_points() {
                    let kw = kwargs!(py,
                        "attributes" => attributes(py, p.attributes())?,
                        "start_time_unix_nano" => start,
                        "time_unix_nano" => time,
                        "count" => p.count(),
                        "sum" => p.sum(),
                        "bucket_counts" => p.bucket_counts().collect::<Vec<_>>(),
                        "explicit_bounds" => p.bounds().collect::<Vec<_>>(),
                        "min" => min_max(p.min(), f64::INFINITY)?,
                        "max" => min_max(p.max(), f64::NEG_INFINITY)?,
                        "exemplars" => self.exemplars(p.exemplars())?,
                    );
                    points.push(c.histogram_point.bind(py).call((), Some(&kw))?);
                }
                let kw = kwargs!(py, "data_points" => points, "aggregation_temporality" => self.temporality(h.temporality())?);
                c.histogram.bind(py).call((), Some(&kw))
            }
            MetricData::ExponentialHistogram(h) => {
                let (start, time) = (ns(h.start_time()), ns(h.time()));
                let buckets =
                    |b: &ExponentialBucket| c.buckets.bind(py).call1((b.offset(), b.counts().collect::<Vec<_>>()));
                let mut points = Vec::new();
                for p in h.data_points() {
                    let kw = kwargs!(py,
                        "attributes" => attributes(py, p.attributes())?,
                        "start_time_unix_nano" => start,
                        "time_unix_nano" => time,
                        "count" => p.count(),
                        "sum" => p.sum(),
                        "scale" => p.scale(),
                        "zero_count" => p.zero_count(),
                        "positive" => buckets(p.positive_bucket())?,
                        "negative" => buckets(p.negative_bucket())?,
                        "flags" => 0,
                        "min" => min_max(p.min(), f64::INFINITY)?,
                        "max" => min_max(p.max(), f64::NEG_INFINITY)?,
                        "exemplars" => self.exemplars(p.exemplars())?,
                    );
                    points.push(c.exponential_point.bind(py).call((), Some(&kw))?);
                }
                let kw = kwargs!(py, "data_points" => points, "aggregation_temporality" => self.temporality(h.temporality())?);
                c.exponential_histogram.bind(py).call((), Some(&kw))
            }
        }
    }
}
