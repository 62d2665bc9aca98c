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

mod gate;
mod held;
mod remote;
mod tracer;

pub use gate::SamplingGate;
pub use held::span_context;
pub use remote::with_remote_parent;
pub use tracer::{GateTracer, PinnedTraceIds};

#[cfg(test)]
mod tests;
