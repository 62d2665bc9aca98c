//! The metric families and their handles: values in atomics, read by observable instruments and
//! by the registry's own exposition.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::metrics::{BoundHistogram, Histogram as OtelHistogram, Meter};
use opentelemetry::KeyValue;

use super::summary::{SpinGuard, SpinLock, Window};
use super::text::{start_sample, write_header, write_label_block, write_sample};
use super::{Kind, Labels, RegistryError};

/// What every family shares, whatever its kind.
pub(crate) struct Meta {
    /// The exposition base name: prefix and name, without `_total`.
    pub(crate) name: String,
    /// The OTel instrument name.
    pub(crate) otel_name: String,
    pub(crate) unit: String,
    pub(crate) help: String,
    pub(crate) kind: Kind,
    pub(crate) labels: Box<[String]>,
    /// The registry generation the family's instruments were last registered for.
    pub(crate) bound: AtomicU64,
    /// Set by `Registry::clear`: the family is no longer exported, though handles still record.
    pub(crate) removed: AtomicBool,
    warned: AtomicBool,
}

impl Meta {
    pub(crate) fn new(
        name: String,
        otel_name: String,
        unit: String,
        help: String,
        kind: Kind,
        labels: Box<[String]>,
    ) -> Self {
        Meta {
            name,
            otel_name,
            unit,
            help,
            kind,
            labels,
            bound: AtomicU64::new(0),
            removed: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }
    }

    /// The name under which the family's samples are exposed.
    pub(crate) fn exposed_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            _ => self.name.clone(),
        }
    }

    /// Every sample name the family writes (for conflict checks).
    pub(crate) fn sample_names(&self) -> Vec<String> {
        let n = &self.name;
        match self.kind {
            Kind::Counter => vec![format!("{n}_total")],
            Kind::Gauge => vec![n.clone()],
            Kind::Histogram => vec![n.clone(), format!("{n}_bucket"), format!("{n}_sum"), format!("{n}_count")],
            Kind::Summary => vec![n.clone(), format!("{n}_sum"), format!("{n}_count")],
        }
    }

    /// Logs a refused recording once per family: recording calls return `()` and must not
    /// flood the log from a hot loop.
    pub(crate) fn warn_once(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", metric = %self.exposed_name(), "{what}; ignored (logged once per metric)");
        }
    }
}

/// A registry's view of a family of any kind.
pub(crate) trait AnyFamily: Send + Sync + 'static {
    fn meta(&self) -> &Meta;
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    /// Writes the family as `prometheus_text()` shows it.
    fn write_text(&self, out: &mut String);
    /// Writes the family for the pull endpoint (kinds it renders natively).
    fn write_pull(&self, out: &mut String) {
        self.write_text(out);
    }
    fn reset(&self);
    /// Registers the OTel instruments on these meters; `push_only` is `None` when nothing would
    /// read the instruments only push exporters see.
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>);
}

/// One labelled series.
/// The label values of a family's overflow series (no real label value starts with NUL and
/// matches this); rendered as `otel_metric_overflow="true"`.
pub(crate) const OVERFLOW_MARK: &str = "\u{0}otel.metric.overflow";

pub(crate) struct Series<C> {
    values: Box<[String]>,
    attrs: Box<[KeyValue]>,
    cell: C,
}

/// The kind-specific part of a family.
pub(crate) trait Cell: Send + Sync + Sized + 'static {
    type Spec: Send + Sync + PartialEq + 'static;
    fn new(spec: &Self::Spec) -> Self;
    fn reset(&self);
    fn write(family: &Family<Self>, out: &mut String);
    fn write_pull(family: &Family<Self>, out: &mut String) {
        Self::write(family, out);
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, push_only: Option<&Meter>);
}

/// Series by label values (in the declared order of the label names).
type SeriesMap<C> = RwLock<BTreeMap<Box<[String]>, Arc<Series<C>>>>;

/// A metric family: its series by label values.
pub(crate) struct Family<C: Cell> {
    pub(crate) meta: Meta,
    pub(crate) spec: C::Spec,
    series: SeriesMap<C>,
    /// The synchronous OTel histogram push exporters read (histograms only; null while none
    /// would read it); superseded ones stay owned here so a handle that loaded the pointer can
    /// still use it.
    otel_hist: AtomicPtr<OtelHistogram<f64>>,
    // Boxed so published pointers stay valid when the vector grows.
    #[allow(clippy::vec_box)]
    otel_hist_owned: Mutex<Vec<Box<OtelHistogram<f64>>>>,
}

