//! The metric → trace link on the fleet's stores: the quickstart example serves its metrics on
//! the pull endpoint (exemplars travel only there: OTLP from `opentelemetry_sdk` carries none)
//! and pushes its traces over OTLP to a gateway running `otel-collector/gateway-stores.yaml`,
//! which stores them in Jaeger v2. Real Prometheus with exemplar storage scrapes the endpoint;
//! every exemplar it returns on a histogram bucket names a trace that Jaeger's query API
//! resolves, holding the exemplar's span. (The row → trace link, a row's trace id resolving in
//! Jaeger, is asserted by `fleet_stores_end_to_end`.)

use std::time::Duration;

use crate::support::stores::Stores;
use crate::support::workspace::quickstart_five_batches;
use crate::support::{serve_example, turn_if_peers, wait_for, Otelcol, Peer, Prometheus};

#[test]
fn histogram_exemplars_name_traces_that_resolve_in_jaeger() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Otelcol]) else { return };
    let Some(stores) = Stores::start(module_path!()) else { return };
    let mut gateway = Otelcol::shipped("gateway-stores", "gateway-stores.yaml");
    for (key, value) in stores.gateway_env() {
        gateway = gateway.env(key, value);
    }
    let gateway = gateway.start();
    let (mut example, port) = serve_example("quickstart", |cmd| {
        quickstart_five_batches(
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", gateway.endpoint("grpc"))
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env("OTEL_TRACES_EXPORTER", "otlp")
                .env("OTEL_METRICS_EXPORTER", "prometheus"),
        )
    });
    example.wait_for_output("done: batches=5", Duration::from_secs(60));

    let answer = Prometheus::scraping_exemplars_cleanly(port).wait_for_exemplars("span_duration_seconds_bucket");
    let mut resolved = 0;
    for series in answer["data"].as_array().into_iter().flatten() {
        for e in series["exemplars"].as_array().into_iter().flatten() {
            let (trace_id, span_id) = (e["labels"]["trace_id"].as_str(), e["labels"]["span_id"].as_str());
            let (Some(trace_id), Some(span_id)) = (trace_id, span_id) else { panic!("exemplar without ids: {e}") };
            let what = format!("the exemplar's span {span_id} of trace {trace_id} in Jaeger");
            let spans = wait_for(&what, Duration::from_secs(60), || {
                let spans = stores.traces.trace(trace_id).ok()??;
                spans.iter().any(|s| s["spanID"] == span_id).then_some(spans)
            });
            let name = spans.iter().find(|s| s["spanID"] == span_id).map(|s| s["operationName"].clone());
            assert_eq!(
                name.as_ref().and_then(|n| n.as_str()),
                series["seriesLabels"]["span_name"].as_str(),
                "the exemplar's span in Jaeger is not the span its bucket measures: {series}"
            );
            resolved += 1;
        }
    }
    assert!(resolved > 0, "no exemplar with ids: {answer}");
    eprintln!("{resolved} exemplars resolved to their spans in Jaeger");
    example.kill();
}
