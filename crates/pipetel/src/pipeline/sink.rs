//! Rows out: each row as an OTel log record (event name = namespace, attributes = the row's
//! fields, trace and span ids) and, when a rows file is configured, as one JSON line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::trace::SpanContext;
use opentelemetry::{Key, Value};
use opentelemetry_sdk::logs::SdkLogger;

use super::row::{stage_fields, worker_fields, StageStat, StageStatus, WorkerStat, WorkerStatus};

/// Where rows go: the OTel logger (when logs are exported) and the JSON Lines file.
pub(crate) struct RowSink {
    logger: Option<SdkLogger>,
    rows_file: Option<Mutex<BufWriter<File>>>,
    rows_file_warned: AtomicBool,
}

impl RowSink {
    /// Opens `rows_file` for appending.
    ///
    /// # Errors
    /// The file cannot be created or opened for appending.
    pub(crate) fn open(logger: Option<SdkLogger>, rows_file: Option<&Path>) -> Result<Self, std::io::Error> {
        let rows_file = match rows_file {
            Some(path) => {
                Some(Mutex::new(BufWriter::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?)))
            }
            None => None,
        };
        Ok(Self { logger, rows_file, rows_file_warned: AtomicBool::new(false) })
    }

    /// Writes a stage row under the stage stream `event`.
    pub(crate) fn stage(&self, event: &'static str, stat: &StageStat, span: Option<&SpanContext>) {
        let body = format!(
            "stage {} {}: {} items, {} bytes in {:.3}s",
            stat.stage_name,
            stat.status.as_str(),
            stat.items,
            stat.bytes,
            stat.elapsed.as_secs_f64()
        );
        let severity = if stat.status == StageStatus::Failed { Severity::Error } else { Severity::Info };
        self.emit(event, severity, body, stage_fields(event, stat), SystemTime::now(), span);
    }

    /// Writes a worker row under the worker stream `event`.
    pub(crate) fn worker(&self, event: &'static str, stat: &WorkerStat, span: Option<&SpanContext>) {
        let body =
            format!("shard {} of {} {}: {} items", stat.shard_index, stat.stage_name, stat.status.as_str(), stat.items);
        let severity = if stat.status == WorkerStatus::Failed { Severity::Error } else { Severity::Info };
        self.emit(event, severity, body, worker_fields(event, stat), stat.timestamp, span);
    }

    fn emit(
        &self,
        event: &'static str,
        severity: Severity,
        body: String,
        fields: Vec<(String, Value)>,
        at: SystemTime,
        span: Option<&SpanContext>,
    ) {
        let span = span.filter(|s| s.is_valid());
        if let Some(logger) = &self.logger {
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
        if let Some(file) = &self.rows_file {
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
            let mut f = crate::sync::lock(file);
            if let Err(error) = writeln!(f, "{line}").and_then(|()| f.flush()) {
                self.warn_once_rows_file(&error);
            }
        }
    }

    fn warn_once_rows_file(&self, error: &std::io::Error) {
        if !self.rows_file_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", %error, "cannot append to the rows file; rows still go to the log exporters");
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
