//! Rows: the stage row and the worker rows, as OTel log records (event name = namespace) and,
//! optionally, JSON Lines. The handles and the explicit `emit_*` functions both end here, so
//! both paths produce identical rows.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::trace::SpanContext;
use opentelemetry::{Key, KeyValue, Value};

use super::keys;
use super::state::{runtime, Runtime};

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
}

impl WorkerStatus {
    /// The value of `pipeline.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Start => "start",
            WorkerStatus::Running => "running",
            WorkerStatus::End => "end",
            WorkerStatus::Failed => "failed",
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
    /// Final status.
    pub status: StageStatus,
    /// Mean of the shards' average CPU % (100 = one core), when any shard was sampled.
    pub cpu_percent_avg: Option<f64>,
    /// User counters, summed over shards.
    pub counters: Vec<(String, u64)>,
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
    pub counters: Vec<(String, u64)>,
    /// Why it failed.
    pub reason: Option<String>,
}

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
    ];
    if let Some(cpu) = s.cpu_percent_avg {
        f.push((keys::CPU_PERCENT_AVG.into(), cpu.into()));
    }
    for (k, v) in &s.counters {
        f.push((format!("{}{k}", keys::COUNTER_PREFIX), to_i64(*v).into()));
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
        f.push((format!("{}{k}", keys::COUNTER_PREFIX), to_i64(*v).into()));
    }
    if let Some(r) = &w.reason {
        f.push((keys::REASON.into(), r.clone().into()));
    }
    f
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Emits a stage row computed elsewhere (for callers that aggregate shards themselves, e.g. a
/// coordinator whose shards ran on other machines): the same log record and JSON line a
/// [`Stage`](super::Stage) handle emits, plus the stage's duration and run metrics.
pub fn emit_stage_stat(stat: &StageStat) {
    super::state::registry().record_explicit_stage(stat);
    emit_stage_row(stat, None);
}

/// Emits a worker row computed elsewhere: the same log record and JSON line a
/// [`Shard`](super::Shard) handle emits; the worker metrics of that shard take its values.
pub fn emit_worker_stat(stat: &WorkerStat) {
    super::state::registry().record_explicit_worker(stat);
    emit_worker_row(stat, None);
}

pub(crate) fn emit_stage_row(stat: &StageStat, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return };
    let attrs = [
        KeyValue::new(keys::NAMESPACE, rt.ns.stage),
        KeyValue::new(keys::STAGE_NAME, stat.stage_name.clone()),
        KeyValue::new(keys::STATUS, stat.status.as_str()),
    ];
    rt.stage_duration.record(stat.elapsed.as_secs_f64(), &attrs);
    rt.stage_runs.add(1, &attrs);
    let body = format!(
        "stage {} {}: {} items, {} bytes in {:.3}s",
        stat.stage_name,
        stat.status.as_str(),
        stat.items,
        stat.bytes,
        stat.elapsed.as_secs_f64()
    );
    let severity = if stat.status == StageStatus::Failed { Severity::Error } else { Severity::Info };
    emit(&rt, rt.ns.stage, severity, body, stage_fields(rt.ns.stage, stat), SystemTime::now(), span);
}

pub(crate) fn emit_worker_row(stat: &WorkerStat, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return };
    let body =
        format!("shard {} of {} {}: {} items", stat.shard_index, stat.stage_name, stat.status.as_str(), stat.items);
    let severity = if stat.status == WorkerStatus::Failed { Severity::Error } else { Severity::Info };
    emit(&rt, rt.ns.worker, severity, body, worker_fields(rt.ns.worker, stat), stat.timestamp, span);
}

fn emit(
    rt: &Runtime,
    event: &'static str,
    severity: Severity,
    body: String,
    fields: Vec<(String, Value)>,
    at: SystemTime,
    span: Option<&SpanContext>,
) {
    let span = span.filter(|s| s.is_valid());
    if let Some(logger) = &rt.logger {
        let mut rec = logger.create_log_record();
        rec.set_event_name(event);
        rec.set_timestamp(at);
        rec.set_observed_timestamp(SystemTime::now());
        rec.set_severity_number(severity);
        rec.set_severity_text(if severity == Severity::Error { "ERROR" } else { "INFO" });
        rec.set_body(AnyValue::from(body));
        rec.add_attributes(fields.iter().map(|(k, v)| (Key::from(k.clone()), any(v))));
        if let Some(sc) = span {
            rec.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
        }
        logger.emit(rec);
    }
    if let Some(file) = &rt.rows_file {
        let mut obj = serde_json::Map::new();
        obj.insert("event".into(), event.into());
        let ms = at.duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        obj.insert("timestamp_ms".into(), serde_json::Value::from(u64::try_from(ms).unwrap_or(u64::MAX)));
        if let Some(sc) = span {
            obj.insert("trace_id".into(), sc.trace_id().to_string().into());
            obj.insert("span_id".into(), sc.span_id().to_string().into());
        }
        for (k, v) in &fields {
            obj.insert(k.clone(), json(v));
        }
        let line = serde_json::Value::Object(obj).to_string();
        if let Ok(mut f) = file.lock() {
            if let Err(error) = writeln!(f, "{line}").and_then(|()| f.flush()) {
                rt.warn_once_rows_file(&error);
            }
        }
    }
}

fn any(v: &Value) -> AnyValue {
    match v {
        Value::Bool(b) => AnyValue::Boolean(*b),
        Value::I64(i) => AnyValue::Int(*i),
        Value::F64(f) => AnyValue::Double(*f),
        other => AnyValue::String(other.as_str().into_owned().into()),
    }
}

fn json(v: &Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::I64(i) => (*i).into(),
        Value::F64(f) => {
            serde_json::Number::from_f64(*f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
        }
        other => other.as_str().into_owned().into(),
    }
}

/// The span context of a `tracing` span, when the OTel layer tracks it.
pub(crate) fn span_context(span: &tracing::Span) -> Option<SpanContext> {
    crate::sampling::span_context(span)
}
