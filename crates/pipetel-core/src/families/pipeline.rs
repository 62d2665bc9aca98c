//! The stage and worker families: read from the stage table at each collection (or written
//! by the pull endpoint straight from it), plus the two recorded when a stage row is emitted.

use pipetel_rows::fields::{
    COUNTER_NAME, EXECUTION_ID, NAMESPACE, PHASE_NAME, SHARD_INDEX, SHARD_STATE as STATE, STAGE_NAME, STATUS,
};

use super::family::families;

// The attributes are the row schema's field names (`pipetel_rows::fields`).
const STAGE: &[&str] = &[NAMESPACE, STAGE_NAME, EXECUTION_ID];
const RUN: &[&str] = &[NAMESPACE, STAGE_NAME, STATUS];
const SHARD_STATE: &[&str] = &[NAMESPACE, STAGE_NAME, EXECUTION_ID, STATE];
const COUNTER: &[&str] = &[NAMESPACE, STAGE_NAME, EXECUTION_ID, COUNTER_NAME];
const WORKER: &[&str] = &[NAMESPACE, STAGE_NAME, EXECUTION_ID, SHARD_INDEX];
const PHASE: &[&str] = &[NAMESPACE, STAGE_NAME, EXECUTION_ID, PHASE_NAME];
const SHARD_RUN: &[&str] = &[NAMESPACE, STAGE_NAME, STATUS];

