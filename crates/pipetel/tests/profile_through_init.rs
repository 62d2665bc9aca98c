//! `PIPETEL_PROFILE=cpu` through `init`: the profile store sits beside the rows store, the stage
//! row names the function its shard spun in with its share, shard end rows and spans carry
//! their sample counts, and the samples of a shard carry the trace and span of its span (the
//! trace leads to the code). Its own test binary: `init` and the profiler are once per process.

use std::hint::black_box;

use opentelemetry::Value as OtelValue;
use opentelemetry_sdk::trace::InMemorySpanExporter;
use pipetel::config::ProfileMode;
use pipetel::{Config, InitOptions};
use pipetel_rows::profile::{beside, read_profiles, Filter};
use serde_json::Value;

/// CPU work done in this function's own code (no calls, even unoptimised), so its self time is
/// the stage's.
#[inline(never)]
fn crunch_numbers(rounds: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut i = 0;
    while i < rounds * 300_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i += 1;
    }
    x
}

#[test]
fn a_profiled_run_names_its_hot_function_on_the_stage_row_and_links_samples_to_spans() {
    let dir = std::env::temp_dir().join(format!("pipetel-profile-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let rows_path = dir.join("profiled.jsonl");
    let spans = InMemorySpanExporter::default();
    let config = Config::default()
        .with_service_name("profiled")
        .with_console_log(false)
        .with_prometheus_port(0)
        .with_traces_exporters([])
        .with_logs_exporters([])
        .with_rows_file(&rows_path)
        .with_profile(ProfileMode::Cpu)
        .with_profile_hz(250);
    let telemetry = pipetel::init_with(config, InitOptions::new().with_span_exporter(spans.clone())).expect("init");

    let stage = pipetel::stage("crunch").execution_id("e1").shards(2).start();
    std::thread::scope(|s| {
        for i in 0..2u32 {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                black_box(crunch_numbers(500));
                shard.finish();
            });
        }
    });
    stage.finish();
    telemetry.force_flush().expect("flush");
    let finished = spans.get_finished_spans().expect("spans");
    drop(telemetry);

    // The stage row: samples, and the hot function first among the top functions.
    let text = std::fs::read_to_string(&rows_path).expect("rows");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    let stage_row = rows.iter().find(|r| r["event"] == "pipeline.stage").expect("a stage row");
    let samples = stage_row["pipeline.profile.samples"].as_u64().expect("samples on the stage row");
    assert!(samples >= 50, "{stage_row}");
    let top = stage_row["pipeline.profile.top"].as_str().expect("top functions on the stage row");
    let first = top.split("; ").next().unwrap_or_default();
    assert!(first.contains("crunch_numbers"), "top: {top}");
    let share: f64 = first.rsplit(' ').next().and_then(|p| p.trim_end_matches('%').parse().ok()).expect("a share");
    assert!(share > 50.0, "top: {top}");

    // End rows and shard spans carry each shard's samples; together they are the stage's.
    let ends: Vec<&Value> =
        rows.iter().filter(|r| r["event"] == "pipeline.worker" && r["pipeline.status"] == "end").collect();
    assert_eq!(ends.len(), 2);
    let per_shard: u64 = ends.iter().map(|r| r["pipeline.profile.samples"].as_u64().expect("samples")).sum();
    assert_eq!(per_shard, samples, "the shards' samples are the stage's");
    let shard_spans: Vec<_> = finished.iter().filter(|s| s.name.starts_with("shard ")).collect();
    assert_eq!(shard_spans.len(), 2);
    for span in &shard_spans {
        let n = span.attributes.iter().find(|kv| kv.key.as_str() == "pipeline.profile.samples").map(|kv| &kv.value);
        assert!(matches!(n, Some(OtelValue::I64(n)) if *n > 0), "{:?}", span.attributes);
    }

    // The store beside the rows: each shard's samples carry its span's trace and span ids.
    let read = read_profiles(&beside(&rows_path)).expect("the profile store");
    for span in &shard_spans {
        let trace = span.span_context.trace_id().to_string();
        let filter = Filter { trace_id: Some(trace.clone()), ..Default::default() };
        let under_trace: Vec<_> = read.lines.iter().filter(|l| filter.matches(l)).collect();
        assert!(under_trace.iter().all(|l| l.stage.as_deref() == Some("crunch")), "the trace is the stage's");
        let span_id = span.span_context.span_id().to_string();
        let shard: Vec<_> = under_trace.iter().filter(|l| l.span_id.as_deref() == Some(span_id.as_str())).collect();
        assert!(
            shard.iter().any(|l| l.stack.iter().any(|f| f.ends_with("crunch_numbers"))),
            "samples under span {span_id}"
        );
        let index =
            span.attributes.iter().find(|kv| kv.key.as_str() == "pipeline.shard.index").map(|kv| kv.value.clone());
        assert!(shard.iter().all(|l| index == Some(OtelValue::I64(i64::from(l.shard.unwrap_or(u32::MAX))))));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
