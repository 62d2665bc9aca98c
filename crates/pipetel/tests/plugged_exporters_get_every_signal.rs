//! An application plugs its own span, log and metric exporters into `init` instead of the
//! built-in ones (the configured exporters are `none`): its spans, its events as log records,
//! and pipetel's stage metrics and rows reach them, and the guard's flush reaches them.
//! Its own test binary: `init` is once per process.

use opentelemetry_sdk::logs::InMemoryLogExporter;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::InMemoryMetricExporter;
use opentelemetry_sdk::trace::InMemorySpanExporter;
use pipetel::{Config, InitOptions};

#[tracing::instrument]
fn tokenize(n: u64) -> u64 {
    tracing::info!(n, "tokenized a batch");
    n * 2
}

#[test]
fn plugged_exporters_receive_spans_logs_and_pipetel_metrics() {
    let spans = InMemorySpanExporter::default();
    let logs = InMemoryLogExporter::default();
    let metrics = InMemoryMetricExporter::default();
    let config = Config::default()
        .with_service_name("plugged")
        .with_traces_exporters([])
        .with_logs_exporters([])
        .with_metrics_exporters([])
        .with_rows(false);
    let options = InitOptions::new()
        .with_span_exporter(spans.clone())
        .with_log_exporter(logs.clone())
        .with_metric_exporter(metrics.clone());
    let telemetry = pipetel::init_with(config, options).expect("init");

    assert_eq!(tokenize(21), 42);
    let stage = pipetel::stage("plugged_stage").shards(1).start();
    let shard = stage.shard(0).start();
    shard.record(7, 700);
    shard.finish();
    stage.finish();
    // Read before the guard drops: the in-memory exporters forget at shutdown.
    telemetry.force_flush().expect("flush");

    let names: Vec<String> =
        spans.get_finished_spans().expect("spans").into_iter().map(|s| s.name.into_owned()).collect();
    assert!(names.iter().any(|n| n == "tokenize"), "spans: {names:?}");
    assert!(names.iter().any(|n| n.contains("plugged_stage")), "the stage's span: {names:?}");

    let bodies: Vec<String> = logs
        .get_emitted_logs()
        .expect("logs")
        .into_iter()
        .filter_map(|l| l.record.body().map(|b| format!("{b:?}")))
        .collect();
    assert!(bodies.iter().any(|b| b.contains("tokenized a batch")), "log records: {bodies:?}");

    let exported = metrics.get_finished_metrics().expect("metrics");
    let mut stage_items = None;
    for rm in &exported {
        for scope in rm.scope_metrics() {
            for metric in scope.metrics() {
                if metric.name() != "pipeline.stage.items" {
                    continue;
                }
                if let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() {
                    stage_items = sum.data_points().map(|p| p.value()).max();
                }
            }
        }
    }
    assert_eq!(stage_items, Some(7), "pipeline.stage.items as the plugged exporter received it");
    drop(telemetry);
}
