//! [`Config`]: the builder (`with_*`, each value remembering its setter), the readers of the
//! environment and the file, and the values in effect (a getter per setting).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::defaults::*;
use super::env;
use super::error::ConfigError;
use super::file;
use super::groups::{ServiceMetricsConfig, SpanMetricsConfig};
use super::otlp::{self, OtlpTarget};
use super::rule::{self, merge_into, scope, AnySlot, OrDefault, Set, Slot};
use super::syntax::dedup;
use super::table::{Slots, PIPETEL_CONFIG, SERVICE_ENV_VARS};
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ProgressMode, Propagator, SamplerConfig, Signal, TraceExporter,
};

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
/// the origin; each value is checked by its setting's rule when the configuration is resolved.
macro_rules! setters {
    ($( $(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) -> { $($field:ident = $value:expr, $rule:ident;)+ } )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, $arg: $ty) -> Self {
            $(*AnySlot::at(&mut self.slots.$field, 0) = Some(Set::code($value, stringify!($name), &rule::$rule));)+
            self
        }
    )*};
}

/// `with_otlp_signal_*` setters: one value in one signal's OTLP scope, which beats the generic one.
macro_rules! signal_setters {
    ($( $(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) -> $field:ident = $value:expr, $rule:ident; )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, signal: Signal, $arg: $ty) -> Self {
            let set = Set::code($value, stringify!($name), &rule::$rule);
            *AnySlot::at(&mut self.slots.$field, scope(signal)) = Some(set);
            self
        }
    )*};
}

