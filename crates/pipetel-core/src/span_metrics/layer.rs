//! The layer: which spans count, and what it does on each of a span's events.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use opentelemetry::metrics::{Histogram, Meter};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::cache::SiteCache;
use super::handoff;
use super::names::SPAN_DURATION;
use super::site::{Series, Site};
use super::timing::{OpenSpans, Reading, Timing, TimingRef};
use crate::exposition::exemplar;
use crate::settings::{ExemplarFilter, SpanMetricsConfig, SpanMetricsError, SpanTime};

/// Builds the layer `init` installs: `None` when the configuration disables it. With
/// `pull_only` (no push exporter installed) its histograms are rendered by the pull endpoint
/// from atomics ([`SpanMetricsLayer::for_pull_endpoint`]), else they are `meter`'s.
///
/// # Errors
/// As [`SpanMetricsConfig::validate`].
pub fn layer(
    config: &SpanMetricsConfig,
    meter: &Meter,
    pull_only: bool,
) -> Result<Option<SpanMetricsLayer>, SpanMetricsError> {
    if !config.enabled {
        return Ok(None);
    }
    let layer =
        if pull_only { SpanMetricsLayer::for_pull_endpoint(config)? } else { SpanMetricsLayer::new(config, meter)? };
    // Spans made outside `tracing` (Python's) are timed with the same histogram and filters.
    super::foreign::install(layer.histogram.clone(), layer.targets.clone(), layer.allow.clone());
    Ok(Some(layer))
}

/// The span-metrics `tracing` layer; see the [module documentation](super).
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
    /// [`crate::sync::clock`].
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

impl SpanMetricsLayer {
    /// A layer recording into `meter`'s [`SPAN_DURATION`] histogram (it ignores
    /// [`SpanMetricsConfig::enabled`]: not installing it is how to disable it).
    ///
    /// # Errors
    /// As [`SpanMetricsConfig::validate`].
    pub fn new(config: &SpanMetricsConfig, meter: &Meter) -> Result<Self, SpanMetricsError> {
        let histogram = crate::families::span::DURATION
            .describe(meter.f64_histogram(SPAN_DURATION))
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
    pub(super) fn site(&self, meta: &'static Metadata<'static>) -> Option<&'static Site> {
        self.sites.get(meta, |meta| self.resolve(meta))
    }

    fn resolve(&self, meta: &'static Metadata<'static>) -> Option<Site> {
        if !self.targets.would_enable(meta.target(), meta.level()) {
            return None;
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|n| n == meta.name()) {
            return None;
        }
        let series = |status| Series::of(self.histogram.as_ref(), meta.name(), meta.target(), status);
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
        if self.open.insert(id.into_u64(), |slot| slot.open(site, start, failed)) {
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
