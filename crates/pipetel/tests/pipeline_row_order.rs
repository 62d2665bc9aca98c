//! Row order and ids under contention: thousands of shards start and finish on several threads
//! while samples are taken every millisecond. Every shard's rows read back from the rows file
//! are its start row, then only samples, then its end row — never a sample after the end — and
//! every one of them carries the shard's trace and span ids (the stage's trace).

mod otlp_sink;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pipetel::config::{MetricExporter, OtlpProtocol, TraceExporter};
use pipetel::Config;
use serde_json::Value;

const THREADS: u32 = 4;
const SHARDS_PER_THREAD: u32 = 1000;

#[test]
fn no_sample_after_the_end_and_every_row_has_its_ids() {
    let sink = otlp_sink::OtlpSink::start();
    let rows_file = std::env::temp_dir().join(format!("pipetel-row-order-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&rows_file);
    let telemetry = pipetel::init(
        Config::default()
            .with_service_name("row-order")
            .with_console_log(false)
            .with_prometheus_port(0)
            .with_metrics_exporters([MetricExporter::Prometheus])
            .with_otlp_endpoint(&sink.endpoint)
            .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
            .with_traces_exporters([TraceExporter::Otlp])
            .with_rows_file(&rows_file),
    )
    .expect("init");

    let stage = pipetel::stage("hammer").execution_id("order").shards(THREADS * SHARDS_PER_THREAD).start();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // A 1 ms sampler: the real sampling pass, at a thousand times the shortest interval.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                pipetel::testing::sample_now();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let stage = &stage;
                s.spawn(move || {
                    for k in 0..SHARDS_PER_THREAD {
                        let shard = stage.shard(t * SHARDS_PER_THREAD + k).start();
                        shard.record(1, 8);
                        if k % 7 == 0 {
                            std::thread::sleep(Duration::from_micros(500));
                        }
                        if k % 10 == 3 {
                            shard.fail("odd one out");
                        } else {
                            shard.finish();
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
        done.store(true, Ordering::Relaxed);
    });
    stage.finish();
    drop(telemetry);

    let text = std::fs::read_to_string(&rows_file).expect("rows file");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    let stage_row = rows.iter().find(|r| r["event"] == "pipeline.stage").expect("stage row");
    let trace = stage_row["trace_id"].as_str().expect("the stage row has a trace id");
    let mut by_shard: HashMap<u64, Vec<&Value>> = HashMap::new();
    for r in rows.iter().filter(|r| r["event"] == "pipeline.worker") {
        by_shard.entry(r["pipeline.shard.index"].as_u64().expect("index")).or_default().push(r);
    }
    assert_eq!(by_shard.len() as u32, THREADS * SHARDS_PER_THREAD);
    let mut samples = 0;
    for (index, rows) in &by_shard {
        let statuses: Vec<&str> = rows.iter().map(|r| r["pipeline.status"].as_str().expect("status")).collect();
        let last = statuses.len() - 1;
        assert_eq!(statuses[0], "start", "shard {index}: {statuses:?}");
        let end = if index % u64::from(SHARDS_PER_THREAD) % 10 == 3 { "failed" } else { "end" };
        assert_eq!(statuses[last], end, "shard {index}: {statuses:?}");
        assert!(statuses[1..last].iter().all(|s| *s == "running"), "shard {index}: a row after its end: {statuses:?}");
        samples += last - 1;
        let span = rows[0]["span_id"].as_str().unwrap_or_else(|| panic!("shard {index}: start row without span id"));
        for r in rows {
            assert_eq!(r["trace_id"].as_str(), Some(trace), "shard {index}: {r}");
            assert_eq!(r["span_id"].as_str(), Some(span), "shard {index}: {r}");
        }
    }
    assert!(samples > 0, "the sampler sampled running shards");
    assert!(sink.wait_for("/v1/traces", "stage hammer"), "the spans whose ids the rows carry were exported");
    let _ = std::fs::remove_file(&rows_file);
}
