//! [`GpuPoller`]: one background thread that owns a [`GpuSource`] and caches its latest
//! sample, so that readers (metric callbacks, scrapes) never wait on the vendor library.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::MIN_POLL_INTERVAL;
use crate::error::GpuError;
use crate::source::{GpuSample, GpuSource};

/// How long stopping waits for a poll in progress before leaving the thread behind. A
/// driver stuck in a call must not hang the program's shutdown.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Where GPU telemetry stands.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuState {
    /// Configured off; nothing was loaded.
    Disabled,
    /// The poller thread is opening the library.
    Starting,
    /// Polling; `devices` were found.
    Running {
        /// Number of devices in each sample.
        devices: usize,
        /// Platform name, e.g. `nvidia`.
        platform: &'static str,
    },
    /// Opening the library failed; GPU metrics are off for this run.
    Off(GpuError),
    /// The poller was stopped.
    Stopped,
}

#[derive(Debug)]
struct Control {
    stop: bool,
    refresh_requested: bool,
    /// Counts finished polls, so [`GpuPoller::refresh`] can wait for the next one.
    generation: u64,
    state: GpuState,
}

#[derive(Debug)]
struct Shared {
    /// Swapped whole after each poll: a reader clones the `Arc` under a read lock held for
    /// nanoseconds and never sees half of one poll and half of another.
    latest: RwLock<Option<Arc<GpuSample>>>,
    control: Mutex<Control>,
    changed: Condvar,
}

impl Shared {
    fn control(&self) -> MutexGuard<'_, Control> {
        // A poisoned lock only means a panic elsewhere; the data is plain state, keep going.
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn store(&self, sample: Option<GpuSample>) {
        let mut latest = self.latest.write().unwrap_or_else(PoisonError::into_inner);
        *latest = sample.map(Arc::new);
    }

