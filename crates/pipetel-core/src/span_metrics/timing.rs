//! A span's timing while it is open: in the open-span table, or in its extensions when the table
//! is full.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::site::Site;
use crate::exposition::exemplar::{self, SpanIds};
use crate::sync::{SpanSlot, SpanTable, StaticCell};

/// A closed span's numbers.
pub(super) struct Reading {
    pub(super) site: Option<&'static Site>,
    /// Clock ticks (see [`SpanMetricsLayer::now`](super::SpanMetricsLayer::now)).
    pub(super) ticks: u64,
    pub(super) failed: bool,
    /// The ids its exemplar carries, when it keeps one.
    pub(super) ids: Option<SpanIds>,
}

impl Reading {
    pub(super) fn from(timing: TimingRef<'_>, now: u64, busy: bool) -> Self {
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
pub(super) struct Timing {
    pub(super) site: &'static Site,
    pub(super) start: u64,
    pub(super) busy: u64,
    pub(super) entered_at: u64,
    pub(super) depth: u32,
    pub(super) failed: AtomicBool,
    /// The exemplar's ids, once captured.
    pub(super) ids: Option<SpanIds>,
}

/// A span's timing, in the table or in its extensions.
pub(super) enum TimingRef<'a> {
    Slot(&'a Slot),
    Boxed(&'a mut Timing),
}

impl TimingRef<'_> {
    pub(super) fn site(&self) -> Option<&'static Site> {
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

    pub(super) fn failed(&self) -> &AtomicBool {
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
    pub(super) fn capture_ids(&mut self) {
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

    pub(super) fn enter(self, now: u64) {
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

    pub(super) fn exit(self, now: u64) {
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

/// One open span: its id (see [`SpanTable`]) and timing. A cache line of its own, so threads
/// timing different spans do not contend.
#[repr(align(64))]
#[derive(Default)]
pub(super) struct Slot {
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

impl SpanSlot for Slot {
    #[inline]
    fn id(&self) -> &AtomicU64 {
        &self.id
    }
}

impl Slot {
    /// Starts timing a span in this slot, just claimed for it.
    #[inline]
    pub(super) fn open(&self, site: &'static Site, start: u64, failed: bool) {
        self.site.set(Some(site));
        self.start.store(start, Ordering::Relaxed);
        self.busy.store(0, Ordering::Relaxed);
        self.entered_at.store(0, Ordering::Relaxed);
        self.depth.store(0, Ordering::Relaxed);
        self.failed.store(failed, Ordering::Relaxed);
        self.exemplar.store(0, Ordering::Relaxed);
    }
}

/// The timing of open spans, keyed by span id (see [`SpanTable`]): timing a span costs a few
/// uncontended atomic operations instead of an allocation in the span's extensions and a lookup
/// of the span at its close; more spans open at once go to their extensions.
pub(super) type OpenSpans = SpanTable<Slot>;
