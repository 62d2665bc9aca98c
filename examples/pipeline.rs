//! The main job: a synthetic pipeline of 3 stages × 8 shards on threads, one shard failing on
//! purpose, with stage and worker telemetry served at `http://localhost:9464/metrics`. Prints a
//! table of the stage rows at the end (`pipetel::pipeline::stage_table`); with
//! `PIPETEL_PROGRESS=1` on a terminal, a live line per running stage on stderr instead, and each
//! stage's line of that table as it ends.
//!
//! ```text
//! cargo run --example pipeline -- --seconds 20 --linger-seconds 30
//! ```
//! Flags (`--help` lists them): `--seconds N` (how long each stage runs, default 6), `--shards N`
//! (default 8), `--linger-seconds N` (keep serving after the run, default 0),
//! `--report-record-latency` (time every `shard.record` call and print the longest, and the peak
//! resident memory, at the end), `--slow-shard STAGE:SHARD:FACTOR` (that shard runs FACTOR times
//! as long: a straggler), `--stall-shard STAGE:SHARD:SECONDS` (that shard stops moving for
//! SECONDS halfway through, blocked in `wait.input`: a stall), `--batches N` (fixed work: each
//! shard runs N batches of a fixed number of operations, for comparing runs by CPU time, as the
//! profiler's overhead check does). Shards split their time into the
//! phases `io` (reading a batch), `decode` (the work) and `wait.output` (handing it on). Every `pipetel::Config` variable applies (`PIPETEL_SAMPLE_INTERVAL=1000` for a sample per
//! second, `PIPETEL_ROWS_FILE=rows.jsonl` to keep the rows, `OTEL_EXPORTER_OTLP_ENDPOINT` to push).

mod cli;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pipetel::pipeline::CounterKey;

const STAGES: [&str; 3] = ["download", "tokenize", "index"];
/// Items in one batch: fixed, so tests can check exported totals exactly.
const BATCH_ITEMS: u64 = 64;
/// Bytes in one batch.
const BATCH_BYTES: u64 = 64 * 512;
/// The shard that fails on purpose (in the second stage).
const FAILING: (usize, u32) = (1, 3);

struct Args {
    seconds: u64,
    shards: u32,
    linger: Duration,
    report_record_latency: bool,
    /// (stage, shard, factor): a shard that runs `factor` times as long.
    slow: Vec<(String, u32, f64)>,
    /// (stage, shard, seconds): a shard that stops moving that long halfway through.
    stall: Vec<(String, u32, f64)>,
    /// Fixed work: each shard runs this many batches of a fixed number of operations, whatever
    /// the time it takes (for comparing runs by their CPU time).
    batches: Option<u64>,
}

/// A planted straggler or stall, `STAGE:SHARD:NUMBER`.
fn planted(text: &str) -> Result<(String, u32, f64), String> {
    let mut parts = text.rsplitn(3, ':');
    let (number, shard, stage) = (parts.next(), parts.next(), parts.next());
    let (Some(number), Some(shard), Some(stage)) = (number, shard, stage) else {
        return Err(format!("{text:?}: expected STAGE:SHARD:NUMBER, e.g. tokenize:2:3"));
    };
    if !STAGES.contains(&stage) {
        return Err(format!("{text:?}: no stage {stage:?} (the stages are {})", STAGES.join(", ")));
    }
    let shard = shard.parse().map_err(|_| format!("{text:?}: shard {shard:?} is not a shard index"))?;
    let number: f64 = number.parse().map_err(|_| format!("{text:?}: {number:?} is not a number"))?;
    if !(number.is_finite() && number > 0.0) {
        return Err(format!("{text:?}: {number} must be a positive number"));
    }
    Ok((stage.to_string(), shard, number))
}

/// The planted value for (`stage`, `shard`), if any.
fn plant(list: &[(String, u32, f64)], stage: &str, shard: u32) -> Option<f64> {
    list.iter().find(|(s, i, _)| s == stage && *i == shard).map(|(_, _, v)| *v)
}

/// The longest `shard.record` call so far, in nanoseconds (with `--report-record-latency`).
static MAX_RECORD_NS: AtomicU64 = AtomicU64::new(0);

fn main() -> std::process::ExitCode {
    cli::exit_code(run(parse_args()))
}

