//! What every metric kind shares: a family of series by label values, the per-kind cell
//! behind each series, the handle types hold, and [`MetricVec`].

use std::any::Any;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use opentelemetry::metrics::{AsyncInstrumentBuilder, Meter};
use opentelemetry::KeyValue;

use super::{Kind, Labels, Opts, RegistryError};
use crate::exposition::{Format, LabelBlock, MetricType, OwnFamily, Page, Writer};
use crate::limits::{self, OVERFLOW_LABELS, OVERFLOW_MARK};

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
    /// A counter or gauge with no OTel instrument on the pull endpoint's meter (no push
    /// exporter installed): the pull endpoint renders it from the registry's own cells.
    pub(crate) native: AtomicBool,
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
            native: AtomicBool::new(false),
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
    /// Writes the family on the pull endpoint's page; only the families it renders natively
    /// (histograms, summaries, counters and gauges without a pull-side OTel instrument) are
    /// asked, and they override this.
    fn write_pull(&self, page: &mut Page<'_>) {
        if page.format() == Format::Text {
            self.write_text(page.text());
        }
    }
    fn reset(&self);
    /// Registers the OTel instruments on these meters; `push_only` is `None` when nothing would
    /// read the instruments only push exporters see.
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>);
}

/// Separates the label values in a series' key: a byte no UTF-8 text contains, so the joined
/// values identify the label set exactly.
const SEP: u8 = 0xFF;

/// Key bytes kept inside the series itself.
const INLINE: usize = 30;

/// A series' key: inside the series when short (most are), so reading a series for a scrape
/// touches one allocation, not two.
enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(joined: Vec<u8>) -> Self {
        match u8::try_from(joined.len()) {
            Ok(len) if joined.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..joined.len()].copy_from_slice(&joined);
                Key::Inline { len, bytes }
            }
            _ => Key::Heap(joined.into_boxed_slice()),
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Heap(b) => b,
        }
    }
}

/// One labelled series: its label values and its cell, nothing else (no per-series `String`s,
/// no OTel attribute copy; see [`Series::attrs`]).
pub(crate) struct Series<C> {
    /// Label values in the declared order of the names, joined by [`SEP`] ([`OVERFLOW_MARK`]s
    /// for the overflow series).
    key: Key,
    pub(crate) cell: C,
}

impl<C> Series<C> {
    /// The label values, in the declared order of the family's `n` label names.
    pub(crate) fn values(&self, n: usize) -> impl Iterator<Item = &str> + '_ {
        self.key.split(|b| *b == SEP).take(n).map(|v| std::str::from_utf8(v).unwrap_or_default())
    }

    fn is_overflow(&self, n: usize) -> bool {
        n > 0 && self.values(1).next() == Some(OVERFLOW_MARK)
    }

    /// The series' OTel attributes (for push exporters' instruments), made on demand.
    pub(crate) fn attrs(&self, names: &[String]) -> Vec<KeyValue> {
        if self.is_overflow(names.len()) {
            return limits::overflow_attributes().into();
        }
        names.iter().zip(self.values(names.len())).map(|(k, v)| KeyValue::new(k.clone(), v.to_string())).collect()
    }

    /// Writes the series' labels: in the declared order, or when `sorted`, sorted by name, as
    /// the pull endpoint's encoder writes an OTel data point's attributes. The overflow series
    /// has the single label `otel_metric_overflow="true"`.
    pub(crate) fn write_labels(&self, names: &[String], sorted: bool, block: &mut LabelBlock<'_>) {
        let n = names.len();
        if self.is_overflow(n) {
            block.raw(OVERFLOW_LABELS);
        } else if sorted && names.windows(2).any(|w| w[0] > w[1]) {
            let mut pairs: Vec<(&String, &str)> = names.iter().zip(self.values(n)).collect();
            pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in pairs {
                block.pair(k, v);
            }
        } else {
            for (k, v) in names.iter().zip(self.values(n)) {
                block.pair(k, v);
            }
        }
    }
}

/// A series in its family's set, found by its key.
struct Entry<C>(Arc<Series<C>>);

impl<C> std::borrow::Borrow<[u8]> for Entry<C> {
    fn borrow(&self) -> &[u8] {
        &self.0.key[..]
    }
}

impl<C> std::hash::Hash for Entry<C> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.key[..].hash(state);
    }
}

impl<C> PartialEq for Entry<C> {
    fn eq(&self, other: &Self) -> bool {
        self.0.key[..] == other.0.key[..]
    }
}

