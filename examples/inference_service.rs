//! A synthetic inference service: a bounded queue, a few worker threads, some failed and some
//! cancelled tasks, measured with `pipetel::ServiceMetrics` and an application registry, served
//! at `http://localhost:9464/metrics`. With `PIPETEL_NVML_LIBRARY` pointing at an NVML library
//! the GPU gauges appear too (`init` starts them). Prints the totals at the end.
//!
//! ```text
//! cargo run --example inference_service -- --seconds 10 --linger-seconds 30
//! ```
//! Flags: `--seconds N` (how long submitting takes, default 5), `--tasks N` (default 200),
//! `--workers N` (default 4), `--linger-seconds N` (keep serving afterwards, default 0).
//!
//! Counts are deterministic: task `i` is cancelled before it is queued when `i % 25 == 7`, fails
//! when `i % 10 == 3`, and otherwise completes with `1 + (i * 37) % 500` tokens, observed by
//! the `inference_tokens` summary. The last lines printed are the totals, the observed token
//! counts and `done: ...`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use pipetel::registry::{Opts, Registry, Sample};
use pipetel::ServiceMetrics;

/// Model names: label values with a quote, a backslash, a newline and non-ASCII text, which
/// must reach Prometheus unchanged.
const MODELS: [&str; 4] = ["llama \"8b\"", "C:\\models\\mistral", "two\nlines", "日本語モデル ✓"];
/// Queue capacity.
const CAPACITY: usize = 16;

struct Args {
    seconds: u64,
    tasks: usize,
    workers: usize,
    linger: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { seconds: 5, tasks: 200, workers: 4, linger: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let n: u64 = value.parse().map_err(|_| format!("{flag}: {value:?} is not a whole number"))?;
        let size = || usize::try_from(n).map_err(|_| format!("{flag} {n} is too large"));
        match flag.as_str() {
            "--seconds" => args.seconds = n,
            "--tasks" => args.tasks = size()?,
            "--workers" => args.workers = size()?.max(1),
            "--linger-seconds" => args.linger = n,
            _ => return Err(format!("unknown flag {flag}; expected --seconds, --tasks, --workers, --linger-seconds")),
        }
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The queue's occupancy, owned by the service, published through `update_queue_metrics`.
#[derive(Default)]
struct Occupancy {
    pending: AtomicUsize,
    processing: AtomicUsize,
}

impl Occupancy {
    fn publish(&self, service: &ServiceMetrics) {
        let (p, r) = (self.pending.load(Ordering::SeqCst), self.processing.load(Ordering::SeqCst));
        service.update_queue_metrics(p + r, p, r);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    // Registered before `init` on purpose: pipetel re-registers them with the real providers.
    let app = Registry::new("inference")?;
    let requests = app.counter_with("requests", "Inference requests by model", Opts::new().labels(["model"]))?;
    let tokens = app.summary("tokens", "Tokens generated per completed request")?;
    let telemetry = pipetel::init(pipetel::Config::from_env()?.with_service_name("inference-service"))?;

    let service = ServiceMetrics::new("service")?;
    let occupancy = Arc::new(Occupancy::default());
    let workers_busy = occupancy.clone();
    app.gauge_fn("workers_busy", "Workers processing a task now", move || {
        vec![Sample::new([("pool", "default")], workers_busy.processing.load(Ordering::SeqCst) as f64)]
    })?;
    // A collector written for a text-based client, migrated as is.
    app.add_text_collector(|| {
        "# HELP legacy_model_cache_entries Entries in the model cache\n# TYPE legacy_model_cache_entries gauge\n\
         legacy_model_cache_entries{cache=\"weights\"} 4\n"
            .to_string()
    });
    let handles: Vec<_> = MODELS.iter().map(|m| requests.with([("model", *m)])).collect::<Result<_, _>>()?;

    let (tx, rx) = mpsc::sync_channel::<(usize, pipetel::service::Task)>(CAPACITY);
    let rx = Arc::new(Mutex::new(rx));
    let observed = Arc::new(Mutex::new(Vec::<u64>::new()));
    let workers: Vec<_> = (0..args.workers)
        .map(|_| {
            let (rx, service, occupancy, tokens, observed) =
                (rx.clone(), service.clone(), occupancy.clone(), tokens.clone(), observed.clone());
            std::thread::spawn(move || loop {
                let next = match rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok((i, task)) = next else { return };
                occupancy.pending.fetch_sub(1, Ordering::SeqCst);
                occupancy.processing.fetch_add(1, Ordering::SeqCst);
                occupancy.publish(&service);
                task.started();
                std::thread::sleep(Duration::from_millis(2 + (i % 5) as u64));
                occupancy.processing.fetch_sub(1, Ordering::SeqCst);
                if i % 10 == 3 {
                    task.failed();
                } else {
                    let n = 1 + (i as u64 * 37) % 500;
                    tokens.observe(n as f64);
                    if let Ok(mut o) = observed.lock() {
                        o.push(n);
                    }
                    task.completed();
                }
                occupancy.publish(&service);
            })
        })
        .collect();

    let pace = Duration::from_secs(args.seconds) / u32::try_from(args.tasks.max(1)).unwrap_or(u32::MAX);
    let start = Instant::now();
    let mut cancelled = 0usize;
    for i in 0..args.tasks {
        handles[i % MODELS.len()].inc();
        let task = service.task_created();
        if i % 25 == 7 {
            task.cancelled();
            cancelled += 1;
            continue;
        }
        occupancy.pending.fetch_add(1, Ordering::SeqCst);
        occupancy.publish(&service);
        // Blocks while the queue is full: back-pressure, not loss.
        if tx.send((i, task)).is_err() {
            return Err("every worker stopped".into());
        }
        let due = pace * u32::try_from(i + 1).unwrap_or(u32::MAX);
        std::thread::sleep(due.saturating_sub(start.elapsed()));
    }
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    occupancy.publish(&service);

    let (created, completed, failed, cancelled_counted) = service.task_counts();
    if cancelled_counted as usize != cancelled {
        return Err(format!("cancelled {cancelled} tasks but counted {cancelled_counted}").into());
    }
    let mut values = observed.lock().map(|o| o.clone()).unwrap_or_default();
    values.sort_unstable();
    println!("model requests:");
    for (m, h) in MODELS.iter().zip(&handles) {
        println!("  {:?} {}", m, h.value());
    }
    println!("tokens observed: {}", values.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
    println!("done: created={created} completed={completed} failed={failed} cancelled={cancelled_counted}");
    std::thread::sleep(Duration::from_secs(args.linger));
    telemetry.shutdown()?;
    Ok(())
}
