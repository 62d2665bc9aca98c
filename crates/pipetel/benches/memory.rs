//! Memory per series at 100,000 series (1,000 stages × 100 shards, one counter): heap bytes held
//! after the series exist and one collection ran, counted by a global allocator, for
//! `prometheus-client` (a family of counters), the OTel SDK (a counter with 2 attributes and a
//! cumulative manual reader) and pipetel's registry (a labelled counter, read by the SDK through
//! its observable instrument). Not a criterion bench: it prints one line per case and, with
//! `PIPETEL_BENCH_OUT` set, writes them as JSON there.
//!
//! `cargo bench -p pipetel --bench memory`

// A bench binary: `main` and its helpers need no docs.
#![allow(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{Instrument, ManualReader, SdkMeterProvider, Stream};
use prometheus_client::metrics::counter::Counter as PcCounter;
use prometheus_client::metrics::family::Family as PcFamily;

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: defers to the system allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const STAGES: usize = 1_000;
const SHARDS: usize = 100;
const SERIES: usize = STAGES * SHARDS;

fn labels(i: usize) -> (String, String) {
    (format!("stage-{}", i / SHARDS), (i % SHARDS).to_string())
}

/// Live bytes added by `f`, over what it returns still holding them.
fn held<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    let kept = f();
    (kept, LIVE.load(Ordering::Relaxed) - before)
}

/// A provider whose cardinality limit keeps every series apart, and its reader.
fn provider() -> (SdkMeterProvider, std::sync::Arc<ManualReader>) {
    #[derive(Debug, Clone)]
    struct Shared(std::sync::Arc<ManualReader>);
    impl MetricReader for Shared {
        fn register_pipeline(&self, p: std::sync::Weak<opentelemetry_sdk::metrics::Pipeline>) {
            self.0.register_pipeline(p)
        }
        fn collect(&self, rm: &mut ResourceMetrics) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.collect(rm)
        }
        fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.force_flush()
        }
        fn shutdown_with_timeout(&self, t: std::time::Duration) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.shutdown_with_timeout(t)
        }
        fn temporality(
            &self,
            kind: opentelemetry_sdk::metrics::InstrumentKind,
        ) -> opentelemetry_sdk::metrics::Temporality {
            self.0.temporality(kind)
        }
    }
    let reader = std::sync::Arc::new(ManualReader::builder().build());
    let provider = SdkMeterProvider::builder()
        .with_reader(Shared(reader.clone()))
        .with_view(|_: &Instrument| Stream::builder().with_cardinality_limit(2 * SERIES).build().ok())
        .build();
    (provider, reader)
}

fn collect(reader: &ManualReader) -> usize {
    let mut rm = ResourceMetrics::default();
    reader.collect(&mut rm).expect("collect");
    rm.scope_metrics().flat_map(|s| s.metrics()).count()
}

fn main() {
    let mut results = Vec::new();

    let (family, bytes) = held(|| {
        let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
        for i in 0..SERIES {
            let (stage, shard) = labels(i);
            family.get_or_create(&vec![("stage".to_string(), stage), ("shard".to_string(), shard)]).inc();
        }
        family
    });
    results.push(("prometheus_client_family", bytes));
    drop(family);

    let (kept, bytes) = held(|| {
        let (provider, reader) = provider();
        let counter = provider.meter("bench").u64_counter("items").build();
        for i in 0..SERIES {
            let (stage, shard) = labels(i);
            counter.add(1, &[KeyValue::new("stage", stage), KeyValue::new("shard", shard)]);
        }
        collect(&reader);
        (provider, reader, counter)
    });
    results.push(("otel_sdk_counter", bytes));
    drop(kept);

    let (kept, bytes) = held(|| {
        let (provider, reader) = provider();
        // As `init` does from `PIPETEL_CARDINALITY_LIMIT`: the same limit as the provider's.
        pipetel::registry::set_cardinality_limit(2 * SERIES);
        let registry = pipetel::Registry::with_meters("bench", provider.meter("bench"), provider.meter("bench.push"))
            .expect("registry");
        let counter = registry.counter_vec("items", "Items", &["stage", "shard"]).expect("counter");
        for i in 0..SERIES {
            let (stage, shard) = labels(i);
            counter.with([("stage", stage.as_str()), ("shard", shard.as_str())]).expect("series").inc();
        }
        collect(&reader);
        (provider, reader, registry, counter)
    });
    results.push(("pipetel_registry_counter", bytes));
    drop(kept);

    let base = results[0].1 as f64 / SERIES as f64;
    let mut json = String::from("[");
    for (k, (name, bytes)) in results.iter().enumerate() {
        let per = *bytes as f64 / SERIES as f64;
        println!("memory {name}: {per:.0} B/series ({:.2}x prometheus-client)", per / base);
        if k > 0 {
            json.push(',');
        }
        json.push_str(&format!("{{\"name\":\"{name}\",\"bytes_per_series\":{per:.1}}}"));
    }
    json.push(']');
    if let Ok(dir) = std::env::var("PIPETEL_BENCH_OUT") {
        std::fs::create_dir_all(&dir).expect("output folder");
        std::fs::write(format!("{dir}/memory.json"), json).expect("write");
    }
}
