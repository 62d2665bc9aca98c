//! Deciding early that a span will not be sampled, so the OTel bridge never builds it.
//!
//! `tracing-opentelemetry` builds every span's data (name, attributes, thread, code location,
//! parent context) when the span is created, and asks the sampler only when the span starts,
//! because a `set_parent` call may still change its parent. A span the sampler then drops has
//! cost nearly as much as one it keeps.
//!
//! For most dropped spans the outcome is known at creation: a span whose parent is a local span
//! that was not sampled is not sampled either, under every sampler `init` configures (a
//! parent-based sampler follows the parent; a trace-id-ratio sampler decides on the trace id,
//! which the child shares). [`SamplingGate`] wraps the bridge and holds such spans back from it:
//! they get a marker with their parent's span context instead of span data (kept in a fixed
//! table of the gate keyed by span id, so holding a span back allocates nothing and its enter,
//! exit and close skip the bridge after one probe). With
//! a parent-based sampler, a *remote* parent that was not sampled (a `traceparent` ending in
//! `-00`) decides the same way.
//!
//! What a held-back span gives up: it has no OTel span of its own, so
//! `OpenTelemetrySpanExt::context()` on it returns an empty context and `set_parent` on it is
//! ignored. pipetel's own propagation ([`span_context`], used by `Stage::traceparent` and the
//! stage and worker rows) reads the marker and hands on the unsampled parent's context, so the
//! next process learns that the trace is not sampled.
//!
//! # Roots decided at creation
//! A root span under a ratio sampler (`traceidratio`, `parentbased_traceidratio`, and
//! `parentbased_always_off`, ratio 0) is decided at creation too, when the gate is built with
//! [`SamplingGate::deciding_roots`] (what `init` installs): the gate draws the root's trace id
//! and applies the ratio to it exactly as the SDK's `TraceIdRatioBased` does. A dropped root is
//! held back like a child of a dropped span (its marker holds a context of its own, with that
//! trace id, not sampled), so a dropped trace costs the bridge nothing. A kept root goes to the
//! bridge with its trace id pinned: [`GateTracer`] and [`PinnedTraceIds`] make the SDK start it
//! with that id, so the decision stays a function of the trace id and agrees with the ratio
//! samplers of other processes.
//!
//! What that changes: `set_parent` on a root created under a ratio sampler works only when the
//! root was kept at creation (the SDK then decides again with the new parent, as before); on a
//! dropped root it is ignored and the span stays in its own unsampled trace. To continue a remote
//! trace, give the parent before the span exists: attach the extracted context while creating
//! the span (`let _in_remote = cx.attach(); let span = info_span!(..)`), or create it inside
//! [`with_remote_parent`], which decides with that parent and calls `set_parent` itself. Both
//! keep `set_parent`'s result under every sampler. Samplers that keep roots (`always_on`,
//! `parentbased_always_on`) hold no root back, and `set_parent` works there as it always did.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use opentelemetry::trace::{
    Link, SpanBuilder, SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::sync::{SpanSlot, SpanTable};

/// Marks a span held back from the bridge in its extensions, where the gate's table of held-back
/// spans had no room or the context has a trace state; holds the span context of its unsampled
/// parent (a context of its own for a dropped root).
#[derive(Debug, Clone)]
pub(crate) struct Unsampled(pub(crate) SpanContext);

thread_local! {
    /// The trace id of the root the gate is handing to the bridge, for [`GateTracer::span_builder`].
    static CREATING: Cell<Option<TraceId>> = const { Cell::new(None) };
    /// The trace id the SDK must give the root it is starting, for [`PinnedTraceIds`].
    static STARTING: Cell<Option<TraceId>> = const { Cell::new(None) };
    /// The parent given to [`with_remote_parent`] while its span is created.
    static REMOTE: RefCell<Option<SpanContext>> = const { RefCell::new(None) };
}

/// Threads inside [`with_remote_parent`] now: while none is, a new span skips reading [`REMOTE`].
static REMOTE_PENDING: AtomicUsize = AtomicUsize::new(0);

