//! The sliding time window behind summaries: a ring of relative-error sketches.
//!
//! Each of `age_buckets` sketches covers `max_age / age_buckets` of time; an observation goes
//! into the newest one, and a quantile is read from the merge of those still inside the window,
//! so the window slides in steps of `max_age / age_buckets` and covers between
//! `max_age * (age_buckets - 1) / age_buckets` and `max_age` of the most recent past.
//!
//! # Time
//! Reading even a coarse clock costs as much as the rest of an observation, so on Linux an
//! observation reads a recent time that a background thread (`pipetel-clock`, started with the
//! first summary) refreshes every 32nd of the shortest slice, between every millisecond and
//! every second; reading quantiles reads the clock itself (`CLOCK_MONOTONIC_COARSE`). The
//! window's edges are thus exact to that refresh period (a second for the default 2-minute
//! slices). A forked child, whose copy of the thread does not run, starts its own at its first
//! observation; other systems read `Instant` on every observation.
//!
//! # The sketch
//! A DDSketch-style histogram with bins of bounded relative width. The bin of a value `v ≠ 0`
//! comes straight from the bits of `|v|`: the exponent `e` and the top 6 bits of the mantissa
//! `m` (`|v| = m·2^e`, `1 ≤ m < 2`), that is `⌊64·(e + m − 1)⌋` — a piecewise-linear `log2`,
//! so indexing costs a shift and a subtraction instead of a logarithm. A bin spans a mantissa
//! step of `1/64`, so its upper bound is at most `1 + 1/64` times its lower bound, and the value
//! it reports, the harmonic mean `2·lo·hi / (lo + hi)` of its bounds, is within
//! `(hi − lo) / (hi + lo) ≤ 1/129` (0.78 %) of every value in it. Negative values have bins of
//! their own, values of magnitude below `1e-9` count as zero, and each sketch keeps its smallest
//! and largest value: quantile 0 and 1 return them exactly, and every estimate is clamped to
//! them (which can only bring it closer to the value it stands for).
//!
//! Bins are a dense array per sign that grows to cover the values seen, at most 4096 bins (64
//! octaves, more than 19 orders of magnitude); past that, the lowest bins collapse into the
//! lowest kept one, so tiny values beside huge ones of the same sign read too high.
//!
//! # Error bound
//! For a window holding `n` observations, the value returned for quantile `q` is within
//! [`RELATIVE_ERROR`] (relative) of the exact value of rank `⌊q·(n−1)⌋` in the sorted
//! observations (the smallest value for `q = 0`, the largest for `q = 1`), for values whose
//! magnitude is above `1e-9` (smaller ones read as 0) and within 19 orders of magnitude of the
//! largest one of their sign.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The relative accuracy of the summaries' quantiles (see the module docs).
pub const RELATIVE_ERROR: f64 = 0.01;

/// Magnitudes below this count as zero.
const ZERO_BELOW: f64 = 1e-9;
/// Bins per octave: the top `BIN_BITS` bits of the mantissa pick the bin within an octave.
const BIN_BITS: u32 = 6;
/// The shift that keeps the exponent and the top `BIN_BITS` bits of the mantissa.
const SHIFT: u32 = 52 - BIN_BITS;
/// The bin of 1.0 (the exponent bias, in bins).
const BIAS: i32 = 1023 << BIN_BITS;
/// The most bins a store keeps per sign.
const MAX_BINS: usize = 4096;
/// Extra bins allocated beside a new value, so a drifting distribution does not grow the store
/// one bin at a time.
const SLACK: i32 = 32;

/// The bin of a finite magnitude `a >= ZERO_BELOW`.
#[inline]
fn bin(a: f64) -> i32 {
    // A finite positive f64 shifted right keeps 17 bits: this cannot overflow an i32.
    (a.to_bits() >> SHIFT) as i32 - BIAS
}

/// The lower bound of bin `key`.
fn lower_bound(key: i32) -> f64 {
    f64::from_bits(((key + BIAS).max(0) as u64) << SHIFT)
}

