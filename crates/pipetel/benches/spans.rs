//! What a span costs through each layer of pipetel's `tracing` stack, and what
//! `#[pipetel::measure]` adds to a function call.
//!
//! Group `span`: (a) the `tracing` registry alone, (b) + bare `tracing-opentelemetry`, (c) the full
//! stack (b + span metrics), (d) the full stack as `init` composes it for the `always_off`
//! sampler, and a span dropped by the sampler with the OTel layer in place (what ratio and
//! parent-based samplers pay for a sampled-out span).
//!
//! Run: `cargo bench -p pipetel --bench spans -- --warm-up-time 1 --measurement-time 2`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
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

fn spans(c: &mut Criterion) {
    let mp = meter_provider();
    let meter = mp.meter("bench");
    let metrics = || SpanMetricsLayer::new(&SpanMetricsConfig::default(), &meter).expect("default config is valid");
    let on = tracer_provider(Sampler::AlwaysOn);
    let off = tracer_provider(Sampler::AlwaysOff);
    let stacks: Vec<(&str, Dispatch)> = vec![
        ("a_registry", Dispatch::new(tracing_subscriber::registry())),
        (
            "b_registry_otel",
            Dispatch::new(
                tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(on.tracer("b"))),
            ),
        ),
        (
            "c_full_stack",
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(tracing_opentelemetry::layer().with_tracer(on.tracer("c")))
                    .with(metrics()),
            ),
        ),
        // What `init` composes when the sampler is `always_off`: the OTel layer is left out.
        ("d_full_stack_always_off", Dispatch::new(tracing_subscriber::registry().with(metrics()))),
        // A span the sampler drops while the OTel layer stays (ratio and parent-based samplers).
        (
            "d_otel_layer_sampler_drops",
            Dispatch::new(
                tracing_subscriber::registry()
                    .with(tracing_opentelemetry::layer().with_tracer(off.tracer("d")))
                    .with(metrics()),
            ),
        ),
    ];
    let mut group = c.benchmark_group("span");
    for (name, dispatch) in &stacks {
        tracing::dispatcher::with_default(dispatch, || group.bench_function(*name, |b| b.iter(one_span)));
    }
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
