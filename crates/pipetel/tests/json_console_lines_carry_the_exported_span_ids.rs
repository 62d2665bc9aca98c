//! `PIPETEL_LOG_FORMAT=json`: the console prints one JSON object per line, and a line written
//! inside a span carries the `trace_id` and `span_id` the real OpenTelemetry Collector received
//! for that span, for `tracing` events and for `log` crate records bridged into the subscriber
//! alike. A line outside every span carries none; the default format is not JSON.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the test says so and passes.
#![cfg(feature = "otlp")]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::otlp_json::spans_in;
use support::{
    collector_on_free_port, init_child, otlp_http_child_env, parent_with_peers, print_flush_and_shutdown, run_child,
    Peer,
};

const CHILD: &str = "PIPETEL_TEST_JSON_CONSOLE";

/// `init` from the environment; an event outside any span, then an event and a `log` record
/// inside the span `json.work` and a warning in its child `json.child`; flush and shut down.
#[test]
#[ignore = "a scenario its test runs in a child process (support::child::run_child)"]
fn child_logs_inside_spans() {
    let Some((_, telemetry)) = init_child(CHILD) else { return };
    tracing::info!(answer = 42, "outside every span");
    {
        let span = tracing::info_span!("json.work", shard = 3);
        let _entered = span.enter();
        tracing::info!(rows = 7_u64, ratio = 0.5, "inside the span");
        log::info!("a log crate record inside the span");
        let child = tracing::info_span!("json.child");
        let _child = child.enter();
        tracing::warn!("inside the child");
    }
    print_flush_and_shutdown(telemetry);
}

/// The console line whose message is `message`.
fn line_with<'a>(lines: &'a [Value], message: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["fields"]["message"] == message)
        .unwrap_or_else(|| panic!("no console line with the message {message:?} in {lines:#?}"))
}

/// `(traceId, spanId)` of the span named `name` the collector received.
fn exported_ids(text: &str, name: &str) -> Option<(String, String)> {
    spans_in(text).into_iter().find(|s| s.name == name).map(|s| (s.trace_id, s.span_id))
}

fn run(port: u16, format: Option<&str>) -> support::ChildRun {
    let mut env = otlp_http_child_env(
        port,
        &[
            (CHILD, "1"),
            ("RUST_LOG", "info"),
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_METRICS_EXPORTER", "none"),
            ("OTEL_LOGS_EXPORTER", "none"),
        ],
    );
    if let Some(format) = format {
        env.push(("PIPETEL_LOG_FORMAT".into(), format.into()));
    }
    let run = run_child("child_logs_inside_spans", &env, Duration::from_secs(60));
    assert!(run.success && run.value("SHUTDOWN") == Some("ok"), "{}\n{}", run.stdout, run.stderr);
    run
}

#[test]
fn json_lines_carry_the_trace_and_span_ids_of_the_exported_spans() {
    if !parent_with_peers(CHILD, &[Peer::Otelcol]) {
        return;
    }
    let (collector, port, dir) = collector_on_free_port("all_signals.yaml", "json-console-lines");
    let json = run(port, Some("json"));
    let lines: Vec<Value> = json.stderr.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(lines.len() >= 4, "one JSON object per console line:\n{}", json.stderr);
    let text = collector
        .wait_for_exported(Duration::from_secs(10), |t| {
            exported_ids(t, "json.work").is_some() && exported_ids(t, "json.child").is_some()
        })
        .unwrap_or_else(|t| panic!("the spans were not exported: {t}"));
    let (trace_id, span_id) = exported_ids(&text, "json.work").expect("json.work exported");
    let (child_trace, child_span) = exported_ids(&text, "json.child").expect("json.child exported");
    assert_eq!((trace_id.len(), span_id.len()), (32, 16), "{trace_id} {span_id}");

    let outside = line_with(&lines, "outside every span");
    assert!(outside.get("trace_id").is_none() && outside.get("span_id").is_none(), "{outside}");
    assert_eq!(outside["fields"]["answer"], 42);
    assert_eq!(outside["level"], "INFO");

    let inside = line_with(&lines, "inside the span");
    assert_eq!((inside["trace_id"].as_str(), inside["span_id"].as_str()), (Some(&*trace_id), Some(&*span_id)));
    assert_eq!((inside["fields"]["rows"].as_u64(), inside["fields"]["ratio"].as_f64()), (Some(7), Some(0.5)));
    assert_eq!(inside["spans"], serde_json::json!(["json.work"]));

    let record = line_with(&lines, "a log crate record inside the span");
    assert_eq!((record["trace_id"].as_str(), record["span_id"].as_str()), (Some(&*trace_id), Some(&*span_id)));
    assert_eq!(record["target"], "json_console_lines_carry_the_exported_span_ids", "the record's own target");
    assert!(record["fields"].as_object().is_some_and(|f| f.keys().all(|k| !k.starts_with("log."))), "{record}");

    let child = line_with(&lines, "inside the child");
    assert_eq!((child["trace_id"].as_str(), child["span_id"].as_str()), (Some(&*child_trace), Some(&*child_span)));
    assert_eq!(child_trace, trace_id, "one trace");
    assert_eq!(child["level"], "WARN");
    drop(collector);

    // The default (compact) format prints the same events as plain text.
    let compact = run(port, None);
    assert!(compact.stderr.contains("inside the span"), "{}", compact.stderr);
    assert!(compact.stderr.lines().all(|l| serde_json::from_str::<Value>(l).is_err()), "{}", compact.stderr);
    let _ = std::fs::remove_dir_all(dir);
}
