//! The fleet's stores, real and on loopback: VictoriaMetrics (Prometheus remote write in, PromQL
//! out), VictoriaLogs (OTLP logs in, LogsQL out: the rows store) and Jaeger v2 (OTLP traces in,
//! its query API out), each on free `127.0.0.1` ports with storage of its own, waited for until
//! ready, killed on drop.
//!
//! The binaries come from `PIPETEL_VICTORIA_METRICS_BIN`, `PIPETEL_VICTORIA_LOGS_BIN` and
//! `PIPETEL_JAEGER_BIN` (`scripts/build-backends` builds them and prints their paths). Without
//! them a test is skipped with a loud line, unless `PIPETEL_REQUIRE_PEERS=1` (or `CI`) says the
//! peers must be there, where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::http::{http, urlencode};
use super::ports::free_port;
use super::process::{wait_for, Process};
use super::prometheus::Series;

/// Jaeger v2 as the tests run it (`tests/support/jaeger.yaml`): OTLP in, spans in memory, the
/// query API out, every listener on the addresses its environment names (no `0.0.0.0`), no
/// metrics of its own.
const JAEGER_CONFIG: &str = include_str!("jaeger.yaml");

/// The three store binaries.
#[derive(Debug, Clone)]
pub struct StoreBinaries {
    /// `victoria-metrics`.
    pub victoria_metrics: PathBuf,
    /// `victoria-logs`.
    pub victoria_logs: PathBuf,
    /// `jaeger` (v2).
    pub jaeger: PathBuf,
}

