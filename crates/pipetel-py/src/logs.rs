//! `pipetel._log_record(...)`: one record of Python's `logging` as an OTel log record, emitted
//! through the logger `init` installed and carrying the current `pipetel.span`'s trace and span
//! ids. `pipetel.LoggingHandler` (in `python/pipetel/__init__.py`) turns a `logging.LogRecord`
//! into these arguments.
//!
//! # Severity
//! Python's levels map onto OTel severities as the OTel Python SDK maps them: `DEBUG` (10) is
//! `DEBUG`, `INFO` (20) `INFO`, `WARNING` (30) `WARN`, `ERROR` (40) `ERROR`, `CRITICAL` (50)
//! `FATAL`; a level between two (`25`) takes the lower one's band plus the remainder, capped at
//! the band's fourth step (`INFO4`); below `DEBUG` is `TRACE`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pipetel::opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use pipetel::opentelemetry::trace::TraceContextExt as _;
use pyo3::prelude::*;

use crate::context::current_context;
use crate::errors::guard;
use crate::init::logger;

/// The 24 OTel severities in order of their numbers (1 to 24).
const SEVERITIES: [Severity; 24] = [
    Severity::Trace,
    Severity::Trace2,
    Severity::Trace3,
    Severity::Trace4,
    Severity::Debug,
    Severity::Debug2,
    Severity::Debug3,
    Severity::Debug4,
    Severity::Info,
    Severity::Info2,
    Severity::Info3,
    Severity::Info4,
    Severity::Warn,
    Severity::Warn2,
    Severity::Warn3,
    Severity::Warn4,
    Severity::Error,
    Severity::Error2,
    Severity::Error3,
    Severity::Error4,
    Severity::Fatal,
    Severity::Fatal2,
    Severity::Fatal3,
    Severity::Fatal4,
];

/// Python's name of each band's level (`TRACE` below `DEBUG`, which Python does not name).
const BAND_NAMES: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];

/// The OTel severity and severity text of Python level `levelno` (see the module docs).
pub(crate) fn severity(levelno: i64) -> (Severity, &'static str) {
    let band = (levelno.max(0) / 10).min(5);
    let step = if band == 0 { 0 } else { (levelno - band * 10).min(3) };
    // Both in range: band is 0..=5 and step 0..=3.
    let index = usize::try_from(band * 4 + step).unwrap_or(0);
    let band = usize::try_from(band).unwrap_or(0);
    (SEVERITIES[index], BAND_NAMES[band])
}

/// `pipetel._log_record`: emits one log record (see the module docs); does nothing before
/// `init` or when no log exporter is configured.
#[pyfunction]
#[pyo3(signature = (
    levelno, body, created, logger_name, path, lineno, function,
    thread_id = None, thread_name = None, exception_type = None, exception_message = None,
    exception_stacktrace = None,
))]
#[allow(clippy::too_many_arguments)] // one keyword per field of a `logging.LogRecord`
fn _log_record(
    py: Python<'_>,
    levelno: i64,
    body: String,
    created: f64,
    logger_name: String,
    path: String,
    lineno: i64,
    function: String,
    thread_id: Option<u64>,
    thread_name: Option<String>,
    exception_type: Option<String>,
    exception_message: Option<String>,
    exception_stacktrace: Option<String>,
) -> PyResult<()> {
    let Some(logger) = logger() else { return Ok(()) };
    let cx = current_context(py)?;
    guard(|| {
        let mut record = logger.create_log_record();
        let (severity, text) = severity(levelno);
        record.set_severity_number(severity);
        record.set_severity_text(text);
        record.set_body(AnyValue::from(body));
        if let Ok(since_epoch) = Duration::try_from_secs_f64(created) {
            record.set_timestamp(UNIX_EPOCH + since_epoch);
        }
        record.set_observed_timestamp(SystemTime::now());
        let span = cx.span();
        let sc = span.span_context();
        if sc.is_valid() {
            record.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
        }
        record.add_attribute("logger.name", logger_name);
        record.add_attribute("code.file.path", path);
        record.add_attribute("code.line.number", lineno);
        record.add_attribute("code.function.name", function);
        if let Some(id) = thread_id.and_then(|id| i64::try_from(id).ok()) {
            record.add_attribute("thread.id", id);
        }
        if let Some(name) = thread_name {
            record.add_attribute("thread.name", name);
        }
        if let Some(v) = exception_type {
            record.add_attribute("exception.type", v);
        }
        if let Some(v) = exception_message {
            record.add_attribute("exception.message", v);
        }
        if let Some(v) = exception_stacktrace {
            record.add_attribute("exception.stacktrace", v);
        }
        logger.emit(record);
        Ok(())
    })
}

/// Adds `_log_record` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_log_record, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_levels_map_onto_otel_severities() {
        assert_eq!(severity(0), (Severity::Trace, "TRACE"));
        assert_eq!(severity(5), (Severity::Trace, "TRACE"));
        assert_eq!(severity(-3), (Severity::Trace, "TRACE"));
        assert_eq!(severity(10), (Severity::Debug, "DEBUG"));
        assert_eq!(severity(20), (Severity::Info, "INFO"));
        assert_eq!(severity(25), (Severity::Info4, "INFO"));
        assert_eq!(severity(21), (Severity::Info2, "INFO"));
        assert_eq!(severity(30), (Severity::Warn, "WARNING"));
        assert_eq!(severity(40), (Severity::Error, "ERROR"));
        assert_eq!(severity(50), (Severity::Fatal, "CRITICAL"));
        assert_eq!(severity(90), (Severity::Fatal4, "CRITICAL"));
        assert_eq!(severity(i64::MAX), (Severity::Fatal4, "CRITICAL"));
    }
}
