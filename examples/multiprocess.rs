//! Worker processes record with `pipetel-recorders` and send cumulative snapshots over their
//! stdout pipes; the parent merges them in a `SnapshotHub` and serves the sum at `/metrics`.
//!
//! ```text
//! cargo run --example multiprocess -- --workers 3 --steps 12 --interval-ms 200 --restart-worker 1 --linger-seconds 30
//! ```
//! Each worker sends one envelope per step, but deliberately loses one (step 3) and delivers
//! another late and twice (step 5, after step 6): the exported totals are exact anyway. With
//! `--restart-worker N`, worker N stops after `--kill-after` steps, is killed (SIGKILL) and
//! started again from zero with its sequence restarting at 1; no exported counter goes
//! backwards. Every setting of `pipetel::Config::from_env` applies to the parent (for example
//! `OTEL_EXPORTER_PROMETHEUS_PORT`).
//!
//! `--help` lists the flags. The parent prints `expected <family>{<labels>} <value>` for every counter and histogram
//! series, then `done: ...` once every worker has finished.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pipetel::hub::{HubConfig, SnapshotHub, TransportReport};
use pipetel::recorders::{Counter, EdgeTransfers, Envelope, Family, FrameWriter, Gauge, Histogram};

/// The step whose envelope a worker never sends.
const DROPPED_STEP: u64 = 3;
/// The step whose envelope a worker sends after the next one, twice.
const LATE_STEP: u64 = 5;
/// Histogram observations, cycled by step; powers of two so sums are exact in any order.
const DURATIONS: [f64; 4] = [0.0078125, 0.25, 0.5, 2.0];
/// Histogram bucket bounds.
const BOUNDS: [f64; 3] = [0.01, 0.1, 1.0];

struct Args {
    workers: u64,
    steps: u64,
    interval: Duration,
    restart_worker: Option<u64>,
    kill_after: u64,
    linger: Duration,
    stale_after: Duration,
    /// Worker mode: this worker's index.
    worker: Option<u64>,
    /// Worker mode: stop (and wait to be killed) after sending this step.
    pause_after: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    use clap::{value_parser, Arg, Command};
    let optional = |name: &'static str, help: &'static str| {
        Arg::new(name).long(name).value_name("N").value_parser(value_parser!(u64)).help(help)
    };
    let m = Command::new("multiprocess")
        .about("Worker processes send cumulative snapshots over pipes; the parent merges them in a SnapshotHub and serves the sum")
        .arg(number("workers", "Worker processes", "3"))
        .arg(number("steps", "Envelopes each worker sends, one per step", "12"))
        .arg(number("interval-ms", "Milliseconds between steps", "200"))
        .arg(optional("restart-worker", "Kill worker N (SIGKILL) after --kill-after steps and start it again from zero"))
        .arg(number("kill-after", "Steps before the restarted worker is killed", "6"))
        .arg(number("linger-seconds", "Keep serving metrics this long afterwards", "0"))
        .arg(number("stale-after-ms", "The hub drops a silent source's gauges after this long", "5000"))
        .arg(optional("worker", "Worker mode (set by the parent): this worker's index").hide(true))
        .arg(optional("pause-after", "Worker mode: stop after sending this step and wait to be killed").hide(true))
        .get_matches();
    let get = |name: &str| m.get_one::<u64>(name).copied();
    let args = Args {
        workers: get("workers").unwrap_or(3),
        steps: get("steps").unwrap_or(12),
        interval: Duration::from_millis(get("interval-ms").unwrap_or(200)),
        restart_worker: get("restart-worker"),
        kill_after: get("kill-after").unwrap_or(6),
        linger: Duration::from_secs(get("linger-seconds").unwrap_or(0)),
        stale_after: Duration::from_millis(get("stale-after-ms").unwrap_or(5000)),
        worker: get("worker"),
        pause_after: get("pause-after"),
    };
    // The schedule needs the late step to be followed by another, and a kill point whose
    // envelope is actually sent, so that the totals are known exactly.
    if args.steps <= LATE_STEP {
        return Err(format!("--steps must be above {LATE_STEP}"));
    }
    if args.restart_worker.is_some_and(|w| w >= args.workers) {
        return Err("--restart-worker must name a worker below --workers".into());
    }
    if args.kill_after == 0 || args.kill_after >= args.steps || [DROPPED_STEP, LATE_STEP].contains(&args.kill_after) {
        return Err(format!("--kill-after must be in 1..{}, not {DROPPED_STEP} or {LATE_STEP}", args.steps));
    }
    Ok(args)
}

/// A `--name N` option with a default.
fn number(name: &'static str, help: &'static str, default: &'static str) -> clap::Arg {
    clap::Arg::new(name)
        .long(name)
        .value_name("N")
        .default_value(default)
        .value_parser(clap::value_parser!(u64))
        .help(help)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    match args.worker {
        Some(index) => worker(index, &args),
        None => parent(&args),
    }
}

