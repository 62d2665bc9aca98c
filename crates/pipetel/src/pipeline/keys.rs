//! Row field names and attribute keys: one prefix (`pipeline.`) for every standard field, and
//! user counters under `pipeline.counter.<key>`.

use std::fmt;
use std::sync::Arc;

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

/// A user counter key, validated once at registration so recording can never fail on it.
///
/// ```
/// let skipped = pipetel::pipeline::CounterKey::new("rows_skipped").expect("valid key");
/// assert_eq!(skipped.row_field(), "pipeline.counter.rows_skipped");
/// assert!(pipetel::pipeline::CounterKey::new("Rows Skipped").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CounterKey {
    name: Arc<str>,
    field: Arc<str>,
}

/// A counter key that is not `[a-z][a-z0-9_]*` (at most 64 characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid counter key {key:?}: expected lower-case letters, digits and `_`, starting with a letter, at most 64 characters")]
pub struct KeyError {
    /// The refused key.
    pub key: String,
}

impl CounterKey {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`KeyError`] naming the key when it is empty, too long, or has characters other than
    /// `a-z`, `0-9`, `_`, or does not start with a letter.
    pub fn new(name: &str) -> Result<Self, KeyError> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(KeyError { key: name.to_string() });
        }
        Ok(Self { name: Arc::from(name), field: Arc::from(format!("{COUNTER_PREFIX}{name}")) })
    }

    /// The key as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field name in rows: `pipeline.counter.<key>`.
    pub fn row_field(&self) -> &str {
        &self.field
    }
}

impl fmt::Debug for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CounterKey({})", self.name)
    }
}

impl fmt::Display for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}