/// The value a bin reports: the harmonic mean of its bounds, which has the same relative
/// distance to both.
fn estimate(key: i32) -> f64 {
    let (lo, hi) = (lower_bound(key), lower_bound(key + 1));
    // Written so that the last finite bin (whose upper bound is +Inf) gives a finite value.
    lo * (2.0 / (1.0 + lo / hi))
}

/// Counts per bin of one sign: `bins[i]` counts bin `offset + i`.
#[derive(Default, Clone)]
struct Store {
    bins: Vec<u64>,
    offset: i32,
}

impl Store {
    #[inline]
    fn add(&mut self, key: i32) {
        // A key below `offset` wraps to a huge index and takes the slow path too.
        match self.bins.get_mut(key.wrapping_sub(self.offset) as u32 as usize) {
            Some(c) => *c += 1,
            None => self.add_slow(key, 1),
        }
    }

    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, key: i32, n: u64) {
        let (lo, hi) = match self.range() {
            None => (key - SLACK, key + SLACK),
            Some((lo, hi)) if key < lo => (key - SLACK, hi),
            Some((lo, hi)) => (lo, hi.max(key + SLACK)),
        };
        self.cover(lo, hi);
        self.add_n(key, n);
    }

    /// Adds `n` to bin `key`, which `cover` made sure exists unless it collapsed.
    fn add_n(&mut self, key: i32, n: u64) {
        let i = key.max(self.offset).wrapping_sub(self.offset) as u32 as usize;
        if let Some(c) = self.bins.get_mut(i) {
            *c += n;
        }
    }

    /// The lowest and highest bin in use.
    fn range(&self) -> Option<(i32, i32)> {
        let first = self.bins.iter().position(|c| *c > 0)?;
        let last = self.bins.iter().rposition(|c| *c > 0).unwrap_or(first);
        Some((self.offset + first as i32, self.offset + last as i32))
    }

    /// Makes the bins cover `lo..=hi` (and the bins in use), keeping at most `MAX_BINS`: past
    /// that, the lowest bins fold into the lowest kept one.
    fn cover(&mut self, lo: i32, hi: i32) {
        let used = self.range();
        let (mut lo, hi) = match used {
            Some((ulo, uhi)) => (lo.min(ulo), hi.max(uhi)),
            None => (lo, hi),
        };
        lo = lo.max(hi - (MAX_BINS as i32 - 1));
        if lo >= self.offset && hi - self.offset < self.bins.len() as i32 {
            // Already covered (a collapsed store starts at `lo`: nothing below it to fold).
            return;
        }
        let mut bins = vec![0u64; (hi - lo + 1) as usize];
        if let Some((ulo, uhi)) = used {
            for key in ulo..=uhi {
                let c = self.bins[(key - self.offset) as usize];
                if c > 0 {
                    bins[(key.max(lo) - lo) as usize] += c;
                }
            }
        }
        self.bins = bins;
        self.offset = lo;
    }

    /// Adds every count of `other`.
    fn merge(&mut self, other: &Store) {
        let Some((olo, ohi)) = other.range() else { return };
        self.cover(olo, ohi);
        for key in olo..=ohi {
            let c = other.bins[(key - other.offset) as usize];
            if c > 0 {
                self.add_n(key, c);
            }
        }
    }

    /// The values counted (summed when asked: an observation saves the update).
    fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The bin holding the value of rank `rank` (0-based, by increasing magnitude).
    fn key_at_rank(&self, rank: u64) -> i32 {
        let mut seen = 0u64;
        for (i, c) in self.bins.iter().enumerate() {
            seen += c;
            if seen > rank {
                return self.offset + i as i32;
            }
        }
        self.offset + self.bins.len().saturating_sub(1) as i32
    }

    fn clear(&mut self) {
        // Keeps the bins: the next slice of the window likely needs the same ones.
        self.bins.fill(0);
    }
}

