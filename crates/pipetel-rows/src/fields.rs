//! The row schema: the name of every standard row field (and of the pipeline's metric
//! attributes that share them), declared once for the library that writes rows, the tool and
//! the Python package that read them, and the metric families; and the value types of the
//! fields, for readers that get every value as text (`pipetel rows --url` and `pipetel.rows`
//! read rows back from VictoriaLogs, which stores each field as a string).

/// `pipeline.namespace`: the row's stream (`pipeline.stage`, `zephyr.worker`, ...).
pub const NAMESPACE: &str = "pipeline.namespace";
/// `pipeline.stage.name`.
pub const STAGE_NAME: &str = "pipeline.stage.name";
/// `pipeline.execution.id`: one run of a stage.
pub const EXECUTION_ID: &str = "pipeline.execution.id";
/// `pipeline.status`: `running`, `succeeded`, `failed` (stage); `start`, `running`, `end`, `failed` (worker).
pub const STATUS: &str = "pipeline.status";
/// `pipeline.shard.index`.
pub const SHARD_INDEX: &str = "pipeline.shard.index";
/// `pipeline.shard.state`: `pending`, `running`, `done`, `failed` (on `pipeline.stage.shards`).
pub const SHARD_STATE: &str = "pipeline.shard.state";
/// Items processed (cumulative).
pub const ITEMS: &str = "pipeline.items";
/// Bytes processed (cumulative).
pub const BYTES: &str = "pipeline.bytes";
/// Seconds since the stage or shard started.
pub const ELAPSED: &str = "pipeline.elapsed_seconds";
/// Total shards of the stage.
pub const TOTAL_SHARDS: &str = "pipeline.shards.total";
/// Shards whose last attempt succeeded (stage rows).
pub const SHARDS_SUCCEEDED: &str = "pipeline.shards.succeeded";
/// Shards whose last attempt failed (stage rows).
pub const SHARDS_FAILED: &str = "pipeline.shards.failed";
/// Retried attempts: starts of a shard index that had started before (stage rows).
pub const SHARDS_RETRIED: &str = "pipeline.shards.retried";
/// Items per second since the previous sample.
pub const ITEM_RATE: &str = "pipeline.item_rate";
/// Bytes per second since the previous sample.
pub const BYTE_RATE: &str = "pipeline.byte_rate";
/// CPU seconds used by the shard's thread since it started.
pub const CPU_TIME: &str = "pipeline.cpu.time_seconds";
/// CPU % of the shard's thread since the previous sample (100 = one core).
pub const CPU_PERCENT: &str = "pipeline.cpu.percent";
/// CPU % averaged over the shard's life (stage row: the mean over its shards).
pub const CPU_PERCENT_AVG: &str = "pipeline.cpu.percent_avg";
/// Resident memory of the process at the sample, bytes.
pub const MEMORY_CURRENT: &str = "pipeline.memory.current_bytes";
/// Mean of the samples' resident memory, bytes.
pub const MEMORY_AVG: &str = "pipeline.memory.avg_bytes";
/// Highest sampled resident memory, bytes.
pub const MEMORY_PEAK: &str = "pipeline.memory.peak_bytes";
/// Why a stage or shard failed.
pub const REASON: &str = "pipeline.failure.reason";
/// Prefix of user counters in rows: `pipeline.counter.<key>`.
pub const COUNTER_PREFIX: &str = "pipeline.counter.";

/// `pipeline.counter.name`: the counter key, as an attribute of `pipeline.stage.counters`.
pub const COUNTER_NAME: &str = "pipeline.counter.name";

// ----- answers: distribution, skew, stragglers, stalls, phases -----

