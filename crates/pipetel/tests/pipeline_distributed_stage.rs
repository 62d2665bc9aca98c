//! A distributed stage: shards run in child processes (`Stage::remote`) send their cumulative
//! reports (recorder envelopes, here through files) to the owning process, whose stage row and
//! stage metrics then hold the exact totals, including one failing remote shard in
//! `pipeline.shards.failed`; late and repeated reports change nothing. A child exports its
//! shard's worker metrics and no stage metrics of the remote view.

mod pipeline_support;

use std::process::Command;

use pipeline_support::{rows, rows_config};
use pipetel::pipeline::{CounterKey, CounterValue, RemoteIngested, StageStatus};
use serde_json::Value;

const CHILD: &str = "PIPETEL_TEST_REMOTE_SHARD";
const TEST: &str = "remote_shards_count_in_the_owners_row_and_metrics";
const FALLBACK_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// In a child: runs shard `index` of the remote stage and writes a partial report, then the
/// final one, to `<out>.1` and `<out>.2`.
fn child(index: u32, traceparent: &str, out: &str) {
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("remote-shard")
            .with_rows(false)
            .with_console_log(false)
            .with_prometheus_port(0)
            // The shard's worker series outlive it (by default only running shards have one).
            .with_shard_metrics(pipetel::config::ShardMetrics::All),
    )
    .expect("init");
    let stage = pipetel::Stage::remote("distributed", "e1", traceparent).expect("remote view");
    let source = format!("child-{index}-{}", std::process::id());
    let items_key = CounterKey::new("zephyr/item_count").expect("key");
    let cpu_key = CounterKey::new("zephyr/worker/cpu_pct_average").expect("key");
    let shard = stage.shard(index).start();
    shard.record(50, 500);
    std::fs::write(format!("{out}.1"), stage.remote_report(&source).encode()).expect("write partial");
    shard.record(100 * u64::from(index) - 50, 1000 * u64::from(index) - 500);
    shard.add(&items_key, u64::from(index));
    shard.add(&cpu_key, 0.5);
    if index == 3 {
        shard.fail("corrupt input");
    } else {
        shard.finish();
    }
    std::fs::write(format!("{out}.2"), stage.remote_report(&source).encode()).expect("write final");
    // The shard's worker metrics are this process's; the stage metrics only the owner's, so a
    // backend summing over processes counts each shard once.
    let text = telemetry.prometheus_render().expect("render").render();
    let expected = f64::from(100 * index);
    assert_eq!(value(&text, "pipeline_worker_items_total{", &format!("pipeline_shard_index=\"{index}\"")), expected);
    for family in ["pipeline_stage_items_total{", "pipeline_stage_shards{", "pipeline_stage_counters{"] {
        assert!(!text.lines().any(|l| l.starts_with(family)), "a remote view exports {family}:\n{text}");
    }
}

fn value(text: &str, metric: &str, extra: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(metric) && l.contains("pipeline_stage_name=\"distributed\"") && l.contains(extra))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {metric} {extra} in:\n{text}"))
}

