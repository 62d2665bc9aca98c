//! `buckets = [...]` sets the layout of `function.duration`. OTel keeps one layout per metric,
//! so the first function to resolve it decides; this file measures one function only.

mod measure_support;

#[pipetel::measure(buckets = [0.5, 1, 2.5])]
fn custom_buckets() -> u8 {
    7
}

#[test]
fn custom_buckets_are_used() {
    let m = measure_support::Metrics::new();
    opentelemetry::global::set_meter_provider(m.provider.clone());
    assert_eq!(custom_buckets(), 7);
    let s = m.collect();
    assert_eq!(s.bounds("function.duration", &[("function", "custom_buckets")]), [0.5, 1.0, 2.5]);
}
