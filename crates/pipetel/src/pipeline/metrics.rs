//! The stage and worker metrics: observable instruments whose callbacks fold the shards' cells
//! at collection time, so the hot path never touches the SDK.

use std::sync::atomic::Ordering;

use opentelemetry::metrics::Meter;
use opentelemetry::KeyValue;

use super::state::{check_overflow, registry, FAILED, RUNNING, SUCCEEDED};

/// Names and units of the metrics, the one place they are spelled (the README table is checked
/// against this list).
pub const METRICS: &[(&str, &str, &str)] = &[
    ("pipeline.stage.items", "{item}", "Items processed by a stage's shards"),
    ("pipeline.stage.bytes", "By", "Bytes processed by a stage's shards"),
    ("pipeline.stage.duration", "s", "Wall time of finished stages"),
    ("pipeline.stage.active", "{stage}", "1 while the stage runs, 0 once it ended"),
    ("pipeline.stage.runs", "{run}", "Finished stage runs by status"),
    ("pipeline.stage.shards", "{shard}", "Shards of a stage by state (pending, running, done, failed)"),
    ("pipeline.stage.errors", "{error}", "Failed shards and failed stages"),
    (
        "pipeline.stage.cpu.utilization",
        "1",
        "Mean over the stage's shards of their average CPU utilization (1 = one core)",
    ),
    ("pipeline.worker.items", "{item}", "Items processed by a shard"),
    ("pipeline.worker.bytes", "By", "Bytes processed by a shard"),
    ("pipeline.worker.cpu.time", "s", "CPU time of the shard's thread since it started"),
    ("pipeline.worker.cpu.utilization", "1", "CPU utilization of the shard's thread at the last sample (1 = one core)"),
    ("pipeline.worker.memory.usage", "By", "Resident memory of the process at the shard's last sample"),
    ("pipeline.worker.memory.average", "By", "Mean resident memory over the shard's samples"),
    ("pipeline.worker.memory.peak", "By", "Peak resident memory over the shard's samples"),
    ("pipeline.worker.heartbeat", "s", "Time of the shard's last sample, seconds since the epoch"),
];

fn unit(name: &str) -> &'static str {
    METRICS.iter().find(|(n, _, _)| *n == name).map(|(_, u, _)| *u).unwrap_or("")
}

fn desc(name: &str) -> &'static str {
    METRICS.iter().find(|(n, _, _)| *n == name).map(|(_, _, d)| *d).unwrap_or("")
}

/// Observes one value per shard, at most `limit - 1` shard series: past that, counters fold the
/// rest into one series marked `otel.metric.overflow=true` holding their sum (the SDK's own
/// overflow series would keep only one of the observed values), and gauges drop them.
macro_rules! observe_shards {
    ($meter:expr, $kind:ident, $name:literal, $fold:ident, |$shard:ident| $value:expr) => {
        $meter
            .$kind($name)
            .with_unit(unit($name))
            .with_description(desc($name))
            .with_callback(|obs| {
                let room = shard_series_room();
                let mut series = 0usize;
                let mut overflow = None;
                for stage in registry().stages() {
                    for $shard in stage.shards() {
                        let Some(v) = $value else { continue };
                        if series < room {
                            obs.observe(v, &$shard.attrs);
                        } else {
                            overflow = fold!($fold, overflow, v);
                        }
                        series += 1;
                    }
                }
                if let Some(v) = overflow {
                    obs.observe(v, &[KeyValue::new("otel.metric.overflow", true)]);
                }
                check_overflow(series);
            })
            .build()
    };
}

macro_rules! fold {
    (sum, $acc:expr, $v:expr) => {
        Some($acc.unwrap_or_default() + $v)
    };
    (drop, $acc:expr, $v:expr) => {{
        let _ = $v;
        $acc
    }};
}

/// Shard series an instrument may carry before the rest fold: one slot stays for the overflow.
fn shard_series_room() -> usize {
    super::state::runtime()
        .map(|r| r.cardinality_limit)
        .unwrap_or(crate::config::DEFAULT_CARDINALITY_LIMIT)
        .saturating_sub(1)
        .max(1)
}

