//! Lost shards and stages: a shard still running in the rows whose process stopped writing
//! (killed, machine gone) would read `running` for ever. A running shard whose latest row is
//! older than [`LOST_AFTER_INTERVALS`] sample intervals is `lost`; a stage with no stage row
//! whose shards all ended or are lost, one at least lost, is `lost` too. The rule and its
//! arithmetic are [`pipetel_rows::answers::is_lost`]'s, shared with the library.
//!
//! The sample interval is the shard's own: the median gap between its consecutive periodic
//! (`running`) rows once it has two of them (the gap from its start row to its first sample is
//! shorter than an interval: the sampler ticks for every shard at once), else the
//! `--sample-interval` option (default 10 s, the library's default `PIPETEL_SAMPLE_INTERVAL`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(crate) use pipetel_rows::answers::LOST_AFTER_INTERVALS;

/// The interval assumed for a shard with fewer than two periodic rows: the library's default.
pub(crate) const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

/// How many of a shard's latest gaps the median is taken over (enough to ride out one late
/// sample, few enough to follow a changed interval).
const GAPS_KEPT: usize = 9;

/// Whether a worker row's status leaves its shard running.
pub(crate) fn is_running_status(status: &str) -> bool {
    matches!(status, "start" | "running" | "straggler" | "stalled" | "resumed")
}

/// The spacing of one shard's periodic rows, kept as they arrive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gaps {
    last_sample_ms: Option<u64>,
    gaps: Vec<u64>,
}

impl Gaps {
    /// Takes one row of the shard (in store order).
    pub(crate) fn add(&mut self, status: &str, ms: u64) {
        match status {
            "start" => *self = Gaps::default(),
            "running" => {
                if let Some(prev) = self.last_sample_ms.filter(|p| ms > *p) {
                    if self.gaps.len() == GAPS_KEPT {
                        self.gaps.remove(0);
                    }
                    self.gaps.push(ms - prev);
                }
                self.last_sample_ms = Some(ms);
            }
            _ => {}
        }
    }

    /// The shard's sample interval: the median of its gaps, else `default`.
    pub(crate) fn interval(&self, default: Duration) -> Duration {
        if self.gaps.is_empty() {
            return default;
        }
        let mut g = self.gaps.clone();
        g.sort_unstable();
        let mid = g.len() / 2;
        let ms = if g.len() % 2 == 1 { g[mid] } else { (g[mid - 1] + g[mid]) / 2 };
        Duration::from_millis(ms).max(Duration::from_millis(1))
    }
}

/// Whether a shard whose latest row (`status`, at `last_ms`) is as given is lost at `now_ms`.
pub(crate) fn shard_lost(status: &str, last_ms: u64, gaps: &Gaps, default: Duration, now_ms: u64) -> bool {
    is_running_status(status) && pipetel_rows::answers::is_lost(ms_i64(last_ms), ms_i64(now_ms), gaps.interval(default))
}

/// When the rows are judged and the interval assumed for shards without two samples.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LostRule {
    /// Milliseconds since the epoch.
    pub(crate) now_ms: u64,
    /// `--sample-interval`.
    pub(crate) default: Duration,
}

impl LostRule {
    /// The rule as of the wall clock now.
    pub(crate) fn now(default: Option<Duration>) -> LostRule {
        LostRule { now_ms: now_ms(), default: default.unwrap_or(DEFAULT_SAMPLE_INTERVAL) }
    }

    /// [`shard_lost`] under this rule.
    pub(crate) fn lost(&self, status: &str, last_ms: u64, gaps: &Gaps) -> bool {
        shard_lost(status, last_ms, gaps, self.default, self.now_ms)
    }
}

/// The wall clock in milliseconds since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// What a shard's rows add up to, for the stage: lost only when none runs and one is lost.
pub(crate) fn stage_lost(shard_states: impl IntoIterator<Item = ShardFate>) -> bool {
    let mut any_lost = false;
    for s in shard_states {
        match s {
            ShardFate::Running => return false,
            ShardFate::Lost => any_lost = true,
            ShardFate::Ended => {}
        }
    }
    any_lost
}

/// Where a shard stands for [`stage_lost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardFate {
    Running,
    Ended,
    Lost,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_the_median_gap_of_periodic_rows() {
        let mut g = Gaps::default();
        g.add("start", 1_000);
        g.add("running", 4_000);
        assert_eq!(g.interval(DEFAULT_SAMPLE_INTERVAL), DEFAULT_SAMPLE_INTERVAL, "one sample: no gap yet");
        g.add("running", 9_000);
        g.add("straggler", 9_001);
        g.add("running", 14_000);
        g.add("running", 40_000);
        assert_eq!(g.interval(DEFAULT_SAMPLE_INTERVAL), Duration::from_secs(5), "median of 5, 5, 26");
        g.add("start", 50_000);
        assert_eq!(g.interval(Duration::from_secs(7)), Duration::from_secs(7), "a new attempt starts over");
    }

    #[test]
    fn lost_after_three_intervals_of_silence_and_only_while_running() {
        let mut g = Gaps::default();
        g.add("running", 0);
        g.add("running", 2_000);
        assert!(!shard_lost("running", 2_000, &g, DEFAULT_SAMPLE_INTERVAL, 8_000));
        assert!(shard_lost("running", 2_000, &g, DEFAULT_SAMPLE_INTERVAL, 8_001));
        assert!(shard_lost("stalled", 2_000, &g, DEFAULT_SAMPLE_INTERVAL, 8_001));
        assert!(!shard_lost("end", 2_000, &g, DEFAULT_SAMPLE_INTERVAL, 99_000));
        assert!(!shard_lost("start", 0, &Gaps::default(), DEFAULT_SAMPLE_INTERVAL, 30_000));
        assert!(shard_lost("start", 0, &Gaps::default(), DEFAULT_SAMPLE_INTERVAL, 30_001));
        use ShardFate::*;
        assert!(stage_lost([Ended, Lost]));
        assert!(!stage_lost([Ended, Ended]));
        assert!(!stage_lost([Lost, Running]));
    }
}
