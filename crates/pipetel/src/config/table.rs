//! Every setting, declared once: its slot, environment variable, file key, rule, default value
//! and meaning (the entry's form is in `declare.rs`, a default's in `defaults.rs`). The
//! variables' constants, [`ENV_VARS`], the environment and file readers, the checks, the getters'
//! and `resolve`'s defaults and the configuration reference all come from here.
//!
//! Order: the OpenTelemetry SDK's variables first, then pipetel's own; the reference lists the
//! settings in this order.

use super::declare::settings_table;
use super::defaults::*;
use super::rule::*;
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ProgressMode, Propagator, SamplerConfig, TraceExporter,
};
use pipetel_core::buckets::SECONDS_BUCKETS;
use pipetel_core::settings::{AnswerSettings, ProfileMode, ShardMetrics, SpanTime, StallAction};
use std::path::PathBuf;
use std::time::Duration;

settings_table! {
    /// `true`: every signal is a no-op, nothing listens, the program runs.
    sdk_disabled: bool = BOOL, Fallback::value(false), env OTEL_SDK_DISABLED, key "sdk_disabled" Bool;
    /// The `service.name` resource attribute.
    service_name: String = TEXT, Fallback::words("`unknown_service:<exe>`"), env OTEL_SERVICE_NAME, key "service_name" Text;
    /// Extra resource attributes, `k=v,k2=v2` (percent-encoded values); code, the environment and the
    /// file add to one another key by key, in that order of precedence.
    resource_attributes: Vec<(String, String)> = RESOURCE, Fallback::NONE,
        env OTEL_RESOURCE_ATTRIBUTES, key "resource" Table, merge merge_pairs;
    /// Trace exporters: a comma list of names of built-in exporters serving traces (the exporters
    /// guide lists them), or `none`.
    traces_exporters: Vec<TraceExporter> = TRACE_EXPORTERS, Fallback::either(&[], &[TraceExporter::Otlp], WITH_OTLP_ENDPOINT),
        env OTEL_TRACES_EXPORTER, key "exporters.traces" List;
    /// Metric exporters: a comma list of names of built-in exporters serving metrics (the exporters
    /// guide lists them), or `none`.
    metrics_exporters: Vec<MetricExporter> = METRIC_EXPORTERS, Fallback::either(&[MetricExporter::Prometheus], &[MetricExporter::Otlp], WITH_OTLP_ENDPOINT),
        env OTEL_METRICS_EXPORTER, key "exporters.metrics" List;
    /// Log exporters: a comma list of names of built-in exporters serving logs (the exporters
    /// guide lists them), or `none`.
    logs_exporters: Vec<LogExporter> = LOG_EXPORTERS, Fallback::either(&[], &[LogExporter::Otlp], WITH_OTLP_ENDPOINT),
        env OTEL_LOGS_EXPORTER, key "exporters.logs" List;
    /// OTLP endpoint. The generic one is a base URL: for HTTP, `/v1/<signal>` is appended
    /// (`/v1development/profiles` for profiles). A signal's own is used as given. gRPC also takes
    /// `host:port` (its scheme from `OTEL_EXPORTER_OTLP_INSECURE`). Profiles are sent only when the
    /// generic endpoint or their own is set.
    otlp_endpoint: String = ENDPOINT, Fallback::either(DEFAULT_OTLP_HTTP_ENDPOINT, DEFAULT_OTLP_GRPC_ENDPOINT, "for gRPC"),
        env OTEL_EXPORTER_OTLP_ENDPOINT,
        signals OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_EXPORTER_OTLP_METRICS_ENDPOINT OTEL_EXPORTER_OTLP_LOGS_ENDPOINT
            OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT,
        key "endpoint" Text;
    /// OTLP protocol: `grpc` or `http/protobuf` (`http/json` is refused: not supported).
    otlp_protocol: OtlpProtocol = PROTOCOL, Fallback::value(OtlpProtocol::HttpProtobuf),
        env OTEL_EXPORTER_OTLP_PROTOCOL,
        signals OTEL_EXPORTER_OTLP_TRACES_PROTOCOL OTEL_EXPORTER_OTLP_METRICS_PROTOCOL OTEL_EXPORTER_OTLP_LOGS_PROTOCOL
            OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL,
        key "protocol" Text;
    /// OTLP request headers (gRPC metadata), `name=value` pairs separated by commas (percent-encoded
    /// values). Errors, log lines and `Debug` output show the names, never the values.
    otlp_headers: Vec<(String, String)> = HEADERS, Fallback::NONE,
        env OTEL_EXPORTER_OTLP_HEADERS,
        signals OTEL_EXPORTER_OTLP_TRACES_HEADERS OTEL_EXPORTER_OTLP_METRICS_HEADERS OTEL_EXPORTER_OTLP_LOGS_HEADERS
            OTEL_EXPORTER_OTLP_PROFILES_HEADERS,
        key "headers" Table;
    /// OTLP export timeout (a bare number counts milliseconds).
    otlp_timeout: Duration = MILLIS, Fallback::value(Duration::from_secs(10)),
        env OTEL_EXPORTER_OTLP_TIMEOUT,
        signals OTEL_EXPORTER_OTLP_TRACES_TIMEOUT OTEL_EXPORTER_OTLP_METRICS_TIMEOUT OTEL_EXPORTER_OTLP_LOGS_TIMEOUT
            OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT,
        key "timeout_ms" Duration;
    /// OTLP request compression: `gzip`, `zstd` or `none`.
    otlp_compression: OtlpCompression = COMPRESSION, Fallback::value(OtlpCompression::None),
        env OTEL_EXPORTER_OTLP_COMPRESSION,
        signals OTEL_EXPORTER_OTLP_TRACES_COMPRESSION OTEL_EXPORTER_OTLP_METRICS_COMPRESSION
            OTEL_EXPORTER_OTLP_LOGS_COMPRESSION OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION,
        key "compression" Text;
    /// PEM file of the CA certificates that verify an `https://` collector; they replace the system
    /// roots.
    otlp_certificate: PathBuf = CERTIFICATE_FILE, Fallback::words("the system roots"),
        env OTEL_EXPORTER_OTLP_CERTIFICATE,
        signals OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE
            OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE,
        key "certificate" Text;
    /// PEM file of the client certificate (chain) for mTLS; needs the client key too.
    otlp_client_certificate: PathBuf = CERTIFICATE_FILE, Fallback::NONE,
        env OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
        signals OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE
            OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE OTEL_EXPORTER_OTLP_PROFILES_CLIENT_CERTIFICATE,
        key "client_certificate" Text;
    /// PEM file of the mTLS client certificate's private key.
    otlp_client_key: PathBuf = KEY_FILE, Fallback::NONE,
        env OTEL_EXPORTER_OTLP_CLIENT_KEY,
        signals OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY
            OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY OTEL_EXPORTER_OTLP_PROFILES_CLIENT_KEY,
        key "client_key" Text;
    /// For a gRPC endpoint given as `host:port` only: `true` plain text, `false` TLS. An endpoint
    /// with a scheme ignores it.
    otlp_insecure: bool = BOOL, Fallback::value(false),
        env OTEL_EXPORTER_OTLP_INSECURE,
        signals OTEL_EXPORTER_OTLP_TRACES_INSECURE OTEL_EXPORTER_OTLP_METRICS_INSECURE OTEL_EXPORTER_OTLP_LOGS_INSECURE
            OTEL_EXPORTER_OTLP_PROFILES_INSECURE,
        key "insecure" Bool;
    /// Host the Prometheus pull endpoint binds to (`0.0.0.0` to widen it: the exporters guide says what
    /// the endpoint defends against and what belongs in front of it).
    prometheus_host: String = HOST, Fallback::value(DEFAULT_PROMETHEUS_HOST), env OTEL_EXPORTER_PROMETHEUS_HOST, key "prometheus.host" Text;
    /// Port of the Prometheus pull endpoint (`0` picks a free one).
    prometheus_port: u16 = PORT, Fallback::value(DEFAULT_PROMETHEUS_PORT), env OTEL_EXPORTER_PROMETHEUS_PORT, key "prometheus.port" Int;
    /// Interval of pushed (OTLP, console) metric exports (a bare number counts milliseconds).
    metric_export_interval: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(60)),
        env OTEL_METRIC_EXPORT_INTERVAL, key "metrics.export_interval_ms" Duration;
    /// Trace sampler: `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`,
    /// `parentbased_always_off`, `parentbased_traceidratio`.
    sampler: SamplerConfig = SAMPLER, Fallback::value(SamplerConfig::ParentBasedAlwaysOn), env OTEL_TRACES_SAMPLER, key "traces.sampler" Text;
    /// Ratio of the ratio samplers, within `[0, 1]`.
    sampler_arg: f64 = SAMPLER_ARG, Fallback::value(1.0), env OTEL_TRACES_SAMPLER_ARG, key "traces.sampler_arg" Scalar;
    /// Global text-map propagators: a comma list of `tracecontext`, `baggage`, or `none`; the others
    /// of the spec (`b3`, `jaeger`, ...) are refused as not supported.
    propagators: Vec<Propagator> = PROPAGATORS, Fallback::value(&[Propagator::TraceContext, Propagator::Baggage]), env OTEL_PROPAGATORS, key "propagators" List;
    /// Temporality of OTLP metric exports: `cumulative`, `delta` or `lowmemory` (any case); the pull
    /// endpoint stays cumulative.
    metric_temporality: MetricTemporality = TEMPORALITY, Fallback::value(MetricTemporality::Cumulative),
        env OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, key "metrics.temporality_preference" Text;
    /// Aggregation of histograms that name none: `explicit_bucket_histogram` or
    /// `base2_exponential_bucket_histogram` (160 buckets, scale ≤ 20; refused with the `prometheus`
    /// exporter, whose text format cannot carry it).
    histogram_aggregation: HistogramAggregation = HISTOGRAM_AGGREGATION, Fallback::value(HistogramAggregation::ExplicitBucket),
        env OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION,
        key "metrics.default_histogram_aggregation" Text;
    /// Bound of one pushed metric export (a bare number counts milliseconds): the OTLP metric request
    /// timeout is the smaller of it and the OTLP timeout.
    metric_export_timeout: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(30)),
        env OTEL_METRIC_EXPORT_TIMEOUT, key "metrics.export_timeout_ms" Duration;
    /// Default most attributes per span, span event and span link.
    attribute_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT),
        env OTEL_ATTRIBUTE_COUNT_LIMIT, key "limits.attribute_count" Int;
    /// Most attributes per span.
    span_attribute_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT),
        env OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, key "limits.span_attribute_count" Int;
    /// Most events per span.
    span_event_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT),
        env OTEL_SPAN_EVENT_COUNT_LIMIT, key "limits.span_event_count" Int;
    /// Most links per span.
    span_link_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT), env OTEL_SPAN_LINK_COUNT_LIMIT, key "limits.span_link_count" Int;
    /// Most attributes per span event.
    event_attribute_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT),
        env OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT, key "limits.event_attribute_count" Int;
    /// Most attributes per span link.
    link_attribute_count_limit: u32 = COUNT_LIMIT, Fallback::value(DEFAULT_COUNT_LIMIT),
        env OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, key "limits.link_attribute_count" Int;
    /// Delay between two span batch exports (a bare number counts milliseconds).
    bsp_schedule_delay: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(5)),
        env OTEL_BSP_SCHEDULE_DELAY, key "batch.traces.schedule_delay_ms" Duration;
    /// Bound of one span export: the OTLP traces request timeout is the smaller of it and the OTLP
    /// timeout.
    bsp_export_timeout: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(30)),
        env OTEL_BSP_EXPORT_TIMEOUT, key "batch.traces.export_timeout_ms" Duration;
    /// Most spans queued for export; more are dropped (and counted in the delivery report).
    bsp_max_queue_size: usize = BATCH_SIZE, Fallback::value(2048),
        env OTEL_BSP_MAX_QUEUE_SIZE, key "batch.traces.max_queue_size" Int;
    /// Most spans per export; at most the queue size.
    bsp_max_export_batch_size: usize = BATCH_SIZE, Fallback::value(512),
        env OTEL_BSP_MAX_EXPORT_BATCH_SIZE, key "batch.traces.max_export_batch_size" Int;
    /// Delay between two log batch exports (a bare number counts milliseconds).
    blrp_schedule_delay: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(1)),
        env OTEL_BLRP_SCHEDULE_DELAY, key "batch.logs.schedule_delay_ms" Duration;
    /// Bound of one log export, as `OTEL_BSP_EXPORT_TIMEOUT` is of a span export.
    blrp_export_timeout: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(30)),
        env OTEL_BLRP_EXPORT_TIMEOUT, key "batch.logs.export_timeout_ms" Duration;
    /// Most log records queued for export; more are dropped.
    blrp_max_queue_size: usize = BATCH_SIZE, Fallback::value(2048),
        env OTEL_BLRP_MAX_QUEUE_SIZE, key "batch.logs.max_queue_size" Int;
    /// Most log records per export; at most the queue size.
    blrp_max_export_batch_size: usize = BATCH_SIZE, Fallback::value(512),
        env OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, key "batch.logs.max_export_batch_size" Int;
    /// Which histogram measurements keep an exemplar: `trace_based` (those made inside a sampled
    /// span), `always_on`, `always_off`.
    exemplar_filter: ExemplarFilter = EXEMPLAR_FILTER, Fallback::value(ExemplarFilter::TraceBased),
        env OTEL_METRICS_EXEMPLAR_FILTER, key "metrics.exemplar_filter" Text;
    /// Path of the TOML configuration file (read first; every other variable beats it).
    config_file: PathBuf = FILE, Fallback::NONE, env PIPETEL_CONFIG;
    /// The `service.version` resource attribute.
    service_version: String = TEXT, Fallback::NONE, env PIPETEL_SERVICE_VERSION, key "service_version" Text;
    /// `service.instance.id`: `random` (a UUID per process), a recipe of `hostname`, `pid`, `pod`
    /// joined with `-` (`hostname-pid`), or a literal where `{hostname}`, `{pid}` and `{pod}` are
    /// replaced.
    instance_id: String = INSTANCE_ID, Fallback::value("random"), env PIPETEL_INSTANCE_ID, key "instance_id" Text;
    /// Set by Kubernetes in every container: its presence turns on the `k8s.*` resource attributes
    /// of the five variables below (set through the downward API).
    k8s_service_host: String = TEXT, Fallback::words("set by Kubernetes"), env KUBERNETES_SERVICE_HOST;
    /// `k8s.pod.name` (downward API `metadata.name`).
    k8s_pod_name: String = TEXT, Fallback::NONE, env K8S_POD_NAME;
    /// `k8s.pod.uid` (downward API `metadata.uid`).
    k8s_pod_uid: String = TEXT, Fallback::NONE, env K8S_POD_UID;
    /// `k8s.namespace.name` (downward API `metadata.namespace`).
    k8s_namespace_name: String = TEXT, Fallback::NONE, env K8S_NAMESPACE_NAME;
    /// `k8s.node.name` (downward API `spec.nodeName`).
    k8s_node_name: String = TEXT, Fallback::NONE, env K8S_NODE_NAME;
    /// `k8s.container.name` (written in the pod spec: the downward API has no field for it).
    k8s_container_name: String = TEXT, Fallback::NONE, env K8S_CONTAINER_NAME;
    /// Path the Prometheus pull endpoint serves.
    prometheus_path: String = URL_PATH, Fallback::value(DEFAULT_PROMETHEUS_PATH), env PIPETEL_PROMETHEUS_PATH, key "prometheus.path" Text;
    /// A bearer token the pull endpoint requires (`Authorization: Bearer <token>`); never shown.
    prometheus_bearer_token: String = TOKEN, Fallback::NONE,
        env PIPETEL_PROMETHEUS_BEARER_TOKEN, key "prometheus.bearer_token" Text;
    /// `user:password` the pull endpoint requires as HTTP basic auth; never shown.
    prometheus_basic_auth: (String, String) = BASIC_AUTH, Fallback::NONE,
        env PIPETEL_PROMETHEUS_BASIC_AUTH, key "prometheus.basic_auth" Text;
    /// PEM certificate chain: the pull endpoint serves HTTPS (feature `tls`); needs the key too.
    prometheus_tls_cert: PathBuf = FILE, Fallback::NONE, env PIPETEL_PROMETHEUS_TLS_CERT, key "prometheus.tls_cert" Text;
    /// PEM private key of that certificate.
    prometheus_tls_key: PathBuf = FILE, Fallback::NONE, env PIPETEL_PROMETHEUS_TLS_KEY, key "prometheus.tls_key" Text;
    /// `true` prints `tracing` events to stderr.
    console_log: bool = BOOL, Fallback::value(true), env PIPETEL_CONSOLE_LOG, key "log.console" Bool;
    /// Upper bound of shutdown and of the flush on drop (a bare number counts milliseconds).
    shutdown_timeout: Duration = POSITIVE_MILLIS, Fallback::value(Duration::from_secs(5)),
        env PIPETEL_SHUTDOWN_TIMEOUT, key "shutdown_timeout_ms" Duration;
    /// Attribute sets kept per metric instrument; more fold into one `otel.metric.overflow` series.
    /// Keep it near the series you expect: the OTel SDK reserves a hash table of this many entries for
    /// every instrument and scans all of it at each collection (a limit of 2,000,000 made rendering 11,000
    /// SDK series take 1.8× as long as with 20,000); pipetel's registry reserves nothing.
    cardinality_limit: usize = CARDINALITY, Fallback::value(DEFAULT_CARDINALITY_LIMIT),
        env PIPETEL_CARDINALITY_LIMIT, key "metrics.cardinality_limit" Int;
    /// Prefix of the stage and worker namespaces: `<prefix>.stage`, `<prefix>.worker`.
    namespace: String = NAMESPACE, Fallback::value(DEFAULT_NAMESPACE), env PIPETEL_NAMESPACE, key "pipeline.namespace" Text;
    /// Interval of periodic worker samples (a bare number counts milliseconds; at least 100 ms).
    sample_interval: Duration = SAMPLE_INTERVAL, Fallback::value(Duration::from_secs(10)),
        env PIPETEL_SAMPLE_INTERVAL, key "pipeline.sample_interval_ms" Duration;
    /// How long a finished stage's series stay exported (a bare number counts milliseconds).
    stage_retention: Duration = MILLIS, Fallback::value(Duration::from_secs(300)), env PIPETEL_STAGE_RETENTION, key "pipeline.retention_ms" Duration;
    /// A file every stage and worker row is appended to as JSON Lines, instead of the local rows store
    /// (`init` fails if it cannot be opened).
    rows_file: PathBuf = FILE, Fallback::words("the local rows store"), env PIPETEL_ROWS_FILE, key "pipeline.rows_file" Text;
    /// `false` writes no rows at all: no local store, no rows file, no row log records.
    rows_enabled: bool = BOOL, Fallback::value(true), env PIPETEL_ROWS, key "pipeline.rows" Bool;
    /// Directory of the local rows store, `<dir>/<service.name>.jsonl`.
    rows_dir: PathBuf = FILE, Fallback::words("`$XDG_STATE_HOME/pipetel/rows`, else `~/.local/state/pipetel/rows`"),
        env PIPETEL_ROWS_DIR, key "pipeline.rows_dir" Text;
    /// Size at which the rows file rotates: bytes, or with a `KiB`, `MiB` or `GiB` suffix (`0` never
    /// rotates).
    rows_max_bytes: u64 = BYTE_SIZE, Fallback::value(pipetel_rows::DEFAULT_MAX_BYTES), env PIPETEL_ROWS_MAX_BYTES, key "pipeline.rows_max_bytes" Scalar;
    /// Rotated rows files kept besides the current one (`<file>.1` the newest).
    rows_keep: u32 = ROWS_KEEP, Fallback::value(pipetel_rows::DEFAULT_KEEP), env PIPETEL_ROWS_KEEP, key "pipeline.rows_keep" Int;
    /// A live progress line per running stage on stderr, and each stage's summary line when it ends:
    /// `true` (when stderr is a terminal), `always` (also on a pipe or file), `false`.
    progress: ProgressMode = PROGRESS, Fallback::value(ProgressMode::Off), env PIPETEL_PROGRESS, key "pipeline.progress" Switch;
    /// A finished stage is skewed, and a running shard a straggler, only when it took more than this
    /// beyond the 75th percentile of the stage's finished shards, besides more than 1.5 times it (a
    /// bare number counts milliseconds).
    skew_min: Duration = MILLIS, Fallback::value(AnswerSettings::DEFAULT_SKEW_MIN),
        env PIPETEL_SKEW_MIN, key "pipeline.skew_min_ms" Duration;
    /// A running shard whose items and bytes have not moved for this long is stalled: a worker row, a
    /// span event and a count (a bare number counts milliseconds; `0` never).
    stall_timeout: Duration = MILLIS, Fallback::value(AnswerSettings::DEFAULT_STALL_TIMEOUT),
        env PIPETEL_STALL_TIMEOUT, key "pipeline.stall_timeout_ms" Duration;
    /// What a stalled shard gets: `report` (its row, event and count), or `fail` (then it ends as
    /// failed, reason `stalled for <N> s`).
    stall_action: StallAction = STALL_ACTION, Fallback::value(StallAction::Report),
        env PIPETEL_STALL_ACTION, key "pipeline.stall_action" Text;
    /// Which shards have their own series on the worker families: `running` (at most 32 per stage, the
    /// longest running), `all`, or `off`; the stage families, the shard-duration histogram and the rows
    /// carry every shard.
    shard_metrics: ShardMetrics = SHARD_METRICS, Fallback::value(ShardMetrics::Running),
        env PIPETEL_SHARD_METRICS, key "pipeline.shard_metrics" Text;
    /// The sampling profiler: `cpu` samples every thread's stack `PIPETEL_PROFILE_HZ` times per CPU
    /// second, each sample labelled with the stage, shard, phase and span its thread ran, written
    /// beside the rows store (`<store>.stacks`, read by `pipetel profile`) and sent as OTLP profiles;
    /// `off`.
    profile: ProfileMode = PROFILE_MODE, Fallback::value(ProfileMode::Off),
        env PIPETEL_PROFILE, key "profile.mode" Text;
    /// The profiler's samples per CPU second, 1 to 1000.
    profile_hz: u32 = PROFILE_HZ, Fallback::value(pipetel_profile::DEFAULT_HZ),
        env PIPETEL_PROFILE_HZ, key "profile.hz" Int;
    /// GPU telemetry: `auto` (on when a GPU is found), `on` (required: `init` fails without one), `off`.
    gpu_mode: pipetel_gpu::GpuMode = GPU_MODE, Fallback::value(pipetel_gpu::GpuMode::Auto),
        env PIPETEL_GPU = pipetel_gpu::ENV_GPU_MODE, key "gpu.mode" Text was "gpu.enabled", if feature = "gpu";
    /// Path of the NVML library.
    gpu_nvml_library: PathBuf = LIBRARY, Fallback::words("`libnvidia-ml.so.1` from the loader's search path"),
        env PIPETEL_NVML_LIBRARY = pipetel_gpu::ENV_NVML_LIBRARY, key "gpu.nvml_library" Text, if feature = "gpu";
    /// Path of the ROCm SMI library for AMD GPUs (feature `amd`).
    gpu_rocm_smi_library: PathBuf = LIBRARY, Fallback::words("the usual names"),
        env PIPETEL_ROCM_SMI_LIBRARY = pipetel_gpu::ENV_ROCM_SMI_LIBRARY, key "gpu.rocm_smi_library" Text,
        if feature = "gpu";
    /// GPU poll interval, at least 1 s: `5s`, `1500ms`, or a bare number (seconds in the variable,
    /// milliseconds in the file).
    gpu_poll_interval: Duration = GPU_POLL_SECONDS, Fallback::shown(pipetel_gpu::DEFAULT_POLL_INTERVAL, "`5s`"),
        env PIPETEL_GPU_POLL_INTERVAL = pipetel_gpu::ENV_GPU_POLL_INTERVAL,
        key "gpu.poll_interval_ms" Duration (GPU_POLL_MILLIS), if feature = "gpu";
    /// GPU platform: `auto`, `nvidia`, `amd`.
    gpu_platform: pipetel_gpu::GpuPlatform = GPU_PLATFORM, Fallback::value(pipetel_gpu::GpuPlatform::Auto),
        env PIPETEL_GPU_PLATFORM = pipetel_gpu::ENV_GPU_PLATFORM, key "gpu.platform" Text, if feature = "gpu";
    /// `true` polls PCIe throughput (each read blocks about 20 ms per device).
    gpu_pcie_throughput: bool = BOOL, Fallback::value(false),
        env PIPETEL_GPU_PCIE_THROUGHPUT = pipetel_gpu::ENV_GPU_PCIE_THROUGHPUT, key "gpu.pcie_throughput" Bool,
        if feature = "gpu";
    /// `true` reports the GPU memory of this process and its children.
    gpu_process_memory: bool = BOOL, Fallback::value(false),
        env PIPETEL_GPU_PROCESS_MEMORY = pipetel_gpu::ENV_GPU_PROCESS_MEMORY, key "gpu.process_memory" Bool,
        if feature = "gpu";
    /// The GPUs to report: `all`, `none`, `visible` (those `CUDA_VISIBLE_DEVICES` /
    /// `NVIDIA_VISIBLE_DEVICES` give this process), or a comma list of indices, `GPU-…` UUIDs and
    /// `MIG-…` ids.
    gpu_devices: pipetel_gpu::DeviceSelection = GPU_DEVICES, Fallback::value(pipetel_gpu::DeviceSelection::Visible),
        env PIPETEL_GPU_DEVICES = pipetel_gpu::ENV_GPU_DEVICES, if feature = "gpu";
    /// Upper bound of the GPU library's start (set in code only, through `Config::with_gpu`).
    gpu_init_timeout: Duration = ANY_DURATION, Fallback::value(pipetel_gpu::DEFAULT_INIT_TIMEOUT), if feature = "gpu";
    /// `false` turns off the span-derived `span.duration` histogram.
    span_metrics_enabled: bool = BOOL, Fallback::value(true), env PIPETEL_SPAN_METRICS, key "span_metrics.enabled" Bool;
    /// Only these span names (a comma list) feed `span.duration`.
    span_metrics_allow: Vec<String> = SPAN_ALLOW, Fallback::shown(&[], "every span"),
        env PIPETEL_SPAN_METRICS_ALLOW, key "span_metrics.allow" List;
    /// Target/level filter of the spans that feed `span.duration`, e.g. `info,hyper=off`.
    span_metrics_filter: String = SPAN_FILTER, Fallback::value("trace"),
        env PIPETEL_SPAN_METRICS_FILTER, key "span_metrics.filter" Text;
    /// Which duration `span.duration` records: `wall` or `busy` (the time entered).
    span_metrics_time: SpanTime = SPAN_TIME, Fallback::value(SpanTime::Wall), env PIPETEL_SPAN_METRICS_TIME, key "span_metrics.time" Text;
    /// `false` turns every stage metric off: `pipeline.stage.*`, `pipeline.worker.*`,
    /// `#[pipetel::measure]`'s `function.*` and the stage contexts' (rows and spans flow either way).
    stage_metrics: bool = BOOL, Fallback::value(true), env PIPETEL_STAGE_METRICS, key "pipeline.metrics" Bool;
    /// `false` keeps the stages' user counters out of the metrics (`pipeline.stage.counters`); rows carry
    /// them either way, and `PIPETEL_STAGE_METRICS=false` turns them off too.
    stage_counter_metrics: bool = BOOL, Fallback::value(true),
        env PIPETEL_STAGE_COUNTER_METRICS, key "pipeline.counter_metrics" Bool;
    /// `false` turns the service (task and queue) metrics off: `service_metrics()`, `ServiceMetrics::new`,
    /// `with_labels` and `from_config` give handles that record nothing.
    queue_metrics: bool = BOOL, Fallback::value(true), env PIPETEL_QUEUE_METRICS, key "service.queue_metrics" Bool;
    /// `false` turns the HTTP server metrics off (read by the program's HTTP middleware through
    /// `ServiceMetricsConfig::http_metrics`).
    http_metrics: bool = BOOL, Fallback::value(true), env PIPETEL_HTTP_METRICS, key "service.http_metrics" Bool;
    /// The name prefix (snake_case) of `service_metrics()` (`ServiceMetrics::new` takes its argument's).
    service_prefix: String = SERVICE_PREFIX, Fallback::value(DEFAULT_SERVICE_PREFIX), env PIPETEL_SERVICE_PREFIX, key "service.prefix" Text;
    /// Default bucket bounds of registry and service histograms: comma-separated seconds
    /// (`0.01,0.1,1,10`), `seconds` (0.005 … 10) or `telefuser`.
    histogram_buckets: Vec<f64> = BUCKETS, Fallback::value(SECONDS_BUCKETS),
        env PIPETEL_HISTOGRAM_BUCKETS, key "metrics.histogram_buckets" Buckets;
    /// `false` turns off the process metrics (`process.cpu.time`, `process.memory.usage`, open file
    /// descriptors, threads and the others of the semantic conventions).
    process_metrics: bool = BOOL, Fallback::value(true), env PIPETEL_PROCESS_METRICS, key "process.metrics" Bool;
    /// The console's `tracing` filter directives; they decide only what is printed.
    log_filter: String = FILTER, Fallback::value(DEFAULT_FILTER), env RUST_LOG, key "log.filter" Text;
    /// The console's line format: `compact`, `pretty`, or `json` (one object per line, with the current
    /// span's `trace_id` and `span_id`).
    log_format: LogFormat = LOG_FORMAT, Fallback::value(LogFormat::Compact), env PIPETEL_LOG_FORMAT, key "log.format" Text;
    /// `EnvFilter` directives of the spans exported as traces and measured by `span.duration`,
    /// independent of `RUST_LOG`.
    traces_filter: String = FILTER, Fallback::value(DEFAULT_FILTER), env PIPETEL_TRACES_FILTER, key "traces.filter" Text;
    /// `EnvFilter` directives of the events exported as OTel log records, independent of `RUST_LOG`.
    logs_filter: String = FILTER, Fallback::value(DEFAULT_FILTER), env PIPETEL_LOGS_FILTER, key "logs.filter" Text;
}

pub use pipetel_core::settings::SERVICE_ENV_VARS;
