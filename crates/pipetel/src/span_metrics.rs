//! Span-derived metrics: a `tracing` layer recording the duration of every closed span.
//!
//! Users already annotate their functions with `#[tracing::instrument]`; this layer turns those
//! spans into a histogram, so "how often did it run, how long did it take, how often did it
//! fail" is on a dashboard without any metric code.
//!
//! | metric | unit | kind | attributes |
//! |---|---|---|---|
//! | [`SPAN_DURATION`] (`span.duration`) | `s` | histogram, bounds [`crate::buckets::SECONDS_BUCKETS`] | [`ATTR_SPAN_NAME`] (`span.name`), [`ATTR_SPAN_TARGET`] (`span.target`, the `tracing` target, usually the module path), [`ATTR_STATUS`] (`status`: `ok` or `error`) |
//!
//! A span's status is `error` when it recorded an `error` field (any value but `false`), an
//! `otel.status_code` field equal to `ERROR`, or an `ERROR`-level event happened directly inside
//! it (as `#[instrument(err)]` emits, and as `tracing-opentelemetry` marks the trace span);
//! `ok` otherwise.
//!
//! # Wall time or busy time
//! [`SpanTime::Wall`] (the default) is the time from the span's creation to its close: what
//! users mean by "how long it took", await points included. [`SpanTime::Busy`] sums the time
//! the span was entered, which excludes the time an async task sat waiting; it costs two more
//! clock reads per enter/exit pair.
//!
//! # Cost
//! Each callsite is resolved once: the filter and allow list are evaluated and the histogram is
//! bound to the two attribute sets (`ok` and `error`), then cached by callsite in a table read
//! without locks. An open span's timing lives in a fixed table of atomics keyed by span id, not
//! in the span's extensions, so per span the layer does a cache read, a clock read and a slot
//! claim at creation, and a slot lookup, a clock read and one record on a pre-bound histogram
//! at close: no allocation, no lock, no lookup of the span. Spans that the filter or allow list
//! leave out cost the cache read and a table probe. When more than about a thousand spans are
//! open at once, the rest keep their timing in their extensions (an allocation each) and are
//! counted all the same. A layer keeps its resolved callsites (two bound histogram handles
//! each) for the rest of the process, so a span's timing may point at them without a
//! reference count; a program builds one layer. The clock is the CPU's time-stamp counter where it is invariant (about a
//! third of the OS clock's cost per read, calibrated once against it),
//! the OS monotonic clock elsewhere.
//!
//! # A measured function's span is timed once
//! A `#[pipetel::measure]` call times its function for `function.duration`, and its span is
//! timed here for `span.duration`: the two share one pair of clock readings instead of reading
//! the clock four times. The layer hands the reading it takes at the span's creation to the call
//! (`handoff::take_start`), and the call hands the reading it takes when the function returns
//! (or panics) to the layer for the span's close (`handoff::end_while`), through two
//! thread-local cells keyed by span id (and callsite, for the start). So both metrics carry the
//! same duration for a measured call: from the span's creation to the function's return. Every
//! other span is timed as before, to its close.
//!
//! # Exemplars
//! A span's duration keeps an exemplar (its bucket's latest: the span's value, trace id and
//! span id, shown on the pull endpoint in OpenMetrics) when the exemplar filter allows it (by
//! default: the span is sampled). The ids are read from the current OpenTelemetry context the
//! first time the span is entered, after the trace bridge made it current (this layer must
//! come after the bridge, as `init` and `pipetel::layers` stack them); a span never entered
//! keeps none. While the filter is `always_off` an enter costs what it did without exemplars.
//!
//! # Which spans count
//! Only spans that reach the layer: the subscriber's global filter (`RUST_LOG`) applies first.
//! Then [`SpanMetricsConfig::filter`] (a [`Targets`] directive such as `info,hyper=off`) and
//! [`SpanMetricsConfig::allow`] (exact span names; empty means all) narrow them, so a chatty
//! library's spans do not flood the metrics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use opentelemetry::metrics::{BoundHistogram, Histogram, Meter};
use opentelemetry::KeyValue;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::ExemplarFilter;
use crate::exposition::exemplar::{self, Exemplars, SpanIds};
use crate::exposition::native::Native;
use crate::sync::{ticks_to_seconds, StaticCell};

