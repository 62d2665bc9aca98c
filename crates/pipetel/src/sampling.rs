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
//! they get a marker with their parent's span context instead of span data. With
//! a parent-based sampler, a *remote* parent that was not sampled (a `traceparent` ending in
//! `-00`) decides the same way.
//!
//! What a held-back span gives up: it has no OTel span of its own, so
//! `OpenTelemetrySpanExt::context()` on it returns an empty context and `set_parent` on it is
//! ignored. pipetel's own propagation ([`span_context`], used by `Stage::traceparent` and the
//! stage and worker rows) reads the marker and hands on the unsampled parent's context, so the
//! next process learns that the trace is not sampled.
//!
//! Root spans still go to the bridge whole: their decision must wait for a possible
//! `set_parent`.

use opentelemetry::trace::{SpanContext, TraceContextExt as _};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Marks a span held back from the bridge; holds the span context of its unsampled parent.
#[derive(Debug, Clone)]
pub(crate) struct Unsampled(pub(crate) SpanContext);

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
}

impl<L> SamplingGate<L> {
    /// Wraps `bridge`. `follow_remote`: the tracer's sampler is parent-based, so a remote
    /// parent that was not sampled decides for its local children too (pass `false` for a bare
    /// trace-id-ratio sampler, which decides on the trace id whatever the remote flag says).
    ///
    /// Only for samplers that keep a span exactly when its local parent was kept (parent-based
    /// samplers, trace-id-ratio, always-on, always-off).
    pub fn new(bridge: L, follow_remote: bool) -> Self {
        SamplingGate { inner: bridge, active: true, follow_remote }
    }

    /// Wraps `bridge` without holding anything back (for samplers that keep every span).
    pub(crate) fn passthrough(bridge: L) -> Self {
        SamplingGate { inner: bridge, active: false, follow_remote: false }
    }

    /// The unsampled context the new span inherits, `None` when the bridge must see it.
    fn unsampled_parent<S>(&self, attrs: &Attributes<'_>, ctx: &Context<'_, S>) -> Option<SpanContext>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(parent) = attrs.parent() {
            return ctx.span(parent).and_then(|p| p.extensions().get::<Unsampled>().map(|u| u.0.clone()));
        }
        if !attrs.is_contextual() {
            return None;
        }
        // The bridge takes a contextual span's parent from the current OTel context, which
        // entering a span it tracks makes current: one thread-local read decides the common case.
        let current = opentelemetry::Context::map_current(|cx| {
            let span = cx.span();
            let sc = span.span_context();
            sc.is_valid().then(|| (!sc.is_sampled() && (!sc.is_remote() || self.follow_remote)).then(|| sc.clone()))
        });
        match current {
            Some(decided) => decided,
            // No OTel span is current: a root, or a span held back here and entered where its
            // parent's context is not current.
            None => ctx.lookup_current().and_then(|p| p.extensions().get::<Unsampled>().map(|u| u.0.clone())),
        }
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
            if let Some(parent) = self.unsampled_parent(attrs, &ctx) {
                if let Some(span) = ctx.span(id) {
                    span.extensions_mut().replace(Unsampled(parent));
                }
                return;
            }
        }
        self.inner.on_new_span(attrs, id, ctx);
    }

    // The bridge finds no span data for a held-back span in any of these and does nothing.
    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
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
        self.inner.on_enter(id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_exit(id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }

    crate::sync::forward_downcast_raw!(inner);
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
        let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
        let data = registry.span(id)?;
        let extensions = data.extensions();
        extensions.get::<Unsampled>().map(|u| u.0.clone())
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
