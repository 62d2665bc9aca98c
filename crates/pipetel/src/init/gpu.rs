//! GPU gauges: the poller starts here, NVML (or ROCm SMI) opens on its thread, never in `init`.
//!
//! A required GPU (`on`) starts before anything global is installed, so its failure leaves
//! nothing behind. `auto` starts after the subscriber: its poller logs why GPU metrics are off,
//! and a line logged before the subscriber exists would be lost.

use opentelemetry::metrics::Meter;

use crate::config::Settings;
use crate::error::InitError;

/// The running GPU telemetry.
#[cfg(feature = "gpu")]
pub(super) type Gpu = pipetel_gpu::GpuTelemetry;
/// The running GPU telemetry (never made without the `gpu` feature).
#[cfg(not(feature = "gpu"))]
pub(super) type Gpu = std::convert::Infallible;

/// Starts GPU telemetry when it is required; `None` otherwise.
///
/// # Errors
/// [`InitError::Gpu`] when it is required and cannot start.
#[cfg(feature = "gpu")]
pub(super) fn start_required(settings: &Settings, meter: &Meter) -> Result<Option<Gpu>, InitError> {
    if settings.gpu.mode != pipetel_gpu::GpuMode::On {
        return Ok(None);
    }
    let gpu = pipetel_gpu::start(&settings.gpu).map_err(InitError::Gpu)?;
    gpu.register_metrics(meter);
    crate::global::set_gpu(Some(gpu.reader()));
    Ok(Some(gpu))
}

#[cfg(not(feature = "gpu"))]
pub(super) fn start_required(_: &Settings, _: &Meter) -> Result<Option<Gpu>, InitError> {
    Ok(None)
}

/// Starts GPU telemetry when it is not required (`auto`, `off`): a failure is one log line and
/// the program runs on without GPU metrics.
#[cfg(feature = "gpu")]
pub(super) fn start_optional(settings: &Settings, meter: &Meter) -> Option<Gpu> {
    if settings.gpu.mode == pipetel_gpu::GpuMode::On {
        return None;
    }
    match pipetel_gpu::start(&settings.gpu) {
        Ok(gpu) => {
            gpu.register_metrics(meter);
            crate::global::set_gpu(Some(gpu.reader()));
            Some(gpu)
        }
        Err(error) => {
            tracing::info!(target: "pipetel", %error, "GPU metrics off");
            None
        }
    }
}

#[cfg(not(feature = "gpu"))]
pub(super) fn start_optional(_: &Settings, _: &Meter) -> Option<Gpu> {
    None
}

/// Stops the poller.
#[cfg(feature = "gpu")]
pub(super) fn shutdown(gpu: Gpu) {
    crate::global::set_gpu(None);
    gpu.shutdown();
}

#[cfg(not(feature = "gpu"))]
pub(super) fn shutdown(gpu: Gpu) {
    match gpu {}
}
