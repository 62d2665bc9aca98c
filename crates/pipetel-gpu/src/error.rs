//! Errors of configuration and of starting GPU telemetry.

use std::time::Duration;

/// A configuration value that cannot be used. Each variant names the field (and, when the
/// value came from the environment, the variable) it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `poll_interval` is below the one-second minimum.
    #[error("gpu.poll_interval must be at least 1s (NVML utilisation is itself a 1/6 to 1 s window), got {0:?}")]
    PollIntervalTooShort(Duration),
    /// `nvml_library` is set to an empty path.
    #[error("gpu.nvml_library is empty; leave it unset to use the default library name")]
    EmptyNvmlLibrary,
    /// `rocm_smi_library` is set to an empty path.
    #[error("gpu.rocm_smi_library is empty; leave it unset to look up librocm_smi64 by its usual names")]
    EmptyRocmSmiLibrary,
    /// A device list (`PIPETEL_GPU_DEVICES`, `CUDA_VISIBLE_DEVICES`, `NVIDIA_VISIBLE_DEVICES`)
    /// does not parse.
    #[error("{variable}={value:?} is not valid: {reason}")]
    InvalidDevice {
        /// The variable's name.
        variable: &'static str,
        /// The value found.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An environment variable holds a value that does not parse.
    #[error("{variable}={value:?} is not valid: {reason}")]
    InvalidEnv {
        /// The variable's name.
        variable: &'static str,
        /// The value found.
        value: String,
        /// What was expected.
        reason: &'static str,
    },
}

/// Why GPU telemetry could not start, or why a source could not be opened.
///
/// With [`GpuMode::Auto`](crate::GpuMode::Auto) these are reported as one log line and GPU
/// metrics stay off; with [`GpuMode::On`](crate::GpuMode::On) they are returned to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The configuration asks for a platform this build does not include.
    #[error(
        "gpu.platform = {platform}: not built with {platform} support (enable the `{feature}` feature of pipetel-gpu)"
    )]
    PlatformNotBuilt {
        /// The platform asked for.
        platform: &'static str,
        /// The cargo feature that would include it.
        feature: &'static str,
    },
    /// The management library could not be loaded (not installed, wrong path, wrong file).
    #[error("cannot load GPU management library {library}: {reason}")]
    LibraryNotLoaded {
        /// The name or path that was tried.
        library: String,
        /// The loader's message.
        reason: String,
    },
    /// The library loaded but refused to initialise (e.g. driver not loaded, no permission).
    #[error("GPU management library {library} failed to initialise: {reason}")]
    InitFailed {
        /// The name or path that was loaded.
        library: String,
        /// The library's error.
        reason: String,
    },
    /// With `platform = auto`, every vendor library loaded but none gave a device: one error
    /// per library, in the order tried. (A library that is not installed is left out: then
    /// the other library's error is returned as is.)
    #[error("no usable GPU: {}", join(errors))]
    NoPlatform {
        /// Why each library failed.
        errors: Vec<GpuError>,
    },
    /// The library works but reports no device.
    #[error("no GPU found by {library}")]
    NoDevice {
        /// The name or path that was loaded.
        library: String,
    },
    /// The device selection keeps no device (e.g. `CUDA_VISIBLE_DEVICES=""`).
    #[error("no GPU is visible to this process ({reason})")]
    NoVisibleDevice {
        /// The setting that hid them all.
        reason: String,
    },
    /// `PIPETEL_GPU_DEVICES` names a device the library does not know.
    #[error("{setting}: {entry:?} names no GPU found by {library}")]
    UnknownDevice {
        /// `VARIABLE="value"`.
        setting: String,
        /// The entry naming no device.
        entry: String,
        /// The name or path that was loaded.
        library: String,
    },
    /// Opening the library did not finish in time (some drivers hang in init).
    #[error("GPU management library did not initialise within {0:?}")]
    InitTimeout(Duration),
    /// The poller thread could not be started.
    #[error("cannot start the GPU poller thread: {0}")]
    Thread(String),
    /// A whole sample failed (not one field of one device).
    #[error("GPU sample failed: {0}")]
    Sample(String),
}

fn join(errors: &[GpuError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}