impl<C> Eq for Entry<C> {}

/// The kind-specific part of a family.
pub(crate) trait Cell: Send + Sync + Sized + 'static {
    /// The kind.
    const KIND: Kind;
    /// The kind's options (buckets, quantiles and window), compared on registration.
    type Spec: Send + Sync + PartialEq + 'static;
    /// The kind's options from `opts`, checked; `default_buckets` are the registry's.
    fn spec(metric: &str, opts: &Opts, default_buckets: &Arc<[f64]>) -> Result<Self::Spec, RegistryError>;
    /// State the kind keeps once per family.
    type Shared: Default + Send + Sync + 'static;
    fn new(spec: &Self::Spec) -> Self;
    fn reset(&self);
    fn write(family: &Family<Self>, out: &mut String);
    /// Writes the family on the pull endpoint's page; counters and gauges are asked only while
    /// [`Meta::native`] is set.
    fn write_pull(family: &Family<Self>, page: &mut Page<'_>) {
        if page.format() == Format::Text {
            Self::write(family, page.text());
        }
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, push_only: Option<&Meter>);
}

/// Series by their key (label values in the declared order of the label names).
type SeriesMap<C> = RwLock<HashSet<Entry<C>>>;

/// A metric family: its series by label values.
pub(crate) struct Family<C: Cell> {
    pub(crate) meta: Meta,
    pub(crate) spec: C::Spec,
    pub(crate) shared: C::Shared,
    series: SeriesMap<C>,
}

impl<C: Cell> Family<C> {
    pub(crate) fn new(meta: Meta, spec: C::Spec) -> Self {
        Family { meta, spec, shared: C::Shared::default(), series: RwLock::new(HashSet::new()) }
    }

    /// The series for `labels`, created on first use; past the cardinality limit, new label
    /// sets share the overflow series (see [`crate::limits`]).
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
        let mut found_values: Vec<&str> = Vec::with_capacity(declared.len());
        for name in declared.iter() {
            let mut found = pairs.iter().filter(|(k, _)| k == name);
            match (found.next(), found.next()) {
                (Some((_, v)), None) => found_values.push(v),
                _ => return Err(mismatch()),
            }
        }
        let key = join(found_values.iter().copied());
        if let Some(s) = crate::sync::read(&self.series).get(&key[..]) {
            return Ok(s.0.clone());
        }
        let mut map = crate::sync::write(&self.series);
        if let Some(s) = map.get(&key[..]) {
            return Ok(s.0.clone());
        }
        let key = if limits::admits(map.len(), || self.meta.exposed_name()) {
            key
        } else {
            join(std::iter::repeat_n(OVERFLOW_MARK, declared.len()))
        };
        if let Some(s) = map.get(&key[..]) {
            return Ok(s.0.clone());
        }
        let series = Arc::new(Series { key: Key::new(key), cell: C::new(&self.spec) });
        map.insert(Entry(series.clone()));
        Ok(series)
    }

    /// Runs `f` for each series, in no particular order (the pull endpoint's).
    pub(crate) fn each(&self, mut f: impl FnMut(&Series<C>)) {
        for s in crate::sync::read(&self.series).iter() {
            f(&s.0);
        }
    }

    /// Runs `f` for each series in the order of their label values (`prometheus_text()`'s).
    pub(crate) fn each_sorted(&self, mut f: impl FnMut(&Series<C>)) {
        let n = self.meta.labels.len();
        let mut all: Vec<Arc<Series<C>>> = crate::sync::read(&self.series).iter().map(|s| s.0.clone()).collect();
        all.sort_by(|a, b| a.values(n).cmp(b.values(n)));
        for s in &all {
            f(s);
        }
    }

    /// Whether the family has no series yet.
    pub(crate) fn is_empty(&self) -> bool {
        crate::sync::read(&self.series).is_empty()
    }
}

/// Label values joined into a series key.
fn join<'a>(values: impl Iterator<Item = &'a str> + Clone) -> Vec<u8> {
    let len = values.clone().map(|v| v.len() + 1).sum::<usize>().saturating_sub(1);
    let mut key = Vec::with_capacity(len);
    for (i, v) in values.enumerate() {
        if i > 0 {
            key.push(SEP);
        }
        key.extend_from_slice(v.as_bytes());
    }
    key
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
    fn write_pull(&self, page: &mut Page<'_>) {
        C::write_pull(self, page);
    }
    fn reset(&self) {
        self.each(|s| s.cell.reset());
    }
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>) {
        C::bind(self, meter, push_only);
    }
}

