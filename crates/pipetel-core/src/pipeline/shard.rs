//! The shard handle: the hot path.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::keys::{warn_refused_once, CounterKey, CounterValue, CounterValueError};
use super::phase::{check_phase_name, Phase, PhaseNameError, MAX_PHASES};
use super::process::{current_tid, ProcessSampler};
use super::row::{WorkerStat, WorkerStatus};
use super::runtime::{emit_worker_row, end_shard};
use super::table::{new_shard, ShardInner, StageInner};
use crate::sampling::span_context;

/// Where a stage's shards hang in the trace.
#[derive(Debug)]
pub(crate) enum Parent {
    /// Under the stage's span in this process.
    Local(tracing::Span),
    /// Under a stage span in another process (`Stage::remote`).
    Remote(opentelemetry::Context),
}

/// Describes one shard of a stage before it starts.
#[must_use = "a shard runs only once `start()` is called"]
pub struct ShardBuilder<'a> {
    stage: &'a Arc<StageInner>,
    parent: &'a Parent,
    index: u32,
}

impl std::fmt::Debug for ShardBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardBuilder").field("stage", &self.stage.meta.name).field("index", &self.index).finish()
    }
}

impl<'a> ShardBuilder<'a> {
    pub(crate) fn new(stage: &'a Arc<StageInner>, parent: &'a Parent, index: u32) -> Self {
        Self { stage, parent, index }
    }

    /// Starts the shard on the calling thread: emits its start row, opens its span (a child of
    /// the stage's span, on whatever thread), and includes it in the periodic samples. CPU time
    /// is that of the calling thread.
    pub fn start(self) -> Shard {
        let stage = self.stage;
        let inner = Arc::new(new_shard(stage, self.index, current_tid(), true));
        let name = format!("shard {} of {}", self.index, stage.meta.name);
        // A remote parent is set on the root span below, once it exists.
        let parent = match self.parent {
            Parent::Local(parent) => parent.id(),
            Parent::Remote(_) => None,
        };
        let make = || {
            tracing::info_span!(
            target: "pipetel",
            parent: parent,
            "pipeline.shard",
            otel.name = %name,
            pipeline.namespace = inner.stage.worker_namespace,
            pipeline.stage.name = %stage.meta.name,
            pipeline.execution.id = %stage.meta.execution_id,
            pipeline.shard.index = i64::from(self.index),
            error = tracing::field::Empty,
            )
        };
        // A ratio sampler decides roots at creation: the remote parent must be known then.
        let span = match self.parent {
            Parent::Remote(cx) => crate::sampling::with_remote_parent(cx, make),
            Parent::Local(_) => make(),
        };
        // The start row leaves under the shard's span lock, which the sampler takes before it
        // samples a shard: no sample row can come before the start row.
        let row = inner.row(WorkerStatus::Start, &mut ProcessSampler::new(), None);
        {
            let mut s = crate::sync::lock(&inner.span);
            *s = Some(span.clone());
            {
                let mut shards = crate::sync::lock(&stage.shards);
                shards.push(inner.clone());
            }
            let cx = span_context(&span);
            super::profile::shard_started(&inner, cx.as_ref());
            emit_worker_row(&row, start_extra(stage), cx.as_ref());
        }
        Shard { inner, span }
    }
}

/// The fields a start row adds: where the shard runs, and its stage's shard count (readers of
/// the rows, such as `pipetel top`, show them for every running shard).
fn start_extra(stage: &StageInner) -> Vec<(String, opentelemetry::Value)> {
    use pipetel_rows::fields as f;
    vec![
        (f::HOST_NAME.into(), super::answers::host_name().to_string().into()),
        (f::PROCESS_PID.into(), i64::from(std::process::id()).into()),
        (f::TOTAL_SHARDS.into(), i64::from(stage.total_shards).into()),
    ]
}

/// A running shard. Record on the hot path with [`Shard::record`]; end with
/// [`Shard::finish`] or [`Shard::fail`]. Dropped unfinished (early return, `?`, panic), it ends as
/// `failed` and its end row is still emitted.
#[derive(Debug)]
pub struct Shard {
    inner: Arc<ShardInner>,
    span: tracing::Span,
}

impl Shard {
    /// Adds processed items and bytes: two relaxed atomic adds on this shard's own cache line,
    /// no lock, no allocation, no attribute set. Totals are folded into the metrics at
    /// collection time.
    #[inline]
    pub fn record(&self, items: u64, bytes: u64) {
        self.inner.cells.record(items, bytes);
    }

