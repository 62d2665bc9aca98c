//! Stage counters as Zephyr uses them: `/`-separated keys, int and float values, summed over
//! shards into the stage row (int + int stays int, any float makes a float), exported as
//! `pipeline.stage.counters{pipeline.counter.name=<key>}` within the cardinality limit; NaN and
//! infinity refused naming the counter; `emit_stage_stat` takes the same counters.

mod pipeline_support;

use std::time::Duration;

use pipeline_support::{fresh_rows_file, rows_config, stage_rows};
use pipetel::pipeline::{emit_stage_stat, CounterKey, CounterValue, StageStat, StageStatus};

/// The value of `pipeline_stage_counters` for `stage` and `key`, if exposed.
fn exposed(text: &str, stage: &str, key: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.starts_with("pipeline_stage_counters{")
                && l.contains(&format!("pipeline_stage_name=\"{stage}\""))
                && l.contains(&format!("pipeline_counter_name=\"{key}\""))
        })
        .map(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN))
}

#[test]
fn counters_sum_into_the_stage_row_and_the_exposition() {
    let rows_file = fresh_rows_file("stage-counters");
    let telemetry = pipetel::init(rows_config("stage-counters", &rows_file).with_cardinality_limit(10)).expect("init");

    let items = CounterKey::new("zephyr/item_count").expect("key");
    let cpu = CounterKey::new("zephyr/worker/cpu_pct_average").expect("key");
    let mixed = CounterKey::new("zephyr/mixed").expect("key");
    let stage = pipetel::stage("tokenize").execution_id("e1").shards(3).counter(items.clone()).start();
    std::thread::scope(|s| {
        for i in 0..3u32 {
            let (stage, items, cpu, mixed) = (&stage, &items, &cpu, &mixed);
            s.spawn(move || {
                let shard = stage.shard(i).start();
                shard.add(items, u64::from(i + 1) * 100);
                shard.add(cpu, [78.25, 21.5, 0.25][i as usize]);
                shard.add(mixed, 2u32);
                if i == 2 {
                    shard.add(mixed, 0.5);
                }
                // Refused, naming the counter; nothing is added.
                let err = shard.try_add(cpu, f64::NAN).expect_err("NaN is refused");
                assert!(err.to_string().contains("\"zephyr/worker/cpu_pct_average\""), "{err}");
                shard.add(cpu, f64::INFINITY);
                shard.finish();
            });
        }
    });

    let text = telemetry.prometheus_render().expect("render").render();
    assert_eq!(exposed(&text, "tokenize", "zephyr/item_count"), Some(600.0), "{text}");
    assert_eq!(exposed(&text, "tokenize", "zephyr/worker/cpu_pct_average"), Some(100.0), "{text}");
    assert_eq!(exposed(&text, "tokenize", "zephyr/mixed"), Some(6.5), "{text}");

    let row = stage.finish();
    assert_eq!(
        row.counters,
        vec![
            ("zephyr/item_count".to_string(), CounterValue::Int(600)),
            ("zephyr/worker/cpu_pct_average".to_string(), CounterValue::Float(100.0)),
            ("zephyr/mixed".to_string(), CounterValue::Float(6.5)),
        ]
    );

    // The explicit form: a coordinator's own sums, one refused counter left out.
    emit_stage_stat(&StageStat {
        stage_name: "merge".into(),
        execution_id: "e1".into(),
        items: 10,
        bytes: 20,
        elapsed: Duration::from_millis(5),
        total_shards: 1,
        shards_succeeded: 1,
        shards_failed: 0,
        shards_retried: 0,
        status: StageStatus::Succeeded,
        cpu_percent_avg: None,
        counters: vec![
            ("zephyr/worker/cpu_pct_average".into(), CounterValue::Float(78.3)),
            ("zephyr/item_count".into(), CounterValue::Int(10)),
            ("zephyr/bad".into(), CounterValue::Float(f64::NAN)),
            ("bad key".into(), CounterValue::Int(1)),
        ],
        reason: None,
    });
    let text = telemetry.prometheus_render().expect("render").render();
    assert_eq!(exposed(&text, "merge", "zephyr/worker/cpu_pct_average"), Some(78.3), "{text}");
    assert_eq!(exposed(&text, "merge", "zephyr/item_count"), Some(10.0), "{text}");
    assert_eq!(exposed(&text, "merge", "zephyr/bad"), None, "{text}");
    assert_eq!(exposed(&text, "merge", "bad key"), None, "{text}");

    // A flood of keys stays within the cardinality limit (10: 9 series and the overflow room).
    let flood = pipetel::stage("flood").execution_id("e1").shards(1).start();
    let shard = flood.shard(0).start();
    for k in 0..40 {
        shard.add(&CounterKey::new(&format!("flood/k{k}")).expect("key"), 1u64);
    }
    let text = telemetry.prometheus_render().expect("render").render();
    let series = text.lines().filter(|l| l.starts_with("pipeline_stage_counters{")).count();
    assert!((5..=10).contains(&series), "the counter series are bounded by the limit: {series}\n{text}");
    assert_eq!(exposed(&text, "tokenize", "zephyr/item_count"), Some(600.0), "earlier series are kept: {text}");
    shard.finish();
    flood.finish();
    drop(telemetry);

    let stage_rows = stage_rows(&rows_file);
    let tokenize = &stage_rows["tokenize"];
    assert_eq!(tokenize["pipeline.counter.zephyr/item_count"].as_i64(), Some(600), "{tokenize}");
    assert!(tokenize["pipeline.counter.zephyr/item_count"].is_i64(), "ints stay ints: {tokenize}");
    assert_eq!(tokenize["pipeline.counter.zephyr/worker/cpu_pct_average"].as_f64(), Some(100.0), "{tokenize}");
    assert!(tokenize["pipeline.counter.zephyr/worker/cpu_pct_average"].is_f64(), "{tokenize}");
    assert_eq!(tokenize["pipeline.counter.zephyr/mixed"].as_f64(), Some(6.5), "{tokenize}");
    let merge = &stage_rows["merge"];
    assert_eq!(merge["pipeline.counter.zephyr/worker/cpu_pct_average"].as_f64(), Some(78.3), "{merge}");
    assert!(merge.get("pipeline.counter.zephyr/bad").is_none(), "{merge}");
    assert!(merge.get("pipeline.counter.bad key").is_none(), "{merge}");
    let _ = std::fs::remove_file(&rows_file);
}
