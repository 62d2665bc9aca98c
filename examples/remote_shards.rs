//! Stages whose shards run in other processes, on other machines: one **owner** process starts
//! three stages and counts the shards that **worker** processes run for it
//! ([`pipetel::Stage::remote`]); each worker sends cumulative reports
//! ([`pipetel::Stage::remote_report`]) that the owner takes in ([`pipetel::Stage::ingest_remote`]).
//! The reports travel as files in a shared directory here (any transport works: a socket, a
//! queue, an object store); `scripts/fleet` runs owners and workers on different simulated nodes.
//!
//! ```text
//! cargo run --example remote_shards -- owner  --dir /shared/run1 --execution run1 --workers 2
//! cargo run --example remote_shards -- worker --dir /shared/run1 --execution run1 --source w1 --first 0 --count 8 --seconds 3
//! cargo run --example remote_shards -- worker --dir /shared/run1 --execution run1 --source w2 --first 8 --count 8 --seconds 3
//! ```
//!
//! The owner writes each stage's trace context to `<dir>/<stage>.traceparent`; a worker runs
//! shards `first .. first + count` of each stage in turn, each shard for `seconds` (or `--batches
//! N` batches, if sooner) on `--threads T` threads (default: one per shard; with fewer, each
//! thread takes the next shard when its last one ended),
//! writes `<dir>/<stage>.<source>.report` every half second and once more at the end, then
//! `<dir>/<stage>.<source>.done`. The owner (`--shards N`: the stage's shard count, for its row)
//! ends a stage when `workers` sources are done (or after `--timeout-seconds`, default 600; it
//! then ends failed) and prints `total <stage> <items>`; a worker prints
//! `worked <stage> <items>` for the items its shards recorded. Shards of a worker share its
//! `pipeline.worker` rows and worker metrics; the stage row and stage metrics are the owner's,
//! its totals over every worker. Every `pipetel::Config` variable applies.

mod cli;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

const STAGES: [&str; 3] = ["download", "tokenize", "index"];
/// Items in one batch.
const BATCH_ITEMS: u64 = 64;
/// Bytes in one batch.
const BATCH_BYTES: u64 = 64 * 512;
/// Used when traces are off: a remote view still needs a valid parent.
const UNTRACED_PARENT: &str = "00-00000000000000000000000000000001-0000000000000001-00";

struct Args {
    role: String,
    dir: PathBuf,
    execution: String,
    workers: usize,
    shards: u32,
    source: String,
    first: u32,
    count: u32,
    threads: u32,
    batches: u64,
    seconds: u64,
    timeout: u64,
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        // `--help` and usage errors, printed as clap formats them.
        Err(e) => {
            eprint!("{e}");
            return if e.starts_with("error") {
                std::process::ExitCode::FAILURE
            } else {
                std::process::ExitCode::SUCCESS
            };
        }
    };
    cli::exit_code(run(&args))
}

fn parse_args() -> Result<Args, String> {
    use clap::{value_parser, Arg, Command};
    let m = Command::new("remote_shards")
        .about("Stages whose shards run in other processes: an owner counts the shards workers run for it")
        .after_help("Every pipetel variable applies (OTEL_EXPORTER_OTLP_ENDPOINT, PIPETEL_ROWS_FILE, ...).")
        .arg(Arg::new("role").required(true).value_parser(["owner", "worker"]).help("owner or worker"))
        .arg(Arg::new("dir").long("dir").value_name("DIR").required(true).help("The directory owner and workers share"))
        .arg(Arg::new("execution").long("execution").value_name("ID").required(true).help("The stages' execution id"))
        .arg(cli::number("workers", "Owner: worker sources to wait for", "1").value_parser(value_parser!(usize)))
        .arg(
            cli::number("shards", "Owner: each stage's shard count, for its row (0: as counted)", "0")
                .value_parser(value_parser!(u32)),
        )
        .arg(Arg::new("source").long("source").value_name("NAME").help("Worker: its name (default: worker-PID)"))
        .arg(cli::number("first", "Worker: the first shard index it runs", "0").value_parser(value_parser!(u32)))
        .arg(cli::number("count", "Worker: how many shards it runs per stage", "8").value_parser(value_parser!(u32)))
        .arg(
            cli::number("threads", "Worker: threads per stage (0: one per shard)", "0")
                .value_parser(value_parser!(u32)),
        )
        .arg(
            cli::number("batches", "Worker: batches per shard at the most", "18446744073709551615")
                .value_parser(value_parser!(u64)),
        )
        .arg(cli::number("seconds", "Worker: how long each shard runs", "3").value_parser(value_parser!(u64)))
        .arg(
            cli::number("timeout-seconds", "Owner: end a stage failed after this long", "600")
                .value_parser(value_parser!(u64)),
        )
        .try_get_matches()
        .map_err(|e| e.to_string())?;
    let text = |name: &str| m.get_one::<String>(name).cloned().unwrap_or_default();
    let a = Args {
        role: text("role"),
        dir: PathBuf::from(text("dir")),
        execution: text("execution"),
        workers: m.get_one("workers").copied().unwrap_or(1),
        shards: m.get_one("shards").copied().unwrap_or(0),
        source: m.get_one::<String>("source").cloned().unwrap_or_else(|| format!("worker-{}", std::process::id())),
        first: m.get_one("first").copied().unwrap_or(0),
        count: m.get_one("count").copied().unwrap_or(8),
        threads: m.get_one("threads").copied().unwrap_or(0),
        batches: m.get_one("batches").copied().unwrap_or(u64::MAX),
        seconds: m.get_one("seconds").copied().unwrap_or(3),
        timeout: m.get_one("timeout-seconds").copied().unwrap_or(600),
    };
    if a.dir.as_os_str().is_empty() || a.execution.is_empty() {
        return Err("--dir and --execution are required".into());
    }
    if a.source.contains(['/', '.']) {
        return Err(format!("--source {:?}: no '/' or '.' in a source name", a.source));
    }
    Ok(a)
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let service = if a.role == "owner" { "remote-owner" } else { "remote-worker" };
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name(service))?;
    std::fs::create_dir_all(&a.dir)?;
    let result = if a.role == "owner" { owner(a) } else { worker(a) };
    if let Err(e) = telemetry.shutdown() {
        eprintln!("shutdown: {e}");
    }
    result
}

