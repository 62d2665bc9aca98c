//! The `tracing` side: the console (fmt) layer behind `RUST_LOG`, and pipetel's layers (the OTel
//! bridge and span metrics behind the traces filter, events to log records behind the logs
//! filter), installed as pipetel's own global subscriber or handed to an application that owns
//! its subscriber; and the `log` crate bridge. Every filter is per layer, so quieting the
//! console never silences the traces, the span metrics or the log export, nor the reverse.

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

/// Directives put before every configured filter: the exporters' own crates stay quiet unless a
/// filter names them, so their spans and events do not feed back into what they export.
const QUIET_EXPORTERS: &str =
    "opentelemetry=warn,opentelemetry_sdk=warn,h2=warn,hyper=warn,tonic=warn,tower=warn,reqwest=warn";

/// `directives` after the quiet defaults, as an `EnvFilter`.
///
/// # Errors
/// Directives that do not parse, naming where they were set.
fn parse(directives: &Sourced<String>) -> Result<EnvFilter, InitError> {
    crate::config::parse_filter(&format!("{QUIET_EXPORTERS},{}", directives.value))
        .map_err(|e| directives.invalid(directives.value.clone(), e).into())
}

/// The console's filter (`RUST_LOG`). It filters the console layer alone: the traces and the
/// exported log records have filters of their own.
///
/// # Errors
/// A filter that does not parse, naming where it was set.
pub(super) fn filter(settings: &SubscriberSettings) -> Result<EnvFilter, InitError> {
    parse(&settings.log_filter)
}

/// Pipetel's layers before they are typed for a subscriber, each with its signal's filter
/// (`EnvFilter` is not `Clone`, so each layer holds one of its own); each absent when its
/// signal is off.
#[derive(Default)]
pub(super) struct Layers {
    bridge: Option<(Bridge, EnvFilter)>,
    span_metrics: Option<(SpanMetricsLayer, EnvFilter)>,
    logs: Option<(SdkLoggerProvider, EnvFilter)>,
}

impl Layers {
    /// The layers over the providers `init` built and pipetel's meter (`pull_only`: no push
    /// metric exporter reads it, so span metrics are kept for the pull endpoint alone). Spans
    /// (to OTel and to span metrics) are filtered by `traces_filter`, log records by
    /// `logs_filter`, each independently of the console's `RUST_LOG`.
    ///
    /// # Errors
    /// An invalid span-metrics configuration or filter, naming where it was set.
    pub(super) fn new(
        traces: Option<(&SdkTracerProvider, SamplerConfig)>,
        span_metrics: &Sourced<SpanMetricsConfig>,
        meter: &Meter,
        pull_only: bool,
        logs: Option<&SdkLoggerProvider>,
        filters: (&Sourced<String>, &Sourced<String>),
    ) -> Result<Self, InitError> {
        let (traces_filter, logs_filter) = filters;
        let span_layer = crate::span_metrics::layer(&span_metrics.value, meter, pull_only)
            .map_err(|e| span_metrics.invalid(span_metrics.value.filter.clone(), e.to_string()))?;
        let bridge = traces.and_then(|(tp, sampler)| Bridge::new(tp, sampler));
        Ok(Layers {
            bridge: bridge.map(|bridge| parse(traces_filter).map(|f| (bridge, f))).transpose()?,
            span_metrics: span_layer.map(|layer| parse(traces_filter).map(|f| (layer, f))).transpose()?,
            logs: logs.map(|lp| parse(logs_filter).map(|f| (lp.clone(), f))).transpose()?,
        })
    }

    /// One layer for an application's own subscriber, which must store spans
    /// (`tracing_subscriber::registry()` does). Each part carries its own filter, so a filter
    /// the application puts on its console layer alone leaves them whole.
    pub(super) fn into_layer<S>(self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let logs = self.logs.map(|(lp, filter)| super::logs::layer::<S>(&lp, filter));
        let bridge = self.bridge.map(|(bridge, filter)| bridge.layer::<S>().with_filter(filter));
        let span_metrics = self.span_metrics.map(|(layer, filter)| layer.with_filter(filter));
        Layer::and_then(Layer::and_then(bridge, span_metrics), logs)
    }

    /// Installs pipetel's own global subscriber: these layers, and the console layer in the
    /// configured format behind `console_filter` when asked for; then bridges the `log` crate to it.
    ///
    /// # Errors
    /// [`InitError::Subscriber`] when another global subscriber is installed.
    pub(super) fn install(self, settings: &SubscriberSettings, console_filter: EnvFilter) -> Result<(), InitError> {
        let console = settings.console.then(|| super::console::layer(settings.format).with_filter(console_filter));
        let subscriber = tracing_subscriber::registry().with(console).with(self.into_layer());
        // The most verbose level any layer's filter lets through, so that the `log` records
        // the traces or the log export want are bridged even when the console wants fewer.
        let max_level = Subscriber::max_level_hint(&subscriber);
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
