//! Delivery accounting for the OTLP exporters: what failed exports lost, so that `flush` and
//! `shutdown` report it instead of the SDK's bare "failed" (or nothing at all: a batch span or log
//! processor drops a failed batch and still shuts down `Ok`).
//!
//! Spans and log records in a failed export are gone, so they are counted. Metrics are
//! cumulative: a failed export loses nothing once a later one gets through, so only a failure of
//! the most recent export is reported.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::logs::{LogBatch, LogExporter};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// The outcome of every export of one signal.
#[derive(Debug)]
pub(crate) struct Ledger {
    /// `traces`, `logs` or `metrics`: names the signal in reports.
    signal: &'static str,
    /// What one item is, in reports (`span`, `log record`); empty for metrics.
    items: &'static str,
    /// Where the exports go (the endpoint URL, without its userinfo).
    destination: String,
    failed_items: AtomicU64,
    failed_exports: AtomicU64,
    exports: AtomicU64,
    last_failed: AtomicBool,
    /// The last error, and how many failed items and exports were already reported.
    state: Mutex<Reported>,
}

#[derive(Debug, Default)]
struct Reported {
    last_error: Option<String>,
    items: u64,
    exports: u64,
}

impl Ledger {
    pub(crate) fn new(signal: &'static str, items: &'static str, destination: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            signal,
            items,
            destination: crate::redact::redact_url(&destination.into()).into_owned(),
            failed_items: AtomicU64::new(0),
            failed_exports: AtomicU64::new(0),
            exports: AtomicU64::new(0),
            last_failed: AtomicBool::new(false),
            state: Mutex::new(Reported::default()),
        })
    }

    /// The signal this ledger accounts for.
    pub(crate) fn signal(&self) -> &'static str {
        self.signal
    }

    fn record(&self, items: usize, result: &OTelSdkResult) {
        self.exports.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(()) => self.last_failed.store(false, Ordering::Relaxed),
            Err(e) => {
                // A client's error may quote the URL, credentials included.
                crate::sync::lock(&self.state).last_error =
                    Some(crate::redact::redact_urls_in(&e.to_string()).into_owned());
                self.failed_items.fetch_add(items as u64, Ordering::Relaxed);
                self.failed_exports.fetch_add(1, Ordering::Relaxed);
                self.last_failed.store(true, Ordering::Relaxed);
            }
        }
    }

    /// What was lost since the previous report, as one line naming the signal, the count and the
    /// last error; `None` when nothing was.
    pub(crate) fn report(&self) -> Option<String> {
        let mut state = crate::sync::lock(&self.state);
        let error = state.last_error.clone().unwrap_or_else(|| "unknown error".into());
        if self.items.is_empty() {
            // Cumulative metrics: only a failed last export leaves values undelivered.
            if !self.last_failed.load(Ordering::Relaxed) {
                return None;
            }
            let failed = self.failed_exports.load(Ordering::Relaxed);
            let new = failed - state.exports;
            state.exports = failed;
            if new == 0 {
                return None;
            }
            let total = self.exports.load(Ordering::Relaxed);
            return Some(format!(
                "{}: the last export to {} failed ({failed} of {total} failed), so values recorded since the \
                 last delivered one did not arrive: {error}",
                self.signal, self.destination
            ));
        }
        let (items, exports) = (self.failed_items.load(Ordering::Relaxed), self.failed_exports.load(Ordering::Relaxed));
        let (new_items, new_exports) = (items - state.items, exports - state.exports);
        state.items = items;
        state.exports = exports;
        (new_exports > 0).then(|| {
            let s = |n: u64| if n == 1 { "" } else { "s" };
            format!(
                "{}: {new_items} {}{} in {new_exports} failed export{} not delivered to {}: {error}",
                self.signal,
                self.items,
                s(new_items),
                s(new_exports),
                self.destination
            )
        })
    }
}