/// Histogram of closed spans' durations, in seconds.
pub const SPAN_DURATION: &str = "span.duration";
/// [`SPAN_DURATION`]'s description.
const DESCRIPTION: &str = "Duration of closed tracing spans";
/// Attribute: the span's name.
pub const ATTR_SPAN_NAME: &str = "span.name";
/// Attribute: the span's `tracing` target (the module path unless the span set one).
pub const ATTR_SPAN_TARGET: &str = "span.target";
/// Attribute: `ok` or `error`.
pub const ATTR_STATUS: &str = "status";

pub use crate::config::{SpanMetricsConfig, SpanMetricsError, SpanTime};

/// Builds the layer `init` installs: `None` when the configuration disables it. With
/// `pull_only` (no push exporter installed) its histograms are rendered by the pull endpoint
/// from atomics ([`SpanMetricsLayer::for_pull_endpoint`]), else they are `meter`'s.
///
/// # Errors
/// As [`SpanMetricsConfig::validate`].
pub(crate) fn layer(
    config: &SpanMetricsConfig,
    meter: &Meter,
    pull_only: bool,
) -> Result<Option<SpanMetricsLayer>, SpanMetricsError> {
    if !config.enabled {
        return Ok(None);
    }
    if pull_only {
        SpanMetricsLayer::for_pull_endpoint(config).map(Some)
    } else {
        SpanMetricsLayer::new(config, meter).map(Some)
    }
}

/// The span-metrics `tracing` layer; see the [module documentation](self).
///
/// Needs a subscriber with span storage (`tracing_subscriber::registry()`).
pub struct SpanMetricsLayer {
    /// The OTel histogram callsites bind to; `None` for a layer whose callsites keep their
    /// histograms in atomics for the pull endpoint ([`SpanMetricsLayer::for_pull_endpoint`]).
    histogram: Option<Histogram<f64>>,
    targets: Targets,
    allow: Vec<String>,
    busy: bool,
    sites: SiteCache,
    open: OpenSpans,
    /// Spans whose timing went to their extensions and has not been read at close yet: while
    /// zero, a span missing from the table is one that does not count, with nothing to look up.
    boxed: AtomicUsize,
    /// [`crate::clock`].
    clock: &'static quanta::Clock,
}

impl Drop for SpanMetricsLayer {
    fn drop(&mut self) {
        handoff::LAYERS.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for SpanMetricsLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanMetricsLayer")
            .field("targets", &self.targets)
            .field("allow", &self.allow)
            .field("busy", &self.busy)
            .finish_non_exhaustive()
    }
}

/// What is resolved once per callsite.
#[derive(Debug)]
struct Site {
    ok: Series,
    error: Series,
    /// The callsite declares `error` or `otel.status_code`, so records must be looked at.
    status_fields: bool,
    /// The span's name and target (the series' labels).
    name: &'static str,
    target: &'static str,
}

/// One `span.duration` series of a callsite.
#[derive(Debug)]
enum Series {
    /// An OTel histogram bound to the series' attributes, with the exemplars the pull
    /// endpoint's encoder finds for it.
    Otel(BoundHistogram<f64>, Arc<Exemplars>),
    /// The series' own atomics, rendered by the pull endpoint (see [`native`]).
    Native(Native),
}

impl Series {
    /// Records a span that lasted `ticks` clock readings and ended at reading `end`, with its
    /// exemplar's ids.
    #[inline]
    fn record(&self, ticks: u64, end: u64, ids: Option<SpanIds>) {
        match self {
            Series::Otel(histogram, exemplars) => {
                let seconds = ticks_to_seconds(ticks);
                histogram.record(seconds);
                if let Some(ids) = ids {
                    exemplars.record_at(None, seconds, ids, end);
                }
            }
            Series::Native(h) => {
                let bucket = h.record_ticks(ticks);
                if let Some(ids) = ids {
                    h.exemplars().record_at(Some(bucket), ticks_to_seconds(ticks), ids, end);
                }
            }
        }
    }
}

/// The pull endpoint's rendering of the callsites whose series are [`Series::Native`].
pub(crate) mod native {
    use std::sync::{Arc, Mutex, OnceLock};

    use super::{Series, Site, SPAN_DURATION};
    use crate::exposition::{BoundsText, ExpositionSource, MetricType, OwnFamily, Page};

    /// Every native callsite resolved so far, in resolution order.
    static SITES: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

