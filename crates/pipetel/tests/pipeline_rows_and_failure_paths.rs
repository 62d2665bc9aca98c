//! Stage and worker rows through the handles: failure and drop paths end as `failed` with their
//! rows, explicit and handle paths give identical rows, the namespace is configurable, samples
//! arrive at the configured interval, user counters and bad keys.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pipetel::pipeline::{emit_stage_stat, emit_worker_stat, CounterKey, Stage, StageStatus, WorkerStatus};
use serde_json::Value;

struct Harness {
    telemetry: pipetel::Telemetry,
    rows: std::path::PathBuf,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let rows = std::env::temp_dir().join(format!("pipetel-rows-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&rows);
        let telemetry = pipetel::init(
            pipetel::Config::default()
                .with_service_name("rows-test")
                .with_namespace("zephyr")
                .with_rows_file(&rows)
                .with_sample_interval(Duration::from_millis(100))
                .with_prometheus_host("127.0.0.1")
                .with_prometheus_port(0)
                .with_console_log(false)
                // Ended shards keep their worker series: the tests read them after the end rows.
                .with_shard_metrics(pipetel::config::ShardMetrics::All),
        )
        .expect("init");
        Harness { telemetry, rows }
    })
}

fn rows_of(stage: &str) -> Vec<BTreeMap<String, Value>> {
    let text = std::fs::read_to_string(&harness().rows).expect("rows file");
    text.lines()
        .map(|l| serde_json::from_str::<BTreeMap<String, Value>>(l).expect("each row is one JSON object"))
        .filter(|r| r.get("pipeline.stage.name").and_then(Value::as_str) == Some(stage))
        .collect()
}

fn render() -> String {
    harness().telemetry.prometheus_render().expect("render").render()
}

#[test]
fn failed_and_dropped_shards_and_stages_end_failed_with_their_rows() {
    harness();
    let stage = pipetel::stage("t-fail").execution_id("e1").shards(4).start();
    std::thread::scope(|s| {
        let stage = &stage;
        s.spawn(move || {
            let shard = stage.shard(0).start();
            shard.record(10, 100);
            shard.finish();
        });
        s.spawn(move || {
            let shard = stage.shard(1).start();
            shard.record(5, 50);
            shard.fail("bad input");
        });
        let panicked = s.spawn(move || {
            let shard = stage.shard(2).start();
            shard.record(1, 1);
            panic!("user code panicked");
        });
        assert!(panicked.join().is_err(), "the panic propagates unchanged");
    });
    drop(stage); // never finished: ends as failed, row still emitted

    let rows = rows_of("t-fail");
    let end = |i: i64| {
        rows.iter()
            .find(|r| {
                r["pipeline.shard.index"] == i && (r["pipeline.status"] == "end" || r["pipeline.status"] == "failed")
            })
            .cloned()
            .expect("end row")
    };
    assert_eq!(end(0)["pipeline.status"], "end");
    assert_eq!(end(0)["pipeline.items"], 10);
    assert_eq!(end(1)["pipeline.status"], "failed");
    assert_eq!(end(1)["pipeline.failure.reason"], "bad input");
    assert_eq!(end(2)["pipeline.status"], "failed");
    assert_eq!(end(2)["pipeline.failure.reason"], "panicked");
    let stage_row = rows.iter().find(|r| r["event"] == "zephyr.stage").expect("stage row");
    assert_eq!(stage_row["pipeline.status"], "failed");
    assert_eq!(stage_row["pipeline.failure.reason"], "dropped without finish()");
    assert_eq!(
        (stage_row["pipeline.items"].clone(), stage_row["pipeline.bytes"].clone()),
        (Value::from(16), Value::from(151))
    );
    assert_eq!(stage_row["pipeline.shards.total"], 4);
    assert_eq!(stage_row["pipeline.namespace"], "zephyr.stage");
    assert!(rows.iter().filter(|r| r["event"] == "zephyr.worker").all(|r| r["pipeline.namespace"] == "zephyr.worker"));

    let text = render();
    let line = |needle: &str| {
        text.lines().find(|l| l.contains(needle) && l.contains("pipeline_stage_name=\"t-fail\"")).map(str::to_string)
    };
    let failed = line("pipeline_shard_state=\"failed\"").expect("shards by state");
    assert!(failed.ends_with(" 2"), "{failed}");
    let pending = line("pipeline_shard_state=\"pending\"").expect("pending");
    assert!(pending.ends_with(" 1"), "{pending}");
    let runs =
        text.lines().find(|l| l.starts_with("pipeline_stage_runs_total{") && l.contains("t-fail")).expect("runs");
    assert!(runs.contains("pipeline_status=\"failed\"") && runs.ends_with(" 1"), "{runs}");
    let items =
        text.lines().find(|l| l.starts_with("pipeline_stage_items_total{") && l.contains("t-fail")).expect("items");
    assert!(items.ends_with(" 16") && items.contains("pipeline_namespace=\"zephyr.stage\""), "{items}");
    let worker = text
        .lines()
        .find(|l| {
            l.starts_with("pipeline_worker_items_total{")
                && l.contains("t-fail")
                && l.contains("pipeline_shard_index=\"1\"")
        })
        .expect("worker items");
    assert!(worker.ends_with(" 5") && worker.contains("pipeline_namespace=\"zephyr.worker\""), "{worker}");
}

