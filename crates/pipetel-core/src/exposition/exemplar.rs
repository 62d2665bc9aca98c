//! Exemplars: one measurement per histogram bucket kept with the trace and span ids of the span
//! it was made in, so a latency spike on a dashboard links to a trace that shows it.
//!
//! - Capture: [`current`] says whether a measurement made now keeps an exemplar, by the
//!   configured [`ExemplarFilter`] (`OTEL_METRICS_EXEMPLAR_FILTER`, default `trace_based`: only
//!   inside a sampled span), reading the span from the current OpenTelemetry context (which the
//!   `tracing` bridge sets while a span is entered): a thread-local read, no allocation.
//! - Storage: [`Exemplars`], one slot per bucket, overwritten by the latest measurement of that
//!   bucket; the slots are allocated on the first exemplar, so a series that never sees a
//!   sampled span costs one pointer. A slot is a sequence lock over atomics: a writer that
//!   meets another writer in the same slot drops its exemplar rather than wait.
//! - Time: an exemplar's timestamp is computed from a reading of `crate::sync::clock` (the span's or
//!   the call's end, already read to time it) and an anchor to the system's wall clock renewed
//!   each second ([`wall_ns_at`]), so keeping one reads no OS clock.
//! - The SDK's histograms keep no exemplars (`opentelemetry_sdk` 0.33 builds every data point
//!   with an empty exemplar list and offers no way to add one), so pipetel's own SDK-recorded
//!   histograms (`span.duration`, `function.duration`) keep theirs here, registered by
//!   instrument name and attribute set ([`register`]), and the pull endpoint's encoder looks
//!   them up ([`lookup`]) when it writes OpenMetrics.
//! - Output: OpenMetrics only (the text format 0.0.4 has no exemplars), after a `_bucket` line.

// Plumbing between this crate and `pipetel` (hidden from the docs): its docs name the private
// items they are written for.
#![allow(rustdoc::private_intra_doc_links)]

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::{Context, KeyValue};

use crate::settings::ExemplarFilter;

const ALWAYS_ON: u8 = 0;
const ALWAYS_OFF: u8 = 1;
const TRACE_BASED: u8 = 2;

static FILTER: AtomicU8 = AtomicU8::new(TRACE_BASED);

/// Whether an exemplar can ever be shown: only the pull endpoint's OpenMetrics page carries them
/// (the OTLP exporters of SDK 0.33 drop them, the text format has none), so until a pull reader
/// exists in the process a measurement skips reading the OpenTelemetry context, which is most
/// of what an exemplar check costs (a thread-local behind `__tls_get_addr` and a `RefCell`).
static CAPTURE: AtomicBool = AtomicBool::new(false);

/// Called when a pull reader is made (`init` with the pull endpoint): measurements from now on
/// capture exemplars as the filter allows.
pub fn enable_capture() {
    CAPTURE.store(true, Ordering::Relaxed);
}

/// Sets the filter every histogram applies from now on (`init` sets the configured one).
pub fn set_filter(filter: ExemplarFilter) {
    let v = match filter {
        ExemplarFilter::AlwaysOn => ALWAYS_ON,
        ExemplarFilter::AlwaysOff => ALWAYS_OFF,
        ExemplarFilter::TraceBased => TRACE_BASED,
    };
    FILTER.store(v, Ordering::Relaxed);
}

/// The filter in effect.
pub(crate) fn filter() -> ExemplarFilter {
    match FILTER.load(Ordering::Relaxed) {
        ALWAYS_ON => ExemplarFilter::AlwaysOn,
        ALWAYS_OFF => ExemplarFilter::AlwaysOff,
        _ => ExemplarFilter::TraceBased,
    }
}

/// The trace context an exemplar carries; zero ids mean none (an `always_on` measurement made
/// outside any span).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SpanIds {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
}

