//! Profiles reach the real OpenTelemetry Collector as the OTLP profiles signal: the lines the
//! profiler aggregates, sent by `pipetel::testing::export_profiles` (what the profiler calls after
//! each window) over HTTP/protobuf and over gRPC, are decoded by the collector (v0.161.0, its
//! `service.profilesSupport` gate on) and written by its file exporter; the test reads the
//! stacks back through the request's dictionary: function names root first, sample counts, the
//! stage, shard and phase attributes, the link to the shard span, the period and the resource.
//! A collector without a profiles pipeline, or none at all, is an error naming the endpoint.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the collector cases are
//! skipped loudly, or fail under `PIPETEL_REQUIRE_PEERS=1`.
#![cfg(feature = "otlp")]

mod support;

use std::time::{Duration, Instant};

use pipetel::config::{OtlpProtocol, Signal};
use pipetel::opentelemetry::KeyValue;
use pipetel::opentelemetry_sdk::Resource;
use pipetel::testing::export_profiles;
use pipetel::Config;
use pipetel_rows::profile::ProfileLine;
use support::profiles::{attrs, received};
use support::{collector, free_port, peers_available, scratch, Peer};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN: &str = "00f067aa0ba902b7";

/// Three stacks of two shards of one stage, a phase on one, and one thread outside any shard.
fn lines() -> Vec<ProfileLine> {
    let line = |shard: Option<u32>, phase: Option<&str>, samples: u64, stack: &[&str]| ProfileLine {
        timestamp_ms: 1_767_225_600_000,
        host: "profiled-host".into(),
        pid: 4242,
        stage: shard.map(|_| "tokenize".into()),
        execution: shard.map(|_| "exec-7".into()),
        shard,
        phase: phase.map(str::to_string),
        trace_id: shard.map(|_| TRACE.into()),
        span_id: shard.map(|_| SPAN.into()),
        language: "rust".into(),
        period_ns: 10_101_010,
        samples,
        stack: stack.iter().map(|s| s.to_string()).collect(),
    };
    vec![
        line(Some(0), Some("decode"), 37, &["main", "pipeline::run", "tokenize::split", "memchr::memchr"]),
        line(Some(1), None, 5, &["main", "pipeline::run", "tokenize::normalize"]),
        line(Some(1), Some("decode"), 11, &["main", "pipeline::run", "tokenize::split", "memchr::memchr"]),
        line(None, None, 2, &["std::thread::park"]),
    ]
}

fn resource() -> Resource {
    Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", "profiled-service"),
            KeyValue::new("host.name", "profiled-host"),
            KeyValue::new("process.pid", 4242_i64),
        ])
        .build()
}

/// Exports [`lines`] with `config`, then checks every sample the collector wrote.
fn exported_and_received(config: Config, collector: &support::Otelcol, how: &str) {
    let started = Instant::now();
    export_profiles(&config, &resource(), &lines()).unwrap_or_else(|e| panic!("{how}: {e}"));
    assert!(started.elapsed() < Duration::from_secs(10), "{how}: took {:?}", started.elapsed());
    let text = collector
        .wait_for_exported(Duration::from_secs(15), |t| received(t).len() >= 4)
        .unwrap_or_else(|t| panic!("{how}: the collector wrote no profile with 4 samples; it wrote:\n{t}"));
    let mut got = received(&text);
    got.sort_by_key(|r| std::cmp::Reverse(r.values.clone()));
    let stacks: Vec<(Vec<&str>, Vec<i64>)> =
        got.iter().map(|r| (r.stack.iter().map(String::as_str).collect(), r.values.clone())).collect();
    assert_eq!(
        stacks,
        [
            (vec!["main", "pipeline::run", "tokenize::split", "memchr::memchr"], vec![37]),
            (vec!["main", "pipeline::run", "tokenize::split", "memchr::memchr"], vec![11]),
            (vec!["main", "pipeline::run", "tokenize::normalize"], vec![5]),
            (vec!["std::thread::park"], vec![2]),
        ],
        "{how}: stacks and counts as received:\n{text}"
    );
    let shard = |index: &str, phase: Option<&str>| {
        let mut a = vec![
            ("pipeline.stage.name", "tokenize"),
            ("pipeline.execution.id", "exec-7"),
            ("pipeline.shard.index", index),
            ("profile.language", "rust"),
        ];
        a.extend(phase.map(|p| ("pipeline.phase", p)));
        attrs(&a)
    };
    assert_eq!(got[0].attributes, shard("0", Some("decode")), "{how}");
    assert_eq!(got[1].attributes, shard("1", Some("decode")), "{how}");
    assert_eq!(got[2].attributes, shard("1", None), "{how}");
    assert_eq!(got[3].attributes, attrs(&[("profile.language", "rust")]), "{how}: a thread outside any shard");
    let link = Some((TRACE.to_string(), SPAN.to_string()));
    assert!(got[..3].iter().all(|r| r.link == link), "{how}: shard samples link their span: {got:#?}");
    assert_eq!(got[3].link, None, "{how}");
    for r in &got {
        assert_eq!(r.sample_type, ("samples".into(), "count".into()), "{how}");
        assert_eq!(r.period_type, ("cpu".into(), "nanoseconds".into()), "{how}");
        assert_eq!(r.period, 10_101_010, "{how}");
        assert_eq!((r.service.as_str(), r.scope.as_str()), ("profiled-service", "pipetel"), "{how}");
    }
}

