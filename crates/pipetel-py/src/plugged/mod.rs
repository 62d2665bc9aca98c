//! `init`'s `span_exporters`, `log_exporters` and `metric_exporters`: exporters written for the
//! OpenTelemetry Python SDK, plugged into pipetel's Rust providers through
//! [`pipetel::InitOptions`].
//!
//! Each Python exporter is wrapped in a Rust exporter of its signal (`SpanExporter`,
//! `LogExporter`, `PushMetricExporter`) that sits where a built-in one would: behind a batch
//! processor (spans, logs) or a periodic reader (metrics), with the configured batch settings and
//! export interval. On export it attaches to the interpreter on that exporter thread, converts
//! the batch into the Python SDK's own objects ([`convert`]) and calls the exporter's `export`;
//! the GIL is held for that and nothing else (the thread waits on nothing while holding it).
//! `force_flush` and `shutdown` are forwarded. An exception from the Python exporter, a result
//! other than `SUCCESS` (or `None`, or `True` from `force_flush`), or an interpreter shutting down
//! is returned as an OTel export error, which the SDK's processor logs and counts as for any
//! exporter; the next batch is exported as usual.

mod convert;

use std::future::{ready, Future};
use std::time::Duration;

use pipetel::opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use pipetel::opentelemetry_sdk::logs::{LogBatch, LogExporter};
use pipetel::opentelemetry_sdk::metrics::data::ResourceMetrics;
use pipetel::opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use pipetel::opentelemetry_sdk::metrics::Temporality;
use pipetel::opentelemetry_sdk::trace::{SpanData, SpanExporter};
use pipetel::opentelemetry_sdk::Resource;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyTuple};

use crate::args::{repr, type_name};
use convert::{Batch, LogClasses, MetricClasses, SpanClasses};

/// The exporters `init` was given, wrapped for the Rust providers.
pub(crate) struct Plugged {
    spans: Vec<PySpanExporter>,
    logs: Vec<PyLogExporter>,
    metrics: Vec<PyMetricExporter>,
}

impl Plugged {
    /// Checks and wraps `init`'s three arguments (each `None` or a list or tuple of exporters).
    ///
    /// # Errors
    /// `TypeError` naming the argument (and the item's index) for something that is not a list,
    /// or an item without a callable `export`; `ImportError` when the OpenTelemetry Python SDK
    /// the conversion needs cannot be imported.
    pub(crate) fn from_args(
        py: Python<'_>,
        spans: Option<&Bound<'_, PyAny>>,
        logs: Option<&Bound<'_, PyAny>>,
        metrics: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Plugged> {
        const SPANS: &str = "span_exporters";
        const LOGS: &str = "log_exporters";
        const METRICS: &str = "metric_exporters";
        let spans = targets(SPANS, spans, "opentelemetry.sdk.trace.export.SpanExporter", "")?;
        let logs = targets(LOGS, logs, "opentelemetry.sdk._logs.export.LogRecordExporter", "")?;
        let metrics = targets(
            METRICS,
            metrics,
            "opentelemetry.sdk.metrics.export.MetricExporter",
            "; a MetricReader such as InMemoryMetricReader is not an exporter",
        )?;
        let mut plugged = Plugged { spans: Vec::new(), logs: Vec::new(), metrics: Vec::new() };
        if !spans.is_empty() {
            let classes = std::sync::Arc::new(SpanClasses::import(py, SPANS)?);
            plugged.spans = spans
                .into_iter()
                .map(|target| PySpanExporter {
                    target,
                    classes: classes.clone(),
                    resource: Resource::builder_empty().build(),
                })
                .collect();
        }
        if !logs.is_empty() {
            let classes = std::sync::Arc::new(LogClasses::import(py, LOGS)?);
            plugged.logs = logs
                .into_iter()
                .map(|target| PyLogExporter {
                    target,
                    classes: classes.clone(),
                    resource: Resource::builder_empty().build(),
                })
                .collect();
        }
        if !metrics.is_empty() {
            let classes = std::sync::Arc::new(MetricClasses::import(py, METRICS)?);
            plugged.metrics = metrics
                .into_iter()
                .map(|target| {
                    let temporality = preferred_temporality(py, &target.object);
                    PyMetricExporter { target, classes: classes.clone(), temporality }
                })
                .collect();
        }
        Ok(plugged)
    }

    /// The options that plug every exporter in.
    pub(crate) fn options(self) -> pipetel::InitOptions {
        let mut options = pipetel::InitOptions::new();
        for e in self.spans {
            options = options.with_span_exporter(e);
        }
        for e in self.logs {
            options = options.with_log_exporter(e);
        }
        for e in self.metrics {
            options = options.with_metric_exporter(e);
        }
        options
    }
}

/// The items of `argument`, each checked to have a callable `export`.
fn targets(argument: &str, value: Option<&Bound<'_, PyAny>>, interface: &str, hint: &str) -> PyResult<Vec<Target>> {
    let Some(value) = value.filter(|v| !v.is_none()) else { return Ok(Vec::new()) };
    if !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()) {
        return Err(PyTypeError::new_err(format!(
            "{argument}: expected a list of exporters ({interface}), got a {}",
            type_name(value)
        )));
    }
    let mut targets = Vec::new();
    for (i, item) in value.try_iter()?.enumerate() {
        let item = item?;
        let exports = item.getattr("export").is_ok_and(|m| m.is_callable());
        if !exports {
            return Err(PyTypeError::new_err(format!(
                "{argument}[{i}]: a {} has no export method (an exporter such as {interface} is expected{hint})",
                type_name(&item)
            )));
        }
        targets.push(Target { name: format!("{argument}[{i}] ({})", type_name(&item)), object: item.unbind() });
    }
    Ok(targets)
}