/// Runs `f` for each series of a live family, from an observable instrument's callback.
pub(crate) fn observe_live<C: Cell>(weak: &Weak<Family<C>>, f: impl FnMut(&Series<C>)) {
    if let Some(family) = weak.upgrade() {
        if !family.meta.removed.load(Ordering::Acquire) {
            family.each(f);
        }
    }
}

/// Writes a family of one number per series (a counter, a gauge) as `kind` under `name`.
pub(crate) fn write_values<C: Cell>(f: &Family<C>, name: &str, kind: &str, value: fn(&C) -> f64, out: &mut String) {
    let mut w = Writer::text(out);
    w.header(name, kind, &f.meta.help, &f.meta.unit);
    f.each_sorted(|s| {
        let mut sample = w.sample(name, "");
        s.write_labels(&f.meta.labels, false, &mut sample);
        sample.value(value(&s.cell));
    });
}

/// Writes a counter or gauge family on the pull endpoint's page, as its encoder writes the
/// family's OTel instrument (`kind`) of pipetel's meter: the translated name, labels sorted by
/// name and followed by the scope labels, nothing at all before the first series.
pub(crate) fn write_values_pull<C: Cell>(f: &Family<C>, kind: MetricType, value: fn(&C) -> f64, page: &mut Page<'_>) {
    if f.is_empty() {
        return;
    }
    let mut family = OwnFamily::new(page.writer(), &f.meta.otel_name, &f.meta.unit, kind, &f.meta.help);
    if family.name().is_empty() {
        return;
    }
    f.each(|s| family.sample(|labels| s.write_labels(&f.meta.labels, true, labels), value(&s.cell)));
}

/// Binds a counter or gauge family: with push exporters (or fixed meters), its observable
/// instrument `build` makes on `meter`, read by the pull endpoint and push exporters alike;
/// with the pull endpoint alone, no instrument: the endpoint renders the family natively and
/// the SDK keeps no second copy of every series.
pub(crate) fn bind_values<C: Cell>(
    family: Arc<Family<C>>,
    meter: &Meter,
    push_only: Option<&Meter>,
    build: impl FnOnce(&Arc<Family<C>>, &Meter),
) {
    if push_only.is_some() {
        family.meta.native.store(false, Ordering::Release);
        build(&family, meter);
    } else {
        family.meta.native.store(true, Ordering::Release);
    }
}

/// `builder`, an observable instrument of `family`, with the family's unit and help, observing
/// `value` of every series while the family is exported.
pub(crate) fn observing<'a, C: Cell, I>(
    family: &Arc<Family<C>>,
    builder: AsyncInstrumentBuilder<'a, I, f64>,
    value: fn(&C) -> f64,
) -> AsyncInstrumentBuilder<'a, I, f64> {
    let weak = Arc::downgrade(family);
    builder.with_unit(family.meta.unit.clone()).with_description(family.meta.help.clone()).with_callback(move |obs| {
        let Some(family) = weak.upgrade() else { return };
        if !family.meta.removed.load(Ordering::Acquire) {
            family.each(|s| obs.observe(value(&s.cell), &s.attrs(&family.meta.labels)));
        }
    })
}

/// One series and its family: what a metric handle ([`super::Counter`], ...) holds.
pub(crate) struct Handle<C: Cell> {
    pub(crate) family: Arc<Family<C>>,
    pub(crate) series: Arc<Series<C>>,
}

impl<C: Cell> Clone for Handle<C> {
    fn clone(&self) -> Self {
        Handle { family: self.family.clone(), series: self.series.clone() }
    }
}

impl<C: Cell> Handle<C> {
    /// The series of `labels` in `family`.
    pub(crate) fn of(family: Arc<Family<C>>, labels: &dyn Labels) -> Result<Self, RegistryError> {
        let series = family.series(labels)?;
        Ok(Handle { family, series })
    }

    /// The only series of a family without labels.
    pub(crate) fn unlabelled(family: Arc<Family<C>>) -> Result<Self, RegistryError> {
        Self::of(family, &NO_LABELS)
    }

    /// The exposition name.
    pub(crate) fn name(&self) -> String {
        self.family.meta.exposed_name()
    }

