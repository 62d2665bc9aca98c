//! The TOML file: one row per key, naming the TOML type it takes and the field it sets through
//! the same rule as its environment variable. A TOML value becomes the text the variable would
//! hold (a list is joined with commas, a table becomes `k=v` pairs), so one rule reads both.

use std::path::Path;

use super::env::{add_resource_attributes, to, Apply};
use super::error::{ConfigError, Origin};
use super::parse;
use super::Config;

/// The TOML type a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    /// A whole number.
    Int,
    /// A whole number in the key's unit, or a string in the duration grammar (`"1500ms"`).
    Duration,
    Text,
    /// A string or a number.
    Scalar,
    /// An array of strings or numbers.
    List,
    /// An array of numbers, or the name of a set of bucket bounds (`"telefuser"`).
    Buckets,
    /// A table of strings.
    Table,
    /// A boolean, or a string naming a mode (`"always"`).
    Switch,
}
use Kind::*;

/// A GPU key's setter.
#[cfg(feature = "gpu")]
macro_rules! gpu {
    ($field:ident, $rule:ident) => {
        to!(gpu.$field, $rule)
    };
}
/// Without the `gpu` feature the GPU keys are still accepted (one file serves every build) and
/// ignored.
#[cfg(not(feature = "gpu"))]
macro_rules! gpu {
    ($field:ident, $rule:ident) => {
        |_: &mut Config, _: &str, _: Origin| Ok(())
    };
}

