//! The Prometheus pull endpoint: the core's pull reader ([`PullReader`]) collected at scrape
//! time and rendered ([`PrometheusRender`]), served by [`server`].

mod server;

pub(crate) use pipetel_core::exposition::pull::PullReader;
pub use pipetel_core::exposition::pull::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
#[cfg(feature = "tls")]
pub(crate) use server::tls_config;
pub(crate) use server::{EndpointOptions, PrometheusServer};
