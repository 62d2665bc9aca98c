//! Exporters: the Prometheus pull endpoint and OTLP push.

#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) mod delivery;
#[cfg(feature = "otlp")]
pub(crate) mod otlp;
#[cfg(feature = "prometheus")]
pub(crate) mod prometheus;

#[cfg(feature = "prometheus")]
pub use self::prometheus::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