fn without_volatile(mut r: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    for k in ["timestamp_ms", "trace_id", "span_id"] {
        r.remove(k);
    }
    // What only a handle knows, measured as its shards ran (the answers: a shard's wall time,
    // phases and time off CPU; a stage's distribution, skew and counts): an explicit row carries
    // the figures it is given.
    let worker = r.contains_key("pipeline.shard.index");
    r.retain(|k, _| {
        let answer = ["pipeline.shard.elapsed.", "pipeline.shard.item_rate.", "pipeline.phase.", "pipeline.gpu."]
            .iter()
            .any(|p| k.starts_with(p))
            || matches!(
                k.as_str(),
                "pipeline.stage.skew"
                    | "pipeline.stage.skewed"
                    | "pipeline.stage.stragglers"
                    | "pipeline.stage.stalls"
                    | "pipeline.unphased.seconds"
                    | "pipeline.off_cpu.seconds"
            );
        !(answer || worker && k == "pipeline.elapsed_seconds")
    });
    r
}

#[test]
fn explicit_and_handle_paths_give_identical_rows() {
    harness();
    let retries = CounterKey::new("retries").expect("key");
    let stage = pipetel::stage("t-same").execution_id("e2").shards(1).counter(retries.clone()).start();
    let shard = stage.shard(0).start();
    shard.record(7, 70);
    shard.add(&retries, 2);
    let worker = shard.finish();
    let stat = stage.finish();
    assert_eq!(worker.status, WorkerStatus::End);
    assert_eq!(stat.counters, vec![("retries".to_string(), pipetel::pipeline::CounterValue::Int(2))]);

    // The explicit form, fed the same figures, writes the same rows.
    emit_worker_stat(&worker);
    emit_stage_stat(&stat);
    let rows = rows_of("t-same");
    let pick = |event: &str, status: &str| -> Vec<BTreeMap<String, Value>> {
        rows.iter()
            .filter(|r| r["event"] == event && r["pipeline.status"] == status)
            .cloned()
            .map(without_volatile)
            .collect()
    };
    let ends = pick("zephyr.worker", "end");
    assert_eq!(ends.len(), 2, "{rows:?}");
    assert_eq!(ends[0], ends[1]);
    assert_eq!(ends[0]["pipeline.counter.retries"], 2);
    let stages = pick("zephyr.stage", "succeeded");
    assert_eq!(stages.len(), 2, "{rows:?}");
    assert_eq!(stages[0], stages[1]);
}

#[test]
fn explicit_rows_feed_the_metrics() {
    harness();
    let mut stat = pipetel::stage("t-explicit-src").start().finish();
    stat.stage_name = "t-explicit".into();
    stat.execution_id = "remote-run".into();
    stat.items = 1234;
    stat.bytes = 5678;
    stat.status = StageStatus::Succeeded;
    emit_stage_stat(&stat);
    let text = render();
    let items = text
        .lines()
        .find(|l| l.starts_with("pipeline_stage_items_total{") && l.contains("t-explicit\""))
        .expect("items");
    assert!(items.ends_with(" 1234") && items.contains("pipeline_execution_id=\"remote-run\""), "{items}");
}

/// The value of the sample line of `family` whose labels contain every one of `having`.
fn sample_value(text: &str, family: &str, having: &[&str]) -> f64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && having.iter().all(|h| l.contains(h)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {family} with {having:?} in:\n{text}"))
}

