//! The setters of the answers' rules: skew, stragglers, stalls and which shards have worker
//! series (`PIPETEL_SKEW_MIN`, `PIPETEL_STALL_TIMEOUT`, `PIPETEL_STALL_ACTION`,
//! `PIPETEL_SHARD_METRICS`).

use std::time::Duration;

use super::rule::{AnySlot, Set};
use super::table::Rules;
use super::Config;
use pipetel_core::settings::{ShardMetrics, StallAction};

impl Config {
    /// Sets how far beyond the 75th percentile of a stage's finished shards a skewed stage's
    /// slowest shard, or a straggler, must be (besides over 1.5 times it).
    pub fn with_skew_min(mut self, min: Duration) -> Self {
        *AnySlot::at(&mut self.slots.skew_min, 0) = Some(Set::code(min, "with_skew_min", Rules::skew_min));
        self
    }

    /// Sets how long a running shard's items and bytes may not move before it is stalled
    /// (`Duration::ZERO`: never).
    pub fn with_stall_timeout(mut self, timeout: Duration) -> Self {
        *AnySlot::at(&mut self.slots.stall_timeout, 0) =
            Some(Set::code(timeout, "with_stall_timeout", Rules::stall_timeout));
        self
    }

    /// Sets what a stalled shard gets: a report, or a report and the shard ended as failed.
    pub fn with_stall_action(mut self, action: StallAction) -> Self {
        *AnySlot::at(&mut self.slots.stall_action, 0) =
            Some(Set::code(action, "with_stall_action", Rules::stall_action));
        self
    }

    /// Sets which shards have their own series on the worker families.
    pub fn with_shard_metrics(mut self, shards: ShardMetrics) -> Self {
        *AnySlot::at(&mut self.slots.shard_metrics, 0) =
            Some(Set::code(shards, "with_shard_metrics", Rules::shard_metrics));
        self
    }
}
