//! Span-derived metrics: a `tracing` layer recording the duration of every closed span.
//!
//! Users already annotate their functions with `#[tracing::instrument]`; this layer turns those
//! spans into a histogram, so "how often did it run, how long did it take, how often did it
//! fail" is on a dashboard without any metric code.
//!
//! | metric | unit | kind | attributes |
//! |---|---|---|---|
//! | [`SPAN_DURATION`] (`span.duration`) | `s` | histogram, bounds [`crate::SECONDS_BUCKETS`] | [`ATTR_SPAN_NAME`] (`span.name`), [`ATTR_SPAN_TARGET`] (`span.target`, the `tracing` target, usually the module path), [`ATTR_STATUS`] (`status`: `ok` or `error`) |
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
//! bound to the two attribute sets (`ok` and `error`), then cached by callsite. Per span the layer
//! does a cache read, a clock read at creation, a clock read and one record on a pre-bound
//! histogram at close (no attribute lookup). Spans that the filter or allow list leave out cost
//! the cache read only.
//!
//! # Which spans count
//! Only spans that reach the layer: the subscriber's global filter (`RUST_LOG`) applies first.
//! Then [`SpanMetricsConfig::filter`] (a [`Targets`] directive such as `info,hyper=off`) and
//! [`SpanMetricsConfig::allow`] (exact span names; empty means all) narrow them, so a chatty
//! library's spans do not flood the metrics.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use opentelemetry::metrics::{BoundHistogram, Histogram, Meter};
use opentelemetry::KeyValue;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Histogram of closed spans' durations, in seconds.
pub const SPAN_DURATION: &str = "span.duration";
/// Attribute: the span's name.
pub const ATTR_SPAN_NAME: &str = "span.name";
/// Attribute: the span's `tracing` target (the module path unless the span set one).
pub const ATTR_SPAN_TARGET: &str = "span.target";
/// Attribute: `ok` or `error`.
pub const ATTR_STATUS: &str = "status";

/// Which duration of a span the histogram records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanTime {
    /// Creation to close, await points included (the default).
    #[default]
    Wall,
    /// The sum of the intervals the span was entered.
    Busy,
}

impl FromStr for SpanTime {
    type Err = SpanMetricsError;

    /// `wall` or `busy` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "wall" => Ok(SpanTime::Wall),
            "busy" => Ok(SpanTime::Busy),
            _ => Err(SpanMetricsError::InvalidTime(s.to_string())),
        }
    }
}

/// A bad span-metrics setting.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanMetricsError {
    /// The filter is not a valid `Targets` directive.
    #[error("invalid span metrics filter `{directive}`: {reason}")]
    InvalidFilter {
        /// The directive as given.
        directive: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The allow list holds an empty name.
    #[error("the span metrics allow list holds an empty span name")]
    EmptySpanName,
    /// Not `wall` or `busy`.
    #[error("invalid span time `{0}`: expected `wall` or `busy`")]
    InvalidTime(String),
}

/// Settings of the span-metrics layer.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SpanMetricsConfig {
    /// Whether the layer is installed at all (default `true`).
    pub enabled: bool,
    /// Span names to record; empty (the default) records every span the filter lets through.
    pub allow: Vec<String>,
    /// A [`Targets`] directive (`info`, `my_crate=debug,hyper=off`); default `trace` (all).
    pub filter: String,
    /// Wall or busy time (default wall).
    pub time: SpanTime,
}

impl Default for SpanMetricsConfig {
    fn default() -> Self {
        SpanMetricsConfig { enabled: true, allow: Vec::new(), filter: "trace".to_string(), time: SpanTime::Wall }
    }
}

impl SpanMetricsConfig {
    /// Switches the layer on or off.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Records only spans with these names.
    pub fn with_allow<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.allow = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the target/level filter (a [`Targets`] directive).
    pub fn with_filter(mut self, directive: impl Into<String>) -> Self {
        self.filter = directive.into();
        self
    }

    /// Chooses wall or busy time.
    pub fn with_time(mut self, time: SpanTime) -> Self {
        self.time = time;
        self
    }

    /// Splits a comma-separated allow list (`a, b,c`), as an environment variable holds it;
    /// blanks around names and empty entries are dropped.
    pub fn parse_allow(list: &str) -> Vec<String> {
        list.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_string).collect()
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`SpanMetricsError::InvalidFilter`] for a filter [`Targets`] cannot parse,
    /// [`SpanMetricsError::EmptySpanName`] for an empty name in the allow list.
    pub fn validate(&self) -> Result<(), SpanMetricsError> {
        self.targets()?;
        if self.allow.iter().any(|n| n.trim().is_empty()) {
            return Err(SpanMetricsError::EmptySpanName);
        }
        Ok(())
    }

    fn targets(&self) -> Result<Targets, SpanMetricsError> {
        let directive = self.filter.trim();
        if directive.is_empty() {
            return Ok(Targets::new().with_default(tracing::level_filters::LevelFilter::TRACE));
        }
        Targets::from_str(directive)
            .map_err(|e| SpanMetricsError::InvalidFilter { directive: self.filter.clone(), reason: e.to_string() })
    }
}

