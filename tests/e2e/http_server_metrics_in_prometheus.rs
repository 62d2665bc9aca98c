//! Real Prometheus scrapes the inference service example while its HTTP API, measured by
//! `pipetel::http`, serves a deterministic series of requests the example sends itself: the
//! request counts per route and status under the OTel semantic-convention names equal what the
//! example planned and printed, body sizes and durations are recorded for every request, no
//! request stays active, and `promtool check metrics` accepts the exposition.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{scrape_checked, serve_example, turn_if_peers, Peer, Prometheus};

const TASKS: usize = 50;
const REQUESTS: usize = 60;

/// The statuses of the `REQUESTS` self-driven `POST /v1/infer` calls, by the rules the example
/// documents: request `k` is malformed when `k % 20 == 19`, otherwise task `TASKS + k`, shed
/// when `% 25 == 7`, failed when `% 10 == 3`.
fn planned_statuses() -> BTreeMap<u16, usize> {
    let mut plan = BTreeMap::new();
    for k in 0..REQUESTS {
        let i = TASKS + k;
        let status = match () {
            _ if k % 20 == 19 => 400,
            _ if i % 25 == 7 => 503,
            _ if i % 10 == 3 => 500,
            _ => 200,
        };
        *plan.entry(status).or_insert(0) += 1;
    }
    plan
}

/// `status=count` pairs of the example's `http requests: <route> ...` line.
fn printed_counts(out: &str, route: &str) -> BTreeMap<u16, usize> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("http requests: {route} ")))
        .unwrap_or_else(|| panic!("no counts for {route} in:\n{out}"));
    line.split_whitespace()
        .map(|kv| {
            let (s, n) = kv.split_once('=').unwrap_or_else(|| panic!("not status=count: {kv:?}"));
            (s.parse().expect("a status"), n.parse().expect("a count"))
        })
        .collect()
}

#[test]
fn http_server_request_metrics_reach_prometheus_exactly() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Promtool]) else { return };
    let (mut example, port) = serve_example("inference_service", |cmd| {
        cmd.env_remove("PIPETEL_HTTP_METRICS")
            .args(["--seconds", "1", "--tasks", &TASKS.to_string(), "--linger-seconds", "60"])
            .args(["--http-port", "0", "--http-requests", &REQUESTS.to_string()])
    });
    let out = example.wait_for_output("done: ", Duration::from_secs(90));

    let infer = printed_counts(&out, "POST /v1/infer");
    let plan = planned_statuses();
    assert_eq!(infer, plan, "the example's counts differ from its documented plan:\n{out}");
    assert!([200, 400, 500, 503].iter().all(|s| plan.contains_key(s)), "the plan covers every status: {plan:?}");
    assert_eq!(printed_counts(&out, "GET /healthz"), BTreeMap::from([(200, 1)]));

    let prometheus = Prometheus::scraping_cleanly(port);

    let t = Duration::from_secs(20);
    let base = r#"http_request_method="POST",http_route="/v1/infer",url_scheme="http",network_protocol_version="1.1""#;
    for (status, count) in &infer {
        let selector = format!(r#"{base},http_response_status_code="{status}""#);
        prometheus.wait_for_value(&format!("http_server_request_duration_seconds_count{{{selector}}}"), t, |v| {
            v == *count as f64
        });
        // Every request sent a Content-Length, and every answer is a body of known length.
        prometheus.wait_for_value(&format!("http_server_request_body_size_bytes_count{{{selector}}}"), t, |v| {
            v == *count as f64
        });
        prometheus.wait_for_value(&format!("http_server_response_body_size_bytes_count{{{selector}}}"), t, |v| {
            v == *count as f64
        });
    }
    let total: usize = infer.values().sum();
    prometheus.wait_for_value(r#"sum(http_server_request_duration_seconds_count{http_route="/v1/infer"})"#, t, |v| {
        v == total as f64
    });
    prometheus.wait_for_value(
        r#"http_server_request_duration_seconds_count{http_request_method="GET",http_route="/healthz",http_response_status_code="200"}"#,
        t,
        |v| v == 1.0,
    );
    // A completed inference runs a task of at least 2 ms on a worker.
    let ok = format!(r#"{base},http_response_status_code="200""#);
    prometheus.wait_for_value(&format!("http_server_request_duration_seconds_sum{{{ok}}}"), t, |v| {
        v >= 0.002 * infer[&200] as f64
    });
    prometheus.wait_for_value(
        &format!(r#"histogram_quantile(0.5, http_server_request_duration_seconds_bucket{{{ok}}})"#),
        t,
        |v| v.is_finite() && v > 0.0,
    );
    // Each 400 body is the 8 bytes `not json`.
    let bad = format!(r#"{base},http_response_status_code="400""#);
    prometheus.wait_for_value(&format!("http_server_request_body_size_bytes_sum{{{bad}}}"), t, |v| {
        v == 8.0 * infer[&400] as f64
    });
    // Nothing in flight once the API stopped; both methods were seen.
    let active = prometheus.wait_for_value("http_server_active_requests", t, |v| v == 0.0);
    let methods: Vec<&str> = active.iter().map(|(l, _)| l["http_request_method"].as_str()).collect();
    assert!(methods.contains(&"POST") && methods.contains(&"GET"), "{active:?}");
    assert!(active.iter().all(|(l, _)| l["url_scheme"] == "http"), "{active:?}");
    // The API's tasks went through the same service metrics: shed ones count as cancelled,
    // failed ones as failed, malformed requests create no task.
    let synthetic = |rule: fn(usize) -> bool| (0..TASKS).filter(|&i| rule(i)).count();
    let shed = synthetic(|i| i % 25 == 7);
    let failed = synthetic(|i| i % 25 != 7 && i % 10 == 3);
    let expected = format!(
        "done: created={} completed={} failed={} cancelled={}",
        TASKS + total - infer[&400],
        TASKS - shed - failed + infer[&200],
        failed + infer[&500],
        shed + infer[&503]
    );
    assert!(out.lines().any(|l| l == expected), "expected {expected:?} in:\n{out}");

    let body = scrape_checked(&format!("127.0.0.1:{port}"));
    assert!(body.contains("# TYPE http_server_request_duration_seconds histogram"), "{body}");
    assert!(body.contains("# TYPE http_server_active_requests gauge"), "{body}");
    example.kill();
}