/// A relative-error sketch of a set of values (see the module docs).
#[derive(Clone)]
pub(crate) struct Sketch {
    positive: Store,
    negative: Store,
    zero: u64,
    min: f64,
    max: f64,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            positive: Store::default(),
            negative: Store::default(),
            zero: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Sketch {
    /// Adds a finite value.
    #[inline]
    pub(crate) fn add(&mut self, v: f64) {
        let a = v.abs();
        if a < ZERO_BELOW {
            self.zero += 1;
        } else if v > 0.0 {
            self.positive.add(bin(a));
        } else {
            self.negative.add(bin(a));
        }
        // Branches rather than `f64::min`/`max`: the value is finite, and new extremes are rare.
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
    }

    fn is_empty(&self) -> bool {
        self.min > self.max
    }

    fn merge(&mut self, other: &Sketch) {
        self.positive.merge(&other.positive);
        self.negative.merge(&other.negative);
        self.zero += other.zero;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The value of quantile `q` (clamped to `[0, 1]`), `None` when empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let neg = self.negative.total();
        let n = neg + self.zero + self.positive.total();
        if q.is_nan() || q <= 0.0 {
            return Some(self.min);
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let rank = (q * (n - 1) as f64) as u64;
        let v = if rank < neg {
            // Negative values in increasing order are magnitudes in decreasing order.
            -estimate(self.negative.key_at_rank(neg - 1 - rank))
        } else if rank < neg + self.zero {
            0.0
        } else {
            estimate(self.positive.key_at_rank(rank - neg - self.zero))
        };
        Some(v.clamp(self.min, self.max))
    }

    fn clear(&mut self) {
        self.positive.clear();
        self.negative.clear();
        self.zero = 0;
        self.min = f64::INFINITY;
        self.max = f64::NEG_INFINITY;
    }
}

/// A lock for the few nanoseconds of an observation: one compare-exchange to take it and one
/// store to release it, where `std::sync::Mutex` releases with a swap as well (a second atomic
/// read-modify-write, a third of an observation's cost). A waiter spins briefly, then yields
/// its time slice until the holder is done. No poisoning: the state is updated by code that
/// does not panic.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a `SpinGuard`, and at most one exists at a time
// (the `locked` flag, taken with Acquire and released with Release, hands it from one thread to
// the next), so sharing the lock shares `T` between threads one at a time, as `Mutex` does.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if spins < 100 {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    // The holder may have been preempted: let it run.
                    std::thread::yield_now();
                }
            }
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
        }
    }
}

/// Access to a [`SpinLock`]'s value; dropping it releases the lock.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> std::ops::Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, so no other reference to the value exists.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

