//! The tracer provider (sampler, a span processor per configured exporter, each built by its
//! entry in [`crate::export::BUILT_IN`]) and the `tracing` → OTel bridge with its sampling gate.

use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::{SamplerConfig, TracesSettings};
use crate::error::InitError;
use crate::export::entry::BatchInput;
use crate::export::ledgers::Ledgers;
use crate::export::registry;
use crate::global::SCOPE_NAME;
use crate::sampling::{GateTracer, PinnedTraceIds, SamplingGate};

/// The tracer provider, absent when no trace exporter is configured.
///
/// # Errors
/// An exporter that cannot be built or is not compiled in.
pub(super) fn build(
    settings: &TracesSettings,
    plugged: Vec<super::plugged::AddSpans>,
    resource: &Resource,
    ledgers: &mut Ledgers,
) -> Result<Option<SdkTracerProvider>, InitError> {
    if settings.exporters.is_empty() && plugged.is_empty() {
        return Ok(None);
    }
    let limits = &settings.limits;
    let mut tp = SdkTracerProvider::builder()
        .with_resource(resource.clone())
        .with_sampler(sampler(settings.sampler))
        // Random ids, except the trace id the sampling gate drew for a root it kept.
        .with_id_generator(PinnedTraceIds::default())
        .with_max_attributes_per_span(limits.attributes_per_span)
        .with_max_events_per_span(limits.events_per_span)
        .with_max_links_per_span(limits.links_per_span)
        .with_max_attributes_per_event(limits.attributes_per_event)
        .with_max_attributes_per_link(limits.attributes_per_link);
    let mut input = BatchInput { otlp: &settings.otlp, batch: &settings.batch, ledgers };
    for exporter in &settings.exporters {
        tp = registry::builder(*exporter)?(tp, &mut input)?;
    }
    for add in plugged {
        tp = add(tp, &settings.batch);
    }
    Ok(Some(tp.build()))
}

fn sampler(s: SamplerConfig) -> Sampler {
    match s {
        SamplerConfig::AlwaysOn => Sampler::AlwaysOn,
        SamplerConfig::AlwaysOff => Sampler::AlwaysOff,
        SamplerConfig::TraceIdRatio(r) => Sampler::TraceIdRatioBased(r),
        SamplerConfig::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        SamplerConfig::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        SamplerConfig::ParentBasedTraceIdRatio(r) => Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r))),
        // `SamplerConfig` is non-exhaustive for users, not for this crate.
    }
}

/// What the bridge layer is made of, before it is typed for a subscriber.
#[derive(Debug, Clone)]
pub(super) struct Bridge {
    tracer: GateTracer,
    /// `None`: every span a kept parent has is kept too (the gate passes everything).
    follow_remote: Option<bool>,
    /// The ratio roots are decided with at creation; `None`: every root is kept.
    root_ratio: Option<f64>,
}

impl Bridge {
    /// The bridge for `tp`, absent with `always_off`: no span is ever sampled then, and building
    /// span data only for the sampler to drop it would cost about as much as exporting it.
    /// Trace and span ids then no longer reach log records and `Stage::traceparent` returns
    /// `None`.
    pub(super) fn new(tp: &SdkTracerProvider, sampler: SamplerConfig) -> Option<Bridge> {
        let (follow_remote, root_ratio) = match sampler {
            SamplerConfig::AlwaysOff => return None,
            SamplerConfig::AlwaysOn => (None, None),
            SamplerConfig::TraceIdRatio(r) if r >= 1.0 => (None, None),
            SamplerConfig::TraceIdRatio(r) => (Some(false), Some(r)),
            SamplerConfig::ParentBasedTraceIdRatio(r) if r < 1.0 => (Some(true), Some(r)),
            SamplerConfig::ParentBasedAlwaysOff => (Some(true), Some(0.0)),
            _ => (Some(true), None),
        };
        Some(Bridge { tracer: GateTracer::new(tp, SCOPE_NAME), follow_remote, root_ratio })
    }

    /// The `tracing-opentelemetry` layer behind the sampling gate: spans whose parent was not
    /// sampled skip the bridge, and so do roots a ratio sampler drops (see [`crate::sampling`]).
    pub(super) fn layer<S>(self) -> impl Layer<S> + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let bridge = tracing_opentelemetry::layer().with_tracer(self.tracer);
        match self.follow_remote {
            None => SamplingGate::passthrough(bridge),
            Some(follow_remote) => match self.root_ratio {
                Some(ratio) => SamplingGate::new(bridge, follow_remote).deciding_roots(ratio),
                None => SamplingGate::new(bridge, follow_remote),
            },
        }
    }
}