    pub(crate) fn debug(&self, kind: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self.series.values(self.family.meta.labels.len()).collect();
        f.debug_struct(kind).field("name", &self.name()).field("labels", &labels).finish()
    }
}

/// The label set of an unlabelled series.
const NO_LABELS: [(&str, &str); 0] = [];

/// A kind of metric handle: [`super::Counter`], [`super::Gauge`], [`super::Histogram`],
/// [`super::Summary`]. Sealed: the registry makes them.
pub trait Metric: Clone + sealed::Sealed {}

pub(crate) mod sealed {
    use std::any::Any;
    use std::sync::Arc;

    use super::super::{Labels, RegistryError};

    /// How [`super::MetricVec`] makes handles of a kind.
    pub trait Sealed: Sized {
        /// The handle of series `labels` of `family`, a family of this kind.
        fn of(family: Arc<dyn Any + Send + Sync>, labels: &dyn Labels) -> Result<Self, RegistryError>;
    }
}

/// What every metric handle type ([`super::Counter`], ...) shares: `name()`, `Debug`, and
/// [`Metric`], through which a [`MetricVec`] makes it.
macro_rules! metric_handle {
    ($ty:ident) => {
        impl $ty {
            /// The name in the Prometheus exposition (with `_total` for counters).
            pub fn name(&self) -> String {
                self.0.name()
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.debug(stringify!($ty), f)
            }
        }

        impl super::family::Metric for $ty {}

        impl super::family::sealed::Sealed for $ty {
            fn of(
                family: std::sync::Arc<dyn std::any::Any + Send + Sync>,
                labels: &dyn super::Labels,
            ) -> Result<Self, super::RegistryError> {
                super::family::handle_of(family, labels).map($ty)
            }
        }
    };
}
pub(crate) use metric_handle;

/// Makes handles of the kind whose family `family` is; the registry only ever pairs a family
/// with its own kind's handle type.
pub(crate) fn handle_of<C: Cell>(
    family: Arc<dyn Any + Send + Sync>,
    labels: &dyn Labels,
) -> Result<Handle<C>, RegistryError> {
    match family.downcast::<Family<C>>() {
        Ok(family) => Handle::of(family, labels),
        // Unreachable: `MetricVec<M>` is built from a family of `M`'s kind.
        Err(_) => Err(RegistryError::InvalidOption {
            metric: String::new(),
            reason: "internal: a metric family of another kind".to_string(),
        }),
    }
}

/// A labelled metric: one `M` ([`super::Counter`], [`super::Gauge`], [`super::Histogram`] or
/// [`super::Summary`]) per label set, created on first use. Cheap to clone; clones are the same
/// metric. Aliased as [`super::CounterVec`], [`super::GaugeVec`], [`super::HistogramVec`],
/// [`super::SummaryVec`].
pub struct MetricVec<M: Metric> {
    family: Arc<dyn AnyFamily>,
    _kind: PhantomData<fn() -> M>,
}

impl<M: Metric> Clone for MetricVec<M> {
    fn clone(&self) -> Self {
        MetricVec { family: self.family.clone(), _kind: PhantomData }
    }
}

impl<M: Metric> std::fmt::Debug for MetricVec<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricVec")
            .field("name", &self.family.meta().exposed_name())
            .field("labels", &self.family.meta().labels)
            .finish()
    }
}

impl<M: Metric> MetricVec<M> {
    pub(crate) fn new(family: Arc<dyn AnyFamily>) -> Self {
        MetricVec { family, _kind: PhantomData }
    }

    /// The metric of the series with these label values, created on first use: as pairs
    /// (`[("method", "GET")]`, a `Vec`) or a map (`HashMap`, `BTreeMap`), in any order. Keep
    /// it: recording through it touches only that series. Past the cardinality limit
    /// ([`crate::registry::set_cardinality_limit`]), new label sets share one overflow series.
    ///
    /// # Errors
    /// [`RegistryError::LabelMismatch`] when the label names differ from those the metric was
    /// registered with.
    pub fn with(&self, labels: impl Labels) -> Result<M, RegistryError> {
        M::of(self.family.clone().as_any(), &labels)
    }

    /// The name in the Prometheus exposition (with `_total` for counters).
    pub fn name(&self) -> String {
        self.family.meta().exposed_name()
    }

    /// The label names, in the order they were declared.
    pub fn label_names(&self) -> &[String] {
        &self.family.meta().labels
    }

    /// Resets every series to its initial state.
    pub fn reset(&self) {
        self.family.reset();
    }
}
