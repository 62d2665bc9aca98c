//! Exporters: the Prometheus pull endpoint and OTLP push.

#[cfg(feature = "prometheus")]
pub(crate) mod encode;
#[cfg(feature = "otlp")]
pub(crate) mod otlp;
#[cfg(feature = "prometheus")]
pub(crate) mod prometheus;

#[cfg(feature = "prometheus")]
pub use self::prometheus::{PrometheusRender, TEXT_CONTENT_TYPE};