impl SpanIds {
    /// The ids of a span context.
    pub(crate) fn of(sc: &opentelemetry::trace::SpanContext) -> Self {
        SpanIds {
            trace_id: u128::from_be_bytes(sc.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(sc.span_id().to_bytes()),
        }
    }

    /// What the filter in effect makes of a measurement in a span with context `sc` (`None`:
    /// outside any span): `Some` when it keeps an exemplar.
    #[inline]
    pub(crate) fn filtered(sc: Option<&opentelemetry::trace::SpanContext>) -> Option<Self> {
        Self::filtered_by(FILTER.load(Ordering::Relaxed), sc)
    }

    #[inline]
    fn filtered_by(filter: u8, sc: Option<&opentelemetry::trace::SpanContext>) -> Option<Self> {
        match filter {
            ALWAYS_OFF => None,
            ALWAYS_ON => Some(sc.filter(|sc| sc.is_valid()).map(Self::of).unwrap_or_default()),
            _ => sc.filter(|sc| sc.is_valid() && sc.is_sampled()).map(Self::of),
        }
    }
}

/// Whether a measurement made now keeps an exemplar, and the ids it carries: the current
/// OpenTelemetry context's span, as the filter in effect allows.
#[inline]
pub(crate) fn current() -> Option<SpanIds> {
    if !CAPTURE.load(Ordering::Relaxed) || FILTER.load(Ordering::Relaxed) == ALWAYS_OFF {
        return None;
    }
    Context::map_current(|cx| {
        let span = cx.span();
        let sc = span.span_context();
        SpanIds::filtered(sc.is_valid().then_some(sc))
    })
}

/// A kept measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Exemplar {
    pub(crate) value: f64,
    /// Nanoseconds since the Unix epoch.
    pub(crate) time_ns: u64,
    pub(crate) ids: SpanIds,
}

/// Nanoseconds since the Unix epoch, now, from the system's wall clock.
fn wall_clock_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Nanoseconds since the Unix epoch, now: see [`wall_ns_at`].
fn now_ns() -> u64 {
    wall_ns_at(crate::sync::clock().raw())
}

/// Nanoseconds since the Unix epoch at `ticks`, a raw reading of [`crate::sync::clock`] taken just
/// before (a span's or a call's end, already read to time it): the reading's distance from an
/// anchor, so an exemplar costs no read of the system's wall clock. The anchor (the wall clock
/// less the clock's nanoseconds) is renewed when a reading comes a second or more after it,
/// so a step of the wall clock shows in exemplar times within a second.
pub(crate) fn wall_ns_at(ticks: u64) -> u64 {
    // Wrapping: the wall clock less the clock's nanoseconds since its start, possibly negative.
    static OFFSET: AtomicU64 = AtomicU64::new(0);
    // The reading from which the anchor is renewed; 0 before the first.
    static RENEW_AT: AtomicU64 = AtomicU64::new(0);
    let clock = crate::sync::clock();
    let nanos = clock.delta_as_nanos(0, ticks);
    if ticks >= RENEW_AT.load(Ordering::Acquire) {
        // Racing renewals each store an anchor read now: any of them is right.
        OFFSET.store(wall_clock_ns().wrapping_sub(nanos), Ordering::Relaxed);
        let second = crate::sync::ticks_per_second() as u64;
        RENEW_AT.store(ticks.saturating_add(second.max(1)), Ordering::Release);
    }
    OFFSET.load(Ordering::Relaxed).wrapping_add(nanos)
}

/// One exemplar, behind a sequence number (odd while written; 0 while empty).
#[derive(Default)]
struct Slot {
    seq: AtomicU64,
    value: AtomicU64,
    time_ns: AtomicU64,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    span_id: AtomicU64,
}

impl Slot {
    fn store(&self, e: &Exemplar) {
        let seq = self.seq.load(Ordering::Relaxed);
        // Another writer holds the slot: this exemplar is dropped, never waited for.
        if seq & 1 == 1 || self.seq.compare_exchange(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return;
        }
        self.value.store(e.value.to_bits(), Ordering::Relaxed);
        self.time_ns.store(e.time_ns, Ordering::Relaxed);
        self.trace_hi.store((e.ids.trace_id >> 64) as u64, Ordering::Relaxed);
        self.trace_lo.store(e.ids.trace_id as u64, Ordering::Relaxed);
        self.span_id.store(e.ids.span_id, Ordering::Relaxed);
        self.seq.store(seq + 2, Ordering::Release);
    }