fn parse_args() -> Args {
    use clap::{value_parser, Command};
    let m = Command::new("pipeline")
        .about("The main job: a synthetic pipeline of 3 stages x N shards on threads, one shard failing on purpose")
        .after_help("Every pipetel variable applies: PIPETEL_SAMPLE_INTERVAL=1000, PIPETEL_ROWS_FILE=rows.jsonl, OTEL_EXPORTER_OTLP_ENDPOINT, ...")
        .arg(cli::number("seconds", "How long each stage runs, in seconds", "6").value_parser(value_parser!(u64)))
        .arg(cli::number("shards", "Shards per stage", "8").value_parser(value_parser!(u32)))
        .arg(cli::linger("Keep serving metrics this long after the run"))
        .arg(cli::flag(
            "report-record-latency",
            "Time every shard.record call; print the longest and the peak resident memory at the end",
        ))
        .arg(
            clap::Arg::new("slow-shard")
                .long("slow-shard")
                .value_name("STAGE:SHARD:FACTOR")
                .action(clap::ArgAction::Append)
                .value_parser(planted)
                .help("Plant a straggler: that shard runs FACTOR times as long (repeatable)"),
        )
        .arg(
            clap::Arg::new("batches")
                .long("batches")
                .value_name("N")
                .value_parser(value_parser!(u64))
                .help("Fixed work instead of --seconds: each shard runs N batches of a fixed number of operations"),
        )
        .arg(
            clap::Arg::new("stall-shard")
                .long("stall-shard")
                .value_name("STAGE:SHARD:SECONDS")
                .action(clap::ArgAction::Append)
                .value_parser(planted)
                .help("Plant a stall: that shard stops moving for SECONDS halfway through (repeatable)"),
        )
        .get_matches();
    let list = |name: &str| -> Vec<(String, u32, f64)> {
        m.get_many::<(String, u32, f64)>(name).map(|v| v.cloned().collect()).unwrap_or_default()
    };
    Args {
        seconds: m.get_one("seconds").copied().unwrap_or(6),
        shards: m.get_one("shards").copied().unwrap_or(8),
        linger: cli::linger_of(&m),
        report_record_latency: m.get_flag("report-record-latency"),
        slow: list("slow-shard"),
        stall: list("stall-shard"),
        batches: m.get_one("batches").copied(),
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("pipeline-example"))?;
    if let Some(addr) = telemetry.prometheus_addr() {
        println!("serving metrics at http://{addr}/metrics");
    }
    let retries = CounterKey::new("retries")?;
    let execution = format!("run-{}", std::process::id());
    let mut rows = Vec::new();
    let mut answers = Vec::new();
    for (stage_no, name) in STAGES.iter().enumerate() {
        let stage =
            pipetel::stage(*name).execution_id(execution.clone()).shards(args.shards).counter(retries.clone()).start();
        let started = Instant::now();
        let failed = std::thread::scope(|s| {
            let workers: Vec<_> = (0..args.shards)
                .map(|i| {
                    let (stage, retries) = (&stage, &retries);
                    let factor = plant(&args.slow, name, i).unwrap_or(1.0);
                    let plan = Plan {
                        deadline: started + Duration::from_secs_f64(args.seconds as f64 * factor),
                        stall: plant(&args.stall, name, i).map(|secs| {
                            (started + Duration::from_secs(args.seconds) / 2, Duration::from_secs_f64(secs))
                        }),
                        timed: args.report_record_latency,
                        batches: args.batches,
                    };
                    s.spawn(move || run_shard(stage, stage_no, i, &plan, retries))
                })
                .collect();
            workers.into_iter().map(|w| w.join()).filter(|r| !matches!(r, Ok(true))).count()
        });
        answers.push(answer_line(name, &stage.answers()));
        let row = if failed == 0 { stage.finish() } else { stage.fail(format!("{failed} shard(s) failed")) };
        rows.push(row);
    }
    if !pipetel::pipeline::progress_is_on() {
        print!("{}", pipetel::pipeline::stage_table(&rows));
    }
    for a in &answers {
        println!("{a}");
    }
    let total: u64 = rows.iter().map(|r| r.items).sum();
    println!("done: stages={} items={total}", rows.len());
    std::thread::sleep(args.linger);
    if let Err(e) = telemetry.shutdown() {
        eprintln!("shutdown: {e}");
    }
    if args.report_record_latency {
        println!("max record call: {} ns", MAX_RECORD_NS.load(Ordering::Relaxed));
        match peak_rss_kib() {
            Some(kib) => println!("peak rss: {kib} kB"),
            None => println!("peak rss: unknown"),
        }
    }
    Ok(())
}

/// How one shard runs: until when, whether it stalls (from when, how long), whether its
/// `record` calls are timed.
struct Plan {
    deadline: Instant,
    stall: Option<(Instant, Duration)>,
    timed: bool,
    /// Fixed work: this many batches (`--batches`), each a fixed number of operations.
    batches: Option<u64>,
}

