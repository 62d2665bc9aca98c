//! The `/metrics` render, pipetel beside `prometheus-client` (and `opentelemetry-prometheus`):
//!
//! - `render_10k_counters_1k_histograms`: 10,000 counter series (100 stages × 100 shards) and
//!   1,000 histogram series, the same series and values four ways in one group: pipetel's
//!   registry (`pipetel_registry`: a counter vec and a histogram vec, rendered by the pull
//!   endpoint from the registry's own cells, as a program that serves the endpoint alone has
//!   them), pipetel's encoder over OTel SDK instruments (`pipetel_encoder`: collect + encode,
//!   as a scrape does), `opentelemetry-prometheus` + `prometheus::TextEncoder` on an SDK
//!   provider, and `prometheus-client`'s encoder over its own families. The cardinality limit
//!   is raised on both SDK providers so nothing folds into an overflow series; every render is
//!   checked for the same number of counter and bucket samples before measuring.
//! - `render_1m_series`: 1,000,000 counter series with 3 labels, pipetel's registry streamed as
//!   the endpoint streams it (`PrometheusRender::render_to`, 64 KiB chunks to a sink) beside
//!   `prometheus-client` encoding its family into a `String`.
//!
//! `cargo bench -p pipetel --bench render`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::family::Family as PcFamily;
use prometheus_client::metrics::histogram::Histogram as PcHistogram;

const STAGES: usize = 100;
const SHARDS: usize = 100;
const ROUTES: usize = 1_000;
/// The SDK providers' cardinality limit: above the suite's 11,000 series. The OTel SDK reserves a
/// hash table of this many entries for every instrument and scans all of it at each collection,
/// so a limit far above the real series count would time that scan, not the render.
const LIMIT: usize = 20_000;
/// The registry's limit while the million-series group runs (the registry reserves nothing).
const MILLION_LIMIT: usize = 2_000_000;
const MILLION: usize = 1_000_000;

fn observations(k: usize) -> [f64; 3] {
    [0.001 * (k % 7) as f64, 0.05, 0.3 * (k % 5) as f64]
}

/// Records the suite's series into `meter`.
fn record(meter: &Meter) {
    let items = meter.u64_counter("pipeline.worker.items").with_unit("{item}").with_description("Items").build();
    for i in 0..STAGES {
        for j in 0..SHARDS {
            let attrs = [KeyValue::new("stage", format!("stage-{i}")), KeyValue::new("shard", j.to_string())];
            items.add((i * SHARDS + j + 1) as u64, &attrs);
        }
    }
    let latency = meter
        .f64_histogram("request.duration")
        .with_unit("s")
        .with_description("Latency")
        .with_boundaries(pipetel::SECONDS_BUCKETS.to_vec())
        .build();
    for k in 0..ROUTES {
        let attrs = [KeyValue::new("route", format!("r-{k}"))];
        for v in observations(k) {
            latency.record(v, &attrs);
        }
    }
}

fn pc_histogram() -> PcHistogram {
    PcHistogram::new(pipetel::SECONDS_BUCKETS.iter().copied())
}

fn check(name: &str, text: &str) {
    assert!(!text.contains("otel_metric_overflow"), "{name}: series folded into overflow");
    let counters = text.lines().filter(|l| l.starts_with("pipeline_worker_items_total{")).count();
    assert_eq!(counters, STAGES * SHARDS, "{name}: counter samples");
    let buckets = text.lines().filter(|l| l.starts_with("request_duration_seconds_bucket{")).count();
    assert_eq!(buckets, ROUTES * (pipetel::SECONDS_BUCKETS.len() + 1), "{name}: bucket samples");
}

