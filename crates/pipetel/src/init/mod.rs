//! `init`: builds each signal from its part of the resolved settings, installs what the options
//! ask for, and returns the guard.
//!
//! The order of the steps, and why:
//! 1. resolve the configuration once, claim `init` for the process, parse the log filter;
//! 2. build (nothing global yet): the resource, the gRPC runtime, the meter provider and its
//!    readers, the tracer and logger providers; bind the pull endpoint; install the pipeline
//!    runtime; start a required GPU; build the layers. A failure here discards what was built,
//!    gives the claim back and leaves nothing installed;
//! 3. install the global `tracing` subscriber (unless the application owns it), which is the
//!    last step that can fail: another subscriber may already be installed;
//! 4. commit (cannot fail): log what the configuration read under old names, start an optional
//!    GPU, bridge the `log` crate, set the global providers and propagator (unless told not to),
//!    and publish the [installed context](crate::global) so that registries, hubs and measured
//!    functions built before `init` bind to the new meter provider.
//!
//! Modules: [`resource`], [`metrics`], [`traces`], [`logs`] and [`gpu`] each read only their
//! part of [`Settings`]; [`subscriber`] composes the `tracing` side; [`guard`] is what `init`
//! returns, with the OTLP delivery ledgers; [`crate::global`] is the leaf the rest of the crate registers
//! with. Each exporter's part of a pipeline is its entry in [`crate::export::BUILT_IN`].

mod console;
mod gpu;
mod guard;
mod logs;
mod metrics;
mod plugged;
mod profile;
mod resource;
mod subscriber;
mod traces;

use opentelemetry::logs::LoggerProvider as _;
use tracing::Subscriber;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

pub use guard::Telemetry;

use crate::config::{Config, Settings};
use crate::error::InitError;
use crate::export::ledgers::Ledgers;
use crate::export::registry;
use crate::global::{self, Installed};
use guard::Inner;
use subscriber::Layers;

/// What [`init_with`] installs besides the providers it always builds, and the application's
/// own exporters: the default (what [`init`] uses) installs everything and plugs in none.
///
/// An exporter plugged in here goes beside the ones the configuration names; with those set to
/// `none` (`OTEL_TRACES_EXPORTER=none`, ...) it goes instead of them. It gets what a built-in
/// exporter of its signal gets: the export interval (`OTEL_METRIC_EXPORT_INTERVAL`) for a push
/// metric exporter, the batch processor's settings (`OTEL_BSP_*`, `OTEL_BLRP_*`) for a span or
/// log exporter, pipetel's stage, worker and service metrics as instruments it can read, and a
/// flush and shutdown when the [`Telemetry`] guard drops.
#[derive(Debug)]
pub struct InitOptions {
    subscriber: bool,
    global_providers: bool,
    plugged: plugged::Plugged,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions { subscriber: true, global_providers: true, plugged: plugged::Plugged::default() }
    }
}

impl InitOptions {
    /// Everything installed, as [`init`] does.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `init` installs its own global `tracing` subscriber (default `true`). Without
    /// it, spans and events reach pipetel only through layers added to the application's own
    /// subscriber: use [`layers`] for those.
    #[must_use]
    pub fn install_subscriber(mut self, subscriber: bool) -> Self {
        self.subscriber = subscriber;
        self
    }

    /// Whether `init` sets the OTel global meter and tracer providers and the global text-map
    /// propagator of `OTEL_PROPAGATORS` (default `true`). Without them, pipetel's own instruments
    /// (registries, hubs, measured functions, stages, span metrics, [`crate::meter`]) still
    /// export through the providers `init` built, and the application's own OTel code keeps the
    /// globals it set.
    #[must_use]
    pub fn install_global_providers(mut self, global_providers: bool) -> Self {
        self.global_providers = global_providers;
        self
    }

