//! Summaries: quantiles over a sliding time window, plus a running count and sum.
//!
//! The window is a ring of sketches ([`super::sketch`]), exact up to
//! [`EXACT_OBSERVATIONS`](super::EXACT_OBSERVATIONS) observations each, relative-error
//! histograms past that. Each of `age_buckets` sketches covers `max_age / age_buckets` of time; an observation goes
//! into the newest one, and a quantile is read from the merge of those still inside the window,
//! so the window slides in steps of `max_age / age_buckets` and covers between
//! `max_age * (age_buckets - 1) / age_buckets` and `max_age` of the most recent past.
//!
//! # Time
//! Reading even a coarse clock costs as much as the rest of an observation, so on Linux an
//! observation reads a recent time that a background thread (`pipetel-clock`, started with the
//! first summary) refreshes every 32nd of the shortest slice, between every millisecond and
//! every second; reading quantiles reads the clock itself (`CLOCK_MONOTONIC_COARSE`). The
//! window's edges are thus exact to that refresh period (a second for the default 2-minute
//! slices). A forked child, whose copy of the thread does not run, starts its own at its first
//! observation; other systems read `Instant` on every observation. The clock and its thread
//! are [`crate::sync::clock`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::Meter;
use opentelemetry::KeyValue;

use super::error::{invalid_option, RegistryError};
use super::family::{observe_live, Cell, Family};
use super::handle::metric_handle;
use super::kind::Kind;
use super::opts::Opts;
use super::series::Series;
use super::sketch::Sketch;
use crate::exposition::{unit_keeping_name, LabelBlock, MetricType, Page, Writer};
use crate::sync::{clock, SpinGuard, SpinLock};

/// The default summary quantiles.
pub const DEFAULT_QUANTILES: &[f64] = &[0.5, 0.9, 0.95, 0.99];
/// The default summary window.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(600);
/// The default number of slices the summary window slides by.
pub const DEFAULT_AGE_BUCKETS: u32 = 5;

/// Quantiles and window of a summary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SummarySpec {
    pub(crate) quantiles: Box<[f64]>,
    pub(crate) max_age: Duration,
    pub(crate) age_buckets: u32,
}

impl SummarySpec {
    /// The options' quantiles and window, checked (sorted and deduplicated quantiles).
    fn from_opts(metric: &str, opts: &Opts) -> Result<Self, RegistryError> {
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
    }
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
        // Only the copy of the window is made under the lock; observations wait for no sorting.
        let (window, count, sum) = {
            let mut state = self.lock();
            (state.window.merged(), state.count, state.sum)
        };
        let values = window.quantiles(&spec.quantiles);
        SummaryValue { quantiles: spec.quantiles.iter().copied().zip(values).collect(), count, sum }
    }
}

impl Cell for SummaryCell {
    const KIND: Kind = Kind::Summary;
    type Spec = SummarySpec;
    fn spec(metric: &str, opts: &Opts, _: &Arc<[f64]>) -> Result<SummarySpec, RegistryError> {
        SummarySpec::from_opts(metric, opts)
    }
    type Shared = ();
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
        write_family(f, Writer::text(out), true);
    }
    fn write_pull(f: &Family<Self>, page: &mut Page<'_>) {
        write_family(f, page.writer(), false);
    }
    fn bind(family: Arc<Family<Self>>, _: &Meter, push_only: Option<&Meter>) {
        // Push exporters only: the pull endpoint renders the summary directly (an exposition
        // source), which OTel instruments cannot express.
        let Some(push_only) = push_only else { return };
        // Named as the pull endpoint renders the family (`<name>{quantile}`, `<name>_sum`,
        // `<name>_count`), `_sum` and `_count` non-monotonic and a unit only where it adds no
        // word, so a collector's Prometheus translation gives the same names.
        let name = &family.meta.name;
        let unit = |n: &str, kind| unit_keeping_name(n, &family.meta.unit, kind).to_owned();
        let weak = Arc::downgrade(&family);
        let names = family.meta.labels.clone();
        let sum = format!("{name}_sum");
        let _ = push_only
            .f64_observable_up_down_counter(sum.clone())
            .with_unit(unit(&sum, MetricType::UpDownSum))
            .with_description(format!("Sum of the observations of {name}"))
            .with_callback(move |obs| observe_live(&weak, |s| obs.observe(s.cell.totals().1, &s.attrs(&names))))
            .build();
        let weak = Arc::downgrade(&family);
        let names = family.meta.labels.clone();
        let _ = push_only
            .i64_observable_up_down_counter(format!("{name}_count"))
            .with_description(format!("Observations of {name}"))
            .with_callback(move |obs| {
                observe_live(&weak, |s| {
                    obs.observe(i64::try_from(s.cell.totals().0).unwrap_or(i64::MAX), &s.attrs(&names))
                })
            })
            .build();
        let weak = Arc::downgrade(&family);
        let _ = push_only
            .f64_observable_gauge(name.clone())
            .with_unit(unit(name, MetricType::Gauge))
            .with_description(family.meta.help.clone())
            .with_callback(move |obs| {
                let Some(family) = weak.upgrade() else { return };
                if family.meta.removed.load(Ordering::Acquire) {
                    return;
                }
                family.each(|s| {
                    for (q, v) in s.cell.snapshot(&family.spec).quantiles {
                        if let Some(v) = v {
                            let mut attrs = s.attrs(&family.meta.labels);
                            attrs.push(KeyValue::new("quantile", q));
                            obs.observe(v, &attrs);
                        }
                    }
                });
            })
            .build();
    }
}

