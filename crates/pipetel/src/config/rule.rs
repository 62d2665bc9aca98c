//! One rule per kind of setting: how its text becomes a value (a lexer of `syntax.rs`) and what
//! values it accepts (a check of `syntax.rs`), and whether the value is a credential. The
//! environment, the file and the code paths all go through the same rule: text is lexed and
//! checked as it is read; a value set in code is checked when the configuration is resolved.

// A check takes `&T` of the stored type, `&String` and `&Vec<_>` included.
#![allow(clippy::ptr_arg)]

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::syntax::*;
use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ProgressMode, Propagator, SamplerConfig, Signal, TraceExporter,
};
use crate::redact::{redact_url, redact_urls_in};
use pipetel_core::settings::SpanTime;
use pipetel_core::settings::{ConfigError, Origin};

/// What of a value errors and `Debug` output may show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Redaction {
    /// All of it.
    None,
    /// Nothing: a credential is shown as `<redacted>`.
    All,
    /// Request headers: their names, never their values (`authorization=<redacted>`).
    HeaderValues,
    /// An endpoint: all but the userinfo of its URL (`http://<redacted>@host:4318`).
    Userinfo,
}

/// How a redacted value is written.
pub(crate) const REDACTED: &str = "<redacted>";

impl Redaction {
    /// The text a value was given as, as an error may show it.
    pub(crate) fn text(self, text: &str) -> String {
        match self {
            Redaction::None => redact_urls_in(text).into_owned(),
            Redaction::Userinfo => redact_url(text).into_owned(),
            Redaction::All => REDACTED.to_string(),
            Redaction::HeaderValues => text
                .split(',')
                .map(|item| match item.split_once('=') {
                    Some((name, _)) => format!("{}={REDACTED}", name.trim()),
                    None if item.trim().is_empty() => String::new(),
                    None => REDACTED.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// A value, as an error or `Debug` may show it.
    pub(crate) fn value<T: Show>(self, value: &T) -> String {
        match self {
            Redaction::None => redact_urls_in(&value.show()).into_owned(),
            Redaction::Userinfo => redact_url(&value.show()).into_owned(),
            Redaction::All => REDACTED.to_string(),
            Redaction::HeaderValues => value.names_only(),
        }
    }
}

/// How one setting is read and checked.
pub(crate) struct Rule<T: 'static> {
    /// Text to value: the syntax.
    pub(crate) lex: fn(&str) -> Result<T, String>,
    /// The accepted values, whatever path the value took.
    pub(crate) check: fn(&T) -> Result<(), String>,
    /// What errors and `Debug` show of the value.
    pub(crate) redaction: Redaction,
}

impl<T> Rule<T> {
    const fn new(lex: fn(&str) -> Result<T, String>, check: fn(&T) -> Result<(), String>) -> Self {
        Rule { lex, check, redaction: Redaction::None }
    }

    const fn redacted(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// Reads `text` from `origin`: lexed and checked, or an error naming both.
    pub(crate) fn read(&'static self, text: &str, origin: Origin) -> Result<Set<T>, ConfigError> {
        let value = (self.lex)(text).and_then(|v| (self.check)(&v).map(|()| v));
        match value {
            Ok(value) => Ok(Set { value, origin, rule: self }),
            Err(reason) => Err(ConfigError::invalid(origin, self.redaction.text(text), reason)),
        }
    }
}

impl<T> fmt::Debug for Rule<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule").field("redaction", &self.redaction).finish_non_exhaustive()
    }
}

/// A value that was set, where from, and the rule it answers to.
#[derive(Clone)]
pub(crate) struct Set<T: 'static> {
    pub(crate) value: T,
    pub(crate) origin: Origin,
    rule: &'static Rule<T>,
}

impl<T> Set<T> {
    /// A value set in code by `setter`; checked when the configuration is resolved.
    pub(crate) fn code(value: T, setter: &'static str, rule: &'static Rule<T>) -> Self {
        Set { value, origin: Origin::Code(setter), rule }
    }
}

impl<T: Show> fmt::Debug for Set<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Set");
        match self.rule.redaction {
            Redaction::None => {
                let shown = format!("{:?}", self.value);
                s.field("value", &format_args!("{}", redact_urls_in(&shown)))
            }
            redaction => s.field("value", &redaction.value(&self.value)),
        };
        s.field("origin", &self.origin).finish()
    }
}

