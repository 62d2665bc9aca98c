//! Helpers of the end-to-end tests: real peers (Prometheus, `promtool`, an OTLP collector, the
//! Python exposition parser) started on free loopback ports with bounded waits, and the example
//! programs run as child processes. The in-process tests of `crates/pipetel` share the collector
//! part of it (`crates/pipetel/tests/support/`).
//!
//! A missing peer follows one rule ([`peers`]): with `PIPETEL_REQUIRE_PEERS=1` (`scripts/test`
//! sets it) the test fails naming the variable to set, otherwise it is skipped loudly. Peers are
//! located through environment variables that `scripts/test` sets, with fallbacks:
//! - `PIPETEL_PROMETHEUS_BIN` (default `prometheus` on `PATH`),
//! - `PIPETEL_PROMTOOL_BIN` (default `promtool` on `PATH`),
//! - `PIPETEL_ROTEL_BIN` (default `.venv/lib/python3*/site-packages/rotel/rotel-agent` in the
//!   workspace),
//! - `PIPETEL_PYTHON` (default `.venv/bin/python` in the workspace),
//! - `PIPETEL_OTELCOL_BIN` (the OpenTelemetry Collector `scripts/build-collector` builds; no
//!   default).

// Each test binary uses its own part of these helpers.
#![allow(dead_code, unreachable_pub, unused_imports)]

pub mod collector;
pub mod gpu;
pub mod http;
pub mod otelcol;
pub mod otlp_json;
pub mod peers;
pub mod pipeline_run;
pub mod ports;
pub mod process;
pub mod prometheus;
pub mod python;
pub mod routes;
pub mod stores;
pub mod turns;
pub mod workspace;

pub use collector::{blocks, Block, Collector};
pub use gpu::FAKE_GPUS;
pub use http::{http, scrape_checked};
pub use otelcol::{Otelcol, OtelcolSink};
pub use peers::{peers_available, Peer};
pub use pipeline_run::PipelineRun;
pub use ports::{free_port, RefusingPort};
pub use process::{wait_for, Process};
pub use prometheus::{promtool_check_metrics, Prometheus};
pub use python::python_label_values;
pub use routes::{Route, RouteStack};
pub use turns::{turn, turn_if_peers};
pub use workspace::{
    docs_text, example_command, example_path, example_pushing, example_serving, serve_example, workspace_root,
};
