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

/// The duration of the one span `name` that `work` records, measured as wall time and as busy
/// time (a run of `work` each).
fn wall_and_busy(name: &str, work: impl Fn()) -> (f64, f64) {
    let run = |time| {
        with_layer(SpanMetricsConfig::default().with_time(time), &work)
            .histogram("span.duration", &[("span.name", name)])
    };
    let ((wall_count, wall), (busy_count, busy)) = (run(SpanTime::Wall), run(SpanTime::Busy));
    assert_eq!((wall_count, busy_count), (1, 1));
    (wall, busy)
}

#[test]
fn busy_time_excludes_time_outside_the_span() {
    let (wall, busy) = wall_and_busy("idle_mostly", || {
        let span = tracing::info_span!("idle_mostly");
        span.in_scope(|| std::thread::sleep(Duration::from_millis(5)));
        std::thread::sleep(Duration::from_millis(60));
        span.in_scope(|| std::thread::sleep(Duration::from_millis(5)));
    });
    assert!(wall >= 0.070, "wall {wall}");
    assert!((0.010..0.050).contains(&busy), "busy {busy}");
}

/// More spans open at once than the layer's table of open spans holds: the rest keep their
/// timing in the span's extensions, and every one of them is still counted exactly once, with
/// its status, whichever way it is stored.
#[test]
fn thousands_of_open_spans_are_all_counted() {
    for time in [SpanTime::Wall, SpanTime::Busy] {
        let s = with_layer(SpanMetricsConfig::default().with_time(time), || {
            let spans: Vec<tracing::Span> =
                (0..3000u32)
                    .map(|i| {
                        if i % 3 == 0 {
                            tracing::info_span!("held", error = true)
                        } else {
                            tracing::info_span!("held")
                        }
                    })
                    .collect();
            for span in &spans {
                span.in_scope(|| tracing::debug!("inside"));
            }
            // Closed in an order other than creation, so freed slots are reused by later spans.
            let (odd, even): (Vec<_>, Vec<_>) = spans.into_iter().enumerate().partition(|(i, _)| i % 2 == 1);
            drop(odd);
            let more: Vec<tracing::Span> = (0..500).map(|_| tracing::info_span!("held")).collect();
            drop(even);
            drop(more);
        });
        assert_eq!(s.histogram("span.duration", &status("held", "error")).0, 1000, "{time:?}");
        assert_eq!(s.histogram("span.duration", &status("held", "ok")).0, 2500, "{time:?}");
    }
}

/// A span created on one thread, entered on others and closed on yet another is measured
/// once, from its creation (wall time) or across its entries (busy time).
#[test]
fn spans_crossing_threads_are_measured_once() {
    let (wall, busy) = wall_and_busy("moved", || {
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let span = tracing::info_span!("moved");
        let entered_elsewhere = {
            let (span, dispatch) = (span.clone(), dispatch.clone());
            std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    span.in_scope(|| std::thread::sleep(Duration::from_millis(20)));
                })
            })
        };
        entered_elsewhere.join().expect("thread");
        std::thread::sleep(Duration::from_millis(40));
        std::thread::spawn(move || tracing::dispatcher::with_default(&dispatch, || drop(span))).join().expect("thread");
    });
    assert!(wall >= 0.060, "wall {wall}");
    assert!((0.020..0.055).contains(&busy), "busy {busy}");
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

#[pipetel::measure]
fn measured_sleep() {
    std::thread::sleep(Duration::from_millis(15));
}

#[test]
fn a_measured_span_and_its_function_record_one_shared_duration() {
    let global = measure_support::global_metrics();
    let s = with_layer(SpanMetricsConfig::default(), || {
        measured_sleep();
        measured_sleep();
        // A span that is not a measured call's is still timed to its close.
        let held = tracing::info_span!("held_open");
        drop(held.enter());
        std::thread::sleep(Duration::from_millis(15));
        drop(held);
    });
    let (spans, span_seconds) = s.histogram("span.duration", &status("measured_sleep", "ok"));
    let (calls, call_seconds) = global.collect().histogram("function.duration", &measure_support::f("measured_sleep"));
    assert_eq!((spans, calls), (2, 2));
    assert!(call_seconds >= 0.03, "two 15 ms calls took {call_seconds} s");
    // The same pair of clock readings per call: the same durations, to the bit.
    assert_eq!(span_seconds.to_bits(), call_seconds.to_bits());
    let (n, held_seconds) = s.histogram("span.duration", &status("held_open", "ok"));
    assert_eq!(n, 1);
    assert!(held_seconds >= 0.015, "the held span closed after 15 ms, recorded {held_seconds} s");
}
