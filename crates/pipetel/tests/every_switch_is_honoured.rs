//! Every metrics switch, one row each: the test binary re-runs itself in a child process per row
//! (`init` runs once per process) with the row's environment. The child initialises from the
//! environment, records through every API a switch governs — a `#[pipetel::measure]` function,
//! a stage context, a pipeline stage, `ServiceMetrics::new`, the global `service_metrics()`, a
//! `Registry::new` histogram — and prints the pull endpoint's exposition. The parent asserts what
//! each row's exposition holds and lacks.
//!
//! `PIPETEL_HTTP_METRICS` has its own test (`http_server_metrics_switch_off_records_nothing`,
//! feature `http`), which sends requests through the layer.

use std::process::Command;
use std::time::Duration;

const CHILD: &str = "PIPETEL_TEST_SWITCH_CHILD";
const BEGIN: &str = "----- exposition -----";
const END: &str = "----- end -----";
const NO_RENDER: &str = "no pull endpoint";

#[pipetel::measure(stage = "switch_measure")]
fn measured_work(n: u32) -> u32 {
    n * 2
}

/// In the child: the scenario, printing the exposition.
fn scenario() {
    let config = pipetel::Config::from_env().expect("configuration");
    let telemetry = pipetel::init(config).expect("init");

    assert_eq!(measured_work(2) + measured_work(3), 10);

    let ctx = pipetel::enable_stage_metrics("switch_ctx");
    ctx.record_execution(Duration::from_millis(30), false, Some(100), Some(50));
    drop(ctx.start());

    let stage = pipetel::stage("switch_stage").shards(1).start();
    let shard = stage.shard(0).start();
    shard.record(7, 70);
    shard.finish();
    let _row = stage.finish();

    let service = pipetel::ServiceMetrics::new("svc").expect("service metrics");
    service.record_task_created();
    service.record_task_completed(Duration::from_millis(30));
    let global = pipetel::service_metrics();
    global.record_task_created();
    global.record_task_completed(Duration::from_millis(30));

    let registry = pipetel::Registry::new("reg").expect("registry");
    registry.histogram("latency_seconds", "Latency").expect("histogram").observe(0.03);

    match telemetry.prometheus_render() {
        Some(render) => println!("{BEGIN}\n{}\n{END}", render.render()),
        None => {
            assert!(telemetry.prometheus_addr().is_none());
            println!("{NO_RENDER}");
        }
    }
}

struct Row {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    /// A file for `PIPETEL_CONFIG`, when the row sets switches through it.
    file: Option<&'static str>,
    present: &'static [&'static str],
    absent: &'static [&'static str],
}

/// Lines every default exposition has: the ones a switch removes.
const FUNCTION: &[&str] = &[
    "function_calls_total{",
    "function_duration_seconds_bucket{",
    "function_in_flight{",
    "function_input_size_bytes_bucket{",
    "function_errors_total{",
];
const PIPELINE: &[&str] =
    &["pipeline_stage_duration_seconds_bucket{", "pipeline_stage_runs_total{", "pipeline_stage_items_total{"];

const ROWS: &[Row] = &[
    Row {
        name: "defaults",
        env: &[],
        file: None,
        present: &[
            "function_calls_total{function=\"measured_work\",module=\"every_switch_is_honoured\",stage=\"switch_measure\",otel_scope_name=\"pipetel\"} 2",
            "function_calls_total{stage=\"switch_ctx\",otel_scope_name=\"pipetel\"} 2",
            "function_errors_total{error_type=\"err\",stage=\"switch_ctx\",otel_scope_name=\"pipetel\"} 1",
            "function_in_flight{stage=\"switch_ctx\",otel_scope_name=\"pipetel\"} 0",
            "function_duration_seconds_count{stage=\"switch_ctx\",otel_scope_name=\"pipetel\"} 2",
            "function_input_size_bytes_sum{stage=\"switch_ctx\",otel_scope_name=\"pipetel\"} 100",
            "pipeline_stage_duration_seconds_count{",
            "pipeline_stage_runs_total{",
            "pipeline_stage_items_total{",
            "svc_tasks_completed_total{otel_scope_name=\"pipetel\"} 1",
            "service_tasks_completed_total{otel_scope_name=\"pipetel\"} 1",
            // pipetel's default buckets (0.075 is not among TeleFuser's).
            "svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.075\"} 1",
            "reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.075\"} 1",
            "span_duration_seconds_count{span_name=\"measured_work\",",
        ],
        absent: &[],
    },
    Row {
        name: "stage metrics off",
        env: &[("PIPETEL_STAGE_METRICS", "false")],
        file: None,
        present: &[
            "svc_tasks_completed_total{otel_scope_name=\"pipetel\"} 1",
            // The measured function's span stays (it feeds the span-derived histogram).
            "span_duration_seconds_count{span_name=\"measured_work\",",
        ],
        absent: &[
            "function_calls_total",
            "function_errors_total",
            "function_in_flight",
            "function_duration_seconds",
            "function_input_size_bytes",
            "function_output_size_bytes",
            "pipeline_stage_duration_seconds",
            "pipeline_stage_runs_total",
            "pipeline_stage_items_total",
            "pipeline_stage_active",
            "pipeline_worker_items_total",
        ],
    },
    Row {
        name: "stage metrics off in the file",
        env: &[],
        file: Some("[pipeline]\nmetrics = false\n"),
        present: &["svc_tasks_completed_total{"],
        absent: &["function_calls_total", "function_duration_seconds", "pipeline_stage_runs_total"],
    },
    Row {
        name: "queue metrics off",
        env: &[("PIPETEL_QUEUE_METRICS", "false")],
        file: None,
        present: &["function_calls_total{", "pipeline_stage_runs_total{", "reg_latency_seconds_bucket{"],
        absent: &["svc_tasks_", "svc_task_", "service_tasks_", "service_task_", "service_queue_"],
    },
    Row {
        name: "service prefix",
        env: &[("PIPETEL_SERVICE_PREFIX", "tf")],
        file: None,
        present: &[
            "tf_tasks_completed_total{otel_scope_name=\"pipetel\"} 1",
            "tf_task_duration_seconds_count{otel_scope_name=\"pipetel\"} 1",
            // The prefix given in code wins over the variable.
            "svc_tasks_completed_total{otel_scope_name=\"pipetel\"} 1",
        ],
        absent: &["service_tasks_", "service_task_"],
    },
    Row {
        name: "TeleFuser's buckets",
        env: &[("PIPETEL_HISTOGRAM_BUCKETS", "telefuser")],
        file: None,
        present: &[
            "svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.05\"} 1",
            "service_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.005\"} 0",
            "reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"10\"} 1",
        ],
        absent: &["svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.075\"}", "reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"7.5\"}",
            "svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.75\"}",
        ],
    },
    Row {
        name: "TeleFuser's buckets in the file",
        env: &[],
        file: Some("[metrics]\nhistogram_buckets = \"telefuser\"\n"),
        present: &["reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.05\"} 1"],
        absent: &["reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.075\"}"],
    },
    Row {
        name: "explicit buckets",
        env: &[("PIPETEL_HISTOGRAM_BUCKETS", "0.02,0.2")],
        file: None,
        present: &[
            "svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.02\"} 0",
            "svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.2\"} 1",
            "reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.2\"} 1",
        ],
        absent: &["svc_task_duration_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.005\"}", "reg_latency_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.005\"}"],
    },
    // With the console log on, so an error the SDK logs (an observable instrument refused for
    // want of a reader) would show.
    Row {
        name: "metrics exporter none",
        env: &[("OTEL_METRICS_EXPORTER", "none"), ("PIPETEL_CONSOLE_LOG", "true")],
        file: None,
        present: &[],
        absent: &[],
    },
];

