//! A collector outage with recovery: the pipeline example pushes OTLP (gRPC, then HTTP/protobuf)
//! to a real collector every 200 ms; the collector is killed mid-run, stays down for 3 s (15
//! export intervals), and is restarted on the same ports. The program never blocks (the longest
//! `shard.record` call stays far below a millisecond-scale bound), its memory stays bounded (the
//! SDK's batch span and log processors queue at most 2048 items each and drop beyond; metrics
//! are cumulative, so nothing queues for them: each export carries the running totals), nothing
//! panics, and the restarted collector — which saw nothing before the outage — receives cumulative
//! `pipeline.stage.items` / `pipeline.worker.items` equal to the totals the program printed,
//! counts recorded before and during the outage included.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::{blocks, example_pushing, free_port, turn_if_peers, Collector, Peer, Process};

/// Generous bound on one `shard.record` call (two relaxed atomic adds): a blocked call would
/// take at least one export timeout (500 ms here).
const RECORD_BOUND_NS: u64 = 50_000_000;
/// Bound on the process's peak resident memory.
const PEAK_RSS_BOUND_KIB: u64 = 128 * 1024;
const SHARDS: u32 = 8;

/// The printed stage rows: stage name → items.
fn printed_totals(out: &str) -> BTreeMap<String, u64> {
    let header = out.lines().position(|l| l.starts_with("stage ")).unwrap_or_else(|| panic!("no table:\n{out}"));
    out.lines()
        .skip(header + 1)
        .take(3)
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols[0].to_string(), cols[2].parse().unwrap_or_else(|_| panic!("items in {l:?}")))
        })
        .collect()
}

fn reported(out: &str, prefix: &str, suffix: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.strip_suffix(suffix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} line:\n{out}"))
}

fn str_value(v: &str) -> String {
    v.strip_prefix("Str(").and_then(|v| v.strip_suffix(')')).unwrap_or(v).to_string()
}

/// The last value the collector received for each data point of `metric`, keyed by stage name
/// and (for worker metrics) shard index. Cumulative temporality: the last value is the total.
fn last_values(received: &str, metric: &str) -> BTreeMap<(String, Option<u32>), u64> {
    let mut out = BTreeMap::new();
    for m in blocks(received, "Metric").iter().filter(|m| m.get("Name") == Some(metric)) {
        assert_eq!(m.get("AggregationTemporality"), Some("AGGREGATION_TEMPORALITY_CUMULATIVE"), "{m:?}");
        let (mut stage, mut shard) = (None, None);
        for (k, v) in &m.fields {
            match k.as_str() {
                "pipeline.stage.name" => stage = Some(str_value(v)),
                "pipeline.shard.index" => {
                    shard = Some(v.trim_start_matches("Int(").trim_end_matches(')').parse().expect("shard index"))
                }
                "Value" => {
                    let stage = stage.take().unwrap_or_else(|| panic!("a data point without a stage: {m:?}"));
                    out.insert((stage, shard.take()), v.parse().expect("integer value"));
                }
                _ => {}
            }
        }
    }
    out
}

fn outage_and_recovery(protocol: &str) {
    let (grpc, http) = (free_port(), free_port());
    let mut collector = Collector::start_on(grpc, http);
    let mut cmd = example_pushing("pipeline", &collector.endpoint(protocol), protocol);
    cmd.env("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .env("PIPETEL_SAMPLE_INTERVAL", "200")
        .env("PIPETEL_SHUTDOWN_TIMEOUT", "5000")
        .env("RUST_BACKTRACE", "0")
        .args(["--seconds", "4", "--shards", &SHARDS.to_string(), "--report-record-latency"]);
    let mut example = Process::spawn("pipeline", cmd);

    // Up: the first exports arrive. Then down for 15 export intervals.
    collector.wait_for_output("Name: pipeline.worker.items", Duration::from_secs(30));
    collector.stop();
    std::thread::sleep(Duration::from_secs(3));
    assert!(!example.output().contains("done: "), "{protocol}: the run ended before the outage did; lengthen it");

    // Back on the same ports: exports resume while the program still runs.
    let mut restarted = Collector::start_on(grpc, http);
    restarted.wait_for_output("Name: pipeline.worker.items", Duration::from_secs(30));
    assert!(!example.output().contains("done: "), "{protocol}: no export reached the restarted collector mid-run");

    let (code, out) = example.wait(Duration::from_secs(90));
    assert_eq!(code, Some(0), "{protocol}: {out}");
    assert!(!out.contains("panicked"), "{protocol}: a panic during the outage:\n{out}");
    // The outage was felt: metric exports failed (and were reported) while the collector was down.
    assert!(out.contains("PeriodicReader.ExportError"), "{protocol}: no failed export reported:\n{out}");
    // The final export happens at shutdown.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let printed = printed_totals(&out);
    let received = loop {
        std::thread::sleep(Duration::from_millis(500));
        let received = restarted.output();
        let stages = last_values(&received, "pipeline.stage.items");
        let got: BTreeMap<String, u64> = stages.into_iter().map(|((s, _), v)| (s, v)).collect();
        if got == printed || std::time::Instant::now() > deadline {
            break received;
        }
    };
    restarted.stop();

    // Stage totals: the restarted collector's last cumulative values equal the printed rows.
    let stages: BTreeMap<String, u64> =
        last_values(&received, "pipeline.stage.items").into_iter().map(|((s, _), v)| (s, v)).collect();
    assert_eq!(stages, printed, "{protocol}: stage totals received after recovery vs printed");
    // Worker totals: every shard of every stage, summing to the stage's total.
    let workers = last_values(&received, "pipeline.worker.items");
    for (stage, total) in &printed {
        let shards: Vec<u64> = (0..SHARDS).map(|i| workers[&(stage.clone(), Some(i))]).collect();
        assert_eq!(shards.iter().sum::<u64>(), *total, "{protocol}: shards of {stage}: {shards:?}");
    }
    let items: u64 = printed.values().sum();
    assert!(out.contains(&format!("done: stages=3 items={items}")), "{out}");
    // Cumulative metrics lost nothing once the collector was back, and shutdown does not say otherwise.
    assert!(!out.contains("metrics: the last export"), "{protocol}: recovered metrics reported as lost:\n{out}");

    let max_record_ns = reported(&out, "max record call: ", " ns");
    let peak_kib = reported(&out, "peak rss: ", " kB");
    println!("{protocol}: max record call {max_record_ns} ns, peak RSS {peak_kib} kB, {items} items");
    assert!(max_record_ns < RECORD_BOUND_NS, "{protocol}: a record call took {max_record_ns} ns");
    assert!(peak_kib < PEAK_RSS_BOUND_KIB, "{protocol}: peak RSS {peak_kib} kB");
}

/// One after the other: two 8-thread runs at once would measure the scheduler, not pipetel.
#[test]
fn collector_outage_recovers_with_exact_cumulative_totals() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    for protocol in ["grpc", "http/protobuf"] {
        outage_and_recovery(protocol);
    }
}
