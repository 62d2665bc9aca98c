//! The markers of held-back spans, and what a span propagates.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState};
use tracing::span::Id;
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::sync::{SpanSlot, SpanTable};

/// Marks a span held back from the bridge in its extensions, where the gate's table of held-back
/// spans had no room or the context has a trace state; holds the span context of its unsampled
/// parent (a context of its own for a dropped root).
#[derive(Debug, Clone)]
pub(crate) struct Unsampled(pub(crate) SpanContext);

/// One held-back span: its id (see [`SpanTable`]) and the span context it propagates
/// (trace state empty; one with a trace state is kept in the span's extensions). A cache line of
/// its own, so threads holding back different spans do not contend.
#[repr(align(64))]
#[derive(Default)]
pub(super) struct HeldSlot {
    id: AtomicU64,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    span_id: AtomicU64,
    flags: AtomicU8,
    remote: AtomicBool,
}

impl SpanSlot for HeldSlot {
    #[inline]
    fn id(&self) -> &AtomicU64 {
        &self.id
    }
}

/// The markers of held-back spans, keyed by span id: a [`SpanTable`] (the span-metrics layer's
/// open-span table holds their timing the same way), so holding a span back costs no allocation
/// in its extensions, and its enter, exit and close find out with one probe that the bridge has
/// nothing to do; more spans held back at once keep their marker in their extensions.
pub(crate) struct HeldSpans {
    slots: SpanTable<HeldSlot>,
    /// Markers kept in extensions (table full, or a trace state) and not yet removed at close:
    /// while zero, a span missing from the table is not held back, with nothing to look up.
    pub(super) boxed: AtomicUsize,
    /// Whether any marker went into the table: until one does (a sampler that keeps every span
    /// and no unsampled remote parent yet), a lookup probes nothing, so a kept span's enter,
    /// exit and close pay no table read (a cache miss each on a cold table).
    used: AtomicBool,
}

impl std::fmt::Debug for HeldSpans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldSpans").field("boxed", &self.boxed.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl HeldSpans {
    pub(super) fn new() -> Self {
        HeldSpans { slots: SpanTable::new(), boxed: AtomicUsize::new(0), used: AtomicBool::new(false) }
    }

    /// Keeps `sc` for `key`; `false` when no slot was free or `sc` has a trace state.
    #[inline]
    fn insert(&self, key: u64, sc: &SpanContext) -> bool {
        if !self.slots.accepts(key) || *sc.trace_state() != TraceState::NONE {
            return false;
        }
        // Before the marker: whoever learns of this span (after its creation) sees the flag.
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
        self.slots.insert(key, |slot| {
            let trace = u128::from_be_bytes(sc.trace_id().to_bytes());
            slot.trace_hi.store((trace >> 64) as u64, Ordering::Relaxed);
            slot.trace_lo.store(trace as u64, Ordering::Relaxed);
            slot.span_id.store(u64::from_be_bytes(sc.span_id().to_bytes()), Ordering::Relaxed);
            slot.flags.store(sc.trace_flags().to_u8(), Ordering::Relaxed);
            slot.remote.store(sc.is_remote(), Ordering::Relaxed);
        })
    }

    /// Whether any span was held back so far (in the table or in its extensions).
    #[inline]
    pub(super) fn ever_held(&self) -> bool {
        self.used.load(Ordering::Relaxed) || self.boxed.load(Ordering::Relaxed) != 0
    }

    #[inline]
    fn find(&self, key: u64) -> Option<&HeldSlot> {
        if !self.used.load(Ordering::Relaxed) {
            return None;
        }
        self.slots.find(key)
    }

    fn context(slot: &HeldSlot) -> SpanContext {
        let trace = (u128::from(slot.trace_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(slot.trace_lo.load(Ordering::Relaxed));
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(slot.span_id.load(Ordering::Relaxed)),
            TraceFlags::new(slot.flags.load(Ordering::Relaxed)),
            slot.remote.load(Ordering::Relaxed),
            TraceState::NONE,
        )
    }

    /// Whether the span `id` is held back (its marker in the table, or in its extensions while
    /// any marker is there).
    #[inline]
    pub(super) fn holds<S>(&self, id: &Id, ctx: &Context<'_, S>) -> bool
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.find(id.into_u64()).is_some() {
            return true;
        }
        self.boxed.load(Ordering::Relaxed) != 0
            && ctx.span(id).is_some_and(|span| span.extensions().get::<Unsampled>().is_some())
    }

    /// The context the held-back span `id` propagates, `None` when it is not held back.
    pub(super) fn get<S>(&self, id: &Id, ctx: &Context<'_, S>) -> Option<SpanContext>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(slot) = self.find(id.into_u64()) {
            return Some(Self::context(slot));
        }
        if self.boxed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        ctx.span(id).and_then(|span| span.extensions().get::<Unsampled>().map(|u| u.0.clone()))
    }

    /// As [`HeldSpans::get`], for [`span_context`], which has the registry rather than a context.
    fn get_in(&self, id: &Id, registry: Option<&tracing_subscriber::Registry>) -> Option<SpanContext> {
        if let Some(slot) = self.find(id.into_u64()) {
            return Some(Self::context(slot));
        }
        if self.boxed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let data = registry?.span(id)?;
        let extensions = data.extensions();
        extensions.get::<Unsampled>().map(|u| u.0.clone())
    }

    /// Holds the new span `id` back with `sc`.
    pub(super) fn hold<S>(&self, id: &Id, sc: SpanContext, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.insert(id.into_u64(), &sc) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            // `replace`, not `insert`: a second gate must not make the first panic.
            if span.extensions_mut().replace(Unsampled(sc)).is_none() {
                self.boxed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets the closing span `id`; whether it was held back.
    pub(super) fn release<S>(&self, id: &Id, ctx: &Context<'_, S>) -> bool
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(slot) = self.find(id.into_u64()) {
            self.slots.remove(slot);
            return true;
        }
        if self.boxed.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let removed = ctx.span(id).is_some_and(|span| span.extensions_mut().remove::<Unsampled>().is_some());
        if removed {
            self.boxed.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }
}

/// The OTel span context of a `tracing` span: its own when the bridge tracks it, its unsampled
/// parent's when [`SamplingGate`](super::SamplingGate) held it back, `None` when traces are off. What to propagate to
/// another process for this span.
pub fn span_context(span: &tracing::Span) -> Option<SpanContext> {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = span.context();
    let own = cx.span().span_context().clone();
    if own.is_valid() {
        return Some(own);
    }
    span.with_subscriber(|(id, dispatch)| {
        let held = dispatch.downcast_ref::<HeldSpans>()?;
        held.get_in(id, dispatch.downcast_ref::<tracing_subscriber::Registry>())
    })
    .flatten()
}