impl<C: Cell> Family<C> {
    pub(crate) fn new(meta: Meta, spec: C::Spec) -> Self {
        Family {
            meta,
            spec,
            series: RwLock::new(BTreeMap::new()),
            otel_hist: AtomicPtr::new(ptr::null_mut()),
            otel_hist_owned: Mutex::new(Vec::new()),
        }
    }

    /// The series for `labels`, created on first use.
    pub(crate) fn series(&self, labels: &dyn Labels) -> Result<Arc<Series<C>>, RegistryError> {
        let pairs = labels.label_pairs();
        let declared = &self.meta.labels;
        let mismatch = || RegistryError::LabelMismatch {
            metric: self.meta.exposed_name(),
            expected: declared.to_vec(),
            given: pairs.iter().map(|(k, _)| k.to_string()).collect(),
        };
        if pairs.len() != declared.len() {
            return Err(mismatch());
        }
        let mut values: Vec<String> = Vec::with_capacity(declared.len());
        for name in declared.iter() {
            let mut found = pairs.iter().filter(|(k, _)| k == name);
            match (found.next(), found.next()) {
                (Some((_, v)), None) => values.push((*v).to_string()),
                _ => return Err(mismatch()),
            }
        }
        let mut values = values.into_boxed_slice();
        if let Some(s) = self.series.read().unwrap_or_else(PoisonError::into_inner).get(&values) {
            return Ok(s.clone());
        }
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        // A flood of label values (a request id in a label) stops at the cardinality limit: new
        // label sets share one overflow series, so memory stays bounded and nothing is lost.
        let overflow = !map.contains_key(&values) && map.len() >= super::series_limit();
        if overflow {
            super::warn_overflow_once(&self.meta.exposed_name());
            values = vec![OVERFLOW_MARK.to_string(); declared.len()].into_boxed_slice();
        }
        let series = map
            .entry(values.clone())
            .or_insert_with(|| {
                let attrs = if overflow {
                    vec![KeyValue::new("otel.metric.overflow", true)].into_boxed_slice()
                } else {
                    declared.iter().zip(values.iter()).map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect()
                };
                Arc::new(Series { values, attrs, cell: C::new(&self.spec) })
            })
            .clone();
        Ok(series)
    }

    fn each(&self, mut f: impl FnMut(&Series<C>)) {
        for s in self.series.read().unwrap_or_else(PoisonError::into_inner).values() {
            f(s);
        }
    }

    fn otel_histogram(&self) -> Option<&OtelHistogram<f64>> {
        // SAFETY: a non-null pointer points into a box that `otel_hist_owned` keeps until the
        // family drops (boxes are never removed), and the caller borrows the family.
        unsafe { self.otel_hist.load(Ordering::Acquire).as_ref() }
    }

    fn publish_histogram(&self, h: OtelHistogram<f64>) {
        let boxed = Box::new(h);
        let p = &*boxed as *const OtelHistogram<f64> as *mut OtelHistogram<f64>;
        self.otel_hist_owned.lock().unwrap_or_else(PoisonError::into_inner).push(boxed);
        self.otel_hist.store(p, Ordering::Release);
    }

    /// Stops feeding any OTel histogram.
    fn unpublish_histogram(&self) {
        self.otel_hist.store(ptr::null_mut(), Ordering::Release);
    }
}

impl<C: Cell> AnyFamily for Family<C> {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
    fn write_text(&self, out: &mut String) {
        C::write(self, out);
    }
    fn write_pull(&self, out: &mut String) {
        C::write_pull(self, out);
    }
    fn reset(&self) {
        self.each(|s| s.cell.reset());
    }
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>) {
        C::bind(self, meter, push_only);
    }
}

/// Runs `f` for each series of a live family, from an observable instrument's callback.
fn observe_live<C: Cell>(weak: &Weak<Family<C>>, f: impl FnMut(&Series<C>)) {
    if let Some(family) = weak.upgrade() {
        if !family.meta.removed.load(Ordering::Acquire) {
            family.each(f);
        }
    }
}

fn load_f64(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Ordering::Relaxed))
}

