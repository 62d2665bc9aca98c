// Some imports serve only the tests of the pull endpoint (feature `prometheus`).

use std::ptr;

use super::direct::write_direct;
use super::names::{FUNCTION_DURATION, FUNCTION_INPUT_SIZE, FUNCTION_OUTPUT_SIZE, SIZE_BUCKETS};
use super::site::{Attrs, DirectSet, Handles, Site, SiteInfo};
use super::size::Size;
use crate::exposition::direct::Direct;
use crate::exposition::{Format, Page};
use crate::global;

/// The pull endpoint's page shows a direct histogram exactly as its encoder showed the
/// OTel histogram it replaces: same family, labels, buckets, sum and count.
#[test]
fn direct_histograms_render_as_the_encoder_renders_otel_ones() {
    use opentelemetry::metrics::MeterProvider as _;

    static SITE: Site = Site::new(SiteInfo {
        function: "direct_f",
        module: "crate::m",
        stage: Some("tok\"en\\s"),
        buckets: None,
        input_size: true,
        output_size: true,
        mark_span: false,
    });
    let attrs = SITE.attrs.get_or_init(|| Attrs::new(&SITE.info));
    let set = SITE.direct.get_or_init(|| DirectSet {
        duration: Direct::new(crate::buckets::SECONDS_BUCKETS, true),
        input: Some(Direct::new(SIZE_BUCKETS, false)),
        output: Some(Direct::new(SIZE_BUCKETS, false)),
    });
    let reader = crate::exposition::pull::PullReader::new();
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder().with_reader(reader.clone()).build();
    let meter = provider.meter(crate::global::SCOPE_NAME);
    let duration = meter
        .f64_histogram(FUNCTION_DURATION)
        .with_unit("s")
        .with_description("Wall time of completed calls")
        .with_boundaries(crate::buckets::SECONDS_BUCKETS.to_vec())
        .build();
    let size = |name: &'static str, description: &'static str| {
        meter
            .u64_histogram(name)
            .with_unit("By")
            .with_description(description)
            .with_boundaries(SIZE_BUCKETS.to_vec())
            .build()
    };
    let (input, output) =
        (size(FUNCTION_INPUT_SIZE, "Size of a call's input"), size(FUNCTION_OUTPUT_SIZE, "Size of a call's output"));
    for v in [0.0004, 0.003, 0.25, 0.25, 7.5, 1e9, 0.1 + 0.2] {
        duration.record(v, &attrs.base);
        set.duration.record_f64(v);
    }
    for v in [0u64, 64, 65, 1 << 20, u64::from(u32::MAX)] {
        input.record(v, &attrs.base);
        set.input.as_ref().expect("input").record_u64(v);
    }
    // `function.output.size` bound (as a site binds it when resolved) but never recorded:
    // a series of count 0 on both sides.
    let _bound = output.bind(&attrs.base);
    let ours =
        |text: &str| -> Vec<String> { text.lines().filter(|l| l.contains("function_")).map(str::to_string).collect() };
    for format in [Format::Text, Format::OpenMetrics] {
        let encoded = reader.encode_for_tests(format);
        let mut direct = String::new();
        write_direct(&[&SITE], &mut Page::new(&mut direct, format));
        let expected = ours(&encoded);
        assert!(expected.len() > 2 * crate::buckets::SECONDS_BUCKETS.len(), "{encoded}");
        assert!(direct.contains("function_output_size_bytes_count{"), "{direct}");
        assert_eq!(ours(&direct), expected, "{format:?}");
    }
}

/// A site of function `function` in module `m`, without options.
const fn plain(function: &'static str) -> SiteInfo {
    SiteInfo {
        function,
        module: "m",
        stage: None,
        buckets: None,
        input_size: false,
        output_size: false,
        mark_span: false,
    }
}

/// The rendered family of a site's direct duration histogram: its labels, count and sum.
#[test]
fn a_direct_duration_renders_with_the_sites_labels() {
    static SITE: Site = Site::new(plain("ticks_f"));
    SITE.attrs.get_or_init(|| Attrs::new(&SITE.info));
    let set = SITE.direct.get_or_init(|| DirectSet {
        duration: Direct::new(crate::buckets::SECONDS_BUCKETS, true),
        input: None,
        output: None,
    });
    let rate = crate::sync::ticks_per_second();
    for seconds in [0.25, 2.0] {
        set.duration.record_ticks((seconds * rate) as u64);
    }
    set.duration.record_f64(0.5);
    let mut out = String::new();
    write_direct(&[&SITE], &mut Page::new(&mut out, Format::Text));
    let line = out.lines().find(|l| l.starts_with("function_duration_seconds_sum{")).expect("sum");
    let rendered: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("value");
    assert!((rendered - 2.75).abs() < 1e-6, "{line}");
    assert!(
        out.contains(
            "function_duration_seconds_count{function=\"ticks_f\",module=\"m\",otel_scope_name=\"pipetel\"} 3"
        ),
        "{out}"
    );
    assert!(out.contains("# TYPE function_duration_seconds histogram"), "{out}");
}

#[test]
fn handles_are_resolved_once_and_again_after_init() {
    static SITE: Site = Site::new(plain("f"));
    let first: *const Handles = SITE.handles();
    assert!(ptr::eq(first, SITE.handles()));
    // What `init` does last: publish a new context.
    let provider = opentelemetry::global::meter_provider();
    let limit = crate::limits::cardinality_limit();
    global::publish(global::Installed::new(&*provider, false, limit));
    let second: *const Handles = SITE.handles();
    assert!(!ptr::eq(first, second));
    assert!(ptr::eq(second, SITE.handles()));
}

#[test]
fn sizes_never_panic() {
    assert_eq!((-3i32).into_size(), 0);
    assert_eq!(f64::NAN.into_size(), 0);
    assert_eq!((-1.5f64).into_size(), 0);
    assert_eq!(u128::MAX.into_size(), u64::MAX);
    assert_eq!(7usize.into_size(), 7);
    assert_eq!((&9u8).into_size(), 9);
}
