//! Answers from the shards' figures: the distribution of a stage's shard durations and rates,
//! its skew, and the rules that name a running shard a straggler or stalled. Pure arithmetic
//! over figures the table holds; the sampler thread applies the rules (never the hot path).
//!
//! # The rules
//! - **Skewed stage** (the rule Spark users know): the slowest finished shard took more than
//!   1.5 × the 75th percentile of the finished shards' elapsed time, and more than
//!   `PIPETEL_SKEW_MIN` beyond it.
//! - **Straggler**, while the stage runs, judged at each sample:
//!   - once at least [`MIN_FINISHED`] shards of the stage finished: the shard has run longer
//!     than the skew rule allows against them (elapsed > 1.5 × their 75th percentile and more
//!     than `PIPETEL_SKEW_MIN` beyond it) — rule `elapsed`;
//!   - before that, with at least [`MIN_PEERS`] other shards running: the shard has run longer
//!     than `PIPETEL_SKEW_MIN` and its rate over its life (items ÷ elapsed) is under half the
//!     median of its running peers' — rule `rate` (a shard that needs twice the time of a
//!     typical one is what the `elapsed` rule would name at its end).
//!
//!   A shard is named once per attempt.
//! - **Stalled**: the shard's items and bytes have not moved for `PIPETEL_STALL_TIMEOUT`,
//!   counted from the sample that last saw them move; `resumed` when they move again.

use std::sync::RwLock;

use crate::settings::{AnswerSettings, ShardMetrics};

use pipetel_rows::answers::{beyond_rule, quantile};
pub use pipetel_rows::answers::{Distribution, SKEW_FACTOR};
use std::time::{Duration, Instant};

/// Finished shards a stage needs before the `elapsed` straggler rule applies.
pub const MIN_FINISHED: usize = 3;
/// Running peers a shard needs before the `rate` straggler rule applies.
pub const MIN_PEERS: usize = 3;
/// Below this share of its running peers' median rate a shard is a straggler (rule `rate`).
pub const RATE_FACTOR: f64 = 0.5;

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(quantile(v, 0.5))
}

/// What a stage's answers are, as of now ([`Stage::answers`](super::Stage::answers); the stage
/// row carries the same figures).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct StageAnswers {
    /// Elapsed seconds of the finished shards (the last attempt of each index that succeeded).
    pub shard_elapsed: Option<Distribution>,
    /// Items per second of the finished shards over their lives.
    pub shard_item_rate: Option<Distribution>,
    /// `max ÷ p75` of the finished shards' elapsed seconds.
    pub skew: Option<f64>,
    /// The skew rule holds (see the [module](self)).
    pub skewed: bool,
    /// Shards named stragglers so far.
    pub stragglers: u64,
    /// Stalls of its shards so far.
    pub stalls: u64,
    /// Seconds per phase, summed over its shards (first-use order).
    pub phases: Vec<(String, f64)>,
    /// Seconds of its shards outside any phase.
    pub unphased_seconds: f64,
    /// Seconds its shards' threads were off CPU (wall − CPU time), when CPU time is measurable.
    pub off_cpu_seconds: Option<f64>,
    /// GPU use attributed to its shards, when a GPU reader saw GPUs while they ran
    /// ([`super::gpu`]).
    pub gpu: Option<super::gpu::GpuTally>,
}

/// Why a running shard is a straggler: the rule and the peers' figure it was compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Straggling {
    pub(crate) rule: &'static str,
    pub(crate) peers: f64,
}

/// The straggler rule for a running shard with `elapsed` seconds and `items`, against the
/// finished shards' elapsed seconds and its running peers' rates (itself excluded).
pub(crate) fn straggling(
    elapsed: f64,
    items: u64,
    finished: &[f64],
    peer_rates: &mut [f64],
    skew_min: Duration,
) -> Option<Straggling> {
    if finished.len() >= MIN_FINISHED {
        let p75 = Distribution::of(finished)?.p75;
        return beyond_rule(elapsed, p75, skew_min).then_some(Straggling { rule: "elapsed", peers: p75 });
    }
    if peer_rates.len() < MIN_PEERS || elapsed <= skew_min.as_secs_f64() || elapsed <= 0.0 {
        return None;
    }
    let m = median(peer_rates)?;
    let rate = items as f64 / elapsed;
    (m > 0.0 && rate < RATE_FACTOR * m).then_some(Straggling { rule: "rate", peers: m })
}

/// What the sampler keeps per shard to judge it.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    items: u64,
    bytes: u64,
    /// The sample that last saw the shard move (its start, before any).
    moved_at: Instant,
    stalled: bool,
    pub(crate) straggler: bool,
}

/// A change in a shard's stall state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum StallChange {
    /// It has not moved for this long.
    Stalled(Duration),
    /// It moves again after this long.
    Resumed(Duration),
}

