//! The stage and worker families: read from the stage table at each collection (or written
//! by the pull endpoint straight from it), plus the two recorded when a stage row is emitted.

use super::family::{Family, Instrument::*};

const STAGE: &[&str] = &["pipeline.namespace", "pipeline.stage.name", "pipeline.execution.id"];
const RUN: &[&str] = &["pipeline.namespace", "pipeline.stage.name", "pipeline.status"];
const SHARD_STATE: &[&str] =
    &["pipeline.namespace", "pipeline.stage.name", "pipeline.execution.id", "pipeline.shard.state"];
const COUNTER: &[&str] =
    &["pipeline.namespace", "pipeline.stage.name", "pipeline.execution.id", "pipeline.counter.name"];
const WORKER: &[&str] = &["pipeline.namespace", "pipeline.stage.name", "pipeline.execution.id", "pipeline.shard.index"];

/// Items processed by a stage's shards.
pub const STAGE_ITEMS: Family =
    Family::new("pipeline.stage.items", Counter, "{item}", "Items processed by a stage's shards", STAGE);
/// Bytes processed by a stage's shards.
pub const STAGE_BYTES: Family =
    Family::new("pipeline.stage.bytes", Counter, "By", "Bytes processed by a stage's shards", STAGE);
/// Wall time of finished stages (recorded with each stage row).
pub const STAGE_DURATION: Family =
    Family::new("pipeline.stage.duration", Histogram, "s", "Wall time of finished stages", RUN);
/// 1 while the stage runs, 0 once it ended.
pub const STAGE_ACTIVE: Family =
    Family::new("pipeline.stage.active", UpDownCounter, "{stage}", "1 while the stage runs, 0 once it ended", STAGE);
/// Finished stage runs by status (recorded with each stage row).
pub const STAGE_RUNS: Family =
    Family::new("pipeline.stage.runs", Counter, "{run}", "Finished stage runs by status", RUN);
/// Shards of a stage by state.
pub const STAGE_SHARDS: Family = Family::new(
    "pipeline.stage.shards",
    Gauge,
    "{shard}",
    "Shards of a stage by state (pending, running, done, failed)",
    SHARD_STATE,
);
/// Failed shards and failed stages.
pub const STAGE_ERRORS: Family =
    Family::new("pipeline.stage.errors", Counter, "{error}", "Failed shards and failed stages", STAGE);
/// Shard attempts that were retries (a shard index started again).
pub const STAGE_RETRIES: Family = Family::new(
    "pipeline.stage.retries",
    Counter,
    "{attempt}",
    "Shard attempts that retried a shard index already started",
    STAGE,
);
/// Mean of the shards' average CPU utilization.
pub const STAGE_CPU_UTILIZATION: Family = Family::new(
    "pipeline.stage.cpu.utilization",
    Gauge,
    "1",
    "Mean over the stage's shards of their average CPU utilization (1 = one core)",
    STAGE,
);
/// Items processed by a shard.
pub const WORKER_ITEMS: Family =
    Family::new("pipeline.worker.items", Counter, "{item}", "Items processed by a shard", WORKER);
/// Bytes processed by a shard.
pub const WORKER_BYTES: Family =
    Family::new("pipeline.worker.bytes", Counter, "By", "Bytes processed by a shard", WORKER);
/// CPU time of the shard's thread.
pub const WORKER_CPU_TIME: Family =
    Family::new("pipeline.worker.cpu.time", Counter, "s", "CPU time of the shard's thread since it started", WORKER);
/// CPU utilization of the shard's thread at the last sample.
pub const WORKER_CPU_UTILIZATION: Family = Family::new(
    "pipeline.worker.cpu.utilization",
    Gauge,
    "1",
    "CPU utilization of the shard's thread at the last sample (1 = one core)",
    WORKER,
);
/// Resident memory at the shard's last sample.
pub const WORKER_MEMORY_USAGE: Family = Family::new(
    "pipeline.worker.memory.usage",
    Gauge,
    "By",
    "Resident memory of the process at the shard's last sample",
    WORKER,
);
/// Mean resident memory over the shard's samples.
pub const WORKER_MEMORY_AVERAGE: Family =
    Family::new("pipeline.worker.memory.average", Gauge, "By", "Mean resident memory over the shard's samples", WORKER);
/// Peak resident memory over the shard's samples.
pub const WORKER_MEMORY_PEAK: Family =
    Family::new("pipeline.worker.memory.peak", Gauge, "By", "Peak resident memory over the shard's samples", WORKER);
/// Time of the shard's last sample (`time() - x` shows stalls).
pub const WORKER_HEARTBEAT: Family = Family::new(
    "pipeline.worker.heartbeat",
    Gauge,
    "s",
    "Time of the shard's last sample, seconds since the epoch",
    WORKER,
);
/// A stage's user counter summed over its shards (`PIPETEL_STAGE_COUNTER_METRICS`).
pub const STAGE_COUNTERS: Family = Family::new(
    "pipeline.stage.counters",
    Gauge,
    "{value}",
    "A stage's user counter summed over its shards, by pipeline.counter.name",
    COUNTER,
);
/// Rows that missed the rows store; always registered.
pub const ROWS_LOST: Family = Family::new(
    "pipeline.rows.lost",
    Counter,
    "{row}",
    "Rows that did not reach the rows store (store failing, or emitted before init)",
    &[],
);

/// Every family of the table, in the reference's order.
pub const ALL: &[Family] = &[
    STAGE_ITEMS,
    STAGE_BYTES,
    STAGE_DURATION,
    STAGE_ACTIVE,
    STAGE_RUNS,
    STAGE_SHARDS,
    STAGE_ERRORS,
    STAGE_RETRIES,
    STAGE_CPU_UTILIZATION,
    WORKER_ITEMS,
    WORKER_BYTES,
    WORKER_CPU_TIME,
    WORKER_CPU_UTILIZATION,
    WORKER_MEMORY_USAGE,
    WORKER_MEMORY_AVERAGE,
    WORKER_MEMORY_PEAK,
    WORKER_HEARTBEAT,
    STAGE_COUNTERS,
    ROWS_LOST,
];
