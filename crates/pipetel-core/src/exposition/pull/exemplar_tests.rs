//! Exemplars on the pull endpoint: a span-derived histogram and a registry histogram measured
//! inside a sampled span carry its trace and span ids in OpenMetrics, and only there.

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::Context;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::render::wants_openmetrics;
use super::{PrometheusRender, PullReader};
use crate::span_metrics::{SpanMetricsConfig, SpanMetricsLayer};

/// Runs `f` inside a sampled remote span context with these ids.
fn in_sampled_span(trace_id: [u8; 16], span_id: [u8; 8], f: impl FnOnce()) {
    let sampled = SpanContext::new(
        TraceId::from_bytes(trace_id),
        SpanId::from_bytes(span_id),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    let _attached = Context::new().with_remote_span_context(sampled).attach();
    f();
}

/// The `_bucket` lines of `text` that carry `label` and an exemplar.
fn exemplar_lines<'a>(text: &'a str, metric: &str, label: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(metric) && l.contains(label) && l.contains(" # {")).collect()
}

#[test]
fn a_sampled_span_leaves_its_ids_on_its_duration_bucket_in_openmetrics_only() {
    let reader = PullReader::new();
    let meters = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let tracer = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
        .build()
        .tracer("exemplar-test");
    let layer = SpanMetricsLayer::new(&SpanMetricsConfig::default(), &meters.meter("pipetel")).expect("layer");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer)).with(layer);
    let (trace_id, span_id) = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("exemplar_sampled_step");
        let ids = span.in_scope(|| {
            let cx = tracing::Span::current().context();
            let sc = cx.span().span_context().clone();
            (sc.trace_id().to_string(), sc.span_id().to_string())
        });
        drop(span);
        // A span whose remote parent was not sampled is not sampled either: no exemplar.
        let unsampled = tracing::info_span!("exemplar_unsampled_step");
        let parent = SpanContext::new(
            TraceId::from_bytes([3; 16]),
            SpanId::from_bytes([4; 8]),
            TraceFlags::default(),
            true,
            TraceState::default(),
        );
        let _ = unsampled.set_parent(Context::new().with_remote_span_context(parent));
        unsampled.in_scope(|| {});
        ids
    });
    let render = PrometheusRender::new(reader);
    let om = render.render_openmetrics();
    let lines = exemplar_lines(&om, "span_duration_seconds_bucket{", "span_name=\"exemplar_sampled_step\"");
    assert_eq!(lines.len(), 1, "one bucket holds the one measurement:\n{om}");
    let want = format!("# {{trace_id=\"{trace_id}\",span_id=\"{span_id}\"}} ");
    assert!(lines[0].contains(&want), "{want} missing from {}", lines[0]);
    // The exemplar's value is the recorded duration, its timestamp now (seconds since the epoch).
    let tail: Vec<&str> = lines[0].rsplit_once("} ").expect("exemplar").1.split(' ').collect();
    let value: f64 = tail[0].parse().expect("value");
    let ts: f64 = tail[1].parse().expect("timestamp");
    assert!((0.0..5.0).contains(&value) && ts > 1.6e9, "{}", lines[0]);
    assert!(
        exemplar_lines(&om, "span_duration_seconds_bucket{", "exemplar_unsampled_step").is_empty()
            && om.contains("span_name=\"exemplar_unsampled_step\""),
        "the unsampled span is counted without an exemplar:\n{om}"
    );
    assert!(om.contains("\n# TYPE span_duration_seconds histogram\n") && om.ends_with("\n# EOF\n"), "{om}");
    // The text format is unchanged: no exemplar, no EOF.
    let text = render.render();
    assert!(!text.contains(" # {") && !text.contains("# EOF"), "{text}");
    assert!(text
        .lines()
        .any(|l| l.starts_with("span_duration_seconds_bucket{") && l.contains("exemplar_sampled_step")));
}