/// Runs one shard until its deadline; false when it failed. Its span feeds the span-derived
/// `span.duration` histogram.
#[tracing::instrument(skip_all, fields(stage = stage_no, shard = index))]
fn run_shard(stage: &pipetel::Stage, stage_no: usize, index: u32, plan: &Plan, retries: &CounterKey) -> bool {
    let shard = stage.shard(index).start();
    // Work done under the shard's span nests under it in traces.
    let span = shard.span().clone();
    let _entered = span.enter();
    let mut batch = 0u64;
    let mut stall = plan.stall;
    while plan.batches.map_or(Instant::now() < plan.deadline, |n| batch < n) {
        if (stage_no, index) == FAILING && batch == 10 {
            shard.fail("synthetic failure: corrupt input batch 10");
            return false;
        }
        if let Some((at, length)) = stall.filter(|(at, _)| Instant::now() >= *at) {
            // Upstream gives nothing for a while: the shard is blocked waiting for input.
            let _waiting = shard.phase("wait.input");
            std::thread::sleep(length.saturating_sub(Instant::now().saturating_duration_since(at)));
            stall = None;
        }
        {
            // Reading the batch: a short pause, as a read from storage would be.
            let _io = shard.phase("io");
            std::thread::sleep(Duration::from_micros(200));
        }
        {
            let _decode = shard.phase("decode");
            process(stage_no, index, batch, plan.batches.is_some());
        }
        let timed = plan.timed;
        if timed {
            let t = Instant::now();
            shard.record(BATCH_ITEMS, BATCH_BYTES);
            let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
            MAX_RECORD_NS.fetch_max(ns, Ordering::Relaxed);
        } else {
            shard.record(BATCH_ITEMS, BATCH_BYTES);
        }
        if batch % 50 == 49 {
            shard.add(retries, 1);
        }
        {
            // Handing the batch on: downstream takes it after a short wait (backpressure).
            let _out = shard.phase("wait.output");
            std::thread::sleep(Duration::from_micros(100));
        }
        batch += 1;
    }
    // A Zephyr-style counter: a `/` key with a float value; the stage row sums it over shards.
    if let Ok(share) = CounterKey::new("zephyr/shard_share") {
        shard.add(&share, 0.25);
    }
    shard.finish();
    true
}

/// Synthetic work: hashing for a few milliseconds, slower on higher shards (a straggler curve);
/// with `fixed`, a fixed number of operations (about as long on this machine) instead.
/// Measured: calls, errors, in-flight, duration and input size as metrics; its span is at debug
/// level, so it is filtered out at the default `info` and costs only the metrics.
#[pipetel::measure(level = "debug", skip_all, stage = "synthetic", input_size = BATCH_BYTES)]
fn process(stage_no: usize, index: u32, batch: u64, fixed: bool) {
    let micros = 2_000 + 300 * u64::from(index);
    let seed = batch ^ (stage_no as u64);
    // Each stage's work in a function of its own, so profiles tell the stages apart.
    let work = [fetch_batch, split_tokens, build_index][stage_no % STAGES.len()];
    if fixed {
        std::hint::black_box(work(seed, micros * 300));
    } else {
        let spin = Duration::from_micros(micros);
        let t = Instant::now();
        let mut x = seed;
        while t.elapsed() < spin {
            x = work(x, 64);
        }
        std::hint::black_box(x);
    }
}

/// The download stage's work (`rounds` hashing steps). The three differ in their constants,
/// so the compiler keeps three functions.
#[inline(never)]
fn fetch_batch(seed: u64, rounds: u64) -> u64 {
    hash_rounds(seed, rounds, 6364136223846793005)
}

/// The tokenize stage's work.
#[inline(never)]
fn split_tokens(seed: u64, rounds: u64) -> u64 {
    hash_rounds(seed, rounds, 2862933555777941757)
}

/// The index stage's work.
#[inline(never)]
fn build_index(seed: u64, rounds: u64) -> u64 {
    hash_rounds(seed, rounds, 3202034522624059733)
}

#[inline(always)]
fn hash_rounds(mut x: u64, rounds: u64, multiplier: u64) -> u64 {
    for _ in 0..rounds {
        x = std::hint::black_box(x.wrapping_mul(multiplier).wrapping_add(1442695040888963407));
    }
    x
}

/// One line of a stage's answers: its shards' spread and skew, stragglers, stalls and where
/// their time went.
fn answer_line(name: &str, a: &pipetel::pipeline::answers::StageAnswers) -> String {
    let spread = a
        .shard_elapsed
        .map(|d| format!("shards {:.1}/{:.1}/{:.1} s (p0/p50/max)", d.p0, d.p50, d.max))
        .unwrap_or_else(|| "no finished shard".to_string());
    let skew = match a.skew {
        Some(s) => format!("skew {s:.2}{}", if a.skewed { " (skewed)" } else { "" }),
        None => "skew -".to_string(),
    };
    let total: f64 = a.phases.iter().map(|(_, s)| s).sum::<f64>() + a.unphased_seconds;
    let phases: Vec<String> = a
        .phases
        .iter()
        .map(|(p, s)| format!("{p} {:.0}%", if total > 0.0 { 100.0 * s / total } else { 0.0 }))
        .collect();
    format!(
        "{name}: {spread}, {skew}, {} straggler(s), {} stall(s); time: {}",
        a.stragglers,
        a.stalls,
        phases.join(", ")
    )
}

/// The process's peak resident memory (`VmHWM`), in KiB; Linux only.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()
}
