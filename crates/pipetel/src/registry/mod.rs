//! A Prometheus-compatible metrics registry on top of OpenTelemetry.
//!
//! For code written against a Prometheus client — counters, gauges, histograms and summaries
//! registered by name with help text, label sets, custom collectors, the text exposition — with
//! every metric exported through pipetel's OTel providers, so it reaches the pull endpoint and
//! OTLP alike.
//!
//! ```
//! use pipetel::registry::{Opts, Registry};
//!
//! # fn main() -> Result<(), pipetel::registry::RegistryError> {
//! let app = Registry::new("app")?;
//! let requests = app.counter_with("requests", "Requests served", Opts::new().labels(["method"]))?;
//! let get = requests.with([("method", "GET")])?; // keep the handle: the hot path is `get.inc()`
//! get.inc();
//! let latency = app.histogram("request_duration_seconds", "Request latency")?;
//! latency.observe(0.042);
//! assert!(app.prometheus_text().contains("app_requests_total{method=\"GET\"} 1"));
//! # Ok(()) }
//! ```
//!
//! # Names
//! - A registry's prefix and a metric's name join with `_`: prefix `app`, name `requests` →
//!   `app_requests`. The global registry ([`global`]) has no prefix.
//! - Names are snake_case (`[a-z_][a-z0-9_]*`, not starting with `__`) and should end with their
//!   unit (`_seconds`, `_bytes`): the unit is part of the name here, as Prometheus advises.
//! - Counters are exposed with `_total`. Pass the name with or without it: `requests` and
//!   `requests_total` are the same counter, `app_requests_total` in the exposition and
//!   `app_requests` as the OTel instrument (the OTel → Prometheus translation adds `_total`).
//! - Histogram and summary names may not end with `_bucket`, `_sum` or `_count`.
//! - Label names: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`, not `otel_scope_name` /
//!   `otel_scope_version` (the exporter adds those), not `le` on histograms nor `quantile` on
//!   summaries; no label twice.
//! - Registering a name again with the same kind, labels and buckets/quantiles returns the same
//!   metric; with anything else it is [`RegistryError::Conflict`]. Several registries may coexist;
//!   give them different prefixes, since their metrics share the OTel meter.
//!
//! # Export
//! Counters and gauges are OTel observable instruments whose callbacks read the registry's
//! atomics (a handle's `inc` is one atomic add), so they reach every exporter `pipetel::init`
//! installed. Histograms and summaries are rendered on the pull endpoint from the registry's own
//! state: histograms as the endpoint writes OTel histograms (`_bucket{le}`, `_sum`, `_count`,
//! labels sorted by name, then `otel_scope_name="pipetel"`), summaries as real Prometheus
//! summaries (`quantile` labels, `_sum`, `_count`). Push exporters (OTLP, console) get a
//! histogram as an OTel histogram with the same buckets that each observation also records
//! into, and a summary as `<name>_sum` / `<name>_count` counters and a `<name>` gauge with a
//! `quantile` attribute. For a registry on the global meter provider those push-only instruments
//! exist only once `init` installed a push metric exporter, so with the pull endpoint alone (the
//! default) a histogram observation touches nothing but the registry's atomics; a registry made
//! with [`Registry::with_meters`] always feeds its `push_only` meter. Metrics registered before
//! `init` are re-registered with the real providers when `init` runs.
//!
//! # Summaries: error bound
//! Quantiles come from a relative-error sketch (after DDSketch, with bins indexed straight from
//! a value's bits) per slice of the window: each reported quantile is within ±[`RELATIVE_ERROR`]
//! (1 %, relative) of the exact value of rank `⌊q·(n−1)⌋` among the `n` observations in the
//! window. The window (default 10 min in 5 slices) slides one slice at a time; `_sum` and
//! `_count` are totals since creation.
//!
//! An observation takes a short lock and needs the time, to know the slice it belongs to.
//! Reading the clock would cost as much as the rest of the observation, so on Linux the first
//! summary starts a thread, `pipetel-clock`, that keeps a recent time for observations to read,
//! refreshed every 32nd of the shortest slice of any summary (from every millisecond to every
//! second): the window's edges are exact to that period, a second with the default window.
//! A forked child starts its own thread at its first observation; on other systems,
//! observations read the clock.

mod metric;
mod summary;
mod text;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
use std::time::Duration;

use opentelemetry::metrics::Meter;
use opentelemetry::{InstrumentationScope, KeyValue};