    /// Adds `site` to what the pull endpoint renders, when its series are native.
    pub(super) fn add(site: &'static Site) {
        if !matches!(site.ok, Series::Native(_)) {
            return;
        }
        static SOURCE: OnceLock<Arc<dyn ExpositionSource>> = OnceLock::new();
        SOURCE.get_or_init(|| {
            let source: Arc<dyn ExpositionSource> = Arc::new(Source);
            crate::exposition::add_exposition_source(&source);
            source
        });
        crate::sync::lock(&SITES).push(site);
    }

    struct Source;

    impl ExpositionSource for Source {
        fn write_exposition(&self, page: &mut Page<'_>) {
            let sites: Vec<&'static Site> = crate::sync::lock(&SITES).clone();
            write(&sites, page);
        }
    }

    /// Writes `span.duration` for `sites` as the pull endpoint's encoder writes the OTel
    /// histogram: labels `span_name`, `span_target`, `status` (sorted) and pipetel's scope.
    pub(super) fn write(sites: &[&'static Site], page: &mut Page<'_>) {
        let series = |site: &'static Site| {
            [(&site.ok, "ok"), (&site.error, "error")].into_iter().filter_map(move |(series, status)| match series {
                Series::Native(h) => Some((site, h, status)),
                _ => None,
            })
        };
        let mut all = sites.iter().flat_map(|s| series(s)).peekable();
        let Some((_, first, _)) = all.peek() else { return };
        let bounds = BoundsText::of(first.bounds());
        let mut family = OwnFamily::new(page.writer(), SPAN_DURATION, "s", MetricType::Histogram, super::DESCRIPTION);
        for (site, h, status) in all {
            let s = family.series(|labels| {
                labels.pair("span_name", site.name).pair("span_target", site.target).pair("status", status);
            });
            h.write(s.writer, s.name, s.labels, bounds.get());
        }
    }
}

impl SpanMetricsLayer {
    /// A layer recording into `meter`'s [`SPAN_DURATION`] histogram (it ignores
    /// [`SpanMetricsConfig::enabled`]: not installing it is how to disable it).
    ///
    /// # Errors
    /// As [`SpanMetricsConfig::validate`].
    pub fn new(config: &SpanMetricsConfig, meter: &Meter) -> Result<Self, SpanMetricsError> {
        let histogram = meter
            .f64_histogram(SPAN_DURATION)
            .with_unit("s")
            .with_description(DESCRIPTION)
            .with_boundaries(crate::buckets::SECONDS_BUCKETS.to_vec())
            .build();
        Self::with(config, Some(histogram))
    }

    /// A layer whose histograms live in its callsites' own atomics and are rendered by pipetel's
    /// pull endpoint alone, with no OTel instrument (push exporters do not see them): what
    /// `init` builds when it installs no push metric exporter, and what a subscriber of your own
    /// can use beside an `init` that serves the pull endpoint only. A span's close then costs a
    /// bucket scan and two atomic adds instead of the SDK's histogram record. The page shows
    /// `span_duration_seconds` exactly as it shows the OTel histogram.
    ///
    /// # Errors
    /// As [`SpanMetricsConfig::validate`].
    pub fn for_pull_endpoint(config: &SpanMetricsConfig) -> Result<Self, SpanMetricsError> {
        Self::with(config, None)
    }

    fn with(config: &SpanMetricsConfig, histogram: Option<Histogram<f64>>) -> Result<Self, SpanMetricsError> {
        config.validate()?;
        handoff::LAYERS.fetch_add(1, Ordering::Relaxed);
        Ok(SpanMetricsLayer {
            histogram,
            targets: config.targets()?,
            allow: config.allow.iter().map(|n| n.trim().to_string()).collect(),
            busy: config.time == SpanTime::Busy,
            sites: SiteCache::default(),
            open: OpenSpans::new(),
            boxed: AtomicUsize::new(0),
            clock: crate::sync::clock(),
        })
    }

    /// A raw reading of the layer's clock: what the open-span table stores (ticks, converted to
    /// nanoseconds only when a span closes).
    #[inline]
    fn now(&self) -> u64 {
        self.clock.raw()
    }

