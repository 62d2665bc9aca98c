//! `init`: builds the providers and exporters, installs them globally, and returns the guard.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

use crate::config::{
    Config, LogExporter, MetricExporter, OtlpProtocol, ResourceSettings, SamplerConfig, Settings, TraceExporter,
    DEFAULT_CARDINALITY_LIMIT,
};
use crate::error::{InitError, ShutdownError};
#[cfg_attr(not(feature = "otlp"), allow(unused_imports))]
use crate::export::delivery::{Ledger, Tracked};

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The name of pipetel's instrumentation scope (meter and tracer name).
pub const SCOPE_NAME: &str = "pipetel";

/// Installs pipetel for this process: OTel meter, tracer and logger providers, the W3C
/// trace-context propagator, a `tracing` subscriber (filter from `RUST_LOG`, optional console
/// output, spans to OTel, events to OTel logs) and the exporters the configuration names.
///
/// Works with or without a Tokio runtime: gRPC exporters run on a small runtime of their own and
/// the Prometheus endpoint on its own thread. Keep the returned guard alive: dropping it flushes
/// and shuts everything down, bounded by the shutdown timeout.
///
/// # Errors
/// [`InitError`]: a bad configuration value (naming it), a second call in this process, another
/// global `tracing` subscriber, a Prometheus port already in use (naming the address), or an
/// exporter that cannot be built. A collector that is down is *not* an error: exports retry and
/// failures are logged.
pub fn init(config: Config) -> Result<Telemetry, InitError> {
    // Resolved once: everything below reads plain values.
    let settings = config.resolve()?;
    // Calibrated here rather than inside the first measured call or span.
    let _ = crate::clock();
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err(InitError::AlreadyInitialized);
    }
    match build(settings) {
        Ok(t) => Ok(t),
        Err(e) => {
            INITIALIZED.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}

/// The guard `init` returns: owns the providers, the endpoint and the exporter runtime.
/// Dropping it flushes and shuts down (bounded by the shutdown timeout); call
/// [`Telemetry::shutdown`] instead to see the outcome.
pub struct Telemetry {
    inner: Option<Inner>,
}

struct Inner {
    resource: Resource,
    meter_provider: Option<SdkMeterProvider>,
    tracer_provider: Option<SdkTracerProvider>,
    logger_provider: Option<SdkLoggerProvider>,
    #[cfg(feature = "prometheus")]
    prometheus: Option<(crate::export::prometheus::PrometheusServer, crate::export::PrometheusRender)>,
    runtime: Option<tokio::runtime::Runtime>,
    pipeline: Option<crate::pipeline::runtime::PipelineGuard>,
    #[cfg(feature = "gpu")]
    gpu: Option<pipetel_gpu::GpuTelemetry>,
    shutdown_timeout: Duration,
    /// What the OTLP exporters failed to deliver, one ledger per signal.
    ledgers: Vec<Arc<Ledger>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("active", &self.inner.is_some())
            .field("prometheus_addr", &self.prometheus_addr())
            .finish()
    }
}

impl Telemetry {
    /// The address the Prometheus endpoint listens on, when it runs.
    pub fn prometheus_addr(&self) -> Option<std::net::SocketAddr> {
        #[cfg(feature = "prometheus")]
        {
            self.inner.as_ref()?.prometheus.as_ref().map(|(server, _)| server.addr())
        }
        #[cfg(not(feature = "prometheus"))]
        {
            None
        }
    }

    /// A handle that renders the Prometheus exposition, when the Prometheus exporter is on (with
    /// or without its own HTTP endpoint).
    #[cfg(feature = "prometheus")]
    pub fn prometheus_render(&self) -> Option<crate::export::PrometheusRender> {
        self.inner.as_ref()?.prometheus.as_ref().map(|(_, render)| render.clone())
    }

    /// The meter provider (absent when the SDK is disabled).
    pub fn meter_provider(&self) -> Option<&SdkMeterProvider> {
        self.inner.as_ref()?.meter_provider.as_ref()
    }

    /// The tracer provider (absent when the SDK is disabled or no trace exporter is configured).
    pub fn tracer_provider(&self) -> Option<&SdkTracerProvider> {
        self.inner.as_ref()?.tracer_provider.as_ref()
    }

    /// The logger provider (absent when the SDK is disabled or no log exporter is configured).
    pub fn logger_provider(&self) -> Option<&SdkLoggerProvider> {
        self.inner.as_ref()?.logger_provider.as_ref()
    }

