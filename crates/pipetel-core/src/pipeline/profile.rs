//! Which shard each thread runs, for a sampling CPU profiler (`PIPETEL_PROFILE=cpu`).
//!
//! A shard started while a profiler is installed ([`set_profiler`]) registers its thread here:
//! the thread's OS id, a label id naming the shard ([`ShardLabels`]: stage, execution, shard,
//! the shard span's trace and span ids) and the shard's phase slots. A profiler's signal
//! handler reads them for the interrupted thread with [`thread_sample`]: atomic loads only, no
//! lock, no allocation, so it is safe in a signal handler. The current phase is read from the
//! shard's own phase slots, so a phase switch costs nothing more with the profiler on, and
//! nothing at all is done per shard with it off.
//!
//! Labels outlive their shard by two of the profiler's drain passes ([`reclaim`]), so samples
//! taken just before a shard ended still resolve, and a handler that read a label's phase slots
//! never reads freed memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::phase::PhaseBook;
use super::table::ShardInner;

/// Threads that can run shards at once in one process, as far as the profiler labels them
/// (further threads' samples carry no shard; one warning).
pub const MAX_THREADS: usize = 4096;

/// What a profiler asks the pipeline at a shard's and a stage's end.
pub trait Profiler: Send + Sync {
    /// Samples per CPU second.
    fn hz(&self) -> u32;
    /// The CPU samples taken so far in the shard labelled `label` (pending samples included).
    fn shard_samples(&self, label: u32) -> Option<u64>;
    /// The samples taken in the stage's shards, and its top functions by self time
    /// (`"f 62.1%; g 20.3%"`); `None` without samples.
    fn stage_summary(&self, stage: &str, execution: &str) -> Option<(u64, String)>;
}

/// What names a shard's samples.
#[derive(Debug)]
pub struct ShardLabels {
    /// The stage's name.
    pub stage: String,
    /// The stage's execution id.
    pub execution: String,
    /// The shard's index.
    pub shard: u32,
    /// The shard span's trace id (32 lowercase hex), when it is sampled.
    pub trace_id: Option<String>,
    /// The shard span's id (16 lowercase hex).
    pub span_id: Option<String>,
    inner: Arc<ShardInner>,
}

impl ShardLabels {
    /// The name of the phase in slot `slot` (as [`ThreadSample::phase`] gives it); `None`
    /// outside any named phase.
    pub fn phase(&self, slot: u8) -> Option<String> {
        self.inner.phases.name(slot).map(str::to_string)
    }
}

/// The labels of a sampled thread, as a signal handler reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSample {
    /// The label of the shard it runs (see [`labels`]); 0 when it runs none.
    pub label: u32,
    /// Its shard's current phase slot (0: outside any named phase).
    pub phase: u8,
    /// The Python stack the thread's Python sampler last saw while it ran this shard (see
    /// [`python_stack`]); 0: none.
    pub python: u32,
}

struct Slot {
    /// The thread's OS id; 0 for a slot never used. A slot is never freed, only relabelled, so
    /// a probe can stop at the first 0.
    tid: AtomicI32,
    label: AtomicU32,
    book: AtomicPtr<PhaseBook>,
    python: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    tid: AtomicI32::new(0),
    label: AtomicU32::new(0),
    book: AtomicPtr::new(std::ptr::null_mut()),
    python: AtomicU32::new(0),
};
static THREADS: [Slot; MAX_THREADS] = [FREE; MAX_THREADS];

static ON: AtomicBool = AtomicBool::new(false);
static PROFILER: RwLock<Option<Arc<dyn Profiler>>> = RwLock::new(None);

#[derive(Default)]
struct Labels {
    next: u32,
    epoch: u64,
    /// Label id → labels and, once its shard ended, the epoch it ended in.
    live: HashMap<u32, (Arc<ShardLabels>, Option<u64>)>,
    python: Vec<Arc<[String]>>,
}

static LABELS: Mutex<Option<Labels>> = Mutex::new(None);

fn with_labels<T>(f: impl FnOnce(&mut Labels) -> T) -> T {
    let mut guard = crate::sync::lock(&LABELS);
    f(guard.get_or_insert_with(Labels::default))
}