fn add_f64(a: &AtomicU64, n: f64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f64::from_bits(bits) + n).to_bits()));
}

// ----- counter -----

/// Whole increments go to an integer cell (one `fetch_add`); fractional ones to an `f64` cell.
pub(crate) struct CounterCell {
    whole: AtomicU64,
    frac: AtomicU64,
}

/// Below 2^53 every integer is exact as an `f64`.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl CounterCell {
    #[inline]
    fn add(&self, meta: &Meta, n: f64) {
        if !n.is_finite() || n < 0.0 {
            meta.warn_once(&format!("a counter cannot be increased by {n}"));
            return;
        }
        if n.fract() == 0.0 && n < EXACT_INT {
            self.whole.fetch_add(n as u64, Ordering::Relaxed);
        } else {
            add_f64(&self.frac, n);
        }
    }
    fn value(&self) -> f64 {
        self.whole.load(Ordering::Relaxed) as f64 + load_f64(&self.frac)
    }
}

impl Cell for CounterCell {
    type Spec = ();
    fn new(_: &()) -> Self {
        CounterCell { whole: AtomicU64::new(0), frac: AtomicU64::new(0f64.to_bits()) }
    }
    fn reset(&self) {
        self.whole.store(0, Ordering::Relaxed);
        self.frac.store(0f64.to_bits(), Ordering::Relaxed);
    }
    fn write(f: &Family<Self>, out: &mut String) {
        let name = f.meta.exposed_name();
        write_header(&name, &f.meta.help, "counter", out);
        f.each(|s| write_sample(&name, &f.meta.labels, &s.values, None, s.cell.value(), out));
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, _: Option<&Meter>) {
        let weak = Arc::downgrade(&family);
        let _ = meter
            .f64_observable_counter(family.meta.otel_name.clone())
            .with_unit(family.meta.unit.clone())
            .with_description(family.meta.help.clone())
            .with_callback(move |obs| observe_live(&weak, |s| obs.observe(s.cell.value(), &s.attrs)))
            .build();
    }
}

/// Fetches the unlabelled series, or says once that the family needs labels.
fn default_series<'a, C: Cell>(family: &Family<C>, default: &'a Option<Arc<Series<C>>>) -> Option<&'a Series<C>> {
    match default {
        Some(s) => Some(s),
        None => {
            family.meta.warn_once("the metric declares labels: record through `with(labels)`");
            None
        }
    }
}

/// The label set of an unlabelled series.
const NO_LABELS: [(&str, &str); 0] = [];

/// Defines a metric kind's family type (the metric, recording on its unlabelled series) and
/// handle type (one series), with what every kind shares.
macro_rules! family_common {
    ($(#[$fdoc:meta])* $family:ident, $(#[$hdoc:meta])* $handle:ident, $cell:ty) => {
        $(#[$fdoc])*
        #[derive(Clone)]
        pub struct $family {
            family: Arc<Family<$cell>>,
            default: Option<Arc<Series<$cell>>>,
        }

        $(#[$hdoc])*
        #[derive(Clone)]
        pub struct $handle {
            family: Arc<Family<$cell>>,
            series: Arc<Series<$cell>>,
        }

        impl $family {
            pub(crate) fn from_family(family: Arc<Family<$cell>>) -> Result<Self, RegistryError> {
                let default = if family.meta.labels.is_empty() { Some(family.series(&NO_LABELS)?) } else { None };
                Ok(Self { family, default })
            }

            /// The handle of the series with these label values (created on first use). Keep it:
            /// recording through a handle touches only that series' atomics.
            ///
            /// # Errors
            /// [`RegistryError::LabelMismatch`] when the label names differ from those the metric
            /// was registered with.
            pub fn with(&self, labels: impl Labels) -> Result<$handle, RegistryError> {
                let series = self.family.series(&labels)?;
                Ok($handle { family: self.family.clone(), series })
            }

            /// The name in the Prometheus exposition (with `_total` for counters).
            pub fn name(&self) -> String {
                self.family.meta.exposed_name()
            }

            /// Resets every series of the metric to its initial state.
            pub fn reset(&self) {
                AnyFamily::reset(&*self.family);
            }
        }

        impl std::fmt::Debug for $family {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($family)).field("name", &self.family.meta.exposed_name()).finish()
            }
        }

        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($handle))
                    .field("name", &self.family.meta.exposed_name())
                    .field("labels", &self.series.values)
                    .finish()
            }
        }

        impl $handle {
            /// Resets this series to its initial state.
            pub fn reset(&self) {
                self.series.cell.reset();
            }
        }
    };
}

