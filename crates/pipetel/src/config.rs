//! Configuration: a builder, the standard `OTEL_*` environment variables and a TOML file.
//!
//! # Resolution order
//! Every setting resolves in one documented order, highest first:
//! 1. a value set in code (`Config::with_*`),
//! 2. the environment (for OTLP settings the signal-specific variable, then the generic one),
//! 3. the TOML file named by [`PIPETEL_CONFIG`] (or given to [`Config::from_file`]),
//! 4. the default.
//!
//! `Config::from_env()` reads the file first and lays the environment over it; `with_*` calls made
//! afterwards lay code over both. Every variable is a `pub const` in this module and a row in the
//! README's table. A value that cannot be parsed is an error naming the variable (or file key)
//! and the value; nothing is silently replaced by a default.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// `true` disables the SDK: every signal becomes a no-op and nothing listens.
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// The `service.name` resource attribute.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Extra resource attributes, `key=value` pairs separated by commas (values percent-encoded).
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// Trace exporters: a comma list of `otlp`, `console`, `none`.
pub const OTEL_TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
/// Metric exporters: a comma list of `prometheus`, `otlp`, `console`, `none`.
pub const OTEL_METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
/// Log exporters: a comma list of `otlp`, `console`, `none`.
pub const OTEL_LOGS_EXPORTER: &str = "OTEL_LOGS_EXPORTER";
/// OTLP endpoint for every signal (for HTTP, `/v1/<signal>` is appended).
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// OTLP protocol for every signal: `grpc` or `http/protobuf`.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// OTLP headers for every signal, `key=value` pairs separated by commas.
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// OTLP export timeout for every signal, in milliseconds.
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// OTLP compression for every signal: `gzip`, `zstd` or `none`.
pub const OTEL_EXPORTER_OTLP_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// OTLP endpoint for traces, used as given.
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// OTLP protocol for traces.
pub const OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// OTLP headers for traces.
pub const OTEL_EXPORTER_OTLP_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// OTLP timeout for traces, in milliseconds.
pub const OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// OTLP compression for traces.
pub const OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
/// OTLP endpoint for metrics, used as given.
pub const OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// OTLP protocol for metrics.
pub const OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
/// OTLP headers for metrics.
pub const OTEL_EXPORTER_OTLP_METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
/// OTLP timeout for metrics, in milliseconds.
pub const OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
/// OTLP compression for metrics.
pub const OTEL_EXPORTER_OTLP_METRICS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION";
/// OTLP endpoint for logs, used as given.
pub const OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT";
/// OTLP protocol for logs.
pub const OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL";
/// OTLP headers for logs.
pub const OTEL_EXPORTER_OTLP_LOGS_HEADERS: &str = "OTEL_EXPORTER_OTLP_LOGS_HEADERS";
/// OTLP timeout for logs, in milliseconds.
pub const OTEL_EXPORTER_OTLP_LOGS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT";
/// OTLP compression for logs.
pub const OTEL_EXPORTER_OTLP_LOGS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION";
/// Host the Prometheus pull endpoint binds to (default `localhost`).
pub const OTEL_EXPORTER_PROMETHEUS_HOST: &str = "OTEL_EXPORTER_PROMETHEUS_HOST";
/// Port of the Prometheus pull endpoint (default `9464`).
pub const OTEL_EXPORTER_PROMETHEUS_PORT: &str = "OTEL_EXPORTER_PROMETHEUS_PORT";
/// Interval between OTLP/console metric exports, in milliseconds (default 60000).
pub const OTEL_METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";
/// Trace sampler: `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
/// `parentbased_always_off`, `parentbased_traceidratio`.
pub const OTEL_TRACES_SAMPLER: &str = "OTEL_TRACES_SAMPLER";
/// Argument of a ratio sampler, a number in `[0, 1]`.
pub const OTEL_TRACES_SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
/// Path of a TOML configuration file.
pub const PIPETEL_CONFIG: &str = "PIPETEL_CONFIG";
/// The `service.version` resource attribute.
pub const PIPETEL_SERVICE_VERSION: &str = "PIPETEL_SERVICE_VERSION";
/// Path the Prometheus pull endpoint serves (default `/metrics`).
pub const PIPETEL_PROMETHEUS_PATH: &str = "PIPETEL_PROMETHEUS_PATH";
/// A bearer token the pull endpoint requires (`Authorization: Bearer <token>`).
pub const PIPETEL_PROMETHEUS_BEARER_TOKEN: &str = "PIPETEL_PROMETHEUS_BEARER_TOKEN";
/// `user:password` the pull endpoint requires as HTTP basic auth.
pub const PIPETEL_PROMETHEUS_BASIC_AUTH: &str = "PIPETEL_PROMETHEUS_BASIC_AUTH";
/// PEM certificate chain: the pull endpoint serves HTTPS (needs the `tls` feature).
pub const PIPETEL_PROMETHEUS_TLS_CERT: &str = "PIPETEL_PROMETHEUS_TLS_CERT";
/// PEM private key of that certificate.
pub const PIPETEL_PROMETHEUS_TLS_KEY: &str = "PIPETEL_PROMETHEUS_TLS_KEY";
/// `true` to print `tracing` events to stderr (default `true`).
pub const PIPETEL_CONSOLE_LOG: &str = "PIPETEL_CONSOLE_LOG";
/// Upper bound of shutdown and flush on drop, in milliseconds (default 5000).
pub const PIPETEL_SHUTDOWN_TIMEOUT: &str = "PIPETEL_SHUTDOWN_TIMEOUT";
/// Most attribute sets kept per metric instrument before overflow (default 2000).
pub const PIPETEL_CARDINALITY_LIMIT: &str = "PIPETEL_CARDINALITY_LIMIT";
/// Prefix of the stage and worker namespaces (default `pipeline`: `pipeline.stage`, `pipeline.worker`).
pub const PIPETEL_NAMESPACE: &str = "PIPETEL_NAMESPACE";
/// Interval between periodic worker samples, in milliseconds (default 10000).
pub const PIPETEL_SAMPLE_INTERVAL: &str = "PIPETEL_SAMPLE_INTERVAL";
/// How long a finished stage's series stay exported, in milliseconds (default 300000).
pub const PIPETEL_STAGE_RETENTION: &str = "PIPETEL_STAGE_RETENTION";
/// A file the stage and worker rows are appended to as JSON Lines (default: none).
pub const PIPETEL_ROWS_FILE: &str = "PIPETEL_ROWS_FILE";
/// GPU telemetry: `auto` (default: on when a GPU is found), `on` (required), `off`.
pub const PIPETEL_GPU: &str = "PIPETEL_GPU";
/// Path of the NVML library (default `libnvidia-ml.so.1` from the loader's search path).
pub const PIPETEL_NVML_LIBRARY: &str = "PIPETEL_NVML_LIBRARY";
/// Path of the ROCm SMI library for AMD GPUs (feature `amd`; default: the usual names).
pub const PIPETEL_ROCM_SMI_LIBRARY: &str = "PIPETEL_ROCM_SMI_LIBRARY";
/// GPU poll interval: `5s`, `1500ms` or plain seconds (default 5 s, at least 1 s).
pub const PIPETEL_GPU_POLL_INTERVAL: &str = "PIPETEL_GPU_POLL_INTERVAL";
/// GPU platform: `auto`, `nvidia`, `amd`.
pub const PIPETEL_GPU_PLATFORM: &str = "PIPETEL_GPU_PLATFORM";
/// `true` to poll PCIe throughput (each read blocks about 20 ms per device).
pub const PIPETEL_GPU_PCIE_THROUGHPUT: &str = "PIPETEL_GPU_PCIE_THROUGHPUT";
/// `true` to report the GPU memory of this process and its children.
pub const PIPETEL_GPU_PROCESS_MEMORY: &str = "PIPETEL_GPU_PROCESS_MEMORY";
/// `false` turns off the span-derived `span.duration` histogram (default `true`).
pub const PIPETEL_SPAN_METRICS: &str = "PIPETEL_SPAN_METRICS";
/// Only these span names (comma list) feed `span.duration` (default: every span).
pub const PIPETEL_SPAN_METRICS_ALLOW: &str = "PIPETEL_SPAN_METRICS_ALLOW";
/// Target/level filter of the spans that feed `span.duration`, e.g. `info,hyper=off` (default `trace`).
pub const PIPETEL_SPAN_METRICS_FILTER: &str = "PIPETEL_SPAN_METRICS_FILTER";
/// Which duration `span.duration` records: `wall` (default) or `busy` (time entered).
pub const PIPETEL_SPAN_METRICS_TIME: &str = "PIPETEL_SPAN_METRICS_TIME";
/// `false` registers no stage/worker metrics (rows and spans still flow; default `true`).
pub const PIPETEL_STAGE_METRICS: &str = "PIPETEL_STAGE_METRICS";
pub use crate::service::{
    PIPETEL_HISTOGRAM_BUCKETS, PIPETEL_HTTP_METRICS, PIPETEL_QUEUE_METRICS, PIPETEL_SERVICE_PREFIX,
};
/// The `tracing` filter directives (default `info`).
pub const RUST_LOG: &str = "RUST_LOG";

