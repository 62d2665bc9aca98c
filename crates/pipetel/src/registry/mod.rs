//! A Prometheus-compatible metrics registry on top of OpenTelemetry.
//!
//! For code written against a Prometheus client — counters, gauges, histograms and summaries
//! registered by name with help text, label sets, custom collectors, the text exposition — with
//! every metric exported through pipetel's OTel providers, so it reaches the pull endpoint and
//! OTLP alike.
//!
//! One type per kind, as in the `prometheus` and `prometheus-client` crates: a [`Counter`],
//! [`Gauge`], [`Histogram`] or [`Summary`] is one series, cheap to clone, the handle to record
//! through; a [`CounterVec`], [`GaugeVec`], [`HistogramVec`] or [`SummaryVec`] (a
//! [`MetricVec`]) is a labelled metric whose [`with`](MetricVec::with) gives the series of one
//! label set.
//!
//! ```
//! use pipetel::registry::{Opts, Registry};
//!
//! # fn main() -> Result<(), pipetel::registry::RegistryError> {
//! let app = Registry::new("app")?;
//! let requests = app.counter_vec("requests", "Requests served", &["method"])?; // a CounterVec
//! let get = requests.with([("method", "GET")])?; // a Counter: keep it, the hot path is `get.inc()`
//! get.inc();
//! let latency = app.histogram("request_duration_seconds", "Request latency")?; // a Histogram
//! latency.observe(0.042);
//! let sizes = app.histogram_with("request_size_bytes", "Request sizes", Opts::new().buckets([1e3, 1e6]))?;
//! sizes.observe(5e4);
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
//!   metric (a `*_vec` without labels is the same metric as the plain kind); with anything else it is [`RegistryError::Conflict`]. Several registries may coexist;
//!   give them different prefixes, since their metrics share the OTel meter.
//!
//! # Export
//! A handle's `inc` is one atomic add on the registry's own cell. The pull endpoint renders every
//! kind from the registry's own state, straight into its (streamed) page: counters and gauges as
//! its encoder writes OTel observable instruments (the translated name, labels sorted by name,
//! then `otel_scope_name="pipetel"`), histograms as it writes OTel histograms (`_bucket{le}`,
//! `_sum`, `_count`, the same labels), summaries as real Prometheus summaries (`quantile`
//! labels, `_sum`, `_count`). Counters and gauges become OTel observable instruments whose
//! callbacks read the same cells only where something else reads them: once `init` installed a
//! push metric exporter (then the pull endpoint reads them through the SDK, as before), or on a
//! registry made with [`Registry::with_meters`]. With the pull endpoint alone (the default) the
//! SDK keeps no second copy of the registry's series. A series holds its label values in one
//! allocation, beside its cell. Push exporters (OTLP, console) get a
//! histogram as an OTel histogram with the same buckets that each observation also records
//! into, and a summary as `<name>_sum` / `<name>_count` counters and a `<name>` gauge with a
//! `quantile` attribute. For a registry on the global meter provider those push-only instruments
//! exist only once `init` installed a push metric exporter, so with the pull endpoint alone (the
//! default) a histogram observation touches nothing but the registry's atomics; a registry made
//! with [`Registry::with_meters`] always feeds its `push_only` meter. Metrics registered before
//! `init` are re-registered with the real providers when `init` runs.
//!
//! # Cardinality
//! A metric keeps at most [`set_cardinality_limit`] label sets (2,000 unless `init` or you set
//! another); further label sets share one overflow series marked `otel_metric_overflow="true"`,
//! with one warning per metric.
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

mod collector;
mod counter;
mod family;
mod gauge;
mod histogram;
mod rules;
mod sketch;
mod summary;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use opentelemetry::metrics::Meter;

pub use collector::Sample;
pub use counter::{Counter, CounterVec};
pub use family::{Metric, MetricVec};
pub use gauge::{Gauge, GaugeVec};
pub use histogram::{Histogram, HistogramValue, HistogramVec};
pub use sketch::RELATIVE_ERROR;
pub use summary::{Summary, SummaryValue, SummaryVec, DEFAULT_AGE_BUCKETS, DEFAULT_MAX_AGE, DEFAULT_QUANTILES};

pub use crate::limits::set_cardinality_limit;

