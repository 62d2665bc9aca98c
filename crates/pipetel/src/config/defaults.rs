//! The defaults other modules read as values (the settings table states each default in words
//! for the reference; a test checks that the two agree).

use std::time::Duration;

/// Default prefix of the stage and worker namespaces.
pub const DEFAULT_NAMESPACE: &str = "pipeline";
/// Default Prometheus endpoint host.
pub const DEFAULT_PROMETHEUS_HOST: &str = "localhost";
/// Default Prometheus endpoint port.
pub const DEFAULT_PROMETHEUS_PORT: u16 = 9464;
/// Default Prometheus endpoint path.
pub const DEFAULT_PROMETHEUS_PATH: &str = "/metrics";
/// Default OTLP/gRPC endpoint.
pub const DEFAULT_OTLP_GRPC_ENDPOINT: &str = "http://localhost:4317";
/// Default OTLP/HTTP endpoint (the signal path is appended).
pub const DEFAULT_OTLP_HTTP_ENDPOINT: &str = "http://localhost:4318";
pub use pipetel_core::settings::{DEFAULT_CARDINALITY_LIMIT, DEFAULT_SERVICE_PREFIX};
pub(crate) const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_STAGE_RETENTION: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_METRIC_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default span, event and link limits (the SDK's and the spec's).
pub(crate) const DEFAULT_COUNT_LIMIT: u32 = 128;
pub(crate) const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// The console's `tracing` filter, and the traces' and logs' export filters, when none is given.
pub(crate) const DEFAULT_FILTER: &str = "info";
/// Shortest interval between worker samples.
pub(crate) const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// The SDK's default queue size of both batch processors.
pub(crate) const DEFAULT_MAX_QUEUE_SIZE: usize = 2048;
