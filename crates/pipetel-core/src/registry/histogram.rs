//! Histograms: observations counted in fixed buckets.

use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry::metrics::{BoundHistogram, Histogram as OtelHistogram, Meter};
use opentelemetry::KeyValue;

use super::error::{invalid_option, RegistryError};
use super::family::{Cell, Family};
use super::handle::{metric_handle, Handle};
use super::kind::Kind;
use super::opts::Opts;
use super::series::Series;
use crate::exposition::exemplar::{self, Exemplars};
use crate::exposition::{bucket_index, BoundsText, LabelBlock, OwnFamily, Page, Writer};
use crate::sync::Published;
use crate::sync::{add_f64, load_f64};

pub(crate) struct HistogramCell {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    /// The family's current OTel histogram bound to this series' attributes, so an observation
    /// pays no attribute lookup; bound again when `init` replaces the histogram.
    bound: Published<BoundSeries>,
    /// The latest exemplar of each bucket (slots allocated on the first one).
    exemplars: Exemplars,
}

/// A series' bound handle on one of its family's OTel histograms (`key`: that histogram's address).
struct BoundSeries {
    key: usize,
    handle: BoundHistogram<f64>,
}

impl HistogramCell {
    /// This series' handle on `histogram`, bound on first use.
    #[inline]
    fn bound_to(&self, histogram: &OtelHistogram<f64>, attrs: impl FnOnce() -> Vec<KeyValue>) -> &BoundHistogram<f64> {
        let key = ptr::from_ref(histogram) as usize;
        match self.bound.get() {
            Some(b) if b.key == key => &b.handle,
            _ => self.bind(histogram, key, &attrs()),
        }
    }

    #[cold]
    #[inline(never)]
    fn bind(&self, histogram: &OtelHistogram<f64>, key: usize, attrs: &[KeyValue]) -> &BoundHistogram<f64> {
        &self.bound.publish_matching(|b| b.key == key, || BoundSeries { key, handle: histogram.bind(attrs) }).handle
    }

