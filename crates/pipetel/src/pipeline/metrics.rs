//! The stage and worker metrics: observable instruments whose callbacks fold the shards' cells
//! at collection time, so the hot path never touches the SDK, and the two instruments recorded
//! when a stage row is emitted (duration and runs).

use std::ops::Add;

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Counter, Histogram, Meter};
use opentelemetry::KeyValue;

use super::keys;
use super::overflow::{Fold, Series};
use super::row::{Namespaces, StageStat};
use super::table::{table, ShardInner, StageInner};

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
    ("pipeline.stage.counters", "{value}", "A stage's user counter summed over its shards, by pipeline.counter.name"),
    ("pipeline.rows.lost", "{row}", "Rows that did not reach the rows store (store failing, or emitted before init)"),
];

/// Buckets of `pipeline.stage.duration`, seconds: from 100 ms to a day.
const DURATION_BUCKETS: [f64; 14] =
    [0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0];

fn unit(name: &str) -> &'static str {
    METRICS.iter().find(|(n, _, _)| *n == name).map(|(_, u, _)| *u).unwrap_or("")
}

fn desc(name: &str) -> &'static str {
    METRICS.iter().find(|(n, _, _)| *n == name).map(|(_, _, d)| *d).unwrap_or("")
}

/// Sets the unit and description [`METRICS`] gives the builder's instrument.
fn described<'a, I, M>(builder: AsyncInstrumentBuilder<'a, I, M>) -> AsyncInstrumentBuilder<'a, I, M> {
    let (u, d) = (unit(&builder.name), desc(&builder.name));
    builder.with_unit(u).with_description(d)
}

type StageValue<M> = fn(&StageInner) -> Option<M>;
type ShardValue<M> = fn(&ShardInner) -> Option<M>;

/// A callback observing `value` once per exported stage, under the stage's attributes.
fn per_stage<M: 'static>(value: StageValue<M>) -> impl Fn(&dyn AsyncInstrument<M>) + Send + Sync + 'static {
    move |obs| {
        for stage in table().stages() {
            if let Some(v) = value(&stage) {
                obs.observe(v, &stage.meta.attrs);
            }
        }
    }
}

/// A callback observing `value` once per shard, under the shard's attributes, within the
/// cardinality `limit` (see [`super::overflow`]).
fn per_shard<M>(
    limit: usize,
    fold: Fold,
    value: ShardValue<M>,
) -> impl Fn(&dyn AsyncInstrument<M>) + Send + Sync + 'static
where
    M: Add<Output = M> + 'static,
{
    move |obs| {
        let mut series = Series::new(limit, fold);
        for stage in table().stages() {
            for shard in stage.shards() {
                if let Some(v) = value(&shard) {
                    series.observe(obs, v, &shard.attrs);
                }
            }
        }
        series.finish(obs);
    }
}

