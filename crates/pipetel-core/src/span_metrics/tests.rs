// Some imports serve only the tests of the pull endpoint (feature `prometheus`).

use super::site::Site;
use super::*;

/// A layer for the pull endpoint renders `span_duration_seconds` as the encoder renders
/// the OTel histogram of the same spans: same family, labels, buckets and count; the sum to
/// within a nanosecond per span (durations are summed as clock readings).
#[test]
fn direct_span_durations_render_as_the_encoder_renders_otel_ones() {
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use tracing_subscriber::layer::SubscriberExt as _;

    let reader = crate::exposition::pull::PullReader::new();
    let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let config = SpanMetricsConfig::default();
    let otel = SpanMetricsLayer::new(&config, &provider.meter(crate::global::SCOPE_NAME)).expect("layer");
    let direct = SpanMetricsLayer::for_pull_endpoint(&config).expect("layer");
    // Each layer reads the clock itself: record the same readings into both by hand,
    // through the sites each resolves for the same callsites.
    let subscriber = tracing_subscriber::registry();
    let dispatch = tracing::Dispatch::new(subscriber.with(tracing_subscriber::layer::Identity::new()));
    let (ok_meta, err_meta) = tracing::dispatcher::with_default(&dispatch, || {
        let ok = tracing::info_span!("direct_parity_ok");
        let err = tracing::info_span!(target: "parity::t\"q", "direct_parity_err", error = true);
        (ok.metadata().expect("meta"), err.metadata().expect("meta"))
    });
    let rate = crate::sync::ticks_per_second();
    let mut direct_sites = Vec::new();
    for (meta, failed, seconds) in
        [(ok_meta, false, [0.0002, 0.03, 0.03, 4.0].as_slice()), (err_meta, true, [12.5, 0.7].as_slice())]
    {
        let (a, b) = (otel.site(meta).expect("site"), direct.site(meta).expect("site"));
        direct_sites.push(b);
        for s in seconds {
            let ticks = (s * rate) as u64;
            let pick = |site: &'static Site| if failed { &site.error } else { &site.ok };
            pick(a).record(ticks, 0, None);
            pick(b).record(ticks, 0, None);
        }
    }
    let split = |text: &str| -> (Vec<String>, Vec<f64>) {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("span_duration")).collect();
        let sums = lines
            .iter()
            .filter(|l| l.starts_with("span_duration_seconds_sum"))
            .map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("sum"));
        let rest = lines.iter().filter(|l| !l.starts_with("span_duration_seconds_sum")).map(|l| l.to_string());
        (rest.collect(), sums.collect())
    };
    for format in [crate::exposition::Format::Text, crate::exposition::Format::OpenMetrics] {
        let encoded = reader.encode_for_tests(format);
        let mut ours = String::new();
        direct::write(&direct_sites, &mut crate::exposition::Page::new(&mut ours, format));
        let (mut want, want_sums) = split(&encoded);
        let (mut got, got_sums) = split(&ours);
        // The SDK writes its series in hash order; the endpoint in resolution order.
        want.sort();
        got.sort();
        assert!(want.len() > 2 * crate::buckets::SECONDS_BUCKETS.len(), "{encoded}");
        assert_eq!(got, want, "{format:?}\n{ours}\n{encoded}");
        let (mut want_sums, mut got_sums) = (want_sums, got_sums);
        want_sums.sort_by(f64::total_cmp);
        got_sums.sort_by(f64::total_cmp);
        assert_eq!(got_sums.len(), 4, "ok and error series of two callsites");
        for (g, w) in got_sums.iter().zip(&want_sums) {
            assert!((g - w).abs() < 1e-8, "{g} vs {w}");
        }
    }
}

#[test]
fn config_validates() {
    assert!(SpanMetricsConfig::default().validate().is_ok());
    assert!(SpanMetricsConfig::default().with_filter("info,hyper=off").validate().is_ok());
    assert!(matches!(
        SpanMetricsConfig::default().with_filter("=-=nope").validate(),
        Err(SpanMetricsError::InvalidFilter { .. })
    ));
    assert_eq!(SpanMetricsConfig::default().with_allow([" "]).validate(), Err(SpanMetricsError::EmptySpanName));
}

#[test]
fn allow_list_and_time_parse() {
    assert_eq!(SpanMetricsConfig::parse_allow(" a, b,,c "), ["a", "b", "c"]);
    assert_eq!("Busy".parse::<SpanTime>(), Ok(SpanTime::Busy));
    assert!("cpu".parse::<SpanTime>().is_err());
}