pub use metric::{
    Counter, CounterHandle, Gauge, GaugeHandle, Histogram, HistogramHandle, HistogramValue, Summary, SummaryHandle,
    SummaryValue,
};
pub use summary::RELATIVE_ERROR;

use metric::{AnyFamily, CounterCell, Family, GaugeCell, HistogramCell, Meta, SummaryCell, SummarySpec};

/// The default summary quantiles.
pub const DEFAULT_QUANTILES: &[f64] = &[0.5, 0.9, 0.95, 0.99];
/// The default summary window.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);
/// The default number of slices the summary window slides by.
pub const DEFAULT_AGE_BUCKETS: u32 = 5;

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in fixed buckets.
    Histogram,
    /// Quantiles over a sliding window.
    Summary,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        })
    }
}

/// Why a metric could not be registered or a series could not be found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A metric name or registry prefix breaks the naming rules.
    #[error("invalid metric name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A label name breaks the naming rules.
    #[error("invalid label name {label:?} for metric {metric}: {reason}")]
    InvalidLabelName {
        /// The metric.
        metric: String,
        /// The label name as given.
        label: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The name is taken by a metric of another kind, labels or options.
    #[error("metric {name} is already registered as {existing}")]
    Conflict {
        /// The name.
        name: String,
        /// What holds it.
        existing: String,
    },
    /// The label names given for a series differ from those the metric declares.
    #[error("labels {given:?} do not match the labels {expected:?} of metric {metric}")]
    LabelMismatch {
        /// The metric.
        metric: String,
        /// Its declared label names.
        expected: Vec<String>,
        /// The names given.
        given: Vec<String>,
    },
    /// Buckets, quantiles or the window are invalid, or do not apply to the kind.
    #[error("invalid option for metric {metric}: {reason}")]
    InvalidOption {
        /// The metric.
        metric: String,
        /// What is wrong.
        reason: String,
    },
}

/// Label values, as a list of pairs or a map: `&[("method", "GET")]`, `vec![..]`, a `HashMap`
/// or a `BTreeMap` of strings.
pub trait Labels {
    /// The `(name, value)` pairs.
    fn label_pairs(&self) -> Vec<(&str, &str)>;
}

impl<K: AsRef<str>, V: AsRef<str>> Labels for [(K, V)] {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Labels for [(K, V); N] {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.as_slice().label_pairs()
    }
}
impl<K: AsRef<str>, V: AsRef<str>> Labels for Vec<(K, V)> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.as_slice().label_pairs()
    }
}
impl<K: AsRef<str>, V: AsRef<str>, S> Labels for HashMap<K, V, S> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<K: AsRef<str>, V: AsRef<str>> Labels for BTreeMap<K, V> {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        self.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()
    }
}
impl<T: Labels + ?Sized> Labels for &T {
    fn label_pairs(&self) -> Vec<(&str, &str)> {
        (**self).label_pairs()
    }
}

/// Options of a metric: label names, and buckets or quantiles and window where they apply.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    labels: Vec<String>,
    buckets: Option<Vec<f64>>,
    quantiles: Option<Vec<f64>>,
    max_age: Option<Duration>,
    age_buckets: Option<u32>,
    otel: Option<(String, String)>,
}

impl Opts {
    /// No labels, default buckets / quantiles.
    pub fn new() -> Self {
        Self::default()
    }

    /// The label names every series of the metric has.
    pub fn labels<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.labels = names.into_iter().map(Into::into).collect();
        self
    }

    /// Histogram bucket upper bounds: finite, strictly increasing, at least one (`+Inf` is
    /// implied). Default: the registry's default buckets ([`crate::SECONDS_BUCKETS`] unless
    /// [`Registry::set_default_buckets`] changed them).
    pub fn buckets(mut self, bounds: impl Into<Vec<f64>>) -> Self {
        self.buckets = Some(bounds.into());
        self
    }

    /// Summary quantiles, each in `[0, 1]`. Default [`DEFAULT_QUANTILES`].
    pub fn quantiles(mut self, quantiles: impl Into<Vec<f64>>) -> Self {
        self.quantiles = Some(quantiles.into());
        self
    }

    /// Summary window length. Default [`DEFAULT_MAX_AGE`].
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// Slices the summary window slides by (1 to 60). Default [`DEFAULT_AGE_BUCKETS`].
    pub fn age_buckets(mut self, n: u32) -> Self {
        self.age_buckets = Some(n);
        self
    }

    /// An OTel instrument name and unit other than the exposition name (for pipetel's own
    /// dotted, semantic-convention names whose translation gives the exposition name).
    pub(crate) fn otel(mut self, name: impl Into<String>, unit: impl Into<String>) -> Self {
        self.otel = Some((name.into(), unit.into()));
        self
    }
}

