//! The registry's hot paths beside `prometheus-client`'s equivalents in the same group:
//! - `registry_counter_inc`: a counter handle's `inc` (one atomic add).
//! - `registry_histogram_observe`: a histogram handle's `observe`, as most programs run it
//!   (`pipetel_handle_observe`: a `Registry::new` registry on the global meter provider with no
//!   push metric exporter installed, the default of a program serving the pull endpoint: the
//!   registry's atomics only), and on a registry made with `with_meters` on a real SDK provider
//!   (`pipetel_handle_observe_with_sdk`: the atomics plus the OTel histogram push exporters
//!   read, as with an OTLP exporter).
//! - `registry_summary_observe`: a summary handle's `observe`, on the same two registries, over
//!   values that move between sketch bins. `prometheus-client` has no summary; its histogram
//!   `observe` is the anchor (`prometheus_client_histogram_observe`, the same constant value as
//!   in the histogram group; `prometheus_client_histogram_observe_varying`, the summary rows'
//!   values).
//!
//! Each target row is also measured interleaved with its comparison (see `common`), written as
//! `paired-registry.json`.
//!
//! `cargo bench -p pipetel --bench registry`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use pipetel::registry::{Metric, MetricVec, Opts, Registry, RegistryError};
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::family::Family as PcFamily;
use prometheus_client::metrics::histogram::Histogram as PcHistogram;

mod common;
use common::{interleave, pairing};

/// Calls per batch of an interleaved comparison: a few hundred microseconds.
const BATCH: u32 = 20_000;

/// `n` calls of `f`, for [`interleave`].
fn calls(mut f: impl FnMut()) -> impl FnMut(u32) {
    move |n| (0..n).for_each(|_| f())
}

/// A registry on a real SDK provider, so the push exporters' OTel histogram is measured too.
fn sdk_registry(prefix: &str) -> (Registry, SdkMeterProvider) {
    let provider = SdkMeterProvider::builder().with_reader(ManualReader::builder().build()).build();
    let registry =
        Registry::with_meters(prefix, provider.meter("bench"), provider.meter("bench.push")).expect("registry");
    (registry, provider)
}

/// The two registries a handle is measured on, kept alive while it is.
struct Registries {
    _default: Registry,
    _sdk: Registry,
    _provider: SdkMeterProvider,
}

/// The `method="GET"` series of a family.
fn get<M: Metric>(family: Result<MetricVec<M>, RegistryError>) -> M {
    family.expect("family").with([("method", "GET")]).expect("series")
}

/// The `method="GET"` series of the family `family` registers, on a registry on the global
/// meter provider, `init` not called (no push exporter; prefix `prefix`), and on one on a real
/// SDK provider (prefix `<prefix>_sdk`).
fn on_both<M: Metric>(
    prefix: &str,
    family: impl Fn(&Registry) -> Result<MetricVec<M>, RegistryError>,
) -> (M, M, Registries) {
    let default = Registry::new(prefix).expect("registry");
    let (sdk, provider) = sdk_registry(&format!("{prefix}_sdk"));
    (get(family(&default)), get(family(&sdk)), Registries { _default: default, _sdk: sdk, _provider: provider })
}

/// Values stepping through [0, 3) so that consecutive observations land in different bins,
/// without a division in the loop.
struct Values(f64);

impl Values {
    #[inline]
    fn next(&mut self) -> f64 {
        self.0 += 0.0137;
        if self.0 >= 3.0 {
            self.0 -= 3.0;
        }
        self.0
    }
}

fn counter(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_counter_inc");
    let (r, _provider) = sdk_registry("bench_counter");
    let handle = get(r.counter_vec("requests", "Requests", &["method"]));
    g.bench_function("pipetel_handle_inc", |b| b.iter(|| black_box(&handle).inc()));
    let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    let pc = family.get_or_create(&vec![("method".to_string(), "GET".to_string())]).clone();
    g.bench_function("prometheus_client_counter_inc", |b| b.iter(|| black_box(&pc).inc()));
    g.finish();
    if pairing() {
        let (ours, theirs) = (
            calls(|| black_box(&handle).inc()),
            calls(|| {
                black_box(black_box(&pc).inc());
            }),
        );
        interleave("counter_inc_vs_prometheus_client", (BATCH, theirs), (BATCH, ours));
    }
}

fn histogram(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_histogram_observe");
    let (handle, sdk, _registries) =
        on_both("bench_hist", |r| r.histogram_vec("latency_seconds", "Latency", &["method"], Opts::new()));
    g.bench_function("pipetel_handle_observe", |b| b.iter(|| handle.observe(black_box(0.042))));
    g.bench_function("pipetel_handle_observe_with_sdk", |b| b.iter(|| sdk.observe(black_box(0.042))));
    let pc = PcHistogram::new(pipetel::SECONDS_BUCKETS.iter().copied());
    g.bench_function("prometheus_client_histogram_observe", |b| b.iter(|| pc.observe(black_box(0.042))));
    let mut x = Values(0.0);
    g.bench_function("pipetel_handle_observe_varying", |b| b.iter(|| handle.observe(black_box(x.next()))));
    g.bench_function("prometheus_client_histogram_observe_varying", |b| b.iter(|| pc.observe(black_box(x.next()))));
    g.finish();
    if pairing() {
        let (ours, theirs) = (calls(|| handle.observe(black_box(0.042))), calls(|| pc.observe(black_box(0.042))));
        interleave("histogram_observe_vs_prometheus_client", (BATCH, theirs), (BATCH, ours));
    }
}

fn summary(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_summary_observe");
    let (handle, sdk, _registries) =
        on_both("bench_summary", |r| r.summary_vec("latency_seconds", "Latency", &["method"], Opts::new()));
    let mut x = Values(0.0);
    g.bench_function("pipetel_handle_observe", |b| b.iter(|| handle.observe(black_box(x.next()))));
    g.bench_function("pipetel_handle_observe_with_sdk", |b| b.iter(|| sdk.observe(black_box(x.next()))));
    // No summary in prometheus-client: its histogram is the nearest equivalent.
    let pc = PcHistogram::new(pipetel::SECONDS_BUCKETS.iter().copied());
    g.bench_function("prometheus_client_histogram_observe", |b| b.iter(|| pc.observe(black_box(0.042))));
    g.bench_function("prometheus_client_histogram_observe_varying", |b| b.iter(|| pc.observe(black_box(x.next()))));
    g.finish();
    if pairing() {
        let mut y = Values(0.0);
        let (ours, theirs) = (calls(|| handle.observe(black_box(y.next()))), calls(|| pc.observe(black_box(0.042))));
        interleave("summary_observe_vs_prometheus_client_histogram", (BATCH, theirs), (BATCH, ours));
    }
}

/// Writes the interleaved comparisons; runs last.
fn write_paired(_: &mut Criterion) {
    common::write_paired("paired-registry.json");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = counter, histogram, summary, write_paired
}
criterion_main!(benches);
