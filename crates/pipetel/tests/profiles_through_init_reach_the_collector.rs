//! The whole profiles path, from `init` to the real OpenTelemetry Collector: `init` with
//! `PIPETEL_PROFILE=cpu` at 250 Hz, an OTLP/HTTP endpoint and a rows file; a stage of two shards
//! spinning in one function; then the collector's file output (the test config
//! `otelcol/profiles.yaml`, its `service.profilesSupport` gate on) read back through each
//! request's dictionary. The spinning function leads the shards' stacks, the samples carry the
//! stage, execution and shard and link each shard's span, and the collector got exactly the
//! samples the stage row counts and the profile store beside the rows holds. Its own test
//! binary: `init` and the profiler are once per process.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the test is skipped loudly,
//! or fails under `PIPETEL_REQUIRE_PEERS=1`.
#![cfg(feature = "otlp")]

mod support;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use opentelemetry::Value as OtelValue;
use opentelemetry_sdk::trace::InMemorySpanExporter;
use pipetel::config::{OtlpProtocol, ProfileMode};
use pipetel::{Config, InitOptions};
use pipetel_rows::profile::{beside, read_profiles};
use serde_json::Value;
use support::profiles::{received, Received};
use support::{collector, peers_available, scratch, Peer};

const SERVICE: &str = "profiled-through-init";
const STAGE: &str = "spin-to-collector";
const EXECUTION: &str = "exec-otlp-1";
const HZ: u32 = 250;
/// The spinning function's name, as the symbolised frames end.
const SPIN: &str = "xorshift_spin_for_the_collector";

/// CPU work done in this function's own code: a `while` loop of shifts and xors, no calls and no
/// iterator adapters, so even an unoptimised build keeps its self time here.
#[inline(never)]
fn xorshift_spin_for_the_collector(rounds: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut i = 0;
    while i < rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        i += 1;
    }
    x
}

/// The calling thread's CPU time (`/proc/thread-self/schedstat`, its first field, nanoseconds).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// Spins until the thread has used about a second of CPU (wall time where its CPU time cannot be
/// read; 30 s at most on a machine too busy to give it that).
fn spin_a_cpu_second() -> u64 {
    let started = Instant::now();
    let cpu_at_start = thread_cpu();
    let mut x = 0x9E37_79B9_7F4A_7C15;
    loop {
        x = black_box(xorshift_spin_for_the_collector(black_box(2_000_000), x));
        let spent = match (cpu_at_start, thread_cpu()) {
            (Some(from), Some(now)) => now.saturating_sub(from),
            _ => started.elapsed(),
        };
        if spent >= Duration::from_secs(1) || started.elapsed() >= Duration::from_secs(30) {
            return x;
        }
    }
}

/// A sample's (shard, stack root first, count): what the collector and the store are compared by.
type Counted = (u32, Vec<String>, u64);

fn shard_of(r: &Received) -> u32 {
    r.attributes.get("pipeline.shard.index").and_then(|s| s.parse().ok()).unwrap_or(u32::MAX)
}

fn count(r: &Received) -> u64 {
    r.values.iter().map(|&v| u64::try_from(v).unwrap_or(0)).sum()
}

/// The stage's samples in the collector's output.
fn stage_samples(text: &str) -> Vec<Received> {
    received(text)
        .into_iter()
        .filter(|r| r.attributes.get("pipeline.stage.name").map(String::as_str) == Some(STAGE))
        .collect()
}

