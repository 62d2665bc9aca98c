//! The smallest pipetel program: one `init` call, a few metrics and nested spans, the metrics
//! served at `http://localhost:9464/metrics`; stops by itself.
//!
//! ```text
//! cargo run --example quickstart -- --batches 20 --interval-ms 500 --linger-seconds 30
//! ```
//! `--help` lists the flags. Every setting of `pipetel::Config::from_env` applies (for example
//! `OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc` to push
//! to a collector instead).

mod cli;

use std::time::{Duration, Instant};

use pipetel::opentelemetry::KeyValue;

fn main() -> std::process::ExitCode {
    cli::exit_code(run(parse_args()))
}

/// Items each batch records: fixed, so a test can check the exported totals exactly.
const ITEMS_PER_BATCH: u64 = 100;
/// Bytes each batch records.
const BYTES_PER_BATCH: u64 = 4096;

struct Args {
    batches: u64,
    interval: Duration,
    linger: Duration,
}

fn parse_args() -> Args {
    use clap::{value_parser, Command};
    let m = Command::new("quickstart")
        .about("The smallest pipetel program: one init, a counter, a histogram and nested spans; stops by itself")
        .after_help("Every pipetel variable applies, e.g. OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
        .arg(cli::number("batches", "Batches to record", "20").value_parser(value_parser!(u64)))
        .arg(cli::interval())
        .arg(cli::linger("Keep serving metrics this long after the last batch"))
        .get_matches();
    Args {
        batches: m.get_one("batches").copied().unwrap_or(20),
        interval: cli::interval_of(&m),
        linger: cli::linger_of(&m),
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("quickstart"))?;
    match telemetry.prometheus_addr() {
        Some(addr) => println!("serving metrics at http://{addr}/metrics (ready {:?} after start)", started.elapsed()),
        None => println!("no Prometheus endpoint configured; exporting as configured"),
    }

    let meter = pipetel::meter();
    let items = meter.u64_counter("quickstart.items").with_unit("{item}").with_description("Items processed").build();
    let bytes = meter.u64_counter("quickstart.read").with_unit("By").with_description("Bytes read").build();
    let latency = meter
        .f64_histogram("quickstart.batch.duration")
        .with_unit("s")
        .with_description("Time to process one batch")
        .with_boundaries(pipetel::SECONDS_BUCKETS.to_vec())
        .build();
    let attrs = [KeyValue::new("stage", "tokenize")];

    for batch in 0..args.batches {
        let t = Instant::now();
        run_batch(batch);
        items.add(ITEMS_PER_BATCH, &attrs);
        bytes.add(BYTES_PER_BATCH, &attrs);
        latency.record(t.elapsed().as_secs_f64(), &attrs);
        std::thread::sleep(args.interval);
    }
    println!(
        "done: batches={} items={} bytes={}",
        args.batches,
        args.batches * ITEMS_PER_BATCH,
        args.batches * BYTES_PER_BATCH
    );
    std::thread::sleep(args.linger);
    let t = Instant::now();
    let outcome = telemetry.shutdown();
    println!("shutdown took {:?}: {outcome:?}", t.elapsed());
    Ok(())
}

/// A parent span with two children: one on this thread, one on a worker thread.
#[tracing::instrument]
fn run_batch(batch: u64) {
    tokenize(batch);
    let parent = tracing::Span::current();
    let worker = std::thread::spawn(move || parent.in_scope(|| index(batch)));
    if worker.join().is_err() {
        tracing::error!(batch, "index worker panicked");
    }
    tracing::info!(batch, items = ITEMS_PER_BATCH, "batch done");
}

#[tracing::instrument]
fn tokenize(batch: u64) {
    std::thread::sleep(Duration::from_millis(2));
}

#[tracing::instrument]
fn index(batch: u64) {
    std::thread::sleep(Duration::from_millis(1));
}
