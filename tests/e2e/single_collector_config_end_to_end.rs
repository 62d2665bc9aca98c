//! `otel-collector/config.yaml`, unchanged, run by the real collector (`otelcol-pipetel`): the
//! pipeline example pushes OTLP gRPC to it; a real Prometheus scrapes its `prometheus` exporter
//! with the `otel-collector-exporter` job of `otel-collector/prometheus.yml` (`honor_labels`, so
//! `job` / `instance` come from the resource); its Tempo and Loki exporters point (through
//! `OTELCOL_TEMPO_ENDPOINT` / `OTELCOL_LOKI_URL`) at a second collector writing what it gets as
//! OTLP JSON. Stage and worker totals are exact in PromQL, each stage's trace keeps its shard
//! spans as children, and every row arrives as a log record with every field.

use std::time::Duration;

use crate::support::otlp_json::{assert_rows_arrived, rows_missing, Span};
use crate::support::pipeline_run::STAGES;
use crate::support::routes::exporter_job;
use crate::support::{turn_if_peers, wait_for, Otelcol, OtelcolSink, Peer, PipelineRun, Prometheus};

/// The stage span `stage <name>` and its children, once all `shards` have arrived.
fn stage_trace<'a>(spans: &'a [Span], stage: &str, shards: usize) -> Option<(&'a Span, Vec<&'a Span>)> {
    let span = spans.iter().find(|s| s.name == format!("stage {stage}"))?;
    let children: Vec<&Span> = spans.iter().filter(|s| s.parent_span_id == span.span_id).collect();
    (children.len() == shards).then_some((span, children))
}

#[test]
fn metrics_traces_and_rows_reach_prometheus_tempo_and_loki() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol, Peer::Prometheus]) else { return };
    let backend = OtelcolSink::start("backend");
    let collector = Otelcol::shipped("collector", "config.yaml").backends(&backend).start();
    let prometheus = Prometheus::start_scraping(&exporter_job(collector.env("OTELCOL_PROMETHEUS_ENDPOINT")));
    let run = PipelineRun::pushing(&collector.endpoint("grpc"), "grpc", &["--seconds", "2", "--shards", "4"]);

    // Metrics: exact totals, under the job and instance of the resource.
    run.assert_totals(&prometheus, 4, Duration::from_secs(30));
    let targets = prometheus.wait_until_up(Duration::from_secs(10));
    assert_eq!(targets[0]["lastError"], "", "{targets:?}");

    // Rows: every one a log record with every field (the batch processor holds them up to 5 s).
    let logs = wait_for("every row as a log record", Duration::from_secs(30), || {
        let logs = backend.logs();
        (rows_missing(&run.rows, &logs) == 0).then_some(logs)
    });
    assert_rows_arrived(&run.rows, &logs, &[]);
    let instance = logs[0].resource["service.instance.id"].as_str().expect("service.instance.id").to_string();
    assert_eq!(logs[0].resource["service.name"], "pipeline-example");
    let q = format!("pipeline_stage_items_total{{job=\"pipeline-example\",instance=\"{instance}\"}}");
    assert_eq!(prometheus.query(&q).expect("query").len(), 3, "instance is service.instance.id: {q}");
    let q = format!("target_info{{job=\"pipeline-example\",instance=\"{instance}\"}}");
    let info = prometheus.wait_for_value(&q, Duration::from_secs(10), |v| v == 1.0);
    assert!(info[0].0.contains_key("host_name"), "the other resource attributes are on target_info: {info:?}");

    // Traces: each stage span with its four shard spans as children, in one trace.
    let spans = wait_for("every stage span with its shards", Duration::from_secs(30), || {
        let spans = backend.spans();
        STAGES.iter().all(|s| stage_trace(&spans, s, 4).is_some()).then_some(spans)
    });
    for stage in STAGES {
        let (span, children) = stage_trace(&spans, stage, 4).expect("stage trace");
        assert!(children.iter().all(|c| c.trace_id == span.trace_id && c.name.starts_with("shard ")), "{children:?}");
        assert_eq!(span.status_code == 2, stage == "tokenize", "error status of {span:?}");
        assert_eq!(span.resource["service.name"], "pipeline-example");
    }
}
