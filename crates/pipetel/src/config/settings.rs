//! [`Config::resolve`]: every value checked once, by its setting's rule and naming its origin,
//! and the whole turned into the plain [`Settings`] each part of `init` reads.

use std::path::PathBuf;
use std::time::Duration;

use super::error::{ConfigError, Origin};
use super::groups::{ServiceMetricsConfig, SpanMetricsConfig};
use super::otlp::OtlpTarget;
use super::parse::Slot;
use super::values::{LogExporter, MetricExporter, SamplerConfig, Signal, TraceExporter};
use super::vars::{PIPETEL_PROMETHEUS_TLS_CERT, PIPETEL_PROMETHEUS_TLS_KEY};
use super::Config;

/// A resolved value with where it came from, for errors raised when it is used (a file that
/// cannot be opened, say).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    /// An error about this value, naming its origin.
    pub fn invalid(&self, value: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::invalid(self.origin.clone(), value, reason)
    }
}

/// The configuration resolved into plain values, grouped by what each part of `init` builds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// Every signal a no-op (`OTEL_SDK_DISABLED`).
    pub sdk_disabled: bool,
    /// The resource every signal carries.
    pub resource: ResourceSettings,
    /// The meter provider's readers and exporters.
    pub metrics: MetricsSettings,
    /// The tracer provider's sampler and exporters.
    pub traces: TracesSettings,
    /// The logger provider's exporters.
    pub logs: LogsSettings,
    /// The `tracing` subscriber.
    pub subscriber: SubscriberSettings,
    /// Stage and worker telemetry.
    pub pipeline: PipelineSettings,
    /// Service metrics switches, prefix and default buckets.
    pub service: ServiceMetricsConfig,
    /// The span-metrics layer; the origin is its filter's.
    pub span_metrics: Sourced<SpanMetricsConfig>,
    /// GPU telemetry.
    #[cfg(feature = "gpu")]
    pub gpu: pipetel_gpu::GpuConfig,
    /// Upper bound of flush and shutdown.
    pub shutdown_timeout: Duration,
    /// Most attribute sets kept per metric instrument (SDK views, registry, pipeline).
    pub cardinality_limit: usize,
    /// Deprecated spellings met while reading, to log once a subscriber exists.
    pub deprecations: Vec<String>,
}

/// The resource's attributes from the configuration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ResourceSettings {
    /// `service.name`: set in code or `OTEL_SERVICE_NAME`, else `service.name` among the
    /// resource attributes, else `unknown_service:<exe>`.
    pub service_name: String,
    /// `service.version`, when given.
    pub service_version: Option<String>,
    /// The other attributes (`service.name` taken out).
    pub attributes: Vec<(String, String)>,
}

/// What the meter provider is built with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MetricsSettings {
    /// The metric exporters in effect.
    pub exporters: Vec<MetricExporter>,
    /// The pull endpoint (used when `exporters` holds [`MetricExporter::Prometheus`]).
    pub prometheus: PrometheusSettings,
    /// The OTLP target (used when `exporters` holds [`MetricExporter::Otlp`]).
    pub otlp: OtlpTarget,
    /// Interval of pushed exports.
    pub export_interval: Duration,
    /// Which measurements may carry an exemplar.
    pub exemplar_filter: super::ExemplarFilter,
}

/// The Prometheus pull endpoint.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PrometheusSettings {
    /// Host it binds to.
    pub host: String,
    /// Port (`0` picks a free one).
    pub port: u16,
    /// Path it serves.
    pub path: String,
    /// A bearer token it requires.
    pub bearer_token: Option<String>,
    /// A basic-auth user and password it requires.
    pub basic_auth: Option<(String, String)>,
    /// Certificate chain and key for HTTPS; the origin is the certificate's.
    pub tls: Option<Sourced<(PathBuf, PathBuf)>>,
}

/// What the tracer provider is built with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TracesSettings {
    /// The trace exporters in effect.
    pub exporters: Vec<TraceExporter>,
    /// The sampler.
    pub sampler: SamplerConfig,
    /// The OTLP target (used when `exporters` holds [`TraceExporter::Otlp`]).
    pub otlp: OtlpTarget,
}

/// What the logger provider is built with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LogsSettings {
    /// The log exporters in effect.
    pub exporters: Vec<LogExporter>,
    /// The OTLP target (used when `exporters` holds [`LogExporter::Otlp`]).
    pub otlp: OtlpTarget,
}

/// The `tracing` subscriber `init` installs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SubscriberSettings {
    /// The filter directives, and where they came from.
    pub log_filter: Sourced<String>,
    /// Print events to stderr.
    pub console: bool,
}

/// Stage and worker telemetry.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PipelineSettings {
    /// Prefix of the stage and worker namespaces.
    pub namespace: String,
    /// Interval of worker samples.
    pub sample_interval: Duration,
    /// How long a finished stage's series stay exported.
    pub retention: Duration,
    /// The JSON Lines file rows are appended to, and where it was named.
    pub rows_file: Option<Sourced<PathBuf>>,
    /// Register the stage/worker metrics.
    pub metrics: bool,
}

