//! `pipetel-e2e`: the workspace's end-to-end tests. There is no library
//! here; this file exists because a Cargo package needs a library or binary target.
//!
//! - The library users depend on is `pipetel`, in `crates/pipetel/` (start at its
//!   `src/lib.rs`); `crates/` also holds `pipetel-recorders`, `pipetel-gpu`,
//!   `pipetel-gpu-exporter` and `pipetel-macros`.
//! - The runnable programs (`quickstart`, `pipeline`, `inference_service`, `multiprocess`,
//!   `graceful_shutdown`) are the `pipetel-examples` package, in `examples/`:
//!   `cargo run --example NAME` here.
//! - `tests/`: end-to-end tests against real Prometheus and a real OTLP collector (feature
//!   `e2e`): `tests/e2e/` is one test binary with a module per behaviour, `tests/support/` their
//!   helpers, and each other file a test that calls `pipetel::init` in its own process.
