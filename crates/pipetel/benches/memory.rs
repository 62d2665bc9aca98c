//! Memory per series, counted by a global allocator: heap bytes held after the series exist
//! (and, where an SDK reads them, after one collection ran).
//!
//! - 100,000 series, 2 labels (1,000 stages × 100 shards, one counter): `prometheus-client` (a
//!   family of counters), the OTel SDK (a counter with 2 attributes and a cumulative manual
//!   reader) and pipetel's registry on fixed meters (`with_meters`: its observable counter read
//!   by the SDK too, as with a push exporter installed).
//! - 100,000 and 1,000,000 series, 3 labels (stage, shard, worker): `prometheus-client`'s
//!   family beside pipetel's registry as a program serving the pull endpoint alone has it (a
//!   `Registry::new` registry after `init`, no push exporter: the series are the registry's
//!   only).
//! - 100,000 and 1,000,000 stage/worker series beside `prometheus-client`'s 3-label family: in
//!   the same program (stage metrics on), shards reported through `emit_worker_stat` with every
//!   value a `pipeline.worker.*` family needs, then one render of the pull page; the series are
//!   the `pipeline_worker_*` samples counted on it, the bytes those held after the render.
//! - The peak of extra heap during one scrape of the million-series endpoint over HTTP (plain
//!   and gzip), beside the bytes the series themselves hold: the page is streamed, never whole.
//!
//! Not a criterion bench: it prints one line per case and, with `PIPETEL_BENCH_OUT` set, writes
//! them as JSON there (`memory.json`).
//!
//! `cargo bench -p pipetel --bench memory`

// A bench binary: `main` and its helpers need no docs.
#![allow(missing_docs)]

mod common;

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
/// The highest `LIVE` since it was last reset.
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grow(n: isize) {
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: defers to the system allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size() as isize);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size as isize - layout.size() as isize);
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

