//! Shared by the tests that run the real `pipetel` binary.

use std::process::Command;

/// Runs `pipetel` with `args`, without the rows-file and service-name variables of the test's
/// own environment: its stdout, stderr and exit code.
pub(crate) fn run(args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .args(args)
        .env_remove("PIPETEL_ROWS_FILE")
        .env_remove("OTEL_SERVICE_NAME")
        .output()
        .expect("run pipetel");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}
