//! An application that owns its `tracing` subscriber (registry + its filter + fmt) adds
//! `pipetel::layers`: its spans reach the OTLP trace export and the span-metrics histogram, its
//! events and `log` crate records reach the OTLP log export, its fmt layer still writes, and
//! pipetel's own metrics reach the pull render, with the global providers left alone.
//! Its own test binary: `init` is once per process.
#![cfg(all(feature = "otlp", feature = "prometheus"))]

mod otlp_sink;

use std::io::Write;
use std::sync::{Arc, Mutex};

use pipetel::config::{LogExporter, MetricExporter, OtlpProtocol, TraceExporter};
use pipetel::{Config, InitOptions};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The application's fmt output, kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tracing::instrument]
fn tokenize_batch(n: u64) -> u64 {
    tracing::info!(n, "tokenized a batch in the app");
    n * 2
}

#[test]
fn spans_events_log_records_and_metrics_reach_pipetel_from_an_app_owned_subscriber() {
    let sink = otlp_sink::OtlpSink::start();
    let config = Config::default()
        .with_service_name("app-owned")
        .with_prometheus_port(0)
        .with_metrics_exporters([MetricExporter::Prometheus])
        .with_otlp_endpoint(&sink.endpoint)
        .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
        .with_traces_exporters([TraceExporter::Otlp])
        .with_logs_exporters([LogExporter::Otlp]);
    let options = InitOptions::new().install_global_providers(false);
    let (telemetry, pipetel_layer) = pipetel::layers_with(&config, options).expect("pipetel without a subscriber");

    let fmt_out = Captured::default();
    let writer = fmt_out.clone();
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("info"))
        .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone()))
        .with(pipetel_layer)
        .try_init()
        .expect("the app's subscriber");

    assert_eq!(tokenize_batch(21), 42);
    log::warn!("a record from the log crate");
    pipetel::meter().u64_counter("app.items").build().add(5, &[]);
    telemetry.force_flush().expect("flush");

    assert!(sink.wait_for("/v1/traces", "tokenize_batch"), "the span reached the trace export");
    assert!(sink.wait_for("/v1/logs", "tokenized a batch in the app"), "the event reached the log export");
    assert!(sink.wait_for("/v1/logs", "a record from the log crate"), "the log crate's record reached the log export");
    let text = telemetry.prometheus_render().expect("pull render").render();
    assert!(text.contains("app_items_total{otel_scope_name=\"pipetel\"} 5"), "{text}");
    assert!(text.contains("span_name=\"tokenize_batch\""), "span metrics recorded the span: {text}");
    let fmt_text = String::from_utf8(fmt_out.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(fmt_text.contains("tokenized a batch in the app"), "the app's fmt layer still writes: {fmt_text}");

    // The globals stay the application's: pipetel's meter is not the global one.
    let global = pipetel::opentelemetry::global::meter("probe");
    global.u64_counter("global.only").build().add(1, &[]);
    let text = telemetry.prometheus_render().expect("pull render").render();
    assert!(!text.contains("global_only"), "{text}");

    // A second start-up in the same process is refused, whatever the options.
    let again = pipetel::layers::<tracing_subscriber::Registry>(&config);
    assert!(matches!(again, Err(pipetel::InitError::AlreadyInitialized)));
    telemetry.shutdown().expect("shutdown");
}