/// Installs (or, with `None`, removes) the profiler: shards started from now on register their
/// threads.
pub fn set_profiler(profiler: Option<Arc<dyn Profiler>>) {
    ON.store(profiler.is_some(), Ordering::Relaxed);
    *crate::sync::write(&PROFILER) = profiler;
}

/// Whether a profiler is installed.
#[inline]
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The installed profiler's samples per CPU second.
pub fn hz() -> Option<u32> {
    profiler().map(|p| p.hz())
}

fn profiler() -> Option<Arc<dyn Profiler>> {
    crate::sync::read(&PROFILER).clone()
}

fn start_of(tid: i32) -> usize {
    (tid.unsigned_abs() as usize).wrapping_mul(0x9E37_79B9) % MAX_THREADS
}

/// The slot of `tid`, if it has one. Atomic loads only.
fn find(tid: i32) -> Option<&'static Slot> {
    let start = start_of(tid);
    for i in 0..MAX_THREADS {
        let slot = &THREADS[(start + i) % MAX_THREADS];
        match slot.tid.load(Ordering::Acquire) {
            t if t == tid => return Some(slot),
            0 => return None,
            _ => {}
        }
    }
    None
}

/// The slot of `tid`, claiming one (a never-used one, or one no shard holds) on first use.
fn claim(tid: i32) -> Option<&'static Slot> {
    if let Some(slot) = find(tid) {
        return Some(slot);
    }
    let start = start_of(tid);
    for i in 0..MAX_THREADS {
        let slot = &THREADS[(start + i) % MAX_THREADS];
        let held = slot.tid.load(Ordering::Acquire);
        let idle = held != 0 && slot.label.load(Ordering::Acquire) == 0;
        if (held == 0 || idle) && slot.tid.compare_exchange(held, tid, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return Some(slot);
        }
    }
    None
}

/// The labels of thread `tid` now: the shard it runs and that shard's phase. Async-signal-safe
/// (atomic loads only); `None` for a thread that runs no shard.
pub fn thread_sample(tid: i32) -> Option<ThreadSample> {
    let slot = find(tid)?;
    let label = slot.label.load(Ordering::Acquire);
    if label == 0 {
        // A Python stack published for this thread is its last shard's: stale now.
        return None;
    }
    let python = slot.python.load(Ordering::Relaxed);
    let book = slot.book.load(Ordering::Acquire);
    // SAFETY: a book is published only while its shard's labels are live, and labels are
    // dropped two drain passes after their shard ended (see `reclaim`), long after any
    // handler that loaded the pointer returned.
    #[allow(unsafe_code)]
    let phase = if book.is_null() { 0 } else { unsafe { (*book).current_slot() } };
    Some(ThreadSample { label, phase, python })
}

/// The labels of `label`, while they are kept (see [`reclaim`]).
pub fn labels(label: u32) -> Option<Arc<ShardLabels>> {
    with_labels(|l| l.live.get(&label).map(|(labels, _)| labels.clone()))
}

/// The threads that run a shard now, with their shards' labels (for a sampler of stacks the
/// signal handler cannot read, such as Python's).
pub fn labelled_threads() -> Vec<(i32, u32)> {
    THREADS
        .iter()
        .filter_map(|s| {
            let tid = s.tid.load(Ordering::Acquire);
            let label = s.label.load(Ordering::Acquire);
            (tid != 0 && label != 0).then_some((tid, label))
        })
        .collect()
}

/// Publishes the Python stack thread `tid` runs now (an id from [`intern_python_stack`]); 0
/// clears it.
pub fn set_python_stack(tid: i32, stack: u32) {
    if let Some(slot) = find(tid) {
        slot.python.store(stack, Ordering::Relaxed);
    }
}

/// Keeps a Python stack (frames root first) for samples to refer to; returns its id (1-based).
/// The caller keeps its own index of what it interned: the same frames twice get two ids.
pub fn intern_python_stack(frames: Vec<String>) -> u32 {
    with_labels(|l| {
        l.python.push(frames.into());
        u32::try_from(l.python.len()).unwrap_or(u32::MAX)
    })
}

/// The Python stack `id` stands for.
pub fn python_stack(id: u32) -> Option<Arc<[String]>> {
    let i = usize::try_from(id).ok()?.checked_sub(1)?;
    with_labels(|l| l.python.get(i).cloned())
}