/// One sample a function collector returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `(label name, label value)` pairs.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// A sample with these labels.
    pub fn new<K: Into<String>, V: Into<String>>(labels: impl IntoIterator<Item = (K, V)>, value: f64) -> Self {
        Sample { labels: labels.into_iter().map(|(k, v)| (k.into(), v.into())).collect(), value }
    }
}

type SampleFn = dyn Fn() -> Vec<Sample> + Send + Sync;
type TextFn = dyn Fn() -> String + Send + Sync;

/// One checked sample of a function collector: sorted labels, the same as attributes, the value.
type Collected = (Vec<(String, String)>, Box<[KeyValue]>, f64);

/// A metric whose samples a callback returns at collection time.
struct FnFamily {
    meta: Meta,
    callback: Arc<SampleFn>,
}

impl FnFamily {
    /// Calls the user's callback, keeping only samples that can be exported: a panic, an
    /// invalid or duplicate label name, or a counter value that is negative or not finite
    /// drops the sample (or the whole call) with one warning.
    fn collect(&self) -> Vec<Collected> {
        let samples = match catch_unwind(AssertUnwindSafe(|| (self.callback)())) {
            Ok(s) => s,
            Err(_) => {
                self.meta.warn_once("the collector callback panicked");
                return Vec::new();
            }
        };
        let mut out = Vec::with_capacity(samples.len());
        for mut s in samples {
            let mut names = HashSet::new();
            let labels_ok =
                s.labels.iter().all(|(k, _)| check_label_name(k, self.meta.kind).is_ok() && names.insert(k.clone()));
            let value_ok = self.meta.kind != Kind::Counter || (s.value.is_finite() && s.value >= 0.0);
            if !labels_ok || !value_ok {
                self.meta.warn_once("a collector sample has an invalid label name or value and was dropped");
                continue;
            }
            s.labels.sort();
            let attrs = s.labels.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
            out.push((s.labels, attrs, s.value));
        }
        out
    }
}

impl AnyFamily for FnFamily {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn write_text(&self, out: &mut String) {
        let name = self.meta.exposed_name();
        text::write_header(&name, &self.meta.help, &self.meta.kind.to_string(), out);
        for (labels, _, value) in self.collect() {
            let (names, values): (Vec<String>, Vec<String>) = labels.into_iter().unzip();
            text::write_sample(&name, &names, &values, None, value, out);
        }
    }
    fn reset(&self) {}
    fn bind(self: Arc<Self>, meter: &Meter, _: Option<&Meter>) {
        let weak = Arc::downgrade(&self);
        let live = move || weak.upgrade().filter(|f| !f.meta.removed.load(Ordering::Acquire));
        let (name, unit, help) = (self.meta.otel_name.clone(), self.meta.unit.clone(), self.meta.help.clone());
        if self.meta.kind == Kind::Counter {
            let _ = meter
                .f64_observable_counter(name)
                .with_unit(unit)
                .with_description(help)
                .with_callback(move |obs| {
                    if let Some(f) = live() {
                        for (_, attrs, v) in f.collect() {
                            obs.observe(v, &attrs);
                        }
                    }
                })
                .build();
        } else {
            let _ = meter
                .f64_observable_gauge(name)
                .with_unit(unit)
                .with_description(help)
                .with_callback(move |obs| {
                    if let Some(f) = live() {
                        for (_, attrs, v) in f.collect() {
                            obs.observe(v, &attrs);
                        }
                    }
                })
                .build();
        }
    }
}

/// Where a registry's instruments go.
enum Binding {
    /// The global meter provider, re-resolved when `init` installs it.
    Global,
    /// Fixed meters (tests, or a provider of the caller's own).
    Fixed { meter: Meter, push_only: Meter },
}

struct Inner {
    prefix: String,
    families: RwLock<BTreeMap<String, Arc<dyn AnyFamily>>>,
    text_collectors: RwLock<Vec<Arc<TextFn>>>,
    default_buckets: RwLock<Arc<[f64]>>,
    binding: Binding,
    text_warned: AtomicBool,
}

