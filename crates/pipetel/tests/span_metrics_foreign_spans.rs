//! Spans made outside `tracing` (`ForeignSpanTimer`, what the Python package's `pipetel.span`
//! uses) land in the `span.duration` family of the layer `init` installed, with their target and
//! status, and follow its allow list and filter.

// Its own test binary: it calls `pipetel::init`, which a process does once.

use pipetel::span_metrics::{ForeignSpanTimer, SpanMetricsConfig};

#[test]
fn foreign_spans_join_the_installed_span_duration_family() {
    assert!(ForeignSpanTimer::start("load", "python").is_none(), "nothing is timed before init");
    let span_metrics = SpanMetricsConfig::default().with_allow(["load", "tokenize"]).with_filter("info,quiet=off");
    let config = pipetel::Config::default()
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(0)
        .with_span_metrics(span_metrics);
    let telemetry = pipetel::init(config).expect("init");
    let render = telemetry.prometheus_render().expect("the pull endpoint is the default exporter");

    for _ in 0..3 {
        ForeignSpanTimer::start("load", "python").expect("an allowed name").end(false, None);
    }
    ForeignSpanTimer::start("load", "python").expect("an allowed name").end(true, None);
    assert!(ForeignSpanTimer::start("other", "python").is_none(), "left out by the allow list");
    assert!(ForeignSpanTimer::start("tokenize", "quiet").is_none(), "left out by the filter");
    // A Rust span of an allowed name, in the same family.
    tracing::info_span!("tokenize").in_scope(|| {});

    let page = render.render();
    let count = |name: &str, target: &str, status: &str| {
        let labels = format!(r#"span_name="{name}",span_target="{target}",status="{status}""#);
        page.lines()
            .find(|l| l.starts_with("span_duration_seconds_count{") && l.contains(&labels))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_owned)
    };
    assert_eq!(count("load", "python", "ok").as_deref(), Some("3"), "{page}");
    assert_eq!(count("load", "python", "error").as_deref(), Some("1"), "{page}");
    assert!(count("tokenize", "span_metrics_foreign_spans", "ok").is_some(), "{page}");
    assert!(!page.contains(r#"span_name="other""#), "{page}");
    assert_eq!(page.matches("# TYPE span_duration_seconds histogram").count(), 1, "{page}");
    telemetry.shutdown().expect("shutdown");
}