/// A certificate file's setting and its key's.
pub(crate) type CertificateAndKey<'a> = (&'a Set<PathBuf>, &'a Set<PathBuf>);

/// A certificate file and its key's, both given or neither: one without the other is an error
/// naming where it was given, with `needs_key` or `needs_certificate` as the reason.
pub(crate) fn certificate_and_key<'a>(
    certificate: Option<&'a Set<PathBuf>>,
    key: Option<&'a Set<PathBuf>>,
    needs_key: String,
    needs_certificate: String,
) -> Result<Option<CertificateAndKey<'a>>, ConfigError> {
    let lone =
        |set: &Set<PathBuf>, reason| ConfigError::invalid(set.origin.clone(), set.value.display().to_string(), reason);
    match (certificate, key) {
        (Some(certificate), Some(key)) => Ok(Some((certificate, key))),
        (Some(certificate), None) => Err(lone(certificate, needs_key)),
        (None, Some(key)) => Err(lone(key, needs_certificate)),
        (None, None) => Ok(None),
    }
}

/// A setting's slot: unset, or set with its origin.
pub(crate) type One<T> = Option<Set<T>>;

/// A setting with a value for every signal and one per signal (the OTLP settings): index 0 is
/// the generic value, then [`scope`]'s index of each signal.
pub(crate) type PerSignal<T> = [Option<Set<T>>; 5];

/// The index of a signal's own value in a [`PerSignal`] slot.
pub(crate) fn scope(signal: Signal) -> usize {
    match signal {
        Signal::Traces => 1,
        Signal::Metrics => 2,
        Signal::Logs => 3,
        Signal::Profiles => 4,
    }
}

/// Access to a slot by scope, and every value's check: what the table's readers and
/// `resolve` need of a slot of either shape.
pub(crate) trait AnySlot<T> {
    /// The value of `scope` (always the one value of a [`One`] slot).
    fn at(&mut self, scope: usize) -> &mut Option<Set<T>>;
    /// Every value after its rule's check, or an error naming its origin.
    fn check_all(&self) -> Result<(), ConfigError>;
}

impl<T: Show> AnySlot<T> for One<T> {
    fn at(&mut self, _: usize) -> &mut Option<Set<T>> {
        self
    }

    fn check_all(&self) -> Result<(), ConfigError> {
        self.checked().map(drop)
    }
}

impl<T: Show> AnySlot<T> for PerSignal<T> {
    fn at(&mut self, scope: usize) -> &mut Option<Set<T>> {
        &mut self[scope.min(4)]
    }

    fn check_all(&self) -> Result<(), ConfigError> {
        self.iter().try_for_each(|slot| slot.checked().map(drop))
    }
}

/// A setting's slot in `Config`: unset, or set with its origin.
pub(crate) trait Slot<T> {
    /// The value, unchecked.
    fn value(&self) -> Option<&T>;
    /// The value after its rule's check, or an error naming its origin.
    fn checked(&self) -> Result<Option<&T>, ConfigError>;
    /// Where the value came from ([`Origin::Default`] when unset).
    fn origin(&self) -> Origin;
}

impl<T: Show> Slot<T> for Option<Set<T>> {
    fn value(&self) -> Option<&T> {
        self.as_ref().map(|s| &s.value)
    }

    fn checked(&self) -> Result<Option<&T>, ConfigError> {
        let Some(set) = self else { return Ok(None) };
        (set.rule.check)(&set.value)
            .map_err(|reason| ConfigError::invalid(set.origin.clone(), set.rule.redaction.value(&set.value), reason))?;
        Ok(Some(&set.value))
    }