#[test]
fn remote_shards_count_in_the_owners_row_and_metrics() {
    if let Ok(spec) = std::env::var(CHILD) {
        let mut parts = spec.splitn(3, ';');
        let (i, tp, out) = (parts.next(), parts.next(), parts.next());
        child(i.and_then(|i| i.parse().ok()).expect("index"), tp.expect("traceparent"), out.expect("out"));
        return;
    }
    let dir = std::env::temp_dir().join(format!("pipetel-distributed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let rows_file = dir.join("rows.jsonl");
    let telemetry = pipetel::init(rows_config("distributed-owner", &rows_file)).expect("init");
    let stage = pipetel::stage("distributed").execution_id("e1").shards(4).start();
    let traceparent = stage.traceparent().unwrap_or_else(|| FALLBACK_PARENT.to_string());
    // Shard 0 runs here; shards 1..=3 in child processes, shard 3 failing.
    let local = stage.shard(0).start();
    local.record(7, 70);
    local.finish();
    let children: Vec<_> = (1..=3u32)
        .map(|i| {
            let out = dir.join(format!("shard-{i}")).display().to_string();
            let child = Command::new(std::env::current_exe().expect("test binary"))
                .args(["--exact", TEST, "--nocapture"])
                .env(CHILD, format!("{i};{traceparent};{out}"))
                .env_remove("RUST_LOG")
                .output()
                .expect("spawn child");
            assert!(child.status.success(), "child {i}: {}", String::from_utf8_lossy(&child.stderr));
            out
        })
        .collect();

    for out in &children {
        let partial = std::fs::read(format!("{out}.1")).expect("partial report");
        let last = std::fs::read(format!("{out}.2")).expect("final report");
        // The final report arrives first; the partial one is late and changes nothing.
        assert_eq!(stage.ingest_remote(&last).expect("ingest"), RemoteIngested::Accepted);
        assert_eq!(stage.ingest_remote(&partial).expect("ingest"), RemoteIngested::Superseded);
        assert_eq!(stage.ingest_remote(&last).expect("ingest"), RemoteIngested::Superseded);
    }
    // Garbage and another stage's report are refused naming the problem.
    assert!(stage.ingest_remote(b"not an envelope").expect_err("garbage").to_string().contains("does not decode"));
    let other = pipetel::stage("other").execution_id("e1").start();
    let err = other.ingest_remote(&std::fs::read(format!("{}.2", children[0])).expect("report")).expect_err("other");
    assert!(err.to_string().contains("\"distributed\""), "{err}");
    other.finish();

    let items: u32 = 7 + 100 + 200 + 300;
    let bytes: u32 = 70 + 1000 + 2000 + 3000;
    let text = telemetry.prometheus_render().expect("render").render();
    assert_eq!(value(&text, "pipeline_stage_items_total{", ""), f64::from(items), "{text}");
    assert_eq!(value(&text, "pipeline_stage_bytes_total{", ""), f64::from(bytes), "{text}");
    assert_eq!(value(&text, "pipeline_stage_shards{", "pipeline_shard_state=\"done\""), 3.0, "{text}");
    assert_eq!(value(&text, "pipeline_stage_shards{", "pipeline_shard_state=\"failed\""), 1.0, "{text}");
    assert_eq!(value(&text, "pipeline_stage_errors_total{", ""), 1.0, "{text}");
    assert_eq!(value(&text, "pipeline_stage_counters{", "pipeline_counter_name=\"zephyr/item_count\""), 6.0);
    assert_eq!(
        value(&text, "pipeline_stage_counters{", "pipeline_counter_name=\"zephyr/worker/cpu_pct_average\""),
        1.5
    );

    let row = stage.finish();
    assert_eq!((row.items, row.bytes), (u64::from(items), u64::from(bytes)));
    assert_eq!((row.shards_succeeded, row.shards_failed, row.shards_retried), (3, 1, 0));
    assert_eq!(row.status, StageStatus::Succeeded);
    assert_eq!(
        row.counters,
        vec![
            ("zephyr/item_count".to_string(), CounterValue::Int(6)),
            ("zephyr/worker/cpu_pct_average".to_string(), CounterValue::Float(1.5)),
        ]
    );
    drop(telemetry);

    let stage_row: Value = rows(&rows_file)
        .into_iter()
        .find(|r| r["event"] == "pipeline.stage" && r["pipeline.stage.name"] == "distributed")
        .expect("stage row");
    assert_eq!(stage_row["pipeline.items"].as_i64(), Some(i64::from(items)), "{stage_row}");
    assert_eq!(stage_row["pipeline.shards.failed"].as_i64(), Some(1), "{stage_row}");
    assert_eq!(stage_row["pipeline.shards.succeeded"].as_i64(), Some(3), "{stage_row}");
    assert_eq!(stage_row["pipeline.counter.zephyr/item_count"].as_i64(), Some(6), "{stage_row}");
    let _ = std::fs::remove_dir_all(&dir);
}
