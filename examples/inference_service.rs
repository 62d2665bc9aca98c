//! A synthetic inference service: a bounded queue, a few worker threads, some failed and some
//! cancelled tasks, measured with `pipetel::ServiceMetrics` and an application registry, served
//! at `http://localhost:9464/metrics`. With `PIPETEL_NVML_LIBRARY` pointing at an NVML library
//! the GPU gauges appear too (`init` starts them). Prints the totals at the end.
//!
//! ```text
//! cargo run --example inference_service -- --seconds 10 --linger-seconds 30
//! ```
//! Flags (`--help` lists them): `--seconds N` (how long submitting takes, default 5), `--tasks N` (default 200),
//! `--workers N` (default 4), `--linger-seconds N` (keep serving afterwards, default 0),
//! `--http-port N` (serve the HTTP API below on `127.0.0.1:N`; `0` picks a free port; off when
//! absent), `--http-requests N` (after the synthetic tasks, send `N` requests to the API
//! and check each status; needs `--http-port`).
//!
//! Counts are deterministic: task `i` is cancelled before it is queued when `i % 25 == 7`, fails
//! when `i % 10 == 3`, and otherwise completes with `1 + (i * 37) % 500` tokens, observed by
//! the `inference_tokens` summary. The last lines printed are the totals, the observed token
//! counts and `done: ...`.
//!
//! The HTTP API is an axum router on a Tokio runtime of the example's own, measured by
//! `pipetel::http` (`http.server.*` metrics; `PIPETEL_HTTP_METRICS=false` turns them off). It
//! serves while the synthetic tasks are submitted, then stops before the totals are printed:
//! - `POST /v1/infer` with body `{"request": i}`: task `i` under the rules above through the
//!   same queue and workers; `200` with `{"request": i, "tokens": n}` when it completes, `500`
//!   when it fails, `503` when it is shed (cancelled) or the queue stays full for 5 s, `400`
//!   for a body without a whole-number `request`.
//! - `GET /healthz`: `200`.
//!
//! The self-driving client (`--http-requests N`) first gets `/healthz` once, then sends request
//! `k` (0-based) a body that is not JSON when `k % 20 == 19` and `{"request": tasks + k}`
//! otherwise, and prints the count of each status before the totals:
//! `http requests: POST /v1/infer 200=a 400=b 500=c 503=d` and
//! `http requests: GET /healthz 200=1`.

mod cli;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use pipetel::registry::{Counter, Registry, Sample};
use pipetel::service::Task;
use pipetel::ServiceMetrics;

/// Model names: label values with a quote, a backslash, a newline and non-ASCII text, which
/// must reach Prometheus unchanged.
const MODELS: [&str; 4] = ["llama \"8b\"", "C:\\models\\mistral", "two\nlines", "日本語モデル ✓"];
/// Queue capacity.
const CAPACITY: usize = 16;
/// How long an API request waits for room in a full queue before it is answered `503`.
const ENQUEUE_PATIENCE: Duration = Duration::from_secs(5);

struct Args {
    seconds: u64,
    tasks: usize,
    workers: usize,
    linger: Duration,
    http_port: Option<u16>,
    http_requests: usize,
}

fn main() -> std::process::ExitCode {
    cli::exit_code(run(parse_args()))
}