    fn origin(&self) -> Origin {
        self.as_ref().map(|s| s.origin.clone()).unwrap_or_default()
    }
}

/// Lays `set`'s pairs over the slot's, a name given again replacing the earlier value: the
/// resource attributes of code, the environment and the file add to one another key by key.
pub(crate) fn merge_pairs(slot: &mut Option<Set<Vec<(String, String)>>>, set: Set<Vec<(String, String)>>) {
    match slot {
        Some(old) => {
            merge_into(&mut old.value, set.value);
            old.origin = set.origin;
        }
        None => *slot = Some(set),
    }
}

/// Adds pairs, a name given again replacing the earlier value.
pub(crate) fn merge_into(into: &mut Vec<(String, String)>, pairs: Vec<(String, String)>) {
    for (k, v) in pairs {
        match into.iter_mut().find(|(existing, _)| *existing == k) {
            Some(slot) => slot.1 = v,
            None => into.push((k, v)),
        }
    }
}

/// A slot's value, or the setting's default: what the getters return.
pub(crate) trait OrDefault<'a, R> {
    fn or_default_to(&'a self, default: R) -> R;
}

impl<T: Copy> OrDefault<'_, T> for Option<Set<T>> {
    fn or_default_to(&self, default: T) -> T {
        self.as_ref().map_or(default, |s| s.value)
    }
}

impl<'a> OrDefault<'a, &'a str> for Option<Set<String>> {
    fn or_default_to(&'a self, default: &'a str) -> &'a str {
        self.as_ref().map_or(default, |s| s.value.as_str())
    }
}

/// How a value is shown in an error (text as it is, the rest as `Debug` shows it).
pub(crate) trait Show: fmt::Debug {
    fn show(&self) -> String {
        format!("{self:?}")
    }

    /// The value with every secret part redacted: only pairs have names to keep.
    fn names_only(&self) -> String {
        REDACTED.to_string()
    }
}

impl Show for String {
    fn show(&self) -> String {
        self.clone()
    }
}
impl Show for PathBuf {
    fn show(&self) -> String {
        self.display().to_string()
    }
}
impl Show for Vec<(String, String)> {
    fn names_only(&self) -> String {
        self.iter().map(|(name, _)| format!("{name}={REDACTED}")).collect::<Vec<_>>().join(",")
    }
}
impl Show for bool {}
impl Show for u16 {}
impl Show for usize {}
impl Show for u32 {}
impl Show for u64 {}
impl Show for f64 {}
impl Show for Duration {}
impl Show for MetricTemporality {}
impl Show for HistogramAggregation {}
impl Show for Vec<Propagator> {}
impl Show for SamplerConfig {}
impl Show for Vec<f64> {}
impl Show for Vec<String> {}
impl Show for (String, String) {}
impl Show for Vec<TraceExporter> {}
impl Show for Vec<MetricExporter> {}
impl Show for Vec<LogExporter> {}
impl Show for OtlpProtocol {}
impl Show for OtlpCompression {}
impl Show for SpanTime {}
impl Show for ExemplarFilter {}
impl Show for ProgressMode {}
impl Show for pipetel_core::settings::StallAction {}
impl Show for pipetel_core::settings::ProfileMode {}
impl Show for pipetel_core::settings::ShardMetrics {}
impl Show for LogFormat {}
#[cfg(feature = "gpu")]
impl Show for pipetel_gpu::GpuMode {}
#[cfg(feature = "gpu")]
impl Show for pipetel_gpu::GpuPlatform {}
#[cfg(feature = "gpu")]
impl Show for pipetel_gpu::DeviceSelection {}

// ----- the rules (settings of one kind share one) -----

