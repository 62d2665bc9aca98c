//! The OTel SDK spec's settings as the real OpenTelemetry Collector receives them:
//! `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta` gives delta sums and histograms (the
//! default stays cumulative); `OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION` gives
//! exponential histograms; the resource keeps what the user gave in `OTEL_RESOURCE_ATTRIBUTES`
//! over what pipetel detects, carries the Kubernetes downward-API attributes, the OTel SDK's
//! version and the instance id `PIPETEL_INSTANCE_ID` makes. Each case is one `init`, in a child
//! process of this binary, configured through the environment as a user would.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the test is skipped loudly, or
//! fails under `PIPETEL_REQUIRE_PEERS=1`.
#![cfg(feature = "otlp")]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::{collector, free_port, init_child, peers_available, print_flush_and_shutdown, run_child, scratch, Peer};

const CHILD: &str = "PIPETEL_TEST_SPEC_CASE";

/// Set up from the environment; add to a counter named after the case and record a histogram,
/// exporting twice; print the pid; flush and shut down.
#[test]
#[ignore = "a scenario its test runs in a child process (support::child::run_child)"]
fn child_exports_a_counter_and_a_histogram() {
    let Some((case, telemetry)) = init_child(CHILD) else { return };
    let meter = pipetel::meter();
    let counter = meter.u64_counter(format!("spec.{case}.requests")).build();
    let histogram = meter.f64_histogram(format!("spec.{case}.latency")).with_unit("s").build();
    for _ in 0..2 {
        counter.add(3, &[]);
        histogram.record(0.25, &[]);
        histogram.record(1.5, &[]);
        telemetry.force_flush().expect("flush");
    }
    println!("PID={}", std::process::id());
    print_flush_and_shutdown(telemetry);
}

/// One metric as received: its data kind (`sum`, `histogram`, `exponentialHistogram`), its
/// temporality, and its resource's string attributes.
#[derive(Debug)]
struct Received {
    kind: String,
    temporality: Option<i64>,
    resource: BTreeMap<String, String>,
}