/// Bumped by `init`: families bound in an older generation register their instruments again.
static GENERATION: AtomicU64 = AtomicU64::new(1);
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

static SERIES_LIMIT: AtomicU64 = AtomicU64::new(crate::config::DEFAULT_CARDINALITY_LIMIT as u64);

/// Sets the most label sets one registry family keeps, process-wide (at least 2; default 2,000);
/// further label sets share one overflow series marked `otel_metric_overflow="true"`.
///
/// `init` sets it from `PIPETEL_CARDINALITY_LIMIT`, together with the meter provider's own
/// limit, so call it only for registries on a meter provider of your own
/// ([`Registry::with_meters`]), with that provider's cardinality limit: a registry limit above
/// the provider's would have the SDK fold what the registry keeps apart.
pub fn set_cardinality_limit(limit: usize) {
    SERIES_LIMIT.store(limit.max(2) as u64, Ordering::Relaxed);
}

/// Label sets a family keeps before new ones share its overflow series (one slot stays for it).
pub(crate) fn series_limit() -> usize {
    usize::try_from(SERIES_LIMIT.load(Ordering::Relaxed)).unwrap_or(usize::MAX).saturating_sub(1).max(1)
}

/// Warns once per metric that its label sets reached the limit.
pub(crate) fn warn_overflow_once(metric: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if WARNED.lock().unwrap_or_else(PoisonError::into_inner).insert(metric.to_string()) {
        tracing::warn!(
            target: "pipetel",
            metric,
            limit = series_limit() + 1,
            "label sets reached the cardinality limit; new ones share one series marked otel_metric_overflow=\"true\" (raise PIPETEL_CARDINALITY_LIMIT, or keep unbounded values such as request ids out of labels)"
        );
    }
}

/// Registers every live registry's instruments with the meter provider `init` just installed:
/// instruments taken from the global provider before then are no-ops forever. `init` calls it
/// right after `opentelemetry::global::set_meter_provider`.
pub(crate) fn on_init() {
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    let live: Vec<Arc<Inner>> = {
        let mut list = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        list.iter().filter_map(Weak::upgrade).collect()
    };
    for inner in live {
        if !matches!(inner.binding, Binding::Global) {
            continue;
        }
        let (meter, push_only) = global_meters();
        let families = inner.families.read().unwrap_or_else(PoisonError::into_inner);
        for family in families.values() {
            if family.meta().bound.swap(generation, Ordering::AcqRel) != generation {
                family.clone().bind(&meter, push_only.as_ref());
            }
        }
    }
}

/// Set by `init` when it installed a metric exporter that pushes (OTLP, console).
static PUSH_EXPORTER: AtomicBool = AtomicBool::new(false);

/// Says whether `init` installed a metric exporter that pushes (OTLP, console). Only then do
/// registries on the global meter provider register the instruments only push exporters read
/// (histograms' OTel form, summaries' counters and gauge): with the pull endpoint alone, a
/// histogram observation touches nothing but the registry's atomics. `init` calls it before
/// [`on_init`] rebinds the registries.
pub(crate) fn set_push_exporter(installed: bool) {
    PUSH_EXPORTER.store(installed, Ordering::Release);
}

/// The global meters: pipetel's own, and the push-only one when something pushes.
fn global_meters() -> (Meter, Option<Meter>) {
    let push_only = PUSH_EXPORTER.load(Ordering::Acquire).then(|| {
        opentelemetry::global::meter_with_scope(InstrumentationScope::builder(crate::export::PUSH_ONLY_SCOPE).build())
    });
    (crate::meter(), push_only)
}

impl crate::export::ExpositionSource for Inner {
    fn write_exposition(&self, out: &mut String) {
        let families = self.families.read().unwrap_or_else(PoisonError::into_inner);
        let mut taken: HashSet<String> = HashSet::new();
        for family in families.values() {
            taken.extend(family.meta().sample_names());
            // Counters and gauges reach the pull endpoint through OTel instruments; histograms
            // and summaries are read from the registry's own state (their OTel form is push-only).
            if matches!(family.meta().kind, Kind::Histogram | Kind::Summary) {
                family.write_pull(out);
            }
        }
        drop(families);
        self.write_text_collectors(&mut taken, out);
    }
}

