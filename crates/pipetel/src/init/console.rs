//! The console layer: events on stderr in the format `PIPETEL_LOG_FORMAT` names. `json` writes
//! one object per line with the current span's `trace_id` and `span_id`, so a log shipper can
//! join the lines to the exported traces.

use std::fmt;
use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::LogFormat;

/// The console layer writing to stderr in `format` (colours only on a terminal).
pub(super) fn layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync + 'static>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ansi = std::io::stderr().is_terminal();
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Pretty => fmt.pretty().with_ansi(ansi).boxed(),
        LogFormat::Json => fmt.event_format(JsonLines).with_ansi(false).boxed(),
        // `LogFormat` is non-exhaustive for users, not for this crate.
        LogFormat::Compact => fmt.compact().with_ansi(ansi).boxed(),
    }
}

/// One JSON object per event: `timestamp`, `level`, `target`, `fields` (the message among
/// them), `spans` (the names of the enclosing spans the console sees, outermost first) and,
/// inside a span that is traced, `trace_id` and `span_id`.
///
/// The ids are those of the current OpenTelemetry context, which the trace bridge makes current
/// on entering a span: they are the exported span's ids whatever the console's filter lets it
/// see, and the same ids the exported log records carry. Records of the `log` crate (bridged
/// as events) are shown with their own target, level and position.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_log::NormalizeEvent as _;
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        if let (Some(file), Some(number)) = (meta.file(), meta.line()) {
            line.insert("file".into(), file.into());
            line.insert("line".into(), number.into());
        }
        let mut fields = JsonFields(Map::new());
        event.record(&mut fields);
        line.insert("fields".into(), Value::Object(fields.0));
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<Value> = scope.from_root().map(|span| span.name().into()).collect();
            line.insert("spans".into(), spans.into());
        }
        let span = opentelemetry::Context::map_current(|cx| cx.span().span_context().clone());
        if span.is_valid() {
            line.insert("trace_id".into(), span.trace_id().to_string().into());
            line.insert("span_id".into(), span.span_id().to_string().into());
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// An event's fields as JSON values; the `log.*` fields the `log` bridge adds are left out, as
/// they are shown as the line's own target and position.
struct JsonFields(Map<String, Value>);

impl JsonFields {
    fn put(&mut self, field: &Field, value: Value) {
        if !field.name().starts_with("log.") {
            self.0.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for JsonFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and the infinities have no JSON number: they are kept as text.
        let value = serde_json::Number::from_f64(value).map_or_else(|| value.to_string().into(), Value::Number);
        self.put(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}