    /// Adds a metric reader of the application's (a pull reader of its own, say) to the meter
    /// provider.
    #[must_use]
    pub fn with_metric_reader<R>(mut self, reader: R) -> Self
    where
        R: opentelemetry_sdk::metrics::reader::MetricReader,
    {
        self.plugged.metrics.push(Box::new(move |mp, _| mp.with_reader(reader)));
        self
    }

    /// Adds a push metric exporter of the application's, read every export interval
    /// (`OTEL_METRIC_EXPORT_INTERVAL`) by a periodic reader.
    #[must_use]
    pub fn with_metric_exporter<E>(mut self, exporter: E) -> Self
    where
        E: opentelemetry_sdk::metrics::exporter::PushMetricExporter,
    {
        self.plugged.metrics.push(Box::new(move |mp, interval| {
            mp.with_reader(
                opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).with_interval(interval).build(),
            )
        }));
        self
    }

    /// Adds a span exporter of the application's, behind a batch span processor with the
    /// configured batch settings.
    #[must_use]
    pub fn with_span_exporter<E>(mut self, exporter: E) -> Self
    where
        E: opentelemetry_sdk::trace::SpanExporter + 'static,
    {
        self.plugged
            .spans
            .push(Box::new(move |tp, batch| tp.with_span_processor(crate::export::batch::spans(exporter, batch))));
        self
    }

    /// Adds a log exporter of the application's, behind a batch log processor with the
    /// configured batch settings.
    #[must_use]
    pub fn with_log_exporter<E>(mut self, exporter: E) -> Self
    where
        E: opentelemetry_sdk::logs::LogExporter + 'static,
    {
        self.plugged
            .logs
            .push(Box::new(move |lp, batch| lp.with_log_processor(crate::export::batch::logs(exporter, batch))));
        self
    }
}

/// Installs pipetel for this process: OTel meter, tracer and logger providers, the global
/// text-map propagator (`OTEL_PROPAGATORS`, default W3C trace context and baggage), a `tracing`
/// subscriber (optional console output filtered by `RUST_LOG`; spans to OTel and span metrics
/// behind the traces filter, events to OTel logs behind the logs filter; `log` crate records
/// bridged) and the exporters the configuration names. Same as [`init_with`] with [`InitOptions::default`].
///
/// Works with or without a Tokio runtime: gRPC exporters run on a small runtime of their own and
/// the Prometheus endpoint on its own thread. Keep the returned guard alive: dropping it flushes
/// and shuts everything down, bounded by the shutdown timeout.
///
/// Once per process: a second call (a library calling `init` in a program that already did)
/// returns [`InitError::AlreadyInitialized`] and changes nothing; pipetel's instruments in that
/// library export through the first installation, so a library may treat that error as "already
/// set up" and go on.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A program starts from `Config::from_env()?`; this example ignores the environment and
/// // serves its metrics on a free port (the default is 9464).
/// let config = pipetel::Config::default().with_service_name("tokenize").with_prometheus_port(0);
/// let telemetry = pipetel::init(config)?;
/// let items = pipetel::meter().u64_counter("tokenize.items").with_unit("{item}").build();
/// items.add(3, &[]);
/// let page = telemetry.prometheus_render().ok_or("no pull endpoint")?.render();
/// assert!(page.lines().any(|l| l.starts_with("tokenize_items_total") && l.ends_with(" 3")));
/// telemetry.shutdown()?; // or let the guard drop: both flush
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`InitError`]: a bad configuration value (naming it), a second call in this process, another
/// global `tracing` subscriber, a Prometheus port already in use (naming the address), or an
/// exporter that cannot be built. A collector that is down is *not* an error: exports retry and
/// failures are logged.
pub fn init(config: Config) -> Result<Telemetry, InitError> {
    init_with(config, InitOptions::default())
}

/// [`init`] with the choice of what to install globally: see [`InitOptions`].
///
/// # Errors
/// As [`init`]; [`InitError::Subscriber`] only when installing the subscriber.
pub fn init_with(config: Config, mut options: InitOptions) -> Result<Telemetry, InitError> {
    let plugged = std::mem::take(&mut options.plugged);
    let (started, layers, settings) = start(config, options.subscriber, plugged)?;
    // Without the subscriber, the layers go unused: `layers` is the way to get them.
    drop(layers);
    Ok(started.commit(&settings, options))
}

