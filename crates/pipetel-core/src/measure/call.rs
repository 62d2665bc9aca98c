//! The guard of one measured call, and the helpers the generated code calls around it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::task::{Context, Poll};

use super::site::{Handles, Sink, Site};
use super::size::Size;
use crate::exposition::exemplar::{self, Exemplars, SpanIds};

/// The guard of one call: counts it on creation and records its outcome on `finish_*`, or on
/// drop when the call panicked or its future was dropped.
#[derive(Debug)]
pub struct Call {
    site: &'static Site,
    handles: &'static Handles,
    mark_span: bool,
    /// A raw reading of [`crate::sync::clock`] at the call's start: the span-metrics layer's, when
    /// it timed the span (see [`crate::span_metrics`]), else the call's own.
    start: u64,
    /// The raw reading taken when the call completed (0 before, or when not timed), handed
    /// to the span-metrics layer as the span's end.
    end: AtomicU64,
    /// The span-metrics layer timed the span (`start` is its reading): it gets `end`.
    layer_timed: bool,
    // Atomic rather than a `Cell` so an async fn's future, which holds `&Call` across its
    // await, stays `Send`.
    done: AtomicBool,
    span: tracing::Span,
    /// An async call's exemplar ids, read on its first poll: [`UNREAD`], [`NO_IDS`] (the
    /// filter allows none), or [`IDS`] (in `ids`).
    ids_state: AtomicU8,
    ids: [AtomicU64; 3],
}

const UNREAD: u8 = 0;
const NO_IDS: u8 = 1;
const IDS: u8 = 2;