    /// A handle that records into this shard from wherever it is moved or cloned to (a binding
    /// that must not lock on the hot path, a helper thread): [`ShardRecorder::record`] is
    /// [`Shard::record`]. It does not end the shard; records made after the shard ended still
    /// count in the stage's totals and metrics, but in no row of the shard.
    ///
    /// ```
    /// let stage = pipetel_core::stage("copy").shards(1).start();
    /// let shard = stage.shard(0).start();
    /// let recorder = shard.recorder();
    /// std::thread::spawn(move || recorder.record(10, 640)).join().expect("recorded");
    /// let row = shard.finish();
    /// assert_eq!((row.items, row.bytes), (10, 640));
    /// ```
    pub fn recorder(&self) -> ShardRecorder {
        ShardRecorder { inner: self.inner.clone() }
    }

    /// Adds to a user counter: an integer (`u64`, `i64`, `u32`, ...) or a float (`f64`).
    /// Integers into a counter declared on the stage ([`StageBuilder::counter`]) take an
    /// atomic add; floats and undeclared counters take a slower locked path. A NaN or infinite
    /// value is refused: nothing is added and a warning naming the key is logged once per key
    /// (use [`Shard::try_add`] to get the error).
    ///
    /// [`StageBuilder::counter`]: super::StageBuilder::counter
    pub fn add(&self, key: &CounterKey, value: impl Into<CounterValue>) {
        if let Err(e) = self.try_add(key, value) {
            warn_refused_once(key.name(), &e);
        }
    }

    /// [`Shard::add`], returning the error for a NaN or infinite value.
    ///
    /// # Errors
    /// [`CounterValueError`] naming the key and the value; nothing is added.
    pub fn try_add(&self, key: &CounterKey, value: impl Into<CounterValue>) -> Result<(), CounterValueError> {
        let value = value.into().checked(key.name())?;
        if let CounterValue::Int(i) = value {
            if let Some((_, cell)) = self.inner.counters.iter().find(|(k, _)| k == key) {
                let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some(c.saturating_add(i)));
                return Ok(());
            }
        }
        {
            let mut extra = crate::sync::lock(&self.inner.extra_counters);
            match extra.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = slot.1 + value,
                None => extra.push((key.clone(), value)),
            }
        }
        Ok(())
    }

    /// The shard index.
    pub fn index(&self) -> u32 {
        self.inner.index
    }

    /// Items recorded so far.
    pub fn items(&self) -> u64 {
        self.inner.cells.items.load(Ordering::Relaxed)
    }

    /// Bytes recorded so far.
    pub fn bytes(&self) -> u64 {
        self.inner.cells.bytes.load(Ordering::Relaxed)
    }

    /// The shard's `tracing` span: enter it so `#[tracing::instrument]` functions called by the
    /// shard become its children.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Ends the shard as finished and returns its end row.
    pub fn finish(self) -> WorkerStat {
        self.end(WorkerStatus::End, None)
    }

    /// Ends the shard as failed and returns its end row.
    pub fn fail(self, reason: impl Into<String>) -> WorkerStat {
        self.end(WorkerStatus::Failed, Some(reason.into()))
    }

    fn end(&self, status: WorkerStatus, reason: Option<String>) -> WorkerStat {
        match end_shard(&self.inner, &self.span, status, reason.clone()) {
            Some(row) => row,
            // Already ended (by the stall action): the end row it got then.
            None => crate::sync::lock(&self.inner.end_row)
                .clone()
                .unwrap_or_else(|| self.inner.row(status, &mut ProcessSampler::new(), reason)),
        }
    }

    /// Enters phase `name` until the returned guard drops: the shard's time in between counts
    /// in that phase (its end row's `pipeline.phase.<name>.seconds`, the stage row's sum, and
    /// `pipeline.stage.phase.time`). A phase entered inside another pauses the outer one, so the
    /// phases and the time outside them add up to the shard's wall time. The conventional names
    /// are [`phase::WAIT_INPUT`](super::phase::WAIT_INPUT) (`wait.input`: blocked on upstream),
    /// [`phase::WAIT_OUTPUT`](super::phase::WAIT_OUTPUT) (`wait.output`: blocked on downstream,
    /// backpressure) and [`phase::IO`](super::phase::IO) (`io`: reads and writes). Costs two
    /// reads of the monotonic clock and a few relaxed atomics; enter phases on the thread that
    /// runs the shard.
    ///
    /// A name that is not 1–64 characters of `a-z A-Z 0-9 _ . -` (or is `unphased`), or a 16th
    /// distinct name, counts as outside any phase, with one warning
    /// ([`phase::check_phase_name`](super::phase::check_phase_name) checks a name beforehand).
    ///
    /// ```
    /// let stage = pipetel_core::stage("parse").shards(1).start();
    /// let shard = stage.shard(0).start();
    /// {
    ///     let _read = shard.phase("io");
    ///     // ... read the input
    /// }
    /// let _decode = shard.phase("decode");
    /// ```
    pub fn phase(&self, name: &str) -> Phase<'_> {
        Phase::enter(&self.inner.phases, name)
    }

    /// [`Shard::phase`] as a guard that owns a handle to the shard (`'static` and `Send`), for a
    /// binding that keeps the guard in an object.
    pub fn phase_owned(&self, name: &str) -> OwnedPhase {
        let inner = self.inner.clone();
        let previous = inner.phases.switch(inner.phases.slot(name));
        OwnedPhase { inner, previous }
    }

    /// The name of the phase the shard is in now (`None` outside any phase).
    pub fn current_phase(&self) -> Option<String> {
        self.inner.phases.current().map(str::to_string)
    }

    /// Seconds per phase so far (first-use order), and the seconds outside any phase.
    pub fn phase_seconds(&self) -> (Vec<(String, f64)>, f64) {
        let (rest, named) = self.inner.phases.seconds();
        (named, rest)
    }

    /// Phase `name` looked up once, for a loop that enters it again and again (a binding's
    /// phase object): [`PhaseHandle::enter`] is [`Shard::phase`] without the name lookup. The
    /// handle owns a handle to the shard; entered after the shard ended, it counts nothing. A
    /// 16th distinct name counts outside any phase, with one warning, as in [`Shard::phase`].
    ///
    /// ```
    /// let stage = pipetel_core::stage("parse").shards(1).start();
    /// let shard = stage.shard(0).start();
    /// let decode = shard.phase_handle("decode")?;
    /// for _ in 0..3 {
    ///     let _decode = decode.enter();
    ///     // ... decode one item
    /// }
    /// assert!(shard.phase_handle("not a name").is_err());
    /// # Ok::<(), pipetel_core::pipeline::phase::PhaseNameError>(())
    /// ```
    ///
    /// # Errors
    /// [`PhaseNameError`] naming `name` when it is not 1–64 characters of `a-z A-Z 0-9 _ . -`
    /// (or is `unphased`).
    pub fn phase_handle(&self, name: &str) -> Result<PhaseHandle, PhaseNameError> {
        check_phase_name(name)?;
        Ok(PhaseHandle { slot: self.inner.phases.slot(name), inner: self.inner.clone() })
    }
}

