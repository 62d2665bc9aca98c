//! The Prometheus exporter: metrics pulled from pipetel's endpoint. The core's pull reader
//! ([`PullReader`]) is collected at scrape time and rendered ([`PrometheusRender`]), served by
//! [`server`].

#[cfg(feature = "prometheus")]
mod server;

use super::entry::{no_runtime, BuiltIn, Serves};
use crate::config::MetricExporter;

#[cfg(feature = "prometheus")]
pub(crate) use pipetel_core::exposition::pull::PullReader;
#[cfg(feature = "prometheus")]
pub use pipetel_core::exposition::pull::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
#[cfg(feature = "tls")]
pub(crate) use server::tls_config;
#[cfg(feature = "prometheus")]
pub(crate) use server::{EndpointOptions, PrometheusServer};

/// `prometheus` in `OTEL_METRICS_EXPORTER`.
pub(crate) static EXPORTER: BuiltIn = BuiltIn {
    name: "prometheus",
    summary: "the Prometheus pull endpoint (`localhost:9464/metrics`); the default when nothing is configured",
    feature: "prometheus",
    pushes: false,
    needs_runtime: no_runtime,
    metrics: Some(Serves { variant: MetricExporter::Prometheus, build: built_with!("prometheus", with_pull) }),
    traces: None,
    logs: None,
};

/// A pull reader on the meter provider; its render handle is what the endpoint serves.
#[cfg(feature = "prometheus")]
fn with_pull(
    mp: opentelemetry_sdk::metrics::MeterProviderBuilder,
    input: &mut super::entry::MetricsInput<'_>,
) -> Result<opentelemetry_sdk::metrics::MeterProviderBuilder, crate::error::InitError> {
    let reader = PullReader::new();
    input.pull = Some(PrometheusRender::new(reader.clone()));
    Ok(mp.with_reader(reader))
}