/// The SDK's `TraceIdRatioBased` bound: a trace id is kept when its low 64 bits, shifted right
/// once, are below it.
fn ratio_bound(ratio: f64) -> u64 {
    (ratio.max(0.0) * (1u64 << 63) as f64) as u64
}

/// The SDK's `TraceIdRatioBased` decision on `trace_id` for the bound of [`ratio_bound`].
fn ratio_keeps(bound: u64, trace_id: TraceId) -> bool {
    let low = u128::from_be_bytes(trace_id.to_bytes()) as u64;
    (low >> 1) < bound
}

/// One held-back span: its id (see [`SpanTable`]) and the span context it propagates
/// (trace state empty; one with a trace state is kept in the span's extensions). A cache line of
/// its own, so threads holding back different spans do not contend.
#[repr(align(64))]
#[derive(Default)]
struct HeldSlot {
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
    boxed: AtomicUsize,
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
    fn new() -> Self {
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
    fn ever_held(&self) -> bool {
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
    fn holds<S>(&self, id: &Id, ctx: &Context<'_, S>) -> bool
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
    fn get<S>(&self, id: &Id, ctx: &Context<'_, S>) -> Option<SpanContext>
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
    fn hold<S>(&self, id: &Id, sc: SpanContext, ctx: &Context<'_, S>)
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
    fn release<S>(&self, id: &Id, ctx: &Context<'_, S>) -> bool
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

/// What the gate does with a new span.
enum Decision {
    /// Hold it back with this context (its unsampled parent's, or its own for a dropped root).
    Held(SpanContext),
    /// A root the ratio kept: to the bridge with this trace id.
    KeptRoot(TraceId),
    /// To the bridge, which decides when it starts the span.
    Bridge,
}

/// Wraps the OTel bridge layer (`tracing_opentelemetry::layer()`); see the
/// [module documentation](self). `init` installs it; use it directly only when composing a
/// subscriber of your own.
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use tracing_subscriber::layer::SubscriberExt as _;
///
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
///     .with_sampler(opentelemetry_sdk::trace::Sampler::TraceIdRatioBased(0.1))
///     .build();
/// let bridge = tracing_opentelemetry::layer().with_tracer(provider.tracer("app"));
/// let subscriber = tracing_subscriber::registry()
///     .with(pipetel::sampling::SamplingGate::new(bridge, false));
/// # drop(subscriber);
/// ```
#[derive(Debug)]
pub struct SamplingGate<L> {
    inner: L,
    /// Off for samplers that keep every span a local parent kept (`always_on`).
    active: bool,
    /// The sampler follows a remote parent's decision (parent-based samplers).
    follow_remote: bool,
    /// Roots are decided at creation with this `TraceIdRatioBased` bound
    /// ([`SamplingGate::deciding_roots`]); `None`: the bridge decides them.
    root_bound: Option<u64>,
    /// The markers of the spans held back now.
    held: HeldSpans,
}

impl<L> SamplingGate<L> {
    /// Wraps `bridge`. `follow_remote`: the tracer's sampler is parent-based, so a remote
    /// parent that was not sampled decides for its local children too (pass `false` for a bare
    /// trace-id-ratio sampler, which decides on the trace id whatever the remote flag says).
    ///
    /// Only for samplers that keep a span exactly when its local parent was kept (parent-based
    /// samplers, trace-id-ratio, always-on, always-off).
    pub fn new(bridge: L, follow_remote: bool) -> Self {
        SamplingGate { inner: bridge, active: true, follow_remote, root_bound: None, held: HeldSpans::new() }
    }

    /// Also decides root spans at creation, keeping a root when its trace id passes `ratio` as
    /// the SDK's `TraceIdRatioBased(ratio)` would (0 for `parentbased_always_off`); see
    /// [roots decided at creation](self#roots-decided-at-creation). The bridge must use a
    /// [`GateTracer`] of a provider built with [`PinnedTraceIds`], or the SDK draws a kept root's
    /// trace id again and decides afresh (keeping `ratio²` of the roots).
    ///
    /// ```
    /// use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    /// use pipetel::sampling::{GateTracer, PinnedTraceIds, SamplingGate};
    /// use tracing_subscriber::layer::SubscriberExt as _;
    ///
    /// let ratio = 0.01;
    /// let provider = SdkTracerProvider::builder()
    ///     .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))))
    ///     .with_id_generator(PinnedTraceIds::default())
    ///     .build();
    /// let bridge = tracing_opentelemetry::layer().with_tracer(GateTracer::new(&provider, "app"));
    /// let subscriber = tracing_subscriber::registry()
    ///     .with(SamplingGate::new(bridge, true).deciding_roots(ratio));
    /// # drop(subscriber);
    /// ```
    #[must_use]
    pub fn deciding_roots(mut self, ratio: f64) -> Self {
        self.root_bound = (ratio < 1.0).then(|| ratio_bound(ratio));
        self
    }

    /// Wraps `bridge` without holding anything back (for samplers that keep every span).
    pub(crate) fn passthrough(bridge: L) -> Self {
        SamplingGate { inner: bridge, active: false, follow_remote: false, root_bound: None, held: HeldSpans::new() }
    }

    /// What to do with a new span.
    fn decide<S>(&self, attrs: &Attributes<'_>, ctx: &Context<'_, S>) -> Decision
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if REMOTE_PENDING.load(Ordering::Relaxed) != 0 {
            if let Some(remote) = REMOTE.with(|r| r.borrow_mut().take()) {
                return self.with_remote(remote);
            }
        }
        if let Some(parent) = attrs.parent() {
            return match self.held.get(parent, ctx) {
                Some(sc) => Decision::Held(sc),
                None => Decision::Bridge,
            };
        }
        if !attrs.is_contextual() {
            return self.root();
        }
        // The bridge takes a contextual span's parent from the current OTel context, which
        // entering a span it tracks makes current: one thread-local read decides the common case.
        let current = opentelemetry::Context::map_current(|cx| {
            let span = cx.span();
            let sc = span.span_context();
            sc.is_valid().then(|| {
                if !sc.is_sampled() && (!sc.is_remote() || self.follow_remote) {
                    Decision::Held(sc.clone())
                } else {
                    Decision::Bridge
                }
            })
        });
        match current {
            Some(decided) => decided,
            // No OTel span is current: a root, or a span held back here and entered where its
            // parent's context is not current (never while no span was ever held back).
            None if !self.held.ever_held() => self.root(),
            None => match ctx.current_span().id().and_then(|current| self.held.get(current, ctx)) {
                Some(sc) => Decision::Held(sc),
                None => self.root(),
            },
        }
    }

    /// A span whose parent is the remote `parent` ([`with_remote_parent`]).
    fn with_remote(&self, parent: SpanContext) -> Decision {
        let kept = match self.root_bound {
            _ if self.follow_remote => parent.is_sampled(),
            Some(bound) => ratio_keeps(bound, parent.trace_id()),
            None => true,
        };
        if kept {
            return Decision::Bridge;
        }
        Decision::Held(SpanContext::new(
            parent.trace_id(),
            parent.span_id(),
            parent.trace_flags().with_sampled(false),
            true,
            parent.trace_state().clone(),
        ))
    }

    /// A root span: decided here with a trace id drawn now when the gate decides roots.
    fn root(&self) -> Decision {
        let Some(bound) = self.root_bound else { return Decision::Bridge };
        let ids = RandomIdGenerator::default();
        let trace_id = ids.new_trace_id();
        if ratio_keeps(bound, trace_id) {
            return Decision::KeptRoot(trace_id);
        }
        Decision::Held(SpanContext::new(trace_id, ids.new_span_id(), TraceFlags::default(), false, TraceState::NONE))
    }
}

impl<S, L> Layer<S> for SamplingGate<L>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
{
    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }

    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.inner.register_callsite(metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(metadata, ctx)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if self.active {
            match self.decide(attrs, &ctx) {
                Decision::Held(sc) => {
                    self.held.hold(id, sc, &ctx);
                    return;
                }
                Decision::KeptRoot(trace_id) => {
                    CREATING.set(Some(trace_id));
                    self.inner.on_new_span(attrs, id, ctx);
                    CREATING.set(None);
                    return;
                }
                Decision::Bridge => {}
            }
        }
        self.inner.on_new_span(attrs, id, ctx);
    }

    // The bridge finds no span data for a held-back span in any of these and does nothing; the
    // frequent ones skip it for a held-back span (one table probe instead of its lookups).
    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if self.active && self.held.holds(span, &ctx) {
            return;
        }
        self.inner.on_record(span, values, ctx);
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(span, follows, ctx);
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.event_enabled(event, ctx)
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.active && self.held.holds(id, &ctx) {
            return;
        }
        self.inner.on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.active && self.held.holds(id, &ctx) {
            return;
        }
        self.inner.on_exit(id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.active && self.held.release(&id, &ctx) {
            return;
        }
        self.inner.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }

    // `span_context` finds the markers as `HeldSpans`.
    crate::sync::forward_downcast_raw!(inner, held: HeldSpans);
}

/// The SDK tracer behind the bridge of a [`SamplingGate::deciding_roots`] gate: a root the gate
/// kept is started with the trace id the gate drew for it (carried from creation to start in the
/// span builder, handed to [`PinnedTraceIds`] while the SDK starts the span). Every other span
/// starts exactly as with the wrapped tracer.
#[derive(Debug, Clone)]
pub struct GateTracer(SdkTracer);

impl GateTracer {
    /// The tracer `name` of `provider`, which must be built with [`PinnedTraceIds`].
    pub fn new(provider: &opentelemetry_sdk::trace::SdkTracerProvider, name: &'static str) -> Self {
        use opentelemetry::trace::TracerProvider as _;
        GateTracer(provider.tracer(name))
    }
}

impl Tracer for GateTracer {
    type Span = opentelemetry_sdk::trace::Span;

    fn span_builder<T>(&self, name: T) -> SpanBuilder
    where
        T: Into<Cow<'static, str>>,
    {
        let mut builder = SpanBuilder::from_name(name);
        if let Some(trace_id) = CREATING.take() {
            // The builder has no trace id field: a first link with no span id carries it to
            // `build_with_context`, which removes it (the bridge adds only valid links).
            let marker = SpanContext::new(trace_id, SpanId::INVALID, TraceFlags::default(), false, TraceState::NONE);
            builder.links = Some(vec![Link::with_context(marker)]);
        }
        builder
    }

    fn build_with_context(&self, mut builder: SpanBuilder, parent_cx: &opentelemetry::Context) -> Self::Span {
        let pinned = match builder.links.as_mut() {
            Some(links) if links.first().is_some_and(|l| l.span_context.span_id() == SpanId::INVALID) => {
                let trace_id = links.remove(0).span_context.trace_id();
                if links.is_empty() {
                    builder.links = None;
                }
                Some(trace_id)
            }
            _ => None,
        };
        // After a `set_parent`, the parent's trace id wins, as for any span.
        match pinned.filter(|_| !parent_cx.span().span_context().is_valid()) {
            Some(trace_id) => {
                STARTING.set(Some(trace_id));
                let span = self.0.build_with_context(builder, parent_cx);
                STARTING.set(None);
                span
            }
            None => self.0.build_with_context(builder, parent_cx),
        }
    }
}

/// The SDK id generator for a [`GateTracer`]: random ids like the SDK's `RandomIdGenerator`,
/// except the trace id of a root the gate kept, which is the one it drew.
#[derive(Debug, Clone, Default)]
pub struct PinnedTraceIds(RandomIdGenerator);

impl IdGenerator for PinnedTraceIds {
    fn new_trace_id(&self) -> TraceId {
        STARTING.take().unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

/// Creates a span with `make` as a child of the remote span in `parent` (a context extracted
/// from a request's headers): the gate decides it with that parent, then `set_parent` makes it
/// the span's parent. Use it instead of calling `set_parent` on a span created as a root when a
/// ratio sampler is configured: such a root may already have been dropped at creation (see
/// [roots decided at creation](self#roots-decided-at-creation)). Only the first span `make`
/// creates is concerned.
///
/// ```
/// use opentelemetry::propagation::TextMapPropagator as _;
///
/// let headers = std::collections::HashMap::from([(
///     "traceparent".to_string(),
///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
/// )]);
/// let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&headers);
/// let span = pipetel::sampling::with_remote_parent(&parent, || tracing::info_span!("request"));
/// # drop(span);
/// ```
pub fn with_remote_parent(parent: &opentelemetry::Context, make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    /// Clears the pending parent even when `make` panics or creates no span.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            REMOTE.with(|r| r.borrow_mut().take());
            REMOTE_PENDING.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let sc = parent.span().span_context().clone();
    let span = {
        REMOTE_PENDING.fetch_add(1, Ordering::Relaxed);
        let _clear = Clear;
        REMOTE.with(|r| *r.borrow_mut() = sc.is_valid().then_some(sc));
        make()
    };
    // Ignored where no bridge tracks the span (held back, traces off): nothing to reparent.
    let _ = span.set_parent(parent.clone());
    span
}

/// The OTel span context of a `tracing` span: its own when the bridge tracks it, its unsampled
/// parent's when [`SamplingGate`] held it back, `None` when traces are off. What to propagate to
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

#[cfg(test)]
mod tests {
    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Runs `work` under registry + gate + bridge with `sampler`; returns the exported spans' names.
    fn run(sampler: Sampler, follow_remote: bool, work: impl FnOnce()) -> Vec<String> {
        let exporter = InMemorySpanExporter::default();
        let provider =
            SdkTracerProvider::builder().with_sampler(sampler).with_simple_exporter(exporter.clone()).build();
        let gate = SamplingGate::new(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")), follow_remote);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(gate), work);
        let _ = provider.force_flush();
        let mut names: Vec<String> =
            exporter.get_finished_spans().unwrap_or_default().into_iter().map(|s| s.name.to_string()).collect();
        names.sort();
        names
    }

    /// As `init` composes it for a ratio sampler: roots decided at creation. Returns the exported
    /// spans.
    fn run_deciding_roots(
        ratio: f64,
        parent_based: bool,
        work: impl FnOnce(),
    ) -> Vec<opentelemetry_sdk::trace::SpanData> {
        let exporter = InMemorySpanExporter::default();
        let sampler = match parent_based {
            true => Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))),
            false => Sampler::TraceIdRatioBased(ratio),
        };
        let provider = SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_id_generator(PinnedTraceIds::default())
            .with_simple_exporter(exporter.clone())
            .build();
        let bridge = tracing_opentelemetry::layer().with_tracer(GateTracer::new(&provider, "t"));
        let gate = SamplingGate::new(bridge, parent_based).deciding_roots(ratio);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(gate), work);
        let _ = provider.force_flush();
        exporter.get_finished_spans().unwrap_or_default()
    }

    fn remote(traceparent: &str) -> opentelemetry::Context {
        TraceContextPropagator::new()
            .extract(&std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]))
    }

    #[test]
    fn roots_are_decided_at_creation_on_the_trace_id_the_sdk_then_uses() {
        const ROOTS: usize = 400;
        let bound = ratio_bound(0.5);
        let mut held = Vec::new();
        let spans = run_deciding_roots(0.5, true, || {
            for _ in 0..ROOTS {
                let root = tracing::info_span!("root");
                let _in_root = root.enter();
                let _child = tracing::info_span!("child").entered();
                if !root.context().span().span_context().is_valid() {
                    // Held back at creation: a context of its own, not sampled, for propagation.
                    let sc = span_context(&root).expect("a dropped root has a marker");
                    assert!(sc.is_valid() && !sc.is_sampled() && !ratio_keeps(bound, sc.trace_id()));
                    held.push(sc.trace_id());
                }
            }
        });
        let roots: Vec<_> = spans.iter().filter(|s| s.name == "root").collect();
        // Binomial(400, 0.5): outside 120..=280 with probability below 1e-9.
        assert!((120..=280).contains(&roots.len()), "{} of {ROOTS} roots kept", roots.len());
        assert_eq!(roots.len() + held.len(), ROOTS);
        for root in &roots {
            // The SDK started the root with the trace id the gate drew and judged.
            assert!(ratio_keeps(bound, root.span_context.trace_id()), "{:?}", root.span_context);
            let children: Vec<_> = spans.iter().filter(|s| s.parent_span_id == root.span_context.span_id()).collect();
            assert_eq!(children.len(), 1, "the kept root's child arrives with it");
            assert_eq!(children[0].span_context.trace_id(), root.span_context.trace_id());
        }
        assert_eq!(spans.len(), roots.len() * 2, "children of dropped roots are dropped too");
    }

    #[test]
    fn a_plain_ratio_sampler_keeps_as_many_roots_as_the_sdk_alone() {
        // Without the pinned id the SDK would draw again: about ratio² of the roots.
        let spans = run_deciding_roots(0.5, false, || {
            for _ in 0..400 {
                let _root = tracing::info_span!("root").entered();
            }
        });
        assert!((120..=280).contains(&spans.len()), "{} of 400 roots kept", spans.len());
    }

    #[test]
    fn set_parent_on_a_root_works_where_documented() {
        let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        // `with_remote_parent`: decided with the remote parent, under a ratio that drops every root.
        let spans = run_deciding_roots(0.0, true, || {
            let request = with_remote_parent(&remote(sampled), || tracing::info_span!("request"));
            let _in_request = request.enter();
            let _child = tracing::info_span!("child").entered();
            let ignored = with_remote_parent(&remote(unsampled), || tracing::info_span!("unsampled"));
            let sc = span_context(&ignored).expect("marker");
            assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
            assert!(!sc.is_sampled());
            // A root that exists before its parent is given was dropped at creation: ignored.
            let late = tracing::info_span!(parent: None, "late");
            assert!(late.set_parent(remote(sampled)).is_ok());
            late.in_scope(|| {});
        });
        let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        names.sort();
        assert_eq!(names, ["child", "request"]);
        let request = spans.iter().find(|s| s.name == "request").expect("request");
        assert_eq!(request.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(request.span_context.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        // A remote context attached while the span is created decides as well.
        let spans = run_deciding_roots(0.0, true, || {
            let _attached = remote(sampled).attach();
            let _request = tracing::info_span!("attached").entered();
        });
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
        // A plain ratio sampler judges the remote trace id (low bits 0: kept by any ratio above 0).
        let spans = run_deciding_roots(0.5, false, || {
            let cx = remote("00-4bf92f3577b34da60000000000000000-00f067aa0ba902b7-00");
            with_remote_parent(&cx, || tracing::info_span!("request")).in_scope(|| {});
        });
        assert_eq!(spans.len(), 1);
        // Samplers that keep roots leave `set_parent` as it always was.
        let names = run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, || {
            let span = tracing::info_span!("late");
            assert!(span.set_parent(remote(unsampled)).is_ok());
            span.in_scope(|| {});
        });
        assert!(names.is_empty(), "the unsampled remote parent decided: {names:?}");
    }

    #[test]
    fn markers_past_the_table_or_with_a_trace_state_go_to_extensions_and_still_propagate() {
        let boxed = || {
            tracing::dispatcher::get_default(|d| d.downcast_ref::<HeldSpans>().map(|h| h.boxed.load(Ordering::Relaxed)))
        };
        let spans = run_deciding_roots(0.0, true, || {
            let root = tracing::info_span!("root");
            let trace_id = span_context(&root).expect("a dropped root has a marker").trace_id();
            let _in_root = root.enter();
            let open: Vec<_> = (0..crate::sync::SPAN_TABLE_SLOTS * 2).map(|_| tracing::info_span!("child")).collect();
            assert!(boxed().is_some_and(|n| n > 0), "more spans held back than the table has slots");
            for span in &open {
                assert_eq!(span_context(span).map(|sc| sc.trace_id()), Some(trace_id));
                span.in_scope(|| {
                    let grandchild = tracing::info_span!("grandchild");
                    assert_eq!(
                        span_context(&grandchild).map(|sc| (sc.trace_id(), sc.is_sampled())),
                        Some((trace_id, false))
                    );
                });
            }
            drop(open);
            assert_eq!(boxed(), Some(0), "markers in extensions are released at close");
            let cx = TraceContextPropagator::new().extract(&std::collections::HashMap::from([
                ("traceparent".to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string()),
                ("tracestate".to_string(), "vendor=v1".to_string()),
            ]));
            let stated = with_remote_parent(&cx, || tracing::info_span!("stated"));
            let sc = span_context(&stated).expect("marker");
            assert_eq!(
                (sc.trace_state().header(), sc.is_remote(), sc.is_sampled()),
                ("vendor=v1".to_string(), true, false)
            );
            assert_eq!(boxed(), Some(1));
            drop(stated);
            assert_eq!(boxed(), Some(0));
        });
        assert!(spans.is_empty(), "{spans:?}");
    }

    fn traceparent(span: &tracing::Span) -> Option<String> {
        let sc = span_context(span)?;
        let mut carrier = std::collections::HashMap::new();
        TraceContextPropagator::new()
            .inject_context(&opentelemetry::Context::new().with_remote_span_context(sc), &mut carrier);
        carrier.remove("traceparent")
    }

    #[test]
    fn children_of_an_unsampled_span_skip_the_bridge_and_keep_its_trace() {
        let mut seen = None;
        let names = run(Sampler::TraceIdRatioBased(0.0), false, || {
            let root = tracing::info_span!("root");
            let _in_root = root.enter();
            let root_sc = root.context().span().span_context().clone();
            assert!(root_sc.is_valid() && !root_sc.is_sampled(), "the bridge decided the root");
            let child = tracing::info_span!("child");
            let explicit = tracing::info_span!(parent: &child, "explicit");
            {
                let _in_child = child.enter();
                let grandchild = tracing::info_span!("grandchild");
                // Held back: no context of their own, their unsampled parent's for propagation.
                assert!(!child.context().span().span_context().is_valid());
                for held in [&child, &explicit, &grandchild] {
                    let sc = span_context(held).expect("marker");
                    assert_eq!(sc.trace_id(), root_sc.trace_id());
                    assert!(!sc.is_sampled());
                }
                seen = traceparent(&grandchild);
                tracing::error!("an event in a held-back span");
                grandchild.record("x", 1);
            }
            // A new root is decided afresh, not by the context around it.
            let fresh = tracing::info_span!(parent: None, "fresh");
            assert!(fresh.context().span().span_context().is_valid());
        });
        assert!(names.is_empty(), "{names:?}");
        let tp = seen.expect("a traceparent");
        assert!(tp.ends_with("-00"), "{tp}");
    }

    #[test]
    fn sampled_traces_are_untouched() {
        let names = run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, || {
            let root = tracing::info_span!("root");
            let _in_root = root.enter();
            let child = tracing::info_span!("child");
            let _in_child = child.enter();
            let _grandchild = tracing::info_span!(parent: &child, "grandchild").entered();
            assert!(span_context(&child).expect("tracked").is_sampled());
        });
        assert_eq!(names, ["child", "grandchild", "root"]);
    }

    #[test]
    fn an_unsampled_remote_parent_decides_only_for_parent_based_samplers() {
        let remote = TraceContextPropagator::new().extract(&std::collections::HashMap::from([(
            "traceparent".to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".to_string(),
        )]));
        let work = |remote: opentelemetry::Context| {
            move || {
                let _attached = remote.attach();
                let _request = tracing::info_span!("request").entered();
            }
        };
        assert!(run(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)), true, work(remote.clone())).is_empty());
        // A ratio sampler decides on the trace id whatever the remote flag says: the bridge decides.
        assert_eq!(run(Sampler::TraceIdRatioBased(1.0), false, work(remote)), ["request"]);
    }

    #[test]
    fn a_held_back_span_entered_elsewhere_keeps_its_children_out() {
        let names = run(Sampler::TraceIdRatioBased(0.0), false, || {
            let root = tracing::info_span!("root");
            let held = root.in_scope(|| tracing::info_span!("held"));
            drop(root);
            // Entered with no OTel context current: its children still inherit its decision.
            let _in_held = held.enter();
            let child = tracing::info_span!("child");
            assert!(span_context(&child).is_some_and(|sc| !sc.is_sampled()));
        });
        assert!(names.is_empty(), "{names:?}");
    }
}
