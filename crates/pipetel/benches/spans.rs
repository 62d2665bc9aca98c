//! What a span costs through each layer of pipetel's `tracing` stack, and what
//! `#[pipetel::measure]` adds to a function call.
//!
//! Group `span`: (a) the `tracing` registry alone, (b) + bare `tracing-opentelemetry`, (c) the full
//! stack as `init` composes it (the sampling gate around the bridge, + span metrics), (d) spans
//! the sampler drops: every span under `always_off` (the bridge left out), a root span under a
//! ratio sampler (built, then dropped), and a child of a dropped span (held back by the gate).
//! `c_full_stack_child` is (c) for a child of a kept span, the same shape as the last (d) row.
//!
//! Run: `cargo bench -p pipetel --bench spans -- --warm-up-time 1 --measurement-time 2`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use pipetel::sampling::SamplingGate;
use pipetel::span_metrics::{SpanMetricsConfig, SpanMetricsLayer};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// A meter provider with a reader, so instruments really aggregate (no reader makes them no-ops).
fn meter_provider() -> SdkMeterProvider {
    SdkMeterProvider::builder().with_reader(ManualReader::builder().build()).build()
}

fn tracer_provider(sampler: Sampler) -> SdkTracerProvider {
    SdkTracerProvider::builder().with_sampler(sampler).build()
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

fn spans(c: &mut Criterion) {
    let mp = meter_provider();
    let meter = mp.meter("bench");
    let metrics = || SpanMetricsLayer::new(&SpanMetricsConfig::default(), &meter).expect("default config is valid");
    let on = tracer_provider(Sampler::AlwaysOn);
    let drop_all = tracer_provider(Sampler::TraceIdRatioBased(0.0));
    let full = |tp: &SdkTracerProvider| {
        Dispatch::new(
            tracing_subscriber::registry()
                .with(SamplingGate::new(tracing_opentelemetry::layer().with_tracer(tp.tracer("c")), false))
                .with(metrics()),
        )
    };
    let stacks: Vec<(&str, Dispatch)> = vec![
        ("a_registry", Dispatch::new(tracing_subscriber::registry())),
        (
            "b_registry_otel",
            Dispatch::new(
                tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(on.tracer("b"))),
            ),
        ),
        ("c_full_stack", full(&on)),
        // What `init` composes when the sampler is `always_off`: the OTel layer is left out.
        ("d_full_stack_always_off", Dispatch::new(tracing_subscriber::registry().with(metrics()))),
        // A root span a ratio sampler drops: the bridge must still build it (a `set_parent` may
        // follow), so only the sampler's decision is saved.
        ("d_ratio_sampler_drops_root", full(&drop_all)),
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

#[pipetel::measure]
#[inline(never)]
fn measured(x: u64) -> u64 {
    black_box(x).wrapping_mul(3)
}

fn function(c: &mut Criterion) {
    let mp = meter_provider();
    opentelemetry::global::set_meter_provider(mp.clone());
    let dispatch = Dispatch::new(tracing_subscriber::registry());
    let mut group = c.benchmark_group("function");
    tracing::dispatcher::with_default(&dispatch, || {
        group.bench_function("bare", |b| b.iter(|| bare(black_box(1))));
        group.bench_function("tracing_instrument", |b| b.iter(|| instrumented(black_box(1))));
        group.bench_function("pipetel_measure", |b| b.iter(|| measured(black_box(1))));
    });
    group.finish();
}

criterion_group!(benches, spans, function);
criterion_main!(benches);
