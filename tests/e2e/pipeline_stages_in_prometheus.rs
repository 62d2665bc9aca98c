//! Real Prometheus scrapes the pipeline example: per-stage and per-shard series with the right
//! labels and values after the run, the failing shard and stage visible, promtool-clean output.
#![cfg(feature = "e2e")]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use pipetel_e2e::{example_path, free_port, http, promtool_check_metrics, Process, Prometheus};

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
    let port = free_port();
    let mut cmd = Command::new(example_path("pipeline"));
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", port.to_string())
        .env("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
        .env("PIPETEL_SAMPLE_INTERVAL", "500")
        .args(["--seconds", "2", "--linger-seconds", "60"]);
    let mut example = Process::spawn("pipeline", cmd);
    let pid = example.id();
    let out = example.wait_for_output("done: stages=3", Duration::from_secs(60));
    let items = printed_items(&out);
    assert_eq!(items.len(), 3, "{out}");
    assert_eq!(items["tokenize"].0, "failed", "{out}");
    assert_eq!(items["download"].0, "succeeded", "{out}");

    let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")], "/metrics");
    let targets = prometheus.wait_until_up(Duration::from_secs(30));
    assert_eq!(targets[0]["lastError"], "", "{targets:?}");

    let exec = format!("run-{pid}");
    for (stage, (_, total)) in &items {
        let q = format!("pipeline_stage_items_total{{pipeline_stage_name=\"{stage}\",pipeline_execution_id=\"{exec}\",pipeline_namespace=\"pipeline.stage\"}}");
        prometheus.wait_for_value(&q, Duration::from_secs(20), |v| v == *total);
        let q = format!("sum(pipeline_worker_items_total{{pipeline_stage_name=\"{stage}\",pipeline_namespace=\"pipeline.worker\"}})");
        prometheus.wait_for_value(&q, Duration::from_secs(10), |v| v == *total);
        let q = format!("pipeline_stage_bytes_total{{pipeline_stage_name=\"{stage}\"}}");
        prometheus.wait_for_value(&q, Duration::from_secs(10), |v| v == total * 512.0);
    }
    // 3 stages × 8 shards, each its own series.
    prometheus.wait_for_value("count(pipeline_worker_items_total)", Duration::from_secs(10), |v| v == 24.0);
    // The failing shard stopped at batch 10 of 64 items.
    prometheus.wait_for_value(
        "pipeline_worker_items_total{pipeline_stage_name=\"tokenize\",pipeline_shard_index=\"3\"}",
        Duration::from_secs(10),
        |v| v == 640.0,
    );
    prometheus.wait_for_value(
        "pipeline_stage_shards{pipeline_stage_name=\"tokenize\",pipeline_shard_state=\"failed\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
    );
    prometheus.wait_for_value(
        "pipeline_stage_shards{pipeline_stage_name=\"tokenize\",pipeline_shard_state=\"done\"}",
        Duration::from_secs(10),
        |v| v == 7.0,
    );
    prometheus
        .wait_for_value("pipeline_stage_runs_total{pipeline_status=\"failed\"}", Duration::from_secs(10), |v| v == 1.0);
    prometheus.wait_for_value(
        "sum(pipeline_stage_runs_total{pipeline_status=\"succeeded\"})",
        Duration::from_secs(10),
        |v| v == 2.0,
    );
    prometheus.wait_for_value("sum(pipeline_stage_active)", Duration::from_secs(10), |v| v == 0.0);
    prometheus.wait_for_value(
        "pipeline_stage_duration_seconds_count{pipeline_stage_name=\"index\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
    );
    prometheus.wait_for_value(
        "pipeline_stage_errors_total{pipeline_stage_name=\"tokenize\"}",
        Duration::from_secs(10),
        |v| v == 2.0,
    );
    // Worker gauges from the samples.
    prometheus.wait_for_value("count(pipeline_worker_memory_peak_bytes)", Duration::from_secs(10), |v| v == 24.0);
    prometheus.wait_for_value("min(pipeline_worker_heartbeat_seconds)", Duration::from_secs(10), |v| v > 1.7e9);
    prometheus
        .wait_for_value("count(pipeline_worker_cpu_time_seconds_total > 0)", Duration::from_secs(10), |v| v >= 20.0);

    // Span-derived metrics of the #[instrument]ed shard function and pipetel's own spans; the
    // measured batch function's call, in-flight and duration metrics.
    prometheus.wait_for_value(
        "span_duration_seconds_count{span_name=\"run_shard\",status=\"ok\"}",
        Duration::from_secs(10),
        |v| v == 24.0,
    );
    prometheus.wait_for_value(
        "span_duration_seconds_count{span_name=\"pipeline.shard\",status=\"error\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
    );
    prometheus.wait_for_value(
        "span_duration_seconds_count{span_name=\"pipeline.stage\",status=\"error\"}",
        Duration::from_secs(10),
        |v| v == 1.0,
    );
    let batches = prometheus.wait_for_value(
        "function_calls_total{function=\"process\",module=\"pipeline\",stage=\"synthetic\"}",
        Duration::from_secs(10),
        |v| v > 0.0,
    );
    let total_items: f64 = items.values().map(|(_, i)| i).sum();
    assert_eq!(batches[0].1, total_items / 64.0, "one measured call per recorded batch");
    prometheus.wait_for_value("function_in_flight{function=\"process\"}", Duration::from_secs(10), |v| v == 0.0);
    prometheus.wait_for_value("function_duration_seconds_count{function=\"process\"}", Duration::from_secs(10), |v| {
        v == total_items / 64.0
    });

    let (status, body) = http("GET", &format!("http://127.0.0.1:{port}/metrics")).expect("scrape");
    assert_eq!(status, 200);
    promtool_check_metrics(&body).expect("promtool check metrics");
}