/// Nanoseconds on a monotonic clock that is cheap to read.
#[cfg(target_os = "linux")]
fn now_ns() -> u64 {
    fn read(clock: libc::clockid_t) -> Option<u64> {
        let mut ts = std::mem::MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `ts` is valid, writable memory for a `timespec` for the duration of the call.
        if unsafe { libc::clock_gettime(clock, ts.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: `clock_gettime` returned 0, so it wrote the whole `timespec`.
        let ts = unsafe { ts.assume_init() };
        Some((ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
    }
    // The coarse clock is the fine one's last tick (same origin); kernels before 2.6.32 lack it.
    read(libc::CLOCK_MONOTONIC_COARSE).or_else(|| read(libc::CLOCK_MONOTONIC)).unwrap_or(0)
}

/// Nanoseconds on a monotonic clock.
#[cfg(not(target_os = "linux"))]
fn now_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    u64::try_from(ORIGIN.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A recent reading of [`now_ns`], refreshed by a background thread: a load instead of a clock
/// read on every observation (see the module docs).
#[cfg(target_os = "linux")]
mod recent {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Mutex, PoisonError};
    use std::thread::Thread;
    use std::time::Duration;

    static NOW: AtomicU64 = AtomicU64::new(0);
    /// The refresher, woken when a shorter period is asked for while it sleeps a longer one.
    static REFRESHER: Mutex<Option<Thread>> = Mutex::new(None);
    /// Whether a refresher thread runs in this process (cleared in a forked child).
    static TICKING: AtomicBool = AtomicBool::new(false);
    /// Whether this process started one (cleared in a forked child, which then starts its own).
    static STARTED: AtomicBool = AtomicBool::new(false);
    /// The refresh period in nanoseconds: the shortest asked for so far.
    static PERIOD: AtomicU64 = AtomicU64::new(1_000_000_000);

    /// A time on `now_ns`'s clock at most one refresh period (plus scheduling delay) old.
    #[inline]
    pub(super) fn now() -> u64 {
        if TICKING.load(Ordering::Acquire) {
            NOW.load(Ordering::Relaxed)
        } else {
            slow_now()
        }
    }

    #[cold]
    #[inline(never)]
    fn slow_now() -> u64 {
        if !STARTED.load(Ordering::Relaxed) {
            start();
        }
        super::now_ns()
    }

    /// Asks for a refresh every 32nd of `step` nanoseconds (within 1 ms..=1 s) and starts the
    /// refresher if none runs.
    pub(super) fn need(step: u64) {
        let period = (step / 32).clamp(1_000_000, 1_000_000_000);
        if PERIOD.fetch_min(period, Ordering::Relaxed) > period {
            if let Some(t) = REFRESHER.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
                t.unpark();
            }
        }
        if !STARTED.load(Ordering::Relaxed) {
            start();
        }
    }

    /// Hands in a clock reading taken elsewhere, so observations right after a read of the
    /// window see at least that time.
    pub(super) fn saw(now: u64) {
        NOW.fetch_max(now, Ordering::Relaxed);
    }

    fn start() {
        if STARTED.swap(true, Ordering::AcqRel) {
            return;
        }
        static AT_FORK: std::sync::Once = std::sync::Once::new();
        AT_FORK.call_once(|| {
            extern "C" fn forgotten() {
                // Only atomic stores: allowed in a child between fork and exec.
                TICKING.store(false, Ordering::Release);
                STARTED.store(false, Ordering::Release);
            }
            // SAFETY: registers a handler that only stores to atomics; no other preconditions.
            // On failure no thread is started: observations read the clock themselves.
            if unsafe { libc::pthread_atfork(None, None, Some(forgotten)) } != 0 {
                return;
            }
            AT_FORK_OK.store(true, Ordering::Release);
        });
        if !AT_FORK_OK.load(Ordering::Acquire) {
            return;
        }
        NOW.fetch_max(super::now_ns(), Ordering::Relaxed);
        let spawned = std::thread::Builder::new().name("pipetel-clock".into()).spawn(|| loop {
            std::thread::park_timeout(Duration::from_nanos(PERIOD.load(Ordering::Relaxed)));
            NOW.fetch_max(super::now_ns(), Ordering::Relaxed);
        });
        // Without the thread, observations keep reading the clock themselves.
        let ticking = match spawned {
            Ok(handle) => {
                *REFRESHER.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle.thread().clone());
                true
            }
            Err(_) => false,
        };
        TICKING.store(ticking, Ordering::Release);
    }

    static AT_FORK_OK: AtomicBool = AtomicBool::new(false);
}

/// Elsewhere observations read the clock themselves.
#[cfg(not(target_os = "linux"))]
mod recent {
    #[inline]
    pub(super) fn now() -> u64 {
        super::now_ns()
    }

    pub(super) fn need(_step: u64) {}

    pub(super) fn saw(_now: u64) {}
}

/// A ring of sketches sliding over time.
pub(crate) struct Window {
    ring: Vec<Sketch>,
    head: usize,
    /// When the head sketch's slice ends, on `now_ns`'s clock.
    head_ends: u64,
    /// The length of a slice, in nanoseconds (at least 1).
    step: u64,
}

impl Window {
    pub(crate) fn new(max_age: Duration, age_buckets: u32) -> Self {
        let n = age_buckets.max(1);
        let step = u64::try_from((max_age / n).as_nanos()).unwrap_or(u64::MAX).max(1);
        recent::need(step);
        Self { ring: vec![Sketch::default(); n as usize], head: 0, head_ends: now_ns().saturating_add(step), step }
    }

    /// Moves the head forward past every slice that ended, clearing the sketches that leave
    /// the window.
    #[cold]
    #[inline(never)]
    fn rotate(&mut self, now: u64) {
        let len = self.ring.len();
        let mut steps = 0usize;
        while now >= self.head_ends && steps < len {
            self.head = (self.head + 1) % len;
            self.ring[self.head].clear();
            self.head_ends = self.head_ends.saturating_add(self.step);
            steps += 1;
        }
        if now >= self.head_ends {
            // Idle for longer than the whole window: everything was cleared; restart the clock.
            self.head_ends = now.saturating_add(self.step);
        }
    }

    /// Adds a finite value to the current slice.
    #[inline]
    pub(crate) fn observe(&mut self, v: f64) {
        let now = recent::now();
        if now >= self.head_ends {
            self.rotate(now);
        }
        // `head` is always below the ring's length, which is at least 1.
        if let Some(s) = self.ring.get_mut(self.head) {
            s.add(v);
        }
    }

    /// The window's quantiles, `None` where the window is empty.
    pub(crate) fn quantiles(&mut self, qs: &[f64]) -> Vec<Option<f64>> {
        let now = now_ns();
        recent::saw(now);
        if now >= self.head_ends {
            self.rotate(now);
        }
        let mut merged = Sketch::default();
        for s in &self.ring {
            if !s.is_empty() {
                merged.merge(s);
            }
        }
        qs.iter().map(|q| merged.quantile(*q)).collect()
    }

    pub(crate) fn clear(&mut self) {
        for s in &mut self.ring {
            s.clear();
        }
        self.head_ends = now_ns().saturating_add(self.step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(sorted: &[f64], q: f64) -> f64 {
        sorted[(q * (sorted.len() as f64 - 1.0)) as usize]
    }

    /// Every quantile of `values` read from one window, against the exact ones.
    fn check(values: &[f64], what: &str) {
        let mut w = Window::new(Duration::from_secs(600), 5);
        for v in values {
            w.observe(*v);
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let qs: Vec<f64> = (0..=1000).map(|i| i as f64 / 1000.0).chain([0.999, 0.9999]).collect();
        for (q, got) in qs.iter().zip(w.quantiles(&qs)) {
            let want = exact(&sorted, *q);
            let got = got.expect("non-empty window");
            let ok = if want.abs() < ZERO_BELOW {
                got.abs() < ZERO_BELOW
            } else {
                (got - want).abs() <= RELATIVE_ERROR * want.abs()
            };
            assert!(ok, "{what}, q={q}: {got} vs exact {want}");
        }
    }

    /// A small deterministic generator (xorshift), so the tests need no dependency.
    fn uniform01(state: &mut u64) -> f64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn quantiles_stay_within_the_stated_error() {
        let mut w = Window::new(Duration::from_secs(600), 5);
        let mut values: Vec<f64> = (0..5000u64).map(|i| ((i * 7919) % 5000) as f64 / 100.0 + 0.001).collect();
        for v in &values {
            w.observe(*v);
        }
        values.sort_by(f64::total_cmp);
        let qs = [0.0, 0.5, 0.9, 0.95, 0.99, 1.0];
        for (q, got) in qs.iter().zip(w.quantiles(&qs)) {
            let want = exact(&values, *q);
            let got = got.expect("non-empty window");
            assert!((got - want).abs() <= RELATIVE_ERROR * want.abs() + 1e-12, "q={q}: {got} vs exact {want}");
        }
    }

    #[test]
    fn many_quantiles_of_several_distributions_stay_within_the_error() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let uniform: Vec<f64> = (0..20_000).map(|_| uniform01(&mut s) * 3.0).collect();
        check(&uniform, "uniform [0, 3)");
        // Log-uniform over six decades (1e-3 to 1e3): every octave's bins are used.
        let spread: Vec<f64> = (0..20_000).map(|_| 10f64.powf(uniform01(&mut s) * 6.0 - 3.0)).collect();
        check(&spread, "log-uniform over 6 decades");
        // Log-normal-like: the product of a few uniforms, scaled.
        let lognormal: Vec<f64> =
            (0..20_000).map(|_| (0..4).map(|_| 0.05 + 2.0 * uniform01(&mut s)).product::<f64>() * 1e-2).collect();
        check(&lognormal, "log-normal-like");
        let mixed: Vec<f64> =
            (0..20_000).map(|_| (uniform01(&mut s) - 0.4) * 10f64.powf(uniform01(&mut s) * 4.0)).collect();
        check(&mixed, "negatives and positives over 4 decades");
        let with_zeros: Vec<f64> = (0..5_000).map(|i| if i % 3 == 0 { 0.0 } else { -(i as f64) }).collect();
        check(&with_zeros, "negatives and zeros");
        // Exact bin bounds and huge magnitudes.
        let edges: Vec<f64> =
            (0..4_000).map(|i| lower_bound(i - 2_000) * if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        check(&edges, "bin bounds");
        // The largest magnitudes (the last bin's upper bound is +Inf), within the 19 decades.
        check(&[f64::MAX, 1e300, 1e295, -f64::MAX, -1e290, -1e300], "extremes");
    }

    #[test]
    fn every_bin_estimate_is_within_the_bound_of_its_values() {
        for key in [-1_900, -64, -1, 0, 1, 63, 64, 65, 1_000, 65_534] {
            let (lo, hi, e) = (lower_bound(key), lower_bound(key + 1), estimate(key));
            assert!(bin(lo) == key && bin(f64::from_bits(hi.to_bits() - 1)) == key, "bin {key}");
            if hi.is_finite() {
                assert!((e - lo) / lo <= 1.0 / 129.0 + 1e-15 && (hi - e) / hi <= 1.0 / 129.0 + 1e-15, "bin {key}");
            }
        }
    }

    #[test]
    fn the_lowest_bins_collapse_past_the_cap() {
        let mut w = Window::new(Duration::from_secs(60), 1);
        // 25 decades of one sign: the lowest ones fold into the lowest kept bin.
        for e in -9..=16 {
            w.observe(10f64.powi(e));
        }
        let q = w.quantiles(&[0.0, 0.5, 1.0]);
        assert_eq!(q[0], Some(1e-9), "the minimum stays exact");
        assert_eq!(q[2], Some(1e16), "the maximum stays exact");
        let store = &w.ring[0].positive;
        assert!(store.bins.len() <= MAX_BINS, "{} bins", store.bins.len());
        assert_eq!(store.total(), 26);
        // More tiny values fold into the lowest kept bin (after at most one shift of the range
        // down by the slack kept above the largest value) without growing the store again.
        w.observe(1e-8);
        let (offset, len) = (w.ring[0].positive.offset, w.ring[0].positive.bins.len());
        w.observe(1e-7);
        let store = &w.ring[0].positive;
        assert_eq!((store.offset, store.bins.len(), store.total()), (offset, len, 28));
        assert!(len <= MAX_BINS);
    }

    #[test]
    fn old_observations_leave_the_window() {
        let mut w = Window::new(Duration::from_millis(200), 2);
        w.observe(100.0);
        assert!(w.quantiles(&[0.5])[0].is_some());
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(w.quantiles(&[0.5]), vec![None]);
        w.observe(3.0);
        let q = w.quantiles(&[0.5])[0].expect("one observation");
        assert!((q - 3.0).abs() <= 0.03);
        // Observations alone slide the window too (no read in between).
        w.observe(100.0);
        std::thread::sleep(Duration::from_millis(450));
        w.observe(7.0);
        assert_eq!(w.quantiles(&[0.0, 1.0]), vec![Some(7.0), Some(7.0)]);
    }

    #[test]
    fn negative_values_and_zero_are_kept() {
        let mut w = Window::new(Duration::from_secs(60), 1);
        for v in [-5.0, 0.0, 5.0] {
            w.observe(v);
        }
        let q = w.quantiles(&[0.0, 0.5, 1.0]);
        assert_eq!(q, vec![Some(-5.0), Some(0.0), Some(5.0)]);
        w.clear();
        assert_eq!(w.quantiles(&[0.5]), vec![None]);
    }
}