/// Builds the layer `init` installs: `None` when the configuration disables it.
///
/// # Errors
/// As [`SpanMetricsConfig::validate`].
pub(crate) fn layer(config: &SpanMetricsConfig, meter: &Meter) -> Result<Option<SpanMetricsLayer>, SpanMetricsError> {
    if !config.enabled {
        return Ok(None);
    }
    SpanMetricsLayer::new(config, meter).map(Some)
}

/// The span-metrics `tracing` layer; see the [module documentation](self).
///
/// Needs a subscriber with span storage (`tracing_subscriber::registry()`).
#[derive(Debug)]
pub struct SpanMetricsLayer {
    histogram: Histogram<f64>,
    targets: Targets,
    allow: Vec<String>,
    busy: bool,
    sites: RwLock<HashMap<usize, Option<Arc<Site>>, BuildHasherDefault<AddressHasher>>>,
}

/// What is resolved once per callsite.
#[derive(Debug)]
struct Site {
    ok: BoundHistogram<f64>,
    error: BoundHistogram<f64>,
    /// The callsite declares `error` or `otel.status_code`, so records must be looked at.
    status_fields: bool,
}

/// Kept in the span's extensions from creation to close.
struct Timing {
    site: Arc<Site>,
    start: Instant,
    busy: Duration,
    entered_at: Option<Instant>,
    depth: u32,
    failed: bool,
}

impl SpanMetricsLayer {
    /// A layer recording into `meter`'s [`SPAN_DURATION`] histogram (it ignores
    /// [`SpanMetricsConfig::enabled`]: not installing it is how to disable it).
    ///
    /// # Errors
    /// As [`SpanMetricsConfig::validate`].
    pub fn new(config: &SpanMetricsConfig, meter: &Meter) -> Result<Self, SpanMetricsError> {
        config.validate()?;
        let histogram = meter
            .f64_histogram(SPAN_DURATION)
            .with_unit("s")
            .with_description("Duration of closed tracing spans")
            .with_boundaries(crate::SECONDS_BUCKETS.to_vec())
            .build();
        Ok(SpanMetricsLayer {
            histogram,
            targets: config.targets()?,
            allow: config.allow.iter().map(|n| n.trim().to_string()).collect(),
            busy: config.time == SpanTime::Busy,
            sites: RwLock::new(HashMap::default()),
        })
    }

    /// The callsite's cached entry, resolving it on first sight; `None` when it does not count.
    fn site(&self, meta: &'static Metadata<'static>) -> Option<Arc<Site>> {
        let key = std::ptr::from_ref(meta) as usize;
        if let Some(entry) = self.sites.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return entry.clone();
        }
        let entry = self.resolve(meta);
        self.sites.write().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(entry).clone()
    }

    fn resolve(&self, meta: &'static Metadata<'static>) -> Option<Arc<Site>> {
        if !self.targets.would_enable(meta.target(), meta.level()) {
            return None;
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|n| n == meta.name()) {
            return None;
        }
        let bound = |status: &'static str| {
            self.histogram.bind(&[
                KeyValue::new(ATTR_SPAN_NAME, meta.name()),
                KeyValue::new(ATTR_SPAN_TARGET, meta.target()),
                KeyValue::new(ATTR_STATUS, status),
            ])
        };
        let fields = meta.fields();
        Some(Arc::new(Site {
            ok: bound("ok"),
            error: bound("error"),
            status_fields: fields.field("error").is_some() || fields.field("otel.status_code").is_some(),
        }))
    }
}

impl<S> Layer<S> for SpanMetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(site) = self.site(attrs.metadata()) else { return };
        let Some(span) = ctx.span(id) else { return };
        let failed = site.status_fields && {
            let mut status = StatusVisitor(None);
            attrs.record(&mut status);
            status.0.unwrap_or(false)
        };
        let timing = Timing { site, start: Instant::now(), busy: Duration::ZERO, entered_at: None, depth: 0, failed };
        // `replace`, not `insert`: a second copy of this layer must not make the first panic.
        span.extensions_mut().replace(timing);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(timing) = extensions.get_mut::<Timing>() else { return };
        if timing.site.status_fields {
            let mut status = StatusVisitor(None);
            values.record(&mut status);
            if let Some(failed) = status.0 {
                timing.failed = failed;
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() != Level::ERROR {
            return;
        }
        let Some(span) = ctx.event_span(event) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(timing) = extensions.get_mut::<Timing>() {
            timing.failed = true;
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.busy {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(timing) = extensions.get_mut::<Timing>() {
            if timing.depth == 0 {
                timing.entered_at = Some(Instant::now());
            }
            timing.depth = timing.depth.saturating_add(1);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.busy {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(timing) = extensions.get_mut::<Timing>() {
            timing.depth = timing.depth.saturating_sub(1);
            if timing.depth == 0 {
                if let Some(at) = timing.entered_at.take() {
                    timing.busy += at.elapsed();
                }
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let extensions = span.extensions();
        let Some(timing) = extensions.get::<Timing>() else { return };
        let seconds = if self.busy {
            let open = timing.entered_at.map_or(Duration::ZERO, |at| at.elapsed());
            (timing.busy + open).as_secs_f64()
        } else {
            timing.start.elapsed().as_secs_f64()
        };
        let histogram = if timing.failed { &timing.site.error } else { &timing.site.ok };
        histogram.record(seconds);
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

/// Hashes the callsite's metadata address: the keys are already unique, SipHash is wasted work.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 ^ (n as u64 >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