/// What every worker records.
struct Families {
    items: Family,
    bytes: Family,
    duration: Family,
    memory: Family,
}

impl Families {
    fn new() -> Result<Families, Box<dyn std::error::Error>> {
        Ok(Families {
            items: Family::counter("pipeline.stage.items", "Items processed", "{item}", &["pipeline.stage.name"])?,
            bytes: Family::counter("pipeline.stage.bytes", "Bytes processed", "By", &["pipeline.stage.name"])?,
            duration: Family::histogram(
                "task.duration",
                "Time to process one task",
                "s",
                &["pipeline.stage.name"],
                &BOUNDS,
            )?,
            memory: Family::gauge("pipeline.worker.memory.usage", "Memory in use by workers", "By", &[])?,
        })
    }
}

fn source_id(index: u64) -> String {
    format!("worker-{index}")
}

/// One worker process: records every step, sends an envelope per step on stdout.
fn worker(index: u64, args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let families = Families::new()?;
    let items = Counter::new(families.items)?;
    let bytes = Counter::new(families.bytes)?;
    let duration = Histogram::new(families.duration)?;
    let memory = Gauge::new(families.memory)?;
    let mut edges = EdgeTransfers::new("pipe");
    let (loader, me) = (edges.endpoint("loader"), edges.endpoint(&source_id(index)));
    let mut out = FrameWriter::new(std::io::stdout().lock());
    let mut held: Option<Envelope> = None;

    for step in 1..=args.steps {
        items.add(&["tokenize"], 10.0 * (index + 1) as f64)?;
        items.add(&["embed"], 3.0)?;
        bytes.add(&["tokenize"], 1000.0 * (index + 1) as f64)?;
        duration.observe(&["tokenize"], DURATIONS[(step % 4) as usize])?;
        memory.set(&[], (1_048_576 * (index + 1)) as f64)?;
        edges.record(loader, me, 4096, 2, 0.25);

        let mut snapshots = vec![items.snapshot(), bytes.snapshot(), duration.snapshot(), memory.snapshot()];
        snapshots.extend(edges.snapshot());
        let envelope = Envelope::new(source_id(index), step, snapshots);
        match step {
            DROPPED_STEP => {}
            LATE_STEP => held = Some(envelope),
            _ => {
                out.send(&envelope)?;
                if let Some(late) = held.take() {
                    out.send(&late)?;
                    out.send(&late)?;
                }
            }
        }
        // Stdout is line-buffered and frames are binary: flush each step explicitly.
        out.get_mut().flush()?;
        if args.pause_after == Some(step) {
            // Wait to be killed: the parent knows exactly what this run recorded.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        std::thread::sleep(args.interval);
    }
    Ok(())
}

/// Expected totals per `family{labels}` of one worker run of `steps` steps.
fn expected_run(index: u64, steps: u64, into: &mut BTreeMap<String, f64>) {
    let mut add = |key: String, v: f64| *into.entry(key).or_insert(0.0) += v;
    let n = steps as f64;
    let stage = |s: &str| format!("pipeline.stage.name=\"{s}\"");
    add(format!("pipeline.stage.items{{{}}}", stage("tokenize")), 10.0 * (index + 1) as f64 * n);
    add(format!("pipeline.stage.items{{{}}}", stage("embed")), 3.0 * n);
    add(format!("pipeline.stage.bytes{{{}}}", stage("tokenize")), 1000.0 * (index + 1) as f64 * n);
    let observations: Vec<f64> = (1..=steps).map(|s| DURATIONS[(s % 4) as usize]).collect();
    add(format!("task.duration.count{{{}}}", stage("tokenize")), n);
    add(format!("task.duration.sum{{{}}}", stage("tokenize")), observations.iter().sum());
    for bound in BOUNDS.iter().copied().chain([f64::INFINITY]) {
        let le = if bound.is_infinite() { "+Inf".to_owned() } else { bound.to_string() };
        let count = observations.iter().filter(|v| **v <= bound).count() as f64;
        add(format!("task.duration.bucket{{le=\"{le}\",{}}}", stage("tokenize")), count);
    }
    let edge = format!(
        "pipeline.transfer.dst=\"{}\",pipeline.transfer.src=\"loader\",pipeline.transfer.transport=\"pipe\"",
        source_id(index)
    );
    add(format!("pipeline.transfer.bytes{{{edge}}}"), 4096.0 * n);
    add(format!("pipeline.transfer.count{{{edge}}}"), n);
    add(format!("pipeline.transfer.tensors{{{edge}}}"), 2.0 * n);
    add(format!("pipeline.transfer.duration{{{edge}}}"), 0.25 * n);
}

/// The hub's merged view in the same `family{labels}` form as [`expected_run`].
fn hub_totals(hub: &SnapshotHub) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for snapshot in hub.snapshot() {
        let family = snapshot.family().clone();
        for series in snapshot.series() {
            let mut labels: Vec<String> =
                family.label_names().iter().zip(series.labels).map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            labels.sort();
            let name = family.name();
            match family.kind() {
                pipetel::recorders::Kind::Gauge => {}
                pipetel::recorders::Kind::Counter => {
                    out.insert(format!("{name}{{{}}}", labels.join(",")), series.value);
                }
                pipetel::recorders::Kind::Histogram => {
                    out.insert(format!("{name}.count{{{}}}", labels.join(",")), series.count() as f64);
                    out.insert(format!("{name}.sum{{{}}}", labels.join(",")), series.sum);
                    for (i, c) in series.bucket_counts.iter().enumerate() {
                        let le = family.bounds().get(i).map_or_else(|| "+Inf".to_owned(), f64::to_string);
                        let mut with_le = labels.clone();
                        with_le.push(format!("le=\"{le}\""));
                        with_le.sort();
                        out.insert(format!("{name}.bucket{{{}}}", with_le.join(",")), *c as f64);
                    }
                }
            }
        }
    }
    out
}

