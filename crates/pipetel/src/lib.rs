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
//! | an inference service's tasks and queue | [`service::service_metrics`] and the [`service`] module |
//! | TeleFuser-style stage contexts | [`stage_metrics::enable_stage_metrics`] and the [`stage_metrics`] module |
//! | metrics of other processes | [`recorders`] (in the worker) and [`hub`] (in the exporter) |
//! | traces that cross processes, sampling | [`sampling`], [`pipeline::Stage::traceparent`] |
//! | a page of your own to serve (feature `prometheus`) | [`prometheus::PrometheusRender`] |
//! | what `init` installed: the meter, the GPU poller's latest sample | the [`global`] module |
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
//! [`stage_metrics::enable_stage_metrics`] gives a stage's context ([`stage_metrics::StageMetrics`]: `total`, `errors`,
//! `active`, `duration`, `record_execution`, a guard from `start`), exported through
//! `#[pipetel::measure]`'s instruments; [`service::service_metrics`] gives the process-wide
//! [`service::ServiceMetrics`] built from the configuration; `global::gpu_snapshot` (feature `gpu`) the GPU
//! poller's latest sample. `PIPETEL_STAGE_METRICS=false` turns every stage metric off,
//! `PIPETEL_QUEUE_METRICS=false` the service metrics; see [`service`] for where
//! `PIPETEL_SERVICE_PREFIX` and `PIPETEL_HISTOGRAM_BUCKETS` (numbers, `seconds` or `telefuser`)
//! apply.
//!
//! ## Features
//! | feature | default | what it adds |
//! |---|---|---|
//! | `prometheus` | yes | the Prometheus pull endpoint and [`prometheus::PrometheusRender`] |
//! | `otlp` | yes | OTLP push over gRPC and HTTP/protobuf |
//! | `console` | yes | human-readable exporters on stdout |
//! | `gpu` | yes | GPU gauges from NVML (loaded at run time; building needs no driver) |
//! | `http` | no | [`http`]: HTTP server request metrics for tower/axum/hyper services |
//! | `tls` | no | HTTPS for the pull endpoint |
//! | `amd` | no | AMD GPUs through ROCm SMI (loaded at run time) |
//!
//! ## The crates
//! `pipetel` is the application side (`init`, the configuration, the exporters, the pull
//! endpoint); the instrumentation API is the `pipetel-core` crate, whose paths are all paths of
//! this crate too. A library that only marks its stages or measures its functions depends on
//! `pipetel-core` alone and pulls no exporter stack.

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

pub mod config;
pub mod error;
mod export;
pub mod global;
#[cfg(feature = "gpu")]
mod gpu_use;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod init;

// The instrumentation API lives in `pipetel-core` (a library that only marks its stages depends
// on it alone); every path of it stays a path of `pipetel`.
pub use pipetel_core::{buckets, families, hub, pipeline, registry, sampling, service, span_metrics, stage_metrics};
// What the exporters and `init` use of the core, under the names they had in this crate.
use pipetel_core::settings::redact;
use pipetel_core::{exposition, process_metrics, sync};

/// Measures a function: a span plus call, error, in-flight, duration and size metrics.
pub use pipetel_macros::measure;

pub use config::Config;
pub use init::{init, init_with, layers, layers_with, InitOptions, Telemetry};
pub use pipetel_core::global::meter;
pub use pipetel_core::pipeline::stage;
pub use pipetel_core::registry::Registry;

/// The Prometheus page rendered on demand, for a program that serves it itself.
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus {
    pub use crate::export::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
}

/// GPU telemetry: configuration types and metric names (the `pipetel-gpu` crate).
#[cfg(feature = "gpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "gpu")))]
pub mod gpu {
    pub use pipetel_gpu::*;
}

/// The std-only recorders worker processes link (the `pipetel-recorders` crate, re-exported for
/// version agreement).
pub mod recorders {
    pub use pipetel_recorders::*;
}

#[cfg(feature = "fuzzing")]
#[cfg_attr(docsrs, doc(cfg(feature = "fuzzing")))]
pub use pipetel_core::fuzzing;
/// Hooks for tests of programs that use pipetel (feature `testing`): the core's, which let a
/// test act or wait on an event instead of on time, and [`export_profiles`](testing::export_profiles).
/// Not for production code; they may change in any release.
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing {
    pub use crate::export::profiles::export_profiles;
    pub use pipetel_core::testing::*;
}

/// The OTel API crate pipetel is built on, re-exported so users never get version skew.
pub use opentelemetry;
/// The OTel SDK crate pipetel is built on.
pub use opentelemetry_sdk;
/// The `tracing` crate pipetel's subscriber serves.
pub use tracing;
/// The `tracing-opentelemetry` bridge (for `OpenTelemetrySpanExt` and friends).
pub use tracing_opentelemetry;

// The names programs written against earlier versions use at the root; each is documented at
// its home (`error`, `prometheus`, `pipeline`, `service`, `stage_metrics`, `buckets`, `global`).
#[doc(hidden)]
pub use error::{InitError, ShutdownError};
#[cfg(feature = "prometheus")]
#[doc(hidden)]
pub use export::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
#[cfg(feature = "gpu")]
#[doc(hidden)]
pub use global::gpu_snapshot;
#[doc(hidden)]
pub use pipetel_core::__private;
#[doc(hidden)]
pub use pipetel_core::buckets::{SECONDS_BUCKETS, TELEFUSER_BUCKETS};
#[doc(hidden)]
pub use pipetel_core::global::SCOPE_NAME;
#[doc(hidden)]
pub use pipetel_core::pipeline::{emit_stage_stat, emit_worker_stat, Shard, Stage};
#[doc(hidden)]
pub use pipetel_core::service::{service_metrics, ServiceMetrics};
#[doc(hidden)]
pub use pipetel_core::stage_metrics::{disable_stage_metrics, enable_stage_metrics, StageMetrics};
