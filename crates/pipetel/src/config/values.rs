//! The value types of the settings, each read from its text with [`FromStr`].

use std::fmt;
use std::str::FromStr;

use pipetel_core::settings::named_values;
pub use pipetel_core::settings::{
    ExemplarFilter, ParseValueError, ProfileMode, ProgressMode, ShardMetrics, StallAction,
};

/// Wire protocol of an OTLP exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// OTLP over gRPC (default port 4317).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (default port 4318).
    HttpProtobuf,
}

impl FromStr for OtlpProtocol {
    type Err = ParseValueError;

    /// `grpc` or `http/protobuf` (`http/json` is refused: it is not supported).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            "http/json" => Err(ParseValueError::new("http/json is not supported; use `grpc` or `http/protobuf`")),
            _ => Err(ParseValueError::new("expected `grpc` or `http/protobuf`")),
        }
    }
}

impl fmt::Display for OtlpProtocol {
    /// The name [`FromStr`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        })
    }
}

/// Compression of OTLP requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpCompression {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

impl FromStr for OtlpCompression {
    type Err = ParseValueError;

    /// `gzip`, `zstd`, or `none` (also the empty text).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const NAMES: [(&str, OtlpCompression); 4] = [
            ("none", OtlpCompression::None),
            ("", OtlpCompression::None),
            ("gzip", OtlpCompression::Gzip),
            ("zstd", OtlpCompression::Zstd),
        ];
        let found = NAMES.iter().find(|(name, _)| *name == s.trim());
        found.map(|(_, c)| *c).ok_or_else(|| ParseValueError::new("expected `gzip`, `zstd` or `none`"))
    }
}

impl fmt::Display for OtlpCompression {
    /// The name [`FromStr`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OtlpCompression::None => "none",
            OtlpCompression::Gzip => "gzip",
            OtlpCompression::Zstd => "zstd",
        })
    }
}

/// A trace exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceExporter {
    /// OTLP push.
    Otlp,
    /// Human-readable output on stdout.
    Console,
}

/// A metric exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricExporter {
    /// The Prometheus pull endpoint.
    Prometheus,
    /// OTLP push.
    Otlp,
    /// Human-readable output on stdout.
    Console,
}

/// A log exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogExporter {
    /// OTLP push.
    Otlp,
    /// Human-readable output on stdout.
    Console,
}

/// An exporter kind named in an `OTEL_*_EXPORTER` list. Its names (`FromStr`, `Display` and the
/// "expected ..." error) are those of the built-in exporters that serve its signal, read from
/// their registry (`export/registry.rs`), where each variant's exporter is declared.
pub(crate) trait ExporterName: FromStr + PartialEq {}

impl ExporterName for TraceExporter {}
impl ExporterName for MetricExporter {}
impl ExporterName for LogExporter {}

/// The trace sampler, as named by `OTEL_TRACES_SAMPLER`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum SamplerConfig {
    /// Sample every trace.
    AlwaysOn,
    /// Sample nothing.
    AlwaysOff,
    /// Sample this fraction of traces by trace id.
    TraceIdRatio(f64),
    /// Follow the parent's decision; root spans always sampled (the default).
    ParentBasedAlwaysOn,
    /// Follow the parent's decision; root spans never sampled.
    ParentBasedAlwaysOff,
    /// Follow the parent's decision; root spans sampled by ratio.
    ParentBasedTraceIdRatio(f64),
}

impl SamplerConfig {
    /// The ratio of a ratio sampler.
    pub fn ratio(self) -> Option<f64> {
        match self {
            SamplerConfig::TraceIdRatio(r) | SamplerConfig::ParentBasedTraceIdRatio(r) => Some(r),
            _ => None,
        }
    }

    /// The same sampler with `ratio` when it is a ratio sampler; any other is returned as is.
    #[must_use]
    pub fn with_ratio(self, ratio: f64) -> Self {
        match self {
            SamplerConfig::TraceIdRatio(_) => SamplerConfig::TraceIdRatio(ratio),
            SamplerConfig::ParentBasedTraceIdRatio(_) => SamplerConfig::ParentBasedTraceIdRatio(ratio),
            other => other,
        }
    }
}

impl fmt::Display for SamplerConfig {
    /// The sampler's name as `OTEL_TRACES_SAMPLER` spells it (a ratio is
    /// `OTEL_TRACES_SAMPLER_ARG`'s, not part of the name).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SamplerConfig::AlwaysOn => "always_on",
            SamplerConfig::AlwaysOff => "always_off",
            SamplerConfig::TraceIdRatio(_) => "traceidratio",
            SamplerConfig::ParentBasedAlwaysOn => "parentbased_always_on",
            SamplerConfig::ParentBasedAlwaysOff => "parentbased_always_off",
            SamplerConfig::ParentBasedTraceIdRatio(_) => "parentbased_traceidratio",
        })
    }
}

impl FromStr for SamplerConfig {
    type Err = ParseValueError;

