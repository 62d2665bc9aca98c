//! The crate's concurrency primitives, and the only module with `unsafe` code: everything else
//! is `#![deny(unsafe_code)]`. Each primitive has a safe API whose soundness argument is
//! written beside its one `unsafe` block.
//!
//! - [`Published`]: a value read without a lock on a hot path, replaced rarely, every replaced
//!   value kept alive as long as the owner (the registry's OTel histograms and bound series);
//! - [`StaticCell`]: an atomic `Option<&'static T>` (call sites' resolved handles, span-metrics
//!   callsites);
//! - [`SpinLock`]: a lock for critical sections of a few nanoseconds (summary observations);
//! - [`clock`]: a cheap monotonic clock and the process-wide coarse-time thread;
//! - [`current_tid`]: the OS id of the calling thread;
//! - [`span_table_home`]: where a span's id starts its probe in the fixed open-addressing
//!   tables of open spans (span metrics) and held-back spans (sampling gate);
//! - [`forward_downcast_raw!`]: the one `unsafe` method a
//!   `tracing` layer that wraps another layer must forward;
//! - the poison policy: [`lock`], [`read`] and [`write`].
//!
//! # Poisoning
//! A lock is poisoned when a thread panicked while holding it. pipetel recovers the guard and
//! goes on: the state behind its locks is updated by code that validates first and does not
//! panic halfway, and telemetry must never take a program down because some other thread
//! panicked. Every lock in the crate is taken through these three functions.

pub(crate) mod clock;
mod float;
mod layer;
mod poison;
mod publish;
mod spin;
mod thread;

pub(crate) use clock::{clock, ticks_per_second, ticks_to_seconds};
pub(crate) use float::{add_f64, load_f64};
pub(crate) use layer::forward_downcast_raw;
pub(crate) use poison::{lock, read, write};
pub(crate) use publish::{Published, StaticCell};
pub(crate) use spin::{SpinGuard, SpinLock};
pub(crate) use thread::current_tid;

/// Slots in a table indexed by [`spread`] or [`span_table_home`].
pub(crate) const SPAN_TABLE_SLOTS: usize = 1024;

/// Fibonacci hashing of `key` to a slot below [`SPAN_TABLE_SLOTS`]: the top bits of the
/// product, spread over the table.
#[inline]
pub(crate) fn spread(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SPAN_TABLE_SLOTS.trailing_zeros())) as usize
}

/// Where span `id` starts its probe in a table of [`SPAN_TABLE_SLOTS`]. The registry's span
/// ids are its slab keys plus one: a slot address in the low 38 bits, the thread's shard in the
/// next 13, and above them a generation that changes each time the slot is reused. The
/// generation is left out, so a slab slot reused span after span (a loop, a request's tree)
/// keeps its table slot and that cache line stays hot; any other id works as well, spread by
/// the same hash.
#[inline]
pub(crate) fn span_table_home(id: u64) -> usize {
    const SLOT_AND_SHARD: u64 = (1 << 51) - 1;
    spread(id & SLOT_AND_SHARD)
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// The registry gives a reused slot a new id (its generation changed); the slot's home in
    /// the span tables stays the same, and distinct open spans spread over the table.
    #[test]
    fn a_reused_registry_slot_keeps_its_span_table_home() {
        let subscriber = tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new());
        tracing::subscriber::with_default(subscriber, || {
            let id = |span: &tracing::Span| span.id().map(|id| id.into_u64()).unwrap_or(0);
            let first = id(&tracing::info_span!("first"));
            let again = id(&tracing::info_span!("again"));
            assert_ne!(first, again, "a reused slot has a new id");
            assert_eq!(span_table_home(first), span_table_home(again));
            let open: Vec<tracing::Span> = (0..64).map(|_| tracing::info_span!("open")).collect();
            let homes: std::collections::BTreeSet<usize> = open.iter().map(|s| span_table_home(id(s))).collect();
            assert!(homes.len() >= 48, "64 open spans on {} homes", homes.len());
            assert!(homes.iter().all(|h| *h < SPAN_TABLE_SLOTS));
        });
    }
}