    /// The resource every signal carries.
    pub fn resource(&self) -> Option<&Resource> {
        self.inner.as_ref().map(|i| &i.resource)
    }

    /// Flushes every provider now (bounded by the shutdown timeout).
    ///
    /// # Errors
    /// As [`Telemetry::shutdown`]; what failed exports lost is reported once, by the first
    /// `force_flush` or `shutdown` after it.
    pub fn force_flush(&self) -> Result<(), ShutdownError> {
        let Some(inner) = self.inner.as_ref() else { return Ok(()) };
        let (tp, lp, mp) = (inner.tracer_provider.clone(), inner.logger_provider.clone(), inner.meter_provider.clone());
        let ledgers = inner.ledgers.clone();
        run_bounded(inner.shutdown_timeout, move || {
            let mut errors = Vec::new();
            if let Some(tp) = tp {
                push_outcome(&mut errors, "traces", tp.force_flush(), &ledgers);
            }
            if let Some(lp) = lp {
                push_outcome(&mut errors, "logs", lp.force_flush(), &ledgers);
            }
            if let Some(mp) = mp {
                push_outcome(&mut errors, "metrics", mp.force_flush(), &ledgers);
            }
            errors
        })
    }

    /// Flushes and shuts down every provider, stops the endpoint and the exporter runtime.
    /// Returns within the shutdown timeout whatever the collector does.
    ///
    /// # Errors
    /// [`ShutdownError::Timeout`] when the timeout ran out, [`ShutdownError::Providers`] when a
    /// provider failed or an OTLP exporter lost data: one line per signal with the spans or log
    /// records in failed exports, or a failed last metric export (earlier failed metric exports
    /// lose nothing: the values are cumulative), each naming the endpoint and the last error.
    pub fn shutdown(mut self) -> Result<(), ShutdownError> {
        self.shutdown_inner()
    }

    fn shutdown_inner(&mut self) -> Result<(), ShutdownError> {
        let Some(inner) = self.inner.take() else { return Ok(()) };
        let Inner {
            meter_provider,
            tracer_provider,
            logger_provider,
            runtime,
            shutdown_timeout,
            pipeline,
            ledgers,
            ..
        } = inner;
        // The samplers first: their rows must not race the providers going away.
        drop(pipeline);
        #[cfg(feature = "gpu")]
        if let Some(gpu) = inner.gpu {
            gpu.shutdown();
        }
        #[cfg(feature = "prometheus")]
        drop(inner.prometheus);
        let result = run_bounded(shutdown_timeout, move || {
            let mut errors = Vec::new();
            // Spans first, so the logs and metrics they produce on the way out are flushed too.
            if let Some(tp) = tracer_provider {
                push_outcome(&mut errors, "traces", tp.shutdown_with_timeout(shutdown_timeout), &ledgers);
            }
            if let Some(lp) = logger_provider {
                push_outcome(&mut errors, "logs", lp.shutdown_with_timeout(shutdown_timeout), &ledgers);
            }
            if let Some(mp) = meter_provider {
                push_outcome(&mut errors, "metrics", mp.shutdown_with_timeout(shutdown_timeout), &ledgers);
            }
            errors
        });
        if let Some(rt) = runtime {
            // Never blocks, so it is safe inside an async context.
            rt.shutdown_background();
        }
        result
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown_inner() {
            tracing::warn!(target: "pipetel", %error, "telemetry shutdown");
        }
    }
}

/// A new ledger for one OTLP exporter, kept for the flush and shutdown reports.
#[cfg(feature = "otlp")]
fn ledger<'a>(
    ledgers: &'a mut Vec<Arc<Ledger>>,
    signal: &'static str,
    items: &'static str,
    target: &crate::config::OtlpTarget,
) -> &'a Arc<Ledger> {
    ledgers.push(Ledger::new(signal, items, target.endpoint.clone()));
    &ledgers[ledgers.len() - 1]
}

/// Enters one provider's flush or shutdown outcome, with what its exporters failed to deliver
/// since the last report: a batch processor drops a failed batch and still answers `Ok`, and a
/// periodic reader says only "failed", so the ledger is what names the loss and its cause.
fn push_outcome(
    errors: &mut Vec<String>,
    what: &str,
    r: opentelemetry_sdk::error::OTelSdkResult,
    ledgers: &[Arc<Ledger>],
) {
    use opentelemetry_sdk::error::OTelSdkError;
    let lost: Vec<String> = ledgers.iter().filter(|l| l.signal() == what).filter_map(|l| l.report()).collect();
    match r {
        Ok(()) | Err(OTelSdkError::AlreadyShutdown) => {}
        Err(OTelSdkError::InternalFailure(_)) if !lost.is_empty() => {}
        Err(e) => errors.push(format!("{what}: {e}")),
    }
    errors.extend(lost);
}

