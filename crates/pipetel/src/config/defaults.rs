//! The defaults: what a setting's entry in the table states ([`Fallback`]: a value of the
//! setting's type, or words where there is no value), how a value is written as the text its
//! variable would hold ([`Value`]), and the constants several entries or other crates read.
//! The getters, `resolve` and the configuration reference all read a default from its entry, so
//! the reference's words are written from the value the code uses.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{
    ExemplarFilter, HistogramAggregation, LogExporter, LogFormat, MetricExporter, MetricTemporality, OtlpCompression,
    OtlpProtocol, ProgressMode, Propagator, SamplerConfig, TraceExporter,
};
use pipetel_core::settings::SpanTime;

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
pub use pipetel_core::settings::{DEFAULT_CARDINALITY_LIMIT, DEFAULT_SERVICE_PREFIX};
/// Default span, event and link limits (the SDK's and the spec's).
pub(crate) const DEFAULT_COUNT_LIMIT: u32 = 128;
/// The console's `tracing` filter, and the traces' and logs' export filters, when none is given.
pub(crate) const DEFAULT_FILTER: &str = "info";
/// Shortest interval between worker samples.
pub(crate) const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// The condition under which the exporters default to OTLP.
pub(crate) const WITH_OTLP_ENDPOINT: &str = "when an OTLP endpoint is set";

/// A setting's default as its entry states it. `C` is the value as a constant holds it (see
/// [`Value::Const`]).
pub(crate) struct Fallback<C: 'static> {
    /// The value an unset setting takes; `None`: no value (unset means absent, or the value is
    /// made when it is read, as `unknown_service:<exe>`).
    value: Option<C>,
    /// Another value and the condition under which it is taken instead.
    otherwise: Option<(C, &'static str)>,
    /// The reference's words, where the value's text is not what a reader needs (or there is
    /// no value).
    words: Option<&'static str>,
}

impl<C> Fallback<C> {
    /// A plain value: the reference writes its text.
    pub(crate) const fn value(value: C) -> Self {
        Fallback { value: Some(value), otherwise: None, words: None }
    }

    /// No value, described by `words` (Markdown).
    pub(crate) const fn words(words: &'static str) -> Self {
        Fallback { value: None, otherwise: None, words: Some(words) }
    }

    /// `value`, and `other` instead under `condition` (`when an OTLP endpoint is set`).
    pub(crate) const fn either(value: C, other: C, condition: &'static str) -> Self {
        Fallback { value: Some(value), otherwise: Some((other, condition)), words: None }
    }

    /// `value`, written in the reference as `words` (a named set, a unit the variable reads):
    /// where the words are code, a test reads them back through the setting's rule.
    pub(crate) const fn shown(value: C, words: &'static str) -> Self {
        Fallback { value: Some(value), otherwise: None, words: Some(words) }
    }

    /// No value and nothing to say: the reference writes `—`.
    pub(crate) const NONE: Self = Self::words("—");

    /// The reference's words: the value's text as code (or the words given), then the other
    /// value and its condition.
    pub(crate) fn describe<T: Value<Const = C>>(&self) -> String {
        let main = match (self.words, &self.value) {
            (Some(words), _) => words.to_string(),
            (None, Some(value)) => format!("`{}`", T::text(value)),
            (None, None) => "—".to_string(),
        };
        match &self.otherwise {
            Some((other, condition)) => format!("{main} (`{}` {condition})", T::text(other)),
            None => main,
        }
    }

    /// The value, owned.
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    pub(crate) fn owned<T: Value<Const = C>>(&self) -> Option<T> {
        self.value.as_ref().map(T::owned)
    }
}

impl<C: Copy> Fallback<C> {
    /// The value. Evaluated in a `const` block by its readers, so a default without a value is a
    /// compile error there, not a panic.
    pub(crate) const fn get(&self) -> C {
        match self.value {
            Some(value) => value,
            None => panic!("the setting's default has no value"),
        }
    }

