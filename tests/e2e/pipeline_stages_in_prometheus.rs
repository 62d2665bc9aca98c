//! Real Prometheus scrapes the pipeline example: per-stage and per-shard series with the right
//! labels and values after the run, the failing shard and stage visible, promtool-clean output.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{scrape_checked, serve_example, turn_if_peers, Peer, Prometheus};

/// Items per stage, from the table the example prints at the end.
fn printed_items(out: &str) -> BTreeMap<String, (String, f64)> {
    out.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let name = *cols.first()?;
            if !["download", "tokenize", "index"].contains(&name) || cols.len() < 3 {
                return None;
            }
            Some((name.to_string(), (cols[1].to_string(), cols[2].parse::<f64>().ok()?)))
        })
        .collect()
}

#[test]
fn stage_and_worker_series_match_the_run() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Promtool]) else { return };
    let (mut example, port) = serve_example("pipeline", |cmd| {
        cmd.env("PIPETEL_SAMPLE_INTERVAL", "500").args(["--seconds", "2", "--linger-seconds", "60"])
    });
    let pid = example.id();
    let out = example.wait_for_output("done: stages=3", Duration::from_secs(60));
    let items = printed_items(&out);
    assert_eq!(items.len(), 3, "{out}");
    assert_eq!(items["tokenize"].0, "failed", "{out}");
    assert_eq!(items["download"].0, "succeeded", "{out}");

    let prometheus = Prometheus::scraping_cleanly(port);

    let exec = format!("run-{pid}");
    for (stage, (_, total)) in &items {
        let q = format!("pipeline_stage_items_total{{pipeline_stage_name=\"{stage}\",pipeline_execution_id=\"{exec}\",pipeline_namespace=\"pipeline.stage\"}}");
        prometheus.wait_for_value(&q, Duration::from_secs(20), |v| v == *total);
        let q = format!("sum(pipeline_worker_items_total{{pipeline_stage_name=\"{stage}\",pipeline_namespace=\"pipeline.worker\"}})");
        prometheus.wait_for_value(&q, Duration::from_secs(10), |v| v == *total);
        let q = format!("pipeline_stage_bytes_total{{pipeline_stage_name=\"{stage}\"}}");
        prometheus.wait_for_value(&q, Duration::from_secs(10), |v| v == total * 512.0);
    }
    let total_items: f64 = items.values().map(|(_, i)| i).sum();
    let t = Duration::from_secs(10);
    prometheus.wait_for_values(
        [
            // 3 stages × 8 shards, each its own series.
            ("count(pipeline_worker_items_total)", 24.0),
            // The failing shard stopped at batch 10 of 64 items.
            ("pipeline_worker_items_total{pipeline_stage_name=\"tokenize\",pipeline_shard_index=\"3\"}", 640.0),
            ("pipeline_stage_shards{pipeline_stage_name=\"tokenize\",pipeline_shard_state=\"failed\"}", 1.0),
            ("pipeline_stage_shards{pipeline_stage_name=\"tokenize\",pipeline_shard_state=\"done\"}", 7.0),
            ("pipeline_stage_runs_total{pipeline_status=\"failed\"}", 1.0),
            ("sum(pipeline_stage_runs_total{pipeline_status=\"succeeded\"})", 2.0),
            ("sum(pipeline_stage_active)", 0.0),
            ("pipeline_stage_duration_seconds_count{pipeline_stage_name=\"index\"}", 1.0),
            ("pipeline_stage_errors_total{pipeline_stage_name=\"tokenize\"}", 2.0),
            // Worker gauges from the samples.
            ("count(pipeline_worker_memory_peak_bytes)", 24.0),
            // Span-derived metrics of the #[instrument]ed shard function and pipetel's own spans.
            ("span_duration_seconds_count{span_name=\"run_shard\",status=\"ok\"}", 24.0),
            ("span_duration_seconds_count{span_name=\"pipeline.shard\",status=\"error\"}", 1.0),
            ("span_duration_seconds_count{span_name=\"pipeline.stage\",status=\"error\"}", 1.0),
            // The measured batch function's in-flight and duration metrics.
            ("function_in_flight{function=\"process\"}", 0.0),
            ("function_duration_seconds_count{function=\"process\"}", total_items / 64.0),
        ],
        t,
    );
    prometheus.wait_for_value("min(pipeline_worker_heartbeat_seconds)", t, |v| v > 1.7e9);
    prometheus.wait_for_value("count(pipeline_worker_cpu_time_seconds_total > 0)", t, |v| v >= 20.0);
    let batches = prometheus.wait_for_value(
        "function_calls_total{function=\"process\",module=\"pipeline\",stage=\"synthetic\"}",
        t,
        |v| v > 0.0,
    );
    assert_eq!(batches[0].1, total_items / 64.0, "one measured call per recorded batch");

    scrape_checked(&format!("127.0.0.1:{port}"));
}