    #[inline]
    fn observe(&self, bounds: &[f64], v: f64) {
        let i = bucket_index(bounds, v);
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        add_f64(&self.sum, v);
        // Inside a sampled span (by default): this observation becomes its bucket's exemplar.
        if let Some(ids) = exemplar::current() {
            self.exemplars.record(Some(i), v, ids);
        }
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

    /// Checks bucket bounds: finite, strictly increasing, at least one.
    pub(crate) fn check_bounds(metric: &str, bounds: &[f64]) -> Result<(), RegistryError> {
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
}

impl Cell for HistogramCell {
    const KIND: Kind = Kind::Histogram;
    type Spec = Arc<[f64]>;
    fn spec(metric: &str, opts: &Opts, default_buckets: &Arc<[f64]>) -> Result<Arc<[f64]>, RegistryError> {
        let bounds: Arc<[f64]> = match &opts.buckets {
            Some(b) => Arc::from(b.as_slice()),
            None => default_buckets.clone(),
        };
        Self::check_bounds(metric, &bounds)?;
        Ok(bounds)
    }
    /// The synchronous OTel histogram push exporters read (unpublished while none would read
    /// it); superseded ones stay alive so a series that bound one can still use it.
    type Shared = Published<OtelHistogram<f64>>;
    fn new(bounds: &Arc<[f64]>) -> Self {
        HistogramCell {
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            bound: Published::default(),
            exemplars: Exemplars::new(bounds.clone()),
        }
    }
    fn reset(&self) {
        for b in self.buckets.iter() {
            b.store(0, Ordering::Relaxed);
        }
        self.sum.store(0f64.to_bits(), Ordering::Relaxed);
        self.exemplars.clear();
    }
    fn write(f: &Family<Self>, out: &mut String) {
        let name = &f.meta.name;
        let mut w = Writer::text(out);
        w.header(name, "histogram", &f.meta.help, &f.meta.unit);
        let mut labels = String::new();
        // Formatted once per family, not once per series.
        let bounds = BoundsText::of(&f.spec);
        f.each_sorted(|s| {
            labels.clear();
            s.write_labels(&f.meta.labels, false, &mut LabelBlock::new(&mut labels));
            write_series(s, &f.spec, &mut w, name, &labels, bounds.get());
        });
    }
    fn write_pull(f: &Family<Self>, page: &mut Page<'_>) {
        // As the pull endpoint's encoder writes an OTel histogram of pipetel's meter, which is
        // what this family was rendered as before it was rendered directly (its name and its
        // `# UNIT` line kept).
        let (name, help, unit) = (f.meta.name.as_str(), f.meta.help.as_str(), f.meta.unit.as_str());
        let mut family = OwnFamily::named(page.writer(), name, "histogram", help).with_unit_line(unit);
        family.header();
        let bounds = BoundsText::of(&f.spec);
        f.each(|s| {
            let o = family.series(|labels| s.write_labels(&f.meta.labels, true, labels));
            write_series(s, &f.spec, o.writer, o.name, o.labels, bounds.get());
        });
    }
    fn bind(family: Arc<Family<Self>>, _: &Meter, push_only: Option<&Meter>) {
        // Push exporters only: the pull endpoint renders the atomics directly.
        match push_only {
            Some(push_only) => {
                family.shared.publish(
                    push_only
                        .f64_histogram(family.meta.otel_name.clone())
                        .with_unit(family.meta.unit.clone())
                        .with_description(family.meta.help.clone())
                        .with_boundaries(family.spec.to_vec())
                        .build(),
                );
            }
            None => family.shared.unpublish(),
        }
    }
}

/// Writes the samples of series `s` (of a family with buckets `spec`) under `name` and the label
/// block `labels`. In OpenMetrics, each bucket carries its exemplar.
fn write_series(
    s: &Series<HistogramCell>,
    spec: &[f64],
    w: &mut Writer<'_>,
    name: &str,
    labels: &str,
    bounds: &[String],
) {
    // Counts from one read of the buckets, so `+Inf` and `_count` agree with them.
    let v = s.cell.snapshot(spec);
    let cumulative = v.buckets.iter().map(|(_, c)| *c);
    w.histogram_with(name, labels, bounds, cumulative, v.count, v.sum, |i| s.cell.exemplars.get(i));
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

metric_handle! {
    /// A histogram with fixed buckets: one series. Cheap to clone; clones are the same series.
    ///
    /// From [`Registry::histogram`](super::Registry::histogram), or per label set from a
    /// [`HistogramVec`]. Each observation goes to the registry's atomics, which
    /// [`Histogram::value`], `prometheus_text()` and the pull endpoint read (the latter renders them
    /// directly, as `_bucket{le}`, `_sum` and `_count`). Push exporters (OTLP, console) read an OTel
    /// histogram with the same buckets that observations feed too, for a registry on the global
    /// meter provider only once `init` installed a push metric exporter: with the pull endpoint
    /// alone (the default) an observation is a bucket increment and a sum update. `reset()` clears
    /// the atomics only: an OTel cumulative stream cannot be reset.
    pub struct Histogram(HistogramCell);
    /// Histograms by label values, from
    /// [`Registry::histogram_vec`](super::Registry::histogram_vec):
    /// [`HistogramVec::with`](super::MetricVec::with) gives the [`Histogram`] of one label set.
    pub type HistogramVec;
}

impl Histogram {
    /// Records one observation. NaN is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        let Handle { family, series } = &self.0;
        if v.is_nan() {
            family.meta.warn_once("a histogram cannot observe NaN");
            return;
        }
        series.cell.observe(&family.spec, v);
        if let Some(h) = family.shared.get() {
            series.cell.bound_to(h, || series.attrs(&family.meta.labels)).record(v);
        }
    }

    /// Records the time since `start`, in seconds.
    pub fn observe_since(&self, start: std::time::Instant) {
        self.observe(start.elapsed().as_secs_f64());
    }

    /// The readings.
    pub fn value(&self) -> HistogramValue {
        self.0.series.cell.snapshot(&self.0.family.spec)
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
        &self.0.family.spec
    }

    /// Resets this series (buckets, count and sum) to zero.
    pub fn reset(&self) {
        self.0.series.cell.reset();
    }

    /// Whether observations also go to an OTel histogram.
    #[cfg(test)]
    pub(crate) fn feeds_otel(&self) -> bool {
        self.0.family.shared.get().is_some()
    }
}