/// Why a transport's last attempt failed, noted by the transport itself: the OTLP/HTTP exporter
/// turns every transport failure (refused connection, unknown certificate issuer, expired
/// certificate) into a bare "network error", so its client notes the cause here for the report.
#[derive(Debug, Default)]
pub(crate) struct Cause(Mutex<Option<String>>);

impl Cause {
    /// Notes why the last attempt failed (`None`: it succeeded).
    pub(crate) fn note(&self, cause: Option<String>) {
        *crate::sync::lock(&self.0) = cause;
    }

    fn take(&self) -> Option<String> {
        crate::sync::lock(&self.0).take()
    }
}

/// An exporter with the [`Cause`] its transport notes, if it has one.
#[derive(Debug)]
pub(crate) struct Explained<E> {
    pub(crate) exporter: E,
    pub(crate) cause: Option<Arc<Cause>>,
}

/// `message` with a repeated tail said once: the gRPC exporter renders tonic's transport error,
/// whose text already holds its source, and then the source again (`transport error: invalid
/// peer certificate: UnknownIssuer: invalid peer certificate: UnknownIssuer`).
fn once(message: &str) -> String {
    let parts: Vec<&str> = message.split(": ").collect();
    let n = parts.len();
    for k in (1..=n / 2).rev() {
        if parts[n - 2 * k..n - k] == parts[n - k..] {
            return parts[..n - k].join(": ");
        }
    }
    message.to_string()
}

/// An exporter whose every export outcome, with its cause, is entered in a [`Ledger`].
#[derive(Debug)]
pub(crate) struct Tracked<E> {
    inner: E,
    cause: Option<Arc<Cause>>,
    ledger: Arc<Ledger>,
}

impl<E> Tracked<E> {
    pub(crate) fn new(inner: Explained<E>, ledger: &Arc<Ledger>) -> Self {
        Self { inner: inner.exporter, cause: inner.cause, ledger: Arc::clone(ledger) }
    }

    /// Forgets a cause left by an earlier export (retried and then delivered).
    fn begin(&self) {
        if let Some(cause) = &self.cause {
            cause.take();
        }
    }

    /// Enters the outcome of one export of `items`, the transport's cause added to an error that
    /// lacks it; the SDK gets the same error, so its own log names the cause too.
    fn enter(&self, items: usize, result: OTelSdkResult) -> OTelSdkResult {
        let result = match (result, self.cause.as_ref().and_then(|c| c.take())) {
            (Err(OTelSdkError::InternalFailure(message)), Some(cause)) if !message.contains(&cause) => {
                Err(OTelSdkError::InternalFailure(format!("{message}: {cause}")))
            }
            (Err(OTelSdkError::InternalFailure(message)), _) => Err(OTelSdkError::InternalFailure(once(&message))),
            (result, _) => result,
        };
        self.ledger.record(items, &result);
        result
    }
}

