//! What a built-in exporter is: a [`BuiltIn`], declared once in the exporter's own module and
//! listed once in [`BUILT_IN`](super::BUILT_IN). `init` builds the pipelines from it, the
//! configuration reads the names from it, and the exporters guide's list is written from it.

use opentelemetry_sdk::logs::LoggerProviderBuilder;
use opentelemetry_sdk::metrics::MeterProviderBuilder;
use opentelemetry_sdk::trace::TracerProviderBuilder;

use super::ledgers::Ledgers;
use crate::config::{BatchSettings, LogExporter, MetricExporter, MetricsSettings, OtlpTarget, TraceExporter};
use crate::error::InitError;

/// One built-in exporter.
pub(crate) struct BuiltIn {
    /// The name `OTEL_*_EXPORTER`, the file's `exporters.*` lists and the enums' `FromStr` and
    /// `Display` spell.
    pub(crate) name: &'static str,
    /// What it is, for the exporters guide's list (Markdown, one line).
    #[cfg_attr(not(test), allow(dead_code))] // read by the test that writes the guide's list
    pub(crate) summary: &'static str,
    /// The cargo feature that compiles it in; without it, choosing it fails `init` with
    /// [`InitError::FeatureDisabled`] naming the exporter and this feature.
    pub(crate) feature: &'static str,
    /// Whether it reads the meter provider on its own (a push exporter on an interval) rather
    /// than being read by a scraper: pipetel's instruments are then observable instruments.
    pub(crate) pushes: bool,
    /// Whether, sending to this OTLP target, it needs pipetel's one-thread Tokio runtime.
    pub(crate) needs_runtime: fn(&OtlpTarget) -> bool,
    /// What it does for metrics, when it serves them.
    pub(crate) metrics: Option<Serves<MetricExporter, BuildMetrics>>,
    /// What it does for traces, when it serves them.
    pub(crate) traces: Option<Serves<TraceExporter, BuildSpans>>,
    /// What it does for logs, when it serves them.
    pub(crate) logs: Option<Serves<LogExporter, BuildLogs>>,
}

impl BuiltIn {
    /// The error of choosing it in a build without its feature.
    pub(crate) fn disabled(&self) -> InitError {
        InitError::FeatureDisabled { exporter: self.name, feature: self.feature }
    }
}

/// A signal a built-in exporter serves: the public enum's variant that names it in code
/// (`Config::with_metrics_exporters([MetricExporter::Otlp])`) and its builder, `None` in a build
/// without its feature (see `built_with!`).
pub(crate) struct Serves<V, B> {
    /// The variant of the signal's exporter enum.
    pub(crate) variant: V,
    /// Adds the exporter to the signal's provider builder.
    pub(crate) build: Option<B>,
}

/// What a metric exporter's builder reads, and where the pull exporter leaves its render handle.
// Each field is read by the builders of some exporters, compiled in with their features.
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) struct MetricsInput<'a> {
    /// The metrics settings (export interval, temporality, OTLP target, ...).
    pub(crate) settings: &'a MetricsSettings,
    /// Where an OTLP exporter registers what it fails to deliver.
    pub(crate) ledgers: &'a mut Ledgers,
    /// The pull reader's render handle, once the pull exporter is added.
    pub(crate) pull: Option<Pull>,
}

/// What a span or log exporter's builder reads.
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) struct BatchInput<'a> {
    /// The signal's OTLP target.
    pub(crate) otlp: &'a OtlpTarget,
    /// The batch processor's settings (`OTEL_BSP_*` / `OTEL_BLRP_*`).
    pub(crate) batch: &'a BatchSettings,
    /// Where an OTLP exporter registers what it fails to deliver.
    pub(crate) ledgers: &'a mut Ledgers,
}

/// Adds a metric exporter (its reader) to the meter provider.
pub(crate) type BuildMetrics =
    fn(MeterProviderBuilder, &mut MetricsInput<'_>) -> Result<MeterProviderBuilder, InitError>;
/// Adds a span exporter (behind its processor) to the tracer provider.
pub(crate) type BuildSpans = fn(TracerProviderBuilder, &mut BatchInput<'_>) -> Result<TracerProviderBuilder, InitError>;
/// Adds a log exporter (behind its processor) to the logger provider.
pub(crate) type BuildLogs = fn(LoggerProviderBuilder, &mut BatchInput<'_>) -> Result<LoggerProviderBuilder, InitError>;

/// What the pull endpoint serves.
#[cfg(feature = "prometheus")]
pub(crate) type Pull = pipetel_core::exposition::pull::PrometheusRender;
/// What the pull endpoint serves (never made without the `prometheus` feature).
#[cfg(not(feature = "prometheus"))]
pub(crate) type Pull = std::convert::Infallible;

/// No OTLP target needs the runtime: an exporter that is no OTLP client.
pub(crate) fn no_runtime(_: &OtlpTarget) -> bool {
    false
}
