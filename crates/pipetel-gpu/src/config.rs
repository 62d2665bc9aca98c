//! GPU telemetry configuration: [`GpuConfig`], its environment variables and validation.

use std::path::PathBuf;
use std::time::Duration;

use pipetel_recorders::duration::{self, BareUnit};

use crate::devices::{DeviceSelection, ENV_GPU_DEVICES};
use crate::error::ConfigError;

/// Environment variable: path or file name of the NVML library (default `libnvidia-ml.so.1`).
pub const ENV_NVML_LIBRARY: &str = "PIPETEL_NVML_LIBRARY";
/// Environment variable: path or file name of the ROCm SMI library (default: the first of
/// `librocm_smi64.so.7`, `.so.6`, `.so.5`, `.so.1`, `.so`, `/opt/rocm/lib/librocm_smi64.so`
/// that loads). Read also in builds without the `amd` feature, where it has no effect.
pub const ENV_ROCM_SMI_LIBRARY: &str = "PIPETEL_ROCM_SMI_LIBRARY";
/// Environment variable: `auto`, `on` or `off` ([`GpuMode`]).
pub const ENV_GPU_MODE: &str = "PIPETEL_GPU";
/// Environment variable: poll interval in pipetel's one duration grammar, e.g. `5s`, `1500ms`,
/// `2m` or `2` (a bare number counts seconds).
pub const ENV_GPU_POLL_INTERVAL: &str = "PIPETEL_GPU_POLL_INTERVAL";
/// Environment variable: `auto`, `nvidia` or `amd` ([`GpuPlatform`]).
pub const ENV_GPU_PLATFORM: &str = "PIPETEL_GPU_PLATFORM";
/// Environment variable: `true` / `false`, report PCIe throughput.
pub const ENV_GPU_PCIE_THROUGHPUT: &str = "PIPETEL_GPU_PCIE_THROUGHPUT";
/// Environment variable: `true` / `false`, report GPU memory of this process and its children.
pub const ENV_GPU_PROCESS_MEMORY: &str = "PIPETEL_GPU_PROCESS_MEMORY";

/// Default poll interval.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Shortest poll interval accepted: NVML's utilisation is itself averaged over 1/6 to 1 s.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default time [`GpuMode::On`] waits for the library to initialise.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// `FromStr` for a setting's enum: each keyword, ignoring case and surrounding white space,
/// names a variant; anything else is the `expected` error.
macro_rules! keywords {
    ($type:ty, $expected:literal, [$($keyword:literal => $variant:ident),* $(,)?]) => {
        impl std::str::FromStr for $type {
            type Err = &'static str;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let s = s.trim();
                $(if s.eq_ignore_ascii_case($keyword) {
                    return Ok(Self::$variant);
                })*
                Err($expected)
            }
        }
    };
}

/// Whether GPU telemetry runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GpuMode {
    /// Use a GPU when one is found; otherwise log one info line saying why and carry on.
    #[default]
    Auto,
    /// A GPU is required: failing to open the library or finding no device is an error.
    On,
    /// No GPU telemetry; the library is never loaded.
    Off,
}

keywords!(GpuMode, "expected auto, on or off", [
    "auto" => Auto, "on" => On, "true" => On, "1" => On, "off" => Off, "false" => Off, "0" => Off
]);

/// Which vendor library to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GpuPlatform {
    /// Whichever library gives a device: NVML first, then ROCm SMI in builds with the `amd`
    /// feature.
    #[default]
    Auto,
    /// NVIDIA, through NVML.
    Nvidia,
    /// AMD, through ROCm SMI. Needs the `amd` feature: without it, selecting it is an error.
    Amd,
}

keywords!(GpuPlatform, "expected auto, nvidia or amd", [
    "auto" => Auto, "nvidia" => Nvidia, "nvml" => Nvidia, "amd" => Amd, "rocm" => Amd
]);