impl Inner {
    fn write_text_collectors(&self, taken: &mut HashSet<String>, out: &mut String) {
        let collectors: Vec<Arc<TextFn>> =
            self.text_collectors.read().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect();
        for collector in collectors {
            let Ok(text) = catch_unwind(AssertUnwindSafe(|| collector())) else {
                self.warn_text("a text collector panicked", "");
                continue;
            };
            if let Some((line, why)) = text::append_checked(&text, taken, out) {
                self.warn_text(&why, &line);
            }
        }
    }

    fn warn_text(&self, why: &str, line: &str) {
        if !self.text_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "pipetel",
                registry = %self.prefix,
                line,
                "text collector output dropped: {why} (logged once per registry)"
            );
        }
    }
}

/// A set of metrics under one name prefix. Cheap to clone: clones share the metrics.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
    // Keeps the registry's exposition source registered for as long as the registry lives.
    _source: Arc<dyn crate::export::ExpositionSource>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("prefix", &self.inner.prefix).finish_non_exhaustive()
    }
}

/// The default registry (no prefix), created on first use.
pub fn global() -> &'static Registry {
    static GLOBAL: OnceLock<Registry> = OnceLock::new();
    GLOBAL.get_or_init(|| Registry::build(String::new(), Binding::Global))
}

