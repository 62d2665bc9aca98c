//! Stopping on SIGTERM without losing telemetry.
//!
//! Orchestrators stop programs with SIGTERM (Kubernetes, systemd, `docker stop`, Slurm), and
//! SIGTERM's default action ends a Rust program at once: no destructor runs, so the `Telemetry`
//! guard never flushes, and the spans, log records, stage and worker rows and metric points still
//! buffered in the process are lost. The pattern shown here: SIGTERM and SIGINT only set a flag
//! (`signal_hook::flag`), the work loop checks it between batches, the open shard and stage end
//! as they normally do, and `main` returns through `Telemetry::shutdown` (dropping the guard does
//! the same), which exports everything buffered within the shutdown timeout
//! (`PIPETEL_SHUTDOWN_TIMEOUT`, 5 s by default; keep it under the orchestrator's grace period,
//! 30 s in Kubernetes). The book: `docs/src/getting-started.md`, "Stopping on SIGTERM".
//!
//! ```text
//! cargo run --example graceful_shutdown -- --interval-ms 200
//! kill -TERM <pid>      # or Ctrl-C
//! ```
//! Flags (`--help` lists them): `--interval-ms N` (between batches, default 500), `--batches N` (stop by itself after
//! N batches; default 0: run until a signal).

mod cli;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Items each batch records.
const ITEMS_PER_BATCH: u64 = 64;
/// Bytes each batch records.
const BYTES_PER_BATCH: u64 = 4096;

fn main() -> std::process::ExitCode {
    cli::exit_code(run(parse_args()))
}

struct Args {
    interval: Duration,
    batches: u64,
}

fn parse_args() -> Args {
    use clap::{value_parser, Command};
    let m = Command::new("graceful_shutdown")
        .about("Stopping on SIGTERM without losing telemetry: the signal sets a flag, the loop ends, the guard flushes")
        .arg(cli::interval())
        .arg(
            cli::number("batches", "Stop by itself after N batches (0: run until SIGTERM or SIGINT)", "0")
                .value_parser(value_parser!(u64)),
        )
        .get_matches();
    Args { interval: cli::interval_of(&m), batches: m.get_one("batches").copied().unwrap_or(0) }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    // Before anything else: a SIGTERM from now on only sets the flag. (Registered before `init`,
    // a signal during start-up still lets the program end cleanly.)
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("graceful-shutdown"))?;
    let batches_done = pipetel::meter()
        .u64_counter("graceful_shutdown.batches")
        .with_unit("{batch}")
        .with_description("Batches processed")
        .build();
    println!("running (pid {}); stop with SIGTERM or Ctrl-C", std::process::id());

    let stage = pipetel::stage("work").shards(1).start();
    let shard = stage.shard(0).start();
    let mut batch = 0u64;
    while !stop.load(Ordering::Relaxed) && (args.batches == 0 || batch < args.batches) {
        batch += 1;
        process(batch);
        shard.record(ITEMS_PER_BATCH, BYTES_PER_BATCH);
        batches_done.add(1, &[]);
        println!("batch {batch} done");
        pause(args.interval, &stop);
    }
    let signalled = stop.load(Ordering::Relaxed);
    // The shard and the stage end as on any other way out: their rows and metrics are recorded.
    shard.finish();
    let row = stage.finish();
    println!(
        "{} after batch {batch}: stage {} with {} items; flushing",
        if signalled { "signal received" } else { "done" },
        row.status.as_str(),
        row.items
    );
    let t = Instant::now();
    match telemetry.shutdown() {
        Ok(()) => println!("flushed in {:?}", t.elapsed()),
        Err(e) => eprintln!("shutdown: {e}"),
    }
    Ok(())
}

/// One batch of work under its own span, with a log event at its end.
#[tracing::instrument]
fn process(batch: u64) {
    std::thread::sleep(Duration::from_millis(2));
    tracing::info!(batch, items = ITEMS_PER_BATCH, "batch done");
}

/// Sleeps `total`, waking early once `stop` is set (a signal does not cut a sleep short).
fn pause(total: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + total;
    while !stop.load(Ordering::Relaxed) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}
