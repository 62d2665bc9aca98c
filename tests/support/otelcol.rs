//! The real OpenTelemetry Collector, `otelcol-pipetel` (built by `scripts/build-collector`),
//! running the shipped configs of `otel-collector/` (or a test's own, as the in-process tests of
//! `crates/pipetel` do) with their addresses moved onto loopback through the `${env:OTELCOL_...}`
//! variables the configs read, and [`OtelcolSink`], a second collector that stands in for Tempo
//! and Loki and writes what it receives as OTLP JSON.
//!
//! The binary comes from `PIPETEL_OTELCOL_BIN` (`scripts/test` exports it); a test states that it
//! needs it with `peers_available(&[Peer::Otelcol])`, which skips or fails it by the one rule of
//! [`super::peers`].

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::http::http;
use super::otlp_json::{log_records_in, spans_in, LogRecord, Span};
use super::peers::Peer;
use super::ports::free_port;
use super::process::Process;
use super::workspace::workspace_root;

/// The port the shipped configs serve the collector's own metrics on (fixed in the configs; only
/// the host moves, through `OTELCOL_TELEMETRY_HOST`).
pub const TELEMETRY_PORT: u16 = 8888;

/// The `otelcol-pipetel` binary from `PIPETEL_OTELCOL_BIN` ([`Peer::Otelcol`]).
pub fn otelcol_binary() -> PathBuf {
    Peer::Otelcol.binary()
}

/// A shipped collector config: `otel-collector/<file>`.
pub fn shipped_config(file: &str) -> PathBuf {
    workspace_root().join("otel-collector").join(file)
}

/// The feature gates every collector here runs with, as the shipped configs ask (README.md,
/// "Profiles"): `service.profilesSupport` lets a pipeline take the OTLP profiles signal (alpha in
/// v0.161.0); a config without a profiles pipeline runs the same with it.
pub const FEATURE_GATES: &str = "--feature-gates=service.profilesSupport";

/// Runs `otelcol-pipetel validate --config <config>` with `env`; returns its exit code and output.
pub fn validate(config: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(otelcol_binary());
    cmd.arg("validate").arg(FEATURE_GATES).arg("--config").arg(config).envs(env.iter().copied());
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// The variable a config's `file` exporter reads its path from ([`OtelcolBuilder::file_export`]).
pub const FILE_EXPORT_PATH: &str = "OTELCOL_FILE_EXPORT_PATH";

/// A loopback address of its own (`127.a.b.c`) where [`TELEMETRY_PORT`] is free, for one
/// collector's own metrics: several collectors (and other test runs on the machine) never
/// collide on port 8888.
pub fn spare_loopback_host() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let pid = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let host = format!("127.{}.{}.{}", 100 + (pid % 100), (pid / 100 + n / 250) % 256, 2 + n % 250);
        if TcpListener::bind((host.as_str(), TELEMETRY_PORT)).is_ok() {
            return host;
        }
        assert!(n < 5_000, "no loopback address with port {TELEMETRY_PORT} free");
    }
}

/// A collector to start: a config, its listen host, environment overrides and optionally a
/// hosts file of its own.
#[must_use = "call start()"]
pub struct OtelcolBuilder {
    name: String,
    config: PathBuf,
    host: String,
    grpc_port: Option<u16>,
    env: BTreeMap<String, String>,
    hosts_file: Option<PathBuf>,
}

impl OtelcolBuilder {
    /// Listens on `host` (`127.0.0.2`, ...) instead of `127.0.0.1`.
    pub fn host(mut self, host: &str) -> Self {
        self.host = host.to_string();
        self
    }

    /// Takes OTLP gRPC on this port (a free one otherwise).
    pub fn grpc_port(mut self, port: u16) -> Self {
        self.grpc_port = Some(port);
        self
    }

    /// Sets an environment variable the config reads (overrides the defaults below).
    pub fn env(mut self, key: &str, value: impl Into<String>) -> Self {
        self.env.insert(key.to_string(), value.into());
        self
    }

    /// Sends traces and logs to `sink`, the stand-in for Tempo and Loki (sets
    /// `OTELCOL_TEMPO_ENDPOINT` and `OTELCOL_LOKI_URL`).
    pub fn backends(self, sink: &OtelcolSink) -> Self {
        self.env("OTELCOL_TEMPO_ENDPOINT", sink.tempo_endpoint()).env("OTELCOL_LOKI_URL", sink.loki_url())
    }

    /// Has the config's `file` exporter (`path: ${env:OTELCOL_FILE_EXPORT_PATH}`) write to `path`,
    /// read back by [`Otelcol::exported`].
    pub fn file_export(self, path: &Path) -> Self {
        self.env(FILE_EXPORT_PATH, path.display().to_string())
    }

