//! Hot-path and bulk costs of the recorders, each beside its anchor: a raw atomic add and
//! `prometheus-client`'s family lookup.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput};
use pipetel_recorders::{codec, merge, Counter, EdgeTransfers, Envelope, Family, Histogram};

const SERIES: usize = 10_000;

fn counter_family() -> Family {
    Family::counter("pipeline.stage.items", "Items", "{item}", &["stage", "shard"]).expect("valid family")
}

fn counter_with(series: usize, offset: usize) -> Counter {
    let c = Counter::new(counter_family()).expect("counter");
    for i in 0..series {
        let shard = (i + offset).to_string();
        c.add(&["tokenize", &shard], i as f64).expect("add");
    }
    c
}

fn inc(c: &mut Criterion) {
    let mut g = c.benchmark_group("counter_inc");
    let raw = AtomicU64::new(0);
    g.bench_function("raw_atomic_fetch_add", |b| b.iter(|| black_box(&raw).fetch_add(1, Ordering::Relaxed)));
    let counter = counter_with(64, 0);
    g.bench_function("recorders_counter_inc_by_labels", |b| b.iter(|| counter.inc(black_box(&["tokenize", "17"]))));
    let family = prometheus_client::metrics::family::Family::<
        Vec<(String, String)>,
        prometheus_client::metrics::counter::Counter,
    >::default();
    let mut labels = Vec::new();
    for i in 0..64 {
        let l = vec![("stage".to_owned(), "tokenize".to_owned()), ("shard".to_owned(), i.to_string())];
        family.get_or_create(&l).inc();
        if i == 17 {
            labels = l;
        }
    }
    g.bench_function("prometheus_client_get_or_create_inc", |b| {
        b.iter(|| family.get_or_create(black_box(&labels)).inc())
    });
    g.finish();
}

fn edge(c: &mut Criterion) {
    let mut g = c.benchmark_group("edge_record");
    let raw = AtomicU64::new(0);
    g.bench_function("raw_atomic_fetch_add", |b| b.iter(|| black_box(&raw).fetch_add(4096, Ordering::Relaxed)));
    let mut e = EdgeTransfers::new("tcp");
    let ends: Vec<_> = (0..8).map(|i| e.endpoint(&format!("stage-{i}"))).collect();
    let mut i = 0usize;
    g.bench_function("edge_transfers_record", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            e.record(ends[i & 7], ends[(i + 1) & 7], black_box(4096), 2, 0.0001);
        })
    });
    g.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_10k_series");
    g.throughput(Throughput::Elements(SERIES as u64));
    let counter = counter_with(SERIES, 0);
    g.bench_function("counter", |b| b.iter(|| black_box(counter.snapshot())));
    let h = Histogram::new(
        Family::histogram("task.duration", "", "s", &["shard"], &[0.01, 0.1, 1.0, 10.0]).expect("valid family"),
    )
    .expect("histogram");
    for i in 0..SERIES {
        h.observe(&[&i.to_string()], (i % 20) as f64 * 0.7).expect("observe");
    }
    g.bench_function("histogram", |b| b.iter(|| black_box(h.snapshot())));
    let mut e = EdgeTransfers::new("tcp");
    let ends: Vec<_> = (0..100).map(|i| e.endpoint(&format!("s{i}"))).collect();
    for s in &ends {
        for d in &ends {
            e.record(*s, *d, 1, 1, 0.0);
        }
    }
    g.bench_function("edge_transfers_4_families", |b| b.iter(|| black_box(e.snapshot())));
    g.finish();
}

fn merging(c: &mut Criterion) {
    let mut g = c.benchmark_group("merge_10k_series");
    g.throughput(Throughput::Elements(SERIES as u64));
    let family = counter_family();
    // Two sources with half their series in common.
    let a = counter_with(SERIES, 0).snapshot();
    let b = counter_with(SERIES, SERIES / 2).snapshot();
    let two = [a, b];
    g.bench_function("two_sources_half_overlap", |bench| bench.iter(|| black_box(merge(&family, black_box(&two)))));
    let four: Vec<_> = (0..4).map(|k| counter_with(SERIES / 4, k * SERIES / 8).snapshot()).collect();
    g.bench_function("four_sources", |bench| bench.iter(|| black_box(merge(&family, black_box(&four)))));
    g.finish();
}

fn codec_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("codec_10k_series");
    let h = Histogram::new(
        Family::histogram("task.duration", "", "s", &["shard"], &[0.01, 0.1, 1.0, 10.0]).expect("valid family"),
    )
    .expect("histogram");
    for i in 0..SERIES {
        h.observe(&[&i.to_string()], 0.5).expect("observe");
    }
    let envelope = Envelope::new("worker-1", 1, vec![counter_with(SERIES, 0).snapshot(), h.snapshot()]);
    let bytes = codec::encode(&envelope);
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("encode", |b| b.iter(|| black_box(codec::encode(&envelope))));
    g.bench_function("decode", |b| b.iter(|| black_box(codec::decode(black_box(&bytes)))));
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    inc(&mut c);
    edge(&mut c);
    snapshot(&mut c);
    merging(&mut c);
    codec_bench(&mut c);
    c.final_summary();
}
