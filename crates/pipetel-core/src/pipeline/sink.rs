//! Rows out: each row as an OTel log record (event name = namespace, attributes = the row's
//! fields but the two its resource carries, trace and span ids) and as one JSON line in the rows
//! store (the local default store, or the configured rows file). A store that cannot be written
//! never fails the caller: one warning, and the row is counted in `pipeline.rows.lost`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::trace::SpanContext;
use opentelemetry::{Key, Value};
use opentelemetry_sdk::logs::SdkLogger;
use pipetel_rows::{Rotation, StoreWriter};

use super::row::{stage_fields, worker_fields, Extra, StageStat, StageStatus, WorkerStat, WorkerStatus};

/// Row fields a log record leaves to its resource: `host.name` and `process.pid` are resource
/// attributes in OpenTelemetry (`pipetel::init`'s resource carries both). Repeated on a record,
/// they would collide with the resource's in a log store that flattens both into one set of
/// fields: a collector that names the node (`host.name` from the agent's `NODE_NAME`) left the
/// store holding either value. The rows store keeps them on the row, where no resource is.
const ON_THE_RESOURCE: [&str; 2] = [pipetel_rows::fields::HOST_NAME, pipetel_rows::fields::PROCESS_PID];

/// Rows that did not reach the rows store (exported as `pipeline.rows.lost`).
static LOST: AtomicU64 = AtomicU64::new(0);

/// Rows lost so far in this process: the store failed, or rows were emitted while pipetel was
/// not initialised.
pub(crate) fn rows_lost() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// Counts a row as lost.
pub(crate) fn count_lost() {
    LOST.fetch_add(1, Ordering::Relaxed);
}

/// The JSON Lines store rows are appended to.
struct Store {
    path: PathBuf,
    /// `None` when the store could not be opened (`open_error` says why).
    writer: Mutex<Option<StoreWriter>>,
    open_error: Option<String>,
    warned: AtomicBool,
}

impl Store {
    fn append(&self, line: &str) {
        let result = {
            let mut w = crate::sync::lock(&self.writer);
            match w.as_mut() {
                Some(w) => w.append(line).map_err(|e| e.to_string()),
                None => Err(self.open_error.clone().unwrap_or_default()),
            }
        };
        if let Err(error) = result {
            count_lost();
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    target: "pipetel",
                    path = %self.path.display(),
                    %error,
                    "cannot write the rows store; rows that miss it are counted in pipeline.rows.lost \
                     (they still go to the log exporters, if any)"
                );
            }
        }
    }
}

/// Where rows go: the OTel logger (when logs are exported) and the rows store.
pub(crate) struct RowSink {
    /// False when rows are configured off: nothing is written anywhere.
    enabled: bool,
    logger: Option<SdkLogger>,
    store: Option<Store>,
}

/// Where the rows store is.
pub(crate) enum StorePath<'a> {
    /// Rows are off.
    Off,
    /// An explicit file (`PIPETEL_ROWS_FILE`): failing to open it is an `init` error.
    Explicit(&'a Path),
    /// The default store: failing to open it warns at the first row and counts lost rows.
    Default(PathBuf),
    /// No private directory for the default store: as a store that fails to open.
    NoDir(pipetel_rows::NoStoreDir),
}

impl RowSink {
    /// Opens the rows store for appending.
    ///
    /// # Errors
    /// An explicit rows file cannot be created or opened for appending.
    pub(crate) fn open(
        logger: Option<SdkLogger>,
        store: StorePath<'_>,
        rotation: Rotation,
    ) -> Result<Self, std::io::Error> {
        let store = match store {
            StorePath::Off => return Ok(Self { enabled: false, logger: None, store: None }),
            StorePath::Explicit(path) => Store {
                path: path.to_path_buf(),
                writer: Mutex::new(Some(StoreWriter::open_file(path, rotation)?)),
                open_error: None,
                warned: AtomicBool::new(false),
            },
            StorePath::Default(path) => {
                let (writer, open_error) = match StoreWriter::open(&path, rotation) {
                    Ok(w) => (Some(w), None),
                    Err(e) => (None, Some(format!("cannot create or open it: {e}"))),
                };
                Store { path, writer: Mutex::new(writer), open_error, warned: AtomicBool::new(false) }
            }
            StorePath::NoDir(e) => Store {
                path: PathBuf::from("(no rows directory)"),
                writer: Mutex::new(None),
                open_error: Some(e.to_string()),
                warned: AtomicBool::new(false),
            },
        };
        Ok(Self { enabled: true, logger, store: Some(store) })
    }

    /// Writes a stage row under the stage stream `event`.
    pub(crate) fn stage(&self, event: &'static str, stat: &StageStat, extra: Extra, span: Option<&SpanContext>) {
        if !self.enabled {
            return;
        }
        let body = format!(
            "stage {} {}: {} items, {} bytes in {:.3}s",
            stat.stage_name,
            stat.status.as_str(),
            stat.items,
            stat.bytes,
            stat.elapsed.as_secs_f64()
        );
        let severity = if stat.status == StageStatus::Failed { Severity::Error } else { Severity::Info };
        let mut fields = stage_fields(event, stat);
        fields.extend(extra);
        self.emit(event, severity, body, fields, SystemTime::now(), span);
    }

    /// Writes a worker row under the worker stream `event`.
    pub(crate) fn worker(&self, event: &'static str, stat: &WorkerStat, extra: Extra, span: Option<&SpanContext>) {
        if !self.enabled {
            return;
        }
        let body =
            format!("shard {} of {} {}: {} items", stat.shard_index, stat.stage_name, stat.status.as_str(), stat.items);
        let severity = match stat.status {
            WorkerStatus::Failed => Severity::Error,
            WorkerStatus::Straggler | WorkerStatus::Stalled => Severity::Warn,
            _ => Severity::Info,
        };
        let mut fields = worker_fields(event, stat);
        fields.extend(extra);
        self.emit(event, severity, body, fields, stat.timestamp, span);
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
            rec.set_severity_text(match severity {
                Severity::Error => "ERROR",
                Severity::Warn => "WARN",
                _ => "INFO",
            });
            rec.set_body(AnyValue::from(body));
            rec.add_attributes(
                fields
                    .iter()
                    .filter(|(k, _)| !ON_THE_RESOURCE.contains(&k.as_str()))
                    .map(|(k, v)| (Key::from(k.clone()), any(v))),
            );
            if let Some(sc) = span {
                rec.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
            }
            logger.emit(rec);
        }
        if let Some(store) = &self.store {
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
            store.append(&serde_json::Value::Object(obj).to_string());
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
