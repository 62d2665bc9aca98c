//! What a span costs through each layer of pipetel's `tracing` stack, and what
//! `#[pipetel::measure]` adds to a function call.
//!
//! Group `span`: (a) the `tracing` registry alone, (b) + bare `tracing-opentelemetry`, (c) the full
//! stack as `init` composes it (the sampling gate around the bridge, + span metrics kept for the
//! pull endpoint, the default exporter; `c_full_stack_otel_histogram`: span metrics in an OTel
//! histogram, as with a push exporter), (d) spans
//! the sampler drops: every span under `always_off` (the bridge left out), a root span under a
//! ratio sampler (decided at creation and held back by the gate; `_decided_at_start`: the gate
//! leaving roots to the bridge: built then dropped), and a child of a dropped span
//! (held back by the gate). `c_full_stack_child` is (c) for a child of a kept span, the same
//! shape as the last (d) row.
//!
//! Group `request_tree`: the production mix, a request of 1 root + 9 spans on 2 levels below it
//! (3 children of 2 grandchildren each) under `parentbased_traceidratio` 0.01 with the full
//! pipetel stack, beside the same tree fully sampled and beside bare `tracing-opentelemetry`
//! with the SDK's own `ParentBased(TraceIdRatioBased(0.01))` (the stack a user would wire by
//! hand). One iteration is one tree of 10 spans.
//!
//! Group `function`: a call of a `#[tracing::instrument]` function and of a
//! `#[pipetel::measure]` one (span + calls + duration + in-flight), beside a bare function, under
//! the registry alone (with a no-op layer, so closed spans are freed), after `init` with the pull
//! endpoint alone (the default exporter: durations kept in the function's atomics);
//! `pipetel_measure_otel_histogram`: the measured call before `init`, on the process's own meter
//! provider (durations in an OTel histogram, as with a push exporter); `_full_stack`: the two
//! calls under the full stack as (c).
//!
//! Interleaved comparisons (see `common`), for the rows whose targets are within the
//! machine's drift: the measured call against the instrumented one, span (c) against (b) (and
//! (b) against itself, the method's own error), the request tree against its two comparisons;
//! written as `paired-spans.json`.
//!
//! Run: `cargo bench -p pipetel --bench spans -- --warm-up-time 1 --measurement-time 2`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use pipetel::sampling::{GateTracer, PinnedTraceIds, SamplingGate};
use pipetel::span_metrics::{SpanMetricsConfig, SpanMetricsLayer};
use tracing::Dispatch;

mod common;
use common::{interleave, pairing};
use tracing_subscriber::layer::SubscriberExt;

/// A meter provider with a reader, so instruments really aggregate (no reader makes them no-ops).
fn meter_provider() -> SdkMeterProvider {
    SdkMeterProvider::builder().with_reader(ManualReader::builder().build()).build()
}

fn tracer_provider(sampler: Sampler) -> SdkTracerProvider {
    SdkTracerProvider::builder().with_sampler(sampler).build()
}

/// The provider `init` builds for a ratio sampler: ids pinned by the gate.
fn gated_provider(sampler: Sampler) -> SdkTracerProvider {
    SdkTracerProvider::builder().with_sampler(sampler).with_id_generator(PinnedTraceIds::default()).build()
}

fn one_span() {
    let span = tracing::info_span!("work", item = 7u64);
    let _entered = span.enter();
    black_box(&span);
}

/// A root span the stack drops or keeps, entered; `work` runs inside it.
fn under_root(dispatch: &Dispatch, work: impl FnOnce()) {
    tracing::dispatcher::with_default(dispatch, || {
        let root = tracing::info_span!("root");
        let _in_root = root.enter();
        work();
    });
}

/// The span-metrics layer `init` builds with the pull endpoint alone (the default exporter).
fn span_metrics() -> SpanMetricsLayer {
    SpanMetricsLayer::for_pull_endpoint(&SpanMetricsConfig::default()).expect("default config is valid")
}

/// The stack of row `name` in `stacks`.
fn named<'a>(stacks: &'a [(&str, Dispatch)], name: &str) -> &'a Dispatch {
    stacks.iter().find(|(n, _)| *n == name).map(|(_, d)| d).unwrap_or_else(|| panic!("no stack `{name}`"))
}

/// `n` calls of `f` under `dispatch`, for [`interleave`].
fn batches(dispatch: &Dispatch, f: fn()) -> impl FnMut(u32) + '_ {
    move |n| tracing::dispatcher::with_default(dispatch, || (0..n).for_each(|_| f()))
}

