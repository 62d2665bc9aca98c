//! Per-stage execution metrics, after TeleFuser's `enable_stage_metrics` / `StageMetricContext`:
//! a context per stage name with its executions, errors, executions in flight and durations,
//! readable in the program and exported through the OTel meter.
//!
//! ```
//! use std::time::Duration;
//!
//! let tokenize = pipetel_core::stage_metrics::enable_stage_metrics("tokenize");
//! // A duration measured elsewhere, with the sizes of the input and output (bytes):
//! tokenize.record_execution(Duration::from_millis(12), true, Some(4096), Some(1024));
//! // Or a guard: counts one execution in flight, records its duration when dropped; a failure
//! // with `fail()`, or when the code panics.
//! {
//!     let run = tokenize.start();
//!     run.input_size(2048);
//!     // ... the stage's work ...
//! }
//! assert_eq!(tokenize.total().value(), 2);
//! assert_eq!(tokenize.errors().value(), 0);
//! assert_eq!(tokenize.active().value(), 0);
//! assert_eq!(tokenize.duration().count(), 2);
//! pipetel_core::stage_metrics::disable_stage_metrics("tokenize"); // from now on this stage records nothing
//! ```
//!
//! # Exported as `#[pipetel::measure]`'s metrics
//! A stage context records into the very instruments `#[pipetel::measure]` records into, with
//! the attribute `stage` (and no `function` / `module`), so a stage measured either way reads
//! the same in a dashboard:
//!
//! | accessor | OTel instrument | Prometheus name |
//! |---|---|---|
//! | [`StageMetrics::total`] | `function.calls` | `function_calls_total{stage="tokenize"}` |
//! | [`StageMetrics::errors`] | `function.errors` (`error.type` = `err`, or `panic` from a guard) | `function_errors_total{stage="tokenize",error_type="err"}` |
//! | [`StageMetrics::active`] | `function.in_flight` | `function_in_flight{stage="tokenize"}` |
//! | [`StageMetrics::duration`] | `function.duration` (seconds) | `function_duration_seconds_bucket{stage="tokenize",le="..."}` |
//! | `input_size` / `output_size` | `function.input.size` / `function.output.size` (bytes) | `function_input_size_bytes`, `function_output_size_bytes` |
//!
//! The duration buckets are `function.duration`'s: [`crate::buckets::SECONDS_BUCKETS`], or the
//! `buckets = [...]` of the first `#[pipetel::measure]` function resolved.
//!
//! # Switches
//! - [`disable_stage_metrics`] turns one stage off: its context (and every clone) records
//!   nothing, at the cost of one atomic load per call; its series keep their last values.
//!   [`enable_stage_metrics`] turns it on again, counting on from where it stopped.
//! - `PIPETEL_STAGE_METRICS=false` (file key `pipeline.metrics`, `Config::with_stage_metrics`)
//!   turns every stage metric off once `init` ran: contexts record nothing, nothing is exported.
//!
//! A context costs a few hundred bytes that are never freed (the instruments' callbacks read
//! them without a lock): enable a fixed set of stage names, not one per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::measure::__private::{Call, Site};