    /// Runs the collector in a mount namespace of its own whose `/etc/hosts` is `hosts` (through
    /// `unshare -m` and a bind mount: needs root, as CI has), so a DNS name can resolve to
    /// several loopback addresses.
    pub fn hosts_file(mut self, hosts: &Path) -> Self {
        self.hosts_file = Some(hosts.to_path_buf());
        self
    }

    /// Starts the collector and waits until its `health_check` reports it ready (30 s at most).
    ///
    /// Every address the shipped configs read from the environment is set unless given:
    /// listeners on the builder's host and free ports, the collector's own metrics on a
    /// [`spare_loopback_host`], and the backends (Tempo, Loki, remote write) on a loopback port
    /// nothing listens on, the persistent queues (`OTELCOL_FILE_STORAGE_DIR`) in a fresh
    /// temporary folder removed when the collector is dropped. `NODE_NAME` and `HOSTNAME` are the
    /// collector's name.
    pub fn start(self) -> Otelcol {
        let host = self.host.clone();
        let grpc_port = self.grpc_port.unwrap_or_else(free_port);
        let (http_port, health_port, prometheus_port) = (free_port(), free_port(), free_port());
        let nowhere = format!("127.0.0.1:{}", free_port());
        let storage =
            std::env::temp_dir().join(format!("pipetel-otelcol-storage-{}-{}", std::process::id(), free_port()));
        let mut env: BTreeMap<String, String> = [
            ("OTELCOL_OTLP_GRPC_ENDPOINT", format!("{host}:{grpc_port}")),
            ("OTELCOL_OTLP_HTTP_ENDPOINT", format!("{host}:{http_port}")),
            ("OTELCOL_HEALTH_CHECK_ENDPOINT", format!("{host}:{health_port}")),
            ("OTELCOL_ZPAGES_ENDPOINT", format!("{host}:{}", free_port())),
            ("OTELCOL_PPROF_ENDPOINT", format!("{host}:{}", free_port())),
            ("OTELCOL_PROMETHEUS_ENDPOINT", format!("{host}:{prometheus_port}")),
            ("OTELCOL_TELEMETRY_HOST", spare_loopback_host()),
            ("OTELCOL_TEMPO_ENDPOINT", nowhere.clone()),
            ("OTELCOL_LOKI_URL", format!("http://{nowhere}")),
            ("OTELCOL_REMOTE_WRITE_URL", format!("http://{nowhere}/api/v1/write")),
            ("OTELCOL_FILE_STORAGE_DIR", storage.display().to_string()),
            ("NODE_NAME", self.name.clone()),
            ("HOSTNAME", self.name.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        // Only a folder of its own is removed on drop: a test that keeps a queue across restarts
        // names the folder itself.
        let storage = (!self.env.contains_key("OTELCOL_FILE_STORAGE_DIR")).then_some(storage);
        env.extend(self.env);
        let mut cmd = match &self.hosts_file {
            None => Command::new(otelcol_binary()),
            Some(hosts) => {
                let mut cmd = Command::new("unshare");
                // $3.. are the collector's arguments, added below.
                let script = "mount --bind \"$1\" /etc/hosts && exec \"$2\" \"$3\" \"$4\" \"$5\"";
                cmd.args(["-m", "sh", "-c", script, "sh"]).arg(hosts).arg(otelcol_binary());
                cmd
            }
        };
        cmd.arg(FEATURE_GATES).arg("--config").arg(&self.config).envs(&env);
        let mut process = Process::spawn(&self.name, cmd);
        let health = format!("http://{}/", env["OTELCOL_HEALTH_CHECK_ENDPOINT"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) = http("GET", &health) {
                break;
            }
            if let Some(status) = process.exited() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "collector {} ({}) exited ({status}) before it was healthy; output:\n{}",
                    self.name,
                    self.config.display(),
                    process.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "collector {} ({}) not healthy at {health} within 30 s; output:\n{}",
                self.name,
                self.config.display(),
                process.output()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Otelcol { name: self.name, host, grpc_port, http_port, env, process, storage }
    }
}

/// A running `otelcol-pipetel`; killed on drop. When the test is failing, its output is printed
/// as it is dropped, so every failure message comes with what the collector said.
pub struct Otelcol {
    /// The name the test gave it (also its `NODE_NAME` / `HOSTNAME` unless overridden).
    pub name: String,
    /// The host its receivers listen on.
    pub host: String,
    /// The OTLP gRPC port.
    pub grpc_port: u16,
    /// The OTLP HTTP port.
    pub http_port: u16,
    env: BTreeMap<String, String>,
    process: Process,
    storage: Option<PathBuf>,
}

impl Otelcol {
    /// A collector running `otel-collector/<file>`, named `name`.
    pub fn shipped(name: &str, file: &str) -> OtelcolBuilder {
        Self::with_config(name, &shipped_config(file))
    }

    /// A collector running any config, named `name`.
    pub fn with_config(name: &str, config: &Path) -> OtelcolBuilder {
        OtelcolBuilder {
            name: name.to_string(),
            config: config.to_path_buf(),
            host: "127.0.0.1".to_string(),
            grpc_port: None,
            env: BTreeMap::new(),
            hosts_file: None,
        }
    }

    /// The OTLP endpoint URL for a protocol (`grpc` or `http/protobuf`), for a program to push to.
    pub fn endpoint(&self, protocol: &str) -> String {
        let port = if protocol == "grpc" { self.grpc_port } else { self.http_port };
        format!("http://{}:{port}", self.host)
    }

    /// The value of an environment variable the collector was started with.
    pub fn env(&self, key: &str) -> &str {
        self.env.get(key).map(String::as_str).unwrap_or_default()
    }

    /// What the config's `file` exporter wrote so far, one OTLP JSON request a line (empty
    /// before anything arrived, or without [`OtelcolBuilder::file_export`]).
    pub fn exported(&self) -> String {
        let path = self.env(FILE_EXPORT_PATH);
        if path.is_empty() {
            return String::new();
        }
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// Waits until `found` holds for [`Self::exported`], or `within` passes; the last text read
    /// either way (`Err` on the timeout).
    pub fn wait_for_exported(&self, within: Duration, found: impl Fn(&str) -> bool) -> Result<String, String> {
        let deadline = Instant::now() + within;
        loop {
            let text = self.exported();
            if found(&text) {
                return Ok(text);
            }
            if Instant::now() > deadline {
                return Err(text);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The collector's own metrics (`http://$OTELCOL_TELEMETRY_HOST:8888/metrics`).
    pub fn own_metrics(&self) -> Result<String, String> {
        let url = format!("http://{}:{TELEMETRY_PORT}/metrics", self.env("OTELCOL_TELEMETRY_HOST"));
        match http("GET", &url)? {
            (200, body) => Ok(body),
            (status, body) => Err(format!("{url}: HTTP {status}: {body}")),
        }
    }

    /// What to show when a test fails: the warnings and errors the collector logged (at most 40,
    /// deprecated-alias warnings left out) and its last 5 lines, each cut to 400 characters.
    pub fn notable_output(&self) -> String {
        let out = self.output();
        let lines: Vec<&str> = out.lines().collect();
        let notable = lines
            .iter()
            .filter(|l| (l.contains("\twarn\t") || l.contains("\terror\t")) && !l.contains("alias is deprecated"))
            .take(40);
        let last = lines[lines.len().saturating_sub(5)..].iter();
        notable.chain(last).map(|l| format!("{}\n", l.chars().take(400).collect::<String>())).collect()
    }

    /// Everything the collector printed so far.
    pub fn output(&self) -> String {
        self.process.output()
    }
}

impl Drop for Otelcol {
    fn drop(&mut self) {
        self.process.kill();
        if let Some(storage) = &self.storage {
            let _ = std::fs::remove_dir_all(storage);
        }
        if std::thread::panicking() {
            eprintln!(
                "--- collector {}: warnings, errors and the last lines of its output:\n{}---",
                self.name,
                self.notable_output()
            );
        }
    }
}

/// A second collector (`tests/support/otelcol-sink.yaml`) standing in for the backends of the
/// shipped configs: it takes OTLP gRPC (point `OTELCOL_TEMPO_ENDPOINT` at [`Self::tempo_endpoint`])
/// and OTLP HTTP, logs also at `/otlp/v1/logs` (point `OTELCOL_LOKI_URL` at [`Self::loki_url`]),
/// and writes every request as an OTLP JSON line, read back by [`Self::spans`] and [`Self::logs`].
pub struct OtelcolSink {
    collector: Otelcol,
    dir: PathBuf,
}

impl OtelcolSink {
    /// Starts a sink on free loopback ports, writing into a temporary folder of its own.
    pub fn start(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("pipetel-otelcol-{name}-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let config = workspace_root().join("tests/support/otelcol-sink.yaml");
        let collector = Otelcol::with_config(name, &config).env("OTELCOL_SINK_DIR", dir.display().to_string()).start();
        Self { collector, dir }
    }

    /// `host:port` of its OTLP gRPC receiver (the form `OTELCOL_TEMPO_ENDPOINT` takes).
    pub fn tempo_endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.collector.grpc_port)
    }

    /// Base URL of its OTLP HTTP receiver (the form `OTELCOL_LOKI_URL` takes; `/otlp` is appended).
    pub fn loki_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.collector.http_port)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        spans_in(&self.read("traces.jsonl"))
    }

    /// Every log record received so far.
    pub fn logs(&self) -> Vec<LogRecord> {
        log_records_in(&self.read("logs.jsonl"))
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }
}

impl Drop for OtelcolSink {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- sink {} kept its files in {}", self.collector.name, self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
