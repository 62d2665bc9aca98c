//! The snapshot hub at 10,000 series: ingesting one envelope (decode included, as from a pipe)
//! and the observable callbacks of one collection.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_main, BatchSize, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use pipetel::hub::{HubConfig, SnapshotHub};
use pipetel::recorders::{Counter, Envelope, Family, MetricSnapshot};

const SERIES: usize = 10_000;

/// A counter snapshot of 10,000 series (`shard` × `stage`), each at `scale` times its index.
fn counter_snapshot(scale: f64) -> MetricSnapshot {
    let family = Family::counter("bench.items", "Items", "{item}", &["shard", "stage"]).expect("family");
    let counter = Counter::new(family).expect("counter");
    for i in 0..SERIES {
        let (shard, stage) = ((i / 10).to_string(), format!("stage-{}", i % 10));
        counter.add(&[shard.as_str(), stage.as_str()], scale * (i + 1) as f64).expect("add");
    }
    counter.snapshot()
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("hub_ingest_10k_series");
    group.measurement_time(Duration::from_secs(5));
    let noop = opentelemetry::global::meter("bench");
    let bytes: Vec<Vec<u8>> =
        (1..=2).map(|seq| Envelope::new("w", seq, vec![counter_snapshot(seq as f64)]).encode()).collect();
    // Steady state: the source is known, each envelope supersedes the previous one.
    group.bench_function("ingest_bytes", |b| {
        let hub = SnapshotHub::with_meter(HubConfig::default(), noop.clone());
        let mut seq = 0u64;
        b.iter_batched(
            || {
                seq += 1;
                let mut e = Envelope::decode(&bytes[(seq % 2) as usize]).expect("decode");
                e.sequence = seq;
                e.encode()
            },
            |frame| black_box(hub.ingest_bytes(&frame)),
            BatchSize::SmallInput,
        );
    });
    // The anchor: decoding alone.
    group.bench_function("decode_only", |b| b.iter(|| black_box(Envelope::decode(&bytes[0]))));
    group.finish();
}

fn collect(c: &mut Criterion) {
    let mut group = c.benchmark_group("hub_collect_10k_series");
    group.measurement_time(Duration::from_secs(5));
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder().with_reader(PeriodicReader::builder(exporter.clone()).build()).build();
    let hub = SnapshotHub::with_meter(HubConfig::default(), provider.meter("bench"));
    for (i, source) in ["a", "b", "c"].into_iter().enumerate() {
        hub.ingest(Envelope::new(source, 1, vec![counter_snapshot((i + 1) as f64)])).expect("ingest");
    }
    // Cached view: nothing changed since the last collection (callback + SDK aggregation).
    group.bench_function("collect_unchanged", |b| {
        b.iter(|| {
            provider.force_flush().expect("flush");
            exporter.reset();
        })
    });
    // After an ingest: the merge of 3 sources is rebuilt, then observed.
    let mut seq = 1;
    group.bench_function("collect_after_ingest", |b| {
        b.iter_batched(
            || {
                seq += 1;
                hub.ingest(Envelope::new("a", seq, vec![counter_snapshot(seq as f64)])).expect("ingest");
            },
            |()| {
                provider.force_flush().expect("flush");
                exporter.reset();
            },
            BatchSize::PerIteration,
        )
    });
    // The anchor: the merged view without the SDK.
    group.bench_function("snapshot_only", |b| b.iter(|| black_box(hub.snapshot())));
    group.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::ingest, super::collect);
}
criterion_main!(group::benches);