    /// The value taken under the condition (the plain value when there is none).
    pub(crate) const fn otherwise(&self) -> C {
        match self.otherwise {
            Some((other, _)) => other,
            None => self.get(),
        }
    }
}

/// A setting's type, as its default is written in the table and in the reference.
pub(crate) trait Value: Sized {
    /// The default as a constant holds it: the value itself, `&'static str` for text and a
    /// slice for a list.
    type Const: 'static;
    /// The value the constant stands for.
    fn owned(constant: &Self::Const) -> Self;
    /// The text the setting's variable would hold for it.
    fn text(constant: &Self::Const) -> String;
}

/// The value types that are their own constant and whose `Display` writes the text their
/// variable reads.
pub(crate) trait Plain: Copy + fmt::Display + 'static {}

impl<T: Plain> Value for T {
    type Const = T;
    fn owned(constant: &T) -> T {
        *constant
    }
    fn text(constant: &T) -> String {
        constant.to_string()
    }
}

impl Plain for bool {}
impl Plain for u16 {}
impl Plain for u32 {}
impl Plain for usize {}
impl Plain for OtlpProtocol {}
impl Plain for OtlpCompression {}
impl Plain for SamplerConfig {}
impl Plain for MetricTemporality {}
impl Plain for HistogramAggregation {}
impl Plain for ExemplarFilter {}
impl Plain for ProgressMode {}
impl Plain for pipetel_core::settings::StallAction {}
impl Plain for pipetel_core::settings::ProfileMode {}
impl Plain for pipetel_core::settings::ShardMetrics {}
impl Plain for LogFormat {}
impl Plain for SpanTime {}
impl Plain for Propagator {}
impl Plain for TraceExporter {}
impl Plain for MetricExporter {}
impl Plain for LogExporter {}

/// A ratio: written with its point (`1.0`).
impl Value for f64 {
    type Const = f64;
    fn owned(constant: &f64) -> f64 {
        *constant
    }
    fn text(constant: &f64) -> String {
        format!("{constant:?}")
    }
}

/// A size in bytes: in the largest binary unit that divides it (`64MiB`).
impl Value for u64 {
    type Const = u64;
    fn owned(constant: &u64) -> u64 {
        *constant
    }
    fn text(constant: &u64) -> String {
        let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        match units.iter().find(|(_, size)| *constant > 0 && constant % size == 0) {
            Some((unit, size)) => format!("{}{unit}", constant / size),
            None => constant.to_string(),
        }
    }
}

/// A duration: a bare number of milliseconds, the unit of every variable but the GPU poll
/// interval's (whose entry shows its default with a unit).
impl Value for Duration {
    type Const = Duration;
    fn owned(constant: &Duration) -> Duration {
        *constant
    }
    fn text(constant: &Duration) -> String {
        constant.as_millis().to_string()
    }
}

impl Value for String {
    type Const = &'static str;
    fn owned(constant: &&'static str) -> String {
        constant.to_string()
    }
    fn text(constant: &&'static str) -> String {
        constant.to_string()
    }
}

impl Value for PathBuf {
    type Const = &'static str;
    fn owned(constant: &&'static str) -> PathBuf {
        PathBuf::from(constant)
    }
    fn text(constant: &&'static str) -> String {
        constant.to_string()
    }
}

/// A comma list; the empty list is `none`.
fn list<T>(items: impl ExactSizeIterator<Item = T>, text: impl Fn(T) -> String) -> String {
    if items.len() == 0 {
        return "none".to_string();
    }
    items.map(text).collect::<Vec<_>>().join(",")
}

impl<T: Plain> Value for Vec<T> {
    type Const = &'static [T];
    fn owned(constant: &&'static [T]) -> Vec<T> {
        constant.to_vec()
    }
    fn text(constant: &&'static [T]) -> String {
        list(constant.iter(), T::to_string)
    }
}