/// Whether missing peers are a failure here (`scripts/test`, CI) rather than a skip.
pub fn peers_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var("PIPETEL_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

/// The store binaries from the environment, or `None` after a loud line saying `test` was
/// skipped. Panics instead where peers are required, or where a variable names no file.
pub fn store_binaries(test: &str) -> Option<StoreBinaries> {
    let vars = ["PIPETEL_VICTORIA_METRICS_BIN", "PIPETEL_VICTORIA_LOGS_BIN", "PIPETEL_JAEGER_BIN"];
    let mut paths = Vec::new();
    let mut missing = Vec::new();
    for var in vars {
        match std::env::var_os(var).filter(|p| !p.is_empty()).map(PathBuf::from) {
            Some(p) if p.is_file() => paths.push(p),
            Some(p) => panic!("{test}: {var}={} is not a file: run scripts/build-backends", p.display()),
            None => missing.push(var),
        }
    }
    if missing.is_empty() {
        let [vm, vl, jaeger]: [PathBuf; 3] = paths.try_into().expect("three paths");
        return Some(StoreBinaries { victoria_metrics: vm, victoria_logs: vl, jaeger });
    }
    let how = "`scripts/build-backends` builds the stores and prints their paths \
               (victoria-metrics=, victoria-logs=, jaeger=); `scripts/test` sets the variables";
    assert!(!peers_required(), "{test}: {} not set; {how}", missing.join(", "));
    eprintln!(
        "\n!!! {test}: SKIPPED, {} not set. This test needs the fleet's real stores: {how}. !!!\n",
        missing.join(", ")
    );
    None
}

/// A scratch directory of its own for one store.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-{name}-{}-{}", std::process::id(), free_port()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Waits until `GET url` answers 200 (and `ready` accepts the body) or panics after 30 s,
/// showing what `process` printed; panics at once when the process exits.
fn wait_ready(name: &str, process: &mut Process, url: &str, ready: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((200, body)) = http("GET", url) {
            if ready(&body) {
                return;
            }
        }
        if let Some(status) = process.exited() {
            std::thread::sleep(Duration::from_millis(200));
            panic!("{name} exited ({status}) before it was ready at {url}; output:\n{}", process.output());
        }
        assert!(Instant::now() < deadline, "{name} not ready at {url} within 30 s; output:\n{}", process.output());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A GET that must answer 200; the body parsed as JSON.
fn get_json(url: &str) -> Result<Value, String> {
    match http("GET", url)? {
        (200, body) => serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON ({e}): {body}")),
        (status, body) => Err(format!("{url}: HTTP {status}: {body}")),
    }
}

/// A store's process and its scratch directory: the process is killed and the directory
/// removed when it is dropped.
struct Server {
    process: Process,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.process.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A VictoriaMetrics or VictoriaLogs binary, `name`, started on a free loopback port with
/// storage of its own and `args`; waits for `/health`. Returns its base URL and its server.
fn victoria(bin: &Path, name: &str, args: &[&str]) -> (String, Server) {
    let (port, dir) = (free_port(), scratch(name));
    let mut cmd = Command::new(bin);
    cmd.arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg(format!("-storageDataPath={}", dir.display()))
        .args(args)
        .arg("-loggerLevel=WARN");
    let mut process = Process::spawn(name, cmd);
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(name, &mut process, &format!("{url}/health"), |b| b.trim() == "OK");
    (url, Server { process, dir })
}

/// VictoriaMetrics, single node.
pub struct VictoriaMetrics {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    server: Server,
}

impl VictoriaMetrics {
    /// Starts it on a free loopback port with storage of its own; waits for `/health`.
    pub fn start(bin: &Path) -> Self {
        // A sample is queryable as soon as it is stored (the default holds back the last 30 s).
        let (url, server) = victoria(bin, "victoria-metrics", &["-search.latencyOffset=0s", "-search.disableCache"]);
        Self { url, server }
    }

    /// Where the collector's remote write goes.
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.url)
    }

    /// Runs an instant PromQL query (`/api/v1/query`); returns `(labels, value)` per series.
    pub fn query(&self, promql: &str) -> Result<Vec<Series>, String> {
        super::prometheus::promql_query(&self.url, promql)
    }

    /// Waits, query by query, until each `(promql, value)` returns series that all equal `value`;
    /// panics naming the query and its last result after `timeout`.
    pub fn wait_for_values<Q: AsRef<str>>(&self, expected: impl IntoIterator<Item = (Q, f64)>, timeout: Duration) {
        for (promql, value) in expected {
            let promql = promql.as_ref();
            let deadline = Instant::now() + timeout;
            loop {
                let last = self.query(promql);
                if matches!(&last, Ok(r) if !r.is_empty() && r.iter().all(|(_, v)| *v == value)) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "VictoriaMetrics: {promql} never returned {value} within {timeout:?}; last result {last:?}"
                );
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }

    /// What it printed.
    pub fn output(&self) -> String {
        self.server.process.output()
    }
}

/// VictoriaLogs, single node: the fleet's rows store.
pub struct VictoriaLogs {
    /// Base URL, e.g. `http://127.0.0.1:41234` (what `pipetel rows --url` takes).
    pub url: String,
    server: Server,
}

impl VictoriaLogs {
    /// Starts it on a free loopback port with storage of its own; waits for `/health`.
    pub fn start(bin: &Path) -> Self {
        let (url, server) = victoria(bin, "victoria-logs", &[]);
        Self { url, server }
    }

    /// Runs a LogsQL query (`/select/logsql/query`); returns every log entry, its fields as
    /// VictoriaLogs gives them (all values strings).
    pub fn query(&self, logsql: &str) -> Result<Vec<Map<String, Value>>, String> {
        let url = format!("{}/select/logsql/query?query={}", self.url, urlencode(logsql));
        let body = match http("GET", &url)? {
            (200, body) => body,
            (status, body) => return Err(format!("LogsQL {logsql:?}: HTTP {status}: {body}")),
        };
        body.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => Ok(m),
                _ => Err(format!("LogsQL {logsql:?}: not a JSON object per line: {l}")),
            })
            .collect()
    }

    /// The number of entries `logsql` matches (a `stats count()` query).
    pub fn count(&self, logsql: &str) -> Result<u64, String> {
        let rows = self.query(&format!("{logsql} | stats count() n"))?;
        let n = rows.first().and_then(|r| r.get("n")).and_then(Value::as_str).unwrap_or("0");
        n.parse().map_err(|_| format!("LogsQL count of {logsql:?}: {n:?} is not a number"))
    }

    /// What it printed.
    pub fn output(&self) -> String {
        self.server.process.output()
    }
}

/// Jaeger v2 with in-memory storage.
pub struct Jaeger {
    /// OTLP gRPC `host:port`, where a collector's `otlp` exporter sends.
    pub otlp_grpc: String,
    /// OTLP HTTP base URL.
    pub otlp_http: String,
    /// Query API base URL (`/api/traces/{id}`, `/api/services`).
    pub query_url: String,
    server: Server,
}

