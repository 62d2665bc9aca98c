//! Every metric name, unit and attribute key this crate emits, in one place.
//!
//! Names follow the OpenTelemetry semantic conventions for hardware (`hw.*`, development
//! status at the time of writing). Where the conventions have no name for what NVML reports,
//! the name stays in the `hw.gpu.*` namespace and the choice is written down here:
//!
//! - [`GPU_CLOCK`] (`hw.gpu.clock`, `Hz`, by [`GPU_CLOCK_TYPE`]): NVML's current clocks.
//! - [`GPU_FAN_SPEED`] (`hw.gpu.fan.speed`, `1`, by [`GPU_FAN_INDEX`]): the conventions'
//!   `hw.fan.speed` is in rpm and describes a fan as its own component; NVML reports a GPU's
//!   fans as a fraction of their maximum speed, so the ratio stays on the GPU.
//! - [`GPU_PCIE_THROUGHPUT`] (`hw.gpu.pcie.throughput`, `By/s`, by [`NETWORK_IO_DIRECTION`]):
//!   NVML gives a rate over a 20 ms window, not the byte total `hw.gpu.io` asks for.
//! - [`GPU_PROCESS_MEMORY_USAGE`] (`pipetel.gpu.process.memory.usage`, `By`): memory used on
//!   a GPU by this process and its descendants; not a semantic-convention metric.
//!
//! AMD devices (ROCm SMI, feature `amd`) report under the same names: busy percent as
//! `hw.gpu.utilization{hw.gpu.task="general"}`, VRAM as the memory metrics, average (or, where
//! only that exists, current socket) power, the energy counter, the edge (or else junction)
//! temperature, ECC counts summed over the RAS blocks, the system clock as
//! `hw.gpu.clock.type="graphics"` and the memory clock as `"memory"`, fan 0 as a ratio of
//! `RSMI_MAX_FAN_SPEED`. [`HW_ID`] is the unique id as `rocm-smi` prints it (`0x…`), else
//! the PCI address.
//!
//! In Prometheus the names become e.g. `hw_gpu_utilization_ratio`,
//! `hw_gpu_memory_usage_bytes`, `hw_energy_joules_total`, `hw_status`: the same through the pull
//! endpoint and through an OpenTelemetry Collector.

/// GPU utilisation, a ratio 0–1 (NVML percent / 100), by [`GPU_TASK`].
pub const GPU_UTILIZATION: &str = "hw.gpu.utilization";
/// GPU memory in use, bytes.
pub const GPU_MEMORY_USAGE: &str = "hw.gpu.memory.usage";
/// GPU memory installed, bytes.
pub const GPU_MEMORY_LIMIT: &str = "hw.gpu.memory.limit";
/// GPU memory in use as a fraction of the installed memory (used / total).
pub const GPU_MEMORY_UTILIZATION: &str = "hw.gpu.memory.utilization";
/// Instantaneous power draw, watts.
pub const POWER: &str = "hw.power";
/// Energy consumed since the driver was loaded, joules (observable counter).
pub const ENERGY: &str = "hw.energy";
/// GPU core temperature, degrees Celsius.
pub const TEMPERATURE: &str = "hw.temperature";
/// ECC memory errors since the counters were last cleared (observable counter), by
/// [`ERROR_TYPE`].
pub const ERRORS: &str = "hw.errors";
/// Current clock frequency, hertz, by [`GPU_CLOCK_TYPE`].
pub const GPU_CLOCK: &str = "hw.gpu.clock";
/// Fan speed as a fraction of its maximum, by [`GPU_FAN_INDEX`].
pub const GPU_FAN_SPEED: &str = "hw.gpu.fan.speed";
/// Device status: 1 for the current [`HW_STATE`], 0 for the others. An up-down counter of unit
/// `1`, as the conventions define it: Prometheus calls it `hw_status` on every route (only
/// gauges of unit `1` get `_ratio`).
pub const STATUS: &str = "hw.status";
/// PCIe throughput, bytes per second, by [`NETWORK_IO_DIRECTION`] (opt-in).
pub const GPU_PCIE_THROUGHPUT: &str = "hw.gpu.pcie.throughput";
/// GPU memory used by this process and its descendants, bytes (opt-in).
pub const GPU_PROCESS_MEMORY_USAGE: &str = "pipetel.gpu.process.memory.usage";