fn spans(c: &mut Criterion) {
    let mp = meter_provider();
    let meter = mp.meter("bench");
    let metrics = span_metrics;
    let on = tracer_provider(Sampler::AlwaysOn);
    let drop_all = tracer_provider(Sampler::TraceIdRatioBased(0.0));
    let full = |tp: &SdkTracerProvider| {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(SamplingGate::new(tracing_opentelemetry::layer().with_tracer(tp.tracer("c")), false))
                .with(metrics()),
        )
    };
    // What `init` composes for `traceidratio` 0: roots decided at creation.
    let ratio_tp = gated_provider(Sampler::TraceIdRatioBased(0.0));
    let ratio_stack = Dispatch::new(
        tracing_subscriber::registry()
            .with(
                SamplingGate::new(tracing_opentelemetry::layer().with_tracer(GateTracer::new(&ratio_tp, "c")), false)
                    .deciding_roots(0.0),
            )
            .with(metrics()),
    );
    let stacks: Vec<(&str, Dispatch)> = vec![
        ("a_registry", Dispatch::new(tracing_subscriber::registry())),
        (
            "b_registry_otel",
            Dispatch::new(
                tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(on.tracer("b"))),
            ),
        ),
        ("c_full_stack", full(&on)),
        // (c) as `init` composes it with a push exporter: `span.duration` an OTel histogram.
        (
            "c_full_stack_otel_histogram",
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(SamplingGate::new(tracing_opentelemetry::layer().with_tracer(on.tracer("c")), false))
                    .with(
                        SpanMetricsLayer::new(&SpanMetricsConfig::default(), &meter).expect("default config is valid"),
                    ),
            ),
        ),
        // What `init` composes when the sampler is `always_off`: the OTel layer is left out.
        ("d_full_stack_always_off", Dispatch::new(tracing_subscriber::registry().with(metrics()))),
        // A root span a ratio sampler drops, decided at creation as `init` composes it.
        ("d_ratio_sampler_drops_root", ratio_stack),
        // The same with roots left to the bridge: built whole, then dropped when they start.
        ("d_ratio_sampler_drops_root_decided_at_start", full(&drop_all)),
    ];
    let mut group = c.benchmark_group("span");
    for (name, dispatch) in &stacks {
        tracing::dispatcher::with_default(dispatch, || group.bench_function(*name, |b| b.iter(one_span)));
    }
    // Child spans inside an entered root: kept (c) or dropped by a ratio sampler (d), where the
    // gate decides at creation and the bridge never builds them.
    let kept = full(&on);
    under_root(&kept, || {
        group.bench_function("c_full_stack_child", |b| b.iter(one_span));
    });
    let dropped = full(&drop_all);
    under_root(&dropped, || {
        group.bench_function("d_ratio_sampler_drops_child", |b| b.iter(one_span));
    });
    group.finish();
    if pairing() {
        let (b, c) = (named(&stacks, "b_registry_otel"), named(&stacks, "c_full_stack"));
        interleave("span_c_vs_b", (500, batches(b, one_span)), (500, batches(c, one_span)));
        // The method's own check: one stack against itself.
        interleave("span_b_vs_itself", (500, batches(b, one_span)), (500, batches(b, one_span)));
    }
}

/// One request: a root, 3 children, 2 grandchildren under each (10 spans, 2 levels below the root).
fn request_tree() {
    let root = tracing::info_span!("request", route = "/items");
    let _in_root = root.enter();
    for i in 0..3u64 {
        let child = tracing::info_span!("step", index = i);
        let _in_child = child.enter();
        for j in 0..2u64 {
            let grandchild = tracing::info_span!("call", index = j);
            let _in_grandchild = grandchild.enter();
            black_box(&grandchild);
        }
    }
}

fn request_trees(c: &mut Criterion) {
    let metrics = span_metrics;
    let ratio = 0.01;
    let sampled_tp = gated_provider(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
    let ratio_tp = gated_provider(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))));
    let sdk_tp = tracer_provider(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))));
    let stacks: Vec<(&str, Dispatch)> = vec![
        // As `init` composes them for `parentbased_traceidratio` 0.01 and `parentbased_always_on`.
        (
            "pipetel_parentbased_ratio_0_01",
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(
                        SamplingGate::new(
                            tracing_opentelemetry::layer().with_tracer(GateTracer::new(&ratio_tp, "c")),
                            true,
                        )
                        .deciding_roots(ratio),
                    )
                    .with(metrics()),
            ),
        ),
        (
            "pipetel_fully_sampled",
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(SamplingGate::new(
                        tracing_opentelemetry::layer().with_tracer(GateTracer::new(&sampled_tp, "c")),
                        true,
                    ))
                    .with(metrics()),
            ),
        ),
        (
            "tracing_otel_sdk_ratio_0_01",
            Dispatch::new(
                tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(sdk_tp.tracer("b"))),
            ),
        ),
    ];
    let mut group = c.benchmark_group("request_tree");
    for (name, dispatch) in &stacks {
        tracing::dispatcher::with_default(dispatch, || group.bench_function(*name, |b| b.iter(request_tree)));
    }
    group.finish();
    if pairing() {
        let (ratio, sampled, sdk) = (
            named(&stacks, "pipetel_parentbased_ratio_0_01"),
            named(&stacks, "pipetel_fully_sampled"),
            named(&stacks, "tracing_otel_sdk_ratio_0_01"),
        );
        interleave(
            "request_tree_ratio_vs_fully_sampled",
            (100, batches(sampled, request_tree)),
            (500, batches(ratio, request_tree)),
        );
        interleave(
            "request_tree_ratio_vs_sdk_ratio",
            (500, batches(sdk, request_tree)),
            (500, batches(ratio, request_tree)),
        );
    }
}