    fn latest(&self) -> Option<Arc<GpuSample>> {
        self.latest.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// A cheap, cloneable reader of the latest sample; what metric callbacks hold.
#[derive(Debug, Clone, Default)]
pub struct SampleReader {
    shared: Option<Arc<Shared>>,
}

impl SampleReader {
    /// A reader that never has a sample (GPU telemetry off).
    pub fn empty() -> Self {
        Self { shared: None }
    }

    /// The latest sample; `None` before the first poll, after a failed poll, when off, and
    /// after the poller stopped (so stale values are never reported).
    pub fn latest(&self) -> Option<Arc<GpuSample>> {
        self.shared.as_ref().and_then(|s| s.latest())
    }
}

/// One background thread polling a [`GpuSource`].
///
/// The source is created by the `open` closure on the poller thread. Dropping the poller
/// stops the thread and joins it (waiting at most a few seconds for a poll in progress).
#[derive(Debug)]
pub struct GpuPoller {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl GpuPoller {
    /// Starts the thread: it calls `open`, then polls at once and every `interval`
    /// (raised to [`MIN_POLL_INTERVAL`] if shorter). Returns without waiting for `open`;
    /// see [`GpuPoller::wait_started`].
    ///
    /// # Errors
    ///
    /// [`GpuError::Thread`] when the thread cannot be spawned.
    pub fn spawn<S, F>(interval: Duration, open: F) -> Result<Self, GpuError>
    where
        S: GpuSource + 'static,
        F: FnOnce() -> Result<S, GpuError> + Send + 'static,
    {
        let interval = interval.max(MIN_POLL_INTERVAL);
        let shared = Arc::new(Shared {
            latest: RwLock::new(None),
            control: Mutex::new(Control {
                stop: false,
                refresh_requested: false,
                generation: 0,
                state: GpuState::Starting,
            }),
            changed: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pipetel-gpu".into())
            .spawn(move || run(&thread_shared, interval, open))
            .map_err(|e| GpuError::Thread(e.to_string()))?;
        Ok(Self { shared, thread: Some(thread) })
    }

    /// The current state.
    pub fn state(&self) -> GpuState {
        self.shared.control().state.clone()
    }

    /// Waits until the library is open (and the first sample stored) or failed, at most
    /// `timeout`; returns the state then ([`GpuState::Starting`] on timeout).
    pub fn wait_started(&self, timeout: Duration) -> GpuState {
        let guard = self.shared.control();
        let (guard, _) = self
            .shared
            .changed
            .wait_timeout_while(guard, timeout, |c| c.state == GpuState::Starting)
            .unwrap_or_else(PoisonError::into_inner);
        guard.state.clone()
    }

    /// Asks for a poll now and waits for it to finish, at most `timeout`. Returns whether a
    /// new sample (or a failed poll) was recorded. Meant for tests and for tools that print
    /// a sample on demand; normal readers just read [`GpuPoller::latest`].
    pub fn refresh(&self, timeout: Duration) -> bool {
        let mut guard = self.shared.control();
        let before = guard.generation;
        guard.refresh_requested = true;
        self.shared.changed.notify_all();
        let (guard, _) = self
            .shared
            .changed
            .wait_timeout_while(guard, timeout, |c| {
                c.generation == before && matches!(c.state, GpuState::Starting | GpuState::Running { .. })
            })
            .unwrap_or_else(PoisonError::into_inner);
        guard.generation != before
    }

    /// The latest sample (see [`SampleReader::latest`]).
    pub fn latest(&self) -> Option<Arc<GpuSample>> {
        self.shared.latest()
    }

    /// A reader of the latest sample for metric callbacks.
    pub fn reader(&self) -> SampleReader {
        SampleReader { shared: Some(Arc::clone(&self.shared)) }
    }

    /// Stops the thread and joins it. A thread stuck in the vendor library (in `open` or a
    /// poll) for more than a few seconds is left behind, detached, rather than hanging the
    /// caller; it exits when the call returns.
    pub fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let guard = {
            let mut guard = self.shared.control();
            guard.stop = true;
            self.shared.changed.notify_all();
            guard
        };
        let (guard, timeout) = self
            .shared
            .changed
            .wait_timeout_while(guard, STOP_TIMEOUT, |c| {
                c.state != GpuState::Stopped && !matches!(c.state, GpuState::Off(_))
            })
            .unwrap_or_else(PoisonError::into_inner);
        drop(guard);
        if timeout.timed_out() {
            tracing::warn!("GPU poller did not stop within {STOP_TIMEOUT:?}; leaving it behind");
        } else if thread.join().is_err() {
            tracing::warn!("GPU poller thread panicked");
        }
        // Readers must not go on reporting the last values of a stopped poller.
        self.shared.store(None);
    }
}

impl Drop for GpuPoller {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run<S, F>(shared: &Shared, interval: Duration, open: F)
where
    S: GpuSource,
    F: FnOnce() -> Result<S, GpuError>,
{
    let mut source = match open() {
        Ok(s) => s,
        Err(e) => {
            let mut c = shared.control();
            c.state = GpuState::Off(e);
            shared.changed.notify_all();
            return;
        }
    };
    let mut sample_failed = false;
    loop {
        let started = Instant::now();
        let result = source.sample();
        let devices = match result {
            Ok(sample) => {
                if sample_failed {
                    tracing::info!("GPU sampling works again");
                    sample_failed = false;
                }
                let n = sample.devices.len();
                shared.store(Some(sample));
                Some(n)
            }
            Err(e) => {
                if !sample_failed {
                    tracing::warn!(error = %e, "GPU sample failed; no GPU values until it works again");
                    sample_failed = true;
                }
                shared.store(None);
                None
            }
        };
        let mut c = shared.control();
        c.generation = c.generation.wrapping_add(1);
        if c.state == GpuState::Starting {
            c.state = GpuState::Running { devices: devices.unwrap_or(0), platform: source.platform() };
        }
        c.refresh_requested = false;
        shared.changed.notify_all();
        // Interval is measured from the start of a poll so slow reads do not stretch it.
        let deadline = started + interval;
        while !c.stop && !c.refresh_requested {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            c = shared.changed.wait_timeout(c, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        if c.stop {
            c.state = GpuState::Stopped;
            drop(c);
            shared.store(None);
            // The source (and with it the library handle) is dropped on this thread, where
            // it was opened.
            drop(source);
            shared.changed.notify_all();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{DeviceInfo, DeviceSample};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails every other poll; counts polls.
    struct Flaky {
        polls: Arc<AtomicU32>,
        info: Arc<DeviceInfo>,
    }

    impl GpuSource for Flaky {
        fn platform(&self) -> &'static str {
            "test"
        }
        fn sample(&mut self) -> Result<GpuSample, GpuError> {
            let n = self.polls.fetch_add(1, Ordering::SeqCst);
            if n % 2 == 1 {
                return Err(GpuError::Sample("flaky".into()));
            }
            let mut d = DeviceSample::new(Arc::clone(&self.info));
            d.power_watts = Some(f64::from(n));
            Ok(GpuSample::new(vec![d]))
        }
    }

    fn flaky() -> (Arc<AtomicU32>, Result<GpuPoller, GpuError>) {
        let polls = Arc::new(AtomicU32::new(0));
        let source =
            Flaky { polls: Arc::clone(&polls), info: Arc::new(DeviceInfo::new(0, "id".into(), "n".into(), "test")) };
        (polls, GpuPoller::spawn(Duration::from_secs(3600), move || Ok(source)))
    }

    #[test]
    fn failed_poll_clears_the_sample_and_the_next_one_restores_it() -> Result<(), GpuError> {
        let (polls, poller) = flaky();
        let poller = poller?;
        assert_eq!(poller.wait_started(Duration::from_secs(5)), GpuState::Running { devices: 1, platform: "test" });
        let power = |p: &GpuPoller| p.latest().and_then(|s| s.devices[0].power_watts);
        assert_eq!(power(&poller), Some(0.0));
        assert!(poller.refresh(Duration::from_secs(5)));
        assert_eq!(power(&poller), None, "a failed poll must not leave stale values");
        assert!(poller.refresh(Duration::from_secs(5)));
        assert_eq!(power(&poller), Some(2.0));
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        Ok(())
    }

    #[test]
    fn interval_is_raised_to_the_minimum_and_stop_joins() -> Result<(), GpuError> {
        let polls = Arc::new(AtomicU32::new(0));
        let source =
            Flaky { polls: Arc::clone(&polls), info: Arc::new(DeviceInfo::new(0, "id".into(), "n".into(), "test")) };
        let mut poller = GpuPoller::spawn(Duration::from_millis(1), move || Ok(source))?;
        let reader = poller.reader();
        poller.wait_started(Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(300));
        // With a 1 ms interval there would be hundreds of polls; the 1 s minimum allows one.
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        poller.stop();
        assert_eq!(poller.state(), GpuState::Stopped);
        assert!(reader.latest().is_none());
        Ok(())
    }

    #[test]
    fn open_failure_is_reported_as_off() -> Result<(), GpuError> {
        let poller = GpuPoller::spawn(Duration::from_secs(1), || -> Result<Flaky, GpuError> {
            Err(GpuError::NoDevice { library: "x".into() })
        })?;
        assert_eq!(
            poller.wait_started(Duration::from_secs(5)),
            GpuState::Off(GpuError::NoDevice { library: "x".into() })
        );
        assert!(!poller.refresh(Duration::from_millis(10)));
        Ok(())
    }
}
