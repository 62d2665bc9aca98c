//! `PIPETEL_HTTP_METRICS=false` makes `pipetel::http::layer()` the identity: an axum API served
//! through it answers as usual and the exposition holds no `http_server_*` series, while the
//! same API behind an enabled layer in the same process does produce them (so the check can
//! fail). Runs in-process, without external servers.

// Its own test binary: it calls `pipetel::init`, which a process does once, and sets an
// environment variable no other test may read meanwhile.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use support::{free_port, http};

/// Serves `app` on a free loopback port of `runtime`; returns its base URL.
fn serve(runtime: &tokio::runtime::Runtime, app: Router) -> String {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address");
    runtime.spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// An API whose handler counts its calls, so the test sees the request was served.
fn api(calls: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/v1/ping",
        get(move || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                "pong"
            }
        }),
    )
}

#[test]
fn switched_off_http_metrics_yield_no_series() {
    // The only test in this binary: no other thread reads the environment while it changes.
    std::env::set_var("PIPETEL_HTTP_METRICS", "false");
    let config = pipetel::Config::from_env()
        .expect("configuration from the environment")
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(free_port());
    assert!(!config.service_metrics().http_metrics, "PIPETEL_HTTP_METRICS=false was not read");
    let telemetry = pipetel::init(config).expect("init");
    let render = telemetry.prometheus_render().expect("the pull endpoint is the default exporter");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");

    let layer = pipetel::http::layer().expect("layer from the environment");
    assert!(!layer.is_enabled());
    let off_calls = Arc::new(AtomicUsize::new(0));
    let off = serve(&runtime, api(off_calls.clone()).layer(layer));
    for _ in 0..5 {
        assert_eq!(http("GET", &format!("{off}/v1/ping")).expect("request"), (200, "pong".to_string()));
    }
    assert_eq!(off_calls.load(Ordering::SeqCst), 5);
    let exposition = render.render();
    // By line start: the resource's `service.name` holds this test's name, which says `http_server`.
    let http_lines: Vec<&str> =
        exposition.lines().filter(|l| l.starts_with("http_") || l.starts_with("# TYPE http_")).collect();
    assert!(http_lines.is_empty(), "HTTP series although switched off: {http_lines:?}");
    assert!(exposition.contains("target_info"), "the exposition is not empty otherwise:\n{exposition}");

    // The control: the same API behind an enabled layer is measured by the same provider.
    let on_calls = Arc::new(AtomicUsize::new(0));
    let on = serve(&runtime, api(on_calls.clone()).layer(pipetel::http::HttpMetricsLayer::enabled()));
    for _ in 0..3 {
        assert_eq!(http("GET", &format!("{on}/v1/ping")).expect("request"), (200, "pong".to_string()));
    }
    assert_eq!(on_calls.load(Ordering::SeqCst), 3);
    let exposition = render.render();
    let count = exposition
        .lines()
        .find(|l| {
            l.starts_with("http_server_request_duration_seconds_count{")
                && l.contains(r#"http_route="/v1/ping""#)
                && l.contains(r#"http_response_status_code="200""#)
                && l.contains(r#"url_scheme="http""#)
        })
        .unwrap_or_else(|| panic!("no duration count for /v1/ping:\n{exposition}"));
    assert!(count.ends_with(" 3"), "{count}");

    runtime.shutdown_timeout(Duration::from_secs(5));
    telemetry.shutdown().expect("shutdown");
}
