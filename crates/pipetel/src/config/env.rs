//! The environment: one row per variable, naming the field it sets and the rule that reads it.

use super::error::{ConfigError, Origin};
use super::parse;
use super::vars::*;
use super::Config;

/// Reads a value's text from an origin into the configuration.
pub(super) type Apply = fn(&mut Config, &str, Origin) -> Result<(), ConfigError>;

/// A row's setter: reads the text with `parse::$rule` and stores it in `$field`.
macro_rules! to {
    ($($field:ident).+, $rule:ident) => {
        |c: &mut Config, text: &str, origin: Origin| {
            c.$($field).+ = Some(parse::$rule.read(text, origin)?);
            Ok(())
        }
    };
}
pub(super) use to;

/// Every variable except [`PIPETEL_CONFIG`] (read first, by `Config::from_lookup`).
const ROWS: &[(&str, Apply)] = &[
    (OTEL_SDK_DISABLED, to!(sdk_disabled, BOOL)),
    (OTEL_SERVICE_NAME, to!(service_name, TEXT)),
    (OTEL_RESOURCE_ATTRIBUTES, add_resource_attributes),
    (OTEL_TRACES_EXPORTER, to!(traces_exporters, TRACE_EXPORTERS)),
    (OTEL_METRICS_EXPORTER, to!(metrics_exporters, METRIC_EXPORTERS)),
    (OTEL_LOGS_EXPORTER, to!(logs_exporters, LOG_EXPORTERS)),
    (OTEL_EXPORTER_OTLP_ENDPOINT, to!(otlp.endpoint, ENDPOINT)),
    (OTEL_EXPORTER_OTLP_PROTOCOL, to!(otlp.protocol, PROTOCOL)),
    (OTEL_EXPORTER_OTLP_HEADERS, to!(otlp.headers, HEADERS)),
    (OTEL_EXPORTER_OTLP_TIMEOUT, to!(otlp.timeout, MILLIS)),
    (OTEL_EXPORTER_OTLP_COMPRESSION, to!(otlp.compression, COMPRESSION)),
    (OTEL_EXPORTER_OTLP_CERTIFICATE, to!(otlp.certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, to!(otlp.client_certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_CLIENT_KEY, to!(otlp.client_key, KEY_FILE)),
    (OTEL_EXPORTER_OTLP_INSECURE, to!(otlp.insecure, BOOL)),
    (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, to!(otlp_traces.endpoint, ENDPOINT)),
    (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, to!(otlp_traces.protocol, PROTOCOL)),
    (OTEL_EXPORTER_OTLP_TRACES_HEADERS, to!(otlp_traces.headers, HEADERS)),
    (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, to!(otlp_traces.timeout, MILLIS)),
    (OTEL_EXPORTER_OTLP_TRACES_COMPRESSION, to!(otlp_traces.compression, COMPRESSION)),
    (OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE, to!(otlp_traces.certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE, to!(otlp_traces.client_certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY, to!(otlp_traces.client_key, KEY_FILE)),
    (OTEL_EXPORTER_OTLP_TRACES_INSECURE, to!(otlp_traces.insecure, BOOL)),
    (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, to!(otlp_metrics.endpoint, ENDPOINT)),
    (OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, to!(otlp_metrics.protocol, PROTOCOL)),
    (OTEL_EXPORTER_OTLP_METRICS_HEADERS, to!(otlp_metrics.headers, HEADERS)),
    (OTEL_EXPORTER_OTLP_METRICS_TIMEOUT, to!(otlp_metrics.timeout, MILLIS)),
    (OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, to!(otlp_metrics.compression, COMPRESSION)),
    (OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE, to!(otlp_metrics.certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE, to!(otlp_metrics.client_certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY, to!(otlp_metrics.client_key, KEY_FILE)),
    (OTEL_EXPORTER_OTLP_METRICS_INSECURE, to!(otlp_metrics.insecure, BOOL)),
    (OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, to!(otlp_logs.endpoint, ENDPOINT)),
    (OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, to!(otlp_logs.protocol, PROTOCOL)),
    (OTEL_EXPORTER_OTLP_LOGS_HEADERS, to!(otlp_logs.headers, HEADERS)),
    (OTEL_EXPORTER_OTLP_LOGS_TIMEOUT, to!(otlp_logs.timeout, MILLIS)),
    (OTEL_EXPORTER_OTLP_LOGS_COMPRESSION, to!(otlp_logs.compression, COMPRESSION)),
    (OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE, to!(otlp_logs.certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE, to!(otlp_logs.client_certificate, CERTIFICATE_FILE)),
    (OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY, to!(otlp_logs.client_key, KEY_FILE)),
    (OTEL_EXPORTER_OTLP_LOGS_INSECURE, to!(otlp_logs.insecure, BOOL)),
    (OTEL_EXPORTER_PROMETHEUS_HOST, to!(prometheus_host, HOST)),
    (OTEL_EXPORTER_PROMETHEUS_PORT, to!(prometheus_port, PORT)),
    (OTEL_METRIC_EXPORT_INTERVAL, to!(metric_export_interval, POSITIVE_MILLIS)),
    (OTEL_TRACES_SAMPLER, to!(sampler, SAMPLER)),
    (OTEL_TRACES_SAMPLER_ARG, to!(sampler_arg, SAMPLER_ARG)),
    (OTEL_PROPAGATORS, to!(propagators, PROPAGATORS)),
    (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, to!(metric_temporality, TEMPORALITY)),
    (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, to!(histogram_aggregation, HISTOGRAM_AGGREGATION)),
    (OTEL_METRIC_EXPORT_TIMEOUT, to!(metric_export_timeout, POSITIVE_MILLIS)),
    (OTEL_ATTRIBUTE_COUNT_LIMIT, to!(limits.attribute_count, COUNT_LIMIT)),
    (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, to!(limits.span_attribute_count, COUNT_LIMIT)),
    (OTEL_SPAN_EVENT_COUNT_LIMIT, to!(limits.span_event_count, COUNT_LIMIT)),
    (OTEL_SPAN_LINK_COUNT_LIMIT, to!(limits.span_link_count, COUNT_LIMIT)),
    (OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT, to!(limits.event_attribute_count, COUNT_LIMIT)),
    (OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, to!(limits.link_attribute_count, COUNT_LIMIT)),
    (OTEL_BSP_SCHEDULE_DELAY, to!(bsp.schedule_delay, POSITIVE_MILLIS)),
    (OTEL_BSP_EXPORT_TIMEOUT, to!(bsp.export_timeout, POSITIVE_MILLIS)),
    (OTEL_BSP_MAX_QUEUE_SIZE, to!(bsp.max_queue_size, BATCH_SIZE)),
    (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, to!(bsp.max_export_batch_size, BATCH_SIZE)),
    (OTEL_BLRP_SCHEDULE_DELAY, to!(blrp.schedule_delay, POSITIVE_MILLIS)),
    (OTEL_BLRP_EXPORT_TIMEOUT, to!(blrp.export_timeout, POSITIVE_MILLIS)),
    (OTEL_BLRP_MAX_QUEUE_SIZE, to!(blrp.max_queue_size, BATCH_SIZE)),
    (OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, to!(blrp.max_export_batch_size, BATCH_SIZE)),
    (PIPETEL_SERVICE_VERSION, to!(service_version, TEXT)),
    (PIPETEL_INSTANCE_ID, to!(instance_id, INSTANCE_ID)),
    (KUBERNETES_SERVICE_HOST, to!(k8s.service_host, TEXT)),
    (K8S_POD_NAME, to!(k8s.pod_name, TEXT)),
    (K8S_POD_UID, to!(k8s.pod_uid, TEXT)),
    (K8S_NAMESPACE_NAME, to!(k8s.namespace_name, TEXT)),
    (K8S_NODE_NAME, to!(k8s.node_name, TEXT)),
    (K8S_CONTAINER_NAME, to!(k8s.container_name, TEXT)),
    (PIPETEL_PROMETHEUS_PATH, to!(prometheus_path, URL_PATH)),
    (PIPETEL_PROMETHEUS_BEARER_TOKEN, to!(prometheus_bearer_token, TOKEN)),
    (PIPETEL_PROMETHEUS_BASIC_AUTH, to!(prometheus_basic_auth, BASIC_AUTH)),
    (PIPETEL_PROMETHEUS_TLS_CERT, to!(prometheus_tls_cert, FILE)),
    (PIPETEL_PROMETHEUS_TLS_KEY, to!(prometheus_tls_key, FILE)),
    (PIPETEL_CONSOLE_LOG, to!(console_log, BOOL)),
    (PIPETEL_SHUTDOWN_TIMEOUT, to!(shutdown_timeout, POSITIVE_MILLIS)),
    (PIPETEL_CARDINALITY_LIMIT, to!(cardinality_limit, CARDINALITY)),
    (PIPETEL_NAMESPACE, to!(namespace, NAMESPACE)),
    (PIPETEL_SAMPLE_INTERVAL, to!(sample_interval, SAMPLE_INTERVAL)),
    (PIPETEL_STAGE_RETENTION, to!(stage_retention, MILLIS)),
    (PIPETEL_ROWS_FILE, to!(rows_file, FILE)),
    (PIPETEL_ROWS, to!(rows_enabled, BOOL)),
    (PIPETEL_ROWS_DIR, to!(rows_dir, FILE)),
    (PIPETEL_ROWS_MAX_BYTES, to!(rows_max_bytes, BYTE_SIZE)),
    (PIPETEL_ROWS_KEEP, to!(rows_keep, ROWS_KEEP)),
    (PIPETEL_PROGRESS, to!(progress, PROGRESS)),
    (PIPETEL_SPAN_METRICS, to!(span_metrics_enabled, BOOL)),
    (PIPETEL_SPAN_METRICS_ALLOW, to!(span_metrics_allow, SPAN_ALLOW)),
    (PIPETEL_SPAN_METRICS_FILTER, to!(span_metrics_filter, SPAN_FILTER)),
    (PIPETEL_SPAN_METRICS_TIME, to!(span_metrics_time, SPAN_TIME)),
    (PIPETEL_STAGE_METRICS, to!(stage_metrics, BOOL)),
    (PIPETEL_STAGE_COUNTER_METRICS, to!(stage_counter_metrics, BOOL)),
    (PIPETEL_QUEUE_METRICS, to!(queue_metrics, BOOL)),
    (PIPETEL_HTTP_METRICS, to!(http_metrics, BOOL)),
    (PIPETEL_SERVICE_PREFIX, to!(service_prefix, SERVICE_PREFIX)),
    (PIPETEL_HISTOGRAM_BUCKETS, to!(histogram_buckets, BUCKETS)),
    (OTEL_METRICS_EXEMPLAR_FILTER, to!(exemplar_filter, EXEMPLAR_FILTER)),
    (RUST_LOG, to!(log_filter, LOG_FILTER)),
];

/// The GPU variables (read only in builds with the `gpu` feature).
#[cfg(feature = "gpu")]
const GPU_ROWS: &[(&str, Apply)] = &[
    (PIPETEL_GPU, to!(gpu.mode, GPU_MODE)),
    (PIPETEL_NVML_LIBRARY, to!(gpu.nvml_library, LIBRARY)),
    (PIPETEL_ROCM_SMI_LIBRARY, to!(gpu.rocm_smi_library, LIBRARY)),
    (PIPETEL_GPU_POLL_INTERVAL, to!(gpu.poll_interval, GPU_POLL_SECONDS)),
    (PIPETEL_GPU_PLATFORM, to!(gpu.platform, GPU_PLATFORM)),
    (PIPETEL_GPU_PCIE_THROUGHPUT, to!(gpu.pcie_throughput, BOOL)),
    (PIPETEL_GPU_PROCESS_MEMORY, to!(gpu.process_memory, BOOL)),
    (PIPETEL_GPU_DEVICES, to!(gpu.devices, GPU_DEVICES)),
];
#[cfg(not(feature = "gpu"))]
const GPU_ROWS: &[(&str, Apply)] = &[];

/// `OTEL_RESOURCE_ATTRIBUTES` adds to the attributes the file gave, key by key.
pub(super) fn add_resource_attributes(c: &mut Config, text: &str, origin: Origin) -> Result<(), ConfigError> {
    let pairs = parse::RESOURCE.read(text, origin)?.value;
    c.add_resource_attributes(pairs);
    Ok(())
}

/// Lays the variables `lookup` finds over `config`. With `only`, just those variables are read
/// and an empty value is a value; otherwise every variable is read and an empty one counts as
/// unset (shells make it easy to export one by mistake).
pub(super) fn apply(
    config: &mut Config,
    lookup: &dyn Fn(&str) -> Option<String>,
    only: Option<&[&str]>,
) -> Result<(), ConfigError> {
    for (name, apply) in ROWS.iter().chain(GPU_ROWS) {
        if only.is_some_and(|only| !only.contains(name)) {
            continue;
        }
        let Some(text) = lookup(name) else { continue };
        if only.is_none() && text.trim().is_empty() {
            continue;
        }
        apply(config, &text, Origin::Env((*name).to_string()))?;
    }
    Ok(())
}

/// The variables with a row, for the test that every variable is read.
#[cfg(test)]
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    ROWS.iter().chain(GPU_ROWS).map(|(name, _)| *name)
}