    /// The callsite's resolved entry, `None` when its spans do not count.
    #[inline]
    fn site(&self, meta: &'static Metadata<'static>) -> Option<&'static Site> {
        self.sites.get(meta, |meta| self.resolve(meta))
    }

    fn resolve(&self, meta: &'static Metadata<'static>) -> Option<Site> {
        if !self.targets.would_enable(meta.target(), meta.level()) {
            return None;
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|n| n == meta.name()) {
            return None;
        }
        let attrs = |status: &'static str| {
            [
                KeyValue::new(ATTR_SPAN_NAME, meta.name()),
                KeyValue::new(ATTR_SPAN_TARGET, meta.target()),
                KeyValue::new(ATTR_STATUS, status),
            ]
        };
        let series = |status: &'static str| match &self.histogram {
            Some(histogram) => Series::Otel(
                histogram.bind(&attrs(status)),
                exemplar::register(SPAN_DURATION, &attrs(status), crate::buckets::SECONDS_BUCKETS),
            ),
            None => Series::Native(Native::new(crate::buckets::SECONDS_BUCKETS, true)),
        };
        let fields = meta.fields();
        Some(Site {
            ok: series("ok"),
            error: series("error"),
            status_fields: fields.field("error").is_some() || fields.field("otel.status_code").is_some(),
            name: meta.name(),
            target: meta.target(),
        })
    }

    /// Runs `f` on the span's timing, wherever it is kept.
    fn with_timing<S>(&self, id: &Id, ctx: &Context<'_, S>, f: impl FnOnce(TimingRef<'_>))
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(slot) = self.open.find(id.into_u64()) {
            f(TimingRef::Slot(slot));
            return;
        }
        if self.boxed.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(timing) = extensions.get_mut::<Timing>() {
            f(TimingRef::Boxed(timing));
        }
    }
}