/// For an application that owns its `tracing` subscriber: installs pipetel without a
/// subscriber (the providers, exporters and global providers as [`init`] does) and returns the
/// guard with one layer holding pipetel's `tracing` side: spans to OTel (behind the sampling
/// gate), span metrics, and events to OTel log records. Add it to a subscriber that stores spans:
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt as _;
/// use tracing_subscriber::util::SubscriberInitExt as _;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (_telemetry, pipetel_layer) = pipetel::layers(&pipetel::Config::from_env()?)?;
/// use tracing_subscriber::Layer as _;
/// tracing_subscriber::registry()
///     // On the console layer alone: a global filter would filter pipetel's layer too.
///     .with(tracing_subscriber::fmt::layer().with_filter(tracing_subscriber::EnvFilter::new("warn")))
///     .with(pipetel_layer)
///     .try_init()?; // also bridges the `log` crate (tracing-subscriber's `tracing-log` feature)
/// # Ok(()) }
/// ```
///
/// The layer's parts carry pipetel's traces and logs filters (`PIPETEL_TRACES_FILTER`,
/// `PIPETEL_LOGS_FILTER`); a global filter of the application applies before them. Pipetel's
/// `RUST_LOG` handling and console setting do not apply. Events of the exporters' own crates (`opentelemetry`, `hyper`,
/// `tonic`, ...) are never turned into log records, whatever the filter.
///
/// # Errors
/// As [`init`], except [`InitError::Subscriber`].
pub fn layers<S>(config: &Config) -> Result<(Telemetry, impl Layer<S> + Send + Sync + 'static), InitError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    layers_with(config, InitOptions::new())
}

/// [`layers`] with the choice of setting the global providers
/// ([`InitOptions::install_global_providers`]); the subscriber is the application's whatever
/// `options` say.
///
/// # Errors
/// As [`layers`].
pub fn layers_with<S>(
    config: &Config,
    mut options: InitOptions,
) -> Result<(Telemetry, impl Layer<S> + Send + Sync + 'static), InitError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let plugged = std::mem::take(&mut options.plugged);
    let (started, layers, settings) = start(config.clone(), false, plugged)?;
    let telemetry = started.commit(&settings, options.install_subscriber(false));
    Ok((telemetry, layers.into_layer()))
}

/// Steps 1 to 3: everything that can fail, with nothing left behind when it does.
fn start(
    config: Config,
    install_subscriber: bool,
    plugged: plugged::Plugged,
) -> Result<(Started, Layers, Settings), InitError> {
    // Resolved once: everything below reads plain values.
    let settings = config.resolve()?;
    // Calibrated here rather than inside the first measured call or span.
    let _ = crate::sync::clock();
    if !global::claim() {
        return Err(InitError::AlreadyInitialized);
    }
    match start_claimed(&settings, install_subscriber, plugged) {
        Ok((started, layers)) => Ok((started, layers, settings)),
        Err(e) => {
            global::release();
            Err(e)
        }
    }
}

fn start_claimed(
    settings: &Settings,
    install_subscriber: bool,
    plugged: plugged::Plugged,
) -> Result<(Started, Layers), InitError> {
    let filter = install_subscriber.then(|| subscriber::filter(&settings.subscriber)).transpose()?;
    let started = Started::new(settings, plugged)?;
    let layers = match started.layers(settings) {
        Ok(layers) => layers,
        Err(e) => {
            started.discard();
            return Err(e);
        }
    };
    let Some(filter) = filter else { return Ok((started, layers)) };
    match layers.install(&settings.subscriber, filter) {
        Ok(()) => Ok((started, Layers::default())),
        Err(e) => {
            started.discard();
            Err(e)
        }
    }
}

