//! Errors of `init` and of shutdown: one enum per operation.

use crate::config::{ConfigError, Signal};

/// Why [`init`](crate::init) failed. Nothing is left installed when it does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// A configuration value is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `init` was already called in this process.
    #[error("pipetel is already initialised in this process; call init once and keep the guard")]
    AlreadyInitialized,
    /// Another global `tracing` subscriber is already installed.
    #[error("another global tracing subscriber is already installed: {0}")]
    Subscriber(String),
    /// The Prometheus endpoint could not listen on its address.
    #[error("the Prometheus endpoint cannot listen on {addr}: {source}")]
    Bind {
        /// The address as configured (`host:port`).
        addr: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An exporter could not be built.
    #[error("cannot build the {exporter} exporter for {signal}: {reason}")]
    Exporter {
        /// The signal.
        signal: Signal,
        /// The exporter (`otlp`, `console`).
        exporter: &'static str,
        /// Why.
        reason: String,
    },
    /// An exporter was configured that this build of pipetel does not contain.
    #[error("the {exporter} exporter is not built in; enable the `{feature}` feature of pipetel")]
    FeatureDisabled {
        /// The exporter.
        exporter: &'static str,
        /// The cargo feature that provides it.
        feature: &'static str,
    },
    /// GPU telemetry is required (`PIPETEL_GPU=on`) but could not start.
    #[cfg(feature = "gpu")]
    #[error("GPU telemetry is required (PIPETEL_GPU=on) but cannot start: {0}")]
    Gpu(#[source] pipetel_gpu::GpuError),
    /// The background runtime for gRPC exporters could not start.
    #[error("cannot start the exporter runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Why [`Telemetry::shutdown`](crate::Telemetry::shutdown) did not finish cleanly. Everything
/// that could be shut down was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Flushing and shutting down took longer than the configured timeout.
    #[error("shutdown did not finish within {0:?}; data still queued may be lost")]
    Timeout(std::time::Duration),
    /// One or more providers reported errors, or OTLP exports lost data (for example, the
    /// collector was unreachable): one line per signal naming what was lost, where it was going
    /// and why.
    #[error("shutdown finished with errors: {}", .0.join("; "))]
    Providers(Vec<String>),
}