impl<S> Layer<S> for SpanMetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(site) = self.site(attrs.metadata()) else { return };
        let failed = site.status_fields && {
            let mut status = StatusVisitor(None);
            attrs.record(&mut status);
            status.0.unwrap_or(false)
        };
        let start = self.now();
        handoff::offer_start(id.into_u64(), attrs.metadata(), start);
        if self.open.insert(id.into_u64(), site, start, failed) {
            return;
        }
        // The table is full (thousands of spans open at once): the span's extensions hold it.
        let Some(span) = ctx.span(id) else { return };
        let timing =
            Timing { site, start, busy: 0, entered_at: 0, depth: 0, failed: AtomicBool::new(failed), ids: None };
        // `replace`, not `insert`: a second copy of this layer must not make the first panic.
        if span.extensions_mut().replace(timing).is_none() {
            self.boxed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.with_timing(id, &ctx, |timing| {
            if timing.site().is_some_and(|site| site.status_fields) {
                let mut status = StatusVisitor(None);
                values.record(&mut status);
                if let Some(failed) = status.0 {
                    timing.failed().store(failed, Ordering::Relaxed);
                }
            }
        });
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() != Level::ERROR {
            return;
        }
        let Some(span) = ctx.event_span(event) else { return };
        self.with_timing(&span.id(), &ctx, |timing| timing.failed().store(true, Ordering::Relaxed));
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let exemplars = exemplar::filter() != ExemplarFilter::AlwaysOff;
        if !self.busy && !exemplars {
            return;
        }
        let now = if self.busy { self.now() } else { 0 };
        self.with_timing(id, &ctx, |mut timing| {
            if exemplars {
                timing.capture_ids();
            }
            if self.busy {
                timing.enter(now);
            }
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.busy {
            return;
        }
        let now = self.now();
        self.with_timing(id, &ctx, |timing| timing.exit(now));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let key = id.into_u64();
        let now = handoff::end_of(key).unwrap_or_else(|| self.now());
        let reading = match self.open.find(key) {
            Some(slot) => {
                let reading = Reading::from(TimingRef::Slot(slot), now, self.busy);
                self.open.remove(slot);
                reading
            }
            None => {
                if self.boxed.load(Ordering::Relaxed) == 0 {
                    return;
                }
                let Some(span) = ctx.span(&id) else { return };
                let mut extensions = span.extensions_mut();
                let Some(mut timing) = extensions.remove::<Timing>() else { return };
                self.boxed.fetch_sub(1, Ordering::Relaxed);
                Reading::from(TimingRef::Boxed(&mut timing), now, self.busy)
            }
        };
        let Some(site) = reading.site else { return };
        let series = if reading.failed { &site.error } else { &site.ok };
        series.record(reading.ticks, now, reading.ids);
    }
}

/// The clock readings a measured call and this layer share (see the module docs): two
/// thread-local cells, each valid only for the span whose id (and, for the start, callsite) it
/// names, so a reading can never be taken by another span.
pub(crate) mod handoff {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing::Metadata;

    thread_local! {
        /// `(span id, callsite metadata address, raw clock reading)` of the span the layer
        /// created last on this thread; zeros when none is offered.
        static START: Cell<(u64, usize, u64)> = const { Cell::new((0, 0, 0)) };
        /// `(span id, raw clock reading)` of the span a measured call is closing now.
        static END: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    /// Span-metrics layers alive: while none is, a measured call skips the handoff.
    pub(super) static LAYERS: AtomicUsize = AtomicUsize::new(0);

    /// Whether a span-metrics layer exists to share readings with.
    #[inline]
    pub(crate) fn active() -> bool {
        LAYERS.load(Ordering::Relaxed) != 0
    }

    /// The layer created span `id` of callsite `meta` and read the clock at `ticks`.
    #[inline]
    pub(super) fn offer_start(id: u64, meta: &'static Metadata<'static>, ticks: u64) {
        START.with(|cell| cell.set((id, std::ptr::from_ref(meta) as usize, ticks)));
    }

    /// The creation reading of span `id` of callsite `meta` when the layer timed it, taken
    /// (a second call gets `None`). A measured call asks right after creating its span.
    #[inline]
    pub(crate) fn take_start(id: u64, meta: &'static Metadata<'static>) -> Option<u64> {
        START.with(|cell| {
            let (offered, at, ticks) = cell.get();
            if id == 0 || offered != id || at != std::ptr::from_ref(meta) as usize {
                return None;
            }
            cell.set((0, 0, 0));
            Some(ticks)
        })
    }

    /// Runs `close` (which drops span `id`) with `ticks` as the span's end for the layer.
    #[inline]
    pub(crate) fn end_while(id: u64, ticks: u64, close: impl FnOnce()) {
        END.with(|cell| cell.set((id, ticks)));
        close();
        END.with(|cell| cell.set((0, 0)));
    }

    /// The end reading handed over for span `id`, if it is closing inside [`end_while`].
    #[inline]
    pub(super) fn end_of(id: u64) -> Option<u64> {
        END.with(|cell| {
            let (closing, ticks) = cell.get();
            (closing == id && id != 0).then_some(ticks)
        })
    }
}

/// A closed span's numbers.
struct Reading {
    site: Option<&'static Site>,
    /// Clock ticks (see [`SpanMetricsLayer::now`]).
    ticks: u64,
    failed: bool,
    /// The ids its exemplar carries, when it keeps one.
    ids: Option<SpanIds>,
}

impl Reading {
    fn from(timing: TimingRef<'_>, now: u64, busy: bool) -> Self {
        let ticks = if busy {
            let (total, depth, entered_at) = timing.busy_state();
            if depth > 0 {
                total.saturating_add(now.saturating_sub(entered_at))
            } else {
                total
            }
        } else {
            now.saturating_sub(timing.start())
        };
        Reading { site: timing.site(), ticks, failed: timing.failed().load(Ordering::Relaxed), ids: timing.ids() }
    }
}

/// A span's timing in the spans' extensions, when the open-span table was full at its creation.
struct Timing {
    site: &'static Site,
    start: u64,
    busy: u64,
    entered_at: u64,
    depth: u32,
    failed: AtomicBool,
    /// The exemplar's ids, once captured.
    ids: Option<SpanIds>,
}

/// A span's timing, in the table or in its extensions.
enum TimingRef<'a> {
    Slot(&'a Slot),
    Boxed(&'a mut Timing),
}

impl TimingRef<'_> {
    fn site(&self) -> Option<&'static Site> {
        match self {
            TimingRef::Slot(s) => s.site.get(),
            TimingRef::Boxed(t) => Some(t.site),
        }
    }

    fn start(&self) -> u64 {
        match self {
            TimingRef::Slot(s) => s.start.load(Ordering::Relaxed),
            TimingRef::Boxed(t) => t.start,
        }
    }

    fn failed(&self) -> &AtomicBool {
        match self {
            TimingRef::Slot(s) => &s.failed,
            TimingRef::Boxed(t) => &t.failed,
        }
    }

    /// `(busy so far, entry depth, when the outermost entry began)`.
    fn busy_state(&self) -> (u64, u32, u64) {
        match self {
            TimingRef::Slot(s) => {
                (s.busy.load(Ordering::Relaxed), s.depth.load(Ordering::Relaxed), s.entered_at.load(Ordering::Relaxed))
            }
            TimingRef::Boxed(t) => (t.busy, t.depth, t.entered_at),
        }
    }

    /// On an enter: keeps the ids of the current span for the exemplar, the first time the
    /// filter allows it.
    #[inline]
    fn capture_ids(&mut self) {
        match self {
            TimingRef::Slot(s) => {
                if s.exemplar.load(Ordering::Relaxed) == 0 {
                    if let Some(ids) = exemplar::current() {
                        s.trace_hi.store((ids.trace_id >> 64) as u64, Ordering::Relaxed);
                        s.trace_lo.store(ids.trace_id as u64, Ordering::Relaxed);
                        s.span_id.store(ids.span_id, Ordering::Relaxed);
                        s.exemplar.store(1, Ordering::Release);
                    }
                }
            }
            TimingRef::Boxed(t) => {
                if t.ids.is_none() {
                    t.ids = exemplar::current();
                }
            }
        }
    }

    /// The ids captured for the exemplar.
    fn ids(&self) -> Option<SpanIds> {
        match self {
            TimingRef::Slot(s) => (s.exemplar.load(Ordering::Acquire) == 1).then(|| SpanIds {
                trace_id: (u128::from(s.trace_hi.load(Ordering::Relaxed)) << 64)
                    | u128::from(s.trace_lo.load(Ordering::Relaxed)),
                span_id: s.span_id.load(Ordering::Relaxed),
            }),
            TimingRef::Boxed(t) => t.ids,
        }
    }

    fn enter(self, now: u64) {
        match self {
            TimingRef::Slot(s) => {
                if s.depth.fetch_add(1, Ordering::Relaxed) == 0 {
                    s.entered_at.store(now, Ordering::Relaxed);
                }
            }
            TimingRef::Boxed(t) => {
                if t.depth == 0 {
                    t.entered_at = now;
                }
                t.depth = t.depth.saturating_add(1);
            }
        }
    }

    fn exit(self, now: u64) {
        match self {
            TimingRef::Slot(s) => {
                let was = s.depth.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| Some(d.saturating_sub(1)));
                if was == Ok(1) {
                    s.busy.fetch_add(now.saturating_sub(s.entered_at.load(Ordering::Relaxed)), Ordering::Relaxed);
                }
            }
            TimingRef::Boxed(t) => {
                t.depth = t.depth.saturating_sub(1);
                if t.depth == 0 {
                    t.busy = t.busy.saturating_add(now.saturating_sub(t.entered_at));
                }
            }
        }
    }
}

