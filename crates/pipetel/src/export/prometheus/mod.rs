//! The Prometheus pull endpoint: a manual reader collected at scrape time, rendered by
//! [`encode`] (the SDK's data) followed by the exposition sources (the registry's and the
//! hub's native histograms and summaries), and served by [`server`].

mod encode;
mod server;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

#[cfg(feature = "tls")]
pub(crate) use server::tls_config;
pub(crate) use server::{EndpointOptions, PrometheusServer};

/// The content type of the text exposition format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The reader registered with the meter provider; the render handle shares its manual reader.
#[derive(Debug, Clone)]
pub(crate) struct PullReader(Arc<ManualReader>);

impl PullReader {
    pub(crate) fn new() -> Self {
        Self(Arc::new(ManualReader::builder().with_temporality(Temporality::Cumulative).build()))
    }
}

impl MetricReader for PullReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, _kind: InstrumentKind) -> Temporality {
        // Cumulative always: Prometheus computes rates from running totals.
        Temporality::Cumulative
    }
}

/// Renders the current metrics in the Prometheus text exposition format, for programs that serve
/// them from their own HTTP server. Cheap to clone.
#[derive(Clone)]
pub struct PrometheusRender {
    reader: PullReader,
    warned: Arc<AtomicBool>,
}

impl std::fmt::Debug for PrometheusRender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusRender").finish_non_exhaustive()
    }
}

impl PrometheusRender {
    pub(crate) fn new(reader: PullReader) -> Self {
        Self { reader, warned: Arc::new(AtomicBool::new(false)) }
    }

    /// Collects every instrument and returns the exposition text. Never panics: a collection
    /// error or a name conflict is logged once and what could be collected is returned.
    pub fn render(&self) -> String {
        let mut rm = ResourceMetrics::default();
        let mut out = String::with_capacity(16 * 1024);
        let mut conflicts = Vec::new();
        if let Err(error) = self.reader.collect(&mut rm) {
            self.warn_once(&format!("collecting metrics failed: {error}"));
            return out;
        }
        encode::encode(&rm, &mut out, &mut conflicts);
        super::write_sources(&mut out);
        if let Some(c) = conflicts.first() {
            self.warn_once(&format!("metric dropped from the exposition: {c}"));
        }
        out
    }

    fn warn_once(&self, message: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", "{message}");
        }
    }
}
