//! [`Config`]: the builder (`with_*`, each value remembering its setter) and the readers of the
//! environment and the file; the getters are in `getters.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env;
use super::file;
use super::rule::{merge_into, scope, AnySlot, Set, Slot};
use super::syntax::dedup;
use super::table::{Rules, Slots, PIPETEL_CONFIG};
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ProgressMode, Propagator, SamplerConfig, Signal, TraceExporter,
};
use pipetel_core::settings::ConfigError;
use pipetel_core::settings::{ServiceMetricsConfig, SpanMetricsConfig};

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
    /// Every setting's value, where it came from and its rule.
    pub(crate) slots: Slots,
    /// Deprecated spellings met while reading; `init` logs them once its subscriber is up.
    pub(crate) deprecations: Vec<String>,
}

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
        env::apply(&mut config.slots, &lookup, None)?;
        // Settings that only make sense together (a TLS certificate and its key).
        config.resolve()?;
        Ok(config)
    }

    /// Reads a TOML configuration file (no environment). Its keys: `docs/src/configuration.md`.
    ///
    /// # Errors
    /// [`ConfigError::FileRead`], [`ConfigError::FileSyntax`] (unknown key, malformed TOML), or
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
        let mut config = Self::default();
        file::apply(&mut config.slots, &mut config.deprecations, text, path)?;
        config.resolve()?;
        Ok(config)
    }

    // ----- builder -----

    /// Sets `service.name`.
    pub fn with_service_name(mut self, name: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.service_name, 0) =
            Some(Set::code(name.into(), "with_service_name", Rules::service_name));
        self
    }

    /// Sets `service.version`.
    pub fn with_service_version(mut self, version: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.service_version, 0) =
            Some(Set::code(version.into(), "with_service_version", Rules::service_version));
        self
    }

    /// Sets how `service.instance.id` is made: `random` (a UUID per process, the default), a
    /// recipe of `hostname`, `pid`, `pod` joined with `-` (`hostname-pid`), or a literal in
    /// which `{hostname}`, `{pid}` and `{pod}` are replaced (checked at `init`).
    pub fn with_instance_id(mut self, recipe: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.instance_id, 0) =
            Some(Set::code(recipe.into(), "with_instance_id", Rules::instance_id));
        self
    }

    /// Sets the global text-map propagators (an empty list means none).
    pub fn with_propagators(mut self, propagators: impl IntoIterator<Item = Propagator>) -> Self {
        *AnySlot::at(&mut self.slots.propagators, 0) =
            Some(Set::code(dedup(propagators), "with_propagators", Rules::propagators));
        self
    }

    /// Sets the aggregation temporality of OTLP metric exports (the pull endpoint stays
    /// cumulative).
    pub fn with_metric_temporality(mut self, temporality: MetricTemporality) -> Self {
        *AnySlot::at(&mut self.slots.metric_temporality, 0) =
            Some(Set::code(temporality, "with_metric_temporality", Rules::metric_temporality));
        self
    }

    /// Sets the aggregation of histograms that name no other (exponential is refused together
    /// with the `prometheus` exporter, which cannot render it).
    pub fn with_default_histogram_aggregation(mut self, aggregation: HistogramAggregation) -> Self {
        *AnySlot::at(&mut self.slots.histogram_aggregation, 0) =
            Some(Set::code(aggregation, "with_default_histogram_aggregation", Rules::histogram_aggregation));
        self
    }

    /// Sets the upper bound of one pushed metric export.
    pub fn with_metric_export_timeout(mut self, timeout: Duration) -> Self {
        *AnySlot::at(&mut self.slots.metric_export_timeout, 0) =
            Some(Set::code(timeout, "with_metric_export_timeout", Rules::metric_export_timeout));
        self
    }

    /// Disables (or re-enables) every signal, as `OTEL_SDK_DISABLED` does.
    pub fn with_sdk_disabled(mut self, disabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.sdk_disabled, 0) =
            Some(Set::code(disabled, "with_sdk_disabled", Rules::sdk_disabled));
        self
    }

    /// Sets the trace exporters (an empty list means none).
    pub fn with_traces_exporters(mut self, exporters: impl IntoIterator<Item = TraceExporter>) -> Self {
        *AnySlot::at(&mut self.slots.traces_exporters, 0) =
            Some(Set::code(dedup(exporters), "with_traces_exporters", Rules::traces_exporters));
        self
    }

    /// Sets the metric exporters (an empty list means none).
    pub fn with_metrics_exporters(mut self, exporters: impl IntoIterator<Item = MetricExporter>) -> Self {
        *AnySlot::at(&mut self.slots.metrics_exporters, 0) =
            Some(Set::code(dedup(exporters), "with_metrics_exporters", Rules::metrics_exporters));
        self
    }

    /// Sets the log exporters (an empty list means none).
    pub fn with_logs_exporters(mut self, exporters: impl IntoIterator<Item = LogExporter>) -> Self {
        *AnySlot::at(&mut self.slots.logs_exporters, 0) =
            Some(Set::code(dedup(exporters), "with_logs_exporters", Rules::logs_exporters));
        self
    }

    /// Sets the OTLP endpoint of every signal (checked at `init`).
    pub fn with_otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_endpoint, 0) =
            Some(Set::code(endpoint.into(), "with_otlp_endpoint", Rules::otlp_endpoint));
        self
    }

    /// Sets the OTLP protocol of every signal.
    pub fn with_otlp_protocol(mut self, protocol: OtlpProtocol) -> Self {
        *AnySlot::at(&mut self.slots.otlp_protocol, 0) =
            Some(Set::code(protocol, "with_otlp_protocol", Rules::otlp_protocol));
        self
    }

    /// Sets the OTLP export timeout of every signal.
    pub fn with_otlp_timeout(mut self, timeout: Duration) -> Self {
        *AnySlot::at(&mut self.slots.otlp_timeout, 0) =
            Some(Set::code(timeout, "with_otlp_timeout", Rules::otlp_timeout));
        self
    }

    /// Sets the OTLP compression of every signal.
    pub fn with_otlp_compression(mut self, compression: OtlpCompression) -> Self {
        *AnySlot::at(&mut self.slots.otlp_compression, 0) =
            Some(Set::code(compression, "with_otlp_compression", Rules::otlp_compression));
        self
    }

    /// Trusts the CA certificates in this PEM file (instead of the system roots) for every
    /// signal's `https://` endpoint. The file is read when the configuration is resolved.
    pub fn with_otlp_certificate(mut self, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_certificate, 0) =
            Some(Set::code(path.into(), "with_otlp_certificate", Rules::otlp_certificate));
        self
    }

    /// Presents the client certificate in this PEM file (mTLS) to every signal's endpoint;
    /// needs [`Config::with_otlp_client_key`] too.
    pub fn with_otlp_client_certificate(mut self, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_client_certificate, 0) =
            Some(Set::code(path.into(), "with_otlp_client_certificate", Rules::otlp_client_certificate));
        self
    }

    /// The private key (PEM) of the mTLS client certificate.
    pub fn with_otlp_client_key(mut self, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_client_key, 0) =
            Some(Set::code(path.into(), "with_otlp_client_key", Rules::otlp_client_key));
        self
    }

    /// Plain text (`true`) or TLS (`false`, the default) for a gRPC endpoint given as
    /// `host:port`; an endpoint with a scheme ignores it.
    pub fn with_otlp_insecure(mut self, insecure: bool) -> Self {
        *AnySlot::at(&mut self.slots.otlp_insecure, 0) =
            Some(Set::code(insecure, "with_otlp_insecure", Rules::otlp_insecure));
        self
    }

    /// Sets the host the Prometheus endpoint binds to.
    pub fn with_prometheus_host(mut self, host: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.prometheus_host, 0) =
            Some(Set::code(host.into(), "with_prometheus_host", Rules::prometheus_host));
        self
    }

    /// Sets the Prometheus endpoint's port (`0` picks a free one; see `Telemetry::prometheus_addr`).
    pub fn with_prometheus_port(mut self, port: u16) -> Self {
        *AnySlot::at(&mut self.slots.prometheus_port, 0) =
            Some(Set::code(port, "with_prometheus_port", Rules::prometheus_port));
        self
    }

    /// Sets the path the Prometheus endpoint serves.
    pub fn with_prometheus_path(mut self, path: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.prometheus_path, 0) =
            Some(Set::code(path.into(), "with_prometheus_path", Rules::prometheus_path));
        self
    }

    /// Requires `Authorization: Bearer <token>` on the pull endpoint.
    pub fn with_prometheus_bearer_token(mut self, token: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.prometheus_bearer_token, 0) =
            Some(Set::code(token.into(), "with_prometheus_bearer_token", Rules::prometheus_bearer_token));
        self
    }

    /// Sets the interval of pushed (OTLP, console) metric exports.
    pub fn with_metric_export_interval(mut self, interval: Duration) -> Self {
        *AnySlot::at(&mut self.slots.metric_export_interval, 0) =
            Some(Set::code(interval, "with_metric_export_interval", Rules::metric_export_interval));
        self
    }

    /// Prints `tracing` events to stderr (or not).
    pub fn with_console_log(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.console_log, 0) = Some(Set::code(enabled, "with_console_log", Rules::console_log));
        self
    }

    /// Sets the `tracing` filter directives (as in `RUST_LOG`; checked at `init`).
    pub fn with_log_filter(mut self, directives: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.log_filter, 0) =
            Some(Set::code(directives.into(), "with_log_filter", Rules::log_filter));
        self
    }

    /// Sets the console's line format: compact (the default), pretty, or JSON lines carrying the
    /// current span's trace and span ids.
    pub fn with_log_format(mut self, format: LogFormat) -> Self {
        *AnySlot::at(&mut self.slots.log_format, 0) = Some(Set::code(format, "with_log_format", Rules::log_format));
        self
    }

    /// Sets the `EnvFilter` directives of the spans exported as traces and measured by
    /// `span.duration` (default `info`), whatever `RUST_LOG` lets the console print.
    pub fn with_traces_filter(mut self, directives: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.traces_filter, 0) =
            Some(Set::code(directives.into(), "with_traces_filter", Rules::traces_filter));
        self
    }

    /// Sets the `EnvFilter` directives of the events exported as OTel log records (default
    /// `info`), whatever `RUST_LOG` lets the console print.
    pub fn with_logs_filter(mut self, directives: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.logs_filter, 0) =
            Some(Set::code(directives.into(), "with_logs_filter", Rules::logs_filter));
        self
    }

    /// Exports the process metrics (CPU, memory, open file descriptors, threads; the default)
    /// or not.
    pub fn with_process_metrics(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.process_metrics, 0) =
            Some(Set::code(enabled, "with_process_metrics", Rules::process_metrics));
        self
    }

    /// Sets the upper bound of flush and shutdown.
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        *AnySlot::at(&mut self.slots.shutdown_timeout, 0) =
            Some(Set::code(timeout, "with_shutdown_timeout", Rules::shutdown_timeout));
        self
    }

    /// Sets the most attribute sets kept per metric instrument; more fold into an overflow
    /// series carrying `otel.metric.overflow=true`.
    pub fn with_cardinality_limit(mut self, limit: usize) -> Self {
        *AnySlot::at(&mut self.slots.cardinality_limit, 0) =
            Some(Set::code(limit, "with_cardinality_limit", Rules::cardinality_limit));
        self
    }

    /// Sets the prefix of the stage and worker namespaces (`zephyr` gives `zephyr.stage` and
    /// `zephyr.worker`; checked at `init`).
    pub fn with_namespace(mut self, prefix: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.namespace, 0) = Some(Set::code(prefix.into(), "with_namespace", Rules::namespace));
        self
    }

    /// Sets the interval of periodic worker samples (at least 100 ms; checked at `init`).
    pub fn with_sample_interval(mut self, interval: Duration) -> Self {
        *AnySlot::at(&mut self.slots.sample_interval, 0) =
            Some(Set::code(interval, "with_sample_interval", Rules::sample_interval));
        self
    }

    /// Sets how long a finished stage's series stay exported before they are dropped.
    pub fn with_stage_retention(mut self, retention: Duration) -> Self {
        *AnySlot::at(&mut self.slots.stage_retention, 0) =
            Some(Set::code(retention, "with_stage_retention", Rules::stage_retention));
        self
    }

    /// Appends every stage and worker row to this file as JSON Lines.
    pub fn with_rows_file(mut self, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.rows_file, 0) = Some(Set::code(path.into(), "with_rows_file", Rules::rows_file));
        self
    }

    /// Writes rows (the default) or none at all: `false` means no local store, no rows file
    /// and no row log records.
    pub fn with_rows(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.rows_enabled, 0) = Some(Set::code(enabled, "with_rows", Rules::rows_enabled));
        self
    }

    /// Sets the directory of the local rows store (`<dir>/<service>.jsonl`).
    pub fn with_rows_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.rows_dir, 0) = Some(Set::code(dir.into(), "with_rows_dir", Rules::rows_dir));
        self
    }

    /// Sets the rows file's rotation: its size limit (0: never rotates) and how many
    /// rotated files are kept.
    pub fn with_rows_rotation(mut self, rotation: pipetel_rows::Rotation) -> Self {
        *AnySlot::at(&mut self.slots.rows_max_bytes, 0) =
            Some(Set::code(rotation.max_bytes, "with_rows_rotation", Rules::rows_max_bytes));
        *AnySlot::at(&mut self.slots.rows_keep, 0) =
            Some(Set::code(rotation.keep, "with_rows_rotation", Rules::rows_keep));
        self
    }

    /// Draws a live progress line per running stage on stderr, and each stage's summary line
    /// when it ends (`true`: only when stderr is a terminal; see [`Config::with_progress_mode`]).
    pub fn with_progress(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.progress, 0) = Some(Set::code(
            if enabled { ProgressMode::Auto } else { ProgressMode::Off },
            "with_progress",
            Rules::progress,
        ));
        self
    }

    /// Sets the progress display's mode; [`ProgressMode::Always`] draws even when stderr is
    /// not a terminal.
    pub fn with_progress_mode(mut self, mode: ProgressMode) -> Self {
        *AnySlot::at(&mut self.slots.progress, 0) = Some(Set::code(mode, "with_progress_mode", Rules::progress));
        self
    }

    /// Registers the stage/worker metrics (or not; rows and spans flow either way).
    pub fn with_stage_metrics(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.stage_metrics, 0) =
            Some(Set::code(enabled, "with_stage_metrics", Rules::stage_metrics));
        self
    }

    /// Exports the stages' user counters as `pipeline.stage.counters` (or not; rows carry
    /// them either way).
    pub fn with_stage_counter_metrics(mut self, enabled: bool) -> Self {
        *AnySlot::at(&mut self.slots.stage_counter_metrics, 0) =
            Some(Set::code(enabled, "with_stage_counter_metrics", Rules::stage_counter_metrics));
        self
    }

    /// Sets the service-metrics switches: queue and HTTP metrics, prefix, default buckets.
    pub fn with_service_metrics(mut self, service: ServiceMetricsConfig) -> Self {
        *AnySlot::at(&mut self.slots.queue_metrics, 0) =
            Some(Set::code(service.queue_metrics, "with_service_metrics", Rules::queue_metrics));
        *AnySlot::at(&mut self.slots.http_metrics, 0) =
            Some(Set::code(service.http_metrics, "with_service_metrics", Rules::http_metrics));
        *AnySlot::at(&mut self.slots.service_prefix, 0) =
            Some(Set::code(service.prefix, "with_service_metrics", Rules::service_prefix));
        *AnySlot::at(&mut self.slots.histogram_buckets, 0) =
            Some(Set::code(service.histogram_buckets, "with_service_metrics", Rules::histogram_buckets));
        self
    }

    /// Sets which spans feed the `span.duration` histogram, and with which duration.
    pub fn with_span_metrics(mut self, span_metrics: SpanMetricsConfig) -> Self {
        *AnySlot::at(&mut self.slots.span_metrics_enabled, 0) =
            Some(Set::code(span_metrics.enabled, "with_span_metrics", Rules::span_metrics_enabled));
        *AnySlot::at(&mut self.slots.span_metrics_allow, 0) =
            Some(Set::code(span_metrics.allow, "with_span_metrics", Rules::span_metrics_allow));
        *AnySlot::at(&mut self.slots.span_metrics_filter, 0) =
            Some(Set::code(span_metrics.filter, "with_span_metrics", Rules::span_metrics_filter));
        *AnySlot::at(&mut self.slots.span_metrics_time, 0) =
            Some(Set::code(span_metrics.time, "with_span_metrics", Rules::span_metrics_time));
        self
    }

    /// Sets which measurements may carry an exemplar (default
    /// [`ExemplarFilter::TraceBased`]: those made inside a sampled span).
    pub fn with_exemplar_filter(mut self, filter: ExemplarFilter) -> Self {
        *AnySlot::at(&mut self.slots.exemplar_filter, 0) =
            Some(Set::code(filter, "with_exemplar_filter", Rules::exemplar_filter));
        self
    }

    /// Sets the GPU mode (`Auto`, `On`, `Off`).
    #[cfg(feature = "gpu")]
    pub fn with_gpu_mode(mut self, mode: pipetel_gpu::GpuMode) -> Self {
        *AnySlot::at(&mut self.slots.gpu_mode, 0) = Some(Set::code(mode, "with_gpu_mode", Rules::gpu_mode));
        self
    }

    /// Sets the NVML library path.
    #[cfg(feature = "gpu")]
    pub fn with_nvml_library(mut self, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.gpu_nvml_library, 0) =
            Some(Set::code(path.into(), "with_nvml_library", Rules::gpu_nvml_library));
        self
    }

    /// Sets the GPU poll interval (at least 1 s; checked at `init`).
    #[cfg(feature = "gpu")]
    pub fn with_gpu_poll_interval(mut self, interval: Duration) -> Self {
        *AnySlot::at(&mut self.slots.gpu_poll_interval, 0) =
            Some(Set::code(interval, "with_gpu_poll_interval", Rules::gpu_poll_interval));
        self
    }

    /// Sets one setting by its configuration-file key, at code level (it beats the environment
    /// and the file, as the `with_*` setters do). `key` is a key of the file
    /// (`docs/src/configuration.md`), dotted (`prometheus.port`) or with each `.` written `_`
    /// (`prometheus_port`, the spelling of the Python package's `init` keywords); `value` has
    /// the TOML type the key takes and is checked by the same rule as the file's value.
    ///
    /// ```
    /// let config = pipetel::Config::default()
    ///     .with_setting("prometheus_port", 0.into())?
    ///     .with_setting("exporters.metrics", pipetel::config::toml::Value::Array(vec!["prometheus".into()]))?;
    /// assert_eq!(config.prometheus_port(), 0);
    /// assert!(pipetel::Config::default().with_setting("prometheus_prot", 0.into()).is_err());
    /// # Ok::<(), pipetel::config::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::UnknownSetting`] for a key the file does not have;
    /// [`ConfigError::InvalidValue`] naming the key as given for a value of the wrong type or
    /// one its rule refuses.
    pub fn with_setting(mut self, key: &str, value: toml::Value) -> Result<Self, ConfigError> {
        file::apply_setting(&mut self.slots, key, &value)?;
        Ok(self)
    }

    /// Adds (or replaces) one resource attribute.
    pub fn with_resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.add_resource_attributes(vec![(key.into(), value.into())]);
        self
    }
    /// Sets the OTLP endpoint of one signal, used as given (checked at `init`).
    pub fn with_otlp_signal_endpoint(mut self, signal: Signal, endpoint: impl Into<String>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_endpoint, scope(signal)) =
            Some(Set::code(endpoint.into(), "with_otlp_signal_endpoint", Rules::otlp_endpoint));
        self
    }

    /// Sets the OTLP protocol of one signal.
    pub fn with_otlp_signal_protocol(mut self, signal: Signal, protocol: OtlpProtocol) -> Self {
        *AnySlot::at(&mut self.slots.otlp_protocol, scope(signal)) =
            Some(Set::code(protocol, "with_otlp_signal_protocol", Rules::otlp_protocol));
        self
    }

    /// Trusts the CA certificates in this PEM file for one signal's `https://` endpoint.
    pub fn with_otlp_signal_certificate(mut self, signal: Signal, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_certificate, scope(signal)) =
            Some(Set::code(path.into(), "with_otlp_signal_certificate", Rules::otlp_certificate));
        self
    }

    /// Presents this PEM client certificate (mTLS) to one signal's endpoint.
    pub fn with_otlp_signal_client_certificate(mut self, signal: Signal, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_client_certificate, scope(signal)) =
            Some(Set::code(path.into(), "with_otlp_signal_client_certificate", Rules::otlp_client_certificate));
        self
    }

    /// The private key (PEM) of one signal's mTLS client certificate.
    pub fn with_otlp_signal_client_key(mut self, signal: Signal, path: impl Into<PathBuf>) -> Self {
        *AnySlot::at(&mut self.slots.otlp_client_key, scope(signal)) =
            Some(Set::code(path.into(), "with_otlp_signal_client_key", Rules::otlp_client_key));
        self
    }

    /// Plain text or TLS for one signal's schemeless gRPC endpoint.
    pub fn with_otlp_signal_insecure(mut self, signal: Signal, insecure: bool) -> Self {
        *AnySlot::at(&mut self.slots.otlp_insecure, scope(signal)) =
            Some(Set::code(insecure, "with_otlp_signal_insecure", Rules::otlp_insecure));
        self
    }
    /// Adds an OTLP request header for every signal.
    pub fn with_otlp_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let mut headers = self.slots.otlp_headers[0].value().cloned().unwrap_or_default();
        merge_into(&mut headers, vec![(key.into(), value.into())]);
        self.slots.otlp_headers[0] = Some(Set::code(headers, "with_otlp_header", Rules::otlp_headers));
        self
    }
    /// Requires HTTP basic auth on the pull endpoint.
    pub fn with_prometheus_basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        let pair = (user.into(), password.into());
        self.slots.prometheus_basic_auth =
            Some(Set::code(pair, "with_prometheus_basic_auth", Rules::prometheus_basic_auth));
        self
    }
    /// Serves the pull endpoint over HTTPS with this PEM certificate chain and key (`tls` feature).
    pub fn with_prometheus_tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.slots.prometheus_tls_cert =
            Some(Set::code(cert.into(), "with_prometheus_tls", Rules::prometheus_tls_cert));
        self.slots.prometheus_tls_key = Some(Set::code(key.into(), "with_prometheus_tls", Rules::prometheus_tls_key));
        self
    }
    /// Sets the trace sampler.
    pub fn with_sampler(mut self, sampler: SamplerConfig) -> Self {
        self.slots.sampler = Some(Set::code(sampler, "with_sampler", Rules::sampler));
        // A ratio given in code beats `OTEL_TRACES_SAMPLER_ARG`.
        self.slots.sampler_arg = sampler.ratio().map(|r| Set::code(r, "with_sampler", Rules::sampler_arg));
        self
    }
    /// Sets the whole GPU configuration (mode, poll interval, library paths, platform, opt-ins).
    #[cfg(feature = "gpu")]
    pub fn with_gpu(mut self, gpu: pipetel_gpu::GpuConfig) -> Self {
        let s = &mut self.slots;
        s.gpu_mode = Some(Set::code(gpu.mode, "with_gpu", Rules::gpu_mode));
        s.gpu_poll_interval = Some(Set::code(gpu.poll_interval, "with_gpu", Rules::gpu_poll_interval));
        s.gpu_nvml_library = gpu.nvml_library.map(|p| Set::code(p, "with_gpu", Rules::gpu_nvml_library));
        s.gpu_rocm_smi_library = gpu.rocm_smi_library.map(|p| Set::code(p, "with_gpu", Rules::gpu_rocm_smi_library));
        s.gpu_platform = Some(Set::code(gpu.platform, "with_gpu", Rules::gpu_platform));
        s.gpu_pcie_throughput = Some(Set::code(gpu.pcie_throughput, "with_gpu", Rules::gpu_pcie_throughput));
        s.gpu_process_memory = Some(Set::code(gpu.process_memory, "with_gpu", Rules::gpu_process_memory));
        s.gpu_init_timeout = Some(Set::code(gpu.init_timeout, "with_gpu", Rules::gpu_init_timeout));
        s.gpu_devices = Some(Set::code(gpu.devices, "with_gpu", Rules::gpu_devices));
        self
    }
    fn add_resource_attributes(&mut self, pairs: Vec<(String, String)>) {
        let mut all = self.slots.resource_attributes.value().cloned().unwrap_or_default();
        merge_into(&mut all, pairs);
        self.slots.resource_attributes = Some(Set::code(all, "with_resource_attribute", Rules::resource_attributes));
    }
}
