//! When pipetel owns the subscriber (`init`), records of the `log` crate become `tracing`
//! events: they pass its filter and reach the OTLP log export like any event.
//! Its own test binary: `init` is once per process.
#![cfg(feature = "otlp")]

mod otlp_sink;

use pipetel::config::{LogExporter, MetricExporter, OtlpProtocol};
use pipetel::Config;

#[test]
fn log_crate_records_reach_the_log_export_and_the_filter_applies() {
    let sink = otlp_sink::OtlpSink::start();
    let config = Config::default()
        .with_console_log(false)
        .with_log_filter("info")
        .with_metrics_exporters([MetricExporter::Otlp])
        .with_otlp_endpoint(&sink.endpoint)
        .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
        .with_logs_exporters([LogExporter::Otlp]);
    let telemetry = pipetel::init(config).expect("init");
    log::info!("kept: a log crate record at info");
    log::debug!("dropped: below the filter");
    telemetry.force_flush().expect("flush");
    assert!(sink.wait_for("/v1/logs", "kept: a log crate record at info"));
    assert!(!sink.wait_for("/v1/logs", "dropped: below the filter"));
    telemetry.shutdown().expect("shutdown");
}
