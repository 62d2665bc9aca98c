//! Spans and log records in an OTLP export that failed are counted, and `force_flush` /
//! `shutdown` report them once with the endpoint and the error; a failed last metric export is
//! reported too. Nothing listens on the endpoint: every connection is refused.
#![cfg(feature = "otlp")]

use std::time::Duration;

use pipetel::config::{LogExporter, MetricExporter, OtlpProtocol, TraceExporter};
use pipetel::{Config, ShutdownError};

fn lines(result: Result<(), ShutdownError>) -> Vec<String> {
    match result {
        Err(ShutdownError::Providers(lines)) => lines,
        other => panic!("expected the providers' report, got {other:?}"),
    }
}

#[test]
fn lost_spans_log_records_and_metrics_are_reported_with_the_endpoint() {
    // Held bound but not listening for the whole test: every connection is refused, and nothing
    // else can take the port meanwhile.
    let refusing = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a TCP socket");
    let loopback: std::net::SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
    refusing.bind(&loopback.into()).expect("bind an ephemeral loopback port");
    let port = refusing.local_addr().ok().and_then(|a| a.as_socket()).expect("local address").port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let config = Config::default()
        .with_console_log(false)
        .with_otlp_endpoint(&endpoint)
        .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
        .with_otlp_timeout(Duration::from_millis(200))
        .with_traces_exporters([TraceExporter::Otlp])
        .with_logs_exporters([LogExporter::Otlp])
        .with_metrics_exporters([MetricExporter::Otlp])
        .with_shutdown_timeout(Duration::from_secs(5));
    let telemetry = pipetel::init(config).expect("init does not need the collector");

    for i in 0..3 {
        let _span = tracing::info_span!("work", i).entered();
        tracing::info!(i, "a record for the collector");
    }
    let report = lines(telemetry.force_flush());
    let traces = report.iter().find(|l| l.starts_with("traces: ")).unwrap_or_else(|| panic!("{report:?}"));
    assert!(
        traces.starts_with(&format!("traces: 3 spans in 1 failed export not delivered to {endpoint}/v1/traces: ")),
        "{traces}"
    );
    let logs = report.iter().find(|l| l.starts_with("logs: ")).unwrap_or_else(|| panic!("{report:?}"));
    assert!(logs.contains("log records in 1 failed export not delivered to"), "{logs}");
    assert!(logs.contains(&format!("{endpoint}/v1/logs")), "{logs}");
    let metrics = report.iter().find(|l| l.starts_with("metrics: ")).unwrap_or_else(|| panic!("{report:?}"));
    assert!(metrics.starts_with(&format!("metrics: the last export to {endpoint}/v1/metrics failed")), "{metrics}");
    // The SDK's bare "failed" gives way to the report naming the cause.
    assert!(!report.iter().any(|l| l.contains("Failed to shutdown") || l.contains("Failed to flush")), "{report:?}");

    // Reported once: a second flush with no new spans or records names only the metrics again.
    let report = lines(telemetry.force_flush());
    assert!(!report.iter().any(|l| l.starts_with("traces: ") || l.starts_with("logs: ")), "{report:?}");

    let _span = tracing::info_span!("one more").entered();
    drop(_span);
    let report = lines(telemetry.shutdown());
    assert!(report.iter().any(|l| l.starts_with("traces: 1 span in 1 failed export")), "{report:?}");
    assert!(report.iter().any(|l| l.starts_with("metrics: the last export")), "{report:?}");
}