struct Entry {
    name: String,
    site: &'static Site,
    enabled: AtomicBool,
    /// Readable duration totals: executions recorded with a duration, and the sum in nanoseconds.
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

static STAGES: Mutex<Option<HashMap<String, Arc<Entry>>>> = Mutex::new(None);

/// Turns metrics on for `stage` and returns its context (the same one for the same name, so
/// values count on across calls). TeleFuser's `enable_stage_metrics(stage)`.
pub fn enable_stage_metrics(stage: &str) -> StageMetrics {
    let mut stages = crate::sync::lock(&STAGES);
    let stages = stages.get_or_insert_with(HashMap::new);
    let entry = stages
        .entry(stage.to_string())
        .or_insert_with(|| {
            Arc::new(Entry {
                name: stage.to_string(),
                site: Site::leak_for_stage(stage),
                enabled: AtomicBool::new(true),
                count: AtomicU64::new(0),
                sum_nanos: AtomicU64::new(0),
            })
        })
        .clone();
    entry.enabled.store(true, Ordering::Relaxed);
    StageMetrics { entry }
}

/// Turns metrics off for `stage`: its contexts record nothing until [`enable_stage_metrics`]
/// turns it on again. Does nothing for a stage never enabled. TeleFuser's
/// `disable_stage_metrics(stage)`.
pub fn disable_stage_metrics(stage: &str) {
    let stages = crate::sync::lock(&STAGES);
    if let Some(entry) = stages.as_ref().and_then(|s| s.get(stage)) {
        entry.enabled.store(false, Ordering::Relaxed);
    }
}

/// The context of `stage` when its metrics are on.
pub fn stage_metrics(stage: &str) -> Option<StageMetrics> {
    let stages = crate::sync::lock(&STAGES);
    let entry = stages.as_ref()?.get(stage)?;
    entry.enabled.load(Ordering::Relaxed).then(|| StageMetrics { entry: entry.clone() })
}

/// The names of the stages whose metrics are on, sorted.
pub fn enabled_stages() -> Vec<String> {
    let stages = crate::sync::lock(&STAGES);
    let mut names: Vec<String> = stages
        .iter()
        .flat_map(|s| s.values())
        .filter(|e| e.enabled.load(Ordering::Relaxed))
        .map(|e| e.name.clone())
        .collect();
    names.sort();
    names
}

/// The metrics of one stage (TeleFuser's `StageMetricContext`). Cheap to clone; clones share
/// the values.
#[derive(Clone)]
pub struct StageMetrics {
    entry: Arc<Entry>,
}

impl std::fmt::Debug for StageMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageMetrics")
            .field("stage", &self.entry.name)
            .field("enabled", &self.is_enabled())
            .field("total", &self.total().value())
            .field("errors", &self.errors().value())
            .field("active", &self.active().value())
            .finish()
    }
}

impl StageMetrics {
    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// Whether the stage records: false after [`disable_stage_metrics`].
    pub fn is_enabled(&self) -> bool {
        self.entry.enabled.load(Ordering::Relaxed)
    }

    /// Records one execution measured elsewhere: `duration`, whether it succeeded, and the sizes
    /// of its input and output in bytes when known. TeleFuser's
    /// `record_execution(duration, success, input_size, output_size)`.
    pub fn record_execution(
        &self,
        duration: Duration,
        success: bool,
        input_size: Option<u64>,
        output_size: Option<u64>,
    ) {
        if !self.is_enabled() {
            return;
        }
        if self.entry.site.record_execution(duration.as_secs_f64(), success, input_size, output_size) {
            self.entry.add_duration(duration);
        }
    }

    /// Starts one execution: counted at once (total and active); dropping the guard records its
    /// duration and ends it, as a success unless [`StageRun::fail`] was called or the thread is
    /// panicking.
    pub fn start(&self) -> StageRun {
        let call = self.is_enabled().then(|| Call::start(self.entry.site, tracing::Span::none()));
        StageRun { entry: self.entry.clone(), call, started: Instant::now(), failed: false }
    }

    /// Executions so far (TeleFuser's `total`).
    pub fn total(&self) -> StageCounter {
        StageCounter { entry: self.entry.clone(), errors: false }
    }

    /// Failed executions so far (TeleFuser's `errors`).
    pub fn errors(&self) -> StageCounter {
        StageCounter { entry: self.entry.clone(), errors: true }
    }

    /// Executions in flight (guards from [`StageMetrics::start`] not dropped yet).
    pub fn active(&self) -> StageGauge {
        StageGauge { entry: self.entry.clone() }
    }

    /// The durations recorded so far (TeleFuser's `duration`).
    pub fn duration(&self) -> StageDuration {
        StageDuration { entry: self.entry.clone() }
    }
}

