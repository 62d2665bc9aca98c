//! The clock readings a measured call and this layer share (see the `span_metrics` module docs): two
//! thread-local cells, each valid only for the span whose id (and, for the start, callsite) it
//! names, so a reading can never be taken by another span.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracing::Metadata;

thread_local! {
    /// `(span id, callsite metadata address, raw clock reading)` of the span the layer
    /// created last on this thread; zeros when none is offered.
    static START: Cell<(u64, usize, u64)> = const { Cell::new((0, 0, 0)) };
    /// `(span id, raw clock reading)` of the span a measured call is closing now.
    static END: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Span-metrics layers alive: while none is, a measured call skips the handoff.
pub(super) static LAYERS: AtomicUsize = AtomicUsize::new(0);

/// Whether a span-metrics layer exists to share readings with.
#[inline]
pub(crate) fn active() -> bool {
    LAYERS.load(Ordering::Relaxed) != 0
}

/// The layer created span `id` of callsite `meta` and read the clock at `ticks`.
#[inline]
pub(super) fn offer_start(id: u64, meta: &'static Metadata<'static>, ticks: u64) {
    START.with(|cell| cell.set((id, std::ptr::from_ref(meta) as usize, ticks)));
}

/// The creation reading of span `id` of callsite `meta` when the layer timed it, taken
/// (a second call gets `None`). A measured call asks right after creating its span.
#[inline]
pub(crate) fn take_start(id: u64, meta: &'static Metadata<'static>) -> Option<u64> {
    START.with(|cell| {
        let (offered, at, ticks) = cell.get();
        if id == 0 || offered != id || at != std::ptr::from_ref(meta) as usize {
            return None;
        }
        cell.set((0, 0, 0));
        Some(ticks)
    })
}

/// Runs `close` (which drops span `id`) with `ticks` as the span's end for the layer.
#[inline]
pub(crate) fn end_while(id: u64, ticks: u64, close: impl FnOnce()) {
    END.with(|cell| cell.set((id, ticks)));
    close();
    END.with(|cell| cell.set((0, 0)));
}

/// The end reading handed over for span `id`, if it is closing inside [`end_while`].
#[inline]
pub(super) fn end_of(id: u64) -> Option<u64> {
    END.with(|cell| {
        let (closing, ticks) = cell.get();
        (closing == id && id != 0).then_some(ticks)
    })
}
