//! What the in-process tests of this crate share. The workspace's end-to-end harness
//! (`tests/support/` at the workspace root) is compiled in: the real OpenTelemetry Collector
//! ([`Otelcol`]), free ports, child processes, and the one rule for a missing peer
//! ([`peers_available`]: with `PIPETEL_REQUIRE_PEERS=1` the test fails naming the variable to
//! set, otherwise it is skipped loudly). Added here: the collector configs of `tests/otelcol/`,
//! the child processes each `init` runs in ([`child`]), the test certificates ([`pki`]) and the
//! OTLP profiles the collector wrote, read back ([`profiles`]).

// Each test binary uses its own part of these helpers.
#![allow(dead_code, unreachable_pub, unused_imports)]

#[path = "../../../../tests/support/http.rs"]
pub mod http;
#[path = "../../../../tests/support/otelcol.rs"]
pub mod otelcol;
#[path = "../../../../tests/support/otlp_json.rs"]
pub mod otlp_json;
#[path = "../../../../tests/support/peers.rs"]
pub mod peers;
#[path = "../../../../tests/support/ports.rs"]
pub mod ports;
#[path = "../../../../tests/support/process.rs"]
pub mod process;
#[path = "../../../../tests/support/prometheus.rs"]
pub mod prometheus;
#[path = "../../../../tests/support/workspace.rs"]
pub mod workspace;

pub mod child;
pub mod pki;
pub mod profiles;

use std::path::{Path, PathBuf};

pub use child::{print_flush_and_shutdown, run_child, ChildRun};
pub use http::http;
pub use otelcol::Otelcol;
pub use peers::{peers_available, Peer};
pub use pki::make_pki;
pub use ports::free_port;

/// The real collector running `tests/otelcol/<config>` with `env` set, its `file` exporter
/// writing `dir/received.jsonl` (read back with [`Otelcol::exported`]). The test has stated
/// [`Peer::Otelcol`] with [`peers_available`] first.
pub fn collector(config: &str, dir: &Path, env: &[(String, String)]) -> Otelcol {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otelcol").join(config);
    let mut collector = Otelcol::with_config(config, &path).file_export(&dir.join("received.jsonl"));
    for (key, value) in env {
        collector = collector.env(key, value.clone());
    }
    collector.start()
}

/// A scratch directory for one test run.
/// A collector of the test config `config` whose OTLP/HTTP receiver listens on a free port
/// (`PIPETEL_TEST_HTTP_PORT`), writing what it receives into a scratch directory `name`
/// (returned, for the test to remove).
pub fn collector_on_free_port(config: &str, name: &str) -> (Otelcol, u16, PathBuf) {
    let dir = scratch(name);
    let port = free_port();
    (collector(config, &dir, &[("PIPETEL_TEST_HTTP_PORT".into(), port.to_string())]), port, dir)
}

/// The environment of a child exporting over OTLP/HTTP to the collector receiving on `port`,
/// GPU telemetry off: `vars` (the child's variable, the exporters, ...), then the endpoint.
pub fn otlp_http_child_env(port: u16, vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let endpoint = format!("http://127.0.0.1:{port}");
    let otlp = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("PIPETEL_GPU", "off"),
    ];
    vars.iter().chain(&otlp).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// In the child a test re-runs with `child_var` set: the variable's value and `init` from the
/// environment. `None` in the parent.
pub fn init_child(child_var: &str) -> Option<(String, pipetel::Telemetry)> {
    let value = std::env::var(child_var).ok()?;
    Some((value, pipetel::init(pipetel::Config::from_env().expect("configuration")).expect("init")))
}

/// Whether this test process is the parent that runs a test (not the child the test re-runs
/// with `child_var` set) and every peer it needs is there (see [`peers_available`]).
pub fn parent_with_peers(child_var: &str, peers: &[Peer]) -> bool {
    std::env::var_os(child_var).is_none() && peers_available(peers)
}

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// The lines of `text` (the file exporter's output) that hold `signal` (`resourceSpans`,
/// `resourceMetrics`, `resourceLogs`) and `needle`.
pub fn count_lines(text: &str, signal: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(&format!("\"{signal}\"")) && l.contains(needle)).count()
}
