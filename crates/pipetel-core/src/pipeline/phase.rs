//! Phases: where a shard's wall time went. A shard's time is cut into slices at every phase
//! switch; each slice is added to the phase that was current during it (slot 0: outside any
//! phase). Entering a phase inside another one pauses the outer phase until the inner one ends,
//! so the phases and the time outside them always add up to the shard's wall time.
//!
//! A switch is one read of the monotonic clock, one relaxed atomic add and two relaxed stores:
//! a guard costs about two clock reads. The sampler reads the slots (and the open slice) without
//! stopping the shard.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Named phases a shard can hold; time in further names counts outside any phase (one warning).
pub const MAX_PHASES: usize = 15;
/// Longest phase name accepted, in bytes.
pub const MAX_PHASE_NAME_LEN: usize = 64;
/// The phase-name attribute's value for time outside any phase (`pipeline.stage.phase.time`).
pub const UNPHASED: &str = "unphased";

/// The conventional phase of time blocked on upstream (waiting for input).
pub const WAIT_INPUT: &str = "wait.input";
/// The conventional phase of time blocked on downstream (backpressure).
pub const WAIT_OUTPUT: &str = "wait.output";
/// The conventional phase of reads and writes.
pub const IO: &str = "io";

/// A phase name that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid phase name {name:?}: use 1 to {MAX_PHASE_NAME_LEN} characters from a-z, A-Z, 0-9, '_', '.', '-', \
     not \"{UNPHASED}\""
)]
pub struct PhaseNameError {
    /// The refused name.
    pub name: String,
}

/// Checks a phase name: it becomes part of a row field (`pipeline.phase.<name>.seconds`) and
/// a metric attribute.
pub fn check_phase_name(name: &str) -> Result<(), PhaseNameError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_PHASE_NAME_LEN
        && name != UNPHASED
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(PhaseNameError { name: name.to_string() })
    }
}

/// One shard's phase slots.
pub(crate) struct PhaseBook {
    origin: Instant,
    names: [OnceLock<Box<str>>; MAX_PHASES],
    /// Nanoseconds per slot: 0 is outside any phase, `i + 1` is `names[i]`.
    nanos: [AtomicU64; MAX_PHASES + 1],
    current: AtomicU8,
    /// Nanoseconds since `origin` at the last switch.
    since: AtomicU64,
    /// Set once the shard ended: its slices are closed.
    closed: AtomicBool,
}

impl PhaseBook {
    pub(crate) fn new(origin: Instant) -> Self {
        Self {
            origin,
            names: std::array::from_fn(|_| OnceLock::new()),
            nanos: std::array::from_fn(|_| AtomicU64::new(0)),
            current: AtomicU8::new(0),
            since: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The slot of `name`, claiming a free one on first use; 0 (outside any phase) when every
    /// slot is taken or the name is invalid (one warning each).
    pub(crate) fn slot(&self, name: &str) -> u8 {
        for (i, slot) in self.names.iter().enumerate() {
            match slot.get() {
                Some(n) if **n == *name => return (i + 1) as u8,
                Some(_) => continue,
                None => {
                    if let Err(e) = check_phase_name(name) {
                        warn_once(&e.to_string());
                        return 0;
                    }
                    let _ = slot.set(name.into());
                    // Another thread may have claimed this slot for another name meanwhile.
                    if slot.get().is_some_and(|n| **n == *name) {
                        return (i + 1) as u8;
                    }
                }
            }
        }
        warn_once(&format!(
            "a shard used more than {MAX_PHASES} phase names; time in phase {name:?} counts outside any phase"
        ));
        0
    }

    /// Makes `to` the current slot, closing the open slice; returns the slot that was current.
    #[inline]
    pub(crate) fn switch(&self, to: u8) -> u8 {
        let now = self.now();
        let from = self.current.load(Ordering::Relaxed);
        if self.closed.load(Ordering::Relaxed) {
            return from;
        }
        let since = self.since.load(Ordering::Relaxed);
        self.nanos[usize::from(from)].fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        self.since.store(now, Ordering::Relaxed);
        self.current.store(to, Ordering::Relaxed);
        from
    }

    /// Closes the open slice for good (the shard ended): later switches add nothing.
    pub(crate) fn close(&self) {
        if !self.closed.load(Ordering::Relaxed) {
            self.switch(0);
            self.closed.store(true, Ordering::Relaxed);
        }
    }

    /// The current slot (0: outside any phase). One relaxed load: the profiler's signal handler
    /// reads it.
    #[inline]
    pub(crate) fn current_slot(&self) -> u8 {
        self.current.load(Ordering::Relaxed)
    }

    /// The name of slot `slot` (`None` for 0 or an unclaimed slot).
    pub(crate) fn name(&self, slot: u8) -> Option<&str> {
        usize::from(slot).checked_sub(1).and_then(|i| self.names.get(i)).and_then(|n| n.get()).map(|n| &**n)
    }

    /// The current phase's name (`None` outside any phase).
    pub(crate) fn current(&self) -> Option<&str> {
        let slot = usize::from(self.current.load(Ordering::Relaxed));
        slot.checked_sub(1).and_then(|i| self.names[i].get()).map(|n| &**n)
    }

    /// Seconds outside any phase and per named phase (in first-use order, phases with time
    /// only), the open slice counted up to now.
    pub(crate) fn seconds(&self) -> (f64, Vec<(String, f64)>) {
        let mut nanos: Vec<u64> = self.nanos.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        if !self.closed.load(Ordering::Relaxed) {
            let open = self.now().saturating_sub(self.since.load(Ordering::Relaxed));
            nanos[usize::from(self.current.load(Ordering::Relaxed))] += open;
        }
        let secs = |n: u64| n as f64 / 1e9;
        let named = self
            .names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| Some((name.get()?.to_string(), nanos[i + 1])))
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (name, secs(n)))
            .collect();
        (secs(nanos[0]), named)
    }
}

