//! For tests whose scenario runs in a process of its own, so its stderr (where `init`'s console
//! layer writes warnings) can be read: the test binary re-runs the one test with an
//! environment variable set, and the scenario runs in that child.

// Each test binary uses its own part of these helpers.
#![allow(dead_code)]

use std::process::Command;

/// What the child prints once its scenario returned.
pub(crate) const DONE: &str = "scenario done";

/// In the child (`var` set): runs `scenario` and returns `None`. In the test: re-runs the test
/// `name` of this binary in a child with `var` set and `RUST_LOG` unset, and returns its
/// `(stdout, stderr)` once it succeeded and its scenario ran to the end.
pub(crate) fn scenario_in_child(name: &str, var: &str, scenario: fn()) -> Option<(String, String)> {
    scenario_in_child_with(name, var, &[], scenario)
}

/// [`scenario_in_child`] with `env` set in the child (and `PIPETEL_CONFIG` unset).
pub(crate) fn scenario_in_child_with(
    name: &str,
    var: &str,
    env: &[(&str, &str)],
    scenario: impl FnOnce(),
) -> Option<(String, String)> {
    if std::env::var_os(var).is_some() {
        scenario();
        println!("{DONE}");
        return None;
    }
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(var, "1")
        .env_remove("RUST_LOG")
        .env_remove("PIPETEL_CONFIG")
        .envs(env.iter().copied())
        .output()
        .expect("run the scenario in a child process");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success() && stdout.contains(DONE), "the scenario failed:\n{stdout}\n{stderr}");
    Some((stdout, stderr))
}
