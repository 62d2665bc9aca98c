//! `pipetel top --once` on stores written by the real pipeline and by hand: the running stage
//! and a planted slow shard (from the store and from the pull endpoint); stragglers and stalls
//! marked; and a store whose writer died, whose
//! shard and stage `pipetel rows` and `pipetel top` both show lost with the last row's time.

mod cli_support;
mod rows_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rows_support::init_with_rows_dir;

const CHILD_DIR: &str = "PIPETEL_CLI_TOP_TEST_CHILD_DIR";
const DYING: &str = "a_killed_writer_leaves_lost_shards_and_stages";

/// Runs `pipetel` with `args`: stdout, stderr and whether it succeeded.
fn pipetel(args: &[&str]) -> (String, String, bool) {
    let (out, err, code) = cli_support::run(args);
    (out, err, code == Some(0))
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The lines of `frame`'s section `title` (up to the next blank line), header first.
fn section<'a>(frame: &'a str, title: &str) -> Vec<&'a str> {
    let mut lines = frame.lines().skip_while(|l| !l.starts_with(title));
    assert!(lines.next().is_some(), "no section {title}: {frame}");
    lines.take_while(|l| !l.is_empty()).collect()
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[test]
fn top_once_shows_the_running_stage_and_its_slowest_shard() {
    let dir = temp_dir("top-real");
    let telemetry = init_with_rows_dir("top test", &dir);
    let stage = pipetel::stage("tokenize").execution_id("run-7").shards(8).start();
    // The planted slow shard starts first and is still running when the others are done.
    let slow = stage.shard(7).start();
    slow.record(3, 30);
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..7 {
        let shard = stage.shard(i).start();
        shard.record(10, 100);
        shard.finish();
    }
    pipetel::testing::sample_now();

    let (frame, err, ok) = pipetel(&["top", "--once", "--dir", dir.to_str().expect("utf-8")]);
    assert!(ok, "{err}");
    assert!(!frame.contains('\x1b'), "--once prints no escape codes: {frame:?}");
    let stages = section(&frame, "RUNNING STAGES");
    assert_eq!(stages.len(), 2, "{frame}");
    let w = words(stages[1]);
    assert_eq!(&w[..4], ["tokenize", "run-7", "7/1/0/8", "73"], "{frame}");
    assert!(w[4].parse::<f64>().is_ok_and(|r| r > 0.0), "the slow shard's items/s: {frame}");
    let slowest = section(&frame, "SLOWEST RUNNING SHARDS");
    assert_eq!(slowest.len(), 2, "one running shard: {frame}");
    let w = words(slowest[1]);
    assert_eq!(&w[..3], ["tokenize", "run-7", "7"], "{frame}");
    assert!(w.last() == Some(&"running"), "{frame}");
    assert!(!frame.contains("LOST"), "{frame}");

    // The same stage from the pull endpoint: the stage families and the shard's heartbeat.
    let addr = telemetry.prometheus_addr().expect("the pull endpoint");
    let url = format!("http://{addr}/metrics");
    let (frame, err, ok) = pipetel(&["top", "--once", "--interval", "0.2", "--endpoint", &url]);
    assert!(ok, "{err}");
    assert!(!frame.contains("note:"), "{frame}");
    let stages = section(&frame, "RUNNING STAGES");
    assert_eq!(stages.len(), 2, "{frame}");
    assert_eq!(&words(stages[1])[..4], ["tokenize", "run-7", "7/1/0/8", "73"], "{frame}");
    let slowest = section(&frame, "SLOWEST RUNNING SHARDS");
    assert!(slowest.iter().skip(1).any(|l| words(l)[2] == "7"), "{frame}");

    slow.finish();
    stage.finish();
    let (frame, _, ok) = pipetel(&["top", "--once", "--dir", dir.to_str().expect("utf-8")]);
    assert!(ok);
    assert_eq!(section(&frame, "RUNNING STAGES").len(), 1, "the stage row ends it: {frame}");
    drop(telemetry);
    let _ = std::fs::remove_dir_all(&dir);
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis() as u64
}

fn worker(shard: u32, status: &str, ms: u64, extra: &str) -> String {
    format!(
        "{{\"event\":\"pipeline.worker\",\"timestamp_ms\":{ms},\"pipeline.namespace\":\"pipeline.worker\",\
         \"pipeline.stage.name\":\"decode\",\"pipeline.execution.id\":\"r1\",\"pipeline.shard.index\":{shard},\
         \"pipeline.status\":\"{status}\",\"pipeline.items\":10,\"pipeline.item_rate\":1.5{extra}}}\n"
    )
}

