//! # pipetel
//!
//! OpenTelemetry-native telemetry for data/ML pipelines and inference services. One call at
//! start-up wires OTel meters, tracers and logs, a `tracing` subscriber and the exporters; the
//! guard it returns flushes on drop.
//!
//! ## Quick start
//! ```no_run
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let _telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("tokenize"))?;
//!     let items = pipetel::meter().u64_counter("tokenize.items").with_unit("{item}").build();
//!     items.add(128, &[]);
//!     tokenize();
//!     Ok(()) // the guard drops here: flush, shut down
//! }
//!
//! #[tracing::instrument]
//! fn tokenize() { /* an OTel span when a trace exporter is configured */ }
//! ```
//! With nothing configured, metrics are served at `http://localhost:9464/metrics` for Prometheus
//! to scrape. Point `OTEL_EXPORTER_OTLP_ENDPOINT` at a collector to push metrics, traces and logs
//! instead.
//!
//! An application that owns its `tracing` subscriber adds pipetel's layers to it with
//! [`layers`] instead; [`init_with`] and [`InitOptions`] choose whether `init` installs the
//! subscriber and the OTel global providers.
//!
//! ## Where to start
//! | to measure | start at |
//! |---|---|
//! | the whole program: providers, exporters, the guard | [`init`], [`Config`], [`Telemetry`] |
//! | a stage of sharded work: rows, metrics, spans | [`stage`] and the [`pipeline`] module |
//! | a function: calls, errors, duration, sizes | [`measure`] (the attribute), [`span_metrics`] |
//! | Prometheus-style counters, gauges, histograms, summaries | [`Registry`] and the [`registry`] module |
//! | an inference service's tasks and queue | [`service_metrics`] and the [`service`] module |
//! | TeleFuser-style stage contexts | [`enable_stage_metrics`] and the [`stage_metrics`] module |
//! | metrics of other processes | [`recorders`] (in the worker) and [`hub`] (in the exporter) |
//! | traces that cross processes, sampling | [`sampling`], [`Stage::traceparent`] |
//! | HTTP server requests (feature `http`) | `http` |
//! | every setting and variable | the [`config`] module |
//!
//! The user guide, with every metric's name and every setting, is the book in the repository's
//! `docs/` folder.
//!
//! ## Configuration
//! [`Config::from_env`] reads the TOML file named by `PIPETEL_CONFIG`, then the standard `OTEL_*`
//! variables; `with_*` calls beat both. Every variable is a constant in [`config`] and listed in
//! [`config::ENV_VARS`]; a bad value is an error naming the variable and the value.
//!
//! ## Stage and service metrics, after TeleFuser
//! [`enable_stage_metrics`] gives a stage's context ([`StageMetrics`]: `total`, `errors`,
//! `active`, `duration`, `record_execution`, a guard from `start`), exported through
//! `#[pipetel::measure]`'s instruments; [`service_metrics`] gives the process-wide
//! [`ServiceMetrics`] built from the configuration; `gpu_snapshot` (feature `gpu`) the GPU
//! poller's latest sample. `PIPETEL_STAGE_METRICS=false` turns every stage metric off,
//! `PIPETEL_QUEUE_METRICS=false` the service metrics; see [`service`] for where
//! `PIPETEL_SERVICE_PREFIX` and `PIPETEL_HISTOGRAM_BUCKETS` (numbers, `seconds` or `telefuser`)
//! apply.
//!
//! ## Features
//! | feature | default | what it adds |
//! |---|---|---|
//! | `prometheus` | yes | the Prometheus pull endpoint and [`PrometheusRender`] |
//! | `otlp` | yes | OTLP push over gRPC and HTTP/protobuf |
//! | `console` | yes | human-readable exporters on stdout |
//! | `gpu` | yes | GPU gauges from NVML (loaded at run time; building needs no driver) |
//! | `http` | no | [`http`]: HTTP server request metrics for tower/axum/hyper services |

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// `unsafe` lives in `sync` alone, behind safe APIs with their soundness argument.
#![deny(unsafe_code)]

mod buckets;
pub mod config;
pub mod error;
mod export;
mod exposition;
pub mod families;
mod field_setters;
mod fuzz_entry;
pub use fuzz_entry::__fuzz;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
pub mod hub;
mod init;
mod installed;
mod limits;
mod measure;
pub mod pipeline;
mod process_metrics;
mod redact;
pub mod registry;
pub mod sampling;
pub mod service;
pub mod span_metrics;
pub mod stage_metrics;
#[allow(unsafe_code)]
mod sync;
#[cfg(test)]
mod test_exporter;

#[doc(hidden)]
pub use measure::__private;

/// Measures a function: a span plus call, error, in-flight, duration and size metrics.
pub use pipetel_macros::measure;

pub use buckets::{SECONDS_BUCKETS, TELEFUSER_BUCKETS};
pub use config::Config;
pub use error::{InitError, ShutdownError};
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use export::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
pub use init::{init, init_with, layers, layers_with, InitOptions, Telemetry};
#[cfg(feature = "gpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "gpu")))]
pub use installed::gpu_snapshot;
pub use installed::{meter, SCOPE_NAME};
pub use pipeline::{emit_stage_stat, emit_worker_stat, stage, Shard, Stage};
pub use registry::Registry;
pub use service::{service_metrics, ServiceMetrics};
pub use stage_metrics::{disable_stage_metrics, enable_stage_metrics, StageMetrics};

/// The OTel API crate pipetel is built on, re-exported so users never get version skew.
pub use opentelemetry;
/// The OTel SDK crate pipetel is built on.
pub use opentelemetry_sdk;
/// GPU telemetry: configuration types and metric names.
#[cfg(feature = "gpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "gpu")))]
pub use pipetel_gpu as gpu;
/// The std-only recorders worker processes link (re-exported for version agreement).
pub use pipetel_recorders as recorders;
/// The `tracing` crate pipetel's subscriber serves.
pub use tracing;
/// The `tracing-opentelemetry` bridge (for `OpenTelemetrySpanExt` and friends).
pub use tracing_opentelemetry;