#[inline(never)]
fn bare(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

#[tracing::instrument]
#[inline(never)]
fn instrumented(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

/// The clock `#[pipetel::measure]` times calls with (a TSC clock where the CPU has one).
fn clock() -> &'static quanta::Clock {
    static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// `#[tracing::instrument]` plus what timing a call needs at least: two reads of the clock
/// a measured call reads. `#[pipetel::measure]` is held to 1.2× this.
#[tracing::instrument]
#[inline(never)]
fn instrumented_clocked(x: u64) -> u64 {
    let clock = clock();
    let start = clock.raw();
    let y = black_box(x).wrapping_mul(3);
    black_box(clock.delta_as_nanos(start, clock.raw()));
    y
}

#[pipetel::measure]
#[inline(never)]
fn measured(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

fn function(c: &mut Criterion) {
    let mp = meter_provider();
    opentelemetry::global::set_meter_provider(mp.clone());
    // A registry on its own never frees a closed span's slot (only a `Layered` around it runs
    // the registry's close): every call would grow its slab, and both rows would time page
    // faults. A no-op layer makes it free spans as every real subscriber does.
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new()));
    let mut group = c.benchmark_group("function");
    // Before `init`, on a meter provider the process installed itself: the durations go to an
    // OTel histogram (as they do once `init` installed a push exporter).
    tracing::dispatcher::with_default(&dispatch, || {
        group.bench_function("pipetel_measure_otel_histogram", |b| b.iter(|| measured(black_box(1))));
    });
    // `init` with the pull endpoint alone, the default exporter: durations stay in the
    // function's own atomics, which the endpoint renders.
    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_service_name("bench")
            .with_prometheus_port(0)
            .with_console_log(false)
            .with_traces_exporters([])
            .with_logs_exporters([])
            .with_gpu_mode(pipetel::gpu::GpuMode::Off),
    )
    .expect("init");
    tracing::dispatcher::with_default(&dispatch, || {
        group.bench_function("bare", |b| b.iter(|| bare(black_box(1))));
        group.bench_function("tracing_instrument", |b| b.iter(|| instrumented(black_box(1))));
        group.bench_function("tracing_instrument_two_clock_reads", |b| b.iter(|| instrumented_clocked(black_box(1))));
        group.bench_function("pipetel_measure", |b| b.iter(|| measured(black_box(1))));
        if pairing() {
            let calls = |f: fn(u64) -> u64| {
                move |n| {
                    (0..u64::from(n)).for_each(|i| {
                        black_box(f(black_box(i)));
                    })
                }
            };
            interleave("measure_vs_instrument", (2000, calls(instrumented)), (2000, calls(measured)));
            interleave("measure_vs_instrument_clocked", (2000, calls(instrumented_clocked)), (2000, calls(measured)));
        }
    });
    // Measured calls are counted and timed, as the endpoint shows them (1000 more calls, so
    // the check holds when a filter skipped the rows).
    tracing::dispatcher::with_default(&dispatch, || {
        (0..1000).for_each(|i| {
            black_box(measured(i));
        })
    });
    let page = telemetry.prometheus_render().expect("pull endpoint").render();
    let count = |metric: &str| -> u64 {
        page.lines()
            .find(|l| l.starts_with(metric) && l.contains("function=\"measured\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {metric} for `measured`:\n{page}")) as u64
    };
    let (calls, timed) = (count("function_calls_total{"), count("function_duration_seconds_count{"));
    assert!(timed >= 1000 && calls >= timed, "calls {calls}, durations {timed}");
    // The same two calls under the stack `init` composes (sampling gate around the bridge, span
    // metrics, always-on sampler): there a measured call and the span-metrics layer share one
    // pair of clock readings.
    let tp = tracer_provider(Sampler::AlwaysOn);
    let full = Dispatch::new(
        tracing_subscriber::registry()
            .with(SamplingGate::new(tracing_opentelemetry::layer().with_tracer(tp.tracer("c")), false))
            .with(span_metrics()),
    );
    tracing::dispatcher::with_default(&full, || {
        group.bench_function("tracing_instrument_full_stack", |b| b.iter(|| instrumented(black_box(1))));
        group.bench_function("pipetel_measure_full_stack", |b| b.iter(|| measured(black_box(1))));
    });
    group.finish();
}

// `function` first: its `init` (the pull endpoint alone) then holds for the other groups, as in a
// program that serves the endpoint (exemplar capture on, span metrics kept for the endpoint).
/// Writes the interleaved comparisons; runs last.
fn write_paired(_: &mut Criterion) {
    common::write_paired("paired-spans.json");
}

criterion_group!(benches, function, spans, request_trees, write_paired);
criterion_main!(benches);
