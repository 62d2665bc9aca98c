//! Support for pipetel's end-to-end tests: real peers (Prometheus, an OTLP collector, `promtool`)
//! started on free loopback ports with bounded waits, and the example programs run as child
//! processes. A peer that cannot be found or started is a test failure, never a skip.
//!
//! Peers are located through environment variables that `scripts/test` sets, with fallbacks:
//! - `PIPETEL_PROMETHEUS_BIN` (default `prometheus` on `PATH`),
//! - `PIPETEL_PROMTOOL_BIN` (default `promtool` on `PATH`),
//! - `PIPETEL_ROTEL_BIN` (default `.venv/lib/python3*/site-packages/rotel/rotel-agent` in the
//!   workspace).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The workspace root (where `Cargo.toml` of this package lives).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A loopback port that was free a moment ago, never one this process handed out before: two
/// peers of one test (or two tests running side by side) cannot be given the same port.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port");
        let port = listener.local_addr().expect("local address").port();
        if handed_out.insert(port) {
            return port;
        }
    }
}

/// A loopback port held bound but not listening: every connection to it is refused for as long
/// as this value lives, and nothing else (no peer, no [`free_port`] caller) can take it meanwhile.
/// The stand-in for a collector that is down.
pub struct RefusingPort {
    _socket: socket2::Socket,
    port: u16,
}

impl RefusingPort {
    /// Binds a fresh ephemeral loopback port without listening on it.
    pub fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("create a TCP socket");
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
        socket.bind(&any.into()).expect("bind an ephemeral loopback port");
        let port = socket.local_addr().ok().and_then(|a| a.as_socket()).expect("local address").port();
        Self { _socket: socket, port }
    }

    /// The refused port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}

/// Polls `check` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A plain HTTP request; returns the status and the body (any status, no error for 4xx/5xx).
pub fn http(method: &str, url: &str) -> Result<(u16, String), String> {
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    match agent.request(method, url).call() {
        Ok(r) => {
            let status = r.status();
            r.into_string().map(|b| (status, b)).map_err(|e| e.to_string())
        }
        Err(ureq::Error::Status(status, r)) => Ok((status, r.into_string().unwrap_or_default())),
        Err(e) => Err(e.to_string()),
    }
}

/// The path of an example of this workspace, built now (once per test process) so a test
/// never runs a stale binary.
pub fn example_path(name: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().expect("example cache lock");
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--quiet", "--message-format=json", "-p", "pipetel-e2e", "--example", name])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build example {name}: {e}"));
    assert!(out.status.success(), "building example {name} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported no executable for example {name}"));
    built.insert(name.to_string(), path.clone());
    path
}

