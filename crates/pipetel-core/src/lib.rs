//! # pipetel-core
//!
//! The instrumentation API of [pipetel](https://docs.rs/pipetel): what a library depends on to
//! mark its pipeline stages and shards, count with a Prometheus-style registry, measure its
//! functions and record span metrics, with no exporter, network, TLS, configuration file or
//! async runtime among its dependencies. The application crate (`pipetel`) installs the meter,
//! tracer and logger providers and the exporters; until it does (or in a program that never
//! does), every call here is a cheap no-op on OpenTelemetry's global providers, as in the OTel
//! API / SDK split.
//!
//! ## Quick start
//! ```
//! // In a library: no `init`, no exporter. The application's `pipetel::init` makes it visible.
//! let stage = pipetel_core::stage("tokenize").shards(2).start();
//! for i in 0..2 {
//!     let shard = stage.shard(i).start();
//!     shard.record(128, 4096); // the hot path: an atomic add
//!     shard.finish();
//! }
//! let row = stage.finish();
//! assert_eq!(row.items, 256);
//! ```
//!
//! ## Where to start
//! | to measure | start at |
//! |---|---|
//! | a stage of sharded work: rows, metrics, spans | [`stage`] and the [`pipeline`] module |
//! | a function: calls, errors, duration, sizes | [`measure`] (the attribute), [`span_metrics`] |
//! | Prometheus-style counters, gauges, histograms, summaries | [`Registry`] and the [`registry`] module |
//! | an inference service's tasks and queue | [`service_metrics`] and the [`service`] module |
//! | TeleFuser-style stage contexts | the [`stage_metrics`] module |
//! | metrics of other processes | [`recorders`] (in the worker) and [`hub`] (in the exporter) |
//! | traces that cross processes, sampling | [`sampling`], [`Stage::traceparent`] |
//! | what the application installed | the [`global`] module |
//!
//! ## Features
//! | feature | default | what it adds |
//! |---|---|---|
//! | `testing` | no | `testing`: hooks tests use instead of waiting (take a sample now, count redraws) |
//! | `fuzzing` | no | `fuzzing`: the fuzz targets' entry points into parsers of what other programs hand in |

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// `unsafe` lives in `sync` alone, behind safe APIs with their soundness argument.
#![deny(unsafe_code)]

pub mod buckets;
#[doc(hidden)]
pub mod exposition;
pub mod families;
mod field_setters;
#[cfg(feature = "fuzzing")]
mod fuzz_entry;
#[cfg(feature = "fuzzing")]
#[cfg_attr(docsrs, doc(cfg(feature = "fuzzing")))]
pub use fuzz_entry::fuzzing;
pub mod global;
pub mod hub;
#[doc(hidden)]
pub mod limits;
mod measure;
pub mod pipeline;
#[doc(hidden)]
pub mod process_metrics;
pub mod registry;
pub mod sampling;
pub mod service;
pub mod settings;
pub mod span_metrics;
pub mod stage_metrics;
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod sync;
#[cfg(test)]
mod test_exporter;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

#[doc(hidden)]
pub use measure::__private;

/// Measures a function: a span plus call, error, in-flight, duration and size metrics.
pub use pipetel_macros::measure_core as measure;

pub use global::meter;
pub use pipeline::{stage, Shard, Stage};
pub use registry::Registry;
pub use service::{service_metrics, ServiceMetrics};

/// The OTel API crate pipetel is built on, re-exported so users never get version skew.
pub use opentelemetry;
/// The OTel SDK crate pipetel is built on.
pub use opentelemetry_sdk;
/// The std-only recorders worker processes link (re-exported for version agreement).
pub use pipetel_recorders as recorders;
/// The `tracing` crate pipetel's subscriber serves.
pub use tracing;
/// The `tracing-opentelemetry` bridge (for `OpenTelemetrySpanExt` and friends).
pub use tracing_opentelemetry;
