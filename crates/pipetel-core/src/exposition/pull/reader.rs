//! The manual reader the pull endpoint collects at scrape time.

use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

#[cfg(test)]
use crate::exposition::{Format, Page};

/// The reader registered with the meter provider; the render handle shares its manual reader.
#[derive(Debug, Clone)]
pub struct PullReader(Arc<ManualReader>);

impl PullReader {
    /// A reader with exemplar capture on, to register with a meter provider.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        // Exemplars can be shown from now on (OpenMetrics on the pull endpoint).
        crate::exposition::exemplar::enable_capture();
        Self(Arc::new(ManualReader::builder().with_temporality(Temporality::Cumulative).build()))
    }
}

#[cfg(test)]
impl PullReader {
    /// Collects and encodes the SDK's data as the endpoint does, without the exposition sources
    /// (for tests comparing a source's text with the encoder's).
    pub(crate) fn encode_for_tests(&self, format: Format) -> String {
        let mut rm = ResourceMetrics::default();
        self.collect(&mut rm).expect("collect");
        let mut out = String::new();
        super::encode::encode(&rm, &mut Page::new(&mut out, format));
        out
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