#[test]
fn top_once_marks_stragglers_and_stalls() {
    let dir = temp_dir("top-flags");
    std::fs::create_dir_all(&dir).expect("dir");
    let store = dir.join("svc.jsonl");
    let t = now_ms() - 5_000;
    let mut text = String::new();
    for i in 0..4 {
        text += &worker(i, "start", t, "");
    }
    text += &worker(0, "end", t + 1_000, ",\"pipeline.elapsed_seconds\":1.0");
    text += &worker(1, "running", t + 2_000, "");
    text += &worker(1, "straggler", t + 2_000, ",\"pipeline.straggler.rule\":\"rate\",\"host.name\":\"node-a\",\"process.pid\":4242,\"pipeline.phase.name\":\"decode.jpeg\"");
    text +=
        &worker(2, "stalled", t + 3_000, ",\"pipeline.stalled_seconds\":45.0,\"pipeline.phase.name\":\"wait.input\"");
    // Shard 3 stalled, then moved again: not marked.
    text += &worker(3, "stalled", t + 3_000, ",\"pipeline.stalled_seconds\":30.0");
    text += &worker(3, "resumed", t + 4_000, ",\"pipeline.stalled_seconds\":31.0");
    std::fs::write(&store, text).expect("write");

    let (frame, err, ok) = pipetel(&["top", "--once", store.to_str().expect("utf-8")]);
    assert!(ok, "{err}");
    let stages = section(&frame, "RUNNING STAGES");
    assert!(stages[1].contains("1/3/0/4") && stages[1].ends_with("1 straggler, 1 stalled"), "{frame}");
    let flagged = section(&frame, "STRAGGLERS AND STALLS (2)");
    assert_eq!(flagged.len(), 3, "{frame}");
    let by_shard = |i: &str| flagged.iter().map(|l| words(l)).find(|w| w[2] == i).unwrap_or_default();
    assert_eq!(&by_shard("1")[3..], ["node-a", "4242", by_shard("1")[5], "1.5", "decode.jpeg", "straggler"], "{frame}");
    let stalled = by_shard("2");
    assert_eq!(&stalled[6..], ["1.5", "wait.input", "stalled", "45s"], "{frame}");
    assert!(!flagged.iter().any(|l| words(l)[2] == "3"), "{frame}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child: a stage of two shards through the real pipeline, sampled every 200 ms; shard 0
/// ends, shard 1 runs until the process is killed.
fn dying_writer(dir: &Path) {
    let _telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("dying")
            .with_rows_dir(dir)
            .with_prometheus_port(0)
            .with_prometheus_host("127.0.0.1")
            .with_console_log(false)
            .with_sample_interval(Duration::from_millis(200)),
    )
    .expect("init");
    let stage = pipetel::stage("embed").execution_id("run-9").shards(2).start();
    stage.shard(0).start().finish();
    let shard = stage.shard(1).start();
    loop {
        shard.record(1, 1);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_writer_leaves_lost_shards_and_stages() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        dying_writer(Path::new(&dir));
        return;
    }
    let dir = temp_dir("top-lost");
    let store = dir.join("dying.jsonl");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", DYING, "--nocapture"])
        .env(CHILD_DIR, &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the writer");
    let samples = || {
        std::fs::read_to_string(&store)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"pipeline.status\":\"running\"") && l.contains("\"pipeline.shard.index\":1"))
            .count()
    };
    let t = Instant::now();
    while samples() < 3 {
        assert!(t.elapsed() < Duration::from_secs(60), "the writer wrote no samples");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let d = dir.to_str().expect("utf-8");

    // Running until three 200 ms intervals pass without a row.
    let (summary, _, ok) = pipetel(&["rows", "--dir", d, "--summary"]);
    assert!(ok);
    let w = words(summary.lines().nth(1).expect("a stage line"));
    if w[2] == "running" {
        std::thread::sleep(Duration::from_millis(700));
    }

    // The shard's last row, as the listing prints it, is marked lost.
    let (list, _, ok) = pipetel(&["rows", "--dir", d, "--shard", "1"]);
    assert!(ok);
    let last = list.lines().last().expect("rows of shard 1");
    assert!(last.ends_with("LOST: no row since, over 3 sample intervals"), "{list}");
    let last_time = words(last)[0];
    assert!(list.lines().filter(|l| l.contains("LOST")).count() == 1, "{list}");

    let (summary, _, ok) = pipetel(&["rows", "--dir", d, "--summary"]);
    assert!(ok);
    let w = words(summary.lines().nth(1).expect("a stage line"));
    assert_eq!(&w[..3], ["embed", "run-9", "lost"], "{summary}");
    assert_eq!(&w[w.len() - 3..], ["last", "row", last_time], "{summary}");
    let (timeline, _, _) = pipetel(&["rows", "--dir", d, "--timeline"]);
    assert!(timeline.starts_with("embed run-9 (lost,"), "{timeline}");

    let (frame, err, ok) = pipetel(&["top", "--once", "--dir", d]);
    assert!(ok, "{err}");
    assert_eq!(section(&frame, "RUNNING STAGES").len(), 1, "no running stage left: {frame}");
    let lost = section(&frame, "LOST SHARDS (1)");
    assert_eq!(words(lost[1]), ["embed", "run-9", "1", last_time], "{frame}");
    let lost = section(&frame, "LOST STAGES (1)");
    assert_eq!(words(lost[1]), ["embed", "run-9", "-", last_time], "{frame}");

    // A longer --sample-interval does not matter: the shard's own samples set its interval.
    let (summary, _, _) = pipetel(&["rows", "--dir", d, "--summary", "--sample-interval", "3600"]);
    assert!(summary.contains(" lost "), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}
