//! What `init` installed: pipetel's meter ([`meter`]), the name of its instrumentation scope,
//! and (feature `gpu`) the GPU poller's latest sample ([`gpu_snapshot`]). The core's part is
//! `pipetel_core::global`; the GPU reader lives here, with the crate that starts the poller.

#[cfg(feature = "gpu")]
use std::sync::{Arc, RwLock};

pub use pipetel_core::global::*;

/// A reader of the running GPU poller's latest sample (set while `init`'s GPU telemetry runs).
#[cfg(feature = "gpu")]
static GPU: RwLock<Option<pipetel_gpu::SampleReader>> = RwLock::new(None);

/// Keeps (or, with `None`, forgets) the reader of the GPU poller `init` started.
#[cfg(feature = "gpu")]
pub(crate) fn set_gpu(reader: Option<pipetel_gpu::SampleReader>) {
    // The sampler attributes this process's GPU use to the running shards from the same readings.
    pipetel_core::pipeline::gpu::set_gpu_reader(reader.clone().map(crate::gpu_use::reader));
    *crate::sync::write(&GPU) = reader;
}

/// The latest sample of the GPU poller `init` started (TeleFuser's `collect_gpu_metrics()`):
/// `None` before `init`, when no GPU was found or GPU telemetry is off, before the first poll,
/// and after the guard dropped.
#[cfg(feature = "gpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "gpu")))]
pub fn gpu_snapshot() -> Option<Arc<pipetel_gpu::GpuSample>> {
    crate::sync::read(&GPU).as_ref().and_then(pipetel_gpu::SampleReader::latest)
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    use std::time::Duration;

    use pipetel_gpu::{GpuError, GpuPoller, GpuSample, GpuSource, GpuState, GpuTelemetry};

    struct NoDevices;

    impl GpuSource for NoDevices {
        fn platform(&self) -> &'static str {
            "test"
        }

        fn sample(&mut self) -> Result<GpuSample, GpuError> {
            Ok(GpuSample::new(Vec::new()))
        }
    }

    #[test]
    fn the_gpu_snapshot_is_the_running_pollers_latest_sample() {
        assert!(super::gpu_snapshot().is_none(), "no poller yet");
        let poller = GpuPoller::spawn(Duration::from_secs(60), || Ok(NoDevices)).expect("poller");
        let gpu = GpuTelemetry::from_poller(poller);
        assert!(matches!(gpu.wait_started(Duration::from_secs(10)), GpuState::Running { .. }));
        assert!(gpu.refresh(Duration::from_secs(10)), "a poll");
        super::set_gpu(Some(gpu.reader()));
        let sample = super::gpu_snapshot().expect("the latest sample");
        assert!(sample.devices.is_empty());
        assert_eq!(Some(sample), gpu.latest());
        super::set_gpu(None);
        assert!(super::gpu_snapshot().is_none(), "forgotten when the poller stops");
        gpu.shutdown();
    }
}
