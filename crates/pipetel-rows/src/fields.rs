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

/// The standard row fields whose values are text; every other standard field is a number.
pub const TEXT_FIELDS: [&str; 6] = [NAMESPACE, STAGE_NAME, EXECUTION_ID, STATUS, SHARD_STATE, REASON];

/// The standard row fields whose values are floating point numbers; every other numeric
/// standard field is an integer.
pub const FLOAT_FIELDS: [&str; 6] = [ELAPSED, ITEM_RATE, BYTE_RATE, CPU_TIME, CPU_PERCENT, CPU_PERCENT_AVG];