/// Runs one row in a child process; returns its exposition, `None` when it had no pull endpoint.
fn run_row(index: usize, row: &Row) -> Option<String> {
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "every_switch_is_honoured", "--nocapture"]).env(CHILD, index.to_string());
    // The row's environment alone: nothing inherited that configures pipetel.
    for (name, _) in std::env::vars() {
        if (name.starts_with("PIPETEL_") || name.starts_with("OTEL_")) && name != CHILD {
            cmd.env_remove(name);
        }
    }
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", "0")
        .env("OTEL_TRACES_EXPORTER", "none")
        .env("OTEL_LOGS_EXPORTER", "none")
        .env("PIPETEL_CONSOLE_LOG", "false")
        .env("PIPETEL_GPU", "off");
    for (name, value) in row.env {
        cmd.env(name, value);
    }
    // Rows go to a file in every row: switching metrics off never stops them.
    let rows = std::env::temp_dir().join(format!("pipetel-switch-rows-{}-{index}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&rows);
    cmd.env("PIPETEL_ROWS_FILE", &rows);
    let file = row.file.map(|text| {
        let path = std::env::temp_dir().join(format!("pipetel-switch-{}-{index}.toml", std::process::id()));
        std::fs::write(&path, text).expect("write the configuration file");
        cmd.env("PIPETEL_CONFIG", &path);
        path
    });
    let out = cmd.output().expect("run the row in a child process");
    if let Some(path) = file {
        let _ = std::fs::remove_file(path);
    }
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "row {:?} failed:\n{stdout}\n{stderr}", row.name);
    assert!(
        !stdout.contains("InstrumentCreationFailed") && !stderr.contains("InstrumentCreationFailed"),
        "row {:?}: an instrument was refused:\n{stdout}\n{stderr}",
        row.name
    );
    let written = std::fs::read_to_string(&rows).unwrap_or_default();
    let _ = std::fs::remove_file(&rows);
    let stage_row = written.lines().find(|l| l.contains("\"pipeline.stage\"") && l.contains("switch_stage"));
    assert!(
        stage_row.is_some_and(|l| l.contains("succeeded")),
        "row {:?}: the stage row is missing from the rows file:\n{written}",
        row.name
    );
    if stdout.contains(NO_RENDER) {
        return None;
    }
    let start = stdout.find(BEGIN).unwrap_or_else(|| panic!("row {:?}: no exposition:\n{stdout}", row.name));
    let end = stdout.find(END).expect("end of the exposition");
    Some(stdout[start + BEGIN.len()..end].to_string())
}

#[test]
fn every_switch_is_honoured() {
    if let Ok(index) = std::env::var(CHILD) {
        let _ = index;
        scenario();
        return;
    }
    for (index, row) in ROWS.iter().enumerate() {
        let exposition = run_row(index, row);
        if row.env.contains(&("OTEL_METRICS_EXPORTER", "none")) {
            assert!(exposition.is_none(), "row {:?}: a pull endpoint without a metrics exporter", row.name);
            continue;
        }
        let text = exposition.unwrap_or_else(|| panic!("row {:?}: no pull endpoint", row.name));
        for needle in row.present {
            assert!(text.contains(needle), "row {:?}: {needle:?} missing from\n{text}", row.name);
        }
        for needle in row.absent {
            assert!(!text.contains(needle), "row {:?}: {needle:?} present in\n{text}", row.name);
        }
        // What every row (but the stage-metrics ones) still has: the switches are independent.
        let stage_off = row.name.starts_with("stage metrics off");
        for needle in FUNCTION.iter().chain(PIPELINE) {
            assert_eq!(text.contains(needle), !stage_off, "row {:?}: {needle:?}\n{text}", row.name);
        }
    }
}
