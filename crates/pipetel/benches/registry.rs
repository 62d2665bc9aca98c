//! The registry's hot paths beside `prometheus-client`'s equivalents in the same group: a
//! counter handle's `inc`, a histogram handle's `observe` (the registry's atomics plus the OTel
//! histogram it feeds), and a summary's `observe` (`prometheus-client` has no summary; its
//! histogram `observe` is the anchor there).
//!
//! `cargo bench -p pipetel --bench registry`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use pipetel::registry::{Opts, Registry};
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::family::Family as PcFamily;
use prometheus_client::metrics::histogram::Histogram as PcHistogram;

/// A registry on a real SDK provider, so the histogram's OTel recording is measured too.
fn registry() -> (Registry, SdkMeterProvider) {
    let provider = SdkMeterProvider::builder().with_reader(ManualReader::builder().build()).build();
    let registry =
        Registry::with_meters("bench", provider.meter("bench"), provider.meter("bench.push")).expect("registry");
    (registry, provider)
}

fn counter(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_counter_inc");
    let (r, _provider) = registry();
    let handle = r
        .counter_with("requests", "Requests", Opts::new().labels(["method"]))
        .expect("counter")
        .with([("method", "GET")])
        .expect("handle");
    g.bench_function("pipetel_handle_inc", |b| b.iter(|| black_box(&handle).inc()));
    let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    let pc = family.get_or_create(&vec![("method".to_string(), "GET".to_string())]).clone();
    g.bench_function("prometheus_client_counter_inc", |b| b.iter(|| black_box(&pc).inc()));
    g.finish();
}

fn histogram(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_histogram_observe");
    let (r, _provider) = registry();
    let handle = r
        .histogram_with("latency_seconds", "Latency", Opts::new().labels(["method"]))
        .expect("histogram")
        .with([("method", "GET")])
        .expect("handle");
    g.bench_function("pipetel_handle_observe", |b| b.iter(|| handle.observe(black_box(0.042))));
    let pc = PcHistogram::new(pipetel::SECONDS_BUCKETS.iter().copied());
    g.bench_function("prometheus_client_histogram_observe", |b| b.iter(|| pc.observe(black_box(0.042))));
    g.finish();
}

fn summary(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_summary_observe");
    let (r, _provider) = registry();
    let handle = r
        .summary_with("latency_seconds", "Latency", Opts::new().labels(["method"]))
        .expect("summary")
        .with([("method", "GET")])
        .expect("handle");
    let mut x = 0.0f64;
    g.bench_function("pipetel_handle_observe", |b| {
        b.iter(|| {
            x = (x + 0.0137) % 3.0;
            handle.observe(black_box(x))
        })
    });
    // No summary in prometheus-client: its histogram is the nearest equivalent.
    let pc = PcHistogram::new(pipetel::SECONDS_BUCKETS.iter().copied());
    g.bench_function("prometheus_client_histogram_observe", |b| b.iter(|| pc.observe(black_box(0.042))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = counter, histogram, summary
}
criterion_main!(benches);