use crate::installed::{Installed, Rebind};
use crate::sync::{read, write};
use collector::{FnFamily, SampleFn, TextFn};
use counter::CounterCell;
pub(crate) use family::Cell;
use family::{AnyFamily, Family, Handle, Meta};
use gauge::GaugeCell;
use histogram::HistogramCell;
use rules::{check_label_names, check_name};
use summary::SummaryCell;

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

/// Options of a histogram or summary: buckets, or quantiles and window.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    buckets: Option<Vec<f64>>,
    quantiles: Option<Vec<f64>>,
    max_age: Option<Duration>,
    age_buckets: Option<u32>,
    otel: Option<(String, String)>,
}

impl Opts {
    /// Default buckets / quantiles and window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Histogram bucket upper bounds: finite, strictly increasing, at least one (`+Inf` is
    /// implied). Default: the registry's default buckets ([`crate::buckets::SECONDS_BUCKETS`] unless
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

/// Where a registry's instruments go.
enum Binding {
    /// The meters `init` installed (the installed context), bound again when it runs.
    Global,
    /// Fixed meters (tests, or a provider of the caller's own).
    Fixed { meter: Meter, push_only: Meter },
}

struct Inner {
    prefix: String,
    families: RwLock<BTreeMap<String, Arc<dyn AnyFamily>>>,
    text_collectors: RwLock<Vec<Arc<TextFn>>>,
    default_buckets: RwLock<Arc<[f64]>>,
    /// [`Registry::set_default_buckets`] chose the default buckets: `init` leaves them alone.
    buckets_chosen: AtomicBool,
    binding: Binding,
    text_warned: AtomicBool,
}

/// A registry on the global binding is told when `init` installs the real meter provider:
/// instruments taken from the global provider before then are no-ops forever, so every family
/// bound in an older generation registers its instruments again.
impl Rebind for Inner {
    fn rebind(&self, installed: &Installed) {
        // `init` resolved the configured default buckets: histograms registered from now on
        // without their own use them, unless the program chose others.
        if !self.buckets_chosen.load(Ordering::Relaxed) {
            *write(&self.default_buckets) = Arc::from(crate::installed::service_config().histogram_buckets);
        }
        let families = read(&self.families);
        for family in families.values() {
            if family.meta().bound.swap(installed.generation, Ordering::AcqRel) != installed.generation {
                family.clone().bind(&installed.meter, installed.push_only.as_ref());
            }
        }
    }
}

impl crate::exposition::ExpositionSource for Inner {
    fn write_exposition(&self, page: &mut crate::exposition::Page<'_>) {
        let families = read(&self.families);
        let mut taken = collector::taken_names(&families);
        for family in families.values() {
            // Histograms and summaries are read from the registry's own state (their OTel form
            // is push-only); so are counters and gauges without push exporters, which otherwise
            // reach the pull endpoint through their OTel instruments.
            let meta = family.meta();
            if matches!(meta.kind, Kind::Histogram | Kind::Summary) || meta.native.load(Ordering::Acquire) {
                family.write_pull(page);
            }
        }
        drop(families);
        let format = page.format();
        self.write_text_collectors(&mut taken, page.text(), format);
    }
}

impl Inner {
    fn write_text_collectors(&self, taken: &mut HashSet<String>, out: &mut String, format: crate::exposition::Format) {
        let collectors: Vec<Arc<TextFn>> = read(&self.text_collectors).iter().cloned().collect();
        if let Some((line, why)) = collector::write_text_collectors(&collectors, taken, out, format) {
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
}

/// A set of metrics under one name prefix. Cheap to clone: clones share the metrics.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
    // Keeps the registry's exposition source registered for as long as the registry lives.
    _source: Arc<dyn crate::exposition::ExpositionSource>,
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
    /// Histograms registered without buckets of their own get the configured default buckets
    /// (`PIPETEL_HISTOGRAM_BUCKETS` / `metrics.histogram_buckets`, [`crate::buckets::SECONDS_BUCKETS`]
    /// when unset): those `init` resolved, or before `init` those of the file and environment,
    /// replaced by `init`'s once it runs (unless [`Registry::set_default_buckets`] chose others).
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
            default_buckets: RwLock::new(Arc::from(crate::installed::service_config().histogram_buckets)),
            buckets_chosen: AtomicBool::new(false),
            binding,
            text_warned: AtomicBool::new(false),
        });
        if matches!(inner.binding, Binding::Global) {
            let listener: Weak<Inner> = Arc::downgrade(&inner);
            crate::installed::register(listener);
        }
        let source: Arc<dyn crate::exposition::ExpositionSource> = inner.clone();
        crate::exposition::add_exposition_source(&source);
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
        HistogramCell::check_bounds("(default buckets)", bounds)?;
        *write(&self.inner.default_buckets) = Arc::from(bounds);
        self.inner.buckets_chosen.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Registers (or finds) a counter without labels.
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`], or [`RegistryError::Conflict`] when the name is taken
    /// by another kind or label set.
    pub fn counter(&self, name: &str, help: &str) -> Result<Counter, RegistryError> {
        self.one(name, help, Opts::new()).map(Counter)
    }

    /// Registers (or finds) a counter with these label names.
    ///
    /// # Errors
    /// As [`Registry::counter`], and [`RegistryError::InvalidLabelName`].
    pub fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> Result<CounterVec, RegistryError> {
        self.vec::<_, CounterCell>(name, help, labels, Opts::new())
    }

    /// Registers (or finds) a gauge without labels.
    ///
    /// # Errors
    /// As [`Registry::counter`].
    pub fn gauge(&self, name: &str, help: &str) -> Result<Gauge, RegistryError> {
        self.one(name, help, Opts::new()).map(Gauge)
    }

    /// Registers (or finds) a gauge with these label names.
    ///
    /// # Errors
    /// As [`Registry::counter_vec`].
    pub fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> Result<GaugeVec, RegistryError> {
        self.vec::<_, GaugeCell>(name, help, labels, Opts::new())
    }

    /// Registers (or finds) a histogram without labels, with the default buckets.
    ///
    /// # Errors
    /// See [`Registry::histogram_with`].
    pub fn histogram(&self, name: &str, help: &str) -> Result<Histogram, RegistryError> {
        self.histogram_with(name, help, Opts::new())
    }

    /// Registers (or finds) a histogram without labels, with the buckets of `opts`.
    ///
    /// # Errors
    /// As [`Registry::counter`], and [`RegistryError::InvalidOption`] for buckets that are
    /// empty, not finite or not strictly increasing, or for summary options.
    pub fn histogram_with(&self, name: &str, help: &str, opts: Opts) -> Result<Histogram, RegistryError> {
        self.one(name, help, opts).map(Histogram)
    }

    /// Registers (or finds) a histogram with these label names and the buckets of `opts`
    /// (`Opts::new()` for the default ones).
    ///
    /// # Errors
    /// As [`Registry::histogram_with`], and [`RegistryError::InvalidLabelName`].
    pub fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        opts: Opts,
    ) -> Result<HistogramVec, RegistryError> {
        self.vec::<_, HistogramCell>(name, help, labels, opts)
    }

    /// Registers (or finds) a summary without labels, with the default quantiles and window.
    ///
    /// # Errors
    /// See [`Registry::summary_with`].
    pub fn summary(&self, name: &str, help: &str) -> Result<Summary, RegistryError> {
        self.summary_with(name, help, Opts::new())
    }

    /// Registers (or finds) a summary without labels, with the quantiles and window of `opts`.
    ///
    /// # Errors
    /// As [`Registry::counter`], and [`RegistryError::InvalidOption`] for quantiles outside
    /// `[0, 1]`, a zero window, `age_buckets` outside 1..=60, or buckets.
    pub fn summary_with(&self, name: &str, help: &str, opts: Opts) -> Result<Summary, RegistryError> {
        self.one(name, help, opts).map(Summary)
    }

    /// Registers (or finds) a summary with these label names and the quantiles and window of
    /// `opts` (`Opts::new()` for the default ones).
    ///
    /// # Errors
    /// As [`Registry::summary_with`], and [`RegistryError::InvalidLabelName`].
    pub fn summary_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        opts: Opts,
    ) -> Result<SummaryVec, RegistryError> {
        self.vec::<_, SummaryCell>(name, help, labels, opts)
    }

    /// The family of a kind (counters' names with or without `_total`).
    fn family<C: Cell>(
        &self,
        name: &str,
        help: &str,
        labels: Box<[String]>,
        opts: Opts,
    ) -> Result<Arc<Family<C>>, RegistryError> {
        let name = if C::KIND == Kind::Counter { name.strip_suffix("_total").unwrap_or(name) } else { name };
        let default_buckets = read(&self.inner.default_buckets).clone();
        self.register::<C>(name, help, labels, opts, |metric, opts| C::spec(metric, opts, &default_buckets))
    }

    /// The one series of an unlabelled metric.
    fn one<C: Cell>(&self, name: &str, help: &str, opts: Opts) -> Result<Handle<C>, RegistryError> {
        Handle::unlabelled(self.family(name, help, Box::new([]), opts)?)
    }

    /// A labelled metric whose series are `M`s, of `C`'s kind.
    fn vec<M: Metric, C: Cell>(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        opts: Opts,
    ) -> Result<MetricVec<M>, RegistryError> {
        let labels = labels.iter().map(|l| (*l).to_string()).collect();
        Ok(MetricVec::new(self.family::<C>(name, help, labels, opts)?))
    }

    /// A series of pipetel's own metrics (the service metrics): `labels` of a family with
    /// those label names and `opts`' OTel name and unit.
    pub(crate) fn series<C: Cell>(
        &self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        opts: Opts,
    ) -> Result<Handle<C>, RegistryError> {
        let names = labels.iter().map(|(k, _)| (*k).to_string()).collect();
        Handle::of(self.family(name, help, names, opts)?, &labels)
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
        write(&self.inner.text_collectors).push(Arc::new(collect));
    }

    /// The exposition of this registry alone (format 0.0.4), from its own readings: for tests
    /// and for programs that serve metrics from their own server.
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        let families: Vec<Arc<dyn AnyFamily>> = read(&self.inner.families).values().cloned().collect();
        let mut taken = HashSet::new();
        for family in families {
            taken.extend(family.meta().sample_names());
            family.write_text(&mut out);
        }
        self.inner.write_text_collectors(&mut taken, &mut out, crate::exposition::Format::Text);
        out
    }

    /// Resets every metric to its initial state (registrations stay).
    pub fn reset_all(&self) {
        for family in read(&self.inner.families).values() {
            family.reset();
        }
    }

    /// Unregisters every metric and collector. Existing handles keep recording but are no
    /// longer exported; registering a name again starts from zero.
    pub fn clear(&self) {
        let mut families = write(&self.inner.families);
        for family in families.values() {
            family.meta().removed.store(true, Ordering::Release);
        }
        families.clear();
        write(&self.inner.text_collectors).clear();
    }

    /// The names of the registered metrics as exposed (counters with `_total`).
    pub fn names(&self) -> Vec<String> {
        read(&self.inner.families).values().map(|f| f.meta().exposed_name()).collect()
    }

    fn full_name(&self, name: &str) -> String {
        if self.inner.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}_{name}", self.inner.prefix)
        }
    }

    /// Validates, finds an existing family of the same kind and options, or creates and binds
    /// a new one (under the write lock, so a rebind by `init` never misses it).
    fn register<C: Cell>(
        &self,
        name: &str,
        help: &str,
        labels: Box<[String]>,
        opts: Opts,
        spec: impl FnOnce(&str, &Opts) -> Result<C::Spec, RegistryError>,
    ) -> Result<Arc<Family<C>>, RegistryError> {
        let kind = C::KIND;
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
        if kind != Kind::Histogram && opts.buckets.is_some() {
            return Err(invalid_option(&full, "buckets apply to histograms only"));
        }
        if kind != Kind::Summary && (opts.quantiles.is_some() || opts.max_age.is_some() || opts.age_buckets.is_some()) {
            return Err(invalid_option(&full, "quantiles and the window apply to summaries only"));
        }
        check_label_names(&full, &labels, kind)?;
        let spec = spec(&full, &opts)?;
        let (otel_name, unit) = opts.otel.unwrap_or_else(|| (full.clone(), String::new()));

        let mut families = write(&self.inner.families);
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
        let mut families = write(&self.inner.families);
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
        match &self.inner.binding {
            Binding::Global => {
                // One read of the context: the generation and the meters it names agree.
                let installed = crate::installed::current();
                family.meta().bound.store(installed.generation, Ordering::Release);
                family.bind(&installed.meter, installed.push_only.as_ref());
            }
            Binding::Fixed { meter, push_only } => family.bind(meter, Some(push_only)),
        }
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

#[cfg(test)]
mod tests;