impl Registry {
    /// A registry whose metric names start with `prefix_` (an empty prefix adds nothing).
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`] when the prefix is not snake_case.
    pub fn new(prefix: &str) -> Result<Self, RegistryError> {
        if !prefix.is_empty() {
            check_name(prefix)?;
        }
        Ok(Self::build(prefix.to_string(), Binding::Global))
    }

    /// A registry exporting through `meter` rather than the global meter provider, for tests and
    /// programs with a provider of their own. `push_only` gets the instruments meant for push
    /// exporters only (histograms' OTel form, summaries' counters and gauge), always: give it a
    /// scope named `pipetel.push_only` on the same provider so that pipetel's pull endpoint skips
    /// them, since it renders histograms and summaries from the registry itself.
    ///
    /// # Errors
    /// As [`Registry::new`].
    pub fn with_meters(prefix: &str, meter: Meter, push_only: Meter) -> Result<Self, RegistryError> {
        if !prefix.is_empty() {
            check_name(prefix)?;
        }
        Ok(Self::build(prefix.to_string(), Binding::Fixed { meter, push_only }))
    }

    fn build(prefix: String, binding: Binding) -> Self {
        let inner = Arc::new(Inner {
            prefix,
            families: RwLock::new(BTreeMap::new()),
            text_collectors: RwLock::new(Vec::new()),
            default_buckets: RwLock::new(Arc::from(crate::SECONDS_BUCKETS)),
            binding,
            text_warned: AtomicBool::new(false),
        });
        LIVE.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&inner));
        let source: Arc<dyn crate::export::ExpositionSource> = inner.clone();
        crate::export::add_exposition_source(&source);
        Registry { inner, _source: source }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// Changes the buckets of histograms registered from now on without their own.
    ///
    /// # Errors
    /// [`RegistryError::InvalidOption`] unless the bounds are finite and strictly increasing.
    pub fn set_default_buckets(&self, bounds: &[f64]) -> Result<(), RegistryError> {
        check_buckets("(default buckets)", bounds)?;
        *self.inner.default_buckets.write().unwrap_or_else(PoisonError::into_inner) = Arc::from(bounds);
        Ok(())
    }

    /// Registers (or finds) a counter without labels.
    ///
    /// # Errors
    /// See [`Registry::counter_with`].
    pub fn counter(&self, name: &str, help: &str) -> Result<Counter, RegistryError> {
        self.counter_with(name, help, Opts::new())
    }

    /// Registers (or finds) a counter.
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`], [`RegistryError::InvalidLabelName`],
    /// [`RegistryError::InvalidOption`] (buckets or quantiles given), or
    /// [`RegistryError::Conflict`] when the name is taken by another kind or label set.
    pub fn counter_with(&self, name: &str, help: &str, opts: Opts) -> Result<Counter, RegistryError> {
        let name = name.strip_suffix("_total").unwrap_or(name);
        let family = self.register::<CounterCell>(name, help, Kind::Counter, opts, |_, _| Ok(()))?;
        Counter::from_family(family)
    }

    /// Registers (or finds) a gauge without labels.
    ///
    /// # Errors
    /// See [`Registry::gauge_with`].
    pub fn gauge(&self, name: &str, help: &str) -> Result<Gauge, RegistryError> {
        self.gauge_with(name, help, Opts::new())
    }

    /// Registers (or finds) a gauge.
    ///
    /// # Errors
    /// As [`Registry::counter_with`].
    pub fn gauge_with(&self, name: &str, help: &str, opts: Opts) -> Result<Gauge, RegistryError> {
        let family = self.register::<GaugeCell>(name, help, Kind::Gauge, opts, |_, _| Ok(()))?;
        Gauge::from_family(family)
    }

    /// Registers (or finds) a histogram without labels, with the default buckets.
    ///
    /// # Errors
    /// See [`Registry::histogram_with`].
    pub fn histogram(&self, name: &str, help: &str) -> Result<Histogram, RegistryError> {
        self.histogram_with(name, help, Opts::new())
    }

    /// Registers (or finds) a histogram.
    ///
    /// # Errors
    /// As [`Registry::counter_with`], and [`RegistryError::InvalidOption`] for buckets that are
    /// empty, not finite or not strictly increasing.
    pub fn histogram_with(&self, name: &str, help: &str, opts: Opts) -> Result<Histogram, RegistryError> {
        let default = self.inner.default_buckets.read().unwrap_or_else(PoisonError::into_inner).clone();
        let bounds: Arc<[f64]> = match &opts.buckets {
            Some(b) => Arc::from(b.as_slice()),
            None => default,
        };
        let family = self.register::<HistogramCell>(name, help, Kind::Histogram, opts, |metric, _| {
            check_buckets(metric, &bounds)?;
            Ok(bounds.clone())
        })?;
        Histogram::from_family(family)
    }

    /// Registers (or finds) a summary without labels, with the default quantiles and window.
    ///
    /// # Errors
    /// See [`Registry::summary_with`].
    pub fn summary(&self, name: &str, help: &str) -> Result<Summary, RegistryError> {
        self.summary_with(name, help, Opts::new())
    }

    /// Registers (or finds) a summary.
    ///
    /// # Errors
    /// As [`Registry::counter_with`], and [`RegistryError::InvalidOption`] for quantiles outside
    /// `[0, 1]`, a zero window or `age_buckets` outside 1..=60.
    pub fn summary_with(&self, name: &str, help: &str, opts: Opts) -> Result<Summary, RegistryError> {
        let family = self.register::<SummaryCell>(name, help, Kind::Summary, opts, |metric, opts| {
            let mut quantiles = opts.quantiles.clone().unwrap_or_else(|| DEFAULT_QUANTILES.to_vec());
            if quantiles.is_empty() || quantiles.iter().any(|q| !(0.0..=1.0).contains(q)) {
                return Err(invalid_option(metric, "quantiles must be within [0, 1], at least one"));
            }
            quantiles.sort_by(f64::total_cmp);
            quantiles.dedup();
            let max_age = opts.max_age.unwrap_or(DEFAULT_MAX_AGE);
            let age_buckets = opts.age_buckets.unwrap_or(DEFAULT_AGE_BUCKETS);
            if max_age.is_zero() {
                return Err(invalid_option(metric, "the window (max_age) must be longer than zero"));
            }
            if !(1..=60).contains(&age_buckets) {
                return Err(invalid_option(metric, "age_buckets must be within 1..=60"));
            }
            Ok(SummarySpec { quantiles: quantiles.into_boxed_slice(), max_age, age_buckets })
        })?;
        Summary::from_family(family)
    }

    /// Registers a counter whose samples `collect` returns each time metrics are collected
    /// (an OTel observable counter; also in [`Registry::prometheus_text`]). Samples carry their
    /// own labels; one with an invalid label name or a negative or non-finite value is dropped
    /// with one warning, and a panicking callback yields no samples.
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`] or [`RegistryError::Conflict`].
    pub fn counter_fn(
        &self,
        name: &str,
        help: &str,
        collect: impl Fn() -> Vec<Sample> + Send + Sync + 'static,
    ) -> Result<(), RegistryError> {
        let name = name.strip_suffix("_total").unwrap_or(name);
        self.register_fn(name, help, Kind::Counter, Arc::new(collect))
    }

    /// Registers a gauge whose samples `collect` returns at collection time; as
    /// [`Registry::counter_fn`], any finite or non-finite value allowed.
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`] or [`RegistryError::Conflict`].
    pub fn gauge_fn(
        &self,
        name: &str,
        help: &str,
        collect: impl Fn() -> Vec<Sample> + Send + Sync + 'static,
    ) -> Result<(), RegistryError> {
        self.register_fn(name, help, Kind::Gauge, Arc::new(collect))
    }

    /// Adds a collector that returns text exposition lines (format 0.0.4), for code migrating
    /// from text-based collectors. Its output is appended to the pull endpoint's scrape and to
    /// [`Registry::prometheus_text`] after a line-by-line check: invalid lines, and families that
    /// clash with this registry's metrics or repeat a `# TYPE`, are dropped with one warning per
    /// registry; the scrape itself never fails. These lines reach the pull endpoint only, not
    /// OTLP.
    pub fn add_text_collector(&self, collect: impl Fn() -> String + Send + Sync + 'static) {
        self.inner.text_collectors.write().unwrap_or_else(PoisonError::into_inner).push(Arc::new(collect));
    }

    /// The exposition of this registry alone (format 0.0.4), from its own readings: for tests
    /// and for programs that serve metrics from their own server.
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        let mut taken = HashSet::new();
        let families: Vec<Arc<dyn AnyFamily>> =
            self.inner.families.read().unwrap_or_else(PoisonError::into_inner).values().cloned().collect();
        for family in families {
            taken.extend(family.meta().sample_names());
            family.write_text(&mut out);
        }
        self.inner.write_text_collectors(&mut taken, &mut out);
        out
    }

    /// Resets every metric to its initial state (registrations stay).
    pub fn reset_all(&self) {
        for family in self.inner.families.read().unwrap_or_else(PoisonError::into_inner).values() {
            family.reset();
        }
    }

    /// Unregisters every metric and collector. Existing handles keep recording but are no
    /// longer exported; registering a name again starts from zero.
    pub fn clear(&self) {
        let mut families = self.inner.families.write().unwrap_or_else(PoisonError::into_inner);
        for family in families.values() {
            family.meta().removed.store(true, Ordering::Release);
        }
        families.clear();
        self.inner.text_collectors.write().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The names of the registered metrics as exposed (counters with `_total`).
    pub fn names(&self) -> Vec<String> {
        self.inner
            .families
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|f| f.meta().exposed_name())
            .collect()
    }

    fn full_name(&self, name: &str) -> String {
        if self.inner.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}_{name}", self.inner.prefix)
        }
    }

    fn meters(&self) -> (Meter, Option<Meter>) {
        match &self.inner.binding {
            Binding::Global => global_meters(),
            Binding::Fixed { meter, push_only } => (meter.clone(), Some(push_only.clone())),
        }
    }

    /// Validates, finds an existing family of the same kind and options, or creates and binds
    /// a new one (under the write lock, so `on_init` never misses it).
    fn register<C: metric::Cell>(
        &self,
        name: &str,
        help: &str,
        kind: Kind,
        opts: Opts,
        spec: impl FnOnce(&str, &Opts) -> Result<C::Spec, RegistryError>,
    ) -> Result<Arc<Family<C>>, RegistryError> {
        check_name(name)?;
        let full = self.full_name(name);
        if matches!(kind, Kind::Histogram | Kind::Summary)
            && ["_bucket", "_sum", "_count"].iter().any(|s| full.ends_with(s))
        {
            return Err(RegistryError::InvalidName {
                name: name.to_string(),
                reason: "histogram and summary names may not end with _bucket, _sum or _count",
            });
        }
        if kind != Kind::Histogram && kind != Kind::Summary && (opts.buckets.is_some()) {
            return Err(invalid_option(&full, "buckets apply to histograms only"));
        }
        if kind != Kind::Summary && (opts.quantiles.is_some() || opts.max_age.is_some() || opts.age_buckets.is_some()) {
            return Err(invalid_option(&full, "quantiles and the window apply to summaries only"));
        }
        if kind == Kind::Summary && opts.buckets.is_some() {
            return Err(invalid_option(&full, "buckets apply to histograms only"));
        }
        let mut seen = BTreeSet::new();
        for label in &opts.labels {
            check_label_name(label, kind).map_err(|reason| RegistryError::InvalidLabelName {
                metric: full.clone(),
                label: label.clone(),
                reason,
            })?;
            if !seen.insert(label.as_str()) {
                return Err(RegistryError::InvalidLabelName {
                    metric: full.clone(),
                    label: label.clone(),
                    reason: "the label is declared twice",
                });
            }
        }
        let spec = spec(&full, &opts)?;
        let labels: Box<[String]> = opts.labels.clone().into_boxed_slice();
        let (otel_name, unit) = opts.otel.clone().unwrap_or_else(|| (full.clone(), String::new()));

        let mut families = self.inner.families.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = families.get(&full) {
            let m = existing.meta();
            let describe = || format!("a {} with labels {:?}", m.kind, m.labels);
            if m.kind != kind || m.labels != labels {
                return Err(RegistryError::Conflict { name: full, existing: describe() });
            }
            let Ok(family) = existing.clone().as_any().downcast::<Family<C>>() else {
                return Err(RegistryError::Conflict { name: full, existing: format!("a collector {}", m.kind) });
            };
            if family.spec != spec {
                return Err(RegistryError::Conflict {
                    name: full,
                    existing: format!("{} with other buckets, quantiles or window", describe()),
                });
            }
            return Ok(family);
        }
        let meta = Meta::new(full.clone(), otel_name, unit, help.to_string(), kind, labels);
        check_sample_names(&families, &meta)?;
        let family = Arc::new(Family::<C>::new(meta, spec));
        self.bind_new(family.clone());
        families.insert(full, family.clone());
        Ok(family)
    }

    fn register_fn(&self, name: &str, help: &str, kind: Kind, callback: Arc<SampleFn>) -> Result<(), RegistryError> {
        check_name(name)?;
        let full = self.full_name(name);
        let mut families = self.inner.families.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = families.get(&full) {
            return Err(RegistryError::Conflict {
                name: full,
                existing: format!("a {} with labels {:?}", existing.meta().kind, existing.meta().labels),
            });
        }
        let meta = Meta::new(full.clone(), full.clone(), String::new(), help.to_string(), kind, Box::new([]));
        check_sample_names(&families, &meta)?;
        let family = Arc::new(FnFamily { meta, callback });
        self.bind_new(family.clone());
        families.insert(full, family);
        Ok(())
    }

    fn bind_new(&self, family: Arc<dyn AnyFamily>) {
        family.meta().bound.store(GENERATION.load(Ordering::Acquire), Ordering::Release);
        let (meter, push_only) = self.meters();
        family.bind(&meter, push_only.as_ref());
    }
}

