//! The `tracing` side: the filter, the console (fmt) layer, and pipetel's layers (the OTel
//! bridge, span metrics, events to log records), installed as pipetel's own global subscriber
//! or handed to an application that owns its subscriber; and the `log` crate bridge.

use std::io::IsTerminal;

use opentelemetry::metrics::Meter;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

use super::traces::Bridge;
use crate::config::{SamplerConfig, Sourced, SubscriberSettings};
use crate::error::InitError;
use crate::span_metrics::{SpanMetricsConfig, SpanMetricsLayer};

/// The filter of pipetel's own subscriber: quiet defaults for the exporters' own crates first,
/// so the configured directives (`RUST_LOG`) can override them.
///
/// # Errors
/// A filter that does not parse, naming where it was set.
pub(super) fn filter(settings: &SubscriberSettings) -> Result<EnvFilter, InitError> {
    let log_filter = &settings.log_filter;
    crate::config::parse_filter(&format!(
        "opentelemetry=warn,opentelemetry_sdk=warn,h2=warn,hyper=warn,tonic=warn,tower=warn,reqwest=warn,{}",
        log_filter.value
    ))
    .map_err(|e| log_filter.invalid(log_filter.value.clone(), e).into())
}

/// Pipetel's layers before they are typed for a subscriber: each absent when its signal is off.
#[derive(Default)]
pub(super) struct Layers {
    bridge: Option<Bridge>,
    span_metrics: Option<SpanMetricsLayer>,
    logs: Option<SdkLoggerProvider>,
}

impl Layers {
    /// The layers over the providers `init` built and pipetel's meter (`pull_only`: no push
    /// metric exporter reads it, so span metrics are kept for the pull endpoint alone).
    ///
    /// # Errors
    /// An invalid span-metrics configuration, naming where it was set.
    pub(super) fn new(
        traces: Option<(&SdkTracerProvider, SamplerConfig)>,
        span_metrics: &Sourced<SpanMetricsConfig>,
        meter: &Meter,
        pull_only: bool,
        logs: Option<&SdkLoggerProvider>,
    ) -> Result<Self, InitError> {
        let span_layer = crate::span_metrics::layer(&span_metrics.value, meter, pull_only)
            .map_err(|e| span_metrics.invalid(span_metrics.value.filter.clone(), e.to_string()))?;
        Ok(Layers {
            bridge: traces.and_then(|(tp, sampler)| Bridge::new(tp, sampler)),
            span_metrics: span_layer,
            logs: logs.cloned(),
        })
    }

    /// One layer for an application's own subscriber, which must store spans
    /// (`tracing_subscriber::registry()` does).
    pub(super) fn into_layer<S>(self) -> impl Layer<S> + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let logs = self.logs.as_ref().map(super::logs::layer::<S>);
        let bridge = self.bridge.map(Bridge::layer::<S>);
        Layer::and_then(Layer::and_then(bridge, self.span_metrics), logs)
    }

    /// Installs pipetel's own global subscriber: these layers, the console layer when asked for,
    /// and `filter`; then bridges the `log` crate to it.
    ///
    /// # Errors
    /// [`InitError::Subscriber`] when another global subscriber is installed.
    pub(super) fn install(self, settings: &SubscriberSettings, filter: EnvFilter) -> Result<(), InitError> {
        let max_level = filter.max_level_hint();
        let fmt_layer = settings.console.then(|| {
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal())
        });
        let logs = self.logs.as_ref().map(super::logs::layer);
        let subscriber = tracing_subscriber::registry()
            .with(self.bridge.map(Bridge::layer))
            .with(self.span_metrics)
            .with(logs)
            .with(fmt_layer)
            .with(filter);
        tracing::subscriber::set_global_default(subscriber).map_err(|e| InitError::Subscriber(e.to_string()))?;
        bridge_log_crate(max_level);
        Ok(())
    }
}

/// Sends the `log` crate's records to the `tracing` subscriber just installed, as events
/// (`tracing-log`), up to the filter's most verbose level. A program that installed a `log`
/// logger of its own keeps it: its records are then not bridged, which is said once.
fn bridge_log_crate(max_level: Option<tracing::level_filters::LevelFilter>) {
    use tracing_log::AsLog;
    let level = max_level.unwrap_or(tracing::level_filters::LevelFilter::TRACE).as_log();
    if let Err(error) = tracing_log::LogTracer::builder().with_max_level(level).init() {
        tracing::info!(target: "pipetel", %error, "`log` records are not bridged: another `log` logger is installed");
    }
}