/// The temporality a Python metric exporter asks for: the Python SDK's `MetricExporter` keeps
/// its preference per instrument class; the counter's decides (delta there means delta for
/// counters and histograms, as Rust's `Temporality::Delta` does). Cumulative when it says none.
fn preferred_temporality(py: Python<'_>, exporter: &Py<PyAny>) -> Temporality {
    let delta = || -> PyResult<bool> {
        let counter = py.import("opentelemetry.sdk.metrics")?.getattr("Counter")?;
        let preferred = exporter.bind(py).getattr("_preferred_temporality")?.get_item(counter)?;
        Ok(preferred.getattr("name")?.extract::<String>()? == "DELTA")
    };
    if delta().unwrap_or(false) {
        Temporality::Delta
    } else {
        Temporality::Cumulative
    }
}

/// A Python exporter object and the name its errors carry (`span_exporters[0] (InMemorySpanExporter)`).
#[derive(Debug)]
struct Target {
    object: Py<PyAny>,
    name: String,
}

impl Target {
    fn error(&self, what: impl std::fmt::Display) -> OTelSdkError {
        OTelSdkError::InternalFailure(format!("{}: {what}", self.name))
    }

    /// Runs `f` attached to the interpreter, or fails when it is shutting down (nothing Python
    /// can run then).
    fn attached(&self, f: impl for<'py> FnOnce(Python<'py>) -> OTelSdkResult) -> OTelSdkResult {
        Python::try_attach(f).unwrap_or_else(|| Err(self.error("the Python interpreter is shutting down")))
    }

    /// Hands `batch` (built attached) to `export` and reads its result.
    fn export<'py>(&self, py: Python<'py>, batch: PyResult<Bound<'py, PyAny>>) -> OTelSdkResult {
        let batch = batch.map_err(|e| self.error(format!("the batch could not be converted: {e}")))?;
        let result = self.object.bind(py).call_method1("export", (batch,));
        self.outcome("export", result)
    }

    /// Calls `force_flush` or `shutdown` when the exporter has it.
    fn call(&self, method: &str) -> OTelSdkResult {
        self.attached(|py| {
            let object = self.object.bind(py);
            match object.getattr(method) {
                Ok(m) if m.is_callable() => self.outcome(method, m.call0()),
                _ => Ok(()),
            }
        })
    }

    fn outcome(&self, method: &str, result: PyResult<Bound<'_, PyAny>>) -> OTelSdkResult {
        let result = result.map_err(|e| self.error(format!("{method} raised {e}")))?;
        if result.is_none() {
            return Ok(());
        }
        if let Ok(b) = result.cast::<PyBool>() {
            return if b.is_true() { Ok(()) } else { Err(self.error(format!("{method} returned False"))) };
        }
        match result.getattr("name").and_then(|n| n.extract::<String>()) {
            Ok(name) if name == "SUCCESS" => Ok(()),
            _ => Err(self.error(format!("{method} returned {}", repr(&result)))),
        }
    }
}

/// A Python span exporter behind pipetel's tracer provider.
#[derive(Debug)]
struct PySpanExporter {
    target: Target,
    classes: std::sync::Arc<SpanClasses>,
    /// The provider's resource (set by the provider before the first export).
    resource: Resource,
}

impl PySpanExporter {
    fn send(&self, batch: &[SpanData]) -> OTelSdkResult {
        self.target.attached(|py| {
            let spans = Batch::spans(py, &self.classes, &self.resource).and_then(|mut b| {
                let spans: PyResult<Vec<_>> = batch.iter().map(|s| b.span(s)).collect();
                PyList::new(py, spans?).map(Bound::into_any)
            });
            self.target.export(py, spans)
        })
    }
}

impl SpanExporter for PySpanExporter {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        ready(self.send(&batch))
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.target.call("shutdown")
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.target.call("force_flush")
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.clone();
    }
}

/// A Python log record exporter behind pipetel's logger provider.
#[derive(Debug)]
struct PyLogExporter {
    target: Target,
    classes: std::sync::Arc<LogClasses>,
    resource: Resource,
}

impl PyLogExporter {
    fn send(&self, batch: &LogBatch<'_>) -> OTelSdkResult {
        self.target.attached(|py| {
            let records = Batch::logs(py, &self.classes, &self.resource).and_then(|mut b| {
                let records: PyResult<Vec<_>> = batch.iter().map(|(r, s)| b.log(r, s)).collect();
                PyList::new(py, records?).map(Bound::into_any)
            });
            self.target.export(py, records)
        })
    }
}

impl LogExporter for PyLogExporter {
    fn export(&self, batch: LogBatch<'_>) -> impl Future<Output = OTelSdkResult> + Send {
        ready(self.send(&batch))
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // Rust's log exporter has no flush of its own: what the Python one buffers goes now.
        let flushed = self.target.call("force_flush");
        self.target.call("shutdown").and(flushed)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.clone();
    }
}

/// A Python metric exporter, read by a periodic reader of pipetel's meter provider.
struct PyMetricExporter {
    target: Target,
    classes: std::sync::Arc<MetricClasses>,
    temporality: Temporality,
}

impl PushMetricExporter for PyMetricExporter {
    fn export(&self, metrics: &ResourceMetrics) -> impl Future<Output = OTelSdkResult> + Send {
        ready(self.target.attached(|py| self.target.export(py, Batch::metrics(py, &self.classes, metrics))))
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.target.call("force_flush")
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.target.call("shutdown")
    }

    fn temporality(&self) -> Temporality {
        self.temporality
    }
}