impl Config {
    /// Checks every value with its setting's rule (values set in code included) and the settings
    /// that go together, and resolves the whole into plain [`Settings`]: defaults filled in, the
    /// exporters in effect chosen, each signal's OTLP target resolved.
    ///
    /// # Errors
    /// The first value that is refused, naming where it came from (setter, variable or file key).
    pub fn resolve(&self) -> Result<Settings, ConfigError> {
        self.check_every_value()?;
        let tls = match (&self.prometheus_tls_cert, &self.prometheus_tls_key) {
            (Some(cert), Some(key)) => {
                Some(Sourced { value: (cert.value.clone(), key.value.clone()), origin: cert.origin.clone() })
            }
            (Some(cert), None) => {
                let reason = format!("needs a key too ({PIPETEL_PROMETHEUS_TLS_KEY} or prometheus.tls_key)");
                return Err(ConfigError::invalid(cert.origin.clone(), cert.value.display().to_string(), reason));
            }
            (None, Some(key)) => {
                let reason = format!("needs a certificate too ({PIPETEL_PROMETHEUS_TLS_CERT} or prometheus.tls_cert)");
                return Err(ConfigError::invalid(key.origin.clone(), key.value.display().to_string(), reason));
            }
            (None, None) => None,
        };
        Ok(Settings {
            sdk_disabled: self.sdk_disabled(),
            resource: self.resource_settings(),
            metrics: MetricsSettings {
                exporters: self.metrics_exporters(),
                prometheus: PrometheusSettings {
                    host: self.prometheus_host().to_string(),
                    port: self.prometheus_port(),
                    path: self.prometheus_path().to_string(),
                    bearer_token: self.prometheus_bearer_token().map(str::to_string),
                    basic_auth: self.prometheus_basic_auth().map(|(u, p)| (u.to_string(), p.to_string())),
                    tls,
                },
                otlp: self.otlp_target(Signal::Metrics)?,
                export_interval: self.metric_export_interval(),
                exemplar_filter: self.exemplar_filter(),
            },
            traces: TracesSettings {
                exporters: self.traces_exporters(),
                sampler: self.sampler(),
                otlp: self.otlp_target(Signal::Traces)?,
            },
            logs: LogsSettings { exporters: self.logs_exporters(), otlp: self.otlp_target(Signal::Logs)? },
            subscriber: SubscriberSettings {
                log_filter: Sourced { value: self.log_filter().to_string(), origin: self.log_filter.origin() },
                console: self.console_log(),
            },
            pipeline: PipelineSettings {
                namespace: self.namespace().to_string(),
                sample_interval: self.sample_interval(),
                retention: self.stage_retention(),
                rows_file: self
                    .rows_file
                    .as_ref()
                    .map(|s| Sourced { value: s.value.clone(), origin: s.origin.clone() }),
                metrics: self.stage_metrics(),
            },
            service: self.service_metrics(),
            span_metrics: Sourced { value: self.span_metrics(), origin: self.span_metrics_filter.origin() },
            #[cfg(feature = "gpu")]
            gpu: self.gpu(),
            shutdown_timeout: self.shutdown_timeout(),
            cardinality_limit: self.cardinality_limit(),
            deprecations: self.deprecations.clone(),
        })
    }

    /// Runs every set value's check. The OTLP values are checked as their targets resolve.
    fn check_every_value(&self) -> Result<(), ConfigError> {
        self.service_name.checked()?;
        self.service_version.checked()?;
        self.sdk_disabled.checked()?;
        self.traces_exporters.checked()?;
        self.metrics_exporters.checked()?;
        self.logs_exporters.checked()?;
        self.prometheus_host.checked()?;
        self.prometheus_port.checked()?;
        self.prometheus_path.checked()?;
        self.prometheus_bearer_token.checked()?;
        self.prometheus_basic_auth.checked()?;
        self.prometheus_tls_cert.checked()?;
        self.prometheus_tls_key.checked()?;
        self.metric_export_interval.checked()?;
        self.sampler.checked()?;
        self.sampler_arg.checked()?;
        self.console_log.checked()?;
        self.log_filter.checked()?;
        self.shutdown_timeout.checked()?;
        self.cardinality_limit.checked()?;
        self.namespace.checked()?;
        self.sample_interval.checked()?;
        self.stage_retention.checked()?;
        self.rows_file.checked()?;
        self.stage_metrics.checked()?;
        self.queue_metrics.checked()?;
        self.http_metrics.checked()?;
        self.service_prefix.checked()?;
        self.histogram_buckets.checked()?;
        self.span_metrics_enabled.checked()?;
        self.span_metrics_allow.checked()?;
        self.span_metrics_filter.checked()?;
        self.span_metrics_time.checked()?;
        self.exemplar_filter.checked()?;
        #[cfg(feature = "gpu")]
        {
            let g = &self.gpu;
            g.mode.checked()?;
            g.poll_interval.checked()?;
            g.nvml_library.checked()?;
            g.rocm_smi_library.checked()?;
            g.platform.checked()?;
            g.pcie_throughput.checked()?;
            g.process_memory.checked()?;
            g.init_timeout.checked()?;
        }
        Ok(())
    }

    /// `OTEL_SERVICE_NAME` (or code) beats `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, which
    /// beats the default.
    fn resource_settings(&self) -> ResourceSettings {
        let from_attributes =
            self.resource_attributes.iter().find(|(k, _)| k == "service.name").map(|(_, v)| v.clone());
        let service_name = match (self.service_name.value(), from_attributes) {
            (Some(name), _) => name.clone(),
            (None, Some(name)) => name,
            (None, None) => self.service_name(),
        };
        ResourceSettings {
            service_name,
            service_version: self.service_version().map(str::to_string),
            attributes: self.resource_attributes.iter().filter(|(k, _)| k != "service.name").cloned().collect(),
        }
    }
}