/// Registers every observable instrument on `meter`; worker series past `cardinality_limit`
/// fold. The SDK keeps the callbacks for the provider's lifetime.
pub(crate) fn register(meter: &Meter, cardinality_limit: usize) {
    // Registration order is exposition order: keep it.
    let stage_totals: [(&'static str, StageValue<u64>); 2] =
        [("pipeline.stage.items", |s| Some(s.totals().0)), ("pipeline.stage.bytes", |s| Some(s.totals().1))];
    for (name, value) in stage_totals {
        let _ = described(meter.u64_observable_counter(name)).with_callback(per_stage(value)).build();
    }
    let _ = described(meter.i64_observable_up_down_counter("pipeline.stage.active"))
        .with_callback(per_stage(|s| Some(i64::from(s.is_running()))))
        .build();
    let _ = described(meter.u64_observable_gauge("pipeline.stage.shards"))
        .with_callback(|obs| {
            for stage in table().stages() {
                for (count, attrs) in stage.shard_counts().iter().zip(stage.state_attrs.iter()) {
                    obs.observe(*count, attrs);
                }
            }
        })
        .build();
    let _ = described(meter.u64_observable_counter("pipeline.stage.errors"))
        .with_callback(per_stage(|s| Some(s.errors())))
        .build();
    let _ = described(meter.f64_observable_gauge("pipeline.stage.cpu.utilization"))
        .with_callback(per_stage(|s| s.cpu_percent_avg().map(|p| p / 100.0)))
        .build();

    let limit = cardinality_limit;
    let worker_totals: [(&'static str, ShardValue<u64>); 2] =
        [("pipeline.worker.items", |s| Some(s.items())), ("pipeline.worker.bytes", |s| Some(s.bytes()))];
    for (name, value) in worker_totals {
        let _ = described(meter.u64_observable_counter(name)).with_callback(per_shard(limit, Fold::Sum, value)).build();
    }
    let _ = described(meter.f64_observable_counter("pipeline.worker.cpu.time"))
        .with_callback(per_shard(limit, Fold::Sum, |s| s.last_sample().map(|t| t.cpu_time.as_secs_f64())))
        .build();
    let _ = described(meter.f64_observable_gauge("pipeline.worker.cpu.utilization"))
        .with_callback(per_shard(limit, Fold::Drop, |s| s.last_sample().and_then(|t| t.cpu_percent).map(|p| p / 100.0)))
        .build();
    // Memory reads 0 where it cannot be read: no series rather than a false zero.
    let worker_memory: [(&'static str, ShardValue<u64>); 3] = [
        ("pipeline.worker.memory.usage", |s| s.last_sample().map(|t| t.memory_current).filter(|m| *m > 0)),
        ("pipeline.worker.memory.average", |s| s.last_sample().map(|t| t.memory_avg).filter(|m| *m > 0)),
        ("pipeline.worker.memory.peak", |s| s.last_sample().map(|t| t.memory_peak).filter(|m| *m > 0)),
    ];
    for (name, value) in worker_memory {
        let _ = described(meter.u64_observable_gauge(name)).with_callback(per_shard(limit, Fold::Drop, value)).build();
    }
    let _ = described(meter.f64_observable_gauge("pipeline.worker.heartbeat"))
        .with_callback(per_shard(limit, Fold::Drop, |s| s.heartbeat().filter(|h| *h > 0.0)))
        .build();
}

/// The attribute naming a user counter on `pipeline.stage.counters`.
pub(crate) const COUNTER_NAME: &str = "pipeline.counter.name";

/// Registers `pipeline.stage.counters`: per stage and counter key, the value summed over its
/// shards. A gauge, since counters may hold floats such as averages; at most
/// `cardinality_limit - 1` (stage, key) series, the rest dropped with one warning.
pub(crate) fn register_counters(meter: &Meter, cardinality_limit: usize) {
    let _ = described(meter.f64_observable_gauge("pipeline.stage.counters"))
        .with_callback(move |obs| {
            let mut series = Series::named(
                cardinality_limit,
                Fold::Drop,
                "pipeline.stage.counters",
                "raise PIPETEL_CARDINALITY_LIMIT, use fewer counter keys, or set PIPETEL_STAGE_COUNTER_METRICS=false and read the counters from the stage rows",
            );
            for stage in table().stages() {
                for (key, value) in stage.counter_totals() {
                    let mut attrs = stage.meta.attrs.clone();
                    attrs.push(KeyValue::new(COUNTER_NAME, key));
                    series.observe(obs, value.as_f64(), &attrs);
                }
            }
            series.finish(obs);
        })
        .build();
}

/// Registers `pipeline.rows.lost` (always, whatever the stage-metrics switch says: it is how a
/// failing rows store shows).
pub(crate) fn register_rows_lost(meter: &Meter) {
    let _ = described(meter.u64_observable_counter("pipeline.rows.lost"))
        .with_callback(|obs| obs.observe(super::sink::rows_lost(), &[]))
        .build();
}

/// The instruments recorded once per stage row: its duration and its run, by status.
pub(crate) struct StageRunInstruments {
    duration: Histogram<f64>,
    runs: Counter<u64>,
}

impl StageRunInstruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let (duration, runs) = ("pipeline.stage.duration", "pipeline.stage.runs");
        Self {
            duration: meter
                .f64_histogram(duration)
                .with_unit(unit(duration))
                .with_description(desc(duration))
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            runs: meter.u64_counter(runs).with_unit(unit(runs)).with_description(desc(runs)).build(),
        }
    }

    /// Records nothing when stage metrics are off (`PIPETEL_STAGE_METRICS=false`): the SDK
    /// exports an instrument only once something was recorded into it.
    pub(crate) fn record(&self, ns: Namespaces, stat: &StageStat) {
        if !crate::installed::stage_metrics() {
            return;
        }
        let attrs = [
            KeyValue::new(keys::NAMESPACE, ns.stage),
            KeyValue::new(keys::STAGE_NAME, stat.stage_name.clone()),
            KeyValue::new(keys::STATUS, stat.status.as_str()),
        ];
        self.duration.record(stat.elapsed.as_secs_f64(), &attrs);
        self.runs.add(1, &attrs);
    }
}
