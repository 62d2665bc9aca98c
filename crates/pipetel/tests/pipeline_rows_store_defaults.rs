//! Rows are never silently lost: with nothing configured they go to the local rows store under
//! the documented default path; `PIPETEL_ROWS=false` writes nothing; a store that cannot be
//! written warns once and counts the rows it missed in `pipeline.rows.lost`; rows emitted before
//! `init` warn once on stderr and count as lost.
//!
//! Each scenario runs in a child process of its own (see `support::child`): `init` is once per
//! process, and the warnings on stderr are counted.

mod support;

use std::path::{Path, PathBuf};

use support::child::scenario_in_child;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-rows-defaults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One stage of two shards: five rows (two start, two end, one stage).
fn run_stage(name: &str) {
    let stage = pipetel::stage(name).shards(2).start();
    for i in 0..2 {
        let shard = stage.shard(i).start();
        shard.record(3, 30);
        shard.finish();
    }
    stage.finish();
}

fn rows_in(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("one JSON row per line")).collect()
}

fn lost(telemetry: &pipetel::Telemetry) -> String {
    let text = telemetry.prometheus_render().expect("render").render();
    text.lines()
        .find(|l| l.starts_with("pipeline_rows_lost_total"))
        .unwrap_or("no pipeline_rows_lost_total")
        .to_string()
}

const DEFAULT_CHILD: &str = "PIPETEL_TEST_ROWS_DEFAULT_CHILD";

#[test]
fn with_nothing_configured_rows_go_to_the_default_store() {
    let state = temp_dir("xdg");
    let scenario = || {
        let state = PathBuf::from(std::env::var("PIPETEL_TEST_STATE").expect("state dir"));
        // Nothing about rows is configured; only where the state directory is.
        let telemetry = pipetel::init(
            pipetel::Config::from_lookup(|name| match name {
                "XDG_STATE_HOME" => Some(state.display().to_string()),
                _ => None,
            })
            .expect("config")
            .with_service_name("defaults svc")
            .with_prometheus_port(0)
            .with_console_log(false),
        )
        .expect("init");
        run_stage("to-the-default");
        let store = state.join("pipetel/rows/defaults_svc.jsonl");
        let rows = rows_in(&store);
        assert_eq!(rows.len(), 5, "{rows:?}");
        assert_eq!(rows[4]["pipeline.stage.name"], "to-the-default");
        assert_eq!(rows[4]["pipeline.items"], 6);
        assert!(lost(&telemetry).ends_with(" 0"), "{}", lost(&telemetry));
    };
    // The child reads XDG_STATE_HOME from the environment the library itself reads.
    std::env::set_var("PIPETEL_TEST_STATE", &state);
    std::env::set_var("XDG_STATE_HOME", &state);
    std::env::remove_var("PIPETEL_ROWS_DIR");
    if std::env::var_os(DEFAULT_CHILD).is_some() {
        scenario();
        println!("scenario done");
        return;
    }
    let _ = scenario_in_child("with_nothing_configured_rows_go_to_the_default_store", DEFAULT_CHILD, || {});
    let _ = std::fs::remove_dir_all(&state);
}

const OFF_CHILD: &str = "PIPETEL_TEST_ROWS_OFF_CHILD";

fn rows_off() {
    let dir = PathBuf::from(std::env::var("PIPETEL_TEST_ROWS_OFF_DIR").expect("dir"));
    let config = pipetel::Config::from_lookup(|name| (name == "PIPETEL_ROWS").then(|| "false".to_string()))
        .expect("config")
        .with_rows_dir(&dir)
        .with_prometheus_port(0)
        .with_console_log(false);
    let _telemetry = pipetel::init(config).expect("init");
    run_stage("off");
    assert!(!dir.exists(), "rows off: not even the store's directory is created");
}

#[test]
fn rows_off_writes_nothing() {
    let dir = temp_dir("off");
    std::env::set_var("PIPETEL_TEST_ROWS_OFF_DIR", &dir);
    let _ = scenario_in_child("rows_off_writes_nothing", OFF_CHILD, rows_off);
    assert!(!dir.exists());
}

const FAILING_CHILD: &str = "PIPETEL_TEST_ROWS_FAILING_CHILD";
const STORE_WARNING: &str = "cannot write the rows store";
const BEFORE_INIT_WARNING: &str = "a pipeline row was emitted while pipetel is not initialised";

fn failing_store() {
    // Before init: two rows, dropped and counted, one warning on stderr.
    run_stage("before-init");
    run_stage("before-init-again");
    let blocker = PathBuf::from(std::env::var("PIPETEL_TEST_ROWS_BLOCKER").expect("blocker"));
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_rows_dir(blocker.join("cannot-be-a-dir"))
            .with_prometheus_port(0)
            .with_console_log(true)
            .with_log_filter("warn"),
    )
    .expect("a store that cannot be opened never fails init");
    for _ in 0..3 {
        run_stage("into-a-bad-dir");
    }
    // 10 rows before init, 15 after: every one counted.
    let lost = lost(&telemetry);
    assert!(lost.ends_with("} 25") || lost.ends_with(" 25"), "{lost}");
}

#[test]
fn a_failing_store_warns_once_and_counts_lost_rows() {
    let dir = temp_dir("failing");
    std::fs::create_dir_all(&dir).expect("dir");
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "").expect("file");
    std::env::set_var("PIPETEL_TEST_ROWS_BLOCKER", &blocker);
    if let Some((_, stderr)) =
        scenario_in_child("a_failing_store_warns_once_and_counts_lost_rows", FAILING_CHILD, failing_store)
    {
        assert_eq!(stderr.matches(BEFORE_INIT_WARNING).count(), 1, "{stderr}");
        assert!(stderr.contains("pipetel: warning: "), "no subscriber before init: plain stderr: {stderr}");
        assert_eq!(stderr.matches(STORE_WARNING).count(), 1, "{stderr}");
        assert!(stderr.contains("cannot-be-a-dir"), "the warning names the path: {stderr}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

const NO_DIR_CHILD: &str = "PIPETEL_TEST_ROWS_NO_DIR_CHILD";
const NO_DIR_WARNING: &str = "no private directory for the rows store";

fn no_private_dir() {
    // Nothing names a private directory: the store must not fall back to the shared temp dir.
    for var in ["PIPETEL_ROWS_DIR", "XDG_STATE_HOME", "HOME"] {
        std::env::remove_var(var);
    }
    let service = format!("no-dir-{}", std::process::id());
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name(&service)
            .with_prometheus_port(0)
            .with_console_log(true)
            .with_log_filter("warn"),
    )
    .expect("no private directory never fails init");
    run_stage("nowhere");
    run_stage("nowhere-again");
    let lost = lost(&telemetry);
    assert!(lost.ends_with("} 10") || lost.ends_with(" 10"), "{lost}");
    let tmp_store = std::env::temp_dir().join("pipetel").join("rows").join(format!("{service}.jsonl"));
    assert!(!tmp_store.exists(), "rows went to the shared temp dir: {}", tmp_store.display());
}

#[test]
fn without_a_private_directory_rows_are_counted_lost_not_put_in_tmp() {
    if let Some((_, stderr)) = scenario_in_child(
        "without_a_private_directory_rows_are_counted_lost_not_put_in_tmp",
        NO_DIR_CHILD,
        no_private_dir,
    ) {
        assert_eq!(stderr.matches(NO_DIR_WARNING).count(), 1, "one warning: {stderr}");
        assert!(stderr.contains("PIPETEL_ROWS_DIR"), "the warning says what to set: {stderr}");
    }
}
