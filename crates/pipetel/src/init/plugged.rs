//! Exporters and readers the application plugs in through [`InitOptions`](super::InitOptions),
//! beside the ones the configuration names (or instead of them, with those set to `none`).
//!
//! Each is kept as the step that adds it to its provider's builder, so `init` applies the
//! configuration's export interval and batch settings to it as to a built-in exporter.

use std::fmt;
use std::time::Duration;

use opentelemetry_sdk::logs::LoggerProviderBuilder;
use opentelemetry_sdk::metrics::MeterProviderBuilder;
use opentelemetry_sdk::trace::TracerProviderBuilder;

use crate::config::BatchSettings;

/// Adds a reader to the meter provider; the argument is the configured export interval.
pub(crate) type AddMetrics = Box<dyn FnOnce(MeterProviderBuilder, Duration) -> MeterProviderBuilder + Send>;
/// Adds a span processor to the tracer provider, with the configured batch settings.
pub(crate) type AddSpans = Box<dyn FnOnce(TracerProviderBuilder, &BatchSettings) -> TracerProviderBuilder + Send>;
/// Adds a log processor to the logger provider, with the configured batch settings.
pub(crate) type AddLogs = Box<dyn FnOnce(LoggerProviderBuilder, &BatchSettings) -> LoggerProviderBuilder + Send>;

/// The application's own exporters and readers, per signal.
#[derive(Default)]
pub(crate) struct Plugged {
    pub(crate) metrics: Vec<AddMetrics>,
    pub(crate) spans: Vec<AddSpans>,
    pub(crate) logs: Vec<AddLogs>,
}

impl fmt::Debug for Plugged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugged")
            .field("metric_readers", &self.metrics.len())
            .field("span_exporters", &self.spans.len())
            .field("log_exporters", &self.logs.len())
            .finish()
    }
}