fn labels3(i: usize) -> [(&'static str, String); 3] {
    [
        ("stage", format!("stage-{}", i / 1_000)),
        ("shard", (i % 1_000 / 10).to_string()),
        ("worker", (i % 10).to_string()),
    ]
}

/// A million counter series, pipetel's registry (streamed) beside `prometheus-client`.
fn million(c: &mut Criterion, render: &pipetel::PrometheusRender) {
    pipetel::registry::set_cardinality_limit(MILLION_LIMIT);
    let registry = pipetel::Registry::new("big").expect("registry");
    let items = registry.counter_vec("items", "Items", &["stage", "shard", "worker"]).expect("counter");
    let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    let mut pc = prometheus_client::registry::Registry::default();
    pc.register("big_items", "Items", family.clone());
    for i in 0..MILLION {
        let [a, b, c] = labels3(i);
        items.with([a.clone(), b.clone(), c.clone()]).expect("series").inc_by((i + 1) as f64);
        family.get_or_create(&[a, b, c].map(|(k, v)| (k.to_string(), v)).to_vec()).inc_by((i + 1) as u64);
    }
    let streamed = || {
        let counted = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let n = counted.clone();
        render.render_to(None, move |text| n.set(n.get() + black_box(text).len()));
        counted.get()
    };
    let mut text = String::new();
    encode(&mut text, &pc).expect("encode");
    let pc_samples = text.lines().filter(|l| l.starts_with("big_items_total{")).count();
    let page = render.render();
    let samples = page.lines().filter(|l| l.starts_with("big_items_total{")).count();
    assert_eq!((samples, pc_samples), (MILLION, MILLION), "a million series each");
    assert!(streamed() >= page.len() - 1024, "the streamed page is the whole page");
    drop((page, text));

    let mut g = c.benchmark_group("render_1m_series");
    g.sample_size(10);
    g.bench_function("pipetel_registry_streamed", |b| b.iter(|| black_box(streamed())));
    g.bench_function("prometheus_client_encode", |b| {
        b.iter(|| {
            let mut out = String::new();
            encode(&mut out, &pc).expect("encode");
            black_box(out.len())
        })
    });
    g.finish();
    registry.clear();
    pipetel::registry::set_cardinality_limit(LIMIT);
}

fn render(c: &mut Criterion) {
    // pipetel: the pull endpoint's reader and encoder, through `init`.
    let config = common::pull_endpoint_alone(LIMIT).with_stage_metrics(false);
    let telemetry = pipetel::init(config).expect("init");
    let pipetel = telemetry.prometheus_render().expect("pull endpoint");
    million(c, &pipetel);

    let mut g = c.benchmark_group("render_10k_counters_1k_histograms");
    g.sample_size(20);
    // pipetel's registry (no prefix: the same names as the other three), measured first and
    // cleared before the SDK instruments of the same names are recorded.
    {
        let registry = pipetel::registry::global();
        let items = registry.counter_vec("pipeline_worker_items", "Items", &["stage", "shard"]).expect("counter");
        let opts = pipetel::registry::Opts::new().buckets(pipetel::SECONDS_BUCKETS.to_vec());
        let latency =
            registry.histogram_vec("request_duration_seconds", "Latency", &["route"], opts).expect("histogram");
        for i in 0..STAGES {
            for j in 0..SHARDS {
                let series = items.with([("stage", format!("stage-{i}")), ("shard", j.to_string())]).expect("series");
                series.inc_by((i * SHARDS + j + 1) as f64);
            }
        }
        for k in 0..ROUTES {
            let h = latency.with([("route", format!("r-{k}"))]).expect("series");
            for v in observations(k) {
                h.observe(v);
            }
        }
        check("pipetel registry", &pipetel.render());
        g.bench_function("pipetel_registry", |b| b.iter(|| black_box(pipetel.render())));
        registry.clear();
    }

    record(&telemetry.meter_provider().expect("metrics").meter("bench"));
    check("pipetel", &pipetel.render());

    // opentelemetry-prometheus + prometheus::TextEncoder.
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter().with_registry(registry.clone()).build().expect("exporter");
    let provider = SdkMeterProvider::builder()
        .with_reader(exporter)
        .with_view(|_: &Instrument| Stream::builder().with_cardinality_limit(LIMIT).build().ok())
        .build();
    record(&provider.meter("bench"));
    let otel_prometheus = || prometheus::TextEncoder::new().encode_to_string(&registry.gather()).expect("encode");
    check("opentelemetry-prometheus", &otel_prometheus());

    // prometheus-client, the same series.
    let mut pc = prometheus_client::registry::Registry::default();
    let items = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    let latency = PcFamily::<Vec<(String, String)>, PcHistogram>::new_with_constructor(pc_histogram as fn() -> _);
    pc.register("pipeline_worker_items", "Items", items.clone());
    pc.register("request_duration_seconds", "Latency", latency.clone());
    for i in 0..STAGES {
        for j in 0..SHARDS {
            let labels = vec![("stage".to_string(), format!("stage-{i}")), ("shard".to_string(), j.to_string())];
            items.get_or_create(&labels).inc_by((i * SHARDS + j + 1) as u64);
        }
    }
    for k in 0..ROUTES {
        let h = latency.get_or_create(&vec![("route".to_string(), format!("r-{k}"))]).clone();
        for v in observations(k) {
            h.observe(v);
        }
    }
    let prometheus_client = || {
        let mut out = String::new();
        encode(&mut out, &pc).expect("encode");
        out
    };
    check("prometheus-client", &prometheus_client());

    g.bench_function("pipetel_encoder", |b| b.iter(|| black_box(pipetel.render())));
    g.bench_function("opentelemetry_prometheus_text_encoder", |b| b.iter(|| black_box(otel_prometheus())));
    g.bench_function("prometheus_client_encode", |b| b.iter(|| black_box(prometheus_client())));
    g.finish();
    drop(telemetry);
}

criterion_group!(benches, render);
criterion_main!(benches);
