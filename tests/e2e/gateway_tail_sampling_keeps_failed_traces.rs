//! `otel-collector/gateway.yaml`'s tail sampling, run by the real collector with only its
//! decision wait shortened (`OTELCOL_TAIL_SAMPLING_DECISION_WAIT=2s`; the share of other traces
//! kept is the shipped 10 %): the pipeline example (one shard fails, so its stage's trace has
//! ERROR spans) and the quickstart (many healthy traces, random trace ids from the SDK) push to
//! the gateway, which sends traces and logs to a backend collector writing OTLP JSON. The failed
//! stage's whole trace always arrives, with its healthy shard spans; most healthy traces do not,
//! and those that do arrive whole; logs are not sampled, so every row and event arrives.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::otlp_json::{assert_rows_arrived, rows_missing, LogRecord, Span};
use crate::support::{example_pushing, turn_if_peers, wait_for, Otelcol, OtelcolSink, Peer, PipelineRun, Process};

/// Healthy traces the quickstart makes: one per batch, three spans each.
const HEALTHY: usize = 60;

/// The failed stage's trace once its stage span and four shard spans are in.
fn failed_trace(spans: &[Span]) -> Option<Vec<&Span>> {
    let stage = spans.iter().find(|s| s.name == "stage tokenize")?;
    let trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == stage.trace_id).collect();
    (trace.iter().filter(|s| s.parent_span_id == stage.span_id).count() == 4).then_some(trace)
}

/// The quickstart's "batch done" events.
fn batch_events(logs: &[LogRecord]) -> usize {
    logs.iter()
        .filter(|l| l.resource.get("service.name").is_some_and(|n| n == "quickstart") && l.body == "batch done")
        .count()
}

#[test]
fn a_failed_shards_whole_trace_arrives_and_most_healthy_traces_do_not() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol]) else { return };
    let backend = OtelcolSink::start("backend");
    let gateway = Otelcol::shipped("gateway", "gateway.yaml")
        .backends(&backend)
        .env("OTELCOL_TAIL_SAMPLING_DECISION_WAIT", "2s")
        .start();

    let mut quickstart = example_pushing("quickstart", &gateway.endpoint("http/protobuf"), "http/protobuf");
    quickstart.env("OTEL_METRICS_EXPORTER", "none").args(["--batches", &HEALTHY.to_string(), "--interval-ms", "5"]);
    let mut quickstart = Process::spawn("quickstart", quickstart);
    let run =
        PipelineRun::pushing(&gateway.endpoint("http/protobuf"), "http/protobuf", &["--seconds", "1", "--shards", "4"]);
    let (code, out) = quickstart.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");

    // Logs are not sampled: every row and every quickstart event arrives.
    wait_for("every row and event as a log record", Duration::from_secs(30), || {
        let logs = backend.logs();
        (rows_missing(&run.rows, &logs) == 0 && batch_events(&logs) >= HEALTHY).then_some(())
    });
    // The failed stage's trace arrives; then let every other decision (2 s after a trace's
    // first span) and the gateway's batch (up to 5 s) pass before counting.
    wait_for("the failed stage's trace", Duration::from_secs(30), || failed_trace(&backend.spans()).map(|_| ()));
    std::thread::sleep(Duration::from_secs(8));
    let spans = backend.spans();
    let logs = backend.logs();
    assert_rows_arrived(&run.rows, &logs, &["pipetel.gateway"]);
    assert_eq!(batch_events(&logs), HEALTHY, "each quickstart event once");

    let failed = failed_trace(&spans).expect("the failed trace");
    assert_eq!(failed.len(), 5, "the stage span and its four shard spans: {failed:#?}");
    let stage = failed.iter().find(|s| s.name == "stage tokenize").expect("stage span");
    assert_eq!(stage.status_code, 2, "{stage:?}");
    for shard in failed.iter().filter(|s| s.parent_span_id == stage.span_id) {
        let index = shard.attributes.get("pipeline.shard.index").and_then(|v| v.as_i64());
        assert_eq!(shard.status_code == 2, index == Some(3), "only shard 3 failed: {shard:?}");
        assert_eq!(shard.attributes.get("pipetel.gateway").and_then(|v| v.as_str()), Some("gateway"), "{shard:?}");
    }

    let kept: BTreeSet<&str> = spans.iter().filter(|s| s.name == "run_batch").map(|s| s.trace_id.as_str()).collect();
    for trace in &kept {
        let n = spans.iter().filter(|s| s.trace_id == *trace).count();
        assert_eq!(n, 3, "a kept healthy trace arrives whole (run_batch, tokenize, index): {trace}");
    }
    eprintln!("kept {} of {HEALTHY} healthy quickstart traces (10 % expected)", kept.len());
    assert!(
        kept.len() <= HEALTHY / 2,
        "{} of {HEALTHY} healthy traces kept at the shipped 10 %: the gateway is not sampling",
        kept.len()
    );
}
