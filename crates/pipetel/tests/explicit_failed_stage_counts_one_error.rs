//! A failed stage reported through the explicit `emit_stage_stat` counts in
//! `pipeline.stage.errors` as a failed stage handle does: once per execution, however often
//! its row is emitted, and not at all for a stage that succeeded.
#![cfg(feature = "prometheus")]

use pipetel::pipeline::{emit_stage_stat, StageStat, StageStatus};

/// The `pipeline_stage_errors_total` sample of `stage`'s execution `execution`, if exposed.
fn errors(text: &str, stage: &str, execution: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with("pipeline_stage_errors_total{"))
        .find(|l| l.contains(&format!("=\"{stage}\"")) && l.contains(&format!("pipeline_execution_id=\"{execution}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A row of stage `name`, execution `execution`, with `status`, as a coordinator that
/// aggregated its shards elsewhere would build it (from a handle's row, as its fields are many).
fn row(template: &StageStat, name: &str, execution: &str, status: StageStatus) -> StageStat {
    let mut stat = template.clone();
    stat.stage_name = name.into();
    stat.execution_id = execution.into();
    stat.status = status;
    stat
}

#[test]
fn explicit_failed_stage_rows_count_once_per_execution() {
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("explicit-errors")
            .with_rows(false)
            .with_prometheus_host("127.0.0.1")
            .with_prometheus_port(0)
            .with_console_log(false),
    )
    .expect("init");
    let render = || telemetry.prometheus_render().expect("pull endpoint").render();
    let template = pipetel::stage("template").start().finish();

    emit_stage_stat(&row(&template, "coordinated", "run-1", StageStatus::Running));
    emit_stage_stat(&row(&template, "coordinated", "run-1", StageStatus::Failed));
    let text = render();
    assert_eq!(errors(&text, "coordinated", "run-1"), Some(1.0), "a failed explicit stage is one error:\n{text}");

    // The same execution reported again (a retried report): still one.
    emit_stage_stat(&row(&template, "coordinated", "run-1", StageStatus::Failed));
    assert_eq!(errors(&render(), "coordinated", "run-1"), Some(1.0), "each execution counts once");

    // Another execution that failed counts on its own; one that succeeded counts none.
    emit_stage_stat(&row(&template, "coordinated", "run-2", StageStatus::Failed));
    emit_stage_stat(&row(&template, "coordinated", "run-3", StageStatus::Succeeded));
    let text = render();
    assert_eq!(errors(&text, "coordinated", "run-2"), Some(1.0), "{text}");
    assert_eq!(errors(&text, "coordinated", "run-3").unwrap_or(0.0), 0.0, "{text}");

    // A handle's failed row emitted again explicitly is the same execution: one error.
    let failed = pipetel::stage("handled").execution_id("h-1").start().fail("boom");
    emit_stage_stat(&failed);
    assert_eq!(errors(&render(), "handled", "h-1"), Some(1.0), "the handle counted it; the explicit row did not again");
}