/// Every environment variable pipetel reads, in the order of the README's table.
pub const ENV_VARS: &[&str] = &[
    OTEL_SDK_DISABLED,
    OTEL_SERVICE_NAME,
    OTEL_RESOURCE_ATTRIBUTES,
    OTEL_TRACES_EXPORTER,
    OTEL_METRICS_EXPORTER,
    OTEL_LOGS_EXPORTER,
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_HEADERS,
    OTEL_EXPORTER_OTLP_TIMEOUT,
    OTEL_EXPORTER_OTLP_COMPRESSION,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
    OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
    OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
    OTEL_EXPORTER_OTLP_LOGS_PROTOCOL,
    OTEL_EXPORTER_OTLP_LOGS_HEADERS,
    OTEL_EXPORTER_OTLP_LOGS_TIMEOUT,
    OTEL_EXPORTER_OTLP_LOGS_COMPRESSION,
    OTEL_EXPORTER_PROMETHEUS_HOST,
    OTEL_EXPORTER_PROMETHEUS_PORT,
    OTEL_METRIC_EXPORT_INTERVAL,
    OTEL_TRACES_SAMPLER,
    OTEL_TRACES_SAMPLER_ARG,
    PIPETEL_CONFIG,
    PIPETEL_SERVICE_VERSION,
    PIPETEL_PROMETHEUS_PATH,
    PIPETEL_PROMETHEUS_BEARER_TOKEN,
    PIPETEL_PROMETHEUS_BASIC_AUTH,
    PIPETEL_PROMETHEUS_TLS_CERT,
    PIPETEL_PROMETHEUS_TLS_KEY,
    PIPETEL_CONSOLE_LOG,
    PIPETEL_SHUTDOWN_TIMEOUT,
    PIPETEL_CARDINALITY_LIMIT,
    PIPETEL_NAMESPACE,
    PIPETEL_SAMPLE_INTERVAL,
    PIPETEL_STAGE_RETENTION,
    PIPETEL_ROWS_FILE,
    PIPETEL_GPU,
    PIPETEL_NVML_LIBRARY,
    PIPETEL_ROCM_SMI_LIBRARY,
    PIPETEL_GPU_POLL_INTERVAL,
    PIPETEL_GPU_PLATFORM,
    PIPETEL_GPU_PCIE_THROUGHPUT,
    PIPETEL_GPU_PROCESS_MEMORY,
    PIPETEL_SPAN_METRICS,
    PIPETEL_SPAN_METRICS_ALLOW,
    PIPETEL_SPAN_METRICS_FILTER,
    PIPETEL_SPAN_METRICS_TIME,
    PIPETEL_STAGE_METRICS,
    PIPETEL_QUEUE_METRICS,
    PIPETEL_HTTP_METRICS,
    PIPETEL_SERVICE_PREFIX,
    PIPETEL_HISTOGRAM_BUCKETS,
    RUST_LOG,
];

/// Where a bad value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// An environment variable.
    Env(String),
    /// A key of the configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `otlp.traces.endpoint`.
        key: String,
    },
    /// A value set in code through a `Config::with_*` method.
    Code(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::File { path, key } => write!(f, "key `{key}` in {}", path.display()),
            Origin::Code(setter) => write!(f, "Config::{setter}"),
        }
    }
}

/// A configuration error: always names the variable or key and the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value could not be parsed or is out of range.
    #[error("invalid value {value:?} for {origin}: {reason}")]
    InvalidValue {
        /// Where the value came from.
        origin: Origin,
        /// The value as given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The configuration file could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    FileRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is not valid TOML or has an unknown key or a wrongly typed value.
    #[error("malformed configuration file {}: {message}", path.display())]
    FileSyntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key and the position.
        message: String,
    },
}

impl ConfigError {
    fn invalid(origin: Origin, value: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError::InvalidValue { origin, value: value.into(), reason: reason.into() }
    }
}

/// Wire protocol of an OTLP exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// OTLP over gRPC (default port 4317).
    Grpc,
    /// OTLP over HTTP with protobuf bodies (default port 4318).
    HttpProtobuf,
}

impl OtlpProtocol {
    fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "grpc" => Ok(Self::Grpc),
            "http/protobuf" => Ok(Self::HttpProtobuf),
            "http/json" => Err("http/json is not supported; use `grpc` or `http/protobuf`".into()),
            _ => Err("expected `grpc` or `http/protobuf`".into()),
        }
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

impl OtlpCompression {
    fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "none" | "" => Ok(Self::None),
            "gzip" => Ok(Self::Gzip),
            "zstd" => Ok(Self::Zstd),
            _ => Err("expected `gzip`, `zstd` or `none`".into()),
        }
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
}

impl Signal {
    fn path(self) -> &'static str {
        match self {
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
            Signal::Logs => "/v1/logs",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// OTLP settings of one scope (all signals, or one signal). Unset fields fall through.
#[derive(Debug, Clone, Default, PartialEq)]
struct OtlpSettings {
    endpoint: Option<String>,
    protocol: Option<OtlpProtocol>,
    headers: Option<Vec<(String, String)>>,
    timeout: Option<Duration>,
    compression: Option<OtlpCompression>,
}

/// Fully resolved OTLP settings of one signal.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpTarget {
    /// The URL requests go to (for HTTP, including the signal's path).
    pub endpoint: String,
    /// The wire protocol.
    pub protocol: OtlpProtocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// The export timeout.
    pub timeout: Duration,
    /// Request compression.
    pub compression: OtlpCompression,
}

/// pipetel's configuration. Build it with [`Config::from_env`] (file + environment) or
/// [`Config::default`] (defaults only), then adjust with the `with_*` methods, which beat both.
///
/// ```
/// let config = pipetel::Config::default()
///     .with_service_name("tokenize")
///     .with_prometheus_port(0);
/// assert_eq!(config.service_name(), "tokenize");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Config {
    service_name: Option<String>,
    service_version: Option<String>,
    resource_attributes: Vec<(String, String)>,
    sdk_disabled: Option<bool>,
    traces_exporters: Option<Vec<TraceExporter>>,
    metrics_exporters: Option<Vec<MetricExporter>>,
    logs_exporters: Option<Vec<LogExporter>>,
    otlp: OtlpSettings,
    otlp_traces: OtlpSettings,
    otlp_metrics: OtlpSettings,
    otlp_logs: OtlpSettings,
    prometheus_host: Option<String>,
    prometheus_port: Option<u16>,
    prometheus_path: Option<String>,
    prometheus_bearer_token: Option<String>,
    prometheus_basic_auth: Option<(String, String)>,
    prometheus_tls: Option<(PathBuf, PathBuf)>,
    metric_export_interval: Option<Duration>,
    sampler: Option<SamplerConfig>,
    console_log: Option<bool>,
    log_filter: Option<String>,
    shutdown_timeout: Option<Duration>,
    cardinality_limit: Option<usize>,
    namespace: Option<String>,
    sample_interval: Option<Duration>,
    stage_retention: Option<Duration>,
    rows_file: Option<PathBuf>,
    #[cfg(feature = "gpu")]
    gpu: pipetel_gpu::GpuConfig,
    span_metrics: crate::span_metrics::SpanMetricsConfig,
    stage_metrics: Option<bool>,
    service: crate::service::ServiceMetricsConfig,
}

/// Default prefix of the stage and worker namespaces.
pub const DEFAULT_NAMESPACE: &str = "pipeline";
const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
const DEFAULT_STAGE_RETENTION: Duration = Duration::from_secs(300);

/// Default Prometheus endpoint host.
pub const DEFAULT_PROMETHEUS_HOST: &str = "localhost";
/// Default Prometheus endpoint port.
pub const DEFAULT_PROMETHEUS_PORT: u16 = 9464;
/// Default Prometheus endpoint path.
pub const DEFAULT_PROMETHEUS_PATH: &str = "/metrics";
/// Default OTLP/gRPC endpoint.
pub const DEFAULT_OTLP_GRPC_ENDPOINT: &str = "http://localhost:4317";
/// Default OTLP/HTTP endpoint (the signal path is appended).
pub const DEFAULT_OTLP_HTTP_ENDPOINT: &str = "http://localhost:4318";
const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// Default most attribute sets per instrument (the OTel SDK's own default).
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2000;