/// What step 2 built: nothing global yet but the pipeline runtime, which `discard` removes.
struct Started {
    /// `None` when the SDK is disabled.
    inner: Option<Inner>,
    /// The context to publish.
    installed: Option<Installed>,
}

impl Started {
    fn new(settings: &Settings, plugged: plugged::Plugged) -> Result<Started, InitError> {
        if settings.sdk_disabled {
            return Ok(Started { inner: None, installed: None });
        }
        let mut inner = Inner {
            resource: resource::build(&settings.resource),
            meter_provider: None,
            tracer_provider: None,
            logger_provider: None,
            endpoint: None,
            runtime: None,
            pipeline: None,
            gpu: None,
            profile: None,
            shutdown_timeout: settings.shutdown_timeout,
            ledgers: Ledgers::default(),
        };
        match build(&mut inner, settings, plugged) {
            Ok(installed) => Ok(Started { inner: Some(inner), installed: Some(installed) }),
            Err(e) => {
                Started { inner: Some(inner), installed: None }.discard();
                Err(e)
            }
        }
    }

    fn layers(&self, settings: &Settings) -> Result<Layers, InitError> {
        let (Some(inner), Some(installed)) = (&self.inner, &self.installed) else { return Ok(Layers::default()) };
        let traces = inner.tracer_provider.as_ref().map(|tp| (tp, settings.traces.sampler));
        let pull_only = installed.push_only.is_none();
        let filters = (&settings.traces.filter, &settings.logs.filter);
        Layers::new(
            traces,
            &settings.span_metrics,
            &installed.meter,
            pull_only,
            inner.logger_provider.as_ref(),
            filters,
        )
    }

    /// Undoes step 2 after a failure: stops what started and shuts the providers down quickly.
    fn discard(self) {
        let Some(inner) = self.inner else { return };
        drop(inner.profile);
        drop(inner.pipeline);
        if let Some(gpu) = inner.gpu {
            gpu::shutdown(gpu);
        }
        if let Some(endpoint) = inner.endpoint {
            metrics::stop(endpoint);
        }
        let t = std::time::Duration::from_millis(100);
        if let Some(mp) = inner.meter_provider {
            let _ = mp.shutdown_with_timeout(t);
        }
        if let Some(tp) = inner.tracer_provider {
            let _ = tp.shutdown_with_timeout(t);
        }
        if let Some(lp) = inner.logger_provider {
            let _ = lp.shutdown_with_timeout(t);
        }
        if let Some(rt) = inner.runtime {
            // Never blocks, so it is safe inside an async context.
            rt.shutdown_background();
        }
    }

    /// Step 4.
    fn commit(self, settings: &Settings, options: InitOptions) -> Telemetry {
        // Logged once a subscriber exists, since the configuration is read before there is one.
        for note in &settings.deprecations {
            tracing::warn!(target: "pipetel", "{note}");
        }
        let (Some(mut inner), Some(installed)) = (self.inner, self.installed) else { return Telemetry { inner: None } };
        if inner.gpu.is_none() {
            inner.gpu = gpu::start_optional(settings, &installed.meter);
        }
        if let Some(profiling) = &mut inner.profile {
            profile::start(profiling, settings, &inner.resource);
        }
        if options.global_providers {
            opentelemetry::global::set_text_map_propagator(propagator(&settings.propagators));
            if let Some(mp) = &inner.meter_provider {
                opentelemetry::global::set_meter_provider(mp.clone());
            }
            if let Some(tp) = &inner.tracer_provider {
                opentelemetry::global::set_tracer_provider(tp.clone());
            }
        }
        // Registries created from now on use the configured default buckets.
        if let Err(e) = crate::registry::global().set_default_buckets(&settings.service.histogram_buckets) {
            tracing::warn!(target: "pipetel", error = %e, "default histogram buckets not applied");
        }
        // The switches code outside `init` honours (stage metrics, service settings).
        global::configure(settings.pipeline.metrics, &settings.service);
        // Registries, hubs and measured functions built before now bind to the new provider.
        global::publish(installed);
        Telemetry { inner: Some(inner) }
    }
}