fn labels3(i: usize) -> [(&'static str, String); 3] {
    [
        ("stage", format!("stage-{}", i / 1_000)),
        ("shard", (i % 1_000 / 10).to_string()),
        ("worker", (i % 10).to_string()),
    ]
}

/// A `prometheus-client` family of `n` counters with 3 labels.
fn pc_family3(n: usize) -> PcFamily<Vec<(String, String)>, PcCounter> {
    let family = PcFamily::<Vec<(String, String)>, PcCounter>::default();
    for i in 0..n {
        let labels = labels3(i).map(|(k, v)| (k.to_string(), v)).to_vec();
        family.get_or_create(&labels).inc();
    }
    family
}

/// One scrape of the endpoint at `addr`, the body read and dropped 64 KiB at a time; the bytes
/// received.
fn scrape(addr: std::net::SocketAddr, gzip: bool) -> usize {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let enc = if gzip { "Accept-Encoding: gzip\r\n" } else { "" };
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{enc}\r\n").expect("send");
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

/// The registry as a program serving the pull endpoint alone has it, at 100,000 and 1,000,000
/// series, beside `prometheus-client`, and the peak of extra heap during a scrape.
fn pull_only(entry: &mut dyn FnMut(&str, f64, f64)) {
    let config = common::pull_endpoint_alone(2_000_000).with_stage_metrics(true).with_rows(false);
    let (telemetry, at_init) = held(|| pipetel::init(config).expect("init"));
    // The SDK reserves a table of the cardinality limit's size per instrument when it is made.
    println!("memory init: {:.1} MB held by `init` (stage metrics on)", at_init as f64 / 1e6);
    let addr = telemetry.prometheus_addr().expect("pull endpoint");
    for (n, tag) in [(100_000usize, "100k"), (1_000_000, "1m")] {
        let (family, pc) = held(|| pc_family3(n));
        drop(family);
        let pc = pc as f64 / n as f64;
        entry(&format!("prometheus_client_family_3_labels_{tag}"), pc, pc);
        let (kept, bytes) = held(|| {
            let registry = pipetel::Registry::new(&format!("mem_{tag}")).expect("registry");
            let counter = registry.counter_vec("items", "Items", &["stage", "shard", "worker"]).expect("counter");
            for i in 0..n {
                let [a, b, c] = labels3(i);
                counter.with([a, b, c]).expect("series").inc();
            }
            (registry, counter)
        });
        let per = bytes as f64 / n as f64;
        entry(&format!("pipetel_registry_counter_3_labels_{tag}"), per, pc);
        if n == 1_000_000 {
            for gzip in [false, true] {
                let before = LIVE.load(Ordering::Relaxed);
                PEAK.store(before, Ordering::Relaxed);
                let received = scrape(addr, gzip);
                let extra = PEAK.load(Ordering::Relaxed) - before;
                let share = extra as f64 / bytes as f64;
                let name = if gzip { "scrape_peak_extra_1m_gzip" } else { "scrape_peak_extra_1m" };
                println!(
                    "memory {name}: {:.1} MB extra at peak, {:.1} % of the series' {:.1} MB ({:.1} MB received)",
                    extra as f64 / 1e6,
                    100.0 * share,
                    bytes as f64 / 1e6,
                    received as f64 / 1e6
                );
                entry(name, extra as f64 / n as f64, 0.0);
            }
        }
        drop(kept);
    }
    let render = telemetry.prometheus_render().expect("pull endpoint");
    for (n, tag) in [(100_000usize, "100k"), (1_000_000, "1m")] {
        let (family, pc) = held(|| pc_family3(n));
        drop(family);
        let pc = pc as f64 / n as f64;
        let (series, bytes) = held(|| worker_series(&render, n / WORKER_FAMILIES, tag));
        let per = bytes as f64 / series as f64;
        println!("memory stage_worker_{tag}: {series} pipeline_worker_* samples on the page");
        entry(&format!("pipetel_stage_worker_series_{tag}"), per, pc);
    }
    drop(telemetry);
}

/// The `pipeline.worker.*` families a shard with items, bytes, CPU and memory samples and a
/// heartbeat has: items, bytes, CPU time, CPU utilization, memory usage / average / peak,
/// heartbeat.
const WORKER_FAMILIES: usize = 8;
/// Shards per stage in the stage/worker case.
const STAGE_WIDTH: usize = 500;

/// `shards` shards reported as a coordinator reports them (`emit_worker_stat`, with the values
/// that make every `pipeline.worker.*` series exist), in stages of [`STAGE_WIDTH`] shards of
/// execution `tag`, then one render of the pull page: the `pipeline_worker_*` samples of that
/// execution on it.
fn worker_series(render: &pipetel::PrometheusRender, shards: usize, tag: &str) -> usize {
    use pipetel::pipeline::{emit_worker_stat, WorkerStat, WorkerStatus};
    for i in 0..shards {
        emit_worker_stat(&WorkerStat {
            shard_index: (i % STAGE_WIDTH) as u32,
            stage_name: format!("stage-{}", i / STAGE_WIDTH),
            execution_id: tag.to_string(),
            status: WorkerStatus::Running,
            timestamp: std::time::SystemTime::now(),
            items: 1_000 + i as u64,
            bytes: 64_000 + i as u64,
            item_rate: 10.0,
            byte_rate: 640.0,
            cpu_time: std::time::Duration::from_millis(1_500),
            cpu_percent: Some(75.0),
            cpu_percent_avg: Some(60.0),
            memory_current: 1 << 30,
            memory_avg: 900 << 20,
            memory_peak: 1 << 31,
            counters: Vec::new(),
            reason: None,
        });
    }
    let page = render.render();
    let execution = format!("pipeline_execution_id=\"{tag}\"");
    page.lines().filter(|l| l.starts_with("pipeline_worker_") && l.contains(&execution)).count()
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
    // `base`: the bytes per series the row is compared with (0: printed elsewhere).
    let mut entry = |name: &str, per: f64, base: f64| {
        if base > 0.0 {
            println!("memory {name}: {per:.0} B/series ({:.2}x prometheus-client)", per / base);
        }
        if json.len() > 1 {
            json.push(',');
        }
        json.push_str(&format!("{{\"name\":\"{name}\",\"bytes_per_series\":{per:.1}}}"));
    };
    for (name, bytes) in &results {
        entry(name, *bytes as f64 / SERIES as f64, base);
    }
    pull_only(&mut entry);
    json.push(']');
    if let Ok(dir) = std::env::var("PIPETEL_BENCH_OUT") {
        std::fs::create_dir_all(&dir).expect("output folder");
        std::fs::write(format!("{dir}/memory.json"), json).expect("write");
    }
}