impl Entry {
    fn add_duration(&self, duration: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Moves the site's calls, errors and executions in flight by hand; nothing while the stage
    /// is off.
    fn adjust_by_hand(&self, calls: u64, errors: u64, in_flight: i64) {
        if self.enabled.load(Ordering::Relaxed) {
            self.site.adjust(calls, errors, in_flight);
        }
    }
}

/// A stage's execution or error count (read-only: the context records).
#[derive(Clone)]
pub struct StageCounter {
    entry: Arc<Entry>,
    errors: bool,
}

impl StageCounter {
    /// The count so far.
    pub fn value(&self) -> u64 {
        let (calls, errors, _) = self.entry.site.counts();
        if self.errors {
            errors
        } else {
            calls
        }
    }

    /// Adds `n` by hand (TeleFuser's `context.total.inc()` / `context.errors.inc()`), for code
    /// that records executions itself; an error counts as `error.type=err`. Nothing while the
    /// stage is off.
    pub fn inc_by(&self, n: u64) {
        let (calls, errors) = if self.errors { (0, n) } else { (n, 0) };
        self.entry.adjust_by_hand(calls, errors, 0);
    }
}

/// A stage's executions in flight.
#[derive(Clone)]
pub struct StageGauge {
    entry: Arc<Entry>,
}

impl StageGauge {
    /// Executions in flight now.
    pub fn value(&self) -> i64 {
        self.entry.site.counts().2
    }

    /// Moves the executions in flight by `n` by hand (TeleFuser's `context.active.inc()` /
    /// `dec()`). Nothing while the stage is off.
    pub fn add(&self, n: i64) {
        self.entry.adjust_by_hand(0, 0, n);
    }
}

/// `Debug` of the handles that show their value.
macro_rules! debug_value {
    ($($handle:ident),+) => {$(
        impl std::fmt::Debug for $handle {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($handle)).field("value", &self.value()).finish()
            }
        }
    )+};
}

debug_value!(StageCounter, StageGauge);

/// A stage's recorded durations: count, sum and average (the buckets are exported, see the
/// [module docs](self)).
#[derive(Clone)]
pub struct StageDuration {
    entry: Arc<Entry>,
}

impl StageDuration {
    /// Durations recorded.
    pub fn count(&self) -> u64 {
        self.entry.count.load(Ordering::Relaxed)
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.entry.sum_nanos.load(Ordering::Relaxed))
    }

    /// Their mean, `None` before the first.
    pub fn average(&self) -> Option<Duration> {
        let count = self.count();
        (count > 0).then(|| self.sum() / u32::try_from(count).unwrap_or(u32::MAX))
    }

    /// Records one duration by hand, without counting an execution (TeleFuser's
    /// `context.duration.observe(seconds)`). Nothing while the stage is off.
    pub fn observe(&self, duration: Duration) {
        if self.entry.enabled.load(Ordering::Relaxed) && self.entry.site.record_duration(duration.as_secs_f64()) {
            self.entry.add_duration(duration);
        }
    }
}

impl std::fmt::Debug for StageDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageDuration").field("count", &self.count()).field("sum", &self.sum()).finish()
    }
}

/// One execution of a stage, from [`StageMetrics::start`]: counted while it lives, recorded
/// when dropped (a success unless [`StageRun::fail`] was called or the thread panics).
#[must_use = "the execution ends when the guard drops"]
pub struct StageRun {
    entry: Arc<Entry>,
    /// `None` when the stage was off at the start: nothing is recorded.
    call: Option<Call>,
    started: Instant,
    failed: bool,
}

impl std::fmt::Debug for StageRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageRun").field("stage", &self.entry.name).field("failed", &self.failed).finish()
    }
}

impl StageRun {
    /// Records the size of the execution's input, in bytes.
    pub fn input_size(&self, bytes: u64) {
        if let Some(call) = &self.call {
            call.input_size(bytes);
        }
    }

    /// Records the size of the execution's output, in bytes.
    pub fn output_size(&self, bytes: u64) {
        if let Some(call) = &self.call {
            call.output_size(bytes);
        }
    }

    /// Ends the execution as failed.
    pub fn fail(mut self) {
        self.failed = true;
    }

