//! A stage's status and row from its shards: the stage row counts shards whose last attempt
//! succeeded or failed and the retried attempts; `finish()` stays `succeeded` with failed shards
//! counted, `finish_strict()` ends `failed` when a shard's last attempt failed; the shards gauge
//! counts each shard once, by its last attempt.

mod pipeline_support;

use pipeline_support::{fresh_rows_file, rows_config, stage_rows};
use pipetel::pipeline::StageStatus;

/// Shard 0 succeeds; shard 1 fails, is retried and succeeds; shard 2 fails twice.
fn run(stage: &pipetel::Stage) {
    stage.shard(0).start().finish();
    stage.shard(1).start().fail("flaky");
    stage.shard(1).start().finish();
    stage.shard(2).start().fail("broken");
    stage.shard(2).start().fail("still broken");
}

#[test]
fn stage_rows_count_failed_succeeded_and_retried_shards() {
    let rows_file = fresh_rows_file("stage-status");
    let telemetry = pipetel::init(rows_config("stage-status", &rows_file)).expect("init");

    let lenient = pipetel::stage("lenient").execution_id("e").shards(3).start();
    run(&lenient);
    let text = telemetry.prometheus_render().expect("render").render();
    for (state, n) in [("pending", 0), ("running", 0), ("done", 2), ("failed", 1)] {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("pipeline_stage_shards{")
                    && l.contains("pipeline_stage_name=\"lenient\"")
                    && l.contains(&format!("pipeline_shard_state=\"{state}\""))
            })
            .unwrap_or_else(|| panic!("no {state} series:\n{text}"));
        assert!(line.ends_with(&format!(" {n}")), "each shard counts once, by its last attempt: {line}");
    }
    let row = lenient.finish();
    assert_eq!(row.status, StageStatus::Succeeded, "finish() lets shards be retried");
    assert_eq!((row.shards_succeeded, row.shards_failed, row.shards_retried), (1 + 1, 1, 2));

    let strict = pipetel::stage("strict").execution_id("e").shards(3).start();
    run(&strict);
    let row = strict.finish_strict();
    assert_eq!(row.status, StageStatus::Failed);
    assert_eq!(row.reason.as_deref(), Some("1 of 3 shards failed"));

    let clean = pipetel::stage("clean").execution_id("e").shards(1).start();
    clean.shard(0).start().fail("once");
    clean.shard(0).start().finish();
    let row = clean.finish_strict();
    assert_eq!((row.status, row.shards_failed, row.shards_retried), (StageStatus::Succeeded, 0, 1));

    let text = telemetry.prometheus_render().expect("render").render();
    assert!(
        text.lines().any(|l| l.starts_with("pipeline_stage_runs_total{")
            && l.contains("pipeline_stage_name=\"strict\"")
            && l.contains("pipeline_status=\"failed\"")),
        "{text}"
    );
    drop(telemetry);

    let stage_rows = stage_rows(&rows_file);
    let fields = |stage: &str| {
        let r = &stage_rows[stage];
        (
            r["pipeline.status"].as_str().expect("status").to_string(),
            r["pipeline.shards.succeeded"].as_u64(),
            r["pipeline.shards.failed"].as_u64(),
            r["pipeline.shards.retried"].as_u64(),
        )
    };
    assert_eq!(fields("lenient"), ("succeeded".into(), Some(2), Some(1), Some(2)));
    assert_eq!(fields("strict"), ("failed".into(), Some(2), Some(1), Some(2)));
    assert_eq!(fields("clean"), ("succeeded".into(), Some(1), Some(0), Some(1)));
    assert_eq!(stage_rows["strict"]["pipeline.failure.reason"], "1 of 3 shards failed");
    let _ = std::fs::remove_file(&rows_file);
}