#[test]
fn profiles_reach_the_collector_over_http_and_grpc() {
    if !peers_available(&[Peer::Otelcol]) {
        return;
    }
    for (protocol, name) in [(OtlpProtocol::HttpProtobuf, "http/protobuf"), (OtlpProtocol::Grpc, "grpc")] {
        let dir = scratch(&format!("profiles-{}", name.replace('/', "-")));
        let collector = collector("profiles.yaml", &dir, &[]);
        // The generic endpoint: `/v1development/profiles` is appended for HTTP.
        let config = Config::default().with_otlp_endpoint(collector.endpoint(name)).with_otlp_protocol(protocol);
        exported_and_received(config, &collector, name);
        drop(collector);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_profiles_own_endpoint_is_used_as_given() {
    if !peers_available(&[Peer::Otelcol]) {
        return;
    }
    let dir = scratch("profiles-own-endpoint");
    let collector = collector("profiles.yaml", &dir, &[]);
    let url = format!("{}/v1development/profiles", collector.endpoint("http/protobuf"));
    let config = Config::default().with_otlp_signal_endpoint(Signal::Profiles, url);
    exported_and_received(config, &collector, "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
    drop(collector);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_collector_without_a_profiles_pipeline_is_an_error_naming_it() {
    if !peers_available(&[Peer::Otelcol]) {
        return;
    }
    let dir = scratch("profiles-no-pipeline");
    // Metrics only: the receiver has no profiles consumer.
    let collector = collector("all_signals.yaml", &dir, &[("PIPETEL_TEST_HTTP_PORT".into(), free_port().to_string())]);
    let port = collector.env("PIPETEL_TEST_HTTP_PORT").to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let err = export_profiles(&Config::default().with_otlp_endpoint(&endpoint), &resource(), &lines())
        .expect_err("a collector that takes no profiles");
    assert!(err.contains(&format!("{endpoint}/v1development/profiles")), "{err}");
    assert!(err.contains("404"), "the collector's answer: {err}");
    drop(collector);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_collector_is_an_error_within_the_timeout() {
    // Nothing listens on the port.
    for (protocol, name) in [(OtlpProtocol::HttpProtobuf, "http/protobuf"), (OtlpProtocol::Grpc, "grpc")] {
        let endpoint = format!("http://127.0.0.1:{}", free_port());
        let config = Config::default()
            .with_otlp_endpoint(&endpoint)
            .with_otlp_protocol(protocol)
            .with_otlp_timeout(Duration::from_secs(2));
        let started = Instant::now();
        let err = export_profiles(&config, &resource(), &lines()).expect_err(name);
        assert!(started.elapsed() < Duration::from_secs(5), "{name}: {:?}", started.elapsed());
        assert!(err.contains(&endpoint), "{name}: the error names the endpoint: {err}");
        assert!(err.to_lowercase().contains("connect"), "{name}: the error says why: {err}");
    }
}

#[test]
fn no_endpoint_for_profiles_sends_nothing() {
    // Another signal's endpoint does not apply to profiles, nor does the default one.
    let config = Config::default().with_otlp_signal_endpoint(Signal::Traces, "http://127.0.0.1:1/v1/traces");
    let err = export_profiles(&config, &resource(), &lines()).expect_err("no endpoint");
    assert!(err.contains("no OTLP endpoint applies to profiles"), "{err}");
}