    /// Ends the execution as a success (what dropping the guard does).
    pub fn succeed(self) {}

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for StageRun {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else { return };
        let counted = call.counted();
        if std::thread::panicking() {
            // The call's own drop records the panic (`error.type=panic`) and its duration.
            drop(call);
        } else if self.failed {
            call.finish_result(&Err::<(), ()>(()));
        } else {
            call.finish_ok();
        }
        if counted {
            self.entry.add_duration(self.started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_execution_counts_totals_errors_and_durations() {
        let ctx = enable_stage_metrics("unit_record");
        ctx.record_execution(Duration::from_millis(500), true, Some(10), None);
        ctx.record_execution(Duration::from_millis(300), false, None, Some(20));
        assert_eq!((ctx.total().value(), ctx.errors().value(), ctx.active().value()), (2, 1, 0));
        let d = ctx.duration();
        assert_eq!(d.count(), 2);
        assert_eq!(d.sum(), Duration::from_millis(800));
        assert_eq!(d.average(), Some(Duration::from_millis(400)));
        assert_eq!(ctx.name(), "unit_record");
        // The same name gives the same context.
        assert_eq!(enable_stage_metrics("unit_record").total().value(), 2);
    }

    #[test]
    fn the_guard_counts_active_and_records_success_failure_and_panic() {
        let ctx = enable_stage_metrics("unit_guard");
        let run = ctx.start();
        run.input_size(64);
        assert_eq!(ctx.active().value(), 1);
        assert_eq!(ctx.total().value(), 1, "counted at the start");
        std::thread::sleep(Duration::from_millis(2));
        run.output_size(32);
        drop(run);
        assert_eq!((ctx.active().value(), ctx.errors().value()), (0, 0));
        assert!(ctx.duration().sum() >= Duration::from_millis(2));
        ctx.start().fail();
        assert_eq!((ctx.total().value(), ctx.errors().value(), ctx.active().value()), (2, 1, 0));
        let c = ctx.clone();
        let panicked = std::thread::spawn(move || {
            let _run = c.start();
            panic!("stage failed");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!((ctx.total().value(), ctx.errors().value(), ctx.active().value()), (3, 2, 0));
        assert_eq!(ctx.duration().count(), 3);
    }

    #[test]
    fn a_disabled_stage_records_nothing_until_enabled_again() {
        let ctx = enable_stage_metrics("unit_disable");
        ctx.record_execution(Duration::from_millis(1), true, None, None);
        assert!(enabled_stages().contains(&"unit_disable".to_string()));
        disable_stage_metrics("unit_disable");
        assert!(!ctx.is_enabled());
        assert!(stage_metrics("unit_disable").is_none());
        assert!(!enabled_stages().contains(&"unit_disable".to_string()));
        ctx.record_execution(Duration::from_millis(1), false, None, None);
        let run = ctx.start();
        assert_eq!(ctx.active().value(), 0);
        run.fail();
        assert_eq!((ctx.total().value(), ctx.errors().value(), ctx.duration().count()), (1, 0, 1));
        // Disabling a stage never enabled is a no-op.
        disable_stage_metrics("unit_never_enabled");
        let again = enable_stage_metrics("unit_disable");
        assert!(ctx.is_enabled(), "clones follow the stage's switch");
        again.record_execution(Duration::from_millis(1), true, None, None);
        assert_eq!(ctx.total().value(), 2, "counts on from where it stopped");
        assert!(stage_metrics("unit_disable").is_some());
    }

    #[test]
    fn counts_moved_by_hand_as_telefuser_code_does() {
        let ctx = enable_stage_metrics("unit_by_hand");
        ctx.total().inc_by(2);
        ctx.errors().inc_by(1);
        ctx.active().add(1);
        ctx.duration().observe(Duration::from_millis(250));
        assert_eq!((ctx.total().value(), ctx.errors().value(), ctx.active().value()), (2, 1, 1));
        assert_eq!((ctx.duration().count(), ctx.duration().sum()), (1, Duration::from_millis(250)));
        ctx.active().add(-1);
        disable_stage_metrics("unit_by_hand");
        ctx.total().inc_by(5);
        ctx.duration().observe(Duration::from_millis(1));
        assert_eq!((ctx.total().value(), ctx.active().value(), ctx.duration().count()), (2, 0, 1));
    }
}