/// Unit of ratios.
pub const UNIT_RATIO: &str = "1";
/// Unit of byte quantities.
pub const UNIT_BYTES: &str = "By";
/// Unit of byte rates.
pub const UNIT_BYTES_PER_SECOND: &str = "By/s";
/// Unit of power.
pub const UNIT_WATTS: &str = "W";
/// Unit of energy.
pub const UNIT_JOULES: &str = "J";
/// Unit of temperature.
pub const UNIT_CELSIUS: &str = "Cel";
/// Unit of frequency.
pub const UNIT_HERTZ: &str = "Hz";
/// Unit of error counts.
pub const UNIT_ERRORS: &str = "{error}";

/// Attribute: a stable identifier of the device (the NVML UUID, `GPU-…`; for AMD the ROCm SMI
/// unique id, `0x…`, or else the PCI address).
pub const HW_ID: &str = "hw.id";
/// Attribute: the device's product name.
pub const HW_NAME: &str = "hw.name";
/// Attribute: the device's vendor.
pub const HW_VENDOR: &str = "hw.vendor";
/// Attribute: the hardware component type; always [`HW_TYPE_GPU`] here.
pub const HW_TYPE: &str = "hw.type";
/// Attribute: the device index as the driver numbers devices.
pub const GPU_INDEX: &str = "hw.gpu.index";
/// Attribute of [`GPU_UTILIZATION`]: which engine (`general`, `encoder`, `decoder`).
pub const GPU_TASK: &str = "hw.gpu.task";
/// Attribute of [`GPU_CLOCK`]: which clock (`graphics`, `sm`, `memory`, `video`).
pub const GPU_CLOCK_TYPE: &str = "hw.gpu.clock.type";
/// Attribute of [`GPU_FAN_SPEED`]: the fan's index on the device.
pub const GPU_FAN_INDEX: &str = "hw.gpu.fan.index";
/// Attribute of [`ERRORS`]: `corrected` or `uncorrected`.
pub const ERROR_TYPE: &str = "error.type";
/// Attribute of [`STATUS`]: `ok` or `failed`.
pub const HW_STATE: &str = "hw.state";
/// Attribute of [`GPU_PCIE_THROUGHPUT`]: `transmit` or `receive`.
pub const NETWORK_IO_DIRECTION: &str = "network.io.direction";

/// Value of [`HW_TYPE`] on every series of this crate.
pub const HW_TYPE_GPU: &str = "gpu";
/// Value of [`HW_VENDOR`] for NVML devices.
pub const VENDOR_NVIDIA: &str = "nvidia";
/// Value of [`HW_VENDOR`] for ROCm SMI devices.
pub const VENDOR_AMD: &str = "amd";

/// Values of [`GPU_TASK`].
pub mod task {
    /// The general (3D / compute) engine.
    pub const GENERAL: &str = "general";
    /// The video encoder.
    pub const ENCODER: &str = "encoder";
    /// The video decoder.
    pub const DECODER: &str = "decoder";
}

/// Values of [`GPU_CLOCK_TYPE`].
pub mod clock {
    /// Graphics clock.
    pub const GRAPHICS: &str = "graphics";
    /// Streaming multiprocessor clock.
    pub const SM: &str = "sm";
    /// Memory clock.
    pub const MEMORY: &str = "memory";
    /// Video encoder / decoder clock.
    pub const VIDEO: &str = "video";
}

/// Values of [`ERROR_TYPE`].
pub mod error_type {
    /// ECC errors the hardware corrected (single-bit).
    pub const CORRECTED: &str = "corrected";
    /// ECC errors the hardware could not correct (double-bit).
    pub const UNCORRECTED: &str = "uncorrected";
}

/// Values of [`HW_STATE`].
pub mod state {
    /// The device answers.
    pub const OK: &str = "ok";
    /// The device fell off the bus or does not answer.
    pub const FAILED: &str = "failed";
}

/// Values of [`NETWORK_IO_DIRECTION`].
pub mod direction {
    /// Bytes sent by the GPU over PCIe.
    pub const TRANSMIT: &str = "transmit";
    /// Bytes received by the GPU over PCIe.
    pub const RECEIVE: &str = "receive";
}
