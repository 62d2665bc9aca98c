//! [`start`] and the [`GpuTelemetry`] handle: configuration in, a running poller out.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::Meter;

use crate::config::{GpuConfig, GpuMode, GpuPlatform};
use crate::error::GpuError;
use crate::nvml::{NvmlOptions, NvmlSource};
use crate::poller::{GpuPoller, GpuState, SampleReader};
use crate::source::GpuSample;

/// Starts GPU telemetry as `config` says.
///
/// - [`GpuMode::Off`]: returns a disabled handle; nothing is loaded or validated.
/// - [`GpuMode::Auto`]: starts the poller thread and returns at once. The library is opened
///   on that thread; if it cannot be (no library, no driver, no device) one info line says
///   why and GPU metrics stay empty while the program runs on.
/// - [`GpuMode::On`]: as `Auto`, but waits up to [`GpuConfig::init_timeout`] for the library
///   and returns the failure instead of logging it.
///
/// # Errors
///
/// In `Auto` and `On`: [`GpuError::Config`] for an invalid configuration,
/// [`GpuError::PlatformNotBuilt`] for `platform = amd`, [`GpuError::Thread`] when the thread
/// cannot start. In `On` only: whatever opening the library returned, or
/// [`GpuError::InitTimeout`].
pub fn start(config: &GpuConfig) -> Result<GpuTelemetry, GpuError> {
    if config.mode == GpuMode::Off {
        return Ok(GpuTelemetry::disabled());
    }
    config.validate()?;
    if config.platform == GpuPlatform::Amd {
        return Err(GpuError::PlatformNotBuilt { platform: "amd", feature: "amd" });
    }
    let library = config.library_path.clone();
    let options = NvmlOptions::new(config.pcie_throughput, config.process_memory);
    let auto = config.mode == GpuMode::Auto;
    let poller = GpuPoller::spawn(config.poll_interval, move || {
        let opened = NvmlSource::open(library.as_deref(), options);
        match &opened {
            Ok(source) => tracing::info!(devices = source.devices().count(), "GPU metrics on (NVML)"),
            // In `On` mode the caller gets the error instead.
            Err(e) if auto => tracing::info!("GPU metrics off: {e}"),
            Err(_) => {}
        }
        opened
    })?;
    if auto {
        return Ok(GpuTelemetry { poller: Some(poller) });
    }
    match poller.wait_started(config.init_timeout) {
        GpuState::Off(e) => Err(e),
        GpuState::Starting => Err(GpuError::InitTimeout(config.init_timeout)),
        _ => Ok(GpuTelemetry { poller: Some(poller) }),
    }
}

/// Handle of running GPU telemetry; dropping it (or [`GpuTelemetry::shutdown`]) stops the
/// poller thread and closes the library.
#[derive(Debug, Default)]
pub struct GpuTelemetry {
    poller: Option<GpuPoller>,
}

impl GpuTelemetry {
    /// A handle with GPU telemetry off.
    pub fn disabled() -> Self {
        Self { poller: None }
    }

    /// Wraps a poller over any [`GpuSource`](crate::GpuSource) (another vendor, a test source).
    pub fn from_poller(poller: GpuPoller) -> Self {
        Self { poller: Some(poller) }
    }

    /// Where GPU telemetry stands.
    pub fn state(&self) -> GpuState {
        self.poller.as_ref().map_or(GpuState::Disabled, GpuPoller::state)
    }

    /// Waits at most `timeout` for the library to open or fail; returns the state then.
    pub fn wait_started(&self, timeout: Duration) -> GpuState {
        self.poller.as_ref().map_or(GpuState::Disabled, |p| p.wait_started(timeout))
    }

    /// Polls now and waits for the result, at most `timeout`; false when off or timed out.
    pub fn refresh(&self, timeout: Duration) -> bool {
        self.poller.as_ref().is_some_and(|p| p.refresh(timeout))
    }

    /// The latest sample, if any.
    pub fn latest(&self) -> Option<Arc<GpuSample>> {
        self.poller.as_ref().and_then(GpuPoller::latest)
    }

    /// A reader of the latest sample.
    pub fn reader(&self) -> SampleReader {
        self.poller.as_ref().map_or_else(SampleReader::empty, GpuPoller::reader)
    }

    /// Registers the GPU instruments on `meter` (see [`crate::register_metrics`]). Does
    /// nothing when GPU telemetry is disabled, so no empty instruments appear.
    pub fn register_metrics(&self, meter: &Meter) {
        if self.poller.is_some() {
            crate::metrics::register_metrics(meter, &self.reader());
        }
    }

    /// Stops the poller and joins its thread; the instruments report nothing afterwards.
    pub fn shutdown(mut self) {
        if let Some(mut poller) = self.poller.take() {
            poller.stop();
        }
    }
}