    fn load(&self) -> Option<Exemplar> {
        for _ in 0..8 {
            let before = self.seq.load(Ordering::Acquire);
            if before == 0 {
                return None;
            }
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let e = Exemplar {
                value: f64::from_bits(self.value.load(Ordering::Relaxed)),
                time_ns: self.time_ns.load(Ordering::Relaxed),
                ids: SpanIds {
                    trace_id: (u128::from(self.trace_hi.load(Ordering::Relaxed)) << 64)
                        | u128::from(self.trace_lo.load(Ordering::Relaxed)),
                    span_id: self.span_id.load(Ordering::Relaxed),
                },
            };
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return Some(e);
            }
        }
        None
    }
}

/// The exemplars of one histogram series: one slot per bucket of `bounds` (the last one
/// `+Inf`), allocated on the first exemplar.
pub(crate) struct Exemplars {
    bounds: Arc<[f64]>,
    slots: OnceLock<Box<[Slot]>>,
}

impl std::fmt::Debug for Exemplars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exemplars").field("bounds", &self.bounds.len()).finish_non_exhaustive()
    }
}

/// The bucket of `v` in `bounds` (`le` semantics; `bounds.len()` is `+Inf`).
#[inline]
pub(crate) fn bucket_of(bounds: &[f64], v: f64) -> usize {
    bounds.partition_point(|b| *b < v)
}

impl Exemplars {
    /// Slots for a histogram with these bucket bounds.
    pub(crate) fn new(bounds: Arc<[f64]>) -> Self {
        Exemplars { bounds, slots: OnceLock::new() }
    }

    fn slots(&self) -> &[Slot] {
        self.slots.get_or_init(|| (0..=self.bounds.len()).map(|_| Slot::default()).collect())
    }

    /// Keeps `value`, measured now with `ids`, as its bucket's exemplar (`bucket`: its index
    /// when the caller already knows it).
    #[inline]
    pub(crate) fn record(&self, bucket: Option<usize>, value: f64, ids: SpanIds) {
        self.store(bucket, value, ids, now_ns);
    }

    /// [`Exemplars::record`] for a measurement that ended at `ticks`, a raw reading of
    /// [`crate::sync::clock`] the caller already took: its time comes from that reading.
    #[inline]
    pub(crate) fn record_at(&self, bucket: Option<usize>, value: f64, ids: SpanIds, ticks: u64) {
        self.store(bucket, value, ids, || wall_ns_at(ticks));
    }

    #[inline]
    fn store(&self, bucket: Option<usize>, value: f64, ids: SpanIds, time_ns: impl FnOnce() -> u64) {
        let bucket = bucket.unwrap_or_else(|| bucket_of(&self.bounds, value));
        if let Some(slot) = self.slots().get(bucket) {
            slot.store(&Exemplar { value, time_ns: time_ns(), ids });
        }
    }

    /// The exemplar of bucket `i`, if any.
    pub(crate) fn get(&self, i: usize) -> Option<Exemplar> {
        self.slots.get()?.get(i)?.load()
    }

