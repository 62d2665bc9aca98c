//! The one child-process runner of the in-process tests: `init` is once per process, so each
//! case re-runs one test of the same binary with its own environment. Two shapes:
//!
//! - [`run_child`]: a test starts `child_*` scenarios, which are `#[ignore]`d tests (so a plain
//!   run reports them as ignored, never as passing without an assertion) that the child runs
//!   with `--include-ignored`, and asserts on what they printed;
//! - [`scenario_in_child`]: a test re-runs itself with a variable set; in the child it runs the
//!   scenario and prints [`DONE`], in the parent it asserts on the child's output.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a child process printed and how it ended.
pub struct ChildRun {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    pub elapsed: Duration,
}

impl ChildRun {
    /// The value the child printed as `KEY=...` (the rest of that line; the test harness may
    /// have printed the test's name before it on the same line).
    pub fn value(&self, key: &str) -> Option<&str> {
        let marker = format!("{key}=");
        self.stdout.lines().find_map(|l| l.find(&marker).map(|at| &l[at + marker.len()..]))
    }
}

/// Runs the test `test` of this same binary in a child process with `env`, killed after
/// `limit` (a hang fails the test, it does not stall it).
pub fn run_child(test: &str, env: &[(String, String)], limit: Duration) -> ChildRun {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1", "--include-ignored"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in pipetel::config::ENV_VARS {
        command.env_remove(var);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let mut child = command.spawn().expect("run the child");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let run = ChildRun {
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        success: status.is_some_and(|s| s.success()),
        elapsed,
    };
    assert!(status.is_some(), "{test} hung: killed after {limit:?}\n{}\n{}", run.stdout, run.stderr);
    run
}

/// Flushes and shuts `telemetry` down, printing `FLUSH_MS=`, `FLUSH=` and `SHUTDOWN=` lines
/// (each outcome as `ok` or its report lines joined by ` | `) for the parent to read.
pub fn print_flush_and_shutdown(telemetry: pipetel::Telemetry) {
    let started = Instant::now();
    let flush = telemetry.force_flush();
    println!("FLUSH_MS={}", started.elapsed().as_millis());
    println!("FLUSH={}", outcome(flush));
    println!("SHUTDOWN={}", outcome(telemetry.shutdown()));
}

fn outcome(result: Result<(), pipetel::ShutdownError>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(pipetel::ShutdownError::Providers(lines)) => lines.join(" | "),
        Err(other) => format!("other error: {other}"),
    }
}

/// What the child prints once its scenario returned.
pub const DONE: &str = "scenario done";

/// In the child (`var` set): runs `scenario`, prints [`DONE`] and returns `None`. In the test:
/// re-runs the test `name` of this binary in a child with `var` set, and returns its
/// `(stdout, stderr)` once it succeeded and its scenario ran to the end.
pub fn scenario_in_child(name: &str, var: &str, scenario: fn()) -> Option<(String, String)> {
    scenario_in_child_with(name, var, &[], scenario)
}

/// [`scenario_in_child`] with `env` set in the child too.
pub fn scenario_in_child_with(
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
    let mut vars: Vec<(String, String)> = vec![(var.to_string(), "1".to_string())];
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let run = run_child(name, &vars, Duration::from_secs(120));
    assert!(run.success && run.stdout.contains(DONE), "the scenario failed:\n{}\n{}", run.stdout, run.stderr);
    Some((run.stdout, run.stderr))
}
