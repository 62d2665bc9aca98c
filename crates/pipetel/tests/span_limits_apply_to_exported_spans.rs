//! The span limits pipetel reads (`OTEL_SPAN_EVENT_COUNT_LIMIT`, here through a lookup, not the
//! process environment the SDK would read itself) reach the tracer provider: a span with more
//! events than the limit is exported with the first ones only. Its own test binary: `init` is
//! once per process.
#![cfg(feature = "otlp")]

mod otlp_sink;

#[test]
fn events_over_the_limit_are_not_exported() {
    let sink = otlp_sink::OtlpSink::start();
    let vars = [
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "2"),
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str()),
        ("PIPETEL_CONSOLE_LOG", "false"),
    ];
    let config = pipetel::Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
        .expect("configuration");
    let telemetry = pipetel::init(config).expect("init");
    tracing::info_span!("limited-span").in_scope(|| {
        tracing::info!("event-number-one");
        tracing::info!("event-number-two");
        tracing::info!("event-number-three");
    });
    telemetry.force_flush().expect("flush");
    assert!(sink.wait_for("/v1/traces", "limited-span"), "the span was exported");
    assert!(sink.wait_for("/v1/traces", "event-number-two"), "events within the limit are kept");
    assert!(!sink.wait_for("/v1/traces", "event-number-three"), "the third event is over the limit");
    telemetry.shutdown().expect("shutdown");
}
