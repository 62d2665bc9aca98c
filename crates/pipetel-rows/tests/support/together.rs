//! Processes of one test binary run at once: the parent starts children that run one test of
//! the binary, each told its index; they wait for a go file, so that all of them overlap.
//! Shared by the store's many-writer tests (`pipetel-rows`, `pipetel-cli`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `processes` children running the test `test` of this binary, each with `child_var`
/// set to its index and what `env` adds; creates `go` once every child has started and
/// asserts that each succeeded.
pub(crate) fn run_together(test: &str, child_var: &str, processes: usize, go: &Path, env: impl Fn(&mut Command)) {
    let children: Vec<_> = (0..processes)
        .map(|i| {
            let mut child = Command::new(std::env::current_exe().expect("test binary"));
            child.args(["--exact", test, "--nocapture"]).env(child_var, i.to_string()).stdout(Stdio::null());
            env(&mut child);
            child.spawn().expect("spawn a writer")
        })
        .collect();
    std::fs::write(go, "").expect("go");
    for mut c in children {
        assert!(c.wait().expect("wait").success(), "a writer failed");
    }
}

/// In a child: waits until `go` exists, at most `limit`.
pub(crate) fn wait_for_go(go: &Path, limit: Duration) {
    let t = Instant::now();
    while !go.exists() {
        assert!(t.elapsed() < limit, "no go file");
        std::thread::sleep(Duration::from_millis(1));
    }
}