/// Prefix of a stage row's shard-duration distribution: `pipeline.shard.elapsed.<q>` for each
/// of [`QUANTILES`] (seconds, over the stage's finished shards).
pub const SHARD_ELAPSED_PREFIX: &str = "pipeline.shard.elapsed.";
/// Prefix of a stage row's shard-rate distribution: `pipeline.shard.item_rate.<q>` for each of
/// [`QUANTILES`] (items per second over each finished shard's life).
pub const SHARD_ITEM_RATE_PREFIX: &str = "pipeline.shard.item_rate.";
/// The distribution's points, in order: the least, the quartiles, the 90th percentile, the most.
pub const QUANTILES: [&str; 6] = ["p0", "p25", "p50", "p75", "p90", "max"];
/// `pipeline.stage.skew`: the slowest finished shard's elapsed ÷ the 75th percentile's.
pub const SKEW: &str = "pipeline.stage.skew";
/// `pipeline.stage.skewed`: `true` when the slowest shard took more than 1.5 × the 75th
/// percentile and more than `PIPETEL_SKEW_MIN` beyond it.
pub const SKEWED: &str = "pipeline.stage.skewed";
/// Shards of the stage named stragglers while it ran (stage rows).
pub const STRAGGLERS: &str = "pipeline.stage.stragglers";
/// Stalls of the stage's shards while it ran (stage rows).
pub const STALLS: &str = "pipeline.stage.stalls";
/// Prefix and suffix of a phase's seconds: `pipeline.phase.<name>.seconds` (end rows: the
/// shard's time in that phase; stage rows: the sum over its shards).
pub const PHASE_PREFIX: &str = "pipeline.phase.";
/// See [`PHASE_PREFIX`].
pub const PHASE_SUFFIX: &str = ".seconds";
/// Seconds of the shard's wall time outside any phase (end and stage rows).
pub const UNPHASED: &str = "pipeline.unphased.seconds";
/// Seconds of the shard's wall time its thread was off CPU: wall time − CPU time (end and
/// stage rows, when CPU time is measurable).
pub const OFF_CPU: &str = "pipeline.off_cpu.seconds";
/// `pipeline.phase.name`: the phase a stalled shard is in (worker rows), and the attribute of
/// `pipeline.stage.phase.time`.
pub const PHASE_NAME: &str = "pipeline.phase.name";
/// The name of the shard's thread (worker rows of a straggler or a stall).
pub const THREAD_NAME: &str = "pipeline.thread.name";
/// The stalled thread's current stack, innermost frame last (Python shards' stalled rows).
pub const STACK: &str = "pipeline.stack";
/// Seconds the shard has not moved (stalled and resumed rows).
pub const STALLED_FOR: &str = "pipeline.stalled_seconds";
/// The rule that named a straggler: `elapsed` (against the finished shards) or `rate` (against
/// the running peers).
pub const STRAGGLER_RULE: &str = "pipeline.straggler.rule";
/// The peers' figure the straggler was compared with: the finished shards' 75th percentile of
/// elapsed seconds (rule `elapsed`), or the running peers' median items per second (rule `rate`).
pub const PEERS_MEDIAN: &str = "pipeline.peers.median";
/// The host the row's process runs on (OpenTelemetry's `host.name`).
pub const HOST_NAME: &str = "host.name";
/// The process id of the row's process (OpenTelemetry's `process.pid`).
pub const PROCESS_PID: &str = "process.pid";

/// GPU-busy seconds attributed to the shard (end rows) or the stage's shards (stage rows).
pub const GPU_SECONDS: &str = "pipeline.gpu.seconds";
/// Seconds the shard's process held GPU memory while the shard ran.
pub const GPU_HELD: &str = "pipeline.gpu.held_seconds";
/// Of the held seconds, those with SM activity under 5 %.
pub const GPU_IDLE: &str = "pipeline.gpu.idle_seconds";
/// Mean SM activity of the GPUs while the shard ran (0–1; GPUs with GPM).
pub const GPU_SM_ACTIVE: &str = "pipeline.gpu.sm_active";
/// Mean tensor-pipe activity of the GPUs while the shard ran (0–1; GPUs with GPM).
pub const GPU_TENSOR_ACTIVE: &str = "pipeline.gpu.tensor_active";
/// Peak GPU memory of the shard's process while it ran, bytes.
pub const GPU_MEMORY_PEAK: &str = "pipeline.gpu.memory.peak_bytes";
/// Energy attributed to the shard, joules.
pub const GPU_ENERGY: &str = "pipeline.gpu.energy_joules";

/// CPU samples the profiler took in the shard (end rows) or the stage's shards (stage rows), with
/// `PIPETEL_PROFILE=cpu`; `pipetel profile` shows them.
pub const PROFILE_SAMPLES: &str = "pipeline.profile.samples";
/// The stage's top functions by self time with their share of its samples
/// (`"tokenize 62.1%; parse 20.3%"`), with `PIPETEL_PROFILE=cpu`.
pub const PROFILE_TOP: &str = "pipeline.profile.top";

/// The name of phase field `key` (`pipeline.phase.<name>.seconds`), if it is one.
pub fn phase_of(key: &str) -> Option<&str> {
    key.strip_prefix(PHASE_PREFIX)?.strip_suffix(PHASE_SUFFIX).filter(|n| !n.is_empty())
}

/// The standard row fields whose values are text; every other standard field is a number
/// (or, for [`SKEWED`], a boolean).
pub const TEXT_FIELDS: [&str; 12] = [
    NAMESPACE,
    STAGE_NAME,
    EXECUTION_ID,
    STATUS,
    SHARD_STATE,
    REASON,
    PHASE_NAME,
    THREAD_NAME,
    STACK,
    STRAGGLER_RULE,
    HOST_NAME,
    PROFILE_TOP,
];

/// The standard row fields whose values are floating point numbers; every other numeric
/// standard field is an integer. Phase fields and the distributions' points are floats too
/// ([`is_float_field`]).
pub const FLOAT_FIELDS: [&str; 17] = [
    ELAPSED,
    ITEM_RATE,
    BYTE_RATE,
    CPU_TIME,
    CPU_PERCENT,
    CPU_PERCENT_AVG,
    SKEW,
    UNPHASED,
    OFF_CPU,
    STALLED_FOR,
    PEERS_MEDIAN,
    GPU_SECONDS,
    GPU_HELD,
    GPU_IDLE,
    GPU_SM_ACTIVE,
    GPU_TENSOR_ACTIVE,
    GPU_ENERGY,
];

/// Whether the standard field `key` holds a floating point number: one of [`FLOAT_FIELDS`], a
/// phase's seconds, or a point of a shard distribution.
pub fn is_float_field(key: &str) -> bool {
    FLOAT_FIELDS.contains(&key)
        || phase_of(key).is_some()
        || key.strip_prefix(SHARD_ELAPSED_PREFIX).or_else(|| key.strip_prefix(SHARD_ITEM_RATE_PREFIX)).is_some()
}