/// Writes a summary family with `w`, its series in label order when `sorted`.
fn write_family(f: &Family<SummaryCell>, mut w: Writer<'_>, sorted: bool) {
    let name = &f.meta.name;
    w.header(name, "summary", &f.meta.help, &f.meta.unit);
    let mut labels = String::new();
    let mut each = |s: &Series<SummaryCell>| {
        labels.clear();
        s.write_labels(&f.meta.labels, false, &mut LabelBlock::new(&mut labels));
        let v = s.cell.snapshot(&f.spec);
        // An empty window reads NaN, as the reference clients write it.
        let quantiles = v.quantiles.iter().map(|(q, value)| (*q, value.unwrap_or(f64::NAN)));
        w.summary(name, &labels, quantiles, v.sum, v.count);
    };
    if sorted {
        f.each_sorted(&mut each);
    } else {
        f.each(&mut each);
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

metric_handle! {
    /// A summary: quantiles over a sliding time window, plus a running count and sum; one series.
    /// Cheap to clone; clones are the same series.
    ///
    /// # Quantiles
    /// The quantile `q` of the `n` observations in the window is the observation of rank `⌈q·n⌉`
    /// (1-based, at least 1) in increasing order: the smallest observation with at least a fraction
    /// `q` of them at or below it (the nearest-rank rule, which the Prometheus Go client's summaries
    /// follow while their buffer holds every observation). Quantile 0 is the smallest observation,
    /// 1 the largest; of three observations, 0.5 is the middle one and 0.9, 0.95 and 0.99 the
    /// largest. A quantile of an empty window is `None` (`NaN` in the exposition).
    ///
    /// Quantiles are exact while no slice of the window received more than
    /// [`EXACT_OBSERVATIONS`](super::EXACT_OBSERVATIONS) observations (so at least while the window
    /// holds that many); past that, the slice's observations go into a relative-error sketch and a
    /// quantile is within [`RELATIVE_ERROR`](super::RELATIVE_ERROR) (1 %, relative) of the exact
    /// value. The slice's room for exact values is allocated with the series: an observation never
    /// allocates for it.
    ///
    /// From [`Registry::summary`](super::Registry::summary), or per label set from a
    /// [`SummaryVec`]. An observation takes a short lock (the sketch is not atomic) and, on Linux,
    /// reads the recent time a background thread keeps rather than the clock (see the
    /// [registry docs](super)); the pull endpoint renders summaries directly, push exporters get
    /// `<name>_sum` / `<name>_count` counters and a `<name>` gauge with a `quantile` attribute (for
    /// a registry on the global meter provider, once `init` installed a push metric exporter).
    pub struct Summary(SummaryCell);
    /// Summaries by label values, from [`Registry::summary_vec`](super::Registry::summary_vec):
    /// [`SummaryVec::with`](super::MetricVec::with) gives the [`Summary`] of one label set.
    pub type SummaryVec;
}

impl Summary {
    /// Records one observation. A non-finite value is refused (logged once).
    #[inline]
    pub fn observe(&self, v: f64) {
        if !v.is_finite() {
            self.0.family.meta.warn_once(&format!("a summary cannot observe {v}"));
            return;
        }
        self.0.series.cell.observe(v);
    }

    /// The readings.
    pub fn value(&self) -> SummaryValue {
        self.0.series.cell.snapshot(&self.0.family.spec)
    }

    /// The configured quantiles.
    pub fn quantiles(&self) -> &[f64] {
        &self.0.family.spec.quantiles
    }

    /// Resets this series: empties its window, zeroes count and sum.
    pub fn reset(&self) {
        self.0.series.cell.reset();
    }
}

/// A ring of sketches sliding over time.
struct Window {
    ring: Vec<Sketch>,
    head: usize,
    /// When the head sketch's slice ends, on [`clock::now_ns`]'s clock.
    head_ends: u64,
    /// The length of a slice, in nanoseconds (at least 1).
    step: u64,
}

impl Window {
    fn new(max_age: Duration, age_buckets: u32) -> Self {
        let n = age_buckets.max(1);
        let step = u64::try_from((max_age / n).as_nanos()).unwrap_or(u64::MAX).max(1);
        clock::refresh_every(step);
        Self { ring: vec![Sketch::new(); n as usize], head: 0, head_ends: clock::now_ns().saturating_add(step), step }
    }

    /// Moves the head forward past every slice that ended, clearing the sketches that leave
    /// the window.
    #[cold]
    #[inline(never)]
    fn rotate(&mut self, now: u64) {
        let len = self.ring.len();
        let mut steps = 0usize;
        while now >= self.head_ends && steps < len {
            self.head = (self.head + 1) % len;
            self.ring[self.head].clear();
            self.head_ends = self.head_ends.saturating_add(self.step);
            steps += 1;
        }
        if now >= self.head_ends {
            // Idle for longer than the whole window: everything was cleared; restart the clock.
            self.head_ends = now.saturating_add(self.step);
        }
    }

    /// Adds a finite value to the current slice.
    #[inline]
    fn observe(&mut self, v: f64) {
        let now = clock::recent();
        if now >= self.head_ends {
            self.rotate(now);
        }
        // `head` is always below the ring's length, which is at least 1.
        if let Some(s) = self.ring.get_mut(self.head) {
            s.add(v);
        }
    }

    /// The observations inside the window, in one sketch to read quantiles from.
    fn merged(&mut self) -> Sketch {
        let now = clock::now_ns();
        clock::saw(now);
        if now >= self.head_ends {
            self.rotate(now);
        }
        Sketch::merge_all(self.ring.iter().filter(|s| !s.is_empty()))
    }

    fn clear(&mut self) {
        for s in &mut self.ring {
            s.clear();
        }
        self.head_ends = clock::now_ns().saturating_add(self.step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_observations_leave_the_window() {
        let mut w = Window::new(Duration::from_millis(200), 2);
        w.observe(100.0);
        assert!(w.merged().quantiles(&[0.5])[0].is_some());
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(w.merged().quantiles(&[0.5]), vec![None]);
        w.observe(3.0);
        let q = w.merged().quantiles(&[0.5])[0].expect("one observation");
        assert!((q - 3.0).abs() <= 0.03);
        // Observations alone slide the window too (no read in between).
        w.observe(100.0);
        std::thread::sleep(Duration::from_millis(450));
        w.observe(7.0);
        assert_eq!(w.merged().quantiles(&[0.0, 1.0]), vec![Some(7.0), Some(7.0)]);
    }

    /// The nearest-rank quantile `per_mille / 1000` of `sorted`, in whole numbers.
    fn exact(sorted: &[f64], per_mille: usize) -> f64 {
        sorted[(per_mille * sorted.len()).div_ceil(1000).max(1) - 1]
    }

    #[test]
    fn a_window_of_slices_that_each_fit_their_room_reads_exact_order_statistics() {
        use super::super::sketch::EXACT_OBSERVATIONS;
        use super::super::RELATIVE_ERROR;
        // 100 ms slices in a 3 s window: both batches stay inside it whatever the scheduler does.
        let mut w = Window::new(Duration::from_secs(3), 30);
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Exponential-like latencies around 50 ms.
            -0.05 * (((state >> 11) as f64 + 1.0) / (1u64 << 53) as f64).ln()
        };
        let mut all = Vec::new();
        for batch in 0..2 {
            if batch > 0 {
                std::thread::sleep(Duration::from_millis(150));
            }
            for _ in 0..100 {
                let v = next();
                w.observe(v);
                all.push(v);
            }
        }
        // 200 observations, more than one slice's room, in two slices that each kept theirs.
        assert!(all.len() > EXACT_OBSERVATIONS);
        let per_mille: Vec<usize> = (0..=1000).collect();
        let qs: Vec<f64> = per_mille.iter().map(|i| *i as f64 / 1000.0).collect();
        let mut sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        let got = w.merged().quantiles(&qs);
        for i in &per_mille {
            assert_eq!(got[*i], Some(exact(&sorted, *i)), "q={}", qs[*i]);
        }
        // A slice past its room: estimates within the stated error.
        for _ in 0..2 * EXACT_OBSERVATIONS + 1 {
            let v = next();
            w.observe(v);
            all.push(v);
        }
        sorted = all.clone();
        sorted.sort_by(f64::total_cmp);
        let got = w.merged().quantiles(&qs);
        for i in &per_mille {
            let (got, want) = (got[*i].expect("observations"), exact(&sorted, *i));
            assert!((got - want).abs() <= RELATIVE_ERROR * want, "q={}: {got} vs {want}", qs[*i]);
        }
    }
}
