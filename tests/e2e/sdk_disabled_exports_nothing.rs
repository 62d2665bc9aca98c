//! `OTEL_SDK_DISABLED=true`: the program runs normally, nothing listens, nothing is exported.

use std::time::Duration;

use crate::support::{example_pushing, free_port, turn_if_peers, Collector, Peer, Process};

#[test]
fn disabled_sdk_runs_the_program_and_exports_nothing() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    let mut collector = Collector::start();
    let port = free_port();
    let mut cmd = example_pushing("quickstart", &collector.endpoint("grpc"), "grpc");
    cmd.env("OTEL_SDK_DISABLED", "true")
        .env("OTEL_EXPORTER_PROMETHEUS_PORT", port.to_string())
        .env("OTEL_METRICS_EXPORTER", "prometheus,otlp")
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("OTEL_LOGS_EXPORTER", "otlp")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "100")
        .args(["--batches", "10", "--interval-ms", "100"]);
    let mut example = Process::spawn("quickstart", cmd);
    example.wait_for_output("no Prometheus endpoint configured", Duration::from_secs(30));
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "nothing may listen on the Prometheus port");
    let (code, out) = example.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("done: batches=10 items=1000"), "{out}");
    std::thread::sleep(Duration::from_secs(1));
    collector.stop();
    let received = collector.output();
    for kind in ["ResourceMetrics", "ResourceSpans", "ResourceLog"] {
        assert!(!received.contains(kind), "the collector received {kind} from a disabled SDK:\n{received}");
    }
    assert!(received.contains("Starting Rotel"), "the collector ran: {received}");
}