fn warn_once(message: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(target: "pipetel", "{message} (shown once)");
    }
}

/// A phase of a running shard ([`Shard::phase`](super::Shard::phase)): from its creation to its
/// drop, the shard's time counts in the phase. Nested phases pause the outer one.
#[must_use = "the phase lasts until this guard is dropped: bind it with `let _phase = ...`"]
#[derive(Debug)]
pub struct Phase<'a> {
    book: &'a PhaseBook,
    previous: u8,
}

impl<'a> Phase<'a> {
    pub(crate) fn enter(book: &'a PhaseBook, name: &str) -> Self {
        let previous = book.switch(book.slot(name));
        Phase { book, previous }
    }

    /// Enters slot `slot` of `book`, looked up beforehand ([`PhaseBook::slot`]).
    #[inline]
    pub(crate) fn enter_slot(book: &'a PhaseBook, slot: u8) -> Self {
        Phase { book, previous: book.switch(slot) }
    }
}

impl Drop for Phase<'_> {
    #[inline]
    fn drop(&mut self) {
        self.book.switch(self.previous);
    }
}

impl std::fmt::Debug for PhaseBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhaseBook").field("current", &self.current()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn phases_and_the_rest_add_up_to_the_wall_time_and_nesting_pauses_the_outer_phase() {
        let origin = Instant::now();
        let book = PhaseBook::new(origin);
        std::thread::sleep(Duration::from_millis(20));
        let decode = book.slot("decode");
        let outer = book.switch(decode);
        std::thread::sleep(Duration::from_millis(40));
        let io = book.slot(IO);
        let inner = book.switch(io);
        assert_eq!(book.current(), Some(IO));
        std::thread::sleep(Duration::from_millis(30));
        book.switch(inner);
        std::thread::sleep(Duration::from_millis(10));
        book.switch(outer);
        book.close();
        let wall = origin.elapsed().as_secs_f64();
        let (rest, named) = book.seconds();
        let get = |n: &str| named.iter().find(|(k, _)| k == n).map(|(_, s)| *s).expect(n);
        let total = rest + named.iter().map(|(_, s)| s).sum::<f64>();
        assert!((total - wall).abs() < 0.002, "{total} vs {wall}");
        assert!((0.030..0.045).contains(&get(IO)), "{named:?}");
        assert!((0.050..0.065).contains(&get("decode")), "{named:?}");
        assert!(rest >= 0.020, "{rest}");
        // Closed: further switches add nothing.
        book.switch(decode);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(book.seconds().1.iter().find(|(k, _)| k == "decode").map(|(_, s)| *s), Some(get("decode")));
    }

    #[test]
    fn bad_names_and_too_many_names_count_outside_any_phase() {
        let book = PhaseBook::new(Instant::now());
        for bad in ["", "unphased", "a b", &"x".repeat(65)] {
            assert_eq!(book.slot(bad), 0, "{bad:?}");
            assert!(check_phase_name(bad).is_err());
        }
        for i in 0..MAX_PHASES {
            assert_eq!(usize::from(book.slot(&format!("p{i}"))), i + 1);
        }
        assert_eq!(book.slot("one.too.many"), 0);
        assert_eq!(book.slot("p3"), 4);
        assert_eq!(check_phase_name(WAIT_INPUT), Ok(()));
    }
}
