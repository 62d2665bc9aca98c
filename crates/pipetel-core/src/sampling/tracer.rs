//! The SDK tracer and id generator that start a root the gate kept with the trace id it drew.

use std::borrow::Cow;
use std::cell::Cell;

use opentelemetry::trace::{
    Link, SpanBuilder, SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer};

thread_local! {
    /// The trace id of the root the gate is handing to the bridge, for [`GateTracer::span_builder`].
    pub(super) static CREATING: Cell<Option<TraceId>> = const { Cell::new(None) };
    /// The trace id the SDK must give the root it is starting, for [`PinnedTraceIds`].
    static STARTING: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// The SDK tracer behind the bridge of a [`SamplingGate::deciding_roots`](super::SamplingGate::deciding_roots) gate: a root the gate
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