/// Slots in the open-span table; more spans open at once go to their extensions.
const OPEN_SLOTS: usize = crate::sync::SPAN_TABLE_SLOTS;
/// Slots a lookup or an insertion probes before giving up.
const PROBES: usize = 16;
const EMPTY: u64 = 0;
const FREED: u64 = u64::MAX;

/// One open span: its id (or [`EMPTY`] / [`FREED`]) and timing. A cache line of its own, so
/// threads timing different spans do not contend.
#[repr(align(64))]
#[derive(Default)]
struct Slot {
    id: AtomicU64,
    site: StaticCell<Site>,
    start: AtomicU64,
    busy: AtomicU64,
    entered_at: AtomicU64,
    depth: AtomicU32,
    failed: AtomicBool,
    /// 1 once the exemplar's ids below are captured.
    exemplar: AtomicU8,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    span_id: AtomicU64,
}

/// The timing of open spans, keyed by span id: a fixed open-addressing table of atomics, so
/// timing a span costs a few uncontended atomic operations instead of an allocation in the
/// span's extensions and a lookup of the span at its close. A span's id stays unique while it
/// is open, and its slot is freed at its close, before the id can be reused.
struct OpenSpans {
    slots: Box<[Slot]>,
}

impl OpenSpans {
    fn new() -> Self {
        OpenSpans { slots: (0..OPEN_SLOTS).map(|_| Slot::default()).collect() }
    }

    #[inline]
    fn home(key: u64) -> usize {
        crate::sync::span_table_home(key)
    }