impl Config {
    /// Reads the file named by [`PIPETEL_CONFIG`] (when set), then the environment over it.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the variable or file key and the value for anything that cannot be
    /// parsed, and for an unreadable or malformed file or an unknown key in it.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`Config::from_env`], with variables looked up through `lookup` (for tests and for
    /// programs that keep settings elsewhere).
    ///
    /// # Errors
    /// As [`Config::from_env`].
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = match lookup(PIPETEL_CONFIG).filter(|p| !p.trim().is_empty()) {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        config.apply_env(&lookup)?;
        Ok(config)
    }

    /// Reads a TOML configuration file (no environment). See the README for its keys.
    ///
    /// # Errors
    /// [`ConfigError::FileRead`], [`ConfigError::FileSyntax`] (unknown key, wrong type), or
    /// [`ConfigError::InvalidValue`] naming the key.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref().to_path_buf();
        let text =
            std::fs::read_to_string(&path).map_err(|source| ConfigError::FileRead { path: path.clone(), source })?;
        Self::from_toml_str(&text, &path)
    }

    /// Parses TOML text as if read from `path` (used in error messages).
    ///
    /// # Errors
    /// As [`Config::from_file`].
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: FileConfig = toml::from_str(text).map_err(|e| ConfigError::FileSyntax {
            path: path.to_path_buf(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        file.into_config(path)
    }

    fn apply_env(&mut self, lookup: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let env = |name: &str| Origin::Env(name.to_string());
        if let Some(v) = get(OTEL_SDK_DISABLED) {
            self.sdk_disabled = Some(parse_bool(&v).map_err(|r| ConfigError::invalid(env(OTEL_SDK_DISABLED), &v, r))?);
        }
        if let Some(v) = get(OTEL_SERVICE_NAME) {
            self.service_name = Some(v);
        }
        if let Some(v) = get(PIPETEL_SERVICE_VERSION) {
            self.service_version = Some(v);
        }
        if let Some(v) = get(OTEL_RESOURCE_ATTRIBUTES) {
            let attrs = parse_key_values(&v).map_err(|r| ConfigError::invalid(env(OTEL_RESOURCE_ATTRIBUTES), &v, r))?;
            merge_pairs(&mut self.resource_attributes, attrs);
        }
        if let Some(v) = get(OTEL_TRACES_EXPORTER) {
            self.traces_exporters =
                Some(parse_trace_exporters(&v).map_err(|r| ConfigError::invalid(env(OTEL_TRACES_EXPORTER), &v, r))?);
        }
        if let Some(v) = get(OTEL_METRICS_EXPORTER) {
            self.metrics_exporters =
                Some(parse_metric_exporters(&v).map_err(|r| ConfigError::invalid(env(OTEL_METRICS_EXPORTER), &v, r))?);
        }
        if let Some(v) = get(OTEL_LOGS_EXPORTER) {
            self.logs_exporters =
                Some(parse_log_exporters(&v).map_err(|r| ConfigError::invalid(env(OTEL_LOGS_EXPORTER), &v, r))?);
        }
        let scopes: [(&mut OtlpSettings, [&str; 5]); 4] = [
            (
                &mut self.otlp,
                [
                    OTEL_EXPORTER_OTLP_ENDPOINT,
                    OTEL_EXPORTER_OTLP_PROTOCOL,
                    OTEL_EXPORTER_OTLP_HEADERS,
                    OTEL_EXPORTER_OTLP_TIMEOUT,
                    OTEL_EXPORTER_OTLP_COMPRESSION,
                ],
            ),
            (
                &mut self.otlp_traces,
                [
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
                    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
                    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
                    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
                ],
            ),
            (
                &mut self.otlp_metrics,
                [
                    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
                    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
                    OTEL_EXPORTER_OTLP_METRICS_HEADERS,
                    OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
                    OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
                ],
            ),
            (
                &mut self.otlp_logs,
                [
                    OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
                    OTEL_EXPORTER_OTLP_LOGS_PROTOCOL,
                    OTEL_EXPORTER_OTLP_LOGS_HEADERS,
                    OTEL_EXPORTER_OTLP_LOGS_TIMEOUT,
                    OTEL_EXPORTER_OTLP_LOGS_COMPRESSION,
                ],
            ),
        ];
        for (settings, [endpoint, protocol, headers, timeout, compression]) in scopes {
            if let Some(v) = get(endpoint) {
                settings.endpoint = Some(parse_endpoint(&v).map_err(|r| ConfigError::invalid(env(endpoint), &v, r))?);
            }
            if let Some(v) = get(protocol) {
                settings.protocol =
                    Some(OtlpProtocol::parse(&v).map_err(|r| ConfigError::invalid(env(protocol), &v, r))?);
            }
            if let Some(v) = get(headers) {
                settings.headers = Some(parse_headers(&v).map_err(|r| ConfigError::invalid(env(headers), &v, r))?);
            }
            if let Some(v) = get(timeout) {
                settings.timeout = Some(parse_millis(&v).map_err(|r| ConfigError::invalid(env(timeout), &v, r))?);
            }
            if let Some(v) = get(compression) {
                settings.compression =
                    Some(OtlpCompression::parse(&v).map_err(|r| ConfigError::invalid(env(compression), &v, r))?);
            }
        }
        if let Some(v) = get(OTEL_EXPORTER_PROMETHEUS_HOST) {
            self.prometheus_host =
                Some(parse_host(&v).map_err(|r| ConfigError::invalid(env(OTEL_EXPORTER_PROMETHEUS_HOST), &v, r))?);
        }
        if let Some(v) = get(OTEL_EXPORTER_PROMETHEUS_PORT) {
            self.prometheus_port =
                Some(parse_port(&v).map_err(|r| ConfigError::invalid(env(OTEL_EXPORTER_PROMETHEUS_PORT), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_PROMETHEUS_PATH) {
            self.prometheus_path =
                Some(parse_path(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_PROMETHEUS_PATH), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_PROMETHEUS_BEARER_TOKEN) {
            self.prometheus_bearer_token = Some(
                parse_token(&v)
                    .map_err(|r| ConfigError::invalid(env(PIPETEL_PROMETHEUS_BEARER_TOKEN), "<redacted>", r))?,
            );
        }
        if let Some(v) = get(PIPETEL_PROMETHEUS_BASIC_AUTH) {
            self.prometheus_basic_auth = Some(
                parse_basic_auth(&v)
                    .map_err(|r| ConfigError::invalid(env(PIPETEL_PROMETHEUS_BASIC_AUTH), "<redacted>", r))?,
            );
        }
        match (get(PIPETEL_PROMETHEUS_TLS_CERT), get(PIPETEL_PROMETHEUS_TLS_KEY)) {
            (Some(c), Some(k)) => self.prometheus_tls = Some((PathBuf::from(c), PathBuf::from(k))),
            (Some(c), None) => {
                return Err(ConfigError::invalid(
                    env(PIPETEL_PROMETHEUS_TLS_CERT),
                    c,
                    format!("needs {PIPETEL_PROMETHEUS_TLS_KEY} too"),
                ))
            }
            (None, Some(k)) => {
                return Err(ConfigError::invalid(
                    env(PIPETEL_PROMETHEUS_TLS_KEY),
                    k,
                    format!("needs {PIPETEL_PROMETHEUS_TLS_CERT} too"),
                ))
            }
            (None, None) => {}
        }
        if let Some(v) = get(OTEL_METRIC_EXPORT_INTERVAL) {
            self.metric_export_interval = Some(
                parse_positive_millis(&v).map_err(|r| ConfigError::invalid(env(OTEL_METRIC_EXPORT_INTERVAL), &v, r))?,
            );
        }
        let sampler_arg = get(OTEL_TRACES_SAMPLER_ARG);
        if let Some(v) = get(OTEL_TRACES_SAMPLER) {
            self.sampler = Some(parse_sampler(&v, sampler_arg.as_deref()).map_err(|(var, val, r)| {
                let (name, value) = if var { (OTEL_TRACES_SAMPLER_ARG, val) } else { (OTEL_TRACES_SAMPLER, v.clone()) };
                ConfigError::invalid(env(name), value, r)
            })?);
        } else if let Some(arg) = sampler_arg {
            // The argument alone changes the ratio of the default sampler's root decision.
            let ratio = parse_ratio(&arg).map_err(|r| ConfigError::invalid(env(OTEL_TRACES_SAMPLER_ARG), &arg, r))?;
            if let Some(SamplerConfig::TraceIdRatio(_)) = self.sampler {
                self.sampler = Some(SamplerConfig::TraceIdRatio(ratio));
            } else if let Some(SamplerConfig::ParentBasedTraceIdRatio(_)) = self.sampler {
                self.sampler = Some(SamplerConfig::ParentBasedTraceIdRatio(ratio));
            }
        }
        if let Some(v) = get(PIPETEL_CONSOLE_LOG) {
            self.console_log = Some(parse_bool(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_CONSOLE_LOG), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_SHUTDOWN_TIMEOUT) {
            self.shutdown_timeout = Some(
                parse_positive_millis(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_SHUTDOWN_TIMEOUT), &v, r))?,
            );
        }
        if let Some(v) = get(PIPETEL_CARDINALITY_LIMIT) {
            self.cardinality_limit =
                Some(parse_cardinality(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_CARDINALITY_LIMIT), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_NAMESPACE) {
            self.namespace =
                Some(parse_namespace(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_NAMESPACE), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_SAMPLE_INTERVAL) {
            self.sample_interval =
                Some(parse_sample_interval(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_SAMPLE_INTERVAL), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_STAGE_RETENTION) {
            self.stage_retention =
                Some(parse_millis(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_STAGE_RETENTION), &v, r))?);
        }
        if let Some(v) = get(PIPETEL_ROWS_FILE) {
            self.rows_file = Some(PathBuf::from(v));
        }
        #[cfg(feature = "gpu")]
        {
            self.gpu = self.gpu.clone().with_env_from(|name| get(name)).map_err(|e| match e {
                pipetel_gpu::ConfigError::InvalidEnv { variable, value, reason } => {
                    ConfigError::invalid(env(variable), value, reason)
                }
                other => ConfigError::invalid(env(PIPETEL_GPU), "", other.to_string()),
            })?;
        }
        if let Some(v) = get(PIPETEL_SPAN_METRICS) {
            let on = parse_bool(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_SPAN_METRICS), &v, r))?;
            self.span_metrics = self.span_metrics.clone().with_enabled(on);
        }
        if let Some(v) = get(PIPETEL_SPAN_METRICS_ALLOW) {
            self.span_metrics =
                self.span_metrics.clone().with_allow(crate::span_metrics::SpanMetricsConfig::parse_allow(&v));
        }
        if let Some(v) = get(PIPETEL_SPAN_METRICS_FILTER) {
            let c = self.span_metrics.clone().with_filter(v.clone());
            c.validate().map_err(|e| ConfigError::invalid(env(PIPETEL_SPAN_METRICS_FILTER), &v, e.to_string()))?;
            self.span_metrics = c;
        }
        if let Some(v) = get(PIPETEL_SPAN_METRICS_TIME) {
            let time = v
                .parse::<crate::span_metrics::SpanTime>()
                .map_err(|e| ConfigError::invalid(env(PIPETEL_SPAN_METRICS_TIME), &v, e.to_string()))?;
            self.span_metrics = self.span_metrics.clone().with_time(time);
        }
        if let Some(v) = get(PIPETEL_STAGE_METRICS) {
            self.stage_metrics =
                Some(parse_bool(&v).map_err(|r| ConfigError::invalid(env(PIPETEL_STAGE_METRICS), &v, r))?);
        }
        let from_env = crate::service::ServiceMetricsConfig::from_lookup(get)?;
        if get(PIPETEL_QUEUE_METRICS).is_some() {
            self.service.queue_metrics = from_env.queue_metrics;
        }
        if get(PIPETEL_HTTP_METRICS).is_some() {
            self.service.http_metrics = from_env.http_metrics;
        }
        if get(PIPETEL_SERVICE_PREFIX).is_some() {
            self.service.prefix = from_env.prefix;
        }
        if get(PIPETEL_HISTOGRAM_BUCKETS).is_some() {
            self.service.histogram_buckets = from_env.histogram_buckets;
        }
        if let Some(v) = get(RUST_LOG) {
            check_filter(&v).map_err(|r| ConfigError::invalid(env(RUST_LOG), &v, r))?;
            self.log_filter = Some(v);
        }
        Ok(())
    }

    // ----- builder -----

    /// Sets `service.name`.
    pub fn with_service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }
    /// Sets `service.version`.
    pub fn with_service_version(mut self, version: impl Into<String>) -> Self {
        self.service_version = Some(version.into());
        self
    }
    /// Adds (or replaces) one resource attribute.
    pub fn with_resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        merge_pairs(&mut self.resource_attributes, vec![(key.into(), value.into())]);
        self
    }
    /// Disables (or re-enables) every signal, as `OTEL_SDK_DISABLED` does.
    pub fn with_sdk_disabled(mut self, disabled: bool) -> Self {
        self.sdk_disabled = Some(disabled);
        self
    }
    /// Sets the trace exporters (an empty list means none).
    pub fn with_traces_exporters(mut self, exporters: impl IntoIterator<Item = TraceExporter>) -> Self {
        self.traces_exporters = Some(dedup(exporters));
        self
    }
    /// Sets the metric exporters (an empty list means none).
    pub fn with_metrics_exporters(mut self, exporters: impl IntoIterator<Item = MetricExporter>) -> Self {
        self.metrics_exporters = Some(dedup(exporters));
        self
    }
    /// Sets the log exporters (an empty list means none).
    pub fn with_logs_exporters(mut self, exporters: impl IntoIterator<Item = LogExporter>) -> Self {
        self.logs_exporters = Some(dedup(exporters));
        self
    }
    /// Sets the OTLP endpoint of every signal (checked at `init`).
    pub fn with_otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp.endpoint = Some(endpoint.into());
        self
    }
    /// Sets the OTLP endpoint of one signal, used as given (checked at `init`).
    pub fn with_otlp_signal_endpoint(mut self, signal: Signal, endpoint: impl Into<String>) -> Self {
        self.otlp_scope_mut(signal).endpoint = Some(endpoint.into());
        self
    }
    /// Sets the OTLP protocol of every signal.
    pub fn with_otlp_protocol(mut self, protocol: OtlpProtocol) -> Self {
        self.otlp.protocol = Some(protocol);
        self
    }
    /// Sets the OTLP protocol of one signal.
    pub fn with_otlp_signal_protocol(mut self, signal: Signal, protocol: OtlpProtocol) -> Self {
        self.otlp_scope_mut(signal).protocol = Some(protocol);
        self
    }
    /// Adds an OTLP request header for every signal.
    pub fn with_otlp_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let headers = self.otlp.headers.get_or_insert_with(Vec::new);
        merge_pairs(headers, vec![(key.into(), value.into())]);
        self
    }
    /// Sets the OTLP export timeout of every signal.
    pub fn with_otlp_timeout(mut self, timeout: Duration) -> Self {
        self.otlp.timeout = Some(timeout);
        self
    }
    /// Sets the OTLP compression of every signal.
    pub fn with_otlp_compression(mut self, compression: OtlpCompression) -> Self {
        self.otlp.compression = Some(compression);
        self
    }
    /// Sets the host the Prometheus endpoint binds to.
    pub fn with_prometheus_host(mut self, host: impl Into<String>) -> Self {
        self.prometheus_host = Some(host.into());
        self
    }
    /// Sets the Prometheus endpoint's port (`0` picks a free one; see `Telemetry::prometheus_addr`).
    pub fn with_prometheus_port(mut self, port: u16) -> Self {
        self.prometheus_port = Some(port);
        self
    }
    /// Sets the path the Prometheus endpoint serves.
    pub fn with_prometheus_path(mut self, path: impl Into<String>) -> Self {
        self.prometheus_path = Some(path.into());
        self
    }
    /// Requires `Authorization: Bearer <token>` on the pull endpoint.
    pub fn with_prometheus_bearer_token(mut self, token: impl Into<String>) -> Self {
        self.prometheus_bearer_token = Some(token.into());
        self
    }
    /// Requires HTTP basic auth on the pull endpoint.
    pub fn with_prometheus_basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.prometheus_basic_auth = Some((user.into(), password.into()));
        self
    }
    /// Serves the pull endpoint over HTTPS with this PEM certificate chain and key (`tls` feature).
    pub fn with_prometheus_tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.prometheus_tls = Some((cert.into(), key.into()));
        self
    }
    /// Sets the interval of pushed (OTLP, console) metric exports.
    pub fn with_metric_export_interval(mut self, interval: Duration) -> Self {
        self.metric_export_interval = Some(interval);
        self
    }
    /// Sets the trace sampler.
    pub fn with_sampler(mut self, sampler: SamplerConfig) -> Self {
        self.sampler = Some(sampler);
        self
    }
    /// Prints `tracing` events to stderr (or not).
    pub fn with_console_log(mut self, enabled: bool) -> Self {
        self.console_log = Some(enabled);
        self
    }
    /// Sets the `tracing` filter directives (as in `RUST_LOG`; checked at `init`).
    pub fn with_log_filter(mut self, directives: impl Into<String>) -> Self {
        self.log_filter = Some(directives.into());
        self
    }
    /// Sets the upper bound of flush and shutdown.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = Some(timeout);
        self
    }
    /// Sets the most attribute sets kept per metric instrument; more fold into an overflow series
    /// carrying `otel.metric.overflow=true`.
    pub fn with_cardinality_limit(mut self, limit: usize) -> Self {
        self.cardinality_limit = Some(limit);
        self
    }

    /// Sets the prefix of the stage and worker namespaces (`zephyr` gives `zephyr.stage` and
    /// `zephyr.worker`; checked at `init`).
    pub fn with_namespace(mut self, prefix: impl Into<String>) -> Self {
        self.namespace = Some(prefix.into());
        self
    }
    /// Sets the interval of periodic worker samples (at least 100 ms; checked at `init`).
    pub fn with_sample_interval(mut self, interval: Duration) -> Self {
        self.sample_interval = Some(interval);
        self
    }
    /// Sets how long a finished stage's series stay exported before they are dropped.
    pub fn with_stage_retention(mut self, retention: Duration) -> Self {
        self.stage_retention = Some(retention);
        self
    }
    /// Appends every stage and worker row to this file as JSON Lines.
    pub fn with_rows_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.rows_file = Some(path.into());
        self
    }

    /// Sets the whole GPU configuration (mode, poll interval, library path, platform, opt-ins).
    #[cfg(feature = "gpu")]
    pub fn with_gpu(mut self, gpu: pipetel_gpu::GpuConfig) -> Self {
        self.gpu = gpu;
        self
    }
    /// Sets the GPU mode (`Auto`, `On`, `Off`).
    #[cfg(feature = "gpu")]
    pub fn with_gpu_mode(mut self, mode: pipetel_gpu::GpuMode) -> Self {
        self.gpu = self.gpu.with_mode(mode);
        self
    }
    /// Sets the NVML library path.
    #[cfg(feature = "gpu")]
    pub fn with_nvml_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.gpu = self.gpu.with_library_path(path);
        self
    }
    /// Sets the GPU poll interval (at least 1 s; checked at `init`).
    #[cfg(feature = "gpu")]
    pub fn with_gpu_poll_interval(mut self, interval: Duration) -> Self {
        self.gpu = self.gpu.with_poll_interval(interval);
        self
    }

    /// Registers the stage/worker metrics (or not; rows and spans flow either way).
    pub fn with_stage_metrics(mut self, enabled: bool) -> Self {
        self.stage_metrics = Some(enabled);
        self
    }
    /// Sets the service-metrics switches: queue and HTTP metrics, prefix, default buckets.
    pub fn with_service_metrics(mut self, service: crate::service::ServiceMetricsConfig) -> Self {
        self.service = service;
        self
    }
    /// Sets which spans feed the `span.duration` histogram, and with which duration.
    pub fn with_span_metrics(mut self, span_metrics: crate::span_metrics::SpanMetricsConfig) -> Self {
        self.span_metrics = span_metrics;
        self
    }

    fn otlp_scope_mut(&mut self, signal: Signal) -> &mut OtlpSettings {
        match signal {
            Signal::Traces => &mut self.otlp_traces,
            Signal::Metrics => &mut self.otlp_metrics,
            Signal::Logs => &mut self.otlp_logs,
        }
    }
    fn otlp_scope(&self, signal: Signal) -> &OtlpSettings {
        match signal {
            Signal::Traces => &self.otlp_traces,
            Signal::Metrics => &self.otlp_metrics,
            Signal::Logs => &self.otlp_logs,
        }
    }

    // ----- resolved values -----

    /// `service.name` (default: the executable's name, as OTel's `unknown_service:<exe>`).
    pub fn service_name(&self) -> String {
        self.service_name.clone().unwrap_or_else(|| {
            let exe =
                std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
            match exe {
                Some(exe) => format!("unknown_service:{exe}"),
                None => "unknown_service".to_string(),
            }
        })
    }
    pub(crate) fn explicit_service_name(&self) -> Option<&str> {
        self.service_name.as_deref()
    }
    /// `service.version`, when given.
    pub fn service_version(&self) -> Option<&str> {
        self.service_version.as_deref()
    }
    /// Extra resource attributes.
    pub fn resource_attributes(&self) -> &[(String, String)] {
        &self.resource_attributes
    }
    /// Whether the SDK is disabled.
    pub fn sdk_disabled(&self) -> bool {
        self.sdk_disabled.unwrap_or(false)
    }
    /// Whether any OTLP endpoint was configured explicitly (then OTLP becomes the default exporter).
    fn otlp_configured(&self) -> bool {
        [&self.otlp, &self.otlp_traces, &self.otlp_metrics, &self.otlp_logs].iter().any(|s| s.endpoint.is_some())
    }
    /// Trace exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn traces_exporters(&self) -> Vec<TraceExporter> {
        self.traces_exporters.clone().unwrap_or_else(|| {
            if self.otlp_configured() {
                vec![TraceExporter::Otlp]
            } else {
                Vec::new()
            }
        })
    }
    /// Metric exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else the Prometheus pull endpoint (the embedded default).
    pub fn metrics_exporters(&self) -> Vec<MetricExporter> {
        self.metrics_exporters.clone().unwrap_or_else(|| {
            if self.otlp_configured() {
                vec![MetricExporter::Otlp]
            } else {
                vec![MetricExporter::Prometheus]
            }
        })
    }
    /// Log exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn logs_exporters(&self) -> Vec<LogExporter> {
        self.logs_exporters.clone().unwrap_or_else(|| {
            if self.otlp_configured() {
                vec![LogExporter::Otlp]
            } else {
                Vec::new()
            }
        })
    }
    /// The resolved OTLP settings of one signal.
    ///
    /// # Errors
    /// An endpoint or header set in code that does not parse.
    pub fn otlp_target(&self, signal: Signal) -> Result<OtlpTarget, ConfigError> {
        let scope = self.otlp_scope(signal);
        let protocol = scope.protocol.or(self.otlp.protocol).unwrap_or(OtlpProtocol::HttpProtobuf);
        let code = |key: &'static str| Origin::Code(key);
        let endpoint = match (&scope.endpoint, &self.otlp.endpoint) {
            (Some(e), _) => {
                parse_endpoint(e).map_err(|r| ConfigError::invalid(code("with_otlp_signal_endpoint"), e, r))?
            }
            (None, Some(e)) => {
                let base = parse_endpoint(e).map_err(|r| ConfigError::invalid(code("with_otlp_endpoint"), e, r))?;
                match protocol {
                    OtlpProtocol::Grpc => base,
                    OtlpProtocol::HttpProtobuf => format!("{}{}", base.trim_end_matches('/'), signal.path()),
                }
            }
            (None, None) => match protocol {
                OtlpProtocol::Grpc => DEFAULT_OTLP_GRPC_ENDPOINT.to_string(),
                OtlpProtocol::HttpProtobuf => format!("{DEFAULT_OTLP_HTTP_ENDPOINT}{}", signal.path()),
            },
        };
        let headers = scope.headers.clone().or_else(|| self.otlp.headers.clone()).unwrap_or_default();
        for (k, _) in &headers {
            check_header_name(k).map_err(|r| ConfigError::invalid(code("with_otlp_header"), k, r))?;
        }
        Ok(OtlpTarget {
            endpoint,
            protocol,
            headers,
            timeout: scope.timeout.or(self.otlp.timeout).unwrap_or(DEFAULT_OTLP_TIMEOUT),
            compression: scope.compression.or(self.otlp.compression).unwrap_or(OtlpCompression::None),
        })
    }
    /// Host of the Prometheus endpoint.
    pub fn prometheus_host(&self) -> &str {
        self.prometheus_host.as_deref().unwrap_or(DEFAULT_PROMETHEUS_HOST)
    }
    /// Port of the Prometheus endpoint.
    pub fn prometheus_port(&self) -> u16 {
        self.prometheus_port.unwrap_or(DEFAULT_PROMETHEUS_PORT)
    }
    /// Path of the Prometheus endpoint.
    pub fn prometheus_path(&self) -> &str {
        self.prometheus_path.as_deref().unwrap_or(DEFAULT_PROMETHEUS_PATH)
    }
    /// The bearer token the pull endpoint requires, if any.
    pub fn prometheus_bearer_token(&self) -> Option<&str> {
        self.prometheus_bearer_token.as_deref()
    }
    /// The basic-auth user and password the pull endpoint requires, if any.
    pub fn prometheus_basic_auth(&self) -> Option<(&str, &str)> {
        self.prometheus_basic_auth.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }
    /// The certificate and key the pull endpoint serves HTTPS with, if any.
    pub fn prometheus_tls(&self) -> Option<(&Path, &Path)> {
        self.prometheus_tls.as_ref().map(|(c, k)| (c.as_path(), k.as_path()))
    }
    /// Interval of pushed metric exports.
    pub fn metric_export_interval(&self) -> Duration {
        self.metric_export_interval.unwrap_or(DEFAULT_EXPORT_INTERVAL)
    }
    /// The trace sampler.
    pub fn sampler(&self) -> SamplerConfig {
        self.sampler.unwrap_or(SamplerConfig::ParentBasedAlwaysOn)
    }
    /// Whether `tracing` events are printed to stderr.
    pub fn console_log(&self) -> bool {
        self.console_log.unwrap_or(true)
    }
    /// The `tracing` filter directives.
    pub fn log_filter(&self) -> &str {
        self.log_filter.as_deref().unwrap_or("info")
    }
    /// Upper bound of flush and shutdown.
    pub fn shutdown_timeout(&self) -> Duration {
        self.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT)
    }
    /// Most attribute sets kept per metric instrument.
    pub fn cardinality_limit(&self) -> usize {
        self.cardinality_limit.unwrap_or(DEFAULT_CARDINALITY_LIMIT)
    }

    /// Prefix of the stage and worker namespaces.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }
    /// Interval of periodic worker samples.
    pub fn sample_interval(&self) -> Duration {
        self.sample_interval.unwrap_or(DEFAULT_SAMPLE_INTERVAL)
    }
    /// How long a finished stage's series stay exported.
    pub fn stage_retention(&self) -> Duration {
        self.stage_retention.unwrap_or(DEFAULT_STAGE_RETENTION)
    }
    /// The JSON Lines file rows are appended to, if any.
    pub fn rows_file(&self) -> Option<&Path> {
        self.rows_file.as_deref()
    }

    /// The GPU configuration.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> &pipetel_gpu::GpuConfig {
        &self.gpu
    }

    /// Whether the stage/worker metrics are registered.
    pub fn stage_metrics(&self) -> bool {
        self.stage_metrics.unwrap_or(true)
    }
    /// The service-metrics configuration ([`ServiceMetrics::from_config`](crate::service::ServiceMetrics::from_config)).
    pub fn service_metrics(&self) -> &crate::service::ServiceMetricsConfig {
        &self.service
    }
    /// The span-metrics configuration.
    pub fn span_metrics(&self) -> &crate::span_metrics::SpanMetricsConfig {
        &self.span_metrics
    }

    /// Checks the values set in code (the environment and the file were checked when read).
    ///
    /// # Errors
    /// The first value that is out of range, naming its setter.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let code = |key: &'static str| Origin::Code(key);
        for signal in [Signal::Traces, Signal::Metrics, Signal::Logs] {
            self.otlp_target(signal)?;
        }
        if let Some(h) = &self.prometheus_host {
            parse_host(h).map_err(|r| ConfigError::invalid(code("with_prometheus_host"), h, r))?;
        }
        if let Some(p) = &self.prometheus_path {
            parse_path(p).map_err(|r| ConfigError::invalid(code("with_prometheus_path"), p, r))?;
        }
        if let Some(t) = &self.prometheus_bearer_token {
            parse_token(t).map_err(|r| ConfigError::invalid(code("with_prometheus_bearer_token"), "<redacted>", r))?;
        }
        if let Some((u, p)) = &self.prometheus_basic_auth {
            parse_basic_auth(&format!("{u}:{p}"))
                .map_err(|r| ConfigError::invalid(code("with_prometheus_basic_auth"), "<redacted>", r))?;
            if u.contains(':') {
                return Err(ConfigError::invalid(
                    code("with_prometheus_basic_auth"),
                    u,
                    "the user must not contain `:`",
                ));
            }
        }
        if self.metric_export_interval == Some(Duration::ZERO) {
            return Err(ConfigError::invalid(code("with_metric_export_interval"), "0s", "must be greater than zero"));
        }
        if self.shutdown_timeout == Some(Duration::ZERO) {
            return Err(ConfigError::invalid(code("with_shutdown_timeout"), "0s", "must be greater than zero"));
        }
        if let Some(limit) = self.cardinality_limit {
            parse_cardinality(&limit.to_string())
                .map_err(|r| ConfigError::invalid(code("with_cardinality_limit"), limit.to_string(), r))?;
        }
        if let Some(SamplerConfig::TraceIdRatio(r) | SamplerConfig::ParentBasedTraceIdRatio(r)) = self.sampler {
            if !(0.0..=1.0).contains(&r) {
                return Err(ConfigError::invalid(code("with_sampler"), r.to_string(), "ratio must be within [0, 1]"));
            }
        }
        if let Some(f) = &self.log_filter {
            check_filter(f).map_err(|r| ConfigError::invalid(code("with_log_filter"), f, r))?;
        }
        if let Some(n) = &self.namespace {
            parse_namespace(n).map_err(|r| ConfigError::invalid(code("with_namespace"), n, r))?;
        }
        if let Some(i) = self.sample_interval {
            if i < MIN_SAMPLE_INTERVAL {
                return Err(ConfigError::invalid(
                    code("with_sample_interval"),
                    format!("{i:?}"),
                    "must be at least 100 ms",
                ));
            }
        }
        if let Err(reason) = crate::service::parse_buckets(
            &self.service.histogram_buckets.iter().map(f64::to_string).collect::<Vec<_>>().join(","),
        ) {
            return Err(ConfigError::invalid(
                code("with_service_metrics"),
                format!("{:?}", self.service.histogram_buckets),
                reason,
            ));
        }
        self.span_metrics.validate().map_err(|e| {
            ConfigError::invalid(code("with_span_metrics"), self.span_metrics.filter.clone(), e.to_string())
        })?;
        #[cfg(feature = "gpu")]
        self.gpu
            .validate()
            .map_err(|e| ConfigError::invalid(code("with_gpu"), format!("{:?}", self.gpu), e.to_string()))?;
        Ok(())
    }
}

