//! The sampling CPU profiler of pipetel (`PIPETEL_PROFILE=cpu`): every sample is labelled with
//! the pipeline stage, execution, shard and phase that the interrupted thread was running, and
//! with the shard span's trace and span ids, read at the moment of the sample.
//!
//! # How
//! - The process's CPU-time interval timer sends `SIGPROF` `hz` times per CPU second (99 by
//!   default) to the thread using the CPU; the handler reads that thread's labels from the
//!   pipeline's table ([`pipetel_core::pipeline::profile`]), unwinds its stack with the
//!   `backtrace` crate's unwinder and publishes the return addresses in a preallocated ring.
//! - A drain thread empties the ring every 100 ms and counts samples per (labels, stack);
//!   every `flush_every` (10 s), at each stage's end and when the profiler stops, the stacks are
//!   symbolised and written as folded-stack lines ([`pipetel_rows::profile::ProfileLine`]) to the
//!   profile store beside the rows store, and queued for the exporter (OTLP profiles), which
//!   sends from a thread of its own: a collector that does not answer never holds up a shard's
//!   or a stage's end, nor the sampling (a full queue drops the batch, with one warning).
//! - Stage rows get the stage's sample count and top functions by self time; shard end rows
//!   and spans their sample count.
//! - In a Python process the Python sampler (the `pipetel` package) publishes each shard
//!   thread's Python stack; a sample of such a thread is that Python stack followed by the
//!   native frames it was running below the interpreter (an extension such as pipetel's own
//!   binding), so Python and Rust frames show in one stack.
//!
//! # Why not the `pprof` crate
//! It is built on the same unwinder, but it keeps only each sample's thread name and id: labels
//! could only be attached when its report is built, by thread, which mislabels every sample of
//! a thread that moved from one shard or phase to another in between — the case this profiler
//! exists for.
//!
//! # Limits
//! Linux only (x86_64 and aarch64 read the interrupted instruction; elsewhere the handler's own
//! frames stay at the leaf). One profiler per process; another `SIGPROF` handler or a running
//! `ITIMER_PROF` in the process keeps it off ([`StartError`]). Unwinding uses the binaries'
//! unwind tables (`.eh_frame`), present in Rust and C binaries unless removed.

#![deny(unsafe_code)]

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod signal;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod symbol;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipetel_core::pipeline::profile::{self as labels, ShardLabels};
use pipetel_rows::profile::ProfileLine;
use pipetel_rows::{Rotation, StoreWriter};

#[cfg(target_os = "linux")]
pub use signal::StartError;

/// Why the profiler cannot start (platforms other than Linux).
#[cfg(not(target_os = "linux"))]
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Sampling needs Linux.
    #[error("the CPU profiler runs on Linux only")]
    Unsupported,
}

/// The default sampling rate, per CPU second.
pub const DEFAULT_HZ: u32 = 99;
/// The highest rate accepted.
pub const MAX_HZ: u32 = 1000;
/// Top functions named on a stage row.
pub const TOP_ON_ROW: usize = 5;

/// Hands each written batch of profile lines to an exporter (OTLP profiles). It runs on the
/// profiler's export thread, so it may block (a request to a collector, bounded by its timeout).
pub type Export = Box<dyn FnMut(&[ProfileLine]) + Send>;

/// Batches waiting for the exporter; a batch written while that many wait is dropped.
pub const EXPORT_QUEUE: usize = 16;

/// What the profiler does.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Samples per CPU second, 1 to [`MAX_HZ`].
    pub hz: u32,
    /// The profile store (`<rows store>.stacks`); `None`: lines go to the exporter alone.
    pub store: Option<PathBuf>,
    /// The store's rotation (the rows store's).
    pub rotation: Rotation,
    /// How often pending samples are written.
    pub flush_every: Duration,
    /// `host.name` of the lines.
    pub host: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            hz: DEFAULT_HZ,
            store: None,
            rotation: Rotation::default(),
            flush_every: Duration::from_secs(10),
            host: String::new(),
        }
    }
}

/// The running profiler; dropping it stops the sampling and writes what is pending.
#[derive(Debug)]
pub struct CpuProfiler {
    state: Arc<Shared>,
    drain: Option<JoinHandle<()>>,
    /// The thread that hands batches to the exporter (with an exporter).
    exporter: Option<JoinHandle<()>>,
}

