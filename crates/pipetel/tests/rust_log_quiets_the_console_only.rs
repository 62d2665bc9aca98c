//! `RUST_LOG` governs the console only: with `RUST_LOG=warn` every info span still reaches the
//! real OpenTelemetry Collector as a span and in `span.duration`, and info events still reach it
//! as log records, while the console prints only the warning. The traces have their own filter
//! (`PIPETEL_TRACES_FILTER`), which applies to pipetel's own subscriber and to the layers an
//! application adds to a subscriber it owns (`pipetel::layers`) alike. Each case is one process
//! (one `init`), configured through the environment as a user would.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the test says so and passes.
#![cfg(feature = "otlp")]

mod support;

use std::time::Duration;

use support::otlp_json::{attributes, log_records_in, records, spans_in};
use support::{
    collector_on_free_port, otlp_http_child_env, parent_with_peers, print_flush_and_shutdown, run_child, Peer,
};

const CHILD: &str = "PIPETEL_TEST_FILTERS_CASE";
const SPANS: usize = 20;

/// The scenario: `SPANS` info spans with an info event each, one span with a warning, one info
/// span of a target the traces filter turns off.
fn scenario() {
    for i in 0..SPANS {
        let span = tracing::info_span!("quiet.work", i);
        let _entered = span.enter();
        tracing::info!("info inside {i}");
    }
    {
        let span = tracing::info_span!("quiet.warned");
        let _entered = span.enter();
        tracing::warn!("warn inside");
    }
    let span = tracing::info_span!(target: "noisy", "noisy.work");
    drop(span.enter());
}

/// `init` (pipetel's own subscriber) or `layers` (the application's subscriber, its console
/// quieted by a per-layer filter of its own), then the scenario; flush and shut down.
#[test]
#[ignore = "a scenario its test runs in a child process (support::child::run_child)"]
fn child_runs_the_scenario() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let Ok(case) = std::env::var(CHILD) else { return };
    let config = pipetel::Config::from_env().expect("configuration");
    let telemetry = if case == "init" {
        pipetel::init(config).expect("init")
    } else {
        let (telemetry, layer) = pipetel::layers(&config).expect("layers");
        let console = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(tracing_subscriber::EnvFilter::new("warn"));
        tracing_subscriber::registry().with(console).with(layer).try_init().expect("the application's subscriber");
        telemetry
    };
    scenario();
    print_flush_and_shutdown(telemetry);
}

/// How many spans named `name` the collector received.
fn spans_named(text: &str, name: &str) -> usize {
    spans_in(text).iter().filter(|s| s.name == name).count()
}

/// The largest count of `span.duration` for spans named `name` in any export (cumulative).
fn span_duration_count(text: &str, name: &str) -> u64 {
    let metrics = records(text, ["resourceMetrics", "scopeMetrics", "metrics"], |_, m| m.clone());
    let durations = metrics.iter().filter(|m| m["name"] == "span.duration");
    durations
        .flat_map(|m| m["histogram"]["dataPoints"].as_array().into_iter().flatten())
        .filter(|point| attributes(&point["attributes"]).get("span.name").is_some_and(|n| n == name))
        .map(|point| {
            point["count"].as_str().and_then(|c| c.parse().ok()).or_else(|| point["count"].as_u64()).unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// The bodies of the log records the collector received.
fn log_bodies(text: &str) -> Vec<String> {
    log_records_in(text).iter().map(|r| r.body.as_str().unwrap_or_default().to_string()).collect()
}

#[test]
fn rust_log_warn_keeps_every_info_span_in_traces_and_span_metrics() {
    if !parent_with_peers(CHILD, &[Peer::Otelcol]) {
        return;
    }
    for case in ["init", "layers"] {
        // A collector per case: its file exporter keeps writing where it was, so the file is
        // not truncated between cases.
        let (collector, port, dir) =
            collector_on_free_port("all_signals.yaml", &format!("rust-log-console-only-{case}"));
        let env = otlp_http_child_env(
            port,
            &[
                (CHILD, case),
                ("RUST_LOG", "warn"),
                ("PIPETEL_TRACES_FILTER", "info,noisy=off"),
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_METRICS_EXPORTER", "otlp"),
                ("OTEL_LOGS_EXPORTER", "otlp"),
            ],
        );
        let run = run_child("child_runs_the_scenario", &env, Duration::from_secs(60));
        assert!(run.success && run.value("SHUTDOWN") == Some("ok"), "{case}: {}\n{}", run.stdout, run.stderr);
        let text = collector
            .wait_for_exported(Duration::from_secs(10), |t| {
                spans_named(t, "quiet.work") >= SPANS
                    && span_duration_count(t, "quiet.work") >= SPANS as u64
                    && log_bodies(t).iter().any(|b| b == "info inside 0")
            })
            .unwrap_or_else(|t| t);
        assert_eq!(spans_named(&text, "quiet.work"), SPANS, "{case}: info spans exported under RUST_LOG=warn");
        assert_eq!(spans_named(&text, "quiet.warned"), 1, "{case}");
        assert_eq!(spans_named(&text, "noisy.work"), 0, "{case}: PIPETEL_TRACES_FILTER turns `noisy` off");
        assert_eq!(span_duration_count(&text, "quiet.work"), SPANS as u64, "{case}: span.duration counts them");
        assert_eq!(span_duration_count(&text, "noisy.work"), 0, "{case}: span metrics follow the traces filter");
        let bodies = log_bodies(&text);
        assert!(
            (0..SPANS).all(|i| bodies.contains(&format!("info inside {i}"))),
            "{case}: info events exported as log records: {bodies:?}"
        );
        assert!(run.stderr.contains("warn inside"), "{case}: the console prints the warning:\n{}", run.stderr);
        assert!(!run.stderr.contains("info inside"), "{case}: the console is quiet below warn:\n{}", run.stderr);
        drop(collector);
        let _ = std::fs::remove_dir_all(dir);
    }
}