/// Runs `work` on a helper thread and waits at most `timeout`: the SDK's own timeouts do not
/// bound every path (a meter provider ignores its shutdown timeout), this does.
fn run_bounded(timeout: Duration, work: impl FnOnce() -> Vec<String> + Send + 'static) -> Result<(), ShutdownError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("pipetel-shutdown".into()).spawn(move || {
        let _ = tx.send(work());
    });
    if spawned.is_err() {
        return Err(ShutdownError::Providers(vec!["cannot start the shutdown thread".into()]));
    }
    match rx.recv_timeout(timeout) {
        Ok(errors) if errors.is_empty() => Ok(()),
        Ok(errors) => Err(ShutdownError::Providers(errors)),
        Err(_) => Err(ShutdownError::Timeout(timeout)),
    }
}

fn resource(settings: &ResourceSettings) -> Resource {
    let mut attrs: Vec<KeyValue> =
        settings.attributes.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect();
    attrs.push(KeyValue::new("service.name", settings.service_name.clone()));
    if let Some(v) = &settings.service_version {
        attrs.push(KeyValue::new("service.version", v.clone()));
    }
    attrs.push(KeyValue::new("service.instance.id", uuid::Uuid::new_v4().to_string()));
    attrs.push(KeyValue::new("host.name", gethostname::gethostname().to_string_lossy().into_owned()));
    attrs.push(KeyValue::new("process.pid", i64::from(std::process::id())));
    attrs.push(KeyValue::new("telemetry.sdk.name", "opentelemetry"));
    attrs.push(KeyValue::new("telemetry.sdk.language", "rust"));
    attrs.push(KeyValue::new("telemetry.distro.name", "pipetel"));
    attrs.push(KeyValue::new("telemetry.distro.version", env!("CARGO_PKG_VERSION")));
    Resource::builder_empty().with_attributes(attrs).build()
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

/// Targets whose events must not be exported as OTel logs: the exporters' own stack, which
/// would otherwise feed back into itself.
fn is_exporter_internal(target: &str) -> bool {
    ["opentelemetry", "hyper", "h2", "tonic", "tower", "reqwest", "rustls"].iter().any(|p| target.starts_with(p))
}

fn needs_grpc(s: &Settings) -> bool {
    let grpc = |target: &crate::config::OtlpTarget| target.protocol == OtlpProtocol::Grpc;
    (s.traces.exporters.contains(&TraceExporter::Otlp) && grpc(&s.traces.otlp))
        || (s.metrics.exporters.contains(&MetricExporter::Otlp) && grpc(&s.metrics.otlp))
        || (s.logs.exporters.contains(&LogExporter::Otlp) && grpc(&s.logs.otlp))
}

/// Logs what the configuration read under an old name; called once a subscriber exists, since
/// the configuration is read before there is one.
fn log_deprecations(settings: &Settings) {
    for note in &settings.deprecations {
        tracing::warn!(target: "pipetel", "{note}");
    }
}

#[cfg_attr(not(feature = "otlp"), allow(unused_variables))]
#[cfg_attr(not(any(feature = "otlp", feature = "console")), allow(unused_mut))]
// Without some exporters compiled in, a loop arm returns at once.
#[cfg_attr(not(all(feature = "otlp", feature = "console", feature = "prometheus")), allow(clippy::never_loop))]
fn build(settings: Settings) -> Result<Telemetry, InitError> {
    let log_filter = &settings.subscriber.log_filter;
    let filter = tracing_subscriber::EnvFilter::builder()
        // Quiet defaults for the exporters' own crates first, so the user's directives can override them.
        .parse(format!(
            "opentelemetry=warn,opentelemetry_sdk=warn,h2=warn,hyper=warn,tonic=warn,tower=warn,reqwest=warn,{}",
            log_filter.value
        ))
        .map_err(|e| log_filter.invalid(log_filter.value.clone(), e.to_string()))?;

    if settings.sdk_disabled {
        let fmt_layer = settings.subscriber.console.then(|| {
            tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal())
        });
        let subscriber = tracing_subscriber::registry().with(fmt_layer).with(filter);
        tracing::subscriber::set_global_default(subscriber).map_err(|e| InitError::Subscriber(e.to_string()))?;
        log_deprecations(&settings);
        return Ok(Telemetry { inner: None });
    }

    let resource = resource(&settings.resource);
    let runtime = if needs_grpc(&settings) {
        Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("pipetel-otlp")
                .enable_all()
                .build()
                .map_err(InitError::Runtime)?,
        )
    } else {
        None
    };
    // tonic channels spawn their connection task on the runtime current while they are built.
    let _entered = runtime.as_ref().map(|rt| rt.enter());

    #[cfg_attr(not(feature = "otlp"), allow(unused_mut))]
    let mut ledgers: Vec<Arc<Ledger>> = Vec::new();
    // ----- metrics -----
    let mut mp = SdkMeterProvider::builder().with_resource(resource.clone());
    let limit = settings.cardinality_limit;
    if limit != DEFAULT_CARDINALITY_LIMIT {
        mp = mp.with_view(move |_: &Instrument| Stream::builder().with_cardinality_limit(limit).build().ok());
    }
    #[cfg(feature = "prometheus")]
    let mut prometheus_render = None;
    for exporter in &settings.metrics.exporters {
        match exporter {
            MetricExporter::Prometheus => {
                #[cfg(feature = "prometheus")]
                {
                    let reader = crate::export::prometheus::PullReader::new();
                    mp = mp.with_reader(reader.clone());
                    prometheus_render = Some(crate::export::PrometheusRender::new(reader));
                }
                #[cfg(not(feature = "prometheus"))]
                return Err(InitError::FeatureDisabled { exporter: "prometheus", feature: "prometheus" });
            }
            MetricExporter::Otlp => {
                #[cfg(feature = "otlp")]
                {
                    let target = &settings.metrics.otlp;
                    let exporter = crate::export::otlp::metric_exporter(target)?;
                    let exporter = Tracked::new(exporter, ledger(&mut ledgers, "metrics", "", target));
                    mp = mp.with_reader(
                        opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
                            .with_interval(settings.metrics.export_interval)
                            .build(),
                    );
                }
                #[cfg(not(feature = "otlp"))]
                return Err(InitError::FeatureDisabled { exporter: "otlp", feature: "otlp" });
            }
            MetricExporter::Console => {
                #[cfg(feature = "console")]
                {
                    let exporter = opentelemetry_stdout::MetricExporter::default();
                    mp = mp.with_reader(
                        opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
                            .with_interval(settings.metrics.export_interval)
                            .build(),
                    );
                }
                #[cfg(not(feature = "console"))]
                return Err(InitError::FeatureDisabled { exporter: "console", feature: "console" });
            }
        }
    }
    let meter_provider = mp.build();
    crate::registry::set_push_exporter(settings.metrics.exporters.iter().any(|e| *e != MetricExporter::Prometheus));

    // ----- traces -----
    let tracer_provider = if settings.traces.exporters.is_empty() {
        None
    } else {
        let mut tp =
            SdkTracerProvider::builder().with_resource(resource.clone()).with_sampler(sampler(settings.traces.sampler));
        for exporter in &settings.traces.exporters {
            match exporter {
                TraceExporter::Otlp => {
                    #[cfg(feature = "otlp")]
                    {
                        let target = &settings.traces.otlp;
                        let exporter = crate::export::otlp::span_exporter(target)?;
                        tp = tp.with_batch_exporter(Tracked::new(
                            exporter,
                            ledger(&mut ledgers, "traces", "span", target),
                        ));
                    }
                    #[cfg(not(feature = "otlp"))]
                    return Err(InitError::FeatureDisabled { exporter: "otlp", feature: "otlp" });
                }
                TraceExporter::Console => {
                    #[cfg(feature = "console")]
                    {
                        tp = tp.with_batch_exporter(opentelemetry_stdout::SpanExporter::default());
                    }
                    #[cfg(not(feature = "console"))]
                    return Err(InitError::FeatureDisabled { exporter: "console", feature: "console" });
                }
            }
        }
        Some(tp.build())
    };

    // ----- logs -----
    let logger_provider = if settings.logs.exporters.is_empty() {
        None
    } else {
        let mut lp = SdkLoggerProvider::builder().with_resource(resource.clone());
        for exporter in &settings.logs.exporters {
            match exporter {
                LogExporter::Otlp => {
                    #[cfg(feature = "otlp")]
                    {
                        let target = &settings.logs.otlp;
                        let exporter = crate::export::otlp::log_exporter(target)?;
                        let ledger = ledger(&mut ledgers, "logs", "log record", target);
                        lp = lp.with_batch_exporter(Tracked::new(exporter, ledger));
                    }
                    #[cfg(not(feature = "otlp"))]
                    return Err(InitError::FeatureDisabled { exporter: "otlp", feature: "otlp" });
                }
                LogExporter::Console => {
                    #[cfg(feature = "console")]
                    {
                        lp = lp.with_batch_exporter(opentelemetry_stdout::LogExporter::default());
                    }
                    #[cfg(not(feature = "console"))]
                    return Err(InitError::FeatureDisabled { exporter: "console", feature: "console" });
                }
            }
        }
        Some(lp.build())
    };

    // ----- the pull endpoint: bound before anything global is installed -----
    #[cfg(feature = "prometheus")]
    let prometheus = match prometheus_render {
        Some(render) => {
            let pull = &settings.metrics.prometheus;
            let server = endpoint_options(pull).and_then(|options| {
                crate::export::prometheus::PrometheusServer::start(&pull.host, pull.port, options, render.clone())
            });
            match server {
                Ok(server) => Some((server, render)),
                Err(e) => {
                    discard(&meter_provider, tracer_provider.as_ref(), logger_provider.as_ref());
                    return Err(e);
                }
            }
        }
        None => None,
    };

    crate::registry::set_cardinality_limit(settings.cardinality_limit);
    // Registries created from now on use the configured default buckets.
    if let Err(e) = crate::registry::global().set_default_buckets(&settings.service.histogram_buckets) {
        tracing::warn!(target: "pipetel", error = %e, "default histogram buckets not applied");
    }

    // ----- stage and worker telemetry -----
    let rows = &settings.pipeline;
    let pipeline_settings = crate::pipeline::runtime::PipelineSettings {
        namespace: rows.namespace.clone(),
        sample_interval: rows.sample_interval,
        retention: rows.retention,
        rows_file: rows.rows_file.as_ref().map(|f| f.value.clone()),
        cardinality_limit: settings.cardinality_limit,
        metrics: rows.metrics,
    };
    let logger = logger_provider.as_ref().map(|lp| opentelemetry::logs::LoggerProvider::logger(lp, SCOPE_NAME));
    let pipeline = match crate::pipeline::runtime::install(
        pipeline_settings,
        &opentelemetry::metrics::MeterProvider::meter(&meter_provider, SCOPE_NAME),
        logger,
    ) {
        Ok(guard) => guard,
        Err(e) => {
            discard(&meter_provider, tracer_provider.as_ref(), logger_provider.as_ref());
            let reason = format!("cannot open for appending: {e}");
            return Err(match &rows.rows_file {
                Some(file) => file.invalid(file.value.display().to_string(), reason),
                None => crate::config::ConfigError::invalid(crate::config::Origin::Default, "", reason),
            }
            .into());
        }
    };

    // ----- GPU gauges: NVML opens on the poller thread, never here -----
    // A required GPU (`on`) is checked before anything global is installed, so its failure leaves
    // nothing behind. `auto` starts after the subscriber: its poller logs why GPU metrics are off,
    // and a line logged before the subscriber exists would be lost.
    #[cfg(feature = "gpu")]
    let gpu_meter = opentelemetry::metrics::MeterProvider::meter(&meter_provider, SCOPE_NAME);
    #[cfg(feature = "gpu")]
    let gpu_now = settings.gpu.mode == pipetel_gpu::GpuMode::On;
    #[cfg(feature = "gpu")]
    let mut gpu = if gpu_now {
        match pipetel_gpu::start(&settings.gpu) {
            Ok(gpu) => {
                gpu.register_metrics(&gpu_meter);
                Some(gpu)
            }
            Err(e) => {
                drop(pipeline);
                discard(&meter_provider, tracer_provider.as_ref(), logger_provider.as_ref());
                return Err(InitError::Gpu(e));
            }
        }
    } else {
        None
    };

    // ----- the tracing subscriber -----
    // With `always_off` no span is ever sampled, so the bridge is left out: building span data
    // only for the sampler to drop it would cost about as much as exporting it. Trace and span
    // ids then no longer reach log records and `Stage::traceparent` returns `None`.
    let sampler = settings.traces.sampler;
    let otel_layer = tracer_provider.as_ref().filter(|_| !matches!(sampler, SamplerConfig::AlwaysOff)).map(|tp| {
        // Spans whose parent was not sampled skip the bridge (see `crate::sampling`).
        let bridge = tracing_opentelemetry::layer().with_tracer(tp.tracer(SCOPE_NAME));
        match sampler {
            SamplerConfig::AlwaysOn => crate::sampling::SamplingGate::passthrough(bridge),
            SamplerConfig::TraceIdRatio(r) if r >= 1.0 => crate::sampling::SamplingGate::passthrough(bridge),
            SamplerConfig::TraceIdRatio(_) => crate::sampling::SamplingGate::new(bridge, false),
            _ => crate::sampling::SamplingGate::new(bridge, true),
        }
    });
    let log_layer = logger_provider.as_ref().map(|lp| {
        opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(lp)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| !is_exporter_internal(meta.target())))
    });
    let fmt_layer = settings.subscriber.console.then(|| {
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal())
    });
    let span_config = &settings.span_metrics;
    let span_metrics = crate::span_metrics::layer(
        &span_config.value,
        &opentelemetry::metrics::MeterProvider::meter(&meter_provider, SCOPE_NAME),
    )
    .map_err(|e| span_config.invalid(span_config.value.filter.clone(), e.to_string()))?;
    let subscriber =
        tracing_subscriber::registry().with(otel_layer).with(span_metrics).with(log_layer).with(fmt_layer).with(filter);
    if let Err(e) = tracing::subscriber::set_global_default(subscriber) {
        drop(pipeline);
        discard(&meter_provider, tracer_provider.as_ref(), logger_provider.as_ref());
        return Err(InitError::Subscriber(e.to_string()));
    }
    log_deprecations(&settings);
    #[cfg(feature = "gpu")]
    if !gpu_now {
        match pipetel_gpu::start(&settings.gpu) {
            Ok(g) => {
                g.register_metrics(&gpu_meter);
                gpu = Some(g);
            }
            // Not required: the program runs on without GPU metrics.
            Err(error) => tracing::info!(target: "pipetel", %error, "GPU metrics off"),
        }
    }
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    opentelemetry::global::set_meter_provider(meter_provider.clone());
    // Measured functions called before `init` re-resolve their instruments on their next call.
    crate::measure::on_init();
    if let Some(tp) = &tracer_provider {
        opentelemetry::global::set_tracer_provider(tp.clone());
    }
    drop(_entered);
    Ok(Telemetry {
        inner: Some(Inner {
            resource,
            meter_provider: Some(meter_provider),
            tracer_provider,
            logger_provider,
            #[cfg(feature = "prometheus")]
            prometheus,
            runtime,
            pipeline: Some(pipeline),
            #[cfg(feature = "gpu")]
            gpu,
            shutdown_timeout: settings.shutdown_timeout,
            ledgers,
        }),
    })
}

