//! `init` and the guard's drop inside a Tokio runtime (current-thread, the strictest): no panic,
//! gRPC exporters run on pipetel's own runtime, shutdown returns within its timeout.

use std::time::{Duration, Instant};

#[tokio::test(flavor = "current_thread")]
async fn init_and_drop_inside_an_async_context() {
    // Nothing listens on this endpoint: exports fail, the program must not care.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let config = pipetel::Config::default()
        .with_service_name("in-tokio")
        .with_otlp_endpoint(format!("http://{dead}"))
        .with_otlp_protocol(pipetel::config::OtlpProtocol::Grpc)
        .with_otlp_timeout(Duration::from_millis(300))
        .with_metrics_exporters([pipetel::config::MetricExporter::Otlp, pipetel::config::MetricExporter::Prometheus])
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(0)
        .with_shutdown_timeout(Duration::from_secs(2))
        .with_console_log(false);
    let telemetry = pipetel::init(config).expect("init inside a runtime");
    assert!(telemetry.tracer_provider().is_some() && telemetry.logger_provider().is_some());
    work().await;
    let counter = pipetel::meter().u64_counter("in.tokio.calls").build();
    counter.add(1, &[]);
    let rendered = telemetry.prometheus_render().expect("render").render();
    assert!(rendered.contains("in_tokio_calls_total"), "{rendered}");
    let t = Instant::now();
    drop(telemetry);
    assert!(t.elapsed() < Duration::from_secs(3), "drop took {:?}", t.elapsed());
}

#[tracing::instrument]
async fn work() {
    tokio::time::sleep(Duration::from_millis(10)).await;
    tracing::info!("worked");
}
