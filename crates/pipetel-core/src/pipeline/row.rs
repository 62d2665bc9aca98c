//! The row model: what a stage row and a worker row hold, the stream names they carry, and
//! their fields in order (the one list the log record, the JSON line and the span attributes
//! are all built from). Plain data; nothing here reads process-wide state.

use std::time::{Duration, SystemTime};

use opentelemetry::Value;

use super::keys::{self, CounterValue};

/// The stream names rows carry (`<prefix>.stage`, `<prefix>.worker`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Namespaces {
    pub(crate) stage: &'static str,
    pub(crate) worker: &'static str,
}

impl Namespaces {
    pub(crate) const DEFAULT: Namespaces = Namespaces { stage: "pipeline.stage", worker: "pipeline.worker" };

    pub(crate) fn from_prefix(prefix: &str) -> Self {
        if prefix == "pipeline" {
            return Self::DEFAULT;
        }
        // Leaked once per `init`: OTel log records take event names as `&'static str`.
        Namespaces {
            stage: Box::leak(format!("{prefix}.stage").into_boxed_str()),
            worker: Box::leak(format!("{prefix}.worker").into_boxed_str()),
        }
    }
}

/// Status of a stage row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StageStatus {
    /// Still running (only in metrics; a row is emitted at the end).
    Running,
    /// Finished normally.
    Succeeded,
    /// Failed, or dropped without `finish()`.
    Failed,
}

impl StageStatus {
    /// The value of `pipeline.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Running => "running",
            StageStatus::Succeeded => "succeeded",
            StageStatus::Failed => "failed",
        }
    }
}

/// Status of a worker row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerStatus {
    /// The shard started.
    Start,
    /// A periodic sample.
    Running,
    /// The shard finished normally.
    End,
    /// The shard failed, or was dropped without `finish()`.
    Failed,
    /// The running shard was named a straggler (once per attempt).
    Straggler,
    /// The running shard's items and bytes have not moved for `PIPETEL_STALL_TIMEOUT`.
    Stalled,
    /// A stalled shard moves again.
    Resumed,
}

impl WorkerStatus {
    /// The value of `pipeline.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Start => "start",
            WorkerStatus::Running => "running",
            WorkerStatus::End => "end",
            WorkerStatus::Failed => "failed",
            WorkerStatus::Straggler => "straggler",
            WorkerStatus::Stalled => "stalled",
            WorkerStatus::Resumed => "resumed",
        }
    }
}

/// One stage row: the aggregate of all its shards, emitted once at the stage's end.
#[derive(Debug, Clone, PartialEq)]
pub struct StageStat {
    /// Stage name.
    pub stage_name: String,
    /// Execution id.
    pub execution_id: String,
    /// Items processed by all shards.
    pub items: u64,
    /// Bytes processed by all shards.
    pub bytes: u64,
    /// Wall time from start to end.
    pub elapsed: Duration,
    /// Total shards of the stage.
    pub total_shards: u32,
    /// Shards (distinct indices) whose last attempt finished.
    pub shards_succeeded: u32,
    /// Shards (distinct indices) whose last attempt failed.
    pub shards_failed: u32,
    /// Retried attempts: starts of a shard index that had already started.
    pub shards_retried: u32,
    /// Final status. [`Stage::finish`](super::Stage::finish) gives `Succeeded` even when shards
    /// failed (they may have been retried; see `shards_failed`);
    /// [`Stage::finish_strict`](super::Stage::finish_strict) gives `Failed` then.
    pub status: StageStatus,
    /// Mean of the shards' average CPU % (100 = one core), when any shard was sampled.
    pub cpu_percent_avg: Option<f64>,
    /// User counters, summed over shards (`Int + Int` stays `Int`, any `Float` makes a
    /// `Float`); in rows as `pipeline.counter.<key>`.
    pub counters: Vec<(String, CounterValue)>,
    /// Why it failed.
    pub reason: Option<String>,
}