#[test]
fn a_profiled_stage_reaches_the_collector_as_the_rows_count_it() {
    if !peers_available(&[Peer::Otelcol]) {
        return;
    }
    let dir = scratch("profiles-through-init");
    let collector = collector("profiles.yaml", &dir, &[]);
    let rows_path = dir.join("profiled.jsonl");
    // The collector takes profiles alone: spans go to memory (for the links), metrics and logs
    // nowhere.
    let spans = InMemorySpanExporter::default();
    let config = Config::default()
        .with_service_name(SERVICE)
        .with_console_log(false)
        .with_traces_exporters([])
        .with_metrics_exporters([])
        .with_logs_exporters([])
        .with_otlp_endpoint(collector.endpoint("http/protobuf"))
        .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
        .with_rows_file(&rows_path)
        .with_profile(ProfileMode::Cpu)
        .with_profile_hz(HZ);
    let telemetry = pipetel::init_with(config, InitOptions::new().with_span_exporter(spans.clone())).expect("init");

    let stage = pipetel::stage(STAGE).execution_id(EXECUTION).shards(2).start();
    std::thread::scope(|s| {
        for i in 0..2u32 {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                black_box(spin_a_cpu_second());
                shard.finish();
            });
        }
    });
    // The stage's samples are written and exported as it ends; the profiler's last flush (the
    // guard's drop) sends what came after.
    stage.finish();
    telemetry.force_flush().expect("flush");
    let finished = spans.get_finished_spans().expect("spans");
    drop(telemetry);

    // The rows: the stage's samples, and each shard's on its end row.
    let text = std::fs::read_to_string(&rows_path).expect("the rows file");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON row")).collect();
    let stage_row = rows.iter().find(|r| r["event"] == "pipeline.stage").expect("a stage row");
    let expected = stage_row["pipeline.profile.samples"].as_u64().expect("samples on the stage row");
    // About two CPU seconds at 250 Hz: some 500 samples; far fewer only on a starved machine.
    assert!(expected >= 50, "{stage_row}");
    let row_per_shard: BTreeMap<u32, u64> = rows
        .iter()
        .filter(|r| r["event"] == "pipeline.worker" && r["pipeline.status"] == "end")
        .map(|r| {
            let shard = r["pipeline.shard.index"].as_u64().and_then(|i| u32::try_from(i).ok()).expect("shard index");
            (shard, r["pipeline.profile.samples"].as_u64().expect("samples on the end row"))
        })
        .collect();
    assert_eq!(row_per_shard.len(), 2, "two end rows: {text}");

    // The collector: every request is answered before the exporter returns, so all of them are
    // in by now; its file exporter writes every 100 ms.
    let text = collector
        .wait_for_exported(Duration::from_secs(15), |t| stage_samples(t).iter().map(count).sum::<u64>() >= expected)
        .unwrap_or_else(|t| panic!("the collector wrote fewer than the stage row's {expected} samples:\n{t}"));
    // Anything past the total (a sample sent twice) would be written by now.
    std::thread::sleep(Duration::from_millis(500));
    let later = collector.exported();
    let text = if later.len() >= text.len() { later } else { text };
    let got = stage_samples(&text);

    // Every sample the profiler counted for the stage reached the collector, once: the stage
    // row's total is summed from the very lines the exporter is handed (each flush writes the
    // store and exports the same batch, lines without a frame left out of both), and the stage's
    // lines are all flushed as it ends, so there is no partial window to allow for.
    let total: u64 = got.iter().map(count).sum();
    assert_eq!(total, expected, "the collector's samples of {STAGE} against its row");
    let mut got_per_shard: BTreeMap<u32, u64> = BTreeMap::new();
    for r in &got {
        *got_per_shard.entry(shard_of(r)).or_default() += count(r);
    }
    assert_eq!(got_per_shard, row_per_shard, "samples per shard: the collector's against the end rows'");

    // The same stacks and counts as the profile store beside the rows.
    let store = read_profiles(&beside(&rows_path)).expect("the profile store");
    let mut from_store: Vec<Counted> = store
        .lines
        .iter()
        .filter(|l| l.stage.as_deref() == Some(STAGE) && !l.stack.is_empty())
        .map(|l| (l.shard.unwrap_or(u32::MAX), l.stack.clone(), l.samples))
        .collect();
    let mut from_collector: Vec<Counted> = got.iter().map(|r| (shard_of(r), r.stack.clone(), count(r))).collect();
    from_store.sort();
    from_collector.sort();
    assert_eq!(from_collector, from_store, "the collector's stacks of {STAGE} against the profile store's");

    // Labels, types and resource of every sample.
    for r in &got {
        let shard = shard_of(r);
        assert!(shard < 2, "a shard index of the stage: {r:?}");
        let labels: Vec<(&str, &str)> = r.attributes.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let index = shard.to_string();
        assert_eq!(
            labels,
            [
                ("pipeline.execution.id", EXECUTION),
                ("pipeline.shard.index", index.as_str()),
                ("pipeline.stage.name", STAGE),
                ("profile.language", "rust"),
            ],
            "{r:?}"
        );
        assert_eq!(r.sample_type, ("samples".into(), "count".into()));
        assert_eq!(r.period_type, ("cpu".into(), "nanoseconds".into()));
        assert_eq!(r.period, 1_000_000_000 / i64::from(HZ));
        assert_eq!((r.service.as_str(), r.scope.as_str()), (SERVICE, "pipetel"));
    }

    // Each shard spun in the function: it leads its stacks (the leaf of most of its samples),
    // and its samples link that shard's span.
    let shard_spans: Vec<_> = finished.iter().filter(|s| s.name.starts_with("shard ")).collect();
    assert_eq!(shard_spans.len(), 2, "{finished:#?}");
    for shard in 0..2u32 {
        let samples: Vec<&Received> = got.iter().filter(|r| shard_of(r) == shard).collect();
        let all: u64 = samples.iter().map(|r| count(r)).sum();
        let spinning: u64 =
            samples.iter().filter(|r| r.stack.last().is_some_and(|f| f.ends_with(SPIN))).map(|r| count(r)).sum();
        assert!(spinning * 2 > all, "shard {shard}: {spinning} of {all} samples in {SPIN}: {samples:#?}");
        let span = shard_spans
            .iter()
            .find(|s| {
                s.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == "pipeline.shard.index" && kv.value == OtelValue::I64(i64::from(shard)))
            })
            .unwrap_or_else(|| panic!("the span of shard {shard}"));
        let link = Some((span.span_context.trace_id().to_string(), span.span_context.span_id().to_string()));
        assert!(samples.iter().all(|r| r.link == link), "shard {shard} links {link:?}: {samples:#?}");
    }

    drop(collector);
    let _ = std::fs::remove_dir_all(&dir);
}