/// Switches.
pub(crate) static BOOL: Rule<bool> = Rule::new(boolean, any);
/// Free text (service name and version).
pub(crate) static TEXT: Rule<String> = Rule::new(text, any);
/// File paths (rows file, TLS certificate and key).
pub(crate) static FILE: Rule<PathBuf> = Rule::new(file, any);
/// A size in bytes: a whole number, optionally with a `KiB`, `MiB` or `GiB` suffix.
pub(crate) static BYTE_SIZE: Rule<u64> = Rule::new(byte_size, any);
/// The progress display: `true`, `false` or `always`.
pub(crate) static PROGRESS: Rule<ProgressMode> = Rule::new(from_str, any);
/// What a stalled shard gets: `report` or `fail`.
pub(crate) static STALL_ACTION: Rule<pipetel_core::settings::StallAction> = Rule::new(from_str, any);
/// Which shards have worker series: `running`, `all` or `off`.
pub(crate) static SHARD_METRICS: Rule<pipetel_core::settings::ShardMetrics> = Rule::new(from_str, any);
/// The profiler: `off` or `cpu`.
pub(crate) static PROFILE_MODE: Rule<pipetel_core::settings::ProfileMode> = Rule::new(from_str, any);
/// The profiler's rate: 1 to 1000 samples per CPU second.
pub(crate) static PROFILE_HZ: Rule<u32> = Rule::new(count, profile_hz);
/// Rotated rows files kept.
pub(crate) static ROWS_KEEP: Rule<u32> = Rule::new(rows_keep, any);
/// Durations with no bound but a bare number in milliseconds (retention, OTLP timeouts).
pub(crate) static MILLIS: Rule<Duration> = Rule::new(millis, any);
/// Durations that must be positive (export interval, shutdown timeout).
pub(crate) static POSITIVE_MILLIS: Rule<Duration> = Rule::new(millis, positive);
pub(crate) static SAMPLE_INTERVAL: Rule<Duration> = Rule::new(millis, sample_interval);
pub(crate) static RESOURCE: Rule<Vec<(String, String)>> = Rule::new(key_values, any);
pub(crate) static TRACE_EXPORTERS: Rule<Vec<TraceExporter>> = Rule::new(exporters, any);
pub(crate) static METRIC_EXPORTERS: Rule<Vec<MetricExporter>> = Rule::new(exporters, any);
pub(crate) static LOG_EXPORTERS: Rule<Vec<LogExporter>> = Rule::new(exporters, any);
/// A URL with an `http` or `https` scheme, or a schemeless `host:port` (gRPC only, its scheme
/// from the `INSECURE` switch; see `otlp::target`).
pub(crate) static ENDPOINT: Rule<String> = Rule::new(trimmed, endpoint).redacted(Redaction::Userinfo);
/// A PEM file of certificates (the OTLP CA, the mTLS client certificate): read when checked,
/// so a missing or unreadable file is an error naming where its path was given.
pub(crate) static CERTIFICATE_FILE: Rule<PathBuf> = Rule::new(file, |p| pem_file(p, "CERTIFICATE"));
/// A PEM file holding a private key (the mTLS client key).
pub(crate) static KEY_FILE: Rule<PathBuf> = Rule::new(file, |p| pem_file(p, "PRIVATE KEY"));
pub(crate) static PROTOCOL: Rule<OtlpProtocol> = Rule::new(from_str, any);
/// OTLP request headers: their values (bearer tokens) are never shown.
pub(crate) static HEADERS: Rule<Vec<(String, String)>> =
    Rule::new(header_pairs, headers).redacted(Redaction::HeaderValues);