const KEYS: &[(&str, Kind, Apply)] = &[
    ("service_name", Text, to!(service_name, TEXT)),
    ("service_version", Text, to!(service_version, TEXT)),
    ("instance_id", Text, to!(instance_id, INSTANCE_ID)),
    ("propagators", List, to!(propagators, PROPAGATORS)),
    ("sdk_disabled", Bool, to!(sdk_disabled, BOOL)),
    ("shutdown_timeout_ms", Duration, to!(shutdown_timeout, POSITIVE_MILLIS)),
    ("resource", Table, add_resource_attributes),
    ("exporters.traces", List, to!(traces_exporters, TRACE_EXPORTERS)),
    ("exporters.metrics", List, to!(metrics_exporters, METRIC_EXPORTERS)),
    ("exporters.logs", List, to!(logs_exporters, LOG_EXPORTERS)),
    ("otlp.endpoint", Text, to!(otlp.endpoint, ENDPOINT)),
    ("otlp.protocol", Text, to!(otlp.protocol, PROTOCOL)),
    ("otlp.headers", Table, to!(otlp.headers, HEADERS)),
    ("otlp.timeout_ms", Duration, to!(otlp.timeout, MILLIS)),
    ("otlp.compression", Text, to!(otlp.compression, COMPRESSION)),
    ("otlp.certificate", Text, to!(otlp.certificate, CERTIFICATE_FILE)),
    ("otlp.client_certificate", Text, to!(otlp.client_certificate, CERTIFICATE_FILE)),
    ("otlp.client_key", Text, to!(otlp.client_key, KEY_FILE)),
    ("otlp.insecure", Bool, to!(otlp.insecure, BOOL)),
    ("otlp.traces.endpoint", Text, to!(otlp_traces.endpoint, ENDPOINT)),
    ("otlp.traces.protocol", Text, to!(otlp_traces.protocol, PROTOCOL)),
    ("otlp.traces.headers", Table, to!(otlp_traces.headers, HEADERS)),
    ("otlp.traces.timeout_ms", Duration, to!(otlp_traces.timeout, MILLIS)),
    ("otlp.traces.compression", Text, to!(otlp_traces.compression, COMPRESSION)),
    ("otlp.traces.certificate", Text, to!(otlp_traces.certificate, CERTIFICATE_FILE)),
    ("otlp.traces.client_certificate", Text, to!(otlp_traces.client_certificate, CERTIFICATE_FILE)),
    ("otlp.traces.client_key", Text, to!(otlp_traces.client_key, KEY_FILE)),
    ("otlp.traces.insecure", Bool, to!(otlp_traces.insecure, BOOL)),
    ("otlp.metrics.endpoint", Text, to!(otlp_metrics.endpoint, ENDPOINT)),
    ("otlp.metrics.protocol", Text, to!(otlp_metrics.protocol, PROTOCOL)),
    ("otlp.metrics.headers", Table, to!(otlp_metrics.headers, HEADERS)),
    ("otlp.metrics.timeout_ms", Duration, to!(otlp_metrics.timeout, MILLIS)),
    ("otlp.metrics.compression", Text, to!(otlp_metrics.compression, COMPRESSION)),
    ("otlp.metrics.certificate", Text, to!(otlp_metrics.certificate, CERTIFICATE_FILE)),
    ("otlp.metrics.client_certificate", Text, to!(otlp_metrics.client_certificate, CERTIFICATE_FILE)),
    ("otlp.metrics.client_key", Text, to!(otlp_metrics.client_key, KEY_FILE)),
    ("otlp.metrics.insecure", Bool, to!(otlp_metrics.insecure, BOOL)),
    ("otlp.logs.endpoint", Text, to!(otlp_logs.endpoint, ENDPOINT)),
    ("otlp.logs.protocol", Text, to!(otlp_logs.protocol, PROTOCOL)),
    ("otlp.logs.headers", Table, to!(otlp_logs.headers, HEADERS)),
    ("otlp.logs.timeout_ms", Duration, to!(otlp_logs.timeout, MILLIS)),
    ("otlp.logs.compression", Text, to!(otlp_logs.compression, COMPRESSION)),
    ("otlp.logs.certificate", Text, to!(otlp_logs.certificate, CERTIFICATE_FILE)),
    ("otlp.logs.client_certificate", Text, to!(otlp_logs.client_certificate, CERTIFICATE_FILE)),
    ("otlp.logs.client_key", Text, to!(otlp_logs.client_key, KEY_FILE)),
    ("otlp.logs.insecure", Bool, to!(otlp_logs.insecure, BOOL)),
    ("prometheus.host", Text, to!(prometheus_host, HOST)),
    ("prometheus.port", Int, to!(prometheus_port, PORT)),
    ("prometheus.path", Text, to!(prometheus_path, URL_PATH)),
    ("prometheus.bearer_token", Text, to!(prometheus_bearer_token, TOKEN)),
    ("prometheus.basic_auth", Text, to!(prometheus_basic_auth, BASIC_AUTH)),
    ("prometheus.tls_cert", Text, to!(prometheus_tls_cert, FILE)),
    ("prometheus.tls_key", Text, to!(prometheus_tls_key, FILE)),
    ("metrics.export_interval_ms", Duration, to!(metric_export_interval, POSITIVE_MILLIS)),
    ("metrics.cardinality_limit", Int, to!(cardinality_limit, CARDINALITY)),
    ("metrics.histogram_buckets", Buckets, to!(histogram_buckets, BUCKETS)),
    ("metrics.temporality_preference", Text, to!(metric_temporality, TEMPORALITY)),
    ("metrics.default_histogram_aggregation", Text, to!(histogram_aggregation, HISTOGRAM_AGGREGATION)),
    ("metrics.export_timeout_ms", Duration, to!(metric_export_timeout, POSITIVE_MILLIS)),
    ("limits.attribute_count", Int, to!(limits.attribute_count, COUNT_LIMIT)),
    ("limits.span_attribute_count", Int, to!(limits.span_attribute_count, COUNT_LIMIT)),
    ("limits.span_event_count", Int, to!(limits.span_event_count, COUNT_LIMIT)),
    ("limits.span_link_count", Int, to!(limits.span_link_count, COUNT_LIMIT)),
    ("limits.event_attribute_count", Int, to!(limits.event_attribute_count, COUNT_LIMIT)),
    ("limits.link_attribute_count", Int, to!(limits.link_attribute_count, COUNT_LIMIT)),
    ("batch.traces.schedule_delay_ms", Duration, to!(bsp.schedule_delay, POSITIVE_MILLIS)),
    ("batch.traces.export_timeout_ms", Duration, to!(bsp.export_timeout, POSITIVE_MILLIS)),
    ("batch.traces.max_queue_size", Int, to!(bsp.max_queue_size, BATCH_SIZE)),
    ("batch.traces.max_export_batch_size", Int, to!(bsp.max_export_batch_size, BATCH_SIZE)),
    ("batch.logs.schedule_delay_ms", Duration, to!(blrp.schedule_delay, POSITIVE_MILLIS)),
    ("batch.logs.export_timeout_ms", Duration, to!(blrp.export_timeout, POSITIVE_MILLIS)),
    ("batch.logs.max_queue_size", Int, to!(blrp.max_queue_size, BATCH_SIZE)),
    ("batch.logs.max_export_batch_size", Int, to!(blrp.max_export_batch_size, BATCH_SIZE)),
    ("metrics.exemplar_filter", Text, to!(exemplar_filter, EXEMPLAR_FILTER)),
    ("traces.sampler", Text, to!(sampler, SAMPLER)),
    ("traces.sampler_arg", Scalar, to!(sampler_arg, SAMPLER_ARG)),
    ("log.filter", Text, to!(log_filter, LOG_FILTER)),
    ("log.console", Bool, to!(console_log, BOOL)),
    ("pipeline.metrics", Bool, to!(stage_metrics, BOOL)),
    ("pipeline.counter_metrics", Bool, to!(stage_counter_metrics, BOOL)),
    ("pipeline.namespace", Text, to!(namespace, NAMESPACE)),
    ("pipeline.sample_interval_ms", Duration, to!(sample_interval, SAMPLE_INTERVAL)),
    ("pipeline.retention_ms", Duration, to!(stage_retention, MILLIS)),
    ("pipeline.rows_file", Text, to!(rows_file, FILE)),
    ("pipeline.rows", Bool, to!(rows_enabled, BOOL)),
    ("pipeline.rows_dir", Text, to!(rows_dir, FILE)),
    ("pipeline.rows_max_bytes", Scalar, to!(rows_max_bytes, BYTE_SIZE)),
    ("pipeline.rows_keep", Int, to!(rows_keep, ROWS_KEEP)),
    ("pipeline.progress", Switch, to!(progress, PROGRESS)),
    ("span_metrics.enabled", Bool, to!(span_metrics_enabled, BOOL)),
    ("span_metrics.allow", List, to!(span_metrics_allow, SPAN_ALLOW)),
    ("span_metrics.filter", Text, to!(span_metrics_filter, SPAN_FILTER)),
    ("span_metrics.time", Text, to!(span_metrics_time, SPAN_TIME)),
    ("service.prefix", Text, to!(service_prefix, SERVICE_PREFIX)),
    ("service.queue_metrics", Bool, to!(queue_metrics, BOOL)),
    ("service.http_metrics", Bool, to!(http_metrics, BOOL)),
    ("gpu.mode", Text, gpu!(mode, GPU_MODE)),
    ("gpu.poll_interval_ms", Duration, gpu!(poll_interval, GPU_POLL_MILLIS)),
    ("gpu.nvml_library", Text, gpu!(nvml_library, LIBRARY)),
    ("gpu.rocm_smi_library", Text, gpu!(rocm_smi_library, LIBRARY)),
    ("gpu.platform", Text, gpu!(platform, GPU_PLATFORM)),
    ("gpu.pcie_throughput", Bool, gpu!(pcie_throughput, BOOL)),
    ("gpu.process_memory", Bool, gpu!(process_memory, BOOL)),
];

