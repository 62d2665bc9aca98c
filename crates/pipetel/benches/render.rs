//! The `/metrics` render of 10,000 counter series (100 stages × 100 shards) and 1,000 histogram
//! series, the same instruments and values three ways in one group: pipetel's own encoder
//! (collect + encode, as a scrape does), `opentelemetry-prometheus` + `prometheus::TextEncoder`
//! on an SDK provider, and `prometheus-client`'s encoder over its own families. The cardinality
//! limit is raised on both SDK providers so nothing folds into an overflow series (checked
//! before measuring).
//!
//! `cargo bench -p pipetel --bench render`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

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
const LIMIT: usize = 20_000;

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
    let counters = text.lines().filter(|l| l.starts_with("pipeline_worker_items")).count();
    assert!(counters >= STAGES * SHARDS, "{name}: {counters} counter samples");
}

fn render(c: &mut Criterion) {
    // pipetel: the pull endpoint's reader and encoder, through `init`.
    let config = pipetel::Config::default()
        .with_prometheus_port(0)
        .with_console_log(false)
        .with_cardinality_limit(LIMIT)
        .with_stage_metrics(false)
        .with_gpu_mode(pipetel::gpu::GpuMode::Off)
        .with_span_metrics(pipetel::span_metrics::SpanMetricsConfig::default().with_enabled(false))
        .with_traces_exporters([])
        .with_logs_exporters([]);
    let telemetry = pipetel::init(config).expect("init");
    record(&telemetry.meter_provider().expect("metrics").meter("bench"));
    let pipetel = telemetry.prometheus_render().expect("pull endpoint");
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

    let mut g = c.benchmark_group("render_10k_counters_1k_histograms");
    g.sample_size(20);
    g.bench_function("pipetel_encoder", |b| b.iter(|| black_box(pipetel.render())));
    g.bench_function("opentelemetry_prometheus_text_encoder", |b| b.iter(|| black_box(otel_prometheus())));
    g.bench_function("prometheus_client_encode", |b| b.iter(|| black_box(prometheus_client())));
    g.finish();
    drop(telemetry);
}

criterion_group!(benches, render);
criterion_main!(benches);
