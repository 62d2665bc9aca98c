//! The real peers the tests run against, where each is found, and the one rule for a missing
//! one, shared with the Python harness (`python/tests/peers.py`):
//!
//! - with `PIPETEL_REQUIRE_PEERS=1` (`scripts/test` and CI set it) a missing peer fails the test,
//!   the message naming the variable to set;
//! - otherwise the test is skipped loudly: a line on the terminal (past the test harness's
//!   output capture) says which peer is missing and how to get it, and the test returns.
//!
//! A test states the peers it needs first, before it starts anything:
//! `if !peers_available(&[Peer::Otelcol]) { return; }`. The starters (`Otelcol`, `Prometheus`,
//! ...) find their binaries through [`Peer::binary`], which fails with the same message when a
//! test did not state its peer.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::workspace::workspace_root;

/// The variable that turns a missing peer from a skip into a failure.
pub const REQUIRE_PEERS: &str = "PIPETEL_REQUIRE_PEERS";

/// A real program a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The OpenTelemetry Collector `otelcol-pipetel` that `scripts/build-collector` builds.
    Otelcol,
    /// A Prometheus server.
    Prometheus,
    /// `promtool`, shipped with Prometheus.
    Promtool,
    /// `rotel-agent`, an OTLP collector that prints what it receives (the `rotel` Python package).
    Rotel,
    /// A Python interpreter with `prometheus_client`.
    Python,
    /// A Python interpreter with the `pipetel` package (`scripts/test-python` installs it).
    PipetelPython,
}

impl Peer {
    /// The environment variable that names the peer's binary.
    pub fn var(self) -> &'static str {
        match self {
            Peer::Otelcol => "PIPETEL_OTELCOL_BIN",
            Peer::Prometheus => "PIPETEL_PROMETHEUS_BIN",
            Peer::Promtool => "PIPETEL_PROMTOOL_BIN",
            Peer::Rotel => "PIPETEL_ROTEL_BIN",
            Peer::Python | Peer::PipetelPython => "PIPETEL_PYTHON",
        }
    }

    /// What the peer is, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Peer::Otelcol => "the OpenTelemetry Collector (otelcol-pipetel)",
            Peer::Prometheus => "Prometheus",
            Peer::Promtool => "promtool",
            Peer::Rotel => "the OTLP collector rotel-agent",
            Peer::Python => "Python with prometheus_client",
            Peer::PipetelPython => "Python with the pipetel package",
        }
    }

    /// How to get the peer, naming the variable to set.
    pub fn how_to_get(self) -> &'static str {
        match self {
            Peer::Otelcol => {
                "build it and set PIPETEL_OTELCOL_BIN: `export PIPETEL_OTELCOL_BIN=$(scripts/build-collector | tail -1)` \
                 (needs Go)"
            }
            Peer::Prometheus => {
                "install Prometheus (`apt-get install prometheus`) or set PIPETEL_PROMETHEUS_BIN to a `prometheus` binary"
            }
            Peer::Promtool => {
                "install Prometheus (`apt-get install prometheus`) or set PIPETEL_PROMTOOL_BIN to a `promtool` binary"
            }
            Peer::Rotel => {
                "`python3 -m venv .venv && .venv/bin/pip install rotel==0.0.1a15`, or set PIPETEL_ROTEL_BIN to a \
                 `rotel-agent` binary"
            }
            Peer::Python => {
                "`python3 -m venv .venv && .venv/bin/pip install prometheus_client`, or set PIPETEL_PYTHON to such a \
                 Python"
            }
            Peer::PipetelPython => {
                "`scripts/test-python` builds and installs the package into .venv, or set PIPETEL_PYTHON to a Python \
                 where `import pipetel` works"
            }
        }
    }

    /// The binary: the path in [`Self::var`] (a bare name is looked up on `PATH`), else the
    /// default place, and for a Python one that imports the module the tests need; why it is
    /// missing otherwise.
    pub fn locate(self) -> Result<PathBuf, String> {
        let binary = self.binary_path()?;
        let module = match self {
            Peer::Python => "prometheus_client",
            Peer::PipetelPython => "pipetel",
            _ => return Ok(binary),
        };
        let imports = Command::new(&binary).args(["-c", &format!("import {module}")]).output();
        match imports {
            Ok(out) if out.status.success() => Ok(binary),
            _ => Err(format!("{} cannot import {module}", binary.display())),
        }
    }

    fn binary_path(self) -> Result<PathBuf, String> {
        let var = self.var();
        if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let given = PathBuf::from(&value);
            let found = if given.components().count() == 1 { on_path(&given) } else { Some(given.clone()) };
            return found.filter(|p| p.is_file()).ok_or_else(|| format!("{var}={} is not a file", given.display()));
        }
        let default = match self {
            Peer::Otelcol => None,
            Peer::Prometheus => on_path(Path::new("prometheus")),
            Peer::Promtool => on_path(Path::new("promtool")),
            Peer::Rotel => in_venv_site_packages("rotel/rotel-agent"),
            Peer::Python | Peer::PipetelPython => {
                Some(workspace_root().join(".venv/bin/python")).filter(|p| p.is_file())
            }
        };
        default.ok_or_else(|| match self {
            Peer::Otelcol => format!("{var} is not set"),
            Peer::Prometheus => format!("{var} is not set and `prometheus` is not on PATH"),
            Peer::Promtool => format!("{var} is not set and `promtool` is not on PATH"),
            Peer::Rotel | Peer::Python | Peer::PipetelPython => {
                format!("{var} is not set and the workspace's .venv has none")
            }
        })
    }

    /// The binary; when it is missing, fails the test with [`missing_message`] (the test should
    /// have stated the peer with [`peers_available`] first, so a missing one skips it).
    pub fn binary(self) -> PathBuf {
        self.locate().unwrap_or_else(|why| panic!("{}", missing_message(self, &why)))
    }
}

