//! `pipetel::http::ServerInstruments` (what the Python ASGI and WSGI middleware record through)
//! are the HTTP layer's own instruments: a request an axum API served through the layer and a
//! request recorded through `ServerInstruments` with the same attributes land in one series of
//! one family (count 2), with the layer's scope, unit and bucket bounds. Runs in-process.

// Its own test binary: it calls `pipetel::init`, which a process does once.

mod support;

use std::time::Duration;

use axum::routing::get;
use axum::Router;
use pipetel::opentelemetry::KeyValue;
use support::{free_port, http};

#[test]
fn server_instruments_record_into_the_layers_series() {
    let config = pipetel::Config::default().with_prometheus_host("127.0.0.1").with_prometheus_port(free_port());
    let telemetry = pipetel::init(config).expect("init");
    let render = telemetry.prometheus_render().expect("the pull endpoint is the default exporter");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    let app =
        Router::new().route("/v1/ping", get(|| async { "pong" })).layer(pipetel::http::HttpMetricsLayer::enabled());
    runtime.spawn(async move { axum::serve(listener, app).await });
    assert_eq!(http("GET", &format!("http://{addr}/v1/ping")).expect("request"), (200, "pong".to_string()));

    let instruments = pipetel::http::ServerInstruments::new();
    let active = [KeyValue::new("url.scheme", "http"), KeyValue::new("http.request.method", "GET")];
    instruments.started(&active);
    let attributes = [
        KeyValue::new("network.protocol.name", "http"),
        KeyValue::new("network.protocol.version", "1.1"),
        KeyValue::new("url.scheme", "http"),
        KeyValue::new("http.request.method", "GET"),
        KeyValue::new("http.response.status_code", 200_i64),
        KeyValue::new("http.route", "/v1/ping"),
    ];
    instruments.finished(&active, &attributes, 0.002, Some(0), Some(4));

    let page = render.render();
    let counts: Vec<&str> =
        page.lines().filter(|l| l.starts_with("http_server_request_duration_seconds_count{")).collect();
    assert_eq!(counts.len(), 1, "one series expected:\n{page}");
    assert!(counts[0].ends_with(" 2"), "both requests in the layer's series: {}", counts[0]);
    assert!(counts[0].contains(r#"otel_scope_name="opentelemetry-instrumentation-tower""#), "{}", counts[0]);
    assert_eq!(page.matches("# TYPE http_server_request_duration_seconds histogram").count(), 1, "{page}");
    for bound in pipetel::http::DURATION_BUCKETS {
        assert!(
            page.lines().any(|l| l.starts_with("http_server_request_duration_seconds_bucket{")
                && l.contains(&format!("le=\"{bound}\""))),
            "no bucket le={bound}:\n{page}"
        );
    }
    let active_line = page
        .lines()
        .find(|l| l.starts_with("http_server_active_requests{"))
        .unwrap_or_else(|| panic!("no active requests:\n{page}"));
    assert!(active_line.ends_with(" 0"), "{active_line}");
    let response = page
        .lines()
        .find(|l| l.starts_with("http_server_response_body_size_bytes_count{"))
        .unwrap_or_else(|| panic!("no response body size:\n{page}"));
    assert!(response.ends_with(" 1") || response.ends_with(" 2"), "{response}");

    runtime.shutdown_timeout(Duration::from_secs(5));
    telemetry.shutdown().expect("shutdown");
}
