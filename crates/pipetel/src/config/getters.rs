//! The values in effect: a getter per setting, giving the value set (unchecked; `resolve`
//! checks every value) or the setting's default, read from its entry in the table
//! (`Defaults`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::builder::Config;
use super::defaults::Value;
use super::otlp::{self, OtlpTarget};
use super::rule::{scope, OrDefault, Slot};
use super::table::Defaults;
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, ProgressMode,
    Propagator, SamplerConfig, Signal, TraceExporter,
};
use pipetel_core::settings::ConfigError;
use pipetel_core::settings::{ServiceMetricsConfig, SpanMetricsConfig};

/// Getters of the value in effect: the value set (unchecked), or the setting's default.
macro_rules! getters {
    ($( $(#[$attr:meta])* fn $name:ident() -> $ty:ty; )*) => {$(
        $(#[$attr])*
        pub fn $name(&self) -> $ty {
            OrDefault::or_default_to(&self.slots.$name, const { Defaults::$name.get() })
        }
    )*};
}

/// Getters of a group of settings: the group with each field the value set (unchecked, as the
/// other getters) or its setting's default.
macro_rules! group_getters {
    ($( $(#[$attr:meta])* fn $name:ident() -> $group:ident { $($field:ident: $slot:ident,)+ } )*) => {$(
        $(#[$attr])*
        pub fn $name(&self) -> $group {
            let mut group = $group::default();
            $(group.$field = match self.slots.$slot.value() {
                Some(value) => value.clone(),
                None => Value::owned(&const { Defaults::$slot.get() }),
            };)+
            group
        }
    )*};
}

impl Config {
    /// `service.name` (default: the executable's name, as OTel's `unknown_service:<exe>`).
    pub fn service_name(&self) -> String {
        self.slots.service_name.value().cloned().unwrap_or_else(|| {
            let exe =
                std::env::current_exe().ok().and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()));
            match exe {
                Some(exe) => format!("unknown_service:{exe}"),
                None => "unknown_service".to_string(),
            }
        })
    }
    /// `service.version`, when given.
    pub fn service_version(&self) -> Option<&str> {
        self.slots.service_version.value().map(String::as_str)
    }
    getters! {
        /// Whether the SDK is disabled.
        fn sdk_disabled() -> bool;
        /// Host of the Prometheus endpoint.
        fn prometheus_host() -> &str;
        /// Port of the Prometheus endpoint.
        fn prometheus_port() -> u16;
        /// Path of the Prometheus endpoint.
        fn prometheus_path() -> &str;
        /// Interval of pushed metric exports.
        fn metric_export_interval() -> Duration;
        /// Whether `tracing` events are printed to stderr.
        fn console_log() -> bool;
        /// The console's `tracing` filter directives.
        fn log_filter() -> &str;
        /// The console's line format.
        fn log_format() -> LogFormat;
        /// The filter directives of the spans exported as traces.
        fn traces_filter() -> &str;
        /// The filter directives of the events exported as log records.
        fn logs_filter() -> &str;
        /// Whether the process metrics are exported.
        fn process_metrics() -> bool;
        /// Upper bound of flush and shutdown.
        fn shutdown_timeout() -> Duration;
        /// Most attribute sets kept per metric instrument.
        fn cardinality_limit() -> usize;
        /// Prefix of the stage and worker namespaces.
        fn namespace() -> &str;
        /// Interval of periodic worker samples.
        fn sample_interval() -> Duration;
        /// How long a finished stage's series stay exported.
        fn stage_retention() -> Duration;
        /// Whether the stage/worker metrics are registered.
        fn stage_metrics() -> bool;
        /// Whether the stages' user counters are exported as `pipeline.stage.counters`.
        fn stage_counter_metrics() -> bool;
        /// Whether rows are written at all.
        fn rows_enabled() -> bool;
        /// Size at which the rows file rotates (0: never).
        fn rows_max_bytes() -> u64;
        /// Rotated rows files kept.
        fn rows_keep() -> u32;
        /// The progress display's mode.
        fn progress() -> ProgressMode;
        /// How far beyond the 75th percentile a skewed stage's slowest shard, or a straggler, is.
        fn skew_min() -> Duration;
        /// How long a shard may not move before it is stalled (zero: never).
        fn stall_timeout() -> Duration;
        /// What a stalled shard gets.
        fn stall_action() -> pipetel_core::settings::StallAction;
        /// Which shards have their own worker series.
        fn shard_metrics() -> pipetel_core::settings::ShardMetrics;
        /// The sampling profiler's mode.
        fn profile() -> pipetel_core::settings::ProfileMode;
        /// The profiler's samples per CPU second.
        fn profile_hz() -> u32;
    }
    /// The global text-map propagators (default: W3C trace context, then W3C baggage).
    pub fn propagators(&self) -> Vec<Propagator> {
        self.slots.propagators.value().cloned().unwrap_or_else(|| Value::owned(&const { Defaults::propagators.get() }))
    }
    /// How `service.instance.id` is made, as given (`random` when not set).
    pub fn instance_id(&self) -> &str {
        self.slots.instance_id.value().map_or(const { Defaults::instance_id.get() }, String::as_str)
    }
    getters! {
        /// The aggregation temporality of OTLP metric exports.
        fn metric_temporality() -> MetricTemporality;
        /// The aggregation of histograms that name no other.
        fn histogram_aggregation() -> HistogramAggregation;
        /// Upper bound of one pushed metric export.
        fn metric_export_timeout() -> Duration;
    }
    /// Extra resource attributes.
    pub fn resource_attributes(&self) -> &[(String, String)] {
        self.slots.resource_attributes.value().map_or(&[], Vec::as_slice)
    }
    /// Whether an OTLP endpoint was configured explicitly (then OTLP becomes the default exporter);
    /// profiles' own endpoint alone leaves the other signals' exporters as they were.
    fn otlp_configured(&self) -> bool {
        let profiles = scope(Signal::Profiles);
        self.slots.otlp_endpoint.iter().enumerate().any(|(at, endpoint)| at != profiles && endpoint.is_some())
    }
    /// The OTLP settings of profiles, when an endpoint applies to them (their own or the generic
    /// one): unlike the other signals', profiles go to no default endpoint.
    ///
    /// # Errors
    /// As [`Config::otlp_target`].
    pub(crate) fn profiles_otlp_target(&self) -> Result<Option<OtlpTarget>, ConfigError> {
        let endpoints = &self.slots.otlp_endpoint;
        if endpoints[0].is_none() && endpoints[scope(Signal::Profiles)].is_none() {
            return Ok(None);
        }
        self.otlp_target(Signal::Profiles).map(Some)
    }
    /// Trace exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn traces_exporters(&self) -> Vec<TraceExporter> {
        let default = &Defaults::traces_exporters;
        let default = if self.otlp_configured() { default.otherwise() } else { default.get() };
        self.slots.traces_exporters.value().cloned().unwrap_or_else(|| default.to_vec())
    }
    /// Metric exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else the Prometheus pull endpoint (the embedded default).
    pub fn metrics_exporters(&self) -> Vec<MetricExporter> {
        let default = &Defaults::metrics_exporters;
        let default = if self.otlp_configured() { default.otherwise() } else { default.get() };
        self.slots.metrics_exporters.value().cloned().unwrap_or_else(|| default.to_vec())
    }
    /// Log exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn logs_exporters(&self) -> Vec<LogExporter> {
        let default = &Defaults::logs_exporters;
        let default = if self.otlp_configured() { default.otherwise() } else { default.get() };
        self.slots.logs_exporters.value().cloned().unwrap_or_else(|| default.to_vec())
    }
    /// The resolved OTLP settings of one signal.
    ///
    /// # Errors
    /// A value it uses that its rule refuses (an endpoint or header set in code), naming where it
    /// came from.
    pub fn otlp_target(&self, signal: Signal) -> Result<OtlpTarget, ConfigError> {
        otlp::target(&self.slots, signal)
    }
    /// The bearer token the pull endpoint requires, if any.
    pub fn prometheus_bearer_token(&self) -> Option<&str> {
        self.slots.prometheus_bearer_token.value().map(String::as_str)
    }
    /// The basic-auth user and password the pull endpoint requires, if any.
    pub fn prometheus_basic_auth(&self) -> Option<(&str, &str)> {
        self.slots.prometheus_basic_auth.value().map(|(u, p)| (u.as_str(), p.as_str()))
    }
    /// The certificate and key the pull endpoint serves HTTPS with, if both are given.
    pub fn prometheus_tls(&self) -> Option<(&Path, &Path)> {
        Some((self.slots.prometheus_tls_cert.value()?.as_path(), self.slots.prometheus_tls_key.value()?.as_path()))
    }
    /// The trace sampler (its ratio from `OTEL_TRACES_SAMPLER_ARG` or the file's `sampler_arg`
    /// when those set it).
    pub fn sampler(&self) -> SamplerConfig {
        let sampler = self.slots.sampler.value().copied().unwrap_or(const { Defaults::sampler.get() });
        self.slots.sampler_arg.value().map_or(sampler, |r| sampler.with_ratio(*r))
    }
    /// The JSON Lines file rows are appended to, if any.
    pub fn rows_file(&self) -> Option<&Path> {
        self.slots.rows_file.value().map(PathBuf::as_path)
    }
    /// The directory of the local rows store, when set (else [`pipetel_rows::default_dir`]).
    pub fn rows_dir(&self) -> Option<&Path> {
        self.slots.rows_dir.value().map(PathBuf::as_path)
    }
    group_getters! {
        /// The service-metrics configuration ([`ServiceMetrics::from_config`](crate::service::ServiceMetrics::from_config)).
        fn service_metrics() -> ServiceMetricsConfig {
            queue_metrics: queue_metrics,
            http_metrics: http_metrics,
            prefix: service_prefix,
            histogram_buckets: histogram_buckets,
        }
        /// The span-metrics configuration.
        fn span_metrics() -> SpanMetricsConfig {
            enabled: span_metrics_enabled,
            allow: span_metrics_allow,
            filter: span_metrics_filter,
            time: span_metrics_time,
        }
    }
    /// Which measurements may carry an exemplar.
    pub fn exemplar_filter(&self) -> ExemplarFilter {
        self.slots.exemplar_filter.value().copied().unwrap_or(const { Defaults::exemplar_filter.get() })
    }
    /// The GPU configuration.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> pipetel_gpu::GpuConfig {
        let g = &self.slots;
        let mut c = pipetel_gpu::GpuConfig::default();
        c.mode = g.gpu_mode.value().copied().unwrap_or(const { Defaults::gpu_mode.get() });
        c.poll_interval = g.gpu_poll_interval.value().copied().unwrap_or(const { Defaults::gpu_poll_interval.get() });
        c.nvml_library = g.gpu_nvml_library.value().cloned();
        c.rocm_smi_library = g.gpu_rocm_smi_library.value().cloned();
        c.platform = g.gpu_platform.value().copied().unwrap_or(const { Defaults::gpu_platform.get() });
        c.pcie_throughput =
            g.gpu_pcie_throughput.value().copied().unwrap_or(const { Defaults::gpu_pcie_throughput.get() });
        c.process_memory =
            g.gpu_process_memory.value().copied().unwrap_or(const { Defaults::gpu_process_memory.get() });
        c.init_timeout = g.gpu_init_timeout.value().copied().unwrap_or(const { Defaults::gpu_init_timeout.get() });
        if let Some(devices) = g.gpu_devices.value().cloned().or_else(|| Defaults::gpu_devices.owned()) {
            c.devices = devices;
        }
        c
    }
    /// Deprecated spellings met while reading the configuration (file keys with a new name),
    /// one sentence each; `init` logs them as warnings once its subscriber is installed.
    pub fn deprecations(&self) -> &[String] {
        &self.deprecations
    }

    /// Checks every value (those set in code included) and the settings that go together.
    ///
    /// # Errors
    /// The first value that is out of range, naming where it came from.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resolve().map(drop)
    }
}