    /// A sampler name as `OTEL_TRACES_SAMPLER` spells it; a ratio sampler gets ratio 1 (its
    /// argument is `OTEL_TRACES_SAMPLER_ARG`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "always_on" => Ok(SamplerConfig::AlwaysOn),
            "always_off" => Ok(SamplerConfig::AlwaysOff),
            "traceidratio" => Ok(SamplerConfig::TraceIdRatio(1.0)),
            "parentbased_always_on" => Ok(SamplerConfig::ParentBasedAlwaysOn),
            "parentbased_always_off" => Ok(SamplerConfig::ParentBasedAlwaysOff),
            "parentbased_traceidratio" => Ok(SamplerConfig::ParentBasedTraceIdRatio(1.0)),
            _ => Err(ParseValueError::new(
                "expected one of always_on, always_off, traceidratio, parentbased_always_on, \
                 parentbased_always_off, parentbased_traceidratio",
            )),
        }
    }
}

/// Which OTel signal an OTLP setting applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// Traces (spans).
    Traces,
    /// Metrics.
    Metrics,
    /// Logs.
    Logs,
    /// Profiles: sampled CPU stacks, over the OTLP profiles signal (`/v1development/profiles`;
    /// still in development upstream, so a collector takes it behind its `service.profilesSupport`
    /// feature gate).
    Profiles,
}

impl Signal {
    /// Every signal.
    pub const ALL: [Signal; 4] = [Signal::Traces, Signal::Metrics, Signal::Logs, Signal::Profiles];

    /// The path OTLP/HTTP appends to a generic endpoint.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
            Signal::Logs => "/v1/logs",
            Signal::Profiles => "/v1development/profiles",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
            Signal::Profiles => "profiles",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl FromStr for Signal {
    type Err = ParseValueError;

    /// `traces`, `metrics`, `logs` or `profiles`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Signal::ALL
            .into_iter()
            .find(|signal| signal.key() == s.trim())
            .ok_or_else(|| ParseValueError::new("expected `traces`, `metrics`, `logs` or `profiles`"))
    }
}

named_values! {
    /// The aggregation temporality OTLP metric exporters ask for
    /// (`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`). The pull endpoint is cumulative
    /// whatever this says.
    #[derive(Default)]
    pub enum MetricTemporality {
        /// Every instrument cumulative (the default): a lost export never loses a count downstream.
        #[default]
        Cumulative = "cumulative",
        /// Counters, histograms and observable counters delta; up-down counters cumulative (the
        /// spec's `delta` preference).
        Delta = "delta",
        /// Counters and histograms delta; observable counters and up-down counters cumulative.
        LowMemory = "lowmemory",
    }
    else "expected `cumulative`, `delta` or `lowmemory`"
}

named_values! {
    /// The aggregation of histogram instruments that give no other
    /// (`OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION`).
    #[derive(Default)]
    pub enum HistogramAggregation {
        /// Fixed bucket bounds (the instrument's own, or the SDK's default); the default.
        #[default]
        ExplicitBucket = "explicit_bucket_histogram",
        /// Base-2 exponential buckets (160 buckets, scale up to 20). Not renderable by the pull
        /// endpoint, so refused together with the `prometheus` exporter.
        Base2Exponential = "base2_exponential_bucket_histogram",
    }
    else "expected `explicit_bucket_histogram` or `base2_exponential_bucket_histogram`"
}

named_values! {
    /// A text-map propagator named in `OTEL_PROPAGATORS`.
    pub enum Propagator {
        /// W3C Trace Context (`traceparent`, `tracestate`).
        TraceContext = "tracecontext",
        /// W3C Baggage (`baggage`).
        Baggage = "baggage",
    }
    else (ParseValueError) |text| unknown_propagator(text)
}

/// Why a name is no propagator: the other names of the spec (`b3`, `b3multi`, `jaeger`, `xray`,
/// `ottrace`) are refused as not supported.
fn unknown_propagator(text: &str) -> ParseValueError {
    match text.trim().to_ascii_lowercase().as_str() {
        other @ ("b3" | "b3multi" | "jaeger" | "xray" | "ottrace") => ParseValueError::new(format!(
            "the `{other}` propagator is not supported; use `tracecontext`, `baggage` or `none`"
        )),
        other => ParseValueError::new(format!(
            "unknown propagator `{other}`; expected a comma list of tracecontext, baggage, or `none`"
        )),
    }
}

named_values! {
    /// The console's line format (`PIPETEL_LOG_FORMAT`).
    #[derive(Default)]
    pub enum LogFormat {
        /// One short line per event (the default).
        #[default]
        Compact = "compact",
        /// Several lines per event, for reading by eye.
        Pretty = "pretty",
        /// One JSON object per line, carrying the current span's `trace_id` and `span_id`, for log
        /// shippers.
        Json = "json",
    }
    else "expected `compact`, `pretty` or `json`"
}
