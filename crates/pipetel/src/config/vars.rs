//! The catalogue: every environment variable pipetel reads (a `pub const` each, listed in
//! [`ENV_VARS`] in the order of the README's table) and the defaults of the settings.
//!
//! The GPU variables are the `pipetel-gpu` crate's own constants, re-exported (feature `gpu`),
//! so the two crates cannot disagree on a name.

use std::time::Duration;

/// Declares each variable as a `pub const` named after itself (or re-exports the GPU crate's
/// constant) and lists them all in [`ENV_VARS`].
macro_rules! variables {
    ($( $(#[$doc:meta])* $name:ident $(= gpu::$gpu:ident)? ),* $(,)?) => {
        $( variables!(@one $(#[$doc])* $name $($gpu)?); )*
        /// Every environment variable pipetel reads, in the order of the README's table.
        pub const ENV_VARS: &[&str] = &[$($name),*];
    };
    (@one $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub const $name: &str = stringify!($name);
    };
    (@one $(#[$doc:meta])* $name:ident $gpu:ident) => {
        #[cfg(feature = "gpu")]
        $(#[$doc])*
        pub use pipetel_gpu::$gpu as $name;
        #[cfg(not(feature = "gpu"))]
        $(#[$doc])*
        pub const $name: &str = stringify!($name);
    };
}

variables! {
    /// `true` disables the SDK: every signal becomes a no-op and nothing listens.
    OTEL_SDK_DISABLED,
    /// The `service.name` resource attribute.
    OTEL_SERVICE_NAME,
    /// Extra resource attributes, `key=value` pairs separated by commas (values percent-encoded).
    OTEL_RESOURCE_ATTRIBUTES,
    /// Trace exporters: a comma list of `otlp`, `console`, `none`.
    OTEL_TRACES_EXPORTER,
    /// Metric exporters: a comma list of `prometheus`, `otlp`, `console`, `none`.
    OTEL_METRICS_EXPORTER,
    /// Log exporters: a comma list of `otlp`, `console`, `none`.
    OTEL_LOGS_EXPORTER,
    /// OTLP endpoint for every signal (for HTTP, `/v1/<signal>` is appended).
    OTEL_EXPORTER_OTLP_ENDPOINT,
    /// OTLP protocol for every signal: `grpc` or `http/protobuf`.
    OTEL_EXPORTER_OTLP_PROTOCOL,
    /// OTLP headers for every signal, `key=value` pairs separated by commas.
    OTEL_EXPORTER_OTLP_HEADERS,
    /// OTLP export timeout for every signal (a bare number counts milliseconds).
    OTEL_EXPORTER_OTLP_TIMEOUT,
    /// OTLP compression for every signal: `gzip`, `zstd` or `none`.
    OTEL_EXPORTER_OTLP_COMPRESSION,
    /// PEM file of the CA certificates that verify the collector's certificate, for every signal
    /// (replaces the system roots; `https://` endpoints only).
    OTEL_EXPORTER_OTLP_CERTIFICATE,
    /// PEM file of the client certificate (chain) for mTLS, for every signal.
    OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
    /// PEM file of the client certificate's private key for mTLS, for every signal.
    OTEL_EXPORTER_OTLP_CLIENT_KEY,
    /// `true`: a gRPC endpoint given as `host:port` (no scheme) is reached in plain text; `false`
    /// (default): over TLS. An endpoint with a scheme ignores it.
    OTEL_EXPORTER_OTLP_INSECURE,
    /// OTLP endpoint for traces, used as given.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    /// OTLP protocol for traces.
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    /// OTLP headers for traces.
    OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    /// OTLP timeout for traces (a bare number counts milliseconds).
    OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    /// OTLP compression for traces.
    OTEL_EXPORTER_OTLP_TRACES_COMPRESSION,
    /// PEM file of the CA certificates for traces.
    OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE,
    /// PEM file of the mTLS client certificate for traces.
    OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE,
    /// PEM file of the mTLS client key for traces.
    OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY,
    /// Plain text for a schemeless gRPC endpoint of traces.
    OTEL_EXPORTER_OTLP_TRACES_INSECURE,
    /// OTLP endpoint for metrics, used as given.
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    /// OTLP protocol for metrics.
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    /// OTLP headers for metrics.
    OTEL_EXPORTER_OTLP_METRICS_HEADERS,
    /// OTLP timeout for metrics (a bare number counts milliseconds).
    OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
    /// OTLP compression for metrics.
    OTEL_EXPORTER_OTLP_METRICS_COMPRESSION,
    /// PEM file of the CA certificates for metrics.
    OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE,
    /// PEM file of the mTLS client certificate for metrics.
    OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE,
    /// PEM file of the mTLS client key for metrics.
    OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY,
    /// Plain text for a schemeless gRPC endpoint of metrics.
    OTEL_EXPORTER_OTLP_METRICS_INSECURE,
    /// OTLP endpoint for logs, used as given.
    OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
    /// OTLP protocol for logs.
    OTEL_EXPORTER_OTLP_LOGS_PROTOCOL,
    /// OTLP headers for logs.
    OTEL_EXPORTER_OTLP_LOGS_HEADERS,
    /// OTLP timeout for logs (a bare number counts milliseconds).
    OTEL_EXPORTER_OTLP_LOGS_TIMEOUT,
    /// OTLP compression for logs.
    OTEL_EXPORTER_OTLP_LOGS_COMPRESSION,
    /// PEM file of the CA certificates for logs.
    OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE,
    /// PEM file of the mTLS client certificate for logs.
    OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE,
    /// PEM file of the mTLS client key for logs.
    OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY,
    /// Plain text for a schemeless gRPC endpoint of logs.
    OTEL_EXPORTER_OTLP_LOGS_INSECURE,
    /// Host the Prometheus pull endpoint binds to (default `localhost`).
    OTEL_EXPORTER_PROMETHEUS_HOST,
    /// Port of the Prometheus pull endpoint (default `9464`).
    OTEL_EXPORTER_PROMETHEUS_PORT,
    /// Interval between OTLP/console metric exports (default 60 s; a bare number counts
    /// milliseconds).
    OTEL_METRIC_EXPORT_INTERVAL,
    /// Trace sampler: `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
    /// `parentbased_always_off`, `parentbased_traceidratio`.
    OTEL_TRACES_SAMPLER,
    /// Argument of a ratio sampler, a number in `[0, 1]`.
    OTEL_TRACES_SAMPLER_ARG,
    /// Text-map propagators set as the global one: a comma list of `tracecontext`, `baggage`, or
    /// `none` (default `tracecontext,baggage`).
    OTEL_PROPAGATORS,
    /// Aggregation temporality of OTLP metric exports: `cumulative` (default), `delta` or
    /// `lowmemory` (case-insensitive). The pull endpoint is always cumulative.
    OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE,
    /// Aggregation of histograms: `explicit_bucket_histogram` (default) or
    /// `base2_exponential_bucket_histogram` (not with the `prometheus` exporter).
    OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION,
    /// Upper bound of one pushed metric export (default 30 s; a bare number counts milliseconds):
    /// the OTLP metric request timeout is the smaller of this and the OTLP timeout.
    OTEL_METRIC_EXPORT_TIMEOUT,
    /// Default most attributes per span, span event and span link (default 128).
    OTEL_ATTRIBUTE_COUNT_LIMIT,
    /// Most attributes per span (default `OTEL_ATTRIBUTE_COUNT_LIMIT`, else 128).
    OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT,
    /// Most events per span (default 128).
    OTEL_SPAN_EVENT_COUNT_LIMIT,
    /// Most links per span (default 128).
    OTEL_SPAN_LINK_COUNT_LIMIT,
    /// Most attributes per span event (default `OTEL_ATTRIBUTE_COUNT_LIMIT`, else 128).
    OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT,
    /// Most attributes per span link (default `OTEL_ATTRIBUTE_COUNT_LIMIT`, else 128).
    OTEL_LINK_ATTRIBUTE_COUNT_LIMIT,
    /// Delay between two span batch exports (default 5 s; a bare number counts milliseconds).
    OTEL_BSP_SCHEDULE_DELAY,
    /// Upper bound of one span export (default 30 s): the OTLP traces request timeout is the
    /// smaller of this and the OTLP timeout.
    OTEL_BSP_EXPORT_TIMEOUT,
    /// Most spans queued for export; more are dropped (default 2048).
    OTEL_BSP_MAX_QUEUE_SIZE,
    /// Most spans per export (default 512, at most the queue size).
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
    /// Delay between two log batch exports (default 1 s; a bare number counts milliseconds).
    OTEL_BLRP_SCHEDULE_DELAY,
    /// Upper bound of one log export (default 30 s): the OTLP logs request timeout is the
    /// smaller of this and the OTLP timeout.
    OTEL_BLRP_EXPORT_TIMEOUT,
    /// Most log records queued for export; more are dropped (default 2048).
    OTEL_BLRP_MAX_QUEUE_SIZE,
    /// Most log records per export (default 512, at most the queue size).
    OTEL_BLRP_MAX_EXPORT_BATCH_SIZE,
    /// Path of a TOML configuration file.
    PIPETEL_CONFIG,
    /// The `service.version` resource attribute.
    PIPETEL_SERVICE_VERSION,
    /// `service.instance.id`: `random` (default, a UUID per process), a recipe of `hostname`,
    /// `pid`, `pod` joined with `-` (`hostname-pid`), or a literal where `{hostname}`, `{pid}`
    /// and `{pod}` are replaced.
    PIPETEL_INSTANCE_ID,
    /// Set by Kubernetes in every container: its presence turns on the `k8s.*` resource
    /// attributes from the variables below (set through the downward API).
    KUBERNETES_SERVICE_HOST,
    /// `k8s.pod.name` (downward API `metadata.name`).
    K8S_POD_NAME,
    /// `k8s.pod.uid` (downward API `metadata.uid`).
    K8S_POD_UID,
    /// `k8s.namespace.name` (downward API `metadata.namespace`).
    K8S_NAMESPACE_NAME,
    /// `k8s.node.name` (downward API `spec.nodeName`).
    K8S_NODE_NAME,
    /// `k8s.container.name` (written in the pod spec; the downward API has no field for it).
    K8S_CONTAINER_NAME,
    /// Path the Prometheus pull endpoint serves (default `/metrics`).
    PIPETEL_PROMETHEUS_PATH,
    /// A bearer token the pull endpoint requires (`Authorization: Bearer <token>`).
    PIPETEL_PROMETHEUS_BEARER_TOKEN,
    /// `user:password` the pull endpoint requires as HTTP basic auth.
    PIPETEL_PROMETHEUS_BASIC_AUTH,
    /// PEM certificate chain: the pull endpoint serves HTTPS (needs the `tls` feature).
    PIPETEL_PROMETHEUS_TLS_CERT,
    /// PEM private key of that certificate.
    PIPETEL_PROMETHEUS_TLS_KEY,
    /// `true` to print `tracing` events to stderr (default `true`).
    PIPETEL_CONSOLE_LOG,
    /// Upper bound of shutdown and flush on drop (default 5 s; a bare number counts milliseconds).
    PIPETEL_SHUTDOWN_TIMEOUT,
    /// Most attribute sets kept per metric instrument before overflow (default 2000).
    PIPETEL_CARDINALITY_LIMIT,
    /// Prefix of the stage and worker namespaces (default `pipeline`: `pipeline.stage`,
    /// `pipeline.worker`).
    PIPETEL_NAMESPACE,
    /// Interval between periodic worker samples (default 10 s, at least 100 ms; a bare number
    /// counts milliseconds).
    PIPETEL_SAMPLE_INTERVAL,
    /// How long a finished stage's series stay exported (default 300 s; a bare number counts
    /// milliseconds).
    PIPETEL_STAGE_RETENTION,
    /// A file the stage and worker rows are appended to as JSON Lines (default: the local rows
    /// store, `<PIPETEL_ROWS_DIR>/<service>.jsonl`).
    PIPETEL_ROWS_FILE,
    /// `false` writes no rows at all: no local store, no rows file, no log records (default
    /// `true`).
    PIPETEL_ROWS,
    /// Directory of the local rows store (default `$XDG_STATE_HOME/pipetel/rows`, else
    /// `~/.local/state/pipetel/rows`).
    PIPETEL_ROWS_DIR,
    /// Size at which the rows file rotates: bytes, or with a `KiB` / `MiB` / `GiB` suffix
    /// (default 64 MiB; `0` never rotates).
    PIPETEL_ROWS_MAX_BYTES,
    /// Rotated rows files kept besides the current one (default 3).
    PIPETEL_ROWS_KEEP,
    /// A live progress line per running stage on stderr, and each stage's summary line when it
    /// ends: `true` (on when stderr is a terminal), `always` (on even when it is not), `false`
    /// (default).
    PIPETEL_PROGRESS,
    /// GPU telemetry: `auto` (default: on when a GPU is found), `on` (required), `off`.
    PIPETEL_GPU = gpu::ENV_GPU_MODE,
    /// Path of the NVML library (default `libnvidia-ml.so.1` from the loader's search path).
    PIPETEL_NVML_LIBRARY = gpu::ENV_NVML_LIBRARY,
    /// Path of the ROCm SMI library for AMD GPUs (feature `amd`; default: the usual names).
    PIPETEL_ROCM_SMI_LIBRARY = gpu::ENV_ROCM_SMI_LIBRARY,
    /// GPU poll interval: `5s`, `1500ms` or a bare number of seconds (default 5 s, at least 1 s).
    PIPETEL_GPU_POLL_INTERVAL = gpu::ENV_GPU_POLL_INTERVAL,
    /// GPU platform: `auto`, `nvidia`, `amd`.
    PIPETEL_GPU_PLATFORM = gpu::ENV_GPU_PLATFORM,
    /// `true` to poll PCIe throughput (each read blocks about 20 ms per device).
    PIPETEL_GPU_PCIE_THROUGHPUT = gpu::ENV_GPU_PCIE_THROUGHPUT,
    /// `true` to report the GPU memory of this process and its children.
    PIPETEL_GPU_PROCESS_MEMORY = gpu::ENV_GPU_PROCESS_MEMORY,
    /// The GPUs to report: `all`, `none`, `visible` (default: those `CUDA_VISIBLE_DEVICES` /
    /// `NVIDIA_VISIBLE_DEVICES` give this process) or a comma list of indices and UUIDs.
    PIPETEL_GPU_DEVICES = gpu::ENV_GPU_DEVICES,
    /// `false` turns off the span-derived `span.duration` histogram (default `true`).
    PIPETEL_SPAN_METRICS,
    /// Only these span names (comma list) feed `span.duration` (default: every span).
    PIPETEL_SPAN_METRICS_ALLOW,
    /// Target/level filter of the spans that feed `span.duration`, e.g. `info,hyper=off`
    /// (default `trace`).
    PIPETEL_SPAN_METRICS_FILTER,
    /// Which duration `span.duration` records: `wall` (default) or `busy` (time entered).
    PIPETEL_SPAN_METRICS_TIME,
    /// `false` turns every stage metric off: the stage/worker metrics, `#[pipetel::measure]`'s
    /// and the stage contexts' (rows and spans still flow; default `true`).
    PIPETEL_STAGE_METRICS,
    /// `false` keeps the stages' user counters out of the metrics (`pipeline.stage.counters`);
    /// rows carry them either way. Default `true`; `PIPETEL_STAGE_METRICS=false` turns it off
    /// too.
    PIPETEL_STAGE_COUNTER_METRICS,
    /// `false` turns the service (task and queue) metrics off: [`crate::service_metrics`],
    /// [`ServiceMetrics::new`](crate::service::ServiceMetrics::new) and
    /// [`ServiceMetrics::from_config`](crate::service::ServiceMetrics::from_config) give a
    /// handle that records nothing. Default `true`.
    PIPETEL_QUEUE_METRICS,
    /// `false` turns the HTTP server metrics off (read by
    /// [`ServiceMetricsConfig::http_metrics`](super::ServiceMetricsConfig::http_metrics) for the
    /// program's HTTP middleware). Default `true`.
    PIPETEL_HTTP_METRICS,
    /// The name prefix (snake_case) of [`crate::service_metrics`]. Default `service`.
    PIPETEL_SERVICE_PREFIX,
    /// Default histogram bucket bounds of registries and service metrics: comma-separated
    /// seconds (`0.01,0.1,1,10`), `seconds` ([`crate::buckets::SECONDS_BUCKETS`], the default) or
    /// `telefuser` ([`crate::buckets::TELEFUSER_BUCKETS`]).
    PIPETEL_HISTOGRAM_BUCKETS,
    /// Which histogram measurements keep an exemplar: `always_on`, `always_off` or `trace_based`
    /// (default: those made inside a sampled span).
    OTEL_METRICS_EXEMPLAR_FILTER,
    /// The `tracing` filter directives (default `info`).
    RUST_LOG,
}

/// The variables [`ServiceMetricsConfig::from_lookup`](super::ServiceMetricsConfig::from_lookup)
/// reads.
pub const SERVICE_ENV_VARS: &[&str] =
    &[PIPETEL_QUEUE_METRICS, PIPETEL_HTTP_METRICS, PIPETEL_SERVICE_PREFIX, PIPETEL_HISTOGRAM_BUCKETS];

/// Default prefix of the stage and worker namespaces.
pub const DEFAULT_NAMESPACE: &str = "pipeline";
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
/// Default most attribute sets per instrument (the OTel SDK's own default).
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2000;
/// Default prefix of the service metrics.
pub const DEFAULT_SERVICE_PREFIX: &str = "service";
pub(crate) const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_STAGE_RETENTION: Duration = Duration::from_secs(300);
pub(crate) const DEFAULT_EXPORT_INTERVAL: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_METRIC_EXPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default span, event and link limits (the SDK's and the spec's).
pub(crate) const DEFAULT_COUNT_LIMIT: u32 = 128;
pub(crate) const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
pub(crate) const DEFAULT_LOG_FILTER: &str = "info";
/// Shortest interval between worker samples.
pub(crate) const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
