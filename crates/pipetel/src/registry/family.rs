//! What every metric kind shares: a family of series by label values, the per-kind cell
//! behind each series, the handle types hold, and [`MetricVec`].

use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use opentelemetry::metrics::{AsyncInstrumentBuilder, Meter};
use opentelemetry::KeyValue;

use super::{Kind, Labels, Opts, RegistryError};
use crate::exposition::{scope_labels, Format, LabelBlock, Writer};
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
    /// Writes the family for the pull endpoint, in `format`; only the kinds it renders natively
    /// (histograms, summaries) are asked, and they override this.
    fn write_pull(&self, out: &mut String, format: Format) {
        if format == Format::Text {
            self.write_text(out);
        }
    }
    fn reset(&self);
    /// Registers the OTel instruments on these meters; `push_only` is `None` when nothing would
    /// read the instruments only push exporters see.
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>);
}

/// One labelled series.
pub(crate) struct Series<C> {
    /// Label values in the declared order of the names ([`OVERFLOW_MARK`]s for the overflow
    /// series).
    pub(crate) values: Box<[String]>,
    pub(crate) attrs: Box<[KeyValue]>,
    pub(crate) cell: C,
}

impl<C> Series<C> {
    /// Writes the series' label block: in the declared order, or in `otel_form`, sorted by name
    /// and followed by pipetel's scope labels, as the pull endpoint's encoder writes an OTel
    /// data point. The overflow series has the single label `otel_metric_overflow="true"`.
    pub(crate) fn write_labels(&self, names: &[String], otel_form: bool, block: &mut LabelBlock<'_>) {
        if self.values.first().map(String::as_str) == Some(OVERFLOW_MARK) {
            block.raw(OVERFLOW_LABELS);
        } else if otel_form {
            let mut pairs: Vec<(&String, &String)> = names.iter().zip(self.values.iter()).collect();
            pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in pairs {
                block.pair(k, v);
            }
        } else {
            for (k, v) in names.iter().zip(self.values.iter()) {
                block.pair(k, v);
            }
        }
        if otel_form {
            block.raw(&scope_labels(None));
        }
    }
}

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
    /// Writes the family for the pull endpoint, in `format`; kinds the pull endpoint reads
    /// through OTel instruments (counters, gauges) are never asked.
    fn write_pull(family: &Family<Self>, out: &mut String, format: Format) {
        if format == Format::Text {
            Self::write(family, out);
        }
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, push_only: Option<&Meter>);
}

/// Series by label values (in the declared order of the label names).
type SeriesMap<C> = RwLock<BTreeMap<Box<[String]>, Arc<Series<C>>>>;

/// A metric family: its series by label values.
pub(crate) struct Family<C: Cell> {
    pub(crate) meta: Meta,
    pub(crate) spec: C::Spec,
    pub(crate) shared: C::Shared,
    series: SeriesMap<C>,
}

impl<C: Cell> Family<C> {
    pub(crate) fn new(meta: Meta, spec: C::Spec) -> Self {
        Family { meta, spec, shared: C::Shared::default(), series: RwLock::new(BTreeMap::new()) }
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
        let mut values: Vec<String> = Vec::with_capacity(declared.len());
        for name in declared.iter() {
            let mut found = pairs.iter().filter(|(k, _)| k == name);
            match (found.next(), found.next()) {
                (Some((_, v)), None) => values.push((*v).to_string()),
                _ => return Err(mismatch()),
            }
        }
        let mut values = values.into_boxed_slice();
        if let Some(s) = crate::sync::read(&self.series).get(&values) {
            return Ok(s.clone());
        }
        let mut map = crate::sync::write(&self.series);
        let overflow = !map.contains_key(&values) && !limits::admits(map.len(), || self.meta.exposed_name());
        if overflow {
            values = vec![OVERFLOW_MARK.to_string(); declared.len()].into_boxed_slice();
        }
        let series = map
            .entry(values.clone())
            .or_insert_with(|| {
                let attrs = if overflow {
                    limits::overflow_attributes().into()
                } else {
                    declared.iter().zip(values.iter()).map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect()
                };
                Arc::new(Series { values, attrs, cell: C::new(&self.spec) })
            })
            .clone();
        Ok(series)
    }

    pub(crate) fn each(&self, mut f: impl FnMut(&Series<C>)) {
        for s in crate::sync::read(&self.series).values() {
            f(s);
        }
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
    fn write_pull(&self, out: &mut String, format: Format) {
        C::write_pull(self, out, format);
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
    f.each(|s| {
        let mut sample = w.sample(name, "");
        s.write_labels(&f.meta.labels, false, &mut sample);
        sample.value(value(&s.cell));
    });
}

/// `builder`, an observable instrument of `family`, with the family's unit and help, observing
/// `value` of every series while the family is exported.
pub(crate) fn observing<'a, C: Cell, I>(
    family: &Arc<Family<C>>,
    builder: AsyncInstrumentBuilder<'a, I, f64>,
    value: fn(&C) -> f64,
) -> AsyncInstrumentBuilder<'a, I, f64> {
    let weak = Arc::downgrade(family);
    builder
        .with_unit(family.meta.unit.clone())
        .with_description(family.meta.help.clone())
        .with_callback(move |obs| observe_live(&weak, |s| obs.observe(value(&s.cell), &s.attrs)))
}

pub(crate) fn load_f64(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Ordering::Relaxed))
}

pub(crate) fn add_f64(a: &AtomicU64, n: f64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f64::from_bits(bits) + n).to_bits()));
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
        f.debug_struct(kind).field("name", &self.name()).field("labels", &self.series.values).finish()
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
