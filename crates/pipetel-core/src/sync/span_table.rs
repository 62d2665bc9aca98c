//! One fixed open-addressing table of atomics keyed by span id, for the two places that keep
//! something per open span without touching the span's extensions: the span-metrics layer's
//! open spans (their timing) and the sampling gate's held-back spans (their marker).
//!
//! A slot is claimed with one compare-and-swap on its id and freed with one store, so keeping a
//! span costs a few uncontended atomic operations instead of an allocation in its extensions and
//! a lookup of the span at its close. A span's id stays unique while it is open, and its slot is
//! freed at its close, before the registry can reuse the id. A probe starts at
//! [`span_table_home`] and looks at [`PROBES`] slots; a span that finds none free is the owner's
//! to keep elsewhere (its extensions).

use std::sync::atomic::{AtomicU64, Ordering};

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

/// Slots a lookup or an insertion probes before giving up.
const PROBES: usize = 16;
/// The id of a slot that never held a span: a lookup that meets one stops.
const EMPTY: u64 = 0;
/// The id of a slot whose span closed: free to claim, but a lookup goes on past it.
const FREED: u64 = u64::MAX;

/// A slot of a [`SpanTable`]: the id of the span it holds (or [`EMPTY`] / [`FREED`]) beside what
/// the owner keeps for that span. Implementations are `#[repr(align(64))]`, a cache line of their
/// own, so threads working on different spans do not contend.
pub(crate) trait SpanSlot: Default {
    /// The id cell.
    fn id(&self) -> &AtomicU64;
}

/// [`SPAN_TABLE_SLOTS`] slots of `S`, keyed by span id; see the [module docs](self).
pub(crate) struct SpanTable<S> {
    slots: Box<[S]>,
}

impl<S: SpanSlot> SpanTable<S> {
    /// A table of empty slots.
    pub(crate) fn new() -> Self {
        SpanTable { slots: (0..SPAN_TABLE_SLOTS).map(|_| S::default()).collect() }
    }

    /// Whether `key` can be kept here (the two ids that mark empty and freed slots cannot).
    #[inline]
    pub(crate) fn accepts(&self, key: u64) -> bool {
        key != EMPTY && key != FREED
    }

    /// Claims a slot for `key` and hands it to `fill`; `false` when none was free within
    /// [`PROBES`] (or `key` is not [accepted](Self::accepts)).
    #[inline]
    pub(crate) fn insert(&self, key: u64, fill: impl FnOnce(&S)) -> bool {
        if key == EMPTY || key == FREED {
            return false;
        }
        let home = span_table_home(key);
        for i in 0..PROBES {
            let slot = &self.slots[(home + i) % SPAN_TABLE_SLOTS];
            let current = slot.id().load(Ordering::Relaxed);
            if current != EMPTY && current != FREED {
                continue;
            }
            if slot.id().compare_exchange(current, key, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                fill(slot);
                return true;
            }
        }
        false
    }

    /// The slot holding `key`, if any.
    #[inline]
    pub(crate) fn find(&self, key: u64) -> Option<&S> {
        let home = span_table_home(key);
        for i in 0..PROBES {
            let slot = &self.slots[(home + i) % SPAN_TABLE_SLOTS];
            match slot.id().load(Ordering::Acquire) {
                id if id == key => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// Frees `slot` (found with [`SpanTable::find`]) for the next span.
    #[inline]
    pub(crate) fn remove(&self, slot: &S) {
        slot.id().store(FREED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[derive(Default)]
    struct Cell {
        id: AtomicU64,
        value: AtomicU64,
    }

    impl SpanSlot for Cell {
        fn id(&self) -> &AtomicU64 {
            &self.id
        }
    }

    /// `n` span ids that share one home: they differ only in the generation bits the home ignores.
    fn colliding(n: u64) -> Vec<u64> {
        (1..=n).map(|generation| 7 | (generation << 51)).collect()
    }

    #[test]
    fn a_kept_span_is_found_until_it_is_removed() {
        let table: SpanTable<Cell> = SpanTable::new();
        assert!(table.insert(42, |slot| slot.value.store(9, Ordering::Relaxed)));
        let slot = table.find(42).expect("kept");
        assert_eq!(slot.value.load(Ordering::Relaxed), 9);
        assert!(table.find(43).is_none());
        table.remove(slot);
        assert!(table.find(42).is_none());
    }

    #[test]
    fn the_ids_that_mark_empty_and_freed_slots_are_refused() {
        let table: SpanTable<Cell> = SpanTable::new();
        for key in [EMPTY, FREED] {
            assert!(!table.accepts(key));
            assert!(!table.insert(key, |_| panic!("no slot for {key}")));
        }
        assert!(table.accepts(1));
    }

    #[test]
    fn colliding_spans_probe_on_and_the_rest_are_turned_away() {
        let table: SpanTable<Cell> = SpanTable::new();
        let keys = colliding(PROBES as u64 + 1);
        assert!(keys.iter().all(|k| span_table_home(*k) == span_table_home(keys[0])));
        for (i, key) in keys.iter().enumerate().take(PROBES) {
            assert!(table.insert(*key, |slot| slot.value.store(i as u64, Ordering::Relaxed)), "key {i}");
        }
        assert!(!table.insert(keys[PROBES], |_| {}), "past the probe limit");
        // A freed slot in the middle of the run is claimed again, and lookups go on past it.
        let third = table.find(keys[2]).expect("kept");
        table.remove(third);
        assert!(table.find(keys[2]).is_none());
        assert_eq!(table.find(keys[5]).map(|s| s.value.load(Ordering::Relaxed)), Some(5));
        assert!(table.insert(keys[PROBES], |slot| slot.value.store(99, Ordering::Relaxed)));
        assert_eq!(table.find(keys[PROBES]).map(|s| s.value.load(Ordering::Relaxed)), Some(99));
    }

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
