//! A real OTLP collector (`rotel-agent`) on free loopback ports, and a parser of what it printed.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::peers::Peer;
use super::ports::free_port;
use super::process::{wait_for, Process};

/// The `rotel-agent` binary: `PIPETEL_ROTEL_BIN`, or the one in the workspace's `.venv`
/// ([`Peer::Rotel`]).
pub fn rotel_binary() -> PathBuf {
    Peer::Rotel.binary()
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
    /// Starts a collector on the given ports and waits until both accept connections.
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

    /// The first value of a field; panics (showing the block) when it is missing.
    pub fn field(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| panic!("{key} missing in {self:?}"))
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
