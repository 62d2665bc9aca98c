//! Creating a span under a remote parent the gate decides with.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use opentelemetry::trace::{SpanContext, TraceContextExt as _};

thread_local! {
    /// The parent given to [`with_remote_parent`] while its span is created.
    pub(super) static REMOTE: RefCell<Option<SpanContext>> = const { RefCell::new(None) };
}

/// Threads inside [`with_remote_parent`] now: while none is, a new span skips reading [`REMOTE`].
pub(super) static REMOTE_PENDING: AtomicUsize = AtomicUsize::new(0);

/// Creates a span with `make` as a child of the remote span in `parent` (a context extracted
/// from a request's headers): the gate decides it with that parent, then `set_parent` makes it
/// the span's parent. Use it instead of calling `set_parent` on a span created as a root when a
/// ratio sampler is configured: such a root may already have been dropped at creation (see
/// [roots decided at creation](super#roots-decided-at-creation)). Only the first span `make`
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
/// let span = pipetel_core::sampling::with_remote_parent(&parent, || tracing::info_span!("request"));
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