family_common!(
    /// A counter: a value that only goes up. Clone it freely; every clone is the same metric.
    ///
    /// The methods record on the unlabelled series; a counter registered with labels records
    /// through [`Counter::with`] (calling them there is ignored and logged once).
    Counter,
    /// One series of a [`Counter`]: `inc` is a single relaxed atomic add.
    CounterHandle,
    CounterCell
);

impl Counter {
    /// Adds 1.
    #[inline]
    pub fn inc(&self) {
        if let Some(s) = &self.default {
            s.cell.whole.fetch_add(1, Ordering::Relaxed);
        } else {
            default_series(&self.family, &self.default);
        }
    }

    /// Adds `n`. A negative or non-finite `n` is refused (logged once; the value is unchanged).
    #[inline]
    pub fn inc_by(&self, n: f64) {
        if let Some(s) = default_series(&self.family, &self.default) {
            s.cell.add(&self.family.meta, n);
        }
    }

    /// The current value of the unlabelled series (0 for a labelled counter).
    pub fn value(&self) -> f64 {
        self.default.as_ref().map_or(0.0, |s| s.cell.value())
    }
}

impl CounterHandle {
    /// Adds 1: one relaxed atomic add.
    #[inline]
    pub fn inc(&self) {
        self.series.cell.whole.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`. A negative or non-finite `n` is refused (logged once; the value is unchanged).
    #[inline]
    pub fn inc_by(&self, n: f64) {
        self.series.cell.add(&self.family.meta, n);
    }

    /// The current value.
    pub fn value(&self) -> f64 {
        self.series.cell.value()
    }
}

// ----- gauge -----

pub(crate) struct GaugeCell(AtomicU64);

impl Cell for GaugeCell {
    type Spec = ();
    fn new(_: &()) -> Self {
        GaugeCell(AtomicU64::new(0f64.to_bits()))
    }
    fn reset(&self) {
        self.0.store(0f64.to_bits(), Ordering::Relaxed);
    }
    fn write(f: &Family<Self>, out: &mut String) {
        let name = f.meta.exposed_name();
        write_header(&name, &f.meta.help, "gauge", out);
        f.each(|s| write_sample(&name, &f.meta.labels, &s.values, None, load_f64(&s.cell.0), out));
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, _: Option<&Meter>) {
        let weak = Arc::downgrade(&family);
        let _ = meter
            .f64_observable_gauge(family.meta.otel_name.clone())
            .with_unit(family.meta.unit.clone())
            .with_description(family.meta.help.clone())
            .with_callback(move |obs| observe_live(&weak, |s| obs.observe(load_f64(&s.cell.0), &s.attrs)))
            .build();
    }
}

impl GaugeCell {
    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
    fn add(&self, meta: &Meta, n: f64) {
        if !n.is_finite() {
            meta.warn_once(&format!("a gauge cannot be moved by {n}"));
            return;
        }
        add_f64(&self.0, n);
    }
}

fn now_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

family_common!(
    /// A gauge: a value that goes up and down. Clone it freely; every clone is the same metric.
    ///
    /// The methods act on the unlabelled series; a gauge registered with labels records through
    /// [`Gauge::with`].
    Gauge,
    /// One series of a [`Gauge`].
    GaugeHandle,
    GaugeCell
);

macro_rules! gauge_methods {
    ($series:expr, $self:ident) => {
        /// Sets the value (any `f64`, NaN and infinities included, as Prometheus allows).
        #[inline]
        pub fn set(&$self, v: f64) {
            if let Some(s) = $series { s.cell.set(v) }
        }
        /// Adds 1.
        #[inline]
        pub fn inc(&$self) {
            $self.inc_by(1.0)
        }
        /// Subtracts 1.
        #[inline]
        pub fn dec(&$self) {
            $self.inc_by(-1.0)
        }
        /// Adds `n` (negative to subtract). A non-finite `n` is refused (logged once).
        #[inline]
        pub fn inc_by(&$self, n: f64) {
            if let Some(s) = $series { s.cell.add(&$self.family.meta, n) }
        }
        /// Subtracts `n`. A non-finite `n` is refused (logged once).
        #[inline]
        pub fn dec_by(&$self, n: f64) {
            $self.inc_by(-n)
        }
        /// Sets the value to the current Unix time in seconds.
        pub fn set_to_current_time(&$self) {
            $self.set(now_seconds())
        }
    };
}

impl Gauge {
    gauge_methods!(default_series(&self.family, &self.default), self);

    /// The current value of the unlabelled series (0 for a labelled gauge).
    pub fn value(&self) -> f64 {
        self.default.as_ref().map_or(0.0, |s| load_f64(&s.cell.0))
    }
}

impl GaugeHandle {
    gauge_methods!(Some(&*self.series), self);

    /// The current value.
    pub fn value(&self) -> f64 {
        load_f64(&self.series.cell.0)
    }
}

// ----- histogram -----

pub(crate) struct HistogramCell {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    /// The family's current OTel histogram bound to this series' attributes, so an observation
    /// pays no attribute lookup; bound again when `init` replaces the histogram.
    bound: AtomicPtr<BoundSeries>,
    // Boxed so published pointers stay valid when the vector grows; at most one per `init`.
    #[allow(clippy::vec_box)]
    bound_owned: Mutex<Vec<Box<BoundSeries>>>,
}

/// A series' bound handle on one of its family's OTel histograms (`key`: that histogram's address).
pub(crate) struct BoundSeries {
    key: usize,
    handle: BoundHistogram<f64>,
}

impl HistogramCell {
    /// This series' handle on `histogram`, bound on first use.
    #[inline]
    fn bound_to(&self, histogram: &OtelHistogram<f64>, attrs: &[KeyValue]) -> &BoundHistogram<f64> {
        let key = ptr::from_ref(histogram) as usize;
        // SAFETY: a non-null pointer points into a box `bound_owned` keeps until the cell drops
        // (boxes are never removed), and the caller borrows the cell.
        if let Some(b) = unsafe { self.bound.load(Ordering::Acquire).as_ref() } {
            if b.key == key {
                return &b.handle;
            }
        }
        self.bind(histogram, key, attrs)
    }

    #[cold]
    #[inline(never)]
    fn bind(&self, histogram: &OtelHistogram<f64>, key: usize, attrs: &[KeyValue]) -> &BoundHistogram<f64> {
        let mut owned = self.bound_owned.lock().unwrap_or_else(PoisonError::into_inner);
        let p = match owned.iter().find(|b| b.key == key) {
            Some(b) => &**b as *const BoundSeries as *mut BoundSeries,
            None => {
                let boxed = Box::new(BoundSeries { key, handle: histogram.bind(attrs) });
                let p = &*boxed as *const BoundSeries as *mut BoundSeries;
                owned.push(boxed);
                p
            }
        };
        self.bound.store(p, Ordering::Release);
        // SAFETY: `p` points into a box `bound_owned` keeps until the cell drops.
        unsafe { &(*p).handle }
    }
}

impl HistogramCell {
    #[inline]
    fn observe(&self, bounds: &[f64], v: f64) {
        if let Some(b) = self.buckets.get(bucket_index(bounds, v)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        add_f64(&self.sum, v);
    }

    fn snapshot(&self, bounds: &[f64]) -> HistogramValue {
        let mut cumulative = 0u64;
        let mut buckets = Vec::with_capacity(bounds.len());
        let mut counts = self.buckets.iter().map(|b| b.load(Ordering::Relaxed));
        for bound in bounds {
            cumulative = cumulative.saturating_add(counts.next().unwrap_or(0));
            buckets.push((*bound, cumulative));
        }
        let count = cumulative.saturating_add(counts.next().unwrap_or(0));
        HistogramValue { buckets, count, sum: load_f64(&self.sum) }
    }
}

impl Cell for HistogramCell {
    type Spec = Arc<[f64]>;
    fn new(bounds: &Arc<[f64]>) -> Self {
        HistogramCell {
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            bound: AtomicPtr::new(ptr::null_mut()),
            bound_owned: Mutex::new(Vec::new()),
        }
    }
    fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.sum.store(0f64.to_bits(), Ordering::Relaxed);
    }
    fn write(f: &Family<Self>, out: &mut String) {
        write_histogram(f, None, out);
    }
    fn write_pull(f: &Family<Self>, out: &mut String) {
        // As the pull endpoint's encoder writes an OTel histogram of pipetel's meter, which is
        // what this family was rendered as before it was rendered natively.
        write_histogram(f, Some(crate::SCOPE_NAME), out);
    }
    fn bind(family: Arc<Family<Self>>, _: &Meter, push_only: Option<&Meter>) {
        // Push exporters only: the pull endpoint renders the atomics natively.
        match push_only {
            Some(push_only) => family.publish_histogram(
                push_only
                    .f64_histogram(family.meta.otel_name.clone())
                    .with_unit(family.meta.unit.clone())
                    .with_description(family.meta.help.clone())
                    .with_boundaries(family.spec.to_vec())
                    .build(),
            ),
            None => family.unpublish_histogram(),
        }
    }
}

/// The bucket of `v` (`le` semantics: a value equal to a bound belongs to that bucket); the
/// last one, `bounds.len()`, is `+Inf`.
#[inline]
fn bucket_index(bounds: &[f64], v: f64) -> usize {
    if bounds.len() <= LINEAR_SCAN_MAX {
        // Observed values cluster in a few buckets, so a scan's exit branch predicts well: on the
        // default 14 bounds it beat a binary search by a quarter on a repeated value and trailed
        // it by a tenth on values spread over every bucket.
        bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len())
    } else {
        bounds.partition_point(|b| *b < v)
    }
}

/// Bucket bounds up to which `observe` scans linearly.
const LINEAR_SCAN_MAX: usize = 16;

/// Writes a histogram family; with `scope`, labels are sorted by name and followed by
/// `otel_scope_name`, as the pull endpoint's encoder writes OTel data points.
fn write_histogram(f: &Family<HistogramCell>, scope: Option<&str>, out: &mut String) {
    let name = &f.meta.name;
    write_header(name, &f.meta.help, "histogram", out);
    let mut labels = String::new();
    // Formatted once per family, not once per series.
    let bounds: Vec<String> = f.spec.iter().chain([&f64::INFINITY]).map(|b| super::text::f64_text(*b)).collect();
    f.each(|s| {
        labels.clear();
        write_label_block(&f.meta.labels, &s.values, scope, &mut labels);
        // Counts from one read of the buckets, so `+Inf` and `_count` agree with them.
        let v = s.cell.snapshot(&f.spec);
        let counts = v.buckets.iter().map(|(_, c)| *c).chain([v.count]);
        for (bound, c) in bounds.iter().zip(counts) {
            start_sample(name, "_bucket", &labels, Some(bound.as_str()), out);
            let _ = writeln!(out, "{c}");
        }
        start_sample(name, "_sum", &labels, None, out);
        super::text::write_f64(v.sum, out);
        out.push('\n');
        start_sample(name, "_count", &labels, None, out);
        let _ = writeln!(out, "{}", v.count);
    });
}

/// A histogram's readings.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramValue {
    /// `(upper bound, cumulative count)` per bucket, `+Inf` left out (it is `count`).
    pub buckets: Vec<(f64, u64)>,
    /// Observations.
    pub count: u64,
    /// Sum of the observations.
    pub sum: f64,
}

impl HistogramValue {
    /// `sum / count`, `None` before the first observation.
    pub fn average(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

family_common!(
    /// A histogram with fixed buckets. Clone it freely; every clone is the same metric.
    ///
    /// Each observation goes to the registry's atomics, which [`Histogram::value`],
    /// `prometheus_text()` and the pull endpoint read (the latter renders them natively, as
    /// `_bucket{le}`, `_sum` and `_count`). Push exporters (OTLP, console) read an OTel histogram
    /// with the same buckets that observations feed too, for a registry on the global meter provider
    /// only once `init` installed a push metric exporter: with the pull endpoint alone (the default)
    /// an observation is a bucket increment and a sum update. `reset()` clears the atomics only: an
    /// OTel cumulative stream cannot be reset.
    Histogram,
    /// One series of a [`Histogram`].
    HistogramHandle,
    HistogramCell
);

#[inline]
fn observe_histogram(family: &Family<HistogramCell>, series: &Series<HistogramCell>, v: f64) {
    if v.is_nan() {
        family.meta.warn_once("a histogram cannot observe NaN");
        return;
    }
    series.cell.observe(&family.spec, v);
    if let Some(h) = family.otel_histogram() {
        series.cell.bound_to(h, &series.attrs).record(v);
    }
}

impl Histogram {
    /// Records one observation. NaN is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        if let Some(s) = default_series(&self.family, &self.default) {
            observe_histogram(&self.family, s, v);
        }
    }

    /// Records the time since `start`, in seconds.
    pub fn observe_since(&self, start: std::time::Instant) {
        self.observe(start.elapsed().as_secs_f64());
    }

    /// The readings of the unlabelled series (empty for a labelled histogram).
    pub fn value(&self) -> HistogramValue {
        match &self.default {
            Some(s) => s.cell.snapshot(&self.family.spec),
            None => HistogramCell::new(&self.family.spec).snapshot(&self.family.spec),
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.value().count
    }

    /// Sum of the observations.
    pub fn sum(&self) -> f64 {
        self.value().sum
    }

    /// Mean observation, `None` before the first one.
    pub fn average(&self) -> Option<f64> {
        self.value().average()
    }

    /// The bucket bounds.
    pub fn buckets(&self) -> &[f64] {
        &self.family.spec
    }
}

#[cfg(test)]
impl Histogram {
    /// Whether observations also go to an OTel histogram.
    pub(crate) fn feeds_otel(&self) -> bool {
        self.family.otel_histogram().is_some()
    }
}

impl HistogramHandle {
    /// Records one observation. NaN is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        observe_histogram(&self.family, &self.series, v);
    }

    /// Records the time since `start`, in seconds.
    pub fn observe_since(&self, start: std::time::Instant) {
        self.observe(start.elapsed().as_secs_f64());
    }

    /// The readings.
    pub fn value(&self) -> HistogramValue {
        self.series.cell.snapshot(&self.family.spec)
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.value().count
    }

    /// Sum of the observations.
    pub fn sum(&self) -> f64 {
        self.value().sum
    }

    /// Mean observation, `None` before the first one.
    pub fn average(&self) -> Option<f64> {
        self.value().average()
    }
}

// ----- summary -----

/// Quantiles and window of a summary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SummarySpec {
    pub(crate) quantiles: Box<[f64]>,
    pub(crate) max_age: Duration,
    pub(crate) age_buckets: u32,
}

/// A summary series: the sketch window and the running totals under one lock, taken once per
/// observation (cheaper than the lock plus two atomic updates).
pub(crate) struct SummaryCell(SpinLock<SummaryState>);

struct SummaryState {
    window: Window,
    count: u64,
    sum: f64,
}

impl SummaryCell {
    #[inline]
    fn lock(&self) -> SpinGuard<'_, SummaryState> {
        self.0.lock()
    }

    #[inline]
    fn observe(&self, v: f64) {
        let mut state = self.lock();
        state.window.observe(v);
        state.count += 1;
        state.sum += v;
    }

    /// `(count, sum)`.
    fn totals(&self) -> (u64, f64) {
        let state = self.lock();
        (state.count, state.sum)
    }

    fn snapshot(&self, spec: &SummarySpec) -> SummaryValue {
        let mut state = self.lock();
        let values = state.window.quantiles(&spec.quantiles);
        SummaryValue {
            quantiles: spec.quantiles.iter().copied().zip(values).collect(),
            count: state.count,
            sum: state.sum,
        }
    }
}

impl Cell for SummaryCell {
    type Spec = SummarySpec;
    fn new(spec: &SummarySpec) -> Self {
        SummaryCell(SpinLock::new(SummaryState {
            window: Window::new(spec.max_age, spec.age_buckets),
            count: 0,
            sum: 0.0,
        }))
    }
    fn reset(&self) {
        let mut state = self.lock();
        state.window.clear();
        state.count = 0;
        state.sum = 0.0;
    }
    fn write(f: &Family<Self>, out: &mut String) {
        let name = &f.meta.name;
        write_header(name, &f.meta.help, "summary", out);
        let (sum, count) = (format!("{name}_sum"), format!("{name}_count"));
        f.each(|s| {
            let v = s.cell.snapshot(&f.spec);
            for (q, value) in &v.quantiles {
                // An empty window reads NaN, as the reference clients write it.
                write_sample(name, &f.meta.labels, &s.values, Some(("quantile", *q)), value.unwrap_or(f64::NAN), out);
            }
            write_sample(&sum, &f.meta.labels, &s.values, None, v.sum, out);
            write_sample(&count, &f.meta.labels, &s.values, None, v.count as f64, out);
        });
    }
    fn bind(family: Arc<Family<Self>>, _: &Meter, push_only: Option<&Meter>) {
        // Push exporters only: the pull endpoint renders the summary natively (an exposition
        // source), which OTel instruments cannot express.
        let Some(push_only) = push_only else { return };
        let otel = &family.meta.otel_name;
        let weak = Arc::downgrade(&family);
        let _ = push_only
            .f64_observable_counter(format!("{otel}_sum"))
            .with_unit(family.meta.unit.clone())
            .with_description(format!("Sum of the observations of {}", family.meta.name))
            .with_callback(move |obs| observe_live(&weak, |s| obs.observe(s.cell.totals().1, &s.attrs)))
            .build();
        let weak = Arc::downgrade(&family);
        let _ = push_only
            .u64_observable_counter(format!("{otel}_count"))
            .with_description(format!("Observations of {}", family.meta.name))
            .with_callback(move |obs| observe_live(&weak, |s| obs.observe(s.cell.totals().0, &s.attrs)))
            .build();
        let weak = Arc::downgrade(&family);
        let _ = push_only
            .f64_observable_gauge(otel.clone())
            .with_unit(family.meta.unit.clone())
            .with_description(family.meta.help.clone())
            .with_callback(move |obs| {
                let Some(family) = weak.upgrade() else { return };
                if family.meta.removed.load(Ordering::Acquire) {
                    return;
                }
                family.each(|s| {
                    for (q, v) in s.cell.snapshot(&family.spec).quantiles {
                        if let Some(v) = v {
                            let mut attrs = s.attrs.to_vec();
                            attrs.push(KeyValue::new("quantile", q));
                            obs.observe(v, &attrs);
                        }
                    }
                });
            })
            .build();
    }
}

/// A summary's readings.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryValue {
    /// `(quantile, value)`: the value over the sliding window, `None` when the window is empty.
    pub quantiles: Vec<(f64, Option<f64>)>,
    /// Observations since creation or reset (not windowed).
    pub count: u64,
    /// Sum of those observations (not windowed).
    pub sum: f64,
}

family_common!(
    /// A summary: quantiles over a sliding time window (a relative-error sketch, within
    /// [`RELATIVE_ERROR`](super::RELATIVE_ERROR) of the exact value), plus a running count and sum.
    /// Clone it freely; every clone is the same metric.
    ///
    /// An observation takes a short lock (the sketch is not atomic) and, on Linux, reads the recent
    /// time a background thread keeps rather than the clock (see the [module docs](super)); the
    /// pull endpoint renders summaries natively, push exporters get `<name>_sum` / `<name>_count`
    /// counters and a `<name>` gauge with a `quantile` attribute (for a registry on the global meter
    /// provider, once `init` installed a push metric exporter).
    Summary,
    /// One series of a [`Summary`].
    SummaryHandle,
    SummaryCell
);

#[inline]
fn observe_summary(family: &Family<SummaryCell>, series: &Series<SummaryCell>, v: f64) {
    if !v.is_finite() {
        family.meta.warn_once(&format!("a summary cannot observe {v}"));
        return;
    }
    series.cell.observe(v);
}

impl Summary {
    /// Records one observation. A non-finite value is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        if let Some(s) = default_series(&self.family, &self.default) {
            observe_summary(&self.family, s, v);
        }
    }

    /// The readings of the unlabelled series (empty for a labelled summary).
    pub fn value(&self) -> SummaryValue {
        match &self.default {
            Some(s) => s.cell.snapshot(&self.family.spec),
            None => SummaryCell::new(&self.family.spec).snapshot(&self.family.spec),
        }
    }

    /// The configured quantiles.
    pub fn quantiles(&self) -> &[f64] {
        &self.family.spec.quantiles
    }
}

impl SummaryHandle {
    /// Records one observation. A non-finite value is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        observe_summary(&self.family, &self.series, v);
    }

    /// The readings.
    pub fn value(&self) -> SummaryValue {
        self.series.cell.snapshot(&self.family.spec)
    }
}
