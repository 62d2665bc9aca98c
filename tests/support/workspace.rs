//! The workspace and its programs: example binaries built on demand.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use super::ports::free_port;
use super::process::Process;

/// The workspace root: the package's own folder for the end-to-end tests, two levels up for a
/// crate's tests that share this harness (the first folder whose `Cargo.toml` has `[workspace]`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let is_root = |d: &&Path| std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"));
    manifest.ancestors().find(is_root).unwrap_or(manifest).to_path_buf()
}

/// The user documentation as one text: README.md, then the book's pages (`docs/src/*.md`) in
/// name order. Tests that check what the docs promise read it.
pub fn docs_text() -> String {
    let root = workspace_root();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/src"))
        .expect("docs/src")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The path of a binary target of this workspace (`cargo build` with `target_args`, e.g.
/// `["--example", name]`), built now so a test never runs a stale one.
pub fn built_binary(name: &str, target_args: &[&str]) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["build", "--quiet", "--message-format=json"])
        .args(target_args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {name}: {e}"));
    assert!(out.status.success(), "building {name} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported no executable for {name}"))
}

/// The path of an example of this workspace, built now (once per test process) so a test
/// never runs a stale binary.
pub fn example_path(name: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let path = built_binary(name, &["--example", name]);
    built.insert(name.to_string(), path.clone());
    path
}

/// A command running the example `name`. Every shard keeps its worker series after it ended
/// (`PIPETEL_SHARD_METRICS=all`; by default only running shards have one): the end-to-end tests
/// check each shard's exported totals against the rows.
pub fn example_command(name: &str) -> Command {
    let mut cmd = Command::new(example_path(name));
    cmd.env("PIPETEL_SHARD_METRICS", "all");
    cmd
}

/// A command running the example `name` with its Prometheus pull endpoint on `127.0.0.1:port`.
pub fn example_serving(name: &str, port: u16) -> Command {
    let mut cmd = example_command(name);
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", port.to_string()).env("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1");
    cmd
}

/// Starts the example `name` with its pull endpoint on a free port, `configure`d first (its
/// arguments and environment); returns the running example and the port.
pub fn serve_example(name: &str, configure: impl FnOnce(&mut Command) -> &mut Command) -> (Process, u16) {
    let port = free_port();
    let mut cmd = example_serving(name, port);
    configure(&mut cmd);
    (Process::spawn(name, cmd), port)
}

/// The quickstart example's run for exemplar tests: five batches 100 ms apart (their spans
/// exported 200 ms after they end), then 90 s more of serving; it prints `done: batches=5`.
pub fn quickstart_five_batches(cmd: &mut Command) -> &mut Command {
    cmd.env("OTEL_BSP_SCHEDULE_DELAY", "200").args(["--batches", "5", "--interval-ms", "100", "--linger-seconds", "90"])
}

/// A command running the example `name` pushing OTLP to `endpoint` over `protocol` (`grpc` or
/// `http/protobuf`).
pub fn example_pushing(name: &str, endpoint: &str, protocol: &str) -> Command {
    let mut cmd = example_command(name);
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint).env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol);
    cmd
}