/// Old spellings still read, each with a deprecation warning: (old key, new key).
const RENAMED: &[(&str, &str)] = &[("gpu.enabled", "gpu.mode")];

/// Lays the file's keys over `config`.
pub(super) fn apply(config: &mut Config, text: &str, path: &Path) -> Result<(), ConfigError> {
    let syntax = |message: String| ConfigError::FileSyntax { path: path.to_path_buf(), message };
    let table: toml::Table =
        text.parse().map_err(|e: toml::de::Error| syntax(e.to_string().trim().replace('\n', " ")))?;
    let mut found = Vec::new();
    flatten(&table, "", &mut found).map_err(syntax)?;
    for (written, value) in found {
        // An old spelling sets the new key's field; errors still name the key as written.
        let key = match RENAMED.iter().find(|(old, _)| *old == written) {
            Some((old, new)) => {
                if table_has(&table, new) {
                    return Err(syntax(format!("`{old}` is the old name of `{new}`; set only `{new}`")));
                }
                config
                    .deprecations
                    .push(format!("configuration file {}: key `{old}` is deprecated; use `{new}`", path.display()));
                new
            }
            None => written.as_str(),
        };
        let Some((_, kind, apply)) = KEYS.iter().find(|(k, _, _)| *k == key) else {
            return Err(syntax(format!("unknown key `{written}`")));
        };
        let origin = Origin::File { path: path.to_path_buf(), key: written.clone() };
        let text =
            as_text(value, *kind).map_err(|reason| ConfigError::invalid(origin.clone(), value.to_string(), reason))?;
        apply(config, &text, origin)?;
    }
    Ok(())
}

/// Lays one setting given in code over `config` ([`Config::with_setting`]): `key` is a file key,
/// dotted or with each `.` written `_`; the value is checked as the file's would be, and errors
/// name the key as written.
pub(super) fn apply_setting(config: &mut Config, key: &str, value: &toml::Value) -> Result<(), ConfigError> {
    let found = KEYS.iter().find(|(k, _, _)| *k == key || underscored(k) == key);
    let Some((_, kind, apply)) = found else {
        return Err(ConfigError::UnknownSetting { key: key.to_string(), expected: section_keys("") });
    };
    let origin = Origin::Setting(key.to_string());
    let text =
        as_text(value, *kind).map_err(|reason| ConfigError::invalid(origin.clone(), value.to_string(), reason))?;
    apply(config, &text, origin)
}