fn check_sample_names(families: &BTreeMap<String, Arc<dyn AnyFamily>>, meta: &Meta) -> Result<(), RegistryError> {
    let mine = meta.sample_names();
    for other in families.values() {
        if other.meta().sample_names().iter().any(|n| mine.contains(n)) {
            return Err(RegistryError::Conflict {
                name: meta.exposed_name(),
                existing: format!(
                    "the {} {} writes the same sample names",
                    other.meta().kind,
                    other.meta().exposed_name()
                ),
            });
        }
    }
    Ok(())
}

fn invalid_option(metric: &str, reason: &str) -> RegistryError {
    RegistryError::InvalidOption { metric: metric.to_string(), reason: reason.to_string() }
}

fn check_buckets(metric: &str, bounds: &[f64]) -> Result<(), RegistryError> {
    if bounds.is_empty() {
        return Err(invalid_option(metric, "at least one bucket bound is needed"));
    }
    if bounds.iter().any(|b| !b.is_finite()) {
        return Err(invalid_option(metric, "bucket bounds must be finite (+Inf is implied)"));
    }
    if bounds.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid_option(metric, "bucket bounds must be strictly increasing"));
    }
    Ok(())
}

/// Metric names and prefixes: snake_case, not reserved.
fn check_name(name: &str) -> Result<(), RegistryError> {
    let err = |reason| Err(RegistryError::InvalidName { name: name.to_string(), reason });
    let mut chars = name.chars();
    match chars.next() {
        None => return err("the name is empty"),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => return err("names start with a-z or _"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return err("names are snake_case: a-z, 0-9 and _ only");
    }
    if name.starts_with("__") {
        return err("names starting with __ are reserved");
    }
    Ok(())
}

fn check_label_name(label: &str, kind: Kind) -> Result<(), &'static str> {
    let mut chars = label.chars();
    match chars.next() {
        None => return Err("the label name is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => return Err("label names start with a letter or _"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("label names have letters, digits and _ only");
    }
    if label.starts_with("__") {
        return Err("label names starting with __ are reserved");
    }
    if label == "otel_scope_name" || label == "otel_scope_version" {
        return Err("the exporter sets this label");
    }
    if kind == Kind::Histogram && label == "le" {
        return Err("`le` is reserved on histograms");
    }
    if kind == Kind::Summary && label == "quantile" {
        return Err("`quantile` is reserved on summaries");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
