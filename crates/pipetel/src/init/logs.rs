//! The logger provider (exporters) and the bridge from `tracing` events to OTel log records.

use opentelemetry_sdk::logs::{LoggerProviderBuilder, SdkLoggerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use super::ledgers::Ledgers;
use crate::config::LogsSettings;
use crate::error::InitError;

/// The logger provider, absent when no log exporter is configured.
///
/// # Errors
/// An exporter that cannot be built or is not compiled in.
pub(super) fn build(
    settings: &LogsSettings,
    plugged: Vec<super::plugged::AddLogs>,
    resource: &Resource,
    ledgers: &mut Ledgers,
) -> Result<Option<SdkLoggerProvider>, InitError> {
    let lp = SdkLoggerProvider::builder().with_resource(resource.clone());
    provider(lp, &settings.exporters, plugged, &settings.otlp, &settings.batch, ledgers)
}

batch_exporters!(
    LoggerProviderBuilder,
    crate::export::otlp::log_exporter,
    "logs",
    "log record",
    opentelemetry_stdout::LogExporter,
    logs,
    BatchLogProcessor,
    LogExporter,
    with_log_processor,
    SdkLoggerProvider,
    LogExporter
);

/// The layer turning `tracing` events into log records of `lp`: those `filter` (the logs
/// filter, not the console's) lets through, leaving out the exporters' own events whatever it says.
pub(super) fn layer<S>(lp: &SdkLoggerProvider, filter: EnvFilter) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let not_internal = tracing_subscriber::filter::filter_fn(|meta| !is_exporter_internal(meta.target()));
    opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(lp).with_filter(filter.and(not_internal))
}

/// Targets whose events must not be exported as OTel logs: the exporters' own stack, which
/// would otherwise feed back into itself.
fn is_exporter_internal(target: &str) -> bool {
    ["opentelemetry", "hyper", "h2", "tonic", "tower", "reqwest", "rustls"].iter().any(|p| target.starts_with(p))
}