/// One `with_FIELD(self, value) -> Self` setter per field.
macro_rules! setters {
    ($($with:ident($field:ident: $ty:ty)),* $(,)?) => {
        $(
            #[doc = concat!("Sets [`GpuConfig::", stringify!($field), "`].")]
            #[must_use]
            pub fn $with(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )*
    };
}

/// GPU telemetry configuration.
///
/// Build it from [`Default`] and the `with_*` setters, or from the environment with
/// [`GpuConfig::from_env`]; [`crate::start`] validates it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuConfig {
    /// Whether GPU telemetry runs (default [`GpuMode::Auto`]).
    pub mode: GpuMode,
    /// Time between polls (default 5 s, minimum 1 s).
    pub poll_interval: Duration,
    /// NVML library to load ([`ENV_NVML_LIBRARY`]); `None` loads `libnvidia-ml.so.1` from
    /// the loader's search path.
    pub nvml_library: Option<PathBuf>,
    /// ROCm SMI library to load ([`ENV_ROCM_SMI_LIBRARY`], feature `amd`); `None` tries the
    /// usual names in order.
    pub rocm_smi_library: Option<PathBuf>,
    /// Report PCIe throughput (each read blocks about 20 ms per direction and device).
    pub pcie_throughput: bool,
    /// Report GPU memory used by this process and its descendants.
    pub process_memory: bool,
    /// Which vendor library to use.
    pub platform: GpuPlatform,
    /// How long [`GpuMode::On`] waits for the library to initialise before failing.
    pub init_timeout: Duration,
    /// Which devices are reported (default: those visible to this process, see
    /// [`crate::devices`]).
    pub devices: DeviceSelection,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            mode: GpuMode::Auto,
            poll_interval: DEFAULT_POLL_INTERVAL,
            nvml_library: None,
            rocm_smi_library: None,
            pcie_throughput: false,
            process_memory: false,
            platform: GpuPlatform::Auto,
            init_timeout: DEFAULT_INIT_TIMEOUT,
            devices: DeviceSelection::Visible,
        }
    }
}

