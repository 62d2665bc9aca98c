//! The hot path, `Shard::record(items, bytes)`, beside its anchors in the same group: two padded
//! `AtomicU64::fetch_add` (the floor), and what a user would write without pipetel: the OTel
//! SDK's `Counter::add` with 3 attributes, a `prometheus-client` family's
//! `get_or_create(&labels).inc()`, and the `metrics` facade's `counter!` with 3 labels (on the
//! `metrics-exporter-prometheus` recorder). Then 2 threads on 2 shards against 1 thread, per
//! thread.
//!
//! The phase guard, `let _p = shard.phase("decode")`, beside two reads of the same clock (what
//! timing a block by hand costs), also interleaved with it.
//!
//! `cargo bench -p pipetel --bench record`

// criterion's macros generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};

mod common;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::family::Family as PcFamily;

#[repr(align(128))]
struct Padded(AtomicU64, AtomicU64);

fn one_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("record_1_thread");
    let stage = pipetel::stage("bench").shards(1).start();
    let shard = stage.shard(0).start();
    g.bench_function("pipetel_shard_record", |b| b.iter(|| shard.record(black_box(1), black_box(64))));
    let cells = Padded(AtomicU64::new(0), AtomicU64::new(0));
    g.bench_function("two_padded_atomic_adds", |b| {
        b.iter(|| {
            cells.0.fetch_add(black_box(1), Ordering::Relaxed);
            cells.1.fetch_add(black_box(64), Ordering::Relaxed);
        })
    });
    let provider = SdkMeterProvider::builder().with_reader(ManualReader::builder().build()).build();
    let counter = provider.meter("bench").u64_counter("items").build();
    let attrs = [
        KeyValue::new("pipeline.stage.name", "bench"),
        KeyValue::new("pipeline.execution.id", "x"),
        KeyValue::new("pipeline.shard.index", 0),
    ];
    g.bench_function("otel_sdk_counter_add_3_attrs", |b| b.iter(|| counter.add(black_box(1), &attrs)));
    let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    let labels = vec![
        ("pipeline_stage_name".to_string(), "bench".to_string()),
        ("pipeline_execution_id".to_string(), "x".to_string()),
        ("pipeline_shard_index".to_string(), "0".to_string()),
    ];
    g.bench_function("prometheus_client_family_get_or_create_inc", |b| {
        b.iter(|| family.get_or_create(black_box(&labels)).inc())
    });
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    metrics::with_local_recorder(&recorder, || {
        g.bench_function("metrics_counter_macro_3_labels", |b| {
            b.iter(|| {
                metrics::counter!(
                    "pipeline_worker_items",
                    "pipeline_stage_name" => "bench",
                    "pipeline_execution_id" => "x",
                    "pipeline_shard_index" => "0"
                )
                .increment(black_box(1))
            })
        });
    });
    g.finish();
    shard.finish();
    stage.finish();
}

/// Per-thread cost of `record` with `threads` threads each on its own shard of one stage.
fn per_thread(threads: u32, iters: u64) -> Duration {
    let stage = pipetel::stage("bench-threads").shards(threads).start();
    let barrier = std::sync::Barrier::new(threads as usize);
    let total = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (stage, barrier) = (&stage, &barrier);
                s.spawn(move || {
                    let shard = stage.shard(i).start();
                    barrier.wait();
                    let t = Instant::now();
                    for _ in 0..iters {
                        shard.record(black_box(1), black_box(64));
                    }
                    let e = t.elapsed();
                    shard.finish();
                    e
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_default()).max().unwrap_or_default()
    });
    stage.finish();
    total
}

fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("record_threads");
    g.bench_function("1_thread", |b| b.iter_custom(|iters| per_thread(1, iters)));
    g.bench_function("2_threads_2_shards_per_thread", |b| b.iter_custom(|iters| per_thread(2, iters)));
    g.finish();
}

fn phases(c: &mut Criterion) {
    let mut g = c.benchmark_group("shard_phase");
    let stage = pipetel::stage("bench-phase").shards(1).start();
    let shard = stage.shard(0).start();
    let guard = |shard: &pipetel::Shard| {
        let _p = shard.phase(black_box("decode"));
    };
    let clocks = || {
        let start = Instant::now();
        black_box(start.elapsed());
    };
    g.bench_function("pipetel_phase_guard", |b| b.iter(|| guard(&shard)));
    g.bench_function("two_reads_of_the_clock", |b| b.iter(clocks));
    g.finish();
    if common::pairing() {
        common::interleave(
            "phase_vs_two_clock_reads",
            (20_000, |n| (0..n).for_each(|_| clocks())),
            (20_000, |n| (0..n).for_each(|_| guard(&shard))),
        );
        common::write_paired("paired-record.json");
    }
    shard.finish();
    stage.finish();
}

criterion_group!(benches, one_thread, threads, phases);
criterion_main!(benches);
