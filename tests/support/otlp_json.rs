//! Reading OTLP JSON, as the collector's `file` exporter writes it (one export request a line),
//! and checking the pipeline rows of a rows file (`PIPETEL_ROWS_FILE`) against the log records
//! that arrived.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Attributes by key, values as plain JSON (strings, numbers, booleans; `intValue` as an integer).
pub type Attributes = BTreeMap<String, Value>;

/// One span, with its resource's attributes.
#[derive(Debug, Clone)]
pub struct Span {
    /// The resource's attributes (`service.name`, `host.name`, ...).
    pub resource: Attributes,
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex parent span id; empty for a root span.
    pub parent_span_id: String,
    /// The span name.
    pub name: String,
    /// The status code: 0 unset, 1 ok, 2 error.
    pub status_code: i64,
    /// The span's attributes.
    pub attributes: Attributes,
}

/// One log record, with its resource's attributes.
#[derive(Debug, Clone)]
pub struct LogRecord {
    /// The resource's attributes.
    pub resource: Attributes,
    /// Hex trace id; empty when none.
    pub trace_id: String,
    /// Hex span id; empty when none.
    pub span_id: String,
    /// The event name (`pipeline.stage`, ...); empty when none.
    pub event_name: String,
    /// The record's time, nanoseconds since the epoch.
    pub time_unix_nano: u64,
    /// The body as plain JSON.
    pub body: Value,
    /// The record's attributes.
    pub attributes: Attributes,
}

/// An OTLP `AnyValue` as plain JSON.
fn any_value(v: &Value) -> Value {
    if let Some(s) = v.get("stringValue") {
        return s.clone();
    }
    if let Some(i) = v.get("intValue") {
        let parsed = match i {
            Value::String(s) => s.parse::<i64>().ok(),
            other => other.as_i64(),
        };
        return parsed.map(Value::from).unwrap_or_else(|| i.clone());
    }
    if let Some(d) = v.get("doubleValue") {
        return d.clone();
    }
    if let Some(b) = v.get("boolValue") {
        return b.clone();
    }
    v.clone()
}

/// A `[{key, value}]` list as [`Attributes`].
pub fn attributes(list: &Value) -> Attributes {
    list.as_array()
        .map(|a| a.iter().filter_map(|kv| Some((kv["key"].as_str()?.to_string(), any_value(&kv["value"])))).collect())
        .unwrap_or_default()
}

/// The requests of a file, one JSON object a line; a line still being written is skipped.
fn requests(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok())
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn string(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// Every record in a `file` exporter's output, by the OTLP JSON nesting `[resources, scopes,
/// records]` (`resourceSpans`, `scopeSpans`, `spans`, say), each with its resource's attributes.
pub fn records<T>(
    text: &str,
    [resources, scopes, records]: [&str; 3],
    record: impl Fn(&Attributes, &Value) -> T,
) -> Vec<T> {
    let mut out = Vec::new();
    for request in requests(text) {
        for r in array(&request[resources]) {
            let resource = attributes(&r["resource"]["attributes"]);
            for scope in array(&r[scopes]) {
                out.extend(array(&scope[records]).iter().map(|v| record(&resource, v)));
            }
        }
    }
    out
}

/// Every span in a `file` exporter's traces output.
pub fn spans_in(text: &str) -> Vec<Span> {
    records(text, ["resourceSpans", "scopeSpans", "spans"], |resource, s| Span {
        resource: resource.clone(),
        trace_id: string(&s["traceId"]),
        span_id: string(&s["spanId"]),
        parent_span_id: string(&s["parentSpanId"]),
        name: string(&s["name"]),
        status_code: s["status"]["code"].as_i64().unwrap_or(0),
        attributes: attributes(&s["attributes"]),
    })
}

/// Every log record in a `file` exporter's logs output.
pub fn log_records_in(text: &str) -> Vec<LogRecord> {
    records(text, ["resourceLogs", "scopeLogs", "logRecords"], |resource, r| LogRecord {
        resource: resource.clone(),
        trace_id: string(&r["traceId"]),
        span_id: string(&r["spanId"]),
        event_name: string(&r["eventName"]),
        time_unix_nano: match &r["timeUnixNano"] {
            Value::String(s) => s.parse().unwrap_or(0),
            other => other.as_u64().unwrap_or(0),
        },
        body: any_value(&r["body"]),
        attributes: attributes(&r["attributes"]),
    })
}

/// One row of a rows file: its fields by name (`event`, `timestamp_ms`, `trace_id`, `span_id`
/// and the row's `pipeline.*` fields).
pub type Row = serde_json::Map<String, Value>;

/// The rows of a rows file (`PIPETEL_ROWS_FILE`).
pub fn read_rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| match serde_json::from_str(l) {
            Ok(Value::Object(row)) => row,
            other => panic!("{}: not a row: {l} ({other:?})", path.display()),
        })
        .collect()
}

/// The fields of a row that are not the envelope (`event`, `timestamp_ms`, ids).
fn row_fields(row: &Row) -> impl Iterator<Item = (&String, &Value)> {
    row.iter().filter(|(k, _)| !["event", "timestamp_ms", "trace_id", "span_id"].contains(&k.as_str()))
}

