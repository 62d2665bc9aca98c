//! GPU use attributed to shards and stages by the documented rule (`pipetel_core::pipeline::gpu`):
//! the shards running in the process at a sample share the interval's reading equally; their end
//! rows and the stage row carry GPU-busy seconds, held and idle seconds, mean activity, peak
//! memory and energy, and the stage families carry the same. The reader here gives fixed
//! figures, standing in for the GPU poller (whose readings come from NVML).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pipetel::config::MetricExporter;
use pipetel::pipeline::gpu::{set_gpu_reader, GpuUse};
use serde_json::Value;

static READS: AtomicU32 = AtomicU32::new(0);

#[test]
fn shards_share_the_process_gpu_use_and_the_stage_sums_it() {
    let path = std::env::temp_dir().join(format!("pipetel-gpu-attr-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("gpu-attribution")
            .with_console_log(false)
            .with_prometheus_port(0)
            .with_metrics_exporters([MetricExporter::Prometheus])
            .with_rows_file(&path)
            // Samples are taken by the test alone.
            .with_sample_interval(Duration::from_secs(3600)),
    )
    .expect("init");
    // Busy 80 % with GPM activity for the first reads, then idle with memory still held.
    set_gpu_reader(Some(Box::new(|| {
        let n = READS.fetch_add(1, Ordering::Relaxed);
        Some(if n < 3 {
            GpuUse {
                busy: 0.8,
                sm_active: Some(0.6),
                tensor_active: Some(0.4),
                memory_bytes: 4 << 30,
                energy_joules: 100.0,
            }
        } else {
            GpuUse {
                busy: 0.0,
                sm_active: Some(0.01),
                tensor_active: Some(0.0),
                memory_bytes: 2 << 30,
                energy_joules: 20.0,
            }
        })
    })));
    let stage = pipetel::stage("train").execution_id("g").shards(2).start();
    let a = stage.shard(0).start();
    let b = stage.shard(1).start();
    // The first read sets the clock; each later one covers the interval since.
    pipetel::testing::sample_now();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(100));
        pipetel::testing::sample_now();
    }
    a.finish();
    b.finish();
    let answers = stage.answers();
    stage.finish();
    let page = telemetry.prometheus_render().expect("render").render();
    drop(telemetry);
    set_gpu_reader(None);

    let rows: Vec<Value> =
        std::fs::read_to_string(&path).expect("rows").lines().map(|l| serde_json::from_str(l).expect("row")).collect();
    let end = |i: u64| -> &Value {
        rows.iter().find(|r| r["pipeline.shard.index"] == i && r["pipeline.status"] == "end").expect("end row")
    };
    let f = |r: &Value, k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
    let (ea, eb) = (end(0), end(1));
    // Two busy intervals (reads 2 and 3) and two idle ones (reads 4 and 5), each shared by two.
    let gpu = answers.gpu.expect("the stage's GPU use");
    for e in [ea, eb] {
        assert!((f(e, "pipeline.gpu.seconds") - gpu.seconds / 2.0).abs() < 1e-9, "{e}");
        assert_eq!(f(e, "pipeline.gpu.energy_joules"), (2.0 * 100.0 + 2.0 * 20.0) / 2.0, "{e}");
        assert_eq!(e["pipeline.gpu.memory.peak_bytes"], 4u64 << 30, "{e}");
        let (held, idle) = (f(e, "pipeline.gpu.held_seconds"), f(e, "pipeline.gpu.idle_seconds"));
        assert!(held > 0.18 && idle > 0.08 && idle < held, "held {held}, idle {idle}");
    }
    // Busy seconds: 0.8 of the busy intervals' time (about 0.2 s), nothing of the idle ones.
    assert!((0.12..0.3).contains(&gpu.seconds), "{gpu:?}");
    let sm = gpu.sm_active().expect("GPM activity");
    assert!(sm > 0.01 && sm < 0.6, "a time-weighted mean of 0.6 and 0.01: {sm}");
    let stage_row = rows.iter().find(|r| r["event"] == "pipeline.stage").expect("stage row");
    assert!((f(stage_row, "pipeline.gpu.seconds") - gpu.seconds).abs() < 1e-9, "{stage_row}");
    assert_eq!(f(stage_row, "pipeline.gpu.energy_joules"), 240.0);
    for family in [
        "pipeline_stage_gpu_time_seconds_total{",
        "pipeline_stage_gpu_idle_seconds_total{",
        "pipeline_stage_gpu_energy_joules_total{",
        "pipeline_stage_gpu_sm_active_ratio{",
        "pipeline_stage_gpu_memory_peak_bytes{",
    ] {
        assert!(page.lines().any(|l| l.starts_with(family) && l.contains("\"train\"")), "no {family} in:\n{page}");
    }
    let _ = std::fs::remove_file(&path);
}