struct Running {
    child: Child,
    reader: JoinHandle<TransportReport>,
}

fn spawn_worker(
    hub: &SnapshotHub,
    index: u64,
    args: &Args,
    pause: bool,
) -> Result<Running, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--worker", &index.to_string(), "--steps", &args.steps.to_string()])
        .args(["--interval-ms", &args.interval.as_millis().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if pause {
        cmd.args(["--pause-after", &args.kill_after.to_string()]);
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().ok_or("the worker's stdout is not piped")?;
    let reader = hub.spawn_reader(stdout)?;
    Ok(Running { child, reader })
}

fn finish(index: u64, run: Running) -> Result<TransportReport, Box<dyn std::error::Error>> {
    let Running { mut child, reader } = run;
    let status = child.wait()?;
    let report = reader.join().map_err(|_| format!("the reader of worker {index} panicked"))?;
    println!(
        "worker {index} exited ({status}): received={} accepted={} ignored={} refused={} restarts={}",
        report.received, report.accepted, report.ignored, report.refused, report.restarts
    );
    Ok(report)
}

fn parent(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("multiprocess"))?;
    match telemetry.prometheus_addr() {
        Some(addr) => println!("serving metrics at http://{addr}/metrics (ready {:?} after start)", started.elapsed()),
        None => println!("no Prometheus endpoint configured; exporting as configured"),
    }
    let hub = SnapshotHub::new(HubConfig::default().with_stale_after(args.stale_after));

    let mut running = Vec::new();
    for index in 0..args.workers {
        running.push((index, spawn_worker(&hub, index, args, args.restart_worker == Some(index))?));
    }
    let mut expected = BTreeMap::new();
    let mut restarts = 0;
    if let Some(index) = args.restart_worker {
        // Kill the worker once the hub holds its envelope of the kill step: from then on, what
        // that run contributes is known exactly.
        let source = source_id(index);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !hub.sources().iter().any(|s| s.source == source && s.sequence == args.kill_after) {
            if Instant::now() > deadline {
                return Err(format!("worker {index} never reached step {}", args.kill_after).into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let position = running.iter().position(|(i, _)| *i == index).ok_or("the worker to restart is not running")?;
        let (_, mut run) = running.remove(position);
        run.child.kill()?;
        restarts += finish(index, run)?.restarts;
        expected_run(index, args.kill_after, &mut expected);
        println!("worker {index} killed after step {}; restarting it", args.kill_after);
        running.push((index, spawn_worker(&hub, index, args, false)?));
    }
    for (index, run) in running {
        restarts += finish(index, run)?.restarts;
        expected_run(index, args.steps, &mut expected);
    }

    for (series, value) in &expected {
        println!("expected {series} {value}");
    }
    let merged = hub_totals(&hub);
    let verdict = if merged == expected { "match" } else { "MISMATCH" };
    if merged != expected {
        for (series, value) in &merged {
            println!("hub {series} {value}");
        }
    }
    let total = |family: &str| expected.iter().filter(|(k, _)| k.starts_with(family)).map(|(_, v)| v).sum::<f64>();
    println!(
        "done: workers={} steps={} restarts={restarts} items={} bytes={} transfer_bytes={} hub totals {verdict} expected",
        args.workers,
        args.steps,
        total("pipeline.stage.items{"),
        total("pipeline.stage.bytes{"),
        total("pipeline.transfer.bytes{"),
    );
    std::thread::sleep(args.linger);
    let outcome = telemetry.shutdown();
    println!("shutdown: {outcome:?}");
    if merged != expected {
        return Err("the hub's totals differ from what the workers recorded".into());
    }
    Ok(())
}