pub(crate) static COMPRESSION: Rule<OtlpCompression> = Rule::new(from_str, any);
pub(crate) static HOST: Rule<String> = Rule::new(host, |h| host(h).map(drop));
pub(crate) static PORT: Rule<u16> = Rule::new(port, any);
pub(crate) static URL_PATH: Rule<String> = Rule::new(trimmed, url_path);
pub(crate) static TOKEN: Rule<String> = Rule::new(trimmed, token).redacted(Redaction::All);
pub(crate) static BASIC_AUTH: Rule<(String, String)> = Rule::new(basic_auth, basic_auth_pair).redacted(Redaction::All);
pub(crate) static SAMPLER: Rule<SamplerConfig> = Rule::new(from_str, sampler);
pub(crate) static SAMPLER_ARG: Rule<f64> = Rule::new(number, ratio);
/// `EnvFilter` directives: `RUST_LOG` and the traces' and logs' export filters.
pub(crate) static FILTER: Rule<String> = Rule::new(text, env_filter);
pub(crate) static LOG_FORMAT: Rule<LogFormat> = Rule::new(from_str, any);
pub(crate) static CARDINALITY: Rule<usize> = Rule::new(whole, cardinality);
pub(crate) static NAMESPACE: Rule<String> = Rule::new(trimmed, namespace);
pub(crate) static SERVICE_PREFIX: Rule<String> = Rule::new(trimmed, service_prefix);
/// Bucket bounds: a named set (`seconds`, `telefuser`) or comma-separated numbers.
pub(crate) static BUCKETS: Rule<Vec<f64>> = Rule::new(bucket_bounds, buckets);
pub(crate) static SPAN_ALLOW: Rule<Vec<String>> = Rule::new(names, span_allow);
pub(crate) static SPAN_FILTER: Rule<String> = Rule::new(text, |f| span_targets(f).map(drop));
pub(crate) static SPAN_TIME: Rule<SpanTime> = Rule::new(from_str, any);
pub(crate) static TEMPORALITY: Rule<MetricTemporality> = Rule::new(from_str, any);
pub(crate) static HISTOGRAM_AGGREGATION: Rule<HistogramAggregation> = Rule::new(from_str, any);
pub(crate) static PROPAGATORS: Rule<Vec<Propagator>> = Rule::new(propagators, any);
/// `random`, a recipe (`hostname-pid`) or a literal with `{hostname}`, `{pid}`, `{pod}`.
pub(crate) static INSTANCE_ID: Rule<String> = Rule::new(trimmed, |v| instance_id_template(v).map(drop));
/// A span, event or link limit: a whole number, `0` keeping nothing.
pub(crate) static COUNT_LIMIT: Rule<u32> = Rule::new(count, any);
/// A batch processor's queue or batch size: a whole number, at least 1.
pub(crate) static BATCH_SIZE: Rule<usize> = Rule::new(whole, at_least_one);
pub(crate) static EXEMPLAR_FILTER: Rule<ExemplarFilter> = Rule::new(from_str, any);
#[cfg(feature = "gpu")]
pub(crate) static GPU_MODE: Rule<pipetel_gpu::GpuMode> = Rule::new(from_str, any);
#[cfg(feature = "gpu")]
pub(crate) static GPU_PLATFORM: Rule<pipetel_gpu::GpuPlatform> = Rule::new(from_str, any);
#[cfg(feature = "gpu")]
pub(crate) static GPU_DEVICES: Rule<pipetel_gpu::DeviceSelection> = Rule::new(from_str, any);
/// The environment's poll interval: a bare number counts seconds, as `pipetel-gpu` documents.
#[cfg(feature = "gpu")]
pub(crate) static GPU_POLL_SECONDS: Rule<Duration> = Rule::new(seconds, gpu_poll_interval);
/// The file's `gpu.poll_interval_ms`: a bare number counts milliseconds.
#[cfg(feature = "gpu")]
pub(crate) static GPU_POLL_MILLIS: Rule<Duration> = Rule::new(millis, gpu_poll_interval);
#[cfg(feature = "gpu")]
pub(crate) static LIBRARY: Rule<PathBuf> = Rule::new(file, library);
#[cfg(feature = "gpu")]
pub(crate) static ANY_DURATION: Rule<Duration> = Rule::new(millis, any);
