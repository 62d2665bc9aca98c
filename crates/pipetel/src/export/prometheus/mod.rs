//! The Prometheus pull endpoint: a manual reader ([`reader`]) collected at scrape time,
//! rendered ([`render`]) by [`encode`] (the SDK's data) followed by the exposition sources (the
//! registry's and the hub's native histograms and summaries, ...), and served by [`server`].

mod encode;
#[cfg(test)]
mod exemplar_tests;
mod reader;
mod render;
mod server;

pub(crate) use reader::PullReader;
pub use render::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
#[cfg(feature = "tls")]
pub(crate) use server::tls_config;
pub(crate) use server::{EndpointOptions, PrometheusServer};