impl Watch {
    pub(crate) fn new(started: Instant) -> Self {
        Watch { items: 0, bytes: 0, moved_at: started, stalled: false, straggler: false }
    }

    /// Folds in the figures of a sample taken at `now`; a stall starts after `timeout` without
    /// movement (never for a zero timeout).
    pub(crate) fn observe(&mut self, now: Instant, items: u64, bytes: u64, timeout: Duration) -> Option<StallChange> {
        if (items, bytes) != (self.items, self.bytes) {
            let still = now.saturating_duration_since(self.moved_at);
            (self.items, self.bytes, self.moved_at) = (items, bytes, now);
            if std::mem::take(&mut self.stalled) {
                return Some(StallChange::Resumed(still));
            }
            return None;
        }
        let still = now.saturating_duration_since(self.moved_at);
        if !self.stalled && !timeout.is_zero() && still >= timeout {
            self.stalled = true;
            return Some(StallChange::Stalled(still));
        }
        None
    }
}

// ----- the installed rules -----

static RULES: RwLock<Option<AnswerSettings>> = RwLock::new(None);

/// Installs the rules `init` resolved (`None`: the defaults).
pub(crate) fn set_rules(rules: Option<AnswerSettings>) {
    *crate::sync::write(&RULES) = rules;
}

/// The rules for skew, stragglers, stalls and per-shard series (the defaults before `init`).
pub(crate) fn rules() -> AnswerSettings {
    crate::sync::read(&RULES).unwrap_or_default()
}

/// Running shards per stage with their own worker series under `PIPETEL_SHARD_METRICS=running`.
pub(crate) const RUNNING_SHARD_SERIES: usize = 32;

/// How many shards per stage have their own worker series (`None`: all).
pub(crate) fn shard_metrics_limit() -> Option<usize> {
    match rules().shard_metrics {
        ShardMetrics::All => None,
        ShardMetrics::Off => Some(0),
        _ => Some(RUNNING_SHARD_SERIES),
    }
}

// ----- who and where -----

/// A function giving the current stack of the OS thread `tid` (innermost frame last), set by a
/// binding that can read its language's stacks (the Python package does).
pub type StackReader = fn(tid: i32) -> Option<String>;

static STACK_READER: RwLock<Option<StackReader>> = RwLock::new(None);

/// Sets how a stalled shard's current stack is read: the stalled row carries what `reader`
/// gives for the shard's thread (`pipeline.stack`).
pub fn set_stack_reader(reader: StackReader) {
    *crate::sync::write(&STACK_READER) = Some(reader);
}

pub(crate) fn read_stack(tid: Option<i32>) -> Option<String> {
    let reader = (*crate::sync::read(&STACK_READER))?;
    reader(tid?)
}

/// This machine's host name, as rows and profiles carry it (`host.name`; read once).
pub fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::env::var("COMPUTERNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straggler_by_elapsed_once_enough_finished_else_by_rate() {
        let min = Duration::from_secs(1);
        let finished = [10.0, 11.0, 12.0, 10.5];
        let p75 = Distribution::of(&finished).expect("values").p75;
        assert_eq!(straggling(1.5 * p75 - 0.01, 0, &finished, &mut [], min), None);
        let s = straggling(1.5 * p75 + 0.01, 0, &finished, &mut [], min).expect("named");
        assert_eq!((s.rule, s.peers), ("elapsed", p75));
        // Two finished: the rate rule, against at least three running peers.
        let mut peers = [100.0, 90.0, 110.0];
        let s = straggling(4.0, 150, &finished[..2], &mut peers, min).expect("named by rate");
        assert_eq!((s.rule, s.peers), ("rate", 100.0));
        assert_eq!(straggling(4.0, 250, &finished[..2], &mut peers, min), None, "62.5/s is over half");
        assert_eq!(straggling(0.5, 1, &finished[..2], &mut peers, min), None, "not past the minimum yet");
        assert_eq!(straggling(4.0, 1, &finished[..2], &mut peers[..2], min), None, "too few peers");
    }

    #[test]
    fn a_shard_stalls_after_the_timeout_and_resumes_once() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(5);
        let mut w = Watch::new(t0);
        assert_eq!(w.observe(t0 + Duration::from_secs(1), 10, 0, timeout), None);
        assert_eq!(w.observe(t0 + Duration::from_secs(5), 10, 0, timeout), None);
        assert_eq!(
            w.observe(t0 + Duration::from_secs(6), 10, 0, timeout),
            Some(StallChange::Stalled(Duration::from_secs(5)))
        );
        assert_eq!(w.observe(t0 + Duration::from_secs(7), 10, 0, timeout), None, "named once");
        assert_eq!(
            w.observe(t0 + Duration::from_secs(9), 10, 1, timeout),
            Some(StallChange::Resumed(Duration::from_secs(8)))
        );
        assert_eq!(w.observe(t0 + Duration::from_secs(20), 10, 1, Duration::ZERO), None, "zero: never");
    }
}
