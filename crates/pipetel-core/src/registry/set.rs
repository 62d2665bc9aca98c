//! The registry: a set of metrics under one name prefix, and the global one.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use opentelemetry::metrics::Meter;

use super::collector::{FnFamily, Sample, SampleFn};
use super::counter::{Counter, CounterCell, CounterVec};
use super::error::{invalid_option, RegistryError};
use super::family::{AnyFamily, Cell, Family};
use super::gauge::{Gauge, GaugeCell, GaugeVec};
use super::handle::{Handle, Metric, MetricVec};
use super::histogram::{Histogram, HistogramCell, HistogramVec};
use super::inner::{Binding, Inner};
use super::kind::Kind;
use super::meta::Meta;
use super::opts::Opts;
use super::rules::{check_label_names, check_name};
use super::summary::{Summary, SummaryCell, SummaryVec};
use crate::sync::{read, write};

/// A set of metrics under one name prefix. Cheap to clone: clones share the metrics.
#[derive(Clone)]
pub struct Registry {
    pub(super) inner: Arc<Inner>,
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

/// The constructors of each kind whose metrics take options (a histogram's buckets, a summary's
/// quantiles and window), each documented as given: `$one(name, help)` with the default options,
/// `$with(name, help, opts)`, and `$vec(name, help, labels, opts)` for a labelled metric.
macro_rules! option_kinds {
    ($(
        $(#[$one_doc:meta])* fn $one:ident;
        $(#[$with_doc:meta])* fn $with:ident -> $handle:ident;
        $(#[$vec_doc:meta])* fn $vec:ident -> $vec_ty:ident of $cell:ident;
    )*) => {$(
        $(#[$one_doc])*
        pub fn $one(&self, name: &str, help: &str) -> Result<$handle, RegistryError> {
            self.$with(name, help, Opts::new())
        }

        $(#[$with_doc])*
        pub fn $with(&self, name: &str, help: &str, opts: Opts) -> Result<$handle, RegistryError> {
            self.one(name, help, opts).map($handle)
        }

        $(#[$vec_doc])*
        pub fn $vec(&self, name: &str, help: &str, labels: &[&str], opts: Opts) -> Result<$vec_ty, RegistryError> {
            self.vec::<_, $cell>(name, help, labels, opts)
        }
    )*};
}

/// The registration of a metric of each kind listed whose samples a callback returns at
/// collection time (documented as given): `$method(name, help, collect)`.
macro_rules! callback_kinds {
    ($($(#[$doc:meta])* fn $method:ident => $kind:ident;)*) => {$(
        $(#[$doc])*
        pub fn $method(
            &self,
            name: &str,
            help: &str,
            collect: impl Fn() -> Vec<Sample> + Send + Sync + 'static,
        ) -> Result<(), RegistryError> {
            self.register_fn(name, help, Kind::$kind, Arc::new(collect))
        }
    )*};
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
            default_buckets: RwLock::new(Arc::from(crate::global::service_config().histogram_buckets)),
            buckets_chosen: AtomicBool::new(false),
            binding,
            text_warned: AtomicBool::new(false),
        });
        if matches!(inner.binding, Binding::Global) {
            let listener: Weak<Inner> = Arc::downgrade(&inner);
            crate::global::register(listener);
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

    option_kinds! {
        /// Registers (or finds) a histogram without labels, with the default buckets.
        ///
        /// # Errors
        /// See [`Registry::histogram_with`].
        fn histogram;
        /// Registers (or finds) a histogram without labels, with the buckets of `opts`.
        ///
        /// # Errors
        /// As [`Registry::counter`], and [`RegistryError::InvalidOption`] for buckets that are
        /// empty, not finite or not strictly increasing, or for summary options.
        fn histogram_with -> Histogram;
        /// Registers (or finds) a histogram with these label names and the buckets of `opts`
        /// (`Opts::new()` for the default ones).
        ///
        /// # Errors
        /// As [`Registry::histogram_with`], and [`RegistryError::InvalidLabelName`].
        fn histogram_vec -> HistogramVec of HistogramCell;

        /// Registers (or finds) a summary without labels, with the default quantiles and window.
        ///
        /// # Errors
        /// See [`Registry::summary_with`].
        fn summary;
        /// Registers (or finds) a summary without labels, with the quantiles and window of `opts`.
        ///
        /// # Errors
        /// As [`Registry::counter`], and [`RegistryError::InvalidOption`] for quantiles outside
        /// `[0, 1]`, a zero window, `age_buckets` outside 1..=60, or buckets.
        fn summary_with -> Summary;
        /// Registers (or finds) a summary with these label names and the quantiles and window of
        /// `opts` (`Opts::new()` for the default ones).
        ///
        /// # Errors
        /// As [`Registry::summary_with`], and [`RegistryError::InvalidLabelName`].
        fn summary_vec -> SummaryVec of SummaryCell;
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

    callback_kinds! {
        /// Registers a counter whose samples `collect` returns each time metrics are collected
        /// (an OTel observable counter; also in [`Registry::prometheus_text`]). Samples carry their
        /// own labels; one with an invalid label name or a negative or non-finite value is dropped
        /// with one warning, and a panicking callback yields no samples.
        ///
        /// # Errors
        /// [`RegistryError::InvalidName`] or [`RegistryError::Conflict`].
        fn counter_fn => Counter;

        /// Registers a gauge whose samples `collect` returns at collection time; as
        /// [`Registry::counter_fn`], any finite or non-finite value allowed.
        ///
        /// # Errors
        /// [`RegistryError::InvalidName`] or [`RegistryError::Conflict`].
        fn gauge_fn => Gauge;
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

    /// The family of a kind (counters' names with or without `_total`): validates, finds an
    /// existing family of the same kind and options, or creates and binds a new one (under the
    /// write lock, so a rebind by `init` never misses it).
    fn family<C: Cell>(
        &self,
        name: &str,
        help: &str,
        labels: Box<[String]>,
        opts: Opts,
    ) -> Result<Arc<Family<C>>, RegistryError> {
        let kind = C::KIND;
        let name = unsuffixed(name, kind);
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
        let default_buckets = read(&self.inner.default_buckets).clone();
        let spec = C::spec(&full, &opts, &default_buckets)?;
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
        let name = unsuffixed(name, kind);
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
                let installed = crate::global::current();
                family.meta().bound.store(installed.generation, Ordering::Release);
                family.bind(&installed.meter, installed.push_only.as_ref());
            }
            Binding::Fixed { meter, push_only } => family.bind(meter, Some(push_only)),
        }
    }
}

/// A metric's name as registered: a counter's without `_total` (the exposition adds it back),
/// so that `requests` and `requests_total` name the same counter.
fn unsuffixed(name: &str, kind: Kind) -> &str {
    if kind == Kind::Counter {
        name.strip_suffix("_total").unwrap_or(name)
    } else {
        name
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
