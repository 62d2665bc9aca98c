//! The names and defaults of the settings the instrumentation reads itself.

/// Default most attribute sets per instrument (the OTel SDK's own default).
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2000;
/// Default prefix of the service metrics.
pub const DEFAULT_SERVICE_PREFIX: &str = "service";

/// `false` turns the service (task and queue) metrics off.
pub const PIPETEL_QUEUE_METRICS: &str = "PIPETEL_QUEUE_METRICS";
/// `false` turns the HTTP server metrics off.
pub const PIPETEL_HTTP_METRICS: &str = "PIPETEL_HTTP_METRICS";
/// The name prefix (snake_case) of the service metrics.
pub const PIPETEL_SERVICE_PREFIX: &str = "PIPETEL_SERVICE_PREFIX";
/// Bucket bounds of the service histograms: numbers, `seconds` or `telefuser`.
pub const PIPETEL_HISTOGRAM_BUCKETS: &str = "PIPETEL_HISTOGRAM_BUCKETS";
/// The variables [`ServiceMetricsConfig::from_env`](super::ServiceMetricsConfig::from_env) reads.
pub const SERVICE_ENV_VARS: &[&str] =
    &[PIPETEL_QUEUE_METRICS, PIPETEL_HTTP_METRICS, PIPETEL_SERVICE_PREFIX, PIPETEL_HISTOGRAM_BUCKETS];
