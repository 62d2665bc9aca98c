//! The progress display as a user's terminal would receive it: each scenario runs in a child
//! process (this test binary re-run with a marker variable) whose stderr is a pipe, read back
//! here. `PIPETEL_PROGRESS=always` draws on the pipe; `PIPETEL_PROGRESS=1` draws only on a
//! terminal, so on a pipe nothing at all. Nothing is timed: the forced scenario waits on the
//! count of frames drawn.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::child::{scenario_in_child_with, DONE};

/// The marker variable: set, the test runs its scenario instead of spawning.
const CHILD: &str = "PIPETEL_TEST_PROGRESS_CHILD";
/// Erases the line: every redraw in place starts with a carriage return and this.
const REDRAW: &str = "\r\x1b[2K";

/// The child's environment: nothing exported, no port bound, no rows written, wide lines.
fn quiet_env(progress: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("PIPETEL_PROGRESS", progress),
        ("OTEL_TRACES_EXPORTER", "none"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_LOGS_EXPORTER", "none"),
        ("PIPETEL_ROWS", "false"),
        ("COLUMNS", "200"),
    ]
}

/// Waits until the display has drawn `n` more frames with a live line (a failure, not a
/// timing assertion, if it never does).
fn wait_for_frames(n: u64) {
    let target = pipetel::testing::progress_redraws() + n;
    let give_up = Instant::now() + Duration::from_secs(60);
    while pipetel::testing::progress_redraws() < target {
        assert!(Instant::now() < give_up, "the progress display drew no frame in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stage of 4 declared shards: two run, one finishes, one fails; printed on stdout: whether
/// the display was on, and the summary line the stage's row makes.
fn scenario(wait: bool) {
    let config = pipetel::Config::from_env().expect("config").with_service_name("progress-test");
    let telemetry = pipetel::init(config).expect("init");
    println!("progress on: {}", pipetel::pipeline::progress_is_on());
    let stage = pipetel::stage("tokenize").execution_id("run-p").shards(4).start();
    let a = stage.shard(0).start();
    let b = stage.shard(1).start();
    a.record(1000, 64_000);
    b.record(500, 32_000);
    if wait {
        // Two frames fully after the records: the line shows both shards running.
        wait_for_frames(2);
    }
    a.finish();
    b.record(500, 32_000);
    if wait {
        wait_for_frames(2);
    }
    b.fail("corrupt input");
    let row = stage.finish();
    println!("summary: {}", pipetel::pipeline::stage_table_line(&row));
    telemetry.shutdown().expect("shutdown");
}

#[test]
fn forced_progress_redraws_in_place_and_ends_with_the_summary_line() {
    let name = "forced_progress_redraws_in_place_and_ends_with_the_summary_line";
    let Some((stdout, stderr)) = scenario_in_child_with(name, CHILD, &quiet_env("always"), || scenario(true)) else {
        return;
    };
    assert!(stdout.contains("progress on: true"), "{stdout}");

    // Live lines: the stage's name, rates, shard counts of the declared total, the ETA unknown
    // until a shard ends, then known.
    let first = "shards 0/4 done, 0 failed, 2 running  ETA --";
    let second = "shards 1/4 done, 0 failed, 1 running  ETA ";
    assert!(stderr.contains(first), "no live line before a shard ended:\n{stderr:?}");
    assert!(stderr.contains(second), "no live line after one shard ended:\n{stderr:?}");
    let live: Vec<&str> = stderr.split(['\r', '\n']).filter(|l| l.contains("items/s")).collect();
    assert!(live.len() >= 4, "at least four frames were waited for: {live:?}");
    for line in &live {
        let line = line.trim_start_matches("\x1b[2K");
        assert!(line.starts_with("tokenize "), "{line:?}");
        assert!(line.contains(" items/s ") && line.contains("B/s  shards "), "{line:?}");
    }
    // In place: no newline between frames; each later frame erases the previous line first.
    let first_at = stderr.find(first).expect("first line");
    let second_at = stderr.find(second).expect("second line");
    assert!(first_at < second_at);
    assert!(!stderr[first_at..second_at].contains('\n'), "frames must not scroll:\n{stderr:?}");
    assert!(stderr.matches(REDRAW).count() >= 3, "redraws start with \\r and erase-line:\n{stderr:?}");

    // The end: the live line erased, then the table's header and the stage's summary line,
    // exactly as `stage_table_line` makes it; no live line after it.
    let summary = stdout.lines().find_map(|l| l.strip_prefix("summary: ")).expect("summary on stdout");
    assert!(summary.starts_with("tokenize     succeeded        2000"), "{summary}");
    let header = pipetel::pipeline::stage_table_header();
    let end = format!("{header}\n{summary}\n");
    let end_at = stderr.find(&end).unwrap_or_else(|| panic!("no header + summary:\n{stderr:?}"));
    let last_live = stderr.rfind("items/s").expect("a live line");
    assert!(last_live < end_at, "a live line after the summary:\n{stderr:?}");
    assert!(stderr[last_live..end_at].contains(REDRAW), "the live line is erased before the summary:\n{stderr:?}");
    assert_eq!(stderr.matches(&header).count(), 1, "the header is printed once");
}

#[test]
fn progress_on_a_pipe_stays_off_unless_forced() {
    let name = "progress_on_a_pipe_stays_off_unless_forced";
    for value in ["1", "true", "false"] {
        let Some((stdout, stderr)) = scenario_in_child_with(name, CHILD, &quiet_env(value), || scenario(false)) else {
            return;
        };
        assert!(stdout.contains("progress on: false"), "PIPETEL_PROGRESS={value}: {stdout}");
        assert!(!stderr.contains('\r'), "PIPETEL_PROGRESS={value}: {stderr:?}");
        assert!(!stderr.contains("items/s"), "PIPETEL_PROGRESS={value}: {stderr:?}");
        assert!(!stderr.contains(&pipetel::pipeline::stage_table_header()), "PIPETEL_PROGRESS={value}: {stderr:?}");
    }
}

#[test]
fn a_bad_progress_value_is_an_error_naming_the_variable() {
    let err = pipetel::Config::from_lookup(|k| (k == "PIPETEL_PROGRESS").then(|| "sometimes".to_string()))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("PIPETEL_PROGRESS") && err.contains("\"sometimes\""), "{err}");
    assert!(err.contains("always"), "the error lists the accepted values: {err}");
}

/// A stderr whose reader went away: the display turns itself off and the stage runs on.
#[test]
fn a_closed_stderr_turns_the_display_off() {
    if std::env::var_os(CHILD).is_some() {
        let config = pipetel::Config::from_env().expect("config");
        let telemetry = pipetel::init(config).expect("init");
        assert!(pipetel::pipeline::progress_is_on());
        let stage = pipetel::stage("download").shards(1).start();
        let shard = stage.shard(0).start();
        let give_up = Instant::now() + Duration::from_secs(60);
        while pipetel::pipeline::progress_is_on() {
            assert!(Instant::now() < give_up, "the display did not notice the closed stderr in 60 s");
            shard.record(1, 1);
            std::thread::sleep(Duration::from_millis(20));
        }
        shard.record(10, 100);
        shard.finish();
        let row = stage.finish();
        println!("turned off; stage row items>10: {}", row.items > 10);
        telemetry.shutdown().expect("shutdown");
        println!("{DONE}");
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args(["--exact", "a_closed_stderr_turns_the_display_off", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env_remove("RUST_LOG")
        .env_remove("PIPETEL_CONFIG")
        .envs(quiet_env("always"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the scenario");
    // Close the read end of the child's stderr: its next write fails with EPIPE.
    drop(child.stderr.take());
    let out = child.wait_with_output().expect("wait for the scenario");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the scenario failed: {stdout}");
    assert!(stdout.contains("turned off; stage row items>10: true") && stdout.contains(DONE), "{stdout}");
}
