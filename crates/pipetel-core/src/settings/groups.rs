//! The setting groups other modules take whole: the service metrics' switches
//! ([`ServiceMetricsConfig`], used by [`crate::service`] and the `http` module) and the span-metrics
//! layer's settings ([`SpanMetricsConfig`], used by [`crate::span_metrics`]). They live here so
//! that those modules depend on the configuration and never the reverse; they are plain values
//! (the `pipetel` crate's configuration reads them from the code, the environment and the file).

use std::str::FromStr;

use super::error::{ConfigError, Origin};
use super::names::{
    DEFAULT_SERVICE_PREFIX, PIPETEL_HISTOGRAM_BUCKETS, PIPETEL_HTTP_METRICS, PIPETEL_QUEUE_METRICS, SERVICE_ENV_VARS,
};
use super::syntax;
use super::values::named_values;

/// Switches and names of the service metrics.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServiceMetricsConfig {
    /// Task and queue metrics on ([`PIPETEL_QUEUE_METRICS`](super::PIPETEL_QUEUE_METRICS)).
    pub queue_metrics: bool,
    /// HTTP server metrics on ([`PIPETEL_HTTP_METRICS`](super::PIPETEL_HTTP_METRICS)).
    pub http_metrics: bool,
    /// Name prefix ([`PIPETEL_SERVICE_PREFIX`](super::PIPETEL_SERVICE_PREFIX)).
    pub prefix: String,
    /// Histogram buckets ([`PIPETEL_HISTOGRAM_BUCKETS`](super::PIPETEL_HISTOGRAM_BUCKETS)).
    pub histogram_buckets: Vec<f64>,
}

impl Default for ServiceMetricsConfig {
    fn default() -> Self {
        ServiceMetricsConfig {
            queue_metrics: true,
            http_metrics: true,
            prefix: DEFAULT_SERVICE_PREFIX.to_string(),
            histogram_buckets: crate::buckets::SECONDS_BUCKETS.to_vec(),
        }
    }
}

named_values! {
    /// Which duration of a span the histogram records.
    #[derive(Default)]
    pub enum SpanTime {
        /// Creation to close, await points included (the default).
        #[default]
        Wall = "wall",
        /// The sum of the intervals the span was entered.
        Busy = "busy",
    }
    else (SpanMetricsError) |s| SpanMetricsError::InvalidTime(s.to_string())
}

/// A bad span-metrics setting.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanMetricsError {
    /// The filter is not a valid `Targets` directive.
    #[error("invalid span metrics filter `{directive}`: {reason}")]
    InvalidFilter {
        /// The directive as given.
        directive: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The allow list holds an empty name.
    #[error("the span metrics allow list holds an empty span name")]
    EmptySpanName,
    /// Not `wall` or `busy`.
    #[error("invalid span time `{0}`: expected `wall` or `busy`")]
    InvalidTime(String),
}

/// Settings of the span-metrics layer.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SpanMetricsConfig {
    /// Whether the layer is installed at all (default `true`).
    pub enabled: bool,
    /// Span names to record; empty (the default) records every span the filter lets through.
    pub allow: Vec<String>,
    /// A [`Targets`](tracing_subscriber::filter::Targets) directive (`info`,
    /// `my_crate=debug,hyper=off`); default `trace` (all).
    pub filter: String,
    /// Wall or busy time (default wall).
    pub time: SpanTime,
}

impl Default for SpanMetricsConfig {
    fn default() -> Self {
        SpanMetricsConfig { enabled: true, allow: Vec::new(), filter: "trace".to_string(), time: SpanTime::Wall }
    }
}

impl SpanMetricsConfig {
    crate::field_setters::field_setters! {
        /// Switches the layer on or off.
        #[must_use]
        pub fn with_enabled(enabled: bool);
        /// Sets the target/level filter (a [`Targets`](tracing_subscriber::filter::Targets)
        /// directive).
        #[must_use]
        pub fn with_filter(filter: impl Into<String>) = filter.into();
        /// Chooses wall or busy time.
        #[must_use]
        pub fn with_time(time: SpanTime);
    }

    /// Records only spans with these names.
    #[must_use]
    pub fn with_allow<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.allow = names.into_iter().map(Into::into).collect();
        self
    }

    /// Splits a comma-separated allow list (`a, b,c`), as an environment variable holds it;
    /// blanks around names and empty entries are dropped.
    pub fn parse_allow(list: &str) -> Vec<String> {
        syntax::names(list).unwrap_or_default()
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`SpanMetricsError::InvalidFilter`] for a filter
    /// [`Targets`](tracing_subscriber::filter::Targets) cannot parse,
    /// [`SpanMetricsError::EmptySpanName`] for an empty name in the allow list.
    pub fn validate(&self) -> Result<(), SpanMetricsError> {
        self.targets()?;
        if self.allow.iter().any(|n| n.trim().is_empty()) {
            return Err(SpanMetricsError::EmptySpanName);
        }
        Ok(())
    }

    /// The filter as the layer applies it.
    ///
    /// # Errors
    /// [`SpanMetricsError::InvalidFilter`] for a filter that does not parse.
    pub fn targets(&self) -> Result<tracing_subscriber::filter::Targets, SpanMetricsError> {
        syntax::span_targets(&self.filter)
            .map_err(|reason| SpanMetricsError::InvalidFilter { directive: self.filter.clone(), reason })
    }
}

impl ServiceMetricsConfig {
    /// Reads the process environment.
    ///
    /// # Errors
    /// As [`ServiceMetricsConfig::from_lookup`].
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables of [`SERVICE_ENV_VARS`] through `lookup`; unset ones keep their
    /// defaults. An empty value is a value (an empty prefix is refused).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the variable and the value: a switch that is not a
    /// boolean, a prefix that is not snake_case, buckets that are not finite, strictly
    /// increasing numbers.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = ServiceMetricsConfig::default();
        for &name in SERVICE_ENV_VARS {
            let Some(value) = lookup(name) else { continue };
            let refused = |reason: String| ConfigError::invalid(Origin::Env(name.to_string()), value.clone(), reason);
            match name {
                PIPETEL_QUEUE_METRICS => config.queue_metrics = syntax::boolean(&value).map_err(refused)?,
                PIPETEL_HTTP_METRICS => config.http_metrics = syntax::boolean(&value).map_err(refused)?,
                PIPETEL_HISTOGRAM_BUCKETS => {
                    config.histogram_buckets = syntax::parse_buckets(&value).map_err(refused)?
                }
                _ => {
                    let prefix = value.trim().to_string();
                    syntax::service_prefix(&prefix).map_err(refused)?;
                    config.prefix = prefix;
                }
            }
        }
        Ok(config)
    }
}
