//! The setting groups the instrumentation applies itself, as plain values: the service
//! metrics' switches ([`ServiceMetricsConfig`]), the span-metrics layer's settings
//! ([`SpanMetricsConfig`]), the stage and worker telemetry's ([`PipelineSettings`]), and the
//! value types they hold. The `pipetel` crate's configuration (builder, `OTEL_*` variables, the
//! file) resolves them and hands them to what it installs; these types are the same ones, so
//! `pipetel::config::ServiceMetricsConfig` is this crate's.
//!
//! Before an application installs pipetel (or in a program that never does), the service
//! metrics read their four variables from the environment ([`ServiceMetricsConfig::from_env`]);
//! the configuration file applies from `pipetel::init` on.

mod error;
mod groups;
mod names;
mod pipeline;
#[doc(hidden)]
pub mod redact;
#[doc(hidden)]
pub mod syntax;
mod values;

pub use error::{ConfigError, Origin, Sourced};
pub use groups::{ServiceMetricsConfig, SpanMetricsConfig, SpanMetricsError, SpanTime};
pub use names::{
    DEFAULT_CARDINALITY_LIMIT, DEFAULT_SERVICE_PREFIX, PIPETEL_HISTOGRAM_BUCKETS, PIPETEL_HTTP_METRICS,
    PIPETEL_QUEUE_METRICS, PIPETEL_SERVICE_PREFIX, SERVICE_ENV_VARS,
};
pub use pipeline::{AnswerSettings, PipelineSettings};
pub use syntax::parse_buckets;
pub use values::{named_values, ExemplarFilter, ParseValueError, ProfileMode, ProgressMode, ShardMetrics, StallAction};