families! {
    STAGE_ITEMS = "pipeline.stage.items", Counter, "{item}", STAGE,
        "Items processed by a stage's shards";
    STAGE_BYTES = "pipeline.stage.bytes", Counter, "By", STAGE,
        "Bytes processed by a stage's shards";
    /// Wall time of finished stages (recorded with each stage row).
    STAGE_DURATION = "pipeline.stage.duration", Histogram, "s", RUN,
        "Wall time of finished stages";
    STAGE_ACTIVE = "pipeline.stage.active", UpDownCounter, "{stage}", STAGE,
        "1 while the stage runs, 0 once it ended";
    /// Finished stage runs by status (recorded with each stage row).
    STAGE_RUNS = "pipeline.stage.runs", Counter, "{run}", RUN,
        "Finished stage runs by status";
    /// Shards of a stage by state.
    STAGE_SHARDS = "pipeline.stage.shards", Gauge, "{shard}", SHARD_STATE,
        "Shards of a stage by state (pending, running, done, failed)";
    STAGE_ERRORS = "pipeline.stage.errors", Counter, "{error}", STAGE,
        "Failed shards and failed stages";
    /// Shard attempts that were retries (a shard index started again).
    STAGE_RETRIES = "pipeline.stage.retries", Counter, "{attempt}", STAGE,
        "Shard attempts that retried a shard index already started";
    /// Mean of the shards' average CPU utilization.
    STAGE_CPU_UTILIZATION = "pipeline.stage.cpu.utilization", Gauge, "1", STAGE,
        "Mean over the stage's shards of their average CPU utilization (1 = one core)";
    /// Wall time of finished shards, by stage (recorded with each end row): the spread of a
    /// stage's shards without a series per shard.
    STAGE_SHARD_DURATION = "pipeline.stage.shard.duration", Histogram, "s", SHARD_RUN,
        "Wall time of finished shards, by stage and status";
    /// The slowest finished shard's elapsed time over the 75th percentile's.
    STAGE_SKEW = "pipeline.stage.skew", Gauge, "1", STAGE,
        "Slowest finished shard's elapsed time divided by the 75th percentile of the stage's finished shards";
    /// 1 while the skew rule holds (max > 1.5 × p75 and more than PIPETEL_SKEW_MIN beyond it).
    STAGE_SKEWED = "pipeline.stage.skewed", Gauge, "1", STAGE,
        "1 when the slowest finished shard took over 1.5 times the 75th percentile and more than PIPETEL_SKEW_MIN beyond it";
    /// Shards named stragglers while the stage ran.
    STAGE_STRAGGLERS = "pipeline.stage.stragglers", Counter, "{shard}", STAGE,
        "Running shards named stragglers (slower than the stage's skew rule allows)";
    /// Stalls of the stage's shards (no movement for PIPETEL_STALL_TIMEOUT).
    STAGE_STALLS = "pipeline.stage.stalls", Counter, "{stall}", STAGE,
        "Stalls of the stage's shards: items and bytes unmoved for PIPETEL_STALL_TIMEOUT";
    /// Seconds of the stage's shards per phase (`unphased`: outside any phase).
    STAGE_PHASE_TIME = "pipeline.stage.phase.time", Counter, "s", PHASE,
        "Seconds the stage's shards spent in each phase (unphased: outside any phase)";
    /// GPU-busy seconds attributed to the stage's shards (see `pipeline::gpu`).
    STAGE_GPU_TIME = "pipeline.stage.gpu.time", Counter, "s", STAGE,
        "GPU-busy seconds attributed to the stage's shards";
    /// Seconds the stage's shards held GPUs while SM activity stayed under 5 %.
    STAGE_GPU_IDLE = "pipeline.stage.gpu.idle", Counter, "s", STAGE,
        "Seconds the stage's shards held GPU memory while SM activity stayed under 5 %";
    /// Energy attributed to the stage's shards.
    STAGE_GPU_ENERGY = "pipeline.stage.gpu.energy", Counter, "J", STAGE,
        "Energy attributed to the stage's shards (device energy shared by utilisation)";
    /// Mean SM activity of the GPUs while the stage's shards ran (GPUs with GPM).
    STAGE_GPU_SM_ACTIVE = "pipeline.stage.gpu.sm_active", Gauge, "1", STAGE,
        "Mean SM activity of the GPUs while the stage's shards ran (GPUs with GPM)";
    /// Mean tensor-pipe activity of the GPUs while the stage's shards ran (GPUs with GPM).
    STAGE_GPU_TENSOR_ACTIVE = "pipeline.stage.gpu.tensor_active", Gauge, "1", STAGE,
        "Mean tensor-pipe activity of the GPUs while the stage's shards ran (GPUs with GPM)";
    /// Peak GPU memory of the processes running the stage's shards.
    STAGE_GPU_MEMORY_PEAK = "pipeline.stage.gpu.memory.peak", Gauge, "By", STAGE,
        "Peak GPU memory of the process while the stage's shards ran";
    WORKER_ITEMS = "pipeline.worker.items", Counter, "{item}", WORKER,
        "Items processed by a shard";
    WORKER_BYTES = "pipeline.worker.bytes", Counter, "By", WORKER,
        "Bytes processed by a shard";
    /// CPU time of the shard's thread.
    WORKER_CPU_TIME = "pipeline.worker.cpu.time", Counter, "s", WORKER,
        "CPU time of the shard's thread since it started";
    /// CPU utilization of the shard's thread at the last sample.
    WORKER_CPU_UTILIZATION = "pipeline.worker.cpu.utilization", Gauge, "1", WORKER,
        "CPU utilization of the shard's thread at the last sample (1 = one core)";
    /// Resident memory at the shard's last sample.
    WORKER_MEMORY_USAGE = "pipeline.worker.memory.usage", Gauge, "By", WORKER,
        "Resident memory of the process at the shard's last sample";
    WORKER_MEMORY_AVERAGE = "pipeline.worker.memory.average", Gauge, "By", WORKER,
        "Mean resident memory over the shard's samples";
    WORKER_MEMORY_PEAK = "pipeline.worker.memory.peak", Gauge, "By", WORKER,
        "Peak resident memory over the shard's samples";
    /// Time of the shard's last sample (`time() - x` shows stalls).
    WORKER_HEARTBEAT = "pipeline.worker.heartbeat", Gauge, "s", WORKER,
        "Time of the shard's last sample, seconds since the epoch";
    /// A stage's user counter summed over its shards (`PIPETEL_STAGE_COUNTER_METRICS`).
    STAGE_COUNTERS = "pipeline.stage.counters", Gauge, "{value}", COUNTER,
        "A stage's user counter summed over its shards, by pipeline.counter.name";
    /// Rows that missed the rows store; always registered.
    ROWS_LOST = "pipeline.rows.lost", Counter, "{row}", &[],
        "Rows that did not reach the rows store (store failing, or emitted before init)";
}
