//! Answers from a real run, read back from the rows file and the pull endpoint: a planted
//! straggler is named within one sample interval of crossing the rule, a planted stall within
//! one interval after the timeout (and resumed, or failed under `PIPETEL_STALL_ACTION=fail`), a
//! phase of known length reads its length, and phases plus the time outside them make the
//! shard's wall time. The stage row carries the distribution and the skew; the families carry
//! the same answers without a series per shard.

use std::time::{Duration, Instant};

use pipetel::config::{MetricExporter, ShardMetrics, StallAction};
use pipetel::Config;
use serde_json::Value;

const INTERVAL: Duration = Duration::from_millis(100);

fn init(name: &str, rows: &std::path::Path, action: StallAction) -> pipetel::Telemetry {
    let _ = std::fs::remove_file(rows);
    pipetel::init(
        Config::default()
            .with_service_name(name)
            .with_console_log(false)
            .with_prometheus_port(0)
            .with_metrics_exporters([MetricExporter::Prometheus])
            .with_rows_file(rows)
            .with_sample_interval(INTERVAL)
            .with_skew_min(Duration::from_millis(200))
            .with_stall_timeout(Duration::from_millis(500))
            .with_stall_action(action)
            .with_shard_metrics(ShardMetrics::Running),
    )
    .expect("init")
}

fn rows(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("rows file");
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect()
}

fn worker<'a>(rows: &'a [Value], shard: u64, status: &str) -> Vec<&'a Value> {
    rows.iter()
        .filter(|r| {
            r["event"] == "pipeline.worker" && r["pipeline.shard.index"] == shard && r["pipeline.status"] == status
        })
        .collect()
}

fn f(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or_else(|| panic!("{key} in {row}"))
}

fn ms(row: &Value) -> f64 {
    f(row, "timestamp_ms")
}

/// One process, the scenarios in turn (`init` is once per process).
#[test]
fn stragglers_stalls_and_phases_from_a_real_run() {
    let path = std::env::temp_dir().join(format!("pipetel-answers-{}.jsonl", std::process::id()));
    let telemetry = init("answers", &path, StallAction::Report);

    // ----- a straggler: 4 shards finish in 0.4 s, the fifth runs for 1.6 s -----
    let stage = pipetel::stage("skewed").execution_id("s1").shards(5).start();
    std::thread::scope(|s| {
        for i in 0..5u32 {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                let until =
                    Instant::now() + if i == 4 { Duration::from_millis(1600) } else { Duration::from_millis(400) };
                while Instant::now() < until {
                    shard.record(1, 10);
                    std::thread::sleep(Duration::from_millis(5));
                }
                shard.finish();
            });
        }
    });
    let answers = stage.answers();
    let row = stage.finish();
    assert_eq!(row.shards_succeeded, 5);
    assert!(answers.skewed, "{answers:?}");
    assert_eq!(answers.stragglers, 1, "{answers:?}");

    // ----- a stall, then resumed; a phase of known length -----
    let stage = pipetel::stage("stuck").execution_id("s2").shards(1).start();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("stuck-worker".into())
            .spawn_scoped(s, || {
                let shard = stage.shard(0).start();
                shard.record(1, 1);
                {
                    let _w = shard.phase("wait.input");
                    std::thread::sleep(Duration::from_millis(2000));
                }
                shard.record(1, 1);
                std::thread::sleep(Duration::from_millis(3 * INTERVAL.as_millis() as u64));
                shard.finish();
            })
            .expect("spawned");
    });
    stage.finish();
    drop(telemetry);

    let all = rows(&path);
    let of =
        |stage: &str| -> Vec<Value> { all.iter().filter(|r| r["pipeline.stage.name"] == stage).cloned().collect() };

    // The straggler: named once, by the elapsed rule, within one interval of crossing it.
    let skewed = of("skewed");
    let named = worker(&skewed, 4, "straggler");
    assert_eq!(named.len(), 1, "one straggler row: {named:?}");
    let ends: Vec<f64> = (0..4).map(|i| f(worker(&skewed, i, "end")[0], "pipeline.elapsed_seconds")).collect();
    let p75 = pipetel_rows::answers::Distribution::of(&ends).expect("ends").p75;
    let straggler = named[0];
    assert_eq!(straggler["pipeline.straggler.rule"], "elapsed");
    assert!((f(straggler, "pipeline.peers.median") - p75).abs() < 1e-9, "{straggler}");
    assert_eq!(straggler["process.pid"], u64::from(std::process::id()));
    assert!(straggler["host.name"].as_str().is_some_and(|h| !h.is_empty()), "{straggler}");
    // Crossing: elapsed over 1.5 × p75 and 0.2 s beyond it; named by the first sample after.
    let crossing = (1.5 * p75).max(p75 + 0.2);
    let start = ms(worker(&skewed, 4, "start")[0]);
    let late = (ms(straggler) - start) / 1000.0 - crossing;
    // Row times are whole milliseconds: a row in the crossing's millisecond reads up to 1 ms early.
    assert!(late >= -0.002 && late <= INTERVAL.as_secs_f64() + 0.05, "named {late:.3} s after crossing");
    assert!(worker(&skewed, 0, "straggler").is_empty(), "no other straggler");
    let stage_row = skewed.iter().find(|r| r["event"] == "pipeline.stage").expect("stage row");
    assert_eq!(stage_row["pipeline.stage.skewed"], true, "{stage_row}");
    assert_eq!(stage_row["pipeline.stage.stragglers"], 1);
    assert!(
        (f(stage_row, "pipeline.shard.elapsed.max") - f(worker(&skewed, 4, "end")[0], "pipeline.elapsed_seconds"))
            .abs()
            < 1e-9
    );
    assert!(f(stage_row, "pipeline.stage.skew") > 3.0, "{stage_row}");

    // The stall: within one interval after the timeout, counted from the sample that last saw
    // the shard move; with its thread's name and phase; resumed once it moves.
    let stuck = of("stuck");
    let stalled = worker(&stuck, 0, "stalled");
    assert_eq!(stalled.len(), 1, "{stalled:?}");
    let stalled = stalled[0];
    assert_eq!(stalled["pipeline.phase.name"], "wait.input", "{stalled}");
    assert_eq!(stalled["pipeline.thread.name"], "stuck-worker", "{stalled}");
    let moved = worker(&stuck, 0, "running")
        .into_iter()
        .chain(worker(&stuck, 0, "start"))
        .filter(|r| ms(r) < ms(stalled) && r["pipeline.items"] == 1)
        .map(ms)
        .fold(f64::INFINITY, f64::min);
    let after_timeout = (ms(stalled) - moved) / 1000.0 - 0.5;
    assert!(
        after_timeout >= -0.01 && after_timeout <= INTERVAL.as_secs_f64() + 0.05,
        "stalled row {after_timeout:.3} s after the timeout"
    );
    assert_eq!(worker(&stuck, 0, "resumed").len(), 1, "resumed once");
    // The phase: 2 s within 1 %, and phases plus the rest make the wall time within 1 %.
    let end = worker(&stuck, 0, "end")[0];
    let wait = f(end, "pipeline.phase.wait.input.seconds");
    assert!((wait - 2.0).abs() <= 0.02, "wait.input {wait}");
    let wall = f(end, "pipeline.elapsed_seconds");
    let parts = wait + f(end, "pipeline.unphased.seconds");
    assert!((parts - wall).abs() <= 0.01 * wall, "phases {parts} vs wall {wall}");
    let _ = std::fs::remove_file(&path);
}