static RUNNING: AtomicBool = AtomicBool::new(false);

/// Starts sampling this process. The store is opened first (its error names the path); only
/// one profiler runs per process.
pub fn start(settings: Settings, export: Option<Export>) -> Result<CpuProfiler, ProfilerError> {
    if settings.hz == 0 || settings.hz > MAX_HZ {
        return Err(ProfilerError::Rate(settings.hz));
    }
    let store = match &settings.store {
        Some(path) => Some(
            StoreWriter::open(path, settings.rotation)
                .map_err(|source| ProfilerError::Store { path: path.clone(), source })?,
        ),
        None => None,
    };
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Err(ProfilerError::Running);
    }
    let (queue, exporter) = match export.map(spawn_exporter).transpose() {
        Ok(Some((queue, thread))) => (Some(queue), Some(thread)),
        Ok(None) => (None, None),
        Err(e) => {
            RUNNING.store(false, Ordering::Release);
            return Err(ProfilerError::Thread(e));
        }
    };
    let fold = Fold::new(&settings, store, queue);
    let state = Arc::new(Shared { fold: Mutex::new(fold), stop: Mutex::new(false), wake: Condvar::new() });
    if let Err(e) = start_sampling(settings.hz) {
        // Dropping the state closes the queue: the export thread ends.
        drop(state);
        if let Some(thread) = exporter {
            let _ = thread.join();
        }
        RUNNING.store(false, Ordering::Release);
        return Err(ProfilerError::Start(e));
    }
    labels::set_profiler(Some(Arc::new(Hooks(state.clone(), settings.hz))));
    let drain_state = state.clone();
    let every = settings.flush_every;
    let drain = std::thread::Builder::new()
        .name("pipetel-profile".into())
        .spawn(move || drain_loop(&drain_state, every))
        .map_err(|e| {
            stop_sampling();
            labels::set_profiler(None);
            RUNNING.store(false, Ordering::Release);
            ProfilerError::Thread(e)
        });
    let drain = match drain {
        Ok(drain) => drain,
        Err(e) => {
            state.lock().queue = None;
            if let Some(thread) = exporter {
                let _ = thread.join();
            }
            return Err(e);
        }
    };
    Ok(CpuProfiler { state, drain: Some(drain), exporter })
}

/// The export thread: hands each queued batch to `export` until the queue closes.
fn spawn_exporter(mut export: Export) -> std::io::Result<(SyncSender<Vec<ProfileLine>>, JoinHandle<()>)> {
    let (queue, batches) = sync_channel::<Vec<ProfileLine>>(EXPORT_QUEUE);
    let thread = std::thread::Builder::new().name("pipetel-profile-export".into()).spawn(move || {
        for batch in batches {
            export(&batch);
        }
    })?;
    Ok((queue, thread))
}

/// Why the profiler did not start.
#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    /// A rate outside 1 to [`MAX_HZ`].
    #[error("invalid profiling rate {0} Hz: use 1 to {MAX_HZ}")]
    Rate(u32),
    /// The profile store cannot be opened.
    #[error("cannot open the profile store {}: {source}", path.display())]
    Store {
        /// The store's path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A profiler already runs in this process.
    #[error("a CPU profiler already runs in this process")]
    Running,
    /// Sampling cannot start.
    #[error(transparent)]
    Start(StartError),
    /// The drain thread cannot start.
    #[error("cannot start the profiler's thread: {0}")]
    Thread(std::io::Error),
}

impl CpuProfiler {
    /// Writes the samples taken so far to the store now, and queues them for the exporter.
    pub fn flush(&self) {
        let mut fold = self.state.lock();
        fold.drain();
        fold.flush();
    }

    /// Samples dropped because the drain fell behind (the ring was full).
    pub fn dropped(&self) -> u64 {
        dropped()
    }
}

impl Drop for CpuProfiler {
    fn drop(&mut self) {
        stop_sampling();
        labels::set_profiler(None);
        *self.state.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.state.wake.notify_all();
        if let Some(drain) = self.drain.take() {
            let _ = drain.join();
        }
        let mut fold = self.state.lock();
        fold.drain();
        fold.flush();
        // Closing the queue ends the export thread once it sent what is queued.
        fold.queue = None;
        drop(fold);
        if let Some(exporter) = self.exporter.take() {
            let _ = exporter.join();
        }
        RUNNING.store(false, Ordering::Release);
    }
}