    /// Claims a slot for `key`; `false` when none was free within [`PROBES`].
    #[inline]
    fn insert(&self, key: u64, site: &'static Site, start: u64, failed: bool) -> bool {
        if key == EMPTY || key == FREED {
            return false;
        }
        let home = Self::home(key);
        for i in 0..PROBES {
            let slot = &self.slots[(home + i) % OPEN_SLOTS];
            let current = slot.id.load(Ordering::Relaxed);
            if current != EMPTY && current != FREED {
                continue;
            }
            if slot.id.compare_exchange(current, key, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                slot.site.set(Some(site));
                slot.start.store(start, Ordering::Relaxed);
                slot.busy.store(0, Ordering::Relaxed);
                slot.entered_at.store(0, Ordering::Relaxed);
                slot.depth.store(0, Ordering::Relaxed);
                slot.failed.store(failed, Ordering::Relaxed);
                slot.exemplar.store(0, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    #[inline]
    fn find(&self, key: u64) -> Option<&Slot> {
        let home = Self::home(key);
        for i in 0..PROBES {
            let slot = &self.slots[(home + i) % OPEN_SLOTS];
            match slot.id.load(Ordering::Acquire) {
                id if id == key => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    #[inline]
    fn remove(&self, slot: &Slot) {
        slot.id.store(FREED, Ordering::Release);
    }
}

/// Resolved callsites, keyed by their metadata's address: a fixed table read without locks,
/// written under `writer`'s lock; callsites beyond it go to `overflow`. Sites are leaked: they
/// live for the rest of the process (see the module docs).
struct SiteCache {
    keys: Box<[AtomicUsize]>,
    /// The site of the callsite whose key is in the same slot; none for a callsite whose spans
    /// do not count.
    values: Box<[StaticCell<Site>]>,
    writer: Mutex<()>,
    overflow: RwLock<HashMap<usize, Option<&'static Site>>>,
}

const SITE_SLOTS: usize = 512;

impl Default for SiteCache {
    fn default() -> Self {
        SiteCache {
            keys: (0..SITE_SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            values: (0..SITE_SLOTS).map(|_| StaticCell::new()).collect(),
            writer: Mutex::new(()),
            overflow: RwLock::new(HashMap::new()),
        }
    }
}

impl SiteCache {
    #[inline]
    fn get(
        &self,
        meta: &'static Metadata<'static>,
        resolve: impl FnOnce(&'static Metadata<'static>) -> Option<Site>,
    ) -> Option<&'static Site> {
        let key = std::ptr::from_ref(meta) as usize;
        let home = crate::sync::spread(key as u64) % SITE_SLOTS;
        for i in 0..PROBES {
            let at = (home + i) % SITE_SLOTS;
            match self.keys[at].load(Ordering::Acquire) {
                k if k == key => return self.values[at].get(),
                0 => break,
                _ => {}
            }
        }
        self.get_slow(key, meta, resolve)
    }

    #[cold]
    #[inline(never)]
    fn get_slow(
        &self,
        key: usize,
        meta: &'static Metadata<'static>,
        resolve: impl FnOnce(&'static Metadata<'static>) -> Option<Site>,
    ) -> Option<&'static Site> {
        if let Some(site) = crate::sync::read(&self.overflow).get(&key) {
            return *site;
        }
        let writer = crate::sync::lock(&self.writer);
        // Another thread may have resolved it meanwhile.
        let home = crate::sync::spread(key as u64) % SITE_SLOTS;
        let mut free = None;
        for i in 0..PROBES {
            let at = (home + i) % SITE_SLOTS;
            match self.keys[at].load(Ordering::Acquire) {
                k if k == key => return self.values[at].get(),
                0 => {
                    free = Some(at);
                    break;
                }
                _ => {}
            }
        }
        if let Some(site) = crate::sync::read(&self.overflow).get(&key) {
            return *site;
        }
        let site: Option<&'static Site> = resolve(meta).map(|site| &*Box::leak(Box::new(site)));
        if let Some(site) = site {
            native::add(site);
        }
        match free {
            Some(at) => {
                // The value first: a reader that sees the key must see it.
                self.values[at].set(site);
                self.keys[at].store(key, Ordering::Release);
            }
            None => {
                crate::sync::write(&self.overflow).insert(key, site);
            }
        }
        drop(writer);
        site
    }
}

/// Reads the status fields: `Some(true)` failed, `Some(false)` explicitly not, `None` silent.
struct StatusVisitor(Option<bool>);

impl Visit for StatusVisitor {
    fn record_bool(&mut self, field: &Field, value: bool) {
        match field.name() {
            "error" => self.0 = Some(value),
            "otel.status_code" => {}
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "error" => self.0 = Some(true),
            "otel.status_code" => self.0 = Some(value.eq_ignore_ascii_case("error")),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "error" => self.0 = Some(true),
            "otel.status_code" => {
                self.0 = Some(format!("{value:?}").trim_matches('"').eq_ignore_ascii_case("error"));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer for the pull endpoint renders `span_duration_seconds` as the encoder renders
    /// the OTel histogram of the same spans: same family, labels, buckets and count; the sum to
    /// within a nanosecond per span (durations are summed as clock readings).
    #[cfg(feature = "prometheus")]
    #[test]
    fn native_span_durations_render_as_the_encoder_renders_otel_ones() {
        use opentelemetry::metrics::MeterProvider as _;
        use opentelemetry_sdk::metrics::SdkMeterProvider;
        use tracing_subscriber::layer::SubscriberExt as _;

        let reader = crate::export::prometheus::PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
        let config = SpanMetricsConfig::default();
        let otel = SpanMetricsLayer::new(&config, &provider.meter(crate::installed::SCOPE_NAME)).expect("layer");
        let native = SpanMetricsLayer::for_pull_endpoint(&config).expect("layer");
        // Each layer reads the clock itself: record the same readings into both by hand,
        // through the sites each resolves for the same callsites.
        let subscriber = tracing_subscriber::registry();
        let dispatch = tracing::Dispatch::new(subscriber.with(tracing_subscriber::layer::Identity::new()));
        let (ok_meta, err_meta) = tracing::dispatcher::with_default(&dispatch, || {
            let ok = tracing::info_span!("native_parity_ok");
            let err = tracing::info_span!(target: "parity::t\"q", "native_parity_err", error = true);
            (ok.metadata().expect("meta"), err.metadata().expect("meta"))
        });
        let rate = crate::sync::ticks_per_second();
        let mut native_sites = Vec::new();
        for (meta, failed, seconds) in
            [(ok_meta, false, [0.0002, 0.03, 0.03, 4.0].as_slice()), (err_meta, true, [12.5, 0.7].as_slice())]
        {
            let (a, b) = (otel.site(meta).expect("site"), native.site(meta).expect("site"));
            native_sites.push(b);
            for s in seconds {
                let ticks = (s * rate) as u64;
                let pick = |site: &'static Site| if failed { &site.error } else { &site.ok };
                pick(a).record(ticks, 0, None);
                pick(b).record(ticks, 0, None);
            }
        }
        let split = |text: &str| -> (Vec<String>, Vec<f64>) {
            let lines: Vec<&str> = text.lines().filter(|l| l.contains("span_duration")).collect();
            let sums = lines
                .iter()
                .filter(|l| l.starts_with("span_duration_seconds_sum"))
                .map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("sum"));
            let rest = lines.iter().filter(|l| !l.starts_with("span_duration_seconds_sum")).map(|l| l.to_string());
            (rest.collect(), sums.collect())
        };
        for format in [crate::exposition::Format::Text, crate::exposition::Format::OpenMetrics] {
            let encoded = reader.encode_for_tests(format);
            let mut ours = String::new();
            native::write(&native_sites, &mut crate::exposition::Page::new(&mut ours, format));
            let (mut want, want_sums) = split(&encoded);
            let (mut got, got_sums) = split(&ours);
            // The SDK writes its series in hash order; the endpoint in resolution order.
            want.sort();
            got.sort();
            assert!(want.len() > 2 * crate::buckets::SECONDS_BUCKETS.len(), "{encoded}");
            assert_eq!(got, want, "{format:?}\n{ours}\n{encoded}");
            let (mut want_sums, mut got_sums) = (want_sums, got_sums);
            want_sums.sort_by(f64::total_cmp);
            got_sums.sort_by(f64::total_cmp);
            assert_eq!(got_sums.len(), 4, "ok and error series of two callsites");
            for (g, w) in got_sums.iter().zip(&want_sums) {
                assert!((g - w).abs() < 1e-8, "{g} vs {w}");
            }
        }
    }

    #[test]
    fn config_validates() {
        assert!(SpanMetricsConfig::default().validate().is_ok());
        assert!(SpanMetricsConfig::default().with_filter("info,hyper=off").validate().is_ok());
        assert!(matches!(
            SpanMetricsConfig::default().with_filter("=-=nope").validate(),
            Err(SpanMetricsError::InvalidFilter { .. })
        ));
        assert_eq!(SpanMetricsConfig::default().with_allow([" "]).validate(), Err(SpanMetricsError::EmptySpanName));
    }

    #[test]
    fn allow_list_and_time_parse() {
        assert_eq!(SpanMetricsConfig::parse_allow(" a, b,,c "), ["a", "b", "c"]);
        assert_eq!("Busy".parse::<SpanTime>(), Ok(SpanTime::Busy));
        assert!("cpu".parse::<SpanTime>().is_err());
    }
}
