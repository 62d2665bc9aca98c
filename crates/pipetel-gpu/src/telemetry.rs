//! [`start`] and the [`GpuTelemetry`] handle: configuration in, a running poller out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::Meter;

use crate::config::{GpuConfig, GpuMode, GpuPlatform};
use crate::devices::DeviceFilter;
use crate::error::GpuError;
use crate::poller::{GpuPoller, GpuState, SampleReader};
use crate::source::nvml::{NvmlOptions, NvmlSource};
#[cfg(feature = "amd")]
use crate::source::rocm::AmdSource;
use crate::source::{GpuSample, GpuSource};

/// Starts GPU telemetry as `config` says.
///
/// - [`GpuMode::Off`]: returns a disabled handle; nothing is loaded or validated.
/// - [`GpuMode::Auto`]: starts the poller thread and returns at once. The library is opened
///   on that thread; if it cannot be (no library, no driver, no device) one info line says
///   why and GPU metrics stay empty while the program runs on.
/// - [`GpuMode::On`]: as `Auto`, but waits up to [`GpuConfig::init_timeout`] for the library
///   and returns the failure instead of logging it.
///
/// NVIDIA devices are those [`GpuConfig::devices`] selects: by default the ones this process
/// can use (`CUDA_VISIBLE_DEVICES`, `NVIDIA_VISIBLE_DEVICES`, read here); the choice is logged
/// once. [`GpuPlatform::Auto`] opens NVML and, if that gives no device and the `amd` feature is
/// built, ROCm SMI; [`GpuPlatform::Nvidia`] and [`GpuPlatform::Amd`] open only their own.
///
/// # Errors
///
/// In `Auto` and `On`: [`GpuError::Config`] for an invalid configuration (a visible-device
/// variable that does not parse included, named in the error),
/// [`GpuError::PlatformNotBuilt`] for `platform = amd` without the `amd` feature,
/// [`GpuError::Thread`] when the thread cannot start. In `On` only: whatever opening the
/// library returned ([`GpuError::NoPlatform`] when `auto` found two libraries and no device),
/// or [`GpuError::InitTimeout`].
pub fn start(config: &GpuConfig) -> Result<GpuTelemetry, GpuError> {
    if config.mode == GpuMode::Off {
        return Ok(GpuTelemetry::disabled());
    }
    config.validate()?;
    #[cfg(not(feature = "amd"))]
    if config.platform == GpuPlatform::Amd {
        return Err(GpuError::PlatformNotBuilt { platform: "amd", feature: "amd" });
    }
    // Read here, on the caller's thread, so a bad value is the caller's error in every mode.
    let devices = config.devices.resolve(|name| std::env::var(name).ok())?;
    let opener = Opener {
        devices,
        platform: config.platform,
        nvml_library: config.nvml_library.clone(),
        rocm_smi_library: config.rocm_smi_library.clone(),
        options: NvmlOptions::new(config.pcie_throughput, config.process_memory),
    };
    let auto = config.mode == GpuMode::Auto;
    let poller = GpuPoller::spawn(config.poll_interval, move || {
        let opened = opener.open();
        match &opened {
            Ok(source) => tracing::info!(devices = source.device_count(), "GPU metrics on ({})", source.library_kind()),
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

/// What the poller thread needs to open a source.
struct Opener {
    /// The NVIDIA devices to report (ROCm SMI reports all of its devices).
    devices: DeviceFilter,
    platform: GpuPlatform,
    nvml_library: Option<PathBuf>,
    #[cfg_attr(not(feature = "amd"), allow(dead_code))]
    rocm_smi_library: Option<PathBuf>,
    options: NvmlOptions,
}

impl Opener {
    fn open(&self) -> Result<AnySource, GpuError> {
        let nvml = || {
            NvmlSource::open_filtered(self.nvml_library.as_deref(), self.options, &self.devices)
                .map(|s| AnySource::Nvml(Box::new(s)))
        };
        match self.platform {
            GpuPlatform::Nvidia => nvml(),
            #[cfg(feature = "amd")]
            GpuPlatform::Amd => self.open_amd(),
            #[cfg(feature = "amd")]
            GpuPlatform::Auto => {
                let nvidia = match nvml() {
                    Ok(source) => return Ok(source),
                    Err(e) => e,
                };
                self.open_amd().map_err(|amd| auto_error(nvidia, amd))
            }
            // `start` refuses `Amd` in builds without it, so this is `Auto`: NVML alone.
            #[cfg(not(feature = "amd"))]
            _ => nvml(),
        }
    }

    #[cfg(feature = "amd")]
    fn open_amd(&self) -> Result<AnySource, GpuError> {
        let source = AmdSource::open(self.rocm_smi_library.as_deref())?;
        if self.options.pcie_throughput || self.options.process_memory {
            tracing::info!("PCIe throughput and per-process GPU memory are not read from ROCm SMI");
        }
        Ok(AnySource::Amd(source))
    }
}

/// The error of `platform = auto` when neither library gave a device. A library that is not
/// installed says nothing about the machine, so the other one's error stands alone.
#[cfg(feature = "amd")]
fn auto_error(nvidia: GpuError, amd: GpuError) -> GpuError {
    match (&nvidia, &amd) {
        (_, GpuError::LibraryNotLoaded { .. }) => nvidia,
        (GpuError::LibraryNotLoaded { .. }, _) => amd,
        _ => GpuError::NoPlatform { errors: vec![nvidia, amd] },
    }
}

/// The source the poller owns: one vendor's, chosen when it opened.
#[derive(Debug)]
enum AnySource {
    // NVML's loaded function table makes the source about 12 KB; it is moved once, boxed.
    Nvml(Box<NvmlSource>),
    #[cfg(feature = "amd")]
    Amd(AmdSource),
}

impl AnySource {
    fn device_count(&self) -> usize {
        match self {
            Self::Nvml(s) => s.devices().count(),
            #[cfg(feature = "amd")]
            Self::Amd(s) => s.devices().count(),
        }
    }

    fn library_kind(&self) -> &'static str {
        match self {
            Self::Nvml(_) => "NVML",
            #[cfg(feature = "amd")]
            Self::Amd(_) => "ROCm SMI",
        }
    }
}

impl GpuSource for AnySource {
    fn platform(&self) -> &'static str {
        match self {
            Self::Nvml(s) => s.platform(),
            #[cfg(feature = "amd")]
            Self::Amd(s) => s.platform(),
        }
    }

    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        match self {
            Self::Nvml(s) => s.sample(),
            #[cfg(feature = "amd")]
            Self::Amd(s) => s.sample(),
        }
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

    /// [`GpuSample::readings`] of the latest sample: per GPU, what attributing its use to a
    /// stage needs (empty when off or before the first poll).
    pub fn readings(&self) -> Vec<crate::DeviceReading> {
        self.reader().readings()
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
