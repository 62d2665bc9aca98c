//! Values that make no sense — a negative or non-finite counter increment, a non-finite gauge
//! move, NaN into a histogram, an infinity into a summary — are refused with exactly one warning
//! per metric however often they come, and leave the recorded state and the exposition
//! unchanged.
//!
//! The scenario runs in a child process (see `support::child`) so its warnings can be counted.

mod support;

use support::child::scenario_in_child;

const CHILD: &str = "PIPETEL_TEST_BAD_VALUES_CHILD";
const REPEAT: usize = 500;

/// The sample line of `name` (with or without labels).
fn line<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .unwrap_or_else(|| panic!("no {name}:\n{text}"))
}

fn scenario() {
    let telemetry = pipetel::init(
        pipetel::Config::default().with_prometheus_port(0).with_console_log(true).with_log_filter("warn"),
    )
    .expect("init");
    let render = telemetry.prometheus_render().expect("render");
    let r = pipetel::Registry::new("bad").expect("registry");
    let counter = r.counter("events", "Events").expect("counter");
    let gauge = r.gauge("depth", "Depth").expect("gauge");
    let histogram = r.histogram("latency_seconds", "Latency").expect("histogram");
    let summary = r.summary("tokens", "Tokens").expect("summary");
    counter.inc_by(3.0);
    gauge.set(2.0);
    histogram.observe(0.5);
    summary.observe(7.0);
    let before = render.render();
    for _ in 0..REPEAT {
        for bad in [-1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            counter.inc_by(bad);
        }
        gauge.inc_by(f64::NAN);
        gauge.dec_by(f64::INFINITY);
        histogram.observe(f64::NAN);
        summary.observe(f64::INFINITY);
        summary.observe(f64::NAN);
    }
    assert_eq!(counter.value(), 3.0);
    assert_eq!(gauge.value(), 2.0);
    assert_eq!((histogram.count(), histogram.sum()), (1, 0.5));
    let after = render.render();
    for prefix in [
        "bad_events_total",
        "bad_depth",
        "bad_latency_seconds_count",
        "bad_latency_seconds_sum",
        "bad_tokens_count",
        "bad_tokens_sum",
    ] {
        let (b, a) = (line(&before, prefix), line(&after, prefix));
        assert_eq!(a.rsplit(' ').next(), b.rsplit(' ').next(), "{prefix} changed: {b} → {a}");
    }
    assert!(!after.contains("NaN") && !after.contains("Inf\n"), "a refused value reached the exposition:\n{after}");
    drop(telemetry);
}

#[test]
fn nonsense_values_are_refused_with_one_warning_per_metric() {
    let name = "nonsense_values_are_refused_with_one_warning_per_metric";
    let Some((_, stderr)) = scenario_in_child(name, CHILD, scenario) else { return };
    for metric in ["bad_events_total", "bad_depth", "bad_latency_seconds", "bad_tokens"] {
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains(" WARN ") && l.trim_end().ends_with(&format!("metric={metric}")))
            .collect();
        assert_eq!(warnings.len(), 1, "{metric}: one warning for {REPEAT}+ refused values:\n{stderr}");
    }
}