#[cfg(target_os = "linux")]
fn start_sampling(hz: u32) -> Result<(), StartError> {
    signal::start(hz)
}
#[cfg(not(target_os = "linux"))]
fn start_sampling(_hz: u32) -> Result<(), StartError> {
    Err(StartError::Unsupported)
}
#[cfg(target_os = "linux")]
fn stop_sampling() {
    signal::stop();
}
#[cfg(not(target_os = "linux"))]
fn stop_sampling() {}
#[cfg(target_os = "linux")]
fn dropped() -> u64 {
    signal::dropped()
}
#[cfg(not(target_os = "linux"))]
fn dropped() -> u64 {
    0
}

#[derive(Debug)]
struct Shared {
    fold: Mutex<Fold>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Fold> {
        self.fold.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn drain_loop(state: &Shared, flush_every: Duration) {
    let mut last_flush = Instant::now();
    loop {
        {
            let stop = state.stop.lock().unwrap_or_else(PoisonError::into_inner);
            let (stop, _) =
                state.wake.wait_timeout(stop, Duration::from_millis(100)).unwrap_or_else(PoisonError::into_inner);
            if *stop {
                return;
            }
        }
        let mut fold = state.lock();
        fold.drain();
        if last_flush.elapsed() >= flush_every {
            fold.flush();
            last_flush = Instant::now();
        }
    }
}

/// What the pipeline asks at shard and stage ends.
struct Hooks(Arc<Shared>, u32);

impl labels::Profiler for Hooks {
    fn hz(&self) -> u32 {
        self.1
    }

    fn shard_samples(&self, label: u32) -> Option<u64> {
        let mut fold = self.0.lock();
        fold.drain();
        fold.shard_samples.remove(&label)
    }

    fn stage_summary(&self, stage: &str, execution: &str) -> Option<(u64, String)> {
        let mut fold = self.0.lock();
        fold.drain();
        fold.flush();
        let (total, leaves) = fold.stage_leaves.remove(&(stage.to_string(), execution.to_string()))?;
        Some((total, top_summary(total, leaves)))
    }
}

/// `"f 62.1%; g 20.3%"`: the top functions by self samples, with their share of `total`.
fn top_summary(total: u64, leaves: HashMap<String, u64>) -> String {
    let mut leaves: Vec<(String, u64)> = leaves.into_iter().collect();
    leaves.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    leaves
        .iter()
        .take(TOP_ON_ROW)
        .map(|(name, n)| format!("{name} {:.1}%", *n as f64 * 100.0 / total.max(1) as f64))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A sample's identity before symbolisation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct RawKey {
    label: u32,
    phase: u8,
    python: u32,
    /// Innermost first, starting at the interrupted instruction.
    ips: Box<[usize]>,
}

/// A written line's identity: labels and frames.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LineKey {
    label: u32,
    phase: Option<String>,
    python: bool,
    stack: Vec<String>,
}

#[derive(Debug)]
struct Fold {
    raw: HashMap<RawKey, u64>,
    /// The labels of the raw samples' shards, kept until they are written.
    labels: HashMap<u32, Arc<ShardLabels>>,
    shard_samples: HashMap<u32, u64>,
    /// (stage, execution) → samples and self samples per leaf function.
    stage_leaves: HashMap<(String, String), (u64, HashMap<String, u64>)>,
    #[cfg(target_os = "linux")]
    symbols: symbol::Symbols,
    store: Option<StoreWriter>,
    /// Batches for the export thread (with an exporter).
    queue: Option<SyncSender<Vec<ProfileLine>>>,
    period_ns: u64,
    host: String,
    pid: u32,
    warned_store: bool,
    warned_queue: bool,
}

impl Fold {
    fn new(settings: &Settings, store: Option<StoreWriter>, queue: Option<SyncSender<Vec<ProfileLine>>>) -> Self {
        Self {
            raw: HashMap::new(),
            labels: HashMap::new(),
            shard_samples: HashMap::new(),
            stage_leaves: HashMap::new(),
            #[cfg(target_os = "linux")]
            symbols: symbol::Symbols::default(),
            store,
            queue,
            period_ns: 1_000_000_000 / u64::from(settings.hz.max(1)),
            host: settings.host.clone(),
            pid: std::process::id(),
            warned_store: false,
            warned_queue: false,
        }
    }

