//! One run of the pipeline example pushing OTLP, with what it printed and the rows it kept in a
//! rows file: what a test compares the collectors' output with.

use std::collections::BTreeMap;
use std::time::Duration;

use super::otlp_json::{read_rows, Row};
use super::ports::free_port;
use super::process::Process;
use super::prometheus::Prometheus;
use super::workspace::example_pushing;

/// The pipeline example's stages, in order.
pub const STAGES: [&str; 3] = ["download", "tokenize", "index"];

/// A finished run of the pipeline example.
pub struct PipelineRun {
    /// `pipeline.execution.id` of the run (`run-<pid>`).
    pub execution: String,
    /// Per stage: the status and the items, from the table the example prints.
    pub stages: BTreeMap<String, (String, f64)>,
    /// The rows the run wrote to its rows file (`PIPETEL_ROWS_FILE`).
    pub rows: Vec<Row>,
    /// What the example printed.
    pub output: String,
}

impl PipelineRun {
    /// Runs the pipeline example with `args`, pushing to `endpoint` over `protocol` (`grpc` or
    /// `http/protobuf`) with a metric export every second and the rows also kept in a file;
    /// waits (90 s at most) for it to exit successfully.
    pub fn pushing(endpoint: &str, protocol: &str, args: &[&str]) -> Self {
        let rows_file = std::env::temp_dir().join(format!("pipetel-rows-{}-{}.jsonl", std::process::id(), free_port()));
        let mut cmd = example_pushing("pipeline", endpoint, protocol);
        cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "1000")
            .env("PIPETEL_SAMPLE_INTERVAL", "500")
            .env("PIPETEL_ROWS_FILE", &rows_file)
            .args(args);
        let mut example = Process::spawn("pipeline", cmd);
        let execution = format!("run-{}", example.id());
        let (code, output) = example.wait(Duration::from_secs(90));
        assert_eq!(code, Some(0), "{output}");
        let rows = read_rows(&rows_file);
        let _ = std::fs::remove_file(&rows_file);
        let stages = printed_stages(&output);
        assert_eq!(stages.len(), 3, "{output}");
        assert_eq!(stages["tokenize"].0, "failed", "{output}");
        Self { execution, stages, rows, output }
    }
}

impl PipelineRun {
    /// Asserts, in PromQL, the run's exact totals as the example printed them: per stage its
    /// items and bytes (64 items of 512 bytes a batch), the sum of its shards' items, and the
    /// failing shard's 640 items; `shards` series per stage, the failed and succeeded runs, the
    /// errors. Every series under the job `pipeline-example` (the example's `service.name`).
    /// Waits up to `timeout` for each.
    pub fn assert_totals(&self, prometheus: &Prometheus, shards: u32, timeout: Duration) {
        let (job, exec) = ("job=\"pipeline-example\"", format!("pipeline_execution_id=\"{}\"", self.execution));
        let mut expected: Vec<(String, f64)> = Vec::new();
        for (stage, (_, items)) in &self.stages {
            let sel = format!("{job},{exec},pipeline_stage_name=\"{stage}\"");
            expected.push((format!("pipeline_stage_items_total{{{sel}}}"), *items));
            expected.push((format!("pipeline_stage_bytes_total{{{sel}}}"), items * 512.0));
            expected.push((format!("sum(pipeline_worker_items_total{{{sel}}})"), *items));
            expected.push((format!("sum(pipeline_worker_bytes_total{{{sel}}})"), items * 512.0));
            expected.push((format!("count(pipeline_worker_items_total{{{sel}}})"), f64::from(shards)));
        }
        let sel = format!("{job},{exec},pipeline_stage_name=\"tokenize\"");
        expected.extend([
            (format!("pipeline_worker_items_total{{{sel},pipeline_shard_index=\"3\"}}"), 640.0),
            (format!("pipeline_stage_errors_total{{{sel}}}"), 2.0),
            (format!("pipeline_stage_runs_total{{{job},pipeline_status=\"failed\"}}"), 1.0),
            (format!("sum(pipeline_stage_runs_total{{{job},pipeline_status=\"succeeded\"}})"), 2.0),
        ]);
        prometheus.wait_for_values(expected, timeout);
    }
}

/// Status and items per stage, from the table the example prints at the end.
pub fn printed_stages(out: &str) -> BTreeMap<String, (String, f64)> {
    out.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let name = *cols.first()?;
            if !STAGES.contains(&name) || cols.len() < 3 {
                return None;
            }
            Some((name.to_string(), (cols[1].to_string(), cols[2].parse::<f64>().ok()?)))
        })
        .collect()
}
