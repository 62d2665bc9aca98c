//! `PIPETEL_STALL_ACTION=fail`: a shard that stops moving ends as failed, reason `stalled for
//! N s`, once its stall is reported; the stage counts it failed, and the handle's own later
//! `finish` changes nothing.

use std::time::Duration;

use pipetel::config::{MetricExporter, StallAction};
use serde_json::Value;

#[test]
fn a_stalled_shard_ends_as_failed() {
    let path = std::env::temp_dir().join(format!("pipetel-stall-fail-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("stall-fail")
            .with_console_log(false)
            .with_prometheus_port(0)
            .with_metrics_exporters([MetricExporter::Prometheus])
            .with_rows_file(&path)
            .with_sample_interval(Duration::from_millis(100))
            .with_stall_timeout(Duration::from_millis(1000))
            .with_stall_action(StallAction::Fail),
    )
    .expect("init");
    let stage = pipetel::stage("stalls").execution_id("f").shards(2).start();
    let fine = stage.shard(0).start();
    let stuck = stage.shard(1).start();
    stuck.record(1, 1);
    for _ in 0..20 {
        fine.record(1, 1);
        std::thread::sleep(Duration::from_millis(100));
    }
    fine.finish();
    let late = stuck.finish();
    assert_eq!(late.status, pipetel::pipeline::WorkerStatus::Failed, "{late:?}");
    let row = stage.finish();
    assert_eq!((row.shards_failed, row.shards_succeeded), (1, 1), "{row:?}");
    let page = telemetry.prometheus_render().expect("render").render();
    let stalls = page
        .lines()
        .find(|l| l.starts_with("pipeline_stage_stalls_total{") && l.contains("\"stalls\""))
        .unwrap_or_else(|| panic!("no stalls series:\n{page}"));
    assert!(stalls.ends_with(" 1"), "{stalls}");
    drop(telemetry);

    let text = std::fs::read_to_string(&path).expect("rows");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("row")).collect();
    let of = |status: &str| -> Vec<&Value> {
        rows.iter().filter(|r| r["pipeline.shard.index"] == 1 && r["pipeline.status"] == status).collect()
    };
    assert_eq!(of("stalled").len(), 1);
    let failed = of("failed");
    assert_eq!(failed.len(), 1, "one end row: the stall action's");
    assert_eq!(failed[0]["pipeline.failure.reason"], "stalled for 1 s", "{}", failed[0]);
    assert!(of("end").is_empty());
    let _ = std::fs::remove_file(&path);
}