#[test]
fn explicit_worker_rows_feed_the_cpu_metrics_as_handle_rows_do() {
    harness();
    // A handle's row, its CPU figures replaced by known ones, reported explicitly for two
    // shards of another stage: the worker and stage CPU families show exactly those figures.
    let source = pipetel::stage("t-explicit-cpu-src").shards(1).start();
    let template = source.shard(0).start().finish();
    source.finish();
    for (index, avg, last, cpu_seconds) in [(0u32, 50.0, 40.0, 2.0), (1, 150.0, 120.0, 3.0)] {
        let mut w = template.clone();
        w.stage_name = "t-explicit-cpu".into();
        w.execution_id = "remote-cpu".into();
        w.shard_index = index;
        w.status = WorkerStatus::End;
        w.cpu_percent = Some(last);
        w.cpu_percent_avg = Some(avg);
        w.cpu_time = Duration::from_secs_f64(cpu_seconds);
        emit_worker_stat(&w);
    }
    let text = render();
    let stage = ["t-explicit-cpu\"", "remote-cpu"];
    let shard = |i: &'static str| [stage[0], stage[1], i];
    assert_eq!(sample_value(&text, "pipeline_stage_cpu_utilization_ratio", &stage), 1.0);
    assert_eq!(sample_value(&text, "pipeline_worker_cpu_utilization_ratio", &shard("shard_index=\"0\"")), 0.4);
    assert_eq!(sample_value(&text, "pipeline_worker_cpu_utilization_ratio", &shard("shard_index=\"1\"")), 1.2);
    assert_eq!(sample_value(&text, "pipeline_worker_cpu_time_seconds_total", &shard("shard_index=\"1\"")), 3.0);
}

#[test]
fn samples_arrive_at_the_configured_interval_with_rates_and_cpu() {
    harness();
    let stage = pipetel::stage("t-sample").start();
    let shard = stage.shard(0).start();
    // Busy for at least 650 ms and until this thread has had 350 ms of CPU (bounded by 20 s):
    // on a loaded machine the thread gets its CPU later, not less of it.
    let t = Instant::now();
    let mut x = 0u64;
    while (t.elapsed() < Duration::from_millis(650) || thread_cpu() < Duration::from_millis(350))
        && t.elapsed() < Duration::from_secs(20)
    {
        for _ in 0..10_000 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        shard.record(1, 10);
    }
    std::hint::black_box(x);
    let wall = t.elapsed();
    shard.finish();
    stage.finish();
    let rows = rows_of("t-sample");
    let samples: Vec<_> = rows.iter().filter(|r| r["pipeline.status"] == "running").collect();
    // About one sample per 100 ms of the shard's life.
    let expected = wall.as_millis() as usize / 100;
    assert!(
        (3..=expected + 2).contains(&samples.len()),
        "about one sample per 100 ms over {wall:?}, got {}",
        samples.len()
    );
    for s in &samples {
        assert!(s["pipeline.item_rate"].as_f64().expect("rate") > 0.0, "{s:?}");
        assert!(s["pipeline.memory.current_bytes"].as_u64().expect("memory") > 0, "{s:?}");
        assert!(s["pipeline.memory.peak_bytes"].as_u64() >= s["pipeline.memory.avg_bytes"].as_u64(), "{s:?}");
    }
    let end = rows.iter().find(|r| r["pipeline.status"] == "end").expect("end row");
    if cfg!(target_os = "linux") {
        let cpu = end["pipeline.cpu.time_seconds"].as_f64().expect("cpu");
        assert!(cpu > 0.3, "a shard busy for 350 ms of CPU reports it: {end:?}");
        assert!(cpu <= wall.as_secs_f64() + 0.05, "thread CPU never exceeds the wall time: {end:?}");
        let avg = end["pipeline.cpu.percent_avg"].as_f64().expect("cpu%");
        assert!(avg > 0.0 && avg <= 100.0 + 5.0, "one busy thread averages between 0 and 100 %: {end:?}");
    }
    let starts = rows.iter().filter(|r| r["pipeline.status"] == "start").count();
    assert_eq!(starts, 1);
}

#[test]
fn bad_keys_and_traceparents_are_errors_naming_them() {
    for bad in ["", "has space", "zephyr//items", "/lead", "trail/", "caf\u{e9}", &"x".repeat(129)] {
        let err = CounterKey::new(bad).expect_err(bad);
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    let err = Stage::remote("s", "e", "not-a-traceparent").expect_err("invalid");
    assert!(err.to_string().contains("not-a-traceparent"), "{err}");
    let ok =
        Stage::remote("s", "e", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").expect("valid traceparent");
    assert_eq!(ok.traceparent().as_deref(), Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
}

/// CPU time this thread has run (Linux: `/proc/thread-self/schedstat`, in nanoseconds); zero
/// elsewhere, where the test then only waits for the wall time.
fn thread_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .map_or(Duration::ZERO, Duration::from_nanos)
}