/// Two field values agree: equal strings and integers, doubles equal to 1e-12 relative.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            _ => false,
        },
        _ => a == b,
    }
}

/// The log record carrying `row` (same event, span, status and millisecond), if it arrived.
pub fn record_of<'a>(row: &Row, logs: &'a [LogRecord]) -> Option<&'a LogRecord> {
    let event = row["event"].as_str().unwrap_or_default();
    let span = row.get("span_id").and_then(Value::as_str).unwrap_or_default();
    let ms = row["timestamp_ms"].as_u64().unwrap_or_default();
    logs.iter().find(|l| {
        l.event_name == event
            && l.span_id == span
            && l.time_unix_nano / 1_000_000 == ms
            && l.attributes.get("pipeline.status") == row.get("pipeline.status")
    })
}

/// How many rows have no log record yet.
pub fn rows_missing(rows: &[Row], logs: &[LogRecord]) -> usize {
    rows.iter().filter(|r| record_of(r, logs).is_none()).count()
}

/// Fields every row carries (`docs/src/stages.md`, "Rows"), and those a worker row adds.
pub const STAGE_ROW_FIELDS: &[&str] = &[
    "pipeline.namespace",
    "pipeline.stage.name",
    "pipeline.execution.id",
    "pipeline.status",
    "pipeline.items",
    "pipeline.bytes",
    "pipeline.elapsed_seconds",
    "pipeline.shards.total",
];
/// Fields every worker row carries (`docs/src/stages.md`, "Rows").
pub const WORKER_ROW_FIELDS: &[&str] = &[
    "pipeline.namespace",
    "pipeline.stage.name",
    "pipeline.execution.id",
    "pipeline.shard.index",
    "pipeline.status",
    "pipeline.items",
    "pipeline.bytes",
    "pipeline.item_rate",
    "pipeline.byte_rate",
    "pipeline.cpu.time_seconds",
    "pipeline.memory.current_bytes",
    "pipeline.memory.avg_bytes",
    "pipeline.memory.peak_bytes",
];

/// Row fields a log record leaves to its resource (`crates/pipetel-core/src/pipeline/sink.rs`).
pub const ON_THE_RESOURCE: [&str; 2] = [pipetel_rows::fields::HOST_NAME, pipetel_rows::fields::PROCESS_PID];

/// Asserts every row arrived as a log record with its event name, trace and span ids, and every
/// field with the same value and no `pipeline.*` attribute the row lacks; that the stage and
/// worker rows carry the fields of `docs/src/stages.md`, and that the failure reason and counters travel too.
/// `extra` lists attributes a collector may add (`pipetel.gateway`) or set on the resource
/// (`host.name`, an agent's node name); a row's `host.name` and `process.pid` are on the record's
/// resource, not repeated on the record.
pub fn assert_rows_arrived(rows: &[Row], logs: &[LogRecord], extra: &[&str]) {
    assert!(!rows.is_empty(), "the rows file is empty");
    for row in rows {
        let record = record_of(row, logs).unwrap_or_else(|| {
            let same_event: Vec<_> =
                logs.iter().filter(|l| l.event_name == row["event"].as_str().unwrap_or_default()).take(3).collect();
            panic!("row {row:?} arrived as no log record; {} records, e.g. {same_event:#?}", logs.len())
        });
        let trace = row.get("trace_id").and_then(Value::as_str).unwrap_or_default();
        assert_eq!(record.trace_id, trace, "trace id of {row:?}");
        for (k, v) in row_fields(row) {
            if ON_THE_RESOURCE.contains(&k.as_str()) {
                // The record leaves these to its resource, which holds the row's value unless a
                // collector set its own (an agent's `host.name`, listed in `extra`).
                assert!(!record.attributes.contains_key(k), "{k} repeated on the log record of {row:?}");
                let got = record.resource.get(k).unwrap_or_else(|| panic!("{k} missing in the resource of {row:?}"));
                assert!(same(got, v) || extra.contains(&k.as_str()), "{k}: resource has {got}, row has {v} ({row:?})");
                continue;
            }
            let got = record.attributes.get(k).unwrap_or_else(|| panic!("{k} missing in {record:#?} for {row:?}"));
            assert!(same(got, v), "{k}: log record has {got}, row has {v} ({row:?})");
        }
        for k in record.attributes.keys() {
            assert!(row.contains_key(k) || extra.contains(&k.as_str()), "{k} in the log record but not in {row:?}");
        }
        let required = match row["event"].as_str() {
            Some(e) if e.ends_with(".stage") => STAGE_ROW_FIELDS,
            Some(e) if e.ends_with(".worker") => WORKER_ROW_FIELDS,
            other => panic!("unknown row event {other:?}"),
        };
        for k in required {
            assert!(record.attributes.contains_key(*k), "{k} missing in the log record of {row:?}");
        }
        let failed = row.get("pipeline.status").and_then(Value::as_str) == Some("failed");
        assert_eq!(record.attributes.contains_key("pipeline.failure.reason"), failed, "failure reason of {row:?}");
    }
    for event in ["pipeline.stage", "pipeline.worker"] {
        assert!(
            logs.iter()
                .any(|l| l.event_name == event && l.attributes.keys().any(|k| k.starts_with("pipeline.counter."))),
            "no {event} log record carries a pipeline.counter.* field"
        );
    }
}
