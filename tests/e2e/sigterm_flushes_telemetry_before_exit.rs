//! A Rust program that turns SIGTERM into a normal return from `main` (the `graceful_shutdown`
//! example, `docs/src/getting-started.md`, "Stopping on SIGTERM") exports everything it recorded before it exits; one
//! that keeps SIGTERM's default action (the quickstart) loses everything still buffered.
//!
//! Both push OTLP gRPC to the real collector running `otel-collector/config.yaml` (traces and
//! logs on to a collector writing OTLP JSON, metrics served by its `prometheus` exporter), with
//! every periodic export 10 minutes away, so nothing leaves a program before it shuts down. Each
//! is sent SIGTERM (by `kill -TERM`, as an orchestrator does) once it printed that its work was
//! done. Asserted for the example: it exits 0, and the collector received a span and a log
//! record for every batch it printed, its stage and worker rows with the printed items, and the
//! counter of batches at the printed count. For the quickstart: it dies of the signal, and none
//! of its spans, log records or metrics arrive.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::otlp_json::{Attributes, LogRecord};
use crate::support::{example_pushing, http, turn, wait_for, Otelcol, OtelcolSink, Process};

/// Ten minutes: no periodic export happens while the programs run.
const NEVER_MS: &str = "600000";

/// A program pushing OTLP gRPC to `collector` with every periodic export far away.
fn pushing(example: &str, collector: &Otelcol, args: &[&str]) -> Process {
    let mut cmd = example_pushing(example, &collector.endpoint("grpc"), "grpc");
    cmd.env("OTEL_METRIC_EXPORT_INTERVAL", NEVER_MS)
        .env("OTEL_BSP_SCHEDULE_DELAY", NEVER_MS)
        .env("OTEL_BLRP_SCHEDULE_DELAY", NEVER_MS)
        .env("PIPETEL_SAMPLE_INTERVAL", NEVER_MS)
        .args(args);
    Process::spawn(example, cmd)
}

/// Sends SIGTERM the way an orchestrator does.
fn sigterm(process: &Process) {
    let status = Command::new("kill").args(["-TERM", &process.id().to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -TERM {}", process.id());
}

/// The value of the first sample of `metric` for `job` in the collector's `prometheus` exporter.
fn exported(collector: &Otelcol, metric: &str, job: &str) -> Option<f64> {
    let url = format!("http://{}/metrics", collector.env("OTELCOL_PROMETHEUS_ENDPOINT"));
    let (_, body) = http("GET", &url).ok()?;
    body.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(&format!("job=\"{job}\"")))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The `service.name` of a resource.
fn service(resource: &Attributes) -> &str {
    resource.get("service.name").and_then(Value::as_str).unwrap_or_default()
}

/// An attribute of a record, `null` when absent.
fn attr<'a>(attributes: &'a Attributes, key: &str) -> &'a Value {
    attributes.get(key).unwrap_or(&Value::Null)
}

#[test]
fn a_program_that_handles_sigterm_flushes_and_one_that_does_not_loses_its_data() {
    let _turn = turn(module_path!());
    let backend = OtelcolSink::start("backend");
    let collector = Otelcol::shipped("collector", "config.yaml").backends(&backend).start();

    // SIGTERM's default action: the quickstart dies with its telemetry still buffered.
    let mut quickstart =
        pushing("quickstart", &collector, &["--batches", "5", "--interval-ms", "50", "--linger-seconds", "120"]);
    quickstart.wait_for_output("done: batches=5", Duration::from_secs(60));
    sigterm(&quickstart);
    let (code, output) = quickstart.wait(Duration::from_secs(10));
    assert_eq!(code, None, "the quickstart keeps SIGTERM's default action and dies of it:\n{output}");

    // The pattern: SIGTERM sets a flag, the loop ends, main returns through shutdown().
    let mut example = pushing("graceful_shutdown", &collector, &["--interval-ms", "100"]);
    example.wait_for_output("batch 5 done", Duration::from_secs(60));
    sigterm(&example);
    let (code, output) = example.wait(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{output}");
    let batches: u64 = output
        .lines()
        .find_map(|l| l.strip_prefix("signal received after batch ")?.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no 'signal received after batch N' line:\n{output}"));
    assert!(batches >= 5, "{output}");
    assert!(output.contains(&format!("stage succeeded with {} items; flushing", batches * 64)), "{output}");
    assert!(
        output.contains("flushed in ") && !output.lines().any(|l| l.starts_with("shutdown:")),
        "a clean shutdown:\n{output}"
    );

    // Everything the example recorded up to the signal arrived.
    let spans = wait_for("a span of every batch and the stage's", Duration::from_secs(30), || {
        let spans: Vec<_> =
            backend.spans().into_iter().filter(|s| service(&s.resource) == "graceful-shutdown").collect();
        let batch_spans = spans.iter().filter(|s| s.name == "process").count();
        (batch_spans as u64 == batches && spans.iter().any(|s| s.name == "stage work")).then_some(spans)
    });
    // `#[tracing::instrument]` records an argument in its Debug form, a string.
    let mut numbers: Vec<i64> = spans
        .iter()
        .filter(|s| s.name == "process")
        .filter_map(|s| attr(&s.attributes, "batch").as_str()?.parse().ok())
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=i64::try_from(batches).expect("batches")).collect::<Vec<_>>());

    // The rows written as the shard and the stage ended, after the signal: the shard's end row
    // (`pipeline.status` "end") and the stage row ("succeeded"), each with every item.
    let final_row = |l: &LogRecord| {
        let status = attr(&l.attributes, "pipeline.status");
        (l.event_name == "pipeline.worker" && status == "end")
            || (l.event_name == "pipeline.stage" && status == "succeeded")
    };
    let logs = wait_for("a log record of every batch and the final rows", Duration::from_secs(30), || {
        let logs: Vec<_> = backend.logs().into_iter().filter(|l| service(&l.resource) == "graceful-shutdown").collect();
        let events = logs.iter().filter(|l| l.body == "batch done").count();
        (events as u64 == batches && logs.iter().filter(|l| final_row(l)).count() == 2).then_some(logs)
    });
    for row in logs.iter().filter(|l| final_row(l)) {
        assert_eq!(attr(&row.attributes, "pipeline.items"), &Value::from(batches * 64), "{row:?}");
    }

    let counted = wait_for("the batch counter in the collector's exporter", Duration::from_secs(30), || {
        exported(&collector, "graceful_shutdown_batches_total", "graceful-shutdown")
    });
    assert_eq!(counted, batches as f64, "batches counted");
    assert_eq!(
        exported(&collector, "pipeline_stage_items_total", "graceful-shutdown"),
        Some((batches * 64) as f64),
        "stage items"
    );

    // Nothing of the quickstart's arrived, though it ran first along the same path.
    assert!(backend.spans().iter().all(|s| service(&s.resource) != "quickstart"), "quickstart spans arrived");
    assert!(backend.logs().iter().all(|l| service(&l.resource) != "quickstart"), "quickstart logs arrived");
    assert_eq!(exported(&collector, "quickstart_items_total", "quickstart"), None, "quickstart metrics arrived");
}
