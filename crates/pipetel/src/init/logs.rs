//! The logger provider (a log processor per configured exporter, each built by its entry in
//! [`crate::export::BUILT_IN`]) and the bridge from `tracing` events to OTel log records.

use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogsSettings;
use crate::error::InitError;
use crate::export::entry::BatchInput;
use crate::export::ledgers::Ledgers;
use crate::export::registry;

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
    if settings.exporters.is_empty() && plugged.is_empty() {
        return Ok(None);
    }
    let mut lp = SdkLoggerProvider::builder().with_resource(resource.clone());
    let mut input = BatchInput { otlp: &settings.otlp, batch: &settings.batch, ledgers };
    for exporter in &settings.exporters {
        lp = registry::builder(*exporter)?(lp, &mut input)?;
    }
    for add in plugged {
        lp = add(lp, &settings.batch);
    }
    Ok(Some(lp.build()))
}

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