/// Registers every observable instrument on `meter`. The SDK keeps the callbacks for the
/// provider's lifetime.
pub(crate) fn register(meter: &Meter) {
    let _ = meter
        .u64_observable_counter("pipeline.stage.items")
        .with_unit(unit("pipeline.stage.items"))
        .with_description(desc("pipeline.stage.items"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                obs.observe(stage_totals(&stage).0, &stage.meta.attrs);
            }
        })
        .build();
    let _ = meter
        .u64_observable_counter("pipeline.stage.bytes")
        .with_unit(unit("pipeline.stage.bytes"))
        .with_description(desc("pipeline.stage.bytes"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                obs.observe(stage_totals(&stage).1, &stage.meta.attrs);
            }
        })
        .build();
    let _ = meter
        .i64_observable_up_down_counter("pipeline.stage.active")
        .with_unit(unit("pipeline.stage.active"))
        .with_description(desc("pipeline.stage.active"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                obs.observe(i64::from(stage.state.load(Ordering::Acquire) == RUNNING), &stage.meta.attrs);
            }
        })
        .build();
    let _ = meter
        .u64_observable_gauge("pipeline.stage.shards")
        .with_unit(unit("pipeline.stage.shards"))
        .with_description(desc("pipeline.stage.shards"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                let mut counts = [0u64; 4];
                let shards = stage.shards();
                for s in &shards {
                    match s.state.load(Ordering::Acquire) {
                        RUNNING => counts[1] += 1,
                        SUCCEEDED => counts[2] += 1,
                        FAILED => counts[3] += 1,
                        _ => {}
                    }
                }
                counts[0] = u64::from(stage.total_shards).saturating_sub(shards.len() as u64);
                for (count, attrs) in counts.iter().zip(stage.state_attrs.iter()) {
                    obs.observe(*count, attrs);
                }
            }
        })
        .build();
    let _ = meter
        .u64_observable_counter("pipeline.stage.errors")
        .with_unit(unit("pipeline.stage.errors"))
        .with_description(desc("pipeline.stage.errors"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                let failed_shards =
                    stage.shards().iter().filter(|s| s.state.load(Ordering::Acquire) == FAILED).count() as u64;
                obs.observe(failed_shards + stage.stage_errors.load(Ordering::Relaxed), &stage.meta.attrs);
            }
        })
        .build();
    let _ = meter
        .f64_observable_gauge("pipeline.stage.cpu.utilization")
        .with_unit(unit("pipeline.stage.cpu.utilization"))
        .with_description(desc("pipeline.stage.cpu.utilization"))
        .with_callback(|obs| {
            for stage in registry().stages() {
                let avgs: Vec<f64> = stage
                    .shards()
                    .iter()
                    .filter_map(|s| s.sample.lock().ok().and_then(|g| g.cpu_percent_avg()))
                    .collect();
                if !avgs.is_empty() {
                    obs.observe(avgs.iter().sum::<f64>() / avgs.len() as f64 / 100.0, &stage.meta.attrs);
                }
            }
        })
        .build();

    let _ = observe_shards!(meter, u64_observable_counter, "pipeline.worker.items", sum, |s| Some(
        s.cells.items.load(Ordering::Relaxed)
    ));
    let _ = observe_shards!(meter, u64_observable_counter, "pipeline.worker.bytes", sum, |s| Some(
        s.cells.bytes.load(Ordering::Relaxed)
    ));
    let _ = observe_shards!(meter, f64_observable_counter, "pipeline.worker.cpu.time", sum, |s| s
        .sample
        .lock()
        .ok()
        .map(|g| g.last.cpu_time.as_secs_f64()));
    let _ = observe_shards!(meter, f64_observable_gauge, "pipeline.worker.cpu.utilization", drop, |s| s
        .sample
        .lock()
        .ok()
        .and_then(|g| g.last.cpu_percent)
        .map(|p| p / 100.0));
    let _ = observe_shards!(meter, u64_observable_gauge, "pipeline.worker.memory.usage", drop, |s| s
        .sample
        .lock()
        .ok()
        .map(|g| g.last.memory_current)
        .filter(|m| *m > 0));
    let _ = observe_shards!(meter, u64_observable_gauge, "pipeline.worker.memory.average", drop, |s| s
        .sample
        .lock()
        .ok()
        .map(|g| g.last.memory_avg)
        .filter(|m| *m > 0));
    let _ = observe_shards!(meter, u64_observable_gauge, "pipeline.worker.memory.peak", drop, |s| s
        .sample
        .lock()
        .ok()
        .map(|g| g.last.memory_peak)
        .filter(|m| *m > 0));
    let _ = observe_shards!(meter, f64_observable_gauge, "pipeline.worker.heartbeat", drop, |s| s
        .sample
        .lock()
        .ok()
        .map(|g| g.heartbeat)
        .filter(|h| *h > 0.0));
}

fn stage_totals(stage: &super::state::StageInner) -> (u64, u64) {
    stage.totals()
}
