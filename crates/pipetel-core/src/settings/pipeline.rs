//! The stage and worker telemetry's settings.

use std::path::PathBuf;
use std::time::Duration;

use super::error::Sourced;
use super::values::ProgressMode;

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
}