// ----- the file -----

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    service_name: Option<String>,
    service_version: Option<String>,
    sdk_disabled: Option<bool>,
    #[serde(default)]
    resource: BTreeMap<String, String>,
    #[serde(default)]
    exporters: FileExporters,
    #[serde(default)]
    otlp: FileOtlp,
    #[serde(default)]
    prometheus: FilePrometheus,
    #[serde(default)]
    metrics: FileMetrics,
    #[serde(default)]
    traces: FileTraces,
    #[serde(default)]
    log: FileLog,
    #[serde(default)]
    pipeline: FilePipeline,
    #[serde(default)]
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    gpu: FileGpu,
    #[serde(default)]
    span_metrics: FileSpanMetrics,
    #[serde(default)]
    service: FileService,
    shutdown_timeout_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileService {
    prefix: Option<String>,
    queue_metrics: Option<bool>,
    http_metrics: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpanMetrics {
    enabled: Option<bool>,
    allow: Option<Vec<String>>,
    filter: Option<String>,
    time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
struct FileGpu {
    enabled: Option<String>,
    poll_interval_ms: Option<u64>,
    nvml_library: Option<PathBuf>,
    rocm_smi_library: Option<PathBuf>,
    platform: Option<String>,
    pcie_throughput: Option<bool>,
    process_memory: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePipeline {
    metrics: Option<bool>,
    namespace: Option<String>,
    sample_interval_ms: Option<u64>,
    retention_ms: Option<u64>,
    rows_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileExporters {
    traces: Option<Vec<String>>,
    metrics: Option<Vec<String>>,
    logs: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOtlpScope {
    endpoint: Option<String>,
    protocol: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    timeout_ms: Option<u64>,
    compression: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileOtlp {
    #[serde(flatten)]
    all: FileOtlpScope,
    traces: Option<FileOtlpScope>,
    metrics: Option<FileOtlpScope>,
    logs: Option<FileOtlpScope>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePrometheus {
    host: Option<String>,
    port: Option<u16>,
    path: Option<String>,
    bearer_token: Option<String>,
    basic_auth: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMetrics {
    export_interval_ms: Option<u64>,
    cardinality_limit: Option<usize>,
    histogram_buckets: Option<Vec<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTraces {
    sampler: Option<String>,
    sampler_arg: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLog {
    filter: Option<String>,
    console: Option<bool>,
}

impl FileConfig {
    fn into_config(self, path: &Path) -> Result<Config, ConfigError> {
        let key = |k: &str| Origin::File { path: path.to_path_buf(), key: k.to_string() };
        let mut c = Config {
            service_name: self.service_name,
            service_version: self.service_version,
            sdk_disabled: self.sdk_disabled,
            resource_attributes: self.resource.into_iter().collect(),
            ..Config::default()
        };
        for (k, _) in &c.resource_attributes {
            if k.trim().is_empty() {
                return Err(ConfigError::invalid(key("resource"), k, "empty attribute key"));
            }
        }
        if let Some(v) = self.exporters.traces {
            let joined = v.join(",");
            c.traces_exporters = Some(
                parse_trace_exporters(&joined)
                    .map_err(|r| ConfigError::invalid(key("exporters.traces"), &joined, r))?,
            );
        }
        if let Some(v) = self.exporters.metrics {
            let joined = v.join(",");
            c.metrics_exporters = Some(
                parse_metric_exporters(&joined)
                    .map_err(|r| ConfigError::invalid(key("exporters.metrics"), &joined, r))?,
            );
        }
        if let Some(v) = self.exporters.logs {
            let joined = v.join(",");
            c.logs_exporters = Some(
                parse_log_exporters(&joined).map_err(|r| ConfigError::invalid(key("exporters.logs"), &joined, r))?,
            );
        }
        let scopes = [
            ("otlp", Some(self.otlp.all), &mut c.otlp),
            ("otlp.traces", self.otlp.traces, &mut c.otlp_traces),
            ("otlp.metrics", self.otlp.metrics, &mut c.otlp_metrics),
            ("otlp.logs", self.otlp.logs, &mut c.otlp_logs),
        ];
        for (prefix, scope, target) in scopes {
            let Some(scope) = scope else { continue };
            let k = |field: &str| key(&format!("{prefix}.{field}"));
            if let Some(v) = scope.endpoint {
                target.endpoint = Some(parse_endpoint(&v).map_err(|r| ConfigError::invalid(k("endpoint"), &v, r))?);
            }
            if let Some(v) = scope.protocol {
                target.protocol =
                    Some(OtlpProtocol::parse(&v).map_err(|r| ConfigError::invalid(k("protocol"), &v, r))?);
            }
            if let Some(h) = scope.headers {
                for name in h.keys() {
                    check_header_name(name).map_err(|r| ConfigError::invalid(k("headers"), name, r))?;
                }
                target.headers = Some(h.into_iter().collect());
            }
            if let Some(ms) = scope.timeout_ms {
                target.timeout = Some(Duration::from_millis(ms));
            }
            if let Some(v) = scope.compression {
                target.compression =
                    Some(OtlpCompression::parse(&v).map_err(|r| ConfigError::invalid(k("compression"), &v, r))?);
            }
        }
        if let Some(h) = self.prometheus.host {
            c.prometheus_host = Some(parse_host(&h).map_err(|r| ConfigError::invalid(key("prometheus.host"), &h, r))?);
        }
        c.prometheus_port = self.prometheus.port;
        if let Some(t) = self.prometheus.bearer_token {
            c.prometheus_bearer_token = Some(
                parse_token(&t).map_err(|r| ConfigError::invalid(key("prometheus.bearer_token"), "<redacted>", r))?,
            );
        }
        if let Some(b) = self.prometheus.basic_auth {
            c.prometheus_basic_auth = Some(
                parse_basic_auth(&b)
                    .map_err(|r| ConfigError::invalid(key("prometheus.basic_auth"), "<redacted>", r))?,
            );
        }
        match (self.prometheus.tls_cert, self.prometheus.tls_key) {
            (Some(cert), Some(k)) => c.prometheus_tls = Some((cert, k)),
            (Some(cert), None) => {
                return Err(ConfigError::invalid(
                    key("prometheus.tls_cert"),
                    cert.display().to_string(),
                    "needs prometheus.tls_key too",
                ))
            }
            (None, Some(k)) => {
                return Err(ConfigError::invalid(
                    key("prometheus.tls_key"),
                    k.display().to_string(),
                    "needs prometheus.tls_cert too",
                ))
            }
            (None, None) => {}
        }
        if let Some(p) = self.prometheus.path {
            c.prometheus_path = Some(parse_path(&p).map_err(|r| ConfigError::invalid(key("prometheus.path"), &p, r))?);
        }
        if let Some(ms) = self.metrics.export_interval_ms {
            if ms == 0 {
                return Err(ConfigError::invalid(key("metrics.export_interval_ms"), "0", "must be greater than zero"));
            }
            c.metric_export_interval = Some(Duration::from_millis(ms));
        }
        if let Some(limit) = self.metrics.cardinality_limit {
            c.cardinality_limit = Some(
                parse_cardinality(&limit.to_string())
                    .map_err(|r| ConfigError::invalid(key("metrics.cardinality_limit"), limit.to_string(), r))?,
            );
        }
        if let Some(s) = self.traces.sampler {
            c.sampler = Some(parse_sampler(&s, self.traces.sampler_arg.as_deref()).map_err(|(arg, val, r)| {
                if arg {
                    ConfigError::invalid(key("traces.sampler_arg"), val, r)
                } else {
                    ConfigError::invalid(key("traces.sampler"), &s, r)
                }
            })?);
        }
        if let Some(f) = self.log.filter {
            check_filter(&f).map_err(|r| ConfigError::invalid(key("log.filter"), &f, r))?;
            c.log_filter = Some(f);
        }
        c.console_log = self.log.console;
        if let Some(n) = self.pipeline.namespace {
            c.namespace =
                Some(parse_namespace(&n).map_err(|r| ConfigError::invalid(key("pipeline.namespace"), &n, r))?);
        }
        if let Some(ms) = self.pipeline.sample_interval_ms {
            c.sample_interval = Some(
                parse_sample_interval(&ms.to_string())
                    .map_err(|r| ConfigError::invalid(key("pipeline.sample_interval_ms"), ms.to_string(), r))?,
            );
        }
        c.stage_metrics = self.pipeline.metrics;
        if let Some(b) = self.metrics.histogram_buckets {
            let joined = b.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
            c.service.histogram_buckets = crate::service::parse_buckets(&joined)
                .map_err(|r| ConfigError::invalid(key("metrics.histogram_buckets"), &joined, r))?;
        }
        if let Some(p) = self.service.prefix {
            if crate::registry::Registry::new(p.trim()).is_err() || p.trim().is_empty() {
                return Err(ConfigError::invalid(key("service.prefix"), &p, "expected a snake_case prefix"));
            }
            c.service.prefix = p.trim().to_string();
        }
        if let Some(b) = self.service.queue_metrics {
            c.service.queue_metrics = b;
        }
        if let Some(b) = self.service.http_metrics {
            c.service.http_metrics = b;
        }
        let sm = self.span_metrics;
        if let Some(on) = sm.enabled {
            c.span_metrics = c.span_metrics.with_enabled(on);
        }
        if let Some(allow) = sm.allow {
            c.span_metrics = c.span_metrics.with_allow(allow);
        }
        if let Some(f) = sm.filter {
            c.span_metrics = c.span_metrics.with_filter(f.clone());
            c.span_metrics
                .validate()
                .map_err(|e| ConfigError::invalid(key("span_metrics.filter"), &f, e.to_string()))?;
        }
        if let Some(t) = sm.time {
            let time = t
                .parse::<crate::span_metrics::SpanTime>()
                .map_err(|e| ConfigError::invalid(key("span_metrics.time"), &t, e.to_string()))?;
            c.span_metrics = c.span_metrics.with_time(time);
        }
        c.stage_retention = self.pipeline.retention_ms.map(Duration::from_millis);
        c.rows_file = self.pipeline.rows_file;
        #[cfg(feature = "gpu")]
        {
            let g = self.gpu;
            if let Some(v) = g.enabled {
                c.gpu.mode = v.parse().map_err(|r: &str| ConfigError::invalid(key("gpu.enabled"), &v, r))?;
            }
            if let Some(ms) = g.poll_interval_ms {
                c.gpu.poll_interval = Duration::from_millis(ms);
                if c.gpu.poll_interval < pipetel_gpu::MIN_POLL_INTERVAL {
                    return Err(ConfigError::invalid(
                        key("gpu.poll_interval_ms"),
                        ms.to_string(),
                        "must be at least 1000",
                    ));
                }
            }
            if let Some(p) = g.nvml_library {
                if p.as_os_str().is_empty() {
                    return Err(ConfigError::invalid(
                        key("gpu.nvml_library"),
                        "",
                        "empty path; leave it out for the default library",
                    ));
                }
                c.gpu.library_path = Some(p);
            }
            if let Some(p) = g.rocm_smi_library {
                if p.as_os_str().is_empty() {
                    return Err(ConfigError::invalid(
                        key("gpu.rocm_smi_library"),
                        "",
                        "empty path; leave it out for the default names",
                    ));
                }
                c.gpu.rocm_library_path = Some(p);
            }
            if let Some(v) = g.platform {
                c.gpu.platform = v.parse().map_err(|r: &str| ConfigError::invalid(key("gpu.platform"), &v, r))?;
            }
            if let Some(b) = g.pcie_throughput {
                c.gpu.pcie_throughput = b;
            }
            if let Some(b) = g.process_memory {
                c.gpu.process_memory = b;
            }
        }
        if let Some(ms) = self.shutdown_timeout_ms {
            if ms == 0 {
                return Err(ConfigError::invalid(key("shutdown_timeout_ms"), "0", "must be greater than zero"));
            }
            c.shutdown_timeout = Some(Duration::from_millis(ms));
        }
        Ok(c)
    }
}

// ----- parsers: each returns the reason, the caller names the origin -----

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected `true` or `false`".into()),
    }
}

fn parse_u64(v: &str) -> Result<u64, String> {
    v.trim().parse::<u64>().map_err(|_| "expected a whole number of milliseconds".to_string())
}

fn parse_millis(v: &str) -> Result<Duration, String> {
    parse_u64(v).map(Duration::from_millis)
}

fn parse_positive_millis(v: &str) -> Result<Duration, String> {
    match parse_u64(v)? {
        0 => Err("must be greater than zero".into()),
        ms => Ok(Duration::from_millis(ms)),
    }
}

fn parse_token(v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be non-empty visible ASCII without spaces".into());
    }
    Ok(v.to_string())
}

fn parse_basic_auth(v: &str) -> Result<(String, String), String> {
    let (user, password) = v.split_once(':').ok_or("expected user:password")?;
    if user.is_empty() || password.is_empty() {
        return Err("expected user:password, both non-empty".into());
    }
    if v.chars().any(char::is_control) {
        return Err("control characters are not allowed".into());
    }
    Ok((user.to_string(), password.to_string()))
}

const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

fn parse_sample_interval(v: &str) -> Result<Duration, String> {
    let d = parse_millis(v)?;
    if d < MIN_SAMPLE_INTERVAL {
        return Err("must be at least 100 ms".into());
    }
    Ok(d)
}

fn parse_namespace(v: &str) -> Result<String, String> {
    let v = v.trim();
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_lowercase())
        && v.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        });
    if ok {
        Ok(v.to_string())
    } else {
        Err("expected lower-case letters, digits and `_`, in dot-separated parts, starting with a letter".into())
    }
}

fn parse_port(v: &str) -> Result<u16, String> {
    v.trim().parse::<u16>().map_err(|_| "expected a port number between 0 and 65535".to_string())
}

fn parse_cardinality(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) if n > 10_000_000 => Err("must be at most 10000000".into()),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a whole number".into()),
    }
}

fn parse_ratio(v: &str) -> Result<f64, String> {
    match v.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        Ok(_) => Err("ratio must be within [0, 1]".into()),
        Err(_) => Err("expected a number within [0, 1]".into()),
    }
}

/// On error: (whether the argument is the culprit, the culprit value, the reason).
fn parse_sampler(name: &str, arg: Option<&str>) -> Result<SamplerConfig, (bool, String, String)> {
    let ratio = || -> Result<f64, (bool, String, String)> {
        match arg {
            None => Ok(1.0),
            Some(a) => parse_ratio(a).map_err(|r| (true, a.to_string(), r)),
        }
    };
    match name.trim() {
        "always_on" => Ok(SamplerConfig::AlwaysOn),
        "always_off" => Ok(SamplerConfig::AlwaysOff),
        "traceidratio" => Ok(SamplerConfig::TraceIdRatio(ratio()?)),
        "parentbased_always_on" => Ok(SamplerConfig::ParentBasedAlwaysOn),
        "parentbased_always_off" => Ok(SamplerConfig::ParentBasedAlwaysOff),
        "parentbased_traceidratio" => Ok(SamplerConfig::ParentBasedTraceIdRatio(ratio()?)),
        other => Err((
            false,
            other.to_string(),
            "expected one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio".into(),
        )),
    }
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn dedup<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn parse_exporters<T: PartialEq>(v: &str, allowed: &str, one: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    let mut saw_none = false;
    for name in split_list(v) {
        if name == "none" {
            saw_none = true;
            continue;
        }
        match one(name) {
            Some(e) => out.push(e),
            None => return Err(format!("unknown exporter `{name}`; expected a comma list of {allowed}")),
        }
    }
    if saw_none && !out.is_empty() {
        return Err("`none` cannot be combined with other exporters".into());
    }
    Ok(dedup(out))
}

fn parse_trace_exporters(v: &str) -> Result<Vec<TraceExporter>, String> {
    parse_exporters(v, "otlp, console, none", |n| match n {
        "otlp" => Some(TraceExporter::Otlp),
        "console" => Some(TraceExporter::Console),
        _ => None,
    })
}

fn parse_metric_exporters(v: &str) -> Result<Vec<MetricExporter>, String> {
    parse_exporters(v, "prometheus, otlp, console, none", |n| match n {
        "prometheus" => Some(MetricExporter::Prometheus),
        "otlp" => Some(MetricExporter::Otlp),
        "console" => Some(MetricExporter::Console),
        _ => None,
    })
}

fn parse_log_exporters(v: &str) -> Result<Vec<LogExporter>, String> {
    parse_exporters(v, "otlp, console, none", |n| match n {
        "otlp" => Some(LogExporter::Otlp),
        "console" => Some(LogExporter::Console),
        _ => None,
    })
}

fn parse_endpoint(v: &str) -> Result<String, String> {
    let v = v.trim();
    let url = url::Url::parse(v).map_err(|e| format!("not a URL: {e}"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("scheme must be http or https, not `{}`", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".into());
    }
    Ok(v.to_string())
}

fn parse_host(v: &str) -> Result<String, String> {
    let v = v.trim();
    if v.is_empty() {
        return Err("empty host".into());
    }
    let bare = v.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return Ok(bare.to_string());
    }
    let valid = v.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
    });
    if valid {
        Ok(v.to_string())
    } else {
        Err("expected a host name or an IP address".into())
    }
}

fn parse_path(v: &str) -> Result<String, String> {
    let v = v.trim();
    if !v.starts_with('/') {
        return Err("must start with `/`".into());
    }
    if v.chars().any(|c| c.is_whitespace() || c == '?' || c == '#') {
        return Err("must not contain whitespace, `?` or `#`".into());
    }
    Ok(v.to_string())
}

fn check_filter(v: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::builder().parse(v).map(|_| ()).map_err(|e| format!("not a valid filter: {e}"))
}

fn check_header_name(k: &str) -> Result<(), String> {
    let ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{k}` is not a valid header name"))
    }
}

fn parse_headers(v: &str) -> Result<Vec<(String, String)>, String> {
    let pairs = parse_key_values(v)?;
    for (k, val) in &pairs {
        check_header_name(k)?;
        if val.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
            return Err(format!("the value of header `{k}` contains control characters"));
        }
    }
    Ok(pairs)
}

/// `k=v,k2=v2` with percent-encoded values (the W3C baggage-like format of the OTel spec).
fn parse_key_values(v: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in split_list(v) {
        let Some((k, val)) = item.split_once('=') else {
            return Err(format!("`{item}` is not a key=value pair"));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("`{item}` has an empty key"));
        }
        let val = percent_decode(val.trim()).ok_or_else(|| format!("`{item}` has a malformed percent-encoding"))?;
        out.push((k.to_string(), val));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn merge_pairs(into: &mut Vec<(String, String)>, pairs: Vec<(String, String)>) {
    for (k, v) in pairs {
        match into.iter_mut().find(|(existing, _)| *existing == k) {
            Some(slot) => slot.1 = v,
            None => into.push((k, v)),
        }
    }
}

#[cfg(test)]
mod tests;