/// A child process whose stdout and stderr are collected; killed on drop.
pub struct Process {
    name: String,
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Process {
    /// Starts `command` with piped output.
    pub fn spawn(name: &str, mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut out = output.lock().expect("output lock");
                    out.push_str(&line);
                    out.push('\n');
                }
            });
        }
        Self { name: name.to_string(), child, output }
    }

    /// The operating system's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// Waits until the output contains `needle`; panics (showing the output) after `timeout`.
    pub fn wait_for_output(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.output();
            if out.contains(needle) {
                return out;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader threads a moment to drain the pipes.
                std::thread::sleep(Duration::from_millis(200));
                let out = self.output();
                if out.contains(needle) {
                    return out;
                }
                panic!("{} exited ({status}) before printing {needle:?}; output:\n{out}", self.name);
            }
            assert!(
                Instant::now() < deadline,
                "{} did not print {needle:?} within {timeout:?}; output:\n{out}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the process to exit; panics after `timeout`. Returns the exit code and output.
    pub fn wait(&mut self, timeout: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                std::thread::sleep(Duration::from_millis(200));
                return (status.code(), self.output());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit within {timeout:?}; output:\n{}", self.name, self.output());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

fn binary(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(default))
}

/// One series of a PromQL result: its labels and its value.
pub type Series = (BTreeMap<String, String>, f64);

/// The fake NVML driver state the end-to-end tests share (the format is documented at the top
/// of `crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c`): an H200 reporting every field and an
/// almost idle L4 reporting fewer (no encoder, power, ECC or clocks).
pub const FAKE_GPUS: &str = "count=2
0.uuid=GPU-00000000-1111-2222-3333-444444444444
0.name=Fake H200
0.util.gpu=42
0.util.mem=10
0.enc=5
0.dec=7
0.mem.total=143771533312
0.mem.used=71885766656
0.mem.free=71885766656
0.power=350000
0.energy=1000000
0.temp=61
0.ecc.corrected=3
0.ecc.uncorrected=0
0.clock.graphics=1980
0.clock.sm=1980
0.clock.mem=3201
0.fans=1
0.fan.0=30
0.pcie.tx=1000
0.pcie.rx=2000
1.uuid=GPU-99999999-8888-7777-6666-555555555555
1.name=Fake L4
1.util.gpu=3
1.util.mem=1
1.mem.total=24000000000
1.mem.used=6000000000
1.mem.free=18000000000
1.temp=70
";

/// A real Prometheus server with its own temporary storage, scraping every second.
pub struct Prometheus {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    process: Process,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port` strings) under the job `pipetel`, with
    /// `metrics_path` as the scrape path. Waits until it is ready.
    pub fn start(targets: &[String], metrics_path: &str) -> Self {
        let targets = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        Self::start_with(
            &format!("  - job_name: pipetel\n    metrics_path: '{metrics_path}'\n    static_configs:\n      - targets: [{targets}]\n"),
            &[],
        )
    }

    /// Starts Prometheus scraping each `(job, host:port)` on `/metrics` and evaluating `rule_files`
    /// every second. Waits until it is ready.
    pub fn start_jobs(jobs: &[(&str, String)], rule_files: &[PathBuf]) -> Self {
        let scrape: String = jobs
            .iter()
            .map(|(job, target)| format!("  - job_name: '{job}'\n    static_configs:\n      - targets: ['{target}']\n"))
            .collect();
        Self::start_with(&scrape, rule_files)
    }

    fn start_with(scrape_configs: &str, rule_files: &[PathBuf]) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("pipetel-prom-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus temp dir");
        let rules: String = rule_files.iter().map(|r| format!("  - '{}'\n", r.display())).collect();
        let rules = if rules.is_empty() { String::new() } else { format!("rule_files:\n{rules}") };
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n{rules}scrape_configs:\n{scrape_configs}"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let mut cmd = Command::new(binary("PIPETEL_PROMETHEUS_BIN", "prometheus"));
        cmd.arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        let process = Process::spawn("prometheus", cmd);
        let url = format!("http://127.0.0.1:{port}");
        let ready = format!("{url}/-/ready");
        wait_for("prometheus to be ready", Duration::from_secs(30), || match http("GET", &ready) {
            Ok((200, _)) => Some(()),
            _ => None,
        });
        Self { url, process, dir }
    }

    /// Any GET API path (`/api/v1/rules`, ...), as JSON.
    pub fn api(&self, path: &str) -> serde_json::Value {
        let (_, body) = http("GET", &format!("{}{path}", self.url)).expect("prometheus API");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// An instant query's raw result series, or the error Prometheus gives (a parse error).
    pub fn query_raw(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let (status, body) = http("GET", &format!("{}/api/v1/query?query={}", self.url, urlencode(promql)))?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!("HTTP {status}: {}", v["error"].as_str().unwrap_or(&body)));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until `promql` returns a series; false (printing Prometheus's output) after `timeout`.
    pub fn wait_for_series(&self, promql: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.query_raw(promql).is_ok_and(|r| !r.is_empty()) {
            if Instant::now() > deadline {
                eprintln!("prometheus output:\n{}", self.process.output());
                return false;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        true
    }

    /// The scrape targets as `/api/v1/targets` reports them.
    pub fn targets(&self) -> serde_json::Value {
        self.api("/api/v1/targets")
    }

    /// Waits until every active target has been scraped with `health == "up"`; returns the targets.
    pub fn wait_until_up(&self, timeout: Duration) -> Vec<serde_json::Value> {
        wait_for("every target up", timeout, || {
            let t = self.targets();
            let active = t["data"]["activeTargets"].as_array()?.clone();
            (!active.is_empty() && active.iter().all(|a| a["health"] == "up")).then_some(active)
        })
    }

    /// Runs an instant PromQL query; returns `(labels, value)` per series.
    pub fn query(&self, promql: &str) -> Result<Vec<Series>, String> {
        let url = format!("{}/api/v1/query?query={}", self.url, urlencode(promql));
        let (status, body) = http("GET", &url)?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!("query {promql:?} failed ({status}): {body}"));
        }
        let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
        Ok(result
            .iter()
            .map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                    .unwrap_or_default();
                let value = s["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
                (labels, value)
            })
            .collect())
    }

    /// Waits until `promql` returns at least one series whose value satisfies `accept`.
    pub fn wait_for_value(&self, promql: &str, timeout: Duration, accept: impl Fn(f64) -> bool) -> Vec<Series> {
        let mut last = Vec::new();
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = self.query(promql) {
                if !r.is_empty() && r.iter().all(|(_, v)| accept(*v)) {
                    return r;
                }
                last = r;
            }
            assert!(Instant::now() < deadline, "{promql} never reached the expected value within {timeout:?}; last result {last:?}; prometheus output:\n{}", self.process.output());
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.process.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `promtool check metrics` on an exposition; returns its output on failure.
pub fn promtool_check_metrics(exposition: &str) -> Result<(), String> {
    let mut child = Command::new(binary("PIPETEL_PROMTOOL_BIN", "promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start promtool: {e}"))?;
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// The `rotel-agent` binary: `PIPETEL_ROTEL_BIN`, or the one in the workspace's `.venv`.
pub fn rotel_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPETEL_ROTEL_BIN") {
        return PathBuf::from(p);
    }
    let lib = workspace_root().join(".venv/lib");
    let found = std::fs::read_dir(&lib)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("site-packages/rotel/rotel-agent"))
        .find(|p| p.exists());
    found.unwrap_or_else(|| {
        panic!(
            "rotel-agent not found: set PIPETEL_ROTEL_BIN or install rotel into {} (scripts/test does)",
            lib.display()
        )
    })
}

/// A real OTLP collector (`rotel-agent`) printing everything it receives.
pub struct Collector {
    /// The gRPC port.
    pub grpc_port: u16,
    /// The HTTP port.
    pub http_port: u16,
    process: Process,
}

impl Collector {
    /// Starts a collector on free ports (or the given ones) and waits until both accept connections.
    pub fn start_on(grpc_port: u16, http_port: u16) -> Self {
        let mut cmd = Command::new(rotel_binary());
        cmd.env("NO_COLOR", "1")
            .arg("start")
            .arg("--otlp-grpc-endpoint")
            .arg(format!("127.0.0.1:{grpc_port}"))
            .arg("--otlp-http-endpoint")
            .arg(format!("127.0.0.1:{http_port}"))
            .args(["--exporter", "blackhole"])
            .args([
                "--debug-log",
                "metrics",
                "--debug-log",
                "traces",
                "--debug-log",
                "logs",
                "--debug-log-verbosity",
                "detailed",
            ]);
        let process = Process::spawn("rotel-agent", cmd);
        for port in [grpc_port, http_port] {
            wait_for("the collector to listen", Duration::from_secs(20), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
            });
        }
        Self { grpc_port, http_port, process }
    }

    /// Starts a collector on free ports.
    pub fn start() -> Self {
        Self::start_on(free_port(), free_port())
    }

    /// The endpoint URL for a protocol (`grpc` or `http/protobuf`).
    pub fn endpoint(&self, protocol: &str) -> String {
        let port = if protocol == "grpc" { self.grpc_port } else { self.http_port };
        format!("http://127.0.0.1:{port}")
    }

    /// Everything the collector printed.
    pub fn output(&self) -> String {
        self.process.output()
    }

    /// Waits until the output contains `needle`.
    pub fn wait_for_output(&mut self, needle: &str, timeout: Duration) -> String {
        self.process.wait_for_output(needle, timeout)
    }

    /// Stops the collector.
    pub fn stop(&mut self) {
        self.process.kill();
    }
}

/// One block of the collector's detailed debug output: a span, a log record or a metric,
/// with its `key: value` lines (attributes flattened as `-> key: Type(value)`).
#[derive(Debug, Clone, Default)]
pub struct Block {
    /// The header line, e.g. `Span #3`.
    pub header: String,
    /// Fields in order of appearance (trimmed `key: value` pairs; attribute arrows removed).
    pub fields: Vec<(String, String)>,
}

impl Block {
    /// The first value of a field.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Splits the collector output into blocks starting at lines that begin with `kind #`
/// (`Span`, `LogRecord`, `Metric`, `ResourceSpans`, ...).
pub fn blocks(output: &str, kind: &str) -> Vec<Block> {
    let starts = [
        "ResourceSpans #",
        "ResourceLog #",
        "ResourceMetrics #",
        "ScopeSpans #",
        "ScopeLogs #",
        "ScopeMetrics #",
        "Span #",
        "LogRecord #",
        "Metric #",
    ];
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for line in output.lines() {
        let trimmed = line.trim();
        if starts.iter().any(|s| trimmed.starts_with(s)) {
            if let Some(b) = current.take() {
                out.push(b);
            }
            if trimmed.starts_with(&format!("{kind} #")) {
                current = Some(Block { header: trimmed.to_string(), fields: Vec::new() });
            }
            continue;
        }
        if let Some(b) = current.as_mut() {
            let t = trimmed.trim_start_matches("->").trim();
            if let Some((k, v)) = t.split_once(':') {
                b.fields.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    out.extend(current);
    out
}
