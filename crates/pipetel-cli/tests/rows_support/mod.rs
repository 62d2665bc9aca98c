//! Shared by the tests that write a rows store through the real pipeline for the CLI to read.

use std::path::Path;

/// `init` for a program named `service` whose rows go to the default store under `dir`, with
/// the pull endpoint on a free loopback port and no console output.
pub(crate) fn init_with_rows_dir(service: &str, dir: &Path) -> pipetel::Telemetry {
    pipetel::init(
        pipetel::Config::default()
            .with_service_name(service)
            .with_rows_dir(dir)
            .with_prometheus_port(0)
            .with_prometheus_host("127.0.0.1")
            .with_console_log(false),
    )
    .expect("init")
}
