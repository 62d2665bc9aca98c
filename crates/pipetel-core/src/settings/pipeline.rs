//! The stage and worker telemetry's settings.

use std::path::PathBuf;
use std::time::Duration;

use super::error::Sourced;
use super::values::{ProgressMode, ShardMetrics, StallAction};

/// Stage and worker telemetry, as the application resolved it (a plain value: every field is
/// set by whoever builds it).
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// Prefix of the stage and worker namespaces.
    pub namespace: String,
    /// Interval of worker samples.
    pub sample_interval: Duration,
    /// How long a finished stage's series stay exported.
    pub retention: Duration,
    /// The JSON Lines file rows are appended to, and where it was named.
    pub rows_file: Option<Sourced<PathBuf>>,
    /// Register the stage/worker metrics.
    pub metrics: bool,
    /// Export user counters as `pipeline.stage.counters` (when `metrics` is on too).
    pub counter_metrics: bool,
    /// Write rows at all (`PIPETEL_ROWS`).
    pub rows: bool,
    /// The directory of the local rows store, when set (`PIPETEL_ROWS_DIR`).
    pub rows_dir: Option<Sourced<PathBuf>>,
    /// Rotation of the rows file (`PIPETEL_ROWS_MAX_BYTES`, `PIPETEL_ROWS_KEEP`).
    pub rows_rotation: pipetel_rows::Rotation,
    /// The live progress display on stderr (`PIPETEL_PROGRESS`).
    pub progress: ProgressMode,
    /// Skew, stragglers and stalls.
    pub answers: AnswerSettings,
}

/// The rules that name skewed stages, stragglers and stalls, and the per-shard series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerSettings {
    /// A stage is skewed, and a running shard a straggler, only when it is more than this
    /// beyond the 75th percentile of its stage's finished shards (`PIPETEL_SKEW_MIN`).
    pub skew_min: Duration,
    /// A running shard whose items and bytes have not moved for this long is stalled
    /// (`PIPETEL_STALL_TIMEOUT`; zero: never).
    pub stall_timeout: Duration,
    /// What a stalled shard gets (`PIPETEL_STALL_ACTION`).
    pub stall_action: StallAction,
    /// Which shards have their own worker series (`PIPETEL_SHARD_METRICS`).
    pub shard_metrics: ShardMetrics,
}

impl AnswerSettings {
    /// The default of `PIPETEL_SKEW_MIN`.
    pub const DEFAULT_SKEW_MIN: Duration = Duration::from_secs(10);
    /// The default of `PIPETEL_STALL_TIMEOUT`.
    pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(300);
}

impl Default for AnswerSettings {
    fn default() -> Self {
        Self {
            skew_min: Self::DEFAULT_SKEW_MIN,
            stall_timeout: Self::DEFAULT_STALL_TIMEOUT,
            stall_action: StallAction::default(),
            shard_metrics: ShardMetrics::default(),
        }
    }
}