    /// Counts the samples the ring holds.
    #[cfg(target_os = "linux")]
    fn drain(&mut self) {
        signal::drain(|body| {
            let ips = &body.ips[..body.depth.min(signal::DEPTH)];
            // Start at the interrupted instruction: what comes before is the handler.
            let from = ips.iter().position(|&ip| ip == body.pc).filter(|_| body.pc != 0);
            let ips: Box<[usize]> = match from {
                Some(i) => ips[i..].into(),
                None => ips.into(),
            };
            let l = body.labels;
            if l.label != 0 {
                *self.shard_samples.entry(l.label).or_default() += 1;
                if let std::collections::hash_map::Entry::Vacant(slot) = self.labels.entry(l.label) {
                    if let Some(found) = labels::labels(l.label) {
                        slot.insert(found);
                    }
                }
            }
            *self.raw.entry(RawKey { label: l.label, phase: l.phase, python: l.python, ips }).or_default() += 1;
        });
        labels::reclaim();
    }

    #[cfg(not(target_os = "linux"))]
    fn drain(&mut self) {}

    /// Symbolises the counted samples and writes them.
    fn flush(&mut self) {
        if self.raw.is_empty() {
            return;
        }
        let mut lines: HashMap<LineKey, u64> = HashMap::new();
        for (key, n) in std::mem::take(&mut self.raw) {
            let stack = self.stack_of(&key);
            let phase = self.labels.get(&key.label).and_then(|l| l.phase(key.phase));
            *lines.entry(LineKey { label: key.label, phase, python: key.python != 0, stack }).or_default() += n;
        }
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let mut out: Vec<ProfileLine> = Vec::with_capacity(lines.len());
        for (key, samples) in lines {
            let shard = self.labels.get(&key.label);
            if let (Some(s), Some(leaf)) = (shard, key.stack.last()) {
                let entry = self.stage_leaves.entry((s.stage.clone(), s.execution.clone())).or_default();
                entry.0 += samples;
                *entry.1.entry(leaf.clone()).or_default() += samples;
            }
            out.push(ProfileLine {
                timestamp_ms,
                host: self.host.clone(),
                pid: self.pid,
                stage: shard.map(|s| s.stage.clone()),
                execution: shard.map(|s| s.execution.clone()),
                shard: shard.map(|s| s.shard),
                phase: key.phase,
                trace_id: shard.and_then(|s| s.trace_id.clone()),
                span_id: shard.and_then(|s| s.span_id.clone()),
                language: if key.python { "python" } else { "rust" }.to_string(),
                period_ns: self.period_ns,
                samples,
                stack: key.stack,
            });
        }
        self.labels.clear();
        out.sort_by(|a, b| (&a.stage, a.shard, &a.stack).cmp(&(&b.stage, b.shard, &b.stack)));
        self.write(&out);
        if let Some(queue) = &self.queue {
            if let Err(TrySendError::Full(_)) = queue.try_send(out) {
                if !self.warned_queue {
                    self.warned_queue = true;
                    tracing::warn!(
                        target: "pipetel",
                        "the profiles exporter is behind ({EXPORT_QUEUE} batches wait): this batch is not sent \
                         (the profile store, where there is one, keeps it; shown once)"
                    );
                }
            }
        }
    }

    fn stack_of(&mut self, key: &RawKey) -> Vec<String> {
        let python = (key.python != 0).then(|| labels::python_stack(key.python)).flatten();
        #[cfg(target_os = "linux")]
        let native = self.symbols.frames(&key.ips, python.is_some());
        #[cfg(not(target_os = "linux"))]
        let native: Vec<String> = Vec::new();
        match python {
            Some(py) => py.iter().cloned().chain(native).collect(),
            None => native,
        }
    }

    fn write(&mut self, lines: &[ProfileLine]) {
        let Some(store) = &mut self.store else { return };
        for line in lines {
            if let Err(e) = store.append(&line.to_json()) {
                if !self.warned_store {
                    self.warned_store = true;
                    tracing::warn!(
                        target: "pipetel",
                        "cannot append to the profile store {}: {e}; profile lines are dropped (shown once)",
                        store.path().display()
                    );
                }
                return;
            }
        }
    }
}
