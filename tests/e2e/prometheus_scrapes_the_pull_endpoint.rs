//! Real Prometheus scrapes the quickstart example's pull endpoint: the target is up with no
//! parse error, PromQL returns the recorded values with their labels, and `promtool` accepts the
//! exposition.

use std::time::Duration;

use crate::support::{http, promtool_check_metrics, serve_example, turn_if_peers, Peer, Prometheus};

#[test]
fn prometheus_scrapes_the_example_and_sees_its_values() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Promtool]) else { return };
    let (mut example, port) = serve_example("quickstart", |cmd| {
        cmd.env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=e2e").args([
            "--batches",
            "5",
            "--interval-ms",
            "100",
            "--linger-seconds",
            "60",
        ])
    });
    let out = example.wait_for_output("serving metrics at", Duration::from_secs(30));
    assert!(out.contains(&format!("http://127.0.0.1:{port}/metrics")), "{out}");
    example.wait_for_output("done: batches=5 items=500 bytes=20480", Duration::from_secs(30));

    let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")], "/metrics");
    let targets = prometheus.wait_until_up(Duration::from_secs(30));
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0]["lastError"], "", "the real parser refused the exposition: {targets:?}");

    let items = prometheus.wait_for_value("quickstart_items_total", Duration::from_secs(20), |v| v == 500.0);
    let (labels, _) = &items[0];
    assert_eq!(labels.get("stage").map(String::as_str), Some("tokenize"), "{labels:?}");
    assert_eq!(labels.get("otel_scope_name").map(String::as_str), Some("pipetel"), "{labels:?}");
    assert_eq!(labels.get("job").map(String::as_str), Some("pipetel"), "{labels:?}");
    prometheus.wait_for_values(
        [
            ("quickstart_read_bytes_total{stage=\"tokenize\"}", 20480.0),
            ("quickstart_batch_duration_seconds_count{stage=\"tokenize\"}", 5.0),
        ],
        Duration::from_secs(10),
    );
    // The resource travels as target_info.
    let info = prometheus.wait_for_value("target_info", Duration::from_secs(10), |v| v == 1.0);
    let (info, _) = &info[0];
    assert_eq!(info.get("service_name").map(String::as_str), Some("quickstart"), "{info:?}");
    assert_eq!(info.get("deployment_environment").map(String::as_str), Some("e2e"), "{info:?}");
    assert!(info.contains_key("service_instance_id") && info.contains_key("host_name"), "{info:?}");

    // The exposition itself: promtool-clean; the endpoint answers only GET/HEAD on its path.
    let url = format!("http://127.0.0.1:{port}/metrics");
    let (status, body) = http("GET", &url).expect("GET /metrics");
    assert_eq!(status, 200);
    assert!(body.contains("quickstart_items_total{"), "{body}");
    promtool_check_metrics(&body).expect("promtool check metrics");
    let (status, body) = http("HEAD", &url).expect("HEAD");
    assert_eq!((status, body.as_str()), (200, ""));
    assert_eq!(http("POST", &url).expect("POST").0, 405);
    assert_eq!(http("GET", &format!("http://127.0.0.1:{port}/other")).expect("GET /other").0, 404);
}