impl<E: SpanExporter> SpanExporter for Tracked<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        self.begin();
        let result = self.inner.export(batch).await;
        self.enter(n, result)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: LogExporter> LogExporter for Tracked<E> {
    async fn export(&self, batch: LogBatch<'_>) -> OTelSdkResult {
        let n = batch.iter().count();
        self.begin();
        let result = self.inner.export(batch).await;
        self.enter(n, result)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn event_enabled(&self, level: opentelemetry::logs::Severity, target: &str, name: Option<&str>) -> bool {
        self.inner.event_enabled(level, target, name)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Tracked<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        self.begin();
        let result = self.inner.export(metrics).await;
        self.enter(0, result)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> OTelSdkResult {
        Err(OTelSdkError::InternalFailure("connection refused".into()))
    }

    #[test]
    fn reports_never_show_the_userinfo_of_the_endpoint() {
        let url = "http://user:secret@collector:4318/v1/traces";
        for (signal, items) in [("traces", "span"), ("metrics", "")] {
            let ledger = Ledger::new(signal, items, url);
            let quoted = format!("error sending request for url ({url}): connection refused");
            ledger.record(1, &Err(OTelSdkError::InternalFailure(quoted)));
            let report = ledger.report().expect("one export failed");
            assert!(!report.contains("secret") && !report.contains("user:"), "{report}");
            assert!(report.contains("http://<redacted>@collector:4318/v1/traces"), "{report}");
            assert!(!format!("{ledger:?}").contains("secret"));
        }
    }

    #[test]
    fn lost_spans_are_counted_and_reported_once() {
        let ledger = Ledger::new("traces", "span", "http://collector:4318/v1/traces");
        assert_eq!(ledger.report(), None, "nothing failed yet");
        ledger.record(3, &failed());
        ledger.record(4, &Ok(()));
        ledger.record(2, &failed());
        let report = ledger.report().expect("two exports failed");
        assert!(
            report
                .starts_with("traces: 5 spans in 2 failed exports not delivered to http://collector:4318/v1/traces: "),
            "{report}"
        );
        assert!(report.contains("connection refused"), "{report}");
        assert_eq!(ledger.report(), None, "already reported");
        ledger.record(1, &failed());
        let report = ledger.report().expect("one more failed");
        assert!(report.starts_with("traces: 1 span in 1 failed export not delivered to"), "{report}");
    }

    /// An exporter whose transport notes `cause` and whose error, like the OTLP/HTTP exporter's,
    /// does not say it.
    #[derive(Debug)]
    struct Vague(Arc<Cause>, Option<&'static str>);

    impl SpanExporter for Vague {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.note(self.1.map(str::to_string));
            Err(OTelSdkError::InternalFailure("HTTP export failed: network error".into()))
        }
    }

    #[test]
    fn the_transport_cause_joins_an_error_that_lacks_it() {
        let ledger = Ledger::new("traces", "span", "https://collector:4318/v1/traces");
        let cause = Arc::new(Cause::default());
        let run = |noted: Option<&'static str>| {
            let exporter = Vague(Arc::clone(&cause), noted);
            let tracked = Tracked::new(Explained { exporter, cause: Some(Arc::clone(&cause)) }, &ledger);
            let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
            runtime.block_on(tracked.export(Vec::new())).expect_err("refused").to_string()
        };
        let error = run(Some("invalid peer certificate: UnknownIssuer"));
        assert!(
            error.ends_with("HTTP export failed: network error: invalid peer certificate: UnknownIssuer"),
            "{error}"
        );
        let report = ledger.report().expect("reported");
        assert!(report.ends_with("network error: invalid peer certificate: UnknownIssuer"), "{report}");
        // A cause left from an earlier attempt is not reused.
        cause.note(Some("stale".into()));
        let error = run(None);
        assert!(!error.contains("stale"), "{error}");
    }

    #[test]
    fn a_repeated_cause_is_said_once() {
        let grpc = "Operation failed: TonicTracesClient export failed with gRPC code: Unavailable: transport error: \
                    invalid peer certificate: UnknownIssuer: invalid peer certificate: UnknownIssuer";
        assert_eq!(
            once(grpc),
            "Operation failed: TonicTracesClient export failed with gRPC code: Unavailable: transport error: \
             invalid peer certificate: UnknownIssuer"
        );
        let plain = "Operation failed: HTTP export failed with status code: 401";
        assert_eq!(once(plain), plain);
    }

    #[test]
    fn metrics_report_only_a_failed_last_export() {
        let ledger = Ledger::new("metrics", "", "http://collector:4317");
        ledger.record(0, &failed());
        ledger.record(0, &Ok(()));
        assert_eq!(ledger.report(), None, "a later export delivered the cumulative values");
        ledger.record(0, &failed());
        let report = ledger.report().expect("the last export failed");
        assert!(
            report.starts_with("metrics: the last export to http://collector:4317 failed (2 of 3 failed)"),
            "{report}"
        );
        assert!(report.contains("connection refused"), "{report}");
        assert_eq!(ledger.report(), None, "already reported");
    }
}