/// Called by the profiler after each pass over its samples: labels of shards that ended two
/// passes ago or earlier are dropped.
pub fn reclaim() {
    with_labels(|l| {
        l.epoch += 1;
        let epoch = l.epoch;
        l.live.retain(|_, (_, ended)| ended.is_none_or(|e| e + 2 > epoch));
    });
}

/// Registers the calling thread as running `inner` (a shard starting), when a profiler is on.
pub(crate) fn shard_started(inner: &Arc<ShardInner>, span: Option<&opentelemetry::trace::SpanContext>) {
    if !is_on() {
        return;
    }
    let Some(tid) = inner.tid else { return };
    let Some(slot) = claim(tid) else {
        warn_full();
        return;
    };
    let span = span.filter(|s| s.is_valid());
    let labels = ShardLabels {
        stage: inner.stage.name.to_string(),
        execution: inner.stage.execution_id.to_string(),
        shard: inner.index,
        trace_id: span.map(|s| s.trace_id().to_string()),
        span_id: span.map(|s| s.span_id().to_string()),
        inner: inner.clone(),
    };
    let id = with_labels(|l| {
        l.next = l.next.checked_add(1).unwrap_or(1);
        let id = l.next;
        l.live.insert(id, (Arc::new(labels), None));
        id
    });
    slot.book.store(std::ptr::from_ref(&inner.phases).cast_mut(), Ordering::Release);
    // No stack until the Python sampler reads this shard's (one it published late for the
    // thread's previous shard is stale).
    slot.python.store(0, Ordering::Relaxed);
    slot.label.store(id, Ordering::Release);
    inner.profile_label.store(id, Ordering::Relaxed);
}

/// Unregisters a shard's thread as it ends; the samples it got (end rows and spans carry them).
pub(crate) fn shard_ended(inner: &ShardInner) -> Option<u64> {
    let id = inner.profile_label.swap(0, Ordering::Relaxed);
    if id == 0 {
        return None;
    }
    if let Some(slot) = inner.tid.and_then(find) {
        if slot.label.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            slot.book.store(std::ptr::null_mut(), Ordering::Release);
            slot.python.store(0, Ordering::Relaxed);
        }
    }
    let samples = profiler().and_then(|p| p.shard_samples(id));
    with_labels(|l| {
        let epoch = l.epoch;
        if let Some((_, ended)) = l.live.get_mut(&id) {
            *ended = Some(epoch);
        }
    });
    samples
}

/// The stage's samples and top functions (its row's profile fields), when a profiler is on.
pub(crate) fn stage_summary(stage: &str, execution: &str) -> Option<(u64, String)> {
    if !is_on() {
        return None;
    }
    profiler()?.stage_summary(stage, execution)
}

fn warn_full() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            target: "pipetel",
            "more than {MAX_THREADS} threads ran shards in this process: the profiler's samples of further \
             threads carry no shard (shown once)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_slot_is_found_and_reused_once_idle() {
        let tid = 987_654;
        assert!(find(tid).is_none());
        let slot = claim(tid).expect("a free slot");
        slot.label.store(7, Ordering::Release);
        assert_eq!(thread_sample(tid), Some(ThreadSample { label: 7, phase: 0, python: 0 }));
        slot.python.store(3, Ordering::Relaxed);
        assert_eq!(thread_sample(tid), Some(ThreadSample { label: 7, phase: 0, python: 3 }));
        slot.label.store(0, Ordering::Release);
        assert_eq!(thread_sample(tid), None, "a thread without a shard has no labels, nor its last shard's stack");
        // An idle slot on the probe path is taken over by another thread.
        let other = claim(tid + MAX_THREADS as i32).expect("a slot");
        assert!(find(tid + MAX_THREADS as i32).is_some());
        other.label.store(0, Ordering::Release);
    }

    #[test]
    fn python_stacks_resolve_by_id() {
        let id = intern_python_stack(vec!["main (a.py:1)".into(), "work (a.py:9)".into()]);
        let frames = python_stack(id).expect("kept");
        assert_eq!(&*frames, ["main (a.py:1)", "work (a.py:9)"]);
        assert!(python_stack(0).is_none());
    }
}