impl Jaeger {
    /// Starts it with [`JAEGER_CONFIG`] on free loopback ports; waits for its health check and
    /// its query API.
    pub fn start(bin: &Path) -> Self {
        let dir = scratch("jaeger");
        let config = dir.join("jaeger.yaml");
        std::fs::write(&config, JAEGER_CONFIG).unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));
        let at = || format!("127.0.0.1:{}", free_port());
        let env: BTreeMap<&str, String> = [
            ("JAEGER_HEALTH_ENDPOINT", at()),
            ("JAEGER_QUERY_HTTP_ENDPOINT", at()),
            ("JAEGER_QUERY_GRPC_ENDPOINT", at()),
            ("JAEGER_OTLP_GRPC_ENDPOINT", at()),
            ("JAEGER_OTLP_HTTP_ENDPOINT", at()),
        ]
        .into_iter()
        .collect();
        let mut cmd = Command::new(bin);
        cmd.arg("--config").arg(&config).envs(&env);
        let mut process = Process::spawn("jaeger", cmd);
        let healthy = |b: &str| serde_json::from_str::<Value>(b).is_ok_and(|v| v["healthy"] == true);
        wait_ready("jaeger", &mut process, &format!("http://{}/status", env["JAEGER_HEALTH_ENDPOINT"]), healthy);
        let query_url = format!("http://{}", env["JAEGER_QUERY_HTTP_ENDPOINT"]);
        wait_ready("jaeger", &mut process, &format!("{query_url}/api/services"), |_| true);
        Self {
            otlp_grpc: env["JAEGER_OTLP_GRPC_ENDPOINT"].clone(),
            otlp_http: format!("http://{}", env["JAEGER_OTLP_HTTP_ENDPOINT"]),
            query_url,
            server: Server { process, dir },
        }
    }

    /// The spans of trace `trace_id` (32 hex digits) from `/api/traces/{id}` (Jaeger's JSON
    /// spans); `Ok(None)` when Jaeger does not know the trace.
    pub fn trace(&self, trace_id: &str) -> Result<Option<Vec<Value>>, String> {
        let url = format!("{}/api/traces/{trace_id}", self.query_url);
        match http("GET", &url)? {
            (404, _) => Ok(None),
            (200, body) => {
                let v: Value = serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON ({e}): {body}"))?;
                let spans: Vec<Value> = v["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["traceID"] == trace_id)
                    .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
                    .collect();
                Ok((!spans.is_empty()).then_some(spans))
            }
            (status, body) => Err(format!("{url}: HTTP {status}: {body}")),
        }
    }

    /// Waits until trace `trace_id` is there with at least `min_spans` spans; returns them.
    pub fn wait_for_trace(&self, trace_id: &str, min_spans: usize, timeout: Duration) -> Vec<Value> {
        wait_for(&format!("trace {trace_id} in Jaeger with {min_spans} spans"), timeout, || {
            self.trace(trace_id).ok().flatten().filter(|s| s.len() >= min_spans)
        })
    }

    /// What it printed.
    pub fn output(&self) -> String {
        self.server.process.output()
    }
}

/// The three stores of a fleet, started together.
pub struct Stores {
    /// Metrics.
    pub metrics: VictoriaMetrics,
    /// Rows (logs).
    pub logs: VictoriaLogs,
    /// Traces.
    pub traces: Jaeger,
}

impl Stores {
    /// Starts the three stores, or returns `None` (after a loud line) where their binaries are
    /// not configured and peers are not required (see [`store_binaries`]).
    pub fn start(test: &str) -> Option<Self> {
        let bins = store_binaries(test)?;
        Some(Self {
            metrics: VictoriaMetrics::start(&bins.victoria_metrics),
            logs: VictoriaLogs::start(&bins.victoria_logs),
            traces: Jaeger::start(&bins.jaeger),
        })
    }

    /// The environment `otel-collector/gateway-stores.yaml` reads to reach these stores.
    pub fn gateway_env(&self) -> [(&'static str, String); 3] {
        [
            ("OTELCOL_VICTORIA_METRICS_URL", self.metrics.url.clone()),
            ("OTELCOL_VICTORIA_LOGS_URL", self.logs.url.clone()),
            ("OTELCOL_JAEGER_ENDPOINT", self.traces.otlp_grpc.clone()),
        ]
    }
}