/// Writes `bytes` to `path` whole: a reader never sees a partial file.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The owner: starts every stage at once (workers take them in turn), takes in reports until
/// each stage has `workers` finished sources, ends it and prints its total.
fn owner(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let stages: Vec<pipetel::Stage> = STAGES
        .iter()
        .map(|name| pipetel::stage(*name).execution_id(a.execution.clone()).shards(a.shards).start())
        .collect();
    for stage in &stages {
        let parent = stage.traceparent().unwrap_or_else(|| UNTRACED_PARENT.to_string());
        write_whole(&a.dir.join(format!("{}.traceparent", stage.name())), parent.as_bytes())?;
    }
    let deadline = Instant::now() + Duration::from_secs(a.timeout);
    let mut open: Vec<pipetel::Stage> = stages;
    while !open.is_empty() {
        let mut still_open = Vec::new();
        for stage in open {
            let done = take_reports(&a.dir, &stage)?;
            if done >= a.workers || Instant::now() > deadline {
                take_reports(&a.dir, &stage)?;
                let row = if done >= a.workers {
                    stage.finish()
                } else {
                    stage.fail(format!("{done} of {} workers finished in time", a.workers))
                };
                println!("total {} {}", row.stage_name, row.items);
            } else {
                still_open.push(stage);
            }
        }
        open = still_open;
        if !open.is_empty() {
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    Ok(())
}

/// Takes in every report of `stage` in `dir`; returns how many sources are done.
fn take_reports(dir: &Path, stage: &pipetel::Stage) -> std::io::Result<usize> {
    let (prefix, mut done) = (format!("{}.", stage.name()), 0);
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        if rest.ends_with(".done") {
            done += 1;
        } else if rest.ends_with(".report") {
            // A report may be replaced while read: the next pass reads it again.
            if let Ok(bytes) = std::fs::read(dir.join(&name)) {
                if let Err(e) = stage.ingest_remote(&bytes) {
                    eprintln!("report {name} refused: {e}");
                }
            }
        }
    }
    Ok(done)
}

/// A worker: for each stage in turn, runs its shards and reports them to the owner.
fn worker(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let wait_until = Instant::now() + Duration::from_secs(a.timeout);
    for name in STAGES {
        let parent_file = a.dir.join(format!("{name}.traceparent"));
        let parent = loop {
            match std::fs::read_to_string(&parent_file) {
                Ok(p) if !p.trim().is_empty() => break p,
                _ if Instant::now() > wait_until => return Err(format!("no {}", parent_file.display()).into()),
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let stage = pipetel::Stage::remote(name, a.execution.clone(), &parent)?;
        let report = a.dir.join(format!("{name}.{}.report", a.source));
        let deadline = Instant::now() + Duration::from_secs(a.seconds);
        let running = AtomicBool::new(true);
        let next = AtomicU32::new(a.first);
        let items: u64 = std::thread::scope(|s| -> std::io::Result<u64> {
            let reporter = s.spawn(|| -> std::io::Result<()> {
                while running.load(Ordering::Acquire) {
                    write_whole(&report, &stage.remote_report(&a.source).encode())?;
                    std::thread::sleep(Duration::from_millis(500));
                }
                Ok(())
            });
            // Each thread takes the next shard not yet taken, until none is left.
            let (stage, next) = (&stage, &next);
            let end = a.first.saturating_add(a.count);
            let threads = if a.threads == 0 { a.count } else { a.threads.min(a.count) };
            let pool: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(move || {
                        let mut items = 0;
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= end {
                                return items;
                            }
                            items += run_shard(stage, i, deadline, a.batches);
                        }
                    })
                })
                .collect();
            let items = pool.into_iter().map(|h| h.join().unwrap_or(0)).sum();
            running.store(false, Ordering::Release);
            reporter.join().unwrap_or(Ok(()))?;
            Ok(items)
        })?;
        write_whole(&report, &stage.remote_report(&a.source).encode())?;
        write_whole(&a.dir.join(format!("{name}.{}.done", a.source)), b"")?;
        println!("worked {name} {items}");
    }
    Ok(())
}

/// One shard: batches of synthetic work until the deadline, or `batches` of them; the items it
/// recorded.
fn run_shard(stage: &pipetel::Stage, index: u32, deadline: Instant, batches: u64) -> u64 {
    let shard = stage.shard(index).start();
    let (mut items, mut done) = (0, 0);
    let mut x = u64::from(index);
    while Instant::now() < deadline && done < batches {
        done += 1;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(2) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
        shard.record(BATCH_ITEMS, BATCH_BYTES);
        items += BATCH_ITEMS;
        // Room for the other shards on a small machine.
        std::thread::sleep(Duration::from_millis(20));
    }
    std::hint::black_box(x);
    shard.finish();
    items
}