#[test]
fn a_registry_histogram_observed_in_a_sampled_context_keeps_an_exemplar() {
    let reader = PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let r = crate::registry::Registry::with_meters(
        "t_exemplar",
        provider.meter("pipetel"),
        provider.meter_with_scope(opentelemetry::InstrumentationScope::builder(crate::global::PUSH_ONLY_SCOPE).build()),
    )
    .expect("registry");
    let h =
        r.histogram_with("wait_seconds", "Wait", crate::registry::Opts::new().buckets([0.1, 1.0])).expect("histogram");
    r.counter("jobs", "Jobs \"done\"").expect("counter").inc();
    in_sampled_span([0xab; 16], [0xcd; 8], || h.observe(0.5));
    // Outside any span: counted, no exemplar (the default filter is `trace_based`).
    h.observe(0.05);
    let render = PrometheusRender::new(reader);
    let om = render.render_openmetrics();
    let bucket = |le: &str| {
        om.lines()
            .find(|l| l.starts_with("t_exemplar_wait_seconds_bucket{") && l.contains(&format!("le=\"{le}\"")))
            .unwrap_or_else(|| panic!("le={le} missing from\n{om}"))
    };
    assert_eq!(bucket("0.1"), "t_exemplar_wait_seconds_bucket{otel_scope_name=\"pipetel\",le=\"0.1\"} 1");
    assert!(
        bucket("1").starts_with(&format!(
            "t_exemplar_wait_seconds_bucket{{otel_scope_name=\"pipetel\",le=\"1\"}} 2 # {{trace_id=\"{}\",span_id=\"{}\"}} 0.5 ",
            "ab".repeat(16),
            "cd".repeat(8)
        )),
        "{}",
        bucket("1")
    );
    // Counters are typed under their name less `_total`; `"` in help is escaped.
    assert!(om.contains("# HELP t_exemplar_jobs Jobs \\\"done\\\"\n# TYPE t_exemplar_jobs counter\n"), "{om}");
    assert!(om.contains("\nt_exemplar_jobs_total{otel_scope_name=\"pipetel\"} 1\n"), "{om}");
    // `prometheus_text()` (format 0.0.4) shows no exemplar; reset forgets them.
    let text = r.prometheus_text();
    assert!(text.contains("t_exemplar_wait_seconds_bucket{le=\"1\"} 2\n") && !text.contains(" # {"), "{text}");
    h.reset();
    let om = render.render_openmetrics();
    assert!(om.lines().any(|l| l == "t_exemplar_wait_seconds_bucket{otel_scope_name=\"pipetel\",le=\"1\"} 0"), "{om}");
}

#[test]
fn the_accept_header_chooses_the_format() {
    // Prometheus 2.42's default.
    assert!(wants_openmetrics(
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
         text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    ));
    assert!(wants_openmetrics("application/openmetrics-text"));
    assert!(!wants_openmetrics("*/*"));
    assert!(!wants_openmetrics("text/plain;version=0.0.4"));
    assert!(!wants_openmetrics("text/plain;q=1, application/openmetrics-text;q=0.5"));
    assert!(!wants_openmetrics("application/openmetrics-text;q=0"));
    assert!(!wants_openmetrics("application/openmetrics-text;version=2.0.0"));
    let render = PrometheusRender::new(PullReader::new());
    assert_eq!(render.render_for(None).1, super::TEXT_CONTENT_TYPE);
    let (body, content_type) = render.render_for(Some("application/openmetrics-text; version=1.0.0"));
    assert_eq!(content_type, super::OPENMETRICS_CONTENT_TYPE);
    assert!(body.ends_with("# EOF\n"), "{body}");
}

/// Why OTLP carries no exemplars: the SDK (0.33) keeps none, even for a measurement made inside
/// a sampled span, and its data points cannot be given any. When this fails, the SDK gained
/// exemplar support and pipetel's SDK-recorded histograms can send theirs over OTLP.
#[test]
fn the_sdk_keeps_no_exemplars_so_otlp_carries_none() {
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
    use opentelemetry_sdk::metrics::reader::MetricReader as _;
    let reader = PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let h = provider.meter("sdk-exemplars").f64_histogram("sdk.latency").build();
    in_sampled_span([0x11; 16], [0x22; 8], || h.record(0.25, &[]));
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).expect("collect");
    let mut points = 0;
    for m in rm.scope_metrics().flat_map(|s| s.metrics()) {
        if let AggregatedMetrics::F64(MetricData::Histogram(hist)) = m.data() {
            for p in hist.data_points() {
                points += 1;
                assert_eq!(p.exemplars().count(), 0, "the SDK now keeps exemplars: send them over OTLP");
            }
        }
    }
    assert_eq!(points, 1);
}