fn discard(mp: &SdkMeterProvider, tp: Option<&SdkTracerProvider>, lp: Option<&SdkLoggerProvider>) {
    let t = Duration::from_millis(100);
    let _ = mp.shutdown_with_timeout(t);
    if let Some(tp) = tp {
        let _ = tp.shutdown_with_timeout(t);
    }
    if let Some(lp) = lp {
        let _ = lp.shutdown_with_timeout(t);
    }
}

#[cfg(feature = "prometheus")]
fn endpoint_options(
    pull: &crate::config::PrometheusSettings,
) -> Result<crate::export::prometheus::EndpointOptions, InitError> {
    let mut options = crate::export::prometheus::EndpointOptions::new(&pull.path);
    if let Some(token) = &pull.bearer_token {
        options = options.with_bearer_token(token);
    }
    if let Some((user, password)) = &pull.basic_auth {
        options = options.with_basic_auth(user, password);
    }
    if let Some(tls) = &pull.tls {
        #[cfg(feature = "tls")]
        {
            let (cert, key) = &tls.value;
            let tls = crate::export::prometheus::tls_config(cert, key)
                .map_err(|reason| tls.invalid(cert.display().to_string(), reason))?;
            options.tls = Some(tls);
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = tls;
            return Err(InitError::FeatureDisabled { exporter: "TLS pull endpoint", feature: "tls" });
        }
    }
    Ok(options)
}