impl Call {
    /// Counts a call of `site` and keeps its span.
    #[inline]
    pub fn start(site: &'static Site, span: tracing::Span) -> Self {
        let handles = site.handles();
        if handles.enabled {
            site.cells.calls.fetch_add(1, Ordering::Release);
        }
        // The span-metrics layer read the clock as it created the span: share that reading.
        let shared = if crate::span_metrics::handoff::active() {
            span.id()
                .zip(span.metadata())
                .and_then(|(id, meta)| crate::span_metrics::handoff::take_start(id.into_u64(), meta))
        } else {
            None
        };
        let start = match shared {
            Some(ticks) => ticks,
            None if handles.duration.is_on() => crate::sync::clock().raw(),
            None => 0,
        };
        Call {
            site,
            handles,
            mark_span: site.info.mark_span,
            start,
            end: AtomicU64::new(0),
            layer_timed: shared.is_some(),
            done: AtomicBool::new(false),
            span,
            ids_state: AtomicU8::new(UNREAD),
            ids: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Reads the exemplar ids from the current context (inside the call's span), once.
    #[inline]
    fn capture_ids(&self) {
        if self.ids_state.load(Ordering::Relaxed) != UNREAD {
            return;
        }
        match exemplar::current() {
            Some(ids) => {
                self.ids[0].store((ids.trace_id >> 64) as u64, Ordering::Relaxed);
                self.ids[1].store(ids.trace_id as u64, Ordering::Relaxed);
                self.ids[2].store(ids.span_id, Ordering::Relaxed);
                self.ids_state.store(IDS, Ordering::Release);
            }
            None => self.ids_state.store(NO_IDS, Ordering::Relaxed),
        }
    }

    /// The ids a record made now carries: those an async call captured, else the current
    /// context's (a sync call records inside its span).
    #[inline]
    fn exemplar_ids(&self) -> Option<SpanIds> {
        match self.ids_state.load(Ordering::Acquire) {
            IDS => Some(SpanIds {
                trace_id: (u128::from(self.ids[0].load(Ordering::Relaxed)) << 64)
                    | u128::from(self.ids[1].load(Ordering::Relaxed)),
                span_id: self.ids[2].load(Ordering::Relaxed),
            }),
            NO_IDS => None,
            _ => exemplar::current(),
        }
    }

    /// Keeps `value`, just recorded (`kept`: where, from the sink's `record`), as an exemplar.
    #[inline]
    fn offer(&self, kept: Option<(&Exemplars, Option<usize>)>, value: f64) {
        if let Some((cells, bucket)) = kept {
            if let Some(ids) = self.exemplar_ids() {
                cells.record(bucket, value, ids);
            }
        }
    }

    /// Whether the call is counted (stage metrics were on when it started).
    pub(crate) fn counted(&self) -> bool {
        self.handles.enabled
    }

    /// The call's span.
    #[inline]
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Records the `input_size` expression.
    #[inline]
    pub fn input_size<N: Size>(&self, size: N) {
        if self.handles.input.is_on() {
            let size = size.into_size();
            self.offer(self.handles.input.record(size), size as f64);
        }
    }

    /// Records the `output_size` expression.
    #[inline]
    pub fn output_size<N: Size>(&self, size: N) {
        if self.handles.output.is_on() {
            let size = size.into_size();
            self.offer(self.handles.output.record(size), size as f64);
        }
    }

    /// The call returned (a value that is not a `Result`).
    #[inline]
    pub fn finish_ok(&self) {
        self.complete(None);
    }

    /// The call returned a `Result`; `Err` counts as an error.
    #[inline]
    pub fn finish_result<T, E>(&self, result: &Result<T, E>) {
        self.complete(result.is_err().then_some("err"));
    }

    #[inline]
    fn complete(&self, error: Option<&'static str>) {
        // Only the thread running the call (or polling its future) touches `done`: a load and
        // a store, no read-modify-write.
        if self.done.load(Ordering::Relaxed) {
            return;
        }
        self.done.store(true, Ordering::Relaxed);
        if let Some(kind) = error {
            if self.mark_span {
                self.span.record("error", true);
            }
            if self.handles.enabled {
                let cells = &self.site.cells;
                let cell = if kind == "panic" { &cells.errors_panic } else { &cells.errors_err };
                cell.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !self.handles.enabled {
            return;
        }
        self.site.cells.ended.fetch_add(1, Ordering::Release);
        match &self.handles.duration {
            Sink::Off => {}
            // The pull endpoint alone: the two readings' difference is bucketed and summed
            // as it is; seconds are computed only for an exemplar.
            Sink::Direct(h) => {
                let end = crate::sync::clock().raw();
                self.end.store(end, Ordering::Relaxed);
                let ticks = if end > self.start { end.wrapping_sub(self.start) } else { 0 };
                let i = h.record_ticks(ticks);
                if let Some(ids) = self.exemplar_ids() {
                    h.exemplars().record_at(Some(i), crate::sync::ticks_to_seconds(ticks), ids, end);
                }
            }
            sink @ Sink::Otel(..) => {
                let end = crate::sync::clock().raw();
                self.end.store(end, Ordering::Relaxed);
                let seconds = crate::sync::clock().delta_as_nanos(self.start, end) as f64 / 1e9;
                self.offer(sink.record(seconds), seconds);
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.done.load(Ordering::Relaxed) {
            if std::thread::panicking() {
                self.complete(Some("panic"));
            } else {
                // A future dropped before completion: not an error, no duration.
                self.done.store(true, Ordering::Relaxed);
                if self.handles.enabled {
                    self.site.cells.ended.fetch_add(1, Ordering::Release);
                }
            }
        }
        // Close the span with the reading the call ended on, so the span-metrics layer
        // records the same duration without reading the clock again.
        let end = *self.end.get_mut();
        if end != 0 && self.layer_timed {
            if let Some(id) = self.span.id() {
                let span = std::mem::replace(&mut self.span, tracing::Span::none());
                crate::span_metrics::handoff::end_while(id.into_u64(), end, || drop(span));
            }
        }
    }
}

/// Polls `future` inside the call's span and records a panic at the moment it unwinds out
/// of a poll: an async fn's locals are only dropped when its future is, typically after the
/// executor caught the panic, when `std::thread::panicking()` no longer tells.
pub fn poll_in<'a, F: Future + ?Sized>(
    call: &'a Call,
    mut future: Pin<&'a mut F>,
) -> impl Future<Output = F::Output> + 'a {
    std::future::poll_fn(move |cx: &mut Context<'_>| -> Poll<F::Output> {
        let _entered = call.span.enter();
        call.capture_ids();
        let _bomb = PanicBomb(call);
        future.as_mut().poll(cx)
    })
}

struct PanicBomb<'a>(&'a Call);

impl Drop for PanicBomb<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.complete(Some("panic"));
        }
    }
}

/// The `Ok` value of a `Result` (`output_size` is recorded for successes only).
#[inline]
pub fn ok_ref<T, E>(result: &Result<T, E>) -> Option<&T> {
    result.as_ref().ok()
}

/// Applies the closure form of `output_size` (`output_size = |r| r.len()`).
#[inline]
pub fn apply<T: ?Sized, N, F: FnOnce(&T) -> N>(value: &T, f: F) -> N {
    f(value)
}
