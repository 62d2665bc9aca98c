//! The span-metrics layer: one `span.duration` point per closed span, labelled by name, target
//! and status; the allow list and the target filter leave spans out; busy time excludes the
//! time a span was not entered.

mod measure_support;

use std::time::Duration;

use measure_support::Metrics;
use opentelemetry::metrics::MeterProvider as _;
use pipetel::span_metrics::{SpanMetricsConfig, SpanMetricsLayer, SpanTime};
use tracing_subscriber::layer::SubscriberExt;

/// Runs `work` under a subscriber holding only the span-metrics layer, then collects.
fn with_layer(config: SpanMetricsConfig, work: impl FnOnce()) -> measure_support::Snapshot {
    let m = Metrics::new();
    let layer = SpanMetricsLayer::new(&config, &m.provider.meter("test")).expect("valid config");
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, work);
    m.collect()
}

fn status(name: &'static str, status: &'static str) -> [(&'static str, &'static str); 2] {
    [("span.name", name), ("status", status)]
}

#[test]
fn closed_spans_record_their_duration_and_status() {
    let s = with_layer(SpanMetricsConfig::default(), || {
        for _ in 0..2 {
            let _g = tracing::info_span!("ok_span").entered();
        }
        let _ = tracing::info_span!("error_field", error = true).entered();
        let _ = tracing::info_span!("error_false", error = false).entered();
        let span = tracing::info_span!("recorded_later", error = tracing::field::Empty);
        span.record("error", "it broke");
        drop(span);
        let _ = tracing::info_span!("otel_status", otel.status_code = "ERROR").entered();
        {
            let _g = tracing::info_span!("error_event").entered();
            tracing::error!("something failed");
        }
        {
            let _g = tracing::info_span!("warn_event").entered();
            tracing::warn!("only a warning");
        }
    });
    assert_eq!(s.histogram("span.duration", &status("ok_span", "ok")).0, 2);
    assert_eq!(s.histogram("span.duration", &[("span.name", "ok_span"), ("span.target", module_path!())]).0, 2);
    assert_eq!(s.unit("span.duration").as_deref(), Some("s"));
    assert_eq!(s.bounds("span.duration", &status("ok_span", "ok")), pipetel::SECONDS_BUCKETS);
    for name in ["error_field", "recorded_later", "otel_status", "error_event"] {
        assert_eq!(s.histogram("span.duration", &status(name, "error")).0, 1, "{name}");
        assert_eq!(s.histogram("span.duration", &status(name, "ok")).0, 0, "{name}");
    }
    for name in ["error_false", "warn_event"] {
        assert_eq!(s.histogram("span.duration", &status(name, "ok")).0, 1, "{name}");
    }
}

#[test]
fn allow_list_and_filter_leave_spans_out() {
    let config = SpanMetricsConfig::default().with_allow(["wanted", "chatty"]).with_filter("info,chatty_lib=off");
    let s = with_layer(config, || {
        let _ = tracing::info_span!("wanted").entered();
        let _ = tracing::info_span!("unlisted").entered();
        let _ = tracing::debug_span!("wanted").entered();
        let _ = tracing::info_span!(target: "chatty_lib::io", "chatty").entered();
    });
    assert_eq!(s.histogram("span.duration", &[("span.name", "wanted")]).0, 1);
    assert_eq!(s.histogram("span.duration", &[("span.name", "unlisted")]).0, 0);
    assert_eq!(s.histogram("span.duration", &[("span.name", "chatty")]).0, 0);
}

#[test]
fn busy_time_excludes_time_outside_the_span() {
    let run = |time| {
        with_layer(SpanMetricsConfig::default().with_time(time), || {
            let span = tracing::info_span!("idle_mostly");
            span.in_scope(|| std::thread::sleep(Duration::from_millis(5)));
            std::thread::sleep(Duration::from_millis(60));
            span.in_scope(|| std::thread::sleep(Duration::from_millis(5)));
        })
        .histogram("span.duration", &[("span.name", "idle_mostly")])
    };
    let (wall_count, wall) = run(SpanTime::Wall);
    let (busy_count, busy) = run(SpanTime::Busy);
    assert_eq!((wall_count, busy_count), (1, 1));
    assert!(wall >= 0.070, "wall {wall}");
    assert!((0.010..0.050).contains(&busy), "busy {busy}");
}

#[pipetel::measure]
fn measured(fail: bool) -> Result<(), String> {
    if fail {
        Err("no".into())
    } else {
        Ok(())
    }
}

#[test]
fn measured_failures_mark_the_span() {
    let s = with_layer(SpanMetricsConfig::default(), || {
        let _ = measured(false);
        let _ = measured(true);
        let _ = std::panic::catch_unwind(|| {
            #[pipetel::measure(name = "measured_panic")]
            fn panics() {
                panic!("inside");
            }
            panics();
        });
    });
    assert_eq!(s.histogram("span.duration", &status("measured", "ok")).0, 1);
    assert_eq!(s.histogram("span.duration", &status("measured", "error")).0, 1);
    assert_eq!(s.histogram("span.duration", &status("measured_panic", "error")).0, 1);
}

#[test]
fn bad_filters_and_empty_names_are_errors() {
    let m = Metrics::new();
    let meter = m.provider.meter("test");
    assert!(SpanMetricsLayer::new(&SpanMetricsConfig::default().with_filter("a=b=c"), &meter).is_err());
    assert!(SpanMetricsConfig::default().with_allow([""]).validate().is_err());
}