/// Whether a missing peer fails the test (`PIPETEL_REQUIRE_PEERS` set to anything but empty,
/// `0`, `false` or `no`), as the Python harness reads it.
pub fn peers_required() -> bool {
    std::env::var(REQUIRE_PEERS).is_ok_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "" | "0" | "false" | "no"))
}

/// What a missing peer's failure or skip says: the peer, why it is missing, and how to get it
/// (with the variable to set).
pub fn missing_message(peer: Peer, why: &str) -> String {
    format!("{} is missing ({why}); {}", peer.what(), peer.how_to_get())
}

/// The one rule. True when every peer in `peers` is there. When one is missing: with
/// `PIPETEL_REQUIRE_PEERS=1` the test fails (panics) saying which variable to set; otherwise a
/// loud line says the test is skipped, and false tells the test to return.
pub fn peers_available(peers: &[Peer]) -> bool {
    let missing: Vec<String> =
        peers.iter().filter_map(|&peer| peer.locate().err().map(|why| missing_message(peer, &why))).collect();
    if missing.is_empty() {
        return true;
    }
    let current = std::thread::current();
    let test = current.name().filter(|n| *n != "main").unwrap_or("this test");
    if peers_required() {
        panic!("{test}: {REQUIRE_PEERS}=1 and {}", missing.join("; "));
    }
    // Straight to the terminal: the test harness captures `eprintln!` of a passing test.
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n!!! SKIPPED {test}: {}. ({REQUIRE_PEERS}=1 makes a missing peer a failure.) !!!",
        missing.join("; ")
    );
    false
}

/// `name` found on `PATH`.
fn on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

/// `relative` under `.venv/lib/python3*/site-packages/` of the workspace.
fn in_venv_site_packages(relative: &str) -> Option<PathBuf> {
    let lib = workspace_root().join(".venv/lib");
    std::fs::read_dir(lib).ok()?.flatten().map(|e| e.path().join("site-packages").join(relative)).find(|p| p.is_file())
}