/// A file key with each `.` written `_` (`prometheus.port` -> `prometheus_port`).
fn underscored(key: &str) -> String {
    key.replace('.', "_")
}

/// The dotted keys and their values; a table is a section unless a key takes it whole.
fn flatten<'a>(table: &'a toml::Table, prefix: &str, out: &mut Vec<(String, &'a toml::Value)>) -> Result<(), String> {
    for (name, value) in table {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let takes_whole = KEYS.iter().any(|(k, _, _)| *k == key) || RENAMED.iter().any(|(old, _)| *old == key);
        let is_section = KEYS.iter().any(|(k, _, _)| k.strip_prefix(key.as_str()).is_some_and(|r| r.starts_with('.')));
        match value {
            toml::Value::Table(inner) if !takes_whole && is_section => flatten(inner, &key, out)?,
            _ if takes_whole => out.push((key, value)),
            _ if is_section => return Err(format!("`{key}` is a section: expected a table")),
            _ => return Err(format!("unknown key `{key}`; expected one of {}", section_keys(prefix))),
        }
    }
    Ok(())
}

/// The names a section holds, for the error about an unknown one.
fn section_keys(section: &str) -> String {
    let names: std::collections::BTreeSet<&str> = KEYS
        .iter()
        .filter_map(|(k, _, _)| {
            let rest = if section.is_empty() { Some(*k) } else { k.strip_prefix(section)?.strip_prefix('.') };
            rest.map(|r| r.split('.').next().unwrap_or(r))
        })
        .collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

fn table_has(table: &toml::Table, dotted: &str) -> bool {
    let mut parts = dotted.split('.');
    let Some(first) = parts.next() else { return false };
    let mut value = table.get(first);
    for part in parts {
        value = value.and_then(|v| v.as_table()).and_then(|t| t.get(part));
    }
    value.is_some()
}

/// The text the environment variable would hold for this value, or why the type is wrong.
fn as_text(value: &toml::Value, kind: Kind) -> Result<String, String> {
    use toml::Value as V;
    let scalar = |v: &V| match v {
        V::String(s) => Some(s.clone()),
        V::Integer(i) => Some(i.to_string()),
        V::Float(f) => Some(f.to_string()),
        _ => None,
    };
    match (kind, value) {
        (Bool, V::Boolean(b)) => Ok(b.to_string()),
        (Bool, _) => Err("expected `true` or `false`".into()),
        (Int, V::Integer(i)) => Ok(i.to_string()),
        (Int, _) => Err("expected a whole number".into()),
        (Duration, V::Integer(_) | V::String(_)) => Ok(scalar(value).unwrap_or_default()),
        (Duration, _) => Err("expected a whole number or a duration such as \"1500ms\"".into()),
        (Text, V::String(s)) => Ok(s.clone()),
        (Text, _) => Err("expected a string".into()),
        (Scalar, _) => scalar(value).ok_or_else(|| "expected a string or a number".into()),
        (Buckets, V::String(name)) => Ok(name.clone()),
        (Buckets, V::Array(_)) => as_text(value, List),
        (Buckets, _) => Err("expected an array of numbers or a name such as \"telefuser\"".into()),
        (List, V::Array(items)) => {
            let items: Option<Vec<String>> = items.iter().map(|v| scalar(v).filter(|s| !s.trim().is_empty())).collect();
            items.map(|i| i.join(",")).ok_or_else(|| "expected an array of non-empty strings or numbers".into())
        }
        (List, _) => Err("expected an array".into()),
        (Table, V::Table(t)) => {
            let pairs: Option<Vec<String>> =
                t.iter().map(|(k, v)| v.as_str().map(|v| format!("{k}={}", parse::percent_encode(v)))).collect();
            pairs.map(|p| p.join(",")).ok_or_else(|| "expected a table of strings".into())
        }
        (Table, _) => Err("expected a table".into()),
        (Switch, V::Boolean(b)) => Ok(b.to_string()),
        (Switch, V::String(s)) => Ok(s.clone()),
        (Switch, _) => Err("expected `true`, `false` or a string such as \"always\"".into()),
    }
}

/// No two keys have the same `_` spelling, so [`apply_setting`] finds at most one.
#[cfg(test)]
pub(super) fn underscored_keys_are_unique() -> bool {
    let spelled: std::collections::BTreeSet<String> = KEYS.iter().map(|(k, _, _)| underscored(k)).collect();
    spelled.len() == KEYS.len()
}

/// The keys with a row, for the test that the README's table names only real keys.
#[cfg(test)]
pub(super) fn keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter().map(|(key, _, _)| *key)
}