    /// Every kept exemplar.
    fn all(&self) -> impl Iterator<Item = Exemplar> + '_ {
        self.slots.get().into_iter().flat_map(|s| s.iter().filter_map(Slot::load))
    }

    /// Forgets every exemplar.
    pub(crate) fn clear(&self) {
        if let Some(slots) = self.slots.get() {
            for s in slots.iter() {
                // A reset during a write loses that write's exemplar, which is fine.
                let seq = s.seq.load(Ordering::Relaxed);
                if seq & 1 == 0 && seq != 0 {
                    let _ = s.seq.compare_exchange(seq, 0, Ordering::AcqRel, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The exemplars of SDK-recorded histograms, by instrument name, then by attribute set.
type Table = HashMap<String, HashMap<String, Vec<Arc<Exemplars>>>>;
static TABLE: RwLock<Option<Table>> = RwLock::new(None);

/// The key of an attribute set: `key=value` pairs sorted by key, separated by `\u{1}`.
fn attribute_key<'a>(attrs: impl Iterator<Item = &'a KeyValue>) -> String {
    let mut pairs: Vec<(&str, std::borrow::Cow<'_, str>)> =
        attrs.map(|kv| (kv.key.as_str(), kv.value.as_str())).collect();
    pairs.sort();
    let mut key = String::new();
    for (k, v) in pairs {
        key.push_str(k);
        key.push('=');
        key.push_str(&v);
        key.push('\u{1}');
    }
    key
}

/// Slots for the series `attrs` of the SDK histogram `instrument` (bucket `bounds`), where the
/// pull endpoint's encoder finds them. Every registration lives for the rest of the process:
/// callers register once per resolved call site.
pub(crate) fn register(instrument: &str, attrs: &[KeyValue], bounds: &[f64]) -> Arc<Exemplars> {
    let cells = Arc::new(Exemplars::new(Arc::from(bounds)));
    let mut table = crate::sync::write(&TABLE);
    table
        .get_or_insert_with(HashMap::new)
        .entry(instrument.to_string())
        .or_default()
        .entry(attribute_key(attrs.iter()))
        .or_default()
        .push(cells.clone());
    cells
}

/// The latest exemplar per bucket of `bounds` (the last one `+Inf`) kept for the series `attrs`
/// of the SDK histogram `instrument`; `None` when none was registered.
pub(crate) fn lookup<'a>(
    instrument: &str,
    attrs: impl Iterator<Item = &'a KeyValue>,
    bounds: &[f64],
) -> Option<Vec<Option<Exemplar>>> {
    let table = crate::sync::read(&TABLE);
    let series = table.as_ref()?.get(instrument)?.get(&attribute_key(attrs))?;
    let mut out = vec![None; bounds.len() + 1];
    for e in series.iter().flat_map(|cells| cells.all().collect::<Vec<_>>()) {
        let slot: &mut Option<Exemplar> = &mut out[bucket_of(bounds, e.value)];
        if slot.is_none_or(|old| old.time_ns < e.time_ns) {
            *slot = Some(e);
        }
    }
    Some(out)
}

/// Whether any SDK histogram of this name registered exemplars (a cheap check before
/// [`lookup`]).
pub(crate) fn has_instrument(instrument: &str) -> bool {
    crate::sync::read(&TABLE).as_ref().is_some_and(|t| t.contains_key(instrument))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exemplar's time, taken from a clock reading rather than the wall clock, is the wall
    /// clock's time of that reading: between the wall clock read before and after it, and later
    /// readings give later times by the clock's own distance.
    #[test]
    fn exemplar_times_from_clock_readings_follow_the_wall_clock() {
        let clock = crate::sync::clock();
        for _ in 0..3 {
            let before = wall_clock_ns();
            let ticks = clock.raw();
            let at = wall_ns_at(ticks);
            let after = wall_clock_ns();
            // The anchor may be up to a second old; the clock and the wall clock agree far
            // closer than a millisecond over a second.
            assert!(at + 1_000_000 >= before && at <= after + 1_000_000, "{before} <= {at} <= {after}");
            std::thread::sleep(std::time::Duration::from_millis(5));
            let later = clock.raw();
            let gap = wall_ns_at(later).wrapping_sub(at);
            assert!((5_000_000..1_000_000_000).contains(&gap), "{gap} ns between readings 5 ms apart");
            let (apart, by_clock) =
                (wall_ns_at(later).wrapping_sub(wall_ns_at(ticks)), clock.delta_as_nanos(ticks, later));
            assert!(apart.abs_diff(by_clock) < 1_000_000, "{apart} ns apart, {by_clock} ns by the clock");
        }
        let e = Exemplars::new(Arc::from(&[1.0][..]));
        let ids = SpanIds { trace_id: 1, span_id: 2 };
        let before = wall_clock_ns();
        e.record_at(None, 0.5, ids, clock.raw());
        e.record(None, 2.0, ids);
        let after = wall_clock_ns();
        for i in 0..2 {
            let t = e.get(i).map(|x| x.time_ns).unwrap_or(0);
            assert!(t + 1_000_000 >= before && t <= after + 1_000_000, "bucket {i}: {before} <= {t} <= {after}");
        }
    }

    #[test]
    fn a_slot_keeps_the_latest_exemplar_of_its_bucket() {
        let e = Exemplars::new(Arc::from(&[1.0, 2.0][..]));
        assert_eq!(e.get(0), None);
        let ids = SpanIds { trace_id: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10, span_id: 0xdead_beef };
        e.record(None, 0.5, ids);
        e.record(None, 1.5, ids);
        e.record(None, 1.7, SpanIds { trace_id: 7, span_id: 9 });
        e.record(None, 99.0, ids);
        assert_eq!(e.get(0).map(|x| (x.value, x.ids)), Some((0.5, ids)));
        assert_eq!(e.get(1).map(|x| (x.value, x.ids.trace_id)), Some((1.7, 7)));
        assert_eq!(e.get(2).map(|x| x.value), Some(99.0));
        assert!(e.get(0).is_some_and(|x| x.time_ns > 1_600_000_000_000_000_000));
        e.clear();
        assert_eq!(e.all().count(), 0);
    }

    #[test]
    fn the_filter_decides_which_measurements_keep_one() {
        use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
        let context = |flags| {
            SpanContext::new(
                TraceId::from_bytes([1; 16]),
                SpanId::from_bytes([2; 8]),
                flags,
                false,
                TraceState::default(),
            )
        };
        let (sampled, unsampled) = (context(TraceFlags::SAMPLED), context(TraceFlags::default()));
        let ids = SpanIds { trace_id: u128::from_be_bytes([1; 16]), span_id: u64::from_be_bytes([2; 8]) };
        assert_eq!(SpanIds::filtered_by(TRACE_BASED, Some(&sampled)), Some(ids));
        assert_eq!(SpanIds::filtered_by(TRACE_BASED, Some(&unsampled)), None);
        assert_eq!(SpanIds::filtered_by(TRACE_BASED, None), None);
        assert_eq!(SpanIds::filtered_by(ALWAYS_ON, Some(&unsampled)), Some(ids));
        assert_eq!(SpanIds::filtered_by(ALWAYS_ON, None), Some(SpanIds::default()));
        assert_eq!(SpanIds::filtered_by(ALWAYS_OFF, Some(&sampled)), None);
        assert_eq!("Trace_Based".parse::<ExemplarFilter>(), Ok(ExemplarFilter::TraceBased));
        assert!("sometimes".parse::<ExemplarFilter>().is_err());
    }

    #[test]
    fn sdk_series_are_found_by_name_and_attribute_set_in_any_order() {
        let attrs = [KeyValue::new("b", "2"), KeyValue::new("a", "x")];
        let cells = register("test.exemplar.lookup", &attrs, &[1.0]);
        cells.record(None, 3.0, SpanIds { trace_id: 1, span_id: 2 });
        let reversed = [KeyValue::new("a", "x"), KeyValue::new("b", "2")];
        // Other bounds: the exemplar goes to the bucket its value falls in.
        let found = lookup("test.exemplar.lookup", reversed.iter(), &[1.0, 5.0]).expect("registered");
        assert_eq!(found.iter().map(|e| e.map(|e| e.value)).collect::<Vec<_>>(), [None, Some(3.0), None]);
        assert!(lookup("test.exemplar.lookup", [KeyValue::new("a", "y")].iter(), &[1.0]).is_none());
        assert!(has_instrument("test.exemplar.lookup") && !has_instrument("test.exemplar.other"));
    }
}
