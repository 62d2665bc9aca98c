//! The guard `init` returns: owns the providers, the endpoint, the exporter runtime and the
//! background threads; flushes and shuts them down, bounded by the shutdown timeout.

use std::time::Duration;

use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

use super::gpu::Gpu;
use super::metrics::Endpoint;
use crate::error::ShutdownError;
use crate::export::ledgers::Ledgers;

/// The guard [`init`](crate::init) returns: owns the providers, the endpoint and the exporter
/// runtime. Dropping it flushes and shuts down (bounded by the shutdown timeout); call
/// [`Telemetry::shutdown`] instead to see the outcome.
#[must_use = "dropping the Telemetry guard shuts telemetry down at once: keep it alive (e.g. `let _telemetry = ...`) until the program ends"]
pub struct Telemetry {
    pub(super) inner: Option<Inner>,
}

/// What a running installation owns.
pub(super) struct Inner {
    pub(super) resource: Resource,
    pub(super) meter_provider: Option<SdkMeterProvider>,
    pub(super) tracer_provider: Option<SdkTracerProvider>,
    pub(super) logger_provider: Option<SdkLoggerProvider>,
    pub(super) endpoint: Option<Endpoint>,
    pub(super) runtime: Option<tokio::runtime::Runtime>,
    pub(super) pipeline: Option<crate::pipeline::runtime::PipelineGuard>,
    pub(super) gpu: Option<Gpu>,
    /// The sampling profiler, when `PIPETEL_PROFILE=cpu`.
    pub(super) profile: Option<super::profile::Profiling>,
    pub(super) shutdown_timeout: Duration,
    /// What the OTLP exporters failed to deliver, one ledger per exporter.
    pub(super) ledgers: Ledgers,
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
        self.inner.as_ref()?.endpoint.as_ref().map(super::metrics::endpoint_addr)
    }

    /// A handle that renders the Prometheus exposition, when the Prometheus exporter is on (with
    /// or without its own HTTP endpoint).
    #[cfg(feature = "prometheus")]
    pub fn prometheus_render(&self) -> Option<crate::export::PrometheusRender> {
        self.inner.as_ref()?.endpoint.as_ref().map(|(_, render)| render.clone())
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
                ledgers.push_outcome(&mut errors, "traces", tp.force_flush());
            }
            if let Some(lp) = lp {
                ledgers.push_outcome(&mut errors, "logs", lp.force_flush());
            }
            if let Some(mp) = mp {
                ledgers.push_outcome(&mut errors, "metrics", mp.force_flush());
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
        // The samplers first: their rows must not race the providers going away. The profiler's
        // last lines go out before the exporters' runtime stops.
        drop(inner.profile);
        drop(pipeline);
        if let Some(gpu) = inner.gpu {
            super::gpu::shutdown(gpu);
        }
        if let Some(endpoint) = inner.endpoint {
            super::metrics::stop(endpoint);
        }
        let result = run_bounded(shutdown_timeout, move || {
            let mut errors = Vec::new();
            // Spans first, so the logs and metrics they produce on the way out are flushed too.
            if let Some(tp) = tracer_provider {
                ledgers.push_outcome(&mut errors, "traces", tp.shutdown_with_timeout(shutdown_timeout));
            }
            if let Some(lp) = logger_provider {
                ledgers.push_outcome(&mut errors, "logs", lp.shutdown_with_timeout(shutdown_timeout));
            }
            if let Some(mp) = meter_provider {
                ledgers.push_outcome(&mut errors, "metrics", mp.shutdown_with_timeout(shutdown_timeout));
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
