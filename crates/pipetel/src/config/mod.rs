//! Configuration: a builder, the standard `OTEL_*` environment variables and a TOML file.
//!
//! # Resolution order
//! Every setting resolves in one documented order, highest first:
//! 1. a value set in code (`Config::with_*`),
//! 2. the environment (for OTLP settings the signal-specific variable, then the generic one),
//! 3. the TOML file named by [`PIPETEL_CONFIG`] (or given to [`Config::from_file`]),
//! 4. the default.
//!
//! An OTLP setting has a slot per signal beside the generic one, each layered code > environment
//! > file; a signal's own value, wherever it came from, beats the generic value.
//!
//! `Config::from_env()` reads the file first and lays the environment over it; `with_*` calls made
//! afterwards lay code over both. Every value remembers where it came from ([`Origin`]), and
//! `Config::resolve` turns the whole into plain `Settings` once (what `init` reads; [`Config::validate`] runs the same checks), checking each value with the
//! same rule whatever its path: a bad value is an error naming the variable, file key or setter
//! and the value; nothing is silently replaced by a default. Request header values and the
//! Prometheus credentials are never shown: errors and `Debug` output write `<redacted>`.
//!
//! Every variable is a `pub const` here, listed in [`ENV_VARS`]; the configuration reference
//! (`docs/src/configuration.md`) lists each with its file key, default and meaning (a default's
//! words there are written from the value the code falls back on).
//!
//! # Where things are
//! | file | job |
//! |---|---|
//! | `table` | **every setting, declared once**: slot, variable, file key, rule, default value, meaning |
//! | `declare` | the table's shape and the macro that turns it into constants, slots and readers |
//! | `syntax` | the lexers (text to value) and checks (accepted values) |
//! | `rule` | one rule (a lexer and a check) per kind of setting; a value with its origin |
//! | `env`, `file` | the environment and the TOML file, read through the table |
//! | `builder`, `getters` | [`Config`]: the readers and the `with_*` setters; the getters |
//! | `otlp` | OTLP resolution per signal |
//! | `settings` | `Config::resolve` and the plain `Settings` `init` reads |
//! | `reference` | the configuration reference, written from the table |
//! | `values` | the value types ([`ConfigError`], [`Origin`] and the groups the instrumentation takes whole are `pipetel_core::settings`'s, documented here) |
//! | `defaults` | a default's shape (a value, or words where there is none), how a value is written as text, the shared default constants |
//!
//! A new setting is an entry in `table.rs` plus its use: a getter in `getters.rs`, a setter in
//! `builder.rs` (written out: one method per setter) and, when `init` needs it, a field of `Settings`. Its constant, its variable and file key,
//! its checks, its error origin, its default (read by the getter as `Defaults::field`) and its row
//! in the reference come from the entry.

mod answers;
mod builder;
mod declare;
mod defaults;
mod env;
mod file;
mod getters;
mod otlp;
mod profile;
#[cfg(test)]
mod reference;
mod rule;
mod settings;
mod syntax;
mod table;
mod values;

pub use builder::Config;
pub use defaults::*;
pub use otlp::{OtlpTarget, OtlpTls};
pub use pipetel_core::settings::parse_buckets;
pub use pipetel_core::settings::{
    ConfigError, Origin, PipelineSettings, ServiceMetricsConfig, Sourced, SpanMetricsConfig, SpanMetricsError, SpanTime,
};
pub(crate) use settings::{
    BatchSettings, LogsSettings, MetricsSettings, PrometheusSettings, ResourceSettings, Settings, SubscriberSettings,
    TracesSettings,
};
pub(crate) use syntax::parse_filter;
pub use table::*;
/// The TOML crate whose values [`Config::with_setting`] takes (re-exported for version agreement).
pub use toml;
pub use values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ParseValueError, ProfileMode, ProgressMode, Propagator, SamplerConfig, ShardMetrics, Signal,
    StallAction, TraceExporter,
};

#[cfg(test)]
mod tests;