/// One worker row: a shard's start, a periodic sample, or its end.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStat {
    /// Shard index.
    pub shard_index: u32,
    /// Stage name.
    pub stage_name: String,
    /// Execution id.
    pub execution_id: String,
    /// Row kind.
    pub status: WorkerStatus,
    /// When the row was taken.
    pub timestamp: SystemTime,
    /// Items processed so far.
    pub items: u64,
    /// Bytes processed so far.
    pub bytes: u64,
    /// Items per second since the previous row.
    pub item_rate: f64,
    /// Bytes per second since the previous row.
    pub byte_rate: f64,
    /// CPU time of the shard's thread since it started.
    pub cpu_time: Duration,
    /// CPU % since the previous row (100 = one core), when measurable.
    pub cpu_percent: Option<f64>,
    /// CPU % over the shard's life, when measurable.
    pub cpu_percent_avg: Option<f64>,
    /// Resident memory of the process, bytes.
    pub memory_current: u64,
    /// Mean of sampled resident memory, bytes.
    pub memory_avg: u64,
    /// Peak of sampled resident memory, bytes.
    pub memory_peak: u64,
    /// User counters so far.
    pub counters: Vec<(String, CounterValue)>,
    /// Why it failed.
    pub reason: Option<String>,
}

/// Fields a row carries beyond its struct's (answers: distributions, phases, straggler and
/// stall details), appended after the struct's fields.
pub(crate) type Extra = Vec<(String, Value)>;

/// A row's fields in order: the single source of both the log record and the JSON line.
pub(crate) fn stage_fields(namespace: &str, s: &StageStat) -> Vec<(String, Value)> {
    let mut f: Vec<(String, Value)> = vec![
        (keys::NAMESPACE.into(), namespace.to_string().into()),
        (keys::STAGE_NAME.into(), s.stage_name.clone().into()),
        (keys::EXECUTION_ID.into(), s.execution_id.clone().into()),
        (keys::STATUS.into(), s.status.as_str().into()),
        (keys::ITEMS.into(), to_i64(s.items).into()),
        (keys::BYTES.into(), to_i64(s.bytes).into()),
        (keys::ELAPSED.into(), s.elapsed.as_secs_f64().into()),
        (keys::TOTAL_SHARDS.into(), i64::from(s.total_shards).into()),
        (keys::SHARDS_SUCCEEDED.into(), i64::from(s.shards_succeeded).into()),
        (keys::SHARDS_FAILED.into(), i64::from(s.shards_failed).into()),
        (keys::SHARDS_RETRIED.into(), i64::from(s.shards_retried).into()),
    ];
    if let Some(cpu) = s.cpu_percent_avg {
        f.push((keys::CPU_PERCENT_AVG.into(), cpu.into()));
    }
    for (k, v) in &s.counters {
        f.push((format!("{}{k}", keys::COUNTER_PREFIX), counter_value(*v)));
    }
    if let Some(r) = &s.reason {
        f.push((keys::REASON.into(), r.clone().into()));
    }
    f
}

pub(crate) fn worker_fields(namespace: &str, w: &WorkerStat) -> Vec<(String, Value)> {
    let mut f: Vec<(String, Value)> = vec![
        (keys::NAMESPACE.into(), namespace.to_string().into()),
        (keys::STAGE_NAME.into(), w.stage_name.clone().into()),
        (keys::EXECUTION_ID.into(), w.execution_id.clone().into()),
        (keys::SHARD_INDEX.into(), i64::from(w.shard_index).into()),
        (keys::STATUS.into(), w.status.as_str().into()),
        (keys::ITEMS.into(), to_i64(w.items).into()),
        (keys::BYTES.into(), to_i64(w.bytes).into()),
        (keys::ITEM_RATE.into(), w.item_rate.into()),
        (keys::BYTE_RATE.into(), w.byte_rate.into()),
        (keys::CPU_TIME.into(), w.cpu_time.as_secs_f64().into()),
    ];
    if let Some(cpu) = w.cpu_percent {
        f.push((keys::CPU_PERCENT.into(), cpu.into()));
    }
    if let Some(cpu) = w.cpu_percent_avg {
        f.push((keys::CPU_PERCENT_AVG.into(), cpu.into()));
    }
    f.push((keys::MEMORY_CURRENT.into(), to_i64(w.memory_current).into()));
    f.push((keys::MEMORY_AVG.into(), to_i64(w.memory_avg).into()));
    f.push((keys::MEMORY_PEAK.into(), to_i64(w.memory_peak).into()));
    for (k, v) in &w.counters {
        f.push((format!("{}{k}", keys::COUNTER_PREFIX), counter_value(*v)));
    }
    if let Some(r) = &w.reason {
        f.push((keys::REASON.into(), r.clone().into()));
    }
    f
}

fn counter_value(v: CounterValue) -> Value {
    match v {
        CounterValue::Int(i) => i.into(),
        CounterValue::Float(f) => f.into(),
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