impl GpuConfig {
    /// The defaults overridden by the `PIPETEL_GPU*` (`PIPETEL_GPU_DEVICES` included),
    /// `PIPETEL_NVML_LIBRARY` and `PIPETEL_ROCM_SMI_LIBRARY` variables. `CUDA_VISIBLE_DEVICES`
    /// and `NVIDIA_VISIBLE_DEVICES` are read by [`crate::start`] (see [`DeviceSelection::Visible`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidEnv`] naming the variable and its value when one does not parse.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::default().with_env_from(|name| std::env::var(name).ok())
    }

    /// Applies variables read through `get` (the environment in [`GpuConfig::from_env`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidEnv`] naming the variable and its value when one does not parse.
    pub fn with_env_from(mut self, get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let invalid = |variable: &'static str, value: &str, reason: &'static str| ConfigError::InvalidEnv {
            variable,
            value: value.to_owned(),
            reason,
        };
        if let Some(v) = get(ENV_GPU_MODE) {
            self.mode = v.parse().map_err(|r| invalid(ENV_GPU_MODE, &v, r))?;
        }
        if let Some(v) = get(ENV_GPU_POLL_INTERVAL) {
            self.poll_interval = duration::parse(&v, BareUnit::Seconds).map_err(|_| {
                invalid(
                    ENV_GPU_POLL_INTERVAL,
                    &v,
                    "expected a duration such as 5s, 1500ms or 2m, or a bare number of seconds",
                )
            })?;
        }
        if let Some(v) = get(ENV_GPU_PLATFORM) {
            self.platform = v.parse().map_err(|r| invalid(ENV_GPU_PLATFORM, &v, r))?;
        }
        if let Some(v) = get(ENV_NVML_LIBRARY) {
            // An empty variable means "unset", as shells make it easy to export one by mistake.
            self.nvml_library = (!v.is_empty()).then(|| PathBuf::from(v));
        }
        if let Some(v) = get(ENV_ROCM_SMI_LIBRARY) {
            self.rocm_smi_library = (!v.is_empty()).then(|| PathBuf::from(v));
        }
        if let Some(v) = get(ENV_GPU_PCIE_THROUGHPUT) {
            self.pcie_throughput =
                parse_bool(&v).ok_or_else(|| invalid(ENV_GPU_PCIE_THROUGHPUT, &v, "expected true or false"))?;
        }
        if let Some(v) = get(ENV_GPU_PROCESS_MEMORY) {
            self.process_memory =
                parse_bool(&v).ok_or_else(|| invalid(ENV_GPU_PROCESS_MEMORY, &v, "expected true or false"))?;
        }
        // Empty means unset here too; `none` hides every device.
        if let Some(v) = get(ENV_GPU_DEVICES).filter(|v| !v.trim().is_empty()) {
            self.devices = v.parse().map_err(|reason| ConfigError::InvalidDevice {
                variable: ENV_GPU_DEVICES,
                value: v.clone(),
                reason,
            })?;
        }
        Ok(self)
    }

    setters! {
        with_mode(mode: GpuMode),
        with_poll_interval(poll_interval: Duration),
        with_pcie_throughput(pcie_throughput: bool),
        with_process_memory(process_memory: bool),
        with_platform(platform: GpuPlatform),
        with_devices(devices: DeviceSelection),
        with_init_timeout(init_timeout: Duration),
    }

    /// Sets [`GpuConfig::nvml_library`].
    #[must_use]
    pub fn with_nvml_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.nvml_library = Some(path.into());
        self
    }

    /// Sets [`GpuConfig::rocm_smi_library`].
    #[must_use]
    pub fn with_rocm_smi_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.rocm_smi_library = Some(path.into());
        self
    }

    /// Checks the values that do not depend on the machine.
    ///
    /// # Errors
    ///
    /// [`ConfigError::PollIntervalTooShort`] below [`MIN_POLL_INTERVAL`];
    /// [`ConfigError::EmptyNvmlLibrary`] / [`ConfigError::EmptyRocmSmiLibrary`] for `Some("")`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.poll_interval < MIN_POLL_INTERVAL {
            return Err(ConfigError::PollIntervalTooShort(self.poll_interval));
        }
        let empty = |path: &Option<PathBuf>| path.as_ref().is_some_and(|p| p.as_os_str().is_empty());
        if empty(&self.nvml_library) {
            return Err(ConfigError::EmptyNvmlLibrary);
        }
        if empty(&self.rocm_smi_library) {
            return Err(ConfigError::EmptyRocmSmiLibrary);
        }
        Ok(())
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_are_auto_five_seconds_and_valid() {
        let c = GpuConfig::default();
        assert_eq!(c.mode, GpuMode::Auto);
        assert_eq!(c.poll_interval, Duration::from_secs(5));
        assert_eq!(c.platform, GpuPlatform::Auto);
        assert!(!c.pcie_throughput && !c.process_memory);
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn poll_interval_below_one_second_is_an_error_naming_the_field() {
        let c = GpuConfig::default().with_poll_interval(Duration::from_millis(999));
        let err = c.validate().expect_err("999ms must be rejected");
        assert_eq!(err, ConfigError::PollIntervalTooShort(Duration::from_millis(999)));
        assert!(err.to_string().contains("gpu.poll_interval"), "{err}");
        let ok = GpuConfig::default().with_poll_interval(Duration::from_secs(1));
        assert_eq!(ok.validate(), Ok(()));
    }

    #[test]
    fn empty_library_path_is_an_error_naming_the_field() {
        let err = GpuConfig::default().with_nvml_library("").validate().expect_err("empty path must be rejected");
        assert!(err.to_string().contains("gpu.nvml_library"), "{err}");
        let err = GpuConfig::default().with_rocm_smi_library("").validate().expect_err("empty path must be rejected");
        assert!(err.to_string().contains("gpu.rocm_smi_library"), "{err}");
    }

    #[test]
    fn env_overrides_defaults() -> Result<(), ConfigError> {
        let c = GpuConfig::default().with_env_from(env(&[
            (ENV_GPU_MODE, "on"),
            (ENV_GPU_POLL_INTERVAL, "1500ms"),
            (ENV_GPU_PLATFORM, "nvidia"),
            (ENV_NVML_LIBRARY, "/opt/nvml/libnvidia-ml.so.1"),
            (ENV_ROCM_SMI_LIBRARY, "/opt/rocm/lib/librocm_smi64.so"),
            (ENV_GPU_PCIE_THROUGHPUT, "true"),
            (ENV_GPU_PROCESS_MEMORY, "1"),
        ]))?;
        assert_eq!(c.mode, GpuMode::On);
        assert_eq!(c.poll_interval, Duration::from_millis(1500));
        assert_eq!(c.platform, GpuPlatform::Nvidia);
        assert_eq!(c.nvml_library.as_deref(), Some(std::path::Path::new("/opt/nvml/libnvidia-ml.so.1")));
        assert_eq!(c.rocm_smi_library.as_deref(), Some(std::path::Path::new("/opt/rocm/lib/librocm_smi64.so")));
        assert!(c.pcie_throughput && c.process_memory);
        Ok(())
    }

    #[test]
    fn gpu_devices_variable_selects_devices_and_bad_values_name_it() -> Result<(), ConfigError> {
        let c = GpuConfig::default().with_env_from(env(&[(ENV_GPU_DEVICES, "all")]))?;
        assert_eq!(c.devices, DeviceSelection::All);
        let c = GpuConfig::default().with_env_from(env(&[(ENV_GPU_DEVICES, " ")]))?;
        assert_eq!(c.devices, DeviceSelection::Visible, "empty counts as unset");
        let c = GpuConfig::default().with_env_from(env(&[(ENV_GPU_DEVICES, "0,GPU-ab")]))?;
        assert!(matches!(c.devices, DeviceSelection::Only(_)));
        let err = GpuConfig::default().with_env_from(env(&[(ENV_GPU_DEVICES, "gpu0")])).expect_err("not a device");
        assert!(err.to_string().contains("PIPETEL_GPU_DEVICES=\"gpu0\""), "{err}");
        Ok(())
    }

    #[test]
    fn bad_env_value_names_variable_and_value() {
        let err =
            GpuConfig::default().with_env_from(env(&[(ENV_GPU_POLL_INTERVAL, "soon")])).expect_err("must not parse");
        let text = err.to_string();
        assert!(text.contains(ENV_GPU_POLL_INTERVAL) && text.contains("soon"), "{text}");
        let err = GpuConfig::default().with_env_from(env(&[(ENV_GPU_MODE, "maybe")])).expect_err("must not parse");
        assert!(err.to_string().contains("PIPETEL_GPU=\"maybe\""), "{err}");
    }

    #[test]
    fn poll_interval_takes_the_shared_duration_grammar_with_bare_seconds() -> Result<(), ConfigError> {
        let interval =
            |v: &str| GpuConfig::default().with_env_from(env(&[(ENV_GPU_POLL_INTERVAL, v)])).map(|c| c.poll_interval);
        assert_eq!(interval("5s")?, Duration::from_secs(5));
        assert_eq!(interval("2")?, Duration::from_secs(2));
        assert_eq!(interval("2.5")?, Duration::from_millis(2500));
        assert_eq!(interval("250ms")?, Duration::from_millis(250));
        assert_eq!(interval("1m")?, Duration::from_secs(60));
        assert_eq!(interval("1h")?, Duration::from_secs(3600));
        for bad in ["-1", "", "soon"] {
            assert!(interval(bad).is_err(), "{bad:?}");
        }
        Ok(())
    }

    #[test]
    fn modes_and_platforms_parse_their_keywords() {
        for (text, mode) in
            [("auto", GpuMode::Auto), (" ON ", GpuMode::On), ("1", GpuMode::On), ("False", GpuMode::Off)]
        {
            assert_eq!(text.parse(), Ok(mode), "{text}");
        }
        assert_eq!("maybe".parse::<GpuMode>(), Err("expected auto, on or off"));
        for (text, platform) in [("Auto", GpuPlatform::Auto), ("nvml", GpuPlatform::Nvidia), ("ROCM", GpuPlatform::Amd)]
        {
            assert_eq!(text.parse(), Ok(platform), "{text}");
        }
        assert_eq!("intel".parse::<GpuPlatform>(), Err("expected auto, nvidia or amd"));
    }
}