/// [`Shard::phase`] owning a handle to its shard ([`Shard::phase_owned`]).
#[must_use = "the phase lasts until this guard is dropped"]
#[derive(Debug)]
pub struct OwnedPhase {
    inner: Arc<ShardInner>,
    previous: u8,
}

impl Drop for OwnedPhase {
    fn drop(&mut self) {
        self.inner.phases.switch(self.previous);
    }
}

/// A phase of a running shard, its name looked up once ([`Shard::phase_handle`]):
/// `Clone + Send + Sync`, owning a handle to the shard.
#[derive(Debug, Clone)]
pub struct PhaseHandle {
    inner: Arc<ShardInner>,
    slot: u8,
}

impl PhaseHandle {
    /// Enters the phase until the returned guard drops: [`Shard::phase`] without the name
    /// lookup.
    #[inline]
    pub fn enter(&self) -> Phase<'_> {
        Phase::enter_slot(&self.inner.phases, self.slot)
    }

    /// Enters the phase with no guard and returns the phase the shard was in, which
    /// [`PhaseHandle::leave`] goes back to: for a binding whose blocks begin and end in two
    /// calls (Python's `__enter__` and `__exit__`). Blocks left in the reverse order of their
    /// entry nest as guards do.
    #[inline]
    pub fn enter_unguarded(&self) -> PreviousPhase {
        PreviousPhase(self.inner.phases.switch(self.slot))
    }

    /// Ends a block begun by [`PhaseHandle::enter_unguarded`]: the shard goes back to
    /// `previous`, the phase it was in when the block began.
    #[inline]
    pub fn leave(&self, previous: PreviousPhase) {
        self.inner.phases.switch(previous.0);
    }
}

/// The phase a shard was in when a block began ([`PhaseHandle::enter_unguarded`]), to go back
/// to when it ends ([`PhaseHandle::leave`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousPhase(u8);

impl PreviousPhase {
    /// As a number from 0 (outside any phase) to [`MAX_PHASES`], for a binding that keeps it
    /// packed in an integer.
    pub fn to_bits(self) -> u8 {
        self.0
    }

    /// From [`PreviousPhase::to_bits`]: `None` for a number above [`MAX_PHASES`].
    pub fn from_bits(bits: u8) -> Option<Self> {
        (usize::from(bits) <= MAX_PHASES).then_some(Self(bits))
    }
}

/// Records into a running [`Shard`] ([`Shard::recorder`]): `Clone + Send + Sync`, lock-free.
#[derive(Debug, Clone)]
pub struct ShardRecorder {
    inner: Arc<ShardInner>,
}

impl ShardRecorder {
    /// [`Shard::record`]: two relaxed atomic adds on the shard's own cache line.
    #[inline]
    pub fn record(&self, items: u64, bytes: u64) {
        self.inner.cells.record(items, bytes);
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        if self.inner.is_running() {
            let reason = if std::thread::panicking() { "panicked" } else { "dropped without finish()" };
            let _ = self.end(WorkerStatus::Failed, Some(reason.to_string()));
        }
    }
}