/// Step 2 into `inner`, which keeps whatever was built for [`Started::discard`].
fn build(inner: &mut Inner, settings: &Settings, plugged: plugged::Plugged) -> Result<Installed, InitError> {
    inner.runtime = grpc_runtime(settings)?;
    // tonic channels spawn their connection task on the runtime current while they are built.
    let _entered = inner.runtime.as_ref().map(|rt| rt.enter());
    let readers = settings.metrics.exporters.len() + plugged.metrics.len();
    let metrics = metrics::build(
        &settings.metrics,
        plugged.metrics,
        settings.cardinality_limit,
        &inner.resource,
        &mut inner.ledgers,
    )?;
    inner.meter_provider = Some(metrics.provider.clone());
    inner.tracer_provider = traces::build(&settings.traces, plugged.spans, &inner.resource, &mut inner.ledgers)?;
    inner.logger_provider = logs::build(&settings.logs, plugged.logs, &inner.resource, &mut inner.ledgers)?;
    inner.endpoint = metrics::serve(&settings.metrics.prometheus, metrics.pull)?;
    let installed = if readers == 0 {
        // No reader (`OTEL_METRICS_EXPORTER=none`): the SDK would refuse each observable
        // instrument with an error line; pipetel's instruments record into a no-op meter instead.
        Installed::new(&opentelemetry::metrics::noop::NoopMeterProvider::new(), false, settings.cardinality_limit)
    } else {
        Installed::new(&metrics.provider, metrics.pushes, settings.cardinality_limit)
    };
    if settings.metrics.process_metrics && readers > 0 {
        crate::process_metrics::register(&installed.meter);
    }
    let logger = inner.logger_provider.as_ref().map(|lp| lp.logger(crate::global::SCOPE_NAME));
    let rows = &settings.pipeline;
    inner.pipeline = Some(
        crate::pipeline::runtime::install(rows, &settings.resource.service_name, &installed, logger).map_err(|e| {
            let reason = format!("cannot open for appending: {e}");
            match &rows.rows_file {
                Some(file) => file.invalid(file.value.display().to_string(), reason),
                None => crate::config::ConfigError::invalid(crate::config::Origin::Default, "", reason),
            }
        })?,
    );
    inner.gpu = gpu::start_required(settings, &installed.meter)?;
    inner.profile = profile::prepare(settings)?;
    Ok(installed)
}

/// The global text-map propagator `OTEL_PROPAGATORS` names: the listed ones in order, or a
/// no-op one for an empty list (`none`).
fn propagator(names: &[crate::config::Propagator]) -> opentelemetry::propagation::TextMapCompositePropagator {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
    let propagators = names
        .iter()
        .map(|name| -> Box<dyn TextMapPropagator + Send + Sync> {
            match name {
                crate::config::Propagator::TraceContext => Box::new(TraceContextPropagator::new()),
                // `Propagator` is non-exhaustive for users, not for this crate.
                crate::config::Propagator::Baggage => Box::new(BaggagePropagator::new()),
            }
        })
        .collect();
    // An empty composite injects and extracts nothing, as `none` asks.
    opentelemetry::propagation::TextMapCompositePropagator::new(propagators)
}

/// The one-thread runtime gRPC exporters run on, when a configured exporter needs it.
fn grpc_runtime(s: &Settings) -> Result<Option<tokio::runtime::Runtime>, InitError> {
    let needed = registry::needs_runtime(&s.traces.exporters, &s.traces.otlp)
        || registry::needs_runtime(&s.metrics.exporters, &s.metrics.otlp)
        || registry::needs_runtime(&s.logs.exporters, &s.logs.otlp);
    if !needed {
        return Ok(None);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pipetel-otlp")
        .enable_all()
        .build()
        .map_err(InitError::Runtime)?;
    Ok(Some(runtime))
}
