//! The gate: what it decides for a new span, and the bridge's callbacks it forwards or skips.

use std::sync::atomic::Ordering;

use opentelemetry::trace::{SpanContext, TraceContextExt as _, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::held::HeldSpans;
use super::remote::{REMOTE, REMOTE_PENDING};
use super::tracer::CREATING;

/// The SDK's `TraceIdRatioBased` bound: a trace id is kept when its low 64 bits, shifted right
/// once, are below it.
pub(super) fn ratio_bound(ratio: f64) -> u64 {
    (ratio.max(0.0) * (1u64 << 63) as f64) as u64
}

/// The SDK's `TraceIdRatioBased` decision on `trace_id` for the bound of [`ratio_bound`].
pub(super) fn ratio_keeps(bound: u64, trace_id: TraceId) -> bool {
    let low = u128::from_be_bytes(trace_id.to_bytes()) as u64;
    (low >> 1) < bound
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
/// [module documentation](super). `init` installs it; use it directly only when composing a
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
///     .with(pipetel_core::sampling::SamplingGate::new(bridge, false));
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
    /// [roots decided at creation](super#roots-decided-at-creation). The bridge must use a
    /// [`GateTracer`](super::GateTracer) of a provider built with
    /// [`PinnedTraceIds`](super::PinnedTraceIds), or the SDK draws a kept root's
    /// trace id again and decides afresh (keeping `ratio²` of the roots).
    ///
    /// ```
    /// use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    /// use pipetel_core::sampling::{GateTracer, PinnedTraceIds, SamplingGate};
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
    pub fn passthrough(bridge: L) -> Self {
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

    /// A span whose parent is the remote `parent` ([`with_remote_parent`](super::with_remote_parent)).
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
