//! Interleaved comparisons, shared by the benches. On a shared machine a criterion row's median
//! moves by a quarter between invocations, so the ratio of two rows measured seconds apart
//! inherits that drift; for rows whose targets lie within it, a bench also runs the two sides
//! alternately in short batches and keeps the median of the batches' ratios (a side compared
//! with itself reads 1.00 this way). Taken in a `cargo bench` run (not `cargo test`'s single
//! pass) when `PIPETEL_BENCH_OUT` names a folder; printed, and written there as JSON for
//! `scripts/bench`. Also the configuration of a program that serves the pull endpoint alone.

// Each bench uses its own part of these helpers.
#![allow(dead_code)]

use std::sync::Mutex;
use std::time::Instant;

/// The interleaved comparisons measured so far, as JSON objects (see the module docs).
static PAIRED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether this run takes interleaved comparisons: a benchmark run (not `cargo test`'s single
/// pass) with `PIPETEL_BENCH_OUT` set.
pub(crate) fn pairing() -> bool {
    std::env::args().any(|a| a == "--bench") && std::env::var_os("PIPETEL_BENCH_OUT").is_some()
}

/// Runs `a` and `b` alternately, `ROUNDS` rounds of a batch of each (`a(n)` runs `n` calls;
/// `batch_a` and `batch_b` calls, each batch long enough to dwarf the clock), and keeps under
/// `name` the median time per call of each side and the median of the rounds' ratios `b / a`.
pub(crate) fn interleave(
    name: &str,
    (batch_a, mut a): (u32, impl FnMut(u32)),
    (batch_b, mut b): (u32, impl FnMut(u32)),
) {
    const ROUNDS: usize = 400;
    const WARM_UP: usize = 40;
    let time = |batch: u32, f: &mut dyn FnMut(u32)| {
        let start = Instant::now();
        f(batch);
        start.elapsed().as_nanos() as f64 / f64::from(batch)
    };
    let (mut times_a, mut times_b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARM_UP + ROUNDS {
        let (ta, tb) = (time(batch_a, &mut a), time(batch_b, &mut b));
        if round >= WARM_UP {
            times_a.push(ta);
            times_b.push(tb);
            ratios.push(tb / ta);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ma, mb, r) = (median(&mut times_a), median(&mut times_b), median(&mut ratios));
    println!("paired/{name}: {mb:.1} ns vs {ma:.1} ns per call, median of {ROUNDS} interleaved ratios {r:.3}");
    PAIRED
        .lock()
        .expect("paired results")
        .push(format!("{{\"name\":\"{name}\",\"ns\":{mb:.1},\"other_ns\":{ma:.1},\"ratio\":{r:.4}}}"));
}

/// Writes the interleaved comparisons to `$PIPETEL_BENCH_OUT/<file>`; a bench calls it last.
pub(crate) fn write_paired(file: &str) {
    let paired = PAIRED.lock().expect("paired results");
    if let (false, Some(dir)) = (paired.is_empty(), std::env::var_os("PIPETEL_BENCH_OUT")) {
        let path = std::path::Path::new(&dir).join(file);
        std::fs::write(&path, format!("[{}]", paired.join(","))).expect("write the interleaved comparisons");
    }
}

/// A program serving the pull endpoint alone, with `limit` as its cardinality limit: nothing
/// exported over OTLP, no GPU poller, no span metrics, no console output.
pub(crate) fn pull_endpoint_alone(limit: usize) -> pipetel::Config {
    pipetel::Config::default()
        .with_prometheus_port(0)
        .with_console_log(false)
        .with_cardinality_limit(limit)
        .with_gpu_mode(pipetel::gpu::GpuMode::Off)
        .with_span_metrics(pipetel::span_metrics::SpanMetricsConfig::default().with_enabled(false))
        .with_traces_exporters([])
        .with_logs_exporters([])
}