impl Value for Vec<String> {
    type Const = &'static [&'static str];
    fn owned(constant: &&'static [&'static str]) -> Vec<String> {
        constant.iter().map(|s| s.to_string()).collect()
    }
    fn text(constant: &&'static [&'static str]) -> String {
        list(constant.iter(), |s| s.to_string())
    }
}

/// Bucket bounds: the name of the set they are (`seconds`), else the numbers.
impl Value for Vec<f64> {
    type Const = &'static [f64];
    fn owned(constant: &&'static [f64]) -> Vec<f64> {
        constant.to_vec()
    }
    fn text(constant: &&'static [f64]) -> String {
        let named = pipetel_core::settings::syntax::NAMED_BUCKETS.iter().find(|(_, bounds)| bounds == constant);
        named.map_or_else(|| list(constant.iter(), |b| format!("{b:?}")), |(name, _)| name.to_string())
    }
}

/// Pairs: `k=v,k2=v2`.
impl Value for Vec<(String, String)> {
    type Const = &'static [(&'static str, &'static str)];
    fn owned(constant: &Self::Const) -> Self {
        constant.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }
    fn text(constant: &Self::Const) -> String {
        constant.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// User and password: `user:password`.
impl Value for (String, String) {
    type Const = (&'static str, &'static str);
    fn owned(constant: &Self::Const) -> Self {
        (constant.0.to_string(), constant.1.to_string())
    }
    fn text(constant: &Self::Const) -> String {
        format!("{}:{}", constant.0, constant.1)
    }
}

/// The GPU crate's keywords are its variants' names in lower case.
#[cfg(feature = "gpu")]
fn keyword(value: &impl fmt::Debug) -> String {
    format!("{value:?}").to_ascii_lowercase()
}

#[cfg(feature = "gpu")]
impl Value for pipetel_gpu::GpuMode {
    type Const = Self;
    fn owned(constant: &Self) -> Self {
        *constant
    }
    fn text(constant: &Self) -> String {
        keyword(constant)
    }
}

#[cfg(feature = "gpu")]
impl Value for pipetel_gpu::GpuPlatform {
    type Const = Self;
    fn owned(constant: &Self) -> Self {
        *constant
    }
    fn text(constant: &Self) -> String {
        keyword(constant)
    }
}

#[cfg(feature = "gpu")]
impl Value for pipetel_gpu::DeviceSelection {
    type Const = Self;
    fn owned(constant: &Self) -> Self {
        constant.clone()
    }
    fn text(constant: &Self) -> String {
        keyword(constant)
    }
}

/// Reads each text of a default back through the setting's rule: `failures` gets a line for a
/// text that does not come back as the value, or a value the rule refuses. Words that are no
/// text (`every span`) are not read back; the value is still checked.
#[cfg(test)]
pub(crate) fn round_trip<T>(
    name: &str,
    fallback: &Fallback<T::Const>,
    rule: &'static super::rule::Rule<T>,
    failures: &mut Vec<String>,
) where
    T: Value + PartialEq + fmt::Debug,
{
    let shown = fallback.words.and_then(|w| w.strip_prefix('`')?.strip_suffix('`')).filter(|w| !w.contains('`'));
    let text = |v| if fallback.words.is_none() { Some(T::text(v)) } else { shown.map(str::to_string) };
    let value = fallback.value.as_ref().map(|v| (v, text(v)));
    let other = fallback.otherwise.as_ref().map(|(v, _)| (v, Some(T::text(v))));
    for (constant, text) in value.into_iter().chain(other) {
        let expected = T::owned(constant);
        if let Err(reason) = (rule.check)(&expected) {
            failures.push(format!("{name}: its rule refuses the default {expected:?}: {reason}"));
        }
        let Some(text) = text else { continue };
        match (rule.lex)(&text) {
            Ok(read) if read == expected => {}
            Ok(read) => failures.push(format!("{name}: `{text}` reads as {read:?}, the default is {expected:?}")),
            Err(reason) => failures.push(format!("{name}: `{text}` does not read: {reason}")),
        }
    }
}