/// Getters of the value in effect: the value set (unchecked), or the setting's default.
macro_rules! getters {
    ($( $(#[$attr:meta])* fn $name:ident() -> $ty:ty = $default:expr; )*) => {$(
        $(#[$attr])*
        pub fn $name(&self) -> $ty {
            OrDefault::or_default_to(&self.slots.$name, $default)
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

    /// Reads a TOML configuration file (no environment). See the README for its keys.
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
        fn with_service_name(name: impl Into<String>) -> { service_name = name.into(), TEXT; }
        /// Sets `service.version`.
        fn with_service_version(version: impl Into<String>) -> { service_version = version.into(), TEXT; }
        /// Sets how `service.instance.id` is made: `random` (a UUID per process, the default), a
        /// recipe of `hostname`, `pid`, `pod` joined with `-` (`hostname-pid`), or a literal in
        /// which `{hostname}`, `{pid}` and `{pod}` are replaced (checked at `init`).
        fn with_instance_id(recipe: impl Into<String>) -> { instance_id = recipe.into(), INSTANCE_ID; }
        /// Sets the global text-map propagators (an empty list means none).
        fn with_propagators(propagators: impl IntoIterator<Item = Propagator>) -> {
            propagators = dedup(propagators), PROPAGATORS;
        }
        /// Sets the aggregation temporality of OTLP metric exports (the pull endpoint stays
        /// cumulative).
        fn with_metric_temporality(temporality: MetricTemporality) -> { metric_temporality = temporality, TEMPORALITY; }
        /// Sets the aggregation of histograms that name no other (exponential is refused together
        /// with the `prometheus` exporter, which cannot render it).
        fn with_default_histogram_aggregation(aggregation: HistogramAggregation) -> {
            histogram_aggregation = aggregation, HISTOGRAM_AGGREGATION;
        }
        /// Sets the upper bound of one pushed metric export.
        fn with_metric_export_timeout(timeout: Duration) -> { metric_export_timeout = timeout, POSITIVE_MILLIS; }
        /// Disables (or re-enables) every signal, as `OTEL_SDK_DISABLED` does.
        fn with_sdk_disabled(disabled: bool) -> { sdk_disabled = disabled, BOOL; }
        /// Sets the trace exporters (an empty list means none).
        fn with_traces_exporters(exporters: impl IntoIterator<Item = TraceExporter>) -> {
            traces_exporters = dedup(exporters), TRACE_EXPORTERS;
        }
        /// Sets the metric exporters (an empty list means none).
        fn with_metrics_exporters(exporters: impl IntoIterator<Item = MetricExporter>) -> {
            metrics_exporters = dedup(exporters), METRIC_EXPORTERS;
        }
        /// Sets the log exporters (an empty list means none).
        fn with_logs_exporters(exporters: impl IntoIterator<Item = LogExporter>) -> {
            logs_exporters = dedup(exporters), LOG_EXPORTERS;
        }
        /// Sets the OTLP endpoint of every signal (checked at `init`).
        fn with_otlp_endpoint(endpoint: impl Into<String>) -> { otlp_endpoint = endpoint.into(), ENDPOINT; }
        /// Sets the OTLP protocol of every signal.
        fn with_otlp_protocol(protocol: OtlpProtocol) -> { otlp_protocol = protocol, PROTOCOL; }
        /// Sets the OTLP export timeout of every signal.
        fn with_otlp_timeout(timeout: Duration) -> { otlp_timeout = timeout, MILLIS; }
        /// Sets the OTLP compression of every signal.
        fn with_otlp_compression(compression: OtlpCompression) -> { otlp_compression = compression, COMPRESSION; }
        /// Trusts the CA certificates in this PEM file (instead of the system roots) for every
        /// signal's `https://` endpoint. The file is read when the configuration is resolved.
        fn with_otlp_certificate(path: impl Into<PathBuf>) -> { otlp_certificate = path.into(), CERTIFICATE_FILE; }
        /// Presents the client certificate in this PEM file (mTLS) to every signal's endpoint;
        /// needs [`Config::with_otlp_client_key`] too.
        fn with_otlp_client_certificate(path: impl Into<PathBuf>) -> {
            otlp_client_certificate = path.into(), CERTIFICATE_FILE;
        }
        /// The private key (PEM) of the mTLS client certificate.
        fn with_otlp_client_key(path: impl Into<PathBuf>) -> { otlp_client_key = path.into(), KEY_FILE; }
        /// Plain text (`true`) or TLS (`false`, the default) for a gRPC endpoint given as
        /// `host:port`; an endpoint with a scheme ignores it.
        fn with_otlp_insecure(insecure: bool) -> { otlp_insecure = insecure, BOOL; }
        /// Sets the host the Prometheus endpoint binds to.
        fn with_prometheus_host(host: impl Into<String>) -> { prometheus_host = host.into(), HOST; }
        /// Sets the Prometheus endpoint's port (`0` picks a free one; see `Telemetry::prometheus_addr`).
        fn with_prometheus_port(port: u16) -> { prometheus_port = port, PORT; }
        /// Sets the path the Prometheus endpoint serves.
        fn with_prometheus_path(path: impl Into<String>) -> { prometheus_path = path.into(), URL_PATH; }
        /// Requires `Authorization: Bearer <token>` on the pull endpoint.
        fn with_prometheus_bearer_token(token: impl Into<String>) -> { prometheus_bearer_token = token.into(), TOKEN; }
        /// Sets the interval of pushed (OTLP, console) metric exports.
        fn with_metric_export_interval(interval: Duration) -> { metric_export_interval = interval, POSITIVE_MILLIS; }
        /// Prints `tracing` events to stderr (or not).
        fn with_console_log(enabled: bool) -> { console_log = enabled, BOOL; }
        /// Sets the `tracing` filter directives (as in `RUST_LOG`; checked at `init`).
        fn with_log_filter(directives: impl Into<String>) -> { log_filter = directives.into(), FILTER; }
        /// Sets the console's line format: compact (the default), pretty, or JSON lines carrying the
        /// current span's trace and span ids.
        fn with_log_format(format: LogFormat) -> { log_format = format, LOG_FORMAT; }
        /// Sets the `EnvFilter` directives of the spans exported as traces and measured by
        /// `span.duration` (default `info`), whatever `RUST_LOG` lets the console print.
        fn with_traces_filter(directives: impl Into<String>) -> { traces_filter = directives.into(), FILTER; }
        /// Sets the `EnvFilter` directives of the events exported as OTel log records (default
        /// `info`), whatever `RUST_LOG` lets the console print.
        fn with_logs_filter(directives: impl Into<String>) -> { logs_filter = directives.into(), FILTER; }
        /// Exports the process metrics (CPU, memory, open file descriptors, threads; the default)
        /// or not.
        fn with_process_metrics(enabled: bool) -> { process_metrics = enabled, BOOL; }
        /// Sets the upper bound of flush and shutdown.
        fn with_shutdown_timeout(timeout: Duration) -> { shutdown_timeout = timeout, POSITIVE_MILLIS; }
        /// Sets the most attribute sets kept per metric instrument; more fold into an overflow
        /// series carrying `otel.metric.overflow=true`.
        fn with_cardinality_limit(limit: usize) -> { cardinality_limit = limit, CARDINALITY; }
        /// Sets the prefix of the stage and worker namespaces (`zephyr` gives `zephyr.stage` and
        /// `zephyr.worker`; checked at `init`).
        fn with_namespace(prefix: impl Into<String>) -> { namespace = prefix.into(), NAMESPACE; }
        /// Sets the interval of periodic worker samples (at least 100 ms; checked at `init`).
        fn with_sample_interval(interval: Duration) -> { sample_interval = interval, SAMPLE_INTERVAL; }
        /// Sets how long a finished stage's series stay exported before they are dropped.
        fn with_stage_retention(retention: Duration) -> { stage_retention = retention, MILLIS; }
        /// Appends every stage and worker row to this file as JSON Lines.
        fn with_rows_file(path: impl Into<PathBuf>) -> { rows_file = path.into(), FILE; }
        /// Writes rows (the default) or none at all: `false` means no local store, no rows file
        /// and no row log records.
        fn with_rows(enabled: bool) -> { rows_enabled = enabled, BOOL; }
        /// Sets the directory of the local rows store (`<dir>/<service>.jsonl`).
        fn with_rows_dir(dir: impl Into<PathBuf>) -> { rows_dir = dir.into(), FILE; }
        /// Sets the rows file's rotation: its size limit (0: never rotates) and how many
        /// rotated files are kept.
        fn with_rows_rotation(rotation: pipetel_rows::Rotation) -> {
            rows_max_bytes = rotation.max_bytes, BYTE_SIZE;
            rows_keep = rotation.keep, ROWS_KEEP;
        }
        /// Draws a live progress line per running stage on stderr, and each stage's summary line
        /// when it ends (`true`: only when stderr is a terminal; see [`Config::with_progress_mode`]).
        fn with_progress(enabled: bool) -> {
            progress = if enabled { ProgressMode::Auto } else { ProgressMode::Off }, PROGRESS;
        }
        /// Sets the progress display's mode; [`ProgressMode::Always`] draws even when stderr is
        /// not a terminal.
        fn with_progress_mode(mode: ProgressMode) -> { progress = mode, PROGRESS; }
        /// Registers the stage/worker metrics (or not; rows and spans flow either way).
        fn with_stage_metrics(enabled: bool) -> { stage_metrics = enabled, BOOL; }
        /// Exports the stages' user counters as `pipeline.stage.counters` (or not; rows carry
        /// them either way).
        fn with_stage_counter_metrics(enabled: bool) -> { stage_counter_metrics = enabled, BOOL; }
        /// Sets the service-metrics switches: queue and HTTP metrics, prefix, default buckets.
        fn with_service_metrics(service: ServiceMetricsConfig) -> {
            queue_metrics = service.queue_metrics, BOOL;
            http_metrics = service.http_metrics, BOOL;
            service_prefix = service.prefix, SERVICE_PREFIX;
            histogram_buckets = service.histogram_buckets, BUCKETS;
        }
        /// Sets which spans feed the `span.duration` histogram, and with which duration.
        fn with_span_metrics(span_metrics: SpanMetricsConfig) -> {
            span_metrics_enabled = span_metrics.enabled, BOOL;
            span_metrics_allow = span_metrics.allow, SPAN_ALLOW;
            span_metrics_filter = span_metrics.filter, SPAN_FILTER;
            span_metrics_time = span_metrics.time, SPAN_TIME;
        }
        /// Sets which measurements may carry an exemplar (default
        /// [`ExemplarFilter::TraceBased`]: those made inside a sampled span).
        fn with_exemplar_filter(filter: ExemplarFilter) -> { exemplar_filter = filter, EXEMPLAR_FILTER; }
        /// Sets the GPU mode (`Auto`, `On`, `Off`).
        #[cfg(feature = "gpu")]
        fn with_gpu_mode(mode: pipetel_gpu::GpuMode) -> { gpu_mode = mode, GPU_MODE; }
        /// Sets the NVML library path.
        #[cfg(feature = "gpu")]
        fn with_nvml_library(path: impl Into<PathBuf>) -> { gpu_nvml_library = path.into(), LIBRARY; }
        /// Sets the GPU poll interval (at least 1 s; checked at `init`).
        #[cfg(feature = "gpu")]
        fn with_gpu_poll_interval(interval: Duration) -> { gpu_poll_interval = interval, GPU_POLL_SECONDS; }
    }

    /// Sets one setting by its configuration-file key, at code level (it beats the environment
    /// and the file, as the `with_*` setters do). `key` is a key of the file (README,
    /// "Configuration file"), dotted (`prometheus.port`) or with each `.` written `_`
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
        fn with_otlp_signal_endpoint(endpoint: impl Into<String>) -> otlp_endpoint = endpoint.into(), ENDPOINT;
        /// Sets the OTLP protocol of one signal.
        fn with_otlp_signal_protocol(protocol: OtlpProtocol) -> otlp_protocol = protocol, PROTOCOL;
        /// Trusts the CA certificates in this PEM file for one signal's `https://` endpoint.
        fn with_otlp_signal_certificate(path: impl Into<PathBuf>) -> otlp_certificate = path.into(), CERTIFICATE_FILE;
        /// Presents this PEM client certificate (mTLS) to one signal's endpoint.
        fn with_otlp_signal_client_certificate(path: impl Into<PathBuf>) ->
            otlp_client_certificate = path.into(), CERTIFICATE_FILE;
        /// The private key (PEM) of one signal's mTLS client certificate.
        fn with_otlp_signal_client_key(path: impl Into<PathBuf>) -> otlp_client_key = path.into(), KEY_FILE;
        /// Plain text or TLS for one signal's schemeless gRPC endpoint.
        fn with_otlp_signal_insecure(insecure: bool) -> otlp_insecure = insecure, BOOL;
    }
    /// Adds an OTLP request header for every signal.
    pub fn with_otlp_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let mut headers = self.slots.otlp_headers[0].value().cloned().unwrap_or_default();
        merge_into(&mut headers, vec![(key.into(), value.into())]);
        self.slots.otlp_headers[0] = Some(Set::code(headers, "with_otlp_header", &rule::HEADERS));
        self
    }
    /// Requires HTTP basic auth on the pull endpoint.
    pub fn with_prometheus_basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        let pair = (user.into(), password.into());
        self.slots.prometheus_basic_auth = Some(Set::code(pair, "with_prometheus_basic_auth", &rule::BASIC_AUTH));
        self
    }
    /// Serves the pull endpoint over HTTPS with this PEM certificate chain and key (`tls` feature).
    pub fn with_prometheus_tls(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.slots.prometheus_tls_cert = Some(Set::code(cert.into(), "with_prometheus_tls", &rule::FILE));
        self.slots.prometheus_tls_key = Some(Set::code(key.into(), "with_prometheus_tls", &rule::FILE));
        self
    }
    /// Sets the trace sampler.
    pub fn with_sampler(mut self, sampler: SamplerConfig) -> Self {
        self.slots.sampler = Some(Set::code(sampler, "with_sampler", &rule::SAMPLER));
        // A ratio given in code beats `OTEL_TRACES_SAMPLER_ARG`.
        self.slots.sampler_arg = sampler.ratio().map(|r| Set::code(r, "with_sampler", &rule::SAMPLER_ARG));
        self
    }
    /// Sets the whole GPU configuration (mode, poll interval, library paths, platform, opt-ins).
    #[cfg(feature = "gpu")]
    pub fn with_gpu(mut self, gpu: pipetel_gpu::GpuConfig) -> Self {
        let s = &mut self.slots;
        s.gpu_mode = Some(Set::code(gpu.mode, "with_gpu", &rule::GPU_MODE));
        s.gpu_poll_interval = Some(Set::code(gpu.poll_interval, "with_gpu", &rule::GPU_POLL_SECONDS));
        s.gpu_nvml_library = gpu.nvml_library.map(|p| Set::code(p, "with_gpu", &rule::LIBRARY));
        s.gpu_rocm_smi_library = gpu.rocm_smi_library.map(|p| Set::code(p, "with_gpu", &rule::LIBRARY));
        s.gpu_platform = Some(Set::code(gpu.platform, "with_gpu", &rule::GPU_PLATFORM));
        s.gpu_pcie_throughput = Some(Set::code(gpu.pcie_throughput, "with_gpu", &rule::BOOL));
        s.gpu_process_memory = Some(Set::code(gpu.process_memory, "with_gpu", &rule::BOOL));
        s.gpu_init_timeout = Some(Set::code(gpu.init_timeout, "with_gpu", &rule::ANY_DURATION));
        s.gpu_devices = Some(Set::code(gpu.devices, "with_gpu", &rule::GPU_DEVICES));
        self
    }
    fn add_resource_attributes(&mut self, pairs: Vec<(String, String)>) {
        let mut all = self.slots.resource_attributes.value().cloned().unwrap_or_default();
        merge_into(&mut all, pairs);
        self.slots.resource_attributes = Some(Set::code(all, "with_resource_attribute", &rule::RESOURCE));
    }

    // ----- values in effect (unchecked; `resolve` checks them) -----

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
        fn sdk_disabled() -> bool = false;
        /// Host of the Prometheus endpoint.
        fn prometheus_host() -> &str = DEFAULT_PROMETHEUS_HOST;
        /// Port of the Prometheus endpoint.
        fn prometheus_port() -> u16 = DEFAULT_PROMETHEUS_PORT;
        /// Path of the Prometheus endpoint.
        fn prometheus_path() -> &str = DEFAULT_PROMETHEUS_PATH;
        /// Interval of pushed metric exports.
        fn metric_export_interval() -> Duration = DEFAULT_EXPORT_INTERVAL;
        /// Whether `tracing` events are printed to stderr.
        fn console_log() -> bool = true;
        /// The console's `tracing` filter directives.
        fn log_filter() -> &str = DEFAULT_FILTER;
        /// The console's line format.
        fn log_format() -> LogFormat = LogFormat::Compact;
        /// The filter directives of the spans exported as traces.
        fn traces_filter() -> &str = DEFAULT_FILTER;
        /// The filter directives of the events exported as log records.
        fn logs_filter() -> &str = DEFAULT_FILTER;
        /// Whether the process metrics are exported.
        fn process_metrics() -> bool = true;
        /// Upper bound of flush and shutdown.
        fn shutdown_timeout() -> Duration = DEFAULT_SHUTDOWN_TIMEOUT;
        /// Most attribute sets kept per metric instrument.
        fn cardinality_limit() -> usize = DEFAULT_CARDINALITY_LIMIT;
        /// Prefix of the stage and worker namespaces.
        fn namespace() -> &str = DEFAULT_NAMESPACE;
        /// Interval of periodic worker samples.
        fn sample_interval() -> Duration = DEFAULT_SAMPLE_INTERVAL;
        /// How long a finished stage's series stay exported.
        fn stage_retention() -> Duration = DEFAULT_STAGE_RETENTION;
        /// Whether the stage/worker metrics are registered.
        fn stage_metrics() -> bool = true;
        /// Whether the stages' user counters are exported as `pipeline.stage.counters`.
        fn stage_counter_metrics() -> bool = true;
        /// Whether rows are written at all.
        fn rows_enabled() -> bool = true;
        /// Size at which the rows file rotates (0: never).
        fn rows_max_bytes() -> u64 = pipetel_rows::DEFAULT_MAX_BYTES;
        /// Rotated rows files kept.
        fn rows_keep() -> u32 = pipetel_rows::DEFAULT_KEEP;
        /// The progress display's mode.
        fn progress() -> ProgressMode = ProgressMode::Off;
    }
    /// The global text-map propagators (default: W3C trace context, then W3C baggage).
    pub fn propagators(&self) -> Vec<Propagator> {
        self.slots.propagators.value().cloned().unwrap_or_else(|| vec![Propagator::TraceContext, Propagator::Baggage])
    }
    /// How `service.instance.id` is made, as given (`random` when not set).
    pub fn instance_id(&self) -> &str {
        self.slots.instance_id.value().map_or("random", String::as_str)
    }
    getters! {
        /// The aggregation temporality of OTLP metric exports.
        fn metric_temporality() -> MetricTemporality = MetricTemporality::Cumulative;
        /// The aggregation of histograms that name no other.
        fn histogram_aggregation() -> HistogramAggregation = HistogramAggregation::ExplicitBucket;
        /// Upper bound of one pushed metric export.
        fn metric_export_timeout() -> Duration = DEFAULT_METRIC_EXPORT_TIMEOUT;
    }
    /// Extra resource attributes.
    pub fn resource_attributes(&self) -> &[(String, String)] {
        self.slots.resource_attributes.value().map_or(&[], Vec::as_slice)
    }
    /// Whether any OTLP endpoint was configured explicitly (then OTLP becomes the default exporter).
    fn otlp_configured(&self) -> bool {
        self.slots.otlp_endpoint.iter().any(Option::is_some)
    }
    /// Trace exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn traces_exporters(&self) -> Vec<TraceExporter> {
        let default = if self.otlp_configured() { vec![TraceExporter::Otlp] } else { Vec::new() };
        self.slots.traces_exporters.value().cloned().unwrap_or(default)
    }
    /// Metric exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else the Prometheus pull endpoint (the embedded default).
    pub fn metrics_exporters(&self) -> Vec<MetricExporter> {
        let default = if self.otlp_configured() { MetricExporter::Otlp } else { MetricExporter::Prometheus };
        self.slots.metrics_exporters.value().cloned().unwrap_or(vec![default])
    }
    /// Log exporters in effect: as configured, else OTLP when an OTLP endpoint is configured,
    /// else none.
    pub fn logs_exporters(&self) -> Vec<LogExporter> {
        let default = if self.otlp_configured() { vec![LogExporter::Otlp] } else { Vec::new() };
        self.slots.logs_exporters.value().cloned().unwrap_or(default)
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
        let sampler = self.slots.sampler.value().copied().unwrap_or(SamplerConfig::ParentBasedAlwaysOn);
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
    /// The service-metrics configuration ([`ServiceMetrics::from_config`](crate::service::ServiceMetrics::from_config)).
    pub fn service_metrics(&self) -> ServiceMetricsConfig {
        let d = ServiceMetricsConfig::default();
        ServiceMetricsConfig {
            queue_metrics: self.slots.queue_metrics.value().copied().unwrap_or(d.queue_metrics),
            http_metrics: self.slots.http_metrics.value().copied().unwrap_or(d.http_metrics),
            prefix: self.slots.service_prefix.value().cloned().unwrap_or(d.prefix),
            histogram_buckets: self.slots.histogram_buckets.value().cloned().unwrap_or(d.histogram_buckets),
        }
    }
    /// The span-metrics configuration.
    pub fn span_metrics(&self) -> SpanMetricsConfig {
        let d = SpanMetricsConfig::default();
        SpanMetricsConfig {
            enabled: self.slots.span_metrics_enabled.value().copied().unwrap_or(d.enabled),
            allow: self.slots.span_metrics_allow.value().cloned().unwrap_or(d.allow),
            filter: self.slots.span_metrics_filter.value().cloned().unwrap_or(d.filter),
            time: self.slots.span_metrics_time.value().copied().unwrap_or(d.time),
        }
    }
    /// Which measurements may carry an exemplar.
    pub fn exemplar_filter(&self) -> ExemplarFilter {
        self.slots.exemplar_filter.value().copied().unwrap_or_default()
    }
    /// The GPU configuration.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> pipetel_gpu::GpuConfig {
        let g = &self.slots;
        let mut c = pipetel_gpu::GpuConfig::default();
        c.mode = g.gpu_mode.value().copied().unwrap_or(c.mode);
        c.poll_interval = g.gpu_poll_interval.value().copied().unwrap_or(c.poll_interval);
        c.nvml_library = g.gpu_nvml_library.value().cloned();
        c.rocm_smi_library = g.gpu_rocm_smi_library.value().cloned();
        c.platform = g.gpu_platform.value().copied().unwrap_or(c.platform);
        c.pcie_throughput = g.gpu_pcie_throughput.value().copied().unwrap_or(c.pcie_throughput);
        c.process_memory = g.gpu_process_memory.value().copied().unwrap_or(c.process_memory);
        c.init_timeout = g.gpu_init_timeout.value().copied().unwrap_or(c.init_timeout);
        c.devices = g.gpu_devices.value().cloned().unwrap_or(c.devices);
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

impl ServiceMetricsConfig {
    /// Reads the process environment.
    ///
    /// # Errors
    /// As [`ServiceMetricsConfig::from_lookup`].
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup`; unset ones keep their defaults. Unlike
    /// [`Config::from_lookup`], an empty value is a value (an empty prefix is refused).
    ///
    /// # Errors
    /// [`ConfigError::InvalidValue`] naming the variable and the value: a switch that is not a
    /// boolean, a prefix that is not snake_case, buckets that are not finite, strictly
    /// increasing numbers.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        env::apply(&mut config.slots, &lookup, Some(SERVICE_ENV_VARS))?;
        Ok(config.service_metrics())
    }
}