fn parse_args() -> Args {
    use clap::{value_parser, Arg, Command};
    let m = Command::new("inference_service")
        .about("A synthetic inference service: a bounded queue, worker threads, failed and cancelled tasks, service metrics")
        .arg(cli::number("seconds", "How long submitting the synthetic tasks takes, in seconds", "5").value_parser(value_parser!(u64)))
        .arg(cli::number("tasks", "Synthetic tasks to submit", "200").value_parser(value_parser!(usize)))
        .arg(cli::number("workers", "Worker threads (at least 1)", "4").value_parser(value_parser!(usize)))
        .arg(cli::linger("Keep serving metrics this long afterwards"))
        .arg(
            Arg::new("http-port")
                .long("http-port")
                .value_name("PORT")
                .value_parser(value_parser!(u16))
                .help("Serve the HTTP API (POST /v1/infer, GET /healthz) on 127.0.0.1:PORT; 0 picks a free port"),
        )
        .arg(
            cli::number("http-requests", "After the synthetic tasks, send N requests to the API and count each status", "0")
                .value_parser(value_parser!(usize)),
        )
        .get_matches();
    let http_requests = m.get_one("http-requests").copied().unwrap_or(0);
    let http_port = m.get_one::<u16>("http-port").copied();
    if http_requests > 0 && http_port.is_none() {
        Command::new("inference_service")
            .error(clap::error::ErrorKind::MissingRequiredArgument, "--http-requests needs --http-port")
            .exit();
    }
    Args {
        seconds: m.get_one("seconds").copied().unwrap_or(5),
        tasks: m.get_one("tasks").copied().unwrap_or(200),
        workers: m.get_one("workers").copied().unwrap_or(4).max(1),
        linger: cli::linger_of(&m),
        http_port,
        http_requests,
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

/// How a task ended, reported back to an API request waiting for it.
enum Outcome {
    Completed { tokens: u64 },
    Failed,
}

/// One queued task; `reply` is set when an API request waits for the outcome.
struct Job {
    i: usize,
    task: Task,
    reply: Option<tokio::sync::oneshot::Sender<Outcome>>,
}

/// Everything the API handlers share with the synthetic submitter.
#[derive(Clone)]
struct Api {
    tx: mpsc::SyncSender<Job>,
    service: ServiceMetrics,
    occupancy: Arc<Occupancy>,
    handles: Arc<Vec<Counter>>,
    /// Tasks cancelled by the API (shed, or the queue stayed full), for the final cross-check.
    cancelled: Arc<AtomicUsize>,
}

type Reply = (StatusCode, String);

/// `POST /v1/infer`: runs task `i` (from the body `{"request": i}`) through the queue and waits
/// for its outcome.
async fn infer(State(api): State<Api>, body: String) -> Reply {
    let Some(i) = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("request")?.as_u64())
        .and_then(|i| usize::try_from(i).ok())
    else {
        return (StatusCode::BAD_REQUEST, r#"{"error":"expected a body {\"request\": <whole number>}"}"#.into());
    };
    api.handles[i % MODELS.len()].inc();
    let task = api.service.task_created();
    if i % 25 == 7 {
        // Shed before queueing, as the synthetic submitter cancels the same tasks.
        task.cancelled();
        api.cancelled.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, format!(r#"{{"request":{i},"error":"shed"}}"#));
    }
    let (reply, outcome) = tokio::sync::oneshot::channel();
    api.occupancy.pending.fetch_add(1, Ordering::SeqCst);
    api.occupancy.publish(&api.service);
    // The queue is a blocking channel the worker threads own; an async handler must not block
    // on it, so it retries a non-blocking send until the queue has room or patience runs out.
    let deadline = Instant::now() + ENQUEUE_PATIENCE;
    let mut job = Job { i, task, reply: Some(reply) };
    loop {
        match api.tx.try_send(job) {
            Ok(()) => break,
            Err(mpsc::TrySendError::Full(back)) if Instant::now() < deadline => {
                job = back;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(mpsc::TrySendError::Full(back) | mpsc::TrySendError::Disconnected(back)) => {
                api.occupancy.pending.fetch_sub(1, Ordering::SeqCst);
                api.occupancy.publish(&api.service);
                back.task.cancelled();
                api.cancelled.fetch_add(1, Ordering::SeqCst);
                return (StatusCode::SERVICE_UNAVAILABLE, format!(r#"{{"request":{i},"error":"queue full"}}"#));
            }
        }
    }
    match outcome.await {
        Ok(Outcome::Completed { tokens }) => (StatusCode::OK, format!(r#"{{"request":{i},"tokens":{tokens}}}"#)),
        Ok(Outcome::Failed) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!(r#"{{"request":{i},"error":"inference failed"}}"#))
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, format!(r#"{{"request":{i},"error":"worker stopped"}}"#)),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

/// The HTTP API on its own runtime; stops (gracefully) when dropped through [`HttpApi::stop`].
struct HttpApi {
    runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HttpApi {
    fn start(port: u16, api: Api, layer: pipetel::http::HttpMetricsLayer) -> Result<Self, Box<dyn std::error::Error>> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
            .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))?;
        let addr = listener.local_addr()?;
        // `layer` after the routes, so the middleware sees the matched route (`http.route`).
        let app =
            Router::new().route("/v1/infer", post(infer)).route("/healthz", get(healthz)).with_state(api).layer(layer);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = runtime.spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(HttpApi { runtime, addr, stop, server })
    }

    /// Stops accepting, lets requests in flight finish, and drops the handlers (and with them
    /// their senders to the queue, so the workers can stop).
    fn stop(self) -> Result<(), Box<dyn std::error::Error>> {
        let _ = self.stop.send(());
        let served = self.runtime.block_on(async { tokio::time::timeout(Duration::from_secs(10), self.server).await });
        self.runtime.shutdown_timeout(Duration::from_secs(5));
        match served {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(format!("the HTTP API failed: {e}").into()),
            Ok(Err(e)) => Err(format!("the HTTP API task failed: {e}").into()),
            Err(_) => Err("the HTTP API did not stop within 10 s".into()),
        }
    }
}

/// The status each self-driven request must get, by the rules in the module docs.
fn expected_status(tasks: usize, k: usize) -> (String, u16) {
    if k % 20 == 19 {
        return ("not json".to_string(), 400);
    }
    let i = tasks + k;
    let status = if i % 25 == 7 {
        503
    } else if i % 10 == 3 {
        500
    } else {
        200
    };
    (format!(r#"{{"request":{i}}}"#), status)
}

/// Sends the deterministic requests; fails on any status other than the planned one. Returns
/// the count per route and status.
fn drive_http(addr: SocketAddr, tasks: usize, n: usize) -> Result<BTreeMap<(&'static str, u16), usize>, String> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
    let status = |r: Result<ureq::Response, ureq::Error>| match r {
        Ok(r) => Ok(r.status()),
        Err(ureq::Error::Status(code, _)) => Ok(code),
        Err(e) => Err(e.to_string()),
    };
    let mut counts = BTreeMap::new();
    let health = status(agent.get(&format!("http://{addr}/healthz")).call())?;
    if health != 200 {
        return Err(format!("GET /healthz answered {health}"));
    }
    *counts.entry(("GET /healthz", health)).or_insert(0) += 1;
    let url = format!("http://{addr}/v1/infer");
    for k in 0..n {
        let (body, want) = expected_status(tasks, k);
        let got = status(agent.post(&url).set("content-type", "application/json").send_string(&body))?;
        if got != want {
            return Err(format!("POST /v1/infer {body} answered {got}, expected {want}"));
        }
        *counts.entry(("POST /v1/infer", got)).or_insert(0) += 1;
    }
    Ok(counts)
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    // Registered before `init` on purpose: pipetel re-registers them with the real providers.
    let app = Registry::new("inference")?;
    let requests = app.counter_vec("requests", "Inference requests by model", &["model"])?;
    let tokens = app.summary("tokens", "Tokens generated per completed request")?;
    let config = pipetel::Config::from_env()?.with_service_name("inference-service");
    let telemetry = pipetel::init(config.clone())?;

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
    let handles: Arc<Vec<_>> =
        Arc::new(MODELS.iter().map(|m| requests.with([("model", *m)])).collect::<Result<_, _>>()?);

    let (tx, rx) = mpsc::sync_channel::<Job>(CAPACITY);
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
                let Ok(Job { i, task, reply }) = next else { return };
                occupancy.pending.fetch_sub(1, Ordering::SeqCst);
                occupancy.processing.fetch_add(1, Ordering::SeqCst);
                occupancy.publish(&service);
                task.started();
                std::thread::sleep(Duration::from_millis(2 + (i % 5) as u64));
                occupancy.processing.fetch_sub(1, Ordering::SeqCst);
                let outcome = if i % 10 == 3 {
                    task.failed();
                    Outcome::Failed
                } else {
                    let n = 1 + (i as u64 * 37) % 500;
                    tokens.observe(n as f64);
                    if let Ok(mut o) = observed.lock() {
                        o.push(n);
                    }
                    task.completed();
                    Outcome::Completed { tokens: n }
                };
                occupancy.publish(&service);
                if let Some(reply) = reply {
                    // The caller may have gone away; the task is counted either way.
                    let _ = reply.send(outcome);
                }
            })
        })
        .collect();

    let api_cancelled = Arc::new(AtomicUsize::new(0));
    let http_api = match args.http_port {
        Some(port) => {
            let api = Api {
                tx: tx.clone(),
                service: service.clone(),
                occupancy: occupancy.clone(),
                handles: handles.clone(),
                cancelled: api_cancelled.clone(),
            };
            // Built after `init`: the middleware takes its instruments from pipetel's provider.
            let api = HttpApi::start(port, api, pipetel::http::layer_for(&config))?;
            println!("http api listening on http://{}", api.addr);
            Some(api)
        }
        None => None,
    };

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
        if tx.send(Job { i, task, reply: None }).is_err() {
            return Err("every worker stopped".into());
        }
        let due = pace * u32::try_from(i + 1).unwrap_or(u32::MAX);
        std::thread::sleep(due.saturating_sub(start.elapsed()));
    }
    let mut http_counts = BTreeMap::new();
    if let Some(api) = http_api {
        let driven = if args.http_requests > 0 {
            drive_http(api.addr, args.tasks, args.http_requests)
        } else {
            Ok(BTreeMap::new())
        };
        api.stop()?;
        http_counts = driven?;
    }
    drop(tx);
    for w in workers {
        let _ = w.join();
    }
    occupancy.publish(&service);
    cancelled += api_cancelled.load(Ordering::SeqCst);

    let (created, completed, failed, cancelled_counted) = service.task_counts();
    if cancelled_counted as usize != cancelled {
        return Err(format!("cancelled {cancelled} tasks but counted {cancelled_counted}").into());
    }
    let mut values = observed.lock().map(|o| o.clone()).unwrap_or_default();
    values.sort_unstable();
    if args.http_requests > 0 {
        for route in ["POST /v1/infer", "GET /healthz"] {
            let by_status: Vec<String> =
                http_counts.iter().filter(|((r, _), _)| *r == route).map(|((_, s), n)| format!("{s}={n}")).collect();
            println!("http requests: {route} {}", by_status.join(" "));
        }
    }
    println!("model requests:");
    for (m, h) in MODELS.iter().zip(handles.iter()) {
        println!("  {:?} {}", m, h.value());
    }
    println!("tokens observed: {}", values.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
    println!("done: created={created} completed={completed} failed={failed} cancelled={cancelled_counted}");
    std::thread::sleep(args.linger);
    telemetry.shutdown()?;
    Ok(())
}
