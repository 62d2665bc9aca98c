//! Stage and worker telemetry: one aggregate row per pipeline stage, and per shard a start row,
//! periodic samples and an end row — as OTel metrics, spans and log records carrying the
//! namespace (`pipeline.stage` / `pipeline.worker` by default, `<prefix>.stage` /
//! `<prefix>.worker` with `PIPETEL_NAMESPACE=<prefix>`).
//!
//! # The hot path
//! [`Shard::record`] is two relaxed atomic adds on the shard's own cache line. Nothing is
//! aggregated on the hot path: the shards' cells are folded when they are read (a Prometheus
//! scrape writes the families from the stage table; an OTLP export collects observable
//! instruments).
//!
//! # What is emitted
//! - **Metrics** ([`crate::families::pipeline`]): stage items, bytes, duration, active, runs, shards by state,
//!   errors, CPU; worker items, bytes, CPU time and utilization, memory, heartbeat. Metric names
//!   are fixed (dashboards rely on them); the namespace travels as the `pipeline.namespace`
//!   attribute. Worker metrics carry `pipeline.shard.index`, bounded by the cardinality limit
//!   (`PIPETEL_CARDINALITY_LIMIT`); the rows always carry every shard.
//! - **Spans**: a stage span, and per shard a child span — also across threads, and across
//!   processes through [`Stage::traceparent`] / [`Stage::remote`]. End attributes carry the
//!   row's figures; a failure sets status Error with the reason.
//! - **Log rows**: OTel log records whose event name is the namespace and whose attributes are
//!   the row's fields ([`keys`]) plus trace and span ids; optionally also JSON Lines in
//!   `PIPETEL_ROWS_FILE`.
//!
//! The explicit form, [`emit_stage_stat`] and [`emit_worker_stat`], is for callers that aggregate
//! themselves; the handles are built on the same row code, so both give identical rows.
//!
//! Finished stages stay exported for `PIPETEL_STAGE_RETENTION` (default 5 minutes), then their
//! series are dropped so a long-lived process does not grow without bound.

// Layers, each importing only from those above it in this list (no circles):
//
//   model     keys (field names, CounterKey), row (StageStat, WorkerStat, statuses,
//             namespaces, a row's fields in order)
//   process   process (OS readings: thread CPU, resident memory; the one `unsafe`),
//             sample (a shard's running sample arithmetic over readings)
//   answers   answers (distribution, skew, the straggler and stall rules, the installed rules),
//             phase (a shard's phase slots and guard), gpu (GPU use attributed to shards)
//   table     table (the shared per-stage / per-shard state the handles write and the
//             instruments and sampler read, remote shards' figures included)
//   remote    remote (a distributed stage's reports: built from the table's shards, ingested
//             into its remote shards)
//   profile   profile (which shard each thread runs and its labels, for the CPU profiler)
//   findings  findings (a stage's answers and GPU use from the table, the rows' answer fields,
//             the sampler's judgement of running shards)
//   out       sink (rows as log records and JSON lines), overflow (worker series past the
//             cardinality limit), metrics (the families written from the table for the pull
//             endpoint alone, or observable instruments over it with a push exporter)
//   progress  progress (the live display on stderr and the stage table's lines; reads the table),
//             progress_lines (the same frame as plain lines for displays that are not a terminal)
//   runtime   runtime (what `init` installs, the sampler thread, retention, row emission)
//   handles   shard (Shard, ShardBuilder), stage (Stage, StageBuilder; uses shard),
//             emit (emit_stage_stat, emit_worker_stat)
pub mod answers;
mod emit;
mod findings;
pub mod gpu;
pub mod keys;
mod metrics;
mod overflow;
pub mod phase;
mod process;
pub mod profile;
mod progress;
mod progress_lines;
mod remote;
mod row;
#[doc(hidden)]
pub mod runtime;
mod sample;
mod shard;
mod sink;
mod stage;
mod table;

/// The local rows store's conventions (default path, rotation), shared with the `pipetel rows`
/// tool: see [`pipetel_rows`].
pub use pipetel_rows as store;

pub use emit::{emit_stage_stat, emit_worker_stat};
pub use keys::{CounterKey, CounterValue, CounterValueError, KeyError};
pub use progress::{progress_is_on, stage_table, stage_table_header, stage_table_line};
pub use progress_lines::ProgressLines;
#[cfg(feature = "fuzzing")]
pub(crate) use remote::ingest_bytes as ingest_remote_bytes;
pub use remote::{RemoteIngested, RemoteReportError};
pub use row::{StageStat, StageStatus, WorkerStat, WorkerStatus};
pub use shard::{OwnedPhase, PhaseHandle, PreviousPhase, Shard, ShardBuilder, ShardRecorder};
pub use stage::{stage, RemoteStageError, Stage, StageBuilder};
#[cfg(feature = "fuzzing")]
pub(crate) use table::RemoteShards;

/// Number of stage entries currently exported (finished ones until their retention ends).
#[cfg(feature = "testing")]
pub(crate) fn exported_stage_count() -> usize {
    table::table().len()
}

/// Frames the progress display has drawn with a live line.
#[cfg(feature = "testing")]
pub(crate) fn progress_redraws() -> u64 {
    progress::redraws()
}

/// Takes one round of periodic samples now.
#[cfg(feature = "testing")]
pub(crate) fn sample_now() {
    runtime::sample_all(&mut process::ProcessSampler::new());
}
