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

/// `with_*` setters that store one value (or each field of a group), remembering the setter as
/// the origin; each value is checked by its setting's rule (the table's, [`Rules`]) when the
/// configuration is resolved.
macro_rules! setters {
    ($( $(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) -> { $($field:ident = $value:expr;)+ } )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, $arg: $ty) -> Self {
            $(*AnySlot::at(&mut self.slots.$field, 0) = Some(Set::code($value, stringify!($name), Rules::$field));)+
            self
        }
    )*};
}

/// `with_otlp_signal_*` setters: one value in one signal's OTLP scope, which beats the generic one.
macro_rules! signal_setters {
    ($( $(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) -> $field:ident = $value:expr; )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, signal: Signal, $arg: $ty) -> Self {
            let set = Set::code($value, stringify!($name), Rules::$field);
            *AnySlot::at(&mut self.slots.$field, scope(signal)) = Some(set);
            self
        }
    )*};
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

    setters! {
        /// Sets `service.name`.
        fn with_service_name(name: impl Into<String>) -> { service_name = name.into(); }
        /// Sets `service.version`.
        fn with_service_version(version: impl Into<String>) -> { service_version = version.into(); }
        /// Sets how `service.instance.id` is made: `random` (a UUID per process, the default), a
        /// recipe of `hostname`, `pid`, `pod` joined with `-` (`hostname-pid`), or a literal in
        /// which `{hostname}`, `{pid}` and `{pod}` are replaced (checked at `init`).
        fn with_instance_id(recipe: impl Into<String>) -> { instance_id = recipe.into(); }
        /// Sets the global text-map propagators (an empty list means none).
        fn with_propagators(propagators: impl IntoIterator<Item = Propagator>) -> {
            propagators = dedup(propagators);
        }
        /// Sets the aggregation temporality of OTLP metric exports (the pull endpoint stays
        /// cumulative).
        fn with_metric_temporality(temporality: MetricTemporality) -> { metric_temporality = temporality; }
        /// Sets the aggregation of histograms that name no other (exponential is refused together
        /// with the `prometheus` exporter, which cannot render it).
        fn with_default_histogram_aggregation(aggregation: HistogramAggregation) -> {
            histogram_aggregation = aggregation;
        }
        /// Sets the upper bound of one pushed metric export.
        fn with_metric_export_timeout(timeout: Duration) -> { metric_export_timeout = timeout; }
        /// Disables (or re-enables) every signal, as `OTEL_SDK_DISABLED` does.
        fn with_sdk_disabled(disabled: bool) -> { sdk_disabled = disabled; }
        /// Sets the trace exporters (an empty list means none).
        fn with_traces_exporters(exporters: impl IntoIterator<Item = TraceExporter>) -> {
            traces_exporters = dedup(exporters);
        }
        /// Sets the metric exporters (an empty list means none).
        fn with_metrics_exporters(exporters: impl IntoIterator<Item = MetricExporter>) -> {
            metrics_exporters = dedup(exporters);
        }
        /// Sets the log exporters (an empty list means none).
        fn with_logs_exporters(exporters: impl IntoIterator<Item = LogExporter>) -> {
            logs_exporters = dedup(exporters);
        }
        /// Sets the OTLP endpoint of every signal (checked at `init`).
        fn with_otlp_endpoint(endpoint: impl Into<String>) -> { otlp_endpoint = endpoint.into(); }
        /// Sets the OTLP protocol of every signal.
        fn with_otlp_protocol(protocol: OtlpProtocol) -> { otlp_protocol = protocol; }
        /// Sets the OTLP export timeout of every signal.
        fn with_otlp_timeout(timeout: Duration) -> { otlp_timeout = timeout; }
        /// Sets the OTLP compression of every signal.
        fn with_otlp_compression(compression: OtlpCompression) -> { otlp_compression = compression; }
        /// Trusts the CA certificates in this PEM file (instead of the system roots) for every
        /// signal's `https://` endpoint. The file is read when the configuration is resolved.
        fn with_otlp_certificate(path: impl Into<PathBuf>) -> { otlp_certificate = path.into(); }
        /// Presents the client certificate in this PEM file (mTLS) to every signal's endpoint;
        /// needs [`Config::with_otlp_client_key`] too.
        fn with_otlp_client_certificate(path: impl Into<PathBuf>) -> {
            otlp_client_certificate = path.into();
        }
        /// The private key (PEM) of the mTLS client certificate.
        fn with_otlp_client_key(path: impl Into<PathBuf>) -> { otlp_client_key = path.into(); }
        /// Plain text (`true`) or TLS (`false`, the default) for a gRPC endpoint given as
        /// `host:port`; an endpoint with a scheme ignores it.
        fn with_otlp_insecure(insecure: bool) -> { otlp_insecure = insecure; }
        /// Sets the host the Prometheus endpoint binds to.
        fn with_prometheus_host(host: impl Into<String>) -> { prometheus_host = host.into(); }
        /// Sets the Prometheus endpoint's port (`0` picks a free one; see `Telemetry::prometheus_addr`).
        fn with_prometheus_port(port: u16) -> { prometheus_port = port; }
        /// Sets the path the Prometheus endpoint serves.
        fn with_prometheus_path(path: impl Into<String>) -> { prometheus_path = path.into(); }
        /// Requires `Authorization: Bearer <token>` on the pull endpoint.
        fn with_prometheus_bearer_token(token: impl Into<String>) -> { prometheus_bearer_token = token.into(); }
        /// Sets the interval of pushed (OTLP, console) metric exports.
        fn with_metric_export_interval(interval: Duration) -> { metric_export_interval = interval; }
        /// Prints `tracing` events to stderr (or not).
        fn with_console_log(enabled: bool) -> { console_log = enabled; }
        /// Sets the `tracing` filter directives (as in `RUST_LOG`; checked at `init`).
        fn with_log_filter(directives: impl Into<String>) -> { log_filter = directives.into(); }
        /// Sets the console's line format: compact (the default), pretty, or JSON lines carrying the
        /// current span's trace and span ids.
        fn with_log_format(format: LogFormat) -> { log_format = format; }
        /// Sets the `EnvFilter` directives of the spans exported as traces and measured by
        /// `span.duration` (default `info`), whatever `RUST_LOG` lets the console print.
        fn with_traces_filter(directives: impl Into<String>) -> { traces_filter = directives.into(); }
        /// Sets the `EnvFilter` directives of the events exported as OTel log records (default
        /// `info`), whatever `RUST_LOG` lets the console print.
        fn with_logs_filter(directives: impl Into<String>) -> { logs_filter = directives.into(); }
        /// Exports the process metrics (CPU, memory, open file descriptors, threads; the default)
        /// or not.
        fn with_process_metrics(enabled: bool) -> { process_metrics = enabled; }
        /// Sets the upper bound of flush and shutdown.
        fn with_shutdown_timeout(timeout: Duration) -> { shutdown_timeout = timeout; }
        /// Sets the most attribute sets kept per metric instrument; more fold into an overflow
        /// series carrying `otel.metric.overflow=true`.
        fn with_cardinality_limit(limit: usize) -> { cardinality_limit = limit; }
        /// Sets the prefix of the stage and worker namespaces (`zephyr` gives `zephyr.stage` and
        /// `zephyr.worker`; checked at `init`).
        fn with_namespace(prefix: impl Into<String>) -> { namespace = prefix.into(); }
        /// Sets the interval of periodic worker samples (at least 100 ms; checked at `init`).
        fn with_sample_interval(interval: Duration) -> { sample_interval = interval; }
        /// Sets how long a finished stage's series stay exported before they are dropped.
        fn with_stage_retention(retention: Duration) -> { stage_retention = retention; }
        /// Appends every stage and worker row to this file as JSON Lines.
        fn with_rows_file(path: impl Into<PathBuf>) -> { rows_file = path.into(); }
        /// Writes rows (the default) or none at all: `false` means no local store, no rows file
        /// and no row log records.
        fn with_rows(enabled: bool) -> { rows_enabled = enabled; }
        /// Sets the directory of the local rows store (`<dir>/<service>.jsonl`).
        fn with_rows_dir(dir: impl Into<PathBuf>) -> { rows_dir = dir.into(); }
        /// Sets the rows file's rotation: its size limit (0: never rotates) and how many
        /// rotated files are kept.
        fn with_rows_rotation(rotation: pipetel_rows::Rotation) -> {
            rows_max_bytes = rotation.max_bytes;
            rows_keep = rotation.keep;
        }
        /// Draws a live progress line per running stage on stderr, and each stage's summary line
        /// when it ends (`true`: only when stderr is a terminal; see [`Config::with_progress_mode`]).
        fn with_progress(enabled: bool) -> {
            progress = if enabled { ProgressMode::Auto } else { ProgressMode::Off };
        }
        /// Sets the progress display's mode; [`ProgressMode::Always`] draws even when stderr is
        /// not a terminal.
        fn with_progress_mode(mode: ProgressMode) -> { progress = mode; }
        /// Registers the stage/worker metrics (or not; rows and spans flow either way).
        fn with_stage_metrics(enabled: bool) -> { stage_metrics = enabled; }
        /// Exports the stages' user counters as `pipeline.stage.counters` (or not; rows carry
        /// them either way).
        fn with_stage_counter_metrics(enabled: bool) -> { stage_counter_metrics = enabled; }
        /// Sets the service-metrics switches: queue and HTTP metrics, prefix, default buckets.
        fn with_service_metrics(service: ServiceMetricsConfig) -> {
            queue_metrics = service.queue_metrics;
            http_metrics = service.http_metrics;
            service_prefix = service.prefix;
            histogram_buckets = service.histogram_buckets;
        }
        /// Sets which spans feed the `span.duration` histogram, and with which duration.
        fn with_span_metrics(span_metrics: SpanMetricsConfig) -> {
            span_metrics_enabled = span_metrics.enabled;
            span_metrics_allow = span_metrics.allow;
            span_metrics_filter = span_metrics.filter;
            span_metrics_time = span_metrics.time;
        }
        /// Sets which measurements may carry an exemplar (default
        /// [`ExemplarFilter::TraceBased`]: those made inside a sampled span).
        fn with_exemplar_filter(filter: ExemplarFilter) -> { exemplar_filter = filter; }
        /// Sets the GPU mode (`Auto`, `On`, `Off`).
        #[cfg(feature = "gpu")]
        fn with_gpu_mode(mode: pipetel_gpu::GpuMode) -> { gpu_mode = mode; }
        /// Sets the NVML library path.
        #[cfg(feature = "gpu")]
        fn with_nvml_library(path: impl Into<PathBuf>) -> { gpu_nvml_library = path.into(); }
        /// Sets the GPU poll interval (at least 1 s; checked at `init`).
        #[cfg(feature = "gpu")]
        fn with_gpu_poll_interval(interval: Duration) -> { gpu_poll_interval = interval; }
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
    signal_setters! {
        /// Sets the OTLP endpoint of one signal, used as given (checked at `init`).
        fn with_otlp_signal_endpoint(endpoint: impl Into<String>) -> otlp_endpoint = endpoint.into();
        /// Sets the OTLP protocol of one signal.
        fn with_otlp_signal_protocol(protocol: OtlpProtocol) -> otlp_protocol = protocol;
        /// Trusts the CA certificates in this PEM file for one signal's `https://` endpoint.
        fn with_otlp_signal_certificate(path: impl Into<PathBuf>) -> otlp_certificate = path.into();
        /// Presents this PEM client certificate (mTLS) to one signal's endpoint.
        fn with_otlp_signal_client_certificate(path: impl Into<PathBuf>) ->
            otlp_client_certificate = path.into();
        /// The private key (PEM) of one signal's mTLS client certificate.
        fn with_otlp_signal_client_key(path: impl Into<PathBuf>) -> otlp_client_key = path.into();
        /// Plain text or TLS for one signal's schemeless gRPC endpoint.
        fn with_otlp_signal_insecure(insecure: bool) -> otlp_insecure = insecure;
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
