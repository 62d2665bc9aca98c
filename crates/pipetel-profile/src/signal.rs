//! The sampling itself: a `SIGPROF` handler driven by the process's CPU-time interval timer
//! (`ITIMER_PROF`), so a sample stands for `1 / hz` seconds of CPU used by the process, and the
//! kernel delivers it to the thread that was using it.
//!
//! The handler is async-signal-safe: it reads the thread's OS id (a system call), its labels
//! from the pipeline's table (atomic loads), unwinds its stack into a record of a ring
//! allocated before the timer starts, and publishes the record with one atomic store. It takes
//! no lock and allocates nothing. A record still unread when the ring comes round again is not
//! overwritten: the sample is dropped and counted.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use pipetel_core::pipeline::profile::{thread_sample, ThreadSample};

/// Frames kept per sample (the innermost ones).
pub(crate) const DEPTH: usize = 128;
/// Samples the ring holds between two drains (a drain runs every 100 ms: at 99 Hz on 16 busy
/// cores that is about 160).
const RING: usize = 2048;

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

struct Record {
    state: AtomicU8,
    body: UnsafeCell<Body>,
}

/// One sample, as the handler wrote it.
#[derive(Clone, Copy)]
pub(crate) struct Body {
    pub(crate) labels: ThreadSample,
    /// The interrupted instruction's address (0 where the architecture's context is not read).
    pub(crate) pc: usize,
    pub(crate) depth: usize,
    /// Return addresses, innermost first; the handler's own frames come before `pc`'s.
    pub(crate) ips: [usize; DEPTH],
}

// SAFETY: a record's body is written only by the handler that moved its state from EMPTY to
// WRITING, and read only by the drain after it saw READY (and before it stores EMPTY).
unsafe impl Sync for Record {}

struct Ring {
    records: Box<[Record]>,
    next: AtomicUsize,
    dropped: AtomicU64,
}

static RING_CELL: OnceLock<Ring> = OnceLock::new();
/// Whether the handler records (it stays installed once installed; see [`stop`]).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

fn ring() -> &'static Ring {
    RING_CELL.get_or_init(|| Ring {
        records: (0..RING)
            .map(|_| Record {
                state: AtomicU8::new(EMPTY),
                body: UnsafeCell::new(Body {
                    labels: ThreadSample { label: 0, phase: 0, python: 0 },
                    pc: 0,
                    depth: 0,
                    ips: [0; DEPTH],
                }),
            })
            .collect(),
        next: AtomicUsize::new(0),
        dropped: AtomicU64::new(0),
    })
}

/// Why sampling cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another handler owns `SIGPROF` (another profiler in the process).
    #[error("SIGPROF already has a handler in this process (another profiler?): pipetel's profiler stays off")]
    SignalTaken,
    /// The process's CPU-time interval timer already runs (another profiler in the process).
    #[error("the process's CPU-time interval timer (ITIMER_PROF) already runs (another profiler?): pipetel's profiler stays off")]
    TimerTaken,
    /// A system call failed.
    #[error("{call} failed: {source}")]
    System {
        /// The call.
        call: &'static str,
        /// Its error.
        source: std::io::Error,
    },
}

extern "C" fn on_sigprof(_signal: libc::c_int, _info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let Some(ring) = RING_CELL.get() else { return };
    // SAFETY: errno is thread-local and the pointer is valid for the thread's life.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let labels = thread_sample(tid).unwrap_or(ThreadSample { label: 0, phase: 0, python: 0 });
    let i = ring.next.fetch_add(1, Ordering::Relaxed) % RING;
    let record = &ring.records[i];
    if record.state.compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
        // SAFETY: this handler owns the record until it stores READY (see `Record`).
        let body = unsafe { &mut *record.body.get() };
        body.labels = labels;
        body.pc = interrupted_pc(context);
        let mut depth = 0;
        // SAFETY: the unwinder is not reentered: SIGPROF is blocked while its handler runs,
        // and the drain never unwinds.
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                body.ips[depth] = frame.ip() as usize;
                depth += 1;
                depth < DEPTH
            });
        }
        body.depth = depth;
        record.state.store(READY, Ordering::Release);
    } else {
        ring.dropped.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// The instruction the signal interrupted.
fn interrupted_pc(context: *mut libc::c_void) -> usize {
    if context.is_null() {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: with SA_SIGINFO the third argument is the interrupted thread's ucontext_t.
        let uc = unsafe { &*(context as *const libc::ucontext_t) };
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above.
        let uc = unsafe { &*(context as *const libc::ucontext_t) };
        uc.uc_mcontext.pc as usize
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        0
    }
}

/// Installs the handler (once per process) and starts the timer at `hz` samples per CPU
/// second.
pub(crate) fn start(hz: u32) -> Result<(), StartError> {
    ring();
    // The unwinder's first use may allocate (its caches): do it here, outside any handler.
    backtrace::trace(|_| false);
    if !INSTALLED.load(Ordering::Acquire) {
        // SAFETY: a zeroed sigaction is a valid value to fill; the handler has the SA_SIGINFO
        // signature and is async-signal-safe (see the module).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
                return Err(system("sigaction"));
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                return Err(StartError::SignalTaken);
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigprof as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGPROF, &action, std::ptr::null_mut()) != 0 {
                return Err(system("sigaction"));
            }
        }
        INSTALLED.store(true, Ordering::Release);
    }
    // SAFETY: plain system calls on valid pointers.
    unsafe {
        let mut current: libc::itimerval = std::mem::zeroed();
        if libc::getitimer(libc::ITIMER_PROF, &mut current) != 0 {
            return Err(system("getitimer"));
        }
        if current.it_value.tv_sec != 0 || current.it_value.tv_usec != 0 {
            return Err(StartError::TimerTaken);
        }
        let micros = (1_000_000 / u64::from(hz.max(1))).max(1);
        let every = libc::timeval {
            tv_sec: (micros / 1_000_000) as libc::time_t,
            tv_usec: (micros % 1_000_000) as libc::suseconds_t,
        };
        let timer = libc::itimerval { it_interval: every, it_value: every };
        ACTIVE.store(true, Ordering::Release);
        if libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) != 0 {
            ACTIVE.store(false, Ordering::Release);
            return Err(system("setitimer"));
        }
    }
    Ok(())
}

/// Stops the timer. The handler stays installed but records nothing: a `SIGPROF` still in
/// flight must not meet the default action, which ends the process.
pub(crate) fn stop() {
    let off = libc::itimerval {
        it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 },
        it_value: libc::timeval { tv_sec: 0, tv_usec: 0 },
    };
    // SAFETY: a plain system call on a valid pointer.
    unsafe {
        libc::setitimer(libc::ITIMER_PROF, &off, std::ptr::null_mut());
    }
    ACTIVE.store(false, Ordering::Release);
}

/// Takes every published sample out of the ring, in no particular order.
pub(crate) fn drain(mut take: impl FnMut(&Body)) {
    let Some(ring) = RING_CELL.get() else { return };
    for record in ring.records.iter() {
        if record.state.load(Ordering::Acquire) == READY {
            // SAFETY: READY means the handler is done with it; the drain holds it until EMPTY.
            let body = unsafe { *record.body.get() };
            record.state.store(EMPTY, Ordering::Release);
            take(&body);
        }
    }
}

/// Samples dropped so far because the ring was full.
pub(crate) fn dropped() -> u64 {
    RING_CELL.get().map_or(0, |r| r.dropped.load(Ordering::Relaxed))
}

fn system(call: &'static str) -> StartError {
    StartError::System { call, source: std::io::Error::last_os_error() }
}
