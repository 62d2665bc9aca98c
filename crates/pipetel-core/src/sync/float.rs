//! An `f64` kept in an `AtomicU64` (its bits): gauges, counters' fractions, histogram sums.

use std::sync::atomic::{AtomicU64, Ordering};

/// The value `a` holds.
#[inline]
pub(crate) fn load_f64(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Ordering::Relaxed))
}

/// Adds `n` to the value `a` holds (a compare-and-swap loop: no lost update under contention).
#[inline]
pub(crate) fn add_f64(a: &AtomicU64, n: f64) {
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| Some((f64::from_bits(bits) + n).to_bits()));
}