/// Every export of metric `name` found in the collector's file, in order.
fn received(text: &str, name: &str) -> Vec<Received> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        for rm in doc["resourceMetrics"].as_array().into_iter().flatten() {
            let mut resource = BTreeMap::new();
            for attr in rm["resource"]["attributes"].as_array().into_iter().flatten() {
                let value = &attr["value"];
                let text = value["stringValue"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| value["intValue"].as_str().map(str::to_string))
                    .or_else(|| value["intValue"].as_i64().map(|i| i.to_string()))
                    .unwrap_or_default();
                resource.insert(attr["key"].as_str().unwrap_or_default().to_string(), text);
            }
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for metric in sm["metrics"].as_array().into_iter().flatten() {
                    if metric["name"] != name {
                        continue;
                    }
                    for kind in ["sum", "histogram", "exponentialHistogram", "gauge"] {
                        if metric.get(kind).is_some() {
                            let temporality = metric[kind]["aggregationTemporality"].as_i64();
                            out.push(Received { kind: kind.to_string(), temporality, resource: resource.clone() });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Runs `case` against a fresh collector with `env` and returns what it received of the case's
/// counter and histogram, and the child's pid.
fn run_case(case: &str, env: &[(&str, &str)]) -> Option<(Vec<Received>, Vec<Received>, String)> {
    if !peers_available(&[Peer::Otelcol]) {
        return None;
    }
    let dir = scratch(&format!("spec-{case}"));
    let port = free_port();
    let collector = collector("plain.yaml", &dir, &[("PIPETEL_TEST_HTTP_PORT".into(), port.to_string())]);
    let mut vars = vec![
        (CHILD.to_string(), case.to_string()),
        ("OTEL_METRICS_EXPORTER".to_string(), "otlp".to_string()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".to_string(), "http/protobuf".to_string()),
        ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), format!("http://127.0.0.1:{port}")),
        ("OTEL_TRACES_EXPORTER".to_string(), "none".to_string()),
        ("OTEL_LOGS_EXPORTER".to_string(), "none".to_string()),
        ("PIPETEL_CONSOLE_LOG".to_string(), "false".to_string()),
    ];
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let child = run_child("child_exports_a_counter_and_a_histogram", &vars, Duration::from_secs(60));
    assert!(child.success, "child failed:\n{}\n{}", child.stdout, child.stderr);
    assert_eq!(child.value("FLUSH"), Some("ok"), "{}", child.stdout);
    let counter = format!("spec.{case}.requests");
    let histogram = format!("spec.{case}.latency");
    let text = collector
        .wait_for_exported(Duration::from_secs(10), |t| {
            !received(t, &counter).is_empty() && !received(t, &histogram).is_empty()
        })
        .unwrap_or_else(|t| {
            panic!("the collector did not receive {counter} and {histogram}:\n{t}\n{}", collector.output())
        });
    Some((received(&text, &counter), received(&text, &histogram), child.value("PID").unwrap_or_default().to_string()))
}

/// OTLP's `AGGREGATION_TEMPORALITY_DELTA` and `_CUMULATIVE`.
const DELTA: i64 = 1;
const CUMULATIVE: i64 = 2;

#[test]
fn delta_temporality_reaches_the_collector() {
    let Some((counter, histogram, _)) =
        run_case("delta", &[("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta")])
    else {
        return;
    };
    assert!(counter.iter().all(|r| r.kind == "sum" && r.temporality == Some(DELTA)), "{counter:?}");
    assert!(histogram.iter().all(|r| r.kind == "histogram" && r.temporality == Some(DELTA)), "{histogram:?}");
}

#[test]
fn cumulative_is_the_default_and_the_instance_id_recipe_applies() {
    let Some((counter, histogram, pid)) = run_case("cumulative", &[("PIPETEL_INSTANCE_ID", "worker-{pid}")]) else {
        return;
    };
    assert!(counter.iter().all(|r| r.temporality == Some(CUMULATIVE)), "{counter:?}");
    assert!(histogram.iter().all(|r| r.kind == "histogram" && r.temporality == Some(CUMULATIVE)), "{histogram:?}");
    let resource = &counter[0].resource;
    assert_eq!(resource.get("service.instance.id").map(String::as_str), Some(format!("worker-{pid}").as_str()));
    assert!(resource.get("telemetry.sdk.version").is_some_and(|v| v.starts_with("0.33.")), "{resource:?}");
    assert_eq!(resource.get("telemetry.distro.name").map(String::as_str), Some("pipetel"));
}

#[test]
fn exponential_histograms_reach_the_collector() {
    let Some((counter, histogram, _)) = run_case(
        "exponential",
        &[("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram")],
    ) else {
        return;
    };
    assert!(histogram.iter().all(|r| r.kind == "exponentialHistogram"), "{histogram:?}");
    assert!(counter.iter().all(|r| r.kind == "sum"), "counters keep their aggregation: {counter:?}");
}

#[test]
fn user_resource_attributes_win_and_kubernetes_attributes_arrive() {
    let Some((counter, _, pid)) = run_case(
        "resource",
        &[
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.instance.id=given-instance,host.name=given-host,deployment.environment=prod",
            ),
            ("OTEL_SERVICE_NAME", "tokenize"),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("K8S_POD_NAME", "tokenize-7d9f"),
            ("K8S_NAMESPACE_NAME", "ml"),
            ("K8S_NODE_NAME", "node-3"),
            ("K8S_POD_UID", "0b5a1c2d"),
            ("K8S_CONTAINER_NAME", "worker"),
        ],
    ) else {
        return;
    };
    let resource = &counter[0].resource;
    let get = |k: &str| resource.get(k).map(String::as_str);
    assert_eq!(get("service.instance.id"), Some("given-instance"), "{resource:?}");
    assert_eq!(get("host.name"), Some("given-host"));
    assert_eq!(get("deployment.environment"), Some("prod"));
    assert_eq!(get("service.name"), Some("tokenize"));
    assert_eq!(get("process.pid"), Some(pid.as_str()), "detected attributes the user did not give stay");
    assert_eq!(get("k8s.pod.name"), Some("tokenize-7d9f"));
    assert_eq!(get("k8s.namespace.name"), Some("ml"));
    assert_eq!(get("k8s.node.name"), Some("node-3"));
    assert_eq!(get("k8s.pod.uid"), Some("0b5a1c2d"));
    assert_eq!(get("k8s.container.name"), Some("worker"));
}
