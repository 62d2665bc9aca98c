//! The pull endpoint's page without the endpoint: a manual reader ([`PullReader`]) collected on
//! demand and rendered ([`PrometheusRender`]) by `encode` (the SDK's data) followed by the
//! exposition sources (the registry's and the hub's direct histograms and summaries, ...). The
//! `pipetel` crate serves it over HTTP; a program that serves its own page calls
//! [`PrometheusRender::render`].

mod encode;
#[cfg(test)]
mod exemplar_tests;
mod reader;
mod render;

pub use reader::PullReader;
pub use render::{wants_openmetrics, PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
