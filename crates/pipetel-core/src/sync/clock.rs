//! A cheap monotonic clock, and the process-wide thread that keeps a recent reading of it.
//!
//! Reading even a coarse clock costs as much as the rest of a summary observation, so on Linux
//! hot paths read [`recent`], a time that a background thread (`pipetel-clock`, started by the
//! first [`refresh_every`]) refreshes every 32nd of the shortest period asked for, between every
//! millisecond and every second. A forked child, whose copy of the thread does not run, starts
//! its own at its first reading; other systems read the clock on every call.

/// The clock of per-call and per-span durations: the CPU's time-stamp counter where it is
/// invariant (about a third of the OS clock's cost per read), the OS monotonic clock elsewhere;
/// calibrated against the OS clock on first use (under a millisecond), which `init` does.
pub fn clock() -> &'static quanta::Clock {
    static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// Seconds in `ticks` raw readings of [`clock`].
pub(crate) fn ticks_to_seconds(ticks: u64) -> f64 {
    clock().delta_as_nanos(0, ticks) as f64 / 1e9
}

/// Raw readings of [`clock`] per second.
pub(crate) fn ticks_per_second() -> f64 {
    static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *RATE.get_or_init(|| {
        const PROBE: u64 = 1 << 40;
        let nanos = clock().delta_as_nanos(0, PROBE);
        if nanos == 0 {
            1e9
        } else {
            PROBE as f64 / (nanos as f64 / 1e9)
        }
    })
}

/// Nanoseconds on a monotonic clock that is cheap to read.
#[cfg(target_os = "linux")]
pub(crate) fn now_ns() -> u64 {
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
pub(crate) fn now_ns() -> u64 {
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
    use std::sync::Mutex;
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
            if let Some(t) = crate::sync::lock(&REFRESHER).as_ref() {
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
                *crate::sync::lock(&REFRESHER) = Some(handle.thread().clone());
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

/// A recent time on [`now_ns`]'s clock: at most one refresh period (see [`refresh_every`]) old
/// where the refresher thread runs, exact elsewhere.
#[inline]
pub(crate) fn recent() -> u64 {
    recent::now()
}

/// Asks for [`recent`] to be refreshed every 32nd of `step` nanoseconds (within 1 ms..=1 s;
/// the shortest asked for wins) and starts the refresher thread if none runs.
pub(crate) fn refresh_every(step: u64) {
    recent::need(step);
}

/// Hands in a reading of [`now_ns`] taken elsewhere, so [`recent`] right after it returns at
/// least that time.
pub(crate) fn saw(now: u64) {
    recent::saw(now);
}
